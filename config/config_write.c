/* config_write.c — the resolved config as YAML, the resume hash, and value formatting.
 *
 * config_write_resolved emits every key in table order through libyaml's emitter (so quoting
 * and escaping are libyaml's), numbers in the shortest text that reads back exactly, and
 * replaces the target whole and durably (runtime/base/replace_file.h); config_anchor_paths makes
 * a record's relative paths whole first.
 * config_hash covers only what a bit-exact resume depends on; the same settings as text go into
 * checkpoints, so that a refused resume can name what changed. This file must not parse YAML or
 * validate values. */
#include "config_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/exact_double.h"
#include "runtime/base/fnv1a.h"
#include "runtime/base/replace_file.h"
#include "runtime/base/utf8.h"

static void format_list(const char *const *items, int count, char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "[");
    for (int i = 0; i < count && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", items[i]);
    if (used < n)
        snprintf(out + used, n - used, "]");
}

void cfg_format_value(const config *c, const cfg_key *k, char *out, size_t n)
{
    const char *field = (const char *)c + k->off;
    char items[CFG_LIST_MAX][32];
    const char *ptrs[CFG_LIST_MAX];
    switch (k->type) {
    case KT_SECTION: snprintf(out, n, "{}"); break;
    case KT_INT: snprintf(out, n, "%lld", (long long)*(const int64_t *)field); break;
    case KT_UINT: snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case KT_NUM: format_double_exact(*(const double *)field, out, n); break;
    case KT_BOOL: snprintf(out, n, "%s", *(const bool *)field ? "true" : "false"); break;
    case KT_STR: case KT_OPT_PATH: case KT_COMMAND: snprintf(out, n, "%s", field); break;
    case KT_ENUM: snprintf(out, n, "%s", k->choices[*(const int *)field]); break;
    case KT_SIGNAL: snprintf(out, n, "%s", cfg_signal_name(c->checkpoint.stop_signal)); break;
    case KT_RESUME:
        snprintf(out, n, "%s", c->checkpoint.resume == RESUME_AUTO ? "auto"
                              : c->checkpoint.resume == RESUME_NEVER ? "never" : c->checkpoint.resume_path);
        break;
    case KT_HIDDEN:
        for (int i = 0; i < cfg_list_count(c, k); i++) {
            snprintf(items[i], sizeof items[i], "%lld", (long long)cfg_list_entries(c, k)[i]);
            ptrs[i] = items[i];
        }
        format_list(ptrs, cfg_list_count(c, k), out, n);
        break;
    case KT_BETAS:
        format_double_exact(c->optimizer.beta1, items[0], sizeof items[0]);
        format_double_exact(c->optimizer.beta2, items[1], sizeof items[1]);
        ptrs[0] = items[0], ptrs[1] = items[1];
        format_list(ptrs, 2, out, n);
        break;
    }
}

/* ---- writer ---- */

typedef struct writer { yaml_emitter_t em; yaml_event_t ev; } writer;

static int emit(writer *w) { return yaml_emitter_emit(&w->em, &w->ev) ? 0 : -1; }

static int emit_scalar(writer *w, const char *text, yaml_scalar_style_t style)
{
    if (!yaml_scalar_event_initialize(&w->ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), 1, 1, style))
        return -1;
    return emit(w);
}

static int emit_list(writer *w, const char *const *items, int count)
{
    if (!yaml_sequence_start_event_initialize(&w->ev, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE) || emit(w))
        return -1;
    for (int i = 0; i < count; i++)
        if (emit_scalar(w, items[i], YAML_PLAIN_SCALAR_STYLE))
            return -1;
    return yaml_sequence_end_event_initialize(&w->ev) ? emit(w) : -1;
}

static int emit_value(writer *w, const config *c, const cfg_key *k)
{
    char text[CFG_PATH_MAX], items[CFG_LIST_MAX][32];
    const char *ptrs[CFG_LIST_MAX];
    if (k->type == KT_HIDDEN || k->type == KT_BETAS) {
        int count = k->type == KT_HIDDEN ? cfg_list_count(c, k) : 2;
        for (int i = 0; i < count; i++) {
            if (k->type == KT_HIDDEN)
                snprintf(items[i], sizeof items[i], "%lld", (long long)cfg_list_entries(c, k)[i]);
            else
                format_double_exact(i ? c->optimizer.beta2 : c->optimizer.beta1, items[i], sizeof items[i]);
            ptrs[i] = items[i];
        }
        return emit_list(w, ptrs, count);
    }
    cfg_format_value(c, k, text, sizeof text);
    bool is_path = k->type == KT_STR || k->type == KT_OPT_PATH || k->type == KT_COMMAND ||
                   (k->type == KT_RESUME && c->checkpoint.resume == RESUME_PATH);
    return emit_scalar(w, text, is_path ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE);
}

