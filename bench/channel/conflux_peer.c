/* Conflux event-channel peer for the event-channel benchmark (bench_common.h for the
 * method, the same as every other peer here).
 *
 *   conflux_peer [--quick | --lat-n N --bw-bytes N --size N] [--bind] [--read]
 *                [--sidecars=SOCKET_A,SOCKET_B --name=PEER]
 *
 * --bind: the source process on CPU 0, the sink on CPU 1 (what mpirun does for two ranks by
 * default, --bind-to core), so the two waiting threads never share a core.
 * --read: every handler reads every byte of the event it gets (summed), as a receiver that
 * uses the payload would; printed as peer "conflux-read". Without it a handler reads the
 * event's kind and length only (delivery is in place: the bytes are there to read), while
 * MPI_Recv and the others copy the bytes into the receiver's buffer.
 *
 * One process forks the sink process, then: the source creates two typed, reliable channels
 * ("ping": source here -> sink there; "pong": back), the sink opens both. Events go source
 * to sink directly over the channel runtime's link (shared memory between two processes
 * of one host; tcp with CONFLUX_CHAN_SHM=0; printed as {"link":..}), in the sender's
 * native layout (the payload is a variable array: sent from the caller's memory, no copy
 * when the link is free). Each side's waiting thread drives the runtime's progress
 * (cx_chan_ctx_drive): events reach it without a hand-off between threads. Latency: an 'E'
 * event of `size` bytes echoed back at the same size. Bandwidth: windows of BENCH_WINDOW 'B' events, each window acked with a small 'A'.
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define TIMEOUT_US 30e6

struct ev {
    uint8_t kind; /* 'E' echo, 'B' bulk, 'A' ack, 'Q' quit */
    uint32_t n;
    uint8_t *data; /* n bytes */
};

static const char *ev_json = "{\"name\":\"bench_event\",\"fields\":[{\"name\":\"kind\",\"type\":\"uint8\"},"
                             "{\"name\":\"n\",\"type\":\"uint32\"},{\"name\":\"data\",\"type\":\"uint8[n]\"}]}";

static const struct cx_format *ev_format(void)
{
    struct cx_format *f;
    const struct cx_format *F;
    if (cx_format_from_json(ev_json, strlen(ev_json), NULL, &f) < 0 || cx_format_size(f) != sizeof(struct ev)) {
        fprintf(stderr, "conflux_peer: event format: %s\n", cx_errmsg());
        exit(1);
    }
    cx_format_registry_insert(f, &F);
    return F;
}

static int g_read;              /* --read */
static const char *g_peer = "conflux";
static volatile uint64_t g_sum; /* what --read adds up: nothing optimises the reads away */

/* Reads every byte, eight at a time (a memory read at the speed of a copy's, not a
 * byte-by-byte loop's arithmetic). */
static void read_bytes(const struct ev *e)
{
    uint64_t sum = 0, w;
    uint32_t i = 0;
    for (; i + 8 <= e->n; i += 8) {
        memcpy(&w, e->data + i, 8);
        sum += w;
    }
    for (; i < e->n; i++)
        sum += e->data[i];
    g_sum += sum;
}

static void die(const char *what)
{
    fprintf(stderr, "conflux_peer: %s: %s\n", what, cx_errmsg());
    exit(1);
}

static void bind_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
    if (sched_setaffinity(0, sizeof set, &set) < 0)
        fprintf(stderr, "conflux_peer: cannot bind to CPU %d: %s\n", cpu, strerror(errno));
}

/* ---- the sink process -------------------------------------------------------------- */

struct sink_state {
    struct cx_chan_source *back;
    unsigned char *buf;
    long bulk;
    volatile int quit;
};

static void sink_on(void *arg, const struct cx_chan_event *e)
{
    struct sink_state *s = arg;
    const struct ev *in = e->data;
    struct ev out = {.kind = 'A', .n = 0, .data = s->buf};
    if (g_read)
        read_bytes(in);
    switch (in->kind) {
    case 'E':
        out.kind = 'E';
        out.n = in->n;
        break;
    case 'B':
        if (++s->bulk % BENCH_WINDOW)
            return;
        break;
    case 'Q':
        s->quit = 1;
        return;
    default:
        return;
    }
    while (cx_chan_submit(s->back, &out) == -EAGAIN)
        ; /* a reply queue of 1024 is never full here; spin rather than drop */
}

