/* The udp driver's links and its ops table (cx_udp_ops; listen/accept/connect are in
 * cx_udp_handshake.c). A udp link: one connected, non-blocking UDP socket; one frame per datagram (header and
 * payload gathered by one sendmsg); receives batched with recvmmsg and delivered in place
 * from the receive slots. Datagrams the socket cannot take now (full send buffer) wait in
 * the link's queue, encoded, back to back; each is self-delimited by its header's length.
 * Keep-alive and peer-gone rules: see cx_udp.h. */
#define _GNU_SOURCE
#include "transport/udp/cx_udp_int.h"

#include "common/cx_env.h"
#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RX_BATCH 8
#define RX_SLOT 65536 /* above the largest IPv4 UDP payload: nothing is ever truncated */
#define MAX_IOV 64
#define PING_NS 1000000000ull /* at most; a quarter of the peer timeout when that is shorter */

struct udp_link {
    struct cx_link base;
    int fd;
    int failed; /* negative errno once the link broke */
    char why[256]; /* ... and why */
    int server;
    struct sockaddr_in peer;
    char peer_str[32];
    size_t max_msg;
    uint64_t nonce;
    struct cx_txq txq;
    uint8_t *rx; /* RX_BATCH slots of RX_SLOT bytes */
    struct mmsghdr msgs[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct sockaddr_in from[RX_BATCH];
    uint64_t last_rx, last_ping, ping_start, timeout_ns, ping_ns;
    unsigned pings;
    struct cx_udp_stats st;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t peer_timeout_ns(void)
{
    return cx_env_u64("CONFLUX_UDP_PEER_TIMEOUT_MS", 10000, 0, 86400000) * 1000000ull;
}

int cx_udp_link_new(int fd, const struct sockaddr_in *peer, uint64_t nonce, int server,
                    struct cx_link **out)
{
    struct udp_link *u = calloc(1, sizeof *u);
    uint8_t *rx = malloc((size_t)RX_BATCH * RX_SLOT);
    if (!u || !rx) {
        free(u), free(rx), close(fd);
        return cx_err_set(ENOMEM, "udp: out of memory for a link");
    }
    u->base.ops = &cx_udp_ops;
    u->fd = fd;
    u->server = server;
    u->peer = *peer;
    cx_udp_addr_str(peer, u->peer_str, sizeof u->peer_str);
    u->max_msg = cx_udp_max_msg(fd);
    u->nonce = nonce;
    u->rx = rx;
    u->timeout_ns = peer_timeout_ns();
    u->ping_ns = u->timeout_ns && u->timeout_ns / 4 < PING_NS ? u->timeout_ns / 4 : PING_NS;
    u->last_rx = now_ns();
    for (int i = 0; i < RX_BATCH; i++)
        u->iov[i] = (struct iovec){rx + (size_t)i * RX_SLOT, RX_SLOT};
    *out = &u->base;
    return 0;
}

static int udp_fail(struct udp_link *u, int err, const char *what, const char *detail)
{
    if (!u->failed) { /* the first cause is the one every later call reports */
        u->failed = -err;
        snprintf(u->why, sizeof u->why, "udp: peer %s: %s%s", u->peer_str, what, detail ? detail : "");
    }
    return cx_err_set(-u->failed, "%s", u->why);
}

/* Sends one datagram. 1 = sent (or lost on the way, as datagrams may be), 0 = the socket
 * is full (try later), negative errno = the link is broken. */
static int send_dgram(struct udp_link *u, struct iovec *v, int n)
{
    struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)n};
    for (;;) {
        if (sendmsg(u->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0)
            return 1;
        switch (errno) {
        case EINTR:
            continue;
        case EAGAIN:
        case ENOBUFS: /* a full device queue: also just "later" */
            return 0;
        case ECONNREFUSED: /* ICMP port unreachable: the peer's socket is gone */
            return udp_fail(u, ECONNRESET, "unreachable (port closed: ", "the peer process is gone)");
        case EHOSTUNREACH:
        case ENETUNREACH:
        case EHOSTDOWN:
        case ENETDOWN: /* maybe transient: count it lost; the silence timeout decides */
            return 1;
        default:
            return udp_fail(u, EPIPE, "send: ", strerror(errno));
        }
    }
}

static int flush(struct udp_link *u)
{
    while (cx_txq_len(&u->txq)) {
        struct cx_frame_hdr h;
        cx_frame_decode(cx_txq_data(&u->txq), cx_txq_len(&u->txq), &h); /* our own encoding */
        size_t n = CX_FRAME_HDR_SIZE + h.length;
        struct iovec v = {cx_txq_data(&u->txq), n};
        int rc = send_dgram(u, &v, 1);
        if (rc <= 0)
            return rc;
        cx_txq_pop(&u->txq, n);
        u->st.sent++;
    }
    return 0;
}

static int udp_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct udp_link *u = (struct udp_link *)k;
    if (u->failed)
        return cx_err_set(-u->failed, "%s", u->why);
    if (iovcnt < 0 || iovcnt > MAX_IOV - 1)
        return cx_err_set(EINVAL, "udp: %d iovec entries, at most %d", iovcnt, MAX_IOV - 1);
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > u->max_msg)
        return cx_err_set(EMSGSIZE, "udp: message of %zu bytes exceeds the %zu-byte datagram "
                          "payload of this link (put the fragmentation filter on top)", len, u->max_msg);
    struct cx_frame_hdr hh = *h;
    hh.length = (uint32_t)len;
    if (!(hh.flags & CX_FRAME_F_FRAG))
        hh.msg_length = (uint32_t)len, hh.frag_offset = 0;
    uint8_t hdr[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&hh, hdr);
    struct iovec v[MAX_IOV];
    v[0] = (struct iovec){hdr, sizeof hdr};
    if (iovcnt)
        memcpy(v + 1, iov, sizeof *iov * (size_t)iovcnt);
    if (cx_txq_len(&u->txq) == 0) { /* nothing queued ahead of it: straight to the socket */
        int rc = send_dgram(u, v, iovcnt + 1);
        if (rc < 0)
            return rc;
        if (rc == 1) {
            u->st.sent++;
            return 0;
        }
    }
    int rc = cx_txq_push(&u->txq, v, iovcnt + 1, 0);
    if (rc < 0)
        return cx_err_wrap(rc, "udp");
    u->st.queued++;
    return flush(u);
}

