/* The event-channel layer in the microbenchmark suite: one-way latency against size,
 * bandwidth with a window of Q outstanding events (Q = 8, 16, 64, 100) and CPU per event,
 * through the public channel API (cx_chan.h), printed as micro.h's JSON lines (layer
 * "channel", link: the one the runtime chose to the sink process, read from its stats:
 * "shm" on one host, "tcp" with CONFLUX_CHAN_SHM=0 in the environment).
 *
 *   layer_chan <quick|full> [reps] [hot-spot peers]
 *   (LAYER_HOTSPOT_ONLY=1 in the environment: the hot-spot alone)
 *
 * Over the dpdk driver: LAYER_DPDK gives each process a port of its own (layer_dpdk.h); the
 * rows then say "dpdk" (memif) or "af_packet".
 *
 * Also completion notification (this process driving the runtime with cx_chan_ctx_drive,
 * polling against blocking), overlap and buffer reuse at 64 KiB, Q = 16 (layer_common.h),
 * bidirectional latency and bandwidth ('L', 'S': the sink process's own thread sends 'D'
 * events while its handler counts ours), and the hot-spot (1..N more sink processes, a
 * channel pair each; 'T' asks one for a stream).
 *
 * This process forks the sink process; the source creates two typed reliable channels
 * ("ping": here -> there, "pong": back), the sink opens both. Events: 'E' echoed at the same
 * size, 'B' counted, 'W' counted and acknowledged (the end of a window), 'C' answered with
 * the sink's count and process CPU seconds, 'Q' quit. */
#include "layer_dpdk.h" /* first: it needs _GNU_SOURCE */

#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "peer_common.h" /* layer_common.h, the sizes, counts, clocks and rows of the peers */

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ev {
    uint8_t kind;
    uint32_t n;
    uint8_t *data; /* n bytes */
};
struct reply { uint64_t count; double cpu_s; };

static const char *ev_json = "{\"name\":\"micro_event\",\"fields\":[{\"name\":\"kind\",\"type\":\"uint8\"},"
                             "{\"name\":\"n\",\"type\":\"uint32\"},{\"name\":\"data\",\"type\":\"uint8[n]\"}]}";

/* The runtime of this process: on LAYER_CHAN_LISTEN when set (e.g. ucx://127.0.0.1:0,
 * tls://127.0.0.1:0: the network link the layer then runs on), else the default. */
static int ctx_create(struct cx_chan_ctx **ctx)
{
    struct cx_chan_ctx_opts o = {.listen = getenv("LAYER_CHAN_LISTEN")};
    return cx_chan_ctx_create(o.listen && *o.listen ? &o : NULL, ctx);
}

static void die(const char *what)
{
    fprintf(stderr, "layer_chan: %s: %s\n", what, cx_errmsg());
    exit(1);
}
static const struct cx_format *ev_format(void)
{
    struct cx_format *f;
    const struct cx_format *F;
    if (cx_format_from_json(ev_json, strlen(ev_json), NULL, &f) < 0 || cx_format_size(f) != sizeof(struct ev))
        die("event format");
    cx_format_registry_insert(f, &F);
    return F;
}
static void submit(struct cx_chan_source *src, const struct ev *e)
{
    if (cx_chan_submit_wait(src, e, 30000) < 0) die("submit");
}

/* ---- the sink process ------------------------------------------------------------- */
struct sink_state {
    struct cx_chan_source *back;
    uint8_t *buf;
    uint64_t count;
    volatile int quit;
    volatile long dcount;      /* 'D' events (bidirectional tests) */
    volatile int cmd;          /* 'L' or 'S' for the sink's own thread to run */
    uint64_t cmd_n, cmd_size;
    long cmd_d0;               /* dcount when the command came (the source's events follow it) */
};

