/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the API client against a small HTTP server started inside the
 * test: paths and verbs, User-Agent and Authorization, HTTP status ->
 * errno mapping with the Kubernetes Status kept, Retry-After retries
 * (bounded), token file rotation, rate limiting, metrics, transport errors,
 * watch streaming with cancel and idle timeout, exec credential plugins
 * (the helper script of tests/data/exec-plugin; also end to end against
 * kubesim, whose token is rotated to force a 401), and client certificates
 * (kubeconfig -data blobs and files, EC and RSA keys) against a TLS server
 * that requires one (kop_tls with a client CA).
 */
#include "kop/client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "kop/execcred.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/json.h"
#include "kop/ratelimit.h"
#include "kop/tls.h"
#include "kop/http.h"
#include "kop/trace.h"
#include "testutil.h"

#include "fakesrv.h"
#include "kubetest.h"

static const char st_ae[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
    "\"services \\\"mock-2\\\" already exists\",\"reason\":\"AlreadyExists\",\"details\":{"
    "\"name\":\"mock-2\",\"kind\":\"services\"},\"code\":409}\n";
static const char st_conflict[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
    "\"Operation cannot be fulfilled on resourcequotas \\\"quota\\\": the object has been "
    "modified; please apply your changes to the latest version and try again\",\"reason\":"
    "\"Conflict\",\"details\":{\"name\":\"quota\",\"kind\":\"resourcequotas\"},\"code\":409}";

/* What the server saw, and a few knobs. */
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fsrv_req last;
static char last_body[4096];
static int hits;
static int flaky_left;         /* answers 429 with Retry-After while > 0 */
static char expect_token[128]; /* 401 unless Authorization matches */

static void note(const struct fsrv_req *req)
{
    pthread_mutex_lock(&seen_lock);
    last = *req;
    last.body = NULL;
    snprintf(last_body, sizeof(last_body), "%.*s", (int)req->body_len, req->body ? req->body : "");
    hits++;
    pthread_mutex_unlock(&seen_lock);
}

static bool handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    note(req);
    const char *p = req->path;
    if (expect_token[0]) {
        char want[160];
        snprintf(want, sizeof(want), "Bearer %s", expect_token);
        if (strcmp(req->auth, want) != 0)
            return fsrv_reply(fd, 401, NULL, NULL,
                              "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":"
                              "\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}");
    }
    if (strstr(p, "/flaky")) {
        pthread_mutex_lock(&seen_lock);
        bool fail = flaky_left-- > 0;
        pthread_mutex_unlock(&seen_lock);
        if (fail)
            return fsrv_reply(fd, 429, "Retry-After: 1\r\n", "text/plain",
                              "Too many requests, please try again later.\n");
        return fsrv_reply(fd, 200, NULL, NULL, "{\"ok\":true}");
    }
    if (strstr(p, "/always503"))
        return fsrv_reply(fd, 503, "Retry-After: 1\r\n", NULL,
                          "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"the request "
                          "has been made before all known HTTP paths have been installed, please "
                          "try again\",\"reason\":\"ServiceUnavailable\",\"code\":503}");
    if (strstr(p, "/dated503")) {
        /* Retry-After as an HTTP-date (RFC 9110 10.2.3), 30 s ahead */
        char hdr[128];
        time_t t = time(NULL) + 30;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(hdr, sizeof(hdr), "Retry-After: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        return fsrv_reply(fd, 503, hdr, NULL,
                          "{\"kind\":\"Status\",\"message\":\"busy\",\"reason\":"
                          "\"ServiceUnavailable\",\"code\":503}");
    }
    if (strstr(p, "/e401"))
        return fsrv_reply(fd, 401, NULL, NULL,
                          "{\"kind\":\"Status\",\"message\":\"Unauthorized\",\"reason\":"
                          "\"Unauthorized\",\"code\":401}");
    if (strstr(p, "/e403"))
        return fsrv_reply(
            fd, 403, NULL, NULL,
            "{\"kind\":\"Status\",\"message\":\"services is forbidden: User "
            "\\\"x\\\" cannot list resource\",\"reason\":\"Forbidden\",\"code\":403}");
    if (strstr(p, "/e404"))
        return fsrv_reply(fd, 404, NULL, NULL,
                          "{\"kind\":\"Status\",\"message\":\"services \\\"e404\\\" not found\","
                          "\"reason\":\"NotFound\",\"code\":404}");
    if (strstr(p, "/e409ae"))
        return fsrv_reply(fd, 409, NULL, NULL, st_ae);
    if (strstr(p, "/e409c"))
        return fsrv_reply(fd, 409, NULL, NULL, st_conflict);
    if (strstr(p, "/e410"))
        return fsrv_reply(fd, 410, NULL, NULL,
                          "{\"kind\":\"Status\",\"message\":\"too old resource version: 1 (5)\","
                          "\"reason\":\"Expired\",\"code\":410}");
    if (strstr(p, "/e422long")) {
        /* A message longer than kop_api_status.message whose cut falls
         * inside a character: 510 ASCII bytes, then e-acutes (2 bytes). */
        char body[2048];
        int o = snprintf(body, sizeof(body), "{\"kind\":\"Status\",\"message\":\"");
        for (int k = 0; k < 510; k++)
            body[o++] = 'a';
        for (int k = 0; k < 40; k++)
            o += snprintf(body + o, sizeof(body) - (size_t)o, "\xc3\xa9");
        snprintf(body + o, sizeof(body) - (size_t)o, "\",\"reason\":\"Invalid\",\"code\":422}");
        return fsrv_reply(fd, 422, NULL, NULL, body);
    }
    if (strstr(p, "/e422"))
        return fsrv_reply(fd, 422, NULL, NULL,
                          "{\"kind\":\"Status\",\"message\":\"FooBar \\\"fb3\\\" is invalid: "
                          "spec.prop2: Required value\",\"reason\":\"Invalid\",\"code\":422}");
    if (strstr(p, "/e502page"))
        /* a proxy's page in Latin-1, with a control byte and a CR */
        return fsrv_reply(fd, 502, NULL, "text/html",
                          "Bad gateway: caf\xe9 \x01"
                          "down\r\n<html>more</html>\n");
    if (strstr(p, "/e429"))
        return fsrv_reply(fd, 429, NULL, "text/plain",
                          "Too many requests, please try again later.\n");
    if (strstr(p, "/e500"))
        return fsrv_reply(fd, 500, NULL, NULL,
                          "{\"kind\":\"Status\",\"message\":\"Internal error occurred: boom\","
                          "\"reason\":\"InternalError\",\"code\":500}");
    if (strstr(p, "/namespaces/liststream/")) {
        /* a list sent in pieces that cut items and tokens */
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        fsrv_write(fd, head, strlen(head));
        const char *parts[] = {
            "{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"metadata\":{\"res",
            "ourceVersion\":\"77\",\"continue\":\"next\"},\"items\":[{\"metadata\"",
            ":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"},\"x\":\"]}\\\"\"}",
            ",{\"metadata\":{\"name\":\"c\"}}]}"};
        for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
            fsrv_chunk(fd, parts[i], strlen(parts[i]));
        return fsrv_write(fd, "0\r\n\r\n", 5);
    }
    if (strstr(p, "/namespaces/hugeitem/")) {
        /* one item of 65 MiB (a long annotation), sent in 1 MiB chunks */
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        fsrv_write(fd, head, strlen(head));
        const char *open = "{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"metadata\":{"
                           "\"resourceVersion\":\"1\"},\"items\":[{\"metadata\":{\"name\":"
                           "\"big\",\"annotations\":{\"a\":\"";
        bool ok = fsrv_chunk(fd, open, strlen(open));
        char *mib = malloc(1 << 20);
        memset(mib, 'x', 1 << 20);
        for (int i = 0; ok && i < 65; i++)
            ok = fsrv_chunk(fd, mib, 1 << 20);
        free(mib);
        const char *close_ = "\"}}}]}";
        if (ok)
            ok = fsrv_chunk(fd, close_, strlen(close_));
        if (ok)
            fsrv_write(fd, "0\r\n\r\n", 5);
        return false;
    }
    if (strstr(p, "/namespaces/badlist/"))
        return fsrv_reply(fd, 200, NULL, NULL, "{\"items\":{\"not\":\"a list\"}}");
    if (strstr(p, "/notjson"))
        return fsrv_reply(fd, 200, NULL, NULL, "{not json");
    if (strstr(p, "/hang")) {
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
        return false;
    }
    if (strstr(p, "watch=true")) {
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        fsrv_write(fd, head, strlen(head));
        const char *ev = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n";
        fsrv_chunk(fd, ev, strlen(ev));
        if (strstr(p, "end=1")) {
            fsrv_write(fd, "0\r\n\r\n", 5);
            return true;
        }
        /* Then silence until the client goes away. */
        char b[64];
        while (recv(fd, b, sizeof(b), 0) > 0)
            ;
        return false;
    }
    /* Echo: method, path and body back as an object. */
    json_t *o = json_pack("{s:s, s:s, s:s%}", "method", req->method, "path", req->path, "body",
                          req->body ? req->body : "", req->body_len);
    char *txt = json_dumps(o, JSON_COMPACT);
    bool ok =
        fsrv_reply(fd, req->method[0] == 'P' && req->method[1] == 'O' ? 201 : 200, NULL, NULL, txt);
    free(txt);
    json_decref(o);
    return ok;
}

