/* What every event-channel benchmark peer shares (C and C++): the event sizes of the ECho
 * paper's Figures 2 and 3 (100 B to 1 MB), how many iterations each size gets, timing,
 * latency statistics and the one JSON line per (peer, size, metric).
 *
 * Method, the same for every peer:
 *   latency    ping-pong: the source sends an event of `size` bytes, the sink sends one of
 *              the same size back; one-way latency = round trip / 2 (median, mean, min
 *              over the iterations, after a warm-up)
 *   bandwidth  windowed streaming (OSU style): the source sends WINDOW events back to back,
 *              the sink answers each window with a small ack; MB/s = bytes / time, with
 *              MB = 10^6 bytes
 * Iterations: LAT_N round trips for sizes up to 10 KB, a tenth at 100 KB, a hundredth at
 * 1 MB (at least 10); bandwidth windows so that about BW_BYTES cross per size (at least 2,
 * at most BW_MAX windows, which bounds the time small events take).
 *   full (default)  LAT_N 20000, BW_BYTES 1 GiB, BW_MAX 20000 windows
 *   --medium        LAT_N 5000,  BW_BYTES 256 MiB, BW_MAX 2000 windows
 *   --quick         LAT_N 500,   BW_BYTES 32 MiB, BW_MAX 300 windows (a few s per peer)
 */
#ifndef CHANNEL_BENCH_COMMON_H
#define CHANNEL_BENCH_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NSIZES 5
static const size_t bench_sizes[BENCH_NSIZES] = {100, 1000, 10000, 100000, 1000000};
#define BENCH_MAX_SIZE 1000000
#define BENCH_WINDOW 64
#define BENCH_WARMUP 10

struct bench_opts {
    long lat_n;      /* round trips at small sizes */
    long bw_bytes;   /* bytes per bandwidth measurement */
    long bw_max;     /* at most this many windows */
    size_t only;     /* measure only this size (0: all) */
};

/* Reads "--quick", "--lat-n N", "--bw-bytes N", "--size N" from argv[from..argc). Returns 0,
 * or -1 for an unknown argument. */
static inline int bench_parse(int argc, char **argv, int from, struct bench_opts *o)
{
    o->lat_n = 20000;
    o->bw_bytes = 1L << 30;
    o->bw_max = 20000;
    o->only = 0;
    for (int i = from; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            o->lat_n = 500;
            o->bw_bytes = 32L << 20;
            o->bw_max = 300;
        } else if (!strcmp(argv[i], "--medium")) {
            o->lat_n = 5000;
            o->bw_bytes = 256L << 20;
            o->bw_max = 2000;
        } else if (!strcmp(argv[i], "--lat-n") && i + 1 < argc) {
            o->lat_n = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--bw-bytes") && i + 1 < argc) {
            o->bw_bytes = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            o->only = (size_t)atol(argv[++i]);
        } else {
            fprintf(stderr, "unknown argument '%s' (--quick, --medium, --lat-n N, --bw-bytes N, --size N)\n",
                    argv[i]);
            return -1;
        }
    }
    return 0;
}

static inline long bench_lat_iters(const struct bench_opts *o, size_t size)
{
    long n = size <= 10000 ? o->lat_n : size <= 100000 ? o->lat_n / 10 : o->lat_n / 100;
    return n < 10 ? 10 : n;
}

static inline long bench_bw_windows(const struct bench_opts *o, size_t size)
{
    long n = (long)(o->bw_bytes / ((long)size * BENCH_WINDOW));
    n = n > o->bw_max ? o->bw_max : n;
    return n < 2 ? 2 : n;
}

static inline double bench_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints the latency line from n round-trip times (sorted in place). */
static inline void bench_print_latency(const char *peer, size_t size, double *rtt_us, long n)
{
    qsort(rtt_us, (size_t)n, sizeof *rtt_us, bench_cmp_double);
    double sum = 0;
    for (long i = 0; i < n; i++)
        sum += rtt_us[i];
    printf("{\"peer\":\"%s\",\"size\":%zu,\"metric\":\"latency\",\"latency_us\":%.3f,"
           "\"avg_us\":%.3f,\"min_us\":%.3f,\"p99_us\":%.3f,\"iters\":%ld}\n",
           peer, size, rtt_us[n / 2] / 2, sum / (double)n / 2, rtt_us[0] / 2,
           rtt_us[(long)((double)n * 0.99) < n ? (long)((double)n * 0.99) : n - 1] / 2, n);
    fflush(stdout);
}

static inline void bench_print_bandwidth(const char *peer, size_t size, long events,
                                         double elapsed_us)
{
    printf("{\"peer\":\"%s\",\"size\":%zu,\"metric\":\"bandwidth\",\"bandwidth_MBps\":%.3f,"
           "\"events_per_s\":%.1f,\"events\":%ld,\"window\":%d}\n",
           peer, size, (double)size * (double)events / elapsed_us,
           (double)events * 1e6 / elapsed_us, events, BENCH_WINDOW);
    fflush(stdout);
}

/* A buffer of BENCH_MAX_SIZE bytes with a recognisable pattern (not zeros: no page
 * sharing tricks). */
static inline unsigned char *bench_buffer(void)
{
    unsigned char *b = (unsigned char *)malloc(BENCH_MAX_SIZE);
    if (!b) {
        perror("malloc");
        exit(1);
    }
    for (size_t i = 0; i < BENCH_MAX_SIZE; i++)
        b[i] = (unsigned char)(i * 131 + 7);
    return b;
}

#endif
