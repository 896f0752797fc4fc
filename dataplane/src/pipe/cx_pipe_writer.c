/* The write end: pi_create, pi_write, pi_close, pi_abandon. Each segment goes to the space (which
 * acknowledges it per its fsync policy) and, at the same time, straight to every reader
 * the space told us of (Figure 6, #9-#16 and #26-#38). Segments the space has not
 * acknowledged are retained, so a space that restarts loses nothing: the writer reconnects
 * with APPEND and resends them. */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "stack/cx_stack.h"
#include "transport/cx_driver.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIRECT_MAX_QUEUE (32u << 20) /* a reader this far behind falls back to the space */

static struct pi_writer *writer_get(int d)
{
    if (d < 0 || d >= PI_MAX_DESC || g_pi.desc[d].kind != PI_WRITER) {
        cx_err_set(EBADF, "%d is not a pipe open for writing", d);
        return NULL;
    }
    return g_pi.desc[d].w;
}

static void no_recv(void *a, const struct cx_frame_hdr *h, const void *p, size_t l)
{
    (void)a, (void)h, (void)p, (void)l;
}

static void set_cork(int fd, int on)
{
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

/* Every socket of the writer (cork_mu held): fn(fd). */
static void each_fd(struct pi_writer *w, int on_off)
{
    if (w->c)
        set_cork(cx_space_client_fd(w->c), on_off);
    for (int i = 0; i < w->ndirect; i++)
        if (w->direct[i].link)
            set_cork(cx_link_fd(w->direct[i].link), on_off);
}

/* Sends what the writer's links still hold queued because their sockets were full when
 * the segments were written (cork_mu held): without this, the last segments of a burst
 * would wait for the next pi_write, for ever if none comes (found with 64 MiB in flight
 * both ways). Links that fail are set aside in gone[] for the caller to close. Returns 1
 * while bytes still wait. */
static int drain_queued(struct pi_writer *w, struct cx_link **gone, int *ngone)
{
    int waiting = 0;
    for (int i = 0; i < w->ndirect; i++) {
        struct pi_direct *dl = &w->direct[i];
        if (!dl->link || cx_link_pending(dl->link) == 0)
            continue;
        if (cx_link_progress(dl->link, no_recv, NULL, 64) < 0) {
            gone[(*ngone)++] = dl->link; /* that reader falls back to the space */
            dl->link = NULL;
        } else {
            waiting |= cx_link_pending(dl->link) > 0;
        }
    }
    /* a lost space connection is noticed and recovered by the next call that needs it */
    if (w->c)
        waiting |= cx_space_client_push(w->c) > 0;
    return waiting;
}

int pi_writer_flush(struct pi_writer *w, double min_ms)
{
    struct cx_link *gone[PI_MAX_DIRECT];
    int ngone = 0;
    pthread_mutex_lock(&w->cork_mu);
    int waiting = w->dirty;
    if (w->dirty && pi_now_ms() - w->dirty_at >= min_ms) {
        each_fd(w, 0); /* uncorking sends what waits */
        if (w->corked)
            each_fd(w, 1);
        w->dirty = waiting = 0;
    }
    waiting |= drain_queued(w, gone, &ngone);
    pthread_mutex_unlock(&w->cork_mu);
    for (int i = 0; i < ngone; i++)
        cx_link_close(gone[i]);
    return waiting;
}

static void mark_dirty(struct pi_writer *w)
{
    if (!w->corked)
        return;
    pthread_mutex_lock(&w->cork_mu);
    int was_clean = !w->dirty;
    if (was_clean) {
        w->dirty = 1;
        w->dirty_at = pi_now_ms();
    }
    pthread_mutex_unlock(&w->cork_mu);
    /* the in-bound thread may be asleep until its next timer: it must flush this within
     * about 1 ms, so it re-polls with the short timeout */
    if (was_clean)
        pi_rt_wake();
}

static void direct_drop(struct pi_writer *w, struct pi_direct *dl)
{
    pthread_mutex_lock(&w->cork_mu);
    struct cx_link *k = dl->link;
    dl->link = NULL;
    pthread_mutex_unlock(&w->cork_mu);
    cx_link_close(k);
}

static void direct_add(struct pi_writer *w, const char *addr)
{
    struct pi_direct *dl = NULL;
    for (int i = 0; i < w->ndirect; i++)
        if (strcmp(w->direct[i].addr, addr) == 0)
            dl = &w->direct[i]; /* a reader that came back at the same address */
    if (!dl) {
        if (w->ndirect == PI_MAX_DIRECT)
            return; /* more readers read from the space only */
        dl = &w->direct[w->ndirect++];
        snprintf(dl->addr, sizeof dl->addr, "%s", addr);
    }
    if (dl->link)
        direct_drop(w, dl);
    struct cx_link *k;
    if (cx_connect(addr, &k) < 0)
        return; /* unreachable: it reads from the space */
    if (cx_stack_assemble(&k, 1, &k) < 0) { /* dpdk: reliability, fragmentation */
        cx_link_close(k);
        return;
    }
    struct cx_frame_hdr hello = {.type = CX_FRAME_CTRL};
    struct iovec iov = {&w->pipe_id, 8};
    if (cx_link_send(k, &hello, &iov, 1) < 0) {
        cx_link_close(k);
        return;
    }
    const char *colon = strstr(addr, "://"); /* cx_connect found a driver: it is there */
    pthread_mutex_lock(&w->cork_mu);
    snprintf(w->link, sizeof w->link, "%.*s", colon ? (int)(colon - addr) : 0, addr);
    dl->link = k;
    if (w->corked)
        set_cork(cx_link_fd(k), 1);
    pthread_mutex_unlock(&w->cork_mu);
}

void pi_writer_free(struct pi_writer *w)
{
    for (int i = 0; i < w->ndirect; i++)
        if (w->direct[i].link)
            direct_drop(w, &w->direct[i]);
    cx_space_disconnect(w->c);
    if (w->ret)
        for (uint32_t i = 0; i < w->window; i++)
            free(w->ret[i].data);
    free(w->ret);
    pthread_mutex_destroy(&w->cork_mu);
    free(w);
}

static int open_on_space(struct pi_writer *w, const char *addr, int mode, struct cx_space_pipe_info *info)
{
    pthread_mutex_lock(&w->cork_mu);
    struct cx_space_client *old = w->c, *c = NULL;
    w->c = NULL;
    pthread_mutex_unlock(&w->cork_mu);
    if (old)
        cx_space_disconnect(old);
    int rc = cx_space_connect(addr, &c);
    /* a writer restarting after a crash may find the space still holding its old
     * connection for a moment (the close is in flight): -EBUSY for up to 3 s is that */
    for (int i = 0; rc == 0; i++) {
        rc = cx_space_put(c, w->name, mode, 0, "", &w->handle, info);
        if (rc != -EBUSY || i == 30)
            break;
        usleep(100000);
        rc = 0;
    }
    pthread_mutex_lock(&w->cork_mu);
    w->c = c; /* kept even when it failed: the caller retries or frees */
    if (rc == 0 && c && w->corked)
        set_cork(cx_space_client_fd(c), 1);
    pthread_mutex_unlock(&w->cork_mu);
    return rc;
}

int pi_writer_begin(const char *name, int s, char *addr, size_t cap, struct pi_writer **out)
{
    *out = NULL;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    int d = sp ? pi_desc_alloc() : -EBADF;
    if (d >= 0)
        g_pi.desc[d].kind = -1; /* reserved */
    uint32_t window = sp ? sp->opts.window : 0;
    if (sp)
        snprintf(addr, cap, "%s", sp->addr);
    pthread_mutex_unlock(&g_pi.mu);
    if (d < 0)
        return d;
    struct pi_writer *w = calloc(1, sizeof *w);
    if (w) {
        snprintf(w->name, sizeof w->name, "%s", name);
        pthread_mutex_init(&w->cork_mu, NULL);
        w->corked = 1;
        w->space = s;
        w->window = window;
        if (!(w->ret = calloc(window, sizeof *w->ret))) {
            pi_writer_free(w);
            w = NULL;
        }
    }
    if (!w) {
        pi_writer_abort(d, NULL);
        return cx_err_set(ENOMEM, "pipe writer");
    }
    *out = w;
    return d;
}

void pi_writer_abort(int d, struct pi_writer *w)
{
    if (w)
        pi_writer_free(w);
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d].kind = PI_FREE;
    pthread_mutex_unlock(&g_pi.mu);
}