/* Walks the depth-first key table, opening and closing block mappings as sections change. Other
 * model kinds' sections are left out: the file would be rejected with them. */
static int emit_config(writer *w, const config *c)
{
    char open[4][CFG_KEY_MAX], parent[CFG_KEY_MAX];
    int depth = 0;
    if (!yaml_stream_start_event_initialize(&w->ev, YAML_UTF8_ENCODING) || emit(w) ||
        !yaml_document_start_event_initialize(&w->ev, NULL, NULL, NULL, 1) || emit(w) ||
        !yaml_mapping_start_event_initialize(&w->ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) || emit(w))
        return -1;
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++) {
        if (!cfg_model_key_active(c, k))
            continue;
        cfg_key_parent(k->path, parent, sizeof parent);
        while (depth > 0 && strcmp(open[depth - 1], parent)) {
            depth--;
            if (!yaml_mapping_end_event_initialize(&w->ev) || emit(w))
                return -1;
        }
        if (emit_scalar(w, cfg_key_leaf(k->path), YAML_PLAIN_SCALAR_STYLE))
            return -1;
        if (k->type != KT_SECTION) {
            if (emit_value(w, c, k))
                return -1;
            continue;
        }
        if (!yaml_mapping_start_event_initialize(&w->ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) || emit(w))
            return -1;
        snprintf(open[depth++], sizeof open[0], "%s", k->path);
    }
    for (; depth >= 0; depth--) /* the open sections, then the top-level mapping */
        if (!yaml_mapping_end_event_initialize(&w->ev) || emit(w))
            return -1;
    if (!yaml_document_end_event_initialize(&w->ev, 1) || emit(w) ||
        !yaml_stream_end_event_initialize(&w->ev) || emit(w))
        return -1;
    return 0;
}

typedef struct resolved {
    const config *c;
    const char *path;
} resolved;

/* replace_file_stream's writer */
/* Whether YAML reads code point cp (above U+007F) as a printable character of a comment: not a C1
 * control, a line break (U+0085, U+2028, U+2029), the byte order mark or a non-character. */
static bool comment_char(unsigned cp)
{
    return cp >= 0xA0 && cp != 0x2028 && cp != 0x2029 && cp != 0xFEFF && cp != 0xFFFE && cp != 0xFFFF;
}

/* text in a YAML comment: printable ASCII and the characters comment_char allows as they are, any
 * other byte (a newline would end the comment, Latin-1 fails YAML's UTF-8) as \xNN, so the file
 * reads again. */
static void put_comment_text(FILE *f, const char *text)
{
    const unsigned char *end = (const unsigned char *)text + strlen(text);
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        uint32_t cp = 0;
        size_t n = *p >= 0x80 ? utf8_next(p, (size_t)(end - p), &cp) : *p >= 0x20 && *p < 0x7f ? 1 : 0;
        if (n > 1 && !comment_char(cp))
            n = 0;
        if (n)
            fwrite(p, 1, n, f), p += n;
        else
            fprintf(f, "\\x%02X", *p++);
    }
}

static int write_to(FILE *f, void *ctx, ddp_err *err)
{
    const config *c = ((const resolved *)ctx)->c;
    const char *path = ((const resolved *)ctx)->path;
    writer w;
    if (!yaml_emitter_initialize(&w.em))
        return ddp_fail(err, DDP_ERUNTIME, "%s: libyaml: cannot initialize emitter", path);
    fputs("# ddprun resolved config: every key, defaults included (from ", f);
    put_comment_text(f, c->source[0] ? c->source : "defaults");
    fputs(")\n", f);
    yaml_emitter_set_output_file(&w.em, f);
    yaml_emitter_set_unicode(&w.em, 1);
    yaml_emitter_set_width(&w.em, -1); /* never fold long paths */
    int rc = DDP_OK;
    if (emit_config(&w, c) || !yaml_emitter_flush(&w.em))
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: libyaml emitter: %s", path,
                      w.em.problem ? w.em.problem : "a value it cannot write (text that is not UTF-8?)");
    yaml_emitter_delete(&w.em);
    return rc;
}

