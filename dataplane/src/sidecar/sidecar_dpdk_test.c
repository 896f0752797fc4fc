/* A dpdk Fabric pod's sidecar (build/bin/confluxd --role=sidecar) set up only by what the
 * operator, the device plugin and Multus put in its environment (common/cx_fabric_env.h):
 * its channel runtime listens on the address Multus' network-status gives the attachment,
 * on a port on that attachment's interface (af_packet: no PCI device here), with the
 * operator's CONFLUX_MTU; a device the pod was not given stops it with a message naming the
 * variable. Runs in a network namespace of its own with a veth pair (root). */
#define _GNU_SOURCE
#include "common/cx_fabric_env.h"
#include "common/cx_test.h"
#include "sidecar/sc_testutil.h"

#include <fcntl.h>
#include <sched.h>

#define FABRIC_IP "10.79.0.1"
#define FABRIC_MTU 1400

static char g_ns[48], g_status[96], g_sock[96], g_prefix[128];

static int sh(const char *cmd)
{
    char full[512];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* This process moves into a new namespace holding veth cxsc0 <-> cxsc1, both up. */
static const char *netns_up(void)
{
    if (geteuid() != 0)
        return "network namespaces need root";
    if (sh("ip -V") != 0)
        return "the ip command (iproute2) is missing";
    char cmd[160];
    snprintf(g_ns, sizeof g_ns, "cxsc-dpdk-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "ip netns add %s", g_ns);
    if (sh(cmd) != 0)
        return "could not add a network namespace";
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", g_ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0)
        return "could not enter the network namespace";
    close(fd);
    /* cxsc1 stands for the pod's cluster interface: its kernel address is not the fabric's */
    if (sh("ip link add cxsc0 type veth peer name cxsc1") || sh("ip link set cxsc0 up") ||
        sh("ip link set cxsc1 up") || sh("ip link set lo up") ||
        sh("ip addr add 10.244.0.9/24 dev cxsc1"))
        return "could not make the veth pair";
    return NULL;
}

static void operator_env(void)
{
    snprintf(g_status, sizeof g_status, "/tmp/%s.network-status", g_ns);
    snprintf(g_sock, sizeof g_sock, "/tmp/%s.sock", g_ns);
    snprintf(g_prefix, sizeof g_prefix, "--no-huge -m 160 --file-prefix=%s", g_ns);
    FILE *f = fopen(g_status, "w");
    if (!f)
        abort();
    fputs("[{\"name\":\"cbr0\",\"interface\":\"eth0\",\"ips\":[\"10.244.0.9\"],\"default\":true},"
          "{\"name\":\"default/fast\",\"interface\":\"cxsc0\",\"ips\":[\"" FABRIC_IP "\"]}]", f);
    fclose(f);
    char mtu[16];
    snprintf(mtu, sizeof mtu, "%d", FABRIC_MTU);
    setenv(CX_ENV_TRANSPORT, "dpdk", 1);
    setenv(CX_ENV_FABRIC, "fast", 1);
    setenv(CX_ENV_DPDK_ARGS, g_prefix, 1);
    setenv(CX_ENV_NETWORK_STATUS, g_status, 1);
    setenv(CX_ENV_MTU, mtu, 1);
}

CX_TEST(sidecar_listens_on_the_attachment_multus_reports)
{
#ifdef CX_NO_DPDK
    CX_SKIP("DPDK not built in (pkg-config libdpdk not found: install libdpdk-dev)");
#endif
    const char *why = netns_up();
    if (why)
        CX_SKIP("%s", why);
    operator_env();
    char sockarg[128];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", g_sock);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", "--quiet", NULL};
    struct proc p;
    int rc = proc_start(&p, args, 0);
    fprintf(stderr, "  %s\n", p.line);
    CX_CHECK_EQ_INT(rc, 0);
    /* "listening unix:PATH http - channels dpdk://IP:PORT" */
    CX_CHECK(strstr(p.line, "channels dpdk://" FABRIC_IP ":") != NULL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ip link show cxsc0 | grep -q 'mtu %d '", FABRIC_MTU);
    CX_CHECK_EQ_INT(sh(cmd), 0); /* the port took CONFLUX_MTU */
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
}

CX_TEST(sidecar_refuses_a_device_it_was_not_given)
{
#ifdef CX_NO_DPDK
    CX_SKIP("DPDK not built in (pkg-config libdpdk not found: install libdpdk-dev)");
#endif
    if (!g_ns[0])
        CX_SKIP("needs the namespace of the test before it");
    operator_env();
    setenv(CX_ENV_DEVICE_RESOURCE, "intel.com/sriov_netdevice", 1); /* no PCIDEVICE_* for it */
    char sockarg[128];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", g_sock);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", NULL};
    struct proc p;
    CX_CHECK_EQ_INT(proc_start(&p, args, 1), -1); /* it exits without a listening line */
    CX_CHECK_EQ_INT(wait_child(p.pid, 30), 1);
    char err[4096];
    slurp(p.err, err, sizeof err);
    close(p.out), close(p.err);
    fprintf(stderr, "  %.300s\n", err);
    CX_CHECK(strstr(err, "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE is not set") != NULL);
    unsetenv(CX_ENV_DEVICE_RESOURCE);
}

CX_TEST(zz_cleanup)
{
    if (!g_ns[0])
        CX_SKIP("no namespace was made");
    unlink(g_status);
    unlink(g_sock);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ip netns del %s", g_ns); /* takes the veth pair along */
    CX_CHECK_EQ_INT(sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf /var/run/dpdk/%s", g_ns);
    sh(cmd);
}

CX_TEST_MAIN()
