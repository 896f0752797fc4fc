/* The conformance suite every network driver passes (in the spirit of nng's
 * NUTS_DECLARE_TRAN_TESTS). A driver's test file instantiates it with its ops table and a
 * function that makes a fresh listen address:
 *
 *     static void addr(char *buf, size_t cap) { snprintf(buf, cap, "tcp://127.0.0.1:0"); }
 *     CX_DECLARE_TRANSPORT_TESTS(tcp, &cx_tcp_ops, addr)
 *     CX_TEST_MAIN()
 *
 * Tests, in this order: connect_refused, peer_killed (a forked peer is SIGKILLed mid-transfer:
 * the survivor gets an error within seconds, no hang, no crash), listen_accept, exchange_ordered (both directions, 20000 messages
 * of varied sizes, checked in order and content), huge_message (64 MiB each way at once),
 * channels_multiplexed (64 channels over one link through the
 * mux filter), perf_smoke (ping-pong latency and streaming bandwidth, printed).
 * A driver that cannot run here (no device) skips with CX_SKIP and the reason, from the
 * `ready` hook (NULL = always ready). A driver whose state does not survive fork declares
 * the suite with CX_DECLARE_TRANSPORT_TESTS_SPAWN and starts the peer_killed peer itself. */
#ifndef CX_CONFORMANCE_H
#define CX_CONFORMANCE_H

#include "common/cx_error.h"
#include "common/cx_test.h"
#include "stack/cx_mux.h"
#include "transport/cx_driver.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef void (*cx_conf_addr_fn)(char *buf, size_t cap);

static inline double cx_conf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct cx_conf_conn {
    const struct cx_driver_ops *ops;
    const char *addr;
    struct cx_link *link;
    int rc;
};

static inline void *cx_conf_connector(void *p)
{
    struct cx_conf_conn *c = p;
    c->rc = c->ops->connect(c->addr, &c->link);
    return NULL;
}

/* Makes a connected pair (a = accepted side, b = connected side). */
static inline int cx_conf_pair(const struct cx_driver_ops *ops, cx_conf_addr_fn mk,
                               struct cx_link **a, struct cx_link **b)
{
    char addr[256];
    struct cx_listener *l;
    mk(addr, sizeof addr);
    int rc = ops->listen(addr, &l);
    if (rc < 0)
        return rc;
    struct cx_conf_conn c = {.ops = ops, .addr = ops->listener_addr(l)};
    pthread_t th;
    pthread_create(&th, NULL, cx_conf_connector, &c);
    rc = ops->accept(l, 10000, a);
    pthread_join(th, NULL);
    ops->listener_close(l);
    if (rc < 0) {
        if (c.rc == 0)
            cx_link_close(c.link);
        return rc;
    }
    if (c.rc < 0) {
        cx_link_close(*a);
        return c.rc;
    }
    *b = c.link;
    return 0;
}

/* A receiver that checks messages arrive in order with the expected pattern. */
struct cx_conf_rx {
    uint64_t next;  /* expected seq */
    uint64_t bytes;
    int bad;
    uint32_t channel;
};

static inline uint8_t cx_conf_byte(uint64_t seq, size_t i) { return (uint8_t)(seq * 31 + i * 7); }
static inline size_t cx_conf_size(uint64_t seq) { return (seq * 2654435761u) % 9000; }

static inline void cx_conf_on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct cx_conf_rx *r = arg;
    const uint8_t *b = p;
    if (h->seq != r->next || n != cx_conf_size(h->seq) || h->length != n ||
        (r->channel && h->channel != r->channel)) {
        if (!r->bad)
            fprintf(stderr, "  got seq %llu len %zu ch %u, expected seq %llu len %zu ch %u\n",
                    (unsigned long long)h->seq, n, h->channel, (unsigned long long)r->next,
                    cx_conf_size(r->next), r->channel);
        r->bad = 1;
    }
    for (size_t i = 0; i < n && !r->bad; i += 61)
        if (b[i] != cx_conf_byte(h->seq, i))
            r->bad = 2;
    r->next++;
    r->bytes += n;
}

