/* The process's DPDK port; see cx_dpdk_port.h and cx_dpdk.h (settings). */
#define _GNU_SOURCE
#include "transport/dpdk/cx_dpdk_port.h"

#include "common/cx_env.h"
#include "common/cx_error.h"
#include "transport/cx_txq.h"
#include "transport/dpdk/cx_dpdk_conf.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_pause.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NB_MBUFS 16383u
#define MBUF_CACHE 256u
#define RING_DESC 1024u
#define BURST 32u
#define MAX_ARGS 64
#define START_WAIT_MS 10000
#define ARP_RETRY_NS 100000000ull
#define WATCH_MIN_NS 50000ull   /* watcher poll period right after traffic */
#define WATCH_MAX_NS 1000000ull /* ... doubling up to this while idle */
#define WATCH_IDLE_NS 100000000ull /* the round when no link is armed: keepalives only */
#define WATCH_SPIN_US 100       /* CONFLUX_DPDK_WATCH_SPIN_US default: polls without pause ... */
#define WATCH_SPIN_GAP_NS 1000ull /* ... with the lock released this long between polls */
#define WATCH_SLACK_NS 5000ul   /* the watcher thread's timer slack */

static struct cx_dpdk_port g_port;
static int g_state; /* 0 = not set up, 1 = running, -errno = setup failed, 2 = shut down */
static char g_fail[256];
static pthread_mutex_t g_setup_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t cx_dpdk_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int has_opt(char **argv, int argc, const char *a, const char *b)
{
    for (int i = 0; i < argc; i++)
        if ((a && !strncmp(argv[i], a, strlen(a))) || (b && !strncmp(argv[i], b, strlen(b))))
            return 1;
    return 0;
}

/* rte_eal_init pins the calling thread to its lcore's CPU; a library must not change the
 * affinity of the application's thread, so it is saved and restored around the call. */
