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
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXREP 16
#define MAXSEG (1u << 20)
struct reply { uint8_t kind, pad[7]; uint64_t count; double cpu_s; };

static void die(const char *what)
{
    fprintf(stderr, "layer_pipe: %s: %s (%s)\n", what, cx_errmsg(), strerror(errno));
    exit(1);
}
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double proc_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
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
        struct reply a = {.kind = 'A'};
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
        a.cpu_s = proc_cpu_s();
        wr(w, &a, sizeof a);
    }
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
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
                 double *r, long n, int ok)
{
    double s[MAXREP];
    memcpy(s, r, sizeof(double) * (size_t)reps);
    qsort(s, (size_t)reps, sizeof *s, cmpd);
    double med = reps % 2 ? s[reps / 2] : (s[reps / 2 - 1] + s[reps / 2]) / 2;
    const char *link = row_link(); /* first: it fills g_link, which the note reads */
    printf("{\"layer\":\"pipe\",\"link\":\"%s\",\"test\":\"%s\",\"params\":{%s},\"metric\":\"%s\","
           "\"unit\":\"%s\",\"median\":%.4g,\"min\":%.4g,\"max\":%.4g,\"reps\":[", link, test, params,
           metric, unit, med, s[0], s[reps - 1]);
    for (int i = 0; i < reps; i++) printf("%s%.4g", i ? "," : "", r[i]);
    printf("],\"n\":%ld,\"matched\":%s,\"note\":\"space server fsync none%s\"}\n", n, ok ? "true" : "false",
           g_link[0] ? "" : "; no direct link reported (pi_link empty): the configured link");
    fflush(stdout);
}

/* layer_common.h's stream over pipes w (out) and r (in): windows of q segments from the
 * buffers (byte 0 says what a segment is), compute after each. */
struct pipe_pair { int w, r; uint8_t *in; };

static double pipe_stream(void *ctx, struct lbufs *b, int q, long windows, double compute_us, int *ok)
{
    struct pipe_pair *pp = ctx;
    struct reply a;
    uint8_t c[8] = {'C'};
    wr(pp->w, c, sizeof c); /* zero the reader's count */
    rd(pp->r, pp->in);
    double t0 = now_s();
    for (long x = 0; x < windows; x++) {
        for (int j = 0; j < q; j++) {
            uint8_t *p = lb_next(b);
            p[0] = j == q - 1 ? 'W' : 'B';
            wr(pp->w, p, b->size);
            p[0] = 'B';
            if (compute_us > 0) lb_spin_us(compute_us);
        }
        rd(pp->r, pp->in); /* the window's ack */
    }
    double dt = now_s() - t0;
    memcpy(&a, pp->in, sizeof a);
    *ok &= a.kind == 'A' && a.count == (uint64_t)(windows * q);
    return (double)(windows * q) * (double)b->size / dt / 1e6;
}

