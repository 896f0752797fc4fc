/* Control messages between runtimes. They are Conflux-format events themselves (struct
 * chan_ctrl, a registered format), so they get the same checks as any event: a malformed
 * or lying message is rejected by cx_decode, never trusted. They travel in CX_FRAME_CTRL
 * frames on mux tag 0; format descriptions travel in CX_FRAME_FORMAT frames (F_REPLY set:
 * a description; clear: a request for the token in the header). */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"
#include "format/cx_format_registry.h"

#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cx_field ctrl_fields[] = {
    {"op", "uint32", 4, offsetof(struct chan_ctrl, op), NULL},
    {"role", "uint32", 4, offsetof(struct chan_ctrl, role), NULL},
    {"status", "int32", 4, offsetof(struct chan_ctrl, status), NULL},
    {"tag", "uint32", 4, offsetof(struct chan_ctrl, tag), NULL},
    {"mode", "uint32", 4, offsetof(struct chan_ctrl, mode), NULL},
    {"qlimit", "uint32", 4, offsetof(struct chan_ctrl, qlimit), NULL},
    {"token", "uint64", 8, offsetof(struct chan_ctrl, token), NULL},
    {"req", "uint64", 8, offsetof(struct chan_ctrl, req), NULL},
    {"chan", "string", sizeof(char *), offsetof(struct chan_ctrl, chan), NULL},
    {"addr", "string", sizeof(char *), offsetof(struct chan_ctrl, addr), NULL},
    {"filter", "string", sizeof(char *), offsetof(struct chan_ctrl, filter), NULL},
    {"text", "string", sizeof(char *), offsetof(struct chan_ctrl, text), NULL},
    {NULL, NULL, 0, 0, NULL},
};
static const struct cx_struct_decl ctrl_decl[] = {
    {"conflux_channel_ctrl", ctrl_fields, sizeof(struct chan_ctrl)}, {NULL, NULL, 0}};

static const struct cx_format *ctrl_fmt;
static pthread_once_t ctrl_once = PTHREAD_ONCE_INIT;
static int ctrl_rc;
static char ctrl_err[CHAN_ERR_MAX];

static void ctrl_setup(void)
{
    struct cx_format *f;
    if ((ctrl_rc = cx_format_create(ctrl_decl, NULL, &f)) == 0)
        ctrl_rc = cx_format_registry_insert(f, &ctrl_fmt);
    if (ctrl_rc < 0)
        snprintf(ctrl_err, sizeof ctrl_err, "%s", cx_errmsg());
}

int chan_ctrl_init(void)
{
    pthread_once(&ctrl_once, ctrl_setup);
    return ctrl_rc < 0 ? cx_err_set(-ctrl_rc, "channel: control format: %s", ctrl_err) : 0;
}

static int ctrl_encode(const struct chan_ctrl *m, struct cx_frame_hdr *h, uint8_t **buf,
                       size_t *len);

int chan_ctrl_post(struct chan_peer *p, const struct chan_ctrl *m)
{
    struct cx_frame_hdr h;
    uint8_t *buf;
    size_t len;
    int rc = ctrl_encode(m, &h, &buf, &len);
    if (rc < 0)
        return rc;
    rc = chan_peer_post(p, &h, buf, len);
    free(buf);
    return rc;
}

/* The encoded form of m in a malloc'd buffer. 0 or -errno. */
static int ctrl_encode(const struct chan_ctrl *m, struct cx_frame_hdr *h, uint8_t **buf,
                       size_t *len)
{
    struct cx_enc enc;
    int rc = cx_encode(ctrl_fmt, m, &enc);
    if (rc < 0)
        return rc;
    if (!(*buf = malloc(enc.length + 8)))
        return cx_err_set(ENOMEM, "channel: out of memory");
    long n = cx_enc_gather(&enc, *buf, enc.length + 8);
    if (n < 0) {
        free(*buf);
        return (int)n;
    }
    *h = (struct cx_frame_hdr){.type = CX_FRAME_CTRL, .format = enc.token};
    *len = (size_t)n;
    return 0;
}

/* Decodes a CTRL frame into out (pointers into *buf, which the caller frees). 0 or -1. */
union ctrl_out {
    struct chan_ctrl c;
    uint64_t align[sizeof(struct chan_ctrl) / 8 + 1];
};
static int ctrl_decode(const struct cx_frame_hdr *h, const void *payload, size_t len,
                       uint64_t **buf, union ctrl_out *out, const struct chan_ctrl **m)
{
    /* decode rewrites pointers in place: work on a private, aligned copy */
    if (!(*buf = malloc(len + 8)))
        return -1;
    memcpy(*buf, payload, len);
    void *ev;
    if (cx_decode(ctrl_fmt, h->format, *buf, len, out, sizeof *out, &ev) < 0)
        return -1;
    *m = ev;
    return 0;
}

