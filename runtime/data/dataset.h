/* dataset.h — datasets held in memory as bytes: Fashion-MNIST from gzipped IDX files, or synthetic.
 *
 * Images stay uint8 (47 MB for the training set, not 188 MB of floats); batches are gathered as
 * bytes and converted on the device. A file that is missing, truncated, has a wrong magic or
 * inconsistent sizes is rejected with its path named (and the Debian package that ships it), and
 * nothing is half-loaded. This module must not know about ranks or batching order (sampler.h). */
#ifndef DDP_DATA_H
#define DDP_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/base/err.h"

typedef struct dataset {
    int64_t n;          /* samples */
    int64_t features;   /* bytes per sample (784) */
    int64_t classes;    /* 10 */
    uint8_t *images;    /* n * features */
    uint8_t *labels;    /* n */
    char name[64];      /* "fashion-mnist/train", "synthetic/test", ... */
} dataset;

/* dir holds train-images-idx3-ubyte.gz etc.; train selects train or t10k files.
 * On any error *out is all zero (nothing allocated) and err names the offending file. */
int dataset_load_fashion_mnist(const char *dir, bool train, dataset *out, ddp_err *err);
/* Random bytes with labels that depend on the inputs (learnable), reproducible from seed.
 * label = argmax of a fixed random linear projection (stream RNG_SYNTHETIC); 2 <= classes <= 256.
 * name is set to "synthetic"; callers may overwrite it (e.g. "synthetic/test"). */
int dataset_make_synthetic(int64_t n, int64_t features, int64_t classes, uint64_t seed, dataset *out, ddp_err *err);
void dataset_free(dataset *d);
/* x_out[i*features..] = images[idx[i]], y_out[i] = labels[idx[i]] */
void dataset_gather(const dataset *d, const int64_t *idx, int64_t count, uint8_t *x_out, int32_t *y_out);

#endif
