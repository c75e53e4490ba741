/* train_profile_report.h — rank 0's report of a finished profiler window (train_profile_report.c)
 * and the table of known GPUs' peaks it owns. It keeps no state. Must not record anything or touch
 * the device: it reads the finished records only. */
#ifndef DDP_TRAIN_PROFILE_REPORT_H
#define DDP_TRAIN_PROFILE_REPORT_H

#include "runtime/device/device_prof.h"
#include "train_job.h"

/* A GPU's dense peak FLOP/s for a training job's GEMMs (bf16 under precision bf16, tf32 with
 * cuda.tf32, else fp32) from NVIDIA's datasheets; 0 when unknown (the CPU, the emulator, a GPU the
 * table lacks). */
double train_device_peak_flops(const train_job *t);

/* Rank 0's table of a finished window (malloc'd text, printed at the end of training) and
 * run.dir/profile.json; first_step and planned say which steps the window meant. */
int train_profile_report(const train_job *t, const device_prof *rec, int64_t first_step, int64_t planned,
                         char **table, ddp_err *err);

#endif
