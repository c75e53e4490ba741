/* ckpt_set_internal.h — what the sharded-set sources share (ckpt_set.c, ckpt_set_load.c) and
 * nobody else uses. Not a contract: other modules include ckpt_set.h only. */
#ifndef DDP_CKPT_SET_INTERNAL_H
#define DDP_CKPT_SET_INTERNAL_H

#include "ckpt_internal.h"
#include "ckpt_set.h"

/* A shard file's tensor name "<prefix>@<offset>+<count>" as m's buffer index and range; -1 when
 * it names no buffer of m. */
int ckpt_set_parse_piece(const ckpt_manifest *m, const char *name, int *buffer, int64_t *offset, int64_t *count);
/* The extents cover each buffer of m exactly once and lie inside it; what names the set in errors. */
int ckpt_set_check_cover(const ckpt_manifest *m, const char *what, ddp_err *err);

#endif
