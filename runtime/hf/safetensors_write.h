/* safetensors_write.h — a safetensors file written as `save_pretrained` (the reference
 * implementation's serializer) writes it: the 8-byte little-endian header length, the header as
 * compact JSON — "__metadata__" {"format": "pt"} first, then every tensor in name order (byte
 * order), each {"dtype", "shape", "data_offsets"} with the data packed contiguously in that same
 * order — padded with spaces to a multiple of 8 bytes, then the data, little-endian.
 *
 * Values come as float32 and are stored as F32 (the same bits) or BF16 (rounded to nearest even,
 * runtime/base/half.h; a NaN stays a NaN). The file is written whole or not at all
 * (runtime/base/replace_file.h). Must not know models or what any tensor is for; the reading side
 * is safetensors.h. */
#ifndef DDP_SAFETENSORS_WRITE_H
#define DDP_SAFETENSORS_WRITE_H

#include "safetensors.h"

typedef struct st_out_tensor {
    const char *name;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    const float *values;   /* the shape's elements, row-major */
} st_out_tensor;

/* Elements of t's shape. */
uint64_t safetensors_out_numel(const st_out_tensor *t);

/* Writes the n tensors (distinct names) to path as dtype (ST_F32 or ST_BF16). A duplicate name,
 * another dtype or a shape beyond SAFETENSORS_MAX_DIMS is a usage error naming it; nothing is
 * written then. */
int safetensors_write(const char *path, const st_out_tensor *tensors, size_t n, st_dtype dtype, ddp_err *err);

#endif
