/* The sidecar's server: the Unix socket, what each application connection does when the
 * engine (cx_sc_engine.c) hands it over, the shared-memory region each connection gets,
 * sessions, start and stop. The calls
 * themselves are in cx_sc_ops.c, the HTTP endpoint in cx_sc_http.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sidecar/cx_sidecar_int.h"
#include "common/cx_error.h"
#include "common/cx_fabric_env.h"
#include "engine/cx_idle.h"
#include "sidecar/cx_sc_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

uint64_t cx__sc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

const double cx__sc_lat_bounds[SC_LAT_BUCKETS] = {
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.005, 0.025, 0.1, 1, 10};

/* ---- connections ---- */

static int send_rep(int fd, const struct cx_sc_rep *rep, int memfd)
{
    struct iovec iov = {.iov_base = (void *)rep, .iov_len = CX_SC_REP_HDR + rep->slen};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    if (memfd >= 0) {
        memset(&u, 0, sizeof u);
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : 0;
}

static void rep_err(struct cx_sc_rep *rep, int rc)
{
    rep->rc = rc;
    const char *m = cx_errmsg();
    rep->slen = (uint32_t)snprintf(rep->s, sizeof rep->s, "%s", m[0] ? m : strerror(-rc));
    if (rep->slen >= sizeof rep->s)
        rep->slen = sizeof rep->s - 1;
}

static int uid_allowed(const struct cx_sidecar *sc, uid_t uid)
{
    if (!sc->nallowed || uid == getuid())
        return 1;
    for (int i = 0; i < sc->nallowed; i++)
        if (sc->allowed[i] == uid)
            return 1;
    return 0;
}

/* "1000,1001" into sc->allowed. 0 or -EINVAL. */
static int parse_uids(struct cx_sidecar *sc, const char *list)
{
    for (const char *p = list; p && *p;) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || errno || v > 0xfffffffful || (*end && *end != ',') ||
            sc->nallowed == (int)(sizeof sc->allowed / sizeof sc->allowed[0]))
            return cx_err_set(EINVAL, "allowed users '%s': give up to 16 numeric uids separated by commas", list);
        sc->allowed[sc->nallowed++] = (uid_t)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The hello: joins (or starts) the session, makes the region and sends its memfd. */
static int conn_hello(struct sc_conn *c, const struct cx_sc_req *q)
{
    struct cx_sidecar *sc = c->sc;
    struct cx_sc_rep rep = {0};
    int memfd = -1, rc;
    if (q->op != CX_SC_HELLO || q->a[3] != CX_SC_PROTO_VERSION ||
        (q->a[1] != CX_SC_CONN_CALLS && q->a[1] != CX_SC_CONN_EVENTS)) {
        rc = cx_err_set(EPROTO, "hello: protocol version %lld, this sidecar speaks %d",
                        (long long)q->a[3], CX_SC_PROTO_VERSION);
        goto error;
    }
    struct ucred cred;
    socklen_t cl = sizeof cred;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
        rc = cx_err_set(errno, "peer credentials: %s", strerror(errno));
        goto error;
    }
    if (!uid_allowed(sc, cred.uid)) {
        cx_sc_log("warn", "connection of a user not allowed: refused", "\"uid\":%u", (unsigned)cred.uid);
        rc = cx_err_set(EACCES, "user %u may not use this sidecar (--allow-uid)", (unsigned)cred.uid);
        goto error;
    }
    uint64_t cap = sc->o.ring_size;
    c->maplen = 2 * cx_sc_ring_span(cap) + CX_SC_SLOT_SPAN;
    if ((memfd = memfd_create("conflux-rings", MFD_CLOEXEC)) < 0 ||
        ftruncate(memfd, (off_t)c->maplen) < 0) {
        rc = cx_err_set(errno, "shared region of %zu bytes: %s", c->maplen, strerror(errno));
        goto error;
    }
    c->map = mmap(NULL, c->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        rc = cx_err_set(errno, "map the shared region: %s", strerror(errno));
        goto error;
    }
    cx_sc_ring_init(&c->in, c->map, cap);
    cx_sc_ring_init(&c->out, (uint8_t *)c->map + cx_sc_ring_span(cap), cap);
    c->slot = (struct cx_sc_slot *)((uint8_t *)c->map + 2 * cx_sc_ring_span(cap));
    c->kind = (int)q->a[1];
    pthread_mutex_lock(&sc->mu);
    struct sc_session *s = sc->sessions;
    while (s && s->id != (uint64_t)q->a[0])
        s = s->next;
    if (s && s->uid != cred.uid) {
        pthread_mutex_unlock(&sc->mu);
        cx_sc_log("warn", "connection named another user's session: refused",
                  "\"uid\":%u,\"app_pid\":%d", (unsigned)cred.uid, (int)q->a[2]);
        rc = cx_err_set(EACCES, "that session belongs to another user");
        goto error;
    }
    if (!s && (s = calloc(1, sizeof *s))) {
        s->id = (uint64_t)q->a[0];
        s->pid = (int)q->a[2];
        s->uid = cred.uid;
        pthread_mutex_init(&s->ev_mu, NULL);
        s->next = sc->sessions;
        sc->sessions = s;
        sc->apps_total++;
        cx_sc_log("info", "application connected", "\"app_pid\":%d,\"session\":\"%016llx\"", s->pid,
                  (unsigned long long)s->id);
    }
    if (s) {
        s->nconn++;
        c->sess = s;
    }
    pthread_mutex_unlock(&sc->mu);
    if (!s) {
        rc = cx_err_set(ENOMEM, "session");
        goto error;
    }
    if (c->kind == CX_SC_CONN_EVENTS) {
        pthread_mutex_lock(&s->ev_mu);
        s->ev = c;
        pthread_mutex_unlock(&s->ev_mu);
    }
    rep.a[0] = (int64_t)cap;
    rc = send_rep(c->fd, &rep, memfd);
    close(memfd);
    return rc;
error:
    if (memfd >= 0)
        close(memfd);
    rep_err(&rep, rc);
    send_rep(c->fd, &rep, -1);
    return rc;
}

