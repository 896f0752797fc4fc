/* libFuzzer target: the network-status parser and the PCIDEVICE_* list parser must reject
 * any input cleanly, and what they accept must be well-formed (a normalised PCI address
 * that parses again to itself, an IPv4 address, a MAC of six pairs, terminated strings). */
#include "transport/cx_fabric_dev.h"

#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_pci(const char *p)
{
    char again[1][24];
    if (strlen(p) >= 24 || cx_fabric_pci_list(p, again, 1) != 1 || strcmp(again[0], p) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char pcis[2][24] = {"0000:3b:02.1", "0000:af:00.2"};
    struct cx_fabric_dev d;
    for (int npci = 0; npci <= 2; npci += 2) {
        memset(&d, 0, sizeof d);
        if (cx_fabric_netstatus_parse((const char *)data, size, pcis, npci, &d) != 0)
            continue;
        if (d.pci[0])
            check_pci(d.pci);
        if (npci && d.pci[0] && strcmp(d.pci, pcis[0]) && strcmp(d.pci, pcis[1]))
            abort(); /* never a device the plugin did not give */
        unsigned char ip[4];
        if (d.ip[0] && inet_pton(AF_INET, d.ip, ip) != 1)
            abort();
        if (d.mac[0] && strlen(d.mac) != 17)
            abort();
        if (strlen(d.ifname) >= sizeof d.ifname || strlen(d.network) >= sizeof d.network)
            abort();
    }
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    char list[CX_FABRIC_MAX_PCI][24];
    int n = cx_fabric_pci_list(s, list, CX_FABRIC_MAX_PCI);
    for (int i = 0; i < n; i++)
        check_pci(list[i]);
    free(s);
    return 0;
}
