/* The sidecar's HTTP endpoint: /metrics (Prometheus text format 0.0.4), /healthz and
 * /readyz. One thread serves every connection without blocking on any (epoll): one request
 * per connection (Connection: close), at most SC_HTTP_MAX_CONNS at once (the oldest is
 * closed for a new one), each given SC_HTTP_DEADLINE_NS for the whole exchange, so a silent
 * or slow client cannot hold back the kubelet's probes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sidecar/cx_sidecar_int.h"
#include "common/cx_error.h"
#include "transport/cx_addr.h"
#include "sidecar/cx_sc_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <unistd.h>

#define CX_SC_OP_NAME(name, code, label) [CX_SC_##name] = label,
const char *const cx_sc_op_names[CX_SC_OP_MAX] = {CX_SC_OPS(CX_SC_OP_NAME)};
#undef CX_SC_OP_NAME

#define SC_HTTP_MAX_CONNS 256
#define SC_HTTP_DEADLINE_NS 2000000000u

/* A Prometheus label value: backslash, quote and newline escaped. */
static const char *lv(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    for (; s && *s && n + 3 < cap; s++) {
        if (*s == '\\' || *s == '"') {
            out[n++] = '\\';
            out[n++] = *s;
        } else if (*s == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
        } else {
            out[n++] = *s;
        }
    }
    out[n] = 0;
    return out;
}

/* The link a channel's events use: the links this pod's sources sent its frames over, from
 * the per-link counts ("shm" to sinks on this host, "ucx" inside the fabric, the network
 * scheme of the id for the rest), joined by '+' when several carried some ("ucx+tcp");
 * with nothing sent from here, the scheme of its id ("cx1:tcp://..." -> tcp), which is
 * what remote sources reach this pod's sinks over unless they share its host or fabric.
 * Counted since the channel opened, so a sink that left does not change it. */
static void link_of(const char *id, const struct cx_chan_stats *st, char *out, size_t cap)
{
    const char *p = strncmp(id, "cx1:", 4) == 0 ? id + 4 : id;
    int n = (int)strcspn(p, ":");
    uint64_t other = st->sent - st->sent_shm - st->sent_ucx;
    size_t len = 0;
    out[0] = '\0';
    if (st->sent_shm)
        len += (size_t)snprintf(out + len, cap - len, "shm");
    if (st->sent_ucx && len < cap)
        len += (size_t)snprintf(out + len, cap - len, "%sucx", len ? "+" : "");
    if ((other || !st->sent) && len < cap)
        snprintf(out + len, cap - len, "%s%.*s", len ? "+" : "", n, p);
}

/* TCP segments retransmitted in this network namespace (the pod's), from /proc/net/snmp. */
static int tcp_retrans(uint64_t *out)
{
    FILE *f = fopen("/proc/net/snmp", "r");
    if (!f)
        return -1;
    char names[1024], vals[1024];
    int rc = -1;
    while (fgets(names, sizeof names, f)) {
        if (strncmp(names, "Tcp:", 4) != 0 || !fgets(vals, sizeof vals, f))
            continue;
        char *sn, *sv, *n = strtok_r(names, " \n", &sn), *v = strtok_r(vals, " \n", &sv);
        while (n && v) {
            if (strcmp(n, "RetransSegs") == 0) {
                *out = strtoull(v, NULL, 10);
                rc = 0;
                break;
            }
            n = strtok_r(NULL, " \n", &sn);
            v = strtok_r(NULL, " \n", &sv);
        }
        break;
    }
    fclose(f);
    return rc;
}

static void counter(FILE *o, const char *name, const char *help)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
}
static void gauge(FILE *o, const char *name, const char *help)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

struct chan_row {
    struct cx_chan *ch;
    char id[128];
};

