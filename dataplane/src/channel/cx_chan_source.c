/* Sources: submit sends each event straight to every sink of the channel. For a remote
 * sink the event leaves at once, from the caller's memory, when its queue is empty and the
 * link is free and not backed up; otherwise a reference to one shared copy waits in the
 * sink's bounded queue and the progress thread sends it when the link drains. The queue
 * bound is the delivery mode: best-effort drops the oldest, reliable refuses or waits. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* Whether events of `from` convert to `to`: a real encode and decode of an all-zero event,
 * so the answer (and the error naming the field) is the one the sink would get. */
int chan_check_convert(const struct cx_format *from, const struct cx_format *to)
{
    void *zero = calloc(1, cx_format_size(from) + 8);
    struct cx_enc enc;
    uint8_t *wire = NULL, *out = NULL;
    size_t need = 0;
    int rc = zero ? cx_encode(from, zero, &enc) : cx_err_set(ENOMEM, "out of memory");
    if (rc == 0 && !(wire = malloc(enc.length + 8)))
        rc = cx_err_set(ENOMEM, "out of memory");
    if (rc == 0) {
        long n = cx_enc_gather(&enc, wire, enc.length + 8);
        void *ev;
        if ((rc = n < 0 ? (int)n : cx_decode_need(to, enc.token, wire, (size_t)n, &need)) == 0 &&
            (!need || (out = malloc(need))))
            rc = cx_decode(to, enc.token, wire, (size_t)n, out, need, &ev);
        else if (rc == 0)
            rc = cx_err_set(ENOMEM, "out of memory");
    }
    free(zero);
    free(wire);
    free(out);
    if (rc < 0)
        return cx_err_wrap(rc, "format '%s' does not convert to '%s'", cx_format_name(from),
                           cx_format_name(to));
    return 0;
}

int chan_check_native(const struct cx_format *f, const char *what)
{
    struct cx_arch a;
    cx_arch_native(&a);
    if (cx_format_registry_lookup(cx_format_token(f)) != f)
        return cx_err_set(EINVAL, "%s format '%s' is not registered (cx_format_registry_insert)",
                          what, cx_format_name(f));
    if (memcmp(&a, cx_format_arch(f), sizeof a) != 0)
        return cx_err_set(EINVAL, "%s format '%s' does not describe this machine", what,
                          cx_format_name(f));
    return 0;
}

