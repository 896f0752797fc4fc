/* The application side of the sidecar protocol (cx_sc_client.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sidecar/cx_sc_client.h"
#include "api/cx_api.h"
#include "common/cx_error.h"
#include "engine/cx_idle.h"
#include "format/cx_codec.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "sidecar/cx_sc_proto.h"
#include "sidecar/cx_sc_ring.h"
#include "transport/cx_addr.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define POOL_MAX 64

struct conn {
    int fd;
    void *map;
    size_t maplen;
    struct cx_sc_ring to_sc, from_sc;
    struct cx_sc_slot *slot; /* calls: the call slot after the rings */
    uint32_t seq;            /* calls: the number of the last request made */
    struct conn *next;
};

struct sc_chan;

struct sc_ctx {
    char addr[128];
    char fabric[64], fabric_addr[256]; /* the sidecar runtime's, asked once at create */
    struct sc_chan *chans; /* closed with the context, as the embedded runtime does */
};

struct sc_chan {
    int64_t h;
    char id[256];
    const struct cx_format *fmt;
    enum cx_chan_mode mode;
    struct sc_ctx *ctx;
    struct sc_chan *next;
};

struct sc_src {
    int64_t h;
    const struct cx_format *fmt;
    struct sc_chan *ch;
    int stream;   /* submits stream into the events ring, no reply each */
    int reliable; /* of a reliable channel: a full ring refuses or waits, as a full queue */
    _Atomic int err; /* a streamed submit the sidecar could not make (-errno), or 0 */
};

/* A writer this process created: its pi_writes stream through the events ring. */
struct sc_wr {
    int d;
    int err; /* a streamed write the sidecar refused (-errno), or 0; under g.mu */
};

struct sc_snk {
    int64_t h;
    const struct cx_format *fmt;
    cx_chan_handler fn;
    void *arg;
    struct sc_chan *ch;
};

static struct {
    pthread_mutex_t mu;        /* pool, tables */
    pthread_mutex_t dispatch;  /* recursive: held while a sink handler runs */
    pthread_mutex_t sub;       /* the producer side of the events connection's ring 0 */
    int state;                 /* 0 unknown, 1 enabled, -1 disabled */
    _Atomic int ev_gone;       /* the events connection ended: the sidecar went away */
    pid_t pid;
    char path[108];
    uint64_t session;
    struct conn *idle;
    int nconns;
    struct conn *ev;
    pthread_t ev_thr;
    struct sc_snk **sinks;
    size_t nsinks;
    struct sc_src **srcs;
    size_t nsrcs;
    struct sc_wr *wrs;  /* this process's writers: their pi_writes stream */
    size_t nwrs, capwrs;
    uint64_t *tokens;
    size_t ntokens;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .sub = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int events_start(void);
static void flush_submits(void);
static int fetch_from_sidecar(void *arg, uint64_t token, uint8_t **desc, size_t *len);

static void conn_free(struct conn *c)
{
    if (c->map)
        munmap(c->map, c->maplen);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

/* After fork the child has the parent's connections but must not use them: a session of
 * its own. */
static void after_fork_child(void)
{
    pthread_mutex_init(&g.mu, NULL);
    pthread_mutex_init(&g.sub, NULL);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g.dispatch, &a);
    while (g.idle) {
        struct conn *c = g.idle;
        g.idle = c->next;
        conn_free(c);
    }
    if (g.ev)
        conn_free(g.ev);
    g.ev = NULL;
    g.nconns = 0;
    g.nsinks = g.nsrcs = g.ntokens = g.nwrs = 0;
    g.pid = getpid();
    if (getrandom(&g.session, sizeof g.session, 0) != sizeof g.session)
        g.session ^= (uint64_t)g.pid << 32 | (uint64_t)time(NULL);
}

static void init_once(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&g.dispatch, &a);
    g.pid = getpid();
    if (getrandom(&g.session, sizeof g.session, 0) != sizeof g.session)
        g.session = (uint64_t)g.pid << 32 | (uint64_t)time(NULL);
    pthread_atfork(NULL, NULL, after_fork_child);
    const char *p = getenv("CONFLUX_SOCKET");
    if (p && p[0] && strlen(p) < sizeof g.path) {
        snprintf(g.path, sizeof g.path, "%s", p);
        g.state = 1;
        cx_format_registry_set_fetch(fetch_from_sidecar, NULL);
    } else {
        g.state = -1;
    }
}

int cx_sc_enabled(void)
{
    pthread_once(&g_once, init_once);
    return g.state > 0;
}

/* ---- connections ---- */

static int conn_open(int kind, struct conn **out)
{
    struct conn *c = calloc(1, sizeof *c);
    struct cx_sc_req q = {.op = CX_SC_HELLO, .a = {(int64_t)g.session, kind, getpid(), CX_SC_PROTO_VERSION}};
    struct cx_sc_rep rep;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int memfd = -1, rc;
    if (!c)
        return cx_err_set(ENOMEM, "sidecar connection");
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g.path);
    if ((c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0 ||
        connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        rc = cx_err_set(errno, "sidecar at %s: %s (is confluxd --role=sidecar running?)", g.path,
                        strerror(errno));
        goto error;
    }
    if (send(c->fd, &q, CX_SC_REQ_HDR, MSG_NOSIGNAL) < 0) {
        rc = cx_err_set(errno, "sidecar at %s: %s", g.path, strerror(errno));
        goto error;
    }
    struct iovec iov = {.iov_base = &rep, .iov_len = sizeof rep};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < (ssize_t)CX_SC_REP_HDR) {
        rc = cx_err_set(ECONNRESET, "sidecar at %s closed the connection", g.path);
        goto error;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
            memcpy(&memfd, CMSG_DATA(cm), sizeof memfd);
    if (rep.rc < 0) {
        rep.s[rep.slen < CX_SC_STR_MAX ? rep.slen : CX_SC_STR_MAX - 1] = 0;
        rc = cx_err_set((int)-rep.rc, "sidecar: %s", rep.s);
        goto error;
    }
    uint64_t cap = (uint64_t)rep.a[0];
    struct stat st;
    c->maplen = 2 * cx_sc_ring_span(cap) + CX_SC_SLOT_SPAN;
    if (memfd < 0 || fstat(memfd, &st) < 0 || (uint64_t)st.st_size != c->maplen) {
        rc = cx_err_set(EPROTO, "sidecar sent no shared region or one of the wrong size");
        goto error;
    }
    c->map = mmap(NULL, c->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        rc = cx_err_set(errno, "map the sidecar's region: %s", strerror(errno));
        goto error;
    }
    if (cx_sc_ring_attach(&c->to_sc, c->map, cx_sc_ring_span(cap)) < 0 ||
        cx_sc_ring_attach(&c->from_sc, (uint8_t *)c->map + cx_sc_ring_span(cap), cx_sc_ring_span(cap)) < 0) {
        rc = cx_err_set(EPROTO, "the sidecar's rings are malformed");
        goto error;
    }
    c->slot = (struct cx_sc_slot *)((uint8_t *)c->map + 2 * cx_sc_ring_span(cap));
    close(memfd);
    *out = c;
    return 0;
error:
    if (memfd >= 0)
        close(memfd);
    conn_free(c);
    return rc;
}

