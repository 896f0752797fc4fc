/* The Conflux dpdk driver measured like dpdk_pingpong.c (its bare DPDK peer): two processes
 * on one memif pair, both busy-polling, messages through the stack the builder puts on a
 * dpdk link (reliability + fragmentation; `lat-raw` uses the bare datagram link).
 *
 *   dpdk_bench server <socket> <stack|raw>             the echoing end (memif server)
 *   dpdk_bench client <socket> <lat|lat-raw|bw> <n> <size>   (lat-raw needs a raw server)
 *
 * lat: ping-pong, one-way = RTT / 2. bw: n messages streamed, the server acknowledges the
 * last one; the sender keeps at most 2 MiB queued (the reliability window holds 1024
 * frames, about 1.4 MiB). The client prints one JSON object like transport_bench. */
#include "common/cx_error.h"
#include "stack/cx_stack.h"
#include "transport/dpdk/cx_dpdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SERVER_IP "10.79.0.1"
#define CLIENT_IP "10.79.0.2"
#define BENCH_PORT 7400

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "dpdk_bench: %s: %d (%s)\n", what, rc, cx_errmsg());
    cx_dpdk_shutdown();
    exit(1);
}

#define CK(expr)                                                                           \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        if (rc_ < 0) die(#expr, rc_);                                                      \
    } while (0)

struct rx { uint64_t n, bytes, to_answer; };
/* Counts messages; the server answers small ones (pings) and the end of a stream (channel 2). */
static void count(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)p;
    struct rx *r = arg;
    r->n++;
    r->bytes += n;
    if (n <= 64 || h->channel == 2)
        r->to_answer++;
}

static void wait_msgs(struct cx_link *k, struct rx *r, uint64_t want)
{
    while (r->n < want) CK(cx_link_progress(k, count, r, 16));
}

static void setup(const char *role, const char *sock, const char *ip)
{
    char args[512];
    snprintf(args, sizeof args, "--no-huge --no-pci -m 160 --log-level=warning "
             "--vdev=net_memif0,role=%s,socket=%s,socket-abstract=no", role, sock);
    if (!strcmp(role, "server"))
        unlink(sock); /* a memif server leaves its socket file behind */
    struct cx_dpdk_config c = {.eal_args = args, .ip = ip};
    CK(cx_dpdk_setup(&c));
}

/* The server answers every small message (a ping) and the end of a stream with 8 bytes. */
static int server(const char *sock, int raw_mode)
{
    setup("server", sock, SERVER_IP);
    struct cx_listener *l;
    char addr[64];
    snprintf(addr, sizeof addr, "dpdk://%s:%d", SERVER_IP, BENCH_PORT);
    CK(cx_dpdk_ops.listen(addr, &l));
    printf("ready\n"); /* run.sh starts the client now: a memif client must not race the
                        * server's port set-up */
    fflush(stdout);
    struct cx_link *k;
    CK(cx_dpdk_ops.accept(l, 60000, &k));
    cx_dpdk_ops.listener_close(l);
    if (!raw_mode)
        CK(cx_stack_assemble(&k, 1, &k));
    static uint8_t buf[8];
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    struct iovec v = {buf, sizeof buf};
    struct rx r = {0};
    for (;;) {
        if (cx_link_progress(k, count, &r, 16) < 0)
            break; /* the client is done and gone */
        for (; r.to_answer; r.to_answer--) CK(cx_link_send(k, &h, &v, 1));
    }
    cx_link_close(k);
    cx_dpdk_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "server"))
        return server(argv[2], !strcmp(argv[3], "raw"));
    if (argc != 6 || strcmp(argv[1], "client")) {
        fprintf(stderr, "usage: %s server <socket> <stack|raw> | client <socket> "
                "<lat|lat-raw|bw> <n> <size>\n", argv[0]);
        return 2;
    }
    const char *test = argv[3];
    long n = atol(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    int raw_mode = !strcmp(test, "lat-raw"), lat = raw_mode || !strcmp(test, "lat");
    setup("client", argv[2], CLIENT_IP);
    char addr[64];
    snprintf(addr, sizeof addr, "dpdk://%s:%d", SERVER_IP, BENCH_PORT);
    struct cx_link *raw = NULL, *k;
    double t0 = now();
    int rc;
    while ((rc = cx_dpdk_ops.connect(addr, &raw)) < 0 && now() - t0 < 30)
        usleep(100000); /* the server may still be starting */
    CK(rc);
    if (raw_mode)
        k = raw;
    else
        CK(cx_stack_assemble(&raw, 1, &k));
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    static uint8_t end[8];
    struct iovec hv = {end, sizeof end};
    uint8_t *buf = calloc(1, size ? size : 1);
    struct iovec v = {buf, size};
    struct rx r = {0};
    if (lat) {
        long warm = n / 10 + 100;
        double *rtt = malloc(sizeof(double) * (size_t)n), sum = 0;
        for (long i = 0; i < warm + n; i++) {
            double s = now();
            CK(cx_link_send(k, &h, &v, 1));
            wait_msgs(k, &r, (uint64_t)i + 1);
            if (i >= warm) {
                rtt[i - warm] = now() - s;
                sum += rtt[i - warm];
            }
        }
        qsort(rtt, (size_t)n, sizeof *rtt, cmp);
        printf("{\"driver\":\"dpdk%s\",\"test\":\"lat\",\"size\":%zu,\"n\":%ld,\"median_us\":%.3f,"
               "\"avg_us\":%.3f}\n", raw_mode ? "-raw" : "", size, n, rtt[n / 2] * 1e6 / 2,
               sum / (double)n * 1e6 / 2);
    } else {
        t0 = now();
        for (long i = 0; i < n; i++) {
            CK(cx_link_send(k, &h, &v, 1));
            while (cx_link_pending(k) > (2u << 20)) CK(cx_link_progress(k, count, &r, 16));
        }
        h.channel = 2; /* end of the stream: the server answers once all arrived */
        CK(cx_link_send(k, &h, &hv, 1));
        wait_msgs(k, &r, 1);
        double dt = now() - t0;
        printf("{\"driver\":\"dpdk\",\"test\":\"bw\",\"size\":%zu,\"n\":%ld,\"MBps\":%.1f}\n", size,
               n, (double)n * (double)size / dt / 1e6);
    }
    fflush(stdout);
    cx_link_flush(k, NULL, NULL, 1000);
    cx_link_close(k);
    cx_dpdk_shutdown();
    return 0;
}
