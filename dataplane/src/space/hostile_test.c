/* Hostile input against a real space server (in this process, on its own engine thread,
 * listening on tcp:// and tls://, with real sockets): a silent TLS connection, a partial
 * ClientHello, lying length fields, many idle connections (sized from RLIMIT_NOFILE), a
 * client that never reads its replies, garbage bytes. In each case a legitimate client,
 * connecting afresh, must still be served: a lookup and an acked write within 2 s (a
 * generous bound: normally under a millisecond), and the hostile peer must be closed by
 * the server's deadlines where one applies. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "common/cx_test.h"
#include "space/cx_space_client.h"
#include "space/cx_space_proto.h"
#include "space/cx_space_server.h"
#include "sidecar/sc_testutil.h" /* confluxd as a real process */
#include "space/space_testutil.h"
#include "testutil/hostile_peer.h"
#include "testutil/proc_stat.h"
#include "transport/cx_addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>

#ifdef CX_HAVE_TLS
#include "transport/tls/tls_testcerts.h"

#define FIRST_FRAME_MS 1000 /* the server's deadline for a first frame, in this test */
#define SERVED_MS 2000      /* a legitimate client's round trip must stay below this */

static struct {
    char dir[64], tcp[96], tls[96];
    struct cx_space_server *s;
    int up;
} E;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int make_certs(void)
{
    struct tc_id ca = {0}, node = {0};
    int rc = tc_make(&ca, "Conflux test CA", NULL, NULL, -1, 30, 1) |
             tc_make(&node, "node-1", "conflux-test", &ca, -1, 30, 2) |
             tc_write(&ca, E.dir, "ca") | tc_write(&node, E.dir, "node");
    tc_free(&ca);
    tc_free(&node);
    char p[128];
    snprintf(p, sizeof p, "%s/ca.pem", E.dir), setenv("CONFLUX_TLS_CA", p, 1);
    snprintf(p, sizeof p, "%s/node.pem", E.dir), setenv("CONFLUX_TLS_CERT", p, 1);
    snprintf(p, sizeof p, "%s/node.key", E.dir), setenv("CONFLUX_TLS_KEY", p, 1);
    return rc ? -1 : 0;
}

/* The server, once for every case (a hostile case must not leave it unable to serve the
 * next one either). */
static int env_up(int max_clients)
{
    if (E.up)
        return E.up > 0 ? 0 : -1;
    E.up = -1;
    if (!tmpdir_make(E.dir) || make_certs() < 0)
        return -1;
    char store[96];
    snprintf(store, sizeof store, "%s/space", E.dir);
    struct cx_space_server_opts o = {.dir = store, .listen = "tcp://127.0.0.1:0",
                                     .listen2 = "tls://127.0.0.1:0", .udp = "",
                                     .max_segment = 1u << 20, .max_clients = max_clients,
                                     .first_frame_ms = FIRST_FRAME_MS};
    o.pipe.fsync = CX_SEG_FSYNC_NONE;
    if (cx_space_server_start(&o, &E.s) < 0) {
        fprintf(stderr, "  server: %s\n", cx_errmsg());
        return -1;
    }
    snprintf(E.tcp, sizeof E.tcp, "%s", cx_space_server_addr(E.s));
    snprintf(E.tls, sizeof E.tls, "%s", cx_space_server_addr2(E.s));
    E.up = 1;
    return 0;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* A legitimate client, connecting afresh to url: a lookup, then a segment written and
 * acked on its own pipe. Returns the milliseconds it took, or -1 (the reason printed). */
static double legit(const char *url, const char *tag)
{
    static int n;
    double t0 = now_ms();
    struct cx_space_client *c;
    if (cx_space_connect(url, &c) < 0) {
        fprintf(stderr, "  %s: connect %s: %s\n", tag, url, cx_errmsg());
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, "legit-%d", ++n);
    struct cx_space_pipe_info info;
    uint32_t h;
    uint8_t seg[100] = {1, 2, 3};
    struct iovec iov = {seg, sizeof seg};
    int rc = cx_space_lookup(c, name, &info);
    if (rc != -ENOENT && rc < 0)
        goto bad;
    if ((rc = cx_space_put(c, name, CX_SP_CREATE, 0, "", &h, &info)) < 0 ||
        (rc = cx_space_append(c, h, 1, 0, &iov, 1)) < 0 ||
        (rc = cx_space_wait_acked(c, h, 1, 5000)) < 0 || (rc = cx_space_end(c, h, 1)) < 0 ||
        (rc = cx_space_wait_acked(c, h, 1, 5000)) < 0)
        goto bad;
    cx_space_disconnect(c);
    double ms = now_ms() - t0;
    fprintf(stderr, "  %s: a legitimate client over %.3s was served in %.1f ms\n", tag, url, ms);
    return ms;
bad:
    fprintf(stderr, "  %s: legitimate client over %s: %d %s\n", tag, url, rc, cx_errmsg());
    cx_space_disconnect(c);
    return -1;
}

#define CHECK_SERVED(tag)                                                                  \
    do {                                                                                   \
        double ms_ = legit(E.tcp, tag);                                                    \
        CX_CHECK(ms_ >= 0 && ms_ < SERVED_MS);                                              \
        ms_ = legit(E.tls, tag);                                                           \
        CX_CHECK(ms_ >= 0 && ms_ < SERVED_MS);                                              \
    } while (0)

static uint64_t dropped(void)
{
    struct cx_space_server_stats st;
    cx_space_server_stats(E.s, &st);
    return st.clients_dropped;
}

CX_TEST(silent_tls_connection_is_dropped_while_others_are_served)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    uint64_t d0 = dropped();
    int fd = hp_connect(E.tls);
    CX_CHECK(fd >= 0);
    CHECK_SERVED("silent tls peer");
    CX_CHECK(hp_closed_by_server(fd, FIRST_FRAME_MS + 3000));
    CX_CHECK(dropped() > d0);
    close(fd);
    fprintf(stderr, "  case silent-tls: the silent peer was dropped, others served\n");
}

