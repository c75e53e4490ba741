/* test_llama_rope_scaling.c — a Llama whose RoPE frequencies are stretched as Llama 3.1 and 3.2
 * stretch them (Hugging Face's rope_scaling {"rope_type": "llama3"}: models/llama.c's
 * llama_rope_frequency, read and written by llama_hf.c and llama_hf_write.c), on the CPU backend,
 * against fixture hf-llama-scaled-tiny (hf-llama-tiny's weights and input, with a stretch whose
 * bands hold RoPE pairs in each): config.json's rope_scaling is MANIFEST's; the import's logits are
 * transformers' within the float32 bound, while the same weights unstretched (hf-llama-tiny) are
 * not (so the referee sees the stretch); each pair's frequency lies in its band as the definition
 * says (kept, divided by the factor, or strictly between); the description holds the stretch and
 * parses back; the export is the fixture's model.safetensors byte for byte and its config.json but
 * for transformers_version; another rope_type, a factor below 1, crossed bands and a missing number
 * are refused naming the key, and rope_type "default" or a factor of 1 is no stretch; transformers 5's
 * layout (rope_parameters holding rope_theta and the stretch) reads the same. Every shape
 * comes from MANIFEST and config.json, so another fixture made the same way passes unchanged. */
#include "tests/check.h"
#include "tests/fixture.h"

#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "models/llama.h"
#include "models/llama_hf.h"
#include "tests/models/hf_folder_util.h"
#include "tests/models/hf_logits.h"

#define TOL (HF_LOGITS_TOL_FACTOR * HF_LLAMA_TINY_LOGITS_FLOOR)

static fixture_manifest fx, plain; /* hf-llama-scaled-tiny, and hf-llama-tiny: the same weights unstretched */
static device *dev;
static llama_shape shape;
static int64_t B, T;
static char tmp[] = "/tmp/test_llama_rope_scaling.XXXXXX";

