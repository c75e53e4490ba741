/* model.h — what every model (the MLP, GPT-2) offers the training loop.
 *
 * A model describes itself: what one sample's input and target are (model_io: element type and
 * count, so the training job stages pixels and token ids alike), which metrics it reports, and
 * its kind and shape settings as text (description). All parameters live in one contiguous
 * device buffer and all gradients in another with the same layout, so the DDP reducer's buckets
 * are plain slices — or, under ZeRO-2 (model_buffers.grads_by_unit), each unit's gradients in a
 * window the reducer hands out (model_grad says where). tensors[] names each parameter slice (PyTorch names: fc1.weight, fc1.bias,
 * ...) in buffer order, and says whether weight decay applies to it; the backward pass produces gradients from the end of the buffer towards
 * the start and reports each finished range through grad_ready, which is how all-reduce overlaps
 * with the rest of backward. A model must not communicate, step an optimizer, or read data. */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/data/sample.h"
#include "runtime/device/device.h"
#include "runtime/base/err.h"
#include "runtime/base/rng.h"
#include "models/model_opts.h"

#define MODEL_DESCRIPTION_MAX 256
/* A parameter tensor's name, NUL included: the longest, a Llama's
 * model.layers.NNN.post_attention_layernorm.weight, takes 49 bytes (checkpoints store names in
 * CKPT_NAME_MAX-byte fields with a buffer prefix, so the size is no part of any file format) */
#define MODEL_TENSOR_NAME_MAX 64

typedef struct param_tensor {
    char name[MODEL_TENSOR_NAME_MAX];
    int ndim;
    int64_t shape[4];
    size_t offset;      /* in elements, into params/grads */
    size_t numel;
    bool weight_decay;  /* the optimizer's weight decay applies (PyTorch param groups' choice) */
} param_tensor;

/* A unit: consecutive parameter tensors that belong together — the embeddings, a transformer
 * block, the final norm and head, one of the MLP's layers — in the order the forward pass uses
 * them: what fully sharded data parallelism gathers before the unit's forward and frees after it,
 * and, when `block`, a stretch of the forward that recompute may replay from its input (a
 * transformer block). A tied head's weight is the embeddings unit's. */
typedef struct model_unit {
    int first_tensor, n_tensors;  /* m->tensors[first_tensor .. first_tensor + n_tensors) */
    size_t offset, count;         /* their parameters: [offset, offset + count) of params and grads */
    bool block;
} model_unit;

/* What the model takes and reports. Every model reports its loss: the mean cross-entropy over
 * all target elements (rows x sample.target.count of them). */
typedef struct model_io {
    sample_layout sample;   /* one sample's input and target as the model takes them */
    bool classifier;        /* counts correct predictions, so accuracy is a metric */
    bool language_model;    /* inputs are token sequences, so tokens per second is a metric; takes packed
                             * rows (model_batch.docs): attention and positions per document */
} model_io;

/* One micro-batch, already on the device: rows samples of inputs and of targets, each laid out
 * as model_io.sample describes. */
typedef struct model_batch {
    const void *inputs;
    const void *targets;
    int64_t rows;
    /* Packed rows of a language model, else NULL: device int32 [2, rows, T],
     * the plane of each position's document start then of its end (attn_shape's doc_start and
     * doc_end); a target of XENT_NO_TARGET has no loss. */
    const int32_t *docs;
} model_batch;

/* Gradients [offset, offset + count) are final for this backward pass. */
typedef void (*grad_ready_fn)(void *ctx, size_t offset, size_t count);

/* A model without a whole gradient buffer (model_buffers.grads_by_unit): where the backward
 * writes unit `unit`'s gradients, a zeroed buffer of at least units[unit].count floats (the
 * gradient of parameter offset at [offset - units[unit].offset]), valid until the unit's range has
 * been reported final through grad_ready. Never NULL. */
typedef float *(*grad_window_fn)(void *ctx, int unit);

/* A model whose parameters are not all on this rank (model_buffers.params_by_unit, after
 * model_drop_params): where the passes read unit `unit`'s compute-type parameters, a buffer of at
 * least units[unit].count elements gathered from every rank's shard, valid until another unit's
 * is asked for twice over (two units besides the first are resident at once). Never NULL. */
typedef const void *(*param_window_fn)(void *ctx, int unit);

/* How a model's flat buffers are laid out beyond its parameters. */
typedef struct model_buffers {
    /* params and grads hold this many more floats past n_params, zero and part of no tensor:
     * sharded collectives (ZeRO-1) pad their last block into them instead of copying */
    size_t param_tail;
    /* no whole gradient buffer (m->grads NULL): each unit's gradients go where the window
     * function given by model_set_grad_windows says (ZeRO-2), and forward_backward always
     * starts them from zero (accumulate is ignored) */
    bool grads_by_unit;
    /* no whole parameter buffer (m->params NULL) nor bf16 compute copy: the caller keeps each
     * rank's shard and says where each unit's parameters are gathered (model_set_param_windows;
     * ZeRO-3) */
    bool params_by_unit;
} model_buffers;
#define MODEL_BUFFERS_WHOLE ((model_buffers){0})

