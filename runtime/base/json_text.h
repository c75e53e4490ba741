/* json_text.h — text as a JSON string's contents: the one escaper of the JSON files ddprun writes
 * by hand (profile.json and the traces, the benchmark's report, the ranks' figures). Must not
 * write the quotes around it or know what the text is. */
#ifndef DDP_JSON_TEXT_H
#define DDP_JSON_TEXT_H

#include <stddef.h>
#include <stdio.h>

/* s, up to its NUL or max bytes (SIZE_MAX: a C string), into f with '"' and '\' escaped and
 * control bytes as \u00XX; other bytes as they are (UTF-8 stays UTF-8). */
void json_put_text(FILE *f, const char *s, size_t max);

#endif
