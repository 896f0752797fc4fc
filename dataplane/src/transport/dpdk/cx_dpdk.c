/* The dpdk network driver's listeners and links (cx_dpdk.h); the port, ARP and the frame
 * layout are in cx_dpdk_port.c and cx_dpdk_wire.c.
 *
 * A link is a pair of UDP endpoints (our port, the peer's IP and port); every link has a UDP
 * port of its own, so frames are demultiplexed by destination port alone and the header's
 * channel stays free for the multiplexer. Opening one, in driver control messages
 * (cx_dpdk_wire.h): the connector binds an ephemeral port and sends HELLO(nonce) to the
 * listener's port, every 200 ms until answered; the listener binds a fresh port for the new
 * link and answers ACCEPT(nonce) from it (again for a repeated HELLO), or REFUSE when
 * nobody listens there. Both carry the sender's largest payload; a link uses the smaller.
 *
 * Liveness: a link that sent nothing for 100 ms sends PING (the port's watcher thread sees
 * to it even when the link's owner does not progress it); a link whose peer was silent for
 * the peer timeout (3 s) fails with -ECONNRESET, as it does on the peer's CLOSE, or on RESET
 * (our frames reached a port where the peer has no such link: it closed or restarted).
 *
 * Received data frames wait in the link's queue, in their mbufs, until the link's progress
 * delivers them in place. Sends copy into one mbuf per frame and go to the port at once;
 * what the TX queue does not take waits in the link's send queue for progress.
 * Blocking: each link has an eventfd; arm() registers it with the port's watcher thread,
 * which polls the port while any link is armed (without pause for 100 us after an arm, then
 * every 50 us to 1 ms) and writes the eventfd when a frame for that link arrived or the
 * link failed.
 *
 * Exports exactly one ops table: cx_dpdk_ops. */
#define _GNU_SOURCE
#include "transport/dpdk/cx_dpdk.h"

#include "common/cx_error.h"
#include "transport/cx_addr.h"
#include "transport/cx_txq.h"
#include "transport/dpdk/cx_dpdk_port.h"

#include <rte_mbuf.h>

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define RXQ 4096u /* frames waiting for the link's progress (power of two) */
#define TXQ 4096u /* frames waiting for room in the port's TX queue (power of two) */
#define DELIVER_MAX 64
#define HELLO_EVERY_NS 200000000ull
#define KEEPALIVE_NS 100000000ull
#define CONNECT_TIMEOUT_MS 5000
#define BACKLOG 64
#define RECENT 64

enum { CONNECTING = 1, OPEN, FAILED };

struct rx_entry {
    struct rte_mbuf *m;
    const uint8_t *payload;
    struct cx_frame_hdr h;
};

struct dlink {
    struct cx_link base;
    struct cx_dpdk_ep ep;
    struct cx_dpdk_port *port;
    struct cx_dpdk_addr peer;
    int state;
    int err;          /* negative errno once FAILED */
    char why[192];
    uint32_t nonce;
    size_t max_payload;
    struct rx_entry *rx;
    unsigned rx_head, rx_tail;
    struct rte_mbuf **tx;
    unsigned tx_head, tx_tail;
    size_t tx_bytes;
    uint64_t last_rx, last_tx;
    int efd, armed;
};

struct cx_listener {
    struct cx_dpdk_ep ep; /* first: the port's table points here */
    struct cx_dpdk_port *port;
    char addr[64];
    int efd;
    struct dlink *backlog[BACKLOG];
    unsigned nbacklog;
    struct { uint32_t ip, nonce; uint16_t port, lport; } recent[RECENT];
    unsigned nrecent;
};

extern const struct cx_driver_ops cx_dpdk_ops;

static struct dlink *link_of(struct cx_dpdk_ep *ep)
{
    return (struct dlink *)((char *)ep - offsetof(struct dlink, ep));
}

static void ip_str(uint32_t ip, char out[16])
{
    struct in_addr a = {.s_addr = htonl(ip)};
    inet_ntop(AF_INET, &a, out, 16);
}

