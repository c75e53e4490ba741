/* json_doc.c — a JSON text held as a libyaml document, and its lookups (see json_doc.h).
 *
 * Owns the document's life (made by json_read.c's reader, which refuses all that RFC 8259 does
 * not allow), the kinds of its nodes, the lookups, and reading a small JSON file whole. Must not
 * know what a document means. */
#include "json_doc.h"
#include "runtime/base/open_input.h"
#include "runtime/base/read_whole.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_read.h"

void json_where(const json_doc *j, const json_node *n, char *out, size_t size)
{
    snprintf(out, size, "%s:%zu:%zu", j->name, n->start_mark.line + 1, n->start_mark.column + 1);
}

/* ---- kinds ------------------------------------------------------------------------------- */

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
    return JSON_NUMBER; /* the reader made plain scalars of nothing else */
}

const char *json_kind_name(json_kind k)
{
    static const char *const names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
    return names[k];
}

/* ---- parse and free ----------------------------------------------------------------------- */

int json_doc_parse(json_doc *j, const char *name, const char *text, size_t len, ddp_err *err)
{
    memset(j, 0, sizeof *j);
    snprintf(j->name, sizeof j->name, "%s", name);
    if (!yaml_document_initialize(&j->doc, NULL, NULL, NULL, 1, 1))
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", j->name);
    j->loaded = true;
    return json_read_text(j, text, len, err);
}

int json_doc_load_file(json_doc *j, const char *path, size_t max_bytes, ddp_err *err)
{
    memset(j, 0, sizeof *j);
    FILE *f;
    int rc = fopen_input(path, &f, err);
    if (rc != DDP_OK)
        return rc;
    char *text;
    size_t n;
    rc = read_whole(f, path, max_bytes, &text, &n, err);
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
