/* Accepting other processes' links without letting one of them stall the runtime. A
 * listener's engine source takes each connection with cx_listener_accept, which never waits
 * for the peer: a tls peer's handshake runs in its link's progress and fails the link once
 * the handshake deadline (cx_handshake_ms) passed. A silent peer never makes its fd readable,
 * though, so nothing would call that progress: a timerfd, armed for the earliest deadline of
 * the peers accepted since, wakes the engine, which progresses those peers once; the ones
 * that fail then (a silent peer, a partial ClientHello) are logged (cx_chan_peer.c) and
 * dropped like any broken link, while every other peer was served meanwhile. A peer whose
 * link is up (plain tcp, or a handshake done) but that has not said HELLO by then is dropped
 * the same way: every runtime's first frame on a link it dialed is its HELLO (or, in a
 * fabric, the links question just before it), so such a peer is silent or lying. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define DEADLINE_SLACK_MS 20 /* the link's own clock must see its deadline passed */

/* Arms the timer for `at` unless it fires earlier already (ctx lock held). */
static void arm_at(struct cx_chan_ctx *ctx, long long at)
{
    if (ctx->hs_next && ctx->hs_next <= at)
        return;
    ctx->hs_next = at;
    struct itimerspec its = {.it_value = {.tv_sec = at / 1000, .tv_nsec = (at % 1000) * 1000000}};
    timerfd_settime(ctx->hs_tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

int chan_listen_poll(void *arg, int budget)
{
    struct chan_lsn *ls = arg;
    struct cx_chan_ctx *ctx = ls->ctx;
    int work = 0;
    struct pollfd pf = {.fd = ls->ops->listener_fd(ls->l), .events = POLLIN};
    if (poll(&pf, 1, 0) != 1) /* cheaper than an accept that finds nobody */
        return 0;
    chan_thread_ctx = ctx;
    int hs_ms = cx_handshake_ms();
    while (work < budget) {
        struct cx_link *k;
        if (cx_listener_accept(ls->ops, ls->l, hs_ms, &k) < 0)
            break; /* -EAGAIN: nobody waiting; other errors are transient (EMFILE) */
        pthread_mutex_lock(&ctx->lock);
        struct chan_peer *p;
        if (chan_peer_add(ctx, k, NULL, &p) == 0) {
            p->accepted = 1;
            p->hs_until = chan_now_ms() + hs_ms + DEADLINE_SLACK_MS;
            arm_at(ctx, p->hs_until);
            chan_peer_register(p);
        }
        pthread_mutex_unlock(&ctx->lock);
        work++;
    }
    chan_thread_ctx = NULL;
    return work;
}

/* An accepted peer still without HELLO at its deadline fails; the engine drops it. */
static void drop_if_silent(struct chan_peer *p)
{
    cx_rlock(&p->lock);
    if (!p->failed && !p->addr[0]) {
        p->failed = cx_err_set(ETIMEDOUT, "no hello within the handshake deadline (%d ms)",
                               cx_handshake_ms());
        fprintf(stderr, "conflux channel: dropped a connection before its hello: %s\n",
                cx_errmsg());
        pthread_mutex_lock(&p->ctx->lock);
        chan_kick(p->ctx); /* its arm now refuses to sleep: the next round drops it */
        pthread_mutex_unlock(&p->ctx->lock);
    }
    cx_runlock(&p->lock);
}

/* The timer fired: progress every accepted peer whose deadline passed, once. */
static int deadline_poll(void *arg, int budget)
{
    struct cx_chan_ctx *ctx = arg;
    (void)budget;
    uint64_t ticks;
    if (read(ctx->hs_tfd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
        return 0;
    long long now = chan_now_ms();
    pthread_mutex_lock(&ctx->lock);
    size_t n = 0;
    for (struct chan_peer *p = ctx->peers; p; p = p->next)
        n += p->hs_until && p->hs_until <= now;
    struct chan_peer **due = n ? malloc(n * sizeof *due) : NULL;
    long long next = 0;
    n = 0;
    for (struct chan_peer *p = ctx->peers; p; p = p->next) {
        if (!p->hs_until)
            continue;
        if (p->hs_until <= now && due) {
            due[n++] = p;
            p->hs_until = 0;
        } else if (!next || p->hs_until < next) {
            next = p->hs_until > now ? p->hs_until : now + 1; /* no memory: retry soon */
        }
    }
    ctx->hs_next = 0;
    if (next)
        arm_at(ctx, next);
    pthread_mutex_unlock(&ctx->lock);
    /* peers are freed only by the engine's rounds, which do not run meanwhile */
    for (size_t i = 0; i < n; i++) {
        chan_peer_poll(due[i], 1); /* logs a failure (the engine then drops the peer) */
        drop_if_silent(due[i]);
    }
    free(due);
    return (int)n + 1;
}

int chan_accept_setup(struct cx_chan_ctx *ctx)
{
    ctx->hs_tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ctx->hs_tfd < 0)
        return cx_err_set(errno, "channel runtime: timerfd: %s", strerror(errno));
    struct cx_engine_source s = {.name = "channel-handshakes", .poll = deadline_poll, .ctx = ctx,
                                 .fd = ctx->hs_tfd, .cost = 64};
    int rc = cx_engine_add(ctx->eng, &s);
    return rc < 0 ? rc : 0;
}