int cx_embedded_chan_source(struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out)
{
    if (!fmt)
        return cx_err_set(EINVAL, "channel %s: a source needs a format", ch->id);
    int rc = chan_check_native(fmt, "source");
    if (rc == 0 && ch->fmt)
        rc = chan_check_convert(fmt, ch->fmt);
    if (rc < 0)
        return cx_err_wrap(rc == -EINVAL ? rc : -EPROTO, "channel %s: source", ch->id);
    struct cx_chan_source *s = calloc(1, sizeof *s);
    if (!s)
        return cx_err_set(ENOMEM, "channel: out of memory");
    struct cx_chan_ctx *ctx = ch->ctx;
    pthread_mutex_lock(&ctx->lock);
    s->ch = ch;
    s->fmt = fmt;
    s->token = cx_format_token(fmt);
    s->tag = ctx->next_num++;
    s->next = ch->sources;
    ch->sources = s;
    ctx->need_connect = 1; /* the sinks known so far need links now */
    chan_kick(ctx);
    pthread_mutex_unlock(&ctx->lock);
    if ((rc = chan_member_announce(ch, s->tag, CHAN_SOURCE, NULL, 0)) < 0) {
        cx_embedded_chan_source_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void cx_embedded_chan_source_close(struct cx_chan_source *s)
{
    if (!s)
        return;
    struct cx_chan *ch = s->ch;
    /* still a source while it lingers: its sinks without a link yet get one */
    int rc = ch->mode == CX_CHAN_RELIABLE ? chan_linger(ch->ctx, ch) : 0;
    pthread_mutex_lock(&ch->ctx->lock);
    for (struct cx_chan_source **pp = &ch->sources; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    chan_member_leave(ch, s->tag, CHAN_SOURCE);
    pthread_mutex_unlock(&ch->ctx->lock);
    free(s);
    if (rc == 0)
        cx_err_clear(); /* the caller reads cx_errcode() after this void call (cx_chan.h) */
}

/* Queues r on d (the caller's count moves to the queue). */
static void enqueue(struct chan_dest *d, struct chan_ref *r)
{
    struct cx_chan_ctx *ctx = d->ch->ctx;
    struct chan_ref *old = chan_queue_push(&d->q, r);
    if (old) { /* best-effort and full (reliable never pushes onto a full queue) */
        d->ch->st.dropped++;
        chan_ref_put(old);
        return;
    }
    if (d->local)
        ctx->local_pending++;
    else if (d->peer)
        d->peer->queued++;
    chan_kick(ctx);
}

static void count_sent(struct chan_dest *d, const struct chan_peer *p, size_t len)
{
    struct cx_chan *ch = d->ch;
    chan_count(&d->sent, 1); /* read by a lingering close without the peer lock */
    ch->st.sent++;
    ch->st.sent_shm += (uint64_t)p->shm;
    ch->st.sent_ucx += (uint64_t)p->ucx;
    ch->st.sent_bytes += CX_FRAME_HDR_SIZE + len;
}

/* Sends a queued event (peer lock and ctx lock held). */
static void send_ref(struct chan_peer *p, struct chan_dest *d, struct chan_ref *r)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = d->tag, .seq = r->seq,
                             .format = r->token};
    struct cx_enc enc;
    struct iovec v = {r->wire, r->len};
    const struct iovec *iov = &v;
    int n = 1;
    size_t len = r->len;
    if (!r->wire) { /* an owned event: encoded now, still no copy */
        if (cx_encode(r->fmt, r->native, &enc) < 0)
            return;
        iov = enc.iov, n = enc.iovcnt, len = enc.length;
    }
    if (chan_peer_send_event(p, &h, r->fmt, iov, n) == 0)
        count_sent(d, p, len);
}

int chan_drain_peer(struct chan_peer *p)
{
    struct cx_chan_ctx *ctx = p->ctx;
    int work = 0, more = 1;
    while (more && p->queued && !p->failed && cx_link_pending(p->link) < CHAN_LINK_HIGH) {
        more = 0; /* one event per sink per pass: sinks share the link fairly */
        for (struct cx_chan *ch = ctx->chans; ch; ch = ch->next)
            for (struct chan_dest *d = ch->dests; d; d = d->next) {
                if (d->peer != p || !d->q.n || cx_link_pending(p->link) >= CHAN_LINK_HIGH)
                    continue;
                struct chan_ref *r = chan_queue_pop(&d->q);
                p->queued--;
                send_ref(p, d, r);
                chan_ref_put(r);
                work++;
                more = 1;
            }
    }
    if (work)
        chan_wake_waiters(ctx); /* room for reliable sources */
    return work;
}

void chan_route_off(struct cx_chan *ch)
{
    if (!__atomic_load_n(&ch->route, __ATOMIC_SEQ_CST))
        return; /* whoever stored NULL last waited already, and nobody set it since */
    __atomic_store_n(&ch->route, NULL, __ATOMIC_SEQ_CST);
    for (unsigned spins = 0; __atomic_load_n(&ch->route_active, __ATOMIC_SEQ_CST); spins++) {
        if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield(); /* a fast submitter lost its core inside: let it finish */
        }
    }
}

/* After a slow submit (ctx lock held): the fast path goes on when the channel delivers to
 * exactly one remote sink, unfiltered and unprojected, over a working shm link, and nothing
 * waits in its queue (so a direct send keeps the source's order). */
