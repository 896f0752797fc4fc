/* The channel fast paths across real processes over a real shm link (README, "Fast
 * paths"): submits from several threads on the submit fast path keep each source's order;
 * large events cross the ring intact; a sink process that adds a filtered sink and a sink
 * of another format makes both fast paths fall back, and closing them brings them back.
 * Children are forked before the parent makes its runtime.
 * Run: build/test/channel/channel_fast_test [name-substring]. */
#define _GNU_SOURCE
#include "channel/chan_test_util.h"

#include "common/cx_test.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#define NTHREADS 4
#define PER_THREAD 5000
#define ID_STRIDE 1000000 /* an event's id: thread * ID_STRIDE + its number in that thread */

/* ---- what a sink saw ---- */

struct seen {
    pthread_mutex_t m;
    long n, bad, misorder;         /* misorder: seq not increasing, or a thread's ids not */
    uint64_t last_seq;
    int64_t last_id[NTHREADS];
    uint32_t blob_n;               /* blob sinks: the size every event has */
};

struct seen_result {
    long n, bad, misorder;
    struct cx_chan_stats st;
};

static void seen_init(struct seen *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->m, NULL);
    for (int i = 0; i < NTHREADS; i++)
        s->last_id[i] = -1;
}

static long seen_count(struct seen *s)
{
    pthread_mutex_lock(&s->m);
    long n = s->n;
    pthread_mutex_unlock(&s->m);
    return n;
}

static long wait_count(struct seen *s, long want, int timeout_ms)
{
    return count_wait(&s->m, &s->n, want, timeout_ms);
}

/* rd2 events from the threads of one source: seq grows, and each thread's ids grow. */
static void on_rd2(void *arg, const struct cx_chan_event *ev)
{
    struct seen *s = arg;
    const struct rd2 *e = ev->data;
    int64_t t = e->id / ID_STRIDE;
    int ok = t >= 0 && t < NTHREADS && e->x == e->id * 0.5 && e->y == (double)-e->id;
    pthread_mutex_lock(&s->m);
    s->n++;
    s->bad += !ok;
    s->misorder += ev->seq <= s->last_seq;
    s->last_seq = ev->seq;
    if (ok) {
        s->misorder += e->id <= s->last_id[t];
        s->last_id[t] = e->id;
    }
    pthread_mutex_unlock(&s->m);
}

/* rd1 (an older subset): converted, not in place. */
static void on_rd1(void *arg, const struct cx_chan_event *ev)
{
    struct seen *s = arg;
    const struct rd1 *e = ev->data;
    pthread_mutex_lock(&s->m);
    s->n++;
    s->bad += !(e && e->x == e->id * 0.5);
    s->misorder += ev->seq <= s->last_seq;
    s->last_seq = ev->seq;
    pthread_mutex_unlock(&s->m);
}

/* Every byte of a blob: a function of the event and the position. */
static uint8_t blob_byte(int64_t k, size_t i) { return (uint8_t)(k * 131 + i * 7 + (i >> 12)); }

static void on_blob(void *arg, const struct cx_chan_event *ev)
{
    struct seen *s = arg;
    const struct blob *e = ev->data;
    int ok = e && e->n == s->blob_n && e->id == (int64_t)ev->seq;
    for (size_t i = 0; ok && i < e->n; i++)
        ok = e->data[i] == blob_byte(e->id, i);
    pthread_mutex_lock(&s->m);
    s->n++;
    s->bad += !ok;
    s->misorder += ev->seq <= s->last_seq;
    s->last_seq = ev->seq;
    pthread_mutex_unlock(&s->m);
}

/* ---- submit fast path: several threads on one source ---- */

struct sub_thread {
    struct cx_chan_source *src;
    pthread_barrier_t *start; /* all at once: the fast and the general path race */
    int t;
    int rc;
};

static void *submitter(void *arg)
{
    struct sub_thread *a = arg;
    pthread_barrier_wait(a->start);
    for (int i = 0; i < PER_THREAD && a->rc == 0; i++) {
        struct rd2 e;
        rd2_make(&e, (int64_t)a->t * ID_STRIDE + i);
        a->rc = cx_chan_submit_wait(a->src, &e, 15000);
    }
    return NULL;
}

