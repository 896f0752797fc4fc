/* Reader groups' bookkeeping in the space server; see cx_spgroup.h. */
#include "space/cx_spgroup.h"

#include "common/cx_error.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cx_spgroup *cx_spgroup_get(struct cx_spgroup **list, const char *name, int create, uint64_t floor)
{
    for (struct cx_spgroup *g = *list; g; g = g->next_group)
        if (strcmp(g->name, name) == 0)
            return g;
    if (!create)
        return NULL;
    struct cx_spgroup *g = calloc(1, sizeof *g);
    if (!g) {
        cx_err_set(ENOMEM, "group '%s'", name);
        return NULL;
    }
    snprintf(g->name, sizeof g->name, "%s", name);
    g->floor = g->next = floor;
    g->next_member = 1;
    g->next_group = *list;
    *list = g;
    return g;
}

static struct cx_spgroup_member *member_find(struct cx_spgroup *g, uint64_t id)
{
    for (int i = 0; i < g->nmember; i++)
        if (g->member[i].id == id)
            return &g->member[i];
    return NULL;
}

int cx_spgroup_join(struct cx_spgroup *g, void *owner, uint32_t ack_wait_ms, uint64_t *member)
{
    if (g->nmember >= CX_GROUP_MEMBERS)
        return cx_err_set(EUSERS, "group '%s' has %d members already (the most)", g->name, CX_GROUP_MEMBERS);
    struct cx_spgroup_member *m = &g->member[g->nmember++];
    memset(m, 0, sizeof *m);
    m->id = g->next_member++;
    m->owner = owner;
    m->ack_wait_ms = ack_wait_ms ? ack_wait_ms : CX_GROUP_ACK_WAIT_MS;
    *member = m->id;
    return 0;
}

/* Puts a lease back into the queue, in position order. */
static int requeue(struct cx_spgroup *g, struct cx_spgroup_lease l)
{
    if (g->nqueue == g->cap_queue) {
        size_t cap = g->cap_queue ? 2 * g->cap_queue : 64;
        void *p = realloc(g->queue, cap * sizeof *g->queue);
        if (!p)
            return cx_err_set(ENOMEM, "group '%s': queue", g->name);
        g->queue = p;
        g->cap_queue = cap;
    }
    size_t i = g->nqueue;
    while (i > 0 && g->queue[i - 1].pos > l.pos) {
        g->queue[i] = g->queue[i - 1];
        i--;
    }
    l.deliveries++;
    g->queue[i] = l;
    g->nqueue++;
    return 0;
}

static void member_remove(struct cx_spgroup *g, struct cx_spgroup_member *m)
{
    for (int i = 0; i < m->nlease; i++)
        if (requeue(g, m->lease[i]) < 0) /* out of memory: the floor keeps it for a restart */
            fprintf(stderr, "confluxd space: %s: position %" PRIu64 " is lost until a restart\n",
                    cx_errmsg(), m->lease[i].pos);
    *m = g->member[--g->nmember];
}

int cx_spgroup_expire(struct cx_spgroup *g, double now)
{
    int n = 0;
    for (int i = 0; i < g->nmember;) {
        struct cx_spgroup_member *m = &g->member[i];
        if (m->nlease > 0 && now > m->deadline) {
            member_remove(g, m);
            g->expired++;
            n++;
        } else {
            i++;
        }
    }
    return n;
}

size_t cx_spgroup_inflight(const struct cx_spgroup *g)
{
    size_t n = 0;
    for (int i = 0; i < g->nmember; i++)
        n += (size_t)g->member[i].nlease;
    return n;
}

int cx_spgroup_next(struct cx_spgroup *g, uint64_t member, uint64_t avail, int ended, double now,
                    struct cx_spgroup_lease *out)
{
    cx_spgroup_expire(g, now);
    struct cx_spgroup_member *m = member_find(g, member);
    if (!m)
        return cx_err_set(ESRCH, "group '%s' has no member %" PRIu64 " (it left, its connection "
                          "closed or its ack deadline passed)", g->name, member);
    if (m->nlease >= CX_GROUP_INFLIGHT)
        return cx_err_set(ENOBUFS, "group '%s' member %" PRIu64 " holds %d unacknowledged "
                          "segments, the most: acknowledge first", g->name, member, m->nlease);
    if (g->nqueue) {
        *out = g->queue[0];
        memmove(g->queue, g->queue + 1, (g->nqueue - 1) * sizeof *g->queue);
        g->nqueue--;
    } else if (g->next < avail) {
        *out = (struct cx_spgroup_lease){.pos = g->next++, .deliveries = 1};
    } else {
        if (ended && cx_spgroup_inflight(g) == (size_t)m->nlease)
            return cx_err_set(EPIPE, "group '%s': the pipe ended after %" PRIu64 " segments, all "
                              "handed out", g->name, avail);
        return cx_err_set(EAGAIN, "group '%s': nothing to hand out now", g->name);
    }
    m->lease[m->nlease++] = *out;
    m->deadline = now + m->ack_wait_ms;
    return 0;
}

