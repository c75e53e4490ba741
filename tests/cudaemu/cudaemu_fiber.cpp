/* cudaemu_fiber.cpp — fiber stacks and context switches for the CUDA emulator.
 *
 * One pool of 1024 stacks (DDP_CUDA_EMU_STACK_KIB each, default 64) is mapped once with a
 * PROT_NONE guard page below every stack; a SIGSEGV on a guard page is reported as a fiber stack
 * overflow naming the kernel; any other SIGSEGV is offered to the device memory report
 * (cudart_memory.cpp), then goes to the previous handler. Must not know about blocks, barriers
 * or CUDA; that is cudaemu_sched.cpp. */
#include "cudaemu_fiber.h"
#include "cudaemu_internal.h"

#include <mutex>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

namespace ddp_cudaemu {

enum { POOL_STACKS = 1024 };

static char *pool_base;
static size_t pool_bytes, stack_bytes, page_bytes;
static const char *overflow_kernel_name = "?";
static struct sigaction previous_segv;

static void on_segv(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    char *addr = static_cast<char *>(info->si_addr);
    size_t slot = page_bytes + stack_bytes;
    if (pool_base && addr >= pool_base && addr < pool_base + pool_bytes &&
        (size_t)(addr - pool_base) % slot < page_bytes) {
        char msg[512];
        int n = snprintf(msg, sizeof msg,
                         "cudaemu: fiber stack overflow in kernel %s: a thread used more than %zu KiB "
                         "of stack; set DDP_CUDA_EMU_STACK_KIB higher or move big per-thread arrays "
                         "to shared or global memory\n",
                         overflow_kernel_name, stack_bytes / 1024);
        if (n > 0 && write(2, msg, (size_t)n) < 0)
            abort();
        abort();
    }
    report_device_memory_fault(addr); /* returns only when addr is not near device memory */
    /* not ours: restore the previous disposition and let the fault happen again */
    sigaction(sig, &previous_segv, nullptr);
}

/* Libraries initialised later (MPI transports, for one) may install their own SIGSEGV handler:
 * ours goes back in front, and theirs becomes the one a foreign fault is passed on to. */
void install_fault_report()
{
    static std::once_flag once;
    std::call_once(once, [] {
        static char alt_stack[64 * 1024];
        stack_t ss;
        memset(&ss, 0, sizeof ss);
        ss.ss_sp = alt_stack;
        ss.ss_size = sizeof alt_stack;
        sigaltstack(&ss, nullptr);
    });
    struct sigaction current;
    if (sigaction(SIGSEGV, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == on_segv)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
}

void fiber_pool(const char **lo, size_t *bytes)
{
    *lo = pool_base;
    *bytes = pool_bytes;
}

size_t fiber_stacks_reserve(int count, const char *kernel_name)
{
    overflow_kernel_name = kernel_name;
    if (count > POOL_STACKS) {
        fprintf(stderr, "cudaemu: %d fibers requested, the pool holds %d\n", count, POOL_STACKS);
        abort();
    }
    if (pool_base)
        return stack_bytes;
    page_bytes = (size_t)sysconf(_SC_PAGESIZE);
    size_t kib = 64;
    if (const char *env = getenv("DDP_CUDA_EMU_STACK_KIB")) {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end != '\0' || v < 16 || v > 65536) {
            fprintf(stderr, "cudaemu: DDP_CUDA_EMU_STACK_KIB=%s: expected KiB between 16 and 65536\n", env);
            abort();
        }
        kib = (size_t)v;
    }
    stack_bytes = (kib * 1024 + page_bytes - 1) / page_bytes * page_bytes;
    pool_bytes = POOL_STACKS * (page_bytes + stack_bytes);
    void *p = mmap(nullptr, pool_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        perror("cudaemu: mmap of fiber stacks");
        abort();
    }
    pool_base = static_cast<char *>(p);
    for (int i = 0; i < POOL_STACKS; i++)
        if (mprotect(pool_base + (size_t)i * (page_bytes + stack_bytes), page_bytes, PROT_NONE) != 0) {
            perror("cudaemu: mprotect of a stack guard page");
            abort();
        }
    install_fault_report();
    return stack_bytes;
}

static char *stack_top(int index)
{
    return pool_base + (size_t)index * (page_bytes + stack_bytes) + page_bytes + stack_bytes;
}

#ifdef DDP_CUDAEMU_USE_UCONTEXT

static void ucontext_start(unsigned hi_entry, unsigned lo_entry, unsigned hi_arg, unsigned lo_arg)
{
    fiber_entry entry = reinterpret_cast<fiber_entry>(((uintptr_t)hi_entry << 32) | lo_entry);
    entry(reinterpret_cast<void *>(((uintptr_t)hi_arg << 32) | lo_arg));
    abort(); /* entries end by switching away */
}

void fiber_prepare(fiber_context *fc, int index, fiber_entry entry, void *arg)
{
    getcontext(&fc->uc);
    fc->uc.uc_stack.ss_sp = stack_top(index) - stack_bytes;
    fc->uc.uc_stack.ss_size = stack_bytes;
    fc->uc.uc_link = nullptr;
    uintptr_t e = reinterpret_cast<uintptr_t>(entry), a = reinterpret_cast<uintptr_t>(arg);
    makecontext(&fc->uc, reinterpret_cast<void (*)()>(ucontext_start), 4, (unsigned)(e >> 32),
                (unsigned)e, (unsigned)(a >> 32), (unsigned)a);
}

void fiber_switch(fiber_context *from, fiber_context *to)
{
    swapcontext(&from->uc, &to->uc);
}

#else /* x86-64: save the callee-saved registers, MXCSR and the x87 control word; swap stacks */

extern "C" void ddp_cudaemu_switch_sp(void **save_sp, void *new_sp);
extern "C" void ddp_cudaemu_fiber_start();
asm(R"(
    .text
    .p2align 4
    .globl ddp_cudaemu_switch_sp
    .hidden ddp_cudaemu_switch_sp
    .type ddp_cudaemu_switch_sp,@function
ddp_cudaemu_switch_sp:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size ddp_cudaemu_switch_sp,.-ddp_cudaemu_switch_sp

    .p2align 4
    .globl ddp_cudaemu_fiber_start
    .hidden ddp_cudaemu_fiber_start
    .type ddp_cudaemu_fiber_start,@function
ddp_cudaemu_fiber_start:
    movq %r12, %rdi
    andq $-16, %rsp
    call *%r13
    ud2
    .size ddp_cudaemu_fiber_start,.-ddp_cudaemu_fiber_start
)");

void fiber_prepare(fiber_context *fc, int index, fiber_entry entry, void *arg)
{
    /* the frame ddp_cudaemu_switch_sp pops: control words, r15, r14, r13, r12, rbx, rbp, return */
    uint64_t *sp = reinterpret_cast<uint64_t *>(stack_top(index)) - 8;
    uint32_t control[2] = {0, 0};
    asm volatile("stmxcsr %0" : "=m"(control[0]));
    asm volatile("fnstcw %0" : "=m"(control[1]));
    memcpy(&sp[0], control, sizeof control);
    sp[1] = 0;                                     /* r15 */
    sp[2] = 0;                                     /* r14 */
    sp[3] = reinterpret_cast<uintptr_t>(entry);    /* r13 */
    sp[4] = reinterpret_cast<uintptr_t>(arg);      /* r12 */
    sp[5] = 0;                                     /* rbx */
    sp[6] = 0;                                     /* rbp */
    sp[7] = reinterpret_cast<uintptr_t>(&ddp_cudaemu_fiber_start);
    fc->sp = sp;
}

void fiber_switch(fiber_context *from, fiber_context *to)
{
    ddp_cudaemu_switch_sp(&from->sp, to->sp);
}

#endif

} /* namespace ddp_cudaemu */
