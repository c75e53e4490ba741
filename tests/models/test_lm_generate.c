/* test_lm_generate.c — text generation (models/lm_generate.c) on a tiny GPT-2 on the CPU backend:
 * finite parameters draw every token inside the vocabulary, the same ones for the same seed; a
 * NaN or infinite parameter makes it refuse the logits with DDP_ENONFINITE naming the token, for
 * top-k, greedy and whole-vocabulary draws alike, before drawing anything (top-k sampling on NaN
 * logits used to search forever for a k-th largest value: the test's time limit catches that);
 * a stop flag already set draws nothing and says how far it got (DDP_EPREEMPTED); of two stop
 * ids, the first drawn ends a greedy or seeded draw right after its first occurrence (appended and
 * counted, nothing drawn past it, the tokens before it those of the draw without them), and ids
 * never drawn change nothing. Top-p keeps the smallest set of the most likely ids whose chances reach it (after
 * temperature and top-k; ties in id order), leaves the draw as it was at 1, and draws the greedy
 * tokens below any one chance. A classifier in chunks gives the whole one's row logits and tokens.
 * The model `ddprun generate` rebuilds from a checkpoint's description
 * (model_opts_from_description): a GPT-2's and a Llama's (grouped-query, tied and untied) give
 * their kind, shape and sequence length back, and the model built from them has the same
 * description and tensors (and, for the Llama, draws tokens as GPT-2 does); an MLP's description
 * and foreign text are refused quoting them. */
#include "tests/check.h"

#include <math.h>
#include <stdlib.h>

#include "models/gpt2.h"
#include "models/llama.h"
#include "models/lm_generate.h"
#include "runtime/device/device.h"

#define T 8
#define PROMPT 3
#define DRAW 5

static const gpt2_shape SHAPE = {.n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = T, .vocab_size = 50};
static device *dev;

static model *build(void)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = SHAPE.vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(gpt2_create(&SHAPE, &(lm_run){.compute = TENSOR_F32}, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "gpt2_create: %s", err.msg);
    CHECK(m && model_init_params(m, 5, &err) == DDP_OK, "init: %s", err.msg);
    return m;
}

/* Generates up to DRAW tokens after a fixed prompt into ids (-1 where none was drawn), their count
 * into *drawn; returns the status, err filled. */
static int generate_counted(model *m, const lm_sampling *s, int32_t *ids, int64_t *drawn, ddp_err *err)
{
    for (int i = 0; i < PROMPT + DRAW; i++)
        ids[i] = i < PROMPT ? 7 * i + 1 : -1;
    return lm_generate(m, ids, PROMPT, DRAW, s, drawn, err);
}

static int generate(model *m, const lm_sampling *s, int32_t *ids, ddp_err *err)
{
    int64_t drawn = -1;
    int rc = generate_counted(m, s, ids, &drawn, err);
    CHECK(rc != DDP_OK || drawn == DRAW, "no stop id, yet %lld of %d tokens drawn", (long long)drawn, DRAW);
    return rc;
}

static void finite_draws(model *m)
{
    int32_t a[PROMPT + DRAW], b[PROMPT + DRAW];
    ddp_err err = {0};
    lm_sampling s = {.temperature = 1.0, .top_k = 10, .seed = 3};
    CHECK(generate(m, &s, a, &err) == DDP_OK, "finite parameters: %s", err.msg);
    for (int i = PROMPT; i < PROMPT + DRAW; i++)
        CHECK(a[i] >= 0 && a[i] < SHAPE.vocab_size, "token %d is %d, outside the vocabulary", i, a[i]);
    CHECK(generate(m, &s, b, &err) == DDP_OK && memcmp(a, b, sizeof a) == 0, "the same seed draws the same tokens");
}

/* The same GPT-2 with its classifier in chunks of 3 of its 8 rows (train.logits_mb), which leaves
 * no pass's logits whole: after an evaluation, every row's logits (the head again over that row)
 * are the whole model's up to the order of a C-term sum (about 1e-6 relative here; a wrong row is
 * off by the logits' own size), and generation draws the whole model's tokens, greedy and seeded. */
