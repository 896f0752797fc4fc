/* The space protocol: what clients and the space server (confluxd --role=space) say to each
 * other (seed pi-channels.txt, Figure 6: get/put requests, segments, forwarding).
 *
 * Every message is one frame (common/cx_frame.h) and its payload:
 *
 *   requests   type LOOKUP (name table, pipes) or FORMAT (format service); seq = request id
 *              chosen by the client; payload = op byte + op fields (below).
 *   replies    same type, flag REPLY, same seq; payload = op, status (0 or a negative
 *              errno), the error text when status < 0, then the op's results.
 *   pushes     type LOOKUP, flag REPLY, seq 0, channel = the writer's handle: unsolicited
 *              news from the server for a pipe this link writes: READER_JOINED (a reader
 *              attached), READER_HELD (a reader is migrating: stop sending to its address),
 *              READER_MOVED (the migrated reader is back at a new address).
 *   segments   type DATA; channel = a handle the client chose in PUT or READ; seq =
 *              segment id; format = the segment's format token. Writer -> server appends;
 *              server -> reader streams. Flag END (empty payload) ends the pipe.
 *   acks       type ACK, flag ACK, channel = the writer's handle, ack = highest segment id
 *              the space holds (per its fsync policy). Cumulative.
 *
 * Field encoding, little-endian: u8/u16/u32/u64; str = u16 length + bytes (no NUL);
 * blob = u32 length + bytes. Requests:
 *
 *   LOOKUP   str name                              -> pipe
 *   GET      str name, u64 format, str reader_addr -> pipe (binds the name if unbound;
 *                                                    registers reader_addr if not empty)
 *   PUT      u8 mode, u32 handle, str name, u64 format, str writer_addr
 *                                                  -> pipe + destinations (known readers)
 *   READ     u32 handle, str name, u64 from_id     -> pipe; then segments on handle
 *   STOP     u32 handle                            -> nothing (stops a READ or drops a PUT)
 *   UNLINK   str name                              -> pipe (what it was)
 *   LIST     -                                     -> u32 n, n x (str name, u64 id, u64 format)
 *   FMT_PUT  blob description                      -> u64 token
 *   FMT_GET  u64 token                             -> blob description
 *   STATS    str name                              -> pipe (as LOOKUP) + stats
 *   MIGRATE  u8 kind, u32 handle, str name, str addr, u32 hold_ms
 *                                                  -> pipe + u64 token
 *   RESUME   u8 kind, u32 handle, str name, str addr, u64 pipe_id, u64 token
 *                                                  -> pipe (kind writer: + the readers)
 *   CURSOR_SET   str name, u64 pipe_id, str cursor, u64 pos
 *                                                  -> nothing (the cursor stored; pipe_id 0
 *                                                     accepts any pipe, else -ENOENT when
 *                                                     the name names another pipe now)
 *   CURSOR_GET   str name, str cursor             -> u64 pos (-ENOENT: never stored)
 *   CURSOR_LIST  str name                         -> u32 n, n x (str cursor, u64 pos)
 *   GROUP_JOIN   str name, str group, u32 ack_wait_ms (0: 30 s)
 *                                                 -> u64 member, u64 floor
 *   GROUP_NEXT   str name, str group, u64 member  -> u64 pos, u32 deliveries, u64 format,
 *                                                    blob segment
 *   GROUP_ACK    str name, str group, u64 member, blob n x u64 pos (n <= 1024)
 *                                                 -> nothing
 *   GROUP_LEAVE  str name, str group, u64 member  -> nothing
 *   GROUP_LIST   str name                         -> u32 n, n x (str group, u64 floor,
 *                                                    u64 next, u16 m, m x (u64 member,
 *                                                    u32 in-flight))
 *
 *   pushes:  READER_JOINED pipe (addrs[0] = the reader); READER_HELD pipe (addrs[0] = the
 *            migrating reader's address) + u32 hold_ms; READER_MOVED pipe (addrs[0] = the
 *            old address, addrs[1] = the new one)
 *
 *   pipe = u64 pipe_id, u64 format, u64 first_id, u64 last_id, u8 ended, u8 writer_open,
 *          u16 n, n x str address
 *   stats = u32 readers, u64 bytes, u64 segments, u16 nlinks, nlinks x (str transport,
 *           u32 count)
 *
 * STATS is what the server knows of a pipe at the moment of the request (it opens the
 * pipe's log if it was not open yet, as GET does):
 *   readers   READ streams open on the pipe (pi_attach opens one per reader, as does
 *             `conflux cat`); a stream that reached the END stays counted until its reader
 *             stops it or disconnects.
 *   bytes     bytes of the pipe's log on disk, 40-byte record headers included, after
 *             retention (cx_seg_stat.bytes).
 *   segments  segments stored, after retention (cx_seg_stat.segments).
 *   links     links in use, per transport (the scheme of an address: "tcp", "shm", ...),
 *             at most CX_SP_MAX_LINKS transports, each counted once per:
 *               - the writer's connection to the server and each READ stream (the
 *                 transport the server listens on);
 *               - while a writer is open, each registered reader address (GET with an
 *                 address) not held by a migration: the direct writer-to-reader link the
 *                 writer was told to open.
 *             An address without "://" counts as transport "unknown".
 * A server older than STATS answers -EPROTO "unknown space request op 11".
 *
 * Cursors (pi_attach_named, pi_ack): a named reader's acknowledged position, pos = the next
 * segment it gets (0-based, as pi_tell), stored beside the pipe's log (space/cx_segcursor.h)
 * so it survives a restart of the space; a cursor name is 1..64 bytes of [A-Za-z0-9._-]
 * starting with a letter or digit (-EINVAL with the rule that failed otherwise). The pipe
 * is not bound by these requests (-ENOENT when the name is unbound).
 *
 * Reader groups (pi_attach_group; bookkeeping in space/cx_spgroup.h): a member belongs to
 * the connection that joined it (its closing removes the member). GROUP_NEXT leases the
 * next position to the member and carries the segment: -EAGAIN nothing to hand out now,
 * -EPIPE the pipe ended and nothing is left, -ENOBUFS the member holds the most leases,
 * -ESRCH no such member (left, connection closed, ack deadline passed). GROUP_ACK is all
 * or none (-ENOENT naming a position the member does not hold); when the floor it moved
 * could not be stored, the reply is the disk's error although the acknowledgement holds in
 * the server's memory (a retry gets -ENOENT; a restart hands those out again). The floor (every position
 * below it acknowledged) is stored as cursors are (cx_segcursor.h) whenever it moves, so a
 * group made again after a restart starts handing out from it. Group names follow cursor
 * names' rules. GROUP_LIST includes groups only stored (no members yet since a restart).
 *
 * Migration (seed Figure 7, the hold list): kind is 1 (a reader) or 2 (a writer).
 *   MIGRATE reader: addr = the address the reader's process registered (GET). The space
 *             keeps that registration "held" for hold_ms under a new token: it is not given
 *             to writers that open the pipe, re-registering it changes nothing, and the
 *             writer (if open) gets READER_HELD, so it drains and closes its direct link and
 *             does not connect to that address again while the hold lasts.
 *   MIGRATE writer: handle = the PUT handle of this connection (-EBADF otherwise). The
 *             space ends the handle but keeps the pipe's writer slot for hold_ms under the
 *             token: a PUT meanwhile gets -EBUSY.
 *   RESUME reader: the new side, at addr. A live hold with the token is replaced by addr
 *             (the writer gets READER_MOVED old -> new); otherwise (expired, unknown after a
 *             restart of the space) addr is registered as GET does (READER_JOINED).
 *   RESUME writer: opens the pipe for writing under handle, as PUT APPEND does; a live hold
 *             with the token lets it in, a hold with another token is -EBUSY.
 *   Both refuse a pipe_id that is not the name's pipe any more (-ENOENT: unlinked) and
 *   never bind a name. Holds live in the server's memory: they end at their deadline,
 *   checked whenever the pipe is used, and with a restart of the space.
 *
 * Decoders check every length against the buffer and return -EPROTO with a message on a
 * malformed payload; decoded strings point into the payload (not NUL-terminated: use the
 * lengths) and are valid while it is.
 */
