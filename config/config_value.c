/* config_value.c — one YAML node into one typed setting, with its range checks, and the words
 * that say what a key expects ("a positive number", "one of sgd, adamw").
 *
 * cfg_parse_value reads a value a file or an override gives, and every default of the key table
 * (cfg_defaults), so a default obeys the same rules as what a user writes. This file does not walk
 * documents, know about files or overrides, or check one key against another (config.c /
 * config_check.c do), and holds no key of its own (config_keys.c and the model kinds' files in models/ do). */
#include "config_internal.h"

#include "runtime/base/command.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stop signals a config may name: the two mpirun forwards to the ranks (GUIDE section 4). */
const char *const cfg_signal_names[] = {"SIGUSR1", "SIGUSR2", NULL};
static const int signal_numbers[] = {SIGUSR1, SIGUSR2};

const char *cfg_signal_name(int signo)
{
    for (int i = 0; cfg_signal_names[i]; i++)
        if (signal_numbers[i] == signo)
            return cfg_signal_names[i];
    return NULL;
}

static void num_expect(num_range r, char *out, size_t n)
{
    snprintf(out, n, "%s", r == NR_POSITIVE ? "a positive number"
                           : r == NR_NONNEG ? "a number >= 0"
                           : r == NR_UNIT   ? "a number in [0, 1)"
                           : r == NR_POLL   ? "a number in [0.1, 120]" : "a number in (0, 1]");
}

