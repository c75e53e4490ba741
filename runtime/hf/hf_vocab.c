/* hf_vocab.c — a tokenizer.json's vocabulary fingerprint (hf_vocab.h): every id of the model's
 * vocabulary and of added_tokens with its string (an added token's content where both give the
 * id), sorted by id and folded as runtime/data/tokenizer.h says. Must not hold the document past
 * the call, nor index past what the document holds (a malformed file is an error, never a read of
 * something else). */
#include "hf_vocab.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_doc.h"
#include "runtime/base/fnv1a.h"

/* tokenizer.json files run to tens of MB (Gemma 3's 33 MB); a larger file is no tokenizer's */
#define TOKENIZER_JSON_MAX_BYTES ((size_t)256 << 20)

typedef struct vocab_token {
    int64_t id;
    const char *text;
    bool added;      /* from added_tokens: its content stands for the id */
} vocab_token;

/* By id, an added token after the vocabulary's entry of the same id. */
static int by_id(const void *a, const void *b)
{
    const vocab_token *x = a, *y = b;
    if (x->id != y->id)
        return (x->id > y->id) - (x->id < y->id);
    return (int)x->added - (int)y->added;
}

static int malformed(const json_doc *j, const json_node *at, const char *what, ddp_err *err)
{
    char where[600];
    json_where(j, at, where, sizeof where);
    return ddp_fail(err, DDP_EUSAGE, "%s: %s", where, what);
}

/* n's id (a non-negative integer below 2^31: tokenizer.bin's ids are int32); where n is NULL,
 * the error points at parent. */
static int read_id(const json_doc *j, const json_node *n, const json_node *parent, int64_t *id, ddp_err *err)
{
    uint64_t v;
    if (n && json_uint(n, &v) && v <= INT32_MAX) {
        *id = (int64_t)v;
        return DDP_OK;
    }
    return malformed(j, n ? n : parent, "a token id must be an integer in 0..2147483647", err);
}

/* model.vocab's n tokens into t: an object of token to id (BPE, WordPiece), or Unigram's list of
 * [token, score], the id its place. */
static int read_vocab(const json_doc *j, const json_node *vocab, vocab_token *t, size_t n, ddp_err *err)
{
    bool listed = json_kind_of(vocab) == JSON_ARRAY;
    for (size_t i = 0; i < n; i++) {
        const json_node *v = NULL;
        if (listed) {
            const json_node *entry = json_array_at(j, vocab, i);
            v = json_kind_of(entry) == JSON_ARRAY && json_array_size(entry) == 2 ? json_array_at(j, entry, 0) : NULL;
            if (!v || json_kind_of(v) != JSON_STRING)
                return malformed(j, entry, "a Unigram vocabulary entry must be [token, score]", err);
            t[i] = (vocab_token){(int64_t)i, json_text(v), false};
            continue;
        }
        t[i] = (vocab_token){.text = json_object_key(j, vocab, i, &v)};
        int rc = read_id(j, v, vocab, &t[i].id, err);
        if (rc != DDP_OK)
            return rc;
    }
    return DDP_OK;
}

/* added_tokens' n entries (objects with an id and a string content) into t. */
static int read_added(const json_doc *j, const json_node *added, vocab_token *t, size_t n, ddp_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const json_node *a = json_array_at(j, added, i);
        const json_node *content = json_kind_of(a) == JSON_OBJECT ? json_object_get(j, a, "content") : NULL;
        if (!content || json_kind_of(content) != JSON_STRING)
            return malformed(j, a, "an added token must be an object with a string content and an id", err);
        t[i] = (vocab_token){.text = json_text(content), .added = true};
        int rc = read_id(j, json_object_get(j, a, "id"), a, &t[i].id, err);
        if (rc != DDP_OK)
            return rc;
    }
    return DDP_OK;
}

/* The sorted tokens folded; an id twice from one source is an error. */
static int fold(const json_doc *j, const vocab_token *t, size_t n, uint64_t *out, ddp_err *err)
{
    uint64_t h = FNV1A64_BASIS;
    for (size_t i = 0; i < n; i++) {
        bool next_same = i + 1 < n && t[i + 1].id == t[i].id;
        if (next_same && t[i + 1].added == t[i].added)
            return ddp_fail(err, DDP_EUSAGE, "%s: %s gives id %lld to two tokens", j->name,
                            t[i].added ? "added_tokens" : "model.vocab", (long long)t[i].id);
        if (next_same) /* the vocabulary's entry, an added token's id too: the added content counts */
            continue;
        uint8_t id[4] = {(uint8_t)t[i].id, (uint8_t)(t[i].id >> 8), (uint8_t)(t[i].id >> 16),
                         (uint8_t)(t[i].id >> 24)};
        h = fnv1a64(h, id, sizeof id);
        h = fnv1a64(h, t[i].text, strlen(t[i].text) + 1); /* with its 0 byte */
    }
    *out = h;
    return DDP_OK;
}

static int fingerprint(const json_doc *j, uint64_t *out, ddp_err *err)
{
    const json_node *root = json_root(j), *model = NULL, *vocab = NULL, *added = NULL;
    if (json_kind_of(root) == JSON_OBJECT && (model = json_object_get(j, root, "model")) &&
        json_kind_of(model) == JSON_OBJECT)
        vocab = json_object_get(j, model, "vocab");
    if (!vocab || (json_kind_of(vocab) != JSON_OBJECT && json_kind_of(vocab) != JSON_ARRAY))
        return ddp_fail(err, DDP_EUSAGE, "%s: no model.vocab (an object of token to id, or a list of "
                        "[token, score])", j->name);
    added = json_object_get(j, root, "added_tokens");
    if (added && json_kind_of(added) == JSON_NULL)
        added = NULL;
    if (added && json_kind_of(added) != JSON_ARRAY)
        return malformed(j, added, "added_tokens must be a list", err);
    size_t nv = json_kind_of(vocab) == JSON_ARRAY ? json_array_size(vocab) : json_object_size(vocab);
    size_t na = added ? json_array_size(added) : 0;
    vocab_token *t = malloc((nv + na ? nv + na : 1) * sizeof *t);
    if (!t)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu tokens", j->name, nv + na);
    int rc = read_vocab(j, vocab, t, nv, err);
    if (rc == DDP_OK)
        rc = read_added(j, added, t + nv, na, err);
    if (rc == DDP_OK) {
        qsort(t, nv + na, sizeof *t, by_id);
        rc = fold(j, t, nv + na, out, err);
    }
    free(t);
    return rc;
}

int hf_vocab_fingerprint(const char *path, uint64_t *out, ddp_err *err)
{
    json_doc j;
    *out = 0;
    int rc = json_doc_load_file(&j, path, TOKENIZER_JSON_MAX_BYTES, err);
    if (rc == DDP_OK)
        rc = fingerprint(&j, out, err);
    json_doc_free(&j);
    return rc;
}
