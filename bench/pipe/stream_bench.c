/* The pi-channels paper's throughput scenarios (seed pi-channels.txt, "π-channel
 * Throughput on a Multi-Cluster Testbed"), one run per call, for Conflux pipes or NATS
 * JetStream: a writer process and a reader process, forked here, move `count` segments of
 * `size` bytes through the server.
 *
 *   stream_bench --peer conflux|nats --addr A --scenario 1|2|3 --size B --count N
 *                [--window W] [--batch B] [--name NAME] [--timeout S]
 *
 *   1 matched: both start together
 *   2 create first: the writer writes everything and closes (the server holds it all);
 *     then the reader attaches and reads
 *   3 attach first: the reader attaches (asynchronously: pi_attach returns at once), then
 *     the writer starts
 *
 * Time runs from the writer's start (the harness says go) to the reader holding the last
 * verified segment. Prints one JSON line; exits 1 when a side failed.
 */
#include "stream_bench.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void seg_fill(uint8_t *p, size_t size, uint64_t i)
{
    if (i == 0) /* the pattern between the two indexes is written once */
        for (size_t k = 0; k < size; k++)
            p[k] = (uint8_t)(k * 31 + 7);
    if (size >= 16) {
        memcpy(p, &i, 8);
        memcpy(p + size - 8, &i, 8);
    }
}

int seg_check(const uint8_t *p, size_t len, size_t size, uint64_t i, struct side_result *out)
{
    uint64_t a = i, b = i;
    if (size >= 16) {
        memcpy(&a, p, 8);
        memcpy(&b, p + size - 8, 8);
    }
    size_t mid = size / 2;
    if (len != size || a != i || b != i || (size >= 16 && mid >= 8 && mid < size - 8 && p[mid] != (uint8_t)(mid * 31 + 7))) {
        out->rc = -EBADMSG;
        snprintf(out->err, sizeof out->err,
                 "segment %llu: %zu bytes with indexes %llu/%llu (expected %zu bytes, index %llu)",
                 (unsigned long long)i, len, (unsigned long long)a, (unsigned long long)b, size,
                 (unsigned long long)i);
        return out->rc;
    }
    return 0;
}

/* ---- the two child processes ------------------------------------------------------- */

struct child {
    pid_t pid;
    int go_w;     /* parent writes a byte: start */
    int res_r;    /* parent reads the struct side_result */
    int ready_r;  /* reader only: the time it attached */
};

static void ready_to_parent(void *arg, double t)
{
    int fd = *(int *)arg;
    if (write(fd, &t, sizeof t) != sizeof t) {
        /* the parent is gone: the run is over anyway */
    }
}

static int start_child(struct child *ch, const struct stream_run *r, int is_reader)
{
    int go[2], res[2], rdy[2];
    if (pipe(go) < 0 || pipe(res) < 0 || pipe(rdy) < 0)
        return -errno;
    ch->pid = fork();
    if (ch->pid < 0)
        return -errno;
    if (ch->pid == 0) {
        close(go[1]), close(res[0]), close(rdy[0]);
        char b;
        struct side_result out = {0};
        if (read(go[0], &b, 1) != 1)
            _exit(3);
        int conflux = strcmp(r->peer, "conflux") == 0;
        if (is_reader)
            conflux ? conflux_reader(r, &out, ready_to_parent, &rdy[1])
                    : nats_reader(r, &out, ready_to_parent, &rdy[1]);
        else
            conflux ? conflux_writer(r, &out) : nats_writer(r, &out);
        if (write(res[1], &out, sizeof out) != sizeof out)
            _exit(4);
        _exit(out.rc < 0 ? 1 : 0);
    }
    close(go[0]), close(res[1]), close(rdy[1]);
    ch->go_w = go[1];
    ch->res_r = res[0];
    ch->ready_r = rdy[0];
    return 0;
}

static void go(struct child *ch)
{
    if (write(ch->go_w, "g", 1) != 1)
        fprintf(stderr, "stream_bench: child %d is gone\n", (int)ch->pid);
}

static int result(struct child *ch, struct side_result *out, const char *who)
{
    ssize_t n = read(ch->res_r, out, sizeof *out);
    int st = 0;
    waitpid(ch->pid, &st, 0);
    ch->pid = 0;
    if (n != (ssize_t)sizeof *out) {
        out->rc = -EIO;
        snprintf(out->err, sizeof out->err, "the %s process died (status %d)", who, st);
    }
    return out->rc;
}

static struct child g_children[2];

static void on_alarm(int sig)
{
    (void)sig;
    for (int i = 0; i < 2; i++)
        if (g_children[i].pid > 0)
            kill(g_children[i].pid, SIGKILL);
    static const char msg[] = "stream_bench: timed out, children killed\n";
    if (write(2, msg, sizeof msg - 1) < 0) {
    }
    _exit(1);
}

