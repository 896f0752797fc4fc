/* The tcp network driver: one non-blocking TCP socket per link, framed by the 48-byte
 * cx_frame header. Sends gather header and payload with one writev (TCP_NODELAY, 4 MiB
 * socket buffers); what the socket does not take is queued and flushed by progress.
 * Receives go through the shared stream deframer (common/cx_deframe.h): 256 KiB gulps,
 * frames delivered in place, a large payload read straight into its own buffer, which grows
 * with the bytes received; set_limits bounds what a peer may declare.
 * Exports exactly one ops table: cx_tcp_ops. */
#define _GNU_SOURCE
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"
#include "transport/cx_txq.h"

#include "common/cx_deframe.h"
#include "common/cx_error.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_IOV 64

struct tcp_link {
    struct cx_link base;
    int fd;
    int failed; /* negative errno once the link broke */
    struct cx_txq txq;
    struct cx_deframe df;
};

struct cx_listener {
    int fd;
    char addr[96];
};

extern const struct cx_driver_ops cx_tcp_ops;

static int tcp_wrap_fd(int fd, struct cx_link **out)
{
    struct tcp_link *t = calloc(1, sizeof *t);
    if (!t || cx_deframe_init(&t->df) < 0) {
        free(t), close(fd);
        return cx_err_set(ENOMEM, "tcp: out of memory for a link");
    }
    cx_tcp_tune(fd);
    t->base.ops = &cx_tcp_ops;
    t->fd = fd;
    *out = &t->base;
    return 0;
}

static int tcp_listen(const char *addr, struct cx_listener **out)
{
    const char *hp = cx_addr_strip(addr, "tcp");
    if (!hp)
        return cx_err_set(EINVAL, "tcp: address '%s' is not tcp://host:port", addr);
    struct sockaddr_in sa;
    int fd = cx_tcp_listen_fd(hp, &sa);
    if (fd < 0)
        return cx_err_wrap(fd, "tcp");
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return cx_err_set(ENOMEM, "tcp: out of memory");
    }
    l->fd = fd;
    cx_addr_format_inet("tcp", &sa, l->addr, sizeof l->addr);
    *out = l;
    return 0;
}

static const char *tcp_listener_addr(struct cx_listener *l) { return l->addr; }
static int tcp_listener_fd(struct cx_listener *l) { return l->fd; }

static int tcp_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            return tcp_wrap_fd(fd, out);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return cx_err_set(errno, "tcp: accept on %s: %s", l->addr, strerror(errno));
        int r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return cx_err_set(ETIMEDOUT, "tcp: no peer on %s within %d ms", l->addr, timeout_ms);
        if (r < 0 && errno != EINTR)
            return cx_err_set(errno, "tcp: poll: %s", strerror(errno));
    }
}

static void tcp_listener_close(struct cx_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}

static int tcp_connect(const char *addr, struct cx_link **out)
{
    const char *hp = cx_addr_strip(addr, "tcp");
    if (!hp)
        return cx_err_set(EINVAL, "tcp: address '%s' is not tcp://host:port", addr);
    int fd = cx_tcp_connect_fd(hp);
    if (fd < 0)
        return cx_err_wrap(fd, "tcp");
    return tcp_wrap_fd(fd, out);
}

static int tcp_fail(struct tcp_link *t, int err, const char *what)
{
    if (!t->failed)
        t->failed = -err;
    return cx_err_set(err, "tcp: %s: %s", what, strerror(err));
}

/* Writes from the queue until it is empty or the socket is full. */
static int tcp_flush(struct tcp_link *t)
{
    while (cx_txq_len(&t->txq)) {
        ssize_t w = send(t->fd, cx_txq_data(&t->txq), cx_txq_len(&t->txq), MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return tcp_fail(t, errno == ECONNRESET ? ECONNRESET : EPIPE, "send");
        }
        cx_txq_pop(&t->txq, (size_t)w);
    }
    return 0;
}

