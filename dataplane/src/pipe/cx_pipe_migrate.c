/* Migration of an open pipe end (seed pi-channels.txt, Figure 7 "The communication
 * migration protocol", and Figure 8): pi_migrate_out saves the end's state into a blob and
 * hands its place to the space (MIGRATE: the space holds it, the writer puts a migrating
 * reader on its hold list); pi_migrate_in opens it again elsewhere (RESUME: the writer
 * connects to the reader's new address and sends what it held back). Also the writer's
 * side of the hold list (pi_writer_events), pi_writer_stats and pi_link.
 *
 * Blob (little-endian), PI_MIGRATE_MAX bytes at most:
 *   0 u32 magic "CXMG"   4 u8 version (1)   5 u8 kind (1 reader, 2 writer)
 *   6 u8 flags (1: the pipe was ended, a writer replaying it)   7 u8 name length n
 *   8 u64 pipe id   16 u64 position (reader: next id to deliver; writer: last id written)
 *  24 u64 what the space held when the writer opened   32 u64 hold token (0: none)
 *  40 name (n bytes)   40+n u32 CRC-32C of bytes 0..40+n
 */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "common/cx_le.h"
#include "common/cx_crc32c.h"
#include "transport/cx_driver.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOB_MAGIC 0x474d5843u /* "CXMG" */
#define BLOB_VERSION 1
#define BLOB_HEAD 40
#define HOLD_DEFAULT_MS 10000
#define DRAIN_MS 1000 /* how long a migrating reader waits for its writer's link to close */

/* ---- the blob ---------------------------------------------------------------------- */

size_t pi_blob_size(const char *name) { return BLOB_HEAD + strlen(name) + 4; }

size_t pi_blob_encode(const struct pi_blob *b, uint8_t *out)
{
    size_t n = strlen(b->name);
    uint32_t magic = BLOB_MAGIC;
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(magic >> (8 * i));
    out[4] = BLOB_VERSION;
    out[5] = b->kind;
    out[6] = b->flags;
    out[7] = (uint8_t)n;
    cx_put_le64(out + 8, b->pipe_id);
    cx_put_le64(out + 16, b->pos);
    cx_put_le64(out + 24, b->space_had);
    cx_put_le64(out + 32, b->token);
    memcpy(out + BLOB_HEAD, b->name, n);
    uint32_t crc = cx_crc32c(0, out, BLOB_HEAD + n);
    for (int i = 0; i < 4; i++)
        out[BLOB_HEAD + n + (size_t)i] = (uint8_t)(crc >> (8 * i));
    return BLOB_HEAD + n + 4;
}

int pi_blob_decode(const void *in, size_t len, struct pi_blob *b)
{
    const uint8_t *p = in;
    if (!in || len < BLOB_HEAD + 4)
        return cx_err_set(EINVAL, "migration blob of %zu bytes is truncated (at least %d)", in ? len : 0,
                          BLOB_HEAD + 4);
    uint32_t magic = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (magic != BLOB_MAGIC)
        return cx_err_set(EINVAL, "not a pipe migration blob (magic 0x%08x)", magic);
    size_t n = p[7];
    if (n >= sizeof b->name)
        return cx_err_set(EINVAL, "migration blob names a pipe of %zu bytes (at most %zu)", n,
                          sizeof b->name - 1);
    if (len != BLOB_HEAD + n + 4)
        return cx_err_set(EINVAL, "migration blob of %zu bytes, its name says %zu%s", len, BLOB_HEAD + n + 4,
                          len < BLOB_HEAD + n + 4 ? " (truncated)" : "");
    uint32_t want = cx_crc32c(0, p, BLOB_HEAD + n), got = 0;
    for (int i = 0; i < 4; i++)
        got |= (uint32_t)p[BLOB_HEAD + n + (size_t)i] << (8 * i);
    if (want != got)
        return cx_err_set(EBADMSG, "migration blob is corrupt (checksum 0x%08x, its bytes give 0x%08x)",
                          got, want);
    if (p[4] != BLOB_VERSION)
        return cx_err_set(EINVAL, "migration blob version %u (this library reads %d)", p[4], BLOB_VERSION);
    b->kind = p[5];
    b->flags = p[6];
    if (b->kind != CX_SP_MIG_READER && b->kind != CX_SP_MIG_WRITER)
        return cx_err_set(EINVAL, "migration blob of kind %u (1 reader, 2 writer)", b->kind);
    if (memchr(p + BLOB_HEAD, 0, n))
        return cx_err_set(EINVAL, "migration blob: the pipe's name holds a NUL byte");
    memcpy(b->name, p + BLOB_HEAD, n);
    b->name[n] = 0;
    b->pipe_id = cx_get_le64(p + 8);
    b->pos = cx_get_le64(p + 16);
    b->space_had = cx_get_le64(p + 24);
    b->token = cx_get_le64(p + 32);
    int rc = pi_name_check(b->name, "pi_migrate_in");
    if (rc == 0 && b->kind == CX_SP_MIG_READER && b->pos == 0)
        rc = cx_err_set(EINVAL, "migration blob: a reader at position 0 (positions start at 1)");
    return rc;
}

