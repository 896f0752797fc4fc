/* The space client (cx_space_client.h): requests with blocking replies, writers' appends
 * with background acks, readers' segment queues, all over one link driven by the caller. */
#include "space/cx_space_client.h"

#include "common/cx_error.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "transport/cx_driver.h"

#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_EVENTS 32 /* pushes queued per writer handle; beyond, news is dropped */

struct qseg {
    struct qseg *next;
    uint64_t id, format;
    uint32_t len;
    int end;
    uint8_t data[];
};

struct chandle {
    uint32_t id;
    int writer;
    uint64_t acked;
    int err;            /* a refused segment, an error pushed by the server */
    char errmsg[256];
    struct qseg *head, *tail;
    int ended;          /* reader: END queued */
    struct cx_space_event ev[MAX_EVENTS];
    int nev;
};

struct cx_space_client {
    pthread_mutex_t mu;
    struct cx_link *link;
    char addr[160];
    uint64_t next_seq;
    uint32_t next_handle;
    struct chandle *h;
    size_t nh, caph;
    /* the reply being waited for */
    uint64_t want_seq;
    uint8_t *reply;
    size_t reply_len;
    int got_reply;
    int dead; /* the link failed: every call fails with it */
    char dead_msg[256];
    unsigned lazy; /* calls since the last pump (pump_lazy) */
};

static struct cx_space_client *g_format_client;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct chandle *hfind(struct cx_space_client *c, uint32_t id)
{
    for (size_t i = 0; i < c->nh; i++)
        if (c->h[i].id == id)
            return &c->h[i];
    return NULL;
}

static struct chandle *hadd(struct cx_space_client *c, int writer)
{
    if (c->nh == c->caph) {
        size_t cap = c->caph ? c->caph * 2 : 4;
        struct chandle *n = realloc(c->h, cap * sizeof *n);
        if (!n)
            return NULL;
        c->h = n;
        c->caph = cap;
    }
    struct chandle *h = &c->h[c->nh++];
    memset(h, 0, sizeof *h);
    h->id = ++c->next_handle;
    h->writer = writer;
    return h;
}

static void hdrop(struct cx_space_client *c, struct chandle *h)
{
    for (struct qseg *q = h->head, *n; q; q = n) {
        n = q->next;
        free(q);
    }
    *h = c->h[--c->nh];
}

/* ---- incoming frames --------------------------------------------------------------- */

static void on_push(struct cx_space_client *c, const struct cx_frame_hdr *h, const uint8_t *p, size_t len)
{
    struct chandle *hd = hfind(c, h->channel);
    struct cx_sp_reply r;
    if (!hd || cx_sp_decode_reply(p, len, &r) < 0)
        return;
    if (r.status < 0) {
        if (!hd->err) { /* the first refusal is the cause; later ones (gaps) follow from it */
            hd->err = r.status;
            snprintf(hd->errmsg, sizeof hd->errmsg, "%.*s", r.error.len, r.error.p);
        }
    } else if ((r.op == CX_SP_READER_JOINED || r.op == CX_SP_READER_HELD ||
                (r.op == CX_SP_READER_MOVED && r.pipe.naddrs == 2)) &&
               r.pipe.naddrs && hd->nev < MAX_EVENTS) {
        struct cx_space_event *e = &hd->ev[hd->nev];
        memset(e, 0, sizeof *e);
        e->op = r.op;
        e->hold_ms = r.hold_ms;
        if (cx_sp_str_copy(r.pipe.addrs[0], e->addr, sizeof e->addr) == 0 &&
            (r.op != CX_SP_READER_MOVED || cx_sp_str_copy(r.pipe.addrs[1], e->addr2, sizeof e->addr2) == 0))
            hd->nev++;
    }
}

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct cx_space_client *c = arg;
    if ((h->type == CX_FRAME_LOOKUP || h->type == CX_FRAME_FORMAT) && (h->flags & CX_FRAME_F_REPLY)) {
        if (h->seq == 0) {
            on_push(c, h, payload, len);
        } else if (h->seq == c->want_seq && !c->got_reply) {
            free(c->reply);
            c->reply = malloc(len ? len : 1);
            if (c->reply)
                memcpy(c->reply, payload, len);
            c->reply_len = len;
            c->got_reply = 1;
        }
        return;
    }
    struct chandle *hd = hfind(c, h->channel);
    if (!hd)
        return; /* a handle we stopped: stragglers are dropped */
    if (h->type == CX_FRAME_ACK && (h->flags & CX_FRAME_F_ACK)) {
        if (h->ack > hd->acked)
            hd->acked = h->ack;
    } else if (h->type == CX_FRAME_DATA && !hd->writer) {
        struct qseg *q = malloc(sizeof *q + len);
        if (!q) {
            hd->err = -ENOMEM;
            snprintf(hd->errmsg, sizeof hd->errmsg, "no memory for a %zu-byte segment", len);
            return;
        }
        q->next = NULL;
        q->id = h->seq;
        q->format = h->format;
        q->len = (uint32_t)len;
        q->end = (h->flags & CX_FRAME_F_END) != 0;
        memcpy(q->data, payload, len);
        if (hd->tail)
            hd->tail->next = q;
        else
            hd->head = q;
        hd->tail = q;
    }
}

