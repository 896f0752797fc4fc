/* The memif fabric of the dpdk tests: a bare DPDK program (no Conflux) run as a process of
 * its own, like the vswitch (VPP, OVS-DPDK) a pod's memif plugs into in production. It is
 * the memif server of `nports` interfaces (ids 0..nports-1) on one socket and switches
 * Ethernet frames between them: learns source MACs, floods broadcast and unknown
 * destinations to the other ports, and sends a frame for a MAC learned on the port it came
 * from back down that port (reflective relay, as an SR-IOV NIC's switch loops VF-to-VF
 * traffic), so two links of one process can talk through it. Prints "ready" on stdout once
 * its ports run; stops on SIGTERM. Polls continuously for 2 ms after a frame, then with
 * short sleeps. */
#ifndef DPDK_TEST_SWITCH_H
#define DPDK_TEST_SWITCH_H

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SW_MAX_PORTS 8
#define SW_MACS 64

static volatile sig_atomic_t sw_stop;
static void sw_on_term(int sig) { (void)sig; sw_stop = 1; }

struct sw_mac { uint8_t mac[6]; uint16_t port; int used; };

static int sw_lookup(struct sw_mac *t, const uint8_t *mac)
{
    for (int i = 0; i < SW_MACS; i++)
        if (t[i].used && !memcmp(t[i].mac, mac, 6))
            return t[i].port;
    return -1;
}

