/*
 * nvshmem.h: the host subset of NVSHMEM's API under nvshmem_* names, mapped onto
 * symmem's OpenSHMEM implementation (libsymmem), so NVSHMEM host code ports by
 * recompiling against this header and linking -lsymmem (symcc does both).
 *
 * Provided: nvshmem_init/finalize, my_pe/n_pes, malloc/calloc/align/free, ptr,
 * putmem/getmem (+ _nbi), typed put/get/p/g/iput/iget (+ _nbi) on NVSHMEM's standard RMA
 * types, put_signal (+ _nbi), signal_fetch/signal_wait_until, the typed AMOs, the typed
 * waits, quiet/fence, barrier_all/sync_all, teams (NVSHMEM_TEAM_WORLD, NVSHMEM_TEAM_SHARED,
 * nvshmem_team_my_pe/n_pes/translate_pe/split_strided/destroy, nvshmem_barrier/sync), and
 * the team collectives (broadcast, fcollect, alltoall, reductions) as host calls.
 * Not provided: device-side (__device__) functions, *_on_stream and nvshmemx_* extensions,
 * nvshmemx_init_attr. Constants (NVSHMEM_CMP_*, NVSHMEM_SIGNAL_*) have symmem's values,
 * so code must be recompiled, not only relinked. Errors follow shmem.h.
 */
#ifndef SYMMEM_NVSHMEM_H
#define SYMMEM_NVSHMEM_H

#include <shmem.h>

#define NVSHMEM_MAJOR_VERSION 2
#define NVSHMEM_MINOR_VERSION 0
#define NVSHMEM_CMP_EQ SHMEM_CMP_EQ
#define NVSHMEM_CMP_NE SHMEM_CMP_NE
#define NVSHMEM_CMP_GT SHMEM_CMP_GT
#define NVSHMEM_CMP_GE SHMEM_CMP_GE
#define NVSHMEM_CMP_LT SHMEM_CMP_LT
#define NVSHMEM_CMP_LE SHMEM_CMP_LE
#define NVSHMEM_SIGNAL_SET SHMEM_SIGNAL_SET
#define NVSHMEM_SIGNAL_ADD SHMEM_SIGNAL_ADD
#define NVSHMEM_THREAD_SINGLE SHMEM_THREAD_SINGLE
#define NVSHMEM_THREAD_FUNNELED SHMEM_THREAD_FUNNELED
#define NVSHMEM_THREAD_SERIALIZED SHMEM_THREAD_SERIALIZED
#define NVSHMEM_THREAD_MULTIPLE SHMEM_THREAD_MULTIPLE

typedef shmem_team_t nvshmem_team_t;
typedef shmem_team_config_t nvshmem_team_config_t;
#define NVSHMEM_TEAM_INVALID SHMEM_TEAM_INVALID
#define NVSHMEM_TEAM_WORLD SHMEM_TEAM_WORLD
#define NVSHMEM_TEAM_SHARED SHMEM_TEAM_SHARED
#define NVSHMEMX_TEAM_NODE SHMEM_TEAM_SHARED

