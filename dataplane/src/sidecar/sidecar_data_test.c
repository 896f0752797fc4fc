/* Two applications, each a process of its own with its own sidecar process (build/bin/
 * confluxd --role=sidecar), and a real space server process: pipe segments (raw, and typed
 * with conversion between two struct layouts) and channel events (a typed and an untyped
 * sink) go application -> shared ring -> sidecar -> network -> sidecar -> shared ring ->
 * application. Also: errors come back with the sidecar's message; the sidecars' metrics
 * count what passed; an application that exits leaves nothing open. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "sidecar/cx_sc_client.h"
#include "api/cx_api.h"
#include "sidecar/sc_testutil.h"

#include <stdatomic.h>
#include <stddef.h>
#include <sys/stat.h>

struct env {
    struct proc space, a, b;
    char dir[64], space_addr[64], sock_a[128], sock_b[128], http_a[64], http_b[64];
    char chan_a[96]; /* sidecar a's channel runtime address */
};
static struct env E;
static int E_up;

static int env_up(void)
{
    if (E_up)
        return E_up > 0 ? 0 : -1;
    E_up = -1;
    snprintf(E.dir, sizeof E.dir, "/tmp/cxsc-data-XXXXXX");
    if (!mkdtemp(E.dir))
        return -1;
    char dirarg[128], w[128];
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space", E.dir);
    const char *sargs[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--no-udp",
                           "--fsync=none", "--quiet", NULL};
    if (proc_start(&E.space, sargs, 0) < 0)
        return -1;
    word(E.space.line, 1, E.space_addr, sizeof E.space_addr);
    struct proc *ps[2] = {&E.a, &E.b};
    char *socks[2] = {E.sock_a, E.sock_b}, *https[2] = {E.http_a, E.http_b};
    for (int i = 0; i < 2; i++) {
        char sockarg[160], spacearg[96];
        snprintf(socks[i], 128, "%s/%c.sock", E.dir, 'a' + i);
        snprintf(sockarg, sizeof sockarg, "--socket=%s", socks[i]);
        snprintf(spacearg, sizeof spacearg, "--space=%s", E.space_addr);
        const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", spacearg,
                              "--listen=tcp://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
        if (proc_start(ps[i], args, 0) < 0)
            return -1;
        snprintf(https[i], 64, "%.63s", word(ps[i]->line, 3, w, sizeof w));
    }
    snprintf(E.chan_a, sizeof E.chan_a, "%.95s", word(E.a.line, 5, w, sizeof w));
    E_up = 1;
    return 0;
}

/* ---- the applications (forked children; exit 0 when everything checked) ---- */

#define FAIL(...) do { fprintf(stderr, "  app %d: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, " (%s)\n", cx_errmsg()); _exit(1); } while (0)

struct rec2 { int32_t tag; int64_t step; double energy; };  /* the writer's layout */
struct rec1 { double energy; int64_t step; };               /* the reader's */

static const struct cx_format *fmt2(void)
{
    static const struct cx_field f[] = {
        {"tag", "int32", 4, offsetof(struct rec2, tag), NULL},
        {"step", "int64", 8, offsetof(struct rec2, step), NULL},
        {"energy", "double", 8, offsetof(struct rec2, energy), NULL}, {NULL}};
    static const struct cx_struct_decl d[] = {{"rec", f, sizeof(struct rec2)}, {NULL}};
    struct cx_format *x;
    const struct cx_format *c;
    if (cx_format_create(d, NULL, &x) < 0 || cx_format_registry_insert(x, &c) < 0)
        return NULL;
    return c;
}

static const struct cx_format *fmt1(void)
{
    static const struct cx_field f[] = {
        {"energy", "double", 8, offsetof(struct rec1, energy), NULL},
        {"step", "int64", 8, offsetof(struct rec1, step), NULL}, {NULL}};
    static const struct cx_struct_decl d[] = {{"rec", f, sizeof(struct rec1)}, {NULL}};
    struct cx_format *x;
    const struct cx_format *c;
    if (cx_format_create(d, NULL, &x) < 0 || cx_format_registry_insert(x, &c) < 0)
        return NULL;
    return c;
}

