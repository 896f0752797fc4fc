/* The protocol between an application and its sidecar (confluxd --role=sidecar).
 *
 * Control: a Unix SOCK_SEQPACKET socket (one message per request and reply). The first
 * message on a connection is CX_SC_HELLO (a0 = session id, a1 = CX_SC_CONN_CALLS or
 * CX_SC_CONN_EVENTS, a2 = the application's pid); the reply carries, as SCM_RIGHTS, a memfd
 * holding two rings (cx_sc_ring.h): ring 0 written by the application, ring 1 by the
 * sidecar, each of capacity a0 of the reply. Every connection of one application shares its
 * session id; when the last one closes, the sidecar closes what the session left open.
 *
 * Calls connections carry one call at a time, in the call slot after the two rings
 * (struct cx_sc_slot): the application writes the request into the slot and rings the
 * request bell; the sidecar answers into the slot and rings the reply bell (cx_sc_bell.h:
 * each side polls for a while, then sleeps on the socket, and a wake-up byte is sent only
 * to a sleeper), so a call made while the sidecar is polling costs no system call. A request
 * whose `bulk` is 1 has its payload (a segment, an event, a format description) in ring 0;
 * a reply whose `bulk` is 1 has its payload (a segment read, a description) in ring 1,
 * released by the application before its next request. After the hello the socket carries
 * only wake-up bytes and, by closing, the end of the connection. The events connection
 * carries no requests after the hello: the
 * sidecar appends CX_SC_REC_EVENT records for the session's sinks to its ring 1 and sends a
 * one-byte wake-up message when the application waits (cx_sc_ring_prepare_wait); the other
 * way, the application appends CX_SC_REC_SUBMIT records to its ring 0.
 *
 * Version: CX_SC_PROTO_VERSION in the hello (a3); a sidecar refuses another with EPROTO.
 */
#ifndef CX_SC_PROTO_H
#define CX_SC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "sidecar/cx_sc_bell.h"

#define CX_SC_PROTO_VERSION 2
#define CX_SC_STR_MAX 4096 /* longest string in a request or a reply */

enum cx_sc_conn { CX_SC_CONN_CALLS = 0, CX_SC_CONN_EVENTS = 1 };

/* The operations: X(NAME, code, metrics label) -- one row each; the enum (CX_SC_<NAME>) and
 * the label table (cx_sc_op_names) are made from it. Each row's comment gives the request's
 * arguments (a0.. as the call's, s = name or address) -> the reply's. */
#define CX_SC_OPS(X)                                                                          \
    X(HELLO, 1, "hello")                      /* see above */                                \
    X(FORMAT_PUT, 2, "format_put")            /* bulk: a description -> a0 token */          \
    X(FORMAT_GET, 3, "format_get")            /* a0 token -> bulk description */             \
    /* pipes (../pipe/cx_pipe.h) */                                                          \
    X(SPACE_OPEN, 10, "space_open")           /* s addr, a0 timeout_ms, a1 window -> rc */   \
    X(SPACE_CLOSE, 11, "space_close")         /* a0 space */                                 \
    X(PI_CREATE, 12, "pi_create")             /* s name, a0 space, a1 mode -> rc d */        \
    X(PI_ATTACH, 13, "pi_attach")             /* s name, a0 space -> rc d */                 \
    X(PI_WRITE, 14, "pi_write")               /* a0 d, a1 len, a2 token; bulk -> rc */       \
    X(PI_READ, 15, "pi_read")                 /* a0 d, a1 len, a2 token, a3 timeout -> bulk */ \
    X(PI_CLOSE, 16, "pi_close")                                                              \
    X(PI_DETACH, 17, "pi_detach")                                                            \
    X(PI_SEEK, 18, "pi_seek")                 /* a0 d, a1 segment */                         \
    X(PI_TELL, 19, "pi_tell")                                                                \
    X(PI_UNLINK, 20, "pi_unlink")             /* s name, a0 space */                         \
    X(PI_STATS, 21, "pi_reader_stats")        /* a0 d -> a0..a3, rc = reconnects */          \
    X(PI_ABANDON, 22, "pi_abandon")           /* a0 d */                                     \
    X(PI_WRITER_STATS, 23, "pi_writer_stats") /* a0 d -> bulk struct pi_writer_stats */      \
    X(PI_LINK, 24, "pi_link")                 /* a0 d -> s the direct link's transport */    \
    X(PI_ATTACH_NAMED, 25, "pi_attach_named") /* s name+cursor, a0 space, a1 name's length */ \
    X(PI_ACK, 26, "pi_ack")                   /* a0 d */                                     \
    X(PI_ATTACH_GROUP, 27, "pi_attach_group") /* s name+group, a0 space, a1 name's length */ \
    X(PI_SHUTDOWN, 28, "pi_shutdown")         /* the application's pipes and spaces closed */ \
    X(PI_MIGRATE_OUT, 29, "pi_migrate_out")   /* a0 d, a1 hold_ms, a2 cap -> bulk blob */    \
    /* channels (../channel/cx_chan.h); handles are the sidecar's */                         \
    X(CTX, 30, "chan_ctx")                    /* -> s the sidecar's channel address */       \
    X(CHAN_CREATE, 31, "chan_create")         /* a0 token, a1 mode, a2 queue -> a0, s id */  \
    X(CHAN_OPEN, 32, "chan_open")             /* s id, a0 timeout -> a0, a1 token, a2 mode */ \
    X(CHAN_CLOSE, 33, "chan_close")           /* a0 handle */                                \
    X(SOURCE, 34, "chan_source")              /* a0 channel, a1 token -> a0 source */        \
    X(SUBMIT, 35, "chan_submit")              /* a0 source, a1 timeout (-2 no wait); bulk */ \
    X(SOURCE_CLOSE, 36, "chan_source_close")                                                 \
    X(SINK, 37, "chan_sink")                  /* a0 chan, a1 token, a2 proj, s filter -> a0 */ \
    X(SINK_CLOSE, 38, "chan_sink_close")                                                     \
    X(SINK_ERROR, 39, "chan_sink_error")      /* a0 sink -> s text */                        \
    X(CHAN_STATS, 40, "chan_stats")           /* a0 channel -> bulk struct cx_chan_stats */  \
    X(WAIT_MEMBERS, 41, "chan_wait_members")  /* a0 chan, a1 sources, a2 sinks, a3 timeout */ \
    X(CTX_LINK, 42, "chan_ctx_link")          /* s a peer's address -> s the link to it */   \
    X(CTX_FABRIC, 43, "chan_ctx_fabric")      /* a0 0: the fabric, 1: its ucx address -> s */ \
    /* pipes, continued (codes 10..29 are taken; the last row's code sets CX_SC_OP_MAX) */   \
    X(PI_MIGRATE_IN, 50, "pi_migrate_in")     /* a0 space; bulk blob -> rc d */