static void chunked_draws(model *whole)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = SHAPE.vocab_size};
    const int64_t Vp = gpt2_vocab_padded(SHAPE.vocab_size);
    model *m = NULL;
    ddp_err err = {0};
    const lm_run run = {.compute = TENSOR_F32, .logits_bytes = 3 * (size_t)Vp * sizeof(float)};
    CHECK(gpt2_create(&SHAPE, &run, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "chunked: %s", err.msg);
    if (!m)
        return;
    int64_t ld = 0;
    const size_t row_bytes = (size_t)SHAPE.vocab_size * sizeof(float);
    CHECK(m->ops->logits(m, &ld) == NULL, "chunked: no whole logits to read");
    dev->ops->copy(dev, m->params, whole->params, whole->n_params * sizeof(float), NULL);
    int32_t tokens[T], *tok_dev = NULL;
    float *stats = NULL, a[64], b[64]; /* SHAPE.vocab_size of them */
    for (int i = 0; i < T; i++)
        tokens[i] = (5 * i + 2) % SHAPE.vocab_size;
    CHECK(dev->ops->alloc(dev, sizeof tokens, (void **)&tok_dev, &err) == DDP_OK &&
          dev->ops->alloc(dev, 2 * sizeof(float), (void **)&stats, &err) == DDP_OK &&
          dev->ops->upload(dev, tok_dev, tokens, sizeof tokens, &err) == DDP_OK, "%s", err.msg);
    model_batch batch = {.inputs = tok_dev, .targets = tok_dev, .rows = 1};
    CHECK(whole->ops->evaluate(whole, &batch, stats, &err) == DDP_OK &&
          m->ops->evaluate(m, &batch, stats, &err) == DDP_OK, "evaluate: %s", err.msg);
    for (int64_t r = 0; r < T; r++) {
        const void *pa = NULL, *pb = NULL;
        CHECK(whole->ops->row_logits(whole, r, &pa, &err) == DDP_OK &&
              dev->ops->download(dev, a, pa, row_bytes, &err) == DDP_OK &&
              m->ops->row_logits(m, r, &pb, &err) == DDP_OK && dev->ops->download(dev, b, pb, row_bytes, &err) == DDP_OK,
              "row %lld: %s", (long long)r, err.msg);
        double top = 0, worst = 0;
        for (int i = 0; i < SHAPE.vocab_size; i++) {
            top = fmax(top, fabs(a[i]));
            worst = fmax(worst, fabs((double)a[i] - b[i]));
        }
        CHECK(worst <= 1e-5 * top, "row %lld: chunked logits off by %.3g (largest %.3g)", (long long)r, worst, top);
    }
    for (int greedy = 0; greedy < 2; greedy++) {
        int32_t x[PROMPT + DRAW], y[PROMPT + DRAW];
        lm_sampling s = {.temperature = 1.0, .top_k = greedy ? 1 : 10, .seed = 3};
        CHECK(generate(whole, &s, x, &err) == DDP_OK && generate(m, &s, y, &err) == DDP_OK, "%s", err.msg);
        CHECK(memcmp(x, y, sizeof x) == 0, "chunked: the whole model's tokens (%s)", greedy ? "greedy" : "seeded");
    }
    dev->ops->free(dev, tok_dev);
    dev->ops->free(dev, stats);
    m->ops->destroy(m);
}

/* The ids top-p keeps from logits log([0.5, 0.3, 0.15, 0.05]) (chances in id order), as the
 * smallest set of the most likely whose chances reach P, from the definition: after top-k (P of
 * what top-k keeps) and after the temperature (at 2 the chances flatten to 0.379, 0.294, 0.208,
 * 0.120), ties in id order; 0 and 1 keep all. Top-k alone keeps the k largest logits and every id
 * tied with the k-th. */
