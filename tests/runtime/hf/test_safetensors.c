/* test_safetensors.c — the safetensors reader (runtime/hf/safetensors.c) and its JSON layer
 * (runtime/hf/json_doc.c) on hand-made files: F32, F16 and BF16 tensors read back exactly (the
 * conversions checked on values with known float32 equivalents, subnormals and infinities
 * included, at an unaligned data area), offsets above 2^53 read exactly, and every refusal
 * (short file, header length, non-JSON and YAML-only syntax, a key written with a YAML-only escape
 * or a raw line break, duplicate names, dtype, shape, offsets out of order or out of the file,
 * gaps, overlaps, trailing data, a size that is not the shape's, metadata that is not strings),
 * each message naming the file and the tensor. RFC 8259's every rule: test_json_doc.c. */
#include "tests/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/hf/json_doc.h"
#include "runtime/hf/safetensors.h"

static char dir[] = "/tmp/test_safetensors.XXXXXX";
static char path[256];

/* Writes path: the header length, header, then data[0..n). */
static void write_file(const char *header, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(header);
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(header, 1, len, f);
    if (n)
        fwrite(data, 1, n, f);
    fclose(f);
}

/* Opening header + data fails with a message containing each of the NULL-terminated needles and the path. */
static void refused(const char *header, const void *data, size_t n, const char *needle, const char *needle2)
{
    write_file(header, data, n);
    safetensors st;
    ddp_err err = {0};
    int rc = safetensors_open(path, &st, &err);
    CHECK(rc == DDP_EUSAGE, "rc %d for header %s", rc, header);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, needle);
    if (needle2)
        CHECK_STR_CONTAINS(err.msg, needle2);
    CHECK(st.map == NULL && st.tensors == NULL && st.count == 0, "a failed open left state behind");
}

static void test_dtypes(void)
{
    /* 3 F32 | 5 F16 | 4 BF16 = 12 + 10 + 8 bytes; the header's odd length leaves the data unaligned */
    uint8_t data[30];
    const float f32[3] = {1.5f, -0.0f, 3.0e-41f /* subnormal */};
    memcpy(data, f32, 12); /* the test machine is little-endian, like the format */
    const uint16_t f16[5] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0xfc00};
    const float f16_want[5] = {1.0f, -2.0f, 5.9604644775390625e-8f, 65504.0f, -INFINITY};
    const uint16_t bf16[4] = {0x3f80, 0xc0a0, 0x0001, 0x7f80};
    const float bf16_want[4] = {1.0f, -5.0f, 9.18354961579912115600575419704879435795832466228193376178712270530013483949005603790283203125e-41f,
                                INFINITY};
    for (int i = 0; i < 5; i++)
        data[12 + 2 * i] = (uint8_t)f16[i], data[13 + 2 * i] = (uint8_t)(f16[i] >> 8);
    for (int i = 0; i < 4; i++)
        data[22 + 2 * i] = (uint8_t)bf16[i], data[23 + 2 * i] = (uint8_t)(bf16[i] >> 8);
    write_file("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[12,22]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1,3],\"data_offsets\":[0,12]},"
               "\"c\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[22,30]},"
               "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,4],\"data_offsets\":[30,30]}}   ", data, sizeof data);
    safetensors st;
    ddp_err err = {0};
    CHECK(safetensors_open(path, &st, &err) == DDP_OK, "open: %s", err.msg);
    CHECK_EQ_INT(st.count, 4);
    const st_tensor *a = safetensors_find(&st, "a"), *b = safetensors_find(&st, "b"), *c = safetensors_find(&st, "c");
    CHECK(a && b && c && !safetensors_find(&st, "d") && safetensors_find(&st, "empty"), "find");
    if (!a || !b || !c)
        return;
    CHECK(a->ndim == 2 && a->shape[0] == 1 && a->shape[1] == 3 && a->numel == 3 && a->dtype == ST_F32, "a's entry");
    CHECK(c->ndim == 2 && c->numel == 4 && c->dtype == ST_BF16 && b->dtype == ST_F16, "b's and c's entries");
    float out[5];
    safetensors_to_f32(a, out);
    CHECK(!memcmp(out, f32, sizeof f32), "F32 read back bit for bit");
    safetensors_to_f32(b, out);
    for (int i = 0; i < 5; i++)
        CHECK(!memcmp(&out[i], &f16_want[i], 4), "F16 %#x -> %.9g, expected %.9g", f16[i], out[i], f16_want[i]);
    safetensors_to_f32(c, out);
    for (int i = 0; i < 4; i++)
        CHECK(!memcmp(&out[i], &bf16_want[i], 4), "BF16 %#x -> %.9g, expected %.9g", bf16[i], out[i], bf16_want[i]);
    safetensors_close(&st);
    CHECK(st.map == NULL && st.count == 0, "close");
}