static int eal_start(const char *args)
{
    static char buf[4096];
    static char *argv[MAX_ARGS + 8];
    static char prefix[64];
    if (!args || !*args)
        return cx_err_set(EINVAL, "dpdk: no EAL arguments (set CONFLUX_DPDK_ARGS, e.g. "
                                  "\"--no-huge --no-pci -m 256 --vdev=net_memif0,...\")");
    if (strlen(args) >= sizeof buf)
        return cx_err_set(EINVAL, "dpdk: EAL arguments longer than %zu bytes", sizeof buf - 1);
    snprintf(buf, sizeof buf, "%s", args);
    int argc = 0;
    argv[argc++] = "conflux";
    for (char *save = NULL, *t = strtok_r(buf, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
        if (argc >= MAX_ARGS)
            return cx_err_set(EINVAL, "dpdk: more than %d EAL arguments", MAX_ARGS - 1);
        argv[argc++] = t;
    }
    /* defaults a shared, multi-process machine needs: a private runtime directory, no
     * telemetry socket, one lcore (the driver polls from the application's threads) */
    if (!has_opt(argv, argc, "--file-prefix", NULL)) {
        snprintf(prefix, sizeof prefix, "--file-prefix=conflux-%d", (int)getpid());
        argv[argc++] = prefix;
    }
    if (!has_opt(argv, argc, "--no-telemetry", "--telemetry"))
        argv[argc++] = "--no-telemetry";
    if (!has_opt(argv, argc, "--log-level", NULL))
        argv[argc++] = "--log-level=warning"; /* start-up chatter off; errors still show */
    if (!has_opt(argv, argc, "-l", "--lcores") && !has_opt(argv, argc, "-c", NULL)) {
        argv[argc++] = "-l";
        argv[argc++] = "0";
    }
    argv[argc] = NULL;
    cpu_set_t saved;
    int have_aff = sched_getaffinity(0, sizeof saved, &saved) == 0;
    int rc = rte_eal_init(argc, argv);
    int err = rte_errno;
    if (have_aff)
        sched_setaffinity(0, sizeof saved, &saved);
    if (rc < 0 && err == EALREADY)
        return 0; /* the application runs DPDK itself: use its EAL (and its arguments) */
    if (rc < 0)
        return cx_err_set(ENODEV, "dpdk: EAL init failed: %s (arguments: %s)", rte_strerror(err),
                          args);
    return 0;
}

static int find_port(const char *device, uint16_t *out)
{
    if (device && *device) {
        if (rte_eth_dev_get_port_by_name(device, out) != 0)
            return cx_err_set(ENODEV, "dpdk: no port named '%s' (CONFLUX_DPDK_DEVICE, or the "
                                      "device plugin's PCI address)", device);
        return 0;
    }
    uint16_t pid;
    RTE_ETH_FOREACH_DEV(pid) {
        *out = pid;
        return 0;
    }
    return cx_err_set(ENODEV, "dpdk: the EAL found no port (give a --vdev or a PCI device)");
}

/* A vdev's mbuf pool, packed: without hugepages (--no-huge), an IOVA-contiguous pool (what
 * rte_pktmbuf_pool_create asks for) gives each 2.3 KB mbuf a 4 KiB page of its own, so the
 * pool spans far more memory than populated x object size. net_af_xdp registers only that
 * product as its UMEM, and the mbufs past it go silently unused by the kernel (the link
 * stalls after some 150 MB). A vdev needs no physical contiguity: pack the objects. */
static struct rte_mempool *packed_pool_create(const char *name, uint16_t room, int socket)
{
    struct rte_pktmbuf_pool_private priv = {.mbuf_data_room_size = room, .mbuf_priv_size = 0};
    struct rte_mempool *mp =
        rte_mempool_create_empty(name, NB_MBUFS, sizeof(struct rte_mbuf) + room, MBUF_CACHE,
                                 sizeof priv, socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
    if (!mp)
        return NULL;
    if (rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL) != 0)
        goto fail;
    rte_pktmbuf_pool_init(mp, &priv);
    if (rte_mempool_populate_default(mp) < 0)
        goto fail;
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
    return mp;
fail:
    rte_mempool_free(mp);
    rte_errno = ENOMEM;
    return NULL;
}

static int port_start(struct cx_dpdk_port *p, unsigned mtu)
{
    uint16_t pid = p->port_id;
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    int rc = rte_eth_dev_configure(pid, 1, 1, &conf);
    if (rc < 0)
        return cx_err_set(ENODEV, "dpdk: configuring port %u: %s", pid, rte_strerror(-rc));
    if (mtu && (rc = rte_eth_dev_set_mtu(pid, (uint16_t)mtu)) < 0)
        return cx_err_set(EINVAL, "dpdk: port %u refuses MTU %u: %s", pid, mtu, rte_strerror(-rc));
    uint16_t m = 1500;
    rte_eth_dev_get_mtu(pid, &m);
    if (m < 576)
        return cx_err_set(EINVAL, "dpdk: port %u has an MTU of %u (576 at least)", pid, m);
    p->mtu = m;
    p->max_payload = m - CX_DPDK_IP_LEN - CX_DPDK_UDP_LEN - CX_FRAME_HDR_SIZE;
    uint16_t nrx = RING_DESC, ntx = RING_DESC;
    rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrx, &ntx);
    int socket = rte_eth_dev_socket_id(pid);
    if (socket < 0)
        socket = 0;
    unsigned room = RTE_MBUF_DEFAULT_BUF_SIZE;
    if (m + CX_DPDK_ETH_LEN + 4 + RTE_PKTMBUF_HEADROOM > room)
        room = m + CX_DPDK_ETH_LEN + 4 + RTE_PKTMBUF_HEADROOM;
    char name[32];
    snprintf(name, sizeof name, "cx_dpdk_%u", pid);
    char dev[RTE_ETH_NAME_MAX_LEN] = "";
    rte_eth_dev_get_name_by_port(pid, dev);
    bool vdev = strncmp(dev, "net_", 4) == 0;
    p->pool = vdev ? packed_pool_create(name, (uint16_t)room, socket)
                   : rte_pktmbuf_pool_create(name, NB_MBUFS, MBUF_CACHE, 0, (uint16_t)room, socket);
    if (!p->pool)
        return cx_err_set(ENOMEM, "dpdk: mbuf pool of %u x %u bytes: %s (raise -m)", NB_MBUFS,
                          room, rte_strerror(rte_errno));
    /* net_af_xdp registers the pool's memory as the socket's UMEM from its first chunk, for
     * populated x object size bytes: a pool in several chunks would put mbufs outside it,
     * and the kernel would drop their fill-ring entries without a word. */
    if (strncmp(dev, "net_af_xdp", 10) == 0 && p->pool->nb_mem_chunks != 1)
        return cx_err_set(ENOMEM, "dpdk: port %s needs its mbuf pool in one chunk (it has %u): "
                          "give the EAL more memory (-m)", dev, p->pool->nb_mem_chunks);
    if ((rc = rte_eth_rx_queue_setup(pid, 0, nrx, (unsigned)socket, NULL, p->pool)) < 0 ||
        (rc = rte_eth_tx_queue_setup(pid, 0, ntx, (unsigned)socket, NULL)) < 0)
        return cx_err_set(ENODEV, "dpdk: queue setup on port %u: %s", pid, rte_strerror(-rc));
    /* a memif client fails to start while its server is not there yet: retry a while */
    uint64_t t0 = cx_dpdk_now_ns();
    while ((rc = rte_eth_dev_start(pid)) < 0) {
        if (cx_dpdk_now_ns() - t0 > START_WAIT_MS * 1000000ull)
            return cx_err_set(ENODEV, "dpdk: port %u would not start in %d ms: %s", pid,
                              START_WAIT_MS, rte_strerror(-rc));
        rte_eth_dev_stop(pid);
        usleep(200000);
    }
    struct rte_ether_addr mac;
    rte_eth_macaddr_get(pid, &mac);
    memcpy(p->mac, mac.addr_bytes, 6);
    return 0;
}

