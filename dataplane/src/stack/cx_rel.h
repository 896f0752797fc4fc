/* Reliability filter (seed netibis.txt 3): exactly-once, in-order delivery over a lower
 * link that may lose, duplicate or reorder frames (a datagram driver), and the memory of
 * what was not yet acknowledged that a multi-protocol failover needs (cx_multi.h).
 *
 * Sender: every DATA message gets the next link sequence number in the header's seq (the
 * filter owns seq on its link: a seq given by the caller is not preserved; layers that need
 * their own id carry it in the payload) and a copy is kept until acknowledged. At most
 * `window` messages are in flight; later ones wait (accepted, counted in pending()).
 * Receiver: delivers seq == next at once, buffers seq inside the window, drops duplicates.
 * Acks: the cumulative ack (highest seq delivered in order) rides in the ack field
 * (CX_FRAME_F_ACK) of every frame we send; when we have no data to send, a bare
 * CX_FRAME_ACK goes out after 32 deliveries or at the end of a progress call. A frame that
 * arrives out of order is acknowledged selectively at once: a bare ACK whose seq names it,
 * so the sender retransmits only the holes.
 * Retransmission: over an unreliable lower link, a message unacknowledged after its RTO
 * (5 ms doubling to 500 ms per try) and not selectively acked is sent again (F_RETX). Over
 * a reliable lower link there are no timers; cx_rel_retransmit_all resends every
 * unacknowledged message after the lower link changed (failover). */
#ifndef CX_REL_H
#define CX_REL_H

#include "transport/cx_driver.h"

struct cx_rel_stats {
    uint64_t sent, retransmitted, delivered, duplicates, out_of_order, acks_sent;
};

/* Builds a reliability filter over lower (owned). window 0 = 1024 messages. */
int cx_rel_create(struct cx_link *lower, unsigned window, struct cx_link **out);
/* Resends every message not yet acknowledged, in order, and repeats our cumulative ack
 * at the next progress (after a failover both may have been lost with the old link). */
int cx_rel_retransmit_all(struct cx_link *rel);
/* Messages sent and not yet acknowledged. */
size_t cx_rel_unacked(struct cx_link *rel);
void cx_rel_stats(struct cx_link *rel, struct cx_rel_stats *out);
/* The link under the filter. */
struct cx_link *cx_rel_lower(struct cx_link *rel);

extern const struct cx_driver_ops cx_rel_ops;

#endif
