/* Fragmentation filter (seed netibis.txt 3): lets messages of any size (up to
 * CX_FRAME_MAX_MSG) cross a lower link whose caps.max_msg is smaller (a datagram driver's
 * MTU). A message that fits goes down unchanged; a larger one goes as frames flagged
 * CX_FRAME_F_FRAG with frag_offset and msg_length set in the one header (F_LAST on the
 * last), each carrying a slice of the caller's iovec (no copy on send). The receiver
 * assembles them into one buffer and delivers the whole message with F_FRAG cleared.
 * Fragments of one message must arrive contiguously and in order, which holds when the
 * lower link is ordered (put the reliability filter under this one on datagram drivers)
 * and sends on this link are serialised (cx_driver.h threading rule). */
#ifndef CX_FRAG_H
#define CX_FRAG_H

#include "transport/cx_driver.h"

/* Builds a fragmentation filter over lower (owned on success). frag_size 0 = lower's
 * max_msg. */
int cx_frag_create(struct cx_link *lower, size_t frag_size, struct cx_link **out);
/* The link under the filter. */
struct cx_link *cx_frag_lower(struct cx_link *frag);
/* Frees the filter without closing its lower link, which it returns to the caller (a
 * builder undoing a half-built stack). */
struct cx_link *cx_frag_release(struct cx_link *frag);

extern const struct cx_driver_ops cx_frag_ops;

#endif
