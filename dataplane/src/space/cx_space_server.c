/* The space server's TCP side: clients on the progress engine, the name table, pipes,
 * writers' appends with acks, readers' streams (cx_space_server.h). The UDP lookup service
 * is in cx_space_udp.c. Everything here runs on the engine thread, so pipes and
 * connections need no locks; the name table and format store are locked on their own
 * because the UDP threads read them too.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "space/cx_space_server.h"

#include "common/cx_error.h"
#include "engine/cx_engine.h"
#include "space/cx_nametable.h"
#include "space/cx_segcursor.h"
#include "space/cx_spgroup.h"
#include "space/cx_space_formats.h"
#include "space/cx_space_proto.h"
#include "space/cx_space_server_int.h"
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define READER_WINDOW (4u << 20) /* bytes queued on a link before a reader's stream waits */
#define MAX_READER_ADDRS CX_SP_MAX_ADDRS
#define OUT_MAX (64u << 20)      /* unsent bytes of a client that stopped reading: closed */
#define MIN_FRAME (1u << 20)     /* frames up to this are read whatever max_segment says */
#define SWEEP_MS 200             /* how often deadlines are checked */

enum hkind { H_WRITER = 1, H_READER = 2 };

struct handle {
    uint32_t id;
    int kind;
    struct spipe *p;
    struct cx_seg_iter it; /* reader: next segment to stream */
    uint64_t ack_due;      /* writer: highest id stored */
    int ack_pending;       /* writer: an ack (of ack_due) is owed */
    int end_acked;         /* writer: the END was stored; the next ack says so */
    int end_sent;          /* reader: END frame sent */
    uint64_t refused;      /* writer: first segment refused (0 = none): no END after it */
};

struct conn {
    struct cx_space_server *s;
    struct cx_link *link;
    const char *scheme; /* of the listener that accepted it (stats) */
    char peer[64];      /* ip:port, for log lines */
    double born, last_rx; /* ms: accepted, last frame received */
    int got_frame;      /* a first valid frame came (and so the TLS handshake is done) */
    int src;
    int dead;
    struct handle *h;
    size_t nh, caph;
    struct conn *next;
};

struct reader_addr {
    char addr[CX_SP_ADDR_MAX + 1];
    struct conn *owner; /* NULL while held: the migrating process's connections may go */
    uint64_t token;     /* held (migrating, MIGRATE) until held_until, under this token */
    double held_until;
};

struct spipe {
    char name[CX_SPACE_NAME_MAX + 1];
    uint64_t pipe_id, format;
    struct cx_seg_pipe *seg;
    struct conn *writer;
    uint32_t writer_handle;
    char writer_addr[CX_SP_ADDR_MAX + 1];
    struct reader_addr readers[MAX_READER_ADDRS];
    int nreaders;
    int pump_due; /* segments were appended in this batch: its readers are pushed after it */
    uint64_t writer_token; /* a migrating writer's slot is kept until writer_held_until */
    double writer_held_until;
    struct cx_spgroup *groups; /* reader groups (cx_spgroup.h), made at first use */
    struct spipe *next;
};

