/* Derived sinks, at the source: the sink's filter or transform program, compiled once per
 * source format (against the projection, its output format) and run on the event's wire
 * form before anything is sent, with its state kept here between events; and the
 * projection to the sink's smaller format, into which the program's computed fields are
 * written. The only file that calls the filter module (src/filter/cx_filter.h). */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "common/cx_error.h"
#include "filter/cx_filter.h"
#include "format/cx_format_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct compiled {
    uint64_t token;
    struct cx_filter *f;
    int rc;
    void *state, *snap;    /* the program's state; its copy from before the last event */
    size_t ssize;
    const void *src;       /* the last event run: its source and number (a submit that */
    uint64_t seq;          /* waited for room runs the filters again: state is replayed) */
    int pass;              /* its verdict; res holds its computed fields when 1 */
    union cx_filter_value res[CX_FILTER_MAX_OUT];
};

struct chan_derived {
    struct compiled **c;
    size_t n;
    struct compiled *last; /* the program that ran on the event being delivered */
    uint8_t *pbuf;         /* projection output */
    size_t pcap;
    uint64_t waited;       /* events dropped while the projection was not known here */
};

static struct chan_derived *dv_of(struct chan_dest *d)
{
    if (!d->dv)
        d->dv = calloc(1, sizeof *d->dv);
    return d->dv;
}

int chan_filter_check(const char *expr, const struct cx_format *fmt,
                      const struct cx_format *proj)
{
    struct cx_filter *f = NULL;
    int rc = cx_filter_compile_xform(expr, fmt, proj, &f);
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

static void compiled_free(struct compiled *c)
{
    if (!c)
        return;
    cx_filter_free(c->f);
    free(c->state);
    free(c->snap);
    free(c);
}

/* Compiles d's program for source format fmt; NULL only when out of memory. Not cached
 * (rc -EAGAIN) while the projection it writes into is not known yet. */
static struct compiled *compile(struct chan_dest *d, const struct cx_format *fmt, uint64_t token)
{
    struct compiled *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->token = token;
    c->rc = cx_filter_compile_xform(d->filter, fmt, d->proj, &c->f);
    if (c->rc < 0 && d->proj_token && !d->proj) {
        c->rc = -EAGAIN; /* assignments need the output format: it comes from the sink */
        return c;
    }
    c->ssize = cx_filter_state_size(c->f);
    if (c->rc == 0 && c->ssize &&
        (!(c->state = calloc(1, c->ssize)) || !(c->snap = calloc(1, c->ssize)))) {
        compiled_free(c);
        return NULL;
    }
    if (c->rc == 0)
        cx_filter_state_init(c->f, c->state);
    if (c->rc < 0) {
        char msg[CHAN_ERR_MAX];
        snprintf(msg, sizeof msg, "filter '%s' on format '%s': %s", d->filter,
                 cx_format_name(fmt), cx_errmsg());
        report(d, msg);
    }
    return c;
}

/* Where a sink lives: its process's address and its receive tag. */
static int dest_cmp(const struct chan_dest *a, const struct chan_dest *b)
{
    const char *aa = a->local ? a->ch->ctx->addr : a->addr;
    const char *ba = b->local ? b->ch->ctx->addr : b->addr;
    uint32_t at = a->local ? a->sink->ep->tag : a->tag, bt = b->local ? b->sink->ep->tag : b->tag;
    int c = strcmp(aa, ba);
    return c ? c : (at > bt) - (at < bt);
}

/* d's place among the sinks of its channel with the same program (its stage), ordered by
 * process address and tag, so every source ranks them alike. */
static void stage_rank(const struct chan_dest *d, uint64_t *member, uint64_t *members)
{
    *member = 0;
    *members = 0;
    for (const struct chan_dest *e = d->ch->dests; e; e = e->next)
        if (e->filter && !strcmp(e->filter, d->filter)) {
            ++*members;
            *member += dest_cmp(e, d) < 0;
        }
}

int chan_filter_run(struct chan_dest *d, const struct cx_format *fmt, const void *wire,
                    size_t len, const void *src, uint64_t seq)
{
    struct chan_derived *dv = dv_of(d);
    if (!dv)
        return -ENOMEM;
    dv->last = NULL;
    if (d->proj_token && !d->proj)
        d->proj = cx_format_registry_lookup(d->proj_token);
    uint64_t token = cx_format_token(fmt);
    struct compiled *c = NULL;
    for (size_t i = 0; i < dv->n && !c; i++)
        if (dv->c[i]->token == token)
            c = dv->c[i];
    if (!c) { /* first event of this format: compile once */
        struct compiled **n = realloc(dv->c, (dv->n + 1) * sizeof *n);
        if (!n)
            return -ENOMEM;
        dv->c = n;
        if (!(c = compile(d, fmt, token)))
            return -ENOMEM;
        if (c->rc == -EAGAIN) {
            compiled_free(c);
            if (!dv->waited++) /* said once: the drops are counted as filtered, not silent */
                fprintf(stderr, "conflux channel %s: derived sink's program '%s' computes "
                        "fields into projection format %016llx, not known at this source "
                        "yet: its events are dropped (counted as filtered) until it is\n",
                        d->ch->id, d->filter, (unsigned long long)d->proj_token);
            return -EAGAIN;
        }
        if (dv->waited)
            fprintf(stderr, "conflux channel %s: projection format %016llx now known: program "
                    "'%s' runs (%llu events were dropped before)\n", d->ch->id,
                    (unsigned long long)d->proj_token, d->filter,
                    (unsigned long long)dv->waited);
        dv->c[dv->n++] = c;
    }
    if (c->rc < 0)
        return c->rc;
    if (c->ssize) {
        if (c->src == src && c->seq == seq) /* the same event again: from the same state */
            memcpy(c->state, c->snap, c->ssize);
        else
            memcpy(c->snap, c->state, c->ssize);
    }
    c->src = src;
    c->seq = seq;
    uint64_t member = 0, members = 1;
    if (cx_filter_shares(c->f))
        stage_rank(d, &member, &members);
    c->pass = cx_filter_run_member(c->f, c->state, wire, len, seq, member, members, c->res);
    dv->last = c;
    return c->pass;
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
    if (rc == 0 && dv->last && dv->last->pass == 1 &&
        cx_filter_outputs(dv->last->f)) /* the program's computed fields */
        cx_filter_store(dv->last->f, dv->last->res, ev);
    if (rc == 0)
        rc = cx_encode(d->proj, ev, enc);
    return rc; /* on failure the caller sends the whole event: correct, only bigger */
}

struct chan_ref *chan_project_ref(struct chan_dest *d, uint64_t token, uint64_t seq, void *wire,
                                  size_t len)
{
    struct chan_derived *dv = d->dv;
    struct cx_enc pe;
    if (!dv || !dv->last || dv->last->pass != 1 || !cx_filter_outputs(dv->last->f) || !d->proj ||
        chan_project(d, token, wire, len, &pe) < 0)
        return NULL;
    struct chan_ref *r = chan_ref_new(d->proj, seq);
    if (r && chan_ref_gather(r, &pe) < 0) {
        chan_ref_put(r);
        r = NULL;
    }
    return r;
}

void chan_derived_free(struct chan_dest *d)
{
    struct chan_derived *dv = d->dv;
    if (!dv)
        return;
    for (size_t i = 0; i < dv->n; i++)
        compiled_free(dv->c[i]);
    free(dv->c);
    free(dv->pbuf);
    free(dv);
    d->dv = NULL;
}
