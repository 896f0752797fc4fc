/* The Open MPI peer of the microbenchmark suite, written in the style of the OSU
 * micro-benchmarks (osu_latency, osu_bw, osu_bibw) with the same sizes, windows and JSON
 * lines as micro_tests.c, so the report can put each Conflux figure beside MPI's.
 *
 *   mpirun -np 2 [--mca btl self,vader|self,tcp] mpi_micro <link> <all|lat|bw|bidir|cpu|overlap|reuse> <quick|full> [reps]
 *   mpirun -np N+1 ... mpi_micro <link> hotspot <quick|full> [reps]   rank 0 against N peers
 *
 * Rank 0 measures and prints; <link> names the transport the btl selection stands for. MPI
 * always busy-polls, so there is no blocking-wake-up (notify) test here. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define MAXREP 16
#define N(a) (sizeof(a) / sizeof(a)[0])
static const size_t LAT_Q[] = {8, 1024, 65536}, LAT_F[] = {8, 64, 512, 4096, 32768, 262144, 1048576};
static const size_t BW_Q[] = {64, 65536}, BW_F[] = {64, 512, 4096, 32768, 262144, 1048576};
static const int QS[] = {8, 16, 64, 100};
static int rank, nranks, quick, reps;
static const char *link_name;
enum { T_DATA = 1, T_ACK = 2, T_CTL = 3 };

static double proc_cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}
static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static void spin_ns(double ns)
{
    volatile double x0 = 1.0;
    double end = MPI_Wtime() + ns * 1e-9, x = x0;
    while (MPI_Wtime() < end)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    x0 = x;
}
static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static void emit(const char *test, const char *params, const char *metric, const char *unit,
                 double *r, long n, int ok)
{
    if (rank) return;
    double s[MAXREP];
    memcpy(s, r, sizeof(double) * (size_t)reps);
    qsort(s, (size_t)reps, sizeof *s, cmpd);
    double med = reps % 2 ? s[reps / 2] : (s[reps / 2 - 1] + s[reps / 2]) / 2;
    printf("{\"layer\":\"driver\",\"link\":\"%s\",\"impl\":\"openmpi\",\"test\":\"%s\","
           "\"params\":{%s},\"metric\":\"%s\",\"unit\":\"%s\",\"median\":%.4g,\"min\":%.4g,"
           "\"max\":%.4g,\"reps\":[", link_name, test, params, metric, unit, med, s[0], s[reps - 1]);
    for (int i = 0; i < reps; i++) printf("%s%.4g", i ? "," : "", r[i]);
    printf("],\"n\":%ld,\"matched\":%s}\n", n, ok ? "true" : "false");
    fflush(stdout);
}
static uint64_t lat_iters(size_t size)
{
    uint64_t n = quick ? 300 : 20000, cap = (quick ? 32u : 512u) << 20;
    if (n * (size + 64) > cap) n = cap / (size + 64);
    return n < 50 ? 50 : n;
}
static uint64_t windows_for(uint64_t q, size_t size)
{
    uint64_t w = ((quick ? 16ull : 256ull) << 20) / (q * (size + 48)), lo = quick ? 4 : 16;
    if (quick && w > 1000 / q) w = 1000 / q; /* the smoke run: at most ~1000 messages */
    if (w > 50000 / q) w = 50000 / q; /* at most ~50000 messages a point, as micro_tests.c */
    return w < lo ? lo : w;
}

static double pingpong(size_t size, uint64_t n)
{
    char *buf = calloc(1, size + 1);
    double *rtt = malloc(sizeof(double) * n);
    for (uint64_t i = 0; i < n + n / 10 + 10; i++) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, (int)size, MPI_BYTE, 1, T_DATA, MPI_COMM_WORLD);
            MPI_Recv(buf, (int)size, MPI_BYTE, 1, T_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, (int)size, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, (int)size, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD);
        }
        if (i >= n / 10 + 10) rtt[i - n / 10 - 10] = MPI_Wtime() - t0;
    }
    qsort(rtt, n, sizeof *rtt, cmpd);
    double med = rtt[n / 2] * 1e6 / 2;
    free(rtt), free(buf);
    return med;
}

