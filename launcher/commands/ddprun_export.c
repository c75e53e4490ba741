/* ddprun_export.c — `ddprun ckpt export --format llmc CHECKPOINT OUT.bin` (llm.c's model file)
 * and `ddprun ckpt export --format hf CHECKPOINT DIR` (a Hugging Face folder), a training
 * checkpoint's parameters, and the reading of a language model's checkpoint (and of the run's
 * config.resolved.yaml beside it) that `ddprun generate` shares.
 *
 * The checkpoint is read whole and verified (every CRC) first — a sharded set (a directory,
 * runtime/ckpt/ckpt_set.h) instead through read-only maps of its shard files, every piece's CRC
 * checked, each tensor then handed out in place (copied only when it is split between shards), so
 * the export holds no copy of the model; its recorded model description
 * gives the kind and shape, and the kind's row of models/model_files.h what it can be exported to
 * (anything else is refused naming the model). Parameters are the checkpoint's "param/<name>"
 * tensors; optimizer state is not exported. The file layouts are each kind's (its row's writers),
 * the atomic writes runtime/hf's and models/gpt2_llmc.c's. Before anything is read, OUT is refused when it is the checkpoint
 * itself (by any path: same device and inode) or exists, unless --force; DIR when it is not a
 * folder, or holds config.json or model*.safetensors, unless --force. DIR is written whole, after
 * the checkpoint checked out (runtime/hf/hf_folder_write.h): created when missing, else replaced,
 * its other files kept, and left as it was by a failed export. Its config.json's bos/eos token ids
 * are read from the folder the run started from or --token-ids-from's (token_ids_folder), as no
 * checkpoint holds them. Runs in-process: no mpirun, no
 * device. Must not write anything but OUT or DIR (and their temporaries beside them). */
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "models/model_files.h"
#include "runtime/ckpt/ckpt_set.h"

/* 10^12 MB is 10^18 bytes: the byte count stays well inside uint64_t (1.8e19). */
#define MAX_SHARD_MB 1e12
#define MAX_SHARD_MB_TEXT "1e12"

static const char export_usage[] =
    "usage: ddprun ckpt export --format llmc [--force] CHECKPOINT OUT.bin\n"
    "       ddprun ckpt export --format hf [--dtype f32|bf16] [--max-shard-mb N] [--token-ids-from SRC]\n"
    "                              [--force] CHECKPOINT DIR\n"
    "  llmc:    llm.c's GPT-2 model file (float32, version 3), for llm.c's train_gpt2 / test_gpt2 or\n"
    "           for checkpoint.init_from\n"
    "  hf:      a language model's Hugging Face folder (its ...ForCausalLM / ...LMHeadModel class) as\n"
    "           save_pretrained writes it (config.json, model.safetensors), for transformers'\n"
    "           from_pretrained or checkpoint.init_from;\n"
    "           DIR is created when missing\n"
    "  --dtype: the tensors' type in the hf folder: f32 (default) or bf16 (rounded to nearest even)\n"
    "  --max-shard-mb: above N MB (10^6 bytes; decimals allowed; N at most " MAX_SHARD_MB_TEXT ") of tensors,\n"
    "           the hf folder holds shards model-0000K-of-0000N.safetensors and\n"
    "           model.safetensors.index.json (default 5000, save_pretrained's 5GB)\n"
    "  --token-ids-from: the Hugging Face folder whose config.json's bos_token_id and eos_token_id\n"
    "           the hf folder's config.json holds (default: the folder the run started from, its\n"
    "           checkpoint.init_from; a run that started from none: the config class's defaults)\n"
    "  --force: replace OUT.bin when it exists (never the checkpoint itself), or DIR's config.json\n"
    "           and weight files (DIR's other files are kept); either is written whole beside it\n"
    "           and renamed into place, so a failed export leaves the earlier one as it was\n"
    "  llmc exports the checkpoints of the models llm.c has a file for (GPT-2), hf every language\n"
    "  model's\n";

