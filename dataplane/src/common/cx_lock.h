/* Small futex locks for the per-event path: cx_lock, a three-state futex mutex (0 free,
 * 1 held, 2 held with waiters), and cx_rlock, the same made recursive for the owner.
 *
 * Why not pthread mutexes: a shared-memory event takes the engine's round lock and its
 * peer's link lock (recursive: a sink handler submits on the link being polled), and
 * glibc's lock and unlock cost about 55 instructions a pair, 90 for a recursive one (type
 * dispatch, owner and user counts), a third of what the runtime spends on an event. Here an
 * uncontended lock is one compare-and-swap and an unlock one exchange; a waiter sleeps in
 * the kernel (futex), so a long holder elsewhere costs it no CPU. Neither works with
 * condition variables (none waits on these locks). */
#ifndef CX_LOCK_H
#define CX_LOCK_H

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

struct cx_lock {
    int v; /* 0 free, 1 held, 2 held and someone may sleep on it */
};
#define CX_LOCK_INIT {0}

static inline int cx_trylock(struct cx_lock *l)
{
    int c = 0;
    return __atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)
               ? 0
               : EBUSY;
}

static inline void cx_lock(struct cx_lock *l)
{
    int c = 0;
    if (__atomic_compare_exchange_n(&l->v, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    if (c != 2)
        c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    while (c != 0) { /* say "waiters" (2), sleep while it stays 2, try again */
        syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
        c = __atomic_exchange_n(&l->v, 2, __ATOMIC_ACQUIRE);
    }
}

static inline void cx_unlock(struct cx_lock *l)
{
    if (__atomic_exchange_n(&l->v, 0, __ATOMIC_RELEASE) == 2)
        syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Recursive: the owner takes it again without waiting; as many unlocks as locks. owner is
 * read by other threads only to compare with themselves: it equals a thread only while
 * that very thread holds the lock. */
struct cx_rlock {
    struct cx_lock l;
    unsigned depth;  /* owner only */
    pthread_t owner; /* atomic; 0 when free */
};

static inline int cx_rlock_mine(struct cx_rlock *r, pthread_t self)
{
    return __atomic_load_n(&r->owner, __ATOMIC_RELAXED) == self;
}

static inline void cx_rlock(struct cx_rlock *r)
{
    pthread_t self = pthread_self();
    if (cx_rlock_mine(r, self)) {
        r->depth++;
        return;
    }
    cx_lock(&r->l);
    __atomic_store_n(&r->owner, self, __ATOMIC_RELAXED);
    r->depth = 1;
}

/* 0 taken (or taken again by its owner), EBUSY held by another thread */
static inline int cx_rtrylock(struct cx_rlock *r)
{
    pthread_t self = pthread_self();
    if (cx_rlock_mine(r, self)) {
        r->depth++;
        return 0;
    }
    if (cx_trylock(&r->l) != 0)
        return EBUSY;
    __atomic_store_n(&r->owner, self, __ATOMIC_RELAXED);
    r->depth = 1;
    return 0;
}

static inline void cx_runlock(struct cx_rlock *r)
{
    if (--r->depth)
        return;
    __atomic_store_n(&r->owner, (pthread_t)0, __ATOMIC_RELAXED);
    cx_unlock(&r->l);
}

#endif
