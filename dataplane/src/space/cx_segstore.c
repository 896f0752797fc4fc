/* The segment store: one append-only log per pipe; see cx_segstore.h. */
#include "space/cx_segstore.h"

#include "common/cx_error.h"
#include "common/cx_crc32c.h"
#include "space/cx_seglog.h"
#include "space/cx_space_name.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_IOV 64
#define FNAME_LEN 32

struct seg_file {
    uint64_t first_id; /* id the file's first DATA record carries (its name) */
    uint64_t count;    /* DATA records */
    uint64_t size;     /* bytes of valid records */
    uint64_t *sparse;  /* offset of record first_id + k * STRIDE */
    size_t nsparse, capsparse;
};

struct cx_seg_pipe {
    struct cx_segstore *store;
    struct cx_seg_pipe *next;
    pthread_mutex_t mu;
    char name[CX_SPACE_NAME_MAX + 1];
    struct cx_seg_pipe_opts opts;
    int dirfd;
    struct seg_file *files;
    size_t nfiles, capfiles;
    int wfd;                     /* the last file, open for writing; -1 when no file */
    int rfd;                     /* cached read fd of an older file */
    uint64_t rfd_first;
    uint64_t last_id, total_bytes, truncated;
    int ended, broken, dirty;
    uint64_t last_sync_ns;
    /* read-ahead for readers going through the log in order: a window of one file's
     * bytes (below its size when read: records are immutable once written) */
    uint8_t *ra;
    uint64_t ra_file, ra_off, ra_len;
};

#define READAHEAD (256u << 10)

