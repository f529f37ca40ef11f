/* shmemx.h: where OpenSHMEM implementations put their extensions. symmem has none beyond
 * shmem.h; programs and test suites that include this header get shmem.h. */
#ifndef SYMMEM_SHMEMX_H
#define SYMMEM_SHMEMX_H
#include <shmem.h>
#endif