static inline int cx_conf_send_seq(struct cx_link *k, uint64_t seq, uint8_t *buf)
{
    size_t n = cx_conf_size(seq);
    for (size_t i = 0; i < n; i++) buf[i] = cx_conf_byte(seq, i);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = seq};
    struct iovec v = {buf, n};
    return cx_link_send(k, &h, &v, 1);
}

static inline void cx_conf_count(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h, (void)p;
    uint64_t *c = arg;
    c[0]++;
    c[1] += n;
}

/* The peer of peer_killed: connects to addr, then streams 64 KiB messages until killed
 * (exit 3 if the connect fails, 4 when the link fails). */
static inline __attribute__((noreturn)) void cx_conf_stream_until_killed(
    const struct cx_driver_ops *ops, const char *addr)
{
    struct cx_link *k;
    if (ops->connect(addr, &k) < 0) _exit(3);
    static uint8_t buf[65536];
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    struct iovec v = {buf, sizeof buf};
    uint64_t c[2] = {0, 0};
    for (;;) {
        if (cx_link_pending(k) < (8u << 20)) cx_link_send(k, &h, &v, 1);
        if (cx_link_progress(k, cx_conf_count, c, 64) < 0) _exit(4);
    }
}

/* Big-message receiver: checks a 64 MiB message's pattern. */
struct cx_conf_big { int got; int bad; size_t len; };
static inline void cx_conf_on_big(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h;
    struct cx_conf_big *g = arg;
    const uint32_t *w = p;
    g->got++;
    g->len = n;
    for (size_t i = 0; i < n / 4; i += 1021)
        if (w[i] != (uint32_t)(i * 2654435761u))
            g->bad = 1;
}

