/* command.c — runs a user's shell command for a caller that decides what its outcome means
 * (command.h). Placeholders become quoted references to environment variables by a scanner
 * that follows POSIX sh's quotes and substitutions far enough to know which quotes surround
 * each one. The child is started by posix_spawn in a process group of its own, so a time limit or
 * a stop request ends everything the command started (an `aws s3 cp` and its helpers), not only
 * the shell, and waits until nothing of it is left. A watch process beside the group ends it when
 * this process dies, even by SIGKILL, so no command outlives the rank that started it.
 * Must not print: the outcome is returned. */
#include "command.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

extern char **environ;

#define POLL_MS 50

static int put(char *out, size_t cap, size_t *len, const char *s, size_t n, ddp_err *err)
{
    if (*len + n >= cap)
        return ddp_fail(err, DDP_EUSAGE, "command longer than %zu bytes once its placeholders are filled", cap - 1);
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
    return DDP_OK;
}

void command_var_name(const char *name, char *out, size_t cap)
{
    size_t len = (size_t)snprintf(out, cap, "DDPRUN_");
    for (const char *p = name; *p && len + 1 < cap; p++)
        out[len++] = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    out[len < cap ? len : cap - 1] = '\0';
}

/* Where the scanner of a template is: the quotes and substitutions it is inside, innermost last. */
typedef enum scan_kind { SCAN_PLAIN, SCAN_SINGLE, SCAN_DOUBLE, SCAN_SUBST, SCAN_BACKQUOTE } scan_kind;

typedef struct shell_scan {
    scan_kind kind[COMMAND_NEST_MAX];
    int parens[COMMAND_NEST_MAX];   /* SCAN_SUBST: '(' open inside it, so its own ')' is known */
    int depth;                      /* kind[depth] is the innermost */
    bool word_start;                /* the next byte starts a word (where '#' starts a comment) */
} shell_scan;

static bool scan_push(shell_scan *s, scan_kind k)
{
    if (s->depth + 1 >= COMMAND_NEST_MAX)
        return false;
    s->kind[++s->depth] = k;
    s->parens[s->depth] = 0;
    return true;
}

static void scan_pop(shell_scan *s)
{
    if (s->depth > 0)
        s->depth--;
}

/* Steps over the shell syntax at p (not a placeholder): returns how many bytes belong together,
 * or 0 when the nesting is deeper than the scanner follows. POSIX sh's quoting: nothing is special
 * inside '...' but the closing quote; a backslash escapes the next byte elsewhere; "...", $(...)
 * and `...` nest; '#' at the start of a word starts a comment to the end of the line. */
static size_t scan_step(shell_scan *s, const char *p)
{
    scan_kind k = s->kind[s->depth];
    size_t step = 1;
    bool ok = true;
    if (k == SCAN_SINGLE) {
        if (*p == '\'')
            scan_pop(s);
    } else if (*p == '\\' && p[1]) {
        step = 2;
    } else if (k == SCAN_DOUBLE && *p == '"') {
        scan_pop(s);
    } else if (*p == '$' && p[1] == '(') {
        ok = scan_push(s, SCAN_SUBST);
        step = 2;
    } else if (*p == '`') {
        if (k == SCAN_BACKQUOTE)
            scan_pop(s);
        else
            ok = scan_push(s, SCAN_BACKQUOTE);
    } else if (k == SCAN_DOUBLE) {
        /* anything else is literal inside double quotes */
    } else if (*p == '\'' || *p == '"') {
        ok = scan_push(s, *p == '\'' ? SCAN_SINGLE : SCAN_DOUBLE);
    } else if (k == SCAN_SUBST && *p == '(') {
        s->parens[s->depth]++;
    } else if (k == SCAN_SUBST && *p == ')') {
        if (s->parens[s->depth] > 0)
            s->parens[s->depth]--;
        else
            scan_pop(s);
    } else if (*p == '#' && s->word_start) {
        step = strcspn(p, "\n");
    }
    s->word_start = k != SCAN_SINGLE && k != SCAN_DOUBLE && strchr(" \t\n;&|()<>", *p) != NULL;
    return ok ? step : 0;
}

/* The reference to a placeholder's variable that the shell expands to its value as one word,
 * unparsed, at a place inside the given quotes. */
static int put_reference(char *out, size_t cap, size_t *len, scan_kind where, const char *name, ddp_err *err)
{
    char var[96], ref[128];
    command_var_name(name, var, sizeof var);
    if (where == SCAN_DOUBLE)
        snprintf(ref, sizeof ref, "${%s}", var);
    else if (where == SCAN_SINGLE) /* close the quote, the variable in double quotes, reopen it */
        snprintf(ref, sizeof ref, "'\"${%s}\"'", var);
    else
        snprintf(ref, sizeof ref, "\"${%s}\"", var);
    return put(out, cap, len, ref, strlen(ref), err);
}

