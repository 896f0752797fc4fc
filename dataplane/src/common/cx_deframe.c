/* The stream deframer; see cx_deframe.h. */
#include "common/cx_deframe.h"

#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>

#define RBUF_SIZE (256u << 10)

int cx_deframe_init(struct cx_deframe *d)
{
    memset(d, 0, sizeof *d);
    d->max_msg = CX_FRAME_MAX_MSG;
    if (!(d->rbuf = malloc(RBUF_SIZE)))
        return cx_err_set(ENOMEM, "out of memory for a receive buffer");
    return 0;
}

void cx_deframe_free(struct cx_deframe *d)
{
    free(d->rbuf);
    free(d->big);
    memset(d, 0, sizeof *d);
}

int cx_deframe_preload(struct cx_deframe *d, const void *p, size_t n)
{
    if (n > RBUF_SIZE - d->rlen)
        return cx_err_set(ENOBUFS, "%zu bytes do not fit the receive buffer", n);
    if (n) /* p may be NULL when there is nothing */
        memcpy(d->rbuf + d->rlen, p, n);
    d->rlen += n;
    return 0;
}

void cx_deframe_set_limits(struct cx_deframe *d, uint32_t max_msg, cx_deframe_fn on_oversize)
{
    d->max_msg = max_msg && max_msg < CX_FRAME_MAX_MSG ? max_msg : CX_FRAME_MAX_MSG;
    d->on_oversize = on_oversize;
}

int cx_deframe_ready(const struct cx_deframe *d)
{
    return d->err || (!d->big && !d->skipping && d->rlen - d->roff >= CX_FRAME_HDR_SIZE);
}

int cx_deframe_partial(const struct cx_deframe *d)
{
    return d->big || d->skipping || d->rlen > d->roff;
}

static int broken(struct cx_deframe *d, int rc)
{
    d->err = rc;
    return rc;
}

/* Receives the rest of big_hdr's payload: into d->big (grown with the bytes received), or,
 * when skipping, into rbuf and dropped. 1 when the frame was delivered, 2 when bytes came
 * and more are due, 0 when the socket has no more now, or a negative errno. */
static int body(struct cx_deframe *d, cx_deframe_read_fn rd, void *io, cx_deframe_fn fn, void *arg)
{
    size_t want = d->big_hdr.length - d->big_got;
    uint8_t *dst;
    size_t n;
    if (d->skipping) {
        dst = d->rbuf;
        n = want < RBUF_SIZE ? want : RBUF_SIZE;
    } else {
        if (d->big_got == d->big_cap) { /* full: double, up to the declared length */
            size_t cap = d->big_cap * 2 < d->big_hdr.length ? d->big_cap * 2 : d->big_hdr.length;
            uint8_t *b = realloc(d->big, cap);
            if (!b)
                return broken(d, cx_err_set(ENOMEM, "no memory for a %u-byte message",
                                            d->big_hdr.length));
            d->big = b;
            d->big_cap = cap;
        }
        dst = d->big + d->big_got;
        n = d->big_cap - d->big_got;
    }
    ssize_t r = rd(io, dst, n); /* n > 0: a body is open only while bytes are missing */
    if (r <= 0)
        return (int)r;
    d->big_got += (size_t)r;
    if (d->big_got < d->big_hdr.length)
        return 2; /* more to read */
    struct cx_frame_hdr h = d->big_hdr;
    if (d->skipping) {
        d->skipping = 0;
        d->on_oversize(arg, &h, NULL, 0);
    } else {
        uint8_t *b = d->big;
        d->big = NULL;
        d->big_cap = 0;
        fn(arg, &h, b, h.length);
        free(b);
    }
    return 1;
}

int cx_deframe_run(struct cx_deframe *d, cx_deframe_read_fn rd, void *io, cx_deframe_fn fn,
                   void *arg, int budget)
{
    int work = 0;
    if (d->err)
        return d->err;
    while (work < budget) {
        if (d->big || d->skipping) {
            int r = body(d, rd, io, fn, arg);
            if (r < 0)
                return work ? work : r;
            if (r == 0)
                return work;
            if (r == 1)
                work++;
            continue;
        }
        size_t avail = d->rlen - d->roff;
        if (avail >= CX_FRAME_HDR_SIZE) {
            struct cx_frame_hdr h;
            int rc = cx_frame_decode(d->rbuf + d->roff, avail, &h);
            if (rc < 0) {
                broken(d, rc);
                return work ? work : rc;
            }
            size_t have = avail - CX_FRAME_HDR_SIZE;
            if (h.length > d->max_msg) { /* checked before any byte of it is kept */
                if (!d->on_oversize) {
                    broken(d, cx_err_set(EMSGSIZE, "a frame of %u bytes exceeds this link's "
                                         "limit of %u", h.length, d->max_msg));
                    return work ? work : d->err;
                }
                d->roff += CX_FRAME_HDR_SIZE + (have < h.length ? have : h.length);
                if (have >= h.length) {
                    d->on_oversize(arg, &h, NULL, 0);
                    work++;
                    continue;
                }
                d->roff = d->rlen = 0;
                d->big_hdr = h;
                d->big_got = have;
                d->skipping = 1;
                continue;
            }
            if (have >= h.length) {
                d->roff += CX_FRAME_HDR_SIZE + h.length;
                fn(arg, &h, d->rbuf + d->roff - h.length, h.length);
                work++;
                continue;
            }
            if (h.length > RBUF_SIZE / 2) { /* its own buffer, sized by what came so far */
                size_t cap = h.length < RBUF_SIZE ? h.length : RBUF_SIZE;
                d->big = malloc(cap);
                if (!d->big) {
                    broken(d, cx_err_set(ENOMEM, "no memory for a %u-byte message", h.length));
                    return work ? work : d->err;
                }
                memcpy(d->big, d->rbuf + d->roff + CX_FRAME_HDR_SIZE, have);
                d->big_cap = cap;
                d->big_got = have;
                d->big_hdr = h;
                d->roff = d->rlen = 0;
                continue;
            }
        }
        if (d->roff) { /* compact, then read more */
            memmove(d->rbuf, d->rbuf + d->roff, avail);
            d->roff = 0;
            d->rlen = avail;
        }
        ssize_t r = rd(io, d->rbuf + d->rlen, RBUF_SIZE - d->rlen);
        if (r < 0)
            return work ? work : (int)r;
        if (r == 0)
            break;
        d->rlen += (size_t)r;
    }
    return work;
}