#define CX_CONF_CHECK_RC(expr)                                                             \
    do {                                                                                   \
        int cx_rc_ = (expr);                                                               \
        if (cx_rc_ < 0) {                                                                  \
            fprintf(stderr, "  %s:%d: %s = %d (%s)\n", __FILE__, __LINE__, #expr, cx_rc_,  \
                    cx_errmsg());                                                          \
            *cx_failed = 1;                                                                \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* SPAWN (NULL = fork) starts the peer of peer_killed for drivers whose library state does not
 * survive fork (DPDK's EAL): a function that starts a process which connects to addr and
 * calls cx_conf_stream_until_killed, and returns its pid (or a negative errno). */
typedef pid_t (*cx_conf_spawn_fn)(const char *addr);

#define CX_DECLARE_TRANSPORT_TESTS(NAME, OPS, MKADDR, READY)                               \
    CX_DECLARE_TRANSPORT_TESTS_SPAWN(NAME, OPS, MKADDR, READY, NULL)

#define CX_DECLARE_TRANSPORT_TESTS_SPAWN(NAME, OPS, MKADDR, READY, SPAWN)                  \
    static const char *cx_conf_##NAME##_ready(void)                                        \
    {                                                                                      \
        const char *(*f)(void) = READY;                                                    \
        return f ? f() : NULL;                                                             \
    }                                                                                      \
    CX_TEST(NAME##_connect_refused)                                                        \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        char addr[256], real[256];                                                         \
        struct cx_listener *l;                                                             \
        struct cx_link *k = NULL;                                                          \
        MKADDR(addr, sizeof addr);                                                         \
        CX_CONF_CHECK_RC((OPS)->listen(addr, &l));                                          \
        snprintf(real, sizeof real, "%s", (OPS)->listener_addr(l));                        \
        (OPS)->listener_close(l);                                                          \
        int rc = (OPS)->connect(real, &k);                                                 \
        CX_CHECK_EQ_INT(rc, -ECONNREFUSED);                                                \
        CX_CHECK(strlen(cx_errmsg()) > 0);                                                 \
        CX_CHECK_EQ_INT((OPS)->connect("bogus://x", &k), -EINVAL);                         \
    }                                                                                      \
    /* peer_killed runs before any other test makes a link, so the forked child starts    \
     * from a clean library state (UCX, for one, does not survive fork once initialised) */ \
    CX_TEST(NAME##_peer_killed)                                                            \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        char addr[256];                                                                    \
        struct cx_listener *l;                                                             \
        MKADDR(addr, sizeof addr);                                                         \
        CX_CONF_CHECK_RC((OPS)->listen(addr, &l));                                          \
        fflush(NULL);                                                                      \
        cx_conf_spawn_fn spawn_ = SPAWN;                                                   \
        pid_t pid = spawn_ ? spawn_((OPS)->listener_addr(l)) : fork();                     \
        if (pid == 0) /* child: connect, then stream until killed */                       \
            cx_conf_stream_until_killed(OPS, (OPS)->listener_addr(l));                     \
        if (pid < 0) (OPS)->listener_close(l);                                             \
        CX_CHECK(pid > 0);                                                                 \
        struct cx_link *a;                                                                 \
        int rc = (OPS)->accept(l, 10000, &a);                                              \
        (OPS)->listener_close(l);                                                          \
        if (rc < 0) { kill(pid, SIGKILL); waitpid(pid, NULL, 0); }                         \
        CX_CONF_CHECK_RC(rc);                                                              \
        uint64_t c[2] = {0, 0};                                                            \
        static uint8_t buf[65536];                                                         \
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA};                                   \
        struct iovec v = {buf, sizeof buf};                                                \
        double t0 = cx_conf_now();                                                         \
        while (c[1] < (16u << 20) && cx_conf_now() - t0 < 20) {                            \
            if (cx_link_pending(a) < (8u << 20)) cx_link_send(a, &h, &v, 1);               \
            rc = cx_link_progress(a, cx_conf_count, c, 64);                                \
            if (rc < 0) break;                                                             \
        }                                                                                  \
        kill(pid, SIGKILL);                                                                \
        waitpid(pid, NULL, 0);                                                             \
        if (c[1] < (16u << 20))                                                            \
            fprintf(stderr, "  only %llu bytes in %llu messages arrived in 20 s (rc %d: %s)\n", \
                    (unsigned long long)c[1], (unsigned long long)c[0], rc, cx_errmsg());   \
        CX_CHECK(c[1] >= (16u << 20)); /* the transfer was under way */                    \
        t0 = cx_conf_now();                                                                \
        rc = 0;                                                                            \
        while (rc >= 0 && cx_conf_now() - t0 < 10) {                                       \
            int s = cx_link_send(a, &h, &v, 1);                                            \
            rc = cx_link_progress(a, cx_conf_count, c, 64);                                \
            if (s < 0) rc = s;                                                             \
            if (rc == 0) usleep(100);                                                      \
        }                                                                                  \
        CX_CHECK(rc < 0); /* an error, not a hang */                                       \
        CX_CHECK(strlen(cx_errmsg()) > 0);                                                 \
        fprintf(stderr, "  survivor saw %d after %.3f s: %s\n", rc, cx_conf_now() - t0,    \
                cx_errmsg());                                                              \
        cx_link_close(a);                                                                  \
    }                                                                                      \
    CX_TEST(NAME##_listen_accept)                                                          \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        struct cx_link *a = NULL, *b = NULL;                                                           \
        CX_CONF_CHECK_RC(cx_conf_pair(OPS, MKADDR, &a, &b));                               \
        struct cx_driver_caps c;                                                           \
        cx_link_caps(a, &c);                                                               \
        CX_CHECK(c.flags & CX_CAP_RELIABLE);                                               \
        CX_CHECK(cx_link_fd(a) >= 0 && cx_link_fd(b) >= 0);                                \
        int armed = -EAGAIN; /* nothing pending: blocking becomes safe after some progress */ \
        uint64_t nc[2] = {0, 0};                                                           \
        for (int i = 0; i < 1000 && armed < 0; i++) {                                      \
            CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, nc, 16));                  \
            CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_count, nc, 16));                  \
            armed = cx_link_arm(a);                                                        \
            if (armed < 0) usleep(1000);                                                   \
        }                                                                                  \
        CX_CHECK_EQ_INT(armed, 0);                                                         \
        CX_CHECK_EQ_INT(nc[0], 0);                                                         \
        cx_link_close(a);                                                                  \
        cx_link_close(b);                                                                  \
    }                                                                                      \
    CX_TEST(NAME##_exchange_ordered)                                                       \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        struct cx_link *a = NULL, *b = NULL;                                                           \
        CX_CONF_CHECK_RC(cx_conf_pair(OPS, MKADDR, &a, &b));                               \
        enum { N = 20000 };                                                                \
        static uint8_t buf[9000];                                                          \
        struct cx_conf_rx ra = {0}, rb = {0};                                              \
        uint64_t sa = 0, sb = 0;                                                           \
        double t0 = cx_conf_now();                                                         \
        while ((ra.next < N || rb.next < N) && cx_conf_now() - t0 < 30) {                  \
            for (int i = 0; i < 16 && sa < N; i++) CX_CONF_CHECK_RC(cx_conf_send_seq(a, sa++, buf)); \
            for (int i = 0; i < 16 && sb < N; i++) CX_CONF_CHECK_RC(cx_conf_send_seq(b, sb++, buf)); \
            CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_on_msg, &ra, 64));                 \
            CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_on_msg, &rb, 64));                 \
        }                                                                                  \
        CX_CHECK_EQ_INT(ra.bad, 0);                                                        \
        CX_CHECK_EQ_INT(rb.bad, 0);                                                        \
        CX_CHECK_EQ_INT(ra.next, N);                                                       \
        CX_CHECK_EQ_INT(rb.next, N);                                                       \
        cx_link_close(a);                                                                  \
        cx_link_close(b);                                                                  \
    }                                                                                      \
    CX_TEST(NAME##_huge_message)                                                           \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        struct cx_link *a = NULL, *b = NULL;                                                           \
        CX_CONF_CHECK_RC(cx_conf_pair(OPS, MKADDR, &a, &b));                               \
        size_t n = 64u << 20;                                                              \
        uint32_t *big = malloc(n);                                                         \
        CX_CHECK(big != NULL);                                                             \
        for (size_t i = 0; i < n / 4; i++) big[i] = (uint32_t)(i * 2654435761u);            \
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = 1};                          \
        struct iovec v[2] = {{big, n / 2}, {(uint8_t *)big + n / 2, n / 2}};                \
        CX_CONF_CHECK_RC(cx_link_send(a, &h, v, 2));                                        \
        CX_CONF_CHECK_RC(cx_link_send(b, &h, v, 2));                                        \
        struct cx_conf_big ga = {0}, gb = {0};                                             \
        double t0 = cx_conf_now();                                                         \
        while ((!ga.got || !gb.got) && cx_conf_now() - t0 < 60) {                          \
            CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_on_big, &ga, 64));                 \
            CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_on_big, &gb, 64));                 \
        }                                                                                  \
        free(big);                                                                         \
        while (cx_link_pending(a) + cx_link_pending(b) > 0 && cx_conf_now() - t0 < 60) {   \
            CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_on_big, &ga, 64));                 \
            CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_on_big, &gb, 64));                 \
        }                                                                                  \
        CX_CHECK_EQ_INT(ga.got, 1);                                                        \
        CX_CHECK_EQ_INT(gb.got, 1);                                                        \
        CX_CHECK_EQ_INT(ga.len, n);                                                        \
        CX_CHECK_EQ_INT(ga.bad + gb.bad, 0);                                               \
        CX_CHECK_EQ_INT(cx_link_pending(a) + cx_link_pending(b), 0);                       \
        cx_link_close(a);                                                                  \
        cx_link_close(b);                                                                  \
    }                                                                                      \
    CX_TEST(NAME##_channels_multiplexed)                                                   \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        struct cx_link *a = NULL, *b = NULL;                                                           \
        CX_CONF_CHECK_RC(cx_conf_pair(OPS, MKADDR, &a, &b));                               \
        struct cx_mux *ma, *mb;                                                            \
        CX_CONF_CHECK_RC(cx_mux_create(a, &ma));                                            \
        CX_CONF_CHECK_RC(cx_mux_create(b, &mb));                                            \
        enum { C = 64, PER = 200 };                                                        \
        struct cx_link *ca[C], *cb[C];                                                     \
        struct cx_conf_rx rx[C];                                                           \
        memset(rx, 0, sizeof rx);                                                          \
        for (int i = 0; i < C; i++) {                                                      \
            CX_CONF_CHECK_RC(cx_mux_channel(ma, (uint32_t)i + 1, &ca[i]));                  \
            CX_CONF_CHECK_RC(cx_mux_channel(mb, (uint32_t)i + 1, &cb[i]));                  \
            rx[i].channel = (uint32_t)i + 1;                                               \
            cx_link_progress(cb[i], cx_conf_on_msg, &rx[i], 0); /* set handlers */          \
        }                                                                                  \
        static uint8_t buf[9000];                                                          \
        for (uint64_t s = 0; s < PER; s++) {                                               \
            for (int i = 0; i < C; i++) CX_CONF_CHECK_RC(cx_conf_send_seq(ca[i], s, buf));  \
            CX_CONF_CHECK_RC(cx_link_progress(cx_mux_link(mb), NULL, NULL, 256));           \
            CX_CONF_CHECK_RC(cx_link_progress(cx_mux_link(ma), NULL, NULL, 256));           \
        }                                                                                  \
        double t0 = cx_conf_now();                                                         \
        uint64_t total = 0;                                                                \
        while (total < (uint64_t)C * PER && cx_conf_now() - t0 < 20) {                     \
            CX_CONF_CHECK_RC(cx_link_progress(cx_mux_link(mb), NULL, NULL, 256));           \
            CX_CONF_CHECK_RC(cx_link_progress(cx_mux_link(ma), NULL, NULL, 256));           \
            total = 0;                                                                     \
            for (int i = 0; i < C; i++) total += rx[i].next;                               \
        }                                                                                  \
        for (int i = 0; i < C; i++) {                                                      \
            CX_CHECK_EQ_INT(rx[i].bad, 0);                                                 \
            CX_CHECK_EQ_INT(rx[i].next, PER);                                              \
        }                                                                                  \
        CX_CHECK_EQ_INT(cx_mux_dropped(mb), 0);                                            \
        for (int i = 0; i < C; i++) { cx_link_close(ca[i]); cx_link_close(cb[i]); }        \
        cx_link_close(cx_mux_link(ma));                                                    \
        cx_link_close(cx_mux_link(mb));                                                    \
    }                                                                                      \
    CX_TEST(NAME##_perf_smoke)                                                             \
    {                                                                                      \
        const char *why = cx_conf_##NAME##_ready();                                        \
        if (why) CX_SKIP("%s", why);                                                       \
        struct cx_link *a = NULL, *b = NULL;                                                           \
        CX_CONF_CHECK_RC(cx_conf_pair(OPS, MKADDR, &a, &b));                               \
        uint64_t ca[2] = {0, 0}, cb[2] = {0, 0};                                           \
        static uint8_t buf[1u << 20];                                                      \
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA};                                   \
        struct iovec v = {buf, 8};                                                         \
        enum { PP = 2000 };                                                                \
        double t0 = cx_conf_now();                                                         \
        for (int i = 0; i < PP && cx_conf_now() - t0 < 20; i++) {                          \
            CX_CONF_CHECK_RC(cx_link_send(a, &h, &v, 1));                                   \
            while (cb[0] == (uint64_t)i) { CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_count, cb, 1)); CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, ca, 1)); } \
            CX_CONF_CHECK_RC(cx_link_send(b, &h, &v, 1));                                   \
            while (ca[0] == (uint64_t)i) { CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, ca, 1)); CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_count, cb, 1)); } \
        }                                                                                  \
        double rtt = (cx_conf_now() - t0) / PP;                                            \
        v.iov_len = sizeof buf;                                                            \
        enum { BW = 256 };                                                                 \
        cb[0] = cb[1] = 0;                                                                 \
        t0 = cx_conf_now();                                                                \
        for (int i = 0; i < BW; i++) {                                                     \
            CX_CONF_CHECK_RC(cx_link_send(a, &h, &v, 1));                                   \
            do {                                                                           \
                CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, ca, 16));               \
                CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_count, cb, 16));               \
            } while (cx_link_pending(a) > (4u << 20));                                     \
        }                                                                                  \
        while (cb[0] < BW && cx_conf_now() - t0 < 120) {                                   \
            CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, ca, 16));                   \
            CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_count, cb, 16));                   \
        }                                                                                  \
        double bw = (double)cb[1] / (cx_conf_now() - t0) / 1e6;                            \
        fprintf(stderr, "  %s: 8 B half round trip %.2f us (one thread drives both ends), " \
                "1 MiB streaming %.0f MB/s\n", #NAME, rtt * 1e6 / 2, bw);                  \
        CX_CHECK_EQ_INT(cb[0], BW);                                                        \
        cx_link_close(a);                                                                  \
        cx_link_close(b);                                                                  \
    }

#endif
