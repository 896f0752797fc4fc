/* The layers (layer_chan.c, layer_pipe.c) over the dpdk driver: each of their processes gets
 * a DPDK port of its own from LAYER_DPDK, set in its environment after fork and before its
 * runtime starts (the EAL comes up at the runtime's first listen; it cannot cross a fork):
 *
 *   LAYER_DPDK=memif:<socket>            process i is memif client i of memif_switch on
 *                                        <socket> (run.sh starts it with 2 + peers ports),
 *                                        IPv4 10.79.1.<i+1>
 *   LAYER_DPDK=af_packet:<ns>:<ifa>:<ifb> process 0 (the measuring one, started inside the
 *                                        namespace of <ifa>) uses net_af_packet on <ifa>;
 *                                        process 1 enters network namespace <ns> (/run/netns)
 *                                        and uses <ifb>, the veth's other end; 10.79.2.<i+1>.
 *                                        No hot-spot peers (one veth pair).
 *
 * Both runtimes then listen on dpdk://<ip>:0: the channel's (LAYER_CHAN_LISTEN, no shm
 * rendezvous: CONFLUX_CHAN_SHM=0) and the pipe's direct link (CONFLUX_PIPE_LISTEN=dpdk). */
#ifndef LAYER_DPDK_H
#define LAYER_DPDK_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns */
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CX_HAVE_DPDK
#include "transport/dpdk/cx_dpdk.h"
#endif

/* The link the rows name: "dpdk" (memif), "af_packet", or NULL without LAYER_DPDK. */
static inline const char *layer_dpdk_link(void)
{
    const char *s = getenv("LAYER_DPDK");
    if (!s || !*s)
        return NULL;
    return strncmp(s, "af_packet:", 10) == 0 ? "af_packet" : "dpdk";
}

/* Gives process i (0 = the measuring one) its port; a no-op without LAYER_DPDK. Exits with a
 * message on a bad setting. */
static inline void layer_dpdk_env(int i)
{
    const char *s = getenv("LAYER_DPDK");
    if (!s || !*s)
        return;
    char spec[300], vdev[400], args[600], ip[32], listen[80];
    snprintf(spec, sizeof spec, "%s", s);
    if (!strncmp(spec, "memif:", 6)) {
        /* a MAC of its own: memif's random one comes from a generator seeded when the
         * program loaded, so processes forked from one would all draw the same */
        snprintf(vdev, sizeof vdev, "net_memif0,role=client,id=%d,socket=%s,socket-abstract=no,"
                 "mac=02:00:00:79:01:%02x", i, spec + 6, (i + 1) & 0xff);
        snprintf(ip, sizeof ip, "10.79.1.%d", i + 1);
    } else if (!strncmp(spec, "af_packet:", 10)) {
        char *ns = spec + 10, *ifa = strchr(ns, ':'), *ifb = ifa ? strchr(ifa + 1, ':') : NULL;
        if (!ifb || i > 1) {
            fprintf(stderr, "LAYER_DPDK=%s: af_packet:<ns>:<ifa>:<ifb>, processes 0 and 1 only (no "
                            "hot-spot peers)\n", s);
            exit(2);
        }
        *ifa++ = 0, *ifb++ = 0;
        if (i == 1) {
            char path[320];
            snprintf(path, sizeof path, "/run/netns/%s", ns);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
                perror(path);
                exit(2);
            }
            close(fd);
        }
        snprintf(vdev, sizeof vdev, "net_af_packet0,iface=%s,framecnt=4096", i ? ifb : ifa);
        snprintf(ip, sizeof ip, "10.79.2.%d", i + 1);
    } else {
        fprintf(stderr, "LAYER_DPDK=%s: want memif:<socket> or af_packet:<ns>:<ifa>:<ifb>\n", s);
        exit(2);
    }
    snprintf(args, sizeof args, "--no-huge --no-pci -m 256 --log-level=warning --vdev=%s", vdev);
    snprintf(listen, sizeof listen, "dpdk://%s:0", ip);
    setenv("CONFLUX_DPDK_ARGS", args, 1);
    setenv("CONFLUX_DPDK_IP", ip, 1);
    setenv("CONFLUX_CHAN_SHM", "0", 1);
    setenv("LAYER_CHAN_LISTEN", listen, 1);
    setenv("CONFLUX_PIPE_LISTEN", "dpdk", 1);
}

/* Stops this process's port and removes the EAL's runtime directory (/var/run/dpdk), which
 * a process that just exits leaves behind. Call it once the runtime using the port is gone. */
static inline void layer_dpdk_done(void)
{
#ifdef CX_HAVE_DPDK
    if (layer_dpdk_link())
        cx_dpdk_shutdown();
#endif
}

#endif
