/* test_gpt2_llmc.c — llm.c's GPT-2 model file (models/gpt2_llmc.c) on the CPU backend: a tiny GPT-2
 * with random parameters (padding rows of wte included) written and read back into a fresh model
 * bit for bit; the header and every tensor's position checked against llm.c's layout computed
 * here independently; the description round trip; and the refusals (bad magic, the bf16 version,
 * another version, truncation, trailing bytes, another shape, inconsistent padding, a non-GPT-2
 * model), each with its message, leaving the model's parameters untouched and no file behind. */
#include "tests/check.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "models/gpt2.h"
#include "models/gpt2_llmc.h"
#include "runtime/base/rng.h"
#include "runtime/device/device.h"

static const gpt2_shape SHAPE = {.n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 16, .vocab_size = 200};
static char dir[] = "/tmp/test_gpt2_llmc.XXXXXX";
static device *dev;

static model *build(const gpt2_shape *s)
{
    sample_layout data = {.input = {SAMPLE_I32, 8}, .target = {SAMPLE_I32, 8}, .n_classes = s->vocab_size};
    model *m = NULL;
    ddp_err err = {0};
    CHECK(gpt2_create(s, &(lm_run){.compute = TENSOR_F32}, dev, &data, 1, MODEL_BUFFERS_WHOLE, &m, &err) == DDP_OK, "gpt2_create: %s", err.msg);
    return m;
}

static float *params_of(model *m)
{
    float *host = malloc(m->n_params * sizeof *host);
    dev->ops->download(dev, host, m->params, m->n_params * sizeof *host, NULL);
    return host;
}

/* Every parameter (wte's padding rows too) a distinct random value. */
static void randomize(model *m, uint64_t seed)
{
    float *host = malloc(m->n_params * sizeof *host);
    rng r;
    rng_seed(&r, seed, RNG_INIT);
    for (size_t i = 0; i < m->n_params; i++)
        host[i] = (float)rng_normal(&r);
    dev->ops->upload(dev, m->params, host, m->n_params * sizeof *host, NULL);
    free(host);
}

/* dir/name, in one of a few rotating buffers: copy it to keep it past the next few calls */
static char *path_of(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*len + 8);
    *len = fread(b, 1, *len, f);
    fclose(f);
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
}

static int32_t le32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

static void set_le32(uint8_t *p, int32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)((uint32_t)v >> (8 * i));
}

/* llm.c's layout, written out here from its fill_in_parameter_sizes: each kind's size over all
 * layers, in file order; every layer's slice of a per-layer kind must be our h.L tensor. */
static void check_layout(const model *m, const uint8_t *file, size_t len)
{
    int64_t V = SHAPE.vocab_size, Vp = 256, C = SHAPE.n_embd, L = SHAPE.n_layer, T = SHAPE.block_size;
    int32_t want_hdr[8] = {20240326, 3, (int32_t)T, (int32_t)V, (int32_t)L, (int32_t)SHAPE.n_head, (int32_t)C,
                           (int32_t)Vp};
    for (int i = 0; i < 256; i++)
        CHECK(le32(file + 4 * i) == (i < 8 ? want_hdr[i] : 0), "header[%d] = %d", i, le32(file + 4 * i));
    const struct { const char *name; int64_t per_layer; bool layered; } kinds[] = {
        {"wte.weight", Vp * C, false}, {"wpe.weight", T * C, false}, {"ln_1.weight", C, true},
        {"ln_1.bias", C, true}, {"attn.c_attn.weight", 3 * C * C, true}, {"attn.c_attn.bias", 3 * C, true},
        {"attn.c_proj.weight", C * C, true}, {"attn.c_proj.bias", C, true}, {"ln_2.weight", C, true},
        {"ln_2.bias", C, true}, {"mlp.c_fc.weight", 4 * C * C, true}, {"mlp.c_fc.bias", 4 * C, true},
        {"mlp.c_proj.weight", 4 * C * C, true}, {"mlp.c_proj.bias", C, true}, {"ln_f.weight", C, false},
        {"ln_f.bias", C, false}};
    float *host = params_of((model *)m);
    size_t off = 1024;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int64_t l = 0; l < (kinds[k].layered ? L : 1); l++) {
            char name[64];
            if (kinds[k].layered)
                snprintf(name, sizeof name, "h.%lld.%s", (long long)l, kinds[k].name);
            else
                snprintf(name, sizeof name, "%s", kinds[k].name);
            const param_tensor *t = model_find_tensor(m, name);
            CHECK(t && (int64_t)t->numel == kinds[k].per_layer, "tensor %s", name);
            if (t && off + 4 * t->numel <= len)
                CHECK(memcmp(file + off, host + t->offset, 4 * t->numel) == 0, "%s is not at byte %zu", name, off);
            off += 4 * (size_t)kinds[k].per_layer;
        }
    }
    CHECK(off == len, "file has %zu bytes, llm.c's layout %zu", len, off);
    free(host);
}

