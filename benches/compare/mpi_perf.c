/* MPI reference numbers for symmem-perf, rank 0 <-> rank 1 (Open MPI 4.1).
 *
 *   mpicc -O2 mpi_perf.c -o mpi_perf && mpirun -np 2 ./mpi_perf [ITERS]
 *
 * RMA: one MPI_Win_allocate'd window under MPI_Win_lock_all; each operation is followed
 * by MPI_Win_flush, so it is complete when timed (like symmem's blocking calls). */
#include <mpi.h>

#include "common.h"

/* Per-iteration time in µs of one repetition of `body` over `n` iterations, on rank 0. */
#define TIME_REPS(metric, per_iter, body)                                           \
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
        if (me == 0) print_json(metric, 8, median(vals, REPS));                     \
    } while (0)

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
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
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = 0;
    MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
    MPI_Barrier(MPI_COMM_WORLD);

    long one = 1, result = 0, msg = 0;
    TIME_REPS("mpi_fetch_and_op_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Fetch_and_op(&one, &result, MPI_LONG, peer, 0, MPI_SUM, win);
                MPI_Win_flush(peer, win);
            }
    });
    TIME_REPS("mpi_get_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Get(&result, 1, MPI_LONG, peer, 0, 1, MPI_LONG, win);
                MPI_Win_flush(peer, win);
            }
    });
    TIME_REPS("mpi_sendrecv_pingpong_latency", 2.0, {
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
    TIME_REPS("mpi_barrier_latency", 1.0, {
        for (long i = 0; i < n; i++) MPI_Barrier(MPI_COMM_WORLD);
    });

    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
