/* The read end: pi_attach, pi_read, pi_seek, pi_tell, pi_detach, and the in-bound
 * thread's work for each reader — the space's stream (late readers, recovery: Figure 8)
 * merged with writers' direct streams in the reader's buffer (cx_pipe_buf.h). */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "transport/cx_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RETRY_MS 200
/* The space's stream stops once it brings only duplicates (PAUSE_DUPS in a row: the
 * writer's direct stream is ahead), which halves what crosses into the reader, and comes
 * back when the reader makes no progress for STALL_MS (a gap, a writer that stopped
 * streaming) or the writer's link closes. */
#define PAUSE_DUPS 64
#define STALL_MS 50

struct pi_reader *pi_reader_get(int d)
{
    if (d < 0 || d >= PI_MAX_DESC || g_pi.desc[d].kind != PI_READER) {
        cx_err_set(EBADF, "%d is not a pipe open for reading", d);
        return NULL;
    }
    return g_pi.desc[d].r;
}

static void stream_drop(struct pi_reader *r)
{
    if (r->stream)
        cx_space_disconnect(r->stream);
    r->stream = NULL;
}

void pi_reader_free(struct pi_reader *r)
{
    stream_drop(r);
    cx_pipe_buf_free(r->buf);
    pthread_cond_destroy(&r->cv);
    free(r->scratch);
    free(r);
}

int cx_embedded_pi_attach(const char *name, int s)
{
    int rc0 = pi_name_check(name, "pi_attach");
    if (rc0 < 0)
        return pi_fail(rc0);
    return pi_reader_open(name, s, NULL);
}

int pi_reader_open(const char *name, int s, const struct pi_resume *resume)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    int d = sp ? pi_desc_alloc() : -EBADF;
    struct pi_reader *r = d >= 0 ? calloc(1, sizeof *r) : NULL;
    if (d >= 0 && !r)
        d = cx_err_set(ENOMEM, "pipe reader");
    if (d < 0) {
        pthread_mutex_unlock(&g_pi.mu);
        return pi_fail(d);
    }
    g_pi.desc[d].kind = -1; /* reserved while we talk to the space */
    char my_addr[160], spill[320];
    snprintf(my_addr, sizeof my_addr, "%s", sp->my_addr);
    snprintf(spill, sizeof spill, "%s/conflux-pipe-%d-%d.spill", sp->spill_dir,
             (int)getpid(), d);
    size_t mem = sp->opts.reader_mem;
    pthread_mutex_unlock(&g_pi.mu);

    /* get (Figure 6, #2): binds the name if needed and registers us with the space, so a
     * writer (now or later) streams to us directly; a migrated reader resumes its hold
     * instead (Figure 7: the writer sends what it held to our new address) */
    struct cx_space_pipe_info info;
    struct cx_space_client *ctl = pi_space_ctl(s, NULL);
    int rc = -cx_errcode();
    for (int again = 0; ctl && again < 2; again++) {
        rc = resume ? cx_space_resume(ctl, CX_SP_MIG_READER, name, my_addr, resume->pipe_id,
                                      resume->token, NULL, &info)
                    : cx_space_get(ctl, name, 0, my_addr, &info);
        if (rc != -ECONNRESET || !(ctl = pi_space_ctl(s, ctl)))
            break;
    }
    if (rc == 0)
        rc = cx_pipe_buf_create(resume ? resume->next : 1, mem, spill, &r->buf);
    pthread_mutex_lock(&g_pi.mu);
    if (rc < 0) {
        g_pi.desc[d].kind = PI_FREE;
        pthread_mutex_unlock(&g_pi.mu);
        free(r);
        return pi_fail(cx_err_wrap(rc, "%s '%s'", resume ? "pi_migrate_in" : "pi_attach", name));
    }
    snprintf(r->name, sizeof r->name, "%s", name);
    r->space = s;
    r->pipe_id = info.pipe_id;
    pthread_cond_init(&r->cv, NULL);
    g_pi.desc[d] = (struct pi_desc){.kind = PI_READER, .r = r};
    pthread_mutex_unlock(&g_pi.mu);
    pi_rt_wake(); /* its stream from the space opens now */
    return d;
}

