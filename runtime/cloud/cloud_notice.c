/* cloud_notice.c — the three providers' metadata endpoints, their answers and how this machine's
 * provider is recognised (cloud_notice.h). JSON answers are read with libyaml: JSON is YAML's flow
 * style, so the YAML library the config loader uses reads them, held to JSON's shape (one object,
 * double-quoted strings, nothing after it). Only an answer in the provider's documented format is
 * a notice; anything else is described with its bytes escaped and cut short. Must not keep state
 * between calls other than the cloud_session the caller owns. */
#include "cloud_internal.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "runtime/base/clock.h"
#include "runtime/base/utf8.h"

#define AWS_TOKEN_TTL_S 21600
#define AWS_V1_RETRY_S 600 /* asking without a token (IMDSv1), a token is tried again this often */
#define AZURE_API "api-version=2020-07-01"

static const char aws_token_path[] = "/latest/api/token";
static const char aws_notice_path[] = "/latest/meta-data/spot/instance-action";
static const char gcp_notice_path[] = "/computeMetadata/v1/instance/preempted";
static const char azure_events_path[] = "/metadata/scheduledevents?" AZURE_API;
static const char azure_name_path[] = "/metadata/instance/compute/name?api-version=2021-02-01&format=text";
static const char azure_instance_path[] = "/metadata/instance?api-version=2021-02-01";

const char *cloud_name(notice_provider provider)
{
    switch (provider) {
    case NOTICE_AWS: return "AWS";
    case NOTICE_GCP: return "GCP";
    case NOTICE_AZURE: return "Azure";
    default: return "none";
    }
}

/* AWS: the two-minute spot interruption notice; GCP: 30 s between the preemption notice and the
 * stop of a Spot or preemptible VM; Azure: a Spot VM's Preempt event comes at least 30 s before. */
double cloud_notice_window_s(notice_provider provider)
{
    switch (provider) {
    case NOTICE_AWS: return 120;
    case NOTICE_GCP: return 30;
    case NOTICE_AZURE: return 30;
    default: return 0;
    }
}

/* ---- HTTP -------------------------------------------------------------------------------- */

/* Azure's Scheduled Events list every event of the VM's placement group (up to 100 VMs of a scale
 * set, about 300 bytes each): room for them all, an answer beyond it an error, never cut short. */
typedef struct http_reply {
    long status;
    char body[256 * 1024];
    size_t len;
    bool google;                /* the answer carried Metadata-Flavor: Google */
    bool ec2;                   /* the answer carried Server: EC2ws, as AWS's metadata service's all do */
    char error[CURL_ERROR_SIZE];
} http_reply;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    http_reply *r = arg;
    size_t bytes = size * n, room = sizeof r->body - 1 - r->len;
    if (bytes > room) { /* a request failed: a JSON answer cut short parses as no answer at all */
        snprintf(r->error, sizeof r->error, "an answer of more than %zu bytes", sizeof r->body - 1);
        return 0;
    }
    memcpy(r->body + r->len, p, bytes);
    r->len += bytes;
    r->body[r->len] = '\0';
    return bytes;
}

/* Whether the header line p (bytes long, not NUL-terminated) is name (any case) with value in it. */
static bool header_says(const char *p, size_t bytes, const char *name, const char *value)
{
    size_t n = strlen(name);
    return p && bytes > n && strncasecmp(p, name, n) == 0 && memmem(p + n, bytes - n, value, strlen(value)) != NULL;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    http_reply *r = arg;
    size_t bytes = size * n;
    r->google |= header_says(p, bytes, "Metadata-Flavor:", "Google");
    r->ec2 |= header_says(p, bytes, "Server:", "EC2ws");
    return bytes;
}

/* An easy handle for one request; headers stay owned by the caller until the request ends. */
static CURL *request(const char *base, const char *path, bool put, struct curl_slist *headers, long timeout_ms,
                     http_reply *r)
{
    memset(r, 0, sizeof *r);
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char url[CLOUD_URL_MAX + 128];
    snprintf(url, sizeof url, "%s%s", base, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);       /* called from a thread: no SIGALRM timeouts */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");       /* the metadata service is link-local */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, r->error);
    if (put) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    }
    return h;
}

