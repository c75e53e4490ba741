/* reduce_cpu.c — the CPU code of the reduction family (CUDA: reduce.cu): bias gradients (column
 * sums), fused softmax + cross-entropy with its loss/accuracy statistics, the sum of squares
 * behind the global gradient norm and the clip factor computed from it.
 *
 * Serial loops in a fixed order, so results are the same bits on every run; losses and norms
 * are summed in double. Arguments arrive checked (device_check_*.c); the labels, being data, are
 * checked here. This file must not hold element-wise ops (elementwise_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

static int cpu_bias_grad_f32(device *d, const float *restrict dy, float *restrict db, int64_t rows, int64_t cols,
                             float beta, ddp_err *err)
{
    (void)d;
    (void)err;
    for (int64_t c = 0; c < cols; c++)
        db[c] = beta == 0.0f ? 0.0f : beta * db[c]; /* beta 0 must clear NaN garbage too */
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict row = dy + r * cols;
        for (int64_t c = 0; c < cols; c++)
            db[c] += row[c];
    }
    return DDP_OK;
}

/* Rows of the classifier processed between two serial loss summations (stack arrays). */
#define XENT_ROW_BLOCK 256

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One row. Everything the loss needs (argmax, max, l[target]) is read before the gradient pass,
 * and that pass reads l[c] before writing dl[c], so dl == l works (hence no restrict). The
 * exponentials are stored in dl on the way and scaled afterwards, so expf runs once per logit. */
static double xent_row(const float *l, float *dl, int64_t ld, int32_t target, int64_t V, float grad_scale,
                       bool *hit)
{
    int64_t argmax = 0;
    for (int64_t c = 1; c < V; c++)
        if (l[c] > l[argmax]) /* strict: ties keep the lowest index, as torch.argmax */
            argmax = c;
    const float mx = l[argmax], lt = l[target], et = expf(lt - mx);
    *hit = argmax == target;
    double sum = 0.0;
    if (dl) {
        for (int64_t c = 0; c < V; c++) {
            dl[c] = expf(l[c] - mx);
            sum += dl[c];
        }
        double k = (double)grad_scale / sum;
        for (int64_t c = 0; c < V; c++)
            dl[c] = (float)((double)dl[c] * k);
        dl[target] = (float)(((double)et / sum - 1.0) * (double)grad_scale);
        for (int64_t c = V; c < ld; c++)
            dl[c] = 0.0f;
    } else {
        for (int64_t c = 0; c < V; c++)
            sum += expf(l[c] - mx);
    }
    return (double)mx + log(sum) - (double)lt;
}

/* Rows are independent outputs (OpenMP); their losses are then summed in double in row order. */
static int cpu_softmax_xent_f32(device *d, const float *logits, int64_t ld, const int32_t *targets, int64_t rows,
                                int64_t V, float grad_scale, float *dlogits, float *stats, ddp_err *err)
{
    (void)d;
    /* all targets first, so a bad one leaves every output untouched (the logits too, in place) */
    for (int64_t r = 0; r < rows; r++)
        if ((targets[r] < 0 && targets[r] != XENT_NO_TARGET) || targets[r] >= V)
            return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: row %lld has label %d outside [0, %lld)",
                            (long long)r, (int)targets[r], (long long)V);
    /* rows in parallel per block, then the block's losses summed serially in row order */
    double total = 0.0;
    int64_t hits = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += XENT_ROW_BLOCK) {
        int64_t nr = min_i64(XENT_ROW_BLOCK, rows - r0);
        double loss[XENT_ROW_BLOCK];
        bool hit[XENT_ROW_BLOCK];
        DDP_PARALLEL_FOR(nr * V)
        for (int64_t i = 0; i < nr; i++) {
            int64_t r = r0 + i;
            if (targets[r] == XENT_NO_TARGET) { /* no target: nothing counted, a zero gradient */
                loss[i] = 0.0;
                hit[i] = false;
                if (dlogits)
                    memset(dlogits + r * ld, 0, (size_t)ld * sizeof(float));
                continue;
            }
            loss[i] = xent_row(logits + r * ld, dlogits ? dlogits + r * ld : NULL, ld, targets[r], V, grad_scale,
                               &hit[i]);
        }
        for (int64_t i = 0; i < nr; i++) {
            total += loss[i];
            hits += hit[i];
        }
    }
    stats[0] = (float)((double)stats[0] + total);
    stats[1] = (float)((double)stats[1] + (double)hits);
    return DDP_OK;
}

int device_cpu_sumsq(device *d, const float *x, size_t n, double *out, ddp_err *err)
{
    (void)d;
    (void)err;
    /* eight fixed lanes, combined in a fixed order: deterministic and not latency-bound */
    double lane[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            lane[j] += (double)x[i + j] * (double)x[i + j];
    for (; i < n; i++)
        lane[0] += (double)x[i] * (double)x[i];
    *out = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    return DDP_OK;
}

int device_cpu_sum_f64(device *d, const double *x, size_t n, double *out, ddp_err *err)
{
    (void)d;
    (void)err;
    double acc = 0.0;
    for (size_t i = 0; i < n; i++)
        acc += x[i];
    *out = acc;
    return DDP_OK;
}

/* clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied only below 1. An infinite norm gives
 * coef 0 and a NaN norm coef NaN (coef >= 1 is false), as in PyTorch. reduce.cu's kernel is the
 * same double arithmetic. */
int device_cpu_clip_scale(device *d, const double *sumsq, double max_norm, float *scale, ddp_err *err)
{
    (void)d;
    (void)err;
    const double coef = max_norm / (sqrt(*sumsq) + 1e-6);
    *scale = coef >= 1.0 ? 1.0f : (float)coef;
    return DDP_OK;
}

/* ---- entry points: device.c admits only TENSOR_F32 on the CPU, so the types are not looked at */

int device_cpu_bias_grad(device *d, tensor_dtype t, const void *dy, float *db, int64_t rows, int64_t cols, float beta,
                         ddp_err *err)
{
    (void)t;
    return cpu_bias_grad_f32(d, dy, db, rows, cols, beta, err);
}

int device_cpu_softmax_xent(device *d, tensor_dtype t, const void *logits, int64_t ld, const int32_t *labels,
                            int64_t rows, int64_t cols, float grad_scale, void *dlogits, float *stats, ddp_err *err)
{
    (void)t;
    return cpu_softmax_xent_f32(d, logits, ld, labels, rows, cols, grad_scale, dlogits, stats, err);
}
