/* The event-channel layer's peer in the microbenchmark suite: ZeroMQ, the way bench/channel
 * uses it (PUB/SUB for the events, PUSH/PULL back), measured with layer_chan.c's tests
 * (peer_common.h): latency against size, bandwidth with Q outstanding, CPU per message at
 * Q = 16. Two processes on loopback TCP; ZeroMQ's I/O thread does the sending and receiving,
 * as the channel runtime's engine thread does, and the application blocks in zmq_recv.
 *
 *   peer_zmq <quick|full> [reps] [hot-spot peers (quick 2, full 4)]
 *
 * The hot-spot (layer_chan.c's: 1..N sink processes) forks N more echo processes once the
 * pair's tests are done: a PUB socket of the hot node's for each, all of them PUSHing into
 * the hot node's one PULL socket.
 *
 * High-water marks are off and the window's answer is the flow control, so nothing is
 * dropped; a lost message shows as a timeout (exit 1), not as a fast number. */
#include "peer_common.h"

#include <zmq.h>

#define TIMEOUT_MS 30000

struct zio { void *out, *in; };

static void die(const char *what)
{
    fprintf(stderr, "peer_zmq: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static void *sock(void *ctx, int type, const char *ep, int bind)
{
    void *s = zmq_socket(ctx, type);
    int zero = 0, tmo = TIMEOUT_MS, linger = 2000; /* 'Q' must get out */
    if (!s) die("zmq_socket");
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (type == ZMQ_SUB) zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    if ((bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) != 0) die(ep);
    return s;
}

static void z_send(void *ctx, const void *p, size_t n)
{
    if (zmq_send(((struct zio *)ctx)->out, p, n, 0) < 0) die("zmq_send");
}

static void z_flush(void *ctx) { (void)ctx; }

static long z_recv(void *ctx, void *buf)
{
    int n = zmq_recv(((struct zio *)ctx)->in, buf, PEER_MAXMSG, 0);
    if (n < 0) die("zmq_recv (no message for 30 s)");
    return n;
}

/* Sends 'C' on out until an answer comes on in (a SUB joins late), then drains the extra
 * answers. */
static void join(void *out, void *in)
{
    uint8_t c[8] = {'C'}, *buf = malloc(PEER_MAXMSG);
    int tmo = 100, got = 0;
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    for (int i = 0; i < 100 && !got; i++) {
        if (zmq_send(out, c, sizeof c, 0) < 0) die("zmq_send");
        got = zmq_recv(in, buf, PEER_MAXMSG, 0) >= 0;
    }
    if (!got) die("an echo process did not join");
    while (zmq_recv(in, buf, PEER_MAXMSG, 0) >= 0)
        ;
    tmo = TIMEOUT_MS;
    zmq_setsockopt(in, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    free(buf);
}

static int echo_process(const char *push_to, const char *sub_to)
{
    void *c2 = zmq_ctx_new();
    struct zio e = {sock(c2, ZMQ_PUSH, push_to, 0), sock(c2, ZMQ_SUB, sub_to, 0)};
    struct peer_io io = {&e, z_send, z_flush, z_recv};
    peer_serve(&io);
    zmq_close(e.out), zmq_close(e.in), zmq_ctx_term(c2);
    return 0;
}

struct zhot { void *pub[16], *pull; };

static void zh_send(void *ctx, int j, const void *p, size_t n)
{
    if (zmq_send(((struct zhot *)ctx)->pub[j], p, n, 0) < 0) die("zmq_send");
}

static long zh_recv(void *ctx, void *buf)
{
    int n = zmq_recv(((struct zhot *)ctx)->pull, buf, PEER_MAXMSG, 0);
    if (n < 0) die("zmq_recv (no message for 30 s)");
    return n;
}

/* The hot-spot with np echo processes, forked now (each with a fresh context). */
static int hotspot(void *ctx, int np, int quick, int reps)
{
    struct zhot h;
    char ep[64], pull[64];
    size_t l = sizeof pull;
    pid_t pid[16];
    h.pull = sock(ctx, ZMQ_PULL, "tcp://127.0.0.1:*", 1);
    zmq_getsockopt(h.pull, ZMQ_LAST_ENDPOINT, pull, &l);
    for (int j = 0; j < np; j++) {
        h.pub[j] = sock(ctx, ZMQ_PUB, "tcp://127.0.0.1:*", 1);
        l = sizeof ep;
        zmq_getsockopt(h.pub[j], ZMQ_LAST_ENDPOINT, ep, &l);
        pid[j] = PEER_FORK(echo_process(pull, ep));
        join(h.pub[j], h.pull); /* one at a time: every answer is this one's */
    }
    struct peer_hot_io io = {&h, zh_send, z_flush, zh_recv};
    peer_hotspot(&io, np, quick, reps, 64, "channel",
                 "ZeroMQ: a PUB socket to each echo process, all PUSH into one PULL; tcp loopback, blocking zmq_recv");
    int bad = peer_reap(pid, np);
    for (int j = 0; j < np; j++) zmq_close(h.pub[j]);
    zmq_close(h.pull);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s <quick|full> [reps] [hot-spot peers (quick 2, full 4)]\n", argv[0]);
        return 2;
    }
    int quick, reps, hot;
    peer_args(argc, argv, 1, &quick, &reps, &hot);
    void *ctx = zmq_ctx_new();
    struct zio z = {sock(ctx, ZMQ_PUB, "tcp://127.0.0.1:*", 1), sock(ctx, ZMQ_PULL, "tcp://127.0.0.1:*", 1)};
    char pub[64], pull[64];
    size_t l1 = sizeof pub, l2 = sizeof pull;
    zmq_getsockopt(z.out, ZMQ_LAST_ENDPOINT, pub, &l1);
    zmq_getsockopt(z.in, ZMQ_LAST_ENDPOINT, pull, &l2);
    pid_t pid = PEER_FORK(echo_process(pull, pub)); /* the sink: a fresh context of its own */
    join(z.out, z.in); /* a SUB joins late */
    struct peer_io io = {&z, z_send, z_flush, z_recv};
    peer_measure(&io, quick, reps, "channel", "ZeroMQ PUB/SUB + PUSH/PULL, tcp loopback, I/O thread, blocking zmq_recv");
    int bad = peer_reap(&pid, 1);
    bad |= hot ? hotspot(ctx, hot, quick, reps) : 0;
    zmq_close(z.out), zmq_close(z.in), zmq_ctx_term(ctx);
    return bad;
}
