/* test_sft_reference.c — packed, loss-masked fine-tuning batches through the Llama, against the
 * fixture sft-reference (transformers' LlamaForCausalLM in float64 on hf-llama-tiny's weights, rows
 * packed with several documents, attention within each document, positions restarting, the loss
 * the mean over the batch's trainable targets): the logits, the masked loss and every parameter's
 * gradient, with the batch given as ddprun's trainer stages it (model_batch.docs, XENT_NO_TARGET).
 * Also, without the fixture's numbers: the documents of a packed row are independent (changing
 * one document's tokens leaves every other position's logits bit for bit), and positions restart
 * (a document's logits at the end of a row equal those of the same tokens in a row of their own).
 * Every shape comes from the MANIFESTs and config.json, so a fixture made the same way with other
 * documents and seeds passes unchanged. `--cuda` runs it all on the CUDA device (the emulator in
 * emulated builds). */
#include "tests/check.h"
#include "tests/fixture.h"
#include "tests/models/gpt_fixture.h"

#include <math.h>
#include <string.h>

#include "models/llama.h"
#include "models/llama_hf.h"

/* The fixture is float64 rounded once to float32, as llama-reference; as there, a correct float32
 * implementation lands within about 1e-5 relative of each value, a value near zero within 1e-5 of
 * its tensor's largest magnitude (tests/models/llama_fixture.h). Masking a boundary wrongly, or a
 * position off by one, moves values by O(their magnitude). */
#define SFT_RTOL 1e-5
#define SFT_SCALE_ATOL 1e-5

static gfx f; /* manifest: sft-reference's; m, B, T, dev */
static fixture_manifest hf;
static llama_shape shape;
static int32_t *input, *doc, *pos, *mask;

/* The packed batch of tokens: targets (the next token where the mask says, else XENT_NO_TARGET)
 * and the document bounds [2, B, T] from each position's document index. */
typedef struct packed {
    int32_t *targets, *docs;
    int64_t n_targets;
} packed;

static packed pack_rows(const int32_t *tokens, const int32_t *doc_of, const int32_t *target_mask)
{
    const int64_t B = f.B, T = f.T, n = B * T;
    packed p = {malloc((size_t)n * 4), malloc((size_t)(2 * n) * 4), 0};
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t;
            int64_t s = t, e = t + 1;
            while (s > 0 && doc_of[i - (t - s) - 1] == doc_of[i])
                s--;
            while (e < T && doc_of[b * T + e] == doc_of[i])
                e++;
            p.docs[i] = (int32_t)s, p.docs[n + i] = (int32_t)e;
            p.targets[i] = target_mask && target_mask[i] ? tokens[i + 1] : XENT_NO_TARGET;
            p.n_targets += p.targets[i] != XENT_NO_TARGET;
        }
    return p;
}

/* One pass over the packed batch (gfx_packed_pass): forward only (logits_out [B·T, V] when not
 * NULL) or forward and backward with the gradient scale 1/n_targets; returns the loss sum. */
static double run(const int32_t *tokens, const packed *p, bool backward, float *logits_out)
{
    return gfx_packed_pass(f.m, tokens, p->targets, p->docs, f.B, f.T, backward, 1.0f / (float)p->n_targets, false,
                           logits_out);
}

/* The fixture's rules, as ddprun reads them: positions restart at each document, and n_targets is
 * the mask's count. */
static void test_conventions(const packed *p)
{
    int32_t *n_targets = fixture_load(&f.manifest, "n_targets", NULL);
    int64_t off = 0;
    for (int64_t i = 0; i < f.B * f.T; i++)
        off += pos[i] != (int32_t)(i % f.T - p->docs[i]);
    CHECK(off == 0, "%lld positions are not their offset in their document", (long long)off);
    CHECK(n_targets && n_targets[0] == p->n_targets, "n_targets %d, the mask counts %lld", n_targets ? n_targets[0] : -1,
          (long long)p->n_targets);
    free(n_targets);
}

static void test_fixture(const packed *p)
{
    const int64_t n = f.B * f.T, V = shape.vocab_size;
    float *logits = malloc((size_t)(n * V) * 4), *ref = fixture_load(&f.manifest, "logits", NULL);
    float *loss = fixture_load(&f.manifest, "loss", NULL);
    run(input, p, false, logits);
    gfx_compare("logits", logits, ref, (size_t)(n * V), SFT_RTOL, SFT_SCALE_ATOL, 0);
    double mean = run(input, p, true, NULL) / (double)p->n_targets;
    fprintf(stderr, "  loss %.9g, transformers' %.9g over %lld targets\n", mean, (double)loss[0], (long long)p->n_targets);
    CHECK_CLOSE(mean, loss[0], SFT_RTOL, 0);
    gfx_compare_params(&f, f.m->grads, "grad", SFT_RTOL, SFT_SCALE_ATOL, 0);
    free(logits), free(ref), free(loss);
}

