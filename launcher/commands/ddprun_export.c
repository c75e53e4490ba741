/* ddprun_export.c — `ddprun ckpt export --format llmc CHECKPOINT OUT.bin`: a training checkpoint's
 * parameters as llm.c's GPT-2 model file, and the reading of a GPT-2 checkpoint that `ddprun
 * generate` shares.
 *
 * The checkpoint is read whole and verified (every CRC) first; its recorded model description
 * gives the shape, so only GPT-2 checkpoints can be exported (anything else is refused naming the
 * model). Parameters are the checkpoint's "param/<name>" tensors; optimizer state is not
 * exported. The file layout and the atomic write are models/gpt2_llmc.c's. OUT is refused before
 * anything is read when it is the checkpoint itself (by any path: same device and inode), and when
 * it exists, unless --force. Runs in-process: no mpirun, no device. Must not write anything but
 * OUT. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "models/gpt2_llmc.h"

static const char export_usage[] =
    "usage: ddprun ckpt export --format llmc [--force] CHECKPOINT OUT.bin\n"
    "  llmc:    llm.c's GPT-2 model file (float32, version 3), for llm.c's train_gpt2 / test_gpt2 or\n"
    "           for checkpoint.init_from; only checkpoints of GPT-2 models can be exported\n"
    "  --force: replace OUT.bin when it exists (never the checkpoint itself)\n";

int gpt2_ckpt_open(const char *path, const char *use, ckpt_loaded *ck, gpt2_shape *shape, int64_t *seq_len,
                   ddp_err *err)
{
    int rc = ckpt_read(path, ck, err);
    if (rc)
        return rc;
    if (gpt2_parse_description(ck->hdr.model, shape, seq_len, err)) {
        ddp_fail(err, DDP_EUSAGE, "%s: checkpoint of %s; only GPT-2 checkpoints can be %s", path, ck->hdr.model,
                 use);
        ckpt_loaded_free(ck);
        return DDP_EUSAGE;
    }
    return DDP_OK;
}

const float *gpt2_ckpt_param(const ckpt_loaded *ck, const char *name, size_t numel)
{
    char full[CKPT_NAME_MAX];
    snprintf(full, sizeof full, "param/%s", name);
    const ckpt_tensor *t = ckpt_loaded_tensor(ck, full);
    return t && t->dtype == CKPT_F32 && ckpt_tensor_numel(t) == numel ? t->data : NULL;
}

static const float *ckpt_src(void *ctx, const char *name, size_t numel)
{
    return gpt2_ckpt_param(ctx, name, numel);
}

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddprun ckpt export: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", export_usage);
    return DDP_EUSAGE;
}

/* OUT may not be the checkpoint, and replaces an existing file only when forced. */
static int check_output(const char *in, const char *out, bool force)
{
    struct stat so, si;
    if (stat(out, &so) != 0)
        return DDP_OK; /* nothing there (or unreachable: the write says why) */
    if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        fprintf(stderr, "ddprun ckpt export: %s is the checkpoint being exported (%s); write to another file\n", out,
                in);
        return DDP_EUSAGE;
    }
    if (S_ISDIR(so.st_mode)) {
        fprintf(stderr, "ddprun ckpt export: %s is a directory; name the file to write\n", out);
        return DDP_EUSAGE;
    }
    if (!force) {
        fprintf(stderr, "ddprun ckpt export: %s exists; give --force to replace it\n", out);
        return DDP_EUSAGE;
    }
    return DDP_OK;
}

int ckpt_export_main(int argc, char **argv)
{
    const char *format = NULL, *in = NULL, *out = NULL;
    bool force = false;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(export_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--format")) {
            if (i + 1 >= argc)
                return usage("%s needs a value", a);
            format = argv[++i];
        } else if (!strncmp(a, "--format=", 9)) {
            format = a + 9;
        } else if (!strcmp(a, "--force")) {
            force = true;
        } else if (a[0] == '-' && a[1]) {
            return usage("unknown flag %s", a);
        } else if (!in) {
            in = a;
        } else if (!out) {
            out = a;
        } else {
            return usage("unexpected argument %s", a);
        }
    }
    if (!format)
        return usage("%s", "--format is required (llmc)");
    if (strcmp(format, "llmc"))
        return usage("unknown format \"%s\" (known: llmc)", format);
    if (!in || !out)
        return usage("%s", "needs CHECKPOINT and OUT.bin");
    int rc = check_output(in, out, force);
    if (rc)
        return rc;
    ckpt_loaded ck;
    gpt2_shape shape;
    int64_t seq_len;
    ddp_err err = {0};
    rc = gpt2_ckpt_open(in, "exported to llm.c's format", &ck, &shape, &seq_len, &err);
    if (!rc) {
        rc = gpt2_llmc_write(out, &shape, ckpt_src, &ck, &err);
        if (rc)
            ddp_prefix(&err, "%s", in);
        else
            printf("ckpt export: %s (step %lld, %s) -> %s (llm.c model file, float32)\n", in,
                   (long long)ck.hdr.step, ck.hdr.model, out);
        ckpt_loaded_free(&ck);
    }
    if (rc)
        fprintf(stderr, "ddprun ckpt export: %s\n", err.msg);
    fflush(stdout);
    return rc;
}
