/* generate_chat.c — chat.json for `ddprun generate --chat` (see generate_chat.h). */
#include "generate_chat.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/hf/json_doc.h"

int chat_wrap_path(const char *chat_file, const char *tokenizer_path, char *out, size_t size, ddp_err *err)
{
    int len;
    if (chat_file) {
        len = snprintf(out, size, "%s", chat_file);
    } else {
        const char *slash = strrchr(tokenizer_path, '/');
        int dir_len = slash ? (int)(slash - tokenizer_path) + 1 : 0;
        len = snprintf(out, size, "%.*schat.json", dir_len, tokenizer_path);
    }
    if (len < 0 || (size_t)len >= size)
        return ddp_fail(err, DDP_EUSAGE, "the path of chat.json is too long (%s)", chat_file ? chat_file : tokenizer_path);
    return DDP_OK;
}

void chat_wrap_free(chat_wrap *c)
{
    free(c->prefix);
    free(c->suffix);
    free(c->end_of_turn);
    free(c->stops);
    c->prefix = c->suffix = c->end_of_turn = c->stops = NULL;
    c->n_prefix = c->n_suffix = c->n_end = c->n_stops = 0;
}

/* One id: an integer in [0, vocab_size). */
static int read_id(const json_doc *j, const json_node *n, const char *what, int32_t vocab_size, int32_t *out,
                   ddp_err *err)
{
    uint64_t v;
    char at[600];
    json_where(j, n, at, sizeof at);
    if (!json_uint(n, &v))
        return ddp_fail(err, DDP_EUSAGE, "%s: %s is %s (%s), not a token id", at, what,
                        json_kind_name(json_kind_of(n)), json_text(n) ? json_text(n) : "...");
    if (v >= (uint64_t)vocab_size)
        return ddp_fail(err, DDP_EUSAGE, "%s: %s is %llu, outside the tokenizer's %d ids: chat.json belongs to "
                        "another tokenizer", at, what, (unsigned long long)v, vocab_size);
    *out = (int32_t)v;
    return DDP_OK;
}

/* An array of ids into *ids (malloc'd; NULL when empty). */
static int read_ids(const json_doc *j, const json_node *arr, const char *key, int32_t vocab_size, int32_t **ids,
                    int64_t *n, ddp_err *err)
{
    char at[600];
    json_where(j, arr, at, sizeof at);
    if (json_kind_of(arr) != JSON_ARRAY)
        return ddp_fail(err, DDP_EUSAGE, "%s: \"%s\" is %s, not an array of token ids", at, key,
                        json_kind_name(json_kind_of(arr)));
    size_t count = json_array_size(arr);
    *n = 0;
    *ids = count ? malloc(count * sizeof **ids) : NULL;
    if (count && !*ids)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %zu ids", j->name, count);
    for (size_t i = 0; i < count; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%zu]", key, i);
        int rc = read_id(j, json_array_at(j, arr, i), what, vocab_size, &(*ids)[i], err);
        if (rc)
            return rc;
        (*n)++;
    }
    return DDP_OK;
}

/* c->stops: c->stop, then the ids of also (NULL: none). */
static int read_stops(const json_doc *j, const json_node *also, int32_t vocab_size, chat_wrap *c, ddp_err *err)
{
    int32_t *others = NULL;
    int64_t n_others = 0;
    int rc = also ? read_ids(j, also, "also_stop", vocab_size, &others, &n_others, err) : DDP_OK;
    c->stops = rc ? NULL : malloc((size_t)(1 + n_others) * sizeof *c->stops);
    if (!rc && !c->stops)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory for %lld stop ids", j->name, (long long)(1 + n_others));
    if (!rc) {
        c->stops[0] = c->stop;
        if (n_others)
            memcpy(c->stops + 1, others, (size_t)n_others * sizeof *others);
        c->n_stops = 1 + n_others;
    }
    free(others);
    return rc;
}

/* chat.json's keys; template and tokenizer only tell people where the ids came from */
static const struct {
    const char *name;
    bool required;
} KEYS[] = {{"version", true}, {"template", false}, {"tokenizer", false}, {"user_prefix", true},
            {"user_suffix", true}, {"end_of_turn", true}, {"stop", true}, {"also_stop", false}};

