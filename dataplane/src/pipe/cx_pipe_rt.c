/* The pipe runtime: descriptors, spaces, the in-bound thread (seed pi-channels.txt,
 * Figure 5: "each application is capable of accepting incoming transmissions
 * asynchronously"), pi_unlink. */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "space/cx_space_name.h"
#include "stack/cx_stack.h"
#include "transport/cx_driver.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

struct pi_inbound {
    struct cx_link *link;
    uint64_t pipe_id;   /* from the writer's hello */
    double hello_due;   /* 0 once the hello came; else a link still silent then is dropped */
    struct pi_inbound *next;
};

struct pi_global g_pi = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake_fd = -1};

void pi_rt_wake(void)
{
    uint64_t one = 1;
    if (g_pi.wake_fd >= 0 && write(g_pi.wake_fd, &one, sizeof one) < 0) {
        /* the counter is full: the thread has a wake-up pending anyway */
    }
}

void pi_rt_flush_writers(void)
{
    for (int i = 0; i < g_pi.desc_hi; i++)
        if (g_pi.desc[i].kind == PI_WRITER)
            pi_writer_flush(g_pi.desc[i].w, 0);
}

int pi_fail(int rc)
{
    errno = rc < 0 ? -rc : EIO;
    return -1;
}

int pi_name_check(const char *name, const char *call)
{
    if (name && strnlen(name, CX_SPACE_NAME_MAX + 1) > CX_SPACE_NAME_MAX)
        return cx_err_set(ENAMETOOLONG, "%s: pipe name '%.32s...' is %zu bytes, the limit %d", call,
                          name, strlen(name), CX_SPACE_NAME_MAX);
    int rc = cx_space_name_check(name);
    return rc < 0 ? cx_err_wrap(rc, "%s", call) : 0;
}

double pi_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct pi_space *pi_space_get(int s)
{
    if (s < 0 || s >= PI_MAX_SPACES || !g_pi.spaces[s].used) {
        cx_err_set(EBADF, "%d is not an open space", s);
        return NULL;
    }
    return &g_pi.spaces[s];
}

int pi_desc_alloc(void)
{
    for (int i = 0; i < PI_MAX_DESC; i++)
        if (g_pi.desc[i].kind == PI_FREE) {
            if (i >= g_pi.desc_hi)
                g_pi.desc_hi = i + 1;
            return i;
        }
    return cx_err_set(EMFILE, "all %d pipe descriptors are in use", PI_MAX_DESC);
}

/* ---- the in-bound thread ----------------------------------------------------------- */

static void on_inbound(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct pi_inbound *ib = arg;
    if (h->type == CX_FRAME_CTRL && len == 8) { /* hello: which pipe this link carries */
        memcpy(&ib->pipe_id, p, 8);
        return;
    }
    if (h->type != CX_FRAME_DATA || !ib->pipe_id)
        return;
    pi_reader_offer_direct(ib->pipe_id, h, p, len); /* h->seq: the segment's id */
}

#define HELLO_SLACK_MS 20 /* the link's own clock must see its handshake deadline passed */
#define POLL_FDS_MAX 64   /* in-bound links polled by fd; with more, a 20 ms tick serves all */
#define TICK_MS 20

/* Accepts without waiting for any peer (cx_listener_accept): a writer's handshake runs in
 * its link's progress, called here when its fd wakes and at its deadline (the thread sleeps
 * until the earliest one), which fails a link whose handshake is not done by then; a link
 * that is up but has not said which pipe it carries by then (plain tcp: silent, or half a
 * frame) is dropped the same way; meanwhile the other writers are served. */
