/* Progress engine tests: adaptive poll intervals, blocking when idle (no CPU), wake-up by
 * a driver fd (tcp socket, shm eventfd), errors reported once, add/remove from callbacks. */
#include "engine/cx_engine.h"

#include "common/cx_error.h"
#include "common/cx_test.h"
#include "transport/conformance.h"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int busy_poll(void *ctx, int budget)
{
    (void)budget;
    int *left = ctx;
    if (*left > 0) {
        (*left)--;
        return 1;
    }
    return 0;
}
static int idle_poll(void *ctx, int budget)
{
    (void)ctx, (void)budget;
    return 0;
}

CX_TEST(engine_adaptive_interval)
{
    struct cx_engine *e;
    CX_CHECK_EQ_INT(cx_engine_create(&cx_idle_spin, &e), 0);
    int left = 1000000;
    struct cx_engine_source hot = {.name = "hot", .poll = busy_poll, .ctx = &left, .fd = -1, .cost = 1};
    struct cx_engine_source cheap = {.name = "shm-like", .poll = idle_poll, .fd = -1, .cost = 1};
    struct cx_engine_source costly = {.name = "tcp-like", .poll = idle_poll, .fd = -1, .cost = 8};
    int h = cx_engine_add(e, &hot), c = cx_engine_add(e, &cheap), t = cx_engine_add(e, &costly);
    CX_CHECK(h >= 0 && c >= 0 && t >= 0);
    for (int i = 0; i < 10000; i++) cx_engine_do_work(e);
    CX_CHECK_EQ_INT(cx_engine_source_interval(e, h), 1);
    CX_CHECK_EQ_INT(cx_engine_source_interval(e, c), 1); /* a memory poll: every round */
    CX_CHECK_EQ_INT(cx_engine_source_interval(e, t), 64);
    uint64_t ph = cx_engine_source_polls(e, h), pc = cx_engine_source_polls(e, c),
             pt = cx_engine_source_polls(e, t);
    fprintf(stderr, "  polls in 10000 rounds: busy %llu, idle cost-1 %llu, idle cost-8 %llu\n",
            (unsigned long long)ph, (unsigned long long)pc, (unsigned long long)pt);
    CX_CHECK_EQ_INT(ph, 10000);
    CX_CHECK_EQ_INT(pc, 10000);
    CX_CHECK(pt < 250);
    CX_CHECK_EQ_INT(cx_engine_remove(e, t), 0);
    CX_CHECK_EQ_INT(cx_engine_remove(e, t), -ENOENT);
    cx_engine_destroy(e);
}

struct got { int n; int err; uint64_t bytes; };
static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h, (void)p;
    struct got *g = arg;
    g->bytes += n;
    __atomic_add_fetch(&g->n, 1, __ATOMIC_SEQ_CST);
}
static void on_err(void *arg, int rc) { __atomic_store_n(&((struct got *)arg)->err, rc, __ATOMIC_SEQ_CST); }

static void shm_addr(char *buf, size_t cap)
{
    static int n;
    snprintf(buf, cap, "shm:///tmp/cx-engine-test-%d-%d.sock", (int)getpid(), n++);
}
static void tcp_addr(char *buf, size_t cap) { snprintf(buf, cap, "tcp://127.0.0.1:0"); }

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int wait_for(int *v, int want, double secs)
{
    double t0 = cx_conf_now();
    while (__atomic_load_n(v, __ATOMIC_SEQ_CST) < want && cx_conf_now() - t0 < secs) usleep(100);
    return __atomic_load_n(v, __ATOMIC_SEQ_CST) >= want;
}

CX_TEST(engine_idle_uses_no_cpu_and_wakes_on_traffic)
{
    struct cx_link *sa = NULL, *sb = NULL, *ta = NULL, *tb = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_shm_ops, shm_addr, &sa, &sb), 0);
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_tcp_ops, tcp_addr, &ta, &tb), 0);
    struct cx_engine *e;
    CX_CHECK_EQ_INT(cx_engine_create(&cx_idle_block, &e), 0);
    struct got gs = {0}, gt = {0};
    CX_CHECK(cx_engine_add_link(e, sa, on_msg, &gs, on_err, &gs) >= 0);
    CX_CHECK(cx_engine_add_link(e, ta, on_msg, &gt, on_err, &gt) >= 0);
    CX_CHECK_EQ_INT(cx_engine_start(e), 0);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    char msg[8] = "12345678";
    struct iovec v = {msg, 8};
    for (int round = 0; round < 2; round++) {
        usleep(200000); /* let the engine back off into epoll */
        double c0 = cpu_seconds(), t0 = cx_conf_now();
        usleep(1000000);
        double cpu = cpu_seconds() - c0, wall = cx_conf_now() - t0;
        struct cx_engine_stats st;
        cx_engine_stats(e, &st);
        fprintf(stderr, "  idle for %.2f s: %.2f ms CPU, engine blocked %llu times\n", wall,
                cpu * 1e3, (unsigned long long)st.blocks);
        CX_CHECK(cpu < 0.010); /* no measurable CPU: under 1% of a core */
        /* traffic wakes it through the shm eventfd and the tcp socket */
        double w0 = cx_conf_now();
        CX_CHECK_EQ_INT(cx_link_send(sb, &h, &v, 1), 0);
        CX_CHECK(wait_for(&gs.n, round + 1, 2.0));
        double w1 = cx_conf_now();
        CX_CHECK_EQ_INT(cx_link_send(tb, &h, &v, 1), 0);
        CX_CHECK(wait_for(&gt.n, round + 1, 2.0));
        fprintf(stderr, "  wake-up from blocked: shm %.0f us, tcp %.0f us\n", (w1 - w0) * 1e6,
                (cx_conf_now() - w1) * 1e6);
    }
    /* a peer that goes away is reported once through on_error */
    cx_link_close(tb);
    int one = 1;
    CX_CHECK(wait_for(&gt.err, one, 2.0) || gt.err < 0);
    CX_CHECK(gt.err < 0);
    cx_engine_destroy(e);
    cx_link_close(sa), cx_link_close(sb), cx_link_close(ta);
}

