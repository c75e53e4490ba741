/* test_device_prof.c — the profiler's stamps and recorder (runtime/device/device_prof.h), on the
 * CPU backend and on CUDA when a GPU (or, in the emulated build, the emulator) answers;
 * `--require-cuda` makes a missing CUDA device a failure:
 *  - stamps: slot 0 reads 0, later stamps in stream order read later, a stamp on a second stream
 *    ordered after the compute stream (stream_wait_compute) reads no earlier than the compute
 *    stamp before it, a slot never stamped reads NaN;
 *  - the recorder: every op called through d->ops while it is attached becomes a record with its
 *    name, family, detail, bytes and FLOPs; a phase nests its ops; the step marks enclose them; a
 *    host range from another thread is kept; the recorder is detached after finish, and a host
 *    range after finish is not kept;
 *  - capacity: when the stamp slots run out the ops still run, the rest are dropped and counted;
 *  - the op families' names follow device.h's blocks.
 * Orders only, never durations: nothing here depends on how fast the machine is. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "runtime/base/clock.h"
#include "runtime/device/device.h"
#include "runtime/device/device_prof.h"
#include "tests/check.h"

#ifdef DDP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static const prof_record *find(const prof_record *recs, size_t n, const char *name, const char *detail)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(recs[i].name, name) == 0 && (!detail || strcmp(recs[i].detail, detail) == 0))
            return &recs[i];
    return NULL;
}

static void families(void)
{
    CHECK(strcmp(device_op_family(DEVICE_OP_upload), "memory") == 0, "upload: %s", device_op_family(DEVICE_OP_upload));
    CHECK(strcmp(device_op_family(DEVICE_OP_gemm), "gemm") == 0, "gemm");
    CHECK(strcmp(device_op_family(DEVICE_OP_gemm_bias_gelu), "gemm_epilogue") == 0, "gemm_bias_gelu");
    CHECK(strcmp(device_op_family(DEVICE_OP_fill), "elementwise") == 0, "fill");
    CHECK(strcmp(device_op_family(DEVICE_OP_clip_scale), "reduce") == 0, "clip_scale");
    CHECK(strcmp(device_op_family(DEVICE_OP_adamw_step), "optim_step") == 0, "adamw_step");
    CHECK(strcmp(device_op_family(DEVICE_OP_cast_f32_to_bf16_stochastic), "cast") == 0, "cast");
    CHECK(strcmp(device_op_family(DEVICE_OP_layernorm_backward), "transformer") == 0, "layernorm_backward");
    CHECK(strcmp(device_op_family(DEVICE_OP_attention_backward), "attention") == 0, "attention_backward");
    CHECK(strcmp(device_op_family(DEVICE_OP_stamps_read), "stamp") == 0, "stamps_read");
    CHECK(strcmp(device_op_name(DEVICE_OP_layernorm_forward), "layernorm_forward") == 0, "op name");
}

/* Stamps on the compute stream and, where there is one, a second stream. */
static void stamps(device *d, void *other_stream)
{
    ddp_err err = {0};
    device_stamps *s = NULL;
    float *x = NULL;
    double us[6];
    int rc = d->ops->stamps_create(d, 6, &s, &err);
    if (!rc)
        rc = d->ops->alloc(d, 1 << 20, (void **)&x, &err);
    if (!rc)
        rc = d->ops->stamp(d, s, 0, NULL, &err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, x, 1 << 18, 1.0f, &err);
    if (!rc)
        rc = d->ops->stamp(d, s, 1, NULL, &err);
    if (!rc)
        rc = d->ops->stream_wait_compute(d, other_stream, &err);
    if (!rc)
        rc = d->ops->stamp(d, s, 2, other_stream, &err);
    if (!rc)
        rc = d->ops->scale(d, x, 1 << 18, 2.0f, &err);
    if (!rc)
        rc = d->ops->stamp(d, s, 3, NULL, &err);
    /* slot 4 never stamped; slot 5 stamped last */
    if (!rc)
        rc = d->ops->stamp(d, s, 5, NULL, &err);
    if (!rc)
        rc = d->ops->stamps_read(d, s, 6, us, &err);
    CHECK(rc == 0, "%s: stamps: %s", d->name, err.msg);
    if (!rc) {
        CHECK(us[0] == 0.0, "%s: slot 0 reads %g", d->name, us[0]);
        CHECK(us[1] >= us[0] && us[3] >= us[1] && us[5] >= us[3], "%s: compute stamps out of order: %g %g %g %g",
              d->name, us[0], us[1], us[3], us[5]);
        CHECK(us[2] >= us[1], "%s: the second stream's stamp %g is before the compute stamp %g it waits for",
              d->name, us[2], us[1]);
        CHECK(isnan(us[4]), "%s: an unstamped slot reads %g, not NaN", d->name, us[4]);
    }
    d->ops->free(d, x);
    d->ops->stamps_destroy(d, s);
}