/* Only the given names in dir: no temporary left behind. */
static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."));
    if (d)
        closedir(d);
    return n;
}

static void expect_refused(model *m, const char *path, const char *what, const char *msg1, const char *msg2)
{
    float *before = params_of(m);
    ddp_err err = {0};
    int rc = gpt2_llmc_load_model(m, path, &err);
    CHECK(rc == DDP_EUSAGE, "%s: rc %d (%s)", what, rc, err.msg);
    CHECK(strstr(err.msg, path) != NULL, "%s: message does not name the file: %s", what, err.msg);
    CHECK(strstr(err.msg, msg1) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, msg1);
    if (msg2)
        CHECK(strstr(err.msg, msg2) != NULL, "%s: \"%s\" lacks \"%s\"", what, err.msg, msg2);
    float *after = params_of(m);
    CHECK(memcmp(before, after, m->n_params * sizeof(float)) == 0, "%s: a refused load changed the parameters", what);
    free(before);
    free(after);
}

/* A copy of good (len bytes) changed by edit, then refused with both messages. */
static void refuse_variant(model *m, const uint8_t *good, size_t len, const char *what, int field, int32_t value,
                           long resize, const char *msg1, const char *msg2)
{
    size_t n = (size_t)((long)len + resize);
    uint8_t *b = calloc(n + 8, 1);
    memcpy(b, good, n < len ? n : len);
    if (field >= 0)
        set_le32(b + 4 * field, value);
    char *p = path_of("variant.bin");
    spit(p, b, n);
    expect_refused(m, p, what, msg1, msg2);
    free(b);
}

