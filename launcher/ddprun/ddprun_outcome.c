/* ddprun_outcome.c — what an attempt's end means: ddprun's exit code for mpirun's status, whether
 * another attempt could differ, the line naming what failed, and whether a preemption notice
 * allows a restart without its host. Must not run anything or choose hosts (ddprun.c and
 * ddprun_hosts.c do). */
#include "ddprun.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/base/clock.h"

int exit_code_for(int wait_status)
{
    if (!WIFEXITED(wait_status)) return DDP_ERUNTIME;
    int code = WEXITSTATUS(wait_status);
    return code == 0 || code == DDP_EUSAGE || code == DDP_ENONFINITE || code == DDP_EPREEMPTED ? code : DDP_ERUNTIME;
}

bool cannot_start(int wait_status) { return WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 127; }

void describe_failure(const job_result *r, char *who, char *how, size_t size)
{
    const rank_failure *f = &r->failure;
    if (r->deadline.seen_s > 0 && r->deadline.not_arrived[0]) {
        snprintf(who, size, "%s", r->deadline.what);
        snprintf(how, size, "passed; not arrived: %.200s", r->deadline.not_arrived);
        return;
    }
    if (!f->known) {
        snprintf(who, size, "mpirun");
        if (WIFSIGNALED(r->wait_status))
            snprintf(how, size, "was killed by %s", signal_abbrev(WTERMSIG(r->wait_status)));
        else
            snprintf(how, size, "exited with code %d (no rank reported a failure)", WEXITSTATUS(r->wait_status));
        return;
    }
    snprintf(who, size, "rank %d on %s", f->rank, f->host[0] ? f->host : "an unknown host");
    if (f->signal) snprintf(how, size, "was killed by %s", signal_abbrev(f->signal));
    else snprintf(how, size, "exited with code %d", f->exit_code);
}

void report(const job_result *r, int code)
{
    char who[300], how[300];
    describe_failure(r, who, how, sizeof who);
    if (code == DDP_EPREEMPTED)
        fprintf(stderr, "ddprun: job stopped on request, resumable (preempted, exit 75)\n");
    else if (code == DDP_ENONFINITE)
        fprintf(stderr, "ddprun: job stopped on a non-finite value, nothing saved from it (exit 65; not restarted: a "
                        "resume would repeat it)\n");
    else if (code != 0 && r->signals_received >= 2)
        fprintf(stderr, "ddprun: job terminated by a second stop request (exit %d)\n", code);
    else if (code == DDP_EUSAGE)
        fprintf(stderr, "ddprun: %s %s (usage/config error, exit 2)\n", who, how);
    else if (code != 0)
        fprintf(stderr, "ddprun: job failed: %s %s\n", who, how);
}

/* Whether the ranks reporting host name this machine (where ddprun runs). */
static bool is_this_host(const char *host)
{
    char name[DDP_HOST_NAME_MAX];
    if (gethostname(name, sizeof name) != 0)
        return false;
    name[sizeof name - 1] = '\0';
    return !strcmp(host, name);
}

/* Whether the next attempt must keep host h, noticed or not arrived: ddprun's own, or rank 0's with
 * its checkpoints (a restart without it would find none there and start again from step 0). */
static bool kept_host(const job_result *r, const char *h, bool fetched)
{
    return is_this_host(h) || (!fetched && (!r->rank0_host[0] || !strcmp(h, r->rank0_host)));
}

static const char *kept_why(const char *h)
{
    return is_this_host(h) ? "this is ddprun's host"
                           : "rank 0 saved its checkpoints there, and neither checkpoint.download_cmd nor "
                             "checkpoint.sharded's shared directory brings them to another host";
}

/* h into lost (and noticed, unless NULL) unless the next attempt must keep it, said when say. */
static void lose_host(const job_result *r, const char *h, bool fetched, bool say, deadline_verdict *lost,
                      deadline_verdict *noticed)
{
    if (kept_host(r, h, fetched)) {
        if (say)
            fprintf(stderr, "ddprun: a restart would not leave out %s: %s\n", h, kept_why(h));
        return;
    }
    verdict_add_host(lost, h, strlen(h));
    if (noticed)
        verdict_add_host(noticed, h, strlen(h));
}

bool notice_restarts(const job_result *r, int code, bool fetched)
{
    if (code != DDP_EPREEMPTED || r->notice.n_hosts == 0 || r->signals_received > 0 || job_signals_seen() > 0)
        return false;
    for (int i = 0; i < r->notice.n_hosts; i++) {
        const char *h = r->notice.hosts[i];
        if (kept_host(r, h, fetched)) {
            fprintf(stderr, "ddprun: not restarting without %s: %s\n", h, kept_why(h));
            return false;
        }
    }
    return true;
}

/* A noticed host is left out this long after the latest notice: longer than any cloud's notice
 * (AWS 120 s), short enough for a new machine given the same name to be taken again. */
#define NOTICE_AVOID_S 600.0

const deadline_verdict *notice_avoided(deadline_verdict *all)
{
    if (all->n_hosts > 0 && monotonic_s() - all->seen_s > NOTICE_AVOID_S)
        *all = (deadline_verdict){0};
    return all;
}

void failure_lost_hosts(const job_result *r, bool fetched, bool say, deadline_verdict *lost, deadline_verdict *noticed)
{
    *lost = r->deadline;
    lost->n_hosts = 0;
    *noticed = (deadline_verdict){.what = r->notice.what};
    for (int i = 0; i < r->deadline.n_hosts; i++)
        lose_host(r, r->deadline.hosts[i], fetched, say, lost, NULL);
    for (int i = 0; i < r->notice.n_hosts; i++) {
        const char *h = r->notice.hosts[i];
        lose_host(r, h, fetched, say && !verdict_has_host(&r->deadline, h, strlen(h)), lost, noticed);
    }
}

void notice_remember(deadline_verdict *all, const deadline_verdict *notice)
{
    all->seen_s = monotonic_s();
    for (int i = 0; i < notice->n_hosts; i++)
        verdict_add_host(all, notice->hosts[i], strlen(notice->hosts[i]));
}
