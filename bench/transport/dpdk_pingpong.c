/* The bare DPDK peer of the dpdk driver's benchmarks: rte_eth_rx_burst / rte_eth_tx_burst
 * only (no Conflux, no reliability). Frames have the sizes the Conflux dpdk driver puts on the
 * wire for the same messages: 42 bytes of Ethernet/IPv4/UDP + the 48-byte frame header + the
 * payload, a message larger than one frame (MTU 1500: 1424 payload bytes) going as full
 * frames. Stream payloads are copied from the application's buffers into the mbufs, as the
 * driver must.
 *
 *   dpdk_pingpong server <port>                   answers the client (below)
 *   dpdk_pingpong client <port> lat <n> <size>    one message out, wait for it back
 *   dpdk_pingpong client <port> bw <n> <size> [q [compute_us [buffers [reuse_pct]]]]
 *        n messages streamed; q = 0 (default): one stream, the server echoes the very last
 *        frame; q > 0: windows of q messages, each window's last frame echoed before the next
 *        window (osu_bw); compute_us of computation after each message (overlap); the
 *        payloads come from `buffers` buffers in FIFO order, or with reuse_pct >= 0 from
 *        buffer 0 with that probability (buffer reuse)
 *   dpdk_pingpong client <port> bilat <n> <size>  both ends send one message per round at once
 *   dpdk_pingpong client <port> bibw <n> <size>   both ends stream n messages at once
 *   dpdk_pingpong client <port> hotspot_lat <rounds> 8 <peers>
 *        the hot-spot (dpdk_bare_hot.c) against servers 1..peers: each round a ping to all
 *   dpdk_pingpong client <port> hotspot_bw <windows> <size> <q> <peers>
 *        all of them stream windows of q messages at once
 *   dpdk_pingpong client <port> <test>:<n>:<size>[:<q>...] ...   several tests, one port set-up;
 *        test also overlap, reuse_fifo, reuse_pct, cpu (bw with those parameters, named as
 *        such; bw's JSON has the CPU per message: in send calls, of this process and of the
 *        server's, and the wall time)
 *
 * <port> is a memif socket path (the server is the memif server), switch:<path>:<id> (a port
 * of bench/micro's memif_switch) or af_packet:<iface> (a net_af_packet vdev with a 4096-frame
 * ring on a kernel interface, e.g. one end of a veth pair: the default 512 frames drop most
 * of a window of 64 KiB messages). `dpdk_pingpong server <port> <id>` is hot-spot server
 * <id> (1..16): it backs off with short sleeps when idle, as the Conflux servers it stands
 * beside block on their fd. The client prints
 * one JSON object: {"median_us","avg_us"} (lat), {"round_us"} (bilat) or {"MBps"} (payload
 * bytes the server received, MB = 10^6), with "lost" = frames that did not arrive. Both ends
 * busy-poll. The server exits when the client is gone after having connected (memif) or on
 * the client's quit frame or SIGTERM. A wait longer than 10 s fails the run (exit 1). */
#define _GNU_SOURCE
#include "dpdk_bare.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>


static uint64_t cl_wend_bytes, cl_wend_tag; /* from the last M_WEND answer */
static double cl_wend_cpu;                    /* the server's CPU seconds in it */
static uint64_t cl_peer, cl_ends; /* bibw: the server's frames; its end (1) + our answer (2) */
static double cl_last;            /* bibw: when the last frame came */

static void cl_drain(void)
{
    struct rte_mbuf *m[BURST];
    uint16_t k = rte_eth_rx_burst(0, 0, m, BURST);
    for (uint16_t j = 0; j < k; j++) {
        uint8_t mk = mark(m[j]);
        cl_peer += mk == M_PEER || mk == M_PEND, cl_ends += mk == M_PEND;
        if (mk == M_WEND) cl_wend_bytes = num(m[j], 14), cl_ends += 2;
    }
    rte_pktmbuf_free_bulk(m, k);
    if (k) cl_last = now();
}

static uint64_t cl_seen[256]; /* frames received per mark, since the start */

/* Receives until `target` frames marked mk have come since the start (a burst may bring
 * frames of the next round too: they stay counted); returns 0, or -1 after wait_s. */
