/* notice_watch.c — the thread that asks the cloud every checkpoint.notice_poll_s whether this
 * machine is about to be taken, and calls back once when it is (cloud_notice.h). A service that
 * stops answering is reported once, then asked again at every poll. Must not act on a notice
 * itself. */
#include "cloud_internal.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/base/log.h"

/* checkpoint.preemption_notice auto: how long the providers get to answer. */
#define DETECT_TIMEOUT_S 1.0

struct notice_watch {
    notice_provider provider;
    double poll_s;
    notice_fn on_notice;
    void *arg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* on CLOCK_MONOTONIC */
    bool quit;
};

/* Sleeps seconds unless told to quit first; false when quitting. */
static bool nap(notice_watch *w, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long long ns = until.tv_nsec + (long long)(seconds * 1e9);
    until.tv_sec += (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&w->mu);
    while (!w->quit && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0) {
    }
    bool go_on = !w->quit;
    pthread_mutex_unlock(&w->mu);
    return go_on;
}

static void *watch_thread(void *arg)
{
    notice_watch *w = arg;
    notice_provider provider = w->provider;
    if (provider == NOTICE_AUTO && (provider = cloud_detect(DETECT_TIMEOUT_S)) == NOTICE_OFF)
        return NULL; /* on no cloud: nothing to watch, nothing to say */
    cloud_session s;
    cloud_session_init(&s, provider);
    log_info("checkpoint.preemption_notice: watching %s's preemption notice at %s every %g s", cloud_name(provider),
             s.base, w->poll_s);
    bool failing = false;
    do {
        char what[NOTICE_TEXT_MAX] = "";
        int rc = cloud_poll(&s, what, sizeof what);
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
    } while (nap(w, w->poll_s));
    return NULL;
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
    *w = (notice_watch){.provider = provider, .poll_s = poll_s, .on_notice = on_notice, .arg = arg};
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    int rc = pthread_create(&w->thread, NULL, watch_thread, w);
    if (rc != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return ddp_fail(err, DDP_ERUNTIME, "checkpoint.preemption_notice: pthread_create: %s", strerror(rc));
    }
    *out = w;
    return DDP_OK;
}

void notice_watch_stop(notice_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    curl_global_cleanup();
}
