/* ckpt_test_state.h — a realistic checkpoint state for the checkpoint tests: an MLP's params and
 * AdamW moments (one tensor over 4 MB), every dtype, a scalar, an empty tensor and two RNG
 * streams, with contents derived from a seed so two states can be told apart.
 * Header-only test helper; owns no behaviour under test. */
#ifndef DDP_CKPT_TEST_STATE_H
#define DDP_CKPT_TEST_STATE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/ckpt/ckpt.h"

#define TS_N 13

typedef struct test_state {
    ckpt_state s;
    ckpt_tensor t[TS_N];
    void *buf[TS_N];
} test_state;

static void ts_add(test_state *ts, int i, const char *name, ckpt_dtype dt, int ndim, const int64_t *shape, uint64_t seed)
{
    ckpt_tensor *t = &ts->t[i];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ndim = ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    size_t bytes = ckpt_tensor_numel(t) * ckpt_dtype_size(dt);
    uint8_t *p = malloc(bytes + 1);
    rng r;
    rng_seed(&r, seed, (uint64_t)i + 100);
    for (size_t k = 0; k < bytes; k++)
        p[k] = (uint8_t)rng_next(&r);
    if (dt == CKPT_F32)   /* keep floats finite so numeric diffs are meaningful */
        for (size_t k = 0; k < bytes / 4; k++)
            ((float *)p)[k] = rng_uniform(&r, -1.0f, 1.0f);
    t->data = p;
    ts->buf[i] = p;
}

/* width scales the big tensors: width 1024 gives ~12.6 MB of tensors */
static void ts_init(test_state *ts, int64_t step, uint64_t seed, int64_t width)
{
    memset(ts, 0, sizeof *ts);
    const int64_t w1[] = {width, 784}, b1[] = {width}, w2[] = {10, width}, b2[] = {10};
    const int64_t f64s[] = {3, 5}, i32s[] = {17}, i64s[] = {2, 2, 2}, u8s[] = {1000}, bf[] = {33, 3}, empty[] = {0, 7};
    ts_add(ts, 0, "param/fc1.weight", CKPT_F32, 2, w1, seed);
    ts_add(ts, 1, "param/fc1.bias", CKPT_F32, 1, b1, seed);
    ts_add(ts, 2, "param/fc2.weight", CKPT_F32, 2, w2, seed);
    ts_add(ts, 3, "param/fc2.bias", CKPT_F32, 1, b2, seed);
    ts_add(ts, 4, "optim/m/fc1.weight", CKPT_F32, 2, w1, seed);
    ts_add(ts, 5, "optim/v/fc1.weight", CKPT_F32, 2, w1, seed);
    ts_add(ts, 6, "extra/f64", CKPT_F64, 2, f64s, seed);
    ts_add(ts, 7, "extra/i32", CKPT_I32, 1, i32s, seed);
    ts_add(ts, 8, "extra/i64", CKPT_I64, 3, i64s, seed);
    ts_add(ts, 9, "extra/u8", CKPT_U8, 1, u8s, seed);
    ts_add(ts, 10, "extra/bf16", CKPT_BF16, 2, bf, seed);
    ts_add(ts, 11, "extra/empty", CKPT_F32, 2, empty, seed);
    ts_add(ts, 12, "extra/scalar", CKPT_I64, 0, empty, seed);
    ckpt_header *h = &ts->s.hdr;
    h->step = step;
    h->epoch = 3;
    h->consumed = 12345 + step;
    h->total_steps = 9999;
    h->optim_step = step;
    h->world_size = 2;
    h->restart_count = 1;
    h->config_hash = 0x0123456789abcdefull ^ seed;
    h->save_time = 1.7e9 + 0.25;
    h->elapsed_s = 42.5;
    /* longer than a tensor name may be: model descriptions have room for 16 wide layers */
    snprintf(h->model, sizeof h->model, "mlp hidden=[%s] activation=gelu in=1048576 classes=1048576",
             "1048576,1048576,1048576,1048576,1048576,1048576,1048576,1048576,1048576,1048576,1048576,1048576,"
             "1048576,1048576,1048576,1048576");
    h->n_rng = 2;
    snprintf(h->rng[0].name, sizeof h->rng[0].name, "sampler");
    rng_seed(&h->rng[0].state, seed, RNG_SAMPLER);
    snprintf(h->rng[1].name, sizeof h->rng[1].name, "dropout/rank1");
    rng_seed(&h->rng[1].state, seed, RNG_DROPOUT);
    ts->s.n_tensors = TS_N;
    ts->s.tensors = ts->t;
}

static void ts_free(test_state *ts)
{
    for (int i = 0; i < TS_N; i++)
        free(ts->buf[i]);
}

/* This process's size of kind key (/proc/self/status: "VmSize" all its maps, "VmData" its heap and
 * private writable ones) in bytes, 0 when unknown: where a memory limit set below it begins. */
static inline uint64_t ts_proc_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':' && sscanf(line + n + 1, "%llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

static char *ts_tmpdir(char *buf, size_t size, const char *tag)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, size, "%s/ddp-ckpt-%s-XXXXXX", base, tag);
    return mkdtemp(buf);
}

static int ts_rmrf(const char *dir)
{
    char cmd[CKPT_PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static int ts_file_exists(const char *dir, const char *name)
{
    char p[CKPT_PATH_MAX];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

/* number of entries in dir whose name contains needle */
static int ts_count(const char *dir, const char *needle)
{
    char cmd[CKPT_PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls -a '%s' | grep -c -F -- '%s'", dir, needle);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

#endif
