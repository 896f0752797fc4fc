/* The layers (layer_chan.c, layer_pipe.c) over the dpdk driver: each of their processes gets
 * a DPDK port of its own from LAYER_DPDK, set in its environment after fork and before its
 * runtime starts (the EAL comes up at the runtime's first listen; it cannot cross a fork):
 *
 *   LAYER_DPDK=memif:<socket>            process i is memif client i of memif_switch on
 *                                        <socket> (run.sh starts it with 2 + peers ports),
 *                                        IPv4 10.79.1.<i+1>
 *   LAYER_DPDK=af_packet:<ns>:<ifa>:<ifb>[:<ns2>:<if2>:<ns3>:<if3>...]
 *                                        process 0 (the measuring one, started inside the
 *                                        namespace of <ifa>) uses net_af_packet on <ifa>;
 *                                        process 1 enters network namespace <ns> (/run/netns)
 *                                        and uses <ifb>; process i >= 2 (hot-spot peer i-1)
 *                                        enters <nsi> and uses <ifi>; IPv4 10.79.2.<i+1>.
 *                                        Two ends of one veth pair for a pair of processes;
 *                                        with hot-spot peers, veths from each namespace to one
 *                                        bridge (run.sh makes them). Each process must have
 *                                        its namespace and interface: a missing one is an error.
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
    char spec[1024], vdev[1200], args[1400], ip[32], listen[80];
    if (strlen(s) >= sizeof spec) {
        fprintf(stderr, "LAYER_DPDK: longer than %zu characters\n", sizeof spec - 1);
        exit(2);
    }
    snprintf(spec, sizeof spec, "%s", s);
    if (!strncmp(spec, "memif:", 6)) {
        /* a MAC of its own: memif's random one comes from a generator seeded when the
         * program loaded, so processes forked from one would all draw the same */
        snprintf(vdev, sizeof vdev, "net_memif0,role=client,id=%d,socket=%s,socket-abstract=no,"
                 "mac=02:00:00:79:01:%02x", i, spec + 6, (i + 1) & 0xff);
        snprintf(ip, sizeof ip, "10.79.1.%d", i + 1);
    } else if (!strncmp(spec, "af_packet:", 10)) {
        /* fields: <ns> <ifa> <ifb> then <ns> <if> for each process from 2 on */
        char *f[2 + 2 * 34] = {0};
        int nf = 0;
        for (char *save = NULL, *t = strtok_r(spec + 10, ":", &save); t && nf < (int)(sizeof f / sizeof *f);
             t = strtok_r(NULL, ":", &save))
            f[nf++] = t;
        const char *ns = NULL, *ifn = NULL;
        if (nf >= 3 && (nf - 3) % 2 == 0) {
            if (i == 0) ifn = f[1];
            else if (i == 1) ns = f[0], ifn = f[2];
            else if (3 + 2 * (i - 2) + 1 < nf) ns = f[3 + 2 * (i - 2)], ifn = f[3 + 2 * (i - 2) + 1];
        }
        if (!ifn) {
            fprintf(stderr, "LAYER_DPDK=%s: af_packet:<ns>:<ifa>:<ifb>[:<ns2>:<if2>...], a namespace "
                            "and interface for every process (none for process %d%s)\n", s, i,
                    i >= 2 ? ", a hot-spot peer" : "");
            exit(2);
        }
        if (ns) {
            char path[320];
            snprintf(path, sizeof path, "/run/netns/%s", ns);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
                perror(path);
                exit(2);
            }
            close(fd);
        }
        snprintf(vdev, sizeof vdev, "net_af_packet0,iface=%s,framecnt=4096", ifn);
        snprintf(ip, sizeof ip, "10.79.2.%d", i + 1);
    } else {
        fprintf(stderr, "LAYER_DPDK=%s: want memif:<socket> or af_packet:<ns>:<ifa>:<ifb>[:<ns2>:<if2>...]\n", s);
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

/* LAYER_HOTSPOT_ONLY=1: the layer programs skip the pair's tests and run the hot-spot alone
 * (run.sh: the layers' af_packet hot-spot runs on a bridge fabric of its own, apart from the
 * pair's veth pair). */
static inline int layer_hotspot_only(void)
{
    const char *s = getenv("LAYER_HOTSPOT_ONLY");
    return s && !strcmp(s, "1");
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
