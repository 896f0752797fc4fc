/* Link ownership and help for blocked senders (ucx driver).
 *
 * A large send waits until UCX is done with the caller's memory (cx_ucx_xfer.c), which
 * needs the receiver to progress its end. If that end is driven by a thread that is itself
 * waiting in a send on another link (two links in opposite directions between two
 * processes, a ring of three, or one thread driving both ends), each would wait for the
 * other forever. So while a send waits, its thread also progresses every other ucx link
 * of the process that no thread is inside: what arrives there is queued (not delivered:
 * callbacks run only in their owner's progress) and the owner is woken by its kick
 * eventfd. A link is "entered" by a compare-and-swap of a per-thread token for the length
 * of every driver call, so a helper never touches a link in use, and the owner waits at
 * most one helper's ucp_worker_progress. Workers are created UCS_THREAD_MODE_SERIALIZED. */
#define _GNU_SOURCE
#include "transport/ucx/cx_ucx_int.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <unistd.h>

static __thread char thread_token; /* its address names this thread */
static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ucx_link *share_head;
static pid_t share_pid; /* the list is this process's (a forked child starts empty) */

static int try_enter(struct ucx_link *u)
{
    uintptr_t none = 0;
    return __atomic_compare_exchange_n(&u->holder, &none, (uintptr_t)&thread_token, 0,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

int cx_ucx_enter(struct ucx_link *u)
{
    if (__atomic_load_n(&u->holder, __ATOMIC_RELAXED) == (uintptr_t)&thread_token)
        return 1; /* a callback of ours calling back into the driver */
    for (unsigned spins = 0; !try_enter(u); spins++)
        if (spins > 64)
            sched_yield(); /* a helper is in one ucp_worker_progress: let it finish */
    return 0;
}

void cx_ucx_leave(struct ucx_link *u, int nested)
{
    if (!nested)
        __atomic_store_n(&u->holder, 0, __ATOMIC_RELEASE);
}

void cx_ucx_share_add(struct ucx_link *u)
{
    pthread_mutex_lock(&share_lock);
    if (share_pid != getpid()) { /* inherited across fork: the parent's links are not ours */
        share_head = NULL;
        share_pid = getpid();
    }
    u->share_prev = NULL;
    u->share_next = share_head;
    if (share_head)
        share_head->share_prev = u;
    share_head = u;
    pthread_mutex_unlock(&share_lock);
}

void cx_ucx_share_remove(struct ucx_link *u)
{
    pthread_mutex_lock(&share_lock);
    if (share_pid == getpid()) {
        if (u->share_prev)
            u->share_prev->share_next = u->share_next;
        else if (share_head == u)
            share_head = u->share_next;
        if (u->share_next)
            u->share_next->share_prev = u->share_prev;
    }
    u->share_next = u->share_prev = NULL;
    pthread_mutex_unlock(&share_lock);
}

void cx_ucx_help_others(struct ucx_link *self)
{
    if (pthread_mutex_trylock(&share_lock) != 0)
        return; /* another waiting sender is helping right now */
    if (share_pid == getpid()) {
        for (struct ucx_link *m = share_head; m; m = m->share_next) {
            if (m == self || !try_enter(m))
                continue;
            /* m->fn is NULL outside its owner's progress: arrivals are queued. Kick an
             * owner that may be asleep even when nothing showed: the progress may have
             * used up the event its armed worker was waiting for. */
            if (ucp_worker_progress(m->worker) > 0 || m->armed)
                cx_ucx_kick(m);
            cx_ucx_leave(m, 0);
        }
    }
    pthread_mutex_unlock(&share_lock);
}

/* Called with u entered. Makes u's fd readable so an owner asleep on it comes to progress
 * what a helper queued. */
void cx_ucx_kick(struct ucx_link *u)
{
    if (u->kicked)
        return;
    u->kicked = 1;
    uint64_t one = 1;
    if (write(u->kick_fd, &one, sizeof one) < 0) { /* counter full: it is readable anyway */
    }
}

void cx_ucx_unkick(struct ucx_link *u)
{
    if (!u->kicked)
        return;
    u->kicked = 0;
    uint64_t v;
    if (read(u->kick_fd, &v, sizeof v) < 0) { /* already drained */
    }
}