static int tcp_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct tcp_link *t = (struct tcp_link *)k;
    if (t->failed)
        return cx_err_set(-t->failed, "tcp: send on a broken link");
    if (iovcnt > MAX_IOV - 1)
        return cx_err_set(EINVAL, "tcp: %d iovec entries, at most %d", iovcnt, MAX_IOV - 1);
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG)
        return cx_err_set(EMSGSIZE, "tcp: message of %zu bytes exceeds %u", len, CX_FRAME_MAX_MSG);
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
    size_t total = len + sizeof hdr, done = 0;
    if (cx_txq_len(&t->txq) == 0) {
        for (;;) {
            struct msghdr m = {.msg_iov = v, .msg_iovlen = (size_t)iovcnt + 1};
            ssize_t w = sendmsg(t->fd, &m, MSG_NOSIGNAL);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    break;
                return tcp_fail(t, errno == ECONNRESET ? ECONNRESET : EPIPE, "send");
            }
            done += (size_t)w;
            break;
        }
        if (done == total)
            return 0;
    }
    int rc = cx_txq_push(&t->txq, v, iovcnt + 1, done);
    if (rc < 0)
        return rc;
    return tcp_flush(t);
}

static size_t tcp_pending(struct cx_link *k) { return cx_txq_len(&((struct tcp_link *)k)->txq); }

/* Reads into dst; returns bytes, 0 for "would block", or a negative errno (EOF -> -ECONNRESET). */
static ssize_t tcp_read(void *io, void *dst, size_t n)
{
    struct tcp_link *t = io;
    if (t->failed)
        return cx_err_set(-t->failed, "tcp: link is broken");
    for (;;) {
        ssize_t r = recv(t->fd, dst, n, 0);
        if (r > 0)
            return r;
        if (r == 0)
            return tcp_fail(t, ECONNRESET, "peer closed the connection");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return tcp_fail(t, errno, "recv");
    }
}

static int tcp_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct tcp_link *t = (struct tcp_link *)k;
    int work = 0;
    if (t->failed && !cx_deframe_ready(&t->df))
        return cx_err_set(-t->failed, "tcp: link is broken");
    if (cx_txq_len(&t->txq)) {
        size_t before = cx_txq_len(&t->txq);
        int rc = tcp_flush(t);
        if (rc < 0 && !t->failed)
            return rc;
        if (cx_txq_len(&t->txq) != before)
            work++;
    }
    int r = cx_deframe_run(&t->df, tcp_read, t, fn, arg, budget - work);
    if (r < 0 && t->df.err == r && !t->failed) { /* a bad header: the stream is lost */
        t->failed = r;
        cx_err_wrap(r, "tcp: bad frame from peer");
    }
    if (r < 0)
        return work ? work : r;
    return work + r;
}

static int tcp_fd(struct cx_link *k) { return ((struct tcp_link *)k)->fd; }

static int tcp_arm(struct cx_link *k)
{
    struct tcp_link *t = (struct tcp_link *)k;
    /* queued output or a whole frame already buffered: progress first */
    if (cx_txq_len(&t->txq) || t->failed)
        return -EAGAIN;
    return cx_deframe_ready(&t->df) ? -EAGAIN : 0;
}

static void tcp_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    (void)k;
    *c = (struct cx_driver_caps){.flags = CX_CAP_RELIABLE | CX_CAP_ORDERED | CX_CAP_STREAM,
                                 .max_msg = CX_FRAME_MAX_MSG, .poll_cost = 8, .rank = 30};
}

static void tcp_close(struct cx_link *k)
{
    struct tcp_link *t = (struct tcp_link *)k;
    close(t->fd);
    cx_txq_free(&t->txq);
    cx_deframe_free(&t->df);
    free(t);
}

static int tcp_set_limits(struct cx_link *k, const struct cx_link_limits *lim)
{
    if (!k || !lim)
        return cx_err_set(EINVAL, "tcp: set_limits needs a link and limits");
    cx_deframe_set_limits(&((struct tcp_link *)k)->df, lim->max_msg, lim->on_oversize);
    return 0;
}

const struct cx_driver_ops cx_tcp_ops = {
    .name = "tcp",
    .scheme = "tcp",
    .listen = tcp_listen,
    .listener_addr = tcp_listener_addr,
    .listener_fd = tcp_listener_fd,
    .accept = tcp_accept,
    .listener_close = tcp_listener_close,
    .connect = tcp_connect,
    .send = tcp_send,
    .pending = tcp_pending,
    .progress = tcp_progress,
    .fd = tcp_fd,
    .arm = tcp_arm,
    .caps = tcp_caps,
    .close = tcp_close,
    .set_limits = tcp_set_limits,
};
