/* config_test_util.h — what the config tests share (test_config.c, test_config_models.c): the
 * fixtures under tests/config/data, a refusal expected at FILE:LINE:COL or an override's column,
 * the language-model kinds as the messages list them, and the round trip through the resolved
 * file. Test code only: static inline, so a program that uses part of it is not warned about the
 * rest. */
#ifndef DDP_TEST_CONFIG_TEST_UTIL_H
#define DDP_TEST_CONFIG_TEST_UTIL_H

#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "models/model_config.h"
#include "tests/check.h"

/* "model.kind A, B or C": the language models' kinds as the config's messages list them, from the
 * kinds' descriptors (so a kind added changes no expectation here). */
static inline const char *lm_kinds(void)
{
    static char text[256];
    const char *names[16];
    int n = 0;
    for (int i = 0; i < model_n_config_kinds && n < 16; i++)
        if (model_config_kinds[i]->language_model)
            names[n++] = model_kind_names[i];
    size_t len = (size_t)snprintf(text, sizeof text, "model.kind");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s", i == 0 ? " " : i == n - 1 ? " or " : ", ",
                                names[i]);
    return text;
}

#ifndef CONFIG_TEST_DATA
#error "tests/meson.build defines CONFIG_TEST_DATA and DDP_SOURCE_ROOT"
#endif

static char path_buf[1024];

static inline const char *fixture(const char *name)
{
    snprintf(path_buf, sizeof path_buf, "%s/%s", CONFIG_TEST_DATA, name);
    return path_buf;
}

/* Loads (file, overrides) expecting DDP_EUSAGE whose message starts with WHERE and contains
 * `also` (may be NULL). WHERE is "L:C: key.path:" after the fixture's path, or
 * "<override N>:1:C: key.path:" (then file_rel only supplies the base file; NULL = minimal.yaml). */
static inline void expect_fail(const char *file_rel, int n_ov, char *const ov[], const char *where, const char *also)
{
    config c;
    ddp_err err = {0};
    memset(&c, 0x5a, sizeof c);
    const char *file = file_rel ? fixture(file_rel) : fixture("minimal.yaml");
    char prefix[4096];
    if (file_rel && strncmp(where, "<override", 9) != 0)
        snprintf(prefix, sizeof prefix, "%s:%s", file, where);
    else
        snprintf(prefix, sizeof prefix, "%s", where);
    int rc = config_load(file, n_ov, ov, &c, &err);
    CHECK_EQ_INT(rc, DDP_EUSAGE);
    CHECK_EQ_INT(err.code, DDP_EUSAGE);
    CHECK(strncmp(err.msg, prefix, strlen(prefix)) == 0, "message \"%s\" does not start with \"%s\"", err.msg, prefix);
    if (also)
        CHECK_STR_CONTAINS(err.msg, also);
    CHECK(((unsigned char *)&c)[0] == 0x5a && ((unsigned char *)&c)[sizeof c - 1] == 0x5a,
          "a failed load wrote into *out (%s)", where);
}

/* Writes c into a folder of its own, reads it back and demands the identical struct, but for where
 * it came from: its file's name and where each key was set in it. */
static inline void round_trip(const config *a)
{
    char dir[] = "/tmp/ddp_round_trip.XXXXXX", path[4096];
    config b;
    ddp_err err = {0};
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/resolved.yaml", dir);
    CHECK(config_write_resolved(a, path, &err) == DDP_OK, "write: %s", err.msg);
    CHECK(config_load(path, 0, NULL, &b, &err) == DDP_OK, "read back: %s", err.msg);
    memset(b.source, 0, sizeof b.source);
    memcpy(b.source, a->source, sizeof b.source);
    memcpy(b.origin, a->origin, sizeof b.origin);
    CHECK(memcmp(a, &b, sizeof b) == 0, "round trip through %s changed the config", path);
    CHECK(config_hash(a) == config_hash(&b), "hash changed in round trip");
    unlink(path);
    rmdir(dir);
}

#endif
