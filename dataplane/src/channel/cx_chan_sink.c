/* Sinks and receive endpoints. Remote events arrive on a mux tag bound to an endpoint and
 * are converted from the receive buffer (in place when the layouts agree) into the sink's
 * format; local events come through the dispatch queue (each local sink's bounded queue,
 * drained on the progress thread), as the very struct the source submitted when the source
 * gave it up (cx_chan_submit_owned) and the formats are the same. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILTER_MAX 4096
#define BATCH 32

struct chan_ep *chan_ep_new(struct cx_chan_ctx *ctx, struct cx_chan *ch, struct cx_chan_sink *sink)
{
    struct chan_ep *ep = calloc(1, sizeof *ep);
    if (!ep)
        return NULL;
    if (ctx->neps == ctx->ceps) {
        size_t nc = ctx->ceps ? 2 * ctx->ceps : 16;
        struct chan_ep **n = realloc(ctx->eps, nc * sizeof *n);
        if (!n) {
            free(ep);
            return NULL;
        }
        ctx->eps = n;
        ctx->ceps = nc;
    }
    ep->tag = ctx->next_num++;
    ep->ch = ch;
    ep->sink = sink;
    ctx->eps[ctx->neps++] = ep;
    ctx->ep_gen++;
    chan_kick(ctx); /* peers bind the new tag */
    return ep;
}

struct chan_ep *chan_ep_find(struct cx_chan_ctx *ctx, uint32_t tag)
{
    for (size_t i = 0; i < ctx->neps; i++)
        if (ctx->eps[i]->tag == tag && !ctx->eps[i]->dead)
            return ctx->eps[i];
    return NULL;
}

static void sink_free(struct cx_chan_sink *k)
{
    free(k->scratch);
    free(k->filter);
    free(k);
}

/* Fills ev->data in k's format for one event: the source's own struct (same format,
 * local), in place in the wire buffer (layouts agree) or in k's scratch. 0, 1 (k closed
 * meanwhile: skip it) or -errno with err filled. Progress thread, no lock held. */
static int sink_convert(struct cx_chan_sink *k, struct cx_chan_event *ev, void *native,
                        const char *from, char *err, size_t cap)
{
    if (__atomic_load_n(&k->dead, __ATOMIC_ACQUIRE))
        return 1; /* closed by an earlier handler of this batch */
    uint64_t token = ev->token;
    void *wire = (void *)ev->wire; /* the link's receive buffer: decode may patch it */
    size_t len = ev->wire_len;
    /* a registered format never goes away: the last one seen saves the registry's lock */
    if (k->last_token == token && k->last_fmt)
        ev->format = k->last_fmt;
    else if ((ev->format = cx_format_registry_lookup(token)))
        k->last_token = token, k->last_fmt = ev->format;
    if (!ev->format) {
        snprintf(err, cap, "event of unknown format %016" PRIx64 " from %s", token, from);
        return -ENOENT;
    }
    if (k->fmt && native && k->fmt == ev->format) {
        ev->data = native; /* the source's own struct: no copy, no conversion */
    } else if (k->fmt) {
        size_t need = 0;
        void *out;
        if (!k->scratch) { /* room for the fixed part: cx_decode then leaves the ring alone */
            size_t fs = (cx_format_size(k->fmt) + 7) & ~(size_t)7;
            if ((k->scratch = malloc(fs)))
                k->scap = fs;
        }
        /* decode first: into the scratch it already has (the fixed part of an event in the
         * sink's own format, its arrays left in place) or in place; only a scratch too
         * small costs the second pass that sizes it */
        int rc = cx_decode(k->fmt, token, wire, len, k->scratch, k->scap, &out);
        if (rc == -ENOBUFS && (rc = cx_decode_need(k->fmt, token, wire, len, &need)) == 0) {
            free(k->scratch);
            k->scap = 0;
            if (!(k->scratch = malloc(need)))
                rc = cx_err_set(ENOMEM, "no memory to convert a %zu-byte event", need);
            else
                k->scap = need;
            if (rc == 0)
                rc = cx_decode(k->fmt, token, wire, len, k->scratch, k->scap, &out);
        }
        if (rc < 0) {
            snprintf(err, cap, "%s", cx_errmsg());
            return rc;
        }
        ev->data = out;
    }
    return 0;
}

/* Calls k's handler for one event. Progress thread, no lock held. */
static int run_handler(struct cx_chan_sink *k, uint64_t token, void *wire, size_t len,
                       void *native, uint64_t seq, const char *from, char *err, size_t cap)
{
    struct cx_chan_event ev = {.token = token, .wire = wire, .wire_len = len, .seq = seq,
                               .from = from};
    int rc = sink_convert(k, &ev, native, from, err, cap);
    if (rc == 0)
        k->fn(k->arg, &ev);
    return rc;
}

