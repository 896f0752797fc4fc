/* The stream deframer of the byte-stream drivers (tcp, tls): turns the bytes a socket gives
 * into whole frames (48-byte cx_frame header + payload) for a cx_recv_fn.
 *
 * Small frames are delivered in place from a 256 KiB buffer. A larger payload gets its own
 * buffer, which grows with the bytes received (doubling from 256 KiB), never with the bytes
 * a header promises: a peer that declares a 1 GiB frame and sends nothing costs nothing.
 * The declared length is checked against the link's limit (max_msg, CX_FRAME_MAX_MSG by
 * default; a server lowers it with the driver's set_limits) before anything is allocated.
 * A frame over the limit either fails the link (-EMSGSIZE, the default) or, when the owner
 * gave an on_oversize callback, has its payload read and thrown away (in the same bounded
 * buffer) and is reported by its header alone, so the server can refuse it with an answer
 * and keep the connection. */
#ifndef CX_DEFRAME_H
#define CX_DEFRAME_H

#include "common/cx_frame.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The receive callback (the same shape as cx_recv_fn in transport/cx_driver.h). */
typedef void (*cx_deframe_fn)(void *arg, const struct cx_frame_hdr *h, const void *payload,
                              size_t len);

/* Reads up to n bytes into dst: returns the bytes read, 0 when the socket has none now, or a
 * negative errno (the peer closed: -ECONNRESET) with cx_errmsg() set. */
typedef ssize_t (*cx_deframe_read_fn)(void *io, void *dst, size_t n);

struct cx_deframe {
    uint8_t *rbuf;
    size_t roff, rlen;         /* unparsed bytes are rbuf[roff..rlen) */
    struct cx_frame_hdr big_hdr;
    uint8_t *big;              /* large payload being received, or NULL */
    size_t big_got, big_cap;
    int skipping;              /* big_hdr's payload is over the limit: read and dropped */
    uint32_t max_msg;          /* largest payload accepted */
    cx_deframe_fn on_oversize; /* NULL: a frame over max_msg fails the link */
    int err;                   /* negative errno once the stream is broken (bad header) */
};

/* 0 or -ENOMEM. */
int cx_deframe_init(struct cx_deframe *d);
void cx_deframe_free(struct cx_deframe *d);

/* Copies n bytes already read past a handshake into the buffer (n <= 256 KiB). */
int cx_deframe_preload(struct cx_deframe *d, const void *p, size_t n);

/* Sets the limit (0 = CX_FRAME_MAX_MSG; never above it) and the oversize callback, which
 * progress calls with its own arg, the header and no payload. */
void cx_deframe_set_limits(struct cx_deframe *d, uint32_t max_msg, cx_deframe_fn on_oversize);

/* Delivers up to budget frames to fn(arg, ...), reading through rd(io, ...) as needed.
 * Returns the frames delivered (0: the socket has nothing more now), or, when none was, a
 * negative errno: a bad header (-EPROTO, -EMSGSIZE; sticky: every later call returns it) or
 * the read function's error. Frames buffered before an error are delivered first. */
int cx_deframe_run(struct cx_deframe *d, cx_deframe_read_fn rd, void *io, cx_deframe_fn fn,
                   void *arg, int budget);

/* 1 when a whole header is buffered (progress has work without the socket saying so). */
int cx_deframe_ready(const struct cx_deframe *d);

/* 1 while bytes of a partly received frame are buffered (a header or a payload begun). */
int cx_deframe_partial(const struct cx_deframe *d);

#endif
