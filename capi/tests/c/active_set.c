/* OpenSHMEM 1.5 deprecated active-set collectives: shmem_barrier, shmem_sync,
 * shmem_broadcast32/64, shmem_(f)collect32/64, shmem_alltoall(s)32/64, _to_all, on the
 * whole job and on the even PEs (logPE_stride 1), pSync reused across calls. */
#include "check.h"

static long pSync[SHMEM_BCAST_SYNC_SIZE];
static long pWrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static int64_t src[64], dst[256];
static int32_t src32[64], dst32[256];
static long lsrc[4], ldst[4];
static double dsrc[4], ddst[4];

static void run_on(int start, int log, int size) {
    int me = shmem_my_pe(), stride = 1 << log;
    int idx = (me - start) / stride;
    for (int i = 0; i < 64; i++) {
        src[i] = idx * 1000 + i;
        src32[i] = idx * 1000 + i;
    }
    for (int i = 0; i < 256; i++) {
        dst[i] = -1;
        dst32[i] = -1;
    }
    shmem_barrier(start, log, size, pSync);
    for (int root = 0; root < size; root++) {
        shmem_broadcast64(dst, src, 5, root, start, log, size, pSync);
        if (idx != root)
            for (int i = 0; i < 5; i++) CHECK(dst[i] == root * 1000 + i, "broadcast64 [%d]", i);
        shmem_broadcast32(dst32, src32, 3, root, start, log, size, pSync);
        if (idx != root) CHECK(dst32[2] == root * 1000 + 2, "broadcast32");
    }
    shmem_fcollect64(dst, src, 4, start, log, size, pSync);
    for (int p = 0; p < size; p++)
        for (int i = 0; i < 4; i++) CHECK(dst[p * 4 + i] == p * 1000 + i, "fcollect64");
    shmem_collect32(dst32, src32, (size_t)(idx + 1), start, log, size, pSync);
    int at = 0;
    for (int p = 0; p < size; p++)
        for (int i = 0; i <= p; i++, at++) CHECK(dst32[at] == p * 1000 + i, "collect32 [%d]", at);
    shmem_alltoall64(dst, src, 2, start, log, size, pSync);
    for (int p = 0; p < size; p++)
        CHECK(dst[p * 2 + 1] == p * 1000 + idx * 2 + 1, "alltoall64 [%d]", p);
    shmem_alltoalls32(dst32, src32, 1, 2, 1, start, log, size, pSync);
    for (int p = 0; p < size; p++) CHECK(dst32[p] == p * 1000 + 2 * idx, "alltoalls32 [%d]", p);

    lsrc[0] = idx + 1;
    lsrc[1] = 1L << idx;
    dsrc[0] = idx + 0.5;
    shmem_long_sum_to_all(ldst, lsrc, 2, start, log, size, pWrk, pSync);
    CHECK(ldst[0] == (long)size * (size + 1) / 2, "long_sum_to_all %ld", ldst[0]);
    shmem_long_or_to_all(ldst, lsrc + 1, 1, start, log, size, pWrk, pSync);
    CHECK(ldst[0] == (1L << size) - 1, "long_or_to_all");
    shmem_double_max_to_all(ddst, dsrc, 1, start, log, size, (double *)pWrk, pSync);
    CHECK(ddst[0] == size - 0.5, "double_max_to_all");
    shmem_long_prod_to_all(lsrc, lsrc, 1, start, log, size, pWrk, pSync); /* in place */
    long fact = 1;
    for (int p = 1; p <= size; p++) fact *= p;
    CHECK(lsrc[0] == fact, "long_prod_to_all in place: %ld", lsrc[0]);
    shmem_sync(start, log, size, pSync);
    for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) CHECK(pSync[i] == SHMEM_SYNC_VALUE, "pSync");
}

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    for (int i = 0; i < SHMEM_BCAST_SYNC_SIZE; i++) pSync[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    run_on(0, 0, n);
    shmem_barrier_all();
    if (me % 2 == 0) run_on(0, 1, (n + 1) / 2);
    shmem_barrier_all();
    ok("active_set");
    shmem_finalize();
    return 0;
}
