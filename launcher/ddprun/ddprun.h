/* ddprun.h — the pieces of the ddprun launcher shared between its source files.
 *
 * ddprun.c parses the command line and builds the mpirun command; ddprun_job.c runs one mpirun,
 * pipes its output and turns signals into checkpoint requests; ddprun_output.c rewrites mpirun's
 * rank tags and recognises rank-failure reports; ddprun_rankwrap.c is the tiny per-rank wrapper that
 * mpirun starts in front of each worker; ddprun_argv.c is the string vector the command and the
 * output filter are built in; ddprun_discovery.c asks --host-discovery's command for the hosts of
 * each attempt; ddprun_hosts.c reads the -H list or hostfile (ranks per node, lost hosts dropped).
 * The commands ddprun runs in-process (`ckpt`, `generate`) are launcher/commands/'s. Nothing here is used outside launcher/ddprun/. */
#ifndef DDPRUN_H
#define DDPRUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/base/err.h"
#include "runtime/base/host_name.h"

/* First argument that turns ddprun into the per-rank wrapper (internal; see ddprun_rankwrap.c). */
#define DDPRUN_RANK_WRAPPER_FLAG "--rank-wrapper"
/* Lines the wrapper writes to stderr once its worker exists (from then on the rank takes a stop
 * signal instead of dying of it) and when its worker fails; ddprun consumes them. */
#define DDPRUN_STATUS_MARK "ddprun-rank-status:"

/* A growable NULL-terminated argument vector (strings owned). */
typedef struct argv_list {
    char **v;
    int n, cap;
} argv_list;

