/* fuzz_ckpt.c — libFuzzer target for the checkpoint reader (ckpt_read and ckpt_read_lenient,
 * runtime/ckpt/ckpt.h; the format is docs/checkpoint-format.md).
 *
 * Input: one flags byte, then the file. Flag bit 0 makes the harness repair the preamble's file
 * length and header CRC before writing the file, so mutations of the header section and tensor
 * table reach the table checks instead of all dying at the CRC; bit 1 reads leniently (tensor CRC
 * mismatches kept). A read that succeeds must hand back a result that holds what the reader
 * promises (tensors inside the file, sizes that match dtype and shape, names that find their
 * entries); the harness aborts otherwise. Owns no checkpoint logic, and must not print. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "runtime/ckpt/ckpt.h"
#include "tests/fuzz/fuzz_util.h"

#define INPUT_MAX_BYTES (256 * 1024)
#define PREAMBLE 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t le32(const uint8_t *p) { return p[0] | p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The preamble's file length and header CRC made right for whatever the rest says. */
static void repair_preamble(uint8_t *f, size_t n)
{
    if (n < PREAMBLE)
        return;
    put_le(f + 16, n, 8);
    uint32_t header_len = le32(f + 12);
    if (header_len > n - PREAMBLE)
        return;
    uLong crc = crc32_z(crc32_z(0L, f, 24), f + PREAMBLE, header_len);
    put_le(f + 24, (uint32_t)crc, 4);
}

static void check_loaded(const ckpt_loaded *c, bool strict)
{
    for (int i = 0; i < c->n_tensors; i++) {
        const ckpt_tensor *t = &c->tensors[i];
        const uint8_t *blob = c->blob_, *d = t->data;
        if (ckpt_loaded_tensor(c, t->name) != t || d < blob || (uint64_t)(d - blob) + t->nbytes > c->file_bytes ||
            ckpt_tensor_numel(t) * ckpt_dtype_size(t->dtype) != t->nbytes || (strict && !t->crc_ok) ||
            ((uint32_t)crc32_z(0L, d, t->nbytes) == t->crc) != t->crc_ok) {
            fprintf(stderr, "checkpoint read returned an inconsistent tensor %d (%s)\n", i, t->name);
            abort();
        }
    }
    if (c->hdr.n_rng < 0 || c->hdr.n_rng > CKPT_MAX_RNG)
        abort();
    for (int i = 0; i < c->hdr.n_rng; i++)
        if (strnlen(c->hdr.rng[i].name, CKPT_NAME_MAX) >= CKPT_NAME_MAX || !ckpt_loaded_rng(c, c->hdr.rng[i].name))
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > INPUT_MAX_BYTES)
        return 0;
    uint8_t flags = data[0];
    size_t n = size - 1;
    uint8_t *file = malloc(n ? n : 1);
    if (!file)
        abort();
    memcpy(file, data + 1, n);
    if (flags & 1)
        repair_preamble(file, n);
    char path[512];
    fuzz_path(path, sizeof path, "ckpt-00000001.ddp");
    fuzz_write_file(path, file, n);
    free(file);

    bool strict = !(flags & 2);
    ckpt_loaded c;
    ddp_err err = {0};
    int rc = strict ? ckpt_read(path, &c, &err) : ckpt_read_lenient(path, &c, &err);
    if (rc == DDP_OK)
        check_loaded(&c, strict);
    else if (c.n_tensors || c.tensors || c.blob_)
        abort(); /* a failed read must leave *out empty */
    ckpt_loaded_free(&c);
    return 0;
}
