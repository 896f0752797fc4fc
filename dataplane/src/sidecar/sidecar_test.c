/* confluxd --role=sidecar as a real process (build/bin/confluxd, built by `make test`):
 * health and readiness endpoints, readiness following a real space server, metrics that
 * parse as Prometheus text, JSON log lines, strict options, a clean SIGTERM. */
#include "common/cx_test.h"
#include "sidecar/cx_sc_proto.h"
#include "sidecar/sc_testutil.h"

#include <ctype.h>
#include <sys/stat.h>
#include <sys/un.h>

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char p[4][128];
    static int i;
    if (!g_dir[0]) {
        snprintf(g_dir, sizeof g_dir, "/tmp/cxsc-test-XXXXXX");
        if (!mkdtemp(g_dir))
            return NULL;
    }
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", g_dir, name);
    return p[i];
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || getsockname(fd, (struct sockaddr *)&sa, &l) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(sa.sin_port);
}

/* Checks Prometheus text format 0.0.4: # HELP / # TYPE lines, samples `name{l="v",...} value`
 * whose family has a TYPE, histogram buckets cumulative. Returns the number of samples, or
 * -(line number) of the first bad line. */
static int prom_check(const char *text, int *histograms)
{
    char types[256][96];
    int ntypes = 0, samples = 0, lineno = 0;
    double last_bucket = -1;
    char last_hist[160] = "";
    *histograms = 0;
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        if (!end)
            return -(lineno + 1); /* every line ends with a newline */
        lineno++;
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)(end - l), l);
        l = end + 1;
        if (strncmp(line, "# HELP ", 7) == 0)
            continue;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[96], type[32];
            if (sscanf(line + 7, "%95s %31s", name, type) != 2 ||
                (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram")))
                return -lineno;
            if (ntypes < 256)
                snprintf(types[ntypes++], sizeof types[0], "%s", name);
            *histograms += strcmp(type, "histogram") == 0;
            continue;
        }
        if (line[0] == '#')
            return -lineno;
        const char *p = line;
        if (!(isalpha((unsigned char)*p) || *p == '_' || *p == ':'))
            return -lineno;
        while (isalnum((unsigned char)*p) || *p == '_' || *p == ':')
            p++;
        char name[160];
        snprintf(name, sizeof name, "%.*s", (int)(p - line), line);
        char labels[1024] = "";
        if (*p == '{') {
            const char *ls = p + 1;
            p++;
            while (*p != '}') {
                if (!(isalpha((unsigned char)*p) || *p == '_'))
                    return -lineno;
                while (isalnum((unsigned char)*p) || *p == '_')
                    p++;
                if (p[0] != '=' || p[1] != '"')
                    return -lineno;
                p += 2;
                while (*p && *p != '"') {
                    if (*p == '\\') {
                        if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                            return -lineno;
                        p++;
                    }
                    p++;
                }
                if (*p != '"')
                    return -lineno;
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}')
                    return -lineno;
            }
            snprintf(labels, sizeof labels, "%.*s", (int)(p - ls), ls);
            p++;
        }
        if (*p != ' ')
            return -lineno;
        p++;
        char *vend;
        double v = strtod(p, &vend);
        if (vend == p || (*vend && *vend != ' '))
            return -lineno;
        /* the family: the name, or without a histogram suffix */
        int known = 0;
        for (int i = 0; i < ntypes && !known; i++) {
            size_t tl = strlen(types[i]);
            known = strcmp(name, types[i]) == 0 ||
                    (strncmp(name, types[i], tl) == 0 &&
                     (!strcmp(name + tl, "_bucket") || !strcmp(name + tl, "_sum") || !strcmp(name + tl, "_count")));
        }
        if (!known)
            return -lineno;
        size_t nl = strlen(name);
        if (nl > 7 && strcmp(name + nl - 7, "_bucket") == 0) {
            char series[160];
            const char *le = strstr(labels, "le=\"");
            snprintf(series, sizeof series, "%.*s", le ? (int)(le - labels) : 0, labels);
            if (strcmp(series, last_hist) != 0) {
                snprintf(last_hist, sizeof last_hist, "%s", series);
                last_bucket = -1;
            }
            if (v < last_bucket) /* buckets are cumulative */
                return -lineno;
            last_bucket = v;
        }
        samples++;
    }
    return samples;
}

