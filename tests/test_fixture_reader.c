/* test_fixture_reader.c — how the fixture tests find and read their reference data
 * (tests/fixture.h, mlp_fixture.h, gpt_fixture.h; tests/fixtures/README.md):
 * - without DDP_TEST_FIXTURES (or with it empty) they read the repository's tests/fixtures;
 * - DDP_TEST_FIXTURES, read when the test runs, takes precedence over that default;
 * - the MLP's batch size and every layer width come from MANIFEST: a fixture written here with other
 *   shapes (and another number of hidden layers) builds the model it describes, with its values;
 * - a MANIFEST or tensor that is malformed, inconsistent or missing is refused, naming the file.
 * Runs on the CPU device; writes only under a temporary directory. */
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tests/models/gpt_fixture.h"
#include "tests/models/mlp_fixture.h"
#include "tests/cudaemu/tests/emu_test_util.h"

static char tmp_root[] = "/tmp/ddp-fixture-reader-XXXXXX";

static void write_text(const char *rel, const char *fmt, ...)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* <tmp>/<dir>/<name>.bin holding n values, value i = base + i/1000 (labels: i % classes). */
static void write_bin(const char *dir, const char *name, int64_t n, float base, int32_t classes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s.bin", tmp_root, dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    for (int64_t i = 0; i < n; i++) {
        float v = base + (float)i / 1000.0f;
        int32_t label = (int32_t)(i % (classes > 0 ? classes : 1));
        fwrite(classes > 0 ? (const void *)&label : (const void *)&v, 4, 1, f);
    }
    fclose(f);
}

/* An mlp-reference of `batch` rows and widths dims[0..n_dims-1] (input, hidden..., classes) under
 * <tmp>/<dir>: MANIFEST, input, labels and relu.init.* (fc1.weight starts at 0.5, each tensor
 * 0.25 apart). */
static void write_mlp_fixture(const char *dir, int64_t batch, const int64_t *dims, int n_dims)
{
    char path[512], text[4096], dims_text[128] = "";
    snprintf(path, sizeof path, "%s/%s", tmp_root, dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s/mlp-reference", tmp_root, dir);
    mkdir(path, 0755);
    for (int i = 0; i < n_dims; i++)
        snprintf(dims_text + strlen(dims_text), sizeof dims_text - strlen(dims_text), "%s%lld", i ? "-" : "",
                 (long long)dims[i]);
    int len = snprintf(text, sizeof text, "# mlp-reference seed=1 B=%lld dims=%s; written by test_fixture_reader\n"
                       "input f32 %lldx%lld\nlabels i32 %lld\n", (long long)batch, dims_text, (long long)batch,
                       (long long)dims[0], (long long)batch);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/mlp-reference", dir);
    write_bin(sub, "input", batch * dims[0], 0.0f, 0);
    write_bin(sub, "labels", batch, 0.0f, (int32_t)dims[n_dims - 1]);
    for (int l = 0; l + 1 < n_dims; l++) {
        len += snprintf(text + len, sizeof text - (size_t)len, "relu.init.fc%d.weight f32 %lldx%lld\n"
                        "relu.init.fc%d.bias f32 %lld\n", l + 1, (long long)dims[l + 1], (long long)dims[l], l + 1,
                        (long long)dims[l + 1]);
        char name[64];
        snprintf(name, sizeof name, "relu.init.fc%d.weight", l + 1);
        write_bin(sub, name, dims[l + 1] * dims[l], 0.5f + 0.5f * (float)l, 0);
        snprintf(name, sizeof name, "relu.init.fc%d.bias", l + 1);
        write_bin(sub, name, dims[l + 1], 0.75f + 0.5f * (float)l, 0);
    }
    snprintf(path, sizeof path, "%s/mlp-reference/MANIFEST", dir);
    write_text(path, "%s", text);
}

static void use_fixtures(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, dir);
    setenv("DDP_TEST_FIXTURES", path, 1);
}

/* fx_setup's result, with what it printed on stderr in msg. */
static int setup_captured(fx_mlp *fx, char *msg, size_t cap)
{
    emu_capture_begin();
    int rc = fx_setup(fx, DEVICE_CPU, ACT_RELU, "relu.init");
    emu_capture_end(msg, cap);
    return rc;
}

