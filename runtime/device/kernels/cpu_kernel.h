/* cpu_kernel.h — what every op family's CPU code (FAMILY_cpu.c) includes, first: the backend
 * function declarations (backend.h) and the one way a CPU op loops over elements in parallel.
 *
 * Element-wise loops run on OpenMP threads when large enough to pay for the fork: the GEMM
 * library's worker threads would otherwise spin idle (on this project's 2-vCPU machines, on the
 * hyperthread sibling of the one doing the work). A loop marked DDP_PARALLEL_FOR must compute
 * every element independently, so results do not depend on the thread count; reductions stay
 * serial, in a fixed order. This header must not grow op code. */
#ifndef DDP_CPU_KERNEL_H
#define DDP_CPU_KERNEL_H

#include "runtime/device/backend.h"

#define DDP_OMP_MIN_ELEMENTS 32768
#define DDP_PRAGMA(x) _Pragma(#x)
#define DDP_PARALLEL_FOR(n) DDP_PRAGMA(omp parallel for schedule(static) if ((size_t)(n) >= DDP_OMP_MIN_ELEMENTS))

#endif
