/* ddprun.c — the user-facing launcher: `ddprun [flags] CONFIG.yaml [key=value ...]`.
 *
 * It validates the config in-process (so a bad file fails once, with FILE:LINE:COL, before any
 * rank starts), builds the Open MPI mpirun command that starts one ddprun-worker per rank behind
 * the per-rank wrapper (ddprun_rankwrap.c), runs it (ddprun_job.c), prints one line naming the
 * failing rank when the job fails, and restarts it up to --max-restarts times. `bench`/`topo`
 * launch ddprun-bench the same way; `ckpt` and `generate` run in-process (launcher/commands/:
 * ckpt_tool.c, ddprun_export.c, and ddprun_generate.c on the CPU device); `config reference`
 * prints the config reference the key table makes (config/config_reference.c).
 * It must not do any training or MPI itself: ddprun is not an MPI process.
 *
 * Exit codes (README "Exit codes" copies this table):
 *   0   success: every rank exited 0
 *   1   runtime failure: a rank exited non-zero (other than 2/75) or died of a signal, or mpirun
 *       could not start or failed; ddprun prints `ddprun: rank R on HOST exited with code C` or
 *       `... was killed by SIGNAME` (after --max-restarts attempts are used up; none when a
 *       program could not be started, exit 127)
 *   2   usage error: bad ddprun flags or config (checked before launch), or a rank exited 2
 *   65  non-finite training: the ranks agreed to stop on a NaN or infinite loss, gradient norm or
 *       state, saving nothing from it (EX_DATAERR); never restarted by --max-restarts, since a
 *       resume from the last checkpoint would repeat the same steps bit for bit
 *   75  preempted: ranks received the stop signal, saved a checkpoint and exited 75
 *       (EX_TEMPFAIL); not restarted by --max-restarts, since the machine is going away, unless
 *       the stop was other hosts' preemption notice (ddprun asked nothing) and -H or
 *       --host-discovery lets the job restart without them. Also a stop that came before mpirun
 *       was started (nothing ran), or during the resume's checkpoint.download_cmd (nothing
 *       trained, nothing saved)
 */
#include "ddprun.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/commands/commands.h"
#include "config/config.h"
#include "runtime/device/device.h"
#include "runtime/base/err.h"

#ifndef DDPRUN_VERSION
#define DDPRUN_VERSION "unknown"
#endif

typedef struct launch_opts {
    int np;                /* 0 until -np is given or defaulted (default_np) */
    const char *hosts;     /* -H host1:8,host2:8 */
    const char *hostfile;  /* --hostfile FILE */
    const char *bind_to;   /* --bind-to X; NULL: ddprun decides */
    bool dry_run;
    int max_restarts;
    discovery_opts discovery; /* --host-discovery CMD: the hosts of each attempt (.cmd NULL: off) */
    argv_list passthrough; /* --mca K V and -x VAR, given to mpirun as is */
} launch_opts;

