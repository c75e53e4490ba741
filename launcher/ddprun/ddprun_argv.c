/* ddprun_argv.c — argv_list, the growable NULL-terminated string vector ddprun builds the mpirun
 * command in and the output filter collects mpirun's message boxes in, and what an option in one
 * says. Out of memory ends
 * ddprun (exit 1): a launcher that cannot hold its own command line has nothing to fall back to. */
#include "ddprun.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void argv_push(argv_list *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        char **grown = realloc(a->v, (size_t)cap * sizeof *grown);
        if (!grown) { perror("ddprun: out of memory"); exit(1); }
        a->v = grown;
        a->cap = cap;
    }
    a->v[a->n] = strdup(s);
    if (!a->v[a->n]) { perror("ddprun: out of memory"); exit(1); }
    a->v[++a->n] = NULL;
}

void argv_pushf(argv_list *a, const char *fmt, ...)
{
    char buf[PATH_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    argv_push(a, buf);
}

void argv_free(argv_list *a)
{
    for (int i = 0; i < a->n; i++) free(a->v[i]);
    free(a->v);
    *a = (argv_list){0};
}

const char *argv_option_value(const argv_list *a, const char *flag, const char *key, char sep)
{
    size_t n = strlen(key);
    for (int i = 0; i + 1 < a->n; i++) {
        if (strcmp(a->v[i], flag) != 0 || strncmp(a->v[i + 1], key, n) != 0)
            continue;
        if (sep && a->v[i + 1][n] == sep)
            return a->v[i + 1] + n + 1;
        if (!sep && !a->v[i + 1][n] && i + 2 < a->n)
            return a->v[i + 2];
    }
    return NULL;
}