int command_expand(const char *tmpl, const char *const names[], int n, char *out, size_t cap, ddp_err *err)
{
    size_t len = 0;
    int rc = put(out, cap, &len, "", 0, err);
    shell_scan sc = {.kind = {SCAN_PLAIN}, .word_start = true};
    for (const char *p = tmpl; !rc && *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (!close) {
            size_t step = scan_step(&sc, p);
            if (step == 0)
                return ddp_fail(err, DDP_EUSAGE, "quotes and substitutions nested deeper than %d levels in \"%s\"",
                                COMMAND_NEST_MAX - 1, tmpl);
            rc = put(out, cap, &len, p, step, err);
            p += step;
            continue;
        }
        size_t name_len = (size_t)(close - p - 1);
        int which = -1;
        for (int i = 0; i < n && which < 0; i++)
            if (strlen(names[i]) == name_len && strncmp(p + 1, names[i], name_len) == 0)
                which = i;
        if (which < 0) {
            char known[128] = "";
            for (int i = 0; i < n; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s{%s}", i ? ", " : "", names[i]);
            return ddp_fail(err, DDP_EUSAGE, "unknown placeholder {%.*s} in \"%s\" (known: %s)", (int)name_len,
                            p + 1, tmpl, known);
        }
        rc = put_reference(out, cap, &len, sc.kind[sc.depth], names[which], err);
        sc.word_start = false;
        p = close + 1;
    }
    return rc;
}

/* The output seen so far: appended to the log and its last 2*COMMAND_TAIL bytes kept. */
typedef struct output {
    int log_fd;
    char keep[2 * COMMAND_TAIL];
    size_t kept;
} output;

static void take_output(output *o, const char *buf, size_t n)
{
    for (size_t done = 0; o->log_fd >= 0 && done < n;) {
        ssize_t w = write(o->log_fd, buf + done, n - done);
        if (w <= 0)
            break; /* a full disk must not stop the command; its outcome still counts */
        done += (size_t)w;
    }
    if (n >= sizeof o->keep) {
        memcpy(o->keep, buf + n - sizeof o->keep, sizeof o->keep);
        o->kept = sizeof o->keep;
        return;
    }
    if (o->kept + n > sizeof o->keep) {
        size_t drop = o->kept + n - sizeof o->keep;
        memmove(o->keep, o->keep + drop, o->kept - drop);
        o->kept -= drop;
    }
    memcpy(o->keep + o->kept, buf, n);
    o->kept += n;
}

static void last_line(const output *o, char *out, size_t cap)
{
    size_t end = o->kept;
    while (end > 0 && (o->keep[end - 1] == '\n' || o->keep[end - 1] == '\r' || o->keep[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && o->keep[start - 1] != '\n')
        start--;
    snprintf(out, cap, "%.*s", (int)(end - start), o->keep + start);
}

/* Reads what is there now, up to `chunks` reads of 4 KiB (a command writing faster than this reads
 * must not keep the caller from its clock); false at end of file or on error. */
static bool read_available(int fd, output *o, int chunks)
{
    char buf[4096];
    for (int i = 0; i < chunks; i++) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r > 0) {
            take_output(o, buf, (size_t)r);
            continue;
        }
        return r < 0 && (errno == EAGAIN || errno == EINTR);
    }
    return true;
}

/* environ without any DDPRUN_<NAME> of names, then DDPRUN_<NAME>=value for each; NULL when out
 * of memory. Free with free_env. */
static char **placeholder_env(const char *const names[], const char *const values[], int n)
{
    size_t count = 0;
    while (environ[count])
        count++;
    char **env = calloc(count + (size_t)n + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        bool ours = false;
        for (int j = 0; j < n && !ours; j++) {
            char var[96];
            command_var_name(names[j], var, sizeof var);
            size_t vlen = strlen(var);
            ours = strncmp(environ[i], var, vlen) == 0 && environ[i][vlen] == '=';
        }
        if (!ours)
            env[k++] = environ[i];
    }
    size_t first_own = k;
    for (int j = 0; j < n; j++) {
        char var[96];
        command_var_name(names[j], var, sizeof var);
        size_t size = strlen(var) + 1 + strlen(values[j]) + 1;
        if (!(env[k] = malloc(size))) {
            while (k > first_own)
                free(env[--k]);
            free(env);
            return NULL;
        }
        snprintf(env[k++], size, "%s=%s", var, values[j]);
    }
    env[k] = NULL;
    /* the ones we made are last: free_env finds them from the end */
    return env;
}

static void free_env(char **env, int n)
{
    if (!env)
        return;
    size_t k = 0;
    while (env[k])
        k++;
    for (int j = 0; j < n; j++)
        free(env[k - 1 - (size_t)j]);
    free(env);
}

/* Attributes both children share: a new process group led by the child, default dispositions and
 * an empty mask for the signals a rank handles or blocks. */
static void child_attrs(posix_spawnattr_t *at)
{
    posix_spawnattr_init(at);
    posix_spawnattr_setflags(at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(at, 0);
    sigset_t none, reset;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(at, &none);
    sigemptyset(&reset);
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2, SIGCHLD};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&reset, sigs[i]);
    posix_spawnattr_setsigdefault(at, &reset);
}

