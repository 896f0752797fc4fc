#include "common/cx_env.h"

#include "common/cx_error.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (!*p || *p == '-')
        return 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 0);
    if (errno || *end || v < min || v > max)
        return 0;
    *out = v;
    return 1;
}

#define RANGE_FMT "%s='%s' is not a number in %" PRIu64 "..%" PRIu64

int cx_env_parse_u64(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    return parse(s, min, max, out) ? 0 : cx_err_set(EINVAL, RANGE_FMT, name, s, min, max);
}

/* Names already warned about: a setting read on every accept warns once, not per call. */
#define WARNED_MAX 32
static char warned[WARNED_MAX][64];
static int nwarned;
static pthread_mutex_t warned_lock = PTHREAD_MUTEX_INITIALIZER;

static int first_warning(const char *name)
{
    int first = 1;
    pthread_mutex_lock(&warned_lock);
    for (int i = 0; i < nwarned && first; i++)
        if (strncmp(warned[i], name, sizeof warned[i] - 1) == 0)
            first = 0;
    if (first && nwarned < WARNED_MAX)
        snprintf(warned[nwarned++], sizeof warned[0], "%s", name);
    pthread_mutex_unlock(&warned_lock);
    return first;
}

uint64_t cx_env_u64(const char *name, uint64_t dflt, uint64_t min, uint64_t max)
{
    const char *s = getenv(name);
    uint64_t v;
    if (!s || !*s)
        return dflt;
    if (parse(s, min, max, &v))
        return v;
    if (first_warning(name)) /* not through cx_err_set: the caller's last error stays */
        fprintf(stderr, "conflux: " RANGE_FMT "; using %" PRIu64 "\n", name, s, min, max, dflt);
    return dflt;
}
