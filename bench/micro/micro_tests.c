/* The tests of the interconnect microbenchmarks paper over one link (client side); each
 * point is measured s->reps times and printed as one JSON line (median, min, max). */
#include "micro.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXREP 16
static const size_t LAT_Q[] = {8, 1024, 65536}, LAT_F[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
static const size_t BW_Q[] = {64, 65536}, BW_F[] = {64, 512, 4096, 32768, 262144, 1048576};
static const uint64_t QS[] = {8, 16, 64, 100};
#define N(a) (sizeof(a) / sizeof(a)[0])

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void reset(struct mlink *m)
{
    uint64_t a = m->acks;
    CK(ml_send(m, OP_RESET, NULL, 0));
    while (m->acks == a) CK(ml_pump(m));
}

/* The server's data count since its last reset (an OP_CPU round trip). */
static uint64_t peer_count(struct mlink *m)
{
    uint64_t a = m->acks;
    CK(ml_send(m, OP_CPU, NULL, 0));
    while (m->acks == a) CK(ml_pump(m));
    return m->last_ack.data;
}

static void set_mode(struct mlink *m, int block)
{
    uint8_t b = (uint8_t)block;
    CK(ml_send(m, OP_MODE, &b, 1));
    m->block = block;
    reset(m); /* round trip: the server has switched */
}

/* Messages per repetition: enough bytes to time, fewer for the smoke run. */
static uint64_t lat_iters(const struct suite *s, size_t size)
{
    uint64_t n = s->quick ? 300 : 20000, cap = (s->quick ? 32u : 512u) << 20;
    if (n * (size + 64) > cap) n = cap / (size + 64);
    return n < 50 ? 50 : n;
}

static uint64_t windows_for(const struct suite *s, uint64_t q, size_t size)
{
    uint64_t bytes = (s->quick ? 16ull : 256ull) << 20, w = bytes / (q * (size + 48));
    uint64_t lo = s->quick ? 4 : 16;
    if (s->quick && w > 1000 / q) w = 1000 / q; /* the smoke run: at most ~1000 messages */
    if (w < lo) w = lo;
    if (w > 50000 / q) w = 50000 / q; /* at most ~50000 messages a point: small sizes on tcp take ~30 us each */
    return w;
}

/* One ping-pong run; returns the median one-way latency in us. */
static double pingpong(struct mlink *m, size_t size, uint64_t n, int *matched)
{
    uint8_t *buf = calloc(1, size ? size : 1);
    double *rtt = malloc(sizeof(double) * n);
    uint64_t e0 = m->echoes;
    for (uint64_t i = 0; i < n / 10 + 10; i++) { /* warm-up */
        CK(ml_send(m, OP_ECHO, buf, size));
        while (m->echoes == e0 + i) CK(ml_pump(m));
    }
    e0 = m->echoes;
    for (uint64_t i = 0; i < n; i++) {
        double t0 = now_s();
        CK(ml_send(m, OP_ECHO, buf, size));
        while (m->echoes == e0 + i) CK(ml_pump(m));
        rtt[i] = now_s() - t0;
    }
    *matched &= m->echoes - e0 == n;
    qsort(rtt, n, sizeof *rtt, cmpd);
    double med = rtt[n / 2] * 1e6 / 2;
    free(rtt), free(buf);
    return med;
}

void test_lat(struct suite *s, struct mlink *m)
{
    const size_t *sz = s->quick ? LAT_Q : LAT_F;
    size_t ns = s->quick ? N(LAT_Q) : N(LAT_F);
    for (size_t i = 0; i < ns; i++) {
        double r[MAXREP];
        int ok = 1;
        uint64_t n = lat_iters(s, sz[i]);
        for (int k = 0; k < s->reps; k++) r[k] = pingpong(m, sz[i], n, &ok);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu", sz[i]);
        emit(&s->out, "lat", p, "one_way_us", "us", r, s->reps, (long)n, ok);
    }
}

/* One windowed stream; returns MB/s; sets the CPU figures when cpu != NULL:
 * cpu[0] = send-call CPU, cpu[1] = this process's CPU, cpu[2] = the peer's CPU, cpu[3] =
 * wall time, all per message in us. */
static double stream_run(struct mlink *m, uint64_t q, struct bufset *b, double compute_ns,
                         int *matched, double *cpu, double *share)
{
    uint64_t w = 0;
    reset(m);
    double peer0 = 0, self0 = 0, send_cpu = 0;
    if (cpu) {
        uint64_t a = m->acks;
        CK(ml_send(m, OP_CPU, NULL, 0));
        while (m->acks == a) CK(ml_pump(m));
        peer0 = m->last_ack.cpu_s;
        self0 = proc_cpu_s();
    }
    w = (uint64_t)(share ? *share : 0); /* the caller passes the window count in *share */
    double t0 = now_s();
    ml_stream(m, w, q, b, compute_ns, cpu ? &send_cpu : NULL);
    double dt = now_s() - t0;
    uint64_t msgs = w * q;
    *matched &= m->last_ack.data == msgs;
    if (cpu) {
        double self1 = proc_cpu_s();
        uint64_t a = m->acks;
        CK(ml_send(m, OP_CPU, NULL, 0));
        while (m->acks == a) CK(ml_pump(m));
        cpu[0] = send_cpu / (double)msgs * 1e6;
        cpu[1] = (self1 - self0) / (double)msgs * 1e6;
        cpu[2] = (m->last_ack.cpu_s - peer0) / (double)msgs * 1e6;
        cpu[3] = dt / (double)msgs * 1e6;
    }
    if (share) *share = compute_ns * 1e-9 * (double)msgs / dt;
    return (double)msgs * (double)b->size / dt / 1e6;
}

static double stream_simple(const struct suite *s, struct mlink *m, uint64_t q, struct bufset *b,
                            double compute_ns, int *ok, double *cpu, double *share_out,
                            uint64_t *msgs)
{
    double sh = (double)windows_for(s, q, b->size);
    *msgs = (uint64_t)sh * q;
    double bw = stream_run(m, q, b, compute_ns, ok, cpu, &sh);
    if (share_out) *share_out = sh;
    return bw;
}

void test_bw(struct suite *s, struct mlink *m)
{
    const size_t *sz = s->quick ? BW_Q : BW_F;
    size_t ns = s->quick ? N(BW_Q) : N(BW_F);
    for (size_t qi = 0; qi < N(QS); qi++)
        for (size_t i = 0; i < ns; i++) {
            struct bufset b;
            bufset_init(&b, 1, sz[i], -1);
            double r[MAXREP];
            int ok = 1;
            uint64_t msgs = 0;
            for (int k = 0; k < s->reps; k++)
                r[k] = stream_simple(s, m, QS[qi], &b, 0, &ok, NULL, NULL, &msgs);
            bufset_free(&b);
            char p[64];
            snprintf(p, sizeof p, "\"size\":%zu,\"q\":%llu", sz[i], (unsigned long long)QS[qi]);
            emit(&s->out, "bw", p, "MBps", "MB/s", r, s->reps, (long)msgs, ok);
        }
}

void test_bidir(struct suite *s, struct mlink *m)
{
    const size_t *sz = s->quick ? BW_Q : BW_F;
    size_t ns = s->quick ? N(BW_Q) : N(BW_F);
    for (size_t i = 0; i < ns; i++) { /* bidirectional latency: both send each round */
        if (sz[i] > 65536) continue;
        double r[MAXREP];
        int ok = 1;
        uint64_t n = lat_iters(s, sz[i]);
        uint8_t *buf = calloc(1, sz[i]);
        for (int k = 0; k < s->reps; k++) {
            reset(m);
            struct cmd_msg c = {n, 0, sz[i]};
            uint64_t d0 = m->data;
            CK(ml_send(m, OP_BILAT, &c, sizeof c));
            double t0 = now_s();
            for (uint64_t j = 0; j < n; j++) {
                CK(ml_send(m, OP_DATA, buf, sz[i]));
                while (m->data < d0 + j + 1) CK(ml_pump(m));
            }
            r[k] = (now_s() - t0) / (double)n * 1e6;
            ok &= peer_count(m) == n && m->data - d0 == n;
        }
        free(buf);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu", sz[i]);
        emit(&s->out, "bilat", p, "round_us", "us", r, s->reps, (long)n, ok);
    }
    uint64_t q = 64;
    for (size_t i = 0; i < ns; i++) { /* bidirectional bandwidth: both stream at once */
        struct bufset b;
        bufset_init(&b, 1, sz[i], -1);
        double r[MAXREP];
        int ok = 1;
        uint64_t w = windows_for(s, q, sz[i]);
        for (int k = 0; k < s->reps; k++) {
            reset(m);
            struct cmd_msg c = {w, q, sz[i]};
            uint64_t d0 = m->data, wend0 = m->wends;
            double t0 = now_s();
            CK(ml_send(m, OP_STREAM, &c, sizeof c));
            ml_stream(m, w, q, &b, 0, NULL);
            while (m->wends < wend0 + w) CK(ml_pump(m));
            double dt = now_s() - t0;
            ok &= m->last_ack.data == w * q && m->data - d0 == w * q;
            r[k] = 2.0 * (double)(w * q) * (double)sz[i] / dt / 1e6;
        }
        bufset_free(&b);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu,\"q\":%llu", sz[i], (unsigned long long)q);
        emit(&s->out, "bibw", p, "MBps", "MB/s", r, s->reps, (long)(w * q), ok);
    }
}

