/* Event channels (seed echo-event-delivery.txt section 2; ARCHITECTURE.md).
 *
 * A channel is created once by some process, which becomes its *contact point*; its id
 * string carries the contact's address and the channel's number there
 * ("cx1:tcp://10.0.0.5:4711/17"). Any other process opens it with that id. Sources submit
 * events; every sink subscribed gets them. The contact only keeps the membership: events
 * go straight from each source to each sink, never through the contact, and all channels
 * between two processes share one link (the multiplexer, frame header `channel` = a tag
 * chosen by the receiving process).
 *
 *     struct cx_chan_ctx *ctx;   cx_chan_ctx_create(NULL, &ctx);      // one per process
 *     struct cx_chan *ch;        cx_chan_create(ctx, &(struct cx_chan_opts){.format = F}, &ch);
 *     send cx_chan_id(ch) to the other processes, which call cx_chan_open(ctx, id, 5000, &ch);
 *     struct cx_chan_source *s;  cx_chan_source(ch, F, &s);   cx_chan_submit(s, &event);
 *     struct cx_chan_sink *k;    cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = G},
 *                                             on_event, arg, &k);
 *
 * Typed channels: a channel may declare a format; a source's and a sink's formats must
 * convert to and from it, matched by field name (src/format): extra fields are ignored,
 * missing ones become their declared default or zero, numbers convert between widths and
 * kinds; only fields of kinds that cannot convert (a string and a number, a struct and a
 * scalar) are refused. Events travel in the source's native layout with its format token;
 * the sink converts once per format pair. An untyped sink (no format) gets the wire form and
 * its format for reflection (cx_reflect.h).
 *
 * Derived sinks: a sink may install a filter expression (and a projection to a smaller
 * format) that every source runs before sending, so filtered-out events never cross the
 * network (src/filter; see cx_chan_derived.c).
 *
 * Delivery modes (per channel, chosen by the creator): CX_CHAN_BEST_EFFORT drops the oldest
 * queued event when a slow sink's queue is full (counted in stats.dropped); CX_CHAN_RELIABLE
 * refuses the submit (-EAGAIN) or waits (cx_chan_submit_wait) until the sink drains. Queues
 * are per (source process, sink) and bounded (queue_limit events, default 1024).
 *
 * Membership: sources and sinks join and leave at any time. A process whose link breaks
 * (killed: -ECONNRESET from the driver) is removed from every channel with its members;
 * sources keep going, and a reliable source waiting on it is released.
 *
 * Threads: every sink handler runs on the runtime's progress thread (one per process),
 * for remote and local events alike. Calls may be made from any thread and from handlers,
 * except those that wait for an answer from another process (cx_chan_open, adding a source
 * or sink to a channel opened elsewhere, cx_chan_wait_members): from a handler they fail
 * with -EDEADLK. cx_chan_ctx_destroy must not be called from a handler.
 *
 * Errors: 0 or a negative errno with cx_errmsg() set (src/common/cx_error.h).
 */
#ifndef CX_CHAN_H
#define CX_CHAN_H

#include "format/cx_format.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_chan_ctx;
struct cx_chan;
struct cx_chan_source;
struct cx_chan_sink;

