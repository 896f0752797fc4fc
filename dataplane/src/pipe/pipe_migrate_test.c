/* Migration of pipe ends (seed pi-channels.txt, Figure 7, the hold list; Figure 8): a reader
 * and a writer move to other processes (other addresses) mid-stream, alone and together; a
 * migration whose new side never comes; bad blobs. Real processes (fork), a real space
 * server in a child, real TCP. The invariants checked every time: the reading side gets
 * exactly the written sequence (nothing acknowledged lost, nothing twice, in order).
 *
 * The states these add to the pipe's diagram (README.md):
 *   reader-held   a reader is migrating: the space holds its registration, the writer has
 *                 its address on the hold list (no link, no reconnect) and sends to the space
 *   writer-held   the writer is migrating: the space keeps its single-writer slot
 */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "pipe/cx_pipe_int.h"
#include "pipe/pipe_testutil.h"
#include "space/cx_space_client.h"

#include <sys/mman.h>

/* What the processes of one test share (MAP_SHARED): flags, the blob, results. */
struct shared {
    int ready, out_done, go, in_done, end, go2;
    long blob_len, blob2_len;
    uint8_t blob[PI_MIGRATE_MAX], blob2[PI_MIGRATE_MAX];
    int64_t pos;
    int old_links;              /* direct links into the old reader after it migrated out */
    struct pi_reader_stats rst;
    struct pi_writer_stats wst, wst2;
};

static struct shared *shared_new(void)
{
    void *p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0, sizeof(struct shared));
    return p;
}

static void set_flag(int *f) { __atomic_store_n(f, 1, __ATOMIC_SEQ_CST); }

static int wait_flag(int *f, int ms)
{
    for (int i = 0; i < ms; i++) {
        if (__atomic_load_n(f, __ATOMIC_SEQ_CST))
            return 0;
        usleep(1000);
    }
    return -1;
}

static int child_ok(pid_t pid)
{
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    if (!WIFEXITED(st))
        return -1000 - (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* An old reader's process after pi_migrate_out: it stays up (its address could still be
 * reached) until told to end, and records whether a writer connected to it again. */
static void old_reader_linger(struct shared *sh, uint64_t pipe_id)
{
    while (!__atomic_load_n(&sh->end, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&g_pi.mu);
        int n = pi_rt_inbound_links(pipe_id);
        pthread_mutex_unlock(&g_pi.mu);
        if (n > sh->old_links)
            sh->old_links = n;
        usleep(2000);
    }
}

static uint64_t blob_pipe_id(const uint8_t *b)
{
    uint64_t v;
    memcpy(&v, b + 8, 8); /* the blob's layout (cx_pipe_migrate.c), little-endian hosts */
    return v;
}

/* Reads segments from..to-1 (not to the end) and checks each. */
static int read_range(int r, uint64_t from, uint64_t to)
{
    uint8_t buf[4096];
    for (uint64_t i = from; i < to; i++)
        if (!seg_ok(i, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 10000)))
            return -1;
    return 0;
}

/* fork, with the child dying with the test (no process outlives it). */
static pid_t fork_child(void)
{
    pid_t pid = fork();
    if (pid == 0)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    return pid;
}

/* The end of a test that shares sh with its processes. */
static void migrate_test_end(struct space_proc *sp, struct shared *sh)
{
    pi_shutdown();
    munmap(sh, sizeof *sh);
    space_down(sp);
}

/* In a child: migrates d out (held hold_ms) into blob, its length in *len; exits 3 when
 * that fails. */
static void migrate_out_or_exit(int d, int hold_ms, uint8_t blob[PI_MIGRATE_MAX], long *len)
{
    long n = pi_migrate_out(d, hold_ms, blob, PI_MIGRATE_MAX);
    if (n <= 0)
        _exit(3);
    *len = n;
}

/* A reader's first process: attaches to name, sets ready, reads 0..upto-1, migrates out
 * (held hold_ms) into sh->blob, checks its descriptor is gone, sets out_done; then, when
 * linger, stays up as old_reader_linger says. Never returns. */
