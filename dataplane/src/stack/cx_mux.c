/* Multiplexing filter; see cx_mux.h. Channels live in an open-addressed table keyed by id. */
#include "stack/cx_mux.h"

#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>

struct mux_chan {
    struct cx_link base;
    struct cx_mux *mux;
    uint32_t id;
    cx_recv_fn fn;
    void *arg;
};

struct cx_mux {
    struct cx_link base;
    struct cx_link *lower;
    struct mux_chan **tab; /* open addressing, power-of-two size */
    size_t cap, n;
    cx_recv_fn fn; /* unclaimed messages */
    void *arg;
    unsigned long long dropped;
};

static struct mux_chan **slot(struct cx_mux *m, uint32_t id)
{
    size_t i = (id * 2654435761u) & (m->cap - 1);
    while (m->tab[i] && m->tab[i]->id != id) i = (i + 1) & (m->cap - 1);
    return &m->tab[i];
}

int cx_mux_create(struct cx_link *lower, struct cx_mux **out)
{
    struct cx_mux *m = calloc(1, sizeof *m);
    if (!m || !(m->tab = calloc(16, sizeof *m->tab))) {
        free(m);
        return cx_err_set(ENOMEM, "mux: out of memory");
    }
    m->cap = 16;
    m->base.ops = &cx_mux_ops;
    m->lower = lower;
    *out = m;
    return 0;
}

struct cx_link *cx_mux_link(struct cx_mux *m) { return &m->base; }
unsigned long long cx_mux_dropped(const struct cx_mux *m) { return m->dropped; }

static int grow(struct cx_mux *m)
{
    struct mux_chan **old = m->tab;
    size_t oldcap = m->cap;
    m->tab = calloc(oldcap * 2, sizeof *m->tab);
    if (!m->tab) {
        m->tab = old;
        return cx_err_set(ENOMEM, "mux: out of memory");
    }
    m->cap = oldcap * 2;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i])
            *slot(m, old[i]->id) = old[i];
    free(old);
    return 0;
}

int cx_mux_channel(struct cx_mux *m, uint32_t id, struct cx_link **out)
{
    if (id == 0)
        return cx_err_set(EINVAL, "mux: channel 0 is reserved for link control");
    if (*slot(m, id))
        return cx_err_set(EEXIST, "mux: channel %u is already open", id);
    if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
        return -ENOMEM;
    struct mux_chan *c = calloc(1, sizeof *c);
    if (!c)
        return cx_err_set(ENOMEM, "mux: out of memory");
    c->base.ops = &cx_mux_channel_ops;
    c->mux = m;
    c->id = id;
    *slot(m, id) = c;
    m->n++;
    *out = &c->base;
    return 0;
}

static void dispatch(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct cx_mux *m = arg;
    struct mux_chan *c = *slot(m, h->channel);
    if (c && c->fn)
        c->fn(c->arg, h, p, n);
    else if (m->fn)
        m->fn(m->arg, h, p, n);
    else
        m->dropped++;
}

static int mux_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                    int iovcnt)
{
    struct cx_mux *m = (struct cx_mux *)k;
    return m->lower->ops->send(m->lower, h, iov, iovcnt);
}
static size_t mux_pending(struct cx_link *k) { return cx_link_pending(((struct cx_mux *)k)->lower); }
static int mux_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct cx_mux *m = (struct cx_mux *)k;
    m->fn = fn;
    m->arg = arg;
    return cx_link_progress(m->lower, dispatch, m, budget);
}
static int mux_fd(struct cx_link *k) { return cx_link_fd(((struct cx_mux *)k)->lower); }
static int mux_arm(struct cx_link *k) { return cx_link_arm(((struct cx_mux *)k)->lower); }
static void mux_caps(struct cx_link *k, struct cx_driver_caps *c) { cx_link_caps(((struct cx_mux *)k)->lower, c); }
static void mux_close(struct cx_link *k)
{
    struct cx_mux *m = (struct cx_mux *)k;
    for (size_t i = 0; i < m->cap; i++)
        if (m->tab[i])
            m->tab[i]->mux = NULL;
    cx_link_close(m->lower);
    free(m->tab);
    free(m);
}

const struct cx_driver_ops cx_mux_ops = {
    .name = "mux", .send = mux_send, .pending = mux_pending, .progress = mux_progress,
    .fd = mux_fd, .arm = mux_arm, .caps = mux_caps, .close = mux_close,
};

static int chan_send(struct cx_link *k, const struct cx_frame_hdr *h, const struct iovec *iov,
                     int iovcnt)
{
    struct mux_chan *c = (struct mux_chan *)k;
    if (!c->mux)
        return cx_err_set(EPIPE, "mux: channel %u outlived its mux", c->id);
    struct cx_frame_hdr hh = *h;
    hh.channel = c->id;
    return cx_link_send(c->mux->lower, &hh, iov, iovcnt);
}
static size_t chan_pending(struct cx_link *k)
{
    struct mux_chan *c = (struct mux_chan *)k;
    return c->mux ? cx_link_pending(c->mux->lower) : 0;
}
static int chan_progress(struct cx_link *k, cx_recv_fn fn, void *arg, int budget)
{
    struct mux_chan *c = (struct mux_chan *)k;
    if (!c->mux)
        return cx_err_set(EPIPE, "mux: channel %u outlived its mux", c->id);
    c->fn = fn;
    c->arg = arg;
    return cx_link_progress(c->mux->lower, dispatch, c->mux, budget);
}
static int chan_fd(struct cx_link *k)
{
    struct mux_chan *c = (struct mux_chan *)k;
    return c->mux ? cx_link_fd(c->mux->lower) : -1;
}
static int chan_arm(struct cx_link *k)
{
    struct mux_chan *c = (struct mux_chan *)k;
    return c->mux ? cx_link_arm(c->mux->lower) : 0;
}
static void chan_caps(struct cx_link *k, struct cx_driver_caps *cp)
{
    struct mux_chan *c = (struct mux_chan *)k;
    if (c->mux)
        cx_link_caps(c->mux->lower, cp);
    else
        memset(cp, 0, sizeof *cp);
}
static void chan_close(struct cx_link *k)
{
    struct mux_chan *c = (struct mux_chan *)k;
    if (c->mux) { /* remove from the table, re-inserting the probe chain after it */
        struct cx_mux *m = c->mux;
        struct mux_chan **s = slot(m, c->id);
        *s = NULL;
        m->n--;
        size_t i = ((size_t)(s - m->tab) + 1) & (m->cap - 1);
        while (m->tab[i]) {
            struct mux_chan *x = m->tab[i];
            m->tab[i] = NULL;
            *slot(m, x->id) = x;
            i = (i + 1) & (m->cap - 1);
        }
    }
    free(c);
}

const struct cx_driver_ops cx_mux_channel_ops = {
    .name = "mux-channel", .send = chan_send, .pending = chan_pending,
    .progress = chan_progress, .fd = chan_fd, .arm = chan_arm, .caps = chan_caps,
    .close = chan_close,
};