static struct fsrv srv;
static struct kop_client *client;
static struct kop_metrics *metrics;
static char *tmpdir;

static const struct kop_resource svc = {"", "v1", "services", true};
static const struct kop_resource deploy = {"apps", "v1", "deployments", true};
static const struct kop_resource ns_res = {NULL, "v1", "namespaces", false};

static struct kop_client *make_client(const char *token, const char *token_file, int64_t reread_ms,
                                      struct kop_ratelimit *rl)
{
    char *url = fsrv_url(&srv);
    struct kop_kubeconfig kc = {.server = url,
                                .token = (char *)token,
                                .token_file = (char *)token_file,
                                .namespace = (char *)"dflt"};
    struct kop_client_options o = {.config = &kc,
                                   .metrics = metrics,
                                   .ratelimit = rl,
                                   .max_retries = 3,
                                   .max_retry_wait_ms = 20,
                                   .token_reread_ms = reread_ms,
                                   .timeout_ms = 5000};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    free(url);
    return c;
}

static void setup(void)
{
    hits = 0;
    flaky_left = 0;
    expect_token[0] = '\0';
    metrics = kop_metrics_new(false);
    fsrv_start(&srv, handler, NULL);
    client = make_client("s3cret", NULL, 0, NULL);
    tmpdir = kop_test_tmpdir();
}

static void teardown(void)
{
    kop_client_free(client);
    client = NULL;
    fsrv_stop(&srv);
    kop_metrics_free(metrics);
    kop_test_rmdir(tmpdir);
    free(tmpdir);
}

START_TEST(test_client_paths)
{
    char p[256];
    ck_assert_int_eq(kop_client_path(&svc, "ns", "a", NULL, p, sizeof(p)), 0);
    ck_assert_str_eq(p, "/api/v1/namespaces/ns/services/a");
    ck_assert_int_eq(kop_client_path(&deploy, "ns", "a", "status", p, sizeof(p)), 0);
    ck_assert_str_eq(p, "/apis/apps/v1/namespaces/ns/deployments/a/status");
    ck_assert_int_eq(kop_client_path(&deploy, NULL, NULL, NULL, p, sizeof(p)), 0);
    ck_assert_str_eq(p, "/apis/apps/v1/deployments");
    ck_assert_int_eq(kop_client_path(&ns_res, "ignored", "kube-system", NULL, p, sizeof(p)), 0);
    ck_assert_str_eq(p, "/api/v1/namespaces/kube-system");
    ck_assert_int_eq(kop_client_path(&svc, "ns", "../x", NULL, p, sizeof(p)), -EINVAL);
    ck_assert_int_eq(kop_client_path(&svc, "n/s", "x", NULL, p, sizeof(p)), -EINVAL);
    ck_assert_int_eq(kop_client_path(&svc, "ns", "x", NULL, p, 10), -ENAMETOOLONG);
    snprintf(p, sizeof(p), "/x");
    ck_assert_int_eq(kop_client_query_add(p, sizeof(p), "labelSelector", "a=b,c in (d)"), 0);
    ck_assert_int_eq(kop_client_query_add(p, sizeof(p), "limit", "5"), 0);
    ck_assert_str_eq(p, "/x?labelSelector=a%3Db%2Cc%20in%20%28d%29&limit=5");
}
END_TEST

START_TEST(test_client_get_headers)
{
    json_t *o = NULL;
    struct kop_api_status st;
    ck_assert_int_eq(kop_client_get(client, &deploy, "ns1", "web", &st, &o), 0);
    ck_assert_int_eq(st.code, 200);
    ck_assert_str_eq(json_string_value(json_object_get(o, "path")),
                     "/apis/apps/v1/namespaces/ns1/deployments/web");
    json_decref(o);
    ck_assert_str_eq(last.method, "GET");
    ck_assert_str_eq(last.auth, "Bearer s3cret");
    /* client-go's default: the program's name, no version, the platform */
    ck_assert_msg(strncmp(last.user_agent, "test_client/v0.0.0 (linux/", 26) == 0, "%s",
                  last.user_agent);
    ck_assert_ptr_nonnull(strstr(last.user_agent, ") kubernetes/unknown"));
    ck_assert_str_eq(last.user_agent, kop_client_user_agent(client));
    ck_assert_str_eq(kop_client_namespace(client), "dflt");
}
END_TEST

static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kop_span *spans[8];
static int n_spans;

static void span_sink(void *ud, struct kop_span *span)
{
    (void)ud;
    pthread_mutex_lock(&spans_lock);
    if (n_spans < 8)
        spans[n_spans++] = span;
    else
        kop_span_free(span);
    pthread_mutex_unlock(&spans_lock);
}

