/* Reader groups (pi_attach_group): real processes throughout — a space server
 * (build/bin/confluxd --role=space), a sidecar (--role=sidecar) for the sidecar mode, and
 * every application a forked process of its own, in both modes:
 *
 *   - three member processes share a pipe while its writer writes; one is SIGKILLed while it
 *     holds segments it read but did not acknowledge: together they acknowledge every
 *     segment exactly once (the union of what each acknowledged is 0..N-1, no duplicates);
 *   - rebalancing: a member joining later gets the next segments; pi_detach hands a
 *     member's unacknowledged segments to the other member at once (before newer ones);
 *   - the group's floor survives a restart of the space (handed out again from it, also to a
 *     member that lived through the restart: ESRCH at its pi_ack for the lost lease), and
 *     `conflux stat` shows the group's floor and members;
 *   - the ack deadline: a quiet member's segments go to another, its pi_ack says ESRCH;
 *   - a segment bigger than the buffer fails with EMSGSIZE and stays the member's;
 *   - bad group names fail with EINVAL. */
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

#define N 600        /* segments of the shared pipe */
#define M 3          /* members */
#define SEG_BYTES 24
#define HOLD 3       /* segments the doomed member reads and never acknowledges */

#include "pipe_apps_testutil.h" /* after SEG_BYTES */

static int E_up;

/* What the children tell the parent. */
struct shared {
    _Atomic int acked[N];      /* acknowledgements of each position (pi_ack returned) */
    _Atomic int acking[N];     /* in a pi_ack that had not returned yet */
    _Atomic long done[M];      /* positions member i acknowledged */
    _Atomic int holding;       /* the doomed member holds HOLD unacknowledged segments */
    _Atomic long held[HOLD];
    _Atomic int redelivered;   /* duplicates (handed out before) seen by survivors */
    _Atomic int phase;         /* the live member across a restart: 1 paused, 2 go on */
};
static struct shared *SH;

static int env_up(void)
{
    if (E_up)
        return E_up > 0 ? 0 : -1;
    E_up = -1;
    if (apps_env_up("/tmp/cx-group-XXXXXX") < 0)
        return -1;
    SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (SH == MAP_FAILED)
        return -1;
    E_up = 1;
    return 0;
}

static void app_writer(int sidecar, const char *name, long n, int pace_us)
{
    int s = app_space(sidecar), w = pi_create(name, s, PI_CREATE);
    if (w < 0)
        FAIL("pi_create '%s'", name);
    uint8_t b[SEG_BYTES];
    for (long i = 0; i < n; i++) {
        seg_fill(b, (uint64_t)i);
        if (pi_write(w, b, sizeof b, NULL) != SEG_BYTES)
            FAIL("write %ld", i);
        if (pace_us)
            usleep((useconds_t)pace_us);
    }
    if (pi_close(w) < 0)
        FAIL("close");
    _exit(0);
}

/* Reads one segment of member r: its position, checked against pi_tell. */
static long member_read(int r)
{
    uint8_t b[256];
    long n = pi_read_timeout(r, b, sizeof b, NULL, 60000);
    if (n < 0)
        return -1;
    int64_t id = seg_check(b, n);
    if (id < 0 || id >= N || pi_tell(r) != id + 1)
        FAIL("bad segment: %ld bytes, id %lld, pi_tell %lld", n, (long long)id, (long long)pi_tell(r));
    return (long)id;
}

/* Member i of the shared pipe: reads, acknowledges each segment, records it. The doomed
 * member (i == 0) stops acknowledging after `ack_first` and reads HOLD more, then waits to
 * be killed. */
