/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/otlp.h: the ExportTraceServiceRequest JSON (hex ids,
 * integer kinds and status codes, nanosecond strings, the service.name
 * resource attribute), and the exporter against an in-test HTTP receiver:
 * spans arrive at <endpoint>/v1/traces; a full queue drops and counts
 * instead of waiting while an export hangs; a receiver answering 500 makes
 * the batch count as export_failed.
 */
#include "kop/otlp.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "fakesrv.h"
#include "kop/arena.h"
#include "kop/metrics.h"
#include "kubetest.h"
#include "testutil.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static struct kop_span *span_of(const char *name, enum kop_span_kind kind, bool child)
{
    struct kop_trace_ctx parent;
    ck_assert_int_eq(kop_trace_parse(TP, &parent), 0);
    struct kop_span *s = kop_span_start(name, kind, child ? &parent : NULL);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void null_sink(void *ud, struct kop_span *span)
{
    (void)ud;
    kop_span_free(span);
}

START_TEST(test_otlp_encode_shape)
{
    kop_trace_set_sink(null_sink, NULL); /* spans record attributes */
    struct kop_span *s[2];
    s[0] = span_of("POST /validate", KOP_SPAN_SERVER, true);
    kop_span_set_str(s[0], "http.request.method", "POST");
    kop_span_set_int(s[0], "http.response.status_code", 200);
    s[0]->start_ns = INT64_C(1700000000123456789);
    s[0]->end_ns = INT64_C(1700000000223456789);
    s[1] = span_of("reconcile", KOP_SPAN_INTERNAL, false);
    kop_span_set_status(s[1], KOP_SPAN_ERROR, "conflict");
    kop_trace_set_sink(NULL, NULL);

    char *body = NULL;
    ck_assert_int_eq(kop_otlp_encode(s, 2, "svc", NULL, &body), 0);
    json_error_t err;
    json_t *doc = json_loads(body, 0, &err);
    ck_assert_msg(doc, "not JSON: %s", body);
    json_t *rs = json_array_get(json_object_get(doc, "resourceSpans"), 0);
    json_t *ra = json_array_get(json_object_get(json_object_get(rs, "resource"), "attributes"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(ra, "key")), "service.name");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(ra, "value"), "stringValue")), "svc");
    json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(ss, "scope"), "name")),
                     "svc");
    json_t *spans = json_object_get(ss, "spans");
    ck_assert_uint_eq(json_array_size(spans), 2);

    json_t *a = json_array_get(spans, 0);
    ck_assert_str_eq(json_string_value(json_object_get(a, "traceId")),
                     "4bf92f3577b34da6a3ce929d0e0e4736");
    ck_assert_str_eq(json_string_value(json_object_get(a, "parentSpanId")), "00f067aa0ba902b7");
    char sid[17];
    kop_trace_hex(s[0]->ctx.span_id, 8, sid);
    ck_assert_str_eq(json_string_value(json_object_get(a, "spanId")), sid);
    ck_assert_str_eq(json_string_value(json_object_get(a, "name")), "POST /validate");
    ck_assert_int_eq(json_integer_value(json_object_get(a, "kind")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(a, "startTimeUnixNano")),
                     "1700000000123456789");
    ck_assert_str_eq(json_string_value(json_object_get(a, "endTimeUnixNano")),
                     "1700000000223456789");
    json_t *at = json_object_get(a, "attributes");
    ck_assert_uint_eq(json_array_size(at), 2);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(at, 1), "value"), "intValue")),
                     "200");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(a, "status"), "code")), 0);

    json_t *b = json_array_get(spans, 1);
    ck_assert_ptr_null(json_object_get(b, "parentSpanId"));
    ck_assert_int_eq(json_integer_value(json_object_get(b, "kind")), 1);
    ck_assert_uint_eq(strlen(json_string_value(json_object_get(b, "traceId"))), 32);
    ck_assert_str_ne(json_string_value(json_object_get(b, "traceId")),
                     "4bf92f3577b34da6a3ce929d0e0e4736");
    json_t *st = json_object_get(b, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")), "conflict");
    json_decref(doc);
    free(body);
    kop_span_free(s[0]);
    kop_span_free(s[1]);
}
END_TEST

