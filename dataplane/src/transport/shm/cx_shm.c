/* The shm network driver: two processes on one node exchange messages through two SPSC
 * rings (one per direction) in a memfd region. The connecting side creates the region and
 * one eventfd per side and passes all three over the Unix socket with SCM_RIGHTS right
 * after connect (the kernel holds them until the listener accepts, so connect never waits
 * for the other process: two processes may dial each other from their progress threads at
 * once); the socket then stays open only to notice the peer's death.
 *
 * Addresses: "shm:///path/to.sock" (a socket file) or "shm://@name" (an abstract socket:
 * no file, gone with its process, visible only inside the same network namespace).
 *
 * A message that fits a ring record (half the ring) is one record, delivered to the
 * receiver in place (no copy on receive): a SHORT record (a 24-byte header, struct
 * short_hdr: no ack, not a fragment, the common case) or a MSG record (the encoded
 * 48-byte cx_frame header) and the payload. Both are checked on receipt as a frame header
 * from the network is (type, flags, lengths); a record of another kind breaks the link.
 * A larger message is streamed as CHUNK records, each carrying the message's header and
 * the next piece; the receiver assembles them. The sender copies into the ring
 * (the one copy); what does not fit yet is queued and flushed by progress.
 *
 * Wake-up: the receiver polls; before the engine blocks it sets reader_idle in its ring
 * (arm) and the sender, after a commit, writes the receiver's eventfd only if that flag is
 * set, so busy links pay no system call. The same holds for a sender waiting for room.
 * Exports exactly one ops table: cx_shm_ops. */
#define _GNU_SOURCE
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"
#include "transport/cx_txq.h"
#include "transport/shm/cx_spsc_ring.h"

#include "common/cx_env.h"
#include "common/cx_error.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REC_MSG 2u
#define REC_CHUNK 3u
#define REC_SHORT 4u /* a whole message behind the short header (struct short_hdr) */
#define SHM_MAGIC 0x43585348u /* "CXSH" */
#define DEFAULT_RING (8u << 20)
#define DEFAULT_HOT (256u << 10) /* the rings' hot window (cx_spsc_ring_set_hot) */
/* The region: the two control blocks, ring 0's data, RING1_SKEW bytes, ring 1's data. The
 * skew puts the two rings' records at different offsets within a page: an end reads its
 * rx ring right after writing its tx ring at the same place in a ping-pong, and addresses
 * equal modulo 4 KiB make the CPU take the load for one that depends on those stores. */
#define RING1_SKEW 2048u
#define REGION_SIZE(ring) (2 * CX_RING_CTL_SIZE + 2 * (ring) + RING1_SKEW)
#define MAX_RING (1u << 30) /* a peer's hello asking for more is refused */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels answer EINVAL */
#endif

struct shm_link {
    struct cx_link base;
    int sock, my_efd, peer_efd, epfd;
    int failed;
    void *map;
    size_t maplen;
    struct cx_spsc_ring tx, rx;
    struct cx_txq txq;     /* queued encoded frames (header + payload) */
    size_t tx_off;         /* payload bytes of the queue's first frame already in the ring */
    uint8_t *asm_buf;      /* CHUNK assembly */
    size_t asm_got;
    struct cx_frame_hdr asm_hdr;
    unsigned empty_polls;
    int wake_peer;         /* a reader-idle flag was taken: write peer_efd */
    cx_recv_fn fn;         /* current progress callback */
    void *fn_arg;
    /* accept_start: waiting in progress for the connector's hello until hs_deadline */
    int hs;                /* 1 until the hello came (and after it failed) */
    long long hs_deadline; /* ms, CLOCK_MONOTONIC */
    int hs_ms;
    char why[160];         /* why the hello failed, reported again by later calls */
    char where[108];       /* the listener's path, for the messages */
};

/* The short header: what a whole message whose header has no ack and no fragment fields
 * needs (the common case: an event, a segment). 24 bytes instead of the 48 of the full
 * header, so a 100-byte event with its format's side area is three cache lines, not four.
 * The length is the record's. */
