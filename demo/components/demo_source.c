/* demo-source: writes DEMO_SEGMENTS segments of readings to the pipe "readings".
 *
 *   env CONFLUX_SPACE=tcp://HOST:7400 DEMO_SEGMENTS=200 DEMO_PERIOD_MS=20 demo-source
 *
 * Reading k of segment s has step s*64+k and energies (step % 97) + j/16. A restarted
 * source opens the pipe in PI_APPEND mode and replays from the start: the space drops what
 * it already holds (the paper's idempotent replay), so readers see each segment once.
 * When done it closes the pipe (readers then reach its end) and stays up.
 */
#include "demo_formats.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

static const char *me = "source";

static void fill(struct reading *r, long seg)
{
    for (int k = 0; k < DEMO_READINGS_PER_SEGMENT; k++) {
        int64_t step = seg * DEMO_READINGS_PER_SEGMENT + k;
        r[k].step = step;
        for (int j = 0; j < DEMO_ENERGIES; j++)
            r[k].energy[j] = (double)(step % 97) + j / 16.0;
    }
}

int main(void)
{
    const char *space = demo_space(me);
    long segments = demo_env_long("DEMO_SEGMENTS", 200);
    long period_ms = demo_env_long("DEMO_PERIOD_MS", 20);
    const struct cx_format *fmt = demo_register("reading");
    if (!fmt)
        return 1;
    int s = demo_open_space(me, space, (const struct cx_format *const[]){fmt, NULL});
    int mode = PI_CREATE;
    int w = pi_create("readings", s, PI_CREATE);
    if (w < 0 && errno == EEXIST) {
        mode = PI_APPEND;
        w = pi_create("readings", s, PI_APPEND);
    }
    if (w < 0) {
        fprintf(stderr, "%s: pi_create readings: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "writing %ld segments of %d readings to pipe 'readings' (%s)", segments,
             DEMO_READINGS_PER_SEGMENT, mode == PI_CREATE ? "new pipe" : "append: replaying");
    struct reading buf[DEMO_READINGS_PER_SEGMENT];
    struct timespec pause = {period_ms / 1000, (period_ms % 1000) * 1000000L};
    for (long seg = 0; seg < segments; seg++) {
        fill(buf, seg);
        if (pi_write(w, buf, DEMO_READINGS_PER_SEGMENT, fmt) != DEMO_READINGS_PER_SEGMENT) {
            fprintf(stderr, "%s: pi_write segment %ld: %s\n", me, seg, cx_errmsg());
            return 1;
        }
        if ((seg + 1) % 50 == 0 || seg + 1 == segments)
            demo_log(me, "wrote %ld/%ld segments", seg + 1, segments);
        nanosleep(&pause, NULL);
    }
    if (pi_close(w) < 0) {
        fprintf(stderr, "%s: pi_close: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "done: pipe 'readings' closed with %ld segments", segments);
    demo_idle();
}
