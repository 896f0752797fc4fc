/* A pool of UCX-registered buffers, one per ucx link (so one thread uses it, like the link).
 *
 * Why: a 1 MiB send or rendezvous receive used to malloc a fresh buffer, and the kernel
 * faulted in and zeroed 256 new pages for every message (most of the driver's time at
 * 1 MiB). Pool buffers are mapped once with their pages populated, registered once with
 * ucp_mem_map (RDMA transports then skip the per-message registration), and reused.
 *
 * Sizes are powers of two from CX_UCX_POOL_MIN, so a stream of equal messages reuses the
 * same buffers; the pool grows to the largest message seen. At most CX_UCX_POOL_KEEP_BYTES
 * of idle buffers are kept: over that, the largest idle ones are unmapped first, but one
 * buffer is always kept, so a run of messages larger than the budget maps once. */
#ifndef CX_UCX_POOL_H
#define CX_UCX_POOL_H

#include <stddef.h>
#include <ucp/api/ucp.h>

#define CX_UCX_POOL_MIN (64u << 10)
#define CX_UCX_POOL_KEEP_BYTES (32u << 20)

struct cx_ucx_buf {
    struct cx_ucx_buf *next; /* in the idle list */
    void *data;
    size_t cap;
    ucp_mem_h memh;
};

struct cx_ucx_pool {
    ucp_context_h ctx;
    struct cx_ucx_buf *idle; /* sorted by cap, smallest first */
    size_t idle_bytes;
    size_t mapped_bytes; /* idle and in use */
};

/* Starts an empty pool whose buffers are registered with ctx. */
void cx_ucx_pool_init(struct cx_ucx_pool *p, ucp_context_h ctx);

/* A buffer of at least len bytes (an idle one when one is big enough, else a new mapping).
 * Returns 0, or -ENOMEM with cx_errmsg() set when mapping or registration failed. */
int cx_ucx_pool_get(struct cx_ucx_pool *p, size_t len, struct cx_ucx_buf **out);

/* Gives b back for reuse (or unmaps it when the pool keeps enough idle buffers). */
void cx_ucx_pool_put(struct cx_ucx_pool *p, struct cx_ucx_buf *b);

/* Unmaps the idle buffers. Buffers still out (held by a request UCX never finished) are
 * left alone: UCX might still write into them. */
void cx_ucx_pool_destroy(struct cx_ucx_pool *p);

#endif
