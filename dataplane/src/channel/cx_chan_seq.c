/* The channel's event numbers over a datagram driver (dpdk). A source puts an event's number
 * in the frame header's seq and a sink hands it to its handler (cx_chan_event.seq); on a
 * datagram driver the stack's reliability filter owns that field (stack/README.md: layers
 * that need their own id carry it in the payload). So between the mux and such a stack this
 * filter puts the caller's seq in the first 8 bytes of every payload (an iovec in front:
 * no copy) and takes it back out on receipt (the payload handed on in place). Both ends add
 * it from their driver's caps alone, so they agree. */
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <stdlib.h>
#include <string.h>

#define SEQ_IOV 64 /* the fragmentation filter's limit: more pieces are copied into one */

struct seqf {
    struct cx_link base;
    struct cx_link *lower;
    cx_recv_fn fn;
    void *arg;
    int bad;
};

static int seq_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct seqf *f = (struct seqf *)k;
    uint64_t seq = h->seq; /* the lower links copy what they keep before returning */
    if (iovcnt < SEQ_IOV) {
        struct iovec v[SEQ_IOV];
        v[0] = (struct iovec){&seq, 8};
        if (iovcnt)
            memcpy(v + 1, iov, (size_t)iovcnt * sizeof *iov);
        return cx_link_send(f->lower, h, v, iovcnt + 1);
    }
    size_t n = cx_iov_len(iov, iovcnt);
    uint8_t *b = malloc(8 + n);
    if (!b)
        return cx_err_set(ENOMEM, "channel: out of memory for a %zu-byte event", n);
    memcpy(b, &seq, 8);
    cx_iov_copy(b + 8, iov, iovcnt, 0, n);
    struct iovec one = {b, 8 + n};
    int rc = cx_link_send(f->lower, h, &one, 1);
    free(b);
    return rc;
}

static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct seqf *f = arg;
    if (n < 8) {
        f->bad = 1;
        return;
    }
    struct cx_frame_hdr d = *h;
    memcpy(&d.seq, p, 8);
    d.length = (uint32_t)(n - 8);
    if (d.msg_length)
        d.msg_length = (uint32_t)(n - 8);
    f->fn(f->arg, &d, (const uint8_t *)p + 8, n - 8);
}

static int seq_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct seqf *f = (struct seqf *)k;
    f->fn = fn;
    f->arg = arg;
    int rc = cx_link_progress(f->lower, on_msg, f, budget);
    if (f->bad)
        return cx_err_set(EPROTO, "channel: a frame shorter than its event number");
    return rc;
}

static size_t seq_pending(struct cx_link *k) { return cx_link_pending(((struct seqf *)k)->lower); }
static int seq_fd(struct cx_link *k) { return cx_link_fd(((struct seqf *)k)->lower); }
static int seq_arm(struct cx_link *k) { return cx_link_arm(((struct seqf *)k)->lower); }
static void seq_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    cx_link_caps(((struct seqf *)k)->lower, c);
    c->max_msg = (c->max_msg ? c->max_msg : CX_FRAME_MAX_MSG) - 8;
}
static void seq_close(struct cx_link *k)
{
    struct seqf *f = (struct seqf *)k;
    cx_link_close(f->lower);
    free(f);
}

static const struct cx_driver_ops seq_ops = {
    .name = "chan-seq", .send = seq_send, .pending = seq_pending, .progress = seq_progress,
    .fd = seq_fd, .arm = seq_arm, .caps = seq_caps, .close = seq_close,
};

int chan_seq_wrap(struct cx_link *lower, struct cx_link **out)
{
    struct seqf *f = calloc(1, sizeof *f);
    if (!f)
        return cx_err_set(ENOMEM, "channel: out of memory for a link");
    f->base.ops = &seq_ops;
    f->lower = lower;
    *out = &f->base;
    return 0;
}
