/* test_hosts.c — ddprun's arithmetic on the hosts it is given (launcher/ddprun/ddprun_hosts.c):
 * the busiest node's ranks, which sizes each rank's threads, when a host with no slot count
 * follows hosts with one (those keep the ranks they were given, and the ranks left spread over the
 * rest); and the restart's list after a
 * collective deadline: the named hosts left out (as many as discovery lists), and nothing claimed
 * dropped when the verdict names no host of the list (an address in -H, a host name in the
 * verdict); and which hosts a failed attempt loses (launcher/ddprun/ddprun_outcome.c). */
#include <stdio.h>
#include <string.h>

#include "launcher/ddprun/ddprun.h"
#include "tests/check.h"

static void test_ranks_per_node(void)
{
    char path[] = "/tmp/test_hosts.XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL, "temporary hostfile");
    if (!f)
        return;
    fputs("h1 slots=8\nh2\n", f);
    fclose(f);
    CHECK_EQ_INT(ddprun_ranks_per_node(NULL, path, 9), 8); /* h1 fills its 8 slots first */
    CHECK_EQ_INT(ddprun_ranks_per_node(NULL, path, 4), 4);
    /* a host without slots has as many as mpirun counts cores (this node's, ddprun_local_cores):
     * the ranks fill h1's 2, then h2 up to its cores; past them every host is oversubscribed */
    const int cores = ddprun_local_cores();
    f = fopen(path, "w");
    fputs("h1 slots=2\nh2\n", f);
    fclose(f);
    CHECK_EQ_INT(ddprun_ranks_per_node(NULL, path, 2 + cores), cores > 2 ? cores : 2);
    CHECK_EQ_INT(ddprun_ranks_per_node(NULL, path, 2 + cores + 2), (2 + cores + 2 + 1) / 2);
    f = fopen(path, "w");
    fputs("h1\nh2\n", f);
    fclose(f);
    CHECK_EQ_INT(ddprun_ranks_per_node(NULL, path, cores), cores); /* all on h1, as mpirun fills by slot */
    CHECK_EQ_INT(ddprun_ranks_per_node("h1:2,h2:2", NULL, 4), 2);
    CHECK_EQ_INT(ddprun_ranks_per_node("h1:3,h2", NULL, 4), 3);
    remove(path);
}

static void test_drop_hosts(void)
{
    deadline_verdict d = {.n_hosts = 1};
    snprintf(d.hosts[0], sizeof d.hosts[0], "node2");
    char buf[256];
    int slots = 0;
    CHECK(ddprun_drop_hosts("node1:2,node2:2,node3:1", &d, buf, sizeof buf, &slots), "node2 dropped");
    CHECK(!strcmp(buf, "node1:2,node3:1") && slots == 3, "left: %s, %d slots", buf, slots);
    CHECK(!ddprun_drop_hosts("10.0.0.1:2,10.0.0.2:2", &d, buf, sizeof buf, &slots),
          "a verdict naming no host of the list drops nothing");
    CHECK(!ddprun_drop_hosts("node2:4", &d, buf, sizeof buf, &slots), "no host would be left");
    CHECK(ddprun_drop_hosts("node1:2,node2:2,node3:1", &d, buf, 16, &slots) && !strcmp(buf, "node1:2,node3:1"),
          "the hosts left fill the buffer to its last byte: %s", buf);
    strcpy(buf, "kept");
    CHECK(!ddprun_drop_hosts("node1:2,node2:2,node3:1", &d, buf, 15, &slots) && !strcmp(buf, "kept"),
          "one byte short: nothing dropped and buf untouched, rather than node3 left out without a word");
    CHECK(ddprun_drop_hosts("node2:1,node1:2", &d, buf, 8, &slots) && !strcmp(buf, "node1:2"),
          "a first entry needs no comma: %s", buf);
}

/* A fleet of DEADLINE_HOSTS_MAX + 1 hosts of which all but the last are lost (a zone's spot
 * instances taken at once): every lost host is recorded once, and the restart keeps the last. */
static void test_drop_many_hosts(void)
{
    static deadline_verdict d;
    static char list[(DEADLINE_HOSTS_MAX + 1) * 16], buf[sizeof list];
    size_t at = 0;
    for (int i = 0; i <= DEADLINE_HOSTS_MAX; i++) {
        char name[16];
        int len = snprintf(name, sizeof name, "spot%d", i);
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s:8", i ? "," : "", name);
        if (i < DEADLINE_HOSTS_MAX) {
            verdict_add_host(&d, name, (size_t)len);
            verdict_add_host(&d, name, (size_t)len); /* named twice, kept once */
        }
    }
    CHECK_EQ_INT(d.n_hosts, DEADLINE_HOSTS_MAX);
    CHECK(DEADLINE_HOSTS_MAX >= DISCOVERY_HOSTS_MAX, "a verdict holds as many hosts as discovery lists");
    int slots = 0;
    CHECK(ddprun_drop_hosts(list, &d, buf, sizeof buf, &slots), "the lost hosts dropped");
    char last[32];
    snprintf(last, sizeof last, "spot%d:8", DEADLINE_HOSTS_MAX);
    CHECK(!strcmp(buf, last) && slots == 8, "left: %.40s, %d slots", buf, slots);
}

/* The hosts a failed attempt's restart leaves out: those whose ranks did not arrive and those whose
 * notice came, but rank 0's where no checkpoint.download_cmd fetches its checkpoints (a restart
 * without it finds none and trains from step 0) and ddprun's own; a host in both lists counts once. */
static void test_lost_hosts(void)
{
    job_result r = {.deadline = {.seen_s = 1, .what = "the collective deadline (ddp.timeout_s)"}};
    snprintf(r.rank0_host, sizeof r.rank0_host, "node1");
    verdict_add_host(&r.deadline, "node1", 5);
    verdict_add_host(&r.deadline, "node2", 5);
    verdict_add_host(&r.notice, "node2", 5);
    verdict_add_host(&r.notice, "node3", 5);
    deadline_verdict lost, noticed;
    failure_lost_hosts(&r, false, false, &lost, &noticed);
    CHECK(lost.n_hosts == 2 && !strcmp(lost.hosts[0], "node2") && !strcmp(lost.hosts[1], "node3"),
          "rank 0's host kept: %d lost, the first %s", lost.n_hosts, lost.hosts[0]);
    CHECK(noticed.n_hosts == 2 && !strcmp(noticed.hosts[0], "node2"), "the noticed ones: %d", noticed.n_hosts);
    CHECK(lost.seen_s == 1 && lost.what == r.deadline.what, "the verdict's time and what carried");
    failure_lost_hosts(&r, true, false, &lost, &noticed);
    CHECK(lost.n_hosts == 3 && !strcmp(lost.hosts[0], "node1"), "fetched: rank 0's host left out too (%d)",
          lost.n_hosts);
    r.rank0_host[0] = '\0'; /* rank 0 never said where it ran: no host but this one is known safe to leave */
    failure_lost_hosts(&r, false, false, &lost, &noticed);
    CHECK(lost.n_hosts == 0, "rank 0's host unknown: every host kept (%d lost)", lost.n_hosts);
}

int main(void)
{
    test_ranks_per_node();
    test_drop_hosts();
    test_drop_many_hosts();
    test_lost_hosts();
    return check_done("test_hosts");
}