/* Host CPU per message (getrusage / CLOCK_THREAD_CPUTIME_ID, not wall time) while streaming
 * with Q = 16, both ends busy-polling and both ends blocking on the fd when idle. */
void test_cpu(struct suite *s, struct mlink *m)
{
    static const size_t sz[] = {64, 65536};
    static const char *metric[] = {"send_call_cpu_us", "sender_cpu_us", "receiver_cpu_us",
                                   "wall_us"};
    for (int block = 0; block < 2; block++) {
        set_mode(m, block);
        for (size_t i = 0; i < N(sz); i++) {
            struct bufset b;
            bufset_init(&b, 1, sz[i], -1);
            double r[4][MAXREP], cpu[4];
            int ok = 1;
            uint64_t msgs = 0;
            for (int k = 0; k < s->reps; k++) {
                stream_simple(s, m, 16, &b, 0, &ok, cpu, NULL, &msgs);
                for (int j = 0; j < 4; j++) r[j][k] = cpu[j];
            }
            bufset_free(&b);
            char p[96];
            snprintf(p, sizeof p, "\"size\":%zu,\"q\":16,\"wait\":\"%s\"", sz[i],
                     block ? "block" : "poll");
            for (int j = 0; j < 4; j++)
                emit(&s->out, "cpu", p, metric[j], "us/msg", r[j], s->reps, (long)msgs, ok);
        }
    }
    set_mode(m, 0);
}

