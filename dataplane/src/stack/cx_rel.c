/* Reliability filter; see cx_rel.h. The send side is a FIFO of message copies indexed by
 * seq (oldest first); the receive side a window of buffered out-of-order messages. */
#include "stack/cx_rel.h"

#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RTO_INIT_NS 5000000ull
#define RTO_FLOOR_NS 1000000ull
#define RTO_MAX_NS 500000000ull
#define ACK_EVERY 32

struct out_msg {
    struct cx_frame_hdr h;
    uint8_t *data;
    uint32_t len;
    uint8_t sent, sacked, tries;
    uint64_t when, rto;
};

struct in_msg {
    struct cx_frame_hdr h;
    uint8_t *data; /* NULL = hole */
    uint32_t len;
};

struct rel {
    struct cx_link base;
    struct cx_link *lower;
    unsigned window;    /* the most in flight, and the receive window */
    const struct cx_rel_strategy *strategy;
    struct cx_rel_cc cc;
    /* send side: out[(first..first+n) % cap] hold seqs base_seq .. base_seq+n-1 */
    struct out_msg *out;
    size_t ocap, ofirst, on;
    uint64_t base_seq;  /* seq of out[ofirst] */
    uint64_t next_seq;  /* next seq to assign */
    /* receive side */
    struct in_msg *in;  /* window slots by seq % window */
    uint64_t rcv_next;  /* next seq to deliver */
    uint64_t acked_sent; /* last cumulative ack we sent */
    unsigned since_ack;
    int need_ack;       /* a duplicate arrived: our ack may have been lost */
    int failed;
    cx_recv_fn fn;
    void *arg;
    struct cx_rel_stats st;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int lower_reliable(struct rel *r)
{
    struct cx_driver_caps c;
    cx_link_caps(r->lower, &c);
    return (c.flags & CX_CAP_RELIABLE) != 0;
}

/* ---- window strategies --------------------------------------------------------------- */

static void fixed_init(struct cx_rel_cc *cc) { cc->window = cc->max_window; }
static void fixed_ack(struct cx_rel_cc *cc, unsigned n) { (void)cc, (void)n; }
static void fixed_timeout(struct cx_rel_cc *cc) { (void)cc; }
const struct cx_rel_strategy cx_rel_fixed = {"fixed", fixed_init, fixed_ack, fixed_timeout};

static void aimd_init(struct cx_rel_cc *cc)
{
    cc->cwnd = cc->max_window < 4 ? cc->max_window : 4;
    cc->window = (unsigned)cc->cwnd;
}
static void aimd_ack(struct cx_rel_cc *cc, unsigned n)
{
    cc->cwnd += (double)n / cc->cwnd; /* one more per window's worth of acks */
    if (cc->cwnd > cc->max_window)
        cc->cwnd = cc->max_window;
    cc->window = (unsigned)cc->cwnd;
}
static void aimd_timeout(struct cx_rel_cc *cc)
{
    cc->cwnd = cc->cwnd / 2 < 1 ? 1 : cc->cwnd / 2;
    cc->window = (unsigned)cc->cwnd;
}
const struct cx_rel_strategy cx_rel_aimd = {"aimd", aimd_init, aimd_ack, aimd_timeout};

/* RFC 6298 round-trip estimate. */
static void rtt_sample(struct cx_rel_cc *cc, uint64_t rtt)
{
    if (!cc->srtt_ns) {
        cc->srtt_ns = rtt;
        cc->rttvar_ns = rtt / 2;
    } else {
        uint64_t d = rtt > cc->srtt_ns ? rtt - cc->srtt_ns : cc->srtt_ns - rtt;
        cc->rttvar_ns = (3 * cc->rttvar_ns + d) / 4;
        cc->srtt_ns = (7 * cc->srtt_ns + rtt) / 8;
    }
    uint64_t rto = cc->srtt_ns + 4 * cc->rttvar_ns;
    cc->rto_ns = rto < RTO_FLOOR_NS ? RTO_FLOOR_NS : rto > RTO_MAX_NS ? RTO_MAX_NS : rto;
}

const struct cx_rel_cc *cx_rel_cc(struct cx_link *k) { return &((struct rel *)k)->cc; }

/* Messages allowed in flight now. */
static size_t in_flight_max(struct rel *r) { return r->cc.window ? r->cc.window : 1; }

int cx_rel_create(struct cx_link *lower, unsigned window, struct cx_link **out)
{
    return cx_rel_create_with(lower, window, &cx_rel_fixed, out);
}

int cx_rel_create_with(struct cx_link *lower, unsigned window, const struct cx_rel_strategy *strategy,
                       struct cx_link **out)
{
    struct rel *r = calloc(1, sizeof *r);
    if (!r)
        return cx_err_set(ENOMEM, "rel: out of memory");
    r->window = window ? window : 1024;
    r->in = calloc(r->window, sizeof *r->in);
    r->ocap = 64;
    r->out = calloc(r->ocap, sizeof *r->out);
    if (!r->in || !r->out) {
        free(r->in), free(r->out), free(r);
        return cx_err_set(ENOMEM, "rel: out of memory");
    }
    r->base.ops = &cx_rel_ops;
    r->strategy = strategy ? strategy : &cx_rel_fixed;
    r->cc.max_window = r->window;
    r->cc.rto_ns = RTO_INIT_NS;
    r->strategy->init(&r->cc);
    r->lower = lower;
    r->base_seq = r->next_seq = r->rcv_next = 1;
    *out = &r->base;
    return 0;
}

static struct out_msg *out_at(struct rel *r, size_t i) { return &r->out[(r->ofirst + i) % r->ocap]; }

static int transmit(struct rel *r, struct out_msg *m, int retx)
{
    struct cx_frame_hdr h = m->h;
    h.flags |= CX_FRAME_F_ACK | (retx ? CX_FRAME_F_RETX : 0);
    h.ack = r->rcv_next - 1;
    struct iovec v = {m->data, m->len};
    int rc = cx_link_send(r->lower, &h, &v, 1);
    if (rc < 0)
        return rc;
    if (h.ack > r->acked_sent) {
        r->acked_sent = h.ack;
        r->since_ack = 0;
    }
    uint64_t t = now_ns();
    if (!m->sent) {
        m->rto = r->cc.rto_ns;
        r->st.sent++;
    } else {
        m->rto = m->rto * 2 > RTO_MAX_NS ? RTO_MAX_NS : m->rto * 2;
        r->st.retransmitted++;
    }
    m->sent = 1;
    if (m->tries < 255)
        m->tries++;
    m->when = t;
    return 0;
}

/* Sends what the window allows. */
static int pump(struct rel *r)
{
    for (size_t i = 0; i < r->on && i < in_flight_max(r); i++) {
        struct out_msg *m = out_at(r, i);
        if (!m->sent) {
            int rc = transmit(r, m, 0);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

static int rel_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct rel *r = (struct rel *)k;
    if (r->failed)
        return cx_err_set(-r->failed, "rel: link is broken");
    size_t len = cx_iov_len(iov, iovcnt);
    if (r->on == r->ocap) {
        size_t ncap = r->ocap * 2;
        struct out_msg *n = malloc(ncap * sizeof *n);
        if (!n)
            return cx_err_set(ENOMEM, "rel: out of memory");
        for (size_t i = 0; i < r->on; i++) n[i] = *out_at(r, i);
        free(r->out);
        r->out = n;
        r->ocap = ncap;
        r->ofirst = 0;
    }
    struct out_msg *m = out_at(r, r->on);
    memset(m, 0, sizeof *m);
    m->data = malloc(len ? len : 1);
    if (!m->data)
        return cx_err_set(ENOMEM, "rel: out of memory for a %zu-byte copy", len);
    cx_iov_copy(m->data, iov, iovcnt, 0, len);
    m->len = (uint32_t)len;
    m->h = *h;
    m->h.seq = r->next_seq++;
    r->on++;
    if (r->on <= in_flight_max(r))
        return transmit(r, m, 0);
    return 0;
}

static size_t rel_pending(struct cx_link *k)
{
    struct rel *r = (struct rel *)k;
    size_t n = cx_link_pending(r->lower);
    for (size_t i = 0; i < r->on; i++)
        if (!out_at(r, i)->sent)
            n += out_at(r, i)->len + CX_FRAME_HDR_SIZE;
    return n;
}

struct cx_link *cx_rel_lower(struct cx_link *k) { return ((struct rel *)k)->lower; }

size_t cx_rel_unacked(struct cx_link *k) { return ((struct rel *)k)->on; }
void cx_rel_stats(struct cx_link *k, struct cx_rel_stats *out) { *out = ((struct rel *)k)->st; }

int cx_rel_retransmit_all(struct cx_link *k)
{
    struct rel *r = (struct rel *)k;
    r->need_ack = 1; /* our last acks may have died with the old link: repeat them */
    for (size_t i = 0; i < r->on && i < r->window; i++) {
        struct out_msg *m = out_at(r, i);
        if (m->sacked)
            continue;
        int rc = transmit(r, m, m->sent);
        if (rc < 0)
            return cx_err_wrap(rc, "rel: retransmitting seq %llu", (unsigned long long)m->h.seq);
    }
    return 0;
}

static void on_ack(struct rel *r, uint64_t ack)
{
    unsigned n = 0;
    uint64_t t = 0;
    while (r->on && r->base_seq <= ack) {
        struct out_msg *m = out_at(r, 0);
        if (m->tries == 1 && !n) { /* one sample per ack, from a message sent once (Karn) */
            t = now_ns();
            rtt_sample(&r->cc, t - m->when);
        }
        n++;
        free(m->data);
        r->ofirst = (r->ofirst + 1) % r->ocap;
        r->on--;
        r->base_seq++;
    }
    if (n)
        r->strategy->on_ack(&r->cc, n);
}

static int send_ack(struct rel *r, uint64_t sack)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_ACK, .flags = CX_FRAME_F_ACK, .seq = sack,
                             .ack = r->rcv_next - 1};
    int rc = cx_link_send(r->lower, &h, NULL, 0);
    if (rc == 0) {
        r->acked_sent = h.ack;
        r->since_ack = 0;
        r->st.acks_sent++;
    }
    return rc;
}

static void deliver(struct rel *r, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct cx_frame_hdr d = *h;
    d.flags &= (uint8_t)~CX_FRAME_F_RETX;
    r->rcv_next++;
    r->since_ack++;
    r->st.delivered++;
    r->fn(r->arg, &d, p, n);
}

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct rel *r = arg;
    if (h->flags & CX_FRAME_F_ACK)
        on_ack(r, h->ack);
    if (h->type == CX_FRAME_ACK) {
        if (h->seq >= r->base_seq && h->seq < r->base_seq + r->on)
            out_at(r, h->seq - r->base_seq)->sacked = 1;
        return;
    }
    if (h->seq < r->rcv_next) { /* duplicate: make sure the sender learns */
        r->st.duplicates++;
        r->need_ack = 1;
        return;
    }
    if (h->seq == r->rcv_next) {
        deliver(r, h, p, n);
        for (;;) { /* then whatever was waiting behind it */
            struct in_msg *w = &r->in[r->rcv_next % r->window];
            if (!w->data || w->h.seq != r->rcv_next)
                break;
            uint8_t *b = w->data;
            w->data = NULL;
            deliver(r, &w->h, b, w->len);
            free(b);
        }
        return;
    }
    if (h->seq >= r->rcv_next + r->window)
        return; /* beyond the window: the sender will retry */
    struct in_msg *w = &r->in[h->seq % r->window];
    if (w->data && w->h.seq == h->seq) {
        r->st.duplicates++;
    } else {
        free(w->data);
        w->data = malloc(n ? n : 1);
        if (!w->data)
            return;
        memcpy(w->data, p, n);
        w->h = *h;
        w->len = (uint32_t)n;
        r->st.out_of_order++;
    }
    send_ack(r, h->seq); /* selective ack */
}

