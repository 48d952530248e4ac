/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The trace path end to end (docs/operations.md §8 "Tracing"): kubesim started with
 * --tracing sends a W3C traceparent on its webhook calls, as the
 * apiserver does when its tracing is on; ONE kop process (webhooks and
 * controller, dev certificates from scripts/gen-certs.sh) runs with
 * --otlp-endpoint pointing at an OTLP/HTTP receiver inside this test
 * (tests/fakesrv.c) and --log-level debug (an admitted review is logged at
 * debug).
 *
 * Covers:
 *  - the validating webhook's SERVER span reaches the receiver with the
 *    trace id kubesim sent and kubesim's span id as parentSpanId; kop's
 *    log line for that review carries the same traceID and the span's
 *    spanID;
 *  - a reconcile is a trace of its own: a root INTERNAL "reconcile" span
 *    naming the object, CLIENT children for its API calls, and kubesim
 *    received each child's traceparent on the call it made; its log lines
 *    carry the root span's ids;
 *  - kop_trace_spans_exported_total counts what the receiver got.
 *
 * Waits poll for the spans and log lines with generous deadlines; no
 * timing decides the outcome.
 */
#include "fakesrv.h"
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define TOKEN "tracing-test-token"
#define NS "default"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define VALIDATE_PATH "/validate-mygroup-example-com-myresource"

static struct kop_test_kubesim sim;
static struct kop_test_proc kop;
static bool kop_running;
static struct fsrv receiver;
static struct kop_test_scratch fx;
static char certs[512];
static char *dev_ca_b64;
static long metrics_port;

/* ---- the OTLP receiver ------------------------------------------------------------- */

static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *spans; /* every span received */
static char service_name[64];

static bool on_traces(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    if (strcmp(req->method, "POST") != 0 || strcmp(req->path, "/v1/traces") != 0 ||
        strcmp(req->content_type, "application/json") != 0)
        return fsrv_reply(fd, 404, NULL, "text/plain", "not found\n");
    json_t *doc = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
    if (!doc)
        return fsrv_reply(fd, 400, NULL, "text/plain", "bad JSON\n");
    size_t i, j;
    json_t *rs, *ss;
    pthread_mutex_lock(&spans_lock);
    json_array_foreach(json_object_get(doc, "resourceSpans"), i, rs)
    {
        json_t *attr =
            json_array_get(json_object_get(json_object_get(rs, "resource"), "attributes"), 0);
        const char *sn =
            json_string_value(json_object_get(json_object_get(attr, "value"), "stringValue"));
        snprintf(service_name, sizeof(service_name), "%s", sn ? sn : "");
        json_array_foreach(json_object_get(rs, "scopeSpans"), j, ss)
        {
            json_array_extend(spans, json_object_get(ss, "spans"));
        }
    }
    pthread_mutex_unlock(&spans_lock);
    json_decref(doc);
    return fsrv_reply(fd, 200, NULL, "application/json", "{}");
}

static const char *sget(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* A span's string attribute, "" when absent. */
static const char *attr(const json_t *span, const char *key)
{
    size_t i;
    json_t *kv;
    json_array_foreach(json_object_get(span, "attributes"), i, kv)
    {
        if (strcmp(sget(kv, "key"), key) == 0)
            return sget(json_object_get(kv, "value"), "stringValue");
    }
    return "";
}

/* A copy of the first span matching (trace id, kind, name), or NULL. */
static json_t *find_span(const char *trace_id, int kind, const char *name)
{
    json_t *found = NULL;
    size_t i;
    json_t *s;
    pthread_mutex_lock(&spans_lock);
    json_array_foreach(spans, i, s)
    {
        if ((!trace_id || strcmp(sget(s, "traceId"), trace_id) == 0) &&
            json_integer_value(json_object_get(s, "kind")) == kind &&
            strcmp(sget(s, "name"), name) == 0) {
            found = json_deep_copy(s);
            break;
        }
    }
    pthread_mutex_unlock(&spans_lock);
    return found;
}

/* ---- kubesim API --------------------------------------------------------------------- */

static const struct kop_test_http_options *api_opts(void)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){.ca = fx.ca, .token = TOKEN, .timeout_s = 30};
    return &o;
}

