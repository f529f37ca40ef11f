/* OpenSHMEM 1.5 section 9.9: broadcast, collect, fcollect, alltoall, alltoalls (typed
 * and mem forms) and every reduction, on SHMEM_TEAM_WORLD and on a split team. */
#include <complex.h>
#include <string.h>
#include "check.h"

#define M 5

static int me, n;
/* Symmetric buffers shared by every test: shmem_malloc is collective over the world, so
 * tests that run on a split team cannot allocate. */
#define BUF_BYTES 4096
static void *src_buf, *dst_buf;

/* Data movers for one type on `team`; values name the team PE and the index. */
#define V(pe, i) ((pe) * 7 + (i) % 5 + 1)
#define TEST_MOVERS(TYPE, NAME)                                                         \
    static void movers_##NAME(shmem_team_t team) {                                      \
        int tme = shmem_team_my_pe(team), tn = shmem_team_n_pes(team);                  \
        TYPE *src = src_buf;                        \
        TYPE *dst = dst_buf;                  \
        CHECK(src && dst, #NAME ": malloc failed");                                     \
        for (int i = 0; i < tn * M; i++) src[i] = (TYPE)V(tme, i);                      \
        for (int root = 0; root < tn; root++) {                                         \
            for (int i = 0; i <= tn * M; i++) dst[i] = (TYPE)0;                         \
            shmem_team_sync(team);                                                      \
            CHECK(shmem_##NAME##_broadcast(team, dst, src, M, root) == 0,               \
                  #NAME "_broadcast");                                                  \
            for (int i = 0; i < M; i++)                                                 \
                CHECK(dst[i] == (TYPE)V(root, i), #NAME "_broadcast root %d [%d]",      \
                      root, i);                                                         \
            CHECK(dst[M] == (TYPE)0, #NAME "_broadcast wrote past nelems");             \
        }                                                                               \
        CHECK(shmem_##NAME##_fcollect(team, dst, src, M) == 0, #NAME "_fcollect");      \
        for (int p = 0; p < tn; p++)                                                    \
            for (int i = 0; i < M; i++)                                                 \
                CHECK(dst[p * M + i] == (TYPE)V(p, i), #NAME "_fcollect [%d][%d]", p, i);\
        /* collect: team PE p contributes p % 3 + 1 elements. */                        \
        CHECK(shmem_##NAME##_collect(team, dst, src, (size_t)(tme % 3 + 1)) == 0,       \
              #NAME "_collect");                                                        \
        int at = 0;                                                                     \
        for (int p = 0; p < tn; p++)                                                    \
            for (int i = 0; i < p % 3 + 1; i++, at++)                                   \
                CHECK(dst[at] == (TYPE)V(p, i), #NAME "_collect [%d]", at);             \
        CHECK(shmem_##NAME##_alltoall(team, dst, src, 2) == 0, #NAME "_alltoall");      \
        for (int p = 0; p < tn; p++)                                                    \
            for (int i = 0; i < 2; i++)                                                 \
                CHECK(dst[p * 2 + i] == (TYPE)V(p, tme * 2 + i),                        \
                      #NAME "_alltoall [%d][%d]", p, i);                                \
        /* alltoalls: 1 element per block, source stride 2, dest stride 1. */           \
        for (int i = 0; i <= tn * M; i++) dst[i] = (TYPE)0;                             \
        shmem_team_sync(team);                                                          \
        CHECK(shmem_##NAME##_alltoalls(team, dst, src, 1, 2, 1) == 0,                   \
              #NAME "_alltoalls");                                                      \
        for (int p = 0; p < tn; p++)                                                    \
            CHECK(dst[p] == (TYPE)V(p, 2 * tme), #NAME "_alltoalls [%d]", p);           \
        shmem_team_sync(team);                                                          \
    }
TEST_RMA_TYPES(TEST_MOVERS)

static void mem_forms(shmem_team_t team) {
    int tme = shmem_team_my_pe(team), tn = shmem_team_n_pes(team);
    char *src = src_buf;
    char *dst = dst_buf;
    memset(src, 'a' + tme, 64);
    CHECK(shmem_broadcastmem(team, dst, src, 3, tn - 1) == 0, "broadcastmem");
    for (int i = 0; i < 3; i++) CHECK(dst[i] == 'a' + tn - 1, "broadcastmem [%d]", i);
    CHECK(shmem_fcollectmem(team, dst, src, 2) == 0, "fcollectmem");
    for (int p = 0; p < tn; p++) CHECK(dst[2 * p + 1] == 'a' + p, "fcollectmem [%d]", p);
    CHECK(shmem_collectmem(team, dst, src, 1) == 0, "collectmem");
    for (int p = 0; p < tn; p++) CHECK(dst[p] == 'a' + p, "collectmem [%d]", p);
    CHECK(shmem_alltoallmem(team, dst, src, 3) == 0, "alltoallmem");
    for (int p = 0; p < tn; p++) CHECK(dst[3 * p] == 'a' + p, "alltoallmem [%d]", p);
    CHECK(shmem_alltoallsmem(team, dst, src, 2, 1, 1) == 0, "alltoallsmem");
    for (int p = 0; p < tn; p++) CHECK(dst[2 * p] == 'a' + p, "alltoallsmem [%d]", p);}

/* Reductions: small values so sums and products are exact in every type. */
#define TEST_ARITH(TYPE, NAME)                                                          \
    static void arith_##NAME(shmem_team_t team) {                                       \
        int tme = shmem_team_my_pe(team), tn = shmem_team_n_pes(team);                  \
        TYPE *src = src_buf;                                     \
        TYPE *dst = dst_buf;                                     \
        for (int i = 0; i < M; i++) src[i] = (TYPE)((tme + i) % 3 + 1);                 \
        TYPE sum[M], prod[M], mx[M], mn[M];                                             \
        for (int i = 0; i < M; i++) {                                                   \
            sum[i] = 0; prod[i] = 1; mx[i] = 0; mn[i] = 100;                            \
            for (int p = 0; p < tn; p++) {                                              \
                TYPE v = (TYPE)((p + i) % 3 + 1);                                       \
                sum[i] += v; prod[i] *= v;                                              \
                if (v > mx[i]) mx[i] = v;                                               \
                if (v < mn[i]) mn[i] = v;                                               \
            }                                                                           \
        }                                                                               \
        CHECK(shmem_##NAME##_sum_reduce(team, dst, src, M) == 0, #NAME "_sum_reduce");  \
        for (int i = 0; i < M; i++) CHECK(dst[i] == sum[i], #NAME "_sum_reduce [%d]", i);\
        CHECK(shmem_##NAME##_prod_reduce(team, dst, src, M) == 0, #NAME "_prod");       \
        for (int i = 0; i < M; i++) CHECK(dst[i] == prod[i], #NAME "_prod [%d]", i);    \
        CHECK(shmem_##NAME##_max_reduce(team, dst, src, M) == 0, #NAME "_max");         \
        for (int i = 0; i < M; i++) CHECK(dst[i] == mx[i], #NAME "_max [%d]", i);       \
        CHECK(shmem_##NAME##_min_reduce(team, dst, src, M) == 0, #NAME "_min");         \
        for (int i = 0; i < M; i++) CHECK(dst[i] == mn[i], #NAME "_min [%d]", i);       \
        /* In place: dest == source. */                                                 \
        CHECK(shmem_##NAME##_sum_reduce(team, src, src, M) == 0, #NAME "_sum in place");\
        for (int i = 0; i < M; i++) CHECK(src[i] == sum[i], #NAME "_sum in place");     \
        shmem_team_sync(team);                                                          \
    }
#define ARITH_TYPES(X)                                                                  \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)       \
    X(long long, longlong) X(ptrdiff_t, ptrdiff) X(unsigned char, uchar)                \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)             \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16)                  \
    X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16)           \
    X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(float, float)             \
    X(double, double)
ARITH_TYPES(TEST_ARITH)

#define TEST_BITS(TYPE, NAME)                                                           \
    static void bits_##NAME(shmem_team_t team) {                                        \
        int tme = shmem_team_my_pe(team), tn = shmem_team_n_pes(team);                  \
        TYPE *src = src_buf;                                     \
        TYPE *dst = dst_buf;                                     \
        src[0] = (TYPE)(1u << tme);                                                     \
        src[1] = (TYPE)(0x7u ^ (1u << (tme % 3)));                                      \
        TYPE all_or = 0, all_and = (TYPE)~(TYPE)0, all_xor = 0;                         \
        for (int p = 0; p < tn; p++) {                                                  \
            all_or |= (TYPE)(1u << p);                                                  \
            all_and &= (TYPE)(0x7u ^ (1u << (p % 3)));                                  \
            all_xor ^= (TYPE)(0x7u ^ (1u << (p % 3)));                                  \
        }                                                                               \
        CHECK(shmem_##NAME##_or_reduce(team, dst, src, 1) == 0 && dst[0] == all_or,     \
              #NAME "_or_reduce");                                                      \
        CHECK(shmem_##NAME##_and_reduce(team, dst, src + 1, 1) == 0 && dst[0] == all_and,\
              #NAME "_and_reduce");                                                     \
        CHECK(shmem_##NAME##_xor_reduce(team, dst, src + 1, 1) == 0 && dst[0] == all_xor,\
              #NAME "_xor_reduce");                                                     \
        shmem_team_sync(team);                                                          \
    }
#define BIT_TYPES(X)                                                                    \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)             \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)            \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8)             \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
BIT_TYPES(TEST_BITS)


/* long double and complex reductions, and long long bitwise ones. */
static void extra_reductions(shmem_team_t team) {
    int tme = shmem_team_my_pe(team), tn = shmem_team_n_pes(team);
    long double *ld = src_buf, *ldd = dst_buf;
    ld[0] = tme + 1;
    ld[1] = 0.5L;
    CHECK(shmem_longdouble_sum_reduce(team, ldd, ld, 2) == 0, "longdouble_sum_reduce");
    CHECK(ldd[0] == (long double)tn * (tn + 1) / 2 && ldd[1] == 0.5L * tn, "longdouble sum");
    CHECK(shmem_longdouble_max_reduce(team, ldd, ld, 1) == 0 && ldd[0] == tn, "ld max");
    CHECK(shmem_longdouble_min_reduce(team, ldd, ld, 1) == 0 && ldd[0] == 1, "ld min");
    CHECK(shmem_longdouble_prod_reduce(team, ld, ld, 2) == 0, "longdouble_prod_reduce");
    long double fact = 1;
    for (int p = 1; p <= tn; p++) fact *= p;
    CHECK(ld[0] == fact, "longdouble prod in place");
    shmem_team_sync(team);
    double complex *z = src_buf, *zd = dst_buf;
    z[0] = tme + 1.0 * I;
    CHECK(shmem_complexd_sum_reduce(team, zd, z, 1) == 0, "complexd_sum_reduce");
    CHECK(creal(zd[0]) == (double)tn * (tn - 1) / 2 && cimag(zd[0]) == tn, "complexd sum");
    z[0] = I;
    shmem_team_sync(team);
    CHECK(shmem_complexd_prod_reduce(team, zd, z, 1) == 0, "complexd_prod_reduce");
    double complex want = 1;
    for (int p = 0; p < tn; p++) want *= I;
    CHECK(zd[0] == want, "complexd prod");
    float complex *f = src_buf, *fd = dst_buf;
    shmem_team_sync(team);
    f[0] = 1.0f + 2.0f * I;
    CHECK(shmem_complexf_sum_reduce(team, fd, f, 1) == 0 && crealf(fd[0]) == tn &&
              cimagf(fd[0]) == 2.0f * tn,
          "complexf sum");
    CHECK(shmem_complexf_prod_reduce(team, fd, f, 0) == 0, "complexf prod of nothing");
    long long *ll = src_buf, *lld = dst_buf;
    shmem_team_sync(team);
    ll[0] = 1LL << tme;
    CHECK(shmem_longlong_or_reduce(team, lld, ll, 1) == 0 && lld[0] == (1LL << tn) - 1,
          "longlong_or_reduce");
    CHECK(shmem_longlong_and_reduce(team, lld, ll, 1) == 0 && lld[0] == (tn == 1 ? 1 : 0),
          "longlong_and_reduce");
    CHECK(shmem_longlong_xor_reduce(team, lld, ll, 1) == 0 && lld[0] == (1LL << tn) - 1,
          "longlong_xor_reduce");
    shmem_team_sync(team);
}

static void all_on(shmem_team_t team) {
#define RUN_M(TYPE, NAME) movers_##NAME(team);
#define RUN_A(TYPE, NAME) arith_##NAME(team);
#define RUN_B(TYPE, NAME) bits_##NAME(team);
    TEST_RMA_TYPES(RUN_M)
    mem_forms(team);
    ARITH_TYPES(RUN_A)
    BIT_TYPES(RUN_B)
    extra_reductions(team);
}

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    src_buf = shmem_malloc(BUF_BYTES);
    dst_buf = shmem_malloc(BUF_BYTES);
    CHECK(src_buf && dst_buf, "malloc failed");
    all_on(SHMEM_TEAM_WORLD);
    /* The PEs from 1 on (every PE when alone), a team whose numbering differs from the
     * world's. Only its members call the collectives. */
    shmem_team_t rest;
    int start = n > 1 ? 1 : 0;
    CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, start, 1, n - start, NULL, 0, &rest) == 0,
          "split");
    if (rest != SHMEM_TEAM_INVALID) {
        all_on(rest);
        shmem_team_destroy(rest);
    }
    /* An invalid team or root gives a nonzero return, not a crash. */
    long *x = shmem_malloc(sizeof(long));
    CHECK(shmem_long_broadcast(SHMEM_TEAM_INVALID, x, x, 1, 0) != 0, "invalid team");
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_INVALID, x, x, 1) != 0, "invalid team reduce");
    shmem_free(x);
    shmem_free(dst_buf);
    shmem_free(src_buf);
    ok("collectives");
    shmem_finalize();
    return 0;
}