/* After a handler ran (ctx lock held). */
static void sink_done(struct cx_chan_sink *k, int rc, const char *err)
{
    k->busy--;
    if (k->ch && rc == 0) /* in a round: see chan_count */
        chan_count(&k->ch->st.delivered, 1);
    if (k->ch && rc < 0) {
        k->ch->st.errors++;
        snprintf(k->err, sizeof k->err, "%s", err);
    }
    if (k->dead && !k->busy && !k->closer)
        sink_free(k); /* closed from a handler: nobody waits for it */
}

/* The endpoint whose solo sink's handler this thread runs (a closer from that handler
 * must not wait for itself). */
static __thread struct chan_ep *fast_ep;

void chan_ep_solo_update(struct cx_chan *ch, struct chan_ep *ep)
{
    struct cx_chan_sink *one = NULL;
    int n = 0;
    for (struct cx_chan_sink *k = ch->sinks; k && n < 2; k = k->next)
        if (k->ep == ep && !k->dead)
            one = k, n++;
    __atomic_store_n(&ep->solo, n == 1 && !ep->dead ? one : NULL, __ATOMIC_SEQ_CST);
}

/* The fast path: ep's only sink gets the event with no lock taken. 1 done, 0 take the
 * general path (no solo sink now). */
static int recv_solo(struct chan_ep *ep, struct chan_peer *p, const struct cx_frame_hdr *h,
                     const void *payload, size_t len)
{
    __atomic_add_fetch(&ep->active, 1, __ATOMIC_SEQ_CST);
    struct cx_chan_sink *k = __atomic_load_n(&ep->solo, __ATOMIC_SEQ_CST);
    if (!k) {
        __atomic_sub_fetch(&ep->active, 1, __ATOMIC_SEQ_CST);
        return 0;
    }
    /* k and its channel live until active drains (chan_sink_detach waits for it); a
     * handler that closes k or the channel frees them, so nothing of them is touched
     * after the handler returns */
    struct cx_chan *ch = ep->ch;
    struct cx_chan_event ev = {.token = h->format, .wire = (void *)payload, .wire_len = len,
                               .seq = h->seq, .from = p->addr};
    char err[CHAN_ERR_MAX];
    int rc = sink_convert(k, &ev, NULL, p->addr, err, sizeof err);
    chan_count(&ch->st.received_bytes, CX_FRAME_HDR_SIZE + len); /* in a round: one writer */
    chan_count(&p->rx_events, 1);
    if (rc == 0) {
        chan_count(&ch->st.delivered, 1);
        chan_count(&ch->st.delivered_fast, 1);
        struct chan_ep *outer = fast_ep;
        fast_ep = ep;
        k->fn(k->arg, &ev);
        fast_ep = outer;
    } else if (rc < 0) {
        pthread_mutex_lock(&p->ctx->lock);
        ch->st.errors++;
        snprintf(k->err, sizeof k->err, "%s", err);
        pthread_mutex_unlock(&p->ctx->lock);
    }
    __atomic_sub_fetch(&ep->active, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&ep->waiting, __ATOMIC_SEQ_CST)) { /* a closer waits for us */
        pthread_mutex_lock(&p->ctx->lock);
        pthread_cond_broadcast(&p->ctx->cv);
        pthread_mutex_unlock(&p->ctx->lock);
    }
    return 1;
}

/* Before k stops being ep's solo sink: no fast receiver may still hold it (ctx lock held;
 * waits with it released, as chan_wait does). */
static void solo_quiesce(struct cx_chan_ctx *ctx, struct chan_ep *ep, struct cx_chan_sink *k)
{
    if (__atomic_load_n(&ep->solo, __ATOMIC_SEQ_CST) != k)
        return;
    __atomic_store_n(&ep->solo, NULL, __ATOMIC_SEQ_CST);
    unsigned self = fast_ep == ep; /* k's own handler closes it: do not wait for ourselves */
    __atomic_add_fetch(&ep->waiting, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ep->active, __ATOMIC_SEQ_CST) > self)
        chan_wait(ctx, -1);
    __atomic_sub_fetch(&ep->waiting, 1, __ATOMIC_SEQ_CST);
}