static void sink_on(void *arg, const struct cx_chan_event *e)
{
    struct sink_state *s = arg;
    const struct ev *in = e->data;
    struct ev out = {.kind = in->kind, .n = 0, .data = s->buf};
    struct reply r = {0, 0};
    switch (in->kind) {
    case 'E': out.n = in->n; break;
    case 'B': s->count++; return;
    case 'W': s->count++, out.kind = 'A'; break;
    case 'C': r.count = s->count, r.cpu_s = peer_cpu(), s->count = 0; break;
    case 'Q': s->quit = 1; return;
    case 'D': __atomic_add_fetch(&s->dcount, 1, __ATOMIC_RELEASE); return;
    case 'L':
    case 'S': /* bidirectional: the sink's own thread sends while this handler counts */
    case 'T': /* hot-spot: the sink's own thread streams n events, nothing back expected */
        if (in->n >= 16) memcpy(&s->cmd_n, in->data, 8), memcpy(&s->cmd_size, in->data + 8, 8);
        s->cmd_d0 = s->dcount;
        __atomic_store_n(&s->cmd, in->kind, __ATOMIC_RELEASE);
        return;
    default: return;
    }
    if (in->kind != 'E') {
        r.count = in->kind == 'W' ? s->count : r.count;
        memcpy(s->buf, &r, sizeof r);
        out.n = sizeof r;
    }
    while (cx_chan_submit(s->back, &out) == -EAGAIN)
        ; /* the reply queue is never full here; spin rather than drop */
}

/* Bidirectional tests, the sink's side: 'L' = each round one 'D' event out, then wait for
 * the source's; 'S' = n 'D' events out, then wait for the source's n and answer 'A'; and
 * the hot-spot's 'T' = n 'D' events out. */
static void sink_bidir(struct sink_state *s, int cmd)
{
    uint64_t n = s->cmd_n, size = s->cmd_size > (1u << 20) ? 1u << 20 : s->cmd_size;
    long d0 = s->cmd_d0;
    uint8_t *data = calloc(1, size ? size : 1);
    struct ev out = {.kind = 'D', .n = (uint32_t)size, .data = data};
    double t0 = peer_now();
    for (uint64_t i = 0; i < n && cmd == 'T'; i++)
        if (cx_chan_submit_wait(s->back, &out, 30000) < 0) die("sink submit");
    for (uint64_t i = 0; i < n && cmd != 'T'; i++) {
        if (cx_chan_submit_wait(s->back, &out, 30000) < 0) die("sink submit");
        if (cmd == 'L')
            while (__atomic_load_n(&s->dcount, __ATOMIC_ACQUIRE) < d0 + (long)i + 1 && peer_now() - t0 < 60)
                sched_yield();
    }
    while (cmd != 'T' && __atomic_load_n(&s->dcount, __ATOMIC_ACQUIRE) < d0 + (long)n && peer_now() - t0 < 60)
        sched_yield();
    if (cmd == 'S') {
        struct reply r = {(uint64_t)(s->dcount - d0), peer_cpu()};
        memcpy(s->buf, &r, sizeof r);
        struct ev a = {.kind = 'A', .n = sizeof r, .data = s->buf};
        if (cx_chan_submit_wait(s->back, &a, 30000) < 0) die("sink submit");
    }
    free(data);
}

static int run_sink(int rfd)
{
    char ids[2][256];
    if (read(rfd, ids, sizeof ids) != (ssize_t)sizeof ids) return 2;
    const struct cx_format *F = ev_format();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ping, *pong;
    struct cx_chan_sink *k;
    struct sink_state s = {.buf = calloc(1, 1 << 20)};
    if (ctx_create(&ctx) < 0 || cx_chan_open(ctx, ids[0], 10000, &ping) < 0 ||
        cx_chan_open(ctx, ids[1], 10000, &pong) < 0 || cx_chan_source(pong, F, &s.back) < 0)
        die("sink setup");
    struct cx_chan_sink_opts so = {.format = F};
    if (cx_chan_sink(ping, &so, sink_on, &s, &k) < 0) die("sink");
    while (!s.quit) {
        int cmd = __atomic_load_n(&s.cmd, __ATOMIC_ACQUIRE);
        if (!cmd) {
            usleep(1000);
            continue;
        }
        s.cmd = 0;
        sink_bidir(&s, cmd);
    }
    usleep(100000); /* let the last reply leave */
    cx_chan_ctx_destroy(ctx);
    return 0;
}

/* ---- the source (measuring) process ------------------------------------------------ */
static volatile long g_echoes, g_acks, g_cpus, g_data;
static struct reply g_last;

