/* hf_token_ids.c — config.json's bos_token_id and eos_token_id, read from a folder and written
 * back (see hf_token_ids.h). Owns the ids' checks and their JSON text; config.json itself is
 * hf_folder.c's. Must not know model families or print. */
#include "hf_token_ids.h"

#include <string.h>

#include "hf_folder.h"

/* One id of key `key`: a non-negative integer, as decimal text into out. Not checked against the
 * vocabulary: transformers does not, and small models made with GPT2Config's defaults hold 50256
 * over a vocabulary of a few hundred. */
static int read_id(const json_doc *j, const json_node *v, const char *key, char *out, size_t size, ddp_err *err)
{
    uint64_t id;
    if (!json_uint(v, &id) || id > INT64_MAX)
        return hf_key_fail(j, v, key, !strcmp(key, "eos_token_id") ? "expected null, a token id or a list of them"
                                                                    : "expected null or a token id", err);
    snprintf(out, size, "%llu", (unsigned long long)id);
    return DDP_OK;
}

/* eos_token_id's list as json.dumps(indent=2) writes it one level down. */
static int read_list(const json_doc *j, const json_node *v, char *out, size_t size, ddp_err *err)
{
    size_t n = json_array_size(v);
    if (n > HF_EOS_IDS_MAX) {
        char why[64];
        snprintf(why, sizeof why, "expected at most %d token ids", HF_EOS_IDS_MAX);
        return hf_key_fail(j, v, "eos_token_id", why, err);
    }
    if (n == 0) {
        snprintf(out, size, "[]");
        return DDP_OK;
    }
    size_t used = (size_t)snprintf(out, size, "[");
    for (size_t i = 0; i < n; i++) {
        char one[24];
        int rc = read_id(j, json_array_at(j, v, i), "eos_token_id", one, sizeof one, err);
        if (rc != DDP_OK)
            return rc;
        used += (size_t)snprintf(out + used, size - used, "\n    %s%s", one, i + 1 < n ? "," : "\n  ]");
    }
    return DDP_OK;
}

static int read_key(const json_doc *j, const char *key, char *out, size_t size, ddp_err *err)
{
    const json_node *v = json_object_get(j, json_root(j), key);
    out[0] = '\0';
    if (!v)
        return DDP_OK;
    if (json_kind_of(v) == JSON_NULL) {
        snprintf(out, size, "null");
        return DDP_OK;
    }
    if (json_kind_of(v) == JSON_ARRAY && !strcmp(key, "eos_token_id"))
        return read_list(j, v, out, size, err);
    return read_id(j, v, key, out, size, err);
}

int hf_token_ids_read(const char *dir, hf_token_ids *ids, ddp_err *err)
{
    json_doc j = {0};
    *ids = (hf_token_ids){.read = true};
    int rc = hf_config_load(dir, &j, err);
    if (rc == DDP_OK)
        rc = read_key(&j, "bos_token_id", ids->bos, sizeof ids->bos, err);
    if (rc == DDP_OK)
        rc = read_key(&j, "eos_token_id", ids->eos, sizeof ids->eos, err);
    json_doc_free(&j);
    return rc;
}

/* One id's line: the folder's text, else the class's default; None (null) where the default is
 * None too is left out. */
static void write_id(FILE *f, const char *name, const char *have, const char *class_default)
{
    const char *text = have[0] ? have : class_default;
    if (text && !(class_default == NULL && !strcmp(text, "null")))
        fprintf(f, "  \"%s\": %s,\n", name, text);
}

void hf_bos_token_id_write(FILE *f, const hf_token_ids *ids, const char *class_default)
{
    write_id(f, "bos_token_id", ids && ids->read ? ids->bos : "", class_default);
}

void hf_eos_token_id_write(FILE *f, const hf_token_ids *ids, const char *class_default)
{
    write_id(f, "eos_token_id", ids && ids->read ? ids->eos : "", class_default);
}