/* Windowed stream rank 0 -> 1 (OSU bw): nbuf buffers in FIFO order (reuse >= 0: buffer 0
 * with that probability); returns MB/s; cpu[4] as in micro_tests.c when cpu != NULL. */
static double stream(size_t size, int q, uint64_t w, int nbuf, int reuse, double compute_ns,
                     int *ok, double *cpu)
{
    char **bufs = malloc(sizeof(char *) * (size_t)nbuf);
    for (int i = 0; i < nbuf; i++) bufs[i] = calloc(1, size + 1);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)q);
    unsigned rng = 12345;
    int next = 0;
    double peer[2] = {0, 0}, self0 = proc_cpu(), send_cpu = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) peer[0] = proc_cpu();
    double t0 = MPI_Wtime();
    uint64_t got = 0;
    for (uint64_t k = 0; k < w; k++) {
        if (rank == 0) {
            for (int i = 0; i < q; i++) {
                char *b;
                if (reuse >= 0) {
                    rng = rng * 1103515245u + 12345u;
                    if ((int)((rng >> 16) % 100) < reuse) b = bufs[0];
                    else next = next % (nbuf - 1) + 1, b = bufs[next];
                } else b = bufs[next], next = (next + 1) % nbuf;
                double c0 = cpu ? thread_cpu() : 0;
                MPI_Isend(b, (int)size, MPI_BYTE, 1, T_DATA, MPI_COMM_WORLD, &rq[i]);
                if (cpu) send_cpu += thread_cpu() - c0;
                if (compute_ns > 0) spin_ns(compute_ns);
            }
            MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
            MPI_Recv(&got, 1, MPI_UINT64_T, 1, T_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int i = 0; i < q; i++)
                MPI_Irecv(bufs[i % nbuf], (int)size, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD, &rq[i]);
            MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
            got += (uint64_t)q;
            MPI_Send(&got, 1, MPI_UINT64_T, 0, T_ACK, MPI_COMM_WORLD);
        }
    }
    double dt = MPI_Wtime() - t0;
    if (rank == 1) {
        peer[1] = proc_cpu();
        MPI_Send(peer, 2, MPI_DOUBLE, 0, T_CTL, MPI_COMM_WORLD);
    } else {
        MPI_Recv(peer, 2, MPI_DOUBLE, 1, T_CTL, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    uint64_t msgs = w * (uint64_t)q;
    *ok &= got == msgs;
    if (cpu) {
        cpu[0] = send_cpu / (double)msgs * 1e6;
        cpu[1] = (proc_cpu() - self0) / (double)msgs * 1e6;
        cpu[2] = (peer[1] - peer[0]) / (double)msgs * 1e6;
        cpu[3] = dt / (double)msgs * 1e6;
    }
    for (int i = 0; i < nbuf; i++) free(bufs[i]);
    free(bufs), free(rq);
    return (double)msgs * (double)size / dt / 1e6;
}

static void t_lat(void)
{
    for (size_t i = 0; i < (quick ? N(LAT_Q) : N(LAT_F)); i++) {
        size_t sz = quick ? LAT_Q[i] : LAT_F[i];
        double r[MAXREP];
        uint64_t n = lat_iters(sz);
        for (int k = 0; k < reps; k++) r[k] = pingpong(sz, n);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu", sz);
        emit("lat", p, "one_way_us", "us", r, (long)n, 1);
    }
}

static void t_bw(void)
{
    for (size_t qi = 0; qi < N(QS); qi++)
        for (size_t i = 0; i < (quick ? N(BW_Q) : N(BW_F)); i++) {
            size_t sz = quick ? BW_Q[i] : BW_F[i];
            double r[MAXREP];
            int ok = 1;
            uint64_t w = windows_for((uint64_t)QS[qi], sz);
            for (int k = 0; k < reps; k++) r[k] = stream(sz, QS[qi], w, 1, -1, 0, &ok, NULL);
            char p[64];
            snprintf(p, sizeof p, "\"size\":%zu,\"q\":%d", sz, QS[qi]);
            emit("bw", p, "MBps", "MB/s", r, (long)(w * (uint64_t)QS[qi]), ok);
        }
}

static void t_bidir(void)
{
    int peer = !rank;
    for (size_t i = 0; i < (quick ? N(BW_Q) : N(BW_F)); i++) {
        size_t sz = quick ? BW_Q[i] : BW_F[i];
        if (sz > 65536) continue;
        char *a = calloc(1, sz + 1), *b = calloc(1, sz + 1);
        double r[MAXREP];
        uint64_t n = lat_iters(sz);
        for (int k = 0; k < reps; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (uint64_t j = 0; j < n; j++)
                MPI_Sendrecv(a, (int)sz, MPI_BYTE, peer, T_DATA, b, (int)sz, MPI_BYTE, peer, T_DATA,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            r[k] = (MPI_Wtime() - t0) / (double)n * 1e6;
        }
        free(a), free(b);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu", sz);
        emit("bilat", p, "round_us", "us", r, (long)n, 1);
    }
    const int q = 64;
    for (size_t i = 0; i < (quick ? N(BW_Q) : N(BW_F)); i++) { /* osu_bibw */
        size_t sz = quick ? BW_Q[i] : BW_F[i];
        char *s = calloc(1, sz + 1), *d = calloc(1, sz + 1);
        MPI_Request rq[2 * 64];
        double r[MAXREP];
        uint64_t w = windows_for(q, sz);
        for (int k = 0; k < reps; k++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            for (uint64_t j = 0; j < w; j++) {
                for (int x = 0; x < q; x++)
                    MPI_Irecv(d, (int)sz, MPI_BYTE, peer, T_DATA, MPI_COMM_WORLD, &rq[x]);
                for (int x = 0; x < q; x++)
                    MPI_Isend(s, (int)sz, MPI_BYTE, peer, T_DATA, MPI_COMM_WORLD, &rq[q + x]);
                MPI_Waitall(2 * q, rq, MPI_STATUSES_IGNORE);
            }
            r[k] = 2.0 * (double)(w * q) * (double)sz / (MPI_Wtime() - t0) / 1e6;
        }
        free(s), free(d);
        char p[64];
        snprintf(p, sizeof p, "\"size\":%zu,\"q\":%d", sz, q);
        emit("bibw", p, "MBps", "MB/s", r, (long)(w * q), 1);
    }
}

static void t_cpu(void)
{
    static const size_t sz[] = {64, 65536};
    static const char *metric[] = {"send_call_cpu_us", "sender_cpu_us", "receiver_cpu_us", "wall_us"};
    for (size_t i = 0; i < N(sz); i++) {
        double r[4][MAXREP], c[4];
        int ok = 1;
        uint64_t w = windows_for(16, sz[i]);
        for (int k = 0; k < reps; k++) {
            stream(sz[i], 16, w, 1, -1, 0, &ok, c);
            for (int j = 0; j < 4; j++) r[j][k] = c[j];
        }
        char p[96];
        snprintf(p, sizeof p, "\"size\":%zu,\"q\":16,\"wait\":\"poll\"", sz[i]);
        for (int j = 0; j < 4; j++) emit("cpu", p, metric[j], "us/msg", r[j], (long)(w * 16), ok);
    }
}

static void t_overlap(void)
{
    static const double us[] = {0, 2, 5, 10, 20, 50, 100};
    uint64_t w = windows_for(16, 65536);
    for (size_t i = 0; i < (quick ? 4 : N(us)); i++) {
        double r[MAXREP], sh[MAXREP];
        int ok = 1;
        for (int k = 0; k < reps; k++) {
            r[k] = stream(65536, 16, w, 1, -1, us[i] * 1e3, &ok, NULL);
            sh[k] = us[i] * 1e-6 * (double)(w * 16) / ((double)(w * 16) * 65536.0 / (r[k] * 1e6));
        }
        qsort(sh, (size_t)reps, sizeof *sh, cmpd);
        char p[128];
        snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"compute_us\":%g,\"compute_share\":%.3f",
                 us[i], sh[reps / 2]);
        emit("overlap", p, "MBps", "MB/s", r, (long)(w * 16), ok);
    }
}

static void t_reuse(void)
{
    static const int nb[] = {1, 4, 16, 64, 256}, rp[] = {0, 25, 50, 75, 100};
    uint64_t w = windows_for(16, 65536);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < N(nb); i++) {
            if (quick && (i % 2)) continue;
            double r[MAXREP];
            int ok = 1;
            for (int k = 0; k < reps; k++)
                r[k] = pass ? stream(65536, 16, w, 256, rp[i], 0, &ok, NULL)
                            : stream(65536, 16, w, nb[i], -1, 0, &ok, NULL);
            char p[96];
            if (!pass) snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"buffers\":%d", nb[i]);
            else snprintf(p, sizeof p, "\"size\":65536,\"q\":16,\"buffers\":256,\"reuse_pct\":%d", rp[i]);
            emit(pass ? "reuse_pct" : "reuse_fifo", p, "MBps", "MB/s", r, (long)(w * 16), ok);
        }
}

