/* json_doc.h — a JSON text (a safetensors header, a Hugging Face config.json or index) read by the
 * grammar of RFC 8259 and held as a libyaml document, with the lookups the readers of runtime/hf
 * and models need (and `ddprun generate --chat`'s chat.json, launcher/commands/generate_chat.c).
 *
 * Exactly RFC 8259's JSON is read: one value with JSON's white space (space, tab, line feed,
 * carriage return) around and between tokens; strings in double quotes with only the escapes
 * \" \\ \/ \b \f \n \r \t \uXXXX (a surrogate pair joined, a surrogate alone or mismatched
 * refused), no raw control character U+0000..U+001F and only well-formed UTF-8; numbers in JSON's
 * grammar (no leading zero, '+', bare '.', NaN or Infinity); true, false, null; no trailing comma,
 * comment, single quote, byte order mark or text after the value. On top of the RFC: no key twice
 * in one object, nesting at most JSON_MAX_DEPTH deep, and no \u0000 (the values are C strings).
 * Every error names NAME:LINE:COL (1-based; columns count characters) of the first offending
 * byte and the reason. Must not know safetensors or models. */
#ifndef DDP_JSON_DOC_H
#define DDP_JSON_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <yaml.h>

#include "runtime/base/err.h"

#define JSON_MAX_DEPTH 64

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } json_kind;

typedef yaml_node_t json_node;

typedef struct json_doc {
    yaml_document_t doc;
    bool loaded;
    char name[512];   /* for messages: the file the text came from */
} json_doc;

/* Parses text[0..len) into *j (to be freed with json_doc_free, also after a failure). */
int json_doc_parse(json_doc *j, const char *name, const char *text, size_t len, ddp_err *err);
/* Reads the file path (at most max_bytes) and parses it as json_doc_parse does. */
int json_doc_load_file(json_doc *j, const char *path, size_t max_bytes, ddp_err *err);
void json_doc_free(json_doc *j);

const json_node *json_root(const json_doc *j);
json_kind json_kind_of(const json_node *n);
/* "object", "array", "string", ... for messages */
const char *json_kind_name(json_kind k);
/* "NAME:LINE:COL" of n into out. */
void json_where(const json_doc *j, const json_node *n, char *out, size_t size);

/* An object's members in document order: count, and member i's key and value. */
size_t json_object_size(const json_node *obj);
const char *json_object_key(const json_doc *j, const json_node *obj, size_t i, const json_node **value);
/* The value of key in obj, or NULL. */
const json_node *json_object_get(const json_doc *j, const json_node *obj, const char *key);

size_t json_array_size(const json_node *arr);
const json_node *json_array_at(const json_doc *j, const json_node *arr, size_t i);

/* A string's text; a number's, true's, false's or null's literal text. */
const char *json_text(const json_node *n);
/* A non-negative integer written without fraction or exponent, up to UINT64_MAX: true and *out. */
bool json_uint(const json_node *n, uint64_t *out);
/* A number as the nearest double: true and *out. */
bool json_double(const json_node *n, double *out);

#endif