/* ---- the writer's hold list (Figure 7, #87-#89; check_restore #39-#44) -------------- */

static struct pi_hold *hold_find(struct pi_writer *w, const char *addr)
{
    for (int i = 0; i < w->nhold; i++)
        if (strcmp(w->hold[i].addr, addr) == 0)
            return &w->hold[i];
    return NULL;
}

static void hold_remove(struct pi_writer *w, struct pi_hold *h)
{
    *h = w->hold[--w->nhold];
}

static void no_recv(void *a, const struct cx_frame_hdr *h, const void *p, size_t l)
{
    (void)a, (void)h, (void)p, (void)l;
}

/* The reader at addr is migrating: drain its link (what is queued leaves, then a graceful
 * close) and hold the address. */
static void hold_add(struct pi_writer *w, const char *addr, uint32_t hold_ms)
{
    for (int i = 0; i < w->ndirect; i++) {
        struct pi_direct *dl = &w->direct[i];
        if (strcmp(dl->addr, addr) != 0)
            continue;
        if (dl->link) { /* (the close sends what a corked socket holds) */
            cx_link_flush(dl->link, no_recv, NULL, 200);
            pi_writer_direct_drop(w, dl);
        }
        pthread_mutex_lock(&w->cork_mu); /* the in-bound thread walks direct[] when flushing */
        w->direct[i] = w->direct[--w->ndirect];
        pthread_mutex_unlock(&w->cork_mu);
        break;
    }
    struct pi_hold *h = hold_find(w, addr);
    if (!h) {
        if (w->nhold == PI_MAX_DIRECT) /* full: the oldest hold ends early (it reads from the space) */
            hold_remove(w, &w->hold[0]);
        h = &w->hold[w->nhold++];
        snprintf(h->addr, sizeof h->addr, "%s", addr);
        w->st.holds++;
    }
    h->until = pi_now_ms() + (hold_ms ? hold_ms : HOLD_DEFAULT_MS);
    /* the segment being written now (w->last) has not gone to it: it and later ones are held */
    h->from = w->last ? w->last - 1 : 0;
}

/* The held reader is back at new_addr: connect there and send what was held back that the
 * writer still retains (the rest comes from the space's stream). */
