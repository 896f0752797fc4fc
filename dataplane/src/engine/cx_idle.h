/* Idle strategies of the progress engine (in the spirit of aeron's aeron_agent.h): after
 * every do_work round the engine calls idle(state, work). A strategy decides what an empty
 * round costs: spin (nothing, lowest latency, one core burned), yield (sched_yield), backoff
 * (spin, then yield, then sleep with a doubling period up to max_sleep_ns; the engine's
 * sleeps are epoll waits on the sources' fds, so a readable socket cuts them short) and block
 * (spin for a few microseconds after the last work, then block in epoll on the armed
 * drivers' fds until one of them or cx_engine_wake fires: an idle process uses no CPU and
 * wakes as soon as the kernel runs it). Block has no yield or sleep ladder on purpose: on a
 * machine whose cores are shared, a thread that keeps yielding or napping competes with the
 * very peer it waits for and then wakes late; a blocked one is woken at once. Any round with
 * work resets the state to its hottest phase. */
#ifndef CX_IDLE_H
#define CX_IDLE_H

#include <stdint.h>

struct cx_engine;

struct cx_idle_state {
    uint64_t empty;     /* consecutive empty rounds */
    uint64_t sleep_ns;  /* current backoff sleep */
    /* tunables (defaults filled by cx_idle_state_init) */
    uint64_t spins;     /* empty rounds spent spinning */
    uint64_t yields;    /* then rounds spent yielding */
    uint64_t min_sleep_ns, max_sleep_ns;
    uint64_t spin_ns;   /* block: spin this long after the last work, then block */
    uint64_t spin_start_ns; /* block: when the current run of empty rounds began (0 = none) */
    uint64_t blocks;    /* statistics: times the engine blocked */
};

struct cx_idle_strategy {
    const char *name;
    /* Called after each round with the units of work it did. May return at once, yield,
     * sleep, or call cx_engine_block(e, timeout_ms) (which returns when an fd is ready, the
     * engine is woken, or a driver refused to arm). Must not call do_work itself. */
    void (*idle)(struct cx_idle_state *st, int work, struct cx_engine *e);
};

extern const struct cx_idle_strategy cx_idle_spin;
extern const struct cx_idle_strategy cx_idle_yield;
extern const struct cx_idle_strategy cx_idle_backoff;
extern const struct cx_idle_strategy cx_idle_block;

/* Fills defaults: backoff: 1000 spins, 100 yields, sleeps doubling 1 us .. 1 ms (about
 * 2 ms in all); block: spin CX_IDLE_SPIN_NS (or the environment's CONFLUX_SPIN_US
 * microseconds, 0..1000000), then block. A spin longer than CX_IDLE_SPIN_NS also yields
 * the core (sched_yield) every few rounds once CX_IDLE_YIELD_AFTER_NS passed without work:
 * on a core shared with the peer it waits for, a pure spin would hold the core for a whole
 * time slice (milliseconds per message); a peer on its own core answers before that. */
#define CX_IDLE_SPIN_NS 20000
#define CX_IDLE_YIELD_AFTER_NS 5000
/* Monotonic nanoseconds (the clock the strategies and cx_engine_drive use). */
uint64_t cx_idle_now_ns(void);
void cx_idle_state_init(struct cx_idle_state *st);
/* The spin window of a thread that waits for a peer before it blocks: CONFLUX_SPIN_US
 * microseconds (0..1000000) or CX_IDLE_SPIN_NS. The engine's block strategy and the
 * sidecar's call slot both use it. */
uint64_t cx_idle_spin_ns(void);
/* One pause of a spin that began at start_ns and lasts spin_ns: a CPU pause, or, once a
 * long spin is past CX_IDLE_YIELD_AFTER_NS, sched_yield. */
void cx_idle_spin_until(uint64_t start_ns, uint64_t spin_ns);

#endif
