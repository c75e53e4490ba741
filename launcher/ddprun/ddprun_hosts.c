/* ddprun_hosts.c — reading the hosts ddprun was given (-H "h1:8,h2" or a hostfile's "host slots=N"
 * lines): how many ranks the busiest node runs, which sizes each rank's thread count, and the -H
 * list without the hosts a collective deadline named, for the next attempt. Must not start
 * anything or decide restarts (ddprun.c does). */
#include "ddprun.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The "host[:slots]" entry of a -H list at p: its length, its name's length and its slot count
 * (1 when not given). Returns the next entry. */
static const char *host_entry(const char *p, size_t *len, size_t *name_len, int *slots)
{
    *len = strcspn(p, ",");
    *name_len = strcspn(p, ":,");
    *slots = *name_len < *len ? atoi(p + *name_len + 1) : 1;
    return p + *len + (p[*len] == ',');
}

/* Fills slots[] from "h1:8,h2" (-H; no count = 1 slot) or a hostfile's "host slots=N" lines
 * (no count = 0: let mpirun decide). Returns the host count. */
static int host_slots(const char *hosts, const char *hostfile, int slots[], int max_hosts)
{
    int n = 0;
    if (hosts) {
        size_t len, name_len;
        for (const char *p = hosts; *p && n < max_hosts; n++)
            p = host_entry(p, &len, &name_len, &slots[n]);
    } else if (hostfile) {
        FILE *fp = fopen(hostfile, "r");
        char line[1024];
        while (fp && n < max_hosts && fgets(line, sizeof line, fp)) {
            char host[512];
            if (sscanf(line, " %511s", host) != 1 || host[0] == '#') continue;
            const char *s = strstr(line, "slots=");
            slots[n++] = s ? atoi(s + 6) : 0;
        }
        if (fp) fclose(fp);
    }
    return n;
}

int ddprun_ranks_per_node(const char *hosts, const char *hostfile, int np)
{
    int slots[256];
    int n_hosts = host_slots(hosts, hostfile, slots, 256);
    if (n_hosts == 0) return np;
    int left = np, most = 0;
    for (int h = 0; h < n_hosts && left > 0; h++) {
        if (slots[h] <= 0) return (np + n_hosts - 1) / n_hosts;
        int here = slots[h] < left ? slots[h] : left;
        most = here > most ? here : most;
        left -= here;
    }
    return left > 0 ? (np + n_hosts - 1) / n_hosts : most; /* oversubscribed: spread evenly */
}

bool ddprun_drop_hosts(const char *hosts, const deadline_verdict *d, char *buf, size_t size, int *slots_left)
{
    size_t at = 0;
    *slots_left = 0;
    if (!hosts || d->n_hosts == 0) return false;
    /* a second restart's list is buf itself: read from a copy, never from what is written */
    char *from = strdup(hosts);
    if (!from) return false;
    for (const char *p = from, *next; *p; p = next) {
        size_t len, name_len;
        int slots;
        next = host_entry(p, &len, &name_len, &slots);
        bool lost = false;
        for (int i = 0; i < d->n_hosts; i++)
            lost = lost || (strlen(d->hosts[i]) == name_len && !strncmp(d->hosts[i], p, name_len));
        if (!lost && at + len + 2 < size) {
            at += (size_t)snprintf(buf + at, size - at, "%s%.*s", at ? "," : "", (int)len, p);
            *slots_left += slots;
        }
    }
    free(from);
    return at > 0;
}
