/* OpenSHMEM 1.5 sections 9.2 and 9.3: setup, queries, memory management. */
#include <stdint.h>
#include <string.h>
#include "check.h"

int main(void) {
    int provided = -1;
    CHECK(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided) == 0, "init_thread failed");
    CHECK(provided >= SHMEM_THREAD_SINGLE && provided <= SHMEM_THREAD_MULTIPLE,
          "provided = %d", provided);
    int queried = -1;
    shmem_query_thread(&queried);
    CHECK(queried == provided, "query_thread %d, init_thread %d", queried, provided);

    int me = shmem_my_pe(), n = shmem_n_pes();
    CHECK(n >= 1 && me >= 0 && me < n, "my_pe %d n_pes %d", me, n);
    int major = 0, minor = 0;
    shmem_info_get_version(&major, &minor);
    CHECK(major == SHMEM_MAJOR_VERSION && minor == SHMEM_MINOR_VERSION, "version %d.%d",
          major, minor);
    char name[SHMEM_MAX_NAME_LEN];
    memset(name, 'x', sizeof name);
    shmem_info_get_name(name);
    CHECK(memchr(name, '\0', sizeof name) != NULL, "name not terminated");
    CHECK(strcmp(name, SHMEM_VENDOR_STRING) == 0, "name %s is not SHMEM_VENDOR_STRING", name);

    for (int pe = 0; pe < n; pe++)
        CHECK(shmem_pe_accessible(pe) == 1, "PE %d not accessible", pe);
    CHECK(shmem_pe_accessible(n) == 0 && shmem_pe_accessible(-1) == 0, "bad PEs accessible");

    /* malloc: symmetric, usable, the same address on every PE relative to the heap. */
    long *a = shmem_malloc(100 * sizeof(long));
    CHECK(a != NULL, "malloc returned NULL");
    CHECK(shmem_addr_accessible(a, (me + 1) % n) == 1, "malloc'd memory not accessible");
    long local = 0;
    CHECK(shmem_addr_accessible(&local, 0) == 0, "a stack variable is accessible");
    CHECK(shmem_ptr(a, me) == (void *)a, "shmem_ptr to myself is not the address");
    for (int i = 0; i < 100; i++) a[i] = me * 1000 + i;
    shmem_barrier_all();
    /* Through shmem_ptr where the peer shares memory (SHMEM_TEAM_SHARED). */
    for (int t = 0; t < shmem_team_n_pes(SHMEM_TEAM_SHARED); t++) {
        int pe = shmem_team_translate_pe(SHMEM_TEAM_SHARED, t, SHMEM_TEAM_WORLD);
        long *p = shmem_ptr(a, pe);
        CHECK(p != NULL, "shmem_ptr to PE %d on my node is NULL", pe);
        CHECK(p[7] == pe * 1000 + 7, "PE %d's a[7] through shmem_ptr is %ld", pe, p[7]);
    }
    shmem_barrier_all();

    /* calloc is zeroed. */
    int *z = shmem_calloc(257, sizeof(int));
    CHECK(z != NULL, "calloc returned NULL");
    for (int i = 0; i < 257; i++) CHECK(z[i] == 0, "calloc'd z[%d] = %d", i, z[i]);

    /* align. */
    void *al = shmem_align(4096, 100);
    CHECK(al != NULL && ((uintptr_t)al % 4096) == 0, "align(4096) gave %p", al);

    /* realloc keeps the contents. */
    a = shmem_realloc(a, 1000 * sizeof(long));
    CHECK(a != NULL, "realloc returned NULL");
    for (int i = 0; i < 100; i++) CHECK(a[i] == me * 1000 + i, "a[%d] = %ld after realloc", i, a[i]);
    a[999] = 5;

    /* Zero sizes: NULL; freeing NULL does nothing. */
    CHECK(shmem_malloc(0) == NULL, "malloc(0) is not NULL");
    shmem_free(NULL);

    /* An impossible size: NULL, and the library is still usable. */
    void *huge = shmem_malloc((size_t)1 << 60);
    CHECK(huge == NULL, "malloc(2^60) succeeded");

    shmem_free(al);
    shmem_free(z);
    shmem_free(a);
    /* malloc after free reuses the heap. */
    double *d = shmem_malloc(10 * sizeof(double));
    CHECK(d != NULL, "malloc after free returned NULL");
    shmem_free(d);
    ok("setup");
    shmem_finalize();
    return 0;
}