CX_TEST(partial_client_hello_is_dropped_while_others_are_served)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    uint64_t d0 = dropped();
    int fd = hp_connect(E.tls);
    CX_CHECK(fd >= 0);
    CX_CHECK_EQ_INT(hp_partial_client_hello(fd), 0);
    CHECK_SERVED("partial ClientHello");
    CX_CHECK(hp_closed_by_server(fd, FIRST_FRAME_MS + 3000));
    CX_CHECK(dropped() > d0);
    close(fd);
    fprintf(stderr, "  case partial-client-hello: the peer was dropped, others served\n");
}

/* Headers declaring 1 GiB payloads that never come: nothing is allocated for them (the
 * limit is checked first, and a payload buffer grows with the bytes received). */
CX_TEST(lying_length_fields_cost_no_memory)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    long rss0 = rss_kib();
    int fds[8];
    for (int i = 0; i < 8; i++) {
        fds[i] = hp_connect(E.tcp);
        CX_CHECK(fds[i] >= 0);
        struct cx_frame_hdr h = {.type = i % 2 ? CX_FRAME_DATA : CX_FRAME_LOOKUP, .channel = 1,
                                 .seq = 1, .length = CX_FRAME_MAX_MSG,
                                 .msg_length = CX_FRAME_MAX_MSG};
        if (i >= 6) /* under the 1 MiB limit: a buffer, but only as big as what came */
            h.length = h.msg_length = 1000000;
        uint8_t b[CX_FRAME_HDR_SIZE + 4096] = {0};
        cx_frame_encode(&h, b);
        CX_CHECK(send(fds[i], b, sizeof b, MSG_NOSIGNAL) == (ssize_t)sizeof b);
    }
    CHECK_SERVED("lying length fields");
    long grown = rss_kib() - rss0;
    fprintf(stderr, "  case lying-length: 8 peers declaring up to 1 GiB: RSS grew %ld KiB\n", grown);
    CX_CHECK(grown < 64 * 1024);
    /* none completed a first frame: the deadline closes them */
    for (int i = 0; i < 8; i++) {
        CX_CHECK(hp_closed_by_server(fds[i], FIRST_FRAME_MS + 3000));
        close(fds[i]);
    }
    fprintf(stderr, "  case lying-length: all 8 closed by the first-frame deadline\n");
}

/* A segment over the server's max_segment: refused from its header, the writer's next call
 * fails with the reason, and the pipe cannot be ended past the gap. */
CX_TEST(refused_segment_fails_the_next_call_and_no_end_past_it)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct cx_space_client *c;
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    uint32_t h;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_put(c, "too-big", CX_SP_CREATE, 0, "", &h, &info), 0);
    static uint8_t big[2u << 20];
    struct iovec small = {big, 10}, large = {big, sizeof big};
    CX_CHECK_EQ_INT(cx_space_append(c, h, 1, 0, &small, 1), 0);
    CX_CHECK_EQ_INT(cx_space_append(c, h, 2, 0, &large, 1), 0); /* queued: refused later */
    CX_CHECK_EQ_INT(cx_space_append(c, h, 3, 0, &small, 1) < 0 ? 0 : cx_space_wait_acked(c, h, 3, 5000), -EMSGSIZE);
    fprintf(stderr, "  refused: %s\n", cx_errmsg());
    CX_CHECK(strstr(cx_errmsg(), "limit") != NULL);
    CX_CHECK(cx_space_end(c, h, 3) < 0);
    cx_space_disconnect(c);
    /* the pipe was not ended short: a reader sees segment 1 and no end */
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(c, "too-big", &info), 0);
    CX_CHECK_EQ_INT(info.ended, 0);
    CX_CHECK_EQ_INT((int)info.last_id, 1);
    /* a writer that claims to end after segment 5 when 1 is stored: refused by the space */
    CX_CHECK_EQ_INT(cx_space_put(c, "too-big", CX_SP_APPEND, 0, "", &h, &info), 0);
    CX_CHECK_EQ_INT(cx_space_end(c, h, 5), 0); /* sent; the answer comes back as a push */
    CX_CHECK_EQ_INT(cx_space_wait_acked(c, h, 5, 5000), -EPIPE);
    fprintf(stderr, "  END past the stored segments: %s\n", cx_errmsg());
    CX_CHECK(strstr(cx_errmsg(), "only 1 are stored") != NULL);
    cx_space_disconnect(c);
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(c, "too-big", &info), 0);
    CX_CHECK_EQ_INT(info.ended, 0);
    cx_space_disconnect(c);
    CHECK_SERVED("refused segment");
}