static void app_member(int sidecar, const char *name, int i, long ack_first)
{
    int s = app_space(sidecar), r = pi_attach_group(name, s, "workers");
    if (r < 0)
        FAIL("pi_attach_group '%s'", name);
    long pos;
    while ((pos = member_read(r)) >= 0) {
        if (i == 0 && SH->done[0] >= ack_first) {
            int k = atomic_load(&SH->holding);
            SH->held[k] = pos;
            atomic_store(&SH->holding, k + 1);
            if (k + 1 == HOLD)
                for (;;)
                    pause(); /* SIGKILLed here, holding HOLD segments */
            continue;
        }
        atomic_fetch_add(&SH->acking[pos], 1);
        if (pi_ack(r) < 0)
            FAIL("pi_ack of %ld", pos);
        atomic_fetch_add(&SH->acked[pos], 1);
        atomic_fetch_sub(&SH->acking[pos], 1);
        atomic_fetch_add(&SH->done[i], 1);
        usleep(1000); /* some work, so every member gets a share */
    }
    if (errno != EPIPE)
        FAIL("member %d: pi_read ended with errno %d", i, errno);
    struct pi_reader_stats st;
    if (pi_reader_stats(r, &st) < 0)
        FAIL("pi_reader_stats");
    atomic_fetch_add(&SH->redelivered, (int)st.duplicates);
    if (pi_detach(r) < 0)
        FAIL("pi_detach");
    _exit(0);
}

/* Join and leave in one process (two members, deterministic order). */
static void app_join_leave(int sidecar, const char *name, long n)
{
    int s = app_space(sidecar), a = pi_attach_group(name, s, "jl");
    if (a < 0)
        FAIL("pi_attach_group a");
    for (long k = 0; k < 5; k++)
        if (member_read(a) != k || pi_ack(a) < 0)
            FAIL("a: segment %ld", k);
    int b = pi_attach_group(name, s, "jl"); /* joins later: gets the next segments */
    if (b < 0)
        FAIL("pi_attach_group b");
    if (member_read(b) != 5 || pi_ack(b) < 0)
        FAIL("b: the first segment after its join is not 5");
    for (long k = 6; k < 9; k++) /* a: three read, not acknowledged, then a leaves */
        if (member_read(a) != k)
            FAIL("a: segment %ld", k);
    if (pi_ack(b) != 0) /* nothing read since: no-op */
        FAIL("empty pi_ack");
    if (pi_detach(a) < 0)
        FAIL("pi_detach a");
    for (long k = 6; k < n; k++) /* b gets a's three at once, then the rest */
        if (member_read(b) != k || pi_ack(b) < 0)
            FAIL("b: segment %ld", k);
    if (member_read(b) != -1 || errno != EPIPE)
        FAIL("b: no end (errno %d)", errno);
    struct pi_reader_stats st;
    if (pi_reader_stats(b, &st) < 0 || st.duplicates != 3 || st.from_space != (uint64_t)n - 5)
        FAIL("b: stats from_space %llu duplicates %llu", (unsigned long long)st.from_space,
             (unsigned long long)st.duplicates);
    errno = 0;
    if (pi_seek(b, 0) != -1 || errno != EINVAL)
        FAIL("pi_seek of a member: errno %d", errno);
    /* bad group names */
    const char *bad[] = {"", "a/b", ".x", "sp ace"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        errno = 0;
        if (pi_attach_group(name, s, bad[i]) != -1 || errno != EINVAL)
            FAIL("bad group name '%s': errno %d", bad[i], errno);
    }
    errno = 0; /* embedded: b is still a member on s (the sidecar keeps its own spaces) */
    if (!sidecar && (pi_space_close(s) != -1 || errno != EBUSY))
        FAIL("pi_space_close with a member open: errno %d", errno);
    if (pi_detach(b) < 0 || pi_space_close(s) < 0)
        FAIL("pi_detach, pi_space_close");
    _exit(0);
}

/* A member that acknowledges `ack` segments and detaches (restart: the floor stays). */
static void app_ack_some(int sidecar, const char *name, long first, long ack)
{
    int s = app_space(sidecar), r = pi_attach_group(name, s, "rs");
    if (r < 0)
        FAIL("pi_attach_group rs");
    for (long k = first; k < first + ack; k++)
        if (member_read(r) != k || pi_ack(r) < 0)
            FAIL("rs: segment %ld", k);
    if (member_read(r) != first + ack) /* read, not acknowledged: handed out again */
        FAIL("rs: segment %ld", first + ack);
    _exit(0);
}

