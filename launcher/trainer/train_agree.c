/* train_agree.c — every rank's verdict on something each rank did alone (train_agree.h): the
 * first failed rank (comm_first_failure over t->ctl) named to the others. Must not know what the
 * ranks did. */
#include <stdint.h>
#include <time.h>

#include "train_agree.h"

int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err)
{
    int32_t first, status;
    ddp_err e = {0}; /* a failure of the agreement itself: this rank's own message comes first */
    int rc = comm_first_failure(t->ctl, mine, &first, &status, &e);
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
