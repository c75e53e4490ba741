/* gpt2_hf.h — GPT-2 from a Hugging Face `save_pretrained` folder: config.json (GPT2Config) and
 * model.safetensors, as `transformers` writes them for GPT2LMHeadModel.
 *
 * config.json gives the shape (n_layer, n_head, n_embd, n_positions, vocab_size); every other key
 * that changes what the model computes must hold the value our GPT-2 computes (n_inner null or
 * 4·n_embd, activation_function gelu_new, layer_norm_epsilon 1e-5, tied word embeddings, ...) or
 * the folder is refused naming FILE:LINE:COL, the key and its value. The tensors are ours under
 * HF's names, with or without the `transformer.` prefix; the four Conv1D weights of each block
 * (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are stored [in, out] and transposed into our
 * [out, in]; wte's vocab_size rows fill the first rows of our padded wte, the rest stay zero.
 * `attn.bias`/`attn.masked_bias` (attention mask buffers) are skipped, and `lm_head.weight`, when
 * present, must equal wte (tied). A tensor missing, of another shape, or not GPT-2's is refused
 * naming it. F32, F16 and BF16 tensors are read, one of ours of another dtype refused naming it
 * (runtime/hf/safetensors.h).
 *
 * Writing (gpt2_hf_write.c) is the inverse, as `save_pretrained(dir, safe_serialization=True)`
 * writes GPT2LMHeadModel: every tensor under `transformer.NAME`, Conv1D weights back to [in, out],
 * wte's first vocab_size rows, no lm_head (tied) and no mask buffers; F32 or BF16; the files and
 * their order are runtime/hf/hf_folder_write.h's. Must not know checkpoints, configs or the
 * training loop. */
#ifndef DDP_GPT2_HF_H
#define DDP_GPT2_HF_H

#include "gpt2.h"
#include "gpt2_llmc.h"
#include "runtime/hf/hf_folder_write.h"
#include "runtime/hf/hf_token_ids.h"

/* The shape DIR/config.json describes, once every key it holds checked out. */
int gpt2_hf_read_shape(const char *dir, gpt2_shape *shape, ddp_err *err);

/* DIR's parameters into GPT-2 m (device memory). DIR's shape must be m's (both named otherwise).
 * A failed load leaves the parameters as they were. */
int gpt2_hf_load_model(model *m, const char *dir, ddp_err *err);
/* The same for only the pieces of the parameters a ZeRO-3 rank keeps, into host (lm_hf.h). */
int gpt2_hf_load_pieces(const model *m, const char *dir, const param_piece *pieces, int n_pieces, float *host,
                        ddp_err *err);

/* How HF stores our tensor t of a GPT-2 of shape s: its dims (wte: vocab_size rows) and whether it
 * is a Conv1D weight, stored transposed ([in, out]). */
bool gpt2_hf_layout(const gpt2_shape *s, const param_tensor *t, int64_t dims[2], int *ndim);

/* Writes a GPT-2 of this shape, its tensors (our names and layouts, float32) from src, into the
 * folder dir (created, or replaced whole) as dtype (ST_F32 or ST_BF16), shards of at most
 * max_shard_bytes of tensor data, as runtime/hf/hf_folder_write.h writes a folder; *files gets the
 * number of safetensors files; config.json's bos/eos token ids are those of the folder
 * token_ids_from (runtime/hf/hf_token_ids.h; NULL: GPT2Config's 50256). A tensor src lacks is a usage error naming it, before anything is written or removed. */
int gpt2_hf_write(const char *dir, const gpt2_shape *shape, const char *token_ids_from, st_dtype dtype,
                  uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err);

#endif