static model *build(const llama_shape *s)
{
    sample_layout data = {.input = {SAMPLE_I32, T}, .target = {SAMPLE_I32, T}, .n_classes = s->vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(llama_create(&llama_family_llama, s, &(lm_run){.compute = TENSOR_F32}, dev, &data, B, MODEL_BUFFERS_WHOLE,
                       &m, &err) == DDP_OK, "llama_create: %s", err.msg);
    return m;
}

/* The import against transformers' logits, and the same weights without the stretch against them. */
static void test_logits(const int32_t *input, const float *ref)
{
    const llama_rope_scaling *r = &shape.rope_scaling;
    CHECK(llama_rope_scaled(&shape) && r->factor == fixture_header_double(&fx, "rope_factor") &&
          r->low_freq_factor == fixture_header_double(&fx, "rope_low_freq_factor") &&
          r->high_freq_factor == fixture_header_double(&fx, "rope_high_freq_factor") &&
          r->original_max_positions == fixture_header_int(&fx, "rope_original_positions"),
          "config.json's rope_scaling is MANIFEST's");
    ddp_err err = {0};
    model *m = build(&shape);
    CHECK(llama_hf_load_model(&llama_family_llama, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    double e = hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size);
    printf("hf-llama-scaled-tiny: largest logit error %.3g of the largest logit (tolerance %.3g)\n", e, TOL);
    CHECK(e <= TOL, "logits differ from transformers' by %.3g", e);
    m->ops->destroy(m);

    llama_shape unstretched;
    CHECK(llama_hf_read_shape(&llama_family_llama, plain.dir, &unstretched, &err) == DDP_OK && !llama_rope_scaled(&unstretched),
          "hf-llama-tiny reads unstretched: %s", err.msg);
    m = build(&unstretched);
    CHECK(llama_hf_load_model(&llama_family_llama, m, plain.dir, &err) == DDP_OK, "hf-llama-tiny: %s", err.msg);
    e = hf_logits_error(dev, m, input, B, T, ref, shape.vocab_size);
    printf("the same weights unstretched: %.3g of the largest logit off\n", e);
    CHECK(e > 100 * TOL, "the stretch moves the logits by only %.3g: the referee cannot see it", e);
    m->ops->destroy(m);
}

/* Each pair's frequency in its band: kept where it turns faster than high_freq_factor turns per
 * original_max_positions, divided by the factor where slower than low_freq_factor, strictly between
 * the two elsewhere; and the fixture has a pair in each band. */
static void test_bands(void)
{
    llama_shape none = shape;
    none.rope_scaling.factor = 1;
    const llama_rope_scaling *r = &shape.rope_scaling;
    const double L = (double)r->original_max_positions;
    int in_band[3] = {0};
    for (int64_t j = 0; j < shape.n_embd / shape.n_head / 2; j++) {
        double f = llama_rope_frequency(&none, j), got = llama_rope_frequency(&shape, j), wavelength = 2 * M_PI / f;
        CHECK(f == pow(shape.rope_theta, -2.0 * (double)j / (double)(shape.n_embd / shape.n_head)),
              "pair %lld unstretched: rope_theta^(-2j/head_size)", (long long)j);
        if (wavelength < L / r->high_freq_factor) {
            in_band[0]++;
            CHECK(got == f, "pair %lld (wavelength %.3g) keeps its frequency: %.17g, not %.17g", (long long)j,
                  wavelength, got, f);
        } else if (wavelength > L / r->low_freq_factor) {
            in_band[2]++;
            CHECK(got == f / r->factor, "pair %lld (wavelength %.3g) turns factor times slower", (long long)j,
                  wavelength);
        } else {
            in_band[1]++;
            CHECK(got > f / r->factor && got < f, "pair %lld (wavelength %.3g): %.6g between %.6g and %.6g",
                  (long long)j, wavelength, got, f / r->factor, f);
        }
    }
    CHECK(in_band[0] && in_band[1] && in_band[2], "the fixture's pairs: %d kept, %d blended, %d slowed", in_band[0],
          in_band[1], in_band[2]);
}

/* The model's description holds the stretch, and parses back to the shape. */
static void test_description(void)
{
    model *m = build(&shape);
    llama_shape back;
    int64_t seq = 0;
    ddp_err err = {0};
    char want[96];
    snprintf(want, sizeof want, " rope_scaling=%g,%g,%g,%lld seq_len=", shape.rope_scaling.factor,
             shape.rope_scaling.low_freq_factor, shape.rope_scaling.high_freq_factor,
             (long long)shape.rope_scaling.original_max_positions);
    CHECK_STR_CONTAINS(m->description, want);
    CHECK(llama_parse_description(&llama_family_llama, m->description, &back, &seq, &err) == DDP_OK && seq == T &&
          !memcmp(&back.rope_scaling, &shape.rope_scaling, sizeof back.rope_scaling),
          "\"%s\" parses back: %s", m->description, err.msg);
    m->ops->destroy(m);
}

/* The import exported: the fixture's files, and imported again with the same stretch. */
static void test_export(void)
{
    model *m = build(&shape);
    ddp_err err = {0};
    int files = 0;
    CHECK(llama_hf_load_model(&llama_family_llama, m, fx.dir, &err) == DDP_OK, "import: %s", err.msg);
    float *p = hf_params_of(dev, m);
    host_params h = {m, p, NULL};
    char dir[600], a[700], b[sizeof fx.dir + 32];
    snprintf(dir, sizeof dir, "%s/export", tmp);
    mkdir(dir, 0777);
    CHECK(llama_hf_write(&llama_family_llama, dir, &shape, NULL, ST_F32, HF_DEFAULT_SHARD_BYTES, host_src, &h, &files,
                         &err) == DDP_OK, "export: %s", err.msg);
    snprintf(a, sizeof a, "%s/model.safetensors", dir), snprintf(b, sizeof b, "%s/model.safetensors", fx.dir);
    CHECK(files == 1 && same_bytes(a, b), "the export's model.safetensors is the fixture's byte for byte");
    CHECK(config_is_fixtures(dir, fx.dir), "the export's config.json is the fixture's");
    llama_shape back;
    CHECK(llama_hf_read_shape(&llama_family_llama, dir, &back, &err) == DDP_OK &&
          !memcmp(&back.rope_scaling, &shape.rope_scaling, sizeof back.rope_scaling),
          "the export's rope_scaling reads back: %s", err.msg);
    free(p);
    m->ops->destroy(m);
}

/* tmp/sub/config.json holding config (freed here); dir (600 bytes) gets tmp/sub. */
static void write_config(const char *sub, char *config, char *dir)
{
    char path[700];
    snprintf(dir, 600, "%s/%s", tmp, sub);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(config, f);
        fclose(f);
    }
    free(config);
}

/* hf-llama-tiny's config.json (whose rope_scaling is one line) with rope_scaling `value`: refused
 * naming needle, or (needle NULL) read unstretched. */
static void rope_scaling_as(const char *value, const char *needle)
{
    char dir[600];
    write_config("config", config_with(plain.dir, "rope_scaling", value), dir);
    llama_shape s;
    ddp_err err = {0};
    int rc = llama_hf_read_shape(&llama_family_llama, dir, &s, &err);
    if (needle) {
        CHECK(rc == DDP_EUSAGE, "rope_scaling %s accepted", value);
        CHECK_STR_CONTAINS(err.msg, needle);
        CHECK_STR_CONTAINS(err.msg, "config.json:");
    } else {
        CHECK(rc == DDP_OK && !memcmp(&s.rope_scaling, &LLAMA_ROPE_UNSCALED, sizeof s.rope_scaling),
              "rope_scaling %s: read as no stretch, as a folder without it (%s)", value, err.msg);
    }
}

static void test_refusals(void)
{
    rope_scaling_as("{\"rope_type\": \"yarn\", \"factor\": 4.0}",
                    "rope_scaling.rope_type is \"yarn\"; ddprun's Llama stretches RoPE as Llama 3 does");
    rope_scaling_as("{\"type\": \"dynamic\", \"factor\": 2.0}", "rope_scaling.rope_type is \"dynamic\"");
    rope_scaling_as("{\"factor\": 2.0}", "rope_scaling is an object; it has no rope_type");
    rope_scaling_as("[1]", "rope_scaling is an array; expected null or an object");
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": 0.5, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 16}", "rope_scaling.factor is 0.5; expected at least 1");
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 16}",
                    "rope_scaling.low_freq_factor is 4.0; expected below rope_scaling.high_freq_factor");
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0}",
                    "no rope_scaling.original_max_position_embeddings");
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": 8.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 16}", "no rope_scaling.low_freq_factor");
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": \"8\", \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                    "\"original_max_position_embeddings\": 16}", "rope_scaling.factor is \"8\"; expected a positive number");
    rope_scaling_as("{\"rope_type\": \"default\", \"type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                    "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 16}",
                    "rope_scaling.type is \"llama3\"; expected the same as its rope_type");
    rope_scaling_as("{\"rope_type\": \"default\", \"type\": \"default\"}", NULL);
    rope_scaling_as("{\"rope_type\": \"default\"}", NULL);
    rope_scaling_as("{\"rope_type\": \"llama3\", \"factor\": 1.0, \"low_freq_factor\": 2.0, \"high_freq_factor\": 3.0, "
                    "\"original_max_position_embeddings\": 16}", NULL);
    rope_scaling_as("null", NULL);
}

