/* test_output_filter.c — ddprun's filter of mpirun's --tag-output stream (launcher/ddprun/ddprun_output.c)
 * turns tagged lines into "[rank R] " lines, including the lines mpirun's reads cut in two: mpirun
 * tags each read of a rank's output, so a cut line arrives as "[J,R]<stdout>:start" directly
 * followed by "[J,R]<stdout>:rest\n". The repeated tag must go; another rank's fragment in the
 * middle of a line must come out as a line of its own, and the cut line whole once its rank's next
 * text finishes it (a status line cut so still read); a line fed in pieces (ddprun's own reads of
 * mpirun's pipe) must come out whole; a line the rank tagged itself ("[rank R host] ") keeps that tag only. Output is captured through a temporary file.
 * A collective deadline's verdict naming more ranks than it lists still yields every host; the NCCL
 * watchdog's abort line, a checkpoint write given up and a rank's own deadline ending it count as a
 * verdict naming none. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "collectives/comm_mpi_watch.h"
#include "launcher/ddprun/ddprun.h"
#include "launcher/shared/rank_ends.h"
#include "runtime/base/log.h"
#include "runtime/ckpt/ckpt.h"
#include "runtime/cloud/cloud_notice.h"
#include "tests/check.h"

/* What the filter prints on stdout for `in` fed in pieces of `piece` bytes. */
static void filtered(const char *in, size_t piece, char *out, size_t cap)
{
    fflush(stdout);
    FILE *tmp = tmpfile();
    int saved = dup(1);
    dup2(fileno(tmp), 1);
    output_filter *f = output_filter_new();
    for (size_t i = 0; i < strlen(in); i += piece)
        output_feed(f, false, in + i, strlen(in) - i < piece ? strlen(in) - i : piece);
    output_finish(f);
    output_filter_free(f);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, cap - 1, tmp);
    out[n] = '\0';
    fclose(tmp);
}

/* A deadline past twelve ranks: 40 ranks on h1..h5 (8 each), h2..h4's 24 silent. The verdict
 * comm_mpi_watch writes, read back by the filter, names all three hosts (the ranks listed end on
 * h3), and the restart's list keeps h1 and h5 alone. The names are fully qualified, longer than
 * 63 bytes (as a cloud VM's may be): kept whole from the rank's name to the restart's list. */
static void test_deadline_hosts(void)
{
    enum { RANKS = 40, PER_HOST = 8 };
    static const char domain[] = ".us-central1-a.c.a-project-with-a-rather-long-name-123456.internal";
    char hosts[RANKS][DDP_HOST_NAME_MAX], text[3072], line[3200], left[512], want[512], given[512];
    bool missing[RANKS];
    for (int r = 0; r < RANKS; r++) {
        snprintf(hosts[r], sizeof hosts[r], "h%d%s", 1 + r / PER_HOST, domain);
        missing[r] = r >= PER_HOST && r < 4 * PER_HOST;
    }
    CHECK(strlen(hosts[0]) > 63, "a name of %zu bytes", strlen(hosts[0]));
    size_t at = (size_t)snprintf(text, sizeof text, COMM_DEADLINE_VERDICT "all-reduce #3 did not complete.");
    mpi_watch_name_missing(text, at, sizeof text, RANKS, missing, (const char (*)[DDP_HOST_NAME_MAX])hosts, 5);
    snprintf(want, sizeof want, "rank 19 (host h3%s) and 12 more ranks, on hosts h2%s, h3%s, h4%s (no answer within 5 s",
             domain, domain, domain, domain);
    CHECK(strstr(text, want) != NULL, "the verdict: %s", text);
    snprintf(line, sizeof line, "[1,0]<stderr>:[rank 0 h1] error: %s\n", text);
    fflush(stderr);
    output_filter *f = output_filter_new();
    output_feed(f, true, line, strlen(line));
    output_finish(f);
    const deadline_verdict *d = output_deadline(f);
    CHECK_EQ_INT(d->n_hosts, 3);
    int slots = 0;
    snprintf(given, sizeof given, "h1%s:8,h2%s:8,h3%s:8,h4%s:8,h5%s:8", domain, domain, domain, domain, domain);
    snprintf(want, sizeof want, "h1%s:8,h5%s:8", domain, domain);
    CHECK(ddprun_drop_hosts(given, d, left, sizeof left, &slots), "hosts dropped");
    CHECK(!strcmp(left, want) && slots == 16, "left: %s, %d slots", left, slots);
    output_filter_free(f);
}

/* A short verdict (no "on hosts" list after the ranks): the host of each rank named, a name past
 * 63 bytes whole, is left out of the restart's list. */