static int read_doc(const json_doc *j, int32_t vocab_size, chat_wrap *c, ddp_err *err)
{
    const json_node *root = json_root(j);
    char at[600];
    if (!root || json_kind_of(root) != JSON_OBJECT)
        return ddp_fail(err, DDP_EUSAGE, "%s: %s, not an object", j->name, root ? json_kind_name(json_kind_of(root))
                        : "empty");
    for (size_t i = 0; i < json_object_size(root); i++) {
        const json_node *v;
        const char *key = json_object_key(j, root, i, &v);
        bool known = false;
        for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++)
            known |= !strcmp(key, KEYS[k].name);
        json_where(j, v, at, sizeof at);
        if (!known)
            return ddp_fail(err, DDP_EUSAGE, "%s: unknown key \"%s\" (chat.json version %d has version, template, "
                            "tokenizer, user_prefix, user_suffix, end_of_turn, stop, also_stop)", at, key, CHAT_FILE_VERSION);
        if ((!strcmp(key, "template") || !strcmp(key, "tokenizer")) && json_kind_of(v) != JSON_STRING)
            return ddp_fail(err, DDP_EUSAGE, "%s: \"%s\" is %s, not a string", at, key, json_kind_name(json_kind_of(v)));
    }
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++)
        if (KEYS[k].required && !json_object_get(j, root, KEYS[k].name))
            return ddp_fail(err, DDP_EUSAGE, "%s: no \"%s\" (scripts/prepare-chat writes chat.json)", j->name,
                            KEYS[k].name);
    const json_node *version = json_object_get(j, root, "version");
    uint64_t v;
    json_where(j, version, at, sizeof at);
    if (!json_uint(version, &v) || v < 1 || v > CHAT_FILE_VERSION)
        return ddp_fail(err, DDP_EUSAGE, "%s: version %s, this ddprun reads versions 1 to %d", at,
                        json_text(version) ? json_text(version) : json_kind_name(json_kind_of(version)),
                        CHAT_FILE_VERSION);
    const json_node *also = json_object_get(j, root, "also_stop");
    if (also && v < 2) {
        json_where(j, also, at, sizeof at);
        return ddp_fail(err, DDP_EUSAGE, "%s: also_stop in a version 1 chat.json (version 2 added it)", at);
    }
    int rc = read_ids(j, json_object_get(j, root, "user_prefix"), "user_prefix", vocab_size, &c->prefix, &c->n_prefix,
                      err);
    if (!rc)
        rc = read_ids(j, json_object_get(j, root, "user_suffix"), "user_suffix", vocab_size, &c->suffix, &c->n_suffix,
                      err);
    if (!rc)
        rc = read_ids(j, json_object_get(j, root, "end_of_turn"), "end_of_turn", vocab_size, &c->end_of_turn,
                      &c->n_end, err);
    const json_node *stop = json_object_get(j, root, "stop");
    if (!rc && c->n_end == 0) {
        json_where(j, json_object_get(j, root, "end_of_turn"), at, sizeof at);
        rc = ddp_fail(err, DDP_EUSAGE, "%s: end_of_turn is empty: no token ends the assistant's turn", at);
    }
    if (!rc)
        rc = read_id(j, stop, "stop", vocab_size, &c->stop, err);
    if (!rc && c->stop != c->end_of_turn[0]) {
        json_where(j, stop, at, sizeof at);
        rc = ddp_fail(err, DDP_EUSAGE, "%s: stop is %d, not end_of_turn's first id %d", at, c->stop,
                      c->end_of_turn[0]);
    }
    return rc ? rc : read_stops(j, also, vocab_size, c, err);
}

int chat_wrap_load(const char *path, int32_t vocab_size, chat_wrap *c, ddp_err *err)
{
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", path);
    json_doc j;
    int rc = json_doc_load_file(&j, path, CHAT_FILE_MAX_BYTES, err);
    if (rc == DDP_OK)
        rc = read_doc(&j, vocab_size, c, err);
    json_doc_free(&j);
    if (rc && !strstr(err->msg, path))
        ddp_prefix(err, "%s", path);
    if (rc && strstr(err->msg, "cannot open")) {
        size_t len = strlen(err->msg);
        snprintf(err->msg + len, sizeof err->msg - len, " (scripts/prepare-chat writes chat.json beside tokenizer.bin; "
                 "--chat-file PATH names another)");
    }
    if (rc)
        ddp_prefix(err, "--chat");
    return rc;
}

int chat_wrap_ids(const chat_wrap *c, const int32_t *ids, int64_t n, int64_t extra, int32_t **out, int64_t *n_out,
                  ddp_err *err)
{
    *n_out = c->n_prefix + n + c->n_suffix;
    *out = malloc((size_t)(*n_out + extra + 1) * sizeof **out);
    if (!*out)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for %lld tokens", (long long)(*n_out + extra));
    if (c->n_prefix)
        memcpy(*out, c->prefix, (size_t)c->n_prefix * sizeof **out);
    if (n)
        memcpy(*out + c->n_prefix, ids, (size_t)n * sizeof **out);
    if (c->n_suffix)
        memcpy(*out + c->n_prefix + n, c->suffix, (size_t)c->n_suffix * sizeof **out);
    return DDP_OK;
}
