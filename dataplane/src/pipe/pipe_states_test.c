/* Every transition of the paper's state diagram of a pipe (seed pi-channels.txt, Figure 3,
 * "Semantics of π-channel Operations"), one test each, named transition_<from>_to_<to>_by_<call>.
 *
 * The states, as the text describes them (the top three: the pipe's own lifecycle; the rest:
 * with a concurrent reader), plus the one pi_attach's "does not block even if π-channel is
 * absent" adds:
 *   absent      the name is not bound
 *   attached    a reader attached before any writer: bound, no segments, nothing to read yet
 *   writing     a writer has it open, no reader
 *   readwrite   a writer and at least one reader (Read/Write)
 *   closed      the writer closed it, no reader: a stored file
 *   reading     closed, a reader reads it from the space (Reading)
 *   deleted     unlinked: the name is free (absent again) and the segments are gone
 * Every test checks the state it ends in by what the calls answer (lookup through the
 * space's client, EBUSY/EEXIST, reads and their end), against a real space server. */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "pipe/pipe_testutil.h"
#include "space/cx_space_client.h"

static uint8_t buf_for_tests[16];

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct fixture {
    struct space_proc sp;
    int s;
};

static int fx_up(struct fixture *f)
{
    if (space_up(&f->sp) < 0)
        return -1;
    f->s = pi_space_open(f->sp.addr, NULL);
    return f->s >= 0 ? 0 : -1;
}

static void fx_down(struct fixture *f)
{
    pi_shutdown();
    space_down(&f->sp);
}

/* ---- the lifecycle: absent -> writing -> closed -> deleted --------------------------- */

CX_TEST(transition_absent_to_writing_by_create)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t1", &in), -ENOENT); /* absent */
    int w = pi_create("t1", f.s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t1", &in), 0); /* writing: bound, writer open */
    CX_CHECK(in.writer_open && !in.ended && in.last_id == 0);
    CX_CHECK_EQ_INT(pi_create("t1", f.s, PI_CREATE), -1); /* the one writer */
    CX_CHECK_EQ_INT(errno, EBUSY);
    fx_down(&f);
}

CX_TEST(transition_writing_to_writing_by_write)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t2", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 300, 0), 0);
    struct cx_space_pipe_info in;
    for (int i = 0; i < 100; i++) { /* the space acknowledges in the background */
        CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t2", &in), 0);
        if (in.last_id == 300)
            break;
        usleep(20000);
    }
    CX_CHECK(in.writer_open && !in.ended && in.last_id == 300); /* still writing, 300 held */
    fx_down(&f);
}

CX_TEST(transition_writing_refuses_unlink)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t3", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 10, 0), 0);
    CX_CHECK_EQ_INT(pi_unlink("t3", f.s), -1); /* the paper: -1 for open pipes */
    CX_CHECK_EQ_INT(errno, EBUSY);
    CX_CHECK_EQ_INT(write_n(w, 10, 20, 0), 0); /* still writing */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t3", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 20, 10000), 20);
    fx_down(&f);
}

CX_TEST(transition_writing_to_closed_by_close)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t4", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 200, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0); /* returns once the space holds the end */
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t4", &in), 0);
    CX_CHECK(!in.writer_open && in.ended && in.last_id == 200);
    CX_CHECK_EQ_INT(pi_write(w, "x", 1, NULL), -1); /* the descriptor is gone */
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_create("t4", f.s, PI_CREATE), -1); /* closed, not absent */
    CX_CHECK_EQ_INT(errno, EEXIST);
    fx_down(&f);
}

CX_TEST(transition_closed_to_deleted_by_unlink)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t5", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 50, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct cx_space_pipe_info before, in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t5", &before), 0);
    CX_CHECK_EQ_INT(pi_unlink("t5", f.s), 0);
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t5", &in), -ENOENT); /* the name is free */
    CX_CHECK_EQ_INT(pi_unlink("t5", f.s), -1);
    CX_CHECK_EQ_INT(errno, ENOENT);
    fx_down(&f);
}

