/* Events per second through a derived sink that computes at the source, against the same
 * computation done by the subscriber after receiving every whole event.
 *
 *   build/xform_bench [N] [REPS] [shm|tcp]   (N events per run, default 100000; REPS 3;
 *                                             the link, default shm)
 *
 * One source process (this one) and one sink process on this host, linked over shared
 * memory or, with tcp, over loopback tcp (both runtimes tcp_only: what two hosts would use),
 * a reliable channel of readings {step, x, energy float[256]} (1048 wire bytes). The link
 * the runtime took is checked (the run fails on another). Two modes, alternated:
 *   transform   the sink subscribes with projection {step, mean, peak} and the program
 *               "mean = mean(energy); peak = max(energy)": each source computes and sends
 *               32 wire bytes;
 *   subscriber  a plain sink gets every whole reading and computes mean and max itself.
 * The rate is N / (time from the first submit to the sink's handler seeing event N), both
 * clocks CLOCK_MONOTONIC on one host. Both modes sum every mean they saw: the sums must
 * agree, or the run fails. Prints one line per run (with the bytes the source sent per
 * event) and a JSON line: the medians, their ratio, each mode's min and max. */
#define _GNU_SOURCE
#pragma GCC diagnostic ignored "-Wmissing-field-initializers" /* {NULL} ends a field list */
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_tcp; /* both runtimes tcp_only on loopback */

static struct cx_chan_ctx_opts *ctx_opts(void)
{
    static struct cx_chan_ctx_opts o = {.listen = "tcp://127.0.0.1:0", .tcp_only = 1};
    return g_tcp ? &o : NULL;
}

#define NE 256
struct reading { int64_t step; double x; float energy[NE]; };
struct summary { int64_t step; double mean, peak; };

static const struct cx_format *reg(const struct cx_field *f, const char *name, size_t size)
{
    struct cx_struct_decl d[2];
    memset(d, 0, sizeof d);
    d[0] = (struct cx_struct_decl){name, f, size};
    struct cx_format *x;
    const struct cx_format *c = NULL;
    if (cx_format_create(d, NULL, &x) < 0 || cx_format_registry_insert(x, &c) < 0) {
        fprintf(stderr, "format %s: %s\n", name, cx_errmsg());
        exit(1);
    }
    return c;
}

static const struct cx_format *reading_fmt(void)
{
    static const struct cx_field f[] = {
        {"step", "int64", 8, offsetof(struct reading, step), NULL},
        {"x", "double", 8, offsetof(struct reading, x), NULL},
        {"energy", "float[256]", 4, offsetof(struct reading, energy), NULL}, {NULL}};
    return reg(f, "reading", sizeof(struct reading));
}

