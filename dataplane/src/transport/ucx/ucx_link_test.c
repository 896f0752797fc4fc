/* Behaviour of the ucx driver beyond the conformance suite (ucx_test.c), around its two
 * large-message paths (copied into the pool below CX_UCX_ZCOPY_MIN, zero-copy with send
 * waiting from there): the caller's buffer is free to reuse when send returns; two threads
 * sending large messages to each other over two links do not deadlock; a large send from
 * inside a receive callback works; a peer killed while a send waits for it fails the send
 * within seconds. Same UCX_TLS defaults as ucx_test.c. The killed peer is this binary run
 * again with CX_UCX_LINK_TEST_SINK=<address> (UCX state does not survive fork). */
#include "transport/conformance.h"
#include "testutil/ucx_test_env.h"

#ifdef CX_HAVE_UCX
#include "transport/ucx/cx_ucx_int.h"

#include <signal.h>
#include <spawn.h>
#include <ucs/config/global_opts.h>

extern char **environ;

static const char *ready(void)
{
    ucx_test_env();
    if (!getenv("UCX_LOG_LEVEL"))
        ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;
    return NULL;
}

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "ucx://127.0.0.1:0"); }

/* Payload of message `seq`: 32-bit words seq * 7919 + i, so any mix-up shows. */
static void fill(void *p, size_t n, uint64_t seq)
{
    uint32_t *w = p;
    for (size_t i = 0; i < n / 4; i++) w[i] = (uint32_t)(seq * 7919u + i);
}

struct rx {
    int got, bad;
    uint64_t next_seq;
    size_t bytes;
};

static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct rx *r = arg;
    const uint32_t *w = p;
    int ok = h->seq == r->next_seq;
    for (size_t i = 0; ok && i < n / 4; i++) ok = w[i] == (uint32_t)(h->seq * 7919u + i);
    r->bad += !ok;
    r->got++;
    r->next_seq++;
    r->bytes += n;
}

/* Progresses a and b until rb has `want` messages (or 30 s passed). Returns 0 or an error. */
static int pump(struct cx_link *a, struct cx_link *b, struct rx *ra, struct rx *rb, int want)
{
    double t0 = cx_conf_now();
    while (rb->got < want && cx_conf_now() - t0 < 30) {
        int rc = cx_link_progress(a, on_msg, ra, 16);
        if (rc < 0)
            return rc;
        if ((rc = cx_link_progress(b, on_msg, rb, 16)) < 0)
            return rc;
    }
    return rb->got >= want ? 0 : -ETIMEDOUT;
}

/* A watchdog for the tests that would hang if the driver deadlocked: ends the process
 * (the test run counts it as a failure) unless stopped in time. */
static void *watchdog(void *arg)
{
    int secs = (int)(intptr_t)arg;
    sleep((unsigned)secs);
    fprintf(stderr, "  watchdog: still running after %d s (deadlock?)\n", secs);
    _exit(1);
}
static pthread_t start_watchdog(int secs)
{
    pthread_t t;
    pthread_create(&t, NULL, watchdog, (void *)(intptr_t)secs);
    return t;
}
static void stop_watchdog(pthread_t t)
{
    pthread_cancel(t);
    pthread_join(t, NULL);
}

CX_TEST(ucx_buffer_is_free_to_reuse_when_send_returns)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    struct cx_link *a = NULL, *b = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a, &b), 0);
    pthread_t dog = start_watchdog(60);
    struct rx ra = {0}, rb = {0};
    size_t cap = 6u << 20;
    uint8_t *buf = malloc(cap);
    CX_CHECK(buf != NULL);
    /* copied below CX_UCX_ZCOPY_MIN, zero-copy from it; one and two iovec entries */
    const size_t sizes[] = {100u << 10, CX_UCX_ZCOPY_MIN - 4, CX_UCX_ZCOPY_MIN, 6u << 20};
    uint64_t seq = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (int iovs = 1; iovs <= 2; iovs++, seq++) {
            size_t n = sizes[s];
            fill(buf, n, seq);
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = seq};
            struct iovec v[2] = {{buf, iovs == 1 ? n : n / 2}, {buf + n / 2, n - n / 2}};
            CX_CHECK_EQ_INT(cx_link_send(a, &h, v, iovs), 0);
            memset(buf, 0xAB, n); /* the caller reuses its buffer at once */
            CX_CHECK_EQ_INT(pump(a, b, &ra, &rb, (int)seq + 1), 0);
        }
    }
    stop_watchdog(dog);
    CX_CHECK_EQ_INT(rb.got, 8);
    CX_CHECK_EQ_INT(rb.bad, 0);
    free(buf);
    cx_link_close(a);
    cx_link_close(b);
}

