/* The one list of what the operator gives a Fabric pod's sidecar: the environment variables
 * and files that operator/internal/placement/apply.go sets, under the names the data plane
 * reads. operator/internal/placement/fabricenv_test.go reads this file and checks both
 * ways: every CX_ENV_* / CX_FILE_* below is set by the operator under that name, and every
 * variable and file the operator sets on the sidecar is listed here. Keep one definition a
 * line: `#define CX_ENV_<X> "<name>"` (that test parses exactly this form).
 *
 * Who reads what: confluxd (src/cmd/confluxd.c) the transport and fabric; the dpdk driver
 * (src/transport/dpdk/cx_dpdk_conf.c) the EAL arguments, the MTU and, through
 * src/transport/cx_fabric_dev.h, the device (CONFLUX_DEVICE_RESOURCE, the device plugin's
 * PCIDEVICE_* variable and the network-status file); UCX reads UCX_TLS itself. */
#ifndef CX_FABRIC_ENV_H
#define CX_FABRIC_ENV_H

/* ---- set by the operator (apply.go) ---- */
#define CX_ENV_TRANSPORT "CONFLUX_TRANSPORT"             /* the Fabric's kind: rdma, dpdk, ... */
#define CX_ENV_FABRIC "CONFLUX_FABRIC"                   /* the Fabric's name */
#define CX_ENV_UCX_TLS "UCX_TLS"                         /* spec.transport.ucxTLS */
#define CX_ENV_DPDK_ARGS "CONFLUX_DPDK_ARGS"             /* spec.transport.dpdkArgs, space separated */
#define CX_ENV_MTU "CONFLUX_MTU"                         /* spec.transport.mtu, bytes */
#define CX_ENV_DEVICE_RESOURCE "CONFLUX_DEVICE_RESOURCE" /* spec.resourceName, e.g. intel.com/sriov */
#define CX_ENV_NETWORK_STATUS "CONFLUX_NETWORK_STATUS"   /* the path of the network-status file */
/* The downward-API file holding the pod's k8s.v1.cni.cncf.io/network-status annotation
 * (Multus), where the operator mounts it; CONFLUX_NETWORK_STATUS names it. */
#define CX_FILE_NETWORK_STATUS "/etc/conflux/podinfo/network-status"

/* ---- set by others ---- */
/* The SR-IOV device plugin's variable for a resource: this prefix, then the resource name
 * with '/' and '.' turned into '_', upper-cased (intel.com/sriov_netdevice:
 * PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE); its value is the container's PCI addresses,
 * separated by commas. */
#define CX_PCIDEVICE_PREFIX "PCIDEVICE_"

#endif