/* "dpdk://a.b.c.d:port" -> ip, port (host order). */
static int parse_addr(const char *addr, uint32_t *ip, uint16_t *port)
{
    const char *hp = cx_addr_strip(addr, "dpdk");
    const char *colon = hp ? strrchr(hp, ':') : NULL;
    char host[32];
    if (!colon || colon == hp || (size_t)(colon - hp) >= sizeof host)
        return cx_err_set(EINVAL, "dpdk: address '%s' is not dpdk://a.b.c.d:port",
                          addr ? addr : "(null)");
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = 0;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    struct in_addr a;
    if (*end || end == colon + 1 || p < 0 || p > 65535 || inet_pton(AF_INET, host, &a) != 1)
        return cx_err_set(EINVAL, "dpdk: address '%s' is not dpdk://a.b.c.d:port (IPv4 "
                                  "literal, port 0..65535)", addr);
    *ip = ntohl(a.s_addr);
    *port = (uint16_t)p;
    return 0;
}

static void efd_signal(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

static void efd_drain(int fd)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof v);
    (void)r;
}

static void wake_locked(struct dlink *k)
{
    if (k->armed) {
        k->armed = 0;
        k->port->armed--;
        efd_signal(k->efd);
    }
}

static void fail_locked(struct dlink *k, int err, const char *why)
{
    if (k->state == FAILED)
        return;
    char ip[16];
    ip_str(k->peer.ip, ip);
    k->state = FAILED;
    k->err = -err;
    snprintf(k->why, sizeof k->why, "dpdk: link %u <-> dpdk://%s:%u: %s", k->ep.lport, ip,
             k->peer.port, why);
    while (k->tx_head != k->tx_tail) { /* nothing more will leave */
        rte_pktmbuf_free(k->tx[k->tx_head % TXQ]);
        k->tx_head++;
    }
    k->tx_bytes = 0;
    wake_locked(k);
}

static struct dlink *link_new(struct cx_dpdk_port *p)
{
    struct dlink *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->rx = calloc(RXQ, sizeof *k->rx);
    k->tx = calloc(TXQ, sizeof *k->tx);
    k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!k->rx || !k->tx || k->efd < 0) {
        if (k->efd >= 0)
            close(k->efd);
        free(k->rx), free(k->tx), free(k);
        return NULL;
    }
    k->base.ops = &cx_dpdk_ops;
    k->ep.kind = CX_DPDK_EP_LINK;
    k->port = p;
    k->max_payload = p->max_payload;
    k->last_rx = k->last_tx = cx_dpdk_now_ns();
    return k;
}

/* Unbinds and frees (lock held); the caller closed nothing else. */
static void link_free_locked(struct dlink *k)
{
    struct cx_dpdk_port *p = k->port;
    if (k->armed)
        p->armed--;
    if (k->ep.lport)
        cx_dpdk_port_unbind_locked(p, &k->ep);
    for (; k->rx_head != k->rx_tail; k->rx_head++) rte_pktmbuf_free(k->rx[k->rx_head % RXQ].m);
    for (; k->tx_head != k->tx_tail; k->tx_head++) rte_pktmbuf_free(k->tx[k->tx_head % TXQ]);
    close(k->efd);
    free(k->rx), free(k->tx), free(k);
}

static void link_close_locked(struct dlink *k)
{
    if (k->state == OPEN)
        cx_dpdk_port_ctrl_locked(k->port, k->ep.lport, &k->peer, CX_DPDK_CLOSE, k->nonce);
    link_free_locked(k);
}

/* ---- receive path (called by the port, lock held) ---- */

static size_t min_payload(struct cx_dpdk_port *p, uint32_t theirs)
{
    return theirs && theirs < p->max_payload ? theirs : p->max_payload;
}

