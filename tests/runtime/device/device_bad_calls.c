/* device_bad_calls.c — the table of argument mistakes (device_bad_calls.h): one function per
 * mistake, named after it, and the whole message each must give. Must not check anything itself:
 * test_device_contract.c runs them. */
#include "device_bad_calls.h"

#include <limits.h>
#include <math.h>

const sgd_args sgd_momentum = {.lr = 0.1f, .momentum = 0.9f};
static const adamw_args adamw_no_bias2 = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .one_minus_beta1 = 0.1f,
                                          .one_minus_beta2 = 0.001f, .decay = 1.0f, .step_size = 1e-3f,
                                          .bias2_sqrt = 0.0f};
const adamw_args adamw_step1 = {.beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .one_minus_beta1 = 0.1f,
                                       .one_minus_beta2 = 0.001f, .decay = 1.0f, .step_size = 1e-2f,
                                       .bias2_sqrt = 0.0316f};

/* One function per mistake, named after it. */
static int gemm_negative_m(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, -1, 2, 2, 1.0f, b->f, 2, b->f, 2, 0.0f, b->f, 2, err);
}
static int gemm_lda_below_k(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 2, 2, 3, 1.0f, b->f, 2, b->f, 2, 0.0f, b->f, 2, err);
}
static int gemm_lda_below_m_transposed(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, true, false, 3, 2, 2, 1.0f, b->f, 2, b->f, 2, 0.0f, b->f, 2, err);
}
static int gemm_ldc_below_n(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, true, 2, 3, 2, 1.0f, b->f, 2, b->f, 2, 0.0f, b->f, 2, err);
}
static int gemm_null_a(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 2, 2, 2, 1.0f, NULL, 2, b->f, 2, 0.0f, b->f, 2, err);
}
static int gemm_null_c(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm(d, TENSOR_F32, TENSOR_F32, false, false, 2, 2, 2, 1.0f, b->f, 2, b->f, 2, 0.0f, NULL, 2, err);
}
static int fill_null(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->fill(d, TENSOR_F32, NULL, 4, 1.0f, err);
}
static int scale_null(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->scale(d, NULL, 4, 2.0f, err);
}
static int u8_to_f32_null_src(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->u8_to_f32(d, NULL, b->f, 4, 0.5f, 2.0f, err);
}
static int bias_add_negative_rows(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->bias_add(d, TENSOR_F32, b->f, b->f, -1, 3, err);
}
static int bias_add_null_b(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->bias_add(d, TENSOR_F32, b->f, NULL, 2, 3, err);
}
static int act_forward_unknown(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->act_forward(d, TENSOR_F32, (act_kind)99, b->f, b->f + 8, 8, err);
}
static int act_backward_unknown_empty(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->act_backward(d, TENSOR_F32, (act_kind)7, b->f, b->f, b->f, 0, err); /* checked even with n == 0 */
}
static int act_backward_null_dy(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->act_backward(d, TENSOR_F32, ACT_GELU, b->f, NULL, b->f + 8, 8, err);
}
static int bias_grad_negative_cols(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->bias_grad(d, TENSOR_F32, b->f, b->f + 8, 2, -4, 0.0f, err);
}
static int bias_grad_null_dy(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->bias_grad(d, TENSOR_F32, NULL, b->f + 8, 2, 4, 0.0f, err);
}
static int softmax_xent_zero_classes(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->softmax_xent(d, TENSOR_F32, b->f, 1, b->labels, 3, 0, 1.0f, NULL, b->f + 32, err);
}
static int softmax_xent_null_labels(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->softmax_xent(d, TENSOR_F32, b->f, 4, NULL, 2, 4, 1.0f, b->f + 8, b->f + 32, err);
}
static int softmax_xent_null_stats(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->softmax_xent(d, TENSOR_F32, b->f, 4, b->labels, 2, 4, 1.0f, NULL, NULL, err);
}
static int softmax_xent_short_stride(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->softmax_xent(d, TENSOR_F32, b->f, 3, b->labels, 2, 4, 1.0f, NULL, b->f + 32, err);
}
static int gemm_bias_zero_k(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_bias(d, TENSOR_F32, false, true, 2, 2, 0, b->f, 1, b->f, 1, b->f + 8, b->f + 16, err);
}
static int gemm_bias_short_ldb(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_bias(d, TENSOR_F32, false, true, 2, 3, 4, b->f, 4, b->f, 3, b->f + 8, b->f + 16, err);
}
static int gemm_bias_null_bias(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_bias(d, TENSOR_F32, false, true, 2, 2, 2, b->f, 2, b->f, 2, NULL, b->f + 16, err);
}
static int gemm_bias_gelu_pre_is_y(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_bias_gelu(d, TENSOR_F32, false, true, 2, 2, 2, b->f, 2, b->f, 2, b->f + 8, b->f + 16,
                                  b->f + 16, err);
}
static int gemm_gelu_backward_null_pre(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_gelu_backward(d, TENSOR_F32, false, false, 2, 2, 2, b->f, 2, b->f, 2, NULL, b->f + 16, err);
}
static int gemm_gelu_backward_dx_is_pre(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->gemm_gelu_backward(d, TENSOR_F32, false, false, 2, 2, 2, b->f, 2, b->f, 2, b->f + 16, b->f + 16,
                                      err);
}
static int add_null_b(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->add(d, TENSOR_F32, b->f, b->f, NULL, 4, err);
}
static int embedding_negative_t(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->embedding_forward(d, TENSOR_F32, b->f, b->labels, b->f + 8, b->f + 16, NULL, 1, -2, 4, err);
}
static int embedding_null_wte(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->embedding_forward(d, TENSOR_F32, b->f, b->labels, NULL, NULL, NULL, 1, 2, 4, err);
}
static int embedding_backward_null_dwte(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->embedding_backward(d, TENSOR_F32, NULL, NULL, b->f + 32, b->labels, NULL, NULL, 1, 2, 4, 4, err);
}
static int layernorm_zero_channels(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->layernorm_forward(d, TENSOR_F32, b->f, b->f + 8, b->f + 12, b->f + 16, b->f + 20, b->f + 24, 2, 0,
                                     err);
}
static int residual_layernorm_ln_is_res(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->residual_layernorm_forward(d, TENSOR_F32, b->f, b->f, b->f + 8, b->f + 12, b->f, b->f + 16,
                                              b->f + 20, b->f + 24, 1, 4, err);
}
static int residual_layernorm_ln_is_b(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->residual_layernorm_forward(d, TENSOR_F32, b->f, b->f + 16, b->f + 8, b->f + 12, b->f, b->f + 16,
                                              b->f + 20, b->f + 24, 1, 4, err);
}
static int residual_layernorm_null_b(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->residual_layernorm_forward(d, TENSOR_F32, b->f, b->f + 32, b->f + 8, b->f + 12, b->f, NULL,
                                              b->f + 20, b->f + 24, 1, 4, err);
}
static int residual_layernorm_zero_channels(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->residual_layernorm_forward(d, TENSOR_F32, b->f, b->f + 32, b->f + 8, b->f + 12, b->f, b->f + 16,
                                              b->f + 20, b->f + 24, 3, 0, err);
}
static int embedding_backward_no_rows(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->embedding_backward(d, TENSOR_F32, b->f, b->f + 16, b->f + 32, b->labels, NULL, NULL, 1, 2, 4, 0,
                                      err);
}
static int embedding_backward_half_docs(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->embedding_backward(d, TENSOR_F32, b->f, b->f + 16, b->f + 32, b->labels, b->labels, NULL, 1, 2, 4,
                                      4, err);
}
static int layernorm_backward_null_rstd(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->layernorm_backward(d, TENSOR_F32, b->f, b->f + 4, b->f + 8, b->f + 12, b->f + 16, b->f + 20,
                                      b->f + 24, NULL, 1, 4, err);
}
static const attn_shape attn_ok = {.B = 1, .T = 2, .NH = 2, .NKV = 1, .hs = 4, .ld_q = 8, .ld_kv = 4, .ld_o = 8,
                                   .scale = 0.5f};
