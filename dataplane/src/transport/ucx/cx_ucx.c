/* The ucx network driver: UCP active messages between two workers. The frame header (48
 * bytes, encoded) travels as the AM header and the payload as the AM data; UCX sends small
 * messages eagerly and large ones by rendezvous (zero-copy get by the receiver), with its
 * thresholds (UCX_RNDV_THRESH). Transports come from UCX_TLS as usual (here tcp, posix,
 * sysv, cma; verbs where there is RDMA).
 *
 * Connection: "ucx://host:port" is a TCP control connection on which both sides exchange
 * their worker addresses (u32 length + bytes); it then stays open to notice the peer's
 * death. Each link has its own worker (one thread drives a link, cx_driver.h), so the
 * worker's event fd is the link's fd; arm() is ucp_worker_arm.
 *
 * A small message goes from the caller's memory when UCX can complete it at once
 * (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL); any other is first copied into a buffer owned by the
 * request, freed on completion, so the caller may reuse its buffers on return (the driver
 * contract).
 * Receive keeps arrival order: eager messages are delivered in place unless a rendezvous
 * message before them is still being fetched, in which case they are copied and queued.
 * Exports exactly one ops table: cx_ucx_ops. */
#define _GNU_SOURCE
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"
#include "transport/cx_txq.h"

#include "common/cx_error.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#define AM_ID 7
#define CX_UCX_INLINE 8192

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static ucp_context_h ctx;
static pid_t ctx_pid; /* a forked child must not use its parent's context */

/* a received message waiting for delivery (order behind a rendezvous fetch) */
struct rx_item {
    struct rx_item *next;
    struct cx_frame_hdr h;
    uint8_t *data;
    int ready;     /* fetched */
    int status;    /* fetch status */
    void *req;     /* the fetch request while it runs */
    struct ucx_link *link;
};

/* send-side buffer that lives until UCX completes the request */
struct tx_item {
    struct ucx_link *link;
    struct tx_item *next, *prev; /* the link's requests in flight */
    void *req;
    uint8_t hdr[CX_FRAME_HDR_SIZE];
    size_t len;
    uint8_t data[];
};

struct ucx_link {
    struct cx_link base;
    ucp_worker_h worker;
    ucp_ep_h ep;
    int sock, efd, epfd;
    int failed;
    unsigned inflight;          /* send requests not yet completed */
    struct tx_item *txs;        /* their buffers */
    size_t inflight_bytes;
    struct rx_item *rxq, **rxq_tail; /* in arrival order */
    cx_recv_fn fn;
    void *arg;
    int delivered;
    unsigned empty_polls;
};

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

static void deliver_ready(struct ucx_link *u)
{
    while (u->rxq && u->rxq->ready) {
        struct rx_item *it = u->rxq;
        u->rxq = it->next;
        if (!u->rxq)
            u->rxq_tail = &u->rxq;
        if (it->status == 0 && u->fn) {
            u->fn(u->arg, &it->h, it->data, it->h.length);
            u->delivered++;
        } else if (it->status < 0 && !u->failed) {
            u->failed = it->status;
        }
        free(it->data);
        free(it);
    }
}

static void rndv_done(void *req, ucs_status_t st, size_t len, void *user)
{
    (void)len;
    struct rx_item *it = user;
    it->ready = 1;
    it->status = st == UCS_OK ? 0 : -EIO;
    it->req = NULL;
    if (req)
        ucp_request_free(req);
}

