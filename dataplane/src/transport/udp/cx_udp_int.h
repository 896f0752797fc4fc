/* Internals of the udp driver shared by its files (not a public header). */
#ifndef CX_UDP_INT_H
#define CX_UDP_INT_H

#include "transport/udp/cx_udp.h"

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

enum udp_ctrl_op {
    UDP_HELLO = 1,   /* connecting peer -> listener */
    UDP_WELCOME = 2, /* accepted socket -> connecting peer */
    UDP_PING = 3,
    UDP_PONG = 4,
    UDP_BYE = 5,     /* the link was closed */
};

#define UDP_CTRL_VERSION 1
#define UDP_CTRL_LEN 16

/* --- cx_udp_sock.c: sockets and control frames --- */

/* A non-blocking, close-on-exec UDP socket with large buffers. Negative errno on failure. */
int cx_udp_socket(void);
/* The payload limit for a connected socket (see cx_udp.h: route MTU, env override). */
size_t cx_udp_max_msg(int fd);
/* Sends one control frame on a connected socket (to = NULL) or to an address. */
int cx_udp_ctrl_send(int fd, const struct sockaddr_in *to, int op, uint64_t nonce);
/* If the datagram d[0..n) is one of our control frames: 1 with *op and *nonce set. 0 when
 * it is not a control frame of ours. */
int cx_udp_ctrl_parse(const uint8_t *d, size_t n, int *op, uint64_t *nonce);
/* "a.b.c.d:port" of sa into out[cap]. */
void cx_udp_addr_str(const struct sockaddr_in *sa, char *out, size_t cap);

/* --- cx_udp.c: the link --- */

/* Wraps a connected socket (owned) as a link to peer. nonce is the handshake's (a server
 * link answers a repeated HELLO with it). */
int cx_udp_link_new(int fd, const struct sockaddr_in *peer, uint64_t nonce, int server,
                    struct cx_link **out);

/* --- cx_udp_handshake.c: listen, accept, connect (contracts in cx_driver.h) --- */
int cx_udp_listen(const char *addr, struct cx_listener **out);
const char *cx_udp_listener_addr(struct cx_listener *l);
int cx_udp_listener_fd(struct cx_listener *l);
int cx_udp_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out);
void cx_udp_listener_close(struct cx_listener *l);
int cx_udp_connect(const char *addr, struct cx_link **out);

#endif
