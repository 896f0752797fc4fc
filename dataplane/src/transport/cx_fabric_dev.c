/* Resolving the pod's fabric device from its environment; see cx_fabric_dev.h. */
#include "transport/cx_fabric_dev.h"

#include "common/cx_error.h"
#include "common/cx_fabric_env.h"
#include "format/cx_json.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cx_fabric_pci_env_name(const char *resource, char *buf, size_t cap)
{
    size_t pre = strlen(CX_PCIDEVICE_PREFIX), n = resource ? strlen(resource) : 0;
    if (n == 0 || pre + n >= cap)
        return cx_err_set(EINVAL, "%s='%.64s': give a resource name of 1 to %zu characters",
                          CX_ENV_DEVICE_RESOURCE, resource ? resource : "", cap - pre - 1);
    memcpy(buf, CX_PCIDEVICE_PREFIX, pre);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)resource[i];
        /* a resource name: [domain/]name of letters, digits, '-', '_', '.' (Kubernetes) */
        if (!isalnum(c) && c != '-' && c != '_' && c != '.' && c != '/')
            return cx_err_set(EINVAL, "%s='%.64s': '%c' cannot be in a resource name",
                              CX_ENV_DEVICE_RESOURCE, resource, isprint(c) ? c : '?');
        buf[pre + i] = c == '/' || c == '.' ? '_' : (char)toupper(c);
    }
    buf[pre + n] = 0;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads exactly n hex digits from *s (at most 8). */
static int hexn(const char **s, int n, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < n; i++) {
        int h = hexval((*s)[i]);
        if (h < 0)
            return -1;
        v = v << 4 | (unsigned)h;
    }
    *s += n;
    *out = v;
    return 0;
}

