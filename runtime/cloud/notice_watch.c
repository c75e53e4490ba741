/* notice_watch.c — the thread that asks the cloud every checkpoint.notice_poll_s whether this
 * machine is about to be taken, and calls back once when it is (cloud_notice.h). A service that
 * stops answering is reported once, then asked again at every poll. Must not act on a notice
 * itself. */
#include "cloud_internal.h"

#include <curl/curl.h>
#include <stdlib.h>

#include "runtime/base/log.h"
#include "runtime/base/worker.h"

/* checkpoint.preemption_notice auto: how long the providers get to answer. */
#define DETECT_TIMEOUT_S 1.0

struct notice_watch {
    notice_provider provider;
    notice_provider found;      /* the worker's lock guards it: notice_watch_cloud */
    double poll_s;
    notice_fn on_notice;
    void *arg;
    worker thread;
};

/* Sleeps seconds unless told to stop first; false when stopping. */
static bool nap(worker *t, double seconds)
{
    worker_lock(t);
    bool go_on = worker_nap(t, seconds);
    worker_unlock(t);
    return go_on;
}

static void watch_main(worker *t, void *arg)
{
    notice_watch *w = arg;
    notice_provider provider = w->provider;
    if (provider == NOTICE_AUTO)
        provider = cloud_detect(DETECT_TIMEOUT_S);
    worker_lock(t);
    w->found = provider;
    worker_unlock(t);
    if (provider == NOTICE_OFF) { /* on no cloud: nothing to watch; `auto` says so, once */
        log_info("checkpoint.preemption_notice auto: no cloud's metadata service (AWS, GCP, Azure) answered within "
                 "%g s: this host's preemption notices are not watched", DETECT_TIMEOUT_S);
        return;
    }
    cloud_session s;
    cloud_session_init(&s, provider);
    log_info("checkpoint.preemption_notice: watching %s's preemption notice at %s every %g s", cloud_name(provider),
             s.base, w->poll_s);
    bool failing = false, said_v1 = false;
    do {
        char what[NOTICE_TEXT_MAX] = "";
        int rc = cloud_poll(&s, what, sizeof what);
        if (s.imds_v1 && !said_v1)
            log_info("checkpoint.preemption_notice AWS: no IMDSv2 token comes back (inside a container: the "
                     "instance's hop limit); asking without one (IMDSv1)");
        said_v1 |= s.imds_v1;
        if (rc == 1) {
            w->on_notice(what, w->arg);
            break;
        }
        if (rc < 0 && !failing)
            log_warn("checkpoint.preemption_notice %s: %s; asking again every %g s", cloud_name(provider), what,
                     w->poll_s);
        else if (rc == 0 && failing)
            log_warn("checkpoint.preemption_notice %s: the metadata service answers again", cloud_name(provider));
        failing = rc < 0;
    } while (nap(t, w->poll_s));
}

int notice_watch_start(notice_provider provider, double poll_s, notice_fn on_notice, void *arg, notice_watch **out,
                       ddp_err *err)
{
    *out = NULL;
    if (provider == NOTICE_OFF)
        return DDP_OK;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) /* before any thread uses libcurl */
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint.preemption_notice: curl_global_init failed");
    notice_watch *w = calloc(1, sizeof *w);
    if (!w)
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint.preemption_notice: out of memory");
    *w = (notice_watch){.provider = provider, .found = provider, .poll_s = poll_s, .on_notice = on_notice, .arg = arg};
    worker_init(&w->thread);
    int rc = worker_start(&w->thread, "checkpoint.preemption_notice", NULL, watch_main, w, err);
    if (rc != DDP_OK) {
        worker_destroy(&w->thread);
        free(w);
        return rc;
    }
    *out = w;
    return DDP_OK;
}

notice_provider notice_watch_cloud(notice_watch *w)
{
    if (!w)
        return NOTICE_OFF;
    worker_lock(&w->thread);
    notice_provider found = w->found;
    worker_unlock(&w->thread);
    return found;
}

void notice_watch_stop(notice_watch *w)
{
    if (!w)
        return;
    worker_destroy(&w->thread);
    free(w);
    curl_global_cleanup();
}