static void *watcher_main(void *arg);

/* The EAL leaves its runtime directory (/var/run/dpdk/<file-prefix>: config, sockets) behind
 * when the process ends; it is private to this process, so it goes at exit or shutdown. */
static char g_runtime_dir[512];

static void remove_runtime_dir(void)
{
    if (!g_runtime_dir[0])
        return;
    DIR *d = opendir(g_runtime_dir);
    if (d) {
        char f[1024];
        for (struct dirent *e; (e = readdir(d));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(f, sizeof f, "%s/%s", g_runtime_dir, e->d_name);
                unlink(f);
            }
        closedir(d);
    }
    rmdir(g_runtime_dir);
    g_runtime_dir[0] = 0;
}

/* The settings (cx_dpdk_conf.h); a network-status file Multus has not filled yet is waited
 * for as long as a memif server is. */
static int plan_locked(const struct cx_dpdk_config *c, struct cx_dpdk_plan *pl)
{
    int rc;
    uint64_t t0 = cx_dpdk_now_ns();
    while ((rc = cx_dpdk_plan_make(c, pl)) == -EAGAIN &&
           cx_dpdk_now_ns() - t0 < START_WAIT_MS * 1000000ull)
        usleep(200000);
    return rc;
}

static int setup_locked(const struct cx_dpdk_config *c)
{
    struct cx_dpdk_port *p = &g_port;
    static struct cx_dpdk_plan pl; /* 4 KiB of arguments: not on the caller's stack */
    int rc = plan_locked(c, &pl);
    if (rc < 0)
        return rc;
    uint32_t ip = 0;
    if (pl.ip[0]) {
        struct in_addr a;
        if (inet_pton(AF_INET, pl.ip, &a) != 1)
            return cx_err_set(EINVAL, "dpdk: '%s' is not an IPv4 address", pl.ip);
        ip = ntohl(a.s_addr);
    }
    unsigned mtu = pl.mtu, tmo = pl.peer_timeout_ms;
    const char *s;
    unsigned spin = WATCH_SPIN_US;
    if ((s = getenv("CONFLUX_DPDK_WATCH_SPIN_US")) && *s) {
        uint64_t v;
        if (cx_env_parse_u64("CONFLUX_DPDK_WATCH_SPIN_US", s, 0, 1000000, &v) < 0)
            return cx_err_wrap(-EINVAL, "dpdk");
        spin = (unsigned)v;
    }
    if ((rc = eal_start(pl.eal_args)) < 0)
        return rc;
    snprintf(g_runtime_dir, sizeof g_runtime_dir, "%s", rte_eal_get_runtime_dir());
    atexit(remove_runtime_dir);
    if ((rc = find_port(pl.device, &p->port_id)) < 0)
        return rc;
    if ((rc = port_start(p, mtu)) < 0)
        return rc;
    p->bound = calloc(65536, sizeof *p->bound);
    if (!p->bound)
        return cx_err_set(ENOMEM, "dpdk: out of memory");
    p->ip = ip;
    p->peer_timeout_ms = tmo ? tmo : 3000;
    p->next_ephemeral = 49152;
    p->spin_ns = spin * 1000ull;
    /* adaptive: a link's owner that finds the lock taken by the spinning watcher (held for
     * one empty RX burst) spins a moment for it instead of sleeping in the kernel */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&p->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->wake, &ca);
    pthread_condattr_destroy(&ca);
    if ((rc = pthread_create(&p->watcher, NULL, watcher_main, p)) != 0)
        return cx_err_set(rc, "dpdk: starting the watcher thread: %s", strerror(rc));
    p->watcher_started = 1;
    pthread_setname_np(p->watcher, "cx-dpdk-watch");
    pthread_mutex_lock(&p->lock);
    cx_dpdk_port_announce_locked(p);
    pthread_mutex_unlock(&p->lock);
    snprintf(p->desc, sizeof p->desc, "%02x:%02x:%02x:%02x:%02x:%02x", p->mac[0], p->mac[1],
             p->mac[2], p->mac[3], p->mac[4], p->mac[5]);
    return 0;
}

