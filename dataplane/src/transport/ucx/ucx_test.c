/* The ucx driver through the conformance suite. UCX_TLS is respected; unless the caller
 * set them, the tests use UCX_TLS=tcp,posix,sysv,self and UCX_NET_DEVICES=lo (loopback
 * only). Run with e.g. UCX_TLS=tcp or UCX_TLS=posix,self to test one transport. */
#include "transport/conformance.h"
#include "testutil/ucx_test_env.h"

#ifdef CX_HAVE_UCX
#include <ucs/config/global_opts.h>
extern const struct cx_driver_ops cx_ucx_ops;
#define UCX_OPS (&cx_ucx_ops)
static const char *ready(void)
{
    ucx_test_env();
    /* a killed peer leaves requests that UCX lists one by one, as warnings, when the
     * survivor's worker is destroyed; UCX_LOG_LEVEL is read before main, so lower it here */
    if (!getenv("UCX_LOG_LEVEL"))
        ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;
    return NULL;
}
#else
static int nothing(const char *a, struct cx_link **o) { (void)a, (void)o; return -ENOSYS; }
static int nolisten(const char *a, struct cx_listener **o) { (void)a, (void)o; return -ENOSYS; }
static const char *noaddr(struct cx_listener *l) { (void)l; return ""; }
static void noclose(struct cx_listener *l) { (void)l; }
static const struct cx_driver_ops absent = {.name = "ucx", .connect = nothing, .listen = nolisten,
                                            .listener_addr = noaddr, .listener_close = noclose};
#define UCX_OPS (&absent)
static const char *ready(void) { return "UCX not built in (pkg-config ucx not found: install libucx-dev)"; }
#endif

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "ucx://127.0.0.1:0"); }

CX_DECLARE_TRANSPORT_TESTS(ucx, UCX_OPS, mkaddr, ready)

CX_TEST_MAIN()

/* Under AddressSanitizer: after a peer is SIGKILLed (ucx_peer_killed), UCX never finishes
 * (nor cancels) the rendezvous fetches and sends that were under way, so the driver leaks
 * their items and pool buffers on purpose rather than risk UCX writing into freed memory
 * (see cx_ucx_xfer.c cx_ucx_drain and transport/README.md). Only those allocation sites
 * (a queued fetch, a copied send, a pool buffer) are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:rx_enqueue\nleak:send_copied\nleak:map_buf\n";
}