/* A big segment through a group (3 MiB embedded; 400 KiB through the sidecar, whose 1 MiB
 * ring takes half of it at once): a too small buffer fails with EMSGSIZE and leaves it (not
 * consumed, still this member's); a big enough one gets it, whole. */
static void app_big(int sidecar, const char *name)
{
    const uint32_t BIG = sidecar ? 400u << 10 : 3u << 20;
    int s = app_space(sidecar), w = pi_create(name, s, PI_CREATE);
    uint8_t *b = malloc(BIG), *got = malloc(BIG);
    if (w < 0 || !b || !got)
        FAIL("pi_create '%s'", name);
    for (uint32_t i = 0; i < BIG; i++)
        b[i] = (uint8_t)(i * 13 + 1);
    if (pi_write(w, b, BIG, NULL) != (long)BIG || pi_close(w) < 0)
        FAIL("write the big segment");
    int r = pi_attach_group(name, s, "big");
    if (r < 0)
        FAIL("pi_attach_group big");
    errno = 0;
    if (pi_read_timeout(r, got, 1000, NULL, 60000) != -1 || errno != EMSGSIZE)
        FAIL("small buffer: errno %d", errno);
    if (pi_read_timeout(r, got, BIG, NULL, 60000) != (long)BIG || memcmp(b, got, BIG) != 0 || pi_tell(r) != 1)
        FAIL("the big segment");
    if (pi_ack(r) < 0 || pi_read_timeout(r, got, BIG, NULL, 60000) != -1 || errno != EPIPE)
        FAIL("the end after the big segment: errno %d", errno);
    _exit(0);
}

/* The ack deadline (CONFLUX_GROUP_ACK_WAIT_MS, 1 s here): a member that holds two segments
 * and goes quiet loses them to the other member after the deadline; its next pi_ack says
 * ESRCH, its next pi_read joins again (and finds the end). */
static void app_deadline(const char *name, long n)
{
    setenv("CONFLUX_GROUP_ACK_WAIT_MS", "1000", 1);
    int s = app_space(0), a = pi_attach_group(name, s, "dl"), b = pi_attach_group(name, s, "dl");
    if (a < 0 || b < 0)
        FAIL("pi_attach_group dl");
    if (member_read(a) != 0 || member_read(a) != 1)
        FAIL("a: segments 0 1");
    for (long k = 2; k < n; k++)
        if (member_read(b) != k || pi_ack(b) < 0)
            FAIL("b: segment %ld", k);
    if (member_read(b) != 0 || member_read(b) != 1 || pi_ack(b) < 0) /* after a's deadline */
        FAIL("b: a's segments 0 1 after its deadline");
    if (member_read(b) != -1 || errno != EPIPE)
        FAIL("b: no end (errno %d)", errno);
    errno = 0;
    if (pi_ack(a) != -1 || errno != ESRCH || !strstr(cx_errmsg(), "2 segments"))
        FAIL("a: pi_ack after its deadline: errno %d", errno);
    if (member_read(a) != -1 || errno != EPIPE)
        FAIL("a: no end after joining again (errno %d)", errno);
    struct pi_reader_stats st;
    if (pi_reader_stats(b, &st) < 0 || st.duplicates != 2 || pi_reader_stats(a, &st) < 0 || st.reconnects != 1)
        FAIL("stats: b's duplicates, a's rejoin");
    _exit(0);
}

/* A member that lives through a restart of the space: acknowledges 0..4, reads 5, waits
 * for the restart, then gets 5 again (from the stored floor), its pi_ack says ESRCH for the
 * old lease of 5 while acknowledging the new one, and it reads the rest once. */