/* ---- the in-bound thread's part (g_pi.mu held) ------------------------------------- */

static int stream_open(struct pi_reader *r)
{
    struct pi_space *sp = &g_pi.spaces[r->space];
    struct cx_space_pipe_info info;
    int rc = cx_space_connect(sp->addr, &r->stream);
    /* the name still names our pipe? (a GET would bind an unlinked name to a new one) */
    if (rc == 0 && ((rc = cx_space_lookup(r->stream, r->name, &info)) == -ENOENT ||
                    (rc == 0 && info.pipe_id != r->pipe_id)))
        rc = cx_err_set(ENOENT, "pipe '%s' was unlinked%s", r->name,
                        rc == 0 ? " (the name now names another pipe)" : "");
    /* (re-)register with the space on this connection: after a restart of the space the
     * writer learns of us again (registrations live as long as their connection) */
    if (rc == 0)
        rc = cx_space_get(r->stream, r->name, 0, sp->my_addr, &info);
    if (rc == 0)
        rc = cx_space_read_start(r->stream, r->name, cx_pipe_buf_next(r->buf), &r->stream_handle, &info);
    if (rc < 0)
        stream_drop(r);
    if (rc == -ENOENT || rc == -ENODATA) { /* unlinked, or what we need was dropped: tell pi_read */
        r->err = rc;
        snprintf(r->errmsg, sizeof r->errmsg, "%s", cx_errmsg());
        pthread_cond_broadcast(&r->cv);
    }
    return rc;
}

static void stream_pause(struct pi_reader *r)
{
    if (cx_space_stop(r->stream, r->stream_handle) < 0) {
        stream_drop(r); /* reconnects when it resumes */
        r->retry_at = 0;
    }
    r->paused = 1;
    r->space_dups = 0;
}

void pi_reader_direct_gone(uint64_t pipe_id)
{
    for (int i = 0; i < g_pi.desc_hi; i++)
        if (g_pi.desc[i].kind == PI_READER && g_pi.desc[i].r->pipe_id == pipe_id)
            g_pi.desc[i].r->progress_at = 0; /* counts as stalled: resume now */
}

int pi_reader_service(struct pi_reader *r)
{
    if (r->wake) { /* one wake-up per batch from the writer's stream, not per segment */
        r->wake = 0;
        pthread_cond_broadcast(&r->cv);
    }
    if (r->err || r->stream_done)
        return 0;
    double now = pi_now_ms();
    uint64_t next = cx_pipe_buf_next(r->buf);
    if (next != r->progress_next) {
        r->progress_next = next;
        r->progress_at = now;
    }
    if (r->paused) {
        if (now - r->progress_at < STALL_MS)
            return 0;
        r->paused = 0; /* stalled: the space brings what the writer's stream did not */
        struct cx_space_pipe_info info;
        if (r->stream && cx_space_read_start(r->stream, r->name, next, &r->stream_handle, &info) < 0)
            stream_drop(r);
        r->progress_at = now;
    }
    if (!r->stream) {
        if (pi_now_ms() < r->retry_at)
            return 0;
        if (stream_open(r) < 0) {
            r->retry_at = pi_now_ms() + RETRY_MS;
            r->st.reconnects++;
            return 0;
        }
    }
    int work = 0, rc = 0;
    while (work < 256) {
        struct cx_seg_info info;
        long n = cx_space_read_next(r->stream, r->stream_handle, r->scratch, r->scratch_cap, &info, 0);
        if (n == -EMSGSIZE) {
            uint8_t *p = realloc(r->scratch, info.length);
            if (!p)
                break;
            r->scratch = p;
            r->scratch_cap = info.length;
            continue;
        }
        if (n == -ETIMEDOUT)
            break;
        if (n == -EPIPE) { /* the space sent everything up to the writer's close */
            cx_pipe_buf_end(r->buf, info.seg_id - 1);
            r->stream_done = 1;
            stream_drop(r);
            work++;
            break;
        }
        if (n < 0) { /* connection lost (space restarting?): resume from where we are */
            rc = (int)n;
            if (rc == -ENODATA) {
                r->err = rc;
                snprintf(r->errmsg, sizeof r->errmsg, "%s", cx_errmsg());
            }
            stream_drop(r);
            r->retry_at = pi_now_ms() + RETRY_MS;
            r->st.reconnects++;
            break;
        }
        if ((rc = cx_pipe_buf_offer(r->buf, info.seg_id, info.format, r->scratch, (uint32_t)n)) < 0) {
            r->err = rc;
            snprintf(r->errmsg, sizeof r->errmsg, "%s", cx_errmsg());
            break;
        }
        r->st.from_space += rc == 1;
        r->space_dups = rc == 1 ? 0 : r->space_dups + 1;
        work++;
        if (r->space_dups >= PAUSE_DUPS) {
            stream_pause(r);
            break;
        }
    }
    if (work || r->err)
        pthread_cond_broadcast(&r->cv);
    return work;
}

