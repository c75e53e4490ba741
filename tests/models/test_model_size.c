/* test_model_size.c — model_size (models/model_registry.c), the memory plan's size-only path:
 * for GPT-2 and Llama shapes (grouped-query and multi-head attention, tied and untied, sequences
 * shorter than the block, 1 and 3 rows) it gives exactly the tensor table (names, offsets, sizes),
 * parameter count and activation bytes of the model model_create builds on the CPU, and the
 * parameter counts equal the closed formulas; the MLP, whose size follows its data, is refused. */
#include "tests/check.h"

#include "models/gpt2.h"
#include "models/llama.h"
#include "models/model.h"
#include "runtime/device/device.h"

static device *dev;

/* model_size(opts) against the model model_create builds; returns the size's n_params. */
static size_t same_as_built(const model_opts *opts, int64_t T, int64_t rows, const char *what)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}};
    model *m = NULL, s = {0};
    ddp_err err = {0};
    CHECK(model_create(opts, dev, &data, rows, 0, &m, &err) == DDP_OK, "%s: model_create: %s", what, err.msg);
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
    CHECK(s.activation_bytes == m->activation_bytes, "%s (T %lld, %lld rows): activations %zu bytes, built %zu", what,
          (long long)T, (long long)rows, s.activation_bytes, m->activation_bytes);
    CHECK(s.act_dtype == TENSOR_F32, "%s: compute type %d", what, (int)s.act_dtype);
    m->ops->destroy(m);
    model_free_tensors(&s);
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
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const llama_shape *s = &shapes[i];
        model_opts o = {.kind = MODEL_LLAMA, .llama = *s, .compute = TENSOR_F32};
        const int64_t C = s->n_embd, hd = C / s->n_head, Vp = llama_vocab_padded(s->vocab_size);
        const int64_t block = 2 * C + C * s->n_head * hd + 2 * C * s->n_kv_head * hd + s->n_head * hd * C +
                              3 * C * s->ffn_hidden;
        const size_t want = (size_t)(Vp * C * (s->tie_embeddings ? 1 : 2) + s->n_layer * block + C);
        for (int64_t rows = 1; rows <= 3; rows += 2) {
            char what[64];
            snprintf(what, sizeof what, "llama shape %zu", i);
            size_t n = same_as_built(&o, s->block_size - 4, rows, what);
            CHECK(n == want, "%s: %zu parameters, the formula says %zu", what, n, want);
        }
    }
}

int main(void)
{
    ddp_err err = {0};
    CHECK(device_cpu_create(&dev, &err) == DDP_OK, "cpu device: %s", err.msg);
    gpt2_sizes();
    llama_sizes();
    model_opts mlp = {.kind = MODEL_MLP, .mlp = {.n_hidden = 1, .hidden = {16}}};
    sample_layout data = {.input = {SAMPLE_U8, 10}, .target = {SAMPLE_I32, 1}, .n_classes = 3};
    model s = {0};
    CHECK(model_size(&mlp, &data, 4, &s, &err) == DDP_EUSAGE, "the MLP's size was given");
    CHECK_STR_CONTAINS(err.msg, "only GPT-2's and Llama's");
    dev->ops->destroy(dev);
    return check_done("test_model_size");
}
