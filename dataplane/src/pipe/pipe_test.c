/* Persistent pipes over a real space server (a forked confluxd-equivalent process) and
 * real sockets: the states of the paper's Figure 3, the three orders of create/attach,
 * typed segments converted at the reader, seek/tell, spill, and the failures: writer,
 * reader and space server SIGKILLed mid-stream, each checked against the exact sequence. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "pipe/cx_pipe.h"
#include "pipe/cx_pipe_buf.h"
#include "space/cx_space_server.h"
#include "space/space_testutil.h"
#include "pipe/pipe_testutil.h"
#include "testutil/cx_netns.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ---- the reader's buffer alone ----------------------------------------------------- */

CX_TEST(buffer_dedupes_reorders_and_spills)
{
    struct cx_pipe_buf *b;
    CX_CHECK_EQ_INT(cx_pipe_buf_create(1, 3000, "/tmp/cx_pipe_test.spill", &b), 0);
    uint8_t seg[1000], out[1000];
    struct cx_pipe_seg s;
    for (uint64_t id = 1; id <= 20; id++) { /* every id twice, the second run reversed */
        memset(seg, (int)id, sizeof seg);
        CX_CHECK(cx_pipe_buf_offer(b, id, 0, seg, sizeof seg) >= 0);
    }
    for (uint64_t id = 20; id >= 1; id--)
        CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, id, 0, seg, sizeof seg), 0);
    CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, 22, 0, seg, 10), 1);           /* waits for 21 */
    CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, 21 + CX_PIPE_REORDER, 0, seg, 10), 0); /* too far */
    cx_pipe_buf_end(b, 22);
    struct cx_pipe_buf_stats st;
    cx_pipe_buf_stats(b, &st);
    CX_CHECK(st.spilled == 17 && st.duplicates == 20 && st.too_far == 1); /* 3 in memory */
    for (uint64_t id = 1; id <= 20; id++) {
        CX_CHECK_EQ_INT(cx_pipe_buf_peek(b, &s), 1);
        CX_CHECK(s.id == id && s.len == 1000);
        CX_CHECK_EQ_INT(cx_pipe_buf_take(b, out, sizeof out), 0);
        CX_CHECK(out[0] == id && out[999] == id);
    }
    CX_CHECK_EQ_INT(cx_pipe_buf_peek(b, &s), 0); /* 21 missing: nothing ready, not the end */
    memset(seg, 21, 10);
    CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, 21, 0, seg, 10), 1);
    CX_CHECK_EQ_INT(cx_pipe_buf_take(b, out, sizeof out), 0);
    CX_CHECK_EQ_INT(cx_pipe_buf_take(b, out, sizeof out), 0);
    CX_CHECK_EQ_INT(cx_pipe_buf_peek(b, &s), -EPIPE);
    CX_CHECK(cx_pipe_buf_tell(b) == 23);
    cx_pipe_buf_free(b);
    CX_CHECK(access("/tmp/cx_pipe_test.spill", F_OK) != 0); /* removed */
}

/* A reader that attached late: the writer's direct segments run far (more than
 * CX_PIPE_REORDER ids) ahead of the space's stream; they wait in the window, bounded by
 * the memory cap in bytes and its span in ids, and everything comes out once, in order. */