static void app_live_restart(int sidecar, const char *name, long n)
{
    int s = app_space(sidecar), r = pi_attach_group(name, s, "lr");
    if (r < 0)
        FAIL("pi_attach_group lr");
    for (long k = 0; k < 5; k++)
        if (member_read(r) != k || pi_ack(r) < 0)
            FAIL("lr: segment %ld", k);
    if (member_read(r) != 5)
        FAIL("lr: segment 5");
    atomic_store(&SH->phase, 1);
    while (atomic_load(&SH->phase) != 2)
        usleep(1000);
    if (member_read(r) != 5)
        FAIL("lr: segment 5 again after the restart");
    errno = 0;
    if (pi_ack(r) != -1 || errno != ESRCH)
        FAIL("lr: pi_ack after the restart: errno %d", errno);
    for (long k = 6; k < n; k++)
        if (member_read(r) != k || pi_ack(r) < 0)
            FAIL("lr: segment %ld after the restart", k);
    if (member_read(r) != -1 || errno != EPIPE)
        FAIL("lr: no end (errno %d)", errno);
    _exit(0);
}

static const char *mode_name(int sidecar) { return sidecar ? "sidecar" : "embedded"; }

static int stat_has(const char *name, const char *group, long floor, int members)
{
    char out[4096];
    int rc = run_cli(out, sizeof out, "--space %s stat %s", E.space_addr, name);
    char want[80];
    snprintf(want, sizeof want, "\n  %s ", group); /* the group's line */
    const char *at = strstr(out, want);
    long f = -1, lag = -1;
    int m = -1;
    if (rc != 0 || !at || sscanf(at + strlen(want), " %ld %ld %d", &f, &lag, &m) != 3 || (floor >= 0 && f != floor) ||
        m != members) {
        fprintf(stderr, "conflux stat %s (exit %d), want group %s floor %ld members %d:\n%s", name, rc,
                group, floor, members, out);
        return -1;
    }
    return 0;
}

static void run_shared(int sidecar, int *cx_failed, int *cx_skipped)
{
    char name[64];
    snprintf(name, sizeof name, "group-%s", mode_name(sidecar));
    memset(SH, 0, sizeof *SH);
    long ack_first = 20 + (long)(getpid() % 40);
    pid_t w = fork();
    if (w == 0)
        app_writer(sidecar, name, N, 200);
    pid_t m[M];
    for (int i = 0; i < M; i++)
        if ((m[i] = fork()) == 0)
            app_member(sidecar, name, i, ack_first);
    for (int i = 0; i < 120000 && atomic_load(&SH->holding) < HOLD; i++)
        usleep(1000);
    CX_CHECK_EQ_INT(atomic_load(&SH->holding), HOLD);
    CX_CHECK_EQ_INT(stat_has(name, "workers", -1, M), 0); /* all three are members */
    kill(m[0], SIGKILL);
    CX_CHECK_EQ_INT(wait_child(m[0], 10), 128 + SIGKILL);
    for (int i = 1; i < M; i++)
        CX_CHECK_EQ_INT(wait_child(m[i], 120), 0);
    CX_CHECK_EQ_INT(wait_child(w, 120), 0);
    long total = 0, dups = 0, missing = 0;
    for (long p = 0; p < N; p++) {
        int a = atomic_load(&SH->acked[p]);
        CX_CHECK_EQ_INT(atomic_load(&SH->acking[p]), 0); /* the doomed one never was mid-ack */
        total += a;
        dups += a > 1;
        missing += a == 0;
    }
    printf("    %s: %ld acknowledged (members %ld/%ld/%ld, the killed one first), %ld duplicates, "
           "%ld missing, %d redelivered\n", mode_name(sidecar), total, (long)SH->done[0],
           (long)SH->done[1], (long)SH->done[2], dups, missing, atomic_load(&SH->redelivered));
    fflush(stdout);
    CX_CHECK_EQ_INT(total, N);
    CX_CHECK_EQ_INT(dups, 0);
    CX_CHECK_EQ_INT(missing, 0);
    CX_CHECK_EQ_INT((long)SH->done[0], ack_first);
    CX_CHECK(atomic_load(&SH->redelivered) >= HOLD); /* the killed one's held segments */
    for (int k = 0; k < HOLD; k++)
        CX_CHECK_EQ_INT(atomic_load(&SH->acked[SH->held[k]]), 1);
    CX_CHECK_EQ_INT(stat_has(name, "workers", N, 0), 0);
}

