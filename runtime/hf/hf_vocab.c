/* hf_vocab.c — a tokenizer.json's vocabulary fingerprint (hf_vocab.h): its regular tokens, those of
 * the model's vocabulary whose id no added token has, sorted by id and folded as tokenizer.h says.
 * Must not hold the document past the call. */
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
} vocab_token;

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const vocab_token *)a)->id, y = ((const vocab_token *)b)->id;
    return (x > y) - (x < y);
}

/* An id: a non-negative integer below 2^31 (tokenizer.bin's ids are int32). */
static int read_id(const json_doc *j, const json_node *n, int64_t *id, ddp_err *err)
{
    uint64_t v;
    if (n && json_uint(n, &v) && v <= INT32_MAX) {
        *id = (int64_t)v;
        return DDP_OK;
    }
    char at[600];
    json_where(j, n, at, sizeof at);
    return ddp_fail(err, DDP_EUSAGE, "%s: a token id must be an integer in 0..%d", at, INT32_MAX);
}

/* model.vocab's tokens into t (n of them, in document order). */
static int read_vocab(const json_doc *j, const json_node *vocab, vocab_token *t, size_t n, ddp_err *err)
{
    bool listed = json_kind_of(vocab) == JSON_ARRAY;
    for (size_t i = 0; i < n; i++) {
        const json_node *v = NULL, *entry = listed ? json_array_at(j, vocab, i) : NULL;
        if (listed) { /* Unigram: [token, score], its id its place */
            v = entry && json_kind_of(entry) == JSON_ARRAY ? json_array_at(j, entry, 0) : NULL;
            if (!v || json_kind_of(v) != JSON_STRING) {
                char at[600];
                json_where(j, entry ? entry : vocab, at, sizeof at);
                return ddp_fail(err, DDP_EUSAGE, "%s: a Unigram vocabulary entry must be [token, score]", at);
            }
            t[i] = (vocab_token){(int64_t)i, json_text(v)};
            continue;
        }
        t[i].text = json_object_key(j, vocab, i, &v);
        int rc = read_id(j, v, &t[i].id, err);
        if (rc != DDP_OK)
            return rc;
    }
    return DDP_OK;
}

static int by_value(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The ids of added_tokens (an array of objects with an id; absent: none), sorted, into *ids. */
static int added_ids(const json_doc *j, const json_node *added, int64_t **ids, size_t *n, ddp_err *err)
{
    *n = added ? json_array_size(added) : 0;
    *ids = malloc((*n ? *n : 1) * sizeof **ids);
    if (!*ids)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu added tokens", j->name, *n);
    for (size_t i = 0; i < *n; i++) {
        const json_node *a = json_array_at(j, added, i);
        int rc = read_id(j, a && json_kind_of(a) == JSON_OBJECT ? json_object_get(j, a, "id") : a, &(*ids)[i], err);
        if (rc != DDP_OK)
            return rc;
    }
    qsort(*ids, *n, sizeof **ids, by_value);
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
    if (json_kind_of(root) == JSON_OBJECT && (added = json_object_get(j, root, "added_tokens")) &&
        json_kind_of(added) != JSON_ARRAY)
        added = NULL;
    size_t n = json_kind_of(vocab) == JSON_ARRAY ? json_array_size(vocab) : json_object_size(vocab), n_added = 0;
    int64_t *skip = NULL;
    vocab_token *t = malloc((n ? n : 1) * sizeof *t);
    int rc = t ? added_ids(j, added, &skip, &n_added, err)
               : ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu tokens", j->name, n);
    if (rc == DDP_OK)
        rc = read_vocab(j, vocab, t, n, err);
    if (rc == DDP_OK)
        qsort(t, n, sizeof *t, by_id);
    uint64_t h = FNV1A64_BASIS;
    for (size_t i = 0, k = 0; rc == DDP_OK && i < n; i++) {
        if (i > 0 && t[i].id == t[i - 1].id) {
            rc = ddp_fail(err, DDP_EUSAGE, "%s: model.vocab gives id %lld to two tokens", j->name,
                          (long long)t[i].id);
            break;
        }
        while (k < n_added && skip[k] < t[i].id) /* both ascend: one walk */
            k++;
        if (k < n_added && skip[k] == t[i].id)
            continue;
        uint8_t id[4] = {(uint8_t)t[i].id, (uint8_t)(t[i].id >> 8), (uint8_t)(t[i].id >> 16),
                         (uint8_t)(t[i].id >> 24)};
        h = fnv1a64(h, id, sizeof id);
        h = fnv1a64(h, t[i].text, strlen(t[i].text) + 1); /* with its 0 byte */
    }
    free(t);
    free(skip);
    *out = h;
    return rc;
}

int hf_vocab_fingerprint(const char *path, uint64_t *out, ddp_err *err)
{
    json_doc j;
    int rc = json_doc_load_file(&j, path, TOKENIZER_JSON_MAX_BYTES, err);
    if (rc == DDP_OK)
        rc = fingerprint(&j, out, err);
    json_doc_free(&j);
    return rc;
}
