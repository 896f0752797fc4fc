/* The progress engine: one thread per process drives every registered driver (seed
 * padico-corba-mpi.txt 4.2, the Task Manager's polling thread; ARCHITECTURE.md principle 6).
 *
 * Each round of do_work polls the sources that are due. A source's poll interval adapts
 * to its activity: a poll that found work makes it due every round; each empty poll of a
 * source costing more than 1 doubles its interval up to 8 x its cost, so a costly source
 * (a TCP socket, cost 8) is polled up to 64 x less often than a shared-memory ring while it
 * is quiet; a cost-1 source (a memory load) is due every round. Between rounds the idle
 * strategy (cx_idle.h) spins, yields, sleeps and finally blocks in epoll on the sources'
 * fds after arming them, so an idle process uses no CPU; an fd that fires makes its
 * source due at once.
 *
 *     struct cx_engine *e;
 *     cx_engine_create(&cx_idle_block, &e);
 *     int id = cx_engine_add_link(e, link, on_msg, arg, on_error, arg);
 *     cx_engine_start(e);            // the progress thread
 *     ...
 *     cx_engine_remove(e, id);       // after it returns, the engine no longer touches link
 *     cx_engine_destroy(e);          // stops the thread
 *
 * Thread safety: add/remove may be called from any thread, including from callbacks run
 * by the engine. Everything else is for the owner. Sources' callbacks run on the engine
 * thread (or the caller of cx_engine_do_work when no thread is started).
 */
#ifndef CX_ENGINE_H
#define CX_ENGINE_H

#include "engine/cx_idle.h"
#include "transport/cx_driver.h"

#include <stdint.h>

#define CX_ENGINE_MAX_SOURCES 4096 /* slots; rounds scan only up to the highest in use */

struct cx_engine;

struct cx_engine_source {
    const char *name;
    /* Does up to budget units of work, never blocks. Returns units done, or a negative
     * errno: the source is then disabled and on_error is called once. */
    int (*poll)(void *ctx, int budget);
    /* Before blocking: 0 if it is safe to sleep on fd, -EAGAIN if poll must run first.
     * NULL = always safe. */
    int (*arm)(void *ctx);
    void (*on_error)(void *ctx, int rc); /* may be NULL */
    void *ctx;
    int fd;        /* readable when poll has work; -1 = none (the engine then never blocks
                    * longer than the backoff's longest sleep while this source exists) */
    unsigned cost; /* relative poll cost, >= 1 */
};

struct cx_engine_stats {
    uint64_t rounds, work, blocks, wakeups;
};

/* Creates an engine with the given idle strategy (&cx_idle_block for production). */
int cx_engine_create(const struct cx_idle_strategy *idle, struct cx_engine **out);
/* Starts the progress thread. -EALREADY if started. */
int cx_engine_start(struct cx_engine *e);
/* Stops the thread (if any) and frees the engine; sources are not closed. */
void cx_engine_destroy(struct cx_engine *e);

/* Registers a source (copied). Returns its id (>= 0) or -ENOSPC / -errno. */
int cx_engine_add(struct cx_engine *e, const struct cx_engine_source *s);
/* Registers a link: polls it with cx_link_progress(k, fn, arg), blocks on cx_link_fd,
 * arms with cx_link_arm, cost from its caps. on_error(err_arg, rc) when it fails. */
int cx_engine_add_link(struct cx_engine *e, struct cx_link *k, cx_recv_fn fn, void *arg,
                       void (*on_error)(void *ctx, int rc), void *err_arg);
/* Unregisters. When it returns (from another thread) the source's poll is not running and
 * will not run again; from a callback on the engine thread it takes effect at once too. */
int cx_engine_remove(struct cx_engine *e, int id);

/* One round: polls the due sources. Returns the work done. For callers without a thread. */
int cx_engine_do_work(struct cx_engine *e);
/* Arms every source and waits in epoll up to timeout_ms (-1 = forever). Returns 1 when
 * an fd fired or the engine was woken, 0 on timeout, 0 at once when a source refused to
 * arm. Used by idle strategies. */
int cx_engine_block(struct cx_engine *e, int timeout_ms);
/* Waits up to timeout_ms in epoll without arming the sources (a readable socket ends the
 * wait; armed-only signals like the shm eventfd may not). Ready sources become due.
 * Returns 1 if anything fired. Used by the backoff's longer sleeps. */
int cx_engine_wait(struct cx_engine *e, int timeout_ms);
/* The same with a nanosecond timeout (epoll_pwait2; a plain sleep on kernels before 5.11). */
int cx_engine_wait_ns(struct cx_engine *e, int64_t timeout_ns);
/* Wakes the engine out of cx_engine_block (thread-safe, async-signal-safe). */
void cx_engine_wake(struct cx_engine *e);

/* Runs the engine on the calling thread (an application thread waiting for something a
 * callback will record): rounds, a spin of CX_IDLE_SPIN_NS, then a block in epoll, until a
 * round did work, the engine was woken, or timeout_ns passed (-1 = no limit). Callbacks run
 * on the caller. Meanwhile, and until 1 to 2 ms passed without a drive, the engine thread stands
 * aside (parked, not polling): a thread that drives in a loop receives without a hand-off
 * between threads and without a second thread competing for the cores. Anything that
 * needs the engine thread in that time calls cx_engine_unpark. Returns the work done (0:
 * timeout, or woken with nothing to do; check your condition again), or -EDEADLK from a
 * callback of this engine. Thread-safe; several drivers are serialised by the round lock. */
int cx_engine_drive(struct cx_engine *e, int64_t timeout_ns);
/* Ends a parked engine thread's stand-aside at once (cheap when it is not parked): for work
 * queued from a thread that is not driving. */
void cx_engine_unpark(struct cx_engine *e);

/* Counters since creation; per-source poll counts with cx_engine_source_polls. */
void cx_engine_stats(struct cx_engine *e, struct cx_engine_stats *out);
uint64_t cx_engine_source_polls(struct cx_engine *e, int id);
/* The current poll interval of a source in rounds (1 = every round). */
unsigned cx_engine_source_interval(struct cx_engine *e, int id);

#endif