static void int_expect(int64_t lo, int64_t hi, char *out, size_t n)
{
    if (hi == INT64_MAX)
        snprintf(out, n, "an integer >= %lld", (long long)lo);
    else
        snprintf(out, n, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
}

static void choices_expect(const char *const *names, char *out, size_t n)
{
    size_t used = (size_t)snprintf(out, n, "one of ");
    for (int i = 0; names[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", names[i]);
}

void cfg_expect(const cfg_key *k, char *out, size_t n)
{
    char elem[96];
    switch (k->type) {
    case KT_SECTION: snprintf(out, n, "a mapping"); break;
    case KT_INT: int_expect(k->imin, k->imax, out, n); break;
    case KT_UINT: snprintf(out, n, "an integer in [0, 2^64)"); break;
    case KT_NUM: num_expect(k->range, out, n); break;
    case KT_BOOL: snprintf(out, n, "true or false"); break;
    case KT_STR: snprintf(out, n, "a non-empty path"); break;
    case KT_OPT_PATH: snprintf(out, n, "a path, or \"\" for none"); break;
    case KT_COMMAND: snprintf(out, n, "a shell command, or \"\" for none"); break;
    case KT_ENUM: case KT_SIGNAL: choices_expect(k->choices, out, n); break;
    case KT_HIDDEN:
        int_expect(k->imin, k->imax, elem, sizeof elem);
        snprintf(out, n, "a list of 1 to %d layer sizes, each %s", CFG_LIST_MAX, elem);
        break;
    case KT_BETAS: snprintf(out, n, "a list of two numbers in [0, 1)"); break;
    case KT_RESUME: snprintf(out, n, "auto, never or a checkpoint path"); break;
    }
}

/* ---- reading one YAML node ---- */

static bool is_null(const yaml_node_t *nd)
{
    if (nd->type != YAML_SCALAR_NODE || nd->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *v = (const char *)nd->data.scalar.value;
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

void cfg_describe(const yaml_node_t *nd, char *out, size_t n)
{
    if (nd->type == YAML_MAPPING_NODE)
        snprintf(out, n, "a mapping");
    else if (nd->type == YAML_SEQUENCE_NODE)
        snprintf(out, n, "a list");
    else if (is_null(nd))
        snprintf(out, n, "nothing");
    else
        snprintf(out, n, "\"%.80s\"%s", (const char *)nd->data.scalar.value,
                 nd->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? "" : " (quoted, so a string)");
}

static int wrong(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key,
                 const char *expect)
{
    char got[128];
    cfg_describe(nd, got, sizeof got);
    return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got %s", expect, got);
}

static const char *plain_text(const yaml_node_t *nd)
{
    if (nd->type != YAML_SCALAR_NODE || nd->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return NULL;
    return (const char *)nd->data.scalar.value;
}

/* YAML 1.2 core-schema decimal integer; 0 on success, -1 not an integer, -2 out of range. */
static int read_int(const char *t, int64_t *v)
{
    const char *p = t + (*t == '+' || *t == '-');
    if (!*p)
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    long long x = strtoll(t, NULL, 10);
    if (errno == ERANGE)
        return -2;
    *v = x;
    return 0;
}

/* [+-](digits[.digits*]|.digits)([eE][+-]digits)? — refuses inf/nan/hex that strtod would take. */
static bool looks_numeric(const char *t)
{
    const char *p = t + (*t == '+' || *t == '-');
    int digits = 0;
    while (isdigit((unsigned char)*p)) p++, digits++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++) digits++;
    if (!digits)
        return false;
    if (*p == 'e' || *p == 'E') {
        p++;
        p += (*p == '+' || *p == '-');
        if (!isdigit((unsigned char)*p))
            return false;
        while (isdigit((unsigned char)*p)) p++;
    }
    return *p == '\0';
}

bool cfg_num_allowed(double v, num_range r)
{
    return isfinite(v) && (r == NR_POSITIVE ? v > 0
                           : r == NR_NONNEG ? v >= 0
                           : r == NR_UNIT   ? (v >= 0 && v < 1)
                           : r == NR_POLL   ? (v >= 0.1 && v <= 120) : (v > 0 && v <= 1));
}

static int parse_int(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key,
                     int64_t lo, int64_t hi, int64_t *out)
{
    char expect[96];
    int_expect(lo, hi, expect, sizeof expect);
    const char *t = plain_text(nd);
    int64_t v = 0;
    int rc = t ? read_int(t, &v) : -1;
    if (rc == -2)
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got \"%.80s\" (out of range)", expect, t);
    if (rc < 0 || v < lo || v > hi)
        return wrong(L, s, nd, key, expect);
    *out = v;
    return DDP_OK;
}

static int parse_num(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key,
                     num_range r, double *out)
{
    char expect[64];
    num_expect(r, expect, sizeof expect);
    const char *t = plain_text(nd);
    if (!t || !looks_numeric(t))
        return wrong(L, s, nd, key, expect);
    errno = 0;
    double v = strtod(t, NULL);
    if (errno == ERANGE && fabs(v) < DBL_MIN) /* 1e-400 is not 0, which some keys read as "off" */
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got \"%.80s\" (out of range)", expect, t);
    if (!cfg_num_allowed(v, r))
        return wrong(L, s, nd, key, expect);
    *out = v == 0 ? 0.0 : v; /* -0 is 0: one value, one hash */
    return DDP_OK;
}

static int parse_uint(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key,
                      uint64_t *out)
{
    const char *t = plain_text(nd);
    const char *p = t ? t + (*t == '+') : NULL;
    bool digits = p && *p;
    for (const char *q = p; digits && *q; q++)
        digits = isdigit((unsigned char)*q);
    errno = 0;
    unsigned long long v = digits ? strtoull(p, NULL, 10) : 0;
    if (!digits || errno == ERANGE)
        return wrong(L, s, nd, key, "an integer in [0, 2^64)");
    *out = v;
    return DDP_OK;
}

static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False", "FALSE"};

static bool is_bool_text(const char *t)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(t, yes[i]) || !strcmp(t, no[i]))
            return true;
    return false;
}

static int parse_bool(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key, bool *out)
{
    const char *t = plain_text(nd);
    for (int i = 0; t && i < 3; i++) {
        if (!strcmp(t, yes[i]) || !strcmp(t, no[i])) {
            *out = !strcmp(t, yes[i]);
            return DDP_OK;
        }
    }
    return wrong(L, s, nd, key, "true or false");
}

/* An explicit !!int, !!float, !!bool or !!null (libyaml gives untagged scalars !!str, and
 * cfg_check_tag refuses the rest) says what its scalar is: the text must be that, and the key
 * must take it (!!int a number, !!float a fractional number, !!bool a boolean, !!null a setting
 * that may be left empty). !!str reads as quoted text in the parsers themselves. */
static int check_core_tag(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key, key_type type)
{
    const char *tag = nd->type == YAML_SCALAR_NODE && nd->tag ? (const char *)nd->tag : YAML_STR_TAG, *what;
    const char *t = (const char *)(nd->type == YAML_SCALAR_NODE ? nd->data.scalar.value : (yaml_char_t *)"");
    int64_t v;
    bool text_is, key_takes;
    if (!strcmp(tag, YAML_INT_TAG))
        what = "an integer", text_is = read_int(t, &v) != -1, key_takes = type == KT_INT || type == KT_UINT || type == KT_NUM;
    else if (!strcmp(tag, YAML_FLOAT_TAG))
        what = "a number", text_is = looks_numeric(t), key_takes = type == KT_NUM;
    else if (!strcmp(tag, YAML_BOOL_TAG))
        what = "true or false", text_is = is_bool_text(t), key_takes = type == KT_BOOL;
    else if (!strcmp(tag, YAML_NULL_TAG))
        what = "nothing", text_is = is_null(nd), key_takes = type == KT_OPT_PATH || type == KT_COMMAND;
    else
        return DDP_OK;
    const char *shown = strrchr(tag, ':') + 1;
    if (!text_is)
        return cfg_error(L, cfg_node_pos(s, nd), key, "tagged !!%s, but \"%.80s\" is not %s", shown, t, what);
    if (!key_takes)
        return cfg_error(L, cfg_node_pos(s, nd), key, "tagged !!%s, a kind of value this setting does not take",
                         shown);
    return DDP_OK;
}

/* Whether the scalar's text is white space alone: a path or a command of nothing but spaces is a
 * slip (a stray quote, an unset shell variable), never a folder anyone means. */
static bool blank(const yaml_node_t *nd)
{
    for (size_t i = 0; i < nd->data.scalar.length; i++)
        if (!isspace(nd->data.scalar.value[i]))
            return false;
    return true;
}

/* Any scalar style; the text itself (quoted "123" and plain 123 are the same path). expect: what
 * the refusal of one that is empty or blank says the key takes. */
static int parse_str(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key, const char *expect,
                     char *out)
{
    if (nd->type != YAML_SCALAR_NODE || is_null(nd) || blank(nd))
        return wrong(L, s, nd, key, expect);
    if (nd->data.scalar.length >= CFG_PATH_MAX)
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected a path shorter than %d bytes, got %zu bytes",
                         CFG_PATH_MAX, nd->data.scalar.length);
    memset(out, 0, CFG_PATH_MAX); /* no stale tail: equal settings give byte-equal structs */
    memcpy(out, nd->data.scalar.value, nd->data.scalar.length);
    return DDP_OK;
}

