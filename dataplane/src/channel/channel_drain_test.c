/* A reliable source's runtime lingers at shutdown until its sinks confirmed its events
 * (cx_chan.h, cx_chan_ctx_destroy), in real processes: this binary exec'd again in the
 * roles `sink` and `source`, talking to the test over their stdin and stdout.
 *
 *   - eight sources each destroy their runtime (or close their source) right after their
 *     last submit and exit: the one sink gets every event exactly once, in order per source
 *     (half the sources over shm, half over tcp);
 *   - a source whose sink is stuck gives up after its linger and reports what was not
 *     delivered; one whose sink is killed meanwhile returns as soon as the link breaks,
 *     long before its linger. */
#define _GNU_SOURCE
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_format_registry.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define LOOP "tcp://127.0.0.1:0"
#define NSRC 8
#define NEV 3000

/* ---- the event: source number, its event number, a payload of n bytes ---- */

struct dev { int64_t src, k; uint32_t n; uint8_t *data; };
#define F(name, type, size) {#name, type, size, offsetof(struct dev, name), NULL}
static const struct cx_field dev_f[] = {F(src, "int64", 8), F(k, "int64", 8),
                                        F(n, "uint32", 4), F(data, "uint8[n]", 1), {NULL}};
#undef F
static const struct cx_struct_decl dev_d[] = {{"drain_event", dev_f, sizeof(struct dev)}, {NULL}};

static const struct cx_format *dev_fmt(void)
{
    struct cx_format *f;
    const struct cx_format *c = NULL;
    if (cx_format_create(dev_d, NULL, &f) < 0 || cx_format_registry_insert(f, &c) < 0)
        return NULL;
    return c;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Reads one line from fd within timeout_ms into s (no newline). 0, or -1. */
static int read_line(int fd, char *s, size_t cap, int timeout_ms)
{
    size_t n = 0;
    long long end = now_ms() + timeout_ms;
    while (n + 1 < cap) {
        struct pollfd pf = {fd, POLLIN, 0};
        int left = (int)(end - now_ms());
        if (left <= 0 || poll(&pf, 1, left) <= 0 || read(fd, s + n, 1) != 1)
            return -1;
        if (s[n] == '\n')
            break;
        n++;
    }
    s[n] = 0;
    return 0;
}

/* ---- roles ---- */

struct sink_state {
    pthread_mutex_t m;
    int stall;                  /* the handler blocks for good (a stuck sink) */
    long total, bad;
    int64_t next[NSRC];         /* the next event number expected from each source */
};

static void on_event(void *arg, const struct cx_chan_event *ev)
{
    struct sink_state *s = arg;
    const struct dev *e = ev->data;
    if (s->stall)
        for (;;)
            pause();
    pthread_mutex_lock(&s->m);
    if (e->src < 0 || e->src >= NSRC || e->k != s->next[e->src] + 1) {
        if (s->bad++ < 5)
            fprintf(stderr, "  sink: from source %lld event %lld, expected %lld\n",
                    (long long)e->src, (long long)e->k,
                    e->src >= 0 && e->src < NSRC ? (long long)s->next[e->src] + 1 : -1LL);
    } else {
        s->next[e->src] = e->k;
    }
    s->total++;
    pthread_mutex_unlock(&s->m);
}

/* sink <stall 0|1> <queue limit>: creates the reliable channel, says "id <id>", then on
 * stdin "count" answers "got <total> bad <out of order or duplicate>"; "bye" ends it. */
static int role_sink(int argc, char **argv)
{
    static struct sink_state st = {.m = PTHREAD_MUTEX_INITIALIZER};
    if (argc < 5)
        return 2;
    st.stall = atoi(argv[3]);
    const struct cx_format *f = dev_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    if (!f || cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = f, .mode = CX_CHAN_RELIABLE,
                                                    .queue_limit = (unsigned)atoi(argv[4])},
                       &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = f}, on_event, &st, &k) < 0) {
        fprintf(stderr, "  sink: %s\n", cx_errmsg());
        return 3;
    }
    printf("id %s\n", cx_chan_id(ch));
    fflush(stdout);
    char line[64];
    while (read_line(0, line, sizeof line, 60000) == 0 && strcmp(line, "bye") != 0) {
        pthread_mutex_lock(&st.m);
        printf("got %ld bad %ld\n", st.total, st.bad);
        pthread_mutex_unlock(&st.m);
        fflush(stdout);
    }
    _exit(0); /* a stuck handler never returns: no orderly destroy */
}

/* source <id> <number> <events> <payload bytes> <destroy|close>: submits events 1..N
 * (waiting for room), or with N = 0 until a sink queue is full (then says "full"); then at
 * once destroys its runtime, or closes its source and exits without destroying it, and
 * says "destroyed <ms> <cx_errcode> <cx_errmsg>". */