typedef struct model model;

struct model_ops {
    /* Forward + backward. Loss is the cross-entropy summed over target elements times grad_scale,
     * so for a mean over the global batch pass 1/(rows * target elements * grad_accum) and average
     * across ranks. accumulate=false overwrites grads; true adds to them (gradient accumulation).
     * grad_ready may be NULL. stats: device float[2], += (loss sum, correct count); the count
     * stays 0 unless io.classifier. */
    int (*forward_backward)(model *m, const model_batch *b, float grad_scale, bool accumulate,
                            grad_ready_fn grad_ready, void *ctx, float *stats, ddp_err *err);
    /* Forward only; stats += (loss sum, correct count). */
    int (*evaluate)(model *m, const model_batch *b, float *stats, ddp_err *err);
    /* Values [lo, hi) of tensor t's initial values into dst[0 .. hi - lo), each one every place
     * it is written: value j at position j of key's counter-based stream (rng_key_of(run.seed,
     * RNG_INIT, t's index), model_init.c), so a rank draws any slice of any tensor alone, in any
     * thread, and every rank and backend gets the same values. */
    void (*init_tensor)(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi, float *dst);
    /* The parameters changed (initialised, loaded, broadcast or stepped; `step` optimizer steps
     * done, in a run seeded `seed`): rebuild what the model derives from them, i.e. the bf16
     * copy it computes with under precision bf16. NULL when the model computes on m->params. */
    int (*params_changed)(model *m, uint64_t seed, uint64_t step, ddp_err *err);
    /* Language models: the last forward pass's logits on the device, [rows * T, *ld] of type
     * m->act_dtype with the vocabulary in the first io.sample.n_classes columns (after
     * forward_backward they hold the gradient instead; after evaluate the logits). NULL for
     * other models, and for a language model whose classifier takes micro-batches in chunks
     * (lm_run.logits_bytes): no pass leaves all of them. */
    const void *(*logits)(const model *m, int64_t *ld);
    /* Language models, after evaluate: the logits of token row `row` (of rows * T) into *out,
     * m->act_dtype with the vocabulary in the first io.sample.n_classes columns, valid until the
     * next pass — in place when the pass left every row's, else the head applied again to that
     * row's final hidden state, which the pass keeps (the classifier in chunks). NULL for other
     * models. */
    int (*row_logits)(model *m, int64_t row, const void **out, ddp_err *err);
    void (*destroy)(model *m);
};

struct model {
    const struct model_ops *ops;
    device *dev;
    float *params, *grads;           /* device buffers, n_params floats each */
    tensor_dtype act_dtype;          /* activations' and logits' type (model_opts.compute) */
    size_t n_params;
    param_tensor *tensors;           /* n_tensors, in buffer order; freed by model_free_tensors */
    int n_tensors;
    model_unit *units;               /* n_units covering the tensors in order; freed with them */
    int n_units;
    model_io io;
    /* Kind and shape settings, e.g. "mlp hidden=[1024,1024] activation=relu in=784 classes=10":
     * the training log prints it, checkpoints record it and a resume must find the same text. */
    char description[MODEL_DESCRIPTION_MAX];
    int64_t max_rows;                /* largest micro-batch forward/backward accepts */
    size_t activation_bytes;         /* device memory for activations and backward scratch */
    /* A training step's FLOPs (forward and backward) per sample by the usual count, for MFU: 6 per
     * weight of every GEMM (2 forward, 4 backward), and for attention PaLM's 12 x layers x width x
     * sequence length per token; 0 when the model does not say */
    double train_flops_per_sample;
    size_t param_tail;               /* model_buffers.param_tail */
    bool grads_by_unit;              /* model_buffers.grads_by_unit: grads is NULL */
    grad_window_fn grad_window;      /* with grads_by_unit: model_set_grad_windows' */
    void *grad_window_ctx;
    bool params_by_unit;             /* model_buffers.params_by_unit */
    param_window_fn param_window;    /* once set (model_set_param_windows), the passes read there */
    void *param_window_ctx;
    void *impl;
};

/* (model_registry.c) Builds the model opts names (opts->kind with that kind's settings, computing in opts->compute)
 * for samples of the given layout (a model whose shape follows the data, like the MLP's input
 * width and class count, takes it from there), with activation buffers for up to max_rows rows
 * and the flat buffers as `buffers` says. Parameters are left uninitialised. A layout the model cannot take is a usage error naming both. */
int model_create(const model_opts *opts, device *dev, const sample_layout *data, int64_t max_rows, model_buffers buffers,
                 model **out, ddp_err *err);

/* (model_registry.c) What model_create would allocate, without a device or any allocation beyond
 * the table: into the zeroed m, the parameter tensors (m->tensors, n_tensors, n_params), the
 * activation bytes and the compute type (act_dtype), for the memory plan of a model that is not
 * built. Only the models whose shape is all in opts (GPT-2, Llama); the MLP's is a usage error.
 * Free with model_free_tensors. */