static void test_default_directory(void)
{
    unsetenv("DDP_TEST_FIXTURES");
    CHECK(!strcmp(fixture_root(), DDP_TEST_FIXTURES_DEFAULT), "root %s", fixture_root());
    const char *tail = "/tests/fixtures";
    size_t n = strlen(DDP_TEST_FIXTURES_DEFAULT);
    CHECK(n > strlen(tail) && !strcmp(DDP_TEST_FIXTURES_DEFAULT + n - strlen(tail), tail),
          "the default is the source tree's tests/fixtures: %s", DDP_TEST_FIXTURES_DEFAULT);
    setenv("DDP_TEST_FIXTURES", "", 1);
    CHECK(!strcmp(fixture_root(), DDP_TEST_FIXTURES_DEFAULT), "an empty DDP_TEST_FIXTURES is unset: %s",
          fixture_root());
    /* the repository's copies, as their MANIFEST headers give them */
    fixture_manifest mf;
    fx_shape s;
    CHECK(fixture_manifest_read(&mf, "mlp-reference") == 0 && fx_read_shape(&mf, &s) == 0, "mlp-reference");
    CHECK(s.batch == 16 && s.in == 784 && s.n_hidden == 2 && s.hidden[0] == 64 && s.hidden[1] == 32 &&
          s.classes == 10, "mlp-reference: B=%lld in=%lld hidden %d classes %lld", (long long)s.batch,
          (long long)s.in, s.n_hidden, (long long)s.classes);
    CHECK_EQ_INT(fixture_numel(&mf, "relu.grad.fc2.weight"), 32 * 64);
    static gfx g;
    memset(&g, 0, sizeof g);
    CHECK(gfx_read_manifest(&g) == 0, "gpt-reference");
    CHECK(g.shape.n_layer == 2 && g.shape.n_embd == 64 && g.shape.n_head == 4 && g.T == 32 &&
          g.shape.vocab_size == 256 && g.B == 4 && fabs(g.noise_floor - 2.11e-6) < 1e-12,
          "gpt-reference: L=%d C=%d NH=%d T=%lld V=%d B=%lld floor %g", (int)g.shape.n_layer, (int)g.shape.n_embd,
          (int)g.shape.n_head, (long long)g.T, (int)g.shape.vocab_size, (long long)g.B, g.noise_floor);
    unsetenv("DDP_TEST_FIXTURES");
}

/* A fixture of other shapes under DDP_TEST_FIXTURES: the model is the one its MANIFEST describes
 * and holds its values. */
static void test_shapes_from_manifest(const char *dir, int64_t batch, const int64_t *dims, int n_dims)
{
    write_mlp_fixture(dir, batch, dims, n_dims);
    use_fixtures(dir);
    static fx_mlp fx;
    char msg[4096];
    int rc = setup_captured(&fx, msg, sizeof msg);
    CHECK(rc == 0, "%s: fx_setup: %s", dir, msg);
    CHECK(fx.shape.batch == batch && fx.shape.in == dims[0] && fx.shape.classes == dims[n_dims - 1] &&
          fx.shape.n_hidden == n_dims - 2, "%s: B=%lld in=%lld classes=%lld hidden %d", dir, (long long)fx.shape.batch,
          (long long)fx.shape.in, (long long)fx.shape.classes, fx.shape.n_hidden);
    if (rc == 0) {
        model *m = fx.m;
        CHECK_EQ_INT(m->n_tensors, 2 * (n_dims - 1));
        size_t n_params = 0;
        for (int l = 0; l + 1 < n_dims; l++)
            n_params += (size_t)(dims[l + 1] * dims[l] + dims[l + 1]);
        CHECK_EQ_INT(m->n_params, n_params);
        float *host = malloc(m->n_params * 4);
        m->dev->ops->download(m->dev, host, m->params, m->n_params * 4, NULL);
        for (int l = 0; l + 1 < n_dims; l++) {
            const param_tensor *w = &m->tensors[2 * l], *b = &m->tensors[2 * l + 1];
            CHECK(w->numel == (size_t)(dims[l + 1] * dims[l]) && b->numel == (size_t)dims[l + 1],
                  "%s: %s %zu values, %s %zu", dir, w->name, w->numel, b->name, b->numel);
            size_t last = w->numel - 1;
            CHECK(host[w->offset] == 0.5f + 0.5f * (float)l &&
                  host[w->offset + last] == 0.5f + 0.5f * (float)l + (float)last / 1000.0f &&
                  host[b->offset] == 0.75f + 0.5f * (float)l, "%s: %s holds the fixture's values (%g ... %g)", dir,
                  w->name, (double)host[w->offset], (double)host[w->offset + last]);
        }
        free(host);
    }
    fx_teardown(&fx);
    unsetenv("DDP_TEST_FIXTURES");
}

/* Overwrites <tmp>/<dir>/mlp-reference/<file> with text. */
static void replace(const char *dir, const char *file, const char *text)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/mlp-reference/%s", dir, file);
    write_text(rel, "%s", text);
}

/* fx_setup on <tmp>/<dir> must fail, printing each of the expected strings. */
static void expect_refused(const char *dir, const char *what, const char *want1, const char *want2)
{
    use_fixtures(dir);
    static fx_mlp fx;
    char msg[4096];
    int rc = setup_captured(&fx, msg, sizeof msg);
    fx_teardown(&fx);
    CHECK(rc != 0, "%s: accepted", what);
    CHECK(strstr(msg, want1) != NULL, "%s: \"%s\" does not name \"%s\"", what, msg, want1);
    if (want2)
        CHECK(strstr(msg, want2) != NULL, "%s: \"%s\" does not say \"%s\"", what, msg, want2);
    unsetenv("DDP_TEST_FIXTURES");
}

