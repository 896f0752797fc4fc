/* Reader groups: pi_attach_group and its member's pi_read / pi_ack / pi_detach (semantics in
 * cx_pipe.h, detail in docs/pipe-semantics.md). The space hands the segments out
 * (space/cx_spgroup.h): a member asks for its next lease (GROUP_NEXT, which carries the
 * segment), acknowledges what it read (GROUP_ACK) and gives the rest back at pi_detach. It
 * does not read the space's stream nor take writers' direct links. */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_env.h"
#include "common/cx_error.h"
#include "space/cx_segcursor.h"
#include "space/cx_spgroup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pi_group {
    char name[128], group[CX_GROUP_NAME_MAX + 1];
    int space;
    int timeout_ms;
    uint32_t ack_wait_ms;     /* CONFLUX_GROUP_ACK_WAIT_MS at attach (0: the space's 30 s) */
    uint64_t member;          /* 0: to join (again) before the next lease */
    uint64_t unacked[CX_GROUP_INFLIGHT]; /* read since the last pi_ack */
    int nunacked;
    int lost;                 /* read segments went back to the group (member removed) */
    struct cx_space_group_seg pending; /* leased, not delivered yet (a too small buffer) */
    int has_pending;
    int64_t tell;             /* after the last segment read (0: none) */
    struct pi_reader_stats st;
};

static struct pi_group *group_get(int d)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_group *g = d >= 0 && d < PI_MAX_DESC && g_pi.desc[d].kind == PI_GROUP ? g_pi.desc[d].g : NULL;
    pthread_mutex_unlock(&g_pi.mu);
    return g;
}

static int conn_lost(int rc)
{
    return rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -ENOTCONN;
}

/* Joins g's group on its space's request connection, riding out a restart of the space for
 * up to timeout_ms (as cursor requests do). */
static int join(struct pi_group *g)
{
    double end = pi_now_ms() + g->timeout_ms;
    struct cx_space_client *c = pi_space_ctl(g->space, NULL);
    int rc;
    for (;;) {
        rc = c ? cx_space_group_join(c, g->name, g->group, g->ack_wait_ms, &g->member, NULL) : -cx_errcode();
        if ((c && !conn_lost(rc)) || pi_now_ms() > end)
            break;
        c = pi_space_ctl(g->space, rc == -ECONNRESET ? c : NULL);
        if (!c)
            usleep(100000);
    }
    if (rc < 0)
        g->member = 0;
    return rc;
}

/* The member is gone on the space's side: what it read unacknowledged goes to others. */
static void member_lost(struct pi_group *g)
{
    if (g->nunacked)
        g->lost += g->nunacked;
    g->nunacked = 0;
    g->member = 0;
}

int cx_embedded_pi_attach_group(const char *name, int s, const char *group)
{
    int rc = pi_name_check(name, "pi_attach_group");
    if (rc == 0 && (rc = cx_cursor_name_check(group)) < 0)
        rc = cx_err_wrap(rc, "pi_attach_group '%s' (a group name follows cursor names' rules)", name);
    if (rc < 0)
        return pi_fail(rc);
    struct pi_group *g = calloc(1, sizeof *g);
    if (!g)
        return pi_fail(cx_err_set(ENOMEM, "pi_attach_group"));
    snprintf(g->name, sizeof g->name, "%s", name);
    snprintf(g->group, sizeof g->group, "%s", group);
    g->space = s;
    g->ack_wait_ms = (uint32_t)cx_env_u64("CONFLUX_GROUP_ACK_WAIT_MS", 0, 1, 86400000);
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    g->timeout_ms = sp && sp->opts.timeout_ms > 0 ? sp->opts.timeout_ms : 10000;
    pthread_mutex_unlock(&g_pi.mu);
    if (!sp) {
        free(g);
        return pi_fail(-EBADF);
    }
    if ((rc = join(g)) < 0) {
        free(g);
        return pi_fail(cx_err_wrap(rc, "pi_attach_group '%s' group '%s'", name, group));
    }
    pthread_mutex_lock(&g_pi.mu);
    int d = pi_desc_alloc();
    if (d >= 0)
        g_pi.desc[d] = (struct pi_desc){.kind = PI_GROUP, .g = g};
    pthread_mutex_unlock(&g_pi.mu);
    if (d < 0) {
        struct cx_space_client *c = pi_space_ctl(s, NULL);
        if (c)
            cx_space_group_leave(c, name, group, g->member);
        free(g);
        return pi_fail(cx_err_set(EMFILE, "pi_attach_group: no free descriptor"));
    }
    return d;
}

/* Leases the member's next segment into g->pending: 0, -EAGAIN (none now), -EPIPE (the
 * end), or an error. Joins again when the member was removed (its leases went to others). */
static int lease_next(struct pi_group *g)
{
    if (!g->member) { /* removed by the space: a new member (counted as a reconnect) */
        int rc = join(g);
        if (rc < 0)
            return rc;
        g->st.reconnects++;
    }
    struct cx_space_client *c = pi_space_ctl(g->space, NULL);
    if (!c)
        return -cx_errcode();
    int rc = cx_space_group_next(c, g->name, g->group, g->member, &g->pending);
    if (rc == 0)
        g->has_pending = 1;
    else if (rc == -ESRCH || conn_lost(rc)) { /* removed: join again, then ask again */
        if (rc == -ECONNRESET)
            pi_space_ctl(g->space, c);
        member_lost(g);
        return -EAGAIN;
    }
    return rc;
}