static void logf_(struct cx_space_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct cx_space_server *s, const char *fmt, ...)
{
    if (s->opts.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "confluxd space: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* A log line about one client, at most one a second (a hostile crowd must not flood the
 * log): the next line printed says how many were left out. */
static void logc_(struct cx_space_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define STAT_ADD(s, f, n) __atomic_fetch_add(&(s)->stats.f, (n), __ATOMIC_RELAXED)

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void logc_(struct cx_space_server *s, const char *fmt, ...)
{
    double t = now_ms();
    if (s->opts.quiet)
        return;
    if (t - s->log_last < 1000) {
        s->log_skipped++;
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (s->log_skipped)
        logf_(s, "%s (and %u more client lines left out in the last second)", line, s->log_skipped);
    else
        logf_(s, "%s", line);
    s->log_last = t;
    s->log_skipped = 0;
}

/* ---- pipes ------------------------------------------------------------------------- */

static struct spipe *pipe_find(struct cx_space_server *s, uint64_t id)
{
    for (struct spipe *p = s->pipes; p; p = p->next)
        if (p->pipe_id == id)
            return p;
    return NULL;
}

/* Holds of migrating endpoints end at their deadline (checked whenever the pipe is used):
 * a held reader address is forgotten, a held writer slot freed. */
static void holds_expire(struct spipe *p)
{
    double now = now_ms();
    for (int i = 0; i < p->nreaders;)
        if (p->readers[i].token && p->readers[i].held_until <= now)
            p->readers[i] = p->readers[--p->nreaders];
        else
            i++;
    if (p->writer_token && p->writer_held_until <= now)
        p->writer_token = 0;
}

/* The open pipe of a name-table entry, opened (created on disk) at first use. */
static int pipe_get(struct cx_space_server *s, const struct cx_name_entry *e, struct spipe **out)
{
    struct spipe *p = pipe_find(s, e->pipe_id);
    if (p) {
        holds_expire(p);
        *out = p;
        return 0;
    }
    p = calloc(1, sizeof *p);
    if (!p)
        return cx_err_set(ENOMEM, "space: pipe state");
    char store_name[CX_PIPE_NAME_LEN];
    cx_nametable_pipe_name(e->pipe_id, store_name);
    int rc = cx_segstore_pipe_open(s->store, store_name, &s->opts.pipe, 1, &p->seg);
    if (rc < 0) {
        free(p);
        rc = cx_err_wrap(rc, "pipe '%s'", e->name);
        if (rc == -EBADMSG) /* damage inside the log: the operator decides (--repair) */
            logf_(s, "%s", cx_errmsg());
        return rc;
    }
    struct cx_seg_stat st;
    cx_segstore_stat(p->seg, &st);
    if (st.truncated_bytes) /* a write torn by a crash, or a repaired corruption */
        logf_(s, "pipe '%s' (%s): recovery dropped %" PRIu64 " bytes at the end of its log%s; "
              "it now ends at segment %" PRIu64 "%s", e->name, store_name, st.truncated_bytes,
              s->opts.pipe.repair ? " (repair)" : " (torn tail)", st.last_id,
              st.ended ? ", ended" : "");
    snprintf(p->name, sizeof p->name, "%s", e->name);
    p->pipe_id = e->pipe_id;
    p->format = e->format;
    p->next = s->pipes;
    s->pipes = p;
    STAT_ADD(s, pipes_open, 1);
    return *out = p, 0;
}

static void pipe_close(struct cx_space_server *s, struct spipe *p)
{
    for (struct spipe **pp = &s->pipes; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    cx_segstore_pipe_close(p->seg);
    cx_spgroup_free_all(&p->groups);
    __atomic_fetch_sub(&s->stats.pipes_open, 1, __ATOMIC_RELAXED);
    free(p);
}

static void pipe_fill(struct spipe *p, struct cx_sp_pipe *out)
{
    struct cx_seg_stat st;
    cx_segstore_stat(p->seg, &st);
    memset(out, 0, sizeof *out);
    out->pipe_id = p->pipe_id;
    out->format = p->format;
    out->first_id = st.first_id;
    out->last_id = st.last_id;
    out->ended = (uint8_t)st.ended;
    out->writer_open = p->writer != NULL;
}

static void reader_forget_conn(struct spipe *p, struct conn *c)
{
    for (int i = 0; i < p->nreaders;)
        if (p->readers[i].owner == c)
            p->readers[i] = p->readers[--p->nreaders];
        else
            i++;
}

/* ---- sending ----------------------------------------------------------------------- */

static int conn_send(struct conn *c, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct iovec iov = {(void *)p, len};
    int rc = cx_link_send(c->link, h, &iov, len ? 1 : 0);
    if (rc < 0)
        c->dead = 1;
    return rc;
}

static void reply(struct conn *c, uint8_t type, uint64_t seq, struct cx_sp_buf *b)
{
    struct cx_frame_hdr h = {.type = type, .flags = CX_FRAME_F_REPLY, .seq = seq};
    if (b->err) { /* could not encode the answer: say so instead */
        struct cx_sp_buf e = {0};
        cx_sp_encode_reply_head(&e, b->len ? b->p[0] : 0, b->err, cx_errmsg());
        conn_send(c, &h, e.p, e.len);
        cx_sp_buf_free(&e);
        return;
    }
    conn_send(c, &h, b->p, b->len);
}

static void reply_error(struct conn *c, uint8_t type, uint64_t seq, uint8_t op, int rc)
{
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, op, rc, cx_errmsg());
    reply(c, type, seq, &b);
    cx_sp_buf_free(&b);
}

/* An error on a handle outside any request (a refused segment): a push naming the handle. */
static void push_handle_error(struct conn *c, uint32_t handle, uint8_t op, int rc)
{
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, op, rc, cx_errmsg());
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .flags = CX_FRAME_F_REPLY, .channel = handle};
    if (!b.err)
        conn_send(c, &h, b.p, b.len);
    cx_sp_buf_free(&b);
}

/* ---- handles ----------------------------------------------------------------------- */

static struct handle *handle_find(struct conn *c, uint32_t id)
{
    for (size_t i = 0; i < c->nh; i++)
        if (c->h[i].id == id)
            return &c->h[i];
    return NULL;
}

static struct handle *handle_add(struct conn *c, uint32_t id)
{
    if (id == 0) {
        cx_err_set(EINVAL, "handle 0 is reserved");
        return NULL;
    }
    if (handle_find(c, id)) {
        cx_err_set(EEXIST, "handle %u is in use on this connection", id);
        return NULL;
    }
    if (c->nh == c->caph) {
        size_t cap = c->caph ? c->caph * 2 : 8;
        struct handle *h = realloc(c->h, cap * sizeof *h);
        if (!h) {
            cx_err_set(ENOMEM, "handles");
            return NULL;
        }
        c->h = h;
        c->caph = cap;
    }
    struct handle *h = &c->h[c->nh++];
    memset(h, 0, sizeof *h);
    h->id = id;
    return h;
}

static void handle_drop(struct conn *c, struct handle *h)
{
    if (h->kind == H_WRITER && h->p && h->p->writer == c && h->p->writer_handle == h->id)
        h->p->writer = NULL;
    *h = c->h[--c->nh];
}

/* ---- readers' streams -------------------------------------------------------------- */

/* Streams what is stored for one reader handle until the link's window is full. */
/* Corks a TCP link while a batch of segments goes out, so they leave in full packets (and
 * wake the reader once per packet, not per segment); uncorking sends the rest at once. */
static void link_cork(struct conn *c, int on)
{
    int fd = cx_link_fd(c->link);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

static int pump_reader(struct cx_space_server *s, struct conn *c, struct handle *h)
{
    int sent = 0, corked = 0;
    while (!c->dead && !h->end_sent && cx_link_pending(c->link) < READER_WINDOW) {
        struct cx_seg_info info;
        long n = cx_segstore_iter_next(&h->it, s->scratch, s->scratch_cap, &info);
        if (n == -EMSGSIZE) {
            void *p = realloc(s->scratch, info.length);
            if (!p)
                return sent;
            s->scratch = p;
            s->scratch_cap = info.length;
            continue;
        }
        if (n == -EAGAIN)
            break;
        if (n == -EPIPE) {
            struct cx_frame_hdr e = {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_END,
                                     .channel = h->id, .seq = cx_segstore_iter_tell(&h->it)};
            conn_send(c, &e, NULL, 0);
            h->end_sent = 1;
            break;
        }
        if (n < 0) { /* dropped by retention, or damaged: tell the reader, stop its stream */
            push_handle_error(c, h->id, CX_SP_READ, (int)n);
            h->end_sent = 1;
            break;
        }
        struct cx_frame_hdr d = {.type = CX_FRAME_DATA, .channel = h->id, .seq = info.seg_id,
                                 .format = info.format};
        if (sent == 2 && !corked && n < (64 << 10)) /* a batch of small ones is coming */
            link_cork(c, corked = 1);
        if (conn_send(c, &d, s->scratch, (size_t)n) < 0)
            break;
        STAT_ADD(s, segments_out, 1);
        STAT_ADD(s, bytes_out, (uint64_t)n);
        sent++;
    }
    if (corked)
        link_cork(c, 0);
    return sent;
}

static void pump_pipe_readers(struct cx_space_server *s, struct spipe *p)
{
    for (struct conn *c = s->conns; c; c = c->next)
        for (size_t i = 0; i < c->nh; i++)
            if (c->h[i].kind == H_READER && c->h[i].p == p)
                pump_reader(s, c, &c->h[i]);
}

/* The peer closed (or reset) the connection, though we may not have read that yet. */
static int conn_hung_up(struct conn *c)
{
    struct pollfd pf = {.fd = cx_link_fd(c->link), .events = POLLIN | POLLRDHUP};
    return pf.fd >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void conn_free(struct cx_space_server *s, struct conn *c);

/* ---- requests ---------------------------------------------------------------------- */

static int req_name(const struct cx_sp_request *q, char *out)
{
    if (cx_sp_str_copy(q->name, out, CX_SPACE_NAME_MAX + 1) < 0)
        return cx_err_set(EINVAL, "pipe name of %u bytes (max %d)", q->name.len, CX_SPACE_NAME_MAX);
    return cx_space_name_check(out);
}

/* The entry for a name, bound now when absent (GET and PUT bind, as in the paper). */
static int lookup_or_bind(struct cx_space_server *s, const char *name, uint64_t format,
                          struct cx_name_entry *e)
{
    int rc = cx_nametable_lookup(s->names, name, e);
    if (rc == -ENOENT) {
        rc = cx_nametable_bind(s->names, name, format, e);
        if (rc == -EEXIST) /* a UDP thread cannot bind, so only a race with ourselves */
            rc = cx_nametable_lookup(s->names, name, e);
    }
    return rc;
}

/* The request's name checked, and its entry: bound now when absent if bind (GET, PUT). */
static int named(struct cx_space_server *s, const struct cx_sp_request *q, int bind,
                 char name[CX_SPACE_NAME_MAX + 1], struct cx_name_entry *e)
{
    int rc = req_name(q, name);
    if (rc == 0)
        rc = bind ? lookup_or_bind(s, name, q->format, e) : cx_nametable_lookup(s->names, name, e);
    return rc;
}

/* named, then the entry's open pipe. */
static int named_pipe(struct cx_space_server *s, const struct cx_sp_request *q, int bind,
                      char name[CX_SPACE_NAME_MAX + 1], struct spipe **p)
{
    struct cx_name_entry e;
    int rc = named(s, q, bind, name, &e);
    return rc < 0 ? rc : pipe_get(s, &e, p);
}

/* Replies with a pipe result. */
static void reply_info(struct conn *c, uint64_t seq, uint8_t op, const struct cx_sp_pipe *out)
{
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, op, 0, NULL);
    cx_sp_encode_pipe(&b, out);
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
}

static void reply_pipe(struct conn *c, uint64_t seq, uint8_t op, struct spipe *p, int with_readers)
{
    struct cx_sp_pipe out;
    pipe_fill(p, &out);
    if (with_readers) {
        for (int i = 0; i < p->nreaders; i++)
            if (!p->readers[i].token) /* a migrating reader is not to be connected to */
                out.addrs[out.naddrs++] = (struct cx_sp_str){p->readers[i].addr, (uint16_t)strlen(p->readers[i].addr)};
    } else if (p->writer_addr[0] && p->writer) {
        out.addrs[out.naddrs++] = (struct cx_sp_str){p->writer_addr, (uint16_t)strlen(p->writer_addr)};
    }
    reply_info(c, seq, op, &out);
}

/* A push to the pipe's writer about its readers (Figure 6, #39-#44; Figure 7): addrs[0..n),
 * and for READER_HELD how long the hold lasts. */
static void push_writer(struct spipe *p, uint8_t op, const struct cx_sp_str *addrs, int n, uint32_t hold_ms)
{
    if (!p->writer)
        return;
    struct cx_sp_pipe out;
    pipe_fill(p, &out);
    for (int i = 0; i < n; i++)
        out.addrs[i] = addrs[i];
    out.naddrs = (uint16_t)n;
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, op, 0, NULL);
    cx_sp_encode_pipe(&b, &out);
    if (op == CX_SP_READER_HELD)
        cx_sp_buf_u32(&b, hold_ms);
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .flags = CX_FRAME_F_REPLY,
                             .channel = p->writer_handle};
    if (!b.err)
        conn_send(p->writer, &h, b.p, b.len);
    cx_sp_buf_free(&b);
}