void cx__sc_op_account(struct cx_sidecar *sc, uint32_t op, uint64_t ns, int failed)
{
    if (op >= CX_SC_OP_MAX)
        return;
    struct sc_op_stats *st = &sc->ops[op];
    st->count++;
    st->errors += failed != 0;
    st->sum_ns += ns;
    double s = (double)ns / 1e9;
    for (int i = 0; i < SC_LAT_BUCKETS; i++)
        if (s <= cx__sc_lat_bounds[i]) {
            st->bucket[i]++;
            break;
        }
}

static void on_submit_rec(void *arg, uint32_t type, void *p, size_t len)
{
    if (type == CX_SC_REC_SUBMIT)
        cx__sc_submit_async(arg, p, len);
    else if (type == CX_SC_REC_WRITE)
        cx__sc_write_async(arg, p, len);
}

/* Reads what woke the connection: wake-up bytes (dropped) or the end. 0, or -ECONNRESET. */
static int drain_socket(struct sc_conn *c)
{
    char b[64];
    for (;;) {
        ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN ? 0 : -ECONNRESET;
    }
}

/* An events connection: runs the submits the application streams into ring 0; when there
 * are none it announces that it waits (the application then sends a byte) and gives the
 * connection back to the engine. */
static int events_step(struct sc_conn *c)
{
    cx_sc_ring_done_wait(&c->in);
    for (;;) {
        if (cx_sc_ring_read(&c->in, on_submit_rec, c, 256))
            continue;
        if (cx_sc_ring_broken(&c->in)) {
            cx_sc_log("warn", "an application broke its events ring: connection closed", NULL);
            return 0;
        }
        if (cx_sc_ring_prepare_wait(&c->in))
            return 1;
    }
}

/* Copies the request out of the slot (the application may write it meanwhile) and checks
 * it. 0, or -EPROTO. */
static int take_request(struct sc_conn *c, struct cx_sc_req *q)
{
    memcpy(q, &c->slot->req, CX_SC_REQ_HDR);
    if (q->slen >= CX_SC_STR_MAX)
        return -EPROTO;
    memcpy(q->s, c->slot->req.s, q->slen);
    q->s[q->slen] = 0;
    return 0;
}

