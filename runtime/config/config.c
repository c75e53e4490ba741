/* config.c — config_load: defaults, then the YAML file, then `key.path=value` overrides.
 *
 * Owns the walk of YAML documents (libyaml document API) against the key table, the handling of
 * unknown and duplicate keys (with did-you-mean) and syntax errors. Turning one node into a value
 * lives in config_keys.c; cross-key checks in config_check.c; error locations and the message
 * format in config_errors.c. Reads only the one YAML file. */
#include "config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Closest key under the same section; else a key anywhere whose last part matches (a setting
 * written in the wrong section). NULL when nothing is close. */
static const char *suggest(const char *section, const char *name)
{
    char parent[CFG_KEY_MAX];
    const char *best = NULL;
    int best_d = 1 << 30;
    for (int i = 0; i < cfg_n_keys; i++) {
        cfg_key_parent(cfg_keys[i].path, parent, sizeof parent);
        if (strcmp(parent, section))
            continue;
        const char *leaf = cfg_key_leaf(cfg_keys[i].path);
        int lim = cfg_near_limit(leaf), d = cfg_edit_distance(name, leaf, lim);
        if (d <= lim && d < best_d)
            best = cfg_keys[i].path, best_d = d;
    }
    for (int i = 0; !best && i < cfg_n_keys; i++)
        if (cfg_edit_distance(name, cfg_key_leaf(cfg_keys[i].path), 0) == 0)
            best = cfg_keys[i].path;
    return best;
}

static int unknown_key(const cfg_loader *L, cfg_pos at, const char *section, const char *name)
{
    char path[CFG_KEY_MAX], allowed[512], parent[CFG_KEY_MAX];
    snprintf(path, sizeof path, "%s%s%.200s", section, *section ? "." : "", name);
    const char *near = suggest(section, name);
    if (near)
        return cfg_error(L, at, path, "unknown key, did you mean '%s'?", near);
    size_t used = 0;
    allowed[0] = '\0';
    for (int i = 0; i < cfg_n_keys && used < sizeof allowed; i++) {
        cfg_key_parent(cfg_keys[i].path, parent, sizeof parent);
        if (!strcmp(parent, section))
            used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "",
                                     cfg_key_leaf(cfg_keys[i].path));
    }
    return cfg_error(L, at, path, "unknown key (expected one of: %s)", allowed);
}

/* ---- walking documents ---- */

static int apply_mapping(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *map,
                         const char *section);

/* Sets key k from node (a section recurses). */
static int apply_node(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *node, int k)
{
    L->origin[k] = cfg_node_pos(s, node);
    if (cfg_keys[k].type != KT_SECTION)
        return cfg_parse_value(L, s, doc, node, &cfg_keys[k]);
    if (node->type != YAML_MAPPING_NODE) {
        char got[128];
        cfg_describe(node, got, sizeof got);
        return cfg_error(L, cfg_node_pos(s, node), cfg_keys[k].path, "expected a mapping, got %s", got);
    }
    return apply_mapping(L, s, doc, node, cfg_keys[k].path);
}

static int check_duplicate(const cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *map,
                           yaml_node_pair_t *pair, const char *path)
{
    yaml_node_t *key = yaml_document_get_node(doc, pair->key);
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < pair; q++) {
        yaml_node_t *prev = yaml_document_get_node(doc, q->key);
        if (prev->type == YAML_SCALAR_NODE && !strcmp((char *)prev->data.scalar.value, (char *)key->data.scalar.value)) {
            cfg_pos first = cfg_node_pos(s, prev);
            return cfg_error(L, cfg_node_pos(s, key), path, "duplicate key (first given at line %d, column %d)",
                             first.line, first.col);
        }
    }
    return DDP_OK;
}

static int apply_mapping(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *map,
                         const char *section)
{
    char path[CFG_KEY_MAX];
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *key = yaml_document_get_node(doc, p->key);
        yaml_node_t *value = yaml_document_get_node(doc, p->value);
        if (key->type != YAML_SCALAR_NODE)
            return cfg_error(L, cfg_node_pos(s, key), *section ? section : NULL,
                             "expected a key name, got %s", key->type == YAML_SEQUENCE_NODE ? "a list" : "a mapping");
        const char *name = (const char *)key->data.scalar.value;
        snprintf(path, sizeof path, "%s%s%.200s", section, *section ? "." : "", name);
        int rc = check_duplicate(L, s, doc, map, p, path);
        if (rc)
            return rc;
        /* dotted names would make `optimizer.lr: 1` and `optimizer: {lr: 2}` silently race */
        int k = strchr(name, '.') ? -1 : cfg_key_find(path);
        if (k < 0)
            return unknown_key(L, cfg_node_pos(s, key), section, name);
        rc = apply_node(L, s, doc, value, k);
        if (rc)
            return rc;
    }
    return DDP_OK;
}

static int syntax_error(const cfg_loader *L, const yaml_parser_t *p, cfg_src s)
{
    if (p->error == YAML_MEMORY_ERROR)
        return ddp_fail(L->err, DDP_ERUNTIME, "%s: libyaml: out of memory",
                        s.source ? "override" : L->file);
    if (p->error == YAML_READER_ERROR) /* bad encoding: libyaml gives a byte offset, no mark */
        return cfg_error(L, (cfg_pos){s.source, 1, 1}, NULL, "YAML read error at byte %zu: %s",
                         p->problem_offset, p->problem ? p->problem : "unknown");
    cfg_pos at = cfg_mark_pos(&s, p->problem_mark);
    cfg_pos ctx = cfg_mark_pos(&s, p->context_mark);
    if (p->context)
        return cfg_error(L, at, NULL, "YAML syntax error: %s (%s at line %d, column %d)",
                         p->problem ? p->problem : "unknown", p->context, ctx.line, ctx.col);
    return cfg_error(L, at, NULL, "YAML syntax error: %s", p->problem ? p->problem : "unknown");
}