/* Performs one request; false (r->error says why) when no HTTP answer came. */
static bool fetch(const char *base, const char *path, bool put, const char *header, http_reply *r)
{
    struct curl_slist *headers = header ? curl_slist_append(NULL, header) : NULL;
    CURL *h = request(base, path, put, headers, CLOUD_REQUEST_TIMEOUT_MS, r);
    bool ok = false;
    if (h) {
        CURLcode c = curl_easy_perform(h);
        if (c == CURLE_OK)
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
        else if (!r->error[0])
            snprintf(r->error, sizeof r->error, "%s", curl_easy_strerror(c));
        ok = c == CURLE_OK;
        curl_easy_cleanup(h);
    } else {
        snprintf(r->error, sizeof r->error, "curl_easy_init failed");
    }
    curl_slist_free_all(headers);
    return ok;
}

/* ---- untrusted text ------------------------------------------------------------------------ */

/* text[0..n) into out as printable ASCII of at most max characters (cap > max + 32): '\\', '"'
 * and every byte outside 0x20..0x7e escaped (\xNN), then "..." and the whole length when it was
 * cut. What a metadata service sends is only ever shown this way. */
static void escape_bounded(const char *text, size_t n, size_t max, char *out, size_t cap)
{
    size_t len = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        char one[8];
        int w = c == '\\' || c == '"' ? snprintf(one, sizeof one, "\\%c", c)
                : c >= 0x20 && c < 0x7f ? snprintf(one, sizeof one, "%c", c)
                                         : snprintf(one, sizeof one, "\\x%02x", c);
        if (len + (size_t)w > max || len + (size_t)w >= cap)
            break;
        memcpy(out + len, one, (size_t)w);
        len += (size_t)w;
    }
    out[len] = '\0';
    if (i < n)
        snprintf(out + len, cap - len, "... (%zu bytes)", n);
}

/* How much of an answer a description shows, in escaped characters. */
#define SHOWN_CHARS 80

static int not_documented(const char *who, const char *body, size_t len, char *what, size_t cap)
{
    char shown[SHOWN_CHARS + 40];
    escape_bounded(body, len, SHOWN_CHARS, shown, sizeof shown);
    snprintf(what, cap, "%s answered \"%s\", not the documented format; not taken for a notice", who, shown);
    return -1;
}

/* ---- JSON through libyaml ------------------------------------------------------------------ */

/* The byte offset of character `index` of body (libyaml counts its marks in characters; the text
 * is valid UTF-8, as libyaml checked). */
static size_t byte_offset(const char *body, size_t len, size_t index)
{
    size_t at = 0;
    for (size_t c = 0; c < index && at < len; c++) {
        uint32_t cp;
        size_t n = utf8_next((const uint8_t *)body + at, len - at, &cp);
        at += n ? n : 1;
    }
    return at;
}

/* Loads body[0..len) when it is one JSON object: no NUL byte, '{' first (after white space), the
 * root a flow mapping, nothing but white space after it. libyaml reads more than JSON (YAML's
 * block style, plain scalars); the readers below also insist on double-quoted strings. */
static bool json_object_load(yaml_document_t *doc, const char *body, size_t len)
{
    size_t lead = 0;
    while (lead < len && strchr(" \t\r\n", body[lead]) && body[lead])
        lead++;
    if (lead == len || body[lead] != '{' || memchr(body, '\0', len))
        return false;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return false;
    yaml_parser_set_input_string(&p, (const unsigned char *)body, len);
    bool ok = yaml_parser_load(&p, doc);
    yaml_parser_delete(&p);
    if (!ok)
        return false;
    yaml_node_t *root = yaml_document_get_root_node(doc);
    ok = root && root->type == YAML_MAPPING_NODE && root->data.mapping.style == YAML_FLOW_MAPPING_STYLE;
    for (size_t i = ok ? byte_offset(body, len, root->end_mark.index) : len; i < len; i++)
        ok = ok && strchr(" \t\r\n", body[i]);
    if (!ok)
        yaml_document_delete(doc);
    return ok;
}

/* A JSON string's value, or NULL for anything else (a number, a plain YAML scalar, a list). */
static const char *json_string(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE
               ? (const char *)n->data.scalar.value
               : NULL;
}

/* The value under the JSON key in mapping node m, or NULL. */
static yaml_node_t *member(yaml_document_t *doc, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = json_string(yaml_document_get_node(doc, p->key));
        if (k && strcmp(k, key) == 0)
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

static bool list_has(yaml_document_t *doc, yaml_node_t *seq, const char *value)
{
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return false;
    for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++) {
        const char *v = json_string(yaml_document_get_node(doc, *i));
        if (v && strcmp(v, value) == 0)
            return true;
    }
    return false;
}

