/* The space's format store: token -> description, in memory and in <dir>/formats/. */
#include "space/cx_space_formats.h"

#include "common/cx_error.h"
#include "format/cx_format.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DESC (1u << 20) /* a description is a few hundred bytes; refuse absurd ones */

struct entry {
    uint64_t token;
    uint8_t *desc;
    size_t len;
    struct entry *next;
};

struct cx_space_formats {
    pthread_mutex_t mu;
    char dir[4096];
    struct entry *buckets[256];
    size_t count;
};

static struct entry **slot(struct cx_space_formats *f, uint64_t token)
{
    struct entry **e = &f->buckets[(token ^ (token >> 29)) & 255];
    while (*e && (*e)->token != token)
        e = &(*e)->next;
    return e;
}

/* Rebuilds the format to check the bytes and to learn the token they hash to. */
static int check_desc(const uint8_t *desc, size_t len, uint64_t *token)
{
    if (len == 0 || len > MAX_DESC)
        return cx_err_set(EPROTO, "format description of %zu bytes (1..%u)", len, MAX_DESC);
    struct cx_format *fmt;
    int rc = cx_format_from_description(desc, len, &fmt);
    if (rc < 0)
        return cx_err_wrap(-EPROTO, "format description refused");
    *token = cx_format_token(fmt);
    cx_format_free(fmt);
    return 0;
}

static int keep(struct cx_space_formats *f, uint64_t token, const uint8_t *desc, size_t len)
{
    struct entry *e = malloc(sizeof *e);
    uint8_t *copy = malloc(len);
    if (!e || !copy) {
        free(e);
        free(copy);
        return cx_err_set(ENOMEM, "format store");
    }
    memcpy(copy, desc, len);
    *e = (struct entry){.token = token, .desc = copy, .len = len};
    struct entry **s = slot(f, token);
    e->next = NULL;
    *s = e;
    f->count++;
    return 0;
}

static int write_file(const char *dir, uint64_t token, const uint8_t *desc, size_t len)
{
    char path[4200], tmp[4210];
    snprintf(path, sizeof path, "%s/%016" PRIx64 ".fmt", dir, token);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return cx_err_set(errno, "format store: %s: %s", tmp, strerror(errno));
    ssize_t w = write(fd, desc, len);
    int ok = w == (ssize_t)len && fdatasync(fd) == 0;
    int err = errno;
    close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return cx_err_set(ok ? errno : (err ? err : EIO), "format store: writing %s failed", path);
    }
    return 0;
}

static void load_file(struct cx_space_formats *f, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", f->dir, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return;
    uint8_t *buf = malloc(MAX_DESC);
    size_t n = buf ? fread(buf, 1, MAX_DESC, fp) : 0;
    fclose(fp);
    uint64_t token;
    if (buf && check_desc(buf, n, &token) == 0) {
        char want[40];
        snprintf(want, sizeof want, "%016" PRIx64 ".fmt", token);
        if (strcmp(want, name) == 0 && !*slot(f, token))
            keep(f, token, buf, n);
        else
            fprintf(stderr, "conflux space: format file %s does not hash to its name; skipped\n", path);
    } else {
        fprintf(stderr, "conflux space: format file %s is damaged (%s); skipped\n", path, cx_errmsg());
    }
    free(buf);
}

int cx_space_formats_open(const char *dir, struct cx_space_formats **out)
{
    struct cx_space_formats *f = calloc(1, sizeof *f);
    if (!f)
        return cx_err_set(ENOMEM, "format store");
    pthread_mutex_init(&f->mu, NULL);
    snprintf(f->dir, sizeof f->dir, "%s/formats", dir);
    if (mkdir(f->dir, 0755) != 0 && errno != EEXIST) {
        int rc = cx_err_set(errno, "format store: mkdir %s: %s", f->dir, strerror(errno));
        free(f);
        return rc;
    }
    DIR *d = opendir(f->dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)))
            if (strlen(de->d_name) == 20 && strcmp(de->d_name + 16, ".fmt") == 0)
                load_file(f, de->d_name);
        closedir(d);
    }
    *out = f;
    return 0;
}

void cx_space_formats_close(struct cx_space_formats *f)
{
    if (!f)
        return;
    for (int i = 0; i < 256; i++)
        for (struct entry *e = f->buckets[i], *n; e; e = n) {
            n = e->next;
            free(e->desc);
            free(e);
        }
    pthread_mutex_destroy(&f->mu);
    free(f);
}

int cx_space_formats_put(struct cx_space_formats *f, const uint8_t *desc, size_t len,
                         uint64_t *token)
{
    int rc = check_desc(desc, len, token);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&f->mu);
    if (!*slot(f, *token)) {
        rc = write_file(f->dir, *token, desc, len);
        if (rc == 0)
            rc = keep(f, *token, desc, len);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

int cx_space_formats_get(struct cx_space_formats *f, uint64_t token, uint8_t **desc, size_t *len)
{
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    struct entry *e = *slot(f, token);
    if (!e) {
        rc = cx_err_set(ENOENT, "format token %016" PRIx64 " is not known to this space", token);
    } else if (!(*desc = malloc(e->len))) {
        rc = cx_err_set(ENOMEM, "format store");
    } else {
        memcpy(*desc, e->desc, e->len);
        *len = e->len;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

size_t cx_space_formats_count(struct cx_space_formats *f)
{
    pthread_mutex_lock(&f->mu);
    size_t n = f->count;
    pthread_mutex_unlock(&f->mu);
    return n;
}
