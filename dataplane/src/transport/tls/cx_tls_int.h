/* Internals of the tls driver shared by its files (not a public header). */
#ifndef CX_TLS_INT_H
#define CX_TLS_INT_H

#include "transport/tls/cx_tls.h"

#include <openssl/ssl.h>

/* --- cx_tls_creds.c --- */

/* A context with the current credentials (reloaded if the files changed), with a reference
 * for the caller (SSL_CTX_free it). need_cert: refuse a configuration without cert/key. */
int cx_tls_ctx_acquire(int need_cert, SSL_CTX **out);
/* The configured expected peer name, copied into buf[cap] ("" = none). */
void cx_tls_peer_name(char *buf, size_t cap);

/* --- cx_tls_caps.c: what this machine offers, probed and logged once per process --- */

/* The TLS 1.3 cipher suites in preference order: AES-GCM first when the CPU has AES
 * instructions, ChaCha20-Poly1305 first when not. */
const char *cx_tls_ciphersuites(void);
/* 1 when the kernel offers the "tls" TCP upper-layer protocol (kTLS). */
int cx_tls_kernel_offers_ktls(void);

/* --- cx_tls_resume.c: session resumption (TLS 1.3 tickets) --- */

#define CX_TLS_TICKET_S 3600 /* a ticket's lifetime */
/* Sets a new context up for resumption (session id context, one ticket per handshake, the
 * client's ticket table). 0 or -ENOMEM. */
int cx_tls_resume_setup(SSL_CTX *ctx);
/* Client, before its handshake: offers the ticket kept for (its context, addr, name) if
 * any, and marks ssl so tickets it receives are kept under that key. 0 or -ENOMEM. */
int cx_tls_resume_offer(SSL *ssl, const char *addr, const char *name);
/* After a handshake: 0 when it was a full one, or when a resumed session's peer certificate
 * has not expired and still names the expected peer; else -EACCES with a message. */
int cx_tls_resumed_check(SSL *ssl, const char *what, const char *peer);

/* --- cx_tls_bio.c: a socket BIO that never raises SIGPIPE and sends records in batches --- */

#define CX_TLS_WBUF (128u << 10) /* records gathered per send(2) */

struct cx_tls_sock {
    int fd;
    int err; /* errno of the last failed send/recv, 0 after EOF */
    int eof; /* the peer closed the TCP connection */
    size_t woff, wlen; /* records written by OpenSSL, not sent yet: wbuf[woff..wlen) */
    uint8_t wbuf[CX_TLS_WBUF];
};
/* A BIO over s (not owned: the fd is closed by its owner). NULL on out of memory. Records
 * OpenSSL writes are gathered in s->wbuf and sent when it is full or on BIO_flush (which
 * OpenSSL calls after handshake messages and alerts; the driver after its writes). */
BIO *cx_tls_bio_new(struct cx_tls_sock *s);
/* Sends what s->wbuf holds: 1 when it is empty, 0 when the socket is full (the rest stays),
 * -1 on a socket error (s->err). */
int cx_tls_sock_drain(struct cx_tls_sock *s);

/* --- cx_tls_error.c --- */

/* Turns a failed SSL call (its return value ret) into a negative errno with a message
 * "tls: <what> <peer>: <why>": -EACCES for a refused certificate (ours or theirs), -ECONNRESET
 * when the peer hung up, -EPROTO otherwise. Clears OpenSSL's error queue. */
int cx_tls_error(SSL *ssl, int ret, const struct cx_tls_sock *s, const char *what, const char *peer);
/* OpenSSL's queued errors as text (oldest first, "; "-joined) into buf[cap]; clears them. */
void cx_tls_err_text(char *buf, size_t cap);

/* --- cx_tls.c: the link --- */

/* Wraps an established session (handshake done; ssl, fd and sock owned). rbuf/rlen: bytes
 * already read past the handshake (copied). */
int cx_tls_link_new(int fd, SSL *ssl, struct cx_tls_sock *sock, const char *peer,
                    const uint8_t *rbuf, size_t rlen, struct cx_link **out);

/* The same for the accepting side of a session whose handshake has not run yet: progress
 * runs it without blocking and fails the link (-ETIMEDOUT) past handshake_ms. */
int cx_tls_link_new_accepting(int fd, SSL *ssl, struct cx_tls_sock *sock, const char *peer,
                              int handshake_ms, struct cx_link **out);

/* --- cx_tls_handshake.c: listen, accept, connect --- */
long long cx_tls_now_ms(void); /* CLOCK_MONOTONIC */
/* The accepting side's "you are in": CTRL on channel 0 with CX_TLS_CTRL_TOKEN, no payload. */
void cx_tls_welcome_frame(uint8_t out[CX_FRAME_HDR_SIZE]);
int cx_tls_accept_start(struct cx_listener *l, int handshake_ms, struct cx_link **out);
int cx_tls_listen(const char *addr, struct cx_listener **out);
const char *cx_tls_listener_addr(struct cx_listener *l);
int cx_tls_listener_fd(struct cx_listener *l);
int cx_tls_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out);
void cx_tls_listener_close(struct cx_listener *l);
int cx_tls_connect(const char *addr, struct cx_link **out);

#endif
