/* Shared by the C test suite: CHECK fails the job with the line, ok() prints the line
 * the driver (capi/tests/c_suite.rs) looks for on every PE. */
#ifndef CHECK_H
#define CHECK_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <shmem.h>

/* The standard RMA types of OpenSHMEM 1.5 Table 5: X(TYPE, TYPENAME). */
#define TEST_RMA_TYPES(X) \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) \
    X(long long, longlong) X(unsigned char, uchar) X(unsigned short, ushort) \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
    X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) \
    X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) \
    X(size_t, size) X(ptrdiff_t, ptrdiff)

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
