/* conflux: the command-line tool for spaces, pipes and channels.
 *
 *   conflux [--space ADDR] ls                      pipe names in the space
 *   conflux [--space ADDR] stat NAME               a pipe: id, format, segments, writer,
 *                                                  readers, bytes stored, links in use,
 *                                                  named readers' cursors (position, lag)
 *   conflux [--space ADDR] links NAME              a pipe's links in use, per transport
 *   conflux links --sidecar HOST:PORT              the link each channel of a pod uses
 *                                                  (its sidecar's /metrics)
 *   conflux [--space ADDR] cat NAME [--from N] [--follow] [--json]
 *                                                  a pipe's segments from position N
 *   conflux [--space ADDR] lookup NAME [--udp]     one name-table lookup (and its time)
 *   conflux [--space ADDR] unlink NAME
 *   conflux tail CHANNEL_ID [--count N] [--filter EXPR] [--transform PROGRAM]
 *                                                  a channel's events as JSON lines; a
 *                                                  transform runs at the sources and its
 *                                                  computed fields (each a double) are
 *                                                  what is printed
 *
 * ADDR defaults to $CONFLUX_SPACE, then tcp://127.0.0.1:7400. Segments and events of a
 * known format are printed as JSON through reflection (formats come from the space's
 * format service or the channel's sources); others as a hex dump. Exit status: 0, 1 on an
 * error (printed as "conflux: ..."), 2 for bad usage.
 */
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format_registry.h"
#include "format/cx_reflect.h"
#include "sidecar/cx_sc_scrape.h"
#include "space/cx_space_client.h"

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: conflux [--space ADDR] ls | stat NAME | cat NAME [--from N] [--follow] [--json] |\n"
    "               lookup NAME [--udp] | unlink NAME | links NAME\n"
    "       conflux links --sidecar HOST:PORT\n"
    "       conflux tail CHANNEL_ID [--count N] [--filter EXPR] [--transform PROGRAM]\n"
    "ADDR: the space server (default $CONFLUX_SPACE or tcp://127.0.0.1:7400)\n";

static int fail(const char *what)
{
    fprintf(stderr, "conflux: %s: %s\n", what, cx_errmsg());
    return 1;
}

static void print_list(void *arg, const char *name, uint64_t id, uint64_t format)
{
    (void)arg;
    printf("%-40s pipe %-6" PRIu64 " format %016" PRIx64 "\n", name, id, format);
}

/* Prints one payload of format token as JSON when the format can be had, else hex. */
static void print_payload(uint64_t token, const void *buf, size_t len, int json_only)
{
    static char out[1 << 16];
    struct cx_view v;
    if (token && cx_reflect_open(token, buf, len, &v) == 0 && cx_reflect_json(&v, out, sizeof out) >= 0) {
        printf("%s\n", out);
        return;
    }
    if (json_only) {
        printf("{\"bytes\":%zu}\n", len);
        return;
    }
    const uint8_t *b = buf;
    for (size_t i = 0; i < len; i += 16) {
        printf("  %08zx ", i);
        for (size_t k = i; k < i + 16 && k < len; k++)
            printf(" %02x", b[k]);
        printf("\n");
    }
}

