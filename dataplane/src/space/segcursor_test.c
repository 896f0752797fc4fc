/* The cursor files beside a pipe's log (cx_segcursor.h): positions survive closing and
 * reopening the store; a torn newest record leaves the previous position; a file with no
 * whole record is refused (-EBADMSG), never read as 0; an empty file is a cursor never
 * stored; unlinking the pipe removes its cursors. */
#include "space/space_testutil.h"

#include "common/cx_error.h"
#include "common/cx_test.h"
#include "space/cx_segcursor.h"
#include "space/cx_segstore.h"

#include <fcntl.h>
#include <unistd.h>

static int open_pipe(const char *dir, struct cx_segstore **s, struct cx_seg_pipe **p)
{
    struct cx_seg_pipe_opts o = {.fsync = CX_SEG_FSYNC_EVERY};
    int rc = cx_segstore_open(dir, s);
    return rc < 0 ? rc : cx_segstore_pipe_open(*s, "p1", &o, 1, p);
}

/* Flips one byte of the cursor file at off. */
static int flip(const char *dir, const char *cursor, off_t off)
{
    char fn[256];
    snprintf(fn, sizeof fn, "%s/pipes/p1/cursor-%s", dir, cursor);
    int fd = open(fn, O_RDWR);
    uint8_t b;
    int ok = fd >= 0 && pread(fd, &b, 1, off) == 1 && (b ^= 0x5a, pwrite(fd, &b, 1, off) == 1);
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}

static void count(void *arg, const char *name, uint64_t pos)
{
    (void)name;
    (void)pos;
    ++*(int *)arg;
}

CX_TEST(cursor_positions_survive_reopen_and_torn_records)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir) != NULL);
    struct cx_segstore *s;
    struct cx_seg_pipe *p;
    CX_CHECK_EQ_INT(open_pipe(dir, &s, &p), 0);
    uint64_t pos = 99;
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "a", &pos), -ENOENT);
    for (uint64_t v = 1; v <= 10; v++) /* ten writes: both slots used, sequence 10 newest */
        CX_CHECK_EQ_INT(cx_segcursor_set(p, "a", v * 100), 0);
    CX_CHECK_EQ_INT(cx_segcursor_set(p, "b", 7), 0);
    cx_segstore_pipe_close(p);
    cx_segstore_close(s);
    CX_CHECK_EQ_INT(open_pipe(dir, &s, &p), 0);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "a", &pos), 0);
    CX_CHECK_EQ_INT((long)pos, 1000);
    /* the newest record (sequence 10: slot 0) torn: the previous position */
    CX_CHECK_EQ_INT(flip(dir, "a", 9), 0);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "a", &pos), 0);
    CX_CHECK_EQ_INT((long)pos, 900);
    /* a new write goes over the torn slot and is the newest again */
    CX_CHECK_EQ_INT(cx_segcursor_set(p, "a", 1100), 0);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "a", &pos), 0);
    CX_CHECK_EQ_INT((long)pos, 1100);
    /* both records damaged: refused with the file's name, skipped by list */
    CX_CHECK_EQ_INT(flip(dir, "b", 32 + 2), 0); /* its one record (sequence 1: slot 1) */
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "b", &pos), -EBADMSG);
    CX_CHECK(strstr(cx_errmsg(), "cursor-b") != NULL);
    int n = 0;
    CX_CHECK_EQ_INT(cx_segcursor_list(p, count, &n), 1);
    CX_CHECK_EQ_INT(n, 1);
    /* an empty file: created, never written */
    char fn[256];
    snprintf(fn, sizeof fn, "%s/pipes/p1/cursor-c", dir);
    int fd = open(fn, O_CREAT | O_WRONLY, 0644);
    CX_CHECK(fd >= 0);
    close(fd);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "c", &pos), -ENOENT);
    CX_CHECK_EQ_INT(cx_segcursor_set(p, "c", 3), 0);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "c", &pos), 0);
    CX_CHECK_EQ_INT((long)pos, 3);
    /* bad names */
    CX_CHECK_EQ_INT(cx_segcursor_set(p, "../x", 1), -EINVAL);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "", &pos), -EINVAL);
    /* unlinking the pipe removes its cursors */
    cx_segstore_pipe_close(p);
    CX_CHECK_EQ_INT(cx_segstore_pipe_unlink(s, "p1"), 0);
    struct cx_seg_pipe_opts o = {0};
    CX_CHECK_EQ_INT(cx_segstore_pipe_open(s, "p1", &o, 1, &p), 0);
    CX_CHECK_EQ_INT(cx_segcursor_get(p, "a", &pos), -ENOENT);
    cx_segstore_pipe_close(p);
    cx_segstore_close(s);
    tmpdir_remove(dir);
}

CX_TEST_MAIN()
