/* A single-producer single-consumer ring of variable-size records in shared memory (in the
 * spirit of aeron's concurrent/aeron_spsc_rb.h). The producer claims space, writes the
 * record in place and commits it (or aborts); the consumer reads records in place with a
 * handler and frees their space afterwards. Positions are 64-bit counters that only grow;
 * a record never wraps (a padding record fills the end of the buffer instead).
 *
 * Memory layout (shared by both processes): one struct cx_ring_ctl (a page) and the data
 * area of `capacity` bytes (a power of two, at least 4 KiB), all zero when the ring is
 * initialised (a fresh memfd is). Records are { u64 header, body[length] } aligned to 64
 * bytes, the header being type << 32 | length in the host's order (both ends share it).
 *
 * Publication: the producer writes the body, stores zero in the header word that follows
 * the record (so the slot the consumer reads next is never stale from an earlier lap),
 * then stores the header with release order, and only then advances tail. The consumer
 * polls the header word at its head (acquire) and never reads tail on that path, so a
 * small record costs the consumer the record's own cache lines only. Records start on a
 * 64-byte cache line (the header word first), so one of up to 56 body bytes is one line.
 * A header that is not zero but claims a record past the ring's end is corruption
 * (-EPROTO). One 8-byte word
 * stays free after the newest record (the zero), so the usable room is capacity - 8.
 *
 * The ring also carries two idle flags for the wake-up protocol of the shm driver: the
 * consumer sets reader_idle before blocking and the producer wakes it after a commit if
 * set; the producer sets writer_idle when the ring is full and the consumer wakes it after
 * freeing space. Both use sequentially consistent fences (a Dekker handshake), so a wake-up
 * cannot be lost. The producer's fence after every commit drains its store buffer, which
 * halves a stream's throughput (a 1 KB event waits for all 17 of its lines), and the
 * consumer's after every read lies on a ping-pong's path; so where the system can, the
 * side that is about to sleep makes the other side's fence for it when it arms (an
 * asymmetric Dekker: cx_spsc_ring_set_barrier, e.g. membarrier(2) GLOBAL_EXPEDITED, which
 * runs a full barrier on every running thread of the registered peer process), and the
 * busy side, seeing the other's barrier announced and knowing itself registered, commits
 * and frees without one.
 */
#ifndef CX_SPSC_RING_H
#define CX_SPSC_RING_H

#include <stddef.h>
#include <stdint.h>

#define CX_RING_CTL_SIZE 4096u
#define CX_RING_REC_HDR 8u
#define CX_RING_PAD 1u /* record type reserved for padding */

struct cx_ring_ctl {
    _Alignas(64) uint64_t tail; /* producer position (bytes ever committed) */
    _Alignas(64) uint64_t head; /* consumer position (bytes ever freed) */
    _Alignas(64) uint32_t reader_idle;
    uint32_t consumer_barrier; /* the consumer's arm makes the producer's fence (above) */
    _Alignas(64) uint32_t writer_idle;
    uint32_t producer_barrier; /* the producer's arm makes the consumer's fence */
    _Alignas(64) uint64_t capacity;
};

/* One end's view of a ring (each process keeps its own). */
struct cx_spsc_ring {
    struct cx_ring_ctl *ctl;
    uint8_t *data;
    uint64_t cap, mask;
    uint64_t head_cache;  /* producer: last head seen */
    uint64_t claim_pos;   /* producer: offset of the claimed record */
    uint64_t claim_hdr;   /* producer: its header word */
    uint64_t claim_next;  /* producer: offset of the header word after it (zeroed) */
    uint64_t pad_pos;     /* producer: offset of a padding record before it, or cap */
    uint64_t pad_hdr;
    uint64_t claim_adv;   /* producer: bytes the commit will publish (0 = no claim) */
    uint64_t hot;         /* producer: the hot window (cx_spsc_ring_set_hot), 0 = none */
    uint64_t hot_look;    /* producer: tail at which it may read head again for it */
    unsigned streak;      /* producer: commits since the last cx_spsc_ring_polled */
    int registered;       /* this end's process takes the other end's barrier */
    int (*barrier)(void); /* the barrier this end makes when it arms, or NULL */
};

/* Initialises a fresh ring control block (by the creator, before sharing it). */
void cx_spsc_ring_init(struct cx_ring_ctl *ctl, uint64_t capacity);

/* Attaches a view to a control block and its data area. -EINVAL if capacity is not a power
 * of two or disagrees with expect_cap. */
