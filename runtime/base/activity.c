/* activity.c — the process's current activity (activity.h): one string and one collective wait,
 * behind a mutex because the reader is another thread. Holds nothing else. */
#include "activity.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char doing[256] = "starting";
static const char *wait_what; /* NULL: not in a collective */
static uint64_t wait_seq;

void activity_set(const char *fmt, ...)
{
    char line[sizeof doing];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    snprintf(doing, sizeof doing, "%s", line);
    pthread_mutex_unlock(&lock);
}

void activity_wait_begin(const char *what, uint64_t seq)
{
    pthread_mutex_lock(&lock);
    wait_what = what;
    wait_seq = seq;
    pthread_mutex_unlock(&lock);
}

void activity_wait_end(void)
{
    pthread_mutex_lock(&lock);
    wait_what = NULL;
    pthread_mutex_unlock(&lock);
}

bool activity_get(char *buf, size_t size)
{
    pthread_mutex_lock(&lock);
    bool waiting = wait_what != NULL;
    if (waiting)
        snprintf(buf, size, "waiting for the other ranks in %s #%llu (%s)", wait_what,
                 (unsigned long long)wait_seq, doing);
    else
        snprintf(buf, size, "%s", doing);
    pthread_mutex_unlock(&lock);
    return waiting;
}
