/* Credentials of the tls driver: the configuration (cx_tls_configure, else the
 * environment), the OpenSSL context built from its files, and its reload when the files
 * change (certificate renewal while running). See cx_tls.h. */
#include "transport/tls/cx_tls_int.h"

#include "common/cx_error.h"

#include <openssl/err.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define READ_BUF (256u << 10) /* OpenSSL's read-ahead buffer per session */

enum { F_CA, F_CERT, F_KEY, F_PEER, F_N };
static const char *const env_names[F_N] = {"CONFLUX_TLS_CA", "CONFLUX_TLS_CERT", "CONFLUX_TLS_KEY",
                                           "CONFLUX_TLS_PEER_NAME"};

/* What a set of files looked like when loaded: any difference means "reload". */
struct files_sig {
    char path[3][512];
    struct { dev_t dev; ino_t ino; off_t size; struct timespec mtime, ctime; int ok; } st[3];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *cfg[F_N];       /* configured values; NULL = from the environment */
static SSL_CTX *cur;         /* the context new connections get */
static struct files_sig cur_sig;

static const char *value(int f)
{
    const char *v = cfg[f] ? cfg[f] : getenv(env_names[f]);
    return v && *v ? v : NULL;
}

static void take_sig(const char *const paths[3], struct files_sig *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 3; i++) {
        struct stat st;
        snprintf(s->path[i], sizeof s->path[i], "%s", paths[i] ? paths[i] : "");
        if (paths[i] && stat(paths[i], &st) == 0) {
            s->st[i].dev = st.st_dev, s->st[i].ino = st.st_ino, s->st[i].size = st.st_size;
            s->st[i].mtime = st.st_mtim, s->st[i].ctime = st.st_ctim, s->st[i].ok = 1;
        }
    }
}

void cx_tls_err_text(char *buf, size_t cap)
{
    size_t n = 0;
    char last[256] = "";
    buf[0] = 0;
    unsigned long e;
    while ((e = ERR_get_error()) != 0) {
        char one[256];
        const char *r = ERR_reason_error_string(e);
        if (ERR_SYSTEM_ERROR(e))
            snprintf(one, sizeof one, "%s", strerror(ERR_GET_REASON(e)));
        else if (r)
            snprintf(one, sizeof one, "%s", r);
        else
            ERR_error_string_n(e, one, sizeof one);
        if (!strcmp(one, last) || !strcmp(one, "system lib")) /* OpenSSL repeats itself */
            continue;
        snprintf(last, sizeof last, "%s", one);
        if (n < cap)
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? "; " : "", one);
    }
    if (!buf[0])
        snprintf(buf, cap, "no detail from OpenSSL");
}

static int ssl_fail(SSL_CTX *ctx, const char *what, const char *path)
{
    char why[512];
    cx_tls_err_text(why, sizeof why);
    SSL_CTX_free(ctx);
    return cx_err_set(EINVAL, "tls: %s '%s': %s", what, path, why);
}