static const char usage_text[] =
    "usage: ddprun [flags] CONFIG.yaml [key.path=value ...]   train: one ddprun-worker per rank\n"
    "       ddprun [flags] bench OP [bench flags]             collective benchmark (ddprun-bench)\n"
    "       ddprun [flags] topo                               print the rank/host/device layout\n"
    "       ddprun ckpt info PATH | ckpt diff A B             inspect checkpoints (no mpirun)\n"
    "       ddprun ckpt export --format llmc [--force] CKPT OUT.bin\n"
    "                                                         a GPT-2 checkpoint as an llm.c model file\n"
    "       ddprun ckpt export --format hf [--dtype f32|bf16] [--max-shard-mb N] [--token-ids-from SRC]\n"
    "                       [--force] CKPT DIR                a language model checkpoint as a Hugging Face folder\n"
    "       ddprun generate CKPT [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "                       [--seed S] [--tokenizer PATH] [--no-stop] [--chat [--chat-file PATH]]\n"
    "                                                         text from a language model checkpoint (CPU);\n"
    "                                                         --chat: a fine-tuned chat model's answer\n"
    "       ddprun [-np N] plan CONFIG.yaml [key.path=value ...]  the job's memory plan per rank (no mpirun)\n"
    "       ddprun config reference                           every config key (docs/config-reference.md)\n"
    "\n"
    "flags (before CONFIG or the subcommand):\n"
    "  -np N, -n N          number of ranks (default: one per GPU on this node, 1 without GPUs;\n"
    "                       ddprun says which it chose)\n"
    "  -H h1:8,h2:8         hosts and slots, passed to mpirun -H\n"
    "  --hostfile FILE      Open MPI hostfile (`host slots=N` lines), passed to mpirun\n"
    "  --host-discovery CMD run CMD at the start and before each restart: it prints `host:slots`\n"
    "                       lines; the hosts are used in that order (instead of -np, -H, --hostfile),\n"
    "                       at most 256 hosts; lines of up to 510 bytes; 30 s for each run of CMD\n"
    "  --min-np N           with --host-discovery: wait for at least N slots (default 1), running\n"
    "                       CMD again every 2 s for up to --discovery-wait S seconds (default 60)\n"
    "  --max-np N           with --host-discovery: use at most N slots (the first hosts listed;\n"
    "                       the lines after them are not read)\n"
    "  --max-restarts N     restart a failed job up to N times (default 0); ranks see\n"
    "                       DDPRUN_RESTART_COUNT and DDPRUN_MAX_RESTARTS\n"
    "  --dry-run            print the mpirun command line and exit\n"
    "  --                   the end of the flags (a CONFIG.yaml whose name begins with '-')\n"
    "  --mca KEY VALUE      passed to mpirun\n"
    "  -x VAR[=VALUE]       export VAR to every rank (mpirun -x)\n"
    "  --bind-to X          mpirun binding (default: none when a rank runs several threads)\n"
    "  --help, --version\n"
    "\n"
    "Adds --allow-run-as-root as root and --oversubscribe when N exceeds this machine's cores\n"
    "(without -H/--hostfile). Sets OMP_NUM_THREADS = max(1, cores / ranks per node) unless set.\n"
    "Ranks get RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE. Output lines are tagged [rank R].\n"
    "SIGINT/SIGTERM/SIGHUP: ranks get the checkpoint signal (checkpoint.signal, default SIGUSR1), save\n"
    "and exit 75; a second SIGINT/SIGTERM stops the job at once (a SIGHUP only ever asks once; nohup\n"
    "leaves it ignored). Before the job starts (also while --host-discovery waits or its CMD runs,\n"
    "which is ended): nothing is started, exit 75.\n"
    "Exit codes: 0 success, 1 failure, 2 usage/config error, 65 non-finite training (nothing saved\n"
    "from it), 75 preempted after a checkpoint.\n"
    "Environment: MPI_HOME (mpirun from MPI_HOME/bin), DDPRUN_WORKER, DDPRUN_BENCH (programs).\n";

/* ---- command line ----------------------------------------------------------------------- */

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "ddprun: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(ddprun --help for usage)\n");
    return DDP_EUSAGE;
}

static bool parse_count(const char *s, int min, int *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : -1;
    if (!s || *s == '\0' || *end != '\0' || v < min || v > 1000000) return false;
    *out = (int)v;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || !(v >= 0) || v > 1e6) return false;
    *out = v;
    return true;
}

/* --host-discovery decides the hosts and the rank count; its companions mean nothing without it. */
static int check_discovery_flags(launch_opts *o)
{
    discovery_opts *d = &o->discovery;
    if (!d->cmd) {
        if (d->min_np || d->max_np || d->wait_s >= 0)
            return usage_error("%s", "--min-np, --max-np and --discovery-wait need --host-discovery CMD");
        return 0;
    }
    if (o->np || o->hosts || o->hostfile)
        return usage_error("%s", "--host-discovery decides the hosts and ranks: leave out -np, -H and --hostfile "
                           "(--max-np caps the ranks)");
    if (d->min_np == 0) d->min_np = 1;
    if (d->wait_s < 0) d->wait_s = 60;
    if (d->max_np && d->max_np < d->min_np)
        return usage_error("%s", "--max-np is below --min-np");
    return 0;
}

