/* The space server's UDP lookup service (seed pi-channels.txt: "lookups are implemented
 * using a lightweight UDP protocol with retransmission"). A datagram holds one or more
 * frames back to back, each a frame header + a LOOKUP request; every frame is answered
 * with a reply frame echoing its request id (seq), and the replies to one datagram are
 * packed back to back into as few datagrams as fit REPLY_MAX (one request, one reply: the
 * paper's protocol; K requests per datagram: a pipelining client pays the kernel's
 * per-datagram cost once per K lookups). Lookups are idempotent, so a client simply
 * retransmits when a reply does not come (cx_space_client.h). Threads share one socket
 * and batch with recvmmsg/sendmmsg; they only read the name table.
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
#define DGRAM_MAX 9216  /* the largest request datagram read (frames past it are lost) */
#define REPLY_MAX 1472  /* a reply datagram stays within a 1500-byte MTU ... */
#define ONE_MAX 1024    /* ... and one reply frame within this */
#define OUT_MAX 256     /* reply datagrams per sendmmsg */

/* Answers one request frame at in (of len bytes available) into out; returns the reply
 * length and sets *used to the frame's size, or 0 when the bytes are not a Conflux lookup
 * (a stray datagram gets no answer; the rest of the datagram is dropped). */
static size_t answer(struct cx_space_server *s, const uint8_t *in, size_t len, uint8_t *out, size_t *used)
{
    struct cx_frame_hdr h;
    if (cx_frame_decode(in, len, &h) < 0 || h.type != CX_FRAME_LOOKUP ||
        (h.flags & CX_FRAME_F_REPLY) || h.length > len - CX_FRAME_HDR_SIZE)
        return 0;
    *used = CX_FRAME_HDR_SIZE + h.length;
    struct cx_sp_buf b = {.p = out + CX_FRAME_HDR_SIZE, .cap = ONE_MAX - CX_FRAME_HDR_SIZE, .fixed = 1};
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

struct udp_out { /* reply datagrams waiting for one sendmmsg */
    int fd, n;
    uint8_t buf[OUT_MAX][REPLY_MAX];
    struct iovec iov[OUT_MAX];
    struct mmsghdr m[OUT_MAX];
};

static void out_flush(struct udp_out *o)
{
    for (int done = 0; done < o->n;) {
        int k = sendmmsg(o->fd, o->m + done, (unsigned)(o->n - done), 0);
        if (k <= 0)
            break; /* a full socket buffer drops replies: the client retransmits */
        done += k;
    }
    o->n = 0;
}

static int out_open(struct udp_out *o, struct sockaddr_in *to, socklen_t tolen)
{
    if (o->n == OUT_MAX)
        out_flush(o);
    int d = o->n++;
    o->iov[d] = (struct iovec){o->buf[d], 0};
    o->m[d] = (struct mmsghdr){.msg_hdr = {.msg_name = to, .msg_namelen = tolen, .msg_iov = &o->iov[d],
                                           .msg_iovlen = 1}};
    return d;
}

/* Answers every frame of one datagram, packing the replies; returns how many. */
static int answer_dgram(struct cx_space_server *s, struct udp_out *o, const uint8_t *in, size_t len,
                         struct sockaddr_in *from, socklen_t fromlen)
{
    uint8_t one[ONE_MAX];
    int d = -1, count = 0;
    for (size_t off = 0; len - off >= CX_FRAME_HDR_SIZE;) {
        size_t used = 0, n = answer(s, in + off, len - off, one, &used);
        if (!n)
            break;
        off += used;
        if (d < 0 || o->iov[d].iov_len + n > REPLY_MAX)
            d = out_open(o, from, fromlen);
        memcpy(o->buf[d] + o->iov[d].iov_len, one, n);
        o->iov[d].iov_len += n;
        count++;
    }
    return count;
}

static void *udp_thread(void *arg)
{
    struct cx_space_server *s = arg;
    static __thread uint8_t in[BATCH][DGRAM_MAX];
    static __thread struct udp_out out;
    struct sockaddr_in from[BATCH];
    struct iovec iin[BATCH];
    struct mmsghdr min[BATCH];
    struct pollfd pf[2] = {{.fd = s->udp_fd, .events = POLLIN}, {.fd = s->udp_stop_fd, .events = POLLIN}};
    out.fd = s->udp_fd;
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
            int answered = 0;
            for (int i = 0; i < n; i++)
                answered += answer_dgram(s, &out, in[i], min[i].msg_len, &from[i], min[i].msg_hdr.msg_namelen);
            out_flush(&out);
            __atomic_fetch_add(&s->stats.udp_lookups, (uint64_t)answered, __ATOMIC_RELAXED);
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