#ifndef CX_SPACE_PROTO_H
#define CX_SPACE_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cx_space_op {
    CX_SP_LOOKUP = 1,
    CX_SP_GET = 2,
    CX_SP_PUT = 3,
    CX_SP_READ = 4,
    CX_SP_STOP = 5,
    CX_SP_UNLINK = 6,
    CX_SP_LIST = 7,
    CX_SP_FMT_PUT = 8,
    CX_SP_FMT_GET = 9,
    CX_SP_READER_JOINED = 10, /* push */
    CX_SP_STATS = 11,
    CX_SP_MIGRATE = 12,
    CX_SP_READER_HELD = 13, /* push */
    CX_SP_RESUME = 14,
    CX_SP_READER_MOVED = 15, /* push */
    CX_SP_CURSOR_SET = 16,
    CX_SP_CURSOR_GET = 17,
    CX_SP_CURSOR_LIST = 18,
    CX_SP_GROUP_JOIN = 19,
    CX_SP_GROUP_NEXT = 20,
    CX_SP_GROUP_ACK = 21,
    CX_SP_GROUP_LEAVE = 22,
    CX_SP_GROUP_LIST = 23,
};

/* Most positions one GROUP_ACK carries. */
#define CX_SP_GROUP_ACK_MAX 1024

