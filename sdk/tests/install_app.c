/* A program built against an installed SDK only (pkg-config, <conflux.h>): the library's
 * version is the header's, and a typed channel with a local sink delivers every event.
 * tests/install_test.sh (make install) and packaging/dist_test.sh (the Debian packages)
 * build and run it, embedded and through a sidecar. */
#define _POSIX_C_SOURCE 200809L
#include <conflux.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

struct ev { double energy; int32_t step; };
static atomic_int seen, sum;
static void on_event(void *arg, const struct cx_chan_event *e)
{
    (void)arg;
    atomic_fetch_add(&sum, ((const struct ev *)e->data)->step);
    atomic_fetch_add(&seen, 1);
}

int main(void)
{
    if (strcmp(conflux_version(), CONFLUX_VERSION_STRING) != 0) {
        fprintf(stderr, "library %s, header %s\n", conflux_version(), CONFLUX_VERSION_STRING);
        return 1;
    }
    const struct cx_format *f;
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    struct cx_chan_source *s;
    struct cx_chan_ctx_opts co = {.listen = "tcp://127.0.0.1:0"};
    struct cx_chan_opts o = {.mode = CX_CHAN_RELIABLE};
    struct cx_chan_sink_opts so = {0};
    int rc = conflux_format_json("{\"name\":\"ev\",\"fields\":[{\"name\":\"energy\",\"type\":\"double\"},"
                                 "{\"name\":\"step\",\"type\":\"int32\"}]}", &f);
    o.format = so.format = f;
    if (rc == 0)
        rc = cx_chan_ctx_create(&co, &ctx);
    if (rc < 0) {
        fprintf(stderr, "setup: %s\n", cx_errmsg());
        return 1;
    }
    rc = cx_chan_create(ctx, &o, &ch);
    if (rc == 0)
        rc = cx_chan_sink(ch, &so, on_event, NULL, &k);
    if (rc == 0)
        rc = cx_chan_source(ch, f, &s);
    for (int i = 0; rc == 0 && i < 100; i++) {
        struct ev e = {.energy = i, .step = i};
        rc = cx_chan_submit_wait(s, &e, 5000);
    }
    for (int t = 0; rc == 0 && t < 1000 && atomic_load(&seen) < 100; t++)
        nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
    if (rc < 0)
        fprintf(stderr, "channel: %s\n", cx_errmsg());
    cx_chan_ctx_destroy(ctx);
    if (rc < 0 || atomic_load(&seen) != 100 || atomic_load(&sum) != 99 * 100 / 2) {
        fprintf(stderr, "delivered %d of 100 events, steps summing to %d\n", atomic_load(&seen),
                atomic_load(&sum));
        return 1;
    }
    printf("app: library %s, 100 events delivered\n", conflux_version());
    return 0;
}
