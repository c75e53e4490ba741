/* test_fault.h — the test-only fault switch DDP_TEST_FAULT=KIND:RANK:STEP[:SECONDS] (README
 * "Environment variables"), parsed in this one place. It only says which fault, on which rank, at
 * which step: each place that injects faults (the training loop, ddprun's rank wrapper) acts on the
 * kinds it owns and ignores the others. Nothing here may act on its own or run outside tests'
 * request: with DDP_TEST_FAULT unset it is inert. It knows the process's rank (test_fault_set_rank)
 * for the places that cannot (a checkpoint writer's thread). */
#ifndef DDP_TEST_FAULT_H
#define DDP_TEST_FAULT_H

#include <stdbool.h>

typedef struct test_fault {
    char kind[24];   /* "kill", "stop-at-start", ... (lower case letters and '-') */
    int rank;
    long long step;
    double seconds;  /* 0 when not given */
} test_fault;

/* The fault DDP_TEST_FAULT names, on the first attempt of a job only (DDPRUN_RESTART_COUNT unset
 * or 0), so that a restarted job runs clean. False when unset, malformed or restarted. */
bool test_fault_get(test_fault *f);

/* This process's rank, which test_fault_here compares a fault's RANK with (0 until it is set). */
void test_fault_set_rank(int rank);
/* Whether f is for this process's rank: RANK is its rank, or -1 (every rank). */
bool test_fault_here(const test_fault *f);

/* Sleeps f->seconds (the `sleep` kind, and how long a slow start lasts). */
void test_fault_sleep(const test_fault *f);
/* Whether DDP_TEST_FAULT is kind at step on this rank (test_fault_here); *f is the fault. */
bool test_fault_at(const char *kind, long long step, test_fault *f);
/* Sleeps the fault's SECONDS when test_fault_at(kind, step): a slow write, prune or commit. */
void test_fault_sleep_at(const char *kind, long long step);

#endif
