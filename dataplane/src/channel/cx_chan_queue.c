/* Event references and bounded per-sink queues; see cx_chan_queue.h. */
#include "channel/cx_chan_queue.h"

#include "common/cx_error.h"

#include <stdlib.h>

struct chan_ref *chan_ref_new(const struct cx_format *fmt, uint64_t seq)
{
    struct chan_ref *r = calloc(1, sizeof *r);
    if (!r) {
        cx_err_set(ENOMEM, "channel: out of memory for an event");
        return NULL;
    }
    r->refs = 1;
    r->fmt = fmt;
    r->token = cx_format_token(fmt);
    r->seq = seq;
    return r;
}

int chan_ref_gather(struct chan_ref *r, const struct cx_enc *enc)
{
    if (r->wire)
        return 0;
    /* 8 spare bytes so a zero-length event still gets a buffer */
    if (!(r->wire = malloc(enc->length + 8)))
        return cx_err_set(ENOMEM, "channel: out of memory copying a %zu-byte event",
                          enc->length);
    long n = cx_enc_gather(enc, r->wire, enc->length + 8);
    if (n < 0) {
        free(r->wire);
        r->wire = NULL;
        return (int)n;
    }
    r->len = (size_t)n;
    return 0;
}

void chan_ref_put(struct chan_ref *r)
{
    if (!r || --r->refs)
        return;
    if (r->release)
        r->release(r->rarg, r->native);
    free(r->wire);
    free(r);
}

int chan_queue_init(struct chan_queue *q, unsigned cap)
{
    q->head = q->n = 0;
    q->cap = cap ? cap : 1;
    if (!(q->v = calloc(q->cap, sizeof *q->v)))
        return cx_err_set(ENOMEM, "channel: out of memory for a %u-event queue", q->cap);
    return 0;
}

void chan_queue_free(struct chan_queue *q)
{
    struct chan_ref *r;
    while ((r = chan_queue_pop(q)))
        chan_ref_put(r);
    free(q->v);
    q->v = NULL;
    q->cap = 0;
}

struct chan_ref *chan_queue_push(struct chan_queue *q, struct chan_ref *r)
{
    struct chan_ref *old = NULL;
    if (q->n == q->cap)
        old = chan_queue_pop(q);
    q->v[(q->head + q->n) % q->cap] = r;
    q->n++;
    return old;
}

struct chan_ref *chan_queue_pop(struct chan_queue *q)
{
    if (!q->n)
        return NULL;
    struct chan_ref *r = q->v[q->head];
    q->v[q->head] = NULL;
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return r;
}
