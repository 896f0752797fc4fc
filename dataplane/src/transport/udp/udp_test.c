/* The udp driver on loopback: the conformance suite over the assembled stack (udp -> rel ->
 * frag -> seq, see udp_test_stack.h), then the driver's own behaviour: datagram caps and limits,
 * several peers on one port, the handshake's duplicate handling, a closed peer, a silent
 * peer, and fragmentation over small datagrams. The lossy-network test across two network
 * namespaces is udp_netem_test.c. */
#include "transport/cx_addr.h"
#include "udp_test_stack.h"

#include <arpa/inet.h>
#include <sys/socket.h>

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "udp://127.0.0.1:0"); }

CX_DECLARE_TRANSPORT_TESTS(udp_stack, &udp_stack_ops, mkaddr, NULL)

/* A raw udp pair (no stack). */
static int raw_pair(struct cx_link **a, struct cx_link **b)
{
    return cx_conf_pair(&cx_udp_ops, mkaddr, a, b);
}

struct got { int n; size_t len; struct cx_frame_hdr h; uint8_t first; };
static void on_got(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct got *g = arg;
    g->n++;
    g->len = n;
    g->h = *h;
    g->first = n ? *(const uint8_t *)p : 0;
}

static int wait_got(struct cx_link *rx, struct cx_link *tx, struct got *g, int want)
{
    struct got dummy = {0};
    double t0 = cx_conf_now();
    while (g->n < want && cx_conf_now() - t0 < 5) {
        int rc = cx_link_progress(rx, on_got, g, 64);
        if (rc < 0)
            return rc;
        if (tx && (rc = cx_link_progress(tx, on_got, &dummy, 64)) < 0)
            return rc;
    }
    return g->n;
}

CX_TEST(udp_bad_address)
{
    struct cx_listener *l;
    struct cx_link *k;
    CX_CHECK_EQ_INT(cx_udp_ops.listen("udp://127.0.0.1", &l), -EINVAL);
    CX_CHECK_EQ_INT(cx_udp_ops.listen("udp://127.0.0.1:99999", &l), -EINVAL);
    CX_CHECK_EQ_INT(cx_udp_ops.listen("tcp://127.0.0.1:0", &l), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "udp://host:port") != NULL);
    CX_CHECK_EQ_INT(cx_udp_ops.connect("udp://no-such-host.invalid:1", &k), -EINVAL);
    CX_CHECK(cx_driver_for("udp://127.0.0.1:1") == &cx_udp_ops);
}

CX_TEST(udp_port_in_use_refused)
{
    struct cx_listener *l, *l2;
    CX_CONF_CHECK_RC(cx_udp_ops.listen("udp://127.0.0.1:0", &l));
    char again[96];
    snprintf(again, sizeof again, "%s", cx_udp_ops.listener_addr(l));
    int rc = cx_udp_ops.listen(again, &l2);
    if (rc == 0)
        cx_udp_ops.listener_close(l2);
    cx_udp_ops.listener_close(l);
    CX_CHECK_EQ_INT(rc, -EADDRINUSE);
    CX_CHECK(strstr(cx_errmsg(), "in use") != NULL);
}