/* A file with tensors of the format's other dtypes (a mask buffer saved as BOOL or U8, an I64
 * step count) opens; each is of its dtype, which no reader takes as values: refused by name. */
static void test_other_dtypes(void)
{
    uint8_t data[4 + 3 + 8 + 4] = {0};
    write_file("{\"mask\":{\"dtype\":\"BOOL\",\"shape\":[2,2],\"data_offsets\":[0,4]},"
               "\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[4,7]},"
               "\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[7,15]},"
               "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[15,19]}}", data, sizeof data);
    safetensors st;
    ddp_err err = {0};
    CHECK(safetensors_open(path, &st, &err) == DDP_OK, "open: %s", err.msg);
    const st_tensor *mask = safetensors_find(&st, "mask"), *u = safetensors_find(&st, "u"), *n = safetensors_find(&st, "n"),
                    *w = safetensors_find(&st, "w");
    CHECK(mask && u && n && w, "find");
    if (!mask || !u || !n || !w)
        return;
    CHECK(mask->dtype == ST_BOOL && mask->numel == 4 && u->dtype == ST_U8 && n->dtype == ST_I64 && n->numel == 1,
          "the entries' dtypes and sizes");
    CHECK(!safetensors_dtype_readable(mask->dtype) && safetensors_dtype_readable(w->dtype), "readable: F32 alone");
    CHECK(safetensors_check_readable("f.safetensors", u, &err) == DDP_EUSAGE, "U8 refused as values");
    CHECK_STR_CONTAINS(err.msg, "f.safetensors: tensor u is U8; ddprun reads F32, F16 and BF16 tensors");
    CHECK(!safetensors_equal_f32(u, u), "values of another dtype are never equal as float32");
    safetensors_close(&st);
}

