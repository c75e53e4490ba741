/* test_cloud_notice.c — reading the three providers' answers (runtime/cloud/cloud_notice.c), with
 * the bodies their documentation shows: AWS 404 = none and 200 with the instance-action JSON =
 * the notice, GCP TRUE/FALSE, Azure's Scheduled Events with Preempt events for this VM, for
 * another VM, or other event types; and answers that are not the documented format (garbage,
 * YAML, trailing bytes, NUL bytes, wrong values) taken for no notice, described with their bytes
 * escaped and bounded. The HTTP side is tests/launcher/trainer/test_preempt_notice.sh's. */
#include <stdio.h>
#include <string.h>

#include "tests/check.h"
#include "runtime/cloud/cloud_notice.h"

/* The parsers read a body of the given length (it may hold NUL bytes, as a network answer may). */
static int aws(long status, const char *body, size_t len, char *what)
{
    return notice_parse_aws(status, body, len, what, NOTICE_TEXT_MAX);
}
static int gcp(long status, const char *body, size_t len, char *what)
{
    return notice_parse_gcp(status, body, len, what, NOTICE_TEXT_MAX);
}
static int azure(long status, const char *body, size_t len, const char *vm, char *what)
{
    return notice_parse_azure(status, body, len, vm, what, NOTICE_TEXT_MAX);
}
#define LEN(literal) (sizeof literal - 1)

/* Every description is printable ASCII: bytes from the network are escaped. */
static void check_printable(const char *what)
{
    for (const char *p = what; *p; p++)
        CHECK(*p >= 0x20 && *p < 0x7f, "unescaped byte 0x%02x in \"%s\"", (unsigned char)*p, what);
}

static void test_aws(void)
{
    char what[NOTICE_TEXT_MAX];
    CHECK_EQ_INT(aws(404, "<?xml version=\"1.0\"?><html>Not Found</html>", 43, what), 0);
    static const char notice[] = "{\"action\": \"stop\", \"time\": \"2017-09-18T08:22:00Z\"}";
    CHECK_EQ_INT(aws(200, notice, LEN(notice), what), 1);
    CHECK(strcmp(what, "AWS spot/instance-action: stop at 2017-09-18T08:22:00Z") == 0, "%s", what);
    static const char compact[] = "{\"action\":\"hibernate\",\"time\":\"2026-01-02T03:04:05Z\"}\n";
    CHECK_EQ_INT(aws(200, compact, LEN(compact), what), 1);
    CHECK_EQ_INT(aws(401, "", 0, what), -1);
    CHECK_STR_CONTAINS(what, "HTTP 401");
}

/* A 200 whose body is not the documented instance-action JSON is no notice: it is reported (-1),
 * escaped and bounded, and the job goes on. */
static void test_aws_not_a_notice(void)
{
    char what[NOTICE_TEXT_MAX];
    static const char *const bodies[] = {
        "garbled {",
        "{\"action\": \"stop\"}",                                             /* no time */
        "{\"time\": \"2017-09-18T08:22:00Z\"}",                               /* no action */
        "{\"action\": \"reboot\", \"time\": \"2017-09-18T08:22:00Z\"}",       /* not an action AWS sends */
        "{\"action\": \"stop\", \"time\": \"soon\"}",                         /* not a time */
        "{\"action\": \"stop\", \"time\": 2017}",
        "action: stop\ntime: 2017-09-18T08:22:00Z\n",                         /* YAML, not JSON */
        "{action: stop, time: 2017-09-18T08:22:00Z}",
        "{\"action\": \"stop\", \"time\": \"2017-09-18T08:22:00Z\"} and more",
        "[{\"action\": \"stop\", \"time\": \"2017-09-18T08:22:00Z\"}]",
        "<html><body>Service Unavailable</body></html>",
        "",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        CHECK(aws(200, bodies[i], strlen(bodies[i]), what) == -1, "AWS 200 \"%s\" taken for a notice: %s", bodies[i],
              what);
        check_printable(what);
    }
    /* the bytes of a valid notice, then a NUL and more: not the documented answer */
    static const char nul[] = "{\"action\": \"stop\", \"time\": \"2017-09-18T08:22:00Z\"}\0{\"x\":1}";
    CHECK_EQ_INT(aws(200, nul, LEN(nul), what), -1);
    /* random bytes: escaped, and bounded however long the answer */
    char noise[6000];
    for (size_t i = 0; i < sizeof noise; i++)
        noise[i] = (char)((i * 167 + 13) % 256);
    CHECK_EQ_INT(aws(200, noise, sizeof noise, what), -1);
    check_printable(what);
    CHECK(strlen(what) < 200, "bounded: %zu bytes", strlen(what));
    CHECK_STR_CONTAINS(what, "\\x0d");
    CHECK_STR_CONTAINS(what, "6000 bytes");
}