static struct reader_addr *reader_find(struct spipe *p, const char *addr)
{
    for (int i = 0; i < p->nreaders; i++)
        if (strcmp(p->readers[i].addr, addr) == 0)
            return &p->readers[i];
    return NULL;
}

/* Registers a reader's address (owned by c), announcing it to the writer. A held address
 * (its reader is migrating away) stays held: its old process is not to be streamed to. */
static int reader_register(struct spipe *p, struct conn *c, struct cx_sp_str a)
{
    char addr[CX_SP_ADDR_MAX + 1];
    if (cx_sp_str_copy(a, addr, sizeof addr) < 0)
        return -cx_errcode();
    struct reader_addr *r = reader_find(p, addr);
    if (r && r->token)
        return 0;
    if (!r) {
        if (p->nreaders == MAX_READER_ADDRS)
            return cx_err_set(ENOSPC, "pipe '%s' has %d registered readers (the most)", p->name,
                              MAX_READER_ADDRS);
        r = &p->readers[p->nreaders++];
        memset(r, 0, sizeof *r);
        snprintf(r->addr, sizeof r->addr, "%s", addr);
    }
    r->owner = c;
    push_writer(p, CX_SP_READER_JOINED, &a, 1, 0);
    return 0;
}

static int do_get(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct spipe *p;
    int rc = named_pipe(s, q, 1, name, &p);
    if (rc < 0)
        return rc;
    if (q->addr.len && (rc = reader_register(p, c, q->addr)) < 0)
        return rc;
    reply_pipe(c, seq, CX_SP_GET, p, 0);
    return 0;
}

/* Opens p for writing on c under q->handle (PUT, RESUME of a writer). */
static int writer_open(struct conn *c, uint64_t seq, uint8_t op, const struct cx_sp_request *q,
                       struct spipe *p)
{
    struct handle *h = handle_add(c, q->handle);
    if (!h)
        return -cx_errcode();
    h->kind = H_WRITER;
    h->p = p;
    p->writer = c;
    p->writer_handle = q->handle;
    p->writer_token = 0;
    cx_sp_str_copy(q->addr, p->writer_addr, sizeof p->writer_addr);
    reply_pipe(c, seq, op, p, 1);
    return 0;
}

/* The one writer: -EBUSY while another connection writes p or a migrating writer's slot is
 * kept (token: the migrating writer's own, which may take it). */
static int writer_free(struct cx_space_server *s, struct conn *c, struct spipe *p, uint64_t token)
{
    if (p->writer && p->writer != c && conn_hung_up(p->writer))
        conn_free(s, p->writer); /* a crashed writer whose close we had not read yet */
    if (p->writer && p->writer != c)
        return cx_err_set(EBUSY, "pipe '%s' has a writer already (single writer per pipe)", p->name);
    if (p->writer_token && p->writer_token != token)
        return cx_err_set(EBUSY, "pipe '%s' has a writer migrating (its place is kept %.0f ms more)",
                          p->name, p->writer_held_until - now_ms());
    return 0;
}

static int do_put(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct spipe *p;
    int rc = named_pipe(s, q, 1, name, &p);
    if (rc < 0)
        return rc;
    struct cx_seg_stat st;
    cx_segstore_stat(p->seg, &st);
    if ((rc = writer_free(s, c, p, 0)) < 0)
        return rc;
    if (q->mode == CX_SP_CREATE && (st.last_id > 0 || st.ended))
        return cx_err_set(EEXIST, "pipe '%s' exists with %" PRIu64 " segments%s: open it with "
                          "APPEND to resume writing, or unlink it first", name, st.last_id,
                          st.ended ? " and is closed" : "");
    /* a writer may declare another format than the binding's: segments carry their own
     * tokens and readers convert, so this is not an error */
    return writer_open(c, seq, CX_SP_PUT, q, p);
}

/* MIGRATE (cx_space_proto.h): an endpoint leaves for another address; its place is held. */
static int do_migrate(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct spipe *p;
    int rc = named_pipe(s, q, 0, name, &p);
    if (rc < 0)
        return rc;
    uint32_t hold = q->hold_ms ? q->hold_ms : 10000;
    uint64_t token = ++s->next_token ? s->next_token : ++s->next_token; /* never 0 */
    if (q->mode == CX_SP_MIG_WRITER) {
        struct handle *h = handle_find(c, q->handle);
        if (!h || h->kind != H_WRITER || h->p != p || p->writer != c)
            return cx_err_set(EBADF, "handle %u does not write pipe '%s' on this connection", q->handle, name);
        handle_drop(c, h);
        p->writer_token = token;
        p->writer_held_until = now_ms() + hold;
    } else {
        char addr[CX_SP_ADDR_MAX + 1];
        if (!q->addr.len || cx_sp_str_copy(q->addr, addr, sizeof addr) < 0)
            return cx_err_set(EINVAL, "MIGRATE of a reader of '%s' without its address", name);
        struct reader_addr *r = reader_find(p, addr);
        if (!r) { /* not registered (a restarted space): held all the same */
            if (p->nreaders == MAX_READER_ADDRS)
                return cx_err_set(ENOSPC, "pipe '%s' has %d registered readers (the most)", name,
                                  MAX_READER_ADDRS);
            r = &p->readers[p->nreaders++];
            memset(r, 0, sizeof *r);
            snprintf(r->addr, sizeof r->addr, "%s", addr);
        }
        r->owner = NULL;
        r->token = token;
        r->held_until = now_ms() + hold;
        push_writer(p, CX_SP_READER_HELD, &q->addr, 1, hold);
    }
    struct cx_sp_pipe out;
    pipe_fill(p, &out);
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, CX_SP_MIGRATE, 0, NULL);
    cx_sp_encode_pipe(&b, &out);
    cx_sp_buf_u64(&b, token);
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
    return 0;
}

/* RESUME (cx_space_proto.h): the migrated endpoint at its new address. */
static int do_resume(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct cx_name_entry e;
    int rc = named(s, q, 0, name, &e);
    if (rc == 0 && e.pipe_id != q->pipe_id)
        rc = cx_err_set(ENOENT, "pipe '%s' was unlinked (the name now names another pipe)", name);
    struct spipe *p;
    if (rc < 0 || (rc = pipe_get(s, &e, &p)) < 0)
        return rc;
    if (q->mode == CX_SP_MIG_WRITER) {
        if ((rc = writer_free(s, c, p, q->token)) < 0)
            return rc;
        return writer_open(c, seq, CX_SP_RESUME, q, p);
    }
    char addr[CX_SP_ADDR_MAX + 1];
    if (!q->addr.len || cx_sp_str_copy(q->addr, addr, sizeof addr) < 0)
        return cx_err_set(EINVAL, "RESUME of a reader of '%s' without its new address", name);
    int held = -1;
    for (int i = 0; i < p->nreaders && q->token; i++)
        if (p->readers[i].token == q->token)
            held = i;
    if (held < 0) { /* the hold ended (or the space restarted): an attach as any other */
        if ((rc = reader_register(p, c, q->addr)) < 0)
            return rc;
        reply_pipe(c, seq, CX_SP_RESUME, p, 0);
        return 0;
    }
    char old[CX_SP_ADDR_MAX + 1];
    snprintf(old, sizeof old, "%s", p->readers[held].addr);
    p->readers[held] = p->readers[--p->nreaders]; /* the hold ends: old -> new */
    struct reader_addr *r = reader_find(p, addr);
    if (!r) { /* a slot is free: the held one was just removed */
        r = &p->readers[p->nreaders++];
        memset(r, 0, sizeof *r);
        snprintf(r->addr, sizeof r->addr, "%s", addr);
    }
    r->token = 0;
    r->owner = c;
    struct cx_sp_str moved[2] = {{old, (uint16_t)strlen(old)}, q->addr};
    push_writer(p, CX_SP_READER_MOVED, moved, 2, 0);
    reply_pipe(c, seq, CX_SP_RESUME, p, 0);
    return 0;
}

