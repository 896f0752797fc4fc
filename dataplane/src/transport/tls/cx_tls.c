/* The tls driver's links and its ops table (cx_tls_ops; listen/accept/connect and the
 * handshake are in cx_tls_handshake.c). A link is one TLS session over a non-blocking TCP
 * socket, framed like the tcp driver: encoded header + payload back to back. send encrypts
 * straight from the caller's memory, a full 16 KiB record at a time (the header and pieces
 * shorter than a record are gathered into one record first), and copies into the link's
 * queue only what the socket does not take now; progress writes the rest and reads frames
 * through the shared stream deframer (common/cx_deframe.h, as tcp), which has OpenSSL
 * decrypt into the frame's own buffer. A link made by accept_start first runs the server's
 * handshake inside progress, without blocking, until its deadline. */
#include "transport/tls/cx_tls_int.h"

#include "common/cx_deframe.h"
#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <errno.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IOV 64
#define WRITE_CHUNK (1u << 20) /* per SSL_write: bounded, and never shrinking on a retry */
#define RECORD SSL3_RT_MAX_PLAIN_LENGTH /* 16 KiB: a full TLS record */

struct tls_link {
    struct cx_link base;
    int fd;
    SSL *ssl;
    struct cx_tls_sock *sock;
    int failed; /* negative errno once the link broke */
    char why[320];
    char peer[64];
    struct cx_txq txq;
    uint8_t *stage; /* RECORD bytes: pieces of a frame gathered into one record */
    struct cx_deframe df;
    long long hs_deadline; /* > 0 while the server's handshake runs in progress (ms) */
    int hs_ms;
    int hs_want;           /* SSL_ERROR_WANT_READ or _WRITE of the handshake's last step */
    int resumed;           /* the handshake resumed an earlier session */
    long long linger_until; /* refused handshake: our alert goes out before the close */
};

int cx_tls_link_new(int fd, SSL *ssl, struct cx_tls_sock *sock, const char *peer,
                    const uint8_t *rbuf, size_t rlen, struct cx_link **out)
{
    struct tls_link *t = calloc(1, sizeof *t);
    uint8_t *stage = malloc(RECORD);
    if (!t || !stage || cx_deframe_init(&t->df) < 0 ||
        cx_deframe_preload(&t->df, rbuf, rlen) < 0) {
        if (t)
            cx_deframe_free(&t->df);
        free(stage), free(t), SSL_free(ssl), free(sock), close(fd);
        return cx_err_set(ENOMEM, "tls: out of memory for a link");
    }
    t->base.ops = &cx_tls_ops;
    t->fd = fd;
    t->ssl = ssl;
    t->sock = sock;
    t->stage = stage;
    t->resumed = SSL_session_reused(ssl);
    snprintf(t->peer, sizeof t->peer, "%s", peer);
    *out = &t->base;
    return 0;
}

int cx_tls_link_new_accepting(int fd, SSL *ssl, struct cx_tls_sock *sock, const char *peer,
                              int handshake_ms, struct cx_link **out)
{
    int rc = cx_tls_link_new(fd, ssl, sock, peer, NULL, 0, out);
    if (rc < 0)
        return rc;
    struct tls_link *t = (struct tls_link *)*out;
    uint8_t w[CX_FRAME_HDR_SIZE]; /* "you are in" (cx_tls.h), ahead of every frame sent */
    cx_tls_welcome_frame(w);
    struct iovec v = {w, sizeof w};
    if ((rc = cx_txq_push(&t->txq, &v, 1, 0)) < 0) {
        cx_link_close(*out);
        return cx_err_set(ENOMEM, "tls: out of memory for a link");
    }
    t->hs_ms = handshake_ms;
    t->hs_deadline = cx_tls_now_ms() + handshake_ms;
    t->hs_want = SSL_ERROR_WANT_READ;
    return 0;
}

/* Records why the link broke (the first cause; later calls report it again). */
static int tls_fail(struct tls_link *t, int rc)
{
    if (!t->failed) {
        t->failed = rc;
        snprintf(t->why, sizeof t->why, "%s", cx_errmsg());
    }
    return cx_err_set(-t->failed, "%s", t->why);
}

static int ssl_fail(struct tls_link *t, int ret, const char *what)
{
    if (t->failed)
        return cx_err_set(-t->failed, "%s", t->why);
    return tls_fail(t, cx_tls_error(t->ssl, ret, t->sock, what, t->peer));
}

