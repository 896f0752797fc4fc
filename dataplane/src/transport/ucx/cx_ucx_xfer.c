/* Send and receive of the ucx driver: UCP active messages whose AM header is the encoded
 * 48-byte frame header and whose data is the payload.
 *
 * Send, by payload size (the caller may reuse its memory when send returns, cx_driver.h):
 *  - up to CX_UCX_INLINE: eager from the caller's memory when UCX can finish at once
 *    (UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL); else copied as below;
 *  - from CX_UCX_ZCOPY_MIN: from the caller's memory, and send waits for completion,
 *    progressing the other links meanwhile (cx_ucx_share.c): by rendezvous when UCX may
 *    have RDMA (UCX registers the memory, the peer fetches or is written into with zero
 *    copy), else eagerly (ucx_link.rndv, cx_ucx.c want_rndv). Not from inside a receive
 *    callback (UCX forbids progress there): copied as below;
 *  - otherwise copied into a buffer of the link's registered pool (cx_ucx_pool.h), sent
 *    from there, the buffer reused when UCX completes; send returns at once.
 * Receive keeps arrival order: an eager message is delivered in place unless one before it
 * is still being fetched (then it is copied and queued); a rendezvous message is fetched
 * into a pool buffer and delivered from there, in place. */
#define _GNU_SOURCE
#include "transport/ucx/cx_ucx_int.h"

#include "common/cx_error.h"
#include "transport/cx_txq.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* > 0 while this thread runs a receive callback of ours: a send from there must not wait
 * (it would progress a worker from inside its own callback) */
static __thread int in_callback;

static void deliver(struct ucx_link *u, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    in_callback++;
    u->fn(u->arg, h, p, n);
    in_callback--;
    u->delivered++;
}

/* ---- receive ---- */

static void rx_free(struct ucx_link *u, struct rx_item *it)
{
    if (it->buf)
        cx_ucx_pool_put(&u->pool, it->buf);
    free(it);
}

static void deliver_ready(struct ucx_link *u)
{
    while (u->rxq && u->rxq->ready) {
        struct rx_item *it = u->rxq;
        u->rxq = it->next;
        if (!u->rxq)
            u->rxq_tail = &u->rxq;
        if (it->status == 0 && u->fn)
            deliver(u, &it->h, it->data, it->h.length); /* in place, in the pool buffer */
        else if (it->status < 0 && !u->failed)
            u->failed = it->status;
        rx_free(u, it);
    }
}

static void fetch_done(void *req, ucs_status_t st, size_t len, void *user)
{
    (void)len;
    struct rx_item *it = user;
    it->ready = 1;
    it->status = st == UCS_OK ? 0 : -ECONNRESET; /* the sender's side failed */
    it->req = NULL;
    if (req)
        ucp_request_free(req);
}

/* Queues a message behind the ones still being fetched: a rendezvous message is fetched
 * into a pool buffer; an eager one is copied (into the item when small, else a pool
 * buffer), since UCX reuses its memory once the AM callback returns. */
static int rx_enqueue(struct ucx_link *u, const struct cx_frame_hdr *h, void *data, size_t len,
                      int rndv)
{
    int pooled = rndv || len > CX_UCX_INLINE;
    struct rx_item *it = calloc(1, sizeof *it + (pooled ? 0 : len));
    if (!it)
        return -ENOMEM;
    if (pooled && cx_ucx_pool_get(&u->pool, len, &it->buf) < 0) {
        free(it);
        return -ENOMEM;
    }
    it->h = *h;
    it->data = pooled ? it->buf->data : it->small;
    *u->rxq_tail = it;
    u->rxq_tail = &it->next;
    if (!rndv) {
        memcpy(it->data, data, len);
        it->ready = 1;
        return 0;
    }
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                              UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH,
                              .cb.recv_am = fetch_done, .user_data = it, .memh = it->buf->memh};
    ucs_status_ptr_t r = ucp_am_recv_data_nbx(u->worker, data, it->data, len, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        it->ready = 1;
        it->status = -ECONNRESET;
    } else if (r == NULL) {
        it->ready = 1;
    } else if (!it->ready) {
        it->req = r;
    }
    return 0;
}

