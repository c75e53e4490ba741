/* test_gpt_packed.c — GPT-2 on packed rows (model_batch.docs: attention and the position table go
 * per document, a position being its offset in its document), through fixture hf-gpt2-tiny's
 * weights, on the CPU or with `--cuda` the CUDA device (the emulator in emulated builds):
 *  - rows packed with prefixes of the fixture's input rows (documents of lengths 1 and longer,
 *    rows packed differently) give, at each document's positions, the logits transformers
 *    computed for that prefix: a causal model's logits over a row's first n positions are the
 *    logits of its n-token prefix, so the fixture referees every document;
 *  - one backward over the packed rows gives the loss and every gradient of the documents'
 *    backward passes run one at a time (each alone at the start of a row, the rest of the row a
 *    document without targets) and added, within float32's noise.
 * Every shape comes from MANIFEST and config.json, so a fixture made the same way passes
 * unchanged. */
#include "tests/check.h"
#include "tests/fixture.h"
#include "tests/models/gpt_fixture.h"
#include "tests/models/hf_logits.h"

#include <math.h>
#include <string.h>

#include "models/gpt2_hf.h"

/* A position off by one or a key of another document moves logits by O(1) of the largest. */
#define TOL (HF_LOGITS_TOL_FACTOR * HF_GPT2_TINY_LOGITS_FLOOR)

static fixture_manifest fx;
static device *dev;
static model *m;
static gpt2_shape shape;
static int64_t B, T;

/* rows packed rows: rows·T tokens, targets (the next token inside the document, else
 * XENT_NO_TARGET), bounds [2, rows·T] (doc_start then doc_end), and per position the fixture row
 * its document is a prefix of. */
typedef struct packed {
    int64_t rows;
    int32_t *tokens, *targets, *bounds, *src;
} packed;

static void put_document(packed *p, int64_t row, int64_t start, int64_t len, const int32_t *tokens, int32_t src)
{
    for (int64_t i = 0; i < len; i++) {
        const int64_t at = row * T + start + i;
        p->tokens[at] = tokens[i];
        p->targets[at] = i + 1 < len ? tokens[i + 1] : XENT_NO_TARGET;
        p->bounds[at] = (int32_t)start, p->bounds[p->rows * T + at] = (int32_t)(start + len);
        p->src[at] = src;
    }
}

static packed packed_new(int64_t rows)
{
    const size_t n = (size_t)(rows * T);
    return (packed){rows, malloc(n * 4), malloc(n * 4), malloc(2 * n * 4), malloc(n * 4)};
}

static void packed_free(packed *p) { free(p->tokens), free(p->targets), free(p->bounds), free(p->src); }

/* Each row of lengths 5, 1, 11, ... (the list read on across rows, a document cut at a row's end),
 * document k of row r the prefix of fixture row (r + k) mod B. */
static packed pack_prefixes(const int32_t *input)
{
    static const int64_t lens[] = {5, 1, 11, 3, 8};
    const int64_t n_lens = sizeof lens / sizeof lens[0];
    packed p = packed_new(B);
    for (int64_t r = 0, k = 0, doc = 0; r < B; r++, doc = 0)
        for (int64_t t = 0; t < T; t += lens[k % n_lens], k++, doc++) {
            const int64_t len = lens[k % n_lens] < T - t ? lens[k % n_lens] : T - t, src = (r + doc) % B;
            put_document(&p, r, t, len, input + src * T, (int32_t)src);
        }
    return p;
}

/* One pass over p (gfx_packed_pass): evaluate (the logits to logits_out [rows·T, V] unless NULL)
 * or forward and backward with gradient scale 1; returns the loss sum. */
static double run(const packed *p, bool backward, bool accumulate, float *logits_out)
{
    return gfx_packed_pass(m, p->tokens, p->targets, p->bounds, p->rows, T, backward, 1.0f, accumulate, logits_out);
}

