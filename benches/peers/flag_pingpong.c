/* The floor under any shared-memory ping-pong on this machine: two processes bounce a
 * counter through flags in a MAP_SHARED mapping with plain C11 atomics (Release store,
 * Acquire spin with pause). Measured twice, because the layout decides the cost:
 *
 *   - both flags on one cache line: one line moves per one-way trip;
 *   - each flag on its own page: the layout a put_signal ping-pong has (each PE's signal
 *     lives in its own heap), where the writer must first take the line from the
 *     spinning reader and the reader then fetches it back.
 *
 *   cc -O2 flag_pingpong.c -o flag_pingpong && ./flag_pingpong [ITERS] */
#include <immintrin.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

/* One-way latency in µs (median of REPS) with the flags `offset` bytes apart. */
static double pingpong(long iters, size_t offset) {
    char *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    _Atomic long *ping = (_Atomic long *)m, *pong = (_Atomic long *)(m + offset);
    long warm = iters / 10 > 2 ? iters / 10 : 2;
    long total = warm + REPS * iters;
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(1);
    }
    if (child == 0) {
        for (long i = 1; i <= total; i++) {
            while (atomic_load_explicit(ping, memory_order_acquire) < i) _mm_pause();
            atomic_store_explicit(pong, i, memory_order_release);
        }
        _exit(0);
    }
    double vals[REPS];
    long seq = 1;
    for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */
        long n = r < 0 ? warm : iters;
        double t0 = now_s();
        for (long k = 0; k < n; k++, seq++) {
            atomic_store_explicit(ping, seq, memory_order_release);
            while (atomic_load_explicit(pong, memory_order_acquire) < seq) _mm_pause();
        }
        double t = now_s() - t0;
        if (r >= 0) vals[r] = t * 1e6 / ((double)n * 2.0);
    }
    waitpid(child, NULL, 0);
    munmap(m, 1 << 16);
    return median(vals, REPS);
}

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    print_json("c_flag_pingpong_same_line_latency", 8, pingpong(iters, 8));
    print_json("c_flag_pingpong_separate_pages_latency", 8, pingpong(iters, 4096));
    return 0;
}