static int pool_take(struct conn **out)
{
    pthread_once(&g_once, init_once);
    if (g.state <= 0)
        return cx_err_set(ENOTCONN, "no sidecar: CONFLUX_SOCKET is not set");
    pthread_mutex_lock(&g.mu);
    struct conn *c = g.idle;
    if (c) {
        g.idle = c->next;
        pthread_mutex_unlock(&g.mu);
        *out = c;
        return 0;
    }
    if (g.nconns >= POOL_MAX) {
        pthread_mutex_unlock(&g.mu);
        return cx_err_set(EMFILE, "more than %d concurrent calls to the sidecar", POOL_MAX);
    }
    g.nconns++;
    pthread_mutex_unlock(&g.mu);
    int rc = conn_open(CX_SC_CONN_CALLS, out);
    if (rc < 0) {
        pthread_mutex_lock(&g.mu);
        g.nconns--;
        pthread_mutex_unlock(&g.mu);
    }
    return rc;
}

static void pool_put(struct conn *c, int broken)
{
    pthread_mutex_lock(&g.mu);
    if (broken) {
        g.nconns--;
        pthread_mutex_unlock(&g.mu);
        conn_free(c);
        return;
    }
    c->next = g.idle;
    g.idle = c;
    pthread_mutex_unlock(&g.mu);
}

/* Where a request's payload comes from and a reply's goes. */
struct bulk {
    void (*fill)(void *arg, void *dst, size_t len); /* request: writes len bytes at dst */
    void *fill_arg;
    size_t len;
    void (*take)(void *arg, const void *src, size_t len); /* reply */
    void *take_arg;
};

static void fill_copy(void *arg, void *dst, size_t len) { memcpy(dst, arg, len); }

/* How long a caller polls for its reply before it sleeps (read once). */
static uint64_t spin_ns(void)
{
    static _Atomic uint64_t ns = UINT64_MAX;
    uint64_t v = atomic_load_explicit(&ns, memory_order_relaxed);
    if (v == UINT64_MAX)
        atomic_store_explicit(&ns, v = cx_idle_spin_ns(), memory_order_relaxed);
    return v;
}

/* One request and its reply. Returns rep->rc (>= 0) or a negative errno with cx_errmsg()
 * set to the sidecar's message. */
static int64_t call(struct cx_sc_req *q, const struct bulk *b, struct cx_sc_rep *rep)
{
    struct conn *c;
    int rc = pool_take(&c);
    if (rc < 0)
        return rc;
    q->bulk = 0;
    if (b && b->fill) {
        int err;
        void *p = cx_sc_ring_claim(&c->to_sc, CX_SC_REC_DATA, b->len, &err);
        if (!p) {
            pool_put(c, 0);
            if (err == -EMSGSIZE)
                return cx_err_set(EMSGSIZE, "%zu bytes are more than the sidecar's ring takes at once "
                                  "(%zu): start the sidecar with a larger --ring-size", b->len,
                                  cx_sc_ring_max(&c->to_sc));
            return cx_err_set(-err, "sidecar ring");
        }
        b->fill(b->fill_arg, p, b->len);
        cx_sc_ring_commit(&c->to_sc);
        q->bulk = 1;
    }
    memcpy(&c->slot->req, q, CX_SC_REQ_HDR + q->slen);
    cx_sc_bell_ring(&c->slot->req_bell, ++c->seq, c->fd);
    if (cx_sc_bell_wait(&c->slot->rep_bell, c->seq - 1, c->fd, spin_ns()) < 0) {
        pool_put(c, 1);
        return cx_err_set(ECONNRESET, "sidecar at %s: connection lost", g.path);
    }
    memcpy(rep, &c->slot->rep, CX_SC_REP_HDR);
    if (rep->slen >= CX_SC_STR_MAX || atomic_load(&c->slot->rep_bell.seq) != c->seq) {
        pool_put(c, 1);
        return cx_err_set(EPROTO, "sidecar at %s: malformed reply", g.path);
    }
    memcpy(rep->s, c->slot->rep.s, rep->slen);
    rep->s[rep->slen] = 0;
    if (rep->bulk) {
        uint32_t type;
        void *p;
        size_t len;
        if (cx_sc_ring_peek(&c->from_sc, &type, &p, &len) <= 0) {
            pool_put(c, 1);
            return cx_err_set(EPROTO, "sidecar reply names a payload its ring does not hold");
        }
        if (b && b->take)
            b->take(b->take_arg, p, len);
        cx_sc_ring_release(&c->from_sc);
    }
    pool_put(c, 0);
    if (rep->rc < 0)
        return cx_err_set((int)-rep->rc, "%s", rep->s);
    return rep->rc;
}

static void set_s(struct cx_sc_req *q, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n >= CX_SC_STR_MAX)
        n = CX_SC_STR_MAX - 1;
    memcpy(q->s, s ? s : "", n);
    q->slen = (uint32_t)n;
}

/* ---- formats: each one the sidecar needs is given to it once ---- */

static int ensure_format(const struct cx_format *f)
{
    if (!f)
        return 0;
    uint64_t t = cx_format_token(f);
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.ntokens; i++)
        if (g.tokens[i] == t) {
            pthread_mutex_unlock(&g.mu);
            return 0;
        }
    pthread_mutex_unlock(&g.mu);
    size_t len;
    const uint8_t *d = cx_format_describe(f, &len);
    struct cx_sc_req q = {.op = CX_SC_FORMAT_PUT};
    struct cx_sc_rep rep;
    struct bulk b = {.fill = fill_copy, .fill_arg = (void *)d, .len = len};
    int64_t rc = call(&q, &b, &rep);
    if (rc < 0)
        return cx_err_wrap((int)rc, "format '%s'", cx_format_name(f));
    pthread_mutex_lock(&g.mu);
    uint64_t *nt = realloc(g.tokens, (g.ntokens + 1) * sizeof *nt);
    if (nt) {
        g.tokens = nt;
        g.tokens[g.ntokens++] = t;
    }
    pthread_mutex_unlock(&g.mu);
    return 0;
}

struct desc_out {
    uint8_t *p;
    size_t len;
};

static void take_desc(void *arg, const void *src, size_t len)
{
    struct desc_out *o = arg;
    if ((o->p = malloc(len ? len : 1))) {
        memcpy(o->p, src, len);
        o->len = len;
    }
}

/* The registry's fetch hook: formats this process meets in events and channels. */
static int fetch_from_sidecar(void *arg, uint64_t token, uint8_t **desc, size_t *len)
{
    (void)arg;
    struct cx_sc_req q = {.op = CX_SC_FORMAT_GET, .a = {(int64_t)token}};
    struct cx_sc_rep rep;
    struct desc_out o = {0};
    struct bulk b = {.take = take_desc, .take_arg = &o};
    int64_t rc = call(&q, &b, &rep);
    if (rc < 0) {
        free(o.p);
        return (int)rc;
    }
    if (!o.p)
        return cx_err_set(ENOMEM, "format description");
    *desc = o.p;
    *len = o.len;
    return 0;
}

