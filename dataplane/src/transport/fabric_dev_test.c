/* The fabric device from the environment (cx_fabric_dev.h): the device plugin's variable,
 * its PCI list, Multus' network-status in a real file, and what malformed or hostile input
 * gives: an error naming the culprit, never a crash or a guess. */
#include "common/cx_error.h"
#include "common/cx_fabric_env.h"
#include "common/cx_test.h"
#include "transport/cx_fabric_dev.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What Multus writes for a pod on the cluster network and one SR-IOV attachment. */
static const char STATUS[] =
    "[{\"name\":\"cbr0\",\"interface\":\"eth0\",\"ips\":[\"10.244.1.7\"],\"mac\":\"0a:58:0a:f4:01:07\","
    "\"default\":true,\"dns\":{}},"
    "{\"name\":\"default/sriov-net\",\"interface\":\"net1\",\"ips\":[\"fd00::5\",\"192.168.50.5\"],"
    "\"mac\":\"3A:1B:2C:3D:4E:5F\",\"dns\":{},\"device-info\":{\"type\":\"pci\",\"version\":\"1.1.0\","
    "\"pci\":{\"pci-address\":\"0000:3B:02.1\"}}}]";

static char g_dir[64];

/* A file of the given text in this test's temporary folder; returns its path. */
static const char *status_file(const char *name, const char *text)
{
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/cx-fabric-dev-XXXXXX");
        if (!mkdtemp(g_dir))
            abort();
    }
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
    return path;
}

static void clear_env(void)
{
    unsetenv(CX_ENV_MTU);
    unsetenv(CX_ENV_DEVICE_RESOURCE);
    unsetenv(CX_ENV_NETWORK_STATUS);
    unsetenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE");
}

CX_TEST(pci_env_name_follows_the_device_plugin)
{
    char b[128];
    CX_CHECK_EQ_INT(cx_fabric_pci_env_name("intel.com/sriov_netdevice", b, sizeof b), 0);
    CX_CHECK_STR(b, "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE");
    CX_CHECK_EQ_INT(cx_fabric_pci_env_name("mellanox.com/cx5-vf.a", b, sizeof b), 0);
    CX_CHECK_STR(b, "PCIDEVICE_MELLANOX_COM_CX5-VF_A");
    CX_CHECK_EQ_INT(cx_fabric_pci_env_name("", b, sizeof b), -EINVAL);
    CX_CHECK_EQ_INT(cx_fabric_pci_env_name("a=b", b, sizeof b), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "'='") != NULL);
    CX_CHECK_EQ_INT(cx_fabric_pci_env_name("intel.com/sriov", b, 12), -EINVAL);
}

CX_TEST(pci_list_parses_and_normalises)
{
    char l[4][24];
    CX_CHECK_EQ_INT(cx_fabric_pci_list("0000:3B:02.1, 3b:02.2,10000:00:1f.7", l, 4), 3);
    CX_CHECK_STR(l[0], "0000:3b:02.1");
    CX_CHECK_STR(l[1], "0000:3b:02.2");
    CX_CHECK_STR(l[2], "10000:00:1f.7");
    const char *bad[] = {"", ",", "0000:3b:02.1,", "0000:3b:02", "0000:3b:02.8", "000:3b:02.1",
                         "0000:3b:20.1", "zz00:3b:02.1", "0000:3b:02.1x", "0000;3b:02.1",
                         "0:0:0:0:0.1", "0000:3b:02.1,0000:3b:02.2,0000:3b:02.3,0000:3b:02.4,0000:3b:02.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (cx_fabric_pci_list(bad[i], l, 4) != -EINVAL) {
            fprintf(stderr, "  accepted '%s'\n", bad[i]);
            CX_CHECK(0);
        }
    }
}

