/* Durable named readers (pi_attach_named, pi_ack): real processes throughout — a space
 * server (build/bin/confluxd --role=space), a sidecar (--role=sidecar) for the sidecar
 * mode, and every application a forked process of its own (the parent never starts the
 * pipe runtime), in both modes:
 *
 *   - a named reader SIGKILLed mid-stream (the writer still writing): a new reader process
 *     under the same name starts exactly after the last acknowledged segment, reads the
 *     rest once each, in order;
 *   - the space server SIGKILLed and restarted: the cursor's position is still there;
 *     `conflux stat` shows it and its lag; a cursor never acknowledged starts at 0;
 *   - bad cursor names (empty, too long, bad characters) and pi_ack on an unnamed reader
 *     fail with EINVAL and a message, both at the call and at the server.
 *
 * The kill points are random; the seed is printed, CX_TEST_SEED=<seed> replays them. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/sc_testutil.h"
#include "space/cx_space_client.h"

#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#define N 2000        /* segments in each pipe */
#define SEG_BYTES 40  /* id, then a pattern of it */

#include "pipe_apps_testutil.h" /* after SEG_BYTES */

static int E_up;
static unsigned g_seed;

/* What the children tell the parent. */
struct shared {
    _Atomic long acking; /* pi_ack called for position acking */
    _Atomic long acked;  /* ... and returned */
    _Atomic long read;   /* segments read by the current reader */
    _Atomic long first;  /* the first segment the resumed reader got */
    _Atomic long written;
    _Atomic int killed;  /* the first reader is dead: the writer need not wait for it */
};
static struct shared *SH;

static int env_up(void)
{
    if (E_up)
        return E_up > 0 ? 0 : -1;
    E_up = -1;
    const char *e = getenv("CX_TEST_SEED");
    g_seed = e && *e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("    seed %u (CX_TEST_SEED=%u replays the kill points)\n", g_seed, g_seed);
    srand(g_seed);
    if (apps_env_up("/tmp/cx-cursor-XXXXXX") < 0)
        return -1;
    SH = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (SH == MAP_FAILED)
        return -1;
    E_up = 1;
    return 0;
}

/* ---- the applications (forked children) ---- */

static void app_writer(int sidecar, const char *name)
{
    int s = app_space(sidecar), w = pi_create(name, s, PI_CREATE);
    if (w < 0)
        FAIL("pi_create '%s'", name);
    uint8_t b[SEG_BYTES];
    for (uint64_t i = 0; i < N; i++) {
        seg_fill(b, i);
        if (pi_write(w, b, sizeof b, NULL) != SEG_BYTES)
            FAIL("write %llu", (unsigned long long)i);
        atomic_store(&SH->written, (long)i + 1);
        /* at most 300 ahead of the first reader, so it is killed mid-stream on any machine */
        while (!atomic_load(&SH->killed) && (long)i + 1 - atomic_load(&SH->read) > 300)
            usleep(1000);
    }
    if (pi_close(w) < 0)
        FAIL("close");
    _exit(0);
}

/* The first reader: acknowledges each segment until ack_until, then reads on without
 * acknowledging, slowly, until it is killed. */
static void app_reader_killed(int sidecar, const char *name, long ack_until)
{
    int s = app_space(sidecar), r = pi_attach_named(name, s, "stage-a");
    if (r < 0)
        FAIL("pi_attach_named '%s'", name);
    if (pi_tell(r) != 0)
        FAIL("a new cursor at %lld, want 0", (long long)pi_tell(r));
    uint8_t b[256];
    for (long next = 0;; next++) {
        long n = pi_read_timeout(r, b, sizeof b, NULL, 60000);
        if (n < 0 || seg_check(b, n) != next)
            FAIL("segment %ld: %ld bytes, id %lld", next, n, (long long)(n > 0 ? seg_check(b, n) : -1));
        atomic_store(&SH->read, next + 1);
        if (next < ack_until) {
            atomic_store(&SH->acking, next + 1);
            if (pi_ack(r) < 0)
                FAIL("pi_ack at %ld", next + 1);
            atomic_store(&SH->acked, next + 1);
        }
        usleep(500);
    }
}

/* The successor: resumes under the same name, checks it got exactly the sequence from its
 * first segment to the end, acknowledges up to ack_at and stops there (the rest is read
 * but not acknowledged). */
