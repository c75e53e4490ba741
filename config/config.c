/* config.c — config_load: defaults, then the YAML file, then `key.path=value` overrides.
 *
 * Owns the walk of YAML documents (libyaml document API) against the key table, the handling of
 * unknown (config_suggest.c says which key was meant) and duplicate keys, syntax errors, and error locations
 * (FILE:LINE:COL, 1-based; overrides as `<override N>:1:COL`). Turning one node into a value
 * lives in config_value.c; cross-key checks in config_check.c. Also owns the loader's bounds
 * (the file read up to a size limit, CFG_MAX_DEPTH nesting checked on libyaml's events before its
 * document loader runs) and YAML's explicit tags. Reads only the one YAML file. */
#include "config_internal.h"
#include "runtime/base/affix.h"
#include "runtime/base/dirs.h"
#include "runtime/base/read_whole.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- positions and messages ---- */

/* An override is one line of text, so its column is the character index into `key=value`
 * (libyaml puts the end of an unterminated value on a line 2 of its own). */
static cfg_pos mark_pos(const cfg_src *s, yaml_mark_t m)
{
    if (s->source > 0)
        return (cfg_pos){s->source, 1, (int)m.index + 1 + s->col_offset};
    return (cfg_pos){s->source, (int)m.line + 1, (int)m.column + 1};
}

cfg_pos cfg_node_pos(const cfg_src *s, const yaml_node_t *node)
{
    return mark_pos(s, node->start_mark);
}

int cfg_pos_later(cfg_pos a, cfg_pos b)
{
    if (a.source != b.source)
        return a.source > b.source;
    return a.line != b.line ? a.line > b.line : a.col > b.col;
}

/* "FILE:LINE:COL", "<override N>:LINE:COL" or "<default>:LINE:COL" for at. */
static void format_pos(const char *file, cfg_pos at, char *out, size_t n)
{
    if (at.source == 0)
        snprintf(out, n, "%s:%d:%d", file, at.line, at.col);
    else if (at.source < 0) /* a default of the key table (cfg_defaults) */
        snprintf(out, n, "<default>:%d:%d", at.line, at.col);
    else
        snprintf(out, n, "<override %d>:%d:%d", at.source, at.line, at.col);
}

void cfg_pos_label(const cfg_loader *L, cfg_pos at, char *out, size_t n) { format_pos(L->file, at, out, n); }

const char *config_where(const config *c, const char *key, char *out, size_t n)
{
    int k = cfg_key_find(key);
    cfg_pos at = k >= 0 ? c->origin[k] : (cfg_pos){-1, 0, 0};
    const char *file = c->source[0] ? c->source : "the config";
    if (at.source < 0 || at.line < 1) /* a default (or a config not loaded): the file is all there is to name */
        snprintf(out, n, "%s", file);
    else
        format_pos(file, at, out, n);
    return out;
}

int cfg_error(const cfg_loader *L, cfg_pos at, const char *key, const char *fmt, ...)
{
    char where[CFG_PATH_MAX + 64], what[DDP_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cfg_pos_label(L, at, where, sizeof where);
    if (key)
        return ddp_fail(L->err, DDP_EUSAGE, "%s: %s: %s", where, key, what);
    return ddp_fail(L->err, DDP_EUSAGE, "%s: %s", where, what);
}

/* ---- bounds and explicit tags ---- */

/* "tag:yaml.org,2002:int" -> "!!int"; other tags as written. */
static const char *tag_shown(const char *tag, char *buf, size_t n)
{
    static const char core[] = "tag:yaml.org,2002:";
    if (has_prefix(tag, core))
        snprintf(buf, n, "!!%s", tag + sizeof core - 1);
    else
        snprintf(buf, n, "%s", tag);
    return buf;
}

/* Whether a scalar holds a NUL byte (YAML's "\0" escape): every reader of scalars goes by C
 * strings, so "cpu\0x" would be taken as cpu and a path cut short at the NUL. */
static bool scalar_has_nul(const yaml_node_t *node)
{
    return node->type == YAML_SCALAR_NODE && memchr(node->data.scalar.value, '\0', node->data.scalar.length);
}

int cfg_check_tag(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key)
{
    if (scalar_has_nul(nd)) /* here, as every value and list item is checked here */
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected text without NUL bytes, got \"%.80s\\0...\"",
                         (const char *)nd->data.scalar.value);
    const char *tag = nd->tag ? (const char *)nd->tag : "";
    char shown[128];
    if (nd->type == YAML_SCALAR_NODE) {
        static const char *const scalars[] = {YAML_STR_TAG, YAML_INT_TAG, YAML_FLOAT_TAG, YAML_BOOL_TAG, YAML_NULL_TAG};
        for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++)
            if (!strcmp(tag, scalars[i]))
                return DDP_OK;
        return cfg_error(L, cfg_node_pos(s, nd), key, "unsupported tag %s (the core tags !!str, !!int, !!float, "
                         "!!bool and !!null are)", tag_shown(tag, shown, sizeof shown));
    }
    const char *want = nd->type == YAML_SEQUENCE_NODE ? YAML_SEQ_TAG : YAML_MAP_TAG;
    if (!strcmp(tag, want))
        return DDP_OK;
    return cfg_error(L, cfg_node_pos(s, nd), key, "tagged %s, but it is a %s", tag_shown(tag, shown, sizeof shown),
                     nd->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
}

