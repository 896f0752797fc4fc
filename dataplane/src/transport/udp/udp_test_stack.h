/* Test helper: udp as the stack builder assembles it (udp -> rel -> frag, under the
 * seq-carrying filter), presented as one "network driver" so the conformance suite
 * (transport/conformance.h) can run over it. No adaptation: the suite's checks (each
 * message keeps the seq its sender gave it, among others) hold for the stack as it is. */
#ifndef UDP_TEST_STACK_H
#define UDP_TEST_STACK_H

#include "stack/cx_stack.h"
#include "transport/conformance.h"
#include "transport/udp/cx_udp.h"

/* The stack over a fresh udp link. */
static int udp_stack_wrap(int rc, struct cx_link *udp, struct cx_link **out)
{
    if (rc < 0)
        return rc;
    if ((rc = cx_stack_assemble(&udp, 1, out)) < 0)
        cx_link_close(udp);
    return rc;
}
static int us_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    struct cx_link *u = NULL;
    int rc = cx_udp_ops.accept(l, timeout_ms, &u);
    return udp_stack_wrap(rc, u, out);
}
static int us_connect(const char *addr, struct cx_link **out)
{
    struct cx_link *u = NULL;
    int rc = cx_udp_ops.connect(addr, &u);
    return udp_stack_wrap(rc, u, out);
}
static int us_listen(const char *addr, struct cx_listener **out) { return cx_udp_ops.listen(addr, out); }
static const char *us_listener_addr(struct cx_listener *l) { return cx_udp_ops.listener_addr(l); }
static int us_listener_fd(struct cx_listener *l) { return cx_udp_ops.listener_fd(l); }
static void us_listener_close(struct cx_listener *l) { cx_udp_ops.listener_close(l); }

static const struct cx_driver_ops udp_stack_ops = {
    .name = "udp+rel+frag", .scheme = "udp", .listen = us_listen, .listener_addr = us_listener_addr,
    .listener_fd = us_listener_fd, .accept = us_accept, .listener_close = us_listener_close,
    .connect = us_connect,
};

#endif
