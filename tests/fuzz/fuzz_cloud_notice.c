/* fuzz_cloud_notice.c — libFuzzer target for reading the clouds' metadata answers
 * (runtime/cloud/cloud_notice.h: notice_parse_aws, notice_parse_gcp, notice_parse_azure), which
 * come over the network. The first byte picks the HTTP status among those the services send, the
 * rest is the body (NUL-terminated copy). Every answer must be classified (-1, 0 or 1) with a
 * terminated description; an AWS 200 is always a notice, a 404 never. Must not print. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cloud/cloud_notice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, const char *what)
{
    if (rc < -1 || rc > 1 || strnlen(what, NOTICE_TEXT_MAX) >= NOTICE_TEXT_MAX)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 404, 401, 400, 403, 500};
    if (size == 0)
        return 0;
    long status = statuses[data[0] % (sizeof statuses / sizeof statuses[0])];
    char *body = malloc(size);
    if (!body)
        abort();
    memcpy(body, data + 1, size - 1);
    body[size - 1] = '\0';
    char what[NOTICE_TEXT_MAX];
    int rc = notice_parse_aws(status, body, what, sizeof what);
    check(rc, what);
    if ((status == 200 && rc != 1) || (status == 404 && rc != 0))
        abort();
    check(notice_parse_gcp(status, body, what, sizeof what), what);
    check(notice_parse_azure(status, body, "vm-under-test", what, sizeof what), what);
    check(notice_parse_azure(status, body, "", what, sizeof what), what);
    free(body);
    return 0;
}
