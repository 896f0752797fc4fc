/* Durable reader cursors beside a pipe's log; see cx_segcursor.h. */
#include "space/cx_segcursor.h"

#include "common/cx_crc32c.h"
#include "common/cx_error.h"
#include "space/cx_segstore.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MAGIC "CXCURSR1"
#define SLOT_LEN 32
#define FILE_LEN (2 * SLOT_LEN)
#define PREFIX "cursor-"
#define GROUP_PREFIX "group-" /* no longer than PREFIX */

static int is_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int cx_cursor_name_check(const char *name)
{
    if (!name)
        return cx_err_set(EINVAL, "cursor name is missing");
    size_t n = strnlen(name, CX_CURSOR_NAME_MAX + 1);
    if (n == 0)
        return cx_err_set(EINVAL, "cursor name is empty");
    if (n > CX_CURSOR_NAME_MAX)
        return cx_err_set(EINVAL, "cursor name '%.32s...' is longer than %d bytes", name,
                          CX_CURSOR_NAME_MAX);
    if (!is_alnum((unsigned char)name[0]))
        return cx_err_set(EINVAL, "cursor name '%s' must start with a letter or digit", name);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!(is_alnum(c) || c == '.' || c == '_' || c == '-'))
            return cx_err_set(EINVAL, "cursor name '%s' has a character not in [A-Za-z0-9._-] at byte %zu",
                              name, i);
    }
    return 0;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Encodes a record into b[SLOT_LEN]. */
static void slot_encode(uint8_t *b, uint64_t pos, uint64_t seq)
{
    memset(b, 0, SLOT_LEN);
    memcpy(b, MAGIC, 8);
    put64(b + 8, pos);
    put64(b + 16, seq);
    put64(b + 24, cx_crc32c(0, b, 24)); /* the CRC, then four zero bytes */
}

/* 1 and *pos, *seq when b[SLOT_LEN] holds a whole record. */
static int slot_decode(const uint8_t *b, uint64_t *pos, uint64_t *seq)
{
    if (memcmp(b, MAGIC, 8) != 0 || get32(b + 24) != cx_crc32c(0, b, 24) || get32(b + 28) != 0)
        return 0;
    *pos = get64(b + 8);
    *seq = get64(b + 16);
    return *seq != 0;
}

/* The cursor file open at fd: 0 and the newest whole slot's position and sequence, -ENOENT
 * when the file is empty (created, never written: no pi_ack returned), -EBADMSG when no
 * slot is whole. */
static int read_fd(int fd, const char *fn, uint64_t *pos, uint64_t *seq)
{
    uint8_t b[FILE_LEN + 1];
    ssize_t n = pread(fd, b, sizeof b, 0);
    if (n < 0)
        return cx_err_set(errno, "read %s: %s", fn, strerror(errno));
    if (n == 0)
        return -ENOENT;
    uint64_t p[2] = {0, 0}, q[2] = {0, 0};
    int ok0 = n >= SLOT_LEN && slot_decode(b, &p[0], &q[0]);
    int ok1 = n >= FILE_LEN && slot_decode(b + SLOT_LEN, &p[1], &q[1]);
    if (n > FILE_LEN || (!ok0 && !ok1))
        return cx_err_set(EBADMSG, "cursor file %s is damaged (%zd bytes, no whole record)", fn, n);
    int k = ok1 && (!ok0 || q[1] > q[0]);
    *pos = p[k];
    *seq = q[k];
    return 0;
}

