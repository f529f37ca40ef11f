/* OpenSHMEM 1.5: the C11 type-generic interfaces (without contexts), distributed
 * locking (section 9.12), and the deprecated names programs still use. */
#include <complex.h>

#include "check.h"

static long lock;
static long counter;

int main(void) {
    start_pes(0);
    int me = _my_pe(), n = _num_pes();
    CHECK(me == shmem_my_pe() && n == shmem_n_pes(), "_my_pe/_num_pes");
    int right = (me + 1) % n, left = (me + n - 1) % n;

    double *d = shmem_calloc(8, sizeof(double));
    unsigned long *u = shmem_calloc(8, sizeof(unsigned long));
    int *i32 = shmem_calloc(8, sizeof(int));
    double src[8];
    for (int i = 0; i < 8; i++) src[i] = me + i / 10.0;
    shmem_put(d, src, 8, right);
    shmem_barrier_all();
    CHECK(d[7] == left + 0.7, "generic put of doubles");
    double got[8];
    shmem_get(got, d, 8, left);
    CHECK(got[3] == ((left + n - 1) % n) + 0.3, "generic get");
    shmem_p(&u[1], (unsigned long)me, right);
    shmem_barrier_all();
    CHECK(shmem_g(&u[1], me) == (unsigned long)left, "generic p/g");

    shmem_atomic_add(&i32[0], 2, 0);
    shmem_atomic_fetch_inc(&u[2], 0);
    shmem_atomic_or(&u[3], 1ul << me, 0);
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch(&i32[0], 0) == 2 * n, "generic atomic_add");
    CHECK(shmem_atomic_fetch(&u[2], 0) == (unsigned long)n, "generic fetch_inc");
    CHECK(shmem_atomic_fetch(&u[3], 0) == (1ul << n) - 1, "generic atomic_or");

    /* The forms with a context. */
    shmem_ctx_t ctx;
    CHECK(shmem_ctx_create(0, &ctx) == 0, "ctx_create");
    shmem_put(ctx, &d[0], src, 1, right);
    shmem_ctx_quiet(ctx);
    shmem_atomic_add(ctx, &i32[3], 1, 0);
    shmem_atomic_or(SHMEM_CTX_DEFAULT, &u[4], 1ul << me, 0);
    shmem_barrier_all();
    CHECK(shmem_g(ctx, &d[0], me) == left, "generic ctx put/g");
    CHECK(shmem_atomic_fetch(ctx, &i32[3], 0) == n, "generic ctx atomic_add");
    CHECK(shmem_atomic_fetch(&u[4], 0) == (1ul << n) - 1, "generic ctx atomic_or");
    shmem_ctx_destroy(ctx);
    shmem_atomic_set(&i32[1], me + 1, right);
    shmem_wait_until(&i32[1], SHMEM_CMP_EQ, left + 1);
    CHECK(shmem_test(&i32[1], SHMEM_CMP_GT, 0) == 1, "generic test");
    shmem_barrier_all();

    d[0] = me;
    shmem_barrier_all();
    CHECK(shmem_sum_reduce(SHMEM_TEAM_WORLD, &d[1], &d[0], 1) == 0, "generic sum_reduce");
    CHECK(d[1] == (double)n * (n - 1) / 2, "sum of PE numbers %f", d[1]);
    CHECK(shmem_fcollect(SHMEM_TEAM_WORLD, u, &u[1], 1) == 0, "generic fcollect");
    long double *ld = shmem_calloc(2, sizeof(long double));
    ld[0] = me;
    CHECK(shmem_max_reduce(SHMEM_TEAM_WORLD, &ld[1], &ld[0], 1) == 0 && ld[1] == n - 1,
          "generic long double max_reduce");
    long long *ll = shmem_calloc(2, sizeof(long long));
    ll[0] = 1LL << me;
    CHECK(shmem_or_reduce(SHMEM_TEAM_WORLD, &ll[1], &ll[0], 1) == 0 && ll[1] == (1LL << n) - 1,
          "generic long long or_reduce");
    shmem_free(ll);
    shmem_free(ld);

    /* Deprecated names and constants. */
    static long psync[_SHMEM_BARRIER_SYNC_SIZE];
    for (int k = 0; k < _SHMEM_BARRIER_SYNC_SIZE; k++) psync[k] = _SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    shmem_barrier(0, 0, n, psync);
    shmem_clear_cache_inv();
    shmem_udcflush();
    CHECK(shmem_int_fadd(&i32[2], 1, 0) < n, "shmem_int_fadd");
    shmem_barrier_all();
    CHECK(shmem_int_fetch(&i32[2], 0) == n, "shmem_int_fetch");

    /* The fetching non-blocking AMOs (9.8), with and without a context: the fetched
     * values are there after shmem_quiet. */
    long *a = shmem_calloc(4, sizeof(long));
    unsigned int *ub = shmem_calloc(4, sizeof(unsigned int));
    shmem_barrier_all();
    long f[5];
    shmem_atomic_fetch_add_nbi(&f[0], &a[0], 1L, 0);
    shmem_atomic_fetch_inc_nbi(SHMEM_CTX_DEFAULT, &f[1], &a[1], 0);
    unsigned int uf[3];
    shmem_atomic_fetch_or_nbi(&uf[0], &ub[0], 1u << me, 0);
    shmem_atomic_fetch_xor_nbi(SHMEM_CTX_DEFAULT, &uf[1], &ub[1], 1u << me, 0);
    shmem_atomic_fetch_and_nbi(&uf[2], &ub[2], 0u, 0);
    shmem_quiet();
    CHECK(f[0] >= 0 && f[0] < n && f[1] >= 0 && f[1] < n, "fetch_add_nbi %ld, fetch_inc_nbi %ld",
          f[0], f[1]);
    CHECK((uf[0] & (1u << me)) == 0 && (uf[1] & (1u << me)) == 0 && uf[2] == 0,
          "fetch_or_nbi %u, fetch_xor_nbi %u, fetch_and_nbi %u", uf[0], uf[1], uf[2]);
    /* Only this PE touches its right neighbour's a[2]. */
    shmem_atomic_swap_nbi(&f[2], &a[2], (long)me + 1, right);
    shmem_quiet();
    shmem_atomic_compare_swap_nbi(SHMEM_CTX_DEFAULT, &f[3], &a[2], (long)me + 1, (long)me + 10,
                                  right);
    shmem_quiet();
    shmem_atomic_fetch_nbi(&f[4], &a[2], right);
    shmem_quiet();
    CHECK(f[2] == 0 && f[3] == me + 1 && f[4] == me + 10,
          "swap_nbi %ld, compare_swap_nbi %ld, fetch_nbi %ld", f[2], f[3], f[4]);
    shmem_barrier_all();
    CHECK(shmem_atomic_fetch(&a[0], 0) == n && shmem_atomic_fetch(&a[1], 0) == n,
          "fetch_add_nbi/fetch_inc_nbi totals");
    CHECK(shmem_atomic_fetch(&ub[0], 0) == (1u << n) - 1 &&
              shmem_atomic_fetch(&ub[1], 0) == (1u << n) - 1,
          "fetch_or_nbi/fetch_xor_nbi totals");

    /* Vector waits and tests (9.11): the left neighbour sets v[k] to k + 1; a nonzero
     * status entry leaves its element out. */
    int *v = shmem_calloc(4, sizeof(int));
    shmem_barrier_all();
    for (int k = 0; k < 4; k++) shmem_int_atomic_set(&v[k], k + 1, right);
    int want[4] = {1, 2, 3, 4};
    int only_1[4] = {1, 0, 1, 1};
    size_t idx[4];
    shmem_wait_until_all_vector(v, 4, NULL, SHMEM_CMP_EQ, want);
    CHECK(shmem_test_all_vector(v, 4, NULL, SHMEM_CMP_EQ, want) == 1, "test_all_vector");
    CHECK(shmem_wait_until_any_vector(v, 4, only_1, SHMEM_CMP_EQ, want) == 1,
          "wait_until_any_vector");
    CHECK(shmem_test_any_vector(v, 4, only_1, SHMEM_CMP_EQ, want) == 1, "test_any_vector");
    CHECK(shmem_wait_until_some_vector(v, 4, idx, NULL, SHMEM_CMP_GE, want) == 4 && idx[3] == 3,
          "wait_until_some_vector");
    CHECK(shmem_test_some_vector(v, 4, idx, NULL, SHMEM_CMP_NE, want) == 0, "test_some_vector");

    /* shmem_sync: the team form and the active-set form; shmem_pcontrol. */
    static long sync_psync[SHMEM_BARRIER_SYNC_SIZE];
    for (int k = 0; k < SHMEM_BARRIER_SYNC_SIZE; k++) sync_psync[k] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    CHECK(shmem_sync(SHMEM_TEAM_WORLD) == 0, "shmem_sync(team)");
    shmem_sync(0, 0, n, sync_psync);
    shmem_pcontrol(1, "a region");
    shmem_pcontrol(2);

    /* The deprecated generic AMO names. */
    long *dg = shmem_calloc(2, sizeof(long));
    shmem_barrier_all();
    shmem_add(&dg[0], 2L, 0);
    shmem_inc(&dg[0], 0);
    shmem_barrier_all();
    CHECK(shmem_fetch(&dg[0], 0) == 3L * n, "shmem_add/shmem_inc: %ld", shmem_fetch(&dg[0], 0));
    shmem_set(&dg[1], 5L, right);
    CHECK(shmem_swap(&dg[1], 6L, right) == 5, "shmem_swap");
    CHECK(shmem_cswap(&dg[1], 6L, 7L, right) == 6, "shmem_cswap");
    CHECK(shmem_finc(&dg[1], right) == 7, "shmem_finc");
    CHECK(shmem_fadd(&dg[1], 2L, right) == 8, "shmem_fadd");
    CHECK(shmem_fetch(&dg[1], right) == 10, "shmem_fetch");
    shmem_barrier_all();

    /* long double and complex _to_all reductions, over every PE and over the even PEs. */
    static long red_psync[SHMEM_REDUCE_SYNC_SIZE];
    static long even_psync[SHMEM_REDUCE_SYNC_SIZE];
    static long double ld_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
    static double _Complex cz_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
    for (int k = 0; k < SHMEM_REDUCE_SYNC_SIZE; k++) red_psync[k] = even_psync[k] = SHMEM_SYNC_VALUE;
    long double *lds = shmem_calloc(4, sizeof(long double));
    double _Complex *cz = shmem_calloc(4, sizeof(double _Complex));
    lds[0] = me;
    lds[1] = me + 0.5L;
    cz[0] = me + 1.0 * I;
    cz[2] = I;
    shmem_barrier_all();
    shmem_longdouble_sum_to_all(&lds[2], lds, 2, 0, 0, n, ld_wrk, red_psync);
    CHECK(lds[2] == n * (n - 1) / 2.0L && lds[3] == n * (n - 1) / 2.0L + n * 0.5L,
          "longdouble_sum_to_all %Lf %Lf", lds[2], lds[3]);
    shmem_longdouble_max_to_all(&lds[2], lds, 1, 0, 0, n, ld_wrk, red_psync);
    CHECK(lds[2] == n - 1, "longdouble_max_to_all %Lf", lds[2]);
    shmem_complexd_sum_to_all(&cz[1], cz, 1, 0, 0, n, cz_wrk, red_psync);
    CHECK(creal(cz[1]) == n * (n - 1) / 2.0 && cimag(cz[1]) == n, "complexd_sum_to_all %f%+fi",
          creal(cz[1]), cimag(cz[1]));
    shmem_complexd_prod_to_all(&cz[3], &cz[2], 1, 0, 0, n, cz_wrk, red_psync);
    double _Complex i_to_n = 1;
    for (int k = 0; k < n; k++) i_to_n *= I;
    CHECK(cz[3] == i_to_n, "complexd_prod_to_all %f%+fi", creal(cz[3]), cimag(cz[3]));
    if (me % 2 == 0) {
        int evens = (n + 1) / 2;
        shmem_longdouble_min_to_all(&lds[2], lds, 1, 0, 1, evens, ld_wrk, even_psync);
        CHECK(lds[2] == 0, "longdouble_min_to_all over the even PEs %Lf", lds[2]);
        shmem_longdouble_sum_to_all(&lds[2], lds, 1, 0, 1, evens, ld_wrk, even_psync);
        CHECK(lds[2] == (long double)evens * (evens - 1), "longdouble_sum_to_all over the even PEs %Lf",
              lds[2]);
    }
    shmem_barrier_all();
    shmem_free(cz);
    shmem_free(lds);
    shmem_free(dg);
    shmem_free(v);
    shmem_free(ub);
    shmem_free(a);

    /* Locks: a critical section that a racy read-modify-write would break. */
    for (int k = 0; k < 20; k++) {
        shmem_set_lock(&lock);
        long v = shmem_long_g(&counter, 0);
        shmem_long_p(&counter, v + 1, 0);
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    CHECK(shmem_long_g(&counter, 0) == 20L * n, "counter under the lock: %ld",
          shmem_long_g(&counter, 0));
    shmem_barrier_all();
    if (me == 0) {
        CHECK(shmem_test_lock(&lock) == 0, "test_lock on a free lock");
    }
    shmem_barrier_all();
    if (me == n - 1 && n > 1) {
        CHECK(shmem_test_lock(&lock) == 1, "test_lock on a held lock");
    }
    shmem_barrier_all();
    if (me == 0) shmem_clear_lock(&lock);

    shmem_barrier_all();
    shfree(i32);
    shmem_free(u);
    shmem_free(d);
    ok("generic");
    shmem_finalize();
    return 0;
}