int cx_dpdk_setup(const struct cx_dpdk_config *c)
{
    pthread_mutex_lock(&g_setup_lock);
    int rc;
    if (g_state == 1 || g_state == 2) {
        rc = cx_err_set(EALREADY, "dpdk: already %s in this process",
                        g_state == 1 ? "set up" : "shut down");
    } else if (g_state < 0) {
        rc = cx_err_set(-g_state, "%s", g_fail); /* the EAL cannot be retried */
    } else if ((rc = setup_locked(c)) < 0) {
        __atomic_store_n(&g_state, rc, __ATOMIC_RELEASE);
        snprintf(g_fail, sizeof g_fail, "%s", cx_errmsg());
    } else {
        __atomic_store_n(&g_state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_setup_lock);
    return rc;
}

int cx_dpdk_port_get(struct cx_dpdk_port **out)
{
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) != 1) {
        int rc = cx_dpdk_setup(NULL);
        if (rc < 0 && rc != -EALREADY)
            return rc;
        if (g_state != 1)
            return cx_err_set(ESHUTDOWN, "dpdk: the driver was shut down in this process");
    }
    *out = &g_port;
    return 0;
}

void cx_dpdk_shutdown(void)
{
    pthread_mutex_lock(&g_setup_lock);
    if (g_state == 1) {
        struct cx_dpdk_port *p = &g_port;
        pthread_mutex_lock(&p->lock);
        p->stop = 1;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->lock);
        if (p->watcher_started)
            pthread_join(p->watcher, NULL);
        rte_eth_dev_stop(p->port_id);
        rte_eth_dev_close(p->port_id);
        rte_eal_cleanup();
        remove_runtime_dir();
        free(p->bound);
        p->bound = NULL;
        __atomic_store_n(&g_state, 2, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_setup_lock);
}

void cx_dpdk_stats(struct cx_dpdk_stats *out)
{
    memset(out, 0, sizeof *out);
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) != 1)
        return;
    pthread_mutex_lock(&g_port.lock);
    *out = g_port.st;
    pthread_mutex_unlock(&g_port.lock);
}

