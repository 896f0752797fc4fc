/* The Conflux side of the persistent-stream benchmark: a writer and a reader with the
 * paper's API (dataplane/src/pipe/cx_pipe.h) over one space server. */
#include "stream_bench.h"

#include "common/cx_error.h"
#include "pipe/cx_pipe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int side_fail(struct side_result *out, const char *what)
{
    out->rc = errno ? -errno : -EIO;
    snprintf(out->err, sizeof out->err, "%s: %s", what, cx_errmsg());
    return out->rc;
}

static struct pi_options options(const struct stream_run *r)
{
    /* the writer's window in segments (the same for the NATS publisher); the reader's
     * memory before spilling stays at its default (64 MiB) */
    return (struct pi_options){.window = r->window, .timeout_ms = 60000};
}

int conflux_writer(const struct stream_run *r, struct side_result *out)
{
    struct pi_options o = options(r);
    uint8_t *buf = malloc(r->size);
    if (!buf) {
        errno = ENOMEM;
        return side_fail(out, "segment buffer");
    }
    seg_fill(buf, r->size, 0);
    int s = pi_space_open(r->addr, &o);
    if (s < 0) {
        free(buf);
        return side_fail(out, "pi_space_open");
    }
    int d = pi_create(r->name, s, PI_CREATE);
    if (d < 0) {
        side_fail(out, "pi_create");
        goto out;
    }
    for (uint64_t i = 0; i < r->count; i++) {
        seg_fill(buf, r->size, i);
        if (pi_write(d, buf, r->size, NULL) != (long)r->size) {
            side_fail(out, "pi_write");
            pi_close(d);
            goto out;
        }
    }
    if (pi_close(d) < 0) /* returns once the space acknowledged the end */
        side_fail(out, "pi_close");
    out->t_done = bench_now();
out:
    pi_space_close(s);
    free(buf);
    return out->rc;
}

int conflux_reader(const struct stream_run *r, struct side_result *out, ready_fn ready, void *arg)
{
    struct pi_options o = options(r);
    uint8_t *buf = malloc(r->size);
    if (!buf) {
        errno = ENOMEM;
        return side_fail(out, "segment buffer");
    }
    int s = pi_space_open(r->addr, &o);
    if (s < 0) {
        free(buf);
        return side_fail(out, "pi_space_open");
    }
    int d = pi_attach(r->name, s); /* returns at once; segments buffer in the background */
    if (d < 0) {
        side_fail(out, "pi_attach");
        goto out;
    }
    out->t_ready = bench_now();
    ready(arg, out->t_ready);
    for (uint64_t i = 0; i < r->count; i++) {
        long n = pi_read_timeout(d, buf, r->size, NULL, 60000);
        if (n < 0) {
            side_fail(out, "pi_read");
            goto detach;
        }
        if (seg_check(buf, (size_t)n, r->size, i, out) < 0)
            goto detach;
        out->segments++;
    }
    out->t_done = bench_now();
    /* the end of the pipe follows the last segment (not timed) */
    if (pi_read_timeout(d, buf, r->size, NULL, 60000) >= 0 || errno != EPIPE) {
        if (errno == 0)
            errno = EBADMSG;
        side_fail(out, "after the last segment, pi_read did not report the end (EPIPE)");
    }
    struct pi_reader_stats st;
    if (pi_reader_stats(d, &st) == 0)
        out->from_writer = st.from_writer;
detach:
    pi_detach(d);
out:
    pi_space_close(s);
    free(buf);
    return out->rc;
}

int conflux_cleanup(const struct stream_run *r)
{
    int s = pi_space_open(r->addr, NULL);
    if (s < 0)
        return -errno;
    int rc = pi_unlink(r->name, s) < 0 ? -errno : 0;
    pi_space_close(s);
    return rc;
}
