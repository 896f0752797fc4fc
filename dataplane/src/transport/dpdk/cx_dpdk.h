/* The dpdk network driver: Conflux frames in UDP/IPv4 datagrams on one DPDK ethdev port
 * (a VF given by PCI address in production; net_memif, net_af_packet or net_af_xdp vdevs
 * in tests). Addresses are "dpdk://a.b.c.d:udp-port": the IPv4 address of the port and a
 * UDP port naming one endpoint on it, so many links share the port.
 *
 * The links are datagram links (CX_CAP_DATAGRAM: frames may be lost, duplicated across a
 * reconnect or reordered by the fabric; max_msg = MTU - 20 - 8 - 48). The stack builder
 * (src/stack/cx_stack.h) puts the reliability and fragmentation filters on top.
 *
 * One EAL per process, set up at the first listen/connect from the environment, or
 * earlier by cx_dpdk_setup:
 *   CONFLUX_DPDK_ARGS     EAL arguments, space separated, e.g. "--no-huge --no-pci -m 256
 *                         --vdev=net_memif0,role=client,socket=/run/cx.sock,socket-abstract=no"
 *                         or "-a 0000:3b:02.1". The driver adds --file-prefix=conflux-<pid>,
 *                         --no-telemetry, --log-level=warning and -l 0 unless the arguments
 *                         set them.
 *   CONFLUX_DPDK_IP       this port's IPv4 address (else the first listen address's)
 *   CONFLUX_DPDK_DEVICE   which port, by device name ("net_memif0", a PCI address);
 *                         default the first port
 *   CONFLUX_DPDK_MTU      set the port's MTU (default: CONFLUX_MTU, else the device's)
 * In a Fabric pod the operator's variables (common/cx_fabric_env.h) fill in the device,
 * address and MTU these leave unset: cx_dpdk_conf.h.
 *   CONFLUX_DPDK_PEER_TIMEOUT_MS  a link whose peer was silent this long fails (3000)
 *   CONFLUX_DPDK_WATCH_SPIN_US    after a link arms (its owner blocks on fd()), the watcher
 *                         polls without pause this long (100; 0 = naps of 50 us to 1 ms only)
 * Everything here is thread-safe: the port is shared by all links under one lock. */
#ifndef CX_DPDK_H
#define CX_DPDK_H

#include "transport/cx_driver.h"

#include <stdint.h>

struct cx_dpdk_config {
    const char *eal_args;     /* NULL = $CONFLUX_DPDK_ARGS (required one way or the other) */
    const char *ip;           /* NULL = $CONFLUX_DPDK_IP */
    const char *device;       /* NULL = $CONFLUX_DPDK_DEVICE */
    unsigned mtu;             /* 0 = $CONFLUX_DPDK_MTU, $CONFLUX_MTU or the device's */
    unsigned peer_timeout_ms; /* 0 = $CONFLUX_DPDK_PEER_TIMEOUT_MS or 3000 */
};

/* Initialises the EAL and starts the port now (instead of at the first listen/connect),
 * with c's fields taking precedence over the environment (c may be NULL). Waits up to 10 s
 * for a memif client's server to appear. -EALREADY when already done, -EINVAL for bad
 * settings, -ENODEV when the EAL or the port would not start (cx_errmsg has DPDK's reason).
 * The EAL cannot be initialised twice in one process, nor used across fork(). */
int cx_dpdk_setup(const struct cx_dpdk_config *c);

/* Stops the port and the EAL and removes its runtime directory. Links still open must not
 * be used afterwards; the driver cannot be set up again in this process. */
void cx_dpdk_shutdown(void);

struct cx_dpdk_stats {
    uint64_t rx_frames, tx_frames; /* frames handed to / taken from the port */
    uint64_t rx_dropped;           /* malformed, not for us, no such link, queue full */
    uint64_t tx_dropped;           /* no mbuf or the link's send queue full */
    uint64_t arp_requests, arp_replies;
};

/* Counters of this process's port (zeros before setup). */
void cx_dpdk_stats(struct cx_dpdk_stats *out);

/* The port's MAC address as "xx:xx:xx:xx:xx:xx" and IPv4 address, once set up ("" before). */
const char *cx_dpdk_port_desc(void);

extern const struct cx_driver_ops cx_dpdk_ops;

#endif