static void render_metrics(struct cx_sidecar *sc, FILE *o)
{
    char a[256], b[256], c[256], d[256], e[256], f[256];
    gauge(o, "conflux_sidecar_info", "Identity of this sidecar (value 1).");
    fprintf(o, "conflux_sidecar_info{pod=\"%s\",namespace=\"%s\",node=\"%s\",transport=\"%s\",fabric=\"%s\",channel_addr=\"%s\"} 1\n",
            lv(a, sizeof a, sc->o.pod), lv(b, sizeof b, sc->o.ns), lv(c, sizeof c, sc->o.node),
            lv(d, sizeof d, sc->transport), lv(e, sizeof e, sc->o.fabric),
            lv(f, sizeof f, cx_chan_ctx_addr(sc->ctx)));
    gauge(o, "conflux_sidecar_declared_channel", "Channel names the pod was declared with.");
    static const char *dirs[3] = {"input", "output", "any"};
    for (int i = 0; i < 3; i++) {
        char *copy = strdup(sc->declared[i]), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
            fprintf(o, "conflux_sidecar_declared_channel{name=\"%s\",direction=\"%s\"} 1\n",
                    lv(a, sizeof a, t), dirs[i]);
        free(copy);
    }
    gauge(o, "conflux_sidecar_uptime_seconds", "Seconds since the sidecar started.");
    fprintf(o, "conflux_sidecar_uptime_seconds %.3f\n", (double)(cx__sc_now_ns() - sc->started_ns) / 1e9);

    /* copy what the table holds under the lock; ask the channels outside it */
    pthread_mutex_lock(&sc->mu);
    size_t nh = sc->nh, nrows = 0;
    struct sc_handle *hs = nh ? malloc(nh * sizeof *hs) : NULL;
    if (hs)
        memcpy(hs, sc->h, nh * sizeof *hs);
    else
        nh = 0;
    int sessions = 0, conns = sc->nconns;
    for (struct sc_session *s = sc->sessions; s; s = s->next)
        sessions++;
    pthread_mutex_unlock(&sc->mu);
    gauge(o, "conflux_sidecar_applications", "Applications (sessions) connected now.");
    fprintf(o, "conflux_sidecar_applications %d\n", sessions);
    gauge(o, "conflux_sidecar_connections", "Application connections open now.");
    fprintf(o, "conflux_sidecar_connections %d\n", conns);
    counter(o, "conflux_sidecar_applications_total", "Applications that connected.");
    fprintf(o, "conflux_sidecar_applications_total %llu\n", (unsigned long long)sc->apps_total);

    struct chan_row *rows = nh ? calloc(nh, sizeof *rows) : NULL;
    for (size_t i = 0; rows && i < nh; i++) {
        if (hs[i].kind != H_CHAN)
            continue;
        int dup = 0;
        for (size_t j = 0; j < nrows; j++)
            dup |= rows[j].ch == hs[i].ch;
        if (!dup) {
            rows[nrows].ch = hs[i].ch;
            snprintf(rows[nrows].id, sizeof rows[nrows].id, "%s", hs[i].name);
            nrows++;
        }
    }
    struct cx_chan_stats *st = nrows ? calloc(nrows, sizeof *st) : NULL;
    for (size_t j = 0; st && j < nrows; j++)
        cx_chan_stats(rows[j].ch, &st[j]);
    if (!st)
        nrows = 0;
#define CHAN_METRIC(kind, name, help, field)                                                  \
    kind(o, name, help);                                                                   \
    for (size_t j = 0; j < nrows; j++) {                                                   \
        link_of(rows[j].id, &st[j], b, sizeof b);                                                  \
        fprintf(o, "%s{channel=\"%s\",link=\"%s\"} %llu\n", name, lv(a, sizeof a, rows[j].id), b, \
                (unsigned long long)st[j].field);                                          \
    }
    gauge(o, "conflux_channel_link", "The link a channel's events use (value 1, per channel).");
    for (size_t j = 0; j < nrows; j++) {
        link_of(rows[j].id, &st[j], b, sizeof b);
        fprintf(o, "conflux_channel_link{channel=\"%s\",link=\"%s\"} 1\n", lv(a, sizeof a, rows[j].id), b);
    }
    CHAN_METRIC(counter, "conflux_channel_events_submitted_total", "Events submitted by this pod's sources.", submitted)
    CHAN_METRIC(counter, "conflux_channel_events_sent_total", "Event frames handed to links.", sent)
    CHAN_METRIC(counter, "conflux_channel_bytes_sent_total", "Bytes of those frames, headers included.", sent_bytes)
    CHAN_METRIC(counter, "conflux_channel_events_delivered_total", "Events handed to this pod's sinks.", delivered)
    CHAN_METRIC(counter, "conflux_channel_bytes_received_total", "Event bytes received from the network.", received_bytes)
    CHAN_METRIC(counter, "conflux_channel_events_dropped_total", "Best-effort events dropped from full sink queues.", dropped)
    CHAN_METRIC(counter, "conflux_channel_events_blocked_total", "Reliable submits refused or delayed by a full queue.", blocked)
    CHAN_METRIC(counter, "conflux_channel_events_filtered_total", "Events a derived sink's filter stopped at this pod's sources.", filtered)
    CHAN_METRIC(counter, "conflux_channel_events_errors_total", "Events a sink of this pod could not convert.", errors)
    CHAN_METRIC(gauge, "conflux_channel_queued_events", "Events waiting in this pod's sink queues.", queued)
    CHAN_METRIC(gauge, "conflux_channel_sources", "Sources known on the channel.", sources)
    CHAN_METRIC(gauge, "conflux_channel_sinks", "Sinks known on the channel.", sinks)
#undef CHAN_METRIC
    free(st);
    free(rows);

    counter(o, "conflux_pipe_segments_total", "Pipe segments written or read through this sidecar.");
    for (size_t i = 0; i < nh; i++)
        if (hs[i].kind == H_WRITER || hs[i].kind == H_READER)
            fprintf(o, "conflux_pipe_segments_total{pipe=\"%s\",direction=\"%s\"} %llu\n",
                    lv(a, sizeof a, hs[i].name), hs[i].kind == H_WRITER ? "write" : "read",
                    (unsigned long long)hs[i].segments);
    counter(o, "conflux_pipe_bytes_total", "Pipe bytes written or read through this sidecar.");
    for (size_t i = 0; i < nh; i++)
        if (hs[i].kind == H_WRITER || hs[i].kind == H_READER)
            fprintf(o, "conflux_pipe_bytes_total{pipe=\"%s\",direction=\"%s\"} %llu\n",
                    lv(a, sizeof a, hs[i].name), hs[i].kind == H_WRITER ? "write" : "read",
                    (unsigned long long)hs[i].bytes);
    free(hs);

    counter(o, "conflux_sidecar_events_to_apps_total", "Events put in applications' event rings.");
    fprintf(o, "conflux_sidecar_events_to_apps_total %llu\n", (unsigned long long)sc->events_to_apps);
    counter(o, "conflux_sidecar_event_bytes_to_apps_total", "Wire bytes of those events.");
    fprintf(o, "conflux_sidecar_event_bytes_to_apps_total %llu\n", (unsigned long long)sc->event_bytes_to_apps);
    counter(o, "conflux_sidecar_event_drops_total", "Events dropped because an application's event ring was full.");
    fprintf(o, "conflux_sidecar_event_drops_total %llu\n", (unsigned long long)sc->event_drops);
    counter(o, "conflux_sidecar_submit_bytes_total", "Encoded event bytes applications submitted.");
    fprintf(o, "conflux_sidecar_submit_bytes_total %llu\n", (unsigned long long)sc->submit_bytes);
    uint64_t rt;
    if (tcp_retrans(&rt) == 0) {
        counter(o, "conflux_tcp_retransmits_total", "TCP segments retransmitted in this pod's network namespace.");
        fprintf(o, "conflux_tcp_retransmits_total %llu\n", (unsigned long long)rt);
    }

    counter(o, "conflux_sidecar_requests_total", "Application requests served, by call.");
    for (int i = 0; i < CX_SC_OP_MAX; i++)
        if (cx_sc_op_names[i] && sc->ops[i].count)
            fprintf(o, "conflux_sidecar_requests_total{op=\"%s\"} %llu\n", cx_sc_op_names[i],
                    (unsigned long long)sc->ops[i].count);
    counter(o, "conflux_sidecar_request_errors_total", "Application requests that failed, by call.");
    for (int i = 0; i < CX_SC_OP_MAX; i++)
        if (cx_sc_op_names[i] && sc->ops[i].count)
            fprintf(o, "conflux_sidecar_request_errors_total{op=\"%s\"} %llu\n", cx_sc_op_names[i],
                    (unsigned long long)sc->ops[i].errors);
    fprintf(o, "# HELP conflux_sidecar_request_duration_seconds Time the sidecar took to serve a "
               "request (from its arrival to the reply), by call.\n"
               "# TYPE conflux_sidecar_request_duration_seconds histogram\n");
    for (int i = 0; i < CX_SC_OP_MAX; i++) {
        if (!cx_sc_op_names[i] || !sc->ops[i].count)
            continue;
        uint64_t cum = 0;
        for (int k = 0; k < SC_LAT_BUCKETS; k++) {
            cum += sc->ops[i].bucket[k];
            fprintf(o, "conflux_sidecar_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n",
                    cx_sc_op_names[i], cx__sc_lat_bounds[k], (unsigned long long)cum);
        }
        fprintf(o, "conflux_sidecar_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n",
                cx_sc_op_names[i], (unsigned long long)sc->ops[i].count);
        fprintf(o, "conflux_sidecar_request_duration_seconds_sum{op=\"%s\"} %.9f\n", cx_sc_op_names[i],
                (double)sc->ops[i].sum_ns / 1e9);
        fprintf(o, "conflux_sidecar_request_duration_seconds_count{op=\"%s\"} %llu\n", cx_sc_op_names[i],
                (unsigned long long)sc->ops[i].count);
    }
}