int model_size(const model_opts *opts, const sample_layout *data, int64_t max_rows, model *m, ddp_err *err);

/* (model_registry.c) The options that rebuild the model a description names (model.description,
 * as a checkpoint records it): its kind and shape, computing in float32, and *seq_len, the
 * sequence length it was built for. Only models whose description says the whole shape (GPT-2,
 * Llama) can be rebuilt; any other description is a usage error quoting it. */
int model_opts_from_description(const char *desc, model_opts *opts, int64_t *seq_len, ddp_err *err);

/* (model_registry.c) The options model_create takes for a model of kind whose settings o holds
 * (the config's model section), computing in compute. */
model_opts model_opts_make(model_kind kind, const model_kind_opts *o, tensor_dtype compute);

/* For the models' create functions, once n_params is known: allocates params (unless
 * m->params_by_unit) and grads (unless m->grads_by_unit) with m->param_tail spare floats each and
 * zeroes the spare ones. */
int model_alloc_params(model *m, ddp_err *err);

/* With grads_by_unit: the backward asks fn(ctx, unit) where each unit's gradients go. */
void model_set_grad_windows(model *m, grad_window_fn fn, void *ctx);

/* With params_by_unit: from now on the passes read each unit's parameters from fn(ctx, unit)
 * (a whole buffer the caller allocated into m->params meanwhile is freed). */
void model_set_param_windows(model *m, param_window_fn fn, void *ctx);

/* For the models' passes: the compute-type parameter at element offset `offset`, of elem bytes —
 * in whole (the model's compute copy, or m->params), or inside its unit's gathered window. */
const void *model_weight(model *m, const void *whole, size_t elem, size_t offset);

/* For the models' backward passes: where the gradient of parameter `offset` is written now —
 * m->grads + offset, or with grads_by_unit inside its unit's window. */
float *model_grad(model *m, size_t offset);

/* For the models' forward_backward: a pass that does not accumulate starts from zero gradients
 * (a unit's window is zeroed when handed out, so with grads_by_unit there is nothing to do). */
int model_zero_grads(model *m, ddp_err *err);

/* Pieces of the flat parameter buffer a caller keeps in a host buffer of its own: elements
 * [offset, offset + count) of the parameters at host[at ...]. A ZeRO-3 rank's shard is such a list
 * (its optimizer parts), so it fills its shard without ever holding the whole model. */
typedef struct param_piece {
    size_t offset, count, at;
} param_piece;

/* The number of elements of the model's largest tensor (at least 1). */
size_t model_largest_tensor(const model *m);
/* Of the values v of parameters [offset, offset + n), those inside the pieces into host. */
void param_pieces_take(const param_piece *pieces, int n_pieces, float *host, size_t offset, const float *v, size_t n);

/* The initial parameters (m->ops->init_tensor) into m->params, through a host buffer of the
 * whole model. */
int model_init_params(model *m, uint64_t seed, ddp_err *err);
/* The same into the pieces of host only, drawing nothing else, in chunks spread over the OpenMP
 * threads (the values do not depend on their number); *digest sums up a probe every rank draws
 * whatever its pieces (each tensor's first, middle and last value), so ranks that drew
 * differently (another build, another seed) can find it out without holding each other's
 * pieces. */
int model_init_params_pieces(const model *m, uint64_t seed, const param_piece *pieces, int n_pieces, float *host,
                             uint64_t *digest, ddp_err *err);

/* m->ops->params_changed where the model has one. */
int model_params_changed(model *m, uint64_t seed, uint64_t step, ddp_err *err);

/* PyTorch nn.Linear's default init (kaiming_uniform(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * for weights and biases), for models built of Linear layers: an init_tensor. */
void model_init_linear_tensor(const model *m, const rng_key *key, const param_tensor *t, size_t lo, size_t hi,
                              float *dst);
/* For an init_tensor: values [lo, hi) of a tensor whose first `drawn` values are N(0, std²) from
 * key's stream and the rest (a vocabulary's padding rows) 0, into dst[0 .. hi - lo). */
void model_draw_normal(const rng_key *key, size_t lo, size_t hi, size_t drawn, double std, float *dst);
/* For an init_tensor: dst[0 .. n) = v. */
void model_fill(float *dst, size_t n, float v);

/* Starts the next unit (model_unit); the tensors model_add_tensor appends from here on are its. */
int model_begin_unit(model *m, bool block, ddp_err *err);

/* Appends a tensor of shape [d0] (d1 == 0) or [d0, d1] at *offset, advancing it; the table grows
 * as needed. Fails only when out of memory, for a name of MODEL_TENSOR_NAME_MAX bytes or more
 * (DDP_ERUNTIME: a model's own names must fit whole), or when the parameter buffer up to the
 * tensor's end would not fit in 64 bits, in elements or in bytes (DDP_EUSAGE: the shape is too
 * large). */
int model_add_tensor(model *m, const char *name, int64_t d0, int64_t d1, bool weight_decay, size_t *offset,
                     ddp_err *err);
void model_free_tensors(model *m);

const param_tensor *model_find_tensor(const model *m, const char *name);

#endif
