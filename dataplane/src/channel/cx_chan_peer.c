/* Peers: one link per other process, shared by every channel through a mux whose channel
 * ids are the receive endpoints' tags of this process. A peer is an engine source: its
 * poll binds new tags to mux channels, progresses the link, and sends what waits (control
 * frames, queued events). A broken link removes the process from every channel. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"
#include "format/cx_format_registry.h"
#include "stack/cx_stack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread struct chan_peer *chan_cur_peer;

struct chan_out {
    struct chan_out *next;
    struct cx_frame_hdr h;
    size_t len;
    uint8_t data[];
};

struct chan_peer *chan_peer_find(struct cx_chan_ctx *ctx, const char *addr)
{
    for (struct chan_peer *p = ctx->peers; p; p = p->next)
        if (!p->failed && p->addr[0] && strcmp(p->addr, addr) == 0)
            return p;
    return NULL;
}

int chan_peer_add(struct cx_chan_ctx *ctx, struct cx_link *raw, const char *addr,
                  struct chan_peer **out)
{
    struct chan_peer *p = calloc(1, sizeof *p);
    if (!p) {
        cx_link_close(raw);
        return cx_err_set(ENOMEM, "channel: out of memory for a peer");
    }
    p->kind = raw->ops->name; /* the driver's, before the stack hides it */
    /* what the driver's link lacks (reliability and fragmentation on a datagram driver
     * such as dpdk; the event numbers in the header's seq still arrive as sent); one
     * reliable link comes back as it is */
    int rc = cx_stack_assemble(&raw, 1, &raw);
    if (rc < 0) {
        cx_link_close(raw);
        free(p);
        return rc;
    }
    rc = cx_mux_create(raw, &p->mux);
    if (rc < 0) {
        cx_link_close(raw);
        free(p);
        return rc;
    }
    /* p->lock: a zeroed cx_rlock is free */
    p->ctx = ctx;
    p->shm = strcmp(p->kind, "shm") == 0;
    p->ucx = strcmp(p->kind, "ucx") == 0;
    p->link = cx_mux_link(p->mux);
    p->engine_id = -1;
    if (addr)
        snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->next = ctx->peers;
    ctx->peers = p;
    if (addr) { /* we dialed: introduce ourselves so the other side can reuse this link */
        struct chan_ctrl m = {.op = CTRL_HELLO, .addr = ctx->addr};
        chan_ctrl_post(p, &m);
    }
    chan_kick(ctx);
    *out = p;
    return 0;
}

int chan_peer_get(struct cx_chan_ctx *ctx, const char *addr, struct chan_peer **out)
{
    pthread_mutex_lock(&ctx->lock);
    struct chan_peer *p = chan_peer_find(ctx, addr);
    pthread_mutex_unlock(&ctx->lock);
    if (p) {
        *out = p;
        return 0;
    }
    if (strlen(addr) >= CHAN_ADDR_MAX)
        return cx_err_set(EINVAL, "channel: address '%.40s...' is too long", addr);
    struct cx_link *raw;
    int rc = chan_link_dial(ctx, addr, &raw);
    if (rc < 0)
        return cx_err_wrap(rc, "channel: cannot reach %s", addr);
    pthread_mutex_lock(&ctx->lock);
    if ((p = chan_peer_find(ctx, addr)))
        cx_link_close(raw); /* someone connected meanwhile; ours never said HELLO */
    else
        rc = chan_peer_add(ctx, raw, addr, &p);
    pthread_mutex_unlock(&ctx->lock);
    if (rc == 0)
        *out = p;
    return rc;
}

int chan_peer_post(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                   size_t len)
{
    struct chan_out *o = malloc(sizeof *o + len);
    if (!o)
        return cx_err_set(ENOMEM, "channel: out of memory for a control frame");
    o->next = NULL;
    o->h = *h;
    o->len = len;
    if (len)
        memcpy(o->data, payload, len);
    if (p->out_tail)
        p->out_tail->next = o;
    else
        p->out = o;
    p->out_tail = o;
    chan_kick(p->ctx);
    return 0;
}

void chan_peer_mark_failed(struct chan_peer *p, int rc)
{
    if (!p->failed)
        p->failed = rc < 0 ? rc : -EPIPE;
    chan_kick(p->ctx);
}

