/* unicode_nfc.h — Unicode Normalization Form C of UTF-8 text, as a tokenizer's NFC normalizer
 * applies it before splitting (Qwen2's). The normalization is ICU's (libicu), which knows every
 * composition; this module only converts between UTF-8 and ICU's UTF-16 and bounds the sizes.
 * It must not know about tokens or files. */
#ifndef DDP_UNICODE_NFC_H
#define DDP_UNICODE_NFC_H

#include <stddef.h>

#include "runtime/base/err.h"

/* text[0..len) must be valid UTF-8. When it is already in NFC, *out is NULL (use text as it is);
 * otherwise *out (malloc'd, the caller frees it) holds the normalized text, *out_len bytes. Fails
 * out of memory, or for text of 512 MiB or more (ICU counts in int32). */
int unicode_nfc(const char *text, size_t len, char **out, size_t *out_len, ddp_err *err);

#endif
