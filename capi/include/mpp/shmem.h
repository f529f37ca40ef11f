/* mpp/shmem.h: the header path of OpenSHMEM before 1.1 (SGI SHMEM), still used by older
 * programs and test suites; it is shmem.h. */
#ifndef SYMMEM_MPP_SHMEM_H
#define SYMMEM_MPP_SHMEM_H
#include <shmem.h>
#endif