static int role_source(int argc, char **argv)
{
    if (argc < 8)
        return 2;
    int close_only = !strcmp(argv[7], "close");
    const struct cx_format *f = dev_fmt();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *s;
    if (!f || cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = LOOP}, &ctx) < 0 ||
        cx_chan_open(ctx, argv[3], 10000, &ch) < 0 || cx_chan_source(ch, f, &s) < 0 ||
        cx_chan_wait_members(ch, 0, 1, 10000) < 0) {
        fprintf(stderr, "  source: %s\n", cx_errmsg());
        return 3;
    }
    int64_t src = atoi(argv[4]), n = atoi(argv[5]);
    uint32_t bytes = (uint32_t)atoi(argv[6]);
    uint8_t *buf = calloc(1, bytes ? bytes : 1);
    for (int64_t k = 1; n == 0 || k <= n; k++) {
        struct dev e = {src, k, bytes, buf};
        int rc = cx_chan_submit_wait(s, &e, n ? 20000 : 0);
        if (rc == -EAGAIN && n == 0) {
            printf("full %lld\n", (long long)k);
            fflush(stdout);
            break;
        }
        if (rc < 0) {
            fprintf(stderr, "  source %lld: event %lld: %s\n", (long long)src, (long long)k,
                    cx_errmsg());
            return 4;
        }
    }
    cx_err_clear();
    long long t0 = now_ms();
    if (close_only)
        cx_chan_source_close(s);
    else
        cx_chan_ctx_destroy(ctx);
    printf("destroyed %lld %d %s\n", now_ms() - t0, cx_errcode(), cx_errmsg());
    fflush(stdout);
    if (close_only)
        _exit(0); /* the runtime is left as it is: the process just ends */
    free(buf);
    return 0;
}

static int run_role(int argc, char **argv)
{
    alarm(90); /* whatever happens, no role outlives a broken test for long */
    if (!strcmp(argv[2], "sink"))
        return role_sink(argc, argv);
    if (!strcmp(argv[2], "source"))
        return role_source(argc, argv);
    return 2;
}

/* ---- the test's side ---- */

struct proc {
    pid_t pid;
    int in, out; /* its stdin (we write), its stdout (we read) */
};