int chan_peer_pushed(struct chan_peer *p, uint64_t token)
{
    for (size_t i = 0; i < p->npushed; i++)
        if (p->pushed[i] == token)
            return 1;
    if (p->npushed == p->cpushed) {
        size_t nc = p->cpushed ? 2 * p->cpushed : 8;
        uint64_t *n = realloc(p->pushed, nc * sizeof *n);
        if (!n)
            return -ENOMEM;
        p->pushed = n;
        p->cpushed = nc;
    }
    p->pushed[p->npushed++] = token;
    return 0;
}

static int send_format(struct chan_peer *p, const struct cx_format *fmt)
{
    uint64_t token = cx_format_token(fmt);
    for (size_t i = 0; i < p->npushed; i++)
        if (p->pushed[i] == token)
            return 0;
    size_t len;
    const uint8_t *d = cx_format_describe(fmt, &len);
    struct cx_frame_hdr h = {.type = CX_FRAME_FORMAT, .flags = CX_FRAME_F_REPLY, .format = token};
    struct iovec v = {(void *)d, len};
    int rc = cx_link_send(p->link, &h, &v, 1);
    if (rc < 0)
        return rc;
    return chan_peer_pushed(p, token) < 0 ? cx_err_set(ENOMEM, "channel: out of memory") : 0;
}

int chan_peer_send_event_nokick(struct chan_peer *p, const struct cx_frame_hdr *h,
                                const struct cx_format *fmt, const struct iovec *iov, int iovcnt)
{
    if (p->failed)
        return cx_err_set(-p->failed, "channel: link to %s is broken", p->addr);
    int rc = fmt ? send_format(p, fmt) : 0;
    if (rc == 0)
        rc = cx_link_send(p->link, h, iov, iovcnt);
    if (rc == 0 && h->type == CX_FRAME_DATA)
        chan_count(&p->tx_events, 1);
    if (rc < 0 && !p->failed)
        p->failed = rc;
    return rc;
}

int chan_peer_send_event(struct chan_peer *p, const struct cx_frame_hdr *h,
                         const struct cx_format *fmt, const struct iovec *iov, int iovcnt)
{
    int rc = chan_peer_send_event_nokick(p, h, fmt, iov, iovcnt);
    if (rc < 0)
        chan_peer_mark_failed(p, rc); /* failed is set: this only kicks */
    return rc;
}

/* Binds every live receive endpoint of this process to a mux channel on this link (and
 * unbinds dead ones), so the mux hands each event straight to its endpoint. */
static void sync_mux(struct chan_peer *p)
{
    struct cx_chan_ctx *ctx = p->ctx;
    if (__atomic_load_n(&p->synced, __ATOMIC_ACQUIRE) == __atomic_load_n(&ctx->ep_gen, __ATOMIC_ACQUIRE))
        return; /* the common case, without the runtime lock (ep_gen moves under it) */
    pthread_mutex_lock(&ctx->lock);
    if (p->synced != ctx->ep_gen) {
        if (p->nmch < ctx->neps) {
            struct cx_link **n = realloc(p->mch, ctx->neps * sizeof *n);
            if (!n)
                goto out; /* unbound tags still reach chan_frame_recv */
            memset(n + p->nmch, 0, (ctx->neps - p->nmch) * sizeof *n);
            p->mch = n;
            p->nmch = ctx->neps;
        }
        for (size_t i = 0; i < ctx->neps; i++) {
            struct chan_ep *ep = ctx->eps[i];
            if (!ep->dead && !p->mch[i] && cx_mux_channel(p->mux, ep->tag, &p->mch[i]) == 0)
                cx_link_progress(p->mch[i], chan_ep_recv, ep, 0); /* sets its handler */
            else if (ep->dead && p->mch[i]) {
                cx_link_close(p->mch[i]);
                p->mch[i] = NULL;
            }
        }
        p->synced = ctx->ep_gen;
    }
out:
    pthread_mutex_unlock(&ctx->lock);
}

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    chan_frame_recv(arg, h, payload, len);
}

int chan_peer_flush(struct chan_peer *p)
{
    int work = 0;
    cx_rlock(&p->lock);
    /* Never wait for the runtime lock while holding the link: a submitter holding it would
     * find the link busy, queue its event and come back, and the two would take turns for
     * good (every event through the queue). A busy runtime lock means a submitter that
     * drains the queue itself (cx_chan_source.c); the next round looks again. */
    if (pthread_mutex_trylock(&p->ctx->lock) != 0) {
        cx_runlock(&p->lock);
        return 0;
    }
    while (p->out && !p->failed) {
        struct chan_out *o = p->out;
        int rc;
        if (o->h.type == CX_FRAME_FORMAT && (o->h.flags & CX_FRAME_F_REPLY) &&
            chan_peer_pushed(p, o->h.format) == 1) {
            rc = 0; /* this link already carried that description */
        } else {
            struct iovec v = {o->data, o->len};
            rc = cx_link_send(p->link, &o->h, &v, 1);
        }
        if (rc < 0) {
            chan_peer_mark_failed(p, rc);
            break;
        }
        if (!(p->out = o->next))
            p->out_tail = NULL;
        free(o);
        work++;
    }
    if (!p->failed)
        work += chan_drain_peer(p);
    pthread_mutex_unlock(&p->ctx->lock);
    cx_runlock(&p->lock);
    return work;
}

