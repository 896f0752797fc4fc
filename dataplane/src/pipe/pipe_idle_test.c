/* What an idle pipe costs: a writer process and a reader process of one pipe, joined by the
 * writer's direct link and caught up, then left alone, use no CPU and their threads do not
 * wake (the in-bound thread sleeps until a timer is due, and an idle pipe has none); nor
 * does the space server that holds the pipe. The next segment still arrives at once.
 * CONFLUX_IDLE_SECONDS (default 3) sets the window (60 for the figure). */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "pipe_testutil.h"
#include "testutil/proc_stat.h"

static int idle_seconds(void)
{
    const char *s = getenv("CONFLUX_IDLE_SECONDS");
    int v = s && *s ? atoi(s) : 3;
    return v > 0 ? v : 3;
}

/* The reader: attaches, says so, reads segments 0..99, says so, then waits for segment 100
 * (exit 0 when it is right). */
static void reader_main(const char *addr, int tell)
{
    int s = pi_space_open(addr, NULL), r = s >= 0 ? pi_attach("idle", s) : -1;
    char c = r >= 0 ? 'a' : 'x';
    if (write(tell, &c, 1) != 1 || r < 0)
        _exit(2);
    uint8_t buf[4096];
    for (uint64_t i = 0; i < 100; i++)
        if (!seg_ok(i, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 20000)))
            _exit(3);
    c = 'c';
    if (write(tell, &c, 1) != 1)
        _exit(2);
    _exit(seg_ok(100, buf, pi_read_timeout(r, buf, sizeof buf, NULL, 1000 * (idle_seconds() + 30))) ? 0 : 4);
}

CX_TEST(an_idle_writer_and_reader_use_no_cpu_and_do_not_wake)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int tell[2];
    CX_CHECK_EQ_INT(pipe(tell), 0);
    pid_t rd = fork();
    if (rd == 0) {
        close(tell[0]);
        reader_main(sp.addr, tell[1]);
    }
    close(tell[1]);
    char c = 0;
    CX_CHECK(read(tell[0], &c, 1) == 1 && c == 'a');
    int s = pi_space_open(sp.addr, NULL);
    int w = s >= 0 ? pi_create("idle", s, PI_CREATE) : -1;
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(wait_direct_link(w, 10000, "idle writer"), 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    CX_CHECK(read(tell[0], &c, 1) == 1 && c == 'c');
    usleep(500000); /* the reader's stall timer (50 ms) and the writer's flush run out first */

    int secs = idle_seconds();
    pid_t me = getpid();
    long w0 = proc_cpu_ticks(me), r0 = proc_cpu_ticks(rd), s0 = proc_cpu_ticks(sp.pid);
    long wv0 = proc_wakeups(me), rv0 = proc_wakeups(rd);
    sleep((unsigned)secs); /* our main thread sleeps once: one wake-up of its own */
    long w1 = proc_cpu_ticks(me), r1 = proc_cpu_ticks(rd), s1 = proc_cpu_ticks(sp.pid);
    long wv1 = proc_wakeups(me), rv1 = proc_wakeups(rd);
    fprintf(stderr, "  idle %d s (%ld ticks a second): writer %ld ticks, %ld wake-ups; reader "
            "%ld ticks, %ld wake-ups; space server %ld ticks\n", secs, sysconf(_SC_CLK_TCK),
            w1 - w0, wv1 - wv0, r1 - r0, rv1 - rv0, s1 - s0);
    CX_CHECK(w0 >= 0 && r0 >= 0 && s0 >= 0 && wv0 >= 0 && rv0 >= 0);
    CX_CHECK(w1 - w0 <= 1);
    CX_CHECK(r1 - r0 <= 1);
    CX_CHECK(s1 - s0 <= 1);
    CX_CHECK(wv1 - wv0 <= 2 + secs); /* a 20 ms tick alone would be 50 a second */
    CX_CHECK(rv1 - rv0 <= 2 + secs);

    CX_CHECK_EQ_INT(write_n(w, 100, 101, 0), 0); /* and the next segment still arrives */
    int st = -1;
    CX_CHECK(waitpid(rd, &st, 0) == rd && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    close(tell[0]);
    space_down(&sp);
}

CX_TEST_MAIN()
