/* The multicast filter over real TCP links to forked receiver processes: every receiver
 * gets every message once, in order; one receiver SIGKILLed mid-stream is dropped from the
 * group and the others go on. */
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "stack/cx_mcast.h"
#include "transport/cx_driver.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSGS 5000
#define END_CHANNEL 999

struct rx {
    uint64_t next;
    int bad, done;
};

static size_t msg_len(uint64_t i) { return (size_t)(i * 131 % 9000); }

static void on_rx(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct rx *r = arg;
    if (h->channel == END_CHANNEL) {
        r->done = 1;
        return;
    }
    const uint8_t *b = p;
    if (h->seq != r->next || len != msg_len(h->seq) || (len && b[len - 1] != (uint8_t)(h->seq + len)))
        r->bad++;
    r->next++;
}

static int receiver(const char *addr)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    struct cx_link *k;
    if (cx_connect(addr, &k) < 0)
        return 2;
    struct rx r = {0};
    while (!r.done) {
        int n = cx_link_progress(k, on_rx, &r, 256);
        if (n < 0)
            return 3;
        if (n == 0)
            usleep(200);
    }
    return r.bad == 0 && r.next == MSGS ? 0 : 4;
}

CX_TEST(mcast_fans_out_and_survives_a_dead_member)
{
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1:0", &l), 0);
    const char *addr = cx_tcp_ops.listener_addr(l);
    pid_t pid[3];
    for (int i = 0; i < 3; i++)
        if ((pid[i] = fork()) == 0)
            _exit(receiver(addr));
    struct cx_link *g;
    CX_CHECK_EQ_INT(cx_mcast_create(&g), 0);
    for (int i = 0; i < 3; i++) {
        struct cx_link *k;
        CX_CHECK_EQ_INT(cx_tcp_ops.accept(l, 10000, &k), 0);
        CX_CHECK(cx_mcast_add(g, k) >= 0);
    }
    cx_tcp_ops.listener_close(l);
    CX_CHECK_EQ_INT(cx_mcast_members(g), 3);
    static uint8_t buf[9000];
    for (uint64_t i = 0; i < MSGS; i++) {
        size_t len = msg_len(i);
        memset(buf, 0, len);
        if (len)
            buf[len - 1] = (uint8_t)(i + len);
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1, .seq = i};
        struct iovec iov = {buf, len};
        CX_CHECK_EQ_INT(cx_link_send(g, &h, &iov, 1), 0);
        if (i == 2000) { /* kill one receiver: the group must not stall or fail */
            kill(pid[1], SIGKILL);
            waitpid(pid[1], NULL, 0);
        }
        while (cx_link_pending(g) > (8u << 20))
            CX_CHECK(cx_link_progress(g, on_rx, &(struct rx){0}, 64) >= 0);
    }
    struct cx_frame_hdr end = {.type = CX_FRAME_DATA, .channel = END_CHANNEL};
    cx_link_send(g, &end, NULL, 0);
    for (int i = 0; i < 2000 && cx_link_pending(g) > 0; i++) {
        CX_CHECK(cx_link_progress(g, on_rx, &(struct rx){0}, 64) >= 0);
        usleep(1000);
    }
    for (int i = 0; i < 3; i += 2) {
        int st;
        waitpid(pid[i], &st, 0);
        CX_CHECK(WIFEXITED(st));
        CX_CHECK_EQ_INT(WEXITSTATUS(st), 0); /* all 5000, in order, intact */
    }
    /* the dead member is noticed by a send or a progress at the latest */
    for (int i = 0; i < 200 && cx_mcast_dropped(g) == 0; i++) {
        cx_link_send(g, &end, NULL, 0);
        cx_link_progress(g, on_rx, &(struct rx){0}, 64);
        usleep(5000);
    }
    CX_CHECK_EQ_INT(cx_mcast_dropped(g), 3 - cx_mcast_members(g));
    CX_CHECK(cx_mcast_members(g) <= 2);
    printf("    2 receivers got all %d messages; the killed one was dropped (members now %d)\n", MSGS,
           cx_mcast_members(g));
    cx_link_close(g);
}

CX_TEST(mcast_bad_calls)
{
    struct cx_link *g;
    CX_CHECK_EQ_INT(cx_mcast_create(&g), 0);
    CX_CHECK_EQ_INT(cx_mcast_remove(g, 3), -ENOENT);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    CX_CHECK_EQ_INT(cx_link_send(g, &h, NULL, 0), -ENOTCONN); /* an empty group */
    cx_link_close(g);
}

CX_TEST_MAIN()
