/* cloud_internal.h — what cloud_notice.c (the providers' endpoints and answers) shares with
 * notice_watch.c (the polling thread). Not a contract: other modules include cloud_notice.h. */
#ifndef DDP_CLOUD_INTERNAL_H
#define DDP_CLOUD_INTERNAL_H

#include <stdbool.h>

#include "cloud_notice.h"

#define CLOUD_URL_MAX 512
/* A metadata service answers within milliseconds; one that does not is not there. */
#define CLOUD_REQUEST_TIMEOUT_MS 2000

/* What one provider's polls keep between calls. */
typedef struct cloud_session {
    notice_provider provider;
    char base[CLOUD_URL_MAX];   /* http://169.254.169.254 or DDPRUN_METADATA_URL, no trailing '/' */
    char token[256];            /* AWS: IMDSv2 session token, "" = none yet */
    double token_time;          /* monotonic_s() when it was issued */
    bool imds_v1;               /* AWS: no token comes back (in a container: the instance's hop limit),
                                   but the service answers without one (IMDSv1): asked so from then on */
    char vm_name[128];          /* Azure: this VM's name, for the events that name it; "" until known */
} cloud_session;

void cloud_session_init(cloud_session *s, notice_provider provider);
/* One poll: 1 = a notice (what describes it), 0 = none, -1 = the service could not be asked or
 * did not answer as documented (what says why). */
int cloud_poll(cloud_session *s, char *what, size_t cap);

#endif
