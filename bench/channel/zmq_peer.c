/* ZeroMQ pub/sub peer for the event-channel benchmark (bench_common.h for the method).
 *
 *   zmq_peer source <pub_port> <pull_port> [--quick | --lat-n N --bw-bytes N --size N]
 *   zmq_peer sink <pub_port> <pull_port>
 *
 * The source binds a PUB socket (events) and a PULL socket (replies and acks) on
 * 127.0.0.1; the sink connects a SUB (subscribed to everything) and a PUSH. Two processes
 * on loopback TCP. The first byte of each event says what it is ('E' echo it back, 'B'
 * count it and ack every window, 'S' sync, 'Q' quit); the source prints the JSON lines.
 * PUB drops on a full queue (and its queue accounting lags by up to half the high-water
 * mark), so the high-water marks are off and the window's ack is the flow control: at most
 * one window is queued, nothing is dropped, and a lost event would show as a timeout, not
 * as a fast number.
 */
#include "bench_common.h"

#include <errno.h>
#include <zmq.h>

#define TIMEOUT_MS 30000

static void die(const char *what)
{
    fprintf(stderr, "zmq_peer: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

static void *sock(void *ctx, int type, const char *fmt, int port, int bind)
{
    char ep[64];
    snprintf(ep, sizeof ep, fmt, port);
    void *s = zmq_socket(ctx, type);
    int hwm = 0, tmo = TIMEOUT_MS, linger = 2000; /* 'Q' must get out */
    if (!s)
        die("zmq_socket");
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (type == ZMQ_SUB)
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    if ((bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) != 0)
        die(ep);
    return s;
}

static void send_buf(void *s, const void *b, size_t n)
{
    if (zmq_send(s, b, n, 0) != (int)n)
        die("zmq_send");
}

/* Receives one message into m (initialised by the caller); returns its size. */
static long counted; /* sink: 'B' events so far, for the timeout message */

static size_t recv_msg(void *s, zmq_msg_t *m)
{
    int n = zmq_msg_recv(m, s, 0);
    if (n < 0 && counted)
        fprintf(stderr, "zmq_peer: sink has %ld window events\n", counted);
    if (n < 0)
        die(zmq_errno() == EAGAIN ? "receive timed out (an event was lost?)" : "zmq_msg_recv");
    return (size_t)n;
}

static int run_sink(void *ctx, int pub_port, int pull_port)
{
    void *sub = sock(ctx, ZMQ_SUB, "tcp://127.0.0.1:%d", pub_port, 0);
    void *push = sock(ctx, ZMQ_PUSH, "tcp://127.0.0.1:%d", pull_port, 0);
    int synced = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        size_t n = recv_msg(sub, &m);
        char type = n ? *(const char *)zmq_msg_data(&m) : '?';
        if (type == 'E') {
            if (zmq_msg_send(&m, push, 0) < 0) /* zero-copy echo of the same event */
                die("echo");
            continue;
        }
        zmq_msg_close(&m);
        if (type == 'B' && ++counted % BENCH_WINDOW == 0) {
            send_buf(push, "A", 1);
        } else if (type == 'S' && !synced) {
            synced = 1;
            send_buf(push, "R", 1);
        } else if (type == 'Q') {
            break;
        }
    }
    zmq_close(sub);
    zmq_close(push);
    return 0;
}

static void await(void *pull, char want)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    size_t n = recv_msg(pull, &m);
    if (n < 1 || *(const char *)zmq_msg_data(&m) != want) {
        fprintf(stderr, "zmq_peer: expected '%c', got %zu bytes\n", want, n);
        exit(1);
    }
    zmq_msg_close(&m);
}

static int run_source(void *ctx, int pub_port, int pull_port, const struct bench_opts *o)
{
    void *pub = sock(ctx, ZMQ_PUB, "tcp://127.0.0.1:%d", pub_port, 1);
    void *pull = sock(ctx, ZMQ_PULL, "tcp://127.0.0.1:%d", pull_port, 1);
    unsigned char *buf = bench_buffer();
    /* PUB/SUB drops what is sent before the subscription arrives: repeat a sync event
     * until the sink answers. */
    int tmo = 10;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    for (int i = 0;; i++) {
        if (i > TIMEOUT_MS / tmo) {
            fprintf(stderr, "zmq_peer: no sink after %d ms\n", TIMEOUT_MS);
            return 1;
        }
        send_buf(pub, "S", 1);
        char r;
        if (zmq_recv(pull, &r, 1, 0) == 1 && r == 'R')
            break;
    }
    tmo = TIMEOUT_MS;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &tmo, sizeof tmo);

    for (int si = 0; si < BENCH_NSIZES; si++) {
        size_t size = bench_sizes[si];
        if (o->only && o->only != size)
            continue;
        long n = bench_lat_iters(o, size);
        double *rtt = malloc(sizeof *rtt * (size_t)n);
        buf[0] = 'E';
        for (long i = -BENCH_WARMUP; i < n; i++) {
            double t0 = bench_now_us();
            send_buf(pub, buf, size);
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (recv_msg(pull, &m) != size) {
                fprintf(stderr, "zmq_peer: echo of the wrong size\n");
                return 1;
            }
            zmq_msg_close(&m);
            if (i >= 0)
                rtt[i] = bench_now_us() - t0;
        }
        bench_print_latency("zmq", size, rtt, n);
        free(rtt);

        long windows = bench_bw_windows(o, size);
        buf[0] = 'B';
        for (int w = 0; w < 2; w++) { /* warm-up windows */
            for (int k = 0; k < BENCH_WINDOW; k++)
                send_buf(pub, buf, size);
            await(pull, 'A');
        }
        double t0 = bench_now_us();
        for (long w = 0; w < windows; w++) {
            for (int k = 0; k < BENCH_WINDOW; k++)
                send_buf(pub, buf, size);
            await(pull, 'A');
        }
        bench_print_bandwidth("zmq", size, windows * BENCH_WINDOW, bench_now_us() - t0);
    }
    send_buf(pub, "Q", 1);
    free(buf);
    zmq_close(pub);
    zmq_close(pull);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    if (argc < 4 || (strcmp(argv[1], "source") && strcmp(argv[1], "sink")) ||
        bench_parse(argc, argv, 4, &o) < 0) {
        fprintf(stderr, "usage: %s source|sink <pub_port> <pull_port> [--quick | --lat-n N "
                        "--bw-bytes N --size N]\n", argv[0]);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    int rc = !strcmp(argv[1], "sink") ? run_sink(ctx, atoi(argv[2]), atoi(argv[3]))
                                      : run_source(ctx, atoi(argv[2]), atoi(argv[3]), &o);
    zmq_ctx_term(ctx);
    return rc;
}