/* Records encrypted but not sent yet (gathered by the socket BIO, cx_tls_bio.c). */
static size_t unsent(const struct tls_link *t) { return t->sock->wlen - t->sock->woff; }

/* Sends the gathered records while the socket takes them: 0, or a negative errno. */
static int drain(struct tls_link *t)
{
    if (cx_tls_sock_drain(t->sock) >= 0)
        return 0;
    int e = t->sock->err == EPIPE ? ECONNRESET : t->sock->err;
    cx_err_set(e, "tls: send to %s: %s", t->peer, strerror(t->sock->err));
    return tls_fail(t, -e);
}

/* Writes from the queue until it is empty or the socket is full. */
static int tls_flush(struct tls_link *t)
{
    if (t->hs_deadline)
        return 0; /* sent once the handshake is done */
    while (cx_txq_len(&t->txq)) {
        size_t n = cx_txq_len(&t->txq) < WRITE_CHUNK ? cx_txq_len(&t->txq) : WRITE_CHUNK;
        ERR_clear_error();
        int w = SSL_write(t->ssl, cx_txq_data(&t->txq), (int)n);
        if (w > 0) {
            cx_txq_pop(&t->txq, (size_t)w);
            continue;
        }
        int e = SSL_get_error(t->ssl, w);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
            return drain(t); /* retried later with at least these bytes, as OpenSSL requires */
        return ssl_fail(t, w, "send to");
    }
    return drain(t);
}

/* Writes the frame v[0..n) from the caller's memory while the socket takes it: a piece of
 * RECORD bytes or more (or the last piece) goes as it is, shorter ones are gathered into
 * t->stage to fill a record. What is left when the socket is full is queued, starting with
 * the bytes of the refused write (OpenSSL's retry must present them again). */
static int send_direct(struct tls_link *t, const struct iovec *v, int n)
{
    int i = 0;
    size_t off = 0;
    while (i < n) {
        if (off == v[i].iov_len) {
            i++, off = 0;
            continue;
        }
        const uint8_t *p;
        size_t len, left = v[i].iov_len - off;
        if (left >= RECORD || i == n - 1) {
            p = (const uint8_t *)v[i].iov_base + off;
            len = left < WRITE_CHUNK ? left : WRITE_CHUNK;
        } else {
            len = 0;
            for (int j = i; j < n && len < RECORD; j++) {
                size_t from = j == i ? off : 0;
                size_t take = v[j].iov_len - from < RECORD - len ? v[j].iov_len - from : RECORD - len;
                memcpy(t->stage + len, (const uint8_t *)v[j].iov_base + from, take);
                len += take;
            }
            p = t->stage;
        }
        size_t w = 0;
        ERR_clear_error();
        int r = SSL_write_ex(t->ssl, p, len, &w);
        if (r == 1) {
            while (w) { /* advance over what went */
                size_t step = v[i].iov_len - off < w ? v[i].iov_len - off : w;
                off += step, w -= step;
                if (off == v[i].iov_len && i < n - 1)
                    i++, off = 0;
            }
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        if (e != SSL_ERROR_WANT_WRITE && e != SSL_ERROR_WANT_READ)
            return ssl_fail(t, r, "send to");
        struct iovec rest[MAX_IOV];
        int m = 0;
        for (int j = i; j < n; j++) {
            size_t from = j == i ? off : 0;
            if (v[j].iov_len > from)
                rest[m++] = (struct iovec){(uint8_t *)v[j].iov_base + from, v[j].iov_len - from};
        }
        int rc = cx_txq_push(&t->txq, rest, m, 0);
        return rc < 0 ? tls_fail(t, cx_err_wrap(rc, "tls: queueing for %s", t->peer)) : drain(t);
    }
    return drain(t);
}

static int tls_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct tls_link *t = (struct tls_link *)k;
    if (t->failed)
        return cx_err_set(-t->failed, "%s", t->why);
    if (iovcnt < 0 || iovcnt > MAX_IOV - 1)
        return cx_err_set(EINVAL, "tls: %d iovec entries, at most %d", iovcnt, MAX_IOV - 1);
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG)
        return cx_err_set(EMSGSIZE, "tls: message of %zu bytes exceeds %u", len, CX_FRAME_MAX_MSG);
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
    if (!cx_txq_len(&t->txq) && !t->hs_deadline)
        return send_direct(t, v, iovcnt + 1);
    int rc = cx_txq_push(&t->txq, v, iovcnt + 1, 0);
    if (rc < 0)
        return cx_err_wrap(rc, "tls");
    return tls_flush(t);
}