static void hold_resume(struct pi_writer *w, const char *old_addr, const char *new_addr)
{
    struct pi_hold *h = hold_find(w, old_addr);
    uint64_t from = h ? h->from : w->last;
    if (h) {
        hold_remove(w, h);
        w->st.resumed++;
    }
    pi_writer_direct_add(w, new_addr);
    struct pi_direct *dl = NULL;
    for (int i = 0; i < w->ndirect; i++)
        if (strcmp(w->direct[i].addr, new_addr) == 0 && w->direct[i].link)
            dl = &w->direct[i];
    for (uint64_t id = from + 1; dl && h && id < w->last; id++) { /* w->last: sent by the caller */
        struct pi_retained *r = &w->ret[id % w->window];
        if (r->id != id)
            continue; /* no longer retained: the space's stream brings it */
        struct cx_frame_hdr f = {.type = CX_FRAME_DATA, .seq = id, .format = r->format};
        struct iovec iov = {r->data, r->len};
        if (cx_link_send(dl->link, &f, &iov, r->len ? 1 : 0) < 0) {
            pi_writer_direct_drop(w, dl);
            break;
        }
        w->st.resent++;
    }
}

void pi_writer_events(struct pi_writer *w)
{
    struct cx_space_event ev;
    while (w->c && cx_space_next_event(w->c, w->handle, &ev) == 1) { /* NULL: recovery failed */
        if (ev.op == CX_SP_READER_JOINED && !hold_find(w, ev.addr))
            pi_writer_direct_add(w, ev.addr); /* a held address is not connected to (#88) */
        else if (ev.op == CX_SP_READER_HELD)
            hold_add(w, ev.addr, ev.hold_ms);
        else if (ev.op == CX_SP_READER_MOVED)
            hold_resume(w, ev.addr, ev.addr2);
    }
    double now = pi_now_ms();
    for (int i = 0; i < w->nhold;) /* the new side never came: it reads from the space */
        if (w->hold[i].until <= now) {
            hold_remove(w, &w->hold[i]);
            w->st.expired++;
        } else {
            i++;
        }
}

int cx_embedded_pi_writer_stats(int d, struct pi_writer_stats *out)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_writer *w = d >= 0 && d < PI_MAX_DESC && g_pi.desc[d].kind == PI_WRITER ? g_pi.desc[d].w : NULL;
    if (w) {
        *out = w->st;
        out->held = (uint64_t)w->nhold;
        out->direct = 0;
        for (int i = 0; i < w->ndirect; i++)
            out->direct += w->direct[i].link != NULL;
    }
    pthread_mutex_unlock(&g_pi.mu);
    return w ? 0 : pi_fail(cx_err_set(EBADF, "%d is not a pipe open for writing", d));
}

int cx_embedded_pi_link(int d, char *out, size_t cap)
{
    char link[PI_LINK_MAX] = "";
    pthread_mutex_lock(&g_pi.mu);
    int kind = d >= 0 && d < PI_MAX_DESC ? g_pi.desc[d].kind : PI_FREE;
    if (kind == PI_READER) {
        snprintf(link, sizeof link, "%s", g_pi.desc[d].r->link);
    } else if (kind == PI_WRITER) {
        struct pi_writer *w = g_pi.desc[d].w;
        pthread_mutex_lock(&w->cork_mu); /* direct_add sets it under cork_mu only */
        snprintf(link, sizeof link, "%s", w->link);
        pthread_mutex_unlock(&w->cork_mu);
    }
    pthread_mutex_unlock(&g_pi.mu);
    if (kind == PI_FREE)
        return pi_fail(cx_err_set(EBADF, "pi_link: %d is not an open pipe", d));
    if (!out || cap <= strlen(link))
        return pi_fail(cx_err_set(ERANGE, "pi_link: '%s' needs %zu bytes, cap is %zu", link,
                                  strlen(link) + 1, out ? cap : 0));
    memcpy(out, link, strlen(link) + 1);
    return 0;
}

/* ---- out ----------------------------------------------------------------------------- */

