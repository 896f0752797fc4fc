/* Helpers for channel_test.c and channel_fast_test.c: the test formats, forked processes
 * with pipes to and from the parent, the steps both sides of a test with child processes
 * take, waiting for counts and stats, and a failure path that kills every child.
 * Header-only (test code). */
#ifndef CHAN_TEST_UTIL_H
#define CHAN_TEST_UTIL_H

#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOOP "tcp://127.0.0.1:0" /* every runtime of these tests listens on loopback */

/* ---- formats: one "reading" in three versions, and a big event ---- */
struct rd2 { int64_t id; double x, y; };                   /* the channel's format */
struct rd3 { int64_t id; double x, y, z; char *name; };    /* a newer source: superset */
struct rd1 { double x; int32_t id; };                      /* an older sink: subset, moved, narrower */
struct blob { int64_t id; uint32_t n; uint8_t *data; };     /* large events (queues fill) */

#define F(s, name, type, size) {#name, type, size, offsetof(struct s, name), NULL}
static const struct cx_field rd2_f[] = {F(rd2, id, "int64", 8), F(rd2, x, "double", 8),
                                        F(rd2, y, "double", 8), {NULL}};
static const struct cx_field rd3_f[] = {F(rd3, id, "int64", 8), F(rd3, x, "double", 8),
                                        F(rd3, y, "double", 8), F(rd3, z, "double", 8),
                                        F(rd3, name, "string", sizeof(char *)), {NULL}};
static const struct cx_field rd1_f[] = {F(rd1, x, "double", 8), F(rd1, id, "int32", 4), {NULL}};
static const struct cx_field blob_f[] = {F(blob, id, "int64", 8), F(blob, n, "uint32", 4),
                                         F(blob, data, "uint8[n]", 1), {NULL}};
#undef F
static const struct cx_struct_decl rd2_d[] = {{"reading", rd2_f, sizeof(struct rd2)}, {NULL}};
static const struct cx_struct_decl rd3_d[] = {{"reading", rd3_f, sizeof(struct rd3)}, {NULL}};
static const struct cx_struct_decl rd1_d[] = {{"reading", rd1_f, sizeof(struct rd1)}, {NULL}};
static const struct cx_struct_decl blob_d[] = {{"blob", blob_f, sizeof(struct blob)}, {NULL}};

/* Registers a declaration (idempotent: the registry keeps the first). */
static inline const struct cx_format *reg(const struct cx_struct_decl *d)
{
    struct cx_format *f;
    const struct cx_format *c = NULL;
    if (cx_format_create(d, NULL, &f) < 0 || cx_format_registry_insert(f, &c) < 0)
        return NULL;
    return c;
}

static inline void rd2_make(struct rd2 *e, int64_t k) { *e = (struct rd2){k, k * 0.5, (double)-k}; }
static inline int rd2_ok(const struct rd2 *e, int64_t k)
{
    return e->id == k && e->x == k * 0.5 && e->y == (double)-k;
}
static inline void blob_make(struct blob *e, uint8_t *buf, uint32_t n, int64_t k)
{
    buf[0] = (uint8_t)k;
    buf[n - 1] = (uint8_t)(k * 7);
    *e = (struct blob){k, n, buf};
}
static inline int blob_ok(const struct blob *e, int64_t k, uint32_t n)
{
    return e->id == k && e->n == n && e->data[0] == (uint8_t)k && e->data[n - 1] == (uint8_t)(k * 7);
}

static inline long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* ---- child processes ---- */

/* In the parent, rd/wr talk to the child; in the child, to the parent. `go` is a second
 * pipe parent -> child, read by a child's handler that stalls until told to continue. */
struct kid {
    pid_t pid;
    int rd, wr, go;
};

#define MAX_KIDS 8
static struct kid *live_kids[MAX_KIDS];

/* Forks a child that runs fn(k, arg) and exits with its result. Every child dies by
 * SIGALRM after 25 s whatever happens, so a broken test cannot leave processes behind. */
static inline int spawn(struct kid *k, int (*fn)(struct kid *, void *), void *arg)
{
    int a[2], b[2], g[2];
    if (pipe(a) < 0 || pipe(b) < 0 || pipe(g) < 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(a[1]), close(b[0]), close(g[1]);
        alarm(25);
        struct kid self = {getpid(), a[0], b[1], g[0]};
        _exit(fn(&self, arg));
    }
    close(a[0]), close(b[1]), close(g[0]);
    *k = (struct kid){pid, b[0], a[1], g[1]};
    for (int i = 0; i < MAX_KIDS; i++)
        if (!live_kids[i]) {
            live_kids[i] = k;
            break;
        }
    return 0;
}

/* Length-prefixed messages on a pipe. */
static inline int put(int fd, const void *p, uint32_t n)
{
    if (write(fd, &n, 4) != 4)
        return -1;
    return n && write(fd, p, n) != (ssize_t)n ? -1 : 0;
}
static inline int read_full(int fd, void *p, size_t n, int timeout_ms)
{
    size_t got = 0;
    long long end = now_ms() + timeout_ms;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = (int)(end - now_ms());
        if (left <= 0 || poll(&pf, 1, left) <= 0)
            return -1;
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}
/* Returns the message length, or -1 on timeout / EOF / a message longer than cap. */
static inline int get(int fd, void *p, uint32_t cap, int timeout_ms)
{
    uint32_t n;
    if (read_full(fd, &n, 4, timeout_ms) < 0 || n > cap)
        return -1;
    return n && read_full(fd, p, n, timeout_ms) < 0 ? -1 : (int)n;
}
static inline int put_str(int fd, const char *s) { return put(fd, s, (uint32_t)strlen(s) + 1); }
static inline int get_str(int fd, char *s, uint32_t cap, int timeout_ms)
{
    int n = get(fd, s, cap - 1, timeout_ms);
    if (n < 0)
        return -1;
    s[n] = 0;
    return 0;
}

