/* A writer that stops mid-stream without pi_close does not end its pipe (pi_abandon): a
 * real space server process, sidecar processes (build/bin/confluxd --role=sidecar) and the
 * applications as forked processes of their own.
 *
 *   - pi_abandon itself (embedded): the pipe stays open and unended, a PI_APPEND writer
 *     continues it at once, bad descriptors fail with EBADF;
 *   - an application SIGKILLed mid-stream: its sidecar abandons the writer, a new
 *     application in the same "pod" (same sidecar) opens it with PI_APPEND, replays and
 *     closes; a reader through another sidecar gets exactly 0..N-1, once each, in order;
 *   - the sidecar itself terminated (SIGTERM) mid-stream: the same, with a new sidecar on
 *     the same socket.
 *
 * The kill points are random; the seed is printed, CX_TEST_SEED=<seed> replays it. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/sc_testutil.h"
#include "space/cx_space_client.h"

#include <stdatomic.h>
#include <sys/mman.h>

#define N 3000         /* segments in each stream */
#define SEG_BYTES 48   /* id, then a pattern of it */

struct env {
    struct proc space, rd; /* the space server; the reader's sidecar */
    char dir[64], space_addr[64], sock_rd[128];
};
static struct env E;
static int E_up;
static unsigned g_seed;

static int sidecar_start(struct proc *p, const char *sock)
{
    char sockarg[160], spacearg[96];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    snprintf(spacearg, sizeof spacearg, "--space=%s", E.space_addr);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", spacearg,
                          "--listen=tcp://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
    return proc_start(p, args, 1);
}

static int env_up(void)
{
    if (E_up)
        return E_up > 0 ? 0 : -1;
    E_up = -1;
    const char *e = getenv("CX_TEST_SEED");
    g_seed = e && *e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("    seed %u (CX_TEST_SEED=%u replays the kill points)\n", g_seed, g_seed);
    srand(g_seed);
    snprintf(E.dir, sizeof E.dir, "/tmp/cxsc-resume-XXXXXX");
    if (!mkdtemp(E.dir))
        return -1;
    char dirarg[128];
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space", E.dir);
    const char *sargs[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--no-udp",
                           "--fsync=none", "--quiet", NULL};
    if (proc_start(&E.space, sargs, 0) < 0)
        return -1;
    word(E.space.line, 1, E.space_addr, sizeof E.space_addr);
    snprintf(E.sock_rd, sizeof E.sock_rd, "%s/rd.sock", E.dir);
    if (sidecar_start(&E.rd, E.sock_rd) < 0)
        return -1;
    E_up = 1;
    return 0;
}

#define FAIL(...) do { fprintf(stderr, "  app %d: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, " (%s)\n", cx_errmsg()); _exit(1); } while (0)

static void seg_fill(uint8_t *b, uint64_t id)
{
    memcpy(b, &id, 8);
    for (int k = 8; k < SEG_BYTES; k++)
        b[k] = (uint8_t)(id * 13 + (uint64_t)k);
}

/* The id a segment carries, or -1 when its bytes are not what seg_fill wrote. */
static int64_t seg_check(const uint8_t *b, long len)
{
    uint64_t id;
    if (len != SEG_BYTES)
        return -1;
    memcpy(&id, b, 8);
    for (int k = 8; k < SEG_BYTES; k++)
        if (b[k] != (uint8_t)(id * 13 + (uint64_t)k))
            return -1;
    return (int64_t)id;
}

/* What the space says of a pipe: 0 and *info, or a negative errno. */
static int space_lookup(const char *name, struct cx_space_pipe_info *info)
{
    struct cx_space_client *c;
    int rc = cx_space_connect(E.space_addr, &c);
    if (rc == 0) {
        rc = cx_space_lookup(c, name, info);
        cx_space_disconnect(c);
    }
    return rc;
}

/* ---- the applications (forked children) ---- */

/* Reads the pipe through the reader's sidecar to its end: exit 0 when it got exactly
 * 0..N-1, once each, in order. */
