/* Open MPI peer for the event-channel benchmark, OSU style (bench_common.h for the method).
 *
 *   mpirun -np 2 [--allow-run-as-root] --mca btl self,tcp mpi_peer <label> [--quick | ...]
 *
 * Rank 0 is the source and prints the JSON lines with peer "<label>" (run.sh passes
 * "mpi-tcp" or "mpi-shm" after the transport it selected); rank 1 is the sink.
 *   latency    MPI_Send / MPI_Recv ping-pong of `size` bytes (osu_latency)
 *   bandwidth  a window of BENCH_WINDOW MPI_Isend, MPI_Waitall, then a 4-byte ack from the
 *              sink, whose MPI_Irecv window was posted in advance (osu_bw)
 */
#include "bench_common.h"

#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    struct bench_opts o;
    if (argc < 2 || nranks != 2 || bench_parse(argc, argv, 2, &o) < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 %s <label> [--quick | --lat-n N --bw-bytes N "
                            "--size N] (got %d ranks)\n", argv[0], nranks);
        MPI_Finalize();
        return 2;
    }
    const char *label = argv[1];
    unsigned char *buf = bench_buffer();
    unsigned char *win = NULL;
    MPI_Request req[BENCH_WINDOW];
    int ack = 0;
    const int peer = 1 - rank;

    for (int si = 0; si < BENCH_NSIZES; si++) {
        int size = (int)bench_sizes[si];
        if (o.only && o.only != (size_t)size)
            continue;
        long n = bench_lat_iters(&o, (size_t)size);
        double *rtt = rank == 0 ? malloc(sizeof *rtt * (size_t)n) : NULL;
        MPI_Barrier(MPI_COMM_WORLD);
        for (long i = -BENCH_WARMUP; i < n; i++) {
            if (rank == 0) {
                double t0 = bench_now_us();
                MPI_Send(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (i >= 0)
                    rtt[i] = bench_now_us() - t0;
            } else {
                MPI_Recv(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, size, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
        if (rank == 0) {
            bench_print_latency(label, (size_t)size, rtt, n);
            free(rtt);
        }

        /* The sink receives each event of a window into its own slot, as osu_bw does. */
        if (rank == 1 && !win && !(win = malloc((size_t)BENCH_WINDOW * BENCH_MAX_SIZE))) {
            perror("malloc");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        long windows = bench_bw_windows(&o, (size_t)size);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = 0;
        for (long w = -2; w < windows; w++) { /* two warm-up windows */
            if (w == 0)
                t0 = bench_now_us();
            if (rank == 0) {
                for (int k = 0; k < BENCH_WINDOW; k++)
                    MPI_Isend(buf, size, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[k]);
                MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Recv(&ack, 1, MPI_INT, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                for (int k = 0; k < BENCH_WINDOW; k++)
                    MPI_Irecv(win + (size_t)k * BENCH_MAX_SIZE, size, MPI_BYTE, peer, 2,
                              MPI_COMM_WORLD, &req[k]);
                MPI_Waitall(BENCH_WINDOW, req, MPI_STATUSES_IGNORE);
                MPI_Send(&ack, 1, MPI_INT, peer, 3, MPI_COMM_WORLD);
            }
        }
        if (rank == 0)
            bench_print_bandwidth(label, (size_t)size, windows * BENCH_WINDOW,
                                  bench_now_us() - t0);
    }
    free(win);
    free(buf);
    MPI_Finalize();
    return 0;
}
