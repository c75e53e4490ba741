/* test_ckpt_set.c — sharded checkpoint sets (runtime/ckpt/ckpt_set.h) without MPI: three shard files
 * with uneven, interleaved extents (as ZeRO's parts are) of two buffers, committed and read back:
 * the manifest's fields, the set assembled whole (every tensor and meta/config equal to the global
 * buffers), tensor by tensor through the maps (a tensor split over three shards and one inside one);
 * extents with a gap or an overlap refused naming the elements; a tensor table with a name twice, a
 * negative dimension, a tensor past the buffers or a name too long with a buffer's prefix refused by
 * the commit, and a manifest naming a
 * shard outside its directory or one shard twice, or whose meta/config is not text, or whose
 * extents name pieces no shard holds, by every read; a flipped byte, a truncated and a
 * missing shard named; no manifest is no checkpoint; ckpt_find_latest over files and sets with
 * fallback and with a caller's reader (ckpt_find_latest_with); ranges read piece by piece, a damaged
 * piece named only when read (ckpt_set_read_range); pruning removes sets whole; the commit removes
 * what earlier attempts left in the set's directory (temporaries, another world size's shards); a
 * second save of a committed step, killed part-way, leaves the first set whole. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_test_state.h"
#include "runtime/ckpt/ckpt_set.h"
#include "tests/check.h"

#define LEN 1000
#define N_BUF 2
static char dir[512];
static float global[N_BUF][LEN];
static const char *const prefixes[N_BUF] = {"param/", "optim/m/"};
static const char settings[] = "model.kind: mlp\n";

typedef struct piece { int shard; int64_t offset, count; } piece;
/* shard 0: [0,100) [600,700); shard 1: [100,350); shard 2: [350,600) [700,1000) */
static const piece good[] = {{0, 0, 100}, {0, 600, 100}, {1, 100, 250}, {2, 350, 250}, {2, 700, 300}};
#define N_GOOD 5

static void fill_global(void)
{
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < LEN; i++)
            global[b][i] = (float)(b * 10000 + i) * 0.25f;
}

static void set_path(int64_t step, char *out)
{
    char name[64];
    ckpt_set_dir_name(step, name, sizeof name);
    snprintf(out, CKPT_PATH_MAX, "%s/%s", dir, name);
}

static double shard_save_time[3]; /* each shard's header's save_time (the commit's spec: 0) */
static bool shard_alternate;       /* the shards' names, and the commit's */
static bool first_piece_bf16;      /* the shard's first piece written as bf16 (its count of them) */

/* Shard s of n with the pieces of p that are its own, of both buffers. */
static void write_shard(const char *set_dir, int64_t step, int s, int n, const piece *p, int np)
{
    static ckpt_tensor t[2 * LEN];
    int k = 0;
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < np; i++) {
            if (p[i].shard != s)
                continue;
            t[k] = (ckpt_tensor){.dtype = k == 0 && first_piece_bf16 ? CKPT_BF16 : CKPT_F32, .ndim = 1,
                                 .shape = {p[i].count}, .data = &global[b][p[i].offset]};
            ckpt_set_piece_name(prefixes[b], p[i].offset, p[i].count, t[k].name, sizeof t[k].name);
            k++;
        }
    char name[CKPT_SET_SHARD_NAME_MAX];
    ckpt_set_shard_name(s, n, shard_alternate, name, sizeof name);
    ckpt_state st = {.hdr = {.step = step, .world_size = n, .save_time = shard_save_time[s]}, .n_tensors = k,
                     .tensors = t};
    ddp_err err = {0};
    CHECK(ckpt_write_atomic_as(set_dir, name, &st, NULL, &err) == DDP_OK, "shard %d: %s", s, err.msg);
}

static const ckpt_set_tensor kept_tensors[3] = {{"a", 2, {10, 30}, 0}, {"b", 1, {500}, 300}, {"c", 2, {4, 50}, 800}};
static ckpt_set_tensor tensors[3]; /* the table commit() writes: kept_tensors but where a test changes it */

static int commit(int64_t step, const piece *p, int np, ddp_err *err)
{
    char set_dir[CKPT_PATH_MAX];
    set_path(step, set_dir);
    for (int s = 0; s < 3; s++)
        write_shard(set_dir, step, s, 3, p, np);
    ckpt_manifest spec = {.hdr = {.step = step, .consumed = 77, .world_size = 3}, .n_buffers = N_BUF,
                          .buffer_len = LEN, .n_tensors = 3, .tensors = tensors, .settings = settings,
                          .settings_len = strlen(settings), .train_samples = 4321};
    for (int b = 0; b < N_BUF; b++)
        snprintf(spec.buffers[b], sizeof spec.buffers[b], "%s", prefixes[b]);
    _Atomic uint64_t progress = 0;
    int rc = ckpt_set_commit(set_dir, &spec, 3, shard_alternate, &progress, err);
    CHECK(rc != DDP_OK || progress == 3, "a commit of 3 shards counts %llu tables read for its stall watch",
          (unsigned long long)progress);
    return rc;
}