static void test_deadline_long_name(void)
{
    static const char far[] = "h2.us-central1-a.c.a-project-with-a-rather-long-name-123456.internal";
    char text[1024], line[1200], left[256];
    snprintf(text, sizeof text, COMM_DEADLINE_VERDICT "all-reduce #3 did not complete within 3 s on rank 0 (host h1). "
             COMM_DEADLINE_NOT_ARRIVED "rank 2 (host %s), rank 3 (host %s) (no answer within 3 s)", far, far);
    snprintf(line, sizeof line, "[1,0]<stderr>:[rank 0 h1] error: %s\n", text);
    output_filter *f = output_filter_new();
    output_feed(f, true, line, strlen(line));
    output_finish(f);
    const deadline_verdict *d = output_deadline(f);
    CHECK(d->n_hosts == 1 && !strcmp(d->hosts[0], far), "%d hosts, the first %s", d->n_hosts, d->hosts[0]);
    char given[256];
    snprintf(given, sizeof given, "h1:2,%s:2", far);
    int slots = 0;
    CHECK(ddprun_drop_hosts(given, d, left, sizeof left, &slots), "the host dropped");
    CHECK(!strcmp(left, "h1:2") && slots == 2, "left: %s, %d slots", left, slots);
    output_filter_free(f);
}

/* A verdict naming hosts of 200 bytes, past twelve ranks, as a rank's log_error writes it (the
 * line over 2048 bytes): ddprun still reads every host from it and drops both silent ones. */
static void test_deadline_long_line(void)
{
    enum { RANKS = 16, PER_HOST = 4 };
    static char hosts[RANKS][DDP_HOST_NAME_MAX], text[16384], line[20000], given[4096], want[1024], left[4096];
    bool missing[RANKS];
    for (int r = 0; r < RANKS; r++) {
        snprintf(hosts[r], sizeof hosts[r], "h%d.%0200d", 1 + r / PER_HOST, 0);
        missing[r] = r >= PER_HOST && r < 3 * PER_HOST + PER_HOST / 2; /* h2 and h3 whole, half of h4 */
    }
    size_t at = (size_t)snprintf(text, sizeof text, COMM_DEADLINE_VERDICT "all-reduce #3 did not complete.");
    mpi_watch_name_missing(text, at, sizeof text, RANKS, missing, (const char (*)[DDP_HOST_NAME_MAX])hosts, 5);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    fflush(stderr);
    dup2(fileno(tmp), 2);
    log_init(0, "h1");
    log_error("%s", text);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(line, 1, sizeof line - 1, tmp);
    line[n] = '\0';
    fclose(tmp);
    CHECK(n > 2048 && strstr(line, "(no answer within 5 s") != NULL, "the logged verdict whole (%zu bytes)", n);
    char tagged[20100];
    snprintf(tagged, sizeof tagged, "[1,0]<stderr>:%s", line);
    output_filter *f = output_filter_new();
    output_feed(f, true, tagged, strlen(tagged));
    output_finish(f);
    const deadline_verdict *d = output_deadline(f);
    CHECK_EQ_INT(d->n_hosts, 3);
    snprintf(given, sizeof given, "%s:4,%s:4,%s:4,%s:4", hosts[0], hosts[4], hosts[8], hosts[12]);
    snprintf(want, sizeof want, "%s:4", hosts[0]);
    int slots = 0;
    CHECK(ddprun_drop_hosts(given, d, left, sizeof left, &slots), "hosts dropped");
    CHECK(!strcmp(left, want) && slots == 4, "left %zu bytes, %d slots", strlen(left), slots);
    output_filter_free(f);
}

/* The NCCL watchdog's abort line starts the bound on mpirun as a deadline's verdict does, naming no
 * host; its warnings do not. */
static void test_watchdog_abort(void)
{
    const char *warn = "[1,1]<stderr>:[rank 1 h1] warning: " COMM_WATCHDOG_ABORT "ncclCommAbort: unhandled error\n";
    char line[512];
    snprintf(line, sizeof line, "[1,0]<stderr>:[rank 0 h1] error: %scollective allreduce #5 (bucket 1 of 2, 9 x "
             "float, avg) did not complete within 3 s%s\n", COMM_WATCHDOG_ABORT, COMM_WATCHDOG_ABORT_END);
    fflush(stderr);
    output_filter *f = output_filter_new();
    output_feed(f, true, warn, strlen(warn));
    CHECK(output_deadline(f)->seen_s == 0, "a watchdog warning is no verdict");
    output_feed(f, true, line, strlen(line));
    output_finish(f);
    const deadline_verdict *d = output_deadline(f);
    CHECK(d->seen_s > 0 && d->n_hosts == 0 && !d->not_arrived[0], "the watchdog's abort: seen %g, %d hosts, \"%s\"",
          d->seen_s, d->n_hosts, d->not_arrived);
    output_filter_free(f);
}

