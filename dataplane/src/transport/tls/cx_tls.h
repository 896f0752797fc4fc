/* The tls network driver: "tls://host:port", TLS 1.3 over TCP with mutual authentication
 * (OpenSSL), for links between clusters (ARCHITECTURE.md: "TLS over the WAN").
 *
 * Framing is the tcp driver's: the 48-byte cx_frame header and the payload, back to back,
 * inside the TLS stream. Caps: RELIABLE | ORDERED | STREAM, any size, rank 35 (after tcp).
 * The socket is non-blocking after the handshake; SSL_read / SSL_write are driven by
 * progress like the tcp driver's recv / send, and arm() also reports data OpenSSL has
 * already decrypted (SSL_pending), which no fd would announce.
 *
 * Mutual authentication: both ends present a certificate, and each verifies the other's
 * against the configured CA (TLS 1.3 only). A peer without a
 * certificate, with one from another CA, an expired one, or (when peer_name is set) one not
 * naming peer_name is refused in accept / connect with -EACCES and a message saying why:
 * the OpenSSL verify error ("certificate has expired", "unable to get local issuer
 * certificate", "hostname mismatch"), or, on the side that was refused, the alert its peer
 * sent ("tlsv13 alert certificate required", "tlsv1 alert unknown ca"). So that the
 * connecting side learns it was refused inside connect (in TLS 1.3 its handshake ends before
 * the server has checked its certificate), the accepting side sends one control frame (CTRL,
 * channel 0, format CX_TLS_CTRL_TOKEN, no payload) once it has accepted; connect waits for
 * it. Other handshake failures return -EPROTO, a peer that hangs up -ECONNRESET, a
 * handshake longer than 10 s -ETIMEDOUT. accept handles one peer's handshake at a time;
 * accept_start (cx_driver.h) returns the link at once and runs the handshake inside its
 * progress without blocking, failing it with -ETIMEDOUT past the caller's deadline: a server
 * engine uses it, so a silent or slow peer never holds the other clients.
 *
 * Resumption: a client keeps the session ticket a server sends, per address and expected
 * peer name, and offers it (once) on its next connect there, which then skips both
 * certificate checks (cx_tls_link_resumed says so). A resumed session's certificates were
 * verified when it was made; each side checks again that the other's has not expired since
 * and still names the expected peer, or refuses with -EACCES. Tickets live an hour and die
 * with the credentials: reloaded files (below) make a new context, whose tickets and ticket
 * keys are new.
 *
 * Certificates need extendedKeyUsage serverAuth and clientAuth (or none) since every node
 * both accepts and connects with the same one.
 *
 * Credentials: process-wide, from cx_tls_configure() or, for any field left NULL, from the
 * environment: CONFLUX_TLS_CA, CONFLUX_TLS_CERT, CONFLUX_TLS_KEY, CONFLUX_TLS_PEER_NAME.
 * Renewal while running: every accept and connect stats the three files (device, inode,
 * size, mtime, ctime) and, when any changed, loads them into a new OpenSSL context used
 * from then on; links already open keep the context they were made with. Replace the files
 * by rename (write new, then mv) or in place; if the new set does not load (say the key is
 * not replaced yet and does not match the certificate) the previous credentials stay in use
 * and the load is tried again at the next connection. listen needs a certificate and key;
 * connect without them is possible but every Conflux listener refuses it.
 */
#ifndef CX_TLS_H
#define CX_TLS_H

#include "transport/cx_driver.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cx_tls_config {
    const char *ca_file;   /* PEM: the CA certificate(s) a peer's certificate must chain to */
    const char *cert_file; /* PEM: our certificate, then any intermediate certificates */
    const char *key_file;  /* PEM: our private key (unencrypted) */
    const char *peer_name; /* optional: a DNS name the peer's certificate must carry (its
                            * subjectAltName, or CN when it has none); NULL = any
                            * certificate signed by the CA */
};

/* Sets the credentials for connections made from now on (fields left NULL come from the
 * environment; c = NULL: all from the environment). The files are loaded at once: on
 * failure (missing file, not PEM, key not matching the certificate) the previous
 * configuration stays and the error names the file and OpenSSL's reason. */
int cx_tls_configure(const struct cx_tls_config *c);

/* The subject of the peer's verified certificate ("CN=node-1,O=..." , RFC 2253 order) into
 * buf[cap]. -EINVAL when k is not a tls link. */
int cx_tls_peer_subject(struct cx_link *k, char *buf, size_t cap);

/* Where the link's TLS records are made and opened: "kernel" (kTLS) or "user" (OpenSSL in
 * this process; the only path so far: the driver logs once per process whether the kernel
 * offers kTLS). NULL when k is not a tls link. */
const char *cx_tls_link_path(struct cx_link *k);

/* 1 when the link's handshake resumed an earlier session (a TLS 1.3 ticket the client kept
 * from an earlier link to the same address), 0 for a full handshake (or one not done yet),
 * -EINVAL when k is not a tls link. */
int cx_tls_link_resumed(struct cx_link *k);

/* The format token of the driver's control frame: the bytes "CXTLSCTL". */
#define CX_TLS_CTRL_TOKEN 0x4C54435354495843ull

extern const struct cx_driver_ops cx_tls_ops;

#ifdef __cplusplus
}
#endif
#endif