/* An empty file at set_dir/name. */
static void touch_in(const char *set_dir, const char *name)
{
    char path[CKPT_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", set_dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0, "creating %s", path);
    if (fd >= 0)
        close(fd);
}

static bool exists_in(const char *set_dir, const char *name)
{
    char path[CKPT_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", set_dir, name);
    return access(path, F_OK) == 0;
}

static void test_commit_and_read(void)
{
    ddp_err err = {0};
    char set_dir[CKPT_PATH_MAX];
    set_path(5, set_dir);
    /* what earlier attempts at this step left: a killed rank's temporaries, a 4-rank attempt's shard */
    static const char *const leftovers[] = {".shard-00001-of-00003.ddp.tmp.4242", ".manifest.ddp.tmp.77",
                                            "shard-00003-of-00004.ddp"};
    CHECK(mkdir(set_dir, 0755) == 0, "mkdir %s", set_dir);
    for (int i = 0; i < 3; i++)
        touch_in(set_dir, leftovers[i]);
    CHECK(commit(5, good, N_GOOD, &err) == DDP_OK, "commit: %s", err.msg);
    for (int i = 0; i < 3; i++)
        CHECK(!exists_in(set_dir, leftovers[i]), "the commit removed %s", leftovers[i]);
    CHECK(exists_in(set_dir, "shard-00002-of-00003.ddp"), "the commit kept its shards");
    ckpt_manifest m;
    CHECK(ckpt_manifest_read(set_dir, &m, &err) == DDP_OK, "manifest: %s", err.msg);
    CHECK_EQ_INT(m.hdr.step, 5);
    CHECK_EQ_INT(m.hdr.consumed, 77);
    CHECK_EQ_INT(m.n_shards, 3);
    CHECK_EQ_INT(m.n_extents, 2 * N_GOOD);
    CHECK_EQ_INT(m.n_buffers, N_BUF);
    CHECK_EQ_INT(m.buffer_len, LEN);
    CHECK(m.n_tensors == 3 && strcmp(m.tensors[1].name, "b") == 0 && m.tensors[1].offset == 300 &&
          m.tensors[2].shape[1] == 50, "tensor table read back");
    CHECK(strcmp(m.buffers[1], "optim/m/") == 0, "buffer 1 is %s", m.buffers[1]);
    CHECK(strcmp(m.shards[2].name, "shard-00002-of-00003.ddp") == 0, "shard 2 is %s", m.shards[2].name);
    CHECK(m.settings_len == strlen(settings) && memcmp(m.settings, settings, m.settings_len) == 0, "settings");
    CHECK_EQ_INT(m.train_samples, 4321);
    ckpt_manifest_free(&m);

    ckpt_loaded c;
    CHECK(ckpt_set_load(set_dir, &c, &err) == DDP_OK, "load: %s", err.msg);
    CHECK_EQ_INT(c.n_tensors, N_BUF * 3 + 2);
    int64_t samples = 0;
    CHECK(ckpt_loaded_train_samples(&c, set_dir, &samples, &err) == DDP_OK && samples == 4321,
          "meta/train_samples assembled: %lld", (long long)samples);
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < 3; i++) {
            char name[2 * CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%s%.100s", prefixes[b], tensors[i].name);
            const ckpt_tensor *t = ckpt_loaded_tensor(&c, name);
            CHECK(t && t->nbytes == (i == 1 ? 500u : i == 0 ? 300u : 200u) * 4 &&
                  memcmp(t->data, &global[b][tensors[i].offset], t->nbytes) == 0, "%s assembled", name);
        }
    const ckpt_tensor *meta = ckpt_loaded_tensor(&c, CKPT_SETTINGS_TENSOR);
    CHECK(meta && meta->nbytes == strlen(settings) && memcmp(meta->data, settings, meta->nbytes) == 0, "meta/config");
    ckpt_loaded_free(&c);

    ckpt_set_reader *r;
    CHECK(ckpt_set_open(set_dir, &r, &err) == DDP_OK, "open: %s", err.msg);
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < 3; i++) {
            size_t n = i == 1 ? 500 : i == 0 ? 300 : 200;
            const float *v = ckpt_set_tensor_f32(r, prefixes[b], tensors[i].name, n);
            CHECK(v && memcmp(v, &global[b][tensors[i].offset], n * 4) == 0, "reader: %s%s", prefixes[b],
                  tensors[i].name);
        }
    CHECK(ckpt_set_tensor_f32(r, "param/", "b", 499) == NULL, "a wrong element count finds nothing");
    CHECK(ckpt_set_tensor_f32(r, "optim/v/", "b", 500) == NULL, "an unknown buffer finds nothing");
    ckpt_set_close(r);
}

static void test_cover_refused(void)
{
    ddp_err err = {0};
    const piece gap[] = {{0, 0, 100}, {1, 100, 250}, {2, 350, 250}, {2, 700, 300}};
    CHECK(commit(6, gap, 4, &err) != DDP_OK, "a gap is refused");
    CHECK_STR_CONTAINS(err.msg, "buffer param/: elements [600, 700) are held by no shard");
    const piece twice[] = {{0, 0, 120}, {0, 600, 100}, {1, 100, 250}, {2, 350, 250}, {2, 700, 300}};
    CHECK(commit(6, twice, 5, &err) != DDP_OK, "an overlap is refused");
    CHECK_STR_CONTAINS(err.msg, "are held twice (shard-00001-of-00003.ddp)");
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64];
    set_path(6, set_dir);
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    CHECK(access(path, F_OK) != 0, "no manifest written for a refused set");
    ckpt_manifest m;
    CHECK(ckpt_manifest_read(set_dir, &m, &err) != DDP_OK, "no manifest: not a checkpoint");
    CHECK_STR_CONTAINS(err.msg, "no manifest.ddp");
}

