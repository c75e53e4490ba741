/* fuzz_hf_folder.c — libFuzzer target for importing a Hugging Face `save_pretrained` folder: its
 * config.json read into a shape (gpt2_hf_read_shape, llama_hf_read_shape for the Llama family's
 * kinds), its weights opened and looked up (runtime/hf/hf_folder.h), and the import into a model
 * on the CPU device (gpt2_hf_load_model, llama_hf_load_model).
 *
 * Input: a flags byte (bits 0-2: the kind, 0 GPT-2, 2 Qwen2, 3 Mistral, 4 Qwen3, else the Llama),
 * then the folder's files separated by "@@FILE@@": config.json, model.safetensors.index.json (empty: none,
 * and the next part is model.safetensors), then the safetensors files (with an index, up to four,
 * named model-0000K-of-0000N.safetensors for N parts). Each safetensors part is its JSON header,
 * "@@DATA@@" and its data: the harness writes the 8-byte header length, so mutations reach the
 * names, shapes and dtypes instead of dying at the length. A folder whose weights open must find
 * every tensor of every file by its name; a shape that reads must be positive; for a shape small
 * enough to build (fuzz_small), a failed import must leave the model's parameters as they were and
 * say why, and a successful one must leave the vocabulary's padding rows zero, each tensor holding
 * the folder's values as float32 (GPT-2's Conv1D weights transposed), and ZeRO-3's import of two
 * pieces (the *_hf_load_pieces) the same values. The harness aborts otherwise. Must not print. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/gpt2.h"
#include "models/gpt2_hf.h"
#include "models/llama.h"
#include "models/llama_hf.h"
#include "models/mistral.h"
#include "models/qwen3.h"
#include "models/qwen2.h"
#include "runtime/device/device.h"
#include "runtime/hf/hf_folder.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)
#define MAX_SHARDS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static device *dev;

static void write_folder(const fuzz_part *parts, size_t n)
{
    char path[512], name[64];
    fuzz_path(path, sizeof path, HF_CONFIG);
    fuzz_write_file(path, parts[0].p, parts[0].n);
    const bool sharded = n > 1 && parts[1].n > 0;
    if (sharded) {
        fuzz_path(path, sizeof path, HF_INDEX);
        fuzz_write_file(path, parts[1].p, parts[1].n);
    }
    for (size_t k = 2; k < n; k++) {
        if (sharded)
            snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k - 1, n - 2);
        fuzz_path(path, sizeof path, sharded ? name : HF_WEIGHTS);
        fuzz_write_safetensors(path, parts[k].p, parts[k].n);
        if (!sharded)
            break;
    }
}

/* Every tensor of every file found by its name, and none left over once all are taken. */
static int count_unused(void *ctx, const st_tensor *t, ddp_err *err)
{
    (void)t, (void)err;
    ++*(int *)ctx;
    return DDP_OK;
}

static void check_weights(void)
{
    hf_weights w;
    ddp_err err = {0};
    if (hf_weights_open(&w, fuzz_dir(), &err) != DDP_OK) {
        if (w.files || w.used || w.n || !err.msg[0])
            abort(); /* nothing stays open on failure, and the error says why */
        return;
    }
    for (int f = 0; f < w.n; f++)
        for (size_t i = 0; i < w.files[f].count; i++)
            if (!hf_weights_take(&w, w.files[f].tensors[i].name))
                abort();
    int unused = 0;
    if (hf_weights_each_unused(&w, count_unused, &unused, &err) != DDP_OK || unused != 0)
        abort();
    hf_weights_close(&w);
}

/* Small enough to build and import per input. */
static bool fuzz_small(int64_t layers, int64_t embd, int64_t heads, int64_t ffn, int64_t positions, int64_t vocab)
{
    return layers <= 2 && embd <= 64 && heads <= 8 && ffn <= 256 && positions <= 64 && vocab <= 512;
}

static float *params_of(const model *m)
{
    float *host = malloc(m->n_params * sizeof *host);
    if (!host)
        abort();
    ddp_err err = {0};
    if (dev->ops->download(dev, host, m->params, m->n_params * sizeof *host, &err))
        abort();
    return host;
}

/* The rows of `name` from `first_row` on are zero (the padded vocabulary's). */
static bool padding_zero(const model *m, const float *p, const char *name, int64_t first_row)
{
    const param_tensor *t = model_find_tensor(m, name);
    if (!t)
        return true;
    for (size_t i = (size_t)(first_row * t->shape[1]); i < t->numel; i++)
        if (p[t->offset + i] != 0.0f)
            return false;
    return true;
}

/* The folder's tensor for our tensor `name`: under that name, or (GPT-2's) with `transformer.` before it. */
static const st_tensor *folder_tensor(hf_weights *w, const char *name)
{
    char prefixed[MODEL_TENSOR_NAME_MAX + 16];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    const st_tensor *t = hf_weights_take(w, name);
    return t ? t : hf_weights_take(w, prefixed);
}

/* Every tensor of m holds the folder's tensor of its name as float32: as it is, the vocabulary's rows
 * first, or (gpt2: GPT-2's Conv1D weights, [in, out] in the folder) transposed. */