void chan_ep_recv(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct chan_ep *ep = arg;
    struct chan_peer *p = chan_cur_peer;
    struct cx_chan_ctx *ctx = p->ctx;
    if (h->type != CX_FRAME_DATA)
        return;
    if (recv_solo(ep, p, h, payload, len))
        return;
    struct got {
        struct cx_chan_sink *k;
        int rc;
    } small[BATCH], *g = small;
    size_t n = 0, cnt = 0;
    pthread_mutex_lock(&ctx->lock);
    if (ep->dead) {
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    chan_count(&ep->ch->st.received_bytes, CX_FRAME_HDR_SIZE + len);
    for (struct cx_chan_sink *k = ep->ch->sinks; k; k = k->next)
        cnt++;
    if (cnt > BATCH && !(g = malloc(cnt * sizeof *g)))
        g = small, cnt = BATCH;
    for (struct cx_chan_sink *k = ep->ch->sinks; k && n < cnt; k = k->next)
        if (k->ep == ep && !k->dead) {
            k->busy++;
            g[n++].k = k;
        }
    pthread_mutex_unlock(&ctx->lock);
    if (n)
        chan_count(&p->rx_events, 1); /* peer lock held: one writer */
    char err[CHAN_ERR_MAX]; /* written and read only when a handler fails */
    err[0] = '\0';
    for (size_t i = 0; i < n; i++) /* the link's receive buffer: decode may patch it in place */
        g[i].rc = run_handler(g[i].k, h->format, (void *)payload, len, NULL, h->seq, p->addr,
                              err, sizeof err);
    pthread_mutex_lock(&ctx->lock);
    for (size_t i = 0; i < n; i++)
        sink_done(g[i].k, g[i].rc < 0 ? g[i].rc : 0, err);
    chan_wake_waiters(ctx); /* a closer waiting for busy, a reliable source for room */
    pthread_mutex_unlock(&ctx->lock);
    if (g != small)
        free(g);
}

int chan_dispatch_local(struct cx_chan_ctx *ctx, int budget)
{
    struct {
        struct cx_chan_sink *k;
        struct chan_ref *r;
        int rc;
        char err[128];
    } b[BATCH];
    int work = 0;
    pthread_mutex_lock(&ctx->lock);
    while (work < budget && ctx->local_pending) {
        int m = 0; /* one event per local sink per batch: fair between sinks */
        for (struct cx_chan *ch = ctx->chans; ch && m < BATCH; ch = ch->next)
            for (struct chan_dest *d = ch->dests; d && m < BATCH; d = d->next)
                if (d->local && d->q.n) {
                    b[m].r = chan_queue_pop(&d->q);
                    b[m].k = d->sink;
                    d->sink->busy++;
                    ctx->local_pending--;
                    m++;
                }
        if (!m) {
            ctx->local_pending = 0;
            break;
        }
        pthread_mutex_unlock(&ctx->lock);
        for (int i = 0; i < m; i++) {
            b[i].err[0] = 0;
            b[i].rc = run_handler(b[i].k, b[i].r->token, b[i].r->wire, b[i].r->len,
                                  b[i].r->native, b[i].r->seq, ctx->addr, b[i].err,
                                  sizeof b[i].err);
        }
        pthread_mutex_lock(&ctx->lock);
        for (int i = 0; i < m; i++) {
            sink_done(b[i].k, b[i].rc < 0 ? b[i].rc : 0, b[i].err);
            chan_ref_put(b[i].r);
        }
        chan_wake_waiters(ctx); /* room for reliable sources, a closer waiting for busy */
        work += m;
    }
    pthread_mutex_unlock(&ctx->lock);
    return work;
}

int cx_embedded_chan_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn,
                 void *arg, struct cx_chan_sink **out)
{
    struct cx_chan_sink_opts none = {0};
    if (!o)
        o = &none;
    int rc = 0;
    if (!fn)
        return cx_err_set(EINVAL, "channel %s: a sink needs a handler", ch->id);
    if (o->format && (rc = chan_check_native(o->format, "sink")) == 0 && ch->fmt &&
        (rc = chan_check_convert(ch->fmt, o->format)) < 0)
        rc = -EPROTO;
    if (rc == 0 && o->projection && (rc = chan_check_native(o->projection, "projection")) == 0) {
        if (ch->fmt && chan_check_convert(ch->fmt, o->projection) < 0)
            rc = -EPROTO;
        else if (o->format && chan_check_convert(o->projection, o->format) < 0)
            rc = -EPROTO;
    }
    if (rc == 0 && o->filter) {
        const struct cx_format *against = ch->fmt ? ch->fmt : o->format;
        if (strlen(o->filter) >= FILTER_MAX)
            rc = cx_err_set(EINVAL, "filter of %zu bytes (at most %d)", strlen(o->filter),
                            FILTER_MAX - 1);
        else if (against) /* else only the sources, knowing their formats, can check it */
            rc = chan_filter_check(o->filter, against, o->projection);
    }
    if (rc < 0)
        return cx_err_wrap(rc, "channel %s: sink", ch->id);

    struct cx_chan_ctx *ctx = ch->ctx;
    struct cx_chan_sink *k = calloc(1, sizeof *k);
    struct chan_dest *d = calloc(1, sizeof *d);
    if (!k || !d || (o->filter && !(k->filter = strdup(o->filter))) ||
        (o->filter && !(d->filter = strdup(o->filter)))) {
        rc = cx_err_set(ENOMEM, "channel: out of memory");
        goto fail;
    }
    k->fmt = o->format;
    k->proj = o->projection;
    k->fn = fn;
    k->arg = arg;
    pthread_mutex_lock(&ctx->lock);
    int announce;
    if ((rc = chan_queue_init(&d->q, ch->qlimit)) < 0)
        goto fail_locked;
    if (o->filter || o->projection) { /* a derived sink has its own endpoint and member */
        if (!(k->ep = chan_ep_new(ctx, ch, k)))
            goto oom_locked;
        announce = 1;
    } else {
        if (!ch->plain_ep && !(ch->plain_ep = chan_ep_new(ctx, ch, NULL)))
            goto oom_locked;
        k->ep = ch->plain_ep;
        announce = ch->nplain++ == 0;
    }
    k->ch = d->ch = ch;
    d->local = 1;
    d->sink = k;
    d->proj = o->projection; /* a program's computed fields reach a local sink too */
    d->proj_token = o->projection ? cx_format_token(o->projection) : 0;
    k->ldest = d;
    chan_route_off(ch); /* a local target now: the general path */
    d->next = ch->dests;
    ch->dests = d;
    k->next = ch->sinks;
    ch->sinks = k;
    chan_ep_solo_update(ch, k->ep);
    uint32_t tag = k->ep->tag;
    pthread_mutex_unlock(&ctx->lock);
    if (announce &&
        (rc = chan_member_announce(ch, tag, CHAN_SINK, o->filter,
                                   o->projection ? cx_format_token(o->projection) : 0)) < 0) {
        cx_embedded_chan_sink_close(k);
        return rc;
    }
    *out = k;
    return 0;
oom_locked:
    rc = cx_err_set(ENOMEM, "channel: out of memory");
fail_locked:
    pthread_mutex_unlock(&ctx->lock);
fail:
    if (d) {
        chan_queue_free(&d->q);
        free(d->filter);
    }
    free(d);
    if (k)
        sink_free(k);
    return rc;
}