struct links_wait {
    int got;
    char *fabric, *ucx;
};

static void links_frame(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct links_wait *w = arg;
    uint64_t *buf = NULL;
    union ctrl_out out;
    const struct chan_ctrl *m;
    if (h->type == CX_FRAME_CTRL && h->channel == 0 &&
        ctrl_decode(h, payload, len, &buf, &out, &m) == 0 && m->op == CTRL_LINKS &&
        (!m->text || strlen(m->text) < CHAN_FABRIC_MAX) &&
        (!m->addr || strlen(m->addr) < CHAN_ADDR_MAX)) {
        snprintf(w->fabric, CHAN_FABRIC_MAX, "%s", m->text ? m->text : "");
        snprintf(w->ucx, CHAN_ADDR_MAX, "%s", m->addr ? m->addr : "");
        w->got = 1;
    }
    free(buf); /* nothing else comes before our HELLO */
}

int chan_links_ask(struct cx_chan_ctx *ctx, struct cx_link *k, int timeout_ms,
                   char fabric[CHAN_FABRIC_MAX], char ucx[CHAN_ADDR_MAX])
{
    struct chan_ctrl q = {.op = CTRL_LINKS_QUERY, .addr = ctx->addr, .text = ctx->fabric};
    struct cx_frame_hdr h;
    uint8_t *buf;
    size_t len;
    int rc = ctrl_encode(&q, &h, &buf, &len);
    if (rc < 0)
        return rc;
    struct iovec v = {buf, len};
    rc = cx_link_send(k, &h, &v, 1);
    free(buf);
    if (rc < 0)
        return rc;
    struct links_wait w = {.fabric = fabric, .ucx = ucx};
    long long deadline = chan_now_ms() + timeout_ms;
    while (!w.got) {
        if ((rc = cx_link_progress(k, links_frame, &w, 8)) < 0)
            return rc;
        if (w.got)
            break;
        long long left = deadline - chan_now_ms();
        if (left <= 0)
            return cx_err_set(ETIMEDOUT, "channel: no CTRL_LINKS answer within %d ms", timeout_ms);
        struct pollfd pf = {.fd = cx_link_fd(k), .events = POLLIN};
        poll(&pf, 1, left < 20 ? (int)left : 20); /* short: a send may still be flushing */
    }
    return 0;
}

int chan_format_post(struct chan_peer *p, const struct cx_format *fmt)
{
    size_t len;
    const uint8_t *d = cx_format_describe(fmt, &len);
    struct cx_frame_hdr h = {.type = CX_FRAME_FORMAT, .flags = CX_FRAME_F_REPLY,
                             .format = cx_format_token(fmt)};
    return chan_peer_post(p, &h, d, len);
}

/* A description arrived: register it (checked: it must hash to the token it came with). */
static void format_recv(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                        size_t len)
{
    if (!(h->flags & CX_FRAME_F_REPLY)) { /* a request: answer with what we know */
        const struct cx_format *f = cx_format_registry_lookup(h->format);
        size_t dl = 0;
        const uint8_t *d = f ? cx_format_describe(f, &dl) : NULL;
        struct cx_frame_hdr r = {.type = CX_FRAME_FORMAT, .flags = CX_FRAME_F_REPLY,
                                 .format = h->format};
        struct iovec v = {(void *)d, dl};
        if (cx_link_send(p->link, &r, &v, d ? 1 : 0) < 0)
            chan_peer_mark_failed(p, -EPIPE);
        if (f) {
            pthread_mutex_lock(&p->ctx->lock);
            chan_peer_pushed(p, h->format);
            pthread_mutex_unlock(&p->ctx->lock);
        }
        return;
    }
    if (!len || cx_format_registry_lookup(h->format))
        return;
    struct cx_format *f;
    if (cx_format_from_description(payload, len, &f) < 0)
        return; /* malformed: events of that token will fail to decode and be counted */
    if (cx_format_token(f) != h->format) {
        cx_format_free(f);
        return;
    }
    cx_format_registry_insert(f, NULL);
}

static const char *S(const char *s) { return s ? s : ""; }

