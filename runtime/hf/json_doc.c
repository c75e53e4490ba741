/* json_doc.c — JSON through libyaml (see json_doc.h).
 *
 * Owns the event pass that refuses what YAML has beyond JSON before the document loader runs (that
 * loader's time grows with the square of the nesting, hence the depth bound here), the checks on
 * the loaded nodes (JSON's literals and number grammar, string keys, no key twice in an object),
 * the lookups, and reading a small JSON file whole. Must not know what a document means. */
#include "json_doc.h"
#include "runtime/base/open_input.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- positions ---------------------------------------------------------------------------- */

static int fail_at(const json_doc *j, yaml_mark_t m, ddp_err *err, const char *what)
{
    return ddp_fail(err, DDP_EUSAGE, "%s:%zu:%zu: %s", j->name, m.line + 1, m.column + 1, what);
}

void json_where(const json_doc *j, const json_node *n, char *out, size_t size)
{
    snprintf(out, size, "%s:%zu:%zu", j->name, n->start_mark.line + 1, n->start_mark.column + 1);
}

static int syntax_error(const json_doc *j, const yaml_parser_t *p, ddp_err *err)
{
    char what[256];
    snprintf(what, sizeof what, "not valid JSON: %s%s%s", p->problem ? p->problem : "parse error",
             p->context ? " " : "", p->context ? p->context : "");
    return fail_at(j, p->problem_mark, err, what);
}

/* ---- the event pass ----------------------------------------------------------------------- */

/* What one event has that JSON lacks, or NULL. *depth follows the nesting. */
static const char *non_json(const yaml_event_t *ev, int *depth, int *documents)
{
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++*documents > 1)
            return "more than one document";
        return ev->data.document_start.implicit ? NULL : "a YAML document marker (---) or directive";
    case YAML_ALIAS_EVENT: return "a YAML alias";
    case YAML_SCALAR_EVENT:
        if (ev->data.scalar.anchor || ev->data.scalar.tag)
            return "a YAML anchor or tag";
        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE && ev->data.scalar.style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
            return "a string not in double quotes";
        return NULL;
    case YAML_SEQUENCE_START_EVENT:
        if (ev->data.sequence_start.anchor || ev->data.sequence_start.tag)
            return "a YAML anchor or tag";
        if (ev->data.sequence_start.style != YAML_FLOW_SEQUENCE_STYLE)
            return "a YAML block list (JSON arrays are [...])";
        return ++*depth > JSON_MAX_DEPTH ? "arrays and objects nested too deep" : NULL;
    case YAML_MAPPING_START_EVENT:
        if (ev->data.mapping_start.anchor || ev->data.mapping_start.tag)
            return "a YAML anchor or tag";
        if (ev->data.mapping_start.style != YAML_FLOW_MAPPING_STYLE)
            return "a YAML block mapping (JSON objects are {...})";
        return ++*depth > JSON_MAX_DEPTH ? "arrays and objects nested too deep" : NULL;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: --*depth; return NULL;
    default: return NULL;
    }
}

static int scan_events(const json_doc *j, const char *text, size_t len, ddp_err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return ddp_fail(err, DDP_ERUNTIME, "%s: libyaml: cannot initialize a parser", j->name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int depth = 0, documents = 0, rc = DDP_OK;
    for (bool done = false; !done && !rc;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = syntax_error(j, &p, err);
            break;
        }
        const char *bad = non_json(&ev, &depth, &documents);
        if (bad) {
            char what[160];
            snprintf(what, sizeof what, "not JSON: %s", bad);
            rc = fail_at(j, ev.start_mark, err, what);
        }
        done = ev.type == YAML_STREAM_END_EVENT;
        if (done && !rc && documents == 0)
            rc = fail_at(j, ev.start_mark, err, "no JSON value (empty text)");
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ---- node checks -------------------------------------------------------------------------- */

/* JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        if (*++s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        if (*++s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

json_kind json_kind_of(const json_node *n)
{
    if (n->type == YAML_MAPPING_NODE)
        return JSON_OBJECT;
    if (n->type == YAML_SEQUENCE_NODE)
        return JSON_ARRAY;
    if (n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE)
        return JSON_STRING;
    const char *s = (const char *)n->data.scalar.value;
    if (!strcmp(s, "null"))
        return JSON_NULL;
    if (!strcmp(s, "true") || !strcmp(s, "false"))
        return JSON_BOOL;
    return JSON_NUMBER; /* json_doc_parse refused every other plain scalar */
}

const char *json_kind_name(json_kind k)
{
    static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[k];
}

static int cmp_key(const void *a, const void *b)
{
    const yaml_node_t *x = *(yaml_node_t *const *)a, *y = *(yaml_node_t *const *)b;
    int c = strcmp((const char *)x->data.scalar.value, (const char *)y->data.scalar.value);
    return c ? c : (x->start_mark.index > y->start_mark.index) - (x->start_mark.index < y->start_mark.index);
}

/* Every key a string, none twice (sorted copies of the key nodes, so large headers stay fast). */
static int check_object(const json_doc *j, yaml_node_t *obj, ddp_err *err)
{
    size_t n = json_object_size(obj);
    if (n == 0)
        return DDP_OK;
    yaml_node_t **keys = malloc(n * sizeof *keys);
    if (!keys)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", j->name);
    int rc = DDP_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        keys[i] = yaml_document_get_node((yaml_document_t *)&j->doc, obj->data.mapping.pairs.start[i].key);
        if (keys[i]->type != YAML_SCALAR_NODE || keys[i]->data.scalar.style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
            rc = fail_at(j, keys[i]->start_mark, err, "not JSON: an object key that is not a string");
    }
    if (!rc) {
        qsort(keys, n, sizeof *keys, cmp_key);
        for (size_t i = 1; i < n && !rc; i++)
            if (!strcmp((const char *)keys[i]->data.scalar.value, (const char *)keys[i - 1]->data.scalar.value)) {
                char what[DDP_ERR_MSG / 2];
                snprintf(what, sizeof what, "key \"%.300s\" appears twice in one object (first at line %zu)",
                         (const char *)keys[i]->data.scalar.value, keys[i - 1]->start_mark.line + 1);
                rc = fail_at(j, keys[i]->start_mark, err, what);
            }
    }
    free(keys);
    return rc;
}

static int check_nodes(json_doc *j, ddp_err *err)
{
    for (yaml_node_t *n = j->doc.nodes.start; n < j->doc.nodes.top; n++) {
        int rc = DDP_OK;
        if (n->type == YAML_MAPPING_NODE) {
            rc = check_object(j, n, err);
        } else if (n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
            const char *s = (const char *)n->data.scalar.value;
            if (strlen(s) != n->data.scalar.length ||
                (strcmp(s, "null") && strcmp(s, "true") && strcmp(s, "false") && !is_json_number(s))) {
                char what[160];
                snprintf(what, sizeof what, "not JSON: \"%.60s\" is neither a number, true, false, null nor a "
                         "string in double quotes", s);
                rc = fail_at(j, n->start_mark, err, what);
            }
        }
        if (rc)
            return rc;
    }
    return DDP_OK;
}

/* ---- parse and free ----------------------------------------------------------------------- */

int json_doc_parse(json_doc *j, const char *name, const char *text, size_t len, ddp_err *err)
{
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    int rc = scan_events(j, text, len, err);
    if (rc)
        return rc;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return ddp_fail(err, DDP_ERUNTIME, "%s: libyaml: cannot initialize a parser", j->name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &j->doc))
        rc = syntax_error(j, &p, err);
    else
        j->loaded = true;
    yaml_parser_delete(&p);
    if (!rc && !yaml_document_get_root_node(&j->doc))
        rc = ddp_fail(err, DDP_EUSAGE, "%s: no JSON value (empty text)", j->name);
    return rc ? rc : check_nodes(j, err);
}

