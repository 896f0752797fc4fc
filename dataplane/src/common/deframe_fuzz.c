/* libFuzzer target: the stream deframer (cx_deframe.h) on a stream the input describes:
 * valid headers with honest or lying lengths, garbage between them, read in pieces of a size
 * the input picks, under a limit it picks, failing or skipping what is over it. Every frame
 * delivered must carry exactly its header's length (ASan checks each byte is readable), and
 * memory must follow the bytes received, never the bytes declared. */
#include "common/cx_deframe.h"

#include <stdlib.h>
#include <string.h>

struct src {
    const uint8_t *p;
    size_t len, off, piece;
};

static ssize_t rd(void *io, void *dst, size_t n)
{
    struct src *s = io;
    size_t k = s->len - s->off;
    if (k > n)
        k = n;
    if (k > s->piece)
        k = s->piece;
    memcpy(dst, s->p + s->off, k);
    s->off += k;
    return (ssize_t)k;
}

static volatile uint8_t sink;

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    (void)arg;
    if (len != h->length || (len && !p))
        abort();
    const uint8_t *b = p;
    uint8_t x = 0;
    for (size_t i = 0; i < len; i++)
        x ^= b[i];
    sink = x;
}

static void on_over(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    uint32_t limit = *(const uint32_t *)arg;
    if (p || len || h->length <= limit)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    size_t piece = 1 + (size_t)data[0] * 97;
    uint32_t limit = data[1] & 0x7f ? (uint32_t)(data[1] & 0x7f) << 12 : 0; /* 0: the maximum */
    int skip = data[1] >> 7;
    data += 2, size -= 2;
    /* the stream: 0x80|x -> a header declaring a length from the next 3 bytes, its payload
     * as far as the input goes; else x garbage bytes copied from the input */
    size_t cap = size * 2 + 4096, len = 0;
    uint8_t *stream = malloc(cap);
    for (size_t i = 0; i < size && len + CX_FRAME_HDR_SIZE < cap;) {
        uint8_t c = data[i++];
        if (c & 0x80) {
            uint32_t l = 0;
            for (int k = 0; k < 3 && i < size; k++)
                l = l << 8 | data[i++];
            l <<= (c & 0x7) * 2; /* up to 2^38: past the protocol's maximum too */
            struct cx_frame_hdr h = {.type = (uint8_t)(1 + (c >> 3) % 5), .seq = i,
                                     .length = l, .msg_length = l};
            cx_frame_encode(&h, stream + len);
            len += CX_FRAME_HDR_SIZE;
            size_t n = l < cap - len ? l : cap - len;
            if (n > size - i)
                n = size - i;
            memcpy(stream + len, data + i, n);
            len += n, i += n;
        } else {
            size_t n = c < size - i ? c : size - i;
            if (n > cap - len)
                n = cap - len;
            memcpy(stream + len, data + i, n);
            len += n, i += n;
        }
    }
    struct cx_deframe d;
    if (cx_deframe_init(&d) < 0)
        abort();
    cx_deframe_set_limits(&d, limit, skip ? on_over : NULL);
    uint32_t eff = d.max_msg;
    struct src s = {stream, len, 0, piece};
    for (int guard = 0; guard < 100000; guard++) {
        int rc = cx_deframe_run(&d, rd, &s, on_frame, skip ? (void *)&eff : NULL, 8);
        if (d.big_cap > (len > (256u << 10) ? len : (256u << 10)) * 2)
            abort(); /* a buffer larger than what came */
        if (rc < 0 || (rc == 0 && s.off == s.len))
            break;
    }
    cx_deframe_free(&d);
    free(stream);
    return 0;
}
