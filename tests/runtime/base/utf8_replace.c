/* utf8_replace.c — test_utf8.py's subject: each line of stdin (bytes, one test string per line,
 * hex-encoded) written to stdout as utf8_replace_invalid makes it well-formed, hex-encoded again,
 * followed by utf8_next's code points of the result, so the referee (Python's
 * bytes.decode(errors="replace")) checks both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/utf8.h"

static int hex(int c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

int main(void)
{
    static char line[1 << 16];
    static uint8_t in[1 << 15], out[3 << 15];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strcspn(line, "\n") / 2;
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t)(hex(line[2 * i]) << 4 | hex(line[2 * i + 1]));
        size_t w = utf8_replace_invalid(in, n, out);
        for (size_t i = 0; i < w; i++)
            printf("%02x", out[i]);
        for (size_t i = 0; i < w;) {
            uint32_t cp = 0;
            size_t k = utf8_next(out + i, w - i, &cp);
            if (!k) {
                printf(" ill-formed at %zu", i);
                break;
            }
            printf(" %x", cp);
            i += k;
        }
        printf("\n");
    }
    return 0;
}
