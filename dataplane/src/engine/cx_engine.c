/* The progress engine; see cx_engine.h for the contract and the adaptive poll policy. */
#define _GNU_SOURCE
#include "engine/cx_engine.h"

#include "common/cx_error.h"
#include "common/cx_lock.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define WAKE_ID UINT32_MAX
#define BUDGET 64
/* After a cx_engine_drive returns, the engine thread stays parked about this long (one to
 * two periods) unless unparked: an application that drives in a loop keeps the progress to
 * itself. Counted in drives, not read from the clock: the clock costs more than a round. */
#define LEASE_NS 1000000

struct slot {
    struct cx_engine_source src;
    int active;            /* atomic: 1 = registered and healthy */
    int used;              /* slot taken (until remove) */
    unsigned interval;     /* rounds between polls */
    unsigned countdown;    /* rounds until the next poll */
    uint64_t polls;
    /* for links */
    struct cx_link *link;
    cx_recv_fn fn;
    void *arg;
    void (*on_error)(void *, int);
    void *err_arg;
};

struct cx_engine {
    const struct cx_idle_strategy *idle;
    struct cx_idle_state ist;
    int epfd, wakefd;
    struct cx_lock lock;       /* held by the engine during a round; add/remove take it */
    int waiters;           /* atomic: threads waiting for the lock */
    pthread_t thread;
    int started, stop;
    int nslots;            /* highest used slot + 1 */
    int in_round;          /* a round is running (for add/remove from callbacks) */
    pthread_t round_owner; /* the thread running it */
    /* cx_engine_drive: while a thread drives (or its lease runs), the engine thread parks */
    int drivers;           /* atomic: threads inside cx_engine_drive */
    uint64_t drive_seq;    /* atomic: drives ended so far (a drive renews the lease) */
    uint64_t lease_seen;   /* engine thread: drive_seq when it last looked */
    int in_epoll;          /* atomic: the engine thread is (about to be) in epoll_wait */
    int parked, unpark;    /* atomic; park_cv waits under park_lock */
    pthread_mutex_t park_lock;
    pthread_cond_t park_cv;
    struct slot slots[CX_ENGINE_MAX_SOURCES];
    struct cx_engine_stats st;
};

int cx_engine_create(const struct cx_idle_strategy *idle, struct cx_engine **out)
{
    struct cx_engine *e = calloc(1, sizeof *e);
    if (!e)
        return cx_err_set(ENOMEM, "engine: out of memory");
    e->idle = idle ? idle : &cx_idle_block;
    cx_idle_state_init(&e->ist);
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (e->epfd < 0 || e->wakefd < 0) {
        int err = errno;
        close(e->epfd), close(e->wakefd), free(e);
        return cx_err_set(err, "engine: epoll/eventfd: %s", strerror(err));
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = WAKE_ID};
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wakefd, &ev);
    pthread_mutex_init(&e->park_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->park_cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = e;
    return 0;
}

/* Whether the caller runs inside a round (a callback): then the lock is already held. */
static int in_own_round(struct cx_engine *e)
{
    return __atomic_load_n(&e->in_round, __ATOMIC_ACQUIRE) &&
           pthread_equal(pthread_self(), e->round_owner);
}

static void take_lock(struct cx_engine *e)
{
    __atomic_add_fetch(&e->waiters, 1, __ATOMIC_SEQ_CST);
    cx_engine_wake(e);
    cx_lock(&e->lock);
    __atomic_sub_fetch(&e->waiters, 1, __ATOMIC_SEQ_CST);
}

void cx_engine_wake(struct cx_engine *e)
{
    uint64_t one = 1;
    ssize_t w = write(e->wakefd, &one, sizeof one);
    (void)w;
}

static int link_poll(void *ctx, int budget);

static int add_locked(struct cx_engine *e, const struct cx_engine_source *s, int self)
{
    int id = -1;
    for (int i = 0; i < CX_ENGINE_MAX_SOURCES; i++)
        if (!e->slots[i].used) {
            id = i;
            break;
        }
    if (id < 0) {
        if (!self)
            cx_unlock(&e->lock);
        return cx_err_set(ENOSPC, "engine: all %d source slots are taken", CX_ENGINE_MAX_SOURCES);
    }
    struct slot *sl = &e->slots[id];
    if (s->poll != link_poll)
        memset(sl, 0, sizeof *sl);
    sl->src = *s;
    if (sl->src.cost < 1)
        sl->src.cost = 1;
    sl->interval = 1;
    sl->used = 1;
    if (s->fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)id};
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
            int err = errno;
            sl->used = 0;
            if (!self)
                cx_unlock(&e->lock);
            return cx_err_set(err, "engine: epoll_ctl(%s): %s", s->name ? s->name : "?",
                              strerror(err));
        }
    }
    if (id >= e->nslots)
        e->nslots = id + 1;
    if (s->poll == link_poll)
        sl->src.ctx = sl; /* links: the slot is the context */
    __atomic_store_n(&sl->active, 1, __ATOMIC_RELEASE);
    if (!self)
        cx_unlock(&e->lock);
    return id;
}

