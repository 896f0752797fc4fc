/* The tcp driver through the conformance suite, on loopback. */
#include "transport/conformance.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "tcp://127.0.0.1:0"); }

CX_DECLARE_TRANSPORT_TESTS(tcp, &cx_tcp_ops, mkaddr, NULL)

CX_TEST(tcp_bad_address)
{
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1", &l), -EINVAL);
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1:99999", &l), -EINVAL);
    CX_CHECK(cx_driver_for("tcp://127.0.0.1:1") == &cx_tcp_ops);
    CX_CHECK(cx_driver_for("carrier-pigeon://x") == NULL);
}

static void count_frame(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    (void)payload;
    int *n = arg;
    if (h->type == CX_FRAME_DATA && h->channel == 5 && len == 4)
        (*n)++;
}

/* Only in-memory links may leave the header check out (cx_frame.h): a tcp peer that sends
 * a header with CX_FRAME_F_UNCHECKED breaks the link with -EPROTO, after the checked frame
 * before it was delivered. The peer is a raw socket writing the bytes itself. */
CX_TEST(tcp_refuses_a_header_without_its_check)
{
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1:0", &l), 0);
    const char *addr = cx_tcp_ops.listener_addr(l);
    const char *colon = strrchr(addr, ':');
    CX_CHECK(colon != NULL);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CX_CHECK(fd >= 0);
    CX_CHECK_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct cx_link *k;
    CX_CHECK_EQ_INT(cx_tcp_ops.accept(l, 10000, &k), 0);
    cx_tcp_ops.listener_close(l);

    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 5, .seq = 1, .length = 4,
                             .msg_length = 4};
    uint8_t wire[2 * (CX_FRAME_HDR_SIZE + 4)];
    cx_frame_encode(&h, wire);
    memcpy(wire + CX_FRAME_HDR_SIZE, "good", 4);
    h.seq = 2;
    cx_frame_encode_unchecked(&h, wire + CX_FRAME_HDR_SIZE + 4);
    memcpy(wire + 2 * CX_FRAME_HDR_SIZE + 4, "bad!", 4);
    CX_CHECK_EQ_INT((int)write(fd, wire, sizeof wire), (int)sizeof wire);

    int delivered = 0, rc = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* generous: the bytes are on loopback at once, the machine may be loaded */
        rc = cx_link_progress(k, count_frame, &delivered, 16);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (rc >= 0 && t.tv_sec - t0.tv_sec < 20);
    CX_CHECK_EQ_INT(rc, -EPROTO);
    CX_CHECK_EQ_INT(delivered, 1);
    CX_CHECK(strstr(cx_errmsg(), "without its check") != NULL);
    cx_link_close(k);
    close(fd);
}

CX_TEST_MAIN()
