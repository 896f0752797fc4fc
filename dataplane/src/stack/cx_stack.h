/* The stack builder (seed netibis.txt 4: stacks are built at connection time from what both
 * ends have). Two steps:
 *
 * 1. cx_stack_plan: from both ends' advertisements (node, fabric, listen addresses) pick the
 *    common links, best first: shm when both ends share a node, ucx/dpdk when they share a
 *    fabric, then tcp, udp, and tls last; between clusters only tls (mutual TLS over the
 *    WAN). Only schemes built into this library count. Pure function; the connecting side dials the planned addresses.
 * 2. cx_stack_assemble: given the connected links (same order on both ends), wraps one link
 *    in what its capabilities ask for (reliability under a datagram driver, fragmentation
 *    over a small max_msg) and several in a multi-protocol filter under one reliability
 *    filter whose retransmit_all runs on failover (fragmentation above it when a link's
 *    max_msg is small). One reliable link collapses to itself (no filter, no cost).
 *
 *    On every stack, whatever the drivers, the receiver gets the seq its sender gave (with
 *    type, channel, format and the message's length): where the builder puts a reliability
 *    filter in (it numbers its own frames in seq) it puts the seq-carrying filter on top
 *    (cx_seq.h: the caller's seq in the first 8 bytes of the payload, so such a stack's
 *    max_msg is CX_FRAME_MAX_MSG - 8). From the top, with a datagram link: seq -> frag ->
 *    rel -> link; with several links: seq -> (frag ->) rel -> multi -> each link as it is.
 *    Rel keeps ack, F_ACK, F_RETX and frames of type ACK for itself.
 *
 *    With several links the one rel above the multi is also the reliability of a datagram
 *    member (udp, dpdk): it runs retransmission timers while the active link is a datagram
 *    one. Fragmentation goes above that rel, cut to the smallest max_msg among the links, so
 *    rel acknowledges and resends whole fragments, each fitting every link: every message
 *    arrives once and in order across a switch, and a lost fragment fails no link. The
 *    price: with a small-MTU link in the set, large messages go in fragments on every link
 *    (with none, as shm + tcp, there is no frag). Why not frag or rel per member: cx_stack.c.
 *
 * Optionally a mux (cx_mux.h) goes on top for many channels. */
#ifndef CX_STACK_H
#define CX_STACK_H

#include "stack/cx_multi.h"
#include "transport/cx_driver.h"

struct cx_stack_adv {
    const char *node;   /* node identity (Kubernetes node name), "" = unknown */
    const char *fabric; /* fast-fabric name (Fabric CR), "" = none */
    const char *addrs[CX_MULTI_MAX]; /* listen addresses, any order */
    int naddr;
    const char *cluster; /* cluster (site) name, NULL/"" = unknown; between clusters only tls */
};

/* Writes into out[] the remote addresses to dial, best first; returns their count (>= 1),
 * or -EHOSTUNREACH when no scheme is common (cx_errmsg says which were offered). */
int cx_stack_plan(const struct cx_stack_adv *local, const struct cx_stack_adv *remote,
                  const char *out[CX_MULTI_MAX]);

/* The preference rank of a scheme (lower is better), or -1 if unknown. */
int cx_stack_scheme_rank(const char *addr);

/* Builds the stack over links[0..n), best first; on both ends of a connection the links
 * must be given in the same order. Ownership: on success the links belong to the stack
 * (closing *out closes them); on failure (-EINVAL for a bad list: n out of 1..CX_MULTI_MAX, a
 * NULL link, a link given twice; -ENOMEM; -EMFILE and the like when the multi filter gets no
 * epoll set) nothing is closed, the links are still the caller's to use or close, whatever
 * the builder had made over them is freed, and *out is not written (so `links` and `out`
 * may be the same pointer, as in cx_stack_assemble(&k, 1, &k)). */
int cx_stack_assemble(struct cx_link **links, int n, struct cx_link **out);

/* For a stack with a reliability filter: that filter (NULL otherwise), for cx_rel_stats,
 * cx_rel_unacked and cx_rel_cc. */
struct cx_link *cx_stack_rel(struct cx_link *stack);

/* For a stack with failover: its multi filter (NULL otherwise), to observe or force it. */
struct cx_link *cx_stack_multi(struct cx_link *stack);

#endif