START_TEST(test_client_traceparent_under_current_span)
{
    json_t *o = NULL;
    /* no current span: no header, no span */
    ck_assert_int_eq(kop_client_get(client, &deploy, "ns1", "web", NULL, &o), 0);
    json_decref(o);
    ck_assert_str_eq(last.traceparent, "");

    n_spans = 0;
    kop_trace_set_sink(span_sink, NULL);
    struct kop_span *root = kop_span_start("reconcile", KOP_SPAN_INTERNAL, NULL);
    ck_assert_ptr_nonnull(root);
    kop_trace_set_current(&root->ctx);
    ck_assert_int_eq(kop_client_get(client, &deploy, "ns1", "web", NULL, &o), 0);
    json_decref(o);
    char root_tp[KOP_TRACEPARENT_SIZE];
    ck_assert_int_eq(kop_trace_format(&root->ctx, root_tp, sizeof(root_tp)), 0);
    /* the header names the same trace and a new span: the CLIENT span */
    ck_assert_uint_eq(strlen(last.traceparent), 55);
    ck_assert_int_eq(strncmp(last.traceparent, root_tp, 36), 0);
    ck_assert_int_ne(strcmp(last.traceparent, root_tp), 0);
    ck_assert_int_eq(n_spans, 1);
    struct kop_span *s = spans[0];
    ck_assert_int_eq(s->kind, KOP_SPAN_CLIENT);
    ck_assert_str_eq(s->name, "GET");
    ck_assert(s->has_parent);
    ck_assert_mem_eq(s->parent_span_id, root->ctx.span_id, 8);
    char tp[KOP_TRACEPARENT_SIZE];
    kop_trace_format(&s->ctx, tp, sizeof(tp));
    ck_assert_str_eq(tp, last.traceparent);
    json_t *attrs = kop_span_attributes_json(s);
    char *a = json_dumps(attrs, JSON_COMPACT);
    json_decref(attrs);
    ck_assert_msg(strstr(a, "\"http.response.status_code\",\"value\":{\"intValue\":\"200\"}") &&
                      strstr(a, "/apis/apps/v1/namespaces/ns1/deployments/web"),
                  "%s", a);
    free(a);
    ck_assert_int_eq(s->status, KOP_SPAN_UNSET);

    /* an error answer: the span says so */
    ck_assert_int_eq(kop_client_get(client, &svc, "x", "e404", NULL, &o), -ENOENT);
    ck_assert_int_eq(n_spans, 2);
    ck_assert_int_eq(spans[1]->status, KOP_SPAN_ERROR);

    kop_trace_set_current(NULL);
    kop_trace_set_sink(NULL, NULL);
    kop_span_free(root);
    for (int i = 0; i < n_spans; i++)
        kop_span_free(spans[i]);
}
END_TEST

START_TEST(test_client_verbs)
{
    json_t *o = NULL;
    json_t *obj = json_pack("{s:{s:s}, s:{s:i}}", "metadata", "name", "web", "spec", "replicas", 2);
    ck_assert_int_eq(kop_client_create(client, &deploy, "ns1", obj, NULL, &o), 0);
    ck_assert_str_eq(last.method, "POST");
    ck_assert_str_eq(last.path, "/apis/apps/v1/namespaces/ns1/deployments");
    ck_assert_str_eq(last.content_type, "application/json");
    ck_assert_ptr_nonnull(strstr(last_body, "\"replicas\":2"));
    json_decref(o);

    ck_assert_int_eq(kop_client_update(client, &deploy, "ns1", NULL, obj, NULL, NULL), 0);
    ck_assert_str_eq(last.method, "PUT");
    ck_assert_str_eq(last.path, "/apis/apps/v1/namespaces/ns1/deployments/web");

    ck_assert_int_eq(kop_client_update_status(client, &deploy, "ns1", "web", obj, NULL, NULL), 0);
    ck_assert_str_eq(last.path, "/apis/apps/v1/namespaces/ns1/deployments/web/status");

    json_t *patch = json_pack("{s:{s:i}}", "spec", "replicas", 3);
    ck_assert_int_eq(kop_client_patch(client, &deploy, "ns1", "web", patch, NULL, NULL), 0);
    ck_assert_str_eq(last.method, "PATCH");
    ck_assert_str_eq(last.content_type, "application/merge-patch+json");
    ck_assert_str_eq(last_body, "{\"spec\":{\"replicas\":3}}");
    ck_assert_int_eq(kop_client_patch_status(client, &deploy, "ns1", "web", patch, NULL, NULL), 0);
    ck_assert_str_eq(last.path, "/apis/apps/v1/namespaces/ns1/deployments/web/status");
    json_decref(patch);

    struct kop_delete_options dopt = {.propagation_policy = "Background",
                                      .precondition_uid = "u-1"};
    ck_assert_int_eq(kop_client_delete(client, &deploy, "ns1", "web", &dopt, NULL, NULL), 0);
    ck_assert_str_eq(last.method, "DELETE");
    json_t *body = json_loads(last_body, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(body, "propagationPolicy")), "Background");
    ck_assert_str_eq(kop_json_path_str(body, "preconditions.uid"), "u-1");
    json_decref(body);
    ck_assert_int_eq(kop_client_delete(client, &deploy, "ns1", "web", NULL, NULL, NULL), 0);
    ck_assert_uint_eq(strlen(last_body), 0);

    struct kop_list_options lo = {.label_selector = "app.kubernetes.io/managed-by=kop",
                                  .field_selector = "metadata.name=x",
                                  .limit = 500,
                                  .continue_token = "abc=",
                                  .resource_version = "12"};
    ck_assert_int_eq(kop_client_list(client, &svc, NULL, &lo, NULL, &o), 0);
    ck_assert_str_eq(last.path,
                     "/api/v1/services?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dkop"
                     "&fieldSelector=metadata.name%3Dx&limit=500&continue=abc%3D"
                     "&resourceVersion=12");
    json_decref(o);

    struct kop_request rq = {.method = "GET", .path = "/version"};
    ck_assert_int_eq(kop_client_request(client, &rq, NULL, &o), 0);
    ck_assert_str_eq(last.path, "/version");
    json_decref(o);
    json_decref(obj);
}
END_TEST

START_TEST(test_client_error_mapping)
{
    static const struct {
        const char *name;
        int err;
        int code;
        const char *reason;
        const char *msg_part;
    } cases[] = {
        {"e401", -EACCES, 401, "Unauthorized", "Unauthorized"},
        {"e403", -EPERM, 403, "Forbidden", "is forbidden"},
        {"e404", -ENOENT, 404, "NotFound", "not found"},
        {"e409ae", -EEXIST, 409, "AlreadyExists", "already exists"},
        {"e409c", -EBUSY, 409, "Conflict", "the object has been modified"},
        {"e410", -ESTALE, 410, "Expired", "too old resource version"},
        {"e422", -EINVAL, 422, "Invalid", "Required value"},
        {"e429", -EAGAIN, 429, "", "Too many requests"},
        {"e500", -EIO, 500, "InternalError", "boom"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kop_api_status st;
        json_t *o = NULL;
        int r = kop_client_get(client, &svc, "ns", cases[i].name, &st, &o);
        ck_assert_msg(r == cases[i].err, "%s: %d", cases[i].name, r);
        ck_assert_ptr_null(o);
        ck_assert_int_eq(st.code, cases[i].code);
        ck_assert_str_eq(st.reason, cases[i].reason);
        ck_assert_msg(strstr(st.message, cases[i].msg_part), "%s: %s", cases[i].name, st.message);
        ck_assert_int_eq(st.attempts, 1); /* no Retry-After: no retry */
    }
    /* Messages go into conditions, Events and log lines: they stay valid
     * UTF-8 whatever the server sent (a cut inside a character, Latin-1). */
    struct kop_api_status st2;
    json_t *o2 = NULL;
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "e422long", &st2, &o2), -EINVAL);
    json_t *m = json_string(st2.message);
    ck_assert_msg(m, "not UTF-8: %s", st2.message);
    json_decref(m);
    ck_assert_uint_eq(strlen(st2.message), 510);
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "e502page", &st2, &o2), -EIO);
    ck_assert_str_eq(st2.message, "Bad gateway: caf\xef\xbf\xbd  down");
    ck_assert_int_eq(kop_client_errno(504, NULL), -ETIMEDOUT);
    ck_assert_int_eq(kop_client_errno(400, NULL), -EINVAL);
    ck_assert_int_eq(kop_client_errno(204, NULL), 0);
    ck_assert_int_eq(kop_client_errno(418, NULL), -EPROTO);

    struct kop_api_status st;
    json_t *o = NULL;
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "notjson", &st, &o), -EBADMSG);
}
END_TEST