/* More idle connections than the server takes (sized from this process's fd limit: each
 * costs two fds here, the client's and the server's): the legitimate client is still
 * served (silent connections are evicted first, then dropped by the first-frame deadline). */
CX_TEST(many_idle_connections)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct rlimit rl;
    CX_CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
    long room = (long)(rl.rlim_cur == RLIM_INFINITY ? 4096 : rl.rlim_cur) - 64;
    int n = (int)(room / 2 > 2000 ? 2000 : room / 2); /* at most half our fds: the server's share */
    CX_CHECK(n >= 8);
    int *fds = calloc((size_t)n, sizeof *fds);
    int opened = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = hp_connect(i % 4 ? E.tcp : E.tls);
        if (fds[i] < 0)
            break;
        opened++;
    }
    fprintf(stderr, "  case idle: %d idle connections (fd limit %ld)\n", opened,
            (long)rl.rlim_cur);
    CX_CHECK(opened >= n / 2);
    CHECK_SERVED("many idle connections");
    int closed = 0;
    for (int i = 0; i < opened; i++)
        closed += hp_closed_by_server(fds[i], i ? 100 : FIRST_FRAME_MS + 3000);
    fprintf(stderr, "  case idle: %d of %d closed by the server\n", closed, opened);
    CX_CHECK(closed >= opened * 9 / 10);
    for (int i = 0; i < opened; i++)
        close(fds[i]);
    free(fds);
    CHECK_SERVED("after many idle connections");
}

/* --max-clients: at the limit, a silent connection is evicted for a newcomer; when every
 * client has spoken, the newcomer is refused (counted, logged) and nothing else changes. */
CX_TEST(client_limit_evicts_silent_then_refuses)
{
    char dir[64], store[96];
    CX_CHECK(tmpdir_make(dir) != NULL);
    snprintf(store, sizeof store, "%s/space", dir);
    struct cx_space_server_opts o = {.dir = store, .listen = "tcp://127.0.0.1:0", .udp = "",
                                     .max_clients = 8, .first_frame_ms = 60000};
    o.pipe.fsync = CX_SEG_FSYNC_NONE;
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(cx_space_server_start(&o, &s), 0);
    const char *addr = cx_space_server_addr(s);
    int silent[20];
    for (int i = 0; i < 20; i++)
        CX_CHECK((silent[i] = hp_connect(addr)) >= 0);
    /* 20 silent ones for 8 places, and the deadline far away: evictions make room */
    double ms = legit(addr, "client limit, silent peers");
    CX_CHECK(ms >= 0 && ms < SERVED_MS);
    int evicted = 0;
    for (int i = 0; i < 20; i++) {
        evicted += hp_closed_by_server(silent[i], 100);
        close(silent[i]);
    }
    fprintf(stderr, "  case client-limit: %d of 20 silent peers evicted or refused\n", evicted);
    CX_CHECK(evicted >= 12);
    /* 8 clients that spoke: the 9th is refused at once */
    struct cx_space_client *talk[8];
    struct cx_space_pipe_info info;
    for (int i = 0; i < 8; i++) {
        CX_CHECK_EQ_INT(cx_space_connect(addr, &talk[i]), 0);
        CX_CHECK_EQ_INT(cx_space_lookup(talk[i], "nothing", &info), -ENOENT);
    }
    struct cx_space_server_stats st0, st1;
    /* the silent peers' closes reach the server first (else the newcomer evicts one) */
    for (int i = 0; i < 300; i++) {
        cx_space_server_stats(s, &st0);
        if (st0.clients <= 8)
            break;
        usleep(10000);
    }
    CX_CHECK(st0.clients <= 8);
    int extra = hp_connect(addr);
    CX_CHECK(extra >= 0);
    CX_CHECK(hp_closed_by_server(extra, 3000));
    close(extra);
    cx_space_server_stats(s, &st1);
    CX_CHECK(st1.clients_refused > st0.clients_refused);
    for (int i = 0; i < 8; i++) { /* the 8 are still served */
        CX_CHECK_EQ_INT(cx_space_lookup(talk[i], "nothing", &info), -ENOENT);
        cx_space_disconnect(talk[i]);
    }
    fprintf(stderr, "  case client-limit: the 9th of 9 speaking clients refused, the 8 served\n");
    cx_space_server_stop(s);
    tmpdir_remove(dir);
}