int cx_spsc_ring_attach(struct cx_spsc_ring *r, struct cx_ring_ctl *ctl, uint8_t *data,
                        uint64_t expect_cap);

/* Producer: keeps small records in the first `bytes` of the ring while the consumer keeps
 * up. A record that would end past that hot window and fits in half of it starts over at
 * offset 0 behind a padding record to the end when the consumer is less than a quarter
 * of the window behind (and the record fits before it); otherwise (the consumer lags) it goes on
 * through the lap as usual. So a link whose consumer keeps up touches the same cache lines
 * lap after lap (a ring walked whole, megabytes, misses the caches on every record), and
 * the full capacity is still there for bursts and large records. The padding holds its
 * part of the ring until the consumer passes it, one header read later. The producer
 * reads the consumer's position for this at most once per quarter window. 0 (the default)
 * or a size not below the capacity: no window. */
void cx_spsc_ring_set_hot(struct cx_spsc_ring *r, uint64_t bytes);

/* The largest body try_claim accepts (half the capacity). */
static inline size_t cx_spsc_ring_max_body(const struct cx_spsc_ring *r) { return r->cap / 2 - CX_RING_REC_HDR; }

/* Producer: reserves a record of `len` body bytes of the given type (>= 2) and returns a
 * pointer to the body, or NULL when the ring has no room now. Only one claim may be open. */
void *cx_spsc_ring_try_claim(struct cx_spsc_ring *r, uint32_t type, size_t len);
/* Producer: publishes the claimed record (release store of its header, then tail). */
void cx_spsc_ring_commit(struct cx_spsc_ring *r);
/* Producer: the link's progress ran (its owner polls between sends). A commit that follows
 * another with no poll between is a stream: it takes ownership of the next record's cache
 * lines at once (prefetch for writing), which a lone record does not (cx_spsc_ring.c). */
void cx_spsc_ring_polled(struct cx_spsc_ring *r);
/* Producer: drops the claimed record; nothing becomes visible. */
void cx_spsc_ring_abort(struct cx_spsc_ring *r);
/* Producer: after a commit, whether the consumer asked to be woken (clears the flag). */
int cx_spsc_ring_take_reader_idle(struct cx_spsc_ring *r);

/* Consumer: calls handler(clientd, type, body, len) for up to `limit` records, in order, in
 * place, freeing each record's space after its handler returns. Returns records read, or
 * -EPROTO (cx_errmsg set, nothing consumed from that record on) for a header that claims
 * a record past the ring's end. */
typedef void (*cx_ring_handler)(void *clientd, uint32_t type, uint8_t *body, uint32_t len);
int cx_spsc_ring_read(struct cx_spsc_ring *r, cx_ring_handler handler, void *clientd, int limit);
/* Consumer: after freeing space, whether the producer asked to be woken (clears the flag). */
int cx_spsc_ring_take_writer_idle(struct cx_spsc_ring *r);

/* One end's part in the asymmetric handshake (above). `registered`: this end's process
 * takes the other end's barrier, so this end may skip its own fence (commit for a
 * producer, free for a consumer) once the other end has announced a barrier; until then,
 * or with 0, it fences. `barrier`: run by this end's arm (reader_arm for the consumer,
 * writer_arm for the producer) between raising its flag and its last look at the ring; it
 * must order every running thread of the other end's process as a full fence would (0,
 * or negative when it could not: the arm then declines). NULL (the default): none, and
 * the other end keeps its fence. Set both before the link carries records. */
enum cx_ring_role { CX_RING_PRODUCER, CX_RING_CONSUMER };
void cx_spsc_ring_set_barrier(struct cx_spsc_ring *r, enum cx_ring_role role, int registered,
                              int (*barrier)(void));

/* Consumer: announces it will block. Returns 0 if the ring is still empty (the producer
 * will wake it), -EAGAIN if a record arrived meanwhile (flag withdrawn). */
int cx_spsc_ring_reader_arm(struct cx_spsc_ring *r);
/* Producer: announces it waits for `len` body bytes of room. 0 if still full (the consumer
 * will wake it), -EAGAIN if room appeared meanwhile. */
int cx_spsc_ring_writer_arm(struct cx_spsc_ring *r, size_t len);

/* Whether the consumer has nothing to read (tail: for the idle handshake, not the poll). */
int cx_spsc_ring_empty(const struct cx_spsc_ring *r);

#endif
