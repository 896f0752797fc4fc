/* A socket BIO for the tls driver. OpenSSL's own socket BIO writes with write(2), which
 * raises SIGPIPE when the peer is gone and kills a process that did not ignore it; a
 * library must not make that choice for its host, so this one sends with MSG_NOSIGNAL. It
 * gathers the records OpenSSL writes and sends them CX_TLS_WBUF bytes at a time (a system
 * call per 16 KiB record cost more than the copy), up to the next BIO_flush. It
 * also keeps the errno of the last failure and whether the peer closed, for the messages
 * of cx_tls_error. */
#include "transport/tls/cx_tls_int.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

static BIO_METHOD *method;
static pthread_once_t once = PTHREAD_ONCE_INIT;

int cx_tls_sock_drain(struct cx_tls_sock *s)
{
    while (s->woff < s->wlen) {
        ssize_t w = send(s->fd, s->wbuf + s->woff, s->wlen - s->woff, MSG_NOSIGNAL);
        if (w >= 0) {
            s->woff += (size_t)w;
            continue;
        }
        if (errno == EINTR)
            continue;
        s->err = errno;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    s->woff = s->wlen = 0;
    return 1;
}

/* Gathers records: one send(2) per CX_TLS_WBUF bytes rather than one per 16 KiB record. */
static int sock_write(BIO *b, const char *data, size_t len, size_t *written)
{
    struct cx_tls_sock *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (s->wlen + len > CX_TLS_WBUF) { /* no room at the tail: send what is buffered */
        int rc = cx_tls_sock_drain(s);
        if (rc < 0)
            return 0;
        if (s->woff) {
            memmove(s->wbuf, s->wbuf + s->woff, s->wlen - s->woff);
            s->wlen -= s->woff;
            s->woff = 0;
        }
    }
    size_t room = CX_TLS_WBUF - s->wlen;
    if (!room) {
        BIO_set_retry_write(b);
        return 0;
    }
    size_t n = len < room ? len : room;
    memcpy(s->wbuf + s->wlen, data, n);
    s->wlen += n;
    *written = n;
    return 1;
}

static int sock_read(BIO *b, char *data, size_t len, size_t *got)
{
    struct cx_tls_sock *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t r = recv(s->fd, data, len, 0);
        if (r > 0) {
            *got = (size_t)r;
            return 1;
        }
        if (r == 0) {
            s->eof = 1;
            s->err = 0;
            return 0;
        }
        if (errno == EINTR)
            continue;
        s->err = errno;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_read(b);
        return 0;
    }
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num, (void)ptr;
    if (cmd == BIO_CTRL_WPENDING) {
        struct cx_tls_sock *s = BIO_get_data(b);
        return (long)(s->wlen - s->woff);
    }
    if (cmd != BIO_CTRL_FLUSH)
        return 0;
    BIO_clear_retry_flags(b);
    int rc = cx_tls_sock_drain(BIO_get_data(b));
    if (rc == 0)
        BIO_set_retry_write(b);
    return rc > 0 ? 1 : -1;
}

static int sock_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static void make_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "conflux socket");
    if (!m)
        return;
    BIO_meth_set_write_ex(m, sock_write);
    BIO_meth_set_read_ex(m, sock_read);
    BIO_meth_set_ctrl(m, sock_ctrl);
    BIO_meth_set_create(m, sock_create);
    method = m;
}

BIO *cx_tls_bio_new(struct cx_tls_sock *s)
{
    pthread_once(&once, make_method);
    if (!method)
        return NULL;
    BIO *b = BIO_new(method);
    if (b)
        BIO_set_data(b, s);
    return b;
}