static size_t udp_pending(struct cx_link *k) { return cx_txq_len(&((struct udp_link *)k)->txq); }

/* Our own control frames: answered here, never delivered. */
static void on_ctrl(struct udp_link *u, const uint8_t *d, size_t n)
{
    int op;
    uint64_t nonce;
    if (!cx_udp_ctrl_parse(d, n, &op, &nonce)) {
        u->st.bad++;
        return;
    }
    u->st.ctrl++;
    switch (op) {
    case UDP_HELLO: /* our WELCOME was lost: say it again */
        if (u->server && nonce == u->nonce)
            cx_udp_ctrl_send(u->fd, NULL, UDP_WELCOME, u->nonce);
        break;
    case UDP_PING:
        cx_udp_ctrl_send(u->fd, NULL, UDP_PONG, nonce);
        break;
    case UDP_BYE:
        udp_fail(u, ECONNRESET, "closed the link", NULL);
        break;
    default: /* a repeated WELCOME, a PONG: hearing from the peer was the point */
        break;
    }
}

/* Returns 1 when a message was delivered. */
static int on_dgram(struct udp_link *u, const uint8_t *d, size_t n, const struct sockaddr_in *from,
                    cx_recv_fn fn, void *arg)
{
    if (from->sin_port != u->peer.sin_port || from->sin_addr.s_addr != u->peer.sin_addr.s_addr) {
        u->st.stray++; /* queued before the socket was connected (accept's bind→connect gap) */
        return 0;
    }
    u->last_rx = now_ns();
    u->pings = 0;
    u->ping_start = 0;
    struct cx_frame_hdr h;
    if (cx_frame_decode(d, n, &h) < 0 || n != CX_FRAME_HDR_SIZE + h.length) {
        u->st.bad++;
        return 0;
    }
    if (h.type == CX_FRAME_CTRL && h.channel == 0 && h.format == CX_UDP_CTRL_TOKEN) {
        on_ctrl(u, d, n);
        return 0;
    }
    u->st.received++;
    fn(arg, &h, d + CX_FRAME_HDR_SIZE, h.length);
    return 1;
}

