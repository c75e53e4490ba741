/* ddprun_hosts.c — reading the hosts ddprun was given (-H "h1:8,h2" or a hostfile's "host slots=N"
 * lines): checking them before anything starts (a malformed entry named, with the hostfile's line),
 * how many ranks the busiest node runs, which sizes each rank's thread count, this node's cores as
 * mpirun counts its slots, the one match of a host against a deadline's or notice's hosts, and the
 * -H list without those hosts, for the next attempt, and the rank count when -np is not given. The one reader of a "host:slots" entry,
 * which --host-discovery's lines use too.
 * Must not start anything or decide restarts (ddprun.c does). */
#include "ddprun.h"

#include <ctype.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/base/affix.h"

static bool host_char(char ch) { return isalnum((unsigned char)ch) || ch == '.' || ch == '-' || ch == '_'; }

/* A whole number from 1 to DDPRUN_SLOTS_MAX in the len bytes at s (no sign, nothing else). */
static bool slot_count(const char *s, size_t len, int *slots)
{
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]) || (v = v * 10 + (s[i] - '0')) > DDPRUN_SLOTS_MAX)
            return false;
    }
    *slots = (int)v;
    return len > 0 && v >= 1;
}

bool ddprun_host_entry(const char *s, size_t len, int default_slots, size_t *name_len, int *slots, char *why,
                       size_t cap)
{
    const char *colon = memchr(s, ':', len);
    *name_len = colon ? (size_t)(colon - s) : len;
    if (*name_len == 0 || *name_len >= DDP_HOST_NAME_MAX || (!colon && default_slots == 0)) {
        snprintf(why, cap, "expected %s (a host name of 1 to %d characters)",
                 default_slots ? "host or host:slots" : "host:slots", DDP_HOST_NAME_MAX - 1);
        return false;
    }
    for (size_t i = 0; i < *name_len; i++)
        if (!host_char(s[i])) {
            snprintf(why, cap, "a host name has letters, digits, '.', '-' and '_' only");
            return false;
        }
    *slots = default_slots;
    if (colon && !slot_count(colon + 1, len - *name_len - 1, slots)) {
        snprintf(why, cap, "slots: expected a whole number from 1 to %d", DDPRUN_SLOTS_MAX);
        return false;
    }
    return true;
}

/* The hosts of a -H list or hostfile, each once, with their slots as mpirun counts them. slots 0:
 * not given (a hostfile line without slots; mpirun gives that host its cores). */
typedef struct host_table {
    struct host_slots {
        char name[DDP_HOST_NAME_MAX];
        int slots;
    } *h;
    int n, cap;
} host_table;

/* The host named by the name_len bytes at name in t, or NULL. */
static struct host_slots *table_find(host_table *t, const char *name, size_t name_len)
{
    for (int i = 0; i < t->n; i++)
        if (strlen(t->h[i].name) == name_len && !strncmp(t->h[i].name, name, name_len)) return &t->h[i];
    return NULL;
}

static int table_append(host_table *t, const char *name, size_t name_len, int slots, ddp_err *err)
{
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        struct host_slots *h = realloc(t->h, (size_t)cap * sizeof *h);
        if (!h) return ddp_fail(err, DDP_ERUNTIME, "no memory for %d hosts", cap);
        t->h = h;
        t->cap = cap;
    }
    snprintf(t->h[t->n].name, DDP_HOST_NAME_MAX, "%.*s", (int)name_len, name);
    t->h[t->n++].slots = slots;
    return DDP_OK;
}

static int capped_sum(int a, int b) { return (long)a + b > DDPRUN_SLOTS_MAX ? DDPRUN_SLOTS_MAX : a + b; }

/* -H "h1:8,h2" (no count: 1 slot) into t, a host listed again adding its slots as mpirun does;
 * DDP_EUSAGE naming the entry that is not host[:slots]. */
static int read_host_list(const char *hosts, host_table *t, ddp_err *err)
{
    int rc = DDP_OK;
    const char *p = hosts;
    for (int no = 1; rc == DDP_OK; no++) {
        size_t len = strcspn(p, ","), name_len;
        int slots;
        char why[128];
        if (!ddprun_host_entry(p, len, 1, &name_len, &slots, why, sizeof why))
            return ddp_fail(err, DDP_EUSAGE, "-H \"%.200s\": entry %d \"%.*s\": %s", hosts, no,
                            (int)(len < 200 ? len : 200), p, why);
        struct host_slots *known = table_find(t, p, name_len);
        if (known)
            known->slots = capped_sum(known->slots, slots);
        else
            rc = table_append(t, p, name_len, slots, err);
        if (p[len] == '\0') break;
        p += len + 1;
    }
    return rc;
}