int cx_embedded_pi_create(const char *name, int s, int mode)
{
    int rc0 = pi_name_check(name, "pi_create");
    if (rc0 < 0)
        return pi_fail(rc0);
    if (mode != PI_CREATE && mode != PI_APPEND)
        return pi_fail(cx_err_set(EINVAL, "pi_create mode %d (PI_CREATE or PI_APPEND)", mode));
    char addr[160];
    struct pi_writer *w;
    int d = pi_writer_begin(name, s, addr, sizeof addr, &w);
    if (d < 0)
        return pi_fail(cx_err_wrap(d, "pi_create '%s'", name));
    struct cx_space_pipe_info info;
    int rc = open_on_space(w, addr, mode, &info);
    if (rc < 0) {
        rc = cx_err_wrap(rc, "pi_create '%s'", name);
        pi_writer_abort(d, w);
        return pi_fail(rc);
    }
    w->pipe_id = info.pipe_id;
    w->space_had = info.last_id;
    w->space_ended = info.ended;
    for (int i = 0; i < info.naddrs; i++) /* the known readers (#12-#13) */
        direct_add(w, info.addrs[i]);
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d] = (struct pi_desc){.kind = PI_WRITER, .w = w};
    pthread_mutex_unlock(&g_pi.mu);
    return d;
}

