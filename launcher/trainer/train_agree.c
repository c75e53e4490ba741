/* train_agree.c — every rank's verdict on something each rank did alone (train_agree.h): the
 * first failed rank found by a minimum over t->ctl, its status broadcast from it. Must not know what the ranks did. */
#include <stdint.h>

#include "train_agree.h"

int train_agree(train_job *t, int32_t mine, const char *what, ddp_err *err)
{
    comm *c = t->ctl;
    int32_t me = mine != DDP_OK ? c->rank : INT32_MAX, first = INT32_MAX, status = mine;
    ddp_err e = {0}; /* a failure of the agreement itself: this rank's own message comes first */
    int rc = c->ops->allreduce(c, &me, &first, 1, DT_INT32, OP_MIN, NULL, &e);
    if (rc == DDP_OK && first != INT32_MAX)
        rc = c->ops->broadcast(c, &status, 1, DT_INT32, first, NULL, &e);
    if (rc != DDP_OK)
        return mine != DDP_OK ? mine : ddp_fail(err, rc, "%s", e.msg);
    if (first == INT32_MAX)
        return DDP_OK;
    return first == c->rank || mine != DDP_OK ? mine : ddp_fail(err, status, "rank %d could not %s", first, what);
}
