/* Encoding and bounds-checked decoding of the space protocol (cx_space_proto.h). */
#include "space/cx_space_proto.h"

#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>

/* ---- output ------------------------------------------------------------------------ */

static uint8_t *buf_room(struct cx_sp_buf *b, size_t n)
{
    if (b->err)
        return NULL;
    if (b->len + n > b->cap) {
        if (b->fixed) {
            b->err = cx_err_set(EMSGSIZE, "space message over %zu bytes", b->cap);
            return NULL;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->err = cx_err_set(ENOMEM, "space message of %zu bytes", cap);
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

static void put_le(struct cx_sp_buf *b, uint64_t v, int n)
{
    uint8_t *p = buf_room(b, (size_t)n);
    if (p)
        for (int i = 0; i < n; i++)
            p[i] = (uint8_t)(v >> (8 * i));
}

void cx_sp_buf_u8(struct cx_sp_buf *b, uint8_t v) { put_le(b, v, 1); }
void cx_sp_buf_u16(struct cx_sp_buf *b, uint16_t v) { put_le(b, v, 2); }
void cx_sp_buf_u32(struct cx_sp_buf *b, uint32_t v) { put_le(b, v, 4); }
void cx_sp_buf_u64(struct cx_sp_buf *b, uint64_t v) { put_le(b, v, 8); }

void cx_sp_buf_str(struct cx_sp_buf *b, const char *s, size_t len)
{
    if (len > UINT16_MAX) {
        if (!b->err)
            b->err = cx_err_set(EINVAL, "string of %zu bytes in a space message (max 65535)", len);
        return;
    }
    put_le(b, len, 2);
    uint8_t *p = buf_room(b, len);
    if (p && len)
        memcpy(p, s, len);
}

void cx_sp_buf_blob(struct cx_sp_buf *b, const void *src, uint32_t len)
{
    put_le(b, len, 4);
    uint8_t *p = buf_room(b, len);
    if (p && len)
        memcpy(p, src, len);
}

void cx_sp_buf_free(struct cx_sp_buf *b)
{
    if (!b->fixed)
        free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void put_s(struct cx_sp_buf *b, struct cx_sp_str s) { cx_sp_buf_str(b, s.p, s.len); }

int cx_sp_encode_request(struct cx_sp_buf *b, const struct cx_sp_request *r)
{
    cx_sp_buf_u8(b, r->op);
    switch (r->op) {
    case CX_SP_LOOKUP:
    case CX_SP_UNLINK:
    case CX_SP_STATS:
        put_s(b, r->name);
        break;
    case CX_SP_GET:
        put_s(b, r->name);
        cx_sp_buf_u64(b, r->format);
        put_s(b, r->addr);
        break;
    case CX_SP_PUT:
        cx_sp_buf_u8(b, r->mode);
        cx_sp_buf_u32(b, r->handle);
        put_s(b, r->name);
        cx_sp_buf_u64(b, r->format);
        put_s(b, r->addr);
        break;
    case CX_SP_READ:
        cx_sp_buf_u32(b, r->handle);
        put_s(b, r->name);
        cx_sp_buf_u64(b, r->from_id);
        break;
    case CX_SP_STOP:
        cx_sp_buf_u32(b, r->handle);
        break;
    case CX_SP_LIST:
        break;
    case CX_SP_FMT_PUT:
        cx_sp_buf_blob(b, r->blob, r->blob_len);
        break;
    case CX_SP_FMT_GET:
        cx_sp_buf_u64(b, r->token);
        break;
    case CX_SP_CURSOR_SET:
        put_s(b, r->name);
        cx_sp_buf_u64(b, r->pipe_id);
        put_s(b, r->cursor);
        cx_sp_buf_u64(b, r->from_id);
        break;
    case CX_SP_CURSOR_GET:
        put_s(b, r->name);
        put_s(b, r->cursor);
        break;
    case CX_SP_CURSOR_LIST:
    case CX_SP_GROUP_LIST:
        put_s(b, r->name);
        break;
    case CX_SP_GROUP_JOIN:
    case CX_SP_GROUP_NEXT:
    case CX_SP_GROUP_ACK:
    case CX_SP_GROUP_LEAVE:
        put_s(b, r->name);
        put_s(b, r->cursor);
        if (r->op == CX_SP_GROUP_JOIN)
            cx_sp_buf_u32(b, r->hold_ms);
        else
            cx_sp_buf_u64(b, r->token);
        if (r->op == CX_SP_GROUP_ACK)
            cx_sp_buf_blob(b, r->blob, r->blob_len);
        break;
    case CX_SP_MIGRATE:
    case CX_SP_RESUME:
        cx_sp_buf_u8(b, r->mode);
        cx_sp_buf_u32(b, r->handle);
        put_s(b, r->name);
        put_s(b, r->addr);
        if (r->op == CX_SP_MIGRATE) {
            cx_sp_buf_u32(b, r->hold_ms);
        } else {
            cx_sp_buf_u64(b, r->pipe_id);
            cx_sp_buf_u64(b, r->token);
        }
        break;
    default:
        if (!b->err)
            b->err = cx_err_set(EINVAL, "unknown space request op %u", r->op);
    }
    return b->err;
}

int cx_sp_encode_reply_head(struct cx_sp_buf *b, uint8_t op, int32_t status, const char *error)
{
    cx_sp_buf_u8(b, op);
    cx_sp_buf_u32(b, (uint32_t)status);
    if (status < 0) {
        size_t n = error ? strlen(error) : 0;
        cx_sp_buf_str(b, error, n > 1024 ? 1024 : n);
    }
    return b->err;
}

int cx_sp_encode_pipe(struct cx_sp_buf *b, const struct cx_sp_pipe *p)
{
    cx_sp_buf_u64(b, p->pipe_id);
    cx_sp_buf_u64(b, p->format);
    cx_sp_buf_u64(b, p->first_id);
    cx_sp_buf_u64(b, p->last_id);
    cx_sp_buf_u8(b, p->ended);
    cx_sp_buf_u8(b, p->writer_open);
    uint16_t n = p->naddrs > CX_SP_MAX_ADDRS ? CX_SP_MAX_ADDRS : p->naddrs;
    cx_sp_buf_u16(b, n);
    for (uint16_t i = 0; i < n; i++)
        put_s(b, p->addrs[i]);
    return b->err;
}

int cx_sp_encode_stats(struct cx_sp_buf *b, const struct cx_sp_stats *st)
{
    if (st->nlinks > CX_SP_MAX_LINKS) {
        if (!b->err)
            b->err = cx_err_set(EINVAL, "space STATS with %u transports (max %d)", st->nlinks,
                                CX_SP_MAX_LINKS);
        return b->err;
    }
    cx_sp_buf_u32(b, st->readers);
    cx_sp_buf_u64(b, st->bytes);
    cx_sp_buf_u64(b, st->segments);
    cx_sp_buf_u16(b, st->nlinks);
    for (uint16_t i = 0; i < st->nlinks; i++) {
        put_s(b, st->links[i].transport);
        cx_sp_buf_u32(b, st->links[i].count);
    }
    return b->err;
}

/* ---- input ------------------------------------------------------------------------- */

struct rd {
    const uint8_t *p;
    size_t len, off;
    const char *what; /* first field that did not fit */
};

static int need(struct rd *r, size_t n, const char *what)
{
    if (r->what)
        return 0;
    if (r->len - r->off < n) {
        r->what = what;
        return 0;
    }
    return 1;
}

static uint64_t get_le(struct rd *r, int n, const char *what)
{
    if (!need(r, (size_t)n, what))
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)r->p[r->off + (size_t)i] << (8 * i);
    r->off += (size_t)n;
    return v;
}

static struct cx_sp_str get_s(struct rd *r, const char *what)
{
    struct cx_sp_str s = {0};
    uint16_t n = (uint16_t)get_le(r, 2, what);
    if (!need(r, n, what))
        return s;
    s.p = (const char *)r->p + r->off;
    s.len = n;
    r->off += n;
    return s;
}

static const uint8_t *get_blob(struct rd *r, uint32_t *len, const char *what)
{
    uint32_t n = (uint32_t)get_le(r, 4, what);
    if (!need(r, n, what))
        return NULL;
    const uint8_t *p = r->p + r->off;
    r->off += n;
    *len = n;
    return p;
}

static int finish(struct rd *r, const char *kind, uint8_t op)
{
    if (r->what)
        return cx_err_set(EPROTO, "malformed space %s %s: truncated at %s (%zu bytes)", kind,
                          cx_sp_op_name(op), r->what, r->len);
    if (r->off != r->len)
        return cx_err_set(EPROTO, "malformed space %s %s: %zu trailing bytes", kind,
                          cx_sp_op_name(op), r->len - r->off);
    return 0;
}

int cx_sp_decode_request(const uint8_t *in, size_t len, struct cx_sp_request *q)
{
    struct rd r = {.p = in, .len = len};
    memset(q, 0, sizeof *q);
    q->op = (uint8_t)get_le(&r, 1, "op");
    switch (q->op) {
    case CX_SP_LOOKUP:
    case CX_SP_UNLINK:
    case CX_SP_STATS:
        q->name = get_s(&r, "name");
        break;
    case CX_SP_GET:
        q->name = get_s(&r, "name");
        q->format = get_le(&r, 8, "format");
        q->addr = get_s(&r, "reader address");
        break;
    case CX_SP_PUT:
        q->mode = (uint8_t)get_le(&r, 1, "mode");
        q->handle = (uint32_t)get_le(&r, 4, "handle");
        q->name = get_s(&r, "name");
        q->format = get_le(&r, 8, "format");
        q->addr = get_s(&r, "writer address");
        if (!r.what && q->mode != CX_SP_CREATE && q->mode != CX_SP_APPEND)
            return cx_err_set(EPROTO, "space PUT with mode %u (1 CREATE, 2 APPEND)", q->mode);
        break;
    case CX_SP_READ:
        q->handle = (uint32_t)get_le(&r, 4, "handle");
        q->name = get_s(&r, "name");
        q->from_id = get_le(&r, 8, "from id");
        break;
    case CX_SP_STOP:
        q->handle = (uint32_t)get_le(&r, 4, "handle");
        break;
    case CX_SP_LIST:
        break;
    case CX_SP_FMT_PUT:
        q->blob = get_blob(&r, &q->blob_len, "description");
        break;
    case CX_SP_FMT_GET:
        q->token = get_le(&r, 8, "token");
        break;
    case CX_SP_CURSOR_SET:
        q->name = get_s(&r, "name");
        q->pipe_id = get_le(&r, 8, "pipe id");
        q->cursor = get_s(&r, "cursor");
        q->from_id = get_le(&r, 8, "position");
        break;
    case CX_SP_CURSOR_GET:
        q->name = get_s(&r, "name");
        q->cursor = get_s(&r, "cursor");
        break;
    case CX_SP_CURSOR_LIST:
    case CX_SP_GROUP_LIST:
        q->name = get_s(&r, "name");
        break;
    case CX_SP_GROUP_JOIN:
    case CX_SP_GROUP_NEXT:
    case CX_SP_GROUP_ACK:
    case CX_SP_GROUP_LEAVE:
        q->name = get_s(&r, "name");
        q->cursor = get_s(&r, "group");
        if (q->op == CX_SP_GROUP_JOIN)
            q->hold_ms = (uint32_t)get_le(&r, 4, "ack wait ms");
        else
            q->token = get_le(&r, 8, "member");
        if (q->op == CX_SP_GROUP_ACK) {
            q->blob = get_blob(&r, &q->blob_len, "positions");
            if (!r.what && (q->blob_len % 8 || q->blob_len / 8 > CX_SP_GROUP_ACK_MAX))
                return cx_err_set(EPROTO, "space GROUP_ACK: %u bytes of positions (8 per "
                                  "position, at most %d positions)", q->blob_len, CX_SP_GROUP_ACK_MAX);
        }
        break;
    case CX_SP_MIGRATE:
    case CX_SP_RESUME:
        q->mode = (uint8_t)get_le(&r, 1, "kind");
        q->handle = (uint32_t)get_le(&r, 4, "handle");
        q->name = get_s(&r, "name");
        q->addr = get_s(&r, "address");
        if (q->op == CX_SP_MIGRATE) {
            q->hold_ms = (uint32_t)get_le(&r, 4, "hold ms");
        } else {
            q->pipe_id = get_le(&r, 8, "pipe id");
            q->token = get_le(&r, 8, "token");
        }
        if (!r.what && q->mode != CX_SP_MIG_READER && q->mode != CX_SP_MIG_WRITER)
            return cx_err_set(EPROTO, "space %s with kind %u (1 reader, 2 writer)",
                              cx_sp_op_name(q->op), q->mode);
        break;
    default:
        if (r.what)
            return cx_err_set(EPROTO, "empty space request");
        return cx_err_set(EPROTO, "unknown space request op %u", q->op);
    }
    if (!r.what && (q->addr.len > CX_SP_ADDR_MAX))
        return cx_err_set(EPROTO, "space %s: address of %u bytes (max %d)", cx_sp_op_name(q->op),
                          q->addr.len, CX_SP_ADDR_MAX);
    return finish(&r, "request", q->op);
}

static void get_pipe(struct rd *r, struct cx_sp_pipe *p)
{
    p->pipe_id = get_le(r, 8, "pipe id");
    p->format = get_le(r, 8, "format");
    p->first_id = get_le(r, 8, "first id");
    p->last_id = get_le(r, 8, "last id");
    p->ended = (uint8_t)get_le(r, 1, "ended");
    p->writer_open = (uint8_t)get_le(r, 1, "writer open");
    uint16_t n = (uint16_t)get_le(r, 2, "address count");
    if (n > CX_SP_MAX_ADDRS && !r->what) {
        r->what = "address count (over the limit)";
        return;
    }
    p->naddrs = n;
    for (uint16_t i = 0; i < n; i++)
        p->addrs[i] = get_s(r, "address");
}

static void get_stats(struct rd *r, struct cx_sp_stats *st)
{
    st->readers = (uint32_t)get_le(r, 4, "readers");
    st->bytes = get_le(r, 8, "bytes");
    st->segments = get_le(r, 8, "segments");
    uint16_t n = (uint16_t)get_le(r, 2, "link count");
    if (n > CX_SP_MAX_LINKS && !r->what) {
        r->what = "link count (over the limit)";
        return;
    }
    st->nlinks = n;
    for (uint16_t i = 0; i < n; i++) {
        st->links[i].transport = get_s(r, "link transport");
        st->links[i].count = (uint32_t)get_le(r, 4, "link uses");
    }
}

int cx_sp_decode_reply(const uint8_t *in, size_t len, struct cx_sp_reply *q)
{
    struct rd r = {.p = in, .len = len};
    memset(q, 0, sizeof *q);
    q->op = (uint8_t)get_le(&r, 1, "op");
    q->status = (int32_t)(uint32_t)get_le(&r, 4, "status");
    if (q->status < 0) {
        q->error = get_s(&r, "error text");
        return finish(&r, "reply", q->op);
    }
    switch (q->op) {
    case CX_SP_LOOKUP:
    case CX_SP_GET:
    case CX_SP_PUT:
    case CX_SP_READ:
    case CX_SP_UNLINK:
    case CX_SP_READER_JOINED:
    case CX_SP_READER_MOVED:
    case CX_SP_RESUME:
        get_pipe(&r, &q->pipe);
        break;
    case CX_SP_READER_HELD:
        get_pipe(&r, &q->pipe);
        q->hold_ms = (uint32_t)get_le(&r, 4, "hold ms");
        break;
    case CX_SP_MIGRATE:
        get_pipe(&r, &q->pipe);
        q->token = get_le(&r, 8, "token");
        break;
    case CX_SP_STATS:
        get_pipe(&r, &q->pipe);
        get_stats(&r, &q->stats);
        break;
    case CX_SP_STOP:
    case CX_SP_CURSOR_SET:
    case CX_SP_GROUP_ACK:
    case CX_SP_GROUP_LEAVE:
        break;
    case CX_SP_GROUP_JOIN:
        q->token = get_le(&r, 8, "member");
        q->pos = get_le(&r, 8, "floor");
        break;
    case CX_SP_GROUP_NEXT:
        q->pos = get_le(&r, 8, "position");
        q->count = (uint32_t)get_le(&r, 4, "deliveries");
        q->format = get_le(&r, 8, "format");
        q->blob = get_blob(&r, &q->blob_len, "segment");
        break;
    case CX_SP_CURSOR_GET:
        q->token = get_le(&r, 8, "position");
        break;
    case CX_SP_CURSOR_LIST:
    case CX_SP_GROUP_LIST:
    case CX_SP_LIST:
        q->count = (uint32_t)get_le(&r, 4, "count");
        if (!r.what) {
            q->blob = r.p + r.off;
            q->blob_len = (uint32_t)(r.len - r.off);
            r.off = r.len; /* walked by cx_sp_list_next */
        }
        break;
    case CX_SP_FMT_PUT:
        q->token = get_le(&r, 8, "token");
        break;
    case CX_SP_FMT_GET:
        q->blob = get_blob(&r, &q->blob_len, "description");
        break;
    default:
        return cx_err_set(EPROTO, "space reply with unknown op %u", q->op);
    }
    return finish(&r, "reply", q->op);
}

int cx_sp_list_next(const struct cx_sp_reply *q, size_t *off, struct cx_sp_str *name,
                    uint64_t *pipe_id, uint64_t *format)
{
    struct rd r = {.p = q->blob, .len = q->blob_len, .off = *off};
    if (r.off >= r.len)
        return 0;
    *name = get_s(&r, "list name");
    *pipe_id = get_le(&r, 8, "list pipe id");
    *format = get_le(&r, 8, "list format");
    if (r.what)
        return cx_err_set(EPROTO, "malformed space LIST reply: truncated at %s", r.what);
    *off = r.off;
    return 1;
}

int cx_sp_cursor_next(const struct cx_sp_reply *q, size_t *off, struct cx_sp_str *cursor, uint64_t *pos)
{
    struct rd r = {.p = q->blob, .len = q->blob_len, .off = *off};
    if (r.off >= r.len)
        return 0;
    *cursor = get_s(&r, "cursor name");
    *pos = get_le(&r, 8, "cursor position");
    if (r.what)
        return cx_err_set(EPROTO, "malformed space CURSOR_LIST reply: truncated at %s", r.what);
    *off = r.off;
    return 1;
}

int cx_sp_group_next(const struct cx_sp_reply *q, size_t *off, struct cx_sp_str *group, uint64_t *floor,
                     uint64_t *next, uint16_t *nmember, uint64_t *member, uint32_t *inflight, size_t cap)
{
    struct rd r = {.p = q->blob, .len = q->blob_len, .off = *off};
    if (r.off >= r.len)
        return 0;
    *group = get_s(&r, "group name");
    *floor = get_le(&r, 8, "group floor");
    *next = get_le(&r, 8, "group next");
    *nmember = (uint16_t)get_le(&r, 2, "member count");
    for (uint16_t i = 0; i < *nmember && !r.what; i++) {
        uint64_t id = get_le(&r, 8, "member id");
        uint32_t n = (uint32_t)get_le(&r, 4, "member in-flight");
        if (i < cap) {
            member[i] = id;
            inflight[i] = n;
        }
    }
    if (r.what)
        return cx_err_set(EPROTO, "malformed space GROUP_LIST reply: truncated at %s", r.what);
    *off = r.off;
    return 1;
}

int cx_sp_str_copy(struct cx_sp_str s, char *out, size_t cap)
{
    if ((size_t)s.len + 1 > cap)
        return cx_err_set(ENAMETOOLONG, "string of %u bytes does not fit %zu", s.len, cap - 1);
    if (s.len)
        memcpy(out, s.p, s.len);
    out[s.len] = 0;
    return 0;
}

const char *cx_sp_op_name(uint8_t op)
{
    static const char *names[] = {"?",    "LOOKUP", "GET",     "PUT",     "READ",         "STOP",
                                  "UNLINK", "LIST", "FMT_PUT", "FMT_GET", "READER_JOINED", "STATS",
                                  "MIGRATE", "READER_HELD", "RESUME", "READER_MOVED", "CURSOR_SET",
                                  "CURSOR_GET", "CURSOR_LIST", "GROUP_JOIN", "GROUP_NEXT", "GROUP_ACK",
                                  "GROUP_LEAVE", "GROUP_LIST"};
    return op < sizeof names / sizeof names[0] ? names[op] : "?";
}