/* Rendezvous for the zero-copy sends only where UCX may have RDMA (cx_ucx.c want_rndv). */
CX_TEST(ucx_rendezvous_only_where_rdma_may_be)
{
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("tcp", 0), 0);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("tcp", 1), 0); /* named: only tcp, devices or not */
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("tcp,posix,sysv,self,cma", 1), 0);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("rc,tcp", 0), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("tcp, ud_x", 0), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("dc_mlx5", 0), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("ib", 0), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma(NULL, 0), 0); /* unset: the host decides */
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma(NULL, 1), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("", 1), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("all", 0), 0);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("all", 1), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("^tcp", 1), 1);
    CX_CHECK_EQ_INT(cx_ucx_tls_may_rdma("^rc", 0), 0);
}

/* Large sends arrive whole and in order both ways the driver sends them: eagerly and by
 * rendezvous (forced with CX_UCX_RNDV, as on a host with RDMA), each followed by a small
 * message that must wait behind a fetch still running. With the tests' UCX_TLS (no RDMA)
 * a link left to choose sends eagerly. */
CX_TEST(ucx_large_sends_eager_and_by_rendezvous)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    const char *tls = getenv("UCX_TLS");
    pthread_t dog = start_watchdog(120);
    const char *modes[] = {NULL, "0", "1"};
    for (int m = 0; m < 3; m++) {
        if (modes[m])
            setenv("CX_UCX_RNDV", modes[m], 1);
        else
            unsetenv("CX_UCX_RNDV");
        struct cx_link *a = NULL, *b = NULL;
        CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a, &b), 0);
        int want = modes[m] ? modes[m][0] == '1' : cx_ucx_tls_may_rdma(tls, 0);
        if (modes[m] || (tls && *tls && tls[0] != '^' && !strstr(tls, "all")))
            CX_CHECK_EQ_INT(((struct ucx_link *)a)->rndv, want);
        struct rx ra = {0}, rb = {0};
        size_t cap = 2u << 20;
        uint8_t *buf = malloc(cap);
        CX_CHECK(buf != NULL);
        const size_t sizes[] = {CX_UCX_ZCOPY_MIN, 64, 2u << 20, 100};
        for (uint64_t seq = 0; seq < 8; seq++) {
            size_t n = sizes[seq % 4];
            fill(buf, n, seq);
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = seq};
            int iovs = 1 + (int)(seq / 4);
            struct iovec v[2] = {{buf, iovs == 1 ? n : n / 2}, {buf + n / 2, n - n / 2}};
            CX_CHECK_EQ_INT(cx_link_send(a, &h, v, iovs), 0);
        }
        CX_CHECK_EQ_INT(pump(a, b, &ra, &rb, 8), 0);
        CX_CHECK_EQ_INT(rb.got, 8);
        CX_CHECK_EQ_INT(rb.bad, 0);
        free(buf);
        cx_link_close(a);
        cx_link_close(b);
    }
    unsetenv("CX_UCX_RNDV");
    stop_watchdog(dog);
}

/* One thread of two_threads_...: sends n large messages on tx, receives n on rx. */
struct side {
    struct cx_link *tx, *rx;
    int n, rc;
    size_t size;
    struct rx got, unused;
};

static void *side_run(void *p)
{
    struct side *s = p;
    uint8_t *buf = malloc(s->size);
    if (!buf) {
        s->rc = -ENOMEM;
        return NULL;
    }
    for (int i = 0; i < s->n && s->rc == 0; i++) {
        fill(buf, s->size, (uint64_t)i);
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = (uint64_t)i};
        struct iovec v = {buf, s->size};
        s->rc = cx_link_send(s->tx, &h, &v, 1);
        double t0 = cx_conf_now();
        while (s->rc == 0 && s->got.got < i + 1 && cx_conf_now() - t0 < 30) {
            int rc = cx_link_progress(s->rx, on_msg, &s->got, 16);
            if (rc >= 0)
                rc = cx_link_progress(s->tx, on_msg, &s->unused, 16);
            s->rc = rc < 0 ? rc : 0;
        }
    }
    free(buf);
    return NULL;
}

