/* The C install test's program (scripts/test-c-install.sh), built against an installed
 * symmem as a user would: every PE puts its number into its right neighbour's symmetric
 * variable, a barrier, and every PE checks what its left neighbour put. It includes every
 * installed header. */
#include <stdio.h>
#include <shmem.h>
#include <shmemx.h>
#include <mpp/shmem.h>
#include <nvshmem.h>

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long *slot = shmem_malloc(sizeof *slot);
    if (!slot) {
        fprintf(stderr, "PE %d: shmem_malloc failed\n", me);
        shmem_global_exit(1);
    }
    *slot = -1;
    long mine = me;
    shmem_barrier_all();
    shmem_long_put(slot, &mine, 1, (me + 1) % n);
    shmem_barrier_all();
    long want = (me + n - 1) % n;
    if (*slot != want) {
        fprintf(stderr, "PE %d: got %ld from the left neighbour, expected %ld\n", me, *slot, want);
        shmem_global_exit(1);
    }
    printf("PE %d of %d: ring ok\n", me, n);
    shmem_free(slot);
    shmem_finalize();
    return 0;
}
