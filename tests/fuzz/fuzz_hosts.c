/* fuzz_hosts.c — libFuzzer target for ddprun's reader of the hosts it is given
 * (launcher/ddprun/ddprun_hosts.c): a hostfile and a -H list.
 *
 * The input is written as a hostfile and, up to its first NUL, taken as a -H list. Whatever the
 * check (ddprun_hosts_check) accepts must size the threads sanely: the busiest node's ranks from 1
 * to np for every np tried; a refusal must say why. For an accepted -H list, dropping the hosts a
 * deadline named (its first entry's) must leave a list the check accepts again, with slots left.
 * The harness aborts otherwise. Reading only: nothing here starts a process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ddprun/ddprun.h"
#include "tests/fuzz/fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_sizes(const char *hosts, const char *hostfile, const char *what)
{
    static const int nps[] = {1, 2, 3, 8, 64, 100001};
    for (size_t i = 0; i < sizeof nps / sizeof *nps; i++) {
        int most = ddprun_ranks_per_node(hosts, hostfile, nps[i]);
        if (most < 1 || most > nps[i]) {
            fprintf(stderr, "%s: %d ranks on the busiest node of %d\n", what, most, nps[i]);
            abort();
        }
    }
}

static void check_refusal(int rc, const ddp_err *err, const char *what)
{
    if (rc != DDP_OK && (rc != DDP_EUSAGE || err->msg[0] == '\0')) {
        fprintf(stderr, "%s: refused with code %d and message \"%s\"\n", what, rc, err->msg);
        abort();
    }
}

/* Drops the first entry's host as a deadline would name it: what is left must pass the check. */
static void check_drop(const char *hosts)
{
    deadline_verdict d = {.n_hosts = 1};
    snprintf(d.hosts[0], sizeof d.hosts[0], "%.*s", (int)strcspn(hosts, ":,"), hosts);
    static char left[DISCOVERY_LIST_MAX];
    int slots_left = 0;
    ddp_err err = {0};
    if (!ddprun_drop_hosts(hosts, &d, left, sizeof left, &slots_left)) return;
    if (slots_left < 1 || ddprun_hosts_check(left, NULL, &err) != DDP_OK) {
        fprintf(stderr, "-H \"%s\" without %s: \"%s\" (%d slots): %s\n", hosts, d.hosts[0], left, slots_left,
                err.msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192) return 0;
    char path[4096];
    fuzz_path(path, sizeof path, "hosts");
    fuzz_write_file(path, data, size);
    ddp_err err = {0};
    int rc = ddprun_hosts_check(NULL, path, &err);
    check_refusal(rc, &err, "hostfile");
    if (rc == DDP_OK) check_sizes(NULL, path, "hostfile");

    char *list = strndup((const char *)data, size);
    if (!list) abort();
    err = (ddp_err){0};
    rc = ddprun_hosts_check(list, NULL, &err);
    check_refusal(rc, &err, "-H");
    if (rc == DDP_OK) {
        check_sizes(list, NULL, "-H");
        check_drop(list);
    }
    free(list);
    return 0;
}
