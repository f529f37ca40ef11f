/* OpenSHMEM (Open MPI's OSHMEM, spec 1.4) reference numbers for symmem-perf, PE 0 <-> PE 1.
 *
 *   oshcc -O2 shmem_perf.c -o shmem_perf && oshrun --mca osc ^rdma -np 2 ./shmem_perf [ITERS]
 *
 * OSHMEM 1.4 has no put_signal, so the ping-pong is the classic flag form: shmem_long_p of
 * a sequence number, answered after shmem_long_wait_until (one-way = round trip / 2). */
#include <shmem.h>

#include "common.h"

static long flag;   /* ping-pong flag (symmetric: a global) */
static long target; /* AMO / p / g target */

/* Per-iteration time in µs of one repetition of `body` over `iters` iterations, on PE 0. */
#define TIME_REPS(metric, per_iter, body)                                           \
    do {                                                                            \
        double vals[REPS];                                                          \
        for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */                     \
            long n = r < 0 ? (iters / 10 > 2 ? iters / 10 : 2) : iters;             \
            shmem_barrier_all();                                                    \
            double t0 = now_s();                                                    \
            body;                                                                   \
            double t = now_s() - t0;                                                \
            if (r >= 0) vals[r] = t * 1e6 / ((double)n * (per_iter));               \
        }                                                                           \
        if (me == 0) print_json(metric, 8, median(vals, REPS));                     \
    } while (0)

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    shmem_init();
    int me = shmem_my_pe();
    int peer = me == 0 ? 1 : 0;
    if (shmem_n_pes() < 2) {
        if (me == 0) fprintf(stderr, "needs 2 PEs\n");
        shmem_finalize();
        return 2;
    }
    int active = me < 2;

    /* Ping-pong: each repetition counts from 1 again after resetting the flag. */
    TIME_REPS("oshmem_p_wait_pingpong_latency", 2.0, {
        flag = 0;
        shmem_barrier_all();
        t0 = now_s();
        if (active) {
            for (long i = 1; i <= n; i++) {
                if (me == 0) {
                    shmem_long_p(&flag, i, peer);
                    shmem_long_wait_until(&flag, SHMEM_CMP_GE, i);
                } else {
                    shmem_long_wait_until(&flag, SHMEM_CMP_GE, i);
                    shmem_long_p(&flag, i, peer);
                }
            }
        }
    });
    TIME_REPS("oshmem_p_latency", 1.0, {
        if (me == 0)
            for (long i = 0; i < n; i++) {
                shmem_long_p(&target, i, peer);
                shmem_quiet();
            }
    });
    TIME_REPS("oshmem_g_latency", 1.0, {
        volatile long sink = 0;
        if (me == 0)
            for (long i = 0; i < n; i++) sink += shmem_long_g(&target, peer);
        (void)sink;
    });
    TIME_REPS("oshmem_atomic_fetch_add_latency", 1.0, {
        volatile long sink = 0;
        if (me == 0)
            for (long i = 0; i < n; i++) sink += shmem_long_atomic_fetch_add(&target, 1, peer);
        (void)sink;
    });
    TIME_REPS("oshmem_barrier_all_latency", 1.0, {
        for (long i = 0; i < n; i++) shmem_barrier_all();
    });
    shmem_finalize();
    return 0;
}
