/* The per-process format registry (cx_format_registry.h): an open hash table under a
 * read-write lock; entries are never removed. */
#include "format/cx_format_registry.h"

#include "common/cx_error.h"
#include "format/cx_format_int.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static struct cx_format **table; /* capacity a power of two, linear probing */
static size_t cap, count;
static cx_format_fetch_fn fetch_fn;
static void *fetch_arg;

static const struct cx_format *find_locked(uint64_t token)
{
    if (!cap)
        return NULL;
    for (size_t i = token & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (!table[i])
            return NULL;
        if (table[i]->token == token)
            return table[i];
    }
}

static int grow_locked(void)
{
    size_t ncap = cap ? cap * 2 : 64;
    struct cx_format **nt = calloc(ncap, sizeof *nt);
    if (!nt)
        return cx_err_set(ENOMEM, "out of memory");
    for (size_t i = 0; i < cap; i++) {
        if (!table[i])
            continue;
        size_t j = table[i]->token & (ncap - 1);
        while (nt[j])
            j = (j + 1) & (ncap - 1);
        nt[j] = table[i];
    }
    free(table);
    table = nt;
    cap = ncap;
    return 0;
}

int cx_format_registry_insert(struct cx_format *f, const struct cx_format **canon)
{
    int rc = 0;
    pthread_rwlock_wrlock(&lock);
    const struct cx_format *have = find_locked(f->token);
    if (have) {
        cx_format_free(f);
        f = (struct cx_format *)have;
        goto out;
    }
    if ((count + 1) * 2 > cap && (rc = grow_locked()) < 0) {
        cx_format_free(f);
        f = NULL;
        goto out;
    }
    size_t j = f->token & (cap - 1);
    while (table[j])
        j = (j + 1) & (cap - 1);
    table[j] = f;
    count++;
out:
    pthread_rwlock_unlock(&lock);
    if (canon)
        *canon = f;
    return rc;
}

const struct cx_format *cx_format_registry_lookup(uint64_t token)
{
    pthread_rwlock_rdlock(&lock);
    const struct cx_format *f = find_locked(token);
    cx_format_fetch_fn fn = fetch_fn;
    void *arg = fetch_arg;
    pthread_rwlock_unlock(&lock);
    if (f)
        return f;
    if (!fn) {
        cx_err_set(ENOENT, "unknown format token %016" PRIx64, token);
        return NULL;
    }
    uint8_t *desc = NULL;
    size_t len = 0;
    struct cx_format *nf = NULL;
    int rc = fn(arg, token, &desc, &len);
    if (rc < 0) {
        cx_err_wrap(rc, "unknown format token %016" PRIx64, token);
        return NULL;
    }
    rc = cx_format_from_description(desc, len, &nf);
    free(desc);
    if (rc < 0) {
        cx_err_wrap(rc, "fetched format %016" PRIx64, token);
        return NULL;
    }
    if (nf->token != token) {
        cx_err_set(EPROTO, "fetched description for %016" PRIx64 " hashes to %016" PRIx64,
                   token, nf->token);
        cx_format_free(nf);
        return NULL;
    }
    const struct cx_format *canon;
    if (cx_format_registry_insert(nf, &canon) < 0)
        return NULL;
    return canon;
}

void cx_format_registry_set_fetch(cx_format_fetch_fn fn, void *arg)
{
    pthread_rwlock_wrlock(&lock);
    fetch_fn = fn;
    fetch_arg = arg;
    pthread_rwlock_unlock(&lock);
}

size_t cx_format_registry_count(void)
{
    pthread_rwlock_rdlock(&lock);
    size_t n = count;
    pthread_rwlock_unlock(&lock);
    return n;
}
