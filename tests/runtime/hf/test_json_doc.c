/* test_json_doc.c — the JSON layer of runtime/hf (json_doc.h, read by json_read.c) against RFC
 * 8259: a table of texts that must be refused, each with the reason and the NAME:LINE:COL of the
 * first offending byte in the message (YAML-only and invented escapes, surrogates alone or
 * mismatched, raw control characters and invalid UTF-8 in strings, numbers outside JSON's grammar,
 * trailing commas, single quotes, comments, NaN and Infinity, YAML syntax, text after the value),
 * and texts that must be read, with their decoded strings (\u00e9, surrogate pairs, \/), numbers,
 * JSON's four white-space characters anywhere between tokens, long keys and columns counted in
 * characters. */
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/hf/json_doc.h"

typedef struct {
    const char *text;
    size_t len;        /* 0: strlen(text) */
    const char *why;   /* in the message */
    const char *where; /* "x.json:LINE:COL:" in the message */
} bad_case;

static const bad_case bad[] = {
    /* escapes: only \" \\ \/ \b \f \n \r \t \uXXXX */
    {"{\"\\x74\": 1}", 0, "\\x is not a JSON escape", "x.json:1:3:"},
    {"[\"\\x77eight\"]", 0, "\\x is not a JSON escape", "x.json:1:3:"},
    {"\"a\\'b\"", 0, "\\' is not a JSON escape", "x.json:1:3:"},
    {"\"\\a\"", 0, "\\a is not a JSON escape", NULL},
    {"\"\\v\"", 0, "\\v is not a JSON escape", NULL},
    {"\"\\0\"", 0, "\\0 is not a JSON escape", NULL},
    {"\"\\e\"", 0, "\\e is not a JSON escape", NULL},
    {"\"\\N\"", 0, "\\N is not a JSON escape", NULL},
    {"\"\\_\"", 0, "\\_ is not a JSON escape", NULL},
    {"\"\\U0001F600\"", 0, "\\U is not a JSON escape", NULL},
    {"\"\\ \"", 0, "\\ before byte 0x20 is not a JSON escape", NULL},
    {"\"\\\tx\"", 0, "\\ before byte 0x09 is not a JSON escape", NULL},
    {"\"a\\\nb\"", 0, "\\ before byte 0x0A is not a JSON escape", "x.json:1:3:"},
    {"\"\\u12\"", 0, "\\u must be followed by four hex digits", "x.json:1:2:"},
    {"\"\\u12G4\"", 0, "four hex digits", NULL},
    {"\"\\u12", 0, "four hex digits", NULL},
    {"\"ab\\", 0, "a string not closed", NULL},
    /* surrogates: a pair or nothing */
    {"\"\\ud83d\"", 0, "\\uD83D is a high surrogate not followed by a low surrogate", "x.json:1:2:"},
    {"\"\\ud83dx\"", 0, "high surrogate not followed", NULL},
    {"\"\\ud83d\\u0041\"", 0, "high surrogate not followed", NULL},
    {"\"\\ud83d\\ud83d\"", 0, "high surrogate not followed", NULL},
    {"\"\\ud83d\\n\"", 0, "high surrogate not followed", NULL},
    {"\"x\\ude00\"", 0, "\\uDE00 is a low surrogate with no high surrogate", "x.json:1:3:"},
    {"\"\\u0000\"", 0, "\\u0000 (NUL) in a string is not read here", NULL},
    /* raw control characters and bytes that are not UTF-8 inside strings */
    {"{\"wei\nght\": 1}", 0, "a raw line break inside a string (write it as \\n)", "x.json:1:6:"},
    {"\"a\tb\"", 0, "a raw tab inside a string", "x.json:1:3:"},
    {"\"a\rb\"", 0, "a raw carriage return inside a string", NULL},
    {"\"a\x01z\"", 0, "raw control character 0x01 inside a string (write it as \\u0001)", NULL},
    {"\"\x1f\"", 0, "raw control character 0x1F", NULL},
    {"\"a\0b\"", 5, "raw control character 0x00", NULL},
    {"\"\xff\"", 0, "byte 0xFF inside a string is not UTF-8", NULL},
    {"\"\xc3\"", 0, "byte 0xC3 inside a string is not UTF-8", NULL},
    {"\"\xc0\xaf\"", 0, "byte 0xC0 inside a string is not UTF-8", NULL},            /* overlong '/' */
    {"\"\xe0\x80\xaf\"", 0, "byte 0xE0 inside a string is not UTF-8", NULL},        /* overlong '/' */
    {"\"\xed\xa0\x80\"", 0, "byte 0xED inside a string is not UTF-8", NULL},        /* a surrogate */
    {"\"\xf4\x90\x80\x80\"", 0, "byte 0xF4 inside a string is not UTF-8", NULL},    /* above U+10FFFF */
    {"\"\xe2\x82\"", 0, "byte 0xE2 inside a string is not UTF-8", NULL},            /* cut short */
    {"\"\x80\"", 0, "byte 0x80 inside a string is not UTF-8", NULL},
    {"\"abc", 0, "a string not closed before the end of the text", "x.json:1:1:"},
    /* numbers */
    {"01", 0, "\"01\" is not a JSON number: a number has no leading zeros", "x.json:1:1:"},
    {"[-01]", 0, "no leading zeros", "x.json:1:2:"},
    {"[00]", 0, "no leading zeros", NULL},
    {"+1", 0, "\"+1\" is not a JSON number: a number does not start with '+'", NULL},
    {".5", 0, "a digit must come before '.'", NULL},
    {"-.5", 0, "a digit must come before '.'", NULL},
    {"1.", 0, "\"1.\" is not a JSON number: a digit must follow '.'", NULL},
    {"[1.e5]", 0, "a digit must follow '.'", NULL},
    {"1e", 0, "the exponent has no digits", NULL},
    {"1e+", 0, "the exponent has no digits", NULL},
    {"1.5.2", 0, "\"1.5.2\" is neither a number", NULL},
    {"0x10", 0, "\"0x10\" is neither a number", NULL},
    {"[1_000]", 0, "expected ',' or ']' after an array item, found '_'", "x.json:1:3:"},
    {"-", 0, "\"-\" is neither a number", NULL},
    {"{\"a\": NaN}", 0, "\"NaN\" is neither a number, true, false, null nor a string in double quotes", "x.json:1:7:"},
    {"[Infinity]", 0, "\"Infinity\" is neither a number", NULL},
    {"[-Infinity]", 0, "\"-Infinity\" is neither a number", NULL},
    {"[nan]", 0, "\"nan\" is neither a number", NULL},
    {"True", 0, "\"True\" is neither a number", NULL},
    {"[nul]", 0, "\"nul\" is neither a number", NULL},
    {"[1,\n 2,\n 3x]", 0, "\"3x\" is neither a number", "x.json:3:2:"},
    /* commas, colons, brackets */
    {"[1,]", 0, "a comma after the last item of an array", "x.json:1:3:"},
    {"[1,\n]", 0, "a comma after the last item of an array", "x.json:1:3:"},
    {"{\"a\": 1,}", 0, "a comma after the last member of an object", "x.json:1:8:"},
    {"[,1]", 0, "expected a value", "x.json:1:2:"},
    {"[1,,2]", 0, "expected a value", NULL},
    {"[1 2]", 0, "expected ',' or ']' after an array item, found '2'", NULL},
    {"{\"a\" 1}", 0, "expected ':' after an object key, found '1'", NULL},
    {"{\"a\": 1 \"b\": 2}", 0, "expected ',' or '}' after an object member, found '\"'", NULL},
    {"{\"a\"}", 0, "expected ':' after an object key, found '}'", NULL},
    {"{\"a\":}", 0, "expected a value", NULL},
    {"[", 0, "expected a value (an object, an array, a string in double quotes, a number, true, false or null), "
     "found the end of the text", NULL},
    {"{\"w\": ", 0, "found the end of the text", "x.json:1:7:"},
    {"{\"a\": 1", 0, "expected ',' or '}' after an object member, found the end of the text", NULL},
    {"[1}", 0, "expected ',' or ']' after an array item, found '}'", NULL},
    {"]", 0, "expected a value", NULL},
    /* single quotes, unquoted keys, comments */
    {"'a'", 0, "found a single quote (JSON strings are in double quotes)", NULL},
    {"{\"w\": 'x'}", 0, "a single quote", NULL},
    {"{'a': 1}", 0, "an object key that is not a string in double quotes: found a single quote", "x.json:1:2:"},
    {"{a: 1}", 0, "an object key that is not a string in double quotes: found 'a'", NULL},
    {"{1: 1}", 0, "an object key that is not a string", NULL},
    {"{} // note", 0, "more after the value: found '/' (JSON has no comments)", "x.json:1:4:"},
    {"/* note */ {}", 0, "'/' (JSON has no comments)", "x.json:1:1:"},
    {"{\"a\": 1 /* note */}", 0, "'/' (JSON has no comments)", NULL},
    {"# note\n{}", 0, "found '#'", NULL},
    /* YAML beyond JSON */
    {"w: 1\n", 0, "\"w\" is neither a number", NULL},
    {"---\n{}\n", 0, "\"---\" is neither a number", NULL},
    {"- 1\n", 0, "\"-\" is neither a number", NULL},
    {"{\"w\": &x {}, \"v\": *x}", 0, "found '&'", NULL},
    {"{\"w\": !!str x}", 0, "found '!'", NULL},
    {"{\"w\": yes}", 0, "\"yes\" is neither a number", NULL},
    {"{? \"a\"}", 0, "found '?'", NULL},
    {"{\"a\": |\n  x\n}", 0, "found '|'", NULL},
    /* around the value */
    {"{} {}", 0, "more after the value: found '{'", "x.json:1:4:"},
    {"{}\n---\n{}\n", 0, "more after the value", "x.json:2:1:"},
    {"1 2", 0, "more after the value: found '2'", NULL},
    {"{}x", 0, "more after the value: found 'x'", NULL},
    {"{}\0", 3, "more after the value: found byte 0x00", NULL},
    {"{}\f", 0, "found byte 0x0C", NULL},
    {"[1,\v2]", 0, "found byte 0x0B", NULL},
    {"\xc2\xa0{}", 0, "found byte 0xC2", NULL},
    {"\xef\xbb\xbf{}", 0, "a byte order mark (U+FEFF) before the value", "x.json:1:1:"},
    {"\xff\xfe{\0}\0", 6, "found byte 0xFF", NULL},
    {"", 0, "no JSON value (empty text)", NULL},
    {" \n\t\r\n", 0, "no JSON value (empty text)", NULL},
    {"{\"a\": 1, \"a\": 2}", 0, "key \"a\" appears twice in one object", "x.json:1:10:"},
};