const char *cx_dpdk_port_desc(void)
{
    return __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == 1 ? g_port.desc : "";
}

/* ---- bindings ---- */

int cx_dpdk_port_bind_locked(struct cx_dpdk_port *p, uint16_t want, struct cx_dpdk_ep *ep)
{
    if (want) {
        if (p->bound[want])
            return cx_err_set(EADDRINUSE, "dpdk: UDP port %u is in use", want);
    } else {
        for (unsigned i = 0; i < 16384 && !want; i++) {
            uint16_t c = p->next_ephemeral;
            p->next_ephemeral = c == 65535 ? 49152 : (uint16_t)(c + 1);
            if (!p->bound[c])
                want = c;
        }
        if (!want)
            return cx_err_set(EADDRINUSE, "dpdk: no free ephemeral UDP port");
    }
    ep->lport = want;
    p->bound[want] = ep;
    ep->next = p->eps;
    p->eps = ep;
    return 0;
}

void cx_dpdk_port_unbind_locked(struct cx_dpdk_port *p, struct cx_dpdk_ep *ep)
{
    if (p->bound[ep->lport] == ep)
        p->bound[ep->lport] = NULL;
    for (struct cx_dpdk_ep **q = &p->eps; *q; q = &(*q)->next)
        if (*q == ep) {
            *q = ep->next;
            break;
        }
}

/* ---- transmit ---- */

struct rte_mbuf *cx_dpdk_port_frame(struct cx_dpdk_port *p, uint16_t src_port,
                                    const struct cx_dpdk_addr *dst, const struct cx_frame_hdr *h,
                                    const struct iovec *iov, int iovcnt, size_t len)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
    if (!m) {
        __atomic_fetch_add(&p->st.tx_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    size_t total = CX_DPDK_HDRS_LEN + CX_FRAME_HDR_SIZE + len;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)total);
    if (!d) { /* cannot happen: the pool's rooms hold an MTU-sized frame */
        rte_pktmbuf_free(m);
        __atomic_fetch_add(&p->st.tx_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    struct cx_dpdk_addr src = {.ip = p->ip, .port = src_port};
    memcpy(src.mac, p->mac, 6);
    cx_dpdk_put_udp(d, &src, dst, CX_FRAME_HDR_SIZE + len);
    cx_frame_encode(h, d + CX_DPDK_HDRS_LEN);
    if (len)
        cx_iov_copy(d + CX_DPDK_HDRS_LEN + CX_FRAME_HDR_SIZE, iov, iovcnt, 0, len);
    return m;
}

unsigned cx_dpdk_port_tx_locked(struct cx_dpdk_port *p, struct rte_mbuf **m, unsigned n)
{
    unsigned sent = rte_eth_tx_burst(p->port_id, 0, m, (uint16_t)n);
    p->st.tx_frames += sent;
    return sent;
}

void cx_dpdk_port_ctrl_locked(struct cx_dpdk_port *p, uint16_t src_port,
                              const struct cx_dpdk_addr *dst, uint8_t op, uint32_t nonce)
{
    uint8_t body[CX_DPDK_CTRL_LEN];
    struct cx_dpdk_ctrl c = {.op = op, .nonce = nonce, .mtu = (uint32_t)p->max_payload};
    cx_dpdk_ctrl_encode(&c, body);
    struct cx_frame_hdr h = {.type = CX_FRAME_CTRL, .format = CX_DPDK_CTRL_FORMAT,
                             .length = CX_DPDK_CTRL_LEN, .msg_length = CX_DPDK_CTRL_LEN};
    struct iovec v = {body, sizeof body};
    struct rte_mbuf *m = cx_dpdk_port_frame(p, src_port, dst, &h, &v, 1, sizeof body);
    if (m && cx_dpdk_port_tx_locked(p, &m, 1) == 0) {
        rte_pktmbuf_free(m);
        __atomic_fetch_add(&p->st.tx_dropped, 1, __ATOMIC_RELAXED);
    }
}

/* ---- ARP ---- */

static int arp_slot(struct cx_dpdk_port *p, uint32_t ip)
{
    for (int i = 0; i < CX_DPDK_ARP_SLOTS; i++)
        if (p->arp[i].ip == ip)
            return i;
    return -1;
}

void cx_dpdk_port_learn_locked(struct cx_dpdk_port *p, uint32_t ip, const uint8_t mac[6])
{
    if (!ip || ip == p->ip)
        return;
    int i = arp_slot(p, ip);
    if (i < 0) {
        i = (int)(p->arp_next++ % CX_DPDK_ARP_SLOTS);
        p->arp[i].ip = ip;
        p->arp[i].asked_ns = 0;
    }
    memcpy(p->arp[i].mac, mac, 6);
    p->arp[i].known = 1;
}

static void arp_send(struct cx_dpdk_port *p, uint16_t op, const uint8_t tha[6], uint32_t tpa)
{
    struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
    if (!m)
        return;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, CX_DPDK_ARP_FRAME_LEN);
    cx_dpdk_put_arp(d, op, p->mac, p->ip, tha, tpa);
    if (cx_dpdk_port_tx_locked(p, &m, 1) == 0)
        rte_pktmbuf_free(m);
    else if (op == 1)
        p->st.arp_requests++;
    else
        p->st.arp_replies++;
}