static int cmd_cat(struct cx_space_client *c, const char *name, uint64_t from, int follow, int json)
{
    uint32_t h;
    struct cx_space_pipe_info info;
    if (cx_space_read_start(c, name, from + 1, &h, &info) < 0)
        return fail(name);
    size_t cap = 1 << 20;
    uint8_t *buf = malloc(cap);
    for (;;) {
        struct cx_seg_info si;
        long n = cx_space_read_next(c, h, buf, cap, &si, follow ? 3600000 : 2000);
        if (n == -EMSGSIZE) {
            free(buf);
            buf = malloc(cap = si.length);
            continue;
        }
        if (n == -EPIPE || (n == -ETIMEDOUT && !follow))
            break; /* the end, or (without --follow) nothing more for now */
        if (n < 0) {
            free(buf);
            return fail(name);
        }
        if (!json)
            printf("segment %" PRIu64 " (%ld bytes, format %016" PRIx64 ")\n", si.seg_id - 1, n, si.format);
        print_payload(si.format, buf, (size_t)n, json);
        fflush(stdout);
    }
    free(buf);
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static volatile sig_atomic_t g_stop;
static void on_sig(int s) { g_stop = s; }

struct tail_state {
    long count, seen;
};

static void on_event(void *arg, const struct cx_chan_event *ev)
{
    struct tail_state *t = arg;
    static char out[1 << 16];
    struct cx_view v;
    if (ev->wire && ev->format && cx_reflect_open_format(ev->format, ev->wire, ev->wire_len, &v) == 0 &&
        cx_reflect_json(&v, out, sizeof out) >= 0)
        printf("{\"seq\":%" PRIu64 ",\"from\":\"%s\",\"event\":%s}\n", ev->seq, ev->from ? ev->from : "", out);
    else
        printf("{\"seq\":%" PRIu64 ",\"from\":\"%s\",\"bytes\":%zu}\n", ev->seq, ev->from ? ev->from : "",
               ev->wire_len);
    fflush(stdout);
    if (t->count && ++t->seen >= t->count)
        g_stop = 1;
}

/* The output format of a --transform program: a double for each field it computes
 * ("name = ..." statements, in order), registered. NULL with cx_errmsg() on error. */
static const struct cx_format *transform_format(const char *prog)
{
    static char names[32][64];
    static struct cx_field fields[33];
    size_t n = 0, depth = 0;
    char quote = 0;
    for (const char *p = prog, *stmt = prog;; p++) {
        if (quote) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == quote)
                quote = 0;
            if (*p)
                continue;
        }
        if (*p == '"' || *p == '\'') {
            quote = *p;
            continue;
        }
        depth += *p == '(' || *p == '[';
        depth -= depth && (*p == ')' || *p == ']');
        if (*p && (*p != ';' || depth))
            continue;
        const char *q = stmt;
        while (*q == ' ' || *q == '\t')
            q++;
        size_t len = 0;
        while (q[len] == '_' || (q[len] >= 'a' && q[len] <= 'z') || (q[len] >= 'A' && q[len] <= 'Z') ||
               (len && q[len] >= '0' && q[len] <= '9'))
            len++;
        const char *e = q + len;
        while (*e == ' ' || *e == '\t')
            e++;
        if (len && len < sizeof names[0] && e[0] == '=' && e[1] != '=') {
            if (n == 32) {
                cx_err_set(E2BIG, "--transform: more than 32 computed fields");
                return NULL;
            }
            memcpy(names[n], q, len);
            names[n][len] = '\0';
            fields[n] = (struct cx_field){names[n], "double", 8, 8 * n, NULL};
            n++;
        }
        if (!*p)
            break;
        stmt = p + 1;
    }
    if (!n) {
        cx_err_set(EINVAL, "--transform computes no field (give 'name = expression; ...', or "
                           "use --filter)");
        return NULL;
    }
    memset(&fields[n], 0, sizeof fields[n]); /* the list's end */
    struct cx_struct_decl d[2];
    memset(d, 0, sizeof d);
    d[0] = (struct cx_struct_decl){"transform", fields, 8 * n};
    struct cx_format *f;
    const struct cx_format *reg = NULL;
    if (cx_format_create(d, NULL, &f) < 0 || cx_format_registry_insert(f, &reg) < 0)
        return NULL;
    return reg;
}

static int cmd_tail(const char *id, long count, const char *filter, const char *transform)
{
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    struct tail_state t = {.count = count};
    struct cx_chan_sink_opts so = {.filter = filter};
    if (filter && transform) {
        fprintf(stderr, "conflux: give --filter or --transform (a transform's conditions "
                        "filter too)\n\n%s", usage);
        return 2;
    }
    if (transform) {
        so.filter = transform;
        if (!(so.projection = transform_format(transform)))
            return fail("--transform");
    }
    if (cx_chan_ctx_create(NULL, &ctx) < 0)
        return fail("channel runtime");
    if (cx_chan_open(ctx, id, 10000, &ch) < 0 || cx_chan_sink(ch, &so, on_event, &t, &k) < 0) {
        int rc = fail(id);
        cx_chan_ctx_destroy(ctx);
        return rc;
    }
    signal(SIGINT, on_sig);
    signal(SIGTERM, on_sig);
    while (!g_stop)
        usleep(20000);
    cx_chan_ctx_destroy(ctx);
    return 0;
}

static void print_link(void *arg, const char *channel, const char *link)
{
    (void)arg;
    printf("%-8s %s\n", link, channel);
}

/* The links a pod's channels use, as its sidecar reports them. */
static int cmd_links_sidecar(const char *hostport)
{
    printf("%-8s %s\n", "LINK", "CHANNEL");
    int n = cx_sc_scrape_links(hostport, 5000, print_link, NULL);
    if (n < 0)
        return fail(hostport);
    if (n == 0)
        printf("(no channel open in this pod)\n");
    return 0;
}