/* A path: parse_str's text, but not a plain true or false, which YAML reads as a boolean (a slip
 * for "off", which would make a folder or name a file of that name); quoted, it is the text. A
 * command may be `true` or `false`: those are programs. */
static int parse_path(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key, const char *expect,
                      char *out)
{
    const char *t = plain_text(nd);
    if (t && is_bool_text(t))
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got the boolean %s (quote it, \"%s\", for a path "
                         "of that name)", expect, t, t);
    return parse_str(L, s, nd, key, expect, out);
}

/* A shell command whose {placeholders} are all known (runtime/base/command.h expands them). */
static int parse_command(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const cfg_key *k, char *out)
{
    if (nd->type == YAML_SCALAR_NODE && (is_null(nd) || !nd->data.scalar.length)) {
        memset(out, 0, CFG_PATH_MAX);
        return DDP_OK;
    }
    if (nd->type != YAML_SCALAR_NODE)
        return wrong(L, s, nd, k->path, "a shell command, or \"\" for none");
    int rc = parse_str(L, s, nd, k->path, "a shell command, or \"\" for none", out);
    if (rc != DDP_OK)
        return rc;
    int n = 0;
    while (k->choices[n])
        n++;
    char expanded[COMMAND_MAX];
    ddp_err e = {0};
    if (command_expand(out, k->choices, n, expanded, sizeof expanded, &e) != DDP_OK)
        return cfg_error(L, cfg_node_pos(s, nd), k->path, "%s", e.msg);
    return DDP_OK;
}