START_TEST(test_client_retry_after)
{
    struct kop_api_status st;
    json_t *o = NULL;
    flaky_left = 2;
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "flaky", &st, &o), 0);
    ck_assert_int_eq(st.attempts, 3);
    ck_assert(json_is_true(json_object_get(o, "ok")));
    json_decref(o);
    /* Bounded: max_retries 3 -> 4 attempts, then the error. */
    hits = 0;
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "always503", &st, NULL), -EIO);
    ck_assert_int_eq(st.attempts, 4);
    ck_assert_int_eq(hits, 4);
    ck_assert_int_eq(st.retry_after_s, 1);
    ck_assert_str_eq(st.reason, "ServiceUnavailable");
    /* An HTTP-date is honoured as the time until that date (it was
     * taken as one second). The test client caps each wait at 20 ms. */
    hits = 0;
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "dated503", &st, NULL), -EIO);
    ck_assert_int_eq(hits, 4);
    ck_assert_msg(st.retry_after_s >= 28 && st.retry_after_s <= 31, "retry_after_s %d",
                  st.retry_after_s);

    /* Metrics: one child per code/method/host/cluster (no cluster given:
     * "local"). */
    struct kop_metric_family *f = kop_metrics_register(
        metrics, KOP_METRIC_COUNTER, "rest_client_requests_total", "x",
        (const char *const[]){"code", "method", "host", "cluster", NULL}, NULL, 0);
    char host[64];
    snprintf(host, sizeof(host), "127.0.0.1:%d", srv.port);
    ck_assert_int_eq((int)kop_metric_value(kop_metric_child(f, "503", "GET", host, "local")), 8);
    ck_assert_int_eq((int)kop_metric_value(kop_metric_child(f, "429", "GET", host, "local")), 2);
    ck_assert_int_eq((int)kop_metric_value(kop_metric_child(f, "200", "GET", host, "local")), 1);
}
END_TEST

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
}

START_TEST(test_client_token_rotation)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/token", tmpdir);
    write_file(path, "tok-one\n");
    struct kop_client *c = make_client(NULL, path, 50, NULL);
    snprintf(expect_token, sizeof(expect_token), "tok-one");
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    ck_assert_str_eq(last.auth, "Bearer tok-one");
    /* Rotated on disk: picked up after the re-read period, no restart. */
    write_file(path, "tok-two");
    struct timespec ts = {0, 80 * 1000000};
    nanosleep(&ts, NULL);
    snprintf(expect_token, sizeof(expect_token), "tok-two");
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    ck_assert_str_eq(last.auth, "Bearer tok-two");
    kop_client_free(c);

    /* Long period, but a 401 re-reads the file once and retries. */
    c = make_client(NULL, path, 3600 * 1000, NULL);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    write_file(path, "tok-three");
    snprintf(expect_token, sizeof(expect_token), "tok-three");
    struct kop_api_status st;
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), 0);
    ck_assert_str_eq(last.auth, "Bearer tok-three");
    kop_client_free(c);
    /* A wrong static token stays a 401 (-EACCES). */
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "x", &st, NULL), -EACCES);
    ck_assert_int_eq(st.code, 401);
}
END_TEST

/* A token file is trimmed as client-go trims it (strings.TrimSpace), and
 * one whose token holds a control byte is not used: "tok\r\nImpersonate-
 * User: admin" went out as an Authorization header plus a header of the
 * file's choosing, and a NUL cut the token short. */
START_TEST(test_client_token_file_trimmed_and_control_bytes_refused)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/token", tmpdir);
    write_file(path, " \t tok-four \r\n");
    struct kop_client *c = make_client(NULL, path, 3600 * 1000, NULL);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    ck_assert_str_eq(last.auth, "Bearer tok-four");
    kop_client_free(c);

    write_file(path, "tok\r\nImpersonate-User: admin\n");
    c = make_client(NULL, path, 3600 * 1000, NULL);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    ck_assert_str_eq(last.auth, "");
    kop_client_free(c);
}
END_TEST

/* A token file is read whole up to KOP_CLIENT_MAX_TOKEN_FILE bytes; a
 * larger one is not used, and the log says so with its path and the limit
 * (it used to be cut at 16383 bytes without a word, and the cut token got
 * 401s that nothing explained). */
START_TEST(test_client_token_file_over_limit_refused)
{
    char path[1024], logp[1100];
    snprintf(path, sizeof(path), "%s/token", tmpdir);
    snprintf(logp, sizeof(logp), "%s/log", tmpdir);
    const size_t max = KOP_CLIENT_MAX_TOKEN_FILE;
    char *tok = malloc(max + 2);
    ck_assert_ptr_nonnull(tok);

    /* Past the old cut, within the limit: sent whole. */
    const size_t big = 40000;
    memset(tok, 'a', big);
    tok[big] = '\n';
    tok[big + 1] = '\0';
    write_file(path, tok);
    struct kop_client *c = make_client(NULL, path, 3600 * 1000, NULL);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    ck_assert_uint_eq(last.auth_len, strlen("Bearer ") + big);
    kop_client_free(c);

    /* One byte over: no token at all, and an error line. */
    memset(tok, 'b', max + 1);
    tok[max + 1] = '\0';
    write_file(path, tok);
    free(tok);
    int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, fd);
    c = make_client(NULL, path, 3600 * 1000, NULL);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    kop_client_free(c);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, 2);
    close(fd);
    ck_assert_uint_eq(last.auth_len, 0);
    ck_assert_str_eq(last.auth, "");
    char *log = kop_test_read_file(logp, NULL);
    ck_assert_ptr_nonnull(log);
    char want[1200];
    snprintf(want, sizeof(want), "token file %s is larger than %zu bytes; not used", path, max);
    ck_assert_msg(strstr(log, want), "log lacks \"%s\": %s", want, log);
    snprintf(want, sizeof(want), "\"limitBytes\":%zu", max);
    ck_assert_msg(strstr(log, want), "log lacks %s: %s", want, log);
    ck_assert_ptr_null(strstr(log, "bbbb")); /* never a byte of the token */
    free(log);
}
END_TEST