ucs_status_t cx_ucx_am_cb(void *arg, const void *header, size_t hlen, void *data, size_t len,
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
        deliver(u, &h, data, len);
        return UCS_OK;
    }
    if (rx_enqueue(u, &h, data, len, rndv) < 0)
        u->failed = -ENOMEM;
    return UCS_OK;
}

/* ---- send ---- */

static void tx_free(struct ucx_link *u, struct tx_item *t)
{
    if (t->buf)
        cx_ucx_pool_put(&u->pool, t->buf);
    free(t);
}

static void copied_send_done(void *req, ucs_status_t st, void *user)
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
    tx_free(u, t);
    ucp_request_free(req);
}

/* The payload as UCX takes it: contiguous, or its iov datatype (dt has CX_UCX_MAX_IOV). */
static void payload_param(const struct iovec *iov, int iovcnt, size_t len, ucp_dt_iov_t *dt,
                          ucp_request_param_t *rp, const void **buf, size_t *count)
{
    *buf = iovcnt ? iov[0].iov_base : NULL;
    *count = len;
    if (iovcnt > 1) {
        for (int i = 0; i < iovcnt; i++) dt[i] = (ucp_dt_iov_t){iov[i].iov_base, iov[i].iov_len};
        rp->op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
        rp->datatype = ucp_dt_make_iov();
        *buf = dt;
        *count = (size_t)iovcnt;
    }
}

static int send_failed(struct ucx_link *u, ucs_status_t st)
{
    if (!u->failed)
        u->failed = -ECONNRESET;
    return cx_err_set(ECONNRESET, "ucx: send: %s", ucs_status_string(st));
}

/* Eager from the caller's memory if UCX can finish now. 0 = sent, 1 = not now (copy). */
static int send_immediate(struct ucx_link *u, const uint8_t *hdr, const struct iovec *iov,
                          int iovcnt, size_t len)
{
    ucp_dt_iov_t dt[CX_UCX_MAX_IOV];
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL,
                              .flags = UCP_AM_SEND_FLAG_EAGER};
    const void *buf;
    size_t count;
    payload_param(iov, iovcnt, len, dt, &rp, &buf, &count);
    ucs_status_ptr_t r = ucp_am_send_nbx(u->ep, CX_UCX_AM_ID, hdr, CX_FRAME_HDR_SIZE, buf, count, &rp);
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r))
        return UCS_PTR_STATUS(r) == UCS_ERR_NO_RESOURCE ? 1 : send_failed(u, UCS_PTR_STATUS(r));
    /* a request despite FORCE_IMM_CMPL (not expected): finish it, the data is the caller's */
    while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(u->worker);
    ucs_status_t st = ucp_request_check_status(r);
    ucp_request_free(r);
    return st == UCS_OK ? 0 : send_failed(u, st);
}

struct zcopy_wait {
    int done;
    ucs_status_t status;
};

static void zcopy_done(void *req, ucs_status_t st, void *user)
{
    (void)req;
    struct zcopy_wait *w = user;
    w->status = st;
    w->done = 1;
}

/* From the caller's memory, waiting until UCX is done with it: by rendezvous when the link
 * may use RDMA (the peer fetches it with zero copy), else eagerly (UCX writes it into the
 * socket or shared memory; done once written, without the peer's help unless its buffers
 * are full). */