static int rel_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct rel *r = (struct rel *)k;
    r->fn = fn;
    r->arg = arg;
    int work = cx_link_progress(r->lower, on_frame, r, budget);
    if (work < 0) {
        r->failed = work;
        return work;
    }
    size_t before = r->on;
    int rc = pump(r);
    if (rc < 0)
        return rc;
    if (!lower_reliable(r)) { /* retransmit the holes that timed out */
        uint64_t t = now_ns();
        int fired = 0;
        for (size_t i = 0; i < r->on && i < r->window; i++) {
            struct out_msg *m = out_at(r, i);
            if (m->sent && !m->sacked && t - m->when > m->rto) {
                if ((rc = transmit(r, m, 1)) < 0)
                    return rc;
                fired = 1;
                work++;
            }
        }
        if (fired) { /* one congestion signal per round, however many holes */
            r->cc.timeouts++;
            r->strategy->on_timeout(&r->cc);
        }
    }
    if (r->need_ack ||
        (r->rcv_next - 1 > r->acked_sent && (r->since_ack >= ACK_EVERY || work < budget))) {
        r->need_ack = 0;
        if ((rc = send_ack(r, 0)) < 0)
            return rc;
    }
    return work + (r->on != before);
}

static int rel_fd(struct cx_link *k) { return cx_link_fd(((struct rel *)k)->lower); }
static int rel_arm(struct cx_link *k)
{
    struct rel *r = (struct rel *)k;
    if (r->rcv_next - 1 > r->acked_sent || r->need_ack)
        return -EAGAIN;
    if (r->on && !lower_reliable(r))
        return -EAGAIN; /* timers running: keep polling (the engine backs off) */
    return cx_link_arm(r->lower);
}
static void rel_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    cx_link_caps(((struct rel *)k)->lower, c);
    c->flags = (c->flags & ~(uint32_t)CX_CAP_DATAGRAM) | CX_CAP_RELIABLE | CX_CAP_ORDERED;
}
struct cx_link *cx_rel_release(struct cx_link *k)
{
    struct rel *r = (struct rel *)k;
    struct cx_link *lower = r->lower;
    for (size_t i = 0; i < r->on; i++) free(out_at(r, i)->data);
    for (unsigned i = 0; i < r->window; i++) free(r->in[i].data);
    free(r->out), free(r->in), free(r);
    return lower;
}
static void rel_close(struct cx_link *k) { cx_link_close(cx_rel_release(k)); }

const struct cx_driver_ops cx_rel_ops = {
    .name = "rel", .send = rel_send, .pending = rel_pending, .progress = rel_progress,
    .fd = rel_fd, .arm = rel_arm, .caps = rel_caps, .close = rel_close,
};