/* A tensor table the readers could not use is refused by the commit, naming the tensor, with nothing
 * written: a name twice, a negative dimension, a tensor past the buffers' end, a name that with a
 * buffer's prefix is longer than a checkpoint's names. */
static void test_tensors_refused(void)
{
    static const ckpt_set_tensor twice[3] = {{"a", 2, {10, 30}, 0}, {"b", 1, {500}, 300}, {"a", 1, {4}, 800}};
    static const ckpt_set_tensor negative[3] = {{"a", 2, {10, 30}, 0}, {"b", 2, {-1, -500}, 300}, {"c", 1, {4}, 800}};
    static const ckpt_set_tensor outside[3] = {{"a", 2, {10, 30}, 0}, {"b", 1, {500}, 300}, {"c", 1, {1}, LEN + 1}};
    static ckpt_set_tensor long_name[3] = {{"a", 2, {10, 30}, 0}, {"b", 1, {500}, 300}, {"", 1, {4}, 800}};
    memset(long_name[2].name, 'x', 120); /* "param/" and it fit in 127 bytes, "optim/m/" and it do not */
    const ckpt_set_tensor *tables[4] = {twice, negative, outside, long_name};
    const char *says[4] = {"tensor a appears twice", "tensor \"b\" has no name or an invalid shape",
                           "tensor c lies outside the buffers", "xxx: a name of over 127 bytes"};
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64];
    set_path(7, set_dir);
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    for (int i = 0; i < 4; i++) {
        memcpy(tensors, tables[i], sizeof tensors);
        ddp_err err = {0};
        CHECK(commit(7, good, N_GOOD, &err) != DDP_OK, "table %d refused", i);
        CHECK_STR_CONTAINS(err.msg, says[i]);
        CHECK(access(path, F_OK) != 0, "table %d: no manifest written", i);
    }
    memcpy(tensors, kept_tensors, sizeof tensors);
}

