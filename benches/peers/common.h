/* Shared timing helpers for the symmem peer-comparison programs (benches/peers): warm-up,
 * repetitions, median, transfer sizes, and symmem-perf's JSON line format. Only rank/PE 0
 * prints. */
#ifndef SYMMEM_PEERS_COMMON_H
#define SYMMEM_PEERS_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Timed repetitions per metric; the median is reported, as in symmem-perf. */
#define REPS 11

/* Monotonic time in seconds. */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* One line in symmem-perf's --json format, with its unit ("us" or "GB/s") and transport. */
static inline void print_json_row(const char *metric, long size, double value, const char *unit,
                           const char *transport) {
    printf("{\"metric\":\"%s\",\"size\":%ld,\"value\":%.4f,\"unit\":\"%s\","
           "\"transport\":\"%s\",\"initiator\":\"host\"}\n",
           metric, size, value, unit, transport);
    fflush(stdout);
}

/* A latency line (µs) over shared memory. */
static inline void print_json(const char *metric, long size, double value_us) {
    print_json_row(metric, size, value_us, "us", "p2p");
}

/* Iterations per repetition: argv[1] if given (the --quick smoke run passes a small one). */
static long iters_from_args(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    return n > 0 ? n : 100000;
}

/* Most transfer sizes a size list may name. */
#define MAX_SIZES 16

/* Largest transfer of the bandwidth tests (symmem-perf's largest). */
#define MAX_TRANSFER (16L << 20)

/* Parses a comma-separated list of byte counts ("4096,262144") into `out` (at most
 * MAX_SIZES, each 1..MAX_TRANSFER); returns how many, or exits naming the bad entry. */
static inline int parse_sizes(const char *list, long *out) {
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > MAX_TRANSFER || n == MAX_SIZES || (*end && *end != ',')) {
            fprintf(stderr, "bad transfer size list \"%s\" (at \"%s\"): expected up to %d byte counts "
                    "from 1 to %ld, comma-separated\n", list, p, MAX_SIZES, MAX_TRANSFER);
            exit(2);
        }
        out[n++] = v;
        p = *end ? end + 1 : end;
    }
    return n;
}

/* Transfers per bandwidth repetition, as symmem-perf: the byte budget over the size, at
 * least 8, at most `iters`. */
static inline long transfers(long budget, long size, long iters) {
    long n = budget / size;
    if (n < 8) n = 8;
    return n < iters ? n : iters;
}

#endif