/* Every packed position's logits against transformers' for the same prefix. */
static void test_logits(const packed *p, const float *ref)
{
    const int64_t V = shape.vocab_size;
    float *logits = malloc((size_t)(B * T * V) * 4);
    run(p, false, false, logits);
    double worst = 0, top = 0;
    for (int64_t at = 0; at < B * T; at++) {
        const int64_t offset = at % T - p->bounds[at];
        const float *want = ref + (p->src[at] * T + offset) * V;
        for (int64_t v = 0; v < V; v++)
            worst = fmax(worst, fabs((double)logits[at * V + v] - want[v])), top = fmax(top, fabs((double)want[v]));
    }
    worst /= top;
    fprintf(stderr, "  packed logits: largest error %.3g of the largest logit (tolerance %.3g)\n", worst,
            TOL);
    CHECK(worst <= TOL, "packed logits differ from transformers' by %.3g", worst);
    free(logits);
}

static float *grads_of(void)
{
    float *host = malloc(m->n_params * 4);
    dev->ops->download(dev, host, m->grads, m->n_params * 4, NULL);
    return host;
}

/* The packed backward against the documents' backward passes one at a time, added. */
static void test_gradients(const packed *p)
{
    const double packed_loss = run(p, true, false, NULL);
    float *packed_grads = grads_of();
    double loss = 0;
    int n_docs = 0;
    packed one = packed_new(1);
    for (int64_t r = 0; r < B; r++)
        for (int64_t t = 0; t < T; t = p->bounds[p->rows * T + r * T + t]) {
            const int64_t at = r * T + t, len = p->bounds[p->rows * T + at] - t;
            put_document(&one, 0, 0, len, p->tokens + at, 0);
            if (len < T) /* the rest of the row: a document without targets */
                put_document(&one, 0, len, T - len, p->tokens + r * T, 0);
            for (int64_t i = len; i < T; i++)
                one.targets[i] = XENT_NO_TARGET;
            loss += run(&one, true, n_docs++ > 0, NULL);
        }
    packed_free(&one);
    fprintf(stderr, "  loss sum %.9g packed, %.9g over %d documents alone\n", packed_loss, loss, n_docs);
    CHECK(fabs(packed_loss - loss) <= GFX_RTOL * fabs(loss), "loss sum %.9g packed, %.9g document by document",
          packed_loss, loss);
    float *doc_grads = grads_of();
    for (int i = 0; i < m->n_tensors; i++) {
        const param_tensor *t = &m->tensors[i];
        char name[160];
        snprintf(name, sizeof name, "grad %s", t->name);
        gfx_compare(name, packed_grads + t->offset, doc_grads + t->offset, t->numel, GFX_RTOL, GFX_SCALE_ATOL, 0);
    }
    free(packed_grads), free(doc_grads);
}

int main(int argc, char **argv)
{
    const bool cuda = argc > 1 && !strcmp(argv[1], "--cuda");
    ddp_err err = {0};
    dev = gfx_open_device(cuda);
    if (!dev || fixture_manifest_read(&fx, "hf-gpt2-tiny"))
        return 1;
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(gpt2_hf_read_shape(fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL);
    CHECK(input && ref && B > 0 && T > 1 && T <= shape.block_size && !err.msg[0], "fixture input, logits");
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = shape.vocab_size};
    if (input && ref && !err.msg[0])
        CHECK(gpt2_create(&shape, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE, &m, &err) ==
                  DDP_OK, "gpt2_create: %s", err.msg);
    if (m) {
        CHECK(model_init_params(m, 1, &err) == DDP_OK, "init: %s", err.msg);
        CHECK(gpt2_hf_load_model(m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
        packed p = pack_prefixes(input);
        test_logits(&p, ref);
        test_gradients(&p);
        packed_free(&p);
        m->ops->destroy(m);
    }
    free(input), free(ref);
    dev->ops->destroy(dev);
    return check_done(cuda ? "test_gpt_packed --cuda" : "test_gpt_packed");
}
