/* test_data.c — the Fashion-MNIST reader, synthetic data and gathering (suite 'data').
 *
 * Loads the real dataset and checks what Fashion-MNIST documents (60000/10000 samples, 28x28,
 * 6000/1000 per class); writes small valid and corrupted IDX files into a temporary directory and
 * checks each corruption is rejected with the path named and the dataset left zeroed. Does not
 * hard-code anything computed by the code under test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/check.h"
#include "runtime/data/dataset.h"

static char tmpdir[256];

/* Pixels and class ids: u8 x features -> i32 x 1 in [0, classes). */
static void check_classification_layout(const dataset *d, int64_t features, int64_t classes)
{
    CHECK(d->layout.input.dtype == SAMPLE_U8 && d->layout.input.count == features, "input u8 x %lld",
          (long long)features);
    CHECK(d->layout.target.dtype == SAMPLE_I32 && d->layout.target.count == 1, "target i32 x 1");
    CHECK_EQ_INT(d->layout.n_classes, classes);
}

static void check_real(const char *dir, bool train, int64_t n, int64_t per_class)
{
    dataset d;
    ddp_err err = {0};
    int rc = dataset_load_fashion_mnist(dir, train, &d, &err);
    CHECK_EQ_INT(rc, DDP_OK);
    if (rc) {
        fprintf(stderr, "load failed: %s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(d.n, n);
    check_classification_layout(&d, 784, 10);
    CHECK_STR_CONTAINS(d.name, train ? "fashion-mnist/train" : "fashion-mnist/test");
    const int32_t *labels = (const int32_t *)d.targets;
    int64_t counts[10] = {0};
    for (int64_t i = 0; i < d.n; i++)
        if (labels[i] >= 0 && labels[i] < 10)
            counts[labels[i]]++;
    for (int c = 0; c < 10; c++)
        CHECK(counts[c] == per_class, "class %d has %lld samples, expected %lld", c, (long long)counts[c],
              (long long)per_class);
    /* every image is a real picture: some ink, and a black background in at least one corner */
    int64_t blank = 0, max_px = 0;
    for (int64_t i = 0; i < d.n; i++) {
        const uint8_t *x = d.inputs + i * 784;
        int64_t ink = 0;
        for (int p = 0; p < 784; p++) {
            ink += x[p];
            max_px = x[p] > max_px ? x[p] : max_px;
        }
        blank += ink == 0;
    }
    CHECK_EQ_INT(blank, 0);
    CHECK_EQ_INT(max_px, 255);
    dataset_free(&d);
    CHECK(d.inputs == NULL && d.targets == NULL && d.n == 0, "dataset_free leaves the struct zeroed");
}

/* ---- small IDX files written at test time ---- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static void write_gz(const char *path, const uint8_t *data, size_t len)
{
    gzFile gz = gzopen(path, "wb");
    if (!gz || gzwrite(gz, data, (unsigned)len) != (int)len || gzclose(gz) != Z_OK) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static void write_raw(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

static uint8_t *read_raw(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        exit(1);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(*len);
    if (fread(buf, 1, *len, f) != *len)
        exit(1);
    fclose(f);
    return buf;
}

typedef struct idx_spec {
    uint32_t images_magic, labels_magic;
    uint32_t images_count, labels_count, rows, cols;
    int64_t payload_delta;  /* bytes added to (or cut from) the images payload */
    uint8_t bad_label;      /* value written as the last label */
} idx_spec;

static idx_spec valid_spec(void)
{
    return (idx_spec){0x803, 0x801, 5, 5, 28, 28, 0, 9};
}

static void path_of(char *buf, size_t size, const char *file) { snprintf(buf, size, "%s/%s", tmpdir, file); }

/* Writes train-{images,labels} per spec; returns the images payload size written. */
static void write_set(idx_spec s)
{
    char path[512];
    size_t img_len = (size_t)((int64_t)s.images_count * s.rows * s.cols + s.payload_delta);
    uint8_t *img = malloc(16 + img_len);
    put_be32(img, s.images_magic), put_be32(img + 4, s.images_count);
    put_be32(img + 8, s.rows), put_be32(img + 12, s.cols);
    for (size_t i = 0; i < img_len; i++)
        img[16 + i] = (uint8_t)(i * 7 + 1);
    path_of(path, sizeof path, "train-images-idx3-ubyte.gz");
    write_gz(path, img, 16 + img_len);
    free(img);

    uint8_t *lab = malloc(8 + s.labels_count);
    put_be32(lab, s.labels_magic), put_be32(lab + 4, s.labels_count);
    for (uint32_t i = 0; i < s.labels_count; i++)
        lab[8 + i] = (uint8_t)(i % 10);
    lab[8 + s.labels_count - 1] = s.bad_label;
    path_of(path, sizeof path, "train-labels-idx1-ubyte.gz");
    write_gz(path, lab, 8 + s.labels_count);
    free(lab);
}

static void expect_fail_without(const char *what, const char *file, const char *want, const char *unwanted);

/* Loads tmpdir (train) expecting failure naming `file`, and a zeroed dataset; `want` in the text. */
static void expect_fail(const char *what, const char *file, const char *want)
{
    expect_fail_without(what, file, want, NULL);
}

/* expect_fail, and `unwanted` (when not NULL) absent from the text. */
static void expect_fail_without(const char *what, const char *file, const char *want, const char *unwanted)
{
    dataset d, zero;
    memset(&d, 0xAB, sizeof d);
    memset(&zero, 0, sizeof zero);
    ddp_err err = {0};
    char path[512];
    path_of(path, sizeof path, file);
    int rc = dataset_load_fashion_mnist(tmpdir, true, &d, &err);
    CHECK(rc != DDP_OK, "%s: load succeeded", what);
    CHECK_EQ_INT(err.code, rc);
    CHECK(strstr(err.msg, path) != NULL, "%s: message \"%s\" does not name %s", what, err.msg, path);
    if (want)
        CHECK(strstr(err.msg, want) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err.msg, want);
    if (unwanted)
        CHECK(strstr(err.msg, unwanted) == NULL, "%s: message \"%s\" says \"%s\"", what, err.msg, unwanted);
    CHECK(memcmp(&d, &zero, sizeof d) == 0, "%s: dataset not zeroed after error", what);
    fprintf(stderr, "  %-26s -> %s\n", what, err.msg);
}

/* The gzip stream around the IDX data: a trailer CRC that does not match, in a file small enough
 * to be inflated at once, is named as the trailer's (not the IDX header's); bytes after the gzip
 * stream that are no further gzip member are refused; a second member is part of the file, as
 * gzip(1) reads it. */
static void check_gzip_framing(const char *images, const char *labels)
{
    (void)images;
    size_t len;
    write_set(valid_spec());
    uint8_t *gz = read_raw(labels, &len);
    gz[len - 6] ^= 0x5A;
    write_raw(labels, gz, len);
    expect_fail_without("labels trailer CRC", "train-labels-idx1-ubyte.gz", "CRC", "header");
    gz[len - 6] ^= 0x5A;
    uint8_t *junk = malloc(len + 5);
    memcpy(junk, gz, len);
    memcpy(junk + len, "junk\n", 5);
    write_raw(labels, junk, len + 5);
    expect_fail("garbage after the gzip stream", "train-labels-idx1-ubyte.gz", "5 bytes after the gzip stream");
    free(junk);
    free(gz);

    /* the labels file as two gzip members: header and two labels, then the other three */
    uint8_t lab[13];
    put_be32(lab, 0x801), put_be32(lab + 4, 5);
    for (int i = 0; i < 5; i++)
        lab[8 + i] = (uint8_t)(i % 10);
    lab[12] = 9;
    char part[512];
    path_of(part, sizeof part, "part.gz");
    write_gz(labels, lab, 10);
    write_gz(part, lab + 10, 3);
    size_t a_len, b_len;
    uint8_t *a = read_raw(labels, &a_len), *b = read_raw(part, &b_len);
    uint8_t *both = malloc(a_len + b_len);
    memcpy(both, a, a_len);
    memcpy(both + a_len, b, b_len);
    write_raw(labels, both, a_len + b_len);
    unlink(part);
    free(a), free(b), free(both);
    dataset d;
    ddp_err err = {0};
    int rc = dataset_load_fashion_mnist(tmpdir, true, &d, &err);
    CHECK(rc == DDP_OK, "labels in two gzip members: %s", err.msg);
    if (rc == DDP_OK) {
        CHECK_EQ_INT(((const int32_t *)d.targets)[4], 9);
        dataset_free(&d);
    }
}

/* IDX dimensions are signed 32-bit: a negative one is named as negative, not as 4294967268. */
static void check_negative_dimensions(const char *images, const char *labels)
{
    uint8_t hdr[16 + 28];
    write_set(valid_spec());
    put_be32(hdr, 0x803), put_be32(hdr + 4, 5), put_be32(hdr + 8, (uint32_t)-28), put_be32(hdr + 12, 28);
    memset(hdr + 16, 0, 28);
    write_gz(images, hdr, sizeof hdr);
    expect_fail_without("negative rows", "train-images-idx3-ubyte.gz", "-28", "4294967268");
    put_be32(hdr, 0x801), put_be32(hdr + 4, (uint32_t)-5);
    write_gz(labels, hdr, 8 + 5);
    expect_fail_without("negative label count", "train-labels-idx1-ubyte.gz", "-5", "4294967291");
}

static void check_corrupt_files(void)
{
    char images[512], labels[512];
    path_of(images, sizeof images, "train-images-idx3-ubyte.gz");
    path_of(labels, sizeof labels, "train-labels-idx1-ubyte.gz");

    /* positive control: the generator writes files the reader accepts */
    write_set(valid_spec());
    dataset d;
    ddp_err err = {0};
    int rc = dataset_load_fashion_mnist(tmpdir, true, &d, &err);
    CHECK(rc == DDP_OK, "valid small set rejected: %s", err.msg);
    if (rc == DDP_OK) {
        CHECK_EQ_INT(d.n, 5);
        CHECK_EQ_INT(((const int32_t *)d.targets)[4], 9);
        CHECK_EQ_INT(d.inputs[784 * 4 + 783], (uint8_t)((784 * 4 + 783) * 7 + 1));
        dataset_free(&d);
    }

    /* truncated gzip: the compressed file cut in half */
    size_t len;
    uint8_t *gz = read_raw(images, &len);
    write_raw(images, gz, len / 2);
    expect_fail("truncated gzip", "train-images-idx3-ubyte.gz", "truncated");
    /* only the 8-byte gzip trailer (CRC + length) missing */
    write_raw(images, gz, len - 8);
    expect_fail("gzip trailer missing", "train-images-idx3-ubyte.gz", NULL);
    /* a flipped CRC byte in the trailer */
    gz[len - 6] ^= 0x5A;
    write_raw(images, gz, len);
    expect_fail("bad gzip CRC", "train-images-idx3-ubyte.gz", "corrupt");
    free(gz);

    /* garbage (non-gzip) */
    write_set(valid_spec());
    uint8_t garbage[4000];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (uint8_t)(i * 131 + 17);
    write_raw(labels, garbage, sizeof garbage);
    expect_fail("garbage labels", "train-labels-idx1-ubyte.gz", "not a gzip");

    idx_spec s = valid_spec();
    s.images_magic = 0x804;
    write_set(s);
    expect_fail("wrong images magic", "train-images-idx3-ubyte.gz", "magic");
    s = valid_spec();
    s.labels_magic = 0x803;
    write_set(s);
    expect_fail("wrong labels magic", "train-labels-idx1-ubyte.gz", "magic");

    s = valid_spec();
    s.images_count = 4;
    write_set(s);
    expect_fail("count mismatch", "train-images-idx3-ubyte.gz", "labels");

    s = valid_spec();
    s.rows = 32, s.cols = 32;
    write_set(s);
    expect_fail("32x32 images", "train-images-idx3-ubyte.gz", "28x28");

    s = valid_spec();
    s.payload_delta = -100;
    write_set(s);
    expect_fail("payload short of header", "train-images-idx3-ubyte.gz", "truncated");
    s.payload_delta = 3;
    write_set(s);
    expect_fail("trailing payload", "train-images-idx3-ubyte.gz", "trailing");

    s = valid_spec();
    s.bad_label = 10;
    write_set(s);
    expect_fail("label 10", "train-labels-idx1-ubyte.gz", "label");

    check_gzip_framing(images, labels);
    check_negative_dimensions(images, labels);

    write_set(valid_spec());
    unlink(images);
    expect_fail("missing images", "train-images-idx3-ubyte.gz", "dataset-fashion-mnist");
    unlink(labels);
    expect_fail("missing labels", "train-labels-idx1-ubyte.gz", "dataset-fashion-mnist");
}

/* The class a perceptron of weights w (k x f) gives row x. */
static int64_t perceptron_class(const double *w, const uint8_t *x, int64_t f, int64_t k)
{
    int64_t best = 0;
    double best_score = 0;
    for (int64_t c = 0; c < k; c++) {
        double score = 0;
        for (int64_t j = 0; j < f; j++)
            score += w[c * f + j] * (x[j] - 127.5);
        if (c == 0 || score > best_score)
            best_score = score, best = c;
    }
    return best;
}

/* A multi-class perceptron trained on d (30 passes) fits the synthetic labels, a function of the
 * inputs: its accuracy on `on` (d itself, or data labelled by the same rule). */
static double perceptron_accuracy(const dataset *d, const dataset *on)
{
    int64_t f = d->layout.input.count, k = d->layout.n_classes;
    const int32_t *labels = (const int32_t *)d->targets;
    double *w = calloc((size_t)(f * k), sizeof *w);
    for (int pass = 0; pass < 30; pass++)
        for (int64_t i = 0; i < d->n; i++) {
            const uint8_t *x = d->inputs + i * f;
            int64_t best = perceptron_class(w, x, f, k), y = labels[i];
            for (int64_t j = 0; best != y && j < f; j++) {
                w[y * f + j] += x[j] - 127.5;
                w[best * f + j] -= x[j] - 127.5;
            }
        }
    int64_t correct = 0;
    for (int64_t i = 0; i < on->n; i++)
        correct += perceptron_class(w, on->inputs + i * f, f, k) == ((const int32_t *)on->targets)[i];
    free(w);
    return (double)correct / (double)on->n;
}

static void check_synthetic(void)
{
    dataset a, b, c, t;
    ddp_err err = {0};
    CHECK_EQ_INT(dataset_make_synthetic(2000, 24, 5, 42, false, &a, &err), DDP_OK);
    CHECK_EQ_INT(dataset_make_synthetic(2000, 24, 5, 42, false, &b, &err), DDP_OK);
    CHECK_EQ_INT(dataset_make_synthetic(2000, 24, 5, 43, false, &c, &err), DDP_OK);
    CHECK_EQ_INT(dataset_make_synthetic(2000, 24, 5, 42, true, &t, &err), DDP_OK);
    CHECK_EQ_INT(a.n, 2000);
    check_classification_layout(&a, 24, 5);
    CHECK(memcmp(a.inputs, b.inputs, 2000 * 24) == 0 && memcmp(a.targets, b.targets, 2000 * sizeof(int32_t)) == 0,
          "same seed gives the same data");
    CHECK(memcmp(a.inputs, c.inputs, 2000 * 24) != 0, "another seed gives other images");
    const int32_t *labels = (const int32_t *)a.targets;
    int64_t counts[5] = {0};
    for (int64_t i = 0; i < a.n; i++) {
        CHECK(labels[i] >= 0 && labels[i] < 5, "label %d out of range", labels[i]);
        if (labels[i] >= 0 && labels[i] < 5)
            counts[labels[i]]++;
    }
    for (int k = 0; k < 5; k++)
        CHECK(counts[k] >= 100, "class %d has only %lld of 2000 samples", k, (long long)counts[k]);
    double acc = perceptron_accuracy(&a, &a);
    fprintf(stderr, "  perceptron training accuracy on synthetic data: %.3f\n", acc);
    CHECK(acc >= 0.9, "synthetic labels not learnable by a linear model: accuracy %.3f", acc);
    /* the test split: other images, labelled by the same rule, so what fits train fits it (a rule of
     * its own leaves the chance of one class in five, 0.2) */
    CHECK(memcmp(a.inputs, t.inputs, 2000 * 24) != 0, "the test split has other images");
    acc = perceptron_accuracy(&a, &t);
    fprintf(stderr, "  its accuracy on the test split: %.3f\n", acc);
    CHECK(acc >= 0.8, "the test split is not labelled by the training split's rule: accuracy %.3f", acc);

    /* gather returns the rows and labels named by idx */
    int64_t idx[4] = {1999, 0, 7, 7};
    uint8_t x[4 * 24];
    int32_t y[4];
    dataset_gather(&a, idx, 4, x, y, NULL);
    for (int i = 0; i < 4; i++) {
        CHECK(memcmp(x + i * 24, a.inputs + idx[i] * 24, 24) == 0, "gathered row %d", i);
        CHECK_EQ_INT(y[i], labels[idx[i]]);
    }
    dataset_free(&a), dataset_free(&b), dataset_free(&c), dataset_free(&t);

    dataset z, zero;
    memset(&zero, 0, sizeof zero);
    CHECK(dataset_make_synthetic(0, 24, 5, 1, false, &z, &err) == DDP_EUSAGE, "n = 0 rejected");
    CHECK(memcmp(&z, &zero, sizeof z) == 0, "rejected synthetic dataset is zeroed");
    CHECK(dataset_make_synthetic(10, 24, 1, 1, false, &z, &err) == DDP_EUSAGE, "one class rejected");
}

int main(void)
{
    const char *fmnist = getenv("DDP_TEST_FMNIST");
    if (!fmnist)
        fmnist = "/usr/share/datasets/fashion-mnist";
    check_real(fmnist, true, 60000, 6000);
    check_real(fmnist, false, 10000, 1000);

    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/test_data.XXXXXX", base ? base : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    check_corrupt_files();
    check_synthetic();
    rmdir(tmpdir);
    return check_done("test_data");
}
