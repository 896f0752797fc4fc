/* Internals of the channel runtime (see README.md for the design).
 *
 * Locks. One mutex per process runtime (ctx->lock) guards every table, queue and counter.
 * One recursive lock per peer (peer->lock, a cx_rlock) guards its link, because a driver link must not
 * be sent on and progressed at once. Order: peer lock, then ctx lock. The progress thread
 * takes a peer lock blockingly; other threads take one only with trylock (if it is busy the
 * event is queued and the progress thread sends it), so no thread ever waits for a peer
 * lock while holding ctx->lock except the progress thread, which no other thread waits for;
 * and the progress thread's flush takes ctx->lock only with trylock while it holds a peer
 * lock (a submitter holding ctx->lock and finding the link busy would otherwise take turns
 * with it, every event through the queue). Sink handlers run with ctx->lock released.
 * Engine sources are added and removed only on the progress thread (cx_engine_add from
 * another thread would wait for the round, which may wait for ctx->lock).
 *
 * Fast paths (README "Fast paths"): a submit to a channel's `route` holds only that peer's
 * lock (trylock, never ctx->lock inside: it takes ctx->lock afterwards to kick, if at all);
 * a remote event for an endpoint's `solo` sink is handled under the peer lock alone. Both
 * are guarded by a counter of the threads inside (route_active, ep->active) that whoever
 * changes what they read waits for, with ctx->lock held: chan_route_off spins (a fast
 * submitter never blocks), solo_quiesce waits on ctx->cv (a handler may block). The fast
 * submit counts in ch->fast_* and numbers with a plain increment of the source's seq (its
 * writers are serialized by the peer lock and the route protocol); delivered and
 * received_bytes are written only inside the runtime's engine rounds, which the engine's
 * lock serializes, so every writer uses chan_count and cx_chan_stats reads them
 * atomically. */
#ifndef CX_CHAN_INT_H
#define CX_CHAN_INT_H

#include "channel/cx_chan.h"
#include "channel/cx_chan_queue.h"
#include "common/cx_lock.h"
#include "engine/cx_engine.h"
#include "format/cx_codec.h"
#include "stack/cx_mux.h"
#include "transport/cx_driver.h"

#include <pthread.h>
#include <stdint.h>

#define CHAN_ADDR_MAX 128
#define CHAN_ID_MAX 192
#define CHAN_ERR_MAX 256
#define CHAN_FABRIC_MAX 254 /* 253 characters: a Kubernetes object name */
/* How long a dialing runtime in a fabric waits for the peer's CTRL_LINKS before using tcp. */
#define CHAN_LINKS_WAIT_MS 2000
/* Bytes a link may hold unsent before a source queues events per sink instead: keeps the
 * bound of a sink queue meaningful (a tcp link's own queue is unbounded). */
#define CHAN_LINK_HIGH (256u << 10)

enum chan_role { CHAN_WATCH = 0, CHAN_SOURCE = 1, CHAN_SINK = 2 };

/* A delivery target of this process's sources: a local sink, or a remote sink endpoint. */
struct chan_dest {
    struct chan_dest *next;
    struct cx_chan *ch;
    int local;
    struct cx_chan_sink *sink;   /* local */
    char addr[CHAN_ADDR_MAX];    /* remote: the sink's process */
    uint32_t tag;                /* remote: the mux tag it receives on */
    struct chan_peer *peer;      /* remote: NULL until connected */
    char *filter;                /* derived: expression, or NULL */
    uint64_t proj_token;         /* derived: projection format, or 0 */
    const struct cx_format *proj;
    int proj_asked;
    struct chan_derived *dv;     /* compiled filters and projection scratch (cx_chan_derived.c) */
    struct chan_queue q;
    uint64_t sent;               /* remote: events handed to its link (the linger's report) */
};

/* One member of a channel as this process knows it (the contact's list is the truth). */
struct chan_member {
    struct chan_member *next;
    char addr[CHAN_ADDR_MAX];
    uint32_t tag, role;
    char *filter;
    uint64_t proj;
};

/* A receive endpoint: the mux tag a channel's events arrive with in this process. Never
 * freed before the runtime (a dead one drops what still arrives). */