/* What is exported: a checkpoint file read whole, or a sharded set read tensor by tensor (set;
 * ck then holds only its header). */
typedef struct export_src {
    ckpt_loaded ck;
    ckpt_set_reader *set;
} export_src;

static int src_open(const char *path, export_src *x, ddp_err *err)
{
    memset(x, 0, sizeof *x);
    if (!ckpt_is_set_dir(path))
        return ckpt_read(path, &x->ck, err);
    int rc = ckpt_set_open(path, &x->set, err);
    if (rc == DDP_OK)
        x->ck.hdr = ckpt_set_reader_manifest(x->set)->hdr;
    return rc;
}

static void src_close(export_src *x)
{
    ckpt_set_close(x->set);
    ckpt_loaded_free(&x->ck);
}

/* The checkpoint at path, its model rebuilt from its description, and that kind's llm.c writer;
 * a kind llm.c has no file for is a usage error naming the checkpoint's model. */
static int llmc_ckpt_open(const char *path, export_src *x, model_opts *opts, const model_files **f, ddp_err *err)
{
    int rc = src_open(path, x, err);
    if (rc)
        return rc;
    const ckpt_loaded *ck = &x->ck;
    int64_t seq_len;
    *f = model_opts_from_description(ck->hdr.model, opts, &seq_len, err) ? NULL : model_files_of(opts->kind);
    if (!*f || !(*f)->llmc_write) {
        ddp_fail(err, DDP_EUSAGE, "%s: checkpoint of %s; only GPT-2 checkpoints can be exported to llm.c's format",
                 path, ck->hdr.model);
        src_close(x);
        return DDP_EUSAGE;
    }
    return DDP_OK;
}

const float *ckpt_param_f32(const ckpt_loaded *ck, const char *name, size_t numel)
{
    char full[CKPT_NAME_MAX];
    snprintf(full, sizeof full, "param/%s", name);
    const ckpt_tensor *t = ckpt_loaded_tensor(ck, full);
    return t && t->dtype == CKPT_F32 && ckpt_tensor_numel(t) == numel ? t->data : NULL;
}

static const float *ckpt_src(void *ctx, const char *name, size_t numel)
{
    export_src *x = ctx;
    return x->set ? ckpt_set_tensor_f32(x->set, "param/", name, numel) : ckpt_param_f32(&x->ck, name, numel);
}

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddprun ckpt export: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", export_usage);
    return DDP_EUSAGE;
}

/* OUT may not be the checkpoint, nor a file of a sharded set's directory, and replaces an existing
 * file only when forced. */
