/* The event-channel and pipe runtimes over the dpdk driver: processes with an EAL each,
 * memif clients of the bare DPDK switch (dpdk_test_switch.h), whose runtimes listen on and
 * dial dpdk:// addresses; the stack builder puts reliability and fragmentation on every
 * link they make or accept. The EAL does not survive fork, so every DPDK process is this
 * binary exec'd again in a role (`dpdk_layers_test --cx-role <role> ...`):
 *
 *   switch <socket> <nports> <prefix>   the memif fabric (memif server of every port)
 *   chan-source                          creates channel "ev" (here -> there) and "done"
 *                                        (back), prints "ids <ev> <done>", sends N events
 *                                        of 0..9000 bytes, waits for the sink's count
 *   chan-sink <ev id> <done id>          checks every event in order and content, answers
 *   pipe-reader <space address>          attaches to pipe "dpdk-pipe", reads 0..N-1
 *   pipe-writer <space address>          writes 0..N-1 once the reader's direct link is up
 *
 * Each role's port comes from the environment this process gives it (CONFLUX_DPDK_ARGS:
 * memif client id k of the switch, CONFLUX_DPDK_IP 10.76.0.<k+1>). The pipe's space server
 * is a plain forked process on tcp (by design: every segment also reaches the space). */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "transport/dpdk/dpdk_test_util.h"

#ifdef CX_HAVE_DPDK
#include "channel/cx_chan.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "pipe/pipe_testutil.h"
#include "transport/dpdk/cx_dpdk.h"
#include "transport/dpdk/dpdk_test_switch.h"

#include <unistd.h>

#define CHAN_N 3000
#define BIG 9000 /* well above the memif MTU's 1424-byte payload: fragmented */
#define PIPE_N 2000
#define BYE 0xffffffffu /* the source's last event: it has checked its link, the sink may go */

static struct tu_switch g_switch;
static char g_skip[512];
static int g_gen; /* switches started: each test gets a fresh one */

static void switch_down(void) { tu_switch_stop(&g_switch); }

/* A fresh switch with two ports for the calling test (the previous test's stopped first: a
 * switch outliving its clients is not what a test should depend on); NULL, or why the
 * tests cannot run here. */
static const char *switch_ready(void)
{
    if (g_gen++ == 0)
        atexit(switch_down);
    else
        switch_down();
    char self[64];
    snprintf(self, sizeof self, "cxdpdkl-%d-%d", (int)getpid(), g_gen);
    return tu_switch_start(&g_switch, self, "dpdk_layers_test", 2, g_skip, sizeof g_skip);
}

/* The environment of the process on switch port id. */
static void port_env(int id, char args[512], char ip[64])
{
    tu_switch_port_args(&g_switch, id, args, 512);
    snprintf(ip, 64, "CONFLUX_DPDK_IP=10.76.0.%d", id + 1);
}

/* Reads the child's stdout until a line starting with prefix; copies the line. 0 or -1. */
static int read_line(int fd, const char *prefix, char *out, size_t cap, int timeout_ms)
{
    char buf[1024];
    size_t n = 0;
    double t0 = cx_conf_now();
    while ((cx_conf_now() - t0) * 1000 < timeout_ms && n < sizeof buf - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = 0;
            if (!strncmp(buf, prefix, strlen(prefix))) {
                snprintf(out, cap, "%s", buf);
                return 0;
            }
            n = 0;
            continue;
        }
        n++;
    }
    return -1;
}

/* ---- the channel roles ---- */

struct tev {
    uint32_t i, n;
    uint8_t *data; /* n bytes */
};
static const char *tev_json = "{\"name\":\"dpdk_layers_event\",\"fields\":[{\"name\":\"i\",\"type\":\"uint32\"},"
                              "{\"name\":\"n\",\"type\":\"uint32\"},{\"name\":\"data\",\"type\":\"uint8[n]\"}]}";

static const struct cx_format *tev_format(void)
{
    struct cx_format *f;
    const struct cx_format *F = NULL;
    if (cx_format_from_json(tev_json, strlen(tev_json), NULL, &f) < 0 || cx_format_size(f) != sizeof(struct tev))
        return NULL;
    cx_format_registry_insert(f, &F);
    return F;
}

static uint32_t tev_size(uint32_t i) { return i % 5 == 0 ? 1425 + i * 37 % (BIG - 1425) : i * 13 % 1400; }
static uint8_t tev_byte(uint32_t i, uint32_t j) { return (uint8_t)(i * 31 + j * 7); }