/* Drives the link once, waiting up to wait_ms for input when there was nothing to do. */
static int pump(struct cx_space_client *c, int wait_ms)
{
    if (c->dead)
        return cx_err_set(ECONNRESET, "%s", c->dead_msg);
    c->lazy = 0;
    int n = cx_link_progress(c->link, on_frame, c, 256);
    if (n < 0) {
        c->dead = 1;
        snprintf(c->dead_msg, sizeof c->dead_msg, "space %s: connection lost: %s", c->addr, cx_errmsg());
        return cx_err_set(ECONNRESET, "%s", c->dead_msg);
    }
    if (n == 0 && wait_ms > 0 && cx_link_arm(c->link) == 0) {
        struct pollfd pf = {.fd = cx_link_fd(c->link), .events = POLLIN};
        if (pf.fd >= 0)
            poll(&pf, 1, wait_ms);
    }
    return n;
}

/* The per-segment calls (append, acked, next_reader) collect acks, refusals and pushes
 * every PUMP_EVERY calls rather than each time: a receive that finds nothing costs a
 * system call per segment. What they report is then at most that many calls old; the
 * waiting calls (wait_acked, requests) pump every time. */
#define PUMP_EVERY 16
static int pump_lazy(struct cx_space_client *c)
{
    if (c->dead || ++c->lazy >= PUMP_EVERY)
        return pump(c, 0);
    return 0;
}

/* Sends a request and waits for its reply; decodes it into *r (payload kept in c->reply
 * until the next request). Server errors become this call's error. */
static int call(struct cx_space_client *c, uint8_t type, const struct cx_sp_request *q,
                struct cx_sp_reply *r, int timeout_ms)
{
    struct cx_sp_buf b = {0};
    int rc = cx_sp_encode_request(&b, q);
    if (rc < 0) {
        cx_sp_buf_free(&b);
        return rc;
    }
    struct cx_frame_hdr h = {.type = type, .seq = ++c->next_seq};
    struct iovec iov = {b.p, b.len};
    c->want_seq = h.seq;
    c->got_reply = 0;
    rc = c->dead ? pump(c, 0) : cx_link_send(c->link, &h, &iov, 1);
    cx_sp_buf_free(&b);
    if (rc < 0)
        return cx_err_wrap(rc, "space %s", c->addr);
    double end = now_ms() + timeout_ms;
    while (!c->got_reply) {
        double left = end - now_ms();
        if (left <= 0)
            return cx_err_set(ETIMEDOUT, "space %s: no reply to %s in %d ms", c->addr,
                              cx_sp_op_name(q->op), timeout_ms);
        if ((rc = pump(c, left > 50 ? 50 : (int)left + 1)) < 0)
            return rc;
    }
    c->want_seq = 0;
    if ((rc = cx_sp_decode_reply(c->reply, c->reply_len, r)) < 0)
        return cx_err_wrap(rc, "space %s", c->addr);
    if (r->status < 0)
        return cx_err_set(-r->status, "%.*s", r->error.len, r->error.p);
    return 0;
}