static int send_zcopy_wait(struct ucx_link *u, const uint8_t *hdr, const struct iovec *iov,
                           int iovcnt, size_t len)
{
    ucp_dt_iov_t dt[CX_UCX_MAX_IOV];
    struct zcopy_wait w = {0};
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = zcopy_done, .user_data = &w};
    if (!u->rndv) { /* no RDMA: eager into the socket or shared memory (want_rndv, cx_ucx.c) */
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = UCP_AM_SEND_FLAG_EAGER;
    }
    const void *buf;
    size_t count;
    payload_param(iov, iovcnt, len, dt, &rp, &buf, &count);
    ucs_status_ptr_t r = ucp_am_send_nbx(u->ep, CX_UCX_AM_ID, hdr, CX_FRAME_HDR_SIZE, buf, count, &rp);
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r))
        return send_failed(u, UCS_PTR_STATUS(r));
    int gone = 0;
    for (unsigned idle = 0; !w.done;) {
        if (ucp_worker_progress(u->worker) > 0) {
            idle = 0;
            continue;
        }
        cx_ucx_help_others(u);
        if ((++idle & 4095) == 0 && (u->failed || cx_ucx_peer_gone(u))) {
            /* the peer died: end the endpoint so UCX lets go of the caller's memory */
            gone = 1;
            ucp_request_cancel(u->worker, r);
            cx_ucx_close_ep(u);
            break;
        }
    }
    ucp_request_free(r); /* once completed, or else no callback will touch w any more */
    if (gone) {
        if (!u->failed)
            u->failed = -ECONNRESET;
        return cx_err_set(ECONNRESET, "ucx: peer is gone (during a %zu-byte send)", len);
    }
    return w.status == UCS_OK ? 0 : send_failed(u, w.status);
}

/* Copies the payload (a small one into the request, a large one into a pool buffer) and
 * sends it eagerly: the copy already freed the caller's memory, and UCX's rendezvous
 * (chosen by UCX from about 8-64 KiB on tcp) would make the receiver fetch the data in
 * steps its runtime thread drives between naps: a 64 KiB event took 3-8 ms one way in
 * the channel and pipe layers over ucx, eagerly 0.1-0.25 ms (bench/micro layer_chan and
 * layer_pipe, UCX_TLS=tcp). */