CX_TEST(buffer_keeps_segments_far_ahead_within_its_memory)
{
    struct cx_pipe_buf *b;
    const size_t cap = 1 << 20; /* window: 1 MiB, span max(1024, cap / 256) = 4096 ids */
    CX_CHECK_EQ_INT(cx_pipe_buf_create(1, cap, "/tmp/cx_pipe_test_far.spill", &b), 0);
    uint8_t seg[1024], out[1024];
    for (uint64_t id = 2001; id <= 2500; id++) { /* the writer's, 2000 ids ahead */
        memset(seg, (int)(id & 0xff), sizeof seg);
        CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, id, 0, seg, sizeof seg), 1);
    }
    CX_CHECK_EQ_INT(cx_pipe_buf_offer(b, 1 + 4096, 0, seg, 1), 0); /* beyond the span */
    for (uint64_t id = 2501; id <= 3100; id++) { /* 1100 KiB in all: the last 76 do not fit */
        memset(seg, (int)(id & 0xff), sizeof seg);
        cx_pipe_buf_offer(b, id, 0, seg, sizeof seg);
    }
    struct cx_pipe_buf_stats st;
    cx_pipe_buf_stats(b, &st);
    CX_CHECK(st.kept == 1024 && st.too_far == 1 + 76 && st.mem_bytes == 0);
    CX_CHECK(cx_pipe_buf_next(b) == 1);
    for (uint64_t id = 1; id <= 3100; id++) { /* the space's stream, in order from 1 */
        memset(seg, (int)(id & 0xff), sizeof seg);
        CX_CHECK(cx_pipe_buf_offer(b, id, 0, seg, sizeof seg) >= 0);
    }
    cx_pipe_buf_end(b, 3100);
    cx_pipe_buf_stats(b, &st);
    CX_CHECK(st.kept == 3100 && st.duplicates == 1024 && st.mem_bytes <= cap);
    CX_CHECK(st.spilled == 3100 - cap / sizeof seg); /* ready beyond the cap went to the file */
    struct cx_pipe_seg s;
    for (uint64_t id = 1; id <= 3100; id++) {
        CX_CHECK_EQ_INT(cx_pipe_buf_peek(b, &s), 1);
        CX_CHECK(s.id == id && s.len == sizeof seg);
        CX_CHECK_EQ_INT(cx_pipe_buf_take(b, out, sizeof out), 0);
        CX_CHECK(out[0] == (id & 0xff) && out[1023] == (id & 0xff));
    }
    CX_CHECK_EQ_INT(cx_pipe_buf_peek(b, &s), -EPIPE);
    cx_pipe_buf_free(b);
}

/* ---- the states of Figure 3 and the paper's three scenarios ------------------------ */

/* Create, write, close with no reader; a reader attaches afterwards (the "Reading" state:
 * the pipe behaves as a stored file); then unlink. */
CX_TEST(write_close_then_late_reader_then_unlink)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    CX_CHECK(s >= 0);
    int w = pi_create("late", s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(pi_create("late", s, PI_CREATE), -1); /* single writer */
    CX_CHECK_EQ_INT(errno, EBUSY);
    CX_CHECK_EQ_INT(write_n(w, 0, 500, 0), 0);
    CX_CHECK_EQ_INT(pi_unlink("late", s), -1); /* open for writing */
    CX_CHECK_EQ_INT(errno, EBUSY);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(pi_create("late", s, PI_CREATE), -1); /* exists: APPEND or unlink */
    CX_CHECK_EQ_INT(errno, EEXIST);
    int r = pi_attach("late", s);
    CX_CHECK(r >= 0);
    CX_CHECK_EQ_INT(read_all(r, 0, 500, 10000), 500);
    CX_CHECK_EQ_INT(pi_tell(r), 500);
    CX_CHECK_EQ_INT(pi_read(r, NULL, 0, NULL), -1); /* stays at the end */
    CX_CHECK_EQ_INT(errno, EPIPE);
    CX_CHECK_EQ_INT(pi_seek(r, 250), 0); /* seek back: the space serves it again */
    CX_CHECK_EQ_INT(pi_tell(r), 250);
    CX_CHECK_EQ_INT(read_all(r, 250, 500, 10000), 250);
    CX_CHECK_EQ_INT(pi_detach(r), 0);
    CX_CHECK_EQ_INT(pi_unlink("late", s), 0);
    int w2 = pi_create("late", s, PI_CREATE); /* the name is free again: a new pipe */
    CX_CHECK(w2 >= 0);
    CX_CHECK_EQ_INT(pi_close(w2), 0);
    r = pi_attach("late", s);
    CX_CHECK_EQ_INT(read_all(r, 0, 0, 10000), 0);
    pi_detach(r);
    CX_CHECK_EQ_INT(pi_space_close(s), 0);
    space_down(&sp);
}

/* Scenario 3 of the paper: the reader attaches first (asynchronously), then the writer
 * creates the pipe and streams to it directly while the space caches. */
