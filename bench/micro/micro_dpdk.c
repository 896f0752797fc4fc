/* The microbenchmark suite (micro_tests.c) over the Conflux dpdk driver: one process per
 * end, each with its own EAL (--no-huge --no-pci); messages go through the stack the builder
 * puts on a dpdk link (reliability + fragmentation). The port is given as
 *   <path>                 a memif pair: the server is the memif server on socket <path>
 *   af_packet:<iface>      a net_af_packet vdev on a kernel interface (run.sh: one end of a
 *                          veth pair between two network namespaces)
 *   switch:<path>:<id>     memif interface <id> of a bare DPDK switch (memif_switch.c) serving
 *                          socket <path>: the hot-spot's N peers and the hot node
 *
 *   micro_dpdk server <port> [ip] [block]     serves one link until its client goes away;
 *                                             block = wait on the link's fd when idle
 *   micro_dpdk client <port> <all|lat|bw|...> <quick|full> [reps]       measures, prints JSON
 *   micro_dpdk client <port> hotspot <quick|full> [reps] [peers]        peers at 10.79.0.1..N
 *
 * Servers listen on dpdk://<ip>:7401 (ip default 10.79.0.1); the client is 10.79.0.200.
 * run.sh starts the client once every server printed "ready". */
#include "micro.h"

#include "common/cx_error.h"
#include "stack/cx_stack.h"
#include "transport/dpdk/cx_dpdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLIENT_IP "10.79.0.200"
#define PORT 7401

/* The EAL's vdev for a port spec; returns the link name the rows carry. */
static const char *setup(const char *role, const char *port, const char *ip)
{
    char vdev[400], args[600];
    const char *link = "dpdk";
    if (!strncmp(port, "af_packet:", 10)) {
        snprintf(vdev, sizeof vdev, "net_af_packet0,iface=%s,framecnt=4096", port + 10);
        link = "af_packet";
    } else if (!strncmp(port, "switch:", 7)) {
        char path[300];
        snprintf(path, sizeof path, "%s", port + 7);
        char *id = strrchr(path, ':');
        if (!id) die("switch:<path>:<id>", -22);
        *id++ = 0;
        snprintf(vdev, sizeof vdev, "net_memif0,role=client,id=%s,socket=%s,socket-abstract=no", id, path);
    } else {
        if (!strcmp(role, "server")) unlink(port); /* a memif server leaves its socket behind */
        snprintf(vdev, sizeof vdev, "net_memif0,role=%s,socket=%s,socket-abstract=no", role, port);
    }
    snprintf(args, sizeof args, "--no-huge --no-pci -m 256 --log-level=warning --vdev=%s", vdev);
    struct cx_dpdk_config c = {.eal_args = args, .ip = ip};
    CK(cx_dpdk_setup(&c));
    return link;
}

static void connect_to(const char *ip, struct mlink *m)
{
    char addr[64];
    snprintf(addr, sizeof addr, "dpdk://%s:%d", ip, PORT);
    struct cx_link *raw = NULL, *k;
    double t0 = now_s();
    int rc;
    while ((rc = cx_dpdk_ops.connect(addr, &raw)) < 0 && now_s() - t0 < 30)
        usleep(100000); /* the server may still be starting */
    CK(rc);
    CK(cx_stack_assemble(&raw, 1, &k));
    ml_init(m, k);
}

static int serve(const char *port, const char *ip, int block)
{
    char addr[64];
    snprintf(addr, sizeof addr, "dpdk://%s:%d", ip, PORT);
    setup("server", port, ip);
    struct cx_listener *l;
    struct cx_link *k;
    struct mlink m;
    CK(cx_dpdk_ops.listen(addr, &l));
    printf("ready\n");
    fflush(stdout);
    CK(cx_dpdk_ops.accept(l, 60000, &k));
    cx_dpdk_ops.listener_close(l);
    CK(cx_stack_assemble(&k, 1, &k));
    ml_init(&m, k);
    m.block = block;
    ml_serve(&m);
    cx_link_close(k);
    cx_dpdk_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "server"))
        return serve(argv[2], argc > 3 ? argv[3] : "10.79.0.1", argc > 4 && !strcmp(argv[4], "block"));
    if (argc < 5 || strcmp(argv[1], "client")) {
        fprintf(stderr, "usage: %s server <port> [ip] [block] | client <port> <test> <quick|full> "
                "[reps] [peers]\n", argv[0]);
        return 2;
    }
    const char *link = setup("client", argv[2], CLIENT_IP);
    int hot = !strcmp(argv[3], "hotspot");
    int np = hot && argc > 6 ? atoi(argv[6]) : 1;
    if (np < 1 || np > 8) np = 1;
    struct mlink m[8];
    for (int j = 0; j < np; j++) {
        char ip[32];
        snprintf(ip, sizeof ip, "10.79.0.%d", 1 + j);
        connect_to(ip, &m[j]);
    }
    const char *note = !strcmp(link, "af_packet")
                           ? "net_af_packet on a veth pair between two network namespaces, dpdk link + reliability + fragmentation"
                       : !strncmp(argv[2], "switch:", 7)
                           ? "memif through a bare DPDK switch, dpdk link + reliability + fragmentation; peers block on their fd when idle"
                           : "memif, dpdk link + reliability + fragmentation";
    struct suite s = {.quick = !strcmp(argv[4], "quick"), .out = {"driver", link, note}};
    s.reps = argc > 5 ? atoi(argv[5]) : (s.quick ? 3 : 5);
    if (s.reps < 1 || s.reps > 16) s.reps = 3;
    if (hot)
        for (int n = 1; n <= np; n++) test_hotspot(&s, m, n);
    else
        run_tests(&s, argv[3], &m[0]);
    /* no OP_STOP: the client leaves first and each server sees its link fail (as in
     * bench/transport/dpdk_bench.c); a memif server hanging up first crashes the client's
     * memif interrupt thread during shutdown */
    for (int j = 0; j < np; j++) {
        cx_link_flush(m[j].k, NULL, NULL, 2000);
        cx_link_close(m[j].k);
    }
    cx_dpdk_shutdown();
    return 0;
}
