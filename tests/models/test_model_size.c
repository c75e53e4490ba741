/* test_model_size.c — model_size (models/model_registry.c), the memory plan's size-only path:
 * for GPT-2, Llama and Qwen2 shapes (grouped-query and multi-head attention, tied and untied,
 * sequences shorter than the block, 1 and 3 rows) it gives exactly the tensor table (names,
 * offsets, sizes), parameter count and activation bytes (float32 and bf16) of the model
 * model_create builds on the CPU, and the parameter counts equal the closed formulas; the units
 * (the embeddings, each block, the final norm and head; an MLP's layers) cover the tensors in
 * order; the MLP's size, which follows its data, is refused.
 * Sizes past 64 bits (issue 37's plan shapes) are refused naming their keys, by model_size and by
 * model_create before it allocates, and below that the figure grows with the batch. */
#include "tests/check.h"

#include "models/gpt2.h"
#include "models/llama.h"
#include "models/model.h"
#include "runtime/device/device.h"

static device *dev;

/* The units (model.h) of a language model of n_layer blocks: the embeddings, each block (its
 * tensors all named with the block's prefix, `block` set), the final norm (and head); together
 * they cover every tensor and parameter once, in order, each unit's range its tensors'. */
static void check_units(const model *m, int64_t n_layer, const char *block_prefix, const char *what)
{
    CHECK(m->n_units == n_layer + 2, "%s: %d units for %lld blocks", what, m->n_units, (long long)n_layer);
    int next_tensor = 0;
    size_t next_param = 0;
    for (int u = 0; u < m->n_units; u++) {
        const model_unit *un = &m->units[u];
        bool block = u > 0 && u <= n_layer;
        CHECK(un->first_tensor == next_tensor && un->offset == next_param && un->n_tensors > 0,
              "%s: unit %d starts at tensor %d, parameter %zu", what, u, un->first_tensor, un->offset);
        CHECK(un->block == block, "%s: unit %d is %sa block", what, u, un->block ? "" : "not ");
        size_t count = 0;
        for (int i = un->first_tensor; i < un->first_tensor + un->n_tensors && i < m->n_tensors; i++) {
            char prefix[64];
            snprintf(prefix, sizeof prefix, "%s%d.", block_prefix, u - 1);
            CHECK(!block || !strncmp(m->tensors[i].name, prefix, strlen(prefix)), "%s: %s in unit %d", what,
                  m->tensors[i].name, u);
            count += m->tensors[i].numel;
        }
        CHECK(un->count == count, "%s: unit %d counts %zu parameters, its tensors %zu", what, u, un->count, count);
        next_tensor += un->n_tensors;
        next_param += un->count;
    }
    CHECK(next_tensor == m->n_tensors && next_param == m->n_params, "%s: the units cover %d tensors, %zu parameters",
          what, next_tensor, next_param);
}