static int check_output(const char *in, const char *out, bool force)
{
    struct stat so, si, sd;
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", out); /* dirname may write into its argument */
    bool in_ok = stat(in, &si) == 0;
    if (in_ok && S_ISDIR(si.st_mode) && stat(dirname(copy), &sd) == 0 && sd.st_dev == si.st_dev &&
        sd.st_ino == si.st_ino) {
        fprintf(stderr, "ddprun ckpt export: %s lies in the checkpoint being exported (the set %s); write it "
                "elsewhere\n", out, in);
        return DDP_EUSAGE;
    }
    if (stat(out, &so) != 0)
        return DDP_OK; /* nothing there (or unreachable: the write says why) */
    if (in_ok && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
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

/* path as it will resolve: its deepest existing ancestor resolved (realpath), the rest as named. */
static bool resolve_to_be(const char *path, char *out, size_t size)
{
    char head[PATH_MAX];
    size_t cut = strlen(path);
    if (cut >= sizeof head || size < PATH_MAX)
        return false;
    memcpy(head, path, cut + 1);
    while (!realpath(cut ? head : ".", out)) {
        if (!cut)
            return false; /* the working directory itself is gone */
        while (cut > 0 && head[cut - 1] == '/') /* from "a/b/c/": "a/b/", then "a/", then "" */
            cut--;
        while (cut > 0 && head[cut - 1] != '/')
            cut--;
        head[cut] = '\0';
    }
    const char *tail = path + cut;
    tail += strspn(tail, "/");
    size_t n = strlen(out);
    if (!*tail)
        return true;
    return snprintf(out + n, size - n, "%s%s", n > 1 ? "/" : "", tail) < (int)(size - n);
}

/* The folder replaced whole may not be the checkpoint, lie in it (a set's directory: its prune
 * would remove the export, or fail on it), nor hold it (the swap would carry the checkpoint, a
 * run's checkpoints, into the new folder). */
static int check_apart(const char *in, const char *dir)
{
    char rin[PATH_MAX], rdir[PATH_MAX];
    if (!realpath(in, rin) || !resolve_to_be(dir, rdir, sizeof rdir))
        return DDP_OK; /* the read or the write says why */
    size_t li = strlen(rin), ld = strlen(rdir);
    bool in_it = !strncmp(rdir, rin, li) && (rdir[li] == '/' || !rdir[li]);
    bool holds = ld == 1 || (!strncmp(rin, rdir, ld) && rin[ld] == '/');
    if (!in_it && !holds)
        return DDP_OK;
    fprintf(stderr, "ddprun ckpt export: %s %s the checkpoint being exported (%s); write the folder elsewhere\n",
            dir, in_it ? (li == ld ? "is" : "lies in") : "holds", in);
    return DDP_EUSAGE;
}

/* DIR is missing, or a folder holding no export's files (any, when forced). */
static int check_folder(const char *dir, bool force)
{
    struct stat sd;
    if (stat(dir, &sd) != 0 && errno == ENOENT) { /* created after the checkpoint checked out, in its parent */
        char parent[PATH_MAX];
        size_t len = (size_t)snprintf(parent, sizeof parent, "%s", dir);
        while (len > 1 && parent[len - 1] == '/') /* "a/b/" is b in a */
            parent[--len] = '\0';
        char *slash = strrchr(parent, '/');
        const char *p = !slash ? "." : slash == parent ? "/" : (*slash = '\0', parent);
        int found = stat(p, &sd), why = errno;
        if (found == 0 && S_ISDIR(sd.st_mode))
            return DDP_OK;
        fprintf(stderr, "ddprun ckpt export: %s: its parent %s is %s; the export makes the folder, not its parents\n",
                dir, p, found != 0 && why != ENOENT ? strerror(why) : found != 0 ? "missing" : "not a folder");
        return DDP_EUSAGE;
    }
    if (stat(dir, &sd) != 0) {
        fprintf(stderr, "ddprun ckpt export: %s: %s\n", dir, strerror(errno));
        return DDP_EUSAGE;
    }
    if (!S_ISDIR(sd.st_mode)) {
        fprintf(stderr, "ddprun ckpt export: %s is not a directory; --format hf writes a folder\n", dir);
        return DDP_EUSAGE;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "ddprun ckpt export: %s: cannot list: %s\n", dir, strerror(errno));
        return DDP_EUSAGE;
    }
    int rc = DDP_OK;
    for (struct dirent *e; !force && !rc && (e = readdir(d));)
        if (hf_export_or_tokenizer_file(e->d_name)) {
            fprintf(stderr, "ddprun ckpt export: %s already holds %s; give --force to replace the folder's model\n",
                    dir, e->d_name);
            rc = DDP_EUSAGE;
        }
    closedir(d);
    return rc;
}

typedef struct export_args {
    const char *format, *in, *out, *dtype, *token_ids_from;
    double shard_mb;
    bool force;
} export_args;

static int export_llmc(const export_args *a)
{
    int rc = check_output(a->in, a->out, a->force);
    if (rc)
        return rc;
    export_src x;
    const ckpt_loaded *ck = &x.ck;
    model_opts opts;
    const model_files *f;
    ddp_err err = {0};
    rc = llmc_ckpt_open(a->in, &x, &opts, &f, &err);
    if (!rc) {
        rc = f->llmc_write(a->out, &opts, ckpt_src, &x, &err);
        if (rc)
            ddp_prefix(&err, "%s", a->in);
        else
            printf("ckpt export: %s (step %lld, %s) -> %s (llm.c model file, float32)\n", a->in,
                   (long long)ck->hdr.step, ck->hdr.model, a->out);
        src_close(&x);
    }
    if (rc)
        fprintf(stderr, "ddprun ckpt export: %s\n", err.msg);
    return rc;
}

/* The checkpoint's model, by its recorded description, and the files of its kind (models/model_files.h). */
static int hf_kind(const ckpt_loaded *ck, model_opts *opts, const model_files **f, ddp_err *err)
{
    int64_t seq_len;
    ddp_err ignored = {0};
    *f = NULL;
    if (model_opts_from_description(ck->hdr.model, opts, &seq_len, &ignored) == DDP_OK)
        *f = model_files_of(opts->kind);
    if (!*f || !(*f)->hf_write)
        return ddp_fail(err, DDP_EUSAGE, "checkpoint of %s; only language models' checkpoints can be exported to "
                        "Hugging Face's format", ck->hdr.model);
    return DDP_OK;
}

int ckpt_run_config(const char *ckpt_path, char *yaml, size_t size, bool *found, config *cfg, ddp_err *err)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", ckpt_path); /* dirname may write into its argument; a set's "dir/" too */
    snprintf(yaml, size, "%s/../config.resolved.yaml", dirname(copy));
    struct stat st;
    *found = stat(yaml, &st) == 0;
    return *found ? config_load_record(yaml, cfg, err) : DDP_OK;
}

