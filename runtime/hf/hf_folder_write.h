/* hf_folder_write.h — a Hugging Face `save_pretrained` folder written from tensors a model's writer
 * has already laid out as HF stores them (names, shapes, float32 values), without knowing the model.
 *
 * One model.safetensors, or above the shard limit the shards model-0000K-of-0000N.safetensors
 * (filled in the given order, a tensor beyond the limit alone in its own, as huggingface_hub's
 * split_state_dict_into_shards does) and model.safetensors.index.json (json.dumps' indent 2,
 * weight_map sorted by name); config.json's text comes from the caller, generation_config.json (the
 * end-of-sequence ids and sampling settings transformers' generate() starts from) is the source
 * folder's, byte for byte, when it has one, and so are the tokenizer's files (tokenizer.json,
 * tokenizer_config.json with its chat template, …) it has, so that the export loads with them. The folder is written whole
 * (runtime/base/replace_dir.h): every file into a temporary folder beside it, config.json last,
 * then renamed into place, so a failed export leaves an earlier one as it was (a folder that is a
 * mount point, or whose parent cannot be written, is written in place: its files renamed in one by
 * one, config.json last). An earlier export's files (hf_export_file) are not carried into the new
 * folder, which therefore holds no stale shard or index, nor the earlier model's weights in another
 * format or an adapter; nor its tokenizer's files (hf_tokenizer_file) where the source has a
 * tokenizer (the set is the source's whole). Its other files and its folders (a README; Meta's
 * original/; the tokenizer, where the source has none) are. Must not know any model or what
 * config.json says. */
#ifndef DDP_HF_FOLDER_WRITE_H
#define DDP_HF_FOLDER_WRITE_H

#include <stdbool.h>

#include "runtime/base/replace_dir.h"
#include "runtime/base/replace_file.h"
#include "hf_folder.h"
#include "safetensors_write.h"

#define HF_DEFAULT_SHARD_BYTES 5000000000ull  /* save_pretrained's max_shard_size "5GB" */

/* config.json, generation_config.json, model*.safetensors or the index: a name an export writes or
 * leaves stale; or a model's weights in another format (pytorch_model*, tf_model*, flax_model*,
 * consolidated*, *.pth, params.json) or a PEFT adapter's files, which an export replaces too. Files
 * only: folders (Meta's original/) are carried. */
bool hf_export_file(const char *name);
/* A tokenizer's file (tokenizer*, vocab.json, merges.txt, the chat templates, tekken.json,
 * *.tiktoken, ...): an export whose source has a tokenizer replaces the folder's whole set. */
bool hf_tokenizer_file(const char *name);
/* Either of the two: a file an export whose source has a tokenizer replaces. Such an export
 * replaces the whole set: one of an earlier export's left beside it (a chat_template.jinja, which
 * transformers reads over tokenizer_config.json's; a tokenizer.model, which converters read first)
 * would be the other model's. */
bool hf_export_or_tokenizer_file(const char *name);

/* Writes the n tensors (distinct names) as the folder dir (created or replaced) as dtype (ST_F32 or ST_BF16),
 * shards of at most max_shard_bytes of tensor data, source's generation_config.json when source (a
 * folder, or NULL) has one (refused, naming it, when it is no JSON object) and its tokenizer's
 * files, then config.json through
 * write_config(f, ctx); *files gets the number of safetensors files. */
int hf_folder_write(const char *dir, const st_out_tensor *tensors, int n, st_dtype dtype, uint64_t max_shard_bytes,
                    replace_file_stream_writer write_config, void *ctx, const char *source, int *files,
                    ddp_err *err);

#endif