#define BLANKS " \t\r\n"

/* The words mpirun's hostfile reader takes for a host's slots, and for its most slots (which are
 * its slots where no slots word is given). */
static const char *const slot_words[] = {"slots", "count", "cpu"};
static const char *const max_words[] = {"max_slots", "max-slots", "slots_max", "slots-max", "max_cpu", "max-cpu",
                                        "cpu_max",   "cpu-max",   "max_count", "max-count", "count_max", "count-max"};

static bool word_in(const char *w, size_t len, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(words[i]) == len && !strncmp(words[i], w, len)) return true;
    return false;
}

/* What one hostfile line says of its host's slots, read as mpirun reads it: "slots=N" (or count=,
 * cpu=; blanks allowed around '='), else "max_slots=N" (or a synonym), else nothing (slots 0).
 * *given: a slots word was there. False, with why, for such a word without "= N", N from 1 to
 * DDPRUN_SLOTS_MAX, or a second slots word on the line (mpirun refuses both); any other word is
 * mpirun's to judge. */
static bool line_slots(const char *p, int *slots, bool *given, char *why, size_t cap)
{
    int max = 0;
    *slots = 0;
    *given = false;
    for (p += strspn(p, BLANKS); *p; p += strspn(p, BLANKS)) {
        const char *word = p;
        size_t len = strcspn(p, BLANKS "=");
        bool is_slots = word_in(word, len, slot_words, sizeof slot_words / sizeof *slot_words);
        bool is_max = word_in(word, len, max_words, sizeof max_words / sizeof *max_words);
        p += len + (len == 0); /* a '=' alone is skipped */
        if (!is_slots && !is_max) continue;
        const char *value = p + strspn(p, BLANKS);
        size_t value_len = 0;
        int n = 0;
        if (*value == '=') {
            value += 1 + strspn(value + 1, BLANKS);
            value_len = strcspn(value, BLANKS "=");
        }
        if (is_slots && *given) {
            snprintf(why, cap, "%.*s: the slots are given twice on one line", (int)len, word);
            return false;
        }
        if (!slot_count(value, value_len, &n)) {
            snprintf(why, cap, "%.*s: expected %.*s=N, N a whole number from 1 to %d", (int)len, word, (int)len, word,
                     DDPRUN_SLOTS_MAX);
            return false;
        }
        *given = *given || is_slots;
        *(is_slots ? slots : &max) = n;
        p = value + value_len;
    }
    if (!*given) *slots = max;
    return true;
}

/* One hostfile line (its comment cut off) into t: its host, and its slots (line_slots). A host
 * listed again gains a slot, as in mpirun (a first listing without slots counting 1), and may not
 * give its slots again (mpirun refuses that). DDP_EUSAGE naming path:no, else DDP_OK. */
static int read_hostfile_line(host_table *t, const char *line, const char *path, int no, ddp_err *err)
{
    const char *host = line + strspn(line, BLANKS);
    size_t name_len = strcspn(host, BLANKS);
    int slots;
    bool given;
    char why[160];
    if (name_len == 0) return DDP_OK;
    if (name_len >= DDP_HOST_NAME_MAX)
        return ddp_fail(err, DDP_EUSAGE, "--hostfile %s:%d: a host name of %zu characters (at most %d)", path, no,
                        name_len, DDP_HOST_NAME_MAX - 1);
    if (!line_slots(host + name_len, &slots, &given, why, sizeof why))
        return ddp_fail(err, DDP_EUSAGE, "--hostfile %s:%d: %.*s: %s", path, no, (int)name_len, host, why);
    struct host_slots *known = table_find(t, host, name_len);
    if (known && given)
        return ddp_fail(err, DDP_EUSAGE,
                        "--hostfile %s:%d: %.*s: slots given for a host listed before (mpirun refuses it: list the "
                        "host once with slots=N, or once per slot)",
                        path, no, (int)name_len, host);
    if (!known) return table_append(t, host, name_len, slots, err);
    known->slots = capped_sum(known->slots ? known->slots : 1, 1);
    return DDP_OK;
}

/* A hostfile ("host [slots=N] ..." lines, '#' starting a comment) into t; DDP_EUSAGE naming
 * file:line for a line longer than the reader takes, a host name too long or slots mpirun would
 * refuse (read_hostfile_line), and a file that cannot be read. The host names themselves (IPv6
 * addresses among them) are mpirun's to judge. */