/* Rank 0 pings every peer per round, then every peer streams windows to rank 0 at once. */
static void t_hotspot(void)
{
    int np = nranks - 1;
    uint64_t n = quick ? 200 : 5000;
    char ping[8] = {0};
    double r[MAXREP];
    MPI_Request rq[64];
    for (int k = 0; k < reps; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (uint64_t i = 0; i < n; i++) {
            if (rank == 0) {
                for (int j = 1; j <= np; j++) MPI_Send(ping, 8, MPI_BYTE, j, T_DATA, MPI_COMM_WORLD);
                for (int j = 1; j <= np; j++)
                    MPI_Recv(ping, 8, MPI_BYTE, j, T_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(ping, 8, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(ping, 8, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD);
            }
        }
        r[k] = (MPI_Wtime() - t0) / (double)n * 1e6 / 2;
    }
    char p[64];
    snprintf(p, sizeof p, "\"peers\":%d,\"size\":8", np);
    emit("hotspot_lat", p, "one_way_us", "us", r, (long)n, 1);
    const int q = 16;
    uint64_t w = windows_for(q, 65536) / (uint64_t)np + 2;
    char *buf = calloc(1, 65536);
    for (int k = 0; k < reps; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (uint64_t j = 0; j < w; j++) {
            if (rank == 0) {
                for (int x = 0; x < np * q; x++)
                    MPI_Irecv(buf, 65536, MPI_BYTE, 1 + x / q, T_DATA, MPI_COMM_WORLD, &rq[x]);
                MPI_Waitall(np * q, rq, MPI_STATUSES_IGNORE);
                for (int x = 1; x <= np; x++) MPI_Send(ping, 1, MPI_BYTE, x, T_ACK, MPI_COMM_WORLD);
            } else {
                for (int x = 0; x < q; x++)
                    MPI_Isend(buf, 65536, MPI_BYTE, 0, T_DATA, MPI_COMM_WORLD, &rq[x]);
                MPI_Waitall(q, rq, MPI_STATUSES_IGNORE);
                MPI_Recv(ping, 1, MPI_BYTE, 0, T_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
        r[k] = (double)np * (double)(w * q) * 65536.0 / (MPI_Wtime() - t0) / 1e6;
    }
    free(buf);
    snprintf(p, sizeof p, "\"peers\":%d,\"size\":65536,\"q\":16", np);
    emit("hotspot_bw", p, "MBps", "MB/s", r, (long)(w * q), 1);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 4 || nranks < 2 || nranks > 9) {
        if (!rank) fprintf(stderr, "usage: mpirun -np 2..5 %s <link> <test> <quick|full> [reps]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    link_name = argv[1];
    quick = !strcmp(argv[3], "quick");
    reps = argc > 4 ? atoi(argv[4]) : (quick ? 3 : 5);
    if (reps < 1 || reps > MAXREP) reps = 3;
    const char *t = argv[2];
    int all = !strcmp(t, "all");
    if (!strcmp(t, "hotspot")) t_hotspot();
    else if (nranks == 2) {
        if (all || !strcmp(t, "lat")) t_lat();
        if (all || !strcmp(t, "bw")) t_bw();
        if (all || !strcmp(t, "bidir")) t_bidir();
        if (all || !strcmp(t, "cpu")) t_cpu();
        if (all || !strcmp(t, "overlap")) t_overlap();
        if (all || !strcmp(t, "reuse")) t_reuse();
    }
    MPI_Finalize();
    return 0;
}