int json_doc_load_file(json_doc *j, const char *path, size_t max_bytes, ddp_err *err)
{
    memset(j, 0, sizeof *j);
    FILE *f;
    int orc = fopen_input(path, &f, err);
    if (orc != DDP_OK)
        return orc;
    char *text = malloc(max_bytes + 1);
    size_t n = text ? fread(text, 1, max_bytes + 1, f) : 0;
    int rc = DDP_OK;
    if (!text)
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", path);
    else if (ferror(f))
        rc = ddp_fail(err, DDP_ERUNTIME, "%s: cannot read: %s", path, strerror(errno));
    else if (n > max_bytes)
        rc = ddp_fail(err, DDP_EUSAGE, "%s: larger than %zu bytes", path, max_bytes);
    fclose(f);
    if (!rc)
        rc = json_doc_parse(j, path, text, n, err);
    free(text);
    return rc;
}

void json_doc_free(json_doc *j)
{
    if (j->loaded)
        yaml_document_delete(&j->doc);
    j->loaded = false;
}

/* ---- lookups ------------------------------------------------------------------------------ */

const json_node *json_root(const json_doc *j)
{
    return yaml_document_get_root_node((yaml_document_t *)&j->doc);
}

size_t json_object_size(const json_node *obj)
{
    return obj->type == YAML_MAPPING_NODE ? (size_t)(obj->data.mapping.pairs.top - obj->data.mapping.pairs.start) : 0;
}

const char *json_object_key(const json_doc *j, const json_node *obj, size_t i, const json_node **value)
{
    const yaml_node_pair_t *pair = &obj->data.mapping.pairs.start[i];
    *value = yaml_document_get_node((yaml_document_t *)&j->doc, pair->value);
    return (const char *)yaml_document_get_node((yaml_document_t *)&j->doc, pair->key)->data.scalar.value;
}

const json_node *json_object_get(const json_doc *j, const json_node *obj, const char *key)
{
    for (size_t i = 0; i < json_object_size(obj); i++) {
        const json_node *value;
        if (!strcmp(json_object_key(j, obj, i, &value), key))
            return value;
    }
    return NULL;
}

size_t json_array_size(const json_node *arr)
{
    return arr->type == YAML_SEQUENCE_NODE ? (size_t)(arr->data.sequence.items.top - arr->data.sequence.items.start)
                                           : 0;
}

const json_node *json_array_at(const json_doc *j, const json_node *arr, size_t i)
{
    return yaml_document_get_node((yaml_document_t *)&j->doc, arr->data.sequence.items.start[i]);
}

const char *json_text(const json_node *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : "";
}

bool json_uint(const json_node *n, uint64_t *out)
{
    if (json_kind_of(n) != JSON_NUMBER)
        return false;
    const char *s = json_text(n);
    if (*s < '0' || *s > '9' || strpbrk(s, ".eE"))
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

bool json_double(const json_node *n, double *out)
{
    if (json_kind_of(n) != JSON_NUMBER)
        return false;
    char *end;
    *out = strtod(json_text(n), &end); /* JSON's grammar is checked: the whole text converts */
    return *end == '\0';
}
