/* listen, accept and connect of the tls driver: the TCP connection, the TLS 1.3 handshake
 * with mutual authentication, and the accepting side's confirmation frame (see cx_tls.h). */
#define _GNU_SOURCE
#include "transport/tls/cx_tls_int.h"

#include "common/cx_error.h"
#include "transport/cx_addr.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HANDSHAKE_MS 10000
#define LINGER_MS 200
#define FIRST_READ (64u << 10)

struct cx_listener {
    int fd;
    char addr[96];
};

long long cx_tls_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int cx_tls_listen(const char *addr, struct cx_listener **out)
{
    const char *hp = cx_addr_strip(addr, "tls");
    if (!hp)
        return cx_err_set(EINVAL, "tls: address '%s' is not tls://host:port", addr ? addr : "(null)");
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hp, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "tls");
    SSL_CTX *ctx;
    if ((rc = cx_tls_ctx_acquire(1, &ctx)) < 0) /* refuse to listen without credentials */
        return cx_err_wrap(rc, "tls: cannot listen on %s", hp);
    SSL_CTX_free(ctx);
    int fd = cx_tcp_listen_fd(hp, &sa);
    if (fd < 0)
        return cx_err_wrap(fd, "tls");
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return cx_err_set(ENOMEM, "tls: out of memory");
    }
    l->fd = fd;
    cx_addr_format_inet("tls", &sa, l->addr, sizeof l->addr);
    *out = l;
    return 0;
}

const char *cx_tls_listener_addr(struct cx_listener *l) { return l->addr; }
int cx_tls_listener_fd(struct cx_listener *l) { return l->fd; }

void cx_tls_listener_close(struct cx_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}

/* Waits until fd is ready for what OpenSSL asked (its last SSL_get_error). */
static int wait_io(int fd, int ssl_err, long long deadline)
{
    long long left = deadline - cx_tls_now_ms();
    if (left <= 0)
        return -ETIMEDOUT;
    struct pollfd p = {.fd = fd, .events = ssl_err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN};
    if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
        return -errno;
    return 0;
}

/* After a refused handshake: let our alert reach the peer before the socket goes. Closing
 * with its unread bytes in our buffer would send a reset that can overtake the alert. */
static void linger_close(int fd)
{
    shutdown(fd, SHUT_WR);
    long long deadline = cx_tls_now_ms() + LINGER_MS;
    char sink[4096];
    for (;;) {
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            break;
        if (r < 0 && wait_io(fd, SSL_ERROR_WANT_READ, deadline) < 0)
            break;
    }
    close(fd);
}

void cx_tls_welcome_frame(uint8_t out[CX_FRAME_HDR_SIZE])
{
    struct cx_frame_hdr h = {.type = CX_FRAME_CTRL, .channel = 0, .format = CX_TLS_CTRL_TOKEN};
    cx_frame_encode(&h, out);
}

static int is_welcome(const uint8_t *in, size_t n)
{
    struct cx_frame_hdr h;
    return cx_frame_decode(in, n, &h) == 0 && h.type == CX_FRAME_CTRL && h.channel == 0 &&
           h.format == CX_TLS_CTRL_TOKEN && h.length == 0;
}

/* A session object for one side over fd (ctx's reference is taken over; on failure fd is
 * closed): the socket BIO, the expected peer name, SNI. */
static int ssl_new(int fd, SSL_CTX *ctx, int server, const char *peer, const char *sni,
                   SSL **ssl_out, struct cx_tls_sock **sock_out)
{
    const char *what = server ? "accepting" : "connecting to";
    struct cx_tls_sock *sock = calloc(1, sizeof *sock);
    SSL *ssl = sock ? SSL_new(ctx) : NULL;
    SSL_CTX_free(ctx); /* the session holds its own reference */
    BIO *bio = ssl ? cx_tls_bio_new(sock) : NULL;
    if (!bio) {
        SSL_free(ssl), free(sock), close(fd);
        return cx_err_set(ENOMEM, "tls: %s %s: out of memory", what, peer);
    }
    sock->fd = fd;
    SSL_set_bio(ssl, bio, bio);
    char name[256];
    cx_tls_peer_name(name, sizeof name);
    if (*name) { /* the peer's certificate must name it (checked in verification) */
        SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        SSL_set1_host(ssl, name);
    }
    if (server) {
        SSL_set_accept_state(ssl);
    } else {
        SSL_set_connect_state(ssl);
        const char *host = *name ? name : sni; /* SNI: lets a WAN edge route by name */
        if (host && *host)
            SSL_set_tlsext_host_name(ssl, host);
        if (cx_tls_resume_offer(ssl, peer, name) < 0) { /* a ticket from an earlier link */
            SSL_free(ssl), free(sock), close(fd);
            return cx_err_set(ENOMEM, "tls: %s %s: out of memory", what, peer);
        }
    }
    *ssl_out = ssl;
    *sock_out = sock;
    return 0;
}

