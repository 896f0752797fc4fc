/* The tls driver's links and its ops table (cx_tls_ops; listen/accept/connect and the
 * handshake are in cx_tls_handshake.c). A link is one TLS session over a non-blocking TCP
 * socket, framed like the tcp driver: encoded header + payload back to back. send copies
 * the frame into the link's queue (TLS encrypts from one buffer anyway) and writes what
 * the socket takes; progress writes the rest and reads frames, delivering small ones in
 * place from a 256 KiB buffer and reading a large payload straight into its own buffer. */
#include "transport/tls/cx_tls_int.h"

#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <openssl/err.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RBUF_SIZE (256u << 10)
#define MAX_IOV 64
#define WRITE_CHUNK (1u << 20) /* per SSL_write: bounded, and never shrinking on a retry */

struct tls_link {
    struct cx_link base;
    int fd;
    SSL *ssl;
    struct cx_tls_sock *sock;
    int failed; /* negative errno once the link broke */
    char why[320];
    char peer[64];
    struct cx_txq txq;
    uint8_t *rbuf;
    size_t roff, rlen; /* unparsed bytes are rbuf[roff..rlen) */
    struct cx_frame_hdr big_hdr;
    uint8_t *big; /* payload being read directly (large message), or NULL */
    size_t big_got;
};

int cx_tls_link_new(int fd, SSL *ssl, struct cx_tls_sock *sock, const char *peer,
                    const uint8_t *rbuf, size_t rlen, struct cx_link **out)
{
    struct tls_link *t = calloc(1, sizeof *t);
    uint8_t *rb = malloc(RBUF_SIZE);
    if (!t || !rb || rlen > RBUF_SIZE) {
        free(t), free(rb), SSL_free(ssl), free(sock), close(fd);
        return cx_err_set(ENOMEM, "tls: out of memory for a link");
    }
    t->base.ops = &cx_tls_ops;
    t->fd = fd;
    t->ssl = ssl;
    t->sock = sock;
    snprintf(t->peer, sizeof t->peer, "%s", peer);
    t->rbuf = rb;
    if (rlen)
        memcpy(rb, rbuf, rlen);
    t->rlen = rlen;
    *out = &t->base;
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

/* Writes from the queue until it is empty or the socket is full. */
static int tls_flush(struct tls_link *t)
{
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
            return 0; /* retried later with at least these bytes, as OpenSSL requires */
        return ssl_fail(t, w, "send to");
    }
    return 0;
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
    int rc = cx_txq_push(&t->txq, v, iovcnt + 1, 0);
    if (rc < 0)
        return cx_err_wrap(rc, "tls");
    return tls_flush(t);
}

static size_t tls_pending(struct cx_link *k) { return cx_txq_len(&((struct tls_link *)k)->txq); }

/* Reads into dst: bytes, 0 for "would block", or a negative errno. */
static long tls_read(struct tls_link *t, void *dst, size_t n)
{
    size_t got = 0;
    ERR_clear_error();
    int r = SSL_read_ex(t->ssl, dst, n, &got);
    if (r == 1)
        return (long)got;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return 0;
    return ssl_fail(t, r, "receive from");
}

static int tls_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct tls_link *t = (struct tls_link *)k;
    int work = 0;
    if (t->failed && t->roff == t->rlen)
        return cx_err_set(-t->failed, "%s", t->why);
    if (cx_txq_len(&t->txq) && !t->failed) {
        size_t before = cx_txq_len(&t->txq);
        int rc = tls_flush(t);
        if (rc < 0 && t->roff == t->rlen)
            return rc;
        if (cx_txq_len(&t->txq) != before)
            work++;
    }
    while (work < budget) {
        if (t->big) { /* large payload straight into its buffer */
            if (t->failed)
                return work ? work : cx_err_set(-t->failed, "%s", t->why);
            long r = tls_read(t, t->big + t->big_got, t->big_hdr.length - t->big_got);
            if (r <= 0)
                return r < 0 ? (int)r : work;
            t->big_got += (size_t)r;
            if (t->big_got == t->big_hdr.length) {
                uint8_t *b = t->big;
                t->big = NULL;
                fn(arg, &t->big_hdr, b, t->big_hdr.length);
                free(b);
                work++;
            }
            continue;
        }
        size_t avail = t->rlen - t->roff;
        if (avail >= CX_FRAME_HDR_SIZE) {
            struct cx_frame_hdr h;
            int rc = cx_frame_decode(t->rbuf + t->roff, avail, &h);
            if (rc < 0) {
                cx_err_wrap(rc, "tls: bad frame from %s", t->peer);
                return tls_fail(t, rc);
            }
            if (avail - CX_FRAME_HDR_SIZE >= h.length) {
                t->roff += CX_FRAME_HDR_SIZE + h.length;
                fn(arg, &h, t->rbuf + t->roff - h.length, h.length);
                work++;
                continue;
            }
            if (h.length > RBUF_SIZE / 2) {
                size_t have = avail - CX_FRAME_HDR_SIZE;
                t->big = malloc(h.length);
                if (!t->big) {
                    cx_err_set(ENOMEM, "tls: no memory for a %u-byte message", h.length);
                    return tls_fail(t, -ENOMEM);
                }
                memcpy(t->big, t->rbuf + t->roff + CX_FRAME_HDR_SIZE, have);
                t->big_got = have;
                t->big_hdr = h;
                t->roff = t->rlen = 0;
                continue;
            }
        }
        if (t->failed)
            return work ? work : cx_err_set(-t->failed, "%s", t->why);
        if (t->roff) { /* compact, then read more */
            memmove(t->rbuf, t->rbuf + t->roff, avail);
            t->roff = 0;
            t->rlen = avail;
        }
        long r = tls_read(t, t->rbuf + t->rlen, RBUF_SIZE - t->rlen);
        if (r < 0)
            return work ? work : (int)r;
        if (r == 0)
            break;
        t->rlen += (size_t)r;
    }
    return work;
}

static int tls_fd(struct cx_link *k) { return ((struct tls_link *)k)->fd; }

static int tls_arm(struct cx_link *k)
{
    struct tls_link *t = (struct tls_link *)k;
    if (cx_txq_len(&t->txq) || t->failed)
        return -EAGAIN;
    if (SSL_pending(t->ssl) > 0) /* decrypted already: the socket will not say so */
        return -EAGAIN;
    if (!t->big && t->rlen - t->roff >= CX_FRAME_HDR_SIZE)
        return -EAGAIN;
    return 0;
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
    if (!t->failed) { /* close_notify, best effort (non-blocking): the peer sees a clean end */
        ERR_clear_error();
        SSL_shutdown(t->ssl);
    }
    ERR_clear_error();
    SSL_free(t->ssl);
    close(t->fd);
    free(t->sock);
    cx_txq_free(&t->txq);
    free(t->rbuf);
    free(t->big);
    free(t);
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
};
