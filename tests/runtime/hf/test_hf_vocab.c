/* test_hf_vocab.c — a tokenizer.json's vocabulary fingerprint (runtime/hf/hf_vocab.h) against the
 * definition in runtime/data/tokenizer.h, computed here from hand-listed (id, token) pairs: a BPE
 * vocabulary object in any order of its keys with its added tokens (one outside the vocabulary, one
 * that is a vocabulary entry listed again); another content for an added id is another
 * fingerprint; a Unigram list of [token, score], ids by place; a non-ASCII token's UTF-8. Refused
 * naming the file (and FILE:LINE:COL where a node is to blame): an id twice in the vocabulary or in
 * added_tokens, an id that is negative, fractional or past int32, an added token without an id or
 * a content, added_tokens not a list, no model.vocab, a Unigram entry that is no pair (an empty
 * one). */
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/hf/hf_vocab.h"

static char dir[] = "/tmp/test_hf_vocab.XXXXXX";

/* The fingerprint of n (id, token) pairs in increasing id order, as tokenizer.h words it. */
static uint64_t expected(const int *ids, const char *const *tokens, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        unsigned char b[4] = {ids[i] & 255, (ids[i] >> 8) & 255, (ids[i] >> 16) & 255, (ids[i] >> 24) & 255};
        for (int k = 0; k < 4; k++)
            h = (h ^ b[k]) * 1099511628211ull;
        for (const char *p = tokens[i];; p++) {
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
            if (!*p)
                break;
        }
    }
    return h;
}

static int fingerprint_of(const char *text, uint64_t *out, ddp_err *err)
{
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
    memset(err, 0, sizeof *err);
    *out = 0;
    return hf_vocab_fingerprint(path, out, err);
}

static void test_read(void)
{
    static const int ids[] = {0, 1, 2, 3, 7, 40000};
    static const char *const tokens[] = {"a", "b\xc4\xa0", "<s>", "caf\xc3\xa9", "<|im_end|>", "\xe2\x96\x81the"};
    uint64_t want = expected(ids, tokens, 6), got;
    ddp_err err;
    CHECK(fingerprint_of("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\\u0120\": 1, \"<s>\": 2, "
                         "\"caf\\u00e9\": 3, \"\\u2581the\": 40000}}, \"added_tokens\": [{\"id\": 2, \"content\": "
                         "\"<s>\"}, {\"id\": 7, \"content\": \"<|im_end|>\", \"special\": true}]}", &got, &err) == DDP_OK,
          "BPE: %s", err.msg);
    CHECK(got == want, "BPE: %016llx, expected %016llx", (unsigned long long)got, (unsigned long long)want);
    CHECK(fingerprint_of("{\"added_tokens\": [{\"content\": \"<|im_end|>\", \"id\": 7}], \"model\": {\"vocab\": "
                         "{\"\\u2581the\": 40000, \"caf\\u00e9\": 3, \"<s>\": 2, \"b\\u0120\": 1, \"a\": 0}}}", &got,
                         &err) == DDP_OK, "BPE, keys in another order: %s", err.msg);
    CHECK(got == want, "BPE, keys in another order, <s> not listed again: %016llx", (unsigned long long)got);
    CHECK(fingerprint_of("{\"added_tokens\": [{\"content\": \"<|im_start|>\", \"id\": 7}], \"model\": {\"vocab\": "
                         "{\"\\u2581the\": 40000, \"caf\\u00e9\": 3, \"<s>\": 2, \"b\\u0120\": 1, \"a\": 0}}}", &got,
                         &err) == DDP_OK && got != want, "another content at an added id: another fingerprint");
    static const int uni_ids[] = {0, 1};
    static const char *const uni[] = {"x", "yz"};
    CHECK(fingerprint_of("{\"model\": {\"type\": \"Unigram\", \"vocab\": [[\"x\", 0.0], [\"yz\", -1.5]]}}", &got,
                         &err) == DDP_OK, "Unigram: %s", err.msg);
    CHECK(got == expected(uni_ids, uni, 2), "Unigram: %016llx", (unsigned long long)got);
}

static void test_refused(void)
{
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"{\"model\": {\"vocab\": {\"a\": 0, \"b\": 0}}}", "model.vocab gives id 0 to two tokens"},
        {"{\"model\": {\"vocab\": {\"a\": -1}}}", "tokenizer.json:1:27: a token id must be an integer in 0..2147483647"},
        {"{\"model\": {\"vocab\": {\"a\": 1.5}}}", "tokenizer.json:1:27: a token id must be an integer"},
        {"{\"model\": {\"vocab\": {\"a\": 2147483648}}}", "tokenizer.json:1:27: a token id must be an integer"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": \"0\", \"content\": \"a\"}]}",
         "tokenizer.json:1:56: a token id must be an integer"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"content\": \"x\"}]}",
         "tokenizer.json:1:49: a token id must be an integer"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 4}]}",
         "tokenizer.json:1:49: an added token must be an object with a string content and an id"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"added_tokens\": [{\"id\": 4, \"content\": \"x\"}, "
         "{\"id\": 4, \"content\": \"y\"}]}", "added_tokens gives id 4 to two tokens"},
        {"{\"model\": {\"vocab\": {\"a\": 0}}, \"added_tokens\": {}}", "added_tokens must be a list"},
        {"{\"model\": {\"vocab\": [[\"x\", 0.0], []]}}", "a Unigram vocabulary entry must be [token, score]"},
        {"{\"model\": {\"merges\": []}}", "no model.vocab"},
        {"[1, 2]", "no model.vocab"},
        {"{\"model\": {\"vocab\": [[\"x\", 0.0], 3]}}", "a Unigram vocabulary entry must be [token, score]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got;
        ddp_err err;
        CHECK(fingerprint_of(cases[i].text, &got, &err) != DDP_OK, "case %zu refused", i);
        CHECK_STR_CONTAINS(err.msg, cases[i].says);
        CHECK_STR_CONTAINS(err.msg, dir);
    }
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_read();
    test_refused();
    char path[sizeof dir + 32];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
    return check_done("test_hf_vocab");
}