/* The folder whose bos/eos token ids the export writes into *from ("" none: the config class's
 * defaults): --token-ids-from, else the Hugging Face folder the run started from, as its
 * config.resolved.yaml says. Such a folder that is gone is refused: the ids are its alone. With
 * no such file beside the checkpoint's folder (a checkpoint copied without its run), *unknown
 * gets the file's path: whether the run started from a folder cannot be told. */
static int token_ids_folder(const export_args *a, char *from, size_t size, char *unknown, ddp_err *err)
{
    static config cfg;
    char yaml[PATH_MAX + 32];
    bool found;
    from[0] = unknown[0] = '\0';
    if (a->token_ids_from) {
        snprintf(from, size, "%s", a->token_ids_from);
        return DDP_OK;
    }
    if (ckpt_run_config(a->in, yaml, sizeof yaml, &found, &cfg, err))
        return ddp_prefix(err, "the run's checkpoint.init_from, whose token ids the export writes (or give "
                          "--token-ids-from SRC)");
    const char *init = found ? cfg.checkpoint.init_from : "";
    if (!found)
        snprintf(unknown, PATH_MAX + 32, "%s", yaml);
    struct stat st;
    if (!init[0] || (stat(init, &st) == 0 && !S_ISDIR(st.st_mode)))
        return DDP_OK; /* trained from scratch, or from an llm.c file: no ids of its own */
    if (stat(init, &st) != 0)
        return ddp_fail(err, DDP_EUSAGE, "the run started from checkpoint.init_from %s (%s), which is gone (%s), "
                        "and the model's bos/eos token ids are that folder's; give --token-ids-from SRC, a folder "
                        "with them in its config.json", init, yaml, strerror(errno));
    snprintf(from, size, "%s", init);
    return DDP_OK;
}