/* Marks pos acknowledged; moves the floor over the run it completes. 1 when it moved. */
static int mark_acked(struct cx_spgroup *g, uint64_t pos)
{
    if (pos == g->floor) {
        g->floor++;
        size_t k = 0;
        while (k < g->nacked && g->acked[k] == g->floor)
            g->floor++, k++;
        memmove(g->acked, g->acked + k, (g->nacked - k) * sizeof *g->acked);
        g->nacked -= k;
        return 1;
    }
    if (g->nacked == g->cap_acked) {
        size_t cap = g->cap_acked ? 2 * g->cap_acked : 64;
        void *p = realloc(g->acked, cap * sizeof *g->acked);
        if (!p)
            return 0; /* the floor stays behind it: handed out again after a restart only */
        g->acked = p;
        g->cap_acked = cap;
    }
    size_t i = g->nacked;
    while (i > 0 && g->acked[i - 1] > pos) {
        g->acked[i] = g->acked[i - 1];
        i--;
    }
    g->acked[i] = pos;
    g->nacked++;
    return 0;
}

int cx_spgroup_ack(struct cx_spgroup *g, uint64_t member, const uint64_t *pos, size_t n, double now)
{
    struct cx_spgroup_member *m = member_find(g, member);
    if (!m)
        return cx_err_set(ESRCH, "group '%s' has no member %" PRIu64 " (it left, its connection "
                          "closed or its ack deadline passed: its segments go to others)", g->name, member);
    for (size_t i = 0; i < n; i++) { /* all or none */
        int found = 0;
        for (int k = 0; k < m->nlease && !found; k++)
            found = m->lease[k].pos == pos[i];
        for (size_t j = 0; j < i && found; j++)
            found = pos[j] != pos[i];
        if (!found)
            return cx_err_set(ENOENT, "group '%s' member %" PRIu64 " does not hold segment %" PRIu64
                              " (not leased to it, or listed twice)", g->name, member, pos[i]);
    }
    int moved = 0;
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < m->nlease; k++)
            if (m->lease[k].pos == pos[i]) {
                m->lease[k] = m->lease[--m->nlease];
                break;
            }
        moved |= mark_acked(g, pos[i]);
    }
    m->deadline = now + m->ack_wait_ms;
    return moved;
}

void cx_spgroup_unlease(struct cx_spgroup *g, uint64_t member, uint64_t pos)
{
    struct cx_spgroup_member *m = member_find(g, member);
    for (int k = 0; m && k < m->nlease; k++)
        if (m->lease[k].pos == pos) {
            struct cx_spgroup_lease l = m->lease[k];
            m->lease[k] = m->lease[--m->nlease];
            l.deliveries--;
            requeue(g, l);
            return;
        }
}

int cx_spgroup_leave(struct cx_spgroup *g, uint64_t member)
{
    struct cx_spgroup_member *m = member_find(g, member);
    if (!m)
        return cx_err_set(ESRCH, "group '%s' has no member %" PRIu64, g->name, member);
    member_remove(g, m);
    return 0;
}

void cx_spgroup_owner_gone(struct cx_spgroup *list, void *owner)
{
    for (struct cx_spgroup *g = list; g; g = g->next_group)
        for (int i = 0; i < g->nmember;)
            if (g->member[i].owner == owner)
                member_remove(g, &g->member[i]);
            else
                i++;
}

void cx_spgroup_free_all(struct cx_spgroup **list)
{
    while (*list) {
        struct cx_spgroup *g = *list;
        *list = g->next_group;
        free(g->acked);
        free(g->queue);
        free(g);
    }
}
