/* The fabric device a pod was given, resolved from what the operator, the SR-IOV device
 * plugin and Multus put in the sidecar's environment (names: common/cx_fabric_env.h):
 *
 *   CONFLUX_DEVICE_RESOURCE=intel.com/sriov_netdevice      the resource the sidecar requests
 *   PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE=0000:3b:02.1,...   the device plugin's allocation
 *   CONFLUX_NETWORK_STATUS=/etc/conflux/podinfo/network-status   Multus' annotation, a JSON
 *       list of {name, interface, ips, mac, default, device-info:{type, pci:{pci-address}}}
 *   CONFLUX_MTU=9000                                       the Fabric's MTU
 *
 * The attachment is the network-status entry whose PCI address is one of the device
 * plugin's (without a device list: the first entry that is not the cluster's default
 * network); the device is that address (without network-status: the list's first).
 * Everything read is checked: hostile or malformed input is an error with a message
 * (cx_errmsg), never a crash or a silent guess. */
#ifndef CX_FABRIC_DEV_H
#define CX_FABRIC_DEV_H

#include <stddef.h>

#define CX_FABRIC_MAX_PCI 32          /* addresses in one PCIDEVICE_* value */
#define CX_FABRIC_MAX_STATUS (1 << 18) /* bytes of a network-status file */

struct cx_fabric_dev {
    char pci[24];      /* the device, "dddd:bb:dd.f" in lower case; "" without one */
    char ifname[16];   /* the attachment's interface in the pod ("net1"); "" if not known */
    char ip[16];       /* the attachment's first IPv4 address; "" if none */
    char mac[18];      /* its MAC, "xx:xx:xx:xx:xx:xx" in lower case; "" if not known */
    char network[254]; /* the attachment's name ("ns/sriov-net"); "" if not known */
    unsigned mtu;      /* CONFLUX_MTU; 0 when not set */
};

/* The device plugin's variable for a resource into buf: "PCIDEVICE_" then the name with
 * '/' and '.' as '_', upper-cased. -EINVAL for an empty name, a character a resource name
 * cannot have, or a name that does not fit. */
int cx_fabric_pci_env_name(const char *resource, char *buf, size_t cap);

/* Parses a PCIDEVICE_* value ("0000:3b:02.1,0000:3b:02.2"; short "3b:02.1" is domain 0)
 * into out[0..max), normalised. Returns the count (at least 1), or -EINVAL. */
int cx_fabric_pci_list(const char *value, char (*out)[24], int max);

/* Picks the attachment out of network-status JSON text[0..len) (see above) and fills the
 * network, ifname, ip, mac and pci fields of *out (the others are left alone). pcis[0..npci)
 * are the device plugin's addresses (npci may be 0). -EINVAL for malformed JSON or fields,
 * -ENOENT when no entry fits, -ENODEV when the attachment's PCI address is not one of
 * pcis, -EAGAIN for an empty text (Multus has not annotated the pod yet). */
int cx_fabric_netstatus_parse(const char *text, size_t len, const char (*pcis)[24], int npci,
                              struct cx_fabric_dev *out);

/* Resolves the device from this process's environment into *out (zeroed first). Returns 1
 * when the operator named a device (CONFLUX_DEVICE_RESOURCE or CONFLUX_NETWORK_STATUS set),
 * 0 when it did not (only mtu may then be set), or a negative errno with cx_errmsg naming
 * the variable or file at fault: -ENOENT for a missing PCIDEVICE_* variable or file,
 * -EAGAIN for a network-status file still empty, as cx_fabric_netstatus_parse otherwise. */
int cx_fabric_dev_resolve(struct cx_fabric_dev *out);

#endif
