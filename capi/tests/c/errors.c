/* The C error contract (shmem.h): a put to a PE that does not exist, or to an address
 * that is not symmetric, ends the job with an error naming the routine, the PE and the
 * address; a failed allocation returns NULL and the job goes on. The driver checks the
 * log. argv[1] picks the case: "pe" or "address". */
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
    shmem_init();
    CHECK(argc == 2, "usage: errors pe|address");
    long *x = shmem_malloc(sizeof(long));
    long v = 1, on_stack = 0;
    shmem_barrier_all();
    if (shmem_my_pe() == 0) {
        printf("PE 0: errors reached the bad put\n");
        fflush(stdout);
        if (strcmp(argv[1], "pe") == 0)
            shmem_long_put(x, &v, 1, 7);
        else
            shmem_long_put(&on_stack, &v, 1, 1);
        printf("PE 0: the bad put returned\n");
    }
    shmem_barrier_all();
    shmem_finalize();
    return 0;
}
