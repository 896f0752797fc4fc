/* The demo's event and segment formats, shared by its three components.
 *
 *   readings pipe   segments of DEMO_READINGS_PER_SEGMENT `struct reading`
 *   results channel events of `struct result_v2` (what the stage submits) read by the sink
 *                   as `struct result_v1`, an older, smaller version: the data plane
 *                   converts by field name, so a v2 producer and a v1 consumer interoperate
 *   summary pipe    segments of one `struct result_v1` each, written by the sink
 *   ticks pipe      segments of one `struct tick` each: demo-ticker writes ticks 0..N-1,
 *                   demo-recorder copies each one it reads to ticks-received (the restart
 *                   scenario: either may be stopped and restarted at any point)
 *
 * Each component registers the formats it uses with demo_register(); the stage and the
 * source also publish them to the space's format service so that readers elsewhere (the
 * `conflux cat` CLI included) can convert and print them.
 */
#ifndef DEMO_FORMATS_H
#define DEMO_FORMATS_H

#include "conflux.h"

#include <stddef.h>
#include <stdint.h>

#define DEMO_READINGS_PER_SEGMENT 64
#define DEMO_ENERGIES 16

struct reading {
    int64_t step;
    double energy[DEMO_ENERGIES];
};

struct result_v2 {
    int64_t segment; /* index of the readings segment this summarises */
    int32_t stage;   /* the stage replica that computed it */
    int32_t count;   /* readings in the segment */
    double mean;     /* mean energy */
    double max;      /* largest energy (v2 only) */
};

struct result_v1 {
    int64_t segment;
    double mean;
    int32_t count;
};

struct tick {
    int64_t id;    /* 0..N-1, the segment's index */
    int64_t check; /* tick_check(id): a segment carrying anything else is corrupt */
};

static inline int64_t tick_check(int64_t id) { return id * 7919 + 13; }

/* Registers the format `which` ("reading", "result_v2", "result_v1", "tick") in this process and
 * returns it; NULL with a message on stderr on failure. */
const struct cx_format *demo_register(const char *which);

/* Reads an environment variable as a positive integer, or def when unset. Exits with a
 * message when it is set but not a positive integer. */
long demo_env_long(const char *name, long def);

/* The space address from CONFLUX_SPACE; exits with a message when unset. */
const char *demo_space(const char *component);

/* Publishes the formats in fmts (NULL-terminated) to the space's format service and opens
 * the space with pi_space_open, retrying for up to two minutes: in a new cluster namespace
 * the space's DNS name and server come up while the components start. Returns the space
 * descriptor; exits with the last error when the space never answered. */
int demo_open_space(const char *component, const char *space, const struct cx_format *const *fmts);

/* Prints a line on stdout prefixed with the component's name, flushed at once (kubectl logs
 * shows progress as it happens). */
void demo_log(const char *component, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* How many segments pipe `name` holds as a reader sees them: attaches, reads (into buf,
 * cap bytes each, at most max) until the end or until nothing comes for quiet_ms, detaches.
 * A component restarted with PI_APPEND uses it to find where it stopped; a count that is
 * short (a segment still on its way) only makes it redo writes the space drops. Returns
 * the count, -1 on an error (cx_errmsg). buf may be NULL (nothing kept). */
long demo_pipe_count(int s, const char *name, const struct cx_format *t, void *buf, size_t cap,
                     long max, int quiet_ms);

/* SIGTERM (the pod deleted) ends the process at once, without closing anything: as PID 1
 * of its container it would otherwise ignore the signal until the grace period ends. What
 * it had open its sidecar abandons, so a restarted component continues (PI_APPEND). */
void demo_exit_on_sigterm(void);

/* Sleeps forever: a finished component stays up so its Deployment does not restart it. */
void demo_idle(void) __attribute__((noreturn));

#endif
