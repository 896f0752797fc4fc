/* The space server and the sidecar over TLS, the first step toward two clusters joined
 * over the WAN: a real space server process listening on tcp:// and, with --listen2, on
 * tls:// at once; a real sidecar (--transport=tls) that reaches that space over tls://;
 * applications as forked processes. Certificates are made at test time
 * (../transport/tls/tls_testcerts.h): a CA, a node certificate it signed, and one from
 * another CA. And hostile peers on the sidecar's tls channel port hold no application. */
#define _GNU_SOURCE
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/sc_testutil.h"
#include "space/cx_space_client.h"
#include "testutil/hostile_peer.h"

#ifdef CX_HAVE_TLS
#include "transport/tls/tls_testcerts.h"

struct env {
    struct proc space;
    char dir[64], tcp_addr[96], tls_addr[96];
    char ca[128], cert[128], key[128], foreign[128], foreign_key[128];
};
static struct env E;
static int E_up;

static int make_certs(void)
{
    struct tc_id ca = {0}, ca2 = {0}, node = {0}, foreign = {0};
    int rc = tc_make(&ca, "Conflux test CA", NULL, NULL, -1, 30, 1) |
             tc_make(&ca2, "Some other CA", NULL, NULL, -1, 30, 1) |
             tc_make(&node, "node-1", "conflux-test", &ca, -1, 30, 2) |
             tc_make(&foreign, "intruder", "conflux-test", &ca2, -1, 30, 3) |
             tc_write(&ca, E.dir, "ca") | tc_write(&node, E.dir, "node") | tc_write(&foreign, E.dir, "foreign");
    struct tc_id *all[] = {&ca, &ca2, &node, &foreign};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tc_free(all[i]);
    snprintf(E.ca, sizeof E.ca, "%s/ca.pem", E.dir);
    snprintf(E.cert, sizeof E.cert, "%s/node.pem", E.dir);
    snprintf(E.key, sizeof E.key, "%s/node.key", E.dir);
    snprintf(E.foreign, sizeof E.foreign, "%s/foreign.pem", E.dir);
    snprintf(E.foreign_key, sizeof E.foreign_key, "%s/foreign.key", E.dir);
    return rc ? -1 : 0;
}

/* The node's credentials in the environment: every process started from here has them. */
static void node_env(void)
{
    setenv("CONFLUX_TLS_CA", E.ca, 1);
    setenv("CONFLUX_TLS_CERT", E.cert, 1);
    setenv("CONFLUX_TLS_KEY", E.key, 1);
}

static int env_up(void)
{
    if (E_up)
        return E_up > 0 ? 0 : -1;
    E_up = -1;
    snprintf(E.dir, sizeof E.dir, "/tmp/cxsc-tls-XXXXXX");
    if (!mkdtemp(E.dir) || make_certs() < 0)
        return -1;
    node_env();
    char dirarg[128];
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space", E.dir);
    const char *sargs[] = {"--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--listen2=tls://127.0.0.1:0",
                           "--no-udp", "--fsync=none", "--quiet", NULL};
    if (proc_start(&E.space, sargs, 0) < 0)
        return -1;
    /* "listening tcp://A udp  also tls://B" (no UDP address) */
    char also[16];
    word(E.space.line, 1, E.tcp_addr, sizeof E.tcp_addr);
    word(E.space.line, 3, also, sizeof also);
    word(E.space.line, 4, E.tls_addr, sizeof E.tls_addr);
    if (strcmp(also, "also") != 0 || strncmp(E.tls_addr, "tls://", 6) != 0)
        return -1;
    E_up = 1;
    return 0;
}

#define FAIL(...) do { fprintf(stderr, "  app %d: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, " (%s)\n", cx_errmsg()); _exit(1); } while (0)

#define SEGS 100

static void seg_fill(uint8_t *b, int i)
{
    for (int k = 0; k < 64; k++)
        b[k] = (uint8_t)(i * 31 + k);
}

/* Reads pipe `name` from the space at addr, embedded: exit 0 when it holds exactly SEGS
 * segments of seg_fill and ends. */
static void app_read(const char *addr, const char *name)
{
    int s = pi_space_open(addr, NULL), r = s < 0 ? -1 : pi_attach(name, s);
    if (r < 0)
        FAIL("attach %s at %s", name, addr);
    uint8_t b[128], want[64];
    long n;
    int i = 0;
    while ((n = pi_read_timeout(r, b, sizeof b, NULL, 20000)) >= 0) {
        seg_fill(want, i);
        if (n != 64 || memcmp(b, want, 64) != 0)
            FAIL("segment %d: %ld bytes, not what was written", i, n);
        i++;
    }
    if (errno != EPIPE || i != SEGS)
        FAIL("'%s' ended after %d segments (errno %d), want %d", name, i, errno, SEGS);
    _exit(0);
}