struct chan_ep {
    uint32_t tag;
    int dead;
    struct cx_chan *ch;
    struct cx_chan_sink *sink; /* a derived sink's own endpoint; NULL = the channel's plain sinks */
    /* The receive fast path (cx_chan_sink.c): while exactly one sink receives on this
     * endpoint it is `solo` and an event reaches it without the runtime lock. Receivers
     * count themselves in `active` before they read `solo`; a closer clears `solo`, then
     * waits (`waiting`, ctx lock) until `active` drains: a Dekker pair, both seq_cst. */
    struct cx_chan_sink *solo; /* written under ctx lock, read atomically */
    unsigned active;           /* fast receivers inside (atomic) */
    unsigned waiting;          /* closers waiting for active (ctx lock; read atomically) */
};

struct chan_out; /* a queued control frame (cx_chan_peer.c) */
struct chan_dial; /* a connect on its own thread (cx_chan_link.c) */

/* A listener of the runtime: the advertised one (tcp) and, for processes on this host, the
 * shm rendezvous (cx_chan_link.c). */
struct chan_lsn {
    struct cx_chan_ctx *ctx;
    const struct cx_driver_ops *ops;
    struct cx_listener *l;
};

/* One link to another process, shared by every channel (mux on top). */
struct chan_peer {
    struct chan_peer *next;
    struct cx_chan_ctx *ctx;
    struct cx_rlock lock;     /* recursive; the link (common/cx_lock.h) */
    struct cx_mux *mux;
    struct cx_link *link;     /* cx_mux_link(mux) */
    const char *kind;         /* the network driver under the mux: "shm", "tcp", ... */
    int shm;                  /* kind is "shm" (counted per event: no string compare there) */
    int ucx;                  /* kind is "ucx" */
    char addr[CHAN_ADDR_MAX]; /* the remote process's address; "" until its HELLO */
    int engine_id;            /* -1 until the progress thread registered it */
    int failed;               /* negative errno once broken */
    struct cx_link **mch;     /* mux channels, indexed like ctx->eps */
    size_t nmch;
    unsigned synced;          /* ctx->ep_gen they match */
    uint64_t *pushed;         /* format tokens described on this link */
    size_t npushed, cpushed;
    struct chan_out *out, *out_tail; /* control frames to send (ctx lock) */
    unsigned queued;          /* events waiting in queues of dests on this peer (ctx lock) */
    int accepted;             /* it dialed us (its failures before HELLO are logged) */
    long long hs_until;       /* accepted: progress it at this deadline (ms; 0 = done) */
    /* For the linger's report (cx_chan_linger.c): DATA frames sent on this link, and those
     * from it handed to this process's sinks (each written under the peer lock); what the
     * other runtime said of ours in its CTRL_BYE (ctx lock). */
    uint64_t tx_events, rx_events;
    uint64_t bye_rx;
    int said_bye;
};

struct cx_chan_source {
    struct cx_chan_source *next;
    struct cx_chan *ch;
    const struct cx_format *fmt;
    uint64_t token;
    uint32_t tag;
    uint64_t seq;
};

struct cx_chan_sink {
    struct cx_chan_sink *next;
    struct cx_chan *ch;        /* NULL once detached (closed while its handler ran) */
    const struct cx_format *fmt;
    cx_chan_handler fn;
    void *arg;
    char *filter;
    const struct cx_format *proj;
    struct chan_ep *ep;
    struct chan_dest *ldest;   /* its local delivery target */
    int busy, dead;
    int closer;                /* a thread waits in close for busy to reach 0 */
    uint8_t *scratch;          /* conversion output */
    size_t scap;
    uint64_t last_token;       /* the format of the last event (handler thread only) */
    const struct cx_format *last_fmt;
    char err[CHAN_ERR_MAX];
};

struct cx_chan {
    struct cx_chan *next;
    struct cx_chan_ctx *ctx;
    int refs;
    int state;                 /* 0 joining, 1 open, <0 failed (-errno) */
    char id[CHAN_ID_MAX];
    char contact[CHAN_ADDR_MAX];
    uint32_t cnum;             /* number at the contact */
    int is_contact;
    const struct cx_format *fmt;
    enum cx_chan_mode mode;
    unsigned qlimit;
    struct chan_member *members;
    struct chan_dest *dests;
    char (*watch)[CHAN_ADDR_MAX]; /* contact: processes that opened it */
    size_t nwatch, cwatch;
    struct cx_chan_source *sources;
    struct cx_chan_sink *sinks;
    struct chan_ep *plain_ep;  /* endpoint of the sinks without filter or projection */
    unsigned nplain;
    struct cx_chan_stats st;
    /* The submit fast path (cx_chan_source.c): while the channel's only delivery target is
     * one remote sink over shm with an empty queue, `route` is it and a submit sends under
     * that peer's lock alone. Submitters count themselves in `route_active` before they read
     * `route`; chan_route_off clears it and waits until they left (seq_cst Dekker pair). */
    struct chan_dest *route;   /* written under ctx lock, read atomically */
    unsigned route_active;     /* fast submitters inside (atomic) */
    /* What the fast submit path sent, kept apart from `st` (written under ctx lock): its
     * writers hold the route's peer lock and never run beside the general path, so these
     * are plain increments (chan_count), read atomically by cx_chan_stats. */
    uint64_t fast_submitted, fast_sent, fast_bytes;
};

