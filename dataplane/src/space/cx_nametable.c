/* The space's name table; see cx_nametable.h.
 *
 * File format (text, one record per line):
 *     cxnames 1
 *     next <next pipe id>
 *     <name> <pipe id> <format token>        (sorted by name, any number)
 *     crc <8 hex digits>                     (CRC-32C of every byte before this line)
 */
#include "space/cx_nametable.h"

#include "common/cx_error.h"
#include "common/cx_crc32c.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct hslot { /* the lookup index: open addressing over the sorted array */
    uint32_t hash, at1; /* at1: index in e + 1 (0: empty) */
};

struct cx_nametable {
    pthread_rwlock_t mu;     /* lookups (UDP threads, engine) share it; writes take it alone */
    int dirfd;
    uint64_t next_id;
    struct cx_name_entry *e; /* sorted by name (list order, binary search on writes) */
    size_t n, cap;
    struct hslot *h;         /* lookups: O(1); rebuilt (O(n)) by every bind and unlink */
    size_t hmask;
};

static uint32_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (uint32_t)(h ^ (h >> 32));
}

/* Rebuilds the index after a change (t->mu held for writing); on no memory the index
 * stays off and lookups use binary search. */
static void index_rebuild(struct cx_nametable *t)
{
    size_t cap = 16;
    while (cap < t->n * 2)
        cap *= 2;
    struct hslot *h = calloc(cap, sizeof *h);
    free(t->h);
    t->h = h;
    t->hmask = cap - 1;
    for (size_t i = 0; h && i < t->n; i++) {
        uint32_t hv = name_hash(t->e[i].name);
        size_t k = hv & t->hmask;
        while (h[k].at1)
            k = (k + 1) & t->hmask;
        h[k] = (struct hslot){hv, (uint32_t)i + 1};
    }
}

static long index_find(struct cx_nametable *t, const char *name)
{
    if (!t->h)
        return -1;
    uint32_t hv = name_hash(name);
    for (size_t k = hv & t->hmask; t->h[k].at1; k = (k + 1) & t->hmask)
        if (t->h[k].hash == hv && strcmp(t->e[t->h[k].at1 - 1].name, name) == 0)
            return (long)t->h[k].at1 - 1;
    return -1;
}

void cx_nametable_pipe_name(uint64_t pipe_id, char out[CX_PIPE_NAME_LEN])
{
    snprintf(out, CX_PIPE_NAME_LEN, "p%016" PRIx64, pipe_id);
}

/* Index of name, or -(insertion point) - 1. */
static long find(const struct cx_nametable *t, const char *name)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(t->e[mid].name, name);
        if (c == 0)
            return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -(long)lo - 1;
}

/* Writes the table to names.tmp, then renames it over names. */
static int persist(struct cx_nametable *t)
{
    size_t cap = 64 + t->n * (CX_SPACE_NAME_MAX + 48);
    char *buf = malloc(cap);
    if (!buf)
        return cx_err_set(ENOMEM, "out of memory");
    size_t len = (size_t)snprintf(buf, cap, "cxnames 1\nnext %" PRIu64 "\n", t->next_id);
    for (size_t i = 0; i < t->n; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s %" PRIu64 " %" PRIu64 "\n",
                                t->e[i].name, t->e[i].pipe_id, t->e[i].format);
    len += (size_t)snprintf(buf + len, cap - len, "crc %08" PRIx32 "\n",
                            cx_crc32c(0, buf, len));
    int rc = 0;
    int fd = openat(t->dirfd, "names.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = cx_err_set(errno, "create names.tmp: %s", strerror(errno));
        goto out;
    }
    for (size_t done = 0; done < len;) {
        ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = cx_err_set(errno, "write names.tmp: %s", strerror(errno));
            goto out;
        }
        done += (size_t)w;
    }
    if (fsync(fd) < 0) {
        rc = cx_err_set(errno, "fsync names.tmp: %s", strerror(errno));
        goto out;
    }
    if (renameat(t->dirfd, "names.tmp", t->dirfd, "names") < 0) {
        rc = cx_err_set(errno, "rename names.tmp: %s", strerror(errno));
        goto out;
    }
    if (fsync(t->dirfd) < 0)
        rc = cx_err_set(errno, "fsync of the directory: %s", strerror(errno));
out:
    if (fd >= 0)
        close(fd);
    free(buf);
    return rc;
}

