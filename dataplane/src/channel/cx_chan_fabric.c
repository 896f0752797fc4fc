/* Fabrics: the fast-link domain a runtime is in (ARCHITECTURE.md principle 4: the fastest
 * link that reaches). A runtime in a fabric listens on ucx besides its advertised tcp
 * address; a dialer asks the peer over the fresh tcp link (CTRL_LINKS_QUERY, before HELLO)
 * for its fabric and ucx address, and chan_link_rank picks the link. The tcp link that
 * carried the question is the fallback: a different fabric, a failed ucx connect or no
 * answer cost no second connect.
 *
 * A dial in a fabric waits for the peer's progress thread (its answer, its ucx accept),
 * which may itself be dialing us; so the progress thread never dials in a fabric: each
 * address it must reach gets a short-lived dial thread (chan_dial_start). */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chan_dial {
    struct chan_dial *next;
    struct cx_chan_ctx *ctx;
    pthread_t th;
    int done;
    char addr[CHAN_ADDR_MAX];
};

int chan_fabric_name(const char *in, char out[CHAN_FABRIC_MAX])
{
    out[0] = '\0';
    if (!in || !in[0])
        return 0;
    const char *b = in, *e = in + strlen(in);
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    size_t n = (size_t)(e - b);
    if (n == 0)
        return cx_err_set(EINVAL, "channel runtime: fabric name '%s' is blank", in);
    if (n >= CHAN_FABRIC_MAX)
        return cx_err_set(EINVAL, "channel runtime: fabric name '%.20s...' is longer than %d "
                                  "characters", b, CHAN_FABRIC_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)b[i]) && b[i] != '-' && b[i] != '.' && b[i] != '_')
            return cx_err_set(EINVAL, "channel runtime: fabric name '%.*s' has '%c' "
                                      "(allowed: A-Z a-z 0-9 . _ -)", (int)n, b, b[i]);
    memcpy(out, b, n);
    out[n] = '\0';
    return 0;
}

enum chan_link_choice chan_link_rank(const char *mine, const char *theirs, const char *ucx)
{
    /* shm was tried before (same host); among network links ucx only inside one fabric */
    if (mine && mine[0] && theirs && strcmp(mine, theirs) == 0 && ucx &&
        strncmp(ucx, "ucx://", 6) == 0)
        return CHAN_LINK_UCX;
    return CHAN_LINK_TCP;
}

const char *cx_embedded_chan_ctx_fabric(const struct cx_chan_ctx *ctx) { return ctx->fabric; }
const char *cx_embedded_chan_ctx_fabric_addr(const struct cx_chan_ctx *ctx) { return ctx->ucx_addr; }

/* ---- dial threads ---- */

static void *dial_main(void *arg)
{
    struct chan_dial *d = arg;
    struct cx_chan_ctx *ctx = d->ctx;
    struct chan_peer *p = NULL;
    int rc = chan_peer_get(ctx, d->addr, &p);
    pthread_mutex_lock(&ctx->lock);
    /* peers are freed on the progress thread: p may have broken and gone meanwhile (then
     * its process was removed; dests that still wait are retried: need_connect below) */
    struct chan_peer *q = ctx->peers;
    while (rc == 0 && q && q != p)
        q = q->next;
    if (rc < 0 || q)
        chan_connect_done(ctx, d->addr, rc, p);
    d->done = 1;
    ctx->need_connect = 1; /* the progress thread reaps us (and connects what waited) */
    chan_kick(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return NULL;
}

int chan_dialing(struct cx_chan_ctx *ctx, const char *addr)
{
    int busy = 0;
    for (struct chan_dial **pp = &ctx->dials; *pp;) {
        struct chan_dial *d = *pp;
        if (d->done) { /* its thread has nothing left to do but return */
            *pp = d->next;
            pthread_join(d->th, NULL);
            free(d);
            continue;
        }
        busy |= addr && strcmp(d->addr, addr) == 0;
        pp = &d->next;
    }
    return busy;
}

int chan_dial_start(struct cx_chan_ctx *ctx, const char *addr)
{
    struct chan_dial *d = calloc(1, sizeof *d);
    if (!d)
        return cx_err_set(ENOMEM, "channel: out of memory for a dial");
    d->ctx = ctx;
    snprintf(d->addr, sizeof d->addr, "%s", addr);
    int e = pthread_create(&d->th, NULL, dial_main, d);
    if (e) {
        free(d);
        return cx_err_set(e, "channel: dial thread: %s", strerror(e));
    }
    d->next = ctx->dials;
    ctx->dials = d;
    return 0;
}

void chan_dial_join_all(struct cx_chan_ctx *ctx)
{
    pthread_mutex_lock(&ctx->lock);
    while (ctx->dials) {
        struct chan_dial *d = ctx->dials;
        ctx->dials = d->next;
        pthread_mutex_unlock(&ctx->lock); /* it takes the lock to finish */
        pthread_join(d->th, NULL);
        free(d);
        pthread_mutex_lock(&ctx->lock);
    }
    pthread_mutex_unlock(&ctx->lock);
}
