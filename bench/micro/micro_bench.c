/* The microbenchmark suite (micro_tests.c) over a Conflux network driver between processes
 * of this machine: each peer is a forked process serving one link (ml_serve), this process
 * measures.
 *
 *   micro_bench <shm|tcp|ucx|tls> <all|lat|bw|bidir|cpu|overlap|notify|reuse> <quick|full> [reps]
 *   micro_bench <shm|tcp|ucx|tls> hotspot <quick|full> [reps] [max peers]
 *
 * Prints one JSON object per measured point (see micro.h). tls takes its credentials from
 * CONFLUX_TLS_CA / _CERT / _KEY (run.sh makes a CA and a certificate). */
#include "micro.h"

#include "common/cx_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef CX_HAVE_UCX
extern const struct cx_driver_ops cx_ucx_ops;
#endif
#ifdef CX_HAVE_TLS
extern const struct cx_driver_ops cx_tls_ops;
#endif

static const struct cx_driver_ops *driver(const char *name)
{
    if (!strcmp(name, "shm")) return &cx_shm_ops;
    if (!strcmp(name, "tcp")) return &cx_tcp_ops;
#ifdef CX_HAVE_UCX
    if (!strcmp(name, "ucx")) return &cx_ucx_ops;
#endif
#ifdef CX_HAVE_TLS
    if (!strcmp(name, "tls")) return &cx_tls_ops;
#endif
    return NULL;
}

/* Forks n peers; each listens, tells us its address through a pipe and serves one link.
 * All are forked before this process connects: a process must not fork once it has set up
 * a driver's state (ucx). */
static void start_peers(const struct cx_driver_ops *ops, const char *drv, int n, int block,
                        struct mlink *m, pid_t *pid)
{
    int rfd[16];
    for (int i = 0; i < n; i++) {
        int fds[2];
        if (pipe(fds) < 0) die("pipe", -1);
        fflush(NULL);
        pid[i] = fork();
        if (pid[i] == 0) {
            close(fds[0]);
            char addr[256];
            if (!strcmp(drv, "shm"))
                snprintf(addr, sizeof addr, "shm:///tmp/cx-micro-%d-%d.sock", (int)getpid(), i);
            else
                snprintf(addr, sizeof addr, "%s://127.0.0.1:0", drv);
            struct cx_listener *l;
            CK(ops->listen(addr, &l));
            const char *a = ops->listener_addr(l);
            if (write(fds[1], a, strlen(a) + 1) < 0) _exit(1);
            close(fds[1]);
            struct cx_link *k;
            CK(ops->accept(l, 30000, &k));
            ops->listener_close(l);
            struct mlink s;
            ml_init(&s, k);
            s.block = block;
            ml_serve(&s);
            cx_link_close(k);
            _exit(0);
        }
        close(fds[1]);
        rfd[i] = fds[0];
    }
    for (int i = 0; i < n; i++) {
        char addr[256] = {0};
        size_t got = 0;
        ssize_t r;
        while (got < sizeof addr - 1 && (r = read(rfd[i], addr + got, sizeof addr - 1 - got)) > 0)
            got += (size_t)r;
        close(rfd[i]);
        if (!got) die("peer did not start", -1);
        struct cx_link *k;
        CK(ops->connect(addr, &k));
        ml_init(&m[i], k);
    }
}

static void stop_peers(struct mlink *m, pid_t *pid, int n)
{
    for (int j = 0; j < n; j++) {
        CK(ml_send(&m[j], OP_STOP, NULL, 0));
        cx_link_flush(m[j].k, NULL, NULL, 2000);
    }
    for (int j = 0; j < n; j++) {
        int st;
        while (waitpid(pid[j], &st, WNOHANG) == 0) /* it may need our progress to finish */
            if (ml_pump(&m[j]) < 0) usleep(1000);
        cx_link_close(m[j].k);
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s <shm|tcp|ucx|tls> <all|lat|bw|bidir|cpu|overlap|notify|"
                "reuse|hotspot> <quick|full> [reps] [max peers]\n", argv[0]);
        return 2;
    }
    const struct cx_driver_ops *ops = driver(argv[1]);
    if (!ops) {
        fprintf(stderr, "micro_bench: driver '%s' not built in\n", argv[1]);
        return 2;
    }
    struct suite s = {.quick = !strcmp(argv[3], "quick"), .out = {"driver", argv[1], NULL}};
    s.reps = argc > 4 ? atoi(argv[4]) : (s.quick ? 3 : 5);
    if (s.reps < 1 || s.reps > 16) s.reps = 3;
    struct mlink m[16];
    pid_t pid[16];
    if (!strcmp(argv[2], "hotspot")) {
        int maxp = argc > 5 ? atoi(argv[5]) : (s.quick ? 2 : 4);
        if (maxp < 1 || maxp > 16) maxp = 2;
        /* the peers block on their fd when idle, so N busy-polling peers do not starve
         * the hot node on a machine with fewer cores than processes */
        s.out.note = "peers block on their fd when idle";
        start_peers(ops, argv[1], maxp, 1, m, pid); /* peers beyond np wait, blocked */
        for (int np = 1; np <= maxp; np++) test_hotspot(&s, m, np);
        stop_peers(m, pid, maxp);
        return 0;
    }
    start_peers(ops, argv[1], 1, 0, m, pid);
    run_tests(&s, argv[2], &m[0]);
    stop_peers(m, pid, 1);
    return 0;
}
