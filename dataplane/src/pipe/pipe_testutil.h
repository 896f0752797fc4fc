/* Helpers shared by the pipe tests (header only, not part of the library): a space server
 * in a child process (restartable on the same port), segments with checkable contents,
 * the writer's direct link (which transport, waiting for it), and the seed of the
 * randomized fault tests. */
#ifndef PIPE_TESTUTIL_H
#define PIPE_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/cx_error.h"
#include "pipe/cx_pipe.h"
#include "space/cx_space_client.h"
#include "space/cx_space_server.h"
#include "space/space_testutil.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

/* What the space at addr says of a name, over a connection of its own: 0 and *info, or
 * -ENOENT when unbound (or the connection's error). */
static inline int space_lookup(const char *addr, const char *name, struct cx_space_pipe_info *info)
{
    struct cx_space_client *c;
    int rc = cx_space_connect(addr, &c);
    if (rc < 0)
        return rc;
    rc = cx_space_lookup(c, name, info);
    cx_space_disconnect(c);
    return rc;
}

/* ---- the space server in a child process, restartable on the same port ------------ */

struct space_proc {
    pid_t pid;
    char dir[64];
    char addr[160];
};

static inline pid_t space_spawn(const char *dir, const char *listen, char addr[160])
{
    int pp[2];
    if (pipe(pp) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        close(pp[0]);
        struct cx_space_server_opts o = {.dir = dir, .listen = listen, .quiet = 1, .udp = ""};
        o.pipe.fsync = CX_SEG_FSYNC_NONE; /* a killed process loses nothing from the page cache */
        struct cx_space_server *s;
        char a[160] = {0};
        for (int i = 0; i < 100 && cx_space_server_start(&o, &s) < 0; i++)
            usleep(50000); /* the port may still be held by the killed one's sockets */
        snprintf(a, sizeof a, "%s", cx_space_server_addr(s));
        if (write(pp[1], a, sizeof a) != sizeof a)
            _exit(3);
        for (;;)
            pause();
    }
    close(pp[1]);
    ssize_t n = read(pp[0], addr, 160);
    close(pp[0]);
    return n == 160 && addr[0] ? pid : -1;
}

static inline int space_up(struct space_proc *sp)
{
    if (!tmpdir_make(sp->dir))
        return -1;
    sp->pid = space_spawn(sp->dir, "tcp://127.0.0.1:0", sp->addr);
    return sp->pid > 0 ? 0 : -1;
}

static inline void space_kill(struct space_proc *sp)
{
    kill(sp->pid, SIGKILL);
    waitpid(sp->pid, NULL, 0);
}

static inline int space_restart(struct space_proc *sp)
{
    char again[160];
    sp->pid = space_spawn(sp->dir, sp->addr, again);
    return sp->pid > 0 && strcmp(again, sp->addr) == 0 ? 0 : -1;
}

static inline void space_down(struct space_proc *sp)
{
    space_kill(sp);
    tmpdir_remove(sp->dir);
}

/* ---- segments with checkable contents ---------------------------------------------- */

static inline size_t seg_fill(uint64_t i, uint8_t *buf) /* segment i (0-based) */
{
    size_t len = (size_t)((i * 97) % 2000 + 8);
    memcpy(buf, &i, 8);
    for (size_t k = 8; k < len; k++)
        buf[k] = (uint8_t)(i + k);
    return len;
}

static inline int seg_ok(uint64_t i, const uint8_t *buf, long n)
{
    uint8_t want[4096];
    size_t len = seg_fill(i, want);
    return n == (long)len && memcmp(buf, want, len) == 0;
}

static inline int write_n(int w, uint64_t from, uint64_t to, int delay_us)
{
    uint8_t buf[4096];
    for (uint64_t i = from; i < to; i++) {
        size_t len = seg_fill(i, buf);
        if (pi_write(w, buf, len, NULL) != (long)len) {
            fprintf(stderr, "pi_write %llu: %s\n", (unsigned long long)i, cx_errmsg());
            return -1;
        }
        if (delay_us)
            usleep((useconds_t)delay_us);
    }
    return 0;
}

/* Reads to the end and checks the exact sequence from..to-1. Returns the count or -1. */
static inline long read_all(int r, uint64_t from, uint64_t to, int timeout_ms)
{
    uint8_t buf[4096];
    uint64_t i = from;
    for (;;) {
        long n = pi_read_timeout(r, buf, sizeof buf, NULL, timeout_ms);
        if (n < 0) {
            if (errno == EPIPE && i == to)
                return (long)(i - from);
            fprintf(stderr, "read_all: at %llu of %llu: %s (errno %d)\n", (unsigned long long)i,
                    (unsigned long long)to, cx_errmsg(), errno);
            return -1;
        }
        if (!seg_ok(i, buf, n)) {
            fprintf(stderr, "read_all: segment %llu wrong (%ld bytes, first word %llu)\n",
                    (unsigned long long)i, n, (unsigned long long)*(uint64_t *)buf);
            return -1;
        }
        i++;
    }
}

/* ---- the writer's direct link to a reader ------------------------------------------ */

/* 0 when pi_link says d's direct link is over want, else -1 (stderr says what it is). */
static inline int pipe_link_is(int d, const char *want, const char *who)
{
    char got[PI_LINK_MAX] = "?";
    if (pi_link(d, got, sizeof got) != 0 || strcmp(got, want) != 0) {
        fprintf(stderr, "  %s: pi_link says '%s', want '%s' (%s)\n", who, got, want, cx_errmsg());
        return -1;
    }
    return 0;
}

/* Waits up to timeout_ms for writer w's direct link to its reader: 0 once there is exactly
 * one, else -1 (stderr says how many). */
static inline int wait_direct_link(int w, int timeout_ms, const char *who)
{
    struct pi_writer_stats ws = {0};
    for (int i = 0; i < timeout_ms / 10 && ws.direct == 0; i++) {
        pi_writer_stats(w, &ws);
        if (ws.direct == 0)
            usleep(10000);
    }
    if (ws.direct != 1) {
        fprintf(stderr, "  %s: no direct link to the reader (%llu)\n", who, (unsigned long long)ws.direct);
        return -1;
    }
    return 0;
}

/* ---- randomized fault tests: one seed per test binary, printed so a failure can be
 * replayed (CX_TEST_SEED=<seed>); CX_FAULT_RUNS scales how many runs each test does ---- */

static inline unsigned test_seed(const char *test)
{
    const char *e = getenv("CX_TEST_SEED");
    unsigned seed = e && *e ? (unsigned)strtoul(e, NULL, 0)
                            : (unsigned)time(NULL) ^ ((unsigned)getpid() << 16);
    printf("    %s: seed %u (CX_TEST_SEED=%u reproduces the kill points)\n", test, seed, seed);
    fflush(stdout);
    return seed;
}

static inline int fault_runs(int dflt)
{
    const char *e = getenv("CX_FAULT_RUNS");
    int n = e && *e ? atoi(e) : 0;
    return n > 0 ? n : dflt;
}

#endif
