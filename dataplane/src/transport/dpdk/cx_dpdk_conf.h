/* The dpdk driver's settings, gathered once before the EAL starts: what the caller gave
 * (struct cx_dpdk_config), the driver's own CONFLUX_DPDK_* variables, and the operator's
 * (common/cx_fabric_env.h: CONFLUX_MTU, and the device the device plugin and Multus gave
 * the pod, transport/cx_fabric_dev.h), in that order of precedence. Free of DPDK itself, so
 * that it is tested (and built) without it. */
#ifndef CX_DPDK_CONF_H
#define CX_DPDK_CONF_H

#include "transport/cx_fabric_dev.h"
#include "transport/dpdk/cx_dpdk.h"

struct cx_dpdk_plan {
    char eal_args[4096]; /* before the driver's defaults (eal_start in cx_dpdk_port.c) */
    char device[64];     /* the port by name; "" = the first the EAL found */
    char ip[16];         /* "" = the first listen address's */
    unsigned mtu;        /* 0 = leave the device's */
    unsigned peer_timeout_ms; /* 0 = the default */
    struct cx_fabric_dev dev; /* what the operator's variables resolved to */
    int from_operator;   /* 1 when dev names a device (cx_fabric_dev_resolve returned 1) */
};

/* Gathers the settings into *out. The device: with a PCI address from the device plugin,
 * the port of that name, and "-a <address>" added to EAL arguments that select no device
 * themselves (-a, -b, --no-pci, --vdev, ...); without one but with the attachment's
 * interface, an af_packet port on it (--no-pci --vdev=net_af_packet0,iface=<interface>).
 * The MTU: c->mtu, else CONFLUX_DPDK_MTU (an explicit override), else CONFLUX_MTU. The
 * address: c->ip, else CONFLUX_DPDK_IP, else the attachment's. Returns 0, or a negative
 * errno with cx_errmsg naming the setting (-EAGAIN: network-status not written yet). */
int cx_dpdk_plan_make(const struct cx_dpdk_config *c, struct cx_dpdk_plan *out);

#endif
