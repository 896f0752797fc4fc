/* The dpdk driver's settings from the caller and the environment; see cx_dpdk_conf.h. */
#include "transport/dpdk/cx_dpdk_conf.h"

#include "common/cx_env.h"
#include "common/cx_error.h"
#include "common/cx_fabric_env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *pick(const char *given, const char *env)
{
    const char *e;
    return given && *given ? given : (e = getenv(env)) && *e ? e : NULL;
}

/* Whether the EAL arguments already choose devices (then they are left as they are). */
static int selects_device(const char *args)
{
    static const char *shorts[] = {"-a", "-b", "-w"};
    static const char *longs[] = {"--allow", "--block", "--pci-whitelist", "--pci-blacklist",
                                  "--no-pci", "--vdev"};
    for (const char *t = args; *t;) {
        t += strspn(t, " \t\n");
        size_t n = strcspn(t, " \t\n");
        for (size_t i = 0; i < sizeof shorts / sizeof *shorts; i++)
            if (n >= 2 && !strncmp(t, shorts[i], 2))
                return 1;
        for (size_t i = 0; i < sizeof longs / sizeof *longs; i++) {
            size_t l = strlen(longs[i]);
            if (n >= l && !strncmp(t, longs[i], l) && (n == l || t[l] == '='))
                return 1;
        }
        t += n;
    }
    return 0;
}

static int add_arg(struct cx_dpdk_plan *p, const char *fmt, const char *v)
{
    size_t have = strlen(p->eal_args);
    int n = snprintf(p->eal_args + have, sizeof p->eal_args - have, fmt, have ? " " : "", v);
    if (n < 0 || (size_t)n >= sizeof p->eal_args - have)
        return cx_err_set(EINVAL, "dpdk: EAL arguments longer than %zu bytes", sizeof p->eal_args - 1);
    return 0;
}

int cx_dpdk_plan_make(const struct cx_dpdk_config *c, struct cx_dpdk_plan *out)
{
    memset(out, 0, sizeof *out);
    const char *s;
    uint64_t v;
    if ((s = getenv("CONFLUX_DPDK_MTU")) && *s && !(c && c->mtu)) {
        if (cx_env_parse_u64("CONFLUX_DPDK_MTU", s, 576, 65535, &v) < 0)
            return cx_err_wrap(-EINVAL, "dpdk");
        out->mtu = (unsigned)v;
    }
    if (c && c->mtu)
        out->mtu = c->mtu;
    out->peer_timeout_ms = c && c->peer_timeout_ms ? c->peer_timeout_ms : 0;
    if (!out->peer_timeout_ms && (s = getenv("CONFLUX_DPDK_PEER_TIMEOUT_MS")) && *s) {
        if (cx_env_parse_u64("CONFLUX_DPDK_PEER_TIMEOUT_MS", s, 1, 86400000, &v) < 0)
            return cx_err_wrap(-EINVAL, "dpdk");
        out->peer_timeout_ms = (unsigned)v;
    }
    int rc = cx_fabric_dev_resolve(&out->dev);
    if (rc < 0)
        return cx_err_wrap(rc, "dpdk: the fabric device");
    out->from_operator = rc;
    if (!out->mtu)
        out->mtu = out->dev.mtu;

    const char *args = pick(c ? c->eal_args : NULL, CX_ENV_DPDK_ARGS);
    if (args && strlen(args) >= sizeof out->eal_args)
        return cx_err_set(EINVAL, "dpdk: EAL arguments longer than %zu bytes", sizeof out->eal_args - 1);
    snprintf(out->eal_args, sizeof out->eal_args, "%s", args ? args : "");
    const char *dev = pick(c ? c->device : NULL, "CONFLUX_DPDK_DEVICE");
    int chooses = selects_device(out->eal_args);
    if (out->dev.pci[0]) {
        if (!chooses && (rc = add_arg(out, "%s-a %s", out->dev.pci)) < 0)
            return rc;
        if (!dev)
            dev = out->dev.pci; /* a PCI port's ethdev name is its address */
    } else if (out->dev.ifname[0] && !chooses && !dev) {
        if ((rc = add_arg(out, "%s--no-pci --vdev=net_af_packet0,iface=%s", out->dev.ifname)) < 0)
            return rc;
        dev = "net_af_packet0";
    }
    if (dev && strlen(dev) >= sizeof out->device)
        return cx_err_set(EINVAL, "dpdk: device name '%.32s...' is too long (CONFLUX_DPDK_DEVICE)", dev);
    snprintf(out->device, sizeof out->device, "%s", dev ? dev : "");

    const char *ip = pick(c ? c->ip : NULL, "CONFLUX_DPDK_IP");
    struct in_addr a;
    if (ip && inet_pton(AF_INET, ip, &a) != 1)
        return cx_err_set(EINVAL, "dpdk: '%s' is not an IPv4 address (CONFLUX_DPDK_IP)", ip);
    snprintf(out->ip, sizeof out->ip, "%s", ip ? ip : out->dev.ip);
    return 0;
}