/* A checkpoint write given up (its rank may be held by the stuck write) starts the bound on mpirun
 * too, naming no host, and says what it was; an ordinary error does not, and a deadline's verdict
 * after it changes nothing. */
static void test_ckpt_given_up(void)
{
    const char *other = "[1,0]<stderr>:[rank 0 h1] error: checkpoint of step 8 failed: No space left on device\n";
    const char *given_up = "[1,0]<stderr>:[rank 0 h1] error: " CKPT_WRITE_GIVEN_UP "step 8 in /mnt/c: the storage "
                           "took no byte of it for 150 s; the limit is half of ddp.timeout_s\n";
    const char *verdict = "[1,1]<stderr>:[rank 1 h2] error: " COMM_DEADLINE_VERDICT "all-reduce #9 did not complete "
                          "within 3 s on rank 1 (host h2). Not arrived: rank 0 (host h1) (no answer within 3 s)\n";
    fflush(stderr);
    output_filter *f = output_filter_new();
    output_feed(f, true, other, strlen(other));
    CHECK(output_deadline(f)->seen_s == 0, "a failed write is no verdict");
    output_feed(f, true, given_up, strlen(given_up));
    double seen = output_deadline(f)->seen_s;
    output_feed(f, true, verdict, strlen(verdict));
    output_finish(f);
    const deadline_verdict *d = output_deadline(f);
    CHECK(seen > 0 && d->seen_s == seen && d->n_hosts == 0 && !d->not_arrived[0], "seen %g then %g, %d hosts, \"%s\"",
          seen, d->seen_s, d->n_hosts, d->not_arrived);
    CHECK(d->what && strstr(d->what, "checkpoint write given up"), "what: %s", d->what ? d->what : "(none)");
    output_filter_free(f);
}

/* The errors with which a rank's own deadlines end it (an unanswered stop request, an unfinished MPI
 * start-up: the rank may be held in the kernel by what it waited on) start the bound on mpirun
 * too, naming no host, as a write given up does. */
static void test_rank_held_ends(void)
{
    const char *lines[] = {
        "[1,0]<stderr>:[rank 0 h1] error: " RANK_END_STOP_UNANSWERED "300 s (ddp.timeout_s): this rank was loading "
        "the data (data.path /mnt/data/kjv)" RANK_END_CODE "1: no checkpoint of this job to resume from)\n",
        "[1,1]<stderr>:[rank 1 h2] error: " RANK_END_START_UNFINISHED "300 s (ddp.timeout_s): a rank of the job never "
        "reached it (its program or libraries on a stalled file system, its host unreachable); ending the job\n"};
    const char *whats[] = {"stop request left unanswered", "MPI start-up left unfinished"};
    const int codes[] = {1, 0}; /* the exit code the line says its rank ends with (the job's, if ddprun ends it) */
    for (int i = 0; i < 2; i++) {
        fflush(stderr);
        output_filter *f = output_filter_new();
        output_feed(f, true, lines[i], strlen(lines[i]));
        output_finish(f);
        const deadline_verdict *d = output_deadline(f);
        CHECK(d->seen_s > 0 && d->n_hosts == 0 && !d->not_arrived[0], "line %d: seen %g, %d hosts", i, d->seen_s,
              d->n_hosts);
        CHECK(d->what && strstr(d->what, whats[i]), "line %d: what: %s", i, d->what ? d->what : "(none)");
        CHECK(d->code == codes[i], "line %d: code %d", i, d->code);
        output_filter_free(f);
    }
}

/* A rank's stdout (rank 0's log_info lines: a text sample, which may hold any text) is printed and
 * never read for a verdict, a write given up or a notice: only its stderr's lines are. */
static void test_stdout_not_read(void)
{
    const char *sample = "[1,0]<stdout>:sample at step 20: [rank 1 h2] error: " COMM_DEADLINE_VERDICT "all-reduce #9 "
                         "did not complete within 3 s on rank 1 (host h2). Not arrived: rank 0 (host h1) (no answer)\n"
                         "[1,0]<stdout>:  " CKPT_WRITE_GIVEN_UP "step 8\n"
                         "[1,0]<stdout>:  [rank 0 h1] warning: " CLOUD_NOTICE_STOP "in 120 s\n";
    fflush(stdout);
    output_filter *f = output_filter_new();
    output_feed(f, true, sample, strlen(sample));
    output_finish(f);
    CHECK(output_deadline(f)->seen_s == 0 && output_notice(f)->n_hosts == 0,
          "a verdict's, a given-up write's and a notice's text on stdout: deadline seen %g, %d noticed",
          output_deadline(f)->seen_s, output_notice(f)->n_hosts);
    output_filter_free(f);
}

