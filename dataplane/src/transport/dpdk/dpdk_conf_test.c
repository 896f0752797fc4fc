/* The dpdk driver's settings (cx_dpdk_conf.h): what a Fabric pod's environment (the
 * operator's CONFLUX_* variables, the device plugin's PCIDEVICE_*, Multus' network-status)
 * turns into EAL arguments, port name, address and MTU, and the precedence of the caller's
 * config and the driver's own CONFLUX_DPDK_* over them. No EAL is started: the devices
 * named here do not exist on a test machine. */
#include "common/cx_error.h"
#include "common/cx_fabric_env.h"
#include "common/cx_test.h"
#include "transport/dpdk/cx_dpdk_conf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char SRIOV[] =
    "[{\"name\":\"cbr0\",\"interface\":\"eth0\",\"ips\":[\"10.244.1.7\"],\"default\":true},"
    "{\"name\":\"default/sriov-net\",\"interface\":\"net1\",\"ips\":[\"192.168.50.5\"],"
    "\"mac\":\"3a:1b:2c:3d:4e:5f\",\"device-info\":{\"type\":\"pci\",\"pci\":{\"pci-address\":\"0000:3b:02.1\"}}}]";
static const char MACVLAN[] =
    "[{\"name\":\"cbr0\",\"interface\":\"eth0\",\"default\":true},"
    "{\"name\":\"default/mv\",\"interface\":\"net1\",\"ips\":[\"10.9.0.3\"]}]";

static char g_path[64];

static void write_status(const char *text)
{
    if (!g_path[0])
        snprintf(g_path, sizeof g_path, "/tmp/cx-dpdk-conf-%d", (int)getpid());
    FILE *f = fopen(g_path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
    setenv(CX_ENV_NETWORK_STATUS, g_path, 1);
}

static void clear_env(void)
{
    const char *names[] = {CX_ENV_DPDK_ARGS, CX_ENV_MTU, CX_ENV_DEVICE_RESOURCE, CX_ENV_NETWORK_STATUS,
                           "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "CONFLUX_DPDK_MTU", "CONFLUX_DPDK_IP",
                           "CONFLUX_DPDK_DEVICE", "CONFLUX_DPDK_PEER_TIMEOUT_MS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        unsetenv(names[i]);
}

/* An SR-IOV Fabric pod, as the operator, the device plugin and Multus set it up. */
static void sriov_pod(void)
{
    clear_env();
    setenv(CX_ENV_DPDK_ARGS, "-l 0-1 -m 512", 1);
    setenv(CX_ENV_MTU, "9000", 1);
    setenv(CX_ENV_DEVICE_RESOURCE, "intel.com/sriov_netdevice", 1);
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:3b:02.1", 1);
    write_status(SRIOV);
}

static struct cx_dpdk_plan g_pl;

CX_TEST(without_the_operator_the_driver_settings_stand_alone)
{
    clear_env();
    setenv(CX_ENV_DPDK_ARGS, "--no-huge --no-pci --vdev=net_memif0", 1);
    setenv("CONFLUX_DPDK_IP", "10.1.0.1", 1);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_STR(g_pl.eal_args, "--no-huge --no-pci --vdev=net_memif0");
    CX_CHECK_STR(g_pl.device, "");
    CX_CHECK_STR(g_pl.ip, "10.1.0.1");
    CX_CHECK_EQ_INT(g_pl.mtu, 0);
    CX_CHECK_EQ_INT(g_pl.from_operator, 0);
    clear_env();
}

CX_TEST(an_sriov_pod_gets_its_vf_address_and_mtu)
{
    sriov_pod();
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_EQ_INT(g_pl.from_operator, 1);
    CX_CHECK_STR(g_pl.eal_args, "-l 0-1 -m 512 -a 0000:3b:02.1"); /* only its VF is probed */
    CX_CHECK_STR(g_pl.device, "0000:3b:02.1");
    CX_CHECK_STR(g_pl.ip, "192.168.50.5");
    CX_CHECK_EQ_INT(g_pl.mtu, 9000); /* CONFLUX_MTU, the operator's name */
    CX_CHECK_STR(g_pl.dev.mac, "3a:1b:2c:3d:4e:5f");

    /* no dpdkArgs on the Fabric: the device alone is enough */
    unsetenv(CX_ENV_DPDK_ARGS);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_STR(g_pl.eal_args, "-a 0000:3b:02.1");
    clear_env();
}

CX_TEST(explicit_settings_win_over_the_operators)
{
    sriov_pod();
    setenv("CONFLUX_DPDK_MTU", "1500", 1); /* the driver's own name: an explicit override */
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_EQ_INT(g_pl.mtu, 1500);
    struct cx_dpdk_config c = {.mtu = 4000, .ip = "10.2.0.9", .device = "net_memif0",
                               .eal_args = "--no-huge --vdev=net_memif0"};
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(&c, &g_pl), 0);
    CX_CHECK_EQ_INT(g_pl.mtu, 4000);
    CX_CHECK_STR(g_pl.ip, "10.2.0.9");
    CX_CHECK_STR(g_pl.device, "net_memif0");
    CX_CHECK_STR(g_pl.eal_args, "--no-huge --vdev=net_memif0"); /* it chose its devices */
    setenv("CONFLUX_DPDK_IP", "10.3.0.1", 1);
    setenv("CONFLUX_DPDK_DEVICE", "0000:3b:02.1", 1);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_STR(g_pl.ip, "10.3.0.1");
    CX_CHECK_STR(g_pl.device, "0000:3b:02.1");
    /* arguments that choose devices are left alone, in each spelling */
    const char *choose[] = {"-a 0000:3b:02.1", "-a0000:3b:02.1", "--allow=0000:3b:02.1", "-b 0000:00:01.0",
                            "--no-pci", "--vdev net_af_packet0,iface=x", "-w 0000:3b:02.1"};
    for (size_t i = 0; i < sizeof choose / sizeof *choose; i++) {
        setenv(CX_ENV_DPDK_ARGS, choose[i], 1);
        CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
        CX_CHECK_STR(g_pl.eal_args, choose[i]);
    }
    clear_env();
}

CX_TEST(an_attachment_without_a_pci_device_gets_an_af_packet_port_on_its_interface)
{
    clear_env();
    setenv(CX_ENV_DPDK_ARGS, "--no-huge -m 160", 1);
    write_status(MACVLAN);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), 0);
    CX_CHECK_STR(g_pl.eal_args, "--no-huge -m 160 --no-pci --vdev=net_af_packet0,iface=net1");
    CX_CHECK_STR(g_pl.device, "net_af_packet0");
    CX_CHECK_STR(g_pl.ip, "10.9.0.3");
    clear_env();
}

CX_TEST(a_device_the_pod_was_not_given_is_an_error_not_a_guess)
{
    sriov_pod();
    unsetenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE");
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), -ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "dpdk: the fabric device") && strstr(cx_errmsg(), "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"));
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:5e:00.1", 1);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), -ENODEV);
    write_status("");
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), -EAGAIN);
    setenv(CX_ENV_MTU, "jumbo", 1);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "CONFLUX_MTU") != NULL);
    clear_env();
    setenv("CONFLUX_DPDK_MTU", "9k", 1);
    CX_CHECK_EQ_INT(cx_dpdk_plan_make(NULL, &g_pl), -EINVAL);
    clear_env();
    unlink(g_path);
}

CX_TEST_MAIN()
