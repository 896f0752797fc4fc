/* Event channels across real processes on real TCP links (loopback, and two network
 * namespaces joined by a veth pair). Each test forks its children before the parent makes
 * its runtime (a runtime has threads; a child is made only from a single-threaded moment).
 * Run: build/test/channel/channel_test [name-substring]. */
#define _GNU_SOURCE
#include "channel/chan_test_util.h"

#include "common/cx_frame.h"
#include "common/cx_test.h"
#include "format/cx_reflect.h"
#include "testutil/cx_netns.h"
#include "testutil/hostile_peer.h"
#include "testutil/ucx_test_env.h"
#include "transport/cx_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#ifdef CX_HAVE_TLS
#include "transport/tls/tls_testcerts.h"
#endif

#define CX_ERR_COPY 512

/* ---- a sink that records what it got ---- */

enum rec_kind { REC_UNTYPED, REC_RD2, REC_RD1, REC_BLOB };

struct rec {
    pthread_mutex_t m;
    pthread_cond_t cv;
    enum rec_kind kind;
    uint32_t blob_n;
    long n, bad, gaps, misorder;
    uint64_t last;
    const void *last_data;
    int stall_fd;       /* >= 0: the handler stops at event stall_at until a byte comes */
    long stall_at;
    int stall_forever;
};

static void rec_init(struct rec *r, enum rec_kind kind)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->m, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->kind = kind;
    r->stall_fd = -1;
}

static void on_rec(void *arg, const struct cx_chan_event *ev)
{
    struct rec *r = arg;
    if (r->stall_fd >= 0 && r->n == r->stall_at) {
        char c;
        while (r->stall_forever)
            pause(); /* a sink that stopped consuming: only a kill ends it */
        if (read(r->stall_fd, &c, 1) != 1)
            _exit(90);
    }
    int64_t k = (int64_t)ev->seq;
    int ok = 1;
    if (r->kind == REC_RD2)
        ok = ev->data && rd2_ok(ev->data, k);
    else if (r->kind == REC_RD1)
        ok = ev->data && ((const struct rd1 *)ev->data)->id == k &&
             ((const struct rd1 *)ev->data)->x == k * 0.5;
    else if (r->kind == REC_BLOB)
        ok = ev->data && blob_ok(ev->data, k, r->blob_n);
    pthread_mutex_lock(&r->m);
    r->n++;
    r->bad += !ok;
    r->gaps += ev->seq != r->last + 1;
    r->misorder += ev->seq <= r->last;
    r->last = ev->seq;
    r->last_data = ev->data;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->m);
}

/* Waits until the sink has at least n events. */
static long rec_wait(struct rec *r, long n, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    pthread_mutex_lock(&r->m);
    while (r->n < n && now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000;
        if (ts.tv_nsec >= 1000000000)
            ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&r->cv, &r->m, &ts);
    }
    long got = r->n;
    pthread_mutex_unlock(&r->m);
    return got;
}

struct result {
    long n, bad, gaps, misorder;
    uint64_t last;
};

static void rec_result(struct rec *r, struct result *out)
{
    pthread_mutex_lock(&r->m);
    *out = (struct result){r->n, r->bad, r->gaps, r->misorder, r->last};
    pthread_mutex_unlock(&r->m);
}

/* ---- the generic sink child ----
 * Reads the channel id, opens it, subscribes, says "ready", waits for `expect` events (or,
 * with expect < 0, for a count the parent sends later), sends its struct result and waits
 * for the parent's goodbye. */
struct sink_job {
    enum rec_kind kind;
    uint32_t blob_n;
    long expect;
    long stall_at;      /* -1: never stall */
    int stall_forever;
    const char *netns;  /* enter this namespace first */
    const char *listen;
    const char *filter; /* a derived sink */
};

static int sink_child(struct kid *k, void *arg)
{
    struct sink_job *j = arg;
    char id[256];
    if (j->netns && cx_netns_enter(j->netns) < 0)
        KID_FAIL(2, "cannot enter %s", j->netns);
    const struct cx_format *fmt = j->kind == REC_RD2 ? reg(rd2_d)
                                  : j->kind == REC_RD1 ? reg(rd1_d)
                                  : j->kind == REC_BLOB ? reg(blob_d) : NULL;
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    struct rec r;
    rec_init(&r, j->kind);
    r.blob_n = j->blob_n;
    if (j->stall_at >= 0) {
        r.stall_fd = k->go;
        r.stall_at = j->stall_at;
        r.stall_forever = j->stall_forever;
    }
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = j->listen ? j->listen : LOOP},
                           &ctx) < 0)
        KID_FAIL(3, "ctx");
    if (get_str(k->rd, id, sizeof id, 10000) < 0)
        KID_FAIL(4, "no channel id");
    if (cx_chan_open(ctx, id, 5000, &ch) < 0)
        KID_FAIL(5, "open %s", id);
    if (cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fmt, .filter = j->filter}, on_rec,
                     &r, &snk) < 0)
        KID_FAIL(6, "sink");
    put_str(k->wr, "ready");
    long expect = j->expect;
    if (expect < 0 && get(k->rd, &expect, sizeof expect, 15000) != sizeof expect)
        KID_FAIL(7, "no expected count");
    rec_wait(&r, expect, 15000);
    struct result res;
    rec_result(&r, &res);
    put(k->wr, &res, sizeof res);
    return kid_bye(k, ctx);
}

static int kid_ready(struct kid *k) { return kid_says(k, "ready", 10000); }

/* ---- bad input and in-process behaviour ---- */

CX_TEST(bad_ids_formats_and_contacts_are_refused_clearly)
{
    const struct cx_format *f2 = reg(rd2_d);
    static const struct cx_field bad_f[] = {{"id", "int64", 8, 0, NULL},
                                            {"x", "string", sizeof(char *), 8, NULL}, {NULL}};
    static const struct cx_struct_decl bad_d[] = {{"reading", bad_f, 16}, {NULL}};
    const struct cx_format *fbad = reg(bad_d);
    struct cx_format *unreg;
    CK(f2 && fbad && cx_format_create(rd1_d, NULL, &unreg) == 0);

    struct cx_chan_ctx *ctx;
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = "tcp://nonsense"}, &ctx) < 0);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    ctx = test_ctx;
    struct cx_chan *ch, *x;
    CK(cx_chan_create(ctx, &(struct cx_chan_opts){.format = unreg}, &ch) == -EINVAL);
    CK(strstr(cx_errmsg(), "not registered"));
    CK(cx_chan_create(ctx, &(struct cx_chan_opts){.format = f2, .mode = 7}, &ch) == -EINVAL);
    CK(cx_chan_create(ctx, &(struct cx_chan_opts){.format = f2}, &ch) == 0);
    CK(strncmp(cx_chan_id(ch), "cx1:tcp://127.0.0.1:", 20) == 0);

    CK(cx_chan_open(ctx, "bogus", 1000, &x) == -EINVAL && strstr(cx_errmsg(), "cx1:"));
    CK(cx_chan_open(ctx, "cx1:tcp://127.0.0.1:1/", 1000, &x) == -EINVAL);
    CK(cx_chan_open(ctx, "cx1:nope://x/3", 1000, &x) < 0);
    CK(cx_chan_open(ctx, "cx1:tcp://127.0.0.1:1/5", 1000, &x) == -ECONNREFUSED);
    CK(strstr(cx_errmsg(), "cannot reach"));
    char id[256]; /* a live contact (ourselves, over a real link) without that channel */
    snprintf(id, sizeof id, "cx1:%s/999", cx_chan_ctx_addr(ctx));
    CK(cx_chan_open(ctx, id, 3000, &x) == -ENOENT && strstr(cx_errmsg(), "no channel"));
    CK(cx_chan_open(ctx, cx_chan_id(ch), 1000, &x) == 0 && x == ch); /* same handle */
    cx_chan_close(x);

    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct rec r;
    rec_init(&r, REC_RD2);
    CK(cx_chan_source(ch, NULL, &s) == -EINVAL);
    CK(cx_chan_source(ch, unreg, &s) == -EINVAL);
    CK(cx_chan_source(ch, fbad, &s) == -EPROTO && strstr(cx_errmsg(), "does not convert"));
    fprintf(stderr, "  (expected) %s\n", cx_errmsg());
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fbad}, on_rec, &r, &k) == -EPROTO);
    CK(cx_chan_sink(ch, NULL, NULL, &r, &k) == -EINVAL);
    /* a derived sink's filter is compiled against the channel's format at install time */
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.filter = "id > 3 && nosuch < 1"}, on_rec,
                    &r, &k) == -EINVAL);
    CK(strstr(cx_errmsg(), "col 11") && strstr(cx_errmsg(), "unknown field 'nosuch'"));
    fprintf(stderr, "  (expected) %s\n", cx_errmsg());
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.filter = "id >"}, on_rec, &r, &k) == -EINVAL);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.filter = "x == \"a\""}, on_rec, &r, &k) ==
       -EINVAL);
    cx_format_free(unreg);
    cx_chan_close(ch);
    cleanup_all();
}