struct short_hdr {
    uint8_t type, flags;
    uint16_t zero;
    uint32_t channel;
    uint64_t seq;
    uint64_t format;
};
#define SHORT_HDR_SIZE ((uint32_t)sizeof(struct short_hdr))
#define SHORT_FLAGS_NOT (CX_FRAME_F_ACK | CX_FRAME_F_FRAG | CX_FRAME_F_UNCHECKED)

struct cx_listener {
    int fd;
    char path[108];
    char addr[128];
};

extern const struct cx_driver_ops cx_shm_ops;

/* An environment switch that is off when set to "0". */
static int getenv_flag_off(const char *name)
{
    const char *e = getenv(name);
    return e && strcmp(e, "0") == 0;
}

static uint64_t ring_size(void)
{
    uint64_t n = cx_env_u64("CX_SHM_RING_BYTES", DEFAULT_RING, 4096, MAX_RING);
    uint64_t p = 4096;
    while (p < n && p < MAX_RING) p <<= 1;
    return p;
}

/* The tx ring's hot window: CX_SHM_HOT_BYTES, 0 turns it off. 256 KiB: both directions'
 * windows and the events' own buffers stay in a core's L2; an event of up to half of it
 * (128 KiB) reuses the window while the peer keeps up. */
static uint64_t hot_size(void)
{
    return cx_env_u64("CX_SHM_HOT_BYTES", DEFAULT_HOT, 0, MAX_RING);
}

/* The asymmetric Dekker of the rings' wake-up (cx_spsc_ring.h): every process with shm
 * links registers for membarrier's GLOBAL_EXPEDITED, so an end about to sleep runs a full
 * barrier on the other process's threads, and the busy ends commit and free without one.
 * Where the kernel or a seccomp profile lacks it, both ends fence as before. */
static int membar_ok;
static pthread_once_t membar_once = PTHREAD_ONCE_INIT;
static void membar_setup(void)
{
    long q = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    membar_ok = q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                (q & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) &&
                syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 &&
                !getenv_flag_off("CX_SHM_MEMBARRIER");
}
static int membar_run(void)
{
    return syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0 ? 0 : -errno;
}

/* Fills sa from "shm:///path" or "shm://@name" (abstract); *salen is the length to pass
 * to bind/connect. */
static int parse_path(const char *addr, struct sockaddr_un *sa, socklen_t *salen)
{
    const char *p = cx_addr_strip(addr, "shm");
    if (!p || !*p || (*p == '@' && !p[1]) || strlen(p) >= sizeof sa->sun_path)
        return cx_err_set(EINVAL, "shm: address '%s' is not shm:///path or shm://@name (< 108 chars)",
                          addr ? addr : "");
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(p);
    memcpy(sa->sun_path, p, n);
    if (*p == '@') { /* abstract: a leading NUL, the name not NUL-terminated */
        sa->sun_path[0] = '\0';
        *salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        *salen = (socklen_t)sizeof *sa;
    }
    return 0;
}

static int shm_listen(const char *addr, struct cx_listener **out)
{
    struct sockaddr_un sa;
    socklen_t salen;
    int rc = parse_path(addr, &sa, &salen);
    if (rc < 0)
        return rc;
    const char *name = cx_addr_strip(addr, "shm");
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return cx_err_set(errno, "shm: socket: %s", strerror(errno));
    if (*name != '@')
        unlink(sa.sun_path);
    if (bind(fd, (struct sockaddr *)&sa, salen) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "shm: listen on %s: %s", name, strerror(e));
    }
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return cx_err_set(ENOMEM, "shm: out of memory");
    }
    l->fd = fd;
    snprintf(l->path, sizeof l->path, "%s", name);
    snprintf(l->addr, sizeof l->addr, "shm://%s", name);
    *out = l;
    return 0;
}

static const char *shm_listener_addr(struct cx_listener *l) { return l->addr; }
static int shm_listener_fd(struct cx_listener *l) { return l->fd; }

static void shm_listener_close(struct cx_listener *l)
{
    if (!l)
        return;
    close(l->fd);
    if (l->path[0] != '@')
        unlink(l->path);
    free(l);
}

