/* ddprun_discovery.c — `--host-discovery CMD`: which hosts a job starts on, asked of the user's
 * command at the start and before each restart.
 *
 * CMD runs through /bin/sh (runtime/base/command.h) in a process group of its own and prints one
 * `host:slots` line per host it knows of (blank lines and lines starting with '#' are skipped;
 * what it writes to stderr is shown on ddprun's, prefixed). The hosts are taken in the order
 * listed until --max-np slots or DISCOVERY_HOSTS_MAX hosts; the lines after those are not read.
 * The rank count is cut to the largest world size train.global_batch divides
 * (config_world_at_most). Fewer than --min-np: CMD runs again every DISCOVERY_POLL_S seconds
 * until --discovery-wait has passed, and then the launch ends naming the time it waited (a run
 * of CMD can overrun the wait) and what the last run listed. A line that is not `host:slots` ends
 * it at once, naming the line. A stop request (SIGINT/SIGTERM/SIGHUP, job_signals_seen) is looked for
 * while CMD runs and while waiting: CMD's process group is ended and discovery returns at once.
 * This file must not start mpirun or decide restarts (ddprun.c does). */
#include "ddprun.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/base/clock.h"
#include "runtime/base/command.h"
#include "config/config.h"

#define DISCOVERY_POLL_S 2.0      /* between runs of CMD while too few slots are listed */
#define DISCOVERY_CMD_LIMIT_S 30.0 /* one run of CMD; past it, its process group is ended */

#define STOP_CHECK_S 0.05       /* while waiting between runs, how often a stop request is looked for */

/* What one run of CMD listed: each host's name and slots, in order, up to what is used. */
typedef struct fleet {
    char names[DISCOVERY_HOSTS_MAX][DDP_HOST_NAME_MAX];
    int slots[DISCOVERY_HOSTS_MAX];
    int n_hosts, total;
    bool unread; /* it listed more hosts than were read (--max-np slots or DISCOVERY_HOSTS_MAX hosts) */
} fleet;

/* One line of CMD's output (no newline) into f; false with why set when it is not `host:slots`,
 * or names a host listed before with other slots. A repeat of a line is taken once: a cloud's API
 * may list an instance twice for a moment, and an elastic job should not end for it. */
static bool parse_line(const char *line, fleet *f, char *why, size_t cap)
{
    size_t name_len;
    int slots;
    if (!ddprun_host_entry(line, strlen(line), 0, &name_len, &slots, why, cap))
        return false;
    for (int h = 0; h < f->n_hosts; h++)
        if (strlen(f->names[h]) == name_len && !strncmp(f->names[h], line, name_len)) {
            if (f->slots[h] == slots)
                return true;
            snprintf(why, cap, "host %s is listed twice, with %d and %d slots", f->names[h], f->slots[h], slots);
            return false;
        }
    snprintf(f->names[f->n_hosts], DDP_HOST_NAME_MAX, "%.*s", (int)name_len, line);
    f->slots[f->n_hosts++] = slots;
    f->total = f->total + slots > DDPRUN_SLOTS_MAX ? DDPRUN_SLOTS_MAX : f->total + slots;
    return true;
}

/* Whether f holds all the hosts that can be used: max_np slots (0: no limit), or as many hosts
 * as ddprun keeps. */
static bool fleet_full(const fleet *f, int max_np)
{
    return (max_np > 0 && f->total >= max_np) || f->n_hosts == DISCOVERY_HOSTS_MAX;
}

/* CMD's output (fp, from its start) into f, up to the hosts that can be used (the lines after
 * them are not read: f->unread says whether one lists a host), those of avoid left out (said on
 * stderr when say is true). DDP_OK, or DDP_EUSAGE naming the line. */