/* A calls connection: runs requests as the application rings for them, polling for the
 * next one for the spin window; then announces that it sleeps and gives the connection back
 * to the engine (the application's next ring sends a byte). 1, or 0 when it must close. */
static int calls_step(struct sc_conn *c, struct cx_sc_req *q, struct cx_sc_rep *rep)
{
    struct cx_sidecar *sc = c->sc;
    uint64_t spin_ns = cx_idle_spin_ns();
    for (;;) {
        uint32_t now = atomic_load_explicit(&c->slot->req_bell.seq, memory_order_acquire);
        if (now == c->seq) {
            uint64_t t0 = cx__sc_now_ns();
            while (now == c->seq && cx__sc_now_ns() - t0 < spin_ns) {
                cx_idle_spin_until(t0, spin_ns);
                now = atomic_load_explicit(&c->slot->req_bell.seq, memory_order_acquire);
            }
            if (now == c->seq) {
                if (cx_sc_bell_arm(&c->slot->req_bell, c->seq))
                    return 1;
                now = atomic_load_explicit(&c->slot->req_bell.seq, memory_order_acquire);
            }
        }
        if (now != c->seq + 1 || take_request(c, q) < 0) {
            cx_sc_log("warn", "malformed request: connection closed", "\"op\":%u", c->slot->req.op);
            return 0;
        }
        uint64_t t0 = cx__sc_now_ns();
        memset(rep, 0, CX_SC_REP_HDR);
        void *bulk = NULL;
        size_t blen = 0;
        uint32_t type;
        if (q->bulk && (cx_sc_ring_peek(&c->in, &type, &bulk, &blen) <= 0 || type != CX_SC_REC_DATA)) {
            cx_sc_log("warn", "request names a payload the ring does not hold", "\"op\":%u", q->op);
            return 0;
        }
        cx_err_clear();
        cx__sc_handle(c, q, bulk, blen, rep);
        if (q->bulk)
            cx_sc_ring_release(&c->in);
        cx__sc_op_account(sc, q->op, cx__sc_now_ns() - t0, rep->rc < 0);
        memcpy(&c->slot->rep, rep, CX_SC_REP_HDR + rep->slen);
        cx_sc_bell_ring(&c->slot->rep_bell, ++c->seq, c->fd);
    }
}

/* The first message: the hello. 1 (served), 0 (close), or 1 with nothing read yet. */
static int hello_step(struct sc_conn *c, struct cx_sc_req *q)
{
    ssize_t n = recv(c->fd, q, sizeof *q, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 1;
    if (n <= 0)
        return 0;
    if ((size_t)n < CX_SC_REQ_HDR || q->slen != (size_t)n - CX_SC_REQ_HDR || q->slen >= CX_SC_STR_MAX) {
        cx_sc_log("warn", "malformed hello: connection closed", "\"bytes\":%zd", n);
        return 0;
    }
    q->s[q->slen] = 0;
    if (conn_hello(c, q) < 0)
        return 0;
    c->hello_done = 1;
    return 1;
}

/* Per worker thread: a request and a reply (4 KiB strings: not on every connection). */
static _Thread_local struct {
    struct cx_sc_req q;
    struct cx_sc_rep rep;
} tl_msg;

int cx__sc_conn_serve(struct sc_conn *c)
{
    if (!c->hello_done)
        return hello_step(c, &tl_msg.q) && (!c->hello_done || cx__sc_conn_serve(c));
    if (drain_socket(c) < 0) {
        /* the application or the sidecar's stop ended it: what the application streamed
         * before (submits, pi_writes it was told were made) is still run */
        if (c->kind == CX_SC_CONN_EVENTS)
            while (cx_sc_ring_read(&c->in, on_submit_rec, c, 256)) {
            }
        return 0;
    }
    if (c->kind == CX_SC_CONN_EVENTS)
        return events_step(c);
    return calls_step(c, &tl_msg.q, &tl_msg.rep);
}

void cx__sc_conn_close(struct sc_conn *c)
{
    struct cx_sidecar *sc = c->sc;
    /* gone: the events connection stops taking events, the last one ends the session */
    struct sc_session *s = c->sess;
    int last = 0;
    if (s) {
        pthread_mutex_lock(&s->ev_mu);
        if (s->ev == c)
            s->ev = NULL;
        pthread_mutex_unlock(&s->ev_mu);
        pthread_mutex_lock(&sc->mu);
        last = --s->nconn == 0;
        pthread_mutex_unlock(&sc->mu);
    }
    if (last) {
        cx__sc_session_close_all(sc, s->id);
        cx_sc_log("info", "application disconnected", "\"app_pid\":%d,\"session\":\"%016llx\"",
                  s->pid, (unsigned long long)s->id);
        pthread_mutex_lock(&sc->mu);
        for (struct sc_session **pp = &sc->sessions; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        pthread_mutex_unlock(&sc->mu);
        pthread_mutex_destroy(&s->ev_mu);
        free(s);
    }
    pthread_mutex_lock(&sc->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        sc->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sc->nconns--;
    pthread_cond_broadcast(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
    if (c->map)
        munmap(c->map, c->maplen);
    close(c->fd); /* closing removes it from the engine's set */
    free(c);
}

/* ---- start and stop ---- */

static int listen_unix(const char *path, unsigned mode)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path)
        return cx_err_set(ENAMETOOLONG, "socket path '%s' is longer than %zu bytes", path,
                          sizeof sa.sun_path - 1);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return cx_err_set(errno, "socket: %s", strerror(errno));
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) /* a previous sidecar's */
        unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "listen on '%s': %s", path, strerror(e));
    }
    if (chmod(path, mode) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "socket mode %o on '%s': %s", mode, path, strerror(e));
    }
    return fd;
}