static int released;
static void on_release(void *arg, void *ev)
{
    (void)arg;
    __atomic_add_fetch(&released, 1, __ATOMIC_SEQ_CST);
    free(ev);
}

struct untyped_rec {
    struct rec r;
    int64_t id;
    uint64_t token;
};
static void on_untyped(void *arg, const struct cx_chan_event *ev)
{
    struct untyped_rec *u = arg;
    struct cx_view v;
    struct cx_value val = {0};
    if (ev->data == NULL && cx_reflect_open(ev->token, ev->wire, ev->wire_len, &v) == 0 &&
        cx_reflect_get(&v, "id", 0, &val) == 0)
        u->id = val.i;
    u->token = ev->token;
    on_rec(&u->r, ev);
}

struct reentrant {
    struct cx_chan_ctx *ctx;
    const char *id;
    int rc;
};
static void on_reentrant(void *arg, const struct cx_chan_event *ev)
{
    struct reentrant *r = arg;
    struct cx_chan *x;
    (void)ev;
    __atomic_store_n(&r->rc, cx_chan_open(r->ctx, r->id, 100, &x), __ATOMIC_SEQ_CST);
}

CX_TEST(local_sinks_get_events_through_the_dispatch_queue_without_copy)
{
    const struct cx_format *f2 = reg(rd2_d), *f1 = reg(rd1_d);
    CK(f2 && f1);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    struct cx_chan_sink *k2, *k1, *ku;
    struct rec r2, r1;
    struct untyped_rec u = {0};
    rec_init(&r2, REC_RD2);
    rec_init(&r1, REC_RD1);
    rec_init(&u.r, REC_UNTYPED);
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2}, &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &r2, &k2) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f1}, on_rec, &r1, &k1) == 0);
    CK(cx_chan_sink(ch, NULL, on_untyped, &u, &ku) == 0);
    struct reentrant re = {test_ctx, "cx1:tcp://127.0.0.1:1/1", 1};
    struct cx_chan_sink *kr;
    CK(cx_chan_sink(ch, NULL, on_reentrant, &re, &kr) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    CK(st.sources == 1 && st.sinks == 1); /* three local sinks share one member */

    struct rd2 *ev = malloc(sizeof *ev);
    rd2_make(ev, 1);
    released = 0;
    CK(cx_chan_submit_owned(s, ev, on_release, NULL, 0) == 0);
    CK(rec_wait(&r2, 1, 3000) == 1 && rec_wait(&r1, 1, 3000) == 1 && rec_wait(&u.r, 1, 3000) == 1);
    CK(r2.last_data == ev); /* the very struct: no copy */
    CK(r1.bad == 0 && u.id == 1 && u.token == cx_format_token(f2));
    for (int i = 0; i < 100 && !__atomic_load_n(&released, __ATOMIC_SEQ_CST); i++)
        usleep(1000);
    CK(released == 1);
    CK(__atomic_load_n(&re.rc, __ATOMIC_SEQ_CST) == -EDEADLK); /* no waiting in a handler */
    cx_chan_sink_close(kr);

    struct rd2 e2;
    rd2_make(&e2, 2);
    CK(cx_chan_submit(s, &e2) == 0); /* the caller keeps its struct: one copy */
    CK(rec_wait(&r2, 2, 3000) == 2 && rec_wait(&r1, 2, 3000) == 2 && rec_wait(&u.r, 2, 3000) == 2);
    CK(r2.last_data != &e2 && r2.bad == 0 && r2.gaps == 0);
    /* counted when the handlers have returned: 4 sinks got event 1, 3 (one closed) event 2 */
    stats_until(ch, st, st.delivered == 7, 1000);
    CK(st.delivered == 7 && st.sent == 0 && st.errors == 0);
    cx_chan_sink_close(k1);
    cx_chan_source_close(s);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- fan-out: one source, three sink processes and a local sink ---- */

CX_TEST(fanout_one_source_to_three_processes_and_a_local_sink)
{
    const long N = 20000;
    struct sink_job job = {.kind = REC_RD2, .expect = N, .stall_at = -1};
    struct kid kids[3];
    for (int i = 0; i < 3; i++)
        CK(spawn(&kids[i], sink_child, &job) == 0);
    const struct cx_format *f2 = reg(rd2_d);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct rec loc;
    rec_init(&loc, REC_RD2);
    CK(cx_chan_create(test_ctx,
                      &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE,
                                             .queue_limit = 512}, &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &loc, &k) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    for (int i = 0; i < 3; i++)
        CK(put_str(kids[i].wr, cx_chan_id(ch)) == 0 && kid_ready(&kids[i]));
    CK(cx_chan_wait_members(ch, 1, 4, 5000) == 0);
    long long t0 = now_ms();
    CK(submit_rd2(s, 1, N, 5000) == 0);
    struct result res[3];
    for (int i = 0; i < 3; i++)
        CK(get(kids[i].rd, &res[i], sizeof res[i], 15000) == sizeof res[i]);
    long long ms = now_ms() - t0;
    CK(rec_wait(&loc, N, 5000) == N && loc.bad == 0 && loc.gaps == 0);
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st); /* before the goodbyes: a sink that left has no link any more */
    for (int i = 0; i < 3; i++) {
        CK(res[i].n == N && res[i].bad == 0 && res[i].gaps == 0 && res[i].misorder == 0);
        put_str(kids[i].wr, "bye");
    }
    CK(st.sent == 3 * (uint64_t)N && st.delivered == (uint64_t)N && st.dropped == 0);
    CK(st.shm_sinks == 3 && st.net_sinks == 0); /* three processes on this host: shm links */
    CK(st.sent_shm == st.sent);                   /* and every frame went over them */
    fprintf(stderr, "  fan-out: %ld events x 3 processes (shm) + 1 local sink in %lld ms "
                    "(%.0f events/s delivered)\n", N, ms, 4.0 * N * 1000 / (ms ? ms : 1));
    for (int i = 0; i < 3; i++)
        CK(reap(&kids[i], 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- fan-in: three source processes, one sink ---- */

struct src_job {
    const char *netns, *listen;
    long count;
    uint32_t blob_n; /* 0: rd2 events */
};

static int source_child(struct kid *k, void *arg)
{
    struct src_job *j = arg;
    char id[256];
    if (j->netns && cx_netns_enter(j->netns) < 0)
        KID_FAIL(2, "cannot enter %s", j->netns);
    const struct cx_format *f = j->blob_n ? reg(blob_d) : reg(rd2_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = j->listen ? j->listen : LOOP},
                           &ctx) < 0)
        KID_FAIL(3, "ctx");
    if (get_str(k->rd, id, sizeof id, 10000) < 0)
        KID_FAIL(4, "no channel id");
    if (cx_chan_open(ctx, id, 5000, &ch) < 0 || cx_chan_source(ch, f, &s) < 0)
        KID_FAIL(5, "open/source %s", id);
    if (cx_chan_wait_members(ch, 0, 1, 5000) < 0)
        KID_FAIL(6, "no sink");
    uint8_t *buf = j->blob_n ? calloc(1, j->blob_n) : NULL;
    for (long i = 1; i <= j->count; i++) {
        struct rd2 e;
        struct blob b;
        if (buf)
            blob_make(&b, buf, j->blob_n, i);
        else
            rd2_make(&e, i);
        if (cx_chan_submit_wait(s, buf ? (void *)&b : (void *)&e, 5000) < 0)
            KID_FAIL(7, "submit %ld", i);
    }
    put_str(k->wr, "sent");
    free(buf);
    return kid_bye(k, ctx); /* stay until the sink has everything */
}

/* A sink telling its sources apart by the address they send from. */
struct fanin {
    pthread_mutex_t m;
    char from[4][128];
    long n[4], bad;
    uint64_t last[4];
    long total;
};
static void on_fanin(void *arg, const struct cx_chan_event *ev)
{
    struct fanin *f = arg;
    pthread_mutex_lock(&f->m);
    int i = 0;
    while (i < 4 && f->from[i][0] && strcmp(f->from[i], ev->from) != 0)
        i++;
    if (i == 4) {
        f->bad++;
    } else {
        if (!f->from[i][0])
            snprintf(f->from[i], sizeof f->from[i], "%s", ev->from);
        f->bad += ev->seq != f->last[i] + 1 || !rd2_ok(ev->data, (int64_t)ev->seq);
        f->last[i] = ev->seq;
        f->n[i]++;
    }
    f->total++;
    pthread_mutex_unlock(&f->m);
}

CX_TEST(fanin_three_source_processes_to_one_sink)
{
    const long M = 5000;
    struct src_job job = {.count = M};
    struct kid kids[3];
    for (int i = 0; i < 3; i++)
        CK(spawn(&kids[i], source_child, &job) == 0);
    const struct cx_format *f2 = reg(rd2_d);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    struct fanin fi = {.m = PTHREAD_MUTEX_INITIALIZER};
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                      &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f2}, on_fanin, &fi, &k) == 0);
    long long t0 = now_ms();
    for (int i = 0; i < 3; i++)
        CK(put_str(kids[i].wr, cx_chan_id(ch)) == 0);
    CK(cx_chan_wait_members(ch, 3, 1, 5000) == 0);
    for (int i = 0; i < 3; i++) {
        char s[8];
        CK(get_str(kids[i].rd, s, sizeof s, 15000) == 0);
    }
    count_wait(&fi.m, &fi.total, 3 * M, 3000);
    long long ms = now_ms() - t0;
    pthread_mutex_lock(&fi.m);
    long total = fi.total, bad = fi.bad, n0 = fi.n[0], n1 = fi.n[1], n2 = fi.n[2], n3 = fi.n[3];
    pthread_mutex_unlock(&fi.m);
    for (int i = 0; i < 3; i++)
        put_str(kids[i].wr, "bye");
    CK(total == 3 * M && bad == 0 && n0 == M && n1 == M && n2 == M && n3 == 0);
    fprintf(stderr, "  fan-in: 3 x %ld events in %lld ms\n", M, ms);
    for (int i = 0; i < 3; i++)
        CK(reap(&kids[i], 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- type evolution: sources and sinks of different versions on one typed channel ---- */

static int evo_source_child(struct kid *k, void *arg)
{
    int newer = *(int *)arg;
    /* only this process knows the newer format: sinks must learn it from the wire */
    const struct cx_format *f = newer ? reg(rd3_d) : reg(rd2_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        kid_open(k, ctx, &ch) < 0 || cx_chan_source(ch, f, &s) < 0 ||
        cx_chan_wait_members(ch, 0, 2, 5000) < 0)
        KID_FAIL(3, "setup");
    for (long i = 1; i <= 100; i++) {
        char name[32];
        snprintf(name, sizeof name, "ev%ld", i);
        struct rd3 e3 = {i, i * 0.5, (double)-i, 3.0 * i, name};
        struct rd2 e2;
        rd2_make(&e2, i);
        if (cx_chan_submit_wait(s, newer ? (void *)&e3 : (void *)&e2, 5000) < 0)
            KID_FAIL(4, "submit");
    }
    put_str(k->wr, "sent");
    return kid_bye(k, ctx);
}

struct reflect_rec {
    pthread_mutex_t m;
    long n, v3, v2, bad;
    uint64_t tokens[2];
};
static void on_reflect(void *arg, const struct cx_chan_event *ev)
{
    struct reflect_rec *r = arg;
    struct cx_view v;
    struct cx_value id = {0}, z = {0}, name = {0};
    int ok = !ev->data && cx_reflect_open(ev->token, ev->wire, ev->wire_len, &v) == 0 &&
             cx_reflect_get(&v, "id", 0, &id) == 0 && id.i == (int64_t)ev->seq;
    int has_z = ok && cx_reflect_get(&v, "z", 0, &z) == 0;
    if (has_z) {
        char want[32];
        snprintf(want, sizeof want, "ev%" PRIu64, ev->seq);
        ok = z.d == 3.0 * (double)ev->seq && cx_reflect_get(&v, "name", 0, &name) == 0 &&
             name.s && strcmp(name.s, want) == 0;
    }
    pthread_mutex_lock(&r->m);
    r->n++;
    r->bad += !ok;
    r->v3 += has_z;
    r->v2 += ok && !has_z;
    if (!r->tokens[0] || r->tokens[0] == ev->token)
        r->tokens[0] = ev->token;
    else
        r->tokens[1] = ev->token;
    pthread_mutex_unlock(&r->m);
}

static int evo_untyped_sink_child(struct kid *k, void *arg)
{
    (void)arg;
    struct cx_format *probe;
    if (cx_format_create(rd3_d, NULL, &probe) < 0)
        KID_FAIL(2, "probe");
    uint64_t t3 = cx_format_token(probe);
    cx_format_free(probe);
    if (cx_format_registry_lookup(t3))
        KID_FAIL(3, "the newer format is known before any event came");
    struct reflect_rec r = {.m = PTHREAD_MUTEX_INITIALIZER};
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        kid_open(k, ctx, &ch) < 0 || cx_chan_sink(ch, NULL, on_reflect, &r, &snk) < 0)
        KID_FAIL(4, "setup");
    put_str(k->wr, "ready");
    count_wait(&r.m, &r.n, 200, 10000);
    pthread_mutex_lock(&r.m);
    struct result res = {r.n, r.bad + (r.v3 != 100) + (r.v2 != 100) + !r.tokens[1], 0, 0, 0};
    pthread_mutex_unlock(&r.m);
    if (!cx_format_registry_lookup(t3))
        res.bad++;
    put(k->wr, &res, sizeof res);
    return kid_bye(k, ctx);
}

CX_TEST(type_evolution_newer_source_older_sink_and_reflection)
{
    int newer = 1, older = 0;
    struct sink_job old_sink = {.kind = REC_RD1, .expect = 200, .stall_at = -1};
    struct kid kids[4]; /* 0: rd1 sink, 1: untyped sink, 2: rd3 source, 3: rd2 source */
    CK(spawn(&kids[0], sink_child, &old_sink) == 0);
    CK(spawn(&kids[1], evo_untyped_sink_child, NULL) == 0);
    CK(spawn(&kids[2], evo_source_child, &newer) == 0);
    CK(spawn(&kids[3], evo_source_child, &older) == 0);
    const struct cx_format *f2 = reg(rd2_d);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                      &ch) == 0);
    for (int i = 0; i < 2; i++)
        CK(put_str(kids[i].wr, cx_chan_id(ch)) == 0 && kid_ready(&kids[i]));
    for (int i = 2; i < 4; i++)
        CK(put_str(kids[i].wr, cx_chan_id(ch)) == 0);
    struct result res[2];
    for (int i = 0; i < 2; i++)
        CK(get(kids[i].rd, &res[i], sizeof res[i], 15000) == sizeof res[i]);
    /* decentralised: the contact knows every member but no event went through it */
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    for (int i = 0; i < 4; i++)
        put_str(kids[i].wr, "bye");
    CK(st.sources == 2 && st.sinks == 2 && st.received_bytes == 0 && st.sent == 0);
    /* the old sink saw 200 events of two sources in its own layout (seq restarts per
     * source, so only the values are checked); the untyped one read both by reflection */
    CK(res[0].n == 200 && res[0].bad == 0);
    CK(res[1].n == 200 && res[1].bad == 0);
    for (int i = 0; i < 4; i++)
        CK(reap(&kids[i], 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- delivery modes with a sink that stops consuming ---- */

#define BLOB (64u << 10)

CX_TEST(best_effort_full_queue_drops_the_oldest_and_counts_it)
{
    const long N = 700;
    struct sink_job job = {.kind = REC_BLOB, .blob_n = BLOB, .expect = -1, .stall_at = 0};
    struct kid kid;
    CK(spawn(&kid, sink_child, &job) == 0);
    const struct cx_format *fb = reg(blob_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    CK(chan_for_kids(&kid, 1, fb, &(struct cx_chan_opts){.format = fb, .mode = CX_CHAN_BEST_EFFORT,
                                                         .queue_limit = 16}, &ch, &s) == 0);
    uint8_t *buf = calloc(1, BLOB);
    CK(buf);
    for (long i = 1; i <= N; i++) { /* the sink is stalled: never blocks, drops instead */
        struct blob b;
        blob_make(&b, buf, BLOB, i);
        CK(cx_chan_submit(s, &b) == 0);
    }
    free(buf);
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    fprintf(stderr, "  best-effort: %" PRIu64 " of %ld events dropped, %" PRIu64 " queued\n",
            st.dropped, N, st.queued);
    CK(st.submitted == (uint64_t)N && st.dropped > 0 && st.queued <= 16);
    long expect = N - (long)st.dropped;
    CK(write(kid.go, "g", 1) == 1);
    CK(put(kid.wr, &expect, sizeof expect) == 0);
    struct result res;
    CK(get(kid.rd, &res, sizeof res, 15000) == sizeof res);
    put_str(kid.wr, "bye");
    /* nothing lost but the dropped ones, the newest kept, order kept */
    CK(res.n == expect && res.bad == 0 && res.misorder == 0 && res.last == (uint64_t)N);
    CK(res.gaps > 0);
    CK(reap(&kid, 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

CX_TEST(reliable_full_queue_pushes_back_on_the_source)
{
    const long N = 700;
    struct sink_job job = {.kind = REC_BLOB, .blob_n = BLOB, .expect = N, .stall_at = 0};
    struct kid kid;
    CK(spawn(&kid, sink_child, &job) == 0);
    const struct cx_format *fb = reg(blob_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    CK(chan_for_kids(&kid, 1, fb, &(struct cx_chan_opts){.format = fb, .mode = CX_CHAN_RELIABLE,
                                                         .queue_limit = 16}, &ch, &s) == 0);
    uint8_t *buf = calloc(1, BLOB);
    CK(buf);
    struct blob b;
    long i = 1;
    int rc = 0;
    for (; i <= N; i++) {
        blob_make(&b, buf, BLOB, i);
        if ((rc = cx_chan_submit(s, &b)) < 0)
            break;
    }
    CK(rc == -EAGAIN && strstr(cx_errmsg(), "full"));
    fprintf(stderr, "  reliable: submit %ld refused: %s\n", i, cx_errmsg());
    /* a waiting submit times out once the sink's socket buffers are full too (the first
     * refusal may come earlier, while the progress thread had not drained the queue yet) */
    long long t0 = 0;
    while (i <= N) {
        blob_make(&b, buf, BLOB, i);
        t0 = now_ms();
        if ((rc = cx_chan_submit_wait(s, &b, 200)) < 0)
            break;
        i++;
    }
    CK(rc == -ETIMEDOUT && now_ms() - t0 >= 190 && strstr(cx_errmsg(), "within 200 ms"));
    fprintf(stderr, "  reliable: submit %ld waited %lld ms in vain\n", i, now_ms() - t0);
    CK(i < N - 100);
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    CK(st.blocked >= 2 && st.dropped == 0 && st.queued == 16);
    CK(write(kid.go, "g", 1) == 1); /* the sink drains: the source goes on */
    for (; i <= N; i++) {
        blob_make(&b, buf, BLOB, i);
        CK(cx_chan_submit_wait(s, &b, 10000) == 0);
    }
    free(buf);
    struct result res;
    CK(get(kid.rd, &res, sizeof res, 15000) == sizeof res);
    put_str(kid.wr, "bye");
    CK(res.n == N && res.bad == 0 && res.gaps == 0 && res.last == (uint64_t)N);
    CK(reap(&kid, 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- waiting threads are woken (they are counted: nobody waiting, no broadcast) ---- */

/* A handler that holds its first event until the gate opens. */
struct gated {
    int gate;   /* atomic: 1 = open */
    int inside; /* atomic: the handler holds an event */
    long n;     /* atomic */
};
static void on_gated(void *arg, const struct cx_chan_event *ev)
{
    struct gated *g = arg;
    (void)ev;
    __atomic_store_n(&g->inside, 1, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&g->gate, __ATOMIC_SEQ_CST))
        usleep(1000);
    __atomic_add_fetch(&g->n, 1, __ATOMIC_SEQ_CST);
}
static void *open_gate_later(void *arg)
{
    usleep(50000); /* the other thread is (most likely) waiting by now; either way is fine */
    __atomic_store_n((int *)arg, 1, __ATOMIC_SEQ_CST);
    return NULL;
}
struct closer {
    struct cx_chan_sink *k;
    int done; /* atomic */
};
static void *close_sink(void *arg)
{
    struct closer *c = arg;
    cx_chan_sink_close(c->k); /* waits for the handler running on the progress thread */
    __atomic_store_n(&c->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}
static int wait_flag(int *flag, int timeout_ms)
{
    for (int i = 0; i < timeout_ms && !__atomic_load_n(flag, __ATOMIC_SEQ_CST); i++)
        usleep(1000);
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

/* A reliable source blocked on a full local sink queue is woken when the dispatcher makes
 * room, and a thread closing a sink whose handler runs (remote event, received on the
 * other runtime's progress thread) is woken when the handler returns. A lost wake-up would
 * leave the submit to time out after 10 s and the close to hang. */
CX_TEST(threads_waiting_for_room_or_a_busy_handler_are_woken)
{
    const struct cx_format *f2 = reg(rd2_d);
    CK(f2 && cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct gated g = {0};
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE,
                                                       .queue_limit = 4}, &ch) == 0);
    CK(cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f2}, on_gated, &g, &k) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    struct rd2 e;
    long i = 1;
    int rc;
    for (;; i++) { /* the handler holds event 1: the queue fills behind it */
        rd2_make(&e, i);
        if ((rc = cx_chan_submit(s, &e)) < 0)
            break;
    }
    CK(rc == -EAGAIN && i <= 6);
    pthread_t t;
    CK(pthread_create(&t, NULL, open_gate_later, &g.gate) == 0);
    CK(cx_chan_submit_wait(s, &e, 10000) == 0); /* woken when the dispatcher drains */
    pthread_join(t, NULL);
    for (int w = 0; w < 10000 && __atomic_load_n(&g.n, __ATOMIC_SEQ_CST) < i; w++)
        usleep(1000);
    CK(__atomic_load_n(&g.n, __ATOMIC_SEQ_CST) == i);
    cx_chan_sink_close(k);

    /* a remote sink in a second runtime, closed while its handler holds an event */
    struct cx_chan_ctx *b = NULL;
    struct cx_chan *chb;
    struct gated gb = {0};
    struct closer c = {0};
    int ok = cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &b) == 0 &&
             cx_chan_open(b, cx_chan_id(ch), 3000, &chb) == 0 &&
             cx_chan_sink(chb, &(struct cx_chan_sink_opts){.format = f2}, on_gated, &gb, &c.k) == 0 &&
             cx_chan_wait_members(ch, 1, 1, 3000) == 0;
    rd2_make(&e, ++i);
    ok = ok && cx_chan_submit_wait(s, &e, 3000) == 0 && wait_flag(&gb.inside, 10000);
    pthread_t tc, tg;
    int started = ok && pthread_create(&tc, NULL, close_sink, &c) == 0;
    ok = started && pthread_create(&tg, NULL, open_gate_later, &gb.gate) == 0;
    int closed = ok && wait_flag(&c.done, 10000);
    if (!ok) /* let a waiting close go on before the runtime goes */
        __atomic_store_n(&gb.gate, 1, __ATOMIC_SEQ_CST);
    if (ok)
        pthread_join(tg, NULL);
    if (started && closed)
        pthread_join(tc, NULL);
    CK(ok && closed && __atomic_load_n(&gb.n, __ATOMIC_SEQ_CST) == 1);
    cx_chan_ctx_destroy(b);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- membership: a sink killed mid-stream ---- */

struct killer {
    pid_t pid;
    int after_ms;
};
static void *kill_later(void *arg)
{
    struct killer *k = arg;
    usleep((useconds_t)k->after_ms * 1000);
    kill(k->pid, SIGKILL);
    return NULL;
}

CX_TEST(sink_killed_mid_stream_is_removed_and_sources_go_on)
{
    const long N = 800;
    /* kid 0 stops consuming after 50 events and is killed; kid 1 must get everything */
    struct sink_job dying = {.kind = REC_BLOB, .blob_n = BLOB, .expect = N, .stall_at = 50,
                             .stall_forever = 1};
    struct sink_job alive = {.kind = REC_BLOB, .blob_n = BLOB, .expect = N, .stall_at = -1};
    struct kid kids[2];
    CK(spawn(&kids[0], sink_child, &dying) == 0);
    CK(spawn(&kids[1], sink_child, &alive) == 0);
    const struct cx_format *fb = reg(blob_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    CK(chan_for_kids(kids, 2, fb, &(struct cx_chan_opts){.format = fb, .mode = CX_CHAN_RELIABLE,
                                                         .queue_limit = 32}, &ch, &s) == 0);
    struct cx_chan_stats st;
    stats_until(ch, st, st.shm_sinks == 2, 3000); /* links are made on the progress thread */
    CK(st.shm_sinks == 2 && st.net_sinks == 0); /* the kill is noticed on an shm link */
    struct killer kl = {kids[0].pid, 500};
    pthread_t th;
    CK(pthread_create(&th, NULL, kill_later, &kl) == 0);
    uint8_t *buf = calloc(1, BLOB);
    long long t0 = now_ms(), worst = 0;
    int rc = 0;
    for (long i = 1; i <= N && rc == 0; i++) {
        struct blob b;
        blob_make(&b, buf, BLOB, i);
        long long t = now_ms();
        rc = cx_chan_submit_wait(s, &b, 10000);
        if (now_ms() - t > worst)
            worst = now_ms() - t;
    }
    pthread_join(th, NULL);
    free(buf);
    CK(rc == 0);
    long long ms = now_ms() - t0;
    CK(cx_chan_wait_members(ch, 1, 1, 0) == 0);
    stats_until(ch, st, st.sinks == 1, 3000); /* the crash is seen when the link breaks */
    fprintf(stderr, "  killed sink: %ld events in %lld ms, longest submit %lld ms, "
                    "sinks %u, removed %u\n", N, ms, worst, st.sinks, st.removed);
    CK(st.sinks == 1 && st.removed == 1 && st.shm_sinks == 1);
    struct result res;
    CK(get(kids[1].rd, &res, sizeof res, 15000) == sizeof res);
    put_str(kids[1].wr, "bye");
    if (res.n != N || res.bad || res.gaps)
        fprintf(stderr, "  surviving sink: %ld events, %ld bad, %ld gaps, last %llu\n", res.n,
                res.bad, res.gaps, (unsigned long long)res.last);
    CK(res.n == N && res.bad == 0 && res.gaps == 0);
    CK(reap(&kids[0], 5000) == 100 + SIGKILL);
    CK(reap(&kids[1], 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- derived sinks: filter at the source ---- */

CX_TEST(derived_filter_runs_at_the_source_and_saves_the_wire)
{
    const long N = 4000, WANT = (N - 24) / 4 + 1; /* ids 24, 28, ..., 4000 */
    struct sink_job derived = {.kind = REC_RD2, .expect = WANT, .stall_at = -1,
                               .filter = "id % 4 == 0 && x > 10.0"};
    struct sink_job plain = {.kind = REC_RD2, .expect = N, .stall_at = -1};
    struct kid kids[2];
    CK(spawn(&kids[0], sink_child, &derived) == 0);
    CK(spawn(&kids[1], sink_child, &plain) == 0);
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    CK(chan_for_kids(kids, 2, f2, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                     &ch, &s) == 0);
    CK(submit_rd2(s, 1, N, 5000) == 0);
    struct result res[2];
    for (int i = 0; i < 2; i++)
        CK(get(kids[i].rd, &res[i], sizeof res[i], 15000) == sizeof res[i]);
    for (int i = 0; i < 2; i++)
        put_str(kids[i].wr, "bye");
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    const uint64_t frame = CX_FRAME_HDR_SIZE + 8 + sizeof(struct rd2); /* header, side, struct */
    fprintf(stderr, "  filter: %" PRIu64 " of %ld events stopped at the source, %" PRIu64
            " bytes did not cross the wire (%" PRIu64 " sent)\n", st.filtered, N,
            st.filtered_bytes, st.sent_bytes);
    CK(res[0].n == WANT && res[0].bad == 0 && res[0].misorder == 0 && res[0].last == (uint64_t)N);
    CK(res[1].n == N && res[1].bad == 0 && res[1].gaps == 0); /* the plain sink: everything */
    CK(st.filtered == (uint64_t)(N - WANT) && st.filtered_bytes == st.filtered * frame);
    CK(st.sent == (uint64_t)(N + WANT) && st.sent_bytes == st.sent * frame);
    for (int i = 0; i < 2; i++)
        CK(reap(&kids[i], 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

CX_TEST(derived_filter_that_a_source_cannot_compile_is_reported_to_the_sink)
{
    /* untyped channel and sink: only the source, knowing its format, can check the filter */
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan_ctx *b = NULL;
    struct cx_chan *ch, *chb = NULL;
    struct cx_chan_source *s;
    struct cx_chan_sink *k = NULL;
    struct rec r;
    rec_init(&r, REC_UNTYPED);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    CK(cx_chan_create(test_ctx, NULL, &ch) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    int ok = cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &b) == 0 &&
             cx_chan_open(b, cx_chan_id(ch), 3000, &chb) == 0 &&
             cx_chan_sink(chb, &(struct cx_chan_sink_opts){.filter = "z > 1"}, on_rec, &r, &k) == 0 &&
             cx_chan_wait_members(ch, 1, 1, 3000) == 0;
    for (long i = 1; ok && i <= 10; i++) {
        struct rd2 e;
        rd2_make(&e, i);
        ok = cx_chan_submit(s, &e) == 0;
    }
    char err[CX_ERR_COPY] = "";
    for (int i = 0; ok && i < 300 && !err[0]; i++) {
        usleep(10000);
        cx_chan_sink_error(k, err, sizeof err);
    }
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    long got = rec_wait(&r, 1, 100);
    cx_chan_ctx_destroy(b);
    fprintf(stderr, "  sink error: %s\n", err);
    CK(ok && strstr(err, "unknown field 'z'") && strstr(err, "source at"));
    CK(got == 0 && st.filtered == 10 && st.sent == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- derived sinks: projection at the source ---- */

struct wide { int64_t id; double x, y; uint8_t pad[1000]; };
struct narrow { int64_t id; double x; };
static const struct cx_field wide_f[] = {
    {"id", "int64", 8, offsetof(struct wide, id), NULL},
    {"x", "double", 8, offsetof(struct wide, x), NULL},
    {"y", "double", 8, offsetof(struct wide, y), NULL},
    {"pad", "uint8[1000]", 1, offsetof(struct wide, pad), NULL}, {NULL}};
static const struct cx_field narrow_f[] = {
    {"id", "int64", 8, offsetof(struct narrow, id), NULL},
    {"x", "double", 8, offsetof(struct narrow, x), NULL}, {NULL}};
static const struct cx_struct_decl wide_d[] = {{"reading", wide_f, sizeof(struct wide)}, {NULL}};
static const struct cx_struct_decl narrow_d[] = {{"reading", narrow_f, sizeof(struct narrow)},
                                                 {NULL}};

struct narrow_rec {
    pthread_mutex_t m;
    long n, bad;
    uint64_t last;
};
static void on_narrow(void *arg, const struct cx_chan_event *ev)
{
    struct narrow_rec *r = arg;
    const struct narrow *e = ev->data;
    pthread_mutex_lock(&r->m);
    r->n++;
    r->bad += !e || e->id != (int64_t)ev->seq || e->x != (double)ev->seq * 0.5 ||
              ev->seq % 2 != 0 || ev->seq <= r->last;
    r->last = ev->seq;
    pthread_mutex_unlock(&r->m);
}

static int projection_sink_child(struct kid *k, void *arg)
{
    long n = *(long *)arg;
    /* the narrow format exists only here: the source must ask this process for it */
    const struct cx_format *fn = reg(narrow_d);
    struct narrow_rec r = {.m = PTHREAD_MUTEX_INITIALIZER};
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    if (!fn || cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        kid_open(k, ctx, &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fn, .projection = fn,
                                                     .filter = "id % 2 == 0"},
                     on_narrow, &r, &snk) < 0)
        KID_FAIL(3, "setup");
    put_str(k->wr, "ready");
    count_wait(&r.m, &r.n, n, 10000);
    pthread_mutex_lock(&r.m);
    struct result res = {r.n, r.bad, 0, 0, r.last};
    pthread_mutex_unlock(&r.m);
    put(k->wr, &res, sizeof res);
    return kid_bye(k, ctx);
}

CX_TEST(derived_filter_and_projection_at_the_source)
{
    long N = 2000, WANT = N / 2; /* the even ids, each cut to {id, x} */
    struct kid kid;
    CK(spawn(&kid, projection_sink_child, &WANT) == 0);
    const struct cx_format *fw = reg(wide_d);
    struct cx_chan *ch;
    struct cx_chan_source *s;
    CK(chan_for_kids(&kid, 1, fw, &(struct cx_chan_opts){.mode = CX_CHAN_RELIABLE}, &ch, &s) == 0);
    for (long i = 1; i <= N; i++) {
        struct wide e = {.id = i, .x = i * 0.5, .y = 1};
        memset(e.pad, 0xab, sizeof e.pad);
        CK(cx_chan_submit_wait(s, &e, 5000) == 0);
    }
    struct result res;
    CK(get(kid.rd, &res, sizeof res, 15000) == sizeof res);
    put_str(kid.wr, "bye");
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    fprintf(stderr, "  projection: %" PRIu64 " bytes sent for %ld events of %zu bytes, "
            "%" PRIu64 " saved by projection, %" PRIu64 " by the filter\n", st.sent_bytes, N,
            sizeof(struct wide), st.projected_bytes_saved, st.filtered_bytes);
    CK(res.n == WANT && res.bad == 0 && res.last == (uint64_t)N);
    /* every event sent shrank from 1032 to 24 wire bytes: the contact relayed the sink's
     * format ahead of the member, so the source never had to send a whole event */
    CK(st.filtered == (uint64_t)(N - WANT) &&
       st.filtered_bytes == st.filtered * (CX_FRAME_HDR_SIZE + 1032));
    CK(st.projected_bytes_saved == (uint64_t)WANT * (1032 - 24));
    CK(st.sent_bytes == (uint64_t)WANT * (CX_FRAME_HDR_SIZE + 24));
    CK(reap(&kid, 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- membership changes while events flow (three runtimes in this process) ---- */

CX_TEST(sinks_join_and_leave_mid_stream)
{
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan_ctx *b = NULL, *c = NULL;
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan *ch, *chb, *chc;
    struct cx_chan_source *s;
    struct cx_chan_sink *kb, *kc;
    struct rec rb, rc;
    rec_init(&rb, REC_RD2);
    rec_init(&rc, REC_RD2);
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                      &ch) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    int ok = cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &b) == 0 &&
             cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &c) == 0 &&
             cx_chan_open(b, cx_chan_id(ch), 3000, &chb) == 0 &&
             cx_chan_sink(chb, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &rb, &kb) == 0 &&
             cx_chan_wait_members(ch, 1, 1, 3000) == 0;
    ok = ok && submit_rd2(s, 1, 1000, 3000) == 0; /* b alone */
    ok = ok && rec_wait(&rb, 1000, 3000) == 1000 && cx_chan_open(c, cx_chan_id(ch), 3000, &chc) == 0 &&
         cx_chan_sink(chc, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &rc, &kc) == 0 &&
         cx_chan_wait_members(ch, 1, 2, 3000) == 0;
    ok = ok && submit_rd2(s, 1001, 2000, 3000) == 0; /* b and c */
    ok = ok && rec_wait(&rb, 2000, 3000) == 2000 && rec_wait(&rc, 1000, 3000) == 1000;
    if (ok)
        cx_chan_sink_close(kb); /* b leaves politely: the contact tells the source */
    struct cx_chan_stats st = {0};
    if (ok)
        stats_until(ch, st, st.sinks == 1, 1000);
    ok = ok && submit_rd2(s, 2001, 3000, 3000) == 0; /* c alone */
    ok = ok && rec_wait(&rc, 2000, 3000) == 2000;
    struct result res_b, res_c;
    rec_result(&rb, &res_b);
    rec_result(&rc, &res_c);
    cx_chan_ctx_destroy(c);
    cx_chan_ctx_destroy(b);
    CK(ok);
    CK(st.sinks == 1 && st.removed == 0);
    CK(res_b.n == 2000 && res_b.last == 2000 && res_b.gaps == 0 && res_b.bad == 0);
    /* c saw events 1001..3000: its first "gap" is the join itself */
    CK(res_c.n == 2000 && res_c.last == 3000 && res_c.gaps == 1 && res_c.bad == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* ---- across two network namespaces joined by a veth pair ---- */

static int ns_contact_child(struct kid *k, void *arg)
{
    struct cx_netns_pair *p = arg;
    char listen[64];
    snprintf(listen, sizeof listen, "tcp://%s:0", p->ip[0]);
    if (cx_netns_enter(p->ns[0]) < 0)
        KID_FAIL(2, "enter %s", p->ns[0]);
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = listen}, &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                       &ch) < 0 ||
        cx_chan_source(ch, f2, &s) < 0)
        KID_FAIL(3, "setup");
    put_str(k->wr, cx_chan_id(ch));
    if (cx_chan_wait_members(ch, 1, 1, 10000) < 0)
        KID_FAIL(4, "no sink");
    if (submit_rd2(s, 1, 5000, 5000) < 0)
        KID_FAIL(5, "submit");
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    put(k->wr, &st, sizeof st); /* the parent checks which link reached the other namespace */
    return kid_bye(k, ctx);
}

/* Two processes on this host: the link is shm, observable per peer and in the stats; a
 * runtime made with tcp_only (in this process) reaches the same source over tcp; both get
 * every event in order. */
static int addr_child(struct kid *k, void *arg)
{
    (void)arg;
    struct cx_chan_ctx *ctx;
    struct rec r;
    rec_init(&r, REC_RD2);
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0)
        KID_FAIL(3, "ctx");
    put_str(k->wr, cx_chan_ctx_addr(ctx));
    if (kid_open(k, ctx, &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = reg(rd2_d)}, on_rec, &r, &snk) < 0)
        KID_FAIL(4, "open and sink");
    put_str(k->wr, "ready");
    rec_wait(&r, 2000, 15000);
    struct result res;
    rec_result(&r, &res);
    put(k->wr, &res, sizeof res);
    return kid_bye(k, ctx);
}

CX_TEST(same_host_processes_use_shm_and_tcp_only_opts_out)
{
    const long N = 2000;
    struct kid kid;
    CK(spawn(&kid, addr_child, NULL) == 0);
    char kaddr[128];
    CK(get_str(kid.rd, kaddr, sizeof kaddr, 10000) == 0);
    const struct cx_format *f2 = reg(rd2_d);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    struct cx_chan_ctx *tcp_ctx = NULL;
    struct cx_chan *ch, *ch2 = NULL;
    struct cx_chan_source *s;
    struct cx_chan_sink *k2;
    struct rec loc;
    rec_init(&loc, REC_RD2);
    CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE},
                      &ch) == 0);
    CK(cx_chan_source(ch, f2, &s) == 0);
    CK(put_str(kid.wr, cx_chan_id(ch)) == 0 && kid_ready(&kid));
    int ok = cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP, .tcp_only = 1},
                                &tcp_ctx) == 0 &&
             cx_chan_open(tcp_ctx, cx_chan_id(ch), 5000, &ch2) == 0 &&
             cx_chan_sink(ch2, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &loc, &k2) == 0 &&
             cx_chan_wait_members(ch, 1, 2, 5000) == 0;
    ok = ok && submit_rd2(s, 1, N, 5000) == 0;
    struct result res = {0};
    ok = ok && get(kid.rd, &res, sizeof res, 15000) == sizeof res && rec_wait(&loc, N, 5000) == N;
    char kl[16] = "", tl[16] = "", none[16] = "";
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    int rk = cx_chan_ctx_link(test_ctx, kaddr, kl, sizeof kl);
    int rt = tcp_ctx ? cx_chan_ctx_link(test_ctx, cx_chan_ctx_addr(tcp_ctx), tl, sizeof tl) : -1;
    int rn = cx_chan_ctx_link(test_ctx, "tcp://127.0.0.1:1", none, sizeof none);
    fprintf(stderr, "  links: child %s, tcp_only runtime %s; sinks over shm %u, over tcp %u\n",
            kl, tl, st.shm_sinks, st.net_sinks);
    put_str(kid.wr, "bye");
    cx_chan_close(ch2);
    cx_chan_ctx_destroy(tcp_ctx);
    CK(ok);
    CK(rk == 0 && strcmp(kl, "shm") == 0);
    CK(rt == 0 && strcmp(tl, "tcp") == 0);
    CK(rn == -ENOENT);
    CK(st.shm_sinks == 1 && st.net_sinks == 1);
    CK(res.n == N && res.bad == 0 && res.gaps == 0 && loc.bad == 0 && loc.gaps == 0);
    CK(reap(&kid, 5000) == 0);
    cx_chan_close(ch);
    cleanup_all();
}

/* The runtime links over the driver of the address it listens on: two runtimes told to
 * listen on ucx:// (shm off) carry a reliable stream over ucx, which cx_chan_ctx_link names. */
CX_TEST(runtimes_listening_on_ucx_link_over_ucx)
{
#ifndef CX_HAVE_UCX
    CX_SKIP("UCX not built in (pkg-config ucx not found: install libucx-dev)");
#else
    ucx_test_env(); /* as the ucx driver's tests: loopback only */
    const long N = 2000;
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan_ctx *a = NULL, *b = NULL;
    struct cx_chan *ch = NULL, *ch2 = NULL;
    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct rec got;
    rec_init(&got, REC_RD2);
    struct cx_chan_ctx_opts o = {.listen = "ucx://127.0.0.1:0", .tcp_only = 1};
    int ok = cx_chan_ctx_create(&o, &a) == 0 && cx_chan_ctx_create(&o, &b) == 0 &&
             cx_chan_create(a, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE}, &ch) == 0 &&
             cx_chan_source(ch, f2, &s) == 0 && cx_chan_open(b, cx_chan_id(ch), 5000, &ch2) == 0 &&
             cx_chan_sink(ch2, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &got, &k) == 0 &&
             cx_chan_wait_members(ch, 1, 1, 5000) == 0;
    if (!ok)
        fprintf(stderr, "  set-up: %s\n", cx_errmsg());
    ok = ok && submit_rd2(s, 1, N, 5000) == 0;
    ok = ok && rec_wait(&got, N, 10000) == N;
    char link[16] = "";
    int rl = ok ? cx_chan_ctx_link(a, cx_chan_ctx_addr(b), link, sizeof link) : -1;
    struct cx_chan_stats st = {0};
    if (ch)
        cx_chan_stats(ch, &st);
    fprintf(stderr, "  %s -> %s: link %s, %ld events\n", a ? cx_chan_ctx_addr(a) : "?",
            b ? cx_chan_ctx_addr(b) : "?", link, (long)got.n);
    if (ch2)
        cx_chan_close(ch2);
    if (ch)
        cx_chan_close(ch);
    cx_chan_ctx_destroy(b);
    cx_chan_ctx_destroy(a);
    CK(ok);
    CK(rl == 0 && strcmp(link, "ucx") == 0);
    CK(st.net_sinks == 1 && st.shm_sinks == 0 && st.sent_shm == 0);
    CK(got.bad == 0 && got.gaps == 0 && got.misorder == 0);
#endif
}

#ifdef CX_HAVE_TLS
/* A runtime listening on scheme while one peer sits on its port saying nothing and another
 * started a handshake it never finishes: a second runtime opens a channel there and N
 * events arrive while both are still connected (so well before their handshake deadline,
 * CONFLUX_HANDSHAKE_MS); both are closed at the deadline, each with a line in the log
 * (stderr, captured here). 0, or -1 with the failed checks printed. */
static int hostile_over(const char *scheme)
{
    enum { HS_MS = 4000, N = 500 };
    char dir[64] = "/tmp/cxchan-hostile-XXXXXX", log[128], listen[64];
    if (tc_env_up(dir) < 0)
        return -1;
    snprintf(log, sizeof log, "%s/runtime.log", dir);
    char listen_b[64];
    if (strcmp(scheme, "shm") == 0) { /* abstract sockets: one name per runtime */
        snprintf(listen, sizeof listen, "shm://@cxchan-hostile-a-%d", (int)getpid());
        snprintf(listen_b, sizeof listen_b, "shm://@cxchan-hostile-b-%d", (int)getpid());
    } else {
        snprintf(listen, sizeof listen, "%s://127.0.0.1:0", scheme);
        snprintf(listen_b, sizeof listen_b, "%s", listen);
    }
    int lf = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), saved = dup(2);
    if (lf < 0 || saved < 0 || dup2(lf, 2) != 2)
        return -1;
    char hs[16];
    snprintf(hs, sizeof hs, "%d", HS_MS);
    setenv("CONFLUX_HANDSHAKE_MS", hs, 1);
    const struct cx_format *f2 = reg(rd2_d);
    struct cx_chan_ctx *a = NULL, *b = NULL;
    struct cx_chan *ch = NULL, *ch2 = NULL;
    struct cx_chan_source *s;
    struct cx_chan_sink *k;
    struct rec got;
    rec_init(&got, REC_RD2);
    struct cx_chan_ctx_opts o = {.listen = listen, .tcp_only = 1},
                            ob = {.listen = listen_b, .tcp_only = 1};
    int made = cx_chan_ctx_create(&o, &a) == 0;
    int silent = made ? hp_connect(cx_chan_ctx_addr(a)) : -1;
    int partial = made ? hp_connect(cx_chan_ctx_addr(a)) : -1;
    int sent = partial >= 0 && hp_partial_handshake(partial, scheme) == 0;
    double t0 = hp_now_ms();
    int ok = made && cx_chan_ctx_create(&ob, &b) == 0 &&
             cx_chan_create(a, &(struct cx_chan_opts){.format = f2, .mode = CX_CHAN_RELIABLE}, &ch) == 0 &&
             cx_chan_source(ch, f2, &s) == 0 && cx_chan_open(b, cx_chan_id(ch), 10000, &ch2) == 0 &&
             cx_chan_sink(ch2, &(struct cx_chan_sink_opts){.format = f2}, on_rec, &got, &k) == 0 &&
             cx_chan_wait_members(ch, 1, 1, 10000) == 0;
    if (!ok)
        fprintf(stderr, "  set-up: %s\n", cx_errmsg());
    ok = ok && submit_rd2(s, 1, N, 10000) == 0 && rec_wait(&got, N, 10000) == N;
    double ms = hp_now_ms() - t0;
    int silent_open = silent >= 0 && !hp_closed_by_server(silent, 0);
    int partial_open = partial >= 0 && !hp_closed_by_server(partial, 0);
    int silent_closed = silent >= 0 && hp_closed_by_server(silent, HS_MS + 10000);
    int partial_closed = partial >= 0 && hp_closed_by_server(partial, HS_MS + 10000);
    unsetenv("CONFLUX_HANDSHAKE_MS");
    if (ch2)
        cx_chan_close(ch2);
    if (ch)
        cx_chan_close(ch);
    cx_chan_ctx_destroy(b);
    cx_chan_ctx_destroy(a);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    ssize_t n = pread(lf, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(lf);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "conflux channel: dropped a connection before its hello"));
         p++)
        lines++;
    fprintf(stderr, "  %s: %ld events in %.0f ms with a silent and a partial peer connected "
            "(still open: %d, %d; deadline %d ms); log:\n%s", scheme, (long)got.n, ms,
            silent_open, partial_open, HS_MS, text);
    close(silent);
    close(partial);
    tc_env_down(dir);
    struct { int ok; const char *what; } checks[] = {
        {made && silent >= 0 && sent, "set-up"},
        {ok, "the events arrived"},
        {silent_open && partial_open, "both hostile peers still connected then"},
        {silent_closed && partial_closed, "both closed at the deadline"},
        {lines == 2 && strstr(text, strcmp(scheme, "tcp") ? "handshake not done within" : "no hello within"),
         "two log lines"},
        {got.bad == 0 && got.gaps == 0 && got.misorder == 0, "events intact and in order"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++)
        if (!checks[i].ok) {
            fprintf(stderr, "  check failed: %s\n", checks[i].what);
            bad = -1;
        }
    return bad;
}
#endif

CX_TEST(tls_silent_and_partial_peers_do_not_hold_the_runtime)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (libssl-dev absent)");
#else
    CK(hostile_over("tls") == 0);
#endif
}

CX_TEST(tcp_silent_and_half_frame_peers_do_not_hold_the_runtime)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (the test's certificates need OpenSSL)");
#else
    CK(hostile_over("tcp") == 0);
#endif
}

CX_TEST(shm_silent_peer_does_not_hold_the_runtime)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (the test's certificates need OpenSSL)");
#else
    CK(hostile_over("shm") == 0);
#endif
}

CX_TEST(ucx_silent_and_partial_peers_do_not_hold_the_runtime)
{
#if !defined(CX_HAVE_UCX) || !defined(CX_HAVE_TLS)
    CX_SKIP("built without UCX or TLS (the test's certificates need OpenSSL)");
#else
    ucx_test_env(); /* as the ucx driver's tests: loopback only */
    CK(hostile_over("ucx") == 0);
#endif
}

/* Fabrics: five runtimes (shm off, so every link is a network link): A, B and E in
 * fabric-a, C in fabric-b, D in none. Channel 1 (contact A, source A): B, C and D open it
 * (each dials A: B asks and upgrades to ucx, C asks and keeps tcp, D does not ask) and
 * sink it. Channel 2 (contact D): sinks at C and E, a source at B, which has no link to
 * either yet: its progress thread hands both dials to dial threads, which reach E over ucx
 * and C over tcp. Every event arrives in order; stats and cx_chan_ctx_link say which link
 * carried it. Before that: bad fabric names fail ctx create with -EINVAL, and a peer that
 * never answers the question is used over tcp after 2 s. */
CX_TEST(runtimes_in_one_fabric_link_over_ucx_others_over_tcp)
{
#ifndef CX_HAVE_UCX
    CX_SKIP("UCX not built in (pkg-config ucx not found: install libucx-dev)");
#else
    ucx_test_env();
    char longname[300];
    memset(longname, 'f', 254);
    longname[254] = '\0';
    const char *bad[] = {"   ", "fabric a", "a/b", longname};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cx_chan_ctx *x = NULL;
        int rc = cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP, .tcp_only = 1,
                                                               .fabric = bad[i]}, &x);
        fprintf(stderr, "  fabric '%.24s': %d %s\n", bad[i], rc, rc < 0 ? cx_errmsg() : "");
        cx_chan_ctx_destroy(x);
        CK(rc == -EINVAL && strstr(cx_errmsg(), "fabric"));
    }
    /* a peer that never answers the question (a listener nobody serves): tcp after 2 s */
    const struct cx_driver_ops *lops;
    struct cx_listener *mute = NULL;
    struct cx_chan_ctx *x = NULL;
    struct cx_chan *xc = NULL;
    char mid[160], mlink[16] = "";
    CK(cx_listen(LOOP, &lops, &mute) == 0);
    snprintf(mid, sizeof mid, "cx1:%s/1", lops->listener_addr(mute));
    long long t0 = now_ms();
    int orc = -1, lrc = -1;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP, .tcp_only = 1,
                                                      .fabric = "fabric-a"}, &x) == 0) {
        orc = cx_chan_open(x, mid, 1000, &xc);
        lrc = cx_chan_ctx_link(x, lops->listener_addr(mute), mlink, sizeof mlink);
    }
    long long waited = now_ms() - t0;
    fprintf(stderr, "  a silent peer: open %d after %lld ms, link %s\n", orc, waited, mlink);
    cx_chan_ctx_destroy(x);
    lops->listener_close(mute);
    CK(orc == -ETIMEDOUT && lrc == 0 && strcmp(mlink, "tcp") == 0 && waited >= 2000);

    const long N = 3000;
    const struct cx_format *f2 = reg(rd2_d);
    enum { A, B, C, D, E, NR };
    const char *fab[NR] = {" fabric-a ", "fabric-a", "fabric-b", NULL, "fabric-a"};
    struct cx_chan_ctx *c[NR] = {NULL};
    struct cx_chan *ch[NR] = {NULL}, *ch2[NR] = {NULL};
    struct cx_chan_source *s = NULL, *s2 = NULL;
    struct cx_chan_sink *k;
    struct rec got[NR], got2[NR];
    int ok = 1;
    for (int i = 0; i < NR; i++) {
        rec_init(&got[i], REC_RD2);
        rec_init(&got2[i], REC_RD2);
        ok = ok && cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP, .tcp_only = 1,
                                                                 .fabric = fab[i]}, &c[i]) == 0;
    }
    struct cx_chan_opts co = {.format = f2, .mode = CX_CHAN_RELIABLE};
    struct cx_chan_sink_opts ko = {.format = f2};
    ok = ok && cx_chan_create(c[A], &co, &ch[A]) == 0 && cx_chan_source(ch[A], f2, &s) == 0;
    for (int i = B; ok && i <= D; i++)
        ok = cx_chan_open(c[i], cx_chan_id(ch[A]), 5000, &ch[i]) == 0 &&
             cx_chan_sink(ch[i], &ko, on_rec, &got[i], &k) == 0;
    ok = ok && cx_chan_create(c[D], &co, &ch2[D]) == 0 &&
         cx_chan_open(c[C], cx_chan_id(ch2[D]), 5000, &ch2[C]) == 0 &&
         cx_chan_sink(ch2[C], &ko, on_rec, &got2[C], &k) == 0 &&
         cx_chan_open(c[E], cx_chan_id(ch2[D]), 5000, &ch2[E]) == 0 &&
         cx_chan_sink(ch2[E], &ko, on_rec, &got2[E], &k) == 0 &&
         cx_chan_open(c[B], cx_chan_id(ch2[D]), 5000, &ch2[B]) == 0 &&
         cx_chan_source(ch2[B], f2, &s2) == 0 &&
         cx_chan_wait_members(ch[A], 1, 3, 10000) == 0 && cx_chan_wait_members(ch2[B], 1, 2, 10000) == 0;
    if (!ok)
        fprintf(stderr, "  set-up: %s\n", cx_errmsg());
    for (long i = 1; ok && i <= N; i++) {
        struct rd2 e;
        rd2_make(&e, i);
        ok = cx_chan_submit_wait(s, &e, 10000) == 0 && cx_chan_submit_wait(s2, &e, 10000) == 0;
    }
    for (int i = B; ok && i <= D; i++)
        ok = rec_wait(&got[i], N, 20000) == N;
    ok = ok && rec_wait(&got2[C], N, 20000) == N && rec_wait(&got2[E], N, 20000) == N;
    char link[NR][16] = {""}, l2[NR][16] = {""};
    for (int i = B; ok && i <= D; i++)
        cx_chan_ctx_link(c[A], cx_chan_ctx_addr(c[i]), link[i], sizeof link[i]);
    if (ok) {
        cx_chan_ctx_link(c[B], cx_chan_ctx_addr(c[C]), l2[C], sizeof l2[C]);
        cx_chan_ctx_link(c[B], cx_chan_ctx_addr(c[E]), l2[E], sizeof l2[E]);
    }
    struct cx_chan_stats st = {0}, st2 = {0};
    if (ch[A])
        cx_chan_stats(ch[A], &st);
    if (ch2[B])
        cx_chan_stats(ch2[B], &st2);
    fprintf(stderr, "  A (fabric '%s', ucx %s) -> B %s, C (fabric-b) %s, D (none) %s; "
                    "B -> E %s, C %s (dialed from the progress thread)\n"
                    "  A sent %llu (ucx %llu), sinks over ucx %u of %u; B sent %llu (ucx %llu), "
                    "sinks over ucx %u of %u\n",
            c[A] ? cx_chan_ctx_fabric(c[A]) : "?", c[A] ? cx_chan_ctx_fabric_addr(c[A]) : "?",
            link[B], link[C], link[D], l2[E], l2[C], (unsigned long long)st.sent,
            (unsigned long long)st.sent_ucx, st.ucx_sinks, st.net_sinks,
            (unsigned long long)st2.sent, (unsigned long long)st2.sent_ucx, st2.ucx_sinks,
            st2.net_sinks);
    char fa[64], ua[128], ud[128];
    snprintf(fa, sizeof fa, "%s", c[A] ? cx_chan_ctx_fabric(c[A]) : "");
    snprintf(ua, sizeof ua, "%s", c[A] ? cx_chan_ctx_fabric_addr(c[A]) : "");
    snprintf(ud, sizeof ud, "%s", c[D] ? cx_chan_ctx_fabric_addr(c[D]) : "x");
    for (int i = NR - 1; i >= 0; i--) {
        cx_chan_close(ch2[i]);
        cx_chan_close(ch[i]);
    }
    for (int i = NR - 1; i >= 0; i--)
        cx_chan_ctx_destroy(c[i]);
    CK(ok);
    CK(strcmp(fa, "fabric-a") == 0 && strncmp(ua, "ucx://127.0.0.1:", 16) == 0 && ud[0] == '\0');
    CK(strcmp(link[B], "ucx") == 0 && strcmp(link[C], "tcp") == 0 && strcmp(link[D], "tcp") == 0);
    CK(strcmp(l2[E], "ucx") == 0 && strcmp(l2[C], "tcp") == 0);
    CK(st.net_sinks == 3 && st.ucx_sinks == 1 && st.shm_sinks == 0);
    CK(st.sent == 3 * (uint64_t)N && st.sent_ucx == (uint64_t)N && st.sent_shm == 0);
    CK(st2.net_sinks == 2 && st2.ucx_sinks == 1);
    CK(st2.sent == 2 * (uint64_t)N && st2.sent_ucx == (uint64_t)N);
    for (int i = B; i <= D; i++)
        CK(got[i].bad == 0 && got[i].gaps == 0 && got[i].misorder == 0);
    CK(got2[C].bad == 0 && got2[C].gaps == 0 && got2[E].bad == 0 && got2[E].gaps == 0);