static int parse_choice(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const char *key,
                        const char *const *names, int *out)
{
    char expect[160], got[128];
    const char *t = nd->type == YAML_SCALAR_NODE ? (const char *)nd->data.scalar.value : NULL;
    int best = -1, best_d = 1 << 30;
    for (int i = 0; t && names[i]; i++) {
        if (!strcmp(t, names[i])) {
            *out = i;
            return DDP_OK;
        }
        /* short values get no hint: "gpu" is one letter from "cpu" but rarely means it */
        int lim = strlen(names[i]) <= 3 ? 0 : cfg_near_limit(names[i]);
        int d = cfg_edit_distance(t, names[i], lim);
        if (d <= lim && d < best_d)
            best = i, best_d = d;
    }
    choices_expect(names, expect, sizeof expect);
    cfg_describe(nd, got, sizeof got);
    if (best >= 0)
        return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got %s; did you mean '%s'?", expect,
                         got, names[best]);
    return cfg_error(L, cfg_node_pos(s, nd), key, "expected %s, got %s", expect, got);
}

static int parse_hidden(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, const yaml_node_t *nd,
                        const cfg_key *k)
{
    char expect[160], elem_key[CFG_KEY_MAX];
    cfg_expect(k, expect, sizeof expect);
    if (nd->type != YAML_SEQUENCE_NODE)
        return wrong(L, s, nd, k->path, expect);
    long n = nd->data.sequence.items.top - nd->data.sequence.items.start;
    if (n < 1 || n > CFG_LIST_MAX)
        return cfg_error(L, cfg_node_pos(s, nd), k->path, "expected %s, got a list of %ld", expect, n);
    int64_t sizes[CFG_LIST_MAX];
    for (long i = 0; i < n; i++) {
        yaml_node_t *item = yaml_document_get_node(doc, nd->data.sequence.items.start[i]);
        snprintf(elem_key, sizeof elem_key, "%s[%ld]", k->path, i);
        int rc = cfg_check_tag(L, s, item, elem_key);
        if (!rc)
            rc = check_core_tag(L, s, item, elem_key, KT_INT);
        if (!rc)
            rc = parse_int(L, s, item, elem_key, k->imin, k->imax, &sizes[i]);
        if (rc)
            return rc;
    }
    int64_t *entries = (int64_t *)((char *)L->c + k->list_off);
    *(int *)((char *)L->c + k->off) = (int)n;
    memset(entries, 0, CFG_LIST_MAX * sizeof *entries);
    memcpy(entries, sizes, (size_t)n * sizeof sizes[0]);
    return DDP_OK;
}

static int parse_betas(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, const yaml_node_t *nd,
                       const cfg_key *k)
{
    char elem_key[CFG_KEY_MAX];
    if (nd->type != YAML_SEQUENCE_NODE)
        return wrong(L, s, nd, k->path, "a list of two numbers in [0, 1)");
    long n = nd->data.sequence.items.top - nd->data.sequence.items.start;
    if (n != 2)
        return cfg_error(L, cfg_node_pos(s, nd), k->path,
                         "expected a list of two numbers in [0, 1), got a list of %ld", n);
    double b[2];
    for (int i = 0; i < 2; i++) {
        yaml_node_t *item = yaml_document_get_node(doc, nd->data.sequence.items.start[i]);
        snprintf(elem_key, sizeof elem_key, "%s[%d]", k->path, i);
        int rc = cfg_check_tag(L, s, item, elem_key);
        if (!rc)
            rc = check_core_tag(L, s, item, elem_key, KT_NUM);
        if (!rc)
            rc = parse_num(L, s, item, elem_key, NR_UNIT, &b[i]);
        if (rc)
            return rc;
    }
    L->c->optimizer.beta1 = b[0];
    L->c->optimizer.beta2 = b[1];
    return DDP_OK;
}

