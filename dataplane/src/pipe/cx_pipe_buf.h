/* A reader's in-bound buffer (seed pi-channels.txt: "a single event-driven in-bound thread
 * stores incoming segments into a buffer ... When buffer capacity is reached, data segments
 * are stored into a local file, identified by the pipe_id").
 *
 * Segments arrive from two sources at once — the space's stream and the writer's direct
 * stream — so they may come twice and out of order. The buffer delivers each id exactly
 * once, in id order: ids below the next one to deliver are duplicates and dropped; ids
 * ahead wait in a reorder window until the gap fills. Ready segments are kept in memory up
 * to mem_cap bytes and spill to a file beyond, read back in order. The window keeps any
 * segment less than CX_PIPE_REORDER ids ahead of the next id, and further ones (up to
 * max(CX_PIPE_REORDER, mem_cap / 256) ids ahead) while it holds at most mem_cap bytes, so a
 * reader that attached late keeps the writer's direct segments while the space's stream
 * catches up; what does not fit is dropped: the space's in-order stream brings it again.
 * Not thread-safe (the pipe runtime locks around it).
 */
#ifndef CX_PIPE_BUF_H
#define CX_PIPE_BUF_H

#include <stddef.h>
#include <stdint.h>

/* Ids ahead of the next one that the reorder window always keeps (see above). */
#define CX_PIPE_REORDER 1024

struct cx_pipe_buf;

struct cx_pipe_seg {
    uint64_t id, format;
    uint32_t len;
};

/* next_id: the first id to deliver. spill_path: the file used beyond mem_cap (created on
 * first use, removed at free). */
int cx_pipe_buf_create(uint64_t next_id, size_t mem_cap, const char *spill_path,
                       struct cx_pipe_buf **out);
void cx_pipe_buf_free(struct cx_pipe_buf *b);

/* Offers segment id. Returns 1 when kept (it or a run it completed became ready or waits
 * in the window), 0 when dropped as a duplicate or too far ahead, negative on error. */
int cx_pipe_buf_offer(struct cx_pipe_buf *b, uint64_t id, uint64_t format, const void *data,
                      uint32_t len);

/* Marks the end: the writer closed after last_id. */
void cx_pipe_buf_end(struct cx_pipe_buf *b, uint64_t last_id);

/* The next ready segment: 1 and *seg filled (peek), 0 when none is ready yet, -EPIPE when
 * every segment up to the end was taken. */
int cx_pipe_buf_peek(struct cx_pipe_buf *b, struct cx_pipe_seg *seg);
/* Copies the peeked segment's bytes into out (cap >= seg.len) and removes it. */
int cx_pipe_buf_take(struct cx_pipe_buf *b, void *out, size_t cap);

/* The next id to be made ready (everything below it was delivered or is ready). */
uint64_t cx_pipe_buf_next(const struct cx_pipe_buf *b);
/* The id the reader takes next (pi_tell). */
uint64_t cx_pipe_buf_tell(const struct cx_pipe_buf *b);
/* Drops everything and restarts at next_id (pi_seek). */
void cx_pipe_buf_reset(struct cx_pipe_buf *b, uint64_t next_id);

struct cx_pipe_buf_stats {
    uint64_t kept, duplicates, too_far, spilled, mem_bytes;
};
void cx_pipe_buf_stats(const struct cx_pipe_buf *b, struct cx_pipe_buf_stats *out);

#endif
