/* test_fault.c — DDP_TEST_FAULT's parser (test_fault.h). Holds only the process's rank and acts on
 * nothing. */
#include "test_fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool test_fault_get(test_fault *f)
{
    const char *spec = getenv("DDP_TEST_FAULT");
    const char *restart = getenv("DDPRUN_RESTART_COUNT");
    *f = (test_fault){0};
    if (!spec || (restart && atoi(restart) != 0))
        return false;
    return sscanf(spec, "%23[a-z-]:%d:%lld:%lf", f->kind, &f->rank, &f->step, &f->seconds) >= 3;
}

static _Atomic int fault_rank;

void test_fault_set_rank(int rank)
{
    fault_rank = rank;
}

bool test_fault_here(const test_fault *f)
{
    return f->rank == -1 || f->rank == fault_rank;
}

void test_fault_sleep(const test_fault *f)
{
    double s = f->seconds > 0 ? f->seconds : 0;
    nanosleep(&(struct timespec){(time_t)s, (long)((s - (double)(time_t)s) * 1e9)}, NULL);
}

bool test_fault_at(const char *kind, long long step, test_fault *f)
{
    return test_fault_get(f) && strcmp(f->kind, kind) == 0 && f->step == step && test_fault_here(f);
}

void test_fault_sleep_at(const char *kind, long long step)
{
    test_fault f;
    if (test_fault_at(kind, step, &f))
        test_fault_sleep(&f);
}
