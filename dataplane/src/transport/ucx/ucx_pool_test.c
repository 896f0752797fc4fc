/* Tests for the ucx driver's registered buffer pool (cx_ucx_pool.h), with a real UCP
 * context: sizes, reuse, growth to the largest message, the idle budget, and a size that
 * cannot be mapped. */
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "testutil/ucx_test_env.h"

#ifdef CX_HAVE_UCX
#include "transport/ucx/cx_ucx_pool.h"

#include <ucs/config/global_opts.h>

static ucp_context_h context(void)
{
    static ucp_context_h ctx;
    if (!ctx) {
        ucx_test_env();
        if (!getenv("UCX_LOG_LEVEL"))
            ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;
        ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
        if (ucp_init(&p, NULL, &ctx) != UCS_OK)
            ctx = NULL;
    }
    return ctx;
}

CX_TEST(pool_sizes_are_powers_of_two_from_the_minimum)
{
    ucp_context_h ctx = context();
    if (!ctx) CX_SKIP("ucp_init failed here");
    struct cx_ucx_pool p;
    cx_ucx_pool_init(&p, ctx);
    struct cx_ucx_buf *b;
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, 1, &b), 0);
    CX_CHECK(b->cap == CX_UCX_POOL_MIN && b->memh != NULL && b->data != NULL);
    cx_ucx_pool_put(&p, b);
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, (1u << 20) + 1, &b), 0);
    CX_CHECK(b->cap == 2u << 20);
    memset(b->data, 0x5A, b->cap); /* the whole capacity is writable */
    cx_ucx_pool_put(&p, b);
    cx_ucx_pool_destroy(&p);
    CX_CHECK_EQ_INT(p.mapped_bytes, 0);
}

CX_TEST(pool_reuses_buffers_for_a_stream_of_equal_messages)
{
    ucp_context_h ctx = context();
    if (!ctx) CX_SKIP("ucp_init failed here");
    struct cx_ucx_pool p;
    cx_ucx_pool_init(&p, ctx);
    struct cx_ucx_buf *w[8];
    for (int round = 0; round < 100; round++) { /* 8 in flight at a time, as a send window */
        for (int i = 0; i < 8; i++) CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, 1u << 20, &w[i]), 0);
        for (int i = 0; i < 8; i++) cx_ucx_pool_put(&p, w[i]);
    }
    CX_CHECK_EQ_INT(p.mapped_bytes, 8u << 20); /* mapped once, then reused */
    struct cx_ucx_buf *again;
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, 1000, &again), 0); /* smallest that fits */
    CX_CHECK(again->cap == 1u << 20);
    cx_ucx_pool_put(&p, again);
    cx_ucx_pool_destroy(&p);
}

CX_TEST(pool_keeps_at_most_its_budget_idle_but_always_one)
{
    ucp_context_h ctx = context();
    if (!ctx) CX_SKIP("ucp_init failed here");
    struct cx_ucx_pool p;
    cx_ucx_pool_init(&p, ctx);
    struct cx_ucx_buf *w[12];
    for (int i = 0; i < 12; i++) CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, 4u << 20, &w[i]), 0);
    for (int i = 0; i < 12; i++) cx_ucx_pool_put(&p, w[i]);
    CX_CHECK(p.idle_bytes <= CX_UCX_POOL_KEEP_BYTES);
    CX_CHECK(p.mapped_bytes == p.idle_bytes);
    struct cx_ucx_buf *big; /* one message larger than the budget: kept for the next one */
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, CX_UCX_POOL_KEEP_BYTES * 2, &big), 0);
    void *data = big->data;
    cx_ucx_pool_put(&p, big);
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, CX_UCX_POOL_KEEP_BYTES * 2, &big), 0);
    CX_CHECK(big->data == data);
    cx_ucx_pool_put(&p, big);
    cx_ucx_pool_destroy(&p);
    CX_CHECK_EQ_INT(p.mapped_bytes, 0);
}

CX_TEST(pool_refuses_a_size_it_cannot_map_with_a_reason)
{
    ucp_context_h ctx = context();
    if (!ctx) CX_SKIP("ucp_init failed here");
    struct cx_ucx_pool p;
    cx_ucx_pool_init(&p, ctx);
    struct cx_ucx_buf *b = NULL;
    CX_CHECK_EQ_INT(cx_ucx_pool_get(&p, (size_t)1 << 50, &b), -ENOMEM);
    CX_CHECK(b == NULL);
    CX_CHECK(strstr(cx_errmsg(), "cannot map") != NULL);
    cx_ucx_pool_destroy(&p);
}
#else
CX_TEST(pool)
{
    CX_SKIP("UCX not built in (pkg-config ucx not found: install libucx-dev)");
}
#endif

CX_TEST_MAIN()