CX_TEST(attach_first_then_create_streams_direct)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int r = pi_attach("direct", s);
    CX_CHECK(r >= 0);
    int w = pi_create("direct", s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(write_n(w, 0, 3000, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(read_all(r, 0, 3000, 10000), 3000);
    struct pi_reader_stats st;
    CX_CHECK_EQ_INT(pi_reader_stats(r, &st), 0);
    printf("    from the writer %llu, from the space %llu, duplicates dropped %llu\n",
           (unsigned long long)st.from_writer, (unsigned long long)st.from_space,
           (unsigned long long)st.duplicates);
    CX_CHECK(st.from_writer > 0);                       /* the direct path worked */
    CX_CHECK(st.from_writer + st.from_space == 3000);    /* each segment kept once */
    pi_detach(r);
    pi_space_close(s);
    space_down(&sp);
}

/* A writer that stops writing still sends what its full sockets could not take: the space
 * and the reader are stopped (SIGSTOP) while the writer bursts 40 MiB, so both links queue
 * most of it in user space; then they go on and the writer only waits (no pi_write, no
 * pi_close). Before the in-bound thread drained such queues, the tail of the burst waited
 * for a next pi_write for ever and the reader stalled (seen with 64 MiB in flight). */
#define BURST_N 160
#define BURST_SIZE (256u << 10)
CX_TEST(writer_that_stops_sends_what_its_full_sockets_held)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int ready[2];
    CX_CHECK(pipe(ready) == 0);
    pid_t rd = fork();
    if (rd == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int s = pi_space_open(sp.addr, NULL);
        int r = s < 0 ? -1 : pi_attach("burst", s);
        if (r < 0 || write(ready[1], "r", 1) != 1)
            _exit(2);
        uint8_t *b = malloc(BURST_SIZE);
        for (uint64_t i = 0; i < BURST_N; i++) {
            long n = pi_read_timeout(r, b, BURST_SIZE, NULL, 20000);
            uint64_t id;
            if (n != (long)BURST_SIZE)
                _exit(3); /* stalled (ETIMEDOUT) or short */
            memcpy(&id, b, sizeof id);
            if (id != i)
                _exit(4);
        }
        _exit(0);
    }
    char c;
    CX_CHECK(read(ready[0], &c, 1) == 1);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("burst", s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(wait_direct_link(w, 2000, "burst writer"), 0); /* the reader's direct link is up */
    kill(rd, SIGSTOP);
    kill(sp.pid, SIGSTOP);
    uint8_t *b = calloc(1, BURST_SIZE);
    int wrote = 0;
    for (uint64_t i = 0; i < BURST_N; i++, wrote++) {
        memcpy(b, &i, sizeof i);
        if (pi_write(w, b, BURST_SIZE, NULL) != (long)BURST_SIZE)
            break;
    }
    free(b);
    kill(sp.pid, SIGCONT);
    kill(rd, SIGCONT);
    int st = -1;
    for (int i = 0; i < 3000 && waitpid(rd, &st, WNOHANG) == 0; i++)
        usleep(10000); /* the writer only waits: its in-bound thread must send the rest */
    if (st == -1) {
        kill(rd, SIGKILL);
        waitpid(rd, &st, 0);
    }
    CX_CHECK_EQ_INT(wrote, BURST_N);
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* every segment, in order */
    CX_CHECK_EQ_INT(pi_close(w), 0);
    pi_space_close(s);
    close(ready[0]);
    close(ready[1]);
    space_down(&sp);
}

/* A reader that attaches while the writer is mid-stream is announced to the writer. */
static void *resume_later(void *arg)
{
    usleep(300000);
    kill(*(pid_t *)arg, SIGCONT);
    return NULL;
}

CX_TEST(reader_joining_mid_stream_is_announced)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("mid", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 100, 0), 0);
    int r = pi_attach("mid", s);
    CX_CHECK(r >= 0);
    usleep(100000);
    CX_CHECK_EQ_INT(write_n(w, 100, 2000, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(read_all(r, 0, 2000, 10000), 2000);
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    CX_CHECK(st.from_writer > 0);
    pi_detach(r);
    pi_space_close(s);
    space_down(&sp);
}

/* A reader that attaches when the writer is already more than CX_PIPE_REORDER segments
 * ahead of what it has: the reader's process is stopped right after pi_attach while the
 * writer goes on, so the writer's direct segments (ids 1501 on) are there before the space's
 * stream (from id 1). They are kept while the space brings 1..1500: exactly the sequence,
 * and most of the segments written after the attach come from the writer. */
CX_TEST(late_reader_keeps_direct_segments_far_ahead)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("late", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 1500, 0), 0);
    struct pi_reader_stats *got = mmap(NULL, sizeof *got, PROT_READ | PROT_WRITE,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CX_CHECK(got != MAP_FAILED);
    memset(got, 0, sizeof *got);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int cs = pi_space_open(sp.addr, NULL);
        int r = pi_attach("late", cs);
        if (r < 0)
            _exit(2);
        raise(SIGSTOP); /* the writer runs ahead until the parent resumes us */
        if (read_all(r, 0, 3500, 20000) != 3500)
            _exit(1);
        pi_reader_stats(r, got);
        _exit(0);
    }
    int st = 0;
    CX_CHECK_EQ_INT(waitpid(pid, &st, WUNTRACED), pid);
    CX_CHECK(WIFSTOPPED(st));
    /* the writer learns of the reader from the space; then 2000 more, of which the first
     * reach the stopped reader's socket ahead of everything else. A thread resumes the
     * reader in case the socket fills and pi_write waits for it. */
    pthread_t t;
    CX_CHECK_EQ_INT(pthread_create(&t, NULL, resume_later, &pid), 0);
    CX_CHECK_EQ_INT(write_n(w, 1500, 3500, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    pthread_join(t, NULL);
    CX_CHECK_EQ_INT(waitpid(pid, &st, 0), pid);
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("    from the writer %llu, from the space %llu, duplicates %llu\n",
           (unsigned long long)got->from_writer, (unsigned long long)got->from_space,
           (unsigned long long)got->duplicates);
    CX_CHECK(got->from_writer + got->from_space == 3500);
    CX_CHECK(got->from_space >= 1500);   /* 1..1500 exist only in the space */
    CX_CHECK(got->from_writer >= 1000);  /* direct segments far ahead were kept */
    munmap(got, sizeof *got);
    pi_space_close(s);
    space_down(&sp);
}

/* Typed segments: a v2 writer (a new field in front of the old ones) and a v1 reader. */
struct v1 { int32_t step; double energy; };
struct v2 { uint64_t tag; int64_t step; double energy; float extra; };

CX_TEST(typed_segments_convert_at_the_reader)
{
    static const struct cx_field f1[] = {{"step", "int32", 0, offsetof(struct v1, step), NULL},
                                         {"energy", "double", 0, offsetof(struct v1, energy), NULL},
                                         {NULL, NULL, 0, 0, NULL}};
    static const struct cx_field f2[] = {{"tag", "uint64", 0, offsetof(struct v2, tag), NULL},
                                         {"step", "int64", 0, offsetof(struct v2, step), NULL},
                                         {"energy", "double", 0, offsetof(struct v2, energy), NULL},
                                         {"extra", "float", 0, offsetof(struct v2, extra), NULL},
                                         {NULL, NULL, 0, 0, NULL}};
    const struct cx_struct_decl d1[] = {{"sample", f1, sizeof(struct v1)}, {NULL, NULL, 0}};
    const struct cx_struct_decl d2[] = {{"sample", f2, sizeof(struct v2)}, {NULL, NULL, 0}};
    struct cx_format *fa, *fb;
    const struct cx_format *F1, *F2;
    CX_CHECK_EQ_INT(cx_format_create(d1, NULL, &fa), 0);
    CX_CHECK_EQ_INT(cx_format_create(d2, NULL, &fb), 0);
    cx_format_registry_insert(fa, &F1);
    cx_format_registry_insert(fb, &F2);
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("typed", s, PI_CREATE);
    struct v2 out[64];
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < 64; i++)
            out[i] = (struct v2){.tag = 99, .step = k * 64 + i, .energy = (k * 64 + i) * 0.5, .extra = 1};
        CX_CHECK_EQ_INT(pi_write(w, out, 64, F2), 64);
    }
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("typed", s);
    struct v1 in[64];
    CX_CHECK_EQ_INT(pi_read_timeout(r, in, 10, F1, 5000), -1); /* 64 events do not fit 10 */
    CX_CHECK_EQ_INT(errno, EMSGSIZE);
    pi_seek(r, 0);
    for (int k = 0; k < 10; k++) {
        CX_CHECK_EQ_INT(pi_read_timeout(r, in, 64, F1, 5000), 64);
        for (int i = 0; i < 64; i++)
            CX_CHECK(in[i].step == k * 64 + i && in[i].energy == (k * 64 + i) * 0.5);
    }
    CX_CHECK_EQ_INT(pi_read_timeout(r, in, 64, F1, 5000), -1);
    CX_CHECK_EQ_INT(errno, EPIPE);
    pi_detach(r);
    pi_space_close(s);
    space_down(&sp);
}