struct hello {
    uint32_t magic;
    uint32_t pad;
    uint64_t ring;
};

/* Maps the region (len bytes of memfd, checked: a peer may pass a shorter one) with every
 * page resident and writable, so no store of the rings' first lap faults. MAP_POPULATE
 * populates a shared mapping by read faults: a memfd's pages come out writable on the
 * kernels measured (bench/channel/README.md), but write-protect or soft-dirty tracking
 * leaves them read-only; MADV_POPULATE_WRITE (Linux 5.14) populates them as the writers
 * use them. Kernels without it (EINVAL) get MAP_POPULATE. */
static int map_region(int memfd, size_t len, void **out)
{
    struct stat st;
    if (fstat(memfd, &st) < 0)
        return cx_err_set(errno, "shm: fstat of the region: %s", strerror(errno));
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < len)
        return cx_err_set(EPROTO, "shm: region of %lld bytes, the rings need %zu",
                          (long long)st.st_size, len);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (p != MAP_FAILED && madvise(p, len, MADV_POPULATE_WRITE) != 0) {
        int e = errno;
        munmap(p, len);
        if (e != EINVAL)
            return cx_err_set(e, "shm: making the %zu-byte region resident: %s", len, strerror(e));
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
    }
    if (p == MAP_FAILED)
        return cx_err_set(errno, "shm: mmap of %zu bytes: %s", len, strerror(errno));
    *out = p;
    return 0;
}

/* Maps the region and sets link s up on it (s->sock set; s->epfd made unless there).
 * side 0 = creator (the connector; tx ring 0), 1 = the listener's side. Takes memfd and the
 * eventfds (closed on failure). */
static int shm_setup(struct shm_link *s, int memfd, int my_efd, int peer_efd, uint64_t ring,
                     int side, int init)
{
    int rc;
    if (ring < 4096 || ring > MAX_RING || (ring & (ring - 1))) {
        rc = cx_err_set(EPROTO, "shm: ring of %llu bytes (a power of two, 4 KiB to 1 GiB)",
                        (unsigned long long)ring);
        goto error;
    }
    s->maplen = REGION_SIZE(ring);
    if ((rc = map_region(memfd, s->maplen, &s->map)) < 0) {
        s->map = NULL;
        goto error;
    }
    uint8_t *base = s->map;
    struct cx_ring_ctl *c0 = (void *)base, *c1 = (void *)(base + CX_RING_CTL_SIZE);
    uint8_t *d0 = base + 2 * CX_RING_CTL_SIZE, *d1 = d0 + ring + RING1_SKEW;
    if (init) {
        cx_spsc_ring_init(c0, ring);
        cx_spsc_ring_init(c1, ring);
    }
    if ((rc = cx_spsc_ring_attach(&s->tx, side ? c1 : c0, side ? d1 : d0, ring)) < 0 ||
        (rc = cx_spsc_ring_attach(&s->rx, side ? c0 : c1, side ? d0 : d1, ring)) < 0)
        goto error;
    cx_spsc_ring_set_hot(&s->tx, hot_size());
    pthread_once(&membar_once, membar_setup);
    cx_spsc_ring_set_barrier(&s->tx, CX_RING_PRODUCER, membar_ok, membar_ok ? membar_run : NULL);
    cx_spsc_ring_set_barrier(&s->rx, CX_RING_CONSUMER, membar_ok, membar_ok ? membar_run : NULL);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
    if (s->epfd < 0) {
        s->epfd = epoll_create1(EPOLL_CLOEXEC);
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sock, &ev);
    }
    ev.events = EPOLLIN;
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, my_efd, &ev);
    close(memfd);
    s->my_efd = my_efd;
    s->peer_efd = peer_efd;
    return 0;
error:
    if (s->map)
        munmap(s->map, s->maplen);
    s->map = NULL;
    close(memfd), close(my_efd), close(peer_efd);
    return rc;
}

