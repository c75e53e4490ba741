/* fuzz_util.h — what the libFuzzer targets of tests/fuzz share: a private scratch folder per
 * process for readers that take a path, writing one input there (as it is, or as a safetensors file
 * whose header length is made right), emptying it between inputs, and cutting an input into parts
 * at a separator.
 *
 * Harness failures (a full disk, a folder that cannot be made) abort with a message: they are
 * not findings about the code under test, and must not pass silently either. Nothing here may
 * keep state from one input to the next beyond the folder's name. */
#ifndef DDP_FUZZ_UTIL_H
#define DDP_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The process's scratch folder ($TMPDIR or /tmp, then ddprun-fuzz-XXXXXX), made at the first call
 * and removed with its contents at exit. */
const char *fuzz_dir(void);
/* fuzz_dir()/name, into out (out_size bytes). */
void fuzz_path(char *out, size_t out_size, const char *name);
/* Writes data[0..n) to path, replacing what was there. */
void fuzz_write_file(const char *path, const void *data, size_t n);
/* Writes a safetensors file to path from HEADER "@@DATA@@" DATA (data[0..n)): the 8-byte little-endian
 * length of HEADER, HEADER, then DATA (none without the separator), so that mutations of the header
 * reach the JSON instead of dying at its length. */
void fuzz_write_safetensors(const char *path, const uint8_t *data, size_t n);
/* Removes everything inside dir (files, and folders one level down with their files). */
void fuzz_clear_dir(const char *dir);

typedef struct fuzz_part { const uint8_t *p; size_t n; } fuzz_part;
/* Cuts data[0..n) at each occurrence of sep (sep_len bytes) into at most max parts (the last one
 * keeps the rest, separators included); returns the number of parts (>= 1 when max >= 1). */
size_t fuzz_split(const uint8_t *data, size_t n, const void *sep, size_t sep_len, fuzz_part *parts, size_t max);

#endif