static ucs_status_t am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
                          const ucp_am_recv_param_t *param)
{
    struct ucx_link *u = arg;
    struct cx_frame_hdr h;
    if (hlen != CX_FRAME_HDR_SIZE || cx_frame_decode(header, hlen, &h) < 0 || h.length != len) {
        u->failed = -EPROTO;
        return UCS_OK;
    }
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (!rndv && !u->rxq && u->fn) { /* in order and nothing ahead: in place */
        u->fn(u->arg, &h, data, len);
        u->delivered++;
        return UCS_OK;
    }
    struct rx_item *it = calloc(1, sizeof *it);
    uint8_t *buf = malloc(len ? len : 1);
    if (!it || !buf) {
        free(it), free(buf);
        u->failed = -ENOMEM;
        return UCS_OK;
    }
    it->h = h;
    it->data = buf;
    it->link = u;
    *u->rxq_tail = it;
    u->rxq_tail = &it->next;
    if (!rndv) {
        memcpy(buf, data, len);
        it->ready = 1;
        return UCS_OK;
    }
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.recv_am = rndv_done, .user_data = it};
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(u->worker, data, buf, len, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        it->ready = 1;
        it->status = -EIO;
    } else if (r == NULL) {
        it->ready = 1;
    } else if (!it->ready) {
        it->req = r;
    }
    return UCS_OK;
}

static void ep_err(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    (void)ep;
    struct ucx_link *u = arg;
    if (!u->failed)
        u->failed = -ECONNRESET;
    (void)st;
}

/* Whether to ask UCX for peer-failure handling: only when UCX_TLS names network
 * transports alone (tcp, rc, ud, dc, ib); with shared-memory transports in the mix UCX
 * would either refuse them or fail the endpoint. */
static int want_peer_err_mode(void)
{
    const char *tls = getenv("UCX_TLS");
    if (!tls || !*tls)
        return 0;
    return !strstr(tls, "posix") && !strstr(tls, "sysv") && !strstr(tls, "self") &&
           !strstr(tls, "shm") && !strstr(tls, "cma") && !strstr(tls, "knem") &&
           !strstr(tls, "xpmem") && !strstr(tls, "all");
}

/* Creates the worker, exchanges addresses on sock, makes the endpoint. Owns sock. */
static int ucx_make(int sock, struct cx_link **out)
{
    int rc = ucx_context();
    struct ucx_link *u = NULL;
    ucp_address_t *addr = NULL;
    size_t alen = 0;
    uint8_t *peer = NULL;
    if (rc < 0)
        goto error;
    u = calloc(1, sizeof *u);
    if (!u) {
        rc = cx_err_set(ENOMEM, "ucx: out of memory");
        goto error;
    }
    u->base.ops = &cx_ucx_ops;
    u->sock = sock;
    u->efd = u->epfd = -1;
    u->rxq_tail = &u->rxq;
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
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
                                 .id = AM_ID, .cb = am_cb, .arg = u, .flags = UCP_AM_FLAG_WHOLE_MSG};
    if ((st = ucp_worker_set_am_recv_handler(u->worker, &hp)) != UCS_OK ||
        (st = ucp_worker_get_address(u->worker, &addr, &alen)) != UCS_OK ||
        (st = ucp_worker_get_efd(u->worker, &u->efd)) != UCS_OK) {
        rc = cx_err_set(ENODEV, "ucx: worker setup: %s", ucs_status_string(st));
        goto error;
    }
    uint32_t l32 = (uint32_t)alen, plen;
    if ((rc = cx_fd_write_full(sock, &l32, 4)) < 0 || (rc = cx_fd_write_full(sock, addr, alen)) < 0 ||
        (rc = cx_fd_read_full(sock, &plen, 4)) < 0)
        goto error_wrap;
    if (plen == 0 || plen > (1u << 20)) {
        rc = cx_err_set(EPROTO, "ucx: peer sent a %u-byte worker address", plen);
        goto error;
    }
    peer = malloc(plen);
    if (!peer || (rc = cx_fd_read_full(sock, peer, plen)) < 0) {
        rc = peer ? rc : cx_err_set(ENOMEM, "ucx: out of memory");
        goto error_wrap;
    }
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (ucp_address_t *)peer,
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_err, .arg = u}};
    /* Peer-failure handling only where every transport supports it (UCX 1.13 has it for
     * tcp, not for posix/sysv/self); otherwise the control socket tells us of a dead peer. */
    if (!want_peer_err_mode())
        ep.field_mask &= ~(uint64_t)(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER);
    st = ucp_ep_create(u->worker, &ep, &u->ep);
    if (st != UCS_OK) {
        u->ep = NULL;
        rc = cx_err_set(ECONNREFUSED, "ucx: endpoint to peer: %s", ucs_status_string(st));
        goto error;
    }
    /* wait until both sides have their endpoint before traffic (a byte each way) */
    char b = 1;
    if ((rc = cx_fd_write_full(sock, &b, 1)) < 0 || (rc = cx_fd_read_full(sock, &b, 1)) < 0)
        goto error_wrap;
    free(peer);
    ucp_worker_release_address(u->worker, addr);
    cx_tcp_tune(sock);
    u->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(u->epfd, EPOLL_CTL_ADD, u->efd, &ev);
    ev.events = EPOLLIN | EPOLLRDHUP;
    epoll_ctl(u->epfd, EPOLL_CTL_ADD, sock, &ev);
    *out = &u->base;
    return 0;