int cx_engine_add(struct cx_engine *e, const struct cx_engine_source *s)
{
    if (!s || !s->poll)
        return cx_err_set(EINVAL, "engine: source without a poll function");
    int self = in_own_round(e);
    if (!self)
        take_lock(e);
    return add_locked(e, s, self);
}

static int link_poll(void *ctx, int budget)
{
    struct slot *sl = ctx;
    return cx_link_progress(sl->link, sl->fn, sl->arg, budget);
}
static int link_arm(void *ctx) { return cx_link_arm(((struct slot *)ctx)->link); }
static void link_err(void *ctx, int rc)
{
    struct slot *sl = ctx;
    if (sl->on_error)
        sl->on_error(sl->err_arg, rc);
}

int cx_engine_add_link(struct cx_engine *e, struct cx_link *k, cx_recv_fn fn, void *arg,
                       void (*on_error)(void *ctx, int rc), void *err_arg)
{
    struct cx_driver_caps c;
    cx_link_caps(k, &c);
    struct cx_engine_source s = {.name = k->ops->name, .poll = link_poll, .arm = link_arm,
                                 .on_error = link_err, .fd = cx_link_fd(k),
                                 .cost = c.poll_cost ? c.poll_cost : 1};
    int self = in_own_round(e);
    if (!self)
        take_lock(e);
    /* fill the link fields before the slot goes active: find the slot add_locked will take */
    for (int i = 0; i < CX_ENGINE_MAX_SOURCES; i++)
        if (!e->slots[i].used) {
            struct slot *sl = &e->slots[i];
            memset(sl, 0, sizeof *sl);
            sl->link = k, sl->fn = fn, sl->arg = arg;
            sl->on_error = on_error, sl->err_arg = err_arg;
            break;
        }
    return add_locked(e, &s, self);
}

int cx_engine_remove(struct cx_engine *e, int id)
{
    if (id < 0 || id >= CX_ENGINE_MAX_SOURCES || !e->slots[id].used)
        return cx_err_set(ENOENT, "engine: no source %d", id);
    int self = in_own_round(e);
    if (!self)
        take_lock(e);
    struct slot *sl = &e->slots[id];
    __atomic_store_n(&sl->active, 0, __ATOMIC_RELEASE);
    if (sl->src.fd >= 0)
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, sl->src.fd, NULL);
    sl->used = 0;
    if (!self)
        cx_unlock(&e->lock);
    return 0;
}

int cx_engine_do_work(struct cx_engine *e)
{
    int work = 0;
    cx_lock(&e->lock);
    e->round_owner = pthread_self();
    __atomic_store_n(&e->in_round, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < e->nslots; i++) {
        struct slot *sl = &e->slots[i];
        if (!__atomic_load_n(&sl->active, __ATOMIC_ACQUIRE))
            continue;
        if (sl->countdown > 1) {
            sl->countdown--;
            continue;
        }
        sl->polls++;
        int rc = sl->src.poll(sl->src.ctx, BUDGET);
        if (rc < 0) {
            __atomic_store_n(&sl->active, 0, __ATOMIC_RELEASE);
            if (sl->src.fd >= 0)
                epoll_ctl(e->epfd, EPOLL_CTL_DEL, sl->src.fd, NULL);
            if (sl->src.on_error)
                sl->src.on_error(sl->src.ctx, rc);
            work++;
            continue;
        }
        if (rc > 0) {
            work += rc;
            sl->interval = 1;
        } else if (sl->src.cost > 1 && sl->interval < 8 * sl->src.cost) {
            /* a cost-1 source (a memory load: shm) stays due every round: skipping it
             * saves less than the rounds its event would wait for */
            sl->interval *= 2;
        }
        sl->countdown = sl->interval;
    }
    __atomic_store_n(&e->in_round, 0, __ATOMIC_RELEASE);
    e->st.rounds++;
    e->st.work += (uint64_t)work;
    cx_unlock(&e->lock);
    return work;
}

static int is_engine_thread(struct cx_engine *e)
{
    return e->started && pthread_equal(pthread_self(), e->thread);
}