CX_TEST(network_status_picks_the_device_plugins_attachment)
{
    char pcis[2][24] = {"0000:3b:02.7", "0000:3b:02.1"};
    struct cx_fabric_dev d = {0};
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(STATUS, strlen(STATUS), (const char (*)[24])pcis, 2, &d), 0);
    CX_CHECK_STR(d.pci, "0000:3b:02.1");
    CX_CHECK_STR(d.ifname, "net1");
    CX_CHECK_STR(d.ip, "192.168.50.5"); /* the first IPv4 address; the driver is IPv4 */
    CX_CHECK_STR(d.mac, "3a:1b:2c:3d:4e:5f");
    CX_CHECK_STR(d.network, "default/sriov-net");

    /* not the device plugin's device: refused, with both sides named */
    char other[1][24] = {"0000:af:00.2"};
    memset(&d, 0, sizeof d);
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(STATUS, strlen(STATUS), (const char (*)[24])other, 1, &d), -ENODEV);
    CX_CHECK(strstr(cx_errmsg(), "0000:3b:02.1") && strstr(cx_errmsg(), "0000:af:00.2"));
    CX_CHECK_STR(d.ifname, "");

    /* the cluster network's entry is never the fabric's, even with a device */
    const char *dflt = "[{\"name\":\"cbr0\",\"default\":true,\"device-info\":{\"pci\":{\"pci-address\":\"0000:3b:02.1\"}}},"
                       "{\"name\":\"fast\",\"interface\":\"net1\"}]";
    memset(&d, 0, sizeof d);
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(dflt, strlen(dflt), NULL, 0, &d), 0);
    CX_CHECK_STR(d.network, "fast");
    CX_CHECK_STR(d.pci, "");

    /* without a device list: the attachment with a device */
    memset(&d, 0, sizeof d);
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(STATUS, strlen(STATUS), NULL, 0, &d), 0);
    CX_CHECK_STR(d.pci, "0000:3b:02.1");

    /* an attachment without device-info (a macvlan, or an older CNI): the first that is not
     * the default network */
    const char *mv = "[{\"name\":\"cbr0\",\"interface\":\"eth0\",\"default\":true},"
                     "{\"name\":\"mv\",\"interface\":\"net1\",\"ips\":[\"10.9.0.3/24\"]}]";
    memset(&d, 0, sizeof d);
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(mv, strlen(mv), NULL, 0, &d), 0);
    CX_CHECK_STR(d.ifname, "net1");
    CX_CHECK_STR(d.ip, "10.9.0.3");
    CX_CHECK_STR(d.pci, "");
    CX_CHECK_STR(d.mac, "");
}

CX_TEST(network_status_malformed_is_an_error_that_says_why)
{
    static const struct { const char *text; int rc; const char *says; } cases[] = {
        {"", -EAGAIN, "empty"},
        {" \n", -EAGAIN, "empty"},
        {"[{\"name\":", -EINVAL, "network-status"},
        {"{\"name\":\"x\"}", -EINVAL, "not a list"},
        {"[1]", -EINVAL, "entry 0 is not an object"},
        {"[]", -ENOENT, "no attachment"},
        {"[{\"name\":\"cbr0\",\"default\":true}]", -ENOENT, "no attachment"},
        {"[{\"default\":\"yes\"}]", -EINVAL, "\"default\" is a string"},
        {"[{\"interface\":7}]", -EINVAL, "\"interface\" is a number"},
        {"[{\"interface\":\"../../etc\"}]", -EINVAL, "not an interface name"},
        {"[{\"interface\":\"net1,qpairs=16\"}]", -EINVAL, "not an interface name"},
        {"[{\"interface\":\"net 1\"}]", -EINVAL, "not an interface name"},
        {"[{\"interface\":\"a-very-long-interface-name\"}]", -EINVAL, "longer than 15"},
        {"[{\"ips\":\"10.0.0.1\"}]", -EINVAL, "\"ips\" is a string"},
        {"[{\"ips\":[\"10.0.0.300\"]}]", -EINVAL, "not an address"},
        {"[{\"ips\":[null]}]", -EINVAL, "ips[0] is not a string"},
        {"[{\"mac\":\"3a:1b:2c:3d:4e\"}]", -EINVAL, "mac"},
        {"[{\"mac\":\"3a:1b:2c:3d:4e:5f:00\"}]", -EINVAL, "mac"},
        {"[{\"device-info\":{\"pci\":{\"pci-address\":\"nope\"}}}]", -EINVAL, "not a PCI address"},
        {"[{\"device-info\":{\"pci\":[]}}]", -EINVAL, "\"pci\" is a list"},
        {"[{\"name\":\"a\",\"name\":\"b\"}]", -EINVAL, "network-status"},
        {"[{\"name\":\"x\"}] trailing", -EINVAL, "network-status"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cx_fabric_dev d = {0};
        int rc = cx_fabric_netstatus_parse(cases[i].text, strlen(cases[i].text), NULL, 0, &d);
        if (rc != cases[i].rc || !strstr(cx_errmsg(), cases[i].says)) {
            fprintf(stderr, "  '%s': %d '%s' (want %d, '%s')\n", cases[i].text, rc, cx_errmsg(),
                    cases[i].rc, cases[i].says);
            CX_CHECK(0);
        }
    }
    /* nesting deeper than the reader takes, and bytes that are not text */
    char deep[4096];
    memset(deep, '[', sizeof deep);
    struct cx_fabric_dev d = {0};
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(deep, sizeof deep, NULL, 0, &d), -EINVAL);
    const char bin[] = "[{\"name\":\"a\0b\"}]";
    CX_CHECK_EQ_INT(cx_fabric_netstatus_parse(bin, sizeof bin - 1, NULL, 0, &d), -EINVAL);
}

