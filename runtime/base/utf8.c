/* utf8.c — utf8_next, utf8_bad_len and utf8_replace_invalid (utf8.h). */
#include "utf8.h"

#include <string.h>

/* The sequence's length by its first byte (0: no first byte of one), and the allowed range of its
 * second byte, which rules out overlong forms, surrogates and code points above U+10FFFF. */
static size_t lead(uint8_t b, uint8_t *lo, uint8_t *hi)
{
    *lo = 0x80, *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        *lo = b == 0xE0 ? 0xA0 : 0x80, *hi = b == 0xED ? 0x9F : 0xBF;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        *lo = b == 0xF0 ? 0x90 : 0x80, *hi = b == 0xF4 ? 0x8F : 0xBF;
        return 4;
    }
    return 0;
}

/* How many bytes from p[0] (at most len, and n) begin a well-formed sequence of length len. */
static size_t good_prefix(const uint8_t *p, size_t n, size_t len, uint8_t lo, uint8_t hi)
{
    size_t k = 1;
    if (k < n && k < len && p[1] >= lo && p[1] <= hi)
        for (k = 2; k < n && k < len && (p[k] & 0xC0) == 0x80; k++) {
        }
    return k;
}

size_t utf8_next(const uint8_t *p, size_t n, uint32_t *cp)
{
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    uint8_t lo, hi;
    size_t len = lead(p[0], &lo, &hi);
    if (!len || good_prefix(p, n, len, lo, hi) != len)
        return 0;
    uint32_t c = p[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++)
        c = c << 6 | (p[i] & 0x3F);
    *cp = c;
    return len;
}

size_t utf8_bad_len(const uint8_t *p, size_t n)
{
    uint8_t lo, hi;
    size_t len = lead(p[0], &lo, &hi);
    return len ? good_prefix(p, n, len, lo, hi) : 1;
}

size_t utf8_replace_invalid(const uint8_t *in, size_t n, uint8_t *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = utf8_next(in + i, n - i, &cp);
        if (k) {
            memcpy(out + w, in + i, k);
            w += k;
        } else {
            memcpy(out + w, "\xEF\xBF\xBD", 3);
            w += 3;
            k = utf8_bad_len(in + i, n - i);
        }
        i += k;
    }
    return w;
}
