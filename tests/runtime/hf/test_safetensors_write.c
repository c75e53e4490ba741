/* test_safetensors_write.c — the safetensors writer (runtime/hf/safetensors_write.c): the header
 * exactly as the reference serializer writes it (metadata first, names in byte order whatever
 * order they are given in, contiguous offsets, a name with a quote, a newline and a control byte
 * escaped, spaces to a multiple of 8), F32 values written bit for bit and read back by our reader,
 * BF16 rounded to nearest even (ties both ways, the carry into the exponent, overflow to infinity,
 * NaN kept a NaN), and the refusals (a duplicate name, too many dimensions, an unsupported dtype) writing nothing. */
#include "tests/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/hf/safetensors.h"
#include "runtime/hf/safetensors_write.h"

static char dir[] = "/tmp/test_safetensors_write.XXXXXX";
static char path[256];

/* The whole file at path; *n its length. */
static uint8_t *slurp(size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *p = malloc(1 << 16);
    *n = fread(p, 1, 1 << 16, f);
    fclose(f);
    return p;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_f32(void)
{
    const float b[6] = {1.5f, -0.0f, 3.0e-41f, INFINITY, -2.25f, 1e30f}, q[2] = {7.0f, -8.0f};
    const st_out_tensor t[3] = {{"b", 2, {2, 3}, b}, {"a\"q\n\001", 1, {2}, q}, {"empty", 2, {0, 4}, q}};
    ddp_err err = {0};
    CHECK(safetensors_write(path, t, 3, ST_F32, &err) == DDP_OK, "write: %s", err.msg);
    size_t n = 0;
    uint8_t *file = slurp(&n);
    CHECK(file != NULL, "written");
    if (!file)
        return;
    const char *want = "{\"__metadata__\":{\"format\":\"pt\"},"
                       "\"a\\\"q\\n\\u0001\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
                       "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[32,32]}}";
    uint64_t len = 0;
    for (int i = 0; i < 8; i++)
        len |= (uint64_t)file[i] << (8 * i);
    size_t w = strlen(want);
    CHECK(len % 8 == 0 && len >= w && len < w + 8, "header length %llu for %zu bytes of JSON", (unsigned long long)len, w);
    CHECK(n == 8 + len + 32, "file of %zu bytes", n);
    CHECK(!memcmp(file + 8, want, w), "header %.*s", (int)w, (const char *)file + 8);
    for (size_t i = 8 + w; i < 8 + len; i++)
        CHECK(file[i] == ' ', "padding byte %zu is %#x", i, file[i]);
    CHECK(!memcmp(file + 8 + len, q, 8) && !memcmp(file + 8 + len + 8, b, 24), "data in name order, bit for bit");
    free(file);
    safetensors st;
    CHECK(safetensors_open(path, &st, &err) == DDP_OK, "our reader: %s", err.msg);
    const st_tensor *a = safetensors_find(&st, "a\"q\n\001");
    float out[6];
    if (a)
        safetensors_to_f32(a, out);
    CHECK(a && a->numel == 2 && !memcmp(out, q, 8), "the escaped name read back with its values");
    safetensors_close(&st);
}

static void test_bf16(void)
{
    /* float32 bits -> the bf16 torch rounds them to */
    const uint32_t in[] = {0x3f800000, 0x3f808000 /* tie, even below */, 0x3f818000 /* tie, even above */,
                           0x3f807fff, 0x3f808001, 0xbf7fffff /* carries into the exponent */,
                           0x7f7fffff /* overflows */, 0xff800000, 0x00000001};
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0x3f80, 0x3f81, 0xbf80, 0x7f80, 0xff80, 0x0000};
    enum { N = sizeof in / sizeof in[0] };
    float v[N + 1];
    for (int i = 0; i < N; i++)
        v[i] = from_bits(in[i]);
    v[N] = from_bits(0x7fa00001); /* a signalling NaN */
    const st_out_tensor t = {"x", 1, {N + 1}, v};
    ddp_err err = {0};
    CHECK(safetensors_write(path, &t, 1, ST_BF16, &err) == DDP_OK, "write: %s", err.msg);
    size_t n = 0;
    uint8_t *file = slurp(&n);
    if (!file)
        return;
    uint64_t len = 0;
    for (int i = 0; i < 8; i++)
        len |= (uint64_t)file[i] << (8 * i);
    CHECK(n == 8 + len + 2 * (N + 1), "file of %zu bytes", n);
    CHECK(strstr((char *)file + 8, "\"dtype\":\"BF16\",\"shape\":[10],\"data_offsets\":[0,20]") != NULL, "BF16 entry");
    const uint8_t *d = file + 8 + len;
    for (int i = 0; i < N; i++) {
        uint16_t got = (uint16_t)(d[2 * i] | d[2 * i + 1] << 8);
        CHECK(got == want[i], "%#010x -> %#06x, expected %#06x", in[i], got, want[i]);
    }
    uint16_t nan = (uint16_t)(d[2 * N] | d[2 * N + 1] << 8);
    CHECK((nan & 0x7f80) == 0x7f80 && (nan & 0x7f), "NaN -> %#06x, not a NaN", nan);
    free(file);
}

static void test_refusals(void)
{
    const float v[2] = {1, 2};
    const st_out_tensor dup[2] = {{"w", 1, {2}, v}, {"w", 1, {2}, v}};
    const st_out_tensor deep = {"deep", SAFETENSORS_MAX_DIMS + 1, {1, 1, 1, 1, 1, 1, 1, 1}, v};
    struct { const st_out_tensor *t; size_t n; st_dtype d; const char *needle; } cases[] = {
        {dup, 2, ST_F32, "tensor w given twice"}, {&deep, 1, ST_F32, "deep has 9 dimensions"},
        {dup, 1, ST_F16, "writing F16 is not supported"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unlink(path);
        ddp_err err = {0};
        CHECK(safetensors_write(path, cases[i].t, cases[i].n, cases[i].d, &err) == DDP_EUSAGE, "case %zu", i);
        CHECK_STR_CONTAINS(err.msg, cases[i].needle);
        CHECK_STR_CONTAINS(err.msg, path);
        CHECK(access(path, F_OK) != 0, "case %zu wrote %s", i, path);
    }
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    test_f32();
    test_bf16();
    test_refusals();
    unlink(path);
    rmdir(dir);
    return check_done("test_safetensors_write");
}
