/* The small subset of the NATS client protocol the JetStream peer needs, over one TCP
 * socket (Debian's libnats-dev is not among the project's packages): INFO, CONNECT,
 * PING/PONG, SUB, PUB with a reply subject, MSG and HMSG (with a status line), -ERR.
 * JetStream's API is request/reply JSON on $JS.API.* subjects, done with nc_request.
 *
 * Writes are buffered (nc_flush, or any call that waits for input, sends them); a message
 * returned by nc_next points into the receive buffer and is valid until the next call.
 * Errors: a negative errno and a message in nc_errmsg(c). */
#ifndef NATS_PROTO_H
#define NATS_PROTO_H

#include <stddef.h>
#include <stdint.h>

struct nc;

struct nc_msg {
    const char *subject, *reply; /* NUL-terminated (inside the buffer) */
    int sid;
    int status;                  /* HMSG "NATS/1.0 408 ...": 408; 0 for data */
    const char *hdr;             /* HMSG headers (hdr_len bytes), NULL for MSG */
    size_t hdr_len;
    const uint8_t *data;
    size_t len;
};

/* Connects to "host:port", reads INFO, sends CONNECT (headers on) and waits for the PONG
 * of a PING, so the server has accepted us. */
int nc_connect(const char *hostport, struct nc **out);
void nc_close(struct nc *c);
const char *nc_errmsg(struct nc *c);

int nc_sub(struct nc *c, const char *subject, int sid);
/* Queues a PUB (reply may be NULL). Large payloads are written directly (no copy). */
int nc_pub(struct nc *c, const char *subject, const char *reply, const void *p, size_t len);
int nc_flush(struct nc *c);

/* The next MSG/HMSG (answering PINGs on the way): 1 and *m filled, 0 when timeout_ms
 * passed (0 polls once, -1 waits), or a negative errno (-ECONNRESET, -EPROTO for -ERR). */
int nc_next(struct nc *c, struct nc_msg *m, int timeout_ms);

/* Publishes json to subject and waits for the reply on a private inbox; copies the reply
 * (NUL-terminated, truncated to cap) into out. Messages of other subscriptions that
 * arrive meanwhile are dropped, so call it before data flows. */
int nc_request(struct nc *c, const char *subject, const char *json, char *out, size_t cap,
               int timeout_ms);

#endif
