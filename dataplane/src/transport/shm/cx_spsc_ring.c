/* SPSC record ring; see cx_spsc_ring.h for the contract and layout. */
#include "transport/shm/cx_spsc_ring.h"

#include "common/cx_error.h"

#include <stdatomic.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#define LOAD_ACQ(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define REC_ALIGN 64u /* records start on a cache line: a small one is one line to fetch */
#define PREFETCH_LINES 3 /* lines 2 to 4 of the next record: a 100-byte event and its header */
#define ALIGN_REC(x) (((x) + REC_ALIGN - 1) & ~(uint64_t)(REC_ALIGN - 1))

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

void cx_spsc_ring_set_hot(struct cx_spsc_ring *r, uint64_t bytes)
{
    r->hot = bytes >= 2 * REC_ALIGN && bytes < r->cap ? bytes : 0;
}

static inline uint64_t hdr_word(uint32_t len, uint32_t type) { return (uint64_t)type << 32 | len; }
static inline uint64_t *word_at(const struct cx_spsc_ring *r, uint64_t off)
{
    return (uint64_t *)(void *)(r->data + off);
}

/* Takes ownership of the lines the next small record will fill, so that taking them does
 * not hold up its publication (all of a record's stores are visible before its header):
 * with the hot window the producer comes back to lines the consumer read a lap ago. Only
 * for records sent back to back (a stream: 100-byte events 1.6x the bandwidth,
 * bench/channel). After a lone record (a ping-pong) it costs latency instead: the
 * invalidations reach the consumer's core while it reads that very record (0.27 -> 0.29
 * us one way at 100 B, 0.45 -> 0.50 at 1 KB), and later, when the link is quiet, too.
 * Not the first line: the consumer polls the zero word there and would only take it
 * back. Only where CPUID says the CPU has PREFETCHW. */
#if defined(__x86_64__) || defined(__i386__)
static int have_prefetchw; /* CPUID 0x80000001 ECX bit 8 (PRFCHW), read before main */
__attribute__((constructor)) static void probe_prefetchw(void)
{
    unsigned a, b, c, d;
    have_prefetchw = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8));
}
#endif

static inline void take_next_lines(struct cx_spsc_ring *r)
{
#if defined(__x86_64__) || defined(__i386__)
    if (!have_prefetchw) /* older CPUs: the instruction is not theirs to run */
        return;
    uint64_t next = r->ctl->tail & r->mask;
    for (uint64_t k = 1; k <= PREFETCH_LINES; k++)
        __asm__ volatile("prefetchw %0" ::"m"(r->data[(next + k * REC_ALIGN) & r->mask]));
#else
    (void)r;
#endif
}

void *cx_spsc_ring_try_claim(struct cx_spsc_ring *r, uint32_t type, size_t len)
{
    if (len > cx_spsc_ring_max_body(r))
        return NULL;
    uint64_t tail = r->ctl->tail; /* only we write it */
    uint64_t rec = ALIGN_REC(CX_RING_REC_HDR + len);
    uint64_t pos = tail & r->mask, to_end = r->cap - pos;
    /* Back to the start early (a padding record to the end) when a small record would
     * leave the hot window and the consumer is close behind: see cx_spsc_ring_set_hot. */
    int early = r->hot && pos && pos + rec > r->hot && rec <= r->hot / 2 && rec <= to_end;
    if (early && tail - r->head_cache > r->hot / 4 && tail >= r->hot_look) {
        /* the consumer's line, read at most once per quarter window while out of it */
        r->head_cache = LOAD_ACQ(&r->ctl->head);
        r->hot_look = tail + r->hot / 4;
    }
    early = early && tail - r->head_cache <= r->hot / 4;
    int pad = rec > to_end || early;
    /* the record, a padding record before it if it starts over at 0, and the zeroed
     * header word after it */
    uint64_t need = (pad ? to_end + rec : rec) + CX_RING_REC_HDR;
    if (need > r->cap - (tail - r->head_cache)) {
        r->head_cache = LOAD_ACQ(&r->ctl->head);
        if (need > r->cap - (tail - r->head_cache)) {
            if (!early) /* a consumer that lags: the rest of the lap is what room there is */
                return NULL;
            pad = 0;
            need = rec + CX_RING_REC_HDR;
            if (need > r->cap - (tail - r->head_cache))
                return NULL;
        }
    }
    r->pad_pos = r->cap;
    if (pad) { /* pad to the end, record starts at 0 */
        r->pad_pos = pos;
        r->pad_hdr = hdr_word((uint32_t)(to_end - CX_RING_REC_HDR), CX_RING_PAD);
        pos = 0;
    }
    r->claim_pos = pos;
    r->claim_hdr = hdr_word((uint32_t)len, type);
    r->claim_next = (pos + rec) & r->mask;
    r->claim_adv = need - CX_RING_REC_HDR;
    return r->data + pos + CX_RING_REC_HDR;
}