int cx_sc_connect(const char *path)
{
    pthread_once(&g_once, init_once);
    if (!path || !path[0] || strlen(path) >= sizeof g.path)
        return cx_err_set(EINVAL, "sidecar socket path '%s'", path ? path : "");
    pthread_mutex_lock(&g.mu);
    snprintf(g.path, sizeof g.path, "%s", path);
    g.state = 1;
    pthread_mutex_unlock(&g.mu);
    cx_format_registry_set_fetch(fetch_from_sidecar, NULL);
    struct conn *c;
    int rc = pool_take(&c);
    if (rc < 0)
        return rc;
    pool_put(c, 0);
    return 0;
}

/* ---- pipes ---- */

static int pi_err(int64_t rc)
{
    errno = (int)-rc;
    return -1;
}

int cx_sc_pi_space_open(const char *addr, const struct pi_options *opts)
{
    struct cx_sc_req q = {.op = CX_SC_SPACE_OPEN, .a = {opts ? opts->timeout_ms : 0, opts ? opts->window : 0}};
    struct cx_sc_rep rep;
    if (!addr)
        return pi_err(cx_err_set(EINVAL, "space address missing"));
    set_s(&q, addr);
    int64_t rc = call(&q, NULL, &rep);
    return rc < 0 ? pi_err(rc) : (int)rc;
}

static int simple(uint32_t op, int64_t a0, int64_t a1, const char *s, struct cx_sc_rep *rep)
{
    struct cx_sc_req q = {.op = op, .a = {a0, a1}};
    set_s(&q, s);
    int64_t rc = call(&q, NULL, rep);
    return rc < 0 ? pi_err(rc) : (int)rc;
}

int cx_sc_pi_space_close(int s)
{
    struct cx_sc_rep rep;
    return simple(CX_SC_SPACE_CLOSE, s, 0, NULL, &rep);
}

int cx_sc_pi_attach(const char *name, int s)
{
    struct cx_sc_rep rep;
    return simple(CX_SC_PI_ATTACH, s, 0, name, &rep);
}

/* An attach that names a second thing after the pipe (a cursor, a group): both names in
 * the request's string, the pipe's length in a1 (the sidecar splits them there). */
static int attach_two_names(uint32_t op, const char *call_name, const char *what, const char *name,
                            int s, const char *second)
{
    if (!name || !second)
        return pi_err(cx_err_set(EINVAL, "%s: %s missing", call_name, name ? what : "pipe name"));
    size_t n = strlen(name), m = strlen(second);
    if (n + m >= CX_SC_STR_MAX)
        return pi_err(cx_err_set(ENAMETOOLONG, "%s: names of %zu and %zu bytes", call_name, n, m));
    struct cx_sc_req q = {.op = op, .a = {s, (int64_t)n}};
    memcpy(q.s, name, n);
    memcpy(q.s + n, second, m);
    q.slen = (uint32_t)(n + m);
    struct cx_sc_rep rep;
    int64_t rc = call(&q, NULL, &rep);
    return rc < 0 ? pi_err(rc) : (int)rc;
}

int cx_sc_pi_attach_named(const char *name, int s, const char *cursor)
{
    return attach_two_names(CX_SC_PI_ATTACH_NAMED, "pi_attach_named", "cursor name", name, s, cursor);
}

int cx_sc_pi_attach_group(const char *name, int s, const char *group)
{
    return attach_two_names(CX_SC_PI_ATTACH_GROUP, "pi_attach_group", "group name", name, s, group);
}

int cx_sc_pi_ack(int d)
{
    struct cx_sc_rep rep;
    return simple(CX_SC_PI_ACK, d, 0, NULL, &rep);
}

int cx_sc_pi_create(const char *name, int s, int mode)
{
    struct cx_sc_rep rep;
    int d = simple(CX_SC_PI_CREATE, s, mode, name, &rep);
    if (d < 0)
        return d;
    pthread_mutex_lock(&g.mu);
    if (g.nwrs == g.capwrs) {
        size_t cap = g.capwrs ? 2 * g.capwrs : 8;
        struct sc_wr *n = realloc(g.wrs, cap * sizeof *n);
        if (n) {
            g.wrs = n;
            g.capwrs = cap;
        }
    }
    if (g.nwrs < g.capwrs) /* else its writes stay calls */
        g.wrs[g.nwrs++] = (struct sc_wr){.d = d};
    pthread_mutex_unlock(&g.mu);
    return d;
}

static struct sc_wr *writer_of(int d)
{
    for (size_t i = 0; i < g.nwrs; i++)
        if (g.wrs[i].d == d)
            return &g.wrs[i];
    return NULL;
}

/* Before a call on descriptor d: if it is a writer whose pi_writes stream, waits until the
 * sidecar has run them, and takes the error one of them met (0 if none); forget: the
 * writer is being closed. */
static int writer_sync(int d, int forget)
{
    pthread_mutex_lock(&g.mu);
    int known = writer_of(d) != NULL;
    pthread_mutex_unlock(&g.mu);
    if (!known)
        return 0;
    flush_submits();
    pthread_mutex_lock(&g.mu);
    struct sc_wr *w = writer_of(d);
    int err = w ? w->err : 0;
    if (w) {
        w->err = 0;
        if (forget)
            *w = g.wrs[--g.nwrs];
    }
    pthread_mutex_unlock(&g.mu);
    return err;
}

/* A streamed write the sidecar refused, from the event thread. */
static void writer_failed(int64_t d, int rc)
{
    pthread_mutex_lock(&g.mu);
    struct sc_wr *w = writer_of((int)d);
    if (w && !w->err)
        w->err = rc;
    pthread_mutex_unlock(&g.mu);
}

#define WRITE_AHEAD (64u << 10)

/* A pi_write streamed into the events ring (no reply): 1 when it went, 0 when it must be a
 * call (not a writer of this process, no events connection, or too large for the ring),
 * or a negative errno (an earlier streamed write's refusal). */
