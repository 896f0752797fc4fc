/* The microbenchmark suite (micro_tests.c) over the Conflux dpdk driver: two processes on
 * one memif pair (--no-huge --no-pci, as bench/transport), both busy-polling; messages go
 * through the stack the builder puts on a dpdk link (reliability + fragmentation).
 *
 *   micro_dpdk server <socket>                                   serves until the client stops it
 *   micro_dpdk client <socket> <all|lat|bw|...> <quick|full> [reps]   measures, prints JSON lines
 *
 * run.sh starts the client once the server printed "ready". */
#include "micro.h"

#include "common/cx_error.h"
#include "stack/cx_stack.h"
#include "transport/dpdk/cx_dpdk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SERVER_IP "10.79.0.1"
#define CLIENT_IP "10.79.0.2"
#define PORT 7401

static void setup(const char *role, const char *sock, const char *ip)
{
    char args[512];
    snprintf(args, sizeof args, "--no-huge --no-pci -m 256 --log-level=warning "
             "--vdev=net_memif0,role=%s,socket=%s,socket-abstract=no", role, sock);
    if (!strcmp(role, "server")) unlink(sock); /* a memif server leaves its socket behind */
    struct cx_dpdk_config c = {.eal_args = args, .ip = ip};
    CK(cx_dpdk_setup(&c));
}

int main(int argc, char **argv)
{
    char addr[64];
    snprintf(addr, sizeof addr, "dpdk://%s:%d", SERVER_IP, PORT);
    struct cx_link *k;
    struct mlink m;
    if (argc == 3 && !strcmp(argv[1], "server")) {
        setup("server", argv[2], SERVER_IP);
        struct cx_listener *l;
        CK(cx_dpdk_ops.listen(addr, &l));
        printf("ready\n");
        fflush(stdout);
        CK(cx_dpdk_ops.accept(l, 60000, &k));
        cx_dpdk_ops.listener_close(l);
        CK(cx_stack_assemble(&k, 1, &k));
        ml_init(&m, k);
        ml_serve(&m);
        cx_link_close(k);
        cx_dpdk_shutdown();
        return 0;
    }
    if (argc < 5 || strcmp(argv[1], "client")) {
        fprintf(stderr, "usage: %s server <socket> | client <socket> <test> <quick|full> [reps]\n",
                argv[0]);
        return 2;
    }
    setup("client", argv[2], CLIENT_IP);
    struct cx_link *raw = NULL;
    double t0 = now_s();
    int rc;
    while ((rc = cx_dpdk_ops.connect(addr, &raw)) < 0 && now_s() - t0 < 30)
        usleep(100000); /* the server may still be starting */
    CK(rc);
    CK(cx_stack_assemble(&raw, 1, &k));
    ml_init(&m, k);
    struct suite s = {.quick = !strcmp(argv[4], "quick"),
                      .out = {"driver", "dpdk", "memif, dpdk link + reliability + fragmentation"}};
    s.reps = argc > 5 ? atoi(argv[5]) : (s.quick ? 3 : 5);
    if (s.reps < 1 || s.reps > 16) s.reps = 3;
    run_tests(&s, argv[3], &m);
    /* no OP_STOP: the client leaves first and the server sees the link fail (as in
     * bench/transport/dpdk_bench.c); a memif server hanging up first crashes the client's
     * memif interrupt thread during shutdown */
    cx_link_flush(k, NULL, NULL, 2000);
    cx_link_close(k);
    cx_dpdk_shutdown();
    return 0;
}