static const struct cx_format *summary_fmt(void)
{
    static const struct cx_field f[] = {
        {"step", "int64", 8, offsetof(struct summary, step), NULL},
        {"mean", "double", 8, offsetof(struct summary, mean), NULL},
        {"peak", "double", 8, offsetof(struct summary, peak), NULL}, {NULL}};
    return reg(f, "summary", sizeof(struct summary));
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

struct sink {
    long n, want;
    double sum_mean, sum_peak;
    volatile int64_t t_end;
    int transform;
};

static void on_event(void *arg, const struct cx_chan_event *ev)
{
    struct sink *k = arg;
    if (k->transform) {
        const struct summary *s = ev->data;
        k->sum_mean += s->mean;
        k->sum_peak += s->peak;
    } else { /* the same computation, here */
        const struct reading *r = ev->data;
        double sum = 0, peak = r->energy[0];
        for (int i = 0; i < NE; i++) {
            sum += r->energy[i];
            peak = r->energy[i] > peak ? r->energy[i] : peak;
        }
        k->sum_mean += sum / NE;
        k->sum_peak += peak;
    }
    if (++k->n == k->want)
        k->t_end = now_ns();
}

struct report { int64_t t_end; long n; double sum_mean, sum_peak; };

static int sink_process(const char *id, int transform, long N, int wr, int rd)
{
    const struct cx_format *fr = reading_fmt(), *fs = summary_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    static struct sink s;
    s.want = N;
    s.transform = transform;
    struct cx_chan_sink_opts o = {.format = fr};
    if (transform)
        o = (struct cx_chan_sink_opts){.format = fs, .projection = fs,
                                       .filter = "mean = mean(energy); peak = max(energy)"};
    if (cx_chan_ctx_create(ctx_opts(), &ctx) < 0 || cx_chan_open(ctx, id, 10000, &ch) < 0 ||
        cx_chan_sink(ch, &o, on_event, &s, &k) < 0) {
        fprintf(stderr, "sink: %s\n", cx_errmsg());
        return 1;
    }
    char b = 'r';
    if (write(wr, &b, 1) != 1)
        return 1;
    for (int64_t end = now_ns() + 120 * 1000000000LL; !s.t_end && now_ns() < end;)
        usleep(1000);
    struct report r = {s.t_end, s.n, s.sum_mean, s.sum_peak};
    if (write(wr, &r, sizeof r) != sizeof r || read(rd, &b, 1) != 1)
        return 1;
    cx_chan_ctx_destroy(ctx);
    return r.t_end ? 0 : 1;
}

/* One run: returns events/s, or -1; the bytes sent per event in *bpe. */
static double run(struct cx_chan *ch, struct cx_chan_source *src, int transform, long N,
                  double *sum_mean, double *bpe)
{
    int up[2], down[2];
    if (pipe(up) < 0 || pipe(down) < 0)
        return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(sink_process(cx_chan_id(ch), transform, N, up[1], down[0]));
    close(up[1]);
    close(down[0]);
    char b;
    if (read(up[0], &b, 1) != 1 || cx_chan_wait_members(ch, 1, 1, 10000) < 0)
        return -1;
    static struct reading e;
    struct cx_chan_stats st0, st1;
    cx_chan_stats(ch, &st0);
    int64_t t0 = now_ns();
    for (long i = 1; i <= N; i++) {
        e.step = i;
        e.x = (double)i;
        for (int j = 0; j < NE; j++)
            e.energy[j] = (float)((i + j * 7) % 1000) * 0.5f;
        if (cx_chan_submit_wait(src, &e, 10000) < 0) {
            fprintf(stderr, "submit: %s\n", cx_errmsg());
            return -1;
        }
    }
    struct report r;
    ssize_t got = read(up[0], &r, sizeof r);
    cx_chan_stats(ch, &st1); /* the sink is still there: its link is counted */
    *bpe = (double)(st1.sent_bytes - st0.sent_bytes) / (double)N;
    int link_ok = g_tcp ? st1.net_sinks == 1 && !st1.shm_sinks : st1.shm_sinks == 1;
    if (!link_ok)
        fprintf(stderr, "the sink is not on a %s link (shm sinks %u, network sinks %u)\n",
                g_tcp ? "tcp" : "shm", st1.shm_sinks, st1.net_sinks);
    b = 'b';
    if (write(down[1], &b, 1) != 1)
        kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(up[0]);
    close(down[1]);
    /* the sink leaves: wait until the channel knows, so the next run has one member */
    for (int i = 0; i < 1000; i++) {
        struct cx_chan_stats cs;
        cx_chan_stats(ch, &cs);
        if (cs.sinks == 0)
            break;
        usleep(10000);
    }
    if (got != sizeof r || r.n != N || !r.t_end || !link_ok)
        return -1;
    *sum_mean = r.sum_mean;
    return (double)N / ((double)(r.t_end - t0) / 1e9);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long N = argc > 1 ? atol(argv[1]) : 100000;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    const char *link = argc > 3 ? argv[3] : "shm";
    g_tcp = !strcmp(link, "tcp");
    if (N < 1 || reps < 1 || reps > 32 || (!g_tcp && strcmp(link, "shm")))
        return fprintf(stderr, "usage: xform_bench [N] [REPS] [shm|tcp]\n"), 2;
    const struct cx_format *fr = reading_fmt();
    summary_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *src;
    if (cx_chan_ctx_create(ctx_opts(), &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = fr, .mode = CX_CHAN_RELIABLE}, &ch) < 0 ||
        cx_chan_source(ch, fr, &src) < 0) {
        fprintf(stderr, "setup: %s\n", cx_errmsg());
        return 1;
    }
    double rate[2][32], sums[2] = {0, 0}, bpe[2] = {0, 0};
    for (int r = 0; r < reps; r++)
        for (int m = 0; m < 2; m++) {
            double s = 0;
            rate[m][r] = run(ch, src, m == 0, N, &s, &bpe[m]);
            if (rate[m][r] < 0) {
                fprintf(stderr, "run %d (%s) failed\n", r, m == 0 ? "transform" : "subscriber");
                return 1;
            }
            if (r == 0)
                sums[m] = s;
            else if (s != sums[m])
                return fprintf(stderr, "sums differ between runs\n"), 1;
            printf("run %d %s %-10s %10.0f events/s %7.1f bytes sent per event\n", r, link,
                   m == 0 ? "transform" : "subscriber", rate[m][r], bpe[m]);
        }
    if (sums[0] != sums[1]) {
        fprintf(stderr, "the transform's means (sum %.17g) differ from the subscriber's (%.17g)\n",
                sums[0], sums[1]);
        return 1;
    }
    qsort(rate[0], (size_t)reps, sizeof(double), cmp);
    qsort(rate[1], (size_t)reps, sizeof(double), cmp);
    double t = rate[0][reps / 2], s = rate[1][reps / 2];
    printf("{\"bench\":\"xform\",\"link\":\"%s\",\"events\":%ld,\"reps\":%d,"
           "\"transform_eps\":%.0f,\"subscriber_eps\":%.0f,\"ratio\":%.3f,"
           "\"transform_min\":%.0f,\"transform_max\":%.0f,"
           "\"subscriber_min\":%.0f,\"subscriber_max\":%.0f,"
           "\"transform_bytes_per_event\":%.1f,\"subscriber_bytes_per_event\":%.1f}\n",
           link, N, reps, t, s, t / s, rate[0][0], rate[0][reps - 1], rate[1][0],
           rate[1][reps - 1], bpe[0], bpe[1]);
    cx_chan_ctx_destroy(ctx);
    return 0;
}
