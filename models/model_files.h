/* model_files.h — the files a model kind reads and writes besides ddprun's checkpoints: the shape
 * and parameters checkpoint.init_from starts from (a Hugging Face `save_pretrained` folder, an
 * llm.c model file) and the Hugging Face folder `ddprun ckpt export` writes. One row per kind, in
 * model_registry.c beside the kind's build and size functions: the training job and the commands
 * reach a kind's files through its row, by model.kind or by a checkpoint's description, and never
 * name a kind themselves. Declarations only. */
#ifndef DDP_MODEL_FILES_H
#define DDP_MODEL_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include "models/gpt2_llmc.h"
#include "models/model.h"
#include "runtime/hf/hf_folder.h"       /* HF_CONFIG: the file a folder's shape is read from */
#include "runtime/hf/hf_folder_write.h" /* the export's files and defaults */
#include "runtime/hf/hf_token_ids.h"
#include "runtime/hf/safetensors_write.h"

typedef struct model_files {
    const char *name;            /* model.kind's value, the name of its config section */
    bool hf_folder, llmc_file;   /* what checkpoint.init_from may name for this kind */
    const char *hf_architecture; /* config.json's "architectures" entry of an export */
    /* config.json's and llm.c's header's names of the kind's shape fields, in the order
     * config_take_shape takes them (for its messages); llmc_shape_names NULL without llmc_file */
    const char *const *hf_shape_names, *const *llmc_shape_names;
    /* The shape of the folder (hf) or llm.c file at path into *shape, the kind's shape struct
     * (gpt2_shape, llama_shape); a kind of file the kind cannot start from is a usage error. */
    int (*read_shape)(const char *path, bool hf, void *shape, ddp_err *err);
    void (*format_shape)(const void *shape, char *out, size_t size);
    /* The folder's or file's parameters into m, built for that shape (checked). */
    int (*load)(model *m, const char *path, bool hf, ddp_err *err);
    /* The folder DIR's parameters, only the pieces into host (model.h's param_piece: a ZeRO-3
     * rank's shard), in memory bounded by host and one tensor; checked as load checks them. */
    int (*hf_load_pieces)(const model *m, const char *dir, const param_piece *pieces, int n_pieces, float *host,
                          ddp_err *err);
    /* The Hugging Face folder dir of a model of opts' shape whose tensors (float32, our names)
     * src gives (gpt2_hf_write's contract), config.json's bos/eos token ids those of the
     * folder token_ids_from (NULL: the config class's defaults); *files: the safetensors files written. */
    int (*hf_write)(const char *dir, const model_opts *opts, const char *token_ids_from, st_dtype dtype,
                    uint64_t max_shard_bytes, gpt2_llmc_src src, void *ctx, int *files, ddp_err *err);
    /* The llm.c model file at path, the same way (gpt2_llmc_write's contract); NULL: llm.c has no
     * file for this kind. */
    int (*llmc_write)(const char *path, const model_opts *opts, gpt2_llmc_src src, void *ctx, ddp_err *err);
} model_files;

/* The kind's row; NULL for a kind that starts from no file and exports none (the MLP). */
const model_files *model_files_of(model_kind kind);

#endif