static void info_from(const struct cx_sp_pipe *p, struct cx_space_pipe_info *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->pipe_id = p->pipe_id;
    out->format = p->format;
    out->first_id = p->first_id;
    out->last_id = p->last_id;
    out->ended = p->ended;
    out->writer_open = p->writer_open;
    for (int i = 0; i < p->naddrs && i < CX_SP_MAX_ADDRS; i++)
        if (cx_sp_str_copy(p->addrs[i], out->addrs[out->naddrs], sizeof out->addrs[0]) == 0)
            out->naddrs++;
}

static struct cx_sp_str S(const char *s)
{
    return (struct cx_sp_str){s ? s : "", (uint16_t)(s ? strnlen(s, UINT16_MAX) : 0)};
}

/* ---- public calls ------------------------------------------------------------------ */

int cx_space_connect(const char *addr, struct cx_space_client **out)
{
    if (!addr || !out)
        return cx_err_set(EINVAL, "space client: connect needs an address and a result pointer");
    struct cx_space_client *c = calloc(1, sizeof *c);
    if (!c)
        return cx_err_set(ENOMEM, "space client");
    int rc = cx_connect(addr, &c->link);
    if (rc < 0) {
        free(c);
        return cx_err_wrap(rc, "space %s", addr);
    }
    /* a first frame at once: a server closes connections that stay silent past its
     * first-frame deadline (servers ignore a client's CTRL frames) */
    struct cx_frame_hdr hello = {.type = CX_FRAME_CTRL};
    if ((rc = cx_link_send(c->link, &hello, NULL, 0)) < 0) {
        cx_link_close(c->link);
        free(c);
        return cx_err_wrap(rc, "space %s", addr);
    }
    pthread_mutex_init(&c->mu, NULL);
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    *out = c;
    return 0;
}

void cx_space_disconnect(struct cx_space_client *c)
{
    if (!c)
        return;
    if (g_format_client == c) {
        cx_format_registry_set_fetch(NULL, NULL);
        g_format_client = NULL;
    }
    while (c->nh)
        hdrop(c, &c->h[0]);
    cx_link_close(c->link);
    pthread_mutex_destroy(&c->mu);
    free(c->h);
    free(c->reply);
    free(c);
}

/* Runs expr under the client's lock; a NULL client (or a missing argument: ok false) is
 * -EINVAL with a message naming the call, never a crash. */
#define LOCKED_IF(c, ok, expr)                                                              \
    ({                                                                                     \
        __typeof__(expr) r_;                                                               \
        if (!(c) || !(ok)) {                                                               \
            r_ = cx_err_set(EINVAL, "%s: %s", __func__,                                    \
                            (c) ? "a required pointer argument is NULL" : "no client (NULL)"); \
        } else {                                                                           \
            pthread_mutex_lock(&(c)->mu);                                                  \
            r_ = (expr);                                                                   \
            pthread_mutex_unlock(&(c)->mu);                                                \
        }                                                                                  \
        r_;                                                                                \
    })
#define LOCKED(c, expr) LOCKED_IF(c, 1, expr)

static int name_call(struct cx_space_client *c, uint8_t op, const char *name, uint64_t format,
                     const char *addr, struct cx_space_pipe_info *out)
{
    struct cx_sp_request q = {.op = op, .name = S(name), .format = format, .addr = S(addr)};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc == 0)
        info_from(&r.pipe, out);
    return rc;
}

int cx_space_lookup(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *out)
{
    return LOCKED(c, name_call(c, CX_SP_LOOKUP, name, 0, NULL, out));
}

int cx_space_get(struct cx_space_client *c, const char *name, uint64_t format,
                 const char *reader_addr, struct cx_space_pipe_info *out)
{
    return LOCKED(c, name_call(c, CX_SP_GET, name, format, reader_addr, out));
}

int cx_space_unlink(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *out)
{
    return LOCKED(c, name_call(c, CX_SP_UNLINK, name, 0, NULL, out));
}

static int stats_locked(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *info,
                        struct cx_space_pipe_stats *out)
{
    struct cx_sp_request q = {.op = CX_SP_STATS, .name = S(name)};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    if (info)
        info_from(&r.pipe, info);
    memset(out, 0, sizeof *out);
    out->readers = r.stats.readers;
    out->bytes = r.stats.bytes;
    out->segments = r.stats.segments;
    for (uint16_t i = 0; i < r.stats.nlinks && i < CX_SP_MAX_LINKS; i++) {
        /* a transport name too long for the struct is cut, never refused: it is a label */
        size_t n = r.stats.links[i].transport.len;
        if (n >= sizeof out->links[0].transport)
            n = sizeof out->links[0].transport - 1;
        memcpy(out->links[out->nlinks].transport, r.stats.links[i].transport.p, n);
        out->links[out->nlinks].transport[n] = 0;
        out->links[out->nlinks++].count = r.stats.links[i].count;
    }
    return 0;
}

