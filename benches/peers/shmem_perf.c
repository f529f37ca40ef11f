/* OpenSHMEM (Open MPI's OSHMEM, spec 1.4) reference numbers for symmem-perf, PE 0 <-> PE 1.
 *
 *   oshcc -O2 shmem_perf.c -o shmem_perf && oshrun --mca osc ^rdma -np 2 ./shmem_perf [ITERS] [BYTES] [SIZES]
 *
 * Bandwidth (oshmem_put_bw) at each of SIZES (comma-separated bytes; default 4 KiB to
 * 16 MiB in x8 steps): back-to-back shmem_putmem_nbi of SIZE bytes from one buffer, then
 * one shmem_quiet (symmem-perf's put_bw), and get bandwidth (oshmem_get_bw): as many
 * shmem_getmem_nbi into one buffer, then one shmem_quiet (symmem-perf's get_bw); BYTES per
 * repetition (default 256 MiB; at least 8 transfers, at most ITERS).
 *
 * The ping-pong is the classic flag form: shmem_long_p of a sequence number, answered after
 * shmem_long_wait_until (one-way = round trip / 2). Where the library has put-with-signal
 * (OpenSHMEM 1.5: SOS; OSHMEM 1.4 has none), also symmem's form: shmem_putmem_signal of 8
 * bytes with SHMEM_SIGNAL_SET, answered after shmem_signal_wait_until. */
#include <shmem.h>

#include "common.h"

static long flag;   /* ping-pong flag (symmetric: a global) */
static long target; /* AMO / p / g target */
#ifdef SHMEM_SIGNAL_SET
static uint64_t signal_word; /* put_signal ping-pong signal */
static long payload;         /* put_signal ping-pong data */
#endif

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

/* PE 0's bandwidth with PE 1 in GB/s (median of REPS): `n` nonblocking transfers of `size`
 * bytes, then one quiet. `get` = 0: puts from `src` into PE 1's `dst` (symmem-perf's
 * put_bw); 1: gets from PE 1's `src` into `dst` (its get_bw). */
static double rma_bw(int me, int peer, char *dst, const char *src, long size, long n, int get) {
    double vals[REPS];
    for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */
        long count = r < 0 ? (n / 10 > 2 ? n / 10 : 2) : n;
        shmem_barrier_all();
        double t0 = now_s();
        if (me == 0) {
            for (long k = 0; k < count; k++) {
                if (get)
                    shmem_getmem_nbi(dst, src, (size_t)size, peer);
                else
                    shmem_putmem_nbi(dst, src, (size_t)size, peer);
            }
            shmem_quiet();
        }
        double t = now_s() - t0;
        if (r >= 0) vals[r] = (double)count * (double)size / t * 1e-9;
    }
    return median(vals, REPS);
}

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    long budget = argc > 2 && atol(argv[2]) > 0 ? atol(argv[2]) : 256L << 20;
    long sizes[MAX_SIZES];
    int n_sizes = parse_sizes(argc > 3 ? argv[3] : "4096,32768,262144,2097152,16777216", sizes);
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
#ifdef SHMEM_SIGNAL_SET
    TIME_REPS("oshmem_put_signal_pingpong_latency", 2.0, {
        signal_word = 0;
        shmem_barrier_all();
        t0 = now_s();
        if (active) {
            for (long i = 1; i <= n; i++) {
                if (me == 0) {
                    shmem_putmem_signal(&payload, &i, sizeof i, &signal_word, (uint64_t)i,
                                        SHMEM_SIGNAL_SET, peer);
                    shmem_signal_wait_until(&signal_word, SHMEM_CMP_GE, (uint64_t)i);
                } else {
                    shmem_signal_wait_until(&signal_word, SHMEM_CMP_GE, (uint64_t)i);
                    shmem_putmem_signal(&payload, &i, sizeof i, &signal_word, (uint64_t)i,
                                        SHMEM_SIGNAL_SET, peer);
                }
            }
        }
    });
#endif
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
    char *dst = shmem_malloc(MAX_TRANSFER), *src = malloc(MAX_TRANSFER);
    if (!dst || !src) {
        fprintf(stderr, "PE %d: cannot allocate the %ld-byte buffers\n", me, MAX_TRANSFER);
        shmem_global_exit(1);
    }
    memset(src, 0x5a, MAX_TRANSFER);
    memset(dst, 0, MAX_TRANSFER);
    for (int i = 0; i < n_sizes; i++) {
        double bw = rma_bw(me, peer, dst, src, sizes[i], transfers(budget, sizes[i], iters), 0);
        if (me == 0) print_json_row("oshmem_put_bw", sizes[i], bw, "GB/s", "p2p");
        bw = rma_bw(me, peer, src, dst, sizes[i], transfers(budget, sizes[i], iters), 1);
        if (me == 0) print_json_row("oshmem_get_bw", sizes[i], bw, "GB/s", "p2p");
    }
    shmem_barrier_all();
    shmem_free(dst);
    free(src);
    shmem_finalize();
    return 0;
}