CX_TEST(health_ready_and_not_found)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CONFLUXD);
    const char *sock = tmp_path("a.sock");
    CX_CHECK(sock);
    char sockarg[160], hp[64], body[4096];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    const char *args[] = {"--role=sidecar", sockarg, "--transport=tcp", "--http=127.0.0.1:0",
                          "--inputs=raw,calib", "--outputs=result", "--quiet", NULL};
    struct proc p;
    CX_CHECK_EQ_INT(proc_start(&p, args, 0), 0);
    CX_CHECK(strncmp(p.line, "listening unix:", 15) == 0);
    word(p.line, 3, hp, sizeof hp);
    struct stat st;
    CX_CHECK(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode));
    CX_CHECK_EQ_INT(http_get(hp, "/healthz", body, sizeof body), 200);
    CX_CHECK_STR(body, "ok\n");
    CX_CHECK_EQ_INT(http_get(hp, "/readyz", body, sizeof body), 200);
    CX_CHECK_EQ_INT(http_get(hp, "/nothing-here", body, sizeof body), 404);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
    CX_CHECK(stat(sock, &st) != 0); /* removed on the way out */
}

static int tcp_to(const char *hostport)
{
    char host[64];
    int port;
    if (sscanf(hostport, "%63[^:]:%d", host, &port) != 2)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Silent, slow and too many HTTP clients: the probes are answered meanwhile, and the
 * silent ones are closed after the 2 s the server gives an exchange. */
CX_TEST(http_clients_that_stall_do_not_hold_back_probes)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CONFLUXD);
    const char *sock = tmp_path("h.sock");
    CX_CHECK(sock);
    char sockarg[160], hp[64], body[4096];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", "--quiet", NULL};
    struct proc p;
    CX_CHECK_EQ_INT(proc_start(&p, args, 0), 0);
    word(p.line, 3, hp, sizeof hp);
    enum { SILENT = 300 }; /* more than the server keeps: the oldest are closed for new ones */
    int fds[SILENT + 1], opened = 0;
    for (int i = 0; i < SILENT; i++)
        opened += (fds[i] = tcp_to(hp)) >= 0;
    CX_CHECK_EQ_INT(opened, SILENT);
    fds[SILENT] = tcp_to(hp); /* and one that sends half a request, a byte at a time */
    CX_CHECK(fds[SILENT] >= 0 && send(fds[SILENT], "GET /met", 8, MSG_NOSIGNAL) == 8);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CX_CHECK_EQ_INT(http_get(hp, "/healthz", body, sizeof body), 200);
    CX_CHECK_EQ_INT(http_get(hp, "/metrics", body, sizeof body), 200);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "  two probes behind %d stalled clients: %.3f s\n", SILENT + 1, took);
    CX_CHECK(took < 1.9); /* served in turn, each stalled client would cost 2 s */
    /* the stalled ones are closed by the server: a read sees the end within a few seconds */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fds[SILENT], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char b[64];
    CX_CHECK_EQ_INT((int)recv(fds[SILENT], b, sizeof b, 0), 0);
    setsockopt(fds[SILENT - 1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    CX_CHECK_EQ_INT((int)recv(fds[SILENT - 1], b, sizeof b, 0), 0);
    for (int i = 0; i <= SILENT; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
}

/* A hello as user uid (a forked child that drops to it) naming session `session`: 0 when
 * the sidecar accepts it, 1 when it refuses with EACCES, 2 otherwise. With hold_fd, the
 * child keeps its connection open until its parent writes to that pipe. */
static int hello_as(const char *sock, uid_t uid, uint64_t session, int hold_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(uid) < 0 || setuid(uid) < 0)
            _exit(3);
        if (!sock)
            _exit(4); /* a probe: the switch worked */
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            _exit(errno == EACCES ? 1 : 2);
        struct cx_sc_req q = {.op = CX_SC_HELLO, .a = {(int64_t)session, CX_SC_CONN_CALLS, getpid(), CX_SC_PROTO_VERSION}};
        static struct cx_sc_rep rep;
        if (send(fd, &q, CX_SC_REQ_HDR, MSG_NOSIGNAL) < 0 || recv(fd, &rep, sizeof rep, 0) < (ssize_t)CX_SC_REP_HDR)
            _exit(2);
        if (rep.rc == 0 && hold_fd >= 0) {
            char b;
            if (read(hold_fd, &b, 1) < 0) {
            }
        }
        _exit(rep.rc == 0 ? 0 : rep.rc == -EACCES ? 1 : 2);
    }
    return pid;
}

static int exit_code(pid_t pid)
{
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Who may use a sidecar: the socket's mode, --allow-uid (checked on the peer's credentials,
 * not on what the hello says), and a session only for the user that opened it. */