/* ---- the exporter against a receiver ------------------------------------------------- */

struct receiver {
    pthread_mutex_t lock;
    int status; /* answer */
    atomic_int requests;
    atomic_bool hold; /* requests wait while set */
    atomic_int waiting;
    json_t *spans;   /* every span received */
    char path[4096]; /* last path */
};

static bool receive(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    struct receiver *rc = s->ud;
    atomic_fetch_add(&rc->waiting, 1);
    while (atomic_load(&rc->hold))
        kop_test_sleep_ms(5);
    json_t *doc = req->body ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
    json_t *spans = json_object_get(
        json_array_get(
            json_object_get(json_array_get(json_object_get(doc, "resourceSpans"), 0), "scopeSpans"),
            0),
        "spans");
    pthread_mutex_lock(&rc->lock);
    json_array_extend(rc->spans, spans);
    snprintf(rc->path, sizeof(rc->path), "%s", req->path);
    int status = rc->status;
    pthread_mutex_unlock(&rc->lock);
    json_decref(doc);
    atomic_fetch_add(&rc->requests, 1);
    return fsrv_reply(fd, status, NULL, "application/json", "{}");
}

static struct receiver rcv;
static struct fsrv srv;
static struct kop_metrics *reg;

static void rcv_setup(void)
{
    memset(&rcv, 0, sizeof(rcv));
    pthread_mutex_init(&rcv.lock, NULL);
    rcv.status = 200;
    rcv.spans = json_array();
    fsrv_start(&srv, receive, &rcv);
    reg = kop_metrics_new(false);
}

static void rcv_teardown(void)
{
    atomic_store(&rcv.hold, false);
    fsrv_stop(&srv);
    json_decref(rcv.spans);
    kop_metrics_free(reg);
}

static bool got_spans(const void *arg)
{
    size_t want = *(const size_t *)arg;
    pthread_mutex_lock(&rcv.lock);
    bool ok = json_array_size(rcv.spans) >= want;
    pthread_mutex_unlock(&rcv.lock);
    return ok;
}

static bool receiver_waiting(const void *arg)
{
    (void)arg;
    return atomic_load(&rcv.waiting) >= 1;
}

static double metric(const char *name_labels)
{
    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(kop_metrics_render(reg, &text, &len), 0);
    double v = kop_test_metric_value(text, name_labels);
    free(text);
    return v;
}

static struct kop_otlp *exporter(size_t queue, size_t batch, int64_t flush_ms)
{
    char *url = fsrv_url(&srv);
    char endpoint[300];
    snprintf(endpoint, sizeof(endpoint), "%s/", url); /* a trailing slash is fine */
    free(url);
    const struct kop_otlp_options o = {.endpoint = endpoint,
                                       .service_name = "svc",
                                       .queue_size = queue,
                                       .batch_size = batch,
                                       .flush_interval_ms = flush_ms,
                                       .metrics = reg,
                                       .metric_prefix = "t"};
    struct kop_otlp *e = NULL;
    ck_assert_int_eq(kop_otlp_new(&o, &e), 0);
    return e;
}

START_TEST(test_otlp_exports_to_v1_traces)
{
    struct kop_otlp *e = exporter(0, 0, 50);
    kop_trace_set_sink(kop_otlp_sink, e);
    for (int i = 0; i < 3; i++) {
        struct kop_span *s = span_of("GET", KOP_SPAN_CLIENT, true);
        kop_span_set_int(s, "i", i);
        kop_span_end(s);
    }
    size_t want = 3;
    ck_assert(kop_test_eventually(got_spans, &want, 20000));
    kop_trace_set_sink(NULL, NULL);
    ck_assert_int_eq(kop_otlp_shutdown(e, 5000), 0);
    ck_assert_str_eq(rcv.path, "/v1/traces");
    ck_assert_uint_eq(json_array_size(rcv.spans), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(rcv.spans, 0), "traceId")),
                     "4bf92f3577b34da6a3ce929d0e0e4736");
    ck_assert(metric("t_trace_spans_exported_total") == 3);
    ck_assert(metric("t_trace_spans_dropped_total{reason=\"queue_full\"}") == 0);
    kop_otlp_free(e);
}
END_TEST