/* An exec plugin configuration: the helper in MODE ARG, recording its runs
 * in tmpdir. */
struct exec_cfg {
    struct kop_exec_config ec;
    char *args[2];
    struct kop_exec_env env[1];
    char *helper;
};

static void exec_cfg_init(struct exec_cfg *x, const char *mode, const char *arg)
{
    memset(x, 0, sizeof(*x));
    x->helper = kop_test_data_path("exec-plugin/kop-exec-helper");
    x->args[0] = (char *)mode;
    x->args[1] = (char *)arg;
    x->env[0] = (struct kop_exec_env){.name = (char *)"KOP_HELPER_DIR", .value = tmpdir};
    x->ec = (struct kop_exec_config){.command = x->helper,
                                     .args = x->args,
                                     .n_args = arg ? 2 : 1,
                                     .env = x->env,
                                     .n_env = 1,
                                     .api_version = (char *)"client.authentication.k8s.io/v1",
                                     .interactive_mode = KOP_EXEC_INTERACTIVE_NEVER};
}

static struct kop_client *make_exec_client(const char *server, const char *ca_file,
                                           struct exec_cfg *x)
{
    struct kop_kubeconfig kc = {
        .server = (char *)server, .ca_file = (char *)ca_file, .exec = &x->ec};
    struct kop_client_options o = {
        .config = &kc, .metrics = metrics, .max_retries = 3, .timeout_ms = 10000};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    return c;
}

/* How many times the helper ran (lines in tmpdir/runs). */
static int helper_runs(void)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/runs", tmpdir);
    char *s = kop_test_read_file(path, NULL);
    int n = 0;
    for (char *p = s; p && *p; p++)
        n += *p == '\n';
    free(s);
    return n;
}

START_TEST(test_client_exec_plugin_token)
{
    char tok[1024];
    snprintf(tok, sizeof(tok), "%s/exec-token", tmpdir);
    write_file(tok, "exec-1");
    struct exec_cfg x;
    exec_cfg_init(&x, "token-file", tok);
    char *url = fsrv_url(&srv);
    struct kop_client *c = make_exec_client(url, NULL, &x);
    snprintf(expect_token, sizeof(expect_token), "exec-1");
    struct kop_api_status st;
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), 0);
    ck_assert_str_eq(last.auth, "Bearer exec-1");
    ck_assert_int_eq(helper_runs(), 1);
    /* Cached: no run per request. */
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), 0);
    ck_assert_int_eq(helper_runs(), 1);

    /* The server stops accepting it: 401, the plugin runs again, the
     * request is retried once with the new token. */
    write_file(tok, "exec-2");
    snprintf(expect_token, sizeof(expect_token), "exec-2");
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), 0);
    ck_assert_int_eq(st.attempts, 2);
    ck_assert_str_eq(last.auth, "Bearer exec-2");
    ck_assert_int_eq(helper_runs(), 2);

    /* A credential the server keeps rejecting: one re-run, then the 401. */
    snprintf(expect_token, sizeof(expect_token), "nobody");
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), -EACCES);
    ck_assert_int_eq(st.code, 401);
    ck_assert_int_eq(st.attempts, 2);
    ck_assert_int_eq(helper_runs(), 3);
    kop_client_free(c);

    /* A failing plugin: no request is sent, -ENOKEY with its message. */
    struct exec_cfg f;
    exec_cfg_init(&f, "fail", NULL);
    c = make_exec_client(url, NULL, &f);
    pthread_mutex_lock(&seen_lock);
    int before = hits;
    pthread_mutex_unlock(&seen_lock);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), -ENOKEY);
    ck_assert_ptr_nonnull(strstr(st.message, "getting credentials: "));
    ck_assert_ptr_nonnull(strstr(st.message, "exited with status 3"));
    pthread_mutex_lock(&seen_lock);
    ck_assert_int_eq(hits, before);
    pthread_mutex_unlock(&seen_lock);
    kop_client_free(c);
    free(f.helper);
    free(x.helper);
    free(url);
}
END_TEST

struct exec_req {
    struct kop_client *c;
    struct kop_client_cancel *cancel;
    int r;
};

static void *exec_req_thread(void *ud)
{
    struct exec_req *e = ud;
    const struct kop_request req = {
        .method = "GET", .path = "/api/v1/namespaces/ns/services/x", .cancel = e->cancel};
    e->r = kop_client_request(e->c, &req, NULL, NULL);
    return NULL;
}

static bool helper_ran(const void *arg)
{
    (void)arg;
    return helper_runs() > 0;
}

START_TEST(test_client_exec_plugin_cancel)
{
    /* A request waiting for a plugin that hangs is cancellable (informer
     * stop, shutdown): the plugin is killed, -ECANCELED. */
    struct exec_cfg x;
    exec_cfg_init(&x, "slow", NULL);
    char *url = fsrv_url(&srv);
    struct kop_kubeconfig kc = {.server = url, .exec = &x.ec};
    struct kop_client_options o = {.config = &kc, .metrics = metrics, .exec_timeout_ms = 600000};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    struct exec_req e = {.c = c, .cancel = kop_client_cancel_new()};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, exec_req_thread, &e), 0);
    ck_assert(kop_test_eventually(helper_ran, NULL, 30000));
    kop_client_cancel_fire(e.cancel);
    pthread_join(th, NULL);
    ck_assert_int_eq(e.r, -ECANCELED);
    kop_client_cancel_free(e.cancel);
    kop_client_free(c);
    free(x.helper);
    free(url);
}
END_TEST

START_TEST(test_client_exec_plugin_kubesim)
{
    /* End to end: kubesim requires a bearer token, only the plugin has it. */
    char ca[1024], tok[1024];
    snprintf(ca, sizeof(ca), "%s/ca.crt", tmpdir);
    snprintf(tok, sizeof(tok), "%s/exec-token", tmpdir);
    write_file(tok, "sim-token-1");
    struct kop_test_kubesim sim;
    const struct kop_test_kubesim_options so = {.ca = ca, .token = "sim-token-1"};
    kop_test_kubesim_start(&sim, &so);
    struct exec_cfg x;
    exec_cfg_init(&x, "token-file", tok);
    struct kop_client *c = make_exec_client(sim.url, ca, &x);
    struct kop_api_status st;
    json_t *list = NULL;
    ck_assert_int_eq(kop_client_list(c, &ns_res, NULL, NULL, &st, &list), 0);
    ck_assert(json_is_array(json_object_get(list, "items")));
    json_decref(list);
    ck_assert_int_eq(helper_runs(), 1);

    /* Rotate kubesim's token (with the current one); the helper now hands
     * out the new one. The next request gets a 401, re-runs the plugin and
     * succeeds. */
    json_t *body = json_pack("{s:s}", "token", "sim-token-2");
    const struct kop_request rot = {.method = "POST", .path = "/_kubesim/token", .body = body};
    ck_assert_int_eq(kop_client_request(c, &rot, &st, NULL), 0);
    json_decref(body);
    write_file(tok, "sim-token-2");
    ck_assert_int_eq(kop_client_list(c, &ns_res, NULL, NULL, &st, &list), 0);
    json_decref(list);
    ck_assert_int_eq(st.attempts, 2);
    ck_assert_int_eq(helper_runs(), 2);
    kop_client_free(c);
    /* The old token is really refused now: 401 and the apiserver's Status. */
    struct kop_kubeconfig old = {.server = sim.url, .ca_file = ca, .token = (char *)"sim-token-1"};
    const struct kop_client_options oo = {.config = &old, .metrics = metrics, .max_retries = -1};
    ck_assert_int_eq(kop_client_new(&oo, &c), 0);
    ck_assert_int_eq(kop_client_list(c, &ns_res, NULL, NULL, &st, NULL), -EACCES);
    ck_assert_int_eq(st.code, 401);
    ck_assert_str_eq(st.reason, "Unauthorized");
    kop_client_free(c);
    kop_test_kubesim_stop(&sim, SIGTERM, 10000);
    free(x.helper);
}
END_TEST

