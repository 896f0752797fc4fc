/* The ucx network driver: UCP active messages between two workers, one worker per link.
 * The frame header (48 bytes, encoded) travels as the AM header and the payload as the AM
 * data; small messages go eagerly, large ones with zero copy, by rendezvous where UCX may
 * have RDMA and eagerly elsewhere (want_rndv; cx_ucx_xfer.c for how each size is sent and
 * received). Transports come from UCX_TLS as
 * usual (tcp, posix, sysv, cma here; verbs where there is RDMA).
 *
 * Connection: "ucx://host:port" is a TCP control connection on which both sides exchange
 * their worker addresses (u32 length + bytes); it then stays open to notice the peer's
 * death. Each link has its own worker (one thread drives a link, cx_driver.h), so fd() is
 * an epoll set of the worker's event fd, the control socket and the link's kick eventfd
 * (cx_ucx_share.c); arm() is ucp_worker_arm.
 *
 * accept_start runs the accepting side's exchange inside progress (cx_ucx_accept.c).
 *
 * This file: the UCP context, the handshake, listen/accept/connect and the ops table
 * (each op runs with the link entered, cx_ucx_share.c). Exports exactly one ops table:
 * cx_ucx_ops. */
#define _GNU_SOURCE
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"
#include "transport/ucx/cx_ucx_int.h"

#include "common/cx_error.h"

#include <ucs/debug/debug.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* UCX's error-signal handlers (UCX_ERROR_SIGNALS, by default ILL, SEGV, BUS, FPE) print a
 * UCX backtrace for any crash of the process, the application's own included. libucs
 * installs them when it is loaded, before main and before any ucp_init, so setting the
 * variable at ucp_init comes too late: unless the user set UCX_ERROR_SIGNALS, it is set
 * empty (for ucp_config_read and the programs this process runs) and the handlers that
 * libucs installed are taken back, leaving whatever handler was there before. A handler
 * the application installed since is not libucs's, and stays. Runs as a constructor
 * (after libucs's own, which it depends on) and again before each ucp_init. */
static void quiet_error_signals(void)
{
    if (getenv("UCX_ERROR_SIGNALS"))
        return; /* the user's choice, even "" */
    setenv("UCX_ERROR_SIGNALS", "", 0);
    const int sigs[] = {SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        Dl_info di;
        if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
            sa.sa_handler != SIG_IGN && dladdr((void *)sa.sa_handler, &di) && di.dli_fname &&
            strstr(di.dli_fname, "libucs"))
            ucs_debug_disable_signal(sigs[i]);
    }
}

__attribute__((constructor)) static void quiet_error_signals_at_load(void) { quiet_error_signals(); }

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h ctx;
static pid_t ctx_pid; /* a forked child must not use its parent's context */

struct cx_listener {
    int fd;
    char addr[96];
};

extern const struct cx_driver_ops cx_ucx_ops;

static int ucx_context(void)
{
    pthread_mutex_lock(&ctx_lock);
    if (ctx && ctx_pid != getpid())
        ctx = NULL; /* inherited across fork: unusable here, make our own (the copy leaks) */
    if (!ctx) {
        ctx_pid = getpid();
        quiet_error_signals();
        ucp_config_t *cfg;
        ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
        if (st == UCS_OK) {
            ucp_params_t p = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                              .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
                              .mt_workers_shared = 1};
            st = ucp_init(&p, cfg, &ctx);
            ucp_config_release(cfg);
        }
        if (st != UCS_OK) {
            ctx = NULL;
            pthread_mutex_unlock(&ctx_lock);
            return cx_err_set(ENODEV, "ucx: ucp_init: %s", ucs_status_string(st));
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    return 0;
}

static void ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)ep;
    struct ucx_link *u = arg;
    if (!u->failed)
        u->failed = -ECONNRESET;
    (void)st;
}

