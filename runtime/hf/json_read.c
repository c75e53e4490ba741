/* json_read.c — the reader behind json_doc_parse: RFC 8259's grammar, byte by byte, into a libyaml
 * document (see json_read.h).
 *
 * Owns white space and line counting, strings (only JSON's escapes, surrogate pairs joined, no raw
 * control characters, well-formed UTF-8), numbers, literals, arrays, objects (no key twice), the
 * nesting bound and the "nothing after the value" rule; each refusal names NAME:LINE:COL of the
 * first offending byte and why. libyaml's own parser is not used: it reads YAML, which decodes
 * escapes JSON lacks (\x74), folds raw line breaks inside strings and refuses surrogate pairs.
 * Must not know what a document means; the lookups are json_doc.c's. */
#include "json_read.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/utf8.h"

static int fail_at(const json_doc *j, yaml_mark_t m, ddp_err *err, const char *what)
{
    return ddp_fail(err, DDP_EUSAGE, "%s:%zu:%zu: %s", j->name, m.line + 1, m.column + 1, what);
}

/* ---- objects: no key twice ---------------------------------------------------------------- */

static int cmp_key(const void *a, const void *b)
{
    const yaml_node_t *x = *(yaml_node_t *const *)a, *y = *(yaml_node_t *const *)b;
    int c = strcmp((const char *)x->data.scalar.value, (const char *)y->data.scalar.value);
    return c ? c : (x->start_mark.index > y->start_mark.index) - (x->start_mark.index < y->start_mark.index);
}

/* No key twice in obj (sorted copies of the key nodes, so large headers stay fast). */
static int check_object(const json_doc *j, yaml_node_t *obj, ddp_err *err)
{
    size_t n = json_object_size(obj);
    if (n == 0)
        return DDP_OK;
    yaml_node_t **keys = malloc(n * sizeof *keys);
    if (!keys)
        return ddp_fail(err, DDP_ERUNTIME, "%s: out of memory", j->name);
    for (size_t i = 0; i < n; i++)
        keys[i] = yaml_document_get_node((yaml_document_t *)&j->doc, obj->data.mapping.pairs.start[i].key);
    qsort(keys, n, sizeof *keys, cmp_key);
    int rc = DDP_OK;
    for (size_t i = 1; i < n && !rc; i++)
        if (!strcmp((const char *)keys[i]->data.scalar.value, (const char *)keys[i - 1]->data.scalar.value)) {
            char what[DDP_ERR_MSG / 2];
            snprintf(what, sizeof what, "key \"%.300s\" appears twice in one object (first at line %zu)",
                     (const char *)keys[i]->data.scalar.value, keys[i - 1]->start_mark.line + 1);
            rc = fail_at(j, keys[i]->start_mark, err, what);
        }
    free(keys);
    return rc;
}

/* ---- the reader: RFC 8259's grammar, byte by byte ----------------------------------------- */

typedef struct reader {
    json_doc *j;
    const unsigned char *s;
    size_t len, pos;
    size_t line, line_start;    /* the current line (0-based) and the byte it starts at */
    size_t col_at, col;         /* col characters lie on this line before byte col_at (marks move forward) */
    unsigned char *buf;         /* a string's decoded bytes */
    size_t blen, cap;
    ddp_err *err;
} reader;

static yaml_mark_t mark_at(reader *r, size_t pos)
{
    if (r->col_at < r->line_start || r->col_at > pos)
        r->col_at = r->line_start, r->col = 0;
    for (; r->col_at < pos; r->col_at++)
        r->col += (r->s[r->col_at] & 0xC0) != 0x80; /* a character starts at every byte but a continuation */
    return (yaml_mark_t){.index = pos, .line = r->line, .column = r->col};
}