/* The space connection failed: reconnect (APPEND) and resend what it has not acknowledged. */
static int space_recover(struct pi_writer *w, int timeout_ms)
{
    char addr[160];
    pthread_mutex_lock(&g_pi.mu);
    snprintf(addr, sizeof addr, "%s", g_pi.spaces[w->space].addr);
    pthread_mutex_unlock(&g_pi.mu);
    double end = pi_now_ms() + timeout_ms;
    int rc;
    for (;;) {
        struct cx_space_pipe_info info;
        rc = open_on_space(w, addr, PI_APPEND, &info);
        if (rc == 0) {
            for (uint64_t id = info.last_id + 1; id <= w->last && rc == 0; id++) {
                struct pi_retained *r = &w->ret[id % w->window];
                if (r->id != id)
                    return cx_err_set(EIO, "pipe '%s': segment %" PRIu64 " was neither acknowledged by "
                                      "the space nor retained", w->name, id);
                struct iovec iov = {r->data, r->len};
                rc = cx_space_append(w->c, w->handle, id, r->format, &iov, 1);
            }
            if (rc == 0)
                return 0;
        }
        if (pi_now_ms() > end)
            return cx_err_wrap(rc, "pipe '%s': space %s unreachable for %d ms", w->name, addr, timeout_ms);
        usleep(100000);
    }
}