static int do_read(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct spipe *p;
    int rc = named_pipe(s, q, 0, name, &p);
    if (rc < 0)
        return rc;
    struct handle *h = handle_add(c, q->handle);
    if (!h)
        return -cx_errcode();
    h->kind = H_READER;
    h->p = p;
    cx_segstore_iter_init(p->seg, q->from_id, &h->it);
    reply_pipe(c, seq, CX_SP_READ, p, 0);
    pump_reader(s, c, h);
    return 0;
}

static int do_unlink(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct cx_name_entry e;
    int rc = named(s, q, 0, name, &e);
    if (rc < 0)
        return rc;
    struct spipe *p = pipe_find(s, e.pipe_id);
    if (p && p->writer) /* the paper: pi_unlink returns -1 for open pipes */
        return cx_err_set(EBUSY, "pipe '%s' is open for writing; close it first", name);
    struct cx_sp_pipe out = {.pipe_id = e.pipe_id, .format = e.format};
    if (p) {
        pipe_fill(p, &out);
        /* readers still streaming it see it end where it is */
        for (struct conn *k = s->conns; k; k = k->next)
            for (size_t i = 0; i < k->nh;)
                if (k->h[i].p == p) {
                    struct cx_frame_hdr end = {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_END,
                                               .channel = k->h[i].id, .seq = cx_segstore_iter_tell(&k->h[i].it)};
                    conn_send(k, &end, NULL, 0);
                    handle_drop(k, &k->h[i]);
                } else {
                    i++;
                }
        pipe_close(s, p);
    }
    if ((rc = cx_nametable_unlink(s->names, name, NULL)) < 0)
        return rc;
    char store_name[CX_PIPE_NAME_LEN];
    cx_nametable_pipe_name(e.pipe_id, store_name);
    rc = cx_segstore_pipe_unlink(s->store, store_name);
    if (rc < 0 && rc != -ENOENT)
        logf_(s, "unlink '%s': the name is free but its log stays: %s", name, cx_errmsg());
    reply_info(c, seq, CX_SP_UNLINK, &out);
    return 0;
}

static int do_lookup(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct cx_name_entry e;
    int rc = named(s, q, 0, name, &e);
    if (rc < 0)
        return rc;
    struct spipe *p = pipe_find(s, e.pipe_id);
    if (p) {
        reply_pipe(c, seq, CX_SP_LOOKUP, p, 0);
        return 0;
    }
    struct cx_sp_pipe out = {.pipe_id = e.pipe_id, .format = e.format};
    reply_info(c, seq, CX_SP_LOOKUP, &out);
    return 0;
}

/* Counts one link of transport t (a scheme, not NUL-terminated) in st. */
static void stats_link(struct cx_sp_stats *st, const char *t, size_t len)
{
    for (uint16_t i = 0; i < st->nlinks; i++)
        if (st->links[i].transport.len == len && memcmp(st->links[i].transport.p, t, len) == 0) {
            st->links[i].count++;
            return;
        }
    if (st->nlinks < CX_SP_MAX_LINKS) { /* more transports than that: the rest go uncounted */
        st->links[st->nlinks].transport = (struct cx_sp_str){t, (uint16_t)len};
        st->links[st->nlinks++].count = 1;
    }
}

/* STATS (cx_space_proto.h says what each number means): the pipe as LOOKUP shows it, then
 * its readers, stored bytes and segments, and its links per transport. */
static int do_stats(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1];
    struct spipe *p;
    int rc = named_pipe(s, q, 0, name, &p);
    if (rc < 0)
        return rc;
    struct cx_sp_pipe out;
    pipe_fill(p, &out);
    if (p->writer_addr[0] && p->writer)
        out.addrs[out.naddrs++] = (struct cx_sp_str){p->writer_addr, (uint16_t)strlen(p->writer_addr)};
    struct cx_seg_stat ss;
    cx_segstore_stat(p->seg, &ss);
    struct cx_sp_stats st = {.bytes = ss.bytes, .segments = ss.segments};
    for (struct conn *k = s->conns; k; k = k->next)
        for (size_t i = 0; i < k->nh; i++)
            if (k->h[i].p == p && (k->h[i].kind == H_READER ||
                                   (p->writer == k && p->writer_handle == k->h[i].id))) {
                st.readers += k->h[i].kind == H_READER;
                stats_link(&st, k->scheme, strlen(k->scheme));
            }
    for (int i = 0; p->writer && i < p->nreaders; i++) {
        if (p->readers[i].token)
            continue; /* held: its writer does not stream to it */
        const char *a = p->readers[i].addr, *sep = strstr(a, "://");
        if (sep)
            stats_link(&st, a, (size_t)(sep - a));
        else
            stats_link(&st, "unknown", 7);
    }
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, CX_SP_STATS, 0, NULL);
    cx_sp_encode_pipe(&b, &out);
    cx_sp_encode_stats(&b, &st);
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
    return 0;
}

static void cursor_entry(void *arg, const char *name, uint64_t pos)
{
    cx_sp_buf_str(arg, name, strlen(name));
    cx_sp_buf_u64(arg, pos);
}

/* CURSOR_SET / CURSOR_GET / CURSOR_LIST: named readers' positions (cx_segcursor.h). */
static int do_cursor(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1], cursor[CX_CURSOR_NAME_MAX + 1] = "";
    struct spipe *p;
    if (q->op != CX_SP_CURSOR_LIST && cx_sp_str_copy(q->cursor, cursor, sizeof cursor) < 0)
        return cx_err_set(EINVAL, "cursor name of %u bytes (max %d)", q->cursor.len, CX_CURSOR_NAME_MAX);
    int rc = q->op == CX_SP_CURSOR_LIST ? 0 : cx_cursor_name_check(cursor);
    if (rc < 0 || (rc = named_pipe(s, q, 0, name, &p)) < 0)
        return rc;
    if (q->op == CX_SP_CURSOR_SET && q->pipe_id && q->pipe_id != p->pipe_id)
        return cx_err_set(ENOENT, "pipe '%s' is not pipe %" PRIu64 " any more (unlinked)", name, q->pipe_id);
    struct cx_sp_buf b = {0};
    uint64_t pos = 0;
    if (q->op == CX_SP_CURSOR_SET)
        rc = cx_segcursor_set(p->seg, cursor, q->from_id);
    else if (q->op == CX_SP_CURSOR_GET)
        rc = cx_segcursor_get(p->seg, cursor, &pos);
    if (rc < 0)
        return cx_err_wrap(rc, "pipe '%s'", name);
    cx_sp_encode_reply_head(&b, q->op, 0, NULL);
    if (q->op == CX_SP_CURSOR_GET)
        cx_sp_buf_u64(&b, pos);
    if (q->op == CX_SP_CURSOR_LIST) {
        size_t at = b.len;
        cx_sp_buf_u32(&b, 0);
        long n = cx_segcursor_list(p->seg, cursor_entry, &b);
        if (n < 0) {
            cx_sp_buf_free(&b);
            return cx_err_wrap((int)n, "pipe '%s'", name);
        }
        if (!b.err)
            for (int i = 0; i < 4; i++)
                b.p[at + (size_t)i] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
    return 0;
}

/* The pipe's group called name, made with its stored floor at first use. */
static struct cx_spgroup *group_load(struct spipe *p, const char *group)
{
    struct cx_spgroup *g = cx_spgroup_get(&p->groups, group, 0, 0);
    if (g)
        return g;
    uint64_t floor = 0;
    int rc = cx_segfloor_get(p->seg, group, &floor);
    if (rc < 0 && rc != -ENOENT)
        return NULL;
    return cx_spgroup_get(&p->groups, group, 1, floor);
}