/* Pings a peer we have not heard from for a while; fails the link after the timeout. */
static void keepalive(struct udp_link *u)
{
    if (!u->timeout_ns)
        return;
    uint64_t t = now_ns();
    if (t - u->last_rx < u->ping_ns)
        return;
    if (u->ping_start && t - u->ping_start > u->timeout_ns) {
        char why[96];
        snprintf(why, sizeof why, "%llu ms, %u pings unanswered)",
                 (unsigned long long)((t - u->last_rx) / 1000000), u->pings);
        udp_fail(u, ECONNRESET, "silent (nothing received for ", why);
        return;
    }
    if (t - u->last_ping < u->ping_ns)
        return;
    if (!u->ping_start)
        u->ping_start = t;
    u->last_ping = t;
    u->pings++;
    u->st.pings++;
    cx_udp_ctrl_send(u->fd, NULL, UDP_PING, u->nonce);
}

static int udp_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct udp_link *u = (struct udp_link *)k;
    if (u->failed)
        return cx_err_set(-u->failed, "%s", u->why);
    int work = 0;
    if (cx_txq_len(&u->txq)) {
        size_t before = cx_txq_len(&u->txq);
        int rc = flush(u);
        if (rc < 0)
            return rc;
        work += cx_txq_len(&u->txq) != before;
    }
    while (work < budget && !u->failed) {
        unsigned want = (unsigned)(budget - work) < RX_BATCH ? (unsigned)(budget - work) : RX_BATCH;
        for (unsigned i = 0; i < want; i++)
            u->msgs[i].msg_hdr = (struct msghdr){.msg_name = &u->from[i], .msg_namelen = sizeof u->from[i],
                                                 .msg_iov = &u->iov[i], .msg_iovlen = 1};
        int n = recvmmsg(u->fd, u->msgs, want, MSG_DONTWAIT, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            if (errno == ECONNREFUSED)
                udp_fail(u, ECONNRESET, "unreachable (port closed: ", "the peer process is gone)");
            else
                udp_fail(u, errno, "recv: ", strerror(errno));
            break;
        }
        for (int i = 0; i < n && !u->failed; i++)
            work += on_dgram(u, u->iov[i].iov_base, u->msgs[i].msg_len, &u->from[i], fn, arg);
        if ((unsigned)n < want)
            break;
    }
    if (!u->failed)
        keepalive(u);
    if (u->failed)
        return work ? work : cx_err_set(-u->failed, "%s", u->why);
    return work;
}

static int udp_fd(struct cx_link *k) { return ((struct udp_link *)k)->fd; }

static int udp_arm(struct cx_link *k)
{
    struct udp_link *u = (struct udp_link *)k;
    return cx_txq_len(&u->txq) || u->failed ? -EAGAIN : 0;
}

static void udp_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    *c = (struct cx_driver_caps){.flags = CX_CAP_DATAGRAM, .max_msg = ((struct udp_link *)k)->max_msg,
                                 .poll_cost = 8, .rank = 40};
}

static void udp_close(struct cx_link *k)
{
    struct udp_link *u = (struct udp_link *)k;
    if (!u->failed) /* best effort: lets the peer fail at once instead of after its timeout */
        cx_udp_ctrl_send(u->fd, NULL, UDP_BYE, u->nonce);
    close(u->fd);
    cx_txq_free(&u->txq);
    free(u->rx);
    free(u);
}

int cx_udp_stats(struct cx_link *k, struct cx_udp_stats *out)
{
    if (!k || k->ops != &cx_udp_ops)
        return cx_err_set(EINVAL, "udp: not a udp link (%s)", k ? k->ops->name : "NULL");
    *out = ((struct udp_link *)k)->st;
    return 0;
}

const struct cx_driver_ops cx_udp_ops = {
    .name = "udp",
    .scheme = "udp",
    .listen = cx_udp_listen,
    .listener_addr = cx_udp_listener_addr,
    .listener_fd = cx_udp_listener_fd,
    .accept = cx_udp_accept,
    .listener_close = cx_udp_listener_close,
    .connect = cx_udp_connect,
    .send = udp_send,
    .pending = udp_pending,
    .progress = udp_progress,
    .fd = udp_fd,
    .arm = udp_arm,
    .caps = udp_caps,
    .close = udp_close,
};