/* model_size(opts) against the model model_create builds; returns the size's n_params. */
static size_t same_as_built(const model_opts *opts, int64_t T, int64_t rows, const char *what)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}};
    model *m = NULL, s = {0};
    ddp_err err = {0};
    CHECK(model_create(opts, dev, &data, rows, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "%s: model_create: %s", what, err.msg);
    CHECK(model_size(opts, &data, rows, &s, &err) == DDP_OK, "%s: model_size: %s", what, err.msg);
    if (!m)
        return 0;
    CHECK(s.n_params == m->n_params && s.n_tensors == m->n_tensors, "%s: %zu params in %d tensors, built %zu in %d",
          what, s.n_params, s.n_tensors, m->n_params, m->n_tensors);
    for (int i = 0; i < s.n_tensors && i < m->n_tensors; i++)
        CHECK(!strcmp(s.tensors[i].name, m->tensors[i].name) && s.tensors[i].offset == m->tensors[i].offset &&
              s.tensors[i].numel == m->tensors[i].numel, "%s: tensor %d %s at %zu (%zu), built %s at %zu (%zu)",
              what, i, s.tensors[i].name, s.tensors[i].offset, s.tensors[i].numel, m->tensors[i].name,
              m->tensors[i].offset, m->tensors[i].numel);
    const size_t m_bytes = m->activation_bytes;
    CHECK(s.activation_bytes == m->activation_bytes, "%s (T %lld, %lld rows): activations %zu bytes, built %zu", what,
          (long long)T, (long long)rows, s.activation_bytes, m->activation_bytes);
    CHECK(s.act_dtype == TENSOR_F32, "%s: compute type %d", what, (int)s.act_dtype);
    bool gpt2 = opts->kind == MODEL_GPT2;
    check_units(&s, gpt2 ? opts->gpt2.n_layer : opts->kind == MODEL_QWEN2 ? opts->qwen2.n_layer : opts->llama.n_layer,
                gpt2 ? "h." : "model.layers.", what);
    m->ops->destroy(m);
    model_free_tensors(&s);
    /* bf16 activations: the size's figure is the built model's too (model_create checks its own
     * buffers against it) */
    model_opts bf16 = *opts;
    bf16.compute = TENSOR_BF16;
    model *mb = NULL, sb = {0};
    CHECK(model_create(&bf16, dev, &data, rows, MODEL_BUFFERS_WHOLE, &mb, &err) == DDP_OK, "%s bf16: model_create: %s", what, err.msg);
    CHECK(model_size(&bf16, &data, rows, &sb, &err) == DDP_OK, "%s bf16: model_size: %s", what, err.msg);
    CHECK(mb && sb.act_dtype == TENSOR_BF16 && sb.activation_bytes == mb->activation_bytes &&
          sb.activation_bytes < m_bytes, "%s bf16: activations %zu bytes, built %zu, f32 %zu", what,
          sb.activation_bytes, mb ? mb->activation_bytes : 0, m_bytes);
    if (mb)
        mb->ops->destroy(mb);
    model_free_tensors(&sb);
    return s.n_params;
}

static void gpt2_sizes(void)
{
    const gpt2_shape shape = {.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 40, .vocab_size = 300};
    model_opts o = {.kind = MODEL_GPT2, .gpt2 = shape, .compute = TENSOR_F32};
    const int64_t C = 32, Vp = gpt2_vocab_padded(300), block = 12 * C * C + 13 * C;
    const size_t want = (size_t)(Vp * C + 40 * C + 2 * block + 2 * C);
    for (int64_t rows = 1; rows <= 3; rows += 2) {
        size_t n = same_as_built(&o, 24, rows, "gpt2");
        CHECK(n == want, "gpt2: %zu parameters, the formula says %zu", n, want);
    }
}

static void llama_sizes(void)
{
    const llama_shape shapes[] = {
        {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 32, .ffn_hidden = 88, .block_size = 40,
         .vocab_size = 300, .rope_theta = 10000, .norm_eps = 1e-5, .tie_embeddings = false},
        {.n_layer = 3, .n_head = 4, .n_kv_head = 1, .n_embd = 16, .ffn_hidden = 40, .block_size = 24,
         .vocab_size = 129, .rope_theta = 500000, .norm_eps = 1e-6, .tie_embeddings = true},
        {.n_layer = 1, .n_head = 2, .n_kv_head = 2, .n_embd = 8, .ffn_hidden = 24, .block_size = 24,
         .vocab_size = 50, .rope_theta = 10000, .norm_eps = 1e-5, .tie_embeddings = false},
        /* heads of their own size, 3 x 12 = 36 wide over 32 channels (Mistral-Nemo's are narrower) */
        {.n_layer = 2, .n_head = 3, .n_kv_head = 1, .n_embd = 32, .ffn_hidden = 88, .block_size = 40,
         .vocab_size = 300, .rope_theta = 10000, .norm_eps = 1e-5, .tie_embeddings = false, .head_dim = 12},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const llama_shape *s = &shapes[i];
        model_opts o = {.kind = MODEL_LLAMA, .llama = *s, .compute = TENSOR_F32};
        const int64_t C = s->n_embd, hd = s->head_dim ? s->head_dim : C / s->n_head;
        const int64_t Vp = llama_vocab_padded(s->vocab_size);
        const int64_t block = 2 * C + C * s->n_head * hd + 2 * C * s->n_kv_head * hd + s->n_head * hd * C +
                              3 * C * s->ffn_hidden;
        const size_t want = (size_t)(Vp * C * (s->tie_embeddings ? 1 : 2) + s->n_layer * block + C);
        for (int64_t rows = 1; rows <= 3; rows += 2) {
            char what[64];
            snprintf(what, sizeof what, "llama shape %zu", i);
            size_t n = same_as_built(&o, s->block_size - 4, rows, what);
            CHECK(n == want, "%s: %zu parameters, the formula says %zu", what, n, want);
        }
        /* Qwen2: the same shape with the q/k/v projections' biases */
        model_opts q = {.kind = MODEL_QWEN2, .qwen2 = *s, .compute = TENSOR_F32};
        char what[64];
        snprintf(what, sizeof what, "qwen2 shape %zu", i);
        size_t n = same_as_built(&q, s->block_size - 4, 2, what);
        size_t biases = (size_t)(s->n_layer * (s->n_head + 2 * s->n_kv_head) * hd);
        CHECK(n == want + biases, "%s: %zu parameters, the formula says %zu", what, n, want + biases);
    }
}