#ifdef __cplusplus
extern "C" {
#endif

static inline void nvshmem_init(void) { shmem_init(); }
static inline int nvshmem_init_thread(int requested, int *provided) {
    return shmem_init_thread(requested, provided);
}
static inline void nvshmem_query_thread(int *provided) { shmem_query_thread(provided); }
static inline void nvshmem_finalize(void) { shmem_finalize(); }
static inline int nvshmem_my_pe(void) { return shmem_my_pe(); }
static inline int nvshmem_n_pes(void) { return shmem_n_pes(); }
static inline void nvshmem_info_get_version(int *major, int *minor) {
    shmem_info_get_version(major, minor);
}
static inline void nvshmem_info_get_name(char *name) { shmem_info_get_name(name); }
static inline void nvshmem_global_exit(int status) { shmem_global_exit(status); }
static inline void *nvshmem_malloc(size_t size) { return shmem_malloc(size); }
static inline void *nvshmem_calloc(size_t count, size_t size) {
    return shmem_calloc(count, size);
}
static inline void *nvshmem_align(size_t alignment, size_t size) {
    return shmem_align(alignment, size);
}
static inline void nvshmem_free(void *ptr) { shmem_free(ptr); }
static inline void *nvshmem_ptr(const void *dest, int pe) { return shmem_ptr(dest, pe); }
static inline void nvshmem_quiet(void) { shmem_quiet(); }
static inline void nvshmem_fence(void) { shmem_fence(); }
static inline void nvshmem_barrier_all(void) { shmem_barrier_all(); }
static inline void nvshmem_sync_all(void) { shmem_sync_all(); }
static inline int nvshmem_barrier(nvshmem_team_t team) {
    shmem_quiet();
    return shmem_team_sync(team);
}
static inline int nvshmem_team_sync(nvshmem_team_t team) { return shmem_team_sync(team); }
static inline int nvshmem_team_my_pe(nvshmem_team_t team) { return shmem_team_my_pe(team); }
static inline int nvshmem_team_n_pes(nvshmem_team_t team) { return shmem_team_n_pes(team); }
static inline int nvshmem_team_translate_pe(nvshmem_team_t src, int pe, nvshmem_team_t dest) {
    return shmem_team_translate_pe(src, pe, dest);
}
static inline int nvshmem_team_split_strided(nvshmem_team_t parent, int start, int stride,
                                             int size, const nvshmem_team_config_t *config,
                                             long config_mask, nvshmem_team_t *new_team) {
    return shmem_team_split_strided(parent, start, stride, size, config, config_mask,
                                    new_team);
}
static inline void nvshmem_team_destroy(nvshmem_team_t team) { shmem_team_destroy(team); }

static inline void nvshmem_putmem(void *dest, const void *source, size_t bytes, int pe) {
    shmem_putmem(dest, source, bytes, pe);
}
static inline void nvshmem_getmem(void *dest, const void *source, size_t bytes, int pe) {
    shmem_getmem(dest, source, bytes, pe);
}
static inline void nvshmem_putmem_nbi(void *dest, const void *source, size_t bytes, int pe) {
    shmem_putmem_nbi(dest, source, bytes, pe);
}
static inline void nvshmem_getmem_nbi(void *dest, const void *source, size_t bytes, int pe) {
    shmem_getmem_nbi(dest, source, bytes, pe);
}
static inline void nvshmem_putmem_signal(void *dest, const void *source, size_t bytes,
                                         uint64_t *sig_addr, uint64_t signal, int sig_op,
                                         int pe) {
    shmem_putmem_signal(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
static inline void nvshmem_putmem_signal_nbi(void *dest, const void *source, size_t bytes,
                                             uint64_t *sig_addr, uint64_t signal,
                                             int sig_op, int pe) {
    shmem_putmem_signal_nbi(dest, source, bytes, sig_addr, signal, sig_op, pe);
}
static inline uint64_t nvshmem_signal_fetch(uint64_t *sig_addr) {
    return shmem_signal_fetch(sig_addr);
}
static inline uint64_t nvshmem_signal_wait_until(uint64_t *sig_addr, int cmp,
                                                 uint64_t cmp_value) {
    return shmem_signal_wait_until(sig_addr, cmp, cmp_value);
}

/* NVSHMEM's standard RMA types (no long double): X(TYPE, TYPENAME). */
#define SYMMEM_NV_RMA_TYPES(X) \
    X(float, float) X(double, double) X(char, char) X(signed char, schar) \
    X(short, short) X(int, int) X(long, long) X(long long, longlong) \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)

#define SYMMEM_NV_RMA(TYPE, NAME) \
    static inline void nvshmem_##NAME##_put(TYPE *d, const TYPE *s, size_t n, int pe) { \
        shmem_##NAME##_put(d, s, n, pe); } \
    static inline void nvshmem_##NAME##_get(TYPE *d, const TYPE *s, size_t n, int pe) { \
        shmem_##NAME##_get(d, s, n, pe); } \
    static inline void nvshmem_##NAME##_put_nbi(TYPE *d, const TYPE *s, size_t n, int pe) { \
        shmem_##NAME##_put_nbi(d, s, n, pe); } \
    static inline void nvshmem_##NAME##_get_nbi(TYPE *d, const TYPE *s, size_t n, int pe) { \
        shmem_##NAME##_get_nbi(d, s, n, pe); } \
    static inline void nvshmem_##NAME##_p(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_p(d, v, pe); } \
    static inline TYPE nvshmem_##NAME##_g(const TYPE *s, int pe) { \
        return shmem_##NAME##_g(s, pe); } \
    static inline void nvshmem_##NAME##_iput(TYPE *d, const TYPE *s, ptrdiff_t dst, \
                                             ptrdiff_t sst, size_t n, int pe) { \
        shmem_##NAME##_iput(d, s, dst, sst, n, pe); } \
    static inline void nvshmem_##NAME##_iget(TYPE *d, const TYPE *s, ptrdiff_t dst, \
                                             ptrdiff_t sst, size_t n, int pe) { \
        shmem_##NAME##_iget(d, s, dst, sst, n, pe); } \
    static inline void nvshmem_##NAME##_put_signal(TYPE *d, const TYPE *s, size_t n, \
                                                   uint64_t *sig, uint64_t v, int op, \
                                                   int pe) { \
        shmem_##NAME##_put_signal(d, s, n, sig, v, op, pe); } \
    static inline void nvshmem_##NAME##_put_signal_nbi(TYPE *d, const TYPE *s, size_t n, \
                                                       uint64_t *sig, uint64_t v, int op, \
                                                       int pe) { \
        shmem_##NAME##_put_signal_nbi(d, s, n, sig, v, op, pe); } \
    static inline int nvshmem_##NAME##_broadcast(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                 size_t n, int root) { \
        return shmem_##NAME##_broadcast(t, d, s, n, root); } \
    static inline int nvshmem_##NAME##_fcollect(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                size_t n) { \
        return shmem_##NAME##_fcollect(t, d, s, n); } \
    static inline int nvshmem_##NAME##_alltoall(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                size_t n) { \
        return shmem_##NAME##_alltoall(t, d, s, n); }
SYMMEM_NV_RMA_TYPES(SYMMEM_NV_RMA)
#undef SYMMEM_NV_RMA

#define SYMMEM_NV_SIZED(BITS) \
    static inline void nvshmem_put##BITS(void *d, const void *s, size_t n, int pe) { \
        shmem_put##BITS(d, s, n, pe); } \
    static inline void nvshmem_get##BITS(void *d, const void *s, size_t n, int pe) { \
        shmem_get##BITS(d, s, n, pe); } \
    static inline void nvshmem_put##BITS##_nbi(void *d, const void *s, size_t n, int pe) { \
        shmem_put##BITS##_nbi(d, s, n, pe); } \
    static inline void nvshmem_get##BITS##_nbi(void *d, const void *s, size_t n, int pe) { \
        shmem_get##BITS##_nbi(d, s, n, pe); }
SYMMEM_NV_SIZED(8)
SYMMEM_NV_SIZED(16)
SYMMEM_NV_SIZED(32)
SYMMEM_NV_SIZED(64)
SYMMEM_NV_SIZED(128)
#undef SYMMEM_NV_SIZED

#define SYMMEM_NV_AMO(TYPE, NAME) \
    static inline TYPE nvshmem_##NAME##_atomic_fetch(const TYPE *s, int pe) { \
        return shmem_##NAME##_atomic_fetch(s, pe); } \
    static inline void nvshmem_##NAME##_atomic_set(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_set(d, v, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_swap(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_swap(d, v, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_compare_swap(TYPE *d, TYPE c, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_compare_swap(d, c, v, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_fetch_inc(TYPE *d, int pe) { \
        return shmem_##NAME##_atomic_fetch_inc(d, pe); } \
    static inline void nvshmem_##NAME##_atomic_inc(TYPE *d, int pe) { \
        shmem_##NAME##_atomic_inc(d, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_fetch_add(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_fetch_add(d, v, pe); } \
    static inline void nvshmem_##NAME##_atomic_add(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_add(d, v, pe); } \
    static inline void nvshmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE v) { \
        shmem_##NAME##_wait_until(ivar, cmp, v); } \
    static inline int nvshmem_##NAME##_test(TYPE *ivar, int cmp, TYPE v) { \
        return shmem_##NAME##_test(ivar, cmp, v); } \
    static inline int nvshmem_##NAME##_sum_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                  size_t n) { \
        return shmem_##NAME##_sum_reduce(t, d, s, n); } \
    static inline int nvshmem_##NAME##_max_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                  size_t n) { \
        return shmem_##NAME##_max_reduce(t, d, s, n); } \
    static inline int nvshmem_##NAME##_min_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                  size_t n) { \
        return shmem_##NAME##_min_reduce(t, d, s, n); } \
    static inline int nvshmem_##NAME##_prod_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                   size_t n) { \
        return shmem_##NAME##_prod_reduce(t, d, s, n); }
SYMMEM_AMO_STANDARD_TYPES(SYMMEM_NV_AMO)
#undef SYMMEM_NV_AMO

#define SYMMEM_NV_BITWISE(TYPE, NAME) \
    static inline TYPE nvshmem_##NAME##_atomic_fetch_and(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_fetch_and(d, v, pe); } \
    static inline void nvshmem_##NAME##_atomic_and(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_and(d, v, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_fetch_or(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_fetch_or(d, v, pe); } \
    static inline void nvshmem_##NAME##_atomic_or(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_or(d, v, pe); } \
    static inline TYPE nvshmem_##NAME##_atomic_fetch_xor(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_fetch_xor(d, v, pe); } \
    static inline void nvshmem_##NAME##_atomic_xor(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_xor(d, v, pe); } \
    static inline int nvshmem_##NAME##_and_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                  size_t n) { \
        return shmem_##NAME##_and_reduce(t, d, s, n); } \
    static inline int nvshmem_##NAME##_or_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                 size_t n) { \
        return shmem_##NAME##_or_reduce(t, d, s, n); } \
    static inline int nvshmem_##NAME##_xor_reduce(nvshmem_team_t t, TYPE *d, const TYPE *s, \
                                                  size_t n) { \
        return shmem_##NAME##_xor_reduce(t, d, s, n); }
SYMMEM_AMO_BITWISE_TYPES(SYMMEM_NV_BITWISE)
#undef SYMMEM_NV_BITWISE

static inline int nvshmem_float_sum_reduce(nvshmem_team_t t, float *d, const float *s, size_t n) {
    return shmem_float_sum_reduce(t, d, s, n);
}
static inline int nvshmem_double_sum_reduce(nvshmem_team_t t, double *d, const double *s,
                                            size_t n) {
    return shmem_double_sum_reduce(t, d, s, n);
}
static inline int nvshmem_float_max_reduce(nvshmem_team_t t, float *d, const float *s, size_t n) {
    return shmem_float_max_reduce(t, d, s, n);
}
static inline int nvshmem_double_max_reduce(nvshmem_team_t t, double *d, const double *s,
                                            size_t n) {
    return shmem_double_max_reduce(t, d, s, n);
}

#ifdef __cplusplus
}
#endif

#endif /* SYMMEM_NVSHMEM_H */