static int rx_wait(uint8_t mk, uint64_t target, double wait_s)
{
    struct rte_mbuf *m[BURST];
    double t0 = now();
    while (cl_seen[mk] < target) {
        uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
        for (uint16_t i = 0; i < n; i++) {
            uint8_t k = mark(m[i]);
            if (k == M_WEND) {
                uint64_t c = num(m[i], 30);
                cl_wend_bytes = num(m[i], 14), cl_wend_tag = num(m[i], 22);
                memcpy(&cl_wend_cpu, &c, sizeof c);
            }
            cl_seen[k]++;
        }
        rte_pktmbuf_free_bulk(m, n);
        if (!n && now() - t0 > wait_s) return -1;
    }
    return 0;
}

static struct {
    uint8_t **buf;
    int nbuf, next, reuse_pct;
    unsigned rng;
} bs;

static const uint8_t *next_buf(void)
{
    if (bs.reuse_pct >= 0) { /* buffer 0 with probability reuse_pct, else the others in FIFO */
        bs.rng = bs.rng * 1103515245u + 12345u;
        if ((int)((bs.rng >> 16) % 100) < bs.reuse_pct) return bs.buf[0];
        bs.next = bs.next % (bs.nbuf - 1) + 1;
        return bs.buf[bs.next];
    }
    const uint8_t *p = bs.buf[bs.next];
    bs.next = (bs.next + 1) % bs.nbuf;
    return p;
}

/* Waits for the answer to window end tag, asking again every 50 ms: a lost window end
 * (af_packet drops frames when its ring is full) costs a pause, not the run. */
static void wait_wend(uint64_t tag)
{
    for (int tries = 0; cl_wend_tag != tag; tries++) { /* older answers: skipped */
        if (rx_wait(M_WEND, cl_seen[M_WEND] + 1, 0.05) == 0) continue;
        if (tries > 200) fail("no answer to a window end for 10 s");
        send_ctl(M_WEND, 0, tag);
    }
}

static int run_bw(const char *as, long n, size_t size, long q, double compute_us)
{
    long lost = 0;
    static uint64_t run_id;
    run_id++;
    send_ctl(M_RESET, 0, 0);
    send_ctl(M_WEND, 0, run_id << 32); /* window 0: no data, the server's CPU before */
    wait_wend(run_id << 32);
    double peer0 = cl_wend_cpu, self0 = proc_cpu(), send_cpu = 0, t0 = now();
    long per = q > 0 ? q : n;
    for (long i = 0; i < n; i += per) {
        long k = i + per <= n ? per : n - i;
        frame_tag = run_id << 32 | (uint64_t)(i / per + 1); /* unique across runs */
        for (long j = 0; j < k; j++) {
            double c0 = thread_cpu();
            send_msg(size, M_DATA, j == k - 1 ? M_WEND : M_DATA, next_buf());
            send_cpu += thread_cpu() - c0;
            if (compute_us > 0) spin_ns(compute_us * 1e3);
        }
        wait_wend(frame_tag);
    }
    double dt = now() - t0, self = proc_cpu() - self0, peer = cl_wend_cpu - peer0;
    frame_tag = 0;
    uint64_t expect = (uint64_t)n * size;
    if (cl_wend_bytes < expect) lost = (long)((expect - cl_wend_bytes + PAYLOAD - 1) / PAYLOAD);
    printf("{\"driver\":\"dpdk-bare\",\"test\":\"bw\",\"as\":\"%s\",\"size\":%zu,\"n\":%ld,\"q\":%ld,"
           "\"compute_us\":%g,\"buffers\":%d,\"reuse_pct\":%d,\"compute_share\":%.3f,\"MBps\":%.1f,"
           "\"send_call_cpu_us\":%.4g,\"sender_cpu_us\":%.4g,\"receiver_cpu_us\":%.4g,\"wall_us\":%.4g,"
           "\"lost\":%ld}\n", as, size, n, q, compute_us, bs.nbuf, bs.reuse_pct,
           compute_us * 1e-6 * (double)n / dt, (double)cl_wend_bytes / dt / 1e6, send_cpu / (double)n * 1e6,
           self / (double)n * 1e6, peer / (double)n * 1e6, dt / (double)n * 1e6, lost);
    return 0;
}