static int read_hostfile(const char *path, host_table *t, ddp_err *err)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return ddp_fail(err, DDP_EUSAGE, "--hostfile %s: cannot read it: %s", path, strerror(errno));
    char line[1024];
    int rc = DDP_OK;
    for (int no = 1; rc == DDP_OK && fgets(line, sizeof line, fp); no++) {
        if (!strchr(line, '\n') && !feof(fp)) {
            rc = ddp_fail(err, DDP_EUSAGE, "--hostfile %s:%d: longer than %zu bytes", path, no, sizeof line - 2);
            break;
        }
        line[strcspn(line, "#")] = '\0';
        rc = read_hostfile_line(t, line, path, no, err);
    }
    if (rc == DDP_OK && ferror(fp)) rc = ddp_fail(err, DDP_EUSAGE, "--hostfile %s: cannot read it", path);
    fclose(fp);
    return rc;
}

bool ddprun_in_slurm_allocation(void)
{
    return (getenv("SLURM_JOB_ID") || getenv("SLURM_JOBID")) && getenv("SLURM_TASKS_PER_NODE");
}

#define SLURM_NODES_MAX 65536 /* an allocation's nodes read; the ranks fill the first ones */

/* A Slurm allocation's nodes into t, their slots as mpirun takes them from SLURM_TASKS_PER_NODE
 * ("2(x3),1": three nodes of 2 tasks, then one of 1); none where that is absent or malformed
 * (mpirun reads it itself). */
static void read_slurm_allocation(host_table *t)
{
    const char *p = ddprun_in_slurm_allocation() ? getenv("SLURM_TASKS_PER_NODE") : NULL;
    bool ok = p != NULL;
    while (ok && *p) {
        char *end;
        long slots = strtol(p, &end, 10), repeat = 1;
        ok = end != p && slots >= 1 && slots <= DDPRUN_SLOTS_MAX;
        if (ok && has_prefix(end, "(x")) {
            const char *at = end + 2;
            repeat = strtol(at, &end, 10);
            ok = end != at && *end == ')' && repeat >= 1 && repeat <= SLURM_NODES_MAX;
            end++;
        }
        for (long i = 0; ok && i < repeat && t->n < SLURM_NODES_MAX; i++)
            ok = table_append(t, "slurm-node", 10, (int)slots, NULL) == DDP_OK;
        ok = ok && (*end == ',' || !*end);
        p = ok && *end ? end + 1 : end;
    }
    if (!ok)
        t->n = 0;
}

/* The hosts of -H or the hostfile (neither: a Slurm allocation's, or no host) into t. */
static int read_hosts(const char *hosts, const char *hostfile, host_table *t, ddp_err *err)
{
    *t = (host_table){0};
    if (!hosts && !hostfile) {
        read_slurm_allocation(t);
        return DDP_OK;
    }
    int rc = hosts ? read_host_list(hosts, t, err) : read_hostfile(hostfile, t, err);
    if (rc != DDP_OK) {
        free(t->h);
        *t = (host_table){0};
    }
    return rc;
}

int ddprun_hosts_check(const char *hosts, const char *hostfile, ddp_err *err)
{
    host_table t;
    int rc = read_hosts(hosts, hostfile, &t, err);
    free(t.h);
    return rc;
}

int ddprun_ranks_per_node(const char *hosts, const char *hostfile, int np)
{
    host_table t;
    if (read_hosts(hosts, hostfile, &t, NULL) != DDP_OK || t.n == 0) return np;
    int left = np, most = 0, spread = (np + t.n - 1) / t.n, cores = 0;
    for (int h = 0; h < t.n && left > 0; h++) {
        /* no slots given: mpirun gives the host its cores, taken to be as many as this node's */
        if (t.h[h].slots == 0 && cores == 0)
            cores = ddprun_local_cores();
        int slots = t.h[h].slots > 0 ? t.h[h].slots : cores;
        int here = slots < left ? slots : left;
        most = here > most ? here : most;
        left -= here;
    }
    free(t.h);
    return left > 0 ? spread : most; /* oversubscribed: spread evenly */
}