static int write_stream(int d, const void *b, size_t len, size_t bytes, const struct cx_format *t)
{
    pthread_mutex_lock(&g.mu);
    struct sc_wr *w = writer_of(d);
    pthread_mutex_unlock(&g.mu);
    int err;
    if (!w)
        return 0;
    if (events_start() < 0 || sizeof(struct cx_sc_write) + bytes > cx_sc_ring_max(&g.ev->to_sc))
        return 0;
    struct cx_sc_write hdr = {.d = d, .len = (int64_t)len, .token = t ? cx_format_token(t) : 0};
    /* at most WRITE_AHEAD bytes (or three segments, for large ones) that the sidecar has
     * not written yet: a writer whose space is gone finds out within that, as an embedded
     * writer does within its window */
    uint64_t limit = WRITE_AHEAD > 3 * (sizeof hdr + bytes) ? WRITE_AHEAD : 3 * (sizeof hdr + bytes);
    for (int spins = 0;; spins++) {
        if (atomic_load(&g.ev_gone))
            return cx_err_set(ECONNRESET, "sidecar at %s: connection lost", g.path);
        pthread_mutex_lock(&g.mu);
        err = (w = writer_of(d)) ? w->err : 0;
        if (w)
            w->err = 0;
        pthread_mutex_unlock(&g.mu);
        if (err < 0)
            return cx_err_set(-err, "an earlier pi_write failed in the sidecar: %s", strerror(-err));
        uint64_t ahead = cx_sc_ring_tail(&g.ev->to_sc) - cx_sc_ring_head(&g.ev->to_sc);
        if (ahead + sizeof hdr + bytes <= limit) {
            pthread_mutex_lock(&g.sub);
            uint8_t *p = cx_sc_ring_claim(&g.ev->to_sc, CX_SC_REC_WRITE, sizeof hdr + bytes, &err);
            if (p) {
                memcpy(p, &hdr, sizeof hdr);
                memcpy(p + sizeof hdr, b, bytes);
                if (cx_sc_ring_commit(&g.ev->to_sc))
                    send(g.ev->fd, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                pthread_mutex_unlock(&g.sub);
                return 1;
            }
            pthread_mutex_unlock(&g.sub);
            if (err != -EAGAIN)
                return 0;
        }
        if (spins > 100)
            usleep(50); /* the sidecar is writing; a write waits as embedded */
    }
}

struct read_out {
    void *b;
    size_t cap;
};

static void take_read(void *arg, const void *src, size_t len)
{
    struct read_out *o = arg;
    memcpy(o->b, src, len < o->cap ? len : o->cap);
}

long cx_sc_pi_read_timeout(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms)
{
    int rc = ensure_format(t);
    if (rc < 0)
        return pi_err(rc);
    size_t esz = t ? cx_format_size(t) : 1;
    struct read_out o = {.b = b, .cap = len * esz};
    struct bulk bk = {.take = take_read, .take_arg = &o};
    for (;;) {
        /* a read without deadline waits in slices, so a sidecar thread is never held
         * forever by a reader that went away */
        int slice = timeout_ms < 0 ? 1000 : timeout_ms;
        struct cx_sc_req q = {.op = CX_SC_PI_READ, .a = {d, (int64_t)len, t ? (int64_t)cx_format_token(t) : 0, slice}};
        struct cx_sc_rep rep;
        int64_t n = call(&q, &bk, &rep);
        if (n == -ETIMEDOUT && timeout_ms < 0)
            continue;
        return n < 0 ? pi_err(n) : (long)n;
    }
}

long cx_sc_pi_read(int d, void *b, size_t len, const struct cx_format *t)
{
    return cx_sc_pi_read_timeout(d, b, len, t, -1);
}

long cx_sc_pi_write(int d, const void *b, size_t len, const struct cx_format *t)
{
    int rc = ensure_format(t);
    if (rc < 0)
        return pi_err(rc);
    size_t bytes = t ? len * cx_format_size(t) : len;
    if (bytes && !b)
        return pi_err(cx_err_set(EINVAL, "pi_write: no buffer"));
    int streamed = write_stream(d, b, len, bytes, t);
    if (streamed < 0)
        return pi_err(streamed);
    if (streamed)
        return (long)len;
    struct cx_sc_req q = {.op = CX_SC_PI_WRITE, .a = {d, (int64_t)len, t ? (int64_t)cx_format_token(t) : 0}};
    struct cx_sc_rep rep;
    struct bulk bk = {.fill = fill_copy, .fill_arg = (void *)b, .len = bytes};
    int64_t n = call(&q, &bk, &rep);
    return n < 0 ? pi_err(n) : (long)n;
}

int cx_sc_pi_close(int d)
{
    int werr = writer_sync(d, 1); /* the handle is released all the same */
    struct cx_sc_rep rep;
    int rc = simple(CX_SC_PI_CLOSE, d, 0, NULL, &rep);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    return rc;
}

struct blob_out {
    void *p;
    size_t cap, len;
};

static void take_blob(void *arg, const void *src, size_t len)
{
    struct blob_out *o = arg;
    o->len = len;
    if (len <= o->cap)
        memcpy(o->p, src, len);
}

long cx_sc_pi_migrate_out(int d, int hold_ms, void *blob, size_t cap)
{
    int werr = writer_sync(d, 0); /* the sidecar must have written what the app wrote */
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    if (!blob)
        return pi_err(cx_err_set(EINVAL, "pi_migrate_out: blob is NULL"));
    struct cx_sc_req q = {.op = CX_SC_PI_MIGRATE_OUT, .a = {d, hold_ms, (int64_t)cap}};
    struct cx_sc_rep rep;
    struct blob_out o = {.p = blob, .cap = cap};
    struct bulk b = {.take = take_blob, .take_arg = &o};
    int64_t rc = call(&q, &b, &rep);
    if (rc < 0)
        return pi_err(rc);
    writer_sync(d, 1); /* the descriptor is released */
    if (o.len > cap) /* the sidecar was given cap, so only a protocol fault lands here */
        return pi_err(cx_err_set(EPROTO, "pi_migrate_out: a %zu-byte blob for %zu bytes", o.len, cap));
    return (long)o.len;
}

int cx_sc_pi_migrate_in(const void *blob, size_t len, int s)
{
    if (!blob || !len || len > PI_MIGRATE_MAX)
        return pi_err(cx_err_set(EINVAL, "pi_migrate_in: a blob of %zu bytes (1..%d)", blob ? len : 0, PI_MIGRATE_MAX));
    struct cx_sc_req q = {.op = CX_SC_PI_MIGRATE_IN, .a = {s}};
    struct cx_sc_rep rep;
    struct bulk b = {.fill = fill_copy, .fill_arg = (void *)blob, .len = len};
    int64_t rc = call(&q, &b, &rep);
    return rc < 0 ? pi_err(rc) : (int)rc;
}

/* Every writer's streamed pi_writes run first; their first error is the call's. */
int cx_sc_pi_shutdown(void)
{
    flush_submits();
    pthread_mutex_lock(&g.mu);
    int werr = 0;
    for (size_t i = 0; i < g.nwrs && !werr; i++)
        werr = g.wrs[i].err;
    g.nwrs = 0; /* every descriptor is invalid afterwards */
    pthread_mutex_unlock(&g.mu);
    struct cx_sc_rep rep;
    int rc = simple(CX_SC_PI_SHUTDOWN, 0, 0, NULL, &rep);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    return rc;
}

int cx_sc_pi_abandon(int d)
{
    int werr = writer_sync(d, 1); /* the handle is released all the same */
    struct cx_sc_rep rep;
    int rc = simple(CX_SC_PI_ABANDON, d, 0, NULL, &rep);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    return rc;
}

int cx_sc_pi_detach(int d)
{
    int werr = writer_sync(d, 1);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    struct cx_sc_rep rep;
    return simple(CX_SC_PI_DETACH, d, 0, NULL, &rep);
}

int cx_sc_pi_seek(int d, uint64_t seg)
{
    int werr = writer_sync(d, 0);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    struct cx_sc_rep rep;
    return simple(CX_SC_PI_SEEK, d, (int64_t)seg, NULL, &rep);
}

int64_t cx_sc_pi_tell(int d)
{
    int werr = writer_sync(d, 0);
    if (werr < 0)
        return pi_err(cx_err_set(-werr, "an earlier pi_write failed in the sidecar: %s", strerror(-werr)));
    struct cx_sc_rep rep;
    if (simple(CX_SC_PI_TELL, d, 0, NULL, &rep) < 0)
        return -1;
    return rep.a[0];
}

int cx_sc_pi_unlink(const char *name, int s)
{
    struct cx_sc_rep rep;
    return simple(CX_SC_PI_UNLINK, s, 0, name, &rep);
}

int cx_sc_pi_reader_stats(int d, struct pi_reader_stats *out)
{
    struct cx_sc_rep rep;
    int rc = simple(CX_SC_PI_STATS, d, 0, NULL, &rep);
    if (rc < 0)
        return -1;
    *out = (struct pi_reader_stats){(uint64_t)rep.a[0], (uint64_t)rep.a[1], (uint64_t)rep.a[2],
                                    (uint64_t)rep.a[3], (uint64_t)rep.rc};
    return 0;
}

static void take_copy(void *arg, const void *src, size_t len)
{
    struct pi_writer_stats *out = arg;
    if (len == sizeof *out)
        memcpy(out, src, len);
}

int cx_sc_pi_writer_stats(int d, struct pi_writer_stats *out)
{
    writer_sync(d, 0);
    if (!out) {
        errno = EINVAL;
        return -1;
    }
    memset(out, 0, sizeof *out);
    struct cx_sc_req q = {.op = CX_SC_PI_WRITER_STATS, .a = {d}};
    struct cx_sc_rep rep;
    struct bulk b = {.take = take_copy, .take_arg = out};
    int64_t rc = call(&q, &b, &rep);
    return rc < 0 ? pi_err(rc) : 0;
}

/* A string reply into out (cap bytes): 0, or -ERANGE when it does not fit. */
static int string_out(const struct cx_sc_rep *rep, char *out, size_t cap)
{
    if (!out || cap <= rep->slen)
        return cx_err_set(ERANGE, "%u bytes do not fit in %zu", rep->slen + 1, cap);
    memcpy(out, rep->s, rep->slen);
    out[rep->slen] = 0;
    return 0;
}

int cx_sc_pi_link(int d, char *out, size_t cap)
{
    writer_sync(d, 0);
    struct cx_sc_rep rep;
    int rc = simple(CX_SC_PI_LINK, d, 0, NULL, &rep);
    if (rc < 0)
        return rc;
    if ((rc = string_out(&rep, out, cap)) < 0)
        return pi_err(rc);
    return 0;
}

/* ---- channels ---- */

int cx_sc_chan_ctx_create(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out)
{
    /* the sidecar's runtime listens where the sidecar was told to; addresses given here
     * are still checked, so a wrong one fails as it would embedded */
    const char *addrs[2] = {o ? o->listen : NULL, o ? o->advertise : NULL};
    for (int i = 0; i < 2; i++) {
        const char *a = addrs[i], *hp = a ? strstr(a, "://") : NULL;
        struct sockaddr_in sa;
        if (a && (!hp || (strncmp(a, "shm://", 6) != 0 && cx_addr_inet(hp + 3, &sa) < 0)))
            return cx_err_set(EINVAL, "channel runtime: bad %s address '%s'", i ? "advertise" : "listen", a);
    }
    struct cx_sc_req q = {.op = CX_SC_CTX};
    struct cx_sc_rep rep;
    int64_t rc = call(&q, NULL, &rep);
    if (rc < 0)
        return (int)rc;
    struct sc_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return cx_err_set(ENOMEM, "channel context");
    snprintf(x->addr, sizeof x->addr, "%.127s", rep.s);
    char *fabric[2] = {x->fabric, x->fabric_addr};
    size_t cap[2] = {sizeof x->fabric, sizeof x->fabric_addr};
    for (int i = 0; i < 2; i++) {
        struct cx_sc_req f = {.op = CX_SC_CTX_FABRIC, .a = {i}};
        if ((rc = call(&f, NULL, &rep)) < 0) {
            free(x);
            return (int)rc;
        }
        snprintf(fabric[i], cap[i], "%s", rep.s);
    }
    *out = (struct cx_chan_ctx *)x;
    return 0;
}

const char *cx_sc_chan_ctx_addr(const struct cx_chan_ctx *ctx)
{
    return ((const struct sc_ctx *)ctx)->addr;
}

const char *cx_sc_chan_ctx_fabric(const struct cx_chan_ctx *ctx)
{
    return ctx ? ((const struct sc_ctx *)ctx)->fabric : "";
}

const char *cx_sc_chan_ctx_fabric_addr(const struct cx_chan_ctx *ctx)
{
    return ctx ? ((const struct sc_ctx *)ctx)->fabric_addr : "";
}

/* The link the sidecar's runtime (the pod's) uses to reach addr. */
int cx_sc_chan_ctx_link(struct cx_chan_ctx *ctx, const char *addr, char *out, size_t cap)
{
    if (out && cap)
        out[0] = 0;
    if (!ctx || !addr)
        return cx_err_set(EINVAL, "cx_chan_ctx_link: %s is NULL", ctx ? "addr" : "ctx");
    struct cx_sc_req q = {.op = CX_SC_CTX_LINK};
    set_s(&q, addr);
    struct cx_sc_rep rep;
    int64_t rc = call(&q, NULL, &rep);
    if (rc < 0)
        return (int)rc;
    int r = string_out(&rep, out, cap);
    return r < 0 ? r : (int)rc;
}

void cx_sc_chan_ctx_destroy(struct cx_chan_ctx *ctxp)
{
    struct sc_ctx *ctx = (struct sc_ctx *)ctxp;
    if (!ctx)
        return;
    while (ctx->chans)
        cx_sc_chan_close((struct cx_chan *)ctx->chans);
    free(ctx);
}

static int chan_new(struct cx_chan_ctx *ctxp, int64_t h, const char *id, const struct cx_format *f,
                    int64_t mode, struct cx_chan **out)
{
    struct sc_chan *ch = calloc(1, sizeof *ch);
    if (!ch)
        return cx_err_set(ENOMEM, "channel");
    struct sc_ctx *ctx = (struct sc_ctx *)ctxp;
    pthread_mutex_lock(&g.mu);
    ch->ctx = ctx;
    ch->next = ctx->chans;
    ctx->chans = ch;
    pthread_mutex_unlock(&g.mu);
    ch->h = h;
    snprintf(ch->id, sizeof ch->id, "%.255s", id);
    ch->fmt = f;
    ch->mode = (enum cx_chan_mode)mode;
    *out = (struct cx_chan *)ch;
    return 0;
}

int cx_sc_chan_create(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out)
{
    const struct cx_format *f = o ? o->format : NULL;
    int rc = ensure_format(f);
    if (rc < 0)
        return rc;
    struct cx_sc_req q = {.op = CX_SC_CHAN_CREATE,
                          .a = {f ? (int64_t)cx_format_token(f) : 0, o ? o->mode : 0, o ? o->queue_limit : 0}};
    struct cx_sc_rep rep;
    int64_t r = call(&q, NULL, &rep);
    return r < 0 ? (int)r : chan_new(ctx, rep.a[0], rep.s, f, rep.a[2], out);
}

int cx_sc_chan_open(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out)
{
    if (!id)
        return cx_err_set(EINVAL, "channel id missing");
    struct cx_sc_req q = {.op = CX_SC_CHAN_OPEN, .a = {timeout_ms}};
    struct cx_sc_rep rep;
    set_s(&q, id);
    int64_t r = call(&q, NULL, &rep);
    if (r < 0)
        return (int)r;
    const struct cx_format *f = NULL;
    if (rep.a[1] && !(f = cx_format_registry_lookup((uint64_t)rep.a[1])))
        return cx_err_wrap(-ENOENT, "channel format");
    return chan_new(ctx, rep.a[0], rep.s, f, rep.a[2], out);
}

const char *cx_sc_chan_id(const struct cx_chan *ch) { return ((const struct sc_chan *)ch)->id; }
const struct cx_format *cx_sc_chan_format(const struct cx_chan *ch) { return ((const struct sc_chan *)ch)->fmt; }
enum cx_chan_mode cx_sc_chan_mode(const struct cx_chan *ch) { return ((const struct sc_chan *)ch)->mode; }

static void forget_children(struct sc_chan *ch)
{
    pthread_mutex_lock(&g.dispatch); /* no handler of these sinks runs after this */
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.nsinks;)
        if (g.sinks[i]->ch == ch) {
            free(g.sinks[i]);
            g.sinks[i] = g.sinks[--g.nsinks];
        } else {
            i++;
        }
    for (size_t i = 0; i < g.nsrcs;)
        if (g.srcs[i]->ch == ch) {
            free(g.srcs[i]);
            g.srcs[i] = g.srcs[--g.nsrcs];
        } else {
            i++;
        }
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.dispatch);
}