error_wrap:
    rc = cx_err_wrap(rc, "ucx: address exchange");
error:
    free(peer);
    if (u && u->worker) {
        if (addr)
            ucp_worker_release_address(u->worker, addr);
        if (u->ep) {
            ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
            ucs_status_ptr_t r = ucp_ep_close_nbx(u->ep, &cp);
            while (r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS)
                ucp_worker_progress(u->worker);
            if (r && !UCS_PTR_IS_ERR(r))
                ucp_request_free(r);
        }
        ucp_worker_destroy(u->worker);
    }
    free(u);
    close(sock);
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

static void send_done(void *req, ucs_status_t st, void *user)
{
    struct tx_item *t = user;
    struct ucx_link *u = t->link;
    if (t->prev)
        t->prev->next = t->next;
    else
        u->txs = t->next;
    if (t->next)
        t->next->prev = t->prev;
    u->inflight--;
    u->inflight_bytes -= t->len;
    if (st != UCS_OK && !u->failed)
        u->failed = -ECONNRESET;
    free(t);
    ucp_request_free(req);
}

static int ucx_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct ucx_link *u = (struct ucx_link *)k;
    if (u->failed)
        return cx_err_set(-u->failed, "ucx: send on a broken link");
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG)
        return cx_err_set(EMSGSIZE, "ucx: message of %zu bytes exceeds %u", len, CX_FRAME_MAX_MSG);
    struct cx_frame_hdr hh = *h;
    hh.length = (uint32_t)len;
    if (!(hh.flags & CX_FRAME_F_FRAG))
        hh.msg_length = (uint32_t)len, hh.frag_offset = 0;
    if (len <= CX_UCX_INLINE && iovcnt == 1) {
        /* eager from the caller's memory if UCX can finish at once; else copy below */
        uint8_t hdr[CX_FRAME_HDR_SIZE];
        cx_frame_encode(&hh, hdr);
        ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                                  .flags = UCP_AM_SEND_FLAG_EAGER};
        ucs_status_ptr_t r = ucp_am_send_nbx(u->ep, AM_ID, hdr, sizeof hdr, iov[0].iov_base, len, &rp);
        if (r == NULL)
            return 0;
        if (UCS_PTR_IS_ERR(r) && UCS_PTR_STATUS(r) != UCS_ERR_NO_RESOURCE)
            return cx_err_set(ECONNRESET, "ucx: send: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        if (!UCS_PTR_IS_ERR(r)) { /* should not happen with FORCE_IMM_CMPL */
            while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(u->worker);
            ucp_request_free(r);
            return 0;
        }
    }
    struct tx_item *t = malloc(sizeof *t + len);
    if (!t)
        return cx_err_set(ENOMEM, "ucx: out of memory for a %zu-byte send", len);
    t->link = u;
    t->len = len;
    cx_frame_encode(&hh, t->hdr);
    cx_iov_copy(t->data, iov, iovcnt, 0, len);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = send_done, .user_data = t};
    ucs_status_ptr_t r = ucp_am_send_nbx(u->ep, AM_ID, t->hdr, sizeof t->hdr, t->data, len, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        free(t);
        return cx_err_set(ECONNRESET, "ucx: send: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    }
    if (r == NULL) {
        free(t);
        return 0;
    }
    t->req = r;
    t->prev = NULL;
    t->next = u->txs;
    if (u->txs)
        u->txs->prev = t;
    u->txs = t;
    u->inflight++;
    u->inflight_bytes += len;
    return 0;
}

static size_t ucx_pending(struct cx_link *k) { return ((struct ucx_link *)k)->inflight_bytes; }

static int peer_gone(struct ucx_link *u)
{
    char b;
    ssize_t r = recv(u->sock, &b, 1, MSG_DONTWAIT | MSG_PEEK);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (!u->failed)
            u->failed = -ECONNRESET;
        return 1;
    }
    return 0;
}

