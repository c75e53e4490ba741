/* comm_nccl_check.c — making NCCL misuse visible: collective fingerprints, the ddp.debug
 * cross-check, and the test-only fault switches that plant the failures the checks exist for.
 *
 * ddp.debug: before each collective every rank contributes its fingerprint (sequence number,
 * kind, reduction, type, count, root) to an MPI_Allgather on the control communicator; any
 * difference becomes an error on every rank naming both ranks and both fingerprints, where NCCL
 * would hang or corrupt memory. It costs one small host round trip per collective.
 * Test-only switches (environment, read once at creation):
 *   DDP_TEST_NCCL_STALL=RANK:SEQ  rank RANK stops participating just before collective #SEQ
 *                                 (sleeps forever, as a rank stuck in host code would)
 *   DDP_TEST_NCCL_SKEW=RANK:SEQ   rank RANK issues collective #SEQ with one element fewer
 * It must not issue collectives of its own on the NCCL communicator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/log.h"
#include "collectives/mpi_check.h"
#include "comm_nccl_internal.h"

const char *ncclcomm_kind_name(ncclcomm_kind k)
{
    static const char *const names[] = {
        [NK_ALLREDUCE] = "allreduce", [NK_BROADCAST] = "broadcast", [NK_REDUCE] = "reduce",
        [NK_ALLGATHER] = "allgather", [NK_REDUCESCATTER] = "reducescatter", [NK_ALLTOALL] = "alltoall",
        [NK_SENDRECV] = "sendrecv", [NK_BARRIER] = "barrier",
    };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

void ncclcomm_fingerprint_describe(const ncclcomm_fingerprint *fp, char *out, size_t len)
{
    char root[32] = "";
    if (fp->root >= 0)
        snprintf(root, sizeof root, ", root %d", (int)fp->root);
    snprintf(out, len, "%llu x %s%s%s%s", (unsigned long long)fp->count, comm_dtype_name((comm_dtype)fp->dtype),
             fp->op >= 0 ? ", " : "", fp->op >= 0 ? comm_op_name((comm_op)fp->op) : "", root);
}

static bool same(const ncclcomm_fingerprint *a, const ncclcomm_fingerprint *b)
{
    return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->op == b->op &&
           a->dtype == b->dtype && a->root == b->root;
}

static void describe_full(const ncclcomm_fingerprint *fp, char *out, size_t len)
{
    char what[160];
    ncclcomm_fingerprint_describe(fp, what, sizeof what);
    snprintf(out, len, "%s #%llu (%s)", ncclcomm_kind_name((ncclcomm_kind)fp->kind), (unsigned long long)fp->seq, what);
}

int ncclcomm_check_fingerprint(comm *c, const ncclcomm_fingerprint *fp, ddp_err *err)
{
    ncclcomm_impl *im = c->impl;
    ncclcomm_fingerprint *all = calloc((size_t)c->size, sizeof *all);
    if (!all)
        return ddp_fail(err, DDP_ERUNTIME, "ddp.debug: out of memory for %d fingerprints", c->size);
    int rc = MPI_Allgather(fp, (int)sizeof *fp, MPI_BYTE, all, (int)sizeof *fp, MPI_BYTE, im->ctl);
    if (rc != MPI_SUCCESS) {
        free(all);
        mpi_fail(err, rc, "MPI_Allgather", __FILE__, __LINE__);
        return ddp_prefix(err, "ddp.debug fingerprints");
    }
    int differs = -1;
    for (int r = 1; r < c->size && differs < 0; r++)
        if (!same(&all[0], &all[r]))
            differs = r;
    if (differs < 0) {
        free(all);
        return DDP_OK;
    }
    char a[224], b[224];
    describe_full(&all[0], a, sizeof a);
    describe_full(&all[differs], b, sizeof b);
    free(all);
    return ddp_fail(err, DDP_ERUNTIME, "ddp.debug: collective mismatch%s%s: rank 0 issues %s but rank %d issues %s "
                    "(every rank must issue the same collectives in the same order with the same sizes)",
                    c->label[0] ? " at " : "", c->label, a, differs, b);
}

/* "RANK:SEQ" from the environment; absent means rank -1 (off). */
static int read_switch(const char *name, int *rank, uint64_t *seq, ddp_err *err)
{
    const char *s = getenv(name);
    *rank = -1;
    *seq = 0;
    if (!s || !*s)
        return DDP_OK;
    unsigned long long q = 0;
    char tail;
    if (sscanf(s, "%d:%llu%c", rank, &q, &tail) != 2 || *rank < 0 || q == 0)
        return ddp_fail(err, DDP_EUSAGE, "%s=%s: expected RANK:SEQ (collective numbers start at 1)", name, s);
    *seq = q;
    return DDP_OK;
}

int ncclcomm_faults_read(ncclcomm_impl *im, ddp_err *err)
{
    int rc = read_switch("DDP_TEST_NCCL_STALL", &im->stall_rank, &im->stall_seq, err);
    if (rc == DDP_OK)
        rc = read_switch("DDP_TEST_NCCL_SKEW", &im->skew_rank, &im->skew_seq, err);
    return rc;
}

void ncclcomm_faults_apply(comm *c, ncclcomm_fingerprint *fp)
{
    ncclcomm_impl *im = c->impl;
    if (im->skew_rank == c->rank && im->skew_seq == fp->seq && fp->count > 0) {
        log_warn("test fault DDP_TEST_NCCL_SKEW: collective #%llu issued with %llu elements instead of %llu",
                 (unsigned long long)fp->seq, (unsigned long long)fp->count - 1, (unsigned long long)fp->count);
        fp->count--;
    }
    if (im->stall_rank == c->rank && im->stall_seq == fp->seq) {
        log_warn("test fault DDP_TEST_NCCL_STALL: this rank stops participating before collective #%llu",
                 (unsigned long long)fp->seq);
        for (;;)
            pause();
    }
}
