/* The linger of a reliable source at shutdown: its events must not die in this process's
 * queues (or on a link this process is about to close) when it closes the source or the
 * runtime right after its last submit. Closing waits until the sinks' queues have left
 * and each remote sink's process answered a CTRL_SYNC sent behind them on the same link:
 * a link carries frames in order and a sink's handlers run as its frames are read, so the
 * answer means every earlier event was handed to the sink. A sink's process that dies
 * ends its wait at once (its link breaks, the request fails); the linger bounds the rest.
 * A sink that leaves meanwhile counts as delivered when its process said (in that answer,
 * or in the CTRL_BYE of a runtime going away) that its sinks got as many DATA frames from
 * the link as this process sent on it. What was not confirmed is reported: cx_errmsg()
 * and a line on stderr per sink. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_env.h"
#include "common/cx_error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int chan_linger_ms(const struct cx_chan_ctx_opts *o)
{
    if (o && o->linger_ms)
        return o->linger_ms;
    const char *env = getenv("CONFLUX_CHAN_LINGER_MS");
    if (env && env[strspn(env, " ")] == '-')
        return -1; /* negative: no wait */
    uint64_t ms = cx_env_u64("CONFLUX_CHAN_LINGER_MS", CX_CHAN_LINGER_DEFAULT_MS, 0, 3600000);
    return ms ? (int)ms : -1;
}

void chan_linger_bye(struct cx_chan_ctx *ctx, const struct chan_peer *p)
{
    if (!p->said_bye || !p->addr[0])
        return;
    struct chan_bye *b = &ctx->byes[ctx->nbyes++ % CHAN_BYES];
    snprintf(b->addr, sizeof b->addr, "%s", p->addr);
    b->rx = p->bye_rx;
    b->tx = __atomic_load_n(&p->tx_events, __ATOMIC_RELAXED);
}

void chan_linger_say_bye(struct cx_chan_ctx *ctx)
{
    for (struct chan_peer *p = ctx->peers; p; p = p->next)
        if (!p->failed) {
            struct chan_ctrl m = {.op = CTRL_BYE,
                                  .token = __atomic_load_n(&p->rx_events, __ATOMIC_RELAXED)};
            chan_ctrl_post(p, &m);
        }
}

/* Whether the process at addr said, before its link broke, that its sinks got every event
 * this process sent it (ctx lock held). */
static int bye_covers(struct cx_chan_ctx *ctx, const char *addr)
{
    unsigned n = ctx->nbyes < CHAN_BYES ? ctx->nbyes : CHAN_BYES;
    for (unsigned i = 0; i < n; i++) { /* newest first */
        const struct chan_bye *b = &ctx->byes[(ctx->nbyes - 1 - i) % CHAN_BYES];
        if (strcmp(b->addr, addr) == 0)
            return b->rx == b->tx;
    }
    return 0;
}

/* A sink the lingering sources deliver to (re-found by identity each round: its dest may
 * go away meanwhile, with its process). */
struct target {
    struct cx_chan *ch;
    struct cx_chan_sink *sink; /* a local sink; NULL: remote, addr and tag */
    char addr[CHAN_ADDR_MAX];
    uint32_t tag;
    size_t queued;             /* as last seen */
    uint64_t sent;
    int gone;
    int idle;                  /* remote: nothing ever sent or queued: nothing to confirm */
    int confirmed;             /* remote: its process answered the sync while it was a member */
    size_t sync;               /* remote: its process's entry */
};

/* One remote process: its CTRL_SYNC request. */
enum { SYNC_WAIT = 0, SYNC_ASKED = 1, SYNC_DONE = 2 }; /* or < 0: the link broke */
struct sync {
    char addr[CHAN_ADDR_MAX];
    struct chan_req *r;
    int state;
    int need, live, ready;     /* targets with something to confirm; members still; queues empty */
    struct chan_peer *peer;
};

struct linger {
    struct target *t;
    size_t nt, ct;
    struct sync *s;
    size_t ns, cs;
};

/* A sink that left (or whose process ended) after its process said its sinks got every
 * event this process had sent on the link: in the sync's answer, or its CTRL_BYE. */