static void app_reader_resumed(int sidecar, const char *name, long ack_at)
{
    int s = app_space(sidecar), r = pi_attach_named(name, s, "stage-a");
    if (r < 0)
        FAIL("pi_attach_named '%s' again", name);
    int64_t start = pi_tell(r), next = start;
    atomic_store(&SH->first, (long)start);
    uint8_t b[256];
    long n;
    while ((n = pi_read_timeout(r, b, sizeof b, NULL, 60000)) >= 0) {
        if (seg_check(b, n) != next)
            FAIL("segment %lld is %lld (%ld bytes)", (long long)next, (long long)seg_check(b, n), n);
        next++;
        if (next == ack_at && pi_ack(r) < 0)
            FAIL("pi_ack at %lld", (long long)next);
    }
    if (errno != EPIPE || next != N)
        FAIL("ended after %lld segments (errno %d), want %d", (long long)next, errno, N);
    _exit(0);
}

/* After the space's restart: the cursor `cursor` must be at `want` and read on from there to
 * the end; exit 0 when it did. */
static void app_reader_after_restart(int sidecar, const char *name, const char *cursor, long want)
{
    int s = app_space(sidecar), r = pi_attach_named(name, s, cursor);
    if (r < 0)
        FAIL("pi_attach_named '%s' cursor '%s'", name, cursor);
    if (pi_tell(r) != want)
        FAIL("cursor '%s' at %lld after the restart, want %ld", cursor, (long long)pi_tell(r), want);
    uint8_t b[256];
    long n, next = want;
    while ((n = pi_read_timeout(r, b, sizeof b, NULL, 60000)) >= 0)
        if (seg_check(b, n) != next++)
            FAIL("segment %ld after the restart is %lld", next - 1, (long long)seg_check(b, n));
    if (errno != EPIPE || next != N)
        FAIL("ended at %ld (errno %d), want %d", next, errno, N);
    _exit(0);
}

/* Bad names at the call, pi_ack of an unnamed reader. */
static void app_bad_names(int sidecar)
{
    int s = app_space(sidecar);
    char longname[100];
    memset(longname, 'c', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    const char *bad[] = {"", longname, "a/b", ".hidden", "sp ace", "x~tmp"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        if (pi_attach_named("cursor-bad", s, bad[i]) != -1 || errno != EINVAL || !strstr(cx_errmsg(), "cursor name"))
            FAIL("bad cursor name '%.20s': errno %d", bad[i], errno);
    }
    int r = pi_attach("cursor-bad", s);
    errno = 0;
    if (r < 0 || pi_ack(r) != -1 || errno != EINVAL || !strstr(cx_errmsg(), "without a cursor name"))
        FAIL("pi_ack of an unnamed reader: errno %d", errno);
    errno = 0;
    if (pi_ack(123456) != -1 || errno != EBADF)
        FAIL("pi_ack of a bad descriptor: errno %d", errno);
    _exit(0);
}

/* ---- tests ---- */

static const char *mode_name(int sidecar) { return sidecar ? "sidecar" : "embedded"; }

static int stat_has(const char *name, const char *cursor, long pos, long lag)
{
    char out[4096], want[128];
    int rc = run_cli(out, sizeof out, "--space %s stat %s", E.space_addr, name);
    snprintf(want, sizeof want, "%s", cursor);
    const char *at = strstr(out, want);
    long p = -1, l = -1;
    if (rc != 0 || !at || sscanf(at + strlen(want), " %ld %ld", &p, &l) != 2 || p != pos || l != lag) {
        fprintf(stderr, "conflux stat %s (exit %d), want %s at %ld lag %ld:\n%s", name, rc, cursor, pos, lag, out);
        return -1;
    }
    return 0;
}

static void run_mode(int sidecar, int *cx_failed, int *cx_skipped)
{
    char name[64];
    snprintf(name, sizeof name, "cursor-%s", mode_name(sidecar));
    memset(SH, 0, sizeof *SH);
    long ack_until = 50 + rand() % 600, kill_after = 20 + rand() % (ack_until + 200);
    printf("    %s: the reader acknowledges %ld segments, is killed after reading %ld or more\n",
           mode_name(sidecar), ack_until, kill_after);
    fflush(stdout);
    pid_t w = fork();
    if (w == 0)
        app_writer(sidecar, name);
    pid_t r = fork();
    if (r == 0)
        app_reader_killed(sidecar, name, ack_until);
    for (int i = 0; i < 60000 && atomic_load(&SH->read) < kill_after; i++)
        usleep(1000);
    CX_CHECK(atomic_load(&SH->read) >= kill_after);
    kill(r, SIGKILL);
    CX_CHECK_EQ_INT(wait_child(r, 10), 128 + SIGKILL);
    atomic_store(&SH->killed, 1);
    long acked = atomic_load(&SH->acked), acking = atomic_load(&SH->acking);
    long written = atomic_load(&SH->written);
    printf("    %s: killed after reading %ld (acknowledged %ld, acknowledging %ld), %ld written\n",
           mode_name(sidecar), atomic_load(&SH->read), acked, acking, written);
    fflush(stdout);
    CX_CHECK(written < N); /* mid-stream: the writer was still writing */
    long ack_at = N / 2 + rand() % (N / 4);
    r = fork();
    if (r == 0)
        app_reader_resumed(sidecar, name, ack_at);
    CX_CHECK_EQ_INT(wait_child(r, 120), 0);
    CX_CHECK_EQ_INT(wait_child(w, 120), 0);
    long first = atomic_load(&SH->first);
    printf("    %s: the new reader started at %ld\n", mode_name(sidecar), first);
    fflush(stdout);
    /* exactly after the last acknowledged segment: a pi_ack cut by the kill may have been
     * stored or not, so acknowledging (if it differs) is the only other answer */
    CX_CHECK(first == acked || first == acking);
    if (acked == acking)
        CX_CHECK_EQ_INT(first, acked);
    CX_CHECK_EQ_INT(stat_has(name, "stage-a", ack_at, N - ack_at), 0);

    /* the space restarts: the cursor is still where it was acknowledged */
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGKILL), 128 + SIGKILL);
    CX_CHECK_EQ_INT(apps_space_start(E.space_addr), 0);
    r = fork();
    if (r == 0)
        app_reader_after_restart(sidecar, name, "stage-a", ack_at);
    CX_CHECK_EQ_INT(wait_child(r, 120), 0);
    r = fork();
    if (r == 0)
        app_reader_after_restart(sidecar, name, "stage-b", 0); /* never acknowledged */
    CX_CHECK_EQ_INT(wait_child(r, 120), 0);
    CX_CHECK_EQ_INT(stat_has(name, "stage-a", ack_at, N - ack_at), 0);
}

