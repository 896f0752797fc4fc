/* The direct writer->reader link over each transport a pipe may use: a real space server
 * process, a reader process whose runtime listens on tcp, shm, ucx or tls, and a writer
 * process that dials it. The reader gets exactly 0..N-1 in order, and pi_link says on both
 * sides which transport carried the segments. Also: a scheme a pipe cannot use is EINVAL.
 * Each way of naming the listener is used once: the default, a bare scheme in pi_options,
 * a bare scheme in CONFLUX_PIPE_LISTEN, a full address. And hostile peers on the reader's
 * tls listener do not hold the writer's link. */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "pipe/cx_pipe_int.h"
#include "pipe/pipe_testutil.h"
#include "testutil/hostile_peer.h"
#include "testutil/ucx_test_env.h"

#ifdef CX_HAVE_TLS
#include "transport/tls/tls_testcerts.h"
#endif

#include <fcntl.h>

#define N 2000

static struct space_proc SP;
static int SP_up;

static int space_once(void)
{
    if (!SP_up)
        SP_up = space_up(&SP) == 0 ? 1 : -1;
    return SP_up > 0 ? 0 : -1;
}

/* The reader process: listens as listen / env say, attaches, tells the parent, reads all. */
static void reader_main(const char *pipe_name, const char *listen, const char *env, const char *scheme,
                        int ready_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (env)
        setenv("CONFLUX_PIPE_LISTEN", env, 1);
    else
        unsetenv("CONFLUX_PIPE_LISTEN");
    struct pi_options o = {.listen = listen};
    int s = pi_space_open(SP.addr, &o);
    int r = s < 0 ? -1 : pi_attach(pipe_name, s);
    if (r < 0) {
        fprintf(stderr, "  reader: open: %s\n", cx_errmsg());
        _exit(2);
    }
    if (write(ready_fd, "r", 1) != 1)
        _exit(3);
    if (read_all(r, 0, N, 20000) != N)
        _exit(4); /* read_all said why */
    struct pi_reader_stats st;
    pi_reader_stats(r, &st);
    fprintf(stderr, "    reader (%s): %llu segments from the writer, %llu from the space\n", scheme,
            (unsigned long long)st.from_writer, (unsigned long long)st.from_space);
    if (pipe_link_is(r, scheme, "reader") < 0)
        _exit(5);
    pi_shutdown();
    _exit(0);
}

/* The writer process: waits for the reader's direct link, writes 0..N-1, checks the link. */
static void writer_main(const char *pipe_name, const char *scheme)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int s = pi_space_open(SP.addr, NULL);
    int w = s < 0 ? -1 : pi_create(pipe_name, s, PI_CREATE);
    if (w < 0) {
        fprintf(stderr, "  writer: open: %s\n", cx_errmsg());
        _exit(2);
    }
    if (wait_direct_link(w, 20000, "writer") < 0) /* up to 20 s: a loaded machine */
        _exit(3);
    if (write_n(w, 0, N, 0) < 0)
        _exit(4);
    if (pipe_link_is(w, scheme, "writer") < 0)
        _exit(5);
    if (pi_close(w) != 0) {
        fprintf(stderr, "  writer: pi_close: %s\n", cx_errmsg());
        _exit(6);
    }
    pi_shutdown();
    _exit(0);
}

static int child_ok(pid_t pid, const char *who)
{
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "  %s exited with status %#x\n", who, st);
        return 0;
    }
    return 1;
}

/* One writer and one reader process stream N segments over the reader's listener. */
static int stream_over(const char *pipe_name, const char *listen, const char *env, const char *scheme)
{
    int ready[2];
    if (space_once() < 0 || pipe(ready) != 0)
        return -1;
    pid_t rd = fork();
    if (rd == 0) {
        close(ready[0]);
        reader_main(pipe_name, listen, env, scheme, ready[1]);
    }
    close(ready[1]);
    char c;
    int up = read(ready[0], &c, 1) == 1;
    close(ready[0]);
    if (!up) { /* the reader failed to open; its status says how */
        child_ok(rd, "reader");
        return -1;
    }
    pid_t wr = fork();
    if (wr == 0)
        writer_main(pipe_name, scheme);
    int ok = child_ok(wr, "writer");
    ok &= child_ok(rd, "reader");
    return ok ? 0 : -1;
}

CX_TEST(tcp_by_default)
{
    CX_CHECK_EQ_INT(stream_over("links-tcp", NULL, NULL, "tcp"), 0);
}

CX_TEST(shm_bare_scheme_in_options)
{
    CX_CHECK_EQ_INT(stream_over("links-shm", "shm", NULL, "shm"), 0);
}

CX_TEST(ucx_bare_scheme_in_environment)
{
#ifndef CX_HAVE_UCX
    CX_SKIP("built without UCX (libucx-dev absent)");
#else
    ucx_test_env(); /* as the transport's tests */
    CX_CHECK_EQ_INT(stream_over("links-ucx", NULL, "ucx", "ucx"), 0);
#endif
}