static void source_on(void *arg, const struct cx_chan_event *e)
{
    (void)arg;
    const struct ev *in = e->data;
    if (in->kind != 'E' && in->n >= sizeof g_last) memcpy(&g_last, in->data, sizeof g_last);
    if (in->kind == 'E') __atomic_add_fetch(&g_echoes, 1, __ATOMIC_RELEASE);
    else if (in->kind == 'A') __atomic_add_fetch(&g_acks, 1, __ATOMIC_RELEASE);
    else if (in->kind == 'C') __atomic_add_fetch(&g_cpus, 1, __ATOMIC_RELEASE);
    else if (in->kind == 'D') __atomic_add_fetch(&g_data, 1, __ATOMIC_RELEASE);
}
/* How this process waits for a reply: 0 = its progress thread delivers it, we yield; the
 * notify test's 1 = we drive the runtime polling (timeout 0), 2 = we drive it blocking
 * (cx_chan_ctx_drive waits for the socket). */
static int g_wait;
static struct cx_chan_ctx *g_ctx;

static void wait_count(volatile long *c, long want)
{
    double t0 = peer_now();
    while (__atomic_load_n(c, __ATOMIC_ACQUIRE) < want) {
        if (g_wait == 0) sched_yield(); /* the reply comes on the progress thread: let it run */
        else if (cx_chan_ctx_drive(g_ctx, g_wait == 1 ? 0 : 1000) < 0) {
            fprintf(stderr, "layer_chan: drive: %s\n", cx_errmsg());
            exit(1);
        }
        if (peer_now() - t0 > 30) {
            fprintf(stderr, "layer_chan: no reply after 30 s\n");
            exit(1);
        }
    }
}
static int reps;
static const char *g_link = "tcp"; /* set once the sink process is linked */
static char g_link_buf[16];

static void emit(const char *test, const char *params, const char *metric, const char *unit,
                 const double *r, long n, int ok)
{
    peer_row("channel", g_link, NULL, test, params, metric, unit, r, reps, n, ok);
}
static struct reply query(struct cx_chan_source *src, uint8_t *buf)
{
    struct ev c = {.kind = 'C', .n = 0, .data = buf};
    long want = g_cpus + 1;
    submit(src, &c);
    wait_count(&g_cpus, want);
    return g_last;
}

/* Bidirectional latency (both ends send one event per round, then wait for the other's)
 * and bandwidth (both send n events at once; the sink answers once it has ours): the
 * sink's own thread sends (sink_bidir). Sizes as peer_common.h's peer_bidir. */
static void chan_bidir(struct cx_chan_source *src, uint8_t *buf, int quick)
{
    const size_t *bs = quick ? PEER_BQ : PEER_BF;
    size_t nb = quick ? 2 : 6;
    char prm[64];
    double r[PEER_MAXREP];
    for (int bi = 0; bi < 2; bi++)
        for (size_t i = 0; i < nb; i++) {
            if (!bi && bs[i] > 65536) continue;
            long n = bi ? ((quick ? 4L : 16L) << 20) / (long)(bs[i] + 48) : (quick ? 300 : 5000);
            if (n > (quick ? 2000 : 20000)) n = quick ? 2000 : 20000;
            if (n < 4) n = 4;
            int ok = 1;
            for (int k = 0; k < reps; k++) {
                uint64_t cmdv[2] = {(uint64_t)n, bs[i]};
                struct ev c = {.kind = bi ? 'S' : 'L', .n = sizeof cmdv, .data = (uint8_t *)cmdv};
                struct ev d = {.kind = 'D', .n = (uint32_t)bs[i], .data = buf};
                long d0 = g_data, a0 = g_acks;
                submit(src, &c);
                double t0 = peer_now();
                for (long j = 0; j < n; j++) {
                    submit(src, &d);
                    if (!bi) wait_count(&g_data, d0 + j + 1);
                }
                if (bi) {
                    wait_count(&g_data, d0 + n);
                    wait_count(&g_acks, a0 + 1); /* the sink has all of ours */
                    ok &= g_last.count == (uint64_t)n;
                }
                double dt = peer_now() - t0;
                r[k] = bi ? 2.0 * (double)n * (double)bs[i] / dt / 1e6 : dt / (double)n * 1e6;
            }
            snprintf(prm, sizeof prm, "\"size\":%zu", bs[i]);
            if (bi) emit("bibw", prm, "MBps", "MB/s", r, n, ok);
            else emit("bilat", prm, "round_us", "us", r, n, ok);
        }
}

