/* json_read.h — runtime/hf's own: the RFC 8259 reader that json_doc_parse runs (json_read.c).
 * Not for use outside runtime/hf; everyone else calls json_doc.h. */
#ifndef DDP_JSON_READ_H
#define DDP_JSON_READ_H

#include <stddef.h>

#include "json_doc.h"

/* Reads text[0..len) as exactly one JSON text into j->doc (initialized and empty, j->name set):
 * DDP_OK, or DDP_EUSAGE naming NAME:LINE:COL and the reason (DDP_ERUNTIME when out of memory). */
int json_read_text(json_doc *j, const char *text, size_t len, ddp_err *err);

#endif