static int peer_poll(void *arg, int budget)
{
    struct chan_peer *p = arg;
    chan_thread_ctx = p->ctx;
    cx_rlock(&p->lock);
    int rc = p->failed;
    if (rc == 0) {
        sync_mux(p);
        chan_cur_peer = p;
        rc = cx_link_progress(p->link, on_frame, p, budget);
        chan_cur_peer = NULL;
        if (rc < 0) {
            p->failed = rc;
            /* a peer that dialed us and failed before its HELLO other than by leaving: a
             * handshake refused or not done by its deadline (tls and ucx name the peer) */
            if (p->accepted && !p->addr[0] && rc != -ECONNRESET && rc != -EPIPE)
                fprintf(stderr, "conflux channel: dropped a connection before its hello: %s\n",
                        cx_errmsg());
        }
        else if (__atomic_load_n(&p->out, __ATOMIC_ACQUIRE) ||
                 __atomic_load_n(&p->queued, __ATOMIC_ACQUIRE))
            rc += chan_peer_flush(p); /* a miss here is caught: who queues also kicks */
    }
    cx_runlock(&p->lock);
    chan_thread_ctx = NULL;
    return rc;
}

int chan_peer_poll(struct chan_peer *p, int budget) { return peer_poll(p, budget); }

static int peer_arm(void *arg)
{
    struct chan_peer *p = arg;
    if (cx_rtrylock(&p->lock) != 0)
        return -EAGAIN;
    pthread_mutex_lock(&p->ctx->lock);
    int rc = p->failed || p->out || p->queued ? -EAGAIN : cx_link_arm(p->link);
    pthread_mutex_unlock(&p->ctx->lock);
    cx_runlock(&p->lock);
    return rc;
}

/* The link broke (the engine disabled the source): the process is gone for us. */
static void peer_error(void *arg, int rc)
{
    struct chan_peer *p = arg;
    struct cx_chan_ctx *ctx = p->ctx;
    (void)rc;
    chan_thread_ctx = ctx;
    cx_rlock(&p->lock);
    pthread_mutex_lock(&ctx->lock);
    for (struct chan_peer **pp = &ctx->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    cx_engine_remove(ctx->eng, p->engine_id);
    for (struct chan_req *r = ctx->reqs; r; r = r->next)
        if (r->peer == p && !r->done) {
            r->done = 1;
            r->status = -ECONNRESET;
            snprintf(r->text, sizeof r->text, "link to %s broke", p->addr);
        }
    chan_forget_peer(ctx, p);
    chan_linger_bye(ctx, p);
    if (p->addr[0])
        chan_process_gone(ctx, p->addr);
    pthread_cond_broadcast(&ctx->cv);
    pthread_mutex_unlock(&ctx->lock);
    cx_runlock(&p->lock);
    chan_peer_free(p);
    chan_thread_ctx = NULL;
}

int chan_peer_register(struct chan_peer *p)
{
    struct cx_driver_caps c;
    cx_link_caps(p->link, &c);
    struct cx_engine_source s = {.name = "channel-peer", .poll = peer_poll, .arm = peer_arm,
                                 .on_error = peer_error, .ctx = p, .fd = cx_link_fd(p->link),
                                 .cost = c.poll_cost ? c.poll_cost : 1};
    int id = cx_engine_add(p->ctx->eng, &s);
    if (id < 0) {
        chan_peer_mark_failed(p, id); /* cannot progress it: treat it as gone */
        return id;
    }
    p->engine_id = id;
    return 0;
}

void chan_peer_free(struct chan_peer *p)
{
    for (size_t i = 0; i < p->nmch; i++)
        cx_link_close(p->mch[i]);
    free(p->mch);
    cx_link_close(p->link);
    while (p->out) {
        struct chan_out *o = p->out;
        p->out = o->next;
        free(o);
    }
    free(p->pushed);
    free(p);
}
