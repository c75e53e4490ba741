/* test_hf_token_ids.c — config.json's bos_token_id and eos_token_id (runtime/hf/hf_token_ids.h)
 * read from hand-made folders and written back: an integer, null, absent and a list each read as
 * json.dumps(indent=2) writes them one level down, ids past the vocabulary as GPT2Config's
 * 50256 in small models among them; negative, fractional and string ids, a list of a list and a list over HF_EOS_IDS_MAX refused naming
 * config.json:LINE:COL and the key; and the written lines: the folder's value, the class default
 * where the folder has none (or nothing was read), None left out only where the class default is
 * None too. */
#include "tests/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/hf/hf_token_ids.h"

static char dir[] = "/tmp/test_hf_token_ids.XXXXXX";

static void write_config(const char *text)
{
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        perror(path);
        exit(1);
    }
}

static int read_ids(const char *text, hf_token_ids *ids, ddp_err *err)
{
    write_config(text);
    memset(err, 0, sizeof *err);
    return hf_token_ids_read(dir, ids, err);
}

/* What the two write functions print for ids with these class defaults. */
static void written(const hf_token_ids *ids, const char *bos_default, const char *eos_default, char *out, size_t n)
{
    out[0] = '\0'; /* fmemopen writes nothing when nothing is printed */
    FILE *f = fmemopen(out, n, "w");
    hf_bos_token_id_write(f, ids, bos_default);
    hf_eos_token_id_write(f, ids, eos_default);
    fclose(f);
}

static void test_read(void)
{
    hf_token_ids ids;
    ddp_err err;
    CHECK(read_ids("{\"bos_token_id\": 1, \"eos_token_id\": 50256, \"vocab_size\": 300}", &ids, &err) == DDP_OK, "%s",
          err.msg);
    CHECK(ids.read && !strcmp(ids.bos, "1") && !strcmp(ids.eos, "50256"), "integers: \"%s\" \"%s\"", ids.bos,
          ids.eos);
    CHECK(read_ids("{\"bos_token_id\": null, \"vocab_size\": 300}", &ids, &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(ids.bos, "null") && !strcmp(ids.eos, ""), "null and absent: \"%s\" \"%s\"", ids.bos, ids.eos);
    CHECK(read_ids("{\"eos_token_id\": [9, 0, 11]}", &ids, &err) == DDP_OK, "%s", err.msg);
    CHECK(!strcmp(ids.eos, "[\n    9,\n    0,\n    11\n  ]"), "a list as json.dumps(indent=2) writes it: \"%s\"",
          ids.eos);
    CHECK(read_ids("{\"eos_token_id\": []}", &ids, &err) == DDP_OK && !strcmp(ids.eos, "[]"), "an empty list: \"%s\"",
          ids.eos);
    char many[400] = "{\"eos_token_id\": [0";
    for (int i = 1; i < HF_EOS_IDS_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), ", %d", 100000 % 300 + i);
    strcat(many, "]}");
    CHECK(read_ids(many, &ids, &err) == DDP_OK, "HF_EOS_IDS_MAX ids: %s", err.msg);
}

static void test_refused(void)
{
    static const struct {
        const char *text, *where, *why;
    } bad[] = {
        {"{\n  \"eos_token_id\": -1}", ":2:19: eos_token_id is -1", "expected null, a token id or a list of them"},
        {"{\"bos_token_id\": 9223372036854775808}", ":1:18: bos_token_id is 9223372036854775808", "expected null"},
        {"{\"bos_token_id\": 1.5}", ":1:18: bos_token_id is 1.5", "expected null or a token id"},
        {"{\"bos_token_id\": \"1\"}", ":1:18: bos_token_id is \"1\"", "expected null or a token id"},
        {"{\"bos_token_id\": [1]}", ":1:18: bos_token_id is an array", "expected null or a token id"},
        {"{\"eos_token_id\": [1, true]}", ":1:22: eos_token_id is true", "a list of them"},
        {"{\"eos_token_id\": [[1]]}", ":1:19: eos_token_id is an array", "a token id or a list of them"},
        {"{\"eos_token_id\": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}", ":1:18: eos_token_id is an array",
         "at most 16 token ids"},
        {"[1]", "config.json: an array, expected an object", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hf_token_ids ids;
        ddp_err err;
        int rc = read_ids(bad[i].text, &ids, &err);
        CHECK(rc == DDP_EUSAGE && strstr(err.msg, bad[i].where) && strstr(err.msg, bad[i].why),
              "%s: rc %d, \"%s\", expected \"%s\" and \"%s\"", bad[i].text, rc, err.msg, bad[i].where, bad[i].why);
    }
}

static void test_write(void)
{
    char out[512];
    hf_token_ids ids;
    ddp_err err;
    written(NULL, "1", "2", out, sizeof out);
    CHECK(!strcmp(out, "  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n"), "nothing read: the defaults: %s", out);
    written(NULL, NULL, NULL, out, sizeof out);
    CHECK(!strcmp(out, ""), "nothing read, defaults None: no lines: \"%s\"", out);
    CHECK(read_ids("{\"bos_token_id\": null, \"eos_token_id\": [7, 8]}", &ids, &err) == DDP_OK, "%s", err.msg);
    written(&ids, "1", "2", out, sizeof out);
    CHECK(!strcmp(out, "  \"bos_token_id\": null,\n  \"eos_token_id\": [\n    7,\n    8\n  ],\n"),
          "null where the class has 1 is written, the list as read: %s", out);
    written(&ids, NULL, NULL, out, sizeof out);
    CHECK(!strcmp(out, "  \"eos_token_id\": [\n    7,\n    8\n  ],\n"), "null where the class has None is not: %s",
          out);
    CHECK(read_ids("{\"eos_token_id\": 5}", &ids, &err) == DDP_OK, "%s", err.msg);
    written(&ids, "1", "2", out, sizeof out);
    CHECK(!strcmp(out, "  \"bos_token_id\": 1,\n  \"eos_token_id\": 5,\n"), "absent: the class default: %s", out);
    written(&ids, NULL, NULL, out, sizeof out);
    CHECK(!strcmp(out, "  \"eos_token_id\": 5,\n"), "absent, default None: left out: %s", out);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    test_read();
    test_refused();
    test_write();
    char path[sizeof dir + 16];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
    return check_done("test_hf_token_ids");
}