CX_TEST(udp_datagram_caps_and_limits)
{
    struct cx_link *a = NULL, *b = NULL;
    CX_CONF_CHECK_RC(raw_pair(&a, &b));
    struct cx_driver_caps c;
    cx_link_caps(a, &c);
    CX_CHECK(c.flags & CX_CAP_DATAGRAM);
    CX_CHECK(!(c.flags & CX_CAP_RELIABLE));
    CX_CHECK_EQ_INT(c.max_msg, CX_UDP_MAX_MSG); /* loopback's MTU is 64 KiB: the IPv4 limit rules */
    static uint8_t buf[CX_UDP_MAX_MSG + 1];
    memset(buf, 0xAB, sizeof buf);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 9, .seq = 77, .format = 5};
    struct iovec v = {buf, CX_UDP_MAX_MSG + 1};
    CX_CHECK_EQ_INT(cx_link_send(a, &h, &v, 1), -EMSGSIZE);
    CX_CHECK(strstr(cx_errmsg(), "fragmentation") != NULL);
    v.iov_len = CX_UDP_MAX_MSG;
    CX_CONF_CHECK_RC(cx_link_send(a, &h, &v, 1));
    struct got g = {0};
    CX_CHECK_EQ_INT(wait_got(b, a, &g, 1), 1);
    CX_CHECK_EQ_INT(g.len, CX_UDP_MAX_MSG);
    CX_CHECK_EQ_INT(g.h.seq, 77); /* the header crosses untouched */
    CX_CHECK_EQ_INT(g.h.channel, 9);
    CX_CHECK_EQ_INT(g.h.format, 5);
    CX_CHECK_EQ_INT(g.first, 0xAB);
    /* a caller's own CTRL frame on channel 0 is delivered (only the driver's token is ours) */
    struct cx_frame_hdr ctl = {.type = CX_FRAME_CTRL, .channel = 0, .format = 1};
    v.iov_len = 16;
    CX_CONF_CHECK_RC(cx_link_send(b, &ctl, &v, 1));
    g = (struct got){0};
    CX_CHECK_EQ_INT(wait_got(a, b, &g, 1), 1);
    CX_CHECK_EQ_INT(g.h.type, CX_FRAME_CTRL);
    /* what assemble builds on it: reliable, ordered, any size */
    struct cx_link *s;
    CX_CONF_CHECK_RC(cx_stack_assemble(&a, 1, &s));
    cx_link_caps(s, &c);
    CX_CHECK(c.flags & CX_CAP_RELIABLE);
    CX_CHECK(c.flags & CX_CAP_ORDERED);
    CX_CHECK(!(c.flags & CX_CAP_DATAGRAM));
    CX_CHECK_EQ_INT(c.max_msg, CX_FRAME_MAX_MSG - 8); /* 8 bytes carry the caller's seq */
    CX_CHECK(cx_stack_rel(s) != NULL);
    cx_link_close(s);
    cx_link_close(b);
}

CX_TEST(udp_several_peers_one_port)
{
    enum { P = 4 };
    struct cx_listener *l;
    CX_CONF_CHECK_RC(cx_udp_ops.listen("udp://127.0.0.1:0", &l));
    struct cx_link *cli[P], *srv[P];
    for (int i = 0; i < P; i++) {
        struct cx_conf_conn c = {.ops = &cx_udp_ops, .addr = cx_udp_ops.listener_addr(l)};
        pthread_t th;
        pthread_create(&th, NULL, cx_conf_connector, &c);
        int rc = cx_udp_ops.accept(l, 5000, &srv[i]);
        pthread_join(th, NULL);
        CX_CONF_CHECK_RC(rc);
        CX_CONF_CHECK_RC(c.rc);
        cli[i] = c.link;
    }
    cx_udp_ops.listener_close(l); /* accepted links outlive their listener */
    /* each client sends its index; each accepted link must see only its own peer */
    for (int r = 0; r < 50; r++)
        for (int i = 0; i < P; i++) {
            uint8_t x = (uint8_t)i;
            struct iovec v = {&x, 1};
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = (uint64_t)r};
            CX_CONF_CHECK_RC(cx_link_send(cli[i], &h, &v, 1));
        }
    for (int i = 0; i < P; i++) {
        struct got g = {0};
        int bad = 0;
        double t0 = cx_conf_now();
        while (g.n < 50 && cx_conf_now() - t0 < 5) {
            uint8_t before = (uint8_t)g.n;
            CX_CONF_CHECK_RC(cx_link_progress(srv[i], on_got, &g, 64));
            if (g.n != before && g.first != i)
                bad++;
        }
        CX_CHECK_EQ_INT(g.n, 50); /* loopback with deep buffers: nothing is lost */
        CX_CHECK_EQ_INT(bad, 0);
        /* and the answer goes back to the right client */
        uint8_t x = (uint8_t)(100 + i);
        struct iovec v = {&x, 1};
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
        CX_CONF_CHECK_RC(cx_link_send(srv[i], &h, &v, 1));
        struct got back = {0};
        CX_CHECK_EQ_INT(wait_got(cli[i], NULL, &back, 1), 1);
        CX_CHECK_EQ_INT(back.first, 100 + i);
    }
    for (int i = 0; i < P; i++) {
        struct cx_udp_stats st;
        CX_CONF_CHECK_RC(cx_udp_stats(srv[i], &st));
        CX_CHECK_EQ_INT(st.received, 50);
        cx_link_close(cli[i]);
        cx_link_close(srv[i]);
    }
}