static struct shm_link *link_alloc(int sock)
{
    struct shm_link *s = calloc(1, sizeof *s);
    if (s) {
        s->base.ops = &cx_shm_ops;
        s->sock = sock;
        s->my_efd = s->peer_efd = s->epfd = -1;
    }
    return s;
}

static int shm_make(int sock, int memfd, int my_efd, int peer_efd, uint64_t ring, int side,
                    int init, struct cx_link **out)
{
    struct shm_link *s = link_alloc(sock);
    int rc = s ? shm_setup(s, memfd, my_efd, peer_efd, ring, side, init) : -ENOMEM;
    if (!s) {
        close(memfd), close(my_efd), close(peer_efd);
        rc = cx_err_set(ENOMEM, "shm: out of memory");
    }
    if (rc < 0) {
        free(s);
        close(sock);
        return rc;
    }
    *out = &s->base;
    return 0;
}

/* Takes the connector's hello (ring size, and the region and both eventfds by SCM_RIGHTS)
 * from sock without waiting: 1 with ring and fds, 0 when it has not come yet, or -errno
 * (a bad hello: what it passed is closed; the peer hung up). */
static int take_hello(int sock, const char *where, uint64_t *ring, int fds[3])
{
    struct hello h;
    struct iovec iov = {&h, sizeof h};
    union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    if (r <= 0)
        return cx_err_set(r == 0 ? ECONNRESET : errno, "shm: a peer on %s %s before its hello",
                          where, r == 0 ? "hung up" : strerror(errno));
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (r != (ssize_t)sizeof h || h.magic != SHM_MAGIC || !c || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(3 * sizeof(int))) {
        if (c && c->cmsg_type == SCM_RIGHTS) { /* do not leak what a bad peer passed */
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (int i = 0; i < n && i < 3; i++)
                close(((int *)CMSG_DATA(c))[i]);
        }
        return cx_err_set(EPROTO, "shm: bad handshake from a peer on %s", where);
    }
    memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
    *ring = h.ring;
    return 1;
}

static int accept_fd(struct cx_listener *l, int timeout_ms)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    for (;;) {
        int sock = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (sock >= 0)
            return sock;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return cx_err_set(errno, "shm: accept: %s", strerror(errno));
        if (errno != EINTR && timeout_ms == 0)
            return -EAGAIN;
        int r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return cx_err_set(ETIMEDOUT, "shm: no peer on %s within %d ms", l->path, timeout_ms);
    }
}

/* The listener's side: accepts, then takes the region and eventfds the connector sent
 * right after its connect (normally already there; waits at most HELLO_WAIT_MS). */
#define HELLO_WAIT_MS 2000
static int shm_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    int sock = accept_fd(l, timeout_ms);
    if (sock < 0)
        return sock == -EAGAIN ? cx_err_set(ETIMEDOUT, "shm: no peer on %s", l->path) : sock;
    struct pollfd q = {.fd = sock, .events = POLLIN};
    uint64_t ring = 0;
    int fds[3];
    int rc = poll(&q, 1, HELLO_WAIT_MS) == 1 ? take_hello(sock, l->path, &ring, fds) : 0;
    if (rc <= 0) {
        close(sock);
        return rc < 0 ? rc : cx_err_set(ETIMEDOUT, "shm: a peer on %s sent no region within %d ms",
                                        l->path, HELLO_WAIT_MS);
    }
    fcntl(sock, F_SETFL, O_NONBLOCK);
    return shm_make(sock, fds[0], fds[1], fds[2], ring, 1, 0, out);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* accept_start (cx_driver.h): the link at once; its progress takes the hello (normally
 * there already) and fails the link with -ETIMEDOUT when none came within handshake_ms. */
static int hello_step(struct shm_link *s)
{
    if (s->failed)
        return cx_err_set(-s->failed, "%s", s->why);
    uint64_t ring = 0;
    int fds[3];
    int rc = take_hello(s->sock, s->where, &ring, fds);
    if (rc > 0 && (rc = shm_setup(s, fds[0], fds[1], fds[2], ring, 1, 0)) == 0)
        rc = 1;
    if (rc == 0 && now_ms() >= s->hs_deadline)
        rc = cx_err_set(ETIMEDOUT, "shm: accepting on %s: handshake not done within %d ms",
                        s->where, s->hs_ms);
    if (rc < 0) {
        s->failed = rc;
        snprintf(s->why, sizeof s->why, "%s", cx_errmsg());
        return rc;
    }
    if (rc == 0)
        return 0;
    fcntl(s->sock, F_SETFL, O_NONBLOCK);
    s->hs = 0;
    return 1;
}

