/* Stack planning and assembly; see cx_stack.h. */
#include "stack/cx_stack.h"

#include "common/cx_error.h"
#include "stack/cx_frag.h"
#include "stack/cx_rel.h"
#include "stack/cx_seq.h"

#include <stdio.h>
#include <string.h>

/* cross_cluster: the only schemes used between clusters (the WAN): TLS with mutual
 * authentication. Inside a cluster tls ranks last (a fallback when tcp is not offered). */
static const struct { const char *scheme; int rank; int same_node, same_fabric, cross_cluster; } schemes[] = {
    {"shm", 10, 1, 0, 0}, {"ucx", 20, 0, 1, 0}, {"dpdk", 25, 0, 1, 0}, {"tcp", 30, 0, 0, 0},
    {"udp", 35, 0, 0, 0}, {"tls", 40, 0, 0, 1},
};

static int lookup(const char *addr)
{
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++) {
        size_t n = strlen(schemes[i].scheme);
        if (addr && strncmp(addr, schemes[i].scheme, n) == 0 && strncmp(addr + n, "://", 3) == 0)
            return (int)i;
    }
    return -1;
}

int cx_stack_scheme_rank(const char *addr)
{
    int i = lookup(addr);
    return i < 0 ? -1 : schemes[i].rank;
}

static int has_scheme(const struct cx_stack_adv *a, int s)
{
    for (int i = 0; i < a->naddr; i++)
        if (lookup(a->addrs[i]) == s)
            return 1;
    return 0;
}

int cx_stack_plan(const struct cx_stack_adv *local, const struct cx_stack_adv *remote,
                  const char *out[CX_MULTI_MAX])
{
    int n = 0;
    int same_node = local->node && remote->node && *local->node && !strcmp(local->node, remote->node);
    int same_fabric = local->fabric && remote->fabric && *local->fabric &&
                      !strcmp(local->fabric, remote->fabric);
    /* unknown ("") clusters count as the same: a cluster name is only told across sites */
    int same_cluster = !(local->cluster && remote->cluster && *local->cluster && *remote->cluster &&
                         strcmp(local->cluster, remote->cluster));
    for (size_t s = 0; s < sizeof schemes / sizeof schemes[0] && n < CX_MULTI_MAX; s++) {
        if (!same_cluster && !schemes[s].cross_cluster)
            continue;
        if (schemes[s].same_node && !same_node)
            continue;
        if (schemes[s].same_fabric && !same_fabric)
            continue;
        if (!has_scheme(local, (int)s))
            continue;
        char probe[16];
        snprintf(probe, sizeof probe, "%s://", schemes[s].scheme);
        if (!cx_driver_for(probe))
            continue; /* not built into this library */
        for (int i = 0; i < remote->naddr; i++)
            if (lookup(remote->addrs[i]) == (int)s) {
                out[n++] = remote->addrs[i];
                break;
            }
    }
    cx_err_clear();
    if (n == 0)
        return cx_err_set(EHOSTUNREACH, "stack: no common link (node '%s' vs '%s', fabric '%s' vs '%s'%s)",
                          local->node ? local->node : "", remote->node ? remote->node : "",
                          local->fabric ? local->fabric : "", remote->fabric ? remote->fabric : "",
                          same_cluster ? "" : "; other cluster: only tls:// crosses clusters");
    return n;
}

static void on_switch(void *arg, int active)
{
    (void)active;
    cx_rel_retransmit_all(arg);
}

/* Frees the filters of a half-built stack, top down, stopping at the caller's links (one of
 * them may itself be a filter the caller built): they are closed by no one here. */
static void unbuild(struct cx_link *k, struct cx_link *const *links, int n)
{
    while (k) {
        for (int i = 0; i < n; i++)
            if (k == links[i])
                return;
        if (k->ops == &cx_frag_ops) {
            k = cx_frag_release(k);
        } else if (k->ops == &cx_rel_ops) {
            k = cx_rel_release(k);
        } else {
            cx_multi_release(k); /* the only other filter built here, always the lowest */
            return;
        }
    }
}