int config_write_resolved(const config *c, const char *path, ddp_err *err)
{
    if (config_shape_pending(c)) /* its 0s would not load again */
        return ddp_fail(err, DDP_ERUNTIME, "%s: the model.%s shape is not yet taken from checkpoint.init_from",
                        path, model_kind_names[c->model.kind]);
    return replace_file_stream(path, write_to, &(resolved){.c = c, .path = path}, err);
}

/* The text of k in c that names a file or folder, or NULL: the path keys, and checkpoint.resume
 * when it holds a path. */
static char *path_value(config *c, const cfg_key *k)
{
    if (k->type == KT_STR || k->type == KT_OPT_PATH)
        return (char *)c + k->off;
    return k->type == KT_RESUME && c->checkpoint.resume == RESUME_PATH ? c->checkpoint.resume_path : NULL;
}

/* Whether s is well-formed UTF-8 (what YAML's text must be). */
static bool is_utf8(const char *s)
{
    size_t n = strlen(s), step;
    uint32_t cp;
    for (size_t i = 0; i < n; i += step)
        if (!(step = utf8_next((const uint8_t *)s + i, n - i, &cp)))
            return false;
    return true;
}

int config_anchor_paths(config *c, const char *dir, ddp_err *err)
{
    if (!is_utf8(dir)) /* its record would not be YAML: the job's paths are kept as given */
        return ddp_fail(err, DDP_EUSAGE, "the working directory's name is not UTF-8 text, which YAML must be");
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++) {
        char *value = cfg_model_key_active(c, k) ? path_value(c, k) : NULL;
        if (!value || !value[0] || value[0] == '/')
            continue;
        char joined[CFG_PATH_MAX];
        if (snprintf(joined, sizeof joined, "%s/%s", dir, value) >= (int)sizeof joined)
            return ddp_fail(err, DDP_EUSAGE, "%s %s in the working directory %s is a path longer than %d bytes",
                            k->path, value, dir, CFG_PATH_MAX - 1);
        memcpy(value, joined, strlen(joined) + 1);
    }
    return DDP_OK;
}

/* ---- resume hash ---- */

/* Whether the hash covers k in this run: keys whose value cannot affect it (SGD momentum under
 * AdamW, synthetic sizes with real data, another model kind's section) stay out, so changing them
 * does not block a resume. */
static bool hashed(const config *c, const cfg_key *k)
{
    if (!cfg_model_key_active(c, k))
        return false;
    switch (k->hash) {
    case HASH_NO: return false;
    case HASH_YES: return true;
    case HASH_SGD: return c->optimizer.kind == OPT_SGD;
    case HASH_ADAMW: return c->optimizer.kind != OPT_SGD;
    case HASH_DECAY: return c->optimizer.schedule.kind != SCHED_CONSTANT;
    case HASH_WSD: return c->optimizer.schedule.kind == SCHED_WSD;
    case HASH_SYNTHETIC: return c->data.kind == DATA_SYNTHETIC;
    case HASH_TOKENS: return c->data.kind == DATA_TOKENS;
    case HASH_PER_RANK: return c->train.global_batch == 0;
    case HASH_GLOBAL_BATCH: return c->train.global_batch > 0;
    case HASH_PACKED: return c->data.kind == DATA_TOKENS && c->data.packed;
    case HASH_KIND_RULE: return cfg_model_kind_rule_hashes(c, k);
    }
    return true;
}

/* k's value as the ranks compare it, into out; false for the keys left out. The text keys name
 * this host's files and commands, which may differ between hosts (another mount point): of an
 * optional one only whether it is set is compared (checkpoint.init_from on some ranks only would
 * split the start), of a resume path that it is one. */
static bool rank_value(const config *c, const cfg_key *k, char *out, size_t n)
{
    if (k->type == KT_SECTION || k->type == KT_STR)
        return false;
    if (k->type == KT_OPT_PATH || k->type == KT_COMMAND)
        snprintf(out, n, "%s", ((const char *)c + k->off)[0] ? "set" : "none");
    else if (k->type == KT_RESUME && c->checkpoint.resume == RESUME_PATH)
        snprintf(out, n, "a path");
    else
        cfg_format_value(c, k, out, n);
    return true;
}

/* k's value into out when the settings of `which` cover it. */
static bool covered(const config *c, settings_kind which, const cfg_key *k, char *out, size_t n)
{
    if (which == SETTINGS_RANKS)
        return rank_value(c, k, out, n);
    if (!hashed(c, k))
        return false;
    cfg_format_value(c, k, out, n);
    return true;
}