/* Thread X owns a1 (sends to b1) and a2 (receives from b2); thread Y owns b2 and b1. Each
 * waits in a zero-copy send for the other to receive: without the driver progressing the
 * links nobody is inside (cx_ucx_share.c), both would wait forever. */
CX_TEST(ucx_two_threads_sending_large_messages_to_each_other_do_not_deadlock)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    struct cx_link *a1 = NULL, *b1 = NULL, *a2 = NULL, *b2 = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a1, &b1), 0);
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a2, &b2), 0);
    pthread_t dog = start_watchdog(120), tx, ty;
    struct side x = {.tx = a1, .rx = a2, .n = 16, .size = 4u << 20};
    struct side y = {.tx = b2, .rx = b1, .n = 16, .size = 4u << 20};
    pthread_create(&tx, NULL, side_run, &x);
    pthread_create(&ty, NULL, side_run, &y);
    pthread_join(tx, NULL);
    pthread_join(ty, NULL);
    stop_watchdog(dog);
    CX_CHECK_EQ_INT(x.rc, 0);
    CX_CHECK_EQ_INT(y.rc, 0);
    CX_CHECK_EQ_INT(x.got.got, 16);
    CX_CHECK_EQ_INT(y.got.got, 16);
    CX_CHECK_EQ_INT(x.got.bad + y.got.bad, 0);
    cx_link_close(a1);
    cx_link_close(b1);
    cx_link_close(a2);
    cx_link_close(b2);
}

/* Ends of one link driven by one thread, both sending a zero-copy message before either
 * progresses: each send must get the other end progressed meanwhile. */
CX_TEST(ucx_one_thread_large_sends_both_ways)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    struct cx_link *a = NULL, *b = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a, &b), 0);
    pthread_t dog = start_watchdog(60);
    size_t n = 8u << 20;
    uint8_t *buf = malloc(n);
    CX_CHECK(buf != NULL);
    struct rx ra = {0}, rb = {0};
    for (uint64_t i = 0; i < 4; i++) {
        fill(buf, n, i);
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = i};
        struct iovec v = {buf, n};
        CX_CHECK_EQ_INT(cx_link_send(a, &h, &v, 1), 0);
        CX_CHECK_EQ_INT(cx_link_send(b, &h, &v, 1), 0);
    }
    CX_CHECK_EQ_INT(pump(a, b, &ra, &rb, 4), 0);
    CX_CHECK_EQ_INT(pump(b, a, &rb, &ra, 4), 0);
    stop_watchdog(dog);
    CX_CHECK_EQ_INT(ra.bad + rb.bad, 0);
    free(buf);
    cx_link_close(a);
    cx_link_close(b);
}

/* b answers every message from inside its receive callback with the same payload: a send
 * of a large message there cannot wait (UCX forbids progress inside its callbacks), so it
 * is copied. */
struct echo {
    struct cx_link *link;
    int rc, got;
};

static void echo_back(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct echo *e = arg;
    struct iovec v = {(void *)p, n};
    int rc = cx_link_send(e->link, h, &v, 1);
    if (rc < 0)
        e->rc = rc;
    e->got++;
}

CX_TEST(ucx_large_send_from_inside_a_receive_callback)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    struct cx_link *a = NULL, *b = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_ucx_ops, mkaddr, &a, &b), 0);
    size_t n = 2u << 20;
    uint8_t *buf = malloc(n);
    CX_CHECK(buf != NULL);
    pthread_t dog = start_watchdog(60);
    struct rx ra = {0};
    struct echo e = {.link = b};
    for (uint64_t i = 0; i < 6; i++) {
        fill(buf, n, i);
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = i};
        struct iovec v = {buf, n};
        CX_CHECK_EQ_INT(cx_link_send(a, &h, &v, 1), 0);
        double t0 = cx_conf_now();
        while (ra.got < (int)i + 1 && e.rc == 0 && cx_conf_now() - t0 < 30) {
            CX_CHECK(cx_link_progress(b, echo_back, &e, 16) >= 0);
            CX_CHECK(cx_link_progress(a, on_msg, &ra, 16) >= 0);
        }
    }
    stop_watchdog(dog);
    CX_CHECK_EQ_INT(e.rc, 0);
    CX_CHECK_EQ_INT(e.got, 6);
    CX_CHECK_EQ_INT(ra.got, 6);
    CX_CHECK_EQ_INT(ra.bad, 0);
    free(buf);
    cx_link_close(a);
    cx_link_close(b);
}

