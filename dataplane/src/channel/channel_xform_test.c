/* Derived sinks that compute, between processes over real links: a transform into a new
 * format, stateful programs (a window, a change detector), a parallel stage that shares a
 * stream by seq(), the bytes the source did not send, and programs refused at install
 * (a type error with its column, a worst case over the budget). The language: filter/README.md. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "sidecar/sc_testutil.h" /* first: it defines _GNU_SOURCE */

#include "chan_test_util.h"
#include "common/cx_frame.h"
#include "common/cx_test.h"
#include "sidecar/cx_sc_client.h"

#include <inttypes.h>
#include <math.h>

struct reading { int64_t step; double x; float energy[16]; };
struct summary { int64_t step; double mean, peak; };

static const struct cx_field reading_f[] = {
    {"step", "int64", 8, offsetof(struct reading, step), NULL},
    {"x", "double", 8, offsetof(struct reading, x), NULL},
    {"energy", "float[16]", 4, offsetof(struct reading, energy), NULL}, {NULL}};
static const struct cx_field summary_f[] = {
    {"step", "int64", 8, offsetof(struct summary, step), NULL},
    {"mean", "double", 8, offsetof(struct summary, mean), NULL},
    {"peak", "double", 8, offsetof(struct summary, peak), NULL}, {NULL}};
static const struct cx_struct_decl reading_d[] = {{"energy_reading", reading_f,
                                                   sizeof(struct reading)}, {NULL}};
static const struct cx_struct_decl summary_d[] = {{"summary", summary_f, sizeof(struct summary)},
                                                  {NULL}};

/* step k: x = k rounded down to a multiple of 25, energy[i] = k + i (mean k + 7.5, max k + 15) */
static void reading_make(struct reading *e, int64_t k)
{
    e->step = k;
    e->x = (double)(k / 25 * 25);
    for (int i = 0; i < 16; i++)
        e->energy[i] = (float)(k + i);
}

enum check { C_MEANPEAK, C_WINDOW, C_CHANGED, C_SHARE, C_ROUTED };

struct job {
    const char *program;
    enum check check;
    int rank;     /* C_SHARE: this member's share, seq % 3 */
    long expect;
};

struct got {
    pthread_mutex_t m;
    const struct job *j;
    long n, bad;
    uint64_t last;
};

static int event_ok(const struct job *j, const struct cx_chan_event *ev)
{
    uint64_t q = ev->seq;
    if (j->check == C_ROUTED) { /* share(seq()): one residue mod 3, whichever */
        const struct reading *r = ev->data;
        return r && r->step == (int64_t)q;
    }
    if (j->check == C_SHARE) {
        const struct reading *r = ev->data;
        return r && r->step == (int64_t)q && q % 3 == (uint64_t)j->rank;
    }
    const struct summary *s = ev->data;
    if (!s || s->step != (int64_t)q)
        return 0;
    double x = (double)(q / 25 * 25);
    switch (j->check) {
    case C_MEANPEAK: return s->mean == (double)q + 7.5 && s->peak == (double)q + 15;
    case C_WINDOW: return q % 8 == 0 && s->mean == (double)q - 3.5 && s->peak == (double)q;
    default: /* C_CHANGED: x moved by 25, prev(x) the step before */
        return (q == 1 || q % 25 == 0) && s->mean == x && s->peak == (q == 1 ? 0 : x - 25);
    }
}

static void on_event(void *arg, const struct cx_chan_event *ev)
{
    struct got *g = arg;
    pthread_mutex_lock(&g->m);
    g->n++;
    g->bad += !event_ok(g->j, ev) || ev->seq <= g->last ||
              (g->j->check == C_ROUTED && g->last && ev->seq % 3 != g->last % 3);
    if (!event_ok(g->j, ev) && g->bad < 4)
        fprintf(stderr, "  child %d: unexpected event %" PRIu64 "\n", (int)getpid(), ev->seq);
    g->last = ev->seq;
    pthread_mutex_unlock(&g->m);
}

/* Subscribes with the job's program (a summary sink, or the readings themselves for
 * C_SHARE), says "ready", reports what it got once `expect` events came, then lingers
 * for one more second to see that nothing else comes. */