CX_TEST(transition_deleted_to_writing_by_create)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t6", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 50, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct cx_space_pipe_info old, in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t6", &old), 0);
    CX_CHECK_EQ_INT(pi_unlink("t6", f.s), 0);
    w = pi_create("t6", f.s, PI_CREATE); /* a new, empty pipe under the old name */
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t6", &in), 0);
    CX_CHECK(in.pipe_id != old.pipe_id && in.last_id == 0 && in.writer_open);
    CX_CHECK_EQ_INT(write_n(w, 0, 5, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t6", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 5, 10000), 5); /* none of the old 50 */
    fx_down(&f);
}

/* ---- with readers ------------------------------------------------------------------- */

CX_TEST(transition_absent_to_attached_by_attach)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    double t0 = now_ms();
    int r = pi_attach("t7", f.s); /* does not block although nothing exists */
    CX_CHECK(r >= 0);
    CX_CHECK(now_ms() - t0 < 2000);
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t7", &in), 0); /* bound by the reader's get */
    CX_CHECK(!in.writer_open && !in.ended && in.last_id == 0);
    uint8_t b[16];
    CX_CHECK_EQ_INT(pi_read_timeout(r, b, sizeof b, NULL, 200), -1); /* nothing yet, no end */
    CX_CHECK_EQ_INT(errno, ETIMEDOUT);
    CX_CHECK_EQ_INT(pi_tell(r), 0);
    fx_down(&f);
}

CX_TEST(transition_attached_to_readwrite_by_create)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int r = pi_attach("t8", f.s);
    int w = pi_create("t8", f.s, PI_CREATE); /* gets the reader's address from the space */
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 500, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(read_all(r, 0, 500, 10000), 500);
    struct pi_reader_stats st;
    CX_CHECK_EQ_INT(pi_reader_stats(r, &st), 0);
    CX_CHECK(st.from_writer > 0); /* read/write: the writer streamed to the reader */
    CX_CHECK(st.from_writer + st.from_space == 500);
    fx_down(&f);
}

CX_TEST(transition_writing_to_readwrite_by_attach)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t9", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 200, 0), 0);
    int r = pi_attach("t9", f.s); /* announced to the writer (READER_JOINED) */
    CX_CHECK(r >= 0);
    usleep(100000);
    CX_CHECK_EQ_INT(write_n(w, 200, 1200, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(read_all(r, 0, 1200, 10000), 1200); /* the first 200 from the space */
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    CX_CHECK(st.from_writer > 0 && st.from_space >= 200);
    fx_down(&f);
}

CX_TEST(transition_readwrite_to_readwrite_by_write_and_read)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int r = pi_attach("t10", f.s);
    int w = pi_create("t10", f.s, PI_CREATE);
    uint8_t buf[4096];
    for (uint64_t i = 0; i < 300; i++) { /* lock-step: each segment read before the next */
        CX_CHECK_EQ_INT(write_n(w, i, i + 1, 0), 0);
        long n = pi_read_timeout(r, buf, sizeof buf, NULL, 10000);
        CX_CHECK(seg_ok(i, buf, n));
        CX_CHECK_EQ_INT(pi_tell(r), (long long)i + 1);
    }
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(read_all(r, 300, 300, 10000), 0);
    fx_down(&f);
}

CX_TEST(transition_readwrite_to_writing_by_detach)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int r = pi_attach("t11", f.s);
    int w = pi_create("t11", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 300, 0), 0);
    uint8_t buf[4096];
    for (uint64_t i = 0; i < 100; i++)
        CX_CHECK(seg_ok(i, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 10000)));
    CX_CHECK_EQ_INT(pi_detach(r), 0); /* the only reader leaves */
    CX_CHECK_EQ_INT(pi_read(r, buf_for_tests, 1, NULL), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(write_n(w, 300, 2000, 0), 0); /* writing goes on: its direct link fails over */
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t11", &in), 0);
    CX_CHECK(in.writer_open && !in.ended);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    r = pi_attach("t11", f.s); /* everything was cached */
    CX_CHECK_EQ_INT(read_all(r, 0, 2000, 10000), 2000);
    fx_down(&f);
}

CX_TEST(transition_readwrite_to_reading_by_close)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int r = pi_attach("t12", f.s);
    int w = pi_create("t12", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 1000, 0), 0);
    uint8_t buf[4096];
    for (uint64_t i = 0; i < 100; i++) /* the reader is behind when the writer closes */
        CX_CHECK(seg_ok(i, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 10000)));
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t12", &in), 0);
    CX_CHECK(!in.writer_open && in.ended); /* reading: a stored file with a reader */
    CX_CHECK_EQ_INT(read_all(r, 100, 1000, 10000), 900); /* the rest, then the end */
    fx_down(&f);
}

