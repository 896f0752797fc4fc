/* demo-recorder: reads the ticks pipe and records every tick it reads, as it read it, in
 * the pipe <pipe>-received, and survives being stopped at any point: the record is its
 * output and its checkpoint.
 *
 *   env CONFLUX_SPACE=tcp://HOST:7400 TICK_PIPE=ticks TICK_COUNT=600 demo-recorder
 *
 * Started (or restarted: its pod deleted and made again), it opens <pipe>-received
 * (PI_APPEND when it exists), reads back what it holds (n ticks), redoes those n writes
 * (the space drops them: the paper's writer restart), attaches to the ticks pipe and seeks
 * to n: it resumes from its position. Each tick read is written to the record unchanged,
 * in order or not (it logs any tick that is not the next one, so a test reading the record
 * sees every fault). At the end of the ticks pipe it closes the record and stays up. An
 * error (the space server gone longer than the timeouts, the pod's sidecar restarted)
 * makes it abandon the record's writer, detach, open the space again and start again the
 * same way.
 */
#include "demo_formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static const char *me = "recorder";

/* One run: 1 when the ticks pipe ended and the record is closed, 0 after an error. */
static int run(int s, const char *pipe, const char *record, long count, struct tick *held_ticks,
               long *bad, const struct cx_format *fmt)
{
    int w = pi_create(record, s, PI_CREATE), r = -1;
    if (w < 0 && errno == EEXIST)
        w = pi_create(record, s, PI_APPEND);
    if (w < 0) {
        demo_log(me, "pi_create %s: %s", record, cx_errmsg());
        return 0;
    }
    /* the checkpoint: what the record holds, written again (dropped by the space) */
    long n = demo_pipe_count(s, record, fmt, held_ticks, sizeof *held_ticks, count, 1000);
    if (n < 0) {
        demo_log(me, "reading back '%s': %s", record, cx_errmsg());
        goto error;
    }
    for (long i = 0; i < n; i++)
        if (pi_write(w, &held_ticks[i], 1, fmt) != 1) {
            demo_log(me, "replaying '%s' %ld: %s", record, i, cx_errmsg());
            goto error;
        }
    if ((r = pi_attach(pipe, s)) < 0 || pi_seek(r, (uint64_t)n) < 0) {
        demo_log(me, "attach %s at %ld: %s", pipe, n, cx_errmsg());
        goto error;
    }
    demo_log(me, "reading pipe '%s' from tick %ld (%s)", pipe, n, n ? "resumed from the record" : "start");
    for (;;) {
        struct tick t;
        long got = pi_read_timeout(r, &t, 1, fmt, 10000);
        if (got < 0 && errno == ETIMEDOUT)
            continue; /* the writer is slow, stopped or restarting */
        if (got < 0 && errno == EPIPE)
            break;
        if (got != 1) {
            demo_log(me, "pi_read at tick %ld: %s", n, cx_errmsg());
            goto error;
        }
        if (t.id != n || t.check != tick_check(t.id)) {
            demo_log(me, "BAD: tick %ld read as id %lld check %lld", n, (long long)t.id, (long long)t.check);
            ++*bad;
        }
        if (pi_write(w, &t, 1, fmt) != 1) {
            demo_log(me, "recording tick %ld: %s", n, cx_errmsg());
            goto error;
        }
        n++;
        if (n % 50 == 0 || n == count)
            demo_log(me, "%ld/%ld ticks (%ld bad)", n, count, *bad);
    }
    pi_detach(r);
    if (pi_close(w) < 0) {
        demo_log(me, "pi_close %s: %s", record, cx_errmsg());
        return 0;
    }
    demo_log(me, "complete: %ld/%ld ticks recorded in '%s' (%ld bad)", n, count, record, *bad);
    return 1;
error:
    if (r >= 0)
        pi_detach(r);
    pi_abandon(w);
    demo_log(me, "starting again");
    return 0;
}

int main(void)
{
    const char *space = demo_space(me);
    const char *pipe = getenv("TICK_PIPE") && *getenv("TICK_PIPE") ? getenv("TICK_PIPE") : "ticks";
    long count = demo_env_long("TICK_COUNT", 600);
    char record[128];
    snprintf(record, sizeof record, "%.100s-received", pipe);
    demo_exit_on_sigterm();
    const struct cx_format *fmt = demo_register("tick");
    struct tick *held = fmt ? calloc((size_t)count, sizeof *held) : NULL;
    if (!held)
        return 1;
    const struct cx_format *const fmts[] = {fmt, NULL};
    int s = demo_open_space(me, space, fmts);
    long bad = 0;
    while (!run(s, pipe, record, count, held, &bad, fmt)) {
        /* the space again too: a restarted sidecar no longer knows this one */
        pi_space_close(s);
        sleep(1);
        s = demo_open_space(me, space, fmts);
    }
    free(held);
    demo_idle();
}