static void sw_learn(struct sw_mac *t, const uint8_t *mac, uint16_t port)
{
    if (mac[0] & 1)
        return; /* a group address is never a source */
    int free_slot = -1;
    for (int i = 0; i < SW_MACS; i++) {
        if (t[i].used && !memcmp(t[i].mac, mac, 6)) {
            t[i].port = port;
            return;
        }
        if (!t[i].used && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0) {
        memcpy(t[free_slot].mac, mac, 6);
        t[free_slot].port = port;
        t[free_slot].used = 1;
    }
}

/* memif's disconnect runs on DPDK's interrupt thread and unmaps a client's rings with no
 * lock against the data path: a burst already inside the PMD when a client process ends
 * faults (SIGSEGV in librte_net_memif, seen in CI in rx as well as tx). Reading the link
 * state first narrows the race; the guard below closes it: a fault inside a burst jumps
 * back out, the burst counts as empty and the frames are lost, as on a real switch whose
 * port went down. Any other fault still kills the switch. */
static sigjmp_buf sw_jmp;
static volatile sig_atomic_t sw_in_burst;
static unsigned long sw_faults;

static void sw_on_fault(int sig)
{
    if (sw_in_burst) {
        sw_in_burst = 0;
        siglongjmp(sw_jmp, 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void sw_guard_faults(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = sw_on_fault;
    sa.sa_flags = SA_NODEFER; /* the jump leaves the handler: keep SIGSEGV unblocked */
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

static int sw_port_up(uint16_t port)
{
    struct rte_eth_link link;
    return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

static uint16_t sw_rx(uint16_t port, struct rte_mbuf **m, uint16_t n)
{
    if (!sw_port_up(port))
        return 0;
    if (sigsetjmp(sw_jmp, 0)) {
        sw_faults++;
        return 0;
    }
    sw_in_burst = 1;
    uint16_t got = rte_eth_rx_burst(port, 0, m, n);
    sw_in_burst = 0;
    return got;
}

static void sw_send(uint16_t port, struct rte_mbuf *m)
{
    if (!sw_port_up(port)) {
        rte_pktmbuf_free(m);
        return;
    }
    if (sigsetjmp(sw_jmp, 0)) {
        sw_faults++; /* the mbuf may be half sent: leaked, not freed twice */
        return;
    }
    sw_in_burst = 1;
    uint16_t sent = rte_eth_tx_burst(port, 0, &m, 1);
    sw_in_burst = 0;
    if (sent == 0)
        rte_pktmbuf_free(m); /* port down or full: the frame is lost, as on a real switch */
}

static int dpdk_test_switch_main(const char *sock, int nports, const char *prefix)
{
    char args[SW_MAX_PORTS][256], fp[96];
    char *argv[SW_MAX_PORTS + 16];
    int argc = 0;
    argv[argc++] = "cx-dpdk-switch";
    argv[argc++] = "--no-huge";
    argv[argc++] = "--no-pci";
    argv[argc++] = "-m";
    argv[argc++] = "128";
    argv[argc++] = "--no-telemetry";
    argv[argc++] = "--log-level=warning";
    argv[argc++] = "-l";
    argv[argc++] = "0";
    snprintf(fp, sizeof fp, "--file-prefix=%s", prefix);
    argv[argc++] = fp;
    if (nports < 1 || nports > SW_MAX_PORTS)
        return 2;
    for (int i = 0; i < nports; i++) {
        snprintf(args[i], sizeof args[i],
                 "--vdev=net_memif%d,role=server,id=%d,socket=%s,socket-abstract=no", i, i, sock);
        argv[argc++] = args[i];
    }
    argv[argc] = NULL;
    cpu_set_t cpus;
    sched_getaffinity(0, sizeof cpus, &cpus);
    if (rte_eal_init(argc, argv) < 0) {
        fprintf(stderr, "switch: EAL init: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    sched_setaffinity(0, sizeof cpus, &cpus); /* do not hog CPU 0 of a shared machine */
    struct rte_mempool *pool =
        rte_pktmbuf_pool_create("sw_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!pool) {
        fprintf(stderr, "switch: mbuf pool: %s\n", rte_strerror(rte_errno));
        return 1;
    }
    struct rte_eth_conf conf;
    memset(&conf, 0, sizeof conf);
    for (uint16_t p = 0; p < nports; p++) {
        if (rte_eth_dev_configure(p, 1, 1, &conf) < 0 ||
            rte_eth_rx_queue_setup(p, 0, 1024, 0, NULL, pool) < 0 ||
            rte_eth_tx_queue_setup(p, 0, 1024, 0, NULL) < 0 || rte_eth_dev_start(p) < 0) {
            fprintf(stderr, "switch: port %u would not start\n", p);
            return 1;
        }
    }
    signal(SIGTERM, sw_on_term);
    sw_guard_faults(); /* after EAL init, and over any handler a library installed */
    prctl(PR_SET_TIMERSLACK, 1000UL); /* a 10 us nap is 10 us, not 60 */
    printf("ready\n");
    fflush(stdout);
    static struct sw_mac table[SW_MACS];
    uint64_t last_us = 0;
    while (!sw_stop) {
        unsigned got = 0;
        for (uint16_t p = 0; p < nports; p++) {
            struct rte_mbuf *m[32];
            uint16_t n = sw_rx(p, m, 32);
            got += n;
            for (uint16_t i = 0; i < n; i++) {
                const uint8_t *eth = rte_pktmbuf_mtod(m[i], const uint8_t *);
                sw_learn(table, eth + 6, p);
                int to = eth[0] & 1 ? -1 : sw_lookup(table, eth);
                if (to >= 0) {
                    sw_send((uint16_t)to, m[i]);
                    continue;
                }
                for (uint16_t q = 0; q < nports; q++) /* flood: one reference per copy */
                    if (q != p) {
                        rte_mbuf_refcnt_update(m[i], 1);
                        sw_send(q, m[i]);
                    }
                rte_pktmbuf_free(m[i]);
            }
        }
        /* busy for 2 ms after a frame, then 10 us naps (timer slack 1 us) for a second, so
         * the fabric adds microseconds, not a 70 us nap, to what the tests time (wake-up
         * latency), without taking a core of the shared machine */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
        if (got)
            last_us = now_us;
        else if (now_us - last_us > 2000)
            usleep(now_us - last_us > 1000000 ? 200 : 10);
    }
    if (sw_faults)
        fprintf(stderr, "switch: %lu bursts faulted in a port's disconnect (memif race)\n",
                sw_faults);
    for (uint16_t p = 0; p < nports; p++) {
        rte_eth_dev_stop(p);
        rte_eth_dev_close(p);
    }
    rte_eal_cleanup();
    return 0;
}

#endif