static void run_join_leave_restart(int sidecar, int *cx_failed, int *cx_skipped)
{
    (void)cx_skipped;
    char name[64];
    snprintf(name, sizeof name, "jl-%s", mode_name(sidecar));
    pid_t w = fork();
    if (w == 0)
        app_writer(sidecar, name, 40, 0);
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    pid_t p = fork();
    if (p == 0)
        app_join_leave(sidecar, name, 40);
    CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    CX_CHECK_EQ_INT(stat_has(name, "jl", 40, 0), 0);

    /* the floor survives a restart of the space; what was read above it comes again */
    p = fork();
    if (p == 0)
        app_ack_some(sidecar, name, 0, 12);
    CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    CX_CHECK_EQ_INT(stat_has(name, "rs", 12, 0), 0);
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGKILL), 128 + SIGKILL);
    CX_CHECK_EQ_INT(apps_space_start(E.space_addr), 0);
    CX_CHECK_EQ_INT(stat_has(name, "rs", 12, 0), 0);
    p = fork();
    if (p == 0)
        app_ack_some(sidecar, name, 12, 10);
    CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    CX_CHECK_EQ_INT(stat_has(name, "rs", 22, 0), 0);

    /* a member alive across a restart of the space */
    atomic_store(&SH->phase, 0);
    p = fork();
    if (p == 0)
        app_live_restart(sidecar, name, 40);
    for (int i = 0; i < 60000 && atomic_load(&SH->phase) != 1; i++)
        usleep(1000);
    CX_CHECK_EQ_INT(atomic_load(&SH->phase), 1);
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGKILL), 128 + SIGKILL);
    CX_CHECK_EQ_INT(apps_space_start(E.space_addr), 0);
    atomic_store(&SH->phase, 2);
    CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    CX_CHECK_EQ_INT(stat_has(name, "lr", 40, 0), 0);
}

CX_TEST(group_member_killed_embedded)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_shared(0, cx_failed, cx_skipped);
}

CX_TEST(group_member_killed_sidecar)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_shared(1, cx_failed, cx_skipped);
    CX_CHECK(waitpid(E.sc.pid, NULL, WNOHANG) == 0);
}

CX_TEST(group_join_leave_restart_embedded)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_join_leave_restart(0, cx_failed, cx_skipped);
}

CX_TEST(group_join_leave_restart_sidecar)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    run_join_leave_restart(1, cx_failed, cx_skipped);
    CX_CHECK(waitpid(E.sc.pid, NULL, WNOHANG) == 0);
}

CX_TEST(group_big_segment_embedded_and_sidecar)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make bin)", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    for (int sidecar = 0; sidecar < 2; sidecar++) {
        pid_t p = fork();
        if (p == 0)
            app_big(sidecar, sidecar ? "big-sidecar" : "big-embedded");
        CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    }
}

CX_TEST(group_ack_deadline_embedded)
{
    if (access(CONFLUXD, X_OK) != 0 || access(CONFLUX_CLI, X_OK) != 0)
        CX_SKIP("%s or %s is not built (make bin)", CONFLUXD, CONFLUX_CLI);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t w = fork();
    if (w == 0)
        app_writer(0, "dl-embedded", 10, 0);
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    pid_t p = fork();
    if (p == 0)
        app_deadline("dl-embedded", 10);
    CX_CHECK_EQ_INT(wait_child(p, 120), 0);
    CX_CHECK_EQ_INT(stat_has("dl-embedded", "dl", 10, 0), 0);
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
