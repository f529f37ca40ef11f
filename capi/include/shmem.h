/*
 * shmem.h: symmem's OpenSHMEM 1.5 host API (libsymmem.so / libsymmem.a).
 *
 * Build:  symcc prog.c -o prog          (symcc sits next to libsymmem.so: target/<profile>/)
 * Run:    symrun -np 4 ./prog           (or mpirun -np 4 ./prog, srun, ...)
 *
 * What this implementation chooses where the specification leaves it open:
 *
 *  - Errors. Routines with a return code return 0 on success and nonzero on error;
 *    shmem_malloc/calloc/align/realloc return NULL. Either way the reason is logged to
 *    stderr (set SYMMEM_DEBUG=info or debug for more). A void routine given bad input (an
 *    address outside the symmetric heap, a PE out of range, an unknown cmp or sig_op) or
 *    whose operation fails (a peer died) logs an error naming the routine, the PE and the
 *    address, then ends the job as shmem_global_exit(1) would.
 *  - Symmetric data objects are the symmetric heap (shmem_malloc and friends) and the
 *    main program's global and static variables: at shmem_init each PE copies its
 *    writable data segment (.data, .bss) into a symmetric heap block and maps that block
 *    over the segment (mremap), so statics live in symmetric memory at their usual
 *    addresses and keep their values, also after shmem_finalize. Not on GPU PEs, and not
 *    for shared libraries' statics (the specification asks only for the program's).
 *  - Threads: every thread level is provided as SHMEM_THREAD_MULTIPLE.
 *  - Contexts are teams: shmem_ctx_* operations take the context's team PE numbers,
 *    and shmem_ctx_fence/shmem_ctx_quiet order/complete all of this PE's operations.
 *  - The deprecated active-set collectives (shmem_barrier, shmem_broadcast64,
 *    shmem_int_sum_to_all, ...) run on one-sided operations and the caller's pSync;
 *    pWrk is not used. Their pSync sizes below are ample (they use 3 words).
 *  - long double and complex (complexf, complexd) reductions, team and _to_all forms, are
 *    inline below; complex in C, and in C++ with GCC or Clang (their _Complex extension).
 *  - Not provided: negative strides in shmem_team_split_strided.
 *  - Locks: the lock is PE 0's copy of the word; waiters retry a compare-and-swap with
 *    backoff (not FIFO); a dead peer or a wait past SYMMEM_TIMEOUT (when set) ends the
 *    job.
 *  - Nonblocking routines (_nbi) are complete when they return; shmem_quiet is still
 *    required by the specification before reusing buffers or reading results.
 */
#ifndef SYMMEM_SHMEM_H
#define SYMMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "symmem"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* Sizes of the deprecated pSync/pWrk arrays, for programs that declare them. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_BCAST_SYNC_SIZE 64
#define SHMEM_COLLECT_SYNC_SIZE 64
#define SHMEM_REDUCE_SYNC_SIZE 64
#define SHMEM_BARRIER_SYNC_SIZE 64
#define SHMEM_ALLTOALL_SYNC_SIZE 64
#define SHMEM_ALLTOALLS_SYNC_SIZE 64
#define SHMEM_SYNC_SIZE 64
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 64

/* The underscore-prefixed names of OpenSHMEM 1.0-1.2, still used by older programs. */
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_ALLTOALLS_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Teams (section 9.4). SHMEM_TEAM_SHARED: the PEs that share this PE's memory. */
typedef struct symmem_team *shmem_team_t;
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)2)
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS 1L

/* Contexts (9.5): a context is a team here; its operations take that team's PE numbers,
 * and shmem_ctx_fence/quiet order and complete all of this PE's operations. */
typedef struct symmem_ctx *shmem_ctx_t;
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)1)
#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L

/* Library setup, exit and query (9.2). */
void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
void shmem_global_exit(int status) __attribute__((noreturn));
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);

/* Profiling control (9.16): symmem has no profiling interface, so every level (0 off,
 * 1 on, 2 the default, others implementation-defined) is accepted and only logged. */
void shmem_pcontrol(const int level, ...);

/* Memory management (9.3). */
void *shmem_malloc(size_t size);
void *shmem_malloc_with_hints(size_t size, long hints);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);

/* Teams (9.4). */
int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);
int shmem_team_sync(shmem_team_t team);
void shmem_team_destroy(shmem_team_t team);

/* The standard RMA types (Table 5): X(TYPE, TYPENAME). */
#define SYMMEM_RMA_TYPES(X) \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) \
    X(long long, longlong) X(unsigned char, uchar) X(unsigned short, ushort) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) \
    X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
    X(size_t, size) X(ptrdiff_t, ptrdiff)

/* RMA (9.6) and put-with-signal (9.8.1). */
#define SYMMEM_DECLARE_RMA(TYPE, NAME) \
    void shmem_##NAME##_put(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_put_nbi(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_get(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_get_nbi(TYPE *dest, const TYPE *source, size_t nelems, int pe); \
    void shmem_##NAME##_iput(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int pe); \
    void shmem_##NAME##_iget(TYPE *dest, const TYPE *source, ptrdiff_t dst, ptrdiff_t sst, \
                             size_t nelems, int pe); \
    void shmem_##NAME##_put_signal(TYPE *dest, const TYPE *source, size_t nelems, \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_##NAME##_put_signal_nbi(TYPE *dest, const TYPE *source, size_t nelems, \
                                       uint64_t *sig_addr, uint64_t signal, int sig_op, \
                                       int pe);
SYMMEM_RMA_TYPES(SYMMEM_DECLARE_RMA)
#undef SYMMEM_DECLARE_RMA

#define SYMMEM_DECLARE_PG(TYPE, NAME) \
    void shmem_##NAME##_p(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_g(const TYPE *source, int pe);
#define SYMMEM_PG_TYPES(X) \
    X(float, float) X(double, double) X(char, char) X(signed char, schar) X(short, short) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned char, uchar) \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong) \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) \
    X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) \
    X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
SYMMEM_PG_TYPES(SYMMEM_DECLARE_PG)
#undef SYMMEM_DECLARE_PG

#define SYMMEM_DECLARE_SIZED(BITS) \
    void shmem_put##BITS(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_get##BITS(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe); \
    void shmem_iput##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                          size_t nelems, int pe); \
    void shmem_iget##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                          size_t nelems, int pe); \
    void shmem_put##BITS##_signal(void *dest, const void *source, size_t nelems, \
                                  uint64_t *sig_addr, uint64_t signal, int sig_op, int pe); \
    void shmem_put##BITS##_signal_nbi(void *dest, const void *source, size_t nelems, \
                                      uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
SYMMEM_DECLARE_SIZED(8)
SYMMEM_DECLARE_SIZED(16)
SYMMEM_DECLARE_SIZED(32)
SYMMEM_DECLARE_SIZED(64)
SYMMEM_DECLARE_SIZED(128)
#undef SYMMEM_DECLARE_SIZED

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);

/* long double travels by value, which the library's ABI cannot take: inline here. */
static inline void shmem_longdouble_p(long double *dest, long double value, int pe) {
    shmem_putmem(dest, &value, sizeof value, pe);
}
static inline long double shmem_longdouble_g(const long double *source, int pe) {
    long double value;
    shmem_getmem(&value, source, sizeof value, pe);
    return value;
}