static void on_hello(struct cx_listener *l, const struct cx_dpdk_rx *rx, const struct cx_dpdk_ctrl *c)
{
    struct cx_dpdk_port *p = l->port;
    struct cx_dpdk_addr from = rx->src;
    for (unsigned i = 0; i < l->nrecent && i < RECENT; i++) { /* a repeated HELLO */
        if (l->recent[i].ip != from.ip || l->recent[i].port != from.port || l->recent[i].nonce != c->nonce)
            continue;
        struct cx_dpdk_ep *ep = p->bound[l->recent[i].lport];
        if (ep && ep->kind == CX_DPDK_EP_LINK && link_of(ep)->peer.ip == from.ip &&
            link_of(ep)->peer.port == from.port)
            cx_dpdk_port_ctrl_locked(p, l->recent[i].lport, &from, CX_DPDK_ACCEPT, c->nonce);
        return;
    }
    struct dlink *k = l->nbacklog < BACKLOG ? link_new(p) : NULL;
    if (!k || cx_dpdk_port_bind_locked(p, 0, &k->ep) < 0) {
        if (k)
            link_free_locked(k);
        cx_dpdk_port_ctrl_locked(p, l->ep.lport, &from, CX_DPDK_REFUSE, c->nonce);
        return;
    }
    k->peer = from;
    k->nonce = c->nonce;
    k->max_payload = min_payload(p, c->mtu);
    k->state = OPEN;
    cx_dpdk_port_learn_locked(p, from.ip, from.mac);
    l->backlog[l->nbacklog++] = k;
    unsigned r = l->nrecent++ % RECENT;
    l->recent[r].ip = from.ip, l->recent[r].port = from.port, l->recent[r].nonce = c->nonce;
    l->recent[r].lport = k->ep.lport;
    cx_dpdk_port_ctrl_locked(p, k->ep.lport, &from, CX_DPDK_ACCEPT, c->nonce);
    efd_signal(l->efd);
}

static void on_link_ctrl(struct dlink *k, const struct cx_dpdk_rx *rx, const struct cx_dpdk_ctrl *c)
{
    switch (c->op) {
    case CX_DPDK_ACCEPT:
        if (k->state == CONNECTING && c->nonce == k->nonce) {
            k->peer.port = rx->src.port;
            memcpy(k->peer.mac, rx->src.mac, 6);
            k->max_payload = min_payload(k->port, c->mtu);
            k->state = OPEN;
        }
        break;
    case CX_DPDK_REFUSE:
        if (k->state == CONNECTING && c->nonce == k->nonce)
            fail_locked(k, ECONNREFUSED, "connection refused (nobody listens on that port)");
        break;
    case CX_DPDK_CLOSE:
        fail_locked(k, ECONNRESET, "the peer closed the link");
        break;
    case CX_DPDK_RESET:
        fail_locked(k, ECONNRESET, "the peer has no such link (closed or restarted)");
        break;
    default: /* PING: last_rx is all it is for; a stray HELLO is ignored */
        break;
    }
}

