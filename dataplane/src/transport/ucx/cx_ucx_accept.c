/* The accepting side's address exchange, without blocking (accept_start, cx_driver.h): the
 * same bytes as the blocking one in cx_ucx.c (our u32 length and worker address; the
 * peer's; then, once each side has its endpoint, one byte each way), sent and received
 * with MSG_DONTWAIT from the link's progress. The control socket is in the link's epoll
 * set, so the peer's bytes wake its owner; a peer that sends nothing, or not all of it,
 * fails the link with -ETIMEDOUT at the deadline (the owner calls progress then). */
#define _GNU_SOURCE
#include "transport/ucx/cx_ucx_int.h"

#include "common/cx_error.h"
#include "transport/cx_addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Records why the exchange failed; later calls report it again. */
static int hs_fail(struct ucx_link *u, int rc)
{
    if (!u->failed) {
        u->failed = rc;
        snprintf(u->hs_why, sizeof u->hs_why, "%s", cx_errmsg());
    }
    return cx_err_set(-u->failed, "%s", u->hs_why);
}

/* Sends what the socket takes of hs_out. 0 or -errno. */
static int hs_send(struct ucx_link *u)
{
    while (u->hs_out_off < u->hs_out_len) {
        ssize_t w = send(u->sock, u->hs_out + u->hs_out_off, u->hs_out_len - u->hs_out_off,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (w < 0)
            return cx_err_set(errno, "ucx: accepting %s: address exchange: %s", u->hs_peer,
                              strerror(errno));
        u->hs_out_off += (size_t)w;
    }
    return 0;
}

/* Reads what came of the peer's bytes (up to hs_in_want). 0 or -errno. */
static int hs_recv(struct ucx_link *u)
{
    while (u->hs_in_len < u->hs_in_want) {
        ssize_t r = recv(u->sock, u->hs_in + u->hs_in_len, u->hs_in_want - u->hs_in_len,
                         MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (r <= 0)
            return cx_err_set(r == 0 ? ECONNRESET : errno, "ucx: accepting %s: the peer %s "
                              "during the address exchange", u->hs_peer,
                              r == 0 ? "hung up" : strerror(errno));
        u->hs_in_len += (size_t)r;
    }
    return 0;
}

int cx_ucx_hs_start(struct ucx_link *u, const void *addr, size_t alen, int handshake_ms)
{
    u->hs_out = malloc(4 + alen + 1);
    u->hs_in = malloc(4);
    if (!u->hs_out || !u->hs_in)
        return cx_err_set(ENOMEM, "ucx: out of memory");
    uint32_t l32 = (uint32_t)alen;
    memcpy(u->hs_out, &l32, 4);
    memcpy(u->hs_out + 4, addr, alen);
    u->hs_out_len = 4 + alen; /* the last byte goes once our endpoint exists */
    u->hs_in_want = 4;
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof sa;
    char ip[INET_ADDRSTRLEN] = "?";
    if (getpeername(u->sock, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET)
        inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(u->hs_peer, sizeof u->hs_peer, "%s:%u", ip, ntohs(sa.sin_port));
    u->hs = 1;
    u->hs_ms = handshake_ms;
    u->hs_deadline = now_ms() + handshake_ms;
    int rc = hs_send(u);
    return rc < 0 ? hs_fail(u, rc) : 0;
}

int cx_ucx_hs_step(struct ucx_link *u)
{
    if (u->failed)
        return cx_err_set(-u->failed, "%s", u->hs_why);
    int rc;
    if ((rc = hs_send(u)) < 0 || (rc = hs_recv(u)) < 0)
        return hs_fail(u, rc);
    if (u->hs_in_want == 4 && u->hs_in_len == 4) { /* the length: then the address and a byte */
        uint32_t plen;
        memcpy(&plen, u->hs_in, 4);
        uint8_t *in = plen && plen <= CX_UCX_ADDR_MAX ? realloc(u->hs_in, 4 + plen + 1) : NULL;
        if (!in)
            return hs_fail(u, plen && plen <= CX_UCX_ADDR_MAX
                                  ? cx_err_set(ENOMEM, "ucx: out of memory")
                                  : cx_err_set(EPROTO, "ucx: accepting %s: the peer sent a "
                                               "%u-byte worker address", u->hs_peer, plen));
        u->hs_in = in;
        u->hs_in_want = 4 + plen + 1;
        if ((rc = hs_recv(u)) < 0)
            return hs_fail(u, rc);
    }
    if (!u->ep && u->hs_in_want > 4 && u->hs_in_len >= u->hs_in_want - 1) {
        if ((rc = cx_ucx_ep_create(u, u->hs_in + 4)) < 0)
            return hs_fail(u, rc);
        u->hs_out[u->hs_out_len++] = 1; /* our endpoint exists: traffic may come */
        if ((rc = hs_send(u)) < 0)
            return hs_fail(u, rc);
    }
    if (u->ep && u->hs_in_len == u->hs_in_want && u->hs_out_off == u->hs_out_len) {
        u->hs = 0;
        free(u->hs_out);
        free(u->hs_in);
        u->hs_out = u->hs_in = NULL;
        cx_tcp_tune(u->sock);
        cx_ucx_share_add(u);
        return 1;
    }
    if (now_ms() >= u->hs_deadline) {
        cx_err_set(ETIMEDOUT, "ucx: accepting %s: handshake not done within %d ms", u->hs_peer,
                   u->hs_ms);
        return hs_fail(u, -ETIMEDOUT);
    }
    return 0;
}