int cx_space_stats(struct cx_space_client *c, const char *name, struct cx_space_pipe_info *info,
                   struct cx_space_pipe_stats *out)
{
    if (!out)
        return cx_err_set(EINVAL, "cx_space_stats: no result struct");
    return LOCKED(c, stats_locked(c, name, info, out));
}

static long list_locked(struct cx_space_client *c,
                        void (*fn)(void *, const char *, uint64_t, uint64_t), void *arg)
{
    struct cx_sp_request q = {.op = CX_SP_LIST};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    size_t off = 0;
    struct cx_sp_str name;
    uint64_t id, fmt;
    char buf[CX_SP_ADDR_MAX + 1];
    while ((rc = cx_sp_list_next(&r, &off, &name, &id, &fmt)) == 1)
        if (fn && cx_sp_str_copy(name, buf, sizeof buf) == 0)
            fn(arg, buf, id, fmt);
    return rc < 0 ? rc : (long)r.count;
}

long cx_space_list(struct cx_space_client *c,
                   void (*fn)(void *arg, const char *name, uint64_t pipe_id, uint64_t format), void *arg)
{
    return LOCKED(c, list_locked(c, fn, arg));
}

static int cursor_call(struct cx_space_client *c, const struct cx_sp_request *q, uint64_t *pos,
                       void (*fn)(void *, const char *, uint64_t), void *arg)
{
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    if (pos)
        *pos = r.token;
    if (q->op != CX_SP_CURSOR_LIST)
        return 0;
    size_t off = 0;
    struct cx_sp_str name;
    uint64_t p;
    char buf[CX_SP_ADDR_MAX + 1];
    while ((rc = cx_sp_cursor_next(&r, &off, &name, &p)) == 1)
        if (fn && cx_sp_str_copy(name, buf, sizeof buf) == 0)
            fn(arg, buf, p);
    return rc < 0 ? rc : (int)r.count;
}

int cx_space_cursor_set(struct cx_space_client *c, const char *name, uint64_t pipe_id,
                        const char *cursor, uint64_t pos)
{
    struct cx_sp_request q = {.op = CX_SP_CURSOR_SET, .name = S(name), .pipe_id = pipe_id,
                              .cursor = S(cursor), .from_id = pos};
    return LOCKED(c, cursor_call(c, &q, NULL, NULL, NULL));
}

int cx_space_cursor_get(struct cx_space_client *c, const char *name, const char *cursor, uint64_t *pos)
{
    struct cx_sp_request q = {.op = CX_SP_CURSOR_GET, .name = S(name), .cursor = S(cursor)};
    return LOCKED(c, cursor_call(c, &q, pos, NULL, NULL));
}

long cx_space_cursor_list(struct cx_space_client *c, const char *name,
                          void (*fn)(void *arg, const char *cursor, uint64_t pos), void *arg)
{
    struct cx_sp_request q = {.op = CX_SP_CURSOR_LIST, .name = S(name)};
    return LOCKED(c, cursor_call(c, &q, NULL, fn, arg));
}

static int group_call(struct cx_space_client *c, const struct cx_sp_request *q, struct cx_sp_reply *r,
                      struct cx_space_group_seg *seg)
{
    memset(r, 0, sizeof *r);
    int rc = call(c, CX_FRAME_LOOKUP, q, r, CX_SPACE_TIMEOUT_MS);
    if (rc == -EPIPE && !(r->op == q->op && r->status == -EPIPE)) /* a broken connection, not */
        rc = cx_err_set(ECONNRESET, "space %s: connection broken", c->addr); /* the pipe's end */
    if (rc < 0 || !seg)
        return rc;
    *seg = (struct cx_space_group_seg){.pos = r->pos, .format = r->format, .deliveries = r->count,
                                       .len = r->blob_len};
    seg->data = malloc(r->blob_len ? r->blob_len : 1);
    if (!seg->data)
        return cx_err_set(ENOMEM, "group segment of %u bytes", r->blob_len);
    if (r->blob_len)
        memcpy(seg->data, r->blob, r->blob_len);
    return 0;
}