/* One named reader's cursor: its position (the next segment it reads) and its lag (segments
 * stored after it). */
static void print_group(void *arg, const char *group, uint64_t floor, uint64_t next, int nmember,
                        const uint64_t *member, const uint32_t *inflight)
{
    uint64_t written = *(const uint64_t *)arg;
    (void)next;
    printf("  %-24s %-12" PRIu64 " %-8" PRIu64 " %d", group, floor, written > floor ? written - floor : 0,
           nmember);
    for (int i = 0; i < nmember; i++)
        printf(" %" PRIu64 ":%" PRIu32, member[i], inflight[i]);
    printf("\n");
}

static void print_cursor(void *arg, const char *cursor, uint64_t pos)
{
    uint64_t written = *(const uint64_t *)arg; /* segments ever written: positions 0..n-1 */
    printf("  %-24s %-12" PRIu64 " %" PRIu64 "\n", cursor, pos, written > pos ? written - pos : 0);
}

/* A pipe's use as the space sees it; a server older than STATS gets the lookup only. */
static int cmd_stat(struct cx_space_client *cl, const char *name, int links_only)
{
    struct cx_space_pipe_info info;
    struct cx_space_pipe_stats st;
    int rc = cx_space_stats(cl, name, &info, &st);
    int have_stats = rc == 0;
    if (rc == -EPROTO && !links_only)
        rc = cx_space_lookup(cl, name, &info);
    if (rc < 0)
        return fail(name);
    if (links_only) {
        printf("%-10s %s\n", "TRANSPORT", "LINKS");
        for (int i = 0; i < st.nlinks; i++)
            printf("%-10s %" PRIu32 "\n", st.links[i].transport, st.links[i].count);
        if (st.nlinks == 0)
            printf("(none: no writer or reader has the pipe open)\n");
        return 0;
    }
    printf("name      %s\npipe      %" PRIu64 "\nformat    %016" PRIx64 "\n", name, info.pipe_id, info.format);
    if (info.last_id || info.ended || info.writer_open)
        printf("segments  %" PRIu64 " (positions %" PRIu64 "..%" PRIu64 ")\nwriter    %s\n",
               info.last_id >= info.first_id ? info.last_id - info.first_id + 1 : 0,
               info.first_id ? info.first_id - 1 : 0, info.last_id ? info.last_id - 1 : 0,
               info.ended ? "closed" : info.writer_open ? (info.naddrs ? info.addrs[0] : "open") : "none");
    else
        printf("segments  (pipe not opened since the space started)\n");
    if (have_stats) {
        printf("readers   %" PRIu32 "\nbytes     %" PRIu64 "\nlinks    ", st.readers, st.bytes);
        for (int i = 0; i < st.nlinks; i++)
            printf(" %s=%" PRIu32, st.links[i].transport, st.links[i].count);
        printf("%s\n", st.nlinks ? "" : " none");
    }
    /* named readers (pi_attach_named): listed after a header line, lag = segments after them */
    uint64_t written = info.last_id;
    printf("cursors   %-24s %-12s %s\n", "CURSOR", "POSITION", "LAG");
    long n = cx_space_cursor_list(cl, name, print_cursor, &written);
    if (n == -EPROTO)
        printf("  (not known: the space is older than cursors)\n");
    else if (n < 0)
        return fail(name);
    else if (n == 0)
        printf("  (none)\n");
    /* reader groups (pi_attach_group): floor, lag, members and their in-flight segments */
    printf("groups    %-24s %-12s %-8s %s\n", "GROUP", "FLOOR", "LAG", "MEMBERS (ID:IN-FLIGHT)");
    n = cx_space_group_list(cl, name, print_group, &written);
    if (n == -EPROTO)
        printf("  (not known: the space is older than reader groups)\n");
    else if (n < 0)
        return fail(name);
    else if (n == 0)
        printf("  (none)\n");
    return 0;
}

struct cli {
    const char *space, *filter, *transform, *sidecar;
    uint64_t from;
    long count;
    int follow, json, udp;
};

/* Parses options until the first non-option ("+": the command), or to the end. Returns 0,
 * 1 after --help, 2 on a bad option. */
