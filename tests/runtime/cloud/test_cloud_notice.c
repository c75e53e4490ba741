/* test_cloud_notice.c — reading the three providers' answers (runtime/cloud/cloud_notice.c), with
 * the bodies their documentation shows: AWS 404 = none and 200 = the notice (even unreadable),
 * GCP TRUE/FALSE, Azure's Scheduled Events with Preempt events for this VM, for another VM, or
 * other event types. The HTTP side is tests/launcher/train/test_preempt_notice.sh's. */
#include <string.h>

#include "tests/check.h"
#include "runtime/cloud/cloud_notice.h"

static void test_aws(void)
{
    char what[NOTICE_TEXT_MAX];
    CHECK_EQ_INT(notice_parse_aws(404, "<?xml version=\"1.0\"?><html>Not Found</html>", what, sizeof what), 0);
    CHECK_EQ_INT(notice_parse_aws(200, "{\"action\": \"stop\", \"time\": \"2017-09-18T08:22:00Z\"}", what,
                                  sizeof what), 1);
    CHECK(strcmp(what, "AWS spot/instance-action: stop at 2017-09-18T08:22:00Z") == 0, "%s", what);
    CHECK_EQ_INT(notice_parse_aws(200, "garbled {", what, sizeof what), 1);
    CHECK_STR_CONTAINS(what, "garbled {");
    CHECK_EQ_INT(notice_parse_aws(401, "", what, sizeof what), -1);
    CHECK_STR_CONTAINS(what, "HTTP 401");
}

static void test_gcp(void)
{
    char what[NOTICE_TEXT_MAX];
    CHECK_EQ_INT(notice_parse_gcp(200, "FALSE", what, sizeof what), 0);
    CHECK_EQ_INT(notice_parse_gcp(200, "TRUE", what, sizeof what), 1);
    CHECK_STR_CONTAINS(what, "GCP instance/preempted: TRUE");
    CHECK_EQ_INT(notice_parse_gcp(200, "<html>", what, sizeof what), -1);
    CHECK_EQ_INT(notice_parse_gcp(403, "Missing Metadata-Flavor:Google header.", what, sizeof what), -1);
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
    CHECK_EQ_INT(notice_parse_azure(200, none, "vm1", what, sizeof what), 0);
    CHECK_EQ_INT(notice_parse_azure(200, mine, "vm1", what, sizeof what), 1);
    CHECK(strcmp(what, "Azure Scheduled Events: Preempt (EventId B-2, not before Mon, 19 Sep 2016 18:29:47 GMT)") == 0,
          "%s", what);
    CHECK_EQ_INT(notice_parse_azure(200, mine, "vm7", what, sizeof what), 0);  /* another VM's eviction */
    CHECK_EQ_INT(notice_parse_azure(200, mine, "", what, sizeof what), 1);     /* name unknown: any counts */
    CHECK_EQ_INT(notice_parse_azure(200, "{\"Events\": 3}", "vm1", what, sizeof what), -1);
    CHECK_EQ_INT(notice_parse_azure(200, "[not json", "vm1", what, sizeof what), -1);
    CHECK_EQ_INT(notice_parse_azure(200, "", "vm1", what, sizeof what), -1);
    CHECK_EQ_INT(notice_parse_azure(400, "{\"error\": \"Bad request\"}", "vm1", what, sizeof what), -1);
}

int main(void)
{
    test_aws();
    test_gcp();
    test_azure();
    return check_done("cloud_notice");
}