/* Signals (9.8). */
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* AMOs (9.7): standard types (Table 10), extended (Table 11), bitwise (Table 12). */
#define SYMMEM_AMO_STANDARD_TYPES(X) \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)
#define SYMMEM_AMO_BITWISE_TYPES(X) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

#define SYMMEM_DECLARE_AMO_EXTENDED(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch(const TYPE *source, int pe); \
    void shmem_##NAME##_atomic_fetch_nbi(TYPE *fetch, const TYPE *source, int pe); \
    void shmem_##NAME##_atomic_set(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_swap(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_swap_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe);
#define SYMMEM_DECLARE_AMO_STANDARD(TYPE, NAME) \
    SYMMEM_DECLARE_AMO_EXTENDED(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_compare_swap(TYPE *dest, TYPE cond, TYPE value, int pe); \
    void shmem_##NAME##_atomic_compare_swap_nbi(TYPE *fetch, TYPE *dest, TYPE cond, \
                                                TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_inc(TYPE *dest, int pe); \
    void shmem_##NAME##_atomic_fetch_inc_nbi(TYPE *fetch, TYPE *dest, int pe); \
    void shmem_##NAME##_atomic_inc(TYPE *dest, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_add(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_add_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_add(TYPE *dest, TYPE value, int pe);
#define SYMMEM_DECLARE_AMO_BITWISE(TYPE, NAME) \
    TYPE shmem_##NAME##_atomic_fetch_and(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_and_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_and(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_or(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_or_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_or(TYPE *dest, TYPE value, int pe); \
    TYPE shmem_##NAME##_atomic_fetch_xor(TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_fetch_xor_nbi(TYPE *fetch, TYPE *dest, TYPE value, int pe); \
    void shmem_##NAME##_atomic_xor(TYPE *dest, TYPE value, int pe);
SYMMEM_AMO_STANDARD_TYPES(SYMMEM_DECLARE_AMO_STANDARD)
SYMMEM_DECLARE_AMO_EXTENDED(float, float)
SYMMEM_DECLARE_AMO_EXTENDED(double, double)
SYMMEM_AMO_BITWISE_TYPES(SYMMEM_DECLARE_AMO_BITWISE)
#undef SYMMEM_DECLARE_AMO_EXTENDED
#undef SYMMEM_DECLARE_AMO_STANDARD
#undef SYMMEM_DECLARE_AMO_BITWISE

/* Point-to-point synchronization (9.11): the types of Table 14. */
#define SYMMEM_SYNC_TYPES(X) \
    X(short, short) X(unsigned short, ushort) X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
    X(ptrdiff_t, ptrdiff)
#define SYMMEM_DECLARE_SYNC(TYPE, NAME) \
    void shmem_##NAME##_wait_until(TYPE *ivar, int cmp, TYPE cmp_value); \
    void shmem_##NAME##_wait_until_all(TYPE *ivars, size_t nelems, const int *status, \
                                       int cmp, TYPE cmp_value); \
    size_t shmem_##NAME##_wait_until_any(TYPE *ivars, size_t nelems, const int *status, \
                                         int cmp, TYPE cmp_value); \
    size_t shmem_##NAME##_wait_until_some(TYPE *ivars, size_t nelems, size_t *indices, \
                                          const int *status, int cmp, TYPE cmp_value); \
    void shmem_##NAME##_wait_until_all_vector(TYPE *ivars, size_t nelems, \
                                              const int *status, int cmp, \
                                              TYPE *cmp_values); \
    size_t shmem_##NAME##_wait_until_any_vector(TYPE *ivars, size_t nelems, \
                                                const int *status, int cmp, \
                                                TYPE *cmp_values); \
    size_t shmem_##NAME##_wait_until_some_vector(TYPE *ivars, size_t nelems, \
                                                 size_t *indices, const int *status, \
                                                 int cmp, TYPE *cmp_values); \
    int shmem_##NAME##_test(TYPE *ivar, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test_all(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                TYPE cmp_value); \
    size_t shmem_##NAME##_test_any(TYPE *ivars, size_t nelems, const int *status, int cmp, \
                                   TYPE cmp_value); \
    size_t shmem_##NAME##_test_some(TYPE *ivars, size_t nelems, size_t *indices, \
                                    const int *status, int cmp, TYPE cmp_value); \
    int shmem_##NAME##_test_all_vector(TYPE *ivars, size_t nelems, const int *status, \
                                       int cmp, TYPE *cmp_values); \
    size_t shmem_##NAME##_test_any_vector(TYPE *ivars, size_t nelems, const int *status, \
                                          int cmp, TYPE *cmp_values); \
    size_t shmem_##NAME##_test_some_vector(TYPE *ivars, size_t nelems, size_t *indices, \
                                           const int *status, int cmp, TYPE *cmp_values);
SYMMEM_SYNC_TYPES(SYMMEM_DECLARE_SYNC)
#undef SYMMEM_DECLARE_SYNC

/* Ordering and synchronization (9.9, 9.10). */
void shmem_fence(void);
void shmem_quiet(void);
void shmem_barrier_all(void);
void shmem_sync_all(void);

/* Team collectives (9.9): 0 on success, nonzero (logged) on error. */
#define SYMMEM_DECLARE_COLL(TYPE, NAME) \
    int shmem_##NAME##_broadcast(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                 size_t nelems, int PE_root); \
    int shmem_##NAME##_collect(shmem_team_t team, TYPE *dest, const TYPE *source, \
                               size_t nelems); \
    int shmem_##NAME##_fcollect(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                size_t nelems); \
    int shmem_##NAME##_alltoall(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                size_t nelems); \
    int shmem_##NAME##_alltoalls(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                 ptrdiff_t dst, ptrdiff_t sst, size_t nelems);
SYMMEM_RMA_TYPES(SYMMEM_DECLARE_COLL)
#undef SYMMEM_DECLARE_COLL
int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

/* Reductions (Table 13). */
#define SYMMEM_DECLARE_REDUCE(TYPE, NAME, OP) \
    int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE *dest, const TYPE *source, \
                                     size_t nreduce);
#define SYMMEM_BITWISE_REDUCE_TYPES(X, OP) \
    X(unsigned char, uchar, OP) X(unsigned short, ushort, OP) X(unsigned int, uint, OP) \
    X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP) X(long long, longlong, OP) \
    X(int8_t, int8, OP) \
    X(int16_t, int16, OP) X(int32_t, int32, OP) X(int64_t, int64, OP) \
    X(uint8_t, uint8, OP) X(uint16_t, uint16, OP) X(uint32_t, uint32, OP) \
    X(uint64_t, uint64, OP) X(size_t, size, OP)
#define SYMMEM_ARITH_REDUCE_TYPES(X, OP) \
    X(char, char, OP) X(signed char, schar, OP) X(short, short, OP) X(int, int, OP) \
    X(long, long, OP) X(long long, longlong, OP) X(ptrdiff_t, ptrdiff, OP) \
    X(unsigned char, uchar, OP) X(unsigned short, ushort, OP) X(unsigned int, uint, OP) \
    X(unsigned long, ulong, OP) X(unsigned long long, ulonglong, OP) X(int8_t, int8, OP) \
    X(int16_t, int16, OP) X(int32_t, int32, OP) X(int64_t, int64, OP) \
    X(uint8_t, uint8, OP) X(uint16_t, uint16, OP) X(uint32_t, uint32, OP) \
    X(uint64_t, uint64, OP) X(size_t, size, OP) X(float, float, OP) X(double, double, OP)
