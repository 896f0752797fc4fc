/* Derived sinks, at the source: the sink's filter, compiled once per source format and run
 * on the event's wire form before anything is sent, and the projection to the sink's
 * smaller format. The only file that calls the filter module (src/filter/cx_filter.h). */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"
#include "filter/cx_filter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct compiled {
    uint64_t token;
    struct cx_filter *f;
    int rc;
};

struct chan_derived {
    struct compiled *c;
    size_t n;
    uint8_t *pbuf; /* projection output */
    size_t pcap;
};

static struct chan_derived *dv_of(struct chan_dest *d)
{
    if (!d->dv)
        d->dv = calloc(1, sizeof *d->dv);
    return d->dv;
}

int chan_filter_check(const char *expr, const struct cx_format *fmt)
{
    struct cx_filter *f = NULL;
    int rc = cx_filter_compile(expr, fmt, &f);
    if (rc < 0)
        return cx_err_wrap(rc, "filter '%s'", expr);
    cx_filter_free(f);
    return 0;
}

/* The source tells the sink once why its filter cannot run here. */
static void report(struct chan_dest *d, const char *msg)
{
    if (d->local) {
        snprintf(d->sink->err, sizeof d->sink->err, "%s", msg);
        return;
    }
    if (!d->peer)
        return;
    struct chan_ctrl m = {.op = CTRL_FILTER_ERR, .tag = d->tag, .chan = d->ch->id,
                          .text = (char *)msg};
    chan_ctrl_post(d->peer, &m);
}

int chan_filter_run(struct chan_dest *d, const struct cx_format *fmt, const void *wire,
                    size_t len)
{
    struct chan_derived *dv = dv_of(d);
    if (!dv)
        return -ENOMEM;
    uint64_t token = cx_format_token(fmt);
    struct compiled *c = NULL;
    for (size_t i = 0; i < dv->n; i++)
        if (dv->c[i].token == token)
            c = &dv->c[i];
    if (!c) { /* first event of this format: compile once */
        struct compiled *n = realloc(dv->c, (dv->n + 1) * sizeof *n);
        if (!n)
            return -ENOMEM;
        dv->c = n;
        c = &dv->c[dv->n++];
        c->token = token;
        c->f = NULL;
        c->rc = cx_filter_compile(d->filter, fmt, &c->f);
        if (c->rc < 0) {
            char msg[CHAN_ERR_MAX];
            snprintf(msg, sizeof msg, "filter '%s' on format '%s': %s", d->filter,
                     cx_format_name(fmt), cx_errmsg());
            report(d, msg);
        }
    }
    if (c->rc < 0)
        return c->rc;
    return cx_filter_eval(c->f, wire, len);
}

int chan_project(struct chan_dest *d, uint64_t token, void *wire, size_t len,
                 struct cx_enc *enc)
{
    struct chan_derived *dv = dv_of(d);
    if (!dv)
        return -ENOMEM;
    size_t need = 0;
    void *ev;
    int rc = cx_decode_need(d->proj, token, wire, len, &need);
    if (rc == 0 && need > dv->pcap) {
        free(dv->pbuf);
        dv->pcap = 0;
        if (!(dv->pbuf = malloc(need)))
            return -ENOMEM;
        dv->pcap = need;
    }
    if (rc == 0)
        rc = cx_decode(d->proj, token, wire, len, dv->pbuf, dv->pcap, &ev);
    if (rc == 0)
        rc = cx_encode(d->proj, ev, enc);
    return rc; /* on failure the caller sends the whole event: correct, only bigger */
}

void chan_derived_free(struct chan_dest *d)
{
    struct chan_derived *dv = d->dv;
    if (!dv)
        return;
    for (size_t i = 0; i < dv->n; i++)
        cx_filter_free(dv->c[i].f);
    free(dv->c);
    free(dv->pbuf);
    free(dv);
    d->dv = NULL;
}
