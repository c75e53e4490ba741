/* test_config_models.c — the config keys that depend on the model kind: checkpoint.init_from and
 * the shape it brings (GPT-2, the Llama), precision bf16 and the gradients' dtype it implies, and
 * model.kind llama's defaults and rules, each refusal at FILE:LINE:COL or the override's column
 * (counted from the text as written) and at the key set last. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config_test_util.h"

/* checkpoint.init_from: empty by default, a path round-trips through the resolved config, not
 * hashed (a resume does not depend on how the first attempt started), GPT-2 only. */
static void test_init_from(void)
{
    config a, b;
    ddp_err err = {0};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 0, NULL, &a, &err) == DDP_OK, "%s", err.msg);
    CHECK(a.checkpoint.init_from[0] == '\0', "init_from default \"%s\"", a.checkpoint.init_from);
    char *ov[] = {"checkpoint.init_from=models/gpt2_124M.bin"};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 1, ov, &b, &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(b.checkpoint.init_from, "models/gpt2_124M.bin"), "init_from \"%s\"", b.checkpoint.init_from);
    CHECK(config_hash(&a) == config_hash(&b), "checkpoint.init_from changed the hash");
    round_trip(&a);
    round_trip(&b);
    /* set back to none, as a later override may */
    char *ov2[] = {"checkpoint.init_from=models/x.bin", "checkpoint.init_from=\"\""};
    CHECK(config_load(DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml", 2, ov2, &b, &err) == DDP_OK, "%s", err.msg);
    CHECK(b.checkpoint.init_from[0] == '\0', "init_from=\"\" left \"%s\"", b.checkpoint.init_from);
    char want[512];
    snprintf(want, sizeof want, "only with %s, got checkpoint.init_from", lm_kinds());
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=gpt2_124M.bin"},
                "<override 1>:1:22: checkpoint.init_from:", want);
    expect_fail(NULL, 1, (char *[]){"checkpoint.init_from=[a]"}, "<override 1>:1:22: checkpoint.init_from:",
                "expected a path, or \"\" for none, got a list");
}

/* A model.gpt2 shape key left out with checkpoint.init_from is 0 after the load (nothing judged
 * against it, data.seq_len included, and no resolved config written), until config_take_shape
 * gives it the file's value: a key set to another value is refused naming it, both values and the
 * file, as is a data.seq_len over the file's block_size, the config unchanged. */