/* The sink process: one rd2 sink; reports what it saw after `expect` events. */
static int rd2_sink_child(struct kid *k, void *arg)
{
    long expect = *(long *)arg;
    const struct cx_format *F = reg(rd2_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *snk;
    struct seen s;
    seen_init(&s);
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0)
        KID_FAIL(3, "ctx");
    if (kid_open(k, ctx, &ch) < 0)
        KID_FAIL(4, "open");
    if (cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F}, on_rd2, &s, &snk) < 0)
        KID_FAIL(5, "sink");
    put_str(k->wr, "ready");
    wait_count(&s, expect, 20000);
    struct seen_result r = {seen_count(&s), s.bad, s.misorder, {0}};
    cx_chan_stats(ch, &r.st);
    put(k->wr, &r, sizeof r);
    return kid_bye(k, ctx);
}

/* Until the source's process has its link to the sink (the first events would otherwise
 * wait in the queue for the connect: the general path, not what these tests look at). */
static int linked(struct cx_chan *ch)
{
    struct cx_chan_stats st;
    return stats_until(ch, st, st.shm_sinks == 1, 10000);
}

CX_TEST(fast_path_submits_from_four_threads_keep_each_sources_order)
{
    long expect = (long)NTHREADS * PER_THREAD;
    struct kid kid;
    CK(spawn(&kid, rd2_sink_child, &expect) == 0);
    const struct cx_format *F = reg(rd2_d);
    struct cx_chan *ch;
    struct cx_chan_source *src;
    CK(chan_for_kids(&kid, 1, F, &(struct cx_chan_opts){.format = F, .mode = CX_CHAN_RELIABLE,
                                                        .queue_limit = 64}, &ch, &src) == 0);
    CK(linked(ch));
    pthread_t th[NTHREADS];
    struct sub_thread a[NTHREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int t = 0; t < NTHREADS; t++) {
        a[t] = (struct sub_thread){src, &start, t, 0};
        CK(pthread_create(&th[t], NULL, submitter, &a[t]) == 0);
    }
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start);
    struct seen_result r = {0};
    int got = get(kid.rd, &r, sizeof r, 20000) == sizeof r;
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    put_str(kid.wr, "bye");
    int rc = reap(&kid, 5000);
    fprintf(stderr, "  %d threads x %d events: sink got %ld (bad %ld, out of order %ld); "
                    "sent %llu, on the fast path %llu; delivered without the lock %llu\n",
            NTHREADS, PER_THREAD, r.n, r.bad, r.misorder, (unsigned long long)st.sent,
            (unsigned long long)st.sent_fast, (unsigned long long)r.st.delivered_fast);
    for (int t = 0; t < NTHREADS; t++)
        CK(a[t].rc == 0);
    CK(got && rc == 0);
    CK(r.n == expect && r.bad == 0 && r.misorder == 0);
    CK(st.submitted == (uint64_t)expect && st.sent == (uint64_t)expect && st.shm_sinks == 1);
    CK(st.sent_fast > 0);                    /* the fast path was taken ... */
    CK(r.st.delivered_fast > 0 && r.st.delivered == (uint64_t)expect);
    cx_chan_ctx_destroy(test_ctx);
    test_ctx = NULL;
}

/* ---- large events over shm ---- */

struct blob_job {
    uint32_t n;
    long count;
};

static int blob_sink_child(struct kid *k, void *arg)
{
    struct blob_job *jobs = arg; /* three sizes, one channel each, in turn */
    const struct cx_format *F = reg(blob_d);
    struct cx_chan_ctx *ctx;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0)
        KID_FAIL(3, "ctx");
    for (int j = 0; j < 3; j++) {
        struct cx_chan *ch;
        struct cx_chan_sink *snk;
        struct seen s;
        seen_init(&s);
        s.blob_n = jobs[j].n;
        if (kid_open(k, ctx, &ch) < 0)
            KID_FAIL(4, "open");
        if (cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F}, on_blob, &s, &snk) < 0)
            KID_FAIL(5, "sink");
        put_str(k->wr, "ready");
        wait_count(&s, jobs[j].count, 20000);
        struct seen_result r = {seen_count(&s), s.bad, s.misorder, {0}};
        cx_chan_stats(ch, &r.st);
        put(k->wr, &r, sizeof r);
    }
    return kid_bye(k, ctx);
}

