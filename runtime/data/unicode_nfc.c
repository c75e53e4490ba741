/* unicode_nfc.c — NFC through ICU (unicode_nfc.h): UTF-8 to UTF-16, ICU's quick check, and only
 * when the text is not already normalized, ICU's normalizer and the way back to UTF-8. Each ICU
 * call is preflighted for its size, so no buffer is guessed. Must not know about tokens. */
#include "unicode_nfc.h"

#include <stdint.h>
#include <stdlib.h>

#include <unicode/unorm2.h>
#include <unicode/ustring.h>

/* ICU lengths are int32; UTF-16 never takes more units than UTF-8 takes bytes, and NFC grows a
 * text at most threefold, so texts under 512 MiB stay within them. */
#define NFC_MAX_BYTES ((size_t)512 << 20)

static int icu_failed(UErrorCode st, const char *what, ddp_err *err)
{
    return ddp_fail(err, st == U_MEMORY_ALLOCATION_ERROR ? DDP_ERUNTIME : DDP_EUSAGE,
                    "NFC normalization: ICU's %s failed: %s", what, u_errorName(st));
}

/* text as UTF-16 in *u16 (malloc'd), *n16 units. */
static int to_utf16(const char *text, int32_t len, UChar **u16, int32_t *n16, ddp_err *err)
{
    UErrorCode st = U_ZERO_ERROR;
    u_strFromUTF8(NULL, 0, n16, text, len, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
        return icu_failed(st, "u_strFromUTF8", err);
    *u16 = malloc(((size_t)*n16 + 1) * sizeof **u16);
    if (!*u16)
        return ddp_fail(err, DDP_ERUNTIME, "NFC normalization: out of memory for %d UTF-16 units", *n16);
    st = U_ZERO_ERROR;
    u_strFromUTF8(*u16, *n16 + 1, NULL, text, len, &st);
    return U_FAILURE(st) ? icu_failed(st, "u_strFromUTF8", err) : DDP_OK;
}

/* src normalized into *dst (malloc'd), *n units. */
static int normalize(const UNormalizer2 *nfc, const UChar *src, int32_t n_src, UChar **dst, int32_t *n,
                     ddp_err *err)
{
    UErrorCode st = U_ZERO_ERROR;
    *n = unorm2_normalize(nfc, src, n_src, NULL, 0, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
        return icu_failed(st, "unorm2_normalize", err);
    *dst = malloc(((size_t)*n + 1) * sizeof **dst);
    if (!*dst)
        return ddp_fail(err, DDP_ERUNTIME, "NFC normalization: out of memory for %d UTF-16 units", *n);
    st = U_ZERO_ERROR;
    unorm2_normalize(nfc, src, n_src, *dst, *n + 1, &st);
    return U_FAILURE(st) ? icu_failed(st, "unorm2_normalize", err) : DDP_OK;
}

static int to_utf8(const UChar *u16, int32_t n16, char **out, size_t *out_len, ddp_err *err)
{
    UErrorCode st = U_ZERO_ERROR;
    int32_t n = 0;
    u_strToUTF8(NULL, 0, &n, u16, n16, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st))
        return icu_failed(st, "u_strToUTF8", err);
    *out = malloc((size_t)n + 1);
    if (!*out)
        return ddp_fail(err, DDP_ERUNTIME, "NFC normalization: out of memory for %d bytes", n);
    st = U_ZERO_ERROR;
    u_strToUTF8(*out, n + 1, NULL, u16, n16, &st);
    *out_len = (size_t)n;
    return U_FAILURE(st) ? icu_failed(st, "u_strToUTF8", err) : DDP_OK;
}

int unicode_nfc(const char *text, size_t len, char **out, size_t *out_len, ddp_err *err)
{
    *out = NULL;
    *out_len = 0;
    if (len >= NFC_MAX_BYTES)
        return ddp_fail(err, DDP_EUSAGE, "NFC normalization: %zu bytes of text; at most %zu", len, NFC_MAX_BYTES - 1);
    UErrorCode st = U_ZERO_ERROR;
    const UNormalizer2 *nfc = unorm2_getNFCInstance(&st);
    if (U_FAILURE(st))
        return icu_failed(st, "unorm2_getNFCInstance", err);
    UChar *u16 = NULL, *normal = NULL;
    int32_t n16 = 0, n_normal = 0;
    int rc = to_utf16(text, (int32_t)len, &u16, &n16, err);
    if (!rc) {
        st = U_ZERO_ERROR;
        UBool same = unorm2_isNormalized(nfc, u16, n16, &st);
        if (U_FAILURE(st))
            rc = icu_failed(st, "unorm2_isNormalized", err);
        else if (!same && !(rc = normalize(nfc, u16, n16, &normal, &n_normal, err)))
            rc = to_utf8(normal, n_normal, out, out_len, err);
    }
    free(u16);
    free(normal);
    if (rc) {
        free(*out);
        *out = NULL;
        *out_len = 0;
    }
    return rc;
}
