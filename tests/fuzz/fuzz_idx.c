/* fuzz_idx.c — libFuzzer target for the Fashion-MNIST IDX reader (dataset_load_fashion_mnist,
 * runtime/data/dataset.h): the labels file, then the images file, both gzipped IDX.
 *
 * Input: a flags byte, the labels file's length (2 bytes, little-endian), the labels file, then the
 * images file. Flag bit 0 (labels) and bit 1 (images) make the harness gzip that file itself, so
 * mutations reach the IDX checks instead of dying in zlib's CRC; without it the bytes go to disk
 * as they are (not gzip, corrupt or truncated gzip). Bit 2 loads the train files instead of t10k;
 * bit 3 leaves the images file out. A load that succeeds must hold n samples of 784 pixels and
 * class ids below 10 (the harness reads them all and aborts otherwise). Must not print. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "runtime/data/dataset.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void write_file(const char *name, const uint8_t *p, size_t n, int gzip)
{
    char path[512];
    fuzz_path(path, sizeof path, name);
    if (!gzip) {
        fuzz_write_file(path, p, n);
        return;
    }
    gzFile gz = gzopen(path, "wb1");
    if (!gz || (n && gzwrite(gz, p, (unsigned)n) != (int)n) || gzclose(gz) != Z_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3 || size > INPUT_MAX_BYTES)
        return 0;
    uint8_t flags = data[0];
    size_t labels_len = (size_t)(data[1] | data[2] << 8);
    const uint8_t *rest = data + 3;
    size_t rest_n = size - 3;
    if (labels_len > rest_n)
        labels_len = rest_n;
    bool train = flags & 4;
    write_file(train ? "train-labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte.gz", rest, labels_len, flags & 1);
    if (!(flags & 8))
        write_file(train ? "train-images-idx3-ubyte.gz" : "t10k-images-idx3-ubyte.gz", rest + labels_len,
                   rest_n - labels_len, flags & 2);

    dataset d;
    ddp_err err = {0};
    if (dataset_load_fashion_mnist(fuzz_dir(), train, &d, &err) == DDP_OK) {
        if (d.n < 1 || !d.inputs || !d.targets || d.layout.input.count != 28 * 28 || d.layout.target.count != 1)
            abort();
        uint8_t pixels[28 * 28];
        int32_t label;
        unsigned sum = 0;
        for (int64_t i = 0; i < d.n; i++) {
            dataset_gather(&d, &i, 1, pixels, &label, NULL);
            if (label < 0 || label >= 10)
                abort();
            for (int k = 0; k < 28 * 28; k++)
                sum += pixels[k]; /* every pixel read, so ASan sees a short buffer */
        }
        (void)sum;
    } else if (d.n || d.inputs || d.targets || d.tokens) {
        abort(); /* a failed load must leave *out zeroed */
    }
    dataset_free(&d);
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
