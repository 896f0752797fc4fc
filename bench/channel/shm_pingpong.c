/* The floor under Conflux's event-channel latency: the shm driver alone (no channel
 * runtime, no mux, no format), two processes on their own cores, a frame of `size` bytes
 * echoed back, each side busy-polling its link. Printed in the same JSON as the peers
 * (peer "shm-driver"); run.sh does not tabulate it, bench/channel/README.md quotes it to
 * show which part of a channel's latency is the link and which the runtime above it.
 *
 *   shm_pingpong [--quick | --medium | --lat-n N] [--size N]
 */
#define _GNU_SOURCE
#include "bench_common.h"

#include "common/cx_error.h"
#include "transport/cx_driver.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static struct cx_link *g_link;
static long g_got;
static int g_echo;
static unsigned char *g_buf;

static void on_frame(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    (void)arg, (void)p;
    g_got++;
    if (g_echo) { /* the same size back, from this process's own buffer */
        struct iovec v = {g_buf, len};
        if (cx_link_send(g_link, h, &v, 1) < 0)
            _exit(3);
    }
}

static void bind_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
    sched_setaffinity(0, sizeof set, &set);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    if (bench_parse(argc, argv, 1, &o) < 0)
        return 2;
    char addr[64];
    snprintf(addr, sizeof addr, "shm://@conflux-bench-pingpong-%d", (int)getpid());
    const struct cx_driver_ops *ops;
    struct cx_listener *l;
    if (cx_listen(addr, &ops, &l) < 0) {
        fprintf(stderr, "shm_pingpong: %s\n", cx_errmsg());
        return 1;
    }
    g_buf = bench_buffer();
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        bind_cpu(1);
        if (cx_connect(addr, &g_link) < 0)
            _exit(2);
        g_echo = 1;
        while (cx_link_progress(g_link, on_frame, NULL, 64) >= 0)
            ;
        _exit(0); /* the parent closed the link */
    }
    bind_cpu(0);
    if (ops->accept(l, 10000, &g_link) < 0) {
        fprintf(stderr, "shm_pingpong: %s\n", cx_errmsg());
        return 1;
    }
    for (int i = 0; i < BENCH_NSIZES; i++) {
        size_t size = bench_sizes[i];
        if (o.only && o.only != size)
            continue;
        long n = bench_lat_iters(&o, size);
        double *rtt = malloc((size_t)n * sizeof *rtt);
        struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1};
        struct iovec v = {g_buf, size};
        for (long j = -BENCH_WARMUP; j < n; j++) {
            long want = g_got + 1;
            double t0 = bench_now_us();
            if (cx_link_send(g_link, &h, &v, 1) < 0)
                return 1;
            while (g_got < want)
                if (cx_link_progress(g_link, on_frame, NULL, 64) < 0)
                    return 1;
            if (j >= 0)
                rtt[j] = bench_now_us() - t0;
        }
        bench_print_latency("shm-driver", size, rtt, n);
        free(rtt);
    }
    cx_link_close(g_link);
    ops->listener_close(l);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}
