/* The stream deframer on bytes given in pieces of every size: frames come out whole and in
 * order (small, in place; large, in their own buffer); a header over the limit fails the
 * stream or, with on_oversize, is skipped and reported; a lying length costs no memory
 * beyond the bytes that came; a bad header is sticky. */
#include "common/cx_deframe.h"
#include "common/cx_error.h"
#include "common/cx_test.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct src {
    const uint8_t *p;
    size_t len, off, piece; /* at most piece bytes per read */
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

struct sink {
    int frames, oversize;
    uint64_t last_seq;
    size_t bytes;
    int bad;
};

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct sink *k = arg;
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != (uint8_t)(h->seq * 7 + i))
            k->bad++;
    if (h->seq != k->last_seq + 1)
        k->bad++;
    k->last_seq = h->seq;
    k->frames++;
    k->bytes += len;
}

static void on_over(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct sink *k = arg;
    if (p || len)
        k->bad++;
    k->last_seq = h->seq;
    k->oversize++;
}

/* Appends frame seq with len payload bytes to buf at *off. */
static void put(uint8_t *buf, size_t *off, uint64_t seq, uint32_t len)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = seq, .length = len, .msg_length = len};
    cx_frame_encode(&h, buf + *off);
    for (uint32_t i = 0; i < len; i++)
        buf[*off + CX_FRAME_HDR_SIZE + i] = (uint8_t)(seq * 7 + i);
    *off += CX_FRAME_HDR_SIZE + len;
}

static int drain(struct cx_deframe *d, struct src *s, struct sink *k)
{
    int rc = 0;
    for (int guard = 0; guard < 1000000; guard++) {
        rc = cx_deframe_run(d, rd, s, on_frame, k, 16);
        if (rc < 0 || (rc == 0 && s->off == s->len))
            break;
    }
    return rc;
}

CX_TEST(frames_whole_and_in_order_over_every_piece_size)
{
    static const uint32_t lens[] = {0, 1, 100, 4000, 130000, 200000, 600000, 3, 1u << 20};
    size_t cap = 0;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        cap += CX_FRAME_HDR_SIZE + lens[i];
    uint8_t *buf = malloc(cap);
    size_t len = 0;
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++)
        put(buf, &len, i + 1, lens[i]);
    static const size_t pieces[] = {1, 7, 48, 49, 4096, 65536, 1u << 30};
    for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
        struct cx_deframe d;
        CX_CHECK_EQ_INT(cx_deframe_init(&d), 0);
        struct src s = {buf, len, 0, pieces[p]};
        struct sink k = {0};
        CX_CHECK(drain(&d, &s, &k) >= 0);
        CX_CHECK_EQ_INT(k.frames, (int)(sizeof lens / sizeof *lens));
        CX_CHECK_EQ_INT(k.bad, 0);
        CX_CHECK(!cx_deframe_partial(&d));
        cx_deframe_free(&d);
    }
    free(buf);
}

CX_TEST(over_the_limit_fails_or_is_skipped)
{
    uint8_t buf[3 * CX_FRAME_HDR_SIZE + 2000 + 300000 + 10];
    size_t len = 0;
    put(buf, &len, 1, 2000);   /* under the limit */
    put(buf, &len, 2, 300000); /* over it */
    put(buf, &len, 3, 10);
    struct cx_deframe d;
    CX_CHECK_EQ_INT(cx_deframe_init(&d), 0);
    cx_deframe_set_limits(&d, 4096, NULL);
    struct src s = {buf, len, 0, 1000};
    struct sink k = {0};
    int rc = drain(&d, &s, &k);
    CX_CHECK_EQ_INT(rc, -EMSGSIZE);
    CX_CHECK(strstr(cx_errmsg(), "limit of 4096") != NULL);
    CX_CHECK_EQ_INT(k.frames, 1);
    CX_CHECK_EQ_INT(cx_deframe_run(&d, rd, &s, on_frame, &k, 16), -EMSGSIZE); /* sticky */
    cx_deframe_free(&d);

    CX_CHECK_EQ_INT(cx_deframe_init(&d), 0);
    cx_deframe_set_limits(&d, 4096, on_over);
    s = (struct src){buf, len, 0, 777};
    k = (struct sink){0};
    CX_CHECK(drain(&d, &s, &k) >= 0);
    CX_CHECK_EQ_INT(k.frames, 2);
    CX_CHECK_EQ_INT(k.oversize, 1);
    CX_CHECK_EQ_INT(k.bad, 0);
    CX_CHECK(d.big == NULL); /* skipped through the fixed buffer */
    cx_deframe_free(&d);
}

/* A header promising 1 GiB and 10 bytes of it: nothing like 1 GiB is allocated. */
CX_TEST(lying_length_allocates_by_bytes_received)
{
    uint8_t buf[CX_FRAME_HDR_SIZE + 300000];
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = 1, .length = CX_FRAME_MAX_MSG,
                             .msg_length = CX_FRAME_MAX_MSG};
    cx_frame_encode(&h, buf);
    memset(buf + CX_FRAME_HDR_SIZE, 0, 300000);
    struct cx_deframe d;
    CX_CHECK_EQ_INT(cx_deframe_init(&d), 0);
    struct src s = {buf, sizeof buf, 0, 1u << 20};
    struct sink k = {0};
    CX_CHECK_EQ_INT(drain(&d, &s, &k), 0);
    CX_CHECK_EQ_INT(k.frames, 0);
    CX_CHECK(cx_deframe_partial(&d));
    CX_CHECK(d.big_cap <= 512u << 10); /* 256 KiB, doubled once for the bytes past it */
    cx_deframe_free(&d);
}

CX_TEST(bad_header_is_sticky)
{
    uint8_t buf[2 * CX_FRAME_HDR_SIZE + 20];
    size_t len = 0;
    put(buf, &len, 1, 10);
    put(buf, &len, 2, 10);
    buf[CX_FRAME_HDR_SIZE + 10 + 9] ^= 1; /* the second header's seq: check mismatch */
    struct cx_deframe d;
    CX_CHECK_EQ_INT(cx_deframe_init(&d), 0);
    struct src s = {buf, len, 0, 1000};
    struct sink k = {0};
    CX_CHECK_EQ_INT(cx_deframe_run(&d, rd, &s, on_frame, &k, 16), 1); /* the good one first */
    CX_CHECK_EQ_INT(cx_deframe_run(&d, rd, &s, on_frame, &k, 16), -EPROTO);
    CX_CHECK_EQ_INT(cx_deframe_run(&d, rd, &s, on_frame, &k, 16), -EPROTO);
    CX_CHECK(cx_deframe_ready(&d));
    cx_deframe_free(&d);
}

CX_TEST_MAIN()