/* --idle-timeout: a client with no pipe open that stays silent is closed; one holding a
 * pipe open is not (it may wait for a slow writer as long as it likes). */
CX_TEST(idle_timeout_closes_only_clients_without_pipes)
{
    char dir[64], store[96];
    CX_CHECK(tmpdir_make(dir) != NULL);
    snprintf(store, sizeof store, "%s/space", dir);
    struct cx_space_server_opts o = {.dir = store, .listen = "tcp://127.0.0.1:0", .udp = "",
                                     .idle_ms = 500};
    o.pipe.fsync = CX_SEG_FSYNC_NONE;
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(cx_space_server_start(&o, &s), 0);
    const char *addr = cx_space_server_addr(s);
    struct cx_space_client *idle, *busy;
    struct cx_space_pipe_info info;
    uint32_t h;
    CX_CHECK_EQ_INT(cx_space_connect(addr, &idle), 0);
    CX_CHECK_EQ_INT(cx_space_connect(addr, &busy), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(idle, "nothing", &info), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_put(busy, "held", CX_SP_CREATE, 0, "", &h, &info), 0);
    usleep(2000 * 1000); /* four idle timeouts */
    CX_CHECK(cx_space_lookup(idle, "nothing", &info) != -ENOENT); /* closed */
    fprintf(stderr, "  case idle-timeout: the idle client: %s\n", cx_errmsg());
    CX_CHECK_EQ_INT(cx_space_lookup(busy, "held", &info), 0); /* still served */
    cx_space_disconnect(idle);
    cx_space_disconnect(busy);
    cx_space_server_stop(s);
    tmpdir_remove(dir);
}

/* A client that sends requests and never reads the replies: the server queues them up to
 * its limit and closes it; others are served meanwhile. */
CX_TEST(client_that_never_reads)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    int fd = hp_connect(E.tcp);
    CX_CHECK(fd >= 0);
    struct cx_sp_buf q = {0};
    struct cx_sp_request r = {.op = CX_SP_LIST};
    CX_CHECK_EQ_INT(cx_sp_encode_request(&q, &r), 0);
    /* 256 LIST requests per send */
    size_t one = CX_FRAME_HDR_SIZE + q.len, n = 256;
    uint8_t *batch = malloc(one * n);
    for (size_t i = 0; i < n; i++) {
        struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = i + 1, .length = (uint32_t)q.len,
                                 .msg_length = (uint32_t)q.len};
        cx_frame_encode(&h, batch + i * one);
        memcpy(batch + i * one + CX_FRAME_HDR_SIZE, q.p, q.len);
    }
    double t0 = now_ms(), next_probe = t0 + 300;
    int gone = 0, probes = 0;
    size_t off = 0; /* into the batch: a partial send goes on where it stopped */
    while (!gone && now_ms() - t0 < 60000) {
        ssize_t w = send(fd, batch + off, one * n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0)
            off = (off + (size_t)w) % (one * n);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            gone = 1;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 20);
            char c;
            if (recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
                gone = 1;
        }
        if (now_ms() > next_probe && probes < 3) { /* served while the flood goes on */
            double ms = legit(E.tcp, "non-reading client");
            CX_CHECK(ms >= 0 && ms < SERVED_MS);
            probes++;
            next_probe = now_ms() + 300;
        }
    }
    struct cx_space_server_stats st;
    cx_space_server_stats(E.s, &st);
    fprintf(stderr, "  case non-reading: closed by the server after %.0f ms: %s (%" PRIu64
            " requests served in all)\n", now_ms() - t0, gone ? "yes" : "no", st.requests);
    CX_CHECK(gone);
    free(batch);
    cx_sp_buf_free(&q);
    close(fd);
    CHECK_SERVED("after a non-reading client");
}

/* A reader that attaches to a large pipe and never reads: its stream waits (the server's
 * window per link) while writers and other readers go on. */
CX_TEST(reader_that_never_reads)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct cx_space_client *w, *lazy;
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &w), 0);
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &lazy), 0);
    uint32_t hw, hr;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_put(w, "big-pipe", CX_SP_CREATE, 0, "", &hw, &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(lazy, "big-pipe", 0, &hr, &info), 0);
    static uint8_t seg[512 << 10];
    struct iovec iov = {seg, sizeof seg};
    for (uint64_t id = 1; id <= 64; id++) /* 32 MiB */
        CX_CHECK_EQ_INT(cx_space_append(w, hw, id, 0, &iov, 1), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, hw, 64, 10000), 0);
    CHECK_SERVED("reader that never reads");
    cx_space_disconnect(lazy);
    cx_space_disconnect(w);
    fprintf(stderr, "  case lazy-reader: writer acked 32 MiB, others served\n");
}