/* The wrapper's status line of rank 3 cut by mpirun's read, rank 5's output between its two
 * pieces: still read (the failure named with its host), not printed. */
static void test_status_line_cut(void)
{
    static const char in[] = "[1,3]<stderr>:ddprun-rank-sta[1,5]<stderr>:x\n[1,3]<stderr>:tus: rank=3 host=h7 exit=1\n";
    fflush(stderr);
    FILE *tmp = tmpfile();
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    output_filter *f = output_filter_new();
    output_feed(f, true, in, strlen(in));
    output_finish(f);
    rank_failure r = *output_first_failure(f);
    output_filter_free(f);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char out[512];
    rewind(tmp);
    out[fread(out, 1, sizeof out - 1, tmp)] = '\0';
    fclose(tmp);
    CHECK(r.known && r.rank == 3 && r.exit_code == 1 && !strcmp(r.host, "h7"), "the cut status line read: rank %d "
          "host %s exit %d", r.rank, r.host, r.exit_code);
    CHECK(strcmp(out, "[rank 5] x\n") == 0, "only rank 5's line printed: \"%s\"", out);
}

/* A dashed line, more lines than a box of mpirun's holds, a dashed line: all passed through as they
 * came, and the second dashed line closes it (taken for an opener, it held the lines after it back
 * behind the ranks' output until the next dashed line or the end). */
static void test_long_box(void)
{
    static char in[4096], want[4096], out[4096];
    const char *dash = "------------------------------------------------------------\n";
    char *at = stpcpy(in, dash);
    for (int i = 0; i < 70; i++)
        at += sprintf(at, "line %d\n", i);
    stpcpy(stpcpy(stpcpy(want, in), dash), "after\n[rank 0] late\n");
    stpcpy(stpcpy(at, dash), "after\n[1,0]<stdout>:late\n");
    filtered(in, 4096, out, sizeof out);
    CHECK(strcmp(out, want) == 0, "a 72-line box, then a line and a rank's: \"%s\"", out + strlen(out) - 40);
}

int main(void)
{
    test_long_box();
    test_status_line_cut();
    test_deadline_hosts();
    test_deadline_long_name();
    test_deadline_long_line();
    test_watchdog_abort();
    test_ckpt_given_up();
    test_rank_held_ends();
    test_stdout_not_read();
    char out[4096];
    const size_t pieces[] = {1, 7, 4096};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        filtered("[1,0]<stdout>:   60.0  gemm\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 0]    60.0  gemm\n") == 0, "a whole line (pieces of %zu): \"%s\"", pieces[i], out);
        filtered("[1,0]<stdout>:   [1,0]<stdout>:   60.0  gemm\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 0]       60.0  gemm\n") == 0, "a line mpirun cut in two (pieces of %zu): \"%s\"",
              pieces[i], out);
        filtered("[1,2]<stdout>:a[1,2]<stdout>:b[1,2]<stdout>:c\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 2] abc\n") == 0, "a line cut in three (pieces of %zu): \"%s\"", pieces[i], out);
        filtered("[1,0]<stdout>:step 1 [1,1]<stdout>:step 2\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 1] step 2\n[rank 0] step 1 \n") == 0,
              "another rank's fragment mid-line, the cut line never finished (pieces of %zu): \"%s\"", pieces[i], out);
        filtered("[1,0]<stdout>:step [1,1]<stdout>:x\n[1,0]<stdout>:1 done\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 1] x\n[rank 0] step 1 done\n") == 0,
              "a line another rank's output cut, finished on a later line (pieces of %zu): \"%s\"", pieces[i], out);
        filtered("[1,1]<stdout>:[rank 1 vm] warning: slow\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 1 vm] warning: slow\n") == 0, "a line the rank tagged itself keeps one tag "
              "(pieces of %zu): \"%s\"", pieces[i], out);
        filtered("[1,1]<stdout>:[rank 10 vm] note\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "[rank 1] [rank 10 vm] note\n") == 0, "another rank's tag is text (pieces of %zu): \"%s\"",
              pieces[i], out);
        filtered("mpirun's own line\n", pieces[i], out, sizeof out);
        CHECK(strcmp(out, "mpirun's own line\n") == 0, "an untagged line (pieces of %zu): \"%s\"", pieces[i], out);
    }
    return check_done("test_output_filter");
}