/* Bandwidth while the sender computes between sends for a growing share of the time. */
void test_overlap(struct suite *s, struct mlink *m)
{
    static const double us[] = {0, 2, 5, 10, 20, 50, 100};
    size_t nus = s->quick ? 4 : N(us);
    struct bufset b;
    bufset_init(&b, 1, 65536, -1);
    for (size_t i = 0; i < nus; i++) {
        double r[MAXREP], sh[MAXREP];
        int ok = 1;
        uint64_t msgs = 0;
        for (int k = 0; k < s->reps; k++)
            r[k] = stream_simple(s, m, 16, &b, us[i] * 1e3, &ok, NULL, &sh[k], &msgs);
        qsort(sh, (size_t)s->reps, sizeof *sh, cmpd);
        char p[128];
        snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"compute_us\":%g,\"compute_share\":%.3f",
                 us[i], sh[s->reps / 2]);
        emit(&s->out, "overlap", p, "MBps", "MB/s", r, s->reps, (long)msgs, ok);
    }
    bufset_free(&b);
}

/* Completion notification: ping-pong latency and CPU per round trip, busy polling against
 * blocking on the link's fd (both ends). */
void test_notify(struct suite *s, struct mlink *m)
{
    static const size_t sz[] = {8, 4096};
    for (int block = 0; block < 2; block++) {
        set_mode(m, block);
        for (size_t i = 0; i < N(sz); i++) {
            double r[MAXREP], c[MAXREP];
            int ok = 1;
            uint64_t n = lat_iters(s, sz[i]);
            for (int k = 0; k < s->reps; k++) {
                double c0 = proc_cpu_s(), t0 = now_s();
                r[k] = pingpong(m, sz[i], n, &ok);
                double wall = now_s() - t0;
                c[k] = (proc_cpu_s() - c0) / wall; /* share of a core busy on the client */
            }
            char p[96];
            snprintf(p, sizeof p, "\"size\":%zu,\"wait\":\"%s\"", sz[i], block ? "block" : "poll");
            emit(&s->out, "notify", p, "one_way_us", "us", r, s->reps, (long)n, ok);
            emit(&s->out, "notify", p, "client_cpu_share", "cores", c, s->reps, (long)n, ok);
        }
    }
    set_mode(m, 0);
}