static int export_hf(const export_args *a)
{
    st_dtype dtype = a->dtype && !strcmp(a->dtype, "bf16") ? ST_BF16 : ST_F32;
    int rc = check_folder(a->out, a->force);
    if (!rc)
        rc = check_apart(a->in, a->out);
    if (rc)
        return rc;
    export_src x;
    const ckpt_loaded *ck = &x.ck;
    ddp_err err = {0};
    if ((rc = src_open(a->in, &x, &err))) {
        fprintf(stderr, "ddprun ckpt export: %s\n", err.msg);
        return rc;
    }
    model_opts opts;
    const model_files *f;
    uint64_t shard = (uint64_t)(a->shard_mb * 1e6);
    int files = 0;
    char ids[PATH_MAX], unknown[PATH_MAX + 32];
    if ((rc = hf_kind(ck, &opts, &f, &err)) || (rc = token_ids_folder(a, ids, sizeof ids, unknown, &err)))
        ddp_prefix(&err, "%s", a->in);
    else if ((rc = f->hf_write(a->out, &opts, ids[0] ? ids : NULL, dtype, shard, ckpt_src, &x, &files, &err)))
        ddp_prefix(&err, "%s", a->in);
    if (!rc)
        printf("ckpt export: %s (step %lld, %s) -> %s (Hugging Face %s, %s, %d safetensors file%s; token ids %s%s)\n",
               a->in, (long long)ck->hdr.step, ck->hdr.model, a->out, f->hf_architecture,
               dtype == ST_BF16 ? "bfloat16" : "float32", files, files == 1 ? "" : "s",
               ids[0] ? "from " : "the config class's defaults", ids);
    if (!rc && unknown[0])
        fprintf(stderr, "ddprun ckpt export: warning: %s has no run config beside it (%s), so whether the run "
                "started from a Hugging Face folder, whose bos/eos token ids the model would have, cannot be told; "
                "the config class's defaults were written: give --token-ids-from SRC for that folder's\n",
                a->in, unknown);
    else if (rc)
        fprintf(stderr, "ddprun ckpt export: %s\n", err.msg);
    src_close(&x);
    return rc;
}

/* The value of flag a (argv[*i]) given as "--flag V" or "--flag=V", or NULL when a is not it. */
static const char *flag_value(int argc, char **argv, int *i, const char *flag, bool *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n))
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n])
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

static int parse_args(int argc, char **argv, export_args *x)
{
    *x = (export_args){.shard_mb = HF_DEFAULT_SHARD_BYTES / 1e6};
    const char *shard = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if ((v = flag_value(argc, argv, &i, "--format", &missing)))
            x->format = v;
        else if ((v = flag_value(argc, argv, &i, "--dtype", &missing)))
            x->dtype = v;
        else if ((v = flag_value(argc, argv, &i, "--max-shard-mb", &missing)))
            shard = v;
        else if ((v = flag_value(argc, argv, &i, "--token-ids-from", &missing)))
            x->token_ids_from = v;
        else if (missing)
            return usage("%s needs a value", a);
        else if (!strcmp(a, "--force"))
            x->force = true;
        else if (a[0] == '-' && a[1])
            return usage("unknown flag %s", a);
        else if (!x->in)
            x->in = a;
        else if (!x->out)
            x->out = a;
        else
            return usage("unexpected argument %s", a);
    }
    if (!x->format)
        return usage("%s", "--format is required (llmc or hf)");
    bool hf = !strcmp(x->format, "hf");
    if (!hf && strcmp(x->format, "llmc"))
        return usage("unknown format \"%s\" (known: llmc, hf)", x->format);
    if (!hf && (x->dtype || shard || x->token_ids_from))
        return usage("%s", "--dtype, --max-shard-mb and --token-ids-from apply to --format hf");
    if (x->dtype && strcmp(x->dtype, "f32") && strcmp(x->dtype, "bf16"))
        return usage("--dtype %s: expected f32 or bf16", x->dtype);
    char *end = NULL;
    if (shard && (x->shard_mb = strtod(shard, &end), end == shard || *end || !(x->shard_mb > 0) ||
                  !(x->shard_mb <= MAX_SHARD_MB)))
        return usage("--max-shard-mb %s: expected a number of MB in (0, " MAX_SHARD_MB_TEXT "]", shard);
    if (!x->in || !x->out)
        return usage("%s", hf ? "needs CHECKPOINT and DIR" : "needs CHECKPOINT and OUT.bin");
    return DDP_OK;
}

int ckpt_export_main(int argc, char **argv)
{
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(export_usage, stdout);
            return 0;
        }
    export_args a;
    int rc = parse_args(argc, argv, &a);
    if (!rc)
        rc = !strcmp(a.format, "hf") ? export_hf(&a) : export_llmc(&a);
    fflush(stdout);
    return rc;
}
