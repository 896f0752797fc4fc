/* Which link joins two processes (ARCHITECTURE.md principle 4: the fastest that reaches,
 * and observable). A runtime listens on its advertised address (tcp) and on an abstract
 * Unix socket, the shm rendezvous, named after its host identity and that address:
 *
 *     shm://@conflux-chan/<host>/<advertised address>
 *
 * <host> hashes the kernel's boot id with the network namespace, so the name is the
 * advertisement: a process dialing an address first connects to the name its own host
 * identity gives. Abstract sockets live in the network namespace, so that connect succeeds
 * only when both ends share the host and the namespace, and a success proves it (a process
 * elsewhere cannot answer for the name). Otherwise (refused, or any failure of the shm
 * handshake) the address itself is dialed. The shm connect never waits for the other
 * process (the connector passes the region), so two runtimes may dial each other at once.
 *
 * Inside a fabric (cx_chan_fabric.c) a runtime also listens on ucx, and a dial that ends on
 * tcp asks the peer which fabric it is in before choosing ucx or keeping tcp. */
#define _GNU_SOURCE
#include "channel/cx_chan_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SHM_PREFIX "shm://@conflux-chan/"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The boot id and the network namespace's inode: equal exactly for processes that share
 * the kernel and the namespace. */
static void host_identity(char out[17])
{
    uint64_t h = 0xcbf29ce484222325ULL;
    char boot[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, boot, sizeof boot - 1);
        boot[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    if (!boot[0]) /* no procfs: the hostname is the best we have */
        gethostname(boot, sizeof boot - 1);
    h = fnv(h, boot, strlen(boot));
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0) {
        uint64_t ns[2] = {(uint64_t)st.st_dev, (uint64_t)st.st_ino};
        h = fnv(h, ns, sizeof ns);
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* The rendezvous of the process advertising addr, if it is on this host. 0 or -ENAMETOOLONG. */
static int shm_name(const struct cx_chan_ctx *ctx, const char *addr, char *out, size_t cap)
{
    int n = snprintf(out, cap, SHM_PREFIX "%s/%s", ctx->host, addr);
    return n < 0 || (size_t)n >= cap || n >= 100 ? -ENAMETOOLONG : 0; /* sun_path: 108 */
}

/* In a fabric: listen on ucx on the advertised IP (tcp advertisements only). 0 or -errno. */
static int fabric_setup(struct cx_chan_ctx *ctx)
{
    if (!ctx->fabric[0] || strncmp(ctx->addr, "tcp://", 6) != 0)
        return 0;
    const char *host = ctx->addr + 6;
    const char *colon = strrchr(host, ':');
    char listen[CHAN_ADDR_MAX];
    snprintf(listen, sizeof listen, "ucx://%.*s:0", (int)(colon ? colon - host : (long)strlen(host)), host);
    int rc = cx_listen(listen, &ctx->ucx.ops, &ctx->ucx.l);
    if (rc < 0) {
        ctx->ucx.ops = NULL;
        return cx_err_wrap(rc, "channel runtime: fabric '%s': ucx listener on %s", ctx->fabric,
                           listen);
    }
    snprintf(ctx->ucx_addr, sizeof ctx->ucx_addr, "%s", ctx->ucx.ops->listener_addr(ctx->ucx.l));
    return 0;
}

int chan_link_setup(struct cx_chan_ctx *ctx, const struct cx_chan_ctx_opts *o)
{
    host_identity(ctx->host);
    int frc = fabric_setup(ctx);
    if (frc < 0)
        return frc;
    const char *env = getenv("CONFLUX_CHAN_SHM");
    if ((o && o->tcp_only) || (env && strcmp(env, "0") == 0) ||
        strncmp(ctx->addr, "shm://", 6) == 0)
        return 0;
    char name[CHAN_ADDR_MAX];
    if (shm_name(ctx, ctx->addr, name, sizeof name) < 0)
        return 0; /* an address too long for a socket name: tcp only */
    int rc = cx_listen(name, &ctx->shm.ops, &ctx->shm.l);
    if (rc == -EADDRINUSE) { /* another runtime here advertises the same address */
        ctx->shm.ops = NULL;
        cx_err_clear();
        return 0;
    }
    if (rc < 0) {
        ctx->shm.ops = NULL;
        return cx_err_wrap(rc, "channel runtime: shm rendezvous");
    }
    snprintf(ctx->shm_addr, sizeof ctx->shm_addr, "%s", name);
    return 0;
}

int chan_link_dial(struct cx_chan_ctx *ctx, const char *addr, struct cx_link **out)
{
    char name[CHAN_ADDR_MAX];
    if (ctx->shm.ops && strncmp(addr, "shm://", 6) != 0 &&
        shm_name(ctx, addr, name, sizeof name) == 0 && cx_connect(name, out) == 0)
        return 0;
    cx_err_clear();
    struct cx_link *k;
    int rc = cx_connect(addr, &k);
    if (rc < 0 || !ctx->fabric[0] || strncmp(addr, "tcp://", 6) != 0) {
        if (rc == 0)
            *out = k;
        return rc;
    }
    /* in a fabric: ask before HELLO; the tcp link stays the fallback */
    char fabric[CHAN_FABRIC_MAX], ucx[CHAN_ADDR_MAX];
    struct cx_link *u;
    if (chan_links_ask(ctx, k, CHAN_LINKS_WAIT_MS, fabric, ucx) == 0 &&
        chan_link_rank(ctx->fabric, fabric, ucx) == CHAN_LINK_UCX) {
        if (cx_connect(ucx, &u) == 0) {
            cx_link_close(k); /* the peer drops it: it never said HELLO */
            *out = u;
            return 0;
        }
        fprintf(stderr, "conflux channel: fabric '%s': ucx connect to %s (%s) failed, using "
                        "tcp: %s\n", ctx->fabric, ucx, addr, cx_errmsg());
    }
    cx_err_clear();
    *out = k;
    return 0;
}

int cx_embedded_chan_ctx_link(struct cx_chan_ctx *ctx, const char *addr, char *out, size_t cap)
{
    if (!ctx || !addr || !out || !cap)
        return cx_err_set(EINVAL, "channel: cx_chan_ctx_link needs a runtime, an address and a buffer");
    pthread_mutex_lock(&ctx->lock);
    struct chan_peer *p = chan_peer_find(ctx, addr);
    if (p)
        snprintf(out, cap, "%s", p->kind);
    pthread_mutex_unlock(&ctx->lock);
    return p ? 0 : cx_err_set(ENOENT, "channel: no link to %s", addr);
}