static long reader_out(int d, struct pi_reader *r, uint32_t hold_ms, uint8_t *out)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_blob b = {.kind = CX_SP_MIG_READER, .pipe_id = r->pipe_id, .pos = cx_pipe_buf_tell(r->buf)};
    snprintf(b.name, sizeof b.name, "%s", r->name);
    int s = r->space, others = 0;
    char my_addr[160];
    snprintf(my_addr, sizeof my_addr, "%s", g_pi.spaces[s].my_addr);
    for (int i = 0; i < g_pi.desc_hi; i++)
        others += i != d && g_pi.desc[i].kind == PI_READER && g_pi.desc[i].r->pipe_id == r->pipe_id &&
                  g_pi.desc[i].r->space == s;
    pthread_mutex_unlock(&g_pi.mu);
    /* the writer streams to this process's address, not to one reader: with another reader of
     * the pipe here, the address stays (no hold); the new side registers its own anyway */
    int rc = 0;
    struct cx_space_pipe_info info = {0};
    if (!others) {
        struct cx_space_client *ctl = pi_space_ctl(s, NULL);
        rc = -cx_errcode();
        for (int again = 0; ctl && again < 2; again++) {
            rc = cx_space_migrate(ctl, CX_SP_MIG_READER, 0, b.name, my_addr, hold_ms, &b.token, &info);
            if (rc != -ECONNRESET || !(ctl = pi_space_ctl(s, ctl)))
                break;
        }
    }
    if (rc < 0)
        return rc;
    /* drain (#84): the writer flushes and closes its link to us once it sees the hold */
    double end = pi_now_ms() + (hold_ms < DRAIN_MS ? hold_ms : DRAIN_MS);
    pthread_mutex_lock(&g_pi.mu);
    while (!others && info.writer_open && pi_rt_inbound_links(b.pipe_id) && pi_now_ms() < end) {
        pthread_mutex_unlock(&g_pi.mu);
        usleep(2000);
        pthread_mutex_lock(&g_pi.mu);
    }
    g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    pi_reader_free(r);
    return (long)pi_blob_encode(&b, out);
}

/* Corking on or off for every socket of the writer: off while it migrates, so the space's
 * acks and the MIGRATE request do not wait in a corked socket. */
static void cork_all(struct pi_writer *w, int on)
{
    pthread_mutex_lock(&w->cork_mu);
    w->corked = on;
    w->dirty = 0;
    int fd = cx_space_client_fd(w->c);
    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    for (int i = 0; i < w->ndirect; i++)
        if (w->direct[i].link && (fd = cx_link_fd(w->direct[i].link)) >= 0)
            setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    pthread_mutex_unlock(&w->cork_mu);
}

static long writer_out(int d, struct pi_writer *w, uint32_t hold_ms, uint8_t *out)
{
    pthread_mutex_lock(&g_pi.mu);
    int timeout = g_pi.spaces[w->space].opts.timeout_ms;
    pthread_mutex_unlock(&g_pi.mu);
    struct pi_blob b = {.kind = CX_SP_MIG_WRITER, .pipe_id = w->pipe_id, .pos = w->last,
                     .space_had = w->space_had, .flags = w->space_ended ? 1 : 0};
    snprintf(b.name, sizeof b.name, "%s", w->name);
    /* nothing unacknowledged may be left behind: the new side cannot resend it */
    cork_all(w, 0);
    int rc = w->last > w->space_had ? cx_space_wait_acked(w->c, w->handle, w->last, timeout) : 0;
    struct cx_space_pipe_info info;
    if (rc == 0)
        rc = cx_space_migrate(w->c, CX_SP_MIG_WRITER, w->handle, w->name, "", hold_ms, &b.token, &info);
    if (rc < 0) { /* the writer goes on here: its next pi_write recovers a lost space */
        cork_all(w, 1);
        return rc;
    }
    for (int i = 0; i < w->ndirect; i++)
        if (w->direct[i].link) {
            cx_link_flush(w->direct[i].link, no_recv, NULL, 2000); /* flush and close (#84) */
            pi_writer_direct_drop(w, &w->direct[i]);
        }
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    pi_writer_free(w);
    return (long)pi_blob_encode(&b, out);
}

