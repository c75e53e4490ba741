/* ckpt_relayout.c — test tool: a committed sharded set whose tensor table no longer matches its
 * model's layout, as a set written by a build that laid the same model's tensors out otherwise.
 *
 * usage: ckpt_relayout SET_DIR
 * Swaps the offsets of the first two tensors of the manifest's table that have the same number of
 * elements and commits the set again with that table (its shards untouched); prints the two
 * names. Exit 0 when done, 1 when no such pair exists or the set cannot be read or committed. */
#include <stdio.h>
#include <string.h>

#include "runtime/ckpt/ckpt_set.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ckpt_relayout SET_DIR\n");
        return 1;
    }
    ckpt_manifest m;
    ddp_err err = {0};
    if (ckpt_manifest_read(argv[1], &m, &err) != DDP_OK) {
        fprintf(stderr, "ckpt_relayout: %s\n", err.msg);
        return 1;
    }
    int a = -1, b = -1;
    for (int i = 0; i < m.n_tensors && b < 0; i++)
        for (int j = i + 1; j < m.n_tensors && b < 0; j++)
            if (ckpt_set_tensor_numel(&m.tensors[i]) == ckpt_set_tensor_numel(&m.tensors[j]))
                a = i, b = j;
    int rc = 1;
    if (b >= 0) {
        int64_t at = m.tensors[a].offset;
        m.tensors[a].offset = m.tensors[b].offset;
        m.tensors[b].offset = at;
        bool alternate = strstr(m.shards[0].name, "-alt") != NULL;
        rc = ckpt_set_commit(argv[1], &m, m.n_shards, alternate, NULL, &err) == DDP_OK ? 0 : 1;
        if (rc == 0)
            printf("%s %s\n", m.tensors[a].name, m.tensors[b].name);
        else
            fprintf(stderr, "ckpt_relayout: %s\n", err.msg);
    } else {
        fprintf(stderr, "ckpt_relayout: no two tensors of %s of one size\n", argv[1]);
    }
    ckpt_manifest_free(&m);
    return rc;
}
