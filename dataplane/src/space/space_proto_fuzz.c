/* libFuzzer target: the space protocol's request and reply decoders on arbitrary bytes
 * (what a hostile client or server could send). Decoded strings must stay inside the input. */
#include "space/cx_space_proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint8_t g_sink;

static void touch(struct cx_sp_str s, const uint8_t *in, size_t len)
{
    if (s.len && ((const uint8_t *)s.p < in || (const uint8_t *)s.p + s.len > in + len))
        abort();
    for (uint16_t i = 0; i < s.len; i++)
        g_sink ^= (uint8_t)s.p[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = malloc(size ? size : 1); /* exact-size copy: ASan sees any overread */
    memcpy(in, data, size);
    struct cx_sp_request q;
    if (cx_sp_decode_request(in, size, &q) == 0) {
        touch(q.name, in, size);
        touch(q.addr, in, size);
        touch(q.cursor, in, size);
        if (q.blob_len && (q.blob < in || q.blob + q.blob_len > in + size))
            abort();
        /* what decodes must encode back to the same bytes */
        struct cx_sp_buf b = {0};
        if (cx_sp_encode_request(&b, &q) == 0 && (b.len != size || memcmp(b.p, in, size) != 0))
            abort();
        cx_sp_buf_free(&b);
    }
    struct cx_sp_reply r;
    if (cx_sp_decode_reply(in, size, &r) == 0) {
        touch(r.error, in, size);
        for (int i = 0; i < r.pipe.naddrs; i++)
            touch(r.pipe.addrs[i], in, size);
        for (int i = 0; i < r.stats.nlinks; i++)
            touch(r.stats.links[i].transport, in, size);
        size_t off = 0;
        struct cx_sp_str name;
        uint64_t id, fmt;
        while (cx_sp_list_next(&r, &off, &name, &id, &fmt) == 1)
            touch(name, in, size);
        off = 0;
        while (cx_sp_cursor_next(&r, &off, &name, &id) == 1) /* CURSOR_LIST's entries */
            touch(name, in, size);
        if (r.blob_len && (r.blob < in || r.blob + r.blob_len > in + size)) /* GROUP_NEXT's segment */
            abort();
        off = 0;
        uint64_t member[4];
        uint32_t inflight[4];
        uint16_t nm;
        while (cx_sp_group_next(&r, &off, &name, &id, &fmt, &nm, member, inflight, 4) == 1)
            touch(name, in, size); /* GROUP_LIST's entries */
    }
    free(in);
    return 0;
}