/* set_dir's manifest written again with `from` in its set/shard_names replaced by `to`. */
static void rename_shard(const char *set_dir, const char *from, const char *to)
{
    char path[CKPT_PATH_MAX + 64], text[1024];
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    ckpt_loaded c;
    ddp_err err = {0};
    CHECK(ckpt_read(path, &c, &err) == DDP_OK, "manifest: %s", err.msg);
    ckpt_tensor *names = (ckpt_tensor *)ckpt_loaded_tensor(&c, "set/shard_names");
    CHECK(names && names->nbytes < sizeof text, "set/shard_names");
    memcpy(text, names->data, names->nbytes);
    text[names->nbytes] = '\0';
    char *at = strstr(text, from), renamed[1024];
    CHECK(at != NULL, "%s in %s", from, text);
    snprintf(renamed, sizeof renamed, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    names->data = renamed, names->nbytes = strlen(renamed), names->shape[0] = (int64_t)names->nbytes;
    ckpt_state st = {.hdr = c.hdr, .n_tensors = c.n_tensors, .tensors = c.tensors};
    CHECK(ckpt_write_atomic_as(set_dir, CKPT_SET_MANIFEST, &st, NULL, &err) == DDP_OK, "rewrite: %s", err.msg);
    ckpt_loaded_free(&c);
}

/* A shard file of the set's step but of another save (its save_time not the commit's: left by a
 * killed attempt where this save's rank wrote elsewhere) is refused by the commit, naming it. */
static void test_other_save_refused(void)
{
    ddp_err err = {0};
    char set_dir[CKPT_PATH_MAX];
    set_path(9, set_dir);
    shard_save_time[1] = 1e9;
    CHECK(commit(9, good, N_GOOD, &err) == DDP_ERUNTIME, "a shard of another save committed");
    CHECK_STR_CONTAINS(err.msg, "shard-00001-of-00003.ddp: a shard of another save (saved at 1000000000.000000");
    CHECK(!exists_in(set_dir, CKPT_SET_MANIFEST), "no manifest written");
    shard_save_time[1] = 0;
    CHECK(commit(9, good, N_GOOD, &err) == DDP_OK, "the same save's shards commit: %s", err.msg);
    /* a watched prune's progress counts each file removed: a committed set's, and one whose
     * manifest is gone (a set never committed) */
    for (int uncommitted = 0; uncommitted < 2; uncommitted++) {
        CHECK(uncommitted == 0 || commit(9, good, N_GOOD, &err) == DDP_OK, "commit again: %s", err.msg);
        if (uncommitted) {
            char path[CKPT_PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
            CHECK(unlink(path) == 0, "manifest removed");
        }
        uint64_t files = 0;
        DIR *d = opendir(set_dir);
        for (struct dirent *de; d && (de = readdir(d)) != NULL;)
            files += de->d_name[0] != '.';
        if (d)
            closedir(d);
        _Atomic uint64_t removed = 0;
        CHECK(ckpt_set_remove(set_dir, &removed, &err) == DDP_OK, "remove: %s", err.msg);
        CHECK(files >= 2 && removed == files && !ckpt_is_set_dir(set_dir), "removed %llu of %llu files (uncommitted %d)",
              (unsigned long long)removed, (unsigned long long)files, uncommitted);
    }
}

/* A manifest naming a shard outside its directory, or one shard twice, is no checkpoint: every
 * read refuses it naming the shard, before any shard is opened. */
static void test_shard_names_refused(void)
{
    const char *to[3] = {"../shard-00002-of-00003.ddp", "shard-00000-of-00003.ddp", ".."};
    const char *says[3] = {"shard \"../shard-00002-of-00003.ddp\" is not a file name of the set's directory",
                           "shard shard-00000-of-00003.ddp appears twice", "shard \"..\" is not a file name"};
    char set_dir[CKPT_PATH_MAX];
    set_path(8, set_dir);
    for (int i = 0; i < 3; i++) {
        ddp_err err = {0};
        CHECK(commit(8, good, N_GOOD, &err) == DDP_OK, "commit 8: %s", err.msg);
        rename_shard(set_dir, "shard-00002-of-00003.ddp", to[i]);
        ckpt_loaded c;
        CHECK(ckpt_set_load(set_dir, &c, &err) != DDP_OK, "name %d refused", i);
        CHECK_STR_CONTAINS(err.msg, says[i]);
    }
    ddp_err err = {0};
    char used[CKPT_PATH_MAX];
    ckpt_loaded c;
    CHECK(ckpt_find_latest(dir, &c, used, &err) == DDP_OK && c.hdr.step == 5, "falls back to step 5: %s", err.msg);
    ckpt_loaded_free(&c);
    CHECK(ckpt_set_remove(set_dir, NULL, &err) == DDP_OK, "remove: %s", err.msg);
}

/* A manifest whose extents still tile the buffers but name pieces no shard holds (its first extent
 * cut in two) is refused by every reader, naming the extent, before any tensor is read: the
 * tensor-by-tensor reader (ckpt export's) left such a range unfilled. */
static void test_extent_not_a_piece(void)
{
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64];
    set_path(9, set_dir);
    ddp_err err = {0};
    CHECK(commit(9, good, N_GOOD, &err) == DDP_OK, "commit 9: %s", err.msg);
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    ckpt_loaded c;
    CHECK(ckpt_read(path, &c, &err) == DDP_OK, "manifest: %s", err.msg);
    ckpt_tensor *ext = (ckpt_tensor *)ckpt_loaded_tensor(&c, "set/extents");
    CHECK(ext && ext->shape[1] == 4, "set/extents");
    if (!ext) {
        ckpt_loaded_free(&c);
        return;
    }
    int64_t rows = ext->shape[0], cut[4 * 64];
    CHECK(rows < 63, "%lld extents", (long long)rows);
    memcpy(cut + 4, ext->data, (size_t)rows * 4 * sizeof *cut); /* rows 1..: the extents, the first cut next */
    memcpy(cut, cut + 4, 4 * sizeof *cut);
    int64_t half = cut[3] / 2;
    cut[3] = half, cut[4 + 2] += half, cut[4 + 3] -= half;
    ext->data = cut, ext->shape[0] = rows + 1, ext->nbytes = (uint64_t)(rows + 1) * 4 * sizeof *cut;
    ckpt_state st = {.hdr = c.hdr, .n_tensors = c.n_tensors, .tensors = c.tensors};
    CHECK(ckpt_write_atomic_as(set_dir, CKPT_SET_MANIFEST, &st, NULL, &err) == DDP_OK, "rewrite: %s", err.msg);
    ckpt_loaded_free(&c);
    ckpt_set_reader *r = NULL;
    CHECK(ckpt_set_open(set_dir, &r, &err) != DDP_OK, "the reader refuses an extent that is no piece");
    CHECK_STR_CONTAINS(err.msg, "extent 0 (param/ elements 0..50) is not a piece of shard-00000-of-00003.ddp");
    ckpt_set_close(r);
    CHECK(ckpt_set_open_pieces(set_dir, &r, &err) != DDP_OK, "so does the reader of pieces");
    ckpt_set_close(r);
    CHECK(ckpt_set_load(set_dir, &c, &err) != DDP_OK, "and the whole set's load");
    ckpt_manifest m;
    CHECK(ckpt_manifest_read(set_dir, &m, &err) == DDP_OK, "manifest: %s", err.msg);
    CHECK(ckpt_set_check_shard(set_dir, &m, 0, &err) != DDP_OK, "and ckpt info's check of the shard");
    CHECK_STR_CONTAINS(err.msg, "shard-00000-of-00003.ddp: piece param/");
    CHECK_STR_CONTAINS(err.msg, "is missing");
    CHECK(ckpt_set_check_shard(set_dir, &m, 1, &err) == DDP_OK, "the other shards pass: %s", err.msg);
    ckpt_manifest_free(&m);
    CHECK(ckpt_set_remove(set_dir, NULL, &err) == DDP_OK, "remove: %s", err.msg);
}

/* A shard whose piece is bf16, not float32 (another tool's set: the manifest's record of its length
 * and header CRC made to match), is refused by every reader, naming the extent, before any tensor
 * is read: a float32 read of the piece ran past it, half of it another piece's bytes or none. */
static void test_piece_not_float32(void)
{
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64], shard[CKPT_PATH_MAX + 64];
    set_path(9, set_dir);
    ddp_err err = {0};
    CHECK(commit(9, good, N_GOOD, &err) == DDP_OK, "commit 9: %s", err.msg);
    first_piece_bf16 = true;
    write_shard(set_dir, 9, 0, 3, good, N_GOOD);
    first_piece_bf16 = false;
    snprintf(shard, sizeof shard, "%s/shard-00000-of-00003.ddp", set_dir);
    ckpt_loaded tab, c;
    uint32_t crc = 0;
    struct stat sb;
    CHECK(ckpt_read_table(shard, &tab, &crc, &err) == DDP_OK && stat(shard, &sb) == 0, "shard 0: %s", err.msg);
    ckpt_loaded_free(&tab);
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    CHECK(ckpt_read(path, &c, &err) == DDP_OK, "manifest: %s", err.msg);
    ckpt_tensor *info = (ckpt_tensor *)ckpt_loaded_tensor(&c, "set/shard_info");
    CHECK(info && info->shape[1] == 2, "set/shard_info");
    int64_t row[6];
    if (info) {
        memcpy(row, info->data, sizeof row);
        row[0] = (int64_t)sb.st_size, row[1] = crc;
        info->data = row;
    }
    ckpt_state st = {.hdr = c.hdr, .n_tensors = c.n_tensors, .tensors = c.tensors};
    CHECK(ckpt_write_atomic_as(set_dir, CKPT_SET_MANIFEST, &st, NULL, &err) == DDP_OK, "rewrite: %s", err.msg);
    ckpt_loaded_free(&c);
    ckpt_set_reader *r = NULL;
    CHECK(ckpt_set_open_pieces(set_dir, &r, &err) != DDP_OK, "the reader of pieces refuses a bf16 piece");
    CHECK_STR_CONTAINS(err.msg, "extent 0 (param/ elements 0..");
    CHECK_STR_CONTAINS(err.msg, "is not a piece of shard-00000-of-00003.ddp");
    ckpt_set_close(r);
    CHECK(ckpt_set_open(set_dir, &r, &err) != DDP_OK, "so does the reader of tensors");
    ckpt_set_close(r);
    CHECK(ckpt_set_load(set_dir, &c, &err) != DDP_OK, "and the whole set's load");
    CHECK(ckpt_set_remove(set_dir, NULL, &err) == DDP_OK, "remove: %s", err.msg);
}

