/* The pipe layer's peer in the microbenchmark suite: NATS core publish/subscribe through a
 * nats-server (started by run.sh), measured with layer_pipe.c's tests (peer_common.h):
 * latency against size (a request answered on a reply subject: NATS's request/reply, as the
 * pipe layer's echo goes over a second pipe), bandwidth with Q outstanding, CPU per message
 * at Q = 16. Like a pipe's writer and reader, both ends reach each other through a server;
 * unlike a pipe, nothing is kept (bench/pipe measures JetStream, which keeps it). The client
 * is bench/pipe's protocol subset (nats_proto.c); the application blocks reading its socket.
 *
 *   peer_nats <host:port> <quick|full> [reps] [hot-spot peers (quick 2, full 4)]
 *
 * The hot-spot (layer_pipe.c's: 1..N echo processes) forks N more echo processes once the
 * pair's tests are done, each subscribed to a subject of its own on a connection of its own;
 * all publish to the one subject the hot node's connection reads. */
#include "nats_proto.h"
#include "peer_common.h"

struct nio { struct nc *c; char out[64]; };

static void die(struct nc *c, const char *what)
{
    fprintf(stderr, "peer_nats: %s: %s\n", what, c ? nc_errmsg(c) : "");
    exit(1);
}

static void n_send(void *ctx, const void *p, size_t n)
{
    struct nio *x = ctx;
    if (nc_pub(x->c, x->out, NULL, p, n) < 0) die(x->c, "publish");
}

static void n_flush(void *ctx)
{
    struct nio *x = ctx;
    if (nc_flush(x->c) < 0) die(x->c, "flush");
}

static long n_recv(void *ctx, void *buf)
{
    struct nio *x = ctx;
    struct nc_msg m;
    int rc = nc_next(x->c, &m, 30000);
    if (rc <= 0) die(x->c, rc == 0 ? "no message for 30 s" : "receive");
    size_t n = m.len < PEER_MAXMSG ? m.len : PEER_MAXMSG;
    memcpy(buf, m.data, n);
    return (long)n;
}

static void open_end(struct nio *x, const char *server, const char *in, const char *out)
{
    if (nc_connect(server, &x->c) < 0) die(x->c, "connect");
    snprintf(x->out, sizeof x->out, "%s", out);
    if (nc_sub(x->c, in, 1) < 0 || nc_flush(x->c) < 0) die(x->c, "subscribe");
}

/* Sends 'C' to subject `to` until an answer comes, then drains the extra answers (the
 * other end subscribes on its own connection, maybe after our first 'C'). */
static void join(struct nio *x, const char *to)
{
    uint8_t c[8] = {'C'};
    struct nc_msg m;
    int got = 0;
    for (int i = 0; i < 100 && !got; i++) {
        if (nc_pub(x->c, to, NULL, c, sizeof c) < 0 || nc_flush(x->c) < 0) die(x->c, "publish");
        got = nc_next(x->c, &m, 100) == 1;
    }
    if (!got) die(x->c, "an echo process did not subscribe");
    while (nc_next(x->c, &m, 200) == 1)
        ;
}

static int echo_process(const char *server, const char *in, const char *out)
{
    struct nio e;
    open_end(&e, server, in, out);
    struct peer_io io = {&e, n_send, n_flush, n_recv};
    peer_serve(&io);
    nc_close(e.c);
    return 0;
}

struct nhot { struct nio x; char ping[16][64]; };

static void nh_send(void *ctx, int j, const void *p, size_t n)
{
    struct nhot *h = ctx;
    if (nc_pub(h->x.c, h->ping[j], NULL, p, n) < 0) die(h->x.c, "publish");
}

static void nh_flush(void *ctx) { n_flush(&((struct nhot *)ctx)->x); }
static long nh_recv(void *ctx, void *buf) { return n_recv(&((struct nhot *)ctx)->x, buf); }

/* The hot-spot with np echo processes, forked now. */
static int hotspot(const char *server, int np, int quick, int reps)
{
    static struct nhot h;
    char pong[64];
    pid_t pid[16];
    snprintf(pong, sizeof pong, "micro.hpong.%d", (int)getpid());
    open_end(&h.x, server, pong, "unused");
    for (int j = 0; j < np; j++) {
        snprintf(h.ping[j], sizeof h.ping[j], "micro.hping.%d.%d", (int)getpid(), j);
        pid[j] = PEER_FORK(echo_process(server, h.ping[j], pong));
        join(&h.x, h.ping[j]); /* one at a time: every answer is this one's */
    }
    struct peer_hot_io io = {&h, nh_send, nh_flush, nh_recv};
    peer_hotspot(&io, np, quick, reps, 16, "pipe",
                 "NATS core: a subject for each echo process, all publish to one subject the hot node reads; "
                 "through nats-server, tcp loopback");
    int bad = peer_reap(pid, np);
    nc_close(h.x.c);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <host:port> <quick|full> [reps] [hot-spot peers (quick 2, full 4)]\n", argv[0]);
        return 2;
    }
    int quick, reps, hot;
    peer_args(argc, argv, 2, &quick, &reps, &hot);
    char ping[64], pong[64];
    snprintf(ping, sizeof ping, "micro.ping.%d", (int)getpid());
    snprintf(pong, sizeof pong, "micro.pong.%d", (int)getpid());
    pid_t pid = PEER_FORK(echo_process(argv[1], ping, pong));
    struct nio x;
    open_end(&x, argv[1], pong, ping);
    join(&x, ping);
    struct peer_io io = {&x, n_send, n_flush, n_recv};
    peer_measure(&io, quick, reps, "pipe", "NATS core pub/sub through nats-server (nothing kept), tcp loopback, blocking socket reads");
    int bad = peer_reap(&pid, 1);
    nc_close(x.c);
    bad |= hot ? hotspot(argv[1], hot, quick, reps) : 0;
    return bad;
}
