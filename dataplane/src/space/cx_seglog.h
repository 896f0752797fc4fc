/* The on-disk record format of a pipe log and its parser (the recovery path).
 *
 * A pipe log is a sequence of records, each a 40-byte header followed by `length` payload
 * bytes, with no padding. Header fields are little-endian:
 *
 *    0  u32 magic        CX_SEGLOG_MAGIC ("CXSR")
 *    4  u8  version      CX_SEGLOG_VERSION
 *    5  u8  type         CX_SEGLOG_DATA (a segment) or CX_SEGLOG_END (writer closed)
 *    6  u16 reserved     0
 *    8  u64 seg_id       segment id; for END, the id of the last segment (0: none)
 *   16  u64 format       format token of the payload (cx_format.h); 0 for END
 *   24  u32 length       payload bytes (at most CX_SEGLOG_MAX_PAYLOAD; 0 for END)
 *   28  u32 payload_crc  CRC-32C of the payload
 *   32  u32 reserved     0
 *   36  u32 hdr_crc      CRC-32C of bytes 0..35 (so it covers payload_crc too: one chain
 *                        of checksums over header and payload)
 *
 * Two checksums let recovery tell a torn tail from corruption (see cx_seglog_scan).
 */
#ifndef CX_SEGLOG_H
#define CX_SEGLOG_H

#include <stddef.h>
#include <stdint.h>

#define CX_SEGLOG_MAGIC 0x52535843u /* bytes 'C' 'X' 'S' 'R' */
#define CX_SEGLOG_VERSION 1u
#define CX_SEGLOG_HDR_SIZE 40u
#define CX_SEGLOG_MAX_PAYLOAD (1u << 30) /* = CX_FRAME_MAX_MSG */

enum cx_seglog_type { CX_SEGLOG_DATA = 1, CX_SEGLOG_END = 2 };

struct cx_seglog_hdr {
    uint8_t type;
    uint64_t seg_id;
    uint64_t format;
    uint32_t length;
    uint32_t payload_crc;
};

/* Writes h into out (sets magic, version, reserved fields and hdr_crc). */
void cx_seglog_hdr_encode(const struct cx_seglog_hdr *h, uint8_t out[CX_SEGLOG_HDR_SIZE]);

/* Parses in[0..avail) into h. Returns 0; -EAGAIN when avail < CX_SEGLOG_HDR_SIZE; -EBADMSG
 * for a bad magic, version, type, reserved field or hdr_crc; -EMSGSIZE for a length above
 * CX_SEGLOG_MAX_PAYLOAD or a non-empty END. Sets cx_errmsg() on failure. Does not check the
 * payload. */
int cx_seglog_hdr_decode(const uint8_t *in, size_t avail, struct cx_seglog_hdr *h);

/* How a scanned log file ends. */
enum cx_seglog_verdict {
    CX_SEGLOG_CLEAN = 0,   /* every byte belongs to a valid record */
    CX_SEGLOG_TORN = 1,    /* valid records, then an incomplete last record: a torn tail */
    CX_SEGLOG_CORRUPT = 2, /* a bad record with more data after it, or a wrong segment id */
};

struct cx_seglog_rec {
    uint8_t type;
    uint64_t seg_id, format, offset; /* offset of the header in the file */
    uint32_t length;
};

struct cx_seglog_scan {
    enum cx_seglog_verdict verdict;
    uint64_t valid_end; /* bytes of whole valid records from offset 0 (truncate here) */
    uint64_t records;   /* DATA records before valid_end */
    uint64_t last_id;   /* id of the last DATA record, or expect_id - 1 if none */
    int ended;          /* an END record closes the valid part */
    char why[160];      /* TORN or CORRUPT: what was found at valid_end */
};

/* Reads len bytes at off into buf; returns the bytes read (fewer only at end of file) or a
 * negative errno. */
typedef long (*cx_seglog_read_fn)(void *ctx, uint64_t off, void *buf, size_t len);
/* Called for each valid record, in order; a negative return stops the scan with it. */
typedef int (*cx_seglog_rec_fn)(void *ctx, const struct cx_seglog_rec *r);

/* Scans a log file of `size` bytes whose first DATA record must carry expect_id (ids then
 * go up by one; an END record carries the last id and must be the final record).
 * Classification of the first bad record, at offset o:
 *   - fewer than 40 bytes left, or an undecodable header followed only by zero bytes
 *     (a preallocated or partially written tail): TORN;
 *   - a valid header whose payload runs past the end of the file: TORN;
 *   - a bad payload CRC on the record that ends exactly at end of file: TORN;
 *   - anything else (bad header or payload CRC with data after it, a wrong segment id, a
 *     record after END): CORRUPT.
 * Fills *out and returns 0 whatever the verdict; returns a negative errno only when `rd`
 * or `cb` (may be NULL) fails. Never trusts a length before its header CRC has passed, and
 * reads payloads in bounded chunks, so memory use is constant. */
int cx_seglog_scan(cx_seglog_read_fn rd, void *rctx, uint64_t size, uint64_t expect_id,
                   cx_seglog_rec_fn cb, void *cctx, struct cx_seglog_scan *out);

/* CRC-32C of len payload bytes at offset off read through rd; returns 0 and sets *crc, or
 * -EIO / rd's error when the bytes cannot all be read. */
int cx_seglog_payload_crc(cx_seglog_read_fn rd, void *rctx, uint64_t off, uint64_t len,
                          uint32_t *crc);

#endif
