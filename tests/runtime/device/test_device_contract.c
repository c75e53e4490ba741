/* test_device_contract.c — the device ops' argument contract (device.c's checking table, whose
 * entries are runtime/device/device_check_*.c) holds on every backend: each bad argument in
 * device_bad_calls.c's table is rejected with exactly its message and DDP_ERUNTIME, and the CUDA
 * backend's message is byte for byte the CPU backend's; each empty job (n == 0, an empty matrix)
 * succeeds without touching its NULL pointers, and so do the embeddings without a position table
 * (wpe, dwpe NULL), while their token table stays required. The backends check no arguments
 * themselves, so identical messages show the check ran in front of both.
 *
 * In the emulated build, an upload larger than every earlier one makes no CUDA call that blocks
 * the host beyond its staging slot's wait: the pinned staging was made whole with the device; and
 * a free that CUDA refuses is said once on stderr, naming the call and CUDA's error, while the op
 * after it still succeeds (the error is not left for that op's launch check to report).
 *
 * Runs on the CPU backend always and on CUDA when a GPU (or, in the emulated build, the
 * emulator) answers; `--require-cuda` makes a missing CUDA device a failure. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_bad_calls.h"
#include "runtime/device/device.h"
#include "tests/check.h"
#ifdef DDP_TEST_CUDAEMU
#include "tests/cudaemu/cudaemu.h"
#endif


/* Empty jobs: nothing is read or written, so NULL pointers are fine, on every backend. */
static void empty_jobs(device *d, const char *backend)
{
    ddp_err err = {0};
    double out = -1.0;
    int rc = d->ops->fill(d, TENSOR_F32, NULL, 0, 1.0f, &err);
    rc |= d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 0, 3, 2, 1.0f, NULL, 2, NULL, 3, 0.0f, NULL, 3, &err);
    rc |= d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 3, 0, 2, 1.0f, NULL, 2, NULL, 1, 0.0f, NULL, 1, &err);
    rc |= d->ops->bias_add(d, TENSOR_F32, NULL, NULL, 0, 5, &err);
    rc |= d->ops->bias_grad(d, TENSOR_F32, NULL, NULL, 4, 0, 1.0f, &err);
    rc |= d->ops->act_forward(d, TENSOR_F32, ACT_RELU, NULL, NULL, 0, &err);
    rc |= d->ops->softmax_xent(d, TENSOR_F32, NULL, 10, NULL, 0, 10, 1.0f, NULL, NULL, &err);
    rc |= d->ops->sgd_step(d, NULL, NULL, NULL, NULL, 0, &sgd_momentum, &err);
    rc |= d->ops->add(d, TENSOR_F32, NULL, NULL, NULL, 0, &err);
    rc |= d->ops->gemm_bias(d, TENSOR_F32, false, true, 0, 3, 2, NULL, 2, NULL, 2, NULL, NULL, &err);
    rc |= d->ops->gemm_bias_gelu(d, TENSOR_F32, false, true, 3, 0, 2, NULL, 2, NULL, 2, NULL, NULL, NULL, &err);
    rc |= d->ops->gemm_gelu_backward(d, TENSOR_F32, false, false, 0, 3, 2, NULL, 2, NULL, 3, NULL, NULL, &err);
    rc |= d->ops->embedding_backward(d, TENSOR_F32, NULL, NULL, NULL, NULL, NULL, NULL, 0, 4, 8, 5, &err);
    rc |= d->ops->layernorm_backward(d, TENSOR_F32, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, &err);
    rc |= d->ops->residual_layernorm_forward(d, TENSOR_F32, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 8, &err);
    const attn_shape no_rows = {.B = 2, .T = 0, .NH = 2, .NKV = 2, .hs = 4, .ld_q = 8, .ld_kv = 8, .ld_o = 8,
                                .scale = 0.5f};
    rc |= d->ops->attention_forward(d, TENSOR_F32, &no_rows, NULL, NULL, NULL, NULL, NULL, &err);
    rc |= d->ops->attention_backward(d, TENSOR_F32, &no_rows, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                     &err);
    rc |= d->ops->rmsnorm_forward(d, TENSOR_F32, NULL, NULL, NULL, NULL, 0, 8, 1e-5f, &err);
    rc |= d->ops->rmsnorm_backward(d, TENSOR_F32, NULL, NULL, NULL, NULL, NULL, NULL, 3, 0, &err);
    rc |= d->ops->rope_forward(d, TENSOR_F32, NULL, 8, 2, 0, 2, 4, NULL, NULL, NULL, &err);
    rc |= d->ops->swiglu_backward(d, TENSOR_F32, NULL, NULL, NULL, 4, 0, &err);
    rc |= d->ops->adamw_step(d, NULL, NULL, NULL, NULL, NULL, 0, &adamw_step1, &err);
    rc |= d->ops->cast_f32_to_bf16(d, NULL, NULL, 0, &err);
    rc |= d->ops->upload(d, NULL, NULL, 0, &err);
    rc |= d->ops->download(d, NULL, NULL, 0, &err);
    rc |= d->ops->copy(d, NULL, NULL, 0, &err);
    CHECK(rc == 0, "%s: an empty job failed: %s", backend, err.msg);
    /* the sum of nothing still writes its (device) output: 0 */
    double *out_dev = NULL;
    rc = d->ops->alloc(d, sizeof out, (void **)&out_dev, &err);
    if (!rc)
        rc = d->ops->upload(d, out_dev, &out, sizeof out, &err);
    if (!rc)
        rc = d->ops->sumsq(d, NULL, 0, out_dev, &err);
    if (!rc)
        rc = d->ops->download(d, &out, out_dev, sizeof out, &err);
    d->ops->free(d, out_dev);
    CHECK(rc == 0, "%s: sumsq of nothing failed: %s", backend, err.msg);
    CHECK(out == 0.0, "%s: sumsq of nothing = %g, expected 0", backend, out);
}