static int parse_opts(int argc, char **argv, const char *optstring, struct cli *o)
{
    static const struct option opts[] = {
        {"space", required_argument, 0, 's'}, {"from", required_argument, 0, 'f'},
        {"follow", no_argument, 0, 'F'},      {"json", no_argument, 0, 'j'},
        {"udp", no_argument, 0, 'u'},         {"count", required_argument, 0, 'n'},
        {"filter", required_argument, 0, 'x'}, {"help", no_argument, 0, 'h'},
        {"sidecar", required_argument, 0, 'S'}, {"transform", required_argument, 0, 'T'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, optstring, opts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 's': o->space = optarg; break;
        case 'f':
            o->from = strtoull(optarg, &end, 10);
            if (*end || !*optarg) {
                fprintf(stderr, "conflux: --from=%s: give a segment position (0 = the first)\n\n%s", optarg, usage);
                return 2;
            }
            break;
        case 'F': o->follow = 1; break;
        case 'j': o->json = 1; break;
        case 'u': o->udp = 1; break;
        case 'n': o->count = strtol(optarg, NULL, 10); break;
        case 'x': o->filter = optarg; break;
        case 'T': o->transform = optarg; break;
        case 'S': o->sidecar = optarg; break;
        case 'h': fputs(usage, stdout); return 1;
        default: fputs(usage, stderr); return 2;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cli o = {.space = getenv("CONFLUX_SPACE")};
    int rc = parse_opts(argc, argv, "+", &o); /* options before the command */
    if (rc)
        return rc == 1 ? 0 : 2;
    if (optind >= argc) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[optind];
    const char *arg = optind + 1 < argc && argv[optind + 1][0] != '-' ? argv[optind + 1] : NULL;
    optind += arg ? 2 : 1;
    if ((rc = parse_opts(argc, argv, "", &o))) /* and after it */
        return rc == 1 ? 0 : 2;
    if (optind < argc) {
        fprintf(stderr, "conflux: unexpected argument '%s'\n\n%s", argv[optind], usage);
        return 2;
    }
    const char *space = o.space ? o.space : "tcp://127.0.0.1:7400";
    if (o.sidecar && (strcmp(cmd, "links") != 0 || arg)) {
        fprintf(stderr, "conflux: --sidecar goes with 'links' alone\n\n%s", usage);
        return 2;
    }
    if (o.sidecar)
        return cmd_links_sidecar(o.sidecar);
    if (strcmp(cmd, "ls") != 0 && !arg) {
        fprintf(stderr, "conflux: %s needs a name\n\n%s", cmd, usage);
        return 2;
    }
    if (strcmp(cmd, "tail") == 0)
        return cmd_tail(arg, o.count, o.filter, o.transform);
    if (strcmp(cmd, "lookup") == 0 && o.udp) {
        const char *hp = strstr(space, "://");
        struct cx_space_pipe_info info;
        double t0 = now_us();
        if (cx_space_udp_lookup(hp ? hp + 3 : space, arg, 200, 5, &info) < 0)
            return fail(arg);
        printf("%s: pipe %" PRIu64 " format %016" PRIx64 " (UDP, %.0f us)\n", arg, info.pipe_id, info.format,
               now_us() - t0);
        return 0;
    }
    static const char *const known[] = {"ls", "stat", "cat", "lookup", "unlink", "links"};
    int ok = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        ok |= strcmp(cmd, known[i]) == 0;
    if (!ok) {
        fprintf(stderr, "conflux: unknown command '%s'\n\n%s", cmd, usage);
        return 2;
    }
    struct cx_space_client *cl;
    if (cx_space_connect(space, &cl) < 0)
        return fail(space);
    cx_space_serve_formats(cl);
    struct cx_space_pipe_info info;
    if (strcmp(cmd, "ls") == 0) {
        if (cx_space_list(cl, print_list, NULL) < 0)
            rc = fail("ls");
    } else if (strcmp(cmd, "stat") == 0 || strcmp(cmd, "links") == 0) {
        rc = cmd_stat(cl, arg, cmd[0] == 'l');
    } else if (strcmp(cmd, "lookup") == 0) {
        double t0 = now_us();
        if (cx_space_lookup(cl, arg, &info) < 0)
            rc = fail(arg);
        else
            printf("%s: pipe %" PRIu64 " format %016" PRIx64 " (TCP, %.0f us)\n", arg, info.pipe_id, info.format,
                   now_us() - t0);
    } else if (strcmp(cmd, "cat") == 0) {
        rc = cmd_cat(cl, arg, o.from, o.follow, o.json);
    } else {
        if (cx_space_unlink(cl, arg, &info) < 0)
            rc = fail(arg);
        else
            printf("unlinked %s (pipe %" PRIu64 ")\n", arg, info.pipe_id);
    }
    cx_space_disconnect(cl);
    return rc;
}