CX_TEST(named_reader_killed_resumes_after_last_ack_embedded)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_mode(0, cx_failed, cx_skipped);
}

CX_TEST(named_reader_killed_resumes_after_last_ack_sidecar)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_mode(1, cx_failed, cx_skipped);
    CX_CHECK(waitpid(E.sc.pid, NULL, WNOHANG) == 0); /* the sidecar lived through it all */
}

CX_TEST(bad_cursor_names_refused)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make bin)", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    for (int sidecar = 0; sidecar < 2; sidecar++) {
        pid_t p = fork();
        if (p == 0)
            app_bad_names(sidecar);
        CX_CHECK_EQ_INT(wait_child(p, 60), 0);
    }
    /* the server checks too (a client that does not) */
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(E.space_addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_get(c, "cursor-raw", 0, "", &info), 0);
    char longname[70];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    const char *bad[] = {"", longname, "a/../b", "-x", "new\nline"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CX_CHECK_EQ_INT(cx_space_cursor_set(c, "cursor-raw", 0, bad[i], 1), -EINVAL);
        CX_CHECK(strstr(cx_errmsg(), "cursor name") != NULL);
        uint64_t pos;
        CX_CHECK_EQ_INT(cx_space_cursor_get(c, "cursor-raw", bad[i], &pos), -EINVAL);
    }
    uint64_t pos = 99;
    CX_CHECK_EQ_INT(cx_space_cursor_get(c, "cursor-raw", "never", &pos), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_cursor_set(c, "cursor-raw", info.pipe_id + 1, "ok", 1), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_cursor_set(c, "no-such-pipe", 0, "ok", 1), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_cursor_set(c, "cursor-raw", info.pipe_id, "ok", 7), 0);
    CX_CHECK_EQ_INT(cx_space_cursor_get(c, "cursor-raw", "ok", &pos), 0);
    CX_CHECK_EQ_INT((long)pos, 7);
    CX_CHECK_EQ_INT(cx_space_cursor_list(c, "cursor-raw", NULL, NULL), 1);
    cx_space_disconnect(c);
}

CX_TEST(teardown)
{
    if (E_up > 0) {
        CX_CHECK_EQ_INT(proc_stop(&E.sc, SIGTERM), 0);
        CX_CHECK_EQ_INT(proc_stop(&E.space, SIGTERM), 0);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", E.dir);
        CX_CHECK_EQ_INT(system(cmd), 0);
    }
}

CX_TEST_MAIN()
