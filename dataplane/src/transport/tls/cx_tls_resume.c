/* Session resumption of the tls driver (TLS 1.3 tickets), so that reconnecting after a WAN
 * blip costs one round trip of symmetric crypto instead of two certificate checks.
 *
 * Client: every ticket a server sends is kept, one per (context, "host:port|peer name"), in
 * a small table (the oldest entry makes room); connect offers it once (a ticket is used at
 * most once; the resumed session brings a fresh one). Server: tickets are stateless,
 * sealed with keys of the context that issued them, so credentials reloaded into a new
 * context (cx_tls_creds.c) end every resumption made under the old ones; the client's table
 * is keyed by its context for the same reason.
 *
 * A resumed handshake shows no certificate. What the full handshake verified (chain to the
 * CA) is kept in the session; what can change since is checked again on both sides before
 * the link exists (cx_tls_resumed_check): the peer's certificate must not have expired and
 * must still carry the expected peer name. */
#include "transport/tls/cx_tls_int.h"

#include "common/cx_error.h"

#include <errno.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_N 64
#define KEY_MAX 320

struct entry {
    SSL_CTX *ctx; /* a reference: the pointer cannot be reused while the entry lives */
    char key[KEY_MAX];
    SSL_SESSION *sess;
    unsigned long long stamp; /* larger = newer */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry cache[CACHE_N];
static unsigned long long clock_;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int key_idx = -1; /* SSL ex_data: the cache key of a client session (malloc'd) */

static void free_key(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    free(ptr);
}

static void init(void) { key_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, free_key); }

static void drop(struct entry *e)
{
    SSL_SESSION_free(e->sess);
    SSL_CTX_free(e->ctx);
    memset(e, 0, sizeof *e);
}

/* OpenSSL's new-session callback (set on every context): keeps a client's ticket. */
static int on_new_session(SSL *ssl, SSL_SESSION *sess)
{
    const char *key = key_idx >= 0 ? SSL_get_ex_data(ssl, key_idx) : NULL;
    if (!key || !SSL_SESSION_is_resumable(sess))
        return 0;
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    pthread_mutex_lock(&lock);
    struct entry *slot = NULL;
    for (int i = 0; i < CACHE_N && !slot; i++)
        if (cache[i].sess && cache[i].ctx == ctx && !strcmp(cache[i].key, key))
            slot = &cache[i];
    for (int i = 0; i < CACHE_N && !slot; i++)
        if (!cache[i].sess)
            slot = &cache[i];
    if (!slot) {
        slot = &cache[0];
        for (int i = 1; i < CACHE_N; i++)
            if (cache[i].stamp < slot->stamp)
                slot = &cache[i];
    }
    if (slot->sess)
        drop(slot);
    SSL_CTX_up_ref(ctx);
    slot->ctx = ctx;
    snprintf(slot->key, sizeof slot->key, "%s", key);
    slot->sess = sess; /* returning 1: the reference is ours */
    slot->stamp = ++clock_;
    pthread_mutex_unlock(&lock);
    return 1;
}

int cx_tls_resume_setup(SSL_CTX *ctx)
{
    pthread_once(&once, init);
    if (key_idx < 0)
        return -ENOMEM;
    static const unsigned char sid[] = "conflux-tls";
    if (SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1) != 1)
        return -ENOMEM;
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_timeout(ctx, CX_TLS_TICKET_S);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL);
    SSL_CTX_sess_set_new_cb(ctx, on_new_session);
    return 0;
}

int cx_tls_resume_offer(SSL *ssl, const char *addr, const char *name)
{
    pthread_once(&once, init);
    char *key = malloc(KEY_MAX);
    if (!key || key_idx < 0 || !SSL_set_ex_data(ssl, key_idx, key)) {
        free(key);
        return -ENOMEM;
    }
    snprintf(key, KEY_MAX, "%s|%s", addr, name);
    SSL_CTX *ctx = SSL_get_SSL_CTX(ssl);
    SSL_SESSION *sess = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < CACHE_N; i++) {
        if (!cache[i].sess || strcmp(cache[i].key, key))
            continue;
        if (cache[i].ctx == ctx) { /* taken out: a ticket is offered once */
            sess = cache[i].sess;
            cache[i].sess = NULL;
        }
        drop(&cache[i]); /* (made under older credentials: useless now) */
    }
    pthread_mutex_unlock(&lock);
    if (sess) {
        SSL_set_session(ssl, sess); /* takes its own reference */
        SSL_SESSION_free(sess);
    }
    return 0;
}

int cx_tls_resumed_check(SSL *ssl, const char *what, const char *peer)
{
    if (!SSL_session_reused(ssl))
        return 0;
    X509 *cert = SSL_get0_peer_certificate(ssl);
    if (!cert)
        return cx_err_set(EACCES, "tls: %s %s: resumed session without the peer's certificate",
                          what, peer);
    if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
        return cx_err_set(EACCES, "tls: %s %s: certificate has expired (since the session it "
                          "resumes was made)", what, peer);
    char name[256];
    cx_tls_peer_name(name, sizeof name);
    if (*name && X509_check_host(cert, name, 0, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS, NULL) != 1)
        return cx_err_set(EACCES, "tls: %s %s: hostname mismatch (the resumed session's "
                          "certificate does not name '%s')", what, peer, name);
    return 0;
}
