/* cx_space_udp_lookup: the connectionless LOOKUP of the paper, retransmitted on silence. */
#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "space/cx_space_client.h"
#include "transport/cx_addr.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int cx_space_udp_lookup(const char *hostport, const char *name, int timeout_ms, int tries,
                        struct cx_space_pipe_info *out)
{
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hostport, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "UDP lookup");
    uint8_t req[512], rep[1024];
    struct cx_sp_buf b = {.p = req + CX_FRAME_HDR_SIZE, .cap = sizeof req - CX_FRAME_HDR_SIZE, .fixed = 1};
    struct cx_sp_request q = {.op = CX_SP_LOOKUP, .name = {name, (uint16_t)strnlen(name, 400)}};
    if ((rc = cx_sp_encode_request(&b, &q)) < 0)
        return cx_err_wrap(rc, "UDP lookup of '%s'", name);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t seq = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ ((uint64_t)(uintptr_t)&ts);
    seq |= 1; /* 0 is a push */
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = seq, .length = (uint32_t)b.len,
                             .msg_length = (uint32_t)b.len};
    cx_frame_encode(&h, req);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cx_err_set(errno, "UDP socket: %s", strerror(errno));
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        rc = cx_err_set(errno, "UDP lookup to %s: %s", hostport, strerror(errno));
        close(fd);
        return rc;
    }
    rc = cx_err_set(ETIMEDOUT, "UDP lookup of '%s' at %s: no reply after %d tries of %d ms",
                    name, hostport, tries, timeout_ms);
    for (int t = 0; t < tries; t++) {
        if (send(fd, req, CX_FRAME_HDR_SIZE + b.len, 0) < 0) {
            rc = cx_err_set(errno, "UDP lookup to %s: %s", hostport, strerror(errno));
            if (errno != ECONNREFUSED)
                break;
            usleep((useconds_t)timeout_ms * 1000); /* nobody there yet: wait like a loss */
            continue;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        while (poll(&pf, 1, timeout_ms) > 0) {
            ssize_t n = recv(fd, rep, sizeof rep, 0);
            struct cx_frame_hdr r;
            if (n < 0 || cx_frame_decode(rep, (size_t)n, &r) < 0 || r.seq != seq ||
                r.length != (size_t)n - CX_FRAME_HDR_SIZE)
                continue; /* a late reply to an earlier try, or garbage */
            struct cx_sp_reply p;
            if ((rc = cx_sp_decode_reply(rep + CX_FRAME_HDR_SIZE, r.length, &p)) == 0) {
                if (p.status < 0) {
                    rc = cx_err_set(-p.status, "%.*s", p.error.len, p.error.p);
                } else if (out) {
                    memset(out, 0, sizeof *out);
                    out->pipe_id = p.pipe.pipe_id;
                    out->format = p.pipe.format;
                }
            }
            close(fd);
            return rc;
        }
    }
    close(fd);
    return rc;
}
