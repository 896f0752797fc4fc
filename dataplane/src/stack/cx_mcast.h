/* Multicast fan-out filter (seed netibis.txt 3: "multicast" among the filter drivers): one
 * logical link over the links to many peers. A send goes to every member with the same
 * header and the caller's iovec (each lower link takes it whole or queues a copy, as its
 * contract says: no copy here); progress drives every member and delivers what any of them
 * receives (acks, replies) to the one callback, with the member's index available through
 * cx_mcast_last_member() during the call. A member that fails is dropped and counted;
 * the others go on, so a dead receiver never stalls the sender. The group fails only when
 * no member is left (-ENOTCONN).
 *
 *     struct cx_link *g;  cx_mcast_create(&g);
 *     cx_mcast_add(g, link_to_a);  cx_mcast_add(g, link_to_b);     // links owned by g
 *     cx_link_send(g, &h, iov, n);                                   // to a and b
 */
#ifndef CX_MCAST_H
#define CX_MCAST_H

#include "transport/cx_driver.h"

#define CX_MCAST_MAX 256

/* An empty group. */
int cx_mcast_create(struct cx_link **out);
/* Adds a member (owned by the group from now on). Returns its index, -ENOSPC when full. */
int cx_mcast_add(struct cx_link *group, struct cx_link *member);
/* Closes member i and removes it. -ENOENT when there is none at i. */
int cx_mcast_remove(struct cx_link *group, int i);
/* Members alive now, and members dropped because they failed. */
int cx_mcast_members(struct cx_link *group);
int cx_mcast_dropped(struct cx_link *group);
/* During a receive callback from progress: the index of the member it came from. */
int cx_mcast_last_member(struct cx_link *group);

extern const struct cx_driver_ops cx_mcast_ops;

#endif