/* "NAME:LINE:COL: not JSON: WHAT" at mark m (bad_mark) or at byte pos of the current line (bad). */
static int bad_v(reader *r, yaml_mark_t m, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static int bad_v(reader *r, yaml_mark_t m, const char *fmt, va_list ap)
{
    char what[DDP_ERR_MSG / 2];
    vsnprintf(what, sizeof what, fmt, ap);
    char line[DDP_ERR_MSG / 2 + 16];
    snprintf(line, sizeof line, "not JSON: %s", what);
    return fail_at(r->j, m, r->err, line);
}

static int bad_mark(reader *r, yaml_mark_t m, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad_mark(reader *r, yaml_mark_t m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bad_v(r, m, fmt, ap);
    va_end(ap);
    return rc;
}

static int bad(reader *r, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(reader *r, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bad_v(r, mark_at(r, pos), fmt, ap);
    va_end(ap);
    return rc;
}

static int out_of_memory(reader *r)
{
    return ddp_fail(r->err, DDP_ERUNTIME, "%s: out of memory", r->j->name);
}

/* What stands at the current byte, for "expected X, found Y". */
static const char *found(const reader *r, char *out, size_t size)
{
    if (r->pos >= r->len)
        return "the end of the text";
    unsigned char c = r->s[r->pos];
    if (c == '\'')
        return "a single quote (JSON strings are in double quotes)";
    if (c == '/')
        return "'/' (JSON has no comments)";
    if (c > 0x20 && c < 0x7F)
        snprintf(out, size, "'%c'", c);
    else
        snprintf(out, size, "byte 0x%02X", c);
    return out;
}

/* JSON's white space is space, tab, line feed and carriage return; lines are counted here. */
static void skip_space(reader *r)
{
    for (; r->pos < r->len; r->pos++) {
        unsigned char c = r->s[r->pos];
        if (c == '\n' || (c == '\r' && (r->pos + 1 == r->len || r->s[r->pos + 1] != '\n')))
            r->line++, r->line_start = r->pos + 1;
        else if (c != ' ' && c != '\t' && c != '\r')
            return;
    }
}

static int put_bytes(reader *r, const void *p, size_t n)
{
    if (r->blen + n > r->cap) {
        size_t cap = r->cap ? r->cap : 64;
        while (cap < r->blen + n)
            cap *= 2;
        unsigned char *b = realloc(r->buf, cap);
        if (!b)
            return out_of_memory(r);
        r->buf = b, r->cap = cap;
    }
    memcpy(r->buf + r->blen, p, n);
    r->blen += n;
    return DDP_OK;
}

static int put_code_point(reader *r, uint32_t cp)
{
    unsigned char u[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    for (size_t i = n - 1; i > 0; i--, cp >>= 6)
        u[i] = (unsigned char)(0x80 | (cp & 0x3F));
    u[0] = (unsigned char)(lead[n] | cp);
    return put_bytes(r, u, n);
}

/* The four hex digits at byte pos as a number, or -1. */
static long hex4(const reader *r, size_t pos)
{
    long v = 0;
    for (size_t i = pos; i < pos + 4; i++) {
        int c = i < r->len ? r->s[i] : -1, d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* \uXXXX at r->pos (the backslash), a surrogate pair taken whole: appended as UTF-8. */
static int unicode_escape(reader *r)
{
    size_t at = r->pos;
    long cp = hex4(r, at + 2);
    if (cp < 0)
        return bad(r, at, "\\u must be followed by four hex digits");
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return bad(r, at, "\\u%04lX is a low surrogate with no high surrogate (\\uD800-\\uDBFF) before it", cp);
    r->pos += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        long lo = r->pos + 1 < r->len && r->s[r->pos] == '\\' && r->s[r->pos + 1] == 'u' ? hex4(r, r->pos + 2) : -1;
        if (lo < 0xDC00 || lo > 0xDFFF)
            return bad(r, at, "\\u%04lX is a high surrogate not followed by a low surrogate (\\uDC00-\\uDFFF)", cp);
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        r->pos += 6;
    }
    if (cp == 0) /* RFC 8259 allows it; names and values here are C strings, which it would cut short */
        return bad(r, at, "\\u0000 (NUL) in a string is not read here");
    return put_code_point(r, (uint32_t)cp);
}

/* The escape at r->pos (the backslash): JSON's \" \\ \/ \b \f \n \r \t and \uXXXX, nothing else. */
static int escape(reader *r)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    int c = r->pos + 1 < r->len ? r->s[r->pos + 1] : -1;
    if (c == 'u')
        return unicode_escape(r);
    const char *hit = c > 0 ? strchr(from, c) : NULL;
    if (!hit) {
        if (c < 0)
            return bad(r, r->pos, "a string not closed before the end of the text");
        char shown[24];
        if (c > 0x20 && c < 0x7F)
            snprintf(shown, sizeof shown, "\\%c", c);
        else
            snprintf(shown, sizeof shown, "\\ before byte 0x%02X", c);
        return bad(r, r->pos, "%s is not a JSON escape (JSON has \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX)",
                   shown);
    }
    r->pos += 2;
    return put_bytes(r, &to[hit - from], 1);
}

static int raw_control(reader *r, unsigned char c)
{
    if (c == '\n')
        return bad(r, r->pos, "a raw line break inside a string (write it as \\n)");
    if (c == '\t')
        return bad(r, r->pos, "a raw tab inside a string (write it as \\t)");
    if (c == '\r')
        return bad(r, r->pos, "a raw carriage return inside a string (write it as \\r)");
    return bad(r, r->pos, "raw control character 0x%02X inside a string (write it as \\u%04X)", c, c);
}

/* The string at r->pos (its opening quote), decoded into r->buf[0..r->blen). */
static int read_string(reader *r)
{
    size_t open = r->pos++;
    r->blen = 0;
    for (;;) {
        if (r->pos >= r->len)
            return bad(r, open, "a string not closed before the end of the text");
        unsigned char c = r->s[r->pos];
        uint32_t cp;
        size_t n = utf8_next(r->s + r->pos, r->len - r->pos, &cp);
        int rc = c == '"' ? DDP_OK : c < 0x20 ? raw_control(r, c) : c == '\\' ? escape(r)
               : !n ? bad(r, r->pos, "byte 0x%02X inside a string is not UTF-8", c) : put_bytes(r, r->s + r->pos, n);
        if (rc)
            return rc;
        if (c == '"') {
            r->pos++;
            return DDP_OK;
        }
        if (c != '\\')
            r->pos += n;
    }
}

/* Why s is not a JSON number (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), or NULL. "" when it
 * does not even start like one. */
static const char *number_problem(const char *s)
{
    if (*s == '+')
        return "a number does not start with '+'";
    if (*s == '-')
        s++;
    if (*s == '.')
        return "a digit must come before '.'";
    if (*s == '0' && s[1] >= '0' && s[1] <= '9')
        return "a number has no leading zeros";
    if (*s < '0' || *s > '9')
        return "";
    while (*s >= '0' && *s <= '9')
        s++;
    if (*s == '.') {
        if (*++s < '0' || *s > '9')
            return "a digit must follow '.'";
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        if (*++s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return "the exponent has no digits";
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s ? "" : NULL;
}

/* Node id's marks: start_mark when it is made (marks are asked for in the order of the text),
 * end_mark after its last byte. */
static void mark_start(reader *r, int id, size_t start)
{
    r->j->doc.nodes.start[id - 1].start_mark = mark_at(r, start);
}

static void mark_end(reader *r, int id)
{
    r->j->doc.nodes.start[id - 1].end_mark = mark_at(r, r->pos);
}

static int add_scalar(reader *r, const void *text, size_t n, yaml_scalar_style_t style, size_t start, int *id)
{
    if (n > INT_MAX)
        return bad(r, start, "a string of %zu bytes is longer than this reader holds", n);
    *id = yaml_document_add_scalar(&r->j->doc, NULL, (const yaml_char_t *)(n ? text : ""), (int)n, style);
    if (!*id)
        return out_of_memory(r);
    mark_start(r, *id, start);
    mark_end(r, *id);
    return DDP_OK;
}

/* A number, true, false or null at r->pos: the run of letters, digits and + - . there, checked whole. */
static int read_word(reader *r, int *id)
{
    size_t start = r->pos;
    while (r->pos < r->len && r->s[r->pos] && (isalnum(r->s[r->pos]) || strchr("+-.", r->s[r->pos])))
        r->pos++;
    size_t n = r->pos - start;
    r->blen = 0;
    int rc = put_bytes(r, r->s + start, n);
    if (!rc)
        rc = put_bytes(r, "", 1);
    if (rc)
        return rc;
    const char *word = (const char *)r->buf;
    const char *why = strcmp(word, "true") && strcmp(word, "false") && strcmp(word, "null") ? number_problem(word) : NULL;
    if (why && !*why)
        return bad(r, start, "\"%.40s%s\" is neither a number, true, false, null nor a string in double quotes", word,
                   n > 40 ? "..." : "");
    if (why)
        return bad(r, start, "\"%.40s%s\" is not a JSON number: %s", word, n > 40 ? "..." : "", why);
    return add_scalar(r, word, n, YAML_PLAIN_SCALAR_STYLE, start, id);
}

static int read_value(reader *r, int depth, int *id);

/* The array at r->pos ('['). */
static int read_array(reader *r, int depth, int id)
{
    r->pos++;
    skip_space(r);
    if (r->pos < r->len && r->s[r->pos] == ']')
        return r->pos++, DDP_OK;
    for (;;) {
        int item, rc = read_value(r, depth, &item);
        if (rc)
            return rc;
        if (!yaml_document_append_sequence_item(&r->j->doc, id, item))
            return out_of_memory(r);
        skip_space(r);
        char shown[16];
        int c = r->pos < r->len ? r->s[r->pos] : -1;
        if (c == ']')
            return r->pos++, DDP_OK;
        if (c != ',')
            return bad(r, r->pos, "expected ',' or ']' after an array item, found %s", found(r, shown, sizeof shown));
        yaml_mark_t comma = mark_at(r, r->pos++);
        skip_space(r);
        if (r->pos < r->len && r->s[r->pos] == ']')
            return bad_mark(r, comma, "a comma after the last item of an array");
    }
}

/* One member of the object id at r->pos: "key" : value. */
static int read_member(reader *r, int depth, int id)
{
    char shown[16];
    if (r->pos >= r->len || r->s[r->pos] != '"')
        return bad(r, r->pos, "an object key that is not a string in double quotes: found %s",
                   found(r, shown, sizeof shown));
    size_t start = r->pos;
    int key, value, rc = read_string(r);
    if (!rc)
        rc = add_scalar(r, r->buf, r->blen, YAML_DOUBLE_QUOTED_SCALAR_STYLE, start, &key);
    if (rc)
        return rc;
    skip_space(r);
    if (r->pos >= r->len || r->s[r->pos] != ':')
        return bad(r, r->pos, "expected ':' after an object key, found %s", found(r, shown, sizeof shown));
    r->pos++;
    if ((rc = read_value(r, depth, &value)))
        return rc;
    return yaml_document_append_mapping_pair(&r->j->doc, id, key, value) ? DDP_OK : out_of_memory(r);
}

/* The object at r->pos ('{'); no key twice. */
static int read_object(reader *r, int depth, int id)
{
    r->pos++;
    skip_space(r);
    if (r->pos < r->len && r->s[r->pos] == '}')
        return r->pos++, DDP_OK;
    for (;;) {
        int rc = read_member(r, depth, id);
        if (rc)
            return rc;
        skip_space(r);
        char shown[16];
        int c = r->pos < r->len ? r->s[r->pos] : -1;
        if (c == '}')
            return r->pos++, check_object(r->j, &r->j->doc.nodes.start[id - 1], r->err);
        if (c != ',')
            return bad(r, r->pos, "expected ',' or '}' after an object member, found %s",
                       found(r, shown, sizeof shown));
        yaml_mark_t comma = mark_at(r, r->pos++);
        skip_space(r);
        if (r->pos < r->len && r->s[r->pos] == '}')
            return bad_mark(r, comma, "a comma after the last member of an object");
    }
}

/* The value after any white space at r->pos, as node *id. */
static int read_value(reader *r, int depth, int *id)
{
    skip_space(r);
    size_t start = r->pos;
    int c = r->pos < r->len ? r->s[r->pos] : -1;
    if (c == '"') {
        int rc = read_string(r);
        return rc ? rc : add_scalar(r, r->buf, r->blen, YAML_DOUBLE_QUOTED_SCALAR_STYLE, start, id);
    }
    if (c > 0 && (isalnum(c) || strchr("+-.", c)))
        return read_word(r, id);
    if (c != '[' && c != '{') {
        char shown[16];
        return bad(r, r->pos, "expected a value (an object, an array, a string in double quotes, a number, true, "
                   "false or null), found %s", found(r, shown, sizeof shown));
    }
    if (depth >= JSON_MAX_DEPTH)
        return bad(r, r->pos, "arrays and objects nested too deep (more than %d levels)", JSON_MAX_DEPTH);
    *id = c == '[' ? yaml_document_add_sequence(&r->j->doc, NULL, YAML_FLOW_SEQUENCE_STYLE)
                   : yaml_document_add_mapping(&r->j->doc, NULL, YAML_FLOW_MAPPING_STYLE);
    if (!*id)
        return out_of_memory(r);
    mark_start(r, *id, start);
    int rc = c == '[' ? read_array(r, depth + 1, *id) : read_object(r, depth + 1, *id);
    if (!rc)
        mark_end(r, *id);
    return rc;
}

/* The whole text: one value, white space around it, nothing else. */
static int read_text(reader *r)
{
    if (r->len >= 3 && !memcmp(r->s, "\xEF\xBB\xBF", 3))
        return bad(r, 0, "a byte order mark (U+FEFF) before the value; JSON texts start without one");
    skip_space(r);
    if (r->pos == r->len)
        return fail_at(r->j, mark_at(r, r->pos), r->err, "no JSON value (empty text)");
    int root, rc = read_value(r, 0, &root);
    if (rc)
        return rc;
    skip_space(r);
    char shown[16];
    return r->pos < r->len ? bad(r, r->pos, "more after the value: found %s", found(r, shown, sizeof shown)) : DDP_OK;
}

int json_read_text(json_doc *j, const char *text, size_t len, ddp_err *err)
{
    reader r = {.j = j, .s = (const unsigned char *)text, .len = len, .err = err};
    int rc = read_text(&r);
    free(r.buf);
    return rc;
}
