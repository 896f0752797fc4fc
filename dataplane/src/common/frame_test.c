/* Tests for the frame header: round trip, the CRC-32C check (known value, hardware and
 * portable code agree, every bit flip, byte change and torn header caught), and every
 * rejection of bad input. */
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

/* xorshift64: a reproducible stream of header contents */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static void random_header(uint64_t *s, uint8_t buf[CX_FRAME_HDR_SIZE])
{
    struct cx_frame_hdr h = {.type = (uint8_t)(1 + rnd(s) % 5), .flags = (uint8_t)rnd(s),
                             .channel = (uint32_t)rnd(s), .seq = rnd(s), .format = rnd(s),
                             .ack = rnd(s), .length = (uint32_t)(rnd(s) % 100000)};
    h.msg_length = h.length;
    h.flags &= (uint8_t)~CX_FRAME_F_FRAG;
    cx_frame_encode(&h, buf);
}

/* The check is CRC-32C of bytes 0..43 (cx_frame.h): pinned by a value computed elsewhere
 * (Python, bit by bit), so the wire format cannot drift. */
CX_TEST(check_is_crc32c_of_the_first_44_bytes)
{
    struct cx_frame_hdr h = sample();
    uint8_t buf[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&h, buf);
    CX_CHECK_EQ_INT(buf[1], 2); /* version 2: the CRC-32C check */
    uint32_t check = (uint32_t)buf[44] | (uint32_t)buf[45] << 8 | (uint32_t)buf[46] << 16 |
                     (uint32_t)buf[47] << 24;
    CX_CHECK(check == 0x32b8d792u);
    CX_CHECK(cx_frame_check(buf, 0) == 0x32b8d792u);
    CX_CHECK(cx_frame_check(buf, 1) == 0x32b8d792u);
}

/* A version-1 peer (FNV-1a check) is told apart from a corrupt frame. */
CX_TEST(old_version_is_refused_by_name)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&h, buf);
    buf[1] = 1;
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "unsupported version 1") != NULL);
}

/* The CPU's instruction (where encode uses it) and the portable table agree everywhere. */
CX_TEST(hardware_and_portable_checks_agree)
{
    uint64_t s = 0x9e3779b97f4a7c15ull;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    int differ = 0;
    for (int n = 0; n < 100000; n++) {
        for (size_t i = 0; i < CX_FRAME_HDR_SIZE; i += 8) {
            uint64_t w = rnd(&s);
            memcpy(buf + i, &w, 8);
        }
        differ += cx_frame_check(buf, 0) != cx_frame_check(buf, 1);
    }
    CX_CHECK_EQ_INT(differ, 0);
}

/* Every single bit flip in bytes 0..43, and every other value of any one byte, is refused,
 * over many different headers (the CRC guarantees it; this proves the code does). */
CX_TEST(every_single_bit_flip_and_byte_change_is_detected)
{
    uint64_t s = 12345;
    uint8_t good[CX_FRAME_HDR_SIZE], buf[CX_FRAME_HDR_SIZE];
    struct cx_frame_hdr g;
    int missed_bits = 0, missed_bytes = 0, flips = 0;
    for (int n = 0; n < 200; n++) {
        random_header(&s, good);
        CX_CHECK_EQ_INT(cx_frame_decode(good, sizeof good, &g), 0);
        for (int bit = 0; bit < 44 * 8; bit++, flips++) {
            memcpy(buf, good, sizeof buf);
            buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            missed_bits += cx_frame_check(buf, 0) == cx_frame_check(good, 0);
            missed_bits += cx_frame_decode(buf, sizeof buf, &g) == 0;
        }
        for (int i = 0; i < 44 && n < 20; i++)
            for (int v = 1; v < 256; v++) {
                memcpy(buf, good, sizeof buf);
                buf[i] ^= (uint8_t)v;
                missed_bytes += cx_frame_decode(buf, sizeof buf, &g) == 0;
            }
    }
    CX_CHECK_EQ_INT(flips, 200 * 352);
    CX_CHECK_EQ_INT(missed_bits, 0);
    CX_CHECK_EQ_INT(missed_bytes, 0);
}

