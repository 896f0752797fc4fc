/* The space server's UDP lookup service (seed pi-channels.txt: "lookups are implemented
 * using a lightweight UDP protocol with retransmission"). One datagram = one frame header
 * + a LOOKUP request; the reply echoes the request id (seq). Lookups are idempotent, so a
 * client simply retransmits when a reply does not come (cx_space_client.h). Threads share
 * one socket and batch with recvmmsg/sendmmsg; they only read the name table.
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "space/cx_nametable.h"
#include "space/cx_space_proto.h"
#include "space/cx_space_server_int.h"
#include "transport/cx_addr.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define BATCH 64
#define DGRAM_MAX 1024 /* a lookup request or reply is far smaller */

/* Answers one datagram into out; returns the reply length, 0 to stay silent (not ours). */
static size_t answer(struct cx_space_server *s, const uint8_t *in, size_t len, uint8_t *out)
{
    struct cx_frame_hdr h;
    if (cx_frame_decode(in, len, &h) < 0 || h.type != CX_FRAME_LOOKUP ||
        (h.flags & CX_FRAME_F_REPLY) || h.length != len - CX_FRAME_HDR_SIZE)
        return 0; /* not a Conflux lookup: a stray datagram gets no answer */
    struct cx_sp_buf b = {.p = out + CX_FRAME_HDR_SIZE, .cap = DGRAM_MAX - CX_FRAME_HDR_SIZE, .fixed = 1};
    struct cx_sp_request q;
    struct cx_name_entry e;
    char name[CX_SPACE_NAME_MAX + 1];
    int rc = cx_sp_decode_request(in + CX_FRAME_HDR_SIZE, h.length, &q);
    if (rc == 0 && q.op != CX_SP_LOOKUP)
        rc = cx_err_set(EPROTO, "the UDP service answers LOOKUP only (got %s): use TCP", cx_sp_op_name(q.op));
    if (rc == 0 && cx_sp_str_copy(q.name, name, sizeof name) < 0)
        rc = cx_err_set(EINVAL, "pipe name of %u bytes (max %d)", q.name.len, CX_SPACE_NAME_MAX);
    if (rc == 0)
        rc = cx_nametable_lookup(s->names, name, &e);
    if (rc < 0) {
        cx_sp_encode_reply_head(&b, CX_SP_LOOKUP, rc, cx_errmsg());
    } else {
        struct cx_sp_pipe p = {.pipe_id = e.pipe_id, .format = e.format};
        cx_sp_encode_reply_head(&b, CX_SP_LOOKUP, 0, NULL);
        cx_sp_encode_pipe(&b, &p);
    }
    if (b.err)
        return 0;
    struct cx_frame_hdr r = {.type = CX_FRAME_LOOKUP, .flags = CX_FRAME_F_REPLY, .seq = h.seq,
                             .length = (uint32_t)b.len, .msg_length = (uint32_t)b.len};
    cx_frame_encode(&r, out);
    return CX_FRAME_HDR_SIZE + b.len;
}

static void *udp_thread(void *arg)
{
    struct cx_space_server *s = arg;
    static __thread uint8_t in[BATCH][DGRAM_MAX], out[BATCH][DGRAM_MAX];
    struct sockaddr_in from[BATCH];
    struct iovec iin[BATCH], iout[BATCH];
    struct mmsghdr min[BATCH], mout[BATCH];
    struct pollfd pf[2] = {{.fd = s->udp_fd, .events = POLLIN}, {.fd = s->udp_stop_fd, .events = POLLIN}};
    for (;;) {
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        for (;;) {
            for (int i = 0; i < BATCH; i++) {
                iin[i] = (struct iovec){in[i], DGRAM_MAX};
                min[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i], .msg_namelen = sizeof from[i],
                                                      .msg_iov = &iin[i], .msg_iovlen = 1}};
            }
            int n = recvmmsg(s->udp_fd, min, BATCH, MSG_DONTWAIT, NULL);
            if (n <= 0)
                break;
            int m = 0;
            for (int i = 0; i < n; i++) {
                size_t len = answer(s, in[i], min[i].msg_len, out[m]);
                if (!len)
                    continue;
                iout[m] = (struct iovec){out[m], len};
                mout[m] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i], .msg_namelen = min[i].msg_hdr.msg_namelen,
                                                       .msg_iov = &iout[m], .msg_iovlen = 1}};
                m++;
            }
            for (int done = 0; done < m;) {
                int k = sendmmsg(s->udp_fd, mout + done, (unsigned)(m - done), 0);
                if (k <= 0)
                    break; /* a full socket buffer drops replies: the client retransmits */
                done += k;
            }
            __atomic_fetch_add(&s->stats.udp_lookups, (uint64_t)n, __ATOMIC_RELAXED);
        }
    }
    return NULL;
}

int cx_space_udp_start(struct cx_space_server *s)
{
    if (s->opts.udp && !*s->opts.udp)
        return 0;
    char hostport[200];
    if (s->opts.udp) {
        snprintf(hostport, sizeof hostport, "%s", s->opts.udp);
    } else {
        const char *hp = strstr(s->addr, "://");
        snprintf(hostport, sizeof hostport, "%s", hp ? hp + 3 : s->addr);
    }
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hostport, &sa);
    if (rc < 0)
        return cx_err_wrap(rc, "UDP lookup address");
    s->udp_fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s->udp_fd < 0)
        return cx_err_set(errno, "UDP socket: %s", strerror(errno));
    int big = 4 << 20;
    setsockopt(s->udp_fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    setsockopt(s->udp_fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    if (bind(s->udp_fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        return cx_err_set(errno, "UDP lookups on %s: %s", hostport, strerror(errno));
    socklen_t sl = sizeof sa;
    getsockname(s->udp_fd, (struct sockaddr *)&sa, &sl);
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
    snprintf(s->udp_addr, sizeof s->udp_addr, "%s:%u", ip, ntohs(sa.sin_port));
    if ((s->udp_stop_fd = eventfd(0, EFD_CLOEXEC)) < 0)
        return cx_err_set(errno, "eventfd: %s", strerror(errno));
    int want = s->opts.udp_threads > CX_SPACE_MAX_UDP_THREADS ? CX_SPACE_MAX_UDP_THREADS : s->opts.udp_threads;
    for (; s->nudp < want; s->nudp++)
        if ((rc = pthread_create(&s->udp_threads[s->nudp], NULL, udp_thread, s)) != 0)
            return cx_err_set(rc, "UDP lookup thread: %s", strerror(rc));
    return 0;
}

void cx_space_udp_stop(struct cx_space_server *s)
{
    if (s->udp_stop_fd >= 0) {
        uint64_t one = 1;
        if (write(s->udp_stop_fd, &one, sizeof one) < 0) {
            /* cannot happen with a fresh eventfd; the joins below would then hang */
        }
    }
    for (int i = 0; i < s->nudp; i++)
        pthread_join(s->udp_threads[i], NULL);
    s->nudp = 0;
    if (s->udp_fd >= 0)
        close(s->udp_fd);
    if (s->udp_stop_fd >= 0)
        close(s->udp_stop_fd);
    s->udp_fd = s->udp_stop_fd = -1;
}
