/* Multi-protocol filter with failover; see cx_multi.h. */
#include "stack/cx_multi.h"

#include "common/cx_error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

struct multi {
    struct cx_link base;
    struct cx_link *links[CX_MULTI_MAX];
    int n, active;
    int epfd;
    void (*on_switch)(void *, int);
    void *sw_arg;
    int switching;
};

int cx_multi_create(struct cx_link **links, int n, struct cx_link **out)
{
    if (n < 1 || n > CX_MULTI_MAX)
        return cx_err_set(EINVAL, "multi: %d links (1..%d)", n, CX_MULTI_MAX);
    struct multi *m = calloc(1, sizeof *m);
    if (!m)
        return cx_err_set(ENOMEM, "multi: out of memory");
    m->base.ops = &cx_multi_ops;
    m->n = n;
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (m->epfd < 0) {
        int e = errno;
        free(m);
        return cx_err_set(e, "multi: epoll_create1: %s", strerror(e));
    }
    for (int i = 0; i < n; i++) {
        m->links[i] = links[i];
        int fd = cx_link_fd(links[i]);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (fd >= 0)
            epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    *out = &m->base;
    return 0;
}

void cx_multi_on_switch(struct cx_link *k, void (*fn)(void *, int), void *arg)
{
    struct multi *m = (struct multi *)k;
    m->on_switch = fn;
    m->sw_arg = arg;
}

int cx_multi_active(struct cx_link *k) { return ((struct multi *)k)->active; }
struct cx_link *cx_multi_lower(struct cx_link *k, int i)
{
    struct multi *m = (struct multi *)k;
    return i >= 0 && i < m->n ? m->links[i] : NULL;
}

/* Drops link i; if it was active, moves to the next alive one and tells on_switch. */
static void drop(struct multi *m, int i)
{
    if (!m->links[i])
        return;
    int fd = cx_link_fd(m->links[i]);
    if (fd >= 0)
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, NULL);
    cx_link_close(m->links[i]);
    m->links[i] = NULL;
    if (i != m->active)
        return;
    m->active = -1;
    for (int j = 0; j < m->n; j++)
        if (m->links[j]) {
            m->active = j;
            break;
        }
    if (m->active >= 0 && m->on_switch && !m->switching) {
        m->switching = 1; /* the callback resends through us; a failure inside re-enters drop */
        m->on_switch(m->sw_arg, m->active);
        m->switching = 0;
    }
}

void cx_multi_fail(struct cx_link *k, int i)
{
    struct multi *m = (struct multi *)k;
    if (i >= 0 && i < m->n)
        drop(m, i);
}

static int multi_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                      int iovcnt)
{
    struct multi *m = (struct multi *)k;
    while (m->active >= 0) {
        int a = m->active;
        int rc = cx_link_send(m->links[a], h, iov, iovcnt);
        if (rc == 0 || rc == -EMSGSIZE || rc == -EINVAL || rc == -ENOMEM)
            return rc;
        drop(m, a); /* the failed link; on_switch resends the unacknowledged (this one too) */
        if (m->on_switch)
            return 0;
    }
    return cx_err_set(ENOTCONN, "multi: every link to the peer has failed");
}

static size_t multi_pending(struct cx_link *k)
{
    struct multi *m = (struct multi *)k;
    return m->active >= 0 ? cx_link_pending(m->links[m->active]) : 0;
}

static int multi_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct multi *m = (struct multi *)k;
    int work = 0;
    for (int i = 0; i < m->n; i++) {
        if (!m->links[i])
            continue;
        int rc = cx_link_progress(m->links[i], fn, arg, budget);
        if (rc < 0) {
            drop(m, i);
            work++;
        } else {
            work += rc;
        }
    }
    if (m->active < 0)
        return cx_err_set(ENOTCONN, "multi: every link to the peer has failed");
    return work;
}

static int multi_fd(struct cx_link *k) { return ((struct multi *)k)->epfd; }
static int multi_arm(struct cx_link *k)
{
    struct multi *m = (struct multi *)k;
    for (int i = 0; i < m->n; i++)
        if (m->links[i] && cx_link_arm(m->links[i]) < 0)
            return -EAGAIN;
    return 0;
}
static void multi_caps(struct cx_link *k, struct cx_driver_caps *c)
{
    struct multi *m = (struct multi *)k;
    if (m->active >= 0)
        cx_link_caps(m->links[m->active], c);
    else
        memset(c, 0, sizeof *c);
}
void cx_multi_release(struct cx_link *k)
{
    struct multi *m = (struct multi *)k;
    close(m->epfd);
    free(m);
}
static void multi_close(struct cx_link *k)
{
    struct multi *m = (struct multi *)k;
    for (int i = 0; i < m->n; i++) cx_link_close(m->links[i]);
    cx_multi_release(k);
}

const struct cx_driver_ops cx_multi_ops = {
    .name = "multi", .send = multi_send, .pending = multi_pending,
    .progress = multi_progress, .fd = multi_fd, .arm = multi_arm, .caps = multi_caps,
    .close = multi_close,
};
