/* affix.h — whether a string starts or ends with another: the one test of a name's prefix or
 * suffix (a file's kind by its ending, a log line's opening). Header only; must not depend on
 * anything but <string.h>. */
#ifndef DDP_AFFIX_H
#define DDP_AFFIX_H

#include <stdbool.h>
#include <string.h>

static inline bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static inline bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

#endif