static int usage(void)
{
    fprintf(stderr, "usage: stream_bench --peer conflux|nats --addr A --scenario 1|2|3 --size B "
                    "--count N [--window W] [--batch B] [--name NAME] [--timeout S]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct stream_run r = {0};
    int timeout = 600;
    static const struct option lo[] = {
        {"peer", required_argument, 0, 'p'},     {"addr", required_argument, 0, 'a'},
        {"scenario", required_argument, 0, 's'}, {"size", required_argument, 0, 'z'},
        {"count", required_argument, 0, 'n'},    {"window", required_argument, 0, 'w'},
        {"batch", required_argument, 0, 'b'},    {"name", required_argument, 0, 'N'},
        {"timeout", required_argument, 0, 't'},  {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (o) {
        case 'p': r.peer = optarg; break;
        case 'a': r.addr = optarg; break;
        case 's': r.scenario = atoi(optarg); break;
        case 'z': r.size = strtoull(optarg, NULL, 10); break;
        case 'n': r.count = strtoull(optarg, NULL, 10); break;
        case 'w': r.window = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'b': r.batch = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'N': snprintf(r.name, sizeof r.name, "%s", optarg); break;
        case 't': timeout = atoi(optarg); break;
        default: return usage();
        }
    }
    if (!r.peer || (strcmp(r.peer, "conflux") != 0 && strcmp(r.peer, "nats") != 0) || !r.addr ||
        r.scenario < 1 || r.scenario > 3 || r.size < 16 || r.size > (64u << 20) || r.count < 1 ||
        timeout < 1)
        return usage();
    /* both peers get the same windows: about 64 MiB of unacknowledged segments at most
     * (1024 segments up to 64 KiB), and NATS pulls in batches of about 8 MiB */
    if (!r.window) {
        size_t w = (64u << 20) / r.size;
        r.window = (uint32_t)(w > 1024 ? 1024 : w < 16 ? 16 : w);
    }
    if (!r.batch) {
        size_t b = (8u << 20) / r.size;
        r.batch = (uint32_t)(b > 1024 ? 1024 : b < 4 ? 4 : b);
    }
    if (!r.name[0])
        snprintf(r.name, sizeof r.name, "pb%d-%ld", (int)getpid(), (long)(bench_now() * 1e3) % 100000000);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, on_alarm);
    alarm((unsigned)timeout);

    struct child *wr = &g_children[0], *rd = &g_children[1];
    int rc;
    if ((rc = start_child(rd, &r, 1)) < 0 || (rc = start_child(wr, &r, 0)) < 0) {
        fprintf(stderr, "stream_bench: fork: %s\n", strerror(-rc));
        return 1;
    }
    struct side_result wres = {0}, rres = {0};
    double t0 = 0, t_read_go = 0;
    switch (r.scenario) {
    case SC_MATCHED:
        t0 = bench_now();
        go(wr);
        go(rd);
        t_read_go = t0;
        result(wr, &wres, "writer");
        result(rd, &rres, "reader");
        break;
    case SC_CREATE_FIRST:
        t0 = bench_now();
        go(wr);
        if (result(wr, &wres, "writer") == 0) {
            t_read_go = bench_now();
            go(rd);
            result(rd, &rres, "reader");
        } else {
            kill(rd->pid, SIGKILL);
            waitpid(rd->pid, NULL, 0);
            rres.rc = -ECANCELED;
        }
        break;
    case SC_ATTACH_FIRST: {
        go(rd);
        double t;
        if (read(rd->ready_r, &t, sizeof t) != sizeof t) {
            result(rd, &rres, "reader");
            kill(wr->pid, SIGKILL);
            waitpid(wr->pid, NULL, 0);
            wres.rc = -ECANCELED;
            break;
        }
        t0 = t_read_go = bench_now();
        go(wr);
        result(wr, &wres, "writer");
        result(rd, &rres, "reader");
        break;
    }
    }
    alarm(0);
    int ok = wres.rc == 0 && rres.rc == 0 && rres.segments == r.count;
    double secs = ok ? rres.t_done - t0 : 0;
    double bytes = (double)r.size * (double)r.count;
    printf("{\"peer\":\"%s\",\"scenario\":%d,\"size\":%zu,\"count\":%llu,\"bytes\":%.0f,"
           "\"window\":%u,\"batch\":%u,\"seconds\":%.6f,\"mbps\":%.2f,\"writer_seconds\":%.6f,"
           "\"read_seconds\":%.6f,\"from_writer\":%llu,\"ok\":%s}\n",
           r.peer, r.scenario, r.size, (unsigned long long)r.count, bytes, r.window, r.batch, secs,
           ok ? bytes / secs / 1e6 : 0.0, ok ? wres.t_done - t0 : 0.0,
           ok ? rres.t_done - t_read_go : 0.0, (unsigned long long)rres.from_writer, ok ? "true" : "false");
    fflush(stdout);
    if (!ok) {
        if (wres.rc)
            fprintf(stderr, "stream_bench %s writer: %s\n", r.peer, wres.err);
        if (rres.rc)
            fprintf(stderr, "stream_bench %s reader: %s\n", r.peer, rres.err);
        if (!wres.rc && !rres.rc)
            fprintf(stderr, "stream_bench %s: the reader got %llu of %llu segments\n", r.peer,
                    (unsigned long long)rres.segments, (unsigned long long)r.count);
    }
    /* free the server's disk for the next run */
    int crc = strcmp(r.peer, "conflux") == 0 ? conflux_cleanup(&r) : nats_cleanup(&r);
    if (crc < 0)
        fprintf(stderr, "stream_bench: removing %s from the server failed (%d)\n", r.name, crc);
    return ok ? 0 : 1;
}