/* Waits for the child; kills it after timeout_ms. Its exit code, or 100 + the signal. */
static inline int reap(struct kid *k, int timeout_ms)
{
    int st = 0;
    long long end = now_ms() + timeout_ms;
    while (waitpid(k->pid, &st, WNOHANG) == 0) {
        if (now_ms() > end) {
            kill(k->pid, SIGKILL);
            waitpid(k->pid, &st, 0);
            break;
        }
        usleep(2000);
    }
    close(k->rd), close(k->wr), close(k->go);
    for (int i = 0; i < MAX_KIDS; i++)
        if (live_kids[i] == k)
            live_kids[i] = NULL;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

/* ---- the steps of a child and its parent ---- */

/* In a child: reads the channel id the parent sends and opens it in ctx. 0 or -1. */
static inline int kid_open(struct kid *k, struct cx_chan_ctx *ctx, struct cx_chan **ch)
{
    char id[256];
    return get_str(k->rd, id, sizeof id, 10000) < 0 || cx_chan_open(ctx, id, 5000, ch) < 0 ? -1 : 0;
}

/* In a child: stays until the parent's goodbye (the parent may still look at this
 * process's members), then ends its runtime. The child's exit code: 0. */
static inline int kid_bye(struct kid *k, struct cx_chan_ctx *ctx)
{
    char bye[16];
    get_str(k->rd, bye, sizeof bye, 15000);
    cx_chan_ctx_destroy(ctx);
    return 0;
}

/* In the parent: 1 when the child's next message is `what`. */
static inline int kid_says(struct kid *k, const char *what, int timeout_ms)
{
    char s[16];
    return get_str(k->rd, s, sizeof s, timeout_ms) == 0 && strcmp(s, what) == 0;
}

/* Submits rd2 events first..last (each may wait timeout_ms for room). 0 or the first error. */
static inline int submit_rd2(struct cx_chan_source *s, int64_t first, int64_t last, int timeout_ms)
{
    for (int64_t i = first; i <= last; i++) {
        struct rd2 e;
        rd2_make(&e, i);
        int rc = cx_chan_submit_wait(s, &e, timeout_ms);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Waits until the count *n (guarded by m) reaches want or timeout_ms passed; the last count. */
static inline long count_wait(pthread_mutex_t *m, const long *n, long want, int timeout_ms)
{
    long long end = now_ms() + timeout_ms;
    for (;;) {
        pthread_mutex_lock(m);
        long got = *n;
        pthread_mutex_unlock(m);
        if (got >= want || now_ms() >= end)
            return got;
        usleep(1000);
    }
}

/* Reads ch's stats into st until cond (an expression on st) holds or timeout_ms passed;
 * whether it held. The runtime applies joins, leaves and links on its progress thread. */
#define stats_until(ch, st, cond, timeout_ms)                                              \
    ({                                                                                     \
        long long end_ = now_ms() + (timeout_ms);                                          \
        int held_;                                                                         \
        while (cx_chan_stats((ch), &(st)), !(held_ = (cond)) && now_ms() < end_)            \
            usleep(1000);                                                                  \
        held_;                                                                             \
    })

/* The failure path of a test: no child and no runtime outlives it. */
static struct cx_chan_ctx *test_ctx;
static inline void cleanup_all(void)
{
    for (int i = 0; i < MAX_KIDS; i++)
        if (live_kids[i]) {
            kill(live_kids[i]->pid, SIGKILL);
            reap(live_kids[i], 1000);
        }
    cx_chan_ctx_destroy(test_ctx);
    test_ctx = NULL;
}

/* In the parent: its runtime (test_ctx), a channel made with co and a source of format f
 * on it; the channel's id sent to each of the n sink children, each answering "ready";
 * then the n sinks are members. 0 or -1. */
static inline int chan_for_kids(struct kid *kids, int n, const struct cx_format *f,
                                const struct cx_chan_opts *co, struct cx_chan **ch,
                                struct cx_chan_source **s)
{
    if (cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &test_ctx) < 0 ||
        cx_chan_create(test_ctx, co, ch) < 0 || cx_chan_source(*ch, f, s) < 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (put_str(kids[i].wr, cx_chan_id(*ch)) < 0 || !kid_says(&kids[i], "ready", 15000))
            return -1;
    return cx_chan_wait_members(*ch, 1, (unsigned)n, 10000) < 0 ? -1 : 0;
}

/* A check that cleans up before failing, and prints the last library error. */
#define CK(cond)                                                                           \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: check failed: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #cond, cx_errmsg());                                         \
            cleanup_all();                                                                 \
            *cx_failed = 1;                                                                \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* In a child: report a failure and exit code. */
#define KID_FAIL(code, ...)                                                                \
    do {                                                                                   \
        fprintf(stderr, "  child %d: ", (int)getpid());                                    \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, " (last error: %s)\n", cx_errmsg());                               \
        return code;                                                                       \
    } while (0)

#endif