START_TEST(test_client_ratelimited)
{
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(20, 1, &rl), 0);
    struct kop_client *c = make_client(NULL, NULL, 0, rl);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", NULL, NULL), 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    /* 4 requests at 20 qps, burst 1: at least 3 intervals of 50 ms. */
    ck_assert_msg(ms >= 145, "took %.1f ms", ms);
    ck_assert_int_eq(hits, 4);
    kop_client_free(c);
    kop_ratelimit_free(rl);
}
END_TEST

START_TEST(test_client_transport_errors)
{
    /* Refused: a port nobody listens on (the server's, after it stopped). */
    struct fsrv tmp;
    fsrv_start(&tmp, handler, NULL);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", tmp.port);
    fsrv_stop(&tmp);
    struct kop_kubeconfig kc = {.server = url};
    struct kop_client_options o = {.config = &kc, .metrics = metrics, .timeout_ms = 300};
    struct kop_client *c;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    struct kop_api_status st;
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "x", &st, NULL), -ECONNREFUSED);
    ck_assert_int_eq(st.code, 0);
    kop_client_free(c);
    /* Timeout: the server never answers within 300 ms. */
    char *u = fsrv_url(&srv);
    kc.server = u;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    ck_assert_int_eq(kop_client_get(c, &svc, "ns", "hang", &st, NULL), -ETIMEDOUT);
    kop_client_free(c);
    free(u);
    /* No server in the configuration. */
    struct kop_kubeconfig empty = {0};
    o.config = &empty;
    ck_assert_int_eq(kop_client_new(&o, &c), -EINVAL);
}
END_TEST

struct wctx {
    char buf[4096];
    size_t len;
};

static int collect(void *ud, const char *data, size_t len)
{
    struct wctx *w = ud;
    size_t n = len < sizeof(w->buf) - 1 - w->len ? len : sizeof(w->buf) - 1 - w->len;
    memcpy(w->buf + w->len, data, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return 0;
}

/* A stream handler that gives up (a line over its limit). */
static int too_long(void *ud, const char *data, size_t len)
{
    (void)ud;
    (void)data;
    (void)len;
    return -EMSGSIZE;
}

struct cancel_arg {
    struct kop_client_cancel *cc;
};

static void *fire_later(void *arg)
{
    struct cancel_arg *a = arg;
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
    kop_client_cancel_fire(a->cc);
    return NULL;
}

START_TEST(test_client_watch_stream)
{
    struct wctx w = {.len = 0};
    struct kop_api_status st;
    /* A stream that ends: 0 and the bytes. */
    ck_assert_int_eq(
        kop_client_watch(client, "/api/v1/pods?watch=true&end=1", collect, &w, NULL, 0, &st), 0);
    ck_assert_ptr_nonnull(strstr(w.buf, "\"ADDED\""));
    ck_assert_int_eq(st.code, 200);
    /* Idle: no byte for 150 ms -> -ETIMEDOUT. */
    w.len = 0;
    ck_assert_int_eq(
        kop_client_watch(client, "/api/v1/pods?watch=true", collect, &w, NULL, 150, &st),
        -ETIMEDOUT);
    ck_assert_ptr_nonnull(strstr(w.buf, "\"ADDED\""));
    /* A time limit ends an open stream with -ETIME, idle limit or not. */
    w.len = 0;
    ck_assert_int_eq(kop_client_watch_limit(client, "/api/v1/pods?watch=true", NULL, collect, &w,
                                            NULL, 0, 150, &st),
                     -ETIME);
    ck_assert_ptr_nonnull(strstr(w.buf, "\"ADDED\""));
    ck_assert_int_eq(st.code, 200);
    /* The handler's error is returned, and the message says what it was
     * (not libcurl's "Failure writing output to destination"). */
    ck_assert_int_eq(
        kop_client_watch(client, "/api/v1/pods?watch=true&end=1", too_long, NULL, NULL, 0, &st),
        -EMSGSIZE);
    ck_assert_msg(strstr(st.message, "Message too long") && !strstr(st.message, "writing output"),
                  "message: %s", st.message);
    /* Cancelled from another thread while blocked. */
    struct cancel_arg a = {kop_client_cancel_new()};
    pthread_t th;
    pthread_create(&th, NULL, fire_later, &a);
    ck_assert_int_eq(kop_client_watch(client, "/api/v1/pods?watch=true", collect, &w, a.cc, 0, &st),
                     -ECANCELED);
    pthread_join(th, NULL);
    ck_assert(kop_client_cancel_fired(a.cc));
    /* Fired stays fired until reset. */
    ck_assert_int_eq(kop_client_watch(client, "/api/v1/pods?watch=true", collect, &w, a.cc, 0, &st),
                     -ECANCELED);
    kop_client_cancel_free(a.cc);
    /* A watch refused with a Status: mapped, body decoded. */
    ck_assert_int_eq(kop_client_watch(client, "/e410?watch=1", collect, &w, NULL, 0, &st), -ESTALE);
    ck_assert_str_eq(st.reason, "Expired");
}
END_TEST

struct names {
    char buf[256];
    int n;
};

static int collect_name(void *ud, json_t *item)
{
    struct names *nm = ud;
    const char *name =
        json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));
    size_t l = strlen(nm->buf);
    snprintf(nm->buf + l, sizeof(nm->buf) - l, "%s,", name ? name : "?");
    nm->n++;
    return nm->n == 100 ? -ECANCELED : 0;
}