static int service_inbound(void)
{
    int work = 0;
    for (;;) {
        struct cx_link *k;
        if (cx_listener_accept(g_pi.lops, g_pi.listener, cx_handshake_ms(), &k) < 0)
            break;
        if (cx_stack_assemble(&k, 1, &k) < 0) { /* dpdk: reliability, fragmentation */
            cx_link_close(k);
            continue;
        }
        struct pi_inbound *ib = calloc(1, sizeof *ib);
        if (!ib) {
            cx_link_close(k);
            break;
        }
        ib->link = k;
        ib->hello_due = pi_now_ms() + cx_handshake_ms() + HELLO_SLACK_MS;
        ib->next = g_pi.in;
        g_pi.in = ib;
        work++;
    }
    for (struct pi_inbound **pp = &g_pi.in; *pp;) {
        struct pi_inbound *ib = *pp;
        int n = cx_link_progress(ib->link, on_inbound, ib, 256);
        if (ib->pipe_id)
            ib->hello_due = 0;
        else if (n >= 0 && pi_now_ms() >= ib->hello_due)
            n = cx_err_set(ETIMEDOUT, "no hello within the handshake deadline (%d ms)", cx_handshake_ms());
        if (n < 0) { /* the writer left: its readers go on from the space */
            if (!ib->pipe_id) /* never said which pipe: a failed handshake, a stranger */
                fprintf(stderr, "conflux pipe: dropped a direct link before its hello: %s\n",
                        cx_errmsg()); /* tls and ucx name the peer */
            pi_reader_direct_gone(ib->pipe_id);
            *pp = ib->next;
            cx_link_close(ib->link);
            free(ib);
            continue;
        }
        work += n;
        pp = &ib->next;
    }
    return work;
}

int pi_rt_inbound_links(uint64_t pipe_id)
{
    int n = 0;
    for (struct pi_inbound *ib = g_pi.in; ib; ib = ib->next)
        n += ib->pipe_id == pipe_id;
    return n;
}

/* How long the in-bound thread may sleep: until the earliest timer of an in-bound link or a
 * reader, or for ever (-1) when there is none, so an idle process never wakes. */
static int sleep_ms(int nin)
{
    if (nin > POLL_FDS_MAX)
        return TICK_MS;
    double due = 0;
    for (struct pi_inbound *ib = g_pi.in; ib; ib = ib->next)
        if (ib->hello_due && (!due || ib->hello_due < due))
            due = ib->hello_due;
    for (int i = 0; i < g_pi.desc_hi; i++)
        if (g_pi.desc[i].kind == PI_READER) {
            double d = pi_reader_due_ms(g_pi.desc[i].r);
            if (d && (!due || d < due))
                due = d;
        }
    if (!due)
        return -1;
    double ms = due - pi_now_ms();
    return ms <= 0 ? 0 : ms > 60000 ? 60000 : (int)ms + 1;
}

static void *inbound_thread(void *arg)
{
    (void)arg;
    struct pollfd pf[PI_MAX_DESC + 64];
    pthread_mutex_lock(&g_pi.mu);
    while (!g_pi.stop) {
        int work = service_inbound();
        int writers_wait = 0; /* segments held in a writer's corked socket for 1 ms go */
        for (int i = 0; i < g_pi.desc_hi; i++)
            if (g_pi.desc[i].kind == PI_READER)
                work += pi_reader_service(g_pi.desc[i].r);
            else if (g_pi.desc[i].kind == PI_WRITER)
                writers_wait |= pi_writer_flush(g_pi.desc[i].w, 1.0);
        if (work) { /* let the application's calls in between batches */
            pthread_mutex_unlock(&g_pi.mu);
            pthread_mutex_lock(&g_pi.mu);
            continue;
        }
        /* Arm each direct link before blocking on its fd: shm and ucx wake the fd only for
         * an armed reader, and tls may hold decrypted bytes the socket no longer shows.
         * -EAGAIN: progress has work (or a failure to report) first. */
        int busy = 0, nin = 0;
        for (struct pi_inbound *ib = g_pi.in; ib; ib = ib->next, nin++)
            busy |= cx_link_arm(ib->link) < 0;
        int n = 0;
        pf[n++] = (struct pollfd){.fd = g_pi.lops->listener_fd(g_pi.listener), .events = POLLIN};
        if (g_pi.wake_fd >= 0)
            pf[n++] = (struct pollfd){.fd = g_pi.wake_fd, .events = POLLIN};
        for (struct pi_inbound *ib = g_pi.in; ib && n < POLL_FDS_MAX; ib = ib->next)
            pf[n++] = (struct pollfd){.fd = cx_link_fd(ib->link), .events = POLLIN};
        int cap = (int)(sizeof pf / sizeof pf[0]) - n, nr = pi_reader_fds(pf + n, cap);
        n += nr;
        int ms = busy ? 0 : writers_wait ? 1 : nr == cap || g_pi.wake_fd < 0 ? TICK_MS : sleep_ms(nin);
        pthread_mutex_unlock(&g_pi.mu);
        poll(pf, (nfds_t)n, ms);
        uint64_t cnt;
        if (g_pi.wake_fd >= 0 && read(g_pi.wake_fd, &cnt, sizeof cnt) < 0) {
            /* nothing was pending (non-blocking) */
        }
        pthread_mutex_lock(&g_pi.mu);
    }
    pthread_mutex_unlock(&g_pi.mu);
    return NULL;
}