static int xform_child(struct kid *k, void *arg)
{
    const struct job *j = arg;
    const struct cx_format *fs = reg(summary_d), *fr = reg(reading_d);
    const struct cx_format *want = j->check == C_SHARE || j->check == C_ROUTED ? fr : fs;
    struct got g = {.m = PTHREAD_MUTEX_INITIALIZER, .j = j};
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    if (!fs || !fr || cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        kid_open(k, ctx, &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = want, .filter = j->program,
                                                     .projection = want == fr ? NULL : fs},
                     on_event, &g, &snk) < 0)
        KID_FAIL(3, "setup");
    put_str(k->wr, "ready");
    count_wait(&g.m, &g.n, j->expect, 15000);
    usleep(300000); /* anything more than expected would show up now */
    pthread_mutex_lock(&g.m);
    struct { long n, bad; uint64_t last; } res = {g.n, g.bad, g.last};
    pthread_mutex_unlock(&g.m);
    put(k->wr, &res, sizeof res);
    return kid_bye(k, ctx);
}

/* Runs n children with jobs j[], a source sending readings 1..N; checks each child got its
 * expected events, all well; returns the source channel's stats in *st. */
static int run_stage(const struct job *j, int n, long N, struct cx_chan_stats *st)
{
    struct kid kids[3];
    for (int i = 0; i < n; i++)
        if (spawn(&kids[i], xform_child, (void *)&j[i]) < 0)
            return -1;
    const struct cx_format *fr = reg(reading_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (chan_for_kids(kids, n, fr, &(struct cx_chan_opts){.format = fr, .mode = CX_CHAN_RELIABLE},
                      &ch, &s) < 0)
        return -1;
    for (long i = 1; i <= N; i++) {
        struct reading e;
        reading_make(&e, i);
        if (cx_chan_submit_wait(s, &e, 5000) < 0)
            return -1;
    }
    int ok = 1;
    unsigned routed = 0; /* C_ROUTED: the residues mod 3 the members got */
    for (int i = 0; i < n; i++) {
        struct { long n, bad; uint64_t last; } res;
        if (get(kids[i].rd, &res, sizeof res, 20000) != sizeof res) {
            ok = 0;
            continue;
        }
        fprintf(stderr, "  \"%s\": %ld events (%ld expected), %ld wrong\n", j[i].program, res.n,
                j[i].expect, res.bad);
        ok &= res.n == j[i].expect && res.bad == 0;
        if (j[i].check == C_ROUTED)
            routed |= 1u << (res.last % 3);
    }
    if (j[0].check == C_ROUTED && routed != 7) {
        fprintf(stderr, "  members got residues %#x, not one each\n", routed);
        ok = 0;
    }
    for (int i = 0; i < n; i++)
        put_str(kids[i].wr, "bye");
    cx_chan_stats(ch, st);
    for (int i = 0; i < n; i++)
        ok &= reap(&kids[i], 5000) == 0;
    cx_chan_close(ch);
    return ok ? 0 : -1;
}

static const uint64_t in_wire = 8 + sizeof(struct reading), out_wire = 8 + sizeof(struct summary);

CX_TEST(transform_computes_mean_and_peak_at_the_source)
{
    const long N = 500;
    struct job j = {"mean = mean(energy); peak = max(energy)", C_MEANPEAK, 0, N};
    struct cx_chan_stats st;
    CK(run_stage(&j, 1, N, &st) == 0);
    fprintf(stderr, "  sent %" PRIu64 " bytes for %ld events of %" PRIu64 " wire bytes; "
            "%" PRIu64 " saved\n", st.sent_bytes, N, in_wire, st.projected_bytes_saved);
    CK(st.filtered == 0 && st.sent == (uint64_t)N);
    CK(st.projected_bytes_saved == (uint64_t)N * (in_wire - out_wire));
    CK(st.sent_bytes == (uint64_t)N * (CX_FRAME_HDR_SIZE + out_wire));
    cleanup_all();
}

CX_TEST(stateful_window_mean_and_change_detector_at_the_source)
{
    const long N = 800;
    struct job j[2] = {
        {"every(8); mean = wmean(step, 8); peak = wmax(step, 8)", C_WINDOW, 0, N / 8},
        {"changed(x, 10); mean = x; peak = prev(x)", C_CHANGED, 0, 1 + N / 25},
    };
    struct cx_chan_stats st;
    CK(run_stage(j, 2, N, &st) == 0);
    uint64_t sent = (uint64_t)(N / 8 + 1 + N / 25);
    CK(st.sent == sent && st.filtered == 2 * (uint64_t)N - sent);
    CK(st.filtered_bytes == st.filtered * (CX_FRAME_HDR_SIZE + in_wire));
    CK(st.sent_bytes == sent * (CX_FRAME_HDR_SIZE + out_wire));
    cleanup_all();
}

CX_TEST(parallel_stage_shares_the_stream_each_event_to_one_member)
{
    const long N = 600;
    struct job j[3] = {{"seq() % 3 == 0", C_SHARE, 0, N / 3},
                       {"seq() % 3 == 1", C_SHARE, 1, N / 3},
                       {"seq() % 3 == 2", C_SHARE, 2, N / 3}};
    struct cx_chan_stats st;
    CK(run_stage(j, 3, N, &st) == 0);
    CK(st.sent == (uint64_t)N && st.filtered == 2 * (uint64_t)N); /* one member each */
    CK(st.sent_bytes == (uint64_t)N * (CX_FRAME_HDR_SIZE + in_wire));
    cleanup_all();
}

/* An application whose source goes through its sidecar: the program runs in the sidecar's
 * runtime. Writes the channel id on idw, waits for 'r' on rdr, submits N readings, writes
 * its channel stats on stw, waits for a byte on rdr again. */
static void app_source_via_sidecar(const char *sock, int idw, int rdr, int stw, long N)
{
    const struct cx_format *fr = reg(reading_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *src;
    char b;
    if (!fr || cx_sc_connect(sock) < 0 || cx_sc_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_sc_chan_create(ctx, &(struct cx_chan_opts){.format = fr, .mode = CX_CHAN_RELIABLE},
                          &ch) < 0)
        _exit(2);
    const char *id = cx_sc_chan_id(ch);
    if (write(idw, id, strlen(id) + 1) < 0 || read(rdr, &b, 1) != 1 ||
        cx_sc_chan_wait_members(ch, 0, 1, 20000) < 0 || cx_sc_chan_source(ch, fr, &src) < 0)
        _exit(3);
    for (long i = 1; i <= N; i++) {
        struct reading e;
        reading_make(&e, i);
        if (cx_sc_chan_submit_wait(src, &e, 10000) < 0)
            _exit(4);
    }
    struct cx_chan_stats st;
    for (int i = 0; i < 1000; i++) { /* the sidecar counts what it sent as it sends it */
        cx_sc_chan_stats(ch, &st);
        if (st.sent >= (uint64_t)N)
            break;
        usleep(10000);
    }
    if (write(stw, &st, sizeof st) != sizeof st || read(rdr, &b, 1) != 1)
        _exit(5);
    cx_sc_chan_source_close(src);
    cx_sc_chan_close(ch);
    cx_sc_chan_ctx_destroy(ctx);
    _exit(0);
}

CX_TEST(transform_runs_at_a_source_behind_a_sidecar)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CONFLUXD);
    const long N = 300;
    char dir[64] = "/tmp/cxxf-XXXXXX", sock[128], sockarg[160];
    CK(mkdtemp(dir) != NULL);
    snprintf(sock, sizeof sock, "%s/a.sock", dir);
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0",
                          "--listen=tcp://127.0.0.1:0", "--quiet", NULL};
    struct proc sc;
    int up = proc_start(&sc, args, 0) == 0;
    struct job j = {"mean = mean(energy); peak = max(energy)", C_MEANPEAK, 0, N};
    struct kid kid;
    int idp[2], rdp[2], stp[2];
    pid_t app = -1;
    char id[256] = "";
    struct { long n, bad; uint64_t last; } res = {0};
    struct cx_chan_stats st = {0};
    int ok = up && pipe(idp) == 0 && pipe(rdp) == 0 && pipe(stp) == 0 &&
             spawn(&kid, xform_child, &j) == 0;
    if (ok && (app = fork()) == 0)
        app_source_via_sidecar(sock, idp[1], rdp[0], stp[1], N);
    if (ok) { /* a dead application closes the pipes it writes: no read waits for ever */
        close(idp[1]);
        close(stp[1]);
        close(rdp[0]);
    }
    size_t n = 0;
    while (ok && n < sizeof id - 1 && read(idp[0], id + n, 1) == 1 && id[n])
        n++;
    ok = ok && app > 0 && n > 0 && put_str(kid.wr, id) == 0 && kid_says(&kid, "ready", 15000) &&
         write(rdp[1], "r", 1) == 1 && get(kid.rd, &res, sizeof res, 20000) == sizeof res &&
         read_full(stp[0], &st, sizeof st, 20000) == 0;
    if (app > 0) {
        if (write(rdp[1], "b", 1) != 1)
            kill(app, SIGKILL);
        ok &= wait_child(app, 20) == 0;
    }
    put_str(kid.wr, "bye");
    ok &= reap(&kid, 5000) == 0;
    if (ok)
        close(idp[0]), close(stp[0]), close(rdp[1]);
    if (up)
        proc_stop(&sc, SIGTERM);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        ok = 0;
    fprintf(stderr, "  through the sidecar: %ld events (%ld wrong); the sidecar sent %" PRIu64
            " bytes, %" PRIu64 " saved\n", res.n, res.bad, st.sent_bytes,
            st.projected_bytes_saved);
    CK(up && ok);
    CK(res.n == N && res.bad == 0);
    CK(st.sent == (uint64_t)N && st.projected_bytes_saved == (uint64_t)N * (in_wire - out_wire));
    cleanup_all();
}

