/* mlp.h — the MLP's own entry points beyond model.h: building it, and running it on float inputs.
 *
 * The MLP takes uint8 pixels and int32 class ids (model_batch; io.sample u8 x in -> i32 x 1);
 * the float entry points exist for checks against outside references (PyTorch fixtures, finite
 * differences) whose inputs are already floats, and for reading the logits of the last forward
 * pass. Same semantics as the model_ops they mirror. This header must not grow training-loop
 * concerns. */
#ifndef DDP_MLP_H
#define DDP_MLP_H

#include "model.h"

/* Fashion-MNIST normalisation applied to uint8 inputs (the constants torchvision users use). */
#define MLP_INPUT_MEAN 0.2860f
#define MLP_INPUT_STD 0.3530f

/* An MLP for data of this layout: its input width is data->input.count and its class count
 * data->n_classes; the data must be u8 inputs and i32 x 1 targets. buffers: model_buffers. */
int mlp_create(const mlp_opts *opts, device *dev, const sample_layout *data, int64_t max_rows, model_buffers buffers,
               model **out, ddp_err *err);

/* model_ops.forward_backward with x = float inputs [rows, input width] on the device. */
int mlp_forward_backward_f32(model *m, const float *x, const int32_t *targets, int64_t rows, float grad_scale,
                             bool accumulate, grad_ready_fn grad_ready, void *ctx, float *stats, ddp_err *err);
/* model_ops.evaluate with float inputs. */
int mlp_evaluate_f32(model *m, const float *x, const int32_t *targets, int64_t rows, float *stats, ddp_err *err);

/* Device pointer to the last forward pass's logits [rows, classes]; valid until the next pass. */
const float *mlp_logits(const model *m);

#endif