static void nucleus_weights(void)
{
    const float row[4] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)}, flat[4] = {1, 1, 1, 1};
    const float ties[4] = {3, 2, 2, 1}; /* top-k keeps every id tied with the k-th largest */
    const struct { const float *row; double temperature, top_p; int64_t top_k; int kept; } cases[] = {
        {row, 1, 0.45, 0, 1}, {row, 1, 0.79, 0, 2}, {row, 1, 0.9, 0, 3}, {row, 1, 0.96, 0, 4},
        {row, 1, 1.0, 0, 4},  {row, 1, 0.0, 0, 4},  {row, 1, 0.96, 2, 2}, {row, 1, 0.7, 0, 2},
        {row, 2, 0.7, 0, 3},  {flat, 1, 0.3, 0, 2}, {flat, 1, 0.76, 0, 4},
        {ties, 1, 0, 1, 1},   {ties, 1, 0, 2, 3},   {ties, 1, 0, 3, 3},   {row, 1, 0, 3, 3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        lm_sampling s = {.temperature = cases[c].temperature, .top_k = cases[c].top_k, .top_p = cases[c].top_p};
        double p[4], whole = 0;
        lm_ranked scratch[4];
        int64_t best = -1;
        double sum = lm_draw_weights(cases[c].row, 4, &s, p, scratch, &best);
        for (int i = 0; i < 4; i++) {
            const double want = exp(((double)cases[c].row[i] - cases[c].row[0]) / cases[c].temperature);
            CHECK(i < cases[c].kept ? p[i] == want : p[i] == 0.0, "case %zu: id %d weighs %g (kept: the first %d)",
                  c, i, p[i], cases[c].kept);
            whole += p[i];
        }
        CHECK(best == 0 && sum == whole, "case %zu: best %lld, sum %g of %g", c, (long long)best, sum, whole);
    }
    lm_sampling greedy = {.temperature = 0, .top_p = 0.5};
    double p[4];
    lm_ranked scratch[4];
    int64_t best = -1;
    CHECK(lm_draw_weights(row, 4, &greedy, p, scratch, &best) == 1.0 && best == 0 && p[0] == 1 && p[1] == 0,
          "greedy: the most likely id alone");
}

/* Drawn through the model: top-p 1 draws what no top-p draws, and a top-p smaller than any one
 * token's chance draws the greedy tokens, for every seed. */
static void nucleus_draws(model *m)
{
    int32_t greedy[PROMPT + DRAW];
    ddp_err err = {0};
    CHECK(generate(m, &(lm_sampling){.temperature = 0.0}, greedy, &err) == DDP_OK, "greedy: %s", err.msg);
    for (uint64_t seed = 1; seed <= 8; seed++) {
        int32_t a[PROMPT + DRAW], b[PROMPT + DRAW], c[PROMPT + DRAW];
        lm_sampling s = {.temperature = 1.0, .top_k = 0, .seed = seed};
        CHECK(generate(m, &s, a, &err) == DDP_OK, "%s", err.msg);
        s.top_p = 1.0;
        CHECK(generate(m, &s, b, &err) == DDP_OK && !memcmp(a, b, sizeof a), "seed %llu: top-p 1 changed the draw",
              (unsigned long long)seed);
        s.top_p = 1e-9;
        CHECK(generate(m, &s, c, &err) == DDP_OK && !memcmp(c, greedy, sizeof c), "seed %llu: top-p 1e-9 not greedy",
              (unsigned long long)seed);
    }
}

/* One weight of the final LayerNorm set to value (every logit reads it): every kind of draw
 * refuses the first token's logits. */
static void refuses(model *m, float value)
{
    float saved;
    const param_tensor *ln_f = model_find_tensor(m, "ln_f.weight");
    CHECK(ln_f != NULL, "the model has no ln_f.weight");
    if (!ln_f)
        return;
    size_t at = ln_f->offset;
    dev->ops->download(dev, &saved, m->params + at, sizeof saved, NULL);
    dev->ops->upload(dev, m->params + at, &value, sizeof value, NULL);
    const lm_sampling kinds[] = {{.temperature = 1.0, .top_k = 10, .seed = 3},
                                 {.temperature = 0.0, .seed = 3},
                                 {.temperature = 0.7, .top_k = 0, .seed = 3}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int32_t ids[PROMPT + DRAW];
        ddp_err err = {0};
        int rc = generate(m, &kinds[k], ids, &err);
        CHECK(rc == DDP_ENONFINITE, "parameter %g, draw %zu: status %d (%s), expected DDP_ENONFINITE", value, k, rc,
              err.msg);
        CHECK_STR_CONTAINS(err.msg, "the logits for token 1 are not finite");
        CHECK(ids[PROMPT] == -1, "parameter %g, draw %zu: a token was drawn (%d) from non-finite logits", value, k,
              ids[PROMPT]);
    }
    dev->ops->upload(dev, m->params + at, &saved, sizeof saved, NULL);
}