/* The command's watch: a shell in a process group of its own that reads watch_fd (the read end of
 * a pipe whose write end only this process holds): first the command's group id, then nothing.
 * While this process lives the second read blocks; when it dies, even by SIGKILL, the kernel
 * closes the write end, the read meets end of file, and the watch ends the command's group as a
 * time limit would (SIGTERM, SIGKILL after the grace). Without it a killed rank's upload or
 * download would run on, orphaned, beside the restarted job's. Outside the group, it is not ended
 * by a time limit's SIGTERM to the group, nor by the command's own `kill 0`. A normal end never
 * reaches that: the caller kills the watch first. */
static int spawn_watch(int watch_fd, pid_t *pid)
{
    char script[192];
    snprintf(script, sizeof script,
             "read -r group || exit 0; read -r line || { kill -TERM -\"$group\"; sleep %g; kill -KILL -\"$group\"; }",
             COMMAND_KILL_GRACE_S);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, watch_fd, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    child_attrs(&at);
    char *argv[] = {"sh", "-c", script, "ddprun-command-watch", NULL};
    int rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* `/bin/sh -c cmd` leading a new process group (its $$ is the group's id, as a command's own
 * cleanup may expect). */
static int spawn_shell(const char *cmd, char **env, int out_fd, pid_t *pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
    child_attrs(&at);
    char *argv[] = {"sh", "-c", (char *)cmd, NULL};
    int rc = posix_spawn(pid, "/bin/sh", &fa, &at, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return rc;
}

/* Whether any process of group pgid is alive (a zombie is not: an orphan waits for whatever reaps
 * it, and in a container that may be nobody). Linux: read from /proc; without it, any member. */
static bool group_alive(pid_t pgid)
{
    if (kill(-pgid, 0) != 0)
        return errno == EPERM;
    DIR *proc = opendir("/proc");
    if (!proc)
        return true;
    bool alive = false;
    for (struct dirent *e; !alive && (e = readdir(proc));) {
        char path[300], buf[512];
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        buf[n > 0 ? n : 0] = '\0';
        /* "pid (comm) state ppid pgrp ...": comm may hold anything, so from its last ')' */
        char *close_paren = strrchr(buf, ')'), state = 0;
        int ppid = 0, pgrp = 0;
        if (close_paren && sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) == 3)
            alive = pgrp == pgid && state != 'Z' && state != 'X';
    }
    closedir(proc);
    return alive;
}

/* Ends the watch (the command's background children, if any, are left as they were) and reaps it. */
static void end_watch(pid_t watch_pid)
{
    kill(watch_pid, SIGKILL);
    while (waitpid(watch_pid, NULL, 0) < 0 && errno == EINTR) {}
}

/* The command's group id (its shell's pid), one line into the watch's pipe (never SIGPIPE: this
 * process holds the read end open too). */
static void tell_watch(int watch_fd, pid_t pgid)
{
    char line[24];
    int n = snprintf(line, sizeof line, "%d\n", (int)pgid);
    while (write(watch_fd, line, (size_t)n) < 0 && errno == EINTR) {}
}

static void close_fds(int a[2], int b[2])
{
    for (int i = 0; i < 2; i++) {
        if (a[i] >= 0)
            close(a[i]);
        if (b[i] >= 0)
            close(b[i]);
    }
}

typedef enum ending { ENDING_NONE, ENDING_TIMEOUT, ENDING_STOP } ending;

/* Until the shell pid has exited (its status in *status) and, once its group was told to end,
 * nothing of the group is left alive: reads its output meanwhile, and ends the group (SIGTERM,
 * SIGKILL after COMMAND_KILL_GRACE_S) past timeout_s from t0 or when stop answers. */
static ending wait_shell(pid_t pid, int pipe_fd, double t0, double timeout_s, command_stop_fn stop, output *o,
                         int *status)
{
    bool open_pipe = true, shell_done = false, killed = false;
    ending why = ENDING_NONE;
    double ending_since = 0, now = t0;
    /* after the SIGKILL, a moment for it to land; a process stuck in the kernel is not waited for,
     * the shell included (an exec'd `cp` in uninterruptible sleep on a hung mount: left unreaped) */
    while ((!shell_done || (why != ENDING_NONE && group_alive(pid))) &&
           !(killed && now - ending_since > COMMAND_KILL_GRACE_S + 1)) {
        struct pollfd p = {.fd = pipe_fd, .events = POLLIN};
        if (open_pipe && poll(&p, 1, POLL_MS) > 0)
            open_pipe = read_available(pipe_fd, o, 16);
        else if (!open_pipe)
            nanosleep(&(struct timespec){0, POLL_MS * 1000000L}, NULL);
        if (!shell_done && waitpid(pid, status, WNOHANG) == pid)
            shell_done = true;
        now = monotonic_s();
        if (why == ENDING_NONE && !shell_done && (now - t0 > timeout_s || (stop && stop()))) {
            why = now - t0 > timeout_s ? ENDING_TIMEOUT : ENDING_STOP;
            ending_since = now;
            kill(-pid, SIGTERM);
        } else if (why != ENDING_NONE && !killed && now - ending_since > COMMAND_KILL_GRACE_S) {
            kill(-pid, SIGKILL);
            killed = true;
        }
    }
    if (open_pipe) /* what it wrote last, up to 16 MiB (a pipe holds 1 MiB on 64 KiB pages); a background
                    * child may hold the pipe on */
        read_available(pipe_fd, o, 4096);
    return why;
}

static int describe_end(int status, ending why, double timeout_s, ddp_err *err)
{
    if (why == ENDING_STOP)
        return ddp_fail(err, DDP_EPREEMPTED, "was stopped (its process group ended)");
    if (why == ENDING_TIMEOUT)
        return ddp_fail(err, DDP_ERUNTIME, "did not finish within %g s (ended)", timeout_s);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return DDP_OK;
    if (WIFEXITED(status))
        return ddp_fail(err, DDP_ERUNTIME, "exited with status %d", WEXITSTATUS(status));
    const char *name = WIFSIGNALED(status) ? sigabbrev_np(WTERMSIG(status)) : NULL;
    return ddp_fail(err, DDP_ERUNTIME, "was killed by SIG%s", name ? name : "?");
}

int command_run(const char *cmd, const char *const names[], const char *const values[], int n, double timeout_s,
                int log_fd, command_result *res, ddp_err *err)
{
    return command_run_stoppable(cmd, names, values, n, timeout_s, NULL, log_fd, res, err);
}

int command_run_stoppable(const char *cmd, const char *const names[], const char *const values[], int n,
                          double timeout_s, command_stop_fn stop, int log_fd, command_result *res, ddp_err *err)
{
    memset(res, 0, sizeof *res);
    char **env = placeholder_env(names, values, n);
    if (!env)
        return ddp_fail(err, DDP_ERUNTIME, "out of memory for the command's environment");
    int pfd[2] = {-1, -1}, watch[2] = {-1, -1};
    if (pipe2(pfd, O_CLOEXEC) != 0 || pipe2(watch, O_CLOEXEC) != 0) {
        int e = errno;
        free_env(env, n);
        close_fds(pfd, watch);
        return ddp_fail(err, DDP_ERUNTIME, "pipe: %s", strerror(e));
    }
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    pid_t pid, watch_pid;
    double t0 = monotonic_s();
    /* the watch first; until it is told the shell's group, a death of this process would leave the
     * command unwatched (the pipe holds the line: no wait for the watch to read it) */
    int rc = spawn_watch(watch[0], &watch_pid);
    if (rc == 0 && (rc = spawn_shell(cmd, env, pfd[1], &pid)) != 0)
        end_watch(watch_pid);
    if (rc == 0)
        tell_watch(watch[1], pid);
    free_env(env, n);
    close(pfd[1]);
    pfd[1] = -1;
    if (rc != 0) {
        close_fds(pfd, watch);
        return ddp_fail(err, DDP_ERUNTIME, "cannot start /bin/sh: %s", strerror(rc));
    }
    output o = {.log_fd = log_fd};
    int status = 0;
    ending why = wait_shell(pid, pfd[0], t0, timeout_s, stop, &o, &status);
    end_watch(watch_pid); /* before its pipe closes: a closed pipe is its signal to end the group */
    close_fds(pfd, watch);
    res->seconds = monotonic_s() - t0;
    last_line(&o, res->tail, sizeof res->tail);
    return describe_end(status, why, timeout_s, err);
}
