/* ckpt_internal.h — what the checkpoint sources share among themselves and nobody else uses:
 * the file layout plan and the header encoder (ckpt_format.c), used by the writer (ckpt.c), and the
 * checked size of a tensor's shape and the duplicate-name check (also the sharded sets' manifest
 * check, ckpt_set.c).
 * Not a contract: other modules include ckpt.h only. */
#ifndef DDP_CKPT_INTERNAL_H
#define DDP_CKPT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"

#define CKPT_MAGIC "DDPCKPT"     /* 8 bytes with its NUL */
#define CKPT_PREAMBLE_BYTES 32

/* Where everything goes in the file; crc[] is filled by the writer as it streams the data. */
typedef struct ckpt_layout {
    int n;
    uint64_t *offset, *nbytes;
    uint32_t *crc;
    uint32_t header_len;     /* bytes of the header section after the preamble */
    uint64_t data_start;     /* first tensor offset (aligned) */
    uint64_t file_len;
} ckpt_layout;

/* Validates s (names, dtypes, shapes, data pointers, duplicates) and plans the layout. */
int ckpt_layout_plan(const ckpt_state *s, ckpt_layout *L, ddp_err *err);
void ckpt_layout_free(ckpt_layout *L);
/* Encodes preamble + header section (with L->crc) into a malloc'd buffer of data_start bytes,
 * zero padded; *out must be freed by the caller. */
int ckpt_header_encode(const ckpt_state *s, const ckpt_layout *L, uint8_t **out, ddp_err *err);

/* numel * element size, or UINT64_MAX when the shape is invalid (ndim outside 0..CKPT_MAX_NDIM, a
 * negative dimension, an unknown dtype) or the product overflows. */
uint64_t ckpt_tensor_bytes_checked(ckpt_dtype dtype, int ndim, const int64_t *shape);

/* Sets *repeated to a name held by two of the n records at items (each stride bytes, its
 * NUL-terminated name at name_at bytes in), or to NULL when every name is distinct: the one
 * duplicate check of a file's tensors, a manifest's tensors and its shards. It sorts pointers to
 * the names, so a table of a million entries read from a damaged file is checked in n log n, not
 * n^2. Returns 0, or -1 when out of memory for the pointers. */
int ckpt_find_repeated_name(const void *items, int n, size_t stride, size_t name_at, const char **repeated);

/* Reads n bytes of fd at offset at into buf, EINTR retried: a read error or a file that ends
 * early (shrank since its size or table was read) is an error naming path. The one read loop of
 * the checkpoint readers. */
int ckpt_read_at(int fd, const char *path, void *buf, uint64_t n, uint64_t at, ddp_err *err);

/* Sets SIGXFSZ to SIG_IGN (once per process) if it is at its default; see ckpt.h. */
void ckpt_ignore_sigxfsz_once(void);

/* Round n up to a multiple of CKPT_ALIGN. */
static inline uint64_t ckpt_align_up(uint64_t n) { return (n + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN; }

#endif