/* Runs `/proc/self/exe --cx-role args...` with env_extra ("K=V", or NULL) added. */
static int spawn_role(struct proc *p, const char *env_extra, char *const *args)
{
    char *argv[16] = {"channel_drain_test", "--cx-role"};
    int n = 2;
    for (char *const *a = args; *a && n < 15; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    static char *envp[512];
    int e = 0;
    if (env_extra)
        envp[e++] = (char *)env_extra;
    for (char **x = environ; *x && e < 511; x++)
        if (!env_extra || strncmp(*x, env_extra, strcspn(env_extra, "=") + 1) != 0)
            envp[e++] = *x;
    envp[e] = NULL;
    int i[2], o[2];
    if (pipe(i) < 0 || pipe(o) < 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(i[0], 0);
        dup2(o[1], 1);
        close(i[0]), close(i[1]), close(o[0]), close(o[1]);
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    close(i[0]), close(o[1]);
    *p = (struct proc){pid, i[1], o[0]};
    return 0;
}

/* Its exit code after up to timeout_ms (then killed), or 100 + the signal. */
static int reap(struct proc *p, int timeout_ms)
{
    int st = 0;
    long long end = now_ms() + timeout_ms;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (now_ms() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(2000);
    }
    close(p->in), close(p->out);
    p->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

static void kill_all(struct proc *ps, int n)
{
    for (int i = 0; i < n; i++)
        if (ps[i].pid) {
            kill(ps[i].pid, SIGKILL);
            reap(&ps[i], 1000);
        }
}

#define CKP(cond, ps, n)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            kill_all(ps, n);                                                               \
            *cx_failed = 1;                                                                \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* Starts a sink and reads its channel id into id. */
static int start_sink(struct proc *p, const char *stall, const char *qlimit, char *id, size_t cap)
{
    char line[256];
    if (spawn_role(p, NULL, (char *[]){"sink", (char *)stall, (char *)qlimit, NULL}) < 0 ||
        read_line(p->out, line, sizeof line, 20000) < 0 || strncmp(line, "id ", 3) != 0)
        return -1;
    snprintf(id, cap, "%s", line + 3);
    return 0;
}

/* A source's "destroyed <ms> <code> <message>" line. */
static int read_destroyed(struct proc *p, long long *ms, int *code, char *msg, size_t cap,
                          int timeout_ms)
{
    char line[700];
    int off = 0;
    if (read_line(p->out, line, sizeof line, timeout_ms) < 0 ||
        sscanf(line, "destroyed %lld %d %n", ms, code, &off) < 2 || !off)
        return -1;
    snprintf(msg, cap, "%s", line + off);
    return 0;
}

CX_TEST(eight_sources_destroying_right_after_their_last_submit_lose_nothing)
{
    struct proc ps[NSRC + 1] = {{0}};
    char id[256], nev[16];
    snprintf(nev, sizeof nev, "%d", NEV);
    CKP(start_sink(&ps[NSRC], "0", "256", id, sizeof id) == 0, ps, NSRC + 1);
    for (int i = 0; i < NSRC; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        /* half over shm (the default on one host), half over tcp; half destroy their
         * runtime, half close their source and exit */
        CKP(spawn_role(&ps[i], i % 2 ? "CONFLUX_CHAN_SHM=0" : NULL,
                       (char *[]){"source", id, num, nev, "64", i % 4 < 2 ? "destroy" : "close",
                                  NULL}) == 0,
            ps, NSRC + 1);
    }
    for (int i = 0; i < NSRC; i++) {
        long long ms;
        int code;
        char msg[600];
        CKP(read_destroyed(&ps[i], &ms, &code, msg, sizeof msg, 60000) == 0, ps, NSRC + 1);
        if (code != 0)
            fprintf(stderr, "  source %d: destroy reported %d: %s\n", i, code, msg);
        CKP(code == 0, ps, NSRC + 1);
        CKP(reap(&ps[i], 10000) == 0, ps, NSRC + 1);
    }
    /* every source process is gone now: whatever the sink has is all it will get */
    char line[128];
    long got = -1, bad = -1;
    CKP(dprintf(ps[NSRC].in, "count\n") > 0, ps, NSRC + 1);
    CKP(read_line(ps[NSRC].out, line, sizeof line, 10000) == 0, ps, NSRC + 1);
    CKP(sscanf(line, "got %ld bad %ld", &got, &bad) == 2, ps, NSRC + 1);
    fprintf(stderr, "  sink got %ld of %d events, %ld out of order or twice\n", got,
            NSRC * NEV, bad);
    CKP(bad == 0, ps, NSRC + 1);
    CKP(got == (long)NSRC * NEV, ps, NSRC + 1);
    dprintf(ps[NSRC].in, "bye\n");
    CKP(reap(&ps[NSRC], 10000) == 0, ps, NSRC + 1);
}

/* A stuck sink: the source's queue fills; `kill_after_ms` >= 0 kills the sink that long
 * after the source began to destroy. What destroy took, its error code and message. */
static void stuck_sink(int *cx_failed, const char *linger_env, int kill_after_ms,
                       long long *ms, int *code, char *msg, size_t cap)
{
    struct proc ps[2] = {{0}};
    char id[256];
    CKP(start_sink(&ps[1], "1", "16", id, sizeof id) == 0, ps, 2);
    CKP(spawn_role(&ps[0], linger_env, (char *[]){"source", id, "0", "0", "4096", "destroy", NULL}) == 0,
        ps, 2);
    char line[128];
    CKP(read_line(ps[0].out, line, sizeof line, 30000) == 0 && !strncmp(line, "full ", 5),
        ps, 2);
    if (kill_after_ms >= 0) {
        usleep((useconds_t)kill_after_ms * 1000);
        kill(ps[1].pid, SIGKILL);
        reap(&ps[1], 5000);
    }
    CKP(read_destroyed(&ps[0], ms, code, msg, cap, 80000) == 0, ps, 2);
    fprintf(stderr, "  destroy took %lld ms: %d %s\n", *ms, *code, msg);
    CKP(reap(&ps[0], 10000) == 0, ps, 2);
    kill_all(ps, 2);
}

CX_TEST(a_stuck_sink_holds_a_source_for_its_linger_and_is_reported)
{
    long long ms = -1;
    int code = 0;
    char msg[600] = "";
    stuck_sink(cx_failed, "CONFLUX_CHAN_LINGER_MS=300", -1, &ms, &code, msg, sizeof msg);
    if (*cx_failed)
        return;
    CX_CHECK(ms >= 300);   /* it did linger */
    CX_CHECK(ms < 30000);  /* and gave up (generous: a loaded machine) */
    CX_CHECK_EQ_INT(code, ETIMEDOUT);
    CX_CHECK(strstr(msg, "not delivered") != NULL);
    CX_CHECK(strstr(msg, "tcp://127.0.0.1:") != NULL); /* names the sink's process */
}

CX_TEST(a_source_whose_sink_dies_stops_lingering_when_the_link_breaks)
{
    long long ms = -1;
    int code = 0;
    char msg[600] = "";
    /* a linger far longer than the test: only the broken link can end it in time */
    stuck_sink(cx_failed, "CONFLUX_CHAN_LINGER_MS=600000", 300, &ms, &code, msg, sizeof msg);
    if (*cx_failed)
        return;
    CX_CHECK(ms < 30000); /* failure detection (the kernel closes the socket) + margin */
    CX_CHECK(code != 0);
    CX_CHECK(strstr(msg, "not delivered") != NULL);
}

int tests_main(int argc, char **argv);
CX_TEST_MAIN_AS(tests_main)
int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "--cx-role"))
        return run_role(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    return tests_main(argc, argv);
}
