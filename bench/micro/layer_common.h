/* The overlap and buffer-reuse tests of the layers (layer_chan.c, layer_pipe.c) and of their
 * peers (peer_common.h), as micro_tests.c runs them on the raw links: 64 KiB messages,
 * Q = 16 outstanding; the sender computes 0..100 us after each send (overlap); it sends from
 * N buffers in FIFO order, or from buffer 0 with probability R among 256 (reuse). The caller
 * gives one windowed stream (its own API) and its way of printing a row. */
#ifndef LAYER_COMMON_H
#define LAYER_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct lbufs { uint8_t **b; int n, next, reuse_pct; unsigned rng; size_t size; };

static inline void lb_init(struct lbufs *l, int n, size_t size, int reuse_pct)
{
    l->n = n, l->next = 0, l->reuse_pct = reuse_pct, l->rng = 12345, l->size = size;
    l->b = calloc((size_t)n, sizeof *l->b);
    for (int i = 0; i < n; i++) {
        l->b[i] = malloc(size);
        memset(l->b[i], 'B', size); /* touched: no page faults while timed; byte 0 a data kind */
    }
}

static inline void lb_free(struct lbufs *l)
{
    for (int i = 0; i < l->n; i++) free(l->b[i]);
    free(l->b);
}

static inline uint8_t *lb_next(struct lbufs *l)
{
    if (l->reuse_pct >= 0) {
        l->rng = l->rng * 1103515245u + 12345u;
        if ((int)((l->rng >> 16) % 100) < l->reuse_pct) return l->b[0];
        l->next = l->next % (l->n - 1) + 1; /* the other buffers, in FIFO order */
        return l->b[l->next];
    }
    uint8_t *p = l->b[l->next];
    l->next = (l->next + 1) % l->n;
    return p;
}

static inline void lb_spin_us(double us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double end = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + us * 1e-6, t;
    volatile double x = 1.0; /* volatile: the arithmetic is not optimised away */
    do {
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    } while (t < end);
}

/* One stream of `windows` windows of q messages from b, compute_us after each send; returns
 * MB/s and clears *ok when the receiver's count did not match. */
typedef double (*layer_stream_fn)(void *ctx, struct lbufs *b, int q, long windows, double compute_us,
                                  int *ok);
typedef void (*layer_emit_fn)(void *ectx, const char *test, const char *params, const char *metric,
                              const char *unit, const double *r, int reps, long n, int ok);

static inline int layer_cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static inline void layer_overlap_reuse(void *ctx, layer_stream_fn stream, void *ectx, layer_emit_fn emit,
                                       int quick, int reps, long windows)
{
    static const double us[] = {0, 2, 5, 10, 20, 50, 100};
    static const int nb[] = {1, 4, 16, 64, 256}, rp[] = {0, 25, 50, 75, 100};
    const size_t size = 65536;
    char p[160];
    double r[16], sh[16];
    struct lbufs b;
    lb_init(&b, 1, size, -1);
    for (size_t i = 0; i < (quick ? 4u : 7u); i++) {
        int ok = 1;
        for (int k = 0; k < reps; k++) {
            r[k] = stream(ctx, &b, 16, windows, us[i], &ok);
            sh[k] = us[i] * r[k] / (double)size; /* time computing / wall time */
        }
        qsort(sh, (size_t)reps, sizeof *sh, layer_cmpd);
        snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"compute_us\":%g,\"compute_share\":%.3f", us[i],
                 sh[reps / 2]);
        emit(ectx, "overlap", p, "MBps", "MB/s", r, reps, windows * 16, ok);
    }
    lb_free(&b);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < 5; i++) {
            if (quick && (i % 2)) continue;
            int ok = 1;
            lb_init(&b, pass ? 256 : nb[i], size, pass ? rp[i] : -1);
            for (int k = 0; k < reps; k++) r[k] = stream(ctx, &b, 16, windows, 0, &ok);
            lb_free(&b);
            if (!pass) snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"buffers\":%d", nb[i]);
            else snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"buffers\":256,\"reuse_pct\":%d", rp[i]);
            emit(ectx, pass ? "reuse_pct" : "reuse_fifo", p, "MBps", "MB/s", r, reps, windows * 16, ok);
        }
}

#endif