/* A process that said CTRL_BYE before its link broke: how many of the events this process
 * sent it (tx) its sinks got (rx). The last CHAN_BYES are kept for a lingering close. */
#define CHAN_BYES 64
struct chan_bye {
    char addr[CHAN_ADDR_MAX];
    uint64_t rx, tx;
};

/* A request waiting for its reply (JOIN). */
struct chan_req {
    struct chan_req *next;
    struct chan_peer *peer;    /* the reply comes from there; its failure ends the wait */
    uint64_t id;
    int done, status;
    char text[CHAN_ERR_MAX];
    uint64_t token;
    uint32_t mode, qlimit;
    uint64_t sync_tx, sync_rx; /* CTRL_SYNC: DATA frames sent before it, and handled (reply) */
};

struct cx_chan_ctx {
    pthread_mutex_t lock;
    pthread_cond_t cv;         /* replies, room in queues, idle handlers, flushes */
    int waiters;               /* threads in chan_wait (ctx lock) */
    struct cx_engine *eng;
    struct chan_lsn lsn;       /* the listener of the advertised address */
    struct chan_lsn shm;       /* the shm rendezvous (ops NULL: none) */
    struct chan_lsn ucx;       /* in a fabric: the ucx listener (ops NULL: none) */
    char fabric[CHAN_FABRIC_MAX]; /* "" = in no fabric */
    char ucx_addr[CHAN_ADDR_MAX]; /* our ucx listener's address ("" = none) */
    struct chan_dial *dials;   /* fabric: connects running on their own threads */
    int closing;               /* destroy began: no new dial threads */
    char addr[CHAN_ADDR_MAX];
    char host[17];             /* host identity: hash of the boot id and the network namespace */
    char shm_addr[CHAN_ADDR_MAX]; /* our shm rendezvous ("" = none) */
    int kickfd;                /* eventfd: wakes the runtime's own engine source */
    int kicked;                /* a kick is pending (coalesces eventfd writes) */
    uint32_t next_num;
    uint64_t next_req;
    struct chan_peer *peers;
    struct cx_chan *chans;
    struct chan_ep **eps;
    size_t neps, ceps;
    unsigned ep_gen;
    struct chan_req *reqs;
    unsigned local_pending;    /* events in local sinks' queues */
    int need_connect;          /* some dest waits for a link */
    int hs_tfd;                /* timerfd: the next accepted peer's handshake deadline */
    long long hs_next;         /* when hs_tfd fires (ms, chan_now_ms; 0 = disarmed) */
    int linger_ms;             /* how long closing a reliable source waits (<= 0: not at all) */
    struct chan_bye byes[CHAN_BYES]; /* ring (ctx lock) */
    unsigned nbyes;
};

/* A control message, carried as a Conflux-format event in CX_FRAME_CTRL frames. */
enum chan_op {
    CTRL_HELLO = 1,      /* addr: the connecting process introduces itself */
    CTRL_JOIN = 2,       /* to the contact: chan, role, tag, addr, filter, token = projection */
    CTRL_JOIN_REPLY = 3, /* status, text, token = channel format, mode, qlimit */
    CTRL_MEMBER_ADD = 4, /* contact to watchers: chan, role, tag, addr, filter, token */
    CTRL_MEMBER_DEL = 5, /* contact to watchers: chan, role, tag, addr */
    CTRL_LEAVE = 6,      /* to the contact: chan, role, tag, addr (role WATCH: the process) */
    CTRL_FILTER_ERR = 7, /* source to sink: chan, tag, text */
    CTRL_LINKS_QUERY = 8, /* a dialer in a fabric, before HELLO: addr, text = its fabric */
    CTRL_LINKS = 9,      /* the answer: text = fabric ("" none), addr = ucx address ("" none) */
    CTRL_SYNC = 10,      /* source to sink process: req; answered once every earlier frame on
                          * this link was handled (cx_chan_linger.c) */
    CTRL_SYNC_REPLY = 11, /* req, token = DATA frames from that link its sinks got */
    CTRL_BYE = 12,       /* a runtime going away, to each peer: token = DATA frames from that
                          * link its sinks got (a lingering source's report) */
};