/* Case `how` of test_meta_malformed_refused: the meta/ tensor x made malformed. */
static void spoil_meta(ckpt_tensor *x, int how)
{
    if (how == 0)
        *(int64_t *)x->data = 0; /* no training split has no samples */
    else if (how == 1)
        x->dtype = CKPT_I32, x->shape[0] = 2;
    else if (how == 2)
        x->dtype = CKPT_I64, x->shape[0] = 2; /* meta/config's bytes as two integers */
    else
        x->ndim = 2, x->shape[0] = 4, x->shape[1] = 4;
}

/* A manifest whose meta/config is not text (u8, one dimension), or whose meta/train_samples is not
 * one positive i64, is malformed: every read refuses it, as it refuses a malformed set/ table. */
static void test_meta_malformed_refused(void)
{
    static const struct {
        const char *tensor;
        uint64_t bytes;
        const char *says;
    } cases[] = {
        {CKPT_TRAIN_SAMPLES_TENSOR, 8, "meta/train_samples is not one positive int64"},
        {CKPT_TRAIN_SAMPLES_TENSOR, 8, "meta/train_samples is not one positive int64"},
        {CKPT_SETTINGS_TENSOR, 16, "meta/config is not text (u8, one dimension)"},
        {CKPT_SETTINGS_TENSOR, 16, "meta/config is not text (u8, one dimension)"},
    };
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64];
    set_path(9, set_dir);
    snprintf(path, sizeof path, "%s/%s", set_dir, CKPT_SET_MANIFEST);
    for (int how = 0; how < (int)(sizeof cases / sizeof cases[0]); how++) {
        ddp_err err = {0};
        CHECK(commit(9, good, N_GOOD, &err) == DDP_OK, "commit 9: %s", err.msg);
        ckpt_loaded c;
        CHECK(ckpt_read(path, &c, &err) == DDP_OK, "manifest: %s", err.msg);
        ckpt_tensor *x = (ckpt_tensor *)ckpt_loaded_tensor(&c, cases[how].tensor);
        CHECK(x && x->nbytes == cases[how].bytes, "%s of %llu bytes", cases[how].tensor,
              (unsigned long long)cases[how].bytes);
        if (!x) {
            ckpt_loaded_free(&c);
            continue;
        }
        spoil_meta(x, how);
        ckpt_state st = {.hdr = c.hdr, .n_tensors = c.n_tensors, .tensors = c.tensors};
        CHECK(ckpt_write_atomic_as(set_dir, CKPT_SET_MANIFEST, &st, NULL, &err) == DDP_OK, "rewrite: %s", err.msg);
        ckpt_loaded_free(&c);
        ckpt_manifest m;
        CHECK(ckpt_manifest_read(set_dir, &m, &err) != DDP_OK, "case %d refused", how);
        CHECK_STR_CONTAINS(err.msg, cases[how].says);
        CHECK(ckpt_set_load(set_dir, &c, &err) != DDP_OK, "case %d refused by the load", how);
        CHECK_STR_CONTAINS(err.msg, cases[how].says);
    }
    ddp_err err = {0};
    CHECK(ckpt_set_remove(set_dir, NULL, &err) == DDP_OK, "remove: %s", err.msg);
}