/* The shapes: 128 (96 for GPT-2) layers of width 65536 over a 2^24 vocabulary and 2^20
 * positions, in float32: 2^(24+20+2) bytes of logits a row, 2.0 x 2^64 bytes in all at 65536 rows. */
static const llama_shape big_llama = {.n_layer = 128, .n_head = 64, .n_kv_head = 8, .n_embd = 65536,
                                      .ffn_hidden = 174848, .block_size = 1 << 20, .vocab_size = 1 << 24,
                                      .rope_theta = 500000, .norm_eps = 1e-5, .tie_embeddings = true};
static const gpt2_shape big_gpt2 = {.n_layer = 96, .n_head = 64, .n_embd = 65536, .block_size = 1 << 20,
                                    .vocab_size = 1 << 24};

/* model_size at rows: its code, activation bytes into *bytes and message into msg. */
static int size_at(const model_opts *o, int64_t T, int64_t rows, size_t *bytes, char *msg, size_t cap)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}};
    model s = {0};
    ddp_err err = {0};
    int rc = model_size(o, &data, rows, &s, &err);
    *bytes = s.activation_bytes;
    snprintf(msg, cap, "%s", err.msg);
    model_free_tensors(&s);
    return rc;
}

/* Activation sizes past 64 bits are refused naming the keys they grow with, at the batch of the
 * issue and at the largest data.batch_size; up to there the figure grows with the batch and is
 * never below the logits' own bytes (a wrapped product would be). */
static void sizes_past_64_bits(const model_opts *o, const char *const keys[], int64_t Vp)
{
    const int64_t T = 1 << 20;
    const int64_t refused[] = {65536, INT32_MAX};
    char msg[DDP_ERR_MSG];
    size_t bytes, prev = 0;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = size_at(o, T, refused[i], &bytes, msg, sizeof msg);
        CHECK(rc == DDP_EUSAGE, "%s at %lld rows: refused (code %d), figure %zu", keys[0], (long long)refused[i],
              rc, bytes);
        CHECK_STR_CONTAINS(msg, "overflows 64 bits");
        for (int k = 0; keys[k]; k++)
            CHECK_STR_CONTAINS(msg, keys[k]);
        char rows[64];
        snprintf(rows, sizeof rows, "x %lld sequences per rank (data.batch_size)", (long long)refused[i]);
        CHECK_STR_CONTAINS(msg, rows);
    }
    int64_t rows = 1;
    for (; rows <= 1024; rows *= 2) {
        int rc = size_at(o, T, rows, &bytes, msg, sizeof msg);
        CHECK(rc == DDP_OK, "%s at %lld rows: %s", keys[0], (long long)rows, msg);
        double logits = (double)rows * (double)T * (double)Vp * sizeof(float);
        CHECK(bytes >= prev && (double)bytes >= logits, "%s at %lld rows: %zu bytes after %zu, logits alone %.4g",
              keys[0], (long long)rows, bytes, prev, logits);
        prev = bytes;
    }
}

/* model_create refuses a micro-batch too large to size before it allocates anything (small
 * widths, so an allocation that did happen would be of a wrapped size). */
