/* Encoding and decoding native-format events (seed echo-event-delivery.txt 2.2 and 3).
 *
 * Wire form of an event of format F (the payload of a CX_FRAME_DATA frame whose format
 * field is F's token):
 *
 *   side area   u32 side_len (= 8 + 16 * nslots), u32 nslots, then per slot u64 offset,
 *               u64 length, all little-endian: one slot per string / variable array of F
 *               in F's traversal order; offset is from the payload start, 8-aligned; a
 *               NULL pointer or an empty array is offset 0, length 0; a string's length
 *               counts its NUL
 *   fixed part  the struct exactly as it lies in the sender's memory (its pointers are
 *               meaningless to the receiver), padded with zeros to a multiple of 8
 *   var parts   each string / array's bytes as they lie in memory, each padded to 8
 *
 * Encoding writes only the side area: the fixed part and the var parts are referenced in
 * place by an iovec, so its cost does not grow with the event's size (only strlen of the
 * strings). Decoding builds a conversion plan at the first sight of a (wire, local) format
 * pair and caches it; when the layouts agree (same token, or a sender whose extra fields
 * all follow the receiver's) the event is delivered in place in the receive buffer.
 */
#ifndef CX_CODEC_H
#define CX_CODEC_H

#include "format/cx_format.h"

#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An encoded event: iov[0..iovcnt) is the payload (length bytes); iov[0] points into
 * side[], the others into the event and the static zero padding. Valid while the event's
 * memory is unchanged. */
struct cx_enc {
    uint64_t token;
    size_t length;
    int iovcnt;
    struct iovec iov[3 + 2 * CX_FORMAT_MAX_SLOTS];
    uint8_t side[8 + 16 * CX_FORMAT_MAX_SLOTS];
};

/* Encodes `event` (a struct laid out as f, which must describe this machine) into enc.
 * Returns 0, or a negative errno with cx_errmsg() set: -EINVAL when f is not native, when
 * a variable array's length field is negative or its pointer NULL with a nonzero length;
 * -EMSGSIZE when the event would exceed CX_FRAME_MAX_MSG. */
int cx_encode(const struct cx_format *f, const void *event, struct cx_enc *enc);

/* Copies the payload of enc into buf[0..cap) (a transport would writev the iovec instead).
 * Returns enc->length, or -ENOBUFS when cap is too small. */
long cx_enc_gather(const struct cx_enc *enc, void *buf, size_t cap);

/* Bytes of `out` that cx_decode needs to decode this event into `local` (0 when it can be
 * delivered in place). Returns 0 and *need, or a negative errno as cx_decode. */
int cx_decode_need(const struct cx_format *local, uint64_t wire_token, const void *buf,
                   size_t len, size_t *need);

/* Decodes the payload buf[0..len) of format wire_token into the local format `local`
 * (native, normally registered). The wire format is looked up in the registry (and fetched
 * through its hook when unknown). On success *event points to a struct laid out as local:
 * either inside buf (in place: only the pointer fields of buf are rewritten, nothing is
 * copied) or at out (8-aligned, out_cap bytes; strings and unconverted arrays may still
 * point into buf). An event already in `local` whose fixed part is at most 256 bytes goes
 * to out when out_cap holds that part (cx_format_size), buf untouched; without out it is
 * decoded in place. The event is valid while buf and out live.
 * Returns 0, or a negative errno with cx_errmsg() set: -ENOENT unknown token; -EPROTO a
 * malformed or truncated event, a slot out of bounds, a lying length, an array count past
 * its data, a string without its NUL, a count that does not fit the receiver's length
 * field, or field kinds that cannot convert; -ENOBUFS when out_cap is below
 * cx_decode_need; -EINVAL for a non-native local format or a misaligned out. */
int cx_decode(const struct cx_format *local, uint64_t wire_token, void *buf, size_t len,
              void *out, size_t out_cap, void **event);

/* Plans built so far (cache size, for tests and metrics). */
size_t cx_plan_cache_count(void);

#ifdef __cplusplus
}
#endif
#endif