static int shm_accept_start(struct cx_listener *l, int handshake_ms, struct cx_link **out)
{
    if (!l || !out || handshake_ms <= 0)
        return cx_err_set(EINVAL, "shm: accept_start needs a listener, a link pointer and a "
                          "positive deadline (got %d ms)", handshake_ms);
    int sock = accept_fd(l, 0);
    if (sock < 0)
        return sock;
    struct shm_link *s = link_alloc(sock);
    if (!s || (s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        free(s);
        close(sock);
        return cx_err_set(ENOMEM, "shm: out of memory for a link");
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, sock, &ev); /* the hello wakes the owner */
    s->hs = 1;
    snprintf(s->where, sizeof s->where, "%s", l->path);
    s->hs_ms = handshake_ms;
    s->hs_deadline = now_ms() + handshake_ms;
    int rc = hello_step(s);
    if (rc < 0) {
        cx_link_close(&s->base);
        return rc;
    }
    *out = &s->base;
    return 0;
}

/* The connecting side creates the region (initialising the rings) and the two eventfds,
 * and passes them over the socket: nothing here waits for the listener's process. */
static int shm_connect(const char *addr, struct cx_link **out)
{
    struct sockaddr_un sa;
    socklen_t salen;
    int rc = parse_path(addr, &sa, &salen);
    if (rc < 0)
        return rc;
    const char *name = cx_addr_strip(addr, "shm");
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return cx_err_set(errno, "shm: socket: %s", strerror(errno));
    if (connect(sock, (struct sockaddr *)&sa, salen) < 0) {
        int e = errno == ENOENT ? ECONNREFUSED : errno;
        close(sock);
        return cx_err_set(e, "shm: connect to %s: %s", name, strerror(e));
    }
    uint64_t ring = ring_size();
    size_t len = REGION_SIZE(ring);
    int memfd = memfd_create("conflux-shm", MFD_CLOEXEC);
    int efd_l = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), efd_c = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (memfd < 0 || efd_l < 0 || efd_c < 0 || ftruncate(memfd, (off_t)len) < 0) {
        int e = errno;
        close(sock), close(memfd), close(efd_l), close(efd_c);
        return cx_err_set(e, "shm: region of %zu bytes: %s", len, strerror(e));
    }
    /* build our side first (initialises the rings), then hand the fds over */
    int memfd2 = dup(memfd);
    struct cx_link *k;
    rc = shm_make(sock, memfd2, efd_c, efd_l, ring, 0, 1, &k);
    if (rc < 0) {
        close(memfd); /* shm_make closed the rest */
        return rc;
    }
    struct hello h = {.magic = SHM_MAGIC, .ring = ring};
    struct iovec iov = {&h, sizeof h};
    union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    int fds[3] = {memfd, efd_l, efd_c}; /* region, your eventfd, mine */
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t w = sendmsg(sock, &m, MSG_NOSIGNAL);
    close(memfd); /* the eventfds belong to the link now (my_efd, peer_efd) */
    if (w != (ssize_t)sizeof h) {
        int e = w < 0 ? errno : EPROTO;
        cx_link_close(k);
        return cx_err_set(e, "shm: passing the region to %s failed", name);
    }
    fcntl(sock, F_SETFL, O_NONBLOCK);
    *out = k;
    return 0;
}

static void wake(int efd)
{
    uint64_t one = 1;
    ssize_t w = write(efd, &one, sizeof one);
    (void)w;
}

/* Puts as much of one message into the ring as fits. hdr is the encoded header, the
 * payload is iov from byte *off. Returns 1 when the message is fully in, 0 if the ring is
 * full (progress saved in *off). */