static void route_update(struct cx_chan *ch)
{
    struct chan_dest *d = ch->dests;
    if (d && !d->next && !d->local && !d->filter && !d->proj_token && d->peer &&
        d->peer->shm && !d->peer->failed && !d->q.n)
        __atomic_store_n(&ch->route, d, __ATOMIC_SEQ_CST);
}

void chan_forget_peer(struct cx_chan_ctx *ctx, struct chan_peer *p)
{
    for (struct cx_chan *ch = ctx->chans; ch; ch = ch->next)
        for (struct chan_dest *d = ch->dests; d; d = d->next)
            if (d->peer == p) {
                chan_route_off(ch);
                d->peer = NULL;
                ctx->need_connect = 1;
            }
}

/* What one submit carries: the event encoded in place and, made only when needed, the
 * shared reference (with a wire copy, or the owned event). */
struct sub {
    struct cx_chan_source *s;
    struct cx_enc enc;
    void *owned;
    void (*release)(void *, void *);
    void *rarg;
    struct chan_ref *ref;
    uint64_t seq;
};

static struct chan_ref *sub_ref(struct sub *u, int wire)
{
    if (!u->ref) {
        if (!(u->ref = chan_ref_new(u->s->fmt, u->seq)))
            return NULL;
        if (u->owned) {
            u->ref->native = u->owned;
            u->ref->release = u->release;
            u->ref->rarg = u->rarg;
            u->owned = NULL; /* the ref releases it now */
        }
    }
    if ((wire || !u->ref->native) && chan_ref_gather(u->ref, &u->enc) < 0)
        return NULL;
    return u->ref;
}

/* Runs d's filter: 1 send, 0 filtered out. A filter that fails counts as filtered. */
static int dest_wants(struct sub *u, struct chan_dest *d)
{
    if (!d->filter)
        return 1;
    struct chan_ref *r = sub_ref(u, 1);
    if (!r)
        return 1; /* cannot evaluate without memory: deliver rather than lose */
    return chan_filter_run(d, u->s->fmt, r->wire, r->len, u->s, u->seq) == 1;
}

static void deliver_local(struct sub *u, struct chan_dest *d)
{
    const struct cx_format *want = d->sink->fmt;
    int wire = !want || want != u->s->fmt; /* typed, same format: the struct itself */
    struct chan_ref *r = sub_ref(u, wire || d->proj_token), *pr;
    if (r && d->proj_token && r->wire &&
        (pr = chan_project_ref(d, u->s->token, u->seq, r->wire, r->len))) {
        enqueue(d, pr); /* the fields a program computed */
        return;
    }
    if (r)
        enqueue(d, chan_ref_get(r));
}

static void deliver_remote(struct sub *u, struct chan_dest *d)
{
    struct cx_chan *ch = d->ch;
    const struct cx_enc *e = &u->enc;
    const struct cx_format *fmt = u->s->fmt;
    struct cx_enc pe;
    if (d->proj_token && !d->proj) {
        d->proj = cx_format_registry_lookup(d->proj_token);
        if (!d->proj && !d->proj_asked && d->peer) { /* fetch it from the sink */
            struct cx_frame_hdr h = {.type = CX_FRAME_FORMAT, .format = d->proj_token};
            d->proj_asked = chan_peer_post(d->peer, &h, NULL, 0) == 0;
        }
    }
    if (d->proj) { /* until the projection is known the whole event goes: still correct */
        struct chan_ref *r = sub_ref(u, 1);
        if (r && chan_project(d, u->s->token, r->wire, r->len, &pe) == 0) {
            ch->st.projected_bytes_saved += e->length > pe.length ? e->length - pe.length : 0;
            e = &pe;
            fmt = d->proj;
        }
    }
    struct chan_peer *p = d->peer;
    if (p && !p->failed && cx_rtrylock(&p->lock) == 0) {
        int sent = 0;
        /* what waits goes first, from here rather than the progress thread: a steady stream
         * would otherwise keep the queue (and the general path) for good */
        if (d->q.n)
            chan_drain_peer(p);
        if (!d->q.n && !p->failed && cx_link_pending(p->link) < CHAN_LINK_HIGH) {
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = d->tag, .seq = u->seq,
                                     .format = cx_format_token(fmt)};
            if (chan_peer_send_event(p, &h, fmt, e->iov, e->iovcnt) == 0)
                count_sent(d, p, e->length);
            sent = 1; /* or the link broke: the sink goes with it */
            /* The link kept what did not fit (a full ring or socket): only the progress
             * thread flushes it, and it may be asleep with an empty queue armed. */
            if (!chan_on_progress_thread(ch->ctx) && cx_link_pending(p->link))
                chan_kick(ch->ctx);
        }
        cx_runlock(&p->lock);
        if (sent)
            return;
    }
    struct chan_ref *r;
    if (e == &pe) { /* the projected event gets its own copy */
        if ((r = chan_ref_new(fmt, u->seq)) && chan_ref_gather(r, e) < 0) {
            chan_ref_put(r);
            r = NULL;
        }
    } else {
        r = sub_ref(u, 0);
        if (r)
            chan_ref_get(r);
    }
    if (r)
        enqueue(d, r);
}

