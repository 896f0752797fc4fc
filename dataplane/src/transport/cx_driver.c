/* Driver lookup by address scheme and helpers common to every link (see cx_driver.h). */
#include "transport/cx_driver.h"

#include "common/cx_env.h"
#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Optional drivers are in the table when their module is built (its module.mk defines
 * CX_HAVE_<NAME>). Strong references on purpose: a weak one would not pull the driver's
 * object out of libconflux.a, and a program linked statically would lack the driver. */
const struct cx_driver_ops *cx_driver_for(const char *addr)
{
    const struct cx_driver_ops *all[] = {
        &cx_tcp_ops, &cx_shm_ops, &cx_udp_ops,
#ifdef CX_HAVE_UCX
        &cx_ucx_ops,
#endif
#ifdef CX_HAVE_DPDK
        &cx_dpdk_ops,
#endif
#ifdef CX_HAVE_TLS
        &cx_tls_ops,
#endif
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (!all[i] || !all[i]->scheme)
            continue;
        size_t n = strlen(all[i]->scheme);
        if (addr && strncmp(addr, all[i]->scheme, n) == 0 && strncmp(addr + n, "://", 3) == 0)
            return all[i];
    }
    cx_err_set(EPROTONOSUPPORT, "no driver for address '%s'", addr ? addr : "(null)");
    return NULL;
}

int cx_listen(const char *addr, const struct cx_driver_ops **ops, struct cx_listener **out)
{
    const struct cx_driver_ops *o = cx_driver_for(addr);
    if (!o)
        return -EPROTONOSUPPORT;
    if (ops)
        *ops = o;
    return o->listen(addr, out);
}

int cx_connect(const char *addr, struct cx_link **out)
{
    const struct cx_driver_ops *o = cx_driver_for(addr);
    if (!o)
        return -EPROTONOSUPPORT;
    return o->connect(addr, out);
}

int cx_listener_accept(const struct cx_driver_ops *ops, struct cx_listener *l, int handshake_ms,
                       struct cx_link **out)
{
    return ops->accept_start ? ops->accept_start(l, handshake_ms, out) : ops->accept(l, 0, out);
}

int cx_handshake_ms(void)
{
    return (int)cx_env_u64("CONFLUX_HANDSHAKE_MS", CX_HANDSHAKE_MS, 100, 600000);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void drop(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)arg, (void)h, (void)p, (void)n;
}

int cx_link_flush(struct cx_link *k, cx_recv_fn fn, void *arg, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    int idle = 0;
    while (cx_link_pending(k) > 0) {
        int rc = cx_link_progress(k, fn ? fn : drop, arg, 64);
        if (rc < 0)
            return rc;
        if (rc == 0 && ++idle > 100) {
            if (timeout_ms >= 0 && now_ms() > deadline)
                return cx_err_set(ETIMEDOUT, "flush: %zu bytes still queued after %d ms",
                                  cx_link_pending(k), timeout_ms);
            usleep(50);
        } else if (rc > 0) {
            idle = 0;
        }
    }
    return 0;
}
