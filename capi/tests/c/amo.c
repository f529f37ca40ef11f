/* OpenSHMEM 1.5 section 9.7: every AMO on every standard, extended and bitwise AMO type,
 * with all PEs hitting PE 0 concurrently where the result is order-independent. */
#include "check.h"

static int me, n;

#define STANDARD(X)                                                                     \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)              \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)          \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)           \
    X(ptrdiff_t, ptrdiff)
#define BITWISE(X)                                                                      \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)      \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)

#define TEST_STANDARD(TYPE, NAME)                                                       \
    static void standard_##NAME(void) {                                                 \
        TYPE *x = shmem_calloc(4, sizeof(TYPE));                                        \
        CHECK(x != NULL, #NAME ": calloc failed");                                      \
        shmem_barrier_all();                                                            \
        /* fetch_add / add / inc / fetch_inc, everyone on PE 0's x[0]. */               \
        TYPE old = shmem_##NAME##_atomic_fetch_add(&x[0], (TYPE)2, 0);                  \
        CHECK(old < (TYPE)(6 * n), #NAME "_fetch_add old %lld",         \
              (long long)old);                                                          \
        shmem_##NAME##_atomic_add(&x[0], (TYPE)3, 0);                                   \
        shmem_##NAME##_atomic_inc(&x[0], 0);                                            \
        old = shmem_##NAME##_atomic_fetch_inc(&x[1], 0);                                \
        CHECK(old < (TYPE)n, #NAME "_fetch_inc old %lld", (long long)old);              \
        TYPE f = 0;                                                                     \
        shmem_##NAME##_atomic_fetch_inc_nbi(&f, &x[2], 0);                              \
        shmem_##NAME##_atomic_fetch_add_nbi(&f, &x[2], (TYPE)4, 0);                     \
        shmem_quiet();                                                                  \
        shmem_barrier_all();                                                            \
        if (me == 0) {                                                                  \
            CHECK(x[0] == (TYPE)(6 * n), #NAME ": x[0] %lld", (long long)x[0]);         \
            CHECK(x[1] == (TYPE)n, #NAME ": x[1] %lld", (long long)x[1]);               \
            CHECK(x[2] == (TYPE)(5 * n), #NAME ": x[2] %lld", (long long)x[2]);         \
        }                                                                               \
        CHECK(shmem_##NAME##_atomic_fetch(&x[0], 0) == (TYPE)(6 * n), #NAME "_fetch");  \
        shmem_##NAME##_atomic_fetch_nbi(&f, &x[1], 0);                                  \
        shmem_quiet();                                                                  \
        CHECK(f == (TYPE)n, #NAME "_fetch_nbi %lld", (long long)f);                     \
        shmem_barrier_all();                                                            \
        /* set / swap / compare_swap on my right neighbour's x[3]. */                   \
        int right = (me + 1) % n;                                                       \
        shmem_##NAME##_atomic_set(&x[3], (TYPE)(me + 10), right);                       \
        shmem_barrier_all();                                                            \
        int left = (me + n - 1) % n;                                                    \
        CHECK(x[3] == (TYPE)(left + 10), #NAME "_set: %lld", (long long)x[3]);          \
        shmem_barrier_all();                                                            \
        old = shmem_##NAME##_atomic_swap(&x[3], (TYPE)(me + 20), right);                \
        CHECK(old == (TYPE)(me + 10), #NAME "_swap old %lld", (long long)old);          \
        shmem_barrier_all();                                                            \
        old = shmem_##NAME##_atomic_compare_swap(&x[3], (TYPE)99, (TYPE)1, right);      \
        CHECK(old == (TYPE)(me + 20), #NAME "_cswap (fail) old %lld", (long long)old);  \
        old = shmem_##NAME##_atomic_compare_swap(&x[3], (TYPE)(me + 20), (TYPE)7, right);\
        CHECK(old == (TYPE)(me + 20), #NAME "_cswap old %lld", (long long)old);         \
        shmem_##NAME##_atomic_compare_swap_nbi(&f, &x[3], (TYPE)7, (TYPE)8, right);     \
        shmem_##NAME##_atomic_swap_nbi(&f, &x[3], (TYPE)9, right);                      \
        shmem_quiet();                                                                  \
        CHECK(f == (TYPE)8, #NAME "_swap_nbi fetched %lld", (long long)f);              \
        shmem_barrier_all();                                                            \
        CHECK(x[3] == (TYPE)9, #NAME ": x[3] %lld", (long long)x[3]);                   \
        shmem_barrier_all();                                                            \
        shmem_free(x);                                                                  \
    }
STANDARD(TEST_STANDARD)

#define TEST_BITWISE(TYPE, NAME)                                                        \
    static void bitwise_##NAME(void) {                                                  \
        TYPE *x = shmem_malloc(3 * sizeof(TYPE));                                       \
        x[0] = (TYPE)0;                                                                 \
        x[1] = (TYPE)~(TYPE)0;                                                          \
        x[2] = (TYPE)0;                                                                 \
        shmem_barrier_all();                                                            \
        TYPE bit = (TYPE)((TYPE)1 << me);                                               \
        shmem_##NAME##_atomic_or(&x[0], bit, 0);                                        \
        shmem_##NAME##_atomic_and(&x[1], (TYPE)~bit, 0);                                \
        shmem_##NAME##_atomic_xor(&x[2], bit, 0);                                       \
        shmem_##NAME##_atomic_fetch_xor(&x[2], (TYPE)(bit << n), 0);                    \
        TYPE f;                                                                         \
        shmem_##NAME##_atomic_fetch_or_nbi(&f, &x[0], (TYPE)0, 0);                      \
        shmem_##NAME##_atomic_fetch_and_nbi(&f, &x[1], (TYPE)~(TYPE)0, 0);              \
        shmem_##NAME##_atomic_fetch_xor_nbi(&f, &x[2], (TYPE)0, 0);                     \
        shmem_quiet();                                                                  \
        shmem_barrier_all();                                                            \
        TYPE all = (TYPE)(((TYPE)1 << n) - 1);                                          \
        CHECK(shmem_##NAME##_atomic_fetch_or(&x[0], (TYPE)0, 0) == all, #NAME "_or");   \
        CHECK(shmem_##NAME##_atomic_fetch_and(&x[1], (TYPE)~(TYPE)0, 0) == (TYPE)~all,  \
              #NAME "_and");                                                            \
        CHECK(shmem_##NAME##_atomic_fetch(&x[2], 0) == (TYPE)(all | (all << n)),        \
              #NAME "_xor");                                                            \
        shmem_barrier_all();                                                            \
        shmem_free(x);                                                                  \
    }
BITWISE(TEST_BITWISE)

#define TEST_FLOAT(TYPE, NAME)                                                          \
    static void extended_##NAME(void) {                                                 \
        TYPE *x = shmem_calloc(1, sizeof(TYPE));                                        \
        int right = (me + 1) % n, left = (me + n - 1) % n;                              \
        shmem_##NAME##_atomic_set(x, (TYPE)me + (TYPE)0.25, right);                     \
        shmem_barrier_all();                                                            \
        CHECK(shmem_##NAME##_atomic_fetch(x, me) == (TYPE)left + (TYPE)0.25,            \
              #NAME "_set/fetch");                                                      \
        shmem_barrier_all();                                                            \
        TYPE old = shmem_##NAME##_atomic_swap(x, (TYPE)-1.5, right);                    \
        CHECK(old == (TYPE)me + (TYPE)0.25, #NAME "_swap old");                         \
        TYPE f = 0;                                                                     \
        shmem_##NAME##_atomic_swap_nbi(&f, x, (TYPE)2.5, right);                        \
        shmem_quiet();                                                                  \
        CHECK(f == (TYPE)-1.5, #NAME "_swap_nbi fetched");                              \
        shmem_##NAME##_atomic_fetch_nbi(&f, x, right);                                  \
        shmem_quiet();                                                                  \
        CHECK(f == (TYPE)2.5, #NAME "_fetch_nbi");                                      \
        shmem_barrier_all();                                                            \
        shmem_free(x);                                                                  \
    }
TEST_FLOAT(float, float)
TEST_FLOAT(double, double)

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
#define RUN_S(TYPE, NAME) standard_##NAME();
#define RUN_B(TYPE, NAME) bitwise_##NAME();
    STANDARD(RUN_S)
    BITWISE(RUN_B)
    extended_float();
    extended_double();
    ok("amo");
    shmem_finalize();
    return 0;
}
