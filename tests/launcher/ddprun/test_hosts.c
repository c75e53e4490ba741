/* test_hosts.c — ddprun's arithmetic on the hosts it is given (launcher/ddprun/ddprun_hosts.c):
 * the busiest node's ranks, which sizes each rank's threads, when a host with no slot count
 * follows hosts with one (those keep the ranks they were given, and the ranks left spread over the
 * rest); and the restart's list after a
 * collective deadline: the named hosts left out, and nothing claimed dropped when the verdict names
 * no host of the list (an address in -H, a host name in the verdict). */
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
}

int main(void)
{
    test_ranks_per_node();
    test_drop_hosts();
    return check_done("test_hosts");
}
