/* Frame header encoding; see cx_frame.h for the layout.
 *
 * The header check is CRC-32C (Castagnoli) of bytes 0..43. A CRC, not a hash, because it
 * guarantees what the header needs: every error burst of up to 32 bits is caught (any
 * single corrupt byte, any single bit), and a torn or foreign header passes with
 * probability 2^-32. It was FNV-1a, one multiply per byte (44 dependent multiplies); an
 * x86-64 CPU with SSE4.2 computes CRC-32C in six instructions (kept here: the header's
 * words go in registers). Elsewhere the tables of cx_crc32c.c do it, with the very same
 * result, so every machine speaks the same wire format. */
#include "cx_frame.h"

#include "cx_crc32c.h"
#include "cx_error.h"
#include "cx_le.h"

#include <string.h>

/* -DCX_FRAME_PORTABLE_CHECK builds the table code only (to test it end to end on x86) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(CX_FRAME_PORTABLE_CHECK)
#include <nmmintrin.h>
#define CX_CRC_X86 1
#endif


/* ---- the check: CRC-32C (cx_crc32c.c) of the first 44 bytes ---- */

#define CHECKED_BYTES 44

static int crc_hw;    /* the CPU has a CRC-32C instruction */
static int crc_ready; /* crc_hw is set (acquire/release) */

/* Asked once before main, so the per-header path is one load; a frame coded from another
 * constructor asks then. */
static void crc_setup(void)
{
    __atomic_store_n(&crc_hw, cx_crc32c_hw(), __ATOMIC_RELAXED);
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}
__attribute__((constructor)) static void crc_setup_early(void) { crc_setup(); }

static uint32_t check_portable(const uint8_t *b) { return cx_crc32c_portable(0, b, CHECKED_BYTES); }

/* The checked bytes are taken as five little-endian u64 words (bytes 0..39) and a u32
 * (bytes 40..43), passed in registers: encode builds them from the fields and decode loads
 * them once, so the check does not re-read bytes just stored (a store-forwarding stall). */
#define WORDS_DECL uint64_t w0, uint64_t w1, uint64_t w2, uint64_t w3, uint64_t w4, uint32_t t
#define WORDS w0, w1, w2, w3, w4, t

#if defined(CX_CRC_X86)
/* the instruction takes a word from its least significant byte up: the byte order of the
 * little-endian wire, as the reflected CRC wants (so w0..t are values, not memory) */
__attribute__((target("sse4.2"))) static uint32_t check_hw(WORDS_DECL)
{
    uint64_t c = _mm_crc32_u64(~0u, w0);
    c = _mm_crc32_u64(c, w1);
    c = _mm_crc32_u64(c, w2);
    c = _mm_crc32_u64(c, w3);
    c = _mm_crc32_u64(c, w4);
    return ~_mm_crc32_u32((uint32_t)c, t);
}
#endif

static inline int use_hw(void)
{
    if (__builtin_expect(!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE), 0))
        crc_setup();
    return crc_hw;
}

/* hdr_check of b[0..44), whose little-endian words are w0..w4, t */
static inline uint32_t hdr_check(const uint8_t *b, WORDS_DECL)
{
#if defined(CX_CRC_X86)
    if (use_hw())
        return check_hw(WORDS);
#else
    (void)w0, (void)w1, (void)w2, (void)w3, (void)w4, (void)t;
    use_hw();
#endif
    return check_portable(b);
}

#define LOAD_WORDS(b)                                                                      \
    uint64_t w0 = cx_get_le64((b)), w1 = cx_get_le64((b) + 8), w2 = cx_get_le64((b) + 16), w3 = cx_get_le64((b) + 24), \
             w4 = cx_get_le64((b) + 32);                                                         \
    uint32_t t = cx_get_le32((b) + 40)

uint32_t cx_frame_check(const uint8_t hdr[CX_FRAME_HDR_SIZE], int portable)
{
    LOAD_WORDS(hdr);
    if (!portable)
        return hdr_check(hdr, WORDS);
    return check_portable(hdr);
}

static inline void encode(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE],
                          int unchecked)
{
    uint8_t flags = (uint8_t)((h->flags & ~CX_FRAME_F_UNCHECKED) |
                              (unchecked ? CX_FRAME_F_UNCHECKED : 0));
    uint64_t w0 = (uint64_t)CX_FRAME_MAGIC | (uint64_t)CX_FRAME_VERSION << 8 |
                  (uint64_t)h->type << 16 | (uint64_t)flags << 24 | (uint64_t)h->channel << 32;
    uint64_t w1 = h->seq, w2 = h->format, w3 = h->ack;
    uint64_t w4 = (uint64_t)h->length | (uint64_t)h->frag_offset << 32;
    uint32_t t = h->msg_length;
    cx_put_le64(out, w0);
    cx_put_le64(out + 8, w1);
    cx_put_le64(out + 16, w2);
    cx_put_le64(out + 24, w3);
    cx_put_le64(out + 32, w4);
    cx_put_le32(out + 40, t);
    cx_put_le32(out + 44, unchecked ? 0 : hdr_check(out, WORDS));
}