/* Changing every token of one document changes no other position's logits, not by one bit. */
static void test_independent(const packed *p)
{
    const int64_t n = f.B * f.T, V = shape.vocab_size;
    float *a = malloc((size_t)(n * V) * 4), *b = malloc((size_t)(n * V) * 4);
    int32_t *other = malloc((size_t)n * 4);
    memcpy(other, input, (size_t)n * 4);
    const int64_t changed = doc[f.T / 2]; /* the document in the middle of row 0 */
    for (int64_t t = 0; t < f.T; t++)
        if (doc[t] == changed)
            other[t] = (input[t] + 1 + (int32_t)t) % (int32_t)V;
    run(input, p, false, a);
    run(other, p, false, b);
    int64_t moved = 0, inside = 0;
    for (int64_t r = 0; r < n; r++) {
        const bool mine = r < f.T && doc[r] == changed;
        const bool same = !memcmp(a + r * V, b + r * V, (size_t)V * 4);
        moved += !mine && !same;
        inside += mine && !same;
    }
    CHECK(moved == 0, "changing document %lld of row 0 changed the logits of %lld other positions", (long long)changed,
          (long long)moved);
    CHECK(inside > 0, "changing document %lld changed none of its own logits", (long long)changed);
    free(a), free(b), free(other);
}

/* Row 0's last document alone at the start of a row (the rest padding, a document of its own)
 * gives the logits it has at the end of row 0 (within float32's noise: other GEMM shapes). */
static void test_positions_restart(const packed *p)
{
    const int64_t n = f.B * f.T, V = shape.vocab_size, T = f.T;
    const int64_t start = p->docs[T - 1], len = T - start;
    int32_t *moved = calloc((size_t)n, 4), *doc_of = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        doc_of[i] = i < len ? 0 : 1;
    memcpy(moved, input + start, (size_t)len * 4);
    packed q = pack_rows(moved, doc_of, NULL);
    float *a = malloc((size_t)(n * V) * 4), *b = malloc((size_t)(n * V) * 4);
    run(input, p, false, a);
    run(moved, &q, false, b);
    gfx_compare("a document's logits moved to the row's start", b, a + start * V, (size_t)(len * V), SFT_RTOL,
                SFT_SCALE_ATOL, 0);
    free(moved), free(doc_of), free(q.targets), free(q.docs), free(a), free(b);
}

int main(int argc, char **argv)
{
    bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    ddp_err err = {0};
    f.dev = gfx_open_device(cuda);
    if (!f.dev || fixture_manifest_read(&f.manifest, "sft-reference") || fixture_manifest_read(&hf, "hf-llama-tiny"))
        return 1;
    f.B = fixture_header_int(&f.manifest, "B"), f.T = fixture_header_int(&f.manifest, "T");
    CHECK(llama_hf_read_shape(&llama_family_llama, hf.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    input = fixture_load(&f.manifest, "input", NULL), doc = fixture_load(&f.manifest, "doc", NULL);
    pos = fixture_load(&f.manifest, "pos", NULL), mask = fixture_load(&f.manifest, "target_mask", NULL);
    CHECK(input && doc && pos && mask && f.B > 0 && f.T > 1 && !err.msg[0], "fixture input, doc, pos, target_mask");
    sample_layout data = {.input = {SAMPLE_I32, f.T}, .target = {SAMPLE_I32, f.T}, .n_classes = shape.vocab_size};
    if (input && doc && pos && mask && !err.msg[0]) {
        CHECK(llama_create(&llama_family_llama, &shape, &(lm_run){.compute = TENSOR_F32}, f.dev, &data, f.B,
                           MODEL_BUFFERS_WHOLE, &f.m, &err) == DDP_OK, "llama_create: %s", err.msg);
        CHECK(model_init_params(f.m, 1, &err) == DDP_OK, "init: %s", err.msg);
        CHECK(llama_hf_load_model(&llama_family_llama, f.m, hf.dir, &err) == DDP_OK, "import: %s", err.msg);
        packed p = pack_rows(input, doc, mask);
        test_conventions(&p);
        test_fixture(&p);
        test_independent(&p);
        test_positions_restart(&p);
        free(p.targets), free(p.docs);
        f.m->ops->destroy(f.m);
    }
    free(input), free(doc), free(pos), free(mask);
    f.dev->ops->destroy(f.dev);
    return check_done(cuda ? "test_sft_reference --cuda" : "test_sft_reference");
}