/* A forked child starts with no pipes: the in-bound thread did not follow it, and the
 * parent's descriptors are the parent's. (Their memory and sockets stay allocated in the
 * child; a child that is forked to run pipes of its own does not miss them.) */
static void atfork_child(void)
{
    pthread_mutex_init(&g_pi.mu, NULL);
    memset(g_pi.spaces, 0, sizeof g_pi.spaces);
    memset(g_pi.desc, 0, sizeof g_pi.desc);
    g_pi.desc_hi = 0;
    g_pi.wake_fd = -1; /* the parent's: the child makes its own when it starts pipes */
    g_pi.started = 0;
    g_pi.in = NULL;
    g_pi.listener = NULL;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

int pi_rt_start_locked(const char *addr)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    if (g_pi.started)
        return 0;
    if (!(g_pi.lops = cx_driver_for(addr)))
        return -cx_errcode();
    int rc = g_pi.lops->listen(addr, &g_pi.listener);
    if (rc < 0)
        return cx_err_wrap(rc, "pipe readers' listener");
    snprintf(g_pi.listen_addr, sizeof g_pi.listen_addr, "%s", g_pi.lops->listener_addr(g_pi.listener));
    g_pi.stop = 0;
    if (g_pi.wake_fd < 0)
        g_pi.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* -1: timeouts only */
    if ((rc = pthread_create(&g_pi.thread, NULL, inbound_thread, NULL)) != 0) {
        g_pi.lops->listener_close(g_pi.listener);
        return cx_err_set(rc, "in-bound thread: %s", strerror(rc));
    }
    g_pi.started = 1;
    return 0;
}

/* ---- spaces ------------------------------------------------------------------------ */

/* The local address a peer would use to reach us: the one our space connection uses. */
static void local_ip(struct cx_space_client *c, char *ip, size_t cap)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof sa;
    snprintf(ip, cap, "127.0.0.1");
    int fd = cx_space_client_fd(c);
    if (fd >= 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET)
        inet_ntop(AF_INET, &sa.sin_addr, ip, (socklen_t)cap);
}

/* The direct-link listener's address from pi_options.listen (NULL: CONFLUX_PIPE_LISTEN,
 * else "tcp"): a full address of a transport a pipe may use, or a bare scheme completed with
 * that transport's default. 0, or -EINVAL with a message. */
static int listen_addr(const char *want, struct cx_space_client *c, char *out, size_t cap)
{
    static const char *const schemes[] = {"tcp", "shm", "ucx", "tls", "dpdk"};
    static unsigned seq; /* a fresh shm name after pi_shutdown: the old may linger a moment */
    const char *from = want ? "pi_options.listen" : "CONFLUX_PIPE_LISTEN";
    if (!want && !(want = getenv("CONFLUX_PIPE_LISTEN")))
        want = "tcp";
    const char *sep = strstr(want, "://");
    size_t n = sep ? (size_t)(sep - want) : strlen(want);
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) {
        if (n != strlen(schemes[i]) || strncmp(want, schemes[i], n) != 0)
            continue;
        if (sep && sep[3]) {
            if ((size_t)snprintf(out, cap, "%s", want) >= cap)
                return cx_err_set(EINVAL, "%s '%.40s...' is longer than %zu bytes", from, want, cap - 1);
        } else if (i == 1) {
            snprintf(out, cap, "shm://@conflux-pipe-%d-%u", (int)getpid(), seq++);
        } else if (i == 4) { /* the DPDK port's own address (CONFLUX_DPDK_IP), not the kernel's */
            snprintf(out, cap, "dpdk://0.0.0.0:0");
        } else {
            char ip[64];
            local_ip(c, ip, sizeof ip);
            snprintf(out, cap, "%s://%s:0", schemes[i], ip);
        }
        return 0;
    }
    return cx_err_set(EINVAL, "%s '%s': the direct link's transport must be tcp, shm, ucx, tls or dpdk "
                              "(a bare name or a full address such as tcp://10.0.0.5:0)", from, want);
}