static int attention_heads_not_grouped(device *d, const bufs *b, ddp_err *err)
{
    attn_shape s = attn_ok;
    s.NKV = 3;
    return d->ops->attention_forward(d, TENSOR_F32, &s, b->f, b->f + 16, b->f + 24, b->f + 40, b->f + 48, err);
}
static int attention_narrow_ld(device *d, const bufs *b, ddp_err *err)
{
    attn_shape s = attn_ok;
    s.ld_kv = 3;
    return d->ops->attention_forward(d, TENSOR_F32, &s, b->f, b->f + 16, b->f + 24, b->f + 40, b->f + 48, err);
}
static int attention_bad_scale(device *d, const bufs *b, ddp_err *err)
{
    attn_shape s = attn_ok;
    s.scale = 0.0f;
    return d->ops->attention_forward(d, TENSOR_F32, &s, b->f, b->f + 16, b->f + 24, b->f + 40, b->f + 48, err);
}
static int attention_backward_null_lse(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->attention_backward(d, TENSOR_F32, &attn_ok, b->f, b->f + 8, b->f + 12, b->f + 16, b->f + 24, NULL,
                                      b->f + 32, b->f + 40, b->f + 48, err);
}
static int attention_null_shape(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->attention_forward(d, TENSOR_F32, NULL, b->f, b->f + 16, b->f + 24, b->f + 40, b->f + 48, err);
}
static int rmsnorm_negative_eps(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->rmsnorm_forward(d, TENSOR_F32, b->f, b->f + 8, b->f + 16, b->f + 24, 2, 4, -1.0f, err);
}
static int residual_rmsnorm_norm_is_a(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->residual_rmsnorm_forward(d, TENSOR_F32, b->f, b->f + 8, b->f + 16, b->f + 8, b->f + 20,
                                            b->f + 24, 1, 4, 1e-5f, err);
}
static int rmsnorm_backward_null_w(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->rmsnorm_backward(d, TENSOR_F32, b->f, b->f + 4, b->f + 8, b->f + 12, NULL, b->f + 16, 1, 4, err);
}
static int rope_odd_head_size(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->rope_forward(d, TENSOR_F32, b->f, 6, 1, 2, 2, 3, b->f + 16, b->f + 24, NULL, err);
}
static int rope_backward_narrow_ld(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->rope_backward(d, TENSOR_F32, b->f, 7, 1, 2, 2, 4, b->f + 16, b->f + 24, NULL, err);
}
static int swiglu_h_is_gate_up(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->swiglu_forward(d, TENSOR_F32, b->f, b->f, 2, 4, err);
}
static int swiglu_backward_negative_f(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->swiglu_backward(d, TENSOR_F32, b->f, b->f + 16, b->f + 32, 2, -1, err);
}
static int sumsq_null_out(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sumsq(d, b->f, 4, NULL, err);
}
static int sumsq_null_x(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sumsq(d, NULL, 4, b->sumsq, err);
}
static int sum_f64_null_out(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sum_f64(d, b->sumsq, 1, NULL, err);
}
static int sum_f64_too_many(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sum_f64(d, b->sumsq, (size_t)UINT_MAX + 1, b->sumsq, err);
}
static int clip_scale_zero_max_norm(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->clip_scale(d, b->sumsq, 0.0, b->f, err);
}
static int clip_scale_nan_max_norm(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->clip_scale(d, b->sumsq, NAN, b->f, err);
}
static int clip_scale_null_sumsq(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->clip_scale(d, NULL, 1.0, b->f, err);
}
static int clip_scale_null_scale(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->clip_scale(d, b->sumsq, 1.0, NULL, err);
}
static int sgd_momentum_without_buffer(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sgd_step(d, b->f, b->f + 8, NULL, NULL, 8, &sgd_momentum, err);
}
static int sgd_null_args(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sgd_step(d, b->f, b->f + 8, NULL, b->f + 16, 8, NULL, err);
}
static int sgd_null_g(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->sgd_step(d, b->f, NULL, b->f + 32, b->f + 16, 8, &sgd_momentum, err);
}
static int adamw_zero_bias2(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->adamw_step(d, b->f, b->f + 8, NULL, b->f + 16, b->f + 24, 8, &adamw_no_bias2, err);
}
static int adamw_null_v(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->adamw_step(d, b->f, b->f + 8, b->f + 32, b->f + 16, NULL, 8, &adamw_step1, err);
}
static int adamw_odd_exempt_bounds(device *d, const bufs *b, ddp_err *err)
{
    adamw_args a = adamw_step1;
    a.exempt = (decay_exempt){.bounds = (const size_t *)(void *)(b->f + 40), .n_bounds = 3};
    return d->ops->adamw_step(d, b->f, b->f + 8, NULL, b->f + 16, b->f + 24, 8, &a, err);
}
static int sgd_null_exempt_bounds(device *d, const bufs *b, ddp_err *err)
{
    sgd_args a = sgd_momentum;
    a.exempt = (decay_exempt){.n_bounds = 2};
    return d->ops->sgd_step(d, b->f, b->f + 8, NULL, b->f + 16, 8, &a, err);
}
static int adamw_exempt_offsets_overflow(device *d, const bufs *b, ddp_err *err)
{
    adamw_args a = adamw_step1;
    a.exempt = (decay_exempt){.bounds = (const size_t *)(void *)(b->f + 40), .n_bounds = 2, .first = SIZE_MAX - 4};
    return d->ops->adamw_step(d, b->f, b->f + 8, NULL, b->f + 16, b->f + 24, 8, &a, err);
}
static int cast_to_bf16_null_dst(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->cast_f32_to_bf16(d, b->f, NULL, 8, err);
}
static int cast_to_f32_null_src(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->cast_bf16_to_f32(d, NULL, b->f, 8, 1.0f, err);
}
static int alloc_null_out(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->alloc(d, 16, NULL, err);
}
static int upload_null_src(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->upload(d, b->f, NULL, 16, err);
}
static int download_null_dst(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->download(d, NULL, b->f, 16, err);
}
static int copy_null_dst(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->copy(d, NULL, b->f, 16, err);
}
static int timer_create_null_out(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->timer_create(d, NULL, err);
}
static int timer_start_null(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->timer_start(d, NULL, err);
}
static int timer_take_null_ms(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->timer_take_ms(d, b->timer, NULL, err);
}