static void test_init_from_shape(void)
{
    static const char *const names[] = {"n_layer", "n_head", "n_embd", "n_positions", "vocab_size"};
    const config_shape from = {.gpt2 = {2, 4, 64, 32, 300}};
    config c, kept;
    ddp_err err = {0};
    char *ov[] = {"model.kind=gpt2", "data.kind=tokens", "data.seq_len=2048", "checkpoint.init_from=hf",
                  "model.gpt2.n_head=4"};
    CHECK(config_load(NULL, 5, ov, &c, &err) == DDP_OK, "data.seq_len over the default block_size: %s", err.msg);
    CHECK(config_shape_pending(&c), "the shape left to checkpoint.init_from is not pending");
    CHECK(c.model.opts.gpt2.n_layer == 0 && c.model.opts.gpt2.n_head == 4 && c.model.opts.gpt2.block_size == 0 &&
          c.model.opts.gpt2.vocab_size == 0, "shape %lld %lld %lld", (long long)c.model.opts.gpt2.n_layer,
          (long long)c.model.opts.gpt2.n_head, (long long)c.model.opts.gpt2.block_size);
    CHECK(config_write_resolved(&c, "/nonexistent-dir/resolved.yaml", &err) == DDP_ERUNTIME, "pending written");
    CHECK_STR_CONTAINS(err.msg, "model.gpt2 shape is not yet taken from checkpoint.init_from");
    memcpy(&kept, &c, sizeof c);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "seq_len 2048 taken");
    CHECK_STR_CONTAINS(err.msg, "data.seq_len: expected data.seq_len <= model.gpt2.block_size, got data.seq_len "
                       "2048 with model.gpt2.block_size 32 (n_positions 32 of checkpoint.init_from's hf/config.json)");
    CHECK(memcmp(&c, &kept, sizeof c) == 0, "a refused take changed the config");
    c.data.seq_len = 32;
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && memcmp(&c.model.opts.gpt2, &from.gpt2, sizeof from.gpt2) == 0,
          "shape not taken");

    char *other[] = {"model.kind=gpt2", "checkpoint.init_from=hf", "model.gpt2.n_head=8"};
    CHECK(config_load(NULL, 3, other, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "n_head 8 taken");
    const char *at_override = "<override 3>:1:19: model.gpt2.n_head is 8, but checkpoint.init_from's hf/config.json "
                              "has n_head 4";
    CHECK(strncmp(err.msg, at_override, strlen(at_override)) == 0, "\"%s\" does not start with \"%s\"", err.msg,
          at_override);
    CHECK(c.model.opts.gpt2.n_head == 8 && c.model.opts.gpt2.n_layer == 0, "a refused take changed the shape");

    /* a shape beyond the keys' ranges (a folder allows more) or with uneven heads is refused */
    char *pending[] = {"model.kind=gpt2", "checkpoint.init_from=hf"};
    CHECK(config_load(NULL, 2, pending, &c, &err) == DDP_OK, "%s", err.msg);
    config_shape wide = from;
    wide.gpt2.n_embd = 1 << 17;
    CHECK(config_take_shape(&c, &wide, "hf/config.json", names, &err) == DDP_EUSAGE, "n_embd 2^17 taken");
    CHECK_STR_CONTAINS(err.msg, "hf/config.json has n_embd 131072, outside model.gpt2.n_embd's range 1..65536");
    config_shape uneven = from;
    uneven.gpt2.n_head = 3;
    CHECK(config_take_shape(&c, &uneven, "hf/config.json", names, &err) == DDP_EUSAGE, "n_head 3 taken");
    CHECK_STR_CONTAINS(err.msg, "n_embd 64 is not divisible by n_head 3");
    CHECK(config_shape_pending(&c), "a refused take filled the shape");

    char *none[] = {"model.kind=gpt2"};
    CHECK(config_load(NULL, 1, none, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.gpt2.n_layer == 12, "no init_from: not the default shape");
}

/* The same for model.llama: every key of llama_shape left out is pending (tie_embeddings, a bool, and
 * the doubles by where they were set, not by their value), ffn_hidden is not the multiple_of rule's
 * width, and the take gives each key the folder's value; a key set to another value (an int, a
 * double, the bool) is refused naming both values and the file, as are an odd head size, uneven
 * key/value heads and a data.seq_len over max_position_embeddings; a head_dim compares as it
 * resolves with the folder's n_embd and n_head. */
static void test_init_from_llama_shape(void)
{
    static const char *const names[] = {"num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                        "hidden_size", "intermediate_size", "max_position_embeddings",
                                        "vocab_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings",
                                        "head_dim", "rope_scaling.factor", "rope_scaling.low_freq_factor",
                                        "rope_scaling.high_freq_factor",
                                        "rope_scaling.original_max_position_embeddings"};
    const config_shape from = {.llama = {2, 4, 2, 64, 176, 32, 300, 500000, 1e-6, true, 0, LLAMA_ROPE_UNSCALED, 0}};
    config c, kept;
    ddp_err err = {0};
    char *ov[] = {"model.kind=llama", "data.kind=tokens", "data.seq_len=2048", "checkpoint.init_from=hf"};
    CHECK(config_load(NULL, 4, ov, &c, &err) == DDP_OK, "data.seq_len over the default block_size: %s", err.msg);
    CHECK(config_shape_pending(&c), "the llama shape left to checkpoint.init_from is not pending");
    CHECK(c.model.opts.llama.n_layer == 0 && c.model.opts.llama.ffn_hidden == 0 && c.model.opts.llama.rope_theta == 0 &&
          !c.model.opts.llama.tie_embeddings, "ffn_hidden %lld (the multiple_of rule's?), rope_theta %g",
          (long long)c.model.opts.llama.ffn_hidden, c.model.opts.llama.rope_theta);
    CHECK(config_write_resolved(&c, "/nonexistent-dir/resolved.yaml", &err) == DDP_ERUNTIME, "pending written");
    CHECK_STR_CONTAINS(err.msg, "model.llama shape is not yet taken from checkpoint.init_from");
    memcpy(&kept, &c, sizeof c);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "seq_len 2048 taken");
    CHECK_STR_CONTAINS(err.msg, "data.seq_len: expected data.seq_len <= model.llama.block_size, got data.seq_len "
                       "2048 with model.llama.block_size 32 (max_position_embeddings 32 of checkpoint.init_from's "
                       "hf/config.json)");
    CHECK(memcmp(&c, &kept, sizeof c) == 0, "a refused take changed the config");
    c.data.seq_len = 32;
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.llama.n_layer == 2 && c.model.opts.llama.n_kv_head == 2 &&
          c.model.opts.llama.ffn_hidden == 176 && c.model.opts.llama.block_size == 32 &&
          c.model.opts.llama.vocab_size == 300 && c.model.opts.llama.rope_theta == 500000 &&
          c.model.opts.llama.norm_eps == 1e-6 && c.model.opts.llama.tie_embeddings,
          "shape not taken");
    char path[] = "/tmp/test_config_llama_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    config again;
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_load(path, 0, NULL, &again, &err) == DDP_OK, "resolved: %s", err.msg);
    CHECK(config_hash(&again) == config_hash(&c) && !memcmp(&again.model, &c.model, sizeof c.model),
          "the taken shape does not read back from the resolved config");
    unlink(path);

    /* keys set to the folder's values are kept; another value is refused naming both and the file */
    static const struct { const char *set, *msg; } other[] = {
        {"model.llama.n_kv_head=4", "model.llama.n_kv_head is 4, but checkpoint.init_from's hf/config.json has "
                                    "num_key_value_heads 2; leave model.llama.n_kv_head out"},
        {"model.llama.ffn_hidden=0", "model.llama.ffn_hidden is 256, but checkpoint.init_from's hf/config.json has "
                                     "intermediate_size 176"},
        {"model.llama.rope_theta=10000", "model.llama.rope_theta is 10000, but checkpoint.init_from's hf/config.json "
                                         "has rope_theta 500000"},
        {"model.llama.tie_embeddings=false", "model.llama.tie_embeddings is false, but checkpoint.init_from's "
                                             "hf/config.json has tie_word_embeddings true"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char *o[] = {"model.kind=llama", "checkpoint.init_from=hf", "model.llama.n_embd=64", (char *)other[i].set};
        CHECK(config_load(NULL, 4, o, &c, &err) == DDP_OK, "%s: %s", other[i].set, err.msg);
        memcpy(&kept, &c, sizeof c);
        CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "%s taken", other[i].set);
        CHECK_STR_CONTAINS(err.msg, other[i].msg);
        CHECK(memcmp(&c, &kept, sizeof c) == 0, "%s: a refused take changed the config", other[i].set);
    }
    /* data.seq_len within the folder's max_position_embeddings (its data.kind is tokens) */
    char *same[] = {"model.kind=llama", "checkpoint.init_from=hf", "model.llama.norm_eps=1e-6",
                    "model.llama.tie_embeddings=true", "model.llama.ffn_hidden=176", "data.seq_len=16"};
    CHECK(config_load(NULL, 6, same, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK, "the folder's values set: %s",
          err.msg);
    /* a head_dim set while n_embd and n_head are the folder's compares as it resolves with theirs:
     * their quotient is the folder's 0, another size is refused */
    char quotient[32], wider[32];
    snprintf(quotient, sizeof quotient, "model.llama.head_dim=%lld", (long long)(from.llama.n_embd / from.llama.n_head));
    snprintf(wider, sizeof wider, "model.llama.head_dim=%lld", (long long)(2 * from.llama.n_embd / from.llama.n_head));
    char *hd_set[] = {"model.kind=llama", "checkpoint.init_from=hf", quotient, "data.seq_len=16"};
    CHECK(config_load(NULL, 4, hd_set, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_OK && c.model.opts.llama.head_dim == 0,
          "%s with the folder's n_embd / n_head: %s", quotient, err.msg);
    hd_set[2] = wider;
    CHECK(config_load(NULL, 4, hd_set, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &from, "hf/config.json", names, &err) == DDP_EUSAGE, "%s taken", wider);
    CHECK_STR_CONTAINS(err.msg, "but checkpoint.init_from's hf/config.json has head_dim 0");

    /* the folder's shape breaking the model's rules */
    char *pending[] = {"model.kind=llama", "checkpoint.init_from=hf", "data.seq_len=16"};
    CHECK(config_load(NULL, 3, pending, &c, &err) == DDP_OK, "%s", err.msg);
    config_shape odd = from;
    odd.llama.n_head = 64;
    odd.llama.n_kv_head = 1;
    CHECK(config_take_shape(&c, &odd, "hf/config.json", names, &err) == DDP_EUSAGE, "head size 1 taken");
    CHECK_STR_CONTAINS(err.msg, "hidden_size 64 / num_attention_heads 64 is an odd head size");
    config_shape kv = from;
    kv.llama.n_kv_head = 3;
    CHECK(config_take_shape(&c, &kv, "hf/config.json", names, &err) == DDP_EUSAGE, "n_kv_head 3 taken");
    CHECK_STR_CONTAINS(err.msg, "num_attention_heads 4 is not divisible by num_key_value_heads 3");
    config_shape theta = from;
    theta.llama.rope_theta = -1;
    CHECK(config_take_shape(&c, &theta, "hf/config.json", names, &err) == DDP_EUSAGE, "rope_theta -1 taken");
    CHECK_STR_CONTAINS(err.msg, "hf/config.json has rope_theta -1, but model.llama.rope_theta must be a positive");
    CHECK(config_shape_pending(&c), "a refused take filled the shape");

    /* Llama 3.2's stretched RoPE from the folder: taken with the rest, into the resolved config */
    config_shape stretched = from;
    stretched.llama.rope_scaling = (llama_rope_scaling){32, 1, 4, 8192};
    CHECK(config_load(NULL, 3, pending, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &stretched, "hf/config.json", names, &err) == DDP_OK, "%s", err.msg);
    CHECK(!memcmp(&c.model.opts.llama.rope_scaling, &stretched.llama.rope_scaling, sizeof(llama_rope_scaling)),
          "the folder's rope_scaling not taken");
    fd = mkstemp(path);
    close(fd);
    CHECK(config_write_resolved(&c, path, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_load(path, 0, NULL, &again, &err) == DDP_OK, "resolved: %s", err.msg);
    CHECK(config_hash(&again) == config_hash(&c) && !memcmp(&again.model, &c.model, sizeof c.model),
          "the taken rope_scaling does not read back from the resolved config");
    unlink(path);
    char *unstretched[] = {"model.kind=llama", "checkpoint.init_from=hf", "model.llama.rope_scaling.factor=1"};
    CHECK(config_load(NULL, 3, unstretched, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(config_take_shape(&c, &stretched, "hf/config.json", names, &err) == DDP_EUSAGE, "factor 1 over 32 taken");
    CHECK_STR_CONTAINS(err.msg, "model.llama.rope_scaling.factor is 1, but checkpoint.init_from's hf/config.json has "
                       "rope_scaling.factor 32");

    /* without checkpoint.init_from: the defaults, ffn_hidden by the rule */
    char *none[] = {"model.kind=llama"};
    CHECK(config_load(NULL, 1, none, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(!config_shape_pending(&c) && c.model.opts.llama.n_layer == 12 && c.model.opts.llama.ffn_hidden == 2048,
          "no init_from: n_layer %lld ffn_hidden %lld", (long long)c.model.opts.llama.n_layer,
          (long long)c.model.opts.llama.ffn_hidden);
}

/* precision: fp32 by default; bf16 on a GPT-2 makes gradients travel in bf16 unless ddp.grad_dtype
 * (or ddp.backend mpi) says otherwise, and is refused on the CPU backend and for the MLP, at the
 * key set last. */
static void test_precision(void)
{
    config c;
    ddp_err err = {0};
    const char *kjv = DDP_SOURCE_ROOT "/configs/gpt2_kjv.yaml";
    CHECK(config_load(kjv, 0, NULL, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.precision == PRECISION_FP32 && c.ddp.grad_dtype == GRAD_FP32, "default precision %d", (int)c.precision);
    CHECK(config_load(kjv, 1, (char *[]){"precision=bf16"}, &c, &err) == DDP_OK, "%s", err.msg);
    CHECK(c.precision == PRECISION_BF16 && c.ddp.grad_dtype == GRAD_BF16, "bf16: grad_dtype %d", (int)c.ddp.grad_dtype);
    CHECK(config_load(kjv, 2, (char *[]){"precision=bf16", "ddp.grad_dtype=fp32"}, &c, &err) == DDP_OK, "%s",
          err.msg);
    CHECK(c.ddp.grad_dtype == GRAD_FP32, "an explicit ddp.grad_dtype fp32 was overridden");
    CHECK(config_load(kjv, 3, (char *[]){"precision=bf16", "device=auto", "ddp.backend=mpi"}, &c, &err) == DDP_OK,
          "%s", err.msg);
    CHECK(c.ddp.grad_dtype == GRAD_FP32, "bf16 gradients derived for the MPI backend");
    expect_fail(NULL, 2, (char *[]){"device=cuda", "ddp.backend=mpi"}, "<override 2>:1:13: ddp.backend:",
                "expected ddp.backend nccl or auto with device cuda (this Open MPI is not CUDA-aware");
    expect_fail(NULL, 2, (char *[]){"device=cpu", "precision=bf16"}, "<override 2>:1:11: precision:",
                "precision bf16 only with device cuda or auto");
    char want[512];
    snprintf(want, sizeof want, "precision bf16 only with %s", lm_kinds());
    expect_fail(NULL, 1, (char *[]){"precision=bf16"}, "<override 1>:1:11: precision:", want);
    expect_fail(NULL, 1, (char *[]){"precision=fp16"}, "<override 1>:1:11: precision:", "expected one of fp32, bf16");
}

/* model.kind llama: its defaults (AdamW betas (0.9, 0.95) as GPT-2's), ffn_hidden 0 resolved by
 * Llama's multiple_of rule (the number is what the resolved config and the hash hold), a language
 * model (tokens, bf16), and each rule across its keys reported at the key set last, naming both. */
static void test_llama(void)
{
    config c, d;
    ddp_err err = {0};
    CHECK(config_load(NULL, 1, (char *[]){"model.kind=llama"}, &c, &err) == DDP_OK, "%s", err.msg);
    const llama_shape *s = &c.model.opts.llama;
    CHECK(s->n_layer == 12 && s->n_head == 12 && s->n_kv_head == 4 && s->n_embd == 768 && s->block_size == 1024 &&
          s->vocab_size == 32000 && s->rope_theta == 10000 && s->norm_eps == 1e-5 && !s->tie_embeddings,
          "llama defaults");
    CHECK(s->ffn_hidden == 2048 && c.model.opts.llama_multiple_of == 256, "ffn_hidden %lld", (long long)s->ffn_hidden);
    CHECK(c.optimizer.beta1 == 0.9 && c.optimizer.beta2 == 0.95, "llama betas %g %g", c.optimizer.beta1,
          c.optimizer.beta2);
    /* Llama 2 7B: 2·16384/3 = 10922, up to 11008; multiple_of 1 keeps 2·256/3 = 170 */
    char *l7b[] = {"model.kind=llama", "model.llama={n_embd: 4096, n_head: 32, n_kv_head: 8}"};
    CHECK(config_load(NULL, 2, l7b, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 11008, "7B ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    char *one[] = {"model.kind=llama", "model.llama={n_embd: 64, n_head: 4, multiple_of: 1}"};
    CHECK(config_load(NULL, 2, one, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 170, "ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    char *set[] = {"model.kind=llama", "model.llama.ffn_hidden=176", "model.llama.multiple_of=1000"};
    CHECK(config_load(NULL, 3, set, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 176, "ffn %lld: %s",
          (long long)d.model.opts.llama.ffn_hidden, err.msg);
    /* the width decides the hash, not how it was given */
    char *given[] = {"model.kind=llama", "model.llama.ffn_hidden=2048", "model.llama.multiple_of=512"};
    CHECK(config_load(NULL, 3, given, &d, &err) == DDP_OK && config_hash(&c) == config_hash(&d), "%s", err.msg);
    char *wider[] = {"model.kind=llama", "model.llama.multiple_of=1000"};
    CHECK(config_load(NULL, 2, wider, &d, &err) == DDP_OK && d.model.opts.llama.ffn_hidden == 3000 &&
          config_hash(&c) != config_hash(&d), "multiple_of 1000: ffn %lld", (long long)d.model.opts.llama.ffn_hidden);
    char *other[] = {"model.kind=llama", "model.llama.tie_embeddings=true", "model.llama.rope_theta=500000",
                     "model.llama.norm_eps=1e-6", "model.llama.n_kv_head=12", "data.kind=tokens", "data.seq_len=1024",
                     "device=cuda", "precision=bf16"};
    CHECK(config_load(NULL, 9, other, &d, &err) == DDP_OK, "%s", err.msg);
    CHECK(d.model.opts.llama.tie_embeddings && d.model.opts.llama.rope_theta == 500000 &&
          d.model.opts.llama.norm_eps == 1e-6 && d.model.opts.llama.n_kv_head == 12 && d.ddp.grad_dtype == GRAD_BF16,
          "llama overrides");
    CHECK(config_hash(&c) != config_hash(&d), "the llama keys did not change the hash");
    /* rope_scaling: no stretch by default (what a folder without it reads as); hashed only when it
     * stretches, so the runs before it keep their hash */
    CHECK(!memcmp(&s->rope_scaling, &LLAMA_ROPE_UNSCALED, sizeof s->rope_scaling), "rope_scaling defaults");
    const struct { const char *set; bool hashed; } rope[] = {
        {"model.llama.rope_scaling.factor=1", false},
        {"model.llama.rope_scaling.low_freq_factor=2", false},
        {"model.llama.rope_scaling.original_max_position_embeddings=4096", false},
        {"model.llama.rope_scaling.factor=8", true},
        {"model.llama.rope_scaling={factor: 8, low_freq_factor: 2}", true},
    };
    for (size_t i = 0; i < sizeof rope / sizeof rope[0]; i++) {
        char *ov[] = {"model.kind=llama", (char *)rope[i].set};
        CHECK(config_load(NULL, 2, ov, &d, &err) == DDP_OK, "%s: %s", rope[i].set, err.msg);
        CHECK((config_hash(&c) != config_hash(&d)) == rope[i].hashed, "%s: hash %s", rope[i].set,
              rope[i].hashed ? "unchanged" : "changed");
    }
    char *l32[] = {"model.kind=llama", "model.llama.rope_scaling={factor: 32, original_max_position_embeddings: 8192}"};
    CHECK(config_load(NULL, 2, l32, &d, &err) == DDP_OK && d.model.opts.llama.rope_scaling.factor == 32 &&
          d.model.opts.llama.rope_scaling.high_freq_factor == 4, "Llama 3.2's rope_scaling: %s", err.msg);
    char *low2[] = {"model.kind=llama", "model.llama.rope_scaling={factor: 8, low_freq_factor: 2}"};
    CHECK(config_load(NULL, 2, low2, &c, &err) == DDP_OK && config_hash(&c) != config_hash(&d),
          "with a stretch, low_freq_factor is hashed: %s", err.msg);
    /* head_dim: n_embd / n_head by default, and n_embd / n_head given is that (resolved to 0, not
     * hashed); an own size is hashed, and frees n_head from dividing n_embd (Mistral-Nemo's kind) */
    config h, own, plain;
    char *same_hd[] = {"model.kind=llama", "model.llama.head_dim=64"};
    CHECK(config_load(NULL, 1, (char *[]){"model.kind=llama"}, &plain, &err) == DDP_OK &&
          plain.model.opts.llama.head_dim == 0, "head_dim's default: %s", err.msg);
    CHECK(config_load(NULL, 2, same_hd, &h, &err) == DDP_OK && h.model.opts.llama.head_dim == 0 &&
          config_hash(&h) == config_hash(&plain), "head_dim 64 of 768 / 12: resolved to %lld: %s",
          (long long)h.model.opts.llama.head_dim, err.msg);
    char *own_hd[] = {"model.kind=llama", "model.llama={n_embd: 640, n_head: 12, head_dim: 64}"};
    CHECK(config_load(NULL, 2, own_hd, &own, &err) == DDP_OK && own.model.opts.llama.head_dim == 64 &&
          llama_head_dim(&own.model.opts.llama) == 64, "head_dim 64 with 640 / 12: %s", err.msg);
    char *own_wide[] = {"model.kind=llama", "model.llama={n_embd: 640, n_head: 12, head_dim: 128}"};
    CHECK(config_load(NULL, 2, own_wide, &h, &err) == DDP_OK && config_hash(&h) != config_hash(&own),
          "an own head_dim is hashed: %s", err.msg);
    char *plain_lines = config_settings(&plain, SETTINGS_RESUME), *own_lines = config_settings(&own, SETTINGS_RESUME);
    CHECK(plain_lines && !strstr(plain_lines, "head_dim") && own_lines && strstr(own_lines, "model.llama.head_dim=64"),
          "head_dim among the hashed settings only when the shape's own");
    free(plain_lines);
    free(own_lines);
    char *nemo[] = {"model.kind=mistral", "model.mistral={n_embd: 5120, n_head: 32, n_kv_head: 8, head_dim: 128}"};
    CHECK(config_load(NULL, 2, nemo, &h, &err) == DDP_OK && (own_lines = config_settings(&h, SETTINGS_RESUME)) &&
          strstr(own_lines, "model.mistral.head_dim=128"), "Mistral-Nemo's heads: %s", err.msg);
    free(own_lines);
    /* Qwen3-0.6B's heads (16 of 128 over 1024) are its own; Qwen3-8B's 128 (4096 / 32) resolve to 0 */
    char *q06[] = {"model.kind=qwen3", "model.qwen3={n_embd: 1024, n_head: 16, n_kv_head: 8, head_dim: 128}"};
    CHECK(config_load(NULL, 2, q06, &h, &err) == DDP_OK && h.model.opts.qwen3.head_dim == 128 &&
          llama_head_dim(&h.model.opts.qwen3) == 128, "Qwen3-0.6B's heads: %s", err.msg);
    char *q8[] = {"model.kind=qwen3", "model.qwen3={n_embd: 4096, n_head: 32, n_kv_head: 8, head_dim: 128}"};
    CHECK(config_load(NULL, 2, q8, &h, &err) == DDP_OK && h.model.opts.qwen3.head_dim == 0 &&
          llama_head_dim(&h.model.opts.qwen3) == 128, "Qwen3-8B's heads resolved to %lld: %s",
          (long long)h.model.opts.qwen3.head_dim, err.msg);
    expect_fail(NULL, 2, (char *[]){"model.kind=qwen3", "model.qwen3.head_dim=127"},
                "<override 2>:1:22: model.qwen3.head_dim:",
                "expected an even model.qwen3.head_dim (RoPE rotates its two halves), got 127");
    round_trip(&own);
    round_trip(&c);
    round_trip(&d);

    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_head=5"},
                "<override 2>:1:20: model.llama.n_head:",
                "expected model.llama.n_embd divisible by model.llama.n_head, got model.llama.n_head 5 with "
                "model.llama.n_embd 768 (the default)");
    expect_fail(NULL, 3, (char *[]){"model.kind=llama", "model.llama.n_head=32", "model.llama.n_embd=96"},
                "<override 3>:1:20: model.llama.n_embd:",
                "expected an even head size model.llama.n_embd / model.llama.n_head (RoPE rotates its two halves), "
                "got model.llama.n_embd 96 with model.llama.n_head 32 (<override 2>:1:20)");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.head_dim=65"},
                "<override 2>:1:22: model.llama.head_dim:",
                "expected an even model.llama.head_dim (RoPE rotates its two halves), got 65");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.head_dim=1026"},
                "<override 2>:1:22: model.llama.head_dim:", "expected an integer in [0, 1024], got \"1026\"");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_kv_head=5"},
                "<override 2>:1:23: model.llama.n_kv_head:",
                "expected model.llama.n_head divisible by model.llama.n_kv_head, got model.llama.n_kv_head 5 with "
                "model.llama.n_head 12 (the default)");
    expect_fail(NULL, 3, (char *[]){"model.kind=llama", "data.kind=tokens", "data.seq_len=2048"},
                "<override 3>:1:14: data.seq_len:",
                "expected data.seq_len <= model.llama.block_size, got data.seq_len 2048 with model.llama.block_size "
                "1024 (the default)");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.n_kv_head=0"},
                "<override 2>:1:23: model.llama.n_kv_head:", "expected an integer in [1, 1024], got \"0\"");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.rope_theta=0"},
                "<override 2>:1:24: model.llama.rope_theta:", "expected a positive number");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.rope_scaling.factor=0.5"},
                "<override 2>:1:33: model.llama.rope_scaling.factor:",
                "expected model.llama.rope_scaling.factor >= 1 (1: no stretch)");
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "model.llama.rope_scaling={factor: 8, high_freq_factor: 1}"},
                "<override 2>:1:56: model.llama.rope_scaling.high_freq_factor:",
                "expected model.llama.rope_scaling.low_freq_factor < model.llama.rope_scaling.high_freq_factor");
    {   /* a Llama may start from a Hugging Face folder (the job checks it is one) */
        config l;
        ddp_err lerr = {0};
        CHECK(config_load(fixture("minimal.yaml"), 2, (char *[]){"model.kind=llama", "checkpoint.init_from=hf-llama"}, &l,
                          &lerr) == DDP_OK, "llama with checkpoint.init_from: %s", lerr.msg);
    }
    expect_fail(NULL, 2, (char *[]){"model.kind=gpt2", "model.llama.n_layer=2"}, "<override 2>:",
                "expected model.llama only with model.kind llama");
    char want[512];
    snprintf(want, sizeof want, "data.kind tokens only with a language model (%s)", lm_kinds());
    expect_fail(NULL, 2, (char *[]){"model.kind=mlp", "data.kind=tokens"}, "<override 2>:1:11: data.kind:", want);
    expect_fail(NULL, 2, (char *[]){"model.kind=mlp", "data.packed=true"}, "<override 2>:1:13: data.packed:",
                "expected data.packed true only with data.kind tokens");
    /* a language model reads tokens unless told otherwise, and refuses to be told otherwise */
    CHECK(config_load(NULL, 1, (char *[]){"model.kind=llama"}, &c, &err) == DDP_OK && c.data.kind == DATA_TOKENS,
          "a Llama's data.kind (%d): %s", (int)c.data.kind, err.msg);
    CHECK(config_load(NULL, 1, (char *[]){"model.kind=mlp"}, &c, &err) == DDP_OK && c.data.kind == DATA_FASHION_MNIST,
          "the MLP's data.kind (%d): %s", (int)c.data.kind, err.msg);
    char lm_want[512];
    snprintf(lm_want, sizeof lm_want, "data.kind tokens with a language model (%s), got data.kind synthetic with "
             "model.kind llama", lm_kinds());
    expect_fail(NULL, 2, (char *[]){"model.kind=llama", "data.kind=synthetic"}, "<override 2>:1:11: data.kind:",
                lm_want);
    /* the only refusal of packed rows for a model that is not a language model: the trainer has none */
    expect_fail(NULL, 3, (char *[]){"model.kind=mlp", "data.kind=tokens", "data.packed=true"},
                "<override 2>:1:11: data.kind:", want);
    snprintf(want, sizeof want, "train.recompute none with a model without blocks to recompute (selective and full: %s)",
             lm_kinds());
    expect_fail(NULL, 1, (char *[]){"train.recompute=full"}, "<override 1>:1:17: train.recompute:", want);
}

int main(void)
{
    test_init_from();
    test_init_from_shape();
    test_init_from_llama_shape();
    test_precision();
    test_llama();
    return check_done("test_config_models");
}