struct chan_ctrl {
    uint32_t op, role;
    int32_t status;
    uint32_t tag, mode, qlimit;
    uint64_t token, req;
    char *chan, *addr, *filter, *text;
};

/* Adds n to a counter that has one writer at a time (serialized by a lock its readers do
 * not take: the engine's round for the receive counters, the route's peer lock for the fast
 * submit's): no locked read-modify-write, but no torn value for a concurrent reader. */
static inline void chan_count(uint64_t *c, uint64_t n)
{
    __atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + n, __ATOMIC_RELAXED);
}

/* ---- cx_chan_ctx.c ---- */
void chan_kick(struct cx_chan_ctx *ctx);             /* ctx lock held */
int chan_on_progress_thread(struct cx_chan_ctx *ctx);
long long chan_now_ms(void);
/* Waits on ctx->cv (ctx lock held) until deadline_ms (-1 = forever). 0, or -ETIMEDOUT. */
int chan_wait(struct cx_chan_ctx *ctx, long long deadline_ms);
/* Broadcasts ctx->cv if a thread waits on it (ctx lock held): the per-event paths call
 * this, and most events find nobody waiting. */
static inline void chan_wake_waiters(struct cx_chan_ctx *ctx)
{
    if (ctx->waiters)
        pthread_cond_broadcast(&ctx->cv);
}
/* Sends a request's message to addr (connecting if needed) and waits for its reply.
 * Called without ctx lock. */
int chan_request(struct cx_chan_ctx *ctx, const char *addr, struct chan_ctrl *m,
                 int timeout_ms, struct chan_req *out);

/* ---- cx_chan_link.c ---- */
/* Computes the host identity and, unless disabled (o->tcp_only, CONFLUX_CHAN_SHM=0) or the
 * advertised address is shm already, listens on the shm rendezvous. 0 or -errno. */
int chan_link_setup(struct cx_chan_ctx *ctx, const struct cx_chan_ctx_opts *o);
/* Connects to the process advertising addr over the fastest link that reaches it: shm
 * when it is on this host (its rendezvous answers), else addr itself. Blocks for the
 * connect; called without ctx lock. */
int chan_link_dial(struct cx_chan_ctx *ctx, const char *addr, struct cx_link **out);
/* ---- cx_chan_accept.c ---- */
/* The engine source polling a listener: accepted links become peers at once, their
 * handshake running in the peer's progress (cx_listener_accept), never on this thread. */
int chan_listen_poll(void *arg, int budget);
/* Creates the deadline timer and registers its engine source, which progresses each
 * accepted peer at its handshake deadline (a silent peer's fd never wakes the engine) and
 * logs the ones that fail then; the engine then drops them. 0 or -errno. */
int chan_accept_setup(struct cx_chan_ctx *ctx);
/* Which link to use to a peer not on this host, from both ends' fabric and the peer's ucx
 * address: CHAN_LINK_UCX in the same fabric with a ucx address, else CHAN_LINK_TCP. */
enum chan_link_choice { CHAN_LINK_TCP = 0, CHAN_LINK_UCX = 1 };
enum chan_link_choice chan_link_rank(const char *mine, const char *theirs, const char *ucx);
/* Checks and trims a fabric name into out (NULL or "" = none). 0 or -EINVAL. */
int chan_fabric_name(const char *in, char out[CHAN_FABRIC_MAX]);
/* Connects dests waiting for addr on a thread of its own (a runtime in a fabric: its dial
 * waits for the peer's progress thread, which may be dialing us). ctx lock held. */
int chan_dial_start(struct cx_chan_ctx *ctx, const char *addr);
/* Whether a dial thread is connecting to addr; reaps finished ones. ctx lock held. */
int chan_dialing(struct cx_chan_ctx *ctx, const char *addr);
/* Joins every dial thread (ctx destroy; ctx lock not held). */
void chan_dial_join_all(struct cx_chan_ctx *ctx);

/* ---- cx_chan_peer.c ---- */
/* The peer for a process address (ctx lock held), or NULL. */
struct chan_peer *chan_peer_find(struct cx_chan_ctx *ctx, const char *addr);
/* Finds or connects the peer for addr. Called without ctx lock (connect blocks). */
int chan_peer_get(struct cx_chan_ctx *ctx, const char *addr, struct chan_peer **out);
/* Wraps an accepted or connected link as a peer (queued for the engine). ctx lock held. */
int chan_peer_add(struct cx_chan_ctx *ctx, struct cx_link *raw, const char *addr,
                  struct chan_peer **out);
