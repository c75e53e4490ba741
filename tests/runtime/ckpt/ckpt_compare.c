/* ckpt_compare.c — test tool: how close two checkpoints' float32 tensors are.
 *
 * usage: ckpt_compare A B PREFIX TOL
 * Over every float32 tensor whose name starts with PREFIX (which both files must have, with the
 * same shapes), prints max|a-b| / max|a| and exits 0 when it is <= TOL, 1 otherwise.
 * It is the DDP-equivalence referee; bit-exactness is `ddprun ckpt diff`'s job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/ckpt.h"
#include "runtime/ckpt/ckpt_set.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: ckpt_compare A B PREFIX TOL\n");
        return 2;
    }
    ckpt_loaded a = {0}, b = {0};
    ddp_err err = {0};
    if (ckpt_read_any(argv[1], &a, false, &err) != DDP_OK || ckpt_read_any(argv[2], &b, false, &err) != DDP_OK) {
        fprintf(stderr, "ckpt_compare: %s\n", err.msg);
        return 2;
    }
    size_t plen = strlen(argv[3]);
    double max_diff = 0, max_abs = 0;
    int compared = 0;
    for (int i = 0; i < a.n_tensors; i++) {
        const ckpt_tensor *x = &a.tensors[i];
        if (strncmp(x->name, argv[3], plen) != 0 || x->dtype != CKPT_F32)
            continue;
        const ckpt_tensor *y = ckpt_loaded_tensor(&b, x->name);
        if (!y || ckpt_tensor_numel(y) != ckpt_tensor_numel(x)) {
            fprintf(stderr, "ckpt_compare: %s missing or of another shape in %s\n", x->name, argv[2]);
            return 1;
        }
        const float *p = x->data, *q = y->data;
        for (uint64_t k = 0; k < ckpt_tensor_numel(x); k++) {
            max_diff = fmax(max_diff, fabs((double)p[k] - (double)q[k]));
            max_abs = fmax(max_abs, fabs((double)p[k]));
        }
        compared++;
    }
    double rel = max_abs > 0 ? max_diff / max_abs : max_diff;
    double tol = atof(argv[4]);
    printf("%d tensors under '%s': max|diff| %.3e, max|a| %.3e, relative %.3e (tolerance %.1e) %s\n", compared,
           argv[3], max_diff, max_abs, rel, tol, compared > 0 && rel <= tol ? "OK" : "FAILED");
    ckpt_loaded_free(&a);
    ckpt_loaded_free(&b);
    return compared > 0 && rel <= tol ? 0 : 1;
}
