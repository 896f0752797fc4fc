/* Channels and their membership. The creator's runtime (the contact) holds the list of
 * members and of the processes that opened the channel (watchers); every watcher keeps a
 * replica, updated by MEMBER_ADD / MEMBER_DEL from the contact. A source's runtime turns
 * each remote sink member into a delivery target (chan_dest) with its own link: events
 * then go straight from source to sink. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cx_chan *chan_find(struct cx_chan_ctx *ctx, const char *id)
{
    for (struct cx_chan *ch = ctx->chans; ch; ch = ch->next)
        if (strcmp(ch->id, id) == 0)
            return ch;
    return NULL;
}

static int format_registered(const struct cx_format *f, const char *what)
{
    if (f && cx_format_registry_lookup(cx_format_token(f)) != f)
        return cx_err_set(EINVAL, "%s format '%s' is not registered (cx_format_registry_insert)",
                          what, cx_format_name(f));
    return 0;
}

static struct cx_chan *chan_new(struct cx_chan_ctx *ctx)
{
    struct cx_chan *ch = calloc(1, sizeof *ch);
    if (!ch) {
        cx_err_set(ENOMEM, "channel: out of memory");
        return NULL;
    }
    ch->ctx = ctx;
    ch->refs = 1;
    ch->next = ctx->chans;
    ctx->chans = ch;
    return ch;
}

static void chan_unlink(struct cx_chan *ch)
{
    for (struct cx_chan **pp = &ch->ctx->chans; *pp; pp = &(*pp)->next)
        if (*pp == ch) {
            *pp = ch->next;
            return;
        }
}

int cx_embedded_chan_create(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out)
{
    struct cx_chan_opts d = {0};
    if (!o)
        o = &d;
    int rc = format_registered(o->format, "channel");
    if (rc < 0)
        return rc;
    if (o->mode != CX_CHAN_BEST_EFFORT && o->mode != CX_CHAN_RELIABLE)
        return cx_err_set(EINVAL, "channel: unknown delivery mode %d", (int)o->mode);
    if (o->queue_limit > CX_CHAN_QUEUE_MAX)
        return cx_err_set(EINVAL, "channel: queue limit %u exceeds %u", o->queue_limit,
                          CX_CHAN_QUEUE_MAX);
    pthread_mutex_lock(&ctx->lock);
    struct cx_chan *ch = chan_new(ctx);
    if (ch) {
        ch->is_contact = 1;
        ch->state = 1;
        ch->cnum = ctx->next_num++;
        snprintf(ch->contact, sizeof ch->contact, "%s", ctx->addr);
        snprintf(ch->id, sizeof ch->id, "cx1:%s/%" PRIu32, ctx->addr, ch->cnum);
        ch->fmt = o->format;
        ch->mode = o->mode;
        ch->qlimit = o->queue_limit ? o->queue_limit : CX_CHAN_QUEUE_DEFAULT;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (!ch)
        return -ENOMEM;
    *out = ch;
    return 0;
}

/* "cx1:<address>/<number>" */
static int parse_id(const char *id, char *contact, uint32_t *num)
{
    const char *slash = id ? strrchr(id, '/') : NULL;
    if (!id || strncmp(id, "cx1:", 4) != 0 || !slash || slash == id + 4 || !slash[1] ||
        strlen(id) >= CHAN_ID_MAX || (size_t)(slash - id - 4) >= CHAN_ADDR_MAX)
        return cx_err_set(EINVAL, "channel id '%s' is not cx1:<address>/<number>",
                          id ? id : "(null)");
    char *end;
    unsigned long n = strtoul(slash + 1, &end, 10);
    if (*end || n == 0 || n > UINT32_MAX)
        return cx_err_set(EINVAL, "channel id '%s': bad channel number", id);
    memcpy(contact, id + 4, (size_t)(slash - id - 4));
    contact[slash - id - 4] = 0;
    if (!cx_driver_for(contact))
        return cx_err_wrap(-EINVAL, "channel id '%s'", id);
    *num = (uint32_t)n;
    return 0;
}

static void chan_free(struct cx_chan *ch)
{
    while (ch->members) {
        struct chan_member *m = ch->members;
        ch->members = m->next;
        free(m->filter);
        free(m);
    }
    while (ch->dests) {
        struct chan_dest *d = ch->dests;
        ch->dests = d->next;
        chan_dest_free(d);
    }
    free(ch->watch);
    free(ch);
}