static void reader_reads_then_migrates_out(struct shared *sh, const char *addr, const char *name,
                                           uint64_t upto, int hold_ms, int linger)
{
    int s = pi_space_open(addr, NULL);
    int r = pi_attach(name, s);
    set_flag(&sh->ready);
    if (r < 0 || read_range(r, 0, upto) < 0)
        _exit(2);
    migrate_out_or_exit(r, hold_ms, sh->blob, &sh->blob_len);
    if (pi_tell(r) != -1 || errno != EBADF) /* the descriptor is gone here */
        _exit(4);
    set_flag(&sh->out_done);
    if (linger)
        old_reader_linger(sh, blob_pipe_id(sh->blob));
    _exit(0);
}

/* A writer's first process: creates name, writes 0..upto-1 (100 us apart), its stats in *st,
 * migrates out (held 10 s) into blob (*len), checks its descriptor is gone, sets *done.
 * Never returns. */
static void writer_writes_then_migrates_out(const char *addr, const char *name, uint64_t upto,
                                            struct pi_writer_stats *st, uint8_t blob[PI_MIGRATE_MAX],
                                            long *len, int *done)
{
    int s = pi_space_open(addr, NULL);
    int w = pi_create(name, s, PI_CREATE);
    if (w < 0 || write_n(w, 0, upto, 100) < 0)
        _exit(2);
    pi_writer_stats(w, st);
    migrate_out_or_exit(w, 10000, blob, len);
    if (pi_write(w, "x", 1, NULL) != -1 || errno != EBADF)
        _exit(4);
    set_flag(done);
    _exit(0); /* the old process is gone */
}

/* A reader's new process: migrates sh->blob in, its position in sh->pos, sets in_done, reads
 * to the end, its stats in sh->rst. Never returns: exits 0 when it read exactly from..to-1. */
static void reader_migrates_in_and_reads(struct shared *sh, const char *addr, uint64_t from, uint64_t to)
{
    int s = pi_space_open(addr, NULL);
    int r = pi_migrate_in(sh->blob, (size_t)sh->blob_len, s);
    if (r < 0)
        _exit(2);
    sh->pos = pi_tell(r);
    set_flag(&sh->in_done);
    long n = read_all(r, from, to, 20000);
    pi_reader_stats(r, &sh->rst);
    _exit(n == (long)(to - from) ? 0 : 3);
}

/* ---- a reader moves while the writer streams: readwrite -> reader-held -> readwrite ---- */

CX_TEST(transition_readwrite_to_reader_held_to_readwrite_by_migrate)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct shared *sh = shared_new();
    CX_CHECK(sh);
    pid_t r1 = fork_child();
    if (r1 == 0) /* the reader's first process: reads 500, then migrates out */
        reader_reads_then_migrates_out(sh, sp.addr, "m1", 500, 10000, 1);
    pid_t r2 = fork_child();
    if (r2 == 0) { /* its second process: another listener, another address */
        if (wait_flag(&sh->go, 30000) < 0)
            _exit(2);
        reader_migrates_in_and_reads(sh, sp.addr, 500, 4000);
    }
    CX_CHECK_EQ_INT(wait_flag(&sh->ready, 10000), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("m1", s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 1000, 200), 0); /* the reader migrates out meanwhile */
    CX_CHECK_EQ_INT(wait_flag(&sh->out_done, 10000), 0);
    CX_CHECK_EQ_INT(write_n(w, 1000, 1300, 0), 0); /* held: to the space only */
    struct pi_writer_stats ws;
    CX_CHECK_EQ_INT(pi_writer_stats(w, &ws), 0);
    CX_CHECK(ws.holds == 1 && ws.held == 1 && ws.direct == 0 && ws.resumed == 0);
    set_flag(&sh->go);
    CX_CHECK_EQ_INT(wait_flag(&sh->in_done, 10000), 0);
    CX_CHECK_EQ_INT(sh->pos, 500); /* the position moved with it */
    CX_CHECK_EQ_INT(write_n(w, 1300, 4000, 50), 0);
    CX_CHECK_EQ_INT(pi_writer_stats(w, &ws), 0);
    printf("    writer: %llu held segments resent to the reader's new address\n",
           (unsigned long long)ws.resent);
    /* the hold ended by the reader reappearing; a direct link to its new address; what was
     * held (1000..1299, all within the retained window, less the up to 16 the writer wrote
     * before it collected the push) went there */
    CX_CHECK(ws.held == 0 && ws.resumed == 1 && ws.expired == 0 && ws.direct == 1);
    CX_CHECK(ws.resent >= 280);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(child_ok(r2), 0); /* exactly 500..3999, once each, in order */
    CX_CHECK(sh->rst.from_writer > 0);
    CX_CHECK_EQ_INT(sh->rst.from_writer + sh->rst.from_space, 3500);
    set_flag(&sh->end);
    CX_CHECK_EQ_INT(child_ok(r1), 0);
    CX_CHECK_EQ_INT(sh->old_links, 0); /* never linked to the old address again */
    migrate_test_end(&sp, sh);
}

