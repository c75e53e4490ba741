/* bench_gpu.c — what ddprun-bench says about this host's GPUs (builds with CUDA or its emulation):
 * each GPU's name and PCI bus id, the peer-to-peer matrix between them (an `nvidia-smi topo -m`
 * lite built from what the CUDA runtime API tells), and the CUDA driver, runtime and NCCL
 * versions. The runtime API has no "link type": a pair with peer access *and* native atomics is
 * shown as NV (atomics over P2P need NVLink/NVSwitch), peer access without them as PCI, no peer
 * access as SYS (traffic bounces through host memory); the number is the runtime's relative
 * performance rank. Query failures are printed in place of the value, never fatal.
 * It must not open devices or communicators, and makes no MPI calls. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench_report.h"

#ifdef DDP_CUDA_EMULATION
#define RUNTIME_KIND "; CUDA-on-CPU emulation"
#else
#define RUNTIME_KIND ""
#endif

typedef struct text {
    char *buf;
    size_t len, used;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...)
{
    if (t->used >= t->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->used, t->len - t->used, fmt, ap);
    va_end(ap);
    t->used = n < 0 ? t->len : t->used + (size_t)n;
}

static void cuda_version(char *out, size_t len, cudaError_t (*get)(int *))
{
    int v = 0;
    cudaError_t e = get(&v);
    if (e != cudaSuccess)
        snprintf(out, len, "? (%s)", cudaGetErrorString(e));
    else if (v == 0)
        snprintf(out, len, "none");
    else
        snprintf(out, len, "%d.%d", v / 1000, v % 1000 / 10);
}

/* The matrix cell for src -> dst: X, NV<rank>, PCI<rank>, SYS, or ERR. */
static void p2p_cell(int src, int dst, char *out, size_t len)
{
    int can = 0, access = 0, atomics = 0, perf = 0;
    if (src == dst) {
        snprintf(out, len, "X");
        return;
    }
    if (cudaDeviceCanAccessPeer(&can, src, dst) != cudaSuccess ||
        cudaDeviceGetP2PAttribute(&access, cudaDevP2PAttrAccessSupported, src, dst) != cudaSuccess ||
        cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, src, dst) != cudaSuccess ||
        cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank, src, dst) != cudaSuccess) {
        cudaGetLastError(); /* the query's error is reported as the cell, not left for later calls */
        snprintf(out, len, "ERR");
    } else if (!can || !access)
        snprintf(out, len, "SYS");
    else
        snprintf(out, len, "%s%d", atomics ? "NV" : "PCI", perf);
}

static void describe_p2p(text *t, int n)
{
    put(t, "#    P2P    ");
    for (int j = 0; j < n; j++) {
        char name[16];
        snprintf(name, sizeof name, "GPU%d", j);
        put(t, " %8s", name);
    }
    put(t, "\n");
    for (int i = 0; i < n; i++) {
        put(t, "#    GPU%-3d ", i);
        for (int j = 0; j < n; j++) {
            char cell[16];
            p2p_cell(i, j, cell, sizeof cell);
            put(t, " %8s", cell);
        }
        put(t, "\n");
    }
    put(t, "#    Legend: X self; NV<r> peer access with native atomics (NVLink-class); PCI<r> peer access "
           "without them (PCIe); SYS no peer access (through host memory); <r> CUDA's relative performance rank\n");
}

int bench_gpu_describe(char *out, size_t len)
{
    text t = {out, len, 0};
    out[0] = 0;
    char reason[256] = "";
    int n = device_cuda_count(reason, sizeof reason);
    cudaGetLastError(); /* a machine without a driver leaves its error behind */
    if (n == 0) {
        put(&t, "no CUDA devices (%s)", reason);
        return 0;
    }
    char driver[64], runtime[64];
    int nccl = 0;
    cuda_version(driver, sizeof driver, cudaDriverGetVersion);
    cuda_version(runtime, sizeof runtime, cudaRuntimeGetVersion);
    ncclResult_t nrc = ncclGetVersion(&nccl);
    put(&t, "%d (CUDA driver %s, runtime %s; NCCL ", n, driver, runtime);
    if (nrc == ncclSuccess)
        put(&t, "%d.%d.%d" RUNTIME_KIND ")\n", nccl / 10000, nccl / 100 % 100, nccl % 100);
    else
        put(&t, "? (%s)" RUNTIME_KIND ")\n", ncclGetErrorString(nrc));
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        cudaError_t e = cudaGetDeviceProperties(&p, i);
        char bus[32];
        device_cuda_bus_id(i, bus, sizeof bus);
        put(&t, "#    GPU%-3d  %s  %s\n", i, bus[0] ? bus : "?", e == cudaSuccess ? p.name : cudaGetErrorString(e));
    }
    describe_p2p(&t, n);
    if (t.used && t.used <= t.len && out[t.used - 1] == '\n')
        out[t.used - 1] = 0;
    return n;
}

void bench_gpu_label(const device *dev, char *out, size_t len)
{
    char bus[32];
    device_cuda_bus_id(dev->index, bus, sizeof bus);
    snprintf(out, len, "cuda:%d [%s] %s", dev->index, bus[0] ? bus : "?", dev->name);
}