START_TEST(test_client_list_stream)
{
    struct kop_api_status st;
    struct names nm = {.n = 0};
    json_t *meta = NULL;
    struct kop_list_options lo = {.limit = 500};
    ck_assert_int_eq(kop_client_list_stream(client, &svc, "liststream", &lo, collect_name, &nm,
                                            NULL, &st, &meta),
                     0);
    ck_assert_str_eq(nm.buf, "a,b,c,");
    ck_assert_str_eq(json_string_value(json_object_get(meta, "resourceVersion")), "77");
    ck_assert_str_eq(json_string_value(json_object_get(meta, "continue")), "next");
    ck_assert_ptr_nonnull(strstr(last.path, "limit=500"));
    json_decref(meta);
    /* An item over the limit ends the list with -EMSGSIZE, without
     * holding it: 64 MiB by default, or the caller's max_item_bytes. */
    memset(&nm, 0, sizeof(nm));
    ck_assert_int_eq(
        kop_client_list_stream(client, &svc, "hugeitem", NULL, collect_name, &nm, NULL, &st, NULL),
        -EMSGSIZE);
    ck_assert_int_eq(nm.n, 0);
    ck_assert_msg(strstr(st.message, "larger than 67108864 bytes"), "message: %s", st.message);
    struct kop_list_options small = {.max_item_bytes = 30};
    ck_assert_int_eq(kop_client_list_stream(client, &svc, "liststream", &small, collect_name, &nm,
                                            NULL, &st, NULL),
                     -EMSGSIZE);
    ck_assert_msg(strstr(st.message, "larger than 30 bytes"), "message: %s", st.message);
    /* retried on 429 with Retry-After, like any request; no items */
    flaky_left = 2;
    memset(&nm, 0, sizeof(nm));
    ck_assert_int_eq(
        kop_client_list_stream(client, &svc, "flaky", NULL, collect_name, &nm, NULL, &st, NULL), 0);
    ck_assert_int_eq(st.attempts, 3);
    ck_assert_int_eq(nm.n, 0);
    /* not a list, not JSON, an error Status */
    ck_assert_int_eq(
        kop_client_list_stream(client, &svc, "badlist", NULL, collect_name, &nm, NULL, &st, NULL),
        -EBADMSG);
    ck_assert_int_eq(
        kop_client_list_stream(client, &svc, "notjson", NULL, collect_name, &nm, NULL, &st, NULL),
        -EBADMSG);
    ck_assert_int_eq(
        kop_client_list_stream(client, &svc, "e404", NULL, collect_name, &nm, NULL, &st, NULL),
        -ENOENT);
    ck_assert_str_eq(st.reason, "NotFound");
}
END_TEST

struct abort_arg {
    struct kop_client *c;
};

static void *abort_later(void *arg)
{
    struct abort_arg *a = arg;
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kop_client_abort(a->c);
    return NULL;
}

/* An abortable client: kop_client_abort() cuts the request in flight of
 * any thread and fails later ones until reset; other clients ignore it. */
START_TEST(test_client_abort_all_requests)
{
    struct kop_kubeconfig kc = {0};
    char *url = fsrv_url(&srv);
    kc.server = url;
    struct kop_client *ac = NULL;
    const struct kop_client_options o = {.config = &kc, .abortable = true, .metrics = metrics};
    ck_assert_int_eq(kop_client_new(&o, &ac), 0);
    struct kop_api_status st;
    json_t *obj = NULL;
    struct abort_arg a = {ac};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, abort_later, &a), 0);
    ck_assert_int_eq(kop_client_get(ac, &svc, "ns", "hang", &st, &obj), -ECANCELED);
    pthread_join(th, NULL);
    ck_assert_int_eq(kop_client_get(ac, &svc, "ns", "x", &st, &obj), -ECANCELED);
    kop_client_abort_reset(ac);
    ck_assert_int_eq(kop_client_get(ac, &svc, "ns", "x", &st, &obj), 0);
    json_decref(obj);
    obj = NULL;
    kop_client_abort(client); /* not abortable: nothing happens */
    ck_assert_int_eq(kop_client_get(client, &svc, "ns", "x", &st, &obj), 0);
    json_decref(obj);
    kop_client_free(ac);
    free(url);
}
END_TEST

struct mt_arg {
    int ok;
};

static void *mt_worker(void *arg)
{
    struct mt_arg *a = arg;
    for (int i = 0; i < 20; i++) {
        json_t *o = NULL;
        if (kop_client_get(client, &svc, "ns", "x", NULL, &o) == 0 && o)
            a->ok++;
        json_decref(o);
    }
    return NULL;
}

/* ---- client certificates ------------------------------------------------------- */

/* A TLS server that requires a client certificate signed by its CA (kop's
 * own webhook front, kop_tls with client_ca_file) and answers one GET. */
struct mtls {
    char *dir;
    struct kop_metrics *m;
    struct kop_http_server *http;
    struct kop_tls *tls;
    char url[64];
};

static void mtls_get(void *userdata, const struct kop_http_request *req,
                     struct kop_http_response *resp)
{
    static const char obj[] =
        "{\"kind\":\"Service\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"mtls\"}}";
    resp->body = strdup(obj);
    resp->body_len = strlen(obj);
}

static const struct kop_http_route mtls_routes[] = {
    {.path = "/api/v1/namespaces/ns/services/mtls", .methods = KOP_HTTP_GET, .fn = mtls_get},
};

/* other_ip: the serving certificate names localhost and 10.0.0.1 only, not
 * the 127.0.0.1 the client connects to. */
static void mtls_start_sans(struct mtls *t, bool other_ip)
{
    memset(t, 0, sizeof(*t));
    t->dir = kop_test_tmpdir();
    const char *root = getenv("KOP_SOURCE_ROOT");
    ck_assert_ptr_nonnull(root);
    /* The serving pair (gen-certs.sh), and two client certificates from
     * the same CA: an EC key in SEC1 PEM ("EC PRIVATE KEY") and an RSA key
     * in PKCS#8 PEM ("PRIVATE KEY"), both with clientAuth. */
    char cmd[4096];
    snprintf(
        cmd, sizeof(cmd),
        "set -e; cd '%s'; '%s/scripts/gen-certs.sh' . >/dev/null;"
        " printf 'extendedKeyUsage=clientAuth\\n' >client.ext;"
        " openssl ecparam -name prime256v1 -genkey -noout -out ec.key;"
        " openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa.key 2>/dev/null;"
        " for k in ec rsa; do"
        "  openssl req -new -key $k.key -subj \"/O=system:masters/CN=$k-user\" -out $k.csr;"
        "  openssl x509 -req -in $k.csr -CA ca.crt -CAkey ca.key -CAcreateserial"
        "   -CAserial ca.srl -days 1 -sha256 -extfile client.ext -out $k.crt 2>/dev/null;"
        " done;"
        " if [ %d = 1 ]; then"
        "  printf 'subjectAltName=DNS:localhost,IP:10.0.0.1\\n' >other.ext;"
        "  openssl req -new -key tls.key -subj /CN=localhost -out other.csr;"
        "  openssl x509 -req -in other.csr -CA ca.crt -CAkey ca.key -CAserial ca.srl"
        "   -days 1 -sha256 -extfile other.ext -out tls.crt 2>/dev/null;"
        " fi",
        t->dir, root, other_ip ? 1 : 0);
    ck_assert_int_eq(system(cmd), 0);
    char ca[1024];
    snprintf(ca, sizeof(ca), "%s/ca.crt", t->dir);
    t->m = kop_metrics_new(false);
    const struct kop_http_server_options ho = {.no_listen = true, .name = "mtls", .metrics = t->m};
    ck_assert_int_eq(kop_http_server_new(&ho, mtls_routes, 1, &t->http), 0);
    ck_assert_int_eq(kop_http_server_start(t->http), 0);
    const struct kop_tls_options to = {.host = "127.0.0.1",
                                       .cert_dir = t->dir,
                                       .client_ca_file = ca,
                                       .http = t->http,
                                       .metrics = t->m};
    ck_assert_int_eq(kop_tls_new(&to, &t->tls), 0);
    ck_assert_int_eq(kop_tls_start(t->tls), 0);
    snprintf(t->url, sizeof(t->url), "https://127.0.0.1:%u", (unsigned)kop_tls_port(t->tls));
}