/* The flags that take a value: one not here is unknown wherever it stands, the last argument included. */
static const char *const value_flags[] = {"-np", "-n", "--np", "--max-restarts", "--host-discovery", "--min-np",
                                          "--max-np", "--discovery-wait", "-H", "--host", "--hostfile", "-hostfile",
                                          "--machinefile", "--bind-to", "-x", "--mca", "-mca"};

static bool takes_value(const char *flag)
{
    for (size_t k = 0; k < sizeof value_flags / sizeof value_flags[0]; k++)
        if (!strcmp(flag, value_flags[k])) return true;
    return false;
}

/* Parses flags up to the first non-flag; *first_arg gets its index. -1: --help/--version done. */
static int parse_flags(int argc, char **argv, launch_opts *o, int *first_arg)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage_text, stdout); return -1; }
        if (!strcmp(a, "--version")) { printf("ddprun %s\n", DDPRUN_VERSION); return -1; }
        if (!strcmp(a, "--dry-run")) { o->dry_run = true; continue; }
        if (!strcmp(a, "--")) { i++; break; } /* the end of the flags: a CONFIG.yaml may begin with '-' */
        if (!takes_value(a)) return usage_error("unknown flag %s", a);
        if (!v) return usage_error("%s needs a value", a);
        if (!strcmp(a, "-np") || !strcmp(a, "-n") || !strcmp(a, "--np")) {
            if (!parse_count(v, 1, &o->np)) return usage_error("-np: expected a positive rank count, got \"%s\"", v);
        } else if (!strcmp(a, "--max-restarts")) {
            if (!parse_count(v, 0, &o->max_restarts)) return usage_error("--max-restarts: expected a count >= 0, got \"%s\"", v);
        } else if (!strcmp(a, "--host-discovery")) {
            if (!v[strspn(v, " \t")]) return usage_error("%s", "--host-discovery: expected a command, got none");
            o->discovery.cmd = v;
        } else if (!strcmp(a, "--min-np")) {
            if (!parse_count(v, 1, &o->discovery.min_np)) return usage_error("--min-np: expected a count >= 1, got \"%s\"", v);
        } else if (!strcmp(a, "--max-np")) {
            if (!parse_count(v, 1, &o->discovery.max_np)) return usage_error("--max-np: expected a count >= 1, got \"%s\"", v);
        } else if (!strcmp(a, "--discovery-wait")) {
            if (!parse_seconds(v, &o->discovery.wait_s)) return usage_error("--discovery-wait: expected seconds >= 0, got \"%s\"", v);
        } else if (!strcmp(a, "-H") || !strcmp(a, "--host")) {
            o->hosts = v;
        } else if (!strcmp(a, "--hostfile") || !strcmp(a, "-hostfile") || !strcmp(a, "--machinefile")) {
            o->hostfile = v;
        } else if (!strcmp(a, "--bind-to")) {
            o->bind_to = v;
        } else if (!strcmp(a, "-x")) {
            argv_push(&o->passthrough, "-x");
            argv_push(&o->passthrough, v);
        } else if (!strcmp(a, "--mca") || !strcmp(a, "-mca")) {
            if (i + 2 >= argc) return usage_error("%s needs KEY VALUE", a);
            if (output_owns_mca(v)) return usage_error("--mca %s: ddprun reads mpirun's tagged output and sets it", v);
            argv_push(&o->passthrough, "--mca");
            argv_push(&o->passthrough, v);
            argv_push(&o->passthrough, argv[i + 2]);
            i++;
        }
        i++;
    }
    if (o->hosts && o->hostfile) return usage_error("%s", "-H and --hostfile are exclusive");
    ddp_err err = {0};
    if (ddprun_hosts_check(o->hosts, o->hostfile, &err) != DDP_OK) return usage_error("%s", err.msg);
    int rc = check_discovery_flags(o);
    if (rc != 0) return rc;
    if (i >= argc) return usage_error("%s", "missing CONFIG.yaml (or bench/topo/ckpt/generate/config)");
    *first_arg = i;
    return 0;
}