/* Whether the space answers a TCP connect within 400 ms (tls:// too: the handshake is not
 * tried, a refused certificate shows in the applications' calls). Short because this one
 * HTTP thread also answers /healthz: a /readyz waiting on an address that no longer
 * answers (a restarted space server's old IP, still in DNS caches) must not make the
 * kubelet's 1 s liveness probe behind it fail, which would restart the sidecar and take the
 * applications' handles with it. */
static int space_reachable(const char *space, char *why, size_t cap)
{
    const char *hp = cx_addr_strip(space, "tcp");
    if (!hp)
        hp = cx_addr_strip(space, "tls");
    struct sockaddr_in sa;
    if (cx_addr_inet(hp ? hp : space, &sa) < 0) {
        snprintf(why, cap, "space address '%s': %s", space, cx_errmsg());
        return 0;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (!ok && errno == EINPROGRESS) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t el = sizeof err;
        if (poll(&pf, 1, 400) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0)
            ok = err == 0;
        errno = err ? err : ETIMEDOUT;
    }
    if (!ok)
        snprintf(why, cap, "space %s is not reachable: %s", space, strerror(errno));
    close(fd);
    return ok;
}

/* One HTTP connection: the request as it arrives, then the response as it leaves. */
struct hconn {
    int fd;
    uint64_t deadline_ns;  /* whole exchange; a slower client is closed */
    size_t n;
    char req[2048];
    char *out;
    size_t out_len, out_off;
    struct hconn *prev, *next; /* oldest first */
};