static void create_refuses_past_64_bits(void)
{
    const int64_t T = 1 << 20;
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}};
    model_opts o[] = {
        {.kind = MODEL_LLAMA, .compute = TENSOR_F32,
         .llama = {.n_layer = 2, .n_head = 4, .n_kv_head = 4, .n_embd = 64, .ffn_hidden = 128, .block_size = T,
                   .vocab_size = 256, .rope_theta = 10000, .norm_eps = 1e-5}},
        {.kind = MODEL_GPT2, .compute = TENSOR_F32,
         .gpt2 = {.n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = T, .vocab_size = 256}},
    };
    for (size_t i = 0; i < sizeof o / sizeof o[0]; i++) {
        model *m = NULL;
        ddp_err err = {0};
        int rc = model_create(&o[i], dev, &data, INT32_MAX, MODEL_BUFFERS_WHOLE, &m, &err);
        CHECK(rc == DDP_EUSAGE && !m, "model %zu at 2^31-1 rows of 2^20 tokens: code %d (%s)", i, rc, err.msg);
        CHECK_STR_CONTAINS(err.msg, "overflows 64 bits");
        CHECK_STR_CONTAINS(err.msg, "data.seq_len=1048576 x 2147483647 sequences per rank (data.batch_size)");
        if (m)
            m->ops->destroy(m);
    }
}

/* A parameter tensor whose elements, or the buffer up to its end, do not fit in 64 bits. */
static void tensor_past_64_bits(void)
{
    model m = {0};
    ddp_err err = {0};
    size_t off = 0;
    CHECK(model_add_tensor(&m, "w", (int64_t)1 << 40, (int64_t)1 << 40, true, &off, &err) == DDP_EUSAGE,
          "2^80 elements accepted, offset %zu", off);
    CHECK_STR_CONTAINS(err.msg, "parameters overflow 64 bits");
    off = SIZE_MAX / sizeof(float) - 10; /* the elements fit, the buffer's bytes do not */
    CHECK(model_add_tensor(&m, "b", 100, 0, false, &off, &err) == DDP_EUSAGE, "offset %zu accepted", off);
    CHECK(m.n_tensors == 0, "%d tensors after refusals", m.n_tensors);
    model_free_tensors(&m);
}

int main(void)
{
    ddp_err err = {0};
    CHECK(device_cpu_create(&dev, &err) == DDP_OK, "cpu device: %s", err.msg);
    gpt2_sizes();
    llama_sizes();
    const char *const llama_keys[] = {"model.llama.n_layer=128", "model.llama.n_embd=65536",
                                      "model.llama.ffn_hidden=174848", "model.llama.vocab_size=16777216",
                                      "data.seq_len=1048576", NULL};
    const char *const gpt2_keys[] = {"model.gpt2.n_layer=96", "model.gpt2.n_embd=65536",
                                     "model.gpt2.vocab_size=16777216", "data.seq_len=1048576", NULL};
    sizes_past_64_bits(&(model_opts){.kind = MODEL_LLAMA, .llama = big_llama, .compute = TENSOR_F32}, llama_keys,
                       1 << 24);
    sizes_past_64_bits(&(model_opts){.kind = MODEL_GPT2, .gpt2 = big_gpt2, .compute = TENSOR_F32}, gpt2_keys,
                       1 << 24);
    create_refuses_past_64_bits();
    tensor_past_64_bits();
    model_opts mlp = {.kind = MODEL_MLP, .mlp = {.n_hidden = 1, .hidden = {16}}};
    sample_layout data = {.input = {SAMPLE_U8, 10}, .target = {SAMPLE_I32, 1}, .n_classes = 3};
    model s = {0};
    CHECK(model_size(&mlp, &data, 4, &s, &err) == DDP_EUSAGE, "the MLP's size was given");
    CHECK_STR_CONTAINS(err.msg, "only language models' are known");
    model *built = NULL;
    CHECK(model_create(&mlp, dev, &data, 4, MODEL_BUFFERS_WHOLE, &built, &err) == DDP_OK, "mlp: %s", err.msg);
    if (built) { /* the MLP's units: its layers, a weight and a bias each */
        CHECK(built->n_units == 2 && built->units[0].n_tensors == 2 && built->units[1].first_tensor == 2 &&
              built->units[1].offset == built->units[0].count && !built->units[0].block &&
              built->units[0].count + built->units[1].count == built->n_params, "mlp: %d units", built->n_units);
        built->ops->destroy(built);
    }
    dev->ops->destroy(dev);
    return check_done("test_model_size");
}