void cx_sc_chan_close(struct cx_chan *chp)
{
    struct sc_chan *ch = (struct sc_chan *)chp;
    if (!ch)
        return;
    flush_submits();
    struct cx_sc_req q = {.op = CX_SC_CHAN_CLOSE, .a = {ch->h}};
    struct cx_sc_rep rep;
    call(&q, NULL, &rep);
    forget_children(ch);
    pthread_mutex_lock(&g.mu);
    for (struct sc_chan **pp = &ch->ctx->chans; *pp; pp = &(*pp)->next)
        if (*pp == ch) {
            *pp = ch->next;
            break;
        }
    pthread_mutex_unlock(&g.mu);
    free(ch);
}

int cx_sc_chan_source(struct cx_chan *chp, const struct cx_format *fmt, struct cx_chan_source **out)
{
    struct sc_chan *ch = (struct sc_chan *)chp;
    if (!fmt)
        return cx_err_set(EINVAL, "a source needs a format");
    int rc = ensure_format(fmt);
    if (rc < 0)
        return rc;
    struct cx_sc_req q = {.op = CX_SC_SOURCE, .a = {ch->h, (int64_t)cx_format_token(fmt)}};
    struct cx_sc_rep rep;
    int64_t r = call(&q, NULL, &rep);
    if (r < 0)
        return (int)r;
    struct sc_src *s = calloc(1, sizeof *s);
    pthread_mutex_lock(&g.mu);
    struct sc_src **ns = s ? realloc(g.srcs, (g.nsrcs + 1) * sizeof *ns) : NULL;
    if (ns) {
        g.srcs = ns;
        g.srcs[g.nsrcs++] = s;
    }
    pthread_mutex_unlock(&g.mu);
    if (!ns) {
        free(s);
        struct cx_sc_req c = {.op = CX_SC_SOURCE_CLOSE, .a = {rep.a[0]}};
        call(&c, NULL, &rep);
        return cx_err_set(ENOMEM, "source");
    }
    s->h = rep.a[0];
    s->fmt = fmt;
    s->ch = ch;
    s->reliable = ch->mode == CX_CHAN_RELIABLE;
    s->stream = events_start() == 0;
    *out = (struct cx_chan_source *)s;
    return 0;
}