static int send_copied(struct ucx_link *u, const struct cx_frame_hdr *hh, const struct iovec *iov,
                       int iovcnt, size_t len)
{
    int pooled = len > CX_UCX_INLINE;
    struct tx_item *t = malloc(sizeof *t + (pooled ? 0 : len));
    if (!t)
        return cx_err_set(ENOMEM, "ucx: out of memory for a %zu-byte send", len);
    t->link = u;
    t->len = len;
    t->buf = NULL;
    if (pooled) {
        int rc = cx_ucx_pool_get(&u->pool, len, &t->buf);
        if (rc < 0) {
            free(t);
            return rc;
        }
    }
    uint8_t *data = pooled ? t->buf->data : t->small;
    cx_frame_encode(hh, t->hdr);
    cx_iov_copy(data, iov, iovcnt, 0, len);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                              UCP_OP_ATTR_FIELD_FLAGS,
                              .cb.send = copied_send_done, .user_data = t,
                              .flags = UCP_AM_SEND_FLAG_EAGER};
    if (pooled) {
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        rp.memh = t->buf->memh;
    }
    ucs_status_ptr_t r = ucp_am_send_nbx(u->ep, CX_UCX_AM_ID, t->hdr, sizeof t->hdr, data, len, &rp);
    if (UCS_PTR_IS_ERR(r)) {
        tx_free(u, t);
        return send_failed(u, UCS_PTR_STATUS(r));
    }
    if (r == NULL) {
        tx_free(u, t);
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

int cx_ucx_send_msg(struct ucx_link *u, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    if (u->failed)
        return cx_err_set(-u->failed, "ucx: send on a broken link");
    if (!u->ep)
        return cx_err_set(ECONNRESET, "ucx: send on a link whose peer is gone");
    if (iovcnt < 0 || (iovcnt > 0 && !iov))
        return cx_err_set(EINVAL, "ucx: send with a bad iovec (%d entries)", iovcnt);
    size_t len = cx_iov_len(iov, iovcnt);
    if (len > CX_FRAME_MAX_MSG)
        return cx_err_set(EMSGSIZE, "ucx: message of %zu bytes exceeds %u", len, CX_FRAME_MAX_MSG);
    struct cx_frame_hdr hh = *h;
    hh.length = (uint32_t)len;
    if (!(hh.flags & CX_FRAME_F_FRAG))
        hh.msg_length = (uint32_t)len, hh.frag_offset = 0;
    uint8_t hdr[CX_FRAME_HDR_SIZE];
    if (iovcnt <= CX_UCX_MAX_IOV) {
        if (len <= CX_UCX_INLINE) {
            cx_frame_encode(&hh, hdr);
            int rc = send_immediate(u, hdr, iov, iovcnt, len);
            if (rc <= 0)
                return rc;
        } else if (len >= CX_UCX_ZCOPY_MIN && !in_callback) {
            cx_frame_encode(&hh, hdr);
            return send_zcopy_wait(u, hdr, iov, iovcnt, len);
        }
    }
    return send_copied(u, &hh, iov, iovcnt, len);
}

/* ---- progress ---- */

int cx_ucx_peer_gone(struct ucx_link *u)
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

int cx_ucx_progress_link(struct ucx_link *u, cx_recv_fn fn, void *arg, int budget)
{
    cx_ucx_unkick(u);
    u->armed = 0;
    u->fn = fn;
    u->arg = arg;
    u->delivered = 0;
    unsigned inflight = u->inflight;
    deliver_ready(u); /* what a waiting send or a helper queued */
    for (int i = 0; i < budget; i++) {
        unsigned n = ucp_worker_progress(u->worker);
        deliver_ready(u);
        if (!n)
            break;
    }
    int work = u->delivered + (u->inflight != inflight);
    u->fn = NULL;
    if (u->failed == -EPROTO)
        return cx_err_set(EPROTO, "ucx: bad message from peer (header not a valid frame)");
    if (u->failed == -ENOMEM)
        return cx_err_set(ENOMEM, "ucx: out of memory for a received message");
    if (work == 0 && (u->failed || ((++u->empty_polls & 255) == 0 && cx_ucx_peer_gone(u))))
        return cx_err_set(-u->failed ? -u->failed : ECONNRESET, "ucx: peer is gone");
    return work;
}

/* ---- teardown ---- */

void cx_ucx_close_ep(struct ucx_link *u)
{
    if (!u->ep)
        return;
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE};
    ucs_status_ptr_t r = ucp_ep_close_nbx(u->ep, &cp);
    u->ep = NULL;
    for (int i = 0; i < 100000 && r && !UCS_PTR_IS_ERR(r) &&
                    ucp_request_check_status(r) == UCS_INPROGRESS; i++)
        ucp_worker_progress(u->worker);
    if (r && !UCS_PTR_IS_ERR(r))
        ucp_request_free(r);
}

void cx_ucx_drain(struct ucx_link *u)
{
    u->fn = NULL;
    /* cancel what is still in flight (a dead peer never completes it); the callbacks free
     * the buffers */
    for (struct tx_item *t = u->txs; t; t = t->next) ucp_request_cancel(u->worker, t->req);
    for (struct rx_item *it = u->rxq; it; it = it->next)
        if (!it->ready && it->req)
            ucp_request_cancel(u->worker, it->req);
    cx_ucx_close_ep(u);
    for (int i = 0; i < 100000; i++) {
        int busy = u->txs != NULL;
        for (struct rx_item *it = u->rxq; it && !busy; it = it->next) busy = !it->ready;
        if (!busy)
            break;
        ucp_worker_progress(u->worker);
    }
    deliver_ready(u);
    while (u->rxq) { /* a fetch UCX never finished: leak it rather than risk a late write */
        struct rx_item *it = u->rxq;
        u->rxq = it->next;
        if (it->ready)
            rx_free(u, it);
    }
    /* a send UCX never finished stays in u->txs: leaked with its buffer, for the same reason */
}