#define CX_SC_OP_ENUM(name, code, label) CX_SC_##name = code,
enum cx_sc_op { CX_SC_OPS(CX_SC_OP_ENUM) CX_SC_OP_MAX };
#undef CX_SC_OP_ENUM

/* Metrics labels by op code (NULL where no op has that code). */
extern const char *const cx_sc_op_names[CX_SC_OP_MAX];


/* Records: DATA (a request's or reply's payload), EVENT (to a sink, ring 1 of the events
 * connection), SUBMIT (ring 0 of the events connection: a uint64 source handle then the
 * encoded event, no reply: best-effort submits, which cannot be refused, and reliable ones,
 * which the sidecar submits waiting for room, so the ring extends the channel's queue and a
 * full ring holds the application back; the application wakes the sidecar with a one-byte
 * message when it waits, and waits for the ring to drain before closing a source or a
 * channel), SUBMIT_ERR (ring 1 of the events connection: struct cx_sc_submit_err, a
 * streamed submit the sidecar could not make; the source's next call returns it). */
enum cx_sc_rec {
    CX_SC_REC_DATA = 1,
    CX_SC_REC_EVENT = 2,
    CX_SC_REC_SUBMIT = 3,
    CX_SC_REC_SUBMIT_ERR = 4,
    CX_SC_REC_WRITE = 5,     /* ring 0, events connection: struct cx_sc_write, then the segment */
    CX_SC_REC_WRITE_ERR = 6, /* ring 1: struct cx_sc_submit_err for a streamed pi_write */
};

/* A pi_write streamed like a submit (no reply): the writer's descriptor, the length as
 * pi_write's (records when typed) and the format token (0: raw). The sidecar writes it in
 * order with the submits; a failure comes back as CX_SC_REC_WRITE_ERR and the writer's next
 * call returns it (as the embedded library reports a refused segment). */
struct cx_sc_write {
    int64_t d;
    int64_t len;
    uint64_t token;
};

struct cx_sc_submit_err {
    int64_t source; /* the sidecar's source handle */
    int64_t rc;     /* a negative errno */
};

struct cx_sc_req {
    uint32_t op;
    uint32_t bulk;
    int64_t a[4];
    uint32_t slen; /* bytes of s (no NUL) */
    char s[CX_SC_STR_MAX];
};

struct cx_sc_rep {
    int64_t rc;    /* >= 0, or -errno */
    uint32_t bulk;
    uint32_t slen; /* the error message, or a string result */
    int64_t a[4];
    char s[CX_SC_STR_MAX];
};

#define CX_SC_REQ_HDR (offsetof(struct cx_sc_req, s))
#define CX_SC_REP_HDR (offsetof(struct cx_sc_rep, s))

/* The call slot of a connection's region, after its two rings: the one call in flight.
 * Each side copies what it reads out of the slot before checking it (the other process can
 * write the slot at any time). */
struct cx_sc_slot {
    struct cx_sc_bell req_bell; /* rung by the application: its request's number */
    struct cx_sc_bell rep_bell; /* rung by the sidecar: the number of the request answered */
    struct cx_sc_req req;
    struct cx_sc_rep rep;
};

#define CX_SC_SLOT_SPAN ((sizeof(struct cx_sc_slot) + 4095) & ~(size_t)4095)

/* An event for a sink, in ring 1 of the events connection: this header, the wire form
 * (wire_len bytes, cx_codec.h) then the source's address (from_len bytes). */
struct cx_sc_event {
    uint64_t sink;  /* the sidecar's sink handle */
    uint64_t seq;
    uint64_t token; /* format of the wire form */
    uint32_t wire_len;
    uint32_t from_len;
};

#endif