/* ---- placement -------------------------------------------------------------------------- */

/* -np not given: the slots the hosts have (ddprun_hosts_np), else one rank per GPU visible on this
 * node (CUDA_VISIBLE_DEVICES applies), 1 when there are none; says which on stderr, so --dry-run
 * shows it without changing its stdout. DDP_EUSAGE when the hosts leave the count to mpirun. */
static int default_np(launch_opts *o)
{
    ddp_err err = {0};
    char reason[256] = "";
    if (o->np > 0) return DDP_OK;
    int gpus = o->hosts || o->hostfile ? 0 : device_cuda_count(reason, sizeof reason);
    if (ddprun_hosts_np(o->hosts, o->hostfile, gpus, &o->np, &err) != DDP_OK) return usage_error("%s", err.msg);
    if (o->np > 0) return DDP_OK;
    o->np = gpus > 0 ? gpus : 1;
    if (gpus > 0)
        fprintf(stderr, "ddprun: -np not given: %d GPU%s on this node -> %d rank%s\n", gpus, gpus == 1 ? "" : "s",
                o->np, o->np == 1 ? "" : "s");
    else
        fprintf(stderr, "ddprun: -np not given: no GPUs on this node (%s) -> 1 rank\n", reason);
    return DDP_OK;
}

/* ---- paths ------------------------------------------------------------------------------ */

static void self_path(char *out, size_t size, const char *argv0)
{
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    if (n > 0) { out[n] = '\0'; return; }
    if (!realpath(argv0, out)) snprintf(out, size, "%s", argv0);
}

/* $env_name, else the named program next to ddprun. */
static void program_path(char *out, size_t size, const char *env_name, const char *name, const char *self)
{
    const char *env = getenv(env_name);
    if (env && *env) { snprintf(out, size, "%s", env); return; }
    const char *slash = strrchr(self, '/');
    int dir_len = slash ? (int)(slash - self) : 1;
    snprintf(out, size, "%.*s/%s", dir_len, slash ? self : ".", name);
}

static void mpirun_path(char *out, size_t size)
{
    const char *home = getenv("MPI_HOME");
    if (home && *home) snprintf(out, size, "%s/bin/mpirun", home);
    else snprintf(out, size, "mpirun");
}

/* ---- the mpirun command ----------------------------------------------------------------- */

/* The OMP_NUM_THREADS the user chose: a -x OMP_NUM_THREADS=N (*passed: it is in the passthrough
 * already), else ddprun's environment's; NULL when neither. */
static const char *user_threads(const launch_opts *o, bool *passed)
{
    const char *given = argv_option_value(&o->passthrough, "-x", "OMP_NUM_THREADS", '=');
    const char *env = getenv("OMP_NUM_THREADS");
    *passed = given != NULL;
    return given ? given : env && *env ? env : NULL;
}