static int hot_peers; /* the servers to tell to quit at the end */

/* Runs one test: a[0] = lat|bw|bilat|bibw|overlap|reuse_fifo|reuse_pct|cpu (the last four
 * are bw with their parameters; bw prints its CPU per message too), a[1] = n, a[2] = size, a[3..] = bw's q, compute_us, buffers,
 * reuse_pct. Prints one JSON line; "as" names the test of bench/micro it stands for. */
static int run_one(int na, char **a)
{
    const char *test = a[0], *as = test;
    if (na < 3) fail("a test needs <name> <n> <size>");
    long n = atol(a[1]);
    size_t size = (size_t)atol(a[2]);
    if (n < 1 || size > (1u << 20)) fail("bad n or size");
    if (!strcmp(test, "overlap") || !strncmp(test, "reuse_", 6) || !strcmp(test, "cpu")) test = "bw";
    if (!strncmp(test, "hotspot_", 8)) { /* <n> <size> [q] <peers>: the last argument */
        int peers = atoi(a[na - 1]);
        if (peers < 1 || peers > 16 || na < 4) fail("a hot-spot test needs 1..16 peers last");
        hot_peers = peers > hot_peers ? peers : hot_peers;
        if (!strcmp(test, "hotspot_lat")) hot_lat(n, peers);
        else if (na >= 5 && atol(a[3]) >= 1 && atol(a[3]) <= 1024) hot_bw(n, size, atol(a[3]), peers);
        else fail("hotspot_bw:<windows>:<size>:<q 1..1024>:<peers>");
        fflush(stdout);
        return 0;
    }
    uint8_t *src = calloc(1, size ? size : 1);
    size_t fr = frames_of(size);
    int rc = 0;
    if (!strcmp(test, "lat")) {
        long warm = n / 10 + 100;
        long lost = 0;
        double *rtt = malloc(sizeof(double) * (size_t)n), sum = 0;
        for (long i = 0; i < warm + n; i++) {
            uint64_t base = cl_seen[M_ECHO];
            double t0 = now();
            send_msg(size, M_ECHO, M_ECHO, src);
            if (rx_wait(M_ECHO, base + fr, 0.5) < 0) { /* a frame lost (af_packet): again */
                lost += (long)(base + fr - cl_seen[M_ECHO]);
                if (lost > 10000) fail("echoes keep being lost");
                i--;
                continue;
            }
            if (i >= warm) {
                rtt[i - warm] = now() - t0;
                sum += rtt[i - warm];
            }
        }
        qsort(rtt, (size_t)n, sizeof *rtt, cmp);
        printf("{\"driver\":\"dpdk-bare\",\"test\":\"lat\",\"as\":\"lat\",\"size\":%zu,\"n\":%ld,"
               "\"median_us\":%.3f,\"avg_us\":%.3f,\"lost\":%ld}\n", size, n, rtt[n / 2] * 1e6 / 2,
               sum / (double)n * 1e6 / 2, lost);
        free(rtt);
    } else if (!strcmp(test, "bw")) {
        long q = na > 3 ? atol(a[3]) : 0;
        double cu = na > 4 ? atof(a[4]) : 0;
        bs.nbuf = na > 5 ? atoi(a[5]) : 1;
        bs.reuse_pct = na > 6 ? atoi(a[6]) : -1;
        bs.next = 0, bs.rng = 12345;
        if (bs.nbuf < 1 || bs.nbuf > 1024 || (bs.reuse_pct >= 0 && bs.nbuf < 2)) fail("bad buffers");
        bs.buf = calloc((size_t)bs.nbuf, sizeof *bs.buf);
        for (int i = 0; i < bs.nbuf; i++) {
            bs.buf[i] = malloc(size ? size : 1);
            memset(bs.buf[i], i, size); /* touched: no page faults while timed */
        }
        rc = run_bw(as, n, size, q, cu);
        for (int i = 0; i < bs.nbuf; i++) free(bs.buf[i]);
        free(bs.buf);
    } else if (!strcmp(test, "bilat")) {
        uint64_t base = cl_seen[M_PEER];
        send_ctl(M_BILAT, (uint64_t)n, size);
        double t0 = now();
        for (long i = 0; i < n; i++) {
            send_msg(size, M_DATA, M_DATA, src);
            if (rx_wait(M_PEER, base + (uint64_t)(i + 1) * fr, WAIT_S) < 0) fail("a bilat message was lost");
        }
        printf("{\"driver\":\"dpdk-bare\",\"test\":\"bilat\",\"as\":\"bilat\",\"size\":%zu,\"n\":%ld,"
               "\"round_us\":%.3f}\n", size, n, (now() - t0) / (double)n * 1e6);
    } else if (!strcmp(test, "bibw")) {
        cl_peer = cl_ends = cl_wend_bytes = 0;
        send_ctl(M_RESET, 0, 0);
        send_ctl(M_BIBW, (uint64_t)n, size);
        double t0 = now();
        cl_last = t0;
        drain_fn = cl_drain;
        for (long i = 0; i < n; i++) { /* ours out, theirs in, interleaved */
            send_msg(size, M_DATA, i == n - 1 ? M_WEND : M_DATA, src);
            cl_drain();
        }
        drain_fn = NULL;
        /* the rest of theirs (the last frame M_PEND) and the answer to our last frame */
        for (double tw = now(); cl_ends < 3 && now() - tw < 2;) cl_drain();
        double dt = cl_last - t0; /* a lost end frame (af_packet) must not count its wait */
        uint64_t want = (uint64_t)n * fr, peer = cl_peer < want ? cl_peer : want;
        uint64_t ours = cl_wend_bytes, theirs = peer * size / fr;
        long lost = (long)(want - peer);
        if (ours < (uint64_t)n * size) lost += (long)(((uint64_t)n * size - ours + PAYLOAD - 1) / PAYLOAD);
        printf("{\"driver\":\"dpdk-bare\",\"test\":\"bibw\",\"as\":\"bibw\",\"size\":%zu,\"n\":%ld,"
               "\"MBps\":%.1f,\"lost\":%ld}\n", size, n, (double)(ours + theirs) / dt / 1e6, lost);
    } else {
        fail("unknown test");
    }
    fflush(stdout);
    free(src);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "server")) {
        if (strncmp(argv[2], "af_packet:", 10) && strncmp(argv[2], "switch:", 7))
            unlink(argv[2]); /* a memif server leaves its socket */
        frame_src = 1, frame_dst = HOT_ID;
        if (argc > 3) { /* a hot-spot server */
            int id = atoi(argv[3]);
            if (id < 1 || id > 16) fail("a server's id is 1..16");
            frame_src = (uint8_t)id, srv_idle_sleep = 1;
        }
        server_signals();
        start("server", argv[2]);
        return server();
    }
    if (argc < 4 || strcmp(argv[1], "client")) {
        fprintf(stderr, "usage: %s server <port> [id] | client <port> <test> <n> <size> [q [compute_us "
                "[buffers [reuse_pct]]]] | client <port> <test>:<n>:<size>[:q...] ...\n", argv[0]);
        return 2;
    }
    start("client", argv[2]);
    int rc = 0;
    if (!strchr(argv[3], ':')) {
        rc = run_one(argc - 3, argv + 3);
    } else { /* several tests, one per argument, on one port set-up */
        for (int i = 3; i < argc && !rc; i++) {
            char *a[8], *save = NULL;
            int na = 0;
            for (char *t = strtok_r(argv[i], ":", &save); t && na < 8; t = strtok_r(NULL, ":", &save))
                a[na++] = t;
            rc = run_one(na, a);
        }
    }
    if (!is_memif && !hot_peers) send_ctl(M_QUIT, 0, 0); /* af_packet has no link state to see us leave */
    for (int j = 1; j <= hot_peers; j++) { /* nor has a switch port */
        frame_dst = (uint8_t)j;
        send_ctl(M_QUIT, 0, 0);
    }
    usleep(100000);
    stop();
    return rc;
}