/* The channel runtime's listen address for a transport. TCP listens on every interface (the
 * runtime advertises the pod's address); the others listen on the pod's first non-loopback
 * IPv4 address, which is then also the address they advertise. */
static const char *listen_for(const char *transport, char *buf, size_t cap)
{
    const char *scheme = strcmp(transport, "rdma") == 0 || strcmp(transport, "ucx") == 0 ? "ucx"
                       : strcmp(transport, "dpdk") == 0 ? "dpdk"
                       : strcmp(transport, "tls") == 0 ? "tls" : "tcp";
    char ip[INET_ADDRSTRLEN] = "0.0.0.0";
    struct ifaddrs *ifs;
    /* dpdk on the device the operator named, or with its own address: the port's address
     * (0.0.0.0 to the driver), not the kernel's, which belongs to another interface */
    int dpdk_own = strcmp(scheme, "dpdk") == 0 &&
                   (getenv("CONFLUX_DPDK_IP") || getenv(CX_ENV_DEVICE_RESOURCE) || getenv(CX_ENV_NETWORK_STATUS));
    if (strcmp(scheme, "tcp") != 0 && !dpdk_own && getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
            if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                !(i->ifa_flags & IFF_LOOPBACK)) {
                inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip, sizeof ip);
                break;
            }
        freeifaddrs(ifs);
    }
    snprintf(buf, cap, "%s://%s:0", scheme, ip);
    return buf;
}

static void free_sc(struct cx_sidecar *sc)
{
    for (int i = 0; i < 3; i++)
        free(sc->declared[i]);
    free(sc->h);
    pthread_mutex_destroy(&sc->mu);
    pthread_cond_destroy(&sc->cv);
    free(sc);
}