int cx_dpdk_port_arp_locked(struct cx_dpdk_port *p, uint32_t ip, uint8_t mac[6])
{
    if (ip == p->ip) {
        memcpy(mac, p->mac, 6);
        return 0;
    }
    int i = arp_slot(p, ip);
    if (i >= 0 && p->arp[i].known) {
        memcpy(mac, p->arp[i].mac, 6);
        return 0;
    }
    if (i < 0) {
        i = (int)(p->arp_next++ % CX_DPDK_ARP_SLOTS);
        memset(&p->arp[i], 0, sizeof p->arp[i]);
        p->arp[i].ip = ip;
    }
    uint64_t now = cx_dpdk_now_ns();
    if (now - p->arp[i].asked_ns > ARP_RETRY_NS) {
        static const uint8_t zero[6];
        p->arp[i].asked_ns = now;
        arp_send(p, 1, zero, ip);
    }
    return -EAGAIN;
}

static void on_arp(struct cx_dpdk_port *p, const struct cx_dpdk_rx *rx)
{
    if (!p->ip)
        return;
    /* any ARP refreshes an entry we have (a peer restarted with a new MAC, RFC 826) */
    int i = arp_slot(p, rx->src.ip);
    if (i >= 0 && p->arp[i].known)
        memcpy(p->arp[i].mac, rx->src.mac, 6);
    if (rx->dst_ip != p->ip)
        return;
    cx_dpdk_port_learn_locked(p, rx->src.ip, rx->src.mac);
    if (rx->arp_op == 1)
        arp_send(p, 2, rx->src.mac, rx->src.ip);
}

void cx_dpdk_port_forget_locked(struct cx_dpdk_port *p, uint32_t ip)
{
    int i = arp_slot(p, ip);
    if (i >= 0)
        p->arp[i].known = 0;
}

void cx_dpdk_port_announce_locked(struct cx_dpdk_port *p)
{
    static const uint8_t zero[6];
    if (p->ip)
        arp_send(p, 1, zero, p->ip); /* gratuitous: neighbours refresh our MAC */
}

/* ---- receive ---- */

static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static void on_frame(struct cx_dpdk_port *p, struct rte_mbuf *m)
{
    if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) < 0)
        goto drop;
    const uint8_t *f = rte_pktmbuf_mtod(m, const uint8_t *);
    struct cx_dpdk_rx rx;
    if (cx_dpdk_parse(f, rte_pktmbuf_data_len(m), &rx) < 0)
        goto drop;
    int to_us = !memcmp(rx.dst_mac, p->mac, 6);
    /* a packet socket also sees what we send: drop our own frames unless addressed to us */
    if (!to_us && (memcmp(rx.dst_mac, bcast, 6) || !memcmp(rx.src.mac, p->mac, 6)))
        goto drop;
    if (rx.kind == CX_DPDK_ARP) {
        on_arp(p, &rx);
        rte_pktmbuf_free(m);
        return;
    }
    if (rx.kind != CX_DPDK_UDP || !to_us || !p->ip || rx.dst_ip != p->ip)
        goto drop;
    if (cx_dpdk_on_udp_locked(p, p->bound[rx.dst_port], &rx, f + rx.off, m))
        return;
    rte_pktmbuf_free(m);
    return;