static int open_bufs(device *d, bufs *b)
{
    ddp_err err = {0};
    int32_t labels[4] = {0, 1, 2, 3};
    const double zero = 0.0;
    int rc = d->ops->alloc(d, BUF_FLOATS * sizeof(float), (void **)&b->f, &err);
    if (!rc)
        rc = d->ops->alloc(d, sizeof labels, (void **)&b->labels, &err);
    if (!rc)
        rc = d->ops->alloc(d, sizeof zero, (void **)&b->sumsq, &err);
    if (!rc)
        rc = d->ops->upload(d, b->sumsq, &zero, sizeof zero, &err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, b->f, BUF_FLOATS, 0.5f, &err);
    if (!rc)
        rc = d->ops->upload(d, b->labels, labels, sizeof labels, &err);
    if (!rc)
        rc = d->ops->timer_create(d, &b->timer, &err);
    if (!rc)
        rc = d->ops->stamps_create(d, STAMP_SLOTS, &b->stamps, &err);
    CHECK(rc == 0, "%s: setting up buffers: %s", d->name, err.msg);
    return rc;
}

static void close_bufs(device *d, bufs *b)
{
    d->ops->timer_destroy(d, b->timer);
    d->ops->stamps_destroy(d, b->stamps);
    d->ops->free(d, b->labels);
    d->ops->free(d, b->sumsq);
    d->ops->free(d, b->f);
}

/* No position table (the Llama's): wpe and dwpe NULL are taken, on real buffers. */
static void no_position_table(device *d, const char *backend, const bufs *b)
{
    ddp_err err = {0};
    int rc = d->ops->embedding_forward(d, TENSOR_F32, b->f, b->labels, b->f + 16, NULL, NULL, 1, 2, 4, &err);
    CHECK(rc == 0, "%s: embedding_forward without wpe: %s", backend, err.msg);
    rc = d->ops->embedding_backward(d, TENSOR_F32, b->f + 16, NULL, b->f + 32, b->labels, NULL, NULL, 1, 2, 4, 4, &err);
    CHECK(rc == 0, "%s: embedding_backward without dwpe: %s", backend, err.msg);
    CHECK(d->ops->synchronize(d, &err) == 0, "%s: the stream after them: %s", backend, err.msg);
}

/* Runs every bad call on d; msgs[i] gets call i's message. */
static void bad_calls_on(device *d, const char *backend, char msgs[][DDP_ERR_MSG])
{
    bufs b = {0};
    if (open_bufs(d, &b))
        return;
    for (size_t i = 0; i < device_n_bad_calls; i++) {
        ddp_err err = {0};
        int rc = device_bad_calls[i].call(d, &b, &err);
        CHECK(rc == DDP_ERUNTIME && err.code == DDP_ERUNTIME, "%s: \"%s\" case returned %d", backend,
              device_bad_calls[i].expect, rc);
        CHECK(strcmp(err.msg, device_bad_calls[i].expect) == 0, "%s: message \"%s\", expected \"%s\"", backend, err.msg,
              device_bad_calls[i].expect);
        snprintf(msgs[i], DDP_ERR_MSG, "%s", err.msg);
    }
    ddp_err err = {0};
    CHECK(d->ops->synchronize(d, &err) == 0, "%s: the stream after the bad calls: %s", backend, err.msg);
    no_position_table(d, backend, &b);
    close_bufs(d, &b);
    empty_jobs(d, backend);
}

