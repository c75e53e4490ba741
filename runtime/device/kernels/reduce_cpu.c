/* reduce_cpu.c — the CPU code of the reduction family (CUDA: reduce.cu): bias gradients (column
 * sums), fused softmax + cross-entropy with its loss/accuracy statistics, and the sum of squares
 * behind the global gradient norm.
 *
 * Serial loops in a fixed order, so results are the same bits on every run; losses and norms
 * are summed in double. Arguments arrive checked by device.c; the labels, being data, are
 * checked here. This file must not hold element-wise ops (elementwise_cpu.c). */
#include "cpu_kernel.h"

#include <math.h>

int device_cpu_bias_grad(device *d, const float *restrict dy, float *restrict db, int64_t rows, int64_t cols,
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

/* One row: loss = logsumexp(l) - l[label], computed around the row max so exp never overflows. */
static double xent_row(const float *restrict l, int32_t label, int64_t cols, float grad_scale,
                       float *restrict dl, int *correct)
{
    int64_t argmax = 0;
    for (int64_t c = 1; c < cols; c++)
        if (l[c] > l[argmax]) /* strict: ties keep the lowest index, as torch.argmax */
            argmax = c;
    float mx = l[argmax];
    double sum = 0.0;
    for (int64_t c = 0; c < cols; c++)
        sum += exp((double)l[c] - (double)mx);
    double lse = (double)mx + log(sum);
    if (dl) {
        for (int64_t c = 0; c < cols; c++) {
            double p = exp((double)l[c] - lse);
            dl[c] = (float)((p - (c == label ? 1.0 : 0.0)) * grad_scale);
        }
    }
    *correct = argmax == label;
    return lse - (double)l[label];
}

int device_cpu_softmax_xent(device *d, const float *logits, const int32_t *labels, int64_t rows, int64_t cols,
                            float grad_scale, float *dlogits, float *stats, ddp_err *err)
{
    (void)d;
    double loss_sum = 0.0;
    int64_t n_correct = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (labels[r] < 0 || labels[r] >= cols)
            return ddp_fail(err, DDP_ERUNTIME, "softmax_xent: row %lld has label %d outside [0, %lld)",
                            (long long)r, (int)labels[r], (long long)cols);
        int correct;
        loss_sum += xent_row(logits + r * cols, labels[r], cols, grad_scale, dlogits ? dlogits + r * cols : NULL,
                             &correct);
        n_correct += correct;
    }
    stats[0] += (float)loss_sum;
    stats[1] += (float)n_correct;
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