/* Waits until the sidecar has run every submit streamed so far. */
static void flush_submits(void)
{
    pthread_mutex_lock(&g.mu);
    struct conn *ev = g.ev;
    pthread_mutex_unlock(&g.mu);
    if (!ev)
        return;
    uint64_t until = cx_sc_ring_tail(&ev->to_sc);
    for (int i = 0; i < 100000 && cx_sc_ring_head(&ev->to_sc) < until; i++)
        usleep(100);
}

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A submit streamed into the events connection's ring 0, without a reply: the sidecar
 * submits it (waiting for room on a reliable channel), so the ring extends the channel's
 * queue. While the ring is full: a best-effort submit waits (the sidecar takes records
 * at once); a reliable one waits up to timeout_ms (-1: for ever; -2 or on the event
 * thread, whose handlers must not wait: not at all) and then fails as a full queue would.
 * A failure the sidecar reported for an earlier submit comes back here first. */
static int submit_stream(struct sc_src *s, const struct cx_enc *enc, int timeout_ms)
{
    int rc = atomic_exchange(&s->err, 0);
    if (rc < 0)
        return cx_err_set(-rc, "an earlier submit failed in the sidecar: %s", strerror(-rc));
    if (s->reliable && pthread_equal(pthread_self(), g.ev_thr))
        timeout_ms = -2;
    struct conn *ev = g.ev;
    int err = 0;
    uint64_t t0 = 0;
    for (int spins = 0;; spins++) {
        pthread_mutex_lock(&g.sub);
        uint8_t *p = cx_sc_ring_claim(&ev->to_sc, CX_SC_REC_SUBMIT, sizeof(int64_t) + enc->length, &err);
        if (p) {
            memcpy(p, &s->h, sizeof(int64_t));
            cx_enc_gather(enc, p + sizeof(int64_t), enc->length);
            if (cx_sc_ring_commit(&ev->to_sc))
                send(ev->fd, "s", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            pthread_mutex_unlock(&g.sub);
            return 0;
        }
        pthread_mutex_unlock(&g.sub);
        if (err != -EAGAIN)
            return cx_err_set(-err, "event of %zu bytes is more than the sidecar's ring takes", enc->length);
        if (s->reliable) {
            if (timeout_ms == -2)
                return -EAGAIN;
            if (!t0)
                t0 = mono_ns();
            if (timeout_ms >= 0 && mono_ns() - t0 >= (uint64_t)timeout_ms * 1000000u)
                return cx_err_set(ETIMEDOUT, "no room for the event in %d ms", timeout_ms);
        } else if (spins > 10000000) {
            return cx_err_set(ETIMEDOUT, "the sidecar does not take events");
        }
        if (spins > 100)
            usleep(50);
    }
}

static void fill_enc(void *arg, void *dst, size_t len) { cx_enc_gather(arg, dst, len); }

int cx_sc_chan_submit_wait(struct cx_chan_source *sp, const void *event, int timeout_ms)
{
    struct sc_src *s = (struct sc_src *)sp;
    struct cx_enc enc;
    int rc = cx_encode(s->fmt, event, &enc);
    if (rc < 0)
        return rc;
    if (s->stream)
        return submit_stream(s, &enc, timeout_ms);
    struct cx_sc_req q = {.op = CX_SC_SUBMIT, .a = {s->h, timeout_ms}};
    struct cx_sc_rep rep;
    struct bulk b = {.fill = fill_enc, .fill_arg = &enc, .len = enc.length};
    int64_t r = call(&q, &b, &rep);
    return r < 0 ? (int)r : 0;
}

int cx_sc_chan_submit(struct cx_chan_source *s, const void *event)
{
    return cx_sc_chan_submit_wait(s, event, -2); /* -2: the sidecar does not wait */
}

int cx_sc_chan_submit_owned(struct cx_chan_source *s, void *event,
                            void (*release)(void *arg, void *event), void *arg, int timeout_ms)
{
    int rc = cx_sc_chan_submit_wait(s, event, timeout_ms);
    if (release)
        release(arg, event);
    return rc;
}

void cx_sc_chan_source_close(struct cx_chan_source *sp)
{
    struct sc_src *s = (struct sc_src *)sp;
    if (!s)
        return;
    if (s->stream)
        flush_submits();
    struct cx_sc_req q = {.op = CX_SC_SOURCE_CLOSE, .a = {s->h}};
    struct cx_sc_rep rep;
    call(&q, NULL, &rep);
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.nsrcs; i++)
        if (g.srcs[i] == s) {
            g.srcs[i] = g.srcs[--g.nsrcs];
            break;
        }
    pthread_mutex_unlock(&g.mu);
    free(s);
}

