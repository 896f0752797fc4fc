/* The NATS JetStream side of the persistent-stream benchmark: a file-storage stream per
 * run; the publisher publishes each segment with a reply inbox and keeps at most `window`
 * publish acks outstanding (JetStream acks once the message is stored, per the server's
 * sync policy); the reader is a durable pull consumer that keeps two batches requested. */
#define _GNU_SOURCE /* memmem */
#include "stream_bench.h"

#include "nats_proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACK_SID 1
#define DATA_SID 2
#define API_TIMEOUT_MS 10000
#define MSG_TIMEOUT_MS 60000

static int side_fail(struct side_result *out, struct nc *c, int rc, const char *what)
{
    out->rc = rc < 0 ? rc : -EIO;
    snprintf(out->err, sizeof out->err, "%s: %s", what, c ? nc_errmsg(c) : strerror(-out->rc));
    return out->rc;
}

/* A JetStream API reply carries "error" when the call failed. */
static int api(struct nc *c, const char *subject, const char *json, struct side_result *out,
               const char *what)
{
    char reply[2048];
    int rc = nc_request(c, subject, json, reply, sizeof reply, API_TIMEOUT_MS);
    if (rc < 0)
        return side_fail(out, c, rc, what);
    if (strstr(reply, "\"error\"")) {
        out->rc = -EPROTO;
        snprintf(out->err, sizeof out->err, "%s: %.150s", what, reply);
        return out->rc;
    }
    return 0;
}

/* Creates the stream (idempotent: the same config again is accepted), like pi_create /
 * pi_attach binding the pipe's name. */
static int ensure_stream(struct nc *c, const struct stream_run *r, struct side_result *out)
{
    char subj[160], json[512];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", r->name);
    snprintf(json, sizeof json,
             "{\"name\":\"%s\",\"subjects\":[\"%s.seg\"],\"storage\":\"file\","
             "\"retention\":\"limits\",\"discard\":\"old\",\"num_replicas\":1,"
             "\"max_msg_size\":-1,\"max_msgs\":-1,\"max_bytes\":-1}",
             r->name, r->name);
    return api(c, subj, json, out, "stream create");
}

int nats_writer(const struct stream_run *r, struct side_result *out)
{
    struct nc *c;
    int rc = nc_connect(r->addr, &c);
    if (rc < 0)
        return side_fail(out, NULL, rc, "connect");
    uint8_t *buf = malloc(r->size);
    if (!buf) {
        rc = side_fail(out, c, -ENOMEM, "segment buffer");
        goto out;
    }
    seg_fill(buf, r->size, 0);
    char subj[96], ackpfx[96], acksub[112], reply[128];
    snprintf(subj, sizeof subj, "%s.seg", r->name);
    snprintf(ackpfx, sizeof ackpfx, "_ACK.%s", r->name);
    snprintf(acksub, sizeof acksub, "%s.*", ackpfx);
    if ((rc = ensure_stream(c, r, out)) < 0)
        goto out;
    if ((rc = nc_sub(c, acksub, ACK_SID)) < 0) {
        side_fail(out, c, rc, "subscribe");
        goto out;
    }
    uint64_t sent = 0, acked = 0;
    while (acked < r->count) {
        /* publish while the window has room, then collect acks */
        while (sent < r->count && sent - acked < r->window) {
            seg_fill(buf, r->size, sent);
            snprintf(reply, sizeof reply, "%s.%llu", ackpfx, (unsigned long long)sent);
            if ((rc = nc_pub(c, subj, reply, buf, r->size)) < 0) {
                side_fail(out, c, rc, "publish");
                goto out;
            }
            sent++;
        }
        struct nc_msg m;
        int wait = sent - acked < r->window && sent < r->count ? 0 : MSG_TIMEOUT_MS;
        rc = nc_next(c, &m, wait);
        if (rc < 0) {
            side_fail(out, c, rc, "publish ack");
            goto out;
        }
        if (rc == 0 && wait) {
            side_fail(out, c, -ETIMEDOUT, "no publish ack");
            goto out;
        }
        for (; rc == 1; rc = nc_next(c, &m, 0)) {
            if (m.sid != ACK_SID)
                continue;
            if (m.status || memmem(m.data, m.len, "\"error\"", 7)) {
                out->rc = -EIO;
                snprintf(out->err, sizeof out->err, "publish refused (status %d): %.*s", m.status,
                         (int)(m.len < 150 ? m.len : 150), (const char *)m.data);
                goto out;
            }
            acked++;
        }
        if (rc < 0) {
            side_fail(out, c, rc, "publish ack");
            goto out;
        }
    }
    out->t_done = bench_now();
    rc = 0;
out:
    free(buf);
    nc_close(c);
    return out->rc;
}

