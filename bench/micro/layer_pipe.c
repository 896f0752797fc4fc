/* The persistent-pipe layer in the microbenchmark suite: one-way latency against segment
 * size, bandwidth with a window of Q outstanding segments (Q = 8, 16, 64, 100) and CPU per
 * segment, through the public pipe API (cx_pipe.h) over one space server (confluxd
 * --role=space, started by run.sh), printed as micro.h's JSON lines (layer "pipe"). The
 * direct writer-to-reader link listens where CONFLUX_PIPE_LISTEN says (tcp, shm, ucx or tls;
 * unset: tcp); each row's "link" is the one the reader's descriptor reports (pi_link) once
 * segments flowed, else the configured scheme. Segments also reach the space server over tcp.
 *
 *   layer_pipe <space address> <quick|full> [reps] [hot-spot peers (quick 2, full 4)]
 *   (LAYER_HOTSPOT_ONLY=1 in the environment: the hot-spot alone)
 *
 * Over the dpdk driver: LAYER_DPDK gives each process a port of its own and sets
 * CONFLUX_PIPE_LISTEN=dpdk (layer_dpdk.h); the rows then say "dpdk" (memif) or "af_packet".
 *
 * Also completion notification (blocking pi_read against polling pi_read_timeout 0, both
 * ends; 'P' / 'K' switch the echo end), overlap and buffer reuse at 64 KiB, Q = 16
 * (layer_common.h), bidirectional latency and bandwidth (peer_common.h), and the hot-spot
 * (1..N echo processes with a pipe pair each; 'T' asks one for a stream).
 *
 * This process writes pipe "ping" and reads pipe "pong"; a forked process reads "ping" and
 * writes "pong". Byte 0 of a segment says what it is: 'E' echoed at the same size, 'B'
 * counted, 'W' counted and acknowledged with the reader's count and process CPU seconds,
 * 'C' answered likewise (zeroing the count), 'Q' quit. */
#include "layer_dpdk.h" /* first: it needs _GNU_SOURCE */

#include "common/cx_error.h"
#include "peer_common.h" /* layer_common.h and the bidirectional tests */
#include "pipe/cx_pipe.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXSEG PEER_MAXMSG

static void die(const char *what)
{
    fprintf(stderr, "layer_pipe: %s: %s (%s)\n", what, cx_errmsg(), strerror(errno));
    exit(1);
}
static int attach_retry(const char *name, int s)
{
    for (int i = 0; i < 200; i++) {
        int d = pi_attach(name, s);
        if (d >= 0) return d;
        usleep(50000); /* the other process may not have created it yet */
    }
    die("pi_attach");
    return -1;
}
static void wr(int d, const void *b, size_t n)
{
    if (pi_write(d, b, n, NULL) != (long)n) die("pi_write");
}
static int g_poll; /* notify test: read by polling (pi_read_timeout 0) instead of blocking */
static int g_stall_ms = -1; /* the measuring process: a read waiting this long fails the run */

static long rd(int d, void *b)
{
    long n;
    if (g_poll) {
        while ((n = pi_read_timeout(d, b, MAXSEG, NULL, 0)) < 0 && errno == ETIMEDOUT)
            ;
    } else {
        n = pi_read_timeout(d, b, MAXSEG, NULL, g_stall_ms);
    }
    if (n < 0 && errno == ETIMEDOUT) {
        fprintf(stderr, "layer_pipe: no segment for %d s: the pipe runtime stalled\n", g_stall_ms / 1000);
        exit(1);
    }
    if (n < 0) die("pi_read");
    return n;
}

/* The bidirectional tests (peer_common.h) over pipe w (out) and r (in). */
struct pipe_io { int w, r; };
static void pio_send(void *ctx, const void *p, size_t n) { wr(((struct pipe_io *)ctx)->w, p, n); }
static void pio_flush(void *ctx) { (void)ctx; }
static long pio_recv(void *ctx, void *b) { return rd(((struct pipe_io *)ctx)->r, b); }