CX_TEST(udp_listen_on_any_address)
{
    struct cx_listener *l;
    CX_CONF_CHECK_RC(cx_udp_ops.listen("udp://0.0.0.0:0", &l));
    const char *any = cx_udp_ops.listener_addr(l);
    char lo[64];
    snprintf(lo, sizeof lo, "udp://127.0.0.1:%s", strrchr(any, ':') + 1);
    const char *targets[2] = {lo, any}; /* by a local address, and by 0.0.0.0 itself */
    for (int i = 0; i < 2; i++) {
        struct cx_conf_conn c = {.ops = &cx_udp_ops, .addr = targets[i]};
        pthread_t th;
        pthread_create(&th, NULL, cx_conf_connector, &c);
        struct cx_link *a = NULL;
        int rc = cx_udp_ops.accept(l, 5000, &a);
        pthread_join(th, NULL);
        CX_CONF_CHECK_RC(rc);
        CX_CONF_CHECK_RC(c.rc);
        uint8_t x = 7;
        struct iovec v = {&x, 1};
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
        CX_CONF_CHECK_RC(cx_link_send(c.link, &h, &v, 1));
        struct got g = {0};
        CX_CHECK_EQ_INT(wait_got(a, NULL, &g, 1), 1);
        CX_CONF_CHECK_RC(cx_link_send(a, &h, &v, 1)); /* the answer comes from the right address */
        struct got back = {0};
        CX_CHECK_EQ_INT(wait_got(c.link, NULL, &back, 1), 1);
        cx_link_close(a);
        cx_link_close(c.link);
    }
    cx_udp_ops.listener_close(l);
}

/* A hand-made HELLO, as a peer would send it. */
static void hello(int fd, uint64_t nonce)
{
    uint8_t d[CX_FRAME_HDR_SIZE + 16] = {0};
    struct cx_frame_hdr h = {.type = CX_FRAME_CTRL, .format = CX_UDP_CTRL_TOKEN, .length = 16, .msg_length = 16};
    cx_frame_encode(&h, d);
    d[CX_FRAME_HDR_SIZE] = 1;     /* HELLO */
    d[CX_FRAME_HDR_SIZE + 1] = 1; /* version */
    memcpy(d + CX_FRAME_HDR_SIZE + 8, &nonce, 8); /* little-endian host */
    send(fd, d, sizeof d, 0);
}
static int welcomes(int fd, int wait_ms)
{
    int n = 0;
    uint8_t d[256];
    double t0 = cx_conf_now();
    while (cx_conf_now() - t0 < wait_ms / 1000.0) {
        ssize_t r = recv(fd, d, sizeof d, MSG_DONTWAIT);
        if (r == CX_FRAME_HDR_SIZE + 16 && d[CX_FRAME_HDR_SIZE] == 2)
            n++;
        if (r < 0)
            usleep(1000);
    }
    return n;
}

CX_TEST(udp_handshake_duplicates)
{
    struct cx_listener *l;
    CX_CONF_CHECK_RC(cx_udp_ops.listen("udp://127.0.0.1:0", &l));
    struct sockaddr_in sa;
    CX_CONF_CHECK_RC(cx_addr_inet(cx_udp_ops.listener_addr(l) + 6, &sa));
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CX_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    hello(fd, 42);
    hello(fd, 42); /* duplicated on the way (netem does that), both queued at the listener */
    struct cx_link *k, *k2 = NULL;
    CX_CONF_CHECK_RC(cx_udp_ops.accept(l, 2000, &k));
    int rc = cx_udp_ops.accept(l, 200, &k2);
    CX_CHECK_EQ_INT(rc, -ETIMEDOUT); /* the duplicate made no second link */
    CX_CHECK_EQ_INT(welcomes(fd, 50), 1);
    hello(fd, 42); /* our WELCOME was "lost": the peer repeats HELLO; the accepted link answers */
    struct got g = {0};
    for (int i = 0; i < 20; i++) {
        CX_CONF_CHECK_RC(cx_link_progress(k, on_got, &g, 16));
        usleep(1000);
    }
    CX_CHECK_EQ_INT(g.n, 0); /* control frames are never delivered */
    CX_CHECK_EQ_INT(welcomes(fd, 50), 1);
    struct cx_udp_stats st;
    cx_udp_stats(k, &st);
    CX_CHECK(st.ctrl >= 1);
    close(fd);
    cx_link_close(k);
    cx_udp_ops.listener_close(l);
}

