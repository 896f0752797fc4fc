/* A single-producer single-consumer ring of variable-length records in memory two processes
 * share (the application and its sidecar map the same memfd). Written in the style of a
 * claim/commit ring: the producer claims room for one record, fills it in place and commits
 * it; the consumer reads committed records in order, in place, and releases them.
 *
 *     void *p = cx_sc_ring_claim(r, CX_SC_REC_EVENT, len);   // NULL: full (or too large)
 *     memcpy(p, ev, len);  cx_sc_ring_commit(r);
 *     ...
 *     cx_sc_ring_read(r, on_record, arg, 64);               // consumer, in another process
 *
 * Layout: a header (producer position, consumer position and the consumer's "waiting" flag
 * on their own cache lines) followed by `capacity` bytes (a power of two). Records are 8-byte
 * aligned: an 8-byte header {uint32 length of the payload, uint32 type} and the payload. A
 * record that would cross the end is preceded by a padding record up to the end. Positions
 * only grow; the producer publishes a record by advancing `tail` with release order, the
 * consumer frees room by advancing `head`, so no record header is ever read before it is
 * complete and nothing needs zeroing. One claim may be outstanding at a time.
 *
 * Wake-ups: a consumer that finds the ring empty sets `waiting`, checks once more and then
 * blocks on its own channel (a socket); a producer that commits and finds `waiting` set
 * clears it and wakes the consumer (cx_sc_ring_commit returns 1 then).
 */
#ifndef CX_SC_RING_H
#define CX_SC_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CX_SC_RING_HDR 192u   /* header bytes before the data */
#define CX_SC_REC_PAD 0u      /* padding to the end of the data area (skipped by readers) */

struct cx_sc_ring_hdr; /* in the shared region */

/* A process's view of one ring. */
struct cx_sc_ring {
    struct cx_sc_ring_hdr *h;
    uint8_t *data;
    uint64_t capacity;
    uint64_t claim_pos;   /* producer: where the pending claim starts (after any padding) */
    uint64_t claim_next;  /* producer: tail after the pending claim, 0 = none */
    uint32_t claim_len;
    int bad;              /* consumer: a record broke the layout; the ring is unusable */
};

/* Bytes a ring of `capacity` occupies in a region (header + data). */
static inline size_t cx_sc_ring_span(uint64_t capacity) { return CX_SC_RING_HDR + capacity; }

/* Formats a ring at mem (zeroed memory of cx_sc_ring_span(capacity) bytes; capacity a power
 * of two, at least 4096) and attaches r to it. 0 or -EINVAL. */
int cx_sc_ring_init(struct cx_sc_ring *r, void *mem, uint64_t capacity);

/* Attaches r to a ring another process formatted at mem (span bytes mapped). Checks the
 * header's capacity against the span: 0 or -EPROTO. */
int cx_sc_ring_attach(struct cx_sc_ring *r, void *mem, size_t span);

/* Largest payload one record may carry (half the capacity, less its header). */
size_t cx_sc_ring_max(const struct cx_sc_ring *r);

/* Producer: claims room for a record of `type` (not CX_SC_REC_PAD) and len payload bytes.
 * Returns the payload's address, or NULL: the ring is full (errno-style reason in *err:
 * -EAGAIN) or len is above cx_sc_ring_max (-EMSGSIZE). err may be NULL. */
void *cx_sc_ring_claim(struct cx_sc_ring *r, uint32_t type, size_t len, int *err);

/* Producer: publishes the claimed record. Returns 1 when the consumer is waiting and must
 * be woken, else 0. */
int cx_sc_ring_commit(struct cx_sc_ring *r);

/* Producer: shortens the pending claim to len bytes (at most what was claimed), so a
 * record filled with less than planned publishes only that. */
void cx_sc_ring_trim(struct cx_sc_ring *r, size_t len);

/* Producer: gives the claimed room back. */
void cx_sc_ring_abort(struct cx_sc_ring *r);

/* Consumer: the next record, in place: returns 1 and its type, payload and length, 0 when
 * the ring is empty, or -EPROTO (for good) when the shared memory does not hold a valid
 * record there (the other process broke the layout: nothing outside the ring is read). The
 * record stays until cx_sc_ring_release. */
int cx_sc_ring_peek(struct cx_sc_ring *r, uint32_t *type, void **payload, size_t *len);

/* Consumer: frees the record cx_sc_ring_peek returned. */
void cx_sc_ring_release(struct cx_sc_ring *r);

typedef void (*cx_sc_ring_handler)(void *arg, uint32_t type, void *payload, size_t len);

/* Consumer: hands up to `limit` records to fn in order, releasing each after fn returns.
 * Returns how many were read (stops at a broken record: see cx_sc_ring_broken). */
size_t cx_sc_ring_read(struct cx_sc_ring *r, cx_sc_ring_handler fn, void *arg, size_t limit);

/* Consumer: whether a broken record was met (the connection should be closed). */
static inline int cx_sc_ring_broken(const struct cx_sc_ring *r) { return r->bad; }

/* Consumer: about to block. Sets the waiting flag and returns 1 if the ring is still empty
 * (block now; the producer will wake you), or clears it and returns 0 (records came). */
int cx_sc_ring_prepare_wait(struct cx_sc_ring *r);

/* Consumer: clears the waiting flag (after waking up). */
void cx_sc_ring_done_wait(struct cx_sc_ring *r);

/* Positions (bytes since the start): published by the producer, released by the consumer.
 * A record published at tail t has been consumed once head >= t. */
uint64_t cx_sc_ring_tail(const struct cx_sc_ring *r);
uint64_t cx_sc_ring_head(const struct cx_sc_ring *r);

/* Bytes committed and not yet released (for metrics). */
uint64_t cx_sc_ring_used(const struct cx_sc_ring *r);

#ifdef __cplusplus
}
#endif
#endif