/* ---- the writer moves while a reader reads: readwrite -> writer-held -> readwrite ------ */

CX_TEST(transition_readwrite_to_writer_held_to_readwrite_by_migrate)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct shared *sh = shared_new();
    CX_CHECK(sh);
    pid_t r = fork_child();
    if (r == 0) {
        int s = pi_space_open(sp.addr, NULL);
        int d = pi_attach("m2", s);
        set_flag(&sh->ready);
        long n = d >= 0 ? read_all(d, 0, 3000, 20000) : -1;
        pi_reader_stats(d, &sh->rst);
        _exit(n == 3000 ? 0 : 2);
    }
    CX_CHECK_EQ_INT(wait_flag(&sh->ready, 10000), 0);
    pid_t w1 = fork_child();
    if (w1 == 0)
        writer_writes_then_migrates_out(sp.addr, "m2", 1500, &sh->wst, sh->blob, &sh->blob_len, &sh->out_done);
    CX_CHECK_EQ_INT(wait_flag(&sh->out_done, 20000), 0);
    CX_CHECK_EQ_INT(child_ok(w1), 0);
    CX_CHECK(sh->wst.direct == 1); /* it streamed to the reader directly */
    /* writer-held: every segment it wrote is acknowledged, its slot is kept */
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(sp.addr, "m2", &in), 0);
    CX_CHECK(in.last_id == 1500 && !in.ended && !in.writer_open);
    int s = pi_space_open(sp.addr, NULL);
    CX_CHECK_EQ_INT(pi_create("m2", s, PI_APPEND), -1);
    CX_CHECK_EQ_INT(errno, EBUSY);
    CX_CHECK(strstr(cx_errmsg(), "migrating"));
    pid_t w2 = fork_child();
    if (w2 == 0) {
        int s2 = pi_space_open(sp.addr, NULL);
        int w = pi_migrate_in(sh->blob, (size_t)sh->blob_len, s2);
        if (w < 0)
            _exit(2);
        pi_writer_stats(w, &sh->wst2); /* connected to the reader at once */
        if (pi_migrate_in(sh->blob, (size_t)sh->blob_len, s2) != -1 || errno != EBUSY)
            _exit(3); /* a blob is used once */
        if (write_n(w, 1500, 3000, 100) < 0 || pi_close(w) < 0)
            _exit(4);
        _exit(0);
    }
    CX_CHECK_EQ_INT(child_ok(w2), 0);
    CX_CHECK_EQ_INT(sh->wst2.direct, 1);
    CX_CHECK_EQ_INT(child_ok(r), 0); /* exactly 0..2999 */
    CX_CHECK(sh->rst.from_writer > 0);
    CX_CHECK_EQ_INT(space_lookup(sp.addr, "m2", &in), 0);
    CX_CHECK(in.last_id == 3000 && in.ended);
    migrate_test_end(&sp, sh);
}

/* ---- both ends move at about the same time ----------------------------------------- */