static void floor_entry(void *arg, const char *group, uint64_t floor)
{
    (void)floor;
    if (!group_load(arg, group))
        fprintf(stderr, "confluxd space: group '%s': %s\n", group, cx_errmsg());
}

/* GROUP_NEXT's segment: the lease's bytes from the log. A segment retention dropped counts
 * as processed (nobody can have it): the next lease is tried. */
static int group_next(struct cx_space_server *s, struct spipe *p, struct cx_spgroup *g,
                      uint64_t member, struct cx_spgroup_lease *l, struct cx_seg_info *info, long *len)
{
    for (;;) {
        struct cx_seg_stat st;
        cx_segstore_stat(p->seg, &st);
        int rc = cx_spgroup_next(g, member, st.last_id, st.ended, now_ms(), l);
        if (rc < 0)
            return rc;
        long n = cx_segstore_read(p->seg, l->pos + 1, s->scratch, s->scratch_cap, info);
        if (n == -EMSGSIZE) {
            void *np = realloc(s->scratch, info->length);
            if (np) {
                s->scratch = np;
                s->scratch_cap = info->length;
                n = cx_segstore_read(p->seg, l->pos + 1, s->scratch, s->scratch_cap, info);
            }
        }
        if (n >= 0)
            return *len = n, 0;
        if (n == -ENODATA) {
            logf_(s, "pipe '%s' group '%s': segment %" PRIu64 " was dropped by retention: skipped",
                  p->name, g->name, l->pos);
            if (cx_spgroup_ack(g, member, &l->pos, 1, now_ms()) == 1)
                cx_segfloor_set(p->seg, g->name, g->floor);
            continue;
        }
        char msg[256];
        snprintf(msg, sizeof msg, "%s", cx_errmsg());
        cx_spgroup_unlease(g, member, l->pos);
        return cx_err_set((int)-n, "segment %" PRIu64 ": %s", l->pos, msg);
    }
}

/* GROUP_*: reader groups (cx_spgroup.h). */
static int do_group(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    char name[CX_SPACE_NAME_MAX + 1], group[CX_GROUP_NAME_MAX + 1] = "";
    struct spipe *p;
    if (q->op != CX_SP_GROUP_LIST && cx_sp_str_copy(q->cursor, group, sizeof group) < 0)
        return cx_err_set(EINVAL, "group name of %u bytes (max %d)", q->cursor.len, CX_GROUP_NAME_MAX);
    int rc = q->op == CX_SP_GROUP_LIST ? 0 : cx_cursor_name_check(group);
    if (rc < 0)
        return cx_err_wrap(rc, "group name (cursor names' rules)");
    if ((rc = named_pipe(s, q, q->op == CX_SP_GROUP_JOIN, name, &p)) < 0)
        return rc;
    struct cx_spgroup *g = q->op == CX_SP_GROUP_LIST ? NULL : group_load(p, group);
    if (q->op != CX_SP_GROUP_LIST && !g)
        return cx_err_wrap(-cx_errcode(), "pipe '%s' group '%s'", name, group);
    struct cx_sp_buf b = {0};
    uint64_t member = 0;
    struct cx_spgroup_lease l;
    struct cx_seg_info info;
    long len = 0;
    switch (q->op) {
    case CX_SP_GROUP_JOIN: rc = cx_spgroup_join(g, c, q->hold_ms, &member); break;
    case CX_SP_GROUP_NEXT: rc = group_next(s, p, g, q->token, &l, &info, &len); break;
    case CX_SP_GROUP_LEAVE: rc = cx_spgroup_leave(g, q->token); break;
    case CX_SP_GROUP_ACK: {
        uint64_t pos[CX_SP_GROUP_ACK_MAX];
        size_t n = q->blob_len / 8;
        for (size_t i = 0; i < n; i++) {
            pos[i] = 0;
            for (int k = 0; k < 8; k++)
                pos[i] |= (uint64_t)q->blob[8 * i + (size_t)k] << (8 * k);
        }
        rc = cx_spgroup_ack(g, q->token, pos, n, now_ms());
        if (rc == 1 && (rc = cx_segfloor_set(p->seg, group, g->floor)) < 0)
            logf_(s, "pipe '%s' group '%s': floor %" PRIu64 " not stored: %s", name, group, g->floor,
                  cx_errmsg());
        break;
    }
    case CX_SP_GROUP_LIST: {
        long nf = cx_segfloor_list(p->seg, floor_entry, p);
        if (nf < 0)
            return cx_err_wrap((int)nf, "pipe '%s'", name);
        uint32_t count = 0;
        for (struct cx_spgroup *it = p->groups; it; it = it->next_group)
            count++;
        cx_sp_encode_reply_head(&b, q->op, 0, NULL);
        cx_sp_buf_u32(&b, count);
        for (struct cx_spgroup *it = p->groups; it; it = it->next_group) {
            cx_spgroup_expire(it, now_ms());
            cx_sp_buf_str(&b, it->name, strlen(it->name));
            cx_sp_buf_u64(&b, it->floor);
            cx_sp_buf_u64(&b, it->next);
            cx_sp_buf_u16(&b, (uint16_t)it->nmember);
            for (int i = 0; i < it->nmember; i++) {
                cx_sp_buf_u64(&b, it->member[i].id);
                cx_sp_buf_u32(&b, (uint32_t)it->member[i].nlease);
            }
        }
        reply(c, CX_FRAME_LOOKUP, seq, &b);
        cx_sp_buf_free(&b);
        return 0;
    }
    }
    if (rc < 0)
        return rc == -EAGAIN ? rc : cx_err_wrap(rc, "pipe '%s'", name);
    cx_sp_encode_reply_head(&b, q->op, 0, NULL);
    if (q->op == CX_SP_GROUP_JOIN) {
        cx_sp_buf_u64(&b, member);
        cx_sp_buf_u64(&b, g->floor);
    } else if (q->op == CX_SP_GROUP_NEXT) {
        cx_sp_buf_u64(&b, l.pos);
        cx_sp_buf_u32(&b, l.deliveries);
        cx_sp_buf_u64(&b, info.format);
        cx_sp_buf_blob(&b, s->scratch, (uint32_t)len);
    }
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
    return 0;
}

static int do_list(struct cx_space_server *s, struct conn *c, uint64_t seq)
{
    size_t n = cx_nametable_list(s->names, NULL, 0);
    struct cx_name_entry *all = n ? malloc(n * sizeof *all) : NULL;
    if (n && !all)
        return cx_err_set(ENOMEM, "list");
    n = cx_nametable_list(s->names, all, n);
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, CX_SP_LIST, 0, NULL);
    cx_sp_buf_u32(&b, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        cx_sp_buf_str(&b, all[i].name, strlen(all[i].name));
        cx_sp_buf_u64(&b, all[i].pipe_id);
        cx_sp_buf_u64(&b, all[i].format);
    }
    reply(c, CX_FRAME_LOOKUP, seq, &b);
    cx_sp_buf_free(&b);
    free(all);
    return 0;
}

static int do_format(struct cx_space_server *s, struct conn *c, uint64_t seq, const struct cx_sp_request *q)
{
    struct cx_sp_buf b = {0};
    int rc;
    if (q->op == CX_SP_FMT_PUT) {
        uint64_t token;
        if ((rc = cx_space_formats_put(s->formats, q->blob, q->blob_len, &token)) < 0)
            return rc;
        cx_sp_encode_reply_head(&b, q->op, 0, NULL);
        cx_sp_buf_u64(&b, token);
    } else {
        uint8_t *desc;
        size_t len;
        if ((rc = cx_space_formats_get(s->formats, q->token, &desc, &len)) < 0)
            return rc;
        cx_sp_encode_reply_head(&b, q->op, 0, NULL);
        cx_sp_buf_blob(&b, desc, (uint32_t)len);
        free(desc);
    }
    reply(c, CX_FRAME_FORMAT, seq, &b);
    cx_sp_buf_free(&b);
    return 0;
}

