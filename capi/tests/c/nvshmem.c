/* NVSHMEM host API (nvshmem.h): the calls of a typical host program, ported unchanged. */
#include <nvshmem.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, what)                                                       \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "PE %d: %s:%d: %s\n", nvshmem_my_pe(), __FILE__,    \
                    __LINE__, what);                                            \
            nvshmem_global_exit(1);                                             \
        }                                                                       \
    } while (0)

int main(void) {
    nvshmem_init();
    int me = nvshmem_my_pe(), n = nvshmem_n_pes();
    int right = (me + 1) % n, left = (me + n - 1) % n;

    float *buf = (float *)nvshmem_malloc(64 * sizeof(float));
    uint64_t *sig = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
    CHECK(buf && sig, "malloc");
    CHECK(nvshmem_ptr(buf, me) == (void *)buf, "nvshmem_ptr to myself");
    float src[64];
    for (int i = 0; i < 64; i++) src[i] = (float)(me * 100 + i);
    nvshmem_barrier_all();

    nvshmem_float_put_signal_nbi(buf, src, 64, sig, 1, NVSHMEM_SIGNAL_ADD, right);
    nvshmem_quiet();
    nvshmem_signal_wait_until(sig, NVSHMEM_CMP_EQ, 1);
    for (int i = 0; i < 64; i++) CHECK(buf[i] == (float)(left * 100 + i), "put_signal data");
    CHECK(nvshmem_signal_fetch(sig) == 1, "signal_fetch");
    nvshmem_barrier_all();

    float got[64];
    nvshmem_float_get(got, buf, 64, right);
    CHECK(got[63] == (float)(me * 100 + 63), "float_get");
    nvshmem_getmem(got, buf, 2 * sizeof(float), left);
    CHECK(got[1] == (float)(((left + n - 1) % n) * 100 + 1), "getmem");
    nvshmem_barrier_all();
    nvshmem_int_p((int *)buf, me, right);
    nvshmem_fence();
    nvshmem_barrier_all();
    CHECK(nvshmem_int_g((int *)buf, me) == left, "int_p/int_g");

    long *ctr = (long *)nvshmem_calloc(1, sizeof(long));
    nvshmem_long_atomic_add(ctr, 1, 0);
    nvshmem_barrier_all();
    CHECK(nvshmem_long_atomic_fetch(ctr, 0) == n, "atomic_add");

    long *red = (long *)nvshmem_malloc(2 * sizeof(long));
    red[0] = me;
    red[1] = 1;
    nvshmem_barrier_all();
    CHECK(nvshmem_long_sum_reduce(NVSHMEM_TEAM_WORLD, red, red, 2) == 0, "sum_reduce");
    CHECK(red[0] == (long)n * (n - 1) / 2 && red[1] == n, "sum_reduce values");
    CHECK(nvshmem_team_n_pes(NVSHMEM_TEAM_WORLD) == n, "team_n_pes");
    CHECK(nvshmem_barrier(NVSHMEM_TEAM_WORLD) == 0, "barrier(team)");

    nvshmem_free(red);
    nvshmem_free(ctr);
    nvshmem_free(sig);
    nvshmem_free(buf);
    printf("PE %d: nvshmem ok\n", me);
    fflush(stdout);
    nvshmem_finalize();
    return 0;
}