static int run_echo(const char *addr, const char *ping, const char *pong)
{
    int s = pi_space_open(addr, NULL);
    if (s < 0) die("pi_space_open");
    int w = pi_create(pong, s, PI_CREATE);
    if (w < 0) die("pi_create");
    int r = attach_retry(ping, s);
    uint8_t *buf = malloc(MAXSEG);
    uint64_t count = 0;
    struct pipe_io pio = {w, r};
    struct peer_io io = {&pio, pio_send, pio_flush, pio_recv};
    for (;;) {
        long n = rd(r, buf);
        struct peer_reply a = {.kind = 'A'};
        if (peer_serve_bidir(&io, buf, n)) continue;
        switch (n ? buf[0] : 0) {
        case 'E': wr(w, buf, (size_t)n); continue;
        case 'T': { /* hot-spot: stream u64 m segments of u64 size bytes (at bytes 8, 16) */
            uint64_t m = 0, sz = 0;
            if (n >= 24) memcpy(&m, buf + 8, 8), memcpy(&sz, buf + 16, 8);
            if (sz > MAXSEG) sz = MAXSEG;
            uint8_t *out = calloc(1, sz ? sz : 1);
            out[0] = 'D';
            for (uint64_t i = 0; i < m; i++) wr(w, out, sz);
            free(out);
            continue;
        }
        case 'P': g_poll = 1; continue; /* notify test: poll */
        case 'K': g_poll = 0; continue; /* block */
        case 'B': count++; continue;
        case 'W': count++, a.count = count; break;
        case 'C': a.kind = 'C', a.count = count, count = 0; break;
        case 'Q': pi_close(w), pi_detach(r), pi_space_close(s); return 0;
        default: continue;
        }
        a.cpu_s = peer_cpu();
        wr(w, &a, sizeof a);
    }
}

static int reps;
static int g_reader = -1; /* the measuring process's reader descriptor: its pi_link names the rows' link */
static char g_link[PI_LINK_MAX];

/* The link to print: what the reader's direct link reports, once known; until then (or if it
 * reports none) the scheme CONFLUX_PIPE_LISTEN configures, tcp when unset. */
static const char *row_link(void)
{
    if (!g_link[0] && g_reader >= 0 && pi_link(g_reader, g_link, sizeof g_link) < 0) g_link[0] = 0;
    if (!strcmp(g_link, "dpdk") && layer_dpdk_link()) return layer_dpdk_link(); /* af_packet's port */
    if (g_link[0]) return g_link;
    const char *e = getenv("CONFLUX_PIPE_LISTEN");
    static char conf[PI_LINK_MAX];
    if (!e || !*e) return "tcp";
    size_t n = strcspn(e, ":");
    if (n >= sizeof conf) n = sizeof conf - 1;
    memcpy(conf, e, n), conf[n] = 0;
    return conf;
}
static void emit(const char *test, const char *params, const char *metric, const char *unit,
                 const double *r, long n, int ok)
{
    const char *link = row_link(); /* first: it fills g_link, which the note reads */
    char note[128];
    snprintf(note, sizeof note, "space server fsync none%s",
             g_link[0] ? "" : "; no direct link reported (pi_link empty): the configured link");
    peer_row("pipe", link, note, test, params, metric, unit, r, reps, n, ok);
}

static void emit_cb(void *ectx, const char *test, const char *params, const char *metric,
                    const char *unit, const double *r, int nreps, long n, int ok)
{
    (void)ectx, (void)nreps;
    emit(test, params, metric, unit, r, n, ok);
}

/* LAYER_DPDK: the pipe runtime's threads and links go first, then the port */
static void dpdk_done(void)
{
    if (layer_dpdk_link()) {
        pi_shutdown();
        layer_dpdk_done();
    }
}

/* Hot-spot: this process pings np echo processes (one pipe pair each) every round, then
 * receives a stream of 64 KiB segments from all of them at once; peers = 1..np. The echo
 * processes are forked first thing (a process must not fork once its pipe runtime runs);
 * their pipes are made at once, so they attach while the other tests run. */
struct hot { int np, w[16], r[16]; pid_t pid[16]; char ping[16][64], pong[16][64]; };

