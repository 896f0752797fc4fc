/* A client of the space server (cx_space_server.h; protocol in cx_space_proto.h).
 *
 * One client = one connection. Calls block the calling thread until the reply comes (or
 * timeout_ms passes: -ETIMEDOUT), driving the connection themselves, so no thread is
 * needed; a mutex makes a client usable from several threads (one call at a time).
 * Errors from the server come back as the server's errno and message ("pipe 'x' is open
 * for writing; close it first").
 *
 *     struct cx_space_client *c;
 *     cx_space_connect("tcp://10.0.0.5:7400", &c);
 *     uint32_t w;  cx_space_put(c, "results", CX_SP_CREATE, token, "", &w, &info);
 *     cx_space_append(c, w, 1, token, iov, 1);   ...   cx_space_end(c, w, n);
 *     cx_space_wait_acked(c, w, n, 5000);        // the space holds 1..n (per its fsync policy)
 *
 *     uint32_t r;  cx_space_read_start(c, "results", 1, &r, &info);
 *     while ((len = cx_space_read_next(c, r, buf, cap, &seg, 5000)) >= 0) ...   // -EPIPE at end
 */
#ifndef CX_SPACE_CLIENT_H
#define CX_SPACE_CLIENT_H

#include "common/cx_export.h"
#include "space/cx_segstore.h"
#include "space/cx_space_proto.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_format;
struct cx_space_client;

/* What the server says of a pipe. */
struct cx_space_pipe_info {
    uint64_t pipe_id, format, first_id, last_id;
    int ended, writer_open;
    int naddrs; /* GET: the writer's address; PUT: the known readers' addresses */
    char addrs[CX_SP_MAX_ADDRS][CX_SP_ADDR_MAX + 1];
};

/* Default wait for a reply. */
#define CX_SPACE_TIMEOUT_MS 10000

CX_EXPORT int cx_space_connect(const char *addr, struct cx_space_client **out);
CX_EXPORT void cx_space_disconnect(struct cx_space_client *c);

/* Name table. lookup: -ENOENT when unbound. get: binds when unbound (the paper's pi_attach
 * get) and registers reader_addr (may be "" or NULL) so the writer streams to it. */
int cx_space_lookup(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *out);
int cx_space_get(struct cx_space_client *c, const char *name, uint64_t format,
                 const char *reader_addr, struct cx_space_pipe_info *out);
int cx_space_unlink(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *out);
/* What the space knows of a pipe's use (the STATS request, cx_space_proto.h): READ streams
 * open, bytes and segments stored, and links in use per transport ("tcp", "shm", ...).
 * -ENOENT when unbound; -EPROTO from a server older than STATS. */
struct cx_space_pipe_stats {
    uint32_t readers;
    uint64_t bytes, segments;
    int nlinks;
    struct {
        char transport[32];
        uint32_t count;
    } links[CX_SP_MAX_LINKS];
};
int cx_space_stats(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *info,
                   struct cx_space_pipe_stats *out);
/* Calls fn for every binding; returns how many there are. */
long cx_space_list(struct cx_space_client *c,
                   void (*fn)(void *arg, const char *name, uint64_t pipe_id, uint64_t format),
                   void *arg);

/* Named readers' cursors (CURSOR_* in cx_space_proto.h): set stores a cursor's position
 * (pipe_id 0: whatever pipe the name names; else -ENOENT once it names another); get reads
 * it (-ENOENT: never stored); list calls fn for each of the pipe's cursors and returns how
 * many there are. A server older than cursors answers -EPROTO. */
int cx_space_cursor_set(struct cx_space_client *c, const char *name, uint64_t pipe_id,
                        const char *cursor, uint64_t pos);
int cx_space_cursor_get(struct cx_space_client *c, const char *name, const char *cursor, uint64_t *pos);
long cx_space_cursor_list(struct cx_space_client *c, const char *name,
                          void (*fn)(void *arg, const char *cursor, uint64_t pos), void *arg);

/* Reader groups (GROUP_* in cx_space_proto.h). join makes this connection's new member of
 * the pipe's group (binding the name as GET does; ack_wait_ms 0: 30 s) and says the floor;
 * next leases the member's next segment into *seg (its bytes malloc'ed: the caller frees
 * seg->data), -EAGAIN when there is none now, -EPIPE at the end; ack acknowledges n
 * positions (all or none); leave hands the member's leases back; list calls fn for each
 * group of the pipe with its floor, next position, members and their in-flight counts. */
struct cx_space_group_seg {
    uint64_t pos, format;
    uint32_t deliveries, len;
    uint8_t *data;
};
int cx_space_group_join(struct cx_space_client *c, const char *name, const char *group,
                        uint32_t ack_wait_ms, uint64_t *member, uint64_t *floor);
int cx_space_group_next(struct cx_space_client *c, const char *name, const char *group, uint64_t member,
                        struct cx_space_group_seg *seg);
int cx_space_group_ack(struct cx_space_client *c, const char *name, const char *group, uint64_t member,
                       const uint64_t *pos, size_t n);
int cx_space_group_leave(struct cx_space_client *c, const char *name, const char *group, uint64_t member);
long cx_space_group_list(struct cx_space_client *c, const char *name,
                         void (*fn)(void *arg, const char *group, uint64_t floor, uint64_t next, int nmember,
                                    const uint64_t *member, const uint32_t *inflight),
                         void *arg);