static json_t *api(const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(), sim.url, method, path, body, want);
}

/* ---- fixture ------------------------------------------------------------------------- */

static void make_dev_certs(void)
{
    snprintf(certs, sizeof(certs), "%s/certs", fx.dir);
    kop_test_gen_certs(certs);
    char ca_file[600];
    snprintf(ca_file, sizeof(ca_file), "%s/ca.crt", certs);
    dev_ca_b64 = kop_test_file_base64(ca_file);
}

static void install_api(void)
{
    json_decref(api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    kop_test_myresource_crd, 201));
    char *vwc = NULL;
    int n = asprintf(
        &vwc,
        "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
        "\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"kop\"},\"webhooks\":[{"
        "\"name\":\"vmyresource.mygroup.example.com\",\"admissionReviewVersions\":[\"v1\"],"
        "\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\",\"timeoutSeconds\":5,"
        "\"matchPolicy\":\"Equivalent\",\"clientConfig\":{\"caBundle\":\"%s\",\"service\":{"
        "\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"path\":\"" VALIDATE_PATH
        "\",\"port\":443}},\"rules\":[{\"apiGroups\":[\"mygroup.example.com\"],\"apiVersions\":["
        "\"v1\"],\"operations\":[\"CREATE\",\"UPDATE\"],\"resources\":[\"myresources\"]}]}]}",
        dev_ca_b64);
    ck_assert_int_gt(n, 0);
    json_decref(api("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                    vwc, 201));
    free(vwc);
}

static void start_kop(void)
{
    char *endpoint = fsrv_url(&receiver);
    struct kop_test_argv a;
    kop_test_kop_argv(&a, fx.kubeconfig);
    kop_test_argv_add(&a, "--cert-dir", certs, "--webhook-port", "0", "--shutdown-delay", "0",
                      "--log-level", "debug", "--otlp-endpoint", endpoint, "--otlp-service-name",
                      "kop-under-test", "--otlp-flush-interval", "100ms", NULL);
    ck_assert_int_eq(kop_test_spawn(&kop, a.v), 0);
    free(endpoint);
    kop_running = true;
    metrics_port = kop_test_logged_port(&kop, "serving metrics", 15000);
    long port = kop_test_logged_port(&kop, "serving webhook", 15000);
    char svc[256];
    snprintf(svc, sizeof(svc),
             "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":"
             "\"127.0.0.1:%ld\"}",
             port);
    json_decref(api("POST", "/_kubesim/services", svc, 200));
    ck_assert_msg(kop_test_wait_for(&kop, 0, "\"msg\":\"starting controller\"", 15000, NULL) > 0,
                  "kop controller did not start");
}

static void setup(void)
{
    kop_test_scratch_init(&fx);
    make_dev_certs();
    spans = json_array();
    fsrv_start(&receiver, on_traces, NULL);
    char *args[] = {"--tracing", "--deployment-ready-delay", "100ms", NULL};
    kop_test_scratch_kubesim(&fx, &sim, TOKEN, args);
    install_api();
    start_kop();
}

static void teardown(void)
{
    if (kop_running) {
        int st = kop_test_stop(&kop, SIGTERM, 15000);
        kop_running = false;
        ck_assert_msg(st == 0, "kop exit status %d", st);
    }
    ck_assert_int_eq(kop_test_kubesim_stop(&sim, SIGTERM, 10000), 0);
    fsrv_stop(&receiver);
    json_decref(spans);
    spans = NULL;
    free(dev_ca_b64);
    dev_ca_b64 = NULL;
    kop_test_scratch_free(&fx);
}

/* ---- tests ----------------------------------------------------------------------------- */

struct want_span {
    const char *trace_id;
    int kind;
    const char *name;
};

static bool span_arrived(const void *arg)
{
    const struct want_span *w = arg;
    json_t *s = find_span(w->trace_id, w->kind, w->name);
    json_decref(s);
    return s != NULL;
}

START_TEST(test_tracing_webhook_span_is_child_of_apiserver_span)
{
    json_decref(api("POST", MYR_PATH,
                    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                    "\"metadata\":{\"name\":\"traced\"},\"spec\":{\"replicas\":1}}",
                    201));
    /* the traceparent kubesim sent on its call to the validating webhook */
    json_t *st = api("GET", "/_kubesim/stats", NULL, 200);
    json_t *tps = json_object_get(json_object_get(st, "webhooks"), "traceparents");
    const char *tp = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(tps, i, t)
    {
        /* the path as called, with ?timeout= */
        if (strncmp(sget(t, "path"), VALIDATE_PATH "?", strlen(VALIDATE_PATH) + 1) == 0)
            tp = sget(t, "traceparent");
    }
    ck_assert_msg(tp && strlen(tp) == 55, "no traceparent sent to the webhook: %s",
                  json_dumps(st, JSON_COMPACT));
    char trace_id[33], parent_id[17];
    snprintf(trace_id, sizeof(trace_id), "%.32s", tp + 3);
    snprintf(parent_id, sizeof(parent_id), "%.16s", tp + 36);
    json_decref(st);

    /* kop's SERVER span: the apiserver's trace, its span as parent */
    struct want_span w = {trace_id, 2, "POST " VALIDATE_PATH};
    ck_assert_msg(kop_test_eventually(span_arrived, &w, 30000), "no webhook span for trace %s",
                  trace_id);
    json_t *span = find_span(trace_id, 2, "POST " VALIDATE_PATH);
    ck_assert_str_eq(sget(span, "parentSpanId"), parent_id);
    const char *span_id = sget(span, "spanId");
    ck_assert_uint_eq(strlen(span_id), 16);
    ck_assert_str_ne(span_id, parent_id);
    ck_assert_str_eq(attr(span, "http.route"), VALIDATE_PATH);
    ck_assert_str_eq(attr(span, "http.request.method"), "POST");
    ck_assert_str_eq(service_name, "kop-under-test");

    /* kop's log line for that review carries the same ids */
    char needle[128];
    snprintf(needle, sizeof(needle), "\"traceID\":\"%s\",\"spanID\":\"%s\"", trace_id, span_id);
    char *line = NULL;
    ck_assert_msg(kop_test_wait_for(&kop, 0, needle, 15000, &line) > 0, "no log line with %s",
                  needle);
    ck_assert_msg(strstr(line, "\"msg\":\"admitted\"") && strstr(line, "\"admissionUID\""),
                  "not the review's line: %s", line);
    free(line);
    json_decref(span);
}
END_TEST

/* A reconcile span of MyResource "traced" with at least one CLIENT child;
 * a copy into *ret (may be NULL). */
static bool reconcile_with_children(json_t **ret)
{
    bool ok = false;
    size_t i, j;
    json_t *r, *c;
    pthread_mutex_lock(&spans_lock);
    json_array_foreach(spans, i, r)
    {
        if (json_integer_value(json_object_get(r, "kind")) != 1 ||
            strcmp(sget(r, "name"), "reconcile") != 0 ||
            strcmp(attr(r, "k8s.object.name"), "traced") != 0)
            continue;
        json_array_foreach(spans, j, c)
        {
            if (json_integer_value(json_object_get(c, "kind")) == 3 &&
                strcmp(sget(c, "traceId"), sget(r, "traceId")) == 0 &&
                strcmp(sget(c, "parentSpanId"), sget(r, "spanId")) == 0) {
                ok = true;
                break;
            }
        }
        if (ok) {
            if (ret)
                *ret = json_deep_copy(r);
            break;
        }
    }
    pthread_mutex_unlock(&spans_lock);
    return ok;
}

static bool reconcile_arrived(const void *arg)
{
    (void)arg;
    return reconcile_with_children(NULL);
}

START_TEST(test_tracing_reconcile_is_a_trace_with_client_children)
{
    json_decref(api("POST", MYR_PATH,
                    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                    "\"metadata\":{\"name\":\"traced\"},\"spec\":{\"replicas\":1}}",
                    201));
    ck_assert_msg(kop_test_eventually(reconcile_arrived, NULL, 30000),
                  "no reconcile span with CLIENT children");
    json_t *root = NULL;
    ck_assert(reconcile_with_children(&root));
    ck_assert_ptr_null(json_object_get(root, "parentSpanId")); /* a trace of its own */
    ck_assert_str_eq(attr(root, "k8s.namespace.name"), NS);
    const char *trace_id = sget(root, "traceId");

    /* the reconcile's log lines carry its ids ("created child" is info) */
    char needle[128];
    snprintf(needle, sizeof(needle), "\"traceID\":\"%s\",\"spanID\":\"%s\"", trace_id,
             sget(root, "spanId"));
    char *line = NULL;
    ck_assert_msg(kop_test_wait_for(&kop, 0, needle, 15000, &line) > 0, "no log line with %s",
                  needle);
    ck_assert_msg(strstr(line, "\"logger\":\"controller\"") &&
                      strstr(line, "\"MyResource\":{\"name\":\"traced\""),
                  "not the reconcile's line: %s", line);
    free(line);

    /* the children, and the traceparents kubesim received from kop */
    json_t *children = json_object();
    size_t i;
    json_t *s;
    pthread_mutex_lock(&spans_lock);
    json_array_foreach(spans, i, s)
    {
        if (json_integer_value(json_object_get(s, "kind")) == 3 &&
            strcmp(sget(s, "traceId"), trace_id) == 0 &&
            strcmp(sget(s, "parentSpanId"), sget(root, "spanId")) == 0)
            json_object_set(children, sget(s, "spanId"), s);
    }
    pthread_mutex_unlock(&spans_lock);
    ck_assert_uint_gt(json_object_size(children), 0);

    json_t *st = api("GET", "/_kubesim/stats?userAgent=kop/", NULL, 200);
    size_t matched = 0;
    json_array_foreach(json_object_get(st, "requests"), i, s)
    {
        const char *tp = sget(s, "traceparent");
        if (strlen(tp) != 55 || strncmp(tp + 3, trace_id, 32) != 0)
            continue;
        char sid[17];
        snprintf(sid, sizeof(sid), "%.16s", tp + 36);
        json_t *child = json_object_get(children, sid);
        ck_assert_msg(child, "kubesim got %s, which is no CLIENT span of the reconcile", tp);
        matched++;
    }
    /* every child span is one call kubesim received, with its traceparent */
    ck_assert_uint_eq(matched, json_object_size(children));
    json_decref(st);
    json_decref(children);
    json_decref(root);

    /* the exporter's counter */
    const struct kop_test_http_options o = {.timeout_s = 30};
    char *text = kop_test_scrape(&o, metrics_port);
    ck_assert(kop_test_metric_value(text, "kop_trace_spans_exported_total") > 0);
    ck_assert(kop_test_metric_value(text, "kop_trace_spans_dropped_total{reason=\"queue_full\"}") ==
              0);
    free(text);
}
END_TEST

static Suite *tracing_suite(void)
{
    Suite *s = suite_create("tracing");
    TCase *tc = tcase_create("trace");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_tracing_webhook_span_is_child_of_apiserver_span);
    tcase_add_test(tc, test_tracing_reconcile_is_a_trace_with_client_children);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(tracing_suite());
}
