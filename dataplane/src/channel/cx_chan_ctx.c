/* The channel runtime of one process: listener, progress engine, its own engine source
 * (kicked through an eventfd) that registers new peers, connects to new sinks, sends what
 * other threads queued and runs local sinks' handlers; and request/reply waiting. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

__thread struct cx_chan_ctx *chan_thread_ctx;
#define on_thread chan_thread_ctx

long long chan_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int chan_on_progress_thread(struct cx_chan_ctx *ctx) { return on_thread == ctx; }

void chan_kick(struct cx_chan_ctx *ctx)
{
    if (ctx->kicked)
        return;
    ctx->kicked = 1;
    uint64_t one = 1;
    ssize_t w = write(ctx->kickfd, &one, sizeof one);
    (void)w;
    if (!on_thread) /* a driver sees the kickfd; a parked progress thread must come back */
        cx_engine_unpark(ctx->eng);
}

int cx_embedded_chan_ctx_drive(struct cx_chan_ctx *ctx, long timeout_us)
{
    if (chan_on_progress_thread(ctx))
        return cx_err_set(EDEADLK, "channel: cx_chan_ctx_drive from a sink handler");
    int rc = cx_engine_drive(ctx->eng, timeout_us < 0 ? -1 : (int64_t)timeout_us * 1000);
    return rc < 0 ? rc : rc > 0;
}

int chan_wait(struct cx_chan_ctx *ctx, long long deadline_ms)
{
    if (deadline_ms < 0) {
        ctx->waiters++; /* counted under the lock: chan_wake_waiters cannot miss us */
        pthread_cond_wait(&ctx->cv, &ctx->lock);
        ctx->waiters--;
        return 0;
    }
    long long now = chan_now_ms();
    if (now >= deadline_ms)
        return -ETIMEDOUT;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (deadline_ms - now) * 1000000LL;
    ts.tv_sec += ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    ctx->waiters++;
    pthread_cond_timedwait(&ctx->cv, &ctx->lock, &ts);
    ctx->waiters--;
    return 0;
}

int chan_request(struct cx_chan_ctx *ctx, const char *addr, struct chan_ctrl *m,
                 int timeout_ms, struct chan_req *out)
{
    if (chan_on_progress_thread(ctx)) /* the reply would need this very thread */
        return cx_err_set(EDEADLK, "channel: cannot wait for %s from a sink handler", addr);
    struct chan_peer *p;
    int rc = chan_peer_get(ctx, addr, &p);
    if (rc < 0)
        return rc;
    long long deadline = timeout_ms < 0 ? -1 : chan_now_ms() + timeout_ms;
    struct chan_req *r = calloc(1, sizeof *r);
    if (!r)
        return cx_err_set(ENOMEM, "channel: out of memory");
    pthread_mutex_lock(&ctx->lock);
    r->id = m->req = ++ctx->next_req;
    r->peer = p;
    r->next = ctx->reqs;
    ctx->reqs = r;
    rc = chan_ctrl_post(p, m);
    chan_kick(ctx);
    while (rc == 0 && !r->done)
        if (chan_wait(ctx, deadline) < 0)
            rc = cx_err_set(ETIMEDOUT, "channel: no answer from %s within %d ms", addr,
                            timeout_ms);
    for (struct chan_req **pp = &ctx->reqs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    pthread_mutex_unlock(&ctx->lock);
    if (rc == 0)
        *out = *r;
    free(r);
    return rc;
}

/* ---- the runtime's own engine source ---- */

static int kick_poll(void *arg, int budget)
{
    struct cx_chan_ctx *ctx = arg;
    /* Polled every round while traffic flows: without a kick or local events there is
     * nothing to do, and no lock or system call is spent finding that out (whoever sets
     * them does so under ctx->lock and then kicks, so a racy miss is caught next round). */
    if (!__atomic_load_n(&ctx->kicked, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&ctx->local_pending, __ATOMIC_ACQUIRE) &&
        !__atomic_load_n(&ctx->need_connect, __ATOMIC_ACQUIRE))
        return 0;
    uint64_t v;
    ssize_t r = read(ctx->kickfd, &v, sizeof v);
    (void)r;
    on_thread = ctx;
    int work = 0;
    pthread_mutex_lock(&ctx->lock);
    ctx->kicked = 0;
    size_t n = 0;
    for (struct chan_peer *p = ctx->peers; p; p = p->next) {
        if (p->engine_id < 0 && chan_peer_register(p) == 0)
            work++;
        n++;
    }
    struct chan_peer **snap = n ? malloc(n * sizeof *snap) : NULL;
    n = 0;
    if (snap)
        for (struct chan_peer *p = ctx->peers; p; p = p->next)
            if ((p->out || p->queued) && !p->failed)
                snap[n++] = p;
    int connect = ctx->need_connect;
    pthread_mutex_unlock(&ctx->lock);
    if (connect) {
        chan_connect_pending(ctx);
        work++;
    }
    /* peers are freed only on this thread, so the snapshot stays valid */
    for (size_t i = 0; i < n; i++)
        work += chan_peer_flush(snap[i]);
    free(snap);
    work += chan_dispatch_local(ctx, budget);
    on_thread = NULL;
    return work;
}

static int kick_arm(void *arg)
{
    struct cx_chan_ctx *ctx = arg;
    int busy;
    pthread_mutex_lock(&ctx->lock);
    busy = ctx->local_pending || ctx->need_connect;
    for (struct chan_peer *p = ctx->peers; p && !busy; p = p->next)
        busy = p->engine_id < 0 || ((p->out || p->queued) && !p->failed);
    pthread_mutex_unlock(&ctx->lock);
    return busy ? -EAGAIN : 0;
}

/* The address others dial: the listen address, 0.0.0.0 replaced by a real one. */
static void pick_advertise(const char *bound, char *out, size_t cap)
{
    const char *wild = "tcp://0.0.0.0:";
    if (strncmp(bound, wild, strlen(wild)) != 0) {
        snprintf(out, cap, "%s", bound);
        return;
    }
    char ip[INET_ADDRSTRLEN] = "127.0.0.1";
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK)) {
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
                break;
            }
        freeifaddrs(ifs);
    }
    snprintf(out, cap, "tcp://%s:%s", ip, bound + strlen(wild));
}

