/* The segment store of a space (seed pi-channels.txt: the space caches every pipe so a
 * reader can come late, leave, crash and resume, and a writer can finish before any reader
 * starts). Each pipe is an append-only log of typed segments on disk.
 *
 * Layout: <dir>/LOCK (flock: one process owns a store), <dir>/pipes/<pipe>/<first>.log,
 * where <first> is the 20-digit id of the first segment the file holds. Records are
 * described in cx_seglog.h. Segment ids start at 1 and go up by one; a pipe is written by
 * one writer.
 *
 * Durability (what a 0 from cx_segstore_append promises):
 *   CX_SEG_FSYNC_NONE      the record is in the kernel's page cache: survives a crash of
 *                          this process, not of the machine.
 *   CX_SEG_FSYNC_INTERVAL  as NONE, plus fdatasync once at least interval_ms passed since
 *                          the last one (checked at each append and by cx_segstore_sync_due,
 *                          which the server calls from its timer): a machine crash loses at
 *                          most the segments of the last interval.
 *   CX_SEG_FSYNC_EVERY     fdatasync before append returns (and the directory is synced
 *                          when a file is created): the segment survives a machine crash.
 *
 * Recovery (cx_segstore_pipe_open of an existing pipe): every log file is scanned and
 * checked (cx_seglog_scan). A torn tail of the last file (an append cut by a crash) is
 * truncated away; the count of bytes dropped shows in cx_seg_stat.truncated_bytes. A
 * corrupt record anywhere (bad checksum with data after it, wrong id) makes the open fail
 * with -EBADMSG and a message naming the file and offset, unless the pipe is opened with
 * opts.repair, which truncates the log at the corruption (dropping every later segment).
 * A corrupt segment is never returned: reads verify the payload checksum again.
 *
 * Retention: with max_bytes / max_segments set, whole old log files are deleted from the
 * head after an append once the pipe exceeds either limit; the file being written is never
 * deleted, so a pipe may exceed a limit by up to one file (roll_bytes). Readers learn what
 * was dropped from -ENODATA and cx_seg_stat.first_id.
 *
 * Memory: a sparse index per log file, one offset per CX_SEG_INDEX_STRIDE segments (8
 * bytes per 64 segments, plus about 64 bytes per file); a read walks at most STRIDE-1
 * record headers from the nearest indexed one, and iterators remember where the next
 * record is, so a sequential reader does no walking. Retention bounds the files and so the
 * index; an unbounded pipe costs ~128 KiB of index per million segments.
 *
 * Threads: a store and its pipes may be used from several threads; each pipe has a mutex.
 * An iterator belongs to one thread.
 */
#ifndef CX_SEGSTORE_H
#define CX_SEGSTORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CX_SEG_INDEX_STRIDE 64
#define CX_SEG_ROLL_DEFAULT (64u << 20)
/* cx_segstore_append's result when seg_id was already stored (a writer's replay). */
#define CX_SEG_ALREADY 1

struct cx_segstore;
struct cx_seg_pipe;

enum cx_seg_fsync { CX_SEG_FSYNC_NONE = 0, CX_SEG_FSYNC_INTERVAL = 1, CX_SEG_FSYNC_EVERY = 2 };

/* Per-pipe settings; zero-initialised means: no fsync, no retention, 64 MiB files. */
struct cx_seg_pipe_opts {
    enum cx_seg_fsync fsync;
    uint32_t fsync_interval_ms; /* CX_SEG_FSYNC_INTERVAL; 0 acts as EVERY */
    uint64_t max_bytes;         /* 0: unlimited */
    uint64_t max_segments;      /* 0: unlimited */
    uint64_t roll_bytes;        /* start a new file once the current one holds this much */
    int repair;                 /* on open: truncate at a corruption instead of failing */
    int defer_sync;             /* EVERY, group commit: append and end write without the
                                 * fdatasync and the caller runs cx_segstore_sync before it
                                 * tells anyone the batch is stored (one fdatasync for many
                                 * segments); what append's 0 promises is then NONE's */
};

struct cx_seg_stat {
    uint64_t first_id;        /* first segment still stored (last_id + 1 when none) */
    uint64_t last_id;         /* last segment stored, 0 when none was ever written */
    uint64_t segments;        /* last_id - first_id + 1 */
    uint64_t bytes;           /* bytes of log on disk, headers included */
    uint32_t files;           /* log files */
    int ended;                /* the writer marked end of stream */
    uint64_t truncated_bytes; /* torn tail (or repaired corruption) dropped at open */
};

/* What a read returns besides the payload. */
struct cx_seg_info {
    uint64_t seg_id;
    uint64_t format; /* the segment's format token */
    uint32_t length; /* payload bytes (also set when the buffer was too small) */
};