CX_TEST(garbage_bytes_are_refused)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    uint64_t d0 = dropped();
    int fds[3] = {hp_connect(E.tcp), hp_connect(E.tcp), hp_connect(E.tls)};
    uint8_t junk[4096];
    unsigned x = 12345;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)((x = x * 1103515245 + 12345) >> 16);
    /* random bytes; a header with a bad check; random bytes in place of a ClientHello */
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .length = 4, .msg_length = 4};
    uint8_t bad[CX_FRAME_HDR_SIZE + 4];
    cx_frame_encode(&h, bad);
    bad[9] ^= 0x40;
    for (int i = 0; i < 3; i++)
        CX_CHECK(fds[i] >= 0);
    CX_CHECK(send(fds[0], junk, sizeof junk, MSG_NOSIGNAL) > 0);
    CX_CHECK(send(fds[1], bad, sizeof bad, MSG_NOSIGNAL) > 0);
    CX_CHECK(send(fds[2], junk, sizeof junk, MSG_NOSIGNAL) > 0);
    CHECK_SERVED("garbage bytes");
    for (int i = 0; i < 3; i++) {
        CX_CHECK(hp_closed_by_server(fds[i], 3000));
        close(fds[i]);
    }
    for (double end = now_ms() + FIRST_FRAME_MS + 3000; dropped() < d0 + 3 && now_ms() < end;)
        usleep(20000); /* a refused TLS peer is counted once its close or its deadline came */
    CX_CHECK(dropped() >= d0 + 3);
    fprintf(stderr, "  case garbage: 3 peers refused, others served\n");
}