static int insert_at(struct cx_nametable *t, size_t at, const struct cx_name_entry *e)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct cx_name_entry *n = realloc(t->e, cap * sizeof *n);
        if (!n)
            return cx_err_set(ENOMEM, "out of memory");
        t->e = n;
        t->cap = cap;
    }
    memmove(t->e + at + 1, t->e + at, (t->n - at) * sizeof *t->e);
    t->e[at] = *e;
    t->n++;
    return 0;
}

static int load(struct cx_nametable *t, const char *buf, size_t len)
{
    /* the trailer: last line "crc xxxxxxxx\n" */
    if (len < 13 || buf[len - 1] != '\n' || memcmp(buf + len - 13, "crc ", 4) != 0)
        return cx_err_set(EBADMSG, "names: missing checksum trailer");
    char hex[9];
    memcpy(hex, buf + len - 9, 8);
    hex[8] = '\0';
    char *end;
    unsigned long want = strtoul(hex, &end, 16);
    if (*end || (uint32_t)want != cx_crc32c(0, buf, len - 13))
        return cx_err_set(EBADMSG, "names: checksum mismatch");
    len -= 13;
    size_t pos = 0, lineno = 0;
    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (!nl)
            return cx_err_set(EBADMSG, "names: unterminated line %zu", lineno + 1);
        size_t ll = (size_t)(nl - (buf + pos));
        char line[CX_SPACE_NAME_MAX + 64];
        if (ll >= sizeof line)
            return cx_err_set(EBADMSG, "names: line %zu is too long", lineno + 1);
        memcpy(line, buf + pos, ll);
        line[ll] = '\0';
        pos += ll + 1;
        lineno++;
        if (lineno == 1) {
            if (strcmp(line, "cxnames 1") != 0)
                return cx_err_set(EBADMSG, "names: unknown header '%s'", line);
            continue;
        }
        if (lineno == 2) {
            if (sscanf(line, "next %" SCNu64, &t->next_id) != 1 || t->next_id == 0)
                return cx_err_set(EBADMSG, "names: bad 'next' line");
            continue;
        }
        struct cx_name_entry e;
        char name[CX_SPACE_NAME_MAX + 64];
        if (sscanf(line, "%s %" SCNu64 " %" SCNu64, name, &e.pipe_id, &e.format) != 3 ||
            cx_space_name_check(name) < 0 || e.pipe_id == 0 || e.pipe_id >= t->next_id)
            return cx_err_set(EBADMSG, "names: bad entry on line %zu", lineno);
        memcpy(e.name, name, strlen(name) + 1); /* checked: at most CX_SPACE_NAME_MAX */
        long at = find(t, e.name);
        if (at >= 0 || t->n >= CX_NAMETABLE_MAX)
            return cx_err_set(EBADMSG, "names: duplicate or excess entry on line %zu", lineno);
        int rc = insert_at(t, (size_t)(-at - 1), &e);
        if (rc < 0)
            return rc;
    }
    if (lineno < 2)
        return cx_err_set(EBADMSG, "names: truncated file");
    return 0;
}

