/* Three sidecar processes (build/bin/confluxd --role=sidecar) on this host with shared
 * memory off (CONFLUX_CHAN_SHM=0), so every link between them is a network link: A and B
 * with CONFLUX_TRANSPORT=rdma CONFLUX_FABRIC=fabric-a, C plain tcp. An application on B
 * creates a channel and sinks it; applications on A and C each submit events to it. Every
 * event arrives, and the sidecars' /metrics say which link carried them: ucx from A (same
 * fabric), tcp from C. The applications see their sidecar's fabric (cx_chan_ctx_fabric). */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/sc_testutil.h"

#include <stdatomic.h>
#include <stddef.h>

#define EVENTS 3000

static struct proc P[3]; /* A, B, C */
static char dir[64], sock[3][128], http[3][64];

static void env_down(void)
{
    for (int i = 0; i < 3; i++)
        if (P[i].pid > 0)
            proc_stop(&P[i], SIGTERM);
    for (int i = 0; i < 3; i++)
        unlink(sock[i]);
    rmdir(dir);
}

static int env_up(void)
{
    snprintf(dir, sizeof dir, "/tmp/cxsc-fabric-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    /* inherited by the sidecars: no shm between them; UCX over loopback tcp, as the ucx
     * driver's tests */
    setenv("CONFLUX_CHAN_SHM", "0", 1);
    setenv("UCX_NET_DEVICES", "lo", 0);
    setenv("UCX_TLS", "tcp,self", 0);
    for (int i = 0; i < 3; i++) {
        char sockarg[160], w[128];
        snprintf(sock[i], sizeof sock[i], "%s/%c.sock", dir, 'a' + i);
        snprintf(sockarg, sizeof sockarg, "--socket=%s", sock[i]);
        if (i < 2) {
            setenv("CONFLUX_TRANSPORT", "rdma", 1);
            setenv("CONFLUX_FABRIC", "fabric-a", 1);
        } else {
            setenv("CONFLUX_TRANSPORT", "tcp", 1);
            unsetenv("CONFLUX_FABRIC");
        }
        const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0",
                              "--listen=tcp://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
        int rc = proc_start(&P[i], args, 0);
        unsetenv("CONFLUX_TRANSPORT");
        unsetenv("CONFLUX_FABRIC");
        if (rc < 0) {
            fprintf(stderr, "  sidecar %c did not start: '%s'\n", 'A' + i, P[i].line);
            return -1;
        }
        snprintf(http[i], sizeof http[i], "%.63s", word(P[i].line, 3, w, sizeof w));
    }
    unsetenv("CONFLUX_CHAN_SHM");
    return 0;
}

#define FAIL(...) do { fprintf(stderr, "  app %d: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, " (%s)\n", cx_errmsg()); _exit(1); } while (0)

struct tick { int64_t k; double v; };

static const struct cx_format *tick_fmt(void)
{
    static const struct cx_field f[] = {
        {"k", "int64", 8, offsetof(struct tick, k), NULL},
        {"v", "double", 8, offsetof(struct tick, v), NULL}, {NULL}};
    static const struct cx_struct_decl d[] = {{"tick", f, sizeof(struct tick)}, {NULL}};
    struct cx_format *x;
    const struct cx_format *c;
    if (cx_format_create(d, NULL, &x) < 0 || cx_format_registry_insert(x, &c) < 0)
        return NULL;
    return c;
}

/* Per source process: events in order with the right values. */
struct from_count {
    char from[2][128];
    atomic_long n[2], bad;
    int64_t next[2];
};

static void on_tick(void *arg, const struct cx_chan_event *ev)
{
    struct from_count *c = arg;
    const struct tick *t = ev->data;
    int i = 0;
    while (i < 2 && c->from[i][0] && strcmp(c->from[i], ev->from) != 0)
        i++;
    if (i == 2) {
        c->bad++;
        return;
    }
    if (!c->from[i][0])
        snprintf(c->from[i], sizeof c->from[i], "%s", ev->from);
    if (!t || t->k != c->next[i] || t->v != t->k * 0.5)
        c->bad++;
    c->next[i]++;
    c->n[i]++;
}

/* On B: creates the channel, hands its id to both sources, sinks until both are done. */
static void app_sink(const int idw[2], int donew)
{
    if (cx_sc_connect(sock[1]) < 0)
        FAIL("connect");
    const struct cx_format *f = tick_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    static struct from_count c;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_sc_chan_create(ctx, &(struct cx_chan_opts){.format = f, .mode = CX_CHAN_RELIABLE}, &ch) < 0 ||
        cx_sc_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f}, on_tick, &c, &k) < 0)
        FAIL("set-up");
    const char *id = cx_sc_chan_id(ch);
    for (int i = 0; i < 2; i++)
        if (write(idw[i], id, strlen(id) + 1) < 0)
            FAIL("write id");
    for (int i = 0; i < 6000 && (c.n[0] < EVENTS || c.n[1] < EVENTS); i++)
        usleep(10000);
    if (c.n[0] != EVENTS || c.n[1] != EVENTS || c.bad)
        FAIL("got %ld from %s, %ld from %s, %ld bad", (long)c.n[0], c.from[0], (long)c.n[1],
             c.from[1], (long)c.bad);
    if (write(donew, "d", 1) != 1)
        FAIL("done");
    sleep(60); /* the channel stays open: the test reads the metrics, then SIGTERMs us */
    _exit(0);
}