static void *host_range_thread(void *arg)
{
    double begin = monotonic_s();
    device_prof_host_range(arg, "writer", PROF_TRACK_CKPT_WRITER, begin, monotonic_s());
    return NULL;
}

/* A window of one step: a phase around a fill and a GEMM, a copy outside it, a host range from
 * another thread. */
static int record_window(device *d, float *x, ddp_err *err)
{
    int phase = -1;
    int rc = device_prof_mark_step(d, err);
    if (!rc)
        rc = device_prof_begin(d, "forward", "phase", PROF_TRACK_COMPUTE, NULL, NULL, &phase, err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, x, 16, 1.0f, err);
    if (!rc) /* 4x8 = 4x2 . 2x8: 2 * 4 * 8 * 2 = 128 FLOPs */
        rc = d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 4, 8, 2, 1.0f, x, 2, x + 16, 8, 0.0f, x + 32, 8,
                          err);
    if (!rc)
        rc = device_prof_end(d, phase, err);
    if (!rc)
        rc = d->ops->copy(d, x + 64, x, 64, err);
    pthread_t th;
    if (!rc && pthread_create(&th, NULL, host_range_thread, d->prof) == 0)
        pthread_join(th, NULL);
    return rc ? rc : device_prof_mark_step(d, err);
}

static void recorder(device *d)
{
    ddp_err err = {0};
    float *x = NULL;
    int rc = d->ops->alloc(d, 128 * sizeof(float), (void **)&x, &err);
    if (!rc)
        rc = d->ops->fill(d, TENSOR_F32, x, 128, 0.5f, &err);
    if (!rc)
        rc = device_prof_open(d, 64, 2, &err);
    device_prof *p = d->prof;
    if (!rc)
        rc = record_window(d, x, &err);
    if (!rc)
        rc = device_prof_finish(d, p, &err);
    CHECK(rc == 0, "%s: recording: %s", d->name, err.msg);
    CHECK(d->prof == NULL, "%s: the recorder is still attached after finish", d->name);
    if (rc || !p) {
        device_prof_free(d, p);
        d->ops->free(d, x);
        return;
    }
    device_prof_host_range(p, "late", PROF_TRACK_HOST, monotonic_s(), monotonic_s());
    size_t n = 0;
    int n_marks = 0;
    const prof_record *recs = device_prof_records(p, &n);
    const double *marks = device_prof_marks(p, &n_marks);
    const prof_record *fill = find(recs, n, "fill", "n=16 f32"), *gemm = find(recs, n, "gemm", NULL);
    const prof_record *phase = find(recs, n, "forward", NULL), *copy = find(recs, n, "copy", NULL);
    const prof_record *writer = find(recs, n, "writer", NULL);
    CHECK_EQ_INT(n, 5);
    CHECK_EQ_INT(n_marks, 2);
    CHECK_EQ_INT(device_prof_dropped(p), 0);
    CHECK(fill && gemm && phase && copy && writer, "%s: a record is missing (fill %p gemm %p phase %p copy %p "
          "writer %p)", d->name, (void *)fill, (void *)gemm, (void *)phase, (void *)copy, (void *)writer);
    CHECK(!find(recs, n, "late", NULL), "%s: a host range after finish was kept", d->name);
    if (fill && gemm && phase && copy && writer && n_marks == 2) {
        CHECK(strcmp(fill->family, "elementwise") == 0 && fill->bytes == 64 && fill->track == PROF_TRACK_COMPUTE,
              "%s: fill recorded as %s, %g bytes", d->name, fill->family, fill->bytes);
        CHECK(strcmp(gemm->family, "gemm") == 0 && gemm->flops == 128 && gemm->math == PROF_MATH_GEMM_FP32,
              "%s: gemm recorded as %s, %g FLOPs", d->name, gemm->family, gemm->flops);
        CHECK_STR_CONTAINS(gemm->detail, "4x8x2 f32->f32 NN");
        CHECK(copy->bytes == 128 && strcmp(copy->family, "memory") == 0, "%s: copy %g bytes", d->name, copy->bytes);
        CHECK(phase->depth == 0 && fill->depth == 1 && copy->depth == 0, "%s: depths phase %d fill %d copy %d",
              d->name, phase->depth, fill->depth, copy->depth);
        CHECK(phase->begin_us <= fill->begin_us && fill->end_us <= gemm->begin_us && gemm->end_us <= phase->end_us,
              "%s: the phase does not enclose its ops in order", d->name);
        CHECK(marks[0] <= phase->begin_us && copy->end_us <= marks[1] && phase->end_us <= copy->begin_us,
              "%s: the step marks do not enclose the ranges", d->name);
        CHECK(writer->track == PROF_TRACK_CKPT_WRITER && writer->end_us >= writer->begin_us, "%s: writer range",
              d->name);
    }
    device_prof_free(d, p);
    d->ops->free(d, x);
}