SYMMEM_BITWISE_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, and)
SYMMEM_BITWISE_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, or)
SYMMEM_BITWISE_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, xor)
SYMMEM_ARITH_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, max)
SYMMEM_ARITH_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, min)
SYMMEM_ARITH_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, sum)
SYMMEM_ARITH_REDUCE_TYPES(SYMMEM_DECLARE_REDUCE, prod)
#undef SYMMEM_DECLARE_REDUCE

/* long double and complex reductions, in C (the library's ABI has no such types): every
 * member's source is read between two team barriers and combined in team order. */
/* Reads `source` (n elements) from each of `members` PEs, the j-th being PE_OF_J (an
 * expression in j), and combines them into acc[0..n) in member order, with blk as the
 * staging block: `acc[i] = EXPR` with a the value so far and b the next member's. */
#define SYMMEM_GATHER_COMBINE(TYPE, EXPR, acc, blk, source, n, members, PE_OF_J) \
    for (int j = 0; j < (members); j++) { \
        shmem_getmem(j ? (blk) : (acc), source, (n) * sizeof(TYPE), PE_OF_J); \
        for (size_t i = 0; j > 0 && i < (n); i++) { \
            TYPE a = (acc)[i], b = (blk)[i]; \
            (acc)[i] = (EXPR); \
        } \
    }
#define SYMMEM_INLINE_REDUCE(TYPE, NAME, OP, EXPR) \
    static inline int shmem_##NAME##_##OP##_reduce(shmem_team_t team, TYPE *dest, \
                                                   const TYPE *source, size_t nreduce) { \
        int n = shmem_team_n_pes(team); \
        if (n < 0) return -1; \
        if (nreduce == 0) return shmem_team_sync(team); \
        TYPE *acc = (TYPE *)malloc(2 * nreduce * sizeof(TYPE)); \
        if (acc == NULL) return -1; \
        TYPE *blk = acc + nreduce; \
        shmem_quiet(); \
        int rc = shmem_team_sync(team); \
        if (rc == 0) \
            SYMMEM_GATHER_COMBINE(TYPE, EXPR, acc, blk, source, nreduce, n, \
                                  shmem_team_translate_pe(team, j, SHMEM_TEAM_WORLD)) \
        if (rc == 0) rc = shmem_team_sync(team); \
        for (size_t i = 0; rc == 0 && i < nreduce; i++) dest[i] = acc[i]; \
        free(acc); \
        return rc; \
    }
SYMMEM_INLINE_REDUCE(long double, longdouble, max, a > b ? a : b)
SYMMEM_INLINE_REDUCE(long double, longdouble, min, a < b ? a : b)
SYMMEM_INLINE_REDUCE(long double, longdouble, sum, a + b)
SYMMEM_INLINE_REDUCE(long double, longdouble, prod, a * b)
#if !defined(__cplusplus) || defined(__GNUC__)
SYMMEM_INLINE_REDUCE(float _Complex, complexf, sum, a + b)
SYMMEM_INLINE_REDUCE(float _Complex, complexf, prod, a * b)
SYMMEM_INLINE_REDUCE(double _Complex, complexd, sum, a + b)
SYMMEM_INLINE_REDUCE(double _Complex, complexd, prod, a * b)
#endif
#undef SYMMEM_INLINE_REDUCE


/* Context routines (9.5) and the shmem_ctx_* forms of RMA, signals and AMOs. */
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);
/* The world PE of a context's team PE (used by the wrappers below). */
int symmem_ctx_pe(shmem_ctx_t ctx, int pe);
#define SYMMEM_CTX_PE(ctx, pe) ((ctx) == SHMEM_CTX_DEFAULT ? (pe) : symmem_ctx_pe((ctx), (pe)))