/* A reading position in a pipe. Plain data: no cleanup needed. */
struct cx_seg_iter {
    struct cx_seg_pipe *pipe;
    uint64_t next_id;
    /* where next_id's record is, when known (internal) */
    uint64_t hint_id, hint_file, hint_off;
};

/* Opens (creating it and its pipes/ folder if needed; the parent must exist) the store at
 * dir and takes its lock. -EBUSY when another process holds the store. */
int cx_segstore_open(const char *dir, struct cx_segstore **out);

/* Closes a store. Every pipe of it must have been closed first (else they are closed here,
 * and their handles become invalid). NULL is a no-op. */
void cx_segstore_close(struct cx_segstore *s);

/* Opens pipe `name` (cx_space_name_check rules), creating it when `create` is non-zero
 * (-ENOENT otherwise), recovering its log as described above. opts may be NULL (defaults).
 * A pipe may be open once at a time (-EBUSY otherwise). -EBADMSG on corruption. */
int cx_segstore_pipe_open(struct cx_segstore *s, const char *name,
                          const struct cx_seg_pipe_opts *opts, int create,
                          struct cx_seg_pipe **out);

/* The pipe's directory (an fd owned by the pipe) and whether its fsync policy is not NONE:
 * for files kept beside the log (cx_segcursor.h). */
int cx_segstore_pipe_dirfd(struct cx_seg_pipe *p, int *durable);

/* Syncs (unless policy NONE) and closes a pipe. NULL is a no-op. */
void cx_segstore_pipe_close(struct cx_seg_pipe *p);

/* Deletes a closed pipe and its log. -ENOENT when absent, -EBUSY when open. */
int cx_segstore_pipe_unlink(struct cx_segstore *s, const char *name);

/* Appends segment seg_id with the given format token and payload (iovcnt pieces, at most
 * 64, at most CX_SEGLOG_MAX_PAYLOAD bytes in all). Returns 0 when stored (durable per the
 * fsync policy); CX_SEG_ALREADY when seg_id <= last stored id (nothing written: a writer
 * replaying after a restart; the payload is not compared); -ERANGE when seg_id > last + 1
 * (a gap) or seg_id is 0; -EPIPE after end of stream; -EMSGSIZE when too large; -EIO and
 * others from the disk. A failed write is rolled back (file truncated to its old size); if
 * even that fails, the pipe refuses further appends with -EIO. */
int cx_segstore_append(struct cx_seg_pipe *p, uint64_t seg_id, uint64_t format,
                       const struct iovec *iov, int iovcnt);

/* Marks end of stream (the writer closed the pipe): no append succeeds afterwards and
 * readers past the last segment get -EPIPE. Durable per the fsync policy. Calling it again
 * returns 0. */
int cx_segstore_end(struct cx_seg_pipe *p);

/* Reads segment seg_id into buf[0..cap). Returns the payload length and fills *info (may be
 * NULL). -ENODATA when the segment was dropped by retention (the message names the first
 * available id); -EAGAIN when it is not written yet; -EPIPE when it is past the last
 * segment of an ended pipe; -EMSGSIZE when cap is too small (info->length says how much is
 * needed); -EBADMSG when the stored bytes fail their checksum. */
long cx_segstore_read(struct cx_seg_pipe *p, uint64_t seg_id, void *buf, size_t cap,
                      struct cx_seg_info *info);

/* Fills *st. */
void cx_segstore_stat(struct cx_seg_pipe *p, struct cx_seg_stat *st);

/* fdatasync of the pipe's current file now, when anything was written since the last one
 * (0 at once otherwise). A failed fdatasync makes the pipe refuse further appends (-EIO):
 * what reached the disk is unknown. */
int cx_segstore_sync(struct cx_seg_pipe *p);

/* For CX_SEG_FSYNC_INTERVAL: syncs when appends are pending and the interval has passed.
 * Returns 1 when it synced, 0 when not needed, negative on error. */
int cx_segstore_sync_due(struct cx_seg_pipe *p);

/* Positions an iterator at from_id (0: the first available segment). Like pi_seek. */
void cx_segstore_iter_init(struct cx_seg_pipe *p, uint64_t from_id, struct cx_seg_iter *it);

/* Reads the segment at the iterator and advances it on success; results as
 * cx_segstore_read. After -ENODATA, cx_segstore_iter_init(p, 0, it) resumes at the first
 * available segment. */
long cx_segstore_iter_next(struct cx_seg_iter *it, void *buf, size_t cap,
                           struct cx_seg_info *info);

/* The id the iterator reads next (pi_tell). */
static inline uint64_t cx_segstore_iter_tell(const struct cx_seg_iter *it) { return it->next_id; }

#ifdef __cplusplus
}
#endif
#endif