static void damage_shard(int64_t step, const char *how)
{
    char set_dir[CKPT_PATH_MAX], path[CKPT_PATH_MAX + 64];
    set_path(step, set_dir);
    snprintf(path, sizeof path, "%s/shard-00002-of-00003.ddp", set_dir);
    struct stat st;
    CHECK(stat(path, &st) == 0, "stat %s", path);
    if (strcmp(how, "flip") == 0) {
        int fd = open(path, O_RDWR);
        uint8_t b = 0;
        CHECK(fd >= 0 && pread(fd, &b, 1, st.st_size - 3) == 1, "read %s", path);
        b ^= 0x5a;
        CHECK(pwrite(fd, &b, 1, st.st_size - 3) == 1, "write %s", path);
        close(fd);
    } else if (strcmp(how, "truncate") == 0) {
        CHECK(truncate(path, st.st_size - 8) == 0, "truncate %s", path);
    } else {
        CHECK(unlink(path) == 0, "unlink %s", path);
    }
}

static void test_damage_and_fallback(void)
{
    ddp_err err = {0};
    char path[CKPT_PATH_MAX], used[CKPT_PATH_MAX];
    test_state ts;
    ts_init(&ts, 3, 1, 16);
    CHECK(ckpt_write_atomic(dir, &ts.s, path, &err) == DDP_OK, "file step 3: %s", err.msg);
    ts_free(&ts);
    ckpt_loaded c;
    CHECK(ckpt_find_latest(dir, &c, used, &err) == DDP_OK, "find: %s", err.msg);
    CHECK_STR_CONTAINS(used, "/ckpt-00000005");
    CHECK_EQ_INT(c.hdr.step, 5);
    ckpt_loaded_free(&c);
    const char *hows[] = {"flip", "truncate", "missing"}, *says[] = {"CRC mismatch in tensor", "truncated", "No such file"};
    for (int i = 0; i < 3; i++) {
        CHECK(commit(10 + i, good, N_GOOD, &err) == DDP_OK, "commit %d: %s", 10 + i, err.msg);
        damage_shard(10 + i, hows[i]);
        char set_dir[CKPT_PATH_MAX];
        set_path(10 + i, set_dir);
        CHECK(ckpt_set_load(set_dir, &c, &err) != DDP_OK, "%s: refused", hows[i]);
        CHECK_STR_CONTAINS(err.msg, "shard-00002-of-00003.ddp");
        CHECK_STR_CONTAINS(err.msg, says[i]);
        /* ckpt info's check, shard by shard through maps: the damaged one alone, named the same */
        ckpt_manifest m;
        CHECK(ckpt_manifest_read(set_dir, &m, &err) == DDP_OK, "manifest: %s", err.msg);
        for (int s = 0; s < 3; s++) {
            int rc = ckpt_set_check_shard(set_dir, &m, s, &err);
            CHECK((rc != DDP_OK) == (s == 2), "%s: shard %d checked: %d (%s)", hows[i], s, rc, err.msg);
            CHECK(s < 2 || strstr(err.msg, says[i]), "%s: %s", hows[i], err.msg);
            CHECK(s < 2 || !err.local, "%s: damage is not this machine's failure", hows[i]);
        }
        ckpt_manifest_free(&m);
    }
    CHECK(ckpt_find_latest(dir, &c, used, &err) == DDP_OK, "find with damaged sets: %s", err.msg);
    CHECK_STR_CONTAINS(used, "/ckpt-00000005");
    ckpt_loaded_free(&c);
}

