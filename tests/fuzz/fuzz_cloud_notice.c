/* fuzz_cloud_notice.c — libFuzzer target for reading the clouds' metadata answers
 * (runtime/cloud/cloud_notice.h: notice_parse_aws, notice_parse_gcp, notice_parse_azure), which
 * come over the network. The first byte picks the HTTP status among those the services send, the
 * rest is the body, passed with its length as received (NUL bytes included). Every answer must be
 * classified (-1, 0 or 1) with a terminated description of printable ASCII (what the network
 * sent is escaped); a notice only for the documented format: AWS a 200 whose description is
 * "action at YYYY-MM-DDTHH:MM:SSZ" with a documented action, GCP a 200 of TRUE; an AWS 404 is
 * never one. Must not print. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/cloud/cloud_notice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int rc, const char *what)
{
    if (rc < -1 || rc > 1 || strnlen(what, NOTICE_TEXT_MAX) >= NOTICE_TEXT_MAX)
        abort();
    for (const char *p = what; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            abort();
}

/* "AWS spot/instance-action: ACTION at YYYY-MM-DDTHH:MM:SSZ" with a documented ACTION. */
static int aws_notice_text(const char *what)
{
    static const char *const actions[] = {"stop", "terminate", "hibernate"};
    static const char prefix[] = "AWS spot/instance-action: ";
    if (strncmp(what, prefix, sizeof prefix - 1) != 0)
        return 0;
    const char *p = what + sizeof prefix - 1;
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(actions[i]);
        if (strncmp(p, actions[i], n) == 0 && strncmp(p + n, " at ", 4) == 0) {
            const char *t = p + n + 4;
            static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
            for (size_t k = 0; k < sizeof shape; k++)
                if (shape[k] == 'd' ? !isdigit((unsigned char)t[k]) : t[k] != shape[k])
                    return 0;
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 404, 401, 400, 403, 500};
    if (size == 0)
        return 0;
    long status = statuses[data[0] % (sizeof statuses / sizeof statuses[0])];
    size_t len = size - 1;
    char *body = malloc(len ? len : 1); /* exactly the body: ASan sees a read past it */
    if (!body)
        abort();
    memcpy(body, data + 1, len);
    char what[NOTICE_TEXT_MAX] = ""; /* an answer of no notice (0) leaves it as it was */
    int rc = notice_parse_aws(status, body, len, what, sizeof what);
    check(rc, what);
    if ((status == 404 && rc != 0) || (rc == 1 && (status != 200 || !aws_notice_text(what))))
        abort();
    rc = notice_parse_gcp(status, body, len, what, sizeof what);
    check(rc, what);
    if (rc == 1 && (status != 200 || len < 4 || memcmp(body, "TRUE", 4) != 0))
        abort();
    check(notice_parse_azure(status, body, len, "vm-under-test", what, sizeof what), what);
    check(notice_parse_azure(status, body, len, "", what, sizeof what), what);
    free(body);
    return 0;
}