int cx_space_group_join(struct cx_space_client *c, const char *name, const char *group,
                        uint32_t ack_wait_ms, uint64_t *member, uint64_t *floor)
{
    struct cx_sp_request q = {.op = CX_SP_GROUP_JOIN, .name = S(name), .cursor = S(group),
                              .hold_ms = ack_wait_ms};
    struct cx_sp_reply r;
    int rc = LOCKED(c, group_call(c, &q, &r, NULL));
    if (rc == 0) {
        *member = r.token;
        if (floor)
            *floor = r.pos;
    }
    return rc;
}

int cx_space_group_next(struct cx_space_client *c, const char *name, const char *group, uint64_t member,
                        struct cx_space_group_seg *seg)
{
    struct cx_sp_request q = {.op = CX_SP_GROUP_NEXT, .name = S(name), .cursor = S(group), .token = member};
    struct cx_sp_reply r;
    return LOCKED(c, group_call(c, &q, &r, seg));
}

int cx_space_group_ack(struct cx_space_client *c, const char *name, const char *group, uint64_t member,
                       const uint64_t *pos, size_t n)
{
    if (n > CX_SP_GROUP_ACK_MAX)
        return cx_err_set(EINVAL, "group ack of %zu positions (at most %d)", n, CX_SP_GROUP_ACK_MAX);
    uint8_t b[8 * CX_SP_GROUP_ACK_MAX];
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            b[8 * i + (size_t)k] = (uint8_t)(pos[i] >> (8 * k));
    struct cx_sp_request q = {.op = CX_SP_GROUP_ACK, .name = S(name), .cursor = S(group), .token = member,
                              .blob = b, .blob_len = (uint32_t)(8 * n)};
    struct cx_sp_reply r;
    return LOCKED(c, group_call(c, &q, &r, NULL));
}

int cx_space_group_leave(struct cx_space_client *c, const char *name, const char *group, uint64_t member)
{
    struct cx_sp_request q = {.op = CX_SP_GROUP_LEAVE, .name = S(name), .cursor = S(group), .token = member};
    struct cx_sp_reply r;
    return LOCKED(c, group_call(c, &q, &r, NULL));
}

static long group_list_locked(struct cx_space_client *c, const char *name,
                              void (*fn)(void *, const char *, uint64_t, uint64_t, int, const uint64_t *,
                                         const uint32_t *),
                              void *arg)
{
    struct cx_sp_request q = {.op = CX_SP_GROUP_LIST, .name = S(name)};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    size_t off = 0;
    struct cx_sp_str g;
    uint64_t floor, next, member[64];
    uint32_t inflight[64];
    uint16_t nm;
    char buf[CX_SP_ADDR_MAX + 1];
    while ((rc = cx_sp_group_next(&r, &off, &g, &floor, &next, &nm, member, inflight, 64)) == 1)
        if (fn && cx_sp_str_copy(g, buf, sizeof buf) == 0)
            fn(arg, buf, floor, next, nm < 64 ? nm : 64, member, inflight);
    return rc < 0 ? rc : (long)r.count;
}

long cx_space_group_list(struct cx_space_client *c, const char *name,
                         void (*fn)(void *arg, const char *group, uint64_t floor, uint64_t next, int nmember,
                                    const uint64_t *member, const uint32_t *inflight),
                         void *arg)
{
    return LOCKED(c, group_list_locked(c, name, fn, arg));
}

static int fmt_put_locked(struct cx_space_client *c, const struct cx_format *f, uint64_t *token)
{
    size_t len;
    const uint8_t *d = cx_format_describe(f, &len);
    struct cx_sp_request q = {.op = CX_SP_FMT_PUT, .blob = d, .blob_len = (uint32_t)len};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_FORMAT, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc == 0 && token)
        *token = r.token;
    return rc;
}

int cx_space_format_put(struct cx_space_client *c, const struct cx_format *f, uint64_t *token)
{
    return LOCKED_IF(c, f, fmt_put_locked(c, f, token));
}

