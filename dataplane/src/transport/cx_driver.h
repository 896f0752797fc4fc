/* The one driver interface of Conflux (seed netibis.txt, sections 3-4: a connection is a
 * stack of drivers with one interface; network drivers at the bottom, filter drivers on top).
 *
 * A *network driver* (tcp, shm, ucx, dpdk) owns a scheme ("tcp", "shm", ...) and makes links
 * with listen/accept/connect. A *filter driver* (fragmentation, reliability, multiplexing,
 * multi-protocol; see src/stack) is built on one or more lower links and offers the very same
 * link calls, so whatever sits above cannot tell a bare link from a stack.
 *
 * Every message is one struct cx_frame_hdr (src/common/cx_frame.h, the one header) plus a
 * payload given as an iovec. Drivers put the header on the wire in its encoded 48-byte form
 * and never add a header of their own.
 *
 * Threading: a link is driven by one thread at a time (normally the progress engine,
 * src/engine). send and progress on one link must not run concurrently; callers that share
 * a link serialise with their own lock. Different links are independent.
 *
 * Errors: every call returns 0 (or a count) or a negative errno with cx_errmsg() set.
 */
#ifndef CX_DRIVER_H
#define CX_DRIVER_H

#include "common/cx_frame.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Capability bits a link advertises (the stack builder matches both ends' bits). */
enum cx_cap {
    CX_CAP_RELIABLE = 1u << 0,  /* no loss, no duplication */
    CX_CAP_ORDERED = 1u << 1,   /* delivery in send order */
    CX_CAP_DATAGRAM = 1u << 2,  /* frames may be lost or reordered (needs the reliability filter) */
    CX_CAP_SAME_NODE = 1u << 3, /* both ends must share a node (shared memory) */
    CX_CAP_FABRIC = 1u << 4,    /* needs a fast fabric (RDMA, DPDK) shared by both ends */
    CX_CAP_STREAM = 1u << 5,    /* built on a byte stream (TCP): any size, one copy */
};

struct cx_driver_caps {
    uint32_t flags;        /* enum cx_cap bits */
    size_t max_msg;        /* largest payload one send may carry (0 = CX_FRAME_MAX_MSG) */
    unsigned poll_cost;    /* relative cost of one progress call, 1 = a memory load (shm),
                            * 8 = a system call (tcp); the engine polls costly links less */
    unsigned rank;         /* preference for multi-protocol selection: lower is faster */
};

/* Called by progress for each received message. h is the decoded header (length equals
 * the payload length), payload is valid only during the call (it may point into a ring or
 * a receive buffer); copy what must outlive the call. The callback may call send on the
 * same link; it must not call progress or close on it. */
typedef void (*cx_recv_fn)(void *arg, const struct cx_frame_hdr *h, const void *payload,
                           size_t len);

struct cx_link;
struct cx_listener;

/* What a link accepts from its peer (set_limits). */
struct cx_link_limits {
    uint32_t max_msg;       /* largest payload accepted, 0 = CX_FRAME_MAX_MSG; a header
                             * declaring more is refused before anything is allocated */
    cx_recv_fn on_oversize; /* NULL: a frame over max_msg fails the link (-EMSGSIZE); else its
                             * payload is read and dropped and it is reported here, with
                             * progress's arg, its header and no payload (NULL, 0) */
};

/* The operations of one driver. Network drivers fill every field; filter drivers leave
 * listen/accept/connect/listener_* NULL (they are made by their own constructors). */
struct cx_driver_ops {
    /* Driver name ("tcp", "shm", "ucx", "frag", "rel", "mux", "multi"). */
    const char *name;
    /* URL scheme this network driver serves ("tcp" for "tcp://host:port"), NULL for filters. */
    const char *scheme;

    /* Binds and listens on addr ("tcp://127.0.0.1:0", "shm:///run/x.sock"). A zero TCP port
     * picks a free one (see listener_addr). -EADDRINUSE, -EINVAL for a bad address. */
    int (*listen)(const char *addr, struct cx_listener **out);
    /* The address a peer should connect to (with the real port). Valid until close. */
    const char *(*listener_addr)(struct cx_listener *l);
    /* An fd that is readable when accept would not block. */
    int (*listener_fd)(struct cx_listener *l);
    /* Waits up to timeout_ms (-1 = forever, 0 = poll) for one peer and returns its link.
     * -ETIMEDOUT when none came. The handshake (fd passing, address exchange) is done here. */
    int (*accept)(struct cx_listener *l, int timeout_ms, struct cx_link **out);
    /* Stops listening, removes any socket file, frees l. */
    void (*listener_close)(struct cx_listener *l);

    /* Connects to addr and completes the driver's handshake. -ECONNREFUSED when nobody
     * listens there, -EINVAL for a bad address. */
    int (*connect)(const char *addr, struct cx_link **out);

    /* Sends one message: header h (h->length and h->msg_length are set by the driver from
     * the iovec unless CX_FRAME_F_FRAG is set) and payload iov[0..iovcnt). The link takes
     * the whole message or nothing: what cannot leave now is copied to the link's queue and
     * flushed by later progress calls, so the caller may reuse its buffers on return.
     * -EMSGSIZE above caps.max_msg, -EPIPE / -ECONNRESET once the peer is gone.
     * A driver may instead wait inside send until the transport is done with the caller's
     * buffers (ucx does for messages of 512 KiB and more: zero-copy from the caller's
     * memory, progressing the process's other ucx links meanwhile). */
    int (*send)(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                int iovcnt);

    /* Bytes accepted by send but not yet handed to the wire or ring. */
    size_t (*pending)(struct cx_link *k);

