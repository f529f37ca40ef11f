// shmem.h from C++ (g++ or clang++): the typed host API, a team reduction, contexts, and the
// inline long double and complex reductions (their _Complex extension). Every PE prints
// "PE i: cxx ok".
#include <shmem.h>

#include <cstdio>
#include <vector>

#define CHECK(cond, what)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "PE %d: %s:%d: check failed: %s\n", shmem_my_pe(),       \
                         __FILE__, __LINE__, what);                                        \
            shmem_global_exit(1);                                                          \
        }                                                                                  \
    } while (0)

static long psync[SHMEM_REDUCE_SYNC_SIZE];
static long double ld_wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];

int main() {
    shmem_init();
    const int me = shmem_my_pe(), n = shmem_n_pes();
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    for (long &w : psync) w = SHMEM_SYNC_VALUE;

    long *x = static_cast<long *>(shmem_calloc(8, sizeof(long)));
    std::vector<long> src(8);
    for (int i = 0; i < 8; i++) src[i] = 100L * me + i;
    shmem_long_put(x, src.data(), 8, right);
    shmem_barrier_all();
    CHECK(x[7] == 100L * left + 7, "long_put");

    shmem_ctx_t ctx;
    CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) == 0, "ctx_create");
    shmem_ctx_long_atomic_add(ctx, &x[0], 1, 0);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    shmem_barrier_all();
    CHECK(shmem_long_atomic_fetch(&x[0], 0) == 100L * (n - 1) + n, "ctx atomic_add");

    double *d = static_cast<double *>(shmem_calloc(2, sizeof(double)));
    d[0] = me;
    shmem_barrier_all();
    CHECK(shmem_double_sum_reduce(SHMEM_TEAM_WORLD, &d[1], &d[0], 1) == 0 &&
              d[1] == n * (n - 1) / 2.0,
          "double_sum_reduce");

    double _Complex *z =
        static_cast<double _Complex *>(shmem_calloc(2, sizeof(double _Complex)));
    __real__ z[0] = me;
    __imag__ z[0] = 1;
    shmem_barrier_all();
    CHECK(shmem_complexd_sum_reduce(SHMEM_TEAM_WORLD, &z[1], &z[0], 1) == 0 &&
              __real__ z[1] == n * (n - 1) / 2.0 && __imag__ z[1] == n,
          "complexd_sum_reduce");

    long double *ld = static_cast<long double *>(shmem_calloc(2, sizeof(long double)));
    ld[0] = me;
    shmem_barrier_all();
    shmem_longdouble_max_to_all(&ld[1], &ld[0], 1, 0, 0, n, ld_wrk, psync);
    CHECK(ld[1] == n - 1, "longdouble_max_to_all");

    shmem_barrier_all();
    shmem_free(ld);
    shmem_free(z);
    shmem_free(d);
    shmem_free(x);
    std::printf("PE %d: cxx ok\n", me);
    std::fflush(stdout);
    shmem_finalize();
    return 0;
}
