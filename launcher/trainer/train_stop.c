/* train_stop.c — the stop flags (train_stop.h): their one definition, so that the files that set
 * or read them (the worker, the step loop, checkpoints, the fault switch, text samples) need not
 * include each other. Must not hold anything else. */
#include "train_stop.h"

volatile sig_atomic_t train_stop_requested = 0;
volatile sig_atomic_t train_stop_answered = 0;
volatile sig_atomic_t train_checkpoint_safe = 0;
volatile sig_atomic_t train_resume_limit_s = 0;