static int space_send(struct pi_writer *w, uint64_t id, uint64_t token, const void *p, size_t len,
                      int timeout_ms)
{
    int rc0 = w->c ? 0 : space_recover(w, timeout_ms); /* an earlier recovery failed */
    if (rc0 < 0)
        return rc0;
    /* window: wait for the space before getting further ahead */
    while (id > w->window && cx_space_acked(w->c, w->handle) < id - w->window) {
        pi_writer_flush(w, 0); /* what the space is to ack may wait in a corked socket */
        int rc = cx_space_wait_acked(w->c, w->handle, id - w->window, timeout_ms);
        if (rc == -ECONNRESET || rc == -ETIMEDOUT)
            rc = space_recover(w, timeout_ms);
        if (rc < 0)
            return rc;
    }
    struct pi_retained *r = &w->ret[id % w->window];
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return cx_err_set(ENOMEM, "segment copy");
    memcpy(copy, p, len);
    free(r->data);
    *r = (struct pi_retained){.id = id, .format = token, .len = (uint32_t)len, .data = copy};
    struct iovec iov = {(void *)p, len};
    int rc = cx_space_append(w->c, w->handle, id, token, &iov, 1);
    if (rc == -ECONNRESET || rc == -EPIPE)
        rc = space_recover(w, timeout_ms); /* resends id too */
    return rc;
}

static void direct_send(struct pi_writer *w, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    pi_writer_events(w); /* readers attached, migrating, moved since (check_restore, #39-#44) */
    struct iovec iov = {(void *)p, len};
    struct cx_link *gone[PI_MAX_DIRECT];
    int ngone = 0;
    pthread_mutex_lock(&w->cork_mu); /* the in-bound thread drains these links too */
    for (int i = 0; i < w->ndirect; i++) {
        struct pi_direct *dl = &w->direct[i];
        if (!dl->link)
            continue;
        /* progress (flushing what the socket did not take, noticing a reader that left)
         * only when something is queued or every 64 segments: a receive per segment that
         * finds nothing is a wasted system call */
        if (cx_link_send(dl->link, h, &iov, len ? 1 : 0) < 0 ||
            ((cx_link_pending(dl->link) || (h->seq & 63) == 0) &&
             cx_link_progress(dl->link, no_recv, NULL, 64) < 0) ||
            cx_link_pending(dl->link) > DIRECT_MAX_QUEUE) {
            gone[ngone++] = dl->link; /* that reader falls back to the space */
            dl->link = NULL;
        }
    }
    pthread_mutex_unlock(&w->cork_mu);
    for (int i = 0; i < ngone; i++)
        cx_link_close(gone[i]);
}

long cx_embedded_pi_write(int d, const void *b, size_t len, const struct cx_format *t)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_writer *w = writer_get(d);
    int timeout = w ? g_pi.spaces[w->space].opts.timeout_ms : 0;
    pthread_mutex_unlock(&g_pi.mu);
    if (!w)
        return pi_fail(-EBADF);
    int prc = t ? pi_format_publish(w->space, t, timeout) : 0; /* readers anywhere can decode */
    if (prc < 0)
        return pi_fail(cx_err_wrap(prc, "pi_write '%s'", w->name));
    uint8_t *enc = NULL;
    uint64_t token = 0;
    long bytes = (long)len;
    if (t && (bytes = pi_seg_encode(b, len, t, &enc, &token)) < 0)
        return pi_fail((int)bytes);
    const void *payload = t ? enc : b;
    uint64_t id = ++w->last;
    int rc = 0;
    if (id > w->space_had && w->space_ended) /* the redone run went past its own close */
        rc = cx_err_set(EPIPE, "the pipe was closed after its %llu segments: a writer opened "
                        "with PI_APPEND replays them, nothing can follow the end",
                        (unsigned long long)w->space_had);
    else if (id > w->space_had) { /* a replayed write the space holds is dropped (recovery) */
        rc = space_send(w, id, token, payload, (size_t)bytes, timeout);
        if (rc == 0) {
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = id, .format = token};
            direct_send(w, &h, payload, (size_t)bytes);
            mark_dirty(w);
        }
    }
    free(enc);
    if (rc < 0) {
        w->last--;
        return pi_fail(cx_err_wrap(rc, "pi_write '%s'", w->name));
    }
    return (long)len;
}

/* Takes writer d for pi_close or pi_abandon: its descriptor is reserved (no other call
 * finds it any more) and *timeout is its space's. NULL with EBADF when d is no writer. */