static int left_with_all(struct cx_chan_ctx *ctx, const struct target *t, const struct sync *g)
{
    if (!t->gone || t->queued)
        return 0; /* what was still queued went with the target */
    if (g->state == SYNC_DONE && g->r->sync_rx == g->r->sync_tx)
        return 1;
    return bye_covers(ctx, t->addr);
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 8;
    void *q = realloc(*p, nc * size);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

static int chan_live(struct cx_chan_ctx *ctx, const struct cx_chan *ch)
{
    for (struct cx_chan *c = ctx->chans; c; c = c->next)
        if (c == ch)
            return 1;
    return 0;
}

static struct chan_dest *find_dest(struct cx_chan_ctx *ctx, const struct target *t)
{
    if (!chan_live(ctx, t->ch))
        return NULL;
    for (struct chan_dest *d = t->ch->dests; d; d = d->next)
        if (t->sink ? d->local && d->sink == t->sink
                    : !d->local && d->tag == t->tag && strcmp(d->addr, t->addr) == 0)
            return d;
    return NULL;
}

/* Every sink of ch's sources (ctx lock held). */
static int collect(struct linger *L, struct cx_chan *ch)
{
    if (ch->mode != CX_CHAN_RELIABLE || !ch->sources)
        return 0;
    for (struct chan_dest *d = ch->dests; d; d = d->next) {
        if (grow((void **)&L->t, &L->ct, L->nt, sizeof *L->t) < 0)
            return -ENOMEM;
        struct target *t = &L->t[L->nt++];
        *t = (struct target){.ch = ch, .sink = d->local ? d->sink : NULL,
                             .tag = d->local ? d->sink->ep->tag : d->tag};
        snprintf(t->addr, sizeof t->addr, "%s", d->local ? ch->ctx->addr : d->addr);
        if (d->local)
            continue;
        for (t->sync = 0; t->sync < L->ns && strcmp(L->s[t->sync].addr, d->addr); t->sync++)
            ;
        if (t->sync == L->ns) {
            if (grow((void **)&L->s, &L->cs, L->ns, sizeof *L->s) < 0)
                return -ENOMEM;
            L->s[L->ns] = (struct sync){.state = SYNC_WAIT};
            snprintf(L->s[L->ns++].addr, CHAN_ADDR_MAX, "%s", d->addr);
        }
    }
    return 0;
}

/* Asks p to answer once it handled what came before (ctx lock held). */
static int ask(struct cx_chan_ctx *ctx, struct sync *g)
{
    struct chan_req *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->id = ++ctx->next_req;
    r->peer = g->peer; /* its failure ends the wait (cx_chan_peer.c, peer_error) */
    r->sync_tx = __atomic_load_n(&g->peer->tx_events, __ATOMIC_RELAXED);
    r->next = ctx->reqs;
    ctx->reqs = r;
    g->r = r;
    struct chan_ctrl m = {.op = CTRL_SYNC, .req = r->id};
    return chan_ctrl_post(g->peer, &m);
}

/* One look at every target (ctx lock held): sends the syncs that may go. 1 when nothing
 * is left to wait for. */
static int round_(struct cx_chan_ctx *ctx, struct linger *L)
{
    int settled = 1;
    for (size_t i = 0; i < L->ns; i++) {
        L->s[i].need = L->s[i].live = 0;
        L->s[i].ready = 1;
        L->s[i].peer = NULL;
    }
    for (size_t i = 0; i < L->nt; i++) {
        struct target *t = &L->t[i];
        struct chan_dest *d = t->gone ? NULL : find_dest(ctx, t);
        if (!d) {
            /* left or died: its process (if still linked) says how much of ours it got */
            t->gone = 1;
            if (!t->sink && !t->idle && !t->queued && !t->confirmed)
                L->s[t->sync].need = 1;
            continue;
        }
        t->queued = d->q.n;
        t->sent = __atomic_load_n(&d->sent, __ATOMIC_RELAXED);
        if (t->sink) {
            settled &= !d->q.n;
            continue;
        }
        if ((t->idle = !d->q.n && !t->sent)) /* a stuck sink that got nothing holds no one */
            continue;
        struct sync *g = &L->s[t->sync];
        g->need = g->live = 1;
        if (d->q.n || !d->peer || d->peer->failed)
            g->ready = 0; /* the sync goes behind every queued event */
        else
            g->peer = d->peer;
    }
    for (size_t i = 0; i < L->ns; i++) {
        struct sync *g = &L->s[i];
        if (g->state == SYNC_ASKED && g->r->done)
            g->state = g->r->status < 0 ? g->r->status : SYNC_DONE;
        if (g->state == SYNC_WAIT && g->need && !g->live) /* only gone members: any link */
            if (!(g->peer = chan_peer_find(ctx, g->addr)))
                g->state = -ECONNRESET; /* no link: its process is gone */
        if (g->state == SYNC_WAIT && g->need && g->ready && g->peer)
            g->state = ask(ctx, g) == 0 ? SYNC_ASKED : -ENOMEM;
        if (g->need && (g->state == SYNC_WAIT || g->state == SYNC_ASKED))
            settled = 0;
    }
    for (size_t i = 0; i < L->nt; i++) /* answered while still members */
        if (!L->t[i].sink && !L->t[i].gone && L->s[L->t[i].sync].state == SYNC_DONE)
            L->t[i].confirmed = 1;
    return settled;
}

/* The report of what was not delivered (ctx lock held). 0 or -errno with the message. */
static int report(struct cx_chan_ctx *ctx, struct linger *L, int ms)
{
    uint64_t never = 0, unconfirmed = 0;
    size_t sinks = 0;
    int timed_out = 0;
    char first[640] = "";
    for (size_t i = 0; i < L->nt; i++) {
        struct target *t = &L->t[i];
        const struct sync *g = t->sink ? NULL : &L->s[t->sync];
        if (t->sink ? !t->queued : t->idle || t->confirmed || left_with_all(ctx, t, g))
            continue;
        uint64_t sent = t->sink ? 0 : t->sent;
        const char *why = t->sink ? "not handled yet"
                          : g->state < 0 || t->gone ? "the sink or its process is gone"
                                                    : "no confirmation within the linger";
        timed_out |= !t->gone && (t->sink || g->state >= 0);
        char line[640];
        snprintf(line, sizeof line,
                 "sink %s/%" PRIu32 " of %s: %zu queued events never sent, %" PRIu64
                 " sent events not confirmed (%s)",
                 t->addr, t->tag,
                 chan_live(ctx, t->ch) ? t->ch->id : "a closed channel", t->queued, sent, why);
        fprintf(stderr, "conflux channel %s: linger of %d ms: not delivered: %s\n", ctx->addr,
                ms, line);
        if (!sinks++)
            snprintf(first, sizeof first, "%s", line);
        never += t->queued;
        unconfirmed += sent;
    }
    if (!sinks)
        return 0;
    return cx_err_set(timed_out ? ETIMEDOUT : ECONNRESET,
                      "channel runtime %s: events not delivered to %zu sinks (%" PRIu64
                      " never sent, %" PRIu64 " unconfirmed); %s",
                      ctx->addr, sinks, never, unconfirmed, first);
}

int chan_linger(struct cx_chan_ctx *ctx, struct cx_chan *only)
{
    if (ctx->linger_ms <= 0 || chan_on_progress_thread(ctx))
        return 0;
    struct linger L = {0};
    int rc = 0;
    pthread_mutex_lock(&ctx->lock);
    for (struct cx_chan *ch = ctx->chans; ch && rc == 0; ch = ch->next)
        if (!only || ch == only)
            rc = collect(&L, ch);
    if (rc == 0 && L.nt) {
        long long deadline = chan_now_ms() + ctx->linger_ms;
        while (!round_(ctx, &L)) {
            long long now = chan_now_ms();
            if (now >= deadline)
                break;
            chan_kick(ctx);
            chan_wait(ctx, now + 10 < deadline ? now + 10 : deadline);
        }
        rc = report(ctx, &L, ctx->linger_ms);
    } else if (rc < 0) {
        rc = cx_err_set(ENOMEM, "channel runtime %s: out of memory for the linger", ctx->addr);
    }
    for (size_t i = 0; i < L.ns; i++) {
        if (!L.s[i].r)
            continue;
        for (struct chan_req **pp = &ctx->reqs; *pp; pp = &(*pp)->next)
            if (*pp == L.s[i].r) {
                *pp = L.s[i].r->next;
                break;
            }
        free(L.s[i].r);
    }
    pthread_mutex_unlock(&ctx->lock);
    free(L.t);
    free(L.s);
    return rc;
}
