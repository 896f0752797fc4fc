/* Pipe log records: encoding, decoding and the recovery scanner; see cx_seglog.h. */
#include "space/cx_seglog.h"

#include "common/cx_error.h"
#include "common/cx_le.h"
#include "common/cx_crc32c.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SCAN_CHUNK 65536

void cx_seglog_hdr_encode(const struct cx_seglog_hdr *h, uint8_t out[CX_SEGLOG_HDR_SIZE])
{
    memset(out, 0, CX_SEGLOG_HDR_SIZE);
    cx_put_le32(out, CX_SEGLOG_MAGIC);
    out[4] = CX_SEGLOG_VERSION;
    out[5] = h->type;
    cx_put_le64(out + 8, h->seg_id);
    cx_put_le64(out + 16, h->format);
    cx_put_le32(out + 24, h->length);
    cx_put_le32(out + 28, h->payload_crc);
    cx_put_le32(out + 36, cx_crc32c(0, out, 36));
}

int cx_seglog_hdr_decode(const uint8_t *in, size_t avail, struct cx_seglog_hdr *h)
{
    if (avail < CX_SEGLOG_HDR_SIZE)
        return cx_err_set(EAGAIN, "record header needs %u bytes, have %zu", CX_SEGLOG_HDR_SIZE,
                          avail);
    if (cx_get_le32(in) != CX_SEGLOG_MAGIC)
        return cx_err_set(EBADMSG, "bad record magic 0x%08x", cx_get_le32(in));
    if (cx_get_le32(in + 36) != cx_crc32c(0, in, 36))
        return cx_err_set(EBADMSG, "record header checksum mismatch");
    if (in[4] != CX_SEGLOG_VERSION)
        return cx_err_set(EBADMSG, "unknown record version %u", in[4]);
    if (in[5] != CX_SEGLOG_DATA && in[5] != CX_SEGLOG_END)
        return cx_err_set(EBADMSG, "unknown record type %u", in[5]);
    if (in[6] || in[7] || cx_get_le32(in + 32))
        return cx_err_set(EBADMSG, "record reserved fields are not zero");
    h->type = in[5];
    h->seg_id = cx_get_le64(in + 8);
    h->format = cx_get_le64(in + 16);
    h->length = cx_get_le32(in + 24);
    h->payload_crc = cx_get_le32(in + 28);
    if (h->length > CX_SEGLOG_MAX_PAYLOAD)
        return cx_err_set(EMSGSIZE, "record length %" PRIu32 " exceeds %u", h->length,
                          CX_SEGLOG_MAX_PAYLOAD);
    if (h->type == CX_SEGLOG_END && (h->length || h->format))
        return cx_err_set(EMSGSIZE, "end-of-stream record carries a payload");
    return 0;
}

int cx_seglog_payload_crc(cx_seglog_read_fn rd, void *rctx, uint64_t off, uint64_t len,
                          uint32_t *crc)
{
    uint8_t buf[SCAN_CHUNK];
    uint32_t c = 0;
    while (len) {
        size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
        long got = rd(rctx, off, buf, n);
        if (got < 0)
            return (int)got;
        if ((size_t)got != n)
            return cx_err_set(EIO, "short read at offset %" PRIu64, off + (uint64_t)got);
        c = cx_crc32c(c, buf, n);
        off += n;
        len -= n;
    }
    *crc = c;
    return 0;
}

/* 1 when bytes [off, size) are all zero, 0 when not, negative on a read error. */
static int all_zero(cx_seglog_read_fn rd, void *rctx, uint64_t off, uint64_t size)
{
    uint8_t buf[SCAN_CHUNK];
    while (off < size) {
        size_t n = size - off < sizeof buf ? (size_t)(size - off) : sizeof buf;
        long got = rd(rctx, off, buf, n);
        if (got < 0)
            return (int)got;
        if ((size_t)got != n)
            return cx_err_set(EIO, "short read at offset %" PRIu64, off + (uint64_t)got);
        for (size_t i = 0; i < n; i++)
            if (buf[i])
                return 0;
        off += n;
    }
    return 1;
}

int cx_seglog_scan(cx_seglog_read_fn rd, void *rctx, uint64_t size, uint64_t expect_id,
                   cx_seglog_rec_fn cb, void *cctx, struct cx_seglog_scan *out)
{
    memset(out, 0, sizeof *out);
    out->last_id = expect_id - 1;
    uint64_t off = 0;
    int rc;
    while (off < size) {
        uint8_t hb[CX_SEGLOG_HDR_SIZE];
        struct cx_seglog_hdr h;
        uint64_t left = size - off;
        if (out->ended) {
            out->verdict = CX_SEGLOG_CORRUPT;
            snprintf(out->why, sizeof out->why, "data after the end-of-stream record");
            break;
        }
        if (left < CX_SEGLOG_HDR_SIZE) {
            out->verdict = CX_SEGLOG_TORN;
            snprintf(out->why, sizeof out->why, "short record header (%" PRIu64 " bytes)", left);
            break;
        }
        long got = rd(rctx, off, hb, sizeof hb);
        if (got < 0)
            return (int)got;
        if (got != (long)sizeof hb)
            return cx_err_set(EIO, "short read at offset %" PRIu64, off + (uint64_t)got);
        if (cx_seglog_hdr_decode(hb, sizeof hb, &h) < 0) {
            snprintf(out->why, sizeof out->why, "%s", cx_errmsg());
            if ((rc = all_zero(rd, rctx, off, size)) < 0)
                return rc;
            out->verdict = rc ? CX_SEGLOG_TORN : CX_SEGLOG_CORRUPT;
            break;
        }
        uint64_t want = h.type == CX_SEGLOG_END ? out->last_id : out->last_id + 1;
        if (h.seg_id != want) {
            out->verdict = CX_SEGLOG_CORRUPT;
            snprintf(out->why, sizeof out->why, "segment id %" PRIu64 " where %" PRIu64
                     " was expected", h.seg_id, want);
            break;
        }
        uint64_t end = off + CX_SEGLOG_HDR_SIZE + h.length;
        if (end > size) {
            out->verdict = CX_SEGLOG_TORN;
            snprintf(out->why, sizeof out->why, "payload of segment %" PRIu64 " is cut short "
                     "(%" PRIu64 " of %" PRIu32 " bytes)", h.seg_id,
                     size - off - CX_SEGLOG_HDR_SIZE, h.length);
            break;
        }
        uint32_t crc;
        if ((rc = cx_seglog_payload_crc(rd, rctx, off + CX_SEGLOG_HDR_SIZE, h.length, &crc)) < 0)
            return rc;
        if (crc != h.payload_crc) {
            out->verdict = end == size ? CX_SEGLOG_TORN : CX_SEGLOG_CORRUPT;
            snprintf(out->why, sizeof out->why, "payload checksum mismatch in segment %" PRIu64,
                     h.seg_id);
            break;
        }
        if (cb) {
            struct cx_seglog_rec r = {h.type, h.seg_id, h.format, off, h.length};
            if ((rc = cb(cctx, &r)) < 0)
                return rc;
        }
        if (h.type == CX_SEGLOG_END) {
            out->ended = 1;
        } else {
            out->records++;
            out->last_id = h.seg_id;
        }
        off = end;
        out->valid_end = off;
    }
    return 0;
}
