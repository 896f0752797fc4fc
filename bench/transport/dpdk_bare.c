/* The bare DPDK peer's port and frames: see dpdk_bare.h. */
#define _GNU_SOURCE
#include "dpdk_bare.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void spin_ns(double ns)
{
    volatile double x0 = 1.0;
    double end = now() + ns * 1e-9, x = x0;
    while (now() < end)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    x0 = x;
}

double proc_cpu(void) /* this process's user + system seconds */
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct rte_mempool *pool;
static char runtime_dir[512];
int is_memif;

/* The EAL leaves /var/run/dpdk/<file-prefix> behind; it is ours alone. */
void stop(void)
{
    rte_eth_dev_stop(0);
    rte_eth_dev_close(0);
    rte_eal_cleanup();
    DIR *d = opendir(runtime_dir);
    if (d) {
        char f[1024];
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.') {
                snprintf(f, sizeof f, "%s/%s", runtime_dir, e->d_name);
                unlink(f);
            }
        closedir(d);
    }
    rmdir(runtime_dir);
}

void fail(const char *what)
{
    fprintf(stderr, "dpdk_pingpong: %s\n", what);
    if (runtime_dir[0]) stop(); /* the EAL's files go too */
    exit(1);
}

void start(const char *role, const char *port)
{
    char vdev[400], prefix[64];
    is_memif = strncmp(port, "af_packet:", 10) != 0;
    if (!strncmp(port, "switch:", 7)) { /* a switch port: always the memif client */
        char path[256];
        snprintf(path, sizeof path, "%s", port + 7);
        char *id = strrchr(path, ':');
        if (!id) fail("switch:<path>:<id>");
        *id++ = 0;
        snprintf(vdev, sizeof vdev, "--vdev=net_memif0,role=client,id=%s,socket=%s,socket-abstract=no", id, path);
    } else if (is_memif)
        snprintf(vdev, sizeof vdev, "--vdev=net_memif0,role=%s,socket=%s,socket-abstract=no", role, port);
    else
        snprintf(vdev, sizeof vdev, "--vdev=net_af_packet0,iface=%s,framecnt=4096", port + 10);
    snprintf(prefix, sizeof prefix, "--file-prefix=cx-pingpong-%d", (int)getpid());
    char *argv[] = {"dpdk_pingpong", "--no-huge", "--no-pci", "-m", "128", "--no-telemetry",
                    "-l", "0", "--log-level=warning", prefix, vdev, NULL};
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof cpus, &cpus);
    if (rte_eal_init(11, argv) < 0) {
        fprintf(stderr, "dpdk_pingpong: EAL: %s\n", rte_strerror(rte_errno));
        exit(1);
    }
    sched_setaffinity(0, sizeof cpus, &cpus); /* as the Conflux driver: not pinned */
    snprintf(runtime_dir, sizeof runtime_dir, "%s", rte_eal_get_runtime_dir());
    pool = rte_pktmbuf_pool_create("pp", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    if (!pool || rte_eth_dev_configure(0, 1, 1, &conf) < 0 ||
        rte_eth_rx_queue_setup(0, 0, 1024, 0, NULL, pool) < 0 ||
        rte_eth_tx_queue_setup(0, 0, 1024, 0, NULL) < 0)
        fail("port setup failed");
    double t0 = now();
    while (rte_eth_dev_start(0) < 0) { /* a memif client waits for its server's socket */
        if (now() - t0 > 10) fail("port would not start");
        rte_eth_dev_stop(0);
        usleep(200000);
    }
    if (!strcmp(role, "server")) {
        printf("ready\n"); /* run.sh starts the client now, not while the port is set up */
        fflush(stdout);
    }
    struct rte_eth_link l;
    t0 = now();
    do {
        rte_eth_link_get_nowait(0, &l);
    } while (!l.link_status && now() - t0 < 20 && !srv_stop);
    if (!l.link_status && !srv_stop) fail("link did not come up");
}

uint8_t frame_src = HOT_ID, frame_dst = 1;
static const uint8_t MAC_PREFIX[5] = {0x02, 0xcf, 0, 0, 0};

uint8_t mark(struct rte_mbuf *m)
{
    const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
    if (m->data_len < HDRS || d[12] != 0x88 || d[13] != 0xb5 || memcmp(d, MAC_PREFIX, 5) || d[5] != frame_src)
        return 0;
    return d[38];
}

uint8_t sender(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, const uint8_t *)[11]; }

void address(struct rte_mbuf *m)
{
    uint8_t *d = rte_pktmbuf_mtod(m, uint8_t *);
    memcpy(d, MAC_PREFIX, 5), memcpy(d + 6, MAC_PREFIX, 5);
    d[5] = frame_dst, d[11] = frame_src;
}

uint64_t num(struct rte_mbuf *m, unsigned off)
{
    uint64_t v;
    memcpy(&v, rte_pktmbuf_mtod(m, const uint8_t *) + off, sizeof v);
    return v;
}

uint64_t frame_tag;

/* A frame of HDRS + len bytes; the payload copied from src when given. */
struct rte_mbuf *frame(uint8_t mk, size_t len, const uint8_t *src)
{
    struct rte_mbuf *m;
    while (!(m = rte_pktmbuf_alloc(pool)))
        ;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(HDRS + len));
    if (!d) fail("a frame does not fit an mbuf");
    memset(d, 0xab, 39);
    address(m);
    d[12] = 0x88, d[13] = 0xb5, d[38] = mk; /* local experimental ethertype */
    memcpy(d + 22, &frame_tag, sizeof frame_tag);
    if (src) memcpy(d + HDRS, src, len);
    return m;
}

/* bibw: both ends stream at once, so an end whose transmit ring is full receives meanwhile
 * (else both could wait on full rings forever); drain_fn is that end's receiver. */
void (*drain_fn)(void);
static int draining;

void send_burst(struct rte_mbuf **m, unsigned k)
{
    unsigned sent = 0;
    while (sent < k) {
        unsigned s = rte_eth_tx_burst(0, 0, m + sent, (uint16_t)(k - sent));
        sent += s;
        if (!s && drain_fn && !draining) {
            draining = 1;
            drain_fn();
            draining = 0;
        }
    }
}

void send_ctl(uint8_t mk, uint64_t a, uint64_t b)
{
    struct rte_mbuf *m = frame(mk, 0, NULL);
    memcpy(rte_pktmbuf_mtod(m, uint8_t *) + 14, &a, 8);
    memcpy(rte_pktmbuf_mtod(m, uint8_t *) + 22, &b, 8);
    send_burst(&m, 1);
}

/* Sends one message of size bytes as frames marked mk, the last one marked last_mk. */
void send_msg(size_t size, uint8_t mk, uint8_t last_mk, const uint8_t *src)
{
    size_t frames = size ? (size + PAYLOAD - 1) / PAYLOAD : 1;
    for (size_t f = 0; f < frames;) {
        struct rte_mbuf *m[BURST];
        unsigned k = 0;
        for (; k < BURST && f + k < frames; k++) {
            size_t off = (f + k) * PAYLOAD, len = size - off < PAYLOAD ? size - off : PAYLOAD;
            m[k] = frame(f + k == frames - 1 ? last_mk : mk, len, src ? src + off : NULL);
        }
        send_burst(m, k);
        f += k;
    }
}

size_t frames_of(size_t size) { return size ? (size + PAYLOAD - 1) / PAYLOAD : 1; }