/* Whether to ask UCX for peer-failure handling: only when UCX_TLS names an RDMA transport
 * (rc, ud, dc, ib, mlx5) and no shared-memory one. With shared memory in the mix UCX
 * 1.13 would refuse the transport or fail the endpoint. Not for tcp: there the mode costs
 * the zero-copy rendezvous (UCX drops tcp's RMA lane, `ucx_info -e -u me`, and fetches
 * large messages as copied fragments: 0.6x of the bandwidth), and without it a dead peer
 * still shows: sends fail ("Endpoint timeout") and the control socket closes. */
static int want_peer_err_mode(void)
{
    const char *tls = getenv("UCX_TLS");
    if (!tls || !*tls || tls[0] == '^') /* unset, or "all but ...": shared memory too */
        return 0;
    static const char *const shm[] = {"posix", "sysv", "self", "shm", "cma", "knem", "xpmem", "all"};
    static const char *const rdma[] = {"rc", "ud", "dc", "ib", "mlx"};
    int has_rdma = 0;
    for (const char *t = tls; *t; t += strcspn(t, ",")) {
        t += strspn(t, ", ");
        for (size_t i = 0; i < sizeof shm / sizeof *shm; i++)
            if (!strncmp(t, shm[i], strlen(shm[i])))
                return 0;
        for (size_t i = 0; i < sizeof rdma / sizeof *rdma; i++)
            has_rdma |= !strncmp(t, rdma[i], strlen(rdma[i]));
    }
    return has_rdma;
}

/* 1 when tls (UCX_TLS's value, NULL when unset) may give UCX an RDMA transport: it names
 * one (rc, ud, dc, ib, mlx), or it is unset, "all" or "all but ..." and the host has
 * RDMA devices (host_rdma). Pure, for the tests. */
int cx_ucx_tls_may_rdma(const char *tls, int host_rdma)
{
    if (!tls || !*tls || tls[0] == '^' || strstr(tls, "all"))
        return host_rdma;
    static const char *const rdma[] = {"rc", "ud", "dc", "ib", "mlx"};
    for (const char *t = tls; *t; t += strcspn(t, ",")) {
        t += strspn(t, ", ");
        for (size_t i = 0; i < sizeof rdma / sizeof *rdma; i++)
            if (!strncmp(t, rdma[i], strlen(rdma[i])))
                return 1;
    }
    return 0;
}

static int host_has_rdma(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    int any = 0;
    if (d) {
        for (struct dirent *e; !any && (e = readdir(d));) any = e->d_name[0] != '.';
        closedir(d);
    }
    return any;
}

/* Whether sends from CX_UCX_ZCOPY_MIN use UCX's rendezvous (see cx_ucx_xfer.c): only where
 * it can move the data by RDMA with zero copy. Without RDMA (tcp, shared memory) UCX's
 * rendezvous is a protocol of steps (RTS, RTR, the data in socket-sized pieces, ATP) that
 * both sides' threads must drive in turn; in the channel and pipe runtimes that cost
 * 2-3 ms for 1 MiB on loopback tcp (the driver alone 0.2 ms), while eager from the
 * caller's memory goes straight into the socket. CX_UCX_RNDV=1 or 0 overrides (tests). */
static int want_rndv(void)
{
    const char *f = getenv("CX_UCX_RNDV");
    if (f && (!strcmp(f, "0") || !strcmp(f, "1")))
        return f[0] == '1';
    return cx_ucx_tls_may_rdma(getenv("UCX_TLS"), host_has_rdma());
}

/* Creates the worker, exchanges addresses on sock, makes the endpoint. Owns sock. */
/* Frees a link that never got to its owner (sock included). */
static void link_free(struct ucx_link *u, ucp_address_t *addr)
{
    if (u->worker) {
        if (addr)
            ucp_worker_release_address(u->worker, addr);
        cx_ucx_close_ep(u);
        ucp_worker_destroy(u->worker);
    }
    if (u->kick_fd >= 0)
        close(u->kick_fd);
    if (u->epfd >= 0)
        close(u->epfd);
    free(u->hs_out);
    free(u->hs_in);
    close(u->sock);
    free(u);
}

