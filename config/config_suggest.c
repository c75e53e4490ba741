/* config_suggest.c — "did you mean": the error for an unknown key names the known key nearest to
 * it (edit distance, case-insensitive, transpositions counted once), in the same section, a
 * subsection, or anywhere with the same last part; else the section's keys. Shared with
 * config_value.c's enum and path hints. Must not read or change a config: it knows the key table
 * alone. */
#include "config_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

/* Whether a key with this parent is a candidate: in the section itself, or (nested) in one of
 * its subsections at any depth. */
static bool under(const char *parent, const char *section, bool nested)
{
    if (!nested)
        return !strcmp(parent, section);
    size_t n = strlen(section);
    return *parent && (!n || (!strncmp(parent, section, n) && parent[n] == '.'));
}

/* The key whose last part is nearest to name among the candidates, or NULL. */
static const char *closest_key(const char *section, const char *name, bool nested)
{
    char parent[CFG_KEY_MAX];
    const char *best = NULL;
    int best_d = 1 << 30;
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)); i++) {
        cfg_key_parent(k->path, parent, sizeof parent);
        if (!under(parent, section, nested))
            continue;
        const char *leaf = cfg_key_leaf(k->path);
        int lim = cfg_near_limit(leaf), d = cfg_edit_distance(name, leaf, lim);
        if (d <= lim && d < best_d)
            best = k->path, best_d = d;
    }
    return best;
}

/* Closest key under the same section; else under one of its subsections (a setting that moved
 * into a section of its own: model.hidden -> model.mlp.hidden); else a key anywhere whose last
 * part matches (a setting written in the wrong section). NULL when nothing is close. */
static const char *suggest(const char *section, const char *name)
{
    const char *best = closest_key(section, name, false);
    if (!best)
        best = closest_key(section, name, true);
    const cfg_key *k;
    for (int i = 0; !best && (k = cfg_key_at(i)); i++)
        if (cfg_edit_distance(name, cfg_key_leaf(k->path), 0) == 0)
            best = k->path;
    return best;
}

int cfg_unknown_key(const cfg_loader *L, cfg_pos at, const char *section, const char *name)
{
    char path[CFG_KEY_MAX], allowed[512], parent[CFG_KEY_MAX];
    snprintf(path, sizeof path, "%s%s%.200s", section, *section ? "." : "", name);
    const char *near = suggest(section, name);
    if (near)
        return cfg_error(L, at, path, "unknown key, did you mean '%s'?", near);
    size_t used = 0;
    allowed[0] = '\0';
    const cfg_key *k;
    for (int i = 0; (k = cfg_key_at(i)) && used < sizeof allowed; i++) {
        cfg_key_parent(k->path, parent, sizeof parent);
        if (!strcmp(parent, section))
            used += (size_t)snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "",
                                     cfg_key_leaf(k->path));
    }
    return cfg_error(L, at, path, "unknown key (expected one of: %s)", allowed);
}
