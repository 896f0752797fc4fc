/* The space server: confluxd --role=space (seed pi-channels.txt, "Design and
 * implementation": the π-Server keeps the name table, caches every pipe and forwards it to
 * readers; lookups over UDP with retransmission, streams over TCP).
 *
 * One progress engine thread serves every TCP client (requests, writers' segments, readers'
 * streams; protocol in cx_space_proto.h); UDP lookup threads answer LOOKUP requests (name
 * table reads only, so they scale over cores); a timer drives the fsync interval. State on
 * disk: the segment store (cx_segstore.h), the name table (cx_nametable.h) and the format
 * store (cx_space_formats.h), all under opts.dir, recovered at start.
 *
 *     struct cx_space_server_opts o = {.dir = "/var/lib/conflux", .listen = "tcp://0.0.0.0:7400"};
 *     struct cx_space_server *s;
 *     cx_space_server_start(&o, &s);      // threads running; returns once listening
 *     printf("%s\n", cx_space_server_addr(s));
 *     cx_space_server_stop(s);            // closes clients, syncs and closes the store
 */
#ifndef CX_SPACE_SERVER_H
#define CX_SPACE_SERVER_H

#include "space/cx_segstore.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_space_server_opts {
    const char *dir;       /* store directory (created if missing); required */
    const char *listen;    /* TCP address, default "tcp://127.0.0.1:0" */
    const char *listen2;   /* optional second client address, any scheme (e.g.
                            * "tls://0.0.0.0:7443" for clients in other clusters: the tls
                            * driver's credentials, transport/tls/cx_tls.h); NULL = none.
                            * Clients of both addresses share the pipes. */
    const char *udp;       /* UDP lookup address "host:port": NULL = the TCP host and port,
                            * "" = no UDP service */
    int udp_threads;       /* default 1 */
    struct cx_seg_pipe_opts pipe; /* fsync policy and retention of every pipe */
    uint32_t max_segment;  /* largest segment accepted, default 64 MiB; a frame declaring
                            * more is refused from its header, before anything is
                            * allocated (its bytes are read and dropped) */
    int max_clients;       /* connections served at once; default 3000, at most half the
                            * fd limit (RLIMIT_NOFILE): the rest is for pipes' logs. Beyond
                            * it a new connection is closed at once (logged once a second) */
    int first_frame_ms;    /* a client's TLS handshake and first frame must be done within
                            * this, else it is closed and logged; default 5000 */
    int idle_ms;           /* a client with no pipe open that sent nothing for this long is
                            * closed; 0 (default) = never */
    int quiet;             /* no log lines on stderr */
};

struct cx_space_server_stats {
    uint64_t requests, udp_lookups, segments_in, bytes_in, segments_out, bytes_out, clients;
    uint64_t pipes_open, names, formats;
    uint64_t clients_refused;   /* closed at accept: over max_clients or out of fds */
    uint64_t clients_dropped;   /* closed for a deadline, a bad frame or unread output */
};

struct cx_space_server;

/* Opens the store (-EBUSY when another process owns it; -EBADMSG on corruption, see
 * cx_segstore.h), binds the sockets (-EADDRINUSE) and starts the threads. */
int cx_space_server_start(const struct cx_space_server_opts *o, struct cx_space_server **out);

/* "tcp://a.b.c.d:port" clients connect to, and "a.b.c.d:port" of the UDP service ("" when
 * disabled). Valid until stop. */
const char *cx_space_server_addr(struct cx_space_server *s);
/* The second address (opts.listen2, its port resolved), "" when none. */
const char *cx_space_server_addr2(struct cx_space_server *s);
const char *cx_space_server_udp_addr(struct cx_space_server *s);

void cx_space_server_stats(struct cx_space_server *s, struct cx_space_server_stats *out);

/* Stops the threads, drops the clients, syncs and closes every pipe and the store. */
void cx_space_server_stop(struct cx_space_server *s);

#ifdef __cplusplus
}
#endif
#endif