static void respond(struct hconn *h, int code, const char *type, const char *body, size_t len)
{
    const char *reason = code == 200 ? "OK" : code == 404 ? "Not Found" : code == 405 ? "Method Not Allowed"
                       : code == 503 ? "Service Unavailable" : "Bad Request";
    char head[256];
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n", code, reason, type, len);
    if (!(h->out = malloc((size_t)n + len)))
        return;
    memcpy(h->out, head, (size_t)n);
    memcpy(h->out + n, body, len);
    h->out_len = (size_t)n + len;
}

/* Answers a complete (or cut) request into h->out. */
static void answer(struct cx_sidecar *sc, struct hconn *h)
{
    char method[8], path[256];
    h->req[h->n] = 0;
    if (sscanf(h->req, "%7s %255s", method, path) != 2) {
        respond(h, 400, "text/plain", "bad request\n", 12);
        return;
    }
    path[strcspn(path, "?")] = 0;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        respond(h, 405, "text/plain", "GET only\n", 9);
    } else if (strcmp(path, "/healthz") == 0) {
        respond(h, 200, "text/plain", "ok\n", 3);
    } else if (strcmp(path, "/readyz") == 0) {
        char why[512] = "socket is not listening";
        int ok = sc->ready && (!sc->o.space || space_reachable(sc->o.space, why, sizeof why));
        if (ok) {
            respond(h, 200, "text/plain", "ready\n", 6);
        } else {
            size_t l = strlen(why);
            why[l] = '\n';
            respond(h, 503, "text/plain", why, l + 1);
        }
    } else if (strcmp(path, "/metrics") == 0) {
        char *body = NULL;
        size_t len = 0;
        FILE *o = open_memstream(&body, &len);
        if (!o) {
            respond(h, 503, "text/plain", "out of memory\n", 14);
            return;
        }
        render_metrics(sc, o);
        fclose(o);
        respond(h, 200, "text/plain; version=0.0.4; charset=utf-8", body, len);
        free(body);
    } else {
        respond(h, 404, "text/plain", "not found: try /metrics, /healthz, /readyz\n", 43);
    }
}

/* The HTTP server's state (one thread). */
struct hserver {
    struct cx_sidecar *sc;
    int ep;
    struct hconn *oldest, *newest;
    int count;
    uint64_t logged_ns;
};

static void hclose(struct hserver *hs, struct hconn *h, const char *why)
{
    if (why) {
        uint64_t now = cx__sc_now_ns();
        if (now - hs->logged_ns > 1000000000u) { /* at most a line a second */
            hs->logged_ns = now;
            cx_sc_log("warn", why, "\"http_connections\":%d", hs->count);
        }
    }
    *(h->prev ? &h->prev->next : &hs->oldest) = h->next;
    *(h->next ? &h->next->prev : &hs->newest) = h->prev;
    hs->count--;
    close(h->fd);
    free(h->out);
    free(h);
}

/* Reads and answers or writes what the socket allows; 0 while the exchange goes on, 1 when
 * it is over (close it). */