static void stop_flag(model *m)
{
    volatile sig_atomic_t stop = 1;
    lm_sampling s = {.temperature = 1.0, .top_k = 10, .seed = 3, .stop = &stop};
    int32_t ids[PROMPT + DRAW];
    int64_t drawn = -1;
    ddp_err err = {0};
    int rc = generate_counted(m, &s, ids, &drawn, &err);
    CHECK(rc == DDP_EPREEMPTED, "a stop already requested: status %d, expected DDP_EPREEMPTED", rc);
    CHECK(drawn == 0, "a stop already requested: %lld tokens counted", (long long)drawn);
    CHECK_STR_CONTAINS(err.msg, "stopped after 0 of 5 tokens");
    CHECK(ids[PROMPT] == -1, "a token was drawn after the stop (%d)", ids[PROMPT]);
}

/* Each token of a greedy and of a seeded draw made the stop id in turn: the draw ends right after
 * that token's first occurrence, the same tokens up to there, nothing after; with a second stop id,
 * a later token of the draw, it ends at the first of the two; ids the draw never makes leave all
 * DRAW tokens as they were. */
static void stop_ids(model *m)
{
    const lm_sampling kinds[] = {{.temperature = 0.0, .seed = 3}, {.temperature = 1.0, .top_k = 10, .seed = 3}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        int32_t whole[PROMPT + DRAW], ids[PROMPT + DRAW];
        ddp_err err = {0};
        if (generate(m, &kinds[k], whole, &err) != DDP_OK) {
            CHECK(false, "draw %zu: %s", k, err.msg);
            continue;
        }
        for (int at = 0; at < DRAW; at++) {
            lm_sampling s = kinds[k];
            /* the id drawn at `at`, and after it the last one drawn: the draw ends at the first */
            int32_t stops[2] = {whole[PROMPT + DRAW - 1], whole[PROMPT + at]};
            s.stop_ids = stops;
            s.n_stop_ids = 2;
            int first = 0;
            while (whole[PROMPT + first] != stops[0] && whole[PROMPT + first] != stops[1])
                first++;
            CHECK(first <= at, "draw %zu: the first stop id is drawn at %d, after %d", k, first, at);
            int64_t drawn = -1;
            CHECK(generate_counted(m, &s, ids, &drawn, &err) == DDP_OK, "draw %zu, stops %d %d: %s", k, stops[0],
                  stops[1], err.msg);
            CHECK(drawn == first + 1, "draw %zu, stop ids %d %d (first drawn as token %d): %lld drawn", k, stops[0],
                  stops[1], first + 1, (long long)drawn);
            CHECK(memcmp(ids, whole, (size_t)(PROMPT + first + 1) * sizeof *ids) == 0,
                  "draw %zu, stop ids %d %d: other tokens before it", k, stops[0], stops[1]);
            for (int i = PROMPT + first + 1; i < PROMPT + DRAW; i++)
                CHECK(ids[i] == -1, "draw %zu, stop ids %d %d: token %d drawn after it (%d)", k, stops[0], stops[1],
                      i - PROMPT + 1, ids[i]);
        }
        lm_sampling s = kinds[k];
        int32_t never[2];
        int n_never = 0;
        for (int32_t id = 0; id < SHAPE.vocab_size && n_never < 2; id++) {
            bool seen = false;
            for (int i = PROMPT; i < PROMPT + DRAW; i++)
                seen |= whole[i] == id;
            if (!seen)
                never[n_never++] = id;
        }
        s.stop_ids = never;
        s.n_stop_ids = n_never;
        int64_t drawn = -1;
        CHECK(generate_counted(m, &s, ids, &drawn, &err) == DDP_OK && drawn == DRAW &&
              memcmp(ids, whole, sizeof ids) == 0, "draw %zu, %d stop ids never drawn: %lld drawn, other tokens",
              k, n_never, (long long)drawn);
    }
}

