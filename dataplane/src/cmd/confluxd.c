/* confluxd: the Conflux daemon. One binary, one role per process:
 *
 *   confluxd --role=space [options]     the space server (name table, pipe cache, formats)
 *   confluxd --role=sidecar [options]   a pod's sidecar: serves its applications over a Unix
 *                                       socket and shared memory (../sidecar/README.md)
 *
 * Options are parsed strictly, per role: an unknown option, an option of the other role or a
 * bad value prints the usage and exits 2. SIGTERM or SIGINT stop either role cleanly.
 */
#include "api/cx_api.h"
#include "common/cx_error.h"
#include "common/cx_fabric_env.h"
#include "sidecar/cx_sc_log.h"
#include "sidecar/cx_sidecar.h"
#include "space/cx_space_server.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: confluxd --role=space [options]\n"
    "       confluxd --role=sidecar --socket=PATH [options]\n"
    "\n"
    "  --role=space            serve a space: pipe names, cached pipes, format descriptions\n"
    "  --dir=PATH              store directory (default /var/lib/conflux/space)\n"
    "  --listen=tcp://H:P      client address (default tcp://0.0.0.0:7400)\n"
    "  --listen2=URL           a second client address, e.g. tls://0.0.0.0:7443 for clients\n"
    "                          in other clusters (CONFLUX_TLS_CA, _CERT, _KEY: mutual TLS)\n"
    "  --udp=H:P | --no-udp    UDP lookup address (default: the --listen host and port)\n"
    "  --udp-threads=N         UDP lookup threads (default 1)\n"
    "  --fsync=POLICY          none | every | interval:MS (default interval:100): what a\n"
    "                          writer's ack promises (see dataplane/src/space/README.md)\n"
    "  --retain-bytes=N[KMG]   per-pipe retention by size (default: keep all)\n"
    "  --retain-segments=N     per-pipe retention by count (default: keep all)\n"
    "  --max-segment=N[KMG]    largest segment accepted (default 64M)\n"
    "  --max-clients=N         connections served at once (default 3000, at most half the\n"
    "                          fd limit); more are closed at accept, logged\n"
    "  --first-frame-timeout=MS  a client's TLS handshake and first frame (default 5000)\n"
    "  --idle-timeout=MS       close a client with no pipe open, silent this long (default 0: never)\n"
    "  --repair                a pipe log damaged in the middle is truncated there when opened\n"
    "                          (later segments are lost; logged) instead of refused\n"
    "  --quiet                 no log lines\n"
    "\n"
    "  --role=sidecar          serve the applications of a pod (CONFLUX_SOCKET points at it)\n"
    "  --socket=PATH           the Unix socket applications connect to (required)\n"
    "  --transport=T           tcp (default, or $CONFLUX_TRANSPORT) | rdma | dpdk | tls | shm:\n"
    "                          the links the pod's channels use (rdma with $CONFLUX_FABRIC:\n"
    "                          ucx to pods of that fabric, tcp to the others)\n"
    "  --inputs=a,b            channel names the pod reads (metrics and logs)\n"
    "  --outputs=c             channel names the pod writes\n"
    "  --channels=x,y          channel names without a direction\n"
    "  --http=H:P | --no-http  /metrics, /healthz, /readyz (default 0.0.0.0:9464)\n"
    "  --space=tcp://H:P       a space /readyz requires reachable (default $CONFLUX_SPACE);\n"
    "                          tls://H:P for a space's TLS address (CONFLUX_TLS_*)\n"
    "  --listen=URL            the channel runtime's address (default: from --transport, port 0)\n"
    "  --advertise=URL         the address other pods dial (default: this pod's IP)\n"
    "  --ring-size=N[KMG]      each shared ring per application connection (default 16M;\n"
    "                          a power of two from 64K to 1G; a record is at most half)\n"
    "  --socket-mode=OCTAL     the socket file's mode (default 0666)\n"
    "  --allow-uid=U,V         only these users' processes (and this one's) may connect;\n"
    "                          a session is always its opener's user's alone\n"
    "  --quiet                 no info log lines (JSON lines on stderr)\n"
    "  environment: CONFLUX_NAMESPACE, CONFLUX_POD_NAME, CONFLUX_NODE_NAME, CONFLUX_FABRIC,\n"
    "  CONFLUX_RESTART_POLICY label the logs and metrics; with --transport=dpdk the port is\n"
    "  the device the operator names (CONFLUX_DEVICE_RESOURCE, CONFLUX_NETWORK_STATUS,\n"
    "  CONFLUX_MTU; dataplane/src/transport/cx_fabric_dev.h) unless CONFLUX_DPDK_* say otherwise\n";

