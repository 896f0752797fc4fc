/* See cx_sc_scrape.h. A blocking client on purpose: it serves a command-line tool. */
#define _GNU_SOURCE
#include "sidecar/cx_sc_scrape.h"

#include "common/cx_error.h"

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BODY_MAX (4u << 20)

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int dial(const char *hostport, int timeout_ms)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host || !colon[1])
        return cx_err_set(EINVAL, "sidecar address '%s': give HOST:PORT", hostport);
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &ai);
    if (g != 0)
        return cx_err_set(EHOSTUNREACH, "sidecar address '%s': %s", hostport, gai_strerror(g));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        freeaddrinfo(ai);
        return cx_err_set(e, "socket: %s", strerror(e));
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc < 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof err;
        if (poll(&p, 1, timeout_ms) != 1)
            err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        errno = err;
        rc = err ? -1 : 0;
    }
    if (rc < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "sidecar %s: connect: %s", hostport, strerror(e));
    }
    return fd;
}

/* Reads the whole answer (HTTP/1.0: the server closes) into a malloc'd string. */
static int get_metrics(const char *hostport, int timeout_ms, char **out)
{
    int fd = dial(hostport, timeout_ms);
    if (fd < 0)
        return fd;
    long long deadline = now_ms() + timeout_ms;
    char req[512];
    int n = snprintf(req, sizeof req, "GET /metrics HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n", hostport);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        rc = cx_err_set(errno ? errno : EPIPE, "sidecar %s: send: %s", hostport, strerror(errno));
        goto error;
    }
    for (;;) {
        if (len + 65536 + 1 > cap) {
            if (cap >= BODY_MAX) {
                rc = cx_err_set(EMSGSIZE, "sidecar %s: /metrics is over %u bytes", hostport, BODY_MAX);
                goto error;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 131072);
            if (!nb) {
                rc = cx_err_set(ENOMEM, "out of memory");
                goto error;
            }
            buf = nb;
        }
        long long left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1) {
            rc = cx_err_set(ETIMEDOUT, "sidecar %s: no whole answer within %d ms", hostport, timeout_ms);
            goto error;
        }
        ssize_t r = recv(fd, buf + len, cap - len - 1, 0);
        if (r < 0) {
            rc = cx_err_set(errno, "sidecar %s: recv: %s", hostport, strerror(errno));
            goto error;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    if (!buf) {
        return cx_err_set(EPROTO, "sidecar %s: empty answer", hostport);
    }
    buf[len] = 0;
    int code = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1 || code != 200) {
        char first[80];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(buf, "\r\n"), buf);
        free(buf);
        return cx_err_set(EPROTO, "sidecar %s: /metrics answered '%s'", hostport, first);
    }
    *out = buf;
    return 0;
error:
    close(fd);
    free(buf);
    return rc;
}

/* The value of label `key` in a series' label set, unescaped into out. 0, or -1. */
static int label(const char *set, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = set; (p = strstr(p, key)); p += kl) {
        if ((p != set && p[-1] != ',' && p[-1] != '{') || strncmp(p + kl, "=\"", 2) != 0)
            continue;
        size_t n = 0;
        for (p += kl + 2; *p && *p != '"' && *p != '\n'; p++) {
            if (*p == '\\' && p[1] && p[1] != '\n')
                p++;
            if (n + 1 < cap)
                out[n++] = *p;
        }
        out[n] = 0;
        return *p == '"' ? 0 : -1;
    }
    return -1;
}

int cx_sc_scrape_links(const char *hostport, int timeout_ms,
                       void (*fn)(void *arg, const char *channel, const char *link), void *arg)
{
    char *body = NULL;
    int rc = get_metrics(hostport, timeout_ms, &body);
    if (rc < 0)
        return rc;
    static const char series[] = "conflux_channel_link{";
    int found = 0;
    char *save = NULL;
    for (char *line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, series, sizeof series - 1) != 0)
            continue;
        char ch[512], link[64];
        if (label(line + sizeof series - 2, "channel", ch, sizeof ch) == 0 &&
            label(line + sizeof series - 2, "link", link, sizeof link) == 0) {
            if (fn)
                fn(arg, ch, link);
            found++;
        }
    }
    free(body);
    return found;
}
