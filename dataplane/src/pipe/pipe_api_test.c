/* The pipe API's edges against a real space server: names over the limit, a typed read into
 * too small a buffer, formats published by pi_write for readers in other processes, the
 * spill directory, and shutting the runtime down. */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "pipe/pipe_testutil.h"
#include "space/cx_space_client.h"

#include <dirent.h>
#include <fcntl.h>

CX_TEST(names_over_127_bytes_fail_with_enametoolong)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    CX_CHECK(s >= 0);
    char name[200];
    memset(name, 'n', sizeof name);
    name[128] = 0; /* 128 bytes: one too many */
    CX_CHECK_EQ_INT(pi_create(name, s, PI_CREATE), -1);
    CX_CHECK_EQ_INT(errno, ENAMETOOLONG);
    CX_CHECK(strstr(cx_errmsg(), "128 bytes") && strstr(cx_errmsg(), "127"));
    CX_CHECK_EQ_INT(pi_attach(name, s), -1);
    CX_CHECK_EQ_INT(errno, ENAMETOOLONG);
    CX_CHECK_EQ_INT(pi_unlink(name, s), -1);
    CX_CHECK_EQ_INT(errno, ENAMETOOLONG);
    name[127] = 0; /* the truncation the old code made silently must not exist either */
    struct cx_space_client *c;
    struct cx_space_pipe_info in;
    CX_CHECK_EQ_INT(cx_space_connect(sp.addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(c, name, &in), -ENOENT);
    int w = pi_create(name, s, PI_CREATE); /* 127 bytes: fine */
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(c, name, &in), 0);
    cx_space_disconnect(c);
    CX_CHECK_EQ_INT(pi_create(NULL, s, PI_CREATE), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    space_down(&sp);
}

/* Two versions of a sample: the writer's has a field in front and wider ints. */
struct v1 { int32_t step; double energy; };
struct v2 { uint64_t tag; int64_t step; double energy; float extra; };

static const struct cx_format *make_v1(void)
{
    static const struct cx_field f[] = {{"step", "int32", 0, offsetof(struct v1, step), NULL},
                                        {"energy", "double", 0, offsetof(struct v1, energy), NULL},
                                        {NULL, NULL, 0, 0, NULL}};
    const struct cx_struct_decl d[] = {{"sample", f, sizeof(struct v1)}, {NULL, NULL, 0}};
    struct cx_format *fa;
    const struct cx_format *out = NULL;
    if (cx_format_create(d, NULL, &fa) == 0)
        cx_format_registry_insert(fa, &out);
    return out;
}

static const struct cx_format *make_v2(void)
{
    static const struct cx_field f[] = {{"tag", "uint64", 0, offsetof(struct v2, tag), NULL},
                                        {"step", "int64", 0, offsetof(struct v2, step), NULL},
                                        {"energy", "double", 0, offsetof(struct v2, energy), NULL},
                                        {"extra", "float", 0, offsetof(struct v2, extra), NULL},
                                        {NULL, NULL, 0, 0, NULL}};
    const struct cx_struct_decl d[] = {{"sample", f, sizeof(struct v2)}, {NULL, NULL, 0}};
    struct cx_format *fb;
    const struct cx_format *out = NULL;
    if (cx_format_create(d, NULL, &fb) == 0)
        cx_format_registry_insert(fb, &out);
    return out;
}

static int write_v2(int w, const struct cx_format *F2, int segs, int per)
{
    struct v2 out[64];
    for (int k = 0; k < segs; k++) {
        for (int i = 0; i < per; i++)
            out[i] = (struct v2){.tag = 99, .step = k * 64 + i, .energy = (k * 64 + i) * 0.5, .extra = 1};
        if (pi_write(w, out, (size_t)per, F2) != per)
            return -1;
    }
    return 0;
}

/* pi_write stores the writer's format in the space: a reader process that never saw it
 * (its registry holds only its own version) converts the segments. */