    /* Does at most `budget` units of work without blocking: flushes the send queue and
     * delivers received messages to fn(arg, ...). Returns the number of units done (0 =
     * nothing to do), or a negative errno when the link failed (peer gone: -ECONNRESET);
     * messages received before the failure are delivered first. */
    int (*progress)(struct cx_link *k, cx_recv_fn fn, void *arg, int budget);

    /* An fd the engine may block on: readable when progress may have work. -1 if the
     * driver cannot block (then the engine only backs off). */
    int (*fd)(struct cx_link *k);

    /* Called before the engine blocks on fd(). Returns 0 when blocking is safe (no work is
     * pending and the peer will wake fd when work arrives), -EAGAIN when progress must run
     * first. Drivers set their "reader idle" flag here (shm) or arm their worker (ucx). */
    int (*arm)(struct cx_link *k);

    /* Capabilities of this link (for a filter: what the stack offers upward). */
    void (*caps)(struct cx_link *k, struct cx_driver_caps *out);

    /* Closes the link and frees it (a filter closes its lower links too). Queued data is
     * dropped; call progress until pending() is 0 first for a graceful close. */
    void (*close)(struct cx_link *k);

    /* Optional (NULL = not supported). Sets what the link accepts from its peer (a server
     * bounds what one client can make it allocate). */
    int (*set_limits)(struct cx_link *k, const struct cx_link_limits *lim);

    /* Optional: accept for a server's progress engine. Takes one peer's connection without
     * waiting (-EAGAIN when none is pending) and returns its link at once; the driver's
     * handshake then runs inside progress without blocking (nothing is delivered before it
     * is done) and fails the link with -ETIMEDOUT when not done within handshake_ms. NULL
     * for drivers whose accept never waits for the peer (tcp). */
    int (*accept_start)(struct cx_listener *l, int handshake_ms, struct cx_link **out);
};

/* Every link starts with this; drivers embed it as their first member. */
struct cx_link {
    const struct cx_driver_ops *ops;
};

/* Convenience wrappers (static inline, no state). */
static inline int cx_link_send(struct cx_link *k, const struct cx_frame_hdr *h,
                               const struct iovec *iov, int iovcnt)
{
    return k->ops->send(k, h, iov, iovcnt);
}
static inline int cx_link_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    return k->ops->progress(k, fn, arg, budget);
}
static inline size_t cx_link_pending(struct cx_link *k) { return k->ops->pending(k); }
static inline int cx_link_fd(struct cx_link *k) { return k->ops->fd(k); }
static inline int cx_link_arm(struct cx_link *k) { return k->ops->arm(k); }
static inline void cx_link_caps(struct cx_link *k, struct cx_driver_caps *c) { k->ops->caps(k, c); }
static inline int cx_link_set_limits(struct cx_link *k, const struct cx_link_limits *lim)
{
    return k->ops->set_limits ? k->ops->set_limits(k, lim) : -ENOTSUP;
}
static inline void cx_link_close(struct cx_link *k)
{
    if (k) k->ops->close(k);
}

/* Finds the network driver for an address's scheme ("tcp://..." -> the tcp ops). Returns
 * NULL (with cx_errmsg set) for an unknown scheme or one not built into this library. */
const struct cx_driver_ops *cx_driver_for(const char *addr);

/* listen/connect through cx_driver_for(addr). */
int cx_listen(const char *addr, const struct cx_driver_ops **ops, struct cx_listener **out);
int cx_connect(const char *addr, struct cx_link **out);

/* Takes one pending connection for a server without waiting for the peer, so one silent
 * or slow peer never holds the thread serving the others: the driver's accept_start (the
 * handshake runs inside the link's progress and fails it with -ETIMEDOUT once handshake_ms
 * passed; the owner must call progress at that deadline even when the fd stays quiet) or,
 * for drivers without it, accept with no wait. -EAGAIN or -ETIMEDOUT when nobody waits.
 * Every Conflux listener (space server, pipe runtime, channel runtime) accepts through it. */
int cx_listener_accept(const struct cx_driver_ops *ops, struct cx_listener *l, int handshake_ms,
                       struct cx_link **out);

/* The handshake deadline of accepted connections in the pipe and channel runtimes:
 * CONFLUX_HANDSHAKE_MS (100..600000) or CX_HANDSHAKE_MS. */
#define CX_HANDSHAKE_MS 5000
int cx_handshake_ms(void);

/* Sends until pending() is 0 or the link fails, delivering received messages to fn. Blocks
 * (polling, with short sleeps) at most timeout_ms; -ETIMEDOUT when time ran out. */
int cx_link_flush(struct cx_link *k, cx_recv_fn fn, void *arg, int timeout_ms);

/* The exported ops tables of the network drivers built into this library. */
extern const struct cx_driver_ops cx_tcp_ops;
extern const struct cx_driver_ops cx_shm_ops;
extern const struct cx_driver_ops cx_udp_ops; /* src/transport/udp (datagrams: use a stack) */
#ifdef CX_HAVE_UCX
extern const struct cx_driver_ops cx_ucx_ops; /* src/transport/ucx, when UCX is installed */
#endif
#ifdef CX_HAVE_TLS
extern const struct cx_driver_ops cx_tls_ops; /* src/transport/tls, when OpenSSL is installed */
#endif
#ifdef CX_HAVE_DPDK
extern const struct cx_driver_ops cx_dpdk_ops; /* src/transport/dpdk, when DPDK is installed */
#endif

#ifdef __cplusplus
}
#endif
#endif
