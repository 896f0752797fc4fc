/* The memif fabric of the dpdk hot-spot test: the bare DPDK switch of the dpdk driver's tests
 * (dataplane/src/transport/dpdk/dpdk_test_switch.h: learns MACs, floods the unknown), run as a
 * process of its own like the vswitch a pod's memif plugs into. The hot node and its N peers
 * are memif clients of its interfaces 0..N on one socket (micro_dpdk's switch:<path>:<id>).
 *
 *   memif_switch <socket> <ports> <file-prefix>     prints "ready", stops on SIGTERM */
#define _GNU_SOURCE /* sched_setaffinity in the switch */
#include "transport/dpdk/dpdk_test_switch.h"

#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s <socket> <ports 2..%d> <file-prefix>\n", argv[0], SW_MAX_PORTS);
        return 2;
    }
    unlink(argv[1]); /* a memif server leaves its socket behind */
    return dpdk_test_switch_main(argv[1], atoi(argv[2]), argv[3]);
}