#define SYMMEM_CTX_RMA(TYPE, NAME) \
    static inline void shmem_ctx_##NAME##_put(shmem_ctx_t c, TYPE *d, const TYPE *s, size_t n, \
                                              int pe) { \
        shmem_##NAME##_put(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_get(shmem_ctx_t c, TYPE *d, const TYPE *s, size_t n, \
                                              int pe) { \
        shmem_##NAME##_get(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_put_nbi(shmem_ctx_t c, TYPE *d, const TYPE *s, \
                                                  size_t n, int pe) { \
        shmem_##NAME##_put_nbi(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_get_nbi(shmem_ctx_t c, TYPE *d, const TYPE *s, \
                                                  size_t n, int pe) { \
        shmem_##NAME##_get_nbi(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_iput(shmem_ctx_t c, TYPE *d, const TYPE *s, \
                                               ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                                               int pe) { \
        shmem_##NAME##_iput(d, s, dst, sst, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_iget(shmem_ctx_t c, TYPE *d, const TYPE *s, \
                                               ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                                               int pe) { \
        shmem_##NAME##_iget(d, s, dst, sst, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_p(shmem_ctx_t c, TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_p(d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline TYPE shmem_ctx_##NAME##_g(shmem_ctx_t c, const TYPE *s, int pe) { \
        return shmem_##NAME##_g(s, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_put_signal(shmem_ctx_t c, TYPE *d, const TYPE *s, \
                                                     size_t n, uint64_t *sig, uint64_t v, \
                                                     int op, int pe) { \
        shmem_##NAME##_put_signal(d, s, n, sig, v, op, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_put_signal_nbi(shmem_ctx_t c, TYPE *d, \
                                                         const TYPE *s, size_t n, \
                                                         uint64_t *sig, uint64_t v, int op, \
                                                         int pe) { \
        shmem_##NAME##_put_signal_nbi(d, s, n, sig, v, op, SYMMEM_CTX_PE(c, pe)); }
SYMMEM_RMA_TYPES(SYMMEM_CTX_RMA)
#undef SYMMEM_CTX_RMA

#define SYMMEM_CTX_SIZED(SUFFIX) \
    static inline void shmem_ctx_put##SUFFIX(shmem_ctx_t c, void *d, const void *s, size_t n, \
                                             int pe) { \
        shmem_put##SUFFIX(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_get##SUFFIX(shmem_ctx_t c, void *d, const void *s, size_t n, \
                                             int pe) { \
        shmem_get##SUFFIX(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_put##SUFFIX##_nbi(shmem_ctx_t c, void *d, const void *s, \
                                                   size_t n, int pe) { \
        shmem_put##SUFFIX##_nbi(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_get##SUFFIX##_nbi(shmem_ctx_t c, void *d, const void *s, \
                                                   size_t n, int pe) { \
        shmem_get##SUFFIX##_nbi(d, s, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_put##SUFFIX##_signal(shmem_ctx_t c, void *d, const void *s, \
                                                      size_t n, uint64_t *sig, uint64_t v, \
                                                      int op, int pe) { \
        shmem_put##SUFFIX##_signal(d, s, n, sig, v, op, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_put##SUFFIX##_signal_nbi(shmem_ctx_t c, void *d, \
                                                          const void *s, size_t n, \
                                                          uint64_t *sig, uint64_t v, int op, \
                                                          int pe) { \
        shmem_put##SUFFIX##_signal_nbi(d, s, n, sig, v, op, SYMMEM_CTX_PE(c, pe)); }
#define SYMMEM_CTX_STRIDED(BITS) \
    static inline void shmem_ctx_iput##BITS(shmem_ctx_t c, void *d, const void *s, \
                                            ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) { \
        shmem_iput##BITS(d, s, dst, sst, n, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_iget##BITS(shmem_ctx_t c, void *d, const void *s, \
                                            ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) { \
        shmem_iget##BITS(d, s, dst, sst, n, SYMMEM_CTX_PE(c, pe)); }
SYMMEM_CTX_SIZED(8) SYMMEM_CTX_SIZED(16) SYMMEM_CTX_SIZED(32) SYMMEM_CTX_SIZED(64)
SYMMEM_CTX_SIZED(128) SYMMEM_CTX_SIZED(mem)
SYMMEM_CTX_STRIDED(8) SYMMEM_CTX_STRIDED(16) SYMMEM_CTX_STRIDED(32) SYMMEM_CTX_STRIDED(64)
SYMMEM_CTX_STRIDED(128)
#undef SYMMEM_CTX_SIZED
#undef SYMMEM_CTX_STRIDED

#define SYMMEM_CTX_AMO_EXTENDED(TYPE, NAME) \
    static inline TYPE shmem_ctx_##NAME##_atomic_fetch(shmem_ctx_t c, const TYPE *s, int pe) { \
        return shmem_##NAME##_atomic_fetch(s, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_fetch_nbi(shmem_ctx_t c, TYPE *f, \
                                                           const TYPE *s, int pe) { \
        shmem_##NAME##_atomic_fetch_nbi(f, s, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_set(shmem_ctx_t c, TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_set(d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline TYPE shmem_ctx_##NAME##_atomic_swap(shmem_ctx_t c, TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_swap(d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_swap_nbi(shmem_ctx_t c, TYPE *f, TYPE *d, \
                                                          TYPE v, int pe) { \
        shmem_##NAME##_atomic_swap_nbi(f, d, v, SYMMEM_CTX_PE(c, pe)); }
#define SYMMEM_CTX_AMO_STANDARD(TYPE, NAME) \
    SYMMEM_CTX_AMO_EXTENDED(TYPE, NAME) \
    static inline TYPE shmem_ctx_##NAME##_atomic_compare_swap(shmem_ctx_t c, TYPE *d, \
                                                              TYPE cond, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_compare_swap(d, cond, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_compare_swap_nbi(shmem_ctx_t c, TYPE *f, \
                                                                  TYPE *d, TYPE cond, TYPE v, \
                                                                  int pe) { \
        shmem_##NAME##_atomic_compare_swap_nbi(f, d, cond, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline TYPE shmem_ctx_##NAME##_atomic_fetch_inc(shmem_ctx_t c, TYPE *d, int pe) { \
        return shmem_##NAME##_atomic_fetch_inc(d, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_fetch_inc_nbi(shmem_ctx_t c, TYPE *f, \
                                                               TYPE *d, int pe) { \
        shmem_##NAME##_atomic_fetch_inc_nbi(f, d, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_inc(shmem_ctx_t c, TYPE *d, int pe) { \
        shmem_##NAME##_atomic_inc(d, SYMMEM_CTX_PE(c, pe)); } \
    static inline TYPE shmem_ctx_##NAME##_atomic_fetch_add(shmem_ctx_t c, TYPE *d, TYPE v, \
                                                           int pe) { \
        return shmem_##NAME##_atomic_fetch_add(d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_fetch_add_nbi(shmem_ctx_t c, TYPE *f, \
                                                               TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_fetch_add_nbi(f, d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_add(shmem_ctx_t c, TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_add(d, v, SYMMEM_CTX_PE(c, pe)); }
#define SYMMEM_CTX_AMO_BITWISE_OP(TYPE, NAME, OP) \
    static inline TYPE shmem_ctx_##NAME##_atomic_fetch_##OP(shmem_ctx_t c, TYPE *d, TYPE v, \
                                                            int pe) { \
        return shmem_##NAME##_atomic_fetch_##OP(d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_fetch_##OP##_nbi(shmem_ctx_t c, TYPE *f, \
                                                                  TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_fetch_##OP##_nbi(f, d, v, SYMMEM_CTX_PE(c, pe)); } \
    static inline void shmem_ctx_##NAME##_atomic_##OP(shmem_ctx_t c, TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_##OP(d, v, SYMMEM_CTX_PE(c, pe)); }
#define SYMMEM_CTX_AMO_BITWISE(TYPE, NAME) \
    SYMMEM_CTX_AMO_BITWISE_OP(TYPE, NAME, and) SYMMEM_CTX_AMO_BITWISE_OP(TYPE, NAME, or) \
    SYMMEM_CTX_AMO_BITWISE_OP(TYPE, NAME, xor)
SYMMEM_AMO_STANDARD_TYPES(SYMMEM_CTX_AMO_STANDARD)
SYMMEM_CTX_AMO_EXTENDED(float, float)
SYMMEM_CTX_AMO_EXTENDED(double, double)
SYMMEM_AMO_BITWISE_TYPES(SYMMEM_CTX_AMO_BITWISE)
#undef SYMMEM_CTX_AMO_EXTENDED
#undef SYMMEM_CTX_AMO_STANDARD
#undef SYMMEM_CTX_AMO_BITWISE_OP
#undef SYMMEM_CTX_AMO_BITWISE

/* Deprecated active-set collectives (9.9): the PEs PE_start + i * 2^logPE_stride,
 * i < PE_size, call; pSync is a symmetric long array of SHMEM_*_SYNC_SIZE elements, all
 * SHMEM_SYNC_VALUE before the first call (and left so). */
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);
#define SYMMEM_DECLARE_ACTIVE(BITS) \
    void shmem_broadcast##BITS(void *dest, const void *source, size_t nelems, int PE_root, \
                               int PE_start, int logPE_stride, int PE_size, long *pSync); \
    void shmem_collect##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                             int logPE_stride, int PE_size, long *pSync); \
    void shmem_fcollect##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                              int logPE_stride, int PE_size, long *pSync); \
    void shmem_alltoall##BITS(void *dest, const void *source, size_t nelems, int PE_start, \
                              int logPE_stride, int PE_size, long *pSync); \
    void shmem_alltoalls##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst, \
                               size_t nelems, int PE_start, int logPE_stride, int PE_size, \
                               long *pSync);
SYMMEM_DECLARE_ACTIVE(32)
SYMMEM_DECLARE_ACTIVE(64)
#undef SYMMEM_DECLARE_ACTIVE
#define SYMMEM_DECLARE_TO_ALL(TYPE, NAME, OP) \
    void shmem_##NAME##_##OP##_to_all(TYPE *dest, const TYPE *source, int nreduce, \
                                      int PE_start, int logPE_stride, int PE_size, \
                                      TYPE *pWrk, long *pSync);
#define SYMMEM_TO_ALL_INT(OP) \
    SYMMEM_DECLARE_TO_ALL(short, short, OP) SYMMEM_DECLARE_TO_ALL(int, int, OP) \
    SYMMEM_DECLARE_TO_ALL(long, long, OP) SYMMEM_DECLARE_TO_ALL(long long, longlong, OP)
#define SYMMEM_TO_ALL_ARITH(OP) \
    SYMMEM_TO_ALL_INT(OP) SYMMEM_DECLARE_TO_ALL(float, float, OP) \
    SYMMEM_DECLARE_TO_ALL(double, double, OP)