/* ---- sink events: one thread reads the events ring and runs the handlers ---- */

/* cx_chan_ctx_drive through a sidecar: the handlers run on the event thread, so a thread
 * that drives waits for that thread to have run one (it polls for the spin window, then
 * sleeps on a condition variable the event thread signals only when somebody sleeps). */
static struct {
    _Atomic uint64_t handled;  /* handlers run so far */
    _Atomic int sleepers;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} g_drive = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void handled_one(void)
{
    atomic_fetch_add(&g_drive.handled, 1);
    if (atomic_load(&g_drive.sleepers)) {
        pthread_mutex_lock(&g_drive.mu);
        pthread_cond_broadcast(&g_drive.cv);
        pthread_mutex_unlock(&g_drive.mu);
    }
}

int cx_sc_chan_ctx_drive(struct cx_chan_ctx *ctx, long timeout_us)
{
    if (!ctx)
        return cx_err_set(EINVAL, "cx_chan_ctx_drive: ctx is NULL");
    if (g.ev && pthread_equal(pthread_self(), g.ev_thr))
        return cx_err_set(EDEADLK, "cx_chan_ctx_drive from a sink handler");
    uint64_t seen = atomic_load(&g_drive.handled), t0 = mono_ns(), spin = spin_ns();
    uint64_t limit = timeout_us < 0 ? UINT64_MAX : (uint64_t)timeout_us * 1000u;
    while (mono_ns() - t0 < spin && mono_ns() - t0 < limit) {
        if (atomic_load(&g_drive.handled) != seen)
            return 1;
        cx_idle_spin_until(t0, spin);
    }
    pthread_mutex_lock(&g_drive.mu);
    atomic_fetch_add(&g_drive.sleepers, 1);
    int done = 0;
    while (!(done = atomic_load(&g_drive.handled) != seen)) {
        uint64_t now = mono_ns() - t0;
        if (now >= limit)
            break;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        uint64_t wait = limit - now < 100000000u ? limit - now : 100000000u; /* re-check 10/s */
        dl.tv_sec += (time_t)(wait / 1000000000u);
        dl.tv_nsec += (long)(wait % 1000000000u);
        if (dl.tv_nsec >= 1000000000L) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g_drive.cv, &g_drive.mu, &dl);
    }
    atomic_fetch_sub(&g_drive.sleepers, 1);
    pthread_mutex_unlock(&g_drive.mu);
    return done;
}

static void on_event_rec(void *arg, uint32_t type, void *payload, size_t len)
{
    (void)arg;
    static __thread uint8_t *buf;
    static __thread size_t cap;
    struct cx_sc_event h;
    if (type == CX_SC_REC_WRITE_ERR && len == sizeof(struct cx_sc_submit_err)) {
        struct cx_sc_submit_err e;
        memcpy(&e, payload, sizeof e);
        if (e.rc < 0 && e.rc > -4096)
            writer_failed(e.source, (int)e.rc);
        return;
    }
    if (type == CX_SC_REC_SUBMIT_ERR && len == sizeof(struct cx_sc_submit_err)) {
        struct cx_sc_submit_err e;
        memcpy(&e, payload, sizeof e);
        pthread_mutex_lock(&g.mu);
        for (size_t i = 0; i < g.nsrcs; i++)
            if (g.srcs[i]->h == e.source && e.rc < 0 && e.rc > -4096)
                atomic_store(&g.srcs[i]->err, (int)e.rc);
        pthread_mutex_unlock(&g.mu);
        return;
    }
    if (type != CX_SC_REC_EVENT || len < sizeof h)
        return;
    memcpy(&h, payload, sizeof h);
    size_t wpad = ((size_t)h.wire_len + 7) & ~(size_t)7;
    if (sizeof h + wpad + h.from_len > len)
        return;
    uint8_t *wire = (uint8_t *)payload + sizeof h;
    char from[256];
    snprintf(from, sizeof from, "%.*s", (int)h.from_len, (const char *)wire + wpad);
    pthread_mutex_lock(&g.dispatch);
    struct sc_snk *k = NULL;
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.nsinks && !k; i++)
        if (g.sinks[i]->h == (int64_t)h.sink)
            k = g.sinks[i];
    pthread_mutex_unlock(&g.mu);
    struct cx_chan_event ev = {.token = h.token, .wire = wire, .wire_len = h.wire_len, .seq = h.seq, .from = from};
    if (k) {
        ev.format = cx_format_registry_lookup(h.token);
        if (k->fmt) {
            size_t need = 0;
            void *out = NULL;
            if (cx_decode_need(k->fmt, h.token, wire, h.wire_len, &need) == 0 && need > cap) {
                free(buf);
                cap = need * 2;
                if (!(buf = aligned_alloc(8, (cap + 7) & ~(size_t)7)))
                    cap = 0;
            }
            if (need <= cap && cx_decode(k->fmt, h.token, wire, h.wire_len, buf, cap, &out) == 0)
                ev.data = out;
            else
                k = NULL; /* cannot convert: the sidecar's sink counts such errors too */
        }
        if (k)
            k->fn(k->arg, &ev);
    }
    pthread_mutex_unlock(&g.dispatch);
    if (k)
        handled_one();
}