struct cx_segstore {
    pthread_mutex_t mu;
    int dirfd, pipesfd, lockfd;
    char *dir;
    struct cx_seg_pipe *open;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void file_name(uint64_t first, char out[FNAME_LEN])
{
    snprintf(out, FNAME_LEN, "%020" PRIu64 ".log", first);
}

/* 1 and *first when fname is a log file name. */
static int parse_file_name(const char *fname, uint64_t *first)
{
    if (strlen(fname) != 24 || strcmp(fname + 20, ".log") != 0)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (fname[i] < '0' || fname[i] > '9')
            return 0;
        uint64_t d = (uint64_t)(fname[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return 0;
        v = v * 10 + d;
    }
    *first = v;
    return 1;
}

static long fd_read(void *ctx, uint64_t off, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return cx_err_set(errno, "read at offset %" PRIu64 ": %s", off + done,
                              strerror(errno));
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (long)done;
}

static int sparse_add(struct seg_file *f, uint64_t off)
{
    if (f->nsparse == f->capsparse) {
        size_t cap = f->capsparse ? f->capsparse * 2 : 16;
        uint64_t *n = realloc(f->sparse, cap * sizeof *n);
        if (!n)
            return cx_err_set(ENOMEM, "out of memory for the segment index");
        f->sparse = n;
        f->capsparse = cap;
    }
    f->sparse[f->nsparse++] = off;
    return 0;
}

static int files_push(struct cx_seg_pipe *p, uint64_t first)
{
    if (p->nfiles == p->capfiles) {
        size_t cap = p->capfiles ? p->capfiles * 2 : 8;
        struct seg_file *n = realloc(p->files, cap * sizeof *n);
        if (!n)
            return cx_err_set(ENOMEM, "out of memory for the file list");
        p->files = n;
        p->capfiles = cap;
    }
    p->files[p->nfiles++] = (struct seg_file){.first_id = first};
    return 0;
}

static uint64_t first_id(const struct cx_seg_pipe *p)
{
    return p->nfiles ? p->files[0].first_id : p->last_id + 1;
}

static int sync_dir(int dirfd, const char *what)
{
    if (fsync(dirfd) < 0)
        return cx_err_set(errno, "fsync of %s: %s", what, strerror(errno));
    return 0;
}

/* ---- store ---------------------------------------------------------------------------- */

int cx_segstore_open(const char *dir, struct cx_segstore **out)
{
    struct cx_segstore *s = calloc(1, sizeof *s);
    if (!s)
        return cx_err_set(ENOMEM, "out of memory");
    s->dirfd = s->pipesfd = s->lockfd = -1;
    pthread_mutex_init(&s->mu, NULL);
    int rc;
    if (!(s->dir = strdup(dir))) {
        rc = cx_err_set(ENOMEM, "out of memory");
        goto error;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = cx_err_set(errno, "mkdir: %s", strerror(errno));
        goto error;
    }
    if ((s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = cx_err_set(errno, "open: %s", strerror(errno));
        goto error;
    }
    if ((s->lockfd = openat(s->dirfd, "LOCK", O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0) {
        rc = cx_err_set(errno, "LOCK: %s", strerror(errno));
        goto error;
    }
    if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
        rc = errno == EWOULDBLOCK ? cx_err_set(EBUSY, "store is in use by another process")
                                  : cx_err_set(errno, "flock: %s", strerror(errno));
        goto error;
    }
    if (mkdirat(s->dirfd, "pipes", 0755) < 0) {
        if (errno != EEXIST) {
            rc = cx_err_set(errno, "mkdir pipes: %s", strerror(errno));
            goto error;
        }
    } else if ((rc = sync_dir(s->dirfd, "store directory")) < 0) {
        goto error;
    }
    if ((s->pipesfd = openat(s->dirfd, "pipes", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = cx_err_set(errno, "open pipes: %s", strerror(errno));
        goto error;
    }
    *out = s;
    return 0;
error:
    rc = cx_err_wrap(rc, "segment store '%s'", dir);
    cx_segstore_close(s);
    return rc;
}

void cx_segstore_close(struct cx_segstore *s)
{
    if (!s)
        return;
    while (s->open)
        cx_segstore_pipe_close(s->open);
    if (s->pipesfd >= 0)
        close(s->pipesfd);
    if (s->lockfd >= 0)
        close(s->lockfd); /* releases the flock */
    if (s->dirfd >= 0)
        close(s->dirfd);
    pthread_mutex_destroy(&s->mu);
    free(s->dir);
    free(s);
}

/* ---- recovery --------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct scan_ctx {
    struct seg_file *f;
    int ended;
};

static int index_rec(void *ctx, const struct cx_seglog_rec *r)
{
    struct scan_ctx *c = ctx;
    if (r->type != CX_SEGLOG_DATA)
        return 0;
    if (c->f->count % CX_SEG_INDEX_STRIDE == 0) {
        int rc = sparse_add(c->f, r->offset);
        if (rc < 0)
            return rc;
    }
    c->f->count++;
    return 0;
}

/* Deletes log files after index i (used by repair). */
static int drop_files_after(struct cx_seg_pipe *p, uint64_t *names, size_t n, size_t i)
{
    for (size_t j = i + 1; j < n; j++) {
        char fn[FNAME_LEN];
        file_name(names[j], fn);
        struct stat st;
        if (fstatat(p->dirfd, fn, &st, 0) == 0)
            p->truncated += (uint64_t)st.st_size;
        if (unlinkat(p->dirfd, fn, 0) < 0)
            return cx_err_set(errno, "unlink %s: %s", fn, strerror(errno));
    }
    return 0;
}

static int recover(struct cx_seg_pipe *p)
{
    uint64_t *names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, fd = -1;
    int dfd = dup(p->dirfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        return cx_err_set(errno, "opendir: %s", strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t first;
        if (!parse_file_name(e->d_name, &first))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *nn = realloc(names, cap * sizeof *nn);
            if (!nn) {
                rc = cx_err_set(ENOMEM, "out of memory");
                goto out;
            }
            names = nn;
        }
        names[n++] = first;
    }
    if (n)
        qsort(names, n, sizeof *names, cmp_u64);
    for (size_t i = 0; i < n; i++) {
        char fn[FNAME_LEN];
        file_name(names[i], fn);
        uint64_t expect = i == 0 ? names[0] : p->last_id + 1;
        if (names[i] == 0 || names[i] != expect) {
            rc = cx_err_set(EBADMSG, "log file %s should start at segment %" PRIu64, fn, expect);
            if (!p->opts.repair || i == 0)
                goto out;
            if ((rc = drop_files_after(p, names, n, i - 1)) < 0)
                goto out;
            break;
        }
        if (p->ended) {
            rc = cx_err_set(EBADMSG, "log file %s follows the end-of-stream record", fn);
            if (!p->opts.repair)
                goto out;
            if ((rc = drop_files_after(p, names, n, i - 1)) < 0)
                goto out;
            break;
        }
        if ((fd = openat(p->dirfd, fn, O_RDWR | O_CLOEXEC)) < 0) {
            rc = cx_err_set(errno, "open %s: %s", fn, strerror(errno));
            goto out;
        }
        struct stat st;
        if (fstat(fd, &st) < 0) {
            rc = cx_err_set(errno, "stat %s: %s", fn, strerror(errno));
            goto out;
        }
        if ((rc = files_push(p, names[i])) < 0)
            goto out;
        struct seg_file *f = &p->files[p->nfiles - 1];
        struct scan_ctx sc = {f, 0};
        struct cx_seglog_scan res;
        if ((rc = cx_seglog_scan(fd_read, &fd, (uint64_t)st.st_size, names[i], index_rec, &sc,
                                 &res)) < 0) {
            rc = cx_err_wrap(rc, "%s", fn);
            goto out;
        }
        int last = i + 1 == n;
        if (res.verdict == CX_SEGLOG_CORRUPT || (res.verdict == CX_SEGLOG_TORN && !last)) {
            if (!p->opts.repair) {
                rc = cx_err_set(EBADMSG, "corrupt record in %s at offset %" PRIu64 ": %s "
                                "(open with repair to truncate there)", fn, res.valid_end,
                                res.why);
                goto out;
            }
            if ((rc = drop_files_after(p, names, n, i)) < 0)
                goto out;
            n = i + 1;
            last = 1;
        }
        if (res.verdict != CX_SEGLOG_CLEAN) {
            /* a torn tail (or a repaired corruption): cut it off and make the cut durable */
            if (ftruncate(fd, (off_t)res.valid_end) < 0 || fsync(fd) < 0) {
                rc = cx_err_set(errno, "truncate %s: %s", fn, strerror(errno));
                goto out;
            }
            p->truncated += (uint64_t)st.st_size - res.valid_end;
        }
        f->size = res.valid_end;
        p->total_bytes += f->size;
        p->last_id = res.last_id;
        p->ended = res.ended;
        if (last) {
            p->wfd = fd;
            fd = -1;
        } else {
            close(fd);
            fd = -1;
        }
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    closedir(d);
    free(names);
    return rc;
}

/* ---- pipes ------------------------------------------------------------------------------ */

static void pipe_free(struct cx_seg_pipe *p)
{
    free(p->ra);
    for (size_t i = 0; i < p->nfiles; i++)
        free(p->files[i].sparse);
    free(p->files);
    if (p->wfd >= 0)
        close(p->wfd);
    if (p->rfd >= 0)
        close(p->rfd);
    if (p->dirfd >= 0)
        close(p->dirfd);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int cx_segstore_pipe_open(struct cx_segstore *s, const char *name,
                          const struct cx_seg_pipe_opts *opts, int create,
                          struct cx_seg_pipe **out)
{
    int rc = cx_space_name_check(name);
    if (rc < 0)
        return cx_err_wrap(rc, "pipe");
    struct cx_seg_pipe *p = calloc(1, sizeof *p);
    if (!p)
        return cx_err_set(ENOMEM, "out of memory");
    pthread_mutex_init(&p->mu, NULL);
    p->dirfd = p->wfd = p->rfd = -1;
    p->store = s;
    snprintf(p->name, sizeof p->name, "%s", name);
    if (opts)
        p->opts = *opts;
    if (!p->opts.roll_bytes)
        p->opts.roll_bytes = CX_SEG_ROLL_DEFAULT;
    if (p->opts.fsync > CX_SEG_FSYNC_EVERY) {
        rc = cx_err_set(EINVAL, "unknown fsync policy %d", (int)p->opts.fsync);
        goto error_free;
    }
    pthread_mutex_lock(&s->mu);
    for (struct cx_seg_pipe *q = s->open; q; q = q->next)
        if (strcmp(q->name, name) == 0) {
            rc = cx_err_set(EBUSY, "already open");
            goto error;
        }
    if (create) {
        if (mkdirat(s->pipesfd, name, 0755) == 0) {
            if ((rc = sync_dir(s->pipesfd, "pipes directory")) < 0)
                goto error;
        } else if (errno != EEXIST) {
            rc = cx_err_set(errno, "mkdir: %s", strerror(errno));
            goto error;
        }
    }
    if ((p->dirfd = openat(s->pipesfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = errno == ENOENT ? cx_err_set(ENOENT, "no such pipe")
                             : cx_err_set(errno, "open: %s", strerror(errno));
        goto error;
    }
    if ((rc = recover(p)) < 0)
        goto error;
    p->last_sync_ns = now_ns();
    p->next = s->open;
    s->open = p;
    pthread_mutex_unlock(&s->mu);
    *out = p;
    return 0;
error:
    pthread_mutex_unlock(&s->mu);
error_free:
    rc = cx_err_wrap(rc, "pipe '%s'", name);
    pipe_free(p);
    return rc;
}

int cx_segstore_sync(struct cx_seg_pipe *p)
{
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (!p->dirty) {
        pthread_mutex_unlock(&p->mu);
        return 0;
    }
    if (p->wfd >= 0 && fdatasync(p->wfd) < 0) {
        rc = cx_err_set(errno, "pipe '%s': fdatasync: %s", p->name, strerror(errno));
        p->broken = 1;
    } else {
        p->dirty = 0;
        p->last_sync_ns = now_ns();
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int cx_segstore_sync_due(struct cx_seg_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    int due = p->dirty && p->opts.fsync == CX_SEG_FSYNC_INTERVAL &&
              now_ns() - p->last_sync_ns >= (uint64_t)p->opts.fsync_interval_ms * 1000000u;
    pthread_mutex_unlock(&p->mu);
    if (!due)
        return 0;
    int rc = cx_segstore_sync(p);
    return rc < 0 ? rc : 1;
}

int cx_segstore_pipe_dirfd(struct cx_seg_pipe *p, int *durable)
{
    *durable = p->opts.fsync != CX_SEG_FSYNC_NONE;
    return p->dirfd;
}

void cx_segstore_pipe_close(struct cx_seg_pipe *p)
{
    if (!p)
        return;
    struct cx_segstore *s = p->store;
    if (p->opts.fsync != CX_SEG_FSYNC_NONE && p->dirty)
        (void)cx_segstore_sync(p);
    pthread_mutex_lock(&s->mu);
    for (struct cx_seg_pipe **pp = &s->open; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    pipe_free(p);
}

int cx_segstore_pipe_unlink(struct cx_segstore *s, const char *name)
{
    int rc = cx_space_name_check(name);
    if (rc < 0)
        return cx_err_wrap(rc, "unlink pipe");
    pthread_mutex_lock(&s->mu);
    int dfd = -1;
    DIR *d = NULL;
    for (struct cx_seg_pipe *q = s->open; q; q = q->next)
        if (strcmp(q->name, name) == 0) {
            rc = cx_err_set(EBUSY, "pipe is open");
            goto out;
        }
    if ((dfd = openat(s->pipesfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = errno == ENOENT ? cx_err_set(ENOENT, "no such pipe")
                             : cx_err_set(errno, "open: %s", strerror(errno));
        goto out;
    }
    if (!(d = fdopendir(dfd))) {
        rc = cx_err_set(errno, "opendir: %s", strerror(errno));
        close(dfd);
        goto out;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (unlinkat(dfd, e->d_name, 0) < 0) {
            rc = cx_err_set(errno, "unlink %s: %s", e->d_name, strerror(errno));
            goto out;
        }
    }
    if (unlinkat(s->pipesfd, name, AT_REMOVEDIR) < 0) {
        rc = cx_err_set(errno, "rmdir: %s", strerror(errno));
        goto out;
    }
    rc = sync_dir(s->pipesfd, "pipes directory");
out:
    if (d)
        closedir(d);
    pthread_mutex_unlock(&s->mu);
    return rc < 0 ? cx_err_wrap(rc, "unlink pipe '%s'", name) : 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

/* Makes a new last file starting at `first`; the old one is synced (unless NONE). */
static int roll(struct cx_seg_pipe *p, uint64_t first)
{
    char fn[FNAME_LEN];
    file_name(first, fn);
    if (p->wfd >= 0 && p->opts.fsync != CX_SEG_FSYNC_NONE && fdatasync(p->wfd) < 0)
        return cx_err_set(errno, "fdatasync: %s", strerror(errno));
    int fd = openat(p->dirfd, fn, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return cx_err_set(errno, "create %s: %s", fn, strerror(errno));
    int rc = files_push(p, first);
    if (rc == 0 && p->opts.fsync != CX_SEG_FSYNC_NONE)
        rc = sync_dir(p->dirfd, "pipe directory");
    if (rc < 0) {
        close(fd);
        unlinkat(p->dirfd, fn, 0);
        if (p->nfiles && p->files[p->nfiles - 1].first_id == first && p->files[p->nfiles - 1].size == 0)
            p->nfiles--;
        return rc;
    }
    if (p->wfd >= 0)
        close(p->wfd);
    p->wfd = fd;
    return 0;
}

static void drop_head(struct cx_seg_pipe *p)
{
    struct seg_file *f = &p->files[0];
    char fn[FNAME_LEN];
    file_name(f->first_id, fn);
    if (p->rfd >= 0 && p->rfd_first == f->first_id) {
        close(p->rfd);
        p->rfd = -1;
    }
    if (unlinkat(p->dirfd, fn, 0) < 0)
        return; /* left on disk: retried after the next append */
    p->total_bytes -= f->size;
    free(f->sparse);
    memmove(p->files, p->files + 1, (p->nfiles - 1) * sizeof *p->files);
    p->nfiles--;
}

static void retain(struct cx_seg_pipe *p)
{
    while (p->nfiles > 1) {
        uint64_t segs = p->last_id + 1 - first_id(p);
        if (!((p->opts.max_bytes && p->total_bytes > p->opts.max_bytes) ||
              (p->opts.max_segments && segs > p->opts.max_segments)))
            break;
        size_t before = p->nfiles;
        drop_head(p);
        if (p->nfiles == before)
            break;
    }
}

/* Writes header + payload at the end of the last file; on failure rolls the file back. */
static int write_record(struct cx_seg_pipe *p, const struct cx_seglog_hdr *h,
                        const struct iovec *iov, int iovcnt)
{
    struct seg_file *f = &p->files[p->nfiles - 1];
    uint8_t hb[CX_SEGLOG_HDR_SIZE];
    cx_seglog_hdr_encode(h, hb);
    struct iovec v[MAX_IOV + 1];
    v[0].iov_base = hb;
    v[0].iov_len = sizeof hb;
    int nv = 1;
    for (int i = 0; i < iovcnt; i++)
        if (iov[i].iov_len)
            v[nv++] = iov[i];
    struct iovec *cur = v;
    uint64_t off = f->size;
    int rc = 0;
    while (nv > 0) {
        ssize_t w = pwritev(p->wfd, cur, nv, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            rc = cx_err_set(errno, "write: %s", strerror(errno));
            break;
        }
        off += (uint64_t)w;
        while (nv > 0 && (size_t)w >= cur->iov_len) {
            w -= (ssize_t)cur->iov_len;
            cur++;
            nv--;
        }
        if (nv > 0) {
            cur->iov_base = (char *)cur->iov_base + w;
            cur->iov_len -= (size_t)w;
        }
    }
    if (rc < 0 && ftruncate(p->wfd, (off_t)f->size) < 0)
        p->broken = 1;
    return rc;
}

static int after_write(struct cx_seg_pipe *p)
{
    p->dirty = 1;
    int every = (p->opts.fsync == CX_SEG_FSYNC_EVERY && !p->opts.defer_sync) ||
                (p->opts.fsync == CX_SEG_FSYNC_INTERVAL &&
                 now_ns() - p->last_sync_ns >= (uint64_t)p->opts.fsync_interval_ms * 1000000u);
    if (every) {
        if (fdatasync(p->wfd) < 0) {
            /* the record may or may not be durable: refuse to go on rather than guess */
            p->broken = 1;
            return cx_err_set(errno, "fdatasync: %s", strerror(errno));
        }
        p->dirty = 0;
        p->last_sync_ns = now_ns();
    }
    return 0;
}

int cx_segstore_append(struct cx_seg_pipe *p, uint64_t seg_id, uint64_t format,
                       const struct iovec *iov, int iovcnt)
{
    int rc;
    if (iovcnt < 0 || iovcnt > MAX_IOV || (iovcnt && !iov))
        return cx_err_set(EINVAL, "pipe '%s': bad iovec count %d", p->name, iovcnt);
    uint64_t len = 0;
    uint32_t crc = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > CX_SEGLOG_MAX_PAYLOAD)
        return cx_err_set(EMSGSIZE, "pipe '%s': segment of %" PRIu64 " bytes exceeds %u",
                          p->name, len, CX_SEGLOG_MAX_PAYLOAD);
    pthread_mutex_lock(&p->mu);
    if (p->broken) {
        rc = cx_err_set(EIO, "an earlier write failed and could not be rolled back");
        goto out;
    }
    if (p->ended) {
        rc = cx_err_set(EPIPE, "the writer ended the pipe at segment %" PRIu64, p->last_id);
        goto out;
    }
    if (seg_id == 0) {
        rc = cx_err_set(ERANGE, "segment ids start at 1");
        goto out;
    }
    if (seg_id <= p->last_id) {
        rc = CX_SEG_ALREADY;
        goto out;
    }
    if (seg_id != p->last_id + 1) {
        rc = cx_err_set(ERANGE, "segment %" PRIu64 " would leave a gap: last stored is %" PRIu64
                        " (expected %" PRIu64 ")", seg_id, p->last_id, p->last_id + 1);
        goto out;
    }
    for (int i = 0; i < iovcnt; i++)
        crc = cx_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
    if (p->nfiles == 0 || (p->files[p->nfiles - 1].size >= p->opts.roll_bytes &&
                           p->files[p->nfiles - 1].count > 0)) {
        if ((rc = roll(p, seg_id)) < 0)
            goto out;
    }
    struct seg_file *f = &p->files[p->nfiles - 1];
    if (f->count % CX_SEG_INDEX_STRIDE == 0 && (rc = sparse_add(f, f->size)) < 0)
        goto out;
    struct cx_seglog_hdr h = {CX_SEGLOG_DATA, seg_id, format, (uint32_t)len, crc};
    if ((rc = write_record(p, &h, iov, iovcnt)) < 0) {
        if (f->count % CX_SEG_INDEX_STRIDE == 0)
            f->nsparse--;
        goto out;
    }
    f->count++;
    f->size += CX_SEGLOG_HDR_SIZE + len;
    p->total_bytes += CX_SEGLOG_HDR_SIZE + len;
    p->last_id = seg_id;
    rc = after_write(p);
    retain(p);
out:
    pthread_mutex_unlock(&p->mu);
    return rc < 0 ? cx_err_wrap(rc, "pipe '%s': append %" PRIu64, p->name, seg_id) : rc;
}

int cx_segstore_end(struct cx_seg_pipe *p)
{
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (p->ended)
        goto out;
    if (p->broken) {
        rc = cx_err_set(EIO, "an earlier write failed and could not be rolled back");
        goto out;
    }
    if (p->nfiles == 0 && (rc = roll(p, p->last_id + 1)) < 0)
        goto out;
    struct cx_seglog_hdr h = {CX_SEGLOG_END, p->last_id, 0, 0, 0};
    if ((rc = write_record(p, &h, NULL, 0)) < 0)
        goto out;
    p->files[p->nfiles - 1].size += CX_SEGLOG_HDR_SIZE;
    p->total_bytes += CX_SEGLOG_HDR_SIZE;
    p->ended = 1;
    rc = after_write(p);
out:
    pthread_mutex_unlock(&p->mu);
    return rc < 0 ? cx_err_wrap(rc, "pipe '%s': end", p->name) : 0;
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Index of the file holding seg_id (first_id(p) <= seg_id <= last_id). */
static size_t find_file(const struct cx_seg_pipe *p, uint64_t seg_id)
{
    size_t lo = 0, hi = p->nfiles;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (p->files[mid].first_id <= seg_id)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static int fd_for(struct cx_seg_pipe *p, size_t fi, int *fd)
{
    if (fi + 1 == p->nfiles) {
        *fd = p->wfd;
        return 0;
    }
    uint64_t first = p->files[fi].first_id;
    if (p->rfd >= 0 && p->rfd_first == first) {
        *fd = p->rfd;
        return 0;
    }
    char fn[FNAME_LEN];
    file_name(first, fn);
    int nfd = openat(p->dirfd, fn, O_RDONLY | O_CLOEXEC);
    if (nfd < 0)
        return cx_err_set(errno, "open %s: %s", fn, strerror(errno));
    if (p->rfd >= 0)
        close(p->rfd);
    p->rfd = nfd;
    p->rfd_first = first;
    *fd = nfd;
    return 0;
}


/* Reads seg_id under p->mu; hint (may be NULL) says where the record is and is updated to
 * where the next one is. */
/* Reads len bytes at off of file f (open as fd) through the read-ahead window: a small
 * read outside it refills it with up to READAHEAD bytes from off (never past the file's
 * size), so a sequential reader makes one system call per window, not two per record. */
static long ra_read(struct cx_seg_pipe *p, const struct seg_file *f, int fd, uint64_t off, void *buf,
                    size_t len)
{
    if (len >= READAHEAD / 2 || off + len > f->size)
        return fd_read(&fd, off, buf, len);
    if (!(p->ra_file == f->first_id && off >= p->ra_off && off + len <= p->ra_off + p->ra_len)) {
        if (!p->ra && !(p->ra = malloc(READAHEAD)))
            return fd_read(&fd, off, buf, len);
        uint64_t want = f->size - off < READAHEAD ? f->size - off : READAHEAD;
        p->ra_len = 0; /* invalid until filled */
        long n = fd_read(&fd, off, p->ra, (size_t)want);
        if (n < 0)
            return n;
        p->ra_file = f->first_id;
        p->ra_off = off;
        p->ra_len = (uint64_t)n;
        if (off + len > p->ra_off + p->ra_len)
            return fd_read(&fd, off, buf, len);
    }
    memcpy(buf, p->ra + (off - p->ra_off), len);
    return (long)len;
}

static int ra_read_hdr(struct cx_seg_pipe *p, const struct seg_file *f, int fd, uint64_t off,
                       struct cx_seglog_hdr *h)
{
    uint8_t hb[CX_SEGLOG_HDR_SIZE];
    long n = ra_read(p, f, fd, off, hb, sizeof hb);
    if (n < 0)
        return (int)n;
    int rc = cx_seglog_hdr_decode(hb, (size_t)n, h);
    return rc < 0 ? cx_err_wrap(-EBADMSG, "record at offset %" PRIu64, off) : 0;
}

static long read_locked(struct cx_seg_pipe *p, uint64_t seg_id, void *buf, size_t cap,
                        struct cx_seg_info *info, struct cx_seg_iter *hint)
{
    if (seg_id == 0 || seg_id < first_id(p))
        return cx_err_set(ENODATA, "segment %" PRIu64 " was dropped by retention; the first "
                          "available is %" PRIu64, seg_id, first_id(p));
    if (seg_id > p->last_id)
        return p->ended ? cx_err_set(EPIPE, "end of stream after segment %" PRIu64, p->last_id)
                        : cx_err_set(EAGAIN, "segment %" PRIu64 " is not written yet", seg_id);
    size_t fi = find_file(p, seg_id);
    struct seg_file *f = &p->files[fi];
    int fd = -1, rc;
    if ((rc = fd_for(p, fi, &fd)) < 0)
        return rc;
    struct cx_seglog_hdr h;
    uint64_t off;
    if (hint && hint->hint_id == seg_id && hint->hint_file == f->first_id) {
        off = hint->hint_off;
    } else {
        uint64_t k = seg_id - f->first_id;
        off = f->sparse[k / CX_SEG_INDEX_STRIDE];
        for (uint64_t i = 0; i < k % CX_SEG_INDEX_STRIDE; i++) {
            if ((rc = ra_read_hdr(p, f, fd, off, &h)) < 0)
                return rc;
            off += CX_SEGLOG_HDR_SIZE + h.length;
        }
    }
    if ((rc = ra_read_hdr(p, f, fd, off, &h)) < 0)
        return rc;
    if (h.type != CX_SEGLOG_DATA || h.seg_id != seg_id)
        return cx_err_set(EBADMSG, "index points at segment %" PRIu64 " for %" PRIu64,
                          h.seg_id, seg_id);
    if (info)
        *info = (struct cx_seg_info){seg_id, h.format, h.length};
    if (h.length > cap)
        return cx_err_set(EMSGSIZE, "segment %" PRIu64 " has %" PRIu32 " bytes, buffer %zu",
                          seg_id, h.length, cap);
    long n = ra_read(p, f, fd, off + CX_SEGLOG_HDR_SIZE, buf, h.length);
    if (n < 0)
        return n;
    if (n != (long)h.length)
        return cx_err_set(EIO, "segment %" PRIu64 " is cut short on disk", seg_id);
    if (cx_crc32c(0, buf, h.length) != h.payload_crc)
        return cx_err_set(EBADMSG, "segment %" PRIu64 " fails its checksum", seg_id);
    if (hint) {
        uint64_t next = off + CX_SEGLOG_HDR_SIZE + h.length;
        hint->hint_id = seg_id + 1;
        if (next < f->size || fi + 1 == p->nfiles) {
            hint->hint_file = f->first_id;
            hint->hint_off = next;
        } else {
            hint->hint_file = p->files[fi + 1].first_id;
            hint->hint_off = 0;
        }
    }
    return (long)h.length;
}

long cx_segstore_read(struct cx_seg_pipe *p, uint64_t seg_id, void *buf, size_t cap,
                      struct cx_seg_info *info)
{
    pthread_mutex_lock(&p->mu);
    long rc = read_locked(p, seg_id, buf, cap, info, NULL);
    pthread_mutex_unlock(&p->mu);
    return rc < 0 ? cx_err_wrap((int)rc, "pipe '%s'", p->name) : rc;
}

void cx_segstore_iter_init(struct cx_seg_pipe *p, uint64_t from_id, struct cx_seg_iter *it)
{
    memset(it, 0, sizeof *it);
    it->pipe = p;
    if (from_id == 0) {
        pthread_mutex_lock(&p->mu);
        from_id = first_id(p);
        pthread_mutex_unlock(&p->mu);
    }
    it->next_id = from_id;
}

long cx_segstore_iter_next(struct cx_seg_iter *it, void *buf, size_t cap,
                           struct cx_seg_info *info)
{
    struct cx_seg_pipe *p = it->pipe;
    pthread_mutex_lock(&p->mu);
    long rc = read_locked(p, it->next_id, buf, cap, info, it);
    pthread_mutex_unlock(&p->mu);
    if (rc < 0)
        return cx_err_wrap((int)rc, "pipe '%s'", p->name);
    it->next_id++;
    return rc;
}

void cx_segstore_stat(struct cx_seg_pipe *p, struct cx_seg_stat *st)
{
    pthread_mutex_lock(&p->mu);
    st->first_id = first_id(p);
    st->last_id = p->last_id;
    st->segments = p->last_id + 1 - st->first_id;
    st->bytes = p->total_bytes;
    st->files = (uint32_t)p->nfiles;
    st->ended = p->ended;
    st->truncated_bytes = p->truncated;
    pthread_mutex_unlock(&p->mu);
}
