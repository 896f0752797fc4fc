/* Typed segments: a segment of format t holds n events of t, each in its wire form
 * (../format/cx_codec.h: an 8-byte side area, then the struct as it lies in the writer's
 * memory, padded to 8). Pipes carry pointer-free formats only (no strings, no variable
 * arrays): a reader's events must not point into a buffer the pipe frees. */
#include "pipe/cx_pipe_int.h"

#include "common/cx_error.h"
#include "format/cx_codec.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"

#include <stdlib.h>
#include <string.h>

static size_t wire_size(const struct cx_format *f) { return 8 + ((cx_format_size(f) + 7) & ~(size_t)7); }

long pi_seg_encode(const void *events, size_t n, const struct cx_format *t, uint8_t **out,
                   uint64_t *token)
{
    size_t esz = cx_format_size(t), wsz = wire_size(t);
    if (n && wsz > CX_FRAME_MAX_MSG / n)
        return cx_err_set(EMSGSIZE, "%zu events of %zu bytes exceed a segment", n, esz);
    uint8_t *buf = malloc(n ? n * wsz : 1);
    if (!buf)
        return cx_err_set(ENOMEM, "segment of %zu events", n);
    for (size_t i = 0; i < n; i++) {
        struct cx_enc enc;
        int rc = cx_encode(t, (const uint8_t *)events + i * esz, &enc);
        if (rc == 0 && (enc.length != wsz || enc.side[4] | enc.side[5] | enc.side[6] | enc.side[7]))
            rc = cx_err_set(EINVAL, "format '%s' has strings or variable arrays: pipes carry "
                            "pointer-free formats (send raw bytes with t = NULL instead)", cx_format_name(t));
        if (rc == 0 && cx_enc_gather(&enc, buf + i * wsz, wsz) < 0)
            rc = cx_err_set(EIO, "encode");
        if (rc < 0) {
            free(buf);
            return rc;
        }
    }
    *out = buf;
    *token = cx_format_token(t);
    return (long)(n * wsz);
}

long pi_seg_count(uint64_t wire_token, size_t len, const struct cx_format *t)
{
    if (len == 0)
        return 0;
    if (wire_token == 0)
        return cx_err_set(EPROTO, "segment of raw bytes read as format '%s'", cx_format_name(t));
    const struct cx_format *wf = cx_format_registry_lookup(wire_token);
    if (!wf)
        return cx_err_wrap(-ENOENT, "segment");
    size_t wsz = wire_size(wf);
    if (len % wsz)
        return cx_err_set(EPROTO, "segment of %zu bytes is not a whole number of %zu-byte '%s' events",
                          len, wsz, cx_format_name(wf));
    return (long)(len / wsz);
}

long pi_seg_decode(uint64_t wire_token, uint8_t *seg, size_t len, void *out, size_t n,
                   const struct cx_format *t)
{
    if (len == 0)
        return 0;
    if (wire_token == 0)
        return cx_err_set(EPROTO, "segment of raw bytes read as format '%s'", cx_format_name(t));
    const struct cx_format *wf = cx_format_registry_lookup(wire_token);
    if (!wf)
        return cx_err_wrap(-ENOENT, "segment");
    size_t wsz = wire_size(wf), esz = cx_format_size(t);
    if (len % wsz)
        return cx_err_set(EPROTO, "segment of %zu bytes is not a whole number of %zu-byte '%s' events",
                          len, wsz, cx_format_name(wf));
    size_t count = len / wsz;
    if (count > n)
        return cx_err_set(EMSGSIZE, "segment holds %zu events, the buffer %zu", count, n);
    size_t need = 0;
    int rc = cx_decode_need(t, wire_token, seg, wsz, &need);
    if (rc < 0)
        return rc;
    uint64_t *tmp = malloc(need + 8);
    if (!tmp)
        return cx_err_set(ENOMEM, "decode");
    for (size_t i = 0; i < count && rc == 0; i++) {
        void *ev;
        rc = cx_decode(t, wire_token, seg + i * wsz, wsz, tmp, need + 8, &ev);
        if (rc == 0)
            memcpy((uint8_t *)out + i * esz, ev, esz);
    }
    free(tmp);
    return rc < 0 ? rc : (long)count;
}