/* MIGRATE / RESUME kinds. */
enum cx_space_migrate_kind { CX_SP_MIG_READER = 1, CX_SP_MIG_WRITER = 2 };

/* pi_create modes (seed: CREATE for new pipes, APPEND to resume writing). */
enum cx_space_mode { CX_SP_CREATE = 1, CX_SP_APPEND = 2 };

/* Most addresses one pipe reply lists, and the longest address. */
#define CX_SP_MAX_ADDRS 16
#define CX_SP_ADDR_MAX 127
/* Most transports a STATS reply lists. */
#define CX_SP_MAX_LINKS 8

struct cx_sp_str {
    const char *p;
    uint16_t len;
};

struct cx_sp_request {
    uint8_t op;
    uint8_t mode;       /* PUT; MIGRATE and RESUME: the kind */
    uint32_t handle;    /* PUT, READ, STOP, MIGRATE, RESUME */
    struct cx_sp_str name;
    struct cx_sp_str addr; /* GET: reader, PUT: writer */
    uint64_t format;    /* GET, PUT */
    uint64_t from_id;   /* READ; CURSOR_SET: the position */
    struct cx_sp_str cursor; /* CURSOR_*; GROUP_*: the group */
    uint64_t token;     /* FMT_GET, RESUME; GROUP_NEXT/ACK/LEAVE: the member */
    uint64_t pipe_id;   /* RESUME, CURSOR_SET */
    uint32_t hold_ms;   /* MIGRATE; GROUP_JOIN: ack_wait_ms */
    const uint8_t *blob; /* FMT_PUT; GROUP_ACK: n x u64 positions */
    uint32_t blob_len;
};

struct cx_sp_pipe {
    uint64_t pipe_id, format, first_id, last_id;
    uint8_t ended, writer_open;
    uint16_t naddrs;
    struct cx_sp_str addrs[CX_SP_MAX_ADDRS];
};

/* STATS results beyond the pipe (see above). */
struct cx_sp_stats {
    uint32_t readers;
    uint64_t bytes, segments;
    uint16_t nlinks;
    struct {
        struct cx_sp_str transport;
        uint32_t count;
    } links[CX_SP_MAX_LINKS];
};

