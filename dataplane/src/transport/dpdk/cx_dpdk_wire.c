/* Ethernet/IPv4/UDP/ARP layouts of the dpdk driver; see cx_dpdk_wire.h. Byte order is
 * written out by hand so this file needs neither DPDK nor the host's endianness. */
#include "transport/dpdk/cx_dpdk_wire.h"

#include "common/cx_error.h"

#include <string.h>

#define ETH_IPV4 0x0800u
#define ETH_ARP 0x0806u

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)(v >> 16)), put16(p + 2, (uint16_t)v); }
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static void le32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t rle32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

uint16_t cx_dpdk_csum(const uint8_t *p, size_t n)
{
    uint32_t s = 0;
    for (size_t i = 0; i + 1 < n; i += 2) s += get16(p + i);
    if (n & 1) s += (uint32_t)p[n - 1] << 8;
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

void cx_dpdk_put_udp(uint8_t *out, const struct cx_dpdk_addr *src, const struct cx_dpdk_addr *dst,
                     size_t udp_len)
{
    memcpy(out, dst->mac, 6);
    memcpy(out + 6, src->mac, 6);
    put16(out + 12, ETH_IPV4);
    uint8_t *ip = out + CX_DPDK_ETH_LEN;
    ip[0] = 0x45; /* version 4, 5 words */
    ip[1] = 0;
    put16(ip + 2, (uint16_t)(CX_DPDK_IP_LEN + CX_DPDK_UDP_LEN + udp_len));
    put16(ip + 4, 0);      /* id: unused with DF (RFC 6864) */
    put16(ip + 6, 0x4000); /* DF, offset 0 */
    ip[8] = 64;
    ip[9] = 17;
    put16(ip + 10, 0);
    put32(ip + 12, src->ip);
    put32(ip + 16, dst->ip);
    put16(ip + 10, cx_dpdk_csum(ip, CX_DPDK_IP_LEN));
    uint8_t *udp = ip + CX_DPDK_IP_LEN;
    put16(udp, src->port);
    put16(udp + 2, dst->port);
    put16(udp + 4, (uint16_t)(CX_DPDK_UDP_LEN + udp_len));
    put16(udp + 6, 0);
}

void cx_dpdk_put_arp(uint8_t *out, uint16_t op, const uint8_t sha[6], uint32_t spa,
                     const uint8_t tha[6], uint32_t tpa)
{
    static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    memset(out, 0, CX_DPDK_ARP_FRAME_LEN);
    memcpy(out, op == 1 ? bcast : tha, 6);
    memcpy(out + 6, sha, 6);
    put16(out + 12, ETH_ARP);
    uint8_t *a = out + CX_DPDK_ETH_LEN;
    put16(a, 1);        /* Ethernet */
    put16(a + 2, ETH_IPV4);
    a[4] = 6, a[5] = 4;
    put16(a + 6, op);
    memcpy(a + 8, sha, 6);
    put32(a + 14, spa);
    if (op != 1)
        memcpy(a + 18, tha, 6);
    put32(a + 24, tpa);
}

int cx_dpdk_parse(const uint8_t *f, size_t len, struct cx_dpdk_rx *rx)
{
    memset(rx, 0, sizeof *rx);
    if (len < CX_DPDK_ETH_LEN)
        return cx_err_set(EPROTO, "dpdk: runt frame of %zu bytes", len);
    memcpy(rx->dst_mac, f, 6);
    memcpy(rx->src.mac, f + 6, 6);
    uint16_t type = get16(f + 12);
    const uint8_t *p = f + CX_DPDK_ETH_LEN;
    size_t n = len - CX_DPDK_ETH_LEN;
    if (type == ETH_ARP) {
        if (n < 28)
            return cx_err_set(EPROTO, "dpdk: ARP frame of %zu bytes", len);
        if (get16(p) != 1 || get16(p + 2) != ETH_IPV4 || p[4] != 6 || p[5] != 4)
            return 0; /* not IPv4 over Ethernet: not ours */
        rx->kind = CX_DPDK_ARP;
        rx->arp_op = get16(p + 6);
        memcpy(rx->src.mac, p + 8, 6);
        rx->src.ip = get32(p + 14);
        rx->dst_ip = get32(p + 24);
        return 0;
    }
    if (type != ETH_IPV4)
        return 0;
    if (n < CX_DPDK_IP_LEN || (p[0] >> 4) != 4 || (p[0] & 15) < 5)
        return cx_err_set(EPROTO, "dpdk: bad IPv4 header (%zu bytes, first byte 0x%02x)", n,
                          n ? p[0] : 0);
    size_t ihl = (size_t)(p[0] & 15) * 4, tot = get16(p + 2);
    if (ihl > n || tot < ihl || tot > n)
        return cx_err_set(EPROTO, "dpdk: IPv4 total length %zu, header %zu, frame holds %zu", tot,
                          ihl, n);
    if (cx_dpdk_csum(p, ihl) != 0)
        return cx_err_set(EPROTO, "dpdk: IPv4 header checksum mismatch");
    if (p[9] != 17 || (get16(p + 6) & 0x3fff) != 0)
        return 0; /* not UDP, or an IP fragment: not ours */
    const uint8_t *u = p + ihl;
    size_t ulen = tot - ihl;
    if (ulen < CX_DPDK_UDP_LEN || get16(u + 4) < CX_DPDK_UDP_LEN || get16(u + 4) > ulen)
        return cx_err_set(EPROTO, "dpdk: UDP length %u in an IPv4 payload of %zu bytes",
                          ulen >= 6 ? get16(u + 4) : 0, ulen);
    rx->kind = CX_DPDK_UDP;
    rx->src.ip = get32(p + 12);
    rx->dst_ip = get32(p + 16);
    rx->src.port = get16(u);
    rx->dst_port = get16(u + 2);
    rx->off = CX_DPDK_ETH_LEN + ihl + CX_DPDK_UDP_LEN;
    rx->len = get16(u + 4) - CX_DPDK_UDP_LEN;
    return 0;
}

void cx_dpdk_ctrl_encode(const struct cx_dpdk_ctrl *c, uint8_t out[CX_DPDK_CTRL_LEN])
{
    le32(out, CX_DPDK_CTRL_MAGIC);
    out[4] = c->op;
    out[5] = 1; /* version */
    out[6] = out[7] = 0;
    le32(out + 8, c->nonce);
    le32(out + 12, c->mtu);
}

int cx_dpdk_ctrl_decode(const uint8_t *in, size_t len, struct cx_dpdk_ctrl *c)
{
    if (len != CX_DPDK_CTRL_LEN || rle32(in) != CX_DPDK_CTRL_MAGIC || in[5] != 1)
        return cx_err_set(EPROTO, "dpdk: bad control message (%zu bytes)", len);
    if (in[4] < CX_DPDK_HELLO || in[4] > CX_DPDK_RESET)
        return cx_err_set(EPROTO, "dpdk: unknown control operation %u", in[4]);
    c->op = in[4];
    c->nonce = rle32(in + 8);
    c->mtu = rle32(in + 12);
    return 0;
}