/* Queues a frame to send from the progress thread (ctx lock held). Copies payload. */
int chan_peer_post(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                   size_t len);
/* Sends an event frame now, describing its format first if this link has not seen it.
 * Peer lock held. */
int chan_peer_send_event(struct chan_peer *p, const struct cx_frame_hdr *h,
                         const struct cx_format *fmt, const struct iovec *iov, int iovcnt);
/* The same without the runtime lock (peer lock held): a broken link sets p->failed and
 * returns the error; the caller kicks the progress thread once it may take the ctx lock. */
int chan_peer_send_event_nokick(struct chan_peer *p, const struct cx_frame_hdr *h,
                                const struct cx_format *fmt, const struct iovec *iov, int iovcnt);
/* Records that the link carried fmt's description (peer lock and ctx lock held). */
int chan_peer_pushed(struct chan_peer *p, uint64_t token);
/* The engine source of a peer, registered on the progress thread. */
int chan_peer_register(struct chan_peer *p);
/* One progress round of the peer, as its engine source does; the poll's result. */
int chan_peer_poll(struct chan_peer *p, int budget);
/* Sends queued control frames and events (progress thread: peer lock, then ctx lock). */
int chan_peer_flush(struct chan_peer *p);
void chan_peer_free(struct chan_peer *p);  /* unlinked, not registered, no users */
void chan_peer_mark_failed(struct chan_peer *p, int rc);

/* ---- cx_chan_ctrl.c ---- */
int chan_ctrl_init(void);
/* Encodes m and queues it on p (ctx lock held). */
int chan_ctrl_post(struct chan_peer *p, const struct chan_ctrl *m);
/* Asks the process at the other end of the raw link k (just dialed, no mux yet) for its
 * fabric and ucx address, waiting up to timeout_ms. 0 with both filled ("" = none), or
 * -ETIMEDOUT / -errno (then use the link as it is). */
int chan_links_ask(struct cx_chan_ctx *ctx, struct cx_link *k, int timeout_ms,
                   char fabric[CHAN_FABRIC_MAX], char ucx[CHAN_ADDR_MAX]);
/* Queues a FORMAT frame describing fmt (ctx lock held). */
int chan_format_post(struct chan_peer *p, const struct cx_format *fmt);
/* A CTRL or FORMAT frame (or a DATA frame for a tag not yet bound) arrived on p. Progress
 * thread, peer lock held, ctx lock not held. */
void chan_frame_recv(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                     size_t len);

/* ---- cx_chan_member.c ---- */
struct cx_chan *chan_find(struct cx_chan_ctx *ctx, const char *id);
/* Membership changes (ctx lock held). */
int chan_member_add(struct cx_chan *ch, const char *addr, uint32_t tag, uint32_t role,
                    const char *filter, uint64_t proj);
void chan_member_del(struct cx_chan *ch, const char *addr, uint32_t tag, int crashed);
/* Announces a local member: to the contact (JOIN, waits for the reply) or, at the contact,
 * to the watchers. Called without ctx lock. */
int chan_member_announce(struct cx_chan *ch, uint32_t tag, uint32_t role, const char *filter,
                         uint64_t proj);
void chan_member_leave(struct cx_chan *ch, uint32_t tag, uint32_t role); /* ctx lock held */
/* Contact side of JOIN and LEAVE (ctx lock held). */
void chan_contact_join(struct cx_chan_ctx *ctx, struct chan_peer *p, const struct chan_ctrl *m);
void chan_contact_leave(struct cx_chan_ctx *ctx, struct chan_peer *p, const struct chan_ctrl *m);
/* A process died or left: every channel forgets its members (ctx lock held). */
void chan_process_gone(struct cx_chan_ctx *ctx, const char *addr);
/* Connects dests that wait for a link (progress thread, ctx lock not held). */
void chan_connect_pending(struct cx_chan_ctx *ctx);
/* The dial to addr ended (rc, p): its dests get the peer, or the process is gone.
 * ctx lock held. */
void chan_connect_done(struct cx_chan_ctx *ctx, const char *addr, int rc, struct chan_peer *p);
void chan_dest_free(struct chan_dest *d);

