/* Shared by the C test suite: CHECK fails the job with the line, ok() prints the line
 * the driver (capi/tests/c_suite.rs) looks for on every PE. */
#ifndef CHECK_H
#define CHECK_H
#include <stdio.h>
#include <shmem.h>

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "PE %d: %s:%d: check failed: %s: ", shmem_my_pe(),   \
                    __FILE__, __LINE__, #cond);                                  \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            shmem_global_exit(1);                                                \
        }                                                                        \
    } while (0)

static inline void ok(const char *what) {
    printf("PE %d: %s ok\n", shmem_my_pe(), what);
    fflush(stdout);
}
#endif
