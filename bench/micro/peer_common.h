/* What the layer peers (peer_zmq.c, peer_nats.c) share with layer_chan.c and layer_pipe.c:
 * the same sizes, windows and message counts, clocks, micro.h's JSON rows, the command line,
 * forked processes, and the windowed bandwidth and stream (layer_pipe.c's too). The echo
 * protocol is theirs too: byte 0 of a message 'E' echoed at the same size, 'B' counted,
 * 'W' counted and answered with struct peer_reply, 'C' answered likewise (zeroing the
 * count), 'T' streamed back (the hot-spot), 'Q' quit. */
#ifndef PEER_COMMON_H
#define PEER_COMMON_H

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

#include "layer_common.h"

#define PEER_MAXREP 16
#define PEER_MAXMSG (1u << 20)

struct peer_reply { uint8_t kind, pad[7]; uint64_t count; double cpu_s; };

static const size_t PEER_LQ[] = {8, 1024, 65536}, PEER_LF[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
static const size_t PEER_BQ[] = {64, 65536}, PEER_BF[] = {64, 512, 4096, 32768, 262144, 1048576};
static const int PEER_QS[] = {8, 16, 64, 100};

static inline double peer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double peer_cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/* Round trips per latency point and windows per bandwidth point: layer_chan.c's counts. */
static inline long peer_lat_n(int quick, size_t size)
{
    return size >= 262144 ? (quick ? 50 : 300) : (quick ? 300 : 5000);
}

static inline long peer_windows(int quick, int q, size_t size)
{
    long bytes = (quick ? 4L : 64L) << 20, w = bytes / ((long)q * (long)(size + 48));
    if (quick && w > 2000 / q) w = 2000 / q;
    if (w > 20000 / q) w = 20000 / q;
    return w < 4 ? 4 : w;
}

static inline int peer_cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of n round trips (sorts rtt), as one-way microseconds: half of it. */
static inline double peer_one_way_us(double *rtt, long n)
{
    qsort(rtt, (size_t)n, sizeof *rtt, peer_cmpd);
    return rtt[n / 2] * 1e6 / 2;
}

/* One row of layer on link: the median over r[0..reps) with min and max; note NULL: none. */
static inline void peer_row(const char *layer, const char *link, const char *note, const char *test,
                            const char *params, const char *metric, const char *unit, const double *r,
                            int reps, long n, int ok)
{
    double s[PEER_MAXREP];
    memcpy(s, r, sizeof(double) * (size_t)reps);
    qsort(s, (size_t)reps, sizeof *s, peer_cmpd);
    double med = reps % 2 ? s[reps / 2] : (s[reps / 2 - 1] + s[reps / 2]) / 2;
    printf("{\"layer\":\"%s\",\"link\":\"%s\",\"test\":\"%s\",\"params\":{%s},\"metric\":\"%s\","
           "\"unit\":\"%s\",\"median\":%.4g,\"min\":%.4g,\"max\":%.4g,\"reps\":[", layer, link, test,
           params, metric, unit, med, s[0], s[reps - 1]);
    for (int i = 0; i < reps; i++) printf("%s%.4g", i ? "," : "", r[i]);
    printf("],\"n\":%ld,\"matched\":%s", n, ok ? "true" : "false");
    if (note) printf(",\"note\":\"%s\"", note);
    printf("}\n");
    fflush(stdout);
}

/* A peer's row: its layer's, on tcp. */
static inline void peer_emit(const char *layer, const char *note, const char *test, const char *params,
                             const char *metric, const char *unit, const double *r, int reps, long n, int ok)
{
    peer_row(layer, "tcp", note, test, params, metric, unit, r, reps, n, ok);
}

/* The command line after a program's own arguments, from argv[at]: <quick|full> [reps]
 * [hot-spot peers (quick 2, full 4)]; reps out of 1..PEER_MAXREP become 3, peers out of
 * 0..16 become 0. */
static inline void peer_args(int argc, char **argv, int at, int *quick, int *reps, int *hot)
{
    *quick = !strcmp(argv[at], "quick");
    *reps = argc > at + 1 ? atoi(argv[at + 1]) : (*quick ? 3 : 5);
    if (*reps < 1 || *reps > PEER_MAXREP) *reps = 3;
    *hot = argc > at + 2 ? atoi(argv[at + 2]) : (*quick ? 2 : 4);
    if (*hot < 0 || *hot > 16) *hot = 0;
}

/* Forks a process that evaluates child (an expression: its exit code) and dies with this
 * one; its pid, in this process. */
#define PEER_FORK(child)                                                                   \
    ({                                                                                     \
        fflush(NULL);                                                                      \
        pid_t pid_ = fork();                                                               \
        if (pid_ == 0) {                                                                   \
            prctl(PR_SET_PDEATHSIG, SIGKILL);                                              \
            _exit(child);                                                                  \
        }                                                                                  \
        pid_;                                                                              \
    })

/* Waits for n forked processes; 0 when every one exited with 0, else 1. */
static inline int peer_reap(const pid_t *pid, int n)
{
    int bad = 0;
    for (int j = 0; j < n; j++) {
        int st;
        waitpid(pid[j], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

/* A peer's transport: send one message (queued; flush sends what is queued), receive the
 * next one (its length; exits the process after a timeout). */
struct peer_io {
    void *ctx;
    void (*send)(void *ctx, const void *p, size_t n);
    void (*flush)(void *ctx);
    long (*recv)(void *ctx, void *buf);
};

/* Bidirectional tests, both ends: 'L' (u64 rounds, u64 size at bytes 8, 16): each round
 * both ends send one message of size bytes ('D') and then receive the other's; 'S' (u64 n,
 * u64 size): both ends send n messages, then receive the other's n, and the echo end
 * answers with an 'A' once it has all of them. Returns 1 when buf was one of these. */
struct peer_cmd { uint8_t kind, pad[7]; uint64_t n, size; };

static inline int peer_serve_bidir(const struct peer_io *io, uint8_t *buf, long len)
{
    struct peer_cmd c;
    if (len < (long)sizeof c || (buf[0] != 'L' && buf[0] != 'S')) return 0;
    memcpy(&c, buf, sizeof c);
    if (c.size > PEER_MAXMSG || c.size < 8) return 1;
    uint8_t *out = calloc(1, c.size);
    out[0] = 'D';
    if (c.kind == 'L') {
        for (uint64_t i = 0; i < c.n; i++) {
            io->send(io->ctx, out, c.size);
            io->flush(io->ctx);
            io->recv(io->ctx, buf);
        }
    } else {
        for (uint64_t i = 0; i < c.n; i++) io->send(io->ctx, out, c.size);
        io->flush(io->ctx);
        for (uint64_t i = 0; i < c.n; i++) io->recv(io->ctx, buf);
        struct peer_reply a = {.kind = 'A', .count = c.n};
        io->send(io->ctx, &a, sizeof a);
        io->flush(io->ctx);
    }
    free(out);
    return 1;
}

/* The measuring end of the bidirectional tests: bilat (round_us, sizes up to 64 KiB) and
 * bibw (MB/s of both directions; no window: each end sends all, then reads). */
static inline void peer_bidir(const struct peer_io *io, int quick, int reps, void *ectx,
                              layer_emit_fn emit)
{
    const size_t *bs = quick ? PEER_BQ : PEER_BF;
    size_t nb = quick ? 2 : 6;
    uint8_t *buf = calloc(1, PEER_MAXMSG), *in = malloc(PEER_MAXMSG);
    char prm[64];
    double r[PEER_MAXREP];
    for (int bi = 0; bi < 2; bi++)
        for (size_t i = 0; i < nb; i++) {
            if (!bi && bs[i] > 65536) continue;
            long n = bi ? ((quick ? 4L : 16L) << 20) / (long)(bs[i] + 48) : peer_lat_n(quick, bs[i]);
            if (n > (quick ? 2000 : 20000)) n = quick ? 2000 : 20000;
            if (n < 4) n = 4;
            int ok = 1;
            for (int k = 0; k < reps; k++) {
                struct peer_cmd c = {.kind = bi ? 'S' : 'L', .n = (uint64_t)n, .size = bs[i]};
                io->send(io->ctx, &c, sizeof c);
                buf[0] = 'D';
                double t0 = peer_now();
                if (!bi) {
                    for (long j = 0; j < n; j++) {
                        io->send(io->ctx, buf, bs[i]);
                        io->flush(io->ctx);
                        ok &= io->recv(io->ctx, in) == (long)bs[i];
                    }
                    r[k] = (peer_now() - t0) / (double)n * 1e6;
                } else {
                    for (long j = 0; j < n; j++) io->send(io->ctx, buf, bs[i]);
                    io->flush(io->ctx);
                    for (long j = 0; j < n; j++) ok &= io->recv(io->ctx, in) == (long)bs[i];
                    io->recv(io->ctx, in); /* the echo end has all of ours */
                    struct peer_reply a;
                    memcpy(&a, in, sizeof a);
                    ok &= a.kind == 'A' && a.count == (uint64_t)n;
                    r[k] = 2.0 * (double)n * (double)bs[i] / (peer_now() - t0) / 1e6;
                }
            }
            snprintf(prm, sizeof prm, "\"size\":%zu", bs[i]);
            if (bi) emit(ectx, "bibw", prm, "MBps", "MB/s", r, reps, n, ok);
            else emit(ectx, "bilat", prm, "round_us", "us", r, reps, n, ok);
        }
    free(buf), free(in);
}

/* The hot-spot's 'T' (struct peer_cmd: n messages of size bytes, as layer_chan.c's and
 * layer_pipe.c's sinks take it): the echo end streams them back marked 'D', no window. */
static inline void peer_serve_stream(const struct peer_io *io, const uint8_t *buf, long len)
{
    struct peer_cmd c;
    if (len < (long)sizeof c) return;
    memcpy(&c, buf, sizeof c);
    if (c.size > PEER_MAXMSG || c.size < 8) return;
    uint8_t *out = calloc(1, c.size);
    out[0] = 'D';
    for (uint64_t i = 0; i < c.n; i++) io->send(io->ctx, out, c.size);
    io->flush(io->ctx);
    free(out);
}

/* The echo end: answers until 'Q'. */
static inline void peer_serve(const struct peer_io *io)
{
    uint8_t *buf = malloc(PEER_MAXMSG);
    uint64_t count = 0;
    for (;;) {
        long n = io->recv(io->ctx, buf);
        struct peer_reply a = {.kind = 'A'};
        if (peer_serve_bidir(io, buf, n)) continue;
        switch (n > 0 ? buf[0] : 0) {
        case 'E': io->send(io->ctx, buf, (size_t)n); io->flush(io->ctx); continue;
        case 'T': peer_serve_stream(io, buf, n); continue;
        case 'B': count++; continue;
        case 'W': count++, a.count = count; break;
        case 'C': a.kind = 'C', a.count = count, count = 0; break;
        case 'Q': free(buf); return;
        default: continue;
        }
        a.cpu_s = peer_cpu();
        io->send(io->ctx, &a, sizeof a);
        io->flush(io->ctx);
    }
}

/* layer_common.h's stream and row printer over a peer's transport. */
struct peer_ctx { const struct peer_io *io; uint8_t *in; const char *layer, *note; };

static inline double peer_stream(void *ctx, struct lbufs *b, int q, long windows, double compute_us,
                                 int *ok)
{
    struct peer_ctx *pc = ctx;
    const struct peer_io *io = pc->io;
    struct peer_reply a;
    uint8_t c[8] = {'C'};
    io->send(io->ctx, c, sizeof c); /* zero the count */
    io->flush(io->ctx);
    io->recv(io->ctx, pc->in);
    double t0 = peer_now();
    for (long x = 0; x < windows; x++) {
        for (int j = 0; j < q; j++) {
            uint8_t *p = lb_next(b);
            p[0] = j == q - 1 ? 'W' : 'B';
            io->send(io->ctx, p, b->size);
            p[0] = 'B';
            if (compute_us > 0) lb_spin_us(compute_us);
        }
        io->flush(io->ctx);
        io->recv(io->ctx, pc->in);
    }
    double dt = peer_now() - t0;
    memcpy(&a, pc->in, sizeof a);
    *ok &= a.kind == 'A' && a.count == (uint64_t)(windows * q);
    return (double)(windows * q) * (double)b->size / dt / 1e6;
}

static inline void peer_emit_cb(void *ectx, const char *test, const char *params, const char *metric,
                                const char *unit, const double *r, int reps, long n, int ok)
{
    struct peer_ctx *pc = ectx;
    peer_emit(pc->layer, pc->note, test, params, metric, unit, r, reps, n, ok);
}

/* Bandwidth with Q = 8, 16, 64, 100 outstanding (the window's last message answered), and at
 * Q = 16 the CPU per message of both ends (getrusage) and the wall time; cpu_params is added
 * to the CPU rows' params (how the measuring end waits, or ""). */
static inline void peer_bw(const struct peer_io *io, int quick, int reps, const char *cpu_params,
                           void *ectx, layer_emit_fn emit)
{
    uint8_t *buf = calloc(1, PEER_MAXMSG), *in = malloc(PEER_MAXMSG);
    const size_t *bs = quick ? PEER_BQ : PEER_BF;
    size_t nb = quick ? 2 : 6;
    char prm[128];
    for (size_t qi = 0; qi < 4; qi++)
        for (size_t i = 0; i < nb; i++) {
            int q = PEER_QS[qi];
            long w = peer_windows(quick, q, bs[i]);
            double r[PEER_MAXREP], c[3][PEER_MAXREP];
            int ok = 1;
            struct peer_reply a;
            for (int k = 0; k < reps; k++) {
                buf[0] = 'C'; /* zero the count, read the echo end's CPU */
                io->send(io->ctx, buf, 8);
                io->flush(io->ctx);
                io->recv(io->ctx, in);
                memcpy(&a, in, sizeof a);
                double c0 = a.cpu_s, self0 = peer_cpu(), t0 = peer_now();
                for (long x = 0; x < w; x++) {
                    for (int j = 0; j < q; j++) {
                        buf[0] = j == q - 1 ? 'W' : 'B';
                        io->send(io->ctx, buf, bs[i]);
                    }
                    io->flush(io->ctx);
                    io->recv(io->ctx, in); /* the window's answer */
                }
                double dt = peer_now() - t0, self1 = peer_cpu();
                memcpy(&a, in, sizeof a);
                long msgs = w * q;
                ok &= a.kind == 'A' && a.count == (uint64_t)msgs;
                r[k] = (double)msgs * (double)bs[i] / dt / 1e6;
                c[0][k] = (self1 - self0) / (double)msgs * 1e6;
                c[1][k] = (a.cpu_s - c0) / (double)msgs * 1e6;
                c[2][k] = dt / (double)msgs * 1e6;
            }
            snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":%d", bs[i], q);
            emit(ectx, "bw", prm, "MBps", "MB/s", r, reps, w * q, ok);
            if (q == 16) {
                snprintf(prm, sizeof prm, "\"size\":%zu,\"q\":16%s", bs[i], cpu_params);
                emit(ectx, "cpu", prm, "sender_cpu_us", "us/msg", c[0], reps, w * q, ok);
                emit(ectx, "cpu", prm, "receiver_cpu_us", "us/msg", c[1], reps, w * q, ok);
                emit(ectx, "cpu", prm, "wall_us", "us/msg", c[2], reps, w * q, ok);
            }
        }
    free(buf), free(in);
}

/* The measuring end: latency against size, bandwidth with Q = 8, 16, 64, 100 outstanding
 * (the window's last message answered), and at Q = 16 the CPU per message of both ends
 * (getrusage) and the wall time; rows as layer_chan.c's (the CPU rows without its `wait`, so
 * they stand beside the layer's whatever it waits with: the note says how this peer waits). */
static inline void peer_measure(const struct peer_io *io, int quick, int reps, const char *layer,
                                const char *note)
{
    uint8_t *buf = calloc(1, PEER_MAXMSG), *in = malloc(PEER_MAXMSG);
    const size_t *ls = quick ? PEER_LQ : PEER_LF;
    size_t nl = quick ? 3 : 7;
    char prm[128];
    for (size_t i = 0; i < nl; i++) {
        long n = peer_lat_n(quick, ls[i]);
        double r[PEER_MAXREP], *rtt = malloc(sizeof(double) * (size_t)n);
        int ok = 1;
        buf[0] = 'E';
        for (int k = 0; k < reps; k++) {
            for (long j = -20; j < n; j++) {
                double t0 = peer_now();
                io->send(io->ctx, buf, ls[i]);
                io->flush(io->ctx);
                ok &= io->recv(io->ctx, in) == (long)ls[i];
                if (j >= 0) rtt[j] = peer_now() - t0;
            }
            r[k] = peer_one_way_us(rtt, n);
        }
        free(rtt);
        snprintf(prm, sizeof prm, "\"size\":%zu", ls[i]);
        peer_emit(layer, note, "lat", prm, "one_way_us", "us", r, reps, n, ok);
    }
    struct peer_ctx pc = {io, in, layer, note};
    peer_bw(io, quick, reps, "", &pc, peer_emit_cb);
    layer_overlap_reuse(&pc, peer_stream, &pc, peer_emit_cb, quick, reps, peer_windows(quick, 16, 65536));
    peer_bidir(io, quick, reps, &pc, peer_emit_cb);
    buf[0] = 'Q';
    io->send(io->ctx, buf, 8);
    io->flush(io->ctx);
    free(buf), free(in);
}

/* The hot node of the hot-spot test: np echo ends (peer_serve), each reached on its own
 * (send to one of them), all answering into one receiver (recv from any: ZeroMQ's PULL,
 * one NATS subject), as layer_chan.c's sinks answer into one handler. */
struct peer_hot_io {
    void *ctx;
    void (*send)(void *ctx, int peer, const void *p, size_t n);
    void (*flush)(void *ctx);
    long (*recv)(void *ctx, void *buf);
};

/* hotspot_lat: each round one 8-byte 'E' to each of the first k ends, then their k echoes
 * (half the round, averaged as the layers do); hotspot_bw: each of k ends streams m messages
 * of 64 KiB at once ('T'), m * k about 4 MiB (quick) or full_mib; k = 1..np. Then 'Q' to all. */
static inline void peer_hotspot(const struct peer_hot_io *io, int np, int quick, int reps, long full_mib,
                                const char *layer, const char *note)
{
    uint8_t *buf = calloc(1, PEER_MAXMSG), *in = malloc(PEER_MAXMSG);
    char prm[96];
    double r[PEER_MAXREP];
    for (int k = 1; k <= np; k++) {
        long n = quick ? 200 : 3000;
        int ok = 1;
        buf[0] = 'E';
        for (int rep = 0; rep < reps; rep++) {
            double t0 = peer_now();
            for (long i = 0; i < n; i++) {
                for (int j = 0; j < k; j++) io->send(io->ctx, j, buf, 8);
                io->flush(io->ctx);
                for (int j = 0; j < k; j++) ok &= io->recv(io->ctx, in) == 8;
            }
            r[rep] = (peer_now() - t0) / (double)n * 1e6 / 2;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":8", k);
        peer_emit(layer, note, "hotspot_lat", prm, "one_way_us", "us", r, reps, n, ok);
        uint64_t m = (uint64_t)(((quick ? 4L : full_mib) << 20) / 65536 / k);
        if (m < 16) m = 16;
        ok = 1;
        for (int rep = 0; rep < reps; rep++) {
            struct peer_cmd c = {.kind = 'T', .n = m, .size = 65536};
            double t0 = peer_now();
            for (int j = 0; j < k; j++) io->send(io->ctx, j, &c, sizeof c);
            io->flush(io->ctx);
            for (uint64_t i = 0; i < m * (uint64_t)k; i++) {
                long got = io->recv(io->ctx, in);
                ok &= got == 65536 && in[0] == 'D';
            }
            r[rep] = (double)k * (double)m * 65536.0 / (peer_now() - t0) / 1e6;
        }
        snprintf(prm, sizeof prm, "\"peers\":%d,\"size\":65536", k);
        peer_emit(layer, note, "hotspot_bw", prm, "MBps", "MB/s", r, reps, (long)m, ok);
    }
    buf[0] = 'Q';
    for (int j = 0; j < np; j++) io->send(io->ctx, j, buf, 8);
    io->flush(io->ctx);
    free(buf), free(in);
}

#endif