CX_TEST(reader_and_writer_migrate_together)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct shared *sh = shared_new();
    CX_CHECK(sh);
    pid_t r1 = fork_child();
    if (r1 == 0)
        reader_reads_then_migrates_out(sh, sp.addr, "m3", 1400, 10000, 0);
    CX_CHECK_EQ_INT(wait_flag(&sh->ready, 10000), 0);
    pid_t w1 = fork_child();
    if (w1 == 0)
        writer_writes_then_migrates_out(sp.addr, "m3", 1500, &sh->wst, sh->blob2, &sh->blob2_len, &sh->go2);
    CX_CHECK_EQ_INT(child_ok(w1), 0);
    CX_CHECK_EQ_INT(child_ok(r1), 0);
    CX_CHECK(sh->out_done && sh->go2);
    pid_t w2 = fork_child();
    if (w2 == 0) {
        int s = pi_space_open(sp.addr, NULL);
        int w = pi_migrate_in(sh->blob2, (size_t)sh->blob2_len, s);
        if (w < 0 || wait_flag(&sh->in_done, 10000) < 0)
            _exit(2);
        if (write_n(w, 1500, 3500, 100) < 0)
            _exit(3);
        pi_writer_stats(w, &sh->wst2);
        _exit(pi_close(w) == 0 ? 0 : 4);
    }
    pid_t r2 = fork_child();
    if (r2 == 0)
        reader_migrates_in_and_reads(sh, sp.addr, 1400, 3500);
    CX_CHECK_EQ_INT(child_ok(r2), 0); /* exactly 1400..3499 */
    CX_CHECK_EQ_INT(child_ok(w2), 0);
    CX_CHECK_EQ_INT(sh->wst2.direct, 1); /* the new writer found the new reader */
    CX_CHECK(sh->rst.from_writer > 0);
    migrate_test_end(&sp, sh);
}

/* ---- the new side never comes: reader-held -> readwrite ends by time ----------------- */

CX_TEST(transition_reader_held_to_writing_by_hold_timeout)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct shared *sh = shared_new();
    CX_CHECK(sh);
    pid_t r1 = fork_child();
    if (r1 == 0) /* held for 1.5 s */
        reader_reads_then_migrates_out(sh, sp.addr, "m4", 300, 1500, 1);
    CX_CHECK_EQ_INT(wait_flag(&sh->ready, 10000), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("m4", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 300, 0), 0);
    uint64_t i = 300; /* writing on while the reader migrates out (the writer sees the hold) */
    for (; !__atomic_load_n(&sh->out_done, __ATOMIC_SEQ_CST) && i < 20000; i++)
        CX_CHECK_EQ_INT(write_n(w, i, i + 1, 1000), 0);
    CX_CHECK(sh->out_done);
    CX_CHECK_EQ_INT(write_n(w, i, i + 20, 0), 0);
    i += 20;
    struct pi_writer_stats ws;
    CX_CHECK_EQ_INT(pi_writer_stats(w, &ws), 0);
    CX_CHECK(ws.held == 1 && ws.expired == 0 && ws.direct == 0);
    for (double t0 = now_ms(); now_ms() - t0 < 1800; i++) /* the hold (1.5 s) ends meanwhile */
        CX_CHECK_EQ_INT(write_n(w, i, i + 1, 1000), 0);
    CX_CHECK_EQ_INT(pi_writer_stats(w, &ws), 0);
    CX_CHECK(ws.held == 0 && ws.expired == 1 && ws.resumed == 0 && ws.direct == 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    uint64_t total = i;
    printf("    %llu segments written, the reader held for 1.5 s from segment 300\n", (unsigned long long)total);
    /* the new side comes late, after the writer closed: it reads from the space */
    pid_t r2 = fork_child();
    if (r2 == 0)
        reader_migrates_in_and_reads(sh, sp.addr, 300, total);
    CX_CHECK_EQ_INT(child_ok(r2), 0); /* nothing lost: 300..total-1 */
    CX_CHECK(sh->rst.from_space == total - 300 && sh->rst.from_writer == 0);
    set_flag(&sh->end);
    CX_CHECK_EQ_INT(child_ok(r1), 0);
    CX_CHECK_EQ_INT(sh->old_links, 0);
    migrate_test_end(&sp, sh);
}

/* ---- the migrating writer's slot: kept, then freed by time ---------------------------- */