int cx_dpdk_on_udp_locked(struct cx_dpdk_port *p, struct cx_dpdk_ep *ep,
                          const struct cx_dpdk_rx *rx, const uint8_t *payload, struct rte_mbuf *m)
{
    struct cx_frame_hdr h;
    if (rx->len < CX_FRAME_HDR_SIZE || cx_frame_decode(payload, rx->len, &h) < 0 ||
        h.length != rx->len - CX_FRAME_HDR_SIZE) {
        p->st.rx_dropped++;
        return 0;
    }
    struct cx_dpdk_ctrl c = {0};
    int ctrl = h.type == CX_FRAME_CTRL && h.format == CX_DPDK_CTRL_FORMAT &&
               cx_dpdk_ctrl_decode(payload + CX_FRAME_HDR_SIZE, h.length, &c) == 0;
    /* a control message that must never be answered (no RESET storms between two ends) */
    int quiet = ctrl && (c.op == CX_DPDK_RESET || c.op == CX_DPDK_CLOSE || c.op == CX_DPDK_REFUSE ||
                         c.op == CX_DPDK_ACCEPT);
    if (!ep || (ep->kind == CX_DPDK_EP_LINK && link_of(ep)->state != CONNECTING &&
                (link_of(ep)->peer.ip != rx->src.ip || link_of(ep)->peer.port != rx->src.port))) {
        if (!quiet)
            cx_dpdk_port_ctrl_locked(p, rx->dst_port, &rx->src,
                                     ctrl && c.op == CX_DPDK_HELLO ? CX_DPDK_REFUSE : CX_DPDK_RESET,
                                     c.nonce);
        p->st.rx_dropped++;
        return 0;
    }
    if (ep->kind == CX_DPDK_EP_LISTENER) {
        if (ctrl && c.op == CX_DPDK_HELLO)
            on_hello((struct cx_listener *)ep, rx, &c);
        else
            p->st.rx_dropped++;
        return 0;
    }
    struct dlink *k = link_of(ep);
    if (k->peer.ip != rx->src.ip) { /* connecting: only the listener's host may answer */
        p->st.rx_dropped++;
        return 0;
    }
    if (ctrl) { /* a PING must not wake an idle owner: only a failure does (fail_locked) */
        k->last_rx = cx_dpdk_now_ns();
        on_link_ctrl(k, rx, &c);
        return 0;
    }
    if (k->state != OPEN || k->rx_tail - k->rx_head == RXQ) {
        p->st.rx_dropped++;
        return 0;
    }
    k->last_rx = cx_dpdk_now_ns();
    struct rx_entry *e = &k->rx[k->rx_tail++ % RXQ];
    e->m = m;
    e->payload = payload + CX_FRAME_HDR_SIZE;
    e->h = h;
    wake_locked(k);
    return 1;
}

static void keepalive_locked(struct dlink *k, uint64_t now)
{
    if (k->state != OPEN)
        return;
    if (now - k->last_rx > (uint64_t)k->port->peer_timeout_ms * 1000000ull) {
        char why[64];
        snprintf(why, sizeof why, "the peer was silent for %u ms", k->port->peer_timeout_ms);
        fail_locked(k, ECONNRESET, why);
    } else if (now - k->last_tx > KEEPALIVE_NS) {
        cx_dpdk_port_ctrl_locked(k->port, k->ep.lport, &k->peer, CX_DPDK_PING, k->nonce);
        k->last_tx = now;
    }
}

void cx_dpdk_on_watch_locked(struct cx_dpdk_port *p, uint64_t now)
{
    for (struct cx_dpdk_ep *ep = p->eps; ep; ep = ep->next)
        if (ep->kind == CX_DPDK_EP_LINK)
            keepalive_locked(link_of(ep), now);
}

/* ---- listen / accept / connect ---- */

static int dpdk_listen(const char *addr, struct cx_listener **out)
{
    uint32_t ip;
    uint16_t port;
    int rc = parse_addr(addr, &ip, &port);
    struct cx_dpdk_port *p;
    if (rc < 0 || (rc = cx_dpdk_port_get(&p)) < 0)
        return rc;
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l || (l->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        free(l);
        return cx_err_set(ENOMEM, "dpdk: out of memory or eventfds for a listener");
    }
    l->ep.kind = CX_DPDK_EP_LISTENER;
    l->port = p;
    pthread_mutex_lock(&p->lock);
    if (!p->ip && ip) { /* the first listen address names the port, unless CONFLUX_DPDK_IP did */
        p->ip = ip;
        cx_dpdk_port_announce_locked(p);
    }
    char want[16], have[16];
    ip_str(ip, want), ip_str(p->ip, have);
    if (!p->ip)
        rc = cx_err_set(EADDRNOTAVAIL, "dpdk: listen on %s: the port has no IPv4 address yet "
                                       "(set CONFLUX_DPDK_IP or listen on the port's address)", addr);
    else if (ip && ip != p->ip)
        rc = cx_err_set(EADDRNOTAVAIL, "dpdk: listen on %s: the port's address is %s", addr, have);
    else
        rc = cx_dpdk_port_bind_locked(p, port, &l->ep);
    if (rc == 0)
        snprintf(l->addr, sizeof l->addr, "dpdk://%s:%u", have, l->ep.lport);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        close(l->efd), free(l);
        return cx_err_wrap(rc, "dpdk: listen on %s", addr);
    }
    *out = l;
    return 0;
}