/* layer_common.h's stream: windows of q events from the buffers, compute after each. */
static double chan_stream(void *ctx, struct lbufs *b, int q, long windows, double compute_us, int *ok)
{
    struct cx_chan_source *src = ctx;
    static uint8_t qbuf[64];
    query(src, qbuf); /* zeroes the sink's count */
    long acks0 = g_acks;
    double t0 = peer_now();
    for (long x = 1; x <= windows; x++) {
        for (int j = 0; j < q; j++) {
            struct ev e = {.kind = j == q - 1 ? 'W' : 'B', .n = (uint32_t)b->size, .data = lb_next(b)};
            submit(src, &e);
            if (compute_us > 0) lb_spin_us(compute_us);
        }
        wait_count(&g_acks, acks0 + x);
    }
    double dt = peer_now() - t0;
    *ok &= query(src, qbuf).count == (uint64_t)(windows * q);
    return (double)(windows * q) * (double)b->size / dt / 1e6;
}

static void emit_cb(void *ectx, const char *test, const char *params, const char *metric,
                    const char *unit, const double *r, int nreps, long n, int ok)
{
    (void)ectx, (void)nreps;
    emit(test, params, metric, unit, r, n, ok);
}

/* Hot-spot: np more sink processes, each with a ping/pong channel pair of its own; this
 * process pings all of them every round, then receives a stream from all at once. They are
 * forked before this process's runtime starts (no fork once its threads run). */
struct hot_peer { pid_t pid; int fd; struct cx_chan *ping, *pong; struct cx_chan_source *src; struct cx_chan_sink *k; };

/* The forked sink process on its port (LAYER_DPDK: the idx-th), its ids coming on p[0] */
static int sink_main(const int p[2], int idx)
{
    close(p[1]);
    layer_dpdk_env(idx);
    int rc = run_sink(p[0]);
    layer_dpdk_done();
    return rc;
}

/* Forks a sink process; h->fd is where its channel ids go. */
static void hot_fork(struct hot_peer *h, int idx)
{
    int p[2];
    if (pipe(p) != 0) die("pipe");
    h->pid = PEER_FORK(sink_main(p, idx));
    close(p[0]);
    h->fd = p[1];
}

static void hot_join(struct hot_peer *h, struct cx_chan_ctx *ctx, const struct cx_format *F)
{
    struct cx_chan_opts co = {.format = F, .mode = CX_CHAN_RELIABLE, .queue_limit = 512};
    struct cx_chan_sink_opts so = {.format = F};
    char ids[2][256] = {{0}};
    if (cx_chan_create(ctx, &co, &h->ping) < 0 || cx_chan_create(ctx, &co, &h->pong) < 0 ||
        cx_chan_source(h->ping, F, &h->src) < 0 || cx_chan_sink(h->pong, &so, source_on, NULL, &h->k) < 0)
        die("hot-spot setup");
    snprintf(ids[0], sizeof ids[0], "%s", cx_chan_id(h->ping));
    snprintf(ids[1], sizeof ids[1], "%s", cx_chan_id(h->pong));
    if (write(h->fd, ids, sizeof ids) != (ssize_t)sizeof ids) die("hot-spot ids");
    close(h->fd);
}

static void chan_hotspot(struct hot_peer *h, int np, int quick, uint8_t *buf)
{
    for (int j = 0; j < np; j++)
        if (cx_chan_wait_members(h[j].ping, 1, 1, 10000) < 0 || cx_chan_wait_members(h[j].pong, 1, 1, 10000) < 0)
            die("waiting for a hot-spot sink");
    char prm[96];
    double r[PEER_MAXREP];
    for (int k = 1; k <= np; k++) {
        long n = quick ? 200 : 3000;
        struct ev e = {.kind = 'E', .n = 8, .data = buf};
        for (int rep = 0; rep < reps; rep++) {
            double t0 = peer_now();
            for (long i = 0; i < n; i++) {
                long want = g_echoes + k;
                for (int j = 0; j < k; j++) submit(h[j].src, &e);
                wait_count(&g_echoes, want);
            }
            r[rep] = (peer_now() - t0) / (double)n * 1e6 / 2;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":8", k);
        emit("hotspot_lat", prm, "one_way_us", "us", r, n, 1);
        uint64_t m = (uint64_t)(((quick ? 4L : 64L) << 20) / 65536 / k);
        if (m < 16) m = 16;
        for (int rep = 0; rep < reps; rep++) {
            uint64_t cmdv[2] = {m, 65536};
            struct ev c = {.kind = 'T', .n = sizeof cmdv, .data = (uint8_t *)cmdv};
            long d0 = g_data;
            double t0 = peer_now();
            for (int j = 0; j < k; j++) submit(h[j].src, &c);
            wait_count(&g_data, d0 + (long)m * k);
            r[rep] = (double)k * (double)m * 65536.0 / (peer_now() - t0) / 1e6;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":65536", k);
        emit("hotspot_bw", prm, "MBps", "MB/s", r, (long)m, 1);
    }
    struct ev qe = {.kind = 'Q', .n = 0, .data = buf};
    for (int j = 0; j < np; j++) {
        int st;
        submit(h[j].src, &qe);
        waitpid(h[j].pid, &st, 0);
    }
}