static int block_ns(struct cx_engine *e, int64_t timeout_ns)
{
    int blockable = 1;
    cx_lock(&e->lock);
    for (int i = 0; i < e->nslots && blockable; i++) {
        struct slot *sl = &e->slots[i];
        if (!__atomic_load_n(&sl->active, __ATOMIC_ACQUIRE))
            continue;
        if (sl->src.fd < 0 || (sl->src.arm && sl->src.arm(sl->src.ctx) < 0)) {
            blockable = 0;
            sl->countdown = 0; /* poll it next round */
            sl->interval = 1;
        }
    }
    cx_unlock(&e->lock);
    if (!blockable || __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
        return 0;
    if (__atomic_load_n(&e->waiters, __ATOMIC_SEQ_CST))
        return 1;
    int self = is_engine_thread(e);
    if (self) { /* a driver that comes now sees in_epoll and wakes us (or we see it) */
        __atomic_store_n(&e->in_epoll, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&e->drivers, __ATOMIC_SEQ_CST)) {
            __atomic_store_n(&e->in_epoll, 0, __ATOMIC_SEQ_CST);
            return 1;
        }
    }
    __atomic_add_fetch(&e->st.blocks, 1, __ATOMIC_RELAXED);
    int r = cx_engine_wait_ns(e, timeout_ns);
    if (self)
        __atomic_store_n(&e->in_epoll, 0, __ATOMIC_SEQ_CST);
    if (r > 0)
        __atomic_add_fetch(&e->st.wakeups, 1, __ATOMIC_RELAXED);
    return r;
}

int cx_engine_block(struct cx_engine *e, int timeout_ms)
{
    return block_ns(e, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000);
}

int cx_engine_drive(struct cx_engine *e, int64_t timeout_ns)
{
    if (in_own_round(e) || is_engine_thread(e))
        return cx_err_set(EDEADLK, "engine: cx_engine_drive from the engine's own round");
    __atomic_add_fetch(&e->drivers, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&e->in_epoll, __ATOMIC_SEQ_CST))
        cx_engine_wake(e); /* the engine thread leaves epoll and parks */
    int work = cx_engine_do_work(e);
    unsigned spins = 0;
    /* the clock only once the first round found nothing (a waiting thread often finds
     * its event at once) */
    uint64_t now = work ? 0 : cx_idle_now_ns();
    uint64_t end = timeout_ns < 0 ? UINT64_MAX : now + (uint64_t)timeout_ns;
    uint64_t start = now, spin_end = now + e->ist.spin_ns;
    for (; !work;) {
        if ((work = cx_engine_do_work(e)) != 0)
            break;
        if (now < spin_end && (++spins & 15)) { /* the clock costs more than a round here */
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        now = cx_idle_now_ns();
        if (now >= end || __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE))
            break;
        if (now < spin_end) {
            if (e->ist.spin_ns > CX_IDLE_SPIN_NS && now - start >= CX_IDLE_YIELD_AFTER_NS)
                sched_yield(); /* a long spin shares the core every 16 rounds (cx_idle.h) */
            continue;
        }
        int r = block_ns(e, end == UINT64_MAX ? -1 : (int64_t)(end - now));
        if (r > 0) { /* an fd or a wake fired: one round, then the caller checks */
            work = cx_engine_do_work(e);
            break;
        }
    }
    __atomic_add_fetch(&e->drive_seq, 1, __ATOMIC_RELEASE);
    __atomic_sub_fetch(&e->drivers, 1, __ATOMIC_SEQ_CST);
    return work;
}

void cx_engine_unpark(struct cx_engine *e)
{
    /* Dekker with park(): either it sees unpark or we see parked. The lease ends too: the
     * engine thread runs on until a driver comes again. */
    __atomic_store_n(&e->unpark, 1, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&e->parked, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&e->park_lock);
    pthread_cond_signal(&e->park_cv);
    pthread_mutex_unlock(&e->park_lock);
}

/* Whether the engine thread should stand aside for a driver: one is driving, or one
 * drove since the engine thread last looked (engine thread only). */
static int leased(struct cx_engine *e)
{
    return __atomic_load_n(&e->drivers, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&e->drive_seq, __ATOMIC_ACQUIRE) != e->lease_seen;
}

/* Parks the engine thread while a driver holds the progress: until a whole LEASE_NS passed
 * without a drive, an unpark, or stop. */