CX_TEST(only_allowed_users_connect_and_sessions_are_their_users_own)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CONFLUXD);
    if (geteuid() != 0)
        CX_SKIP("needs root to act as other users (CI runs as root)");
    /* root in a user namespace may not become an arbitrary user: then only what needs no
     * other user is checked, and the log says so */
    int can_switch = exit_code(hello_as(NULL, 4242, 0, -1)) == 4;
    if (!can_switch)
        fprintf(stderr, "  this root cannot become uid 4242: checking the socket's mode and own sessions only\n");
    const char *sock = tmp_path("u.sock");
    CX_CHECK(sock);
    chmod(g_dir, 0755); /* the other users must reach the socket inside */
    char sockarg[160];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", sock);
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", "--allow-uid=4242,4244",
                          "--socket-mode=0666", NULL};
    struct proc p;
    CX_CHECK_EQ_INT(proc_start(&p, args, 1), 0);
    struct stat st;
    CX_CHECK(stat(sock, &st) == 0 && (st.st_mode & 0777) == 0666);
    if (can_switch) {
        CX_CHECK_EQ_INT(exit_code(hello_as(sock, 4243, 7, -1)), 1); /* not in the list */
        int hold[2];
        CX_CHECK(pipe(hold) == 0);
        pid_t owner = hello_as(sock, 4242, 0x5e55, hold[0]);    /* opens session 0x5e55 */
        usleep(200000);
        CX_CHECK_EQ_INT(exit_code(hello_as(sock, 4244, 0x5e55, -1)), 1); /* another user's */
        CX_CHECK_EQ_INT(exit_code(hello_as(sock, 4244, 0x5e56, -1)), 0); /* its own */
        CX_CHECK(write(hold[1], "x", 1) == 1);
        CX_CHECK_EQ_INT(exit_code(owner), 0);
        close(hold[0]);
        close(hold[1]);
    }
    /* this process's own user is always let in, and joins its own session again */
    CX_CHECK_EQ_INT(exit_code(hello_as(sock, geteuid(), 0x5e57, -1)), 0);
    CX_CHECK_EQ_INT(exit_code(hello_as(sock, geteuid(), 0x5e57, -1)), 0);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
    /* a mode without others' access keeps them out at connect */
    const char *args2[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", "--socket-mode=0600", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&p, args2, 0), 0);
    CX_CHECK(stat(sock, &st) == 0 && (st.st_mode & 0777) == 0600);
    if (can_switch)
        CX_CHECK_EQ_INT(exit_code(hello_as(sock, 4243, 9, -1)), 1);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
}

CX_TEST(readyz_follows_the_space)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    int port = free_port();
    CX_CHECK(port > 0);
    char sockarg[160], spacearg[80], listenarg[80], dirarg[160], hp[64], body[4096];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", tmp_path("b.sock"));
    snprintf(spacearg, sizeof spacearg, "--space=tcp://127.0.0.1:%d", port);
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", spacearg, "--quiet", NULL};
    struct proc p, s;
    CX_CHECK_EQ_INT(proc_start(&p, args, 0), 0);
    word(p.line, 3, hp, sizeof hp);
    CX_CHECK_EQ_INT(http_get(hp, "/readyz", body, sizeof body), 503);
    CX_CHECK(strstr(body, "not reachable"));
    CX_CHECK_EQ_INT(http_get(hp, "/healthz", body, sizeof body), 200); /* alive all the same */
    /* a real space server on that port: ready */
    snprintf(listenarg, sizeof listenarg, "--listen=tcp://127.0.0.1:%d", port);
    snprintf(dirarg, sizeof dirarg, "--dir=%s", tmp_path("space"));
    const char *sargs[] = {"--role=space", dirarg, listenarg, "--no-udp", "--quiet", NULL};
    CX_CHECK_EQ_INT(proc_start(&s, sargs, 0), 0);
    CX_CHECK_EQ_INT(http_get(hp, "/readyz", body, sizeof body), 200);
    CX_CHECK_EQ_INT(proc_stop(&s, SIGTERM), 0);
    CX_CHECK_EQ_INT(http_get(hp, "/readyz", body, sizeof body), 503);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
}