CX_TEST(tls_full_address_with_test_certificates)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (libssl-dev absent)");
#else
    char dir[64] = "/tmp/cxpipe-tls-XXXXXX";
    int rc = tc_env_up(dir);
    int res = rc ? -2 : stream_over("links-tls", "tls://127.0.0.1:0", NULL, "tls");
    tc_env_down(dir);
    CX_CHECK_EQ_INT(res, 0);
#endif
}

#ifdef CX_HAVE_TLS
#define HS_MS 4000 /* the reader's handshake deadline (CONFLUX_HANDSHAKE_MS) in these tests */

/* A reader listening on scheme with its stderr going to log: tells the parent its
 * listener's address, reads all N, says "d" and waits for the parent's word before leaving
 * (its listener must stay up while the parent watches the hostile connections). */
static void hostile_reader_main(const char *scheme, const char *log, int to_parent, int from_parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (lf < 0 || dup2(lf, 2) < 0)
        _exit(2);
    char listen[64], name[64];
    if (strcmp(scheme, "shm") == 0) /* a bare scheme: its default abstract socket */
        snprintf(listen, sizeof listen, "shm");
    else
        snprintf(listen, sizeof listen, "%s://127.0.0.1:0", scheme);
    snprintf(name, sizeof name, "links-%s-hostile", scheme);
    struct pi_options o = {.listen = listen};
    int s = pi_space_open(SP.addr, &o);
    int r = s < 0 ? -1 : pi_attach(name, s);
    if (r < 0) {
        fprintf(stderr, "  reader: open: %s\n", cx_errmsg());
        _exit(3);
    }
    char addr[160];
    snprintf(addr, sizeof addr, "%s", g_pi.listen_addr);
    if (write(to_parent, addr, sizeof addr) != (ssize_t)sizeof addr)
        _exit(4);
    if (read_all(r, 0, N, 30000) != N)
        _exit(5);
    char c;
    if (write(to_parent, "d", 1) != 1 || read(from_parent, &c, 1) != 1)
        _exit(6);
    pi_shutdown();
    _exit(0);
}

/* The reader's listener on scheme while a peer sits on it saying nothing and another
 * started a handshake it never finishes: the writer's direct link is accepted and N
 * segments stream through while both are still connected (so well before their handshake
 * deadline), and both are then closed at the deadline, each with a line in the reader's
 * log. 0, or -1 with the failed checks printed. */
static int hostile_over(const char *scheme)
{
    char dir[64] = "/tmp/cxpipe-hostile-XXXXXX", log[128], name[64];
    if (tc_env_up(dir) < 0 || space_once() < 0)
        return -1;
    snprintf(log, sizeof log, "%s/reader.log", dir);
    snprintf(name, sizeof name, "links-%s-hostile", scheme);
    char hs[16];
    snprintf(hs, sizeof hs, "%d", HS_MS);
    setenv("CONFLUX_HANDSHAKE_MS", hs, 1);
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0)
        return -1;
    pid_t rd = fork();
    if (rd == 0) {
        close(up[0]);
        close(down[1]);
        hostile_reader_main(scheme, log, up[1], down[0]);
    }
    close(up[1]);
    close(down[0]);
    unsetenv("CONFLUX_HANDSHAKE_MS");
    char addr[160] = "";
    int got = read(up[0], addr, sizeof addr) == (ssize_t)sizeof addr;
    int silent = got ? hp_connect(addr) : -1;
    int partial = got ? hp_connect(addr) : -1;
    int sent = partial >= 0 && hp_partial_handshake(partial, scheme) == 0;
    double t0 = hp_now_ms();
    pid_t wr = got ? fork() : -1;
    if (wr == 0)
        writer_main(name, scheme);
    int served = wr > 0 && child_ok(wr, "writer");
    char c = 0;
    served = served && read(up[0], &c, 1) == 1 && c == 'd';
    double ms = hp_now_ms() - t0;
    int silent_open = silent >= 0 && !hp_closed_by_server(silent, 0);
    int partial_open = partial >= 0 && !hp_closed_by_server(partial, 0);
    fprintf(stderr, "  %s: writer served in %.0f ms with a silent and a partial peer connected "
            "(still open: %d, %d; deadline %d ms)\n", addr, ms, silent_open, partial_open, HS_MS);
    int silent_closed = silent >= 0 && hp_closed_by_server(silent, HS_MS + 10000);
    int partial_closed = partial >= 0 && hp_closed_by_server(partial, HS_MS + 10000);
    if (write(down[1], "g", 1) != 1)
        kill(rd, SIGKILL);
    int reader_ok = child_ok(rd, "reader");
    char text[4096] = "";
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "dropped a direct link before its hello")); p++)
        lines++;
    fprintf(stderr, "  reader's log:\n%s", text);
    close(silent);
    close(partial);
    close(up[0]);
    close(down[1]);
    tc_env_down(dir);
    struct { int ok; const char *what; } checks[] = {
        {got && silent >= 0 && sent, "set-up"},
        {served, "the writer served"},
        {silent_open && partial_open, "both hostile peers still connected then"},
        {silent_closed && partial_closed, "both closed at the deadline"},
        {reader_ok, "the reader's exit"},
        {lines == 2 && strstr(text, strcmp(scheme, "tcp") ? "handshake not done within" : "no hello within"),
         "two log lines"},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++)
        if (!checks[i].ok) {
            fprintf(stderr, "  check failed: %s\n", checks[i].what);
            bad = -1;
        }
    return bad;
}
#endif

