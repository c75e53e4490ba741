/* hf_folder_write.h — a Hugging Face `save_pretrained` folder written from tensors a model's writer
 * has already laid out as HF stores them (names, shapes, float32 values), without knowing the model.
 *
 * One model.safetensors, or above the shard limit the shards model-0000K-of-0000N.safetensors
 * (filled in the given order, a tensor beyond the limit alone in its own, as huggingface_hub's
 * split_state_dict_into_shards does) and model.safetensors.index.json (json.dumps' indent 2,
 * weight_map sorted by name); config.json's text comes from the caller. Each file is written whole
 * (runtime/base/replace_file.h); an earlier export's config.json is removed before the first file
 * and the new one written after the last, so a folder a failed export leaves is never read as a
 * model; files of an earlier export this one does not rewrite (model.safetensors, the index,
 * model-*-of-*.safetensors) are then removed, as save_pretrained does. Must not know any model or
 * what config.json says. */
#ifndef DDP_HF_FOLDER_WRITE_H
#define DDP_HF_FOLDER_WRITE_H

#include "runtime/base/replace_file.h"
#include "hf_folder.h"
#include "safetensors_write.h"

#define HF_DEFAULT_SHARD_BYTES 5000000000ull  /* save_pretrained's max_shard_size "5GB" */

/* Writes the n tensors (distinct names) into the existing folder dir as dtype (ST_F32 or ST_BF16),
 * shards of at most max_shard_bytes of tensor data, then config.json through write_config(f, ctx);
 * *files gets the number of safetensors files. */
int hf_folder_write(const char *dir, const st_out_tensor *tensors, int n, st_dtype dtype, uint64_t max_shard_bytes,
                    replace_file_stream_writer write_config, void *ctx, int *files, ddp_err *err);

#endif
