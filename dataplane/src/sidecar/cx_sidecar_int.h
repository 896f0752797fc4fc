/* Internals of the sidecar shared by its files (not a public header). */
#ifndef CX_SIDECAR_INT_H
#define CX_SIDECAR_INT_H

#include "channel/cx_chan.h"
#include "sidecar/cx_sc_proto.h"
#include "sidecar/cx_sc_ring.h"
#include "sidecar/cx_sidecar.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

enum sc_kind { H_FREE = 0, H_SPACE, H_WRITER, H_READER, H_CHAN, H_SOURCE, H_SINK };

struct sc_session;

/* A sink of an application: its events go to the session's events connection. */
struct sc_sink {
    struct cx_chan_sink *k;
    struct sc_session *sess;
    uint64_t handle;
    const struct cx_format *fmt;  /* the sink's format, NULL = untyped */
};

/* One entry of the handle table: what an application opened through the sidecar. */
struct sc_handle {
    enum sc_kind kind;
    uint64_t session;
    int d;                        /* space or pipe descriptor */
    char name[128];               /* pipe name or channel id (metrics) */
    char space[128];              /* writers: their space's address (format publishing) */
    struct cx_chan *ch;
    struct cx_chan_source *src;
    const struct cx_format *fmt;  /* source format */
    struct sc_sink *sink;
    int64_t parent;               /* sources and sinks: their channel's handle */
    int reliable;                 /* sources: of a reliable channel (streamed submits wait) */
    int stream_err;               /* writers: a streamed write failed (-errno); later ones are
                                   * refused without writing, so a failed writer leaves no gap */
    uint64_t segments, bytes;     /* pipes: moved through this handle */
};

/* One connection of an application. */
struct sc_conn {
    struct cx_sidecar *sc;
    int fd;
    int kind;                    /* enum cx_sc_conn */
    struct sc_session *sess;
    void *map;
    size_t maplen;
    struct cx_sc_ring in, out;   /* ring 0 (from the app), ring 1 (to the app) */
    struct cx_sc_slot *slot;     /* the call slot, after the rings */
    uint32_t seq;                /* calls: the number of the last request answered */
    int hello_done;
    struct sc_conn *next, *prev; /* every connection (cx_sidecar.conns) */
    struct sc_conn *qnext;       /* the engine's work queue */
};

struct sc_session {
    uint64_t id;
    int pid;                     /* as the application gave it (its own PID namespace) */
    uid_t uid;                   /* the opener's user (SO_PEERCRED): only it may join */
    int nconn;
    pthread_mutex_t ev_mu;       /* guards ev and its ring 1 (sink handlers, many threads) */
    struct sc_conn *ev;
    struct sc_session *next;
};

#define SC_LAT_BUCKETS 12
extern const double cx__sc_lat_bounds[SC_LAT_BUCKETS]; /* seconds */

struct sc_op_stats {
    _Atomic uint64_t count, errors, sum_ns;
    _Atomic uint64_t bucket[SC_LAT_BUCKETS]; /* not cumulative; rendered cumulative */
};

struct cx_sidecar {
    struct cx_sidecar_opts o;
    char socket[108], http_host[64], transport[16], space[256];
    char http_addr[80];
    char *declared[3];           /* copies of inputs, outputs, channels */
    uid_t allowed[16];           /* --allow-uid: who may connect (besides this process's) */
    int nallowed;
    int lfd, hfd;
    int stop_pipe[2];
    pthread_t http_thr;
    /* the engine (cx_sc_engine.c) */
    int epfd, spare_fd, engine_on;
    pthread_t engine;
    pthread_mutex_t qmu;         /* the work queue and the worker counts */
    pthread_cond_t qcv;
    struct sc_conn *qhead, *qtail;
    int qlen, workers, idle_workers, engine_stopping;
    int http_on;
    atomic_int stopping;
    atomic_int ready;            /* the socket listens */
    struct cx_chan_ctx *ctx;
    pthread_mutex_t mu;          /* handles, sessions, conns */
    pthread_cond_t cv;
    struct sc_handle *h;
    size_t nh;
    struct sc_session *sessions;
    struct sc_conn *conns;
    int nconns;
    uint64_t started_ns;
    struct sc_op_stats ops[CX_SC_OP_MAX];
    _Atomic uint64_t apps_total, events_to_apps, event_bytes_to_apps, event_drops, submit_bytes;
};

/* cx_sc_ops.c: runs one request (ring payload in bulk/blen), fills rep. */
void cx__sc_handle(struct sc_conn *c, const struct cx_sc_req *q, void *bulk, size_t blen,
                   struct cx_sc_rep *rep);
/* Runs one CX_SC_REC_WRITE record of an events connection (a streamed pi_write). */
void cx__sc_write_async(struct sc_conn *c, const void *rec, size_t len);
/* Runs one CX_SC_REC_SUBMIT record of an events connection. */
void cx__sc_submit_async(struct sc_conn *c, const void *rec, size_t len);
/* Closes everything session `id` left open (called with no lock held). */
void cx__sc_session_close_all(struct cx_sidecar *sc, uint64_t id);

/* cx_sidecar.c: counts one call of op that took ns (metrics). */
void cx__sc_op_account(struct cx_sidecar *sc, uint32_t op, uint64_t ns, int failed);
/* cx_sidecar.c: serves a connection the engine found readable until it has no more work
 * (1: give it back to the engine) or it ended (0: close it). */
int cx__sc_conn_serve(struct sc_conn *c);
/* Ends a connection: its session's last closes what the application left open. */
void cx__sc_conn_close(struct sc_conn *c);

/* cx_sc_engine.c */
int cx__sc_engine_start(struct cx_sidecar *sc);
void cx__sc_engine_stop_accepting(struct cx_sidecar *sc);
/* Stops the engine thread and waits up to wait_s for the workers: how many are left. */
int cx__sc_engine_stop(struct cx_sidecar *sc, int wait_s);

/* cx_sc_http.c */
int cx__sc_http_start(struct cx_sidecar *sc);
void cx__sc_http_stop(struct cx_sidecar *sc);

uint64_t cx__sc_now_ns(void);

#endif
