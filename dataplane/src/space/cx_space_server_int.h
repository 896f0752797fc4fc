/* Internals shared by the space server's files (cx_space_server.c, cx_space_udp.c). */
#ifndef CX_SPACE_SERVER_INT_H
#define CX_SPACE_SERVER_INT_H

#include "space/cx_space_server.h"

#include <pthread.h>

struct cx_engine;
struct cx_listener;
struct cx_nametable;
struct cx_space_formats;
struct conn;
struct spipe;

#define CX_SPACE_MAX_UDP_THREADS 8

/* A listener and its accept source on the engine (ctx of accept_poll). */
struct cx_space_accept {
    struct cx_space_server *s;
    const struct cx_driver_ops *ops;
    struct cx_listener *listener;
};

struct cx_space_server {
    struct cx_space_server_opts opts;
    struct cx_segstore *store;
    struct cx_nametable *names;
    struct cx_space_formats *formats;
    struct cx_engine *engine;
    const struct cx_driver_ops *link_ops;
    struct cx_listener *listener;
    char addr[160];
    struct cx_space_accept acc[2]; /* opts.listen, and opts.listen2 when set */
    char addr2[160];
    struct conn *conns;  /* engine thread only */
    struct spipe *pipes; /* engine thread only */
    void *scratch;       /* engine thread's segment buffer */
    size_t scratch_cap;
    int timer_fd;
    int sweep_fd;        /* timerfd: per-connection deadlines (first frame, idle) */
    int spare_fd;        /* kept open to free when accept runs out of fds (EMFILE) */
    int nconns;          /* engine thread only */
    double log_last;     /* rate limit of the per-client log lines (engine thread only) */
    unsigned log_skipped;
    uint64_t next_token; /* migration tokens (engine thread only): random start, then +1 */
    /* UDP lookups */
    char udp_addr[64];
    int udp_fd;
    int udp_stop_fd; /* eventfd that ends the UDP threads */
    int nudp;
    pthread_t udp_threads[CX_SPACE_MAX_UDP_THREADS];
    struct cx_space_server_stats stats; /* updated with atomics */
};

/* Binds the UDP socket (opts.udp rules) and starts opts.udp_threads threads; a no-op when
 * opts.udp is "". */
int cx_space_udp_start(struct cx_space_server *s);
/* Stops and joins them, closes the socket. Safe when never started. */
void cx_space_udp_stop(struct cx_space_server *s);

#endif