struct cx_sp_reply {
    uint8_t op;
    int32_t status;
    struct cx_sp_str error; /* status < 0 */
    struct cx_sp_pipe pipe; /* LOOKUP GET PUT READ UNLINK STATS MIGRATE RESUME, pushes */
    struct cx_sp_stats stats; /* STATS */
    uint64_t token;         /* FMT_PUT, MIGRATE; CURSOR_GET: the position */
    uint32_t hold_ms;       /* READER_HELD */
    const uint8_t *blob;    /* FMT_GET description; LIST, CURSOR_LIST: the raw entries */
    uint32_t blob_len;
    uint32_t count;         /* LIST, CURSOR_LIST, GROUP_LIST; GROUP_NEXT: deliveries */
    uint64_t pos;           /* GROUP_JOIN: the floor; GROUP_NEXT: the position */
    uint64_t format;        /* GROUP_NEXT: the segment's format token (blob: its bytes) */
};

/* A growable output buffer for encoders (heap, or a caller's fixed array with cap). */
struct cx_sp_buf {
    uint8_t *p;
    size_t len, cap;
    int fixed; /* 1: p is the caller's; growing fails with -EMSGSIZE */
    int err;   /* first error, sticky */
};

void cx_sp_buf_u8(struct cx_sp_buf *b, uint8_t v);
void cx_sp_buf_u16(struct cx_sp_buf *b, uint16_t v);
void cx_sp_buf_u32(struct cx_sp_buf *b, uint32_t v);
void cx_sp_buf_u64(struct cx_sp_buf *b, uint64_t v);
void cx_sp_buf_str(struct cx_sp_buf *b, const char *s, size_t len);
void cx_sp_buf_blob(struct cx_sp_buf *b, const void *p, uint32_t len);
void cx_sp_buf_free(struct cx_sp_buf *b);

/* Encodes a request (fields by op, as above). Returns 0 or b->err (-EINVAL for a string
 * over 65535 bytes, -ENOMEM, -EMSGSIZE). */
int cx_sp_encode_request(struct cx_sp_buf *b, const struct cx_sp_request *r);
/* Encodes the start of a reply: op, status and, when status < 0, the error text. */
int cx_sp_encode_reply_head(struct cx_sp_buf *b, uint8_t op, int32_t status, const char *error);
/* Encodes a pipe result (after the head). */
int cx_sp_encode_pipe(struct cx_sp_buf *b, const struct cx_sp_pipe *p);
/* Encodes STATS results (after the pipe). -EINVAL when nlinks > CX_SP_MAX_LINKS. */
int cx_sp_encode_stats(struct cx_sp_buf *b, const struct cx_sp_stats *st);

/* Parse a request or a reply payload. 0, or -EPROTO with cx_errmsg naming the problem. */
int cx_sp_decode_request(const uint8_t *in, size_t len, struct cx_sp_request *r);
int cx_sp_decode_reply(const uint8_t *in, size_t len, struct cx_sp_reply *r);

/* Walks LIST entries of a decoded reply: call with *off = 0, returns 1 and fills the entry
 * while there is one, 0 at the end, -EPROTO when malformed. */
int cx_sp_list_next(const struct cx_sp_reply *r, size_t *off, struct cx_sp_str *name,
                    uint64_t *pipe_id, uint64_t *format);

/* Walks CURSOR_LIST entries as cx_sp_list_next walks LIST's. */
int cx_sp_cursor_next(const struct cx_sp_reply *r, size_t *off, struct cx_sp_str *cursor, uint64_t *pos);

/* Walks GROUP_LIST entries: the members' ids and in-flight counts go into member[] and
 * inflight[] (up to cap; *nmember says how many the entry has). */
int cx_sp_group_next(const struct cx_sp_reply *r, size_t *off, struct cx_sp_str *group, uint64_t *floor,
                     uint64_t *next, uint16_t *nmember, uint64_t *member, uint32_t *inflight, size_t cap);

/* Copies a protocol string into a NUL-terminated buffer; -ENAMETOOLONG if it does not fit. */
int cx_sp_str_copy(struct cx_sp_str s, char *out, size_t cap);

const char *cx_sp_op_name(uint8_t op);

#ifdef __cplusplus
}
#endif
#endif
