/* fuzz_safetensors.c — libFuzzer target for the safetensors reader (safetensors_open,
 * runtime/hf/safetensors.h) and through it the JSON layer (runtime/hf/json_doc.h).
 *
 * Input: a flags byte, then the file. With flag bit 0 the rest is HEADER@@DATA@@DATA: the harness
 * writes the 8-byte header length itself, so mutations reach the JSON and the entry checks instead
 * of dying at the length; without it the bytes go to disk as they are. A file that opens must hold
 * tensors whose data lie inside the file at exactly numel times the dtype's size, each found by its
 * name; the harness converts every tensor of a readable dtype to float32 (so ASan sees any short
 * mapping). Must not print. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hf/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const safetensors *st, const st_tensor *t)
{
    uint64_t bytes = t->numel * safetensors_dtype_size(t->dtype);
    if (t->end - t->begin != bytes || t->data < st->map || (uint64_t)(st->map + st->map_len - t->data) < bytes ||
        safetensors_find(st, t->name) != t)
        abort();
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++)
        numel *= (uint64_t)t->shape[d];
    if (numel != t->numel)
        abort();
    if (!safetensors_dtype_readable(t->dtype)) /* another of the format's dtypes: no values to read */
        return;
    float *out = malloc(t->numel ? t->numel * sizeof *out : 1);
    if (!out)
        abort();
    safetensors_to_f32(t, out);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX_BYTES)
        return 0;
    char path[512];
    fuzz_path(path, sizeof path, "model.safetensors");
    if (data[0] & 1)
        fuzz_write_safetensors(path, data + 1, size - 1);
    else
        fuzz_write_file(path, data + 1, size - 1);
    safetensors st;
    ddp_err err = {0};
    if (safetensors_open(path, &st, &err) == DDP_OK) {
        for (size_t i = 0; i < st.count; i++)
            check_tensor(&st, &st.tensors[i]);
        safetensors_close(&st);
    } else if (st.map || st.tensors || st.count || !err.msg[0]) {
        abort(); /* a failed open leaves nothing behind and says why */
    }
    fuzz_clear_dir(fuzz_dir());
    return 0;
}