static void test_gcp(void)
{
    char what[NOTICE_TEXT_MAX];
    CHECK_EQ_INT(gcp(200, "FALSE", 5, what), 0);
    CHECK_EQ_INT(gcp(200, "TRUE", 4, what), 1);
    CHECK_STR_CONTAINS(what, "GCP instance/preempted: TRUE");
    CHECK_EQ_INT(gcp(200, "TRUE\n", 5, what), 1);
    CHECK_EQ_INT(gcp(200, "<html>", 6, what), -1);
    CHECK_EQ_INT(gcp(403, "Missing Metadata-Flavor:Google header.", 38, what), -1);
    static const char *const bodies[] = {"TRUEish", "TRUE FALSE", "true", "FALSEHOOD", "\x1b[2JTRUE"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        CHECK(gcp(200, bodies[i], strlen(bodies[i]), what) == -1, "GCP 200 \"%s\": %s", bodies[i], what);
        check_printable(what);
    }
    CHECK_EQ_INT(gcp(200, "TRUE\0garbage", 12, what), -1);
}

static void test_azure(void)
{
    char what[NOTICE_TEXT_MAX];
    const char *none = "{\"DocumentIncarnation\":1,\"Events\":[]}";
    const char *mine = "{\"DocumentIncarnation\":3,\"Events\":[{\"EventId\":\"A-1\",\"EventStatus\":\"Scheduled\","
                       "\"EventType\":\"Freeze\",\"Resources\":[\"vm1\"],\"NotBefore\":\"\"},{\"EventId\":\"B-2\","
                       "\"EventStatus\":\"Scheduled\",\"EventType\":\"Preempt\",\"ResourceType\":\"VirtualMachine\","
                       "\"Resources\":[\"vm0\",\"vm1\"],\"NotBefore\":\"Mon, 19 Sep 2016 18:29:47 GMT\","
                       "\"Description\":\"a\\/b \\u00e9\",\"DurationInSeconds\":-1}]}";
    CHECK_EQ_INT(azure(200, none, strlen(none), "vm1", what), 0);
    CHECK_EQ_INT(azure(200, mine, strlen(mine), "vm1", what), 1);
    CHECK(strcmp(what, "Azure Scheduled Events: Preempt (EventId B-2, not before Mon, 19 Sep 2016 18:29:47 GMT)") == 0,
          "%s", what);
    CHECK_EQ_INT(azure(200, mine, strlen(mine), "vm7", what), 0);  /* another VM's eviction */
    /* raw UTF-8 in the document (a sibling VM's name, a description): libyaml counts its marks in
     * characters, the check after the object must count bytes */
    const char *raw = "{\"Events\":[{\"EventId\":\"C-3\",\"EventType\":\"Preempt\",\"Resources\":[\"vm1\","
                      "\"vm-m\xc3\xbcnchen-2\"],\"NotBefore\":\"\",\"Description\":\"\xe2\x80\xa6\"}]}\n";
    CHECK_EQ_INT(azure(200, raw, strlen(raw), "vm1", what), 1);
    CHECK_EQ_INT(azure(200, mine, strlen(mine), "", what), 1);     /* name unknown: any counts */
    CHECK_EQ_INT(azure(200, "{\"Events\": 3}", 13, "vm1", what), -1);
    CHECK_EQ_INT(azure(200, "[not json", 9, "vm1", what), -1);
    CHECK_EQ_INT(azure(200, "", 0, "vm1", what), -1);
    CHECK_EQ_INT(azure(400, "{\"error\": \"Bad request\"}", 24, "vm1", what), -1);
}

/* Azure's answer must be the documented object; what it names is escaped and bounded. */
static void test_azure_strict(void)
{
    char what[NOTICE_TEXT_MAX];
    static const char *const bodies[] = {
        "Events: [{EventType: Preempt, Resources: [vm1]}]",                      /* YAML, not JSON */
        "{\"Events\": [{\"EventType\": \"Preempt\", \"Resources\": [\"vm1\"]}]} trailing",
        "[{\"Events\": []}]",
        "{\"Events\": [\"Preempt\"]}",                                         /* an event that is no object */
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        CHECK(azure(200, bodies[i], strlen(bodies[i]), "vm1", what) == -1, "Azure 200 \"%s\": %s", bodies[i], what);
        check_printable(what);
    }
    char odd[1024];
    int n = snprintf(odd, sizeof odd, "{\"Events\":[{\"EventId\":\"\\u001b[31mX%0600d\",\"EventType\":\"Preempt\","
                     "\"Resources\":[\"vm1\"],\"NotBefore\":\"\\u0007\"}]}", 7);
    CHECK_EQ_INT(azure(200, odd, (size_t)n, "vm1", what), 1);
    check_printable(what);
    CHECK_STR_CONTAINS(what, "EventId \\x1b[31mX000");
    CHECK(strlen(what) < NOTICE_TEXT_MAX - 1, "bounded: %zu bytes", strlen(what));
}

int main(void)
{
    test_aws();
    test_aws_not_a_notice();
    test_gcp();
    test_azure();
    test_azure_strict();
    return check_done("cloud_notice");
}
