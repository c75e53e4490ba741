/* sample.h — what one sample is: the element type and count of its input and of its target, and
 * how many values a target can take.
 *
 * A dataset describes the samples it holds with a sample_layout and a model the samples it takes
 * (models/model.h), so the training job stages batches of pixels and of token ids alike, sized
 * from the layout, and refuses a model and data that do not fit together. Plain data and sizes;
 * nothing here reads data or knows a model. */
#ifndef DDP_SAMPLE_H
#define DDP_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum sample_dtype { SAMPLE_U8, SAMPLE_I32 } sample_dtype;

/* count elements of one type: "u8 x 784" (a 28x28 image), "i32 x 1" (a class id) */
typedef struct sample_field {
    sample_dtype dtype;
    int64_t count;
} sample_field;

typedef struct sample_layout {
    sample_field input;
    sample_field target;
    int64_t n_classes;  /* targets lie in [0, n_classes): class ids, or token ids of a vocabulary */
} sample_layout;

static inline size_t sample_dtype_size(sample_dtype t) { return t == SAMPLE_U8 ? 1 : 4; }
static inline const char *sample_dtype_name(sample_dtype t) { return t == SAMPLE_U8 ? "u8" : "i32"; }

/* Bytes of this field in one sample. */
static inline size_t sample_field_bytes(sample_field f) { return (size_t)f.count * sample_dtype_size(f.dtype); }

static inline bool sample_field_equal(sample_field a, sample_field b)
{
    return a.dtype == b.dtype && a.count == b.count;
}

/* "u8 x 784 -> i32 x 1 in [0, 10)" */
static inline void sample_layout_format(const sample_layout *l, char *out, size_t n)
{
    snprintf(out, n, "%s x %lld -> %s x %lld in [0, %lld)", sample_dtype_name(l->input.dtype),
             (long long)l->input.count, sample_dtype_name(l->target.dtype), (long long)l->target.count,
             (long long)l->n_classes);
}

#endif
