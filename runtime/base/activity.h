/* activity.h — what this process is doing now, in a few words ("reading checkpoint.init_from
 * DIR/config.json", "step 17", "waiting for the other ranks in all-reduce #52"), for the one
 * message a watchdog prints when the process stopped answering. The main thread says where it is
 * at each phase; any thread may read it. Must not print, time or decide anything itself. */
#ifndef DDP_ACTIVITY_H
#define DDP_ACTIVITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the process does from now on (printf-style; cut at 255 bytes). */
void activity_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Waiting for peers in a collective (`what`: a string literal such as "all-reduce", seq its
 * number), within whatever activity_set said; activity_wait_end when it completed. Cheap: no
 * formatting, for every collective. */
void activity_wait_begin(const char *what, uint64_t seq);
void activity_wait_end(void);

/* The activity as a sentence fragment into buf; true when the process is waiting in a collective
 * (then the fragment says which, and what it was doing around it). */
bool activity_get(char *buf, size_t size);

#endif