#ifdef DDP_TEST_CUDAEMU
/* Six small uploads (one per staging slot), then one larger than all: one blocking call, the slot's
 * wait for its previous copy, and no pinned memory freed (cudaFreeHost waits for the device) or
 * made inside what would be a training step. */
static void upload_pins_nothing(device *d)
{
    enum { SMALL = 1024, LARGE = 1 << 20 };
    char *host = calloc(1, LARGE), *dev = NULL;
    ddp_err err = {0};
    int rc = host ? d->ops->alloc(d, LARGE, (void **)&dev, &err) : DDP_ERUNTIME;
    for (int i = 0; i < 6 && !rc; i++)
        rc = d->ops->upload(d, dev, host, SMALL, &err);
    unsigned long long blocking = cudaemu_host_blocking_calls();
    if (!rc)
        rc = d->ops->upload(d, dev, host, LARGE, &err);
    blocking = cudaemu_host_blocking_calls() - blocking;
    CHECK(rc == 0, "uploads: %s", err.msg);
    CHECK(blocking == 1, "an upload larger than the earlier ones made %llu blocking CUDA calls, expected its slot's "
          "wait alone (DDP_CUDA_EMU_TRACE_BLOCKING=1 names them)", blocking);
    if (dev)
        d->ops->free(d, dev);
    free(host);
}

/* Frees the same buffer three times with stderr in a file: CUDA refuses the last two. */
static void release_failure_said_once(device *d)
{
    char path[] = "/tmp/ddp_release_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    float *dev = NULL;
    ddp_err err = {0};
    int rc = fd < 0 || saved < 0 ? DDP_ERUNTIME : d->ops->alloc(d, 4 * sizeof(float), (void **)&dev, &err);
    CHECK(rc == 0, "alloc: %s", err.msg);
    if (rc)
        return;
    fflush(stderr);
    dup2(fd, 2);
    for (int i = 0; i < 3; i++)
        d->ops->free(d, dev);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    const char *line = "cuda device 0: cudaFree: invalid device pointer", *said = strstr(text, line);
    CHECK(said != NULL, "a refused cudaFree was not said; stderr:\n%s", text);
    CHECK(!said || !strstr(said + strlen(line), "warning:"), "said more than once:\n%s", text);
    float *one = NULL;
    rc = d->ops->alloc(d, sizeof(float), (void **)&one, &err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, one, 1, 2.0f, &err);
    CHECK(rc == 0, "the op after the refused frees failed: %s", err.msg);
    if (one)
        d->ops->free(d, one);
}
#endif

int main(int argc, char **argv)
{
    bool require_cuda = argc > 1 && strcmp(argv[1], "--require-cuda") == 0;
    device *cpu = NULL, *gpu = NULL;
    ddp_err err = {0};
    char(*cpu_msgs)[DDP_ERR_MSG] = calloc(device_n_bad_calls, DDP_ERR_MSG);
    char(*cuda_msgs)[DDP_ERR_MSG] = calloc(device_n_bad_calls, DDP_ERR_MSG);
    if (!cpu_msgs || !cuda_msgs)
        return 1;
    CHECK(device_cpu_create(&cpu, &err) == 0, "device_cpu_create: %s", err.msg);
    if (cpu) {
        bad_calls_on(cpu, "cpu", cpu_msgs);
        cpu->ops->destroy(cpu);
    }

    char reason[256] = "";
    if (device_cuda_count(reason, sizeof reason) == 0) {
        fprintf(stderr, "no CUDA device (%s): CPU backend only\n", reason);
        CHECK(!require_cuda, "--require-cuda, but no CUDA device: %s", reason);
        free(cpu_msgs);
        free(cuda_msgs);
        return check_done("test_device_contract");
    }
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    CHECK(device_cuda_create(0, &gpu_opts, &gpu, &err) == 0, "device_cuda_create: %s", err.msg);
    if (gpu) {
        fprintf(stderr, "comparing the CPU backend with CUDA on %s\n", gpu->name);
        bad_calls_on(gpu, "cuda", cuda_msgs);
#ifdef DDP_TEST_CUDAEMU
        upload_pins_nothing(gpu);
        release_failure_said_once(gpu);
#endif
        for (size_t i = 0; i < device_n_bad_calls; i++)
            CHECK(strcmp(cpu_msgs[i], cuda_msgs[i]) == 0, "backends differ: cpu \"%s\", cuda \"%s\"", cpu_msgs[i],
                  cuda_msgs[i]);
        gpu->ops->destroy(gpu);
    }
    free(cpu_msgs);
    free(cuda_msgs);
    return check_done("test_device_contract");
}