static void emit_cb(void *ectx, const char *test, const char *params, const char *metric,
                    const char *unit, const double *r, int nreps, long n, int ok)
{
    (void)ectx, (void)nreps;
    emit(test, params, metric, unit, (double *)r, n, ok);
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

static void hot_fork(struct hot *h, const char *addr, int np)
{
    h->np = np;
    for (int j = 0; j < np; j++) {
        snprintf(h->ping[j], sizeof h->ping[j], "micro-hping-%d-%d", (int)getpid(), j);
        snprintf(h->pong[j], sizeof h->pong[j], "micro-hpong-%d-%d", (int)getpid(), j);
        fflush(NULL);
        if ((h->pid[j] = fork()) == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            layer_dpdk_env(2 + j);
            int rc = run_echo(addr, h->ping[j], h->pong[j]);
            dpdk_done();
            _exit(rc);
        }
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
        double rr[MAXREP];
        int ok = 1;
        buf[0] = 'E';
        for (int rep = 0; rep < reps; rep++) {
            double t0 = now_s();
            for (long i = 0; i < n; i++) {
                for (int j = 0; j < k; j++) wr(w[j], buf, 8);
                for (int j = 0; j < k; j++) ok &= rd(r[j], in) == 8;
            }
            rr[rep] = (now_s() - t0) / (double)n * 1e6 / 2;
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
            double t0 = now_s();
            for (int j = 0; j < k; j++) wr(w[j], cmd, sizeof cmd);
            for (int j = 0; j < k; j++) /* the pipes buffer what comes meanwhile */
                for (uint64_t i = 0; i < m; i++) ok &= rd(r[j], in) == 65536;
            rr[rep] = (double)k * (double)m * 65536.0 / (now_s() - t0) / 1e6;
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

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <space address> <quick|full> [reps] [hot-spot peers]\n", argv[0]);
        return 2;
    }
    int quick = !strcmp(argv[2], "quick");
    reps = argc > 3 ? atoi(argv[3]) : (quick ? 3 : 5);
    if (reps < 1 || reps > MAXREP) reps = 3;
    char ping[64], pong[64];
    snprintf(ping, sizeof ping, "micro-ping-%d", (int)getpid());
    snprintf(pong, sizeof pong, "micro-pong-%d", (int)getpid());
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        layer_dpdk_env(1);
        int rc = run_echo(argv[1], ping, pong);
        dpdk_done();
        _exit(rc);
    }
    struct hot h = {0};
    int hot = argc > 4 ? atoi(argv[4]) : (quick ? 2 : 4);
    if (hot > 0 && hot <= 16) hot_fork(&h, argv[1], hot);
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
    static const size_t LQ[] = {8, 1024, 65536}, LF[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
    static const size_t BQ[] = {64, 65536}, BF[] = {64, 512, 4096, 32768, 262144, 1048576};
    static const int QS[] = {8, 16, 64, 100};
    const size_t *ls = quick ? LQ : LF, *bs = quick ? BQ : BF;
    size_t nl = quick ? 3 : 7, nb = quick ? 2 : 6;
    char prm[128];
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
        double r2[MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
        buf[0] = 'E';
        for (int k = 0; k < reps; k++) {
            for (long j = -10; j < n; j++) {
                double t0 = now_s();
                wr(w, buf, ls[i]);
                if (rd(r, in) != (long)ls[i]) die("echo size");
                if (j >= 0) rtt[j] = now_s() - t0;
            }
            qsort(rtt, (size_t)n, sizeof *rtt, cmpd);
            r2[k] = rtt[n / 2] * 1e6 / 2;
        }
        free(rtt);
        snprintf(prm, sizeof prm, "\"size\":%zu", ls[i]);
        emit("lat", prm, "one_way_us", "us", r2, n, 1);
    }
    for (size_t qi = 0; qi < 4; qi++)
        for (size_t i = 0; i < nb; i++) {
            int q = QS[qi];
            long bytes = (quick ? 4L : 64L) << 20, wn = bytes / ((long)q * (long)(bs[i] + 48));
            if (quick && wn > 2000 / q) wn = 2000 / q;
            if (wn > 20000 / q) wn = 20000 / q; /* at most ~20000 events a point: small ones take ~100 us each */
            if (wn < 4) wn = 4;
            double r2[MAXREP], c[3][MAXREP];
            int ok = 1;
            struct reply a;
            for (int k = 0; k < reps; k++) {
                buf[0] = 'C';
                wr(w, buf, 8);
                rd(r, in);
                memcpy(&a, in, sizeof a);
                double c0 = a.cpu_s, self0 = proc_cpu_s(), t0 = now_s();
                for (long x = 0; x < wn; x++) {
                    for (int j = 0; j < q; j++) {
                        buf[0] = j == q - 1 ? 'W' : 'B';
                        wr(w, buf, bs[i]);
                    }
                    rd(r, in); /* the window's ack */
                }
                double dt = now_s() - t0, self1 = proc_cpu_s();
                memcpy(&a, in, sizeof a);
                long msgs = wn * q;
                ok &= a.kind == 'A' && a.count == (uint64_t)msgs;
                r2[k] = (double)msgs * (double)bs[i] / dt / 1e6;
                c[0][k] = (self1 - self0) / (double)msgs * 1e6;
                c[1][k] = (a.cpu_s - c0) / (double)msgs * 1e6;
                c[2][k] = dt / (double)msgs * 1e6;
            }
            snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":%d", bs[i], q);
            emit("bw", prm, "MBps", "MB/s", r2, wn * q, ok);
            if (q == 16) {
                snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":16,\"wait\":\"blocking read\"", bs[i]);
                emit("cpu", prm, "sender_cpu_us", "us/msg", c[0], wn * q, ok);
                emit("cpu", prm, "receiver_cpu_us", "us/msg", c[1], wn * q, ok);
                emit("cpu", prm, "wall_us", "us/msg", c[2], wn * q, ok);
            }
        }
    /* completion notification: 8 B and 4 KiB ping-pong, both ends blocking in pi_read
     * against both polling pi_read_timeout(..., 0); latency and the client's CPU share */
    static const size_t nsz[] = {8, 4096};
    for (int poll = 0; poll < 2; poll++)
        for (size_t i = 0; i < 2; i++) {
            long n = quick ? 200 : 3000;
            double r2[MAXREP], c[MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
            buf[0] = poll ? 'P' : 'K';
            wr(w, buf, 8);
            g_poll = poll;
            buf[0] = 'E';
            for (int k = 0; k < reps; k++) {
                double c0 = proc_cpu_s(), t00 = now_s();
                for (long j = -10; j < n; j++) {
                    double t0 = now_s();
                    wr(w, buf, nsz[i]);
                    if (rd(r, in) != (long)nsz[i]) die("echo size");
                    if (j >= 0) rtt[j] = now_s() - t0;
                }
                c[k] = (proc_cpu_s() - c0) / (now_s() - t00);
                qsort(rtt, (size_t)n, sizeof *rtt, cmpd);
                r2[k] = rtt[n / 2] * 1e6 / 2;
            }
            free(rtt);
            snprintf(prm, sizeof prm, "\"size\":%zu,\"wait\":\"%s\"", nsz[i], poll ? "poll" : "block");
            emit("notify", prm, "one_way_us", "us", r2, n, 1);
            emit("notify", prm, "client_cpu_share", "cores", c, n, 1);
        }
    buf[0] = 'K';
    wr(w, buf, 8);
    g_poll = 0;
    long ow = ((quick ? 4L : 64L) << 20) / (16L * (65536 + 48));
    struct pipe_pair pp = {w, r, in};
    layer_overlap_reuse(&pp, pipe_stream, NULL, emit_cb, quick, reps, ow < 4 ? 4 : ow);
    struct pipe_io pio = {w, r};
    struct peer_io io = {&pio, pio_send, pio_flush, pio_recv};
    peer_bidir(&io, quick, reps, NULL, emit_cb);
done:
    buf[0] = 'Q';
    wr(w, buf, 8);
    int st;
    waitpid(pid, &st, 0);
    if (h.np) pipe_hotspot(&h, s, quick);
    pi_close(w);
    pi_detach(r);
    pi_unlink(ping, s);
    pi_unlink(pong, s);
    pi_space_close(s);
    dpdk_done();
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
