/* demo-ticker: writes ticks 0..N-1 (one `struct tick` per segment) to a pipe, at a pace,
 * and survives being stopped at any point.
 *
 *   env CONFLUX_SPACE=tcp://HOST:7400 TICK_PIPE=ticks TICK_COUNT=600 TICK_PERIOD_MS=50 demo-ticker
 *
 * Restarted (its pod deleted and made again), it opens the pipe with PI_APPEND and redoes
 * every write from tick 0: the space holds what the stopped run wrote (its sidecar
 * abandoned the writer without ending the pipe), so those writes are dropped and the pipe
 * continues where it stopped (the paper's writer restart). It first counts what the pipe
 * holds, so the replayed part goes at full speed and only new ticks are paced. A call
 * that fails (the space server gone longer than the writer's timeout, the pod's sidecar
 * restarted) makes it abandon the writer, open the space again and start again the same
 * way. At the end it closes the pipe and stays up.
 */
#include "demo_formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *me = "ticker";

/* One run from tick 0: 1 when every tick is written and the pipe closed, 0 after an error
 * (logged; the writer abandoned). */
static int run(int s, const char *pipe, long count, long period_ms, const struct cx_format *fmt)
{
    int mode = PI_CREATE;
    int w = pi_create(pipe, s, PI_CREATE);
    if (w < 0 && errno == EEXIST) {
        mode = PI_APPEND;
        w = pi_create(pipe, s, PI_APPEND);
    }
    if (w < 0) {
        demo_log(me, "pi_create %s: %s", pipe, cx_errmsg());
        return 0;
    }
    long held = mode == PI_APPEND ? demo_pipe_count(s, pipe, fmt, NULL, 0, count, 1000) : 0;
    if (held < 0) {
        demo_log(me, "counting what '%s' holds: %s", pipe, cx_errmsg());
        held = 0; /* then every replayed write is paced: slower, still right */
    }
    demo_log(me, "writing %ld ticks to pipe '%s' (%s, the space holds %ld)", count, pipe,
             mode == PI_CREATE ? "new pipe" : "append: replaying from tick 0", held);
    struct timespec pause = {period_ms / 1000, (period_ms % 1000) * 1000000L};
    for (long id = 0; id < count; id++) {
        struct tick t = {.id = id, .check = tick_check(id)};
        if (pi_write(w, &t, 1, fmt) != 1) {
            demo_log(me, "pi_write tick %ld: %s; abandoning the writer and starting again", id, cx_errmsg());
            pi_abandon(w);
            return 0;
        }
        if (id >= held) {
            if ((id + 1) % 50 == 0)
                demo_log(me, "wrote %ld/%ld ticks", id + 1, count);
            nanosleep(&pause, NULL);
        }
    }
    if (pi_close(w) < 0) {
        demo_log(me, "pi_close: %s; starting again", cx_errmsg());
        return 0;
    }
    return 1;
}

int main(void)
{
    const char *space = demo_space(me);
    const char *pipe = getenv("TICK_PIPE") && *getenv("TICK_PIPE") ? getenv("TICK_PIPE") : "ticks";
    long count = demo_env_long("TICK_COUNT", 600);
    long period_ms = demo_env_long("TICK_PERIOD_MS", 50);
    demo_exit_on_sigterm();
    const struct cx_format *fmt = demo_register("tick");
    if (!fmt)
        return 1;
    const struct cx_format *const fmts[] = {fmt, NULL};
    int s = demo_open_space(me, space, fmts);
    while (!run(s, pipe, count, period_ms, fmt)) {
        /* the space again too: a restarted sidecar no longer knows this one */
        pi_space_close(s);
        sleep(1);
        s = demo_open_space(me, space, fmts);
    }
    demo_log(me, "done: pipe '%s' closed with %ld ticks", pipe, count);
    demo_idle();
}