static int hstep(struct hserver *hs, struct hconn *h)
{
    if (!h->out) {
        for (;;) {
            ssize_t r = recv(h->fd, h->req + h->n, sizeof h->req - 1 - h->n, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && errno == EAGAIN)
                return 0;
            if (r <= 0)
                return 1;
            h->n += (size_t)r;
            h->req[h->n] = 0;
            if (strstr(h->req, "\r\n\r\n") || strstr(h->req, "\n\n") || h->n == sizeof h->req - 1)
                break;
        }
        answer(hs->sc, h);
        if (!h->out)
            return 1;
        struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = h};
        epoll_ctl(hs->ep, EPOLL_CTL_MOD, h->fd, &ev);
    }
    while (h->out_off < h->out_len) {
        ssize_t w = send(h->fd, h->out + h->out_off, h->out_len - h->out_off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return 0;
        if (w <= 0)
            return 1;
        h->out_off += (size_t)w;
    }
    return 1;
}

static void haccept(struct hserver *hs)
{
    for (;;) {
        int fd = accept4(hs->sc->hfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        struct hconn *h = calloc(1, sizeof *h);
        if (!h) {
            close(fd);
            continue;
        }
        if (hs->count >= SC_HTTP_MAX_CONNS) /* a probe must get through: the oldest goes */
            hclose(hs, hs->oldest, "too many HTTP connections: the oldest closed");
        h->fd = fd;
        h->deadline_ns = cx__sc_now_ns() + SC_HTTP_DEADLINE_NS;
        h->prev = hs->newest;
        *(hs->newest ? &hs->newest->next : &hs->oldest) = h;
        hs->newest = h;
        hs->count++;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = h};
        if (epoll_ctl(hs->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
            hclose(hs, h, NULL);
    }
}

static void *http_main(void *arg)
{
    struct hserver hs = {.sc = arg};
    struct cx_sidecar *sc = hs.sc;
    if ((hs.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return NULL;
    struct epoll_event l = {.events = EPOLLIN, .data.ptr = &hs}, st = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(hs.ep, EPOLL_CTL_ADD, sc->hfd, &l);
    epoll_ctl(hs.ep, EPOLL_CTL_ADD, sc->stop_pipe[0], &st);
    while (!sc->stopping) {
        int timeout = -1;
        if (hs.oldest) { /* every connection has the same span: the oldest ends first */
            uint64_t now = cx__sc_now_ns();
            timeout = hs.oldest->deadline_ns <= now ? 0 : (int)((hs.oldest->deadline_ns - now) / 1000000u) + 1;
        }
        struct epoll_event evs[32];
        int n = epoll_wait(hs.ep, evs, 32, timeout);
        int listener = 0;
        for (int i = 0; i < n && !sc->stopping; i++) {
            if (!evs[i].data.ptr)
                goto out;
            if (evs[i].data.ptr == &hs)
                listener = 1;
            else if (hstep(&hs, evs[i].data.ptr))
                hclose(&hs, evs[i].data.ptr, NULL);
        }
        if (listener) /* after the batch: accepting may close a connection the batch names */
            haccept(&hs);
        for (uint64_t now = cx__sc_now_ns(); hs.oldest && hs.oldest->deadline_ns <= now;)
            hclose(&hs, hs.oldest, "an HTTP client took more than 2 s: closed");
    }
out:
    while (hs.oldest)
        hclose(&hs, hs.oldest, NULL);
    close(hs.ep);
    return NULL;
}

int cx__sc_http_start(struct cx_sidecar *sc)
{
    const char *hp = sc->o.http ? sc->o.http : "0.0.0.0:9464";
    if (!hp[0])
        return 0;
    struct sockaddr_in bound;
    int fd = cx_tcp_listen_fd(hp, &bound);
    if (fd < 0)
        return cx_err_wrap(fd, "HTTP endpoint on '%s'", hp);
    sc->hfd = fd;
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &bound.sin_addr, ip, sizeof ip);
    snprintf(sc->http_addr, sizeof sc->http_addr, "%s:%u", ip, ntohs(bound.sin_port));
    int rc = pthread_create(&sc->http_thr, NULL, http_main, sc);
    if (rc) {
        close(fd);
        sc->hfd = -1;
        return cx_err_set(rc, "HTTP thread");
    }
    sc->http_on = 1;
    return 0;
}

void cx__sc_http_stop(struct cx_sidecar *sc)
{
    if (sc->http_on) {
        sc->stopping = 1;
        if (write(sc->stop_pipe[1], "x", 1) < 0) {
        }
        pthread_join(sc->http_thr, NULL);
        sc->http_on = 0;
    }
    if (sc->hfd >= 0)
        close(sc->hfd);
    sc->hfd = -1;
}
