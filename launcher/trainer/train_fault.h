/* train_fault.h — the training job's test-only hooks (train_fault.c): the DDP_TEST_FAULT switch's
 * kinds the loop owns, and the sample trace DDP_TEST_TRACE_DIR asks for. It owns their state
 * (struct train_fault: the trace file, the value a poisoned gradient gets), which exists only when
 * one of them is asked for. Must not change anything when neither variable is set. */
#ifndef DDP_TRAIN_FAULT_H
#define DDP_TRAIN_FAULT_H

#include "train_job.h"

/* Before the device opens: the state, and the trace file when DDP_TEST_TRACE_DIR is set. */
int train_fault_open(train_job *t, ddp_err *err);
void train_fault_close(train_job *t);
/* While the data loads: `setup-sleep` sleeps SECONDS (a mount that stopped answering). */
void train_fault_in_setup(const train_job *t);
/* Before each evaluation pass: slow-eval (sleeps SECONDS from step STEP on). */
void train_fault_in_eval(const train_job *t);
/* After optimizer step t->step, before the stop agreement. */
void train_fault_after_step(const train_job *t);
/* Optimizer step STEP's `fail`: after its backward issued the gradients' collectives, before they
 * are waited for, the step fails with an error (DDP_ERUNTIME into err; DDP_OK when not due). */
int train_fault_fail_step(const train_job *t, ddp_err *err);
/* For the last micro-step of the next optimizer step: the grad_ready callback (and its *ctx) that
 * tells the reducer of finished gradients, poisoning one first when a nan/inf fault is due. */
grad_ready_fn train_fault_grad_ready(train_job *t, void **ctx);
/* Before a micro-batch is staged: "epoch index" for each of its rows into the trace. */
void train_fault_trace(const train_job *t);

#endif
