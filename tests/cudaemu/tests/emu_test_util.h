/* emu_test_util.h — helpers shared by the CUDA emulation tests: capture what a call prints on
 * stderr (in this process, or in a forked child that is expected to abort), the fiber orders every
 * kernel test runs under, and, for the drivers also built to run on a GPU, the check that it is an
 * sm_90 one. Header-only, test code only. */
#ifndef DDP_EMU_TEST_UTIL_H
#define DDP_EMU_TEST_UTIL_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const emu_orders[] = {"forward", "reverse", "random:1", "random:2", "random:3"};
#define EMU_ORDER_COUNT ((int)(sizeof emu_orders / sizeof emu_orders[0]))

static inline void emu_set_order(const char *order) { setenv("DDP_CUDA_EMU_ORDER", order, 1); }

/* Redirects stderr into a temporary file until emu_capture_end copies it into buf. */
static int emu_saved_stderr = -1;
static FILE *emu_capture_file;
static inline void emu_capture_begin(void)
{
    fflush(stderr);
    emu_capture_file = tmpfile();
    emu_saved_stderr = dup(2);
    dup2(fileno(emu_capture_file), 2);
}
static inline void emu_capture_end(char *buf, size_t cap)
{
    fflush(stderr);
    dup2(emu_saved_stderr, 2);
    close(emu_saved_stderr);
    rewind(emu_capture_file);
    size_t n = fread(buf, 1, cap - 1, emu_capture_file);
    buf[n] = '\0';
    fclose(emu_capture_file);
    fputs(buf, stderr); /* keep it visible in the test log */
}

/* Runs fn(arg) in a child process; returns its wait status and what it wrote on stderr. */
static inline int emu_run_in_child(void (*fn)(int), int arg, char *buf, size_t cap)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    size_t used = 0;
    ssize_t got;
    while (used + 1 < cap && (got = read(pipefd[0], buf + used, cap - 1 - used)) > 0)
        used += (size_t)got;
    buf[used] = '\0';
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    fprintf(stderr, "[child stderr] %s", buf);
    return status;
}

/* Whether device 0 is an sm_90 GPU; if not, says the test `name` is skipped (meson's exit 77). */
static inline int emu_have_sm90(const char *name)
{
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess && major == 9)
        return 1;
    fprintf(stderr, "%s: no sm_90 device (compute capability %d.x): skipped\n", name, major);
    return 0;
}

#endif
