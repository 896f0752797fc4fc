/* Test helper: udp as the stack builder assembles it (udp -> rel -> frag), presented as
 * one "network driver" so the conformance suite (transport/conformance.h) can run over it.
 *
 * One adaptation, and why: the suite checks that each message keeps the seq its sender
 * gave it, but the reliability filter owns seq on its link (cx_rel.h: "a seq given by the
 * caller is not preserved"). So the outermost layer here, a test-only shim, carries the
 * caller's seq in the header's format field (which the suite never uses; a non-zero format
 * is refused) and puts it back on receipt. Everything below the shim is the real stack. */
#ifndef UDP_TEST_STACK_H
#define UDP_TEST_STACK_H

#include "stack/cx_rel.h"
#include "stack/cx_stack.h"
#include "transport/conformance.h"
#include "transport/udp/cx_udp.h"

struct seqkeep {
    struct cx_link base;
    struct cx_link *lower; /* the assembled stack */
    cx_recv_fn fn;
    void *arg;
};

static int sk_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov, int n)
{
    if (h->format)
        return cx_err_set(EINVAL, "seqkeep: the format field carries seq in this test stack");
    struct cx_frame_hdr hh = *h;
    hh.format = h->seq;
    return cx_link_send(((struct seqkeep *)k)->lower, &hh, iov, n);
}
static void sk_on(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct seqkeep *s = arg;
    struct cx_frame_hdr d = *h;
    d.seq = h->format;
    d.format = 0;
    s->fn(s->arg, &d, p, n);
}
static int sk_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct seqkeep *s = (struct seqkeep *)k;
    s->fn = fn;
    s->arg = arg;
    return cx_link_progress(s->lower, sk_on, s, budget);
}
static size_t sk_pending(struct cx_link *k) { return cx_link_pending(((struct seqkeep *)k)->lower); }
static int sk_fd(struct cx_link *k) { return cx_link_fd(((struct seqkeep *)k)->lower); }
static int sk_arm(struct cx_link *k) { return cx_link_arm(((struct seqkeep *)k)->lower); }
static void sk_caps(struct cx_link *k, struct cx_driver_caps *c) { cx_link_caps(((struct seqkeep *)k)->lower, c); }
static void sk_close(struct cx_link *k)
{
    cx_link_close(((struct seqkeep *)k)->lower);
    free(k);
}
static const struct cx_driver_ops seqkeep_link_ops = {
    .name = "seqkeep-test", .send = sk_send, .pending = sk_pending, .progress = sk_progress,
    .fd = sk_fd, .arm = sk_arm, .caps = sk_caps, .close = sk_close,
};

/* The stack over a fresh udp link, under the shim. */
static int udp_stack_wrap(int rc, struct cx_link *udp, struct cx_link **out)
{
    if (rc < 0)
        return rc;
    struct cx_link *stack;
    if ((rc = cx_stack_assemble(&udp, 1, &stack)) < 0) {
        cx_link_close(udp);
        return rc;
    }
    struct seqkeep *s = calloc(1, sizeof *s);
    if (!s) {
        cx_link_close(stack);
        return cx_err_set(ENOMEM, "seqkeep: out of memory");
    }
    s->base.ops = &seqkeep_link_ops;
    s->lower = stack;
    *out = &s->base;
    return 0;
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

/* The stack under the shim (to read its rel statistics). */
static inline struct cx_link *udp_stack_of(struct cx_link *k) { return ((struct seqkeep *)k)->lower; }

#endif