/* Where the nodes with an explicit tag start (byte offsets, ascending): libyaml's document
 * loader gives every untagged scalar the tag !!str, so `!!str 32` cannot be told from 32 there. */
typedef struct tag_marks {
    size_t *at;
    size_t n, cap;
} tag_marks;

static int note_tag(tag_marks *t, size_t at, ddp_err *err)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        size_t *grown = realloc(t->at, cap * sizeof *grown);
        if (!grown)
            return ddp_fail(err, DDP_ERUNTIME, "config: out of memory");
        t->at = grown;
        t->cap = cap;
    }
    t->at[t->n++] = at;
    return DDP_OK;
}

static bool tagged_at(const tag_marks *t, size_t at)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->at[mid] == at)
            return true;
        if (t->at[mid] < at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static int syntax_error(const cfg_loader *L, const yaml_parser_t *p, cfg_src s);

/* One pass over the events of text before libyaml's document loader sees it: refuses lists and
 * mappings nested deeper than CFG_MAX_DEPTH (the loader's time grows with the square of the
 * depth) at the first one too deep, and notes the explicitly tagged nodes. */
static int scan_events(cfg_loader *L, const cfg_src *s, const char *text, size_t len, tag_marks *tags)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return ddp_fail(L->err, DDP_ERUNTIME, "libyaml: cannot initialize parser");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, rc = DDP_OK;
    for (bool done = false; !done && rc == DDP_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = syntax_error(L, &p, *s);
            break;
        }
        const yaml_char_t *tag = NULL;
        if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
            tag = ev.type == YAML_SEQUENCE_START_EVENT ? ev.data.sequence_start.tag : ev.data.mapping_start.tag;
            depth++;
        } else if (ev.type == YAML_SEQUENCE_END_EVENT || ev.type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (ev.type == YAML_SCALAR_EVENT) {
            tag = ev.data.scalar.tag;
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        if (depth > CFG_MAX_DEPTH)
            rc = cfg_error(L, mark_pos(s, ev.start_mark), NULL, "lists and mappings nested deeper than %d levels",
                           CFG_MAX_DEPTH);
        else if (ev.type == YAML_ALIAS_EVENT) /* libyaml's loader would give it the anchor's marks */
            rc = cfg_error(L, mark_pos(s, ev.start_mark), NULL, "YAML alias *%s: not taken (errors would point "
                           "at its anchor); write the value", (const char *)ev.data.alias.anchor);
        else if (tag)
            rc = note_tag(tags, ev.start_mark.index, L->err);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* An explicit core tag decides how its scalar reads: !!str (and the non-specific `!`) as quoted
 * text, !!int, !!float, !!bool and !!null as the plain scalar of that type would. */
static void apply_tags(yaml_document_t *doc, const tag_marks *tags)
{
    for (yaml_node_t *nd = doc->nodes.start; tags->n && nd < doc->nodes.top; nd++) {
        if (nd->type != YAML_SCALAR_NODE || !tagged_at(tags, nd->start_mark.index))
            continue;
        const char *tag = (const char *)nd->tag;
        if (!strcmp(tag, YAML_STR_TAG))
            nd->data.scalar.style = YAML_SINGLE_QUOTED_SCALAR_STYLE;
        else if (!strcmp(tag, YAML_INT_TAG) || !strcmp(tag, YAML_FLOAT_TAG) || !strcmp(tag, YAML_BOOL_TAG) ||
                 !strcmp(tag, YAML_NULL_TAG))
            nd->data.scalar.style = YAML_PLAIN_SCALAR_STYLE;
    }
}

/* Parses text (bounded, in memory) into doc: the event pass, then the document loader, then the
 * tags applied. DDP_OK with doc to delete, or an error with nothing to delete. */
static int load_text(cfg_loader *L, const cfg_src *s, const char *text, size_t len, yaml_parser_t *parser,
                     yaml_document_t *doc)
{
    tag_marks tags = {0};
    int rc = scan_events(L, s, text, len, &tags);
    if (rc == DDP_OK && !yaml_parser_load(parser, doc))
        rc = syntax_error(L, parser, *s);
    if (rc == DDP_OK)
        apply_tags(doc, &tags);
    free(tags.at);
    return rc;
}

/* ---- walking documents ---- */

/* A known key written with dots in a file: refused, showing it nested ("schedule.kind" as
 * "schedule: {kind: ...}"); `key.path=value` is the command line's form. */
static int dotted_key(cfg_loader *L, cfg_pos at, const char *path, const char *name)
{
    char nested[CFG_KEY_MAX * 2];
    size_t n = 0, depth = 0;
    for (const char *p = name; *p && n + 8 < sizeof nested; p++) {
        if (*p == '.')
            n += (size_t)snprintf(nested + n, sizeof nested - n, ": {"), depth++;
        else
            nested[n++] = *p;
    }
    n += (size_t)snprintf(nested + n, sizeof nested - n, ": ...");
    while (depth-- > 0 && n + 1 < sizeof nested)
        nested[n++] = '}';
    nested[n] = '\0';
    return cfg_error(L, at, path, "a dotted name in a file: write it nested, %s (the dotted form, key.path=value, "
                     "is the command line's)", nested);
}

static int apply_mapping(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *map,
                         const char *section);

/* What parser holds after the document just applied: nothing, or a second document, refused. */
static int no_second_document(cfg_loader *L, yaml_parser_t *parser, const cfg_src *src, const char *key)
{
    yaml_document_t next;
    if (!yaml_parser_load(parser, &next))
        return syntax_error(L, parser, *src);
    yaml_node_t *extra = yaml_document_get_root_node(&next);
    int rc = extra ? cfg_error(L, cfg_node_pos(src, extra), key, "expected one YAML document, got a second one")
                   : DDP_OK;
    yaml_document_delete(&next);
    return rc;
}

/* Sets key k from node (a section recurses). */
static int apply_node(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *node, int k)
{
    const cfg_key *key = cfg_key_at(k);
    L->c->origin[k] = cfg_node_pos(s, node);
    L->in_file[k] |= s->source == 0;
    int rc = cfg_check_tag(L, s, node, key->path);
    if (rc)
        return rc;
    if (key->type != KT_SECTION)
        return cfg_parse_value(L, s, doc, node, key);
    if (node->type != YAML_MAPPING_NODE) {
        char got[128];
        cfg_describe(node, got, sizeof got);
        return cfg_error(L, cfg_node_pos(s, node), key->path, "expected a mapping, got %s", got);
    }
    return apply_mapping(L, s, doc, node, key->path);
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
        char shown[128];
        if (scalar_has_nul(key))
            return cfg_error(L, cfg_node_pos(s, key), *section ? section : NULL,
                             "expected a key name without NUL bytes, got \"%.80s\\0...\"", name);
        int tag_rc = cfg_check_tag(L, s, key, *section ? section : NULL);
        if (!tag_rc && key->tag && strcmp((const char *)key->tag, YAML_STR_TAG))
            tag_rc = cfg_error(L, cfg_node_pos(s, key), *section ? section : NULL, "key name %.80s tagged %s: a key "
                               "name is text", name, tag_shown((const char *)key->tag, shown, sizeof shown));
        if (tag_rc)
            return tag_rc;
        snprintf(path, sizeof path, "%s%s%.200s", section, *section ? "." : "", name);
        int rc = check_duplicate(L, s, doc, map, p, path);
        if (rc)
            return rc;
        /* dotted names would make `optimizer.lr: 1` and `optimizer: {lr: 2}` silently race */
        bool dotted = strchr(name, '.') != NULL;
        if (dotted && cfg_key_find(path) >= 0)
            return dotted_key(L, cfg_node_pos(s, key), path, name);
        int k = dotted ? -1 : cfg_key_find(path);
        if (k < 0)
            return cfg_unknown_key(L, cfg_node_pos(s, key), section, name);
        rc = apply_node(L, s, doc, value, k);
        if (rc)
            return rc;
    }
    return DDP_OK;
}

/* Where the byte libyaml's reader stopped at lies in the text parsed (always a string here): its
 * line, and its column and index in characters, as a mark (libyaml's marks count characters). */
static yaml_mark_t offset_mark(const yaml_parser_t *p)
{
    yaml_mark_t m = {0};
    const unsigned char *t = p->input.string.start, *end = p->input.string.end;
    for (size_t i = 0; t && i < p->problem_offset && t + i < end; i++) {
        if ((t[i] & 0xC0) == 0x80) /* not a character's first byte */
            continue;
        m.index++;
        if (t[i] == '\n')
            m.line++, m.column = 0;
        else
            m.column++;
    }
    return m;
}

static int syntax_error(const cfg_loader *L, const yaml_parser_t *p, cfg_src s)
{
    if (p->error == YAML_MEMORY_ERROR)
        return ddp_fail(L->err, DDP_ERUNTIME, "%s: libyaml: out of memory",
                        s.source ? "override" : L->file);
    if (p->error == YAML_READER_ERROR) /* bad encoding: libyaml gives a byte offset, no mark */
        return cfg_error(L, mark_pos(&s, offset_mark(p)), NULL, "YAML read error at byte %zu: %s",
                         p->problem_offset, p->problem ? p->problem : "unknown");
    cfg_pos at = mark_pos(&s, p->problem_mark);
    cfg_pos ctx = mark_pos(&s, p->context_mark);
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
    int rc = cfg_check_tag(L, &src, root, NULL);
    if (rc == DDP_OK)
        rc = apply_mapping(L, &src, doc, root, "");
    return rc ? rc : no_second_document(L, parser, &src, NULL);
}

/* The whole file, read up to max_bytes: a larger file, or a FIFO or device that never ends, is
 * refused once the limit is passed. *text is NUL-terminated; free it. */
static int read_bounded(cfg_loader *L, const char *path, size_t max_bytes, char **text, size_t *len)
{
    if (path_is_dir(path))
        return ddp_fail(L->err, DDP_EUSAGE, "%s: cannot read config: is a directory", path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ddp_fail(L->err, DDP_EUSAGE, "%s: cannot read config: %s", path, strerror(errno));
    int rc = read_whole(f, path, max_bytes, text, len, L->err);
    fclose(f);
    if (rc == DDP_EUSAGE) /* larger than the limit */
        snprintf(L->err->msg + strlen(L->err->msg), sizeof L->err->msg - strlen(L->err->msg),
                 "; a config is a few kilobytes");
    return rc == DDP_OK ? DDP_OK : DDP_EUSAGE; /* a config that cannot be read is a usage error: exit 2 */
}

static int apply_file(cfg_loader *L, const char *path, size_t max_bytes)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_bounded(L, path, max_bytes, &text, &len);
    if (rc)
        return rc;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        free(text);
        return ddp_fail(L->err, DDP_ERUNTIME, "%s: libyaml: cannot initialize parser", path);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    const cfg_src src = {0, 0};
    yaml_document_t doc;
    rc = load_text(L, &src, text, len, &parser, &doc);
    if (rc == DDP_OK) {
        rc = apply_file_document(L, &parser, &doc);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    free(text);
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
        if (k >= 0 && cfg_key_at(k)->type != KT_SECTION)
            return cfg_error(L, at, cfg_key_at(k)->path, "is a setting, not a section: no key '%.*s' under it",
                             (int)(end - start), text + start);
        char name[CFG_KEY_MAX];
        snprintf(name, sizeof name, "%.*s", (int)(end - start), text + start);
        snprintf(path, sizeof path, "%.*s", (int)end, text);
        k = cfg_key_find(path);
        if (k < 0)
            return cfg_unknown_key(L, at, section, name);
        L->c->origin[k] = at;
        snprintf(section, sizeof section, "%s", path);
        start = end + 1;
    }
    *k_out = k;
    return DDP_OK;
}

/* A shell's word `key=/data/run #2` is a value and a YAML comment, which would drop the rest of
 * what the user typed without a word: refused, so that it is quoted. end: where a node ends. */
static int no_comment_at(const cfg_loader *L, const cfg_src *src, const char *value, size_t end, const char *key)
{
    size_t at = 0; /* end counts characters (libyaml's marks), at bytes */
    for (size_t chars = 0; value[at] && chars < end; chars++)
        do at++; while (((unsigned char)value[at] & 0xC0) == 0x80);
    size_t blank = strspn(value + at, " \t\r\n");
    if (value[at + blank] != '#')
        return DDP_OK;
    return cfg_error(L, (cfg_pos){src->source, 1, src->col_offset + (int)(end + blank) + 1}, key, "\"%.40s\" after "
                     "the value is a YAML comment, which drops it: quote the value if it belongs to it",
                     value + at + blank);
}

/* After the value and after each scalar in it: a block mapping or list (`key=path: /data #2`) ends
 * only where the text does, past the comment, so its scalars' ends are where one begins. */
static int no_comment_after(const cfg_loader *L, const cfg_src *src, yaml_document_t *doc, const char *value,
                            const char *key)
{
    int rc = no_comment_at(L, src, value, yaml_document_get_root_node(doc)->end_mark.index, key);
    for (yaml_node_t *nd = doc->nodes.start; !rc && nd < doc->nodes.top; nd++)
        if (nd->type == YAML_SCALAR_NODE)
            rc = no_comment_at(L, src, value, nd->end_mark.index, key);
    return rc;
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
    /* `key=` is what `key:` with nothing after it is in a file: a path or command set to none (the
     * empty text would parse to no document at all) */
    const cfg_key *key = cfg_key_at(k);
    if (!value[strspn(value, " \t")] && (key->type == KT_OPT_PATH || key->type == KT_COMMAND))
        value = "''";
    /* the same text in a file is a plain scalar: here it would begin a document of its own */
    if ((has_prefix(value, "---") || has_prefix(value, "...")) && strchr(" \t\r\n", value[3]))
        return cfg_error(L, (cfg_pos){n, 1, src.col_offset + 1}, cfg_key_at(k)->path, "a value beginning %.3s "
                         "would begin a YAML document: quote it", value);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return ddp_fail(L->err, DDP_ERUNTIME, "override %d: libyaml: cannot initialize parser", n);
    yaml_parser_set_input_string(&parser, (const unsigned char *)value, strlen(value));
    yaml_document_t doc;
    rc = load_text(L, &src, value, strlen(value), &parser, &doc);
    if (rc == DDP_OK) {
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        char expect[256];
        cfg_expect(cfg_key_at(k), expect, sizeof expect);
        if (root)
            rc = apply_node(L, &src, &doc, root, k);
        if (root && !rc)
            rc = no_second_document(L, &parser, &src, cfg_key_at(k)->path);
        if (root && !rc)
            rc = no_comment_after(L, &src, &doc, value, cfg_key_at(k)->path);
        else if (!root)
            rc = cfg_error(L, (cfg_pos){n, 1, src.col_offset + 1}, cfg_key_at(k)->path,
                           "expected %s, got nothing", expect);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    return rc;
}

/* ---- entry point ---- */

int config_load(const char *path, int n_overrides, char *const overrides[], config *out, ddp_err *err)
{
    return config_load_bounded(path, CFG_MAX_FILE_BYTES, n_overrides, overrides, out, err);
}

static int load(const char *path, size_t max_file_bytes, int n_overrides, char *const overrides[], bool record,
                config *out, ddp_err *err)
{
    if (cfg_key_count() > CFG_MAX_KEYS) /* a build error in spirit: the tables outgrew config.origin[] */
        return ddp_fail(err, DDP_ERUNTIME, "config: %d keys, raise CFG_MAX_KEYS (%d)", cfg_key_count(), CFG_MAX_KEYS);
    config work;
    cfg_loader L = {.c = &work, .err = err, .file = path ? path : "<no file>", .record = record};
    int drc = cfg_defaults(&L);
    if (drc)
        return drc;
    if (path) {
        if (strlen(path) >= sizeof work.source)
            return ddp_fail(err, DDP_EUSAGE, "%.200s...: config path too long", path);
        snprintf(work.source, sizeof work.source, "%s", path);
        int rc = apply_file(&L, path, max_file_bytes);
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

int config_load_bounded(const char *path, size_t max_file_bytes, int n_overrides, char *const overrides[],
                        config *out, ddp_err *err)
{
    return load(path, max_file_bytes, n_overrides, overrides, false, out, err);
}

int config_load_record(const char *path, config *out, ddp_err *err)
{
    return load(path, CFG_MAX_FILE_BYTES, 0, NULL, true, out, err);
}
