/* The calls an application makes through its sidecar (cx_sc_proto.h): each runs here with
 * libconflux's own pipe and channel calls, on the sidecar's links. Handles are entries of
 * one table; an entry belongs to the session that opened it, and only that session may use
 * or close it. */
#include "sidecar/cx_sidecar_int.h"
#include "common/cx_error.h"
#include "format/cx_codec.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_log.h"
#include "space/cx_space_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* ---- the handle table ---- */

static int64_t h_add(struct cx_sidecar *sc, const struct sc_handle *t)
{
    pthread_mutex_lock(&sc->mu);
    size_t i = 0;
    while (i < sc->nh && sc->h[i].kind != H_FREE)
        i++;
    if (i == sc->nh) {
        size_t n = sc->nh ? sc->nh * 2 : 64;
        struct sc_handle *h = realloc(sc->h, n * sizeof *h);
        if (!h) {
            pthread_mutex_unlock(&sc->mu);
            return cx_err_set(ENOMEM, "handle table");
        }
        memset(h + sc->nh, 0, (n - sc->nh) * sizeof *h);
        sc->h = h;
        sc->nh = n;
    }
    sc->h[i] = *t;
    pthread_mutex_unlock(&sc->mu);
    return (int64_t)i + 1;
}

/* Copies the entry `id` of kind `kind` (any of two kinds when kind2 != H_FREE) owned by
 * the connection's session into *out. 0 or -EBADF. */
static int h_get2(struct sc_conn *c, int64_t id, enum sc_kind kind, enum sc_kind kind2,
                  struct sc_handle *out)
{
    struct cx_sidecar *sc = c->sc;
    int rc = 0;
    pthread_mutex_lock(&sc->mu);
    if (id < 1 || (size_t)id > sc->nh || sc->h[id - 1].session != c->sess->id ||
        (sc->h[id - 1].kind != kind && (kind2 == H_FREE || sc->h[id - 1].kind != kind2)))
        rc = cx_err_set(EBADF, "no such handle (%lld) in this application", (long long)id);
    else
        *out = sc->h[id - 1];
    pthread_mutex_unlock(&sc->mu);
    return rc;
}

static int h_get(struct sc_conn *c, int64_t id, enum sc_kind kind, struct sc_handle *out)
{
    return h_get2(c, id, kind, H_FREE, out);
}

static int h_del(struct sc_conn *c, int64_t id, enum sc_kind kind, struct sc_handle *out)
{
    struct cx_sidecar *sc = c->sc;
    int rc = h_get(c, id, kind, out);
    if (rc == 0) {
        pthread_mutex_lock(&sc->mu);
        memset(&sc->h[id - 1], 0, sizeof sc->h[id - 1]);
        pthread_mutex_unlock(&sc->mu);
    }
    return rc;
}

static void h_count(struct cx_sidecar *sc, int64_t id, uint64_t segs, uint64_t bytes)
{
    pthread_mutex_lock(&sc->mu);
    if (id >= 1 && (size_t)id <= sc->nh) {
        sc->h[id - 1].segments += segs;
        sc->h[id - 1].bytes += bytes;
    }
    pthread_mutex_unlock(&sc->mu);
}

/* Lets go of what an application left: a writer is abandoned, not closed (pi_abandon: an
 * application that died or was stopped mid-stream is restarted and continues with
 * PI_APPEND; only its own pi_close ends a pipe). */
static void close_handle(struct sc_handle *h)
{
    switch (h->kind) {
    case H_SINK:
        cx_chan_sink_close(h->sink->k);
        free(h->sink);
        break;
    case H_SOURCE: cx_chan_source_close(h->src); break;
    case H_CHAN: cx_chan_close(h->ch); break;
    case H_READER: pi_detach(h->d); break;
    case H_WRITER: pi_abandon(h->d); break; /* not ended: a restarted writer APPENDs */
    case H_SPACE: pi_space_close(h->d); break;
    default: break;
    }
}

/* Closes the sinks and sources an application added to its channel handle `chan`. */
static void close_children(struct cx_sidecar *sc, uint64_t session, int64_t chan)
{
    for (;;) {
        struct sc_handle h = {0};
        pthread_mutex_lock(&sc->mu);
        for (size_t i = 0; i < sc->nh; i++)
            if ((sc->h[i].kind == H_SINK || sc->h[i].kind == H_SOURCE) && sc->h[i].session == session &&
                sc->h[i].parent == chan) {
                h = sc->h[i];
                memset(&sc->h[i], 0, sizeof sc->h[i]);
                break;
            }
        pthread_mutex_unlock(&sc->mu);
        if (h.kind == H_FREE)
            return;
        close_handle(&h);
    }
}