/* A link on control socket sock, up to the address exchange: its worker (with our AM
 * handler), the worker's address in *addr and *alen (released by the caller) and the epoll
 * set fd() returns. On failure sock is closed. */
static int link_new(int sock, struct ucx_link **out, ucp_address_t **addr, size_t *alen)
{
    int rc = ucx_context();
    if (rc < 0) {
        close(sock);
        return rc;
    }
    struct ucx_link *u = calloc(1, sizeof *u);
    if (!u) {
        close(sock);
        return cx_err_set(ENOMEM, "ucx: out of memory");
    }
    u->base.ops = &cx_ucx_ops;
    u->sock = sock;
    u->efd = u->epfd = -1;
    u->rxq_tail = &u->rxq;
    u->rndv = want_rndv();
    cx_ucx_pool_init(&u->pool, ctx);
    *addr = NULL;
    u->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (u->kick_fd < 0) {
        rc = cx_err_set(errno, "ucx: eventfd: %s", strerror(errno));
        goto error;
    }
    /* serialized, not single: a sender waiting on another link may progress this one
     * while no thread is inside it (cx_ucx_share.c) */
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SERIALIZED};
    ucs_status_t st = ucp_worker_create(ctx, &wp, &u->worker);
    if (st != UCS_OK) {
        u->worker = NULL;
        rc = cx_err_set(ENODEV, "ucx: worker: %s", ucs_status_string(st));
        goto error;
    }
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB |
                                               UCP_AM_HANDLER_PARAM_FIELD_ARG |
                                               UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
                                 .id = CX_UCX_AM_ID, .cb = cx_ucx_am_cb, .arg = u, .flags = UCP_AM_FLAG_WHOLE_MSG};
    if ((st = ucp_worker_set_am_recv_handler(u->worker, &hp)) != UCS_OK ||
        (st = ucp_worker_get_address(u->worker, addr, alen)) != UCS_OK ||
        (st = ucp_worker_get_efd(u->worker, &u->efd)) != UCS_OK) {
        rc = cx_err_set(ENODEV, "ucx: worker setup: %s", ucs_status_string(st));
        goto error;
    }
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    if (u->epfd < 0 || epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->efd, &ev) < 0 ||
        epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->kick_fd, &ev) < 0 ||
        epoll_ctl(u->epfd, EPOLL_CTL_ADD, sock, &(struct epoll_event){.events = EPOLLIN | EPOLLRDHUP}) < 0) {
        rc = cx_err_set(errno, "ucx: epoll: %s", strerror(errno));
        goto error;
    }
    *out = u;
    return 0;
error:
    link_free(u, *addr);
    *addr = NULL;
    return rc;
}

int cx_ucx_ep_create(struct ucx_link *u, const void *peer)
{
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t *)peer,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_err, .arg = u}};
    /* Peer-failure handling only for RDMA (want_peer_err_mode); otherwise failed sends and
     * the control socket tell us of a dead peer. */
    if (!want_peer_err_mode())
        ep.field_mask &= ~(uint64_t)(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    ucs_status_t st = ucp_ep_create(u->worker, &ep, &u->ep);
    if (st != UCS_OK) {
        u->ep = NULL;
        return cx_err_set(ECONNREFUSED, "ucx: endpoint to peer: %s", ucs_status_string(st));
    }
    return 0;
}