/* CPU seconds (user + system) a process used so far. */
static double cpu_s(pid_t pid)
{
    long t = proc_cpu_ticks(pid);
    return t < 0 ? -1 : (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* A real confluxd whose fd limit is lowered to a few above what it uses: connections keep
 * coming while accept fails with EMFILE. The server must not spin on them (it takes and
 * closes each through its spare fd, logging once a second) and serves again once fds free. */
CX_TEST(out_of_fds_in_accept_does_not_spin)
{
    char dir[64], dirarg[96];
    CX_CHECK(tmpdir_make(dir) != NULL);
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space", dir);
    const char *args[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--no-udp",
                          "--fsync=none", "--first-frame-timeout=1000", NULL};
    struct proc sp;
    CX_CHECK_EQ_INT(proc_start(&sp, args, 1), 0);
    char addr[96];
    word(sp.line, 1, addr, sizeof addr);
    CX_CHECK(strncmp(addr, "tcp://", 6) == 0);
    int used = proc_fd_count(sp.pid);
    struct rlimit low = {(rlim_t)used + 4, (rlim_t)used + 4};
    CX_CHECK_EQ_INT(prlimit(sp.pid, RLIMIT_NOFILE, &low, NULL), 0);
    fprintf(stderr, "  case out-of-fds: confluxd uses %d fds, its limit is now %d\n", used, used + 4);
    /* 2 s of a new connection every 10 ms, most of them over the limit */
    int fds[256], n = 0;
    double t0 = now_ms(), c0 = cpu_s(sp.pid);
    while (now_ms() - t0 < 2000 && n < 256) {
        if ((fds[n] = hp_connect(addr)) >= 0)
            n++;
        usleep(10000);
    }
    double busy = cpu_s(sp.pid) - c0, wall = (now_ms() - t0) / 1e3;
    fprintf(stderr, "  case out-of-fds: %d connections in %.1f s; confluxd used %.2f s of CPU\n",
            n, wall, busy);
    CX_CHECK(busy < wall / 2); /* a spinning accept would take a whole core */
    int refused = 0;
    for (int i = 0; i < n; i++) {
        refused += hp_closed_by_server(fds[i], 10);
        close(fds[i]);
    }
    CX_CHECK(refused > 0);
    /* with the hostile connections gone, a legitimate client is served */
    double ms = -1;
    for (double end = now_ms() + 5000; ms < 0 && now_ms() < end;)
        if ((ms = legit(addr, "after running out of fds")) < 0)
            usleep(200000);
    CX_CHECK(ms >= 0);
    /* its log says why connections were refused */
    char log[16384];
    fcntl(sp.err, F_SETFL, O_NONBLOCK);
    ssize_t got = read(sp.err, log, sizeof log - 1);
    log[got > 0 ? got : 0] = 0;
    char *line = strstr(log, "out of file descriptors");
    if (line) {
        char *end = strchr(line, '\n');
        fprintf(stderr, "  case out-of-fds: logged \"...%.*s\"\n",
                (int)(end ? end - line : (long)strlen(line)), line);
    }
    CX_CHECK(line != NULL);
    CX_CHECK(proc_stop(&sp, SIGTERM) >= 0);
    tmpdir_remove(dir);
}

/* Reads what a process wrote to its stderr pipe so far (up to cap - 1 bytes). */
static void read_err(struct proc *p, char *buf, size_t cap)
{
    fcntl(p->err, F_SETFL, O_NONBLOCK);
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(p->err, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
}

static int append_to_logs(const char *fpath, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)f;
    size_t n = strlen(fpath);
    if (flag == FTW_F && n > 4 && strcmp(fpath + n - 4, ".log") == 0) {
        FILE *fp = fopen(fpath, "ab");
        if (!fp)
            return -1;
        fwrite("a torn write here", 1, 17, fp); /* under a record header: a torn tail */
        fclose(fp);
    }
    return 0;
}

/* A write torn by a crash: at the next start the tail is cut back to the last whole record
 * and the server says so (pipe, bytes dropped, where the log now ends). */
CX_TEST(torn_tail_is_cut_and_logged)
{
    char dir[64], dirarg[128], store[96];
    CX_CHECK(tmpdir_make(dir) != NULL);
    snprintf(store, sizeof store, "%s/space", dir);
    snprintf(dirarg, sizeof dirarg, "--dir=%s", store);
    const char *args[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--no-udp",
                          "--fsync=every", NULL};
    struct proc sp;
    CX_CHECK_EQ_INT(proc_start(&sp, args, 1), 0);
    char addr[96];
    word(sp.line, 1, addr, sizeof addr);
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    uint32_t h;
    uint8_t seg[100] = {0};
    struct iovec iov = {seg, sizeof seg};
    CX_CHECK_EQ_INT(cx_space_connect(addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_put(c, "torn", CX_SP_CREATE, 0, "", &h, &info), 0);
    for (uint64_t id = 1; id <= 3; id++)
        CX_CHECK_EQ_INT(cx_space_append(c, h, id, 0, &iov, 1), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(c, h, 3, 5000), 0);
    cx_space_disconnect(c);
    CX_CHECK(proc_stop(&sp, SIGKILL) >= 0);
    char pipes[128];
    snprintf(pipes, sizeof pipes, "%s/pipes", store);
    CX_CHECK_EQ_INT(nftw(pipes, append_to_logs, 8, FTW_PHYS), 0);
    CX_CHECK_EQ_INT(proc_start(&sp, args, 1), 0);
    word(sp.line, 1, addr, sizeof addr);
    CX_CHECK_EQ_INT(cx_space_connect(addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(c, "torn", 0, &h, &info), 0); /* opens the pipe */
    CX_CHECK_EQ_INT((int)info.last_id, 3);
    cx_space_disconnect(c);
    char log[8192];
    usleep(100000);
    read_err(&sp, log, sizeof log);
    char *line = strstr(log, "recovery dropped");
    if (line)
        fprintf(stderr, "  case torn-tail: logged \"...%.*s\"\n", (int)strcspn(line, "\n"), line);
    CX_CHECK(line && strstr(line, "17 bytes") && strstr(line, "ends at segment 3"));
    CX_CHECK(strstr(log, "pipe 'torn' (") != NULL); /* the line starts with the pipe */
    CX_CHECK(proc_stop(&sp, SIGTERM) >= 0);
    tmpdir_remove(dir);
}

/* NULL where a pointer is required: -EINVAL with a message, never a crash. */
CX_TEST(null_arguments_are_refused)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct cx_space_client *c;
    uint32_t h;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(NULL, &c), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_lookup(NULL, "x", &info), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "NULL") != NULL);
    CX_CHECK_EQ_INT(cx_space_append(NULL, 1, 1, 0, NULL, 0), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_server_start(NULL, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    CX_CHECK_EQ_INT(cx_space_put(c, "null-args", CX_SP_CREATE, 0, "", NULL, &info), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_put(c, "null-args", CX_SP_CREATE, 0, "", &h, &info), 0);
    CX_CHECK_EQ_INT(cx_space_append(c, h, 1, 0, NULL, 1), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_read_start(c, "null-args", 0, NULL, &info), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_read_next(c, h, NULL, 10, NULL, 0), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_next_event(c, h, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_lookup(c, NULL, &info), -EINVAL); /* an empty name */
    CX_CHECK_EQ_INT(cx_space_lookup(c, "null-args", NULL), 0);
    cx_space_disconnect(c);
    cx_space_disconnect(NULL);
    CHECK_SERVED("NULL arguments");
}

/* Sends one LOOKUP request frame carrying payload on fd and returns the reply's status (a
 * negative errno, 0) with its error text in err; 1 when no well-formed reply came. */
static int raw_request(int fd, const uint8_t *payload, uint32_t len, char *err, size_t cap)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = 7, .length = len, .msg_length = len};
    uint8_t out[CX_FRAME_HDR_SIZE + 512];
    cx_frame_encode(&h, out);
    memcpy(out + CX_FRAME_HDR_SIZE, payload, len);
    if (send(fd, out, CX_FRAME_HDR_SIZE + len, MSG_NOSIGNAL) != (ssize_t)(CX_FRAME_HDR_SIZE + len))
        return 1;
    uint8_t in[CX_FRAME_HDR_SIZE + 4096];
    size_t got = 0;
    struct cx_frame_hdr rh;
    for (double end = now_ms() + 5000; now_ms() < end;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 100) != 1)
            continue;
        ssize_t n = recv(fd, in + got, sizeof in - got, 0);
        if (n <= 0)
            return 1;
        got += (size_t)n;
        if (got >= CX_FRAME_HDR_SIZE && cx_frame_decode(in, got, &rh) == 0 &&
            got >= CX_FRAME_HDR_SIZE + rh.length) {
            struct cx_sp_reply r;
            if (rh.seq != 7 || cx_sp_decode_reply(in + CX_FRAME_HDR_SIZE, rh.length, &r) < 0)
                return 1;
            snprintf(err, cap, "%.*s", (int)r.error.len, r.error.p ? r.error.p : "");
            return r.status;
        }
    }
    return 1;
}

