/* mpi_thread.h — the MPI thread level every ddprun process asks for at MPI_Init_thread.
 *
 * FUNNELED: only the main thread calls MPI (the NCCL watchdog and the signal thread make no MPI
 * calls). The emulated build's NCCL runs its collectives over MPI, and a GPU finishes them while
 * its host is elsewhere, possibly inside MPI itself: the CUDA emulator's progress thread does
 * that work, so that build asks for MULTIPLE. */
#ifndef DDP_MPI_THREAD_H
#define DDP_MPI_THREAD_H

#include <mpi.h>

#ifdef DDP_CUDA_EMULATION
#define DDP_MPI_THREAD_LEVEL MPI_THREAD_MULTIPLE
#else
#define DDP_MPI_THREAD_LEVEL MPI_THREAD_FUNNELED
#endif

#endif