static int fmt_get_locked(struct cx_space_client *c, uint64_t token, uint8_t **desc, size_t *len)
{
    struct cx_sp_request q = {.op = CX_SP_FMT_GET, .token = token};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_FORMAT, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    if (!(*desc = malloc(r.blob_len ? r.blob_len : 1)))
        return cx_err_set(ENOMEM, "format description");
    memcpy(*desc, r.blob, r.blob_len);
    *len = r.blob_len;
    return 0;
}

int cx_space_format_get(struct cx_space_client *c, uint64_t token, uint8_t **desc, size_t *len)
{
    return LOCKED_IF(c, desc && len, fmt_get_locked(c, token, desc, len));
}

static int fetch_hook(void *arg, uint64_t token, uint8_t **desc, size_t *len)
{
    return cx_space_format_get(arg, token, desc, len);
}

void cx_space_serve_formats(struct cx_space_client *c)
{
    g_format_client = c;
    cx_format_registry_set_fetch(fetch_hook, c);
}

/* A request that opens a handle (PUT, READ): the handle exists here before the reply so
 * no frame for it is missed, and is dropped again when the server refuses. */
static int handle_call(struct cx_space_client *c, struct cx_sp_request *q, int writer,
                       struct cx_sp_reply *r, uint32_t *id)
{
    struct chandle *h = hadd(c, writer);
    if (!h)
        return cx_err_set(ENOMEM, "handle");
    *id = q->handle = h->id;
    int rc = call(c, CX_FRAME_LOOKUP, q, r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0 && (h = hfind(c, *id)))
        hdrop(c, h);
    return rc;
}

static int put_locked(struct cx_space_client *c, const char *name, int mode, uint64_t format,
                      const char *writer_addr, uint32_t *handle, struct cx_space_pipe_info *out)
{
    uint32_t id;
    struct cx_sp_request q = {.op = CX_SP_PUT, .mode = (uint8_t)mode, .name = S(name),
                              .format = format, .addr = S(writer_addr)};
    struct cx_sp_reply r;
    int rc = handle_call(c, &q, 1, &r, &id);
    if (rc < 0)
        return rc;
    struct chandle *h;
    if ((h = hfind(c, id)))
        h->acked = r.pipe.last_id; /* what is stored is as good as acked */
    info_from(&r.pipe, out);
    *handle = id;
    return 0;
}

int cx_space_put(struct cx_space_client *c, const char *name, int mode, uint64_t format,
                 const char *writer_addr, uint32_t *handle, struct cx_space_pipe_info *out)
{
    return LOCKED_IF(c, handle, put_locked(c, name, mode, format, writer_addr, handle, out));
}

static int handle_err(struct chandle *h)
{
    return h->err ? cx_err_set(-h->err, "%s", h->errmsg) : 0;
}

static int send_seg(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, uint64_t format,
                    const struct iovec *iov, int iovcnt, int end)
{
    struct chandle *h = hfind(c, handle);
    if (!h || !h->writer)
        return cx_err_set(EBADF, "handle %u is not open for writing", handle);
    int rc = pump_lazy(c); /* collect acks and refusals */
    if (rc < 0 || (rc = handle_err(h)) < 0)
        return rc;
    struct cx_frame_hdr f = {.type = CX_FRAME_DATA, .channel = handle, .seq = seg_id,
                             .format = format, .flags = end ? CX_FRAME_F_END : 0};
    rc = cx_link_send(c->link, &f, iov, iovcnt);
    return rc < 0 ? cx_err_wrap(rc, "space %s", c->addr) : 0;
}

int cx_space_append(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, uint64_t format,
                    const struct iovec *iov, int iovcnt)
{
    return LOCKED_IF(c, (iov || iovcnt == 0) && iovcnt >= 0,
                     send_seg(c, handle, seg_id, format, iov, iovcnt, 0));
}

int cx_space_end(struct cx_space_client *c, uint32_t handle, uint64_t last_id)
{
    return LOCKED(c, send_seg(c, handle, last_id, 0, NULL, 0, 1));
}