CX_TEST(transform_reaches_a_sink_in_the_source_process)
{
    const struct cx_format *fr = reg(reading_d), *fs = reg(summary_d);
    CK(fr && fs);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct job j = {"every(8); mean = wmean(step, 8); peak = wmax(step, 8)", C_WINDOW, 0, 10};
    struct got g = {.m = PTHREAD_MUTEX_INITIALIZER, .j = &j};
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = fr, .mode = CX_CHAN_RELIABLE},
                      &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fs, .projection = fs,
                                                    .filter = j.program},
                    on_event, &g, &k) == 0);
    CK(cx_chan_source(ch, fr, &s) == 0);
    for (long i = 1; i <= 80; i++) {
        struct reading e;
        reading_make(&e, i);
        CK(cx_chan_submit_wait(s, &e, 5000) == 0);
    }
    long n = count_wait(&g.m, &g.n, 10, 10000);
    usleep(100000);
    pthread_mutex_lock(&g.m);
    n = g.n;
    long bad = g.bad;
    pthread_mutex_unlock(&g.m);
    fprintf(stderr, "  local sink: %ld events, %ld wrong\n", n, bad);
    CK(n == 10 && bad == 0);
    cx_chan_sink_close(k);
    cx_chan_close(ch);
    cleanup_all();
}

