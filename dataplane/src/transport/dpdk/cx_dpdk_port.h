/* The one DPDK port of a process (internal to the dpdk driver): EAL start-up, the mbuf pool,
 * one RX and one TX queue shared by every link under one lock, the UDP-port table that
 * demultiplexes received frames to listeners and links, ARP, and the watcher thread. The
 * watcher polls the port every 100 ms and sends the links' keepalives, so a link stays alive
 * while its owner is busy elsewhere; while some link is armed (its owner blocks on the
 * link's eventfd: no PMD used here has RX interrupts) it polls without pause for the first
 * 100 us after each arm (CONFLUX_DPDK_WATCH_SPIN_US), then every 50 us to 1 ms.
 *
 * Functions named *_locked must be called with the port lock held. */
#ifndef CX_DPDK_PORT_H
#define CX_DPDK_PORT_H

#include "common/cx_frame.h"
#include "transport/dpdk/cx_dpdk.h"
#include "transport/dpdk/cx_dpdk_wire.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

struct rte_mbuf;
struct rte_mempool;

enum { CX_DPDK_EP_LISTENER = 1, CX_DPDK_EP_LINK = 2 };

/* First member of the driver's listener and link structs: what a UDP port is bound to. */
struct cx_dpdk_ep {
    int kind;
    uint16_t lport;             /* the bound UDP port */
    struct cx_dpdk_ep *next;    /* every bound endpoint, for the watcher */
};

#define CX_DPDK_ARP_SLOTS 64

struct cx_dpdk_port {
    pthread_mutex_t lock;
    uint16_t port_id;
    struct rte_mempool *pool;
    uint8_t mac[6];
    uint32_t ip;                /* host order; 0 until configured */
    unsigned mtu;               /* IP MTU of the port */
    size_t max_payload;         /* largest cx payload: mtu - 20 - 8 - 48 */
    unsigned peer_timeout_ms;
    struct cx_dpdk_ep **bound;  /* [65536] by UDP port */
    struct cx_dpdk_ep *eps;     /* list of bound endpoints */
    uint16_t next_ephemeral;
    struct { uint32_t ip; uint8_t mac[6]; uint64_t asked_ns; int known; } arp[CX_DPDK_ARP_SLOTS];
    unsigned arp_next;
    struct cx_dpdk_stats st;
    /* watcher: polls while some link is armed (its owner blocks on the link's eventfd) */
    pthread_t watcher;
    pthread_cond_t wake;
    int armed, stop, watcher_started;
    int napping;                /* the watcher sleeps: an arm signals wake */
    uint64_t armed_ns;          /* when a link last armed: the watcher spins ... */
    uint64_t spin_ns;           /* ... this long after it */
    char desc[64];
};

/* The process's port, set up from the environment on first use. 0 or a negative errno. */
int cx_dpdk_port_get(struct cx_dpdk_port **out);

/* Monotonic nanoseconds. */
uint64_t cx_dpdk_now_ns(void);

/* One RX burst: frames are parsed and handed to cx_dpdk_on_udp_locked (below) or to ARP;
 * the rest dropped. Returns the number of frames received. */
int cx_dpdk_port_poll_locked(struct cx_dpdk_port *p);

/* Binds ep to UDP port want (0 = a free ephemeral port). -EADDRINUSE when taken. */
int cx_dpdk_port_bind_locked(struct cx_dpdk_port *p, uint16_t want, struct cx_dpdk_ep *ep);
void cx_dpdk_port_unbind_locked(struct cx_dpdk_port *p, struct cx_dpdk_ep *ep);

/* Builds a frame from src_port to dst carrying header h (encoded as is) and len payload
 * bytes from iov. NULL when the pool is empty (counted as a TX drop). No lock needed. */
struct rte_mbuf *cx_dpdk_port_frame(struct cx_dpdk_port *p, uint16_t src_port,
                                    const struct cx_dpdk_addr *dst, const struct cx_frame_hdr *h,
                                    const struct iovec *iov, int iovcnt, size_t len);

/* Hands up to n frames to the TX queue; returns how many it took (the caller keeps or frees
 * the rest). */
unsigned cx_dpdk_port_tx_locked(struct cx_dpdk_port *p, struct rte_mbuf **m, unsigned n);

/* Sends a control message from src_port to dst (best effort: dropped if the queue is full). */
void cx_dpdk_port_ctrl_locked(struct cx_dpdk_port *p, uint16_t src_port,
                              const struct cx_dpdk_addr *dst, uint8_t op, uint32_t nonce);

/* Looks up ip's MAC: 0 when known (our own IP resolves to our MAC: the fabric hairpins it),
 * -EAGAIN after sending (at most every 100 ms) an ARP request. */
int cx_dpdk_port_arp_locked(struct cx_dpdk_port *p, uint32_t ip, uint8_t mac[6]);
void cx_dpdk_port_learn_locked(struct cx_dpdk_port *p, uint32_t ip, const uint8_t mac[6]);
/* Drops ip's MAC (it stopped answering: the next lookup asks again). */
void cx_dpdk_port_forget_locked(struct cx_dpdk_port *p, uint32_t ip);
/* Sends a gratuitous ARP for our address (at start and when the address is set). */
void cx_dpdk_port_announce_locked(struct cx_dpdk_port *p);

/* A link was armed: the watcher polls at once, and without pause for a while. */
void cx_dpdk_port_armed_locked(struct cx_dpdk_port *p);

/* Implemented by the driver (cx_dpdk.c), called by the port with the lock held: */
/* A UDP frame for a bound port (ep) or an unbound one (ep NULL). payload = the UDP payload.
 * Returns 1 if the driver kept m (it frees it later), 0 if the port should free it. */
int cx_dpdk_on_udp_locked(struct cx_dpdk_port *p, struct cx_dpdk_ep *ep,
                          const struct cx_dpdk_rx *rx, const uint8_t *payload,
                          struct rte_mbuf *m);
/* The watcher's round: keepalives and silent peers of every open link. */
void cx_dpdk_on_watch_locked(struct cx_dpdk_port *p, uint64_t now_ns);

#endif
