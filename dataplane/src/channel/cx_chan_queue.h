/* Submitted events shared by the queues that hold them, and the bounded per-sink queue
 * (a ring of references) that implements the channel's delivery mode. Not thread-safe:
 * the runtime's lock guards them. */
#ifndef CX_CHAN_QUEUE_H
#define CX_CHAN_QUEUE_H

#include "format/cx_codec.h"

#include <stddef.h>
#include <stdint.h>

/* One submitted event. It is held in its wire form (`wire`, a copy) or, for an owned
 * submit, as the application's struct (`native`, encoded again when it leaves). */
struct chan_ref {
    unsigned refs;
    uint64_t token, seq;
    const struct cx_format *fmt;
    void *native;
    void (*release)(void *arg, void *event);
    void *rarg;
    uint8_t *wire;
    size_t len;
};

/* A reference with one count. NULL on allocation failure (cx_errmsg set). */
struct chan_ref *chan_ref_new(const struct cx_format *fmt, uint64_t seq);
/* Makes the wire copy from an encoded event if the ref has none. 0 or -ENOMEM. */
int chan_ref_gather(struct chan_ref *r, const struct cx_enc *enc);
static inline struct chan_ref *chan_ref_get(struct chan_ref *r) { r->refs++; return r; }
/* Drops a count; the last one frees the copy and calls release for an owned event. */
void chan_ref_put(struct chan_ref *r);

struct chan_queue {
    struct chan_ref **v;
    unsigned cap, head, n;
};

/* A queue of at most cap events. 0 or -ENOMEM. */
int chan_queue_init(struct chan_queue *q, unsigned cap);
/* Drops every event and frees the ring. */
void chan_queue_free(struct chan_queue *q);
/* Appends r (taking the caller's count). When full, the oldest event is removed and
 * returned for the caller to count and put; else NULL. */
struct chan_ref *chan_queue_push(struct chan_queue *q, struct chan_ref *r);
/* The oldest event (the caller gets its count), or NULL when empty. */
struct chan_ref *chan_queue_pop(struct chan_queue *q);
static inline int chan_queue_full(const struct chan_queue *q) { return q->n >= q->cap; }

#endif