static void test_round_trip(void)
{
    ddp_err err = {0};
    model *a = build(&SHAPE), *b = build(&SHAPE);
    if (!a || !b)
        return;
    randomize(a, 1);
    randomize(b, 2);
    char path[256];
    snprintf(path, sizeof path, "%s", path_of("model.bin"));
    CHECK(gpt2_llmc_save_model(a, path, &err) == DDP_OK, "save: %s", err.msg);
    CHECK(files_in_dir() == 1, "%d files in %s after a save", files_in_dir(), dir);
    size_t len = 0;
    uint8_t *file = slurp(path, &len);
    CHECK(file && len == 1024 + 4 * a->n_params, "file of %zu bytes for %zu parameters", len, a->n_params);
    if (file)
        check_layout(a, file, len);
    gpt2_shape s;
    CHECK(gpt2_llmc_read_shape(path, &s, &err) == DDP_OK, "read_shape: %s", err.msg);
    CHECK(s.n_layer == 2 && s.n_head == 2 && s.n_embd == 8 && s.block_size == 16 && s.vocab_size == 200, "shape");
    CHECK(gpt2_llmc_load_model(b, path, &err) == DDP_OK, "load: %s", err.msg);
    float *pa = params_of(a), *pb = params_of(b);
    CHECK(memcmp(pa, pb, a->n_params * sizeof(float)) == 0, "parameters differ after the round trip");
    /* and once more through the reloaded model: the same bytes */
    char *again = path_of("again.bin");
    CHECK(gpt2_llmc_save_model(b, again, &err) == DDP_OK, "save again: %s", err.msg);
    size_t len2 = 0;
    uint8_t *file2 = slurp(again, &len2);
    CHECK(file2 && len2 == len && !memcmp(file, file2, len), "second save differs from the first");
    free(file2);
    unlink(again);
    free(pa);
    free(pb);

    if (file) {
        refuse_variant(b, file, len, "bad magic", 0, 20240520, 0, "bad magic 20240520", "expected 20240326");
        refuse_variant(b, file, len, "bf16 version", 1, 5, 0, "version 5 (bfloat16", "version 3");
        refuse_variant(b, file, len, "version 2", 1, 2, 0, "unsupported version 2", NULL);
        refuse_variant(b, file, len, "truncated", -1, 0, -4, "truncated", "the file has");
        refuse_variant(b, file, len, "header only", -1, 0, 1024 - (long)len, "truncated", NULL);
        refuse_variant(b, file, len, "trailing bytes", -1, 0, 4, "4 trailing bytes", NULL);
        refuse_variant(b, file, len, "short header", -1, 0, 1000 - (long)len, "too short", "1024-byte header");
        refuse_variant(b, file, len, "padding", 7, 384, 0, "padded vocabulary 384, expected 256", NULL);
        refuse_variant(b, file, len, "zero layers", 4, 0, 0, "n_layer is 0", NULL);
        refuse_variant(b, file, len, "heads", 5, 3, 0, "not divisible by n_head 3", NULL);
        /* a consistent file of another shape: 1 layer, so it is exactly one block shorter */
        long block = 4L * (long)(model_find_tensor(b, "h.1.ln_1.weight")->offset -
                                 model_find_tensor(b, "h.0.ln_1.weight")->offset);
        refuse_variant(b, file, len, "another shape", 4, 1, -block, "holds gpt2 n_layer=1 n_head=2",
                       "the model is gpt2 n_layer=2 n_head=2");
    }
    expect_refused(b, path_of("missing.bin"), "missing file", "cannot open", NULL);
    free(file);

    /* the model side: another shape, and another model kind */
    gpt2_shape wider = SHAPE;
    wider.n_embd = 16;
    model *w = build(&wider);
    if (w) {
        expect_refused(w, path, "wider model", "holds gpt2 n_layer=2 n_head=2 n_embd=8", "the model is gpt2 n_layer=2 "
                       "n_head=2 n_embd=16");
        w->ops->destroy(w);
    }
    snprintf(a->description, sizeof a->description, "mlp hidden=[4] activation=relu in=8 classes=3");
    expect_refused(a, path, "mlp", "llm.c model files hold GPT-2 parameters", "mlp hidden=[4]");
    CHECK(gpt2_llmc_save_model(a, path_of("mlp.bin"), &err) == DDP_EUSAGE && strstr(err.msg, "mlp hidden"),
          "saving a non-GPT-2 model: %s", err.msg);
    CHECK(access(path_of("mlp.bin"), F_OK) != 0, "a refused save created a file");
    /* an unwritable destination: an error naming it, nothing created */
    CHECK(gpt2_llmc_save_model(b, path_of("no/such/dir/x.bin"), &err) != DDP_OK && strstr(err.msg, "no/such/dir"),
          "save into a missing folder: %s", err.msg);
    unlink(path_of("variant.bin"));
    CHECK(files_in_dir() == 1, "%d files in %s at the end", files_in_dir(), dir);
    unlink(path);
    a->ops->destroy(a);
    b->ops->destroy(b);
}

static void test_description(void)
{
    model *m = build(&SHAPE);
    if (!m)
        return;
    gpt2_shape s;
    int64_t T = 0;
    ddp_err err = {0};
    CHECK(gpt2_parse_description(m->description, &s, &T, &err) == DDP_OK, "%s: %s", m->description, err.msg);
    CHECK(s.n_layer == 2 && s.n_head == 2 && s.n_embd == 8 && s.block_size == 16 && s.vocab_size == 200 && T == 8,
          "parsed %s", m->description);
    const char *bad[] = {"mlp hidden=[1024] activation=relu in=784 classes=10",
                         "gpt2 n_layer=2 n_head=2 n_embd=8 block_size=16 vocab_size=200",
                         "gpt2 n_layer=2 n_head=2 n_embd=8 block_size=16 vocab_size=200 seq_len=8 extra",
                         "gpt2 n_layer=02 n_head=2 n_embd=8 block_size=16 vocab_size=200 seq_len=8",
                         "gpt2 n_layer=0 n_head=2 n_embd=8 block_size=16 vocab_size=200 seq_len=8", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = gpt2_parse_description(bad[i], &s, &T, &err);
        CHECK(rc == DDP_EUSAGE && strstr(err.msg, "not a GPT-2 model"), "\"%s\" accepted (%s)", bad[i], err.msg);
    }
    m->ops->destroy(m);
}

int main(void)
{
    ddp_err err = {0};
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    CHECK(device_cpu_create(&dev, &err) == DDP_OK, "cpu device: %s", err.msg);
    if (!dev)
        return check_done("test_gpt2_llmc");
    test_round_trip();
    test_description();
    dev->ops->destroy(dev);
    rmdir(dir);
    return check_done("test_gpt2_llmc");
}
