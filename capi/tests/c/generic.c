/* OpenSHMEM 1.5: the C11 type-generic interfaces (without contexts), distributed
 * locking (section 9.12), and the deprecated names programs still use. */
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
