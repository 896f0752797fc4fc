/* Helpers shared by the space tests (header only, not part of the library). */
#ifndef SPACE_TESTUTIL_H
#define SPACE_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

/* Makes a fresh temporary directory in buf[64]; returns buf or NULL. */
static inline char *tmpdir_make(char buf[64])
{
    snprintf(buf, 64, "/tmp/cx_space_test_XXXXXX");
    return mkdtemp(buf);
}

static inline void tmpdir_remove(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* The deterministic payload of segment id: length and bytes derived from the id. */
static inline size_t payload_len(uint64_t id)
{
    if (id % 50 == 0)
        return 0;
    if (id % 7 == 0)
        return 150000 + (size_t)(id % 1000); /* large: a SIGKILL can tear these */
    return (size_t)((id * 37) % 500 + 1);
}

static inline void payload_fill(uint64_t id, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(id * 131 + i * 7 + (i >> 8));
}

#endif
