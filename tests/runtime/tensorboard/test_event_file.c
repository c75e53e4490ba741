/* test_event_file.c — runtime/tensorboard/event_file.c's file names: two event files opened in one
 * directory within the same second (a restart's new process, or a second writer) each get a file
 * of their own, named as TensorBoard finds them (events.out.tfevents.SECONDS.HOST...), where a
 * name of the second and host alone made the second open fail. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/tensorboard/event_file.h"
#include "tests/check.h"

/* The SECONDS field of an event file's path. */
static long long seconds_of(const event_file *f)
{
    const char *p = strstr(event_file_path(f), "tfevents.");
    return p ? atoll(p + strlen("tfevents.")) : -1;
}

int main(void)
{
    char dir[] = "/tmp/test_event_file.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    bool same_second = false;
    for (int attempt = 0; attempt < 5 && !same_second; attempt++) {
        event_file *a = NULL, *b = NULL;
        ddp_err err = {0};
        CHECK(event_file_open(dir, "h1", &a, &err) == DDP_OK, "first file: %s", err.msg);
        CHECK(event_file_open(dir, "h1", &b, &err) == DDP_OK, "second file, same host, same second: %s", err.msg);
        if (a && b) {
            same_second = seconds_of(a) == seconds_of(b);
            CHECK(strcmp(event_file_path(a), event_file_path(b)) != 0, "two files, one name: %s", event_file_path(a));
            CHECK(strstr(event_file_path(a), "/events.out.tfevents.") != NULL, "named for TensorBoard: %s",
                  event_file_path(a));
        }
        CHECK(event_file_close(a, &err) == DDP_OK && event_file_close(b, &err) == DDP_OK, "close: %s", err.msg);
    }
    CHECK(same_second, "no two opens fell in one second in five tries");
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done("test_event_file");
}