static int parse_output(FILE *fp, const char *cmd, int max_np, const deadline_verdict *avoid, bool say, fleet *f,
                        ddp_err *err)
{
    char line[DISCOVERY_LINE_MAX + 2], why[128];
    memset(f, 0, sizeof *f);
    for (int no = 1; fgets(line, sizeof line, fp); no++) {
        size_t len = strlen(line);
        bool whole = len > 0 && line[len - 1] == '\n';
        while (len > 0 && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        char *text = line + strspn(line, " \t");
        if (!whole && !feof(fp) && !fleet_full(f, max_np))
            return ddp_fail(err, DDP_EUSAGE, "--host-discovery %s: line %d: longer than %zu bytes", cmd, no,
                            sizeof line - 2);
        if (*text == '\0' || *text == '#')
            continue;
        if (fleet_full(f, max_np)) {
            f->unread = true;
            break;
        }
        if (!parse_line(text, f, why, sizeof why))
            return ddp_fail(err, DDP_EUSAGE, "--host-discovery %s: line %d: \"%.200s\": %s", cmd, no, text, why);
        const char *name = f->names[f->n_hosts - 1];
        if (avoid && verdict_has_host(avoid, name, strlen(name))) {
            if (say)
                fprintf(stderr, "ddprun: host discovery: leaving out %s, whose preemption notice came\n", name);
            f->total -= f->slots[--f->n_hosts];
        }
    }
    return DDP_OK;
}

/* CMD's stderr (the file at path) onto ddprun's, each line prefixed. */
static void show_stderr(const char *path)
{
    FILE *fp = fopen(path, "r");
    char line[512];
    while (fp && fgets(line, sizeof line, fp))
        fprintf(stderr, "ddprun: host discovery: %s%s", line, strchr(line, '\n') ? "" : "\n");
    if (fp)
        fclose(fp);
}

/* One run of CMD into f (parse_output: avoid's hosts left out): DDP_OK; DDP_ERUNTIME when CMD
 * failed (err says how; worth another try); DDP_EUSAGE for output that is not host:slots lines. */
static int run_once(const char *cmd, int max_np, const deadline_verdict *avoid, bool say, fleet *f, ddp_err *err)
{
    char out_path[] = "/tmp/ddprun-discovery.XXXXXX", err_path[] = "/tmp/ddprun-discovery-err.XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = out_fd >= 0 ? mkstemp(err_path) : -1;
    if (out_fd < 0 || err_fd < 0) {
        int rc = ddp_fail(err, DDP_ERUNTIME, "cannot make a file for its output in /tmp: %s",
                          strerror(errno));
        if (out_fd >= 0) {
            close(out_fd);
            unlink(out_path);
        }
        return rc;
    }
    close(err_fd);
    /* stdout alone is the host list: stderr goes to a file of its own, shown afterwards */
    char wrapped[COMMAND_MAX];
    int rc = DDP_OK;
    if ((size_t)snprintf(wrapped, sizeof wrapped, "{ %s\n} 2>\"$DDPRUN_STDERR\"", cmd) >= sizeof wrapped)
        rc = ddp_fail(err, DDP_EUSAGE, "--host-discovery: the command is longer than %d bytes", COMMAND_MAX - 32);
    const char *names[] = {"stderr"}, *values[] = {err_path};
    command_result res = {0};
    if (rc == DDP_OK)
        rc = command_run_stoppable(wrapped, names, values, 1, DISCOVERY_CMD_LIMIT_S, job_signals_seen, out_fd, &res,
                                   err);
    show_stderr(err_path);
    unlink(err_path);
    unlink(out_path);
    FILE *fp = rc == DDP_OK ? fdopen(out_fd, "r") : NULL;
    if (fp) {
        rewind(fp);
        rc = parse_output(fp, cmd, max_np, avoid, say, f, err);
        fclose(fp);
    } else {
        if (rc == DDP_OK)
            rc = ddp_fail(err, DDP_ERUNTIME, "cannot read its output: %s", strerror(errno));
        close(out_fd);
    }
    return rc;
}

/* "h1:2, h2:2 (4 slots)" or "no host" for messages; past what fits in cap, "and N more hosts";
 * hosts listed beyond those read are mentioned. */
static void describe(const fleet *f, int max_np, char *out, size_t cap)
{
    size_t used = 0;
    int h = 0;
    out[0] = '\0';
    for (; h < f->n_hosts; h++) {
        char one[DDP_HOST_NAME_MAX + 16];
        int len = snprintf(one, sizeof one, "%s%s:%d", h ? ", " : "", f->names[h], f->slots[h]);
        if (used + (size_t)len + 160 >= cap) /* room for what follows */
            break;
        memcpy(out + used, one, (size_t)len + 1);
        used += (size_t)len;
    }
    if (h < f->n_hosts)
        used += (size_t)snprintf(out + used, cap - used, " and %d more host%s", f->n_hosts - h,
                                 f->n_hosts - h == 1 ? "" : "s");
    if (!f->n_hosts) {
        snprintf(out, cap, "no host");
        return;
    }
    used += (size_t)snprintf(out + used, cap - used, " (%d slot%s", f->total, f->total == 1 ? "" : "s");
    if (f->unread && max_np > 0 && f->total >= max_np)
        snprintf(out + used, cap - used, "; the hosts after these not read: --max-np %d reached)", max_np);
    else if (f->unread)
        snprintf(out + used, cap - used, "; the hosts after these not read: ddprun takes at most %d)",
                 DISCOVERY_HOSTS_MAX);
    else
        snprintf(out + used, cap - used, ")");
}

/* The -H list for np ranks: hosts in order, the last one's slots cut to what is left. */
static void host_list(const fleet *f, int np, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int h = 0; h < f->n_hosts && np > 0 && used < cap; h++) {
        int here = f->slots[h] < np ? f->slots[h] : np;
        used += (size_t)snprintf(out + used, cap - used, "%s%s:%d", used ? "," : "", f->names[h], here);
        np -= here;
    }
}