long cx_embedded_pi_migrate_out(int d, int hold_ms, void *blob, size_t cap)
{
    if (hold_ms < 0)
        return pi_fail(cx_err_set(EINVAL, "pi_migrate_out: hold_ms %d", hold_ms));
    pthread_mutex_lock(&g_pi.mu);
    int kind = d >= 0 && d < PI_MAX_DESC ? g_pi.desc[d].kind : PI_FREE;
    struct pi_reader *r = kind == PI_READER ? g_pi.desc[d].r : NULL;
    struct pi_writer *w = kind == PI_WRITER ? g_pi.desc[d].w : NULL;
    const char *name = r ? r->name : w ? w->name : "";
    int rc = 0;
    if (!r && !w)
        rc = cx_err_set(EBADF, "%d is not an open pipe", d);
    else if (!blob || cap < pi_blob_size(name))
        rc = cx_err_set(EMSGSIZE, "pi_migrate_out: the blob needs %zu bytes, the buffer has %zu",
                        pi_blob_size(name), blob ? cap : 0);
    if (rc == 0)
        g_pi.desc[d].kind = -1; /* reserved: no other call, no in-bound service meanwhile */
    pthread_mutex_unlock(&g_pi.mu);
    if (rc < 0)
        return pi_fail(rc);
    uint32_t hold = hold_ms ? (uint32_t)hold_ms : HOLD_DEFAULT_MS;
    long n = r ? reader_out(d, r, hold, blob) : writer_out(d, w, hold, blob);
    if (n < 0) {
        pthread_mutex_lock(&g_pi.mu);
        g_pi.desc[d].kind = kind; /* intact */
        pthread_mutex_unlock(&g_pi.mu);
        return pi_fail(cx_err_wrap((int)n, "pi_migrate_out '%s'", r ? r->name : w->name));
    }
    return n;
}

/* ---- in ------------------------------------------------------------------------------ */

static int writer_in(const struct pi_blob *b, int s)
{
    char addr[160];
    struct pi_writer *w;
    int d = pi_writer_begin(b->name, s, addr, sizeof addr, &w);
    if (d < 0)
        return d;
    struct cx_space_pipe_info info;
    int rc;
    if ((rc = cx_space_connect(addr, &w->c)) < 0 ||
        (rc = cx_space_resume(w->c, CX_SP_MIG_WRITER, b->name, "", b->pipe_id, b->token, &w->handle, &info)) < 0)
        goto error;
    /* it goes on after its last segment: the space must hold exactly what it held then */
    uint64_t had = b->pos > b->space_had ? b->pos : b->space_had;
    if (info.last_id != had) {
        rc = cx_err_set(ESTALE, "pipe '%s' holds %llu segments, the migrated writer had %llu: "
                        "written by another writer since", b->name, (unsigned long long)info.last_id,
                        (unsigned long long)had);
        cx_space_stop(w->c, w->handle);
        goto error;
    }
    int on = 1;
    setsockopt(cx_space_client_fd(w->c), IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    w->pipe_id = info.pipe_id;
    w->last = b->pos;
    w->space_had = had; /* replays up to it are dropped, as for PI_APPEND */
    w->space_ended = info.ended;
    for (int i = 0; i < info.naddrs; i++) /* its readers (#12-#13) */
        pi_writer_direct_add(w, info.addrs[i]);
    pthread_mutex_lock(&g_pi.mu);
    g_pi.desc[d] = (struct pi_desc){.kind = PI_WRITER, .w = w};
    pthread_mutex_unlock(&g_pi.mu);
    return d;
error:
    pi_writer_abort(d, w);
    return rc;
}

int cx_embedded_pi_migrate_in(const void *blob, size_t len, int s)
{
    struct pi_blob b;
    int rc = pi_blob_decode(blob, len, &b);
    if (rc < 0)
        return pi_fail(cx_err_wrap(rc, "pi_migrate_in"));
    if (b.kind == CX_SP_MIG_READER) {
        struct pi_resume rs = {.pipe_id = b.pipe_id, .token = b.token, .next = b.pos};
        return pi_reader_open(b.name, s, &rs);
    }
    int d = writer_in(&b, s);
    return d < 0 ? pi_fail(cx_err_wrap(d, "pi_migrate_in '%s'", b.name)) : d;
}