/* 8 slots with 1 kept for a step mark: slot 0 and three ranges; the other two fills are dropped
 * but still run. */
static void capacity(device *d)
{
    ddp_err err = {0};
    float *x = NULL, host[5] = {0};
    int rc = d->ops->alloc(d, 5 * sizeof(float), (void **)&x, &err);
    if (!rc)
        rc = device_prof_open(d, 8, 1, &err);
    device_prof *p = d->prof;
    for (int i = 0; i < 5 && !rc; i++)
        rc = d->ops->fill(d, TENSOR_F32, x + i, 1, (float)(i + 1), &err);
    if (!rc)
        rc = device_prof_mark_step(d, &err);
    if (!rc)
        rc = device_prof_finish(d, p, &err);
    if (!rc)
        rc = d->ops->download(d, host, x, sizeof host, &err);
    CHECK(rc == 0, "%s: capacity: %s", d->name, err.msg);
    size_t n = 0;
    int n_marks = 0;
    if (p) {
        device_prof_records(p, &n);
        device_prof_marks(p, &n_marks);
        CHECK_EQ_INT(n, 3);
        CHECK_EQ_INT(device_prof_dropped(p), 2);
        CHECK_EQ_INT(n_marks, 1);
    }
    for (int i = 0; i < 5; i++)
        CHECK(host[i] == (float)(i + 1), "%s: dropped fill %d did not run: %g", d->name, i, host[i]);
    device_prof_free(d, p);
    d->ops->free(d, x);
}

static void run_on(device *d, void *other_stream)
{
    stamps(d, other_stream);
    recorder(d);
    capacity(d);
}

int main(int argc, char **argv)
{
    bool require_cuda = argc > 1 && strcmp(argv[1], "--require-cuda") == 0;
    families();
    device *cpu = NULL;
    ddp_err err = {0};
    CHECK(device_cpu_create(&cpu, &err) == 0, "device_cpu_create: %s", err.msg);
    if (cpu) {
        run_on(cpu, NULL);
        cpu->ops->destroy(cpu);
    }
    char reason[256] = "";
    if (device_cuda_count(reason, sizeof reason) == 0) {
        fprintf(stderr, "no CUDA device (%s): CPU backend only\n", reason);
        CHECK(!require_cuda, "--require-cuda, but no CUDA device: %s", reason);
        return check_done("test_device_prof");
    }
#ifdef DDP_HAVE_CUDA
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    device *gpu = NULL;
    CHECK(device_cuda_create(0, &gpu_opts, &gpu, &err) == 0, "device_cuda_create: %s", err.msg);
    cudaStream_t other = NULL;
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess, "a second stream");
    if (gpu && other) {
        fprintf(stderr, "CUDA on %s\n", gpu->name);
        run_on(gpu, other);
        cudaStreamDestroy(other);
    }
    if (gpu)
        gpu->ops->destroy(gpu);
#endif
    return check_done("test_device_prof");
}