/* s seconds, or less when a stop is requested: looked for every STOP_CHECK_S. */
static void sleep_unless_stopped(double s)
{
    double end = monotonic_s() + s;
    for (double left = s; left > 0 && !job_signals_seen(); left = end - monotonic_s()) {
        double nap = left < STOP_CHECK_S ? left : STOP_CHECK_S;
        struct timespec ts = {.tv_sec = (time_t)nap, .tv_nsec = (long)((nap - (double)(time_t)nap) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* A stop request while discovering: says what was ended. */
static int stopped(const char *cmd, bool cmd_ended)
{
    if (cmd_ended)
        fprintf(stderr, "ddprun: host discovery: %s ended on %s (its process group)\n", cmd,
                signal_abbrev(job_first_stop_signal()));
    return DDP_EPREEMPTED;
}

int discovery_check_batch(const discovery_opts *d, const config *cfg)
{
    int64_t g = cfg->train.global_batch; /* no world size above it divides it */
    int top = d->max_np > 0 ? d->max_np : g < INT_MAX ? (int)g : INT_MAX;
    if (g == 0 || config_world_at_most(cfg, top) >= d->min_np)
        return DDP_OK;
    batch_split split;
    ddp_err err = {0};
    config_batch_split(cfg, d->min_np, &split, &err);
    char upto[48] = "";
    if (d->max_np > 0)
        snprintf(upto, sizeof upto, " to --max-np %d", d->max_np);
    fprintf(stderr, "ddprun: train.global_batch %lld divides into no world size from --min-np %d%s, so no fleet could "
            "start: %s\n", (long long)g, d->min_np, upto, err.msg);
    return DDP_EUSAGE;
}

int discover_hosts(const discovery_opts *d, const config *cfg, const deadline_verdict *avoid, char *hosts, size_t cap,
                   int *np)
{
    double start = monotonic_s(), deadline = start + d->wait_s;
    bool said_waiting = false;
    char seen[1024] = "nothing yet";
    for (;;) {
        if (job_signals_seen() > 0)
            return stopped(d->cmd, false);
        fleet f = {0};
        ddp_err err = {0};
        int rc = run_once(d->cmd, d->max_np, avoid, !said_waiting, &f, &err);
        if (rc == DDP_EPREEMPTED || job_signals_seen() > 0)
            return stopped(d->cmd, rc == DDP_EPREEMPTED);
        if (rc == DDP_EUSAGE) {
            fprintf(stderr, "ddprun: %s\n", err.msg);
            return DDP_EUSAGE;
        }
        int slots = f.total, n = 0;
        if (rc == DDP_OK) {
            describe(&f, d->max_np, seen, sizeof seen);
            n = d->max_np > 0 && slots > d->max_np ? d->max_np : slots;
            n = cfg ? config_world_at_most(cfg, n) : n;
        } else {
            snprintf(seen, sizeof seen, "nothing (it %.900s)", err.msg);
            fprintf(stderr, "ddprun: --host-discovery %s: %s\n", d->cmd, err.msg);
        }
        bool by_max = d->max_np > 0 && slots >= d->max_np && (slots > d->max_np || f.unread);
        if (rc == DDP_OK && n >= d->min_np && n >= 1) {
            host_list(&f, n, hosts, cap);
            *np = n;
            bool by_batch = n < (by_max ? d->max_np : slots);
            fprintf(stderr, "ddprun: host discovery: %s -> -np %d -H %s%s%s\n", seen, n, hosts,
                    by_max ? " (--max-np)" : "", by_batch ? " (the most ranks train.global_batch divides into)" : "");
            return DDP_OK;
        }
        char usable[96] = "";
        if (rc == DDP_OK && n < slots)
            snprintf(usable, sizeof usable, ", of which %d usable (%s)", n,
                     by_max && n == d->max_np ? "--max-np" : "train.global_batch");
        double left = deadline - monotonic_s();
        if (left <= 0) {
            fprintf(stderr, "ddprun: host discovery: waited %.1f s (--discovery-wait %g) for --min-np %d slot%s; the "
                    "last run of %s listed %s%s\n", monotonic_s() - start, d->wait_s, d->min_np,
                    d->min_np == 1 ? "" : "s", d->cmd, seen, usable);
            return DDP_ERUNTIME;
        }
        if (!said_waiting)
            fprintf(stderr, "ddprun: host discovery: %s%s, fewer than --min-np %d; asking again every %g s for up "
                    "to %g s\n", seen, usable, d->min_np, DISCOVERY_POLL_S, d->wait_s);
        said_waiting = true;
        sleep_unless_stopped(left < DISCOVERY_POLL_S ? left : DISCOVERY_POLL_S);
    }
}