/* A torn header: the start of one frame's header, the rest (with its check) of another's. */
CX_TEST(torn_headers_are_detected)
{
    uint64_t s = 777;
    uint8_t a[CX_FRAME_HDR_SIZE], b[CX_FRAME_HDR_SIZE], buf[CX_FRAME_HDR_SIZE];
    struct cx_frame_hdr g;
    int torn = 0, missed = 0;
    for (int n = 0; n < 2000; n++) {
        random_header(&s, a);
        random_header(&s, b);
        for (int cut = 1; cut < 44; cut++) {
            memcpy(buf, a, (size_t)cut);
            memcpy(buf + cut, b + cut, sizeof buf - (size_t)cut);
            if (memcmp(buf, b, sizeof buf) == 0)
                continue; /* a and b agree on bytes 0..cut: nothing torn */
            torn++;
            missed += cx_frame_decode(buf, sizeof buf, &g) == 0;
        }
    }
    CX_CHECK(torn > 80000);
    CX_CHECK_EQ_INT(missed, 0);
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

/* In-memory links leave the check out (CX_FRAME_F_UNCHECKED): only the local decoder takes
 * such a header, and it still checks everything but the check. */
CX_TEST(unchecked_header_only_on_in_memory_links)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    cx_frame_encode_unchecked(&h, buf);
    CX_CHECK(buf[3] & CX_FRAME_F_UNCHECKED);
    CX_CHECK(buf[44] == 0 && buf[45] == 0 && buf[46] == 0 && buf[47] == 0);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "without its check") != NULL);
    /* a forged check does not make it acceptable off memory */
    uint32_t c = cx_frame_check(buf, 0);
    memcpy(buf + 44, &c, 4);
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), -EPROTO);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EPROTO); /* not 0 */
    cx_frame_encode_unchecked(&h, buf);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), 0);
    CX_CHECK(memcmp(&h, &g, sizeof h) == 0); /* the flag is the link's, not the caller's */
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, CX_FRAME_HDR_SIZE - 1, &g), -EAGAIN);
    /* every other check stays: magic, version, type, lengths, fragments */
    buf[0] ^= 1;
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EPROTO);
    cx_frame_encode_unchecked(&h, buf);
    buf[1] = 1;
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EPROTO);
    struct cx_frame_hdr bad = sample();
    bad.type = 9;
    cx_frame_encode_unchecked(&bad, buf);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EPROTO);
    bad = sample();
    bad.length = bad.msg_length = CX_FRAME_MAX_MSG + 1;
    cx_frame_encode_unchecked(&bad, buf);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EMSGSIZE);
    bad = sample();
    bad.length = 10; /* unfragmented, msg_length 1000 */
    cx_frame_encode_unchecked(&bad, buf);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EPROTO);
    bad = sample();
    bad.flags |= CX_FRAME_F_FRAG;
    bad.msg_length = 4096, bad.frag_offset = 4000, bad.length = 200;
    cx_frame_encode_unchecked(&bad, buf);
    CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), -EMSGSIZE);
}

/* A checked header is checked by the local decoder too, and cx_frame_encode never emits
 * the flag (a caller's stray bit does not turn the check off on a network link). */
CX_TEST(local_decoder_checks_checked_headers_and_encode_drops_the_flag)
{
    struct cx_frame_hdr h = sample(), g;
    uint8_t buf[CX_FRAME_HDR_SIZE];
    for (size_t i = 0; i < 44; i++) {
        cx_frame_encode(&h, buf);
        CX_CHECK_EQ_INT(cx_frame_decode_local(buf, sizeof buf, &g), 0);
        buf[i] ^= 0x04; /* bit 2: never the flag bit (6) of byte 3 */
        CX_CHECK(cx_frame_decode_local(buf, sizeof buf, &g) < 0);
    }
    h.flags |= CX_FRAME_F_UNCHECKED;
    cx_frame_encode(&h, buf);
    CX_CHECK(!(buf[3] & CX_FRAME_F_UNCHECKED));
    CX_CHECK_EQ_INT(cx_frame_decode(buf, sizeof buf, &g), 0);
    CX_CHECK(g.flags == (h.flags & ~CX_FRAME_F_UNCHECKED));
}

CX_TEST_MAIN()
