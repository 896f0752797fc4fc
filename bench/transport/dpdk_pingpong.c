/* The bare DPDK peer of the dpdk driver's benchmark: memif ping-pong and streaming with
 * rte_eth_rx_burst / rte_eth_tx_burst only (no Conflux, no headers written per frame, no
 * reliability). Frames have the sizes the Conflux dpdk driver puts on the wire for the same
 * messages: 42 bytes of Ethernet/IPv4/UDP + the 48-byte frame header + the payload, a
 * message larger than one frame (MTU 1500: 1424 payload bytes) going as full frames.
 *
 *   dpdk_pingpong server <socket>                    echoes every frame back
 *   dpdk_pingpong client <socket> lat <n> <size>     one frame out, wait for it back
 *   dpdk_pingpong client <socket> bw  <n> <size>     n messages of size bytes streamed;
 *                                                    the server answers the last frame
 *
 * The client prints one JSON object like transport_bench: {"median_us","avg_us"} or
 * {"MBps"} (payload bytes, MB = 10^6). Both ends busy-poll. The server is the memif server
 * (role=server) and exits when the client is gone after having connected. */
#define _GNU_SOURCE
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define HDRS 90u      /* Ethernet 14 + IPv4 20 + UDP 8 + Conflux frame header 48 */
#define PAYLOAD 1424u /* per full frame at MTU 1500 */
#define BURST 32

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

static struct rte_mempool *pool;
static char runtime_dir[512];

/* The EAL leaves /var/run/dpdk/<file-prefix> behind; it is ours alone. */
static void stop(void)
{
    rte_eth_dev_stop(0);
    rte_eth_dev_close(0);
    rte_eal_cleanup();
    DIR *d = opendir(runtime_dir);
    if (d) {
        char f[1024];
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.') {
                snprintf(f, sizeof f, "%s/%s", runtime_dir, e->d_name);
                unlink(f);
            }
        closedir(d);
    }
    rmdir(runtime_dir);
}

static void start(const char *role, const char *sock)
{
    char vdev[300], prefix[64];
    snprintf(vdev, sizeof vdev, "--vdev=net_memif0,role=%s,socket=%s,socket-abstract=no", role, sock);
    snprintf(prefix, sizeof prefix, "--file-prefix=cx-pingpong-%d", (int)getpid());
    char *argv[] = {"dpdk_pingpong", "--no-huge", "--no-pci", "-m", "128", "--no-telemetry",
                    "-l", "0", "--log-level=warning", prefix, vdev, NULL};
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof cpus, &cpus);
    if (rte_eal_init(11, argv) < 0) {
        fprintf(stderr, "dpdk_pingpong: EAL: %s\n", rte_strerror(rte_errno));
        exit(1);
    }
    sched_setaffinity(0, sizeof cpus, &cpus); /* as the Conflux driver: not pinned */
    snprintf(runtime_dir, sizeof runtime_dir, "%s", rte_eal_get_runtime_dir());
    pool = rte_pktmbuf_pool_create("pp", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    if (!pool || rte_eth_dev_configure(0, 1, 1, &conf) < 0 ||
        rte_eth_rx_queue_setup(0, 0, 1024, 0, NULL, pool) < 0 ||
        rte_eth_tx_queue_setup(0, 0, 1024, 0, NULL) < 0) {
        fprintf(stderr, "dpdk_pingpong: port setup failed\n");
        exit(1);
    }
    double t0 = now();
    while (rte_eth_dev_start(0) < 0) { /* a client waits for its server's socket */
        if (now() - t0 > 10) {
            fprintf(stderr, "dpdk_pingpong: memif port would not start\n");
            exit(1);
        }
        rte_eth_dev_stop(0);
        usleep(200000);
    }
    if (!strcmp(role, "server")) {
        printf("ready\n"); /* run.sh starts the client now, not while the port is set up */
        fflush(stdout);
    }
    struct rte_eth_link l;
    t0 = now();
    do {
        rte_eth_link_get_nowait(0, &l);
    } while (!l.link_status && now() - t0 < 20);
    if (!l.link_status) {
        fprintf(stderr, "dpdk_pingpong: memif link did not come up\n");
        exit(1);
    }
}