/* A reader that does not read while 4 MB arrive spills beyond its 64 KB memory buffer. */
CX_TEST(slow_reader_spills_to_a_file)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    struct pi_options o = {.reader_mem = 64 << 10};
    int s = pi_space_open(sp.addr, &o);
    int r = pi_attach("spill", s);
    int w = pi_create("spill", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 4000, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    usleep(300000);
    CX_CHECK_EQ_INT(read_all(r, 0, 4000, 10000), 4000);
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    CX_CHECK(st.spilled > 1000);
    pi_detach(r);
    pi_space_close(s);
    space_down(&sp);
}

/* ---- failures: each ends with the reader holding exactly the written sequence ------ */

/* The writer is SIGKILLed at a random point; restarted with PI_APPEND it replays every
 * write from the start (piecewise determinism) and the space drops what it has. */
CX_TEST(writer_killed_replays_with_append)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    unsigned seed = test_seed("writer_killed_replays_with_append");
    int runs = fault_runs(5);
    for (int run = 0; run < runs; run++) {
        char name[32];
        snprintf(name, sizeof name, "wkill%d", run);
        int s = pi_space_open(sp.addr, NULL);
        int r = pi_attach(name, s);
        CX_CHECK(r >= 0);
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int cs = pi_space_open(sp.addr, NULL);
            int w = pi_create(name, cs, PI_CREATE);
            write_n(w, 0, 5000, 20); /* killed long before the end */
            _exit(0);
        }
        useconds_t at = (useconds_t)(20000 + rand_r(&seed) % 60000);
        usleep(at);
        kill(pid, SIGKILL);
        printf("    run %d: writer killed after %u us\n", run, (unsigned)at);
        fflush(stdout);
        waitpid(pid, NULL, 0);
        int w = pi_create(name, s, PI_APPEND);
        CX_CHECK(w >= 0);
        CX_CHECK_EQ_INT(write_n(w, 0, 1500, 0), 0);
        CX_CHECK_EQ_INT(pi_close(w), 0);
        CX_CHECK_EQ_INT(read_all(r, 0, 1500, 10000), 1500);
        pi_detach(r);
        pi_space_close(s);
    }
    space_down(&sp);
}