/* An echo process on its port (LAYER_DPDK: the idx-th), forked */
static int echo_main(const char *addr, const char *ping, const char *pong, int idx)
{
    layer_dpdk_env(idx);
    int rc = run_echo(addr, ping, pong);
    dpdk_done();
    return rc;
}

static void hot_fork(struct hot *h, const char *addr, int np)
{
    h->np = np;
    for (int j = 0; j < np; j++) {
        snprintf(h->ping[j], sizeof h->ping[j], "micro-hping-%d-%d", (int)getpid(), j);
        snprintf(h->pong[j], sizeof h->pong[j], "micro-hpong-%d-%d", (int)getpid(), j);
        h->pid[j] = PEER_FORK(echo_main(addr, h->ping[j], h->pong[j], 2 + j));
    }
}

static void hot_open(struct hot *h, int s)
{
    for (int j = 0; j < h->np; j++)
        if ((h->w[j] = pi_create(h->ping[j], s, PI_CREATE)) < 0) die("pi_create");
    for (int j = 0; j < h->np; j++) h->r[j] = attach_retry(h->pong[j], s);
}

static void pipe_hotspot(struct hot *h, int s, int quick)
{
    int np = h->np, *w = h->w, *r = h->r;
    uint8_t *buf = calloc(1, MAXSEG), *in = malloc(MAXSEG);
    char prm[96];
    for (int k = 1; k <= np; k++) {
        long n = quick ? 200 : 3000;
        double rr[PEER_MAXREP];
        int ok = 1;
        buf[0] = 'E';
        for (int rep = 0; rep < reps; rep++) {
            double t0 = peer_now();
            for (long i = 0; i < n; i++) {
                for (int j = 0; j < k; j++) wr(w[j], buf, 8);
                for (int j = 0; j < k; j++) ok &= rd(r[j], in) == 8;
            }
            rr[rep] = (peer_now() - t0) / (double)n * 1e6 / 2;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":8", k);
        emit("hotspot_lat", prm, "one_way_us", "us", rr, n, ok);
        /* at most 256 segments a writer: with 1024 (64 MiB) a reader once waited in pi_read
         * forever for segments its writer had written (see README) */
        uint64_t m = (uint64_t)(((quick ? 4L : 16L) << 20) / 65536 / k);
        if (m < 16) m = 16;
        ok = 1;
        for (int rep = 0; rep < reps; rep++) {
            uint64_t cmd[3] = {'T', m, 65536};
            double t0 = peer_now();
            for (int j = 0; j < k; j++) wr(w[j], cmd, sizeof cmd);
            for (int j = 0; j < k; j++) /* the pipes buffer what comes meanwhile */
                for (uint64_t i = 0; i < m; i++) ok &= rd(r[j], in) == 65536;
            rr[rep] = (double)k * (double)m * 65536.0 / (peer_now() - t0) / 1e6;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":65536", k);
        emit("hotspot_bw", prm, "MBps", "MB/s", rr, (long)m, ok);
    }
    buf[0] = 'Q';
    for (int j = 0; j < np; j++) {
        int st;
        wr(w[j], buf, 8);
        waitpid(h->pid[j], &st, 0);
        pi_close(w[j]), pi_detach(r[j]);
        pi_unlink(h->ping[j], s), pi_unlink(h->pong[j], s);
    }
    free(buf), free(in);
}