/* Takes one handle of kind owned by session `id` out of the table into *h: 1, or 0 when
 * the session has none left. */
static int take_session_handle(struct cx_sidecar *sc, uint64_t id, enum sc_kind kind, struct sc_handle *h)
{
    int found = 0;
    pthread_mutex_lock(&sc->mu);
    for (size_t i = 0; i < sc->nh && !found; i++)
        if (sc->h[i].kind == kind && sc->h[i].session == id) {
            *h = sc->h[i];
            memset(&sc->h[i], 0, sizeof sc->h[i]);
            found = 1;
        }
    pthread_mutex_unlock(&sc->mu);
    return found;
}

void cx__sc_session_close_all(struct cx_sidecar *sc, uint64_t id)
{
    /* in dependency order: sinks and sources before their channels, pipes before spaces */
    static const enum sc_kind order[] = {H_SINK, H_SOURCE, H_CHAN, H_READER, H_WRITER, H_SPACE};
    struct sc_handle h;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        while (take_session_handle(sc, id, order[k], &h)) {
            if (h.kind == H_WRITER)
                cx_sc_log("warn", "application left a pipe open for writing: abandoning it (not "
                          "ended; a writer opened with PI_APPEND continues it)", "\"pipe\":%s",
                          cx_sc_json_str((char[300]){0}, 300, h.name));
            close_handle(&h);
        }
    }
}

/* pi_shutdown for one application: its readers detached, its writers closed as pi_close
 * does (waiting for the space's acknowledgements), then its spaces; the sidecar's runtime
 * goes on for the pod's other applications. 0, or the first error (the rest still closed). */
static int session_pipes_shutdown(struct cx_sidecar *sc, uint64_t id)
{
    static const enum sc_kind order[] = {H_READER, H_WRITER, H_SPACE};
    int first = 0;
    struct sc_handle h;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        while (take_session_handle(sc, id, order[k], &h)) {
            errno = 0;
            int rc = h.kind == H_READER ? pi_detach(h.d) : h.kind == H_WRITER ? pi_close(h.d) : pi_space_close(h.d);
            if (rc < 0 && !first)
                first = -(errno ? errno : EIO);
        }
    return first;
}

/* ---- helpers ---- */

static int pi_rc(long rc) { return rc < 0 ? -(errno ? errno : EIO) : 0; }

static void set_str(struct cx_sc_rep *rep, const char *s)
{
    rep->slen = (uint32_t)snprintf(rep->s, sizeof rep->s, "%s", s ? s : "");
    if (rep->slen >= sizeof rep->s)
        rep->slen = sizeof rep->s - 1;
}

/* A format the application gave (FORMAT_PUT) or the sidecar knows. */
static int format_of(uint64_t token, const struct cx_format **f)
{
    *f = NULL;
    if (!token)
        return 0;
    if (!(*f = cx_format_registry_lookup(token)))
        return cx_err_set(ENOENT, "format %016llx was not given to the sidecar",
                          (unsigned long long)token);
    return 0;
}

/* Copies len bytes into a ring 1 record for the reply. */
static int bulk_out(struct sc_conn *c, struct cx_sc_rep *rep, const void *p, size_t len)
{
    int err;
    void *dst = cx_sc_ring_claim(&c->out, CX_SC_REC_DATA, len, &err);
    if (!dst)
        return cx_err_set(-err, "reply of %zu bytes does not fit the shared ring", len);
    memcpy(dst, p, len);
    cx_sc_ring_commit(&c->out);
    rep->bulk = 1;
    return 0;
}

/* Publishes f to the format service of the space at addr once per (space, format), so a
 * reader anywhere can convert what this pod writes (pi_write itself does not). */
static int publish_format(const char *addr, const struct cx_format *f)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct { uint64_t token; char addr[128]; } done[256];
    static size_t ndone;
    uint64_t t = cx_format_token(f);
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < ndone; i++)
        if (done[i].token == t && strcmp(done[i].addr, addr) == 0) {
            pthread_mutex_unlock(&mu);
            return 0;
        }
    pthread_mutex_unlock(&mu);
    struct cx_space_client *cl;
    int rc = cx_space_connect(addr, &cl);
    if (rc == 0) {
        rc = cx_space_format_put(cl, f, NULL);
        cx_space_disconnect(cl);
    }
    if (rc < 0)
        return cx_err_wrap(rc, "publishing format '%s' to %s", cx_format_name(f), addr);
    pthread_mutex_lock(&mu);
    if (ndone < sizeof done / sizeof done[0]) {
        done[ndone].token = t;
        snprintf(done[ndone].addr, sizeof done[ndone].addr, "%s", addr);
        ndone++;
    }
    pthread_mutex_unlock(&mu);
    return 0;
}