static void test_refused(void)
{
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *c = &bad[i];
        json_doc j;
        ddp_err err = {0};
        int rc = json_doc_parse(&j, "x.json", c->text, c->len ? c->len : strlen(c->text), &err);
        CHECK(rc == DDP_EUSAGE, "case %zu (%s): rc %d, expected a refusal", i, c->text, rc);
        CHECK(!strncmp(err.msg, "x.json:", 7), "case %zu: \"%s\" does not start with the name", i, err.msg);
        CHECK(strstr(err.msg, c->why), "case %zu: \"%s\" does not say \"%s\"", i, err.msg, c->why);
        CHECK(!c->where || strstr(err.msg, c->where), "case %zu: \"%s\" is not at \"%s\"", i, err.msg, c->where);
        json_doc_free(&j);
    }
    char deep[2 * (JSON_MAX_DEPTH + 1)];
    memset(deep, '[', JSON_MAX_DEPTH + 1);
    memset(deep + JSON_MAX_DEPTH + 1, ']', JSON_MAX_DEPTH + 1);
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_parse(&j, "x.json", deep, sizeof deep, &err) == DDP_EUSAGE, "nesting");
    CHECK_STR_CONTAINS(err.msg, "nested too deep");
    CHECK_STR_CONTAINS(err.msg, "x.json:1:65:");
    json_doc_free(&j);
    CHECK(json_doc_parse(&j, "x.json", deep + 1, sizeof deep - 2, &err) == DDP_OK, "%d levels: %s", JSON_MAX_DEPTH,
          err.msg);
    json_doc_free(&j);
}