/* text with the line holding `"key":` replaced by `line` (a whole line with its newline, or ""). */
static char *with_line(char *text, const char *key, const char *line)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    char *at = strstr(text, pattern), *out = calloc(1, 1 << 16);
    CHECK(at != NULL, "config.json has no %s", key);
    if (!at) {
        free(out);
        return text;
    }
    while (at > text && at[-1] != '\n')
        at--;
    snprintf(out, 1 << 16, "%.*s%s%s", (int)(at - text), text, line, strchr(at, '\n') + 1);
    free(text);
    return out;
}

/* hf-llama-tiny's config.json as transformers 5 writes it: rope_scaling and rope_theta gone and
 * rope_parameters `value` in their place, or (root_theta not NULL) rope_theta kept with that value. */
static int read_v5(const char *value, const char *root_theta, llama_shape *s, ddp_err *err)
{
    char line[1024], dir[600];
    if (root_theta)
        snprintf(line, sizeof line, "  \"rope_theta\": %s,\n", root_theta);
    char *config = with_line(fixture_config(plain.dir), "rope_theta", root_theta ? line : "");
    snprintf(line, sizeof line, "  \"rope_parameters\": %s,\n", value);
    write_config("config5", with_line(config, "rope_scaling", line), dir);
    *err = (ddp_err){0};
    return llama_hf_read_shape(&llama_family_llama, dir, s, err);
}