static int emit(struct shm_link *s, const uint8_t *hdr, const struct iovec *iov, int iovcnt,
                size_t len, size_t *off)
{
    size_t maxb = cx_spsc_ring_max_body(&s->tx) - CX_FRAME_HDR_SIZE;
    if (*off == 0 && len <= maxb) {
        uint8_t *p = cx_spsc_ring_try_claim(&s->tx, REC_MSG, CX_FRAME_HDR_SIZE + len);
        if (!p)
            return 0;
        memcpy(p, hdr, CX_FRAME_HDR_SIZE);
        cx_iov_copy(p + CX_FRAME_HDR_SIZE, iov, iovcnt, 0, len);
        cx_spsc_ring_commit(&s->tx);
        s->wake_peer |= cx_spsc_ring_take_reader_idle(&s->tx);
        return 1;
    }
    while (*off < len) {
        size_t n = len - *off < maxb ? len - *off : maxb;
        uint8_t *p = cx_spsc_ring_try_claim(&s->tx, REC_CHUNK, CX_FRAME_HDR_SIZE + n);
        if (!p)
            return 0;
        memcpy(p, hdr, CX_FRAME_HDR_SIZE);
        cx_iov_copy(p + CX_FRAME_HDR_SIZE, iov, iovcnt, *off, n);
        cx_spsc_ring_commit(&s->tx);
        *off += n;
        s->wake_peer |= cx_spsc_ring_take_reader_idle(&s->tx);
    }
    return 1;
}

static void flush_wake(struct shm_link *s)
{
    if (s->wake_peer) {
        s->wake_peer = 0;
        wake(s->peer_efd);
    }
}

/* Moves queued frames into the ring. Returns 1 if anything moved. */
static int shm_flush(struct shm_link *s)
{
    int moved = 0;
    while (cx_txq_len(&s->txq)) {
        uint8_t *f = cx_txq_data(&s->txq);
        uint32_t plen;
        memcpy(&plen, f + 32, 4); /* length field of our own encoded header (LE) */
        plen = le32toh(plen);
        struct iovec v = {f + CX_FRAME_HDR_SIZE, plen};
        size_t before = s->tx_off;
        int done = emit(s, f, &v, 1, plen, &s->tx_off);
        if (s->tx_off != before || done)
            moved = 1;
        if (!done)
            break;
        cx_txq_pop(&s->txq, CX_FRAME_HDR_SIZE + plen);
        s->tx_off = 0;
    }
    flush_wake(s);
    return moved;
}

static int peer_gone(struct shm_link *s)
{
    char b;
    ssize_t r = recv(s->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (!s->failed)
            s->failed = -ECONNRESET;
        return 1;
    }
    return 0;
}

/* The whole of iov[] to dst: cx_iov_copy without its skip and limit (a whole message
 * into one record), half the instructions per piece for an event's four or five. */
static inline void gather(uint8_t *dst, const struct iovec *iov, int iovcnt)
{
    for (int i = 0; i < iovcnt; i++) {
        memcpy(dst, iov[i].iov_base, iov[i].iov_len);
        dst += iov[i].iov_len;
    }
}

