/* Persistent pipes: the π-channel API (seed pi-channels.txt, "The π-channel API", Table 1,
 * Figures 3 and 6-8) over a space server (confluxd --role=space, ../space/).
 *
 * A pipe is a named, persistent, single-writer, multi-reader FIFO of immutable segments in
 * a space. The writer streams each segment directly to the readers it knows and, at the
 * same time, to the space, which caches it; a reader merges both streams, dropping
 * duplicates by segment id, so it can attach late, after the writer closed, or come back
 * after a crash and resume from its position. A writer restarted with PI_APPEND replays
 * its writes; segments the space already holds are dropped, idempotently.
 *
 *     int s = pi_space_open("tcp://space:7400", NULL);
 *     int w = pi_create("results", s, PI_CREATE);        // writer
 *     pi_write(w, samples, 128, sample_fmt);              // one segment of 128 samples
 *     pi_close(w);
 *
 *     int r = pi_attach("results", s);                    // reader, anywhere, any time
 *     while ((n = pi_read(r, buf, 1024, sample_fmt)) >= 0) ...   // -1 at the end
 *     pi_detach(r);
 *
 * Segments: with a format t, a segment holds `len` events of t (pointer-free formats: no
 * strings or variable arrays), sent in the writer's native layout and converted at the
 * reader into the reader's t (fields matched by name, ../format/). With t NULL a segment
 * is `len` raw bytes. Positions are 0-based as in the paper: segment 0 is the first.
 *
 * Formats: the first pi_write of each format t on a space stores t's description in the
 * space's format service, so a reader in any process (which may never have seen t) can
 * convert the segment; a write whose format the space refuses or cannot be reached for
 * fails (-1) before anything of it is sent.
 *
 * Names: 1..127 bytes of [A-Za-z0-9._:-], starting with a letter or digit; a longer name
 * fails with ENAMETOOLONG (never truncated), another bad one with EINVAL.
 *
 * Errors: calls return -1 (pi_read also at the end of the pipe, with errno EPIPE) and set
 * errno; cx_errmsg() says what happened ("pipe 'results' has a writer already").
 *
 * Threads: a background thread per process receives readers' segments (the paper's
 * in-bound thread) so they buffer before pi_read is called; beyond a memory cap they spill
 * to a file. A descriptor is used by one thread at a time.
 */
#ifndef CX_PIPE_H
#define CX_PIPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_format;

enum { PI_CREATE = 1, PI_APPEND = 2 };

struct pi_options {
    const char *listen;     /* where writers reach this process's readers directly (the
                             * direct link): "tcp://host:port", "shm://@name",
                             * "shm:///path.sock", "ucx://host:port", "tls://host:port"
                             * (tls: credentials from CONFLUX_TLS_*, every writer needs them
                             * too) or "dpdk://a.b.c.d:port" (the process's DPDK port,
                             * transport/dpdk/cx_dpdk.h; every writer needs a port too); or a
                             * bare "tcp", "ucx", "tls" (the address this process uses to
                             * reach the space, any port), "shm" (an abstract name unique to
                             * the process: same host and network namespace only) or "dpdk"
                             * (the port's own address, any UDP port).
                             * NULL: the environment's CONFLUX_PIPE_LISTEN, else "tcp". Any
                             * other scheme: EINVAL. The first pi_space_open of a process
                             * starts the listener; later ones' listen is checked, not used */
    size_t reader_mem;      /* a reader's in-memory buffer before spilling (default 64 MiB);
                             * out-of-order segments wait in a window of as many bytes more */
    const char *spill_dir;  /* where readers' spill files go (default /tmp): an existing,
                             * writable directory (ENOENT/ENOTDIR/EACCES otherwise), path
                             * under 200 bytes (ENAMETOOLONG); copied, the caller's string
                             * need not outlive the call */
    uint32_t window;        /* segments a writer may have unacknowledged by the space
                             * (default 1024); pi_write waits beyond */
    int timeout_ms;         /* how long calls wait for the space (default 10000) */
};

/* Opens a space (its server's address). opts may be NULL. Returns a space descriptor. */
int pi_space_open(const char *addr, const struct pi_options *opts);
int pi_space_close(int s);

int pi_attach(const char *name, int s);
int pi_create(const char *name, int s, int mode);
/* The next segment, in order: the count of events (t) or bytes (t NULL) written into b.
 * A segment larger than len (bytes, or events of t) fails with EMSGSIZE and is NOT
 * consumed: call again with a bigger buffer (cx_errmsg() says the size). So do a segment
 * whose format is unknown (ENOENT) or does not fit t (EPROTO). -1/EPIPE at the end. */
