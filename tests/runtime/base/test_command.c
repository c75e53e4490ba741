/* test_command.c — runtime/base/command.c: placeholders reach the command as environment
 * variables (a value with spaces, quotes, $(...) and backquotes stays one word and is never run,
 * inside double, single or no quotes, and inside $(...) and `...`), unknown placeholders refused, and
 * how a command ended: status, signal, time limit (the whole process group ended; a command
 * writing without pause too), its output in
 * the log and its last line kept, and a stop request that ends the whole group, SIGTERM then
 * SIGKILL, leaving nothing alive; so does the death of the process that ran it, by SIGKILL. */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "runtime/base/command.h"

static const char *const names[] = {"path", "dir"};

/* Expands tmpl, runs it with values for {path} and {dir}, and returns what it printed (its last
 * line) in tail; the command's status is checked. */
static void run_template(const char *tmpl, const char *path, const char *dir, char *tail, size_t cap)
{
    char cmd[1024];
    ddp_err err = {0};
    const char *values[] = {path, dir};
    CHECK_EQ_INT(command_expand(tmpl, names, 2, cmd, sizeof cmd, &err), DDP_OK);
    command_result res;
    int rc = command_run(cmd, names, values, 2, 10, -1, &res, &err);
    CHECK(rc == DDP_OK, "`%s` as `%s`: %s", tmpl, cmd, err.msg);
    snprintf(tail, cap, "%s", res.tail);
}