/* Fields a message must carry, and their bounds. */
static int ctrl_valid(const struct chan_ctrl *m)
{
    switch (m->op) {
    case CTRL_HELLO:
        return m->addr && strlen(m->addr) < CHAN_ADDR_MAX;
    case CTRL_JOIN_REPLY:
        return 1;
    case CTRL_JOIN:
    case CTRL_MEMBER_ADD:
    case CTRL_MEMBER_DEL:
    case CTRL_LEAVE:
        return m->chan && strlen(m->chan) < CHAN_ID_MAX && m->addr &&
               strlen(m->addr) < CHAN_ADDR_MAX && m->role <= CHAN_SINK;
    case CTRL_FILTER_ERR:
        return m->chan && strlen(m->chan) < CHAN_ID_MAX;
    case CTRL_LINKS_QUERY:
    case CTRL_SYNC:
    case CTRL_SYNC_REPLY:
    case CTRL_BYE:
        return 1;
    }
    return 0;
}

static void ctrl_recv(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                      size_t len)
{
    struct cx_chan_ctx *ctx = p->ctx;
    uint64_t *buf = NULL;
    union ctrl_out out;
    const struct chan_ctrl *m;
    if (ctrl_decode(h, payload, len, &buf, &out, &m) < 0 || !ctrl_valid(m)) {
        free(buf);
        return;
    }
    struct cx_chan *ch;
    pthread_mutex_lock(&ctx->lock);
    switch (m->op) {
    case CTRL_HELLO:
        if (!p->addr[0])
            snprintf(p->addr, sizeof p->addr, "%s", m->addr);
        break;
    case CTRL_LINKS_QUERY: { /* a dialer in a fabric asks which links we offer */
        struct chan_ctrl a = {.op = CTRL_LINKS, .text = ctx->fabric, .addr = ctx->ucx_addr};
        chan_ctrl_post(p, &a);
        break;
    }
    case CTRL_SYNC: { /* every earlier frame of this link was handled: say so */
        struct chan_ctrl a = {.op = CTRL_SYNC_REPLY, .req = m->req,
                              .token = __atomic_load_n(&p->rx_events, __ATOMIC_RELAXED)};
        chan_ctrl_post(p, &a);
        break;
    }
    case CTRL_SYNC_REPLY:
        for (struct chan_req *r = ctx->reqs; r; r = r->next)
            if (r->id == m->req && r->peer == p && !r->done) {
                r->done = 1;
                r->sync_rx = m->token;
            }
        break;
    case CTRL_BYE: /* kept until the link breaks (chan_linger_bye) */
        p->bye_rx = m->token;
        p->said_bye = 1;
        break;
    case CTRL_JOIN:
        chan_contact_join(ctx, p, m);
        break;
    case CTRL_LEAVE:
        chan_contact_leave(ctx, p, m);
        break;
    case CTRL_JOIN_REPLY:
        for (struct chan_req *r = ctx->reqs; r; r = r->next)
            if (r->id == m->req && !r->done) {
                r->done = 1;
                r->status = m->status;
                snprintf(r->text, sizeof r->text, "%s", S(m->text));
                r->token = m->token;
                r->mode = m->mode;
                r->qlimit = m->qlimit;
            }
        break;
    case CTRL_MEMBER_ADD:
        if ((ch = chan_find(ctx, m->chan))) {
            if (ch->state == 0) { /* the list comes before our JOIN's reply */
                ch->mode = m->mode ? CX_CHAN_RELIABLE : CX_CHAN_BEST_EFFORT;
                ch->qlimit = m->qlimit;
            }
            chan_member_add(ch, m->addr, m->tag, m->role, m->filter, m->token);
        }
        break;
    case CTRL_MEMBER_DEL:
        if ((ch = chan_find(ctx, m->chan)))
            chan_member_del(ch, m->addr, m->tag, 0);
        break;
    case CTRL_FILTER_ERR:
        if ((ch = chan_find(ctx, m->chan)))
            for (struct cx_chan_sink *k = ch->sinks; k; k = k->next)
                if (k->ep && k->ep->tag == m->tag)
                    snprintf(k->err, sizeof k->err, "source at %s: %s", p->addr, S(m->text));
        break;
    }
    pthread_cond_broadcast(&ctx->cv);
    pthread_mutex_unlock(&ctx->lock);
    free(buf);
}

void chan_frame_recv(struct chan_peer *p, const struct cx_frame_hdr *h, const void *payload,
                     size_t len)
{
    switch (h->type) {
    case CX_FRAME_CTRL:
        ctrl_recv(p, h, payload, len);
        break;
    case CX_FRAME_FORMAT:
        format_recv(p, h, payload, len);
        break;
    case CX_FRAME_DATA: { /* a tag this link has not bound yet (see sync_mux) */
        pthread_mutex_lock(&p->ctx->lock);
        struct chan_ep *ep = chan_ep_find(p->ctx, h->channel);
        pthread_mutex_unlock(&p->ctx->lock);
        if (ep)
            chan_ep_recv(ep, h, payload, len);
        break;
    }
    default:
        break;
    }
}
