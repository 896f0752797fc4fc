/* One-way latency and bandwidth of one Conflux network driver between two processes on
 * this machine (the parent listens, a forked child connects; both busy-poll, as the
 * progress engine does while traffic flows).
 *
 *   transport_bench <shm|tcp|ucx|tls> lat <iterations> <size>   ping-pong, one-way = RTT / 2
 *   transport_bench <shm|tcp|ucx|tls> bw  <messages>   <size>   streaming, the receiver acks the last
 *
 * tls runs with a throw-away CA and node certificate made at start (the tls tests' helper,
 * tls_testcerts.h) and reports which record path its links used ("tls_path").
 *
 * Prints one JSON object on stdout: {"driver":..,"test":..,"size":..,"n":..,
 * "median_us":..,"avg_us":..} or {..,"MBps":..} (MB = 10^6 bytes). */
#include "common/cx_error.h"
#include "transport/cx_driver.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef CX_HAVE_UCX
extern const struct cx_driver_ops cx_ucx_ops;
#endif
#ifdef CX_HAVE_TLS
#include "transport/tls/cx_tls.h"
#include "transport/tls/tls_testcerts.h"
#endif

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void count(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h, (void)p, (void)n;
    (*(uint64_t *)arg)++;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "transport_bench: %s: %d (%s)\n", what, rc, cx_errmsg());
    exit(1);
}

#define CK(expr)                                                                           \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        if (rc_ < 0) die(#expr, rc_);                                                      \
    } while (0)

static void wait_msgs(struct cx_link *k, uint64_t *got, uint64_t want)
{
    while (*got < want) CK(cx_link_progress(k, count, got, 16));
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s <shm|tcp|ucx|tls> <lat|bw> <n> <size>\n", argv[0]);
        return 2;
    }
    const char *drv = argv[1], *test = argv[2];
    long n = atol(argv[3]);
    size_t size = (size_t)atol(argv[4]);
    char addr[256];
    const struct cx_driver_ops *ops = NULL;
    if (!strcmp(drv, "shm")) {
        ops = &cx_shm_ops;
        snprintf(addr, sizeof addr, "shm:///tmp/cx-bench-%d.sock", (int)getpid());
    } else if (!strcmp(drv, "tcp")) {
        ops = &cx_tcp_ops;
        snprintf(addr, sizeof addr, "tcp://127.0.0.1:0");
    }
#ifdef CX_HAVE_UCX
    else if (!strcmp(drv, "ucx")) {
        ops = &cx_ucx_ops;
        snprintf(addr, sizeof addr, "ucx://127.0.0.1:0");
    }
#endif
#ifdef CX_HAVE_TLS
    char pki[64] = "/tmp/cx-bench-pki-XXXXXX";
    int have_pki = 0;
    if (!strcmp(drv, "tls")) {
        if (tc_env_up(pki) < 0) {
            fprintf(stderr, "transport_bench: cannot make a test PKI in %s\n", pki);
            return 1;
        }
        have_pki = 1;
        ops = &cx_tls_ops;
        snprintf(addr, sizeof addr, "tls://127.0.0.1:0");
    }
#endif
    if (!ops) {
        fprintf(stderr, "transport_bench: driver '%s' not built in\n", drv);
        return 2;
    }
    struct cx_listener *l;
    CK(ops->listen(addr, &l));
    uint8_t *buf = calloc(1, size ? size : 1);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    struct iovec v = {buf, size};
    int lat = !strcmp(test, "lat");
    long warm = lat ? n / 10 + 100 : 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* client: measures and prints */
        struct cx_link *k;
        CK(ops->connect(ops->listener_addr(l), &k));
        char extra[64] = "";
#ifdef CX_HAVE_TLS
        if (ops == &cx_tls_ops)
            snprintf(extra, sizeof extra, ",\"tls_path\":\"%s\"", cx_tls_link_path(k));
#endif
        uint64_t got = 0;
        if (lat) {
            double *rtt = malloc(sizeof(double) * (size_t)n), sum = 0;
            for (long i = 0; i < warm + n; i++) {
                double t0 = now();
                CK(cx_link_send(k, &h, &v, 1));
                wait_msgs(k, &got, (uint64_t)i + 1);
                if (i >= warm) {
                    rtt[i - warm] = now() - t0;
                    sum += rtt[i - warm];
                }
            }
            qsort(rtt, (size_t)n, sizeof *rtt, cmp);
            printf("{\"driver\":\"%s\",\"test\":\"lat\",\"size\":%zu,\"n\":%ld,\"median_us\":%.3f,"
                   "\"avg_us\":%.3f%s}\n", drv, size, n, rtt[n / 2] * 1e6 / 2, sum / (double)n * 1e6 / 2,
                   extra);
        } else {
            /* one message first, so connection set-up is not timed */
            CK(cx_link_send(k, &h, &v, 1));
            wait_msgs(k, &got, 1);
            size_t window = !strcmp(drv, "ucx") ? 8 * size : 0;
            double t0 = now();
            for (long i = 0; i < n; i++) {
                CK(cx_link_send(k, &h, &v, 1));
                /* back-pressure: tcp and shm count queued (copied) bytes in pending(), so
                 * send the next one only when the queue is empty; ucx counts requests in
                 * flight (already copied), so keep a window of 8 messages going */
                while (cx_link_pending(k) > window) CK(cx_link_progress(k, count, &got, 16));
            }
            wait_msgs(k, &got, 2);
            double dt = now() - t0;
            printf("{\"driver\":\"%s\",\"test\":\"bw\",\"size\":%zu,\"n\":%ld,\"MBps\":%.1f%s}\n", drv,
                   size, n, (double)n * (double)size / dt / 1e6, extra);
        }
        fflush(stdout);
        cx_link_flush(k, NULL, NULL, 1000);
        _exit(0);
    }
    struct cx_link *k;
    CK(ops->accept(l, 20000, &k));
    ops->listener_close(l);
    uint64_t got = 0;
    struct iovec ack = {buf, 8};
    if (lat) {
        for (long i = 0; i < warm + n; i++) {
            wait_msgs(k, &got, (uint64_t)i + 1);
            CK(cx_link_send(k, &h, &v, 1));
        }
    } else {
        wait_msgs(k, &got, 1);
        CK(cx_link_send(k, &h, &ack, 1));
        wait_msgs(k, &got, (uint64_t)n + 1);
        CK(cx_link_send(k, &h, &ack, 1));
    }
    /* keep progressing until the child is done (it may still need our progress) */
    int status;
    while (waitpid(pid, &status, WNOHANG) == 0)
        if (cx_link_progress(k, count, &got, 16) < 0)
            usleep(1000);
    cx_link_close(k);
#ifdef CX_HAVE_TLS
    if (have_pki)
        tc_env_down(pki);
#endif
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