SYMMEM_TO_ALL_INT(and)
SYMMEM_TO_ALL_INT(or)
SYMMEM_TO_ALL_INT(xor)
SYMMEM_TO_ALL_ARITH(max)
SYMMEM_TO_ALL_ARITH(min)
SYMMEM_TO_ALL_ARITH(sum)
SYMMEM_TO_ALL_ARITH(prod)
#undef SYMMEM_DECLARE_TO_ALL
#undef SYMMEM_TO_ALL_INT
#undef SYMMEM_TO_ALL_ARITH

/* long double and complex _to_all reductions, in C like the team reductions above: every
 * member's source is read between two active-set syncs (on the caller's pSync) and combined
 * in member order; pWrk is not used. */
#define SYMMEM_INLINE_TO_ALL(TYPE, NAME, OP, EXPR) \
    static inline void shmem_##NAME##_##OP##_to_all(TYPE *dest, const TYPE *source, \
                                                    int nreduce, int PE_start, \
                                                    int logPE_stride, int PE_size, \
                                                    TYPE *pWrk, long *pSync) { \
        (void)pWrk; \
        size_t n = nreduce > 0 ? (size_t)nreduce : 0; \
        TYPE *acc = (TYPE *)malloc((2 * n + 1) * sizeof(TYPE)); \
        if (acc == NULL) { \
            fprintf(stderr, "shmem_" #NAME "_" #OP "_to_all on PE %d: cannot allocate " \
                    "%zu bytes for nreduce %d; ending the job\n", shmem_my_pe(), \
                    (2 * n + 1) * sizeof(TYPE), nreduce); \
            shmem_global_exit(1); \
        } \
        TYPE *blk = acc + n; \
        shmem_quiet(); \
        shmem_sync(PE_start, logPE_stride, PE_size, pSync); \
        if (n > 0) \
            SYMMEM_GATHER_COMBINE(TYPE, EXPR, acc, blk, source, n, PE_size, \
                                  PE_start + (j << logPE_stride)) \
        shmem_sync(PE_start, logPE_stride, PE_size, pSync); \
        for (size_t i = 0; i < n; i++) dest[i] = acc[i]; \
        free(acc); \
    }
SYMMEM_INLINE_TO_ALL(long double, longdouble, max, a > b ? a : b)
SYMMEM_INLINE_TO_ALL(long double, longdouble, min, a < b ? a : b)
SYMMEM_INLINE_TO_ALL(long double, longdouble, sum, a + b)
SYMMEM_INLINE_TO_ALL(long double, longdouble, prod, a * b)
#if !defined(__cplusplus) || defined(__GNUC__)
SYMMEM_INLINE_TO_ALL(float _Complex, complexf, sum, a + b)
SYMMEM_INLINE_TO_ALL(float _Complex, complexf, prod, a * b)
SYMMEM_INLINE_TO_ALL(double _Complex, complexd, sum, a + b)
SYMMEM_INLINE_TO_ALL(double _Complex, complexd, prod, a * b)
#endif
#undef SYMMEM_INLINE_TO_ALL
#undef SYMMEM_GATHER_COMBINE

/* Distributed locking (9.12): lock is a symmetric long, 0 before first use. */
void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* Deprecated names still found in programs and test suites (OpenSHMEM 1.0-1.4). */
static inline void start_pes(int npes) {
    (void)npes;
    shmem_init();
}
static inline int _my_pe(void) { return shmem_my_pe(); }
static inline int _num_pes(void) { return shmem_n_pes(); }
static inline void *shmalloc(size_t size) { return shmem_malloc(size); }
static inline void shfree(void *ptr) { shmem_free(ptr); }
static inline void *shrealloc(void *ptr, size_t size) { return shmem_realloc(ptr, size); }
static inline void *shmemalign(size_t alignment, size_t size) {
    return shmem_align(alignment, size);
}
#define SYMMEM_DEPRECATED_AMO(TYPE, NAME) \
    static inline TYPE shmem_##NAME##_cswap(TYPE *d, TYPE c, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_compare_swap(d, c, v, pe); } \
    static inline TYPE shmem_##NAME##_swap(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_swap(d, v, pe); } \
    static inline TYPE shmem_##NAME##_finc(TYPE *d, int pe) { \
        return shmem_##NAME##_atomic_fetch_inc(d, pe); } \
    static inline void shmem_##NAME##_inc(TYPE *d, int pe) { shmem_##NAME##_atomic_inc(d, pe); } \
    static inline TYPE shmem_##NAME##_fadd(TYPE *d, TYPE v, int pe) { \
        return shmem_##NAME##_atomic_fetch_add(d, v, pe); } \
    static inline void shmem_##NAME##_add(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_add(d, v, pe); } \
    static inline TYPE shmem_##NAME##_fetch(const TYPE *s, int pe) { \
        return shmem_##NAME##_atomic_fetch(s, pe); } \
    static inline void shmem_##NAME##_set(TYPE *d, TYPE v, int pe) { \
        shmem_##NAME##_atomic_set(d, v, pe); } \
    static inline void shmem_##NAME##_wait(TYPE *ivar, TYPE v) { \
        shmem_##NAME##_wait_until(ivar, SHMEM_CMP_NE, v); }
static inline void shmem_short_wait(short *ivar, short v) {
    shmem_short_wait_until(ivar, SHMEM_CMP_NE, v);
}
/* The cache-management routines (deprecated since 1.3): nothing to do on coherent memory. */
static inline void shmem_clear_cache_inv(void) {}
static inline void shmem_set_cache_inv(void) {}
static inline void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
static inline void shmem_set_cache_line_inv(void *dest) { (void)dest; }
static inline void shmem_udcflush(void) {}
static inline void shmem_udcflush_line(void *dest) { (void)dest; }
/* The specification deprecated these for int, long and long long; programs (and SOS's
 * tests) also use them for the other standard AMO types, so they exist for all of them. */
SYMMEM_AMO_STANDARD_TYPES(SYMMEM_DEPRECATED_AMO)
#undef SYMMEM_DEPRECATED_AMO
static inline float shmem_float_swap(float *d, float v, int pe) {
    return shmem_float_atomic_swap(d, v, pe);
}
static inline double shmem_double_swap(double *d, double v, int pe) {
    return shmem_double_atomic_swap(d, v, pe);
}
static inline float shmem_float_fetch(const float *s, int pe) {
    return shmem_float_atomic_fetch(s, pe);
}
static inline double shmem_double_fetch(const double *s, int pe) {
    return shmem_double_atomic_fetch(s, pe);
}
static inline void shmem_float_set(float *d, float v, int pe) { shmem_float_atomic_set(d, v, pe); }
static inline void shmem_double_set(double *d, double v, int pe) {
    shmem_double_atomic_set(d, v, pe);
}