/* ---- cx_chan_source.c ---- */
/* Whether events of `from` convert to `to` (a trial encode + decode). 0 or -errno. */
int chan_check_convert(const struct cx_format *from, const struct cx_format *to);
/* fmt is registered and describes this machine. 0 or -EINVAL naming `what`. */
int chan_check_native(const struct cx_format *fmt, const char *what);
/* Sends what waits in the queues of p's dests while the link has room (both locks held). */
int chan_drain_peer(struct chan_peer *p);
/* Turns ch's submit fast path off and waits until no submitter uses it (ctx lock held;
 * fast submitters never block, so this only spins briefly). Every change to ch->dests, a
 * dest's peer or queue outside the slow submit path calls it first; the next slow submit
 * turns the fast path on again when its conditions hold. */
void chan_route_off(struct cx_chan *ch);
/* Drops p from every dest (p is going away; ctx lock held). */
void chan_forget_peer(struct cx_chan_ctx *ctx, struct chan_peer *p);

/* ---- cx_chan_linger.c ---- */
/* The linger from the options or CONFLUX_CHAN_LINGER_MS (cx_chan.h), in ms; <= 0: none. */
int chan_linger_ms(const struct cx_chan_ctx_opts *o);
/* Before a reliable source goes (only = its channel; NULL = every channel with a source):
 * waits until what waits in the queues of their sinks has left and each remote sink's
 * process confirmed it handled everything sent before (CTRL_SYNC), a sink's process is
 * gone, or ctx->linger_ms passed. 0, or -ETIMEDOUT / -ECONNRESET with cx_errmsg() and a
 * line on stderr saying how many events to which sinks were not delivered. Called without
 * ctx lock; does nothing on the progress thread. */
int chan_linger(struct cx_chan_ctx *ctx, struct cx_chan *only);
/* The link to p broke: keeps what its CTRL_BYE said (ctx lock held). */
void chan_linger_bye(struct cx_chan_ctx *ctx, const struct chan_peer *p);
/* Destroy, channels closed: tells every peer how many of its events our sinks got. */
void chan_linger_say_bye(struct cx_chan_ctx *ctx);

/* ---- cx_chan_sink.c ---- */
struct chan_ep *chan_ep_new(struct cx_chan_ctx *ctx, struct cx_chan *ch,
                            struct cx_chan_sink *sink); /* ctx lock held */
struct chan_ep *chan_ep_find(struct cx_chan_ctx *ctx, uint32_t tag); /* ctx lock held */
/* An event frame for endpoint ep arrived from p (progress thread, peer lock held). */
void chan_ep_recv(void *ep, const struct cx_frame_hdr *h, const void *payload, size_t len);
/* Runs local sinks' handlers for queued events (progress thread, no lock held). */
int chan_dispatch_local(struct cx_chan_ctx *ctx, int budget);
void chan_sink_detach(struct cx_chan_sink *k); /* ctx lock held; the channel goes away */
/* Recomputes ep->solo: its only live sink, or NULL (ctx lock held). */
void chan_ep_solo_update(struct cx_chan *ch, struct chan_ep *ep);

/* ---- cx_chan_derived.c ---- */
/* Checks a filter or transform program against a format and the sink's projection (its
 * output format, or NULL) at install time. 0 or -EINVAL / -E2BIG with message. */
int chan_filter_check(const char *expr, const struct cx_format *fmt,
                      const struct cx_format *proj);
/* Runs d's program on event `seq` of source `src` (a wire event of format fmt), with the
 * state d keeps for it (the same src and seq again, after a wait for room, starts from the
 * same state): 1 pass, 0 drop, <0 error. chan_project then writes its computed fields. */
int chan_filter_run(struct chan_dest *d, const struct cx_format *fmt, const void *wire,
                    size_t len, const void *src, uint64_t seq);
/* Converts a wire event to d's projection and encodes it into enc (valid until the next
 * call for d, while wire lives). 0 or -errno. */
int chan_project(struct chan_dest *d, uint64_t token, void *wire, size_t len,
                 struct cx_enc *enc);
/* For a sink in this process: the event projected with the fields d's program computed for
 * it (a new reference), or NULL when the program computes none (or on failure). */
struct chan_ref *chan_project_ref(struct chan_dest *d, uint64_t token, uint64_t seq, void *wire,
                                  size_t len);
void chan_derived_free(struct chan_dest *d);

/* The peer a progress callback runs for (thread-local, progress thread only). */
extern __thread struct chan_peer *chan_cur_peer;
/* The runtime whose engine source the calling thread is running, or NULL. */
extern __thread struct cx_chan_ctx *chan_thread_ctx;

#endif
