/* Internals of the pipe runtime shared by its files:
 *   cx_pipe_rt.c      descriptor table, spaces, the in-bound thread, pi_unlink
 *   cx_pipe_reader.c  pi_attach pi_read pi_seek pi_tell pi_detach (+ the thread's reader work)
 *   cx_pipe_writer.c  pi_create pi_write pi_close
 *   cx_pipe_migrate.c pi_migrate_out pi_migrate_in, the writer's hold list, pi_writer_stats,
 *                     pi_link
 *   cx_pipe_seg.c     typed segments: events of a format <-> segment bytes
 *   cx_pipe_cursor.c  pi_attach_named pi_ack (durable named readers)
 *   cx_pipe_group.c   pi_attach_group: a reader group's member (read, ack, detach)
 */
#ifndef CX_PIPE_INT_H
#define CX_PIPE_INT_H

#include "common/cx_frame.h"
#include "pipe/cx_pipe.h"
#include "pipe/cx_pipe_buf.h"
#include "space/cx_space_client.h"
#include "transport/cx_driver.h"

#include <poll.h>
#include <pthread.h>

#define PI_MAX_DESC 1024
#define PI_MAX_SPACES 64
#define PI_MAX_DIRECT 16

struct pi_space {
    int used;
    char addr[160];
    struct pi_options opts;
    struct cx_space_client *ctl; /* app threads' requests (lock: its own) */
    char my_addr[160];           /* where writers reach our readers */
    char spill_dir[200];         /* readers' spill files (opts.spill_dir, copied) */
    uint64_t *published;         /* format tokens stored in the space's format service */
    size_t npublished, cap_published;
};

struct pi_reader {
    char name[128];
    char cursor[72];            /* pi_attach_named's cursor ("" for pi_attach) */
    int space;
    uint64_t pipe_id;
    struct cx_pipe_buf *buf;    /* under g_pi.mu */
    pthread_cond_t cv;          /* signalled when buf gains a ready segment or an error */
    struct cx_space_client *stream; /* the space's stream, driven by the in-bound thread */
    uint32_t stream_handle;
    int stream_done;            /* the space said END */
    int paused;                 /* the space's stream is stopped: the writer's is ahead */
    int wake;                   /* the writer's stream brought something: signal cv once */
    unsigned space_dups;        /* consecutive duplicates from the space's stream */
    uint64_t progress_next;     /* buffer position at progress_at (stall detection) */
    double progress_at;
    double retry_at;            /* when to reconnect the stream */
    int err;                    /* a lasting error for pi_read */
    char errmsg[256];
    struct pi_reader_stats st;
    char link[PI_LINK_MAX];     /* the last direct link's transport (pi_link) */
    uint8_t *scratch;
    size_t scratch_cap;
};

struct pi_direct {
    char addr[CX_SP_ADDR_MAX + 1];
    struct cx_link *link; /* NULL once failed: that reader falls back to the space */
};

/* A reader on the writer's hold list (seed Figure 7, #87-#89): it is migrating, so the
 * writer neither sends to nor connects to its old address until it reappears (the space
 * says READER_MOVED) or the hold ends at `until` (then it reads from the space). */
struct pi_hold {
    char addr[CX_SP_ADDR_MAX + 1];
    double until;
    uint64_t from; /* the last segment it got directly: later ones are resent when it moves */
};

struct pi_retained { /* a segment the space has not acknowledged yet */
    uint64_t id, format;
    uint32_t len;
    uint8_t *data;
};

