/* test_command.c — runtime/base/command.c: placeholders filled with shell-quoted values (a path
 * with spaces, quotes and $ stays one word and is not expanded), unknown placeholders refused, and
 * how a command ended: status, signal, time limit (the whole process group ended), its output in
 * the log and its last line kept. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "runtime/base/command.h"

static const char *const names[] = {"path", "dir"};

static void test_expand(void)
{
    char out[256];
    ddp_err err = {0};
    const char *values[] = {"/a b/it's $HOME.ddp", "/d"};
    CHECK_EQ_INT(command_expand("cp {path} {dir}/x {path}", names, values, 2, out, sizeof out, &err), DDP_OK);
    CHECK(strcmp(out, "cp '/a b/it'\\''s $HOME.ddp' '/d'/x '/a b/it'\\''s $HOME.ddp'") == 0, "got %s", out);
    /* the shell sees the value unchanged, as one word */
    char cmd[512], res_path[] = "/tmp/ddp_cmd_XXXXXX";
    int fd = mkstemp(res_path);
    CHECK(fd >= 0, "mkstemp");
    command_result res;
    snprintf(cmd, sizeof cmd, "printf '%%s|' %s", out + 3);
    CHECK_EQ_INT(command_run(cmd, 10, fd, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "/a b/it's $HOME.ddp|/d/x|/a b/it's $HOME.ddp|") == 0, "the shell got %s", res.tail);
    close(fd);
    unlink(res_path);
    CHECK_EQ_INT(command_expand("cp {paht} x", names, values, 2, out, sizeof out, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "{paht}");
    CHECK_STR_CONTAINS(err.msg, "{path}, {dir}");
    CHECK_EQ_INT(command_expand("echo {} {", names, values, 2, out, sizeof out, &err), DDP_EUSAGE);
    CHECK_EQ_INT(command_expand("echo {", names, values, 2, out, sizeof out, &err), DDP_OK);
    CHECK(strcmp(out, "echo {") == 0, "a lone brace stays: %s", out);
    CHECK_EQ_INT(command_expand("{path}{path}{path}", names, values, 2, out, 40, &err), DDP_EUSAGE);
    CHECK_STR_CONTAINS(err.msg, "longer than 39 bytes");
}

static void test_outcomes(void)
{
    ddp_err err = {0};
    command_result res;
    char log_path[] = "/tmp/ddp_cmdlog_XXXXXX";
    int fd = mkstemp(log_path);
    CHECK_EQ_INT(command_run("echo first; echo second >&2; echo", 10, fd, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "second") == 0, "last line with text: '%s'", res.tail);
    CHECK_EQ_INT(command_run("echo no creds >&2; exit 3", 10, fd, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "exited with status 3");
    CHECK(strcmp(res.tail, "no creds") == 0, "tail '%s'", res.tail);
    CHECK_EQ_INT(command_run("kill -SEGV $$", 10, fd, &res, &err), DDP_ERUNTIME);
    CHECK_STR_CONTAINS(err.msg, "killed by SIGSEGV");
    CHECK_EQ_INT(command_run("read x; echo \"read '$x'\"", 10, fd, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "read ''") == 0, "stdin is /dev/null: '%s'", res.tail);
    /* a time limit ends the whole group: the background sleeper too, which would write later */
    char marker[64];
    snprintf(marker, sizeof marker, "/tmp/ddp_cmd_marker_%d", (int)getpid());
    char cmd[256];
    snprintf(cmd, sizeof cmd, "(sleep 2; touch %s) & sleep 30", marker);
    CHECK_EQ_INT(command_run(cmd, 0.5, fd, &res, &err), DDP_ERUNTIME);
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
    /* a long output keeps only its last line */
    CHECK_EQ_INT(command_run("seq 1 100000; echo the end", 10, -1, &res, &err), DDP_OK);
    CHECK(strcmp(res.tail, "the end") == 0, "tail '%s'", res.tail);
}

int main(void)
{
    test_expand();
    test_outcomes();
    return check_done("command");
}