static size_t tls_pending(struct cx_link *k)
{
    struct tls_link *t = (struct tls_link *)k;
    return cx_txq_len(&t->txq) + unsent(t);
}

/* Reads into dst: bytes, 0 for "would block", or a negative errno. */
static ssize_t tls_read(void *io, void *dst, size_t n)
{
    struct tls_link *t = io;
    if (t->failed)
        return cx_err_set(-t->failed, "%s", t->why);
    size_t got = 0;
    ERR_clear_error();
    int r = SSL_read_ex(t->ssl, dst, n, &got);
    if (r == 1)
        return (ssize_t)got;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    return ssl_fail(t, r, "receive from");
}

/* One step of the accepting side's handshake: 1 when done, 0 while it waits for the peer,
 * or a negative errno (refused, or not done by the deadline). */
static int handshake_step(struct tls_link *t)
{
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->hs_deadline = 0; /* the welcome queued by cx_tls_link_new_accepting goes first */
        t->resumed = SSL_session_reused(t->ssl);
        int rc = cx_tls_resumed_check(t->ssl, "accepting", t->peer);
        return rc < 0 ? tls_fail(t, rc) : 1;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        int rc = cx_tls_error(t->ssl, r, t->sock, "accepting", t->peer);
        cx_tls_sock_drain(t->sock); /* our alert, if the BIO still holds it */
        /* let the alert reach the peer: closing with its bytes unread would send a reset
         * that can overtake it, so wait (in progress) for its close, briefly */
        shutdown(t->fd, SHUT_WR);
        t->hs_deadline = 0;
        t->linger_until = cx_tls_now_ms() + 200;
        tls_fail(t, rc);
        return 0;
    }
    t->hs_want = e;
    if (cx_tls_now_ms() >= t->hs_deadline) {
        cx_err_set(ETIMEDOUT, "tls: accepting %s: handshake not done within %d ms", t->peer,
                   t->hs_ms);
        return tls_fail(t, -ETIMEDOUT);
    }
    return 0;
}

static int tls_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct tls_link *t = (struct tls_link *)k;
    int work = 0;
    if (t->linger_until) { /* a refused handshake: drain until the peer closes, or time */
        char sink[4096];
        ssize_t r;
        while ((r = recv(t->fd, sink, sizeof sink, MSG_DONTWAIT)) > 0)
            ;
        if (r < 0 && (errno == EAGAIN || errno == EINTR) && cx_tls_now_ms() < t->linger_until)
            return 0;
        t->linger_until = 0;
        return cx_err_set(-t->failed, "%s", t->why);
    }
    if (t->failed && !cx_deframe_ready(&t->df))
        return cx_err_set(-t->failed, "%s", t->why);
    if (t->hs_deadline) {
        int rc = handshake_step(t);
        if (rc <= 0)
            return rc;
        work++;
    }
    if ((cx_txq_len(&t->txq) || unsent(t)) && !t->failed) {
        size_t before = cx_txq_len(&t->txq) + unsent(t);
        int rc = tls_flush(t);
        if (rc < 0 && !cx_deframe_ready(&t->df))
            return rc;
        if (cx_txq_len(&t->txq) + unsent(t) != before)
            work++;
    }
    /* budget 0 asks for sends only (a mux channel setting its handler): no frame may be
     * delivered then, or it goes to a handler that was not meant to see it */
    int r = budget > work ? cx_deframe_run(&t->df, tls_read, t, fn, arg, budget - work) : 0;
    if (r < 0 && t->df.err == r && !t->failed) { /* a bad header: the stream is lost */
        cx_err_wrap(r, "tls: bad frame from %s", t->peer);
        return tls_fail(t, r);
    }
    if (r < 0)
        return work ? work : r;
    return work + r;
}

static int tls_fd(struct cx_link *k) { return ((struct tls_link *)k)->fd; }