/* The sink process: receives three messages, then stops progressing until killed. */
__attribute__((constructor)) static void sink_role(void)
{
    const char *addr = getenv("CX_UCX_LINK_TEST_SINK");
    if (!addr)
        return;
    struct cx_link *k;
    if (cx_ucx_ops.connect(addr, &k) < 0)
        _exit(3);
    struct rx r = {0};
    while (r.got < 3)
        if (cx_link_progress(k, on_msg, &r, 16) < 0)
            _exit(4);
    for (;;) pause();
}

struct killer {
    pid_t pid;
    double after;
    double at;
};

static void *kill_later(void *p)
{
    struct killer *k = p;
    usleep((useconds_t)(k->after * 1e6));
    k->at = cx_conf_now();
    kill(k->pid, SIGKILL);
    return NULL;
}

CX_TEST(ucx_peer_killed_while_a_large_send_waits)
{
    const char *why = ready();
    if (why) CX_SKIP("%s", why);
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_ucx_ops.listen("ucx://127.0.0.1:0", &l), 0);
    char env[160];
    snprintf(env, sizeof env, "CX_UCX_LINK_TEST_SINK=%s", cx_ucx_ops.listener_addr(l));
    size_t ne = 0;
    while (environ[ne]) ne++;
    char **envp = calloc(ne + 2, sizeof *envp);
    CX_CHECK(envp != NULL);
    memcpy(envp, environ, ne * sizeof *envp);
    envp[ne] = env;
    char *argv[] = {"ucx_link_test_sink", NULL};
    pid_t pid;
    CX_CHECK_EQ_INT(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, envp), 0);
    free(envp);
    struct cx_link *k = NULL;
    int rc = cx_ucx_ops.accept(l, 10000, &k);
    cx_ucx_ops.listener_close(l);
    if (rc < 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    CX_CHECK_EQ_INT(rc, 0);
    pthread_t dog = start_watchdog(60), kt;
    struct killer kill_it = {.pid = pid, .after = 1.0};
    pthread_create(&kt, NULL, kill_later, &kill_it);
    size_t n = 4u << 20;
    uint8_t *buf = calloc(1, n);
    CX_CHECK(buf != NULL);
    struct rx r = {0};
    rc = 0;
    int sent = 0;
    double t0 = cx_conf_now();
    while (rc >= 0 && cx_conf_now() - t0 < 20) { /* the 4th send waits until the kill */
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = (uint64_t)sent};
        struct iovec v = {buf, n};
        rc = cx_link_send(k, &h, &v, 1);
        if (rc >= 0)
            sent++, rc = cx_link_progress(k, on_msg, &r, 16);
    }
    double took = cx_conf_now() - kill_it.at;
    pthread_join(kt, NULL);
    waitpid(pid, NULL, 0);
    stop_watchdog(dog);
    fprintf(stderr, "  %d sends went through; then %d (%s) %.3f s after the kill\n", sent, rc,
            cx_errmsg(), took);
    CX_CHECK(rc < 0);
    CX_CHECK(took < 10);
    CX_CHECK(sent >= 3);
    free(buf);
    cx_link_close(k);
}

#else
CX_TEST(ucx_link_behaviour)
{
    CX_SKIP("UCX not built in (pkg-config ucx not found: install libucx-dev)");
}
#endif

CX_TEST_MAIN()

/* Under AddressSanitizer: after ucx_peer_killed_while_a_large_send_waits, UCX never ends
 * some requests of the dead peer's link, whose buffers the driver leaks on purpose (see
 * cx_ucx_xfer.c cx_ucx_drain). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:rx_enqueue\nleak:send_copied\nleak:map_buf\n";
}