/* Ranges of a buffer read through a reader that checks no CRC until a piece is read (ZeRO-3's
 * resume): ranges inside one piece and across three shards, a damaged shard's piece named only
 * when read, the others still readable; a range past the buffers refused. */
static void test_read_range(void)
{
    ddp_err err = {0};
    char set_dir[CKPT_PATH_MAX];
    set_path(30, set_dir);
    CHECK(commit(30, good, N_GOOD, &err) == DDP_OK, "commit 30: %s", err.msg);
    damage_shard(30, "flip"); /* the last bytes of shard 2: optim/m/'s piece [700, 1000) */
    ckpt_set_reader *r;
    CHECK(ckpt_set_open(set_dir, &r, &err) != DDP_OK, "the checking reader refuses the damaged set");
    CHECK(ckpt_set_open_pieces(set_dir, &r, &err) == DDP_OK, "the pieces reader opens it: %s", err.msg);
    static float out[LEN];
    const struct { int b; int64_t lo, n; } ok[] = {{0, 120, 30}, {0, 50, 700}, {1, 0, 700}, {0, 0, LEN}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        memset(out, 0xff, sizeof out);
        CHECK(ckpt_set_read_range(r, prefixes[ok[i].b], ok[i].lo, ok[i].n, out, &err) == DDP_OK, "range %zu: %s", i,
              err.msg);
        CHECK(memcmp(out, &global[ok[i].b][ok[i].lo], (size_t)ok[i].n * 4) == 0, "range %zu's values", i);
    }
    CHECK(ckpt_set_read_range(r, "optim/m/", 650, 100, out, &err) != DDP_OK, "a range into the damaged piece fails");
    CHECK_STR_CONTAINS(err.msg, "shard-00002-of-00003.ddp: CRC mismatch in tensor optim/m/@700+300");
    CHECK(ckpt_set_read_range(r, "optim/v/", 0, 10, out, &err) != DDP_OK, "an unknown buffer fails");
    CHECK_STR_CONTAINS(err.msg, "no buffer optim/v/");
    /* past the buffers no extent fills it: refused, never left unwritten */
    CHECK(ckpt_set_read_range(r, "param/", LEN - 10, 20, out, &err) == DDP_EUSAGE, "a range past the end fails");
    CHECK_STR_CONTAINS(err.msg, "lie past its buffers'");
    ckpt_set_close(r);
}

/* ckpt_find_latest_with: newest first, a refusal falls back, CKPT_STOP ends the walk. */
typedef struct walk_log { int calls; char seen[4][CKPT_PATH_MAX]; int stop_at; } walk_log;

static int try_walk(void *ctx, const char *path, bool set, ddp_err *why)
{
    walk_log *w = ctx;
    (void)set;
    snprintf(w->seen[w->calls & 3], CKPT_PATH_MAX, "%s", path);
    if (++w->calls == w->stop_at)
        return CKPT_STOP;
    return w->calls == 1 ? ddp_fail(why, DDP_ERUNTIME, "refused by the test") : DDP_OK;
}

static void test_find_latest_with(void)
{
    ddp_err err = {0};
    char used[CKPT_PATH_MAX];
    walk_log w = {.stop_at = 0};
    CHECK(ckpt_find_latest_with(dir, try_walk, &w, used, &err) == DDP_OK, "walk: %s", err.msg);
    CHECK(w.calls == 2 && strcmp(used, w.seen[1]) == 0, "the newest refused, the next taken (%d calls)", w.calls);
    CHECK(strcmp(w.seen[0], w.seen[1]) > 0, "newest first: %s then %s", w.seen[0], w.seen[1]);
    walk_log stop = {.stop_at = 1};
    CHECK(ckpt_find_latest_with(dir, try_walk, &stop, used, &err) == CKPT_STOP && stop.calls == 1,
          "CKPT_STOP ends the walk at once");
}

/* 100 pieces of 10 elements a buffer, round robin over the shards (a rank with many ZeRO parts). */
static void test_many_pieces(void)
{
    static piece many[100];
    for (int i = 0; i < 100; i++)
        many[i] = (piece){i % 3, 10 * i, 10};
    ddp_err err = {0};
    CHECK(commit(15, many, 100, &err) == DDP_OK, "commit 200 pieces: %s", err.msg);
    char set_dir[CKPT_PATH_MAX];
    set_path(15, set_dir);
    ckpt_manifest m;
    CHECK(ckpt_manifest_read(set_dir, &m, &err) == DDP_OK && m.n_extents == 200, "200 extents: %s", err.msg);
    ckpt_manifest_free(&m);
    ckpt_loaded c;
    CHECK(ckpt_set_load(set_dir, &c, &err) == DDP_OK, "load: %s", err.msg);
    const ckpt_tensor *t = ckpt_loaded_tensor(&c, "optim/m/b");
    CHECK(t && memcmp(t->data, &global[1][300], 500 * 4) == 0, "optim/m/b from 50 pieces");
    ckpt_loaded_free(&c);
}

