/* fuzz_config.c — libFuzzer target for the YAML config loader with its `key.path=value` overrides
 * (config/config.h).
 *
 * The input is cut at NUL bytes: the first part is the YAML file, each further part (up to 8) one
 * override as given to `ddprun -o`; an empty first part means no file at all (defaults plus
 * overrides, as tools and tests load configs). The file is read with a size limit of
 * FILE_MAX_BYTES, so that the loader's size bound, like its nesting bound, is within the fuzzer's
 * reach. A rejected config only has to come back as an error. An accepted one must survive the
 * trip the training job makes: config_write_resolved, then config_load of that file gives the
 * same struct (but for where its keys were set) and the same config_hash (anything else is a setting silently changed on resume),
 * and so the harness aborts on a difference (a GPT-2 or Llama shape left to checkpoint.init_from is
 * given one first, take_shape). It owns no checks of its own beyond that round trip,
 * and must not print for ordinary inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_OVERRIDES 8
#define INPUT_MAX_BYTES (64 * 1024) /* more YAML only costs time: the loader's branches are all reached below */
/* The file size limit the loader is given here: CFG_MAX_FILE_BYTES (1 MiB) is past what the
 * fuzzer writes, this one is not. CFG_MAX_DEPTH is reached as it is. */
#define FILE_MAX_BYTES (INPUT_MAX_BYTES / 2)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A GPT-2 or Llama shape the config leaves to checkpoint.init_from is taken first, as the training
 * job takes the file's: here the config's own values with 1 layer, 1 head (and key/value head),
 * n_head x 64 channels, data.seq_len positions, 256 tokens, a 128 FFN width and Llama's defaults for
 * the rest, for the keys left out (a take config_take_shape refuses is a rejected config). */
static int take_shape(config *c)
{
    static const char *const gpt2_names[] = {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size"};
    static const char *const llama_names[] = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                              "hidden_size", "intermediate_size", "max_position_embeddings",
                                              "vocab_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings"};
    if (!config_shape_pending(c))
        return DDP_OK;
    config_shape s;
    memset(&s, 0, sizeof s);
    ddp_err err = {0};
    if (c->model.kind == MODEL_LLAMA) {
        s.llama = c->model.opts.llama;
        s.llama.n_layer = s.llama.n_layer ? s.llama.n_layer : 1;
        s.llama.n_head = s.llama.n_head ? s.llama.n_head : 1;
        s.llama.n_kv_head = s.llama.n_kv_head ? s.llama.n_kv_head : 1;
        s.llama.n_embd = s.llama.n_embd ? s.llama.n_embd : 64 * s.llama.n_head;
        s.llama.ffn_hidden = s.llama.ffn_hidden ? s.llama.ffn_hidden : 128;
        s.llama.block_size = s.llama.block_size ? s.llama.block_size : c->data.seq_len;
        s.llama.vocab_size = s.llama.vocab_size ? s.llama.vocab_size : 256;
        s.llama.rope_theta = s.llama.rope_theta ? s.llama.rope_theta : 10000;
        s.llama.norm_eps = s.llama.norm_eps ? s.llama.norm_eps : 1e-5;
        return config_take_shape(c, &s, "init_from/config.json", llama_names, &err);
    }
    s.gpt2 = c->model.opts.gpt2;
    s.gpt2.n_layer = s.gpt2.n_layer ? s.gpt2.n_layer : 1;
    s.gpt2.n_head = s.gpt2.n_head ? s.gpt2.n_head : 1;
    s.gpt2.n_embd = s.gpt2.n_embd ? s.gpt2.n_embd : 64 * s.gpt2.n_head;
    s.gpt2.block_size = s.gpt2.block_size ? s.gpt2.block_size : c->data.seq_len;
    s.gpt2.vocab_size = s.gpt2.vocab_size ? s.gpt2.vocab_size : 256;
    return config_take_shape(c, &s, "init_from/config.json", gpt2_names, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INPUT_MAX_BYTES)
        return 0;
    fuzz_part parts[1 + MAX_OVERRIDES];
    size_t n = fuzz_split(data, size, "", 1, parts, 1 + MAX_OVERRIDES);
    char path[512], resolved[512];
    fuzz_path(path, sizeof path, "config.yaml");
    fuzz_path(resolved, sizeof resolved, "resolved.yaml");
    fuzz_write_file(path, parts[0].p, parts[0].n);
    char *overrides[MAX_OVERRIDES];
    int n_over = (int)n - 1;
    for (int i = 0; i < n_over; i++)
        if (!(overrides[i] = strndup((const char *)parts[i + 1].p, parts[i + 1].n)))
            abort();

    static config c, again; /* 30 KB each: off the stack */
    ddp_err err = {0};
    int rc = config_load_bounded(parts[0].n ? path : NULL, FILE_MAX_BYTES, n_over, overrides, &c, &err);
    if (rc == DDP_OK)
        rc = take_shape(&c);
    if (rc == DDP_OK) {
        if (config_write_resolved(&c, resolved, &err) != DDP_OK) {
            fprintf(stderr, "accepted config cannot be written back: %s\n", err.msg);
            abort();
        }
        if (config_load(resolved, 0, NULL, &again, &err) != DDP_OK) {
            fprintf(stderr, "resolved config is rejected when read back: %s\n", err.msg);
            abort();
        }
        memcpy(again.source, c.source, sizeof c.source);
        memcpy(again.origin, c.origin, sizeof c.origin); /* where keys were set differs by the file */
        if (memcmp(&c, &again, sizeof c) != 0 || config_hash(&c) != config_hash(&again)) {
            fprintf(stderr, "resolved config reads back different from the config it was written from\n");
            abort();
        }
    }
    for (int i = 0; i < n_over; i++)
        free(overrides[i]);
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
