/* The C error contract (shmem.h): a put to a PE that does not exist ends the job with
 * an error naming the routine, the PE and the address. The driver checks the log. */
#include "check.h"

int main(void) {
    shmem_init();
    long *x = shmem_malloc(sizeof(long));
    long v = 1;
    shmem_barrier_all();
    if (shmem_my_pe() == 0) {
        printf("PE 0: errors reached the bad put\n");
        fflush(stdout);
        shmem_long_put(x, &v, 1, 7);
        printf("PE 0: the bad put returned\n");
    }
    shmem_barrier_all();
    shmem_finalize();
    return 0;
}