static void test_expand(void)
{
    char out[256];
    ddp_err err = {0};
    CHECK_EQ_INT(command_expand("cp {path} {dir}/x \"{path}\" '{dir}'", names, 2, out, sizeof out, &err), DDP_OK);
    CHECK(strcmp(out, "cp \"${DDPRUN_PATH}\" \"${DDPRUN_DIR}\"/x \"${DDPRUN_PATH}\" ''\"${DDPRUN_DIR}\"''") == 0,
          "got %s", out);
    CHECK_EQ_INT(command_expand("cp {paht} x", names, 2, out, sizeof out, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "{paht}");
    CHECK_STR_CONTAINS(err.msg, "{path}, {dir}");
    CHECK_EQ_INT(command_expand("echo {} {", names, 2, out, sizeof out, &err), DDP_EUSAGE);
    CHECK_EQ_INT(command_expand("echo {", names, 2, out, sizeof out, &err), DDP_OK);
    CHECK(strcmp(out, "echo {") == 0, "a lone brace stays: %s", out);
    CHECK_EQ_INT(command_expand("{path}{path}{path}", names, 2, out, 40, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "longer than 39 bytes");
    char deep[128] = "echo ";
    for (int i = 0; i < 40; i++)
        strcat(deep, "$(");
    CHECK_EQ_INT(command_expand(deep, names, 2, out, sizeof out, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "nested deeper than");
}

/* A value reaches the command as one word, unchanged and never run, whatever it holds and
 * whatever quotes surround its placeholder. */
static void test_values_unparsed(void)
{
    char marker[64], dir[320];
    snprintf(marker, sizeof marker, "/tmp/ddp_cmd_pwned_%d", (int)getpid());
    snprintf(dir, sizeof dir, "/d $(touch %s) `touch %s` \"; touch %s; \" '; touch %s; '", marker, marker, marker,
             marker);
    const char *values[] = {"/a b/it's $HOME.ddp", dir};
    const char *const templates[] = {
        "printf '%s|' {path} {dir}",
        "printf '%s|' \"{path}\" \"{dir}\"",
        "printf '%s|' '{path}' '{dir}'",
        "printf '%s|' \"{path}\"'{dir}'",                       /* two quotings, one word */
        "printf '%s|' \"$(printf %s \"{path}\")\" \"$(printf %s '{dir}')\"", /* inside $(...) */
        "printf '%s|' \"`printf %s {path}`\" \"`printf %s '{dir}'`\"",     /* inside `...` */
        "printf '%s|' \"$DDPRUN_PATH\" {dir} # it's a comment with {path}",
    };
    char want[4][512];
    snprintf(want[0], sizeof want[0], "%s|%s|", values[0], values[1]);
    snprintf(want[1], sizeof want[1], "%s%s|", values[0], values[1]);
    for (size_t i = 0; i < sizeof templates / sizeof templates[0]; i++) {
        char tail[COMMAND_TAIL];
        run_template(templates[i], values[0], values[1], tail, sizeof tail);
        const char *expect = i == 3 ? want[1] : want[0];
        CHECK(strcmp(tail, expect) == 0, "`%s` printed\n  %s\nnot\n  %s", templates[i], tail, expect);
    }
    CHECK(access(marker, F_OK) != 0, "a value's $(...), `...` or quotes ran a command");
    unlink(marker);
}

static void test_outcomes(void)
{
    ddp_err err = {0};
    command_result res;
    char log_path[] = "/tmp/ddp_cmdlog_XXXXXX";
    int fd = mkstemp(log_path);
    CHECK_EQ_INT(command_run("echo first; echo second >&2; echo", NULL, NULL, 0, 10, fd, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "second") == 0, "last line with text: '%s'", res.tail);
    CHECK_EQ_INT(command_run("echo no creds >&2; exit 3", NULL, NULL, 0, 10, fd, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "exited with status 3");
    CHECK(strcmp(res.tail, "no creds") == 0, "tail '%s'", res.tail);
    CHECK_EQ_INT(command_run("kill -SEGV $$", NULL, NULL, 0, 10, fd, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "killed by SIGSEGV");
    CHECK_EQ_INT(command_run("read x; echo \"read '$x'\"", NULL, NULL, 0, 10, fd, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "read ''") == 0, "stdin is /dev/null: '%s'", res.tail);
    /* a time limit ends the whole group: the background sleeper too, which would write later */
    char marker[64];
    snprintf(marker, sizeof marker, "/tmp/ddp_cmd_marker_%d", (int)getpid());
    char cmd[256];
    snprintf(cmd, sizeof cmd, "(sleep 2; touch %s) & sleep 30", marker);
    CHECK_EQ_INT(command_run(cmd, NULL, NULL, 0, 0.5, fd, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "did not finish within 0.5 s");
    CHECK(res.seconds < 5, "ended promptly: %.1f s", res.seconds);
    sleep(3);
    CHECK(access(marker, F_OK) != 0, "the command's background child was ended with it");
    unlink(marker);
    /* the log holds everything it printed */
    char buf[512] = "";
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    CHECK_STR_CONTAINS(buf, "first\nsecond\n");
    CHECK_STR_CONTAINS(buf, "no creds\n");
    close(fd);
    unlink(log_path);
    /* a command writing without pause still ends at its time limit */
    CHECK_EQ_INT(command_run("yes & yes & yes & yes", NULL, NULL, 0, 0.5, -1, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "did not finish within 0.5 s");
    CHECK(res.seconds < 5, "a flood of output ended promptly: %.1f s", res.seconds);
    /* a long output keeps only its last line */
    CHECK_EQ_INT(command_run("seq 1 100000; echo the end", NULL, NULL, 0, 10, -1, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "the end") == 0, "tail '%s'", res.tail);
}

/* The pid a command wrote to path, or 0. */
static int pid_in(const char *path)
{
    FILE *fp = fopen(path, "r");
    int pid = 0;
    if (fp && fscanf(fp, "%d", &pid) != 1)
        pid = 0;
    if (fp)
        fclose(fp);
    return pid;
}

/* Whether pid is gone: no such process, or a zombie (an orphan nobody has reaped yet). */
static int gone(int pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static int stop_calls;
static char stop_pid_path[64];

/* Asked every 50 ms: a stop once the command has written its pid (it is set up: a loaded machine
 * may take longer than the 0.3 s waited at least), or after 30 s. */
static int stop_soon(void)
{
    ++stop_calls;
    return (stop_calls > 6 && pid_in(stop_pid_path) > 0) || stop_calls > 600;
}

/* A stop request ends the command's whole process group at once (SIGTERM); what ignores SIGTERM,
 * even after the shell is gone, gets SIGKILL COMMAND_KILL_GRACE_S later; nothing is left alive. */
static void test_stop(void)
{
    ddp_err err = {0};
    command_result res;
    char *pid_path = stop_pid_path, cmd[256];
    snprintf(pid_path, sizeof stop_pid_path, "/tmp/ddp_cmd_pid_%d", (int)getpid());
    unlink(pid_path);
    snprintf(cmd, sizeof cmd, "sleep 30 & echo $! >%s; wait", pid_path);
    stop_calls = 0;
    CHECK_EQ_INT(command_run_stoppable(cmd, NULL, NULL, 0, 60, stop_soon, -1, &res, &err), DDP_EPREEMPTED);
    CHECK_STR_CONTAINS(err.msg, "was stopped");
    CHECK(res.seconds < 3, "ended promptly: %.1f s", res.seconds);
    CHECK(pid_in(pid_path) > 0 && gone(pid_in(pid_path)), "its background sleep %d is gone", pid_in(pid_path));
    /* the shell dies of SIGTERM; a shell ignoring it (its pid written once it does) lives on in the
     * group until the SIGKILL */
    unlink(pid_path);
    snprintf(cmd, sizeof cmd, "sh -c 'trap \"\" TERM; echo $$ >%s; sleep 30; echo woke' & wait", pid_path);
    stop_calls = 0;
    CHECK_EQ_INT(command_run_stoppable(cmd, NULL, NULL, 0, 60, stop_soon, -1, &res, &err), DDP_EPREEMPTED);
    CHECK(res.seconds >= COMMAND_KILL_GRACE_S && res.seconds < COMMAND_KILL_GRACE_S + 3,
          "SIGKILL after the grace: %.1f s", res.seconds);
    CHECK(pid_in(pid_path) > 0 && gone(pid_in(pid_path)), "the subshell ignoring SIGTERM %d is gone",
          pid_in(pid_path));
    unlink(pid_path);
}

/* Waits up to limit_s for pid to be gone; whether it is. */
static int gone_within(int pid, double limit_s)
{
    for (int i = 0; i < (int)(limit_s * 20) && !gone(pid); i++)
        usleep(50000);
    return gone(pid);
}

static char stubborn_path[64];

/* The stop the child asks for once the TERM-ignoring subshell has written its pid. */
static int stop_once_stubborn(void) { return pid_in(stubborn_path) > 0; }

/* A process that dies by SIGKILL while its command runs leaves nothing of the command alive: the
 * command's group is ended as a time limit would end it, SIGTERM at once and SIGKILL after the
 * grace for what ignores SIGTERM. With stopped_first, the caller had already stopped the command
 * (the group's SIGTERM, which must not end the watch) and dies within the grace. */
static void caller_killed_case(bool stopped_first)
{
    char sleeper[64], cmd[320], *stubborn = stubborn_path;
    const char *tag = stopped_first ? "stopped, then killed" : "killed";
    snprintf(sleeper, sizeof sleeper, "/tmp/ddp_cmd_orphan_%d", (int)getpid());
    snprintf(stubborn, sizeof stubborn_path, "/tmp/ddp_cmd_stubborn_%d", (int)getpid());
    unlink(sleeper);
    unlink(stubborn);
    snprintf(cmd, sizeof cmd, "sleep 60 & echo $! >%s; sh -c 'trap \"\" TERM; echo $$ >%s; sleep 60' & wait",
             sleeper, stubborn);
    pid_t child = fork();
    CHECK(child >= 0, "fork");
    if (child == 0) {
        ddp_err err = {0};
        command_result res;
        command_run_stoppable(cmd, NULL, NULL, 0, 120, stopped_first ? stop_once_stubborn : NULL, -1, &res, &err);
        _exit(0);
    }
    for (int i = 0; i < 600 && !(pid_in(sleeper) > 0 && pid_in(stubborn) > 0); i++)
        usleep(50000);
    int a = pid_in(sleeper), b = pid_in(stubborn);
    CHECK(a > 0 && b > 0, "%s: the command started its children (%d, %d)", tag, a, b);
    if (stopped_first) /* the stop's SIGTERM has ended the plain sleep: the grace runs */
        CHECK(a > 0 && gone_within(a, 3), "%s: the stop ended the background sleep %d", tag, a);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    CHECK(a > 0 && gone_within(a, 3), "%s: the caller's background sleep %d is gone at once", tag, a);
    CHECK(b > 0 && !gone(b), "%s: what ignores SIGTERM (%d) lives until the grace ends", tag, b);
    CHECK(b > 0 && gone_within(b, COMMAND_KILL_GRACE_S + 3), "%s: then it is gone too (%d)", tag, b);
    if (b > 0 && !gone(b))
        kill(b, SIGKILL);
    if (a > 0 && !gone(a))
        kill(a, SIGKILL);
    unlink(sleeper);
    unlink(stubborn);
}

/* The command's shell leads its group ($$ is the group id, as its own cleanup may expect), and an
 * ordinary end leaves its background child running as before (the watch ends only on its
 * caller's death). */
static void test_caller_killed(void)
{
    caller_killed_case(false);
    caller_killed_case(true);
    ddp_err err = {0};
    command_result res;
    CHECK_EQ_INT(command_run("set -- $(cat /proc/$$/stat); [ \"$5\" = $$ ] || { echo group $5 not $$; exit 1; }",
                             NULL, NULL, 0, 10, -1, &res, &err), DDP_OK);
    CHECK(err.code == 0, "the shell leads its process group: %s (%s)", err.msg, res.tail);
    char sleeper[64], cmd[320];
    snprintf(sleeper, sizeof sleeper, "/tmp/ddp_cmd_orphan_%d", (int)getpid());
    unlink(sleeper);
    snprintf(cmd, sizeof cmd, "sleep 60 >/dev/null 2>&1 & echo $! >%s", sleeper);
    CHECK_EQ_INT(command_run(cmd, NULL, NULL, 0, 10, -1, &res, &err), DDP_OK);
    int a = pid_in(sleeper);
    usleep(500000);
    CHECK(a > 0 && !gone(a), "after an ordinary end its background child %d runs on", a);
    if (a > 0)
        kill(a, SIGKILL);
    unlink(sleeper);
}

int main(void)
{
    test_expand();
    test_values_unparsed();
    test_outcomes();
    test_stop();
    test_caller_killed();
    return check_done("command");
}
