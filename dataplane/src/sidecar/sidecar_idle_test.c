/* What idle costs a sidecar (a real confluxd --role=sidecar process): no CPU when nothing
 * happens, and thousands of idle application connections (each with its hello done and its
 * shared region made) held without a thread each, while a working application's calls are
 * still answered at once. The number of connections is 10,000, or fewer when this
 * process's file limit is lower (it is sized from RLIMIT_NOFILE, never assumed);
 * CONFLUX_IDLE_SECONDS (default 3) sets each CPU window (60 for the figure). */
#include "common/cx_test.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/cx_sc_proto.h"
#include "sidecar/sc_testutil.h"
#include "testutil/proc_stat.h"

#include <sys/resource.h>
#include <sys/un.h>

#define WANT_CONNS 10000
#define RSS_LIMIT_KB (200 * 1024)

static char g_dir[64] = "/tmp/cxsc-idle-XXXXXX";
static char g_sock[96], g_http[80];
static struct proc g_sc;

static int idle_seconds(void)
{
    const char *s = getenv("CONFLUX_IDLE_SECONDS");
    int v = s && *s ? atoi(s) : 3;
    return v > 0 ? v : 3;
}

/* The sidecar's conflux_sidecar_connections gauge, or -1. */
static long connections(void)
{
    static char body[1 << 16];
    if (http_get(g_http, "/metrics", body, sizeof body) != 200)
        return -1;
    const char *p = strstr(body, "\nconflux_sidecar_connections ");
    return p ? atol(p + strlen("\nconflux_sidecar_connections ")) : -1;
}

/* One application connection as the protocol makes it: connect, hello, the region's memfd
 * (closed again: the sidecar keeps its mapping). Returns the socket, or -1. */
static int idle_conn(uint64_t session)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", g_sock);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        goto fail;
    struct cx_sc_req q = {.op = CX_SC_HELLO, .a = {(int64_t)session, CX_SC_CONN_CALLS, getpid(), CX_SC_PROTO_VERSION}};
    if (send(fd, &q, CX_SC_REQ_HDR, MSG_NOSIGNAL) < 0)
        goto fail;
    static struct cx_sc_rep rep;
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct iovec iov = {.iov_base = &rep, .iov_len = sizeof rep};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    if (recvmsg(fd, &mh, MSG_CMSG_CLOEXEC) < (ssize_t)CX_SC_REP_HDR || rep.rc < 0)
        goto fail;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            int memfd;
            memcpy(&memfd, CMSG_DATA(cm), sizeof memfd);
            close(memfd);
        }
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

CX_TEST(setup)
{
    CX_CHECK(mkdtemp(g_dir) != NULL);
    snprintf(g_sock, sizeof g_sock, "%s/sc.sock", g_dir);
    /* the sidecar inherits the raised limit: both ends hold one descriptor a connection */
    struct rlimit rl;
    CX_CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    CX_CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
    const char *args[] = {"--role=sidecar", "--socket", g_sock, "--http=127.0.0.1:0",
                          "--listen=tcp://127.0.0.1:0", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&g_sc, args, 0), 0);
    char w[80];
    /* "listening <socket> http <addr> ..." */
    for (int i = 0; word(g_sc.line, i, w, sizeof w)[0]; i++)
        if (strcmp(w, "http") == 0)
            snprintf(g_http, sizeof g_http, "%s", word(g_sc.line, i + 1, w, sizeof w));
    CX_CHECK(g_http[0] != 0);
    if (!g_http[0])
        fprintf(stderr, "  sidecar said: %s\n", g_sc.line);
}

CX_TEST(an_idle_sidecar_uses_no_cpu)
{
    usleep(300000); /* past its start */
    long t0 = proc_cpu_ticks(g_sc.pid);
    sleep((unsigned)idle_seconds());
    long t1 = proc_cpu_ticks(g_sc.pid);
    CX_CHECK(t0 >= 0 && t1 >= 0);
    fprintf(stderr, "  idle sidecar: %ld ticks in %d s\n", t1 - t0, idle_seconds());
    CX_CHECK(t1 - t0 <= 1); /* a busy loop would be ~100 ticks a second */
}

CX_TEST(thousands_of_idle_connections_cost_no_thread_and_no_cpu)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    long n = WANT_CONNS;
    if ((long)rl.rlim_cur - 100 < n)
        n = (long)rl.rlim_cur - 100;
    CX_CHECK(n >= 100);
    int *fds = calloc((size_t)n, sizeof *fds);
    CX_CHECK(fds != NULL);
    if (!fds)
        return;
    long rss0 = proc_rss_kb(g_sc.pid);
    uint64_t t0 = now_ns();
    long made = 0;
    for (; made < n; made++)
        if ((fds[made] = idle_conn(0x1d1e0000u + (uint64_t)made)) < 0)
            break;
    double open_s = (double)(now_ns() - t0) / 1e9;
    CX_CHECK_EQ_INT(made, n);
    long held = connections();
    CX_CHECK_EQ_INT(held, made);
    long rss = proc_rss_kb(g_sc.pid);
    fprintf(stderr, "  %ld idle connections opened in %.2f s (file limit %lu); sidecar RSS %ld -> %ld kB\n",
            made, open_s, (unsigned long)rl.rlim_cur, rss0, rss);
    CX_CHECK(rss > 0 && rss < RSS_LIMIT_KB);

    long c0 = proc_cpu_ticks(g_sc.pid);
    sleep((unsigned)idle_seconds());
    long c1 = proc_cpu_ticks(g_sc.pid);
    fprintf(stderr, "  with them held: %ld ticks in %d s\n", c1 - c0, idle_seconds());
    CX_CHECK(c1 - c0 <= 1);

    /* a working application meanwhile: every call answered (an unknown descriptor is a
     * real round trip that the sidecar refuses) */
    CX_CHECK_EQ_INT(cx_sc_connect(g_sock), 0);
    enum { CALLS = 2000 };
    static uint64_t lat[CALLS];
    int refused = 0;
    for (int i = 0; i < CALLS; i++) {
        uint64_t s = now_ns();
        refused += cx_sc_pi_tell(1000000 + i) < 0 && errno == EBADF;
        lat[i] = now_ns() - s;
    }
    CX_CHECK_EQ_INT(refused, CALLS);
    qsort(lat, CALLS, sizeof lat[0], cmp_u64);
    fprintf(stderr, "  calls meanwhile: p50 %.1f us, p99 %.1f us\n", (double)lat[CALLS / 2] / 1e3,
            (double)lat[CALLS * 99 / 100] / 1e3);
    CX_CHECK(lat[CALLS * 99 / 100] < 50000000u); /* 50 ms: only a stalled sidecar fails this */

    t0 = now_ns();
    for (long i = 0; i < made; i++)
        close(fds[i]);
    free(fds);
    long left = -1;
    for (int i = 0; i < 200 && (left = connections()) > 2; i++)
        usleep(50000);
    fprintf(stderr, "  closed: %ld connections left after %.2f s\n", left, (double)(now_ns() - t0) / 1e9);
    CX_CHECK(left >= 0 && left <= 2); /* this process's own calls connections */
}

CX_TEST(teardown)
{
    CX_CHECK_EQ_INT(proc_stop(&g_sc, SIGTERM), 0);
    unlink(g_sock);
    rmdir(g_dir);
}

CX_TEST_MAIN()
