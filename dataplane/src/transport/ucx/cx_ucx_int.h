/* Internals shared by the ucx driver's files (cx_ucx.c: connection and ops table,
 * cx_ucx_xfer.c: send and receive, cx_ucx_share.c: link ownership and helping blocked
 * senders). Not a public header: the driver's only export is cx_ucx_ops. */
#ifndef CX_UCX_INT_H
#define CX_UCX_INT_H

#include "transport/cx_driver.h"
#include "transport/ucx/cx_ucx_pool.h"

#include <stdint.h>
#include <ucp/api/ucp.h>

#define CX_UCX_AM_ID 7
/* Payloads up to this size try to leave from the caller's memory at once (eager). */
#define CX_UCX_INLINE 8192
/* Payloads from this size leave from the caller's memory (no copy), and send returns
 * when UCX is done with them: by rendezvous where UCX may have RDMA, else eagerly (struct
 * ucx_link.rndv); between CX_UCX_INLINE and this they are copied into a pool buffer and
 * send returns at once. Measured on loopback tcp: at 64 KiB the copy is cheaper than
 * waiting, from 1 MiB waiting wins (README, "ucx"). */
#ifndef CX_UCX_ZCOPY_MIN /* -D to tune it */
#define CX_UCX_ZCOPY_MIN (512u << 10)
#endif
/* Most iovec entries sent without a copy (UCX's iov datatype); more are gathered by copy. */
#define CX_UCX_MAX_IOV 8

/* a received message waiting for delivery (order behind a rendezvous fetch) */
struct rx_item {
    struct rx_item *next;
    struct cx_frame_hdr h;
    uint8_t *data;          /* buf->data, or small[] */
    struct cx_ucx_buf *buf; /* pool buffer the payload lives in (NULL: small[]) */
    int ready;              /* fetched */
    int status;             /* fetch status */
    void *req;              /* the fetch request while it runs */
    uint8_t small[];        /* a small eager message copied while a fetch is ahead */
};

/* a send UCX could not finish at once: its header and payload copy live until completion */
struct tx_item {
    struct ucx_link *link;
    struct tx_item *next, *prev; /* the link's requests in flight */
    void *req;
    uint8_t hdr[CX_FRAME_HDR_SIZE];
    size_t len;
    struct cx_ucx_buf *buf; /* pool buffer holding the payload (NULL: small[]) */
    uint8_t small[];
};

struct ucx_link {
    struct cx_link base;
    ucp_worker_h worker;
    ucp_ep_h ep;                 /* NULL once closed by force (peer died under a send) */
    int sock;                    /* the control connection */
    int efd, kick_fd, epfd;      /* worker event fd, kick eventfd, both in epfd (= fd()) */
    int failed;                  /* 0, or the negative errno the link failed with */
    int rndv;                    /* zero-copy sends by rendezvous (RDMA possible), else eager */
    unsigned inflight;           /* send requests not yet completed */
    size_t inflight_bytes;
    struct tx_item *txs;         /* their buffers */
    struct rx_item *rxq, **rxq_tail; /* in arrival order */
    struct cx_ucx_pool pool;     /* registered buffers for copied sends and fetches */
    cx_recv_fn fn;               /* set only while the owner is in progress */
    void *arg;
    int delivered;
    unsigned empty_polls;
    /* sharing (cx_ucx_share.c) */
    uintptr_t holder;            /* token of the thread inside a call on this link, or 0 */
    int kicked;                  /* kick_fd was written and not yet drained */
    int armed;                   /* arm() succeeded and no progress since: owner may sleep */
    struct ucx_link *share_next, *share_prev;
    /* accept_start: the address exchange runs in progress (cx_ucx_accept.c) */
    int hs;                      /* 1 until it is done (and after it failed) */
    long long hs_deadline;       /* ms, CLOCK_MONOTONIC */
    int hs_ms;
    uint8_t *hs_out, *hs_in;     /* ours: u32 length, address, later 1 byte; the peer's */
    size_t hs_out_len, hs_out_off, hs_in_len, hs_in_want;
    char hs_why[256];            /* why it failed, reported again by later calls */
    char hs_peer[64];            /* the peer's "ip:port", for the messages */
};

/* The largest worker address a peer may announce. */
#define CX_UCX_ADDR_MAX (1u << 20)

/* cx_ucx.c: 1 when UCX_TLS's value (NULL: unset) may give UCX an RDMA transport */
int cx_ucx_tls_may_rdma(const char *tls, int host_rdma);

/* cx_ucx.c: u->ep to the peer's worker address. 0 or -errno. */
int cx_ucx_ep_create(struct ucx_link *u, const void *peer);

/* cx_ucx_accept.c: starts the accepting side's address exchange (sends what the socket
 * takes of ours) and steps it without blocking: 1 once done, 0 while it waits for the peer,
 * or a negative errno (refused, the peer left, or -ETIMEDOUT past the deadline). */
int cx_ucx_hs_start(struct ucx_link *u, const void *addr, size_t alen, int handshake_ms);
int cx_ucx_hs_step(struct ucx_link *u);

/* cx_ucx_xfer.c */
int cx_ucx_send_msg(struct ucx_link *u, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt);
int cx_ucx_progress_link(struct ucx_link *u, cx_recv_fn fn, void *arg, int budget);
ucs_status_t cx_ucx_am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param);
/* Cancels what is in flight and frees what UCX gave back (ucx_close). */
void cx_ucx_drain(struct ucx_link *u);
/* 1 when the control connection says the peer is gone (and sets u->failed). */
int cx_ucx_peer_gone(struct ucx_link *u);
/* Closes the endpoint at once (UCX stops touching any buffer of ours); ep becomes NULL. */
void cx_ucx_close_ep(struct ucx_link *u);

/* cx_ucx_share.c: every call on a link runs with the link entered, so a thread blocked in
 * a send on one link may progress the other links nobody is inside (see that file). */
int cx_ucx_enter(struct ucx_link *u);              /* returns 1 when this thread was inside */
void cx_ucx_leave(struct ucx_link *u, int nested);
void cx_ucx_share_add(struct ucx_link *u);
void cx_ucx_share_remove(struct ucx_link *u);
void cx_ucx_help_others(struct ucx_link *self);
void cx_ucx_kick(struct ucx_link *u);
void cx_ucx_unkick(struct ucx_link *u);

#endif