CX_TEST(router_sends_each_event_to_one_member_of_a_stage)
{
    const long N = 600;
    struct job j[3] = {{"share(seq())", C_ROUTED, 0, N / 3},
                       {"share(seq())", C_ROUTED, 1, N / 3},
                       {"share(seq())", C_ROUTED, 2, N / 3}};
    struct cx_chan_stats st;
    CK(run_stage(j, 3, N, &st) == 0); /* each got 200, all of one residue mod 3 */
    CK(st.sent == (uint64_t)N && st.filtered == 2 * (uint64_t)N);
    cleanup_all();
}

static void on_nothing(void *arg, const struct cx_chan_event *ev) { (void)arg, (void)ev; }

CX_TEST(bad_programs_are_refused_when_the_sink_subscribes)
{
    const struct cx_format *fr = reg(reading_d), *fs = reg(summary_d);
    static const struct cx_field huge_f[] = {{"big", "float[40000]", 4, 0, NULL}, {NULL}};
    static const struct cx_struct_decl huge_d[] = {{"huge", huge_f, 160000}, {NULL}};
    const struct cx_format *fh = reg(huge_d);
    CK(fr && fs && fh);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch, *chh;
    struct cx_chan_sink *k;
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = fr}, &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fs, .projection = fs,
                                                    .filter = "mean = mean(step)"},
                    on_nothing, NULL, &k) == -EINVAL);
    CK(strstr(cx_errmsg(), "col 13: 'step' is not an array of numbers"));
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fs, .projection = fs,
                                                    .filter = "step = x"},
                    on_nothing, NULL, &k) == -EINVAL);
    CK(strstr(cx_errmsg(), "col 8: the output field is an integer"));
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fs, .filter = "mean = 1"},
                    on_nothing, NULL, &k) == -EINVAL); /* no projection: nothing to compute */
    CK(strstr(cx_errmsg(), "col 6: '=' is not an operator"));
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = fh}, &chh) == 0);
    CK(cx_chan_sink(chh, &(struct cx_chan_sink_opts){.filter = "sum(big) > 0 && max(big) < 9"},
                    on_nothing, NULL, &k) == -E2BIG);
    CK(strstr(cx_errmsg(), "over the budget of 65536"));
    CK(cx_chan_sink(chh, &(struct cx_chan_sink_opts){.filter = "sum(big) > 0"}, on_nothing, NULL,
                    &k) == 0);
    cx_chan_sink_close(k);
    cx_chan_close(chh);
    cx_chan_close(ch);
    cleanup_all();
}

CX_TEST_MAIN()