CX_TEST(transition_closed_to_reading_by_attach)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t13", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 700, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t13", f.s); /* a late reader: every segment from the space */
    CX_CHECK_EQ_INT(read_all(r, 0, 700, 10000), 700);
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    CX_CHECK(st.from_space == 700 && st.from_writer == 0);
    fx_down(&f);
}

CX_TEST(transition_reading_to_reading_by_seek)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t14", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 400, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t14", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 400, 10000), 400);
    CX_CHECK_EQ_INT(pi_read(r, buf_for_tests, 1, NULL), -1); /* stays at the end */
    CX_CHECK_EQ_INT(errno, EPIPE);
    CX_CHECK_EQ_INT(pi_seek(r, 123), 0); /* back */
    CX_CHECK_EQ_INT(pi_tell(r), 123);
    uint8_t buf[4096];
    CX_CHECK(seg_ok(123, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 10000)));
    CX_CHECK_EQ_INT(pi_seek(r, 390), 0); /* forward */
    CX_CHECK_EQ_INT(read_all(r, 390, 400, 10000), 10);
    CX_CHECK_EQ_INT(pi_seek(r, 0), 0); /* the start */
    CX_CHECK_EQ_INT(read_all(r, 0, 400, 10000), 400);
    fx_down(&f);
}

CX_TEST(transition_reading_to_closed_by_detach)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t15", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 300, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t15", f.s);
    uint8_t buf[4096];
    CX_CHECK(seg_ok(0, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 10000)));
    CX_CHECK_EQ_INT(pi_detach(r), 0);
    CX_CHECK_EQ_INT(pi_tell(r), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t15", &in), 0); /* closed, still stored */
    CX_CHECK(in.ended && in.last_id == 300);
    r = pi_attach("t15", f.s); /* and readable again from the start */
    CX_CHECK_EQ_INT(read_all(r, 0, 300, 10000), 300);
    fx_down(&f);
}

CX_TEST(transition_reading_to_deleted_by_unlink)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t16", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t16", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 100, 10000), 100);
    CX_CHECK_EQ_INT(pi_unlink("t16", f.s), 0); /* a reader does not keep it: only a writer */
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t16", &in), -ENOENT);
    CX_CHECK_EQ_INT(pi_seek(r, 0), 0); /* the segments are gone: a clear error, not a hang */
    CX_CHECK_EQ_INT(pi_read_timeout(r, buf_for_tests, 1, NULL, 10000), -1);
    printf("    after unlink: errno %d: %s\n", errno, cx_errmsg());
    CX_CHECK(errno == ENOENT);
    fx_down(&f);
}

/* ---- writer recovery: redo with APPEND ---------------------------------------------- */

CX_TEST(transition_closed_to_closed_by_append_replay)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    int w = pi_create("t17", f.s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    /* a writer that crashed after closing redoes its run: every write is a replay the space
     * drops, the close is the one it has; nothing new can follow the end */
    w = pi_create("t17", f.s, PI_APPEND);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    CX_CHECK_EQ_INT(pi_write(w, "new", 3, NULL), -1);
    CX_CHECK_EQ_INT(errno, EPIPE);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(space_lookup(f.sp.addr, "t17", &in), 0);
    CX_CHECK(in.ended && in.last_id == 100 && !in.writer_open);
    int r = pi_attach("t17", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 100, 10000), 100);
    fx_down(&f);
}

CX_TEST(transition_writing_to_writing_by_append_after_crash)
{
    struct fixture f;
    CX_CHECK_EQ_INT(fx_up(&f), 0);
    pid_t pid = fork();
    if (pid == 0) { /* a writer that dies without closing, after 150 acknowledged segments */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int s = pi_space_open(f.sp.addr, NULL);
        int w = pi_create("t18", s, PI_CREATE);
        if (write_n(w, 0, 150, 0) < 0)
            _exit(2);
        struct cx_space_pipe_info in;
        for (int i = 0; i < 200 && space_lookup(f.sp.addr, "t18", &in) == 0 && in.last_id < 150; i++)
            usleep(10000);
        kill(getpid(), SIGKILL);
    }
    int st;
    waitpid(pid, &st, 0);
    CX_CHECK(WIFSIGNALED(st));
    int w = pi_create("t18", f.s, PI_APPEND); /* the restarted writer */
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 400, 0), 0); /* 0..149 replayed (dropped), then new ones */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("t18", f.s);
    CX_CHECK_EQ_INT(read_all(r, 0, 400, 10000), 400);
    fx_down(&f);
}

CX_TEST_MAIN()