static void on_request(struct conn *c, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct cx_space_server *s = c->s;
    struct cx_sp_request q;
    STAT_ADD(s, requests, 1);
    int rc = cx_sp_decode_request(payload, len, &q);
    if (rc == 0 && h->type == CX_FRAME_FORMAT && q.op != CX_SP_FMT_PUT && q.op != CX_SP_FMT_GET)
        rc = cx_err_set(EPROTO, "%s sent in a FORMAT frame", cx_sp_op_name(q.op));
    if (rc == 0) {
        switch (q.op) {
        case CX_SP_LOOKUP: rc = do_lookup(s, c, h->seq, &q); break;
        case CX_SP_GET: rc = do_get(s, c, h->seq, &q); break;
        case CX_SP_PUT: rc = do_put(s, c, h->seq, &q); break;
        case CX_SP_READ: rc = do_read(s, c, h->seq, &q); break;
        case CX_SP_UNLINK: rc = do_unlink(s, c, h->seq, &q); break;
        case CX_SP_LIST: rc = do_list(s, c, h->seq); break;
        case CX_SP_STATS: rc = do_stats(s, c, h->seq, &q); break;
        case CX_SP_MIGRATE: rc = do_migrate(s, c, h->seq, &q); break;
        case CX_SP_RESUME: rc = do_resume(s, c, h->seq, &q); break;
        case CX_SP_CURSOR_SET:
        case CX_SP_CURSOR_GET:
        case CX_SP_CURSOR_LIST: rc = do_cursor(s, c, h->seq, &q); break;
        case CX_SP_GROUP_JOIN:
        case CX_SP_GROUP_NEXT:
        case CX_SP_GROUP_ACK:
        case CX_SP_GROUP_LEAVE:
        case CX_SP_GROUP_LIST: rc = do_group(s, c, h->seq, &q); break;
        case CX_SP_FMT_PUT:
        case CX_SP_FMT_GET: rc = do_format(s, c, h->seq, &q); break;
        case CX_SP_STOP: {
            struct handle *hd = handle_find(c, q.handle);
            if (hd)
                handle_drop(c, hd);
            struct cx_sp_buf b = {0};
            cx_sp_encode_reply_head(&b, CX_SP_STOP, 0, NULL);
            reply(c, h->type, h->seq, &b);
            cx_sp_buf_free(&b);
            break;
        }
        default: rc = cx_err_set(EPROTO, "op %s is not a request", cx_sp_op_name(q.op));
        }
    }
    if (rc < 0)
        reply_error(c, h->type, h->seq, len ? ((const uint8_t *)payload)[0] : 0, rc);
}

/* A writer's segment (or its END). Acks are sent once per progress batch (conn_poll). */
static void on_segment(struct conn *c, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct cx_space_server *s = c->s;
    struct handle *hd = handle_find(c, h->channel);
    if (!hd || hd->kind != H_WRITER) {
        cx_err_set(EBADF, "segment %" PRIu64 " on handle %u, which is not open for writing here",
                   h->seq, h->channel);
        push_handle_error(c, h->channel, CX_SP_PUT, -EBADF);
        return;
    }
    struct spipe *p = hd->p;
    int rc;
    struct cx_seg_stat st;
    if (h->flags & CX_FRAME_F_END) {
        cx_segstore_stat(p->seg, &st);
        if (hd->refused) /* storing END now would end the pipe short, silently */
            rc = cx_err_set(EPIPE, "END refused: segment %" PRIu64 " was refused, the pipe "
                            "would end short (open it with APPEND and write from there)",
                            hd->refused);
        else if (h->seq > st.last_id)
            rc = cx_err_set(EPIPE, "END after segment %" PRIu64 " refused: only %" PRIu64
                            " are stored", h->seq, st.last_id);
        else
            rc = cx_segstore_end(p->seg);
    } else if (!payload) {
        rc = cx_err_set(EMSGSIZE, "segment %" PRIu64 " of %u bytes exceeds this space's limit "
                        "of %u", h->seq, h->length, s->opts.max_segment);
    } else if (len > s->opts.max_segment) {
        rc = cx_err_set(EMSGSIZE, "segment %" PRIu64 " of %zu bytes exceeds this space's limit of %u",
                        h->seq, len, s->opts.max_segment);
    } else {
        struct iovec iov = {(void *)payload, len};
        rc = cx_segstore_append(p->seg, h->seq, h->format, &iov, 1);
        if (rc == 0) {
            STAT_ADD(s, segments_in, 1);
            STAT_ADD(s, bytes_in, len);
        }
    }
    if (rc < 0) {
        if (!hd->refused && !(h->flags & CX_FRAME_F_END))
            hd->refused = h->seq ? h->seq : 1;
        cx_err_wrap(rc, "pipe '%s'", p->name);
        if (rc == -ENOSPC || rc == -EIO || rc == -EDQUOT)
            logf_(s, "%s", cx_errmsg());
        push_handle_error(c, hd->id, CX_SP_PUT, rc);
        return;
    }
    if (h->seq > hd->ack_due)
        hd->ack_due = h->seq;
    hd->ack_pending = 1;
    if (h->flags & CX_FRAME_F_END)
        hd->end_acked = 1;
    p->pump_due = 1; /* its readers are pushed once the batch is in (conn_poll) */
}

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    struct conn *c = arg;
    if (c->dead)
        return;
    c->got_frame = 1;
    c->last_rx = now_ms();
    if (!payload && h->length) { /* over the link's limit: its bytes were dropped unread */
        if (h->type == CX_FRAME_DATA) {
            on_segment(c, h, NULL, 0);
        } else if ((h->type == CX_FRAME_LOOKUP || h->type == CX_FRAME_FORMAT) &&
                   !(h->flags & CX_FRAME_F_REPLY)) {
            cx_err_set(EMSGSIZE, "a request of %u bytes exceeds this space's limit", h->length);
            reply_error(c, h->type, h->seq, 0, -EMSGSIZE);
        }
        return;
    }
    switch (h->type) {
    case CX_FRAME_LOOKUP:
    case CX_FRAME_FORMAT:
        if (!(h->flags & CX_FRAME_F_REPLY))
            on_request(c, h, payload, len);
        break;
    case CX_FRAME_DATA:
        on_segment(c, h, payload, len);
        break;
    default: /* acks and control frames from clients carry nothing for the server */
        break;
    }
}

/* ---- connections on the engine ----------------------------------------------------- */