int cx_nametable_open(const char *dir, struct cx_nametable **out)
{
    struct cx_nametable *t = calloc(1, sizeof *t);
    char *buf = NULL;
    int fd = -1, rc = 0;
    if (!t)
        return cx_err_set(ENOMEM, "out of memory");
    pthread_rwlock_init(&t->mu, NULL);
    t->next_id = 1;
    if ((t->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        rc = cx_err_set(errno, "open: %s", strerror(errno));
        goto error;
    }
    if ((fd = openat(t->dirfd, "names", O_RDONLY | O_CLOEXEC)) < 0) {
        if (errno == ENOENT)
            goto done;
        rc = cx_err_set(errno, "open names: %s", strerror(errno));
        goto error;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = cx_err_set(errno, "stat names: %s", strerror(errno));
        goto error;
    }
    size_t max = 64 + (size_t)CX_NAMETABLE_MAX * (CX_SPACE_NAME_MAX + 48);
    if ((uint64_t)st.st_size > max) {
        rc = cx_err_set(EBADMSG, "names: file of %lld bytes is too large", (long long)st.st_size);
        goto error;
    }
    size_t len = (size_t)st.st_size;
    if (!(buf = malloc(len + 1))) {
        rc = cx_err_set(ENOMEM, "out of memory");
        goto error;
    }
    for (size_t done = 0; done < len;) {
        ssize_t r = read(fd, buf + done, len - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? cx_err_set(errno, "read names: %s", strerror(errno))
                       : cx_err_set(EBADMSG, "names: file shrank while reading");
            goto error;
        }
        done += (size_t)r;
    }
    if ((rc = load(t, buf, len)) < 0)
        goto error;
    index_rebuild(t);
done:
    if (fd >= 0)
        close(fd);
    free(buf);
    *out = t;
    return 0;
error:
    if (fd >= 0)
        close(fd);
    free(buf);
    rc = cx_err_wrap(rc, "name table in '%s'", dir);
    cx_nametable_close(t);
    return rc;
}

void cx_nametable_close(struct cx_nametable *t)
{
    if (!t)
        return;
    if (t->dirfd >= 0)
        close(t->dirfd);
    pthread_rwlock_destroy(&t->mu);
    free(t->h);
    free(t->e);
    free(t);
}

int cx_nametable_bind(struct cx_nametable *t, const char *name, uint64_t format,
                      struct cx_name_entry *out)
{
    int rc = cx_space_name_check(name);
    if (rc < 0)
        return cx_err_wrap(rc, "bind");
    pthread_rwlock_wrlock(&t->mu);
    long at = find(t, name);
    if (at >= 0) {
        char pn[CX_PIPE_NAME_LEN];
        cx_nametable_pipe_name(t->e[at].pipe_id, pn);
        rc = cx_err_set(EEXIST, "bind '%s': the name is bound to pipe %s until unlinked", name,
                        pn);
        goto out;
    }
    if (t->n >= CX_NAMETABLE_MAX) {
        rc = cx_err_set(ENOSPC, "bind '%s': the table holds %d names already", name,
                        CX_NAMETABLE_MAX);
        goto out;
    }
    struct cx_name_entry e = {.pipe_id = t->next_id, .format = format};
    snprintf(e.name, sizeof e.name, "%s", name);
    size_t pos = (size_t)(-at - 1);
    if ((rc = insert_at(t, pos, &e)) < 0)
        goto out;
    t->next_id++;
    if ((rc = persist(t)) < 0) {
        t->next_id--;
        memmove(t->e + pos, t->e + pos + 1, (t->n - pos - 1) * sizeof *t->e);
        t->n--;
        rc = cx_err_wrap(rc, "bind '%s'", name);
        goto out;
    }
    index_rebuild(t);
    if (out)
        *out = e;
out:
    pthread_rwlock_unlock(&t->mu);
    return rc;
}

int cx_nametable_lookup(struct cx_nametable *t, const char *name, struct cx_name_entry *out)
{
    int rc = cx_space_name_check(name);
    if (rc < 0)
        return cx_err_wrap(rc, "lookup");
    pthread_rwlock_rdlock(&t->mu);
    long at = t->n ? index_find(t, name) : -1;
    if (at < 0 && !t->h && t->n) /* no index (no memory): the sorted array */
        at = find(t, name);
    if (at < 0)
        rc = cx_err_set(ENOENT, "lookup '%s': no such name", name);
    else if (out)
        *out = t->e[at];
    pthread_rwlock_unlock(&t->mu);
    return rc;
}

int cx_nametable_unlink(struct cx_nametable *t, const char *name, struct cx_name_entry *out)
{
    int rc = cx_space_name_check(name);
    if (rc < 0)
        return cx_err_wrap(rc, "unlink");
    pthread_rwlock_wrlock(&t->mu);
    long at = find(t, name);
    if (at < 0) {
        rc = cx_err_set(ENOENT, "unlink '%s': no such name", name);
        goto out;
    }
    struct cx_name_entry e = t->e[at];
    memmove(t->e + at, t->e + at + 1, (t->n - (size_t)at - 1) * sizeof *t->e);
    t->n--;
    index_rebuild(t);
    if ((rc = persist(t)) < 0) {
        memmove(t->e + at + 1, t->e + at, (t->n - (size_t)at) * sizeof *t->e);
        t->e[at] = e;
        t->n++;
        index_rebuild(t);
        rc = cx_err_wrap(rc, "unlink '%s'", name);
        goto out;
    }
    if (out)
        *out = e;
out:
    pthread_rwlock_unlock(&t->mu);
    return rc;
}

size_t cx_nametable_list(struct cx_nametable *t, struct cx_name_entry *out, size_t cap)
{
    pthread_rwlock_rdlock(&t->mu);
    size_t n = t->n;
    if (out)
        memcpy(out, t->e, (n < cap ? n : cap) * sizeof *out);
    pthread_rwlock_unlock(&t->mu);
    return n;
}
