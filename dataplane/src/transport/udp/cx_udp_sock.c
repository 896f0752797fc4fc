/* Sockets and control frames of the udp driver; see cx_udp.h and cx_udp_int.h. */
#define _GNU_SOURCE
#include "transport/udp/cx_udp_int.h"

#include "common/cx_env.h"
#include "common/cx_error.h"
#include "common/cx_le.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RCVBUF (8 << 20)
#define SNDBUF (4 << 20)

static void set_buf(int fd, int force_opt, int opt, int bytes)
{
    /* FORCE goes beyond net.core.[rw]mem_max when we have CAP_NET_ADMIN: a datagram
     * socket drops what does not fit, so a deep receive buffer is worth having */
    if (setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) < 0)
        setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

int cx_udp_socket(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cx_err_set(errno, "udp: socket: %s", strerror(errno));
    set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, RCVBUF);
    set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, SNDBUF);
    int dont = IP_PMTUDISC_DONT;
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &dont, sizeof dont);
    return fd;
}

size_t cx_udp_max_msg(int fd)
{
    size_t max = CX_UDP_MAX_MSG;
    int mtu = 0;
    socklen_t len = sizeof mtu;
    if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &len) == 0 && mtu > (int)(20 + 8 + CX_FRAME_HDR_SIZE + 64)) {
        size_t m = (size_t)mtu - 20 - 8 - CX_FRAME_HDR_SIZE;
        if (m < max)
            max = m;
    }
    return (size_t)cx_env_u64("CONFLUX_UDP_MAX_MSG", max, 64, max);
}

int cx_udp_ctrl_send(int fd, const struct sockaddr_in *to, int op, uint64_t nonce)
{
    uint8_t d[CX_FRAME_HDR_SIZE + UDP_CTRL_LEN] = {0};
    struct cx_frame_hdr h = {.type = CX_FRAME_CTRL, .channel = 0, .format = CX_UDP_CTRL_TOKEN,
                             .length = UDP_CTRL_LEN, .msg_length = UDP_CTRL_LEN};
    cx_frame_encode(&h, d);
    d[CX_FRAME_HDR_SIZE] = (uint8_t)op;
    d[CX_FRAME_HDR_SIZE + 1] = UDP_CTRL_VERSION;
    cx_put_le64(d + CX_FRAME_HDR_SIZE + 8, nonce);
    for (;;) {
        ssize_t w = sendto(fd, d, sizeof d, MSG_NOSIGNAL | MSG_DONTWAIT, (const struct sockaddr *)to,
                           to ? sizeof *to : 0);
        if (w >= 0)
            return 0;
        if (errno != EINTR)
            return cx_err_set(errno, "udp: sending a control frame: %s", strerror(errno));
    }
}

int cx_udp_ctrl_parse(const uint8_t *d, size_t n, int *op, uint64_t *nonce)
{
    struct cx_frame_hdr h;
    if (n != CX_FRAME_HDR_SIZE + UDP_CTRL_LEN || cx_frame_decode(d, n, &h) < 0 ||
        h.type != CX_FRAME_CTRL || h.channel != 0 || h.format != CX_UDP_CTRL_TOKEN ||
        h.length != UDP_CTRL_LEN || d[CX_FRAME_HDR_SIZE + 1] != UDP_CTRL_VERSION)
        return 0;
    *op = d[CX_FRAME_HDR_SIZE];
    *nonce = cx_get_le64(d + CX_FRAME_HDR_SIZE + 8);
    return 1;
}

void cx_udp_addr_str(const struct sockaddr_in *sa, char *out, size_t cap)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    snprintf(out, cap, "%s:%u", ip, ntohs(sa->sin_port));
}