void argv_push(argv_list *a, const char *s);
void argv_pushf(argv_list *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void argv_free(argv_list *a);
/* The value a gives after `flag KEY<sep>VALUE` (sep '=': "-x OMP_NUM_THREADS=4") or after
 * `flag KEY VALUE` (sep 0: "--mca KEY VALUE"), else NULL. */
const char *argv_option_value(const argv_list *a, const char *flag, const char *key, char sep);

/* The first rank that failed, as reported by its wrapper or, failing that, by mpirun. */
typedef struct rank_failure {
    bool known;
    int rank;
    char host[256];   /* "" when mpirun did not say */
    int exit_code;    /* valid when signal == 0 */
    int signal;       /* > 0 when the rank died of a signal */
} rank_failure;

/* A collective deadline's verdict seen in a rank's output (collectives/comm.h): the ranks that
 * did not arrive, and their hosts without repeats. Also a line after which a rank may not end
 * (the NCCL watchdog's abort, a checkpoint write given up, a rank's own deadline ending it:
 * launcher/shared/rank_ends.h), which names no rank: seen_s alone. The
 * same record holds the hosts whose preemption notice stopped the job (output_notice). */
#define DEADLINE_HOSTS_MAX 256 /* as many as discovery keeps (DISCOVERY_HOSTS_MAX): a spot fleet's notices */
typedef struct deadline_verdict {
    double seen_s;                             /* monotonic_s() when seen; 0: none */
    const char *what;                          /* what was seen, for ddprun's line when it ends mpirun */
    int code;                                  /* the exit code a rank ending itself said it ends with
                                                * ("... (exit 75: ..."), the job's when ddprun ends
                                                * mpirun after it; 0: none said */
    char not_arrived[512];                     /* "rank 2 (host h2), rank 3 (host h2)" */
    char hosts[DEADLINE_HOSTS_MAX][DDP_HOST_NAME_MAX];
    int n_hosts;
} deadline_verdict;

/* Whether d's hosts hold the len bytes at host (ddprun_hosts.c). */
bool verdict_has_host(const deadline_verdict *d, const char *host, size_t len);
/* Adds the len bytes at host to d's hosts unless they hold it (none past DEADLINE_HOSTS_MAX, and no
 * name too long for them). */
void verdict_add_host(deadline_verdict *d, const char *host, size_t len);

/* Rewrites tagged mpirun output into "[rank R] " lines and records rank failures. */
typedef struct output_filter output_filter;

/* The mpirun options the filter reads its input by: --tag-output, and timestamps and XML off (an
 * OMPI_MCA_ variable or mca-params.conf setting either would hide every tag). */
void output_mpirun_options(argv_list *cmd);
/* Whether `--mca key` would change the format the filter reads (the user may not set it). */
bool output_owns_mca(const char *key);
output_filter *output_filter_new(void);
/* Feeds bytes read from mpirun's stdout (is_stderr false) or stderr. */
void output_feed(output_filter *f, bool is_stderr, const char *buf, size_t n);
/* Flushes partial lines and unfinished blocks (call once both pipes reached EOF). */
void output_finish(output_filter *f);
const rank_failure *output_first_failure(const output_filter *f);
/* How many ranks' wrappers have said their worker started. */
int output_ranks_started(const output_filter *f);
const deadline_verdict *output_deadline(const output_filter *f);
/* The hosts whose ranks logged a preemption notice (runtime/cloud/cloud_notice.h), in hosts[]. */
const deadline_verdict *output_notice(const output_filter *f);
/* Rank 0's host as its wrapper's status line names it; "" before that line came. */
const char *output_rank0_host(const output_filter *f);
void output_filter_free(output_filter *f);

/* Outcome of one mpirun run. */
typedef struct job_result {
    int wait_status;      /* mpirun's waitpid status */
    int signals_received; /* stop requests (SIGINT/SIGTERM/SIGHUP) ddprun took during the run */
    int ranks_started;    /* ranks whose wrapper said they started (0: mpirun started none) */
    rank_failure failure;
    deadline_verdict deadline;
    deadline_verdict notice; /* the hosts a preemption notice came from */
    char rank0_host[DDP_HOST_NAME_MAX]; /* where rank 0 ran (and saved whole-file checkpoints) */
} job_result;

/* Once per process, before the config is read: SIGINT/SIGTERM (and SIGHUP, unless ignored)
 * become checkpoint requests. */
int job_signals_install(void);
/* ddprun's fds 1 and 2 made pipes that threads drain into queues and write out (ddprun_sink.c),
 * so a reader that stops reading never blocks the job; 0, or -1 with the outputs as they were. */
int output_sink_install(void);
/* The stop requests so far (also between runs): each SIGINT/SIGTERM, a SIGHUP only as the first. */
int job_signals_seen(void);
/* The first of them (SIGINT, SIGTERM or SIGHUP), 0 before any. */
int job_first_stop_signal(void);
/* Runs argv (argv[0] = mpirun, looked up on PATH when it has no '/'; ranks started through the
 * rank wrapper) to completion. mpirun ends when ddprun dies. The first stop request (also one
 * that came before this run) sends stop_signal to mpirun, which forwards it to every rank, as soon
 * as all `ranks` have started; a second sends SIGTERM at once (mpirun then kills the job).
 * Returns 0, or -1 if mpirun could not start. */
int job_run(char *const argv[], int ranks, int stop_signal, job_result *out);

/* (ddprun_outcome.c) What an attempt's end means. */
/* ddprun's exit code for mpirun's waitpid status (ddprun.c's table). */
int exit_code_for(int wait_status);
/* Exit status 127: mpirun, or a rank's wrapper, could not execute its program (ddprun_job.c,
 * ddprun_rankwrap.c), which every attempt would find the same. */
bool cannot_start(int wait_status);
/* who = "rank R on HOST" (or "mpirun" when no rank said), how = "exited with code C" etc. */
void describe_failure(const job_result *r, char *who, char *how, size_t size);
/* ddprun's last line for an outcome (none for success). */
void report(const job_result *r, int code);
/* Whether an attempt that ended preempted (code 75) was stopped by the preemption notice of other
 * hosts than this one, with no stop asked of ddprun: the job may go on without them (this host's
 * notice, or a stop signal, means the job is going away). Not when rank 0's host is among them
 * and nothing brings its checkpoints to the next rank 0 (fetched: checkpoint.download_cmd, or
 * checkpoint.sharded, whose directory every rank shares, which the job's start checks):
 * where checkpoint.dir is that machine's disk, the next attempt would start from step 0. */
bool notice_restarts(const job_result *r, int code, bool fetched);
/* After an attempt that failed: r's hosts whose ranks did not arrive, and those whose preemption
 * notice came (the machine taken before the stop's save, or a resume's download, ended), but this
 * host and, unless fetched, rank 0's (as notice_restarts keeps them), each kept one named on
 * stderr when say; the noticed ones also into noticed. */
void failure_lost_hosts(const job_result *r, bool fetched, bool say, deadline_verdict *lost, deadline_verdict *noticed);
/* Adds the hosts of notice to all (those a job restarted without, for host discovery to leave
 * out while its command still lists them). */
void notice_remember(deadline_verdict *all, const deadline_verdict *notice);
/* all, emptied first once ten minutes have passed since its latest notice. */
const deadline_verdict *notice_avoided(deadline_verdict *all);

/* --host-discovery (ddprun_discovery.c). */
#define DISCOVERY_HOSTS_MAX 256               /* hosts kept from one run; later lines are not read */
#define DISCOVERY_LINE_MAX 510                /* a line's bytes, newline excluded */
#define DISCOVERY_LIST_MAX (DISCOVERY_HOSTS_MAX * (DDP_HOST_NAME_MAX + 8)) /* the -H list it makes */
typedef struct discovery_opts {
    const char *cmd;      /* prints `host:slots` lines */
    int min_np, max_np;   /* --min-np (at least 1), --max-np (0: no limit) */
    double wait_s;        /* --discovery-wait: how long to wait for --min-np slots */
} discovery_opts;

struct config;
/* Runs d->cmd (again every few seconds while it lists fewer than d->min_np usable slots, up to
 * d->wait_s), leaves out the hosts of avoid (NULL: none; preemption notices', whose machines may
 * still be listed for the minutes they have left) as it reads them, and fills hosts (cap bytes, DISCOVERY_LIST_MAX is enough) with the -H list and *np
 * with the rank count: the hosts listed, in order, up to d->max_np slots (and at most
 * DISCOVERY_HOSTS_MAX hosts), cut to the largest world size cfg's train.global_batch divides (cfg
 * may be NULL). Prints what it found or why not. Returns DDP_OK; DDP_EUSAGE for output that is
 * not `host:slots` lines (the line named); DDP_ERUNTIME when d->wait_s passed with too few slots
 * (the time waited and what the last run listed named); DDP_EPREEMPTED when a stop was requested
 * (job_signals_seen) while waiting or while d->cmd ran: its process group is ended first. */
int discover_hosts(const discovery_opts *d, const struct config *cfg, const deadline_verdict *avoid, char *hosts,
                   size_t cap, int *np);
/* Before anything runs: DDP_OK when some world size from d->min_np to d->max_np (unbounded: 0)
 * divides cfg's train.global_batch (or it is not set); else DDP_EUSAGE, said on stderr with the
 * world sizes that would, since no fleet the command lists could be used. */
int discovery_check_batch(const discovery_opts *d, const struct config *cfg);

/* (ddprun_hosts.c) Hosts as -H, --hostfile and --host-discovery give them. */
#define DDPRUN_SLOTS_MAX 100000 /* slots of one host */
/* One "host:slots" entry: the len bytes at s (no NUL needed), a host name of letters, digits,
 * '.', '-' and '_', then ':' and a whole number from 1 to DDPRUN_SLOTS_MAX; with default_slots
 * > 0 the ":slots" may be left out and counts default_slots. Sets *name_len and *slots; false,
 * with why (cap bytes) saying what is wrong, for anything else. */
bool ddprun_host_entry(const char *s, size_t len, int default_slots, size_t *name_len, int *slots, char *why,
                       size_t cap);
/* Checks -H's "host[:slots],..." list or the hostfile's "host [slots=N] ..." lines (at most one
 * of them given) before anything starts: DDP_OK, or DDP_EUSAGE naming the entry (-H) or the
 * file:line, or saying why the hostfile cannot be read. */
int ddprun_hosts_check(const char *hosts, const char *hostfile, ddp_err *err);
/* Most ranks any one node runs for np ranks on hosts (-H "h1:8,h2"; no count = 1 slot) or
 * hostfile ("host slots=N" lines; no count: mpirun gives the host its cores, taken to be as many
 * as this node's, ddprun_local_cores), the slots counted
 * as mpirun 4.1 counts them (a host listed again adds its slots, or in a hostfile one slot), and
 * assuming mpirun's default by-slot filling in host order; when neither is given, the same over a
 * Slurm allocation's nodes (ddprun_in_slurm_allocation), else np (or when they do not pass
 * ddprun_hosts_check). */
int ddprun_ranks_per_node(const char *hosts, const char *hostfile, int np);
/* -np not given: *np gets the slots of -H, the hostfile or (neither given) a Slurm allocation, as
 * mpirun counts them, said on stderr; 0 when none of those lists a host. DDP_EUSAGE, naming the
 * host, when a hostfile leaves a host's slots to mpirun (its cores, rarely the GPUs' count). With
 * gpus, this node's GPUs (given only when this node is among the allocation's), a node with fewer
 * tasks is warned of on stderr: salloc's default is one task. */
int ddprun_hosts_np(const char *hosts, const char *hostfile, int gpus, int *np, ddp_err *err);
/* Whether ddprun runs inside a Slurm allocation that says its tasks per node (SLURM_JOB_ID and
 * SLURM_TASKS_PER_NODE): mpirun then takes the nodes and their slots from it, and
 * ddprun_ranks_per_node reads them there when neither -H nor a hostfile is given. */
bool ddprun_in_slurm_allocation(void);
/* The physical cores of this node that this process may run on (distinct package and core ids of
 * the online processors in its affinity mask, from sysfs; every such processor when that cannot be
 * read): the slots mpirun gives a node, hardware threads not counted, and a container's or a
 * taskset's limit applied. DDP_TEST_CPU_SYSFS names another directory of the sysfs cpu layout
 * (tests). */
int ddprun_local_cores(void);
/* After a collective deadline named hosts whose ranks did not arrive: the -H list hosts without
 * them into buf (size bytes; buf may be hosts itself) and their remaining slots into *slots_left.
 * False when there is no list, no host of it named (the verdict names hosts as the ranks saw their
 * names: an address or another spelling in the list matches none), no host would be left, or the
 * hosts left do not fit in buf (never with strlen(hosts) + 1 bytes: a restart on some of them
 * would leave the others idle without a word). */
bool ddprun_drop_hosts(const char *hosts, const deadline_verdict *d, char *buf, size_t size, int *slots_left);

/* The per-rank wrapper: runs argv[0] with argv, reports its failure, exits like it. */
int rank_wrapper_main(int argc, char **argv);

/* "SIGKILL" for 9; never NULL. */
const char *signal_abbrev(int sig);

#endif
