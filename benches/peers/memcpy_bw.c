/* The physical limit under symmem's put bandwidth on one machine: one core's memcpy
 * between two private, pre-touched, page-aligned 16 MiB buffers, the same source and
 * destination every time (as symmem-perf's memcpy_bw baseline and put_bw do), in GB/s
 * (10^9 bytes/s), median of REPS repetitions.
 *
 *   cc -O2 memcpy_bw.c -o memcpy_bw && ./memcpy_bw [ITERS] [BYTES] [SIZES]
 *
 * ITERS caps the copies per repetition (default 100000), BYTES is the byte budget per
 * repetition (default 256 MiB: sizes above BYTES/ITERS run BYTES/size copies, at least 8),
 * SIZES a comma-separated list of byte counts (default symmem-perf's sweep, 8 B to 16 MiB).
 *
 * A second row per size (c_nt_copy_bw, x86-64 only) copies with non-temporal stores
 * (32-byte vmovntdq where the CPU has AVX2, else 16-byte movntdq, after the destination's
 * head up to a boundary of that width, then sfence), as symmem's host copies do: they
 * bypass the caches, so the faster of the two is the limit for copies larger than the
 * last-level cache can hold. */
#include "common.h"
#ifdef __x86_64__
#include <immintrin.h>
#endif

typedef void *(*copy_fn)(void *, const void *, size_t);

#ifdef __x86_64__
/* memcpy by non-temporal stores: the head to the destination's first 16-byte boundary and
 * the tail by memcpy, the body by four 16-byte streaming stores per step, then sfence. */
static void *nt_copy_sse2(void *dst_, const void *src_, size_t len) {
    char *dst = dst_;
    const char *src = src_;
    size_t head = (16 - ((size_t)dst & 15)) & 15;
    if (head > len) head = len;
    memcpy(dst, src, head);
    dst += head, src += head, len -= head;
    for (; len >= 64; dst += 64, src += 64, len -= 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + 32)), d = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(dst + 48), d);
    }
    memcpy(dst, src, len);
    _mm_sfence();
    return dst_;
}

/* The same with 32-byte streaming stores, four per 128-byte step. */
__attribute__((target("avx2"))) static void *nt_copy_avx2(void *dst_, const void *src_, size_t len) {
    char *dst = dst_;
    const char *src = src_;
    size_t head = (32 - ((size_t)dst & 31)) & 31;
    if (head > len) head = len;
    memcpy(dst, src, head);
    dst += head, src += head, len -= head;
    for (; len >= 128; dst += 128, src += 128, len -= 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)src), b = _mm256_loadu_si256((const __m256i *)(src + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(src + 64)), d = _mm256_loadu_si256((const __m256i *)(src + 96));
        _mm256_stream_si256((__m256i *)dst, a);
        _mm256_stream_si256((__m256i *)(dst + 32), b);
        _mm256_stream_si256((__m256i *)(dst + 64), c);
        _mm256_stream_si256((__m256i *)(dst + 96), d);
    }
    memcpy(dst, src, len);
    _mm_sfence();
    return dst_;
}

/* The widest non-temporal copy this CPU has. */
static void *nt_copy(void *dst, const void *src, size_t len) {
    return __builtin_cpu_supports("avx2") ? nt_copy_avx2(dst, src, len) : nt_copy_sse2(dst, src, len);
}
#endif

/* Copies `size` bytes `n` times from `src` to `dst` with `copy`; returns the seconds taken. */
static double copy_loop(copy_fn copy, char *dst, const char *src, long size, long n) {
    double t0 = now_s();
    for (long k = 0; k < n; k++) {
        copy(dst, src, (size_t)size);
        /* The copy has an effect the compiler cannot see through, so identical copies are
         * not merged or dropped. */
        __asm__ volatile("" : : "r"(dst), "r"(src) : "memory");
    }
    return now_s() - t0;
}

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    long budget = argc > 2 && atol(argv[2]) > 0 ? atol(argv[2]) : 256L << 20;
    long sizes[MAX_SIZES];
    int n_sizes = parse_sizes(argc > 3 ? argv[3] : "8,64,512,4096,32768,262144,2097152,16777216", sizes);
    char *src = aligned_alloc(4096, MAX_TRANSFER), *dst = aligned_alloc(4096, MAX_TRANSFER);
    if (!src || !dst) {
        perror("aligned_alloc");
        return 1;
    }
    memset(src, 0x5a, MAX_TRANSFER);
    memset(dst, 0, MAX_TRANSFER);
    for (int i = 0; i < n_sizes; i++) {
        long size = sizes[i], n = transfers(budget, size, iters);
        long warm = n / 10 > 2 ? n / 10 : 2;
        double vals[REPS];
        copy_loop(memcpy, dst, src, size, warm);
        for (int r = 0; r < REPS; r++) vals[r] = (double)n * (double)size / copy_loop(memcpy, dst, src, size, n) * 1e-9;
        print_json_row("c_memcpy_bw", size, median(vals, REPS), "GB/s", "p2p");
#ifdef __x86_64__
        copy_loop(nt_copy, dst, src, size, warm);
        for (int r = 0; r < REPS; r++) vals[r] = (double)n * (double)size / copy_loop(nt_copy, dst, src, size, n) * 1e-9;
        print_json_row("c_nt_copy_bw", size, median(vals, REPS), "GB/s", "p2p");
#endif
    }
    free(src);
    free(dst);
    return 0;
}