/* n timed echo round trips of e, after 20 untimed ones, into rtt */
static void echo_rtts(struct cx_chan_source *src, const struct ev *e, long n, double *rtt)
{
    for (long j = -20; j < n; j++) {
        long want = g_echoes + 1;
        double t0 = peer_now();
        submit(src, e);
        wait_count(&g_echoes, want);
        if (j >= 0) rtt[j] = peer_now() - t0;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <quick|full> [reps] [hot-spot peers (quick 2, full 4)]\n", argv[0]);
        return 2;
    }
    int quick, hot;
    peer_args(argc, argv, 1, &quick, &reps, &hot);
    struct hot_peer sink, hp[16]; /* the pair's sink process, the hot-spot's */
    hot_fork(&sink, 1);
    for (int j = 0; j < hot; j++) hot_fork(&hp[j], 2 + j);
    layer_dpdk_env(0); /* LAYER_DPDK: this process's port, after every fork */
    const struct cx_format *F = ev_format();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ping, *pong;
    struct cx_chan_source *src;
    struct cx_chan_sink *k;
    struct cx_chan_opts co = {.format = F, .mode = CX_CHAN_RELIABLE, .queue_limit = 512};
    if (ctx_create(&ctx) < 0 || cx_chan_create(ctx, &co, &ping) < 0 ||
        cx_chan_create(ctx, &co, &pong) < 0 || cx_chan_source(ping, F, &src) < 0)
        die("source setup");
    struct cx_chan_sink_opts so = {.format = F};
    if (cx_chan_sink(pong, &so, source_on, NULL, &k) < 0) die("sink");
    char ids[2][256] = {{0}};
    snprintf(ids[0], sizeof ids[0], "%s", cx_chan_id(ping));
    snprintf(ids[1], sizeof ids[1], "%s", cx_chan_id(pong));
    if (write(sink.fd, ids, sizeof ids) != (ssize_t)sizeof ids) return 1;
    for (int j = 0; j < hot; j++) hot_join(&hp[j], ctx, F);
    if (cx_chan_wait_members(ping, 1, 1, 10000) < 0 || cx_chan_wait_members(pong, 1, 1, 10000) < 0)
        die("waiting for the sink process");
    /* the link to the sink process is made on the progress thread once it joined */
    struct cx_chan_stats lst = {0};
    for (int i = 0; i < 500 && lst.shm_sinks + lst.net_sinks == 0; i++) {
        cx_chan_stats(ping, &lst);
        if (lst.shm_sinks + lst.net_sinks == 0) usleep(10000);
    }
    if (lst.shm_sinks + lst.net_sinks == 0) die("no link to the sink process after 5 s");
    const char *mine = cx_chan_ctx_addr(ctx); /* the network link: the scheme both sides listen on */
    snprintf(g_link_buf, sizeof g_link_buf, "%.*s", (int)strcspn(mine, ":"), mine);
    g_link = lst.shm_sinks ? "shm" : g_link_buf;
    if (!strcmp(g_link, "dpdk") && layer_dpdk_link()) g_link = layer_dpdk_link(); /* af_packet's port */
    fprintf(stderr, "layer_chan: events to the sink process go over %s\n", g_link);
    uint8_t *buf = calloc(1, 1 << 20);
    if (layer_hotspot_only()) goto hotspot; /* the pair's tests ran on another fabric */
    const size_t *ls = quick ? PEER_LQ : PEER_LF, *bs = quick ? PEER_BQ : PEER_BF;
    size_t nl = quick ? 3 : 7, nb = quick ? 2 : 6;
    char prm[128];
    for (size_t i = 0; i < nl; i++) { /* latency: half the echo round trip */
        long n = peer_lat_n(quick, ls[i]);
        double r[PEER_MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
        struct ev e = {.kind = 'E', .n = (uint32_t)ls[i], .data = buf};
        for (int k2 = 0; k2 < reps; k2++) {
            echo_rtts(src, &e, n, rtt);
            r[k2] = peer_one_way_us(rtt, n);
        }
        free(rtt);
        snprintf(prm, sizeof prm, "\"size\":%zu", ls[i]);
        emit("lat", prm, "one_way_us", "us", r, n, 1);
    }
    /* windowed bandwidth (and, at Q = 16, CPU per event of both processes) */
    for (size_t qi = 0; qi < 4; qi++)
        for (size_t i = 0; i < nb; i++) {
            int q = PEER_QS[qi];
            long w = peer_windows(quick, q, bs[i]); /* at most ~20000 events a point */
            double r[PEER_MAXREP], c[3][PEER_MAXREP];
            int ok = 1;
            for (int k2 = 0; k2 < reps; k2++) {
                struct reply a = query(src, buf); /* zeroes the sink's count */
                double self0 = peer_cpu(), t0 = peer_now();
                long acks0 = g_acks;
                struct ev e = {.kind = 'B', .n = (uint32_t)bs[i], .data = buf};
                for (long x = 1; x <= w; x++) {
                    for (int j = 0; j < q; j++) {
                        e.kind = j == q - 1 ? 'W' : 'B';
                        submit(src, &e);
                    }
                    wait_count(&g_acks, acks0 + x);
                }
                double dt = peer_now() - t0, self1 = peer_cpu();
                struct reply b = query(src, buf);
                long msgs = w * q;
                ok &= b.count == (uint64_t)msgs;
                r[k2] = (double)msgs * (double)bs[i] / dt / 1e6;
                c[0][k2] = (self1 - self0) / (double)msgs * 1e6;
                c[1][k2] = (b.cpu_s - a.cpu_s) / (double)msgs * 1e6;
                c[2][k2] = dt / (double)msgs * 1e6;
            }
            snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":%d", bs[i], q);
            emit("bw", prm, "MBps", "MB/s", r, w * q, ok);
            if (q == 16) {
                snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":16,\"wait\":\"engine\"", bs[i]);
                emit("cpu", prm, "sender_cpu_us", "us/msg", c[0], w * q, ok);
                emit("cpu", prm, "receiver_cpu_us", "us/msg", c[1], w * q, ok);
                emit("cpu", prm, "wall_us", "us/msg", c[2], w * q, ok);
            }
        }
    /* completion notification: 8 B and 4 KiB ping-pong, this process driving the runtime
     * polling against blocking in cx_chan_ctx_drive; latency and this process's CPU share */
    g_ctx = ctx;
    static const size_t nsz[] = {8, 4096};
    for (int mode = 1; mode <= 2; mode++)
        for (size_t i = 0; i < 2; i++) {
            long n = quick ? 300 : 5000;
            double r[PEER_MAXREP], c[PEER_MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
            struct ev e = {.kind = 'E', .n = (uint32_t)nsz[i], .data = buf};
            g_wait = mode;
            for (int k2 = 0; k2 < reps; k2++) {
                double c0 = peer_cpu(), t00 = peer_now();
                echo_rtts(src, &e, n, rtt);
                c[k2] = (peer_cpu() - c0) / (peer_now() - t00);
                r[k2] = peer_one_way_us(rtt, n);
            }
            g_wait = 0;
            free(rtt);
            snprintf(prm, sizeof prm, "\"size\":%zu,\"wait\":\"%s\"", nsz[i], mode == 1 ? "poll" : "block");
            emit("notify", prm, "one_way_us", "us", r, n, 1);
            emit("notify", prm, "client_cpu_share", "cores", c, n, 1);
        }
    layer_overlap_reuse(src, chan_stream, NULL, emit_cb, quick, reps, peer_windows(quick, 16, 65536));
    chan_bidir(src, buf, quick);
hotspot:
    chan_hotspot(hp, hot, quick, buf);
    struct ev qe = {.kind = 'Q', .n = 0, .data = buf};
    submit(src, &qe);
    int bad = peer_reap(&sink.pid, 1);
    cx_chan_ctx_destroy(ctx);
    layer_dpdk_done();
    free(buf);
    return bad;
}