static void test_refusals(void)
{
    const int64_t dims[] = {20, 9, 7, 3};
    char manifest[512];
    snprintf(manifest, sizeof manifest, "%s/bad-header/mlp-reference/MANIFEST", tmp_root);

    write_mlp_fixture("bad-header", 5, dims, 4);
    replace("bad-header", "MANIFEST", "# mlp-reference seed=1 B=5; no dims\ninput f32 5x20\nlabels i32 5\n");
    expect_refused("bad-header", "a header without dims", manifest, "dims=IN-HIDDEN...-CLASSES");

    write_mlp_fixture("bad-line", 5, dims, 4);
    replace("bad-line", "MANIFEST", "# mlp-reference seed=1 B=5 dims=20-9-7-3\ninput f32 5x\nlabels i32 5\n");
    char at_line[600];
    snprintf(at_line, sizeof at_line, "%s/bad-line/mlp-reference/MANIFEST:2:", tmp_root);
    expect_refused("bad-line", "a shape ending in x", at_line, "not \"name f32|i32 AxB...\"");

    write_mlp_fixture("bad-dtype", 5, dims, 4);
    replace("bad-dtype", "MANIFEST", "# mlp-reference seed=1 B=5 dims=20-9-7-3\ninput f32 5x20\nlabels i64 5\n");
    snprintf(at_line, sizeof at_line, "%s/bad-dtype/mlp-reference/MANIFEST:3:", tmp_root);
    expect_refused("bad-dtype", "a dtype other than f32/i32", at_line, NULL);

    /* the header says 5 rows, input's own line 6: the tensor line is not stretched to fit */
    write_mlp_fixture("mismatch", 5, dims, 4);
    char text[2048];
    snprintf(manifest, sizeof manifest, "%s/mismatch/mlp-reference/MANIFEST", tmp_root);
    FILE *f = fopen(manifest, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = '\0';
    char *input_line = strstr(text, "input f32 5x20");
    CHECK(input_line != NULL, "the written MANIFEST has input's line");
    if (input_line)
        input_line[strlen("input f32 ")] = '6';
    replace("mismatch", "MANIFEST", text);
    expect_refused("mismatch", "input's line against the header", "mismatch/mlp-reference/input",
                   "MANIFEST gives 120 values, the model's 100");

    write_mlp_fixture("short", 5, dims, 4);
    char rel[256];
    snprintf(rel, sizeof rel, "%s/short/mlp-reference/relu.init.fc2.bias.bin", tmp_root);
    CHECK(truncate(rel, 4 * 7 - 4) == 0, "truncate %s", rel);
    expect_refused("short", "a tensor one value short", "short/mlp-reference/relu.init.fc2.bias.bin",
                   "24 bytes, MANIFEST says 7 values");

    expect_refused("no-such-dir", "a missing directory", "no-such-dir/mlp-reference/MANIFEST", "cannot open");
}

/* gpt-reference's shapes come from its header too: a header of other shapes is read as written,
 * one without the noise floor is refused. */
static void test_gpt_header(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gpt", tmp_root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gpt/gpt-reference", tmp_root);
    mkdir(path, 0755);
    write_text("gpt/gpt-reference/MANIFEST", "# gpt-reference seed=7 L=3 C=24 NH=3 T=5 V=40 B=2; float32 noise "
               "floor of the AdamW trajectories (PyTorch float32 vs float64, max abs) 3.5e-06; test\n"
               "input i32 2x5\n");
    use_fixtures("gpt");
    static gfx g;
    memset(&g, 0, sizeof g);
    CHECK(gfx_read_manifest(&g) == 0, "gpt header of other shapes");
    CHECK(g.shape.n_layer == 3 && g.shape.n_embd == 24 && g.shape.n_head == 3 && g.T == 5 && g.shape.vocab_size == 40 &&
          g.B == 2 && fabs(g.noise_floor - 3.5e-6) < 1e-15 && fixture_numel(&g.manifest, "input") == 10,
          "gpt: L=%d C=%d NH=%d T=%lld V=%d B=%lld floor %g", (int)g.shape.n_layer, (int)g.shape.n_embd,
          (int)g.shape.n_head, (long long)g.T, (int)g.shape.vocab_size, (long long)g.B, g.noise_floor);
    write_text("gpt/gpt-reference/MANIFEST", "# gpt-reference seed=7 L=3 C=24 NH=3 T=5 V=40 B=2\ninput i32 2x5\n");
    char msg[4096];
    emu_capture_begin();
    int rc = gfx_read_manifest(&g);
    emu_capture_end(msg, sizeof msg);
    CHECK(rc != 0 && strstr(msg, "header line not understood") != NULL, "no noise floor: rc %d, \"%s\"", rc, msg);
    unsetenv("DDP_TEST_FIXTURES");
}

static void remove_tree(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    CHECK(system(cmd) == 0, "%s", cmd);
}

int main(void)
{
    CHECK(mkdtemp(tmp_root) != NULL, "mkdtemp");
    test_default_directory();
    const int64_t two_hidden[] = {20, 9, 7, 3}, three_hidden[] = {12, 8, 6, 4, 5};
    test_shapes_from_manifest("other-shapes", 5, two_hidden, 4);
    test_shapes_from_manifest("three-hidden", 3, three_hidden, 5);
    test_refusals();
    test_gpt_header();
    remove_tree();
    return check_done("test_fixture_reader");
}