int cx_embedded_pi_space_open(const char *addr, const struct pi_options *opts)
{
    struct pi_options o = opts ? *opts : (struct pi_options){0};
    if (!o.reader_mem)
        o.reader_mem = 64u << 20;
    if (!o.spill_dir)
        o.spill_dir = "/tmp";
    struct stat st;
    if (strlen(o.spill_dir) >= sizeof g_pi.spaces[0].spill_dir)
        return pi_fail(cx_err_set(ENAMETOOLONG, "spill_dir '%.40s...' is longer than %zu bytes",
                                  o.spill_dir, sizeof g_pi.spaces[0].spill_dir - 1));
    if (stat(o.spill_dir, &st) != 0)
        return pi_fail(cx_err_set(errno, "spill_dir '%s': %s", o.spill_dir, strerror(errno)));
    if (!S_ISDIR(st.st_mode))
        return pi_fail(cx_err_set(ENOTDIR, "spill_dir '%s' is not a directory", o.spill_dir));
    if (access(o.spill_dir, W_OK | X_OK) != 0)
        return pi_fail(cx_err_set(errno, "spill_dir '%s' is not writable: %s", o.spill_dir, strerror(errno)));
    if (!o.window)
        o.window = 1024;
    if (!o.timeout_ms)
        o.timeout_ms = 10000;
    struct cx_space_client *c;
    int rc = cx_space_connect(addr, &c);
    if (rc < 0)
        return pi_fail(rc);
    pthread_mutex_lock(&g_pi.mu);
    int s = -1;
    for (int i = 0; i < PI_MAX_SPACES; i++)
        if (!g_pi.spaces[i].used) {
            s = i;
            break;
        }
    if (s < 0) {
        rc = cx_err_set(EMFILE, "all %d space descriptors are in use", PI_MAX_SPACES);
    } else {
        char listen[200];
        rc = listen_addr(o.listen, c, listen, sizeof listen);
        if (rc == 0)
            rc = pi_rt_start_locked(listen);
    }
    if (rc < 0) {
        pthread_mutex_unlock(&g_pi.mu);
        cx_space_disconnect(c);
        return pi_fail(rc);
    }
    struct pi_space *sp = &g_pi.spaces[s];
    memset(sp, 0, sizeof *sp);
    sp->used = 1;
    sp->ctl = c;
    sp->opts = o;
    sp->opts.listen = NULL; /* not kept: the caller's string */
    sp->opts.spill_dir = NULL;
    snprintf(sp->spill_dir, sizeof sp->spill_dir, "%s", o.spill_dir);
    snprintf(sp->addr, sizeof sp->addr, "%s", addr);
    snprintf(sp->my_addr, sizeof sp->my_addr, "%s", g_pi.listen_addr);
    pthread_mutex_unlock(&g_pi.mu);
    /* unknown formats in segments are asked of the space */
    cx_space_serve_formats(c);
    return s;
}

int cx_embedded_pi_space_close(int s)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    if (!sp) {
        pthread_mutex_unlock(&g_pi.mu);
        return pi_fail(-EBADF);
    }
    for (int i = 0; i < g_pi.desc_hi; i++)
        if ((g_pi.desc[i].kind == PI_READER && g_pi.desc[i].r->space == s) ||
            (g_pi.desc[i].kind == PI_WRITER && g_pi.desc[i].w->space == s) ||
            (g_pi.desc[i].kind == PI_GROUP && pi_group_space(g_pi.desc[i].g) == s)) {
            pthread_mutex_unlock(&g_pi.mu);
            return pi_fail(cx_err_set(EBUSY, "space %d still has open pipes (descriptor %d)", s, i));
        }
    struct cx_space_client *c = sp->ctl;
    free(sp->published);
    memset(sp, 0, sizeof *sp);
    pthread_mutex_unlock(&g_pi.mu);
    cx_space_disconnect(c);
    return 0;
}

/* ---- the format service: a writer's formats reach readers in other processes -------- */

static int published_locked(struct pi_space *sp, uint64_t token)
{
    for (size_t i = 0; i < sp->npublished; i++)
        if (sp->published[i] == token)
            return 1;
    return 0;
}