static void conn_free(struct cx_space_server *s, struct conn *c)
{
    for (struct conn **pp = &s->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (struct spipe *p = s->pipes; p; p = p->next) {
        if (p->writer == c)
            p->writer = NULL;
        reader_forget_conn(p, c);
        cx_spgroup_owner_gone(p->groups, c); /* its members' leases go to the others */
    }
    if (c->src >= 0)
        cx_engine_remove(s->engine, c->src);
    cx_link_close(c->link);
    free(c->h);
    free(c);
    s->nconns--;
    __atomic_fetch_sub(&s->stats.clients, 1, __ATOMIC_RELAXED);
}

/* Closes a client for a reason worth a (rate-limited) log line. */
static void conn_drop(struct cx_space_server *s, struct conn *c, const char *why)
{
    logc_(s, "client %s (%s): %s: closed", c->peer, c->scheme, why);
    STAT_ADD(s, clients_dropped, 1);
    conn_free(s, c);
}

static int conn_poll(void *ctx, int budget)
{
    struct conn *c = ctx;
    struct cx_space_server *s = c->s;
    int n = cx_link_progress(c->link, on_frame, c, budget);
    for (size_t i = 0; i < c->nh; i++) { /* readers of what this batch appended */
        struct handle *h = &c->h[i];
        if (h->kind == H_WRITER && h->p->pump_due) {
            h->p->pump_due = 0;
            pump_pipe_readers(s, h->p);
        }
    }
    if (n < 0 || c->dead)
        return n < 0 ? n : -ECONNRESET;
    if (cx_link_pending(c->link) > OUT_MAX) /* replies pile up: it stopped reading them */
        return cx_err_set(ENOBUFS, "%zu bytes of replies unread (limit %u)",
                          cx_link_pending(c->link), OUT_MAX);
    for (size_t i = 0; i < c->nh; i++) {
        struct handle *h = &c->h[i];
        if (h->kind == H_WRITER && h->ack_pending && s->opts.pipe.defer_sync) {
            /* group commit: one fdatasync for the batch just appended, before its ack */
            int rc = cx_segstore_sync(h->p->seg);
            if (rc < 0) {
                cx_err_wrap(rc, "pipe '%s'", h->p->name);
                push_handle_error(c, h->id, CX_SP_PUT, rc);
                h->ack_pending = 0;
                continue;
            }
        }
        if (h->kind == H_WRITER && h->ack_pending) {
            struct cx_frame_hdr a = {.type = CX_FRAME_ACK, .flags = CX_FRAME_F_ACK,
                                     .channel = h->id, .ack = h->ack_due};
            if (h->end_acked)
                a.flags |= CX_FRAME_F_END;
            conn_send(c, &a, NULL, 0);
            h->ack_pending = 0;
            n++;
        } else if (h->kind == H_READER) {
            n += pump_reader(s, c, h);
        }
    }
    return c->dead ? -ECONNRESET : n;
}

static int conn_arm(void *ctx)
{
    struct conn *c = ctx;
    return cx_link_arm(c->link);
}

static void conn_error(void *ctx, int rc)
{
    struct conn *c = ctx;
    if (rc == -ECONNRESET || rc == -EPIPE) /* it left: nothing to report */
        conn_free(c->s, c);
    else /* a bad frame, a refused or late handshake, unread output */
        conn_drop(c->s, c, cx_errmsg());
}

/* Sends a frame over the link's limit to on_frame by its header alone (cx_driver.h). */
static void on_oversize(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    (void)payload, (void)len;
    on_frame(arg, h, NULL, 0);
}

/* Takes and closes one pending connection without a link: for a server at its client limit,
 * or out of fds (then the spare fd is given up for the moment, so accept cannot spin on a
 * connection it can never take). */
static void refuse_pending(struct cx_space_server *s, struct cx_space_accept *a, const char *why,
                           int out_of_fds)
{
    int lfd = a->ops->listener_fd(a->listener);
    int spare = s->spare_fd >= 0 && out_of_fds;
    if (spare) {
        close(s->spare_fd);
        s->spare_fd = -1;
    }
    STAT_ADD(s, clients_refused, 1); /* before the close: whoever sees it sees the count */
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0)
        close(fd);
    if (spare)
        s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    logc_(s, "connection on %s refused: %s", a->ops->listener_addr(a->listener), why);
}

static void conn_peer(struct conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = cx_link_fd(c->link);
    snprintf(c->peer, sizeof c->peer, "?");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
        return;
    char ip[INET6_ADDRSTRLEN] = "";
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(in6->sin6_port));
    } else {
        snprintf(c->peer, sizeof c->peer, "local");
    }
}

static int accept_poll(void *ctx, int budget)
{
    struct cx_space_accept *a = ctx;
    struct cx_space_server *s = a->s;
    int n = 0;
    while (n < budget) {
        if (s->nconns >= s->opts.max_clients) {
            struct pollfd pf = {.fd = a->ops->listener_fd(a->listener), .events = POLLIN};
            if (poll(&pf, 1, 0) != 1)
                break;
            /* room for the newcomer: the oldest client that never sent a frame goes first
             * (silent connections must not lock everyone out until their deadline) */
            struct conn *old = NULL;
            for (struct conn *c = s->conns; c; c = c->next)
                if (!c->got_frame && (!old || c->born < old->born))
                    old = c;
            if (old) {
                char why[96];
                snprintf(why, sizeof why, "evicted for a newcomer: %d clients (max_clients), "
                         "none sent by this one", s->nconns);
                conn_drop(s, old, why);
                continue;
            }
            char why[96];
            snprintf(why, sizeof why, "%d clients connected (max_clients)", s->nconns);
            refuse_pending(s, a, why, 0);
            n++;
            continue;
        }
        struct cx_link *k;
        int rc = cx_listener_accept(a->ops, a->listener, s->opts.first_frame_ms, &k);
        if (rc == -ETIMEDOUT || rc == -EAGAIN)
            break;
        if (rc == -EMFILE || rc == -ENFILE) {
            char why[160];
            snprintf(why, sizeof why, "out of file descriptors (%s) with %d clients",
                     strerror(-rc), s->nconns);
            refuse_pending(s, a, why, 1);
            break;
        }
        if (rc < 0) {
            logc_(s, "accept failed: %s", cx_errmsg());
            break;
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c) {
            cx_link_close(k);
            break;
        }
        c->s = s;
        c->link = k;
        c->scheme = a->ops->scheme ? a->ops->scheme : "unknown";
        c->born = c->last_rx = now_ms();
        conn_peer(c);
        /* what one frame may make us allocate: max_segment (requests are far smaller) */
        struct cx_link_limits lim = {.max_msg = s->opts.max_segment > MIN_FRAME
                                                    ? s->opts.max_segment : MIN_FRAME,
                                     .on_oversize = on_oversize};
        cx_link_set_limits(k, &lim); /* drivers without it keep the protocol's maximum */
        struct cx_driver_caps caps;
        cx_link_caps(k, &caps);
        struct cx_engine_source src = {.name = "space-client", .poll = conn_poll, .arm = conn_arm,
                                       .on_error = conn_error, .ctx = c, .fd = cx_link_fd(k),
                                       .cost = caps.poll_cost ? caps.poll_cost : 8};
        c->next = s->conns;
        s->conns = c;
        s->nconns++;
        STAT_ADD(s, clients, 1);
        c->src = cx_engine_add(s->engine, &src);
        if (c->src < 0) {
            logf_(s, "client refused: %s", cx_errmsg());
            conn_free(s, c);
            break;
        }
        n++;
    }
    return n;
}

/* The fsync interval: every open pipe gets its due sync from this timer. */
static int timer_poll(void *ctx, int budget)
{
    struct cx_space_server *s = ctx;
    (void)budget;
    uint64_t ticks;
    if (read(s->timer_fd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
        return 0;
    for (struct spipe *p = s->pipes; p; p = p->next)
        if (cx_segstore_sync_due(p->seg) < 0)
            logf_(s, "pipe '%s': fsync failed: %s", p->name, cx_errmsg());
    return 1;
}

/* Per-connection deadlines: a first frame (after the TLS handshake) within first_frame_ms,
 * and, with idle_ms, some frame within idle_ms from a client with no pipe open. */
static int sweep_poll(void *ctx, int budget)
{
    struct cx_space_server *s = ctx;
    (void)budget;
    uint64_t ticks;
    if (read(s->sweep_fd, &ticks, sizeof ticks) != (ssize_t)sizeof ticks)
        return 0;
    double t = now_ms();
    struct conn *next;
    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        char why[400];
        if (!c->got_frame && t - c->born >= s->opts.first_frame_ms) {
            /* a TLS link reports its own late handshake from progress */
            int rc = cx_link_progress(c->link, on_frame, c, 1);
            if (c->got_frame && rc >= 0)
                continue;
            if (rc < 0)
                snprintf(why, sizeof why, "%s", cx_errmsg());
            else
                snprintf(why, sizeof why, "no complete first frame within %d ms",
                         s->opts.first_frame_ms);
            conn_drop(s, c, why);
        } else if (s->opts.idle_ms > 0 && c->got_frame && c->nh == 0 &&
                   t - c->last_rx >= s->opts.idle_ms) {
            snprintf(why, sizeof why, "idle for %d ms with no pipe open", s->opts.idle_ms);
            conn_drop(s, c, why);
        }
    }
    return 1;
}

/* max_clients: the default, and never more than half the fds (the rest: pipes, the store). */
static int clients_cap(int want)
{
    struct rlimit rl;
    int cap = 3000;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < 3000)
        cap = rl.rlim_cur > 64 ? (int)(rl.rlim_cur / 2) : 16;
    return want > 0 && want < cap ? want : cap;
}