#define RAW_SEGS 60
#define TYPED_SEGS 20
#define PER_SEG 100

static size_t raw_len(int i) { return i == 7 ? 0 : (size_t)((i * 104729) % 300000) + 1; }
static uint8_t raw_byte(int i, size_t k) { return (uint8_t)(i * 31 + k * 7 + (k >> 9)); }

static void app_writer(void)
{
    if (cx_sc_connect(E.sock_a) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(E.space_addr, NULL);
    if (s < 0)
        FAIL("space open");
    int w = cx_sc_pi_create("sc-raw", s, PI_CREATE), wt = cx_sc_pi_create("sc-typed", s, PI_CREATE);
    if (w < 0 || wt < 0)
        FAIL("create");
    static uint8_t buf[300001];
    for (int i = 0; i < RAW_SEGS; i++) {
        size_t n = raw_len(i);
        for (size_t k = 0; k < n; k++)
            buf[k] = raw_byte(i, k);
        if (cx_sc_pi_write(w, buf, n, NULL) != (long)n)
            FAIL("raw write %d", i);
    }
    const struct cx_format *f = fmt2();
    struct rec2 recs[PER_SEG];
    for (int i = 0; i < TYPED_SEGS; i++) {
        for (int k = 0; k < PER_SEG; k++)
            recs[k] = (struct rec2){.tag = -k, .step = i * PER_SEG + k, .energy = 0.5 * (i * PER_SEG + k)};
        if (cx_sc_pi_write(wt, recs, PER_SEG, f) != PER_SEG)
            FAIL("typed write %d", i);
    }
    /* the writer's stats and link come through the sidecar too, with the embedded errors */
    struct pi_writer_stats ws;
    char link[PI_LINK_MAX], tiny[1];
    if (cx_sc_pi_writer_stats(w, &ws) < 0 || cx_sc_pi_link(w, link, sizeof link) < 0)
        FAIL("writer stats or link: %s", cx_errmsg());
    if (cx_sc_pi_writer_stats(w + 1000, &ws) == 0 || errno != EBADF)
        FAIL("stats of a bad descriptor");
    if (link[0] && (cx_sc_pi_link(w, tiny, sizeof tiny) == 0 || errno != ERANGE))
        FAIL("link into 1 byte");
    if (cx_sc_pi_close(w) < 0 || cx_sc_pi_close(wt) < 0 || cx_sc_pi_space_close(s) < 0)
        FAIL("close");
    _exit(0);
}

static int attach_retry(const char *name, int s)
{
    for (int i = 0; i < 500; i++) {
        int r = cx_sc_pi_attach(name, s);
        if (r >= 0 || errno != ENOENT)
            return r;
        usleep(10000);
    }
    return -1;
}

static void app_reader(void)
{
    if (cx_sc_connect(E.sock_b) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(E.space_addr, NULL);
    if (s < 0)
        FAIL("space open");
    int r = attach_retry("sc-raw", s);
    if (r < 0)
        FAIL("attach raw");
    static uint8_t buf[300001];
    int i = 0;
    long n;
    while ((n = cx_sc_pi_read_timeout(r, buf, sizeof buf, NULL, 20000)) >= 0) {
        if ((size_t)n != raw_len(i))
            FAIL("segment %d has %ld bytes, want %zu", i, n, raw_len(i));
        for (size_t k = 0; k < (size_t)n; k++)
            if (buf[k] != raw_byte(i, k))
                FAIL("segment %d byte %zu", i, k);
        i++;
    }
    if (errno != EPIPE || i != RAW_SEGS)
        FAIL("raw pipe ended after %d segments with errno %d", i, errno);
    if (cx_sc_pi_tell(r) != RAW_SEGS)
        FAIL("tell %lld", (long long)cx_sc_pi_tell(r));
    struct pi_reader_stats st;
    if (cx_sc_pi_reader_stats(r, &st) < 0 || st.from_space + st.from_writer < RAW_SEGS)
        FAIL("reader stats");
    if (cx_sc_pi_detach(r) < 0)
        FAIL("detach");
    /* typed, converted into another layout by the reader's sidecar */
    const struct cx_format *f = fmt1();
    int rt = attach_retry("sc-typed", s);
    if (rt < 0)
        FAIL("attach typed");
    struct rec1 recs[PER_SEG];
    i = 0;
    while ((n = cx_sc_pi_read_timeout(rt, recs, PER_SEG, f, 20000)) >= 0) {
        if (n != PER_SEG)
            FAIL("typed segment %d has %ld events", i, n);
        for (int k = 0; k < PER_SEG; k++)
            if (recs[k].step != i * PER_SEG + k || recs[k].energy != 0.5 * (i * PER_SEG + k))
                FAIL("typed segment %d event %d: step %lld energy %g", i, k, (long long)recs[k].step,
                     recs[k].energy);
        i++;
    }
    if (errno != EPIPE || i != TYPED_SEGS)
        FAIL("typed pipe ended after %d segments with errno %d", i, errno);
    /* seek back and read segment 3 again */
    if (cx_sc_pi_seek(rt, 3) < 0 || cx_sc_pi_read_timeout(rt, recs, PER_SEG, f, 5000) != PER_SEG ||
        recs[0].step != 3 * PER_SEG)
        FAIL("seek");
    _exit(0);
}

/* A sample from a metrics text: the value of the first line starting with `prefix`. */
static double metric(const char *text, const char *prefix)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0) {
            const char *sp = strchr(l, ' ');
            return sp ? strtod(sp + 1, NULL) : -1;
        }
    return -1;
}

