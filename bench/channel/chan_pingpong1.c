/* The channel runtime's cost per event, counted in instructions: two runtimes in one
 * process and one thread, a typed reliable event of `size` bytes (100 by default) each way
 * per round trip, over the shm link the runtimes choose between themselves. One thread
 * drives both runtimes in turn (cx_chan_ctx_drive), so there is no cross-core traffic and
 * no waiting: every instruction counted is the runtime's, the link's and the format's work,
 * and `valgrind --tool=callgrind` counts them repeatably on a loaded machine.
 *
 *   chan_pingpong1 N [size]
 *   valgrind --tool=callgrind --toggle-collect=round_trips build/chan_pingpong1 20000
 *
 * round_trips() holds the N round trips and nothing else: collect only inside it
 * (--toggle-collect) and divide the total Ir by N; subtracting a run with a small N removes
 * what the first events pay once (format descriptions pushed, caches warmed). Prints the
 * link and the wall-clock time per round trip (meaningless under valgrind). */
#define _GNU_SOURCE
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ev {
    uint32_t n;
    uint8_t *data; /* n bytes */
};

static const char *ev_json = "{\"name\":\"pingpong1_event\",\"fields\":["
                             "{\"name\":\"n\",\"type\":\"uint32\"},"
                             "{\"name\":\"data\",\"type\":\"uint8[n]\"}]}";

static struct cx_chan_ctx *g_a, *g_b;     /* A: ping source, pong sink; B: the echo */
static struct cx_chan_source *g_ping, *g_pong;
static long g_pings, g_pongs;
static int g_bad;

static void die(const char *what)
{
    fprintf(stderr, "chan_pingpong1: %s: %s\n", what, cx_errmsg());
    exit(1);
}

/* B's sink: the same event straight back on "pong" (from the receive buffer). */
static void on_ping(void *arg, const struct cx_chan_event *e)
{
    (void)arg;
    const struct ev *in = e->data;
    __atomic_add_fetch(&g_pings, 1, __ATOMIC_RELEASE);
    if (cx_chan_submit(g_pong, in) < 0)
        g_bad = 1;
}

static void on_pong(void *arg, const struct cx_chan_event *e)
{
    size_t want = *(size_t *)arg;
    const struct ev *in = e->data;
    if (in->n != want)
        g_bad = 1;
    __atomic_add_fetch(&g_pongs, 1, __ATOMIC_RELEASE);
}

/* Until the count reaches want. A runtime's progress thread runs the handlers until the
 * first drive parks it: counts are atomic and targets are set before the submit. */
static void drive_until(struct cx_chan_ctx *ctx, long *count, long want)
{
    while (__atomic_load_n(count, __ATOMIC_ACQUIRE) < want)
        if (cx_chan_ctx_drive(ctx, 0) < 0)
            die("drive");
}

/* The measured part: n round trips. */
__attribute__((noinline)) void round_trips(long n, const struct ev *e)
{
    long pings = __atomic_load_n(&g_pings, __ATOMIC_ACQUIRE);
    long pongs = __atomic_load_n(&g_pongs, __ATOMIC_ACQUIRE);
    for (long i = 0; i < n; i++) {
        if (cx_chan_submit(g_ping, e) < 0)
            die("submit");
        drive_until(g_b, &g_pings, ++pings);
        drive_until(g_a, &g_pongs, ++pongs);
    }
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 100;
    if (n <= 0 || size > (1u << 20)) {
        fprintf(stderr, "usage: chan_pingpong1 N [size]   (N round trips, size <= 1 MiB)\n");
        return 2;
    }
    struct cx_format *f;
    const struct cx_format *F;
    if (cx_format_from_json(ev_json, strlen(ev_json), NULL, &f) < 0 ||
        cx_format_registry_insert(f, &F) < 0)
        die("format");
    struct cx_chan_ctx_opts lo = {.listen = "tcp://127.0.0.1:0"};
    struct cx_chan *ping_a, *pong_a, *ping_b, *pong_b;
    struct cx_chan_sink *ka, *kb;
    struct cx_chan_opts co = {.format = F, .mode = CX_CHAN_RELIABLE};
    struct cx_chan_sink_opts so = {.format = F};
    if (cx_chan_ctx_create(&lo, &g_a) < 0 || cx_chan_ctx_create(&lo, &g_b) < 0)
        die("runtimes");
    if (cx_chan_create(g_a, &co, &ping_a) < 0 || cx_chan_create(g_a, &co, &pong_a) < 0 ||
        cx_chan_source(ping_a, F, &g_ping) < 0 || cx_chan_sink(pong_a, &so, on_pong, &size, &ka) < 0)
        die("side A");
    if (cx_chan_open(g_b, cx_chan_id(ping_a), 10000, &ping_b) < 0 ||
        cx_chan_open(g_b, cx_chan_id(pong_a), 10000, &pong_b) < 0 ||
        cx_chan_source(pong_b, F, &g_pong) < 0 || cx_chan_sink(ping_b, &so, on_ping, NULL, &kb) < 0)
        die("side B");
    if (cx_chan_wait_members(ping_a, 1, 1, 10000) < 0 || cx_chan_wait_members(pong_a, 1, 1, 10000) < 0)
        die("members");
    uint8_t *buf = calloc(1, size ? size : 1);
    if (!buf)
        die("buffer");
    struct ev e = {.n = (uint32_t)size, .data = buf};
    round_trips(1, &e); /* the links exist after this one */
    char link[16] = "?";
    cx_chan_ctx_link(g_a, cx_chan_ctx_addr(g_b), link, sizeof link);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    round_trips(n, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) / (double)n;
    printf("{\"program\":\"chan_pingpong1\",\"link\":\"%s\",\"size\":%zu,\"round_trips\":%ld,"
           "\"us_per_round_trip\":%.3f}\n", link, size, n, us);
    cx_chan_ctx_destroy(g_b);
    cx_chan_ctx_destroy(g_a);
    free(buf);
    if (g_bad || g_pongs != n + 1) {
        fprintf(stderr, "chan_pingpong1: wrong echoes (%ld of %ld, bad %d)\n", g_pongs, n + 1, g_bad);
        return 1;
    }
    return 0;
}