/* The runtime of one process. `listen` is the address of its listener (default
 * "tcp://0.0.0.0:0": every interface, any free port). `advertise` is the address other
 * processes dial to reach it and the one channel ids carry; default: the listen address,
 * with 0.0.0.0 replaced by this host's first non-loopback IPv4 address (127.0.0.1 when it
 * has none).
 *
 * Links: two processes on one host (same boot and network namespace) are joined by shared
 * memory (src/transport/shm), others by the advertised address's transport (tcp). Each
 * runtime also listens on an abstract Unix socket named after its host identity and its
 * advertised address, so a process that dials an address first tries that name: it
 * answers only on the same host and namespace, and the link falls back to tcp when it does
 * not. `tcp_only` (or the environment variable CONFLUX_CHAN_SHM=0) turns this off.
 * `listen` may name any driver ("ucx://…", "tls://…", "dpdk://<port IP>:0": the process's
 * DPDK port, transport/dpdk/cx_dpdk.h); every link goes through the stack builder
 * (stack/cx_stack.h), so a datagram driver gets reliability and fragmentation (and the
 * event numbers ride in the payload there, as the reliability filter owns the header's).
 *
 * `fabric` names the fast-link domain this process is in (NULL or "" = none; else 1-253
 * characters of [A-Za-z0-9._-], surrounding blanks ignored). A runtime in a fabric whose
 * advertised address is tcp:// also listens on ucx:// on the advertised IP (any free port).
 * When it dials another process (not on this host) it asks it over the new tcp link, before
 * its HELLO, for its fabric and ucx address; in the same fabric the link becomes ucx (the
 * tcp link is closed), otherwise, or when the ucx connect fails or no answer comes within
 * 2 s, the tcp link is kept. Ids and membership still carry the tcp address.
 * cx_chan_ctx_link tells which link joins this process to another.
 *
 * `linger_ms`: how long closing a reliable channel's source (cx_chan_source_close, the
 * last cx_chan_close of a channel with sources, cx_chan_ctx_destroy) may wait for its
 * events to be delivered (see cx_chan_ctx_destroy). 0: the environment variable
 * CONFLUX_CHAN_LINGER_MS if set (0..3600000; other values warn and take the default), else
 * CX_CHAN_LINGER_DEFAULT_MS; negative (or a variable <= 0): no wait, queued events are
 * dropped at close (the behaviour before the linger). */
#define CX_CHAN_LINGER_DEFAULT_MS 10000
struct cx_chan_ctx_opts {
    const char *listen;
    const char *advertise;
    int tcp_only;
    const char *fabric;
    int linger_ms;
};

/* Creates the runtime: listener, progress engine and thread. 0, or -errno (bad address,
 * port in use, -EINVAL for a bad fabric name). Create it after fork(), never before. */
int cx_chan_ctx_create(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out);
/* The advertised address ("tcp://10.0.0.5:4711"). */
const char *cx_chan_ctx_addr(const struct cx_chan_ctx *ctx);
/* The fabric this runtime is in ("" = none) and its ucx listener's address ("" = none). */
const char *cx_chan_ctx_fabric(const struct cx_chan_ctx *ctx);
const char *cx_chan_ctx_fabric_addr(const struct cx_chan_ctx *ctx);
/* Writes into out[cap] the network driver of the link joining this process to the process
 * advertising addr ("shm", "tcp", ...). 0, or -ENOENT when there is no live link to it. */
int cx_chan_ctx_link(struct cx_chan_ctx *ctx, const char *addr, char *out, size_t cap);
/* Runs the runtime's progress on the calling thread for up to timeout_us (-1: no limit):
 * receives, sends what waits, runs sink handlers here; returns as soon as something was
 * done or the runtime was woken. For a thread that waits for events (a handler sets a
 * flag, the thread loops `while (!flag) cx_chan_ctx_drive(ctx, 1000);`): the events reach
 * it without a hand-off from the progress thread, which stands aside while a thread drives
 * and for a millisecond after (work queued by other threads ends that at once). Returns
 * > 0 work done, 0 nothing (timeout or woken: check again), -EDEADLK from a handler. */
int cx_chan_ctx_drive(struct cx_chan_ctx *ctx, long timeout_us);
/* Closes every channel (telling the contacts), flushes the links for up to one second,
 * stops the thread and frees everything. NULL is allowed.
 *
 * Linger: first, every reliable channel with a source in this process delivers what its
 * sources submitted: the events waiting in sink queues leave, and each sink's process
 * (the sinks that were members) confirms it handed every event sent before to its
 * handlers. This waits at most the runtime's linger (cx_chan_ctx_opts.linger_ms, default
 * 10 s); a sink whose process dies or whose link breaks meanwhile ends its share of the
 * wait at once (as soon as this runtime sees the link break). Best-effort channels do not
 * wait. The outcome, as this call returns nothing: cx_errcode() is 0 when everything was
 * delivered; otherwise ETIMEDOUT (the linger ran out) or ECONNRESET (sinks went away) with
 * cx_errmsg() saying how many events were not delivered (queued and never sent; sent but
 * not confirmed) and naming the first sink, and one line per such sink on stderr
 * ("conflux channel <addr>: linger of <ms> ms: not delivered: sink <addr>/<tag> of
 * <channel id>: ..."). */