static int g_stop;

/* SIGTERM and SIGINT are blocked in every thread (the servers' threads inherit the mask
 * from here) and taken by main in sigwait: a handler with pause() would miss a signal the
 * kernel delivers to another thread. SIGPIPE is ignored: a peer that goes away is an error
 * return, not the end of the process. */
static void block_stop_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static int wait_for_stop(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {
    }
    return sig;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static int bad(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "confluxd: --%s=%s: %s\n\n%s", opt, val, why, usage);
    return 2;
}

static int space_main(int argc, char **argv)
{
    const char *role = NULL;
    struct cx_space_server_opts o = {.dir = "/var/lib/conflux/space", .listen = "tcp://0.0.0.0:7400"};
    o.pipe.fsync = CX_SEG_FSYNC_INTERVAL;
    o.pipe.fsync_interval_ms = 100;
    static const struct option opts[] = {
        {"role", required_argument, 0, 'r'},       {"dir", required_argument, 0, 'd'},
        {"listen", required_argument, 0, 'l'},     {"udp", required_argument, 0, 'u'},
        {"listen2", required_argument, 0, 'L'},
        {"no-udp", no_argument, 0, 'n'},           {"udp-threads", required_argument, 0, 't'},
        {"fsync", required_argument, 0, 'f'},      {"retain-bytes", required_argument, 0, 'b'},
        {"retain-segments", required_argument, 0, 's'}, {"max-segment", required_argument, 0, 'm'},
        {"max-clients", required_argument, 0, 'C'}, {"first-frame-timeout", required_argument, 0, 'F'},
        {"idle-timeout", required_argument, 0, 'I'}, {"repair", no_argument, 0, 'R'},
        {"quiet", no_argument, 0, 'q'},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': role = optarg; break;
        case 'd': o.dir = optarg; break;
        case 'l': o.listen = optarg; break;
        case 'L': o.listen2 = optarg; break;
        case 'u': o.udp = optarg; break;
        case 'n': o.udp = ""; break;
        case 't':
            if (parse_size(optarg, &v) || v < 1 || v > 8)
                return bad("udp-threads", optarg, "give 1 to 8");
            o.udp_threads = (int)v;
            break;
        case 'f':
            if (strcmp(optarg, "none") == 0) {
                o.pipe.fsync = CX_SEG_FSYNC_NONE;
            } else if (strcmp(optarg, "every") == 0) {
                o.pipe.fsync = CX_SEG_FSYNC_EVERY;
            } else if (strncmp(optarg, "interval:", 9) == 0 && parse_size(optarg + 9, &v) == 0 &&
                       v > 0 && v < 3600000) {
                o.pipe.fsync = CX_SEG_FSYNC_INTERVAL;
                o.pipe.fsync_interval_ms = (uint32_t)v;
            } else {
                return bad("fsync", optarg, "give none, every or interval:MS");
            }
            break;
        case 'b':
            if (parse_size(optarg, &o.pipe.max_bytes))
                return bad("retain-bytes", optarg, "give a size like 10G");
            break;
        case 's':
            if (parse_size(optarg, &o.pipe.max_segments))
                return bad("retain-segments", optarg, "give a count");
            break;
        case 'm':
            if (parse_size(optarg, &v) || v == 0 || v > (1u << 30))
                return bad("max-segment", optarg, "give a size from 1 to 1G");
            o.max_segment = (uint32_t)v;
            break;
        case 'C':
            if (parse_size(optarg, &v) || v < 1 || v > 1000000)
                return bad("max-clients", optarg, "give a count from 1 to 1000000");
            o.max_clients = (int)v;
            break;
        case 'F':
            if (parse_size(optarg, &v) || v < 1 || v > 3600000)
                return bad("first-frame-timeout", optarg, "give milliseconds from 1 to 3600000");
            o.first_frame_ms = (int)v;
            break;
        case 'I':
            if (parse_size(optarg, &v) || v > 86400000)
                return bad("idle-timeout", optarg, "give milliseconds, 0 for never");
            o.idle_ms = (int)v;
            break;
        case 'R': o.pipe.repair = 1; break;
        case 'q': o.quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "confluxd: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    (void)role;
    block_stop_signals();
    struct cx_space_server *s;
    if (cx_space_server_start(&o, &s) < 0) {
        fprintf(stderr, "confluxd: %s\n", cx_errmsg());
        return 1;
    }
    /* machine-readable line for scripts and tests: the real addresses (port 0 resolved);
     * the second address, when any, comes last so the first words keep their places */
    printf("listening %s udp %s%s%s\n", cx_space_server_addr(s), cx_space_server_udp_addr(s),
           cx_space_server_addr2(s)[0] ? " also " : "", cx_space_server_addr2(s));
    fflush(stdout);
    g_stop = wait_for_stop();
    struct cx_space_server_stats st;
    cx_space_server_stats(s, &st);
    cx_space_server_stop(s);
    if (!o.quiet)
        fprintf(stderr, "confluxd space: stopped on signal %d after %" PRIu64 " requests, %" PRIu64
                " UDP lookups, %" PRIu64 " segments in, %" PRIu64 " out\n", (int)g_stop, st.requests,
                st.udp_lookups, st.segments_in, st.segments_out);
    return 0;
}

/* ---- the sidecar role ---- */

/* A comma-separated list of channel names: each 1-253 characters of [A-Za-z0-9._-]. */
static int names_ok(const char *list)
{
    size_t n = 0;
    for (const char *p = list;; p++) {
        if (*p == ',' || !*p) {
            if (n == 0 || n > 253)
                return 0;
            n = 0;
            if (!*p)
                return 1;
            continue;
        }
        if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') && !(*p >= '0' && *p <= '9') &&
            *p != '.' && *p != '-' && *p != '_')
            return 0;
        n++;
    }
}

