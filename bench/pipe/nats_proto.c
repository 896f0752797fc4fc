/* A minimal NATS client protocol over a TCP socket; see nats_proto.h. Written from the
 * protocol's public description (text control lines ending in CRLF, payloads counted in
 * bytes), not from any client library. */
#include "nats_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define WBUF_CAP (256u << 10)
#define DIRECT_MIN (32u << 10) /* payloads this large skip the write buffer */
#define RBUF_MIN (4u << 20)
#define INBOX_SID 999999

struct nc {
    int fd;
    char err[256];
    uint8_t *w;
    size_t wlen;
    uint8_t *r;
    size_t rcap, rpos, rlen;
    unsigned inbox_seq;
    int inbox_subscribed;
    char inbox[64];
};

static int fail(struct nc *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct nc *c, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return -err;
}

const char *nc_errmsg(struct nc *c) { return c->err; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int write_all(struct nc *c, struct iovec *v, int n)
{
    while (n > 0) {
        ssize_t k = writev(c->fd, v, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return fail(c, errno == EPIPE ? ECONNRESET : errno, "write to nats-server: %s", strerror(errno));
        while (n > 0 && (size_t)k >= v->iov_len) {
            k -= (ssize_t)v->iov_len;
            v++, n--;
        }
        if (n > 0) {
            v->iov_base = (uint8_t *)v->iov_base + k;
            v->iov_len -= (size_t)k;
        }
    }
    return 0;
}

int nc_flush(struct nc *c)
{
    if (!c->wlen)
        return 0;
    struct iovec v = {c->w, c->wlen};
    c->wlen = 0;
    return write_all(c, &v, 1);
}

static int put(struct nc *c, const void *p, size_t len)
{
    if (c->wlen + len > WBUF_CAP) {
        int rc = nc_flush(c);
        if (rc < 0)
            return rc;
    }
    if (len > WBUF_CAP) {
        struct iovec v = {(void *)p, len};
        return write_all(c, &v, 1);
    }
    memcpy(c->w + c->wlen, p, len);
    c->wlen += len;
    return 0;
}

static int putf(struct nc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int putf(struct nc *c, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        return fail(c, EINVAL, "protocol line too long");
    return put(c, line, (size_t)n);
}

int nc_sub(struct nc *c, const char *subject, int sid)
{
    return putf(c, "SUB %s %d\r\n", subject, sid);
}

int nc_pub(struct nc *c, const char *subject, const char *reply, const void *p, size_t len)
{
    int rc = reply ? putf(c, "PUB %s %s %zu\r\n", subject, reply, len) : putf(c, "PUB %s %zu\r\n", subject, len);
    if (rc < 0)
        return rc;
    if (len < DIRECT_MIN) {
        if ((rc = put(c, p, len)) < 0)
            return rc;
        return put(c, "\r\n", 2);
    }
    struct iovec v[3] = {{c->w, c->wlen}, {(void *)p, len}, {"\r\n", 2}};
    c->wlen = 0;
    return write_all(c, v, 3);
}

/* Reads more bytes into the buffer, waiting up to timeout_ms: 1 got some, 0 timeout. */
static int fill(struct nc *c, int timeout_ms)
{
    if (c->rpos > 0) { /* keep the unparsed tail at the front */
        memmove(c->r, c->r + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    if (c->rlen == c->rcap) {
        size_t cap = c->rcap * 2;
        uint8_t *n = realloc(c->r, cap);
        if (!n)
            return fail(c, ENOMEM, "receive buffer of %zu bytes", cap);
        c->r = n;
        c->rcap = cap;
    }
    for (;;) {
        ssize_t k = recv(c->fd, c->r + c->rlen, c->rcap - c->rlen, MSG_DONTWAIT);
        if (k > 0) {
            c->rlen += (size_t)k;
            return 1;
        }
        if (k == 0)
            return fail(c, ECONNRESET, "nats-server closed the connection");
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return fail(c, errno, "read from nats-server: %s", strerror(errno));
        if (timeout_ms == 0)
            return 0;
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        int p = poll(&pf, 1, timeout_ms);
        if (p == 0)
            return 0;
        if (p < 0 && errno != EINTR)
            return fail(c, errno, "poll: %s", strerror(errno));
    }
}

/* Splits a control line into at most max space-separated words (in place). */
static int words(char *line, char **w, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(line, " \t", &save); p && n < max; p = strtok_r(NULL, " \t", &save))
        w[n++] = p;
    return n;
}

/* Parses one protocol item at rpos: 1 a message, 2 something else consumed, 0 need more.
 * The buffer is only modified (words NUL-terminated in place) once the item is whole. */
static int parse(struct nc *c, struct nc_msg *m)
{
    uint8_t *b = c->r + c->rpos;
    size_t avail = c->rlen - c->rpos;
    uint8_t *eol = memchr(b, '\n', avail);
    if (!eol)
        return avail > 4096 ? fail(c, EPROTO, "control line longer than 4096 bytes") : 0;
    size_t ll = (size_t)(eol - b) + 1;
    char tmp[1024];
    size_t tl = ll - 1 - (ll >= 2 && b[ll - 2] == '\r');
    if (tl >= sizeof tmp)
        return fail(c, EPROTO, "control line of %zu bytes", tl);
    memcpy(tmp, b, tl);
    tmp[tl] = '\0';
    int hmsg = strncmp(tmp, "HMSG ", 5) == 0;
    if (hmsg || strncmp(tmp, "MSG ", 4) == 0) {
        char *w[6];
        int n = words(tmp, w, 6);
        size_t hdr = 0, total;
        int has_reply;
        if (hmsg && (n == 5 || n == 6)) {
            has_reply = n == 6;
            hdr = strtoul(w[n - 2], NULL, 10);
            total = strtoul(w[n - 1], NULL, 10);
        } else if (!hmsg && (n == 4 || n == 5)) {
            has_reply = n == 5;
            total = strtoul(w[n - 1], NULL, 10);
        } else {
            return fail(c, EPROTO, "malformed line from nats-server: %.100s", (const char *)b);
        }
        if (hdr > total)
            return fail(c, EPROTO, "header longer than the message (%zu > %zu)", hdr, total);
        if (avail < ll + total + 2) {
            if (ll + total + 2 > c->rcap) { /* grow so the whole message fits */
                uint8_t *nb = realloc(c->r, ll + total + 2 + c->rcap);
                if (!nb)
                    return fail(c, ENOMEM, "message of %zu bytes", total);
                c->rcap += ll + total + 2;
                c->r = nb;
            }
            return 0;
        }
        b[tl] = '\0'; /* the line in the buffer: its words become the message's strings */
        n = words((char *)b, w, 6);
        *m = (struct nc_msg){.subject = w[1], .sid = atoi(w[2]), .reply = has_reply ? w[3] : NULL};
        const uint8_t *payload = b + ll;
        if (hmsg) {
            m->hdr = (const char *)payload;
            m->hdr_len = hdr;
            if (hdr >= 12 && memcmp(payload, "NATS/1.0 ", 9) == 0)
                m->status = atoi((const char *)payload + 9);
        }
        m->data = payload + hdr;
        m->len = total - hdr;
        c->rpos += ll + total + 2;
        return 1;
    }
    c->rpos += ll;
    if (strcmp(tmp, "PING") == 0) {
        int rc = putf(c, "PONG\r\n");
        return rc < 0 ? rc : 2;
    }
    if (strncmp(tmp, "-ERR", 4) == 0)
        return fail(c, EPROTO, "nats-server: %.200s", tmp);
    return 2; /* +OK, PONG, INFO */
}

int nc_next(struct nc *c, struct nc_msg *m, int timeout_ms)
{
    double end = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
    int rc = nc_flush(c);
    if (rc < 0)
        return rc;
    for (;;) {
        while ((rc = parse(c, m)) == 2) {
        }
        if (rc != 0)
            return rc;
        if (c->wlen && (rc = nc_flush(c)) < 0) /* a PONG */
            return rc;
        int wait = timeout_ms < 0 ? -1 : timeout_ms == 0 ? 0 : (int)(end - now_ms());
        if (timeout_ms > 0 && wait <= 0)
            return 0;
        if ((rc = fill(c, wait)) <= 0)
            return rc;
    }
}

/* Waits for a PONG (the server has processed everything before our PING). */
static int ping(struct nc *c, int timeout_ms)
{
    int rc = putf(c, "PING\r\n");
    if (rc < 0 || (rc = nc_flush(c)) < 0)
        return rc;
    double end = now_ms() + timeout_ms;
    for (;;) {
        uint8_t *b = c->r + c->rpos;
        uint8_t *eol = memchr(b, '\n', c->rlen - c->rpos);
        if (eol) {
            size_t ll = (size_t)(eol - b) + 1;
            if (ll >= 4 && memcmp(b, "PONG", 4) == 0) {
                c->rpos += ll;
                return 0;
            }
            struct nc_msg m;
            if ((rc = parse(c, &m)) < 0)
                return rc;
            continue;
        }
        int wait = (int)(end - now_ms());
        if (wait <= 0)
            return fail(c, ETIMEDOUT, "no PONG from nats-server in %d ms", timeout_ms);
        if ((rc = fill(c, wait)) < 0)
            return rc;
    }
}

int nc_connect(const char *hostport, struct nc **out)
{
    struct nc *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->fd = -1;
    c->w = malloc(WBUF_CAP);
    c->r = malloc(RBUF_MIN);
    c->rcap = RBUF_MIN;
    int rc = 0;
    char host[128];
    const char *colon = strrchr(hostport, ':');
    if (!c->w || !c->r) {
        rc = fail(c, ENOMEM, "buffers");
        goto error;
    }
    if (!colon || (size_t)(colon - hostport) >= sizeof host) {
        rc = fail(c, EINVAL, "nats address '%s' is not host:port", hostport);
        goto error;
    }
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        rc = fail(c, EINVAL, "nats host '%s' is not an IPv4 address", host);
        goto error;
    }
    if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        rc = fail(c, errno, "connect to nats-server %s: %s", hostport, strerror(errno));
        goto error;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* INFO comes first; then CONNECT and a PING whose PONG says we are in */
    double end = now_ms() + 5000;
    while (!memchr(c->r, '\n', c->rlen)) {
        int wait = (int)(end - now_ms());
        if (wait <= 0 || (rc = fill(c, wait)) == 0) {
            rc = fail(c, ETIMEDOUT, "no INFO from nats-server %s", hostport);
            goto error;
        }
        if (rc < 0)
            goto error;
    }
    if (c->rlen < 5 || memcmp(c->r, "INFO ", 5) != 0) {
        rc = fail(c, EPROTO, "%s did not greet with INFO: is it a nats-server?", hostport);
        goto error;
    }
    c->rpos = (size_t)((uint8_t *)memchr(c->r, '\n', c->rlen) - c->r) + 1;
    if ((rc = putf(c, "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,"
                      "\"no_responders\":true,\"lang\":\"c\",\"version\":\"conflux-bench\","
                      "\"protocol\":1}\r\n")) < 0 ||
        (rc = ping(c, 5000)) < 0)
        goto error;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(c->inbox, sizeof c->inbox, "_INBOX.b%d.%ld", (int)getpid(), (long)ts.tv_nsec);
    *out = c;
    return 0;
error:
    *out = NULL;
    fprintf(stderr, "nats: %s\n", c->err);
    nc_close(c);
    return rc;
}

void nc_close(struct nc *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    free(c->w);
    free(c->r);
    free(c);
}

int nc_request(struct nc *c, const char *subject, const char *json, char *out, size_t cap,
               int timeout_ms)
{
    int rc;
    if (!c->inbox_subscribed) {
        char sub[80];
        snprintf(sub, sizeof sub, "%s.*", c->inbox);
        if ((rc = nc_sub(c, sub, INBOX_SID)) < 0)
            return rc;
        c->inbox_subscribed = 1;
    }
    char reply[96];
    snprintf(reply, sizeof reply, "%s.%u", c->inbox, ++c->inbox_seq);
    if ((rc = nc_pub(c, subject, reply, json, strlen(json))) < 0)
        return rc;
    double end = now_ms() + timeout_ms;
    for (;;) {
        int wait = (int)(end - now_ms());
        struct nc_msg m;
        if (wait <= 0 || (rc = nc_next(c, &m, wait)) == 0)
            return fail(c, ETIMEDOUT, "no reply to %s in %d ms", subject, timeout_ms);
        if (rc < 0)
            return rc;
        if (m.sid != INBOX_SID || strcmp(m.subject, reply) != 0)
            continue;
        if (m.status == 503)
            return fail(c, EHOSTUNREACH, "no responders for %s: is JetStream enabled?", subject);
        size_t n = m.len < cap - 1 ? m.len : cap - 1;
        memcpy(out, m.data, n);
        out[n] = '\0';
        return 0;
    }
}
