/* Idle strategies; see cx_idle.h. */
#include "engine/cx_idle.h"

#include "engine/cx_engine.h"

#include "common/cx_env.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void spin_idle(struct cx_idle_state *st, int work, struct cx_engine *e);

void cx_idle_state_init(struct cx_idle_state *st)
{
    memset(st, 0, sizeof *st);
    st->spins = 1000;
    st->yields = 100;
    st->min_sleep_ns = 1000;
    st->max_sleep_ns = 1000000;
    st->spin_ns = cx_idle_spin_ns();
}

uint64_t cx_idle_spin_ns(void)
{
    /* a host with idle cores may spin longer */
    return cx_env_u64("CONFLUX_SPIN_US", CX_IDLE_SPIN_NS / 1000, 0, 1000000) * 1000;
}

void cx_idle_spin_until(uint64_t start_ns, uint64_t spin_ns)
{
    if (spin_ns <= CX_IDLE_SPIN_NS || cx_idle_now_ns() - start_ns < CX_IDLE_YIELD_AFTER_NS)
        spin_idle(NULL, 0, NULL);
    else
        sched_yield(); /* a long spin: let a peer sharing this core run */
}

uint64_t cx_idle_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    nanosleep(&ts, NULL);
}

static void spin_idle(struct cx_idle_state *st, int work, struct cx_engine *e)
{
    (void)st, (void)work, (void)e;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void yield_idle(struct cx_idle_state *st, int work, struct cx_engine *e)
{
    (void)st, (void)e;
    if (!work)
        sched_yield();
}

/* Sleeps ns in epoll on the sources' fds without arming them, so a socket that turns
 * readable ends the sleep at once (sources that only signal when armed, like shm, are
 * caught by the next poll). */
static void nap_or_wait(struct cx_engine *e, uint64_t ns)
{
    if (e)
        cx_engine_wait_ns(e, (int64_t)ns);
    else
        nap(ns);
}

/* Returns 1 when the backoff is exhausted (caller may block). */
static int backoff_step(struct cx_idle_state *st, int work, struct cx_engine *e)
{
    if (work) {
        st->empty = 0;
        st->sleep_ns = 0;
        return 0;
    }
    st->empty++;
    if (st->empty <= st->spins) {
        spin_idle(st, work, NULL);
        return 0;
    }
    if (st->empty <= st->spins + st->yields) {
        sched_yield();
        return 0;
    }
    if (st->sleep_ns < st->max_sleep_ns) {
        st->sleep_ns = st->sleep_ns ? st->sleep_ns * 2 : st->min_sleep_ns;
        if (st->sleep_ns > st->max_sleep_ns)
            st->sleep_ns = st->max_sleep_ns;
        nap_or_wait(e, st->sleep_ns);
        return 0;
    }
    return 1;
}

static void backoff_idle(struct cx_idle_state *st, int work, struct cx_engine *e)
{
    if (backoff_step(st, work, e))
        nap_or_wait(e, st->max_sleep_ns);
}

/* Spin for spin_ns after the last round with work (a reply often comes within that), then
 * block until an fd or a wake fires. */
static void block_idle(struct cx_idle_state *st, int work, struct cx_engine *e)
{
    if (work) {
        st->spin_start_ns = 0;
        return;
    }
    uint64_t now = cx_idle_now_ns();
    if (!st->spin_start_ns)
        st->spin_start_ns = now;
    if (now - st->spin_start_ns < st->spin_ns) {
        cx_idle_spin_until(st->spin_start_ns, st->spin_ns);
        return;
    }
    st->blocks++;
    if (cx_engine_block(e, -1) > 0) /* woken: be hot again */
        st->spin_start_ns = 0;
}

const struct cx_idle_strategy cx_idle_spin = {"spin", spin_idle};
const struct cx_idle_strategy cx_idle_yield = {"yield", yield_idle};
const struct cx_idle_strategy cx_idle_backoff = {"backoff", backoff_idle};
const struct cx_idle_strategy cx_idle_block = {"block", block_idle};
