/* SPSC record ring; see cx_spsc_ring.h for the contract and layout. */
#include "transport/shm/cx_spsc_ring.h"

#include "common/cx_error.h"

#include <stdatomic.h>
#include <string.h>

#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ALIGN8(x) (((x) + 7u) & ~(uint64_t)7u)

void cx_spsc_ring_init(struct cx_ring_ctl *ctl, uint64_t capacity)
{
    memset(ctl, 0, sizeof *ctl);
    ctl->capacity = capacity;
}

int cx_spsc_ring_attach(struct cx_spsc_ring *r, struct cx_ring_ctl *ctl, uint8_t *data,
                        uint64_t expect_cap)
{
    uint64_t cap = ctl->capacity;
    if (cap < 4096 || (cap & (cap - 1)) || (expect_cap && cap != expect_cap))
        return cx_err_set(EINVAL, "ring: bad capacity %llu", (unsigned long long)cap);
    memset(r, 0, sizeof *r);
    r->ctl = ctl;
    r->data = data;
    r->cap = cap;
    r->mask = cap - 1;
    r->head_cache = LOAD_ACQ(&ctl->head);
    return 0;
}

static void put_hdr(uint8_t *p, uint32_t len, uint32_t type)
{
    memcpy(p, &len, 4);
    memcpy(p + 4, &type, 4);
}

void *cx_spsc_ring_try_claim(struct cx_spsc_ring *r, uint32_t type, size_t len)
{
    if (len > cx_spsc_ring_max_body(r))
        return NULL;
    uint64_t tail = r->ctl->tail; /* only we write it */
    uint64_t rec = ALIGN8(CX_RING_REC_HDR + len);
    uint64_t pos = tail & r->mask, to_end = r->cap - pos;
    uint64_t need = rec > to_end ? to_end + rec : rec;
    if (need > r->cap - (tail - r->head_cache)) {
        r->head_cache = LOAD_ACQ(&r->ctl->head);
        if (need > r->cap - (tail - r->head_cache))
            return NULL;
    }
    if (rec > to_end) { /* pad to the end, record starts at 0 */
        put_hdr(r->data + pos, (uint32_t)(to_end - CX_RING_REC_HDR), CX_RING_PAD);
        pos = 0;
    }
    put_hdr(r->data + pos, (uint32_t)len, type);
    r->claim_pos = pos;
    r->claim_adv = need;
    return r->data + pos + CX_RING_REC_HDR;
}

void cx_spsc_ring_commit(struct cx_spsc_ring *r)
{
    STORE_REL(&r->ctl->tail, r->ctl->tail + r->claim_adv);
    r->claim_adv = 0;
}

void cx_spsc_ring_abort(struct cx_spsc_ring *r) { r->claim_adv = 0; }

int cx_spsc_ring_take_reader_idle(struct cx_spsc_ring *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!__atomic_load_n(&r->ctl->reader_idle, __ATOMIC_RELAXED))
        return 0;
    return __atomic_exchange_n(&r->ctl->reader_idle, 0, __ATOMIC_SEQ_CST) != 0;
}

int cx_spsc_ring_read(struct cx_spsc_ring *r, cx_ring_handler handler, void *clientd, int limit)
{
    uint64_t head = r->ctl->head, tail = LOAD_ACQ(&r->ctl->tail);
    int n = 0;
    while (head < tail && n < limit) {
        uint8_t *p = r->data + (head & r->mask);
        uint32_t len, type;
        memcpy(&len, p, 4);
        memcpy(&type, p + 4, 4);
        if (type != CX_RING_PAD) {
            handler(clientd, type, p + CX_RING_REC_HDR, len);
            n++;
        }
        head += ALIGN8(CX_RING_REC_HDR + (uint64_t)len);
        STORE_REL(&r->ctl->head, head);
    }
    return n;
}

int cx_spsc_ring_take_writer_idle(struct cx_spsc_ring *r)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (!__atomic_load_n(&r->ctl->writer_idle, __ATOMIC_RELAXED))
        return 0;
    return __atomic_exchange_n(&r->ctl->writer_idle, 0, __ATOMIC_SEQ_CST) != 0;
}

int cx_spsc_ring_empty(const struct cx_spsc_ring *r)
{
    return LOAD_ACQ(&r->ctl->tail) == r->ctl->head;
}

int cx_spsc_ring_reader_arm(struct cx_spsc_ring *r)
{
    __atomic_store_n(&r->ctl->reader_idle, 1, __ATOMIC_SEQ_CST);
    atomic_thread_fence(memory_order_seq_cst);
    if (!cx_spsc_ring_empty(r)) {
        __atomic_store_n(&r->ctl->reader_idle, 0, __ATOMIC_SEQ_CST);
        return -EAGAIN;
    }
    return 0;
}

int cx_spsc_ring_writer_arm(struct cx_spsc_ring *r, size_t len)
{
    __atomic_store_n(&r->ctl->writer_idle, 1, __ATOMIC_SEQ_CST);
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t need = 2 * ALIGN8(CX_RING_REC_HDR + len); /* worst case with padding */
    uint64_t used = r->ctl->tail - __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST);
    if (r->cap - used >= need) {
        __atomic_store_n(&r->ctl->writer_idle, 0, __ATOMIC_SEQ_CST);
        return -EAGAIN;
    }
    return 0;
}
