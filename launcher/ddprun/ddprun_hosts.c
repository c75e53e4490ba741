/* ddprun_hosts.c — reading the hosts ddprun was given (-H "h1:8,h2" or a hostfile's "host slots=N"
 * lines): checking them before anything starts (a malformed entry named, with the hostfile's line),
 * how many ranks the busiest node runs, which sizes each rank's thread count, and the -H list
 * without the hosts a collective deadline named, for the next attempt. The one reader of a
 * "host:slots" entry, which --host-discovery's lines use too. Must not start anything or decide
 * restarts (ddprun.c does). */
#include "ddprun.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (*name_len == 0 || *name_len >= DDPRUN_HOST_LEN || (!colon && default_slots == 0)) {
        snprintf(why, cap, "expected %s (a host name of 1 to %d characters)",
                 default_slots ? "host or host:slots" : "host:slots", DDPRUN_HOST_LEN - 1);
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

/* The hosts of a -H list or hostfile, each once: a host listed again adds its slots, as mpirun
 * counts it. slots 0: not given (a hostfile line without slots=; mpirun decides). */
typedef struct host_table {
    struct host_slots {
        char name[DDPRUN_HOST_LEN];
        int slots;
    } *h;
    int n, cap;
} host_table;

static int table_add(host_table *t, const char *name, size_t name_len, int slots, ddp_err *err)
{
    for (int i = 0; i < t->n; i++)
        if (strlen(t->h[i].name) == name_len && !strncmp(t->h[i].name, name, name_len)) {
            bool known = t->h[i].slots > 0 && slots > 0;
            long sum = (long)t->h[i].slots + slots;
            t->h[i].slots = known ? (int)(sum > DDPRUN_SLOTS_MAX ? DDPRUN_SLOTS_MAX : sum) : 0;
            return DDP_OK;
        }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        struct host_slots *h = realloc(t->h, (size_t)cap * sizeof *h);
        if (!h) return ddp_fail(err, DDP_ERUNTIME, "no memory for %d hosts", cap);
        t->h = h;
        t->cap = cap;
    }
    snprintf(t->h[t->n].name, DDPRUN_HOST_LEN, "%.*s", (int)name_len, name);
    t->h[t->n++].slots = slots;
    return DDP_OK;
}

/* -H "h1:8,h2" (no count: 1 slot) into t; DDP_EUSAGE naming the entry that is not host[:slots]. */
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
        rc = table_add(t, p, name_len, slots, err);
        if (p[len] == '\0') break;
        p += len + 1;
    }
    return rc;
}

/* A hostfile line's slots (0: no "slots=N" word); false when the value is not a slot count. Only
 * the word "slots=" is read: max_slots and mpirun's other keys are mpirun's to judge. */
static bool line_slots(char *line, int *slots)
{
    *slots = 0;
    for (char *word = strtok(line, " \t\r\n"); word; word = strtok(NULL, " \t\r\n"))
        if (!strncmp(word, "slots=", 6) && !slot_count(word + 6, strlen(word + 6), slots)) return false;
    return true;
}

/* A hostfile ("host [slots=N] ..." lines, '#' starting a comment) into t; DDP_EUSAGE naming
 * file:line for a line longer than the reader takes, a host name too long or a bad slots=N, and
 * a file that cannot be read. The host names themselves (IPv6 addresses among them) are
 * mpirun's to judge. */
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
        char *host = line + strspn(line, " \t\r\n");
        size_t name_len = strcspn(host, " \t\r\n");
        int slots;
        if (name_len == 0) continue;
        if (name_len >= DDPRUN_HOST_LEN)
            rc = ddp_fail(err, DDP_EUSAGE, "--hostfile %s:%d: a host name of %zu characters (at most %d)", path, no,
                          name_len, DDPRUN_HOST_LEN - 1);
        else if (!line_slots(host + name_len, &slots))
            rc = ddp_fail(err, DDP_EUSAGE, "--hostfile %s:%d: %.*s: slots=N: expected a whole number from 1 to %d",
                          path, no, (int)name_len, host, DDPRUN_SLOTS_MAX);
        else
            rc = table_add(t, host, name_len, slots, err);
    }
    if (rc == DDP_OK && ferror(fp)) rc = ddp_fail(err, DDP_EUSAGE, "--hostfile %s: cannot read it", path);
    fclose(fp);
    return rc;
}

/* The hosts of -H or the hostfile (neither: no host) into t. */
static int read_hosts(const char *hosts, const char *hostfile, host_table *t, ddp_err *err)
{
    *t = (host_table){0};
    int rc = hosts ? read_host_list(hosts, t, err) : hostfile ? read_hostfile(hostfile, t, err) : DDP_OK;
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
    int left = np, most = 0, spread = (np + t.n - 1) / t.n;
    for (int h = 0; h < t.n && left > 0; h++) {
        if (t.h[h].slots == 0) { /* mpirun decides this host's slots: assume an even spread */
            most = spread;
            left = 0;
            break;
        }
        int here = t.h[h].slots < left ? t.h[h].slots : left;
        most = here > most ? here : most;
        left -= here;
    }
    free(t.h);
    return left > 0 ? spread : most; /* oversubscribed: spread evenly */
}

bool ddprun_drop_hosts(const char *hosts, const deadline_verdict *d, char *buf, size_t size, int *slots_left)
{
    size_t at = 0;
    *slots_left = 0;
    if (!hosts || d->n_hosts == 0) return false;
    /* a second restart's list is buf itself: read from a copy, never from what is written */
    char *from = strdup(hosts);
    if (!from) return false;
    for (const char *p = from; *p;) {
        size_t len = strcspn(p, ","), name_len;
        int slots;
        char why[128];
        bool lost = !ddprun_host_entry(p, len, 1, &name_len, &slots, why, sizeof why); /* checked at the start */
        for (int i = 0; i < d->n_hosts; i++)
            lost = lost || (strlen(d->hosts[i]) == name_len && !strncmp(d->hosts[i], p, name_len));
        if (!lost && at + len + 2 < size) {
            at += (size_t)snprintf(buf + at, size - at, "%s%.*s", at ? "," : "", (int)len, p);
            *slots_left += slots;
        }
        p += len + (p[len] == ',');
    }
    free(from);
    return at > 0;
}