/* Writes SEGS segments to `name` and closes it: embedded at addr, or through the sidecar
 * at sock when sock is set. */
static void app_write(const char *addr, const char *sock, const char *name)
{
    if (sock && cx_sc_connect(sock) < 0)
        FAIL("connect %s", sock);
    int s = sock ? cx_sc_pi_space_open(addr, NULL) : pi_space_open(addr, NULL);
    int w = s < 0 ? -1 : sock ? cx_sc_pi_create(name, s, PI_CREATE) : pi_create(name, s, PI_CREATE);
    if (w < 0)
        FAIL("create %s at %s", name, addr);
    uint8_t b[64];
    for (int i = 0; i < SEGS; i++) {
        seg_fill(b, i);
        if ((sock ? cx_sc_pi_write(w, b, 64, NULL) : pi_write(w, b, 64, NULL)) != 64)
            FAIL("write %d", i);
    }
    if ((sock ? cx_sc_pi_close(w) : pi_close(w)) < 0)
        FAIL("close");
    _exit(0);
}

CX_TEST(space_serves_tcp_and_tls_clients_the_same_pipes)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    pid_t r = fork();
    if (r == 0)
        app_read(E.tcp_addr, "over-tls"); /* attached first: the writer streams to it too */
    pid_t w = fork();
    if (w == 0)
        app_write(E.tls_addr, NULL, "over-tls");
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    pid_t r2 = fork(); /* and a late reader over tls reads what a tcp client sees */
    if (r2 == 0)
        app_read(E.tls_addr, "over-tls");
    CX_CHECK_EQ_INT(wait_child(r2, 60), 0);
}

/* A client presenting the foreign certificate, or none: refused (exit 0 when it was). */
static void app_refused(int with_foreign)
{
    if (with_foreign) {
        setenv("CONFLUX_TLS_CERT", E.foreign, 1);
        setenv("CONFLUX_TLS_KEY", E.foreign_key, 1);
    } else {
        unsetenv("CONFLUX_TLS_CERT");
        unsetenv("CONFLUX_TLS_KEY");
    }
    struct cx_space_client *c;
    int rc = cx_space_connect(E.tls_addr, &c);
    if (rc == 0)
        FAIL("connected to %s with %s", E.tls_addr, with_foreign ? "another CA's certificate" : "no certificate");
    if (rc != -EACCES)
        FAIL("refused with %d, want -EACCES", rc);
    printf("    refused (%s): %s\n", with_foreign ? "another CA" : "no certificate", cx_errmsg());
    fflush(stdout);
    _exit(0);
}

/* The space still answers over tls after refusing others. */
static void app_lookup(void)
{
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    if (cx_space_connect(E.tls_addr, &c) < 0 || cx_space_lookup(c, "over-tls", &info) < 0)
        FAIL("lookup over tls");
    if (!info.ended || info.last_id != SEGS)
        FAIL("over-tls: ended %d, last %llu", info.ended, (unsigned long long)info.last_id);
    cx_space_disconnect(c);
    _exit(0);
}

CX_TEST(space_refuses_tls_clients_its_ca_did_not_sign)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    for (int foreign = 0; foreign < 2; foreign++) {
        pid_t p = fork();
        if (p == 0)
            app_refused(foreign);
        CX_CHECK_EQ_INT(wait_child(p, 30), 0);
    }
    pid_t p = fork();
    if (p == 0)
        app_lookup();
    CX_CHECK_EQ_INT(wait_child(p, 30), 0);
}

CX_TEST(sidecar_on_tls_reaches_its_space_over_tls)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    struct proc sc;
    char sock[128], sockarg[160], spacearg[128], chans[96];
    snprintf(sock, sizeof sock, "%s/sc.sock", E.dir);
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    snprintf(spacearg, sizeof spacearg, "--space=%s", E.tls_addr);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", spacearg, "--transport=tls",
                          "--listen=tls://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&sc, args, 0), 0);
    /* "listening unix:PATH http H:P channels ADDR": the channel runtime is on tls */
    CX_CHECK(strncmp(word(sc.line, 5, chans, sizeof chans), "tls://", 6) == 0);
    pid_t r = fork();
    if (r == 0)
        app_read(E.tcp_addr, "via-sidecar-tls");
    pid_t w = fork();
    if (w == 0)
        app_write(E.tls_addr, sock, "via-sidecar-tls");
    CX_CHECK_EQ_INT(wait_child(w, 60), 0);
    CX_CHECK_EQ_INT(wait_child(r, 60), 0);
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
}