/* Cursor requests (CURSOR_SET/GET/LIST) with lying lengths, missing fields, trailing bytes
 * and bad cursor names: each gets an error reply saying what was wrong, the connection
 * stays usable, and others are served. */
CX_TEST(malformed_cursor_requests_get_an_error_reply)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    CX_CHECK_EQ_INT(cx_space_get(c, "cursed", 0, "", &info), 0);
    cx_space_disconnect(c);
    static const struct {
        const char *what;
        uint8_t p[64];
        uint32_t len;
        int want;
        const char *text;
    } cases[] = {
        {"op only", {CX_SP_CURSOR_SET}, 1, -EPROTO, "name"},
        {"lying cursor length", {CX_SP_CURSOR_GET, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 0xff, 0xff, 'a'},
         12, -EPROTO, "cursor"},
        {"no position", {CX_SP_CURSOR_SET, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 'a'},
         20, -EPROTO, "position"},
        {"trailing bytes", {CX_SP_CURSOR_LIST, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 9, 9}, 11, -EPROTO, "trailing"},
        {"empty cursor", {CX_SP_CURSOR_GET, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 0, 0}, 11, -EINVAL, "empty"},
        {"bad character", {CX_SP_CURSOR_GET, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 3, 0, 'a', '/', 'b'}, 14, -EINVAL,
         "character"},
        {"unbound pipe", {CX_SP_CURSOR_GET, 3, 0, 'n', 'o', 'p', 1, 0, 'a'}, 9, -ENOENT, "nop"},
    };
    int fd = hp_connect(E.tcp);
    CX_CHECK(fd >= 0);
    char err[1100];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = raw_request(fd, cases[i].p, cases[i].len, err, sizeof err);
        fprintf(stderr, "  case cursor %s: status %d \"%s\"\n", cases[i].what, st, err);
        CX_CHECK_EQ_INT(st, cases[i].want);
        CX_CHECK(strstr(err, cases[i].text) != NULL);
    }
    /* a cursor name over 64 bytes, well framed */
    uint8_t big[256] = {CX_SP_CURSOR_GET, 6, 0, 'c', 'u', 'r', 's', 'e', 'd', 200, 0};
    memset(big + 11, 'x', 200);
    CX_CHECK_EQ_INT(raw_request(fd, big, 211, err, sizeof err), -EINVAL);
    CX_CHECK(strstr(err, "200 bytes") != NULL);
    /* the same connection still works */
    uint8_t ok[] = {CX_SP_CURSOR_LIST, 6, 0, 'c', 'u', 'r', 's', 'e', 'd'};
    CX_CHECK_EQ_INT(raw_request(fd, ok, sizeof ok, err, sizeof err), 0);
    close(fd);
    CHECK_SERVED("malformed cursor requests");
}

/* Encodes q into out (cap bytes); returns its length. */
static uint32_t enc_request(const struct cx_sp_request *q, uint8_t *out, size_t cap)
{
    struct cx_sp_buf b = {.p = out, .cap = cap, .fixed = 1};
    return cx_sp_encode_request(&b, q) == 0 ? (uint32_t)b.len : 0;
}

/* Reader-group requests (GROUP_*) cut short, with lying or odd lengths, trailing bytes, bad
 * group names, unknown members and positions not held: each gets an error reply saying what
 * was wrong, the connection stays usable, and others are served. */
CX_TEST(malformed_group_requests_get_an_error_reply)
{
    CX_CHECK_EQ_INT(env_up(0), 0);
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(E.tcp, &c), 0);
    CX_CHECK_EQ_INT(cx_space_get(c, "grouped", 0, "", &info), 0);
    cx_space_disconnect(c);