int cx_embedded_chan_open(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out)
{
    char contact[CHAN_ADDR_MAX];
    uint32_t num = 0;
    int rc = parse_id(id, contact, &num);
    if (rc < 0)
        return rc;
    long long deadline = timeout_ms < 0 ? -1 : chan_now_ms() + timeout_ms;
    pthread_mutex_lock(&ctx->lock);
    struct cx_chan *ch = chan_find(ctx, id);
    if (ch) { /* open here already (or being opened by another thread) */
        ch->refs++;
        while (ch->state == 0 && rc == 0)
            if (chan_wait(ctx, deadline) < 0)
                rc = cx_err_set(ETIMEDOUT, "channel %s: open timed out", id);
        if (rc == 0 && ch->state < 0)
            rc = cx_err_set(-ch->state, "channel %s: open failed", id);
        if (rc < 0 && --ch->refs == 0)
            chan_free(ch);
        pthread_mutex_unlock(&ctx->lock);
        if (rc == 0)
            *out = ch;
        return rc;
    }
    if (!(ch = chan_new(ctx))) {
        pthread_mutex_unlock(&ctx->lock);
        return -ENOMEM;
    }
    snprintf(ch->id, sizeof ch->id, "%s", id);
    snprintf(ch->contact, sizeof ch->contact, "%s", contact);
    ch->cnum = num;
    pthread_mutex_unlock(&ctx->lock);

    struct chan_ctrl m = {.op = CTRL_JOIN, .role = CHAN_WATCH, .chan = (char *)id,
                          .addr = ctx->addr};
    struct chan_req r;
    rc = chan_request(ctx, contact, &m, timeout_ms, &r);
    pthread_mutex_lock(&ctx->lock);
    if (rc == 0 && r.status < 0)
        rc = cx_err_set(-r.status, "%s", r.text);
    if (rc == 0 && r.token && !(ch->fmt = cx_format_registry_lookup(r.token)))
        rc = cx_err_set(EPROTO, "the contact did not describe the channel's format %016" PRIx64,
                        r.token);
    if (rc == 0) {
        ch->mode = r.mode ? CX_CHAN_RELIABLE : CX_CHAN_BEST_EFFORT;
        ch->qlimit = r.qlimit ? r.qlimit : CX_CHAN_QUEUE_DEFAULT;
        ch->state = 1;
    } else {
        rc = cx_err_wrap(rc, "open channel %s", id);
        ch->state = rc;
        chan_unlink(ch);
        if (--ch->refs == 0)
            chan_free(ch);
    }
    pthread_cond_broadcast(&ctx->cv);
    pthread_mutex_unlock(&ctx->lock);
    if (rc == 0)
        *out = ch;
    return rc;
}

const char *cx_embedded_chan_id(const struct cx_chan *ch) { return ch->id; }
const struct cx_format *cx_embedded_chan_format(const struct cx_chan *ch) { return ch->fmt; }
enum cx_chan_mode cx_embedded_chan_mode(const struct cx_chan *ch) { return ch->mode; }

/* ---- membership ---- */

static struct chan_member *member_find(struct cx_chan *ch, const char *addr, uint32_t tag)
{
    for (struct chan_member *m = ch->members; m; m = m->next)
        if (m->tag == tag && strcmp(m->addr, addr) == 0)
            return m;
    return NULL;
}

void chan_dest_free(struct chan_dest *d)
{
    if (d->ch)
        chan_route_off(d->ch); /* no fast submitter may still hold d */
    if (d->peer)
        d->peer->queued -= d->q.n;
    if (d->local)
        d->ch->ctx->local_pending -= d->q.n;
    chan_queue_free(&d->q);
    chan_derived_free(d);
    free(d->filter);
    free(d);
}