static void build_command(const launch_opts *o, const char *self, char *const prog_argv[], int attempt, argv_list *cmd)
{
    char mpirun[PATH_MAX];
    mpirun_path(mpirun, sizeof mpirun);
    argv_push(cmd, mpirun);
    const int cores = ddprun_local_cores(); /* read from sysfs once */
    if (geteuid() == 0) argv_push(cmd, "--allow-run-as-root");
    if (!o->hosts && !o->hostfile && !ddprun_in_slurm_allocation() && o->np > cores) argv_push(cmd, "--oversubscribe");
    output_mpirun_options(cmd);
    argv_push(cmd, "-np");
    argv_pushf(cmd, "%d", o->np);
    if (o->hosts) { argv_push(cmd, "-H"); argv_push(cmd, o->hosts); }
    if (o->hostfile) { argv_push(cmd, "--hostfile"); argv_push(cmd, o->hostfile); }

    /* Ranks sharing a node split its cores; a rank with several threads must not be pinned to
     * one core (Open MPI binds to core by default for np <= 2). */
    bool passed;
    const char *user = user_threads(o, &passed);
    int threads = cores / ddprun_ranks_per_node(o->hosts, o->hostfile, o->np);
    threads = threads > 1 ? threads : 1;
    if (!passed) { argv_push(cmd, "-x"); if (user) argv_push(cmd, "OMP_NUM_THREADS"); else argv_pushf(cmd, "OMP_NUM_THREADS=%d", threads); }
    const char *bind = o->bind_to ? o->bind_to : (threads > 1 || user ? "none" : NULL);
    if (bind) { argv_push(cmd, "--bind-to"); argv_push(cmd, bind); }
    /* Non-blocking all-reduce (the DDP buckets) by reduce-scatter + allgather, every rank reducing its
     * share, instead of libnbc's choice for in-place or < 4 ranks (binomial: one rank reduces everything
     * while the others wait): np=2 +5-7% samples/s. One fixed algorithm, so results still do not depend
     * on timing. The user's setting wins (mpirun refuses a key given twice). */
    const char *libnbc = "coll_libnbc_iallreduce_algorithm";
    if (!getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm") &&
        !argv_option_value(&o->passthrough, "--mca", libnbc, 0)) {
        argv_push(cmd, "--mca"); argv_push(cmd, libnbc); argv_push(cmd, "3");
    }
    argv_push(cmd, "-x");
    argv_pushf(cmd, "DDPRUN_RESTART_COUNT=%d", attempt);
    argv_push(cmd, "-x");
    argv_pushf(cmd, "DDPRUN_MAX_RESTARTS=%d", o->max_restarts);
    argv_push(cmd, "-x");
    argv_pushf(cmd, "DDPRUN_PID=%d", (int)getpid());
    /* the preemption notice watch's endpoint, on every host (runtime/cloud/cloud_notice.h) */
    if (getenv("DDPRUN_METADATA_URL")) { argv_push(cmd, "-x"); argv_push(cmd, "DDPRUN_METADATA_URL"); }
    for (int i = 0; i < o->passthrough.n; i++) argv_push(cmd, o->passthrough.v[i]);

    argv_push(cmd, self);
    argv_push(cmd, DDPRUN_RANK_WRAPPER_FLAG);
    for (int i = 0; prog_argv[i]; i++) argv_push(cmd, prog_argv[i]);
}

static void print_shell_quoted(char *const argv[])
{
    for (int i = 0; argv[i]; i++) {
        const char *a = argv[i];
        bool plain = *a && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-") == strlen(a);
        if (i) putchar(' ');
        if (plain) { fputs(a, stdout); continue; }
        putchar('\'');
        for (; *a; a++) {
            if (*a == '\'') fputs("'\\''", stdout);
            else putchar(*a);
        }
        putchar('\'');
    }
    putchar('\n');
}

/* ---- attempts --------------------------------------------------------------------------- */

/* With --host-discovery, the hosts and rank count of an attempt: DDP_OK, or the exit code the
 * launch ends with (a stop requested while waiting: as before any attempt, or the previous
 * attempt's outcome; at a restart a discovery that fails leaves the previous failure standing). */
static int discover_attempt(launch_opts *o, const config *cfg, int attempt, const job_result *r, int code,
                            const deadline_verdict *noticed, char *hosts, size_t cap)
{
    int rc = discover_hosts(&o->discovery, cfg, noticed, hosts, cap, &o->np);
    if (rc == DDP_OK) {
        o->hosts = hosts;
        return DDP_OK;
    }
    const char *sig = signal_abbrev(job_first_stop_signal());
    if (rc == DDP_EPREEMPTED && attempt == 0)
        fprintf(stderr, "ddprun: stopped before start (%s) while waiting for hosts; nothing was started (exit 75)\n",
                sig);
    if (attempt == 0)
        return rc;
    if (rc == DDP_EPREEMPTED)
        fprintf(stderr, "ddprun: no restart: stopped (%s) while waiting for hosts\n", sig);
    else
        fprintf(stderr, "ddprun: no restart: host discovery gave no hosts to restart on\n");
    report(r, code);
    return code;
}