static int run_sink(int rfd)
{
    char ids[2][256];
    if (read(rfd, ids, sizeof ids) != (ssize_t)sizeof ids)
        return 2;
    const struct cx_format *F = ev_format();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ping, *pong;
    struct cx_chan_sink *k;
    struct sink_state s = {.buf = bench_buffer()};
    if (cx_chan_ctx_create(NULL, &ctx) < 0 || cx_chan_open(ctx, ids[0], 10000, &ping) < 0 ||
        cx_chan_open(ctx, ids[1], 10000, &pong) < 0 || cx_chan_source(pong, F, &s.back) < 0)
        die("sink setup");
    struct cx_chan_sink_opts so = {.format = F};
    if (cx_chan_sink(ping, &so, sink_on, &s, &k) < 0)
        die("sink");
    while (!s.quit) /* this thread receives and answers: no hand-off from the progress thread */
        if (cx_chan_ctx_drive(ctx, 100000) < 0)
            die("drive");
    usleep(100000); /* let the last ack leave */
    cx_chan_ctx_destroy(ctx);
    return 0;
}

/* ---- the source process ------------------------------------------------------------ */

static volatile long g_echoes, g_acks;

static void source_on(void *arg, const struct cx_chan_event *e)
{
    (void)arg;
    const struct ev *in = e->data;
    if (g_read)
        read_bytes(in);
    if (in->kind == 'E')
        __atomic_add_fetch(&g_echoes, 1, __ATOMIC_RELEASE);
    else if (in->kind == 'A')
        __atomic_add_fetch(&g_acks, 1, __ATOMIC_RELEASE);
}

static struct cx_chan_ctx *g_ctx;

static void wait_count(volatile long *c, long want, const char *what)
{
    double t0 = bench_now_us();
    unsigned spins = 0;
    while (__atomic_load_n(c, __ATOMIC_ACQUIRE) < want) {
        /* the waiting thread runs the progress itself: the reply's handler runs here */
        if (cx_chan_ctx_drive(g_ctx, 100000) < 0) {
            fprintf(stderr, "conflux_peer: drive: %s\n", cx_errmsg());
            exit(1);
        }
        if ((++spins & 1023) == 0 && bench_now_us() - t0 > TIMEOUT_US) {
            fprintf(stderr, "conflux_peer: no %s after 30 s (%ld of %ld)\n", what, *c, want);
            exit(1);
        }
    }
}