static int wait_acked_locked(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, int timeout_ms)
{
    double end = now_ms() + timeout_ms;
    for (;;) {
        struct chandle *h = hfind(c, handle);
        if (!h)
            return cx_err_set(EBADF, "handle %u is not open", handle);
        int rc = handle_err(h);
        if (rc < 0)
            return rc;
        if (h->acked >= seg_id)
            return 0;
        double left = end - now_ms();
        if (left <= 0)
            return cx_err_set(ETIMEDOUT, "space %s: segment %" PRIu64 " not acknowledged in %d ms "
                              "(acked up to %" PRIu64 ")", c->addr, seg_id, timeout_ms, h->acked);
        if ((rc = pump(c, left > 50 ? 50 : (int)left + 1)) < 0)
            return rc;
    }
}

int cx_space_wait_acked(struct cx_space_client *c, uint32_t handle, uint64_t seg_id, int timeout_ms)
{
    return LOCKED(c, wait_acked_locked(c, handle, seg_id, timeout_ms));
}

static uint64_t acked_locked(struct cx_space_client *c, uint32_t handle)
{
    pump_lazy(c);
    struct chandle *h = hfind(c, handle);
    return h ? h->acked : 0;
}

uint64_t cx_space_acked(struct cx_space_client *c, uint32_t handle)
{
    if (!c)
        return 0;
    return LOCKED(c, acked_locked(c, handle));
}

static int read_start_locked(struct cx_space_client *c, const char *name, uint64_t from_id,
                             uint32_t *handle, struct cx_space_pipe_info *out)
{
    uint32_t id;
    struct cx_sp_request q = {.op = CX_SP_READ, .name = S(name), .from_id = from_id};
    struct cx_sp_reply r;
    int rc = handle_call(c, &q, 0, &r, &id);
    if (rc < 0)
        return rc;
    info_from(&r.pipe, out);
    *handle = id;
    return 0;
}

int cx_space_read_start(struct cx_space_client *c, const char *name, uint64_t from_id,
                        uint32_t *handle, struct cx_space_pipe_info *out)
{
    return LOCKED_IF(c, handle, read_start_locked(c, name, from_id, handle, out));
}

static long read_next_locked(struct cx_space_client *c, uint32_t handle, void *buf, size_t cap,
                             struct cx_seg_info *info, int timeout_ms)
{
    double end = now_ms() + timeout_ms;
    for (int pumped = 0;; pumped = 1) {
        struct chandle *h = hfind(c, handle);
        if (!h || h->writer)
            return cx_err_set(EBADF, "handle %u is not open for reading", handle);
        struct qseg *q = h->head;
        if (q) {
            if (q->end) {
                if (info)
                    *info = (struct cx_seg_info){.seg_id = q->id};
                return cx_err_set(EPIPE, "end of pipe after segment %" PRIu64, q->id ? q->id - 1 : 0);
            }
            if (info)
                *info = (struct cx_seg_info){.seg_id = q->id, .format = q->format, .length = q->len};
            if (q->len > cap)
                return cx_err_set(EMSGSIZE, "segment %" PRIu64 " of %u bytes does not fit %zu",
                                  q->id, q->len, cap);
            memcpy(buf, q->data, q->len);
            long n = q->len;
            h->head = q->next;
            if (!h->head)
                h->tail = NULL;
            free(q);
            return n;
        }
        int rc = handle_err(h);
        if (rc < 0)
            return rc;
        double left = end - now_ms();
        if (left <= 0 && pumped)
            return cx_err_set(ETIMEDOUT, "no segment in %d ms", timeout_ms);
        if ((rc = pump(c, left <= 0 ? 0 : left > 50 ? 50 : (int)left + 1)) < 0)
            return rc;
    }
}

long cx_space_read_next(struct cx_space_client *c, uint32_t handle, void *buf, size_t cap,
                        struct cx_seg_info *info, int timeout_ms)
{
    return LOCKED_IF(c, buf || cap == 0, read_next_locked(c, handle, buf, cap, info, timeout_ms));
}

static int next_event_locked(struct cx_space_client *c, uint32_t handle, struct cx_space_event *ev)
{
    pump_lazy(c);
    struct chandle *h = hfind(c, handle);
    if (!h || !h->nev)
        return 0;
    *ev = h->ev[0];
    memmove(&h->ev[0], &h->ev[1], (size_t)--h->nev * sizeof h->ev[0]);
    return 1;
}

int cx_space_next_event(struct cx_space_client *c, uint32_t handle, struct cx_space_event *ev)
{
    return LOCKED_IF(c, ev, next_event_locked(c, handle, ev));
}