/* ---- the sink handler: events to the application's events ring ---- */

static void on_sink_event(void *arg, const struct cx_chan_event *ev)
{
    struct sc_sink *k = arg;
    struct sc_session *s = k->sess;
    struct cx_sidecar *sc = NULL;
    struct cx_enc enc;
    const void *wire = ev->wire;
    size_t wlen = ev->wire_len;
    uint64_t token = ev->token;
    if (!wire) { /* a local event delivered in place, in the sink's format: encode it */
        const struct cx_format *f = k->fmt ? k->fmt : ev->format;
        if (!ev->data || !f || cx_encode(f, ev->data, &enc) < 0)
            return;
        wlen = enc.length;
        token = cx_format_token(f);
    }
    size_t flen = ev->from ? strlen(ev->from) : 0;
    size_t total = sizeof(struct cx_sc_event) + ((wlen + 7) & ~(size_t)7) + flen;
    pthread_mutex_lock(&s->ev_mu);
    struct sc_conn *c = s->ev;
    if (c)
        sc = c->sc;
    int err = 0;
    uint8_t *p = c ? cx_sc_ring_claim(&c->out, CX_SC_REC_EVENT, total, &err) : NULL;
    /* a full ring: the application is behind; wait for it (up to a second), which holds
     * back this runtime's progress as a slow embedded sink would */
    for (int i = 0; !p && c && err == -EAGAIN && i < 20000; i++) {
        pthread_mutex_unlock(&s->ev_mu);
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&s->ev_mu);
        if ((c = s->ev))
            p = cx_sc_ring_claim(&c->out, CX_SC_REC_EVENT, total, &err);
    }
    if (!p) {
        pthread_mutex_unlock(&s->ev_mu);
        if (sc)
            sc->event_drops++; /* the application is not reading: its ring stayed full */
        return;
    }
    struct cx_sc_event h = {.sink = k->handle, .seq = ev->seq, .token = token,
                            .wire_len = (uint32_t)wlen, .from_len = (uint32_t)flen};
    memcpy(p, &h, sizeof h);
    uint8_t *w = p + sizeof h;
    if (wire)
        memcpy(w, wire, wlen);
    else
        cx_enc_gather(&enc, w, wlen);
    memcpy(w + ((wlen + 7) & ~(size_t)7), ev->from ? ev->from : "", flen);
    int wake = cx_sc_ring_commit(&c->out);
    if (wake)
        send(c->fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    pthread_mutex_unlock(&s->ev_mu);
    sc->events_to_apps++;
    sc->event_bytes_to_apps += wlen;
}

/* The channel's counters, with its members counted as the applications see them: the
 * channel runtime counts each process once, and this sidecar is one process for all the
 * sources and sinks of its applications. */
static void chan_stats(struct cx_sidecar *sc, struct cx_chan *ch, struct cx_chan_stats *st)
{
    cx_chan_stats(ch, st);
    unsigned srcs = 0, snks = 0;
    pthread_mutex_lock(&sc->mu);
    for (size_t i = 0; i < sc->nh; i++) {
        int64_t p = sc->h[i].parent;
        if ((sc->h[i].kind == H_SOURCE || sc->h[i].kind == H_SINK) && p >= 1 && (size_t)p <= sc->nh &&
            sc->h[p - 1].kind == H_CHAN && sc->h[p - 1].ch == ch)
            *(sc->h[i].kind == H_SOURCE ? &srcs : &snks) += 1;
    }
    pthread_mutex_unlock(&sc->mu);
    if (srcs && st->sources >= 1)
        st->sources += srcs - 1;
    if (snks && st->sinks >= 1)
        st->sinks += snks - 1;
}

/* Decodes an encoded event (a private copy: decoding may rewrite its pointer fields) into
 * the source's format and submits it; timeout -2: no wait. */
static int submit_decoded(struct cx_sidecar *sc, const struct sc_handle *h, void *wire, size_t len,
                          int64_t timeout)
{
    size_t need = 0;
    void *ev;
    int rc = cx_decode_need(h->fmt, cx_format_token(h->fmt), wire, len, &need);
    if (rc < 0)
        return rc;
    uint64_t stack[64];
    void *out = need <= sizeof stack ? stack : malloc(need);
    if (!out)
        return cx_err_set(ENOMEM, "event of %zu bytes", need);
    rc = cx_decode(h->fmt, cx_format_token(h->fmt), wire, len, out, need ? need : sizeof stack, &ev);
    if (rc == 0)
        rc = timeout == -2 ? cx_chan_submit(h->src, ev) : cx_chan_submit_wait(h->src, ev, (int)timeout);
    if (out != stack)
        free(out);
    if (rc == 0)
        sc->submit_bytes += len;
    return rc;
}