struct pi_writer {
    char name[128];
    int space;
    uint64_t pipe_id;
    struct cx_space_client *c;
    uint32_t handle;
    uint64_t last;       /* last id written by this writer (its replay position) */
    uint64_t space_had;  /* what the space held when we opened: replays up to it are dropped */
    int space_ended;     /* the pipe was closed already: an APPEND writer may only replay */
    struct pi_direct direct[PI_MAX_DIRECT];
    int ndirect;
    struct pi_hold hold[PI_MAX_DIRECT]; /* migrating readers (cx_pipe_migrate.c) */
    int nhold;
    struct pi_writer_stats st;
    char link[PI_LINK_MAX];  /* the last direct link's transport (pi_link) */
    struct pi_retained *ret; /* ring of unacknowledged segments, window slots */
    uint32_t window;
    /* corking: the writer's links hold small segments back (TCP_CORK) so they leave in
     * full packets; what waits is pushed out by the next full packet, by any call that
     * waits for the space, or by the in-bound thread within about 1 ms (pi_writer_flush) */
    pthread_mutex_t cork_mu; /* the links' sockets, against the in-bound thread's flush */
    int corked;              /* corking on (off from pi_close on) */
    int dirty;               /* bytes may wait in a corked socket */
    double dirty_at;
};

enum { PI_FREE = 0, PI_READER = 1, PI_WRITER = 2, PI_GROUP = 3 };

struct pi_group;

struct pi_desc {
    int kind;
    struct pi_reader *r;
    struct pi_writer *w;
    struct pi_group *g; /* PI_GROUP: a reader group's member (cx_pipe_group.c) */
};

struct pi_global {
    pthread_mutex_t mu;
    struct pi_space spaces[PI_MAX_SPACES];
    struct pi_desc desc[PI_MAX_DESC];
    int desc_hi; /* descriptors at or above it were never used: loops stop there */
    int wake_fd; /* eventfd: a new reader or a seek wakes the in-bound thread (-1: none) */
    /* the in-bound thread and its listener */
    int started, stop;
    pthread_t thread;
    const struct cx_driver_ops *lops;
    struct cx_listener *listener;
    char listen_addr[160];
    struct pi_inbound *in; /* accepted direct links from writers */
};

extern struct pi_global g_pi;

/* -1 with errno from a negative errno (cx_errmsg already set). */
int pi_fail(int rc);
/* 0, or -ENAMETOOLONG / -EINVAL with a message, for a pipe name given to a pi_* call. */
int pi_name_check(const char *name, const char *call);
/* Stores t's description in space s's format service unless done before (pi_write). */
int pi_format_publish(int s, const struct cx_format *t, int timeout_ms);
double pi_now_ms(void);
/* Starts the in-bound thread and its listener at addr if not yet (g_pi.mu held). */
int pi_rt_start_locked(const char *addr);
/* Wakes the in-bound thread (a reader to serve now, not at its next poll timeout). */
void pi_rt_wake(void);
/* Sends what this process's writers hold in corked sockets (g_pi.mu held). A reader about
 * to wait calls it: the segment it waits for may answer one we have not sent yet (a
 * ping-pong over two pipes), so corking must not delay it. */
void pi_rt_flush_writers(void);
/* A free descriptor slot (g_pi.mu held). */
int pi_desc_alloc(void);
struct pi_space *pi_space_get(int s);
/* The space's request connection; pass the one that just failed with -ECONNRESET to get a
 * fresh one (NULL when the space is unreachable). Takes g_pi.mu: call without it. */
struct cx_space_client *pi_space_ctl(int s, struct cx_space_client *failed);

/* The in-bound thread's share of reader work (g_pi.mu held): returns work done. */
int pi_reader_service(struct pi_reader *r);
/* The writer's direct link for pipe_id closed: its readers resume the space's stream. */
void pi_reader_direct_gone(uint64_t pipe_id);
/* A segment from a writer's direct link for pipe_id (g_pi.mu held). */
void pi_reader_offer_direct(uint64_t pipe_id, const struct cx_frame_hdr *h, const void *p, size_t len);
int pi_reader_fds(struct pollfd *pf, int cap);
/* When pi_reader_service next has timed work for r (a stalled direct stream to resume from
 * the space, a reconnect to retry), on pi_now_ms's clock; 0: none, it waits for its fd. */
