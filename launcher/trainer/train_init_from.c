/* train_init_from.c — checkpoint.init_from in the training job: the model's shape a config leaves
 * to it (the model section's shape keys, read by rank 0 from the llm.c file or Hugging Face
 * folder and broadcast before anything is built, on a resume too, so the config hash is the same)
 * and, when nothing was resumed, the parameters, through the kind's row of models/model_files.h:
 * read by rank 0 and broadcast like a checkpoint, or under ZeRO-3 from a folder each rank reading
 * only its own pieces (train_zero.c). Must not decide whether a job resumes (train_ckpt.c) or know
 * any model kind. */
#include <stdio.h>
#include <string.h>

#include "models/model_files.h"
#include "runtime/base/activity.h"
#include "runtime/base/dirs.h"
#include "runtime/base/log.h"
#include "train_agree.h"
#include "train_init_from.h"
#include "train_replica.h"
#include "train_zero.h"

/* model.kind's files (models/model_files.h); the config allows checkpoint.init_from only for a kind
 * that has them (config_check.c). */
static int kind_files(const config *cfg, const model_files **f, ddp_err *err)
{
    *f = model_files_of(cfg->model.kind);
    return *f ? DDP_OK : ddp_fail(err, DDP_EUSAGE, "checkpoint.init_from: this model.kind starts from no file");
}

int train_init_from_shape(config *cfg, comm *ctl, ddp_err *err)
{
    if (!config_shape_pending(cfg))
        return DDP_OK;
    const model_files *f;
    int frc = kind_files(cfg, &f, err);
    if (frc != DDP_OK)
        return frc;
    const char *path = cfg->checkpoint.init_from, *kind = f->name;
    config_shape s;
    /* rank 0's status, whether the path is a folder where rank 0 runs, the shape */
    int64_t msg[2 + (sizeof s + sizeof(int64_t) - 1) / sizeof(int64_t)];
    memset(&s, 0, sizeof s);
    memset(msg, 0, sizeof msg);
    if (ctl->rank == 0) {
        activity_set("reading the model shape from checkpoint.init_from %s", path);
        msg[1] = path_is_dir(path);
        msg[0] = f->read_shape(path, msg[1], &s, err); /* s: the kind's member */
        if (msg[0] != DDP_OK)
            ddp_prefix(err, "checkpoint.init_from, for the model.%s shape %s leaves out", kind, cfg->source);
        memcpy(msg + 2, &s, sizeof s);
    }
    int rc = ctl->ops->broadcast(ctl, msg, sizeof msg / sizeof msg[0], DT_INT64, 0, NULL, err);
    if (rc == DDP_OK && msg[0] != DDP_OK)
        return ctl->rank ? ddp_fail(err, (int)msg[0], "rank 0 could not read the shape of checkpoint.init_from %s",
                                    path) : (int)msg[0];
    if (rc != DDP_OK)
        return rc;
    bool hf = msg[1];
    memcpy(&s, msg + 2, sizeof s);
    char file[CFG_PATH_MAX + 16], text[512];
    snprintf(file, sizeof file, "%s%s", path, hf ? "/" HF_CONFIG : "");
    rc = config_take_shape(cfg, &s, file, hf ? f->hf_shape_names : f->llmc_shape_names, err);
    if (rc == DDP_OK && ctl->rank == 0) {
        f->format_shape(&s, text, sizeof text);
        log_info("model.%s shape from checkpoint.init_from %s: %s", kind, file, text);
    } else if (rc != DDP_OK && ctl->rank != 0) {
        err->msg[0] = '\0'; /* every rank found the same; rank 0 reports it */
    }
    return rc;
}

/* Rank 0's part of init_from_rank0: the parameters of the llm.c file or Hugging Face folder at path,
 * as model.kind's files read them. */
static int load_init_from(train_job *t, const char *path, bool hf, ddp_err *err)
{
    const model_files *f;
    int rc = kind_files(t->cfg, &f, err);
    return rc != DDP_OK ? rc : f->load(t->m, path, hf, err);
}

/* Rank 0 reads the llm.c file, or the Hugging Face folder, into its parameters (validated against
 * this run's model shape), every rank learns its verdict, then rank 0's parameters are broadcast;
 * under ZeRO-3 through a whole parameter buffer made for the while. */
static int init_from_rank0(train_job *t, const char *path, bool hf, ddp_err *err)
{
    int32_t status = DDP_OK;
    int rc = t->zero ? train_zero_unshard_params(t, err) : DDP_OK;
    if (rc != DDP_OK)
        return rc;
    if (t->ctl->rank == 0 && (status = load_init_from(t, path, hf, err)) != DDP_OK)
        ddp_prefix(err, "checkpoint.init_from");
    rc = t->ctl->ops->broadcast(t->ctl, &status, 1, DT_INT32, 0, NULL, err);
    if (rc == DDP_OK && status != DDP_OK) {
        if (t->ctl->rank != 0)
            ddp_fail(err, status, "rank 0 could not load checkpoint.init_from %s", path);
        return status;
    }
    if (rc == DDP_OK)
        rc = train_broadcast_params(t, err);
    return rc == DDP_OK && t->zero ? train_zero_reshard_params(t, err) : rc;
}

/* checkpoint.init_from, when nothing was resumed: the llm.c file, or the Hugging Face folder when
 * the path is a directory — which under ZeRO-3 every rank reads its own pieces of; without it, the
 * parameters drawn from run.seed. */
int train_init_from(train_job *t, ddp_err *err)
{
    const char *path = t->cfg->checkpoint.init_from;
    if (!path[0])
        return train_draw_params(t, err);
    /* rank 0's view decides the way every rank goes: a host without the path goes rank 0's way,
     * and under ZeRO-3 is named by its own read failing */
    int32_t hf = t->ctl->rank == 0 && path_is_dir(path);
    int rc = t->ctl->ops->broadcast(t->ctl, &hf, 1, DT_INT32, 0, NULL, err);
    if (rc != DDP_OK)
        return rc;
    bool own_pieces = t->zero && hf;
    activity_set("loading the parameters of checkpoint.init_from %s", path);
    int64_t before = train_start_memory_mark();
    rc = own_pieces ? train_zero_init_from_folder(t, path, err) : init_from_rank0(t, path, hf, err);
    if (rc == DDP_OK)
        rc = train_start_memory_log(t, "checkpoint.init_from", before, err);
    if (rc == DDP_OK)
        log_info("parameters from the %s %s (checkpoint.init_from%s)", hf ? "Hugging Face folder" : "llm.c model file",
                 path, own_pieces ? ", each rank its own pieces" : "");
    return rc;
}