CX_TEST(write_publishes_its_format_to_the_space)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int ready[2], done[2];
    CX_CHECK_EQ_INT(pipe(ready), 0);
    CX_CHECK_EQ_INT(pipe(done), 0);
    pid_t pid = fork(); /* before this process knows the writer's format */
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        const struct cx_format *F1 = make_v1();
        int s = pi_space_open(sp.addr, NULL);
        char go;
        if (!F1 || s < 0 || read(ready[0], &go, 1) != 1)
            _exit(2);
        int r = pi_attach("formats", s);
        struct v1 in[64];
        for (int k = 0; k < 5; k++) {
            long n = pi_read_timeout(r, in, 64, F1, 10000);
            if (n != 64) {
                fprintf(stderr, "child: segment %d: %ld: %s\n", k, n, cx_errmsg());
                _exit(3);
            }
            for (int i = 0; i < 64; i++)
                if (in[i].step != k * 64 + i || in[i].energy != (k * 64 + i) * 0.5)
                    _exit(4);
        }
        _exit(pi_read_timeout(r, in, 64, F1, 10000) == -1 && errno == EPIPE ? 0 : 5);
    }
    const struct cx_format *F2 = make_v2();
    CX_CHECK(F2 != NULL);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("formats", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_v2(w, F2, 5, 64), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct cx_space_client *c; /* the description is in the space, under the token */
    uint8_t *desc = NULL;
    size_t len = 0;
    CX_CHECK_EQ_INT(cx_space_connect(sp.addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_format_get(c, cx_format_token(F2), &desc, &len), 0);
    CX_CHECK(len > 0);
    free(desc);
    cx_space_disconnect(c);
    CX_CHECK_EQ_INT(write(ready[1], "g", 1), 1);
    int st;
    waitpid(pid, &st, 0);
    CX_CHECK(WIFEXITED(st));
    CX_CHECK_EQ_INT(WEXITSTATUS(st), 0);
    close(ready[0]), close(ready[1]), close(done[0]), close(done[1]);
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    space_down(&sp);
}

/* A typed read into too small a buffer fails and leaves the segment: the same read with a
 * bigger buffer gets it, with no seek. Raw reads behave the same. */
CX_TEST(typed_read_too_small_keeps_the_segment)
{
    const struct cx_format *F1 = make_v1(), *F2 = make_v2();
    CX_CHECK(F1 && F2);
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    int s = pi_space_open(sp.addr, NULL);
    int w = pi_create("small", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_v2(w, F2, 3, 64), 0);
    CX_CHECK_EQ_INT(pi_write(w, "0123456789", 10, NULL), 10);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    int r = pi_attach("small", s);
    struct v1 in[64];
    for (int k = 0; k < 3; k++) {
        CX_CHECK_EQ_INT(pi_read_timeout(r, in, 10, F1, 5000), -1);
        CX_CHECK_EQ_INT(errno, EMSGSIZE);
        CX_CHECK(strstr(cx_errmsg(), "64 events") != NULL);
        CX_CHECK_EQ_INT(pi_tell(r), k); /* not consumed */
        CX_CHECK_EQ_INT(pi_read_timeout(r, in, 63, F1, 5000), -1);
        CX_CHECK_EQ_INT(pi_read_timeout(r, in, 64, F1, 5000), 64);
        CX_CHECK(in[0].step == k * 64 && in[63].step == k * 64 + 63);
    }
    CX_CHECK_EQ_INT(pi_read_timeout(r, in, 64, F1, 5000), -1); /* raw bytes read as typed */
    CX_CHECK_EQ_INT(errno, EPROTO);
    CX_CHECK_EQ_INT(pi_tell(r), 3);
    char raw[16];
    CX_CHECK_EQ_INT(pi_read_timeout(r, raw, 4, NULL, 5000), -1); /* raw, too small */
    CX_CHECK_EQ_INT(errno, EMSGSIZE);
    CX_CHECK_EQ_INT(pi_read_timeout(r, raw, sizeof raw, NULL, 5000), 10);
    CX_CHECK(memcmp(raw, "0123456789", 10) == 0);
    CX_CHECK_EQ_INT(pi_read_timeout(r, raw, sizeof raw, NULL, 5000), -1);
    CX_CHECK_EQ_INT(errno, EPIPE);
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    space_down(&sp);
}

static int count_spill_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, "conflux-pipe-", 13) == 0 && strstr(e->d_name, ".spill") != NULL;
    if (d)
        closedir(d);
    return n;
}

CX_TEST(spill_dir_is_honoured)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct pi_options o = {.reader_mem = 64 << 10, .spill_dir = "/nonexistent/conflux"};
    CX_CHECK_EQ_INT(pi_space_open(sp.addr, &o), -1);
    CX_CHECK_EQ_INT(errno, ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "/nonexistent/conflux") != NULL);
    o.spill_dir = "/etc/hostname"; /* not a directory */
    CX_CHECK_EQ_INT(pi_space_open(sp.addr, &o), -1);
    CX_CHECK_EQ_INT(errno, ENOTDIR);
    char copy[64]; /* the option is copied: the caller's string may change afterwards */
    snprintf(copy, sizeof copy, "%s", dir);
    o.spill_dir = copy;
    int s = pi_space_open(sp.addr, &o);
    CX_CHECK(s >= 0);
    memset(copy, 'x', 10);
    int r = pi_attach("spilled", s);
    int w = pi_create("spilled", s, PI_CREATE);
    CX_CHECK_EQ_INT(write_n(w, 0, 3000, 0), 0);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    struct pi_reader_stats st = {0};
    for (int i = 0; i < 200 && st.spilled < 1000; i++) {
        usleep(20000);
        pi_reader_stats(r, &st);
    }
    CX_CHECK(st.spilled >= 1000);
    CX_CHECK_EQ_INT(count_spill_files(dir), 1); /* in spill_dir, not /tmp */
    CX_CHECK_EQ_INT(read_all(r, 0, 3000, 10000), 3000);
    CX_CHECK_EQ_INT(pi_detach(r), 0);
    CX_CHECK_EQ_INT(count_spill_files(dir), 0); /* removed */
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    tmpdir_remove(dir);
    space_down(&sp);
}

static int threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* pi_shutdown closes the writer (the space holds its end), detaches the reader, closes
 * the space, stops the in-bound thread; the runtime starts again afterwards. */
CX_TEST(shutdown_closes_everything_and_restarts)
{
    struct space_proc sp;
    CX_CHECK_EQ_INT(space_up(&sp), 0);
    CX_CHECK_EQ_INT(pi_shutdown(), 0); /* nothing running: fine */
    int before = threads_now();
    int s = pi_space_open(sp.addr, NULL);
    CX_CHECK(s >= 0);
    int w = pi_create("down", s, PI_CREATE);
    int r = pi_attach("down", s);
    CX_CHECK_EQ_INT(write_n(w, 0, 20, 0), 0);
    CX_CHECK(threads_now() > before); /* the in-bound thread */
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    CX_CHECK_EQ_INT(threads_now(), before);
    CX_CHECK_EQ_INT(pi_write(w, "x", 1, NULL), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_read(r, NULL, 0, NULL), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    CX_CHECK_EQ_INT(pi_space_close(s), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    s = pi_space_open(sp.addr, NULL); /* again */
    CX_CHECK(s >= 0);
    r = pi_attach("down", s);
    CX_CHECK_EQ_INT(read_all(r, 0, 20, 10000), 20); /* the writer was closed: the end is there */
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
    CX_CHECK_EQ_INT(threads_now(), before);
    space_down(&sp);
}

CX_TEST_MAIN()