static int dest_add_remote(struct cx_chan *ch, const struct chan_member *m)
{
    struct chan_dest *d = calloc(1, sizeof *d);
    if (!d)
        return cx_err_set(ENOMEM, "channel: out of memory");
    d->ch = ch;
    snprintf(d->addr, sizeof d->addr, "%s", m->addr);
    d->tag = m->tag;
    d->proj_token = m->proj;
    if ((m->filter && !(d->filter = strdup(m->filter))) ||
        chan_queue_init(&d->q, ch->qlimit ? ch->qlimit : CX_CHAN_QUEUE_DEFAULT) < 0) {
        free(d->filter);
        free(d);
        return cx_err_set(ENOMEM, "channel: out of memory");
    }
    if (!(d->peer = chan_peer_find(ch->ctx, d->addr)) && ch->sources) {
        ch->ctx->need_connect = 1; /* only a process with a source needs a link to a sink */
        chan_kick(ch->ctx);
    }
    chan_route_off(ch); /* two targets now: the general path */
    d->next = ch->dests;
    ch->dests = d;
    return 0;
}

int chan_member_add(struct cx_chan *ch, const char *addr, uint32_t tag, uint32_t role,
                    const char *filter, uint64_t proj)
{
    if (role != CHAN_SOURCE && role != CHAN_SINK)
        return cx_err_set(EINVAL, "channel: member role %u", role);
    if (member_find(ch, addr, tag))
        return 0;
    struct chan_member *m = calloc(1, sizeof *m);
    if (!m || (filter && *filter && !(m->filter = strdup(filter)))) {
        free(m);
        return cx_err_set(ENOMEM, "channel: out of memory");
    }
    snprintf(m->addr, sizeof m->addr, "%s", addr);
    m->tag = tag;
    m->role = role;
    m->proj = proj;
    if (role == CHAN_SINK && strcmp(addr, ch->ctx->addr) != 0 && dest_add_remote(ch, m) < 0) {
        free(m->filter);
        free(m);
        return -ENOMEM;
    }
    m->next = ch->members;
    ch->members = m;
    if (role == CHAN_SOURCE)
        ch->st.sources++;
    else
        ch->st.sinks++;
    pthread_cond_broadcast(&ch->ctx->cv);
    return 0;
}

void chan_member_del(struct cx_chan *ch, const char *addr, uint32_t tag, int crashed)
{
    for (struct chan_member **pp = &ch->members; *pp; pp = &(*pp)->next) {
        struct chan_member *m = *pp;
        if (m->tag != tag || strcmp(m->addr, addr) != 0)
            continue;
        *pp = m->next;
        if (m->role == CHAN_SOURCE)
            ch->st.sources--;
        else
            ch->st.sinks--;
        if (crashed)
            ch->st.removed++;
        free(m->filter);
        free(m);
        break;
    }
    for (struct chan_dest **pp = &ch->dests; *pp; pp = &(*pp)->next) {
        struct chan_dest *d = *pp;
        if (d->local || d->tag != tag || strcmp(d->addr, addr) != 0)
            continue;
        *pp = d->next;
        chan_dest_free(d);
        break;
    }
    pthread_cond_broadcast(&ch->ctx->cv); /* a reliable source may wait on that queue */
}

static void post_member(struct chan_peer *p, struct cx_chan *ch, uint32_t op,
                        const struct chan_member *m)
{
    const struct cx_format *proj = m->proj && op == CTRL_MEMBER_ADD
                                       ? cx_format_registry_lookup(m->proj)
                                       : NULL;
    if (proj) /* relay a derived sink's projection ahead: its sources project from event 1 */
        chan_format_post(p, proj);
    struct chan_ctrl c = {.op = op, .role = m->role, .tag = m->tag, .token = m->proj,
                          .mode = ch->mode, .qlimit = ch->qlimit, .chan = ch->id,
                          .addr = (char *)m->addr, .filter = m->filter};
    chan_ctrl_post(p, &c);
}

/* Contact: tells every watcher but `except` about a member change. */
static void broadcast(struct cx_chan *ch, uint32_t op, const struct chan_member *m,
                      const char *except)
{
    for (size_t i = 0; i < ch->nwatch; i++) {
        if (except && strcmp(ch->watch[i], except) == 0)
            continue;
        struct chan_peer *p = chan_peer_find(ch->ctx, ch->watch[i]);
        if (p)
            post_member(p, ch, op, m);
    }
}