/* ---- start / stop ------------------------------------------------------------------ */

int cx_space_server_start(const struct cx_space_server_opts *o, struct cx_space_server **out)
{
    if (!out)
        return cx_err_set(EINVAL, "space server: no pointer for the server");
    if (!o || !o->dir || !*o->dir)
        return cx_err_set(EINVAL, "space server: a store directory is required");
    struct cx_space_server *s = calloc(1, sizeof *s);
    if (!s)
        return cx_err_set(ENOMEM, "space server");
    s->opts = *o;
    if (!s->opts.listen)
        s->opts.listen = "tcp://127.0.0.1:0";
    if (!s->opts.max_segment)
        s->opts.max_segment = 64u << 20;
    if (s->opts.udp_threads <= 0)
        s->opts.udp_threads = 1;
    s->opts.max_clients = clients_cap(s->opts.max_clients);
    if (s->opts.first_frame_ms <= 0)
        s->opts.first_frame_ms = 5000;
    if (s->opts.idle_ms < 0)
        s->opts.idle_ms = 0;
    /* fsync every: appends of a progress batch share one fdatasync, run before their ack
     * (conn_poll); an ack still means "on disk" */
    s->opts.pipe.defer_sync = s->opts.pipe.fsync == CX_SEG_FSYNC_EVERY;
    s->timer_fd = s->sweep_fd = s->udp_fd = s->udp_stop_fd = -1;
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    struct timespec seed;
    clock_gettime(CLOCK_REALTIME, &seed); /* tokens of a restarted space differ from its past ones */
    s->next_token = ((uint64_t)seed.tv_nsec << 32) ^ (uint64_t)seed.tv_sec ^ ((uint64_t)getpid() << 16);
    int rc;
    if (mkdir(o->dir, 0755) != 0 && errno != EEXIST) {
        rc = cx_err_set(errno, "space server: mkdir %s: %s", o->dir, strerror(errno));
        goto fail;
    }
    if ((rc = cx_segstore_open(o->dir, &s->store)) < 0 ||
        (rc = cx_nametable_open(o->dir, &s->names)) < 0 ||
        (rc = cx_space_formats_open(o->dir, &s->formats)) < 0)
        goto fail;
    if (!(s->link_ops = cx_driver_for(s->opts.listen))) {
        rc = -EINVAL;
        goto fail;
    }
    if ((rc = s->link_ops->listen(s->opts.listen, &s->listener)) < 0)
        goto fail;
    snprintf(s->addr, sizeof s->addr, "%s", s->link_ops->listener_addr(s->listener));
    s->acc[0] = (struct cx_space_accept){s, s->link_ops, s->listener};
    if (s->opts.listen2 && *s->opts.listen2) {
        struct cx_space_accept *a2 = &s->acc[1];
        if (!(a2->ops = cx_driver_for(s->opts.listen2))) {
            rc = cx_err_set(EINVAL, "second address '%s': no driver for it", s->opts.listen2);
            goto fail;
        }
        if ((rc = a2->ops->listen(s->opts.listen2, &a2->listener)) < 0) {
            rc = cx_err_wrap(rc, "second address '%s'", s->opts.listen2);
            goto fail;
        }
        a2->s = s;
        snprintf(s->addr2, sizeof s->addr2, "%s", a2->ops->listener_addr(a2->listener));
    }
    if ((rc = cx_space_udp_start(s)) < 0)
        goto fail;
    if ((rc = cx_engine_create(&cx_idle_block, &s->engine)) < 0)
        goto fail;
    for (int i = 0; i < 2; i++) {
        if (!s->acc[i].listener)
            continue;
        struct cx_engine_source acc = {.name = "space-accept", .poll = accept_poll, .ctx = &s->acc[i],
                                       .fd = s->acc[i].ops->listener_fd(s->acc[i].listener), .cost = 8};
        if ((rc = cx_engine_add(s->engine, &acc)) < 0)
            goto fail;
    }
    if (s->opts.pipe.fsync == CX_SEG_FSYNC_INTERVAL && s->opts.pipe.fsync_interval_ms) {
        s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        uint32_t ms = s->opts.pipe.fsync_interval_ms;
        struct itimerspec its = {.it_interval = {ms / 1000, (long)(ms % 1000) * 1000000},
                                 .it_value = {ms / 1000, (long)(ms % 1000) * 1000000}};
        timerfd_settime(s->timer_fd, 0, &its, NULL);
        struct cx_engine_source tm = {.name = "space-fsync", .poll = timer_poll, .ctx = s,
                                      .fd = s->timer_fd, .cost = 8};
        if ((rc = cx_engine_add(s->engine, &tm)) < 0)
            goto fail;
    }
    s->sweep_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s->sweep_fd < 0) {
        rc = cx_err_set(errno, "timerfd: %s", strerror(errno));
        goto fail;
    }
    struct itimerspec sw = {.it_interval = {0, SWEEP_MS * 1000000L}, .it_value = {0, SWEEP_MS * 1000000L}};
    timerfd_settime(s->sweep_fd, 0, &sw, NULL);
    struct cx_engine_source swsrc = {.name = "space-deadlines", .poll = sweep_poll, .ctx = s,
                                     .fd = s->sweep_fd, .cost = 8};
    if ((rc = cx_engine_add(s->engine, &swsrc)) < 0)
        goto fail;
    if ((rc = cx_engine_start(s->engine)) < 0)
        goto fail;
    logf_(s, "serving %s%s%s (udp %s) from %s; up to %d clients, first frame within %d ms, "
          "idle timeout %s%d ms, frames up to %u bytes", s->addr, s->addr2[0] ? " and " : "",
          s->addr2, s->udp_addr[0] ? s->udp_addr : "off", o->dir, s->opts.max_clients,
          s->opts.first_frame_ms, s->opts.idle_ms ? "" : "off/", s->opts.idle_ms,
          s->opts.max_segment > MIN_FRAME ? s->opts.max_segment : MIN_FRAME);
    *out = s;
    return 0;
fail:
    rc = cx_err_wrap(rc, "space server");
    {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cx_errmsg());
        cx_space_server_stop(s);
        cx_err_set(-rc, "%s", msg);
    }
    return rc;
}

const char *cx_space_server_addr(struct cx_space_server *s) { return s ? s->addr : ""; }
const char *cx_space_server_addr2(struct cx_space_server *s) { return s ? s->addr2 : ""; }
const char *cx_space_server_udp_addr(struct cx_space_server *s) { return s ? s->udp_addr : ""; }

void cx_space_server_stats(struct cx_space_server *s, struct cx_space_server_stats *out)
{
    if (!out)
        return;
    if (!s) {
        memset(out, 0, sizeof *out);
        return;
    }
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *out = s->stats;
    out->names = s->names ? cx_nametable_list(s->names, NULL, 0) : 0;
    out->formats = s->formats ? cx_space_formats_count(s->formats) : 0;
}

void cx_space_server_stop(struct cx_space_server *s)
{
    if (!s)
        return;
    if (s->engine)
        cx_engine_destroy(s->engine); /* the engine thread is gone from here on */
    s->engine = NULL;
    cx_space_udp_stop(s);
    while (s->conns) {
        struct conn *c = s->conns;
        c->src = -1;
        conn_free(s, c);
    }
    while (s->pipes)
        pipe_close(s, s->pipes);
    if (s->listener)
        s->link_ops->listener_close(s->listener);
    if (s->acc[1].listener)
        s->acc[1].ops->listener_close(s->acc[1].listener);
    if (s->timer_fd >= 0)
        close(s->timer_fd);
    if (s->sweep_fd >= 0)
        close(s->sweep_fd);
    if (s->spare_fd >= 0)
        close(s->spare_fd);
    cx_space_formats_close(s->formats);
    cx_nametable_close(s->names);
    cx_segstore_close(s->store);
    free(s->scratch);
    free(s);
}