/* m's description rebuilds a model of m's kind, shape, sequence length, tensors; returns it. */
static model *rebuilt(const model *m, model_kind kind)
{
    model_opts o;
    int64_t seq_len = 0;
    ddp_err err = {0};
    CHECK(model_opts_from_description(m->description, &o, &seq_len, &err) == DDP_OK, "%s: %s", m->description,
          err.msg);
    CHECK(o.kind == kind && o.compute == TENSOR_F32, "%s: kind %d, compute %d", m->description, (int)o.kind,
          (int)o.compute);
    CHECK(seq_len == T, "%s: seq_len %lld", m->description, (long long)seq_len);
    sample_layout data = {.input = {SAMPLE_I32, seq_len}, .target = {SAMPLE_I32, seq_len}};
    model *again = NULL;
    CHECK(model_create(&o, dev, &data, 1, MODEL_BUFFERS_WHOLE, &again, &err) == DDP_OK, "model_create: %s", err.msg);
    if (!again)
        return NULL;
    CHECK(!strcmp(again->description, m->description), "rebuilt as \"%s\"", again->description);
    CHECK(again->n_params == m->n_params && again->n_tensors == m->n_tensors, "%zu params in %d tensors, not %zu in %d",
          again->n_params, again->n_tensors, m->n_params, m->n_tensors);
    for (int i = 0; i < m->n_tensors && i < again->n_tensors; i++)
        CHECK(!strcmp(again->tensors[i].name, m->tensors[i].name), "tensor %d: %s", i, again->tensors[i].name);
    return again;
}

static void from_descriptions(model *gpt)
{
    model *g = rebuilt(gpt, MODEL_GPT2);
    if (g)
        g->ops->destroy(g);
    for (int tie = 0; tie < 2; tie++) {
        const llama_shape shape = {.n_layer = 2, .n_head = 4, .n_kv_head = 2, .n_embd = 16, .ffn_hidden = 24,
                                   .block_size = 2 * T, .vocab_size = 50, .rope_theta = 500000, .norm_eps = 1e-5,
                                   .tie_embeddings = tie};
        sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = 50};
        model *m = NULL;
        ddp_err err = {0};
        CHECK(llama_create(&llama_family_llama, &shape, &(lm_run){.compute = TENSOR_F32}, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "llama_create: %s", err.msg);
        if (!m)
            continue;
        model *l = rebuilt(m, MODEL_LLAMA);
        if (l) {
            CHECK(model_init_params(l, 5, &err) == DDP_OK, "init: %s", err.msg);
            finite_draws(l);
            l->ops->destroy(l);
        }
        m->ops->destroy(m);
    }
    const char *foreign[] = {"mlp hidden=[64,32] activation=relu in=784 classes=10", "gpt2 n_layer=2", ""};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        model_opts o;
        int64_t seq_len;
        ddp_err err = {0};
        CHECK(model_opts_from_description(foreign[i], &o, &seq_len, &err) == DDP_EUSAGE, "\"%s\" accepted",
              foreign[i]);
        CHECK_STR_CONTAINS(err.msg, "only language models can be rebuilt");
        CHECK_STR_CONTAINS(err.msg, foreign[i]);
    }
}

int main(void)
{
    ddp_err err = {0};
    CHECK(device_cpu_create(&dev, &err) == DDP_OK, "cpu device: %s", err.msg);
    model *m = build();
    if (m) {
        finite_draws(m);
        nucleus_weights();
        nucleus_draws(m);
        chunked_draws(m);
        refuses(m, NAN);
        refuses(m, INFINITY);
        finite_draws(m); /* the parameter restored: drawing works again */
        stop_flag(m);
        stop_ids(m);
        from_descriptions(m);
        m->ops->destroy(m);
    }
    dev->ops->destroy(dev);
    return check_done("test_lm_generate");
}