START_TEST(test_otlp_full_queue_drops_without_waiting)
{
    /* batch of 1: the first span goes out at once and hangs in the
     * receiver; the queue (2) then fills and the rest are dropped */
    atomic_store(&rcv.hold, true);
    struct kop_otlp *e = exporter(2, 1, 3600000);
    kop_otlp_submit(e, span_of("first", KOP_SPAN_SERVER, true));
    ck_assert(kop_test_eventually(receiver_waiting, NULL, 20000));
    for (int i = 0; i < 5; i++)
        kop_otlp_submit(e, span_of("more", KOP_SPAN_SERVER, true));
    ck_assert(metric("t_trace_spans_dropped_total{reason=\"queue_full\"}") == 3);
    atomic_store(&rcv.hold, false);
    size_t want = 3;
    ck_assert(kop_test_eventually(got_spans, &want, 20000));
    ck_assert_int_eq(kop_otlp_shutdown(e, 5000), 0);
    ck_assert(metric("t_trace_spans_exported_total") == 3);
    /* after shutdown: dropped, counted */
    kop_otlp_submit(e, span_of("late", KOP_SPAN_SERVER, true));
    ck_assert(metric("t_trace_spans_dropped_total{reason=\"shutdown\"}") == 1);
    kop_otlp_free(e);
}
END_TEST

START_TEST(test_otlp_failed_export_counted)
{
    rcv.status = 500;
    struct kop_otlp *e = exporter(0, 2, 3600000);
    kop_otlp_submit(e, span_of("a", KOP_SPAN_SERVER, true));
    kop_otlp_submit(e, span_of("b", KOP_SPAN_SERVER, true));
    size_t want = 2;
    ck_assert(kop_test_eventually(got_spans, &want, 20000));
    ck_assert_int_eq(kop_otlp_shutdown(e, 5000), 0);
    ck_assert(metric("t_trace_spans_dropped_total{reason=\"export_failed\"}") == 2);
    ck_assert(metric("t_trace_spans_exported_total") == 0);
    kop_otlp_free(e);
}
END_TEST

START_TEST(test_otlp_rejects_bad_options)
{
    struct kop_otlp *e = NULL;
    struct kop_otlp_options o = {.endpoint = "collector:4318", .service_name = "svc"};
    ck_assert_int_eq(kop_otlp_new(&o, &e), -EINVAL);
    o.endpoint = "http://collector:4318";
    o.service_name = "";
    ck_assert_int_eq(kop_otlp_new(&o, &e), -EINVAL);
    ck_assert_ptr_null(e);
}
END_TEST

static Suite *otlp_suite(void)
{
    Suite *s = suite_create("otlp");
    TCase *tc = tcase_create("encode");
    tcase_add_test(tc, test_otlp_encode_shape);
    tcase_add_test(tc, test_otlp_rejects_bad_options);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("export");
    tcase_add_checked_fixture(te, rcv_setup, rcv_teardown);
    tcase_set_timeout(te, 120);
    tcase_add_test(te, test_otlp_exports_to_v1_traces);
    tcase_add_test(te, test_otlp_full_queue_drops_without_waiting);
    tcase_add_test(te, test_otlp_failed_export_counted);
    suite_add_tcase(s, te);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* as kop runs: jansson allocates through the arena hook, so a body
     * from jansson's allocator freed with free() would crash here */
    kop_arena_json_install();
    return kop_test_run(otlp_suite());
}
