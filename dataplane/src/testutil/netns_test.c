/* The test network itself: namespaces appear and go, a socket made after cx_netns_enter
 * lives in that namespace, leftovers of a dead process are removed, bad impairment
 * arguments are refused, and the impairment really loses, duplicates and reorders
 * datagrams at about the rates asked (raw UDP sockets, no Conflux driver involved). */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "testutil/cx_netns.h"
#include "testutil/cx_netns_emu.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int ns_exists(const char *name)
{
    char p[64];
    struct stat st;
    snprintf(p, sizeof p, "/run/netns/%s", name);
    return stat(p, &st) == 0;
}

CX_TEST(netns_emulation_arguments)
{
    struct cx_netns_emu_params p;
    CX_CHECK_EQ_INT(cx_netns_emu_parse("delay 1ms reorder 25% 50% loss 10% duplicate 5% limit 10000", &p), 0);
    CX_CHECK(p.loss > 0.099 && p.loss < 0.101);
    CX_CHECK(p.duplicate > 0.049 && p.duplicate < 0.051);
    CX_CHECK(p.reorder > 0.249 && p.reorder < 0.251);
    CX_CHECK_EQ_INT(p.delay_us, 1000);
    CX_CHECK_EQ_INT(p.limit, 10000);
    CX_CHECK_EQ_INT(cx_netns_emu_parse("loss 10", &p), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "percentage") != NULL);
    CX_CHECK_EQ_INT(cx_netns_emu_parse("delay 5", &p), -EINVAL);
    CX_CHECK_EQ_INT(cx_netns_emu_parse("corrupt 1%", &p), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "corrupt") != NULL);
    CX_CHECK_EQ_INT(cx_netns_emu_parse("loss", &p), -EINVAL);
}

CX_TEST(netns_pair_enter_and_stale_cleanup)
{
    const char *why = cx_netns_unavailable();
    if (why)
        CX_SKIP("%s", why);
    /* a leftover of a crashed run: its pid (above pid_max) cannot be alive */
    char out[256];
    CX_CHECK_EQ_INT(cx_netns_run((char *const[]){"ip", "netns", "add", "cxtu99999999a", NULL}, out, sizeof out), 0);
    CX_CHECK(ns_exists("cxtu99999999a"));
    struct cx_netns_pair p;
    int rc = cx_netns_pair_create("cxtu", &p); /* cleans stale ones first */
    CX_CHECK(!ns_exists("cxtu99999999a"));
    if (rc < 0)
        fprintf(stderr, "  %s\n", cx_errmsg());
    CX_CHECK_EQ_INT(rc, 0);
    CX_CHECK(ns_exists(p.ns[0]) && ns_exists(p.ns[1]));
    /* a socket made inside namespace a can bind a's address; outside it cannot */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, p.ip[0], &sa.sin_addr);
    int outside = socket(AF_INET, SOCK_DGRAM, 0);
    int bound_outside = bind(outside, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(outside);
    int saved = cx_netns_enter(p.ns[0]);
    CX_CHECK(saved >= 0);
    int inside = socket(AF_INET, SOCK_DGRAM, 0);
    int bound_inside = bind(inside, (struct sockaddr *)&sa, sizeof sa) == 0;
    CX_CHECK_EQ_INT(cx_netns_leave(saved), 0);
    close(inside);
    CX_CHECK(!bound_outside);
    CX_CHECK(bound_inside);
    CX_CHECK_EQ_INT(cx_netns_enter("cxtu-no-such-ns"), -ENOENT);
    cx_netns_pair_destroy(&p);
    CX_CHECK(!ns_exists(p.ns[0]) && !ns_exists(p.ns[1]));
    cx_netns_pair_destroy(&p); /* twice is fine */
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

CX_TEST(netns_impairment_loses_duplicates_reorders)
{
    const char *why = cx_netns_unavailable();
    if (why)
        CX_SKIP("%s", why);
    struct cx_netns_pair p;
    if (cx_netns_pair_create("cxtu", &p) < 0)
        CX_SKIP("cannot make network namespaces here: %s", cx_errmsg());
    int rc = cx_netns_impair(&p, 1, "delay 1ms reorder 25% loss 10% duplicate 5% limit 10000");
    if (rc < 0) {
        fprintf(stderr, "  %s\n", cx_errmsg());
        cx_netns_pair_destroy(&p);
    }
    CX_CHECK_EQ_INT(rc, 0);
    fprintf(stderr, "  impairment by %s\n", p.impair_method);
    /* raw UDP from b to a: 4000 numbered datagrams, paced a little */
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9999)};
    inet_pton(AF_INET, p.ip[0], &to.sin_addr);
    int sa = cx_netns_enter(p.ns[0]);
    int rx = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int big = 8 << 20;
    setsockopt(rx, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    int ok = bind(rx, (struct sockaddr *)&to, sizeof to) == 0;
    cx_netns_leave(sa);
    int sb = cx_netns_enter(p.ns[1]);
    int tx = socket(AF_INET, SOCK_DGRAM, 0);
    cx_netns_leave(sb);
    enum { N = 4000 };
    static unsigned char seen[N];
    unsigned got = 0, dups = 0, inversions = 0, last = 0;
    for (unsigned i = 0; i < N && ok; i++) {
        sendto(tx, &i, sizeof i, 0, (struct sockaddr *)&to, sizeof to);
        if (i % 64 == 63)
            usleep(200);
    }
    double t0 = now();
    while (now() - t0 < 0.5) {
        unsigned v;
        if (recv(rx, &v, sizeof v, 0) != sizeof v) {
            usleep(1000);
            continue;
        }
        if (v >= N)
            continue;
        if (seen[v]++)
            dups++;
        else
            got++;
        if (v < last)
            inversions++;
        last = v;
    }
    close(tx);
    close(rx);
    unsigned long long dq[3];
    cx_netns_impair_counts(&p, 1, dq);
    cx_netns_pair_destroy(&p);
    CX_CHECK(ok);
    fprintf(stderr, "  %u of %d arrived (%.1f %% lost), %u duplicates, %u arrived after a later one; "
            "delay stage: %llu seen, %llu at once, %llu delayed\n", got, N, 100.0 * (N - got) / N,
            dups, inversions, dq[0], dq[1], dq[2]);
    CX_CHECK(got > N * 0.85 && got < N * 0.95);   /* ~10 % lost */
    CX_CHECK(dups > N * 0.02 && dups < N * 0.09); /* ~5 % duplicated (then 10 % of those lost) */
    CX_CHECK(inversions > 0);                      /* reordered */
}

CX_TEST_MAIN()
