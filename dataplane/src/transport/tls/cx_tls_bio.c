/* A socket BIO for the tls driver. OpenSSL's own socket BIO writes with write(2), which
 * raises SIGPIPE when the peer is gone and kills a process that did not ignore it; a
 * library must not make that choice for its host, so this one sends with MSG_NOSIGNAL. It
 * also keeps the errno of the last failure and whether the peer closed, for the messages
 * of cx_tls_error. */
#include "transport/tls/cx_tls_int.h"

#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>

static BIO_METHOD *method;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int sock_write(BIO *b, const char *data, size_t len, size_t *written)
{
    struct cx_tls_sock *s = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (;;) {
        ssize_t w = send(s->fd, data, len, MSG_NOSIGNAL);
        if (w >= 0) {
            *written = (size_t)w;
            return 1;
        }
        if (errno == EINTR)
            continue;
        s->err = errno;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            BIO_set_retry_write(b);
        return 0;
    }
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
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* nothing buffered here */
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