CX_TEST(transition_writer_held_to_writing_by_hold_timeout)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct shared *sh = shared_new();
    CX_CHECK(sh);
    pid_t w1 = fork_child();
    if (w1 == 0) { /* two writers migrate out, held 1 s; their new sides come late */
        int s = pi_space_open(sp.addr, NULL);
        int a = pi_create("m5a", s, PI_CREATE), b = pi_create("m5b", s, PI_CREATE);
        if (a < 0 || b < 0 || write_n(a, 0, 500, 0) < 0 || write_n(b, 0, 500, 0) < 0)
            _exit(2);
        if ((sh->blob_len = pi_migrate_out(a, 1000, sh->blob, sizeof sh->blob)) <= 0 ||
            (sh->blob2_len = pi_migrate_out(b, 1000, sh->blob2, sizeof sh->blob2)) <= 0)
            _exit(3);
        _exit(0);
    }
    CX_CHECK_EQ_INT(child_ok(w1), 0);
    /* held: the space refuses another writer (asked directly: pi_create would retry EBUSY
     * for 3 s, past this short hold) */
    struct cx_space_client *c;
    struct cx_space_pipe_info in;
    uint32_t h;
    CX_CHECK_EQ_INT(cx_space_connect(sp.addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_put(c, "m5b", CX_SP_APPEND, 0, "", &h, &in), -EBUSY);
    CX_CHECK(strstr(cx_errmsg(), "migrating"));
    cx_space_disconnect(c);
    usleep(1100000);
    int s = pi_space_open(sp.addr, NULL);
    /* m5a: nobody took the slot; the late new side opens it as PI_APPEND would */
    int w = pi_migrate_in(sh->blob, (size_t)sh->blob_len, s);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 500, 800, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("m5a", s);
    CX_CHECK_EQ_INT(read_all(r, 0, 800, 10000), 800);
    /* m5b: another writer took the freed slot and wrote: the late blob is stale */
    w = pi_create("m5b", s, PI_APPEND);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 501, 0), 0); /* replays 0..499, then one new */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(pi_migrate_in(sh->blob2, (size_t)sh->blob2_len, s), -1);
    CX_CHECK_EQ_INT(errno, ESTALE);
    printf("    stale writer blob: %s\n", cx_errmsg());
    r = pi_attach("m5b", s);
    CX_CHECK_EQ_INT(read_all(r, 0, 501, 10000), 501);
    migrate_test_end(&sp, sh);
}

/* ---- bad input: clear errors, nothing lost -------------------------------------------- */