int chan_member_announce(struct cx_chan *ch, uint32_t tag, uint32_t role, const char *filter,
                         uint64_t proj)
{
    struct cx_chan_ctx *ctx = ch->ctx;
    pthread_mutex_lock(&ctx->lock);
    int rc = chan_member_add(ch, ctx->addr, tag, role, filter, proj);
    if (rc == 0 && ch->is_contact)
        broadcast(ch, CTRL_MEMBER_ADD, member_find(ch, ctx->addr, tag), NULL);
    pthread_mutex_unlock(&ctx->lock);
    if (rc < 0 || ch->is_contact)
        return rc;
    const struct cx_format *pf = proj ? cx_format_registry_lookup(proj) : NULL;
    struct chan_peer *cp;
    if (pf && chan_peer_get(ctx, ch->contact, &cp) == 0) { /* the contact relays it */
        pthread_mutex_lock(&ctx->lock);
        chan_format_post(cp, pf);
        pthread_mutex_unlock(&ctx->lock);
    }
    struct chan_ctrl m = {.op = CTRL_JOIN, .role = role, .tag = tag, .token = proj,
                          .chan = ch->id, .addr = ctx->addr, .filter = (char *)filter};
    struct chan_req r;
    rc = chan_request(ctx, ch->contact, &m, 10000, &r);
    if (rc == 0 && r.status < 0)
        rc = cx_err_set(-r.status, "%s", r.text);
    if (rc < 0) {
        pthread_mutex_lock(&ctx->lock);
        chan_member_del(ch, ctx->addr, tag, 0);
        pthread_mutex_unlock(&ctx->lock);
        return cx_err_wrap(rc, "channel %s: join", ch->id);
    }
    return 0;
}

void chan_member_leave(struct cx_chan *ch, uint32_t tag, uint32_t role)
{
    struct cx_chan_ctx *ctx = ch->ctx;
    struct chan_member *m = member_find(ch, ctx->addr, tag);
    if (!m)
        return;
    if (ch->is_contact) {
        broadcast(ch, CTRL_MEMBER_DEL, m, NULL);
    } else {
        struct chan_peer *p = chan_peer_find(ctx, ch->contact);
        struct chan_ctrl c = {.op = CTRL_LEAVE, .role = role, .tag = tag, .chan = ch->id,
                              .addr = ctx->addr};
        if (p)
            chan_ctrl_post(p, &c);
    }
    chan_member_del(ch, ctx->addr, tag, 0);
}

/* ---- the contact's side ---- */

static void reply(struct chan_peer *p, const struct chan_ctrl *req, int status,
                  const struct cx_chan *ch, const char *text)
{
    struct chan_ctrl c = {.op = CTRL_JOIN_REPLY, .status = status, .req = req->req,
                          .text = (char *)text};
    if (ch) {
        c.token = ch->fmt ? cx_format_token(ch->fmt) : 0;
        c.mode = ch->mode;
        c.qlimit = ch->qlimit;
    }
    chan_ctrl_post(p, &c);
}

static struct cx_chan *contact_chan(struct cx_chan_ctx *ctx, const char *id)
{
    struct cx_chan *ch = chan_find(ctx, id);
    return ch && ch->is_contact ? ch : NULL;
}

static void watch_add(struct cx_chan *ch, const char *addr)
{
    for (size_t i = 0; i < ch->nwatch; i++)
        if (strcmp(ch->watch[i], addr) == 0)
            return;
    if (ch->nwatch == ch->cwatch) {
        size_t nc = ch->cwatch ? 2 * ch->cwatch : 8;
        void *n = realloc(ch->watch, nc * sizeof *ch->watch);
        if (!n)
            return;
        ch->watch = n;
        ch->cwatch = nc;
    }
    snprintf(ch->watch[ch->nwatch++], CHAN_ADDR_MAX, "%s", addr);
}

static void watch_del(struct cx_chan *ch, const char *addr)
{
    for (size_t i = 0; i < ch->nwatch; i++)
        if (strcmp(ch->watch[i], addr) == 0) {
            memmove(ch->watch[i], ch->watch[ch->nwatch - 1], CHAN_ADDR_MAX);
            ch->nwatch--;
            return;
        }
}