CX_TEST(large_events_cross_the_shm_ring_intact)
{
    /* 100 KB and 1 MB fit one ring record; 5 MB is more than half the 8 MiB ring: chunks */
    static struct blob_job jobs[3] = {{100000, 60}, {1000000, 20}, {5000000, 4}};
    struct kid kid;
    CK(spawn(&kid, blob_sink_child, jobs) == 0);
    const struct cx_format *F = reg(blob_d);
    CK(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) == 0);
    uint8_t *buf = malloc(5000000);
    CK(buf != NULL);
    for (int j = 0; j < 3; j++) {
        struct cx_chan *ch;
        struct cx_chan_source *src;
        CK(cx_chan_create(test_ctx, &(struct cx_chan_opts){.format = F, .mode = CX_CHAN_RELIABLE,
                                                           .queue_limit = 8}, &ch) == 0);
        CK(cx_chan_source(ch, F, &src) == 0);
        CK(put_str(kid.wr, cx_chan_id(ch)) == 0 && kid_says(&kid, "ready", 15000));
        CK(cx_chan_wait_members(ch, 1, 1, 10000) == 0);
        for (long k = 1; k <= jobs[j].count; k++) {
            for (size_t i = 0; i < jobs[j].n; i++)
                buf[i] = blob_byte(k, i);
            struct blob e = {k, jobs[j].n, buf};
            CK(cx_chan_submit_wait(src, &e, 15000) == 0);
        }
        struct seen_result r = {0};
        CK(get(kid.rd, &r, sizeof r, 20000) == sizeof r);
        struct cx_chan_stats st;
        cx_chan_stats(ch, &st);
        fprintf(stderr, "  %u-byte events: %ld of %ld intact (bad %ld, out of order %ld), "
                        "over shm %llu, fast %llu\n", jobs[j].n, r.n - r.bad, jobs[j].count,
                r.bad, r.misorder, (unsigned long long)st.sent_shm,
                (unsigned long long)st.sent_fast);
        CK(r.n == jobs[j].count && r.bad == 0 && r.misorder == 0);
        CK(st.sent_shm == (uint64_t)jobs[j].count);
    }
    free(buf);
    put_str(kid.wr, "bye");
    CK(reap(&kid, 5000) == 0);
    cx_chan_ctx_destroy(test_ctx);
    test_ctx = NULL;
}

/* ---- falling back: a filter and another format join, then leave ---- */

static int fallback_sink_child(struct kid *k, void *arg)
{
    (void)arg;
    const struct cx_format *F2 = reg(rd2_d), *F1 = reg(rd1_d);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *plain, *older, *filtered;
    struct seen sp, so, sf;
    seen_init(&sp), seen_init(&so), seen_init(&sf);
    long want;
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0)
        KID_FAIL(3, "ctx");
    if (kid_open(k, ctx, &ch) < 0)
        KID_FAIL(4, "open");
    if (cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F2}, on_rd2, &sp, &plain) < 0)
        KID_FAIL(5, "sink");
    put_str(k->wr, "ready");
    /* phase 1 ends: add an older-format sink (the same endpoint) and a filtered one */
    if (get(k->rd, &want, sizeof want, 15000) != sizeof want || wait_count(&sp, want, 15000) < want)
        KID_FAIL(6, "phase 1: %ld of %ld", seen_count(&sp), want);
    if (cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F1}, on_rd1, &so, &older) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F2, .filter = "id % 2 == 0"},
                     on_rd2, &sf, &filtered) < 0)
        KID_FAIL(7, "more sinks");
    struct cx_chan_stats st1;
    cx_chan_stats(ch, &st1);
    put_str(k->wr, "added");
    /* phase 2 ends: close both, back to one sink */
    long two[2]; /* the total so far, and how many of them came in phase 2 */
    if (get(k->rd, two, sizeof two, 15000) != sizeof two || wait_count(&sp, two[0], 15000) < two[0])
        KID_FAIL(8, "phase 2: %ld of %ld", seen_count(&sp), two[0]);
    wait_count(&so, two[1], 15000); /* the other sinks' last events may come a little later */
    wait_count(&sf, two[1] / 2, 15000);
    struct cx_chan_stats st2;
    cx_chan_stats(ch, &st2);
    struct seen_result ro = {seen_count(&so), so.bad, so.misorder, st2};
    struct seen_result rf = {seen_count(&sf), sf.bad, sf.misorder, st1};
    cx_chan_sink_close(older);
    cx_chan_sink_close(filtered);
    put(k->wr, &ro, sizeof ro);
    put(k->wr, &rf, sizeof rf);
    if (get(k->rd, &want, sizeof want, 15000) != sizeof want)
        KID_FAIL(9, "no phase 3 count");
    wait_count(&sp, want, 15000);
    struct seen_result rp = {seen_count(&sp), sp.bad, sp.misorder, {0}};
    cx_chan_stats(ch, &rp.st);
    put(k->wr, &rp, sizeof rp);
    return kid_bye(k, ctx);
}

/* n events with ids from *next (one source, this thread). */
static int send_rd2(struct cx_chan_source *src, int64_t *next, long n)
{
    int64_t first = *next;
    *next += n;
    return submit_rd2(src, first, *next - 1, 15000) < 0 ? -1 : 0;
}