static void app_reader_at(const char *addr, const char *name)
{
    if (cx_sc_connect(E.sock_rd) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(addr, NULL), r = s < 0 ? -1 : cx_sc_pi_attach(name, s);
    if (r < 0)
        FAIL("attach %s", name);
    uint8_t b[256];
    long n;
    int64_t next = 0;
    while ((n = cx_sc_pi_read_timeout(r, b, sizeof b, NULL, 60000)) >= 0) {
        int64_t id = seg_check(b, n);
        if (id != next)
            FAIL("segment %lld of '%s' is %lld (%ld bytes): want %lld", (long long)next, name,
                 (long long)id, n, (long long)next);
        next++;
    }
    if (errno != EPIPE || next != N)
        FAIL("'%s' ended after %lld segments (errno %d), want %d", name, (long long)next, errno, N);
    _exit(0);
}

static void app_reader(const char *name) { app_reader_at(E.space_addr, name); }

/* Writes 0..N-1 (mode PI_CREATE) or replays them (PI_APPEND) through the sidecar at sock,
 * counting in *progress; closes the pipe at the end when `close_at_end`. */
static void app_writer(const char *sock, const char *name, int mode, _Atomic long *progress)
{
    if (cx_sc_connect(sock) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(E.space_addr, NULL), w = s < 0 ? -1 : cx_sc_pi_create(name, s, mode);
    if (w < 0)
        FAIL("pi_create '%s' mode %d", name, mode);
    uint8_t b[SEG_BYTES];
    for (uint64_t i = 0; i < N; i++) {
        seg_fill(b, i);
        if (cx_sc_pi_write(w, b, sizeof b, NULL) != SEG_BYTES)
            FAIL("write %llu", (unsigned long long)i);
        if (progress) {
            atomic_store(progress, (long)i + 1);
            usleep(100); /* the first writer is slow enough to be caught mid-stream */
        }
    }
    if (cx_sc_pi_close(w) < 0)
        FAIL("close");
    _exit(0);
}

/* ---- tests ---- */

/* the embedded call itself, in a child (the pipe runtime's threads stay out of the parent) */
static void app_embedded(void)
{
    int s = pi_space_open(E.space_addr, NULL);
    int w = s < 0 ? -1 : pi_create("abandon-embedded", s, PI_CREATE);
    int r = s < 0 ? -1 : pi_attach("abandon-embedded", s);
    if (w < 0 || r < 0)
        FAIL("open");
    uint8_t b[256];
    for (uint64_t i = 0; i < 10; i++) {
        seg_fill(b, i);
        if (pi_write(w, b, SEG_BYTES, NULL) != SEG_BYTES)
            FAIL("write");
    }
    errno = 0;
    if (pi_abandon(r) != -1 || errno != EBADF)
        FAIL("pi_abandon of a reader: errno %d", errno);
    if (pi_abandon(w) != 0)
        FAIL("pi_abandon");
    errno = 0;
    if (pi_write(w, b, SEG_BYTES, NULL) != -1 || errno != EBADF)
        FAIL("pi_write after pi_abandon: errno %d", errno);
    errno = 0;
    if (pi_abandon(w) != -1 || errno != EBADF || pi_abandon(-1) != -1 || pi_abandon(1 << 20) != -1)
        FAIL("pi_abandon twice: errno %d", errno);
    struct cx_space_pipe_info info;
    if (space_lookup("abandon-embedded", &info) < 0)
        FAIL("lookup");
    if (info.ended || info.writer_open || info.last_id != 10)
        FAIL("after pi_abandon the space says ended %d, writer %d, last %llu: want 0, 0, 10",
             info.ended, info.writer_open, (unsigned long long)info.last_id);
    /* the reader has the ten, and no end */
    for (int64_t i = 0; i < 10; i++)
        if (seg_check(b, pi_read_timeout(r, b, sizeof b, NULL, 10000)) != i)
            FAIL("read %lld", (long long)i);
    errno = 0;
    if (pi_read_timeout(r, b, sizeof b, NULL, 300) != -1 || errno != ETIMEDOUT)
        FAIL("a read after the abandoned writer's segments: errno %d, want ETIMEDOUT", errno);
    /* PI_CREATE still refuses (the pipe has segments); PI_APPEND continues */
    errno = 0;
    if (pi_create("abandon-embedded", s, PI_CREATE) != -1 || errno != EEXIST)
        FAIL("PI_CREATE after abandon: errno %d", errno);
    if ((w = pi_create("abandon-embedded", s, PI_APPEND)) < 0)
        FAIL("PI_APPEND after abandon");
    for (uint64_t i = 0; i < 20; i++) {
        seg_fill(b, i);
        if (pi_write(w, b, SEG_BYTES, NULL) != SEG_BYTES)
            FAIL("replay %llu", (unsigned long long)i);
    }
    if (pi_close(w) < 0)
        FAIL("close");
    for (int64_t i = 10; i < 20; i++)
        if (seg_check(b, pi_read_timeout(r, b, sizeof b, NULL, 10000)) != i)
            FAIL("read %lld after the APPEND", (long long)i);
    errno = 0;
    if (pi_read_timeout(r, b, sizeof b, NULL, 10000) != -1 || errno != EPIPE)
        FAIL("the end: errno %d", errno);
    _exit(0);
}

CX_TEST(abandon_leaves_the_pipe_open_for_append)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t a = fork();
    if (a == 0)
        app_embedded();
    CX_CHECK_EQ_INT(wait_child(a, 60), 0);
}

/* Starts the reader and a slow first writer through the sidecar at sock, waits until the
 * writer wrote a random number of segments (between 10% and 70% of N) and returns with it
 * still writing; *writer is its pid. */
static int start_stream(const char *name, const char *sock, _Atomic long *progress, pid_t *reader,
                        pid_t *writer, long *kill_at)
{
    *kill_at = N / 10 + rand() % (N * 6 / 10);
    atomic_store(progress, 0);
    if ((*reader = fork()) == 0)
        app_reader(name);
    if ((*writer = fork()) == 0)
        app_writer(sock, name, PI_CREATE, progress);
    for (int i = 0; i < 60000 && atomic_load(progress) < *kill_at; i++)
        usleep(1000);
    return atomic_load(progress) >= *kill_at && atomic_load(progress) < N ? 0 : -1;
}

/* After the stop: the space holds part of the stream, not ended, with no writer. */
static int check_abandoned(const char *name, long written)
{
    struct cx_space_pipe_info info = {0};
    int rc = -1;
    for (int i = 0; i < 500; i++) { /* the sidecar lets go of the writer within moments */
        if ((rc = space_lookup(name, &info)) == 0 && !info.writer_open)
            break;
        usleep(10000);
    }
    printf("    '%s': the writer had written %ld; the space holds %llu, ended %d, writer %d\n", name,
           written, (unsigned long long)info.last_id, info.ended, info.writer_open);
    return rc == 0 && !info.ended && !info.writer_open && info.last_id >= (uint64_t)written &&
                   info.last_id < N ? 0 : -1;
}

/* The sidecar's stderr (a pipe) so far, without blocking. */
static void read_log(struct proc *p, char *buf, size_t cap)
{
    size_t n = 0;
    struct pollfd pf = {.fd = p->err, .events = POLLIN};
    while (n < cap - 1 && poll(&pf, 1, 200) == 1) {
        ssize_t r = read(p->err, buf + n, cap - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
}

CX_TEST(app_killed_mid_stream_a_new_app_appends)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    struct proc sc;
    char sock[128];
    snprintf(sock, sizeof sock, "%s/w1.sock", E.dir);
    CX_CHECK_EQ_INT(sidecar_start(&sc, sock), 0);
    _Atomic long *progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CX_CHECK(progress != MAP_FAILED);
    pid_t r, w;
    long kill_at;
    CX_CHECK_EQ_INT(start_stream("resume-app", sock, progress, &r, &w, &kill_at), 0);
    kill(w, SIGKILL);
    long written = atomic_load(progress);
    CX_CHECK_EQ_INT(wait_child(w, 10), 128 + SIGKILL);
    CX_CHECK_EQ_INT(check_abandoned("resume-app", written), 0);
    pid_t w2 = fork(); /* the application restarted in the same pod: the same sidecar */
    if (w2 == 0)
        app_writer(sock, "resume-app", PI_APPEND, NULL);
    CX_CHECK_EQ_INT(wait_child(w2, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    static char log[1 << 16];
    read_log(&sc, log, sizeof log);
    CX_CHECK(strstr(log, "abandoning it") && strstr(log, "resume-app"));
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
    munmap((void *)progress, 4096);
}

CX_TEST(sidecar_terminated_mid_stream_a_new_one_appends)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    struct proc sc;
    char sock[128];
    snprintf(sock, sizeof sock, "%s/w2.sock", E.dir);
    CX_CHECK_EQ_INT(sidecar_start(&sc, sock), 0);
    _Atomic long *progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CX_CHECK(progress != MAP_FAILED);
    pid_t r, w;
    long kill_at;
    CX_CHECK_EQ_INT(start_stream("resume-sidecar", sock, progress, &r, &w, &kill_at), 0);
    /* the pod is deleted: its sidecar stops (SIGTERM), the application loses it */
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
    long written = atomic_load(progress);
    CX_CHECK(wait_child(w, 10) == 1); /* its next write failed: the sidecar is gone */
    CX_CHECK_EQ_INT(check_abandoned("resume-sidecar", written), 0);
    CX_CHECK_EQ_INT(sidecar_start(&sc, sock), 0); /* the pod again */
    pid_t w2 = fork();
    if (w2 == 0)
        app_writer(sock, "resume-sidecar", PI_APPEND, NULL);
    CX_CHECK_EQ_INT(wait_child(w2, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
    munmap((void *)progress, 4096);
}

/* Writes through the sidecar at sock to the space at addr (timeout 500 ms) until a write
 * fails (the space is gone), abandons the writer (it fails: nothing to wait for the
 * acknowledgements from), then opens the pipe with PI_APPEND again until the space is back,
 * replays every write and closes. */
static void app_writer_through_outage(const char *sock, const char *addr, const char *name, _Atomic long *progress)
{
    if (cx_sc_connect(sock) < 0)
        FAIL("connect");
    int s = cx_sc_pi_space_open(addr, &(struct pi_options){.timeout_ms = 500});
    int w = s < 0 ? -1 : cx_sc_pi_create(name, s, PI_CREATE);
    if (w < 0)
        FAIL("pi_create '%s'", name);
    uint8_t b[SEG_BYTES];
    uint64_t i;
    for (i = 0; i < N; i++) {
        seg_fill(b, i);
        if (cx_sc_pi_write(w, b, sizeof b, NULL) != SEG_BYTES)
            break;
        atomic_store(progress, (long)i + 1);
        usleep(100);
    }
    if (i == N)
        FAIL("every write succeeded: the space was not stopped mid-stream");
    errno = 0;
    if (cx_sc_pi_abandon(w) != -1 || errno == ECONNRESET || errno == ENOENT)
        FAIL("pi_abandon with the space gone: errno %d, want a failure from the space, not the sidecar", errno);
    for (int t = 0; (w = cx_sc_pi_create(name, s, PI_APPEND)) < 0; t++)
        if (t == 200)
            FAIL("PI_APPEND after the space came back");
        else
            usleep(50000);
    for (i = 0; i < N; i++) {
        seg_fill(b, i);
        if (cx_sc_pi_write(w, b, sizeof b, NULL) != SEG_BYTES)
            FAIL("replay %llu", (unsigned long long)i);
    }
    if (cx_sc_pi_close(w) < 0)
        FAIL("close");
    _exit(0);
}

CX_TEST(space_gone_mid_stream_abandon_fails_cleanly_and_append_continues)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    /* a space of its own, restarted on the same address and store */
    struct proc sp, sc;
    char dirarg[128], listen[96], addr[64], sock[128];
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space2", E.dir);
    const char *sargs[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--no-udp", "--fsync=none", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&sp, sargs, 0), 0);
    word(sp.line, 1, addr, sizeof addr);
    snprintf(listen, sizeof listen, "--listen=%s", addr);
    snprintf(sock, sizeof sock, "%s/w3.sock", E.dir);
    CX_CHECK_EQ_INT(sidecar_start(&sc, sock), 0);
    _Atomic long *progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CX_CHECK(progress != MAP_FAILED);
    atomic_store(progress, 0);
    long kill_at = N / 10 + rand() % (N * 6 / 10);
    pid_t r = fork();
    if (r == 0)
        app_reader_at(addr, "resume-outage");
    pid_t w = fork();
    if (w == 0)
        app_writer_through_outage(sock, addr, "resume-outage", progress);
    for (int i = 0; i < 60000 && atomic_load(progress) < kill_at; i++)
        usleep(1000);
    CX_CHECK(atomic_load(progress) >= kill_at);
    CX_CHECK_EQ_INT(proc_stop(&sp, SIGKILL), 128 + SIGKILL);
    usleep(1500000); /* the writer's timeout passes: its write fails, it abandons */
    const char *sargs2[] = {"--role=space", dirarg, listen, "--no-udp", "--fsync=none", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&sp, sargs2, 0), 0);
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    CX_CHECK(waitpid(sc.pid, NULL, WNOHANG) == 0); /* the sidecar lived through it all */
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
    CX_CHECK_EQ_INT(proc_stop(&sp, SIGTERM), 0);
    munmap((void *)progress, 4096);
}

CX_TEST(teardown)
{
    if (E_up <= 0)
        return;
    CX_CHECK_EQ_INT(proc_stop(&E.rd, SIGTERM), 0);
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGTERM), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", E.dir);
    CX_CHECK_EQ_INT(system(cmd), 0);
}

CX_TEST_MAIN()
