/* The one frame header of Conflux (ARCHITECTURE.md, "Data path principles" 2).
 *
 * Every layer shares this header: transports frame with it, the multiplexer reads the
 * channel id, the reliability filter uses seq and ack, fragmentation uses frag_offset and
 * msg_length, the format layer reads the format token. No layer adds a header of its own.
 *
 * Wire layout, 48 bytes, every field little-endian (the header is Conflux's own; only the
 * payload travels in the sender's native layout):
 *
 *   0  u8  magic        CX_FRAME_MAGIC
 *   1  u8  version      CX_FRAME_VERSION
 *   2  u8  type         enum cx_frame_type
 *   3  u8  flags        enum cx_frame_flag bits
 *   4  u32 channel      multiplexing tag: channel or pipe id (0 = link control)
 *   8  u64 seq          message sequence number, or pipe segment id
 *  16  u64 format       format token of the payload (0 = raw bytes)
 *  24  u64 ack          cumulative ack piggy-backed when CX_FRAME_F_ACK is set
 *  32  u32 length       payload bytes that follow this header in this frame
 *  36  u32 frag_offset  offset of this fragment in the message (CX_FRAME_F_FRAG)
 *  40  u32 msg_length   whole message length (CX_FRAME_F_FRAG), else equal to length
 *  44  u32 hdr_check    CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial
 *                       value and final xor 0xFFFFFFFF, the standard one) of bytes 0..43;
 *                       catches every corruption within 32 consecutive bits (any single
 *                       byte), and torn or foreign headers but for 1 in 2^32
 *
 * In-memory links (shm) may leave hdr_check out: a record with CX_FRAME_F_UNCHECKED set
 * carries 0 there and is not checked. The check guards against bytes corrupted on a wire
 * or by a stranger; a shm record is written by the peer process straight into this host's
 * memory, where a check would only catch what the magic, version, type and length checks
 * (kept on every link) catch anyway. cx_frame_decode, which every network driver uses,
 * refuses such a record (-EPROTO), so a peer cannot skip the check over tcp, tls, udp, ucx
 * or dpdk; only cx_frame_decode_local accepts it.
 *
 * Version 2 changed hdr_check from FNV-1a to CRC-32C (faster: a CPU instruction where
 * there is one, the same value from a table elsewhere). A version-1 peer is refused with
 * "unsupported version" rather than a checksum mismatch.
 */
#ifndef CX_FRAME_H
#define CX_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define CX_FRAME_MAGIC 0xC7u
#define CX_FRAME_VERSION 2u
#define CX_FRAME_HDR_SIZE 48u
/* Largest payload one message may carry (fragmented below by drivers with a smaller MTU). */
#define CX_FRAME_MAX_MSG (1u << 30)

enum cx_frame_type {
    CX_FRAME_DATA = 1,     /* an event or a pipe segment */
    CX_FRAME_ACK = 2,      /* a bare acknowledgement (ack field) */
    CX_FRAME_CTRL = 3,     /* link control: hello, capabilities, close */
    CX_FRAME_FORMAT = 4,   /* format description request or reply (reflection) */
    CX_FRAME_LOOKUP = 5,   /* space name-table request or reply */
};

enum cx_frame_flag {
    CX_FRAME_F_ACK = 1u << 0,   /* ack field is valid */
    CX_FRAME_F_FRAG = 1u << 1,  /* this frame is one fragment of a larger message */
    CX_FRAME_F_LAST = 1u << 2,  /* last fragment */
    CX_FRAME_F_RETX = 1u << 3,  /* retransmission */
    CX_FRAME_F_REPLY = 1u << 4, /* reply to a request (CTRL, FORMAT, LOOKUP) */
    CX_FRAME_F_END = 1u << 5,   /* end of stream (pipe closed by its writer) */
    CX_FRAME_F_UNCHECKED = 1u << 6, /* hdr_check left out (0): in-memory links only, above */
};

struct cx_frame_hdr {
    uint8_t type;
    uint8_t flags;
    uint32_t channel;
    uint64_t seq;
    uint64_t format;
    uint64_t ack;
    uint32_t length;
    uint32_t frag_offset;
    uint32_t msg_length;
};

/* Writes h into out[CX_FRAME_HDR_SIZE] (sets magic, version and the check; a
 * CX_FRAME_F_UNCHECKED in h->flags is dropped: this header is checked). */
void cx_frame_encode(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE]);

/* The same with CX_FRAME_F_UNCHECKED set and hdr_check 0: for in-memory links only (shm),
 * whose receiver decodes with cx_frame_decode_local. */
void cx_frame_encode_unchecked(const struct cx_frame_hdr *h, uint8_t out[CX_FRAME_HDR_SIZE]);

/* Parses in[0..avail) into h. Returns 0, or a negative errno with cx_errmsg() set:
 * -EAGAIN when avail < CX_FRAME_HDR_SIZE (not an error: read more), -EPROTO for a bad
 * magic, version, type or check, -EMSGSIZE when a length exceeds CX_FRAME_MAX_MSG or a
 * fragment lies outside its message. */
int cx_frame_decode(const uint8_t *in, size_t avail, struct cx_frame_hdr *h);
/* cx_frame_decode also refuses (-EPROTO) a header with CX_FRAME_F_UNCHECKED: network
 * links always carry the check. */

/* cx_frame_decode for an in-memory link: a header with CX_FRAME_F_UNCHECKED is taken
 * without its check (every other check stays; its hdr_check must be 0) and the flag is
 * cleared in h->flags; a
 * header without it is checked as by cx_frame_decode. */
int cx_frame_decode_local(const uint8_t *in, size_t avail, struct cx_frame_hdr *h);

/* The checks cx_frame_decode makes of a decoded header's fields, for a header that came
 * another way (shm's short record): a known type, msg_length within CX_FRAME_MAX_MSG,
 * length equal to it or, for a fragment, the fragment inside it. 0, or -EPROTO / -EMSGSIZE
 * with cx_errmsg() set. */
int cx_frame_fields_check(const struct cx_frame_hdr *h);

/* The hdr_check value of hdr[0..44). portable = 0 takes the fastest code this CPU has (what
 * encode and decode use); portable = 1 forces the table code every machine runs. Both give
 * the same value; exposed so tests can prove it and benchmarks can compare them. */
uint32_t cx_frame_check(const uint8_t hdr[CX_FRAME_HDR_SIZE], int portable);

#endif