static void *ev_main(void *arg)
{
    struct conn *c = arg;
    char b[16];
    for (;;) {
        if (cx_sc_ring_read(&c->from_sc, on_event_rec, NULL, 256))
            continue;
        if (cx_sc_ring_broken(&c->from_sc))
            break; /* the sidecar broke the ring's layout: no more events */
        if (!cx_sc_ring_prepare_wait(&c->from_sc))
            continue;
        ssize_t r = recv(c->fd, b, sizeof b, 0);
        cx_sc_ring_done_wait(&c->from_sc);
        if (r == 0 || (r < 0 && errno != EINTR))
            break; /* the sidecar went away */
    }
    atomic_store(&g.ev_gone, 1);
    return NULL;
}

static int events_start(void)
{
    pthread_mutex_lock(&g.mu);
    int have = g.ev != NULL;
    pthread_mutex_unlock(&g.mu);
    if (have)
        return 0;
    struct conn *c;
    int rc = conn_open(CX_SC_CONN_EVENTS, &c);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&g.mu);
    if (g.ev) { /* another thread was first */
        pthread_mutex_unlock(&g.mu);
        conn_free(c);
        return 0;
    }
    g.ev = c;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&g.ev_thr, &at, ev_main, c);
    pthread_attr_destroy(&at);
    if (rc) {
        g.ev = NULL;
        pthread_mutex_unlock(&g.mu);
        conn_free(c);
        return cx_err_set(rc, "event thread");
    }
    pthread_mutex_unlock(&g.mu);
    return 0;
}

int cx_sc_chan_sink(struct cx_chan *chp, const struct cx_chan_sink_opts *o, cx_chan_handler fn,
                    void *arg, struct cx_chan_sink **out)
{
    struct sc_chan *ch = (struct sc_chan *)chp;
    const struct cx_format *f = o ? o->format : NULL, *p = o ? o->projection : NULL;
    int rc;
    if (!fn)
        return cx_err_set(EINVAL, "a sink needs a handler");
    if ((rc = ensure_format(f)) < 0 || (rc = ensure_format(p)) < 0 || (rc = events_start()) < 0)
        return rc;
    struct sc_snk *k = calloc(1, sizeof *k);
    if (!k)
        return cx_err_set(ENOMEM, "sink");
    struct cx_sc_req q = {.op = CX_SC_SINK, .a = {ch->h, f ? (int64_t)cx_format_token(f) : 0,
                                                  p ? (int64_t)cx_format_token(p) : 0}};
    struct cx_sc_rep rep;
    set_s(&q, o && o->filter ? o->filter : NULL);
    /* hold the dispatch lock until the sink is in the table: its first events may come
     * before the reply */
    pthread_mutex_lock(&g.dispatch);
    int64_t r = call(&q, NULL, &rep);
    if (r >= 0) {
        k->h = rep.a[0];
        k->fmt = f;
        k->fn = fn;
        k->arg = arg;
        k->ch = ch;
        pthread_mutex_lock(&g.mu);
        struct sc_snk **ns = realloc(g.sinks, (g.nsinks + 1) * sizeof *ns);
        if (ns) {
            g.sinks = ns;
            g.sinks[g.nsinks++] = k;
        }
        pthread_mutex_unlock(&g.mu);
        if (!ns)
            r = cx_err_set(ENOMEM, "sink");
    }
    pthread_mutex_unlock(&g.dispatch);
    if (r < 0) {
        free(k);
        return (int)r;
    }
    *out = (struct cx_chan_sink *)k;
    return 0;
}

void cx_sc_chan_sink_close(struct cx_chan_sink *kp)
{
    struct sc_snk *k = (struct sc_snk *)kp;
    if (!k)
        return;
    struct cx_sc_req q = {.op = CX_SC_SINK_CLOSE, .a = {k->h}};
    struct cx_sc_rep rep;
    call(&q, NULL, &rep);
    /* the sidecar writes no more events for it; those already in the ring are handled
     * first (as the embedded runtime delivers what it has queued), unless this is a
     * handler on the event thread itself */
    pthread_mutex_lock(&g.mu);
    struct conn *ev = g.ev;
    int self = ev && pthread_equal(pthread_self(), g.ev_thr);
    pthread_mutex_unlock(&g.mu);
    if (ev && !self) {
        uint64_t until = cx_sc_ring_tail(&ev->from_sc);
        for (int i = 0; i < 50000 && cx_sc_ring_head(&ev->from_sc) < until; i++)
            usleep(100);
    }
    pthread_mutex_lock(&g.dispatch);
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.nsinks; i++)
        if (g.sinks[i] == k) {
            g.sinks[i] = g.sinks[--g.nsinks];
            break;
        }
    pthread_mutex_unlock(&g.mu);
    pthread_mutex_unlock(&g.dispatch);
    free(k);
}

size_t cx_sc_chan_sink_error(struct cx_chan_sink *kp, char *out, size_t cap)
{
    struct sc_snk *k = (struct sc_snk *)kp;
    struct cx_sc_req q = {.op = CX_SC_SINK_ERROR, .a = {k->h}};
    struct cx_sc_rep rep;
    if (call(&q, NULL, &rep) < 0 || !rep.slen)
        return 0;
    if (cap)
        snprintf(out, cap, "%s", rep.s);
    return rep.slen;
}

static void take_stats(void *arg, const void *src, size_t len)
{
    memcpy(arg, src, len < sizeof(struct cx_chan_stats) ? len : sizeof(struct cx_chan_stats));
}

void cx_sc_chan_stats(struct cx_chan *chp, struct cx_chan_stats *out)
{
    struct sc_chan *ch = (struct sc_chan *)chp;
    memset(out, 0, sizeof *out);
    flush_submits(); /* the counters include every submit made before */
    struct cx_sc_req q = {.op = CX_SC_CHAN_STATS, .a = {ch->h}};
    struct cx_sc_rep rep;
    struct bulk b = {.take = take_stats, .take_arg = out};
    call(&q, &b, &rep);
}

int cx_sc_chan_wait_members(struct cx_chan *chp, unsigned sources, unsigned sinks, int timeout_ms)
{
    struct sc_chan *ch = (struct sc_chan *)chp;
    struct cx_sc_req q = {.op = CX_SC_WAIT_MEMBERS, .a = {ch->h, sources, sinks, timeout_ms}};
    struct cx_sc_rep rep;
    int64_t r = call(&q, NULL, &rep);
    return r < 0 ? (int)r : 0;
}