void pi_reader_offer_direct(uint64_t pipe_id, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    for (int i = 0; i < g_pi.desc_hi; i++) {
        if (g_pi.desc[i].kind != PI_READER || g_pi.desc[i].r->pipe_id != pipe_id)
            continue;
        struct pi_reader *r = g_pi.desc[i].r;
        if (h->flags & CX_FRAME_F_END) {
            cx_pipe_buf_end(r->buf, h->seq);
        } else {
            int rc = cx_pipe_buf_offer(r->buf, h->seq, h->format, p, (uint32_t)len);
            if (rc < 0 && !r->err) {
                r->err = rc;
                snprintf(r->errmsg, sizeof r->errmsg, "%s", cx_errmsg());
            }
            r->st.from_writer += rc == 1;
        }
        snprintf(r->link, sizeof r->link, "%s", g_pi.lops->scheme); /* our listener's */
        r->wake = 1; /* signalled by pi_reader_service, after this batch */
    }
}

int pi_reader_fds(struct pollfd *pf, int cap)
{
    int n = 0;
    for (int i = 0; i < g_pi.desc_hi && n < cap; i++)
        if (g_pi.desc[i].kind == PI_READER && g_pi.desc[i].r->stream && !g_pi.desc[i].r->paused)
            pf[n++] = (struct pollfd){.fd = cx_space_client_fd(g_pi.desc[i].r->stream), .events = POLLIN};
    return n;
}

double pi_reader_due_ms(const struct pi_reader *r)
{
    if (r->err || r->stream_done)
        return 0;
    if (r->paused)
        return r->progress_at + STALL_MS;
    if (!r->stream)
        return r->retry_at > 0 ? r->retry_at : pi_now_ms();
    return 0;
}

/* ---- the application's calls ------------------------------------------------------- */