long pi_read(int d, void *b, size_t len, const struct cx_format *t);
/* Appends a segment of len events of t (len bytes when t is NULL); returns len. */
long pi_write(int d, const void *b, size_t len, const struct cx_format *t);
int pi_close(int d);
/* Beyond the paper: lets go of a writer WITHOUT ending the pipe, for a writer that stops
 * before its end and will be restarted (the paper's writer restart): the descriptor is
 * freed, what this writer sent waits for the space's acknowledgement (up to the space's
 * timeout_ms, reconnecting as pi_write does), the space frees the pipe's writer place at
 * once and readers go on from the space, reaching no end. A writer opened later with
 * PI_APPEND replays its writes and continues after what the space holds. Returns 0, or -1
 * when the space did not acknowledge everything (the descriptor is freed all the same; a
 * replay writes those segments again). EBADF for anything but a writer. */
int pi_abandon(int d);
int pi_detach(int d);
int pi_seek(int d, uint64_t seg);
int64_t pi_tell(int d);
int pi_unlink(const char *name, int s);

/* Beyond the paper: durable named readers (cursors). A reader attached under a cursor name
 * reads from where the last reader of that name acknowledged, in any process, after a
 * crash of the reader or a restart of the space, without bookkeeping of its own:
 *
 *     int r = pi_attach_named("results", s, "stage-a");   // at stage-a's position (0: new)
 *     while ((n = pi_read(r, buf, 1024, fmt)) >= 0) {
 *         handle(buf, n);
 *         pi_ack(r);                                      // done with what was read
 *     }
 *
 * pi_attach_named: pi_attach, then positioned at the cursor's acknowledged position (the
 * next segment its readers get; segment 0 for a cursor never acknowledged). A cursor name
 * is 1..64 bytes of [A-Za-z0-9._-] starting with a letter or digit (EINVAL otherwise,
 * cx_errmsg() says which rule failed). The cursor belongs to the pipe: it survives
 * restarts of the space (stored beside the pipe's segments, written atomically and, under
 * an fsync policy other than none, fsynced) and goes away with pi_unlink.
 *
 * pi_ack: acknowledges every segment pi_read returned on d so far: stores pi_tell(d) as the
 * cursor's position and returns 0 once the space stored it. "Acknowledged" means exactly
 * that: a segment is acknowledged when a pi_ack that followed its pi_read returned 0.
 * Delivery is at least once: segments read but not acknowledged when the reader dies (or
 * detaches) are read again by the next reader of the cursor, starting exactly after the
 * last acknowledged one; acknowledged ones are never read again through the cursor. A
 * pi_seek moves the reading position, and the next pi_ack stores it (even backwards).
 * -1 with EINVAL for a reader attached without a name (pi_attach), EBADF for a
 * descriptor that is not a reader, ENOENT when the pipe was unlinked, or the space's error
 * when it could not be reached (nothing stored: call again).
 *
 * Two readers attached under one cursor name at the same time read independently and the
 * last pi_ack wins (readers that share the segments among them: pi_attach_group). */
int pi_attach_named(const char *name, int s, const char *cursor);
int pi_ack(int d);

/* Beyond the paper: reader groups (readers that share a pipe's work). Every member of a
 * group, in any process, reads a disjoint share of the pipe: each segment goes to one live
 * member at a time, handed out in order by the space (no direct links from the writer):
 *
 *     int r = pi_attach_group("jobs", s, "workers");      // one member of "workers"
 *     while ((n = pi_read(r, buf, 1024, fmt)) >= 0) {     // this member's next segment
 *         handle(buf, n);
 *         pi_ack(r);                                      // done: never handed out again
 *     }                                                   // -1/EPIPE: nothing left
 *
 * pi_read returns the member's next segment (waiting, polling the space, while none is
 * free); pi_tell is then that segment's position + 1. pi_ack acknowledges exactly the
 * segments pi_read returned on d since the last pi_ack (not cumulative over the pipe); an
 * acknowledged segment is never handed out again. A member holds at most 64 segments read
 * and not acknowledged (pi_read fails with ENOBUFS beyond: pi_ack first). What a member
 * read and did not acknowledge goes back to the group, to be handed to the next member
 * that asks (first, before newer segments), when it pi_detach-es (at once), when its
 * process's connection to the space closes (it died), or when it held segments for 30 s
 * (CONFLUX_GROUP_ACK_WAIT_MS of the process running the pipe runtime at pi_attach_group:
 * the sidecar's in sidecar mode) without a pi_ack or pi_read. Such a member's next pi_ack fails with ESRCH (those
 * segments went to others; what it read after joining again is acknowledged all the same)
 * and its next pi_read joins the group again, as after a restart of the space. Members may join
 * and leave at any time: a new member gets the next free segments. pi_read gives -1/EPIPE
 * once the pipe ended and every segment is handed out and none is held by another member
 * (one that dies then leaves its segments to members still reading).
 *
 * The group's floor (every segment below it acknowledged) is stored by the space as a
 * cursor is; after a restart of the space the group hands out again every segment from the
 * floor on, including ones acknowledged above it (at least once across restarts; exactly
 * once while the space runs, for acknowledged work). A group name follows cursor names'
 * rules (EINVAL); the group belongs to the pipe and goes with pi_unlink. pi_seek of a
 * member fails with EINVAL; pi_reader_stats counts segments read (from_space) and
 * segments handed out before to another member (duplicates), and how often it joined again
 * after the space removed it (reconnects). `conflux stat NAME` shows
 * each group's floor, members and in-flight counts. */