/* Runs one side of a session on a connected, non-blocking socket (fd owned) and makes the
 * link. server: accept state, sends the welcome; else connect state, waits for it. */
static int session(int fd, SSL_CTX *ctx, int server, const char *peer, const char *sni,
                   struct cx_link **out)
{
    const char *what = server ? "accepting" : "connecting to";
    SSL *ssl;
    struct cx_tls_sock *sock;
    int rc = ssl_new(fd, ctx, server, peer, sni, &ssl, &sock);
    if (rc < 0)
        return rc;
    long long deadline = cx_tls_now_ms() + HANDSHAKE_MS;
    uint8_t *first = NULL;
    size_t have = 0;
    for (;;) {
        ERR_clear_error();
        int r = SSL_do_handshake(ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            rc = cx_tls_error(ssl, r, sock, what, peer);
            goto refused;
        }
        if ((rc = wait_io(fd, e, deadline)) < 0)
            goto timeout;
    }
    if ((rc = cx_tls_resumed_check(ssl, what, peer)) < 0)
        goto refused;
    if (server) {
        uint8_t w[CX_FRAME_HDR_SIZE];
        cx_tls_welcome_frame(w);
        for (;;) {
            ERR_clear_error();
            int r = SSL_write(ssl, w, sizeof w);
            if (r > 0 && cx_tls_sock_drain(sock) > 0) /* (the BIO gathers records) */
                break;
            if (r > 0) { /* written into the BIO: sent once the socket takes it */
                if (sock->err != EAGAIN && sock->err != EWOULDBLOCK) {
                    rc = cx_err_set(sock->err, "tls: %s %s: %s", what, peer, strerror(sock->err));
                    goto refused;
                }
                for (;;) {
                    if ((rc = wait_io(fd, SSL_ERROR_WANT_WRITE, deadline)) < 0)
                        goto timeout;
                    if ((r = cx_tls_sock_drain(sock)) != 0)
                        break;
                }
                if (r > 0)
                    break;
                rc = cx_err_set(sock->err, "tls: %s %s: %s", what, peer, strerror(sock->err));
                goto refused;
            }
            int e = SSL_get_error(ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                rc = cx_tls_error(ssl, r, sock, what, peer);
                goto refused;
            }
            if ((rc = wait_io(fd, e, deadline)) < 0)
                goto timeout;
        }
    } else { /* our handshake is over, but is our certificate accepted? the welcome says so */
        first = malloc(FIRST_READ);
        if (!first) {
            rc = cx_err_set(ENOMEM, "tls: out of memory");
            goto refused;
        }
        while (have < CX_FRAME_HDR_SIZE) {
            size_t got = 0;
            ERR_clear_error();
            int r = SSL_read_ex(ssl, first + have, FIRST_READ - have, &got);
            if (r == 1) {
                have += got;
                continue;
            }
            int e = SSL_get_error(ssl, r);
            if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
                rc = cx_tls_error(ssl, r, sock, what, peer);
                goto refused;
            }
            if ((rc = wait_io(fd, e, deadline)) < 0)
                goto timeout;
        }
        if (!is_welcome(first, have)) {
            rc = cx_err_set(EPROTO, "tls: %s %s: the peer did not confirm the session (not a "
                            "Conflux tls listener?)", what, peer);
            goto refused;
        }
    }
    rc = cx_tls_link_new(fd, ssl, sock, peer, first ? first + CX_FRAME_HDR_SIZE : NULL,
                         have > CX_FRAME_HDR_SIZE ? have - CX_FRAME_HDR_SIZE : 0, out);
    free(first);
    return rc;