void chan_sink_detach(struct cx_chan_sink *k)
{
    struct cx_chan *ch = k->ch;
    struct cx_chan_ctx *ctx = ch->ctx;
    solo_quiesce(ctx, k->ep, k);
    for (struct cx_chan_sink **pp = &ch->sinks; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    for (struct chan_dest **pp = &ch->dests; *pp; pp = &(*pp)->next)
        if (*pp == k->ldest) {
            *pp = k->ldest->next;
            chan_dest_free(k->ldest);
            break;
        }
    int last = k->ep != ch->plain_ep || --ch->nplain == 0;
    if (last) {
        chan_member_leave(ch, k->ep->tag, CHAN_SINK);
        k->ep->dead = 1;
        ctx->ep_gen++;
        if (k->ep == ch->plain_ep)
            ch->plain_ep = NULL;
        chan_kick(ctx);
    }
    __atomic_store_n(&k->dead, 1, __ATOMIC_RELEASE);
    chan_ep_solo_update(ch, k->ep); /* the one sink left on its endpoint, if one is */
    k->ch = NULL;
    if (k->busy && !chan_on_progress_thread(ctx)) {
        k->closer = 1; /* wait for the handler running on the progress thread */
        while (k->busy)
            chan_wait(ctx, -1);
    }
    if (!k->busy)
        sink_free(k);
}

void cx_embedded_chan_sink_close(struct cx_chan_sink *k)
{
    if (!k)
        return;
    struct cx_chan_ctx *ctx = k->ch ? k->ch->ctx : NULL;
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx->lock);
    chan_sink_detach(k);
    pthread_mutex_unlock(&ctx->lock);
}

size_t cx_embedded_chan_sink_error(struct cx_chan_sink *k, char *out, size_t cap)
{
    struct cx_chan_ctx *ctx = k->ch ? k->ch->ctx : NULL;
    if (ctx)
        pthread_mutex_lock(&ctx->lock); /* the progress thread writes it */
    size_t n = strlen(k->err);
    if (cap)
        snprintf(out, cap, "%s", k->err);
    if (ctx)
        pthread_mutex_unlock(&ctx->lock);
    return n;
}