int pi_attach_group(const char *name, int s, const char *group);

/* Shuts the pipe runtime down: closes every open writer as pi_close does (waiting for the
 * space to acknowledge its segments), detaches every reader (unread segments are dropped,
 * spill files removed), closes every space and stops the in-bound thread and its listener.
 * Every descriptor is invalid afterwards; pi_space_open starts the runtime again. Call it
 * from one thread while no other thread uses pipes. Returns 0, or -1 with the first error
 * (a writer whose space did not acknowledge; the rest is still shut down). */
int pi_shutdown(void);

/* Beyond the paper: pi_read with a deadline (-1 with errno ETIMEDOUT when nothing came). */
long pi_read_timeout(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms);

/* Counters of a reader (for tests and metrics). */
struct pi_reader_stats {
    uint64_t from_space, from_writer, duplicates, spilled, reconnects;
};
int pi_reader_stats(int d, struct pi_reader_stats *out);

/* Migration (seed Figure 7, the hold list): an open reader or writer moves to another
 * process or address, and nothing acknowledged is lost, nothing is delivered twice, order
 * holds.
 *
 *     uint8_t blob[PI_MIGRATE_MAX];
 *     long n = pi_migrate_out(d, 5000, blob, sizeof blob);  // old process: d is gone now
 *     ... send blob[0..n) to the new process ...
 *     int d2 = pi_migrate_in(blob, n, s);                   // new process, its own space s
 *
 * pi_migrate_out saves the endpoint's state into blob (at most PI_MIGRATE_MAX bytes; the
 * return value says how many) and releases the descriptor. A reader saves its position
 * (pi_tell: segments it buffered but did not deliver are dropped here; the space has them);
 * the space holds its registration and tells the writer (READER_HELD), which drains and
 * closes its direct link to the old address and puts it on its hold list: it neither sends
 * nor connects there any more. The call waits (up to 1 s) for that link to close. A writer
 * first waits until the space acknowledged every segment it wrote (timeout_ms of its
 * space), flushes and closes its direct links (its readers go on from the space) and the
 * space keeps its single-writer slot for it: another pi_create gets EBUSY meanwhile.
 * hold_ms is how long the space and the peers keep the endpoint's place (0: 10 s).
 *
 * pi_migrate_in opens the saved endpoint again on space s (the same space server, reached
 * from the new process) and returns its descriptor. A reader resumes at the saved position;
 * the writer connects to its new address and first sends the segments it held back, while
 * the space streams what the writer no longer retains (Figure 8). A writer goes on after
 * its last segment and connects to the pipe's readers. After the hold ends (the new side
 * came too late) a reader simply attaches at its position and reads from the space, and a
 * writer opens the pipe as PI_APPEND would, if nobody wrote it since.
 *
 * Errors, all with the endpoint intact (nothing lost): pi_migrate_out: EBADF (not an open
 * pipe), EMSGSIZE (cap too small), the space's error (unreachable: ETIMEDOUT, ECONNRESET;
 * the descriptor stays usable). pi_migrate_in: EINVAL (not a migration blob, truncated,
 * unknown version or kind), EBADMSG (checksum mismatch: corrupt), EBADF (s), ENOENT (the pipe
 * was unlinked, or the name names another pipe now), EBUSY (a writer whose place another
 * writer holds), ESTALE (a writer whose pipe was written by someone else since). A blob may
 * be used once: a second pi_migrate_in of a writer's blob finds the pipe written (EBUSY),
 * of a reader's makes a second reader at the same position. */
#define PI_MIGRATE_MAX 256
long pi_migrate_out(int d, int hold_ms, void *blob, size_t cap);
int pi_migrate_in(const void *blob, size_t len, int s);

/* Counters of a writer (for tests and metrics): direct links open now, readers on its hold
 * list now, holds taken, holds ended by the reader reappearing (resumed) or by their time
 * (expired), held segments resent to a reader at its new address. */
struct pi_writer_stats {
    uint64_t direct, held, holds, resumed, expired, resent;
};
int pi_writer_stats(int d, struct pi_writer_stats *out);

/* The transport of an open pipe's direct link, into out (cap bytes): "tcp", "shm", "ucx" or
 * "tls"; "" when it has none. A writer: the last direct link it opened to a reader (pi_writer_stats
 * says how many are open now). A reader: the last direct link a writer's segments reached it
 * over (none: everything came from the space). A separate call, not a stats field, so the
 * stats structs keep the layout the sidecar and the SDK mirror. Returns 0, or -1 with errno
 * EBADF (not an open pipe) or ERANGE (cap shorter than the name and its NUL; PI_LINK_MAX
 * always fits). */
#define PI_LINK_MAX 8
int pi_link(int d, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