timeout:
    rc = rc == -ETIMEDOUT ? cx_err_set(ETIMEDOUT, "tls: %s %s: handshake not done within %d ms",
                                       what, peer, HANDSHAKE_MS)
                          : cx_err_set(-rc, "tls: %s %s: poll: %s", what, peer, strerror(-rc));
refused:
    free(first);
    cx_tls_sock_drain(sock); /* an alert OpenSSL left in the BIO */
    ERR_clear_error();
    SSL_free(ssl);
    free(sock);
    linger_close(fd);
    return rc;
}

/* Takes one pending connection (-EAGAIN when none, without waiting when timeout_ms is 0):
 * its fd, tuned, and "ip:port" of the peer. */
static int take_peer(struct cx_listener *l, int timeout_ms, char peer[64])
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    int fd;
    struct sockaddr_in sa;
    for (;;) {
        socklen_t len = sizeof sa;
        fd = accept4(l->fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);
        if (fd >= 0)
            break;
        if (errno == EAGAIN && timeout_ms == 0)
            return -EAGAIN;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return cx_err_set(errno, "tls: accept on %s: %s", l->addr, strerror(errno));
        int r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return cx_err_set(ETIMEDOUT, "tls: no peer on %s within %d ms", l->addr, timeout_ms);
        if (r < 0 && errno != EINTR)
            return cx_err_set(errno, "tls: poll: %s", strerror(errno));
    }
    cx_tcp_tune(fd);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(peer, 64, "%s:%u", ip, ntohs(sa.sin_port));
    return fd;
}

int cx_tls_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    char peer[64];
    int fd = take_peer(l, timeout_ms, peer);
    if (fd < 0)
        return fd == -EAGAIN ? cx_err_set(ETIMEDOUT, "tls: no peer on %s", l->addr) : fd;
    SSL_CTX *ctx;
    int rc = cx_tls_ctx_acquire(1, &ctx); /* the current credentials (renewed files reloaded) */
    if (rc < 0) {
        close(fd);
        return cx_err_wrap(rc, "tls: accepting %s", peer);
    }
    return session(fd, ctx, 1, peer, NULL, out);
}

/* accept_start (cx_driver.h): the session is set up as by accept, but its handshake is left
 * to the link's progress, so one silent or slow peer never holds the caller's thread. */
int cx_tls_accept_start(struct cx_listener *l, int handshake_ms, struct cx_link **out)
{
    if (!l || !out || handshake_ms <= 0)
        return cx_err_set(EINVAL, "tls: accept_start needs a listener, a link pointer and a "
                          "positive deadline (got %d ms)", handshake_ms);
    char peer[64];
    int fd = take_peer(l, 0, peer);
    if (fd < 0)
        return fd;
    SSL_CTX *ctx;
    int rc = cx_tls_ctx_acquire(1, &ctx);
    if (rc < 0) {
        close(fd);
        return cx_err_wrap(rc, "tls: accepting %s", peer);
    }
    SSL *ssl;
    struct cx_tls_sock *sock;
    if ((rc = ssl_new(fd, ctx, 1, peer, NULL, &ssl, &sock)) < 0)
        return rc;
    return cx_tls_link_new_accepting(fd, ssl, sock, peer, handshake_ms, out);
}

int cx_tls_connect(const char *addr, struct cx_link **out)
{
    const char *hp = cx_addr_strip(addr, "tls");
    if (!hp)
        return cx_err_set(EINVAL, "tls: address '%s' is not tls://host:port", addr ? addr : "(null)");
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hp, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "tls");
    SSL_CTX *ctx;
    if ((rc = cx_tls_ctx_acquire(0, &ctx)) < 0)
        return cx_err_wrap(rc, "tls: connecting to %s", hp);
    int fd = cx_tcp_connect_fd(hp);
    if (fd < 0) {
        SSL_CTX_free(ctx);
        return cx_err_wrap(fd, "tls");
    }
    cx_tcp_tune(fd);
    char host[256];
    snprintf(host, sizeof host, "%.*s", (int)(strrchr(hp, ':') - hp), hp);
    struct in_addr ip4;
    const char *sni = inet_pton(AF_INET, host, &ip4) == 1 ? NULL : host; /* SNI is for names */
    return session(fd, ctx, 0, hp, sni, out);
}
