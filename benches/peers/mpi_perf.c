/* MPI reference numbers for symmem-perf, rank 0 <-> rank 1 (Open MPI 4.1).
 *
 *   mpicc -O2 mpi_perf.c -o mpi_perf && mpirun -np 2 ./mpi_perf [ITERS] [p2p] [BYTES] [SIZES]
 *   mpirun --mca pml ob1 --mca btl tcp,self --mca osc pt2pt -np 2 ./mpi_perf ITERS tcp [BYTES] [SIZES]
 *
 * RMA (MPI-3 passive target): one MPI_Win_allocate'd window under MPI_Win_lock_all; each
 * MPI_Put, MPI_Get and MPI_Fetch_and_op of the latency tests is followed by
 * MPI_Win_flush, so it is complete when timed (like symmem's blocking calls). Two-sided:
 * an MPI_Send/MPI_Recv ping-pong and MPI_Barrier.
 *
 * With `tcp` (run over the TCP BTL, as above: the baseline of symmem's socket transport)
 * the metrics are named mpi_tcp_*, their transport is "tcp"; otherwise mpi_* and "p2p".
 * Bandwidth at each of SIZES (comma-separated bytes; default 256 KiB, 1, 2 and 16 MiB),
 * BYTES per repetition (default 256 MiB; at least 8 transfers, at most ITERS):
 *   - put_bw: back-to-back MPI_Put of SIZE bytes from one buffer, then one MPI_Win_flush
 *     (symmem-perf's put_bw: put_nbi of the same buffer, then quiet);
 *   - get_bw: back-to-back MPI_Get of SIZE bytes into one buffer, then one MPI_Win_flush
 *     (symmem-perf's get_bw);
 *   - send_bw: windows of WINDOW MPI_Isend of SIZE bytes, then a zero-byte answer (as
 *     OSU's osu_bw). */
#include <mpi.h>

#include "common.h"

/* Per-iteration time in µs of one repetition of `body` over `n` iterations, on rank 0. */
#define TIME_REPS(name, per_iter, body)                                           \
    do {                                                                            \
        double vals[REPS];                                                          \
        for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */                     \
            long n = r < 0 ? (iters / 10 > 2 ? iters / 10 : 2) : iters;             \
            MPI_Barrier(MPI_COMM_WORLD);                                            \
            double t0 = now_s();                                                    \
            body;                                                                   \
            double t = now_s() - t0;                                                \
            if (r >= 0) vals[r] = t * 1e6 / ((double)n * (per_iter));               \
        }                                                                           \
        if (me == 0) {                                                              \
            char metric[64];                                                        \
            snprintf(metric, sizeof metric, "%s%s", prefix, name);                  \
            print_json_row(metric, 8, median(vals, REPS), "us", transport);         \
        }                                                                           \
    } while (0)

/* Messages in flight per window of the bandwidth test (as OSU's osu_bw). */
#define WINDOW 16

/* Streaming bandwidth in GB/s from rank 0 to rank 1 (median of REPS): windows of WINDOW
 * nonblocking sends of `size` bytes, each window answered by a zero-byte message, about
 * `transfers` messages per repetition. Both ranks reuse one buffer, as osu_bw does. */