static void park(struct cx_engine *e)
{
    pthread_mutex_lock(&e->park_lock);
    __atomic_store_n(&e->parked, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&e->unpark, __ATOMIC_SEQ_CST) && !__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE) && leased(e)) {
        e->lease_seen = __atomic_load_n(&e->drive_seq, __ATOMIC_ACQUIRE);
        uint64_t until = cx_idle_now_ns() + LEASE_NS;
        struct timespec ts = {(time_t)(until / 1000000000u), (long)(until % 1000000000u)};
        pthread_cond_timedwait(&e->park_cv, &e->park_lock, &ts);
    }
    if (__atomic_load_n(&e->unpark, __ATOMIC_SEQ_CST)) /* the lease ends: run until a driver comes */
        e->lease_seen = __atomic_load_n(&e->drive_seq, __ATOMIC_ACQUIRE);
    __atomic_store_n(&e->unpark, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&e->parked, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&e->park_lock);
    e->ist.spin_start_ns = 0;
}

int cx_engine_wait(struct cx_engine *e, int timeout_ms)
{
    return cx_engine_wait_ns(e, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000);
}

int cx_engine_wait_ns(struct cx_engine *e, int64_t timeout_ns)
{
    struct epoll_event ev[32];
    int n;
    if (timeout_ns < 0) {
        n = epoll_wait(e->epfd, ev, 32, -1);
    } else {
        struct timespec ts = {(time_t)(timeout_ns / 1000000000), (long)(timeout_ns % 1000000000)};
        n = epoll_pwait2(e->epfd, ev, 32, &ts, NULL);
        if (n < 0 && errno == ENOSYS) { /* kernel before 5.11 */
            nanosleep(&ts, NULL);
            n = epoll_wait(e->epfd, ev, 32, 0);
        }
    }
    if (n <= 0)
        return 0;
    for (int i = 0; i < n; i++) {
        uint32_t id = ev[i].data.u32;
        if (id == WAKE_ID) {
            uint64_t v;
            ssize_t r = read(e->wakefd, &v, sizeof v);
            (void)r;
        } else if (id < CX_ENGINE_MAX_SOURCES) {
            e->slots[id].countdown = 0;
            e->slots[id].interval = 1;
        }
    }
    return 1;
}

static void *engine_main(void *arg)
{
    struct cx_engine *e = arg;
    while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
        if (__atomic_exchange_n(&e->unpark, 0, __ATOMIC_SEQ_CST)) {
            e->lease_seen = __atomic_load_n(&e->drive_seq, __ATOMIC_ACQUIRE); /* lease over */
        } else if (leased(e) && !__atomic_load_n(&e->waiters, __ATOMIC_SEQ_CST)) {
            park(e);
            continue;
        }
        int w = cx_engine_do_work(e);
        if (w > 0 && __atomic_load_n(&e->drivers, __ATOMIC_SEQ_CST))
            cx_engine_wake(e); /* a driver asleep in epoll: it should look at what we did */
        if (__atomic_load_n(&e->waiters, __ATOMIC_SEQ_CST))
            sched_yield(); /* let add/remove in */
        e->idle->idle(&e->ist, w, e);
    }
    return NULL;
}

int cx_engine_start(struct cx_engine *e)
{
    if (e->started)
        return cx_err_set(EALREADY, "engine: already started");
    int rc = pthread_create(&e->thread, NULL, engine_main, e);
    if (rc)
        return cx_err_set(rc, "engine: pthread_create: %s", strerror(rc));
    e->started = 1;
    return 0;
}

void cx_engine_destroy(struct cx_engine *e)
{
    if (!e)
        return;
    if (e->started) {
        __atomic_store_n(&e->stop, 1, __ATOMIC_RELEASE);
        cx_engine_wake(e);
        pthread_mutex_lock(&e->park_lock);
        pthread_cond_signal(&e->park_cv);
        pthread_mutex_unlock(&e->park_lock);
        pthread_join(e->thread, NULL);
    }
    close(e->epfd);
    close(e->wakefd);
    pthread_mutex_destroy(&e->park_lock);
    pthread_cond_destroy(&e->park_cv);
    free(e);
}

void cx_engine_stats(struct cx_engine *e, struct cx_engine_stats *out)
{
    *out = e->st;
    out->blocks = e->st.blocks;
}

uint64_t cx_engine_source_polls(struct cx_engine *e, int id)
{
    return id >= 0 && id < CX_ENGINE_MAX_SOURCES ? e->slots[id].polls : 0;
}

unsigned cx_engine_source_interval(struct cx_engine *e, int id)
{
    return id >= 0 && id < CX_ENGINE_MAX_SOURCES ? e->slots[id].interval : 0;
}
