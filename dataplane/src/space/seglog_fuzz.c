/* libFuzzer target: the pipe-log recovery scanner (cx_seglog_scan) on arbitrary file bytes.
 * It must never crash or read out of bounds, and what it accepts must be self-consistent:
 * valid_end <= size, a CLEAN verdict covers the whole input, and scanning the valid prefix
 * again yields CLEAN with the same records and last id. The first 8 input bytes pick the
 * expected first segment id (small), the rest is the file. */
#include "space/cx_seglog.h"

#include <stdlib.h>
#include <string.h>

struct mem { const uint8_t *p; uint64_t n; };

static long mem_read(void *ctx, uint64_t off, void *buf, size_t len)
{
    struct mem *m = ctx;
    if (off >= m->n)
        return 0;
    if (len > m->n - off)
        len = (size_t)(m->n - off);
    memcpy(buf, m->p + off, len);
    return (long)len;
}

static int count_rec(void *ctx, const struct cx_seglog_rec *r)
{
    (void)r;
    (*(uint64_t *)ctx)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t expect = 1;
    if (size >= 1) {
        expect = 1 + (data[0] % 4);
        data++;
        size--;
    }
    struct mem m = {data, size};
    struct cx_seglog_scan a, b;
    uint64_t seen = 0;
    if (cx_seglog_scan(mem_read, &m, size, expect, count_rec, &seen, &a) != 0)
        abort(); /* memory reads never fail */
    if (a.valid_end > size || (a.verdict == CX_SEGLOG_CLEAN && a.valid_end != size))
        abort();
    if (seen != a.records + (uint64_t)a.ended)
        abort();
    m.n = a.valid_end;
    if (cx_seglog_scan(mem_read, &m, a.valid_end, expect, NULL, NULL, &b) != 0 ||
        b.verdict != CX_SEGLOG_CLEAN || b.records != a.records || b.last_id != a.last_id ||
        b.ended != a.ended)
        abort();
    return 0;
}