/* Batches of n until the fast path carried some (a link lock held by a preempted progress
 * thread sends a whole batch the general way on a loaded machine), at most 20. */
static int send_until_fast(struct cx_chan *ch, struct cx_chan_source *src, int64_t *next, long n)
{
    struct cx_chan_stats a, b;
    cx_chan_stats(ch, &a);
    for (int i = 0; i < 20; i++) {
        if (send_rd2(src, next, n) < 0)
            return -1;
        cx_chan_stats(ch, &b);
        if (b.sent_fast > a.sent_fast)
            return 0;
    }
    return -1;
}

CX_TEST(fast_paths_fall_back_when_a_filter_or_another_format_joins)
{
    struct kid kid;
    CK(spawn(&kid, fallback_sink_child, NULL) == 0);
    const struct cx_format *F = reg(rd2_d);
    struct cx_chan *ch;
    struct cx_chan_source *src;
    CK(chan_for_kids(&kid, 1, F, &(struct cx_chan_opts){.format = F, .mode = CX_CHAN_RELIABLE},
                     &ch, &src) == 0);
    CK(linked(ch));
    const long N = 2000;
    int64_t next = 0;
    struct cx_chan_stats s0, s1, s2, s3;
    /* phase 1: one sink, same format: both fast paths */
    CK(send_until_fast(ch, src, &next, N) == 0);
    cx_chan_stats(ch, &s0);
    long phase1 = (long)next;
    CK(put(kid.wr, &phase1, sizeof phase1) == 0 && kid_says(&kid, "added", 15000));
    /* phase 2: the filtered sink is a second target at the source (general path); the sink
     * process has two sinks on the plain endpoint (general receive path) */
    CK(cx_chan_wait_members(ch, 1, 2, 10000) == 0);
    CK(send_rd2(src, &next, N) == 0);
    cx_chan_stats(ch, &s1);
    long two[2] = {(long)next, N};
    CK(put(kid.wr, two, sizeof two) == 0);
    struct seen_result ro = {0}, rf = {0}, rp = {0};
    CK(get(kid.rd, &ro, sizeof ro, 20000) == sizeof ro);
    CK(get(kid.rd, &rf, sizeof rf, 20000) == sizeof rf);
    /* phase 3: both closed; once the source knows, the fast path comes back */
    CK(stats_until(ch, s2, s2.sinks == 1, 10000));
    CK(send_until_fast(ch, src, &next, N) == 0);
    cx_chan_stats(ch, &s3);
    long total = (long)next;
    CK(put(kid.wr, &total, sizeof total) == 0);
    CK(get(kid.rd, &rp, sizeof rp, 20000) == sizeof rp);
    put_str(kid.wr, "bye");
    int rc = reap(&kid, 5000);
    fprintf(stderr, "  fast sends: phase 1 %llu of %ld, phase 2 %llu of %ld, phase 3 %llu of "
                    "%ld; sink: plain %ld (bad %ld, out of order %ld), older format %ld, "
                    "filtered %ld; delivered without the lock: %llu in phases 1-2, %llu in all\n",
            (unsigned long long)s0.sent_fast, phase1,
            (unsigned long long)(s1.sent_fast - s0.sent_fast), N,
            (unsigned long long)(s3.sent_fast - s1.sent_fast), total - phase1 - N, rp.n, rp.bad,
            rp.misorder, ro.n, rf.n, (unsigned long long)ro.st.delivered_fast,
            (unsigned long long)rp.st.delivered_fast);
    CK(rc == 0);
    CK(s1.sent_fast == s0.sent_fast);       /* phase 2: two targets, never the fast path */
    CK(s1.filtered == (uint64_t)N / 2);     /* the filter ran at the source */
    CK(s3.sent_fast > s1.sent_fast);        /* phase 3: back */
    CK(rp.n == total && rp.bad == 0 && rp.misorder == 0);
    CK(ro.n == N && ro.bad == 0 && ro.misorder == 0); /* converted, every phase-2 event */
    CK(rf.n == N / 2 && rf.bad == 0 && rf.misorder == 0);
    /* the receive fast path: on in phase 1; in phase 2 off on the plain endpoint (two sinks),
     * on for the filtered sink (alone on its own); on again in phase 3 */
    CK(ro.st.delivered_fast == (uint64_t)(phase1 + N / 2));
    CK(rp.st.delivered_fast > ro.st.delivered_fast);
    cx_chan_ctx_destroy(test_ctx);
    test_ctx = NULL;
}

CX_TEST_MAIN()