/* Through the sidecar: creates an untyped channel, whose contact is the sidecar's channel
 * runtime, hands its id over and holds it until killed. */
static void app_contact(const char *sock, int idw)
{
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    if (cx_sc_connect(sock) < 0 || cx_sc_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_sc_chan_create(ctx, NULL, &ch) < 0)
        FAIL("channel through the sidecar");
    const char *id = cx_sc_chan_id(ch);
    if (write(idw, id, strlen(id) + 1) < 0)
        FAIL("write id");
    sleep(60);
    _exit(0);
}

/* Embedded, listening on tls: opens the channel by id (a dial to the sidecar's runtime). */
static void app_open(int idr)
{
    char id[256] = "";
    size_t n = 0;
    while (n < sizeof id - 1 && read(idr, id + n, 1) == 1 && id[n])
        n++;
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_ctx_opts o = {.listen = "tls://127.0.0.1:0", .tcp_only = 1};
    if (cx_chan_ctx_create(&o, &ctx) < 0 || cx_chan_open(ctx, id, 10000, &ch) < 0)
        FAIL("open %s", id);
    cx_chan_close(ch);
    cx_chan_ctx_destroy(ctx);
    _exit(0);
}

/* The sidecar's channel runtime on tls while one peer sits on its port saying nothing and
 * another sent half a ClientHello: an application opens a channel whose contact is that
 * runtime while both are still connected (well before their 4 s deadline), and both are
 * closed at the deadline, each with a line in the sidecar's stderr. */
CX_TEST(sidecar_channel_listener_is_not_held_by_silent_tls_peers)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    CX_CHECK_EQ_INT(env_up(), 0);
    enum { HS_MS = 4000 };
    struct proc sc;
    char sock[128], sockarg[160], spacearg[128], chans[96];
    snprintf(sock, sizeof sock, "%s/sc-hostile.sock", E.dir);
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    snprintf(spacearg, sizeof spacearg, "--space=%s", E.tls_addr);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", spacearg, "--transport=tls",
                          "--listen=tls://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
    setenv("CONFLUX_HANDSHAKE_MS", "4000", 1);
    int started = proc_start(&sc, args, 1);
    unsetenv("CONFLUX_HANDSHAKE_MS");
    CX_CHECK_EQ_INT(started, 0);
    CX_CHECK(strncmp(word(sc.line, 5, chans, sizeof chans), "tls://", 6) == 0);
    int silent = hp_connect(chans), partial = hp_connect(chans);
    CX_CHECK(silent >= 0 && partial >= 0 && hp_partial_client_hello(partial) == 0);
    double t0 = hp_now_ms();
    int idp[2];
    CX_CHECK(pipe(idp) == 0);
    pid_t c = fork();
    if (c == 0)
        app_contact(sock, idp[1]);
    pid_t o = fork();
    if (o == 0)
        app_open(idp[0]);
    int opened = wait_child(o, 30);
    double ms = hp_now_ms() - t0;
    int silent_open = !hp_closed_by_server(silent, 0), partial_open = !hp_closed_by_server(partial, 0);
    int silent_closed = hp_closed_by_server(silent, HS_MS + 10000);
    int partial_closed = hp_closed_by_server(partial, HS_MS + 10000);
    kill(c, SIGTERM);
    wait_child(c, 10);
    char text[65536] = "";
    size_t n = 0;
    struct pollfd pf = {.fd = sc.err, .events = POLLIN};
    while (n < sizeof text - 1 && poll(&pf, 1, 200) == 1) {
        ssize_t r = read(sc.err, text + n, sizeof text - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    text[n] = '\0';
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "conflux channel: dropped a connection before its hello"));
         p++)
        lines++;
    fprintf(stderr, "  channel opened in %.0f ms with a silent and a partial peer on %s (still "
            "open: %d, %d; deadline %d ms); %d log lines\n", ms, chans, silent_open,
            partial_open, HS_MS, lines);
    close(silent);
    close(partial);
    close(idp[0]);
    close(idp[1]);
    CX_CHECK_EQ_INT(proc_stop(&sc, SIGTERM), 0);
    CX_CHECK_EQ_INT(opened, 0);
    CX_CHECK(silent_open && partial_open);
    CX_CHECK(silent_closed && partial_closed);
    CX_CHECK_EQ_INT(lines, 2);
}

CX_TEST(teardown)
{
    if (E_up <= 0)
        return;
    CX_CHECK_EQ_INT(proc_stop(&E.space, SIGTERM), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", E.dir);
    CX_CHECK_EQ_INT(system(cmd), 0);
}

#else
CX_TEST(tls)
{
    CX_SKIP("built without OpenSSL (no tls driver)");
}
#endif

CX_TEST_MAIN()