int ddprun_hosts_np(const char *hosts, const char *hostfile, int gpus, int *np, ddp_err *err)
{
    host_table t;
    int rc = read_hosts(hosts, hostfile, &t, err), total = 0, least = 0;
    const char *from = hosts ? "-H" : hostfile ? "--hostfile" : "the Slurm allocation (SLURM_TASKS_PER_NODE)";
    for (int h = 0; rc == DDP_OK && h < t.n; h++) {
        if (t.h[h].slots == 0)
            rc = ddp_fail(err, DDP_EUSAGE, "-np not given, and %s leaves host %s's slots to mpirun: give -np (one "
                          "rank per GPU) or slots=N", from, t.h[h].name);
        total += t.h[h].slots;
        least = h == 0 || t.h[h].slots < least ? t.h[h].slots : least;
    }
    *np = rc == DDP_OK ? total : 0;
    if (*np > 0)
        fprintf(stderr, "ddprun: -np not given: %d slot%s in %s -> %d rank%s\n", total, total == 1 ? "" : "s", from,
                total, total == 1 ? "" : "s");
    if (*np > 0 && least < gpus)
        fprintf(stderr, "ddprun: warning: %s has %d task%s on a node, and this node has %d GPUs: %d of each such "
                "node's GPUs stay idle; ask for --ntasks-per-node=%d\n", from, least, least == 1 ? "" : "s", gpus,
                gpus - least, gpus);
    free(t.h);
    return rc;
}

bool verdict_has_host(const deadline_verdict *d, const char *host, size_t len)
{
    for (int i = 0; i < d->n_hosts; i++)
        if (strlen(d->hosts[i]) == len && !strncmp(d->hosts[i], host, len))
            return true;
    return false;
}

void verdict_add_host(deadline_verdict *d, const char *host, size_t len)
{
    if (!verdict_has_host(d, host, len) && d->n_hosts < DEADLINE_HOSTS_MAX && len < sizeof d->hosts[0])
        snprintf(d->hosts[d->n_hosts++], sizeof d->hosts[0], "%.*s", (int)len, host);
}

bool ddprun_drop_hosts(const char *hosts, const deadline_verdict *d, char *buf, size_t size, int *slots_left)
{
    size_t at = 0;
    bool dropped = false, cut = false;
    *slots_left = 0;
    if (!hosts || d->n_hosts == 0) return false;
    /* a second restart's list is buf itself: the list is made in a copy, written to buf if whole */
    char *from = strdup(hosts), *kept = malloc(size);
    if (!from || !kept) {
        free(from);
        free(kept);
        return false;
    }
    for (const char *p = from; *p;) {
        size_t len = strcspn(p, ","), name_len;
        int slots;
        char why[128];
        bool lost = !ddprun_host_entry(p, len, 1, &name_len, &slots, why, sizeof why) || /* checked at the start */
                    verdict_has_host(d, p, name_len);
        dropped = dropped || lost;
        cut = cut || (!lost && at + (at > 0) + len + 1 > size); /* a comma, the entry, its NUL */
        if (!lost && !cut) {
            at += (size_t)snprintf(kept + at, size - at, "%s%.*s", at ? "," : "", (int)len, p);
            *slots_left += slots;
        }
        p += len + (p[len] == ',');
    }
    bool ok = dropped && at > 0 && !cut;
    if (ok)
        memcpy(buf, kept, at + 1);
    free(from);
    free(kept);
    return ok;
}

/* One number from the file DIR/cpuN/NAME (the sysfs layout), -1 when it cannot be read. */
static long cpu_attr(const char *dir, long cpu, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cpu%ld/%s", dir, cpu, name);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

int ddprun_local_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_CONF), online = sysconf(_SC_NPROCESSORS_ONLN);
    const char *dir = getenv("DDP_TEST_CPU_SYSFS"); /* tests: a made-up topology */
    dir = dir && *dir ? dir : "/sys/devices/system/cpu";
    /* the processors this process may run on (a container's cpuset, taskset, a Slurm task's
     * cgroup): sysfs lists the whole machine's */
    cpu_set_t allowed;
    bool masked = sched_getaffinity(0, sizeof allowed, &allowed) == 0;
    long *cores = n > 0 ? malloc((size_t)n * sizeof *cores) : NULL;
    int distinct = 0;
    for (long cpu = 0; cores && cpu < n; cpu++) {
        if (cpu_attr(dir, cpu, "online") == 0) /* cpu0 has no such file: online */
            continue;
        if (masked && cpu < CPU_SETSIZE && !CPU_ISSET((int)cpu, &allowed))
            continue;
        long package = cpu_attr(dir, cpu, "topology/physical_package_id"), core = cpu_attr(dir, cpu, "topology/core_id");
        if (package < 0 || core < 0) { /* no topology to read: every online processor counts */
            distinct = 0;
            break;
        }
        long key = package << 32 | core;
        bool seen = false;
        for (int i = 0; i < distinct && !seen; i++)
            seen = cores[i] == key;
        if (!seen)
            cores[distinct++] = key;
    }
    free(cores);
    int usable = masked ? CPU_COUNT(&allowed) : (int)online;
    return distinct > 0 ? distinct : usable > 0 ? usable : 1;
}