static int ucx_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct ucx_link *u = (struct ucx_link *)k;
    u->fn = fn;
    u->arg = arg;
    u->delivered = 0;
    unsigned inflight = u->inflight;
    int work = 0;
    for (int i = 0; i < budget; i++) {
        unsigned n = ucp_worker_progress(u->worker);
        deliver_ready(u);
        if (!n)
            break;
        work += (int)n;
    }
    work = u->delivered + (u->inflight != inflight);
    u->fn = NULL;
    if (u->failed == -EPROTO || u->failed == -ENOMEM)
        return cx_err_set(-u->failed, "ucx: bad message from peer");
    if (work == 0) {
        if (u->failed || ((++u->empty_polls & 255) == 0 && peer_gone(u)))
            return cx_err_set(-u->failed ? -u->failed : ECONNRESET, "ucx: peer is gone");
    }
    return work;
}

static int ucx_fd(struct cx_link *k) { return ((struct ucx_link *)k)->epfd; }

static int ucx_arm(struct cx_link *k)
{
    struct ucx_link *u = (struct ucx_link *)k;
    if (u->failed || u->rxq || peer_gone(u))
        return -EAGAIN;
    ucs_status_t st = ucp_worker_arm(u->worker);
    return st == UCS_OK ? 0 : -EAGAIN;
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
    u->fn = NULL;
    /* cancel what is still in flight (a dead peer never completes it); the callbacks free
     * the buffers */
    for (struct tx_item *t = u->txs; t; t = t->next) ucp_request_cancel(u->worker, t->req);
    for (struct rx_item *it = u->rxq; it; it = it->next)
        if (!it->ready && it->req)
            ucp_request_cancel(u->worker, it->req);
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(u->ep, &cp);
    for (int i = 0; i < 100000; i++) {
        int busy = r && !UCS_PTR_IS_ERR(r) && ucp_request_check_status(r) == UCS_INPROGRESS;
        for (struct rx_item *it = u->rxq; it && !busy; it = it->next) busy = !it->ready;
        if (!busy && !u->txs)
            break;
        ucp_worker_progress(u->worker);
    }
    if (r && !UCS_PTR_IS_ERR(r))
        ucp_request_free(r);
    deliver_ready(u);
    while (u->rxq) { /* a fetch UCX never finished: leak it rather than risk a late write */
        struct rx_item *it = u->rxq;
        u->rxq = it->next;
        if (it->ready) {
            free(it->data);
            free(it);
        }
    }
    ucp_worker_destroy(u->worker);
    close(u->sock);
    close(u->epfd);
    free(u);
}

const struct cx_driver_ops cx_ucx_ops = {
    .name = "ucx",
    .scheme = "ucx",
    .listen = ucx_listen,
    .listener_addr = ucx_listener_addr,
    .listener_fd = ucx_listener_fd,
    .accept = ucx_accept,
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
