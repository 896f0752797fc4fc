/* Seq-carrying filter; see cx_seq.h. */
#include "stack/cx_seq.h"

#include "common/cx_error.h"
#include "common/cx_le.h"
#include "transport/cx_txq.h"

#include <stdlib.h>
#include <string.h>

#define SEQ_BYTES 8
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
    uint8_t seq[SEQ_BYTES]; /* the lower links copy what they keep before returning */
    cx_put_le64(seq, h->seq);
    if (iovcnt < SEQ_IOV) {
        struct iovec v[SEQ_IOV];
        v[0] = (struct iovec){seq, SEQ_BYTES};
        if (iovcnt)
            memcpy(v + 1, iov, (size_t)iovcnt * sizeof *iov);
        return cx_link_send(f->lower, h, v, iovcnt + 1);
    }
    size_t n = cx_iov_len(iov, iovcnt);
    uint8_t *b = malloc(SEQ_BYTES + n);
    if (!b)
        return cx_err_set(ENOMEM, "seq: out of memory for a %zu-byte message", n);
    memcpy(b, seq, SEQ_BYTES);
    cx_iov_copy(b + SEQ_BYTES, iov, iovcnt, 0, n);
    struct iovec one = {b, SEQ_BYTES + n};
    int rc = cx_link_send(f->lower, h, &one, 1);
    free(b);
    return rc;
}

static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct seqf *f = arg;
    if (n < SEQ_BYTES) {
        f->bad = 1;
        return;
    }
    struct cx_frame_hdr d = *h;
    d.seq = cx_get_le64(p);
    d.length = d.msg_length = (uint32_t)(n - SEQ_BYTES); /* whole messages: frag is below */
    f->fn(f->arg, &d, (const uint8_t *)p + SEQ_BYTES, n - SEQ_BYTES);
}

static int seq_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct seqf *f = (struct seqf *)k;
    f->fn = fn;
    f->arg = arg;
    int rc = cx_link_progress(f->lower, on_msg, f, budget);
    if (f->bad)
        return cx_err_set(EPROTO, "seq: a message shorter than its %d-byte sequence number",
                          SEQ_BYTES);
    return rc;
}

static size_t seq_pending(struct cx_link *k) { return cx_link_pending(((struct seqf *)k)->lower); }
static int seq_fd(struct cx_link *k) { return cx_link_fd(((struct seqf *)k)->lower); }
static int seq_arm(struct cx_link *k) { return cx_link_arm(((struct seqf *)k)->lower); }
static void seq_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    cx_link_caps(((struct seqf *)k)->lower, c);
    c->max_msg = (c->max_msg ? c->max_msg : CX_FRAME_MAX_MSG) - SEQ_BYTES;
}
static void seq_close(struct cx_link *k)
{
    struct seqf *f = (struct seqf *)k;
    cx_link_close(f->lower);
    free(f);
}

const struct cx_driver_ops cx_seq_ops = {
    .name = "seq", .send = seq_send, .pending = seq_pending, .progress = seq_progress,
    .fd = seq_fd, .arm = seq_arm, .caps = seq_caps, .close = seq_close,
};

int cx_seq_create(struct cx_link *lower, struct cx_link **out)
{
    struct seqf *f = calloc(1, sizeof *f);
    if (!f)
        return cx_err_set(ENOMEM, "seq: out of memory");
    f->base.ops = &cx_seq_ops;
    f->lower = lower;
    *out = &f->base;
    return 0;
}

struct cx_link *cx_seq_lower(struct cx_link *k) { return ((struct seqf *)k)->lower; }