/* Buffer reuse: N buffers used in FIFO order, and a reuse share R of buffer 0 among 256. */
void test_reuse(struct suite *s, struct mlink *m)
{
    static const int nb[] = {1, 4, 16, 64, 256}, rp[] = {0, 25, 50, 75, 100};
    size_t size = 65536;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < N(nb); i++) {
            if (s->quick && (i % 2)) continue;
            struct bufset b;
            if (pass == 0) bufset_init(&b, nb[i], size, -1);
            else bufset_init(&b, 256, size, rp[i]);
            double r[MAXREP];
            int ok = 1;
            uint64_t msgs = 0;
            for (int k = 0; k < s->reps; k++)
                r[k] = stream_simple(s, m, 16, &b, 0, &ok, NULL, NULL, &msgs);
            bufset_free(&b);
            char p[96];
            if (pass == 0) snprintf(p, sizeof p, "\"size\":%zu,\"q\":16,\"buffers\":%d", size, nb[i]);
            else snprintf(p, sizeof p, "\"size\":%zu,\"q\":16,\"buffers\":256,\"reuse_pct\":%d", size, rp[i]);
            emit(&s->out, pass == 0 ? "reuse_fifo" : "reuse_pct", p, "MBps", "MB/s", r, s->reps,
                 (long)msgs, ok);
        }
}

/* Hot-spot: this node pings all npeers at once per round (send to and receive from 1..N),
 * then receives windowed streams from all of them at once. */
void test_hotspot(struct suite *s, struct mlink *m, int np)
{
    uint64_t n = s->quick ? 200 : 5000;
    uint8_t buf[8] = {0};
    double r[MAXREP];
    int ok = 1;
    for (int k = 0; k < s->reps; k++) {
        uint64_t e0[16];
        for (int j = 0; j < np; j++) e0[j] = m[j].echoes;
        double t0 = now_s();
        for (uint64_t i = 0; i < n; i++) {
            for (int j = 0; j < np; j++) CK(ml_send(&m[j], OP_ECHO, buf, sizeof buf));
            for (int j = 0; j < np; j++)
                while (m[j].echoes == e0[j] + i) CK(ml_pump(&m[j]));
        }
        r[k] = (now_s() - t0) / (double)n * 1e6 / 2;
        for (int j = 0; j < np; j++) ok &= m[j].echoes - e0[j] == n;
    }
    char p[64];
    snprintf(p, sizeof p, "\"peers\":%d,\"size\":8", np);
    emit(&s->out, "hotspot_lat", p, "one_way_us", "us", r, s->reps, (long)n, ok);
    uint64_t q = 16, w = windows_for(s, q, 65536) / (uint64_t)np + 2;
    ok = 1;
    for (int k = 0; k < s->reps; k++) {
        uint64_t wend0[16], d0[16];
        struct cmd_msg c = {w, q, 65536};
        double t0 = now_s();
        for (int j = 0; j < np; j++) {
            wend0[j] = m[j].wends, d0[j] = m[j].data;
            CK(ml_send(&m[j], OP_STREAM, &c, sizeof c));
        }
        for (int busy = 1; busy;) {
            busy = 0;
            for (int j = 0; j < np; j++)
                if (m[j].wends < wend0[j] + w) {
                    CK(ml_pump(&m[j]));
                    busy = 1;
                }
        }
        double dt = now_s() - t0;
        for (int j = 0; j < np; j++) ok &= m[j].data - d0[j] == w * q;
        r[k] = (double)np * (double)(w * q) * 65536.0 / dt / 1e6;
    }
    snprintf(p, sizeof p, "\"peers\":%d,\"size\":65536,\"q\":16", np);
    emit(&s->out, "hotspot_bw", p, "MBps", "MB/s", r, s->reps, (long)(w * q), ok);
}

void run_tests(struct suite *s, const char *which, struct mlink *m)
{
    int all = !strcmp(which, "all");
    if (all || !strcmp(which, "lat")) test_lat(s, m);
    if (all || !strcmp(which, "bw")) test_bw(s, m);
    if (all || !strcmp(which, "bidir")) test_bidir(s, m);
    if (all || !strcmp(which, "cpu")) test_cpu(s, m);
    if (all || !strcmp(which, "overlap")) test_overlap(s, m);
    if (all || !strcmp(which, "notify")) test_notify(s, m);
    if (all || !strcmp(which, "reuse")) test_reuse(s, m);
}
