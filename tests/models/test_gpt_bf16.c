/* test_gpt_bf16.c — GPT-2 with precision bf16 (bf16 activations and GEMM operands, a
 * stochastically rounded bf16 copy of the fp32 weights, fp32 gradients) on the CUDA backend
 * against PyTorch's float64 reference (fixture gpt-reference): logits, loss, every
 * gradient tensor, the global gradient norm and the losses of a 3-step AdamW trajectory, each
 * within a tolerance derived below from bf16 rounding. Also: the bf16 path really rounds (its
 * logits are farther from the reference than fp32's can be), the weight copy follows the seed and
 * step and is reproduced exactly, and the CPU backend refuses a bf16 model. Shapes come from the
 * fixture's MANIFEST, so the tolerances scale with its depth.
 *
 * Tolerances, norm-wise: |X - X_ref|_2 / |X_ref|_2. One rounding to bf16 (8 significant bits)
 * errs relatively by at most half an ulp, 2^-8; over many values with no pattern the error is
 * uniform in +-half an ulp, whose RMS is 2^-8/sqrt(3) in the worst binade. The weight copy rounds
 * stochastically: error below one ulp, RMS at most 2^-7/sqrt(6). Independent errors add in
 * quadrature. The longest forward path (embedding, then per layer: ln_1, c_attn and its bias,
 * scores, softmax, att·v, c_proj and bias, residual, ln_2, c_fc and bias, GELU, c_proj and bias,
 * residual; then ln_f and the logits) rounds R = 4 + 16·L stored values and reads W = 4 + 12·L
 * rounded weight tensors, so e_fwd = sqrt(R·(2^-8/√3)² + W·(2^-7/√6)²); LayerNorm's division by
 * the row's deviation and the softmax's exponent can amplify an input error, allowed for by a
 * gain of 4. Backward repeats every rounding once more on the way down (its own outputs) while
 * reading the forward's rounded values: sqrt(2) more. The loss is a smooth mean over rows, so it
 * errs far less than the logits: e_fwd as a relative bound is generous. A wrong formula moves
 * results by O(1); fp32 sits near 1e-6. */
#include "tests/models/gfx_bf16.h"

#define GAIN 4.0

static double fwd_error(int64_t L)
{
    const double rne = ldexp(1.0, -8) / sqrt(3.0), sr = ldexp(1.0, -7) / sqrt(6.0);
    const double R = 4.0 + 16.0 * (double)L, W = 4.0 + 12.0 * (double)L;
    return sqrt(R * rne * rne + W * sr * sr);
}

/* Every gradient tensor's: backward rounds once more on the way down what forward rounded. */
static double grad_tolerance(const gfx *f, const char *tensor)
{
    (void)tensor;
    return GAIN * sqrt(2.0) * fwd_error(f->shape.n_layer);
}

int main(void)
{
    gfx f;
    device *d = NULL;
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    CHECK(device_cuda_create(0, &gpu_opts, &d, &err) == 0, "cuda device: %s", err.msg);
    if (!d)
        return check_done("test_gpt_bf16");
    int rc = gfx_setup(&f, d, TENSOR_BF16);
    CHECK(rc == 0, "fixture setup");
    if (!rc) {
        double fwd = fwd_error(f.shape.n_layer);
        fprintf(stderr, "gpt-reference L=%lld C=%lld T=%lld V=%lld B=%lld in bf16 on %s:\n",
                (long long)f.shape.n_layer, (long long)f.shape.n_embd, (long long)f.T, (long long)f.shape.vocab_size,
                (long long)f.B, d->name);
        gfx_bf16_check_forward(&f, f.shape.vocab_size, GAIN * fwd);
        gfx_bf16_check_gradients(&f, grad_tolerance);
        gfx_bf16_check_trajectory(&f, GAIN * fwd);
        gfx_bf16_check_weight_copy(&f, f.shape.vocab_size);
        gfx_bf16_check_cpu_refuses(&f, gfx_build_gpt2);
    }
    gfx_teardown(&f);
    d->ops->destroy(d);
    return check_done("test_gpt_bf16");
}