int cx_sidecar_start(const struct cx_sidecar_opts *o, struct cx_sidecar **out)
{
    if (!o || !o->socket || !o->socket[0])
        return cx_err_set(EINVAL, "sidecar: a socket path is required");
    struct cx_sidecar *sc = calloc(1, sizeof *sc);
    if (!sc)
        return cx_err_set(ENOMEM, "sidecar");
    int rc;
    sc->o = *o;
    sc->lfd = sc->hfd = sc->stop_pipe[0] = sc->stop_pipe[1] = sc->epfd = sc->spare_fd = -1;
    pthread_mutex_init(&sc->mu, NULL);
    pthread_cond_init(&sc->cv, NULL);
    snprintf(sc->socket, sizeof sc->socket, "%s", o->socket);
    snprintf(sc->transport, sizeof sc->transport, "%s", o->transport ? o->transport : "tcp");
    snprintf(sc->space, sizeof sc->space, "%s", o->space ? o->space : "");
    sc->o.socket = sc->socket;
    sc->o.transport = sc->transport;
    sc->o.space = sc->space[0] ? sc->space : NULL;
    if (!sc->o.ring_size)
        sc->o.ring_size = 16u << 20;
    if ((rc = parse_uids(sc, o->allow_uids)) < 0)
        goto error;
    sc->o.allow_uids = NULL;
    const char *lists[3] = {o->inputs, o->outputs, o->channels};
    for (int i = 0; i < 3; i++)
        sc->declared[i] = strdup(lists[i] ? lists[i] : "");
    sc->started_ns = cx__sc_now_ns();
    sc->o.inputs = sc->o.outputs = sc->o.channels = NULL; /* the caller's strings: not kept */
    char lbuf[64];
    /* rdma inside a fabric: tcp for everyone, ucx for the fabric's members (the runtime
     * asks each peer it dials); rdma without a fabric: ucx only, as before */
    int in_fabric = strcmp(sc->transport, "rdma") == 0 && o->fabric && o->fabric[0];
    struct cx_chan_ctx_opts co = {.listen = o->listen ? o->listen
                                            : listen_for(in_fabric ? "tcp" : sc->transport, lbuf, sizeof lbuf),
                                  .advertise = o->advertise,
                                  .fabric = in_fabric ? o->fabric : NULL};
    if ((rc = cx_chan_ctx_create(&co, &sc->ctx)) < 0) {
        rc = cx_err_wrap(rc, "sidecar (transport %s)", sc->transport);
        goto error;
    }
    if (pipe2(sc->stop_pipe, O_CLOEXEC) < 0) {
        rc = cx_err_set(errno, "pipe: %s", strerror(errno));
        goto error;
    }
    if ((rc = cx__sc_http_start(sc)) < 0)
        goto error;
    if ((sc->lfd = rc = listen_unix(sc->socket, sc->o.socket_mode ? sc->o.socket_mode : 0666)) < 0)
        goto error;
    if ((rc = cx__sc_engine_start(sc)) < 0)
        goto error;
    sc->ready = 1;
    *out = sc;
    return 0;
error:
    cx__sc_engine_stop(sc, 0);
    if (sc->lfd >= 0) {
        close(sc->lfd);
        unlink(sc->socket);
    }
    cx__sc_http_stop(sc);
    for (int i = 0; i < 2; i++)
        if (sc->stop_pipe[i] >= 0)
            close(sc->stop_pipe[i]);
    cx_chan_ctx_destroy(sc->ctx);
    free_sc(sc);
    return rc;
}

const char *cx_sidecar_http_addr(const struct cx_sidecar *sc) { return sc->http_addr; }
const char *cx_sidecar_chan_addr(const struct cx_sidecar *sc) { return cx_chan_ctx_addr(sc->ctx); }

void cx_sidecar_stop(struct cx_sidecar *sc)
{
    if (!sc)
        return;
    sc->ready = 0;
    sc->stopping = 1;
    cx__sc_engine_stop_accepting(sc);
    close(sc->lfd);
    unlink(sc->socket);
    /* disconnect the applications: the engine closes what the sessions left open */
    pthread_mutex_lock(&sc->mu);
    for (struct sc_conn *c = sc->conns; c; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    while (sc->nconns > 0 && pthread_cond_timedwait(&sc->cv, &sc->mu, &dl) == 0) {
    }
    int left = sc->nconns;
    pthread_mutex_unlock(&sc->mu);
    left += cx__sc_engine_stop(sc, left ? 0 : 5);
    cx__sc_http_stop(sc);
    close(sc->stop_pipe[0]);
    close(sc->stop_pipe[1]);
    if (left) { /* a thread stuck in a call (a read without deadline): leave it all */
        cx_sc_log("warn", "stopped with connections still busy", "\"connections\":%d", left);
        return;
    }
    cx_chan_ctx_destroy(sc->ctx);
    free_sc(sc);
}
