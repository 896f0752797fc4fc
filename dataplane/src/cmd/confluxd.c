/* confluxd: the Conflux daemon. One binary, one role per process:
 *
 *   confluxd --role=space [options]   the space server (name table, pipe cache, formats)
 *
 * (--role=sidecar is not built yet: it says so and exits 2.) Options are parsed strictly:
 * an unknown option or a bad value prints the usage and exits 2. SIGTERM or SIGINT stop
 * the server cleanly (every pipe synced and closed).
 */
#include "common/cx_error.h"
#include "space/cx_space_server.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage[] =
    "usage: confluxd --role=space [options]\n"
    "\n"
    "  --role=space            serve a space: pipe names, cached pipes, format descriptions\n"
    "  --dir=PATH              store directory (default /var/lib/conflux/space)\n"
    "  --listen=tcp://H:P      client address (default tcp://0.0.0.0:7400)\n"
    "  --udp=H:P | --no-udp    UDP lookup address (default: the --listen host and port)\n"
    "  --udp-threads=N         UDP lookup threads (default 1)\n"
    "  --fsync=POLICY          none | every | interval:MS (default interval:100): what a\n"
    "                          writer's ack promises (see dataplane/src/space/README.md)\n"
    "  --retain-bytes=N[KMG]   per-pipe retention by size (default: keep all)\n"
    "  --retain-segments=N     per-pipe retention by count (default: keep all)\n"
    "  --max-segment=N[KMG]    largest segment accepted (default 64M)\n"
    "  --quiet                 no log lines\n";

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

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

int main(int argc, char **argv)
{
    const char *role = NULL;
    struct cx_space_server_opts o = {.dir = "/var/lib/conflux/space", .listen = "tcp://0.0.0.0:7400"};
    o.pipe.fsync = CX_SEG_FSYNC_INTERVAL;
    o.pipe.fsync_interval_ms = 100;
    static const struct option opts[] = {
        {"role", required_argument, 0, 'r'},       {"dir", required_argument, 0, 'd'},
        {"listen", required_argument, 0, 'l'},     {"udp", required_argument, 0, 'u'},
        {"no-udp", no_argument, 0, 'n'},           {"udp-threads", required_argument, 0, 't'},
        {"fsync", required_argument, 0, 'f'},      {"retain-bytes", required_argument, 0, 'b'},
        {"retain-segments", required_argument, 0, 's'}, {"max-segment", required_argument, 0, 'm'},
        {"quiet", no_argument, 0, 'q'},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': role = optarg; break;
        case 'd': o.dir = optarg; break;
        case 'l': o.listen = optarg; break;
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
        case 'q': o.quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "confluxd: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    if (!role) {
        fprintf(stderr, "confluxd: --role is required\n\n%s", usage);
        return 2;
    }
    if (strcmp(role, "space") != 0) {
        fprintf(stderr, "confluxd: role '%s' is not available in this build (roles: space)\n", role);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct cx_space_server *s;
    if (cx_space_server_start(&o, &s) < 0) {
        fprintf(stderr, "confluxd: %s\n", cx_errmsg());
        return 1;
    }
    /* machine-readable line for scripts and tests: the real addresses (port 0 resolved) */
    printf("listening %s udp %s\n", cx_space_server_addr(s), cx_space_server_udp_addr(s));
    fflush(stdout);
    while (!g_stop)
        pause();
    struct cx_space_server_stats st;
    cx_space_server_stats(s, &st);
    cx_space_server_stop(s);
    if (!o.quiet)
        fprintf(stderr, "confluxd space: stopped on signal %d after %" PRIu64 " requests, %" PRIu64
                " UDP lookups, %" PRIu64 " segments in, %" PRIu64 " out\n", (int)g_stop, st.requests,
                st.udp_lookups, st.segments_in, st.segments_out);
    return 0;
}