static int shm_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct shm_link *s = (struct shm_link *)k;
    if (s->hs)
        return cx_err_set(ENOTCONN, "shm: the peer's hello has not come yet");
    if (s->failed)
        return cx_err_set(-s->failed, "shm: send on a broken link (peer gone)");
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG)
        return cx_err_set(EMSGSIZE, "shm: message of %zu bytes exceeds %u", len, CX_FRAME_MAX_MSG);
    struct cx_frame_hdr hh = *h;
    hh.length = (uint32_t)len;
    if (!(hh.flags & CX_FRAME_F_FRAG))
        hh.msg_length = (uint32_t)len, hh.frag_offset = 0;
    /* the common case, nothing queued and one record: the header is written straight
     * into the ring (no copy of it from the stack), the short one when it says it all */
    int brief = !(hh.flags & SHORT_FLAGS_NOT) && !hh.ack;
    uint32_t hlen = brief ? SHORT_HDR_SIZE : CX_FRAME_HDR_SIZE;
    if (cx_txq_len(&s->txq) == 0 && len <= cx_spsc_ring_max_body(&s->tx) - hlen) {
        uint8_t *p = cx_spsc_ring_try_claim(&s->tx, brief ? REC_SHORT : REC_MSG, hlen + len);
        if (p) {
            if (brief)
                *(struct short_hdr *)(void *)p = (struct short_hdr){
                    .type = hh.type, .flags = hh.flags, .channel = hh.channel, .seq = hh.seq,
                    .format = hh.format};
            else
                cx_frame_encode_unchecked(&hh, p);
            gather(p + hlen, iov, iovcnt);
            cx_spsc_ring_commit(&s->tx);
            s->wake_peer |= cx_spsc_ring_take_reader_idle(&s->tx);
            flush_wake(s);
            return 0;
        }
    }
    uint8_t hdr[CX_FRAME_HDR_SIZE];
    cx_frame_encode_unchecked(&hh, hdr);
    size_t off = 0;
    if (cx_txq_len(&s->txq) == 0) {
        int done = emit(s, hdr, iov, iovcnt, len, &off);
        flush_wake(s);
        if (done)
            return 0;
        s->tx_off = off;
    }
    struct iovec v[65];
    if (iovcnt > 64)
        return cx_err_set(EINVAL, "shm: at most 64 iovec entries");
    v[0] = (struct iovec){hdr, sizeof hdr};
    if (iovcnt)
        memcpy(v + 1, iov, sizeof *iov * (size_t)iovcnt);
    return cx_txq_push(&s->txq, v, iovcnt + 1, 0);
}

static size_t shm_pending(struct cx_link *k)
{
    struct shm_link *s = (struct shm_link *)k;
    size_t n = cx_txq_len(&s->txq);
    return n > s->tx_off ? n - s->tx_off : 0;
}

/* A short record (struct short_hdr): the header it stands for, checked as a full one is
 * (cx_frame_fields_check: type, lengths), then the message in place. */
static void on_short(struct shm_link *s, const uint8_t *body, uint32_t len)
{
    const struct short_hdr *sh = (const void *)body; /* records are 8-aligned */
    if (len < SHORT_HDR_SIZE || sh->zero || (sh->flags & SHORT_FLAGS_NOT)) {
        s->failed = -EPROTO;
        return;
    }
    uint32_t n = len - SHORT_HDR_SIZE;
    struct cx_frame_hdr h = {.type = sh->type, .flags = sh->flags, .channel = sh->channel,
                             .seq = sh->seq, .format = sh->format, .length = n,
                             .msg_length = n};
    if (cx_frame_fields_check(&h) < 0) {
        s->failed = -EPROTO;
        return;
    }
    s->fn(s->fn_arg, &h, body + SHORT_HDR_SIZE, n);
}

static void on_record(void *clientd, uint32_t type, uint8_t *body, uint32_t len)
{
    struct shm_link *s = clientd;
    if (s->failed)
        return; /* a corrupt record came before: nothing after it is delivered */
    if (type == REC_SHORT) {
        on_short(s, body, len);
        return;
    }
    struct cx_frame_hdr h;
    if ((type != REC_MSG && type != REC_CHUNK) || len < CX_FRAME_HDR_SIZE ||
        cx_frame_decode_local(body, len, &h) < 0 ||
        (type == REC_MSG && h.length != len - CX_FRAME_HDR_SIZE)) {
        s->failed = -EPROTO;
        return;
    }
    uint32_t n = len - CX_FRAME_HDR_SIZE;
    if (type == REC_MSG) {
        s->fn(s->fn_arg, &h, body + CX_FRAME_HDR_SIZE, n);
        return;
    }
    if (!s->asm_buf) {
        s->asm_buf = malloc(h.length ? h.length : 1);
        s->asm_got = 0;
        s->asm_hdr = h;
        if (!s->asm_buf) {
            s->failed = -ENOMEM;
            return;
        }
    }
    if (s->asm_got + n > s->asm_hdr.length) {
        s->failed = -EPROTO;
        return;
    }
    memcpy(s->asm_buf + s->asm_got, body + CX_FRAME_HDR_SIZE, n);
    s->asm_got += n;
    if (s->asm_got == s->asm_hdr.length) {
        uint8_t *b = s->asm_buf;
        s->asm_buf = NULL;
        s->fn(s->fn_arg, &s->asm_hdr, b, s->asm_hdr.length);
        free(b);
    }
}

