/* test_output_filter.c — ddprun's filter of mpirun's --tag-output stream (launcher/ddprun/ddprun_output.c)
 * turns tagged lines into "[rank R] " lines, including the lines mpirun's reads cut in two: mpirun
 * tags each read of a rank's output, so a cut line arrives as "[J,R]<stdout>:start" directly
 * followed by "[J,R]<stdout>:rest\n". The repeated tag must go; another rank's fragment in the
 * middle of a line must come out as a line of its own; a line fed in pieces (ddprun's own reads of
 * mpirun's pipe) must come out whole; a line the rank tagged itself ("[rank R host] ") keeps that tag only. Output is captured through a temporary file. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ddprun/ddprun.h"
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

int main(void)
{
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
        CHECK(strcmp(out, "[rank 0] step 1 \n[rank 1] step 2\n") == 0,
              "another rank's fragment mid-line (pieces of %zu): \"%s\"", pieces[i], out);
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