/* A context from the files (cert and key may both be NULL: a connect-only identity). */
static int build(const char *ca, const char *cert, const char *key, SSL_CTX **out)
{
    if (!ca)
        return cx_err_set(ENOKEY, "tls: no CA configured (cx_tls_configure or CONFLUX_TLS_CA)");
    if (!cert != !key)
        return cx_err_set(EINVAL, "tls: a certificate needs its key and a key its certificate "
                          "(cert '%s', key '%s')", cert ? cert : "none", key ? key : "none");
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx)
        return ssl_fail(NULL, "cannot create a context for", ca);
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        return ssl_fail(ctx, "CA file", ca);
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ca); /* named in CertificateRequest */
    if (names)
        SSL_CTX_set_client_CA_list(ctx, names);
    ERR_clear_error();
    if (cert && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return ssl_fail(ctx, "certificate file", cert);
    /* (loading the key also checks that it belongs to the certificate) */
    if (key && SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        char why[512];
        cx_tls_err_text(why, sizeof why);
        SSL_CTX_free(ctx);
        return cx_err_set(EINVAL, "tls: key file '%s' (for certificate '%s'): %s", key, cert, why);
    }
    if (cert && SSL_CTX_check_private_key(ctx) != 1)
        return ssl_fail(ctx, "key does not match the certificate", cert);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    if (cx_tls_resume_setup(ctx) < 0) { /* tickets: see cx_tls_resume.c */
        SSL_CTX_free(ctx);
        return cx_err_set(ENOMEM, "tls: out of memory for a context");
    }
    if (SSL_CTX_set_ciphersuites(ctx, cx_tls_ciphersuites()) != 1)
        return ssl_fail(ctx, "cipher suites for", ca);
    /* throughput: full 16 KiB records; OpenSSL reads whole batches of records per recv
     * (read-ahead into a buffer of READ_BUF bytes) and keeps its buffers between calls */
    SSL_CTX_set_max_send_fragment(ctx, SSL3_RT_MAX_PLAIN_LENGTH);
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, READ_BUF);
    SSL_CTX_clear_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    *out = ctx;
    return 0;
}

/* With the lock held: makes cur match the current configuration and files. force: the
 * configuration itself changed, so a failure is an error even with an older context. */
static int refresh(int force)
{
    const char *paths[3] = {value(F_CA), value(F_CERT), value(F_KEY)};
    struct files_sig s;
    take_sig(paths, &s);
    if (cur && !force && memcmp(&s, &cur_sig, sizeof s) == 0)
        return 0;
    int same_paths = cur && !strcmp(s.path[0], cur_sig.path[0]) && !strcmp(s.path[1], cur_sig.path[1]) &&
                     !strcmp(s.path[2], cur_sig.path[2]);
    SSL_CTX *ctx = NULL;
    int rc = build(paths[F_CA], paths[F_CERT], paths[F_KEY], &ctx);
    if (rc < 0) {
        if (same_paths && !force) { /* files half renewed: keep serving with the old set */
            cx_err_clear();
            return 0;
        }
        return rc;
    }
    SSL_CTX_free(cur); /* links made with it hold their own reference */
    cur = ctx;
    cur_sig = s;
    return 0;
}

int cx_tls_configure(const struct cx_tls_config *c)
{
    const char *in[F_N] = {c ? c->ca_file : NULL, c ? c->cert_file : NULL, c ? c->key_file : NULL,
                           c ? c->peer_name : NULL};
    char *old[F_N], *neu[F_N];
    for (int f = 0; f < F_N; f++) {
        neu[f] = in[f] ? strdup(in[f]) : NULL;
        if (in[f] && !neu[f]) {
            for (int g = 0; g < f; g++) free(neu[g]);
            return cx_err_set(ENOMEM, "tls: out of memory");
        }
    }
    pthread_mutex_lock(&lock);
    memcpy(old, cfg, sizeof old);
    memcpy(cfg, neu, sizeof cfg);
    int rc = refresh(1);
    char **drop = old;
    if (rc < 0) { /* keep what worked */
        memcpy(cfg, old, sizeof cfg);
        drop = neu;
    }
    pthread_mutex_unlock(&lock);
    for (int f = 0; f < F_N; f++) free(drop[f]);
    return rc;
}

int cx_tls_ctx_acquire(int need_cert, SSL_CTX **out)
{
    pthread_mutex_lock(&lock);
    int rc = refresh(0);
    if (rc == 0 && need_cert && (!value(F_CERT) || !value(F_KEY)))
        rc = cx_err_set(ENOKEY, "tls: listening needs a certificate and its key (cx_tls_configure, "
                        "or CONFLUX_TLS_CERT and CONFLUX_TLS_KEY)");
    if (rc == 0) {
        SSL_CTX_up_ref(cur);
        *out = cur;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void cx_tls_peer_name(char *buf, size_t cap)
{
    pthread_mutex_lock(&lock);
    const char *v = value(F_PEER);
    snprintf(buf, cap, "%s", v ? v : "");
    pthread_mutex_unlock(&lock);
}
