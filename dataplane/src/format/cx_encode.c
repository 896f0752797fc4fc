/* Zero-copy encoding (cx_codec.h): the side area is the only thing written. */
#include "format/cx_codec.h"

#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "format/cx_format_int.h"

static const uint8_t zeros[8];

static inline void put_le(uint8_t *p, uint64_t v, int n)
{
    if (!CX__HOST_BE) {
        if (n == 8)
            memcpy(p, &v, 8);
        else {
            uint32_t w = (uint32_t)v;
            memcpy(p, &w, 4);
        }
        return;
    }
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void add_iov(struct cx_enc *e, const void *p, size_t n)
{
    if (!n)
        return;
    e->iov[e->iovcnt].iov_base = (void *)p;
    e->iov[e->iovcnt].iov_len = n;
    e->iovcnt++;
    e->length += n;
}

static inline void add_pad(struct cx_enc *e)
{
    add_iov(e, zeros, (8 - (e->length & 7)) & 7);
}

int cx_encode(const struct cx_format *f, const void *event, struct cx_enc *e)
{
    if (!f->native)
        return cx_err_set(EINVAL, "format '%s' does not describe this machine",
                          cx_format_name(f));
    const uint8_t *ev = event;
    uint32_t side_len = CX__SIDE_HDR + CX__SIDE_SLOT * f->nslots;
    e->token = f->token;
    e->length = 0;
    e->iovcnt = 0;
    put_le(e->side, side_len, 4);
    put_le(e->side + 4, f->nslots, 4);
    add_iov(e, e->side, side_len);
    add_iov(e, ev, f->structs[0].size);
    add_pad(e);
    for (uint32_t i = 0; i < f->nslots; i++) {
        const struct cx__slot *s = &f->slots[i];
        const void *p;
        size_t n;
        memcpy(&p, ev + s->offset, sizeof p);
        if (s->is_var) {
            int64_t cnt = cx__slot_count(f, s, ev);
            if (cnt < 0)
                return cx_err_set(EINVAL, "format '%s': '%s' has a negative length",
                                  cx_format_name(f), s->path);
            if (cnt > 0 && !p)
                return cx_err_set(EINVAL, "format '%s': '%s' is NULL with length %lld",
                                  cx_format_name(f), s->path, (long long)cnt);
            if ((uint64_t)cnt > CX_FRAME_MAX_MSG / s->esize)
                return cx_err_set(EMSGSIZE, "format '%s': '%s' too large", cx_format_name(f),
                                  s->path);
            n = (size_t)cnt * s->esize;
        } else {
            n = p ? strlen(p) + 1 : 0;
        }
        uint8_t *slot = e->side + CX__SIDE_HDR + CX__SIDE_SLOT * i;
        put_le(slot, n ? e->length : 0, 8);
        put_le(slot + 8, n, 8);
        if (n) {
            add_iov(e, p, n);
            add_pad(e);
        }
        if (e->length > CX_FRAME_MAX_MSG)
            return cx_err_set(EMSGSIZE, "format '%s': event larger than %u bytes",
                              cx_format_name(f), CX_FRAME_MAX_MSG);
    }
    return 0;
}

long cx_enc_gather(const struct cx_enc *e, void *buf, size_t cap)
{
    if (cap < e->length)
        return cx_err_set(ENOBUFS, "event of %zu bytes, buffer of %zu", e->length, cap);
    uint8_t *o = buf;
    for (int i = 0; i < e->iovcnt; i++) {
        memcpy(o, e->iov[i].iov_base, e->iov[i].iov_len);
        o += e->iov[i].iov_len;
    }
    return (long)e->length;
}