/* One segment for writer `id`: len as pi_write's (records when typed), the format token
 * (0: raw), blen bytes at data. A call's PI_WRITE and a streamed one both come here. The
 * length written, or a negative errno. */
static long write_segment(struct sc_conn *c, int64_t id, int64_t len, uint64_t token, const void *data,
                          size_t blen)
{
    struct sc_handle h;
    const struct cx_format *f = NULL;
    int rc;
    if ((rc = h_get(c, id, H_WRITER, &h)) < 0 || (rc = format_of(token, &f)) < 0)
        return rc;
    if (len < 0 || (uint64_t)len > blen || blen != (f ? (size_t)len * cx_format_size(f) : (size_t)len))
        return cx_err_set(EPROTO, "segment of %zu bytes for a length of %lld", blen, (long long)len);
    if (f && (rc = publish_format(h.space, f)) < 0)
        return rc;
    errno = 0;
    long n = pi_write(h.d, data ? data : "", (size_t)len, f);
    if (n < 0)
        return pi_rc(n);
    h_count(c->sc, id, 1, blen);
    return n;
}

/* ---- the calls ---- */

static int do_call(struct sc_conn *c, const struct cx_sc_req *q, void *bulk, size_t blen,
                   struct cx_sc_rep *rep)
{
    struct cx_sidecar *sc = c->sc;
    struct sc_handle h = {.session = c->sess->id};
    const struct cx_format *f = NULL, *g = NULL;
    int rc;
    long n;
    switch (q->op) {
    case CX_SC_FORMAT_PUT: {
        struct cx_format *nf;
        const struct cx_format *canon;
        if (!bulk)
            return cx_err_set(EINVAL, "format description missing");
        if ((rc = cx_format_from_description(bulk, blen, &nf)) < 0)
            return rc;
        if ((rc = cx_format_registry_insert(nf, &canon)) < 0)
            return rc;
        rep->a[0] = (int64_t)cx_format_token(canon);
        return 0;
    }
    case CX_SC_FORMAT_GET: {
        size_t len;
        if ((rc = format_of((uint64_t)q->a[0], &f)) < 0 || !f)
            return rc < 0 ? rc : cx_err_set(EINVAL, "format token 0");
        const uint8_t *d = cx_format_describe(f, &len);
        return bulk_out(c, rep, d, len);
    }
    case CX_SC_SPACE_OPEN: {
        struct pi_options po = {.timeout_ms = (int)q->a[0], .window = (uint32_t)q->a[1]};
        errno = 0;
        if ((h.d = pi_space_open(q->s, &po)) < 0)
            return pi_rc(-1);
        h.kind = H_SPACE;
        snprintf(h.name, sizeof h.name, "%.127s", q->s);
        int64_t id = h_add(sc, &h);
        if (id < 0)
            pi_space_close(h.d);
        return (int)(rep->rc = id);
    }
    case CX_SC_SPACE_CLOSE:
        if ((rc = h_del(c, q->a[0], H_SPACE, &h)) < 0)
            return rc;
        return pi_rc(pi_space_close(h.d));
    case CX_SC_PI_CREATE:
    case CX_SC_PI_ATTACH:
    case CX_SC_PI_ATTACH_NAMED:
    case CX_SC_PI_ATTACH_GROUP: {
        struct sc_handle sp;
        if ((rc = h_get(c, q->a[0], H_SPACE, &sp)) < 0)
            return rc;
        char pname[CX_SC_STR_MAX];
        const char *name = q->s, *cursor = NULL;
        if (q->op == CX_SC_PI_ATTACH_NAMED || q->op == CX_SC_PI_ATTACH_GROUP) { /* s: the pipe's name, then the cursor's (group's) */
            if (q->a[1] < 0 || q->a[1] > (int64_t)q->slen)
                return cx_err_set(EINVAL, "pi_attach_named: name length %lld in a string of %u bytes",
                                  (long long)q->a[1], q->slen);
            memcpy(pname, q->s, (size_t)q->a[1]);
            pname[q->a[1]] = 0;
            name = pname;
            cursor = q->s + q->a[1];
        }
        errno = 0;
        h.d = q->op == CX_SC_PI_CREATE ? pi_create(name, sp.d, (int)q->a[1])
              : q->op == CX_SC_PI_ATTACH_GROUP ? pi_attach_group(name, sp.d, cursor)
              : cursor                 ? pi_attach_named(name, sp.d, cursor)
                                       : pi_attach(name, sp.d);
        if (h.d < 0)
            return pi_rc(-1);
        h.kind = q->op == CX_SC_PI_CREATE ? H_WRITER : H_READER;
        snprintf(h.name, sizeof h.name, "%.127s", name);
        memcpy(h.space, sp.name, sizeof h.space);
        int64_t id = h_add(sc, &h);
        if (id < 0)
            close_handle(&h);
        cx_sc_log("info", q->op == CX_SC_PI_CREATE ? "pipe opened for writing" : "pipe attached",
                  "\"pipe\":%s,\"app_pid\":%d", cx_sc_json_str((char[300]){0}, 300, name), c->sess->pid);
        return (int)(rep->rc = id);
    }
    case CX_SC_PI_WRITE:
        if ((n = write_segment(c, q->a[0], q->a[1], (uint64_t)q->a[2], bulk, blen)) < 0)
            return (int)n;
        return (int)(rep->rc = n);
    case CX_SC_PI_READ: {
        if ((rc = h_get(c, q->a[0], H_READER, &h)) < 0 || (rc = format_of((uint64_t)q->a[2], &f)) < 0)
            return rc;
        size_t esz = f ? cx_format_size(f) : 1, max = cx_sc_ring_max(&c->out) / esz;
        size_t cnt = (size_t)q->a[1] < max ? (size_t)q->a[1] : max;
        int err;
        void *dst = cx_sc_ring_claim(&c->out, CX_SC_REC_DATA, cnt * esz, &err);
        if (!dst)
            return cx_err_set(-err, "read buffer of %zu bytes", cnt * esz);
        errno = 0;
        n = pi_read_timeout(h.d, dst, cnt, f, (int)q->a[3]);
        if (n < 0) {
            cx_sc_ring_abort(&c->out);
            return pi_rc(n);
        }
        cx_sc_ring_trim(&c->out, (size_t)n * esz);
        cx_sc_ring_commit(&c->out);
        rep->bulk = 1;
        h_count(sc, q->a[0], 1, (uint64_t)n * esz);
        return (int)(rep->rc = n);
    }
    case CX_SC_PI_CLOSE:
    case CX_SC_PI_DETACH:
        if ((rc = h_del(c, q->a[0], q->op == CX_SC_PI_CLOSE ? H_WRITER : H_READER, &h)) < 0)
            return rc;
        errno = 0;
        return pi_rc(q->op == CX_SC_PI_CLOSE ? pi_close(h.d) : pi_detach(h.d));
    case CX_SC_PI_MIGRATE_OUT: {
        uint8_t blob[PI_MIGRATE_MAX];
        if ((rc = h_get2(c, q->a[0], H_READER, H_WRITER, &h)) < 0)
            return rc;
        size_t cap = q->a[2] > 0 && (uint64_t)q->a[2] < sizeof blob ? (size_t)q->a[2] : sizeof blob;
        errno = 0;
        long n = pi_migrate_out(h.d, (int)q->a[1], blob, cap); /* fails with the end intact */
        if (n < 0)
            return pi_rc(n);
        h_del(c, q->a[0], h.kind, &h); /* released: the blob is the end now */
        if ((rc = bulk_out(c, rep, blob, (size_t)n)) < 0)
            return rc;
        return (int)(rep->rc = n);
    }
    case CX_SC_PI_MIGRATE_IN: {
        struct sc_handle sp;
        if ((rc = h_get(c, q->a[0], H_SPACE, &sp)) < 0)
            return rc;
        errno = 0;
        h.d = pi_migrate_in(bulk, blen, sp.d); /* checks the blob: magic, kind, checksum */
        if (h.d < 0)
            return pi_rc(-1);
        const uint8_t *b = bulk; /* valid now: byte 5 the kind, 7 the name's length, 40 the name */
        h.kind = b[5] == 2 ? H_WRITER : H_READER;
        snprintf(h.name, sizeof h.name, "%.*s", (int)b[7], (const char *)b + 40);
        memcpy(h.space, sp.name, sizeof h.space);
        int64_t id = h_add(sc, &h);
        if (id < 0)
            close_handle(&h);
        return (int)(rep->rc = id);
    }
    case CX_SC_PI_SHUTDOWN:
        return session_pipes_shutdown(sc, c->sess->id);
    case CX_SC_PI_ABANDON:
        if ((rc = h_del(c, q->a[0], H_WRITER, &h)) < 0)
            return rc;
        errno = 0;
        return pi_rc(pi_abandon(h.d));
    case CX_SC_PI_ACK:
        if ((rc = h_get(c, q->a[0], H_READER, &h)) < 0)
            return rc;
        errno = 0;
        return pi_rc(pi_ack(h.d));
    case CX_SC_PI_SEEK:
        if ((rc = h_get(c, q->a[0], H_READER, &h)) < 0)
            return rc;
        errno = 0;
        return pi_rc(pi_seek(h.d, (uint64_t)q->a[1]));
    case CX_SC_PI_TELL: {
        if ((rc = h_get2(c, q->a[0], H_READER, H_WRITER, &h)) < 0)
            return rc;
        errno = 0;
        int64_t t = pi_tell(h.d);
        if (t < 0)
            return pi_rc(-1);
        rep->a[0] = t;
        return 0;
    }
    case CX_SC_PI_UNLINK:
        if ((rc = h_get(c, q->a[0], H_SPACE, &h)) < 0)
            return rc;
        errno = 0;
        return pi_rc(pi_unlink(q->s, h.d));
    case CX_SC_PI_STATS: {
        struct pi_reader_stats st;
        if ((rc = h_get(c, q->a[0], H_READER, &h)) < 0)
            return rc;
        errno = 0;
        if (pi_reader_stats(h.d, &st) < 0)
            return pi_rc(-1);
        rep->a[0] = (int64_t)st.from_space;
        rep->a[1] = (int64_t)st.from_writer;
        rep->a[2] = (int64_t)st.duplicates;
        rep->a[3] = (int64_t)st.spilled;
        return (int)(rep->rc = (int64_t)st.reconnects);
    }
    case CX_SC_PI_WRITER_STATS: {
        struct pi_writer_stats st;
        if ((rc = h_get(c, q->a[0], H_WRITER, &h)) < 0)
            return rc;
        errno = 0;
        if (pi_writer_stats(h.d, &st) < 0)
            return pi_rc(-1);
        return bulk_out(c, rep, &st, sizeof st);
    }
    case CX_SC_PI_LINK: {
        char link[PI_LINK_MAX];
        if ((rc = h_get2(c, q->a[0], H_WRITER, H_READER, &h)) < 0)
            return rc;
        errno = 0;
        if (pi_link(h.d, link, sizeof link) < 0)
            return pi_rc(-1);
        set_str(rep, link);
        return 0;
    }
    case CX_SC_CTX:
        set_str(rep, cx_chan_ctx_addr(sc->ctx));
        return 0;
    case CX_SC_CTX_FABRIC:
        set_str(rep, q->a[0] ? cx_chan_ctx_fabric_addr(sc->ctx) : cx_chan_ctx_fabric(sc->ctx));
        return 0;
    case CX_SC_CTX_LINK: {
        char link[64];
        if ((rc = cx_chan_ctx_link(sc->ctx, q->s, link, sizeof link)) < 0)
            return rc;
        set_str(rep, link);
        return rc;
    }
    case CX_SC_CHAN_CREATE:
    case CX_SC_CHAN_OPEN: {
        if (q->op == CX_SC_CHAN_CREATE) {
            if ((rc = format_of((uint64_t)q->a[0], &f)) < 0)
                return rc;
            struct cx_chan_opts o = {.format = f, .mode = (enum cx_chan_mode)q->a[1],
                                     .queue_limit = (unsigned)q->a[2]};
            rc = cx_chan_create(sc->ctx, &o, &h.ch);
        } else {
            rc = cx_chan_open(sc->ctx, q->s, (int)q->a[0], &h.ch);
        }
        if (rc < 0)
            return rc;
        h.kind = H_CHAN;
        snprintf(h.name, sizeof h.name, "%.127s", cx_chan_id(h.ch));
        int64_t id = h_add(sc, &h);
        if (id < 0) {
            cx_chan_close(h.ch);
            return (int)id;
        }
        rep->a[0] = id;
        f = cx_chan_format(h.ch);
        rep->a[1] = f ? (int64_t)cx_format_token(f) : 0;
        rep->a[2] = cx_chan_mode(h.ch);
        set_str(rep, cx_chan_id(h.ch));
        cx_sc_log("info", q->op == CX_SC_CHAN_CREATE ? "channel created" : "channel opened",
                  "\"channel\":%s,\"app_pid\":%d", cx_sc_json_str((char[300]){0}, 300, h.name),
                  c->sess->pid);
        return 0;
    }
    case CX_SC_CHAN_CLOSE:
        if ((rc = h_del(c, q->a[0], H_CHAN, &h)) < 0)
            return rc;
        close_children(sc, c->sess->id, q->a[0]);
        cx_chan_close(h.ch);
        return 0;
    case CX_SC_SOURCE: {
        struct sc_handle ch;
        if ((rc = h_get(c, q->a[0], H_CHAN, &ch)) < 0 || (rc = format_of((uint64_t)q->a[1], &f)) < 0)
            return rc;
        if (!f)
            return cx_err_set(EINVAL, "a source needs a format");
        if ((rc = cx_chan_source(ch.ch, f, &h.src)) < 0)
            return rc;
        h.kind = H_SOURCE;
        h.fmt = f;
        h.parent = q->a[0];
        h.reliable = cx_chan_mode(ch.ch) == CX_CHAN_RELIABLE;
        snprintf(h.name, sizeof h.name, "%s", ch.name);
        int64_t id = h_add(sc, &h);
        if (id < 0) {
            cx_chan_source_close(h.src);
            return (int)id;
        }
        rep->a[0] = id;
        return 0;
    }
    case CX_SC_SUBMIT: {
        if ((rc = h_get(c, q->a[0], H_SOURCE, &h)) < 0)
            return rc;
        if (!bulk)
            return cx_err_set(EINVAL, "submit without an event");
        /* decode a private copy: the application can write the shared ring at any time */
        uint64_t priv[64];
        void *copy = blen <= sizeof priv ? priv : malloc(blen);
        if (!copy)
            return cx_err_set(ENOMEM, "event of %zu bytes", blen);
        memcpy(copy, bulk, blen);
        rc = submit_decoded(sc, &h, copy, blen, q->a[1]);
        if (copy != priv)
            free(copy);
        return rc;
    }
    case CX_SC_SOURCE_CLOSE:
        if ((rc = h_del(c, q->a[0], H_SOURCE, &h)) < 0)
            return rc;
        cx_chan_source_close(h.src);
        return 0;
    case CX_SC_SINK: {
        struct sc_handle ch;
        if ((rc = h_get(c, q->a[0], H_CHAN, &ch)) < 0 || (rc = format_of((uint64_t)q->a[1], &f)) < 0 ||
            (rc = format_of((uint64_t)q->a[2], &g)) < 0)
            return rc;
        struct sc_sink *k = calloc(1, sizeof *k);
        if (!k)
            return cx_err_set(ENOMEM, "sink");
        k->sess = c->sess;
        k->fmt = f;
        h.kind = H_SINK;
        h.sink = k;
        h.parent = q->a[0];
        snprintf(h.name, sizeof h.name, "%s", ch.name);
        int64_t id = h_add(sc, &h); /* first: the handler names it */
        if (id < 0) {
            free(k);
            return (int)id;
        }
        k->handle = (uint64_t)id;
        struct cx_chan_sink_opts o = {.format = f, .filter = q->slen ? q->s : NULL, .projection = g};
        if ((rc = cx_chan_sink(ch.ch, &o, on_sink_event, k, &k->k)) < 0) {
            h_del(c, id, H_SINK, &h);
            free(k);
            return rc;
        }
        pthread_mutex_lock(&sc->mu);
        sc->h[id - 1].sink = k;
        pthread_mutex_unlock(&sc->mu);
        rep->a[0] = id;
        return 0;
    }
    case CX_SC_SINK_CLOSE: {
        if ((rc = h_get(c, q->a[0], H_SINK, &h)) < 0)
            return rc;
        /* events already queued for this process's sinks are delivered first (for up to a
         * second), as an application closing its sink after it saw an event expects of
         * the sinks that event was queued for */
        struct sc_handle ch;
        if (h_get(c, h.parent, H_CHAN, &ch) == 0) {
            struct cx_chan_stats st;
            for (int i = 0; i < 1000; i++) {
                cx_chan_stats(ch.ch, &st);
                if (!st.queued)
                    break;
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
            }
        }
        if ((rc = h_del(c, q->a[0], H_SINK, &h)) < 0)
            return rc;
        close_handle(&h);
        return 0;
    }
    case CX_SC_SINK_ERROR: {
        if ((rc = h_get(c, q->a[0], H_SINK, &h)) < 0)
            return rc;
        if (!h.sink->k)
            return 0;
        rep->slen = (uint32_t)cx_chan_sink_error(h.sink->k, rep->s, sizeof rep->s);
        if (rep->slen >= sizeof rep->s)
            rep->slen = sizeof rep->s - 1;
        return 0;
    }
    case CX_SC_CHAN_STATS: {
        struct cx_chan_stats st;
        if ((rc = h_get(c, q->a[0], H_CHAN, &h)) < 0)
            return rc;
        chan_stats(sc, h.ch, &st);
        return bulk_out(c, rep, &st, sizeof st);
    }
    case CX_SC_WAIT_MEMBERS: {
        if ((rc = h_get(c, q->a[0], H_CHAN, &h)) < 0)
            return rc;
        uint64_t deadline = cx__sc_now_ns() + (uint64_t)(q->a[3] < 0 ? 0 : q->a[3]) * 1000000u;
        struct cx_chan_stats st;
        for (;;) { /* the runtime counts the sidecar once: count its members one by one */
            chan_stats(sc, h.ch, &st);
            if (st.sources >= (uint64_t)q->a[1] && st.sinks >= (uint64_t)q->a[2])
                return 0;
            if (q->a[3] >= 0 && cx__sc_now_ns() >= deadline)
                return cx_err_set(ETIMEDOUT, "channel %s: %u sources and %u sinks after %lld ms "
                                  "(wanted %lld, %lld)", h.name, st.sources, st.sinks,
                                  (long long)q->a[3], (long long)q->a[1], (long long)q->a[2]);
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    default:
        return cx_err_set(EOPNOTSUPP, "unknown request %u", q->op);
    }
}

/* Tells the application a streamed submit failed (its source's next call returns rc). */
static void report_stream_error(struct sc_conn *c, uint32_t type, int64_t handle, int rc)
{
    struct sc_session *s = c->sess;
    struct cx_sc_submit_err e = {.source = handle, .rc = rc};
    pthread_mutex_lock(&s->ev_mu);
    struct sc_conn *ev = s->ev;
    void *p = ev ? cx_sc_ring_claim(&ev->out, type, sizeof e, NULL) : NULL;
    if (p) {
        memcpy(p, &e, sizeof e);
        if (cx_sc_ring_commit(&ev->out))
            send(ev->fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    pthread_mutex_unlock(&s->ev_mu);
    if (!p)
        cx_sc_log("warn", "a streamed call failed and the application's ring is full",
                  "\"error\":%d", rc);
}

/* Whether the application closed the connection (a reliable submit stops waiting). */
static int hung_up(const struct sc_conn *c)
{
    char b;
    return recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

void cx__sc_submit_async(struct sc_conn *c, const void *rec, size_t len)
{
    struct cx_sidecar *sc = c->sc;
    struct sc_handle h;
    int64_t id;
    if (len < sizeof id)
        return;
    memcpy(&id, rec, sizeof id);
    size_t wlen = len - sizeof id;
    uint64_t t0 = cx__sc_now_ns(), priv[64];
    int rc = h_get(c, id, H_SOURCE, &h);
    void *copy = wlen <= sizeof priv ? priv : malloc(wlen);
    if (rc == 0 && !copy)
        rc = -ENOMEM;
    if (rc == 0) {
        memcpy(copy, (const uint8_t *)rec + sizeof id, wlen);
        /* reliable: wait for room (in slices, so a gone application or a stopping sidecar
         * ends the wait); nothing the application streamed is dropped */
        do
            rc = submit_decoded(sc, &h, copy, wlen, h.reliable ? 100 : -2);
        while (rc == -ETIMEDOUT && !sc->stopping && !hung_up(c));
    }
    if (copy && copy != priv)
        free(copy);
    if (rc < 0)
        report_stream_error(c, CX_SC_REC_SUBMIT_ERR, id, rc);
    cx__sc_op_account(sc, CX_SC_SUBMIT, cx__sc_now_ns() - t0, rc < 0);
}

void cx__sc_handle(struct sc_conn *c, const struct cx_sc_req *q, void *bulk, size_t blen,
                   struct cx_sc_rep *rep)
{
    int rc = do_call(c, q, bulk, blen, rep);
    if (rc < 0) {
        rep->rc = rc;
        rep->bulk = 0;
        set_str(rep, cx_errmsg()[0] ? cx_errmsg() : strerror(-rc));
    }
}

/* The first failed streamed write of this session's writer `id` (0 if none); rc < 0 marks
 * one. */
static int stream_failed(struct sc_conn *c, int64_t id, int rc)
{
    struct cx_sidecar *sc = c->sc;
    int was = 0;
    pthread_mutex_lock(&sc->mu);
    if (id >= 1 && (size_t)id <= sc->nh && sc->h[id - 1].kind == H_WRITER &&
        sc->h[id - 1].session == c->sess->id) {
        was = sc->h[id - 1].stream_err;
        if (rc < 0 && !was)
            sc->h[id - 1].stream_err = rc;
    }
    pthread_mutex_unlock(&sc->mu);
    return was;
}

void cx__sc_write_async(struct sc_conn *c, const void *rec, size_t len)
{
    struct cx_sc_write w;
    if (len < sizeof w)
        return;
    memcpy(&w, rec, sizeof w);
    uint64_t t0 = cx__sc_now_ns();
    cx_err_clear();
    /* after a failure the writes the application streamed behind it are not written: the
     * application learns of the failure at its next call and reopens with PI_APPEND */
    long n = stream_failed(c, w.d, 0);
    if (n == 0)
        n = write_segment(c, w.d, w.len, w.token, (const uint8_t *)rec + sizeof w, len - sizeof w);
    if (n < 0 && stream_failed(c, w.d, (int)n) == 0)
        report_stream_error(c, CX_SC_REC_WRITE_ERR, w.d, (int)n);
    cx__sc_op_account(c->sc, CX_SC_PI_WRITE, cx__sc_now_ns() - t0, n < 0);
}