/* The layering. One link: seq -> frag -> rel -> a datagram link (rel numbers its frames in
 * the header's seq, so the caller's rides above it, in the payload, and above frag, which
 * slices it with the rest); frag alone over a reliable link with a small max_msg; nothing
 * over a reliable one.
 *
 * Several links: seq -> (frag ->) rel -> multi -> the links as they are. The one rel is what
 * makes a failover lose and repeat nothing: it numbers every frame end to end, keeps each
 * until the peer's rel acknowledges it, and on a switch resends the unacknowledged over
 * the new link, the receiving rel dropping what it already had. It is also the reliability
 * a datagram member needs: it looks at the active link's caps on every progress, so it runs
 * retransmission timers while sends go over a datagram link (loss, duplicates, reordering
 * handled as on a single one) and none over a reliable one. Fragmentation goes above it,
 * cut to the smallest max_msg among the links: rel then carries, acknowledges and resends
 * whole fragments, each fitting whichever link carries it, before or after a switch (a
 * fragment cut for the old link resent over a smaller one would not fit), and frag gets
 * them exactly once and in order, which reassembly needs. The other way round, frag on
 * each datagram link with nothing under it, fails the link at the first lost fragment
 * (fragments out of order); a rel under each datagram member's frag would not do either:
 * it would take over seq, ack and the ACK frames the rel above needs end to end. The cost:
 * with a small-MTU link in the set, large messages go in fragments on every link. */
int cx_stack_assemble(struct cx_link **links, int n, struct cx_link **out)
{
    if (n < 1 || n > CX_MULTI_MAX)
        return cx_err_set(EINVAL, "stack: %d links (1..%d)", n, CX_MULTI_MAX);
    struct cx_link *in[CX_MULTI_MAX]; /* a copy: out may alias links[0] */
    size_t smallest = CX_FRAME_MAX_MSG;
    int datagram = 0;
    for (int i = 0; i < n; i++) {
        if (!(in[i] = links[i]))
            return cx_err_set(EINVAL, "stack: link %d is NULL", i);
        for (int j = 0; j < i; j++)
            if (in[j] == in[i])
                return cx_err_set(EINVAL, "stack: link %d given twice (%d)", i, j);
        struct cx_driver_caps c;
        cx_link_caps(in[i], &c);
        datagram |= (c.flags & CX_CAP_DATAGRAM) != 0;
        if (c.max_msg && c.max_msg < smallest)
            smallest = c.max_msg;
    }
    int want_rel = n > 1 || datagram, rc = 0;
    struct cx_link *k = n == 1 ? in[0] : NULL, *multi = NULL, *rel = NULL;
    if (n > 1 && (rc = cx_multi_create(in, n, &multi)) < 0)
        goto fail;
    k = multi ? multi : k;
    if (want_rel && (rc = cx_rel_create(k, 0, &rel)) < 0)
        goto fail;
    k = rel ? rel : k;
    if (smallest < CX_FRAME_MAX_MSG && (rc = cx_frag_create(k, smallest, &k)) < 0)
        goto fail;
    if (want_rel && (rc = cx_seq_create(k, &k)) < 0)
        goto fail;
    if (multi)
        cx_multi_on_switch(multi, on_switch, rel);
    *out = k;
    return 0;
fail: /* k: the top of what was built (or a caller's link); the links stay the caller's */
    unbuild(k, in, n);
    return cx_err_wrap(rc, "stack: over %d link(s) (%s%s)", n, in[0]->ops->name,
                       n > 1 ? ", ..." : "");
}

struct cx_link *cx_stack_rel(struct cx_link *stack)
{
    if (stack->ops != &cx_seq_ops)
        return NULL; /* the builder put no rel in (or did not build this link) */
    struct cx_link *k = cx_seq_lower(stack);
    if (k->ops == &cx_frag_ops)
        k = cx_frag_lower(k);
    return k->ops == &cx_rel_ops ? k : NULL;
}

struct cx_link *cx_stack_multi(struct cx_link *stack)
{
    struct cx_link *rel = cx_stack_rel(stack);
    struct cx_link *lower = rel ? cx_rel_lower(rel) : NULL;
    return lower && lower->ops == &cx_multi_ops ? lower : NULL;
}
