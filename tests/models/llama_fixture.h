/* llama_fixture.h — the Hugging Face reference checks of the fixture llama-reference
 * (tests/fixtures/README.md): reads every shape from the fixture's MANIFEST (L, C, NH, NKV, FFN,
 * T, V, B, rope_theta, norm_eps, and each tensor's own line; a fixture without lm_head is a tied
 * one), builds the Llama it describes on a device with the reference batch uploaded, and holds it
 * in gpt_fixture.h's gfx, whose loading, comparing and AdamW helpers serve both models (they read
 * the manifest, the model's tensor table and the batch, never a GPT-2 shape).
 *
 * Header-only like check.h. */
#ifndef DDP_LLAMA_FIXTURE_H
#define DDP_LLAMA_FIXTURE_H

#include "models/llama.h"
#include "tests/models/gpt_fixture.h"

/* Forward values and gradients: the README says a correct float32 implementation lands within
 * about 1e-5 relative of the float64 reference; a value near zero is held to 1e-5 of its
 * tensor's largest magnitude instead. Any wrong formula moves values by O(their magnitude). */
#define LFX_RTOL 1e-5
#define LFX_SCALE_ATOL 1e-5
/* The trajectories: a few times the MANIFEST's float32 noise floor, as gpt_fixture.h's. */
#define LFX_TRAJ_FLOORS GFX_TRAJ_FLOORS

typedef struct lfx {
    gfx f;                  /* the manifest, model, batch and device; f.shape is not used */
    llama_shape shape;
} lfx;

/* Parses MANIFEST's header line (L, C, NH, NKV, FFN, T, V, B, rope_theta, norm_eps, the noise floor). */
static inline int lfx_read_manifest(lfx *x)
{
    gfx *f = &x->f;
    const fixture_manifest *mf = &f->manifest;
    if (fixture_manifest_read(&f->manifest, "llama-reference"))
        return 1;
    llama_shape *s = &x->shape;
    s->n_layer = fixture_header_int(mf, "L");
    s->n_embd = fixture_header_int(mf, "C");
    s->n_head = fixture_header_int(mf, "NH");
    s->n_kv_head = fixture_header_int(mf, "NKV");
    s->ffn_hidden = fixture_header_int(mf, "FFN");
    s->vocab_size = fixture_header_int(mf, "V");
    f->T = fixture_header_int(mf, "T");
    f->B = fixture_header_int(mf, "B");
    s->block_size = f->T;
    s->rope_theta = fixture_header_double(mf, "rope_theta");
    s->norm_eps = fixture_header_double(mf, "norm_eps");
    s->tie_embeddings = fixture_numel(mf, "init.lm_head.weight") < 0;
    s->rope_scaling = LLAMA_ROPE_UNSCALED; /* transformers' RoPE unstretched */
    f->Vp = llama_vocab_padded(s->vocab_size);
    const char *floor = strstr(mf->header, "max abs)");
    f->noise_floor = floor ? strtod(floor + strlen("max abs)"), NULL) : -1;
    if (s->n_layer < 1 || s->n_embd < 1 || s->n_head < 1 || s->n_kv_head < 1 || s->ffn_hidden < 1 ||
        s->vocab_size < 2 || f->B < 1 || f->T < 1 || !(s->rope_theta > 0) || !(s->norm_eps > 0) ||
        f->noise_floor <= 0) {
        fprintf(stderr, "fixture %s/MANIFEST: header line not understood: %s\n", mf->dir, mf->header);
        return 1;
    }
    return 0;
}

/* llama-reference's builder (a gfx_build_fn; f is an lfx's first member): the Llama of its shape
 * for batches of f->B rows of f->T tokens. */
static inline model *lfx_build(gfx *f, const lm_run *run, ddp_err *err)
{
    const lfx *x = (const lfx *)f;
    sample_layout data = {.input = {SAMPLE_I32, f->T}, .target = {SAMPLE_I32, f->T}, .n_classes = x->shape.vocab_size};
    model *m = NULL;
    return llama_create(&llama_family_llama, &x->shape, run, f->dev, &data, f->B, MODEL_BUFFERS_WHOLE, &m, err) ? NULL
                                                                                                                : m;
}

/* The reference Llama with parameters init.* on dev, computing in `compute`; 0 on success. Call
 * gfx_teardown(&x->f) either way. */
static inline int lfx_setup(lfx *x, device *dev, tensor_dtype compute)
{
    memset(x, 0, sizeof *x);
    x->f.dev = dev;
    return lfx_read_manifest(x) || gfx_start(&x->f, lfx_build, compute);
}

#endif
