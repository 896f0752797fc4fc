/* The sidecar (confluxd --role=sidecar): serves the applications of one pod.
 *
 * Applications connect to its Unix socket (cx_sc_proto.h) and get a shared-memory region
 * of rings; their pipe and channel calls run here, on this process's links (one channel
 * runtime, one pipe runtime, so every channel and pipe of the pod shares them). An HTTP
 * endpoint serves /metrics (Prometheus text), /healthz and /readyz. Logs are one JSON
 * object per line on stderr.
 *
 *     struct cx_sidecar *sc;
 *     cx_sidecar_start(&(struct cx_sidecar_opts){.socket = "/run/conflux/confluxd.sock"}, &sc);
 *     ... until SIGTERM ...
 *     cx_sidecar_stop(sc);
 */
#ifndef CX_SIDECAR_H
#define CX_SIDECAR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_sidecar;

struct cx_sidecar_opts {
    const char *socket;     /* Unix socket path (required); an old socket file is replaced */
    const char *http;       /* "H:P" of the HTTP endpoint (default 0.0.0.0:9464; port 0 = any);
                             * "" = none */
    const char *transport;  /* tcp (default), rdma (ucx links), dpdk, shm, tls */
    const char *listen;     /* the channel runtime's listen address (default from transport) */
    const char *advertise;  /* the address other processes dial (default: derived) */
    const char *space;      /* a space server whose reachability /readyz checks, or NULL */
    const char *inputs, *outputs, *channels; /* channel names declared for the pod (lists) */
    uint64_t ring_size;     /* bytes of each ring per application connection (default 16M) */
    /* who may connect: the socket file's mode (default 0666: the pod's containers may run
     * as different users; the socket's directory is the pod's own volume) and, when
     * allow_uids is set ("1000,1001"), only processes of those users (SO_PEERCRED) and of
     * this process's own. A session belongs to the user that opened it: a connection of
     * another user naming it is refused. */
    unsigned socket_mode;
    const char *allow_uids;
    int quiet;              /* no info logs (warnings and errors still) */
    /* identity, for logs and metrics labels (the operator sets these in the environment) */
    const char *pod, *ns, *node, *fabric, *restart_policy;
};

/* Starts the sidecar: socket, channel runtime, HTTP endpoint and their threads. 0 or a
 * negative errno with cx_errmsg() (bad address, port in use, socket path too long). */
int cx_sidecar_start(const struct cx_sidecar_opts *o, struct cx_sidecar **out);

/* The HTTP endpoint's bound address ("127.0.0.1:9464"), "" when none. */
const char *cx_sidecar_http_addr(const struct cx_sidecar *sc);

/* The channel runtime's advertised address. */
const char *cx_sidecar_chan_addr(const struct cx_sidecar *sc);

/* Stops accepting, disconnects the applications (closing what they left open), stops the
 * runtime and frees everything. */
void cx_sidecar_stop(struct cx_sidecar *sc);

#ifdef __cplusplus
}
#endif
#endif