struct selfrm { struct cx_engine *e; int id; int polls; };
static int remove_self(void *ctx, int budget)
{
    (void)budget;
    struct selfrm *s = ctx;
    s->polls++;
    cx_engine_remove(s->e, s->id);
    return 1;
}

CX_TEST(engine_remove_from_callback_and_from_other_thread)
{
    struct cx_engine *e;
    CX_CHECK_EQ_INT(cx_engine_create(&cx_idle_backoff, &e), 0);
    struct selfrm s = {.e = e};
    struct cx_engine_source src = {.name = "self", .poll = remove_self, .ctx = &s, .fd = -1, .cost = 1};
    s.id = cx_engine_add(e, &src);
    CX_CHECK(s.id >= 0);
    CX_CHECK_EQ_INT(cx_engine_start(e), 0);
    /* the engine thread polls it once, whenever the (perhaps loaded) machine runs it */
    for (int i = 0; i < 500 && __atomic_load_n(&s.polls, __ATOMIC_ACQUIRE) == 0; i++)
        usleep(10000);
    usleep(20000);
    CX_CHECK_EQ_INT(__atomic_load_n(&s.polls, __ATOMIC_ACQUIRE), 1);
    int left = 1 << 30;
    struct cx_engine_source hot = {.name = "hot", .poll = busy_poll, .ctx = &left, .fd = -1, .cost = 1};
    int id = cx_engine_add(e, &hot);
    CX_CHECK(id >= 0);
    usleep(20000);
    CX_CHECK_EQ_INT(cx_engine_remove(e, id), 0);
    int after = left;
    usleep(20000);
    CX_CHECK_EQ_INT(left, after); /* not polled after remove returned */
    cx_engine_destroy(e);
}

/* Records which thread ran the callback. */
struct who { int n; pthread_t t; struct cx_engine *e; int drive_rc; };
static void on_msg_who(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h, (void)p, (void)n;
    struct who *w = arg;
    w->t = pthread_self();
    w->drive_rc = cx_engine_drive(w->e, 0); /* from a callback: refused, no deadlock */
    __atomic_add_fetch(&w->n, 1, __ATOMIC_SEQ_CST);
}

struct later { struct cx_link *k; struct cx_engine *e; int wake_only; };
static void *send_later(void *arg)
{
    struct later *l = arg;
    usleep(100000); /* the driver is blocked in epoll by now */
    if (l->wake_only) {
        cx_engine_wake(l->e);
    } else {
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
        struct iovec v = {"ping", 4};
        cx_link_send(l->k, &h, &v, 1);
    }
    return NULL;
}

CX_TEST(engine_drive_receives_on_the_caller_and_wakes_from_other_threads)
{
    struct cx_link *ta = NULL, *tb = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(&cx_tcp_ops, tcp_addr, &ta, &tb), 0);
    struct cx_engine *e;
    CX_CHECK_EQ_INT(cx_engine_create(&cx_idle_block, &e), 0);
    struct who w = {.e = e};
    CX_CHECK(cx_engine_add_link(e, ta, on_msg_who, &w, NULL, NULL) >= 0);
    CX_CHECK_EQ_INT(cx_engine_start(e), 0);
    usleep(50000); /* the engine thread blocks in epoll: the driver must get it out of the way */
    for (int round = 0; round < 3; round++) {
        /* a message sent from another thread while the caller is blocked in drive */
        pthread_t th;
        struct later l = {.k = tb, .e = e};
        CX_CHECK_EQ_INT(pthread_create(&th, NULL, send_later, &l), 0);
        double t0 = cx_conf_now();
        while (__atomic_load_n(&w.n, __ATOMIC_SEQ_CST) < round + 1 && cx_conf_now() - t0 < 5)
            CX_CHECK(cx_engine_drive(e, 5000000000LL) >= 0);
        pthread_join(th, NULL);
        CX_CHECK_EQ_INT(w.n, round + 1);
        CX_CHECK(pthread_equal(w.t, pthread_self())); /* the callback ran on the driver */
        CX_CHECK_EQ_INT(w.drive_rc, -EDEADLK);
    }
    /* a wake from another thread ends a blocked drive with nothing done, long before its
     * 5 s timeout */
    pthread_t th;
    struct later l = {.e = e, .wake_only = 1};
    CX_CHECK_EQ_INT(pthread_create(&th, NULL, send_later, &l), 0);
    double t0 = cx_conf_now();
    int rc = cx_engine_drive(e, 5000000000LL);
    double took = cx_conf_now() - t0;
    pthread_join(th, NULL);
    CX_CHECK_EQ_INT(rc, 0);
    CX_CHECK(took < 4.0);
    /* after the last drive, and unparked, the engine thread receives again by itself */
    cx_engine_unpark(e);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    struct iovec v = {"pong", 4};
    CX_CHECK_EQ_INT(cx_link_send(tb, &h, &v, 1), 0);
    CX_CHECK(wait_for(&w.n, 4, 2.0));
    CX_CHECK(!pthread_equal(w.t, pthread_self()));
    /* a timeout with nothing to do returns 0 */
    CX_CHECK_EQ_INT(cx_engine_drive(e, 1000000), 0);
    cx_engine_destroy(e);
    cx_link_close(ta), cx_link_close(tb);
}

CX_TEST_MAIN()