static int apply_file_document(cfg_loader *L, yaml_parser_t *parser, yaml_document_t *doc)
{
    const cfg_src src = {0, 0};
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root)
        return cfg_error(L, (cfg_pos){0, 1, 1}, NULL, "expected a mapping of settings, got an empty file");
    if (root->type != YAML_MAPPING_NODE) {
        char got[128];
        cfg_describe(root, got, sizeof got);
        return cfg_error(L, cfg_node_pos(&src, root), NULL, "expected a mapping of settings at the top level, got %s", got);
    }
    int rc = apply_mapping(L, &src, doc, root, "");
    if (rc)
        return rc;
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next))
        return syntax_error(L, parser, src);
    yaml_node_t *extra = yaml_document_get_root_node(&next);
    if (extra)
        rc = cfg_error(L, cfg_node_pos(&src, extra), NULL, "expected one YAML document, got a second one");
    yaml_document_delete(&next);
    return rc;
}

static int apply_file(cfg_loader *L, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return ddp_fail(L->err, DDP_EUSAGE, "%s: cannot read config: is a directory", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ddp_fail(L->err, DDP_EUSAGE, "%s: cannot read config: %s", path, strerror(errno));
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        fclose(f);
        return ddp_fail(L->err, DDP_ERUNTIME, "%s: libyaml: cannot initialize parser", path);
    }
    yaml_parser_set_input_file(&parser, f);
    yaml_document_t doc;
    int rc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = syntax_error(L, &parser, (cfg_src){0, 0});
    } else {
        rc = apply_file_document(L, &parser, &doc);
        yaml_document_delete(&doc);
    }
    if (!rc && ferror(f))
        rc = ddp_fail(L->err, DDP_EUSAGE, "%s: cannot read config: %s", path, strerror(errno));
    yaml_parser_delete(&parser);
    fclose(f);
    return rc;
}

/* ---- overrides ---- */

/* Resolves the dotted key of `key.path=value`; marks sections on the way as set here. */
static int override_key(cfg_loader *L, int n, const char *text, size_t key_len, int *k_out)
{
    char path[CFG_KEY_MAX] = "", section[CFG_KEY_MAX] = "";
    if (key_len >= CFG_KEY_MAX)
        return cfg_error(L, (cfg_pos){n, 1, 1}, NULL, "expected key.path=value, got a %zu-byte key", key_len);
    size_t start = 0;
    int k = -1;
    while (start <= key_len) {
        size_t end = start;
        while (end < key_len && text[end] != '.') end++;
        cfg_pos at = {n, 1, (int)start + 1};
        if (end == start)
            return cfg_error(L, at, NULL, "expected key.path=value, got \"%s\" (empty key part)", text);
        if (k >= 0 && cfg_keys[k].type != KT_SECTION)
            return cfg_error(L, at, cfg_keys[k].path, "is a setting, not a section: no key '%.*s' under it",
                             (int)(end - start), text + start);
        char name[CFG_KEY_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(end - start), text + start);
        snprintf(path, sizeof path, "%.*s", (int)end, text);
        k = cfg_key_find(path);
        if (k < 0)
            return unknown_key(L, at, section, name);
        L->origin[k] = at;
        snprintf(section, sizeof section, "%s", path);
        start = end + 1;
    }
    *k_out = k;
    return DDP_OK;
}

static int apply_override(cfg_loader *L, int n, const char *text)
{
    const char *eq = strchr(text, '=');
    if (!eq || eq == text)
        return cfg_error(L, (cfg_pos){n, 1, 1}, NULL, "expected key.path=value, got \"%.200s\"", text);
    int k = -1;
    int rc = override_key(L, n, text, (size_t)(eq - text), &k);
    if (rc)
        return rc;
    const cfg_src src = {n, (int)(eq - text) + 1};
    const char *value = eq + 1;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return ddp_fail(L->err, DDP_ERUNTIME, "override %d: libyaml: cannot initialize parser", n);
    yaml_parser_set_input_string(&parser, (const unsigned char *)value, strlen(value));
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) {
        rc = syntax_error(L, &parser, src);
    } else {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        char expect[256];
        cfg_expect(&cfg_keys[k], expect, sizeof expect);
        if (root)
            rc = apply_node(L, &src, &doc, root, k);
        else
            rc = cfg_error(L, (cfg_pos){n, 1, src.col_offset + 1}, cfg_keys[k].path,
                           "expected %s, got nothing", expect);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* ---- entry point ---- */

int config_load(const char *path, int n_overrides, char *const overrides[], config *out, ddp_err *err)
{
    config work;
    cfg_loader L = {.c = &work, .err = err, .file = path ? path : "<no file>"};
    cfg_defaults(&work);
    for (int i = 0; i < CFG_MAX_KEYS; i++)
        L.origin[i] = (cfg_pos){-1, 0, 0};
    if (path) {
        if (strlen(path) >= sizeof work.source)
            return ddp_fail(err, DDP_EUSAGE, "%.200s...: config path too long", path);
        snprintf(work.source, sizeof work.source, "%s", path);
        int rc = apply_file(&L, path);
        if (rc)
            return rc;
    }
    for (int i = 0; i < n_overrides; i++) {
        int rc = apply_override(&L, i + 1, overrides[i]);
        if (rc)
            return rc;
    }
    int rc = cfg_check(&L);
    if (rc)
        return rc;
    memcpy(out, &work, sizeof work); /* with its zeroed padding, so equal configs memcmp equal */
    return DDP_OK;
}