/* Runs the job, restarting failures (and a stop by other hosts' preemption notice, without them:
 * notice_restarts) up to o->max_restarts times. No attempt starts after a stop
 * request: before the first one nothing runs (exit 75); a restart is not made, and the failure
 * that called for it is the outcome. With --host-discovery each attempt's hosts are the command's
 * answer at its start. cfg: the training config (NULL for bench and topo). */
static int launch(const launch_opts *opts, const config *cfg, const char *self, char *const prog_argv[],
                  int stop_signal)
{
    launch_opts cur = *opts, *o = &cur;
    /* each attempt's -H list: discovery's, or the user's less the hosts dropped (never longer) */
    size_t user_list = opts->hosts ? strlen(opts->hosts) + 1 : 0;
    size_t want = user_list > DISCOVERY_LIST_MAX ? user_list : DISCOVERY_LIST_MAX;
    static char *hosts;
    static size_t hosts_cap;
    if (want > hosts_cap) {
        char *grown = realloc(hosts, want);
        if (!grown) {
            fprintf(stderr, "ddprun: out of memory\n");
            return DDP_ERUNTIME;
        }
        hosts = grown, hosts_cap = want;
    }
    static deadline_verdict noticed; /* the hosts restarts left out for their preemption notice */
    job_result r = {0};
    int code = 0;
    for (int attempt = 0;; attempt++) {
        int drc = o->discovery.cmd ? discover_attempt(o, cfg, attempt, &r, code, notice_avoided(&noticed), hosts,
                                                      hosts_cap)
                                   : DDP_OK;
        if (drc != DDP_OK) return drc;
        argv_list cmd = {0};
        build_command(o, self, prog_argv, attempt, &cmd);
        if (o->dry_run) {
            print_shell_quoted(cmd.v);
            argv_free(&cmd);
            return 0;
        }
        if (job_signals_seen() > 0) {
            argv_free(&cmd);
            if (attempt > 0) {
                report(&r, code);
                return code;
            }
            fprintf(stderr, "ddprun: stop requested before the job started: nothing was run (exit 75)\n");
            return DDP_EPREEMPTED;
        }
        int started = job_run(cmd.v, o->np, stop_signal, &r);
        argv_free(&cmd);
        if (started != 0) return DDP_ERUNTIME;
        code = exit_code_for(r.wait_status);
        /* mpirun refused the job (an option it rejects, too few slots, a host it cannot reach): the
         * same hosts would be refused again; --host-discovery's next answer may differ */
        bool refused = r.ranks_started == 0 && !o->discovery.cmd;
        bool same_again = cannot_start(r.wait_status) || refused; /* another attempt would fail the same way */
        bool attempts_left = attempt < o->max_restarts;
        if (code == DDP_ERUNTIME && attempts_left && same_again)
            fprintf(stderr, "ddprun: not restarting: %s (the message above says why), and another attempt would "
                    "fail the same way\n", cannot_start(r.wait_status) ? "a program could not be started (exit 127)"
                                                                    : "mpirun started no rank");
        /* another host's notice: its ranks saved and stopped, and the fleet goes on without it */
        bool fetched = cfg && (cfg->checkpoint.download_cmd[0] || cfg->checkpoint.sharded); /* reach any host */
        bool notice = attempts_left && notice_restarts(&r, code, fetched);
        bool failure_restarts = code == DDP_ERUNTIME && attempts_left && !same_again; /* unless a stop came */
        deadline_verdict failed_lost, failed_noticed; /* the kept host said where ddprun picks the next hosts */
        failure_lost_hosts(&r, fetched, failure_restarts && !notice && !o->discovery.cmd && job_signals_seen() == 0,
                           &failed_lost, &failed_noticed);
        const deadline_verdict *lost = notice ? &r.notice : &failed_lost;
        int slots_left;
        bool drop = (code == DDP_ERUNTIME || notice) && attempts_left && !o->discovery.cmd &&
                    ddprun_drop_hosts(o->hosts, lost, hosts, hosts_cap, &slots_left);
        bool notice_restarts_now = notice && !same_again && (drop || o->discovery.cmd);
        if (job_signals_seen() > 0 || (!failure_restarts && !notice_restarts_now)) {
            report(&r, code);
            return code;
        }
        char who[300], how[300];
        describe_failure(&r, who, how, sizeof who);
        if (notice || failed_noticed.n_hosts > 0) /* discovery leaves them out a while */
            notice_remember(&noticed, notice ? &r.notice : &failed_noticed);
        if (notice) {
            fprintf(stderr, "ddprun: attempt %d of %d (restarting without %s%s, whose preemption notice stopped the "
                    "job)\n", attempt + 2, o->max_restarts + 1, r.notice.hosts[0],
                    r.notice.n_hosts > 1 ? " and more" : "");
        } else {
            fprintf(stderr, "ddprun: attempt %d of %d (restarting after %s failed: %s)\n", attempt + 2,
                    o->max_restarts + 1, who, how);
        }
        if (drop) {
            o->hosts = hosts;
            o->np = o->np < slots_left ? o->np : slots_left;
            int np = cfg ? config_world_at_most(cfg, o->np) : o->np; /* one train.global_batch divides into */
            o->np = np > 0 ? np : o->np;
            fprintf(stderr, "ddprun: leaving out the host(s) whose %s: -np %d -H %s\n",
                    notice ? "preemption notice stopped the job"
                    : failed_noticed.n_hosts ? "ranks did not arrive or whose preemption notice came"
                                             : "ranks did not arrive", o->np, o->hosts);
        }
    }
}