drop:
    p->st.rx_dropped++;
    rte_pktmbuf_free(m);
}

int cx_dpdk_port_poll_locked(struct cx_dpdk_port *p)
{
    struct rte_mbuf *m[BURST];
    uint16_t n = rte_eth_rx_burst(p->port_id, 0, m, BURST);
    p->st.rx_frames += n;
    for (uint16_t i = 0; i < n; i++) {
        if (i + 1 < n)
            rte_prefetch0(rte_pktmbuf_mtod(m[i + 1], void *));
        on_frame(p, m[i]);
    }
    return n;
}

/* ---- watcher ---- */

/* None of the PMDs this driver runs on here has RX interrupts (rte_eth_dev_rx_intr_*: memif
 * keeps a client's RX ring masked and has no rx_queue_intr_enable; af_packet and af_xdp
 * have none either), so a blocked link's wake-up comes from the watcher's polling. Right
 * after a link arms, its owner most likely waits for the answer to what it just sent, so
 * the watcher polls without pause for spin_ns (CONFLUX_DPDK_WATCH_SPIN_US): a frame then
 * wakes the owner within microseconds. Past that, naps from 50 us doubling to 1 ms keep an
 * idle port cheap; a new arm cuts a nap short. */

void cx_dpdk_port_armed_locked(struct cx_dpdk_port *p)
{
    p->armed++;
    p->armed_ns = cx_dpdk_now_ns();
    if (p->napping || p->armed == 1)
        pthread_cond_signal(&p->wake);
}

/* Naps until ns from now (CLOCK_MONOTONIC: the condition variable's clock) or a signal. */
static void nap_locked(struct cx_dpdk_port *p, uint64_t ns)
{
    uint64_t t = cx_dpdk_now_ns() + ns;
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    p->napping = 1;
    pthread_cond_timedwait(&p->wake, &p->lock, &ts);
    p->napping = 0;
}

static void *watcher_main(void *arg)
{
    struct cx_dpdk_port *p = arg;
    uint64_t period = WATCH_MIN_NS, watched = 0;
    /* a 50 us nap is 50 us, not 50 us plus the default 50 us of timer slack */
    prctl(PR_SET_TIMERSLACK, WATCH_SLACK_NS);
    pthread_mutex_lock(&p->lock);
    while (!p->stop) {
        int got = 0, n;
        do /* drain: keeps every link's last_rx fresh even if its owner is busy elsewhere */
            got += n = cx_dpdk_port_poll_locked(p);
        while (n == BURST && got < 8 * (int)BURST);
        uint64_t now = cx_dpdk_now_ns();
        if (now - watched >= WATCH_MIN_NS) { /* keepalives: not on every spin */
            cx_dpdk_on_watch_locked(p, now);
            watched = now;
        }
        if (!p->armed) { /* nobody blocks on us: a slow round for keepalives is enough */
            nap_locked(p, WATCH_IDLE_NS);
            period = WATCH_MIN_NS;
            continue;
        }
        if (now - p->armed_ns < p->spin_ns) {
            /* spinning: the lock is free between polls, for the links' owners */
            pthread_mutex_unlock(&p->lock);
            for (uint64_t t = cx_dpdk_now_ns(); cx_dpdk_now_ns() - t < WATCH_SPIN_GAP_NS;)
                rte_pause();
            pthread_mutex_lock(&p->lock);
            period = WATCH_MIN_NS;
            continue;
        }
        period = got ? WATCH_MIN_NS : (period * 2 > WATCH_MAX_NS ? WATCH_MAX_NS : period * 2);
        nap_locked(p, period);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}