void cx_chan_ctx_destroy(struct cx_chan_ctx *ctx);

enum cx_chan_mode {
    CX_CHAN_BEST_EFFORT = 0, /* drop the oldest event of a full sink queue */
    CX_CHAN_RELIABLE = 1,    /* back-pressure: submit waits or fails with -EAGAIN */
};

#define CX_CHAN_QUEUE_DEFAULT 1024u
#define CX_CHAN_QUEUE_MAX (1u << 20)

struct cx_chan_opts {
    const struct cx_format *format; /* declared format (registered), NULL = untyped */
    enum cx_chan_mode mode;
    unsigned queue_limit;           /* events per sink queue; 0 = CX_CHAN_QUEUE_DEFAULT */
};

/* Creates a channel whose contact point is this process. o may be NULL (untyped,
 * best-effort, default queue). */
int cx_chan_create(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out);

/* Opens a channel by id, waiting up to timeout_ms for the contact's answer. Opening a
 * channel already open in this process returns the same handle (closed as many times as
 * opened). -EINVAL for a malformed id, -ECONNREFUSED when the contact is not there,
 * -ENOENT when it has no such channel, -ETIMEDOUT. */
int cx_chan_open(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out);

/* The id to give to other processes ("cx1:<contact address>/<number>"). */
const char *cx_chan_id(const struct cx_chan *ch);
/* The channel's declared format (NULL = untyped) and mode. */
const struct cx_format *cx_chan_format(const struct cx_chan *ch);
enum cx_chan_mode cx_chan_mode(const struct cx_chan *ch);

/* Closes this process's handle: its sources and sinks leave, the contact is told. Closing
 * the creator's handle stops new opens; members already in keep exchanging events. The
 * last close of a reliable channel with sources here lingers first, and reports through
 * cx_errcode() / cx_errmsg() and stderr, as cx_chan_ctx_destroy does. */
void cx_chan_close(struct cx_chan *ch);

/* ---- sources ---- */

/* Adds a source submitting events of format `fmt` (registered, native). On a typed channel
 * fmt must convert to the channel's format: it may have more fields (ignored) or fewer (the
 * sinks see them as their default or zero); a shared field of a kind that cannot convert
 * (string vs number, struct vs scalar) fails with -EPROTO naming it. */
int cx_chan_source(struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out);

/* Submits one event (a struct laid out as the source's format). The event may be reused
 * as soon as the call returns (remote sinks: sent from it in place when the link is free,
 * else one copy is queued; local sinks: one copy). Returns 0, -EAGAIN on a reliable
 * channel when a sink's queue is full (nothing was sent to anybody), or -EINVAL for an
 * event the encoder rejects. */
int cx_chan_submit(struct cx_chan_source *s, const void *event);

/* The same, waiting up to timeout_ms (-1 = forever) for room on a reliable channel.
 * -ETIMEDOUT when no room came. From a sink handler it does not wait (-EAGAIN). */
int cx_chan_submit_wait(struct cx_chan_source *s, const void *event, int timeout_ms);

/* Submits an event the runtime may keep: no copy at all. Local sinks of the same format
 * get this very pointer through the dispatch queue; queued remote sends are encoded from
 * it when they leave. release(arg, event) is called (on any thread, possibly before this
 * returns, with the runtime's lock held: it must not call channel functions) once nobody
 * needs it; it is also called when the submit fails. */
int cx_chan_submit_owned(struct cx_chan_source *s, void *event,
                         void (*release)(void *arg, void *event), void *arg, int timeout_ms);

/* Removes the source (queued events still go out). On a reliable channel it lingers
 * first, as cx_chan_ctx_destroy does for every source, until the events queued for the
 * channel's sinks left and the sinks confirmed them (other sources of this process that
 * keep submitting to the channel meanwhile can hold it up to the linger); the outcome is
 * in cx_errcode() / cx_errmsg() (0: delivered) and on stderr. From a sink handler it does
 * not wait. */
void cx_chan_source_close(struct cx_chan_source *s);

/* ---- sinks ---- */