static void check_values(const model *m, const float *p, const gpt2_shape *gpt2)
{
    hf_weights w;
    ddp_err err = {0};
    if (hf_weights_open(&w, fuzz_dir(), &err) != DDP_OK)
        abort(); /* it imported */
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        const st_tensor *hf = folder_tensor(&w, t->name);
        float *want = hf && hf->numel <= t->numel ? malloc((hf->numel ? hf->numel : 1) * sizeof *want) : NULL;
        if (!want)
            abort();
        safetensors_to_f32(hf, want);
        int64_t dims[2];
        int ndim;
        if (gpt2 && gpt2_hf_layout(gpt2, t, dims, &ndim)) { /* want is [in, out], ours [out, in] */
            for (int64_t in = 0; in < dims[0]; in++)
                for (int64_t out = 0; out < dims[1]; out++)
                    if (memcmp(&want[in * dims[1] + out], &p[t->offset + (size_t)(out * dims[0] + in)], 4))
                        abort();
        } else if (memcmp(want, p + t->offset, hf->numel * sizeof *want)) {
            abort();
        }
        free(want);
    }
    hf_weights_close(&w);
}

/* ZeRO-3's import of the same folder: two uneven pieces of the parameters, in host in the other order,
 * hold exactly the whole import's values. */
static void check_pieces(const model *m, const llama_family *fam, const float *whole)
{
    const size_t n = m->n_params, a = n / 3;
    const param_piece pieces[2] = {{a, n - a, 0}, {0, a, n - a}};
    float *host = malloc(n * sizeof *host);
    if (!host)
        abort();
    memset(host, 0xff, n * sizeof *host); /* NaN: a value the import did not write shows */
    ddp_err err = {0};
    const int rc = fam ? llama_hf_load_pieces(fam, m, fuzz_dir(), pieces, 2, host, &err)
                       : gpt2_hf_load_pieces(m, fuzz_dir(), pieces, 2, host, &err);
    if (rc != DDP_OK || memcmp(host, whole + a, (n - a) * sizeof *host) ||
        memcmp(host + n - a, whole, a * sizeof *host))
        abort();
    free(host);
}

/* m, a model of family fam (NULL: GPT-2 of shape gpt2), imports the folder, or fails leaving its
 * parameters as they were. */
static void check_import(model *m, const llama_family *fam, const gpt2_shape *gpt2, int64_t vocab,
                         const char *const embed[2])
{
    ddp_err err = {0};
    if (model_init_params(m, 1, &err) != DDP_OK)
        abort();
    float *before = params_of(m);
    const int rc = fam ? llama_hf_load_model(fam, m, fuzz_dir(), &err) : gpt2_hf_load_model(m, fuzz_dir(), &err);
    float *after = params_of(m);
    if (rc != DDP_OK && (memcmp(before, after, m->n_params * sizeof *before) || !err.msg[0]))
        abort();
    if (rc == DDP_OK && (!padding_zero(m, after, embed[0], vocab) || !padding_zero(m, after, embed[1], vocab)))
        abort();
    if (rc == DDP_OK)
        check_values(m, after, gpt2);
    if (rc == DDP_OK)
        check_pieces(m, fam, after);
    free(before), free(after);
    m->ops->destroy(m);
}

static sample_layout layout(int64_t T, int64_t vocab)
{
    return (sample_layout){.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = vocab};
}

static void check_gpt2(void)
{
    gpt2_shape s;
    ddp_err err = {0};
    if (gpt2_hf_read_shape(fuzz_dir(), &s, &err) != DDP_OK)
        return;
    if (s.n_layer < 1 || s.n_head < 1 || s.n_embd < 1 || s.block_size < 1 || s.vocab_size < 1)
        abort();
    if (!fuzz_small(s.n_layer, s.n_embd, s.n_head, 0, s.block_size, s.vocab_size))
        return;
    const sample_layout data = layout(s.block_size, s.vocab_size);
    model *m = NULL;
    if (gpt2_create(&s, &(lm_run){.compute = TENSOR_F32}, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK)
        check_import(m, NULL, &s, s.vocab_size, (const char *const[2]){"wte.weight", "lm_head.weight"});
}

static void check_llama(const llama_family *fam)
{
    llama_shape s;
    ddp_err err = {0};
    if (llama_hf_read_shape(fam, fuzz_dir(), &s, &err) != DDP_OK)
        return;
    if (s.n_layer < 1 || s.n_head < 1 || s.n_kv_head < 1 || s.n_embd < 1 || s.ffn_hidden < 1 || s.block_size < 1 ||
        s.vocab_size < 1 || !(s.rope_theta > 0) || !(s.norm_eps > 0))
        abort();
    if (!fuzz_small(s.n_layer, s.n_embd, s.n_head, s.ffn_hidden, s.block_size, s.vocab_size))
        return;
    const sample_layout data = layout(s.block_size, s.vocab_size);
    model *m = NULL;
    if (llama_create(fam, &s, &(lm_run){.compute = TENSOR_F32}, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) ==
        DDP_OK)
        check_import(m, fam, NULL, s.vocab_size,
                     (const char *const[2]){"model.embed_tokens.weight", "lm_head.weight"});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX_BYTES)
        return 0;
    ddp_err err = {0};
    if (!dev && device_cpu_create(&dev, &err) != DDP_OK)
        abort();
    fuzz_part parts[2 + MAX_SHARDS];
    const size_t n = fuzz_split(data + 1, size - 1, "@@FILE@@", 8, parts, 2 + MAX_SHARDS);
    write_folder(parts, n);
    check_weights();
    switch (data[0] & 7) {
    case 0:
        check_gpt2();
        break;
    case 2:
        check_llama(&qwen2_family);
        break;
    case 3:
        check_llama(&mistral_family);
        break;
    case 4:
        check_llama(&qwen3_family);
        break;
    default:
        check_llama(&llama_family_llama);
    }
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