CX_TEST(tls_silent_and_partial_peers_do_not_hold_the_readers_listener)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (libssl-dev absent)");
#else
    CX_CHECK_EQ_INT(hostile_over("tls"), 0);
#endif
}

CX_TEST(tcp_silent_and_half_frame_peers_do_not_hold_the_readers_listener)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (the test's certificates need OpenSSL)");
#else
    CX_CHECK_EQ_INT(hostile_over("tcp"), 0);
#endif
}

CX_TEST(shm_silent_peer_does_not_hold_the_readers_listener)
{
#ifndef CX_HAVE_TLS
    CX_SKIP("built without TLS (the test's certificates need OpenSSL)");
#else
    CX_CHECK_EQ_INT(hostile_over("shm"), 0);
#endif
}

CX_TEST(ucx_silent_and_partial_peers_do_not_hold_the_readers_listener)
{
#if !defined(CX_HAVE_UCX) || !defined(CX_HAVE_TLS)
    CX_SKIP("built without UCX or TLS (the test's certificates need OpenSSL)");
#else
    ucx_test_env();
    CX_CHECK_EQ_INT(hostile_over("ucx"), 0);
#endif
}

CX_TEST(a_scheme_a_pipe_cannot_use_is_einval)
{
    CX_CHECK_EQ_INT(space_once(), 0);
    const char *bad[] = {"udp://127.0.0.1:0", "bogus", "tcpx://127.0.0.1:0", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct pi_options o = {.listen = bad[i]};
        errno = 0;
        CX_CHECK_EQ_INT(pi_space_open(SP.addr, &o), -1);
        CX_CHECK_EQ_INT(errno, EINVAL);
        CX_CHECK(strstr(cx_errmsg(), "tcp, shm, ucx, tls or dpdk") != NULL);
    }
    setenv("CONFLUX_PIPE_LISTEN", "carrier-pigeon", 1);
    errno = 0;
    int s = pi_space_open(SP.addr, NULL);
    int e = errno;
    unsetenv("CONFLUX_PIPE_LISTEN");
    CX_CHECK_EQ_INT(s, -1);
    CX_CHECK_EQ_INT(e, EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "CONFLUX_PIPE_LISTEN") != NULL);
    /* nothing was left half-open: a good address works afterwards */
    s = pi_space_open(SP.addr, NULL);
    CX_CHECK(s >= 0);
    char got[PI_LINK_MAX];
    CX_CHECK_EQ_INT(pi_link(100000, got, sizeof got), -1);
    CX_CHECK_EQ_INT(errno, EBADF);
    int w = pi_create("links-einval", s, PI_CREATE);
    CX_CHECK(w >= 0);
    CX_CHECK_EQ_INT(pi_link(w, got, sizeof got), 0);
    CX_CHECK_STR(got, ""); /* no reader: no direct link */
    CX_CHECK_EQ_INT(pi_link(w, got, 0), -1);
    CX_CHECK_EQ_INT(errno, ERANGE);
    CX_CHECK_EQ_INT(pi_close(w), 0);
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
}

/* dpdk is a transport a pipe may use (dpdk_layers_test.c runs it); a process without a DPDK
 * port is told why at open, and nothing is left half-open */
CX_TEST(dpdk_without_a_port_fails_clearly)
{
#ifndef CX_HAVE_DPDK
    CX_SKIP("built without DPDK (libdpdk-dev absent)");
#else
    CX_CHECK_EQ_INT(space_once(), 0);
    const char *args = getenv("CONFLUX_DPDK_ARGS");
    if (args && *args)
        CX_SKIP("CONFLUX_DPDK_ARGS is set here: this process could start a port");
    struct pi_options o = {.listen = "dpdk"};
    errno = 0;
    CX_CHECK_EQ_INT(pi_space_open(SP.addr, &o), -1);
    CX_CHECK_EQ_INT(errno, EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "CONFLUX_DPDK_ARGS") != NULL);
    int s = pi_space_open(SP.addr, NULL);
    CX_CHECK(s >= 0);
    CX_CHECK_EQ_INT(pi_shutdown(), 0);
#endif
}

CX_TEST(zz_space_down)
{
    if (SP_up > 0)
        space_down(&SP);
    SP_up = 0;
}

CX_TEST_MAIN()