double pi_reader_due_ms(const struct pi_reader *r);
/* The reader of descriptor d, or NULL with EBADF set (g_pi.mu held). */
struct pi_reader *pi_reader_get(int d);
void pi_reader_free(struct pi_reader *r);
void pi_writer_free(struct pi_writer *w);
/* Pushes out what waits in a writer's corked sockets when it waited at least min_ms;
 * returns 1 when something still waits (call again within a millisecond). */
int pi_writer_flush(struct pi_writer *w, double min_ms);

/* A new writer of name on space s (pi_create, pi_migrate_in): reserves a descriptor and
 * makes the writer, not yet on the space (the space's address in addr). Returns the
 * descriptor, or -EBADF / -ENOMEM. pi_writer_abort undoes it (w may be NULL). */
int pi_writer_begin(const char *name, int s, char *addr, size_t cap, struct pi_writer **out);
void pi_writer_abort(int d, struct pi_writer *w);

/* The writer's direct links (cx_pipe_writer.c), for the hold list: connect to a reader's
 * address (replacing a link to the same address); close one link. */
void pi_writer_direct_add(struct pi_writer *w, const char *addr);
void pi_writer_direct_drop(struct pi_writer *w, struct pi_direct *dl);
/* What the space pushed for the writer's pipe (readers joined, held, moved), and holds that
 * ended: applied to its direct links and hold list (cx_pipe_migrate.c). */
void pi_writer_events(struct pi_writer *w);
/* Open reads: a new reader registers (GET) from the start of the pipe; a migrated one
 * (resume != NULL) resumes its hold (RESUME) at resume->next (cx_pipe_reader.c). */
struct pi_resume {
    uint64_t pipe_id, token, next;
};
int pi_reader_open(const char *name, int s, const struct pi_resume *resume);
/* Direct links from writers carrying pipe_id into this process (g_pi.mu held). */
int pi_rt_inbound_links(uint64_t pipe_id);

/* The migration blob (cx_pipe_migrate.c; its layout is described there). */
struct pi_blob {
    uint8_t kind, flags; /* kind: CX_SP_MIG_READER or CX_SP_MIG_WRITER */
    char name[128];
    uint64_t pipe_id, pos, space_had, token;
};
/* Bytes the blob of a pipe named name takes. */
size_t pi_blob_size(const char *name);
/* Writes b into out (pi_blob_size(b->name) bytes); returns that size. */
size_t pi_blob_encode(const struct pi_blob *b, uint8_t *out);
/* Reads a blob another process handed over: 0, or -EINVAL (truncated, not a blob, wrong
 * version, kind or name) / -EBADMSG (checksum) with a message. Reads only len bytes. */
int pi_blob_decode(const void *in, size_t len, struct pi_blob *b);

/* A reader group's member (cx_pipe_group.c): 1 when d is one, and then the call is done
 * (its result in *rc); 0 for any other descriptor. pi_read, pi_ack, pi_detach, pi_tell,
 * pi_seek and pi_reader_stats ask first. */
int pi_group_read(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms, long *rc);
int pi_group_ack(int d, int *rc);
int pi_group_detach(int d, int *rc);
int pi_group_tell(int d, int64_t *rc);
int pi_group_seek(int d, int *rc);
int pi_group_stats(int d, struct pi_reader_stats *out, int *rc);
/* The space a member was attached on. */
int pi_group_space(const struct pi_group *g);

/* Typed segments (cx_pipe_seg.c). */
long pi_seg_encode(const void *events, size_t n, const struct cx_format *t, uint8_t **out,
                   uint64_t *token);
/* How many events of its format a segment holds (the format fetched from the space when
 * unknown): -ENOENT, -EPROTO (raw bytes, or not a whole number of events). */
long pi_seg_count(uint64_t wire_token, size_t len, const struct cx_format *t);
long pi_seg_decode(uint64_t wire_token, uint8_t *seg, size_t len, void *out, size_t n,
                   const struct cx_format *t);

#endif