/* auto | never | a path. A slash-free near miss of a keyword ("nevr") is refused as a likely
 * typo; such a checkpoint path can still be given as ./nevr. */
static int parse_resume(cfg_loader *L, const cfg_src *s, const yaml_node_t *nd, const cfg_key *k)
{
    config *c = L->c;
    char path[CFG_PATH_MAX];
    int rc = parse_path(L, s, nd, k->path, "auto, never or a checkpoint path", path);
    if (rc)
        return rc;
    static const char *const words[] = {"auto", "never"};
    for (int i = 0; i < 2; i++) {
        if (!strcmp(path, words[i])) {
            c->checkpoint.resume = i == 0 ? RESUME_AUTO : RESUME_NEVER;
            memset(c->checkpoint.resume_path, 0, sizeof c->checkpoint.resume_path);
            return DDP_OK;
        }
        if (!strchr(path, '/') && cfg_edit_distance(path, words[i], 1) <= 1)
            return cfg_error(L, cfg_node_pos(s, nd), k->path,
                             "expected auto, never or a checkpoint path, got \"%s\"; did you mean '%s'? "
                             "(write ./%s for a file of that name)", path, words[i], path);
    }
    c->checkpoint.resume = RESUME_PATH;
    memcpy(c->checkpoint.resume_path, path, sizeof path);
    return DDP_OK;
}

int cfg_parse_value(cfg_loader *L, const cfg_src *s, yaml_document_t *doc, yaml_node_t *nd,
                    const cfg_key *k)
{
    char *field = (char *)L->c + k->off;
    int tagged = check_core_tag(L, s, nd, k->path, k->type);
    if (tagged)
        return tagged;
    switch (k->type) {
    case KT_INT: return parse_int(L, s, nd, k->path, k->imin, k->imax, (int64_t *)field);
    case KT_UINT: return parse_uint(L, s, nd, k->path, (uint64_t *)field);
    case KT_NUM: return parse_num(L, s, nd, k->path, k->range, (double *)field);
    case KT_BOOL: return parse_bool(L, s, nd, k->path, (bool *)field);
    case KT_STR: return parse_path(L, s, nd, k->path, "a non-empty path", field);
    case KT_OPT_PATH:
        if (nd->type == YAML_SCALAR_NODE && (is_null(nd) || !nd->data.scalar.length)) {
            memset(field, 0, CFG_PATH_MAX);
            return DDP_OK;
        }
        return nd->type == YAML_SCALAR_NODE ? parse_path(L, s, nd, k->path, "a path, or \"\" for none", field)
                                            : wrong(L, s, nd, k->path, "a path, or \"\" for none");
    case KT_COMMAND: return parse_command(L, s, nd, k, field);
    case KT_ENUM: return parse_choice(L, s, nd, k->path, k->choices, (int *)field);
    case KT_HIDDEN: return parse_hidden(L, s, doc, nd, k);
    case KT_BETAS: return parse_betas(L, s, doc, nd, k);
    case KT_RESUME: return parse_resume(L, s, nd, k);
    case KT_SIGNAL: {
        int which = 0;
        const char *t = nd->type == YAML_SCALAR_NODE ? (const char *)nd->data.scalar.value : "";
        if (L->record && (!strcmp(t, "SIGTERM") || !strcmp(t, "SIGINT"))) { /* an earlier run's: it sent SIGUSR1 */
            L->c->checkpoint.stop_signal = SIGUSR1;
            return DDP_OK;
        }
        int rc = parse_choice(L, s, nd, k->path, k->choices, &which);
        if (!rc)
            L->c->checkpoint.stop_signal = signal_numbers[which];
        return rc;
    }
    case KT_SECTION: break;
    }
    return cfg_error(L, cfg_node_pos(s, nd), k->path, "expected a setting, got a section");
}