int pi_format_publish(int s, const struct cx_format *t, int timeout_ms)
{
    uint64_t token = cx_format_token(t);
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    int done = sp ? published_locked(sp, token) : 0;
    pthread_mutex_unlock(&g_pi.mu);
    if (!sp)
        return -EBADF;
    if (done)
        return 0;
    /* the space may be restarting (the writer rides that out too): retry until timeout */
    double end = pi_now_ms() + timeout_ms;
    struct cx_space_client *c = pi_space_ctl(s, NULL);
    int rc;
    for (;;) {
        rc = c ? cx_space_format_put(c, t, NULL) : -cx_errcode();
        if (rc != -ECONNRESET && rc != -ETIMEDOUT && c)
            break;
        if (pi_now_ms() > end)
            break;
        if (rc == -ECONNRESET)
            c = pi_space_ctl(s, c);
        else
            c = pi_space_ctl(s, NULL);
        if (!c)
            usleep(100000);
    }
    if (rc < 0)
        return cx_err_wrap(rc, "publishing format '%s' to the space", cx_format_name(t));
    pthread_mutex_lock(&g_pi.mu);
    if ((sp = pi_space_get(s)) && !published_locked(sp, token)) {
        if (sp->npublished == sp->cap_published) {
            size_t cap = sp->cap_published ? sp->cap_published * 2 : 8;
            uint64_t *p = realloc(sp->published, cap * sizeof *p);
            if (p) {
                sp->published = p;
                sp->cap_published = cap;
            }
        }
        if (sp->npublished < sp->cap_published) /* else: published again next time */
            sp->published[sp->npublished++] = token;
    }
    pthread_mutex_unlock(&g_pi.mu);
    return 0;
}

struct cx_space_client *pi_space_ctl(int s, struct cx_space_client *failed)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    struct cx_space_client *c = sp ? sp->ctl : NULL;
    if (c && c == failed) { /* the space restarted: a new connection for everyone */
        struct cx_space_client *n;
        if (cx_space_connect(sp->addr, &n) == 0) {
            sp->ctl = n;
            cx_space_serve_formats(n);
            cx_space_disconnect(failed);
            c = n;
        } else {
            c = NULL;
        }
    }
    pthread_mutex_unlock(&g_pi.mu);
    return c;
}

int cx_embedded_pi_unlink(const char *name, int s)
{
    int rc0 = pi_name_check(name, "pi_unlink");
    if (rc0 < 0)
        return pi_fail(rc0);
    struct cx_space_client *c = pi_space_ctl(s, NULL);
    if (!c)
        return pi_fail(-cx_errcode());
    int rc = cx_space_unlink(c, name, NULL);
    if (rc == -ECONNRESET && (c = pi_space_ctl(s, c)))
        rc = cx_space_unlink(c, name, NULL);
    return rc < 0 ? pi_fail(rc) : 0;
}

/* ---- shutdown ---------------------------------------------------------------------- */

int cx_embedded_pi_shutdown(void)
{
    int first = 0;
    for (int d = 0; d < PI_MAX_DESC; d++) {
        pthread_mutex_lock(&g_pi.mu);
        int kind = g_pi.desc[d].kind;
        pthread_mutex_unlock(&g_pi.mu);
        int rc = kind == PI_WRITER ? cx_embedded_pi_close(d) : kind == PI_READER || kind == PI_GROUP ? cx_embedded_pi_detach(d) : 0;
        if (rc < 0 && !first)
            first = -errno;
    }
    for (int s = 0; s < PI_MAX_SPACES; s++) {
        pthread_mutex_lock(&g_pi.mu);
        int used = g_pi.spaces[s].used;
        pthread_mutex_unlock(&g_pi.mu);
        if (used && cx_embedded_pi_space_close(s) < 0 && !first)
            first = -errno;
    }
    pthread_mutex_lock(&g_pi.mu);
    int started = g_pi.started;
    g_pi.stop = 1;
    pthread_mutex_unlock(&g_pi.mu);
    pi_rt_wake();
    if (started)
        pthread_join(g_pi.thread, NULL);
    pthread_mutex_lock(&g_pi.mu);
    while (g_pi.in) {
        struct pi_inbound *ib = g_pi.in;
        g_pi.in = ib->next;
        cx_link_close(ib->link);
        free(ib);
    }
    if (g_pi.listener)
        g_pi.lops->listener_close(g_pi.listener);
    g_pi.listener = NULL;
    g_pi.started = 0;
    g_pi.stop = 0;
    pthread_mutex_unlock(&g_pi.mu);
    if (first)
        errno = -first;
    return first ? -1 : 0;
}