static const char *dpdk_listener_addr(struct cx_listener *l) { return l->addr; }
static int dpdk_listener_fd(struct cx_listener *l) { return l->efd; }

/* Polls with a short, growing sleep: the port has no file descriptor to wait on. */
static void nap(unsigned *us)
{
    usleep(*us);
    *us = *us >= 1000 ? 1000 : *us * 2;
}

static int dpdk_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    struct cx_dpdk_port *p = l->port;
    uint64_t deadline = cx_dpdk_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ull;
    unsigned us = 20;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        if (!l->nbacklog)
            cx_dpdk_port_poll_locked(p);
        struct dlink *k = NULL;
        if (l->nbacklog) {
            k = l->backlog[0];
            memmove(l->backlog, l->backlog + 1, --l->nbacklog * sizeof l->backlog[0]);
            if (!l->nbacklog)
                efd_drain(l->efd);
        }
        pthread_mutex_unlock(&p->lock);
        if (k) {
            *out = &k->base;
            return 0;
        }
        if (timeout_ms >= 0 && cx_dpdk_now_ns() >= deadline)
            return cx_err_set(ETIMEDOUT, "dpdk: no peer on %s within %d ms", l->addr, timeout_ms);
        nap(&us);
    }
}

static void dpdk_listener_close(struct cx_listener *l)
{
    if (!l)
        return;
    struct cx_dpdk_port *p = l->port;
    pthread_mutex_lock(&p->lock);
    cx_dpdk_port_unbind_locked(p, &l->ep);
    for (unsigned i = 0; i < l->nbacklog; i++) link_close_locked(l->backlog[i]);
    pthread_mutex_unlock(&p->lock);
    close(l->efd);
    free(l);
}

static uint32_t new_nonce(uint16_t lport)
{
    uint64_t x = cx_dpdk_now_ns() ^ ((uint64_t)getpid() << 32) ^ lport;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
    return (uint32_t)x | 1;
}

