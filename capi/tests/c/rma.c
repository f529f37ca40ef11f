/* OpenSHMEM 1.5 section 9.6: typed and sized put, get, p, g, iput, iget and their
 * nonblocking forms, between every PE and its neighbours, each value checked. */
#include <stdint.h>
#include <string.h>
#include "check.h"

#define N 37

static int me, n, right, left;

/* A value that names the PE and the index, representable in every type. */
#define VAL(pe, i) ((pe) * 3 + (i) % 29 + 1)

#define TEST_TYPE(TYPE, NAME)                                                           \
    static void test_##NAME(void) {                                                     \
        TYPE *dst = shmem_malloc(2 * N * sizeof(TYPE));                                 \
        TYPE *src = shmem_malloc(2 * N * sizeof(TYPE));                                 \
        CHECK(dst && src, #NAME ": malloc failed");                                     \
        TYPE local[2 * N];                                                              \
        for (int i = 0; i < 2 * N; i++) {                                               \
            src[i] = (TYPE)VAL(me, i);                                                  \
            dst[i] = (TYPE)0;                                                           \
            local[i] = (TYPE)0;                                                         \
        }                                                                               \
        shmem_barrier_all();                                                            \
        /* put: my src to the right neighbour's dst. */                                 \
        shmem_##NAME##_put(dst, src, N, right);                                         \
        shmem_barrier_all();                                                            \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(dst[i] == (TYPE)VAL(left, i), #NAME "_put: dst[%d] wrong", i);        \
        CHECK(dst[N] == (TYPE)0, #NAME "_put wrote past nelems");                       \
        /* get: the right neighbour's src. */                                           \
        shmem_##NAME##_get(local, src, N, right);                                       \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(local[i] == (TYPE)VAL(right, i), #NAME "_get: local[%d] wrong", i);   \
        /* p and g. */                                                                  \
        shmem_barrier_all();                                                            \
        shmem_##NAME##_p(&dst[N + 1], (TYPE)VAL(me, 5), right);                         \
        shmem_barrier_all();                                                            \
        CHECK(dst[N + 1] == (TYPE)VAL(left, 5), #NAME "_p: wrong value");               \
        CHECK(shmem_##NAME##_g(&src[3], left) == (TYPE)VAL(left, 3), #NAME "_g wrong"); \
        /* nbi forms, complete after quiet. */                                          \
        shmem_barrier_all();                                                            \
        for (int i = 0; i < 2 * N; i++) dst[i] = (TYPE)0;                               \
        shmem_barrier_all();                                                            \
        shmem_##NAME##_put_nbi(dst + 1, src + 2, N, left);                              \
        shmem_quiet();                                                                  \
        memset(local, 0, sizeof local);                                                 \
        shmem_##NAME##_get_nbi(local, src + 1, N, left);                                \
        shmem_quiet();                                                                  \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(local[i] == (TYPE)VAL(left, i + 1), #NAME "_get_nbi: [%d] wrong", i); \
        shmem_barrier_all();                                                            \
        CHECK(dst[0] == (TYPE)0, #NAME "_put_nbi wrote before dest");                   \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(dst[i + 1] == (TYPE)VAL(right, i + 2), #NAME "_put_nbi: [%d]", i);    \
        /* iput: every 2nd source element to every 3rd destination element. */          \
        shmem_barrier_all();                                                            \
        for (int i = 0; i < 2 * N; i++) dst[i] = (TYPE)0;                               \
        shmem_barrier_all();                                                            \
        shmem_##NAME##_iput(dst, src, 3, 2, 10, right);                                 \
        shmem_barrier_all();                                                            \
        for (int i = 0; i < 30; i++)                                                    \
            CHECK(dst[i] == (i % 3 == 0 ? (TYPE)VAL(left, (i / 3) * 2) : (TYPE)0),      \
                  #NAME "_iput: dst[%d] wrong", i);                                     \
        /* iget: every 3rd remote element into every 2nd local one. */                  \
        for (int i = 0; i < 2 * N; i++) local[i] = (TYPE)0;                             \
        shmem_##NAME##_iget(local, src, 2, 3, 12, left);                                \
        for (int i = 0; i < 24; i++)                                                    \
            CHECK(local[i] == (i % 2 == 0 ? (TYPE)VAL(left, (i / 2) * 3) : (TYPE)0),    \
                  #NAME "_iget: local[%d] wrong", i);                                   \
        shmem_barrier_all();                                                            \
        shmem_free(src);                                                                \
        shmem_free(dst);                                                                \
    }

TEST_RMA_TYPES(TEST_TYPE)

/* Sized routines move BITS-bit words. */
#define TEST_SIZED(BITS, TYPE)                                                          \
    static void test_sized_##BITS(void) {                                               \
        TYPE *dst = shmem_calloc(N, sizeof(TYPE));                                      \
        TYPE *src = shmem_malloc(N * sizeof(TYPE));                                     \
        CHECK(dst && src, "sized %d: malloc failed", BITS);                             \
        for (int i = 0; i < N; i++) src[i] = (TYPE)VAL(me, i);                          \
        shmem_barrier_all();                                                            \
        shmem_put##BITS(dst, src, N, right);                                            \
        shmem_barrier_all();                                                            \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(dst[i] == (TYPE)VAL(left, i), "put%d: dst[%d] wrong", BITS, i);       \
        TYPE local[N];                                                                  \
        shmem_get##BITS(local, src, N, left);                                           \
        for (int i = 0; i < N; i++)                                                     \
            CHECK(local[i] == (TYPE)VAL(left, i), "get%d: local[%d] wrong", BITS, i);   \
        shmem_get##BITS##_nbi(local, src, 4, right);                                    \
        shmem_quiet();                                                                  \
        CHECK(local[3] == (TYPE)VAL(right, 3), "get%d_nbi wrong", BITS);                \
        shmem_iget##BITS(local, src, 1, 2, 5, right);                                   \
        CHECK(local[4] == (TYPE)VAL(right, 8), "iget%d wrong", BITS);                   \
        shmem_barrier_all();                                                            \
        shmem_iput##BITS(dst, src, 2, 1, 3, right);                                     \
        shmem_put##BITS##_nbi(dst + 10, src, 1, right);                                 \
        shmem_barrier_all();                                                            \
        CHECK(dst[4] == (TYPE)VAL(left, 2) && dst[10] == (TYPE)VAL(left, 0),            \
              "iput%d/put%d_nbi wrong", BITS, BITS);                                    \
        shmem_free(src);                                                                \
        shmem_free(dst);                                                                \
    }
TEST_SIZED(8, uint8_t)
TEST_SIZED(16, uint16_t)
TEST_SIZED(32, uint32_t)
TEST_SIZED(64, uint64_t)

static void test_put128_and_mem(void) {
    uint64_t *dst = shmem_calloc(8, sizeof(uint64_t));
    uint64_t *src = shmem_malloc(8 * sizeof(uint64_t));
    for (int i = 0; i < 8; i++) src[i] = (uint64_t)me << 32 | (uint64_t)i;
    shmem_barrier_all();
    shmem_put128(dst, src, 2, right); /* 2 × 128 bits = 4 words */
    shmem_barrier_all();
    for (int i = 0; i < 4; i++)
        CHECK(dst[i] == ((uint64_t)left << 32 | (uint64_t)i), "put128: dst[%d] wrong", i);
    CHECK(dst[4] == 0, "put128 wrote past 2 elements");
    shmem_barrier_all();
    /* putmem/getmem: bytes at odd offsets. */
    char *bytes = shmem_calloc(64, 1);
    const char *msg = "hello from a PE";
    shmem_barrier_all();
    shmem_putmem(bytes + 3, msg, strlen(msg) + 1, right);
    shmem_barrier_all();
    CHECK(strcmp(bytes + 3, msg) == 0, "putmem: got '%s'", bytes + 3);
    char got[32] = {0};
    shmem_getmem(got, bytes + 3, strlen(msg) + 1, left);
    CHECK(strcmp(got, msg) == 0, "getmem: got '%s'", got);
    shmem_putmem_nbi(bytes + 40, "xyz", 3, left);
    shmem_quiet();
    shmem_barrier_all();
    CHECK(memcmp(bytes + 40, "xyz", 3) == 0, "putmem_nbi wrong");
    memset(got, 0, sizeof got);
    shmem_getmem_nbi(got, bytes + 40, 3, right);
    shmem_quiet();
    CHECK(memcmp(got, "xyz", 3) == 0, "getmem_nbi wrong");
    /* Zero-length transfers do nothing. */
    shmem_putmem(bytes, msg, 0, right);
    shmem_int_put((int *)dst, (const int *)src, 0, right);
    shmem_barrier_all();
    shmem_free(bytes);
    shmem_free(src);
    shmem_free(dst);
}

/* long double p/g (inline in shmem.h). */
static void test_longdouble_pg(void) {
    long double *x = shmem_calloc(2, sizeof(long double));
    shmem_barrier_all();
    shmem_longdouble_p(&x[1], (long double)me + 0.5L, right);
    shmem_barrier_all();
    CHECK(x[1] == (long double)left + 0.5L, "longdouble_p wrong");
    CHECK(shmem_longdouble_g(&x[1], right) == (long double)me + 0.5L, "longdouble_g wrong");
    shmem_barrier_all();
    shmem_free(x);
}

/* "put data; fence; p(flag)": the flag is never seen before the data. */
static void test_fence_publishes(void) {
    long *data = shmem_calloc(64, sizeof(long));
    long *flag = shmem_calloc(1, sizeof(long));
    shmem_barrier_all();
    long v[64];
    for (int i = 0; i < 64; i++) v[i] = me * 100 + i;
    shmem_long_put(data, v, 64, right);
    shmem_fence();
    shmem_long_p(flag, 1, right);
    shmem_long_wait_until(flag, SHMEM_CMP_EQ, 1);
    for (int i = 0; i < 64; i++) CHECK(data[i] == left * 100 + i, "fenced data[%d] wrong", i);
    shmem_barrier_all();
    shmem_free(flag);
    shmem_free(data);
}

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    right = (me + 1) % n;
    left = (me + n - 1) % n;
#define RUN(TYPE, NAME) test_##NAME();
    TEST_RMA_TYPES(RUN)
    test_sized_8();
    test_sized_16();
    test_sized_32();
    test_sized_64();
    test_put128_and_mem();
    test_longdouble_pg();
    test_fence_publishes();
    ok("rma");
    shmem_finalize();
    return 0;
}