CX_TEST(metrics_parse_as_prometheus_text)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    char sockarg[160], hp[64];
    static char body[1 << 20];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", tmp_path("c.sock"));
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", "--inputs=raw",
                          "--outputs=out\"q", NULL};
    struct proc p;
    /* a name with a quote is refused: names are checked */
    CX_CHECK(proc_start(&p, args, 1) < 0);
    CX_CHECK(proc_stop(&p, SIGTERM) == 2);
    args[4] = "--channels=ctl";
    setenv("CONFLUX_POD_NAME", "pod-\"7\"", 1); /* escaped in labels */
    CX_CHECK_EQ_INT(proc_start(&p, args, 1), 0);
    unsetenv("CONFLUX_POD_NAME");
    word(p.line, 3, hp, sizeof hp);
    CX_CHECK_EQ_INT(http_get(hp, "/metrics", body, sizeof body), 200);
    int hist;
    int n = prom_check(body, &hist);
    if (n <= 0)
        fprintf(stderr, "  bad metrics line %d:\n%s\n", -n, body);
    CX_CHECK(n > 0);
    CX_CHECK(strstr(body, "conflux_sidecar_declared_channel{name=\"raw\",direction=\"input\"} 1\n"));
    CX_CHECK(strstr(body, "conflux_sidecar_declared_channel{name=\"ctl\",direction=\"any\"} 1\n"));
    CX_CHECK(strstr(body, "pod=\"pod-\\\"7\\\"\""));
    CX_CHECK(strstr(body, "# TYPE conflux_sidecar_request_duration_seconds histogram"));
    CX_CHECK(strstr(body, "conflux_sidecar_applications 0\n"));
    /* the validator itself refuses what is not Prometheus text */
    CX_CHECK(prom_check("# TYPE x counter\nx{a=\"b} 1\n", &hist) < 0);
    CX_CHECK(prom_check("y 1\n", &hist) < 0);
    CX_CHECK(prom_check("# TYPE h histogram\nh_bucket{le=\"1\"} 5\nh_bucket{le=\"+Inf\"} 4\n", &hist) < 0);
    CX_CHECK(prom_check("# TYPE x gauge\nx one\n", &hist) < 0);
    CX_CHECK_EQ_INT(proc_stop(&p, SIGTERM), 0);
}

CX_TEST(logs_are_json_lines_and_sigterm_is_clean)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    char sockarg[160];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", tmp_path("d.sock"));
    const char *args[] = {"--role=sidecar", sockarg, "--http=127.0.0.1:0", NULL};
    setenv("CONFLUX_NAMESPACE", "ns1", 1);
    struct proc p;
    CX_CHECK_EQ_INT(proc_start(&p, args, 1), 0);
    unsetenv("CONFLUX_NAMESPACE");
    kill(p.pid, SIGTERM);
    int st;
    CX_CHECK(waitpid(p.pid, &st, 0) == p.pid);
    p.pid = 0;
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char logs[16384];
    slurp(p.err, logs, sizeof logs);
    close(p.out);
    close(p.err);
    int lines = 0;
    for (char *save = NULL, *l = strtok_r(logs, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(l);
        CX_CHECK(n > 2 && l[0] == '{' && l[n - 1] == '}');
        CX_CHECK(strncmp(l, "{\"ts\":\"", 7) == 0 && strstr(l, "\"level\":\"") && strstr(l, "\"msg\":\""));
        CX_CHECK(strstr(l, "\"namespace\":\"ns1\""));
        lines++;
    }
    CX_CHECK(lines >= 3); /* started, stopping, stopped */
}

/* Runs confluxd with args; returns its exit status (it exits by itself on a bad option;
 * one that started is killed: 137). */
static int run_bad(const char *const *args)
{
    struct proc p;
    proc_start(&p, args, 1);
    return proc_stop(&p, SIGKILL);
}

CX_TEST(bad_options_are_refused)
{
    if (access(CONFLUXD, X_OK) != 0)
        CX_SKIP("%s is not built", CONFLUXD);
    static const char *const cases[][6] = {
        {"--role=sidecar", NULL},                                            /* no socket */
        {"--role=sidecar", "--socket=/tmp/x.sock", "--transport=pigeon", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--inputs=a,,b", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--outputs=a b", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--ring-size=1000", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--ring-size=3M", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--http=9464", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--space=http://h:1", NULL},
        {"--role=sidecar", "--socket=/tmp/x.sock", "--dir=/tmp", NULL},      /* a space option */
        {"--role=sidecar", "--socket=/tmp/x.sock", "extra", NULL},
        {"--role=space", "--socket=/tmp/x.sock", NULL},                      /* a sidecar option */
        {"--role=gateway", NULL},
        {"--socket=/tmp/x.sock", NULL},                                      /* no role */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run_bad(cases[i]);
        if (rc != 2)
            fprintf(stderr, "  case %zu (%s %s %s) exited %d\n", i, cases[i][0],
                    cases[i][1] ? cases[i][1] : "", cases[i][1] && cases[i][2] ? cases[i][2] : "", rc);
        CX_CHECK_EQ_INT(rc, 2);
    }
    struct stat st;
    CX_CHECK(stat("/tmp/x.sock", &st) != 0); /* nothing was started */
}

CX_TEST(cleanup)
{
    if (g_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        CX_CHECK_EQ_INT(system(cmd), 0);
    }
}

CX_TEST_MAIN()
