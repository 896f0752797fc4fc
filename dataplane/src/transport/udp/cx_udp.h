/* The udp network driver: "udp://host:port" over kernel UDP sockets (IPv4).
 *
 * A datagram driver: caps are CX_CAP_DATAGRAM (frames may be lost, duplicated or
 * reordered), so the stack builder (src/stack/cx_stack.h) puts the reliability filter and,
 * for messages above max_msg, the fragmentation filter on top of it. One frame (48-byte
 * cx_frame header + payload) is one datagram; the driver adds nothing.
 *
 * max_msg (the payload of one datagram) follows the route to the peer, read with IP_MTU
 * once the socket is connected: route MTU - 20 (IPv4) - 8 (UDP) - 48 (frame header), at most
 * 65459 (the largest IPv4 UDP payload, 65507, minus the header). On Ethernet (MTU 1500)
 * that is 1424 bytes, so no datagram is ever IP-fragmented: a lost IP fragment would lose
 * the whole datagram, and under loss a fragmented datagram rarely survives. On loopback
 * (MTU 65536) it is 65459. CONFLUX_UDP_MAX_MSG=<bytes> lowers it (minimum 64). Datagrams
 * are sent without DF (IP_PMTUDISC_DONT): if the route shrinks later the kernel fragments
 * rather than failing sends.
 *
 * Handshake (listen/accept/connect): a connecting peer sends HELLO (a CTRL frame, channel
 * 0, format CX_UDP_CTRL_TOKEN, 16-byte payload {op, version, 6 reserved, nonce}) to the
 * listener every 50 ms doubling to 400 ms for up to 5 s. accept takes one HELLO, makes a
 * new socket bound to the listener's address and port (SO_REUSEADDR) and connected to the
 * peer, and answers WELCOME from it; the kernel then routes that peer's datagrams to the
 * connected socket (an exact 4-tuple beats the listener's wildcard), so every accepted peer
 * has its own socket and fd, and links stay independent (one thread per link, no shared
 * demultiplexer). A repeated HELLO (its WELCOME was lost) is answered again by the
 * accepted link's progress; a duplicated HELLO still queued at the listener is recognised
 * by its nonce and ignored. connect returns -ECONNREFUSED when nobody listens (ICMP port
 * unreachable) and -ETIMEDOUT when no WELCOME came. The handshake has two legs: accept
 * returns after sending WELCOME, so if that WELCOME is lost the accepting side must keep
 * calling progress while the peer is still in connect (the engine does).
 *
 * A dead peer: a closed link sends BYE; a process that died leaves a closed port, and
 * the next datagram brings back ICMP port unreachable; both fail the link with
 * -ECONNRESET. A silent peer (host gone, network cut): while progress runs and nothing came
 * from the peer for 1 s (or a quarter of the timeout, if shorter), the link sends PING
 * (answered with PONG by the peer's progress: the PING makes the peer's fd readable, so a
 * peer blocked in its engine wakes up); after CONFLUX_UDP_PEER_TIMEOUT_MS (default 10000,
 * 0 = never) of unanswered pings it fails with -ECONNRESET. An idle link whose thread
 * blocks sends nothing (no CPU when idle), so a peer lost while both sides were idle is
 * noticed at the next send.
 *
 * Limits: IPv4 only. Listening again on a fixed port while links accepted from an earlier
 * listener on it are open fails with -EADDRINUSE (their sockets hold the port). A peer that
 * reconnects from the same address and port while its old link is open is not told apart
 * from it.
 */
#ifndef CX_UDP_H
#define CX_UDP_H

#include "transport/cx_driver.h"

#include <stdint.h>

/* Largest IPv4 UDP payload, and the largest frame payload it leaves. */
#define CX_UDP_MAX_DATAGRAM 65507u
#define CX_UDP_MAX_MSG (CX_UDP_MAX_DATAGRAM - CX_FRAME_HDR_SIZE)

/* The format token marking the driver's own control frames (CTRL on channel 0): the bytes
 * "CXUDPCTL". Other CTRL frames pass through to the caller. */
#define CX_UDP_CTRL_TOKEN 0x4C54435044555843ull

struct cx_udp_stats {
    uint64_t sent, received;    /* data datagrams */
    uint64_t queued;            /* datagrams the socket could not take at once (sent later) */
    uint64_t stray, bad;        /* dropped: from another address / not a valid frame */
    uint64_t pings, ctrl;       /* keep-alive pings sent / control frames handled */
};

/* Counters of a udp link. -EINVAL (cx_errmsg set) when k is not a udp link. */
int cx_udp_stats(struct cx_link *k, struct cx_udp_stats *out);

/* The exported ops table (also declared in cx_driver.h). */
extern const struct cx_driver_ops cx_udp_ops;

#endif
