/* cloud_notice.h — the clouds' preemption notices: which cloud this machine runs on, and whether
 * it has announced that it will take the machine away.
 *
 * AWS (spot/instance-action, IMDSv2 with its session token; IMDSv1 where no token comes back),
 * GCP (instance/preempted, header Metadata-Flavor: Google) and Azure (Scheduled Events, an event
 * of type Preempt for this VM, header Metadata: true), each read from its documented instance metadata endpoint over plain
 * HTTP with libcurl, never through a proxy. The base URL is http://169.254.169.254 (every one of
 * the three answers there) or DDPRUN_METADATA_URL, which tests point at a local server.
 * A watch polls on a thread of its own and calls back once on a notice. This module must not
 * decide what a notice leads to (the training job does) and must not print except through log.h. */
#ifndef DDP_CLOUD_NOTICE_H
#define DDP_CLOUD_NOTICE_H

#include <stddef.h>

#include "runtime/base/err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NOTICE_TEXT_MAX 256
/* What the worker's line on a notice says, after its rank's "[rank R HOST] warning: " tag:
 * ddprun reads the host from such a line (a restart leaves it out). */
#define CLOUD_NOTICE_STOP "preemption notice: "

/* Whose notice to watch (the config's checkpoint.preemption_notice): none, whichever cloud's
 * metadata service answers, or one cloud's. */
typedef enum { NOTICE_OFF, NOTICE_AUTO, NOTICE_AWS, NOTICE_GCP, NOTICE_AZURE } notice_provider;

const char *cloud_name(notice_provider provider); /* "AWS", "GCP", "Azure" */
/* Seconds between a provider's notice and the machine's end, as the provider documents them: AWS
 * 120, GCP 30, Azure 30 (at least); 0 for none. */
double cloud_notice_window_s(notice_provider provider);

/* Which provider's metadata service answers within timeout_s (all three are asked at once);
 * NOTICE_OFF when none does. */
notice_provider cloud_detect(double timeout_s);

/* Reading one provider's answer, body[0..len) (not NUL-terminated; may hold NUL bytes): 1 = a
 * notice in the provider's documented format (what describes it), 0 = none, -1 = not such an
 * answer (what says why, the body's bytes escaped and cut short) — never a notice, however the
 * HTTP status reads. AWS: 404 = none, 200 with {"action": stop|terminate|hibernate, "time":
 * "YYYY-MM-DDTHH:MM:SSZ"}; GCP: TRUE / FALSE; Azure: {"Events": [...]} with an event of type
 * Preempt naming vm_name (any Preempt event when vm_name is ""). Exposed for the unit test. */
int notice_parse_aws(long http_status, const char *body, size_t len, char *what, size_t cap);
int notice_parse_gcp(long http_status, const char *body, size_t len, char *what, size_t cap);
int notice_parse_azure(long http_status, const char *body, size_t len, const char *vm_name, char *what, size_t cap);

typedef struct notice_watch notice_watch;
typedef void (*notice_fn)(const char *what, void *arg);

/* Starts polling every poll_s (provider NOTICE_AUTO: detected first, on the watch's thread; when no
 * service answers the watch says so in one line and ends). on_notice(what, arg) runs once, on the watch's thread. */
int notice_watch_start(notice_provider provider, double poll_s, notice_fn on_notice, void *arg, notice_watch **out,
                       ddp_err *err);
/* The cloud the watch w watches: its provider, NOTICE_AUTO while it is still being detected,
 * NOTICE_OFF when no service answered (and for w NULL). Any thread. */
notice_provider notice_watch_cloud(notice_watch *w);
/* Stops the thread (within one request's time limit) and frees w (NULL is fine). */
void notice_watch_stop(notice_watch *w);

#ifdef __cplusplus
}
#endif

#endif
