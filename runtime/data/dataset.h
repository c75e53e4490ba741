/* dataset.h — the datasets a job trains on: Fashion-MNIST from gzipped IDX files or synthetic
 * samples, held in memory as the raw bytes of each sample's input and target; or token shards
 * (token_shards.h), mapped, whose samples are the non-overlapping windows of T + 1 tokens.
 *
 * Every dataset describes its samples with a sample_layout (sample.h); Fashion-MNIST images stay
 * uint8 (47 MB for the training set, not 188 MB of floats) and are converted on the device, and
 * class ids are int32, the type models take. Batches are gathered as bytes, whatever the types.
 * A file that is missing, truncated, has a wrong magic or inconsistent sizes is rejected with its
 * path named (and the Debian package that ships it), and nothing is half-loaded. This module must
 * not know about ranks or batching order (sampler.h) or about models. */
#ifndef DDP_DATA_H
#define DDP_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/data/sample.h"
#include "runtime/data/doc_packing.h"
#include "runtime/data/token_shards.h"

typedef struct dataset {
    int64_t n;              /* samples */
    sample_layout layout;   /* Fashion-MNIST: u8 x 784 pixels -> i32 x 1 class id in [0, 10) */
    uint8_t *inputs;        /* n samples of sample_field_bytes(layout.input) bytes */
    uint8_t *targets;       /* n samples of sample_field_bytes(layout.target) bytes */
    token_shards *tokens;   /* token data instead of inputs/targets: sample i is window i */
    doc_packing *packed;    /* with tokens, fine-tuning data: sample i is packed row i instead */
    bool has_vocab_fingerprint; /* with tokens: tokenizer.bin records its vocabulary's fingerprint */
    uint64_t vocab_fingerprint; /* ... which is this (runtime/data/tokenizer.h) */
    char name[64];          /* "fashion-mnist/train", "synthetic/test", "tokens/val", ... */
} dataset;

/* dir holds train-images-idx3-ubyte.gz etc.; train selects train or t10k files.
 * On any error *out is all zero (nothing allocated) and err names the offending file. */
int dataset_load_fashion_mnist(const char *dir, bool train, dataset *out, ddp_err *err);
/* Random bytes with labels that depend on the inputs (learnable), reproducible from seed:
 * u8 x features -> i32 x 1 class id. label = argmax of a random linear projection, seed's (stream
 * RNG_SYNTHETIC) for both splits; the train split's images follow it in that stream, the test
 * split's (test) come from stream RNG_SYNTHETIC_TEST. 2 <= classes <= 256. name is set to
 * "synthetic"; callers may overwrite it. */
int dataset_make_synthetic(int64_t n, int64_t features, int64_t classes, uint64_t seed, bool test, dataset *out,
                           ddp_err *err);
/* The SPLIT shards of DIR (scripts/prepare-text's output) as windows of seq_len tokens:
 * i32 x seq_len -> i32 x seq_len, next-token targets, n_classes = the vocabulary of DIR/tokenizer.bin
 * (its fingerprint kept beside). Every token is checked against that vocabulary here, so a foreign
 * or corrupt shard is refused before training with the file and the token's index named. Fewer
 * tokens than one window (seq_len + 1) is a usage error naming the split and both counts. */
int dataset_load_tokens(const char *dir, const char *split, int64_t seq_len, dataset *out, ddp_err *err);
/* The same shards with their .docs and .mask (scripts/prepare-chat) as packed rows of seq_len
 * positions (doc_packing.h): i32 x seq_len tokens -> i32 x seq_len targets, DOC_NO_TARGET where a
 * position has none; every file checked as dataset_load_tokens and doc_packing_open do. */
int dataset_load_packed(const char *dir, const char *split, int64_t seq_len, dataset *out, ddp_err *err);
void dataset_free(dataset *d);
/* The bytes of samples idx[0..count): inputs_out gets count inputs back to back, targets_out
 * count targets (each as the layout describes); for packed rows docs_out (else unused, may be NULL)
 * their document bounds, int32 [2, count, seq_len] (doc_packing_gather). */
void dataset_gather(const dataset *d, const int64_t *idx, int64_t count, void *inputs_out, void *targets_out,
                    int32_t *docs_out);
/* The targets the loss counts in samples idx[0..count): every target element, or in packed rows
 * the trainable ones. */
int64_t dataset_targets(const dataset *d, const int64_t *idx, int64_t count);
/* The input positions of samples idx[0..count) that hold tokens: all of them, or in packed rows
 * those that are not padding. */
int64_t dataset_tokens(const dataset *d, const int64_t *idx, int64_t count);

#endif