CX_TEST(pipe_segments_through_two_sidecars)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t r = fork();
    if (r == 0)
        app_reader();
    pid_t w = fork();
    if (w == 0)
        app_writer();
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    static char body[1 << 20];
    CX_CHECK_EQ_INT(http_get(E.http_a, "/metrics", body, sizeof body), 200);
    CX_CHECK(metric(body, "conflux_sidecar_requests_total{op=\"pi_write\"}") == RAW_SEGS + TYPED_SEGS);
    CX_CHECK(metric(body, "conflux_sidecar_applications ") == 0); /* the writer is gone */
    CX_CHECK_EQ_INT(http_get(E.http_b, "/metrics", body, sizeof body), 200);
    CX_CHECK(metric(body, "conflux_sidecar_request_duration_seconds_count{op=\"pi_read\"}") >= RAW_SEGS + TYPED_SEGS);
}

/* ---- channels ---- */

#define EVENTS 2000

static void app_source(int idw, int gor, int readyr)
{
    if (cx_sc_connect(E.sock_a) < 0)
        FAIL("connect");
    const struct cx_format *f = fmt2();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *src;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0)
        FAIL("ctx");
    if (cx_sc_chan_create(ctx, &(struct cx_chan_opts){.format = f, .mode = CX_CHAN_RELIABLE}, &ch) < 0)
        FAIL("create");
    const char *id = cx_sc_chan_id(ch);
    if (strncmp(id, "cx1:tcp://", 10) != 0 || cx_sc_chan_format(ch) != f || cx_sc_chan_mode(ch) != CX_CHAN_RELIABLE)
        FAIL("channel id %s", id);
    if (write(idw, id, strlen(id) + 1) < 0)
        FAIL("write id");
    char b;
    if (read(readyr, &b, 1) != 1) /* the sink application subscribed both sinks */
        FAIL("ready");
    if (cx_sc_chan_wait_members(ch, 0, 1, 20000) < 0)
        FAIL("wait for the sinks");
    if (cx_sc_chan_source(ch, f, &src) < 0)
        FAIL("source");
    for (int i = 0; i < EVENTS; i++) {
        struct rec2 ev = {.tag = 7, .step = i, .energy = i * 0.25};
        if (cx_sc_chan_submit_wait(src, &ev, 10000) < 0)
            FAIL("submit %d", i);
    }
    struct cx_chan_stats st;
    cx_sc_chan_stats(ch, &st);
    if (st.submitted != EVENTS)
        FAIL("stats: %llu submitted", (unsigned long long)st.submitted);
    if (read(gor, &b, 1) != 1) /* the test says when to go */
        FAIL("go");
    cx_sc_chan_source_close(src);
    cx_sc_chan_close(ch);
    cx_sc_chan_ctx_destroy(ctx);
    _exit(0);
}