/* Asks for up to n more messages (expires in 60 s, far beyond a run's gaps). */
static int pull(struct nc *c, const struct stream_run *r, const char *inbox, uint64_t n)
{
    char subj[160], json[128];
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.MSG.NEXT.%s.r", r->name);
    snprintf(json, sizeof json, "{\"batch\":%llu,\"expires\":60000000000}", (unsigned long long)n);
    return nc_pub(c, subj, inbox, json, strlen(json));
}

/* "Nats-Pending-Messages: k" of a 408 status: messages of the request never delivered. */
static uint64_t pending_of(const struct nc_msg *m)
{
    const char *p = memmem(m->hdr, m->hdr_len, "Nats-Pending-Messages:", 22);
    return p ? strtoull(p + 22, NULL, 10) : 0;
}

int nats_reader(const struct stream_run *r, struct side_result *out, ready_fn ready, void *arg)
{
    struct nc *c;
    int rc = nc_connect(r->addr, &c);
    if (rc < 0)
        return side_fail(out, NULL, rc, "connect");
    char subj[160], json[512], inbox[96];
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.DURABLE.CREATE.%s.r", r->name);
    snprintf(json, sizeof json,
             "{\"stream_name\":\"%s\",\"config\":{\"durable_name\":\"r\",\"deliver_policy\":\"all\","
             "\"ack_policy\":\"none\",\"replay_policy\":\"instant\",\"max_waiting\":512}}",
             r->name);
    snprintf(inbox, sizeof inbox, "_DATA.%s", r->name);
    if ((rc = ensure_stream(c, r, out)) < 0 || (rc = api(c, subj, json, out, "consumer create")) < 0)
        goto out;
    if ((rc = nc_sub(c, inbox, DATA_SID)) < 0) {
        side_fail(out, c, rc, "subscribe");
        goto out;
    }
    out->t_ready = bench_now();
    ready(arg, out->t_ready);
    uint64_t requested = 0, got = 0;
    while (got < r->count) {
        /* keep two batches asked for, never more than the stream will hold */
        while (requested - got < 2ull * r->batch && requested < r->count) {
            uint64_t n = r->count - requested < r->batch ? r->count - requested : r->batch;
            if ((rc = pull(c, r, inbox, n)) < 0) {
                side_fail(out, c, rc, "pull request");
                goto out;
            }
            requested += n;
        }
        struct nc_msg m;
        rc = nc_next(c, &m, MSG_TIMEOUT_MS);
        if (rc <= 0) {
            side_fail(out, c, rc ? rc : -ETIMEDOUT, "waiting for messages");
            goto out;
        }
        if (m.sid != DATA_SID)
            continue;
        if (m.status == 408 || m.status == 404) { /* a request expired: ask again */
            requested -= pending_of(&m);
            continue;
        }
        if (m.status) {
            out->rc = -EPROTO;
            snprintf(out->err, sizeof out->err, "pull status %d: %.*s", m.status,
                     (int)(m.hdr_len < 150 ? m.hdr_len : 150), m.hdr);
            goto out;
        }
        if ((rc = seg_check(m.data, m.len, r->size, got, out)) < 0)
            goto out;
        got++;
    }
    out->segments = got;
    out->t_done = bench_now();
out:
    nc_close(c);
    return out->rc;
}

int nats_cleanup(const struct stream_run *r)
{
    struct nc *c;
    int rc = nc_connect(r->addr, &c);
    if (rc < 0)
        return rc;
    char subj[160], reply[512];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.DELETE.%s", r->name);
    rc = nc_request(c, subj, "", reply, sizeof reply, API_TIMEOUT_MS);
    nc_close(c);
    return rc;
}