void cx_frame_encode(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE])
{
    encode(h, out, 0);
}

void cx_frame_encode_unchecked(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE])
{
    encode(h, out, 1);
}

/* The checks of a header's fields, whatever carried them: a known type, lengths within
 * the limit and consistent with the fragment fields. */
static inline int fields_check(const struct cx_frame_hdr *h)
{
    uint8_t type = h->type, flags = h->flags;
    uint32_t length = h->length, frag_offset = h->frag_offset, msg_length = h->msg_length;
    if (__builtin_expect(type < CX_FRAME_DATA || type > CX_FRAME_LOOKUP, 0))
        return cx_err_set(EPROTO, "frame: unknown type %u", type);
    if (__builtin_expect(msg_length > CX_FRAME_MAX_MSG || length > msg_length, 0))
        return cx_err_set(EMSGSIZE, "frame: length %u of message %u exceeds the %u-byte limit",
                          length, msg_length, CX_FRAME_MAX_MSG);
    if (!(flags & CX_FRAME_F_FRAG)) {
        if (__builtin_expect(length != msg_length, 0))
            return cx_err_set(EPROTO,
                              "frame: unfragmented frame with length %u != message length %u",
                              length, msg_length);
    } else if ((uint64_t)frag_offset + length > msg_length) {
        return cx_err_set(EMSGSIZE, "frame: fragment [%u, +%u) lies outside its %u-byte message",
                          frag_offset, length, msg_length);
    }
    return 0;
}

int cx_frame_fields_check(const struct cx_frame_hdr *h) { return fields_check(h); }

static inline int decode(const uint8_t *in, size_t avail, struct cx_frame_hdr *h, int local)
{
    if (avail < CX_FRAME_HDR_SIZE)
        return -EAGAIN;
    LOAD_WORDS(in);
    /* magic and version in one compare of the first word's low 16 bits (the errors below
     * tell them apart only when it fails) */
    if (__builtin_expect((uint16_t)w0 != (CX_FRAME_MAGIC | CX_FRAME_VERSION << 8), 0)) {
        if (in[0] != CX_FRAME_MAGIC)
            return cx_err_set(EPROTO, "frame: bad magic 0x%02x (not a Conflux frame)", in[0]);
        return cx_err_set(EPROTO, "frame: unsupported version %u (this build speaks %u)",
                          in[1], CX_FRAME_VERSION);
    }
    uint8_t type = (uint8_t)(w0 >> 16), flags = (uint8_t)(w0 >> 24);
    if (__builtin_expect(flags & CX_FRAME_F_UNCHECKED, 0) && local) {
        if (cx_get_le32(in + 44) != 0) /* what the encoder writes: one spelling per header */
            return cx_err_set(EPROTO, "frame: unchecked header with a check field of %#x",
                              cx_get_le32(in + 44));
        flags &= (uint8_t)~CX_FRAME_F_UNCHECKED; /* in memory: no check (cx_frame.h) */
    } else if (flags & CX_FRAME_F_UNCHECKED) {
        return cx_err_set(EPROTO, "frame: header without its check (allowed on in-memory "
                                  "links only)");
    } else if (__builtin_expect(cx_get_le32(in + 44) != hdr_check(in, WORDS), 0)) {
        return cx_err_set(EPROTO, "frame: header checksum mismatch (corrupt or torn frame)");
    }
    uint32_t length = (uint32_t)w4, frag_offset = (uint32_t)(w4 >> 32), msg_length = t;
    memset(h, 0, sizeof *h); /* padding too: callers may compare headers whole */
    h->type = type;
    h->flags = flags;
    h->channel = (uint32_t)(w0 >> 32);
    h->seq = w1;
    h->format = w2;
    h->ack = w3;
    h->length = length;
    h->frag_offset = frag_offset;
    h->msg_length = msg_length;
    return fields_check(h);
}

int cx_frame_decode(const uint8_t *in, size_t avail, struct cx_frame_hdr *h)
{
    return decode(in, avail, h, 0);
}

int cx_frame_decode_local(const uint8_t *in, size_t avail, struct cx_frame_hdr *h)
{
    return decode(in, avail, h, 1);
}
