/* The bytes the dpdk driver puts on the wire, kept free of DPDK so they can be tested and
 * fuzzed on their own. A frame is
 *
 *   Ethernet II (14) | IPv4 (20, no options, DF) | UDP (8) | cx_frame header (48) | payload
 *
 * The cx_frame header (src/common/cx_frame.h) is the first 48 bytes of the UDP payload; the
 * driver adds nothing else. The UDP checksum is sent as 0 (allowed for IPv4) and not checked:
 * the cx header carries its own check and the Ethernet FCS guards the payload. Received
 * frames with IPv4 options are accepted; IP fragments, VLAN tags and IPv6 are not (dropped).
 *
 * The driver's own control messages (handshake, keepalive, close) are CX_FRAME_CTRL frames
 * whose format token is CX_DPDK_CTRL_FORMAT and whose payload is struct cx_dpdk_ctrl: the
 * channel field stays free for the multiplexer above. Addresses and ports are given in host
 * byte order in every struct here. */
#ifndef CX_DPDK_WIRE_H
#define CX_DPDK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define CX_DPDK_ETH_LEN 14u
#define CX_DPDK_IP_LEN 20u
#define CX_DPDK_UDP_LEN 8u
#define CX_DPDK_HDRS_LEN (CX_DPDK_ETH_LEN + CX_DPDK_IP_LEN + CX_DPDK_UDP_LEN) /* 42 */
#define CX_DPDK_ARP_FRAME_LEN 60u /* 42 bytes of ARP padded to the Ethernet minimum */

/* Format token of the driver's control messages ("CXDPDKCT"). */
#define CX_DPDK_CTRL_FORMAT 0x43584450444b4354ull
#define CX_DPDK_CTRL_MAGIC 0x50445843u /* "CXDP" */
#define CX_DPDK_CTRL_LEN 16u

enum cx_dpdk_ctrl_op {
    CX_DPDK_HELLO = 1,  /* connector -> listener port: open a link (nonce) */
    CX_DPDK_ACCEPT = 2, /* new link's port -> connector: accepted (nonce, our max payload) */
    CX_DPDK_REFUSE = 3, /* nobody listens on that port (nonce) */
    CX_DPDK_PING = 4,   /* keepalive: the link is alive although it has nothing to send */
    CX_DPDK_CLOSE = 5,  /* the sender closed its end */
    CX_DPDK_RESET = 6,  /* a frame reached a port with no such link (closed or restarted) */
};

/* Payload of a control frame, 16 bytes little-endian: magic, op, version, reserved, nonce,
 * mtu (the sender's largest UDP payload, so both ends agree on the smaller). */
struct cx_dpdk_ctrl {
    uint8_t op;
    uint32_t nonce;
    uint32_t mtu;
};

struct cx_dpdk_addr {
    uint8_t mac[6];
    uint32_t ip;   /* host order */
    uint16_t port; /* host order */
};

enum cx_dpdk_kind { CX_DPDK_OTHER = 0, CX_DPDK_UDP = 1, CX_DPDK_ARP = 2 };

/* What cx_dpdk_parse found in a frame. */
struct cx_dpdk_rx {
    int kind;                   /* enum cx_dpdk_kind */
    uint8_t dst_mac[6];
    struct cx_dpdk_addr src;    /* UDP: sender MAC, IP, port; ARP: sender MAC and IP */
    uint32_t dst_ip;            /* UDP: destination IP; ARP: target IP */
    uint16_t dst_port;          /* UDP */
    uint16_t arp_op;            /* ARP: 1 request, 2 reply */
    size_t off, len;            /* UDP: payload at frame[off..off+len) */
};

/* Writes the Ethernet, IPv4 and UDP headers of a frame carrying udp_len payload bytes into
 * out[CX_DPDK_HDRS_LEN]. */
void cx_dpdk_put_udp(uint8_t *out, const struct cx_dpdk_addr *src, const struct cx_dpdk_addr *dst,
                     size_t udp_len);

/* Writes a whole ARP frame (op 1 = request to broadcast, 2 = reply to tha) into
 * out[CX_DPDK_ARP_FRAME_LEN]. */
void cx_dpdk_put_arp(uint8_t *out, uint16_t op, const uint8_t sha[6], uint32_t spa,
                     const uint8_t tha[6], uint32_t tpa);

/* Classifies frame[0..len). Returns 0 with *rx filled (kind OTHER for anything that is not
 * ours to read: other ethertypes, non-UDP, fragments), or -EPROTO with cx_errmsg set for a
 * malformed IPv4/UDP/ARP frame (bad lengths or IP header checksum). */
int cx_dpdk_parse(const uint8_t *frame, size_t len, struct cx_dpdk_rx *rx);

/* Control payload encoding; decode returns -EPROTO (cx_errmsg set) on a bad size or magic. */
void cx_dpdk_ctrl_encode(const struct cx_dpdk_ctrl *c, uint8_t out[CX_DPDK_CTRL_LEN]);
int cx_dpdk_ctrl_decode(const uint8_t *in, size_t len, struct cx_dpdk_ctrl *c);

/* The RFC 1071 checksum of n bytes (used for the IPv4 header). */
uint16_t cx_dpdk_csum(const uint8_t *p, size_t n);

#endif