/* The i-th setting of `which` from *i on as "path=value\n" into line; its length, or -1 past the end. */
static int next_line(const config *c, settings_kind which, int *i, char *line, size_t cap)
{
    char value[CFG_PATH_MAX];
    for (const cfg_key *k; (k = cfg_key_at(*i)); (*i)++) {
        if (!covered(c, which, k, value, sizeof value))
            continue;
        (*i)++;
        return snprintf(line, cap, "%s=%s\n", k->path, value);
    }
    return -1;
}

/* FNV-1a 64 over "path=value\n" lines: the text form is independent of struct layout and
 * endianness, and numbers are in their exact shortest form. */
uint64_t config_hash(const config *c)
{
    uint64_t h = FNV1A64_BASIS;
    char line[CFG_PATH_MAX + CFG_KEY_MAX + 4];
    int len;
    for (int i = 0; (len = next_line(c, SETTINGS_RESUME, &i, line, sizeof line)) >= 0;)
        h = fnv1a64(h, line, (size_t)len);
    return h;
}

char *config_settings(const config *c, settings_kind which)
{
    char line[CFG_PATH_MAX + CFG_KEY_MAX + 4];
    size_t used = 0, cap = 4096;
    char *out = malloc(cap);
    int len;
    for (int i = 0; out && (len = next_line(c, which, &i, line, sizeof line)) >= 0;) {
        if (used + (size_t)len + 1 > cap) {
            char *grown = realloc(out, cap = 2 * cap + (size_t)len);
            if (!grown)
                free(out);
            out = grown;
        }
        if (out) {
            memcpy(out + used, line, (size_t)len);
            used += (size_t)len;
        }
    }
    if (out)
        out[used] = '\0';
    return out;
}

/* ---- what changed between two runs' settings ---- */

/* The value of path in lines (text[0..len) of "path=value\n"): its start, and its length in
 * *vlen; NULL when path is not there. */
static const char *setting_in(const char *text, size_t len, const char *path, size_t *vlen)
{
    size_t plen = strlen(path);
    for (const char *p = text, *end = text + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl : end;
        if ((size_t)(stop - p) > plen && !memcmp(p, path, plen) && p[plen] == '=') {
            *vlen = (size_t)(stop - p) - plen - 1;
            return p + plen + 1;
        }
        p = stop + 1;
    }
    return NULL;
}

/* Appends one item to the comma-separated list in out (cut at cap). */
static void add_item(char *out, size_t cap, int *named, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_item(char *out, size_t cap, int *named, const char *fmt, ...)
{
    size_t used = strlen(out);
    if (*named && used + 2 < cap)
        used += (size_t)snprintf(out + used, cap - used, ", ");
    va_list ap;
    va_start(ap, fmt);
    if (used < cap)
        vsnprintf(out + used, cap - used, fmt, ap);
    va_end(ap);
    (*named)++;
}

/* k's value in the other's (the saved run's, rank 0's) and in these settings: named when they
 * differ or one lacks it; `here` names these ("this run", "this rank"), `there` the other's. */
static void compare_key(const cfg_key *k, const char *saved, size_t saved_len, const char *now, size_t now_len,
                        const char *here, const char *there, char *out, size_t cap, int *named)
{
    size_t a_len = 0, b_len = 0;
    const char *a = setting_in(saved, saved_len, k->path, &a_len), *b = setting_in(now, now_len, k->path, &b_len);
    int al = a_len > 80 ? 80 : (int)a_len, bl = b_len > 80 ? 80 : (int)b_len; /* paths can be long */
    if (a && b && (a_len != b_len || memcmp(a, b, a_len)))
        add_item(out, cap, named, "%s %.*s (%s: %.*s)", k->path, al, a, here, bl, b);
    else if (a && !b)
        add_item(out, cap, named, "%s %.*s (not used by %s)", k->path, al, a, here);
    else if (!a && b)
        add_item(out, cap, named, "%s (not used by %s; %s: %.*s)", k->path, there, here, bl, b);
}

int config_settings_changes(const char *saved, size_t saved_len, const config *c, settings_kind which, char *out,
                            size_t cap)
{
    out[0] = '\0';
    char *now = config_settings(c, which);
    if (!saved || !now) {
        free(now);
        return 0;
    }
    bool ranks = which == SETTINGS_RANKS;
    int named = 0;
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++)
        if (ranks ? k->type != KT_SECTION : k->hash != HASH_NO)
            compare_key(k, saved, saved_len, now, strlen(now), ranks ? "this rank" : "this run",
                        ranks ? "rank 0" : "the saved run", out, cap, &named);
    free(now);
    return named;
}