static double send_bw(int me, size_t size, long transfers, char *buf) {
    long windows = transfers / WINDOW;
    if (windows < 1) windows = 1;
    MPI_Request req[WINDOW];
    double vals[REPS];
    for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */
        long n = r < 0 ? 1 : windows;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        for (long w = 0; w < n; w++) {
            for (int i = 0; i < WINDOW; i++) {
                if (me == 0)
                    MPI_Isend(buf, (int)size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[i]);
                else
                    MPI_Irecv(buf, (int)size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[i]);
            }
            MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
            if (me == 0)
                MPI_Recv(NULL, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(NULL, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
        double t = now_s() - t0;
        if (r >= 0) vals[r] = (double)n * WINDOW * (double)size / t * 1e-9;
    }
    return median(vals, REPS);
}

/* One-sided bandwidth in GB/s between rank 0 and rank 1's window (median of REPS): `n`
 * transfers of `size` bytes between one buffer and offset 0, then one MPI_Win_flush.
 * `get` = 0: MPI_Put into the window (put_bw); 1: MPI_Get from it (get_bw). */
static double rma_bw(int me, int peer, size_t size, long n, char *buf, MPI_Win win, int get) {
    double vals[REPS];
    for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */
        long count = r < 0 ? (n / 10 > 2 ? n / 10 : 2) : n;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now_s();
        if (me == 0) {
            for (long k = 0; k < count; k++) {
                if (get)
                    MPI_Get(buf, (int)size, MPI_BYTE, peer, 0, (int)size, MPI_BYTE, win);
                else
                    MPI_Put(buf, (int)size, MPI_BYTE, peer, 0, (int)size, MPI_BYTE, win);
            }
            MPI_Win_flush(peer, win);
        }
        double t = now_s() - t0;
        if (r >= 0) vals[r] = (double)count * (double)size / t * 1e-9;
    }
    return median(vals, REPS);
}

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    int tcp = argc > 2 && strcmp(argv[2], "tcp") == 0;
    long budget = argc > 3 && atol(argv[3]) > 0 ? atol(argv[3]) : 256L << 20;
    long sizes[MAX_SIZES];
    int n_sizes = parse_sizes(argc > 4 ? argv[4] : "262144,1048576,2097152,16777216", sizes);
    const char *prefix = tcp ? "mpi_tcp_" : "mpi_", *transport = tcp ? "tcp" : "p2p";
    MPI_Init(&argc, &argv);
    int me, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np < 2) {
        if (me == 0) fprintf(stderr, "needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int peer = me == 0 ? 1 : 0;
    long *base;
    MPI_Win win;
    /* The window holds the largest transfer; the word tests use its first long. */
    MPI_Win_allocate(MAX_TRANSFER, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    MPI_Barrier(MPI_COMM_WORLD);

    long one = 1, result = 0, msg = 0;
    TIME_REPS("fetch_and_op_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Fetch_and_op(&one, &result, MPI_LONG, peer, 0, MPI_SUM, win);
                MPI_Win_flush(peer, win);
            }
    });
    TIME_REPS("put_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Put(&one, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win);
                MPI_Win_flush(peer, win);
            }
    });
    TIME_REPS("get_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Get(&result, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win);
                MPI_Win_flush(peer, win);
            }
    });
    TIME_REPS("sendrecv_pingpong_latency", 2.0, {
        if (me < 2)
            for (long i = 0; i < n; i++) {
                if (me == 0) {
                    MPI_Send(&msg, 1, MPI_LONG, peer, 0, MPI_COMM_WORLD);
                    MPI_Recv(&msg, 1, MPI_LONG, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(&msg, 1, MPI_LONG, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(&msg, 1, MPI_LONG, peer, 0, MPI_COMM_WORLD);
                }
            }
    });
    TIME_REPS("barrier_latency", 1.0, {
        for (long i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
    });

    char *buf = malloc(MAX_TRANSFER);
    if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
    memset(buf, 0x5a, MAX_TRANSFER);
    char metric[64];
    for (int i = 0; i < n_sizes; i++) {
        long n = transfers(budget, sizes[i], iters);
        double bw = rma_bw(me, peer, (size_t)sizes[i], n, buf, win, 0);
        snprintf(metric, sizeof metric, "%sput_bw", prefix);
        if (me == 0) print_json_row(metric, sizes[i], bw, "GB/s", transport);
        bw = rma_bw(me, peer, (size_t)sizes[i], n, buf, win, 1);
        snprintf(metric, sizeof metric, "%sget_bw", prefix);
        if (me == 0) print_json_row(metric, sizes[i], bw, "GB/s", transport);
        bw = send_bw(me, (size_t)sizes[i], n, buf);
        snprintf(metric, sizeof metric, "%ssend_bw", prefix);
        if (me == 0) print_json_row(metric, sizes[i], bw, "GB/s", transport);
    }
    free(buf);

    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