int cx_embedded_chan_ctx_create(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out)
{
    int rc = chan_ctrl_init();
    if (rc < 0)
        return rc;
    const char *listen = o && o->listen ? o->listen : "tcp://0.0.0.0:0";
    struct cx_chan_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return cx_err_set(ENOMEM, "channel: out of memory");
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&ctx->cv, &ca);
    pthread_condattr_destroy(&ca);
    ctx->kickfd = ctx->hs_tfd = -1;
    ctx->linger_ms = chan_linger_ms(o);
    ctx->next_num = 1; /* mux tag 0 is link control */
    ctx->lsn.ctx = ctx->shm.ctx = ctx->ucx.ctx = ctx;
    if ((rc = chan_fabric_name(o ? o->fabric : NULL, ctx->fabric)) < 0)
        goto fail;
    if ((rc = cx_listen(listen, &ctx->lsn.ops, &ctx->lsn.l)) < 0) {
        rc = cx_err_wrap(rc, "channel runtime: listen on '%s'", listen);
        goto fail;
    }
    const char *bound = ctx->lsn.ops->listener_addr(ctx->lsn.l);
    if (o && o->advertise) {
        if (strlen(o->advertise) >= sizeof ctx->addr || !cx_driver_for(o->advertise)) {
            rc = cx_err_set(EINVAL, "channel runtime: bad advertise address '%s'", o->advertise);
            goto fail;
        }
        snprintf(ctx->addr, sizeof ctx->addr, "%s", o->advertise);
    } else {
        pick_advertise(bound, ctx->addr, sizeof ctx->addr);
    }
    if ((rc = chan_link_setup(ctx, o)) < 0)
        goto fail;
    if ((ctx->kickfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = cx_err_set(errno, "channel runtime: eventfd: %s", strerror(errno));
        goto fail;
    }
    if ((rc = cx_engine_create(&cx_idle_block, &ctx->eng)) < 0)
        goto fail;
    struct cx_engine_source ks = {.name = "channel", .poll = kick_poll, .arm = kick_arm,
                                  .ctx = ctx, .fd = ctx->kickfd, .cost = 1};
    /* listeners: rarely busy, and an empty accept allocates a socket: polled seldom */
    struct cx_engine_source ls = {.name = "channel-listener", .poll = chan_listen_poll,
                                  .ctx = &ctx->lsn, .fd = ctx->lsn.ops->listener_fd(ctx->lsn.l),
                                  .cost = 64};
    if ((rc = cx_engine_add(ctx->eng, &ks)) < 0 || (rc = cx_engine_add(ctx->eng, &ls)) < 0 ||
        (rc = chan_accept_setup(ctx)) < 0)
        goto fail;
    if (ctx->shm.ops) {
        struct cx_engine_source ss = {.name = "channel-shm-listener", .poll = chan_listen_poll,
                                      .ctx = &ctx->shm, .fd = ctx->shm.ops->listener_fd(ctx->shm.l),
                                      .cost = 64};
        if ((rc = cx_engine_add(ctx->eng, &ss)) < 0)
            goto fail;
    }
    if (ctx->ucx.ops) {
        struct cx_engine_source us = {.name = "channel-ucx-listener", .poll = chan_listen_poll,
                                      .ctx = &ctx->ucx, .fd = ctx->ucx.ops->listener_fd(ctx->ucx.l),
                                      .cost = 64};
        if ((rc = cx_engine_add(ctx->eng, &us)) < 0)
            goto fail;
    }
    if ((rc = cx_engine_start(ctx->eng)) < 0)
        goto fail;
    *out = ctx;
    return 0;
fail:
    if (ctx->eng)
        cx_engine_destroy(ctx->eng);
    if (ctx->lsn.l)
        ctx->lsn.ops->listener_close(ctx->lsn.l);
    if (ctx->shm.l)
        ctx->shm.ops->listener_close(ctx->shm.l);
    if (ctx->ucx.l)
        ctx->ucx.ops->listener_close(ctx->ucx.l);
    if (ctx->kickfd >= 0)
        close(ctx->kickfd);
    if (ctx->hs_tfd >= 0)
        close(ctx->hs_tfd);
    pthread_cond_destroy(&ctx->cv);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    return rc;
}

