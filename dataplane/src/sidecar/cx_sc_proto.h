/* The protocol between an application and its sidecar (confluxd --role=sidecar).
 *
 * Control: a Unix SOCK_SEQPACKET socket (one message per request and reply). The first
 * message on a connection is CX_SC_HELLO (a0 = session id, a1 = CX_SC_CONN_CALLS or
 * CX_SC_CONN_EVENTS, a2 = the application's pid); the reply carries, as SCM_RIGHTS, a memfd
 * holding two rings (cx_sc_ring.h): ring 0 written by the application, ring 1 by the
 * sidecar, each of capacity a0 of the reply. Every connection of one application shares its
 * session id; when the last one closes, the sidecar closes what the session left open.
 *
 * Calls connections carry one request at a time: a request whose `bulk` is 1 has its
 * payload (a segment, an event, a format description) in ring 0; a reply whose `bulk` is 1
 * has its payload (a segment read, a description) in ring 1, released by the application
 * before its next request. The events connection carries no requests after the hello: the
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

#define CX_SC_PROTO_VERSION 1
#define CX_SC_STR_MAX 4096 /* longest string in a request or a reply */

enum cx_sc_conn { CX_SC_CONN_CALLS = 0, CX_SC_CONN_EVENTS = 1 };

enum cx_sc_op {
    CX_SC_HELLO = 1,
    CX_SC_FORMAT_PUT = 2,   /* bulk: a description; -> a0 token */
    CX_SC_FORMAT_GET = 3,   /* a0 token -> bulk description */
    /* pipes (../pipe/cx_pipe.h); a0.. as the call's arguments, s = name or address */
    CX_SC_SPACE_OPEN = 10,  /* s addr, a0 timeout_ms (0 = default), a1 window -> rc space */
    CX_SC_SPACE_CLOSE = 11, /* a0 space */
    CX_SC_PI_CREATE = 12,   /* s name, a0 space, a1 mode -> rc descriptor */
    CX_SC_PI_ATTACH = 13,   /* s name, a0 space -> rc descriptor */
    CX_SC_PI_WRITE = 14,    /* a0 d, a1 len, a2 token (0 raw); bulk segment -> rc */
    CX_SC_PI_READ = 15,     /* a0 d, a1 len, a2 token (0 raw), a3 timeout (-1) -> rc, bulk */
    CX_SC_PI_CLOSE = 16,
    CX_SC_PI_DETACH = 17,
    CX_SC_PI_SEEK = 18,     /* a0 d, a1 segment */
    CX_SC_PI_TELL = 19,
    CX_SC_PI_UNLINK = 20,   /* s name, a0 space */
    CX_SC_PI_STATS = 21,    /* a0 d -> a0..a3 from_space, from_writer, duplicates, spilled;
                             * rc = reconnects */
    CX_SC_PI_ABANDON = 22,  /* a0 d */
    /* channels (../channel/cx_chan.h); handles are the sidecar's */
    CX_SC_CTX = 30,         /* -> s the sidecar's channel address */
    CX_SC_CHAN_CREATE = 31, /* a0 format token (0 untyped), a1 mode, a2 queue -> a0 handle,
                             * s id */
    CX_SC_CHAN_OPEN = 32,   /* s id, a0 timeout -> a0 handle, a1 format token, a2 mode, s id */
    CX_SC_CHAN_CLOSE = 33,  /* a0 handle */
    CX_SC_SOURCE = 34,      /* a0 channel, a1 token -> a0 source handle */
    CX_SC_SUBMIT = 35,      /* a0 source, a1 timeout (-2 = no wait), bulk: the event encoded */
    CX_SC_SOURCE_CLOSE = 36,
    CX_SC_SINK = 37,        /* a0 channel, a1 token, a2 projection token, s filter -> a0 sink */
    CX_SC_SINK_CLOSE = 38,
    CX_SC_SINK_ERROR = 39,  /* a0 sink -> s text */
    CX_SC_CHAN_STATS = 40,  /* a0 channel -> bulk struct cx_chan_stats */
    CX_SC_WAIT_MEMBERS = 41,/* a0 channel, a1 sources, a2 sinks, a3 timeout */
    CX_SC_OP_MAX = 42,
};

/* Records: DATA (a request's or reply's payload), EVENT (to a sink, ring 1 of the events
 * connection), SUBMIT (ring 0 of the events connection: a uint64 source handle then the
 * encoded event; submits to best-effort channels, which cannot be refused, go this way
 * without a reply; the application wakes the sidecar with a one-byte message when it waits,
 * and waits for the ring to drain before closing a source or a channel). */
enum cx_sc_rec { CX_SC_REC_DATA = 1, CX_SC_REC_EVENT = 2, CX_SC_REC_SUBMIT = 3 };

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