static int stamps_create_null_out(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->stamps_create(d, 4, NULL, err);
}
static int stamps_create_no_slots(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    device_stamps *s = NULL;
    return d->ops->stamps_create(d, 0, &s, err);
}
static int stamp_past_capacity(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->stamp(d, b->stamps, STAMP_SLOTS, NULL, err);
}
static int stamp_null(device *d, const bufs *b, ddp_err *err)
{
    (void)b;
    return d->ops->stamp(d, NULL, 0, NULL, err);
}
static int stamps_read_past_capacity(device *d, const bufs *b, ddp_err *err)
{
    double us[STAMP_SLOTS + 1];
    return d->ops->stamps_read(d, b->stamps, STAMP_SLOTS + 1, us, err);
}
static int stamps_read_null_us(device *d, const bufs *b, ddp_err *err)
{
    return d->ops->stamps_read(d, b->stamps, 1, NULL, err);
}
static int stamps_read_unstamped_origin(device *d, const bufs *b, ddp_err *err)
{
    double us[2];
    return d->ops->stamps_read(d, b->stamps, 2, us, err);
}

const bad_call device_bad_calls[] = {
    {"gemm: negative size m=-1 n=2 k=2", gemm_negative_m},
    {"gemm: leading dimension shorter than its row (lda=2 needs >= 3, ldb=2 needs >= 2, ldc=2 needs >= 2)",
     gemm_lda_below_k},
    {"gemm: leading dimension shorter than its row (lda=2 needs >= 3, ldb=2 needs >= 2, ldc=2 needs >= 2)",
     gemm_lda_below_m_transposed},
    {"gemm: leading dimension shorter than its row (lda=2 needs >= 2, ldb=2 needs >= 2, ldc=2 needs >= 3)",
     gemm_ldc_below_n},
    {"gemm: a is NULL", gemm_null_a},
    {"gemm: c is NULL", gemm_null_c},
    {"fill: x is NULL", fill_null},
    {"scale: x is NULL", scale_null},
    {"u8_to_f32: src is NULL", u8_to_f32_null_src},
    {"bias_add: negative shape [-1, 3]", bias_add_negative_rows},
    {"bias_add: b is NULL", bias_add_null_b},
    {"act_forward: unknown activation 99", act_forward_unknown},
    {"act_backward: unknown activation 7", act_backward_unknown_empty},
    {"act_backward: dy is NULL", act_backward_null_dy},
    {"bias_grad: negative shape [2, -4]", bias_grad_negative_cols},
    {"bias_grad: dy is NULL", bias_grad_null_dy},
    {"softmax_xent: zero classes", softmax_xent_zero_classes},
    {"softmax_xent: labels is NULL", softmax_xent_null_labels},
    {"softmax_xent: stats is NULL", softmax_xent_null_stats},
    {"softmax_xent: row stride 3 is shorter than the 4 classes", softmax_xent_short_stride},
    {"gemm_bias: k=0, but a linear layer needs k >= 1", gemm_bias_zero_k},
    {"gemm_bias: gemm: leading dimension shorter than its row (lda=4 needs >= 4, ldb=3 needs >= 4, ldc=3 needs >= 3)",
     gemm_bias_short_ldb},
    {"gemm_bias: bias is NULL", gemm_bias_null_bias},
    {"gemm_bias_gelu: pre and y are the same tensor (backward needs both)", gemm_bias_gelu_pre_is_y},
    {"gemm_gelu_backward: pre is NULL", gemm_gelu_backward_null_pre},
    {"gemm_gelu_backward: dx overwrites pre, which it is computed from", gemm_gelu_backward_dx_is_pre},
    {"add: b is NULL", add_null_b},
    {"embedding_forward: negative size (1, -2, 4)", embedding_negative_t},
    {"embedding_forward: wte is NULL", embedding_null_wte},
    {"embedding_backward: dwte is NULL", embedding_backward_null_dwte},
    {"layernorm_forward: rows of zero channels have no mean", layernorm_zero_channels},
    {"residual_layernorm_forward: ln_out is also res_out", residual_layernorm_ln_is_res},
    {"residual_layernorm_forward: ln_out is also b", residual_layernorm_ln_is_b},
    {"residual_layernorm_forward: b is NULL", residual_layernorm_null_b},
    {"residual_layernorm_forward: rows of zero channels have no mean", residual_layernorm_zero_channels},
    {"embedding_backward: V = 0, but the tokens index rows of dwte", embedding_backward_no_rows},
    {"embedding_backward: packed rows need doc_start and doc_end, doc_end is NULL", embedding_backward_half_docs},
    {"layernorm_backward: rstd is NULL", layernorm_backward_null_rstd},
    {"attention_forward: 2 query heads cannot share 3 key/value heads of size 4", attention_heads_not_grouped},
    {"attention_forward: row strides ld_q 8, ld_kv 3, ld_o 8 are narrower than the heads they hold (8, 4, 8)",
     attention_narrow_ld},
    {"attention_forward: scale 0 is not a positive finite number", attention_bad_scale},
    {"attention_backward: lse is NULL", attention_backward_null_lse},
    {"attention_forward: s is NULL", attention_null_shape},
    {"rmsnorm_forward: eps -1 is not a finite number >= 0", rmsnorm_negative_eps},
    {"residual_rmsnorm_forward: norm_out is also a", residual_rmsnorm_norm_is_a},
    {"rmsnorm_backward: w is NULL", rmsnorm_backward_null_w},
    {"rope_forward: head size 3 is odd, but RoPE rotates pairs (j, j + hs/2)", rope_odd_head_size},
    {"rope_backward: row stride ld 7 is narrower than the 2 heads of 4 (8)", rope_backward_narrow_ld},
    {"swiglu_forward: h overwrites gate_up, which it is computed from", swiglu_h_is_gate_up},
    {"swiglu_backward: negative shape [2, -1]", swiglu_backward_negative_f},
    {"sumsq: out is NULL", sumsq_null_out},
    {"sumsq: x is NULL", sumsq_null_x},
    {"sum_f64: out is NULL", sum_f64_null_out},
    {"sum_f64: 4294967296 doubles, more than one block adds", sum_f64_too_many},
    {"clip_scale: max_norm is 0, must be > 0 (clipping off: no scale)", clip_scale_zero_max_norm},
    {"clip_scale: max_norm is nan, must be > 0 (clipping off: no scale)", clip_scale_nan_max_norm},
    {"clip_scale: sumsq is NULL", clip_scale_null_sumsq},
    {"clip_scale: scale is NULL", clip_scale_null_scale},
    {"sgd_step: momentum 0.9 needs a momentum buffer", sgd_momentum_without_buffer},
    {"sgd_step: args is NULL", sgd_null_args},
    {"sgd_step: g is NULL", sgd_null_g},
    {"adamw_step: bias2_sqrt is 0, must be > 0 (sqrt(1 - beta2^step), step >= 1)", adamw_zero_bias2},
    {"adamw_step: v is NULL", adamw_null_v},
    {"adamw_step: 3 exemption bounds, not [start, end) pairs", adamw_odd_exempt_bounds},
    {"sgd_step: exempt.bounds is NULL with 2 bounds", sgd_null_exempt_bounds},
    {"adamw_step: element offsets 18446744073709551611 + 8 overflow", adamw_exempt_offsets_overflow},
    {"cast_f32_to_bf16: dst is NULL", cast_to_bf16_null_dst},
    {"cast_bf16_to_f32: src is NULL", cast_to_f32_null_src},
    {"alloc: out is NULL", alloc_null_out},
    {"upload: src is NULL", upload_null_src},
    {"download: dst is NULL", download_null_dst},
    {"copy: dst is NULL", copy_null_dst},
    {"timer_create: out is NULL", timer_create_null_out},
    {"timer_start: t is NULL", timer_start_null},
    {"timer_take_ms: ms is NULL", timer_take_null_ms},
    {"stamps_create: out is NULL", stamps_create_null_out},
    {"stamps_create: no slots (capacity 0)", stamps_create_no_slots},
    {"stamp: slot 4 of 4", stamp_past_capacity},
    {"stamp: s is NULL", stamp_null},
    {"stamps_read: 5 slots of 4", stamps_read_past_capacity},
    {"stamps_read: us is NULL", stamps_read_null_us},
    {"stamps_read: slot 0, which the others are timed from, was never stamped", stamps_read_unstamped_origin},
};
const size_t device_n_bad_calls = sizeof device_bad_calls / sizeof device_bad_calls[0];