/* The link on sock with the address exchange done here, blocking (connect, accept). */
static int ucx_make(int sock, struct cx_link **out)
{
    struct ucx_link *u;
    ucp_address_t *addr;
    size_t alen;
    int rc = link_new(sock, &u, &addr, &alen);
    if (rc < 0)
        return rc;
    uint8_t *peer = NULL;
    uint32_t l32 = (uint32_t)alen, plen;
    if ((rc = cx_fd_write_full(sock, &l32, 4)) < 0 || (rc = cx_fd_write_full(sock, addr, alen)) < 0 ||
        (rc = cx_fd_read_full(sock, &plen, 4)) < 0)
        goto error_wrap;
    if (plen == 0 || plen > CX_UCX_ADDR_MAX) {
        rc = cx_err_set(EPROTO, "ucx: peer sent a %u-byte worker address", plen);
        goto error;
    }
    peer = malloc(plen);
    if (!peer || (rc = cx_fd_read_full(sock, peer, plen)) < 0) {
        rc = peer ? rc : cx_err_set(ENOMEM, "ucx: out of memory");
        goto error_wrap;
    }
    if ((rc = cx_ucx_ep_create(u, peer)) < 0)
        goto error;
    /* wait until both sides have their endpoint before traffic (a byte each way) */
    char b = 1;
    if ((rc = cx_fd_write_full(sock, &b, 1)) < 0 || (rc = cx_fd_read_full(sock, &b, 1)) < 0)
        goto error_wrap;
    free(peer);
    ucp_worker_release_address(u->worker, addr);
    cx_tcp_tune(sock);
    cx_ucx_share_add(u);
    *out = &u->base;
    return 0;
error_wrap:
    rc = cx_err_wrap(rc, "ucx: address exchange");
error:
    free(peer);
    link_free(u, addr);
    return rc;
}

static int ucx_listen(const char *addr, struct cx_listener **out)
{
    const char *hp = cx_addr_strip(addr, "ucx");
    if (!hp)
        return cx_err_set(EINVAL, "ucx: address '%s' is not ucx://host:port", addr);
    struct sockaddr_in sa;
    int fd = cx_tcp_listen_fd(hp, &sa);
    if (fd < 0)
        return cx_err_wrap(fd, "ucx: control listener");
    struct cx_listener *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        return cx_err_set(ENOMEM, "ucx: out of memory");
    }
    l->fd = fd;
    cx_addr_format_inet("ucx", &sa, l->addr, sizeof l->addr);
    *out = l;
    return 0;
}

static const char *ucx_listener_addr(struct cx_listener *l) { return l->addr; }
static int ucx_listener_fd(struct cx_listener *l) { return l->fd; }
static void ucx_listener_close(struct cx_listener *l)
{
    if (l) {
        close(l->fd);
        free(l);
    }
}

static int ucx_accept(struct cx_listener *l, int timeout_ms, struct cx_link **out)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            return ucx_make(fd, out);
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return cx_err_set(errno, "ucx: accept: %s", strerror(errno));
        int r = poll(&p, 1, timeout_ms);
        if (r == 0)
            return cx_err_set(ETIMEDOUT, "ucx: no peer on %s within %d ms", l->addr, timeout_ms);
    }
}

/* accept_start (cx_driver.h): the address exchange runs in the link's progress
 * (cx_ucx_accept.c), so a peer that connects and sends nothing holds no one. */
static int ucx_accept_start(struct cx_listener *l, int handshake_ms, struct cx_link **out)
{
    if (!l || !out || handshake_ms <= 0)
        return cx_err_set(EINVAL, "ucx: accept_start needs a listener, a link pointer and a "
                          "positive deadline (got %d ms)", handshake_ms);
    int fd;
    while ((fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
        if (errno != EINTR)
            return errno == EAGAIN || errno == EWOULDBLOCK
                       ? -EAGAIN
                       : cx_err_set(errno, "ucx: accept: %s", strerror(errno));
    struct ucx_link *u;
    ucp_address_t *addr;
    size_t alen;
    int rc = link_new(fd, &u, &addr, &alen);
    if (rc < 0)
        return rc;
    rc = cx_ucx_hs_start(u, addr, alen, handshake_ms);
    ucp_worker_release_address(u->worker, addr);
    if (rc < 0) {
        link_free(u, NULL);
        return rc;
    }
    *out = &u->base;
    return 0;
}

static int ucx_connect(const char *addr, struct cx_link **out)
{
    const char *hp = cx_addr_strip(addr, "ucx");
    if (!hp)
        return cx_err_set(EINVAL, "ucx: address '%s' is not ucx://host:port", addr);
    int fd = cx_tcp_connect_fd(hp);
    if (fd < 0)
        return cx_err_wrap(fd, "ucx: control connection");
    return ucx_make(fd, out);
}

static int ucx_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct ucx_link *u = (struct ucx_link *)k;
    if (u->hs)
        return cx_err_set(ENOTCONN, "ucx: the handshake with the peer is not done");
    int nested = cx_ucx_enter(u);
    int rc = cx_ucx_send_msg(u, h, iov, iovcnt);
    cx_ucx_leave(u, nested);
    return rc;
}

static size_t ucx_pending(struct cx_link *k)
{
    struct ucx_link *u = (struct ucx_link *)k;
    int nested = cx_ucx_enter(u); /* a helper may be completing our sends */
    size_t n = u->inflight_bytes;
    cx_ucx_leave(u, nested);
    return n;
}

static int ucx_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct ucx_link *u = (struct ucx_link *)k;
    if (u->hs) { /* accepted by accept_start: the address exchange first */
        int rc = cx_ucx_hs_step(u);
        if (rc <= 0)
            return rc;
    }
    int nested = cx_ucx_enter(u);
    int rc = cx_ucx_progress_link(u, fn, arg, budget);
    cx_ucx_leave(u, nested);
    return rc;
}