void chan_contact_join(struct cx_chan_ctx *ctx, struct chan_peer *p, const struct chan_ctrl *m)
{
    struct cx_chan *ch = contact_chan(ctx, m->chan);
    char text[CHAN_ERR_MAX];
    if (!ch) {
        snprintf(text, sizeof text, "no channel %s at %s (closed, or never created)", m->chan,
                 ctx->addr);
        reply(p, m, -ENOENT, NULL, text);
        return;
    }
    if (m->role == CHAN_WATCH) {
        watch_add(ch, m->addr);
        if (ch->fmt)
            chan_format_post(p, ch->fmt);
        for (struct chan_member *x = ch->members; x; x = x->next)
            post_member(p, ch, CTRL_MEMBER_ADD, x);
        reply(p, m, 0, ch, "");
        return;
    }
    int rc = chan_member_add(ch, m->addr, m->tag, m->role, m->filter, m->token);
    if (rc < 0) {
        reply(p, m, rc, ch, cx_errmsg());
        return;
    }
    broadcast(ch, CTRL_MEMBER_ADD, member_find(ch, m->addr, m->tag), m->addr);
    reply(p, m, 0, ch, "");
}

void chan_contact_leave(struct cx_chan_ctx *ctx, struct chan_peer *p, const struct chan_ctrl *m)
{
    (void)p;
    struct cx_chan *ch = contact_chan(ctx, m->chan);
    if (!ch)
        return;
    if (m->role == CHAN_WATCH) {
        watch_del(ch, m->addr);
        return;
    }
    struct chan_member *x = member_find(ch, m->addr, m->tag);
    if (x) {
        broadcast(ch, CTRL_MEMBER_DEL, x, m->addr);
        chan_member_del(ch, m->addr, m->tag, 0);
    }
}

void chan_process_gone(struct cx_chan_ctx *ctx, const char *addr)
{
    for (struct cx_chan *ch = ctx->chans; ch; ch = ch->next) {
        if (ch->is_contact)
            watch_del(ch, addr);
        struct chan_member *x;
        do {
            for (x = ch->members; x && strcmp(x->addr, addr) != 0; x = x->next)
                ;
            if (x) {
                if (ch->is_contact)
                    broadcast(ch, CTRL_MEMBER_DEL, x, addr);
                chan_member_del(ch, addr, x->tag, 1);
            }
        } while (x);
        for (struct chan_dest **pp = &ch->dests; *pp;) { /* dests without a member entry */
            struct chan_dest *d = *pp;
            if (!d->local && strcmp(d->addr, addr) == 0) {
                *pp = d->next;
                chan_dest_free(d);
            } else {
                pp = &d->next;
            }
        }
    }
}

void chan_connect_done(struct cx_chan_ctx *ctx, const char *addr, int rc, struct chan_peer *p)
{
    if (rc < 0) {
        chan_process_gone(ctx, addr); /* unreachable: as good as dead for us */
    } else {
        for (struct cx_chan *ch = ctx->chans; ch; ch = ch->next)
            for (struct chan_dest *d = ch->dests; d; d = d->next)
                if (!d->local && !d->peer && strcmp(d->addr, addr) == 0) {
                    d->peer = p;
                    p->queued += d->q.n;
                }
        chan_kick(ctx);
    }
    pthread_cond_broadcast(&ctx->cv);
}

void chan_connect_pending(struct cx_chan_ctx *ctx)
{
    for (;;) {
        char addr[CHAN_ADDR_MAX] = "";
        pthread_mutex_lock(&ctx->lock);
        ctx->need_connect = 0;
        int fabric = ctx->fabric[0] != 0;
        if (fabric)
            chan_dialing(ctx, NULL); /* reap finished dials */
        for (struct cx_chan *ch = ctx->chans; ch && !addr[0]; ch = ch->next)
            for (struct chan_dest *d = ch->dests; d && ch->sources && !addr[0]; d = d->next)
                if (!d->local && !d->peer && !(fabric && chan_dialing(ctx, d->addr)))
                    snprintf(addr, sizeof addr, "%s", d->addr);
        if (addr[0] && fabric) { /* the dial may wait for a peer that dials us: not here */
            int rc = ctx->closing ? -ESHUTDOWN : chan_dial_start(ctx, addr);
            if (rc < 0)
                chan_connect_done(ctx, addr, rc, NULL);
            pthread_mutex_unlock(&ctx->lock);
            continue;
        }
        pthread_mutex_unlock(&ctx->lock);
        if (!addr[0])
            return;
        struct chan_peer *p = NULL;
        int rc = chan_peer_get(ctx, addr, &p); /* blocks for the connect (ctx unlocked) */
        pthread_mutex_lock(&ctx->lock);
        chan_connect_done(ctx, addr, rc, p);
        pthread_mutex_unlock(&ctx->lock);
    }
}