static void test_prune(void)
{
    ddp_err err = {0};
    char keep[CKPT_PATH_MAX], old[CKPT_PATH_MAX], file3[CKPT_PATH_MAX];
    CHECK(commit(20, good, N_GOOD, &err) == DDP_OK, "commit 20: %s", err.msg);
    set_path(20, keep);
    set_path(5, old);
    snprintf(file3, sizeof file3, "%s/ckpt-00000003.ddp", dir);
    CHECK(ckpt_prune(dir, 1, keep, &err) == DDP_OK, "prune: %s", err.msg);
    CHECK(access(old, F_OK) != 0, "the old set's directory is gone");
    CHECK(access(file3, F_OK) != 0, "the old file is gone");
    CHECK(access(keep, F_OK) == 0, "the kept set stays");
    ckpt_loaded c;
    char used[CKPT_PATH_MAX];
    CHECK(ckpt_find_latest(dir, &c, used, &err) == DDP_OK && c.hdr.step == 20, "the kept set loads: %s", err.msg);
    ckpt_loaded_free(&c);
}

/* The set at set_dir loads, and each of its tensors holds want's elements. */
static bool set_holds(const char *set_dir, const float (*want)[LEN])
{
    ckpt_loaded c;
    ddp_err err = {0};
    if (ckpt_set_load(set_dir, &c, &err) != DDP_OK) {
        CHECK(false, "load %s: %s", set_dir, err.msg);
        return false;
    }
    bool same = true;
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < 3; i++) {
            char name[2 * CKPT_NAME_MAX];
            snprintf(name, sizeof name, "%s%.100s", prefixes[b], tensors[i].name);
            const ckpt_tensor *t = ckpt_loaded_tensor(&c, name);
            same = same && t && memcmp(t->data, &want[b][tensors[i].offset], t->nbytes) == 0;
        }
    ckpt_loaded_free(&c);
    return same;
}

/* A second save of a step whose set is committed (one a resume passed over) writes the alternate
 * names: killed part-way it leaves the committed set whole; committed, it replaces it. */
static void test_resave_same_step(void)
{
    ddp_err err = {0};
    char set_dir[CKPT_PATH_MAX];
    set_path(40, set_dir);
    CHECK(!ckpt_set_names_taken(set_dir, 3), "no set of step 40 yet: the plain names");
    CHECK(commit(40, good, N_GOOD, &err) == DDP_OK, "commit 40: %s", err.msg);
    CHECK(ckpt_set_names_taken(set_dir, 3), "step 40's set committed: the alternate names");
    CHECK(!ckpt_set_names_taken(set_dir, 4), "... but not for 4 shards, whose plain names it does not hold");
    static float first[N_BUF][LEN];
    memcpy(first, global, sizeof first);
    for (int b = 0; b < N_BUF; b++)
        for (int i = 0; i < LEN; i++)
            global[b][i] += 1.0f;
    shard_alternate = true;
    write_shard(set_dir, 40, 0, 3, good, N_GOOD);
    write_shard(set_dir, 40, 1, 3, good, N_GOOD); /* the save is killed before shard 2 */
    CHECK(set_holds(set_dir, first), "a second save killed part-way: step 40's first set is whole");
    CHECK(commit(40, good, N_GOOD, &err) == DDP_OK, "the second save's commit: %s", err.msg);
    CHECK(set_holds(set_dir, global), "committed, the second save's set is step 40's");
    CHECK(exists_in(set_dir, "shard-00002-of-00003-alt.ddp") && !exists_in(set_dir, "shard-00002-of-00003.ddp"),
          "its shards have the alternate names, and the first set's are removed");
    CHECK(!ckpt_set_names_taken(set_dir, 3), "a third save takes the plain names again");
    shard_alternate = false;
    fill_global();
}

int main(void)
{
    if (!ts_tmpdir(dir, sizeof dir, "set")) {
        perror("mkdtemp");
        return 1;
    }
    (void)ts_count, (void)ts_file_exists; /* ckpt_test_state.h's, for the other tests */
    fill_global();
    memcpy(tensors, kept_tensors, sizeof tensors);
    test_commit_and_read();
    test_cover_refused();
    test_tensors_refused();
    test_shard_names_refused();
    test_other_save_refused();
    test_meta_malformed_refused();
    test_extent_not_a_piece();
    test_piece_not_float32();
    test_damage_and_fallback();
    test_many_pieces();
    test_prune();
    test_read_range();
    test_find_latest_with();
    test_resave_same_step();
    int rc = check_done("test_ckpt_set");
    if (rc == 0)
        ts_rmrf(dir);
    return rc;
}
