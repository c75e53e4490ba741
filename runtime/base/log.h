/* log.h — rank-aware printing for every ddprun program.
 *
 * log_info prints on rank 0 only (progress, headers); log_warn and log_error print on any rank,
 * to stderr, prefixed "[rank N host]" so a failure in a many-rank job names its culprit.
 * This module must not decide policy (when to print, what to exit with). */
#ifndef DDP_LOG_H
#define DDP_LOG_H

/* Sets the identity every later line is tagged with (rank 0 and "localhost" until called). */
void log_init(int rank, const char *host);

void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