/* ---- the providers' answers ------------------------------------------------------------------ */

/* "2017-09-18T08:22:00Z": the instance-action time, UTC, as AWS documents it. */
static bool aws_time(const char *t)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
    for (size_t i = 0; i < sizeof shape; i++)
        if (shape[i] == 'd' ? !isdigit((unsigned char)t[i]) : t[i] != shape[i])
            return false;
    return true;
}

int notice_parse_aws(long http_status, const char *body, size_t len, char *what, size_t cap)
{
    if (http_status == 404) /* documented: no action is scheduled */
        return 0;
    if (http_status != 200) {
        snprintf(what, cap, "AWS spot/instance-action answered HTTP %ld", http_status);
        return -1;
    }
    /* documented: {"action": "stop" | "terminate" | "hibernate", "time": "2017-09-18T08:22:00Z"} */
    yaml_document_t doc;
    if (!json_object_load(&doc, body, len))
        return not_documented("AWS spot/instance-action", body, len, what, cap);
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    const char *action = json_string(member(&doc, root, "action")), *when = json_string(member(&doc, root, "time"));
    bool known = action && (!strcmp(action, "stop") || !strcmp(action, "terminate") || !strcmp(action, "hibernate"));
    int rc = 1;
    if (known && when && aws_time(when))
        snprintf(what, cap, "AWS spot/instance-action: %s at %s", action, when);
    else
        rc = not_documented("AWS spot/instance-action", body, len, what, cap);
    yaml_document_delete(&doc);
    return rc;
}

int notice_parse_gcp(long http_status, const char *body, size_t len, char *what, size_t cap)
{
    if (http_status != 200) {
        snprintf(what, cap, "GCP instance/preempted answered HTTP %ld", http_status);
        return -1;
    }
    size_t n = len; /* documented: TRUE or FALSE; a line end after it is tolerated */
    while (n > 0 && (body[n - 1] == '\n' || body[n - 1] == '\r'))
        n--;
    if (n == 4 && memcmp(body, "TRUE", 4) == 0) {
        snprintf(what, cap, "GCP instance/preempted: TRUE");
        return 1;
    }
    if (n == 5 && memcmp(body, "FALSE", 5) == 0)
        return 0;
    return not_documented("GCP instance/preempted", body, len, what, cap);
}

/* An event of type Preempt that names this VM (any, while its name is unknown); -1 when an event
 * is not an object. */
static int azure_preempt(yaml_document_t *doc, yaml_node_t *events, const char *vm_name, char *what, size_t cap)
{
    for (yaml_node_item_t *i = events->data.sequence.items.start; i < events->data.sequence.items.top; i++) {
        yaml_node_t *ev = yaml_document_get_node(doc, *i);
        if (!ev || ev->type != YAML_MAPPING_NODE)
            return -1;
        const char *type = json_string(member(doc, ev, "EventType"));
        if (!type || strcmp(type, "Preempt") != 0)
            continue;
        if (vm_name && vm_name[0] && !list_has(doc, member(doc, ev, "Resources"), vm_name))
            continue;
        const char *id = json_string(member(doc, ev, "EventId")), *not_before = json_string(member(doc, ev, "NotBefore"));
        char id_text[SHOWN_CHARS + 40], when_text[SHOWN_CHARS + 40];
        escape_bounded(id ? id : "?", id ? strlen(id) : 1, SHOWN_CHARS, id_text, sizeof id_text);
        escape_bounded(not_before && not_before[0] ? not_before : "now",
                       not_before && not_before[0] ? strlen(not_before) : 3, SHOWN_CHARS, when_text, sizeof when_text);
        snprintf(what, cap, "Azure Scheduled Events: Preempt (EventId %s, not before %s)", id_text, when_text);
        return 1;
    }
    return 0;
}

int notice_parse_azure(long http_status, const char *body, size_t len, const char *vm_name, char *what, size_t cap)
{
    if (http_status != 200) {
        snprintf(what, cap, "Azure Scheduled Events answered HTTP %ld", http_status);
        return -1;
    }
    /* documented: {"DocumentIncarnation": N, "Events": [{"EventId": ..., "EventType": ..., ...}, ...]} */
    yaml_document_t doc;
    if (!json_object_load(&doc, body, len))
        return not_documented("Azure Scheduled Events", body, len, what, cap);
    yaml_node_t *events = member(&doc, yaml_document_get_root_node(&doc), "Events");
    int rc = events && events->type == YAML_SEQUENCE_NODE ? azure_preempt(&doc, events, vm_name, what, cap) : -1;
    if (rc < 0)
        not_documented("Azure Scheduled Events", body, len, what, cap);
    yaml_document_delete(&doc);
    return rc;
}