/* n timed echo round trips of size bytes over w and r, after 10 untimed ones, into rtt */
static void echo_rtts(int w, int r, uint8_t *buf, uint8_t *in, size_t size, long n, double *rtt)
{
    for (long j = -10; j < n; j++) {
        double t0 = peer_now();
        wr(w, buf, size);
        if (rd(r, in) != (long)size) die("echo size");
        if (j >= 0) rtt[j] = peer_now() - t0;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <space address> <quick|full> [reps] [hot-spot peers]\n", argv[0]);
        return 2;
    }
    int quick, hot;
    peer_args(argc, argv, 2, &quick, &reps, &hot);
    char ping[64], pong[64];
    snprintf(ping, sizeof ping, "micro-ping-%d", (int)getpid());
    snprintf(pong, sizeof pong, "micro-pong-%d", (int)getpid());
    pid_t pid = PEER_FORK(echo_main(argv[1], ping, pong, 1));
    struct hot h = {0};
    if (hot > 0) hot_fork(&h, argv[1], hot);
    layer_dpdk_env(0); /* LAYER_DPDK: this process's port, after every fork */
    /* here, not in the echo processes: they may wait long for their next command; a
     * point's stream takes seconds, so 60 s of nothing means the run stalled (it happened
     * at full-mode sizes: a 64 MiB window of segments) */
    g_stall_ms = 60000;
    int s = pi_space_open(argv[1], NULL);
    if (s < 0) die("pi_space_open");
    int w = pi_create(ping, s, PI_CREATE);
    if (w < 0) die("pi_create");
    hot_open(&h, s);
    int r = attach_retry(pong, s);
    g_reader = r;
    uint8_t *buf = calloc(1, MAXSEG), *in = malloc(MAXSEG);
    const size_t *ls = quick ? PEER_LQ : PEER_LF;
    size_t nl = quick ? 3 : 7;
    char prm[128];
    struct pipe_io pio = {w, r};
    struct peer_io io = {&pio, pio_send, pio_flush, pio_recv};
    if (layer_hotspot_only()) { /* the pair's tests ran on another fabric; a few echoes so the */
        buf[0] = 'E';           /* reader's direct link is known (the rows' link) */
        for (int j = 0; j < 20; j++) {
            wr(w, buf, 8);
            if (rd(r, in) != 8) die("echo size");
        }
        (void)row_link();
        goto done;
    }
    for (size_t i = 0; i < nl; i++) {
        long n = quick ? 200 : 3000;
        if (ls[i] >= 262144) n = quick ? 30 : 200;
        double r2[PEER_MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
        buf[0] = 'E';
        for (int k = 0; k < reps; k++) {
            echo_rtts(w, r, buf, in, ls[i], n, rtt);
            r2[k] = peer_one_way_us(rtt, n);
        }
        free(rtt);
        snprintf(prm, sizeof prm, "\"size\":%zu", ls[i]);
        emit("lat", prm, "one_way_us", "us", r2, n, 1);
    }
    peer_bw(&io, quick, reps, ",\"wait\":\"blocking read\"", NULL, emit_cb);
    /* completion notification: 8 B and 4 KiB ping-pong, both ends blocking in pi_read
     * against both polling pi_read_timeout(..., 0); latency and the client's CPU share */
    static const size_t nsz[] = {8, 4096};
    for (int poll = 0; poll < 2; poll++)
        for (size_t i = 0; i < 2; i++) {
            long n = quick ? 200 : 3000;
            double r2[PEER_MAXREP], c[PEER_MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
            buf[0] = poll ? 'P' : 'K';
            wr(w, buf, 8);
            g_poll = poll;
            buf[0] = 'E';
            for (int k = 0; k < reps; k++) {
                double c0 = peer_cpu(), t00 = peer_now();
                echo_rtts(w, r, buf, in, nsz[i], n, rtt);
                c[k] = (peer_cpu() - c0) / (peer_now() - t00);
                r2[k] = peer_one_way_us(rtt, n);
            }
            free(rtt);
            snprintf(prm, sizeof prm, "\"size\":%zu,\"wait\":\"%s\"", nsz[i], poll ? "poll" : "block");
            emit("notify", prm, "one_way_us", "us", r2, n, 1);
            emit("notify", prm, "client_cpu_share", "cores", c, n, 1);
        }
    buf[0] = 'K';
    wr(w, buf, 8);
    g_poll = 0;
    struct peer_ctx pc = {&io, in, "pipe", NULL}; /* the stream: windows over w and r */
    layer_overlap_reuse(&pc, peer_stream, NULL, emit_cb, quick, reps, peer_windows(quick, 16, 65536));
    peer_bidir(&io, quick, reps, NULL, emit_cb);
done:
    buf[0] = 'Q';
    wr(w, buf, 8);
    int bad = peer_reap(&pid, 1);
    if (h.np) pipe_hotspot(&h, s, quick);
    pi_close(w);
    pi_detach(r);
    pi_unlink(ping, s);
    pi_unlink(pong, s);
    pi_space_close(s);
    dpdk_done();
    return bad;
}