static struct rte_mbuf *frame(size_t len)
{
    struct rte_mbuf *m;
    while (!(m = rte_pktmbuf_alloc(pool)))
        ;
    uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)len);
    if (!d) {
        fprintf(stderr, "dpdk_pingpong: a %zu-byte frame does not fit an mbuf\n", len);
        exit(1);
    }
    memset(d, 0xab, 14); /* the receiver looks at nothing but sizes and the mark d[1] */
    d[0] = 0x02;
    return m;
}

static void send1(struct rte_mbuf *m)
{
    while (rte_eth_tx_burst(0, 0, &m, 1) == 0)
        ;
}

static int server(void)
{
    struct rte_mbuf *m[BURST];
    struct rte_eth_link l;
    double last_check = now();
    for (;;) {
        uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
        for (uint16_t i = 0; i < n; i++) {
            /* echo: lat pings, and the last frame of each bw message (marked 0xee) */
            uint8_t mark = rte_pktmbuf_mtod(m[i], uint8_t *)[1];
            if (mark == 0xee || mark == 0xab)
                send1(m[i]);
            else
                rte_pktmbuf_free(m[i]);
        }
        if (!n && now() - last_check > 0.2) {
            last_check = now();
            rte_eth_link_get_nowait(0, &l);
            if (!l.link_status)
                break; /* the client left */
        }
    }
    stop();
    return 0;
}

static uint64_t rx_wait(uint64_t want)
{
    struct rte_mbuf *m[BURST];
    uint64_t got = 0;
    while (got < want) {
        uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
        rte_pktmbuf_free_bulk(m, n);
        got += n;
    }
    return got;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "server")) {
        unlink(argv[2]); /* a memif server leaves its socket file behind */
        start("server", argv[2]);
        return server();
    }
    if (argc != 6 || strcmp(argv[1], "client")) {
        fprintf(stderr, "usage: %s server <socket> | client <socket> <lat|bw> <n> <size>\n", argv[0]);
        return 2;
    }
    start("client", argv[2]);
    long n = atol(argv[4]);
    size_t size = (size_t)atol(argv[5]);
    if (!strcmp(argv[3], "lat")) {
        long warm = n / 10 + 100;
        double *rtt = malloc(sizeof(double) * (size_t)n), sum = 0;
        for (long i = 0; i < warm + n; i++) {
            double t0 = now();
            send1(frame(HDRS + size));
            rx_wait(1);
            if (i >= warm) {
                rtt[i - warm] = now() - t0;
                sum += rtt[i - warm];
            }
        }
        qsort(rtt, (size_t)n, sizeof *rtt, cmp);
        printf("{\"driver\":\"dpdk-bare\",\"test\":\"lat\",\"size\":%zu,\"n\":%ld,\"median_us\":%.3f,"
               "\"avg_us\":%.3f}\n", size, n, rtt[n / 2] * 1e6 / 2, sum / (double)n * 1e6 / 2);
    } else {
        size_t frames = (size + PAYLOAD - 1) / PAYLOAD, last = size - (frames - 1) * PAYLOAD;
        double t0 = now();
        for (long i = 0; i < n; i++) {
            for (size_t f = 0; f < frames;) {
                struct rte_mbuf *m[BURST];
                unsigned k = 0;
                for (; k < BURST && f + k < frames; k++) {
                    int is_last = f + k == frames - 1;
                    m[k] = frame(HDRS + (is_last ? last : PAYLOAD));
                    rte_pktmbuf_mtod(m[k], uint8_t *)[1] = is_last && i == n - 1 ? 0xee : 0xcd;
                }
                unsigned sent = 0;
                while (sent < k)
                    sent += rte_eth_tx_burst(0, 0, m + sent, (uint16_t)(k - sent));
                f += k;
            }
        }
        rx_wait(1); /* the server echoed the very last frame */
        double dt = now() - t0;
        printf("{\"driver\":\"dpdk-bare\",\"test\":\"bw\",\"size\":%zu,\"n\":%ld,\"MBps\":%.1f}\n",
               size, n, (double)n * (double)size / dt / 1e6);
    }
    fflush(stdout);
    stop();
    return 0;
}