/* ---- polling one provider ---------------------------------------------------------------- */

void cloud_session_init(cloud_session *s, notice_provider provider)
{
    memset(s, 0, sizeof *s);
    s->provider = provider;
    const char *env = getenv("DDPRUN_METADATA_URL");
    snprintf(s->base, sizeof s->base, "%s", env && env[0] ? env : "http://169.254.169.254");
    size_t n = strlen(s->base);
    while (n > 0 && s->base[n - 1] == '/')
        s->base[--n] = '\0';
}

/* The token's PUT got no token: inside a container, whose packets take one hop more, its answer
 * never arrives where the instance's hop limit is 1 (the default of many). The notice is asked
 * without a token instead (IMDSv1), which the service answers (200, 404) where the instance allows
 * it; where it refuses (401), what says how to let the token through. */
static int aws_without_token(cloud_session *s, const char *why, char *what, size_t cap)
{
    http_reply r;
    if (!fetch(s->base, aws_notice_path, false, NULL, &r)) {
        snprintf(what, cap, "AWS IMDSv2 token: %s", why);
        return -1;
    }
    if (r.status == 401) { /* the advice first: what is cut at cap */
        snprintf(what, cap, "no IMDSv2 token came back (%s) and IMDSv1 is refused: inside a container, raise the "
                 "hop limit: aws ec2 modify-instance-metadata-options --instance-id ID "
                 "--http-put-response-hop-limit 2", why);
        return -1;
    }
    if (r.status != 200 && r.status != 404) {
        snprintf(what, cap, "AWS IMDSv2 token: %s; asked without one, HTTP %ld", why, r.status);
        return -1;
    }
    if (!s->imds_v1)
        s->imds_v1 = true, s->token_time = monotonic_s();
    return notice_parse_aws(r.status, r.body, r.len, what, cap);
}

static int aws_poll(cloud_session *s, char *what, size_t cap)
{
    http_reply r;
    /* a token when there is none or it expires; on IMDSv1, tried again every AWS_V1_RETRY_S */
    double age = monotonic_s() - s->token_time;
    if (s->imds_v1 ? age > AWS_V1_RETRY_S : !s->token[0] || age > AWS_TOKEN_TTL_S - 60) {
        bool answered = fetch(s->base, aws_token_path, true, "X-aws-ec2-metadata-token-ttl-seconds: 21600", &r);
        if (!answered || r.status != 200 || r.len == 0 || r.len >= sizeof s->token) {
            char why[64] = "no answer";
            if (answered)
                snprintf(why, sizeof why, r.status != 200 ? "HTTP %ld" : "an empty or oversized token (HTTP %ld)", r.status);
            if (s->imds_v1)
                s->token_time = monotonic_s(); /* the next try in AWS_V1_RETRY_S */
            return aws_without_token(s, why, what, cap);
        }
        snprintf(s->token, sizeof s->token, "%.*s", (int)strcspn(r.body, "\r\n"), r.body);
        s->token_time = monotonic_s();
        s->imds_v1 = false;
    }
    char header[sizeof s->token + 32];
    snprintf(header, sizeof header, "X-aws-ec2-metadata-token: %s", s->token);
    if (!fetch(s->base, aws_notice_path, false, s->imds_v1 ? NULL : header, &r)) {
        snprintf(what, cap, "AWS spot/instance-action: %s", r.error);
        return -1;
    }
    if (r.status == 401) /* a token expired or revoked, or IMDSv1 turned off: a new token at the next poll */
        s->token[0] = '\0', s->imds_v1 = false;
    return notice_parse_aws(r.status, r.body, r.len, what, cap);
}

static int gcp_poll(cloud_session *s, char *what, size_t cap)
{
    http_reply r;
    if (!fetch(s->base, gcp_notice_path, false, "Metadata-Flavor: Google", &r)) {
        snprintf(what, cap, "GCP instance/preempted: %s", r.error);
        return -1;
    }
    if (r.status == 200 && !r.google) { /* the real service always says who it is */
        snprintf(what, cap, "GCP instance/preempted answered without the header Metadata-Flavor: Google");
        return -1;
    }
    return notice_parse_gcp(r.status, r.body, r.len, what, cap);
}

/* Azure: the events name the VMs they concern, and a placement group's events reach all its VMs:
 * until this VM's name is known (asked again at every poll), no event can be told to be its own. */