/* C11 type-generic interfaces. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
#define SYMMEM_G_RMA(OP) \
    float: shmem_float_##OP, double: shmem_double_##OP, long double: shmem_longdouble_##OP, \
    char: shmem_char_##OP, signed char: shmem_schar_##OP, short: shmem_short_##OP, \
    int: shmem_int_##OP, long: shmem_long_##OP, long long: shmem_longlong_##OP, \
    unsigned char: shmem_uchar_##OP, unsigned short: shmem_ushort_##OP, \
    unsigned int: shmem_uint_##OP, unsigned long: shmem_ulong_##OP, \
    unsigned long long: shmem_ulonglong_##OP
#define SYMMEM_G_AMO(OP) \
    int: shmem_int_##OP, long: shmem_long_##OP, long long: shmem_longlong_##OP, \
    unsigned int: shmem_uint_##OP, unsigned long: shmem_ulong_##OP, \
    unsigned long long: shmem_ulonglong_##OP
#define SYMMEM_G_EXT(OP) SYMMEM_G_AMO(OP), float: shmem_float_##OP, double: shmem_double_##OP
#define SYMMEM_G_BIT(OP) \
    int: shmem_int32_##OP, long: shmem_int64_##OP, unsigned int: shmem_uint_##OP, \
    unsigned long: shmem_ulong_##OP, unsigned long long: shmem_ulonglong_##OP
#define SYMMEM_G_ARITH_REDUCE(OP) \
    char: shmem_char_##OP, signed char: shmem_schar_##OP, short: shmem_short_##OP, \
    int: shmem_int_##OP, long: shmem_long_##OP, long long: shmem_longlong_##OP, \
    unsigned char: shmem_uchar_##OP, unsigned short: shmem_ushort_##OP, \
    unsigned int: shmem_uint_##OP, unsigned long: shmem_ulong_##OP, \
    unsigned long long: shmem_ulonglong_##OP, float: shmem_float_##OP, \
    double: shmem_double_##OP, long double: shmem_longdouble_##OP
#define SYMMEM_G_COMPLEX_REDUCE(OP) \
    SYMMEM_G_ARITH_REDUCE(OP), float _Complex: shmem_complexf_##OP, \
    double _Complex: shmem_complexd_##OP
#define SYMMEM_G_BIT_REDUCE(OP) \
    signed char: shmem_int8_##OP, short: shmem_int16_##OP, int: shmem_int32_##OP, \
    long: shmem_int64_##OP, long long: shmem_longlong_##OP, unsigned char: shmem_uchar_##OP, \
    unsigned short: shmem_ushort_##OP, unsigned int: shmem_uint_##OP, \
    unsigned long: shmem_ulong_##OP, unsigned long long: shmem_ulonglong_##OP

/* The RMA and AMO generics take an optional context first: shmem_put(dest, src, n, pe)
 * or shmem_put(ctx, dest, src, n, pe), told apart by the number of arguments. */
#define SYMMEM_SEL3(_1, _2, _3, N, ...) N
#define SYMMEM_SEL4(_1, _2, _3, _4, N, ...) N
#define SYMMEM_SEL5(_1, _2, _3, _4, _5, N, ...) N
#define SYMMEM_SEL7(_1, _2, _3, _4, _5, _6, _7, N, ...) N
#define SYMMEM_SEL8(_1, _2, _3, _4, _5, _6, _7, _8, N, ...) N
#define SYMMEM_G_CTX_RMA(OP) \
    float: shmem_ctx_float_##OP, double: shmem_ctx_double_##OP, \
    long double: shmem_ctx_longdouble_##OP, char: shmem_ctx_char_##OP, \
    signed char: shmem_ctx_schar_##OP, short: shmem_ctx_short_##OP, int: shmem_ctx_int_##OP, \
    long: shmem_ctx_long_##OP, long long: shmem_ctx_longlong_##OP, \
    unsigned char: shmem_ctx_uchar_##OP, unsigned short: shmem_ctx_ushort_##OP, \
    unsigned int: shmem_ctx_uint_##OP, unsigned long: shmem_ctx_ulong_##OP, \
    unsigned long long: shmem_ctx_ulonglong_##OP
#define SYMMEM_G_CTX_AMO(OP) \
    int: shmem_ctx_int_##OP, long: shmem_ctx_long_##OP, long long: shmem_ctx_longlong_##OP, \
    unsigned int: shmem_ctx_uint_##OP, unsigned long: shmem_ctx_ulong_##OP, \
    unsigned long long: shmem_ctx_ulonglong_##OP
#define SYMMEM_G_CTX_EXT(OP) \
    SYMMEM_G_CTX_AMO(OP), float: shmem_ctx_float_##OP, double: shmem_ctx_double_##OP
#define SYMMEM_G_CTX_BIT(OP) \
    int: shmem_ctx_int32_##OP, long: shmem_ctx_int64_##OP, unsigned int: shmem_ctx_uint_##OP, \
    unsigned long: shmem_ctx_ulong_##OP, unsigned long long: shmem_ctx_ulonglong_##OP

#define SYMMEM_G_put(dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(put))(dest, source, nelems, pe)
#define SYMMEM_G_CTX_put(ctx, dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(put))(ctx, dest, source, nelems, pe)
#define shmem_put(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_put, SYMMEM_G_put, ~)(__VA_ARGS__)

#define SYMMEM_G_get(dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(get))(dest, source, nelems, pe)
#define SYMMEM_G_CTX_get(ctx, dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(get))(ctx, dest, source, nelems, pe)
#define shmem_get(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_get, SYMMEM_G_get, ~)(__VA_ARGS__)

#define SYMMEM_G_put_nbi(dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(put_nbi))(dest, source, nelems, pe)
#define SYMMEM_G_CTX_put_nbi(ctx, dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(put_nbi))(ctx, dest, source, nelems, pe)
#define shmem_put_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_put_nbi, SYMMEM_G_put_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_get_nbi(dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(get_nbi))(dest, source, nelems, pe)
#define SYMMEM_G_CTX_get_nbi(ctx, dest, source, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(get_nbi))(ctx, dest, source, nelems, pe)
#define shmem_get_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_get_nbi, SYMMEM_G_get_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_p(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(p))(dest, value, pe)
#define SYMMEM_G_CTX_p(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(p))(ctx, dest, value, pe)
#define shmem_p(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_p, SYMMEM_G_p, ~)(__VA_ARGS__)

#define SYMMEM_G_g(source, pe) \
    _Generic(*(source), SYMMEM_G_RMA(g))(source, pe)
#define SYMMEM_G_CTX_g(ctx, source, pe) \
    _Generic(*(source), SYMMEM_G_CTX_RMA(g))(ctx, source, pe)
#define shmem_g(...) \
    SYMMEM_SEL3(__VA_ARGS__, SYMMEM_G_CTX_g, SYMMEM_G_g, ~)(__VA_ARGS__)

#define SYMMEM_G_iput(dest, source, dst, sst, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(iput))(dest, source, dst, sst, nelems, pe)
#define SYMMEM_G_CTX_iput(ctx, dest, source, dst, sst, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(iput))(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_iput(...) \
    SYMMEM_SEL7(__VA_ARGS__, SYMMEM_G_CTX_iput, SYMMEM_G_iput, ~)(__VA_ARGS__)

#define SYMMEM_G_iget(dest, source, dst, sst, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(iget))(dest, source, dst, sst, nelems, pe)
#define SYMMEM_G_CTX_iget(ctx, dest, source, dst, sst, nelems, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(iget))(ctx, dest, source, dst, sst, nelems, pe)
#define shmem_iget(...) \
    SYMMEM_SEL7(__VA_ARGS__, SYMMEM_G_CTX_iget, SYMMEM_G_iget, ~)(__VA_ARGS__)

#define SYMMEM_G_put_signal(dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(put_signal))(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define SYMMEM_G_CTX_put_signal(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(put_signal))(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)
#define shmem_put_signal(...) \
    SYMMEM_SEL8(__VA_ARGS__, SYMMEM_G_CTX_put_signal, SYMMEM_G_put_signal, ~)(__VA_ARGS__)