static int tls_arm(struct cx_link *k)
{
    struct tls_link *t = (struct tls_link *)k;
    if (t->linger_until) /* the peer's close wakes us (or the owner's deadline check) */
        return 0;
    if (t->failed)
        return -EAGAIN;
    if (t->hs_deadline) /* handshaking: the peer's bytes wake us; our own need a retry */
        return t->hs_want == SSL_ERROR_WANT_WRITE ? -EAGAIN : 0;
    if (cx_txq_len(&t->txq) || unsent(t))
        return -EAGAIN;
    if (SSL_pending(t->ssl) > 0) /* decrypted already: the socket will not say so */
        return -EAGAIN;
    if (SSL_has_pending(t->ssl)) { /* read ahead: a whole record waiting, or only part of one? */
        unsigned char c;
        size_t got = 0;
        ERR_clear_error();
        int r = SSL_peek_ex(t->ssl, &c, 1, &got);
        int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(t->ssl, r);
        ERR_clear_error();
        if (e != SSL_ERROR_WANT_READ) /* data, or an error progress will report */
            return -EAGAIN;
    }
    return cx_deframe_ready(&t->df) ? -EAGAIN : 0;
}

static void tls_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    (void)k;
    *c = (struct cx_driver_caps){.flags = CX_CAP_RELIABLE | CX_CAP_ORDERED | CX_CAP_STREAM,
                                 .max_msg = CX_FRAME_MAX_MSG, .poll_cost = 8, .rank = 35};
}

static void tls_close(struct cx_link *k)
{
    struct tls_link *t = (struct tls_link *)k;
    if (!t->failed && !t->hs_deadline) { /* close_notify, best effort (non-blocking) */
        ERR_clear_error();
        SSL_shutdown(t->ssl);
        cx_tls_sock_drain(t->sock);
    }
    ERR_clear_error();
    SSL_free(t->ssl);
    close(t->fd);
    free(t->sock);
    cx_txq_free(&t->txq);
    cx_deframe_free(&t->df);
    free(t->stage);
    free(t);
}

static int tls_set_limits(struct cx_link *k, const struct cx_link_limits *lim)
{
    if (!k || !lim)
        return cx_err_set(EINVAL, "tls: set_limits needs a link and limits");
    cx_deframe_set_limits(&((struct tls_link *)k)->df, lim->max_msg, lim->on_oversize);
    return 0;
}

const char *cx_tls_link_path(struct cx_link *k)
{
    if (!k || k->ops != &cx_tls_ops)
        return NULL;
    return BIO_get_ktls_send(SSL_get_wbio(((struct tls_link *)k)->ssl)) ? "kernel" : "user";
}

int cx_tls_link_resumed(struct cx_link *k)
{
    if (!k || k->ops != &cx_tls_ops)
        return cx_err_set(EINVAL, "tls: not a tls link (%s)", k ? k->ops->name : "NULL");
    struct tls_link *t = (struct tls_link *)k;
    return t->hs_deadline ? 0 : t->resumed;
}

int cx_tls_peer_subject(struct cx_link *k, char *buf, size_t cap)
{
    if (!k || k->ops != &cx_tls_ops)
        return cx_err_set(EINVAL, "tls: not a tls link (%s)", k ? k->ops->name : "NULL");
    struct tls_link *t = (struct tls_link *)k;
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    if (!cert)
        return cx_err_set(ENOENT, "tls: %s presented no certificate", t->peer);
    BIO *mem = BIO_new(BIO_s_mem());
    if (!mem)
        return cx_err_set(ENOMEM, "tls: out of memory");
    X509_NAME_print_ex(mem, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
    char *p;
    long n = BIO_get_mem_data(mem, &p);
    snprintf(buf, cap, "%.*s", (int)n, p);
    BIO_free(mem);
    return 0;
}

const struct cx_driver_ops cx_tls_ops = {
    .name = "tls",
    .scheme = "tls",
    .listen = cx_tls_listen,
    .listener_addr = cx_tls_listener_addr,
    .listener_fd = cx_tls_listener_fd,
    .accept = cx_tls_accept,
    .listener_close = cx_tls_listener_close,
    .connect = cx_tls_connect,
    .send = tls_send,
    .pending = tls_pending,
    .progress = tls_progress,
    .fd = tls_fd,
    .arm = tls_arm,
    .caps = tls_caps,
    .close = tls_close,
    .set_limits = tls_set_limits,
    .accept_start = cx_tls_accept_start,
};