struct sink_check {
    atomic_int typed, untyped, bad;
    int64_t next;
};

static void on_typed(void *arg, const struct cx_chan_event *ev)
{
    struct sink_check *k = arg;
    const struct rec1 *r = ev->data;
    if (!r || r->step != k->next || r->energy != k->next * 0.25 || ev->seq != (uint64_t)k->next + 1)
        k->bad++;
    k->next++;
    k->typed++;
}

static void on_untyped(void *arg, const struct cx_chan_event *ev)
{
    struct sink_check *k = arg;
    if (ev->data || !ev->format || !ev->wire || ev->wire_len < 20 || strcmp(cx_format_name(ev->format), "rec"))
        k->bad++;
    k->untyped++;
}

static void app_sink(int idr, int readyw)
{
    char id[256] = "";
    size_t n = 0;
    while (n < sizeof id - 1 && read(idr, id + n, 1) == 1 && id[n])
        n++;
    if (cx_sc_connect(E.sock_b) < 0)
        FAIL("connect");
    const struct cx_format *f = fmt1();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k1, *k2;
    static struct sink_check ck;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0)
        FAIL("ctx");
    if (cx_sc_chan_open(ctx, id, 10000, &ch) < 0)
        FAIL("open %s", id);
    if (!cx_sc_chan_format(ch) || strcmp(cx_format_name(cx_sc_chan_format(ch)), "rec"))
        FAIL("the channel's format did not come through");
    if (cx_sc_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f}, on_typed, &ck, &k1) < 0 ||
        cx_sc_chan_sink(ch, NULL, on_untyped, &ck, &k2) < 0)
        FAIL("sinks");
    if (write(readyw, "r", 1) != 1)
        FAIL("ready");
    for (int i = 0; i < 3000 && (ck.typed < EVENTS || ck.untyped < EVENTS); i++)
        usleep(10000);
    if (ck.typed != EVENTS || ck.untyped != EVENTS || ck.bad)
        FAIL("%d typed, %d untyped, %d bad", (int)ck.typed, (int)ck.untyped, (int)ck.bad);
    /* which link joins this pod's runtime (the sidecar's) to the source's: asked through it */
    char link[32];
    int lr = cx_sc_chan_ctx_link(ctx, E.chan_a, link, sizeof link);
    if (lr < 0 || (strcmp(link, "tcp") != 0 && strcmp(link, "shm") != 0))
        FAIL("link to %s: %d '%s' (%s)", E.chan_a, lr, link, cx_errmsg());
    if (cx_sc_chan_ctx_link(ctx, "tcp://127.0.0.1:1", link, sizeof link) != -ENOENT)
        FAIL("a link to nobody");
    cx_sc_chan_sink_close(k1);
    cx_sc_chan_sink_close(k2);
    cx_sc_chan_close(ch);
    _exit(0);
}