static int azure_poll(cloud_session *s, char *what, size_t cap)
{
    http_reply r;
    if (!s->vm_name[0]) {
        if (!fetch(s->base, azure_name_path, false, "Metadata: true", &r) || r.status != 200 || !r.len) {
            snprintf(what, cap, "this VM's name (instance/compute/name, which events name): %s",
                     r.error[0] ? r.error : r.status != 200 ? "not HTTP 200" : "empty");
            return -1;
        }
        snprintf(s->vm_name, sizeof s->vm_name, "%.*s", (int)strcspn(r.body, "\r\n"), r.body);
    }
    if (!fetch(s->base, azure_events_path, false, "Metadata: true", &r)) {
        snprintf(what, cap, "Azure Scheduled Events: %s", r.error);
        return -1;
    }
    return notice_parse_azure(r.status, r.body, r.len, s->vm_name, what, cap);
}

int cloud_poll(cloud_session *s, char *what, size_t cap)
{
    switch (s->provider) {
    case NOTICE_AWS: return aws_poll(s, what, cap);
    case NOTICE_GCP: return gcp_poll(s, what, cap);
    case NOTICE_AZURE: return azure_poll(s, what, cap);
    default: snprintf(what, cap, "no provider"); return -1;
    }
}

/* ---- which cloud ------------------------------------------------------------------------- */

/* Whether question i of cloud_detect was answered as its provider answers it. */
static bool detect_answered(int i, http_reply *r)
{
    char what[NOTICE_TEXT_MAX];
    switch (i) {
    case 0: return r->status == 200 && r->len > 0;
    case 1: return r->google && notice_parse_gcp(r->status, r->body, r->len, what, sizeof what) >= 0;
    default: return r->status == 200 && r->body[0] == '{';
    }
}

/* The three questions asked at once, so that a machine on no cloud costs timeout_s, not three. AWS
 * by its token, else by the header Server: EC2ws on any answer: inside a container the token's
 * answer may not arrive (aws_without_token), but AWS's service answers the others' questions (404,
 * or 401 without a token), and nothing else at that address says EC2ws (OpenStack's EC2-like
 * service does not). */
notice_provider cloud_detect(double timeout_s)
{
    cloud_session s;
    cloud_session_init(&s, NOTICE_AUTO);
    const notice_provider who[3] = {NOTICE_AWS, NOTICE_GCP, NOTICE_AZURE};
    /* Azure by its instance metadata: Scheduled Events start on their first request, whose answer
     * may take up to two minutes (Microsoft's documentation), far longer than timeout_s */
    const char *path[3] = {aws_token_path, gcp_notice_path, azure_instance_path};
    const char *header[3] = {"X-aws-ec2-metadata-token-ttl-seconds: 60", "Metadata-Flavor: Google",
                             "Metadata: true"};
    http_reply *r = calloc(3, sizeof *r);
    struct curl_slist *h[3] = {NULL, NULL, NULL};
    CURL *e[3] = {NULL, NULL, NULL};
    CURLM *m = r ? curl_multi_init() : NULL;
    for (int i = 0; m && i < 3; i++) {
        h[i] = curl_slist_append(NULL, header[i]);
        e[i] = request(s.base, path[i], i == 0, h[i], (long)(timeout_s * 1000), &r[i]);
        if (e[i])
            curl_multi_add_handle(m, e[i]);
    }
    double t0 = monotonic_s();
    int running = m ? 1 : 0;
    while (running > 0 && monotonic_s() - t0 < timeout_s + 0.1) {
        curl_multi_perform(m, &running);
        if (running > 0)
            curl_multi_poll(m, NULL, 0, 50, NULL);
    }
    notice_provider found = NOTICE_OFF;
    bool ec2 = false;
    for (int i = 0; i < 3; i++) {
        if (!e[i])
            continue;
        curl_easy_getinfo(e[i], CURLINFO_RESPONSE_CODE, &r[i].status);
        if (found == NOTICE_OFF && detect_answered(i, &r[i]))
            found = who[i];
        ec2 |= r[i].ec2;
        curl_multi_remove_handle(m, e[i]);
        curl_easy_cleanup(e[i]);
    }
    for (int i = 0; i < 3; i++)
        curl_slist_free_all(h[i]);
    if (m)
        curl_multi_cleanup(m);
    free(r);
    return found == NOTICE_OFF && ec2 ? NOTICE_AWS : found;
}