struct cx_chan_event {
    const void *data;               /* the event in the sink's format; NULL for untyped sinks */
    const struct cx_format *format; /* the format the event travelled in (reflection) */
    uint64_t token;                 /* its token */
    const void *wire;               /* the wire form (cx_codec.h); NULL for a local event
                                     * delivered in place to a typed sink */
    size_t wire_len;
    uint64_t seq;                   /* the source's event number (1, 2, ...) */
    const char *from;               /* address of the source's process */
};

/* Called on the progress thread for each event; ev and everything it points to are valid
 * only during the call. */
typedef void (*cx_chan_handler)(void *arg, const struct cx_chan_event *ev);

struct cx_chan_sink_opts {
    const struct cx_format *format;     /* wanted format (registered, native); NULL = untyped */
    const char *filter;                 /* derived sink: filter or transform program run at
                                         * every source (docs/filter-language.md), or NULL */
    const struct cx_format *projection; /* derived sink: sources convert to this format
                                         * before sending (registered), with the fields the
                                         * program computes; NULL = none */
};

/* Subscribes a sink. On a typed channel its format must be convertible from the channel's:
 * fewer fields, or more (a field the channel lacks gets its declared default or zero, so a
 * newer sink with defaults works); a shared field of a kind that cannot convert fails with
 * -EPROTO. A filter or program (its language: docs/filter-language.md) is checked here,
 * against the channel's format and the projection: a bad one fails with -EINVAL and
 * cx_errmsg() saying where ("filter: col 7: unknown field 'x'"), one whose worst case per
 * event is over the budget with -E2BIG. Its state (every(), wmean(), ...) is kept at each
 * source from the subscription on. */
int cx_chan_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn,
                 void *arg, struct cx_chan_sink **out);

/* Unsubscribes. When it returns (from a thread other than the progress thread) the
 * handler is not running and will not run again. */
void cx_chan_sink_close(struct cx_chan_sink *k);

/* Copies into out[cap] the sink's last error: a source could not compile its filter for
 * that source's format, or an event could not be converted. Returns the message's length,
 * 0 if there was none. */
size_t cx_chan_sink_error(struct cx_chan_sink *k, char *out, size_t cap);

/* ---- observation ---- */

struct cx_chan_stats {
    uint64_t submitted;      /* events submitted by this process's sources */
    uint64_t sent;           /* event frames handed to links */
    uint64_t sent_bytes;     /* their bytes, headers included */
    uint64_t queued;         /* events waiting in this process's sink queues now */
    uint64_t dropped;        /* best-effort: events dropped from full queues */
    uint64_t blocked;        /* reliable: submits refused or delayed for a full queue */
    uint64_t filtered;       /* events a derived sink's filter stopped at this source */
    uint64_t filtered_bytes; /* bytes (header + payload) that did not cross the wire */
    uint64_t projected_bytes_saved; /* bytes saved by projections */
    uint64_t delivered;      /* events handed to this process's sink handlers */
    uint64_t received_bytes; /* event bytes received from the network (header + payload) */
    uint64_t errors;         /* events a sink could not convert */
    uint32_t sources, sinks; /* members known to this process (all processes) */
    uint32_t removed;        /* members removed because their process died */
    uint32_t shm_sinks;      /* remote sinks this process's sources reach over shared memory */
    uint32_t net_sinks;      /* ... over a network link (tcp and others) */
    uint64_t sent_shm;       /* of the frames counted in `sent`, those handed to shm links */
    uint32_t ucx_sinks;      /* of net_sinks, those reached over ucx (a fabric's fast link) */
    uint64_t sent_ucx;       /* of the frames counted in `sent`, those handed to ucx links */
    uint64_t sent_fast;      /* of `sent`, those that left by the submit fast path (one remote
                              * sink over shm, queue empty: the peer's lock only; README) */
    uint64_t delivered_fast; /* of `delivered`, remote events handed to an endpoint's only
                              * sink without the runtime lock (README, receive fast path) */
};

void cx_chan_stats(struct cx_chan *ch, struct cx_chan_stats *out);

/* Waits up to timeout_ms until this process knows at least `sources` sources and `sinks`
 * sinks on the channel (a source usually waits for its sinks before submitting).
 * 0 or -ETIMEDOUT. Not from a handler. */
int cx_chan_wait_members(struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
