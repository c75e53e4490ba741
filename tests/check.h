/* check.h — the assertion helpers every C test uses.
 *
 * CHECK records a failure with file:line and keeps going, so one run reports every broken
 * expectation; check_done() prints the tally and gives the process exit status (0 only when
 * nothing failed and at least one check ran, so a test that asserts nothing fails). With
 * DDP_TEST_FAIL_FAST=1 the first failure ends the process with status 1 instead: the verdict is the
 * same, sooner (scripts/mutation-check, which needs only the verdict, sets it).
 * Header-only on purpose: tests include it and nothing else of the test framework. */
#ifndef DDP_CHECK_H
#define DDP_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failed_ = 0, check_ran_ = 0;

static inline void check_fail_fast_(void)
{
    const char *v = getenv("DDP_TEST_FAIL_FAST");
    if (v && strcmp(v, "1") == 0) {
        fprintf(stderr, "DDP_TEST_FAIL_FAST: stopping at the first failed check\n");
        exit(1);
    }
}

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        check_ran_++;                                                             \
        if (!(cond)) {                                                            \
            check_failed_++;                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            check_fail_fast_();                                                   \
        }                                                                         \
    } while (0)

#define CHECK_EQ_INT(a, b) CHECK((long long)(a) == (long long)(b), "%s = %lld, expected %lld", #a, (long long)(a), (long long)(b))
#define CHECK_STR_EQ(a, b) CHECK(strcmp((a), (b)) == 0, "\"%s\" is not \"%s\"", (a), (b))
#define CHECK_STR_CONTAINS(hay, needle) CHECK(strstr((hay), (needle)) != NULL, "\"%s\" does not contain \"%s\"", (hay), (needle))
/* |a-b| <= atol + rtol*|b| */
#define CHECK_CLOSE(a, b, rtol, atol) CHECK(fabs((double)(a) - (double)(b)) <= (atol) + (rtol) * fabs((double)(b)), "%s = %.9g, expected %.9g", #a, (double)(a), (double)(b))

static inline int check_done(const char *name)
{
    if (check_ran_ == 0) {
        fprintf(stderr, "%s: no checks ran\n", name);
        return 1;
    }
    fprintf(stderr, "%s: %d checks, %d failed\n", name, check_ran_, check_failed_);
    return check_failed_ ? 1 : 0;
}

#endif