static int ucx_fd(struct cx_link *k) { return ((struct ucx_link *)k)->epfd; }

/* Refuses while a fetched message waits for delivery, not while the first one is still
 * being fetched: the fetch's steps arrive as worker events like any message (and a helper
 * that completes it kicks an armed owner), so the owner may sleep meanwhile. Refusing made
 * the receiver's runtime thread poll without pause for the whole fetch, and on a busy
 * 2-core host that spin took the CPU the rendezvous' other steps needed (1 MiB over tcp,
 * channel layer, forced rendezvous: 1.3-3.2 ms one way refusing, 0.7-1.1 ms arming). */
static int ucx_arm(struct cx_link *k)
{
    struct ucx_link *u = (struct ucx_link *)k;
    if (u->hs) /* the peer's bytes wake us; our own unsent ones need a retry */
        return u->failed || u->hs_out_off < u->hs_out_len ? -EAGAIN : 0;
    int nested = cx_ucx_enter(u);
    int rc = 0;
    if (u->failed || (u->rxq && u->rxq->ready) || u->kicked || !u->ep || cx_ucx_peer_gone(u) ||
        ucp_worker_arm(u->worker) != UCS_OK)
        rc = -EAGAIN;
    u->armed = rc == 0;
    cx_ucx_leave(u, nested);
    return rc;
}

static void ucx_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    (void)k;
    *c = (struct cx_driver_caps){.flags = CX_CAP_RELIABLE | CX_CAP_ORDERED | CX_CAP_FABRIC,
                                 .max_msg = CX_FRAME_MAX_MSG, .poll_cost = 2, .rank = 20};
}

static void ucx_close(struct cx_link *k)
{
    struct ucx_link *u = (struct ucx_link *)k;
    cx_ucx_share_remove(u); /* no helper finds it any more */
    cx_ucx_enter(u);        /* and none is still inside */
    cx_ucx_drain(u);
    cx_ucx_pool_destroy(&u->pool);
    ucp_worker_destroy(u->worker);
    close(u->sock);
    close(u->epfd);
    close(u->kick_fd);
    free(u->hs_out);
    free(u->hs_in);
    free(u);
}

const struct cx_driver_ops cx_ucx_ops = {
    .name = "ucx",
    .scheme = "ucx",
    .listen = ucx_listen,
    .listener_addr = ucx_listener_addr,
    .listener_fd = ucx_listener_fd,
    .accept = ucx_accept,
    .accept_start = ucx_accept_start,
    .listener_close = ucx_listener_close,
    .connect = ucx_connect,
    .send = ucx_send,
    .pending = ucx_pending,
    .progress = ucx_progress,
    .fd = ucx_fd,
    .arm = ucx_arm,
    .caps = ucx_caps,
    .close = ucx_close,
};