#define GS(x) {x, (uint16_t)(sizeof x - 1)}
    uint8_t pos5[8] = {5}, odd[5] = {1};
    static const struct {
        const char *what;
        struct cx_sp_request q;
        int cut, extra; /* bytes cut off the end, zero bytes added */
        int want;
        const char *text;
    } cases[] = {
        {"join, no ack wait", {.op = CX_SP_GROUP_JOIN, .name = GS("grouped"), .cursor = GS("g")}, 4, 0, -EPROTO,
         "ack wait"},
        {"next, short member", {.op = CX_SP_GROUP_NEXT, .name = GS("grouped"), .cursor = GS("g")}, 1, 0, -EPROTO,
         "member"},
        {"ack, cut positions", {.op = CX_SP_GROUP_ACK, .name = GS("grouped"), .cursor = GS("g"), .token = 1}, 2, 0,
         -EPROTO, "positions"},
        {"list, trailing", {.op = CX_SP_GROUP_LIST, .name = GS("grouped")}, 0, 2, -EPROTO, "trailing"},
        {"join, bad group", {.op = CX_SP_GROUP_JOIN, .name = GS("grouped"), .cursor = GS("a/b")}, 0, 0, -EINVAL,
         "character"},
        {"join, empty group", {.op = CX_SP_GROUP_JOIN, .name = GS("grouped"), .cursor = GS("")}, 0, 0, -EINVAL,
         "empty"},
        {"next, no such member", {.op = CX_SP_GROUP_NEXT, .name = GS("grouped"), .cursor = GS("g"), .token = 99},
         0, 0, -ESRCH, "no member 99"},
        {"leave, unbound pipe", {.op = CX_SP_GROUP_LEAVE, .name = GS("nop"), .cursor = GS("g"), .token = 1}, 0, 0,
         -ENOENT, "nop"},
        {"join", {.op = CX_SP_GROUP_JOIN, .name = GS("grouped"), .cursor = GS("fresh")}, 0, 0, 0, ""},
        {"next, nothing written", {.op = CX_SP_GROUP_NEXT, .name = GS("grouped"), .cursor = GS("fresh"), .token = 1},
         0, 0, -EAGAIN, "nothing to hand out"},
    };
    int fd = hp_connect(E.tcp);
    CX_CHECK(fd >= 0);
    char err[1100];
    uint8_t p[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cx_sp_request q = cases[i].q;
        if (q.op == CX_SP_GROUP_ACK)
            q.blob = pos5, q.blob_len = sizeof pos5;
        uint32_t len = enc_request(&q, p, sizeof p - 8);
        CX_CHECK(len > (uint32_t)cases[i].cut);
        len = len - (uint32_t)cases[i].cut;
        memset(p + len, 0, (size_t)cases[i].extra);
        len += (uint32_t)cases[i].extra;
        int st = raw_request(fd, p, len, err, sizeof err);
        fprintf(stderr, "  case group %s: status %d \"%s\"\n", cases[i].what, st, err);
        CX_CHECK_EQ_INT(st, cases[i].want);
        CX_CHECK(strstr(err, cases[i].text) != NULL);
    }
    /* positions not a multiple of 8 bytes; a position the member does not hold */
    struct cx_sp_request q = {.op = CX_SP_GROUP_ACK, .name = GS("grouped"), .cursor = GS("fresh"), .token = 1,
                              .blob = odd, .blob_len = sizeof odd};
    uint32_t len = enc_request(&q, p, sizeof p);
    CX_CHECK_EQ_INT(raw_request(fd, p, len, err, sizeof err), -EPROTO);
    CX_CHECK(strstr(err, "8 per position") != NULL);
    q.blob = pos5, q.blob_len = sizeof pos5;
    len = enc_request(&q, p, sizeof p);
    CX_CHECK_EQ_INT(raw_request(fd, p, len, err, sizeof err), -ENOENT);
    CX_CHECK(strstr(err, "does not hold segment 5") != NULL);
    /* the same connection still works: the group is listed with its member */
    q = (struct cx_sp_request){.op = CX_SP_GROUP_LIST, .name = GS("grouped")};
    len = enc_request(&q, p, sizeof p);
    CX_CHECK_EQ_INT(raw_request(fd, p, len, err, sizeof err), 0);
#undef GS
    close(fd);
    CHECK_SERVED("malformed group requests");
}

CX_TEST(zz_stop)
{
    if (E.up > 0) {
        cx_space_server_stop(E.s);
        tmpdir_remove(E.dir);
    }
    E.up = 0;
}

#else
CX_TEST(hostile_input)
{
    CX_SKIP("built without OpenSSL 3 (CX_NO_TLS): the TLS cases need it");
}
#endif

CX_TEST_MAIN()