static void mtls_start(struct mtls *t)
{
    mtls_start_sans(t, false);
}

static void mtls_stop(struct mtls *t)
{
    kop_tls_free(t->tls);
    kop_http_server_free(t->http);
    kop_metrics_free(t->m);
    kop_test_rmdir(t->dir);
    free(t->dir);
}

static char *mtls_file(const struct mtls *t, const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", t->dir, name);
    char *data = kop_test_read_file(path, len);
    ck_assert_ptr_nonnull(data);
    return data;
}

/* GET the one object with kc (the server and CA filled in here); returns
 * the client's result, and on success checks the object came back. */
static int mtls_try(const struct mtls *t, struct kop_kubeconfig *kc)
{
    size_t ca_len;
    char *ca = mtls_file(t, "ca.crt", &ca_len);
    kc->server = (char *)t->url;
    kc->ca_data = ca;
    kc->ca_data_len = ca_len;
    struct kop_client_options o = {.config = kc, .metrics = metrics, .timeout_ms = 5000};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    struct kop_api_status st;
    json_t *obj = NULL;
    int r = kop_client_get(c, &svc, "ns", "mtls", &st, &obj);
    if (r != 0) /* the transport error, for the refusals and for a failure */
        fprintf(stderr, "mtls: %s (%d): %s\n", t->url, r, st.message);
    if (r == 0) {
        ck_assert_ptr_nonnull(obj);
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "name")), "mtls");
    }
    json_decref(obj);
    kop_client_free(c);
    free(ca);
    return r;
}

START_TEST(test_client_certificate_data)
{
    /* client-certificate-data / client-key-data: CURLOPT_SSLCERT_BLOB and
     * CURLOPT_SSLKEY_BLOB, as decoded (no NUL counted in the length), with
     * every TLS backend libcurl may have: with mbedTLS the key blob must
     * carry its NUL (pem_key_blob) or it does not parse. */
    struct mtls t;
    mtls_start(&t);
    const char *keys[] = {"ec", "rsa"};
    for (size_t i = 0; i < 2; i++) {
        char name[16];
        size_t cert_len, key_len;
        snprintf(name, sizeof(name), "%s.crt", keys[i]);
        char *cert = mtls_file(&t, name, &cert_len);
        snprintf(name, sizeof(name), "%s.key", keys[i]);
        char *key = mtls_file(&t, name, &key_len);
        struct kop_kubeconfig kc = {
            .cert_data = cert, .cert_data_len = cert_len, .key_data = key, .key_data_len = key_len};
        ck_assert_msg(mtls_try(&t, &kc) == 0, "%s key as -data", keys[i]);
        free(cert);
        free(key);
    }
    mtls_stop(&t);
}
END_TEST

START_TEST(test_client_certificate_files)
{
    /* client-certificate / client-key: CURLOPT_SSLCERT and CURLOPT_SSLKEY. */
    struct mtls t;
    mtls_start(&t);
    char cert[1024], key[1024];
    snprintf(cert, sizeof(cert), "%s/rsa.crt", t.dir);
    snprintf(key, sizeof(key), "%s/rsa.key", t.dir);
    struct kop_kubeconfig kc = {.cert_file = cert, .key_file = key};
    ck_assert_int_eq(mtls_try(&t, &kc), 0);
    mtls_stop(&t);
}
END_TEST

START_TEST(test_client_certificate_ip_san)
{
    /* A server reached by address: its certificate must name that address
     * (an iPAddress SAN); 10.0.0.1 and localhost do not do for 127.0.0.1,
     * whatever the TLS backend (with mbedTLS, verify_ip_san only clears the
     * mismatch for an equal address). The matching case is every other
     * test here: gen-certs.sh names IP:127.0.0.1. */
    struct mtls t;
    mtls_start_sans(&t, true);
    size_t cert_len, key_len;
    char *cert = mtls_file(&t, "ec.crt", &cert_len);
    char *key = mtls_file(&t, "ec.key", &key_len);
    struct kop_kubeconfig kc = {
        .cert_data = cert, .cert_data_len = cert_len, .key_data = key, .key_data_len = key_len};
    ck_assert_int_eq(mtls_try(&t, &kc), -EPROTO);
    free(cert);
    free(key);
    mtls_stop(&t);
}
END_TEST

START_TEST(test_client_certificate_required)
{
    /* The server refuses the handshake without a client certificate, and
     * with one whose key is not its own: the client's request fails. */
    struct mtls t;
    mtls_start(&t);
    struct kop_kubeconfig none = {0};
    ck_assert_int_ne(mtls_try(&t, &none), 0);
    size_t cert_len, key_len;
    char *cert = mtls_file(&t, "ec.crt", &cert_len);
    char *key = mtls_file(&t, "rsa.key", &key_len);
    struct kop_kubeconfig wrong = {
        .cert_data = cert, .cert_data_len = cert_len, .key_data = key, .key_data_len = key_len};
    ck_assert_int_ne(mtls_try(&t, &wrong), 0);
    free(cert);
    free(key);
    mtls_stop(&t);
}
END_TEST

START_TEST(test_client_threads)
{
    /* One easy handle per thread, connections reused: 4 threads x 20
     * requests over at most a handful of connections. */
    pthread_t th[4];
    struct mt_arg a[4] = {{0}};
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, mt_worker, &a[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].ok, 20);
    }
    ck_assert_int_le(atomic_load(&srv.accepted), 8);
}
END_TEST

static Suite *client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_client_paths);
    tcase_add_test(tc, test_client_get_headers);
    tcase_add_test(tc, test_client_traceparent_under_current_span);
    tcase_add_test(tc, test_client_verbs);
    tcase_add_test(tc, test_client_error_mapping);
    tcase_add_test(tc, test_client_retry_after);
    tcase_add_test(tc, test_client_token_rotation);
    tcase_add_test(tc, test_client_token_file_trimmed_and_control_bytes_refused);
    tcase_add_test(tc, test_client_token_file_over_limit_refused);
    tcase_add_test(tc, test_client_ratelimited);
    tcase_add_test(tc, test_client_transport_errors);
    tcase_add_test(tc, test_client_watch_stream);
    tcase_add_test(tc, test_client_list_stream);
    tcase_add_test(tc, test_client_abort_all_requests);
    tcase_add_test(tc, test_client_threads);
    tcase_add_test(tc, test_client_exec_plugin_token);
    tcase_add_test(tc, test_client_exec_plugin_kubesim);
    tcase_add_test(tc, test_client_exec_plugin_cancel);
    tcase_add_test(tc, test_client_certificate_data);
    tcase_add_test(tc, test_client_certificate_files);
    tcase_add_test(tc, test_client_certificate_required);
    tcase_add_test(tc, test_client_certificate_ip_san);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = kop_test_run(client_suite());
    curl_global_cleanup();
    return r;
}
