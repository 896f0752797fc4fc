/* Seq-carrying filter: keeps the caller's header seq across a reliability filter, which
 * numbers the frames of its own link in that field (cx_rel.h). On send the caller's seq
 * goes in the first 8 bytes of the payload (little-endian, as every header field; an iovec
 * in front of the caller's, no copy) and on receipt it comes back into the header, the
 * payload handed on in place 8 bytes shorter (length and msg_length say so). Every other
 * header field passes untouched.
 *
 * It sits above fragmentation (cx_frag.h), so the 8 bytes are part of the message frag
 * slices and the fragment fields stay consistent; its max_msg is the lower's minus 8. The
 * stack builder (cx_stack.h) puts it on top of every stack it builds with a reliability
 * filter, so both ends add it from their links' caps alone and agree. */
#ifndef CX_SEQ_H
#define CX_SEQ_H

#include "transport/cx_driver.h"

/* Builds the filter over lower (owned on success). 0 or -ENOMEM. */
int cx_seq_create(struct cx_link *lower, struct cx_link **out);
/* The link under the filter. */
struct cx_link *cx_seq_lower(struct cx_link *seq);

extern const struct cx_driver_ops cx_seq_ops;

#endif