#define SYMMEM_G_put_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic(*(dest), SYMMEM_G_RMA(put_signal_nbi))(dest, source, nelems, sig_addr, signal, sig_op, pe)
#define SYMMEM_G_CTX_put_signal_nbi(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_RMA(put_signal_nbi))(ctx, dest, source, nelems, sig_addr, signal, sig_op, pe)
#define shmem_put_signal_nbi(...) \
    SYMMEM_SEL8(__VA_ARGS__, SYMMEM_G_CTX_put_signal_nbi, SYMMEM_G_put_signal_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch(source, pe) \
    _Generic(*(source), SYMMEM_G_EXT(atomic_fetch))(source, pe)
#define SYMMEM_G_CTX_atomic_fetch(ctx, source, pe) \
    _Generic(*(source), SYMMEM_G_CTX_EXT(atomic_fetch))(ctx, source, pe)
#define shmem_atomic_fetch(...) \
    SYMMEM_SEL3(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch, SYMMEM_G_atomic_fetch, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_set(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_EXT(atomic_set))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_set(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_EXT(atomic_set))(ctx, dest, value, pe)
#define shmem_atomic_set(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_set, SYMMEM_G_atomic_set, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_swap(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_EXT(atomic_swap))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_swap(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_EXT(atomic_swap))(ctx, dest, value, pe)
#define shmem_atomic_swap(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_swap, SYMMEM_G_atomic_swap, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_compare_swap(dest, cond, value, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_compare_swap))(dest, cond, value, pe)
#define SYMMEM_G_CTX_atomic_compare_swap(ctx, dest, cond, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_compare_swap))(ctx, dest, cond, value, pe)
#define shmem_atomic_compare_swap(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_compare_swap, SYMMEM_G_atomic_compare_swap, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_inc(dest, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_fetch_inc))(dest, pe)
#define SYMMEM_G_CTX_atomic_fetch_inc(ctx, dest, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_fetch_inc))(ctx, dest, pe)
#define shmem_atomic_fetch_inc(...) \
    SYMMEM_SEL3(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_inc, SYMMEM_G_atomic_fetch_inc, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_inc(dest, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_inc))(dest, pe)
#define SYMMEM_G_CTX_atomic_inc(ctx, dest, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_inc))(ctx, dest, pe)
#define shmem_atomic_inc(...) \
    SYMMEM_SEL3(__VA_ARGS__, SYMMEM_G_CTX_atomic_inc, SYMMEM_G_atomic_inc, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_add(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_fetch_add))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_fetch_add(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_fetch_add))(ctx, dest, value, pe)
#define shmem_atomic_fetch_add(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_add, SYMMEM_G_atomic_fetch_add, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_add(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_add))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_add(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_add))(ctx, dest, value, pe)
#define shmem_atomic_add(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_add, SYMMEM_G_atomic_add, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_and(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_fetch_and))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_fetch_and(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_fetch_and))(ctx, dest, value, pe)
#define shmem_atomic_fetch_and(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_and, SYMMEM_G_atomic_fetch_and, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_and(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_and))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_and(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_and))(ctx, dest, value, pe)
#define shmem_atomic_and(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_and, SYMMEM_G_atomic_and, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_or(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_fetch_or))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_fetch_or(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_fetch_or))(ctx, dest, value, pe)
#define shmem_atomic_fetch_or(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_or, SYMMEM_G_atomic_fetch_or, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_or(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_or))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_or(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_or))(ctx, dest, value, pe)
#define shmem_atomic_or(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_or, SYMMEM_G_atomic_or, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_xor(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_fetch_xor))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_fetch_xor(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_fetch_xor))(ctx, dest, value, pe)
#define shmem_atomic_fetch_xor(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_xor, SYMMEM_G_atomic_fetch_xor, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_xor(dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_BIT(atomic_xor))(dest, value, pe)
#define SYMMEM_G_CTX_atomic_xor(ctx, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_BIT(atomic_xor))(ctx, dest, value, pe)
#define shmem_atomic_xor(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_xor, SYMMEM_G_atomic_xor, ~)(__VA_ARGS__)

/* The fetching non-blocking AMOs (9.8): the fetched value lands in *fetch by the next
 * shmem_quiet. */
#define SYMMEM_SEL6(_1, _2, _3, _4, _5, _6, N, ...) N
#define SYMMEM_G_atomic_fetch_nbi(fetch, source, pe) \
    _Generic(*(source), SYMMEM_G_EXT(atomic_fetch_nbi))(fetch, source, pe)
#define SYMMEM_G_CTX_atomic_fetch_nbi(ctx, fetch, source, pe) \
    _Generic(*(source), SYMMEM_G_CTX_EXT(atomic_fetch_nbi))(ctx, fetch, source, pe)
#define shmem_atomic_fetch_nbi(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_nbi, SYMMEM_G_atomic_fetch_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_swap_nbi(fetch, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_EXT(atomic_swap_nbi))(fetch, dest, value, pe)
#define SYMMEM_G_CTX_atomic_swap_nbi(ctx, fetch, dest, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_EXT(atomic_swap_nbi))(ctx, fetch, dest, value, pe)
#define shmem_atomic_swap_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_swap_nbi, SYMMEM_G_atomic_swap_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_compare_swap_nbi(fetch, dest, cond, value, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_compare_swap_nbi))(fetch, dest, cond, value, pe)
#define SYMMEM_G_CTX_atomic_compare_swap_nbi(ctx, fetch, dest, cond, value, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_compare_swap_nbi))(ctx, fetch, dest, cond, \
                                                                 value, pe)
#define shmem_atomic_compare_swap_nbi(...) \
    SYMMEM_SEL6(__VA_ARGS__, SYMMEM_G_CTX_atomic_compare_swap_nbi, \
                SYMMEM_G_atomic_compare_swap_nbi, ~)(__VA_ARGS__)

#define SYMMEM_G_atomic_fetch_inc_nbi(fetch, dest, pe) \
    _Generic(*(dest), SYMMEM_G_AMO(atomic_fetch_inc_nbi))(fetch, dest, pe)
#define SYMMEM_G_CTX_atomic_fetch_inc_nbi(ctx, fetch, dest, pe) \
    _Generic(*(dest), SYMMEM_G_CTX_AMO(atomic_fetch_inc_nbi))(ctx, fetch, dest, pe)
#define shmem_atomic_fetch_inc_nbi(...) \
    SYMMEM_SEL4(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_inc_nbi, SYMMEM_G_atomic_fetch_inc_nbi, \
                ~)(__VA_ARGS__)

/* fetch_add (standard types) and fetch_and/or/xor (bitwise types): (fetch, dest, value, pe)
 * with an optional context first. */
