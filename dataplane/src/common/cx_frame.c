/* Frame header encoding; see cx_frame.h for the layout. */
#include "cx_frame.h"

#include "cx_error.h"

#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* FNV-1a over the first 44 bytes: cheap, and enough to reject garbage and torn headers. */
static uint32_t hdr_check(const uint8_t *b)
{
    uint32_t h = 2166136261u;
    for (int i = 0; i < 44; i++) h = (h ^ b[i]) * 16777619u;
    return h;
}

void cx_frame_encode(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE])
{
    out[0] = CX_FRAME_MAGIC;
    out[1] = CX_FRAME_VERSION;
    out[2] = h->type;
    out[3] = h->flags;
    put32(out + 4, h->channel);
    put64(out + 8, h->seq);
    put64(out + 16, h->format);
    put64(out + 24, h->ack);
    put32(out + 32, h->length);
    put32(out + 36, h->frag_offset);
    put32(out + 40, h->msg_length);
    put32(out + 44, hdr_check(out));
}

int cx_frame_decode(const uint8_t *in, size_t avail, struct cx_frame_hdr *h)
{
    if (avail < CX_FRAME_HDR_SIZE)
        return -EAGAIN;
    if (in[0] != CX_FRAME_MAGIC)
        return cx_err_set(EPROTO, "frame: bad magic 0x%02x (not a Conflux frame)", in[0]);
    if (in[1] != CX_FRAME_VERSION)
        return cx_err_set(EPROTO, "frame: unsupported version %u (this build speaks %u)", in[1],
                          CX_FRAME_VERSION);
    if (get32(in + 44) != hdr_check(in))
        return cx_err_set(EPROTO, "frame: header checksum mismatch (corrupt or torn frame)");
    memset(h, 0, sizeof *h);
    h->type = in[2];
    h->flags = in[3];
    h->channel = get32(in + 4);
    h->seq = get64(in + 8);
    h->format = get64(in + 16);
    h->ack = get64(in + 24);
    h->length = get32(in + 32);
    h->frag_offset = get32(in + 36);
    h->msg_length = get32(in + 40);
    if (h->type < CX_FRAME_DATA || h->type > CX_FRAME_LOOKUP)
        return cx_err_set(EPROTO, "frame: unknown type %u", h->type);
    if (h->msg_length > CX_FRAME_MAX_MSG || h->length > h->msg_length)
        return cx_err_set(EMSGSIZE, "frame: length %u of message %u exceeds the %u-byte limit",
                          h->length, h->msg_length, CX_FRAME_MAX_MSG);
    if ((h->flags & CX_FRAME_F_FRAG) && (uint64_t)h->frag_offset + h->length > h->msg_length)
        return cx_err_set(EMSGSIZE, "frame: fragment [%u, +%u) lies outside its %u-byte message",
                          h->frag_offset, h->length, h->msg_length);
    if (!(h->flags & CX_FRAME_F_FRAG) && h->length != h->msg_length)
        return cx_err_set(EPROTO, "frame: unfragmented frame with length %u != message length %u",
                          h->length, h->msg_length);
    return 0;
}