/* The string member "s" of the one-member object text. */
static void check_string(const char *text, const char *want, size_t want_len)
{
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_parse(&j, "x.json", text, strlen(text), &err) == DDP_OK, "%s: %s", text, err.msg);
    const json_node *s = json_object_get(&j, json_root(&j), "s");
    CHECK(s && json_kind_of(s) == JSON_STRING && s->data.scalar.length == want_len &&
              !memcmp(json_text(s), want, want_len), "%s decoded wrongly", text);
    json_doc_free(&j);
}

static void test_strings(void)
{
    check_string("{\"s\": \"\\u00e9\"}", "\xc3\xa9", 2);
    check_string("{\"s\": \"\\u00E9t\\u00e9\"}", "\xc3\xa9t\xc3\xa9", 5);
    check_string("{\"s\": \"\\ud83d\\ude00\"}", "\xf0\x9f\x98\x80", 4);
    check_string("{\"s\": \"\\uD83D\\uDE00\\uDBFF\\uDFFF\"}", "\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf", 8);
    check_string("{\"s\": \"\\/\"}", "/", 1);
    check_string("{\"s\": \"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"}", "a\"b\\c/d\be\ff\ng\rh\ti", 17);
    check_string("{\"s\": \"\\u0041\\u20ac\\u0001\\u001f\"}", "A\xe2\x82\xac\x01\x1f", 6);
    check_string("{\"s\": \"\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbf\x7f\"}", "\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbf\x7f", 10);
    check_string("{\"s\": \"\"}", "", 0);
    check_string("{\"s\": \"a b  c\"}", "a b  c", 6); /* spaces inside a string are kept, not folded */
    check_string("{\"s\": \"\\ufeff\"}", "\xef\xbb\xbf", 3);
}