/* The submit fast path: the channel's route (its one remote shm sink, queue empty) gets
 * the event under that peer's lock alone, no runtime lock. 1 sent (or the link broke: the
 * sink goes with it, as on the general path), 0 take the general path. */
static int submit_fast(struct sub *u)
{
    struct cx_chan_source *s = u->s;
    struct cx_chan *ch = s->ch;
    int done = 0, kick = 0;
    __atomic_add_fetch(&ch->route_active, 1, __ATOMIC_SEQ_CST);
    struct chan_dest *d = __atomic_load_n(&ch->route, __ATOMIC_SEQ_CST);
    struct chan_peer *p = d ? d->peer : NULL; /* d and p live while route_active counts us */
    if (p && cx_rtrylock(&p->lock) == 0) {
        if (!p->failed && cx_link_pending(p->link) < CHAN_LINK_HIGH) {
            /* under the peer lock: numbered in the order the link carries them */
            chan_count(&s->seq, 1);
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = d->tag, .seq = s->seq,
                                     .format = s->token};
            if (chan_peer_send_event_nokick(p, &h, s->fmt, u->enc.iov, u->enc.iovcnt) == 0) {
                chan_count(&ch->fast_sent, 1);
                chan_count(&d->sent, 1);
                chan_count(&ch->fast_bytes, CX_FRAME_HDR_SIZE + u->enc.length);
            } else {
                kick = 1; /* the progress thread removes the process */
            }
            chan_count(&ch->fast_submitted, 1);
            /* what did not fit the ring only the progress thread flushes */
            kick |= !chan_on_progress_thread(ch->ctx) && cx_link_pending(p->link);
            done = 1;
        }
        cx_runlock(&p->lock);
    }
    __atomic_sub_fetch(&ch->route_active, 1, __ATOMIC_SEQ_CST);
    if (kick) {
        pthread_mutex_lock(&ch->ctx->lock);
        chan_kick(ch->ctx);
        pthread_mutex_unlock(&ch->ctx->lock);
    }
    return done;
}

/* A reliable channel: the first sink (that this event goes to) whose queue is full. */
static struct chan_dest *full_dest(struct sub *u, const char *pass)
{
    struct cx_chan *ch = u->s->ch;
    if (ch->mode != CX_CHAN_RELIABLE)
        return NULL;
    size_t i = 0;
    for (struct chan_dest *d = ch->dests; d; d = d->next, i++)
        if (pass[i] && chan_queue_full(&d->q))
            return d;
    return NULL;
}