void cx_embedded_chan_close(struct cx_chan *ch)
{
    if (!ch)
        return;
    struct cx_chan_ctx *ctx = ch->ctx;
    pthread_mutex_lock(&ctx->lock);
    int lrc = 0;
    if (ch->refs == 1 && ch->sources && ch->mode == CX_CHAN_RELIABLE && !ctx->closing) {
        /* the last handle: its sources' events reach their sinks first (the runtime's
         * destroy lingered for every channel already) */
        pthread_mutex_unlock(&ctx->lock);
        lrc = chan_linger(ctx, ch);
        pthread_mutex_lock(&ctx->lock);
    }
    if (--ch->refs > 0) { /* opened again meanwhile */
        pthread_mutex_unlock(&ctx->lock);
        return;
    }
    while (ch->sources) {
        struct cx_chan_source *s = ch->sources;
        ch->sources = s->next;
        chan_member_leave(ch, s->tag, CHAN_SOURCE);
        free(s);
    }
    while (ch->sinks)
        chan_sink_detach(ch->sinks);
    if (!ch->is_contact) {
        struct chan_peer *p = chan_peer_find(ctx, ch->contact);
        struct chan_ctrl c = {.op = CTRL_LEAVE, .role = CHAN_WATCH, .chan = ch->id,
                              .addr = ctx->addr};
        if (p)
            chan_ctrl_post(p, &c);
    }
    chan_unlink(ch);
    chan_free(ch);
    pthread_cond_broadcast(&ctx->cv);
    pthread_mutex_unlock(&ctx->lock);
    if (lrc == 0)
        cx_err_clear(); /* the caller reads cx_errcode() after this void call (cx_chan.h) */
}

void cx_embedded_chan_stats(struct cx_chan *ch, struct cx_chan_stats *out)
{
    pthread_mutex_lock(&ch->ctx->lock);
    *out = ch->st;
    /* counted outside the lock by their single writers (cx_chan_int.h) */
    out->delivered = __atomic_load_n(&ch->st.delivered, __ATOMIC_RELAXED);
    out->delivered_fast = __atomic_load_n(&ch->st.delivered_fast, __ATOMIC_RELAXED);
    out->received_bytes = __atomic_load_n(&ch->st.received_bytes, __ATOMIC_RELAXED);
    uint64_t fsent = __atomic_load_n(&ch->fast_sent, __ATOMIC_RELAXED);
    out->sent_fast = fsent;
    out->sent += fsent;
    out->sent_shm += fsent; /* the fast path runs on shm links only */
    out->sent_bytes += __atomic_load_n(&ch->fast_bytes, __ATOMIC_RELAXED);
    out->submitted += __atomic_load_n(&ch->fast_submitted, __ATOMIC_RELAXED);
    out->queued = 0;
    for (struct chan_dest *d = ch->dests; d; d = d->next) {
        out->queued += d->q.n;
        if (d->peer && !d->peer->failed) {
            if (d->peer->shm)
                out->shm_sinks++;
            else
                out->net_sinks++;
            out->ucx_sinks += (uint32_t)d->peer->ucx;
        }
    }
    pthread_mutex_unlock(&ch->ctx->lock);
}

int cx_embedded_chan_wait_members(struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms)
{
    struct cx_chan_ctx *ctx = ch->ctx;
    long long deadline = timeout_ms < 0 ? -1 : chan_now_ms() + timeout_ms;
    int rc = 0;
    if (chan_on_progress_thread(ctx) && timeout_ms != 0)
        return cx_err_set(EDEADLK, "channel %s: cannot wait for members from a sink handler",
                          ch->id);
    pthread_mutex_lock(&ctx->lock);
    while (ch->st.sources < sources || ch->st.sinks < sinks)
        if (chan_wait(ctx, deadline) < 0) {
            rc = cx_err_set(ETIMEDOUT,
                            "channel %s: %u sources and %u sinks after %d ms (wanted %u, %u)",
                            ch->id, ch->st.sources, ch->st.sinks, timeout_ms, sources, sinks);
            break;
        }
    pthread_mutex_unlock(&ctx->lock);
    return rc;
}