CX_TEST(migrate_refuses_bad_blobs_and_loses_nothing)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("m6", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("m6", s);
    CX_CHECK_EQ_INT(read_range(r, 0, 40), 0);
    uint8_t blob[PI_MIGRATE_MAX], bad[PI_MIGRATE_MAX];
    CX_CHECK_EQ_INT(pi_migrate_out(r, 0, blob, 10), -1); /* too small: the reader stays */
    CX_CHECK_EQ_INT(errno, EMSGSIZE);
    CX_CHECK_EQ_INT(pi_migrate_out(r, -1, blob, sizeof blob), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK_EQ_INT(pi_migrate_out(999, 0, blob, sizeof blob), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_tell(r), 40);
    CX_CHECK_EQ_INT(read_range(r, 40, 41), 0);
    long n = pi_migrate_out(r, 2000, blob, sizeof blob); /* reading -> (migrating) */
    CX_CHECK(n > 0 && n <= PI_MIGRATE_MAX);
    CX_CHECK_EQ_INT(pi_tell(r), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_migrate_in(blob, (size_t)n - 1, s), -1); /* truncated */
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "truncated"));
    CX_CHECK_EQ_INT(pi_migrate_in(blob, 12, s), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK_EQ_INT(pi_migrate_in(NULL, 0, s), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    memcpy(bad, blob, (size_t)n);
    bad[20] ^= 0x40; /* a flipped bit in the position */
    CX_CHECK_EQ_INT(pi_migrate_in(bad, (size_t)n, s), -1);
    CX_CHECK_EQ_INT(errno, EBADMSG);
    CX_CHECK(strstr(cx_errmsg(), "corrupt"));
    memcpy(bad, blob, (size_t)n);
    bad[0] ^= 0xff;
    CX_CHECK_EQ_INT(pi_migrate_in(bad, (size_t)n, s), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK_EQ_INT(pi_migrate_in(blob, (size_t)n, 63), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    r = pi_migrate_in(blob, (size_t)n, s); /* after all that, the blob is still good */
    CX_CHECK(r >= 0);
    CX_CHECK_EQ_INT(pi_tell(r), 41);
    CX_CHECK_EQ_INT(read_all(r, 41, 100, 10000), 59);
    /* a blob for a pipe that was unlinked since */
    r = pi_attach("m6", s);
    CX_CHECK_EQ_INT(read_range(r, 0, 10), 0);
    n = pi_migrate_out(r, 2000, blob, sizeof blob);
    CX_CHECK(n > 0);
    CX_CHECK_EQ_INT(pi_unlink("m6", s), 0);
    CX_CHECK_EQ_INT(pi_migrate_in(blob, (size_t)n, s), -1);
    CX_CHECK_EQ_INT(errno, ENOENT);
    w = pi_create("m6", s, PI_CREATE); /* the name binds a new pipe: still not ours */
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(pi_migrate_in(blob, (size_t)n, s), -1);
    CX_CHECK_EQ_INT(errno, ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "another pipe"));
    pi_shutdown();
    space_down(&sp);
}

/* A writer cannot migrate while its space is down: a clear error, and the writer goes on
 * (its next write recovers the space) without losing a segment. */
CX_TEST(writer_migrate_out_without_its_space_keeps_the_writer)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct pi_options o = {.timeout_ms = 3000};
    int s = pi_space_open(sp.addr, &o);
    int w = pi_create("m7", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 200, 0), 0);
    space_kill(&sp);
    uint8_t blob[PI_MIGRATE_MAX];
    CX_CHECK_EQ_INT(pi_migrate_out(w, 0, blob, sizeof blob), -1);
    printf("    migrating without the space: errno %d: %s\n", errno, cx_errmsg());
    CX_CHECK(errno == ECONNRESET || errno == ETIMEDOUT);
    CX_CHECK_EQ_INT(space_restart(&sp), 0);
    CX_CHECK_EQ_INT(write_n(w, 200, 400, 0), 0); /* the same descriptor */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("m7", s);
    CX_CHECK_EQ_INT(read_all(r, 0, 400, 10000), 400);
    pi_shutdown();
    space_down(&sp);
}

/* The writer links to a process's address, not to one reader: a reader that migrates away
 * from a process where another reader of the pipe stays does not hold the address, and both
 * get exactly the sequence. */
CX_TEST(reader_migrating_beside_another_reader_keeps_the_address)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int ra = pi_attach("m8", s), rb = pi_attach("m8", s);
    int w = pi_create("m8", s, PI_CREATE);
    CX_CHECK(ra >= 0 && rb >= 0 && w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 300, 0), 0);
    CX_CHECK_EQ_INT(read_range(ra, 0, 100), 0);
    uint8_t blob[PI_MIGRATE_MAX];
    long n = pi_migrate_out(ra, 0, blob, sizeof blob);
    CX_CHECK(n > 0);
    pid_t r2 = fork_child();
    if (r2 == 0) {
        int s2 = pi_space_open(sp.addr, NULL);
        int r = pi_migrate_in(blob, (size_t)n, s2);
        _exit(r >= 0 && read_all(r, 100, 1000, 20000) == 900 ? 0 : 2);
    }
    CX_CHECK_EQ_INT(write_n(w, 300, 1000, 100), 0);
    struct pi_writer_stats ws;
    CX_CHECK_EQ_INT(pi_writer_stats(w, &ws), 0);
    CX_CHECK(ws.holds == 0 && ws.direct >= 1); /* still linked to this process (rb) */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(child_ok(r2), 0);
    CX_CHECK_EQ_INT(read_all(rb, 0, 1000, 10000), 1000);
    struct pi_reader_stats st;
    CX_CHECK_EQ_INT(pi_reader_stats(rb, &st), 0);
    CX_CHECK(st.from_writer > 0);
    pi_shutdown();
    space_down(&sp);
}

CX_TEST_MAIN()
