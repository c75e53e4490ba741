/* ckpt_upload.h — copying checkpoints to durable storage with the user's commands:
 * checkpoint.upload_cmd after each save, in the background, and checkpoint.download_cmd before a
 * resume that finds no checkpoint in checkpoint.dir.
 *
 * Uploads run one at a time on a thread of their own and never block training; when a newer
 * checkpoint is saved while one uploads, only the newest waits (older waiting ones are skipped,
 * and said so). A failed upload is reported, not fatal. The checkpoints an upload still needs are
 * held from pruning (ckpt_prune_except). Command output is appended to a log file. This module
 * must not decide when checkpoints are written or which one a resume uses (ckpt.h does). */
#ifndef DDP_CKPT_UPLOAD_H
#define DDP_CKPT_UPLOAD_H

#include "ckpt.h"
#include "runtime/base/command.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The placeholders each command may use (README, checkpoint.upload_cmd / download_cmd); the
 * config loader checks commands against the same names. */
extern const char *const ckpt_upload_placeholders[];   /* path name dir step, NULL-terminated */
extern const char *const ckpt_download_placeholders[]; /* dir, NULL-terminated */

/* An uploader running cmd (placeholders: ckpt_upload_placeholders) with output appended to
 * log_path, each run limited to timeout_s. */
int ckpt_uploader_create(const char *cmd, double timeout_s, const char *log_path, ckpt_uploader **out,
                         ddp_err *err);
/* Queues the checkpoint at path (written and durable) for upload; returns at once. */
void ckpt_uploader_submit(ckpt_uploader *u, const char *path, int64_t step);
/* Copies into held the paths an upload still needs (running, waiting; "" where none). */
void ckpt_uploader_held(ckpt_uploader *u, char held[2][CKPT_PATH_MAX]);
/* How long the newest successful upload took, in seconds; 0 before the first. */
double ckpt_uploader_last_seconds(ckpt_uploader *u);
/* Waits until no upload runs or waits (saying what it waits for); returns how many failed. */
int ckpt_uploader_drain(ckpt_uploader *u);
/* Waits as drain does, silently, for at most max_s; false when an upload still runs or waits. */
bool ckpt_uploader_drain_for(ckpt_uploader *u, double max_s);
/* The job failed: the waiting upload is dropped and the running one ended (its process group
 * sent SIGTERM, then SIGKILL), so that the failed rank ends at once instead of holding the job
 * for up to the command's time limit; the checkpoints stay in checkpoint.dir. */
void ckpt_uploader_abandon(ckpt_uploader *u);
/* Drains, then stops the thread and frees u (NULL is fine). */
void ckpt_uploader_destroy(ckpt_uploader *u);

/* Runs cmd (placeholders: ckpt_download_placeholders, {dir} = dir, created first) to fetch
 * checkpoints into dir, output appended to log_path. DDP_ERUNTIME naming the command and how it
 * ended when it fails; DDP_EPREEMPTED when stop (may be NULL) answered non-zero and ended it. While it runs, and after it failed or was cut short (a timeout, the machine
 * taken), dir holds CKPT_DOWNLOAD_MARKER: what is in dir may be part of what it brings, the older
 * checkpoints whole and the newest missing. */
int ckpt_download(const char *cmd, const char *dir, double timeout_s, command_stop_fn stop, const char *log_path,
                  ddp_err *err);
/* Whether dir holds the marker of a download that did not finish. */
bool ckpt_download_unfinished(const char *dir);
/* Removes the marker: a run that saves into dir (having resumed or started without downloading)
 * leads it now, and an old download's marker must not hold its restarts back. */
void ckpt_download_forget(const char *dir);
#define CKPT_DOWNLOAD_MARKER ".download-unfinished"

#ifdef __cplusplus
}
#endif

#endif
