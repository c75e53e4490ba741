/* config_errors.c — where a setting came from and how a complaint about it reads: positions
 * (FILE:LINE:COL, 1-based; overrides as `<override N>:1:COL`), which of two settings came later,
 * the one error format every config message uses, and the edit distance behind did-you-mean.
 * The loader, the value parser and the cross-key checks all report through it; it must not
 * know any key. */
#include "config_internal.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- positions and messages ---- */

/* An override is one line of text, so its column is the character index into `key=value`
 * (libyaml puts the end of an unterminated value on a line 2 of its own). */
cfg_pos cfg_mark_pos(const cfg_src *s, yaml_mark_t m)
{
    if (s->source > 0)
        return (cfg_pos){s->source, 1, (int)m.index + 1 + s->col_offset};
    return (cfg_pos){s->source, (int)m.line + 1, (int)m.column + 1};
}

cfg_pos cfg_node_pos(const cfg_src *s, const yaml_node_t *node)
{
    return cfg_mark_pos(s, node->start_mark);
}

int cfg_pos_later(cfg_pos a, cfg_pos b)
{
    if (a.source != b.source)
        return a.source > b.source;
    return a.line != b.line ? a.line > b.line : a.col > b.col;
}

void cfg_pos_label(const cfg_loader *L, cfg_pos at, char *out, size_t n)
{
    if (at.source == 0)
        snprintf(out, n, "%s:%d:%d", L->file, at.line, at.col);
    else
        snprintf(out, n, "<override %d>:%d:%d", at.source, at.line, at.col);
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

/* ---- did you mean ---- */

int cfg_edit_distance(const char *a, const char *b, int cap)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return cap + 1;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int same = tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + !same;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1; /* transposition: "lr" vs "rl" */
            d[i][j] = best;
        }
    }
    return d[la][lb] > cap ? cap + 1 : d[la][lb];
}

int cfg_near_limit(const char *name)
{
    size_t n = strlen(name);
    return n <= 3 ? 1 : n <= 7 ? 2 : 3;
}
