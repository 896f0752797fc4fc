/* Reliability filter (seed netibis.txt 3): exactly-once, in-order delivery over a lower
 * link that may lose, duplicate or reorder frames (a datagram driver), and the memory of
 * what was not yet acknowledged that a multi-protocol failover needs (cx_multi.h).
 *
 * Sender: every message gets the next link sequence number in the header's seq (the
 * filter owns seq on its link: a seq given by the caller is replaced; the stack builder
 * puts the seq-carrying filter, cx_seq.h, on top to keep it) and a copy is kept until
 * acknowledged. At most `window` messages are in flight; later ones wait (accepted,
 * counted in pending()).
 * Receiver: delivers seq == next at once, buffers seq inside the window, drops duplicates.
 * Acks: the cumulative ack (highest seq delivered in order) rides in the ack field
 * (CX_FRAME_F_ACK) of every frame we send; when we have no data to send, a bare
 * CX_FRAME_ACK goes out after 32 deliveries or at the end of a progress call. A frame that
 * arrives out of order is acknowledged selectively at once: a bare ACK whose seq names it,
 * so the sender retransmits only the holes.
 * Retransmission: over an unreliable lower link, a message unacknowledged after its RTO and
 * not selectively acked is sent again (F_RETX), its own RTO doubling per try up to 500 ms.
 * The RTO comes from the measured round trip (RFC 6298: srtt + 4 rttvar, samples only from
 * messages sent once, Karn's rule), 5 ms before the first sample, at least 1 ms. Over a
 * reliable lower link there are no timers; cx_rel_retransmit_all resends every
 * unacknowledged message after the lower link changed (failover).
 *
 * Window strategy (pluggable): how many messages may be in flight. cx_rel_fixed (the
 * default) keeps the window at its maximum; cx_rel_aimd starts small, grows by one per
 * window of acknowledged messages and halves when a retransmission timer fires (TCP-like
 * congestion avoidance, for lossy or shared paths). A strategy sees every ack and timeout
 * through the struct cx_rel_cc it owns. */
#ifndef CX_REL_H
#define CX_REL_H

#include "transport/cx_driver.h"

struct cx_rel_stats {
    uint64_t sent, retransmitted, delivered, duplicates, out_of_order, acks_sent;
};

/* Congestion state a strategy reads and writes. window: messages allowed in flight now
 * (1..max_window); srtt/rttvar/rto: the round-trip estimate kept by the filter. */
struct cx_rel_cc {
    unsigned window, max_window;
    double cwnd; /* a strategy's fractional window */
    uint64_t srtt_ns, rttvar_ns, rto_ns;
    uint64_t timeouts;
};

struct cx_rel_strategy {
    const char *name;
    void (*init)(struct cx_rel_cc *cc);              /* window set from max_window */
    void (*on_ack)(struct cx_rel_cc *cc, unsigned n); /* n messages newly acknowledged */
    void (*on_timeout)(struct cx_rel_cc *cc);        /* a retransmission timer fired */
};

extern const struct cx_rel_strategy cx_rel_fixed; /* window = max_window always */
extern const struct cx_rel_strategy cx_rel_aimd;  /* additive increase, multiplicative decrease */

/* Builds a reliability filter over lower (owned on success). window 0 = 1024 messages (the most in
 * flight and the receive window). cx_rel_create uses cx_rel_fixed. */
int cx_rel_create(struct cx_link *lower, unsigned window, struct cx_link **out);
int cx_rel_create_with(struct cx_link *lower, unsigned window, const struct cx_rel_strategy *strategy,
                       struct cx_link **out);
/* The filter's congestion state (read-only for callers: metrics, tests). */
const struct cx_rel_cc *cx_rel_cc(struct cx_link *rel);
/* Resends every message not yet acknowledged, in order, and repeats our cumulative ack
 * at the next progress (after a failover both may have been lost with the old link). */
int cx_rel_retransmit_all(struct cx_link *rel);
/* Messages sent and not yet acknowledged. */
size_t cx_rel_unacked(struct cx_link *rel);
void cx_rel_stats(struct cx_link *rel, struct cx_rel_stats *out);
/* The link under the filter. */
struct cx_link *cx_rel_lower(struct cx_link *rel);
/* Frees the filter (and what it kept) without closing its lower link, which it returns to
 * the caller (a builder undoing a half-built stack). */
struct cx_link *cx_rel_release(struct cx_link *rel);

extern const struct cx_driver_ops cx_rel_ops;

#endif
