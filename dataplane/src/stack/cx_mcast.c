/* Multicast fan-out filter; see cx_mcast.h. */
#include "stack/cx_mcast.h"

#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

struct mcast {
    struct cx_link base;
    struct cx_link *m[CX_MCAST_MAX];
    int n, alive, dropped, last;
    int epfd;
};

int cx_mcast_create(struct cx_link **out)
{
    struct mcast *g = calloc(1, sizeof *g);
    if (!g)
        return cx_err_set(ENOMEM, "mcast: out of memory");
    g->base.ops = &cx_mcast_ops;
    g->last = -1;
    g->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g->epfd < 0) {
        free(g);
        return cx_err_set(errno, "mcast: epoll: %s", strerror(errno));
    }
    *out = &g->base;
    return 0;
}

int cx_mcast_add(struct cx_link *k, struct cx_link *member)
{
    struct mcast *g = (struct mcast *)k;
    int i = 0;
    while (i < g->n && g->m[i])
        i++;
    if (i == CX_MCAST_MAX)
        return cx_err_set(ENOSPC, "mcast: the group has %d members (the most)", CX_MCAST_MAX);
    g->m[i] = member;
    if (i == g->n)
        g->n++;
    g->alive++;
    int fd = cx_link_fd(member);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (fd >= 0)
        epoll_ctl(g->epfd, EPOLL_CTL_ADD, fd, &ev);
    return i;
}

static void drop(struct mcast *g, int i)
{
    int fd = cx_link_fd(g->m[i]);
    if (fd >= 0)
        epoll_ctl(g->epfd, EPOLL_CTL_DEL, fd, NULL);
    cx_link_close(g->m[i]);
    g->m[i] = NULL;
    g->alive--;
}

int cx_mcast_remove(struct cx_link *k, int i)
{
    struct mcast *g = (struct mcast *)k;
    if (i < 0 || i >= g->n || !g->m[i])
        return cx_err_set(ENOENT, "mcast: no member %d", i);
    drop(g, i);
    return 0;
}

int cx_mcast_members(struct cx_link *k) { return ((struct mcast *)k)->alive; }
int cx_mcast_dropped(struct cx_link *k) { return ((struct mcast *)k)->dropped; }
int cx_mcast_last_member(struct cx_link *k) { return ((struct mcast *)k)->last; }

static int mcast_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                      int iovcnt)
{
    struct mcast *g = (struct mcast *)k;
    for (int i = 0; i < g->n; i++) {
        if (!g->m[i])
            continue;
        int rc = cx_link_send(g->m[i], h, iov, iovcnt);
        if (rc == -EMSGSIZE)
            return rc; /* the caller's mistake, not the member's: tell it */
        if (rc < 0) {
            drop(g, i);
            g->dropped++;
        }
    }
    return g->alive ? 0 : cx_err_set(ENOTCONN, "mcast: no member left");
}

static size_t mcast_pending(struct cx_link *k)
{
    struct mcast *g = (struct mcast *)k;
    size_t most = 0;
    for (int i = 0; i < g->n; i++)
        if (g->m[i]) {
            size_t p = cx_link_pending(g->m[i]);
            most = p > most ? p : most;
        }
    return most;
}

static int mcast_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct mcast *g = (struct mcast *)k;
    int work = 0;
    for (int i = 0; i < g->n; i++) {
        if (!g->m[i])
            continue;
        g->last = i;
        int rc = cx_link_progress(g->m[i], fn, arg, budget);
        if (rc < 0) {
            drop(g, i);
            g->dropped++;
            work++;
        } else {
            work += rc;
        }
    }
    g->last = -1;
    return g->alive ? work : cx_err_set(ENOTCONN, "mcast: no member left");
}

static int mcast_fd(struct cx_link *k) { return ((struct mcast *)k)->epfd; }

static int mcast_arm(struct cx_link *k)
{
    struct mcast *g = (struct mcast *)k;
    for (int i = 0; i < g->n; i++)
        if (g->m[i] && cx_link_arm(g->m[i]) < 0)
            return -EAGAIN;
    return 0;
}

/* What the group offers: what every member offers, the smallest max_msg, the highest cost. */
static void mcast_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    struct mcast *g = (struct mcast *)k;
    int first = 1;
    memset(c, 0, sizeof *c);
    for (int i = 0; i < g->n; i++) {
        if (!g->m[i])
            continue;
        struct cx_driver_caps m;
        cx_link_caps(g->m[i], &m);
        if (first) {
            *c = m;
            first = 0;
            continue;
        }
        c->flags &= m.flags;
        if (m.max_msg && (!c->max_msg || m.max_msg < c->max_msg))
            c->max_msg = m.max_msg;
        c->poll_cost = m.poll_cost > c->poll_cost ? m.poll_cost : c->poll_cost;
        c->rank = m.rank > c->rank ? m.rank : c->rank;
    }
}

static void mcast_close(struct cx_link *k)
{
    struct mcast *g = (struct mcast *)k;
    for (int i = 0; i < g->n; i++)
        if (g->m[i])
            cx_link_close(g->m[i]);
    close(g->epfd);
    free(g);
}

const struct cx_driver_ops cx_mcast_ops = {
    .name = "mcast", .send = mcast_send, .pending = mcast_pending,
    .progress = mcast_progress, .fd = mcast_fd, .arm = mcast_arm, .caps = mcast_caps,
    .close = mcast_close,
};
