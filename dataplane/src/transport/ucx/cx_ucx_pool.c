/* Registered buffer pool of the ucx driver; see cx_ucx_pool.h. */
#define _GNU_SOURCE
#include "transport/ucx/cx_ucx_pool.h"

#include "common/cx_error.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void cx_ucx_pool_init(struct cx_ucx_pool *p, ucp_context_h ctx)
{
    *p = (struct cx_ucx_pool){.ctx = ctx};
}

static size_t round_cap(size_t len)
{
    size_t cap = CX_UCX_POOL_MIN;
    while (cap < len) cap <<= 1;
    return cap;
}

static void unmap_buf(struct cx_ucx_pool *p, struct cx_ucx_buf *b)
{
    ucp_mem_unmap(p->ctx, b->memh);
    munmap(b->data, b->cap);
    p->mapped_bytes -= b->cap;
    free(b);
}

static int map_buf(struct cx_ucx_pool *p, size_t len, struct cx_ucx_buf **out)
{
    if (len > SIZE_MAX / 4) /* round_cap would overflow */
        return cx_err_set(ENOMEM, "ucx: cannot map a buffer for a %zu-byte message", len);
    struct cx_ucx_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cx_err_set(ENOMEM, "ucx: out of memory");
    b->cap = round_cap(len);
    /* populated now, so the first message through it does not fault page by page */
    b->data = mmap(NULL, b->cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (b->data == MAP_FAILED) {
        free(b);
        return cx_err_set(ENOMEM, "ucx: cannot map a %zu-byte buffer for a %zu-byte message",
                          round_cap(len), len);
    }
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                             UCP_MEM_MAP_PARAM_FIELD_LENGTH,
                               .address = b->data, .length = b->cap};
    ucs_status_t st = ucp_mem_map(p->ctx, &mp, &b->memh);
    if (st != UCS_OK) {
        munmap(b->data, b->cap);
        free(b);
        return cx_err_set(ENOMEM, "ucx: cannot register a %zu-byte buffer: %s", round_cap(len),
                          ucs_status_string(st));
    }
    p->mapped_bytes += b->cap;
    *out = b;
    return 0;
}

int cx_ucx_pool_get(struct cx_ucx_pool *p, size_t len, struct cx_ucx_buf **out)
{
    for (struct cx_ucx_buf **pp = &p->idle; *pp; pp = &(*pp)->next) {
        if ((*pp)->cap >= len) { /* the smallest that fits (the list is sorted) */
            struct cx_ucx_buf *b = *pp;
            *pp = b->next;
            b->next = NULL;
            p->idle_bytes -= b->cap;
            *out = b;
            return 0;
        }
    }
    return map_buf(p, len, out);
}

void cx_ucx_pool_put(struct cx_ucx_pool *p, struct cx_ucx_buf *b)
{
    struct cx_ucx_buf **pp = &p->idle;
    while (*pp && (*pp)->cap < b->cap) pp = &(*pp)->next;
    b->next = *pp;
    *pp = b;
    p->idle_bytes += b->cap;
    /* over budget: unmap the largest idle buffers, but keep one (the stream that made the
     * pool grow is likely to continue) */
    while (p->idle_bytes > CX_UCX_POOL_KEEP_BYTES && p->idle->next) {
        struct cx_ucx_buf **last = &p->idle;
        while ((*last)->next) last = &(*last)->next;
        struct cx_ucx_buf *big = *last;
        *last = NULL;
        p->idle_bytes -= big->cap;
        unmap_buf(p, big);
    }
}

void cx_ucx_pool_destroy(struct cx_ucx_pool *p)
{
    while (p->idle) {
        struct cx_ucx_buf *b = p->idle;
        p->idle = b->next;
        p->idle_bytes -= b->cap;
        unmap_buf(p, b);
    }
}