/* ---- entry ------------------------------------------------------------------------------ */

/* `ddprun config reference` (argv[0] "config"): docs/config-reference.md's text, on stdout. */
static int config_command(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "reference"))
        return usage_error("%s", "config: expected `ddprun config reference`");
    ddp_err err = {0};
    if (config_write_reference(stdout, &err) != DDP_OK) {
        fprintf(stderr, "ddprun: %s\n", err.msg);
        return DDP_ERUNTIME;
    }
    return 0;
}

/* `ddprun [-np N] plan CONFIG [-np N] [key.path=value ...]` (argv[0] "plan"): the memory plan of
 * the job on N ranks (default_np's count when not given), printed by ddprun-worker --plan, run in
 * place of ddprun without mpirun once the config is valid (--dry-run prints that command). */
static int plan_command(launch_opts *o, const char *self, int argc, char **argv)
{
    int n_rest = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-np") || !strcmp(argv[i], "-n") || !strcmp(argv[i], "--np")) {
            if (!parse_count(i + 1 < argc ? argv[i + 1] : NULL, 1, &o->np))
                return usage_error("plan: %s needs a positive rank count", argv[i]);
            i++;
        } else {
            n_rest++;
        }
    }
    if (n_rest == 0) return usage_error("%s", "plan needs CONFIG.yaml");
    if (default_np(o) != DDP_OK) return DDP_EUSAGE;
    argv_list args = {0};
    char prog[PATH_MAX];
    program_path(prog, sizeof prog, "DDPRUN_WORKER", "ddprun-worker", self);
    argv_push(&args, prog);
    argv_push(&args, "--plan");
    argv_pushf(&args, "%d", o->np);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-np") || !strcmp(argv[i], "-n") || !strcmp(argv[i], "--np")) i++;
        else argv_push(&args, argv[i]);
    }
    static config cfg;
    ddp_err err = {0};
    if (config_load(args.v[3], args.n - 4, args.v + 4, &cfg, &err) != DDP_OK) {
        fprintf(stderr, "%s\n", err.msg);
        argv_free(&args);
        return DDP_EUSAGE;
    }
    if (o->dry_run) {
        print_shell_quoted(args.v);
        argv_free(&args);
        return 0;
    }
    fflush(NULL);
    execv(prog, args.v);
    fprintf(stderr, "ddprun: cannot run %s: %s\n", prog, strerror(errno));
    argv_free(&args);
    return DDP_ERUNTIME;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], DDPRUN_RANK_WRAPPER_FLAG)) return rank_wrapper_main(argc - 2, argv + 2);

    static launch_opts o = {.discovery.wait_s = -1};
    int first = 0;
    int rc = parse_flags(argc, argv, &o, &first);
    if (rc != 0) return rc < 0 ? 0 : rc;
    const char *cmd = argv[first];
    bool in_process = !strcmp(cmd, "ckpt") || !strcmp(cmd, "generate") || !strcmp(cmd, "config");
    bool flags = first > 1 && !(first == 2 && !strcmp(argv[1], "--"));
    if (in_process && flags) /* --dry-run would run it all the same, -np and -H would mean nothing */
        return usage_error("%s runs in this process, without mpirun: ddprun's flags (-np, -H, --dry-run, ...) do "
                           "not apply to it", cmd);
    if (!strcmp(cmd, "plan") && o.discovery.cmd)
        return usage_error("%s", "plan is for one world size: give -np N rather than --host-discovery");
    if (!strcmp(cmd, "ckpt") && first + 1 < argc && !strcmp(argv[first + 1], "export"))
        return ckpt_export_main(argc - first, argv + first);
    if (!strcmp(cmd, "ckpt")) return ckpt_tool_main(argc - first, argv + first);
    if (!strcmp(cmd, "generate")) return generate_main(argc - first, argv + first);
    if (!strcmp(cmd, "config")) return config_command(argc - first, argv + first);
    if (!strcmp(cmd, "plan")) {
        char self[PATH_MAX];
        self_path(self, sizeof self, argv[0]);
        return plan_command(&o, self, argc - first, argv + first);
    }

    /* From here a stop is a request the job honours, also one that comes while the config loads (a
     * dry run with --host-discovery runs its command, which a stop must end too), and no reader of
     * ddprun's output can block it. */
    if ((!o.dry_run || o.discovery.cmd) && (job_signals_install() || output_sink_install())) return DDP_ERUNTIME;
    char self[PATH_MAX], prog[PATH_MAX];
    self_path(self, sizeof self, argv[0]);
    argv_list prog_argv = {0};
    int stop_signal = SIGUSR1;
    static config cfg;
    const config *train_cfg = NULL;
    if (!strcmp(cmd, "bench") || !strcmp(cmd, "topo")) {
        if (!strcmp(cmd, "bench") && first + 1 >= argc) return usage_error("%s", "bench needs an operation");
        program_path(prog, sizeof prog, "DDPRUN_BENCH", "ddprun-bench", self);
        argv_push(&prog_argv, prog);
        for (int i = first + (strcmp(cmd, "bench") ? 0 : 1); i < argc; i++) argv_push(&prog_argv, argv[i]);
    } else {
        ddp_err err = {0};
        if (config_load(cmd, argc - first - 1, argv + first + 1, &cfg, &err) != DDP_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return DDP_EUSAGE;
        }
        train_cfg = &cfg;
        stop_signal = cfg.checkpoint.stop_signal; /* SIGUSR1 or SIGUSR2: what mpirun forwards */
        program_path(prog, sizeof prog, "DDPRUN_WORKER", "ddprun-worker", self);
        argv_push(&prog_argv, prog);
        for (int i = first; i < argc; i++) argv_push(&prog_argv, argv[i]);
        argv_pushf(&prog_argv, "ddp.timeout_s=%.17g", cfg.ddp.timeout_s); /* the file's, for the start-up's deadline */
    }
    if (!o.discovery.cmd && default_np(&o) != DDP_OK) return DDP_EUSAGE;
    if (o.discovery.cmd && train_cfg && discovery_check_batch(&o.discovery, train_cfg) != DDP_OK) return DDP_EUSAGE;
    batch_split split;
    ddp_err err = {0};
    if (train_cfg && !o.discovery.cmd && config_batch_split(train_cfg, o.np, &split, &err) != DDP_OK) {
        fprintf(stderr, "%s\n", err.msg); /* a world size train.global_batch does not divide: before mpirun */
        return DDP_EUSAGE;
    }
    rc = launch(&o, train_cfg, self, prog_argv.v, stop_signal);
    argv_free(&prog_argv);
    argv_free(&o.passthrough);
    return rc;
}