/* Format service. put: stores f's description in the space. get: the description of a
 * token (malloc'ed; caller frees), -ENOENT when the space does not know it. */
CX_EXPORT int cx_space_format_put(struct cx_space_client *c, const struct cx_format *f, uint64_t *token);
int cx_space_format_get(struct cx_space_client *c, uint64_t token, uint8_t **desc, size_t *len);
/* Makes this client the format registry's fetch hook (cx_format_registry_set_fetch), so
 * decoding an event of an unknown token asks the space. The client must outlive the hook
 * (cx_space_disconnect removes it). */
void cx_space_serve_formats(struct cx_space_client *c);

/* Writing. put opens name for writing (mode CX_SP_CREATE or CX_SP_APPEND) under a new
 * handle; info->last_id says what the space already holds (a restarted writer replays its
 * writes: the space drops ids it has, idempotently). append sends one segment (queued, not
 * waited for); end closes the pipe after last_id. Acks arrive in the background of every
 * call; wait_acked blocks until the space holds seg_id. A segment the space refuses makes
 * later calls on the handle fail with its error. */
int cx_space_put(struct cx_space_client *c, const char *name, int mode, uint64_t format,
                 const char *writer_addr, uint32_t *handle, struct cx_space_pipe_info *out);
int cx_space_append(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, uint64_t format,
                    const struct iovec *iov, int iovcnt);
int cx_space_end(struct cx_space_client *c, uint32_t handle, uint64_t last_id);
int cx_space_wait_acked(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, int timeout_ms);
/* Highest segment id the space acknowledged on the handle (0: none yet), as of the last
 * time this client collected acks: every 16 append/acked/next_reader calls and in every
 * waiting call (wait_acked waits for news). */
uint64_t cx_space_acked(struct cx_space_client *c, uint32_t handle);

/* Reading. read_start streams name from from_id (0: the first kept) under a new handle;
 * read_next returns the next segment's length (copied into buf; -EMSGSIZE with
 * info->length set when cap is too small, the segment stays), -EPIPE at the end of a
 * closed pipe (info->seg_id = the id after the last), -ETIMEDOUT (timeout 0 polls once),
 * or the server's error (-ENODATA: dropped by retention). */
int cx_space_read_start(struct cx_space_client *c, const char *name, uint64_t from_id,
                        uint32_t *handle, struct cx_space_pipe_info *out);
long cx_space_read_next(struct cx_space_client *c, uint32_t handle, void *buf, size_t cap,
                        struct cx_seg_info *info, int timeout_ms);

/* Pushes: news the server sent for a writer's handle, in order. op CX_SP_READER_JOINED: a
 * reader attached at addr; CX_SP_READER_HELD: the reader at addr is migrating (stop sending
 * to it for up to hold_ms); CX_SP_READER_MOVED: the reader at addr is now at addr2. Returns
 * 1 and fills ev, 0 when none is queued (at most 32 are; later news is dropped). */
struct cx_space_event {
    int op;
    uint32_t hold_ms;
    char addr[CX_SP_ADDR_MAX + 1], addr2[CX_SP_ADDR_MAX + 1];
};
int cx_space_next_event(struct cx_space_client *c, uint32_t handle, struct cx_space_event *ev);
/* The next READER_JOINED address (other news is dropped on the way: for callers that do not
 * follow migrations). Returns 1 and fills addr, 0 when none is queued. */
int cx_space_next_reader(struct cx_space_client *c, uint32_t handle, char *addr, size_t cap);

/* Migration (cx_space_proto.h, MIGRATE and RESUME). migrate: kind CX_SP_MIG_READER (addr: the
 * reader process's registered address) or CX_SP_MIG_WRITER (handle: this client's writer
 * handle, ended by the call); the space holds the endpoint's place for hold_ms (0: 10 s) and
 * returns the token the new side presents to resume. resume: the new side; a reader at addr
 * (handle may be NULL), or a writer under a new handle (*handle) as cx_space_put APPEND
 * would open it. -ENOENT when pipe_id is not the name's pipe any more. */
int cx_space_migrate(struct cx_space_client *c, int kind, uint32_t handle, const char *name,
                     const char *addr, uint32_t hold_ms, uint64_t *token,
                     struct cx_space_pipe_info *out);
int cx_space_resume(struct cx_space_client *c, int kind, const char *name, const char *addr,
                    uint64_t pipe_id, uint64_t token, uint32_t *handle, struct cx_space_pipe_info *out);

/* The connection's fd (readable when a call would find news), for callers that wait in
 * poll() across several clients. */
int cx_space_client_fd(struct cx_space_client *c);
/* Sends what the connection still holds queued (the socket did not take it all) and collects
 * what arrived, without waiting, not even for the client's lock; safe from any thread.
 * Returns the bytes still queued (1 when another thread is inside a call on it: that call
 * drives the connection), or -ECONNRESET once the connection is lost. A writer that stops writing calls it (through
 * the pipe runtime's in-bound thread) so its last appends leave. */
long cx_space_client_push(struct cx_space_client *c);

/* Ends a handle (reader or writer) on the server and here. */
int cx_space_stop(struct cx_space_client *c, uint32_t handle);

/* One LOOKUP over UDP to "host:port", retransmitted every timeout_ms up to tries times.
 * Needs no connection: the cheap request/reply of the paper. */
int cx_space_udp_lookup(const char *hostport, const char *name, int timeout_ms, int tries,
                        struct cx_space_pipe_info *out);

#ifdef __cplusplus
}
#endif
#endif