/* Stores pos in the file prefix+name (a cursor's, or a group's floor). */
static int set_file(struct cx_seg_pipe *p, const char *prefix, const char *name, uint64_t pos)
{
    int rc = cx_cursor_name_check(name);
    if (rc < 0)
        return rc;
    int durable, dfd = cx_segstore_pipe_dirfd(p, &durable);
    char fn[sizeof PREFIX + CX_CURSOR_NAME_MAX];
    snprintf(fn, sizeof fn, "%s%s", prefix, name);
    int fd = openat(dfd, fn, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return cx_err_set(errno, "cursor '%s': open %s: %s", name, fn, strerror(errno));
    uint64_t old = 0, seq = 0;
    rc = read_fd(fd, fn, &old, &seq);
    int fresh = rc == -ENOENT;
    if (rc == -EBADMSG) /* both slots torn: only a machine crash mid-write does that */
        fprintf(stderr, "confluxd space: %s: overwritten by a new position\n", cx_errmsg());
    else if (rc < 0 && !fresh) {
        close(fd);
        return cx_err_wrap(rc, "cursor '%s'", name);
    }
    /* the older slot takes the new record: the newer one stays whole if this write tears */
    uint8_t b[SLOT_LEN];
    slot_encode(b, pos, seq + 1);
    ssize_t n = pwrite(fd, b, SLOT_LEN, (off_t)(((seq + 1) % 2) * SLOT_LEN));
    if (n >= 0 && n != SLOT_LEN)
        errno = EIO; /* short write: the disk is full */
    if (n != SLOT_LEN || (durable && fdatasync(fd) < 0)) {
        rc = cx_err_set(errno, "cursor '%s': write %s: %s", name, fn, strerror(errno));
        close(fd);
        return rc;
    }
    close(fd);
    if (fresh && durable && fsync(dfd) < 0) /* a new file's name */
        return cx_err_set(errno, "cursor '%s': fsync of the pipe's directory: %s", name, strerror(errno));
    return 0;
}

/* Reads the cursor file fn of dfd (read_fd). */
static int read_file(int dfd, const char *fn, uint64_t *pos)
{
    int fd = openat(dfd, fn, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ENOENT : cx_err_set(errno, "open %s: %s", fn, strerror(errno));
    uint64_t seq;
    int rc = read_fd(fd, fn, pos, &seq);
    close(fd);
    return rc;
}

int cx_segcursor_set(struct cx_seg_pipe *p, const char *name, uint64_t pos)
{
    return set_file(p, PREFIX, name, pos);
}

int cx_segfloor_set(struct cx_seg_pipe *p, const char *group, uint64_t floor)
{
    return set_file(p, GROUP_PREFIX, group, floor);
}

static int get_file(struct cx_seg_pipe *p, const char *prefix, const char *name, uint64_t *pos)
{
    int rc = cx_cursor_name_check(name);
    if (rc < 0)
        return rc;
    int durable, dfd = cx_segstore_pipe_dirfd(p, &durable);
    char fn[sizeof PREFIX + CX_CURSOR_NAME_MAX];
    snprintf(fn, sizeof fn, "%s%s", prefix, name);
    rc = read_file(dfd, fn, pos);
    if (rc == -ENOENT)
        return cx_err_set(ENOENT, "%s '%s' was never acknowledged",
                          strcmp(prefix, GROUP_PREFIX) == 0 ? "group" : "cursor", name);
    return rc;
}

int cx_segcursor_get(struct cx_seg_pipe *p, const char *name, uint64_t *pos)
{
    return get_file(p, PREFIX, name, pos);
}

int cx_segfloor_get(struct cx_seg_pipe *p, const char *group, uint64_t *floor)
{
    return get_file(p, GROUP_PREFIX, group, floor);
}

static long list_files(struct cx_seg_pipe *p, const char *prefix,
                       void (*fn)(void *arg, const char *name, uint64_t pos), void *arg)
{
    int durable, dfd = dup(cx_segstore_pipe_dirfd(p, &durable));
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        int err = errno;
        if (dfd >= 0)
            close(dfd);
        return cx_err_set(err, "cursors: opendir: %s", strerror(err));
    }
    rewinddir(d);
    long count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name + strlen(prefix);
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || cx_cursor_name_check(name) < 0)
            continue; /* the log's files */
        uint64_t pos;
        int rc = read_file(dirfd(d), e->d_name, &pos);
        if (rc == -ENOENT)
            continue; /* created, never written */
        if (rc < 0) {
            fprintf(stderr, "confluxd space: %s (skipped)\n", cx_errmsg());
            continue;
        }
        fn(arg, name, pos);
        count++;
    }
    closedir(d);
    return count;
}

long cx_segcursor_list(struct cx_seg_pipe *p, void (*fn)(void *arg, const char *name, uint64_t pos),
                       void *arg)
{
    return list_files(p, PREFIX, fn, arg);
}

long cx_segfloor_list(struct cx_seg_pipe *p, void (*fn)(void *arg, const char *group, uint64_t floor),
                      void *arg)
{
    return list_files(p, GROUP_PREFIX, fn, arg);
}