CX_TEST(channel_events_through_two_sidecars)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    int idp[2], gop[2], rdp[2];
    CX_CHECK(pipe(idp) == 0 && pipe(gop) == 0 && pipe(rdp) == 0);
    pid_t src = fork();
    if (src == 0)
        app_source(idp[1], gop[0], rdp[0]);
    pid_t snk = fork();
    if (snk == 0)
        app_sink(idp[0], rdp[1]);
    int rc = wait_child(snk, 60);
    static char body[1 << 20];
    int code = http_get(E.http_a, "/metrics", body, sizeof body);
    /* `conflux links --sidecar` shows the same link for the source's open channel */
    char want[600] = "", cli[2048] = "", chan[512] = "", link[32] = "";
    const char *lp = strstr(body, "conflux_channel_link{channel=\"");
    if (lp && sscanf(lp, "conflux_channel_link{channel=\"%511[^\"]\",link=\"%31[^\"]\"", chan, link) == 2)
        snprintf(want, sizeof want, "%-8s %s\n", link, chan);
    int cli_rc = run_cli(cli, sizeof cli, "links --sidecar %s", E.http_a);
    CX_CHECK(write(gop[1], "g", 1) == 1);
    CX_CHECK_EQ_INT(wait_child(src, 30), 0);
    CX_CHECK_EQ_INT(rc, 0);
    CX_CHECK_EQ_INT(code, 200);
    CX_CHECK(want[0] != 0);
    CX_CHECK_EQ_INT(cli_rc, 0);
    if (!strstr(cli, want))
        fprintf(stderr, "  conflux links printed:\n%s  wanted the line: %s", cli, want);
    CX_CHECK(strstr(cli, want) != NULL);
    /* the source's sidecar counted them on its channel; the two sidecars share this host,
     * so their runtimes joined over shared memory, and the metrics say so */
    CX_CHECK_STR(link, "shm");
    const char *p = strstr(body, "conflux_channel_events_submitted_total{channel=\"cx1:tcp://");
    CX_CHECK(p && strstr(p, "link=\"shm\"} 2000\n"));
    CX_CHECK(metric(body, "conflux_sidecar_requests_total{op=\"chan_submit\"}") == EVENTS);
    CX_CHECK_EQ_INT(http_get(E.http_b, "/metrics", body, sizeof body), 200);
    CX_CHECK(metric(body, "conflux_sidecar_events_to_apps_total") == 2 * EVENTS);
    CX_CHECK(metric(body, "conflux_sidecar_event_drops_total") == 0);
    close(idp[0]); close(idp[1]); close(gop[0]); close(gop[1]); close(rdp[0]); close(rdp[1]);
}

/* ---- best-effort submits stream into the ring without a reply ---- */

#define STREAMED 20000

static atomic_int g_streamed, g_stream_bad;
static void on_streamed(void *arg, const struct cx_chan_event *ev)
{
    (void)arg;
    const struct rec2 *r = ev->data;
    if (!r || r->step != g_streamed || ev->seq != (uint64_t)g_streamed + 1)
        g_stream_bad++;
    g_streamed++;
}

static void app_streamer(void)
{
    if (cx_sc_connect(E.sock_b) < 0)
        FAIL("connect");
    const struct cx_format *f = fmt2();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    struct cx_chan_source *src;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_sc_chan_create(ctx, &(struct cx_chan_opts){.format = f, .queue_limit = CX_CHAN_QUEUE_MAX}, &ch) < 0 ||
        cx_sc_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f}, on_streamed, NULL, &k) < 0 ||
        cx_sc_chan_source(ch, f, &src) < 0)
        FAIL("channel");
    for (int i = 0; i < STREAMED; i++) {
        struct rec2 ev = {.tag = 1, .step = i, .energy = i};
        if (cx_sc_chan_submit(src, &ev) < 0)
            FAIL("submit %d", i);
    }
    struct cx_chan_stats st;
    cx_sc_chan_stats(ch, &st); /* waits until the sidecar ran every streamed submit */
    if (st.submitted != STREAMED)
        FAIL("%llu submitted", (unsigned long long)st.submitted);
    for (int i = 0; i < 3000 && g_streamed < STREAMED; i++)
        usleep(10000);
    if (g_streamed != STREAMED || g_stream_bad || st.dropped)
        FAIL("%d events, %d out of order, %llu dropped", (int)g_streamed, (int)g_stream_bad,
             (unsigned long long)st.dropped);
    cx_sc_chan_source_close(src);
    cx_sc_chan_ctx_destroy(ctx); /* closes the channel and its sink */
    _exit(0);
}

CX_TEST(best_effort_submits_stream_through_the_ring)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t a = fork();
    if (a == 0)
        app_streamer();
    CX_CHECK_EQ_INT(wait_child(a, 60), 0);
    static char body[1 << 20];
    CX_CHECK_EQ_INT(http_get(E.http_b, "/metrics", body, sizeof body), 200);
    CX_CHECK(metric(body, "conflux_sidecar_requests_total{op=\"chan_submit\"}") == STREAMED);
    CX_CHECK(metric(body, "conflux_sidecar_request_errors_total{op=\"chan_submit\"}") == 0);
}

