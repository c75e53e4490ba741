/* config_reference.c — the config reference (docs/config-reference.md) as Markdown, made from the
 * key table: one row per key with its type, default, allowed values, description and whether the
 * config hash covers it, between a fixed introduction and a note on the hash.
 *
 * Everything a row says comes from the key's row in config_keys.c or a model kind's (models/); the prose
 * here is only what holds for every key. tests/check_config_reference.sh compares the committed
 * document with this output. This file must not parse, check or write configs. */
#include "config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char intro[] =
    "# Config reference\n"
    "\n"
    "Every key of a job's config: its type, default, allowed values and meaning, and whether a\n"
    "bit-exact resume depends on it (**H**). `docs/config.md` says how a config file and its\n"
    "overrides are read and validated, and which settings may not be combined.\n"
    "\n"
    "This file is generated from the key table (`config/config_keys.c`,\n"
    "`config/config_model.c`) by `ddprun config reference`; edit the table, then regenerate\n"
    "it (`docs/config.md` shows the command).\n"
    "\n"
    "| Key | Type | Default | Allowed | Meaning |\n"
    "|---|---|---|---|---|\n";

/* The note on **H**; the model kinds' own conditions go between its two parts. */
static const char hash_note[] =
    "\n"
    "**H**: part of the config hash stored in checkpoints — the settings a bit-exact resume depends\n"
    "on (FNV-1a 64 over `key=value` lines of these keys). A model kind's name, \"(adamw)\", \"(sgd)\",\n"
    "\"(wsd)\", \"(synthetic)\", \"(tokens)\": only hashed when that choice is active; \"(decay)\": with a\n"
    "schedule that decays (cosine, linear or wsd); \"(per rank)\": only\n"
    "while `train.global_batch` is 0, \"(global batch)\": only when it is set, so a job with a global batch\n"
    "resumes on any world size that divides it; \"(packed)\": only when `data.packed` is true";
static const char hash_note_end[] =
    ". Not hashed:\n"
    "run directory, device/backend/bucket sizes, logging, evaluation, epochs/max_steps and all checkpoint\n"
    "settings.\n";

/* The choice a conditionally hashed key depends on, as the note above names it. */
static const char *const hash_condition[] = {
    [HASH_SGD] = "sgd", [HASH_ADAMW] = "adamw", [HASH_DECAY] = "decay", [HASH_WSD] = "wsd",
    [HASH_SYNTHETIC] = "synthetic", [HASH_TOKENS] = "tokens", [HASH_PER_RANK] = "per rank",
    [HASH_GLOBAL_BATCH] = "global batch", [HASH_PACKED] = "packed",
};

/* An integer bound as a reader takes it in: 2^31−1, 2^20 for powers of two from 2^20 up, else decimal. */
static void bound_text(int64_t v, char *out, size_t n)
{
    if (v == INT32_MAX) {
        snprintf(out, n, "2^31−1");
        return;
    }
    for (int e = 20; e < 63; e++)
        if (v == (int64_t)1 << e) {
            snprintf(out, n, "2^%d", e);
            return;
        }
    snprintf(out, n, "%lld", (long long)v);
}

static void int_range(int64_t lo, int64_t hi, char *out, size_t n)
{
    char a[32], b[32];
    bound_text(lo, a, sizeof a);
    bound_text(hi, b, sizeof b);
    if (hi == INT64_MAX)
        snprintf(out, n, "≥ %s", a);
    else
        snprintf(out, n, "%s … %s", a, b);
}

/* `a` \| `b` \| `c`, or with a prefix and separator of the caller's for placeholders. */
static void list_names(const char *const *names, const char *before, const char *after, const char *sep,
                       char *out, size_t n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s%s%s", i ? sep : "", before, names[i], after);
}

static const char *type_text(const cfg_key *k)
{
    switch (k->type) {
    case KT_INT: case KT_UINT: return "integer";
    case KT_NUM: return "number";
    case KT_BOOL: return "bool";
    case KT_STR: case KT_OPT_PATH: return "path";
    case KT_COMMAND: return "shell command";
    case KT_ENUM: case KT_SIGNAL: return "enum";
    case KT_HIDDEN: return "list of integers";
    case KT_BETAS: return "list of 2 numbers";
    case KT_RESUME: return "`auto` \\| `never` \\| path";
    case KT_SECTION: break;
    }
    return "mapping";
}

static void allowed_text(const cfg_key *k, char *out, size_t n)
{
    char elem[64], names[256];
    out[0] = '\0';
    switch (k->type) {
    case KT_INT: int_range(k->imin, k->imax, out, n); break;
    case KT_UINT: snprintf(out, n, "0 … 2^64−1"); break;
    case KT_NUM:
        snprintf(out, n, "%s", k->range == NR_POSITIVE ? "> 0" : k->range == NR_NONNEG ? "≥ 0"
                               : k->range == NR_UNIT   ? "[0, 1)" : k->range == NR_POLL ? "[0.1, 120]" : "(0, 1]");
        break;
    case KT_STR: snprintf(out, n, "non-empty"); break;
    case KT_OPT_PATH: snprintf(out, n, "a path, or `\"\"` for none"); break;
    case KT_COMMAND:
        list_names(k->choices, "`{", "}`", " ", names, sizeof names);
        snprintf(out, n, "placeholder%s %s", k->choices[0] && k->choices[1] ? "s" : "", names);
        break;
    case KT_ENUM: case KT_SIGNAL: list_names(k->choices, "`", "`", " \\| ", out, n); break;
    case KT_HIDDEN:
        int_range(k->imin, k->imax, elem, sizeof elem);
        snprintf(out, n, "1–%d entries, each %s", CFG_LIST_MAX, elem);
        break;
    case KT_BETAS: snprintf(out, n, "each in [0, 1)"); break;
    case KT_BOOL: case KT_RESUME: case KT_SECTION: break;
    }
}

/* " **H**", " **H** (adamw)", " **H** (mlp)" for a model kind's key, or "" when never hashed. */
static void hash_text(const cfg_key *k, char *out, size_t n)
{
    out[0] = '\0';
    if (k->hash == HASH_NO)
        return;
    const char *when = k->hash == HASH_YES         ? NULL
                       : k->hash == HASH_KIND_RULE ? cfg_model_kind_rule_name(k)
                                                   : hash_condition[k->hash];
    if (!when && k->type != KT_SECTION)
        when = cfg_model_section_name(k);
    if (when)
        snprintf(out, n, " **H** (%s)", when);
    else
        snprintf(out, n, " **H**");
}

int config_write_reference(FILE *out, ddp_err *err)
{
    char allowed[512], hash[64];
    fputs(intro, out);
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++) {
        if (k->type == KT_SECTION)
            continue;
        allowed_text(k, allowed, sizeof allowed);
        hash_text(k, hash, sizeof hash);
        fprintf(out, "| `%s` | %s | `%s` |%s%s%s| %s%s |\n", k->path, type_text(k), k->def, *allowed ? " " : "",
                allowed, " ", k->doc, hash);
    }
    fputs(hash_note, out);
    cfg_model_kind_rules_note(out);
    fputs(hash_note_end, out);
    if (fflush(out) != 0 || ferror(out))
        return ddp_fail(err, DDP_ERUNTIME, "writing the config reference: %s", strerror(errno));
    return DDP_OK;
}