static void test_read(void)
{
    /* JSON's white space (tabs, CR LF) anywhere between tokens, the colon on a line of its own */
    const char *text = "{\r\n\t\"a\"\r\n\t:\t[ -0 , 0.5e-3,1E+2 ,\t1e-05\n ] ,\"\xc3\xa9\xc3\xa9\": true,\r\n"
                       "\"n\" : null , \"big\":123456789012345678901234567890123456789012345678901234567890.5}\r\n";
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_parse(&j, "x.json", text, strlen(text), &err) == DDP_OK, "parse: %s", err.msg);
    const json_node *root = json_root(&j), *a = json_object_get(&j, root, "a");
    double d = 0;
    CHECK(a && json_array_size(a) == 4, "a");
    CHECK(a && json_double(json_array_at(&j, a, 1), &d) && d == 0.5e-3, "0.5e-3");
    CHECK(a && json_double(json_array_at(&j, a, 2), &d) && d == 100, "1E+2");
    CHECK(a && !strcmp(json_text(json_array_at(&j, a, 0)), "-0"), "-0");
    CHECK(json_double(json_object_get(&j, root, "big"), &d) && d > 1.2e59 && d < 1.3e59, "a 61-character number");
    CHECK(json_kind_of(json_object_get(&j, root, "n")) == JSON_NULL, "null");
    char where[64];
    json_where(&j, json_object_get(&j, root, "\xc3\xa9\xc3\xa9"), where, sizeof where);
    CHECK(!strcmp(where, "x.json:4:11"), "columns count characters after CR LF: %s", where);
    json_where(&j, json_object_get(&j, root, "big"), where, sizeof where);
    CHECK(!strcmp(where, "x.json:5:20"), "position %s", where);
    json_doc_free(&j);

    /* a 3000-character key (YAML's implicit keys stop at 1024) and top-level values of each kind */
    static char key[3100];
    memset(key, 'k', sizeof key);
    memcpy(key, "{\"", 2);
    memcpy(key + 3002, "\":1}", 5);
    CHECK(json_doc_parse(&j, "x.json", key, strlen(key), &err) == DDP_OK, "long key: %s", err.msg);
    CHECK(json_object_size(json_root(&j)) == 1 && strlen(json_object_key(&j, json_root(&j), 0, &root)) == 3000,
          "long key");
    json_doc_free(&j);
    const char *tops[] = {"\"x\"", " 1 ", "null", "false", "[]", "{}", "[[],{}]", "-1.5E-7"};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        CHECK(json_doc_parse(&j, "x.json", tops[i], strlen(tops[i]), &err) == DDP_OK, "%s: %s", tops[i], err.msg);
        json_doc_free(&j);
    }
}