#define SYMMEM_G_FETCH_OP_NBI(TYPES, OP, fetch, dest, value, pe) \
    _Generic(*(dest), TYPES(atomic_fetch_##OP##_nbi))(fetch, dest, value, pe)
#define SYMMEM_G_CTX_FETCH_OP_NBI(TYPES, OP, ctx, fetch, dest, value, pe) \
    _Generic(*(dest), TYPES(atomic_fetch_##OP##_nbi))(ctx, fetch, dest, value, pe)
#define SYMMEM_G_atomic_fetch_add_nbi(...) \
    SYMMEM_G_FETCH_OP_NBI(SYMMEM_G_AMO, add, __VA_ARGS__)
#define SYMMEM_G_CTX_atomic_fetch_add_nbi(...) \
    SYMMEM_G_CTX_FETCH_OP_NBI(SYMMEM_G_CTX_AMO, add, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_add_nbi, SYMMEM_G_atomic_fetch_add_nbi, \
                ~)(__VA_ARGS__)
#define SYMMEM_G_atomic_fetch_and_nbi(...) \
    SYMMEM_G_FETCH_OP_NBI(SYMMEM_G_BIT, and, __VA_ARGS__)
#define SYMMEM_G_CTX_atomic_fetch_and_nbi(...) \
    SYMMEM_G_CTX_FETCH_OP_NBI(SYMMEM_G_CTX_BIT, and, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_and_nbi, SYMMEM_G_atomic_fetch_and_nbi, \
                ~)(__VA_ARGS__)
#define SYMMEM_G_atomic_fetch_or_nbi(...) \
    SYMMEM_G_FETCH_OP_NBI(SYMMEM_G_BIT, or, __VA_ARGS__)
#define SYMMEM_G_CTX_atomic_fetch_or_nbi(...) \
    SYMMEM_G_CTX_FETCH_OP_NBI(SYMMEM_G_CTX_BIT, or, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_or_nbi, SYMMEM_G_atomic_fetch_or_nbi, \
                ~)(__VA_ARGS__)
#define SYMMEM_G_atomic_fetch_xor_nbi(...) \
    SYMMEM_G_FETCH_OP_NBI(SYMMEM_G_BIT, xor, __VA_ARGS__)
#define SYMMEM_G_CTX_atomic_fetch_xor_nbi(...) \
    SYMMEM_G_CTX_FETCH_OP_NBI(SYMMEM_G_CTX_BIT, xor, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) \
    SYMMEM_SEL5(__VA_ARGS__, SYMMEM_G_CTX_atomic_fetch_xor_nbi, SYMMEM_G_atomic_fetch_xor_nbi, \
                ~)(__VA_ARGS__)

/* The deprecated generic AMO names (OpenSHMEM 1.3, deprecated in 1.4), without contexts. */
#define shmem_cswap(dest, cond, value, pe) SYMMEM_G_atomic_compare_swap(dest, cond, value, pe)
#define shmem_swap(dest, value, pe) SYMMEM_G_atomic_swap(dest, value, pe)
#define shmem_finc(dest, pe) SYMMEM_G_atomic_fetch_inc(dest, pe)
#define shmem_inc(dest, pe) SYMMEM_G_atomic_inc(dest, pe)
#define shmem_fadd(dest, value, pe) SYMMEM_G_atomic_fetch_add(dest, value, pe)
#define shmem_add(dest, value, pe) SYMMEM_G_atomic_add(dest, value, pe)
#define shmem_fetch(source, pe) SYMMEM_G_atomic_fetch(source, pe)
#define shmem_set(dest, value, pe) SYMMEM_G_atomic_set(dest, value, pe)

#define SYMMEM_G_WAIT(OP) \
    short: shmem_short_##OP, unsigned short: shmem_ushort_##OP, SYMMEM_G_AMO(OP)
#define shmem_wait_until(ivar, cmp, cmp_value) \
    _Generic(*(ivar), SYMMEM_G_WAIT(wait_until))(ivar, cmp, cmp_value)
#define shmem_test(ivar, cmp, cmp_value) \
    _Generic(*(ivar), SYMMEM_G_WAIT(test))(ivar, cmp, cmp_value)
#define shmem_wait_until_all(ivars, nelems, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_all))(ivars, nelems, status, cmp, cmp_value)
#define shmem_wait_until_any(ivars, nelems, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_any))(ivars, nelems, status, cmp, cmp_value)
#define shmem_wait_until_some(ivars, nelems, indices, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_some))(ivars, nelems, indices, status, cmp, \
                                                      cmp_value)
#define shmem_test_all(ivars, nelems, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_all))(ivars, nelems, status, cmp, cmp_value)
#define shmem_test_any(ivars, nelems, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_any))(ivars, nelems, status, cmp, cmp_value)
#define shmem_test_some(ivars, nelems, indices, status, cmp, cmp_value) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_some))(ivars, nelems, indices, status, cmp, \
                                                cmp_value)

#define shmem_wait_until_all_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_all_vector))(ivars, nelems, status, cmp, \
                                                            cmp_values)
#define shmem_wait_until_any_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_any_vector))(ivars, nelems, status, cmp, \
                                                            cmp_values)
#define shmem_wait_until_some_vector(ivars, nelems, indices, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(wait_until_some_vector))(ivars, nelems, indices, \
                                                             status, cmp, cmp_values)
#define shmem_test_all_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_all_vector))(ivars, nelems, status, cmp, cmp_values)
#define shmem_test_any_vector(ivars, nelems, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_any_vector))(ivars, nelems, status, cmp, cmp_values)
#define shmem_test_some_vector(ivars, nelems, indices, status, cmp, cmp_values) \
    _Generic(*(ivars), SYMMEM_G_WAIT(test_some_vector))(ivars, nelems, indices, status, cmp, \
                                                       cmp_values)

/* shmem_sync(team) is shmem_team_sync; shmem_sync(PE_start, logPE_stride, PE_size, pSync)
 * the deprecated active-set form. */
#define SYMMEM_SEL_SYNC(_1, _2, _3, _4, N, ...) N
#define shmem_sync(...) \
    SYMMEM_SEL_SYNC(__VA_ARGS__, shmem_sync, ~, ~, shmem_team_sync, ~)(__VA_ARGS__)

#define shmem_broadcast(team, dest, source, nelems, root) \
    _Generic(*(dest), SYMMEM_G_RMA(broadcast))(team, dest, source, nelems, root)
#define shmem_collect(team, dest, source, nelems) \
    _Generic(*(dest), SYMMEM_G_RMA(collect))(team, dest, source, nelems)
#define shmem_fcollect(team, dest, source, nelems) \
    _Generic(*(dest), SYMMEM_G_RMA(fcollect))(team, dest, source, nelems)
#define shmem_alltoall(team, dest, source, nelems) \
    _Generic(*(dest), SYMMEM_G_RMA(alltoall))(team, dest, source, nelems)
#define shmem_alltoalls(team, dest, source, dst, sst, nelems) \
    _Generic(*(dest), SYMMEM_G_RMA(alltoalls))(team, dest, source, dst, sst, nelems)
#define shmem_sum_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_COMPLEX_REDUCE(sum_reduce))(team, dest, source, n)
#define shmem_prod_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_COMPLEX_REDUCE(prod_reduce))(team, dest, source, n)
#define shmem_max_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_ARITH_REDUCE(max_reduce))(team, dest, source, n)
#define shmem_min_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_ARITH_REDUCE(min_reduce))(team, dest, source, n)
#define shmem_and_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_BIT_REDUCE(and_reduce))(team, dest, source, n)
#define shmem_or_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_BIT_REDUCE(or_reduce))(team, dest, source, n)
#define shmem_xor_reduce(team, dest, source, n) \
    _Generic(*(dest), SYMMEM_G_BIT_REDUCE(xor_reduce))(team, dest, source, n)
#endif /* C11 */

#ifdef __cplusplus
}
#endif

#endif /* SYMMEM_SHMEM_H */