#endif
}

CX_TEST(across_two_network_namespaces_over_veth)
{
    const char *why = cx_netns_unavailable();
    if (why)
        CX_SKIP("network namespaces unavailable: %s", why);
    struct cx_netns_pair p;
    CK(cx_netns_pair_create("cxchan", &p) == 0);
    char listen_b[64];
    snprintf(listen_b, sizeof listen_b, "tcp://%s:0", p.ip[1]);
    struct sink_job job = {.kind = REC_RD2, .expect = 5000, .stall_at = -1, .netns = p.ns[1],
                           .listen = listen_b};
    struct kid kids[2];
    int ok = spawn(&kids[0], ns_contact_child, &p) == 0 && spawn(&kids[1], sink_child, &job) == 0;
    char id[256] = "";
    struct result res = {0};
    struct cx_chan_stats st = {0};
    ok = ok && get_str(kids[0].rd, id, sizeof id, 10000) == 0 &&
         put_str(kids[1].wr, id) == 0 && kid_ready(&kids[1]) &&
         get(kids[1].rd, &res, sizeof res, 15000) == sizeof res &&
         get(kids[0].rd, &st, sizeof st, 15000) == sizeof st;
    put_str(kids[0].wr, "bye");
    put_str(kids[1].wr, "bye");
    int rc0 = reap(&kids[0], 5000), rc1 = reap(&kids[1], 5000);
    cx_netns_pair_destroy(&p); /* always, before any check can return */
    fprintf(stderr, "  netns %s (%s) -> %s (%s): channel %s, %ld events, sinks over shm %u, "
                    "over tcp %u\n", p.ns[0], p.ip[0], p.ns[1], p.ip[1], id, res.n,
            st.shm_sinks, st.net_sinks);
    CK(ok && rc0 == 0 && rc1 == 0);
    CK(st.net_sinks == 1 && st.shm_sinks == 0); /* one host, two namespaces: no shm rendezvous */
    CK(st.sent > 0 && st.sent_shm == 0);
    CK(strstr(id, p.ip[0]) != NULL);
    CK(res.n == 5000 && res.bad == 0 && res.gaps == 0);
}

CX_TEST_MAIN()