/* ---- errors and cleanup ---- */

static void app_errors(void)
{
    if (cx_sc_connect(E.sock_a) < 0)
        FAIL("connect");
    errno = 0;
    if (cx_sc_pi_create("x", 999, PI_CREATE) != -1 || errno != EBADF)
        FAIL("a bad space descriptor gave errno %d", errno);
    int s = cx_sc_pi_space_open(E.space_addr, NULL);
    int w = cx_sc_pi_create("sc-err", s, PI_CREATE);
    if (s < 0 || w < 0)
        FAIL("open");
    if (cx_sc_pi_create("sc-err", s, PI_CREATE) != -1 || (errno != EBUSY && errno != EEXIST) || !strstr(cx_errmsg(), "sc-err"))
        FAIL("a second writer: errno %d", errno);
    static uint8_t big[600000];
    if (cx_sc_pi_write(w, big, sizeof big, NULL) != -1 || errno != EMSGSIZE || !strstr(cx_errmsg(), "--ring-size"))
        FAIL("an oversized segment: errno %d", errno);
    if (cx_sc_pi_write(w, big, 1000, NULL) != 1000) /* and the connection still works */
        FAIL("write after the error");
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    if (cx_sc_chan_ctx_create(NULL, &ctx) < 0 || cx_sc_chan_open(ctx, "nonsense", 1000, &ch) != -EINVAL)
        FAIL("a malformed channel id");
    if (cx_sc_chan_create(ctx, NULL, &ch) < 0)
        FAIL("create");
    /* exit with the pipe and the channel still open: the sidecar closes them */
    _exit(0);
}

CX_TEST(errors_come_back_and_a_gone_application_leaves_nothing)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t a = fork();
    if (a == 0)
        app_errors();
    CX_CHECK_EQ_INT(wait_child(a, 30), 0);
    static char body[1 << 20];
    double apps = -1;
    for (int i = 0; i < 200 && apps != 0; i++) {
        CX_CHECK_EQ_INT(http_get(E.http_a, "/metrics", body, sizeof body), 200);
        apps = metric(body, "conflux_sidecar_applications ");
        usleep(10000);
    }
    CX_CHECK(apps == 0);
    CX_CHECK(!strstr(body, "pipe=\"sc-err\""));         /* the writer was closed */
    CX_CHECK(!strstr(body, "conflux_channel_link{"));    /* and the channel */
    CX_CHECK(metric(body, "conflux_sidecar_request_errors_total{op=\"pi_create\"}") >= 2);
}

/* pi_shutdown through a sidecar: the application's writer is closed (ended, not abandoned:
 * a reader sees its segments, then the end), its descriptors are invalid, and it can open
 * pipes again. */
static void app_shutdown(void)
{
    if (cx_sc_connect(E.sock_a) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(E.space_addr, NULL);
    int w = s >= 0 ? cx_sc_pi_create("sc-shut", s, PI_CREATE) : -1;
    if (w < 0)
        FAIL("open");
    for (int i = 0; i < 5; i++)
        if (cx_sc_pi_write(w, "segment", 7, NULL) != 7)
            FAIL("write %d", i);
    if (cx_sc_pi_shutdown() != 0)
        FAIL("pi_shutdown");
    errno = 0;
    if (cx_sc_pi_write(w, "x", 1, NULL) != -1 || errno != EBADF)
        FAIL("a write after pi_shutdown gave errno %d", errno);
    s = cx_sc_pi_space_open(E.space_addr, NULL);
    int r = s >= 0 ? cx_sc_pi_attach("sc-shut", s) : -1;
    if (r < 0)
        FAIL("open again");
    char b[16];
    for (int i = 0; i < 5; i++)
        if (cx_sc_pi_read_timeout(r, b, sizeof b, NULL, 10000) != 7)
            FAIL("read %d", i);
    errno = 0;
    if (cx_sc_pi_read_timeout(r, b, sizeof b, NULL, 10000) != -1 || errno != EPIPE)
        FAIL("the end after 5 segments: errno %d", errno);
    _exit(0);
}

CX_TEST(pi_shutdown_closes_the_applications_pipes)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t a = fork();
    if (a == 0)
        app_shutdown();
    CX_CHECK_EQ_INT(wait_child(a, 30), 0);
}