static void submit(struct cx_chan_source *src, const struct ev *e)
{
    int rc = cx_chan_submit_wait(src, e, 30000);
    if (rc < 0) {
        fprintf(stderr, "conflux_peer: submit: %s\n", cx_errmsg());
        exit(1);
    }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    int bind = 0;
    const char *sidecars = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) { /* ours, taken out; bench_parse knows the rest */
        int *flag = strcmp(argv[i], "--bind") == 0 ? &bind
                    : strcmp(argv[i], "--read") == 0 ? &g_read : NULL;
        const char **val = strncmp(argv[i], "--sidecars=", 11) == 0 ? &sidecars
                           : strncmp(argv[i], "--name=", 7) == 0 ? &name : NULL;
        if (!flag && !val)
            continue;
        if (flag)
            *flag = 1;
        else
            *val = strchr(argv[i], '=') + 1;
        memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof *argv);
        argc--, i--;
    }
    if (g_read)
        g_peer = "conflux-read";
    if (name)
        g_peer = name;
    /* --sidecars=A,B: the source process goes through the sidecar at socket A, the sink's
     * through B (two pods on one host); the library picks its backend at the first call */
    char sock_b[256] = "";
    if (sidecars) {
        const char *comma = strchr(sidecars, ',');
        if (!comma || (size_t)(comma - sidecars) >= sizeof sock_b) {
            fprintf(stderr, "conflux_peer: --sidecars=SOCKET_A,SOCKET_B\n");
            return 2;
        }
        snprintf(sock_b, sizeof sock_b, "%s", comma + 1);
        char sock_a[256];
        snprintf(sock_a, sizeof sock_a, "%.*s", (int)(comma - sidecars), sidecars);
        setenv("CONFLUX_SOCKET", sock_a, 1);
    }
    if (bench_parse(argc, argv, 1, &o) < 0)
        return 2;
    int p[2];
    if (pipe(p) != 0)
        return 1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (sock_b[0])
            setenv("CONFLUX_SOCKET", sock_b, 1);
        if (bind)
            bind_cpu(1);
        close(p[1]);
        _exit(run_sink(p[0]));
    }
    close(p[0]);
    if (bind)
        bind_cpu(0);
    const struct cx_format *F = ev_format();
    struct cx_chan_ctx *ctx;
    struct cx_chan *ping, *pong;
    struct cx_chan_source *src;
    struct cx_chan_sink *k;
    struct cx_chan_opts co = {.format = F, .mode = CX_CHAN_RELIABLE, .queue_limit = 4 * BENCH_WINDOW};
    if (cx_chan_ctx_create(NULL, &ctx) < 0 || cx_chan_create(ctx, &co, &ping) < 0 ||
        cx_chan_create(ctx, &co, &pong) < 0 || cx_chan_source(ping, F, &src) < 0)
        die("source setup");
    g_ctx = ctx;
    struct cx_chan_sink_opts so = {.format = F};
    if (cx_chan_sink(pong, &so, source_on, NULL, &k) < 0)
        die("sink");
    char ids[2][256] = {{0}};
    snprintf(ids[0], sizeof ids[0], "%s", cx_chan_id(ping));
    snprintf(ids[1], sizeof ids[1], "%s", cx_chan_id(pong));
    if (write(p[1], ids, sizeof ids) != (ssize_t)sizeof ids)
        return 1;
    if (cx_chan_wait_members(ping, 1, 1, 10000) < 0 || cx_chan_wait_members(pong, 1, 1, 10000) < 0)
        die("waiting for the sink process");
    unsigned char *buf = bench_buffer();
    /* the link the runtime chose to the sink's process (shm on one host), after one echo */
    struct ev probe = {.kind = 'E', .n = 1, .data = buf};
    submit(src, &probe);
    wait_count(&g_echoes, 1, "first echo");
    struct cx_chan_stats cs;
    cx_chan_stats(ping, &cs);
    const char *spin = getenv("CONFLUX_SPIN_US");
    printf("{\"peer\":\"%s\",\"link\":\"%s\",\"spin_us\":%s}\n", g_peer,
           cs.shm_sinks ? "shm" : cs.net_sinks ? "tcp" : "?", spin && *spin ? spin : "20");
    for (int i = 0; i < BENCH_NSIZES; i++) {
        size_t size = bench_sizes[i];
        if (o.only && o.only != size)
            continue;
        struct ev e = {.kind = 'E', .n = (uint32_t)size, .data = buf};
        long n = bench_lat_iters(&o, size);
        double *rtt = malloc((size_t)n * sizeof *rtt);
        for (long j = -BENCH_WARMUP; j < n; j++) {
            long want = g_echoes + 1;
            double t0 = bench_now_us();
            submit(src, &e);
            wait_count(&g_echoes, want, "echo");
            if (j >= 0)
                rtt[j] = bench_now_us() - t0;
        }
        bench_print_latency(g_peer, size, rtt, n);
        free(rtt);
        e.kind = 'B';
        long windows = bench_bw_windows(&o, size);
        long acks0 = g_acks;
        double t0 = bench_now_us();
        for (long w = 1; w <= windows; w++) {
            for (int j = 0; j < BENCH_WINDOW; j++)
                submit(src, &e);
            wait_count(&g_acks, acks0 + w, "window ack");
        }
        bench_print_bandwidth(g_peer, size, windows * BENCH_WINDOW, bench_now_us() - t0);
    }
    struct ev q = {.kind = 'Q', .n = 0, .data = buf};
    submit(src, &q);
    int st;
    waitpid(pid, &st, 0);
    cx_chan_ctx_destroy(ctx);
    free(buf);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