int cx_space_next_reader(struct cx_space_client *c, uint32_t handle, char *addr, size_t cap)
{
    struct cx_space_event ev;
    int rc;
    if (!addr && cap)
        return cx_err_set(EINVAL, "cx_space_next_reader: no buffer for the address");
    while ((rc = cx_space_next_event(c, handle, &ev)) == 1)
        if (ev.op == CX_SP_READER_JOINED) {
            snprintf(addr, cap, "%s", ev.addr);
            return 1;
        }
    return rc;
}

static int stop_locked(struct cx_space_client *c, uint32_t handle)
{
    struct chandle *h = hfind(c, handle);
    if (!h)
        return cx_err_set(EBADF, "handle %u is not open", handle);
    hdrop(c, h);
    struct cx_sp_request q = {.op = CX_SP_STOP, .handle = handle};
    struct cx_sp_reply r;
    return call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
}

int cx_space_stop(struct cx_space_client *c, uint32_t handle)
{
    return LOCKED(c, stop_locked(c, handle));
}

static int migrate_locked(struct cx_space_client *c, int kind, uint32_t handle, const char *name,
                          const char *addr, uint32_t hold_ms, uint64_t *token,
                          struct cx_space_pipe_info *out)
{
    struct cx_sp_request q = {.op = CX_SP_MIGRATE, .mode = (uint8_t)kind, .handle = handle,
                              .name = S(name), .addr = S(addr), .hold_ms = hold_ms};
    struct cx_sp_reply r;
    int rc = call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    struct chandle *h;
    if (kind == CX_SP_MIG_WRITER && (h = hfind(c, handle)))
        hdrop(c, h); /* the server ended it */
    *token = r.token;
    info_from(&r.pipe, out);
    return 0;
}

int cx_space_migrate(struct cx_space_client *c, int kind, uint32_t handle, const char *name,
                     const char *addr, uint32_t hold_ms, uint64_t *token,
                     struct cx_space_pipe_info *out)
{
    return LOCKED_IF(c, token, migrate_locked(c, kind, handle, name, addr, hold_ms, token, out));
}

static int resume_locked(struct cx_space_client *c, int kind, const char *name, const char *addr,
                         uint64_t pipe_id, uint64_t token, uint32_t *handle,
                         struct cx_space_pipe_info *out)
{
    struct cx_sp_request q = {.op = CX_SP_RESUME, .mode = (uint8_t)kind, .name = S(name),
                              .addr = S(addr), .pipe_id = pipe_id, .token = token};
    struct cx_sp_reply r;
    uint32_t id = 0;
    int rc = kind == CX_SP_MIG_WRITER ? handle_call(c, &q, 1, &r, &id)
                                      : call(c, CX_FRAME_LOOKUP, &q, &r, CX_SPACE_TIMEOUT_MS);
    if (rc < 0)
        return rc;
    struct chandle *h;
    if (id && (h = hfind(c, id)))
        h->acked = r.pipe.last_id; /* what is stored is as good as acked */
    if (handle)
        *handle = id;
    info_from(&r.pipe, out);
    return 0;
}

int cx_space_resume(struct cx_space_client *c, int kind, const char *name, const char *addr,
                    uint64_t pipe_id, uint64_t token, uint32_t *handle, struct cx_space_pipe_info *out)
{
    return LOCKED(c, resume_locked(c, kind, name, addr, pipe_id, token, handle, out));
}

int cx_space_client_fd(struct cx_space_client *c)
{
    return c ? cx_link_fd(c->link) : cx_err_set(EINVAL, "cx_space_client_fd: no client (NULL)");
}

static long push_locked(struct cx_space_client *c)
{
    if (!c->dead && cx_link_pending(c->link) == 0)
        return 0;
    int rc = pump(c, 0);
    return rc < 0 ? rc : (long)cx_link_pending(c->link);
}

long cx_space_client_push(struct cx_space_client *c)
{
    /* busy: another thread is inside a call, which drives the connection itself (a wait
     * for acks can hold the lock for its whole timeout: never wait for it here) */
    if (!c)
        return cx_err_set(EINVAL, "cx_space_client_push: no client (NULL)");
    if (pthread_mutex_trylock(&c->mu) != 0)
        return 1;
    long rc = push_locked(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
