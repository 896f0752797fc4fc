/* Test helper: a throw-away PKI made at test time with OpenSSL's C API (no openssl
 * command needed): P-256 keys, a CA, leaf certificates signed by it (subjectAltName DNS,
 * extendedKeyUsage serverAuth + clientAuth), written as PEM files into a temp directory. */
#ifndef TLS_TESTCERTS_H
#define TLS_TESTCERTS_H

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>

struct tc_id {
    EVP_PKEY *key;
    X509 *cert;
};

static int tc_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, issuer ? issuer : cert, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ext)
        return -1;
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* A certificate for cn (and DNS name san, if any), valid from `from_days` to `to_days`
 * relative to now, signed by ca (NULL = self-signed CA). Returns 0 or -1. */
static int tc_make(struct tc_id *out, const char *cn, const char *san, const struct tc_id *ca,
                   long from_days, long to_days, long serial)
{
    out->key = EVP_EC_gen("P-256");
    out->cert = X509_new();
    if (!out->key || !out->cert)
        return -1;
    X509 *x = out->cert;
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400);
    X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400);
    X509_set_pubkey(x, out->key);
    X509_NAME *name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"Conflux test", -1, -1, 0);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, ca ? X509_get_subject_name(ca->cert) : name);
    X509 *issuer = ca ? ca->cert : NULL;
    int bad = 0;
    if (!ca) {
        bad |= tc_ext(x, NULL, NID_basic_constraints, "critical,CA:TRUE");
        bad |= tc_ext(x, NULL, NID_key_usage, "critical,keyCertSign,cRLSign");
        bad |= tc_ext(x, NULL, NID_subject_key_identifier, "hash");
    } else {
        bad |= tc_ext(x, issuer, NID_basic_constraints, "CA:FALSE");
        bad |= tc_ext(x, issuer, NID_key_usage, "critical,digitalSignature");
        bad |= tc_ext(x, issuer, NID_ext_key_usage, "serverAuth,clientAuth");
        bad |= tc_ext(x, issuer, NID_authority_key_identifier, "keyid");
        if (san) {
            char v[256];
            snprintf(v, sizeof v, "DNS:%s", san);
            bad |= tc_ext(x, issuer, NID_subject_alt_name, v);
        }
    }
    if (bad || !X509_sign(x, ca ? ca->key : out->key, EVP_sha256()))
        return -1;
    return 0;
}

static void tc_free(struct tc_id *id)
{
    EVP_PKEY_free(id->key);
    X509_free(id->cert);
    id->key = NULL;
    id->cert = NULL;
}

/* Writes dir/name.pem (certificate) and dir/name.key (key); returns 0 or -1. Written to a
 * temporary name and renamed, the way certificate renewal tools replace files. */
static int tc_write(const struct tc_id *id, const char *dir, const char *name)
{
    char path[512], tmp[520];
    int ok = 1;
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, name, k ? "key" : "pem");
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f)
            return -1;
        ok &= k ? PEM_write_PrivateKey(f, id->key, NULL, NULL, 0, NULL, NULL)
                : PEM_write_X509(f, id->cert);
        ok &= fclose(f) == 0;
        ok &= rename(tmp, path) == 0;
    }
    return ok ? 0 : -1;
}

/* A CA and a node certificate it signed ("node-1", DNS conflux-test) in a new directory
 * made from the mkdtemp template dir, set as this process's credentials (and so its
 * children's): CONFLUX_TLS_CA, _CERT, _KEY. 0 or -1. */
static inline int tc_env_up(char *dir)
{
    if (!mkdtemp(dir))
        return -1;
    struct tc_id ca = {0}, node = {0};
    int rc = tc_make(&ca, "Conflux test CA", NULL, NULL, -1, 30, 1) |
             tc_make(&node, "node-1", "conflux-test", &ca, -1, 30, 2) | tc_write(&ca, dir, "ca") |
             tc_write(&node, dir, "node");
    tc_free(&ca);
    tc_free(&node);
    const char *var[3] = {"CONFLUX_TLS_CA", "CONFLUX_TLS_CERT", "CONFLUX_TLS_KEY"};
    const char *file[3] = {"ca.pem", "node.pem", "node.key"};
    for (int i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, file[i]);
        setenv(var[i], path, 1);
    }
    return rc ? -1 : 0;
}

/* Unsets what tc_env_up set and removes its directory. */
static inline void tc_env_down(const char *dir)
{
    unsetenv("CONFLUX_TLS_CA");
    unsetenv("CONFLUX_TLS_CERT");
    unsetenv("CONFLUX_TLS_KEY");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "  could not remove %s\n", dir);
}

#endif