static int transport_ok(const char *t)
{
    static const char *known[] = {"tcp", "rdma", "ucx", "dpdk", "tls", "shm"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(t, known[i]) == 0)
            return 1;
    return 0;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && v[0] ? v : dflt;
}

static int sidecar_main(int argc, char **argv)
{
    struct cx_sidecar_opts o = {.transport = env_or(CX_ENV_TRANSPORT, "tcp"),
                                .space = env_or("CONFLUX_SPACE", NULL)};
    o.pod = env_or("CONFLUX_POD_NAME", "");
    o.ns = env_or("CONFLUX_NAMESPACE", "");
    o.node = env_or("CONFLUX_NODE_NAME", "");
    o.fabric = env_or(CX_ENV_FABRIC, "");
    o.restart_policy = env_or("CONFLUX_RESTART_POLICY", "");
    static const struct option opts[] = {
        {"role", required_argument, 0, 'r'},      {"socket", required_argument, 0, 'S'},
        {"transport", required_argument, 0, 'T'}, {"inputs", required_argument, 0, 'I'},
        {"outputs", required_argument, 0, 'O'},   {"channels", required_argument, 0, 'C'},
        {"http", required_argument, 0, 'H'},      {"no-http", no_argument, 0, 'N'},
        {"space", required_argument, 0, 'P'},     {"listen", required_argument, 0, 'l'},
        {"advertise", required_argument, 0, 'a'}, {"ring-size", required_argument, 0, 'R'},
        {"socket-mode", required_argument, 0, 'M'}, {"allow-uid", required_argument, 0, 'U'},
        {"quiet", no_argument, 0, 'q'},           {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': break;
        case 'S':
            if (!optarg[0] || strlen(optarg) > 107)
                return bad("socket", optarg, "give a path of 1 to 107 bytes");
            o.socket = optarg;
            break;
        case 'T':
            if (!transport_ok(optarg))
                return bad("transport", optarg, "give tcp, rdma, dpdk, tls or shm");
            o.transport = optarg;
            break;
        case 'I': case 'O': case 'C':
            if (!names_ok(optarg))
                return bad(c == 'I' ? "inputs" : c == 'O' ? "outputs" : "channels", optarg,
                           "give channel names ([A-Za-z0-9._-], 1-253 characters) separated by commas");
            *(c == 'I' ? &o.inputs : c == 'O' ? &o.outputs : &o.channels) = optarg;
            break;
        case 'H':
            if (!strchr(optarg, ':'))
                return bad("http", optarg, "give HOST:PORT");
            o.http = optarg;
            break;
        case 'N': o.http = ""; break;
        case 'P':
            if ((strncmp(optarg, "tcp://", 6) != 0 && strncmp(optarg, "tls://", 6) != 0) ||
                !strchr(optarg + 6, ':'))
                return bad("space", optarg, "give tcp://HOST:PORT or tls://HOST:PORT");
            o.space = optarg;
            break;
        case 'l': o.listen = optarg; break;
        case 'a': o.advertise = optarg; break;
        case 'R':
            if (parse_size(optarg, &v) || v < (64u << 10) || v > (1u << 30) || (v & (v - 1)))
                return bad("ring-size", optarg, "give a power of two from 64K to 1G");
            o.ring_size = v;
            break;
        case 'M': {
            char *end;
            unsigned long m = strtoul(optarg, &end, 8);
            if (end == optarg || *end || m == 0 || m > 0777)
                return bad("socket-mode", optarg, "give an octal mode such as 0660");
            o.socket_mode = (unsigned)m;
            break;
        }
        case 'U':
            if (!optarg[0] || strspn(optarg, "0123456789,") != strlen(optarg))
                return bad("allow-uid", optarg, "give numeric uids separated by commas");
            o.allow_uids = optarg;
            break;
        case 'q': o.quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "confluxd: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    if (!o.socket) {
        fprintf(stderr, "confluxd: --role=sidecar needs --socket=PATH\n\n%s", usage);
        return 2;
    }
    if (!transport_ok(o.transport))
        return bad("transport", o.transport, "(from CONFLUX_TRANSPORT) give tcp, rdma, dpdk, tls or shm");
    char common[900], a[200], b[200], d[200];
    snprintf(common, sizeof common, "\"role\":\"sidecar\",\"pod\":%s,\"namespace\":%s,\"node\":%s",
             cx_sc_json_str(a, sizeof a, o.pod), cx_sc_json_str(b, sizeof b, o.ns),
             cx_sc_json_str(d, sizeof d, o.node));
    cx_sc_log_setup(common, o.quiet);
    block_stop_signals();
    struct cx_sidecar *sc;
    if (cx_sidecar_start(&o, &sc) < 0) {
        cx_sc_log("error", "sidecar did not start", "\"error\":%s", cx_sc_json_str(common, sizeof common, cx_errmsg()));
        return 1;
    }
    cx_sc_log("info", "sidecar started", "\"socket\":%s,\"http\":\"%s\",\"transport\":\"%s\",\"channel_addr\":%s",
              cx_sc_json_str(a, sizeof a, o.socket), cx_sidecar_http_addr(sc), o.transport,
              cx_sc_json_str(b, sizeof b, cx_sidecar_chan_addr(sc)));
    /* machine-readable line for scripts and tests */
    printf("listening unix:%s http %s channels %s\n", o.socket,
           cx_sidecar_http_addr(sc)[0] ? cx_sidecar_http_addr(sc) : "-", cx_sidecar_chan_addr(sc));
    fflush(stdout);
    g_stop = wait_for_stop();
    cx_sc_log("info", "stopping", "\"signal\":%d", (int)g_stop);
    cx_sidecar_stop(sc);
    cx_sc_log("info", "sidecar stopped", NULL);
    return 0;
}

/* The role decides which options exist: find it before parsing. */
int main(int argc, char **argv)
{
    /* confluxd serves calls with its own runtimes: a sidecar inside a pod (CONFLUX_SOCKET set
     * for its applications) must never send them on to a sidecar */
    cx_api_use_embedded();
    const char *role = NULL;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--role=", 7) == 0)
            role = argv[i] + 7;
        else if (strcmp(argv[i], "--role") == 0 && i + 1 < argc)
            role = argv[++i];
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        }
    }
    if (!role) {
        fprintf(stderr, "confluxd: --role is required\n\n%s", usage);
        return 2;
    }
    if (strcmp(role, "space") == 0)
        return space_main(argc, argv);
    if (strcmp(role, "sidecar") == 0)
        return sidecar_main(argc, argv);
    fprintf(stderr, "confluxd: --role=%s: unknown role (roles: space, sidecar)\n\n%s", role, usage);
    return 2;
}
