/* OpenSHMEM 1.5 sections 9.8 and 9.11: put-with-signal, signal_fetch,
 * signal_wait_until, wait_until/test and their _all/_any/_some and _vector forms. */
#include "check.h"

static int me, n, right, left;

#define SYNC_TYPES(X)                                                                   \
    X(short, short) X(unsigned short, ushort) X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)              \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)          \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)           \
    X(ptrdiff_t, ptrdiff)

#define K 5

#define TEST_WAITS(TYPE, NAME)                                                          \
    static void waits_##NAME(void) {                                                    \
        TYPE *iv = shmem_calloc(K, sizeof(TYPE));                                       \
        CHECK(iv != NULL, #NAME ": calloc failed");                                     \
        size_t idx[K];                                                                  \
        int status[K] = {0, 0, 0, 0, 0};                                                \
        TYPE vals[K] = {1, 2, 3, 4, 5};                                                 \
        shmem_barrier_all();                                                            \
        /* Nothing set yet: the tests say so. */                                        \
        CHECK(shmem_##NAME##_test(&iv[0], SHMEM_CMP_NE, 0) == 0, #NAME "_test early");  \
        CHECK(shmem_##NAME##_test_any(iv, K, NULL, SHMEM_CMP_GT, 0) == SIZE_MAX,        \
              #NAME "_test_any early");                                                 \
        CHECK(shmem_##NAME##_test_some(iv, K, idx, NULL, SHMEM_CMP_GT, 0) == 0,         \
              #NAME "_test_some early");                                                \
        CHECK(shmem_##NAME##_test_all(iv, K, NULL, SHMEM_CMP_EQ, 0) == 1,               \
              #NAME "_test_all early");                                                 \
        shmem_barrier_all();                                                            \
        /* The left neighbour sets iv[2], then all of them, one at a time. */           \
        shmem_##NAME##_p(&iv[2], (TYPE)3, right);                                       \
        size_t i = shmem_##NAME##_wait_until_any(iv, K, NULL, SHMEM_CMP_GT, 0);         \
        CHECK(i == 2, #NAME "_wait_until_any gave %zu", i);                             \
        status[2] = 1; /* excluded from now on */                                       \
        CHECK(shmem_##NAME##_test_any(iv, K, status, SHMEM_CMP_GT, 0) == SIZE_MAX,      \
              #NAME "_test_any with iv[2] excluded");                                   \
        shmem_barrier_all();                                                            \
        shmem_##NAME##_p(&iv[4], (TYPE)5, right);                                       \
        size_t c = shmem_##NAME##_wait_until_some(iv, K, idx, status, SHMEM_CMP_GT, 0); \
        CHECK(c == 1 && idx[0] == 4, #NAME "_wait_until_some gave %zu", c);             \
        shmem_barrier_all();                                                            \
        shmem_##NAME##_p(&iv[0], (TYPE)1, right);                                       \
        shmem_##NAME##_p(&iv[1], (TYPE)2, right);                                       \
        shmem_##NAME##_p(&iv[3], (TYPE)4, right);                                       \
        shmem_##NAME##_wait_until_all(iv, K, NULL, SHMEM_CMP_NE, 0);                    \
        shmem_##NAME##_wait_until_all_vector(iv, K, NULL, SHMEM_CMP_EQ, vals);          \
        CHECK(shmem_##NAME##_test_all_vector(iv, K, NULL, SHMEM_CMP_GE, vals) == 1,     \
              #NAME "_test_all_vector");                                                \
        CHECK(shmem_##NAME##_wait_until_any_vector(iv, K, status, SHMEM_CMP_EQ, vals)   \
                  != 2, #NAME "_wait_until_any_vector picked an excluded ivar");        \
        c = shmem_##NAME##_test_some_vector(iv, K, idx, NULL, SHMEM_CMP_EQ, vals);      \
        CHECK(c == K, #NAME "_test_some_vector gave %zu", c);                           \
        for (size_t j = 0; j < c; j++) CHECK(idx[j] < K, "index out of range");          \
        vals[1] = 9;                                                                    \
        c = shmem_##NAME##_wait_until_some_vector(iv, K, idx, NULL, SHMEM_CMP_NE, vals);\
        CHECK(c == 1 && idx[0] == 1, #NAME "_wait_until_some_vector gave %zu", c);      \
        CHECK(shmem_##NAME##_test_any_vector(iv, K, NULL, SHMEM_CMP_LT, vals) == 1,     \
              #NAME "_test_any_vector");                                                \
        CHECK(shmem_##NAME##_test(&iv[3], SHMEM_CMP_LE, 4) == 1, #NAME "_test LE");     \
        CHECK(shmem_##NAME##_test(&iv[3], SHMEM_CMP_LT, 4) == 0, #NAME "_test LT");     \
        shmem_##NAME##_wait_until(&iv[4], SHMEM_CMP_GE, 5);                             \
        /* Every ivar excluded: any returns SIZE_MAX, some returns 0. */                \
        int none[K] = {1, 1, 1, 1, 1};                                                  \
        CHECK(shmem_##NAME##_wait_until_any(iv, K, none, SHMEM_CMP_EQ, 0) == SIZE_MAX,  \
              #NAME ": all excluded");                                                  \
        CHECK(shmem_##NAME##_wait_until_some(iv, K, idx, none, SHMEM_CMP_EQ, 0) == 0,   \
              #NAME ": all excluded (some)");                                           \
        shmem_barrier_all();                                                            \
        shmem_free(iv);                                                                 \
    }
SYNC_TYPES(TEST_WAITS)

/* A waiter blocks until a peer's update arrives (not just already-set values). */
static void wait_blocks_until_update(void) {
    long *flag = shmem_calloc(1, sizeof(long));
    shmem_barrier_all();
    if (me == 0) {
        shmem_long_wait_until(flag, SHMEM_CMP_EQ, n - 1);
    } else {
        shmem_long_atomic_add(flag, 1, 0);
    }
    shmem_barrier_all();
    if (me == 0) CHECK(*flag == n - 1, "flag %ld", *flag);
    shmem_free(flag);
}

static void signals(void) {
    long *data = shmem_calloc(100, sizeof(long));
    uint64_t *sig = shmem_calloc(2, sizeof(uint64_t));
    long src[100];
    for (int i = 0; i < 100; i++) src[i] = me * 1000 + i;
    CHECK(shmem_signal_fetch(&sig[0]) == 0, "signal not zero");
    shmem_barrier_all();
    shmem_long_put_signal(data, src, 100, &sig[0], 17, SHMEM_SIGNAL_SET, right);
    uint64_t s = shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 17);
    CHECK(s == 17, "signal_wait_until returned %llu", (unsigned long long)s);
    for (int i = 0; i < 100; i++) CHECK(data[i] == left * 1000 + i, "data[%d] after signal", i);
    shmem_barrier_all();
    /* SIGNAL_ADD from every PE to PE 0, with nbi and sized/mem forms. */
    shmem_putmem_signal_nbi(data + me, src, sizeof(long), &sig[1], 1, SHMEM_SIGNAL_ADD, 0);
    shmem_quiet();
    if (me == 0) {
        s = shmem_signal_wait_until(&sig[1], SHMEM_CMP_GE, (uint64_t)n);
        CHECK(s == (uint64_t)n, "added signal %llu", (unsigned long long)s);
        for (int pe = 0; pe < n; pe++)
            CHECK(data[pe] == pe * 1000, "data[%d] after added signals", pe);
    }
    shmem_barrier_all();
    shmem_put64_signal(data, src, 3, &sig[0], 5, SHMEM_SIGNAL_SET, left);
    shmem_int_put_signal_nbi((int *)(data + 50), (int *)src, 2, &sig[1], 100,
                             SHMEM_SIGNAL_SET, left);
    shmem_signal_wait_until(&sig[0], SHMEM_CMP_EQ, 5);
    shmem_signal_wait_until(&sig[1], SHMEM_CMP_EQ, 100);
    CHECK(data[2] == right * 1000 + 2, "put64_signal data");
    CHECK(shmem_signal_fetch(&sig[1]) == 100, "signal_fetch");
    shmem_barrier_all();
    shmem_free(sig);
    shmem_free(data);
}

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    right = (me + 1) % n;
    left = (me + n - 1) % n;
#define RUN(TYPE, NAME) waits_##NAME();
    SYNC_TYPES(RUN)
    wait_blocks_until_update();
    signals();
    shmem_sync_all();
    ok("sync");
    shmem_finalize();
    return 0;
}
