/* bench_attention.c — times the attention ops (attention_forward, attention_backward) on one
 * device at one shape, for scripts/bench-attention-gpu, which sets them beside PyTorch's
 * scaled_dot_product_attention on the same GPU in the same run.
 *
 *   bench_attention [--cpu] [--f32] [--iters N] B T NH NKV HS
 *
 * q, k and v are views of one fused [B, T, (NH + 2 NKV)·HS] tensor, as GPT-2's QKV projection
 * writes them; random values in [-1, 1]; bf16 on CUDA unless --f32 (the CPU computes in f32).
 * Each op is run 3 times to warm up, then timed N times (default 20) with the device's interval
 * timer (CUDA events on the compute stream; the host clock on the CPU); the median is printed as
 *   attention B T NH NKV HS DTYPE fwd_ms FWD bwd_ms BWD fwd_tflops X bwd_tflops Y
 * with FLOPs counted as FlashAttention does for a causal mask: forward 4·B·NH·HS·T(T+1)/2 (the
 * two products over the visible half), backward 2.5 times that. It only measures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/half.h"
#include "runtime/base/rng.h"
#include "runtime/device/device.h"

static void die_on(int rc, const ddp_err *err, const char *what)
{
    if (rc) {
        fprintf(stderr, "bench_attention: %s: %s\n", what, err->msg);
        exit(1);
    }
}

static void *upload_random(device *d, tensor_dtype t, size_t n, rng *r)
{
    size_t es = tensor_dtype_size(t);
    unsigned char *h = malloc(n * es);
    for (size_t i = 0; i < n; i++) {
        float f = rng_uniform(r, -1.0f, 1.0f);
        if (t == TENSOR_BF16)
            ((uint16_t *)h)[i] = float_to_bf16(f);
        else
            ((float *)h)[i] = f;
    }
    void *p = NULL;
    ddp_err err = {0};
    die_on(d->ops->alloc(d, n * es, &p, &err), &err, "alloc");
    die_on(d->ops->upload(d, p, h, n * es, &err), &err, "upload");
    free(h);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    device *d;
    tensor_dtype t;
    attn_shape s;
    void *qkv, *dqkv, *out, *dout;
    float *lse;
} job;

static void run(const job *j, bool backward)
{
    ddp_err err = {0};
    const size_t es = tensor_dtype_size(j->t);
    const int64_t qw = j->s.NH * j->s.hs, kvw = j->s.NKV * j->s.hs;
    const char *q = j->qkv, *k = q + (size_t)qw * es, *v = k + (size_t)kvw * es;
    char *dq = j->dqkv, *dk = dq + (size_t)qw * es, *dv = dk + (size_t)kvw * es;
    if (!backward)
        die_on(j->d->ops->attention_forward(j->d, j->t, &j->s, j->out, j->lse, q, k, v, &err), &err, "forward");
    else
        die_on(j->d->ops->attention_backward(j->d, j->t, &j->s, dq, dk, dv, j->dout, j->out, j->lse, q, k, v, &err),
               &err, "backward");
}

/* Median milliseconds of `iters` timed runs after 3 untimed ones. */
static double time_op(const job *j, device_timer *timer, bool backward, int iters)
{
    ddp_err err = {0};
    double *ms = malloc((size_t)iters * sizeof *ms);
    for (int i = 0; i < 3 + iters; i++) {
        die_on(j->d->ops->timer_start(j->d, timer, &err), &err, "timer_start");
        run(j, backward);
        die_on(j->d->ops->timer_stop(j->d, timer, &err), &err, "timer_stop");
        double t = 0;
        die_on(j->d->ops->timer_take_ms(j->d, timer, &t, &err), &err, "timer_take_ms");
        if (i >= 3)
            ms[i - 3] = t;
    }
    qsort(ms, (size_t)iters, sizeof *ms, cmp_double);
    double median = ms[iters / 2];
    free(ms);
    return median;
}

int main(int argc, char **argv)
{
    bool on_cpu = false, f32 = false;
    int iters = 20, argi = 1;
    for (; argi < argc && argv[argi][0] == '-'; argi++) {
        if (!strcmp(argv[argi], "--cpu"))
            on_cpu = true;
        else if (!strcmp(argv[argi], "--f32"))
            f32 = true;
        else if (!strcmp(argv[argi], "--iters") && argi + 1 < argc)
            iters = atoi(argv[++argi]);
        else
            break;
    }
    if (argc - argi != 5 || iters < 1) {
        fprintf(stderr, "usage: bench_attention [--cpu] [--f32] [--iters N] B T NH NKV HS\n");
        return 2;
    }
    job j = {0};
    j.s.B = atoll(argv[argi]);
    j.s.T = atoll(argv[argi + 1]);
    j.s.NH = atoll(argv[argi + 2]);
    j.s.NKV = atoll(argv[argi + 3]);
    j.s.hs = atoll(argv[argi + 4]);
    j.s.ld_q = j.s.ld_kv = (j.s.NH + 2 * j.s.NKV) * j.s.hs;
    j.s.ld_o = j.s.NH * j.s.hs;
    j.s.scale = (float)(1.0 / sqrt((double)j.s.hs));
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    die_on(on_cpu ? device_cpu_create(&j.d, &err) : device_cuda_create(0, &gpu_opts, &j.d, &err), &err, "device");
    j.t = on_cpu || f32 ? TENSOR_F32 : TENSOR_BF16;
    rng r;
    rng_seed(&r, 1, 99);
    const size_t rows = (size_t)(j.s.B * j.s.T);
    j.qkv = upload_random(j.d, j.t, rows * (size_t)j.s.ld_q, &r);
    j.dqkv = upload_random(j.d, j.t, rows * (size_t)j.s.ld_q, &r);
    j.out = upload_random(j.d, j.t, rows * (size_t)j.s.ld_o, &r);
    j.dout = upload_random(j.d, j.t, rows * (size_t)j.s.ld_o, &r);
    die_on(j.d->ops->alloc(j.d, (size_t)(j.s.B * j.s.NH * j.s.T) * sizeof(float), (void **)&j.lse, &err), &err, "alloc");
    device_timer *timer = NULL;
    die_on(j.d->ops->timer_create(j.d, &timer, &err), &err, "timer_create");
    double fwd = time_op(&j, timer, false, iters), bwd = time_op(&j, timer, true, iters);
    double flops = 4.0 * (double)(j.s.B * j.s.NH * j.s.hs) * (double)j.s.T * (double)(j.s.T + 1) / 2.0;
    printf("attention %lld %lld %lld %lld %lld %s fwd_ms %.4f bwd_ms %.4f fwd_tflops %.2f bwd_tflops %.2f\n",
           (long long)j.s.B, (long long)j.s.T, (long long)j.s.NH, (long long)j.s.NKV, (long long)j.s.hs,
           j.t == TENSOR_BF16 ? "bf16" : "f32", fwd, bwd, flops / fwd / 1e9, 2.5 * flops / bwd / 1e9);
    j.d->ops->timer_destroy(j.d, timer);
    j.d->ops->destroy(j.d);
    return 0;
}
