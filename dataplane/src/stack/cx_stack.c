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

/* Per-link wrapping from its caps: seq -> frag -> rel -> a datagram link (rel numbers its
 * frames in the header's seq, so the caller's rides above it, in the payload, and above
 * frag, which slices it with the rest). */
static int wrap_one(struct cx_link *k, int rel_needed, struct cx_link **out)
{
    struct cx_driver_caps c;
    cx_link_caps(k, &c);
    int rc, rel = rel_needed && (c.flags & CX_CAP_DATAGRAM);
    if (rel && (rc = cx_rel_create(k, 0, &k)) < 0)
        return rc;
    if (c.max_msg && c.max_msg < CX_FRAME_MAX_MSG) {
        if ((rc = cx_frag_create(k, 0, &k)) < 0)
            return rc;
    }
    if (rel && (rc = cx_seq_create(k, &k)) < 0)
        return rc;
    *out = k;
    return 0;
}

static void on_switch(void *arg, int active)
{
    (void)active;
    cx_rel_retransmit_all(arg);
}

int cx_stack_assemble(struct cx_link **links, int n, struct cx_link **out)
{
    if (n < 1 || n > CX_MULTI_MAX)
        return cx_err_set(EINVAL, "stack: %d links (1..%d)", n, CX_MULTI_MAX);
    struct cx_link *w[CX_MULTI_MAX];
    int rc;
    for (int i = 0; i < n; i++)
        if ((rc = wrap_one(links[i], n == 1, &w[i])) < 0)
            return cx_err_wrap(rc, "stack: link %d (%s)", i, links[i]->ops->name);
    if (n == 1) {
        *out = w[0];
        return 0;
    }
    struct cx_link *multi, *rel, *seq;
    if ((rc = cx_multi_create(w, n, &multi)) < 0)
        return rc;
    if ((rc = cx_rel_create(multi, 0, &rel)) < 0) {
        cx_link_close(multi);
        return rc;
    }
    if ((rc = cx_seq_create(rel, &seq)) < 0) {
        cx_link_close(rel);
        return rc;
    }
    cx_multi_on_switch(multi, on_switch, rel);
    *out = seq;
    return 0;
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