/* On A or C: opens the channel by id, submits EVENTS, keeps it open until told to go. The
 * runtime's fabric, asked through the sidecar, is `fabric` (with a ucx address) or none. */
static void app_source(const char *path, const char *fabric, int idr, int gor)
{
    char id[256] = "";
    size_t n = 0;
    while (n < sizeof id - 1 && read(idr, id + n, 1) == 1 && id[n])
        n++;
    if (cx_sc_connect(path) < 0)
        FAIL("connect");
    const struct cx_format *f = tick_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0)
        FAIL("ctx");
    const char *fab = cx_sc_chan_ctx_fabric(ctx), *fab_addr = cx_sc_chan_ctx_fabric_addr(ctx);
    if (strcmp(fab, fabric) != 0 || (*fabric ? strncmp(fab_addr, "ucx://", 6) != 0 : *fab_addr != 0))
        FAIL("the sidecar's fabric is '%s' at '%s', want '%s'", fab, fab_addr, fabric);
    if (cx_sc_chan_open(ctx, id, 10000, &ch) < 0 ||
        cx_sc_chan_wait_members(ch, 0, 1, 20000) < 0 || cx_sc_chan_source(ch, f, &s) < 0)
        FAIL("set-up on %s", id);
    for (int i = 0; i < EVENTS; i++) {
        struct tick t = {.k = i, .v = i * 0.5};
        if (cx_sc_chan_submit_wait(s, &t, 20000) < 0)
            FAIL("submit %d", i);
    }
    char b;
    if (read(gor, &b, 1) != 1)
        FAIL("go");
    cx_sc_chan_source_close(s);
    cx_sc_chan_close(ch);
    cx_sc_chan_ctx_destroy(ctx);
    _exit(0);
}

/* The link label of the first conflux_channel_link series in a /metrics body. */
static int channel_link(const char *body, char *link, size_t cap)
{
    const char *p = strstr(body, "conflux_channel_link{channel=\"");
    char chan[512];
    link[0] = 0;
    return p && sscanf(p, "conflux_channel_link{channel=\"%511[^\"]\",link=\"%31[^\"]\"", chan,
                       link) == 2 && cap > 31 ? 0 : -1;
}

CX_TEST(sidecars_in_one_fabric_link_over_ucx_the_other_over_tcp)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
#ifndef CX_HAVE_UCX
    CX_SKIP("UCX not built in (pkg-config ucx not found: install libucx-dev)");
#endif
    if (env_up() < 0) {
        env_down();
        CX_CHECK(!"the three sidecars started");
        return;
    }
    int ida[2], idc[2], gop[2], donep[2];
    CX_CHECK(pipe(ida) == 0 && pipe(idc) == 0 && pipe(gop) == 0 && pipe(donep) == 0);
    pid_t snk = fork();
    if (snk == 0)
        app_sink((int[2]){ida[1], idc[1]}, donep[1]);
    pid_t sa = fork();
    if (sa == 0)
        app_source(sock[0], "fabric-a", ida[0], gop[0]);
    pid_t sc = fork();
    if (sc == 0)
        app_source(sock[2], "", idc[0], gop[0]);
    struct pollfd pf = {.fd = donep[0], .events = POLLIN};
    char b = 0;
    int done = poll(&pf, 1, 90000) == 1 && read(donep[0], &b, 1) == 1 && b == 'd';
    static char body[3][1 << 18];
    int code[3];
    char link[3][32];
    for (int i = 0; i < 3; i++) {
        code[i] = http_get(http[i], "/metrics", body[i], sizeof body[i]);
        channel_link(body[i], link[i], sizeof link[i]);
    }
    fprintf(stderr, "  every event arrived: %s; links: A (fabric-a) %s, B (fabric-a, sink) %s, "
                    "C (tcp) %s\n", done ? "yes" : "no", link[0], link[1], link[2]);
    CX_CHECK(write(gop[1], "gg", 2) == 2);
    int rca = wait_child(sa, 30), rcc = wait_child(sc, 30);
    kill(snk, SIGTERM);
    int rcs = wait_child(snk, 10);
    env_down();
    CX_CHECK(done);
    CX_CHECK_EQ_INT(rca, 0);
    CX_CHECK_EQ_INT(rcc, 0);
    CX_CHECK(rcs == 128 + SIGTERM || rcs == 0);
    for (int i = 0; i < 3; i++)
        CX_CHECK_EQ_INT(code[i], 200);
    CX_CHECK_STR(link[0], "ucx");
    CX_CHECK_STR(link[2], "tcp");
    CX_CHECK(strstr(body[0], "fabric=\"fabric-a\"") != NULL);
    CX_CHECK(strstr(body[0], "link=\"ucx\"} 3000\n") != NULL); /* submitted over ucx */
    CX_CHECK(strstr(body[2], "link=\"tcp\"} 3000\n") != NULL);
    close(ida[0]); close(ida[1]); close(idc[0]); close(idc[1]); close(gop[0]); close(gop[1]); close(donep[0]); close(donep[1]);
}

CX_TEST_MAIN()
