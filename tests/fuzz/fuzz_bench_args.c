/* fuzz_bench_args.c — libFuzzer target for `ddprun bench`'s argument parser (bench_parse_args,
 * launcher/bench/bench_opts.h).
 *
 * The input is cut at NUL bytes into argv (the first word is the collective, as after the OP word
 * of the command line; at most 32 words), each copied into its own allocation. Accepted
 * options must be consistent (-e not below -b, a finite step factor), and a known good command
 * line parsed right after must still parse (no state carried over from the call before); the
 * harness aborts otherwise. Parsing only:
 * nothing here runs a benchmark or prints. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/bench/bench_opts.h"
#include "tests/fuzz/fuzz_util.h"

#define MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    fuzz_part parts[MAX_ARGS];
    int argc = (int)fuzz_split(data, size, "", 1, parts, MAX_ARGS);
    char *argv[MAX_ARGS + 1];
    for (int i = 0; i < argc; i++)
        if (!(argv[i] = strndup((const char *)parts[i].p, parts[i].n)))
            abort();
    argv[argc] = NULL;
    bench_opts o;
    ddp_err err = {0};
    if (bench_parse_args(argc, argv, &o, &err) == DDP_OK &&
        (o.max_bytes < o.min_bytes || o.iters < 1 || o.warmup < 0 || !(o.step_factor > 1) ||
         !isfinite(o.step_factor) || !o.coll))
        abort();
    /* the input's words stay allocated until after the second parse: freed, ASan's allocator may
     * zero what a stale pointer into them reads, hiding the carried-over state */
    char good0[] = "allreduce", good1[] = "-b", good2[] = "8";
    char *good[] = {good0, good1, good2, NULL};
    if (bench_parse_args(3, good, &o, &err) != DDP_OK || o.min_bytes != 8) {
        fprintf(stderr, "\"allreduce -b 8\" fails after the input: %s\n", err.msg);
        abort();
    }
    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
