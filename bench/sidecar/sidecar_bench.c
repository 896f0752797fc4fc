/* The cost of the sidecar: the same program, linked with the SDK's libconflux, run once
 * embedded and once with CONFLUX_SOCKET set (bench/sidecar/run.sh does both in one run).
 *   pipe_write   MB/s writing SEGS segments of SIZE bytes and closing (every ack awaited)
 *   pipe_read    MB/s reading them back from the space
 *   submit       events/s: 32-byte events submitted (reliable) to a sink of this process,
 *                until the sink has them all; best_effort: the same on a best-effort channel
 *   call         µs per call that does nothing but cross to the runtime (pi_tell)
 * Prints one JSON object. usage: sidecar_bench SPACE_ADDR SIZE SEGS EVENTS */
#define _GNU_SOURCE
#include "conflux.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct ev { int64_t step; double energy; int64_t tag; int64_t pad; };
static atomic_long got;
static void on_ev(void *arg, const struct cx_chan_event *e) { (void)arg; (void)e; got++; }

#define DIE(what) do { fprintf(stderr, "sidecar_bench: %s: %s\n", what, cx_errmsg()); exit(1); } while (0)

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s SPACE_ADDR SIZE SEGS EVENTS\n", argv[0]);
        return 2;
    }
    const char *space = argv[1];
    size_t size = strtoul(argv[2], NULL, 10);
    long segs = atol(argv[3]), events = atol(argv[4]);
    char name[64];
    snprintf(name, sizeof name, "bench-%d", (int)getpid());
    uint8_t *buf = malloc(size);
    memset(buf, 7, size);
    int s = pi_space_open(space, NULL);
    if (s < 0)
        DIE("space");
    double t0 = now();
    int w = pi_create(name, s, PI_CREATE);
    if (w < 0)
        DIE("create");
    for (long i = 0; i < segs; i++)
        if (pi_write(w, buf, size, NULL) != (long)size)
            DIE("write");
    if (pi_close(w) < 0)
        DIE("close");
    double wsec = now() - t0;
    int r = pi_attach(name, s);
    if (r < 0)
        DIE("attach");
    t0 = now();
    long n, rd = 0;
    while ((n = pi_read_timeout(r, buf, size, NULL, 30000)) >= 0)
        rd++;
    double rsec = now() - t0;
    if (rd != segs)
        DIE("read back");
    t0 = now();
    const long calls = 20000;
    for (long i = 0; i < calls; i++)
        if (pi_tell(r) < 0)
            DIE("tell");
    double csec = now() - t0;
    pi_detach(r);
    pi_unlink(name, s);
    pi_space_close(s);

    static const struct cx_field f[] = {{"step", "int64", 8, 0, NULL}, {"energy", "double", 8, 8, NULL},
                                        {"tag", "int64", 8, 16, NULL}, {"pad", "int64", 8, 24, NULL}, {NULL}};
    static const struct cx_struct_decl d[] = {{"ev", f, sizeof(struct ev)}, {NULL}};
    struct cx_format *fx;
    const struct cx_format *F;
    if (cx_format_create(d, NULL, &fx) < 0 || cx_format_registry_insert(fx, &F) < 0)
        DIE("format");
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    struct cx_chan_source *src;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = "tcp://127.0.0.1:0"}, &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = F, .mode = CX_CHAN_RELIABLE}, &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F}, on_ev, NULL, &k) < 0 ||
        cx_chan_source(ch, F, &src) < 0)
        DIE("channel");
    t0 = now();
    for (long i = 0; i < events; i++) {
        struct ev e = {i, i * 0.5, 1, 0};
        if (cx_chan_submit_wait(src, &e, 10000) < 0)
            DIE("submit");
    }
    while (got < events && now() - t0 < 60)
        usleep(100);
    double esec = now() - t0;
    if (got != events)
        DIE("sink");
    /* best-effort (through a sidecar: streamed into the ring without replies), a queue
     * large enough that nothing is dropped */
    struct cx_chan *be;
    struct cx_chan_sink *kb;
    struct cx_chan_source *sb;
    if (cx_chan_create(ctx, &(struct cx_chan_opts){.format = F, .queue_limit = CX_CHAN_QUEUE_MAX}, &be) < 0 ||
        cx_chan_sink(be, &(struct cx_chan_sink_opts){.format = F}, on_ev, NULL, &kb) < 0 ||
        cx_chan_source(be, F, &sb) < 0)
        DIE("best-effort channel");
    got = 0;
    t0 = now();
    for (long i = 0; i < events; i++) {
        struct ev e = {i, i * 0.5, 1, 0};
        if (cx_chan_submit(sb, &e) < 0)
            DIE("submit");
    }
    while (got < events && now() - t0 < 60)
        usleep(100);
    double bsec = now() - t0;
    if (got != events)
        DIE("best-effort sink");
    cx_chan_ctx_destroy(ctx);
    printf("{\"mode\":\"%s\",\"size\":%zu,\"segments\":%ld,\"pipe_write_MBps\":%.1f,\"pipe_read_MBps\":%.1f,"
           "\"events\":%ld,\"submit_events_per_s\":%.0f,\"best_effort_events_per_s\":%.0f,\"call_us\":%.2f}\n",
           getenv("CONFLUX_SOCKET") ? "sidecar" : "embedded", size, segs,
           (double)size * segs / wsec / 1e6, (double)size * segs / rsec / 1e6, events, events / esec, events / bsec,
           csec / calls * 1e6);
    return 0;
}