/* The reader is SIGKILLed at a random point after reporting its position; a new reader
 * (another process, another address: a migration) seeks there and reads the rest while
 * the writer goes on: cached segments from the space, new ones from the writer (Fig. 8). */
CX_TEST(reader_killed_resumes_from_its_position)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int *pos = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    unsigned seed = test_seed("reader_killed_resumes_from_its_position");
    int runs = fault_runs(4);
    for (int run = 0; run < runs; run++) {
        char name[32];
        snprintf(name, sizeof name, "rkill%d", run);
        *pos = 0;
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int cs = pi_space_open(sp.addr, NULL);
            int r = pi_attach(name, cs);
            uint8_t buf[4096];
            for (;;) {
                long n = pi_read(r, buf, sizeof buf, NULL);
                if (n < 0 || !seg_ok((uint64_t)*pos, buf, n))
                    _exit(1);
                __atomic_store_n(pos, *pos + 1, __ATOMIC_SEQ_CST); /* the checkpoint */
                usleep(200); /* a slow reader: killed mid-stream */
            }
        }
        int s = pi_space_open(sp.addr, NULL);
        int w = pi_create(name, s, PI_CREATE);
        uint64_t first = 200 + (uint64_t)(rand_r(&seed) % 1000); /* written before the kill */
        CX_CHECK_EQ_INT(write_n(w, 0, first, 0), 0);
        usleep((useconds_t)(10000 + rand_r(&seed) % 150000));
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        int at = __atomic_load_n(pos, __ATOMIC_SEQ_CST);
        int r = pi_attach(name, s);
        CX_CHECK_EQ_INT(pi_seek(r, (uint64_t)at), 0);
        CX_CHECK_EQ_INT(write_n(w, first, 3000, 0), 0);
        CX_CHECK_EQ_INT(pi_close(w), 0);
        CX_CHECK_EQ_INT(read_all(r, (uint64_t)at, 3000, 10000), 3000 - at);
        printf("    run %d: the killed reader had read %d; its successor read the rest\n", run, at);
        fflush(stdout);
        pi_detach(r);
        pi_space_close(s);
    }
    munmap(pos, 4096);
    space_down(&sp);
}

