/* Multi-protocol filter with failover (seed padico-corba-mpi.txt 3.2 VSocket, netibis.txt 3
 * "multi-protocol"): one logical link over several lower links to the same peer, ordered
 * best first (shm, then ucx/dpdk, then tcp). Sends go over the best link still alive;
 * progress drives all of them (a peer may still be draining the old one). When the active
 * link fails (a send or progress error), the filter switches to the next one and calls
 * on_switch, which the stack builder wires to cx_rel_retransmit_all on the reliability
 * filter above, so everything not yet acknowledged is sent again over the new link and the
 * receiver's reliability filter drops what it already had: nothing is lost or duplicated.
 * That rel is also the reliability of a datagram member (udp, dpdk): it runs its
 * retransmission timers while the active link is one (it reads this filter's caps, the
 * active link's, on every progress), and the builder puts fragmentation above it, cut to
 * the smallest max_msg among the links, so every frame fits whichever link carries it.
 *
 *     multi = cx_multi_create({shm, tcp}, 2)  ->  rel = cx_rel_create(multi)  (cx_stack.h)
 */
#ifndef CX_MULTI_H
#define CX_MULTI_H

#include "transport/cx_driver.h"

#define CX_MULTI_MAX 4

/* Builds the filter over links[0..n) (owned on success), best first. 0, -EINVAL, -ENOMEM,
 * or epoll_create1's error (-EMFILE); on failure the links stay the caller's. */
int cx_multi_create(struct cx_link **links, int n, struct cx_link **out);
/* Frees the filter without closing its links, which go back to the caller (a builder
 * undoing a half-built stack). */
void cx_multi_release(struct cx_link *multi);
/* Called after each switch with the index of the new active link. */
void cx_multi_on_switch(struct cx_link *multi, void (*fn)(void *arg, int active), void *arg);
/* Index of the link sends go to now; -1 when all failed. */
int cx_multi_active(struct cx_link *multi);
/* Declares link i failed and closes it (operator action, tests: "kill the fast link"). */
void cx_multi_fail(struct cx_link *multi, int i);
/* The lower link i (NULL once failed). */
struct cx_link *cx_multi_lower(struct cx_link *multi, int i);

extern const struct cx_driver_ops cx_multi_ops;

#endif