/* json_doc_load_file names the file in a refusal. */
static void test_file(void)
{
    char dir[] = "/tmp/test_json_doc.XXXXXX", path[256];
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\n  \"model_type\": \"gpt2\",\n  \"n_embd\": 768,\n  \"act\": \"gelu\\x5fnew\"\n}\n", f);
    fclose(f);
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_load_file(&j, path, 4096, &err) == DDP_EUSAGE, "\\x in config.json");
    char want[300];
    snprintf(want, sizeof want, "%s:4:15: not JSON: \\x is not a JSON escape", path);
    CHECK_STR_CONTAINS(err.msg, want);
    json_doc_free(&j);
    unlink(path);
    rmdir(dir);
}

/* Writes "[0,0,...,0]" of exactly `bytes` bytes (at least 3; (bytes - 1) / 2 zeros, and a blank
 * before the ']' when bytes is even) to path. */
static void write_zeros_array(const char *path, size_t bytes)
{
    FILE *f = fopen(path, "w");
    fputc('[', f);
    for (size_t i = 0; i < (bytes - 1) / 2; i++)
        fputs(i ? ",0" : "0", f);
    fputs(bytes % 2 ? "]" : " ]", f);
    fclose(f);
}

/* json_doc_load_file takes a file of up to max_bytes whole, whatever its size against the reader's
 * first buffer, and refuses one byte more; an empty file is no document. */
static void test_file_sizes(void)
{
    char dir[] = "/tmp/test_json_doc.XXXXXX", path[256];
    if (!mkdtemp(dir))
        return;
    snprintf(path, sizeof path, "%s/index.json", dir);
    const size_t sizes[] = {3, 4, 4095, 65535, 65536, 65537, 300001};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t bytes = sizes[i];
        write_zeros_array(path, bytes);
        json_doc j;
        ddp_err err = {0};
        CHECK(json_doc_load_file(&j, path, bytes, &err) == DDP_OK, "%zu bytes, at most %zu: %s", bytes, bytes,
              err.msg);
        CHECK(json_root(&j) && json_array_size(json_root(&j)) == (bytes - 1) / 2, "%zu bytes: %zu elements", bytes,
              json_root(&j) ? json_array_size(json_root(&j)) : 0);
        json_doc_free(&j);
        CHECK(json_doc_load_file(&j, path, 1u << 20, &err) == DDP_OK, "%zu bytes, at most 1 MiB: %s", bytes, err.msg);
        json_doc_free(&j);
        err = (ddp_err){0};
        CHECK(json_doc_load_file(&j, path, bytes - 1, &err) == DDP_EUSAGE, "%zu bytes, at most one less", bytes);
        char want[300];
        snprintf(want, sizeof want, "%s: larger than %zu bytes", path, bytes - 1);
        CHECK_STR_CONTAINS(err.msg, want);
        json_doc_free(&j);
    }
    FILE *f = fopen(path, "w");
    fclose(f);
    json_doc j;
    ddp_err err = {0};
    CHECK(json_doc_load_file(&j, path, 4096, &err) == DDP_EUSAGE, "an empty file is refused");
    CHECK_STR_CONTAINS(err.msg, path);
    json_doc_free(&j);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    test_refused();
    test_strings();
    test_read();
    test_file();
    test_file_sizes();
    return check_done("test_json_doc");
}