/* "[dddd:]bb:dd.f" in s[0..n) into "dddd:bb:dd.f"; the domain has 4 to 8 digits. */
static int pci_norm(const char *s, size_t n, char out[24])
{
    unsigned dom = 0, bus, dev, fn;
    const char *p = s, *end = s + n;
    size_t dlen = 0;
    while (p + dlen < end && p[dlen] != ':')
        dlen++;
    if (n > 17)
        return -1;
    if (n - dlen > 1 && memchr(p + dlen + 1, ':', n - dlen - 1)) { /* a domain is given */
        if (dlen < 4 || dlen > 8 || hexn(&p, (int)dlen, &dom) < 0 || *p++ != ':')
            return -1;
    }
    if (end - p != 7 || hexn(&p, 2, &bus) < 0 || *p++ != ':' || hexn(&p, 2, &dev) < 0 ||
        *p++ != '.' || hexn(&p, 1, &fn) < 0 || dev > 0x1f || fn > 7)
        return -1;
    snprintf(out, 24, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

int cx_fabric_pci_list(const char *value, char (*out)[24], int max)
{
    int n = 0;
    const char *p = value ? value : "";
    for (;;) {
        size_t len = strcspn(p, ",");
        while (len && isspace((unsigned char)*p))
            p++, len--;
        size_t l = len;
        while (l && isspace((unsigned char)p[l - 1]))
            l--;
        if (n == max)
            return cx_err_set(EINVAL, "more than %d PCI addresses in '%.64s...'", max, value);
        if (pci_norm(p, l, out[n]) < 0)
            return cx_err_set(EINVAL, "'%.*s' is not a PCI address (dddd:bb:dd.f) in '%.128s'",
                              (int)(l > 32 ? 32 : l), p, value ? value : "");
        n++;
        if (!p[len])
            return n;
        p += len + 1;
    }
}

/* ---- network-status ---- */

/* A member that, when present, must have type t; NULL when absent. */
static int member(const struct cx__jv *o, const char *key, enum cx__jtype t, int entry,
                  const struct cx__jv **out)
{
    static const char *names[] = {"null", "a boolean", "a number", "a string", "a list", "an object"};
    const struct cx__jv *v = cx__json_get(o, key);
    *out = NULL;
    if (v && v->t != t)
        return cx_err_set(EINVAL, "network-status entry %d: \"%s\" is %s, not %s", entry, key,
                          names[v->t], names[t]);
    *out = v;
    return 0;
}

/* The entry's device-info PCI address (normalised into pci; "" when it reports none). */
static int entry_pci(const struct cx__jv *e, int i, char pci[24])
{
    const struct cx__jv *di = NULL, *p = NULL, *a = NULL;
    pci[0] = 0;
    int rc = member(e, "device-info", CX__J_OBJ, i, &di);
    if (rc < 0 || !di)
        return rc;
    if ((rc = member(di, "pci", CX__J_OBJ, i, &p)) < 0 || !p)
        return rc;
    if ((rc = member(p, "pci-address", CX__J_STR, i, &a)) < 0 || !a)
        return rc;
    if (pci_norm(a->str, strlen(a->str), pci) < 0)
        return cx_err_set(EINVAL, "network-status entry %d: pci-address '%.32s' is not a PCI address",
                          i, a->str);
    return 0;
}

static int copy_str(char *dst, size_t cap, const char *s, int i, const char *what)
{
    if (strlen(s) >= cap)
        return cx_err_set(EINVAL, "network-status entry %d: %s '%.32s...' is longer than %zu bytes",
                          i, what, s, cap - 1);
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

static int parse_mac(const char *s, char out[18], int i)
{
    unsigned b[6];
    const char *p = s;
    for (int k = 0; k < 6; k++)
        if (hexn(&p, 2, &b[k]) < 0 || *p++ != (k == 5 ? 0 : ':'))
            return cx_err_set(EINVAL, "network-status entry %d: mac '%.32s' is not xx:xx:xx:xx:xx:xx",
                              i, s);
    snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
    return 0;
}

/* The attachment's fields into out: name, interface, its first IPv4 address, MAC. */
static int entry_fill(const struct cx__jv *e, int i, struct cx_fabric_dev *out)
{
    const struct cx__jv *name = NULL, *ifc = NULL, *ips = NULL, *mac = NULL;
    int rc;
    if ((rc = member(e, "name", CX__J_STR, i, &name)) < 0 ||
        (rc = member(e, "interface", CX__J_STR, i, &ifc)) < 0 ||
        (rc = member(e, "ips", CX__J_ARR, i, &ips)) < 0 ||
        (rc = member(e, "mac", CX__J_STR, i, &mac)) < 0)
        return rc;
    if (name && (rc = copy_str(out->network, sizeof out->network, name->str, i, "name")) < 0)
        return rc;
    if (ifc) {
        /* a name as real interfaces have them: it goes into an EAL argument (iface=...),
         * where ',' or '=' would add settings of its own */
        if (!ifc->str[0] || strspn(ifc->str, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-_.") != strlen(ifc->str))
            return cx_err_set(EINVAL, "network-status entry %d: '%.32s' is not an interface name",
                              i, ifc->str);
        if ((rc = copy_str(out->ifname, sizeof out->ifname, ifc->str, i, "interface")) < 0)
            return rc;
    }
    for (size_t k = 0; ips && k < ips->n; k++) {
        const struct cx__jv *a = &ips->items[k];
        if (a->t != CX__J_STR)
            return cx_err_set(EINVAL, "network-status entry %d: ips[%zu] is not a string", i, k);
        char ip[64];
        if (strlen(a->str) >= sizeof ip)
            return cx_err_set(EINVAL, "network-status entry %d: ips[%zu] is not an address", i, k);
        snprintf(ip, sizeof ip, "%s", a->str);
        ip[strcspn(ip, "/")] = 0; /* an address may come with its prefix length */
        unsigned char buf[16];
        if (inet_pton(AF_INET, ip, buf) == 1) {
            if (!out->ip[0])
                inet_ntop(AF_INET, buf, out->ip, sizeof out->ip);
        } else if (inet_pton(AF_INET6, ip, buf) != 1) {
            return cx_err_set(EINVAL, "network-status entry %d: ips[%zu] '%.32s' is not an address",
                              i, k, a->str);
        }
    }
    return mac ? parse_mac(mac->str, out->mac, i) : 0;
}

static int netstatus_pick(const struct cx__jv *root, const char (*pcis)[24], int npci,
                          struct cx_fabric_dev *out)
{
    if (root->t != CX__J_ARR)
        return cx_err_set(EINVAL, "network-status is not a list of attachments");
    int pick = -1, first_other = -1, foreign = -1;
    char pci[24], pick_pci[24] = "", foreign_pci[24] = "";
    for (size_t i = 0; i < root->n; i++) {
        const struct cx__jv *e = &root->items[i], *dflt = NULL;
        int rc;
        if (e->t != CX__J_OBJ)
            return cx_err_set(EINVAL, "network-status entry %zu is not an object", i);
        if ((rc = member(e, "default", CX__J_BOOL, (int)i, &dflt)) < 0 ||
            (rc = entry_pci(e, (int)i, pci)) < 0)
            return rc;
        int is_default = dflt && dflt->b;
        if (!is_default && first_other < 0)
            first_other = (int)i;
        if (!pci[0] || pick >= 0 || is_default)
            continue;
        int mine = npci == 0;
        for (int k = 0; k < npci && !mine; k++)
            mine = strcmp(pcis[k], pci) == 0;
        if (mine) {
            pick = (int)i;
            memcpy(pick_pci, pci, sizeof pci);
        } else if (foreign < 0) {
            foreign = (int)i;
            memcpy(foreign_pci, pci, sizeof pci);
        }
    }
    if (pick < 0 && foreign >= 0) {
        char list[128] = "";
        for (int k = 0; k < npci && k < 4; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? "," : "", pcis[k]);
        return cx_err_set(ENODEV, "network-status entry %d has PCI device %s, not one of the "
                                  "device plugin's (%s%s)", foreign, foreign_pci, list,
                          npci > 4 ? ",..." : "");
    }
    if (pick < 0) /* no entry reports a device: the pod's one extra attachment */
        pick = first_other;
    if (pick < 0)
        return cx_err_set(ENOENT, "network-status lists no attachment besides the cluster's "
                                  "default network (is the Fabric's networkAttachment set up?)");
    int rc = entry_fill(&root->items[pick], pick, out);
    if (rc < 0)
        return rc;
    if (pick_pci[0])
        memcpy(out->pci, pick_pci, sizeof pick_pci);
    return 0;
}

int cx_fabric_netstatus_parse(const char *text, size_t len, const char (*pcis)[24], int npci,
                              struct cx_fabric_dev *out)
{
    size_t sp = 0;
    while (sp < len && isspace((unsigned char)text[sp]))
        sp++;
    if (sp == len)
        return cx_err_set(EAGAIN, "network-status is empty (Multus has not annotated the pod yet)");
    if (len > CX_FABRIC_MAX_STATUS)
        return cx_err_set(EINVAL, "network-status of %zu bytes (at most %d)", len, CX_FABRIC_MAX_STATUS);
    struct cx__jv root;
    int rc = cx__json_parse(text, len, &root);
    if (rc < 0)
        return cx_err_wrap(rc, "network-status");
    rc = netstatus_pick(&root, pcis, npci, out);
    cx__json_free(&root);
    return rc;
}

/* ---- from the environment ---- */

static int read_status(const char *path, char **text, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cx_err_set(errno, "%s=%s: %s (is the pod-info volume mounted?)",
                          CX_ENV_NETWORK_STATUS, path, strerror(errno));
    struct stat st;
    char *buf = NULL;
    int rc = 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rc = cx_err_set(EINVAL, "%s=%s: not a regular file", CX_ENV_NETWORK_STATUS, path);
    } else if (!(buf = malloc(CX_FABRIC_MAX_STATUS + 1))) {
        rc = cx_err_set(ENOMEM, "network-status: out of memory");
    } else {
        size_t n = 0;
        ssize_t r;
        while (n <= CX_FABRIC_MAX_STATUS &&
               (r = read(fd, buf + n, CX_FABRIC_MAX_STATUS + 1 - n)) != 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                rc = cx_err_set(errno, "%s=%s: %s", CX_ENV_NETWORK_STATUS, path, strerror(errno));
                break;
            }
            n += (size_t)r;
        }
        if (rc == 0 && n > CX_FABRIC_MAX_STATUS)
            rc = cx_err_set(EFBIG, "%s=%s: more than %d bytes", CX_ENV_NETWORK_STATUS, path,
                            CX_FABRIC_MAX_STATUS);
        *len = n;
    }
    close(fd);
    if (rc < 0)
        free(buf);
    else
        *text = buf;
    return rc;
}

static int parse_mtu(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    long v = s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
    if (v < 576 || v > 65535 || errno || *end)
        return cx_err_set(EINVAL, "%s='%.32s': give the MTU in bytes, 576 to 65535", CX_ENV_MTU, s);
    *out = (unsigned)v;
    return 0;
}

int cx_fabric_dev_resolve(struct cx_fabric_dev *out)
{
    memset(out, 0, sizeof *out);
    const char *s = getenv(CX_ENV_MTU);
    int rc;
    if (s && *s && (rc = parse_mtu(s, &out->mtu)) < 0)
        return rc;
    const char *res = getenv(CX_ENV_DEVICE_RESOURCE), *path = getenv(CX_ENV_NETWORK_STATUS);
    res = res && *res ? res : NULL;
    path = path && *path ? path : NULL;
    if (!res && !path)
        return 0;
    char pcis[CX_FABRIC_MAX_PCI][24];
    char var[128];
    int npci = 0;
    if (res) {
        if ((rc = cx_fabric_pci_env_name(res, var, sizeof var)) < 0)
            return rc;
        const char *v = getenv(var);
        if (!v || !*v)
            return cx_err_set(ENOENT, "%s=%s but %s is not set (does this container request the "
                                      "resource, and does the device plugin serve it?)",
                              CX_ENV_DEVICE_RESOURCE, res, var);
        if ((npci = cx_fabric_pci_list(v, pcis, CX_FABRIC_MAX_PCI)) < 0)
            return cx_err_wrap(npci, "%s", var);
    }
    if (path) {
        char *text = NULL;
        size_t len = 0;
        if ((rc = read_status(path, &text, &len)) < 0)
            return rc;
        rc = cx_fabric_netstatus_parse(text, len, (const char (*)[24])pcis, npci, out);
        free(text);
        if (rc < 0)
            return cx_err_wrap(rc, "%s=%s%s%s", CX_ENV_NETWORK_STATUS, path, res ? " with " : "",
                               res ? var : "");
    }
    if (!out->pci[0] && npci > 0) /* no network-status, or it reports no device */
        memcpy(out->pci, pcis[0], sizeof out->pci);
    return 1;
}
