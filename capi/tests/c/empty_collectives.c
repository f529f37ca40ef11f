/* Collectives of no elements. Called alike on every PE with NULL buffers (OpenSHMEM lets
 * a pointer be anything when nelems is 0), each returns 0. Called with 0 on PE 0 where
 * the others pass 1 (a mismatch), PE 0 still takes part in the same call as the others:
 * under SYMMEM_CHECK_COLLECTIVES=1 every PE's call returns nonzero for the collectives
 * the runtime checks; for those built here from barriers (alltoalls, the 1- and 2-byte
 * reductions) nothing can see the mismatch, but every PE still leaves it with the
 * others. After each, a broadcast must move its data on every PE: a PE out of step with
 * the others' barriers would pair that broadcast with another call, or hang. */
#include <stdlib.h>
#include <string.h>
#include "check.h"

static int me, n;
static long *src, *dst;

/* Every PE's broadcast of a value that names the round, from the last PE. */
static void in_step(int round) {
    src[0] = 1000L * round + (n - 1);
    dst[0] = -1;
    shmem_barrier_all();
    CHECK(shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, 1, n - 1) == 0,
          "broadcast after round %d", round);
    CHECK(dst[0] == 1000L * round + (n - 1), "round %d: broadcast gave %ld", round, dst[0]);
    shmem_barrier_all();
}

int main(void) {
    shmem_init();
    me = shmem_my_pe();
    n = shmem_n_pes();
    src = shmem_malloc(4 * n * sizeof(long));
    dst = shmem_malloc(4 * n * sizeof(long));
    CHECK(src && dst, "malloc failed");
    shmem_team_t w = SHMEM_TEAM_WORLD;

    /* Alike on every PE, NULL buffers. */
    CHECK(shmem_long_broadcast(w, NULL, NULL, 0, 0) == 0, "broadcast of 0");
    CHECK(shmem_long_fcollect(w, NULL, NULL, 0) == 0, "fcollect of 0");
    CHECK(shmem_long_collect(w, NULL, NULL, 0) == 0, "collect of 0");
    CHECK(shmem_long_alltoall(w, NULL, NULL, 0) == 0, "alltoall of 0");
    CHECK(shmem_long_alltoalls(w, NULL, NULL, 1, 1, 0) == 0, "alltoalls of 0");
    CHECK(shmem_long_sum_reduce(w, NULL, NULL, 0) == 0, "sum_reduce of 0");
    CHECK(shmem_short_max_reduce(w, NULL, NULL, 0) == 0, "short max_reduce of 0");
    CHECK(shmem_broadcastmem(w, NULL, NULL, 0, 0) == 0, "broadcastmem of 0");
    in_step(1);

    if (n > 1 && getenv("SYMMEM_CHECK_COLLECTIVES") != NULL) {
        /* PE 0 passes 0, the others 1: every PE is told. */
        size_t k = me == 0 ? 0 : 1;
        CHECK(shmem_long_broadcast(w, dst, src, k, 1) != 0, "mismatched broadcast returned 0");
        in_step(2);
        CHECK(shmem_long_fcollect(w, dst, src, k) != 0, "mismatched fcollect returned 0");
        in_step(3);
        CHECK(shmem_long_alltoall(w, dst, src, k) != 0, "mismatched alltoall returned 0");
        in_step(4);
        CHECK(shmem_long_sum_reduce(w, dst, src, k) != 0, "mismatched sum_reduce returned 0");
        in_step(5);
        /* Built from barriers: no verdict, but nobody is left out of step. */
        CHECK(shmem_long_alltoalls(w, dst, src, 1, 1, k) == 0, "alltoalls");
        in_step(6);
        short *s = (short *)src, *d = (short *)dst;
        s[0] = 1;
        shmem_barrier_all();
        CHECK(shmem_short_sum_reduce(w, d, s, k) == 0, "short sum_reduce");
        in_step(7);
    }
    shmem_free(dst);
    shmem_free(src);
    ok("empty_collectives");
    shmem_finalize();
    return 0;
}