const char *cx_embedded_chan_ctx_addr(const struct cx_chan_ctx *ctx) { return ctx->addr; }

void cx_embedded_chan_ctx_destroy(struct cx_chan_ctx *ctx)
{
    if (!ctx)
        return;
    /* first, while links may still be dialed: reliable sources' events reach their sinks */
    cx_err_clear();
    int lrc = chan_linger(ctx, NULL);
    char lmsg[512];
    if (lrc < 0)
        snprintf(lmsg, sizeof lmsg, "%s", cx_errmsg());
    pthread_mutex_lock(&ctx->lock);
    ctx->closing = 1;
    pthread_mutex_unlock(&ctx->lock);
    chan_dial_join_all(ctx); /* before the goodbyes: a dial may still add a peer */
    pthread_mutex_lock(&ctx->lock);
    while (ctx->chans) {
        struct cx_chan *ch = ctx->chans;
        ch->refs = 1;
        pthread_mutex_unlock(&ctx->lock);
        cx_embedded_chan_close(ch);
        pthread_mutex_lock(&ctx->lock);
    }
    chan_linger_say_bye(ctx); /* no sink of ours handles anything from here on */
    /* let the goodbyes leave (bounded: a dead peer must not hold us) */
    long long deadline = chan_now_ms() + 1000;
    for (;;) {
        int busy = 0;
        for (struct chan_peer *p = ctx->peers; p && !busy; p = p->next) {
            if (p->failed)
                continue;
            busy = p->out || p->queued || cx_rtrylock(&p->lock) != 0;
            if (!busy) { /* bytes the link accepted but the socket did not take yet */
                busy = cx_link_pending(p->link) > 0;
                cx_runlock(&p->lock);
            }
        }
        if (!busy || chan_now_ms() >= deadline)
            break;
        chan_kick(ctx);
        chan_wait(ctx, chan_now_ms() + 10);
    }
    pthread_mutex_unlock(&ctx->lock);
    cx_engine_destroy(ctx->eng); /* the progress thread is gone from here on */
    while (ctx->peers) {
        struct chan_peer *p = ctx->peers;
        ctx->peers = p->next;
        chan_peer_free(p);
    }
    for (size_t i = 0; i < ctx->neps; i++)
        free(ctx->eps[i]);
    free(ctx->eps);
    ctx->lsn.ops->listener_close(ctx->lsn.l);
    if (ctx->shm.l)
        ctx->shm.ops->listener_close(ctx->shm.l);
    if (ctx->ucx.l)
        ctx->ucx.ops->listener_close(ctx->ucx.l);
    close(ctx->kickfd);
    close(ctx->hs_tfd);
    pthread_cond_destroy(&ctx->cv);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
    if (lrc < 0) /* what the caller reads after this void call (cx_chan.h) */
        cx_err_set(-lrc, "%s", lmsg);
    else
        cx_err_clear();
}
