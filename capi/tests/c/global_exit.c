/* OpenSHMEM 1.5 section 9.2.5: shmem_global_exit(status) ends the job with status, also
 * for PEs blocked in a wait or a barrier at the time. argv[1] is the status. */
#include <stdlib.h>
#include "check.h"

static long never_set;

int main(int argc, char **argv) {
    shmem_init();
    CHECK(argc == 2, "usage: global_exit STATUS");
    int me = shmem_my_pe(), n = shmem_n_pes();
    shmem_barrier_all();
    if (me == n - 1) {
        printf("PE %d: calling shmem_global_exit(%s)\n", me, argv[1]);
        fflush(stdout);
        shmem_global_exit(atoi(argv[1]));
    }
    if (me % 2 == 0)
        shmem_long_wait_until(&never_set, SHMEM_CMP_NE, 0);
    else
        shmem_barrier_all();
    printf("PE %d: got past the wait\n", me);
    return 1;
}