/* transformers 5's layout: the stretch and rope_theta read from rope_parameters as from the root's
 * rope_scaling and rope_theta; what it cannot mean (another rope_type, a key ddprun does not read,
 * both layouts saying different things) refused naming the key. */
static void test_rope_parameters(void)
{
    const llama_rope_scaling *r = &shape.rope_scaling;
    char value[600];
    snprintf(value, sizeof value, "{\"factor\": %.17g, \"high_freq_factor\": %.17g, \"low_freq_factor\": %.17g, "
             "\"original_max_position_embeddings\": %lld, \"rope_theta\": %.17g, \"rope_type\": \"llama3\"}", r->factor,
             r->high_freq_factor, r->low_freq_factor, (long long)r->original_max_positions, shape.rope_theta);
    llama_shape s;
    ddp_err err;
    CHECK(read_v5(value, NULL, &s, &err) == DDP_OK && !memcmp(&s.rope_scaling, r, sizeof *r) &&
          s.rope_theta == shape.rope_theta, "the fixture's stretch in rope_parameters reads as its rope_scaling: %s",
          err.msg);
    CHECK(read_v5("{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}", NULL, &s, &err) == DDP_OK &&
          s.rope_theta == 500000 && !llama_rope_scaled(&s), "rope_parameters' rope_theta 500000 read as %g (%s)",
          s.rope_theta, err.msg);
    CHECK(read_v5("{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}", "500000", &s, &err) == DDP_OK &&
          s.rope_theta == 500000, "the same rope_theta at the root too: %s", err.msg);
    const char *refused[][3] = {
        {"{\"rope_theta\": 500000.0, \"rope_type\": \"default\"}", "20000.0",
         "rope_theta is 20000.0; rope_parameters.rope_theta says otherwise"},
        {"{\"rope_theta\": 10000.0, \"rope_type\": \"yarn\", \"factor\": 4.0}", NULL,
         "rope_parameters.rope_type is \"yarn\"; ddprun's Llama stretches RoPE as Llama 3 does"},
        {"{\"rope_theta\": 10000.0, \"rope_type\": \"default\", \"partial_rotary_factor\": 0.5}", NULL,
         "rope_parameters.partial_rotary_factor is 0.5; ddprun reads rope_theta, rope_type and Llama 3's stretch"},
        {"{\"rope_theta\": -1, \"rope_type\": \"default\"}", NULL,
         "rope_parameters.rope_theta is -1; expected a positive number"},
        {"{\"rope_theta\": 10000.0, \"rope_type\": \"llama3\", \"factor\": 8.0}", NULL,
         "no rope_parameters.low_freq_factor"},
        {"[10000.0]", NULL, "rope_parameters is an array; expected an object"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        CHECK(read_v5(refused[i][0], refused[i][1], &s, &err) == DDP_EUSAGE, "rope_parameters %s accepted",
              refused[i][0]);
        CHECK_STR_CONTAINS(err.msg, refused[i][2]);
    }
}

int main(void)
{
    ddp_err err = {0};
    if (fixture_manifest_read(&fx, "hf-llama-scaled-tiny") || fixture_manifest_read(&plain, "hf-llama-tiny") ||
        device_cpu_create(&dev, &err) || !mkdtemp(tmp))
        return 1;
    B = fixture_header_int(&fx, "B"), T = fixture_header_int(&fx, "T");
    CHECK(llama_hf_read_shape(&llama_family_llama, fx.dir, &shape, &err) == DDP_OK, "config.json: %s", err.msg);
    int32_t *input = fixture_load(&fx, "input", NULL);
    float *ref = fixture_load(&fx, "logits", NULL);
    CHECK(input && ref && B > 0 && T > 0, "fixture input/logits and B, T");
    if (input && ref && !err.msg[0]) {
        test_logits(input, ref);
        test_bands();
        test_description();
        test_export();
        test_refusals();
        test_rope_parameters();
    }
    free(input);
    free(ref);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "%s", cmd);
    dev->ops->destroy(dev);
    return check_done("test_llama_rope_scaling");
}
