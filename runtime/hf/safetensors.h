/* safetensors.h — a safetensors file (Hugging Face's tensor format), memory-mapped read-only and
 * validated whole before any tensor is handed out.
 *
 * The file: an 8-byte little-endian header length N, N bytes of JSON (an object: each tensor's
 * name to {"dtype", "shape", "data_offsets": [begin, end)}, offsets counted from the end of the
 * header, plus an optional "__metadata__" object of strings), then the data area. Every dtype of
 * the format is accepted (little-endian); the values read are F32, F16 and BF16 tensors'. Refused,
 * naming the file and the tensor: a header length beyond the file or SAFETENSORS_MAX_HEADER, a
 * header that is not a JSON object (json_doc.h: keys appear once), an entry with a missing, extra
 * or ill-typed field, a dtype the format does not have, begin > end, a
 * size other than the shape's elements times the dtype's size, and ranges that leave a gap,
 * overlap or do not end exactly at the end of the file (the reference implementation's rules).
 * A failed open leaves nothing mapped or allocated. Must not know models or tensor names' meaning,
 * and must not print. */
#ifndef DDP_SAFETENSORS_H
#define DDP_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"

#define SAFETENSORS_MAX_HEADER 100000000 /* bytes, the reference implementation's limit */
#define SAFETENSORS_MAX_DIMS 8

/* Every dtype of the format, so that any file opens; only the first three are values ddprun reads
 * (safetensors_dtype_readable): a model's tensor of another is refused by the reader that takes it,
 * and one no model takes (a mask buffer saved as U8 or BOOL) is skipped like any other. */
typedef enum {
    ST_F32, ST_F16, ST_BF16,
    ST_F64, ST_F8_E4M3, ST_F8_E5M2, ST_BOOL, ST_U8, ST_I8, ST_I16, ST_U16, ST_I32, ST_U32, ST_I64, ST_U64
} st_dtype;

typedef struct st_tensor {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    uint64_t numel;
    uint64_t begin, end;  /* data_offsets: bytes [begin, end) of the data area */
    const uint8_t *data;  /* in the mapping: numel values of the dtype, little-endian */
} st_tensor;

typedef struct safetensors {
    char *path;
    const uint8_t *map;
    size_t map_len;
    st_tensor *tensors;   /* sorted by name */
    size_t count;
} safetensors;

/* Maps and validates path; *out is zeroed on failure. */
int safetensors_open(const char *path, safetensors *out, ddp_err *err);
void safetensors_close(safetensors *st);

/* The tensor called name, or NULL. */
const st_tensor *safetensors_find(const safetensors *st, const char *name);
/* "F32", "F16", "BF16", "U8" … as the file spells it */
const char *safetensors_dtype_name(st_dtype d);
/* Bytes one element of d takes */
unsigned safetensors_dtype_size(st_dtype d);
/* d is F32, F16 or BF16: values the conversions below read. */
bool safetensors_dtype_readable(st_dtype d);
/* The usage error for tensor t of file path when its dtype is not readable (DDP_OK when it is). */
int safetensors_check_readable(const char *path, const st_tensor *t, ddp_err *err);
/* t's numel values as float32 into out (F16 and BF16 widened exactly); t's dtype readable. */
void safetensors_to_f32(const st_tensor *t, float *out);
/* Values [first, first + n) of t the same way. */
void safetensors_to_f32_range(const st_tensor *t, uint64_t first, uint64_t n, float *out);
/* a and b hold as many values (of readable dtypes: false otherwise), equal as float32 (compared a block at a time, in bounded memory). */
bool safetensors_equal_f32(const st_tensor *a, const st_tensor *b);
/* t's data no longer needed: the pages that hold only t's bytes leave this process's memory (they
 * are read from the file again should t be read again). */
void safetensors_release(const st_tensor *t);

#endif