/* pi_migrate through sidecars (Figure 7 across pods): a reader on sidecar a reads 3 of 6
 * segments and migrates out; the blob goes to an application of sidecar b, which migrates
 * in and reads the other 3, then the end. A blob that was tampered with is refused. */
static void app_migrate(void)
{
    if (cx_sc_connect(E.sock_a) < 0)
        FAIL("connect a");
    int s = cx_sc_pi_space_open(E.space_addr, NULL);
    int w = s >= 0 ? cx_sc_pi_create("sc-mig", s, PI_CREATE) : -1;
    int r = s >= 0 ? cx_sc_pi_attach("sc-mig", s) : -1;
    if (w < 0 || r < 0)
        FAIL("open");
    char b[16];
    for (int i = 0; i < 6; i++) {
        snprintf(b, sizeof b, "seg-%d", i);
        if (cx_sc_pi_write(w, b, 6, NULL) != 6)
            FAIL("write %d", i);
    }
    if (cx_sc_pi_close(w) != 0)
        FAIL("close");
    for (int i = 0; i < 3; i++)
        if (cx_sc_pi_read_timeout(r, b, sizeof b, NULL, 10000) != 6 || b[4] != '0' + i)
            FAIL("read %d before", i);
    uint8_t blob[PI_MIGRATE_MAX];
    errno = 0;
    if (cx_sc_pi_migrate_out(r, 5000, blob, 8) != -1 || errno != EMSGSIZE) /* the end stays */
        FAIL("a blob too small: errno %d", errno);
    long n = cx_sc_pi_migrate_out(r, 5000, blob, sizeof blob);
    if (n <= 0)
        FAIL("migrate out");
    errno = 0;
    if (cx_sc_pi_read_timeout(r, b, sizeof b, NULL, 100) != -1 || errno != EBADF)
        FAIL("the old descriptor after migrating: errno %d", errno);
    pid_t p = fork();
    if (p == 0) { /* another application, on another sidecar */
        if (cx_sc_connect(E.sock_b) < 0)
            FAIL("connect b");
        int s2 = cx_sc_pi_space_open(E.space_addr, NULL);
        blob[n - 1] ^= 0xff;
        errno = 0;
        if (cx_sc_pi_migrate_in(blob, (size_t)n, s2) != -1 || errno != EBADMSG)
            FAIL("a damaged blob: errno %d", errno);
        blob[n - 1] ^= 0xff;
        int r2 = cx_sc_pi_migrate_in(blob, (size_t)n, s2);
        if (r2 < 0)
            FAIL("migrate in");
        for (int i = 3; i < 6; i++)
            if (cx_sc_pi_read_timeout(r2, b, sizeof b, NULL, 10000) != 6 || b[4] != '0' + i)
                FAIL("read %d after", i);
        errno = 0;
        if (cx_sc_pi_read_timeout(r2, b, sizeof b, NULL, 10000) != -1 || errno != EPIPE)
            FAIL("the end: errno %d", errno);
        _exit(0);
    }
    _exit(wait_child(p, 30));
}

CX_TEST(a_reader_migrates_between_sidecars)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t a = fork();
    if (a == 0)
        app_migrate();
    CX_CHECK_EQ_INT(wait_child(a, 60), 0);
}

CX_TEST(teardown)
{
    if (E_up <= 0)
        return;
    CX_CHECK_EQ_INT(proc_stop(&E.a, SIGTERM), 0);
    CX_CHECK_EQ_INT(proc_stop(&E.b, SIGTERM), 0);
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGTERM), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", E.dir);
    CX_CHECK_EQ_INT(system(cmd), 0);
}

CX_TEST_MAIN()