CX_TEST(udp_closed_peer_detected)
{
    struct cx_link *a = NULL, *b = NULL;
    CX_CONF_CHECK_RC(raw_pair(&a, &b));
    cx_link_close(a); /* sends BYE */
    struct got g = {0};
    int rc = 0;
    double t0 = cx_conf_now();
    while (rc >= 0 && cx_conf_now() - t0 < 2)
        rc = cx_link_progress(b, on_got, &g, 16);
    CX_CHECK_EQ_INT(rc, -ECONNRESET);
    CX_CHECK(strstr(cx_errmsg(), "closed") != NULL);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    CX_CHECK(cx_link_send(b, &h, NULL, 0) < 0);
    cx_link_close(b);
}

CX_TEST(udp_silent_peer_times_out)
{
    setenv("CONFLUX_UDP_PEER_TIMEOUT_MS", "1000", 1);
    struct cx_link *a = NULL, *b = NULL;
    int prc = raw_pair(&a, &b);
    unsetenv("CONFLUX_UDP_PEER_TIMEOUT_MS");
    CX_CONF_CHECK_RC(prc);
    /* b's process is alive (its port answers no ICMP) but never runs progress: silent */
    struct got g = {0};
    int rc = 0;
    double t0 = cx_conf_now();
    while (rc >= 0 && cx_conf_now() - t0 < 8) {
        rc = cx_link_progress(a, on_got, &g, 16);
        usleep(2000);
    }
    double took = cx_conf_now() - t0;
    fprintf(stderr, "  silent peer detected after %.2f s: %s\n", took, cx_errmsg());
    CX_CHECK_EQ_INT(rc, -ECONNRESET);
    /* 0.25 s of silence, then 1 s of unanswered pings; the upper bound leaves a loaded
     * machine room (the peer timeout is the point, not the scheduler) */
    CX_CHECK(took > 1.2 && took < 6.0);
    CX_CHECK(strstr(cx_errmsg(), "pings unanswered") != NULL);
    /* an answering peer is not timed out: pings are answered by b's progress */
    cx_link_close(a);
    cx_link_close(b);
    setenv("CONFLUX_UDP_PEER_TIMEOUT_MS", "1000", 1);
    prc = raw_pair(&a, &b);
    unsetenv("CONFLUX_UDP_PEER_TIMEOUT_MS");
    CX_CONF_CHECK_RC(prc);
    t0 = cx_conf_now();
    while (cx_conf_now() - t0 < 1.6) {
        CX_CONF_CHECK_RC(cx_link_progress(a, on_got, &g, 16));
        CX_CONF_CHECK_RC(cx_link_progress(b, on_got, &g, 16));
        usleep(2000);
    }
    struct cx_udp_stats st;
    cx_udp_stats(a, &st);
    CX_CHECK(st.pings >= 3); /* pinged every 0.25 s of silence, answered every time */
    CX_CHECK_EQ_INT(g.n, 0);
    cx_link_close(a);
    cx_link_close(b);
}

/* Small datagrams force fragmentation under rel on loopback too. */
CX_TEST(udp_stack_small_datagrams_fragment)
{
    setenv("CONFLUX_UDP_MAX_MSG", "1000", 1);
    struct cx_link *a = NULL, *b = NULL;
    int prc = cx_conf_pair(&udp_stack_ops, mkaddr, &a, &b);
    unsetenv("CONFLUX_UDP_MAX_MSG");
    CX_CONF_CHECK_RC(prc);
    enum { N = 3000 };
    static uint8_t buf[9000];
    struct cx_conf_rx rx = {0};
    uint64_t sent = 0, nothing[2];
    double t0 = cx_conf_now();
    while (rx.next < N && cx_conf_now() - t0 < 15) {
        for (int i = 0; i < 8 && sent < N; i++) CX_CONF_CHECK_RC(cx_conf_send_seq(a, sent++, buf));
        CX_CONF_CHECK_RC(cx_link_progress(a, cx_conf_count, nothing, 64));
        CX_CONF_CHECK_RC(cx_link_progress(b, cx_conf_on_msg, &rx, 64));
    }
    CX_CHECK_EQ_INT(rx.bad, 0);
    CX_CHECK_EQ_INT(rx.next, N);
    cx_link_close(a);
    cx_link_close(b);
}

CX_TEST_MAIN()
