/* Tests for the frame header: round trip, and every rejection of bad input. */
#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "common/cx_test.h"

static struct cx_frame_hdr sample(void)
{
    return (struct cx_frame_hdr){.type = CX_FRAME_DATA, .flags = CX_FRAME_F_ACK, .channel = 7,
                                 .seq = 0x0102030405060708ull, .format = 0xfeedfacecafebeefull,
                                 .ack = 99, .length = 1000, .msg_length = 1000};
}

CX_TEST(roundtrip)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&h, buf);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), 0);
    CX_CHECK(memcmp(&h, &g, sizeof h) == 0);
    CX_CHECK_EQ_INT(buf[8], 0x08); /* little-endian on the wire */
}

CX_TEST(short_input_asks_for_more)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&h, buf);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, CX_FRAME_HDR_SIZE - 1, &g), -EAGAIN);
}

CX_TEST(rejects_corruption)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    for (size_t i = 0; i < CX_FRAME_HDR_SIZE; i++) {
        cx_frame_encode(&h, buf);
        buf[i] ^= 0x10;
        CX_CHECK(cx_frame_decode(buf, sizeof buf, &g) < 0);
        CX_CHECK(cx_errmsg()[0] != '\0');
    }
}

CX_TEST(rejects_oversize_and_bad_fragments)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    h.length = h.msg_length = CX_FRAME_MAX_MSG + 1;
    cx_frame_encode(&h, buf);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), -EMSGSIZE);
    h = sample();
    h.flags |= CX_FRAME_F_FRAG;
    h.msg_length = 4096;
    h.frag_offset = 4000;
    h.length = 200;
    cx_frame_encode(&h, buf);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), -EMSGSIZE);
    CX_CHECK(strstr(cx_errmsg(), "outside") != NULL);
}

CX_TEST(error_wrap_adds_context)
{
    cx_err_set(EINVAL, "inner %d", 1);
    CX_CHECK_EQ_INT(cx_err_wrap(-EINVAL, "outer"), -EINVAL);
    CX_CHECK_STR(cx_errmsg(), "outer: inner 1");
    CX_CHECK_EQ_INT(cx_errcode(), EINVAL);
}

CX_TEST_MAIN()
