/* shmem_align (OpenSHMEM 1.5 section 9.3.1) the way Sandia OpenSHMEM's shmemalign unit
 * test uses it: every power of two from 8 bytes to 8 MiB, here on to symmem's limit
 * (16 MiB, symmem::MAX_ALIGN). The returned address and every same-node peer's shmem_ptr
 * to it are multiples of the alignment on every PE, and the block is usable to its last
 * word. Above the limit every PE gets NULL, and the library stays usable; so it does
 * after one PE asks for 0 bytes where the others ask for 64. */
#include <stdint.h>
#include "check.h"

#define MAX_ALIGN ((size_t)16 << 20)

int main(void) {
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    size_t words = 257;
    for (size_t align = 8; align <= MAX_ALIGN; align <<= 1, words += 31) {
        /* A small block first, so the aligned one does not start where free space does. */
        long *pad = shmem_malloc(sizeof(long));
        CHECK(pad != NULL, "shmem_malloc(8) returned NULL");
        long *t = shmem_align(align, words * sizeof(long));
        CHECK(t != NULL, "shmem_align(%zu, %zu) returned NULL", align, words * sizeof(long));
        CHECK(((uintptr_t)t & (align - 1)) == 0, "shmem_align(%zu) returned %p", align,
              (void *)t);
        for (int pe = 0; pe < n; pe++) {
            long *p = shmem_ptr(t, pe);
            CHECK(p == NULL || ((uintptr_t)p & (align - 1)) == 0,
                  "shmem_ptr to PE %d's shmem_align(%zu) block is %p", pe, align, (void *)p);
        }
        long value = (long)(me * 1000003) ^ (long)align;
        shmem_long_p(&t[words - 1], value, (me + 1) % n);
        shmem_barrier_all();
        long want = (long)(((me + n - 1) % n) * 1000003) ^ (long)align;
        CHECK(t[words - 1] == want, "last word of shmem_align(%zu) is %ld, expected %ld", align,
              t[words - 1], want);
        shmem_free(t);
        shmem_free(pad);
    }

    /* Above the limit (and not a power of two): NULL on every PE, nobody left waiting. */
    CHECK(shmem_align(2 * MAX_ALIGN, 64) == NULL, "shmem_align(%zu) did not return NULL",
          2 * MAX_ALIGN);
    CHECK(shmem_align((size_t)1 << 30, 64) == NULL, "shmem_align(1 GiB) did not return NULL");
    CHECK(shmem_align((size_t)3 << 20, 64) == NULL, "shmem_align(3 MiB) did not return NULL");
    long *again = shmem_align(MAX_ALIGN, 64);
    CHECK(again != NULL && ((uintptr_t)again & (MAX_ALIGN - 1)) == 0,
          "shmem_align(%zu) after the failures returned %p", MAX_ALIGN, (void *)again);
    shmem_free(again);

    /* A size of 0 on one PE only: NULL on every PE (the calls are compared), nobody left
     * waiting, and the next allocation works everywhere. */
    long *mixed = shmem_malloc(me == n - 1 ? 0 : 64);
    CHECK(mixed == NULL, "shmem_malloc(%d) beside another PE's shmem_malloc(%d) returned %p",
          me == n - 1 ? 0 : 64, me == n - 1 ? 64 : 0, (void *)mixed);
    CHECK(shmem_malloc(0) == NULL, "shmem_malloc(0) on every PE returned non-NULL");
    long *after = shmem_malloc(64);
    CHECK(after != NULL, "shmem_malloc(64) after a mismatched size returned NULL");
    shmem_free(after);
    ok("align");
    shmem_finalize();
    return 0;
}