CX_TEST(resolve_from_the_operators_environment)
{
    clear_env();
    struct cx_fabric_dev d;
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), 0); /* nothing from the operator */
    CX_CHECK_STR(d.pci, "");
    CX_CHECK_EQ_INT(d.mtu, 0);

    setenv(CX_ENV_MTU, "9000", 1);
    setenv(CX_ENV_DEVICE_RESOURCE, "intel.com/sriov_netdevice", 1);
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:3b:02.1", 1);
    setenv(CX_ENV_NETWORK_STATUS, status_file("network-status", STATUS), 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), 1);
    CX_CHECK_STR(d.pci, "0000:3b:02.1");
    CX_CHECK_STR(d.ifname, "net1");
    CX_CHECK_STR(d.ip, "192.168.50.5");
    CX_CHECK_STR(d.mac, "3a:1b:2c:3d:4e:5f");
    CX_CHECK_EQ_INT(d.mtu, 9000);

    /* the device plugin's list alone: its first address */
    unsetenv(CX_ENV_NETWORK_STATUS);
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:5e:00.3,0000:5e:00.4", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), 1);
    CX_CHECK_STR(d.pci, "0000:5e:00.3");
    CX_CHECK_STR(d.ip, "");
    clear_env();
}

CX_TEST(resolve_errors_name_the_variable_or_file)
{
    clear_env();
    struct cx_fabric_dev d;
    setenv(CX_ENV_MTU, "9k", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "CONFLUX_MTU='9k'") != NULL);
    setenv(CX_ENV_MTU, "100", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EINVAL);
    unsetenv(CX_ENV_MTU);

    setenv(CX_ENV_DEVICE_RESOURCE, "intel.com/sriov_netdevice", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -ENOENT); /* the plugin's variable is missing */
    CX_CHECK(strstr(cx_errmsg(), "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE is not set") != NULL);
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:3b:02.1;rm -rf", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE") != NULL);

    /* network-status: a file that is not there, empty, malformed, another device */
    setenv("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE", "0000:af:00.2", 1);
    setenv(CX_ENV_NETWORK_STATUS, "/nonexistent/network-status", 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "/nonexistent/network-status") != NULL);
    setenv(CX_ENV_NETWORK_STATUS, status_file("empty", ""), 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EAGAIN);
    setenv(CX_ENV_NETWORK_STATUS, status_file("bad", "[{\"interface\":\"net1\","), 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "CONFLUX_NETWORK_STATUS=") != NULL);
    setenv(CX_ENV_NETWORK_STATUS, status_file("network-status", STATUS), 1);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -ENODEV);
    CX_CHECK(strstr(cx_errmsg(), "0000:af:00.2") != NULL);
    setenv(CX_ENV_NETWORK_STATUS, g_dir, 1); /* a folder */
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EINVAL);

    /* larger than any real annotation */
    size_t big = CX_FABRIC_MAX_STATUS + 10;
    char *t = malloc(big + 1);
    memset(t, ' ', big);
    t[0] = '[', t[big - 1] = ']', t[big] = 0;
    setenv(CX_ENV_NETWORK_STATUS, status_file("big", t), 1);
    free(t);
    CX_CHECK_EQ_INT(cx_fabric_dev_resolve(&d), -EFBIG);
    clear_env();
}

CX_TEST(cleanup)
{
    const char *names[] = {"network-status", "empty", "bad", "big"};
    for (size_t i = 0; g_dir[0] && i < sizeof names / sizeof *names; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s/%s", g_dir, names[i]);
        unlink(p);
    }
    CX_CHECK(!g_dir[0] || rmdir(g_dir) == 0);
}

CX_TEST_MAIN()