void cx_spsc_ring_commit(struct cx_spsc_ring *r)
{
    /* The consumer reads the word after this record next: zero it (before the release
     * below) so it cannot see a header of an earlier lap there. */
    __atomic_store_n(word_at(r, r->claim_next), 0, __ATOMIC_RELAXED);
    STORE_REL(word_at(r, r->claim_pos), r->claim_hdr);
    if (r->pad_pos != r->cap) /* the consumer reaches the record through the padding */
        STORE_REL(word_at(r, r->pad_pos), r->pad_hdr);
    STORE_REL(&r->ctl->tail, r->ctl->tail + r->claim_adv);
    r->claim_adv = 0;
    if (r->streak++) /* records back to back: take the next one's lines now */
        take_next_lines(r);
}

void cx_spsc_ring_polled(struct cx_spsc_ring *r) { r->streak = 0; }

void cx_spsc_ring_abort(struct cx_spsc_ring *r) { r->claim_adv = 0; }

void cx_spsc_ring_set_barrier(struct cx_spsc_ring *r, enum cx_ring_role role, int registered,
                              int (*barrier)(void))
{
    r->registered = registered;
    r->barrier = barrier;
    uint32_t *announce = role == CX_RING_CONSUMER ? &r->ctl->consumer_barrier
                                                  : &r->ctl->producer_barrier;
    __atomic_store_n(announce, barrier != NULL, __ATOMIC_SEQ_CST);
}

/* The busy end's half of the wake-up handshake: after its stores (a commit, a new head),
 * whether the other end asked to be woken, clearing the flag. Dekker: those stores, then
 * this load; the other end's barrier orders them for us when it arms (cx_spsc_ring.h), and
 * a stale 0 in `announced` only costs the fence. */
static int take_idle(struct cx_spsc_ring *r, uint32_t *idle, const uint32_t *announced)
{
    if (!r->registered || !__atomic_load_n(announced, __ATOMIC_RELAXED))
        atomic_thread_fence(memory_order_seq_cst);
    if (!__atomic_load_n(idle, __ATOMIC_RELAXED))
        return 0;
    return __atomic_exchange_n(idle, 0, __ATOMIC_SEQ_CST) != 0;
}

int cx_spsc_ring_take_reader_idle(struct cx_spsc_ring *r)
{
    return take_idle(r, &r->ctl->reader_idle, &r->ctl->consumer_barrier);
}

int cx_spsc_ring_read(struct cx_spsc_ring *r, cx_ring_handler handler, void *clientd, int limit)
{
    uint64_t head = r->ctl->head; /* only we write it */
    int n = 0;
    while (n < limit) {
        uint64_t pos = head & r->mask;
        uint64_t h = LOAD_ACQ(word_at(r, pos));
        if (!h) /* not published yet (a published header has a type >= 1) */
            break;
        uint32_t len = (uint32_t)h, type = (uint32_t)(h >> 32);
        uint64_t rec = ALIGN_REC(CX_RING_REC_HDR + (uint64_t)len);
        if (rec > r->cap - pos)
            return cx_err_set(EPROTO, "ring: record of %u bytes at offset %llu runs past the "
                              "end of the %llu-byte ring", len, (unsigned long long)pos,
                              (unsigned long long)r->cap);
        if (type != CX_RING_PAD) {
            handler(clientd, type, r->data + pos + CX_RING_REC_HDR, len);
            n++;
        }
        head += rec;
        STORE_REL(&r->ctl->head, head);
    }
    return n;
}

int cx_spsc_ring_take_writer_idle(struct cx_spsc_ring *r)
{
    return take_idle(r, &r->ctl->writer_idle, &r->ctl->producer_barrier);
}

int cx_spsc_ring_empty(const struct cx_spsc_ring *r)
{
    return LOAD_ACQ(&r->ctl->tail) == r->ctl->head;
}

/* The arming end's half of the handshake: raise its flag, fence, and run its barrier, the
 * other end's fence when that end skips it: after this the other end's stores so far are
 * visible and its next look at the flag sees the 1. 0, or -EAGAIN with the flag withdrawn
 * when the barrier failed. */
static int raise_idle(struct cx_spsc_ring *r, uint32_t *idle)
{
    __atomic_store_n(idle, 1, __ATOMIC_SEQ_CST);
    atomic_thread_fence(memory_order_seq_cst);
    if (r->barrier && r->barrier() < 0) {
        __atomic_store_n(idle, 0, __ATOMIC_SEQ_CST);
        return -EAGAIN;
    }
    return 0;
}

int cx_spsc_ring_reader_arm(struct cx_spsc_ring *r)
{
    if (raise_idle(r, &r->ctl->reader_idle) < 0)
        return -EAGAIN;
    if (!cx_spsc_ring_empty(r)) {
        __atomic_store_n(&r->ctl->reader_idle, 0, __ATOMIC_SEQ_CST);
        return -EAGAIN;
    }
    return 0;
}

int cx_spsc_ring_writer_arm(struct cx_spsc_ring *r, size_t len)
{
    if (raise_idle(r, &r->ctl->writer_idle) < 0)
        return -EAGAIN;
    /* worst case with padding (at most rec - 8) and the zeroed word after it: 2 x rec */
    uint64_t need = 2 * ALIGN_REC(CX_RING_REC_HDR + len);
    uint64_t used = r->ctl->tail - __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST);
    if (r->cap - used >= need) {
        __atomic_store_n(&r->ctl->writer_idle, 0, __ATOMIC_SEQ_CST);
        return -EAGAIN;
    }
    return 0;
}