/* The space server is SIGKILLed and restarted on the same address while a writer writes
 * and a reader reads: the writer resends what the space had not acknowledged, the reader
 * resumes its stream; the reader gets exactly the sequence. */
CX_TEST(space_killed_and_restarted_mid_stream)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    unsigned seed = test_seed("space_killed_and_restarted_mid_stream");
    int runs = fault_runs(2);
    for (int run = 0; run < runs; run++) {
        char name[32];
        snprintf(name, sizeof name, "skill%d", run);
        uint64_t k1 = 100 + (uint64_t)(rand_r(&seed) % 1200), k2 = k1 + 100 + (uint64_t)(rand_r(&seed) % 1200);
        printf("    run %d: space killed after segments %llu and %llu of 2500\n", run,
               (unsigned long long)k1, (unsigned long long)k2);
        fflush(stdout);
        int s = pi_space_open(sp.addr, NULL);
        int r = pi_attach(name, s);
        int w = pi_create(name, s, PI_CREATE);
        CX_CHECK_EQ_INT(write_n(w, 0, k1, 0), 0);
        space_kill(&sp);
        CX_CHECK_EQ_INT(space_restart(&sp), 0);
        CX_CHECK_EQ_INT(write_n(w, k1, k2, 0), 0);
        space_kill(&sp);
        CX_CHECK_EQ_INT(space_restart(&sp), 0);
        CX_CHECK_EQ_INT(write_n(w, k2, 2500, 0), 0);
        CX_CHECK_EQ_INT(pi_close(w), 0);
        CX_CHECK_EQ_INT(read_all(r, 0, 2500, 20000), 2500);
        struct pi_reader_stats st;
        pi_reader_stats(r, &st);
        printf("    run %d: reader: %llu from the writer, %llu from the space, %llu reconnects\n", run,
               (unsigned long long)st.from_writer, (unsigned long long)st.from_space,
               (unsigned long long)st.reconnects);
        fflush(stdout);
        /* its space stream either reconnected, or was paused behind the writer's stream */
        CX_CHECK(st.reconnects >= 1 || st.from_writer > 0);
        pi_detach(r);
        /* and a late reader after all that */
        r = pi_attach(name, s);
        CX_CHECK_EQ_INT(read_all(r, 0, 2500, 20000), 2500);
        pi_detach(r);
        pi_space_close(s);
    }
    space_down(&sp);
}

/* The link between the reader's host and the writer's and space's host is cut (every TCP
 * connection across it reset, new ones refused) for a while mid-stream, then restored: the
 * reader, in another network namespace, reconnects and still gets exactly the sequence. */
static int iptables_cut(const char *ns, const char *peer, int on)
{
    const char *op = on ? "-I" : "-D";
    char *in[] = {"ip", "netns", "exec", (char *)ns, "iptables", "-w", (char *)op, "INPUT", "-s", (char *)peer,
                  "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset", NULL};
    char out[512];
    return cx_netns_run(in, out, sizeof out);
}

