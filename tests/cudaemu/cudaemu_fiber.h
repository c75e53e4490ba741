/* cudaemu_fiber.h — user-space fibers for the emulator's CUDA threads.
 *
 * Owns the fiber stacks (one pool, guard pages below every stack, a SIGSEGV report that names
 * the overflowing kernel) and the context switch: a small x86-64 switch of the callee-saved
 * registers, or ucontext elsewhere and under AddressSanitizer. It knows nothing about CUDA
 * semantics; scheduling lives in cudaemu_sched.cpp. */
#ifndef DDP_CUDAEMU_FIBER_H
#define DDP_CUDAEMU_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__) || defined(__SANITIZE_ADDRESS__) || defined(DDP_CUDAEMU_UCONTEXT)
#define DDP_CUDAEMU_USE_UCONTEXT 1
#include <ucontext.h>
#endif

namespace ddp_cudaemu {

typedef void (*fiber_entry)(void *arg);

struct fiber_context {
#ifdef DDP_CUDAEMU_USE_UCONTEXT
    ucontext_t uc;
#else
    void *sp;
#endif
};

/* Makes sure `count` stacks exist (grown once, reused by every launch); returns the stack size.
 * `kernel_name` is what a stack overflow report names. Aborts with a message if memory runs out. */
size_t fiber_stacks_reserve(int count, const char *kernel_name);
/* Prepares fiber `index` (< reserved count) to start entry(arg) on its own stack when switched to. */
void fiber_prepare(fiber_context *fc, int index, fiber_entry entry, void *arg);
/* Where the pool of stacks lies (NULL and 0 before the first reserve). */
void fiber_pool(const char **lo, size_t *bytes);
/* Saves the running context into `from` and resumes `to`. */
void fiber_switch(fiber_context *from, fiber_context *to);

} /* namespace ddp_cudaemu */

#endif
