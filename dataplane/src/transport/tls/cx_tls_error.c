/* Errors of the tls driver: a failed SSL call becomes a negative errno and a message that
 * says why in OpenSSL's words (the verify error of a refused certificate, the alert a peer
 * sent when it refused ours). See cx_tls.h. */
#include "transport/tls/cx_tls_int.h"

#include "common/cx_error.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <string.h>

/* TLS alerts that mean "your certificate was not accepted". */
static int cert_alert(int alert)
{
    switch (alert) {
    case SSL_AD_BAD_CERTIFICATE:
    case SSL_AD_UNSUPPORTED_CERTIFICATE:
    case SSL_AD_CERTIFICATE_REVOKED:
    case SSL_AD_CERTIFICATE_EXPIRED:
    case SSL_AD_CERTIFICATE_UNKNOWN:
    case SSL_AD_UNKNOWN_CA:
    case SSL_AD_ACCESS_DENIED:
    case SSL_AD_CERTIFICATE_REQUIRED:
        return 1;
    default:
        return 0;
    }
}

int cx_tls_error(SSL *ssl, int ret, const struct cx_tls_sock *s, const char *what, const char *peer)
{
    int e = SSL_get_error(ssl, ret);
    unsigned long first = ERR_peek_error();
    int reason = first ? ERR_GET_REASON(first) : 0;
    char text[512];
    cx_tls_err_text(text, sizeof text);
    long vr = SSL_get_verify_result(ssl);
    if (vr != X509_V_OK)
        return cx_err_set(EACCES, "tls: %s %s: the peer's certificate was refused: %s (verify error %ld)",
                          what, peer, X509_verify_cert_error_string(vr), vr);
    if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE)
        return cx_err_set(EACCES, "tls: %s %s: the peer presented no certificate (mutual "
                          "authentication is required): %s", what, peer, text);
    if (reason > SSL_AD_REASON_OFFSET && cert_alert(reason - SSL_AD_REASON_OFFSET))
        return cx_err_set(EACCES, "tls: %s %s: the peer refused our certificate: %s", what, peer, text);
    if (e == SSL_ERROR_ZERO_RETURN)
        return cx_err_set(ECONNRESET, "tls: %s %s: the peer closed the session", what, peer);
    if (s->eof || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)
        return cx_err_set(ECONNRESET, "tls: %s %s: the peer closed the connection", what, peer);
    if (e == SSL_ERROR_SYSCALL)
        return cx_err_set(s->err == ECONNRESET || s->err == EPIPE || !s->err ? ECONNRESET : s->err,
                          "tls: %s %s: %s", what, peer, s->err ? strerror(s->err) : "connection lost");
    return cx_err_set(EPROTO, "tls: %s %s: %s", what, peer, text);
}
