/* Fragmentation filter; see cx_frag.h. */
#include "stack/cx_frag.h"

#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <stdlib.h>
#include <string.h>

#define MAX_IOV 64

struct frag {
    struct cx_link base;
    struct cx_link *lower;
    size_t frag;
    uint8_t *asm_buf;
    size_t asm_got;
    struct cx_frame_hdr asm_hdr;
    cx_recv_fn fn;
    void *arg;
    int bad;
};

int cx_frag_create(struct cx_link *lower, size_t frag_size, struct cx_link **out)
{
    struct cx_driver_caps c;
    cx_link_caps(lower, &c);
    struct frag *f = calloc(1, sizeof *f);
    if (!f)
        return cx_err_set(ENOMEM, "frag: out of memory");
    f->base.ops = &cx_frag_ops;
    f->lower = lower;
    f->frag = frag_size ? frag_size : c.max_msg ? c.max_msg : CX_FRAME_MAX_MSG;
    *out = &f->base;
    return 0;
}

/* Builds in out[] the slice [off, off+n) of iov; returns its entry count. */
static int slice(const struct iovec *iov, int iovcnt, size_t off, size_t n, struct iovec *out)
{
    int k = 0;
    for (int i = 0; i < iovcnt && n; i++) {
        size_t l = iov[i].iov_len;
        if (off >= l) {
            off -= l;
            continue;
        }
        size_t c = l - off < n ? l - off : n;
        out[k++] = (struct iovec){(uint8_t *)iov[i].iov_base + off, c};
        n -= c;
        off = 0;
    }
    return k;
}

static int frag_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                     int iovcnt)
{
    struct frag *f = (struct frag *)k;
    size_t len = cx_iov_len(iov, iovcnt);
    if (len <= f->frag)
        return cx_link_send(f->lower, h, iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG || iovcnt > MAX_IOV)
        return cx_err_set(EMSGSIZE, "frag: message of %zu bytes in %d pieces is too large", len,
                          iovcnt);
    struct iovec part[MAX_IOV];
    for (size_t off = 0; off < len; off += f->frag) {
        size_t n = len - off < f->frag ? len - off : f->frag;
        struct cx_frame_hdr fh = *h;
        fh.flags |= CX_FRAME_F_FRAG | (off + n == len ? CX_FRAME_F_LAST : 0);
        fh.frag_offset = (uint32_t)off;
        fh.msg_length = (uint32_t)len;
        fh.length = (uint32_t)n;
        int rc = cx_link_send(f->lower, &fh, part, slice(iov, iovcnt, off, n, part));
        if (rc < 0)
            return cx_err_wrap(rc, "frag: fragment at %zu of %zu", off, len);
    }
    return 0;
}

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct frag *f = arg;
    if (!(h->flags & CX_FRAME_F_FRAG)) {
        f->fn(f->arg, h, p, n);
        return;
    }
    if (h->frag_offset == 0) {
        free(f->asm_buf);
        f->asm_buf = malloc(h->msg_length ? h->msg_length : 1);
        f->asm_got = 0;
        f->asm_hdr = *h;
        if (!f->asm_buf) {
            f->bad = ENOMEM;
            return;
        }
    }
    if (!f->asm_buf || h->frag_offset != f->asm_got || h->msg_length != f->asm_hdr.msg_length ||
        f->asm_got + n > h->msg_length) {
        f->bad = EPROTO;
        return;
    }
    memcpy(f->asm_buf + f->asm_got, p, n);
    f->asm_got += n;
    if (f->asm_got == f->asm_hdr.msg_length) {
        struct cx_frame_hdr whole = f->asm_hdr;
        whole.flags &= (uint8_t)~(CX_FRAME_F_FRAG | CX_FRAME_F_LAST);
        whole.length = whole.msg_length;
        whole.frag_offset = 0;
        whole.ack = h->ack; /* the freshest piggy-backed ack */
        whole.flags |= h->flags & CX_FRAME_F_ACK;
        uint8_t *b = f->asm_buf;
        f->asm_buf = NULL;
        f->fn(f->arg, &whole, b, whole.length);
        free(b);
    }
}

static int frag_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct frag *f = (struct frag *)k;
    f->fn = fn;
    f->arg = arg;
    int rc = cx_link_progress(f->lower, on_frame, f, budget);
    if (f->bad)
        return cx_err_set(f->bad, "frag: fragments out of order or inconsistent");
    return rc;
}

struct cx_link *cx_frag_lower(struct cx_link *k) { return ((struct frag *)k)->lower; }

static size_t frag_pending(struct cx_link *k) { return cx_link_pending(((struct frag *)k)->lower); }
static int frag_fd(struct cx_link *k) { return cx_link_fd(((struct frag *)k)->lower); }
static int frag_arm(struct cx_link *k) { return cx_link_arm(((struct frag *)k)->lower); }
static void frag_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    cx_link_caps(((struct frag *)k)->lower, c);
    c->max_msg = CX_FRAME_MAX_MSG;
}
struct cx_link *cx_frag_release(struct cx_link *k)
{
    struct frag *f = (struct frag *)k;
    struct cx_link *lower = f->lower;
    free(f->asm_buf);
    free(f);
    return lower;
}
static void frag_close(struct cx_link *k) { cx_link_close(cx_frag_release(k)); }

const struct cx_driver_ops cx_frag_ops = {
    .name = "frag", .send = frag_send, .pending = frag_pending, .progress = frag_progress,
    .fd = frag_fd, .arm = frag_arm, .caps = frag_caps, .close = frag_close,
};
