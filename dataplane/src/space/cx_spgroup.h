/* Reader groups of a pipe, as the space server keeps them (pi_attach_group in
 * ../pipe/cx_pipe.h; GROUP_* in cx_space_proto.h). Pure bookkeeping: no I/O, no clock of
 * its own (the caller passes now, in ms), engine thread only.
 *
 * A group hands the pipe's positions (0-based segment numbers) out to its members: each
 * position is leased to one member at a time, given in order (the positions a departed
 * member held come first, then never-given ones from `next`). A member holds at most
 * CX_GROUP_INFLIGHT leases. An ack removes a lease for good; the floor is the first
 * position not acknowledged (every position below it is), and it moves over runs of
 * acknowledged positions. A member that leaves, whose owner (connection) goes, or that
 * neither acked nor took a lease for its ack_wait while holding leases, is removed and its
 * leases go back to the front of the queue (each with its delivery count + 1).
 */
#ifndef CX_SPGROUP_H
#define CX_SPGROUP_H

#include <stddef.h>
#include <stdint.h>

#define CX_GROUP_INFLIGHT 64      /* leases one member holds at most */
#define CX_GROUP_MEMBERS 64       /* members of one group at most */
#define CX_GROUP_ACK_WAIT_MS 30000 /* default ack_wait */
#define CX_GROUP_NAME_MAX 64      /* a group name is a cursor name (cx_segcursor.h) */

struct cx_spgroup_lease {
    uint64_t pos;
    uint32_t deliveries; /* 1: first time handed out */
};

struct cx_spgroup_member {
    uint64_t id;
    void *owner;
    uint32_t ack_wait_ms;
    double deadline; /* with leases: removed when now passes it */
    struct cx_spgroup_lease lease[CX_GROUP_INFLIGHT];
    int nlease;
};

struct cx_spgroup {
    char name[CX_GROUP_NAME_MAX + 1];
    uint64_t floor, next;  /* acked below floor; never handed out from next on */
    uint64_t *acked;       /* acknowledged positions above the floor, sorted */
    size_t nacked, cap_acked;
    struct cx_spgroup_lease *queue; /* handed back, sorted by position */
    size_t nqueue, cap_queue;
    struct cx_spgroup_member member[CX_GROUP_MEMBERS];
    int nmember;
    uint64_t next_member;
    uint64_t expired;      /* members removed by their ack deadline (stats) */
    struct cx_spgroup *next_group;
};

/* The group called name in *list, made (floor and next at floor) when absent and create;
 * NULL when absent (or out of memory: -ENOMEM set). */
struct cx_spgroup *cx_spgroup_get(struct cx_spgroup **list, const char *name, int create, uint64_t floor);
/* A new member owned by owner (ack_wait_ms 0: the default). 0 and *member, or -EUSERS. */
int cx_spgroup_join(struct cx_spgroup *g, void *owner, uint32_t ack_wait_ms, uint64_t *member);
/* The next lease for member: 0 and *out; -ESRCH (no such member: it left or expired),
 * -ENOBUFS (it holds CX_GROUP_INFLIGHT), -EAGAIN (nothing to hand out now), -EPIPE (the
 * pipe ended at `avail` positions and nothing is left: no queue, no leases of others).
 * avail: positions 0..avail-1 exist. Removes expired members first. */
int cx_spgroup_next(struct cx_spgroup *g, uint64_t member, uint64_t avail, int ended, double now,
                    struct cx_spgroup_lease *out);
/* Acknowledges positions pos[0..n) of member's leases, all or none: 1 when the floor moved,
 * 0 when not, -ESRCH (no such member), -ENOENT (a position it does not hold; message). */
int cx_spgroup_ack(struct cx_spgroup *g, uint64_t member, const uint64_t *pos, size_t n, double now);
/* Takes pos back from member's leases into the queue with its delivery count unchanged
 * (the segment could not be sent). */
void cx_spgroup_unlease(struct cx_spgroup *g, uint64_t member, uint64_t pos);
/* Removes member, handing its leases back: 0 or -ESRCH. */
int cx_spgroup_leave(struct cx_spgroup *g, uint64_t member);
/* Removes every member of owner in all groups of list. */
void cx_spgroup_owner_gone(struct cx_spgroup *list, void *owner);
/* Removes members whose deadline passed; returns how many. */
int cx_spgroup_expire(struct cx_spgroup *g, double now);
/* Leases held by all members. */
size_t cx_spgroup_inflight(const struct cx_spgroup *g);
void cx_spgroup_free_all(struct cx_spgroup **list);

#endif