static int dpdk_connect(const char *addr, struct cx_link **out)
{
    uint32_t ip;
    uint16_t port;
    int rc = parse_addr(addr, &ip, &port);
    if (rc < 0)
        return rc;
    if (!ip || !port)
        return cx_err_set(EINVAL, "dpdk: connect to '%s': needs an address and a port", addr);
    struct cx_dpdk_port *p;
    if ((rc = cx_dpdk_port_get(&p)) < 0)
        return cx_err_wrap(rc, "dpdk: connect to %s", addr);
    struct dlink *k = link_new(p);
    if (!k)
        return cx_err_set(ENOMEM, "dpdk: out of memory for a link");
    pthread_mutex_lock(&p->lock);
    if (!p->ip)
        rc = cx_err_set(EADDRNOTAVAIL, "dpdk: connect to %s: the port has no IPv4 address "
                                       "(set CONFLUX_DPDK_IP)", addr);
    else
        rc = cx_dpdk_port_bind_locked(p, 0, &k->ep);
    if (rc < 0) {
        link_free_locked(k);
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    k->peer.ip = ip;
    k->peer.port = port;
    k->nonce = new_nonce(k->ep.lport);
    k->state = CONNECTING;
    uint64_t t0 = cx_dpdk_now_ns(), hello = 0;
    int have_mac = 0;
    unsigned hellos = 0;
    unsigned us = 20;
    for (;;) {
        cx_dpdk_port_poll_locked(p);
        if (k->state != CONNECTING)
            break;
        uint64_t now = cx_dpdk_now_ns();
        if (!have_mac)
            have_mac = cx_dpdk_port_arp_locked(p, ip, k->peer.mac) == 0;
        if (have_mac && (hello == 0 || now - hello > HELLO_EVERY_NS)) {
            if (++hellos % 4 == 0) { /* unanswered: the MAC we know may be a dead process's */
                cx_dpdk_port_forget_locked(p, ip);
                have_mac = cx_dpdk_port_arp_locked(p, ip, k->peer.mac) == 0;
            }
            if (have_mac)
                cx_dpdk_port_ctrl_locked(p, k->ep.lport, &k->peer, CX_DPDK_HELLO, k->nonce);
            hello = now;
        }
        if (now - t0 > CONNECT_TIMEOUT_MS * 1000000ull) {
            rc = have_mac ? cx_err_set(ETIMEDOUT, "dpdk: connect to %s: no answer in %d ms", addr,
                                       CONNECT_TIMEOUT_MS)
                          : cx_err_set(EHOSTUNREACH, "dpdk: connect to %s: no ARP reply in %d ms",
                                       addr, CONNECT_TIMEOUT_MS);
            break;
        }
        pthread_mutex_unlock(&p->lock);
        nap(&us);
        pthread_mutex_lock(&p->lock);
    }
    if (k->state == FAILED)
        rc = cx_err_set(-k->err, "%s", k->why);
    if (rc < 0) {
        link_free_locked(k);
        pthread_mutex_unlock(&p->lock);
        return rc;
    }
    k->last_rx = k->last_tx = cx_dpdk_now_ns();
    pthread_mutex_unlock(&p->lock);
    *out = &k->base;
    return 0;
}

/* ---- the link ---- */

static int link_error(struct dlink *k) { return cx_err_set(-k->err, "%s", k->why); }

static int dpdk_send(struct cx_link *base, const struct cx_frame_hdr *h, const struct iovec *iov,
                     int iovcnt)
{
    struct dlink *k = (struct dlink *)base;
    struct cx_dpdk_port *p = k->port;
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > k->max_payload)
        return cx_err_set(EMSGSIZE, "dpdk: a %zu-byte payload exceeds this link's %zu bytes "
                                    "(MTU %u; put the fragmentation filter on top)", len,
                          k->max_payload, p->mtu);
    if (__atomic_load_n(&k->state, __ATOMIC_ACQUIRE) == FAILED) {
        pthread_mutex_lock(&p->lock);
        int rc = link_error(k);
        pthread_mutex_unlock(&p->lock);
        return rc == -ECONNRESET ? cx_err_set(EPIPE, "%s", k->why) : rc;
    }
    struct cx_frame_hdr hd = *h;
    hd.length = (uint32_t)len;
    if (!(hd.flags & CX_FRAME_F_FRAG))
        hd.msg_length = (uint32_t)len;
    struct rte_mbuf *m = cx_dpdk_port_frame(p, k->ep.lport, &k->peer, &hd, iov, iovcnt, len);
    if (!m)
        return 0; /* no mbuf: the datagram is lost, as on a full wire */
    pthread_mutex_lock(&p->lock);
    if (k->state == FAILED) {
        rte_pktmbuf_free(m);
    } else if (k->tx_head == k->tx_tail && cx_dpdk_port_tx_locked(p, &m, 1) == 1) {
        k->last_tx = cx_dpdk_now_ns();
    } else if (k->tx_tail - k->tx_head < TXQ) {
        k->tx[k->tx_tail++ % TXQ] = m;
        k->tx_bytes += len + CX_FRAME_HDR_SIZE;
    } else {
        rte_pktmbuf_free(m);
        __atomic_fetch_add(&p->st.tx_dropped, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&p->lock);
    return 0;
}

static size_t dpdk_pending(struct cx_link *base)
{
    struct dlink *k = (struct dlink *)base;
    pthread_mutex_lock(&k->port->lock);
    size_t n = k->tx_bytes;
    pthread_mutex_unlock(&k->port->lock);
    return n;
}

/* Hands queued frames to the port, oldest first. Returns how many left. */
static int flush_locked(struct dlink *k)
{
    int done = 0;
    while (k->tx_head != k->tx_tail) {
        unsigned at = k->tx_head % TXQ, n = k->tx_tail - k->tx_head;
        if (n > TXQ - at)
            n = TXQ - at; /* up to the end of the ring */
        unsigned sent = cx_dpdk_port_tx_locked(k->port, &k->tx[at], n);
        for (unsigned i = 0; i < sent; i++)
            k->tx_bytes -= rte_pktmbuf_pkt_len(k->tx[at + i]) - CX_DPDK_HDRS_LEN;
        k->tx_head += sent;
        done += (int)sent;
        if (sent < n)
            break;
    }
    if (done)
        k->last_tx = cx_dpdk_now_ns();
    return done;
}

static void no_recv(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)arg, (void)h, (void)p, (void)n;
}

