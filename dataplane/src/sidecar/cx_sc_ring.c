/* The shared-memory SPSC ring (cx_sc_ring.h). */
#include "sidecar/cx_sc_ring.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

struct cx_sc_ring_hdr {
    _Alignas(64) _Atomic uint64_t tail; /* producer: bytes published */
    _Alignas(64) _Atomic uint64_t head; /* consumer: bytes released */
    _Alignas(64) _Atomic uint32_t waiting;
    uint32_t magic;
    uint64_t capacity;
};
_Static_assert(sizeof(struct cx_sc_ring_hdr) <= CX_SC_RING_HDR, "ring header too large");

#define RING_MAGIC 0x43585247u /* "CXRG" */
#define REC_HDR 8u

struct rec_hdr {
    uint32_t len;
    uint32_t type;
};

static inline uint64_t align8(uint64_t v) { return (v + 7) & ~(uint64_t)7; }

int cx_sc_ring_init(struct cx_sc_ring *r, void *mem, uint64_t capacity)
{
    if (capacity < 4096 || (capacity & (capacity - 1)))
        return -EINVAL;
    memset(r, 0, sizeof *r);
    r->h = mem;
    r->data = (uint8_t *)mem + CX_SC_RING_HDR;
    r->capacity = capacity;
    atomic_store(&r->h->tail, 0);
    atomic_store(&r->h->head, 0);
    atomic_store(&r->h->waiting, 0);
    r->h->capacity = capacity;
    r->h->magic = RING_MAGIC;
    return 0;
}

int cx_sc_ring_attach(struct cx_sc_ring *r, void *mem, size_t span)
{
    memset(r, 0, sizeof *r);
    struct cx_sc_ring_hdr *h = mem;
    if (span < CX_SC_RING_HDR || h->magic != RING_MAGIC || h->capacity != span - CX_SC_RING_HDR ||
        (h->capacity & (h->capacity - 1)))
        return -EPROTO;
    r->h = h;
    r->data = (uint8_t *)mem + CX_SC_RING_HDR;
    r->capacity = h->capacity;
    return 0;
}

size_t cx_sc_ring_max(const struct cx_sc_ring *r) { return r->capacity / 2 - REC_HDR; }

void *cx_sc_ring_claim(struct cx_sc_ring *r, uint32_t type, size_t len, int *err)
{
    if (len > cx_sc_ring_max(r) || type == CX_SC_REC_PAD) {
        if (err)
            *err = -EMSGSIZE;
        return NULL;
    }
    uint64_t need = REC_HDR + align8(len);
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_acquire);
    uint64_t pos = tail & (r->capacity - 1), to_end = r->capacity - pos;
    uint64_t pad = need > to_end ? to_end : 0;
    if (r->capacity - (tail - head) < pad + need) {
        if (err)
            *err = -EAGAIN;
        return NULL;
    }
    if (pad) { /* the record starts at 0; a padding record covers the rest of the end */
        struct rec_hdr ph = {.len = (uint32_t)(pad - REC_HDR), .type = CX_SC_REC_PAD};
        memcpy(r->data + pos, &ph, sizeof ph);
        pos = 0;
    }
    struct rec_hdr rh = {.len = (uint32_t)len, .type = type};
    memcpy(r->data + pos, &rh, sizeof rh);
    r->claim_pos = pos;
    r->claim_len = (uint32_t)len;
    r->claim_next = tail + pad + need;
    return r->data + pos + REC_HDR;
}

int cx_sc_ring_commit(struct cx_sc_ring *r)
{
    if (!r->claim_next)
        return 0;
    atomic_store_explicit(&r->h->tail, r->claim_next, memory_order_release);
    r->claim_next = 0;
    /* pairs with the consumer's fence in cx_sc_ring_prepare_wait: either it sees our tail
     * or we see its flag */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&r->h->waiting, memory_order_relaxed) &&
        atomic_exchange(&r->h->waiting, 0))
        return 1;
    return 0;
}

void cx_sc_ring_trim(struct cx_sc_ring *r, size_t len)
{
    if (!r->claim_next || len >= r->claim_len)
        return;
    r->claim_next -= align8(r->claim_len) - align8(len);
    r->claim_len = (uint32_t)len;
    struct rec_hdr rh;
    memcpy(&rh, r->data + r->claim_pos, sizeof rh);
    rh.len = (uint32_t)len;
    memcpy(r->data + r->claim_pos, &rh, sizeof rh);
}

void cx_sc_ring_abort(struct cx_sc_ring *r) { r->claim_next = 0; }

int cx_sc_ring_peek(struct cx_sc_ring *r, uint32_t *type, void **payload, size_t *len)
{
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&r->h->tail, memory_order_acquire);
    if (r->bad)
        return -EPROTO;
    while (head != tail) {
        struct rec_hdr rh;
        uint64_t pos = head & (r->capacity - 1);
        memcpy(&rh, r->data + pos, sizeof rh);
        /* the other process writes this memory: a record must lie inside the data area and
         * inside what was published, whatever the header says */
        if (tail - head > r->capacity || (pos & 7) || tail - head < REC_HDR ||
            rh.len > r->capacity || pos + REC_HDR + align8(rh.len) > r->capacity ||
            REC_HDR + align8(rh.len) > tail - head) {
            r->bad = 1;
            return -EPROTO;
        }
        if (rh.type == CX_SC_REC_PAD) { /* skip to the start */
            head += REC_HDR + align8(rh.len);
            atomic_store_explicit(&r->h->head, head, memory_order_release);
            continue;
        }
        *type = rh.type;
        *payload = r->data + pos + REC_HDR;
        *len = rh.len;
        return 1;
    }
    return 0;
}

void cx_sc_ring_release(struct cx_sc_ring *r)
{
    uint64_t head = atomic_load_explicit(&r->h->head, memory_order_relaxed);
    struct rec_hdr rh;
    memcpy(&rh, r->data + (head & (r->capacity - 1)), sizeof rh);
    atomic_store_explicit(&r->h->head, head + REC_HDR + align8(rh.len), memory_order_release);
}

size_t cx_sc_ring_read(struct cx_sc_ring *r, cx_sc_ring_handler fn, void *arg, size_t limit)
{
    size_t n = 0;
    uint32_t type;
    void *p;
    size_t len;
    while (n < limit && cx_sc_ring_peek(r, &type, &p, &len) > 0) {
        fn(arg, type, p, len);
        cx_sc_ring_release(r);
        n++;
    }
    return n;
}

int cx_sc_ring_prepare_wait(struct cx_sc_ring *r)
{
    atomic_store(&r->h->waiting, 1);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&r->h->tail) != atomic_load_explicit(&r->h->head, memory_order_relaxed)) {
        atomic_store(&r->h->waiting, 0);
        return 0;
    }
    return 1;
}

void cx_sc_ring_done_wait(struct cx_sc_ring *r) { atomic_store(&r->h->waiting, 0); }

uint64_t cx_sc_ring_used(const struct cx_sc_ring *r)
{
    return atomic_load(&r->h->tail) - atomic_load(&r->h->head);
}

uint64_t cx_sc_ring_tail(const struct cx_sc_ring *r) { return atomic_load(&r->h->tail); }
uint64_t cx_sc_ring_head(const struct cx_sc_ring *r) { return atomic_load(&r->h->head); }