struct chan_rx {
    uint32_t next;       /* the next event expected */
    int bad;             /* out of order or wrong content */
    volatile int done;   /* the source: the sink's answer came; the sink: all N arrived */
    volatile int bye;    /* the sink: the source's BYE came */
    uint32_t answer;     /* the sink's count of good events (at the source) */
    char from[128];      /* the other process's address */
};

static void sink_on(void *arg, const struct cx_chan_event *e)
{
    struct chan_rx *r = arg;
    const struct tev *v = e->data;
    if (v->i == BYE) {
        __atomic_store_n(&r->bye, 1, __ATOMIC_RELEASE);
        return;
    }
    int ok = v->i == r->next && v->n == tev_size(v->i) && e->seq == (uint64_t)v->i + 1;
    for (uint32_t j = 0; ok && j < v->n; j++)
        ok = v->data[j] == tev_byte(v->i, j);
    if (!ok && !r->bad++)
        fprintf(stderr, "  chan-sink: event %u (%u bytes, seq %llu) where %u was due, or its "
                "bytes or number differ\n", v->i, v->n, (unsigned long long)e->seq, r->next);
    r->next++;
    if (!r->from[0])
        snprintf(r->from, sizeof r->from, "%s", e->from);
    if (r->next == CHAN_N)
        __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static void answer_on(void *arg, const struct cx_chan_event *e)
{
    struct chan_rx *r = arg;
    const struct tev *v = e->data;
    r->answer = v->i;
    snprintf(r->from, sizeof r->from, "%s", e->from);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static int wait_flag(volatile int *f, int seconds)
{
    for (int i = 0; i < seconds * 100 && !__atomic_load_n(f, __ATOMIC_ACQUIRE); i++)
        usleep(10000);
    return __atomic_load_n(f, __ATOMIC_ACQUIRE) ? 0 : -1;
}

/* 0 when the runtime's link to addr is the dpdk driver's (stderr says otherwise). */
static int link_is_dpdk(struct cx_chan_ctx *ctx, const char *addr, const char *who)
{
    char kind[32] = "?";
    if (cx_chan_ctx_link(ctx, addr, kind, sizeof kind) < 0 || strcmp(kind, "dpdk") != 0) {
        fprintf(stderr, "  %s: the link to %s is '%s', want dpdk (%s)\n", who, addr, kind, cx_errmsg());
        return -1;
    }
    return 0;
}

#define FAIL(...) do { fprintf(stderr, "  " __VA_ARGS__); fprintf(stderr, ": %s\n", cx_errmsg()); return 1; } while (0)

static int role_chan_source(void)
{
    const struct cx_format *F = tev_format();
    /* tcp_only: no shm rendezvous, which would join the two processes of this host */
    struct cx_chan_ctx_opts o = {.listen = "dpdk://10.76.0.1:0", .tcp_only = 1};
    struct cx_chan_ctx *ctx;
    struct cx_chan *ev, *done;
    struct cx_chan_source *src;
    struct cx_chan_sink *k;
    struct cx_chan_opts co = {.format = F, .mode = CX_CHAN_RELIABLE, .queue_limit = 256};
    struct cx_chan_sink_opts so = {.format = F};
    struct chan_rx r = {0};
    if (!F || cx_chan_ctx_create(&o, &ctx) < 0 || cx_chan_create(ctx, &co, &ev) < 0 ||
        cx_chan_create(ctx, &co, &done) < 0 || cx_chan_source(ev, F, &src) < 0 ||
        cx_chan_sink(done, &so, answer_on, &r, &k) < 0)
        FAIL("chan-source: setup");
    if (strncmp(cx_chan_id(ev), "cx1:dpdk://10.76.0.1:", 21) != 0) {
        fprintf(stderr, "  chan-source: channel id %s does not carry the dpdk address\n", cx_chan_id(ev));
        return 1;
    }
    printf("ids %s %s\n", cx_chan_id(ev), cx_chan_id(done));
    fflush(stdout);
    if (cx_chan_wait_members(ev, 1, 1, 60000) < 0 || cx_chan_wait_members(done, 1, 1, 60000) < 0)
        FAIL("chan-source: the sink process did not join");
    static uint8_t buf[BIG];
    for (uint32_t i = 0; i < CHAN_N; i++) {
        struct tev v = {.i = i, .n = tev_size(i), .data = buf};
        for (uint32_t j = 0; j < v.n; j++) buf[j] = tev_byte(i, j);
        if (cx_chan_submit_wait(src, &v, 30000) < 0)
            FAIL("chan-source: submit %u", i);
    }
    if (wait_flag(&r.done, 60) < 0) {
        fprintf(stderr, "  chan-source: no answer from the sink in 60 s\n");
        return 1;
    }
    int rc = r.answer == CHAN_N ? 0 : 1;
    if (rc)
        fprintf(stderr, "  chan-source: the sink got %u good events of %d\n", r.answer, CHAN_N);
    if (link_is_dpdk(ctx, r.from, "chan-source") < 0) /* before the sink may leave */
        rc = 1;
    struct tev bye = {.i = BYE, .n = 0, .data = buf};
    if (cx_chan_submit_wait(src, &bye, 30000) < 0)
        FAIL("chan-source: bye");
    /* stay until the sink has left, so that a BYE lost on the fabric is sent again (a
     * context destroyed at once takes its unacknowledged frames with it) */
    struct cx_chan_stats st;
    for (int i = 0; i < 9000; i++) {
        cx_chan_stats(ev, &st);
        if (st.sinks == 0)
            break;
        usleep(10000);
    }
    fprintf(stderr, "  chan-source (%s): %d events of 0..%d bytes delivered in order over dpdk\n",
            cx_dpdk_port_desc(), CHAN_N, BIG);
    cx_chan_ctx_destroy(ctx);
    cx_dpdk_shutdown();
    return rc;
}

static int role_chan_sink(const char *ev_id, const char *done_id)
{
    const struct cx_format *F = tev_format();
    struct cx_chan_ctx_opts o = {.listen = "dpdk://10.76.0.2:0", .tcp_only = 1};
    struct cx_chan_ctx *ctx;
    struct cx_chan *ev, *done;
    struct cx_chan_source *back;
    struct cx_chan_sink *k;
    struct cx_chan_sink_opts so = {.format = F};
    struct chan_rx r = {0};
    if (!F || cx_chan_ctx_create(&o, &ctx) < 0 || cx_chan_open(ctx, ev_id, 30000, &ev) < 0 ||
        cx_chan_open(ctx, done_id, 30000, &done) < 0 || cx_chan_source(done, F, &back) < 0 ||
        cx_chan_sink(ev, &so, sink_on, &r, &k) < 0)
        FAIL("chan-sink: setup");
    if (wait_flag(&r.done, 120) < 0) {
        fprintf(stderr, "  chan-sink: %u of %d events after 120 s\n", r.next, CHAN_N);
        return 1;
    }
    int rc = link_is_dpdk(ctx, r.from, "chan-sink") < 0 || r.bad ? 1 : 0; /* the source waits */
    struct tev a = {.i = r.bad ? 0 : CHAN_N, .n = 0, .data = NULL};
    if (cx_chan_submit_wait(back, &a, 30000) < 0)
        FAIL("chan-sink: answer");
    if (wait_flag(&r.bye, 60) < 0) {
        fprintf(stderr, "  chan-sink: no bye from the source in 60 s\n");
        rc = 1;
    }
    cx_chan_ctx_destroy(ctx);
    cx_dpdk_shutdown();
    return rc;
}

/* ---- the pipe roles ---- */

static int role_pipe_reader(const char *space)
{
    int s = pi_space_open(space, NULL); /* CONFLUX_PIPE_LISTEN=dpdk: the port's address */
    int r = s < 0 ? -1 : pi_attach("dpdk-pipe", s);
    if (r < 0)
        FAIL("pipe-reader: open");
    printf("ready\n");
    fflush(stdout);
    if (read_all(r, 0, PIPE_N, 60000) != PIPE_N)
        return 1; /* read_all said why */
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    fprintf(stderr, "  pipe-reader (%s): %d segments of 8..2007 bytes, %llu from the writer's "
            "dpdk link, %llu from the space\n", cx_dpdk_port_desc(), PIPE_N,
            (unsigned long long)st.from_writer, (unsigned long long)st.from_space);
    int rc = pipe_link_is(r, "dpdk", "pipe-reader") < 0 || st.from_writer == 0 ? 1 : 0;
    pi_shutdown();
    cx_dpdk_shutdown();
    return rc;
}

static int role_pipe_writer(const char *space)
{
    int s = pi_space_open(space, NULL);
    int w = s < 0 ? -1 : pi_create("dpdk-pipe", s, PI_CREATE);
    if (w < 0)
        FAIL("pipe-writer: open");
    if (wait_direct_link(w, 30000, "pipe-writer") < 0) /* up to 30 s: a loaded machine */
        return 1;
    if (write_n(w, 0, PIPE_N, 0) < 0)
        return 1;
    int rc = pipe_link_is(w, "dpdk", "pipe-writer") < 0 ? 1 : 0;
    if (pi_close(w) != 0)
        FAIL("pipe-writer: pi_close");
    pi_shutdown();
    cx_dpdk_shutdown();
    return rc;
}

static int run_role(int argc, char **argv)
{
    const char *r = argv[2];
    if (!strcmp(r, "switch") && argc == 6)
        return dpdk_test_switch_main(argv[3], atoi(argv[4]), argv[5]);
    if (!strcmp(r, "chan-source") && argc == 3)
        return role_chan_source();
    if (!strcmp(r, "chan-sink") && argc == 5)
        return role_chan_sink(argv[3], argv[4]);
    if (!strcmp(r, "pipe-reader") && argc == 4)
        return role_pipe_reader(argv[3]);
    if (!strcmp(r, "pipe-writer") && argc == 4)
        return role_pipe_writer(argv[3]);
    fprintf(stderr, "dpdk_layers_test: unknown role or arguments\n");
    return 2;
}

/* ---- the tests: this process runs no EAL, it starts the others ---- */

CX_TEST(channel_over_dpdk_memif_in_order_with_fragments)
{
    const char *why = switch_ready();
    if (why) CX_SKIP("%s", why);
    char a0[512], i0[64], a1[512], i1[64], ids[1024];
    port_env(0, a0, i0);
    port_env(1, a1, i1);
    char *env0[] = {a0, i0, NULL}, *env1[] = {a1, i1, NULL};
    char *sargv[] = {"dpdk_layers_test", "--cx-role", "chan-source", NULL};
    int out = -1;
    pid_t src = tu_spawn(NULL, env0, sargv, &out);
    CX_CHECK(src > 0);
    if (src <= 0)
        return;
    if (read_line(out, "ids ", ids, sizeof ids, 60000) < 0) {
        close(out);
        tu_stop(&src);
        CX_CHECK(!"the channel source printed no ids (see its messages above)");
        return;
    }
    close(out);
    char ev[400], done[400];
    CX_CHECK_EQ_INT(sscanf(ids, "ids %399s %399s", ev, done), 2);
    char *kargv[] = {"dpdk_layers_test", "--cx-role", "chan-sink", ev, done, NULL};
    pid_t snk = tu_spawn(NULL, env1, kargv, NULL);
    CX_CHECK(snk > 0);
    int ss, sk;
    tu_wait_pair(src, snk, 240000, &ss, &sk);
    CX_CHECK_EQ_INT(ss, 0);
    CX_CHECK_EQ_INT(sk, 0);
}

CX_TEST(pipe_direct_link_over_dpdk_memif)
{
    const char *why = switch_ready();
    if (why) CX_SKIP("%s", why);
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    if (sp.pid <= 0)
        return;
    char a0[512], i0[64], a1[512], i1[64], ready[64];
    port_env(0, a0, i0);
    port_env(1, a1, i1);
    char lst[] = "CONFLUX_PIPE_LISTEN=dpdk";
    char *env0[] = {a0, i0, lst, NULL}, *env1[] = {a1, i1, lst, NULL};
    char *rargv[] = {"dpdk_layers_test", "--cx-role", "pipe-reader", sp.addr, NULL};
    char *wargv[] = {"dpdk_layers_test", "--cx-role", "pipe-writer", sp.addr, NULL};
    int out = -1;
    pid_t rd = tu_spawn(NULL, env1, rargv, &out);
    CX_CHECK(rd > 0);
    int up = rd > 0 && read_line(out, "ready", ready, sizeof ready, 60000) == 0;
    if (out >= 0)
        close(out);
    CX_CHECK(up);
    pid_t wr = up ? tu_spawn(NULL, env0, wargv, NULL) : -1;
    int sr = -1, sw = -1;
    if (wr > 0)
        tu_wait_pair(rd, wr, 240000, &sr, &sw);
    else
        tu_stop(&rd);
    CX_CHECK_EQ_INT(sr, 0);
    CX_CHECK_EQ_INT(sw, 0);
    space_down(&sp);
}

#else /* no DPDK: the tests skip with the reason */

CX_TEST(channel_over_dpdk_memif_in_order_with_fragments) { CX_SKIP(TU_NO_DPDK); }
CX_TEST(pipe_direct_link_over_dpdk_memif) { CX_SKIP(TU_NO_DPDK); }

#endif

TU_TEST_MAIN_WITH_ROLES(run_role)