static int dpdk_progress(struct cx_link *base, cx_recv_fn fn, void *arg, int budget)
{
    struct dlink *k = (struct dlink *)base;
    struct cx_dpdk_port *p = k->port;
    struct rx_entry got[DELIVER_MAX];
    int n = 0, work;
    if (!fn)
        fn = no_recv;
    pthread_mutex_lock(&p->lock);
    if (k->armed) {
        k->armed = 0;
        p->armed--;
    }
    work = flush_locked(k);
    if (k->rx_head == k->rx_tail)
        cx_dpdk_port_poll_locked(p);
    keepalive_locked(k, cx_dpdk_now_ns());
    while (n < budget && n < DELIVER_MAX && k->rx_head != k->rx_tail)
        got[n++] = k->rx[k->rx_head++ % RXQ];
    int failed = n == 0 && k->state == FAILED;
    int rc = failed ? link_error(k) : 0;
    pthread_mutex_unlock(&p->lock);
    if (failed)
        return rc;
    for (int i = 0; i < n; i++) {
        fn(arg, &got[i].h, got[i].payload, got[i].h.length);
        rte_pktmbuf_free(got[i].m);
    }
    return work + n;
}

static int dpdk_fd(struct cx_link *base) { return ((struct dlink *)base)->efd; }

static int dpdk_arm(struct cx_link *base)
{
    struct dlink *k = (struct dlink *)base;
    struct cx_dpdk_port *p = k->port;
    pthread_mutex_lock(&p->lock);
    efd_drain(k->efd);
    if (k->rx_head == k->rx_tail)
        cx_dpdk_port_poll_locked(p);
    int busy = k->rx_head != k->rx_tail || k->tx_head != k->tx_tail || k->state != OPEN;
    if (!busy && !k->armed) {
        k->armed = 1;
        cx_dpdk_port_armed_locked(p);
    }
    pthread_mutex_unlock(&p->lock);
    return busy ? -EAGAIN : 0;
}

static void dpdk_caps(struct cx_link *base, struct cx_driver_caps *c)
{
    struct dlink *k = (struct dlink *)base;
    c->flags = CX_CAP_DATAGRAM | CX_CAP_FABRIC;
    c->max_msg = k->max_payload;
    c->poll_cost = 2;
    c->rank = 25;
}

static void dpdk_close(struct cx_link *base)
{
    struct dlink *k = (struct dlink *)base;
    struct cx_dpdk_port *p = k->port;
    pthread_mutex_lock(&p->lock);
    link_close_locked(k);
    pthread_mutex_unlock(&p->lock);
}

const struct cx_driver_ops cx_dpdk_ops = {
    .name = "dpdk",
    .scheme = "dpdk",
    .listen = dpdk_listen,
    .listener_addr = dpdk_listener_addr,
    .listener_fd = dpdk_listener_fd,
    .accept = dpdk_accept,
    .listener_close = dpdk_listener_close,
    .connect = dpdk_connect,
    .send = dpdk_send,
    .pending = dpdk_pending,
    .progress = dpdk_progress,
    .fd = dpdk_fd,
    .arm = dpdk_arm,
    .caps = dpdk_caps,
    .close = dpdk_close,
};
