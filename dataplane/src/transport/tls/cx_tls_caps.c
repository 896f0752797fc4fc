/* What this machine offers the tls driver, probed once per process and logged once: AES
 * instructions in the CPU (AES-GCM first when present, ChaCha20-Poly1305 first when not)
 * and the kernel's TLS offload (the "tls" TCP upper-layer protocol, kTLS). */
#include "transport/tls/cx_tls_int.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define AES_FIRST "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"
#define CHACHA_FIRST "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int cpu_aes;
static int kernel_tls;
static char ulps[128];

/* 1 when the space-separated list line holds word. */
static int has_word(const char *line, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = line; (p = strstr(p, word)); p += n)
        if ((p == line || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':') &&
            (p[n] == ' ' || p[n] == '\t' || p[n] == '\n' || p[n] == 0))
            return 1;
    return 0;
}

static void probe(void)
{
    char line[4096];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) /* x86 "flags", arm64 "Features" */
        if ((!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) && has_word(line, "aes")) {
            cpu_aes = 1;
            break;
        }
    if (f)
        fclose(f);
    snprintf(ulps, sizeof ulps, "unreadable");
    if ((f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "r"))) {
        if (fgets(ulps, sizeof ulps, f))
            ulps[strcspn(ulps, "\n")] = 0;
        else
            ulps[0] = 0;
        fclose(f);
        kernel_tls = has_word(ulps, "tls");
    }
    fprintf(stderr, "conflux tls: records made in user space by OpenSSL: %s (tcp_available_ulp: "
            "'%s'); cipher preference %s (the CPU has %sAES instructions)\n",
            kernel_tls ? "the kernel offers kTLS, but the driver does not hand its keys to it"
                       : "the kernel offers no kTLS",
            ulps, cpu_aes ? "AES-GCM first" : "ChaCha20-Poly1305 first", cpu_aes ? "" : "no ");
}

const char *cx_tls_ciphersuites(void)
{
    pthread_once(&once, probe);
    return cpu_aes ? AES_FIRST : CHACHA_FIRST;
}

int cx_tls_kernel_offers_ktls(void)
{
    pthread_once(&once, probe);
    return kernel_tls;
}
