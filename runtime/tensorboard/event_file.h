/* event_file.h — a TensorBoard event file (events.out.tfevents.SECONDS.HOST.PID.N), written as
 * TensorBoard and `wandb sync --sync-tensorboard` read it: TFRecord framing (the data's length as a
 * little-endian uint64, its masked CRC32C, the data, the data's masked CRC32C) around serialized
 * tensorflow.Event messages: the first holds file_version "brain.Event:2", each later one a step,
 * a wall time and a Summary of values, a scalar as simple_value, a text as a string tensor with the
 * text plugin's metadata, or a SessionLog (a restart). Every event is flushed as it is committed, so a running job's file can
 * be read; one whose write fails is cut off again, so the file holds whole records only.
 * Knows nothing of training: the caller chooses tags and steps. */
#ifndef DDP_EVENT_FILE_H
#define DDP_EVENT_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"

typedef struct event_file event_file;

/* Creates dir (with parents) and a new event file in it named for the time, host, process and the
 * process's count of files opened, and writes the file_version event. */
int event_file_open(const char *dir, const char *host, event_file **out, ddp_err *err);
const char *event_file_path(const event_file *f);

/* One event: begin, add values, commit (written and flushed). An add that runs out of memory is
 * reported by commit. */
void event_file_begin(event_file *f, int64_t step, double wall_time);
void event_file_add_scalar(event_file *f, const char *tag, float value);
/* text[0..len): bytes, sent as UTF-8 (an ill-formed part of it as U+FFFD). */
void event_file_add_text(event_file *f, const char *tag, const char *text, size_t len);
int event_file_commit(event_file *f, ddp_err *err);
/* A SessionLog START event at step: TensorBoard's reader then drops the events at that step and
 * later that files before this one hold (a restarted job's steps, trained again), and flushes it. */
int event_file_session_start(event_file *f, int64_t step, double wall_time, ddp_err *err);

/* Flushed, made durable (fsync) and closed; an error names the file. NULL is fine. */
int event_file_close(event_file *f, ddp_err *err);

/* CRC-32C (Castagnoli) of data, and TFRecord's mask of a CRC; exposed for the unit test. */
uint32_t crc32c(const void *data, size_t n);
uint32_t crc32c_masked(uint32_t crc);

#endif