static struct pi_writer *writer_take(int d, int *timeout)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_writer *w = writer_get(d);
    *timeout = w ? g_pi.spaces[w->space].opts.timeout_ms : 0;
    if (w)
        g_pi.desc[d].kind = -1;
    pthread_mutex_unlock(&g_pi.mu);
    return w;
}

int cx_embedded_pi_close(int d)
{
    int timeout;
    struct pi_writer *w = writer_take(d, &timeout);
    if (!w)
        return pi_fail(-EBADF);
    pthread_mutex_lock(&w->cork_mu); /* from here on every send leaves at once */
    w->corked = 0;
    each_fd(w, 0);
    w->dirty = 0;
    pthread_mutex_unlock(&w->cork_mu);
    uint64_t last = w->last > w->space_had ? w->last : w->space_had;
    /* no connection after a recovery that failed: recover first */
    int rc = w->c ? cx_space_end(w->c, w->handle, last) : -ECONNRESET;
    if (rc == -ECONNRESET && (rc = space_recover(w, timeout)) == 0)
        rc = cx_space_end(w->c, w->handle, last);
    if (rc == 0)
        rc = cx_space_wait_acked(w->c, w->handle, last, timeout);
    if (rc == 0) { /* the ack of the END itself: a round trip behind it */
        struct cx_space_pipe_info info;
        rc = cx_space_lookup(w->c, w->name, &info);
    }
    if (rc == 0) /* the space lets the pipe go now, not when it notices the disconnect:
                  * an unlink or APPEND right after pi_close finds it closed */
        cx_space_stop(w->c, w->handle);
    struct cx_frame_hdr end = {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_END, .seq = last};
    direct_send(w, &end, NULL, 0);
    for (int i = 0; i < w->ndirect; i++)
        if (w->direct[i].link)
            cx_link_flush(w->direct[i].link, no_recv, NULL, 2000);
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    if (rc < 0)
        rc = cx_err_wrap(rc, "pi_close '%s'", w->name);
    pi_writer_free(w);
    return rc < 0 ? pi_fail(rc) : 0;
}

/* For the hold list (cx_pipe_migrate.c). */
void pi_writer_direct_add(struct pi_writer *w, const char *addr) { direct_add(w, addr); }
void pi_writer_direct_drop(struct pi_writer *w, struct pi_direct *dl) { direct_drop(w, dl); }

int cx_embedded_pi_abandon(int d)
{
    int timeout;
    struct pi_writer *w = writer_take(d, &timeout);
    if (!w)
        return pi_fail(-EBADF);
    pthread_mutex_lock(&w->cork_mu); /* what waits in corked sockets leaves now */
    w->corked = 0;
    each_fd(w, 0);
    w->dirty = 0;
    pthread_mutex_unlock(&w->cork_mu);
    /* what this run wrote reaches the space (a restarted writer then replays less); a
     * failure loses nothing that a replay would not write again */
    int rc = 0;
    if (w->last > w->space_had) { /* no connection: a recovery that failed before */
        rc = w->c ? cx_space_wait_acked(w->c, w->handle, w->last, timeout) : -ECONNRESET;
        if ((rc == -ECONNRESET || rc == -ETIMEDOUT) && (rc = space_recover(w, timeout)) == 0)
            rc = cx_space_wait_acked(w->c, w->handle, w->last, timeout);
    }
    /* no END: the space frees the writer's place now, not when it notices the disconnect,
     * so a PI_APPEND right after finds the pipe open and free; readers whose direct link
     * closes go on from the space's stream */
    if (rc == 0 && w->c)
        cx_space_stop(w->c, w->handle);
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    if (rc < 0)
        rc = cx_err_wrap(rc, "pi_abandon '%s': the space did not acknowledge segment %llu", w->name,
                         (unsigned long long)w->last);
    pi_writer_free(w);
    return rc < 0 ? pi_fail(rc) : 0;
}
