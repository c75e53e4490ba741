/* test_llama_bf16.c — the Llama with precision bf16 (bf16 activations and GEMM operands, a
 * stochastically rounded bf16 copy of the fp32 weights, fp32 gradients) on the CUDA backend
 * against Hugging Face's float64 reference (fixture llama-reference): logits, loss, every
 * gradient tensor, the global gradient norm and the losses of a 3-step AdamW trajectory, each
 * within a tolerance derived below from bf16 rounding, per tensor. Also: the bf16 path really
 * rounds, the weight copy follows the seed and step and is reproduced exactly, the classifier in
 * chunks keeps the gradients within the same tolerances, and the CPU backend refuses a bf16 model. Shapes come from the fixture's MANIFEST, so the tolerances scale with its
 * depth.
 *
 * Tolerances, norm-wise: |X - X_ref|_2 / |X_ref|_2, as test_gpt_bf16.c derives them. One rounding
 * to bf16 errs relatively with RMS 2^-8/sqrt(3) (uniform in +-half an ulp, worst binade); the
 * stochastic weight copy with RMS at most 2^-7/sqrt(6); independent errors add in quadrature. The
 * longest forward path rounds R = 3 + 11·L stored values (the embedding; per layer input_layernorm,
 * qkv, RoPE, attention's output, o_proj, the residual add, post_attention_layernorm, gate|up,
 * SwiGLU, down_proj, the residual add; then model.norm and the logits) and reads W = 3 + 9·L
 * rounded weight tensors. A gradient also carries the backward's roundings from dlogits down to
 * it: 2 for model.norm and lm_head (dlogits, dlnf), 3 + 9 per layer above and including its own
 * for a layer's tensors (dh, dgate_up, dln, dres, datty, dqkv, RoPE's inverse, dln, dres), and
 * the whole stack for embed_tokens. RMSNorm's division by the row's RMS and the softmax's exponent
 * can amplify an input error: a gain of 4 on all. A wrong formula moves results by O(1); fp32
 * sits near 1e-6. */
#include "tests/models/llama_fixture.h"

#include "tests/models/gfx_bf16.h"

#define GAIN 4.0

static const double RNE2 = 1.0 / (65536.0 * 3.0);       /* (2^-8/sqrt(3))^2 */
static const double SR2 = 1.0 / (16384.0 * 6.0);        /* (2^-7/sqrt(6))^2 */

static double forward_roundings(int64_t L) { return 3.0 + 11.0 * (double)L; }
static double weight_reads(int64_t L) { return 3.0 + 9.0 * (double)L; }

/* The backward roundings on the way from dlogits to tensor `name`'s gradient (see above). */
static double backward_roundings(const char *name, int64_t L)
{
    int layer = -1;
    if (sscanf(name, "model.layers.%d.", &layer) == 1)
        return 3.0 + 9.0 * (double)(L - layer);
    if (!strcmp(name, "model.embed_tokens.weight"))
        return 3.0 + 9.0 * (double)L;
    return 2.0; /* model.norm.weight, lm_head.weight */
}

static double forward_tolerance(int64_t L) { return GAIN * sqrt(forward_roundings(L) * RNE2 + weight_reads(L) * SR2); }

static double gradient_tolerance(const char *name, int64_t L)
{
    return GAIN * sqrt((forward_roundings(L) + backward_roundings(name, L)) * RNE2 + weight_reads(L) * SR2);
}

/* gfx_bf16_check_gradients' tolerance: f is the lfx's first member. */
static double llama_grad_tolerance(const gfx *f, const char *tensor)
{
    return gradient_tolerance(tensor, ((const lfx *)f)->shape.n_layer);
}

/* The classifier in chunks (train.logits_mb) in bf16: a third of the rows per chunk, the last one
 * shorter when they do not divide, holds every gradient to the same tolerances (the chunks change
 * only the order of the head gradient's fp32 sums, and which rows a GEMM takes at once). */
static void check_chunked_classifier(lfx *x)
{
    gfx *f = &x->f;
    ddp_err err = {0};
    const int64_t rows = f->B * f->T;
    const size_t row_bytes = (size_t)f->Vp * sizeof(uint16_t);
    const lm_run run = {.compute = TENSOR_BF16, .logits_bytes = (size_t)(rows / 3 + 1) * row_bytes};
    model *whole = f->m, *m = lfx_build(f, &run, &err);
    CHECK(m != NULL, "chunked: %s", err.msg);
    if (!m)
        return;
    fprintf(stderr, "  the classifier in chunks of %lld of %lld rows:\n",
            (long long)lm_logit_rows(run.logits_bytes, f->Vp, TENSOR_BF16, rows), (long long)rows);
    f->dev->ops->copy(f->dev, m->params, whole->params, whole->n_params * sizeof(float), NULL);
    CHECK(model_params_changed(m, 0, 0, &err) == 0, "%s", err.msg);
    f->m = m;
    gfx_bf16_check_gradients(f, llama_grad_tolerance);
    f->m = whole;
    m->ops->destroy(m);
}

int main(void)
{
    lfx x;
    device *d = NULL;
    ddp_err err = {0};
    const device_opts gpu_opts = {.kind = DEVICE_CUDA}; /* no TF32 */
    CHECK(device_cuda_create(0, &gpu_opts, &d, &err) == 0, "cuda device: %s", err.msg);
    if (!d)
        return check_done("test_llama_bf16");
    int rc = lfx_setup(&x, d, TENSOR_BF16);
    CHECK(rc == 0, "fixture setup");
    if (!rc) {
        const double fwd = forward_tolerance(x.shape.n_layer);
        fprintf(stderr, "llama-reference L=%lld C=%lld NH=%lld NKV=%lld T=%lld V=%lld B=%lld in bf16 on %s:\n",
                (long long)x.shape.n_layer, (long long)x.shape.n_embd, (long long)x.shape.n_head,
                (long long)x.shape.n_kv_head, (long long)x.f.T, (long long)x.shape.vocab_size, (long long)x.f.B,
                d->name);
        gfx_bf16_check_forward(&x.f, x.shape.vocab_size, fwd);
        gfx_bf16_check_gradients(&x.f, llama_grad_tolerance);
        check_chunked_classifier(&x);
        gfx_bf16_check_trajectory(&x.f, fwd);
        gfx_bf16_check_weight_copy(&x.f, x.shape.vocab_size);
        gfx_bf16_check_cpu_refuses(&x.f, lfx_build);
    }
    gfx_teardown(&x.f);
    d->ops->destroy(d);
    return check_done("test_llama_bf16");
}
