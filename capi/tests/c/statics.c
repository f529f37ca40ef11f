/* OpenSHMEM 1.5 section 3.3: global and static variables are symmetric data objects.
 * Puts, gets, AMOs, waits, signals and collectives on them, initialized data kept. */
#include "check.h"

long global_counter;                 /* .bss */
int global_init[4] = {11, 22, 33, 44}; /* .data */
static long static_flag;
static double static_arr[64];
static uint64_t static_sig;
static long red_src[3], red_dst[3];

int main(void) {
    static int local_static = 7; /* a function-scope static is symmetric too */
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;

    CHECK(global_init[2] == 33 && local_static == 7, "initialized data lost at init");
    CHECK(shmem_addr_accessible(&static_flag, right) == 1, "a static is not accessible");
    CHECK(shmem_addr_accessible(&global_counter, left) == 1, "a global is not accessible");
    CHECK(shmem_ptr(&static_flag, me) == (void *)&static_flag, "shmem_ptr to my static");

    /* put / get on statics. */
    double v[64];
    for (int i = 0; i < 64; i++) v[i] = me * 100.0 + i;
    shmem_double_put(static_arr, v, 64, right);
    shmem_barrier_all();
    for (int i = 0; i < 64; i++)
        CHECK(static_arr[i] == left * 100.0 + i, "static_arr[%d] = %f", i, static_arr[i]);
    int got[4];
    shmem_int_get(got, global_init, 4, right);
    CHECK(got[3] == 44, "get of a peer's initialized global");
    CHECK(shmem_int_g(&local_static, left) == 7, "g of a function-scope static");

    /* AMOs on a global, from every PE to PE 0. */
    shmem_long_atomic_inc(&global_counter, 0);
    shmem_barrier_all();
    if (me == 0) CHECK(global_counter == n, "global_counter = %ld", global_counter);
    CHECK(shmem_long_atomic_fetch(&global_counter, 0) == n, "fetch of a global");

    /* A wait on a static, set by a peer's p. */
    shmem_long_p(&static_flag, me + 1, right);
    shmem_long_wait_until(&static_flag, SHMEM_CMP_EQ, left + 1);

    /* put_signal with a static signal. */
    shmem_barrier_all();
    shmem_int_put_signal(global_init, &me, 1, &static_sig, 9, SHMEM_SIGNAL_SET, right);
    shmem_signal_wait_until(&static_sig, SHMEM_CMP_EQ, 9);
    CHECK(global_init[0] == left, "global_init[0] = %d after put_signal", global_init[0]);

    /* A reduction on static arrays. */
    red_src[0] = me;
    red_src[1] = 1;
    red_src[2] = -me;
    shmem_barrier_all();
    CHECK(shmem_long_sum_reduce(SHMEM_TEAM_WORLD, red_dst, red_src, 3) == 0, "sum_reduce");
    long total = (long)n * (n - 1) / 2;
    CHECK(red_dst[0] == total && red_dst[1] == n && red_dst[2] == -total, "sum on statics");

    shmem_barrier_all();
    shmem_finalize();
    /* Statics keep their values after finalize. */
    CHECK(red_dst[1] == n && local_static == 7, "statics changed by finalize");
    printf("PE %d: statics ok\n", me);
    return 0;
}