static void test_refusals(void)
{
    uint8_t data[64] = {0};
    FILE *f = fopen(path, "wb");
    fwrite("\x01\x00\x00", 1, 3, f);
    fclose(f);
    safetensors st;
    ddp_err err = {0};
    CHECK(safetensors_open(path, &st, &err) == DDP_EUSAGE, "3-byte file");
    CHECK_STR_CONTAINS(err.msg, "too short");
    f = fopen(path, "wb");
    fwrite("\xff\x00\x00\x00\x00\x00\x00\x00{}", 1, 10, f);
    fclose(f);
    CHECK(safetensors_open(path, &st, &err) == DDP_EUSAGE, "header length past the file");
    CHECK_STR_CONTAINS(err.msg, "header length 255 runs past the file's 10 bytes");

    const char *t = "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    char h[512];
    refused("[1, 2]", NULL, 0, "the header is an array, expected an object", NULL);
    refused("{\"w\": ", NULL, 0, "not JSON: expected a value", "found the end of the text");
    refused("w: 1\n", NULL, 0, "not JSON: \"w\" is neither a number", NULL);
    refused("{w: {}}", NULL, 0, "an object key that is not a string", NULL);
    refused("{\"w\": &x {}, \"v\": *x}", NULL, 0, "not JSON: expected a value", "found '&'");
    refused("{\"w\": !!str x}", NULL, 0, "not JSON: expected a value", "found '!'");
    refused("{\"w\": 'x'}", NULL, 0, "not JSON: expected a value", "a single quote (JSON strings are in double quotes)");
    refused("{\"w\": yes}", NULL, 0, "\"yes\" is neither a number", NULL);
    refused("{\"w\": 0x10}", NULL, 0, "\"0x10\" is neither a number", NULL);
    /* a key only YAML decodes ("\x77eight" is "weight" there) or folds (a raw line break) */
    refused("{\"\\x77eight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
            ":1:3: not JSON: \\x is not a JSON escape", NULL);
    refused("{\"wei\nght\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
            ":1:6: not JSON: a raw line break inside a string (write it as \\n)", NULL);
    refused("{\"__metadata__\":{\"format\":\"p\nt\"}}", NULL, 0, ":1:29: not JSON: a raw line break inside a string", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", data, 8,
            "a comma after the last member of an object", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", data, 8, "no leading zeros", NULL);
    snprintf(h, sizeof h, "{%s,%s}", t, t);
    refused(h, data, 8, "key \"w\" appears twice", ":1:");
    refused("{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", data, 8,
            "tensor w: dtype \"F128\" is not one of the format's", NULL);
    refused("{\"w\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 8,
            "tensor w: data_offsets span 8 bytes, but its shape of 2 I64 values needs 16", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", data, 8, "tensor w: data_offsets begin after they end (8 > 0)", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 4, "tensor w: data_offsets beyond the file: ends at byte 8 of a data area of 4 bytes", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[9007199254740993,9007199254741001]}}", data, 8,
            "ends at byte 9007199254741001 of a data area of 8 bytes", "tensor w");
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", data, 8, "tensor w: data_offsets span 8 bytes, but its shape of 3 F32 values needs 12", NULL);
    refused("{\"w\":{\"dtype\":\"BF16\",\"shape\":[2, 2],\"data_offsets\":[0,16]}}", data, 16, "tensor w: data_offsets span 16 bytes, but its shape of 4 BF16 values needs 8", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,2],\"data_offsets\":[0,8]}}", data, 8, "tensor w: the shape's element count overflows", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", data, 0,
            "tensor w: the shape's 4611686018427387904 F32 values overflow a byte count", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", data, 8, "tensor w: shape entry \"2.0\" is not a size", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", data, 8, "tensor w: shape entry \"-2\"", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", data, 8, "tensor w: no data_offsets", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", data, 8, "tensor w: unknown field \"x\"", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", data, 8, "tensor w: data_offsets is not [begin, end]", NULL);
    refused("{\"w\":[]}", data, 8, "tensor w: its entry is an array", NULL);
    refused("{\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
            data, 12, "tensor w (bytes 4..12) overlaps tensor v", NULL);
    refused("{\"v\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
            data, 12, "bytes 4..8 of the data area belong to no tensor (tensor w starts at 8)", NULL);
    refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", data, 12, "4 bytes after the last tensor's data", NULL);
    refused("{\"__metadata__\":{\"format\":1}}", NULL, 0, "__metadata__ \"format\" is a number, expected a string", NULL);
    refused("{\"__metadata__\":[]}", NULL, 0, "__metadata__ is an array", NULL);
}

/* The JSON layer on its own: numbers exact to 2^64 - 1, literals, positions. */
static void test_json(void)
{
    const char *text = "{\n  \"big\": 18446744073709551615,\n  \"p53\": 9007199254740993, \"eps\": 1e-05,\n"
                       "  \"n\": null, \"t\": true, \"s\": \"1\", \"esc\": \"a\\/b\\u00e9\"\n}\n";
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_parse(&j, "x.json", text, strlen(text), &err) == DDP_OK, "parse: %s", err.msg);
    const json_node *root = json_root(&j);
    uint64_t u = 0;
    double d = 0;
    CHECK(json_uint(json_object_get(&j, root, "big"), &u) && u == UINT64_MAX, "2^64-1");
    CHECK(json_uint(json_object_get(&j, root, "p53"), &u) && u == 9007199254740993ull, "2^53+1 exactly");
    CHECK(json_double(json_object_get(&j, root, "eps"), &d) && d == 1e-5, "1e-05");
    CHECK(!json_uint(json_object_get(&j, root, "eps"), &u), "1e-05 is not a size");
    CHECK(json_kind_of(json_object_get(&j, root, "n")) == JSON_NULL, "null");
    CHECK(json_kind_of(json_object_get(&j, root, "t")) == JSON_BOOL, "true");
    CHECK(json_kind_of(json_object_get(&j, root, "s")) == JSON_STRING && !json_uint(json_object_get(&j, root, "s"), &u),
          "\"1\" is a string, not a number");
    CHECK(!strcmp(json_text(json_object_get(&j, root, "esc")), "a/b\xc3\xa9"), "escapes");
    char where[64];
    json_where(&j, json_object_get(&j, root, "eps"), where, sizeof where);
    CHECK(!strcmp(where, "x.json:3:35"), "position %s", where);
    json_doc_free(&j);
    CHECK(json_doc_parse(&j, "x.json", "{} {}", 5, &err) != DDP_OK, "two values");
    json_doc_free(&j);
    CHECK(json_doc_parse(&j, "x.json", "{}\n---\n{}\n", 10, &err) != DDP_OK, "two documents");
    CHECK_STR_CONTAINS(err.msg, "x.json:");
    json_doc_free(&j);
    CHECK(json_doc_parse(&j, "x.json", "  ", 2, &err) == DDP_EUSAGE, "empty");
    CHECK_STR_CONTAINS(err.msg, "no JSON value");
    json_doc_free(&j);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CHECK(json_doc_parse(&j, "x.json", deep, 200, &err) == DDP_EUSAGE, "nesting");
    CHECK_STR_CONTAINS(err.msg, "nested too deep");
    json_doc_free(&j);
}

int main(void)
{
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    test_dtypes();
    test_other_dtypes();
    test_refusals();
    test_json();
    unlink(path);
    rmdir(dir);
    return check_done("test_safetensors");
}