CX_TEST(link_cut_between_namespaces_mid_stream)
{
    const char *why = cx_netns_unavailable();
    if (why)
        CX_SKIP("network namespaces unavailable: %s", why);
    struct cx_netns_pair np;
    CX_CHECK_EQ_INT(cx_netns_pair_create("cxpip", &np), 0);
    char dir[64], listen[64], addr[160];
    CX_CHECK(tmpdir_make(dir));
    snprintf(listen, sizeof listen, "tcp://%s:0", np.ip[0]);
    int ready[2];
    CX_CHECK_EQ_INT(pipe(ready), 0);
    /* the space server on host a */
    int saved = cx_netns_enter(np.ns[0]);
    CX_CHECK(saved >= 0);
    pid_t space = space_spawn(dir, listen, addr);
    cx_netns_leave(saved);
    CX_CHECK(space > 0);
    /* the reader on host b: attaches first, reads everything, checks it */
    pid_t reader = fork();
    if (reader == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cx_netns_enter(np.ns[1]) < 0)
            _exit(2);
        int s = pi_space_open(addr, NULL);
        int r = s >= 0 ? pi_attach("cut", s) : -1;
        char one = r >= 0 ? 1 : 0;
        if (write(ready[1], &one, 1) != 1 || r < 0)
            _exit(3);
        long n = read_all(r, 0, 3000, 20000);
        struct pi_reader_stats st;
        pi_reader_stats(r, &st);
        printf("    reader on %s: %ld segments, %llu from the writer, %llu from the space, %llu reconnects\n",
               np.ip[1], n, (unsigned long long)st.from_writer, (unsigned long long)st.from_space,
               (unsigned long long)st.reconnects);
        fflush(stdout);
        _exit(n == 3000 && st.reconnects > 0 ? 0 : 4);
    }
    char one;
    CX_CHECK_EQ_INT(read(ready[0], &one, 1), 1);
    CX_CHECK_EQ_INT(one, 1);
    /* the writer on host a, in this process's child */
    pid_t writer = fork();
    if (writer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cx_netns_enter(np.ns[0]) < 0)
            _exit(2);
        int s = pi_space_open(addr, NULL);
        int w = s >= 0 ? pi_create("cut", s, PI_CREATE) : -1;
        if (w < 0 || write_n(w, 0, 3000, 300) < 0 || pi_close(w) < 0)
            _exit(3);
        _exit(0);
    }
    usleep(300000);
    CX_CHECK_EQ_INT(iptables_cut(np.ns[0], np.ip[1], 1), 0); /* cut */
    usleep(500000);
    CX_CHECK_EQ_INT(iptables_cut(np.ns[0], np.ip[1], 0), 0); /* restore */
    int st;
    waitpid(writer, &st, 0);
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    waitpid(reader, &st, 0);
    CX_CHECK(WIFEXITED(st));
    CX_CHECK_EQ_INT(WEXITSTATUS(st), 0);
    kill(space, SIGKILL);
    waitpid(space, NULL, 0);
    tmpdir_remove(dir);
    cx_netns_pair_destroy(&np);
}

CX_TEST(bad_calls_fail_clearly)
{
    CX_CHECK_EQ_INT(pi_read(77, NULL, 0, NULL), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_space_open("tcp://127.0.0.1:9", NULL), -1);
    CX_CHECK_EQ_INT(errno, ECONNREFUSED);
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    CX_CHECK_EQ_INT(pi_create("no/slash", s, PI_CREATE), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK_EQ_INT(pi_create("x", s, 9), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    int w = pi_create("x", s, PI_CREATE);
    CX_CHECK_EQ_INT(pi_seek(w, 0), -1); /* seek is for readers only */
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_space_close(s), -1); /* a pipe is open */
    CX_CHECK_EQ_INT(errno, EBUSY);
    pi_close(w);
    CX_CHECK_EQ_INT(pi_space_close(s), 0);
    space_down(&sp);
}

CX_TEST_MAIN()