long cx_embedded_pi_read_timeout(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms)
{
    long grc;
    if (pi_group_read(d, b, len, t, timeout_ms, &grc))
        return grc;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&g_pi.mu);
    pi_rt_flush_writers();
    for (;;) {
        struct pi_reader *r = pi_reader_get(d);
        if (!r) {
            pthread_mutex_unlock(&g_pi.mu);
            return pi_fail(-EBADF);
        }
        struct cx_pipe_seg seg;
        int rc = cx_pipe_buf_peek(r->buf, &seg);
        if (rc < 0) { /* -EPIPE: the end (the paper's -1) */
            pthread_mutex_unlock(&g_pi.mu);
            return pi_fail(rc);
        }
        if (rc == 1 && !t) {
            if (seg.len > len) { /* the segment stays for a call with a bigger buffer */
                pthread_mutex_unlock(&g_pi.mu);
                return pi_fail(cx_err_set(EMSGSIZE, "segment %llu has %u bytes, the buffer %zu",
                                          (unsigned long long)seg.id - 1, seg.len, len));
            }
            rc = cx_pipe_buf_take(r->buf, b, len);
            pthread_mutex_unlock(&g_pi.mu);
            return rc < 0 ? pi_fail(rc) : (long)seg.len;
        }
        if (rc == 1) {
            /* typed: check it fits before taking it (the format may be fetched from the
             * space: not under the lock), so a failed read consumes nothing */
            pthread_mutex_unlock(&g_pi.mu);
            long count = pi_seg_count(seg.format, seg.len, t);
            if (count < 0)
                return pi_fail(cx_err_wrap((int)count, "segment %llu", (unsigned long long)seg.id - 1));
            if ((size_t)count > len)
                return pi_fail(cx_err_set(EMSGSIZE, "segment %llu holds %ld events, the buffer %zu",
                                          (unsigned long long)seg.id - 1, count, len));
            pthread_mutex_lock(&g_pi.mu);
            struct cx_pipe_seg again;
            if (!(r = pi_reader_get(d)) || cx_pipe_buf_peek(r->buf, &again) != 1 || again.id != seg.id)
                continue; /* changed under us (a seek): look again */
            uint8_t *tmp = malloc(seg.len ? seg.len : 1);
            rc = tmp ? cx_pipe_buf_take(r->buf, tmp, seg.len) : cx_err_set(ENOMEM, "segment");
            pthread_mutex_unlock(&g_pi.mu);
            long n = rc < 0 ? rc : pi_seg_decode(seg.format, tmp, seg.len, b, len, t);
            free(tmp);
            return n < 0 ? pi_fail((int)n) : n;
        }
        if (r->err) {
            int err = r->err;
            cx_err_set(-err, "%s", r->errmsg);
            pthread_mutex_unlock(&g_pi.mu);
            return pi_fail(err);
        }
        if (timeout_ms >= 0 && pthread_cond_timedwait(&r->cv, &g_pi.mu, &dl) == ETIMEDOUT) {
            pthread_mutex_unlock(&g_pi.mu);
            return pi_fail(cx_err_set(ETIMEDOUT, "no segment in %d ms", timeout_ms));
        }
        if (timeout_ms < 0)
            pthread_cond_wait(&r->cv, &g_pi.mu);
    }
}

long cx_embedded_pi_read(int d, void *b, size_t len, const struct cx_format *t)
{
    return cx_embedded_pi_read_timeout(d, b, len, t, -1);
}

int cx_embedded_pi_seek(int d, uint64_t seg)
{
    int grc;
    if (pi_group_seek(d, &grc))
        return grc;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    if (r) { /* restart both streams at seg: the space's from there, the writer's dedupes */
        cx_pipe_buf_reset(r->buf, seg + 1);
        stream_drop(r);
        r->paused = 0;
        r->space_dups = 0;
        r->stream_done = 0;
        r->err = 0;
        r->retry_at = 0;
    }
    pthread_mutex_unlock(&g_pi.mu);
    if (r)
        pi_rt_wake();
    return r ? 0 : pi_fail(-EBADF);
}

int64_t cx_embedded_pi_tell(int d)
{
    int64_t grc;
    if (pi_group_tell(d, &grc))
        return grc;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    int64_t pos = r ? (int64_t)cx_pipe_buf_tell(r->buf) - 1 : -1;
    pthread_mutex_unlock(&g_pi.mu);
    return r ? pos : pi_fail(-EBADF);
}

int cx_embedded_pi_detach(int d)
{
    int grc;
    if (pi_group_detach(d, &grc))
        return grc;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    if (r)
        g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    if (!r)
        return pi_fail(-EBADF);
    pi_reader_free(r);
    return 0;
}

int cx_embedded_pi_reader_stats(int d, struct pi_reader_stats *out)
{
    int grc;
    if (pi_group_stats(d, out, &grc))
        return grc;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    if (r) {
        struct cx_pipe_buf_stats bs;
        cx_pipe_buf_stats(r->buf, &bs);
        *out = r->st;
        out->duplicates = bs.duplicates;
        out->spilled = bs.spilled;
    }
    pthread_mutex_unlock(&g_pi.mu);
    return r ? 0 : pi_fail(-EBADF);
}