static int submit(struct cx_chan_source *s, const void *event, void *owned,
                  void (*release)(void *, void *), void *rarg, int timeout_ms)
{
    struct cx_chan *ch = s->ch;
    struct cx_chan_ctx *ctx = ch->ctx;
    /* Not an initializer: that would zero the 1.6 KB of u.enc, which cx_encode fills. */
    struct sub sub, *u = &sub;
    u->s = s;
    u->owned = owned;
    u->release = release;
    u->rarg = rarg;
    u->ref = NULL;
    u->seq = 0;
    int rc = cx_encode(s->fmt, event, &u->enc);
    if (rc < 0) {
        if (u->owned && u->release)
            u->release(u->rarg, u->owned);
        return cx_err_wrap(rc, "channel %s: submit", ch->id);
    }
    if (__atomic_load_n(&ch->route, __ATOMIC_RELAXED) && submit_fast(u)) {
        if (u->owned && u->release)
            u->release(u->rarg, u->owned); /* sent from it: nobody keeps it */
        return 0;
    }
    long long deadline = -2; /* read the clock only if this submit has to wait */
    char small[64], *pass = small;
    int counted = 0;
    pthread_mutex_lock(&ctx->lock);
    for (;;) {
        chan_route_off(ch); /* the general path alone numbers and sends (again after a wait) */
        size_t n = 0;
        for (struct chan_dest *d = ch->dests; d; d = d->next)
            n++;
        if (pass != small)
            free(pass);
        pass = n <= sizeof small ? small : malloc(n);
        if (!pass) {
            pass = small;
            rc = cx_err_set(ENOMEM, "channel: out of memory");
            break;
        }
        u->seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) + 1;
        size_t i = 0;
        for (struct chan_dest *d = ch->dests; d; d = d->next)
            pass[i++] = (char)dest_wants(u, d);
        struct chan_dest *full = full_dest(u, pass);
        if (!full)
            break;
        ch->st.blocked += !counted;
        counted = 1;
        if (timeout_ms == 0 || chan_on_progress_thread(ctx)) {
            rc = cx_err_set(EAGAIN, "channel %s: the queue of sink %s/%u is full (%u events)",
                            ch->id, full->local ? ctx->addr : full->addr,
                            full->local ? full->sink->ep->tag : full->tag, full->q.cap);
            break;
        }
        if (deadline == -2)
            deadline = timeout_ms < 0 ? -1 : chan_now_ms() + timeout_ms;
        if (chan_wait(ctx, deadline) < 0) {
            rc = cx_err_set(ETIMEDOUT, "channel %s: no room in the queue of sink %s within %d ms",
                            ch->id, full->local ? ctx->addr : full->addr, timeout_ms);
            break;
        }
    }
    if (rc == 0) {
        __atomic_store_n(&s->seq, u->seq, __ATOMIC_RELAXED);
        if (u->ref)
            u->ref->seq = u->seq; /* made while waiting, another submit may have gone first */
        ch->st.submitted++;
        size_t i = 0;
        for (struct chan_dest *d = ch->dests; d; d = d->next, i++) {
            if (!pass[i]) {
                ch->st.filtered++;
                ch->st.filtered_bytes += CX_FRAME_HDR_SIZE + u->enc.length;
            } else if (d->local) {
                deliver_local(u, d);
            } else {
                deliver_remote(u, d);
            }
        }
        route_update(ch);
    }
    if (u->ref)
        chan_ref_put(u->ref); /* the submit's own count */
    else if (u->owned && u->release)
        u->release(u->rarg, u->owned); /* nobody kept it */
    pthread_mutex_unlock(&ctx->lock);
    if (pass != small)
        free(pass);
    return rc;
}

int cx_embedded_chan_submit_wait(struct cx_chan_source *s, const void *event, int timeout_ms)
{
    return submit(s, event, NULL, NULL, NULL, timeout_ms);
}

int cx_embedded_chan_submit(struct cx_chan_source *s, const void *event)
{
    return cx_embedded_chan_submit_wait(s, event, 0);
}

int cx_embedded_chan_submit_owned(struct cx_chan_source *s, void *event,
                         void (*release)(void *arg, void *event), void *arg, int timeout_ms)
{
    return submit(s, event, event, release, arg, timeout_ms);
}
