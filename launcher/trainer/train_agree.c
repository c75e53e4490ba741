/* train_agree.c — every rank's verdict on something each rank did alone (train_agree.h): the
 * first failed rank (comm_first_failure over t->ctl) named to the others; and a start's memory rise
 * over the ranks. Must not know what the ranks did. */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "runtime/base/host_mem.h"
#include "runtime/base/log.h"
#include "train_agree.h"

int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err)
{
    return train_agree_then(t, mine, what, NULL, NULL, err);
}

int train_agree_then(train_job *t, int32_t mine, const char *what, void (*agreed)(void *), void *ctx, ddp_err *err)
{
    int32_t first, status;
    ddp_err e = {0}; /* a failure of the agreement itself: this rank's own message comes first */
    int rc = comm_first_failure(t->ctl, mine, &first, &status, &e);
    if (agreed)
        agreed(ctx);
    if (rc != DDP_OK)
        return mine != DDP_OK ? mine : ddp_fail(err, rc, "%s", e.msg);
    if (first < 0)
        return DDP_OK;
    if (first == t->ctl->rank || mine != DDP_OK)
        return mine;
    train_agree_bystander_pause();
    return ddp_fail(err, status, "rank %d could not %s", first, what);
}

void train_agree_bystander_pause(void) { nanosleep(&(struct timespec){TRAIN_AGREE_BYSTANDER_S, 0}, NULL); }

int64_t train_start_memory_mark(void)
{
    int64_t now = host_mem_rss_kib();
    return host_mem_reset_peak() == 0 ? now : -1;
}

int train_start_memory_log(train_job *t, const char *what, int64_t before, ddp_err *err)
{
    int64_t peak = host_mem_peak_kib(), rise = before >= 0 && peak >= 0 ? peak - before : -1;
    /* one maximum gives all three: -max(-r) = min(r), and rank 0 counts -1 among the others */
    int64_t mine[3] = {rise, -rise, t->ctl->rank == 0 ? -1 : rise}, ends[3];
    int rc = t->ctl->ops->allreduce(t->ctl, mine, ends, 3, DT_INT64, OP_MAX, NULL, err);
    int64_t most = ends[0], lowest = -ends[1];
    char shard[64] = "", others[64] = "";
    if (t->m->params_by_unit)
        snprintf(shard, sizeof shard, "a rank's shard %.0f MiB, ", (double)t->opt->n_state * 4 / 1048576);
    if (t->ctl->size > 1)
        snprintf(others, sizeof others, ", %.0f MiB on any rank but 0", (double)ends[2] / 1024);
    if (rc == DDP_OK && lowest >= 0)
        log_info("%sstart, %s: resident host memory rose by at most %.0f MiB on any rank%s (%sthe model %.0f MiB, "
                 "its largest tensor %.0f MiB)", t->m->params_by_unit ? "ZeRO-3 " : "", what, (double)most / 1024,
                 others, shard, (double)t->m->n_params * 4 / 1048576, (double)model_largest_tensor(t->m) * 4 / 1048576);
    return rc;
}