int pi_group_read(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms, long *out)
{
    struct pi_group *g = group_get(d);
    if (!g)
        return 0;
    double end = pi_now_ms() + (timeout_ms >= 0 ? timeout_ms : 0);
    useconds_t nap = 1000;
    while (!g->has_pending) {
        if (g->nunacked >= CX_GROUP_INFLIGHT) {
            *out = pi_fail(cx_err_set(ENOBUFS, "pi_read: group '%s' member read %d segments "
                                      "without pi_ack (the most): acknowledge first", g->group, g->nunacked));
            return 1;
        }
        int rc = lease_next(g);
        if (rc == -EAGAIN) {
            if (timeout_ms >= 0 && pi_now_ms() >= end) {
                *out = pi_fail(cx_err_set(ETIMEDOUT, "no segment in %d ms", timeout_ms));
                return 1;
            }
            usleep(nap); /* nothing to hand out yet: ask again, backing off to 50 ms */
            nap = nap < 50000 ? nap * 2 : 50000;
            continue;
        }
        if (rc < 0) {
            *out = pi_fail(rc == -EPIPE ? rc : cx_err_wrap(rc, "pi_read: pipe '%s' group '%s'", g->name, g->group));
            return 1;
        }
    }
    struct cx_space_group_seg *sg = &g->pending;
    long n;
    if (!t) {
        if (sg->len > len) { /* the segment stays for a call with a bigger buffer */
            *out = pi_fail(cx_err_set(EMSGSIZE, "segment %llu has %u bytes, the buffer %zu",
                                      (unsigned long long)sg->pos, sg->len, len));
            return 1;
        }
        memcpy(b, sg->data, sg->len);
        n = sg->len;
    } else {
        long count = pi_seg_count(sg->format, sg->len, t);
        if (count < 0) {
            *out = pi_fail(cx_err_wrap((int)count, "segment %llu", (unsigned long long)sg->pos));
            return 1;
        }
        if ((size_t)count > len) {
            *out = pi_fail(cx_err_set(EMSGSIZE, "segment %llu holds %ld events, the buffer %zu",
                                      (unsigned long long)sg->pos, count, len));
            return 1;
        }
        n = pi_seg_decode(sg->format, sg->data, sg->len, b, len, t);
        if (n < 0) {
            *out = pi_fail((int)n);
            return 1;
        }
    }
    if (g->member) /* else it was leased to a member that is gone: not ours to ack */
        g->unacked[g->nunacked++] = sg->pos;
    g->tell = (int64_t)sg->pos + 1;
    g->st.from_space++;
    if (sg->deliveries > 1)
        g->st.duplicates++;
    free(sg->data);
    g->has_pending = 0;
    *out = n;
    return 1;
}

/* ESRCH: n segments this member read went back to the group. */
static int lost_error(struct pi_group *g, int n)
{
    return cx_err_set(ESRCH, "pi_ack: group '%s' of pipe '%s': %d segments read since the last "
                      "pi_ack went back to the group (this member was removed: its connection "
                      "closed, the space restarted or its ack deadline passed); other members "
                      "get them; any read after that are acknowledged", g->group, g->name, n);
}

int pi_group_ack(int d, int *out)
{
    struct pi_group *g = group_get(d);
    if (!g)
        return 0;
    int rc = 0;
    if (g->nunacked) { /* what was read as the current member: acknowledged first */
        struct cx_space_client *c = pi_space_ctl(g->space, NULL);
        rc = c ? cx_space_group_ack(c, g->name, g->group, g->member, g->unacked, (size_t)g->nunacked)
               : -cx_errcode();
        if (rc == -ESRCH || rc == -ECONNRESET) {
            if (rc == -ECONNRESET)
                pi_space_ctl(g->space, c);
            member_lost(g); /* they count as lost below */
        } else if (rc < 0) {
            *out = pi_fail(cx_err_wrap(rc, "pi_ack: pipe '%s' group '%s'", g->name, g->group));
            return 1;
        } else {
            g->nunacked = 0;
        }
    }
    int lost = g->lost;
    g->lost = 0;
    *out = lost ? pi_fail(lost_error(g, lost)) : 0;
    return 1;
}

int pi_group_detach(int d, int *out)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_group *g = d >= 0 && d < PI_MAX_DESC && g_pi.desc[d].kind == PI_GROUP ? g_pi.desc[d].g : NULL;
    if (g)
        g_pi.desc[d] = (struct pi_desc){0};
    pthread_mutex_unlock(&g_pi.mu);
    if (!g)
        return 0;
    if (g->member) { /* hands back at once what it holds (a lost connection did already) */
        struct cx_space_client *c = pi_space_ctl(g->space, NULL);
        int rc = c ? cx_space_group_leave(c, g->name, g->group, g->member) : -cx_errcode();
        if (rc < 0 && rc != -ESRCH)
            fprintf(stderr, "conflux: pi_detach: group '%s' of pipe '%s': %s (the space hands "
                    "its segments to others when its connection or ack deadline ends)\n",
                    g->group, g->name, cx_errmsg());
    }
    if (g->has_pending)
        free(g->pending.data);
    free(g);
    *out = 0;
    return 1;
}

int pi_group_tell(int d, int64_t *out)
{
    struct pi_group *g = group_get(d);
    if (g)
        *out = g->tell;
    return g != NULL;
}

int pi_group_seek(int d, int *out)
{
    struct pi_group *g = group_get(d);
    if (g)
        *out = pi_fail(cx_err_set(EINVAL, "pi_seek: a group member (group '%s') reads what the "
                                  "space hands it, it cannot seek", g->group));
    return g != NULL;
}

int pi_group_space(const struct pi_group *g)
{
    return g->space;
}

int pi_group_stats(int d, struct pi_reader_stats *out, int *rc)
{
    struct pi_group *g = group_get(d);
    if (g) {
        *out = g->st;
        *rc = 0;
    }
    return g != NULL;
}