static int shm_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct shm_link *s = (struct shm_link *)k;
    int work = 0;
    if (s->hs) { /* accepted by accept_start: the hello first */
        int rc = hello_step(s);
        if (rc <= 0)
            return rc;
    }
    cx_spsc_ring_polled(&s->tx);
    if (cx_txq_len(&s->txq) && !s->failed)
        work += shm_flush(s);
    s->fn = fn;
    s->fn_arg = arg;
    int n = cx_spsc_ring_read(&s->rx, on_record, s, budget);
    if (n < 0) { /* a header past the ring's end: the peer is broken or hostile */
        s->failed = n;
        return cx_err_wrap(n, "shm: corrupt record from peer");
    }
    if (n > 0 && cx_spsc_ring_take_writer_idle(&s->rx))
        wake(s->peer_efd);
    work += n;
    if (s->failed == -EPROTO || s->failed == -ENOMEM)
        return cx_err_set(-s->failed, "shm: corrupt record from peer");
    if (work == 0) {
        /* a system call: rarely while spinning (a blocked engine sees the socket's hang-up) */
        if (s->failed || ((++s->empty_polls & 4095) == 0 && peer_gone(s))) {
            if (!cx_spsc_ring_empty(&s->rx))
                return 0;
            return cx_err_set(ECONNRESET, "shm: peer closed the link");
        }
    } else if (cx_txq_len(&s->txq) && !s->failed) {
        shm_flush(s);
    }
    return work;
}

static int shm_fd(struct cx_link *k) { return ((struct shm_link *)k)->epfd; }

static int shm_arm(struct cx_link *k)
{
    struct shm_link *s = (struct shm_link *)k;
    if (s->hs) /* the hello wakes us */
        return s->failed ? -EAGAIN : 0;
    uint64_t v;
    while (read(s->my_efd, &v, sizeof v) > 0) {
    }
    if (s->failed || peer_gone(s))
        return -EAGAIN; /* let progress report it */
    if (cx_spsc_ring_reader_arm(&s->rx) < 0)
        return -EAGAIN;
    if (cx_txq_len(&s->txq)) {
        size_t maxb = cx_spsc_ring_max_body(&s->tx);
        if (cx_spsc_ring_writer_arm(&s->tx, maxb) < 0)
            return -EAGAIN;
    }
    return 0;
}

static void shm_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    (void)k;
    *c = (struct cx_driver_caps){.flags = CX_CAP_RELIABLE | CX_CAP_ORDERED | CX_CAP_SAME_NODE,
                                 .max_msg = CX_FRAME_MAX_MSG, .poll_cost = 1, .rank = 10};
}

static void shm_close(struct cx_link *k)
{
    struct shm_link *s = (struct shm_link *)k;
    if (s->map)
        munmap(s->map, s->maplen);
    close(s->sock);
    if (s->my_efd >= 0)
        close(s->my_efd), close(s->peer_efd);
    close(s->epfd);
    cx_txq_free(&s->txq);
    free(s->asm_buf);
    free(s);
}

const struct cx_driver_ops cx_shm_ops = {
    .name = "shm",
    .scheme = "shm",
    .listen = shm_listen,
    .listener_addr = shm_listener_addr,
    .listener_fd = shm_listener_fd,
    .accept = shm_accept,
    .accept_start = shm_accept_start,
    .listener_close = shm_listener_close,
    .connect = shm_connect,
    .send = shm_send,
    .pending = shm_pending,
    .progress = shm_progress,
    .fd = shm_fd,
    .arm = shm_arm,
    .caps = shm_caps,
    .close = shm_close,
};
