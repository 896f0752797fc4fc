/* listen, accept and connect of the udp driver: the HELLO / WELCOME handshake that gives
 * every accepted peer its own connected socket on the listener's port (see cx_udp.h). */
#define _GNU_SOURCE
#include "transport/udp/cx_udp_int.h"

#include "common/cx_error.h"
#include "transport/cx_addr.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RECENT 64              /* HELLOs remembered to ignore duplicates */
#define CONNECT_TIMEOUT_MS 5000
#define HELLO_RTO_MS 50
#define HELLO_RTO_MAX_MS 400

struct cx_listener {
    int fd;
    struct sockaddr_in bound;
    char addr[64];
    struct { struct sockaddr_in from; uint64_t nonce; } recent[RECENT];
    unsigned nrecent;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int same_peer(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
    return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

int cx_udp_listen(const char *addr, struct cx_listener **out)
{
    const char *hp = cx_addr_strip(addr, "udp");
    if (!hp)
        return cx_err_set(EINVAL, "udp: address '%s' is not udp://host:port", addr ? addr : "(null)");
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hp, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "udp");
    int fd = cx_udp_socket();
    if (fd < 0)
        return fd;
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof one); /* which local address a HELLO hit */
    /* bind without SO_REUSEADDR so a port in use is refused, then allow it: the accepted
     * sockets bind the same port (UDP shares a port only when every socket on it agrees) */
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "udp: listen on %s: %s", hp, strerror(e));
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return cx_err_set(ENOMEM, "udp: out of memory");
    }
    l->fd = fd;
    socklen_t len = sizeof l->bound;
    getsockname(fd, (struct sockaddr *)&l->bound, &len);
    cx_addr_format_inet("udp", &l->bound, l->addr, sizeof l->addr);
    *out = l;
    return 0;
}

const char *cx_udp_listener_addr(struct cx_listener *l) { return l->addr; }
int cx_udp_listener_fd(struct cx_listener *l) { return l->fd; }

void cx_udp_listener_close(struct cx_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}

/* Reads one datagram from the listener: 1 = a HELLO not seen before (from, local, nonce
 * set), 0 = nothing (more) to read, or something else that was dropped (*dropped = 1). */
static int read_hello(struct cx_listener *l, struct sockaddr_in *from, struct in_addr *local,
                      uint64_t *nonce, int *dropped)
{
    uint8_t d[128];
    union { char buf[CMSG_SPACE(sizeof(struct in_pktinfo))]; struct cmsghdr align; } c;
    struct iovec v = {d, sizeof d};
    struct msghdr m = {.msg_name = from, .msg_namelen = sizeof *from, .msg_iov = &v,
                       .msg_iovlen = 1, .msg_control = c.buf, .msg_controllen = sizeof c.buf};
    ssize_t n = recvmsg(l->fd, &m, MSG_DONTWAIT);
    *dropped = 0;
    if (n < 0)
        return 0;
    *dropped = 1;
    int op;
    if (!cx_udp_ctrl_parse(d, (size_t)n, &op, nonce) || op != UDP_HELLO)
        return 0; /* not for a listener (a stray datagram, a late frame for a closed link) */
    for (unsigned i = 0; i < l->nrecent && i < RECENT; i++)
        if (l->recent[i].nonce == *nonce && same_peer(&l->recent[i].from, from))
            return 0; /* a duplicate queued before its connected socket existed */
    *local = l->bound.sin_addr;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_PKTINFO)
            *local = ((struct in_pktinfo *)CMSG_DATA(cm))->ipi_addr;
    *dropped = 0;
    return 1;
}

int cx_udp_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    long long deadline = now_ms() + timeout_ms;
    struct sockaddr_in from, local = l->bound;
    uint64_t nonce;
    for (;;) {
        int dropped;
        if (read_hello(l, &from, &local.sin_addr, &nonce, &dropped))
            break;
        if (dropped)
            continue;
        long long left = timeout_ms < 0 ? -1 : deadline - now_ms();
        if (timeout_ms >= 0 && left <= 0)
            return cx_err_set(ETIMEDOUT, "udp: no peer on %s within %d ms", l->addr, timeout_ms);
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return cx_err_set(errno, "udp: poll: %s", strerror(errno));
    }
    char peer[32];
    cx_udp_addr_str(&from, peer, sizeof peer);
    int fd = cx_udp_socket();
    if (fd < 0)
        return cx_err_wrap(fd, "udp: accepting %s", peer);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&local, sizeof local) < 0 ||
        connect(fd, (struct sockaddr *)&from, sizeof from) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "udp: accepting %s on %s: %s", peer, l->addr, strerror(e));
    }
    l->recent[l->nrecent++ % RECENT] = (typeof(l->recent[0])){from, nonce};
    int rc = cx_udp_ctrl_send(fd, NULL, UDP_WELCOME, nonce);
    if (rc < 0 && rc != -EAGAIN && rc != -ENOBUFS) { /* a lost WELCOME is repaired by a HELLO */
        close(fd);
        return cx_err_wrap(rc, "udp: accepting %s", peer);
    }
    return cx_udp_link_new(fd, &from, nonce, 1, out);
}

int cx_udp_connect(const char *addr, struct cx_link **out)
{
    const char *hp = cx_addr_strip(addr, "udp");
    if (!hp)
        return cx_err_set(EINVAL, "udp: address '%s' is not udp://host:port", addr ? addr : "(null)");
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hp, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "udp");
    int fd = cx_udp_socket();
    if (fd < 0)
        return fd;
    socklen_t salen = sizeof sa;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getpeername(fd, (struct sockaddr *)&sa, &salen) < 0) { /* 0.0.0.0 became 127.0.0.1 */
        int e = errno;
        close(fd);
        return cx_err_set(e, "udp: connect to %s: %s", hp, strerror(e));
    }
    uint64_t nonce;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != sizeof nonce)
        nonce = ((uint64_t)getpid() << 32) ^ (uint64_t)now_ms() ^ (uint64_t)(uintptr_t)&nonce;
    long long deadline = now_ms() + CONNECT_TIMEOUT_MS;
    int rto = HELLO_RTO_MS;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            break;
        rc = cx_udp_ctrl_send(fd, NULL, UDP_HELLO, nonce);
        if (rc == -ECONNREFUSED)
            goto refused;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, rto < left ? rto : (int)left);
        rto = rto * 2 > HELLO_RTO_MAX_MS ? HELLO_RTO_MAX_MS : rto * 2;
        uint8_t d[128];
        ssize_t n;
        while ((n = recv(fd, d, sizeof d, MSG_DONTWAIT)) >= 0 || errno == EINTR || errno == ECONNREFUSED) {
            if (n < 0 && errno == ECONNREFUSED)
                goto refused;
            int op;
            uint64_t got;
            if (n > 0 && cx_udp_ctrl_parse(d, (size_t)n, &op, &got) && op == UDP_WELCOME && got == nonce)
                return cx_udp_link_new(fd, &sa, nonce, 0, out);
        }
    }
    close(fd);
    return cx_err_set(ETIMEDOUT, "udp: no answer from %s within %d ms (nobody listening, or "
                      "the path drops datagrams)", addr, CONNECT_TIMEOUT_MS);
refused:
    close(fd);
    return cx_err_set(ECONNREFUSED, "udp: nobody listens on %s (ICMP port unreachable)", addr);
}
