/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim against its contract (docs/testing.md §2.2): a real kubesim process on a
 * kernel-chosen port, spoken to over HTTPS with libcurl, the generated CA
 * and a bearer token. Covers authentication, CRUD with the apiserver's
 * Status bodies, optimistic concurrency, selectors and paging, watches
 * (resume, bookmarks, selector transitions, 410 after compaction, dropped
 * watches), garbage collection, finalizers, the status subresource, CRD
 * registration with schema defaults, the Deployment controller, injected
 * faults (with resource, group and namespace filters), request statistics
 * (filtered by User-Agent), the run-time webhook service map
 * (/_kubesim/services, against two small TLS webhooks) and metadata-only
 * lists, gets and watches (PartialObjectMetadata).
 */
#include "fakehook.h"
#include "kubetest.h"
#include "testutil.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "kubesim-test-token"

static struct kop_test_kubesim sim;
static char *tmpdir;
static char *ca_path;
static char base_url[128];

static struct kop_test_resp request_ex(const char *method, const char *path, const char *ctype,
                                       const char *body, const char *token, const char *extra);

/* The length of the next request body when it is binary (else -1: strlen). */
static long next_body_len = -1;

static struct kop_test_resp request(const char *method, const char *path, const char *ctype,
                                    const char *body, const char *token)
{
    return request_ex(method, path, ctype, body, token, NULL);
}

/* extra: one more request header ("Accept: ..."), or NULL. */
static struct kop_test_resp request_ex(const char *method, const char *path, const char *ctype,
                                       const char *body, const char *token, const char *extra)
{
    struct kop_test_resp r;
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", base_url, path);
    const struct kop_test_http_options o = {
        .ca = ca_path,
        .token = token ? token : TOKEN,
        .ctype = ctype ? ctype : "application/json",
        .header = extra,
        .timeout_s = 20,
        .body_len = body && next_body_len >= 0 ? (size_t)next_body_len : 0};
    next_body_len = -1;
    kop_test_request(&o, method, url, body, &r);
    return r;
}

static json_t *request_json(const char *method, const char *path, const char *body, long want_code)
{
    struct kop_test_resp r = request(method, path, NULL, body, NULL);
    ck_assert_msg(r.code == want_code, "%s %s: got %ld want %ld: %s", method, path, r.code,
                  want_code, r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(v);
    kop_test_resp_free(&r);
    return v;
}

/* GET path: the object, or NULL when the answer is not a 200. @ref new */
static json_t *get_or_null(const char *path)
{
    struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
    json_t *v = r.code == 200 ? json_loads(r.body, 0, NULL) : NULL;
    kop_test_resp_free(&r);
    return v;
}

static const char *jpath(const json_t *v, const char *a, const char *b)
{
    const json_t *x = json_object_get(v, a);
    if (b)
        x = json_object_get(x, b);
    return json_string_value(x);
}

/* POST body as a ConfigMap in "default"; the test fails unless it is created. */
static void create_cm(const char *body)
{
    json_decref(request_json("POST", "/api/v1/namespaces/default/configmaps", body, 201));
}

/* PATCH path with a JSON merge patch; the test fails unless the answer is want_code. */
static void merge_patch(const char *path, const char *body, long want_code)
{
    struct kop_test_resp r = request("PATCH", path, "application/merge-patch+json", body, NULL);
    ck_assert_int_eq(r.code, want_code);
    kop_test_resp_free(&r);
}

/* The next page of "default"'s ConfigMaps, two a page, from continue token cont. */
static void continue_path(char *path, size_t len, const char *cont)
{
    char *esc = curl_easy_escape(NULL, cont, 0);
    snprintf(path, len, "/api/v1/namespaces/default/configmaps?limit=2&continue=%s", esc);
    curl_free(esc);
}

/* The metadata.resourceVersion of the list at path (200) into rv. */
static void list_rv(const char *path, char *rv, size_t len)
{
    json_t *l = request_json("GET", path, NULL, 200);
    snprintf(rv, len, "%s", jpath(l, "metadata", "resourceVersion"));
    json_decref(l);
}

static void start_sim(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tmpdir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
    size_t n = strlen(tmpdir) + 16;
    ca_path = malloc(n);
    snprintf(ca_path, n, "%s/ca.pem", tmpdir);
    char *kc = malloc(n + 8);
    snprintf(kc, n + 8, "%s/kubeconfig", tmpdir);
    char *args[] = {
        "--deployment-ready-delay", "100ms", "--bookmark-interval", "200ms", "--seed", "7", NULL};
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0",
                                               .kubeconfig = kc,
                                               .ca = ca_path,
                                               .token = TOKEN,
                                               .args = args,
                                               .lenient_fields = true};
    kop_test_kubesim_start(&sim, &o);
    snprintf(base_url, sizeof(base_url), "%s", sim.url);
    /* The kubeconfig has the server and the CA data. */
    char *cfg = kop_test_read_file(kc, NULL);
    ck_assert_ptr_nonnull(cfg);
    ck_assert_ptr_nonnull(strstr(cfg, base_url));
    ck_assert_ptr_nonnull(strstr(cfg, "certificate-authority-data: "));
    ck_assert_ptr_nonnull(strstr(cfg, "token: " TOKEN));
    free(cfg);
    free(kc);
}

static void stop_sim(void)
{
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    free(ca_path);
    curl_global_cleanup();
}

/* ---- tests ------------------------------------------------------------------- */

START_TEST(test_kubesim_unauthorized)
{
    struct kop_test_resp r = request("GET", "/api/v1/namespaces", NULL, NULL, "wrong");
    ck_assert_int_eq(r.code, 401);
    ck_assert_str_eq(r.body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                             "\"status\":\"Failure\",\"message\":\"Unauthorized\",\"reason\":"
                             "\"Unauthorized\",\"code\":401}\n");
    kop_test_resp_free(&r);
    r = request("GET", "/no/such/path", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 404);
    ck_assert_str_eq(r.body, "404 page not found\n");
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_discovery)
{
    json_t *v = request_json("GET", "/api/v1", NULL, 200);
    ck_assert_str_eq(jpath(v, "kind", NULL), "APIResourceList");
    ck_assert_ptr_null(json_object_get(v, "apiVersion"));
    json_decref(v);
    v = request_json("GET", "/apis/apps/v1", NULL, 200);
    ck_assert_str_eq(jpath(v, "groupVersion", NULL), "apps/v1");
    json_decref(v);
    v = request_json("GET", "/version", NULL, 200);
    ck_assert_str_eq(jpath(v, "gitVersion", NULL), "v1.32.3");
    json_decref(v);
    v = request_json("GET", "/api/v1/namespaces/kube-system", NULL, 200);
    ck_assert_str_eq(jpath(v, "kind", NULL), "Namespace");
    json_decref(v);
}
END_TEST

START_TEST(test_kubesim_crud_and_conflicts)
{
    const char *cm =
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"cm1\"},"
        "\"data\":{\"a\":\"1\"}}";
    json_t *created = request_json("POST", "/api/v1/namespaces/default/configmaps", cm, 201);
    const char *rv = jpath(created, "metadata", "resourceVersion");
    ck_assert_ptr_nonnull(rv);
    ck_assert_ptr_nonnull(jpath(created, "metadata", "uid"));
    ck_assert_ptr_nonnull(jpath(created, "metadata", "creationTimestamp"));

    struct kop_test_resp r =
        request("POST", "/api/v1/namespaces/default/configmaps", NULL, cm, NULL);
    ck_assert_int_eq(r.code, 409);
    ck_assert_str_eq(r.body,
                     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                     "\"Failure\",\"message\":\"configmaps \\\"cm1\\\" already exists\","
                     "\"reason\":\"AlreadyExists\",\"details\":{\"name\":\"cm1\",\"kind\":"
                     "\"configmaps\"},\"code\":409}\n");
    kop_test_resp_free(&r);

    /* Stale resourceVersion -> 409 Conflict with the apiserver's message. */
    json_t *upd = json_deep_copy(created);
    json_object_set_new(json_object_get(upd, "data"), "a", json_string("2"));
    char *body = json_dumps(upd, JSON_COMPACT); /* test-side serialization */
    json_t *updated = request_json("PUT", "/api/v1/namespaces/default/configmaps/cm1", body, 200);
    ck_assert_str_ne(jpath(updated, "metadata", "resourceVersion"), rv);
    r = request("PUT", "/api/v1/namespaces/default/configmaps/cm1", NULL, body, NULL);
    ck_assert_int_eq(r.code, 409);
    ck_assert_ptr_nonnull(strstr(r.body,
                                 "\"message\":\"Operation cannot be fulfilled on configmaps "
                                 "\\\"cm1\\\": the object has been modified; please apply "
                                 "your changes to the latest version and try again\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"reason\":\"Conflict\""));
    kop_test_resp_free(&r);
    free(body);

    /* A no-op merge patch does not bump the resourceVersion. */
    r = request("PATCH", "/api/v1/namespaces/default/configmaps/cm1",
                "application/merge-patch+json", "{\"data\":{\"a\":\"2\"}}", NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, jpath(updated, "metadata", "resourceVersion")));
    kop_test_resp_free(&r);

    r = request("GET", "/api/v1/namespaces/default/services/missing", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 404);
    ck_assert_str_eq(r.body,
                     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                     "\"Failure\",\"message\":\"services \\\"missing\\\" not found\","
                     "\"reason\":\"NotFound\",\"details\":{\"name\":\"missing\",\"kind\":"
                     "\"services\"},\"code\":404}\n");
    kop_test_resp_free(&r);

    r = request("POST", "/api/v1/namespaces/nope/configmaps", NULL, cm, NULL);
    ck_assert_int_eq(r.code, 404);
    ck_assert_ptr_nonnull(strstr(r.body, "namespaces \\\"nope\\\" not found"));
    kop_test_resp_free(&r);

    r = request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases", NULL,
                "{\"metadata\":{\"name\":\"test_\"},\"spec\":{}}", NULL);
    ck_assert_int_eq(r.code, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "\"message\":\"Lease.coordination.k8s.io \\\"test_\\\" is "
                                         "invalid: metadata.name: Invalid value: \\\"test_\\\": a "
                                         "lowercase RFC 1123 subdomain"));
    kop_test_resp_free(&r);

    /* Delete answers a Success Status with the uid; preconditions conflict. */
    r = request("DELETE", "/api/v1/namespaces/default/configmaps/cm1", NULL,
                "{\"preconditions\":{\"uid\":\"x\"}}", NULL);
    ck_assert_int_eq(r.code, 409);
    /* rest.BeforeDelete's Conflict, on the object's kind */
    ck_assert_ptr_nonnull(strstr(r.body, "\"message\":\"Operation cannot be fulfilled on "
                                         "ConfigMap \\\"cm1\\\": the UID in the precondition "
                                         "(x) does not match the UID in record ("));
    ck_assert_ptr_nonnull(strstr(r.body, "). The object might have been deleted and then "
                                         "recreated\",\"reason\":\"Conflict\",\"details\":{"
                                         "\"name\":\"cm1\",\"kind\":\"ConfigMap\"}"));
    kop_test_resp_free(&r);
    /* an update whose uid is not the object's: the storage's precondition,
     * naming the etcd key (group-less for a built-in) */
    json_t *dep = request_json("POST", "/apis/apps/v1/namespaces/default/deployments",
                               "{\"metadata\":{\"name\":\"pre\"},\"spec\":{\"replicas\":0,"
                               "\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{"
                               "\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{"
                               "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}}}",
                               201);
    json_object_set_new(json_object_get(dep, "metadata"), "uid", json_string("other-uid"));
    char *dep_txt = json_dumps(dep, JSON_COMPACT);
    r = request("PUT", "/apis/apps/v1/namespaces/default/deployments/pre", NULL, dep_txt, NULL);
    ck_assert_int_eq(r.code, 409);
    ck_assert_ptr_nonnull(
        strstr(r.body, "Operation cannot be fulfilled on deployments.apps \\\"pre\\\": "
                       "StorageError: invalid object, Code: 4, Key: "
                       "/registry/deployments/default/pre, ResourceVersion: 0, "
                       "AdditionalErrorMsg: Precondition failed: UID in precondition: other-uid, "
                       "UID in object meta: "));
    kop_test_resp_free(&r);
    free(dep_txt);
    json_decref(dep);
    json_decref(
        request_json("DELETE", "/apis/apps/v1/namespaces/default/deployments/pre", NULL, 200));
    r = request("DELETE", "/api/v1/namespaces/default/configmaps/cm1", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    char want[512];
    snprintf(want, sizeof(want),
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\","
             "\"details\":{\"name\":\"cm1\",\"kind\":\"configmaps\",\"uid\":\"%s\"}}\n",
             jpath(created, "metadata", "uid"));
    ck_assert_str_eq(r.body, want);
    kop_test_resp_free(&r);
    json_decref(created);
    json_decref(updated);
    json_decref(upd);
}
END_TEST

START_TEST(test_kubesim_selectors_and_paging)
{
    static const char *const tiers[] = {"a", "b", "c", "a", "b"};
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"cm-%d\",\"labels\":{\"tier\":\"%s\"%s}}}", i, tiers[i],
                 i == 0 ? ",\"env\":\"prod\"" : "");
        json_decref(request_json("POST", "/api/v1/namespaces/default/configmaps", body, 201));
    }
    json_t *l = request_json(
        "GET", "/api/v1/namespaces/default/configmaps?labelSelector=tier%20in%20(a,b),env!=prod",
        NULL, 200);
    ck_assert_str_eq(jpath(l, "kind", NULL), "ConfigMapList");
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 3);
    ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(l, "items"), 0), "kind"));
    json_decref(l);
    l = request_json("GET", "/api/v1/configmaps?labelSelector=!env,tier", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 4);
    json_decref(l);
    l = request_json("GET",
                     "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dcm-2",
                     NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
    struct kop_test_resp r =
        request("GET", "/api/v1/configmaps?labelSelector=a%20in%20b", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 400);
    kop_test_resp_free(&r);

    /* limit/continue walks every item exactly once. */
    char path[1024] = "/api/v1/namespaces/default/configmaps?limit=2";
    int seen = 0, pages = 0;
    for (;;) {
        l = request_json("GET", path, NULL, 200);
        seen += (int)json_array_size(json_object_get(l, "items"));
        pages++;
        const char *cont = jpath(l, "metadata", "continue");
        if (!cont || !*cont) {
            json_decref(l);
            break;
        }
        continue_path(path, sizeof(path), cont);
        json_decref(l);
        ck_assert_int_lt(pages, 10);
    }
    ck_assert_int_eq(seen, 6); /* and kube-root-ca.crt, in every namespace */
    ck_assert_int_eq(pages, 3);
}
END_TEST

START_TEST(test_kubesim_watch_resume_bookmark_selector)
{
    char rv[32];
    list_rv("/api/v1/namespaces/default/configmaps", rv, sizeof(rv));
    create_cm("{\"metadata\":{\"name\":\"w1\",\"labels\":{\"x\":\"y\"}}}");
    merge_patch("/api/v1/namespaces/default/configmaps/w1",
                "{\"metadata\":{\"labels\":{\"x\":\"z\"}}}", 200);

    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=1"
             "&allowWatchBookmarks=true&labelSelector=x%%3Dy",
             rv);
    struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_int_eq(r.rc, CURLE_OK);
    /* Entering the selector is ADDED, leaving it is DELETED, then bookmarks. */
    char *added = strstr(r.body, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\"");
    char *deleted = strstr(r.body, "{\"type\":\"DELETED\",\"object\":{\"kind\":\"ConfigMap\"");
    char *bookmark = strstr(r.body, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\","
                                    "\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"");
    ck_assert_ptr_nonnull(added);
    ck_assert_ptr_nonnull(deleted);
    ck_assert_ptr_nonnull(bookmark);
    ck_assert(added < deleted);
    ck_assert(deleted < bookmark);
    ck_assert_ptr_nonnull(strstr(r.headers, "chunked"));
    kop_test_resp_free(&r);

    /* resourceVersion=0: synthetic ADDED for what exists. */
    r = request("GET", "/api/v1/namespaces?watch=true&resourceVersion=0&timeoutSeconds=1", NULL,
                NULL, NULL);
    ck_assert_ptr_nonnull(strstr(r.body, "\"name\":\"kube-system\""));
    kop_test_resp_free(&r);
}
END_TEST

/* "key!=value" also matches objects without the key, in lists and watches
 * (k8s.io/apimachinery/pkg/labels/selector.go, Requirement.Matches:
 * NotEquals is true when the label is absent); a watch sends DELETED when
 * an object stops matching and ADDED when it starts to
 * (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go,
 * convertToWatchEvent). kop's rule-4 informers select managed-by!=kop. */
START_TEST(test_kubesim_not_equal_selector_list_and_watch)
{
    char rv[32];
    list_rv("/api/v1/namespaces/default/configmaps", rv, sizeof(rv));
    create_cm("{\"metadata\":{\"name\":\"ne-a\"}}");
    create_cm("{\"metadata\":{\"name\":\"ne-b\",\"labels\":{\"m\":\"kop\"}}}");
    create_cm("{\"metadata\":{\"name\":\"ne-c\",\"labels\":{\"m\":\"helm\"}}}");
    json_t *l = request_json(
        "GET", "/api/v1/namespaces/default/configmaps?labelSelector=m%21%3Dkop", NULL, 200);
    json_t *items = json_object_get(l, "items");
    /* kube-root-ca.crt (every namespace has it) has no label m either */
    ck_assert_int_eq(json_array_size(items), 3);
    ck_assert_str_eq(jpath(json_array_get(items, 0), "metadata", "name"), "kube-root-ca.crt");
    ck_assert_str_eq(jpath(json_array_get(items, 1), "metadata", "name"), "ne-a");
    ck_assert_str_eq(jpath(json_array_get(items, 2), "metadata", "name"), "ne-c");
    json_decref(l);
    /* ne-a gets the label (leaves), ne-b loses it (enters). */
    merge_patch("/api/v1/namespaces/default/configmaps/ne-a",
                "{\"metadata\":{\"labels\":{\"m\":\"kop\"}}}", 200);
    merge_patch("/api/v1/namespaces/default/configmaps/ne-b",
                "{\"metadata\":{\"labels\":{\"m\":null}}}", 200);

    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=1"
             "&labelSelector=m%%21%%3Dkop",
             rv);
    struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    char seen[256] = "";
    for (char *line = r.body; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        json_t *ev = json_loadb(line, len, 0, NULL);
        ck_assert_msg(ev, "not an event: %.*s", (int)len, line);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *name = jpath(json_object_get(ev, "object"), "metadata", "name");
        size_t n = strlen(seen);
        snprintf(seen + n, sizeof(seen) - n, "%s%s %s", n ? "," : "", type ? type : "?",
                 name ? name : "?");
        json_decref(ev);
        line += len + (nl ? 1 : 0);
    }
    ck_assert_str_eq(seen, "ADDED ne-a,ADDED ne-c,DELETED ne-a,ADDED ne-b");
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_watch_410_after_compaction)
{
    create_cm("{\"metadata\":{\"name\":\"c1\"}}");
    json_decref(request_json("POST", "/_kubesim/faults", "{\"compact\":true}", 200));
    struct kop_test_resp r = request(
        "GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=2", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body,
                                 "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\","
                                 "\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                                 "\"Failure\",\"message\":\"too old resource version: 2 ("));
    ck_assert_ptr_nonnull(strstr(r.body, "\"reason\":\"Expired\",\"code\":410}}\n"));
    kop_test_resp_free(&r);
}
END_TEST

struct watch_thread {
    pthread_t t;
    struct kop_test_resp r;
    double secs;
    atomic_bool done;
};

/* Query parameters as the apiserver reads them: booleans by apimachinery's
 * Convert_Slice_string_To_bool (only absent, "false" and "0" are false:
 * python3-kubernetes sends watch=True), integers by strconv.ParseInt with
 * a 400 for anything else. */
START_TEST(test_kubesim_query_parameters)
{
    static const char *const watches[] = {"True", "TRUE", "t", "1", "yes", ""};
    for (size_t i = 0; i < sizeof(watches) / sizeof(watches[0]); i++) {
        char path[160];
        snprintf(path, sizeof(path),
                 "/api/v1/namespaces?watch=%s&resourceVersion=0&timeoutSeconds=1", watches[i]);
        struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
        ck_assert_int_eq(r.code, 200);
        ck_assert_msg(strstr(r.body, "{\"type\":\"ADDED\"") != NULL,
                      "watch=%s: not a watch: %.200s", watches[i], r.body);
        kop_test_resp_free(&r);
    }
    static const char *const lists[] = {"false", "False", "0"};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        char path[96];
        snprintf(path, sizeof(path), "/api/v1/namespaces?watch=%s", lists[i]);
        json_t *l = request_json("GET", path, NULL, 200);
        ck_assert_str_eq(json_string_value(json_object_get(l, "kind")), "NamespaceList");
        json_decref(l);
    }
    json_t *st = request_json("GET", "/api/v1/namespaces?limit=ten", NULL, 400);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")),
                     "strconv.ParseInt: parsing \"ten\": invalid syntax");
    json_decref(st);
    st = request_json("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=99999999999999999999", NULL,
                      400);
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(st, "message")), "out of range"));
    json_decref(st);
}
END_TEST

static void *watch_main(void *arg)
{
    struct watch_thread *w = arg;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    w->r = request("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=10", NULL,
                   NULL, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    w->secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    atomic_store(&w->done, true);
    return NULL;
}

START_TEST(test_kubesim_dropped_watch)
{
    struct watch_thread w;
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(pthread_create(&w.t, NULL, watch_main, &w), 0);
    /* A drop only ends the watches open at the time, and the thread may
     * not have connected yet: drop again until it ends. */
    for (int i = 0; i < 80 && !atomic_load(&w.done); i++) {
        kop_test_sleep_ms(100);
        json_decref(request_json("POST", "/_kubesim/faults", "{\"dropWatches\":true}", 200));
    }
    pthread_join(w.t, NULL);
    /* Cut, not ended by its timeoutSeconds=10. */
    ck_assert_msg(w.secs < 9.0, "watch was not dropped (%.1fs)", w.secs);
    ck_assert_int_ne(w.r.rc, CURLE_OK);
    kop_test_resp_free(&w.r);
}
END_TEST

START_TEST(test_kubesim_gc_cascade)
{
    json_t *owner = request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"own\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":"
        "\"c\",\"image\":\"nginx\"}]}}}}",
        201);
    char body[512];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"dep\",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
             "\"kind\":\"Deployment\",\"name\":\"own\",\"uid\":\"%s\",\"controller\":true}]}}",
             jpath(owner, "metadata", "uid"));
    create_cm(body);
    create_cm("{\"metadata\":{\"name\":\"free\"}}");
    /* Two owners, one of them gone: only the dangling reference goes. */
    json_t *freecm = request_json("GET", "/api/v1/namespaces/default/configmaps/free", NULL, 200);
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"two\",\"ownerReferences\":[{\"apiVersion\":\"v1\","
             "\"kind\":\"ConfigMap\",\"name\":\"ghost\",\"uid\":\"no-such-uid\"},{\"apiVersion\":"
             "\"v1\",\"kind\":\"ConfigMap\",\"name\":\"free\",\"uid\":\"%s\"}]}}",
             jpath(freecm, "metadata", "uid"));
    json_decref(freecm);
    create_cm(body);
    size_t nrefs = 2;
    for (int i = 0; i < 50 && nrefs != 1; i++) {
        kop_test_sleep_ms(40);
        json_t *two = request_json("GET", "/api/v1/namespaces/default/configmaps/two", NULL, 200);
        const json_t *refs = json_object_get(json_object_get(two, "metadata"), "ownerReferences");
        nrefs = json_array_size(refs);
        if (nrefs == 1)
            ck_assert_str_eq(jpath(json_array_get(refs, 0), "name", NULL), "free");
        json_decref(two);
    }
    ck_assert_int_eq(nrefs, 1);
    struct kop_test_resp r = request("DELETE", "/apis/apps/v1/namespaces/default/deployments/own",
                                     NULL, "{\"propagationPolicy\":\"Background\"}", NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"Success\""));
    kop_test_resp_free(&r);
    long code = 0;
    for (int i = 0; i < 50 && code != 404; i++) {
        kop_test_sleep_ms(40);
        r = request("GET", "/api/v1/namespaces/default/configmaps/dep", NULL, NULL, NULL);
        code = r.code;
        kop_test_resp_free(&r);
    }
    ck_assert_int_eq(code, 404);
    r = request("GET", "/api/v1/namespaces/default/configmaps/free", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    json_decref(owner);
}
END_TEST

START_TEST(test_kubesim_finalizers)
{
    create_cm("{\"metadata\":{\"name\":\"fin\",\"finalizers\":[\"example.com/x\"]}}");
    json_t *v = request_json("DELETE", "/api/v1/namespaces/default/configmaps/fin", NULL, 200);
    ck_assert_str_eq(jpath(v, "kind", NULL), "ConfigMap");
    ck_assert_ptr_nonnull(jpath(v, "metadata", "deletionTimestamp"));
    json_decref(v);
    v = request_json("GET", "/api/v1/namespaces/default/configmaps/fin", NULL, 200);
    ck_assert_ptr_nonnull(jpath(v, "metadata", "deletionTimestamp"));
    json_decref(v);
    merge_patch("/api/v1/namespaces/default/configmaps/fin", "{\"metadata\":{\"finalizers\":null}}",
                200);
    struct kop_test_resp r =
        request("GET", "/api/v1/namespaces/default/configmaps/fin", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 404);
    kop_test_resp_free(&r);
}
END_TEST

static const char test_crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"gizmos.test.example.com\"},\"spec\":{\"group\":\"test.example.com\","
    "\"names\":{\"plural\":\"gizmos\",\"singular\":\"gizmo\",\"kind\":\"Gizmo\",\"listKind\":"
    "\"GizmoList\"},\"scope\":\"Namespaced\",\"versions\":[{\"name\":\"v1\",\"served\":true,"
    "\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{\"openAPIV3Schema\":{\"type\":"
    "\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"default\":{},\"properties\":{"
    "\"replicas\":{\"type\":\"integer\",\"default\":1},\"image\":{\"type\":\"string\",\"default\":"
    "\"nginx:1.14.2\"}}},\"status\":{\"type\":\"object\",\"properties\":{\"ready\":{\"type\":"
    "\"integer\"}}}}}}}]}}";

START_TEST(test_kubesim_crd_defaults_and_status)
{
    json_t *crd = request_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                               test_crd, 201);
    ck_assert_str_eq(jpath(crd, "kind", NULL), "CustomResourceDefinition");
    json_decref(crd);
    struct kop_test_resp d = request("GET", "/apis/test.example.com/v1", NULL, NULL, NULL);
    ck_assert_int_eq(d.code, 200);
    ck_assert_ptr_nonnull(strstr(d.body, "\"name\":\"gizmos/status\""));
    kop_test_resp_free(&d);

    json_t *g = request_json("POST", "/apis/test.example.com/v1/namespaces/default/gizmos",
                             "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Gizmo\","
                             "\"metadata\":{\"name\":\"g1\"},\"spec\":{\"replicas\":3,\"junk\":1},"
                             "\"status\":{\"ready\":9}}",
                             201);
    const json_t *spec = json_object_get(g, "spec");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "replicas")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(spec, "image")), "nginx:1.14.2");
    ck_assert_ptr_null(json_object_get(spec, "junk")); /* pruned */
    ck_assert_ptr_null(json_object_get(g, "status"));  /* status ignored on create */
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(g, "metadata"), "generation")), 1);
    json_decref(g);

    /* /status changes only status; the main resource ignores status. */
    struct kop_test_resp r =
        request("PATCH", "/apis/test.example.com/v1/namespaces/default/gizmos/g1/status",
                "application/merge-patch+json",
                "{\"spec\":{\"replicas\":7},\"status\":{\"ready\":2}}", NULL);
    ck_assert_int_eq(r.code, 200);
    g = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(g, "status"), "ready")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(g, "spec"), "replicas")),
                     3);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(g, "metadata"), "generation")), 1);
    json_decref(g);
    r = request("PATCH", "/apis/test.example.com/v1/namespaces/default/gizmos/g1",
                "application/merge-patch+json",
                "{\"spec\":{\"replicas\":4},\"status\":{\"ready\":5}}", NULL);
    ck_assert_int_eq(r.code, 200);
    g = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(g, "status"), "ready")), 2);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(g, "metadata"), "generation")), 2);
    json_decref(g);

    /* CR list: sorted keys, continue written out. */
    r = request("GET", "/apis/test.example.com/v1/namespaces/default/gizmos", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "],\"kind\":\"GizmoList\",\"metadata\":{\"continue\":\"\","
                                         "\"resourceVersion\":\""));
    kop_test_resp_free(&r);

    /* Schema validation: 422 with the apiserver's wording. */
    r = request("POST", "/apis/test.example.com/v1/namespaces/default/gizmos", NULL,
                "{\"metadata\":{\"name\":\"g2\"},\"spec\":{\"replicas\":\"x\"}}", NULL);
    ck_assert_int_eq(r.code, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "Gizmo.test.example.com \\\"g2\\\" is invalid: "
                                         "spec.replicas: Invalid value: \\\"string\\\": "
                                         "spec.replicas in body must be of type integer: "
                                         "\\\"string\\\""));
    kop_test_resp_free(&r);

    /* Deleting the CRD removes its resources. */
    r = request("DELETE",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                "gizmos.test.example.com",
                NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    r = request("GET", "/apis/test.example.com/v1/namespaces/default/gizmos", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 404);
    kop_test_resp_free(&r);
}
END_TEST

static void expect_invalid(const char *path, const char *body, const char *want);

/* apiextensions-apiserver's listtype validation: x-kubernetes-list-type
 * set and map arrays of a custom resource hold each value or key once
 * (they were stored with duplicates), with the Duplicate values printed as
 * the apiserver prints them. */
START_TEST(test_kubesim_crd_list_types)
{
    json_decref(request_json(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "{\"metadata\":{\"name\":\"listers.test.example.com\"},\"spec\":{\"group\":"
        "\"test.example.com\",\"names\":{\"plural\":\"listers\",\"singular\":\"lister\","
        "\"kind\":\"Lister\",\"listKind\":\"ListerList\"},\"scope\":\"Namespaced\","
        "\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,\"schema\":{"
        "\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
        "\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
        "\"string\"},\"x-kubernetes-list-type\":\"set\"},\"ports\":{\"type\":\"array\","
        "\"x-kubernetes-list-type\":\"map\",\"x-kubernetes-list-map-keys\":[\"name\"],"
        "\"items\":{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{\"name\":{"
        "\"type\":\"string\"},\"port\":{\"type\":\"integer\"}}}},\"pairs\":{\"type\":"
        "\"array\",\"x-kubernetes-list-type\":\"map\",\"x-kubernetes-list-map-keys\":[\"a\","
        "\"b\"],\"items\":{\"type\":\"object\",\"required\":[\"a\",\"b\"],\"properties\":{"
        "\"a\":{\"type\":\"string\"},\"b\":{\"type\":\"integer\"}}}},\"when\":{\"type\":"
        "\"string\",\"format\":\"date-time\"},\"id\":{\"type\":\"string\",\"format\":"
        "\"uuid\"},\"addr\":{\"type\":\"string\",\"format\":\"ipv4\"},\"size\":{\"type\":"
        "\"integer\",\"format\":\"int32\"},\"code\":{\"type\":\"string\",\"pattern\":"
        "\"(?i)^\\\\d{3}-\\\\w+?$\"}}}}}}}]}}",
        201));
    const char *path = "/apis/test.example.com/v1/namespaces/default/listers";
    expect_invalid(path,
                   "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Lister\",\"metadata\":{"
                   "\"name\":\"l1\"},\"spec\":{\"tags\":[\"a\",\"b\",\"a\",\"a\"],\"ports\":[{"
                   "\"name\":\"http\",\"port\":80},{\"name\":\"http\",\"port\":81},{\"name\":"
                   "\"x\"}],\"pairs\":[{\"a\":\"1\",\"b\":2},{\"b\":2,\"a\":\"1\"}]}}",
                   "Lister.test.example.com \"l1\" is invalid: [spec.tags[2]: Duplicate value: "
                   "\"a\", spec.ports[1]: Duplicate value: map[string]interface "
                   "{}{\"name\":\"http\"}, spec.pairs[1]: Duplicate value: map[string]interface "
                   "{}{\"a\":\"1\", \"b\":2}]");
    /* distinct values and keys are stored */
    json_decref(request_json("POST", path,
                             "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Lister\","
                             "\"metadata\":{\"name\":\"l2\"},\"spec\":{\"tags\":[\"a\",\"b\"],"
                             "\"ports\":[{\"name\":\"http\"},{\"name\":\"https\"}],\"pairs\":[{"
                             "\"a\":\"1\",\"b\":2},{\"a\":\"1\",\"b\":3}]}}",
                             201));
    /* an update too */
    merge_patch("/apis/test.example.com/v1/namespaces/default/listers/l2",
                "{\"spec\":{\"tags\":[\"b\",\"b\"]}}", 422);
    /* kube-openapi's string formats (strfmt); int32 is not a string's */
    json_decref(request_json("POST", path,
                             "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Lister\","
                             "\"metadata\":{\"name\":\"f1\"},\"spec\":{\"when\":"
                             "\"2026-02-28T23:59:59.123456+01:00\",\"id\":"
                             "\"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0\",\"addr\":\"10.0.0.1\","
                             "\"size\":5000000000,\"code\":\"123-aB_9\"}}",
                             201));
    expect_invalid(
        path,
        "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Lister\",\"metadata\":{"
        "\"name\":\"f2\"},\"spec\":{\"when\":\"2026-02-29T10:00:00Z\",\"id\":\"x\","
        "\"addr\":\"::1\",\"code\":\"12-x\"}}",
        "Lister.test.example.com \"f2\" is invalid: [spec.when: Invalid value: "
        "\"2026-02-29T10:00:00Z\": spec.when in body must be of type date-time: "
        "\"2026-02-29T10:00:00Z\", spec.id: Invalid value: \"x\": spec.id in body must "
        "be of type uuid: \"x\", spec.addr: Invalid value: \"::1\": spec.addr in body "
        "must be of type ipv4: \"::1\", spec.code: Invalid value: \"12-x\": spec.code in "
        "body should match '(?i)^\\d{3}-\\w+?$']");
}
END_TEST

START_TEST(test_kubesim_deployment_controller_and_service)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"d1\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":"
        "{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.2\"}]}}}}",
        201));
    json_int_t ready = 0;
    json_t *d = NULL;
    for (int i = 0; i < 50 && ready != 2; i++) {
        kop_test_sleep_ms(30);
        json_decref(d);
        d = request_json("GET", "/apis/apps/v1/namespaces/default/deployments/d1", NULL, 200);
        ready = json_integer_value(json_object_get(json_object_get(d, "status"), "readyReplicas"));
    }
    ck_assert_int_eq(ready, 2);
    const json_t *st = json_object_get(d, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "observedGeneration")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "availableReplicas")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(st, "conditions"), 0), "type")),
                     "Available");
    json_decref(d);

    json_t *svc =
        request_json("POST", "/api/v1/namespaces/default/services",
                     "{\"metadata\":{\"name\":\"s1\"},\"spec\":{\"ports\":[{\"port\":80}],"
                     "\"selector\":{\"a\":\"b\"}}}",
                     201);
    const char *ip = jpath(svc, "spec", "clusterIP");
    ck_assert_ptr_nonnull(ip);
    ck_assert_int_eq(strncmp(ip, "10.96.", 6), 0);
    json_decref(svc);
}
END_TEST

START_TEST(test_kubesim_faults)
{
    json_decref(request_json("POST", "/_kubesim/faults",
                             "{\"rules\":[{\"verb\":\"list\",\"code\":429,\"rate\":1,"
                             "\"retryAfter\":3}]}",
                             200));
    struct kop_test_resp r = request("GET", "/api/v1/namespaces", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 429);
    ck_assert_ptr_nonnull(strstr(r.headers, "Retry-After: 3"));
    ck_assert_str_eq(r.body, "Too many requests, please try again later.\n");
    kop_test_resp_free(&r);
    r = request("GET", "/api/v1/namespaces/default", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);

    json_decref(
        request_json("POST", "/_kubesim/faults",
                     "{\"seed\":7,\"rules\":[{\"verb\":\"get\",\"code\":500,\"rate\":0.5}]}", 200));
    int errors = 0, ok = 0;
    for (int i = 0; i < 40; i++) {
        r = request("GET", "/api/v1/namespaces/default", NULL, NULL, NULL);
        if (r.code == 500)
            errors++;
        else if (r.code == 200)
            ok++;
        kop_test_resp_free(&r);
    }
    ck_assert_int_gt(errors, 5);
    ck_assert_int_gt(ok, 5);
    ck_assert_int_eq(errors + ok, 40);
    json_decref(request_json("POST", "/_kubesim/faults", "{\"rules\":[]}", 200));
    r = request("GET", "/api/v1/namespaces", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_stats)
{
    struct kop_test_resp r = request("DELETE", "/_kubesim/stats", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    create_cm("{\"metadata\":{\"name\":\"st\"}}");
    merge_patch("/api/v1/namespaces/default/configmaps/st", "{\"data\":{\"k\":\"v\"}}", 200);
    json_decref(request_json("GET", "/api/v1/namespaces/default/configmaps/st", NULL, 200));
    json_t *s = request_json("GET", "/_kubesim/stats", NULL, 200);
    const json_t *w = json_object_get(json_object_get(s, "writes"), "configmaps");
    ck_assert_int_eq(json_integer_value(json_object_get(w, "create")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "patch")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(s, "writeTotal")), 2);
    const json_t *reqs = json_object_get(s, "requests");
    ck_assert_int_eq(json_array_size(reqs), 3);
    const json_t *last = json_array_get(reqs, 2);
    ck_assert_str_eq(json_string_value(json_object_get(last, "verb")), "get");
    ck_assert_str_eq(json_string_value(json_object_get(last, "namespace")), "default");
    ck_assert_str_eq(json_string_value(json_object_get(last, "resource")), "configmaps");
    json_decref(s);
}
END_TEST

/* GET path; the continue token of the reply, or NULL. @ref new list */
static json_t *list_page(const char *base, const char *cont)
{
    char path[1024];
    if (cont) {
        char *esc = curl_easy_escape(NULL, cont, 0);
        snprintf(path, sizeof(path), "%s&continue=%s", base, esc);
        curl_free(esc);
    } else {
        snprintf(path, sizeof(path), "%s", base);
    }
    return request_json("GET", path, NULL, 200);
}

static const char *item_name(const json_t *list, size_t i)
{
    return jpath(json_array_get(json_object_get(list, "items"), i), "metadata", "name");
}

START_TEST(test_kubesim_list_snapshot)
{
    for (int i = 0; i < 6; i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"cm-%d\"},\"data\":{\"v\":\"0\"}}",
                 i);
        json_decref(request_json("POST", "/api/v1/namespaces/default/configmaps", body, 201));
    }
    const char *base = "/api/v1/namespaces/default/configmaps?limit=2";
    json_t *p1 = list_page(base, NULL);
    const char *rv1 = jpath(p1, "metadata", "resourceVersion");
    /* six and kube-root-ca.crt (every namespace has it), sorted last */
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(p1, "metadata"), "remainingItemCount")),
        5);
    ck_assert_str_eq(item_name(p1, 0), "cm-0");
    ck_assert_str_eq(item_name(p1, 1), "cm-1");

    /* Change what the later pages hold: update, create, delete. */
    merge_patch("/api/v1/namespaces/default/configmaps/cm-2", "{\"data\":{\"v\":\"1\"}}", 200);
    create_cm("{\"metadata\":{\"name\":\"cm-2a\"}}");
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/configmaps/cm-4", NULL, 200));

    /* The rest is served as of page 1: the snapshot, at page 1's RV. */
    json_t *p2 = list_page(base, jpath(p1, "metadata", "continue"));
    ck_assert_str_eq(jpath(p2, "metadata", "resourceVersion"), rv1);
    ck_assert_int_eq(json_array_size(json_object_get(p2, "items")), 2);
    ck_assert_str_eq(item_name(p2, 0), "cm-2");
    ck_assert_str_eq(item_name(p2, 1), "cm-3");
    ck_assert_str_eq(
        jpath(json_object_get(json_array_get(json_object_get(p2, "items"), 0), "data"), "v", NULL),
        "0");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(p2, "metadata"), "remainingItemCount")),
        3);
    json_t *p3 = list_page(base, jpath(p2, "metadata", "continue"));
    ck_assert_str_eq(jpath(p3, "metadata", "resourceVersion"), rv1);
    ck_assert_int_eq(json_array_size(json_object_get(p3, "items")), 2);
    ck_assert_str_eq(item_name(p3, 0), "cm-4"); /* deleted since, still in the snapshot */
    ck_assert_str_eq(item_name(p3, 1), "cm-5");
    json_t *p4 = list_page(base, jpath(p3, "metadata", "continue"));
    ck_assert_str_eq(jpath(p4, "metadata", "resourceVersion"), rv1);
    ck_assert_int_eq(json_array_size(json_object_get(p4, "items")), 1);
    ck_assert_str_eq(item_name(p4, 0), "kube-root-ca.crt");
    ck_assert_ptr_null(jpath(p4, "metadata", "continue"));
    ck_assert_ptr_null(json_object_get(json_object_get(p4, "metadata"), "remainingItemCount"));
    json_decref(p4);

    /* resourceVersionMatch=Exact reads the same snapshot. */
    char path[256];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?resourceVersion=%s&resourceVersionMatch=Exact",
             rv1);
    json_t *ex = request_json("GET", path, NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(ex, "items")), 7);
    ck_assert_str_eq(jpath(ex, "metadata", "resourceVersion"), rv1);
    json_decref(ex);

    /* After compaction: 410 Expired with a token that continues, inconsistently. */
    json_decref(request_json("POST", "/_kubesim/faults", "{\"compact\":true}", 200));
    char *esc = curl_easy_escape(NULL, jpath(p1, "metadata", "continue"), 0);
    snprintf(path, sizeof(path), "%s&continue=%s", base, esc);
    curl_free(esc);
    struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 410);
    json_t *st = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(jpath(st, "reason", NULL), "Expired");
    ck_assert_str_eq(jpath(st, "message", NULL),
                     "The provided continue parameter is too old to display a consistent list "
                     "result. You can start a new list without the continue parameter, or use "
                     "the continue token in this response to retrieve the remainder of the "
                     "results. Continuing with the provided token results in an inconsistent "
                     "list - objects that were created, modified, or deleted between the time "
                     "the first chunk was returned and now may show up in the list.");
    ck_assert_ptr_nonnull(strstr(r.body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":"
                                         "{\"continue\":\""));
    json_t *rest = list_page(base, jpath(st, "metadata", "continue"));
    ck_assert_str_ne(jpath(rest, "metadata", "resourceVersion"), rv1);
    ck_assert_str_eq(item_name(rest, 0), "cm-2");
    ck_assert_str_eq(item_name(rest, 1), "cm-2a"); /* the current state now */
    json_decref(rest);
    json_decref(st);
    kop_test_resp_free(&r);

    /* A continue token with a resourceVersion is a 400. */
    snprintf(path, sizeof(path), "%s&resourceVersion=5&continue=%s", base,
             "eyJ2IjoibWV0YS5rOHMu"
             "aW8vdjEiLCJydiI6Mywic3"
             "RhcnQiOiJ4In0=");
    r = request("GET", path, NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "specifying resource version is not allowed when using "
                                         "continue"));
    kop_test_resp_free(&r);
    json_decref(p1);
    json_decref(p2);
    json_decref(p3);
}
END_TEST

/* The 422 of ValidateListOptions for QUERY (on configmaps), its message. */
static void list_options_invalid(const char *query, const char *message)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/configmaps?%s", query);
    struct kop_test_resp r = request("GET", path, NULL, NULL, NULL);
    ck_assert_msg(r.code == 422, "%s: %ld %s", query, r.code, r.body);
    json_t *st = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(jpath(st, "reason", NULL), "Invalid");
    ck_assert_str_eq(jpath(st, "message", NULL), message);
    ck_assert_str_eq(jpath(st, "details", "kind"), "ListOptions");
    ck_assert_str_eq(jpath(st, "details", "group"), "meta.k8s.io");
    json_decref(st);
    kop_test_resp_free(&r);
}

/* resourceVersionMatch and sendInitialEvents in the combinations the
 * apiserver's ValidateListOptions refuses (apimachinery/pkg/apis/meta/
 * internalversion/validation); the allowed ones still answer. */
START_TEST(test_kubesim_list_options_validated)
{
    list_options_invalid("resourceVersionMatch=NotOlderThan",
                         "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                         "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                         "provided");
    list_options_invalid("resourceVersion=0&resourceVersionMatch=Exact",
                         "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                         "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                         "resourceVersion \"0\"");
    list_options_invalid("resourceVersionMatch=Newest",
                         "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: "
                         "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is "
                         "provided, resourceVersionMatch: Unsupported value: \"Newest\": "
                         "supported values: \"Exact\", \"NotOlderThan\", \"\"]");
    list_options_invalid("sendInitialEvents=true",
                         "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: "
                         "Forbidden: sendInitialEvents is forbidden for list");
    list_options_invalid("watch=1&resourceVersionMatch=NotOlderThan",
                         "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                         "Forbidden: resourceVersionMatch is forbidden for watch unless "
                         "sendInitialEvents is provided");
    list_options_invalid("watch=1&sendInitialEvents=true",
                         "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: "
                         "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                         "NotOlderThan");
    list_options_invalid("watch=1&sendInitialEvents=true&resourceVersionMatch=Exact",
                         "ListOptions.meta.k8s.io \"\" is invalid: [resourceVersionMatch: "
                         "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                         "NotOlderThan, resourceVersionMatch: Unsupported value: \"Exact\": "
                         "supported values: \"NotOlderThan\"]");
    json_decref(request_json(
        "GET",
        "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=NotOlderThan",
        NULL, 200));
}
END_TEST

#define TABLE_ACCEPT                                                                               \
    "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"    \
    "g=meta.k8s.io,application/json"

static json_t *get_table(const char *path)
{
    struct kop_test_resp r = request_ex("GET", path, NULL, NULL, NULL, TABLE_ACCEPT);
    ck_assert_msg(r.code == 200, "GET %s: %ld %s", path, r.code, r.body);
    json_t *t = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_str_eq(jpath(t, "kind", NULL), "Table");
    ck_assert_str_eq(jpath(t, "apiVersion", NULL), "meta.k8s.io/v1");
    kop_test_resp_free(&r);
    return t;
}

static const char *col_name(const json_t *t, size_t i)
{
    return jpath(json_array_get(json_object_get(t, "columnDefinitions"), i), "name", NULL);
}

static const json_t *cell(const json_t *t, size_t row, size_t i)
{
    return json_array_get(json_object_get(json_array_get(json_object_get(t, "rows"), row), "cells"),
                          i);
}

static const char widget_crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"widgets.test.example.com\"},\"spec\":{\"group\":\"test.example.com\","
    "\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\",\"kind\":\"Widget\"},"
    "\"scope\":\"Namespaced\",\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
    "\"additionalPrinterColumns\":[{\"name\":\"Replicas\",\"type\":\"integer\",\"jsonPath\":"
    "\".spec.replicas\"},{\"name\":\"Ready\",\"type\":\"string\",\"jsonPath\":"
    "\".status.conditions[?(@.type==\\\"Ready\\\")].status\",\"description\":\"is it\"},"
    "{\"name\":\"Missing\",\"type\":\"string\",\"jsonPath\":\".spec.nope\",\"priority\":1},"
    "{\"name\":\"Age\",\"type\":\"date\",\"jsonPath\":\".metadata.creationTimestamp\"}],"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":"
    "true}}}]}}";

/* metadata of OBJ holds none of the omitempty members written empty. */
static void assert_no_empty_meta(const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    ck_assert_ptr_nonnull(md);
    static const char *const gone[] = {"labels", "annotations", "finalizers", "ownerReferences",
                                       "generateName"};
    for (size_t i = 0; i < sizeof(gone) / sizeof(gone[0]); i++)
        ck_assert_msg(!json_object_get(md, gone[i]), "metadata.%s survived", gone[i]);
}

/* Empty ObjectMeta members (omitempty in metav1.ObjectMeta) do not survive a
 * write, for a built-in kind and a custom resource, on create and patch; the
 * patch that only adds them changes nothing (no new resourceVersion). */
START_TEST(test_kubesim_empty_metadata_dropped)
{
    static const char empty[] = "\"labels\":{},\"annotations\":{},\"finalizers\":[],"
                                "\"ownerReferences\":[],\"generateName\":\"\"";
    char body[512];
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"e1\",%s},\"data\":{\"a\":\"1\"}}",
             empty);
    json_t *o = request_json("POST", "/api/v1/namespaces/default/configmaps", body, 201);
    assert_no_empty_meta(o);
    char *rv = strdup(jpath(o, "metadata", "resourceVersion"));
    ck_assert_ptr_nonnull(rv);
    json_decref(o);
    snprintf(body, sizeof(body), "{\"metadata\":{%s}}", empty);
    struct kop_test_resp r = request("PATCH", "/api/v1/namespaces/default/configmaps/e1",
                                     "application/merge-patch+json", body, NULL);
    ck_assert_int_eq(r.code, 200);
    o = json_loads(r.body, 0, NULL);
    assert_no_empty_meta(o);
    ck_assert_str_eq(jpath(o, "metadata", "resourceVersion"), rv);
    json_decref(o);
    kop_test_resp_free(&r);
    free(rv);

    json_decref(request_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             widget_crd, 201));
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Widget\",\"metadata\":{"
             "\"name\":\"e1\",%s},\"spec\":{\"replicas\":1}}",
             empty);
    o = request_json("POST", "/apis/test.example.com/v1/namespaces/default/widgets", body, 201);
    assert_no_empty_meta(o);
    json_decref(o);
    snprintf(body, sizeof(body), "{\"metadata\":{%s}}", empty);
    r = request("PATCH", "/apis/test.example.com/v1/namespaces/default/widgets/e1",
                "application/merge-patch+json", body, NULL);
    ck_assert_int_eq(r.code, 200);
    o = json_loads(r.body, 0, NULL);
    assert_no_empty_meta(o);
    json_decref(o);
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_table_output)
{
    create_cm("{\"metadata\":{\"name\":\"t1\"},\"data\":{\"a\":\"1\",\"b\":\"2\"}}");
    json_t *t = get_table("/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dt1");
    ck_assert_str_eq(col_name(t, 0), "Name");
    ck_assert_str_eq(col_name(t, 1), "Data");
    ck_assert_str_eq(col_name(t, 2), "Age");
    const json_t *c0 = json_array_get(json_object_get(t, "columnDefinitions"), 0);
    ck_assert_str_eq(jpath(c0, "format", NULL), "name");
    ck_assert_int_eq(json_integer_value(json_object_get(c0, "priority")), 0);
    ck_assert_ptr_nonnull(jpath(c0, "description", NULL));
    ck_assert_ptr_nonnull(jpath(t, "metadata", "resourceVersion"));
    ck_assert_str_eq(json_string_value(cell(t, 0, 0)), "t1");
    ck_assert_int_eq(json_integer_value(cell(t, 0, 1)), 2);
    const char *age = json_string_value(cell(t, 0, 2));
    ck_assert_ptr_nonnull(age);
    ck_assert_int_eq(age[strlen(age) - 1], 's');
    const json_t *obj = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object");
    ck_assert_str_eq(jpath(obj, "kind", NULL), "PartialObjectMetadata");
    ck_assert_str_eq(jpath(obj, "apiVersion", NULL), "meta.k8s.io/v1");
    ck_assert_str_eq(jpath(obj, "metadata", "name"), "t1");
    ck_assert_ptr_null(json_object_get(obj, "data"));
    json_decref(t);
    /* includeObject=Object carries the whole object; a GET is a one-row table. */
    t = get_table("/api/v1/namespaces/default/configmaps/t1?includeObject=Object");
    ck_assert_int_eq(json_array_size(json_object_get(t, "rows")), 1);
    obj = json_object_get(json_array_get(json_object_get(t, "rows"), 0), "object");
    ck_assert_str_eq(jpath(obj, "kind", NULL), "ConfigMap");
    ck_assert_str_eq(jpath(obj, "data", "b"), "2");
    json_decref(t);

    /* Built-in printers: Deployment and Service. */
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":"
        "{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
        201));
    t = get_table("/apis/apps/v1/namespaces/default/deployments");
    static const char *const dcols[] = {"Name", "Ready",      "Up-to-date", "Available",
                                        "Age",  "Containers", "Images",     "Selector"};
    for (size_t i = 0; i < 8; i++)
        ck_assert_str_eq(col_name(t, i), dcols[i]);
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "0/3");
    ck_assert_str_eq(json_string_value(cell(t, 0, 7)), "app=web");
    json_decref(t);
    json_decref(request_json("POST", "/api/v1/namespaces/default/services",
                             "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"selector\":{\"app\":"
                             "\"web\"},\"ports\":[{\"name\":\"http\",\"port\":80},{\"name\":"
                             "\"dns\",\"port\":53,\"protocol\":\"UDP\"}]}}",
                             201));
    t = get_table("/api/v1/namespaces/default/services/web");
    ck_assert_str_eq(col_name(t, 3), "External-IP");
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "ClusterIP");
    ck_assert_str_eq(json_string_value(cell(t, 0, 3)), "<none>");
    ck_assert_str_eq(json_string_value(cell(t, 0, 4)), "80/TCP,53/UDP");
    json_decref(t);

    /* CRD columns: typed cells, a filter path, a missing value, the default Name. */
    json_decref(request_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             widget_crd, 201));
    json_decref(request_json("POST", "/apis/test.example.com/v1/namespaces/default/widgets",
                             "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Widget\","
                             "\"metadata\":{\"name\":\"w1\"},\"spec\":{\"replicas\":2},"
                             "\"status\":{\"conditions\":[{\"type\":\"Synced\",\"status\":"
                             "\"False\"},{\"type\":\"Ready\",\"status\":\"True\"}]}}",
                             201));
    t = get_table("/apis/test.example.com/v1/namespaces/default/widgets");
    ck_assert_str_eq(col_name(t, 0), "Name");
    ck_assert_str_eq(col_name(t, 1), "Replicas");
    const json_t *ready = json_array_get(json_object_get(t, "columnDefinitions"), 2);
    ck_assert_str_eq(jpath(ready, "description", NULL), "is it");
    const json_t *rep = json_array_get(json_object_get(t, "columnDefinitions"), 1);
    ck_assert_str_eq(jpath(rep, "description", NULL),
                     "Custom resource definition column (in JSONPath format): .spec.replicas");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(t, "columnDefinitions"), 3), "priority")),
                     1);
    ck_assert_str_eq(json_string_value(cell(t, 0, 0)), "w1");
    ck_assert_int_eq(json_integer_value(cell(t, 0, 1)), 2);
    ck_assert_str_eq(json_string_value(cell(t, 0, 2)), "True");
    ck_assert(json_is_null(cell(t, 0, 3)));
    ck_assert_ptr_nonnull(json_string_value(cell(t, 0, 4)));
    json_decref(t);

    /* A watch that asks for a Table gets one-row Tables, headers first only. */
    struct kop_test_resp w =
        request_ex("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1", NULL,
                   NULL, NULL, TABLE_ACCEPT);
    ck_assert_int_eq(w.code, 200);
    ck_assert_ptr_nonnull(strstr(w.body, "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Table\","
                                         "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{"
                                         "\"resourceVersion\":\""));
    ck_assert_ptr_nonnull(strstr(w.body, "\"columnDefinitions\":[{\"name\":\"Name\""));
    kop_test_resp_free(&w);
}
END_TEST

START_TEST(test_kubesim_deployment_scale)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":"
        "{\"app\":\"web\",\"tier\":\"fe\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":"
        "\"web\",\"tier\":\"fe\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"nginx\"}]}}}}",
        201));
    struct kop_test_resp d = request("GET", "/apis/apps/v1", NULL, NULL, NULL);
    ck_assert_ptr_nonnull(strstr(d.body, "\"name\":\"deployments/scale\""));
    kop_test_resp_free(&d);
    const char *path = "/apis/apps/v1/namespaces/default/deployments/web/scale";
    json_t *sc = request_json("GET", path, NULL, 200);
    ck_assert_str_eq(jpath(sc, "kind", NULL), "Scale");
    ck_assert_str_eq(jpath(sc, "apiVersion", NULL), "autoscaling/v1");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(sc, "spec"), "replicas")),
                     3);
    ck_assert_str_eq(jpath(sc, "status", "selector"), "app=web,tier=fe");
    char body[512];
    snprintf(body, sizeof(body),
             "{\"kind\":\"Scale\",\"apiVersion\":\"autoscaling/v1\",\"metadata\":{\"name\":"
             "\"web\",\"namespace\":\"default\",\"resourceVersion\":\"%s\"},\"spec\":{"
             "\"replicas\":5}}",
             jpath(sc, "metadata", "resourceVersion"));
    json_t *put = request_json("PUT", path, body, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(put, "spec"), "replicas")),
                     5);
    json_decref(put);
    /* The same resourceVersion again is stale now. */
    struct kop_test_resp r = request("PUT", path, NULL, body, NULL);
    ck_assert_int_eq(r.code, 409);
    ck_assert_ptr_nonnull(strstr(r.body, "Operation cannot be fulfilled on deployments.apps "
                                         "\\\"web\\\""));
    kop_test_resp_free(&r);
    merge_patch(path, "{\"spec\":{\"replicas\":-1}}", 422);
    merge_patch(path, "{\"spec\":{\"replicas\":1}}", 200);
    json_t *dep =
        request_json("GET", "/apis/apps/v1/namespaces/default/deployments/web", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(dep, "spec"), "replicas")),
                     1);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(dep, "metadata"), "generation")), 3);
    json_decref(dep);
    json_decref(sc);
    r = request("GET", "/apis/apps/v1/namespaces/default/deployments/nope/scale", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 404);
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_protobuf)
{
    /* kubectl create sends built-in kinds as protobuf: "k8s\0" + runtime.Unknown
     * {typeMeta{apiVersion "v1", kind "Namespace"}, raw Namespace{metadata{name
     * "pb"}}, contentEncoding "", contentType ""}. */
    static const char ns[] = "k8s\0"
                             "\x0a\x0f\x0a\x02v1\x12\x09Namespace"
                             "\x12\x06\x0a\x04\x0a\x02pb"
                             "\x1a\x00\x22\x00";
    next_body_len = (long)sizeof(ns) - 1;
    struct kop_test_resp r =
        request("POST", "/api/v1/namespaces", "application/vnd.kubernetes.protobuf", ns, NULL);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    json_t *v = json_loads(r.body, 0, NULL); /* JSON: the client takes it */
    ck_assert_str_eq(jpath(v, "metadata", "name"), "pb");
    ck_assert_str_eq(jpath(v, "status", "phase"), "Active");
    json_decref(v);
    kop_test_resp_free(&r);
    /* A broken envelope is a 400, another media type a 415. */
    r = request("POST", "/api/v1/namespaces", "application/vnd.kubernetes.protobuf", "k8s\x01",
                NULL);
    ck_assert_int_eq(r.code, 400);
    kop_test_resp_free(&r);
    r = request("POST", "/api/v1/namespaces", "application/cbor", "x", NULL);
    ck_assert_int_eq(r.code, 415);
    ck_assert_str_eq(r.body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                             "\"status\":\"Failure\",\"message\":\"the body of the request was "
                             "in an unknown format - accepted media types include: "
                             "application/json\",\"reason\":\"UnsupportedMediaType\","
                             "\"code\":415}\n");
    kop_test_resp_free(&r);
}
END_TEST

/* A protobuf writer for hand-built request bodies (field numbers from the
 * upstream generated.proto files). */
struct pbw {
    unsigned char b[1024];
    size_t n;
};

static void pb_varint(struct pbw *w, uint64_t v)
{
    do {
        ck_assert_uint_lt(w->n, sizeof(w->b));
        w->b[w->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void pb_len(struct pbw *w, unsigned int field, const void *p, size_t n)
{
    pb_varint(w, (uint64_t)field << 3 | 2);
    pb_varint(w, n);
    ck_assert_uint_le(w->n + n, sizeof(w->b));
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void pb_str(struct pbw *w, unsigned int field, const char *s)
{
    pb_len(w, field, s, strlen(s));
}

static void pb_msg(struct pbw *w, unsigned int field, const struct pbw *m)
{
    pb_len(w, field, m->b, m->n);
}

static void pb_int(struct pbw *w, unsigned int field, uint64_t v)
{
    pb_varint(w, (uint64_t)field << 3);
    pb_varint(w, v);
}

/* POST "k8s\0" + Unknown{typeMeta, raw}; the JSON answer, its code in *ret_code. */
static json_t *pb_post_code(const char *path, const char *av, const char *kind,
                            const struct pbw *raw, long *ret_code)
{
    struct pbw tm = {0}, env = {0};
    memcpy(env.b, "k8s", 4);
    env.n = 4;
    pb_str(&tm, 1, av);
    pb_str(&tm, 2, kind);
    pb_msg(&env, 1, &tm);
    pb_msg(&env, 2, raw);
    next_body_len = (long)env.n;
    struct kop_test_resp r =
        request("POST", path, "application/vnd.kubernetes.protobuf", (char *)env.b, NULL);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_msg(v != NULL, "%s: %ld %s", path, r.code, r.body);
    *ret_code = r.code;
    kop_test_resp_free(&r);
    return v;
}

/* pb_post_code that must create (201). */
static json_t *pb_post(const char *path, const char *av, const char *kind, const struct pbw *raw)
{
    long code = 0;
    json_t *v = pb_post_code(path, av, kind, raw, &code);
    ck_assert_msg(code == 201, "%s: %ld", path, code);
    return v;
}

START_TEST(test_kubesim_protobuf_types)
{
    /* Pod{metadata{name}, spec{containers[{name, image, ports[{containerPort}],
     * resources{limits{"cpu": Quantity{"500m"}}}}]}} */
    struct pbw md = {0}, q = {0}, ent = {0}, res = {0}, port = {0}, ctr = {0}, spec = {0},
               pod = {0};
    pb_str(&md, 1, "pbpod");
    pb_str(&q, 1, "500m");
    pb_str(&ent, 1, "cpu");
    pb_msg(&ent, 2, &q);
    pb_msg(&res, 1, &ent);
    pb_int(&port, 3, 8080); /* ContainerPort.containerPort */
    pb_str(&ctr, 1, "c");
    pb_str(&ctr, 2, "busybox");
    pb_msg(&ctr, 6, &port);
    pb_msg(&ctr, 8, &res);
    pb_msg(&spec, 2, &ctr);
    pb_msg(&pod, 1, &md);
    pb_msg(&pod, 2, &spec);
    json_t *v = pb_post("/api/v1/namespaces/default/pods", "v1", "Pod", &pod);
    json_t *c = json_array_get(json_object_get(json_object_get(v, "spec"), "containers"), 0);
    json_t *lim = json_object_get(json_object_get(c, "resources"), "limits");
    ck_assert_str_eq(json_string_value(json_object_get(lim, "cpu")), "500m");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(c, "ports"), 0), "containerPort")),
                     8080);
    json_decref(v);

    /* Lease{metadata, spec{holderIdentity, leaseDurationSeconds, acquireTime
     * MicroTime{seconds, nanos}, leaseTransitions -1 (int32 as a 10-byte varint)}}:
     * decoded to -1, which the Lease validation refuses. */
    struct pbw lmd = {0}, mt = {0}, ls = {0}, lease = {0};
    pb_str(&lmd, 1, "pblease");
    pb_int(&mt, 1, 1700000000);
    pb_int(&mt, 2, 123456789);
    pb_str(&ls, 1, "me");
    pb_int(&ls, 2, 15);
    pb_msg(&ls, 3, &mt);
    struct pbw ls_neg = ls;
    pb_int(&ls_neg, 5, (uint64_t)(int64_t)-1);
    pb_int(&ls, 5, 3);
    pb_msg(&lease, 1, &lmd);
    struct pbw lease_neg = lease;
    pb_msg(&lease, 2, &ls);
    pb_msg(&lease_neg, 2, &ls_neg);
    long code = 0;
    v = pb_post_code("/apis/coordination.k8s.io/v1/namespaces/default/leases",
                     "coordination.k8s.io/v1", "Lease", &lease_neg, &code);
    ck_assert_int_eq(code, 422);
    ck_assert_str_eq(json_string_value(json_object_get(v, "message")),
                     "Lease.coordination.k8s.io \"pblease\" is invalid: spec.leaseTransitions: "
                     "Invalid value: -1: must be greater than or equal to 0");
    json_decref(v);
    v = pb_post("/apis/coordination.k8s.io/v1/namespaces/default/leases", "coordination.k8s.io/v1",
                "Lease", &lease);
    json_t *sp = json_object_get(v, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(sp, "acquireTime")),
                     "2023-11-14T22:13:20.123456Z");
    ck_assert_int_eq(json_integer_value(json_object_get(sp, "leaseDurationSeconds")), 15);
    ck_assert_int_eq(json_integer_value(json_object_get(sp, "leaseTransitions")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(sp, "holderIdentity")), "me");
    json_decref(v);

    /* Service ports: targetPort IntOrString{type 0, intVal 8080}; Secret
     * data map<string, bytes> comes out base64. */
    struct pbw smd = {0}, ios = {0}, sport = {0}, sspec = {0}, svc = {0};
    pb_str(&smd, 1, "pbsvc");
    pb_int(&ios, 1, 0);
    pb_int(&ios, 2, 8080);
    pb_int(&sport, 3, 80);
    pb_msg(&sport, 4, &ios);
    pb_msg(&sspec, 1, &sport);
    pb_msg(&svc, 1, &smd);
    pb_msg(&svc, 2, &sspec);
    v = pb_post("/api/v1/namespaces/default/services", "v1", "Service", &svc);
    json_t *p0 = json_array_get(json_object_get(json_object_get(v, "spec"), "ports"), 0);
    ck_assert(json_is_integer(json_object_get(p0, "targetPort")));
    ck_assert_int_eq(json_integer_value(json_object_get(p0, "targetPort")), 8080);
    json_decref(v);
    struct pbw semd = {0}, de = {0}, sec = {0};
    pb_str(&semd, 1, "pbsecret");
    pb_str(&de, 1, "k");
    pb_len(&de, 2, "\x00\xff", 2);
    pb_msg(&sec, 1, &semd);
    pb_msg(&sec, 2, &de);
    v = pb_post("/api/v1/namespaces/default/secrets", "v1", "Secret", &sec);
    ck_assert_str_eq(jpath(v, "data", "k"), "AP8=");
    json_decref(v);

    /* A typed client's DELETE carries DeleteOptions in protobuf: a uid
     * precondition that does not match is a 409. */
    struct pbw pre = {0}, opts = {0}, tm = {0}, env = {0};
    pb_str(&pre, 1, "not-the-uid");
    pb_msg(&opts, 2, &pre);
    memcpy(env.b, "k8s", 4);
    env.n = 4;
    pb_str(&tm, 1, "v1");
    pb_str(&tm, 2, "DeleteOptions");
    pb_msg(&env, 1, &tm);
    pb_msg(&env, 2, &opts);
    next_body_len = (long)env.n;
    struct kop_test_resp r = request("DELETE", "/api/v1/namespaces/default/secrets/pbsecret",
                                     "application/vnd.kubernetes.protobuf", (char *)env.b, NULL);
    ck_assert_msg(r.code == 409, "%ld %s", r.code, r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "Operation cannot be fulfilled on Secret "
                                         "\\\"pbsecret\\\": the UID in the precondition "
                                         "(not-the-uid) does not match the UID in record ("));
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_apply_conflict)
{
    const char *path = "/api/v1/namespaces/default/configmaps/ssa";
    const char *ct = "application/apply-patch+yaml";
    /* A YAML body (sigs.k8s.io/yaml reads apply-patch+yaml). */
    struct kop_test_resp r =
        request("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=one", ct,
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\n"
                "  labels: {z: \"1\", b: \"2\"}\ndata:\n  a: \"1\"\n",
                NULL);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    json_t *created = json_loads(r.body, 0, NULL);
    json_t *mf0 =
        json_array_get(json_object_get(json_object_get(created, "metadata"), "managedFields"), 0);
    char *f0 = json_dumps(json_object_get(mf0, "fieldsV1"), JSON_COMPACT);
    /* fieldpath's order: sorted fields */
    ck_assert_str_eq(f0, "{\"f:data\":{\"f:a\":{}},\"f:metadata\":{\"f:labels\":{\"f:b\":{},"
                         "\"f:z\":{}}}}");
    ck_assert_str_eq(json_string_value(json_object_get(mf0, "operation")), "Apply");
    free(f0);
    json_decref(created);
    kop_test_resp_free(&r);
    r = request("PATCH", path, ct, "data: [unclosed", NULL);
    ck_assert_int_eq(r.code, 400);
    kop_test_resp_free(&r);
    r = request("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=two", ct,
                "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                "{\"name\":\"ssa\"},\"data\":{\"a\":\"2\"}}",
                NULL);
    ck_assert_int_eq(r.code, 409);
    /* apimachinery's managedfields/internal/conflict.go */
    ck_assert_str_eq(r.body, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                             "\"status\":\"Failure\",\"message\":\"Apply failed with 1 "
                             "conflict: conflict with \\\"one\\\": .data.a\",\"reason\":"
                             "\"Conflict\",\"details\":{\"causes\":[{\"reason\":"
                             "\"FieldManagerConflict\",\"message\":\"conflict with "
                             "\\\"one\\\"\",\"field\":\".data.a\"}]},\"code\":409}\n");
    kop_test_resp_free(&r);
    /* An Update by a third manager takes the field from "one". */
    merge_patch("/api/v1/namespaces/default/configmaps/ssa?fieldManager=three",
                "{\"data\":{\"a\":\"3\"}}", 200);
    json_t *cm = request_json("GET", path, NULL, 200);
    json_t *mf = json_object_get(json_object_get(cm, "metadata"), "managedFields");
    ck_assert_int_eq(json_array_size(mf), 2); /* "one" keeps the labels */
    char *one = json_dumps(json_object_get(json_array_get(mf, 0), "fieldsV1"), JSON_COMPACT);
    ck_assert_str_eq(one, "{\"f:metadata\":{\"f:labels\":{\"f:b\":{},\"f:z\":{}}}}");
    free(one);
    json_t *e = json_array_get(mf, 1);
    ck_assert_str_eq(json_string_value(json_object_get(e, "manager")), "three");
    ck_assert_str_eq(json_string_value(json_object_get(e, "operation")), "Update");
    char *fields = json_dumps(json_object_get(e, "fieldsV1"), JSON_COMPACT);
    ck_assert_str_eq(fields, "{\"f:data\":{\"f:a\":{}}}");
    free(fields);
    json_decref(cm);
    /* "two" conflicts with "three" now; force takes the field. */
    r = request("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=two&force=true",
                ct,
                "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":"
                "{\"name\":\"ssa\"},\"data\":{\"a\":\"2\"}}",
                NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    cm = request_json("GET", path, NULL, 200);
    ck_assert_str_eq(jpath(cm, "data", "a"), "2");
    mf = json_object_get(json_object_get(cm, "metadata"), "managedFields");
    ck_assert_int_eq(json_array_size(mf), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mf, 0), "manager")), "one");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mf, 1), "manager")), "two");
    json_decref(cm);
    /* fieldManager is required for apply. */
    r = request("PATCH", path, ct, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\"}", NULL);
    ck_assert_int_eq(r.code, 422);
    kop_test_resp_free(&r);
}
END_TEST

/* The managedFields entry i of obj. @ref borrow */
static const json_t *mf_entry(const json_t *obj, size_t i)
{
    return json_array_get(json_object_get(json_object_get(obj, "metadata"), "managedFields"), i);
}

static size_t mf_count(const json_t *obj)
{
    return json_array_size(json_object_get(json_object_get(obj, "metadata"), "managedFields"));
}

/* The manager and compact fieldsV1 of entry i are want_manager and want_fields. */
static void expect_entry(const json_t *obj, size_t i, const char *want_manager,
                         const char *want_fields)
{
    const json_t *e = mf_entry(obj, i);
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(json_string_value(json_object_get(e, "manager")), want_manager);
    char *f = json_dumps(json_object_get(e, "fieldsV1"), JSON_COMPACT);
    ck_assert_str_eq(f, want_fields);
    free(f);
}

#define MF_CMS "/api/v1/namespaces/default/configmaps"
#define MF_CLIENT_ENTRIES                                                                          \
    "[{\"manager\":\"zeta\",\"operation\":\"Update\",\"apiVersion\":\"v1\","                       \
    "\"time\":\"2020-01-01T10:00:00.5+02:00\",\"fieldsType\":\"FieldsV1\","                        \
    "\"fieldsV1\":{\"f:data\":{\"f:other\":{}}}},"                                                 \
    "{\"manager\":\"%s\",\"operation\":\"%s\",\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\","  \
    "\"fieldsV1\":{\"f:data\":{\"f:gone\":{},\"f:a\":{}}}}]"

/* A create whose body carries managedFields: apimachinery's field manager
 * (internal/fieldmanager.go, decodeLiveOrNew and Update) keeps the entries
 * when they decode, takes from them what the create sets (against the
 * zero object every field is new), adds the creator's entry and writes
 * them sorted (Apply first, then by time) with times in UTC seconds. */
START_TEST(test_kubesim_managed_fields_on_create)
{
    char body[2048], entries[1024];
    snprintf(entries, sizeof(entries), MF_CLIENT_ENTRIES, "alpha", "Apply");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"mf-create\",\"managedFields\":%s},"
             "\"data\":{\"a\":\"1\",\"b\":\"2\"}}",
             entries);
    json_t *cm = request_json("POST", MF_CMS "?fieldManager=creator", body, 201);
    ck_assert_uint_eq(mf_count(cm), 3);
    expect_entry(cm, 0, "alpha", "{\"f:data\":{\"f:gone\":{}}}");
    ck_assert_str_eq(json_string_value(json_object_get(mf_entry(cm, 0), "operation")), "Apply");
    expect_entry(cm, 1, "zeta", "{\"f:data\":{\"f:other\":{}}}");
    ck_assert_str_eq(json_string_value(json_object_get(mf_entry(cm, 1), "time")),
                     "2020-01-01T08:00:00Z");
    expect_entry(cm, 2, "creator", "{\"f:data\":{\".\":{},\"f:a\":{},\"f:b\":{}}}");
    json_decref(cm);

    /* entries that do not decode (an operation other than Apply or
     * Update) are dropped, all of them: the live object's are used, none
     * for a create */
    snprintf(entries, sizeof(entries), MF_CLIENT_ENTRIES, "alpha", "Bogus");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"mf-undecoded\",\"managedFields\":%s},"
             "\"data\":{\"a\":\"1\"}}",
             entries);
    cm = request_json("POST", MF_CMS "?fieldManager=creator", body, 201);
    ck_assert_uint_eq(mf_count(cm), 1);
    expect_entry(cm, 0, "creator", "{\"f:data\":{\".\":{},\"f:a\":{}}}");
    json_decref(cm);

    /* entries that decode but fail ObjectMeta validation
     * (ValidateManagedFields): 422 */
    char longname[200];
    memset(longname, 'm', 129);
    longname[129] = '\0';
    snprintf(entries, sizeof(entries), MF_CLIENT_ENTRIES, longname, "Apply");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"mf-long\",\"managedFields\":%s},\"data\":{\"c\":\"1\"}}",
             entries);
    struct kop_test_resp r = request("POST", MF_CMS, NULL, body, NULL);
    ck_assert_int_eq(r.code, 422);
    ck_assert_msg(strstr(r.body, "\"message\":\"ConfigMap \\\"mf-long\\\" is invalid: "
                                 "metadata.managedFields[0].manager: Too long: may not be more "
                                 "than 128 bytes\""),
                  "%s", r.body);
    kop_test_resp_free(&r);
    snprintf(entries, sizeof(entries), MF_CLIENT_ENTRIES, "al\\u0001pha", "Apply");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"mf-ctl\",\"managedFields\":%s},\"data\":{\"c\":\"1\"}}",
             entries);
    r = request("POST", MF_CMS, NULL, body, NULL);
    ck_assert_int_eq(r.code, 422);
    ck_assert_msg(strstr(r.body, "metadata.managedFields[0].manager: Invalid value: "
                                 "\\\"al\\\\x01pha\\\": invalid character U+0001 (at position 2)"),
                  "%s", r.body);
    kop_test_resp_free(&r);
    ck_assert_ptr_null(get_or_null(MF_CMS "/mf-ctl"));

    /* the default manager is the User-Agent's printable prefix, at most
     * 128 bytes (create.go prefixFromUserAgent): no 422 */
    char ua[512];
    snprintf(ua, sizeof(ua), "User-Agent: %s%s/1.0", longname, longname);
    r = request_ex("POST", MF_CMS, NULL,
                   "{\"metadata\":{\"name\":\"mf-ua\"},\"data\":{\"a\":\"1\"}}", NULL, ua);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    cm = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    ck_assert_uint_eq(json_string_length(json_object_get(mf_entry(cm, 0), "manager")), 128);
    json_decref(cm);
}
END_TEST

/* An update's managedFields (decodeLiveOrNew): one empty entry resets them
 * (the writer then owns what it changed); entries that do not decode leave
 * the live ones; entries that decode replace them. */
START_TEST(test_kubesim_managed_fields_on_update)
{
    const char *path = MF_CMS "/mf-update";
    create_cm("{\"metadata\":{\"name\":\"mf-update\"},\"data\":{\"a\":\"1\"}}");
    merge_patch(MF_CMS "/mf-update?fieldManager=patcher", "{\"data\":{\"b\":\"2\"}}", 200);

    /* missing fieldsType: the live entries stay, the writer's is added */
    merge_patch(MF_CMS "/mf-update?fieldManager=third",
                "{\"metadata\":{\"managedFields\":[{\"manager\":\"x\",\"operation\":\"Update\","
                "\"apiVersion\":\"v1\",\"fieldsV1\":{\"f:data\":{}}}]},\"data\":{\"c\":\"3\"}}",
                200);
    json_t *cm = request_json("GET", path, NULL, 200);
    ck_assert_uint_eq(mf_count(cm), 3);
    expect_entry(cm, 2, "third", "{\"f:data\":{\"f:c\":{}}}");
    json_decref(cm);

    /* entries that decode replace the live ones */
    merge_patch(MF_CMS "/mf-update?fieldManager=fourth",
                "{\"metadata\":{\"managedFields\":[{\"manager\":\"x\",\"operation\":\"Update\","
                "\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\","
                "\"fieldsV1\":{\"f:data\":{\"f:a\":{}}}}]},\"data\":{\"d\":\"4\"}}",
                200);
    cm = request_json("GET", path, NULL, 200);
    ck_assert_uint_eq(mf_count(cm), 2);
    expect_entry(cm, 0, "x", "{\"f:data\":{\"f:a\":{}}}");
    ck_assert_ptr_null(json_object_get(mf_entry(cm, 0), "time"));
    expect_entry(cm, 1, "fourth", "{\"f:data\":{\"f:d\":{}}}");
    json_decref(cm);

    /* [{}] resets them: a write that changes nothing leaves none */
    merge_patch(path, "{\"metadata\":{\"managedFields\":[{}]}}", 200);
    cm = request_json("GET", path, NULL, 200);
    ck_assert_ptr_null(json_object_get(json_object_get(cm, "metadata"), "managedFields"));
    json_decref(cm);

    /* so does an empty list for a built-in kind (decoded into a non-nil
     * slice) */
    merge_patch(MF_CMS "/mf-update?fieldManager=fifth", "{\"data\":{\"e\":\"5\"}}", 200);
    merge_patch(MF_CMS "/mf-update?fieldManager=sixth",
                "{\"metadata\":{\"managedFields\":[]},\"data\":{\"f\":\"6\"}}", 200);
    cm = request_json("GET", path, NULL, 200);
    ck_assert_uint_eq(mf_count(cm), 1);
    expect_entry(cm, 0, "sixth", "{\"f:data\":{\"f:f\":{}}}");
    json_decref(cm);

    /* an apply may not set them, not even to an empty list
     * (structuredMergeManager.Apply), whether or not the object exists */
    static const char *const apply_paths[] = {MF_CMS "/mf-update?fieldManager=ap",
                                              MF_CMS "/mf-apply-new?fieldManager=ap"};
    for (size_t i = 0; i < 2; i++) {
        struct kop_test_resp r = request("PATCH", apply_paths[i], "application/apply-patch+yaml",
                                         "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\","
                                         "\"metadata\":{\"managedFields\":[]}}",
                                         NULL);
        ck_assert_int_eq(r.code, 400);
        ck_assert_msg(strstr(r.body, "\"message\":\"metadata.managedFields must be nil\","
                                     "\"reason\":\"BadRequest\""),
                      "%s", r.body);
        kop_test_resp_free(&r);
    }
    ck_assert_ptr_null(get_or_null(MF_CMS "/mf-apply-new"));

    /* a custom resource's empty list goes with the metadata coercion
     * (objectmeta.SetObjectMeta: omitempty): the live entries stay */
    json_decref(request_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             widget_crd, 201));
    json_decref(request_json(
        "POST", "/apis/test.example.com/v1/namespaces/default/widgets?fieldManager=maker",
        "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Widget\","
        "\"metadata\":{\"name\":\"mfw\",\"labels\":{\"a\":\"1\"}},"
        "\"spec\":{\"replicas\":1}}",
        201));
    merge_patch("/apis/test.example.com/v1/namespaces/default/widgets/mfw?fieldManager=other",
                "{\"metadata\":{\"managedFields\":[]},\"spec\":{\"replicas\":2}}", 200);
    json_t *w =
        request_json("GET", "/apis/test.example.com/v1/namespaces/default/widgets/mfw", NULL, 200);
    ck_assert_uint_eq(mf_count(w), 2);
    /* (a custom resource's spec is a map: the set holds it, as {}) */
    expect_entry(w, 0, "maker",
                 "{\"f:metadata\":{\"f:labels\":{\".\":{},\"f:a\":{}}},\"f:spec\":{}}");
    expect_entry(w, 1, "other", "{\"f:spec\":{\"f:replicas\":{}}}");
    json_decref(w);
}
END_TEST

/* ---- run-time webhook service map ------------------------------------------------ */

/* A validating webhook that admits everything and counts its calls. */
struct hook {
    struct fhook f;
    int calls; /* under the fake's lock */
};

static void hook_answer(void *ud, const struct fhook_request *rq, struct fhook_answer *ans)
{
    struct hook *h = ud;
    ans->body = fhook_admit(rq->body, true);
    fhook_lock(&h->f);
    h->calls++;
    fhook_unlock(&h->f);
}

static int hook_calls(struct hook *h)
{
    return fhook_count(&h->f, &h->calls);
}

/* Create a labelled ConfigMap (the webhook's objectSelector); the code. */
static long create_hooked(const char *name)
{
    char body[256];
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"hook\":\"yes\"}}}",
             name);
    struct kop_test_resp r =
        request("POST", "/api/v1/namespaces/default/configmaps", NULL, body, NULL);
    long code = r.code;
    if (code != 201 && code != 500)
        ck_abort_msg("create %s: %ld %s", name, code, r.body);
    if (code == 500)
        ck_assert_msg(strstr(r.body, "failed calling webhook") != NULL, "%s", r.body);
    kop_test_resp_free(&r);
    return code;
}

static void post_service(const char *method, const char *body, long want, const char *want_text)
{
    struct kop_test_resp r = request(method, "/_kubesim/services", NULL, body, NULL);
    ck_assert_msg(r.code == want, "%s %s: %ld %s", method, body, r.code, r.body);
    if (want_text)
        ck_assert_msg(strstr(r.body, want_text) != NULL, "%s: no %s in %s", body, want_text,
                      r.body);
    kop_test_resp_free(&r);
}

START_TEST(test_kubesim_service_map_runtime)
{
    /* Two webhooks with the same certificate, on kernel-chosen ports. */
    char *certs = kop_test_path(tmpdir, "certs");
    struct kop_test_certs dev;
    kop_test_certs_make(&dev, certs);
    struct hook hooks[2];
    memset(hooks, 0, sizeof(hooks));
    for (int i = 0; i < 2; i++)
        fhook_start(&hooks[i].f, dev.crt_pem, dev.key_pem, 0, hook_answer, &hooks[i]);

    /* No --service at start: the list is empty and the Service unknown. */
    json_t *l = request_json("GET", "/_kubesim/services", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "services")), 0);
    json_decref(l);
    char *vwc = NULL;
    int n = asprintf(&vwc,
                     "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
                     "\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"cm\"},"
                     "\"webhooks\":[{\"name\":\"cm.test.example.com\",\"admissionReviewVersions\":"
                     "[\"v1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\","
                     "\"timeoutSeconds\":5,\"clientConfig\":{\"caBundle\":\"%s\",\"service\":{"
                     "\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"path\":"
                     "\"/validate\",\"port\":443}},\"rules\":[{\"apiGroups\":[\"\"],"
                     "\"apiVersions\":[\"v1\"],\"operations\":[\"CREATE\"],\"resources\":["
                     "\"configmaps\"]}],\"objectSelector\":{\"matchLabels\":{\"hook\":\"yes\"}}}]}",
                     dev.ca_b64);
    ck_assert_int_gt(n, 0);
    json_decref(request_json(
        "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", vwc, 201));
    struct kop_test_resp r =
        request("POST", "/api/v1/namespaces/default/configmaps", NULL,
                "{\"metadata\":{\"name\":\"h0\",\"labels\":{\"hook\":\"yes\"}}}", NULL);
    ck_assert_int_eq(r.code, 500);
    ck_assert_ptr_nonnull(strstr(r.body, "service \\\"kop-webhook-service\\\" not found"));
    kop_test_resp_free(&r);

    /* POST sends the Service to webhook A... */
    char body[256];
    snprintf(body, sizeof(body),
             "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":"
             "\"127.0.0.1:%u\"}",
             hooks[0].f.port);
    l = request_json("POST", "/_kubesim/services", body, 200);
    const json_t *svcs = json_object_get(l, "services");
    ck_assert_int_eq(json_array_size(svcs), 1);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%u", hooks[0].f.port);
    ck_assert_str_eq(jpath(json_array_get(svcs, 0), "target", NULL), want);
    ck_assert_str_eq(jpath(json_array_get(svcs, 0), "namespace", NULL), "kop-system");
    ck_assert_str_eq(jpath(json_array_get(svcs, 0), "name", NULL), "kop-webhook-service");
    json_decref(l);
    ck_assert_int_eq(create_hooked("h1"), 201);
    ck_assert_int_eq(hook_calls(&hooks[0]), 1);
    ck_assert_int_eq(hook_calls(&hooks[1]), 0);

    /* ...a second POST replaces the target: the next call goes to B. */
    snprintf(body, sizeof(body),
             "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":"
             "\"127.0.0.1:%u\"}",
             hooks[1].f.port);
    json_decref(request_json("POST", "/_kubesim/services", body, 200));
    post_service("POST", "{\"namespace\":\"other\",\"name\":\"svc\",\"target\":\"127.0.0.1:1\"}",
                 200, "\"other\"");
    l = request_json("GET", "/_kubesim/services", NULL, 200);
    svcs = json_object_get(l, "services");
    ck_assert_int_eq(json_array_size(svcs), 2);
    snprintf(want, sizeof(want), "127.0.0.1:%u", hooks[1].f.port);
    ck_assert_str_eq(jpath(json_array_get(svcs, 0), "target", NULL), want);
    json_decref(l);
    ck_assert_int_eq(create_hooked("h2"), 201);
    ck_assert_int_eq(create_hooked("h3"), 201);
    ck_assert_int_eq(hook_calls(&hooks[0]), 1);
    ck_assert_int_eq(hook_calls(&hooks[1]), 2);

    /* Bad documents are refused and change nothing. */
    post_service("POST", "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\"}", 400,
                 "target must be HOST:PORT");
    post_service("POST",
                 "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":"
                 "\"127.0.0.1:99999\"}",
                 400, "HOST:PORT");
    post_service("POST", "{\"namespace\":\"Bad_NS\",\"name\":\"x\",\"target\":\"h:1\"}", 400,
                 "DNS labels");
    post_service("POST", "[1]", 400, "JSON object");
    post_service("POST", NULL, 400, "JSON object");
    post_service("DELETE", "{\"namespace\":\"kop-system\",\"name\":\"nope\"}", 404,
                 "no service mapping for kop-system/nope");
    post_service("PATCH", "{}", 405, NULL);
    ck_assert_int_eq(create_hooked("h4"), 201);
    ck_assert_int_eq(hook_calls(&hooks[1]), 3);

    /* DELETE removes it: failurePolicy Fail makes the create fail. */
    post_service("DELETE", "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\"}", 200,
                 "\"other\"");
    l = request_json("GET", "/_kubesim/services", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "services")), 1);
    json_decref(l);
    ck_assert_int_eq(create_hooked("h5"), 500);
    ck_assert_int_eq(hook_calls(&hooks[0]) + hook_calls(&hooks[1]), 4);

    for (int i = 0; i < 2; i++) {
        fhook_free(&hooks[i].f);
    }
    free(vwc);
    kop_test_certs_free(&dev);
    free(certs);
}
END_TEST

/* ---- statistics by User-Agent ------------------------------------------------------- */

START_TEST(test_kubesim_stats_user_agent)
{
    struct kop_test_resp r = request("DELETE", "/_kubesim/stats", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    const char *kop_ua = "User-Agent: kop/0.1.0 (linux/amd64)";
    r = request_ex("POST", "/api/v1/namespaces/default/configmaps", NULL,
                   "{\"metadata\":{\"name\":\"ua\"}}", NULL, kop_ua);
    ck_assert_int_eq(r.code, 201);
    kop_test_resp_free(&r);
    r = request_ex("PATCH", "/api/v1/namespaces/default/configmaps/ua",
                   "application/merge-patch+json", "{\"data\":{\"k\":\"v\"}}", NULL, kop_ua);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    r = request_ex("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases", NULL, NULL,
                   NULL, kop_ua);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    /* Someone else: a test client and a kubectl. */
    r = request_ex("PATCH", "/api/v1/namespaces/default/configmaps/ua",
                   "application/merge-patch+json", "{\"data\":{\"k\":\"w\"}}", NULL,
                   "User-Agent: kubectl/v1.32.3 (linux/amd64) kubernetes/32cc146");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/configmaps/ua", NULL, 200));

    json_t *all = request_json("GET", "/_kubesim/stats", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(all, "total")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(all, "writeTotal")), 4);
    const json_t *reqs = json_object_get(all, "requests");
    ck_assert_str_eq(jpath(json_array_get(reqs, 0), "userAgent", NULL), "kop/0.1.0 (linux/amd64)");
    ck_assert_str_eq(jpath(json_array_get(reqs, 3), "userAgent", NULL),
                     "kubectl/v1.32.3 (linux/amd64) kubernetes/32cc146");
    /* libcurl sends none unless told: an empty userAgent. */
    ck_assert_str_eq(jpath(json_array_get(reqs, 4), "userAgent", NULL), "");
    json_decref(all);

    json_t *mine = request_json("GET", "/_kubesim/stats?userAgent=kop%2F", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(mine, "total")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(mine, "writeTotal")), 2);
    ck_assert_str_eq(jpath(mine, "userAgent", NULL), "kop/");
    const json_t *w = json_object_get(json_object_get(mine, "writes"), "configmaps");
    ck_assert_int_eq(json_integer_value(json_object_get(w, "create")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "patch")), 1);
    ck_assert_ptr_null(json_object_get(w, "delete"));
    reqs = json_object_get(mine, "requests");
    ck_assert_int_eq(json_array_size(reqs), 3);
    ck_assert_str_eq(jpath(json_array_get(reqs, 2), "verb", NULL), "list");
    ck_assert_str_eq(jpath(json_array_get(reqs, 2), "group", NULL), "coordination.k8s.io");
    json_decref(mine);

    json_t *none = request_json("GET", "/_kubesim/stats?userAgent=nobody", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(none, "total")), 0);
    ck_assert_int_eq(json_array_size(json_object_get(none, "requests")), 0);
    ck_assert_int_eq(json_object_size(json_object_get(none, "writes")), 0);
    json_decref(none);
}
END_TEST

/* ---- fault filters -------------------------------------------------------------------- */

static long lease_update(const char *ns)
{
    char path[256], body[256];
    snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases", ns);
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"l-%s\"},\"spec\":{}}", ns);
    struct kop_test_resp r = request("POST", path, NULL, body, NULL);
    long code = r.code;
    kop_test_resp_free(&r);
    return code;
}

START_TEST(test_kubesim_fault_filters)
{
    json_decref(request_json("POST", "/api/v1/namespaces",
                             "{\"metadata\":{\"name\":\"kop-system\"}}", 201));
    /* Leases in kop-system only. */
    json_t *d = request_json("POST", "/_kubesim/faults",
                             "{\"rules\":[{\"verb\":\"create\",\"code\":500,\"rate\":1,"
                             "\"resource\":\"leases\",\"group\":\"coordination.k8s.io\","
                             "\"namespace\":\"kop-system\"}]}",
                             200);
    const json_t *rule = json_array_get(json_object_get(d, "rules"), 0);
    ck_assert_str_eq(jpath(rule, "resource", NULL), "leases");
    ck_assert_str_eq(jpath(rule, "group", NULL), "coordination.k8s.io");
    ck_assert_str_eq(jpath(rule, "namespace", NULL), "kop-system");
    json_decref(d);
    ck_assert_int_eq(lease_update("kop-system"), 500);
    ck_assert_int_eq(lease_update("default"), 201);
    json_decref(request_json("POST", "/api/v1/namespaces/kop-system/configmaps",
                             "{\"metadata\":{\"name\":\"f1\"}}", 201));

    /* group "" is the core group: configmaps fail, leases do not. */
    json_decref(request_json("POST", "/_kubesim/faults",
                             "{\"rules\":[{\"code\":503,\"group\":\"\"}]}", 200));
    struct kop_test_resp r =
        request("GET", "/api/v1/namespaces/kop-system/configmaps/f1", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 503);
    kop_test_resp_free(&r);
    r = request("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/l-default", NULL,
                NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);

    /* A subresource is matched only by "resource/sub" (as in RBAC); and
     * a namespace filter never matches cluster-scoped requests. */
    json_decref(
        request_json("POST", "/_kubesim/faults",
                     "{\"rules\":[{\"code\":500,\"resource\":\"namespaces/status\"},"
                     "{\"code\":409,\"resource\":\"namespaces\",\"namespace\":\"default\"}]}",
                     200));
    r = request("GET", "/api/v1/namespaces/kop-system", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    r = request("GET", "/api/v1/namespaces/kop-system/status", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 500);
    kop_test_resp_free(&r);

    /* A bad rule is refused and the rules in force stay. */
    r = request("POST", "/_kubesim/faults", NULL, "{\"rules\":[{\"code\":500,\"resource\":7}]}",
                NULL);
    ck_assert_int_eq(r.code, 400);
    kop_test_resp_free(&r);
    d = request_json("GET", "/_kubesim/faults", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(d, "rules")), 2);
    json_decref(d);
    json_decref(request_json("POST", "/_kubesim/faults", "{\"rules\":[]}", 200));
}
END_TEST

/* ---- second kubesims: flags, usage errors ------------------------------------------ */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* kubesim with args exits 2 and prints needle. */
static void expect_usage_error(char *const *args, const char *needle)
{
    struct kop_test_proc p;
    ck_assert_int_eq(kop_test_spawn(&p, args), 0);
    ck_assert_int_eq(kop_test_wait_for(&p, 0, "no such line", 5000, NULL), -EPIPE);
    char *out = kop_test_output(&p);
    ck_assert_msg(strstr(out, needle) != NULL, "no '%s' in: %s", needle, out);
    free(out);
    int st = kop_test_stop(&p, SIGTERM, 5000);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
}

/* A second kubesim (its CA written to ca2, started with args) that the
 * request helpers talk to until second_sim_stop. */
struct second_sim {
    struct kop_test_kubesim sim;
    char saved_url[sizeof(base_url)];
    char *saved_ca;
};

static void second_sim_start(struct second_sim *s, char *ca2, char *const *args)
{
    const struct kop_test_kubesim_options o = {.ca = ca2, .token = TOKEN, .args = args};
    kop_test_kubesim_start(&s->sim, &o);
    memcpy(s->saved_url, base_url, sizeof(base_url));
    s->saved_ca = ca_path;
    snprintf(base_url, sizeof(base_url), "%s", s->sim.url);
    ca_path = ca2;
}

static void second_sim_stop(struct second_sim *s)
{
    memcpy(base_url, s->saved_url, sizeof(base_url));
    ca_path = s->saved_ca;
    ck_assert_int_eq(kop_test_kubesim_stop(&s->sim, SIGTERM, 5000), 0);
}

/* kubesim's --fault flag takes the same filters. */
START_TEST(test_kubesim_fault_flag_filters)
{
    char *ca2 = kop_test_path(tmpdir, "ca2.pem");
    char *args[] = {"--fault",
                    "create:500:1:resource=leases:group=coordination.k8s.io:namespace=default",
                    "--fault", "get:429:1:2:resource=configmaps:group=", NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);

    json_t *d = request_json("GET", "/_kubesim/faults", NULL, 200);
    const json_t *rules = json_object_get(d, "rules");
    ck_assert_int_eq(json_array_size(rules), 2);
    ck_assert_str_eq(jpath(json_array_get(rules, 0), "resource", NULL), "leases");
    ck_assert_str_eq(jpath(json_array_get(rules, 0), "namespace", NULL), "default");
    ck_assert_str_eq(jpath(json_array_get(rules, 1), "group", NULL), "");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(rules, 1), "retryAfter")),
                     2);
    json_decref(d);
    ck_assert_int_eq(lease_update("default"), 500);
    ck_assert_int_eq(lease_update("kube-system"), 201);
    struct kop_test_resp r =
        request("GET", "/api/v1/namespaces/default/configmaps/x", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 429);
    ck_assert_ptr_nonnull(strstr(r.headers, "Retry-After: 2"));
    kop_test_resp_free(&r);

    second_sim_stop(&sim2);

    /* A malformed filter is a usage error (exit 2). */
    char *bad[] = {(char *)kop_test_bin("kubesim"), "--fault", "get:500:1:colour=red", NULL};
    expect_usage_error(bad, "bad or missing value for --fault");
    free(ca2);
}
END_TEST

/* ---- static token file and audit log ------------------------------------------------ */

/* The audit line whose auditID is id (@ref new), or NULL. */
static json_t *audit_event(const char *log_path, const char *id)
{
    char *log = kop_test_read_file(log_path, NULL);
    ck_assert_ptr_nonnull(log);
    json_t *found = NULL;
    for (char *line = log, *eol; line && *line && !found; line = eol ? eol + 1 : NULL) {
        eol = strchr(line, '\n');
        if (eol)
            *eol = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        ck_assert_msg(ev != NULL, "audit line is not JSON: %s", line);
        if (strcmp(jpath(ev, "auditID", NULL), id) == 0)
            found = ev;
        else
            json_decref(ev);
    }
    free(log);
    return found;
}

/* The Audit-Id response header of r, into id. */
static void audit_id_of(const struct kop_test_resp *r, char *id, size_t len)
{
    const char *h = strstr(r->headers, "Audit-Id: ");
    ck_assert_ptr_nonnull(h);
    h += strlen("Audit-Id: ");
    size_t n = strcspn(h, "\r\n");
    ck_assert_uint_lt(n, len);
    memcpy(id, h, n);
    id[n] = '\0';
}

/* A request that must answer want; its Audit-Id into id (when id is not
 * NULL). */
static void audited(const char *method, const char *path, const char *ctype, const char *body,
                    const char *token, long want, char *id, size_t id_len)
{
    struct kop_test_resp r = request(method, path, ctype, body, token);
    ck_assert_msg(r.code == want, "%s %s: %ld, want %ld: %s", method, path, r.code, want, r.body);
    if (id)
        audit_id_of(&r, id, id_len);
    kop_test_resp_free(&r);
}

static void write_text(const char *path, const char *text);

/* v.a.b (b NULL: v.a), any type. @ref borrow */
static json_t *jpath_obj(const json_t *v, const char *a, const char *b)
{
    json_t *x = json_object_get(v, a);
    return b ? json_object_get(x, b) : x;
}

/* POST a review as TOKEN (NULL: the admin) with one extra header; the
 * parsed answer, which must have code want. */
static json_t *review(const char *path, const char *body, const char *token, const char *header,
                      long want)
{
    struct kop_test_resp r = request_ex("POST", path, NULL, body, token, header);
    ck_assert_msg(r.code == want, "POST %s: got %ld want %ld: %s", path, r.code, want, r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_msg(v != NULL, "not JSON: %s", r.body);
    kop_test_resp_free(&r);
    return v;
}

#define SAR_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#define SSAR_PATH "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

/* A SubjectAccessReview's status for USER, with the spec members EXTRA
 * (groups, attributes). @ref new */
static json_t *sar_status(const char *user, const char *extra)
{
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
             "\"spec\":{\"user\":\"%s\",%s}}",
             user, extra);
    json_t *v = review(SAR_PATH, body, NULL, NULL, 201);
    json_t *st = json_incref(json_object_get(v, "status"));
    json_decref(v);
    ck_assert(json_is_boolean(json_object_get(st, "allowed")));
    return st;
}

/* A SubjectAccessReview for the kop-system:rev service account: its status.
 * @ref new */
static json_t *sa_review(const char *attrs)
{
    return sar_status("system:serviceaccount:kop-system:rev", attrs);
}

static bool sa_allowed(const char *attrs)
{
    json_t *st = sa_review(attrs);
    bool ok = json_is_true(json_object_get(st, "allowed"));
    /* allowed: the reason names the binding; denied: none (no binding here
     * refers to a missing role, see below) */
    ck_assert_int_eq(ok, json_object_get(st, "reason") != NULL);
    json_decref(st);
    return ok;
}

struct path_code {
    const char *path;
    long code;
};

static bool answers(const void *arg)
{
    const struct path_code *pc = arg;
    struct kop_test_resp r = request("GET", pc->path, NULL, NULL, NULL);
    bool ok = r.code == pc->code;
    kop_test_resp_free(&r);
    return ok;
}

/* GET PATH answers CODE within 5 s. */
static void wait_code(const char *path, long code)
{
    const struct path_code pc = {path, code};
    ck_assert_msg(kop_test_eventually(answers, &pc, 5000), "GET %s never answered %ld", path, code);
}

/* The ServiceAccounts controller: every namespace has a "default"
 * ServiceAccount, from the start and made again when deleted; a
 * terminating namespace gets none. */
START_TEST(test_kubesim_default_service_accounts)
{
    json_t *sa =
        request_json("GET", "/api/v1/namespaces/kube-system/serviceaccounts/default", NULL, 200);
    ck_assert_str_eq(jpath(sa, "kind", NULL), "ServiceAccount");
    ck_assert_ptr_nonnull(jpath(sa, "metadata", "uid"));
    json_decref(sa);
    struct kop_test_resp nr =
        request("POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"sa-ns\"}}", NULL);
    ck_assert_msg(nr.code == 201, "namespace: %ld", nr.code);
    kop_test_resp_free(&nr);
    wait_code("/api/v1/namespaces/sa-ns/serviceaccounts/default", 200);
    json_decref(
        request_json("DELETE", "/api/v1/namespaces/sa-ns/serviceaccounts/default", NULL, 200));
    wait_code("/api/v1/namespaces/sa-ns/serviceaccounts/default", 200);
    json_decref(request_json("DELETE", "/api/v1/namespaces/sa-ns", NULL, 200));
    wait_code("/api/v1/namespaces/sa-ns", 404);
    wait_code("/api/v1/namespaces/sa-ns/serviceaccounts/default", 404);
}
END_TEST

static bool finalized(const void *arg)
{
    json_t *ns = request_json("GET", (const char *)arg, NULL, 200);
    const json_t *fin = json_object_get(json_object_get(ns, "spec"), "finalizers");
    bool done = json_array_size(fin) == 0;
    json_decref(ns);
    return done;
}

/* The resourceVersion of the object at path. malloc'd */
static char *rv_of(const char *path)
{
    json_t *o = request_json("GET", path, NULL, 200);
    char *rv = strdup(jpath(o, "metadata", "resourceVersion"));
    json_decref(o);
    return rv;
}

/* The namespace controller's condition of a type in ns (@ref borrow of ns). */
static const json_t *ns_condition(const json_t *ns, const char *type)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(json_object_get(ns, "status"), "conditions"), i, c)
    {
        if (strcmp(jpath(c, "type", NULL), type) == 0)
            return c;
    }
    return NULL;
}

static bool ns_condition_is(const void *arg)
{
    const char *const *want = arg; /* path, type, status, message */
    json_t *ns = get_or_null(want[0]);
    const json_t *c = ns_condition(ns, want[1]);
    bool ok = c && strcmp(jpath(c, "status", NULL), want[2]) == 0 &&
              strcmp(jpath(c, "message", NULL), want[3]) == 0;
    json_decref(ns);
    return ok;
}

/* The namespace controller's status conditions while a namespace's content
 * waits on finalizers (kubernetes pkg/controller/namespace/deletion:
 * deleteAllContent, status_condition_utils.go): all five types in order,
 * the remaining resources and finalizers counted, the others at their "ok"
 * variant; a message change keeps lastTransitionTime, a status change
 * moves it; the last pass (nothing left) sets every one to False before
 * the namespace is finalized. */
START_TEST(test_kubesim_namespace_conditions)
{
    const char *path = "/api/v1/namespaces/nc";
    json_decref(request_json("POST", "/api/v1/namespaces",
                             "{\"metadata\":{\"name\":\"nc\",\"finalizers\":[\"example.com/"
                             "hold\"]}}",
                             201));
    json_decref(request_json("POST", "/api/v1/namespaces/nc/configmaps",
                             "{\"metadata\":{\"name\":\"held\",\"finalizers\":[\"example.com/"
                             "x\"]}}",
                             201));
    json_decref(request_json("POST", "/api/v1/namespaces/nc/configmaps",
                             "{\"metadata\":{\"name\":\"free\"}}", 201));
    json_decref(request_json("POST", "/api/v1/namespaces/nc/secrets",
                             "{\"metadata\":{\"name\":\"s\",\"finalizers\":[\"example.com/y\","
                             "\"example.com/x\"]}}",
                             201));
    json_decref(request_json("DELETE", path, NULL, 200));
    const char *remaining[] = {path, "NamespaceContentRemaining", "True",
                               "Some resources are remaining: configmaps. has 1 resource "
                               "instances, secrets. has 1 resource instances"};
    ck_assert(kop_test_eventually(ns_condition_is, remaining, 5000));
    json_t *ns = request_json("GET", path, NULL, 200);
    static const char *const types[] = {
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining",
        "NamespaceFinalizersRemaining"};
    const json_t *conds = json_object_get(json_object_get(ns, "status"), "conditions");
    ck_assert_uint_eq(json_array_size(conds), 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(jpath(json_array_get(conds, i), "type", NULL), types[i]);
    const json_t *c = ns_condition(ns, "NamespaceDeletionDiscoveryFailure");
    ck_assert_str_eq(jpath(c, "status", NULL), "False");
    ck_assert_str_eq(jpath(c, "reason", NULL), "ResourcesDiscovered");
    ck_assert_str_eq(jpath(c, "message", NULL), "All resources successfully discovered");
    c = ns_condition(ns, "NamespaceDeletionGroupVersionParsingFailure");
    ck_assert_str_eq(jpath(c, "reason", NULL), "ParsedGroupVersions");
    ck_assert_str_eq(jpath(c, "message", NULL), "All legacy kube types successfully parsed");
    c = ns_condition(ns, "NamespaceDeletionContentFailure");
    ck_assert_str_eq(jpath(c, "status", NULL), "False");
    ck_assert_str_eq(jpath(c, "reason", NULL), "ContentDeleted");
    ck_assert_str_eq(jpath(c, "message", NULL),
                     "All content successfully deleted, may be waiting on finalization");
    c = ns_condition(ns, "NamespaceContentRemaining");
    ck_assert_str_eq(jpath(c, "reason", NULL), "SomeResourcesRemain");
    ck_assert_ptr_nonnull(jpath(c, "lastTransitionTime", NULL));
    char *remaining_ltt = strdup(jpath(c, "lastTransitionTime", NULL));
    c = ns_condition(ns, "NamespaceFinalizersRemaining");
    ck_assert_str_eq(jpath(c, "status", NULL), "True");
    ck_assert_str_eq(jpath(c, "reason", NULL), "SomeFinalizerRemain");
    ck_assert_str_eq(jpath(c, "message", NULL),
                     "Some finalizers are remaining: example.com/x in 2 resource instances, "
                     "example.com/y in 1 resource instances");
    ck_assert_str_eq(jpath(ns, "status", "phase"), "Terminating");
    json_decref(ns);

    /* one fewer: the messages follow, the times stay (same status) */
    kop_test_sleep_ms(1100);
    merge_patch("/api/v1/namespaces/nc/configmaps/held", "{\"metadata\":{\"finalizers\":null}}",
                200);
    const char *fewer[] = {path, "NamespaceFinalizersRemaining", "True",
                           "Some finalizers are remaining: example.com/x in 1 resource instances, "
                           "example.com/y in 1 resource instances"};
    ck_assert(kop_test_eventually(ns_condition_is, fewer, 5000));
    ns = request_json("GET", path, NULL, 200);
    c = ns_condition(ns, "NamespaceContentRemaining");
    ck_assert_str_eq(jpath(c, "message", NULL),
                     "Some resources are remaining: secrets. has 1 resource instances");
    ck_assert_str_eq(jpath(c, "lastTransitionTime", NULL), remaining_ltt);
    json_decref(ns);

    /* nothing left: all False, then finalized (its own finalizer holds it) */
    merge_patch("/api/v1/namespaces/nc/secrets/s", "{\"metadata\":{\"finalizers\":null}}", 200);
    ck_assert(kop_test_eventually(finalized, path, 5000));
    ns = request_json("GET", path, NULL, 200);
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(
            jpath(json_array_get(json_object_get(json_object_get(ns, "status"), "conditions"), i),
                  "status", NULL),
            "False");
    c = ns_condition(ns, "NamespaceContentRemaining");
    ck_assert_str_eq(jpath(c, "reason", NULL), "ContentRemoved");
    ck_assert_str_eq(jpath(c, "message", NULL), "All content successfully removed");
    ck_assert_str_ne(jpath(c, "lastTransitionTime", NULL), remaining_ltt);
    c = ns_condition(ns, "NamespaceFinalizersRemaining");
    ck_assert_str_eq(jpath(c, "reason", NULL), "ContentRemoved");
    ck_assert_str_eq(jpath(c, "message", NULL), "All content successfully removed");
    json_decref(ns);
    free(remaining_ltt);
    merge_patch(path, "{\"metadata\":{\"finalizers\":null}}", 200);
    wait_code(path, 404);
}
END_TEST

/* A namespace's lifecycle with finalizers no controller removes (one on
 * the namespace, one on an object in it): the namespace stays Terminating,
 * its content deleted but waiting, kubesim answering and writing nothing
 * meanwhile (before, its controller rewrote the namespace in a loop
 * holding the store's lock and kubesim hung); a create in it is the
 * NamespaceLifecycle plugin's 403; once a client removes both finalizers
 * the namespace goes. A create into a namespace that does not exist is
 * that plugin's 404 before the object is validated (an invalid name here:
 * before, a 422). */
START_TEST(test_kubesim_namespace_lifecycle)
{
    /* a namespace held by its own finalizer: finalized by the controller
     * (spec.finalizers emptied), then nothing written while it waits */
    json_decref(request_json("POST", "/api/v1/namespaces",
                             "{\"metadata\":{\"name\":\"lc-a\",\"finalizers\":[\"example.com/"
                             "hold\"]}}",
                             201));
    json_decref(request_json("DELETE", "/api/v1/namespaces/lc-a", NULL, 200));
    ck_assert(kop_test_eventually(finalized, "/api/v1/namespaces/lc-a", 5000));
    char *rv = rv_of("/api/v1/namespaces/lc-a");
    kop_test_sleep_ms(300);
    char *rv2 = rv_of("/api/v1/namespaces/lc-a");
    ck_assert_str_eq(rv2, rv);
    free(rv);
    free(rv2);
    json_t *ns = request_json("GET", "/api/v1/namespaces/lc-a", NULL, 200);
    ck_assert_str_eq(jpath(ns, "status", "phase"), "Terminating");
    json_decref(ns);

    json_t *st = request_json("POST", "/api/v1/namespaces/lc-a/configmaps",
                              "{\"metadata\":{\"name\":\"late\"}}", 403);
    ck_assert_str_eq(jpath(st, "message", NULL),
                     "configmaps \"late\" is forbidden: unable to create new content in "
                     "namespace lc-a because it is being terminated");
    ck_assert_str_eq(jpath(st, "reason", NULL), "Forbidden");
    ck_assert_str_eq(jpath(st, "details", "name"), "late");
    ck_assert_str_eq(jpath(st, "details", "kind"), "configmaps");
    const json_t *cause =
        json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(cause, "reason")), "NamespaceTerminating");
    ck_assert_str_eq(json_string_value(json_object_get(cause, "message")),
                     "namespace lc-a is being terminated");
    ck_assert_str_eq(json_string_value(json_object_get(cause, "field")), "metadata.namespace");
    json_decref(st);
    /* a generateName create: admission has no name yet */
    st = request_json("POST", "/apis/apps/v1/namespaces/lc-a/deployments",
                      "{\"metadata\":{\"generateName\":\"g-\"}}", 403);
    ck_assert_str_eq(jpath(st, "message", NULL),
                     "deployments.apps \"Unknown\" is forbidden: unable to create new content in "
                     "namespace lc-a because it is being terminated");
    ck_assert_str_eq(jpath(st, "details", "group"), "apps");
    json_decref(st);
    merge_patch("/api/v1/namespaces/lc-a", "{\"metadata\":{\"finalizers\":null}}", 200);
    wait_code("/api/v1/namespaces/lc-a", 404);

    /* content held by a finalizer: deleted, waiting; the namespace waits
     * for it, even once its own finalizer is gone */
    json_decref(
        request_json("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"lc-b\"}}", 201));
    json_decref(request_json("POST", "/api/v1/namespaces/lc-b/configmaps",
                             "{\"metadata\":{\"name\":\"held\",\"finalizers\":[\"example.com/"
                             "cm\"]}}",
                             201));
    json_decref(request_json("DELETE", "/api/v1/namespaces/lc-b", NULL, 200));
    json_t *cm = NULL;
    for (int i = 0; i < 100; i++) {
        json_decref(cm);
        cm = request_json("GET", "/api/v1/namespaces/lc-b/configmaps/held", NULL, 200);
        if (jpath(cm, "metadata", "deletionTimestamp"))
            break;
        kop_test_sleep_ms(50);
    }
    ck_assert_ptr_nonnull(jpath(cm, "metadata", "deletionTimestamp"));
    json_decref(cm);
    char *ns_rv = rv_of("/api/v1/namespaces/lc-b");
    char *cm_rv = rv_of("/api/v1/namespaces/lc-b/configmaps/held");
    kop_test_sleep_ms(300);
    char *ns_rv2 = rv_of("/api/v1/namespaces/lc-b");
    char *cm_rv2 = rv_of("/api/v1/namespaces/lc-b/configmaps/held");
    ck_assert_str_eq(ns_rv2, ns_rv);
    ck_assert_str_eq(cm_rv2, cm_rv);
    free(ns_rv);
    free(cm_rv);
    free(ns_rv2);
    free(cm_rv2);
    merge_patch("/api/v1/namespaces/lc-b/configmaps/held", "{\"metadata\":{\"finalizers\":null}}",
                200);
    wait_code("/api/v1/namespaces/lc-b/configmaps/held", 404);
    wait_code("/api/v1/namespaces/lc-b", 404);

    /* no such namespace: 404 before the invalid name's 422 */
    st = request_json("POST", "/api/v1/namespaces/lc-none/configmaps",
                      "{\"metadata\":{\"name\":\"Bad_Name\"}}", 404);
    ck_assert_str_eq(jpath(st, "message", NULL), "namespaces \"lc-none\" not found");
    ck_assert_str_eq(jpath(st, "details", "kind"), "namespaces");
    json_decref(st);
}
END_TEST

/* The control plane's own Service: default/kubernetes, 443 to the port
 * kubesim serves on, made again when deleted. */
START_TEST(test_kubesim_kubernetes_service)
{
    json_t *svc = request_json("GET", "/api/v1/namespaces/default/services/kubernetes", NULL, 200);
    ck_assert_str_eq(jpath(svc, "metadata", "name"), "kubernetes");
    const json_t *labels = json_object_get(json_object_get(svc, "metadata"), "labels");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "component")), "apiserver");
    ck_assert_str_eq(json_string_value(json_object_get(labels, "provider")), "kubernetes");
    ck_assert_str_eq(jpath(svc, "spec", "type"), "ClusterIP");
    ck_assert_str_eq(jpath(svc, "spec", "clusterIP"), "10.96.0.1");
    const json_t *port = json_array_get(json_object_get(json_object_get(svc, "spec"), "ports"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(port, "name")), "https");
    ck_assert_int_eq(json_integer_value(json_object_get(port, "port")), 443);
    const char *colon = strrchr(base_url, ':');
    ck_assert_ptr_nonnull(colon);
    ck_assert_int_eq(json_integer_value(json_object_get(port, "targetPort")),
                     strtol(colon + 1, NULL, 10));
    const char *uid = jpath(svc, "metadata", "uid");
    ck_assert_ptr_nonnull(uid);
    char *old_uid = strdup(uid);
    json_decref(svc);
    json_decref(
        request_json("DELETE", "/api/v1/namespaces/default/services/kubernetes", NULL, 200));
    wait_code("/api/v1/namespaces/default/services/kubernetes", 200);
    svc = request_json("GET", "/api/v1/namespaces/default/services/kubernetes", NULL, 200);
    ck_assert_str_ne(jpath(svc, "metadata", "uid"), old_uid);
    free(old_uid);
    json_decref(svc);
}
END_TEST

/* The Pods of ReplicaSet "rsp" (label app=rsp) in "default". */
static json_t *rsp_pods(void)
{
    json_t *l =
        request_json("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Drsp", NULL, 200);
    json_t *items = json_incref(json_object_get(l, "items"));
    json_decref(l);
    return items;
}

static bool rsp_pod_count(const void *arg)
{
    json_t *items = rsp_pods();
    bool ok = json_array_size(items) == (size_t)(uintptr_t)arg;
    json_decref(items);
    return ok;
}

/* ReplicaSet rsp's status.readyReplicas is arg. */
static bool rsp_ready(const void *arg)
{
    json_t *rs = get_or_null("/apis/apps/v1/namespaces/default/replicasets/rsp");
    const json_t *st = json_object_get(rs, "status");
    bool ok =
        json_integer_value(json_object_get(st, "readyReplicas")) == (json_int_t)(uintptr_t)arg &&
        json_integer_value(json_object_get(st, "replicas")) == (json_int_t)(uintptr_t)arg;
    json_decref(rs);
    return ok;
}

static bool has_true_condition(const json_t *pod, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return strcmp(json_string_value(json_object_get(c, "status")), "True") == 0;
    }
    return false;
}

/* pkg/controller/replicaset, with the scheduler and the kubelet as one
 * step: a ReplicaSet has spec.replicas running Pods it controls, named
 * <replicaset>-XXXXX, each with its own Pod IP; scaled down, the extra
 * Pods go; a deleted Pod is replaced; the ReplicaSet's status counts them;
 * the garbage collector takes them with the ReplicaSet. */
START_TEST(test_kubesim_replicaset_pods)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/replicasets",
        "{\"metadata\":{\"name\":\"rsp\"},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":"
        "{\"app\":\"rsp\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"rsp\"},"
        "\"annotations\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"busybox:1.36\",\"resources\":{\"limits\":{\"cpu\":\"100m\",\"memory\":\"64Mi\"}}}]}}}}",
        201));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)3, 5000), "no 3 Pods");
    ck_assert_msg(kop_test_eventually(rsp_ready, (void *)3, 5000), "status not 3 ready");
    json_t *rs = request_json("GET", "/apis/apps/v1/namespaces/default/replicasets/rsp", NULL, 200);
    const char *rs_uid = jpath(rs, "metadata", "uid");
    json_t *items = rsp_pods();
    size_t i;
    json_t *pod;
    char ips[3][32] = {{0}};
    json_array_foreach(items, i, pod)
    {
        const char *name = jpath(pod, "metadata", "name");
        ck_assert_int_eq(strlen(name), strlen("rsp-") + 5);
        ck_assert_int_eq(strncmp(name, "rsp-", 4), 0);
        ck_assert_str_eq(jpath(pod, "metadata", "generateName"), "rsp-");
        ck_assert_str_eq(jpath(jpath_obj(pod, "metadata", "annotations"), "a", NULL), "b");
        const json_t *ref =
            json_array_get(json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), 0);
        ck_assert_str_eq(jpath(ref, "kind", NULL), "ReplicaSet");
        ck_assert_str_eq(jpath(ref, "name", NULL), "rsp");
        ck_assert_str_eq(jpath(ref, "uid", NULL), rs_uid);
        ck_assert(json_is_true(json_object_get(ref, "controller")));
        ck_assert(json_is_true(json_object_get(ref, "blockOwnerDeletion")));
        ck_assert_str_eq(jpath(pod, "spec", "nodeName"), "kubesim-node");
        ck_assert_str_eq(jpath(pod, "status", "phase"), "Running");
        ck_assert(has_true_condition(pod, "Ready"));
        ck_assert(has_true_condition(pod, "PodScheduled"));
        /* SetDefaults_Pod: requests from limits, so Guaranteed */
        const json_t *c =
            json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
        ck_assert_str_eq(jpath(jpath_obj(c, "resources", "requests"), "cpu", NULL), "100m");
        ck_assert_str_eq(jpath(pod, "status", "qosClass"), "Guaranteed");
        const json_t *cs =
            json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
        ck_assert(json_is_true(json_object_get(cs, "ready")));
        ck_assert_ptr_nonnull(json_object_get(json_object_get(cs, "state"), "running"));
        const char *ip = jpath(pod, "status", "podIP");
        ck_assert_int_eq(strncmp(ip, "10.244.", 7), 0);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(ips[j], ip);
        snprintf(ips[i], sizeof(ips[i]), "%s", ip);
    }
    json_decref(items);
    json_decref(rs);
    /* the Table kubectl get pods prints */
    struct kop_test_resp t =
        request_ex("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Drsp", NULL, NULL,
                   NULL, "Accept: application/json;as=Table;v=v1;g=meta.k8s.io");
    ck_assert_int_eq(t.code, 200);
    json_t *table = json_loads(t.body, 0, NULL);
    kop_test_resp_free(&t);
    const json_t *cols = json_object_get(table, "columnDefinitions");
    const char *want_cols[] = {"Name", "Ready", "Status",         "Restarts",       "Age",
                               "IP",   "Node",  "Nominated Node", "Readiness Gates"};
    ck_assert_int_eq(json_array_size(cols), 9);
    for (i = 0; i < 9; i++)
        ck_assert_str_eq(jpath(json_array_get(cols, i), "name", NULL), want_cols[i]);
    const json_t *cells =
        json_object_get(json_array_get(json_object_get(table, "rows"), 0), "cells");
    ck_assert_str_eq(json_string_value(json_array_get(cells, 1)), "1/1");
    ck_assert_str_eq(json_string_value(json_array_get(cells, 2)), "Running");
    ck_assert_str_eq(json_string_value(json_array_get(cells, 3)), "0");
    ck_assert_str_eq(json_string_value(json_array_get(cells, 6)), "kubesim-node");
    json_decref(table);
    /* scaled down: the extra Pods go */
    merge_patch("/apis/apps/v1/namespaces/default/replicasets/rsp", "{\"spec\":{\"replicas\":1}}",
                200);
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)1, 5000), "not scaled to 1");
    ck_assert_msg(kop_test_eventually(rsp_ready, (void *)1, 5000), "status not 1 ready");
    /* a deleted Pod is replaced */
    items = rsp_pods();
    char *gone = strdup(jpath(json_array_get(items, 0), "metadata", "name"));
    json_decref(items);
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", gone);
    json_decref(request_json("DELETE", path, NULL, 200));
    wait_code(path, 404);
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)1, 5000), "not replaced");
    items = rsp_pods();
    ck_assert_str_ne(jpath(json_array_get(items, 0), "metadata", "name"), gone);
    free(gone);
    json_decref(items);
    /* the garbage collector takes them with the ReplicaSet */
    json_decref(
        request_json("DELETE", "/apis/apps/v1/namespaces/default/replicasets/rsp", NULL, 200));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)0, 5000), "Pods left");
    /* a long name: generateName is the whole name and a dash, the Pod's
     * name its first 58 characters and 5 random (SimpleNameGenerator) */
    const char *longname = "rsp-0123456789012345678901234567890123456789012345678901234";
    char body[1024];
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"replicas\":1,\"selector\":"
             "{\"matchLabels\":{\"app\":\"rsp\"}},\"template\":{\"metadata\":{\"labels\":"
             "{\"app\":\"rsp\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"busybox:1.36\"}]}}}}",
             longname);
    json_decref(request_json("POST", "/apis/apps/v1/namespaces/default/replicasets", body, 201));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)1, 5000), "no Pod");
    items = rsp_pods();
    const char *pname = jpath(json_array_get(items, 0), "metadata", "name");
    char want_gen[128];
    snprintf(want_gen, sizeof(want_gen), "%s-", longname);
    ck_assert_str_eq(jpath(json_array_get(items, 0), "metadata", "generateName"), want_gen);
    ck_assert_int_eq(strlen(pname), 63);
    ck_assert_int_eq(strncmp(pname, want_gen, 58), 0);
    json_decref(items);
    snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/default/replicasets/%s", longname);
    json_decref(request_json("DELETE", path, NULL, 200));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)0, 5000), "Pods left");
}
END_TEST

/* A Pod a client makes: SetDefaults_PodSpec and SetDefaults_Pod, the
 * admission plugins' additions (the ServiceAccount and its token volume,
 * priority, default tolerations), status Pending with its QoS class; no
 * scheduler binds it. automountServiceAccountToken: false, no volume. */
START_TEST(test_kubesim_pod_defaults)
{
    json_t *pod = request_json(
        "POST", "/api/v1/namespaces/default/pods",
        "{\"metadata\":{\"name\":\"pd\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"busybox\"}]}}",
        201);
    const json_t *spec = json_object_get(pod, "spec");
    ck_assert_str_eq(jpath(spec, "serviceAccountName", NULL), "default");
    ck_assert_str_eq(jpath(spec, "serviceAccount", NULL), "default");
    ck_assert_str_eq(jpath(spec, "restartPolicy", NULL), "Always");
    ck_assert_str_eq(jpath(spec, "dnsPolicy", NULL), "ClusterFirst");
    ck_assert_str_eq(jpath(spec, "schedulerName", NULL), "default-scheduler");
    ck_assert_str_eq(jpath(spec, "preemptionPolicy", NULL), "PreemptLowerPriority");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "priority")), 0);
    ck_assert(json_is_true(json_object_get(spec, "enableServiceLinks")));
    ck_assert_ptr_null(json_object_get(spec, "nodeName"));
    const json_t *vol = json_array_get(json_object_get(spec, "volumes"), 0);
    const char *vname = jpath(vol, "name", NULL);
    ck_assert_int_eq(strncmp(vname, "kube-api-access-", 16), 0);
    const json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
    ck_assert_str_eq(jpath(c, "imagePullPolicy", NULL), "Always"); /* :latest */
    const json_t *m = json_array_get(json_object_get(c, "volumeMounts"), 0);
    ck_assert_str_eq(jpath(m, "name", NULL), vname);
    ck_assert_str_eq(jpath(m, "mountPath", NULL), "/var/run/secrets/kubernetes.io/serviceaccount");
    const json_t *tols = json_object_get(spec, "tolerations");
    ck_assert_int_eq(json_array_size(tols), 2);
    ck_assert_str_eq(jpath(json_array_get(tols, 0), "key", NULL), "node.kubernetes.io/not-ready");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(tols, 1), "tolerationSeconds")), 300);
    ck_assert_str_eq(jpath(pod, "status", "phase"), "Pending");
    ck_assert_str_eq(jpath(pod, "status", "qosClass"), "BestEffort");
    json_decref(pod);
    pod =
        request_json("POST", "/api/v1/namespaces/default/pods",
                     "{\"metadata\":{\"name\":\"pd2\"},\"spec\":{\"automountServiceAccountToken\":"
                     "false,\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.36\","
                     "\"resources\":{\"requests\":{\"cpu\":\"10m\"}}}]}}",
                     201);
    ck_assert_ptr_null(json_object_get(json_object_get(pod, "spec"), "volumes"));
    ck_assert_str_eq(jpath(pod, "status", "qosClass"), "Burstable");
    json_decref(pod);
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/pods/pd", NULL, 200));
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/pods/pd2", NULL, 200));
    /* the ServiceAccount plugin: a missing ServiceAccount is a 403 */
    struct kop_test_resp r = request("POST", "/api/v1/namespaces/default/pods", NULL,
                                     "{\"metadata\":{\"name\":\"pd3\"},\"spec\":{"
                                     "\"serviceAccountName\":\"nosuch\",\"containers\":[{"
                                     "\"name\":\"c\",\"image\":\"busybox\"}]}}",
                                     NULL);
    ck_assert_int_eq(r.code, 403);
    json_t *st = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    ck_assert_str_eq(jpath(st, "reason", NULL), "Forbidden");
    ck_assert_str_eq(jpath(st, "message", NULL),
                     "pods \"pd3\" is forbidden: error looking up service account "
                     "default/nosuch: serviceaccount \"nosuch\" not found");
    json_decref(st);
    /* a ReplicaSet's Pods wait for theirs */
    json_decref(
        request_json("POST", "/apis/apps/v1/namespaces/default/replicasets",
                     "{\"metadata\":{\"name\":\"rsp\"},\"spec\":{\"replicas\":1,\"selector\":{"
                     "\"matchLabels\":{\"app\":\"rsp\"}},\"template\":{\"metadata\":{\"labels\":{"
                     "\"app\":\"rsp\"}},\"spec\":{\"serviceAccountName\":\"late\",\"containers\":[{"
                     "\"name\":\"c\",\"image\":\"busybox:1.36\"}]}}}}",
                     201));
    usleep(300 * 1000);
    ck_assert(rsp_pod_count((void *)0));
    json_decref(request_json("POST", "/api/v1/namespaces/default/serviceaccounts",
                             "{\"metadata\":{\"name\":\"late\"}}", 201));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)1, 5000), "no Pod");
    json_decref(
        request_json("DELETE", "/apis/apps/v1/namespaces/default/replicasets/rsp", NULL, 200));
    ck_assert_msg(kop_test_eventually(rsp_pod_count, (void *)0, 5000), "Pods left");
    json_decref(
        request_json("DELETE", "/api/v1/namespaces/default/serviceaccounts/late", NULL, 200));
}
END_TEST

/* ---- Endpoints and EndpointSlices ----------------------------------------------- */

/* A Pod in default with labels app=APP, one container port "http" 8080
 * when named_port; then its status: podIP and the Ready condition. */
static void make_pod(const char *name, const char *app, bool named_port, const char *ip, bool ready)
{
    char *body = NULL, *path = NULL, *st = NULL;
    int n = asprintf(
        &body,
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\",\"labels\":"
        "{\"app\":\"%s\"}},\"spec\":{\"nodeName\":\"kubesim-node\",\"containers\":[{\"name\":"
        "\"c\",\"image\":\"nginx\"%s}]}}",
        name, app, named_port ? ",\"ports\":[{\"name\":\"http\",\"containerPort\":8080}]" : "");
    ck_assert_int_gt(n, 0);
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods", body, 201));
    free(body);
    ck_assert_int_gt(asprintf(&path, "/api/v1/namespaces/default/pods/%s/status", name), 0);
    n = asprintf(&st,
                 "{\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\","
                 "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}]}}",
                 ip, ready ? "True" : "False");
    ck_assert_int_gt(n, 0);
    struct kop_test_resp r = request("PATCH", path, "application/merge-patch+json", st, NULL);
    ck_assert_msg(r.code == 200, "PATCH %s: %ld %s", path, r.code, r.body);
    kop_test_resp_free(&r);
    free(st);
    free(path);
}

struct table_cell {
    const char *path;
    size_t col;
    const char *want;
};

/* Does the first row of the Table at arg's path show want in column col? */
static bool table_cell_is(const void *arg)
{
    const struct table_cell *tc = arg;
    struct kop_test_resp r = request_ex("GET", tc->path, NULL, NULL, NULL, TABLE_ACCEPT);
    json_t *t = r.code == 200 ? json_loads(r.body, 0, NULL) : NULL;
    kop_test_resp_free(&r);
    const char *have = json_string_value(cell(t, 0, tc->col));
    bool ok = have && strcmp(have, tc->want) == 0;
    json_decref(t);
    return ok;
}

static void wait_cell(const char *path, size_t col, const char *want)
{
    const struct table_cell tc = {path, col, want};
    ck_assert_msg(kop_test_eventually(table_cell_is, &tc, 5000), "%s never showed \"%s\"", path,
                  want);
}

/* The subset of an Endpoints whose first port is named port_name. */
static const json_t *subset_of(const json_t *ep, const char *port_name)
{
    size_t i;
    const json_t *ss;
    json_array_foreach(json_object_get(ep, "subsets"), i, ss)
    {
        const char *n = jpath(json_array_get(json_object_get(ss, "ports"), 0), "name", NULL);
        if (n && strcmp(n, port_name) == 0)
            return ss;
    }
    return NULL;
}

static const char *addr_ip(const json_t *ss, const char *list, size_t i)
{
    return jpath(json_array_get(json_object_get(ss, list), i), "ip", NULL);
}

#define EP_PATH "/api/v1/namespaces/default/endpoints/"
#define SLICES_PATH                                                                                \
    "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices?labelSelector=kubernetes.io%2F"   \
    "service-name%3Dep-web"

static bool no_slices(const void *arg)
{
    json_t *l = get_or_null(arg);
    bool ok = l && json_array_size(json_object_get(l, "items")) == 0;
    json_decref(l);
    return ok;
}

/* pkg/controller/endpoint and pkg/controller/endpointslice: a Service's
 * Pods, ready or not, by their resolved target ports; a Pod leaving the
 * selector leaves them; deleting the Service deletes them; a Service
 * without a selector keeps the Endpoints its user wrote. */
START_TEST(test_kubesim_endpoints_controller)
{
    json_decref(request_json(
        "POST", "/api/v1/namespaces/default/services",
        "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":\"ep-web\","
        "\"labels\":"
        "{\"tier\":\"front\"}},\"spec\":{\"selector\":{\"app\":\"ep-web\"},\"ports\":[{"
        "\"name\":"
        "\"http\",\"port\":80,\"targetPort\":\"http\"},{\"name\":\"metrics\",\"port\":9090}]}}",
        201));
    make_pod("ep-a", "ep-web", true, "10.244.1.1", true);
    make_pod("ep-b", "ep-web", false, "10.244.1.2", false);
    make_pod("ep-c", "ep-other", true, "10.244.1.3", true);
    wait_cell(EP_PATH "ep-web", 1, "10.244.1.1:9090,10.244.1.1:8080");

    json_t *ep = request_json("GET", EP_PATH "ep-web", NULL, 200);
    ck_assert_str_eq(jpath(jpath_obj(ep, "metadata", "labels"), "tier", NULL), "front");
    /* named targetPort: only ep-a has a port "http" */
    const json_t *http = subset_of(ep, "http");
    ck_assert_ptr_nonnull(http);
    ck_assert_int_eq(json_array_size(json_object_get(http, "addresses")), 1);
    ck_assert_ptr_null(json_object_get(http, "notReadyAddresses"));
    ck_assert_str_eq(addr_ip(http, "addresses", 0), "10.244.1.1");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_array_get(json_object_get(http, "ports"), 0), "port")),
                     8080);
    const json_t *a = json_array_get(json_object_get(http, "addresses"), 0);
    ck_assert_str_eq(jpath(a, "nodeName", NULL), "kubesim-node");
    ck_assert_str_eq(jpath(a, "targetRef", "kind"), "Pod");
    ck_assert_str_eq(jpath(a, "targetRef", "name"), "ep-a");
    /* a number: every Pod; the one not Ready among notReadyAddresses */
    const json_t *metrics = subset_of(ep, "metrics");
    ck_assert_ptr_nonnull(metrics);
    ck_assert_str_eq(addr_ip(metrics, "addresses", 0), "10.244.1.1");
    ck_assert_str_eq(addr_ip(metrics, "notReadyAddresses", 0), "10.244.1.2");
    ck_assert_int_eq(json_array_size(json_object_get(ep, "subsets")), 2);
    const char *rv = jpath(ep, "metadata", "resourceVersion");
    char *ep_rv = strdup(rv);

    /* the slices: one per set of ports found on the Pods */
    json_t *sl = request_json("GET", SLICES_PATH, NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(sl, "items")), 2);
    size_t i;
    const json_t *s;
    json_array_foreach(json_object_get(sl, "items"), i, s)
    {
        const json_t *md = json_object_get(s, "metadata");
        ck_assert_str_eq(jpath(md, "generateName", NULL), "ep-web-");
        ck_assert_int_eq(strlen(jpath(md, "name", NULL)), strlen("ep-web-") + 5);
        ck_assert_str_eq(jpath(jpath_obj(s, "metadata", "labels"),
                               "endpointslice.kubernetes.io/managed-by", NULL),
                         "endpointslice-controller.k8s.io");
        ck_assert_str_eq(jpath(jpath_obj(s, "metadata", "labels"), "tier", NULL), "front");
        const json_t *ref = json_array_get(json_object_get(md, "ownerReferences"), 0);
        ck_assert_str_eq(jpath(ref, "kind", NULL), "Service");
        ck_assert(json_is_true(json_object_get(ref, "controller")));
        ck_assert_str_eq(jpath(s, "addressType", NULL), "IPv4");
        const json_t *e = json_array_get(json_object_get(s, "endpoints"), 0);
        const char *ip = json_string_value(json_array_get(json_object_get(e, "addresses"), 0));
        bool is_a = strcmp(ip, "10.244.1.1") == 0;
        ck_assert(is_a || strcmp(ip, "10.244.1.2") == 0);
        ck_assert_int_eq(json_is_true(json_object_get(json_object_get(e, "conditions"), "ready")),
                         is_a);
        ck_assert(json_is_false(json_object_get(json_object_get(e, "conditions"), "terminating")));
        ck_assert_int_eq(json_array_size(json_object_get(s, "ports")), is_a ? 2 : 1);
    }
    json_decref(sl);
    json_decref(ep);

    /* no churn: another Pod change that does not concern it */
    make_pod("ep-d", "ep-other", true, "10.244.1.4", true);
    kop_test_sleep_ms(300);
    ep = request_json("GET", EP_PATH "ep-web", NULL, 200);
    ck_assert_str_eq(jpath(ep, "metadata", "resourceVersion"), ep_rv);
    json_decref(ep);
    free(ep_rv);

    /* ep-a leaves the selector: only ep-b, not ready, is left */
    struct kop_test_resp r =
        request("PATCH", "/api/v1/namespaces/default/pods/ep-a", "application/merge-patch+json",
                "{\"metadata\":{\"labels\":{\"app\":\"gone\"}}}", NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    wait_cell(EP_PATH "ep-web", 1, "");
    ep = request_json("GET", EP_PATH "ep-web", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(ep, "subsets")), 1);
    ck_assert_str_eq(addr_ip(subset_of(ep, "metrics"), "notReadyAddresses", 0), "10.244.1.2");
    json_decref(ep);

    /* a Service without a selector: its user's Endpoints stay as written */
    json_decref(request_json("POST", "/api/v1/namespaces/default/services",
                             "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
                             "\"ep-manual\"},\"spec\":{\"ports\":[{\"port\":80}]}}",
                             201));
    json_t *man = request_json(
        "POST", "/api/v1/namespaces/default/endpoints",
        "{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":{\"name\":\"ep-manual\"},"
        "\"subsets\":[{\"addresses\":[{\"ip\":\"192.0.2.7\"}],\"ports\":[{\"port\":80}]}]}",
        201);
    make_pod("ep-e", "ep-other", true, "10.244.1.5", true);
    kop_test_sleep_ms(300);
    json_t *man2 = request_json("GET", EP_PATH "ep-manual", NULL, 200);
    ck_assert_str_eq(jpath(man2, "metadata", "resourceVersion"),
                     jpath(man, "metadata", "resourceVersion"));
    json_decref(man);
    json_decref(man2);
    wait_cell(EP_PATH "ep-manual", 1, "192.0.2.7:80");

    /* the Service goes: its Endpoints and slices go too */
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/services/ep-web", NULL, 200));
    wait_code(EP_PATH "ep-web", 404);
    ck_assert(kop_test_eventually(no_slices, SLICES_PATH, 5000));
}
END_TEST

/* The apiserver's own Endpoints and EndpointSlice of default/kubernetes,
 * and the Table columns of both kinds (pkg/printers/internalversion). */
START_TEST(test_kubesim_endpoints_kubernetes)
{
    const char *colon = strrchr(base_url, ':');
    ck_assert_ptr_nonnull(colon);
    long port = strtol(colon + 1, NULL, 10);
    json_t *ep = request_json("GET", EP_PATH "kubernetes", NULL, 200);
    const json_t *ss = json_array_get(json_object_get(ep, "subsets"), 0);
    ck_assert_str_eq(addr_ip(ss, "addresses", 0), "127.0.0.1");
    const json_t *p = json_array_get(json_object_get(ss, "ports"), 0);
    ck_assert_str_eq(jpath(p, "name", NULL), "https");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "port")), port);
    ck_assert_str_eq(jpath(p, "protocol", NULL), "TCP");
    json_decref(ep);
    json_t *s = request_json(
        "GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", NULL, 200);
    ck_assert_str_eq(jpath(jpath_obj(s, "metadata", "labels"), "kubernetes.io/service-name", NULL),
                     "kubernetes");
    ck_assert_str_eq(jpath(s, "addressType", NULL), "IPv4");
    json_decref(s);

    json_t *t = get_table(EP_PATH);
    ck_assert_str_eq(col_name(t, 0), "Name");
    ck_assert_str_eq(col_name(t, 1), "Endpoints");
    ck_assert_str_eq(col_name(t, 2), "Age");
    json_decref(t);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%ld", port);
    wait_cell(EP_PATH "kubernetes", 1, want);
    const char *sp = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes";
    t = get_table(sp);
    static const char *const cols[] = {"Name", "AddressType", "Ports", "Endpoints", "Age"};
    for (size_t i = 0; i < 5; i++)
        ck_assert_str_eq(col_name(t, i), cols[i]);
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "IPv4");
    snprintf(want, sizeof(want), "%ld", port);
    ck_assert_str_eq(json_string_value(cell(t, 0, 2)), want);
    ck_assert_str_eq(json_string_value(cell(t, 0, 3)), "127.0.0.1");
    json_decref(t);

    /* printers.go: three shown, then "+ N more..."; <unset> and <none> */
    json_decref(request_json(
        "POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        "{\"apiVersion\":\"discovery.k8s.io/"
        "v1\",\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":"
        "\"many\"},\"addressType\":\"IPv4\",\"endpoints\":[{\"addresses\":[\"10.0.0.1\"]},"
        "{\"addresses\":[\"10.0.0.2\"]},{\"addresses\":[\"10.0.0.3\"]},{\"addresses\":"
        "[\"10.0.0.4\"]},{\"addresses\":[\"10.0.0.5\"]}],\"ports\":[{\"name\":\"a\",\"port\":1}"
        ","
        "{\"name\":\"b\",\"port\":2},{\"name\":\"c\",\"port\":3},{\"name\":\"d\",\"port\":4}]}",
        201));
    t = get_table("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/many");
    ck_assert_str_eq(json_string_value(cell(t, 0, 2)), "1,2,3 + 1 more...");
    ck_assert_str_eq(json_string_value(cell(t, 0, 3)), "10.0.0.1,10.0.0.2,10.0.0.3 + 2 more...");
    json_decref(t);
    json_decref(request_json("POST", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
                             "{\"apiVersion\":\"discovery.k8s.io/"
                             "v1\",\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":"
                             "\"empty\"},\"addressType\":\"IPv4\",\"endpoints\":[]}",
                             201));
    t = get_table("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/empty");
    ck_assert_str_eq(json_string_value(cell(t, 0, 2)), "<unset>");
    ck_assert_str_eq(json_string_value(cell(t, 0, 3)), "<unset>");
    json_decref(t);
    json_decref(request_json("POST", "/api/v1/namespaces/default/endpoints",
                             "{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":{\"name\":"
                             "\"ep-none\"}}",
                             201));
    t = get_table(EP_PATH "ep-none");
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "<none>");
    json_decref(t);
}
END_TEST

/* Does namespace arg's kube-root-ca.crt hold the cluster's CA again? */
static bool root_ca_restored(const void *arg)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/configmaps/kube-root-ca.crt",
             (const char *)arg);
    json_t *cm = get_or_null(path);
    char *ca = kop_test_read_file(ca_path, NULL);
    const char *have = jpath(cm, "data", "ca.crt");
    bool ok = ca && have && strcmp(have, ca) == 0;
    free(ca);
    json_decref(cm);
    return ok;
}

/* pkg/controller/certificates/rootcacertpublisher: every namespace's
 * kube-root-ca.crt holds the cluster's CA, made again when deleted and
 * put back when changed, its other metadata kept. */
START_TEST(test_kubesim_root_ca_configmaps)
{
    json_t *cm =
        request_json("GET", "/api/v1/namespaces/default/configmaps/kube-root-ca.crt", NULL, 200);
    char *ca = kop_test_read_file(ca_path, NULL);
    ck_assert_ptr_nonnull(ca);
    ck_assert_str_eq(jpath(cm, "data", "ca.crt"), ca);
    ck_assert_str_eq(
        jpath(jpath_obj(cm, "metadata", "annotations"), "kubernetes.io/description", NULL),
        "Contains a CA bundle that can be used to verify the kube-apiserver when "
        "using internal endpoints such as the internal service IP or "
        "kubernetes.default.svc. No other usage is guaranteed across distributions "
        "of Kubernetes clusters.");
    free(ca);
    json_decref(cm);
    json_decref(
        request_json("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"rca\"}}", 201));
    wait_code("/api/v1/namespaces/rca/configmaps/kube-root-ca.crt", 200);
    json_decref(
        request_json("DELETE", "/api/v1/namespaces/rca/configmaps/kube-root-ca.crt", NULL, 200));
    wait_code("/api/v1/namespaces/rca/configmaps/kube-root-ca.crt", 200);
    ck_assert(root_ca_restored("rca"));
    merge_patch("/api/v1/namespaces/rca/configmaps/kube-root-ca.crt",
                "{\"metadata\":{\"labels\":{\"mine\":\"yes\"}},\"data\":{\"ca.crt\":\"forged\"}}",
                200);
    ck_assert_msg(kop_test_eventually(root_ca_restored, "rca", 5000), "ca.crt not put back");
    cm = request_json("GET", "/api/v1/namespaces/rca/configmaps/kube-root-ca.crt", NULL, 200);
    ck_assert_str_eq(jpath(jpath_obj(cm, "metadata", "labels"), "mine", NULL), "yes");
    json_decref(cm);
}
END_TEST

/* Allowed for USER (with system:authenticated) by a SubjectAccessReview? */
static bool user_allowed(const char *user, const char *attrs)
{
    char extra[768];
    snprintf(extra, sizeof(extra), "\"groups\":[\"system:authenticated\"],%s", attrs);
    json_t *st = sar_status(user, extra);
    bool ok = json_is_true(json_object_get(st, "allowed"));
    json_decref(st);
    return ok;
}

/* Whether ClusterRole NAME's rules hold a rule for group "example.com". */
static bool role_has_example_rule(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/apis/rbac.authorization.k8s.io/v1/clusterroles/%s", name);
    json_t *r = request_json("GET", path, NULL, 200);
    bool found = false;
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(r, "rules"), i, rule)
    {
        const char *g = json_string_value(json_array_get(json_object_get(rule, "apiGroups"), 0));
        if (g && strcmp(g, "example.com") == 0)
            found = true;
    }
    json_decref(r);
    return found;
}

static bool has_example_rule(const void *name)
{
    return role_has_example_rule(name);
}

static bool lacks_example_rule(const void *name)
{
    return !role_has_example_rule(name);
}

/* Poll (5 s at most) until role_has_example_rule(name) == want. */
static void wait_example_rule(const char *name, bool want)
{
    ck_assert_msg(kop_test_eventually(want ? has_example_rule : lacks_example_rule, name, 5000),
                  "%s: example.com rule %s", name, want ? "never aggregated" : "never removed");
}

/* The bootstrap policy is stored (admin, edit, view and their
 * aggregate-to roles), and the ClusterRole aggregation controller keeps
 * aggregated roles' rules current. */
START_TEST(test_kubesim_bootstrap_roles_aggregation)
{
    json_t *v =
        request_json("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view", NULL, 200);
    ck_assert_str_eq(jpath(json_object_get(v, "metadata"), "labels", "kubernetes.io/bootstrapping"),
                     "rbac-defaults");
    ck_assert_str_eq(jpath(json_object_get(v, "metadata"), "labels",
                           "rbac.authorization.k8s.io/aggregate-to-edit"),
                     "true");
    const json_t *sel = json_array_get(
        json_object_get(json_object_get(v, "aggregationRule"), "clusterRoleSelectors"), 0);
    ck_assert_str_eq(jpath(sel, "matchLabels", "rbac.authorization.k8s.io/aggregate-to-view"),
                     "true");
    ck_assert_int_gt(json_array_size(json_object_get(v, "rules")), 5);
    json_decref(v);
    v = request_json("GET", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
                     NULL, 200);
    ck_assert_str_eq(jpath(v, "roleRef", "name"), "cluster-admin");
    json_decref(v);

    struct kop_test_resp nr =
        request("POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"agg\"}}", NULL);
    ck_assert_msg(nr.code == 201 || nr.code == 409, "namespace: %ld", nr.code);
    kop_test_resp_free(&nr);
    static const char *const bind[][2] = {
        {"viewer", "view"}, {"editor", "edit"}, {"boss", "admin"}};
    for (size_t i = 0; i < 3; i++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"%s\"},\"roleRef\":{\"apiGroup\":"
                 "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"%s\"},"
                 "\"subjects\":[{\"kind\":\"User\",\"apiGroup\":\"rbac.authorization.k8s.io\","
                 "\"name\":\"%s\"}]}",
                 bind[i][0], bind[i][1], bind[i][0]);
        json_decref(request_json(
            "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/agg/rolebindings", body, 201));
    }
#define CM_ATTRS(verb, ns)                                                                         \
    "\"resourceAttributes\":{\"verb\":\"" verb                                                     \
    "\",\"resource\":\"configmaps\",\"namespace\":\"" ns "\"}"
    ck_assert(user_allowed("viewer", CM_ATTRS("list", "agg")));
    ck_assert(!user_allowed("viewer", CM_ATTRS("create", "agg")));
    ck_assert(user_allowed("editor", CM_ATTRS("create", "agg")));
    ck_assert(user_allowed("editor", CM_ATTRS("list", "agg"))); /* view is in edit */
    ck_assert(!user_allowed("editor", CM_ATTRS("create", "default")));
    ck_assert(!user_allowed("editor", "\"resourceAttributes\":{\"verb\":\"create\",\"group\":"
                                      "\"rbac.authorization.k8s.io\",\"resource\":\"rolebindings\","
                                      "\"namespace\":\"agg\"}"));
    ck_assert(user_allowed("boss", "\"resourceAttributes\":{\"verb\":\"create\",\"group\":"
                                   "\"rbac.authorization.k8s.io\",\"resource\":\"rolebindings\","
                                   "\"namespace\":\"agg\"}"));
    ck_assert(user_allowed("boss", CM_ATTRS("delete", "agg"))); /* edit is in admin */
#undef CM_ATTRS

    /* a ClusterRole labelled aggregate-to-view reaches view, edit and admin */
#define WIDGETS(verb)                                                                              \
    "\"resourceAttributes\":{\"verb\":\"" verb "\",\"group\":\"example.com\",\"resource\":"        \
    "\"widgets\",\"namespace\":\"agg\"}"
    ck_assert(!user_allowed("viewer", WIDGETS("get")));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "{\"metadata\":{\"name\":\"widgets-view\",\"labels\":{"
        "\"rbac.authorization.k8s.io/aggregate-to-view\":\"true\"}},\"rules\":[{\"apiGroups\":["
        "\"example.com\"],\"resources\":[\"widgets\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]"
        "}",
        201));
    wait_example_rule("view", true);
    wait_example_rule("edit", true);
    wait_example_rule("admin", true);
    ck_assert(user_allowed("viewer", WIDGETS("get")));
    ck_assert(user_allowed("boss", WIDGETS("watch")));
    ck_assert(!user_allowed("editor", WIDGETS("create")));
    /* deleted: its rules leave again */
    json_decref(request_json(
        "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/widgets-view", NULL, 200));
    wait_example_rule("view", false);
    wait_example_rule("admin", false);
    ck_assert(!user_allowed("viewer", WIDGETS("get")));
#undef WIDGETS

    /* a role of one's own, aggregated by matchExpressions */
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "{\"metadata\":{\"name\":\"agg-mine\"},\"aggregationRule\":{\"clusterRoleSelectors\":[{"
        "\"matchExpressions\":[{\"key\":\"team\",\"operator\":\"In\",\"values\":[\"x\",\"y\"]}]"
        "}]}"
        "}",
        201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "{\"metadata\":{\"name\":\"agg-part\",\"labels\":{\"team\":\"y\"}},\"rules\":[{"
        "\"apiGroups\":[\"example.com\"],\"resources\":[\"gadgets\"],\"verbs\":[\"get\"]}]}",
        201));
    wait_example_rule("agg-mine", true);
    ck_assert(!role_has_example_rule("view"));

    /* kubectl get's columns: no printer for roles (Created At), bindings name their role */
    json_t *t = get_table("/apis/rbac.authorization.k8s.io/v1/clusterroles/view");
    ck_assert_str_eq(col_name(t, 1), "Created At");
    ck_assert_int_eq(strlen(json_string_value(cell(t, 0, 1))), 20); /* 2026-12-02T15:39:21Z */
    json_decref(t);
    t = get_table("/apis/rbac.authorization.k8s.io/v1/namespaces/agg/rolebindings/editor");
    ck_assert_str_eq(col_name(t, 1), "Role");
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "ClusterRole/edit");
    ck_assert_str_eq(col_name(t, 3), "Users");
    ck_assert_str_eq(json_string_value(cell(t, 0, 3)), "editor");
    json_decref(t);
}
END_TEST

/* authorization.k8s.io: the RBAC authorizer over the stored roles and
 * bindings and the bootstrap policy (authz.c). */
START_TEST(test_kubesim_access_reviews)
{
    static const char *const nss[] = {"a", "b", "kop-system"};
    for (size_t n = 0; n < 3; n++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", nss[n]);
        struct kop_test_resp nr = request("POST", "/api/v1/namespaces", NULL, body, NULL);
        ck_assert_msg(nr.code == 201 || nr.code == 409, "namespace %s: %ld", nss[n], nr.code);
        kop_test_resp_free(&nr);
    }
    /* the admin (kubeadm:cluster-admins) is allowed by the bootstrap binding */
    json_t *v = review(SSAR_PATH,
                       "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                       "\"SelfSubjectAccessReview\",\"spec\":{\"resourceAttributes\":{"
                       "\"verb\":\"delete\",\"resource\":\"secrets\",\"namespace\":\"x\"}}}",
                       NULL, NULL, 201);
    ck_assert_str_eq(jpath(v, "kind", NULL), "SelfSubjectAccessReview");
    ck_assert(json_is_null(json_object_get(json_object_get(v, "metadata"), "creationTimestamp")));
    ck_assert(json_is_true(json_object_get(json_object_get(v, "status"), "allowed")));
    ck_assert_str_eq(jpath(v, "status", "reason"),
                     "RBAC: allowed by ClusterRoleBinding \"kubeadm:cluster-admins\" of "
                     "ClusterRole \"cluster-admin\" to Group \"kubeadm:cluster-admins\"");
    json_decref(v);

    /* nothing bound yet */
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"list\",\"group\":\"apps\","
                          "\"resource\":\"deployments\"}"));
    json_decref(
        request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                     "{\"metadata\":{\"name\":\"rev\"},\"rules\":["
                     "{\"apiGroups\":[\"apps\"],\"resources\":[\"deployments\"],\"verbs\":["
                     "\"list\",\"watch\"]},"
                     "{\"apiGroups\":[\"mygroup.example.com\"],\"resources\":[\"*/status\"],"
                     "\"verbs\":[\"update\"]},"
                     "{\"nonResourceURLs\":[\"/metrics\",\"/debug/*\"],\"verbs\":[\"get\"]}]}",
                     201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"rev\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
        "io\","
        "\"kind\":\"ClusterRole\",\"name\":\"rev\"},\"subjects\":[{\"kind\":\"ServiceAccount\","
        "\"name\":\"rev\",\"namespace\":\"kop-system\"}]}",
        201));
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles",
                             "{\"metadata\":{\"name\":\"rev\"},\"rules\":[{\"apiGroups\":[\"\"],"
                             "\"resources\":[\"secrets\"],\"resourceNames\":[\"s1\"],"
                             "\"verbs\":[\"get\"]}]}",
                             201));
    /* a RoleBinding's ServiceAccount subject without a namespace is in the binding's */
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/kop-system/rolebindings",
        "{\"metadata\":{\"name\":\"rev\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
        "io\","
        "\"kind\":\"ClusterRole\",\"name\":\"rev-leases\"},\"subjects\":[{\"kind\":"
        "\"ServiceAccount\",\"name\":\"rev\"}]}",
        201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/a/rolebindings",
        "{\"metadata\":{\"name\":\"rev\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
        "io\","
        "\"kind\":\"Role\",\"name\":\"rev\"},\"subjects\":[{\"kind\":\"ServiceAccount\","
        "\"name\":\"rev\",\"namespace\":\"kop-system\"}]}",
        201));
    ck_assert(sa_allowed("\"resourceAttributes\":{\"verb\":\"list\",\"group\":\"apps\","
                         "\"resource\":\"deployments\",\"namespace\":\"b\"}"));
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"delete\",\"group\":\"apps\","
                          "\"resource\":\"deployments\"}"));
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"list\",\"group\":\"\","
                          "\"resource\":\"deployments\"}"));
    ck_assert(sa_allowed("\"resourceAttributes\":{\"verb\":\"update\",\"group\":"
                         "\"mygroup.example.com\",\"resource\":\"myresources\","
                         "\"subresource\":\"status\"}"));
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"update\",\"group\":"
                          "\"mygroup.example.com\",\"resource\":\"myresources\"}"));
    ck_assert(sa_allowed("\"nonResourceAttributes\":{\"verb\":\"get\",\"path\":\"/metrics\"}"));
    ck_assert(sa_allowed("\"nonResourceAttributes\":{\"verb\":\"get\",\"path\":\"/debug/x\"}"));
    ck_assert(!sa_allowed("\"nonResourceAttributes\":{\"verb\":\"get\",\"path\":\"/debugx\"}"));
    /* system:discovery through system:authenticated, which a SubjectAccessReview's
     * user only has when the groups say so */
    ck_assert(!sa_allowed("\"nonResourceAttributes\":{\"verb\":\"get\",\"path\":\"/apis\"}"));
    ck_assert(sa_allowed("\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"secrets\","
                         "\"name\":\"s1\",\"namespace\":\"a\"}"));
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"secrets\","
                          "\"name\":\"s2\",\"namespace\":\"a\"}"));
    ck_assert(!sa_allowed("\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"secrets\","
                          "\"name\":\"s1\",\"namespace\":\"b\"}"));
    /* a binding to a role that does not exist grants nothing, and says so */
    json_t *st = sa_review("\"resourceAttributes\":{\"verb\":\"get\",\"group\":"
                           "\"coordination.k8s.io\",\"resource\":\"leases\",\"namespace\":"
                           "\"kop-system\"}");
    ck_assert(json_is_false(json_object_get(st, "allowed")));
    ck_assert_str_eq(json_string_value(json_object_get(st, "reason")),
                     "RBAC: clusterrole.rbac.authorization.k8s.io \"rev-leases\" not found");
    json_decref(st);
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                             "{\"metadata\":{\"name\":\"rev-leases\"},\"rules\":[{\"apiGroups\":["
                             "\"coordination.k8s.io\"],\"resources\":[\"leases\"],\"verbs\":["
                             "\"*\"]}]}",
                             201));
    ck_assert(sa_allowed("\"resourceAttributes\":{\"verb\":\"get\",\"group\":"
                         "\"coordination.k8s.io\",\"resource\":\"leases\",\"namespace\":"
                         "\"kop-system\"}"));
    v = review(SAR_PATH,
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
               "\"spec\":{\"user\":\"system:serviceaccount:kop-system:rev\",\"resourceAttributes\":"
               "{\"verb\":\"watch\",\"group\":\"apps\",\"resource\":\"deployments\"}}}",
               NULL, NULL, 201);
    ck_assert_str_eq(jpath(v, "status", "reason"),
                     "RBAC: allowed by ClusterRoleBinding \"rev\" of ClusterRole \"rev\" to "
                     "ServiceAccount \"rev/kop-system\"");
    json_decref(v);

    /* the apiserver's validation */
    v = review(SAR_PATH,
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SubjectAccessReview\","
               "\"spec\":{\"resourceAttributes\":{\"verb\":\"get\"}}}",
               NULL, NULL, 422);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "SubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.user: Invalid "
                     "value: \"\": at least one of user or group must be specified");
    json_decref(v);
    v = review(SSAR_PATH,
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectAccessReview\","
               "\"spec\":{}}",
               NULL, NULL, 422);
    ck_assert_str_eq(jpath(v, "reason", NULL), "Invalid");
    json_decref(v);
    v = review("/apis/authorization.k8s.io/v1/namespaces/a/localsubjectaccessreviews",
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"LocalSubjectAccessReview\","
               "\"spec\":{\"user\":\"u\",\"resourceAttributes\":{\"verb\":\"get\",\"namespace\":"
               "\"b\"}}}",
               NULL, NULL, 422);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "LocalSubjectAccessReview.authorization.k8s.io \"\" is invalid: "
                     "spec.resourceAttributes.namespace: Invalid value: \"b\": must match "
                     "metadata.namespace");
    json_decref(v);
    v = review("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectRulesReview\","
               "\"spec\":{}}",
               NULL, NULL, 400);
    ck_assert_str_eq(jpath(v, "message", NULL), "no namespace on request");
    json_decref(v);
    /* a review is only created */
    struct kop_test_resp r = request("GET", SSAR_PATH, NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 405);
    kop_test_resp_free(&r);
    /* discovery says so */
    v = request_json("GET", "/apis/authorization.k8s.io/v1", NULL, 200);
    size_t i;
    json_t *e;
    bool seen = false;
    json_array_foreach(json_object_get(v, "resources"), i, e)
    {
        if (strcmp(jpath(e, "name", NULL), "selfsubjectaccessreviews") != 0)
            continue;
        seen = true;
        const json_t *verbs = json_object_get(e, "verbs");
        ck_assert_int_eq(json_array_size(verbs), 1);
        ck_assert_str_eq(json_string_value(json_array_get(verbs, 0)), "create");
    }
    ck_assert(seen);
    json_decref(v);

    /* the rules of a service account, through impersonation */
    v = review("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectRulesReview\","
               "\"spec\":{\"namespace\":\"a\"}}",
               NULL, "Impersonate-User: system:serviceaccount:kop-system:rev", 201);
    bool secret_rule = false;
    json_array_foreach(jpath_obj(v, "status", "resourceRules"), i, e)
    {
        const json_t *names = json_object_get(e, "resourceNames");
        if (json_array_size(names) == 1 &&
            strcmp(json_string_value(json_array_get(names, 0)), "s1") == 0)
            secret_rule = true;
    }
    ck_assert(secret_rule);
    ck_assert(json_is_false(json_object_get(json_object_get(v, "status"), "incomplete")));
    json_decref(v);
}
END_TEST

/* authentication.k8s.io and impersonation (apiserver filters/impersonation.go) */
START_TEST(test_kubesim_impersonation)
{
    char *tokens = kop_test_path(tmpdir, "imp-tokens.csv");
    char *ca2 = kop_test_path(tmpdir, "ca-imp.pem");
    write_text(tokens, "tok-alice,alice,uid-alice,devs\n");
    char *args[] = {"--token-auth-file", tokens, NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    static const char ssr[] = "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":"
                              "\"SelfSubjectReview\"}";
    static const char ssr_path[] = "/apis/authentication.k8s.io/v1/selfsubjectreviews";

    json_t *v = review(ssr_path, ssr, "tok-alice", NULL, 201);
    const json_t *ui = json_object_get(json_object_get(v, "status"), "userInfo");
    ck_assert_str_eq(json_string_value(json_object_get(ui, "username")), "alice");
    ck_assert_str_eq(json_string_value(json_object_get(ui, "uid")), "uid-alice");
    json_decref(v);

    /* the admin may impersonate; a service account gets its groups */
    v = review(ssr_path, ssr, NULL, "Impersonate-User: system:serviceaccount:ns1:sa1", 201);
    ui = json_object_get(json_object_get(v, "status"), "userInfo");
    ck_assert_str_eq(json_string_value(json_object_get(ui, "username")),
                     "system:serviceaccount:ns1:sa1");
    const json_t *groups = json_object_get(ui, "groups");
    ck_assert_int_eq(json_array_size(groups), 3);
    ck_assert_str_eq(json_string_value(json_array_get(groups, 0)), "system:serviceaccounts");
    ck_assert_str_eq(json_string_value(json_array_get(groups, 1)), "system:serviceaccounts:ns1");
    ck_assert_str_eq(json_string_value(json_array_get(groups, 2)), "system:authenticated");
    json_decref(v);

    /* alice may not, until a binding lets her impersonate bob */
    v = review(ssr_path, ssr, "tok-alice", "Impersonate-User: bob", 403);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "users \"bob\" is forbidden: User \"alice\" cannot impersonate resource "
                     "\"users\" in API group \"\" at the cluster scope");
    ck_assert_str_eq(jpath(v, "reason", NULL), "Forbidden");
    ck_assert_str_eq(jpath(v, "details", "kind"), "users");
    json_decref(v);
    v = review(ssr_path, ssr, "tok-alice", "Impersonate-User: system:serviceaccount:ns1:sa1", 403);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "serviceaccounts \"sa1\" is forbidden: User \"alice\" cannot impersonate "
                     "resource \"serviceaccounts\" in API group \"\" in the namespace \"ns1\"");
    json_decref(v);
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                             "{\"metadata\":{\"name\":\"imp\"},\"rules\":[{\"apiGroups\":[\"\"],"
                             "\"resources\":[\"users\"],\"resourceNames\":[\"bob\"],"
                             "\"verbs\":[\"impersonate\"]}]}",
                             201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"imp\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
        "io\","
        "\"kind\":\"ClusterRole\",\"name\":\"imp\"},\"subjects\":[{\"kind\":\"Group\","
        "\"name\":\"devs\"}]}",
        201));
    v = review(ssr_path, ssr, "tok-alice", "Impersonate-User: bob", 201);
    ui = json_object_get(json_object_get(v, "status"), "userInfo");
    ck_assert_str_eq(json_string_value(json_object_get(ui, "username")), "bob");
    groups = json_object_get(ui, "groups");
    ck_assert_int_eq(json_array_size(groups), 1);
    ck_assert_str_eq(json_string_value(json_array_get(groups, 0)), "system:authenticated");
    json_decref(v);
    /* bob may ask about himself (system:basic-user), not more */
    v = review(SSAR_PATH,
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":\"SelfSubjectAccessReview\","
               "\"spec\":{\"resourceAttributes\":{\"verb\":\"get\",\"resource\":\"pods\"}}}",
               "tok-alice", "Impersonate-User: bob", 201);
    ck_assert(json_is_false(json_object_get(json_object_get(v, "status"), "allowed")));
    ck_assert_ptr_null(json_object_get(json_object_get(v, "status"), "reason"));
    json_decref(v);
    v = review(ssr_path, ssr, "tok-alice", "Impersonate-User: carol", 403);
    json_decref(v);

    /* every request is authorized: alice may discover, not list */
    struct kop_test_resp r =
        request("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 403);
    v = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" "
                     "in API group \"\" in the namespace \"default\"");
    ck_assert_str_eq(jpath(v, "details", "kind"), "configmaps");
    json_decref(v);
    kop_test_resp_free(&r);
    r = request("GET", "/apis", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    r = request("GET", "/nothing-here", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 403);
    v = json_loads(r.body, 0, NULL);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "forbidden: User \"alice\" cannot get path \"/nothing-here\"");
    json_decref(v);
    kop_test_resp_free(&r);
    /* a name in resourceNames also covers a list or watch selecting it by
     * metadata.name, as RequestInfo names it */
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                             "{\"metadata\":{\"name\":\"one-cm\"},\"rules\":[{\"apiGroups\":"
                             "[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"c1\"],"
                             "\"verbs\":[\"get\",\"list\",\"watch\"]}]}",
                             201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        "{\"metadata\":{\"name\":\"one-cm\"},\"roleRef\":{\"apiGroup\":"
        "\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"one-cm\"},\"subjects\":"
        "[{\"kind\":\"User\",\"name\":\"alice\"}]}",
        201));
    r = request("GET", "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dc1",
                NULL, NULL, "tok-alice");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    r = request("GET", "/api/v1/namespaces/default/configmaps/c1", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 404); /* allowed; there is no c1 */
    kop_test_resp_free(&r);
    r = request("GET", "/api/v1/namespaces/default/configmaps/c2", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 403);
    kop_test_resp_free(&r);
    r = request("GET", "/api/v1/namespaces/kube-system/configmaps/c1", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 403);
    kop_test_resp_free(&r);

    /* groups without a user: the filter's internal error, its requests
     * printed as Go prints a []v1.ObjectReference, HTML-escaped */
    r = request_ex("POST", ssr_path, NULL, ssr, NULL,
                   "Impersonate-Group: g<1>\nImpersonate-Extra-k: v\nImpersonate-Uid: u");
    ck_assert_int_eq(r.code, 500);
    ck_assert_str_eq(r.body, "Internal Server Error: \"/apis/authentication.k8s.io/v1/"
                             "selfsubjectreviews\": requested [{Group  g&lt;1&gt;     } "
                             "{UserExtra  v  authentication.k8s.io/v1  k} {UID  u  "
                             "authentication.k8s.io/v1  }] without impersonating a user\n");
    kop_test_resp_free(&r);
    /* user extras: keys lower-cased and %-unescaped, values in order;
     * each value needs impersonate on userextras/KEY */
    const char *extras = "Impersonate-User: bob\nImpersonate-Extra-Acme.com%2Fproject: p1\n"
                         "Impersonate-Extra-Scopes: openid\nImpersonate-Extra-Scopes: profile";
    v = review(ssr_path, ssr, NULL, extras, 201);
    const json_t *extra = json_object_get(jpath_obj(v, "status", "userInfo"), "extra");
    ck_assert_str_eq(
        json_string_value(json_array_get(json_object_get(extra, "acme.com/project"), 0)), "p1");
    ck_assert_int_eq(json_array_size(json_object_get(extra, "scopes")), 2);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(extra, "scopes"), 1)),
                     "profile");
    json_decref(v);
    v = review(ssr_path, ssr, "tok-alice", extras, 403);
    ck_assert_str_eq(jpath(v, "message", NULL),
                     "userextras.authentication.k8s.io \"p1\" is forbidden: User \"alice\" cannot "
                     "impersonate resource \"userextras/acme.com/project\" in API group "
                     "\"authentication.k8s.io\" at the cluster scope");
    json_decref(v);

    /* TokenReview */
    v = review("/apis/authentication.k8s.io/v1/tokenreviews",
               "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
               "\"spec\":{\"token\":\"tok-alice\"}}",
               NULL, NULL, 201);
    ck_assert(json_is_true(json_object_get(json_object_get(v, "status"), "authenticated")));
    ck_assert_str_eq(jpath(jpath_obj(v, "status", "user"), "username", NULL), "alice");
    json_decref(v);
    v = review("/apis/authentication.k8s.io/v1/tokenreviews",
               "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
               "\"spec\":{\"token\":\"nope\"}}",
               NULL, NULL, 201);
    ck_assert_ptr_null(json_object_get(json_object_get(v, "status"), "authenticated"));
    json_decref(v);

    second_sim_stop(&sim2);
    free(ca2);
    free(tokens);
}
END_TEST

/* As alice: the status code, and the message of a refusal (malloc'd; NULL
 * on success). */
static long as_alice(const char *method, const char *path, const char *body, char **ret_msg)
{
    struct kop_test_resp r = request(method, path, NULL, body, "tok-esc");
    long code = r.code;
    *ret_msg = NULL;
    if (code >= 400) {
        json_t *v = json_loads(r.body, 0, NULL);
        ck_assert_ptr_nonnull(v);
        *ret_msg = strdup(jpath(v, "message", NULL));
        json_decref(v);
    }
    kop_test_resp_free(&r);
    return code;
}

#define RBAC_V1 "/apis/rbac.authorization.k8s.io/v1"
#define ROLE_REF(kind, name)                                                                       \
    "\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"" kind                     \
    "\",\"name\":\"" name "\"}"

/* RBAC's escalation check (pkg/registry/rbac/.../policybased/storage.go):
 * who may write roles grants only what he holds, binds only roles whose
 * permissions he holds, unless he has escalate or bind. */
/* POST body to path: a 422 whose message is want. */
static void expect_invalid(const char *path, const char *body, const char *want)
{
    json_t *st = request_json("POST", path, body, 422);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")), want);
    json_decref(st);
}

/*
 * The registry's validation (pkg/apis/core/validation, apps/validation,
 * apimachinery objectmeta.go): kubesim refuses what the apiserver refuses,
 * with its paths and texts, all causes in one 422; before, every object
 * below was stored.
 */
START_TEST(test_kubesim_validation)
{
    const char *cms = "/api/v1/namespaces/default/configmaps";
    expect_invalid(cms,
                   "{\"metadata\":{\"name\":\"c1\",\"labels\":{\"a\":\"@x\"},\"annotations\":"
                   "{\"a/b/c\":\"x\"}},\"data\":{\"a/b\":\"1\"}}",
                   "ConfigMap \"c1\" is invalid: [metadata.labels: Invalid value: \"@x\": a valid "
                   "label must be an empty string or consist of alphanumeric characters, '-', '_' "
                   "or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), metadata.annotations: Invalid "
                   "value: \"a/b/c\": a qualified name must consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                   "prefix and '/' (e.g. 'example.com/MyName'), data[a/b]: Invalid value: "
                   "\"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' "
                   "or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                   "validation is '[-._a-zA-Z0-9]+')]");
    expect_invalid(cms,
                   "{\"metadata\":{\"name\":\"c2\",\"ownerReferences\":[{\"apiVersion\":\"v1\","
                   "\"kind\":\"X\",\"name\":\"a\",\"uid\":\"\"}],\"finalizers\":[\"a b\"]}}",
                   "ConfigMap \"c2\" is invalid: [metadata.ownerReferences.uid: Invalid value: "
                   "\"\": uid must not be empty, metadata.finalizers: Invalid value: \"a b\": name "
                   "part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                   "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                   "[A-Za-z0-9]')]");
    json_t *big = json_pack("{s:{s:s,s:{}}}", "metadata", "name", "c3", "annotations");
    json_t *ann = json_object_get(json_object_get(big, "metadata"), "annotations");
    char *v = malloc(262145); /* with its key, one byte over the 256 KiB total */
    ck_assert_ptr_nonnull(v);
    memset(v, 'a', 262144);
    v[262144] = '\0';
    json_object_set_new(ann, "x", json_string(v));
    free(v);
    char *body = json_dumps(big, JSON_COMPACT);
    json_decref(big);
    expect_invalid(cms, body,
                   "ConfigMap \"c3\" is invalid: metadata.annotations: Too long: may not be more "
                   "than 262144 bytes");
    free(body);
    /* RBAC names are path segments: "system:" names and capitals are fine */
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                             "{\"metadata\":{\"name\":\"system:Custom\"},\"rules\":[]}", 201));
    /* ValidatePolicyRule, ValidateClusterRoleBinding (after the defaults) */
    expect_invalid("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
                   "{\"metadata\":{\"name\":\"r\"},\"rules\":[{\"apiGroups\":[\"\"],"
                   "\"resources\":[\"pods\"]},{\"nonResourceURLs\":[\"/healthz\"],\"verbs\":"
                   "[\"get\"]},{\"verbs\":[\"get\"]}]}",
                   "Role.rbac.authorization.k8s.io \"r\" is invalid: [rules[0].verbs: Required "
                   "value: verbs must contain at least one value, rules[1].nonResourceURLs: "
                   "Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to "
                   "non-resource URLs, rules[2].apiGroups: Required value: resource rules must "
                   "supply at least one api group, rules[2].resources: Required value: resource "
                   "rules must supply at least one resource]");
    expect_invalid("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                   "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":\"Role\","
                   "\"name\":\"view\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":"
                   "\"sa\"},{\"kind\":\"User\",\"name\":\"u\"},{\"kind\":\"Robot\",\"name\":"
                   "\"r\"}]}",
                   "ClusterRoleBinding.rbac.authorization.k8s.io \"b\" is invalid: [roleRef.kind: "
                   "Unsupported value: \"Role\": supported values: \"ClusterRole\", "
                   "subjects[0].namespace: Required value, subjects[2].kind: Unsupported value: "
                   "\"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"]");
    json_t *crb = request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                               "{\"metadata\":{\"name\":\"b\"},\"roleRef\":{\"kind\":"
                               "\"ClusterRole\",\"name\":\"view\"},\"subjects\":[{\"kind\":"
                               "\"Group\",\"name\":\"g\"}]}",
                               201);
    ck_assert_str_eq(jpath(crb, "roleRef", "apiGroup"), "rbac.authorization.k8s.io");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(crb, "subjects"), 0), "apiGroup")),
                     "rbac.authorization.k8s.io");
    json_decref(crb);
    /* a Pod's containers (ValidatePodSpec, the rules a Deployment's template shares) */
    expect_invalid("/api/v1/namespaces/default/pods",
                   "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"activeDeadlineSeconds\":0,"
                   "\"containers\":[{\"name\":\"c\"}]}}",
                   "Pod \"p\" is invalid: [spec.containers[0].image: Required value, "
                   "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and "
                   "2147483647, inclusive]");
    expect_invalid("/api/v1/namespaces/default/pods", "{\"metadata\":{\"name\":\"p\"}}",
                   "Pod \"p\" is invalid: spec.containers: Required value");
    /* a []byte member that is not base64: the decoder's 400 */
    json_t *st =
        request_json("POST", "/api/v1/namespaces/default/secrets",
                     "{\"metadata\":{\"name\":\"s\"},\"data\":{\"k\":\"not base64!\"}}", 400);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")),
                     "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data "
                     "at input byte 3");
    json_decref(st);
    expect_invalid("/api/v1/namespaces/default/events",
                   "{\"metadata\":{\"name\":\"e.1\"},\"involvedObject\":{\"kind\":\"Pod\","
                   "\"namespace\":\"other\",\"name\":\"p\"},\"reason\":\"R\"}",
                   "Event \"e.1\" is invalid: involvedObject.namespace: Invalid value: "
                   "\"other\": does not match event.namespace");
    expect_invalid("/apis/coordination.k8s.io/v1/namespaces/default/leases",
                   "{\"metadata\":{\"name\":\"l\"},\"spec\":{\"leaseDurationSeconds\":0}}",
                   "Lease.coordination.k8s.io \"l\" is invalid: spec.leaseDurationSeconds: "
                   "Invalid value: 0: must be greater than 0");

    const char *svcs = "/api/v1/namespaces/default/services";
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"v1\"},\"spec\":{\"ports\":[{\"name\":\"a\","
                   "\"port\":80},{\"name\":\"a\",\"port\":0},{\"port\":81,\"targetPort\":"
                   "\"HTTP\",\"nodePort\":30001}]}}",
                   "Service \"v1\" is invalid: [spec.ports[1].name: Duplicate value: \"a\", "
                   "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive, "
                   "spec.ports[1].targetPort: Invalid value: 0: must be between 1 and 65535, "
                   "inclusive, spec.ports[2].name: Required value, spec.ports[2].targetPort: "
                   "Invalid value: \"HTTP\": must contain only alpha-numeric characters (a-z, "
                   "0-9), and hyphens (-), spec.ports[2].targetPort: Invalid value: \"HTTP\": must "
                   "contain at least one letter (a-z), spec.ports[2].nodePort: Forbidden: may not "
                   "be used when `type` is 'ClusterIP']");
    /* NodePort -> ClusterIP sending the allocated nodePort back: dropped, as
     * dropTypeDependentFields does, not refused */
    json_t *np = request_json("POST", svcs,
                              "{\"metadata\":{\"name\":\"np\"},\"spec\":{\"type\":\"NodePort\","
                              "\"ports\":[{\"port\":80}]}}",
                              201);
    json_t *spec = json_object_get(np, "spec");
    ck_assert_int_ge(json_integer_value(json_object_get(
                         json_array_get(json_object_get(spec, "ports"), 0), "nodePort")),
                     30000);
    json_object_set_new(spec, "type", json_string("ClusterIP"));
    body = json_dumps(np, JSON_COMPACT);
    json_decref(np);
    np = request_json("PUT", "/api/v1/namespaces/default/services/np", body, 200);
    free(body);
    spec = json_object_get(np, "spec");
    ck_assert_ptr_null(
        json_object_get(json_array_get(json_object_get(spec, "ports"), 0), "nodePort"));
    ck_assert_ptr_null(json_object_get(spec, "externalTrafficPolicy"));
    json_decref(np);

    expect_invalid(
        "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"d1\"},\"spec\":{\"replicas\":-1,\"selector\":{"
        "\"matchLabels\":"
        "{\"app\":\"d1\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"x\",\"b\":\"c\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"ports\":[{\"name\":\"web\","
        "\"containerPort\":80},{\"name\":\"web\",\"containerPort\":81}]},{\"name\":\"c\","
        "\"image\":\"nginx\"}]}}}}",
        "Deployment.apps \"d1\" is invalid: [spec.replicas: Invalid value: -1: must be greater "
        "than or equal to 0, spec.template.metadata.labels: Invalid value: "
        "map[string]string{\"app\":\"x\", \"b\":\"c\"}: `selector` does not match template "
        "`labels`, spec.template.spec.containers[0].image: Required value, "
        "spec.template.spec.containers[0].ports[1].name: Duplicate value: \"web\", "
        "spec.template.spec.containers[1].name: Duplicate value: \"c\"]");
    /* ValidateReplicaSetSpec: no selector selects nothing */
    expect_invalid("/apis/apps/v1/namespaces/default/replicasets",
                   "{\"metadata\":{\"name\":\"r1\"},\"spec\":{\"minReadySeconds\":-2,"
                   "\"template\":{\"metadata\":{\"labels\":{\"app\":\"r1\"}},\"spec\":{"
                   "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":"
                   "\"nginx\"}]}}}}",
                   "ReplicaSet.apps \"r1\" is invalid: [spec.minReadySeconds: Invalid value: -2: "
                   "must be greater than or equal to 0, spec.selector: Required value, "
                   "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":"
                   "\"r1\"}: `selector` does not match template `labels`, "
                   "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported "
                   "values: \"Always\"]");
    expect_invalid("/apis/apps/v1/namespaces/default/replicasets",
                   "{\"metadata\":{\"name\":\"r2\"},\"spec\":{\"replicas\":-1,\"selector\":{},"
                   "\"template\":{\"metadata\":{\"labels\":{\"app\":\"r2\"}},\"spec\":{"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
                   "ReplicaSet.apps \"r2\" is invalid: [spec.replicas: Invalid value: -1: must be "
                   "greater than or equal to 0, spec.selector: Invalid value: "
                   "v1.LabelSelector{MatchLabels:map[string]string(nil), "
                   "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is "
                   "invalid for deployment]");
}
END_TEST

/* a JSON body's member (a pod spec's, by keys) */
static const json_t *pod_member(const json_t *pod, const char *list, size_t i, const char *k)
{
    return json_object_get(json_array_get(json_object_get(json_object_get(pod, "spec"), list), i),
                           k);
}

/*
 * A pod spec's affinity and topologySpreadConstraints (validateAffinity
 * after the nodeSelector, validateTopologySpreadConstraints after the
 * schedulingGates; 1.32 with its default gates): node selector operators
 * and their values, the field selector's metadata.name, the weights, the
 * pod affinity terms (selectors, namespaces, matchLabelKeys and
 * mismatchLabelKeys, topologyKey) and the spread constraints (maxSkew,
 * topologyKey, whenUnsatisfiable, duplicates, minDomains, the inclusion
 * policies, matchLabelKeys, selector), with upstream's paths (its
 * ".namespace" and "[0][1]" too), texts and order among the spec's other
 * errors. A Pod's matchLabelKeys and mismatchLabelKeys are merged into
 * the term's selector first (the strategy's mutatePodAffinity), a
 * template's are not. Before, every object below was stored, but for an
 * unknown enum, which the typed schema answered alone.
 */
START_TEST(test_kubesim_pod_affinity)
{
    const char *pods = "/api/v1/namespaces/default/pods";
    /* "not valid!": 1.32 checks no value of a node affinity's
     * matchExpressions (1.33 does); "app" and "tier" are in the selector
     * once merged ("app In [af]", "tier In [web]", "tier NotIn [web]") */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"aff\",\"labels\":{\"app\":\"af\","
                   "\"tier\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\"}],"
                   "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                   "Execution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"z"
                   "one\",\"operator\":\"Near\",\"values\":[\"a\"]},{\"key\":\"disk\","
                   "\"operator\":\"In\"},{\"key\":\"gpu\",\"operator\":\"Exists\","
                   "\"values\":[\"x\"]},{\"key\":\"cores\",\"operator\":\"Gt\","
                   "\"values\":[\"1\",\"2\"]},{\"key\":\"ok\",\"operator\":\"In\","
                   "\"values\":[\"not valid!\"]}],"
                   "\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"Exists\"},"
                   "{\"key\":\"spec.nodeName\",\"operator\":\"In\",\"values\":[\"a\","
                   "\"b\"]},{\"key\":\"metadata.name\",\"operator\":\"NotIn\","
                   "\"values\":[\"Node_1\"]}]}]},"
                   "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":0,"
                   "\"preference\":{\"matchExpressions\":[{\"key\":\"disk\","
                   "\"operator\":\"Lt\"}]}}]},"
                   "\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{"
                   "\"labelSelector\":{\"matchLabels\":{\"app\":\"af\"},"
                   "\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"Foo\"}]},"
                   "\"namespaces\":[\"x.y\"],\"matchLabelKeys\":[\"app\",\"tier\"],"
                   "\"mismatchLabelKeys\":[\"tier\",\"a b\"],\"topologyKey\":\"\"}]}},"
                   "\"dnsConfig\":{\"options\":[{\"name\":\"\"}]}}}",
                   "Pod \"aff\" is invalid: [spec.containers[0].image: Required value, "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: "
                   "\"Near\": not a valid selector operator, "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchExpressions[1].values: Required value: "
                   "must be specified when `operator` is 'In' or 'NotIn', "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchExpressions[2].values: Forbidden: may not "
                   "be specified when `operator` is 'Exists' or 'DoesNotExist', "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchExpressions[3].values: Required value: "
                   "must be specified single value when `operator` is 'Lt' or 'Gt', "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchFields[0].operator: Invalid value: "
                   "\"Exists\": not a valid selector operator, "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchFields[1].values: Required value: must be "
                   "only one value when `operator` is 'In' or 'NotIn' for node field "
                   "selector, "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchFields[1].key: Invalid value: "
                   "\"spec.nodeName\": not a valid field selector key, "
                   "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecuti"
                   "on.nodeSelectorTerms[0].matchFields[2].values[0]: Invalid value: "
                   "\"Node_1\": a lowercase RFC 1123 subdomain must consist of lower case "
                   "alphanumeric characters, '-' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'example.com', regex used for validation "
                   "is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
                   "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecut"
                   "ion[0].weight: Invalid value: 0: must be in the range 1-100, "
                   "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecut"
                   "ion[0].preference.matchExpressions[0].values: Required value: must be "
                   "specified single value when `operator` is 'Lt' or 'Gt', "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].labelSelector.matchExpressions[0].operator: Invalid value: "
                   "\"Foo\": not a valid selector operator, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].namespace: Invalid value: \"x.y\": must not contain dots, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].mismatchLabelKeys[1]: Invalid value: \"a b\": name part must "
                   "consist of alphanumeric characters, '-', '_' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
                   "or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0][0]: Invalid value: \"app\": exists in both matchLabelKeys and "
                   "labelSelector, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0][1]: Invalid value: \"tier\": exists in both matchLabelKeys and "
                   "labelSelector, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].matchLabelKeys[1]: Invalid value: \"tier\": exists in both "
                   "matchLabelKeys and mismatchLabelKeys, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].topologyKey: Required value: can not be empty, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].topologyKey: Invalid value: \"\": name part must be non-empty, "
                   "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecutio"
                   "n[0].topologyKey: Invalid value: \"\": name part must consist of "
                   "alphanumeric characters, '-', '_' or '.', and must start and end with "
                   "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                   "'123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
                   "spec.dnsConfig.options[0]: Required value: must not be empty]");
    /* a term without a labelSelector is not merged; the spread constraints
     * after the schedulingGates, before activeDeadlineSeconds */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"aff-spread\",\"labels\":{\"app\":\"af\","
                   "\"tier\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"nginx\"}],"
                   "\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDu"
                   "ringExecution\":[{\"weight\":101,"
                   "\"podAffinityTerm\":{\"namespaceSelector\":{\"matchExpressions\":[{\"ke"
                   "y\":\"team\",\"operator\":\"In\",\"values\":[\"a/b\"]}]},"
                   "\"matchLabelKeys\":[\"app\"],"
                   "\"topologyKey\":\"kubernetes.io/hostname\"}}]}},"
                   "\"schedulingGates\":[{\"name\":\"g\"},{\"name\":\"g\"}],"
                   "\"topologySpreadConstraints\":[{\"maxSkew\":0,\"topologyKey\":\"zone\","
                   "\"whenUnsatisfiable\":\"DoNotSchedule\",\"minDomains\":0,"
                   "\"nodeAffinityPolicy\":\"Maybe\",\"matchLabelKeys\":[\"app\"],"
                   "\"labelSelector\":{\"matchLabels\":{\"app\":\"af\"}}},{\"maxSkew\":1,"
                   "\"topologyKey\":\"\",\"whenUnsatisfiable\":\"\","
                   "\"nodeTaintsPolicy\":\"\",\"matchLabelKeys\":[\"x\"]},{\"maxSkew\":1,"
                   "\"topologyKey\":\"zone\",\"whenUnsatisfiable\":\"DoNotSchedule\"},"
                   "{\"maxSkew\":2,\"topologyKey\":\"host\","
                   "\"whenUnsatisfiable\":\"ScheduleAnyway\",\"minDomains\":2,"
                   "\"labelSelector\":{\"matchExpressions\":[{\"key\":\"k\","
                   "\"operator\":\"Exists\",\"values\":[\"v\"]}]}}],"
                   "\"activeDeadlineSeconds\":0}}",
                   "Pod \"aff-spread\" is invalid: "
                   "[spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringEx"
                   "ecution[0].weight: Invalid value: 101: must be in the range 1-100, "
                   "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExe"
                   "cution[0].podAffinityTerm.namespaceSelector.matchExpressions[0].values["
                   "0]: Invalid value: \"a/b\": a valid label must be an empty string or "
                   "consist of alphanumeric characters, '-', '_' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'MyValue',  or "
                   "'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), "
                   "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExe"
                   "cution[0].podAffinityTerm.matchLabelKeys: Forbidden: must not be "
                   "specified when labelSelector is not set, spec.schedulingGates[1]: "
                   "Duplicate value: \"g\", spec.topologySpreadConstraints[0].maxSkew: "
                   "Invalid value: 0: must be greater than zero, "
                   "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: "
                   "Duplicate value: \"{zone, DoNotSchedule}\", "
                   "spec.topologySpreadConstraints[0].minDomains: Invalid value: 0: must "
                   "be greater than zero, "
                   "spec.topologySpreadConstraints[0].nodeAffinityPolicy: Unsupported "
                   "value: \"Maybe\": supported values: \"Honor\", \"Ignore\", "
                   "spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: "
                   "\"app\": exists in both matchLabelKeys and labelSelector, "
                   "spec.topologySpreadConstraints[1].topologyKey: Required value: can not "
                   "be empty, spec.topologySpreadConstraints[1].whenUnsatisfiable: "
                   "Unsupported value: \"\": supported values: \"DoNotSchedule\", "
                   "\"ScheduleAnyway\", "
                   "spec.topologySpreadConstraints[1].nodeTaintsPolicy: Unsupported value: "
                   "\"\": supported values: \"Honor\", \"Ignore\", "
                   "spec.topologySpreadConstraints[1].matchLabelKeys: Forbidden: must not "
                   "be specified when labelSelector is not set, "
                   "spec.topologySpreadConstraints[3].minDomains: Invalid value: 2: can "
                   "only use minDomains if whenUnsatisfiable=DoNotSchedule, not "
                   "ScheduleAnyway, "
                   "spec.topologySpreadConstraints[3].labelSelector.matchExpressions[0].val"
                   "ues: Forbidden: may not be specified when `operator` is 'Exists' or "
                   "'DoesNotExist', spec.activeDeadlineSeconds: Invalid value: 0: must be "
                   "between 1 and 2147483647, inclusive]");
    /* a template is not merged: "app" is refused when the selector had it
     * before the expression; an unknown whenUnsatisfiable is among the
     * other errors, not the typed schema's alone */
    expect_invalid("/apis/apps/v1/namespaces/default/deployments",
                   "{\"metadata\":{\"name\":\"affd\"},"
                   "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"affd\"}},"
                   "\"template\":{\"metadata\":{\"labels\":{\"app\":\"affd\"}},"
                   "\"spec\":{\"restartPolicy\":\"OnFailure\",\"dnsPolicy\":\"Bad\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}],"
                   "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuring"
                   "Execution\":{\"nodeSelectorTerms\":[]},"
                   "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":5,"
                   "\"preference\":{\"matchFields\":[{\"key\":\"metadata.name\","
                   "\"operator\":\"Gt\",\"values\":[\"n\"]}]}}]},"
                   "\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\""
                   ":[{\"labelSelector\":{\"matchLabels\":{\"app\":\"affd\"},"
                   "\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\","
                   "\"values\":[\"affd\"]}]},\"matchLabelKeys\":[\"app\"],"
                   "\"topologyKey\":\"a/b/c\"}]}},"
                   "\"topologySpreadConstraints\":[{\"maxSkew\":-1,"
                   "\"topologyKey\":\"zone\",\"whenUnsatisfiable\":\"Bad\","
                   "\"nodeTaintsPolicy\":\"honor\"},{\"maxSkew\":1,"
                   "\"topologyKey\":\"zone\",\"whenUnsatisfiable\":\"Bad\"}]}}}}",
                   "Deployment.apps \"affd\" is invalid: [spec.template.spec.dnsPolicy: "
                   "Unsupported value: \"Bad\": supported values: "
                   "\"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\", "
                   "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnore"
                   "dDuringExecution.nodeSelectorTerms: Required value: must have at least "
                   "one node selector term, "
                   "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnor"
                   "edDuringExecution[0].preference.matchFields[0].operator: Invalid "
                   "value: \"Gt\": not a valid selector operator, "
                   "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgn"
                   "oredDuringExecution[0][0]: Invalid value: \"app\": exists in both "
                   "matchLabelKeys and labelSelector, "
                   "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgn"
                   "oredDuringExecution[0].topologyKey: Invalid value: \"a/b/c\": a "
                   "qualified name must consist of alphanumeric characters, '-', '_' or "
                   "'.', and must start and end with an alphanumeric character (e.g. "
                   "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
                   "subdomain prefix and '/' (e.g. 'example.com/MyName'), "
                   "spec.template.spec.topologySpreadConstraints[0].maxSkew: Invalid "
                   "value: -1: must be greater than zero, "
                   "spec.template.spec.topologySpreadConstraints[0].whenUnsatisfiable: "
                   "Unsupported value: \"Bad\": supported values: \"DoNotSchedule\", "
                   "\"ScheduleAnyway\", "
                   "spec.template.spec.topologySpreadConstraints[0].{topologyKey, "
                   "whenUnsatisfiable}: Duplicate value: \"{zone, Bad}\", "
                   "spec.template.spec.topologySpreadConstraints[0].nodeTaintsPolicy: "
                   "Unsupported value: \"honor\": supported values: \"Honor\", \"Ignore\", "
                   "spec.template.spec.topologySpreadConstraints[1].whenUnsatisfiable: "
                   "Unsupported value: \"Bad\": supported values: \"DoNotSchedule\", "
                   "\"ScheduleAnyway\", spec.template.spec.restartPolicy: Unsupported "
                   "value: \"OnFailure\": supported values: \"Always\"]");
    /* a valid Pod is stored with its terms' label keys merged, and may be
     * sent back so (the gate keeps the scheduler from binding it) */
    json_t *p = request_json(
        "POST", pods,
        "{\"metadata\":{\"name\":\"rich-aff\",\"labels\":{\"app\":\"web\","
        "\"version\":\"v2\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"nginx\"}],"
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\""
        ":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/os\","
        "\"operator\":\"In\",\"values\":[\"linux\"]},{\"key\":\"example.com/cores\","
        "\"operator\":\"Gt\",\"values\":[\"4\"]},{\"key\":\"spot\","
        "\"operator\":\"DoesNotExist\"}]},{\"matchFields\":[{\"key\":\"metadata.name\","
        "\"operator\":\"NotIn\",\"values\":[\"node-1\"]}]}]},"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,"
        "\"preference\":{\"matchExpressions\":[{\"key\":\"disk\",\"operator\":\"In\","
        "\"values\":[\"ssd\"]}]}},{\"weight\":100,\"preference\":{}}]},"
        "\"podAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":"
        "50,\"podAffinityTerm\":{\"labelSelector\":{\"matchLabels\":{\"app\":\"cache\"}},"
        "\"namespaceSelector\":{},\"topologyKey\":\"topology.kubernetes.io/zone\"}}]},"
        "\"podAntiAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"labelS"
        "elector\":{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"}]},"
        "\"namespaces\":[\"default\",\"other\"],\"matchLabelKeys\":[\"version\"],"
        "\"mismatchLabelKeys\":[\"missing\"],"
        "\"topologyKey\":\"kubernetes.io/hostname\"}]}},"
        "\"topologySpreadConstraints\":[{\"maxSkew\":1,"
        "\"topologyKey\":\"topology.kubernetes.io/zone\","
        "\"whenUnsatisfiable\":\"DoNotSchedule\",\"minDomains\":3,"
        "\"nodeAffinityPolicy\":\"Honor\",\"nodeTaintsPolicy\":\"Ignore\","
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}},"
        "\"matchLabelKeys\":[\"pod-template-hash\"]},{\"maxSkew\":2,"
        "\"topologyKey\":\"kubernetes.io/hostname\","
        "\"whenUnsatisfiable\":\"ScheduleAnyway\","
        "\"labelSelector\":{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"In\","
        "\"values\":[\"web\"]}]}}],\"schedulingGates\":[{\"name\":\"example.com/hold\"}]}}",
        201);
    json_t *sel = json_object_get(
        json_array_get(
            json_object_get(json_object_get(json_object_get(json_object_get(p, "spec"), "affinity"),
                                            "podAntiAffinity"),
                            "requiredDuringSchedulingIgnoredDuringExecution"),
            0),
        "labelSelector");
    json_t *want = json_loads("{\"matchExpressions\":[{\"key\":\"app\",\"operator\":\"Exists\"},"
                              "{\"key\":\"version\",\"operator\":\"In\",\"values\":[\"v2\"]}]}",
                              0, NULL);
    ck_assert_msg(json_equal(sel, want), "merged selector: %s", json_dumps(sel, JSON_COMPACT));
    json_decref(want);
    json_object_del(json_object_get(p, "metadata"), "resourceVersion");
    char *body = json_dumps(p, JSON_COMPACT);
    json_decref(request_json("PUT", "/api/v1/namespaces/default/pods/rich-aff", body, 200));
    free(body);
    json_decref(p);
    /* kop's Deployment's podAntiAffinity (manifests/base/deployment.yaml)
     * with a spread constraint */
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"affok\"},"
        "\"spec\":{\"selector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"kop\","
        "\"app.kubernetes.io/component\":\"controller-manager\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"app.kubernetes.io/name\":\"kop\","
        "\"app.kubernetes.io/component\":\"controller-manager\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"manager\",\"image\":\"kop\"}],"
        "\"affinity\":{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecuti"
        "on\":[{\"weight\":100,"
        "\"podAffinityTerm\":{\"topologyKey\":\"kubernetes.io/hostname\","
        "\"labelSelector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"kop\","
        "\"app.kubernetes.io/component\":\"controller-manager\"}}}}]}},"
        "\"topologySpreadConstraints\":[{\"maxSkew\":1,"
        "\"topologyKey\":\"topology.kubernetes.io/zone\","
        "\"whenUnsatisfiable\":\"ScheduleAnyway\","
        "\"labelSelector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"kop\"}},"
        "\"matchLabelKeys\":[\"pod-template-hash\"]}]}}}}",
        201));
}
END_TEST

/*
 * The string enums of a pod spec and a Deployment's strategy are the
 * registry's validation's (validateContainerCommon, validateRestartPolicy,
 * validateDNSPolicy, ValidateTolerations, ValidatePreemptionPolicy,
 * validateHostPathType, validateMountPropagation, validateHTTPGetAction,
 * ValidateDeploymentStrategy): NotSupported at their positions among the
 * other errors, with upstream's lists in upstream's order (a literal slice
 * is not sorted). Before, the typed schema answered a 422 with the enum
 * errors alone, sorted lists, and without the missing image, the unknown
 * volume or the template's restartPolicy rule.
 */
START_TEST(test_kubesim_pod_enums)
{
    expect_invalid(
        "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"en\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"en\"}},"
        "\"strategy\":{\"type\":\"Blue\"},\"template\":{\"metadata\":{\"labels\":{\"app\":\"en\"}},"
        "\"spec\":{\"restartPolicy\":\"OnFailure\",\"dnsPolicy\":\"Bad\",\"preemptionPolicy\":"
        "\"Sometimes\",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Maybe\",\"effect\":\"Bad\"}],"
        "\"volumes\":[{\"name\":\"v\",\"hostPath\":{\"path\":\"/x\",\"type\":\"Weird\"}}],"
        "\"containers\":[{\"name\":\"c\",\"imagePullPolicy\":\"Sometimes\","
        "\"terminationMessagePolicy\":\"Foo\",\"ports\":[{\"containerPort\":80,\"protocol\":"
        "\"XTP\"}],\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\",\"mountPropagation\":"
        "\"\"}],\"readinessProbe\":{\"httpGet\":{\"port\":80,\"scheme\":\"FTP\"}}}]}}}}",
        "Deployment.apps \"en\" is invalid: [spec.template.spec.volumes[0].hostPath.type: "
        "Unsupported value: \"Weird\": supported values: \"\", \"BlockDevice\", \"CharDevice\", "
        "\"Directory\", \"DirectoryOrCreate\", \"File\", \"FileOrCreate\", \"Socket\", "
        "spec.template.spec.containers[0].image: Required value, "
        "spec.template.spec.containers[0].terminationMessagePolicy: Unsupported value: \"Foo\": "
        "supported values: \"File\", \"FallbackToLogsOnError\", "
        "spec.template.spec.containers[0].ports[0].protocol: Unsupported value: \"XTP\": "
        "supported values: \"SCTP\", \"TCP\", \"UDP\", "
        "spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"v\", "
        "spec.template.spec.containers[0].volumeMounts.mountPropagation: Unsupported value: "
        "\"\": supported values: \"Bidirectional\", \"HostToContainer\", \"None\", "
        "spec.template.spec.containers[0].imagePullPolicy: Unsupported value: \"Sometimes\": "
        "supported values: \"Always\", \"IfNotPresent\", \"Never\", "
        "spec.template.spec.containers[0].readinessProbe.httpGet.scheme: Unsupported value: "
        "\"FTP\": supported values: \"HTTP\", \"HTTPS\", spec.template.spec.dnsPolicy: "
        "Unsupported value: \"Bad\": supported values: \"ClusterFirstWithHostNet\", "
        "\"ClusterFirst\", \"Default\", \"None\", spec.template.spec.tolerations[0].operator: "
        "Unsupported value: \"Maybe\": supported values: \"Equal\", \"Exists\", "
        "spec.template.spec.tolerations[0].effect: Unsupported value: \"Bad\": supported values: "
        "\"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\", "
        "spec.template.spec.preemptionPolicy: Unsupported value: \"Sometimes\": supported "
        "values: \"PreemptLowerPriority\", \"Never\", spec.template.spec.restartPolicy: "
        "Unsupported value: \"OnFailure\": supported values: \"Always\", spec.strategy: "
        "Unsupported value: apps.DeploymentStrategy{Type:\"Blue\", "
        "RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: \"Recreate\", "
        "\"RollingUpdate\"]");
    const char *pods = "/api/v1/namespaces/default/pods";
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"pe\"},\"spec\":{\"restartPolicy\":\"Sometimes\","
                   "\"dnsPolicy\":\"None\",\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}",
                   "Pod \"pe\" is invalid: [spec.restartPolicy: Unsupported value: \"Sometimes\": "
                   "supported values: \"Always\", \"OnFailure\", \"Never\", spec.dnsConfig: "
                   "Required value: must provide `dnsConfig` when `dnsPolicy` is None]");
    /* an update is validated as a create first (ValidatePodUpdate): a
     * toleration may be added, not one of an unknown effect */
    json_decref(request_json("POST", pods,
                             "{\"metadata\":{\"name\":\"pt\"},\"spec\":{\"containers\":[{\"name\":"
                             "\"c\",\"image\":\"nginx\"}]}}",
                             201));
    json_t *p = request_json("GET", "/api/v1/namespaces/default/pods/pt", NULL, 200);
    json_t *tols = json_object_get(json_object_get(p, "spec"), "tolerations");
    if (!json_is_array(tols)) {
        tols = json_array();
        json_object_set_new(json_object_get(p, "spec"), "tolerations", tols);
    }
    size_t n = json_array_size(tols);
    json_array_append_new(
        tols, json_pack("{s:s,s:s,s:s}", "key", "a", "operator", "Exists", "effect", "Bad"));
    char *body = json_dumps(p, JSON_COMPACT);
    json_t *st = request_json("PUT", "/api/v1/namespaces/default/pods/pt", body, 422);
    free(body);
    char want[256];
    snprintf(want, sizeof(want),
             "Pod \"pt\" is invalid: spec.tolerations[%zu].effect: Unsupported value: \"Bad\": "
             "supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"",
             n);
    ck_assert_str_eq(jpath(st, "message", NULL), want);
    json_decref(st);
    json_object_set_new(json_array_get(tols, n), "effect", json_string("NoSchedule"));
    body = json_dumps(p, JSON_COMPACT);
    json_decref(request_json("PUT", "/api/v1/namespaces/default/pods/pt", body, 200));
    free(body);
    json_decref(p);
    /* what podvalidation.c does not model stays the schema's */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"ps\"},\"spec\":{\"volumes\":[{\"name\":\"v\","
                   "\"azureDisk\":{\"diskName\":\"d\",\"diskURI\":\"u\",\"cachingMode\":\"Bad\"}}],"
                   "\"containers\":[{\"name\":\"c\"}]}}",
                   "Pod \"ps\" is invalid: spec.volumes[0].azureDisk.cachingMode: Unsupported "
                   "value: \"Bad\": supported values: \"None\", \"ReadOnly\", \"ReadWrite\"");
}
END_TEST

/* msg with each pointer that Go's %#v prints ((*T)(0xc000...)) as 0x?. malloc'd */
static char *mask_pointers(const char *msg)
{
    char *out = strdup(msg);
    ck_assert_ptr_nonnull(out);
    size_t o = 0;
    for (size_t i = 0; msg[i];) {
        if (strncmp(msg + i, "(0x", 3) == 0) {
            memcpy(out + o, "(0x?", 4);
            o += 4;
            for (i += 3; isxdigit((unsigned char)msg[i]); i++)
                ;
        } else {
            out[o++] = msg[i++];
        }
    }
    out[o] = '\0';
    return out;
}

/*
 * A pod spec's securityContext (validatePodSpecSecurityContext,
 * ValidateSecurityContext, validateWindowsHostProcessPod, validateOS with
 * validateLinux and validateWindows, 1.32): the pod's and each container's
 * IDs, sysctls, seccomp, AppArmor and Windows options, the enums at
 * upstream's positions with its lists, among the other errors of the
 * spec. What 1.32's gates leave out is dropped before validation
 * (hostUsers, supplementalGroupsPolicy, seLinuxChangePolicy; a procMount
 * becomes "Default"). Before, all of these objects but the windows Pod
 * were stored, and the enums were the typed schema's alone.
 */
START_TEST(test_kubesim_pod_security_context)
{
    const char *pods = "/api/v1/namespaces/default/pods";
    const char *deps = "/apis/apps/v1/namespaces/default/deployments";
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"sc1\"},\"spec\":{\"hostNetwork\":true,"
                   "\"hostPID\":true,\"hostIPC\":true,\"shareProcessNamespace\":true,"
                   "\"hostUsers\":false,\"restartPolicy\":\"Sometimes\","
                   "\"securityContext\":{\"runAsUser\":-1,\"runAsGroup\":2147483648,"
                   "\"fsGroup\":-5,\"supplementalGroups\":[1,-2],"
                   "\"supplementalGroupsPolicy\":\"Sometimes\","
                   "\"seLinuxChangePolicy\":\"Sometimes\",\"sysctls\":[{\"name\":\"net.core.so"
                   "maxconn\",\"value\":\"1024\"},{\"name\":\"kernel/shm_rmid_forced\","
                   "\"value\":\"1\"},{\"name\":\"Bad_Name\",\"value\":\"1\"},"
                   "{\"name\":\"net.core.somaxconn\",\"value\":\"2\"},{\"name\":\"\","
                   "\"value\":\"x\"}],\"fsGroupChangePolicy\":\"Never\","
                   "\"seccompProfile\":{\"type\":\"Localhost\"},"
                   "\"windowsOptions\":{\"gmsaCredentialSpecName\":\"Bad_Name\","
                   "\"runAsUserName\":\"a\\\\b\\\\c\"},\"appArmorProfile\":{\"type\":\"Localho"
                   "st\",\"localhostProfile\":\" p\"}},\"containers\":[{\"name\":\"c\","
                   "\"securityContext\":{\"runAsUser\":-1,\"procMount\":\"Foo\","
                   "\"capabilities\":{\"add\":[\"CAP_SYS_ADMIN\"]},"
                   "\"seccompProfile\":{\"type\":\"Weird\"},"
                   "\"windowsOptions\":{\"runAsUserName\":\"dom\\\\\"},"
                   "\"appArmorProfile\":{\"type\":\"RuntimeDefault\","
                   "\"localhostProfile\":\"p\"}}}]}}",
                   "Pod \"sc1\" is invalid: [spec.containers[0].image: Required value, "
                   "spec.containers[0].securityContext.runAsUser: Invalid value: -1: must be "
                   "between 0 and 2147483647, inclusive, spec.containers[0].securityContext.se"
                   "ccompProfile.type: Unsupported value: \"Weird\": supported values: "
                   "\"Localhost\", \"RuntimeDefault\", \"Unconfined\", "
                   "spec.containers[0].securityContext.windowsOptions.runAsUserName: Invalid "
                   "value: \"dom\\\\\": runAsUserName's User cannot be empty, "
                   "spec.containers[0].securityContext.appArmorProfile.localhostProfile: "
                   "Invalid value: \"p\": can only be set when AppArmor type is Localhost, "
                   "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: "
                   "\"Always\", \"OnFailure\", \"Never\", spec.securityContext.fsGroup: "
                   "Invalid value: -5: must be between 0 and 2147483647, inclusive, "
                   "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and "
                   "2147483647, inclusive, spec.securityContext.runAsGroup: Invalid value: "
                   "2147483648: must be between 0 and 2147483647, inclusive, "
                   "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be "
                   "between 0 and 2147483647, inclusive, spec.securityContext.shareProcessName"
                   "space: Invalid value: true: ShareProcessNamespace and HostPID cannot both "
                   "be enabled, spec.securityContext.sysctls[0].name: Invalid value: "
                   "\"net.core.somaxconn\": may not be specified when 'hostNetwork' is true, "
                   "spec.securityContext.sysctls[1].name: Invalid value: "
                   "\"kernel/shm_rmid_forced\": may not be specified when 'hostIPC' is true, "
                   "spec.securityContext.sysctls[2].name: Invalid value: \"Bad_Name\": must "
                   "have at most 253 characters and match regex "
                   "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$, "
                   "spec.securityContext.sysctls[3].name: Duplicate value: "
                   "\"net.core.somaxconn\", spec.securityContext.sysctls[3].name: Invalid "
                   "value: \"net.core.somaxconn\": may not be specified when 'hostNetwork' is "
                   "true, spec.securityContext.sysctls[4].name: Required value, "
                   "spec.securityContext.fsGroupChangePolicy: Unsupported value: \"Never\": "
                   "supported values: \"Always\", \"OnRootMismatch\", "
                   "spec.securityContext.seccompProfile.localhostProfile: Required value: "
                   "must be set when seccomp type is Localhost, "
                   "spec.securityContext.windowsOptions.gmsaCredentialSpecName: Invalid "
                   "value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower "
                   "case alphanumeric characters, '-' or '.', and must start and end with an "
                   "alphanumeric character (e.g. 'example.com', regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
                   "spec.securityContext.windowsOptions.runAsUserName: Invalid value: "
                   "\"a\\\\b\\\\c\": runAsUserName cannot contain more than one backslash, "
                   "spec.securityContext.appArmorProfile.localhostProfile: Invalid value: \" "
                   "p\": must not be padded with whitespace]");
    /* a message that prints a pointer (%#v) shows an address */
    json_t *st =
        request_json("POST", pods,
                     "{\"metadata\":{\"name\":\"sc2\"},\"spec\":{\"securityContext\":{\"seccompP"
                     "rofile\":{\"type\":\"RuntimeDefault\",\"localhostProfile\":\"x\"}},"
                     "\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                     "\"securityContext\":{\"privileged\":true,"
                     "\"allowPrivilegeEscalation\":false,\"capabilities\":{\"add\":[\"NET_ADMIN"
                     "\",\"CAP_SYS_ADMIN\"]},\"readOnlyRootFilesystem\":true}}]}}",
                     422);
    char *got = mask_pointers(json_string_value(json_object_get(st, "message")));
    ck_assert_str_eq(got,
                     "Pod \"sc2\" is invalid: [spec.containers[0].securityContext: Invalid "
                     "value: core.SecurityContext{Capabilities:(*core.Capabilities)(0x?), "
                     "Privileged:(*bool)(0x?), SELinuxOptions:(*core.SELinuxOptions)(nil), "
                     "WindowsOptions:(*core.WindowsSecurityContextOptions)(nil), "
                     "RunAsUser:(*int64)(nil), RunAsGroup:(*int64)(nil), "
                     "RunAsNonRoot:(*bool)(nil), ReadOnlyRootFilesystem:(*bool)(0x?), "
                     "AllowPrivilegeEscalation:(*bool)(0x?), ProcMount:(*core.ProcMountType)(nil"
                     "), SeccompProfile:(*core.SeccompProfile)(nil), "
                     "AppArmorProfile:(*core.AppArmorProfile)(nil)}: cannot set "
                     "`allowPrivilegeEscalation` to false and `privileged` to true, "
                     "spec.containers[0].securityContext: Invalid value: "
                     "core.SecurityContext{Capabilities:(*core.Capabilities)(0x?), "
                     "Privileged:(*bool)(0x?), SELinuxOptions:(*core.SELinuxOptions)(nil), "
                     "WindowsOptions:(*core.WindowsSecurityContextOptions)(nil), "
                     "RunAsUser:(*int64)(nil), RunAsGroup:(*int64)(nil), "
                     "RunAsNonRoot:(*bool)(nil), ReadOnlyRootFilesystem:(*bool)(0x?), "
                     "AllowPrivilegeEscalation:(*bool)(0x?), ProcMount:(*core.ProcMountType)(nil"
                     "), SeccompProfile:(*core.SeccompProfile)(nil), "
                     "AppArmorProfile:(*core.AppArmorProfile)(nil)}: cannot set "
                     "`allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN, "
                     "spec.securityContext.seccompProfile.localhostProfile: Invalid value: "
                     "core.SeccompProfile{Type:\"RuntimeDefault\", "
                     "LocalhostProfile:(*string)(0x?)}: can only be set when seccomp type is "
                     "Localhost]");
    free(got);
    json_decref(st);
    /* a windows Pod with hostProcess containers */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"sc3\"},\"spec\":{\"os\":{\"name\":\"windows\"},"
                   "\"hostPID\":true,\"shareProcessNamespace\":false,"
                   "\"securityContext\":{\"runAsUser\":1,\"seccompProfile\":{\"type\":\"Runtim"
                   "eDefault\"},\"windowsOptions\":{\"hostProcess\":true,"
                   "\"runAsUserName\":\"NT AUTHORITY\\\\Local service\"}},"
                   "\"initContainers\":[{\"name\":\"i\",\"image\":\"x\","
                   "\"securityContext\":{\"windowsOptions\":{\"hostProcess\":false}}}],"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                   "\"securityContext\":{\"privileged\":false,\"procMount\":\"Unmasked\"}}]}}",
                   "Pod \"sc3\" is invalid: [spec.initContainers[0].securityContext.windowsOpt"
                   "ions.hostProcess: Invalid value: false: pod hostProcess value must be "
                   "identical if both are specified, was true, spec: Invalid value: \"\": If "
                   "pod contains any hostProcess containers then all containers must be "
                   "HostProcess containers, spec.hostNetwork: Invalid value: false: "
                   "hostNetwork must be true if pod contains any hostProcess containers, "
                   "spec.hostPID: Forbidden: cannot be set for a windows pod, "
                   "spec.securityContext.seccompProfile: Forbidden: cannot be set for a "
                   "windows pod, spec.shareProcessNamespace: Forbidden: cannot be set for a "
                   "windows pod, spec.securityContext.runAsUser: Forbidden: cannot be set for "
                   "a windows pod, spec.containers[0].securityContext.privileged: Forbidden: "
                   "cannot be set for a windows pod, spec.containers[0].securityContext.procMo"
                   "unt: Forbidden: cannot be set for a windows pod]");
    /* a Deployment's template, linux */
    expect_invalid(deps,
                   "{\"metadata\":{\"name\":\"scd\"},\"spec\":{\"selector\":{\"matchLabels\":{"
                   "\"app\":\"scd\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"scd\"}"
                   "},\"spec\":{\"os\":{\"name\":\"linux\"},\"dnsPolicy\":\"Bad\","
                   "\"securityContext\":{\"seccompProfile\":{\"type\":\"\"},"
                   "\"windowsOptions\":{\"runAsUserName\":\"us\\u000ber\"}},"
                   "\"initContainers\":[{\"name\":\"i\",\"image\":\"x\","
                   "\"securityContext\":{\"windowsOptions\":{\"gmsaCredentialSpec\":\"\"}}}],"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                   "\"securityContext\":{\"runAsGroup\":-3,\"procMount\":\"Unmasked\","
                   "\"seccompProfile\":{\"type\":\"Localhost\","
                   "\"localhostProfile\":\"/abs/../x\"},\"appArmorProfile\":{\"type\":\"Bogus"
                   "\"}}}]}}}}",
                   "Deployment.apps \"scd\" is invalid: [spec.template.spec.containers[0].secu"
                   "rityContext.runAsGroup: Invalid value: -3: must be between 0 and "
                   "2147483647, inclusive, spec.template.spec.containers[0].securityContext.se"
                   "ccompProfile.localhostProfile: Invalid value: \"/abs/../x\": must be a "
                   "relative path, spec.template.spec.containers[0].securityContext.seccompPro"
                   "file.localhostProfile: Invalid value: \"/abs/../x\": must not contain "
                   "'..', spec.template.spec.containers[0].securityContext.appArmorProfile.typ"
                   "e: Unsupported value: \"Bogus\": supported values: \"Localhost\", "
                   "\"RuntimeDefault\", \"Unconfined\", spec.template.spec.initContainers[0].s"
                   "ecurityContext.windowsOptions.gmsaCredentialSpec: Invalid value: \"\": "
                   "gmsaCredentialSpec cannot be an empty string, "
                   "spec.template.spec.dnsPolicy: Unsupported value: \"Bad\": supported "
                   "values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", "
                   "\"None\", spec.template.spec.securityContext.seccompProfile.type: "
                   "Required value: type is required when seccompProfile is set, "
                   "spec.template.spec.securityContext.windowsOptions.runAsUserName: Invalid "
                   "value: \"us\\ver\": runAsUserName cannot contain control characters, "
                   "spec.template.spec.securityContext.windowsOptions: Forbidden: windows "
                   "options cannot be set for a linux pod, spec.template.spec.initContainers[0"
                   "].securityContext.windowsOptions: Forbidden: windows options cannot be "
                   "set for a linux pod]");
    /* a valid rich securityContext is stored as sent, less what the gates drop */
    json_t *sent =
        json_loads("{\"metadata\":{\"name\":\"scok\"},\"spec\":{\"hostUsers\":false,"
                   "\"shareProcessNamespace\":true,\"securityContext\":{\"runAsNonRoot\":true,"
                   "\"runAsUser\":1000,\"runAsGroup\":3000,\"fsGroup\":2000,"
                   "\"supplementalGroups\":[4000],\"supplementalGroupsPolicy\":\"Strict\","
                   "\"seLinuxChangePolicy\":\"MountOption\","
                   "\"fsGroupChangePolicy\":\"OnRootMismatch\","
                   "\"seLinuxOptions\":{\"level\":\"s0:c123,c456\"},"
                   "\"seccompProfile\":{\"type\":\"Localhost\","
                   "\"localhostProfile\":\"profiles/audit.json\"},"
                   "\"appArmorProfile\":{\"type\":\"RuntimeDefault\"},"
                   "\"sysctls\":[{\"name\":\"net.ipv4.ip_local_port_range\",\"value\":\"1024 "
                   "65535\"},{\"name\":\"kernel/shm_rmid_forced\",\"value\":\"1\"}]},"
                   "\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox:1.36\","
                   "\"securityContext\":{\"privileged\":true,"
                   "\"capabilities\":{\"add\":[\"CAP_SYS_ADMIN\"]}}}],"
                   "\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1.27\","
                   "\"securityContext\":{\"privileged\":false,"
                   "\"allowPrivilegeEscalation\":false,\"readOnlyRootFilesystem\":true,"
                   "\"runAsNonRoot\":true,\"runAsUser\":1000,"
                   "\"capabilities\":{\"drop\":[\"ALL\"],\"add\":[\"NET_BIND_SERVICE\"]},"
                   "\"procMount\":\"Unmasked\",\"seccompProfile\":{\"type\":\"RuntimeDefault\""
                   "},\"appArmorProfile\":{\"type\":\"Localhost\","
                   "\"localhostProfile\":\"k8s-apparmor-example\"},"
                   "\"windowsOptions\":{\"gmsaCredentialSpecName\":\"webapp-1\","
                   "\"runAsUserName\":\"CORP\\\\svc.web\"}}}]}}",
                   0, NULL);
    ck_assert_ptr_nonnull(sent);
    char *body = json_dumps(sent, JSON_COMPACT);
    json_t *pod = request_json("POST", pods, body, 201);
    free(body);
    const json_t *spec = json_object_get(pod, "spec");
    json_t *want_spec = json_object_get(sent, "spec");
    ck_assert_ptr_null(json_object_get(spec, "hostUsers"));
    ck_assert(json_is_true(json_object_get(spec, "shareProcessNamespace")));
    json_t *want_sc = json_object_get(want_spec, "securityContext");
    json_object_del(want_sc, "supplementalGroupsPolicy");
    json_object_del(want_sc, "seLinuxChangePolicy");
    ck_assert(json_equal(json_object_get(spec, "securityContext"), want_sc));
    json_t *want_csc = json_object_get(json_array_get(json_object_get(want_spec, "containers"), 0),
                                       "securityContext");
    json_object_set_new(want_csc, "procMount", json_string("Default"));
    ck_assert(json_equal(pod_member(pod, "containers", 0, "securityContext"), want_csc));
    ck_assert(json_equal(pod_member(pod, "initContainers", 0, "securityContext"),
                         pod_member(sent, "initContainers", 0, "securityContext")));
    json_decref(pod);
    json_decref(sent);
    /* the securityContext of manifests/base/deployment.yaml */
    json_decref(
        request_json("POST", deps,
                     "{\"metadata\":{\"name\":\"kop\"},\"spec\":{\"selector\":{\"matchLabels\":{"
                     "\"app\":\"kop\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"kop\"}"
                     "},\"spec\":{\"securityContext\":{\"runAsNonRoot\":true,"
                     "\"runAsUser\":65532,\"runAsGroup\":65532,\"fsGroup\":65532,"
                     "\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
                     "\"containers\":[{\"name\":\"manager\",\"image\":\"kop:latest\","
                     "\"securityContext\":{\"runAsNonRoot\":true,\"runAsUser\":65532,"
                     "\"runAsGroup\":65532,\"readOnlyRootFilesystem\":true,"
                     "\"allowPrivilegeEscalation\":false,\"privileged\":false,"
                     "\"capabilities\":{\"drop\":[\"ALL\"]},\"seccompProfile\":{\"type\":\"Runti"
                     "meDefault\"}}}]}}}}",
                     201));
}
END_TEST

/*
 * ValidatePodSpec (pkg/apis/core/validation, 1.32): the volumes and their
 * sources, the containers' env, envFrom, volumeMounts, resources, probes
 * and lifecycle, the init containers, and the pod-level names, gates,
 * dnsConfig and tolerations, each with upstream's path, text and order.
 * Before, kubesim checked only the containers' names, images and ports and
 * stored every object below.
 */
START_TEST(test_kubesim_pod_spec_validation)
{
    const char *pods = "/api/v1/namespaces/default/pods";
    const char *deps = "/apis/apps/v1/namespaces/default/deployments";
    /* a volume without a source is an emptyDir (SetDefaults_Volume) */
    json_t *st = request_json(
        "POST", pods,
        "{\"metadata\":{\"name\":\"p1\"},\"spec\":{\"volumes\":[{\"name\":\"data\","
        "\"emptyDir\":{}},{\"name\":\"data\",\"emptyDir\":{}},{\"name\":\"cfg\"}],"
        "\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"env\":[{\"name\":\"\"},"
        "{\"name\":\"X\",\"value\":\"a\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"m"
        "etadata.name\"}}}],\"volumeMounts\":[{\"name\":\"nope\",\"mountPath\":\"/a\"},"
        "{\"name\":\"data\",\"mountPath\":\"/a\"},{\"name\":\"data\","
        "\"mountPath\":\"\"}],\"resources\":{\"limits\":{\"cpu\":\"1\","
        "\"memory\":\"1Gi\"},\"requests\":{\"cpu\":\"2\",\"memory\":\"-1\"}},"
        "\"livenessProbe\":{\"periodSeconds\":0}}]}}",
        422);
    ck_assert_str_eq(
        json_string_value(json_object_get(st, "message")),
        "Pod \"p1\" is invalid: [spec.volumes[1].name: Duplicate value: \"data\", "
        "spec.containers[0].env[0].name: Required value, "
        "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be "
        "specified when `value` is not empty, spec.containers[0].volumeMounts[0].name: "
        "Not found: \"nope\", spec.containers[0].volumeMounts[1].mountPath: Invalid "
        "value: \"/a\": must be unique, spec.containers[0].volumeMounts[2].mountPath: "
        "Required value, spec.containers[0].resources.requests: Invalid value: \"2\": "
        "must be less than or equal to cpu limit of 1, "
        "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be "
        "greater than or equal to 0, spec.containers[0].livenessProbe: Required value: "
        "must specify a handler type]");
    static const char *const reasons[] = {
        "FieldValueDuplicate", "FieldValueRequired", "FieldValueInvalid",
        "FieldValueNotFound",  "FieldValueInvalid",  "FieldValueRequired",
        "FieldValueInvalid",   "FieldValueInvalid",  "FieldValueRequired"};
    const json_t *causes = json_object_get(json_object_get(st, "details"), "causes");
    ck_assert_uint_eq(json_array_size(causes), 9);
    for (size_t i = 0; i < 9; i++)
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(causes, i), "reason")),
                         reasons[i]);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(causes, 6), "field")),
                     "spec.containers[0].resources.requests");
    json_decref(st);
    /* vol */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"v\"},\"spec\":{\"volumes\":[{\"name\":\"Bad_Name\","
                   "\"secret\":{\"defaultMode\":512},\"configMap\":{\"name\":\"c\"}},"
                   "{\"name\":\"h\",\"hostPath\":{\"path\":\"\"}},{\"name\":\"cm\","
                   "\"configMap\":{\"items\":[{\"key\":\"\",\"path\":\"/abs\"},{\"key\":\"k\","
                   "\"path\":\"../x\",\"mode\":1000},{\"key\":\"k2\",\"path\":\"..x\"}]}},"
                   "{\"name\":\"e\",\"emptyDir\":{\"sizeLimit\":\"-1\"}},{\"name\":\"pr\","
                   "\"projected\":{\"sources\":[{\"secret\":{\"name\":\"s\","
                   "\"items\":[{\"key\":\"a\",\"path\":\"p\"}]},\"configMap\":{\"name\":\"c\"}},"
                   "{\"configMap\":{\"name\":\"c2\",\"items\":[{\"key\":\"b\",\"path\":\"p\"}]}},"
                   "{\"serviceAccountToken\":{\"path\":\"t\",\"expirationSeconds\":60}}]}},"
                   "{\"name\":\"d\",\"downwardAPI\":{\"items\":[{\"path\":\"x\"},{\"path\":\"y\","
                   "\"fieldRef\":{\"fieldPath\":\"spec.nodeName\"}}]}},{\"name\":\"pvc\","
                   "\"persistentVolumeClaim\":{}},{\"name\":\"two\",\"emptyDir\":{},"
                   "\"downwardAPI\":{}}],\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
                   "Pod \"v\" is invalid: [spec.volumes[0].secret.secretName: Required value, "
                   "spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number "
                   "between 0 and 0777 (octal), both inclusive, spec.volumes[0].configMap: "
                   "Forbidden: may not specify more than 1 volume type, spec.volumes[0].name: "
                   "Invalid value: \"Bad_Name\": a lowercase RFC 1123 label must consist of lower "
                   "case alphanumeric characters or '-', and must start and end with an "
                   "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), "
                   "spec.volumes[1].hostPath.path: Required value, "
                   "spec.volumes[2].configMap.name: Required value, "
                   "spec.volumes[2].configMap.items[0].key: Required value, "
                   "spec.volumes[2].configMap.items[0].path: Invalid value: \"/abs\": must be a "
                   "relative path, spec.volumes[2].configMap.items[1].path: Invalid value: "
                   "\"../x\": must not contain '..', spec.volumes[2].configMap.items[1].mode: "
                   "Invalid value: 1000: must be a number between 0 and 0777 (octal), both "
                   "inclusive, spec.volumes[2].configMap.items[2].path: Invalid value: \"..x\": "
                   "must not start with '..', spec.volumes[3].emptyDir.sizeLimit: Forbidden: "
                   "SizeLimit field must be a valid resource quantity, "
                   "spec.volumes[4].projected.sources[0]: Forbidden: may not specify more than 1 "
                   "volume type per source, spec.volumes[4].projected: Invalid value: \"c2\": "
                   "conflicting duplicate paths, spec.volumes[4].projected.sources[2].serviceAccou"
                   "ntToken.expirationSeconds: Invalid value: 60: may not specify a duration less "
                   "than 10 minutes, spec.volumes[5].downwardAPI: Required value: one of fieldRef "
                   "and resourceFieldRef is required, spec.volumes[5].downwardAPI.fieldRef.fieldPa"
                   "th: Unsupported value: \"spec.nodeName\": supported values: "
                   "\"metadata.annotations\", \"metadata.labels\", \"metadata.name\", "
                   "\"metadata.namespace\", \"metadata.uid\", "
                   "spec.volumes[6].persistentVolumeClaim.claimName: Required value, "
                   "spec.volumes[7].downwarAPI: Forbidden: may not specify more than 1 volume "
                   "type]");
    /* env */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"e\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"x\",\"env\":[{\"name\":\"a=b\"},{\"name\":\"E1\","
                   "\"valueFrom\":{}},{\"name\":\"E2\",\"valueFrom\":{\"configMapKeyRef\":{\"name"
                   "\":\"cm\",\"key\":\"a/b\"},\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}},"
                   "{\"name\":\"E3\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"status.phase\"}}"
                   "},{\"name\":\"E4\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"metadata.label"
                   "s['a b']\"}}},{\"name\":\"E5\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"sp"
                   "ec.foo\"}}},{\"name\":\"E6\",\"valueFrom\":{\"resourceFieldRef\":{\"resource\""
                   ":\"limits.foo\"}}},{\"name\":\"E7\",\"valueFrom\":{\"resourceFieldRef\":{\"res"
                   "ource\":\"limits.cpu\",\"divisor\":\"1k\"}}}],\"envFrom\":[{\"prefix\":\"A=\","
                   "\"configMapRef\":{\"name\":\"x\"},\"secretRef\":{\"name\":\"y\"}},{}]}]}}",
                   "Pod \"e\" is invalid: [spec.containers[0].env[0].name: Invalid value: "
                   "\"a=b\": a valid environment variable name must consist only of printable "
                   "ASCII characters other than '=', spec.containers[0].env[1].valueFrom: Invalid "
                   "value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, "
                   "`configMapKeyRef` or `secretKeyRef`, spec.containers[0].env[2].valueFrom.confi"
                   "gMapKeyRef.key: Invalid value: \"a/b\": a valid config key must consist of "
                   "alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  "
                   "or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+'), "
                   "spec.containers[0].env[2].valueFrom: Invalid value: \"\": may not have more "
                   "than one field specified at a time, spec.containers[0].env[3].valueFrom.fieldR"
                   "ef.fieldPath: Unsupported value: \"status.phase\": supported values: "
                   "\"metadata.name\", \"metadata.namespace\", \"metadata.uid\", "
                   "\"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", "
                   "\"status.hostIPs\", \"status.podIP\", \"status.podIPs\", "
                   "spec.containers[0].env[4].valueFrom.fieldRef: Invalid value: \"a b\": name "
                   "part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                   "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                   "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0"
                   "-9]'), spec.containers[0].env[5].valueFrom.fieldRef.fieldPath: Invalid value: "
                   "\"spec.foo\": error converting fieldPath: field label not supported: spec.foo,"
                   " spec.containers[0].env[6].valueFrom.resourceFieldRef.resource: Unsupported "
                   "value: \"limits.foo\": supported values: \"limits.cpu\", "
                   "\"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", "
                   "\"requests.ephemeral-storage\", \"requests.memory\", "
                   "spec.containers[0].env[7].valueFrom.resourceFieldRef.divisor: Invalid value: "
                   "\"limits.cpu\": only divisor's values 1m and 1 are supported with the cpu "
                   "resource, spec.containers[0].envFrom[0].prefix: Invalid value: \"A=\": a "
                   "valid environment variable name must consist only of printable ASCII "
                   "characters other than '=', spec.containers[0].envFrom: Invalid value: \"\": "
                   "may not have more than one field specified at a time, "
                   "spec.containers[0].envFrom: Invalid value: \"\": must specify one of: "
                   "`configMapRef` or `secretRef`]");
    /* mounts */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"m\"},\"spec\":{\"volumes\":[{\"name\":\"v\","
                   "\"emptyDir\":{}}],\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                   "\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/a\",\"subPath\":\"/abs\"},"
                   "{\"name\":\"v\",\"mountPath\":\"/b\",\"subPath\":\"s\","
                   "\"subPathExpr\":\"../e\"},{\"name\":\"v\",\"mountPath\":\"/c\","
                   "\"mountPropagation\":\"Bidirectional\"},{\"name\":\"v\",\"mountPath\":\"/d\","
                   "\"recursiveReadOnly\":\"Enabled\",\"mountPropagation\":\"HostToContainer\"},"
                   "{\"name\":\"\",\"mountPath\":\"/e\"}],\"resources\":{\"limits\":{\"example.com"
                   "/gpu\":\"1\",\"hugepages-2Mi\":\"2Mi\"},\"requests\":{\"example.com/gpu\":\"2"
                   "\",\"foo\":\"1\",\"example.com/other\":\"1\",\"cpu\":\"-0.5\"}}}]}}",
                   "Pod \"m\" is invalid: [spec.containers[0].volumeMounts.subPath: Invalid "
                   "value: \"/abs\": must be a relative path, "
                   "spec.containers[0].volumeMounts[1].subPathExpr: Invalid value: \"../e\": "
                   "subPathExpr and subPath are mutually exclusive, "
                   "spec.containers[0].volumeMounts.subPathExpr: Invalid value: \"../e\": must "
                   "not contain '..', spec.containers[0].volumeMounts.mountPropagation: "
                   "Forbidden: Bidirectional mount propagation is available only to privileged "
                   "containers, spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may "
                   "only be specified when readOnly is true, spec.containers[0].volumeMounts.recur"
                   "siveReadOnly: Forbidden: may only be specified when mountPropagation is None "
                   "or not specified, spec.containers[0].volumeMounts[4].name: Required value, "
                   "spec.containers[0].volumeMounts[4].name: Not found: \"\", "
                   "spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to "
                   "example.com/gpu limit of 1, spec.containers[0].resources.requests[foo]: "
                   "Invalid value: foo: must be a standard resource type or fully qualified, "
                   "spec.containers[0].resources.requests[foo]: Invalid value: foo: must be a "
                   "standard resource for containers, spec.containers[0].resources.limits: "
                   "Required value: Limit must be set for non overcommitable resources, "
                   "spec.containers[0].resources.requests[cpu]: Invalid value: \"-500m\": must be "
                   "greater than or equal to 0]");
    /* probes */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"pr\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                   "\"image\":\"x\",\"readinessProbe\":{\"exec\":{\"command\":[]},"
                   "\"httpGet\":{\"port\":0},\"terminationGracePeriodSeconds\":5,"
                   "\"initialDelaySeconds\":-1},\"livenessProbe\":{\"tcpSocket\":{\"port\":\"Web\""
                   "},\"successThreshold\":2,\"terminationGracePeriodSeconds\":0},"
                   "\"startupProbe\":{\"grpc\":{\"port\":70000}},"
                   "\"lifecycle\":{\"preStop\":{\"sleep\":{\"seconds\":100}},"
                   "\"postStart\":{\"httpGet\":{\"port\":\"http\",\"httpHeaders\":[{\"name\":\"a "
                   "b\",\"value\":\"v\"}]}}},\"restartPolicy\":\"Always\","
                   "\"ports\":[{\"containerPort\":80,\"hostPort\":8080}]},{\"name\":\"c2\","
                   "\"image\":\"x\",\"ports\":[{\"containerPort\":81,\"hostPort\":8080}]}],"
                   "\"initContainers\":[{\"name\":\"i\",\"image\":\"x\","
                   "\"restartPolicy\":\"OnFailure\",\"livenessProbe\":{\"exec\":{\"command\":[\"a"
                   "\"]}},\"lifecycle\":{\"preStop\":{\"exec\":{\"command\":[\"a\"]}}}},"
                   "{\"name\":\"j\",\"image\":\"x\",\"restartPolicy\":\"Always\","
                   "\"readinessProbe\":{}},{\"name\":\"c\",\"image\":\"x\"}]}}",
                   "Pod \"pr\" is invalid: [spec.containers[0].lifecycle.postStart.httpGet.httpHea"
                   "ders: Invalid value: \"a b\": a valid HTTP header must consist of "
                   "alphanumeric characters or '-' (e.g. 'X-Header-Name', regex used for "
                   "validation is '[-A-Za-z0-9]+'), spec.containers[0].lifecycle.preStop.sleep: "
                   "Invalid value: 100: must be greater than 0 and less than "
                   "terminationGracePeriodSeconds (30), spec.containers[0].livenessProbe.tcpSocket"
                   ".port: Invalid value: \"Web\": must contain only alpha-numeric characters "
                   "(a-z, 0-9), and hyphens (-), spec.containers[0].livenessProbe.terminationGrace"
                   "PeriodSeconds: Invalid value: 0: must be greater than 0, "
                   "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be "
                   "1, spec.containers[0].readinessProbe.exec.command: Required value, "
                   "spec.containers[0].readinessProbe.httpGet: Forbidden: may not specify more "
                   "than 1 handler type, spec.containers[0].readinessProbe.initialDelaySeconds: "
                   "Invalid value: -1: must be greater than or equal to 0, "
                   "spec.containers[0].readinessProbe.terminationGracePeriodSeconds: Invalid "
                   "value: 5: must not be set for readinessProbes, "
                   "spec.containers[0].startupProbe.grpc.port: Invalid value: 70000: must be "
                   "between 1 and 65535, inclusive, spec.containers[0].restartPolicy: Forbidden: "
                   "may not be set for non-init containers, spec.containers[1].ports[0].hostPort: "
                   "Duplicate value: \"TCP//8080\", spec.initContainers[0].restartPolicy: "
                   "Unsupported value: \"OnFailure\": supported values: \"Always\", "
                   "spec.initContainers[0].lifecycle: Forbidden: may not be set for init "
                   "containers without restartPolicy=Always, spec.initContainers[0].livenessProbe:"
                   " Forbidden: may not be set for init containers without restartPolicy=Always, "
                   "spec.initContainers[1].readinessProbe: Required value: must specify a handler "
                   "type, spec.initContainers[2].name: Duplicate value: \"c\"]");
    /* podlevel */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"pl\"},\"spec\":{\"hostNetwork\":true,"
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\","
                   "\"ports\":[{\"containerPort\":80,\"hostPort\":81}]}],\"nodeSelector\":{\"a "
                   "b\":\"c\"},\"dnsConfig\":{\"nameservers\":[\"1.2.3.4\",\"x\",\"::1\","
                   "\"5.6.7.8\"],\"searches\":[\"Bad.\",\"ok.com.\"],"
                   "\"options\":[{\"value\":\"1\"}]},\"readinessGates\":[{\"conditionType\":\"a "
                   "b\"}],\"schedulingGates\":[{\"name\":\"g\"},{\"name\":\"g\"}],"
                   "\"hostname\":\"Host\",\"subdomain\":\"a.b\",\"priorityClassName\":\"Bad_\","
                   "\"activeDeadlineSeconds\":0,\"tolerations\":[{\"operator\":\"Equal\","
                   "\"value\":\"x\"},{\"key\":\"k\",\"operator\":\"Exists\",\"value\":\"v\"},"
                   "{\"key\":\"k\",\"effect\":\"NoSchedule\",\"tolerationSeconds\":5},"
                   "{\"key\":\"k2\",\"value\":\"a b\"}],\"hostAliases\":[{\"ip\":\"x\","
                   "\"hostnames\":[\"A\"]}]}}",
                   "Pod \"pl\" is invalid: [spec.containers[0].ports[0].hostPort: Invalid value: "
                   "81: must match `containerPort` when `hostNetwork` is true, spec.nodeSelector: "
                   "Invalid value: \"a b\": name part must consist of alphanumeric characters, "
                   "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                   "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                   "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), spec.dnsConfig.nameservers: "
                   "Invalid value: []string{\"1.2.3.4\", \"x\", \"::1\", \"5.6.7.8\"}: must not "
                   "have more than 3 nameservers, spec.dnsConfig.nameservers[1]: Invalid value: "
                   "\"x\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff), "
                   "spec.dnsConfig.searches[0]: Invalid value: \"Bad\": a lowercase RFC 1123 "
                   "subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'example.com', regex "
                   "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a"
                   "-z0-9])?)*'), spec.dnsConfig.options[0]: Required value: must not be empty, "
                   "spec.readinessGates[0].conditionType: Invalid value: \"a b\": name part must "
                   "consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                   "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', "
                   "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
                   "spec.schedulingGates[1]: Duplicate value: \"g\", spec.activeDeadlineSeconds: "
                   "Invalid value: 0: must be between 1 and 2147483647, inclusive, spec.hostname: "
                   "Invalid value: \"Host\": a lowercase RFC 1123 label must consist of lower "
                   "case alphanumeric characters or '-', and must start and end with an "
                   "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), spec.subdomain: Invalid "
                   "value: \"a.b\": must not contain dots, spec.tolerations[0].operator: Invalid "
                   "value: \"Equal\": operator must be Exists when `key` is empty, which means "
                   "\"match all values and all keys\", spec.tolerations[1].operator: Invalid "
                   "value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", "
                   "Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when "
                   "`operator` is 'Exists', spec.tolerations[2].effect: Invalid value: "
                   "\"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set, "
                   "spec.tolerations[3].operator: Invalid value: \"a b\": a valid label must be "
                   "an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                   "'my_value',  or '12345', regex used for validation is "
                   "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), spec.hostAliases[0].ip: "
                   "Invalid value: \"x\": must be a valid IP address, (e.g. 10.9.8.7 or "
                   "2001:db8::ffff), spec.hostAliases[0].hostnames[0]: Invalid value: \"A\": a "
                   "lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                   "characters, '-' or '.', and must start and end with an alphanumeric character "
                   "(e.g. 'example.com', regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
                   "spec.priorityClassName: Invalid value: \"Bad_\": a lowercase RFC 1123 "
                   "subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                   "must start and end with an alphanumeric character (e.g. 'example.com', regex "
                   "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a"
                   "-z0-9])?)*')]");
    /* dnsnone */
    expect_invalid(pods,
                   "{\"metadata\":{\"name\":\"dn\"},\"spec\":{\"dnsPolicy\":\"None\","
                   "\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
                   "Pod \"dn\" is invalid: spec.dnsConfig: Required value: must provide "
                   "`dnsConfig` when `dnsPolicy` is None");
    /* deployment */
    expect_invalid(deps,
                   "{\"metadata\":{\"name\":\"pd\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app"
                   "\":\"pd\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"pd\"}},"
                   "\"spec\":{\"hostNetwork\":true,\"serviceAccountName\":\"Bad_SA\","
                   "\"activeDeadlineSeconds\":0,\"containers\":[{\"name\":\"c\",\"image\":\" x\","
                   "\"ports\":[{\"containerPort\":80},{\"containerPort\":81,\"hostPort\":82}],"
                   "\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\"}],"
                   "\"resources\":{\"limits\":{\"memory\":\"1Gi\"},"
                   "\"requests\":{\"memory\":\"2Gi\"}}}]}}}}",
                   "Deployment.apps \"pd\" is invalid: [spec.template.spec.containers[0].volumeMou"
                   "nts[0].name: Not found: \"v\", spec.template.spec.containers[0].resources.requ"
                   "ests: Invalid value: \"2Gi\": must be less than or equal to memory limit of "
                   "1Gi, spec.template.spec.containers[0].ports[1].hostPort: Invalid value: 82: "
                   "must match `containerPort` when `hostNetwork` is true, "
                   "spec.template.spec.serviceAccountName: Invalid value: \"Bad_SA\": a lowercase "
                   "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                   "'.', and must start and end with an alphanumeric character (e.g. "
                   "'example.com', regex used for validation is "
                   "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*'), "
                   "spec.template.spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 "
                   "and 2147483647, inclusive, spec.template.spec.activeDeadlineSeconds: "
                   "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported]");
    /* a valid Pod and Deployment are stored as sent, with the v1 defaults */
    json_t *sent =
        json_loads("{\"metadata\":{\"name\":\"rich\"},\"spec\":{\"volumes\":[{\"name\":\"data\","
                   "\"emptyDir\":{\"sizeLimit\":\"1Gi\"}},{\"name\":\"cfg\","
                   "\"configMap\":{\"name\":\"cm\",\"items\":[{\"key\":\"a\",\"path\":\"a.conf\","
                   "\"mode\":256}]}},{\"name\":\"sec\",\"secret\":{\"secretName\":\"s\","
                   "\"defaultMode\":384}},{\"name\":\"host\",\"hostPath\":{\"path\":\"/var/log\","
                   "\"type\":\"Directory\"}},{\"name\":\"claim\","
                   "\"persistentVolumeClaim\":{\"claimName\":\"pvc\"}},{\"name\":\"info\","
                   "\"downwardAPI\":{\"items\":[{\"path\":\"labels\","
                   "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"metadata.labels\"}},"
                   "{\"path\":\"cpu\",\"resourceFieldRef\":{\"containerName\":\"app\","
                   "\"resource\":\"limits.cpu\",\"divisor\":\"1m\"}}]}},{\"name\":\"proj\","
                   "\"projected\":{\"sources\":[{\"secret\":{\"name\":\"s\","
                   "\"items\":[{\"key\":\"k\",\"path\":\"s/k\"}]}},"
                   "{\"configMap\":{\"name\":\"cm\",\"items\":[{\"key\":\"k\","
                   "\"path\":\"c/k\"}]}},{\"serviceAccountToken\":{\"audience\":\"api\","
                   "\"expirationSeconds\":3600,\"path\":\"token\"}}]}}],"
                   "\"initContainers\":[{\"name\":\"setup\",\"image\":\"busybox:1.36\","
                   "\"command\":[\"sh\",\"-c\",\"true\"]},{\"name\":\"sidecar\","
                   "\"image\":\"busybox:1.36\",\"restartPolicy\":\"Always\","
                   "\"readinessProbe\":{\"exec\":{\"command\":[\"true\"]}}}],"
                   "\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1.27\","
                   "\"ports\":[{\"name\":\"http\",\"containerPort\":8080}],"
                   "\"env\":[{\"name\":\"POD\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\","
                   "\"fieldPath\":\"metadata.name\"}}},{\"name\":\"MEM\","
                   "\"valueFrom\":{\"resourceFieldRef\":{\"resource\":\"limits.memory\","
                   "\"divisor\":\"1Mi\"}}},{\"name\":\"K\",\"valueFrom\":{\"configMapKeyRef\":{\"n"
                   "ame\":\"cm\",\"key\":\"k\",\"optional\":true}}},{\"name\":\"my.var-1\","
                   "\"value\":\"x\"},{\"name\":\"1ST\",\"value\":\"relaxed\"}],"
                   "\"envFrom\":[{\"prefix\":\"CM_\",\"configMapRef\":{\"name\":\"cm\"}},"
                   "{\"secretRef\":{\"name\":\"s\"}}],\"volumeMounts\":[{\"name\":\"data\","
                   "\"mountPath\":\"/data\",\"subPath\":\"d\"},{\"name\":\"cfg\","
                   "\"mountPath\":\"/etc/app\",\"readOnly\":true,"
                   "\"recursiveReadOnly\":\"IfPossible\"},{\"name\":\"info\","
                   "\"mountPath\":\"/info\",\"subPathExpr\":\"$(POD)\"}],"
                   "\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"256Mi\","
                   "\"example.com/dev\":\"1\"},\"requests\":{\"cpu\":\"0.1\",\"memory\":\"128Mi\","
                   "\"example.com/dev\":\"1\"}},\"livenessProbe\":{\"httpGet\":{\"path\":\"/health"
                   "z\",\"port\":\"http\",\"scheme\":\"HTTP\","
                   "\"httpHeaders\":[{\"name\":\"X-Probe\",\"value\":\"1\"}]},"
                   "\"initialDelaySeconds\":5,\"timeoutSeconds\":2,\"periodSeconds\":10,"
                   "\"successThreshold\":1,\"failureThreshold\":3,"
                   "\"terminationGracePeriodSeconds\":10},\"readinessProbe\":{\"tcpSocket\":{\"por"
                   "t\":8080}},\"startupProbe\":{\"grpc\":{\"port\":9090},"
                   "\"failureThreshold\":30},\"lifecycle\":{\"preStop\":{\"sleep\":{\"seconds\":5}"
                   "},\"postStart\":{\"exec\":{\"command\":[\"true\"]}}}}],"
                   "\"dnsConfig\":{\"nameservers\":[\"10.0.0.10\"],"
                   "\"searches\":[\"svc.cluster.local.\"],\"options\":[{\"name\":\"ndots\","
                   "\"value\":\"2\"}]},\"hostname\":\"web-0\",\"subdomain\":\"web\","
                   "\"nodeSelector\":{\"kubernetes.io/os\":\"linux\"},"
                   "\"tolerations\":[{\"key\":\"dedicated\",\"operator\":\"Equal\","
                   "\"value\":\"web\",\"effect\":\"NoSchedule\"},{\"operator\":\"Exists\","
                   "\"effect\":\"NoExecute\",\"tolerationSeconds\":60}],"
                   "\"readinessGates\":[{\"conditionType\":\"example.com/ready\"}],"
                   "\"hostAliases\":[{\"ip\":\"10.1.2.3\",\"hostnames\":[\"db.local\"]}],"
                   "\"terminationGracePeriodSeconds\":45,\"activeDeadlineSeconds\":3600}}",
                   0, NULL);
    ck_assert_ptr_nonnull(sent);
    char *body = json_dumps(sent, JSON_COMPACT);
    json_t *pod = request_json("POST", pods, body, 201);
    free(body);
    static const char *const members[] = {"env", "envFrom", "resources", "livenessProbe",
                                          "lifecycle"};
    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
        ck_assert_msg(json_equal(pod_member(pod, "containers", 0, members[i]),
                                 pod_member(sent, "containers", 0, members[i])),
                      "%s changed", members[i]);
    /* the ServiceAccount admission adds its token's mount after ours */
    const json_t *mounts = pod_member(pod, "containers", 0, "volumeMounts");
    ck_assert_uint_eq(json_array_size(mounts), 4);
    for (size_t i = 0; i < 3; i++)
        ck_assert(json_equal(json_array_get(mounts, i),
                             json_array_get(pod_member(sent, "containers", 0, "volumeMounts"), i)));
    const json_t *vols = json_object_get(json_object_get(pod, "spec"), "volumes");
    ck_assert(
        json_equal(json_array_get(vols, 2),
                   json_array_get(json_object_get(json_object_get(sent, "spec"), "volumes"), 2)));
    /* SetDefaults_ConfigMapVolumeSource: 0644 */
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_array_get(vols, 1), "configMap"), "defaultMode")),
                     420);
    const json_t *ready = pod_member(pod, "containers", 0, "readinessProbe");
    ck_assert_int_eq(json_integer_value(json_object_get(ready, "timeoutSeconds")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(ready, "periodSeconds")), 10);
    ck_assert_int_eq(json_integer_value(json_object_get(ready, "failureThreshold")), 3);
    json_decref(pod);
    json_decref(sent);
    json_t *dep = request_json(
        "POST", deps,
        "{\"metadata\":{\"name\":\"richd\"},\"spec\":{\"selector\":{\"matchLabels\":{\""
        "app\":\"richd\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"richd\"}},"
        "\"spec\":{\"hostNetwork\":true,\"serviceAccountName\":\"default\","
        "\"volumes\":[{\"name\":\"cache\"}],\"containers\":[{\"name\":\"web\","
        "\"image\":\"nginx:1.27\",\"ports\":[{\"containerPort\":80},"
        "{\"containerPort\":443,\"hostPort\":443}],"
        "\"volumeMounts\":[{\"name\":\"cache\",\"mountPath\":\"/cache\"}],"
        "\"resources\":{\"limits\":{\"memory\":\"1Gi\"},\"requests\":{\"cpu\":\"250m\","
        "\"memory\":\"512Mi\"}},\"readinessProbe\":{\"httpGet\":{\"port\":80}},"
        "\"startupProbe\":{\"exec\":{\"command\":[\"true\"]},"
        "\"failureThreshold\":30}}],\"tolerations\":[{\"key\":\"node-role.kubernetes.io"
        "/control-plane\",\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]}}}}",
        201);
    const json_t *tspec =
        json_object_get(json_object_get(json_object_get(dep, "spec"), "template"), "spec");
    const json_t *vol = json_array_get(json_object_get(tspec, "volumes"), 0);
    ck_assert_ptr_nonnull(json_object_get(vol, "emptyDir"));
    const json_t *ports =
        json_object_get(json_array_get(json_object_get(tspec, "containers"), 0), "ports");
    /* a template's hostPort stays unset (only a Pod's is defaulted) */
    ck_assert_ptr_null(json_object_get(json_array_get(ports, 0), "hostPort"));
    json_decref(dep);
}
END_TEST

/* A resource quantity ParseQuantity refuses: the decoder's 400, which
 * wins over a type error before it (an Unmarshaler's error ends the
 * decoding); before, any string was stored. */
START_TEST(test_kubesim_quantity_decoding)
{
    static const struct {
        const char *value, *error;
    } bad[] = {
        {"abc", "quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
        {"1.2.3", "quantities must match the regular expression "
                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
        {"1Qi", "quantities must match the regular expression "
                "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
        {"1K", "unable to parse quantity's suffix"},
        {".", "unable to parse numeric part of quantity"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char body[512], want[512];
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                 "\"image\":\"x\",\"ports\":[{\"containerPort\":\"80\"}],\"resources\":{"
                 "\"limits\":{\"memory\":\"%s\"}}}]}}",
                 bad[i].value);
        json_t *st = request_json("POST", "/api/v1/namespaces/default/pods", body, 400);
        snprintf(want, sizeof(want), "Pod in version \"v1\" cannot be handled as a Pod: %s",
                 bad[i].error);
        ck_assert_str_eq(json_string_value(json_object_get(st, "message")), want);
        json_decref(st);
    }
    json_t *st = request_json("POST", "/apis/apps/v1/namespaces/default/deployments",
                              "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"selector\":{"
                              "\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{"
                              "\"labels\":{\"a\":\"b\"}},\"spec\":{\"volumes\":[{\"name\":"
                              "\"v\",\"emptyDir\":{\"sizeLimit\":\"1 Gi\"}}],\"containers\":["
                              "{\"name\":\"c\",\"image\":\"x\"}]}}}}",
                              400);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")),
                     "Deployment in version \"v1\" cannot be handled as a Deployment: quantities "
                     "must match the regular expression "
                     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'");
    json_decref(st);
    /* numbers and the canonical forms the validation prints */
    json_t *pod = request_json("POST", "/api/v1/namespaces/default/pods",
                               "{\"metadata\":{\"name\":\"q\"},\"spec\":{\"containers\":[{"
                               "\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{"
                               "\"cpu\":1.5,\"memory\":\" 1Gi \"}}}]}}",
                               201);
    json_decref(pod);
    expect_invalid("/api/v1/namespaces/default/pods",
                   "{\"metadata\":{\"name\":\"q2\"},\"spec\":{\"containers\":[{"
                   "\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{"
                   "\"cpu\":\"1500m\",\"memory\":\"1Gi\"},\"requests\":{\"cpu\":\"2000m\","
                   "\"memory\":\"0.75Gi\",\"ephemeral-storage\":\"-0.5Ki\"}}}]}}",
                   "Pod \"q2\" is invalid: [spec.containers[0].resources.requests: Invalid value: "
                   "\"2\": must be less than or equal to cpu limit of 1500m, "
                   "spec.containers[0].resources.requests[ephemeral-storage]: Invalid value: "
                   "\"-512\": must be greater than or equal to 0]");
}
END_TEST

/* merge PATCH body to path: a 422 whose message is want. */
static void expect_patch_invalid(const char *path, const char *body, const char *want)
{
    struct kop_test_resp r = request("PATCH", path, "application/merge-patch+json", body, NULL);
    ck_assert_msg(r.code == 422, "PATCH %s: %ld %s", path, r.code, r.body ? r.body : "");
    json_t *st = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")), want);
    json_decref(st);
}

/*
 * What may not change once set (ValidateXUpdate, the Deployment strategy's
 * selector rule, normalizeClusterIPs): before, kubesim stored every one of
 * these updates, so a controller changing a Deployment's selector or a
 * Service's clusterIP passed here and failed on a cluster.
 */
START_TEST(test_kubesim_update_validation)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"u1\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":"
        "\"u1\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"u1\",\"b\":\"x\"}},\"spec\":"
        "{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
        201));
    const char *dep = "/apis/apps/v1/namespaces/default/deployments/u1";
    /* the same selector, with an empty list where there was none: unchanged */
    merge_patch(dep, "{\"spec\":{\"selector\":{\"matchExpressions\":[]},\"replicas\":2}}", 200);
    expect_patch_invalid(dep, "{\"spec\":{\"selector\":{\"matchLabels\":{\"b\":\"x\"}}}}",
                         "Deployment.apps \"u1\" is invalid: spec.selector: Invalid value: "
                         "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"u1\", "
                         "\"b\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement{}}: field "
                         "is immutable");
    expect_patch_invalid(
        dep,
        "{\"spec\":{\"selector\":{\"matchExpressions\":[{\"key\":\"b\",\"operator\":\"In\","
        "\"values\":[\"x\"]}]}}}",
        "Deployment.apps \"u1\" is invalid: spec.selector: Invalid value: "
        "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"u1\"}, "
        "MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:\"b\", "
        "Operator:\"In\", Values:[]string{\"x\"}}}}: field is immutable");
    /* apps/v1 ReplicaSets: the selector is immutable too */
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/replicasets",
        "{\"metadata\":{\"name\":\"u1r\"},\"spec\":{\"replicas\":0,\"selector\":{"
        "\"matchLabels\":{\"app\":\"u1r\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":"
        "\"u1r\",\"b\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"nginx\"}]}}}}",
        201));
    expect_patch_invalid("/apis/apps/v1/namespaces/default/replicasets/u1r",
                         "{\"spec\":{\"selector\":{\"matchLabels\":{\"b\":\"x\"}}}}",
                         "ReplicaSet.apps \"u1r\" is invalid: spec.selector: Invalid value: "
                         "v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"u1r\", "
                         "\"b\":\"x\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: "
                         "field is immutable");

    json_t *svc =
        request_json("POST", "/api/v1/namespaces/default/services",
                     "{\"metadata\":{\"name\":\"u2\"},\"spec\":{\"ports\":[{\"port\":80}]}}", 201);
    char *ip = strdup(jpath(svc, "spec", "clusterIP"));
    json_decref(svc);
    const char *sp = "/api/v1/namespaces/default/services/u2";
    /* clusterIP alone changed: clusterIPs follows it, and may not change */
    expect_patch_invalid(sp, "{\"spec\":{\"clusterIP\":\"10.96.200.200\"}}",
                         "Service \"u2\" is invalid: spec.clusterIPs[0]: Invalid value: "
                         "[]string{\"10.96.200.200\"}: may not change once set");
    /* the allocator's pre-validation (initIPFamilyFields runs
     * ValidateServiceClusterIPsRelatedFields before the storage validates)
     * answers alone */
    expect_patch_invalid(sp,
                         "{\"spec\":{\"clusterIPs\":[\"10.96.200.2\"],\"clusterIP\":"
                         "\"10.96.200.1\"}}",
                         "Service \"u2\" is invalid: spec.clusterIPs: Invalid value: "
                         "[]string{\"10.96.200.2\"}: first value must match `clusterIP`");
    char want6[256];
    snprintf(want6, sizeof(want6),
             "Service \"u2\" is invalid: spec.clusterIPs[0]: Invalid value: \"%s\": expected "
             "an IPv6 value as indicated by `ipFamilies[0]`",
             ip);
    expect_patch_invalid(sp, "{\"spec\":{\"ipFamilies\":[\"IPv6\"]}}", want6);
    /* left out, or sent back unchanged: kept */
    merge_patch(sp, "{\"spec\":{\"clusterIP\":null,\"clusterIPs\":null}}", 200);
    svc = request_json("GET", sp, NULL, 200);
    ck_assert_str_eq(jpath(svc, "spec", "clusterIP"), ip);
    json_decref(svc);
    free(ip);

    const char *cms = "/api/v1/namespaces/default/configmaps";
    json_decref(request_json(
        "POST", cms, "{\"metadata\":{\"name\":\"u3\"},\"immutable\":true,\"data\":{\"a\":\"b\"}}",
        201));
    merge_patch("/api/v1/namespaces/default/configmaps/u3",
                "{\"metadata\":{\"labels\":{\"l\":\"v\"}}}", 200);
    expect_patch_invalid("/api/v1/namespaces/default/configmaps/u3",
                         "{\"immutable\":false,\"data\":{\"a\":\"c\"}}",
                         "ConfigMap \"u3\" is invalid: [immutable: Forbidden: field is immutable "
                         "when `immutable` is set, data: Forbidden: field is immutable when "
                         "`immutable` is set]");
    json_decref(request_json("POST", "/api/v1/namespaces/default/secrets",
                             "{\"metadata\":{\"name\":\"u4\"},\"data\":{\"a\":\"Yg==\"}}", 201));
    expect_patch_invalid("/api/v1/namespaces/default/secrets/u4",
                         "{\"type\":\"example.com/other\"}",
                         "Secret \"u4\" is invalid: type: Invalid value: \"example.com/other\": "
                         "field is immutable");

    /* an object being deleted takes no new finalizer (ValidateNoNewFinalizers) */
    json_decref(request_json(
        "POST", cms, "{\"metadata\":{\"name\":\"u6\",\"finalizers\":[\"example.com/a\"]}}", 201));
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/configmaps/u6", NULL, 200));
    expect_patch_invalid("/api/v1/namespaces/default/configmaps/u6",
                         "{\"metadata\":{\"finalizers\":[\"example.com/z\",\"example.com/a\","
                         "\"example.com/b\"]}}",
                         "ConfigMap \"u6\" is invalid: metadata.finalizers: Forbidden: no new "
                         "finalizers can be added if the object is being deleted, found new "
                         "finalizers []string{\"example.com/b\", \"example.com/z\"}");
    merge_patch("/api/v1/namespaces/default/configmaps/u6", "{\"metadata\":{\"finalizers\":null}}",
                200);

    json_decref(request_json("POST", RBAC_V1 "/namespaces/default/roles",
                             "{\"metadata\":{\"name\":\"u5\"},\"rules\":[]}", 201));
    json_decref(request_json("POST", RBAC_V1 "/namespaces/default/rolebindings",
                             "{\"metadata\":{\"name\":\"u5\"}," ROLE_REF("Role", "u5") "}", 201));
    expect_patch_invalid(
        RBAC_V1 "/namespaces/default/rolebindings/u5", "{\"roleRef\":{\"name\":\"other\"}}",
        "RoleBinding.rbac.authorization.k8s.io \"u5\" is invalid: roleRef: Invalid "
        "value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", "
        "Name:\"other\"}: cannot change roleRef");
}
END_TEST

/*
 * A Service as the storage judges it (pkg/registry/core/service/storage
 * alloc.go, then pkg/apis/core/validation ValidateService): the allocator's
 * initIPFamilyFields on this single-stack IPv4 cluster first, each of its
 * stages a 422 of its own; then every error of ValidateService in its
 * order, its enums among them (the typed schema's enum check answered
 * before with the enums alone). Before, the families, policies and
 * clusterIPs below were stored, and a clusterIPs without clusterIP took it.
 */
START_TEST(test_kubesim_service_allocator_and_validation_order)
{
    const char *svcs = "/api/v1/namespaces/default/services";
    expect_invalid(
        svcs,
        "{\"metadata\":{\"name\":\"o1\"},\"spec\":{\"type\":\"Foo\",\"sessionAffinity\":"
        "\"Sticky\",\"internalTrafficPolicy\":\"Nowhere\",\"trafficDistribution\":\"Far\","
        "\"externalTrafficPolicy\":\"Local\",\"ports\":[{\"port\":80,\"protocol\":\"XTCP\"},"
        "{\"port\":80,\"protocol\":\"XTCP\"}]}}",
        "Service \"o1\" is invalid: [spec.ports[0].name: Required value, spec.ports[0].protocol: "
        "Unsupported value: \"XTCP\": supported values: \"SCTP\", \"TCP\", \"UDP\", "
        "spec.ports[1].name: Required value, spec.ports[1].protocol: Unsupported value: "
        "\"XTCP\": supported values: \"SCTP\", \"TCP\", \"UDP\", spec.sessionAffinity: "
        "Unsupported value: \"Sticky\": supported values: \"ClientIP\", \"None\", spec.type: "
        "Unsupported value: \"Foo\": supported values: \"ClusterIP\", \"ExternalName\", "
        "\"LoadBalancer\", \"NodePort\", spec.ports[1]: Duplicate value: "
        "core.ServicePort{Name:\"\", Protocol:\"XTCP\", AppProtocol:(*string)(nil), Port:80, "
        "TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}, "
        "spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for "
        "externally-accessible services, spec.internalTrafficPolicy: Unsupported value: "
        "\"Nowhere\": supported values: \"Cluster\", \"Local\", spec.trafficDistribution: "
        "Unsupported value: \"Far\": supported values: \"PreferClose\"]");
    /* the allocator's pre-validation answers alone */
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o2\"},\"spec\":{\"clusterIP\":\"10.96.0.50\","
                   "\"clusterIPs\":[\"10.96.0.50\",\"10.96.0.51\",\"zz\"],\"ipFamilies\":["
                   "\"IPv5\",\"IPv4\",\"IPv4\"],\"ipFamilyPolicy\":\"Sometimes\",\"ports\":[{"
                   "\"port\":80}]}}",
                   "Service \"o2\" is invalid: [spec.ipFamilies[0]: Unsupported value: \"IPv5\": "
                   "supported values: \"IPv4\", \"IPv6\", spec.ipFamilies[2]: Duplicate value: "
                   "\"IPv4\", spec.ipFamilyPolicy: Unsupported value: \"Sometimes\": supported "
                   "values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\", "
                   "spec.clusterIPs[2]: Invalid value: \"zz\": must be a valid IP address, (e.g. "
                   "10.9.8.7 or 2001:db8::ffff), spec.clusterIPs: Invalid value: "
                   "[]string{\"10.96.0.50\", \"10.96.0.51\", \"zz\"}: may only hold up to 2 "
                   "values]");
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o3\"},\"spec\":{\"clusterIPs\":[\"10.96.9.9\"],"
                   "\"ports\":[{\"port\":80}]}}",
                   "Service \"o3\" is invalid: spec.clusterIPs: Invalid value: "
                   "[]string{\"10.96.9.9\"}: must be empty when `clusterIP` is not specified");
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o4\"},\"spec\":{\"clusterIP\":\"fd00::1\","
                   "\"ports\":[{\"port\":80}]}}",
                   "Service \"o4\" is invalid: spec.clusterIPs[0]: Invalid value: "
                   "[]string{\"fd00::1\"}: IPv6 is not configured on this cluster");
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o5\"},\"spec\":{\"ipFamilies\":[\"IPv4\",\"IPv6\"],"
                   "\"ipFamilyPolicy\":\"SingleStack\",\"ports\":[{\"port\":80}]}}",
                   "Service \"o5\" is invalid: spec.ipFamilyPolicy: Invalid value: "
                   "\"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when "
                   "multiple IP families are specified");
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o6\"},\"spec\":{\"ipFamilyPolicy\":"
                   "\"RequireDualStack\",\"selector\":{\"a\":\"b\"},\"ports\":[{\"port\":80}]}}",
                   "Service \"o6\" is invalid: spec.ipFamilyPolicy: Invalid value: "
                   "\"RequireDualStack\": this cluster is not configured for dual-stack services");
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"o7\"},\"spec\":{\"ipFamilies\":[\"IPv6\"],"
                   "\"ports\":[{\"port\":80}]}}",
                   "Service \"o7\" is invalid: spec.ipFamilies[0]: Invalid value: \"IPv6\": not "
                   "configured on this cluster");
    /* a headless Service without a selector is the one dual-stack exception;
     * PreferDualStack stays single on this cluster */
    json_t *h = request_json("POST", svcs,
                             "{\"metadata\":{\"name\":\"o8\"},\"spec\":{\"clusterIP\":\"None\","
                             "\"ports\":[{\"port\":80}]}}",
                             201);
    ck_assert_str_eq(jpath(h, "spec", "ipFamilyPolicy"), "RequireDualStack");
    char *fams = json_dumps(json_object_get(json_object_get(h, "spec"), "ipFamilies"), 0);
    ck_assert_str_eq(fams, "[\"IPv4\", \"IPv6\"]");
    free(fams);
    json_decref(h);
    h = request_json("POST", svcs,
                     "{\"metadata\":{\"name\":\"o9\"},\"spec\":{\"ipFamilyPolicy\":"
                     "\"PreferDualStack\",\"selector\":{\"a\":\"b\"},\"ports\":[{\"port\":80}]}}",
                     201);
    ck_assert_str_eq(jpath(h, "spec", "ipFamilyPolicy"), "PreferDualStack");
    ck_assert_int_eq(json_array_size(json_object_get(json_object_get(h, "spec"), "clusterIPs")), 1);
    json_decref(h);
}
END_TEST

/*
 * The Service allocators: a clusterIP asked for is in the service range
 * and free, a nodePort free; what a deleted Service held is free again;
 * what kubesim picks skips what is held. Before, two Services could hold
 * one clusterIP or nodePort.
 */
START_TEST(test_kubesim_service_allocation)
{
    const char *svcs = "/api/v1/namespaces/default/services";
    json_t *a = request_json(
        "POST", svcs, "{\"metadata\":{\"name\":\"al-a\"},\"spec\":{\"ports\":[{\"port\":80}]}}",
        201);
    char body[256], want[512];
    const char *ip = jpath(a, "spec", "clusterIP");
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"al-b\"},\"spec\":{\"clusterIP\":\"%s\",\"ports\":[{"
             "\"port\":80}]}}",
             ip);
    snprintf(want, sizeof(want),
             "Service \"al-b\" is invalid: spec.clusterIPs: Invalid value: []string{\"%s\"}: "
             "failed to allocate IP %s: provided IP is already allocated",
             ip, ip);
    expect_invalid(svcs, body, want);
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"al-b\"},\"spec\":{\"clusterIP\":\"10.10.0.3\","
                   "\"ports\":[{\"port\":80}]}}",
                   "Service \"al-b\" is invalid: spec.clusterIPs: Invalid value: "
                   "[]string{\"10.10.0.3\"}: failed to allocate IP 10.10.0.3: the provided IP "
                   "(10.10.0.3) is not in the valid range. The range of valid IPs is "
                   "10.96.0.0/12");
    /* an IP asked for, then one picked by kubesim: not the same */
    json_t *b = request_json("POST", svcs,
                             "{\"metadata\":{\"name\":\"al-b\"},\"spec\":{\"clusterIP\":"
                             "\"10.96.100.7\",\"ports\":[{\"port\":80}]}}",
                             201);
    json_decref(b);
    json_decref(request_json("POST", svcs,
                             "{\"metadata\":{\"name\":\"al-n1\"},\"spec\":{\"type\":\"NodePort\","
                             "\"ports\":[{\"port\":80,\"nodePort\":30999}]}}",
                             201));
    expect_invalid(svcs,
                   "{\"metadata\":{\"name\":\"al-n2\"},\"spec\":{\"type\":\"NodePort\",\"ports\":"
                   "[{\"port\":80,\"nodePort\":30999}]}}",
                   "Service \"al-n2\" is invalid: spec.ports[0].nodePort: Invalid value: 30999: "
                   "provided port is already allocated");
    /* freed by the delete */
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/services/al-n1", NULL, 200));
    json_decref(request_json("POST", svcs,
                             "{\"metadata\":{\"name\":\"al-n2\"},\"spec\":{\"type\":\"NodePort\","
                             "\"ports\":[{\"port\":80,\"nodePort\":30999}]}}",
                             201));
    json_decref(request_json("DELETE", "/api/v1/namespaces/default/services/al-a", NULL, 200));
    snprintf(body, sizeof(body),
             "{\"metadata\":{\"name\":\"al-c\"},\"spec\":{\"clusterIP\":\"%s\",\"ports\":[{"
             "\"port\":80}]}}",
             ip);
    json_decref(request_json("POST", svcs, body, 201));
    json_decref(a);
}
END_TEST

START_TEST(test_kubesim_rbac_escalation)
{
    char *tokens = kop_test_path(tmpdir, "esc-tokens.csv");
    char *ca2 = kop_test_path(tmpdir, "ca-esc.pem");
    write_text(tokens, "tok-esc,alice,uid-alice\n");
    char *args[] = {"--token-auth-file", tokens, NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    json_decref(request_json("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"t\"}}", 201));
    /* alice may write roles and bindings in t, and read configmaps */
    json_decref(request_json(
        "POST", RBAC_V1 "/namespaces/t/roles",
        "{\"metadata\":{\"name\":\"rbac-writer\"},\"rules\":[{\"apiGroups\":[\"rbac."
        "authorization."
        "k8s.io\"],\"resources\":[\"roles\",\"rolebindings\"],\"verbs\":[\"create\",\"get\","
        "\"update\",\"patch\",\"delete\"]},{\"apiGroups\":[\"\"],\"resources\":[\"configmaps\"]"
        ","
        "\"verbs\":[\"get\",\"list\"]}]}",
        201));
    json_decref(request_json(
        "POST", RBAC_V1 "/namespaces/t/rolebindings",
        "{\"metadata\":{\"name\":\"w\"}," ROLE_REF(
            "Role", "rbac-writer") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}",
        201));

    /* a role within what she holds */
    char *msg;
    ck_assert_int_eq(as_alice("POST", RBAC_V1 "/namespaces/t/roles",
                              "{\"metadata\":{\"name\":\"cm-reader\"},\"rules\":[{\"apiGroups\":"
                              "[\"\"],\"resources\":[\"configmaps\"],\"resourceNames\":[\"c1\"],"
                              "\"verbs\":[\"get\"]}]}",
                              &msg),
                     201);
    /* beyond it: the apiserver's message, missing rules compacted and sorted */
    ck_assert_int_eq(as_alice("POST", RBAC_V1 "/namespaces/t/roles",
                              "{\"metadata\":{\"name\":\"sneaky\"},\"rules\":[{\"apiGroups\":"
                              "[\"\"],\"resources\":[\"secrets\",\"configmaps\"],\"verbs\":"
                              "[\"get\",\"list\",\"watch\"]},{\"nonResourceURLs\":[\"/metrics\"],"
                              "\"verbs\":[\"get\"]}]}",
                              &msg),
                     403);
    ck_assert_str_eq(msg, "roles.rbac.authorization.k8s.io \"sneaky\" is forbidden: user \"alice\" "
                          "(groups=[\"system:authenticated\"]) is attempting to grant RBAC "
                          "permissions not currently held:\n"
                          "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"watch\"]}\n"
                          "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" "
                          "\"watch\"]}\n"
                          "{NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}");
    free(msg);
    /* in another namespace she holds nothing of it */
    json_decref(request_json("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"u\"}}", 201));
    ck_assert_int_eq(as_alice("POST", RBAC_V1 "/namespaces/u/roles",
                              "{\"metadata\":{\"name\":\"x\"},\"rules\":[]}", &msg),
                     403); /* not even create there */
    free(msg);

    /* a metadata-only change of an over-powered role is refused too */
    json_decref(request_json("POST", RBAC_V1 "/namespaces/t/roles",
                             "{\"metadata\":{\"name\":\"big\"},\"rules\":[{\"apiGroups\":[\"*\"],"
                             "\"resources\":[\"*\"],\"verbs\":[\"*\"]}]}",
                             201));
    struct kop_test_resp r =
        request("PATCH", RBAC_V1 "/namespaces/t/roles/big", "application/merge-patch+json",
                "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", "tok-esc");
    ck_assert_int_eq(r.code, 403);
    ck_assert_ptr_nonnull(strstr(r.body, "is attempting to grant RBAC permissions"));
    kop_test_resp_free(&r);

    /* bindings: a role whose permissions she holds, yes; admin's, no; a
     * role that does not exist: its 404 */
    ck_assert_int_eq(
        as_alice("POST", RBAC_V1 "/namespaces/t/rolebindings",
                 "{\"metadata\":{\"name\":\"b1\"}," ROLE_REF(
                     "Role", "cm-reader") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"bob\"}]}",
                 &msg),
        201);
    ck_assert_int_eq(
        as_alice(
            "POST", RBAC_V1 "/namespaces/t/rolebindings",
            "{\"metadata\":{\"name\":\"b2\"}," ROLE_REF(
                "ClusterRole", "admin") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}",
            &msg),
        403);
    ck_assert_ptr_nonnull(strstr(msg,
                                 "rolebindings.rbac.authorization.k8s.io \"b2\" is forbidden: "
                                 "user \"alice\" (groups=[\"system:authenticated\"]) is "
                                 "attempting to grant RBAC permissions not currently held:\n"));
    free(msg);
    ck_assert_int_eq(
        as_alice("POST", RBAC_V1 "/namespaces/t/rolebindings",
                 "{\"metadata\":{\"name\":\"b3\"}," ROLE_REF(
                     "Role", "nope") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"bob\"}]}",
                 &msg),
        404);
    ck_assert_str_eq(msg, "roles.rbac.authorization.k8s.io \"nope\" not found");
    free(msg);

    /* escalate and bind lift the checks */
    json_decref(request_json(
        "POST", RBAC_V1 "/namespaces/t/roles",
        "{\"metadata\":{\"name\":\"lift\"},\"rules\":[{\"apiGroups\":[\"rbac.authorization.k8s."
        "io\"],"
        "\"resources\":[\"roles\"],\"verbs\":[\"escalate\"]},{\"apiGroups\":[\"rbac."
        "authorization."
        "k8s.io\"],\"resources\":[\"clusterroles\"],\"resourceNames\":[\"admin\"],\"verbs\":"
        "[\"bind\"]}]}",
        201));
    json_decref(
        request_json("POST", RBAC_V1 "/namespaces/t/rolebindings",
                     "{\"metadata\":{\"name\":\"l\"}," ROLE_REF(
                         "Role", "lift") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}",
                     201));
    r = request("PATCH", RBAC_V1 "/namespaces/t/roles/big", "application/merge-patch+json",
                "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", "tok-esc");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    ck_assert_int_eq(
        as_alice(
            "POST", RBAC_V1 "/namespaces/t/rolebindings",
            "{\"metadata\":{\"name\":\"b2\"}," ROLE_REF(
                "ClusterRole", "admin") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}",
            &msg),
        201);

    /* the cluster admin (cluster-admin through kubeadm:cluster-admins) may
     * do all of it; an aggregationRule needs all of it */
    json_decref(request_json("POST", RBAC_V1 "/clusterroles",
                             "{\"metadata\":{\"name\":\"agg\"},\"aggregationRule\":{"
                             "\"clusterRoleSelectors\":[{\"matchLabels\":{\"x\":\"y\"}}]}}",
                             201));
    json_decref(
        request_json("POST", RBAC_V1 "/clusterroles",
                     "{\"metadata\":{\"name\":\"cr-writer\"},\"rules\":[{\"apiGroups\":[\"rbac."
                     "authorization."
                     "k8s.io\"],\"resources\":[\"clusterroles\"],\"verbs\":[\"create\"]}]}",
                     201));
    json_decref(request_json(
        "POST", RBAC_V1 "/clusterrolebindings",
        "{\"metadata\":{\"name\":\"crw\"}," ROLE_REF(
            "ClusterRole", "cr-writer") ",\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}",
        201));
    ck_assert_int_eq(as_alice("POST", RBAC_V1 "/clusterroles",
                              "{\"metadata\":{\"name\":\"agg2\"},\"aggregationRule\":{"
                              "\"clusterRoleSelectors\":[{\"matchLabels\":{\"x\":\"y\"}}]}}",
                              &msg),
                     403);
    ck_assert_str_eq(msg, "clusterroles.rbac.authorization.k8s.io \"agg2\" is forbidden: must have "
                          "cluster-admin privileges to use the aggregationRule");
    free(msg);

    second_sim_stop(&sim2);
    free(ca2);
    free(tokens);
}
END_TEST

/* --authorization-mode AlwaysAllow: everyone may do anything, and the
 * reviews say so. */
START_TEST(test_kubesim_always_allow)
{
    char *tokens = kop_test_path(tmpdir, "aa-tokens.csv");
    char *ca2 = kop_test_path(tmpdir, "ca-aa.pem");
    write_text(tokens, "tok-alice,alice,uid-alice\n");
    char *args[] = {"--token-auth-file", tokens, "--authorization-mode", "AlwaysAllow", NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    struct kop_test_resp r =
        request("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, "tok-alice");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    json_t *v = review(SSAR_PATH,
                       "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
                       "\"SelfSubjectAccessReview\",\"spec\":{\"resourceAttributes\":{"
                       "\"verb\":\"delete\",\"resource\":\"nodes\"}}}",
                       "tok-alice", NULL, 201);
    ck_assert(json_is_true(json_object_get(json_object_get(v, "status"), "allowed")));
    ck_assert_ptr_null(json_object_get(json_object_get(v, "status"), "reason"));
    json_decref(v);
    v = review(SSAR_PATH,
               "{\"apiVersion\":\"authorization.k8s.io/v1\",\"kind\":"
               "\"SelfSubjectAccessReview\",\"spec\":{\"resourceAttributes\":{"
               "\"verb\":\"get\",\"resource\":\"pods\"}}}",
               "tok-alice", "Impersonate-User: anyone", 201);
    ck_assert(json_is_true(json_object_get(json_object_get(v, "status"), "allowed")));
    json_decref(v);
    second_sim_stop(&sim2);
    free(ca2);
    free(tokens);
}
END_TEST

static const char *rs_nz(const char *s)
{
    return s ? s : "";
}

/* The ReplicaSets of a Deployment (label selector, to poll): their
 * "name=replicas" list, sorted by name, once every one has the status of its
 * spec. */
static char *replicasets_of(const char *selector, size_t want)
{
    char path[256];
    snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/default/replicasets?labelSelector=%s",
             selector);
    for (int i = 0; i < 100; i++) {
        json_t *l = request_json("GET", path, NULL, 200);
        const json_t *items = json_object_get(l, "items");
        bool settled = json_array_size(items) == want;
        char out[1024] = "";
        size_t k, used = 0;
        json_t *rs;
        json_array_foreach(items, k, rs)
        {
            json_int_t spec = json_integer_value(jpath_obj(rs, "spec", "replicas"));
            json_int_t got = json_integer_value(jpath_obj(rs, "status", "replicas"));
            settled = settled && spec == got;
            int w = snprintf(out + used, sizeof(out) - used, "%s%s=%lld", k ? "," : "",
                             jpath(rs, "metadata", "name"), (long long)spec);
            ck_assert(w > 0 && (size_t)w < sizeof(out) - used);
            used += (size_t)w;
        }
        json_decref(l);
        if (settled)
            return strdup(out);
        kop_test_sleep_ms(30);
    }
    ck_abort_msg("%s: the ReplicaSets did not settle", selector);
    return NULL;
}

/* The Deployment controller's ReplicaSets: one per template, owned, the
 * revision moving on, the old one scaled to 0 and taken up again on a
 * rollback; the garbage collector removes them with the Deployment. */
START_TEST(test_kubesim_deployment_replicasets)
{
    static const char dep[] = "{\"metadata\":{\"name\":\"rsd\"},\"spec\":{\"replicas\":3,"
                              "\"selector\":{\"matchLabels\":"
                              "{\"app\":\"rsd\"}},\"template\":{\"metadata\":{\"labels\":{"
                              "\"app\":\"rsd\"}},\"spec\":{"
                              "\"containers\":[{\"name\":\"c\",\"image\":\"%s\"}]}}}}";
    char body[512];
    snprintf(body, sizeof(body), dep, "nginx:1.1");
    json_t *d = request_json("POST", "/apis/apps/v1/namespaces/default/deployments", body, 201);
    char *uid = strdup(jpath(d, "metadata", "uid"));
    json_decref(d);
    char *one = replicasets_of("app%3Drsd", 1);
    ck_assert_int_eq(strncmp(one, "rsd-", 4), 0);
    char *name1 = strndup(one, strcspn(one, "="));
    ck_assert_str_eq(strchr(one, '='), "=3");
    char path[256];
    snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/default/replicasets/%s", name1);
    json_t *rs = request_json("GET", path, NULL, 200);
    const json_t *ref = json_array_get(jpath_obj(rs, "metadata", "ownerReferences"), 0);
    ck_assert_str_eq(jpath(ref, "kind", NULL), "Deployment");
    ck_assert_str_eq(jpath(ref, "uid", NULL), uid);
    ck_assert(json_is_true(json_object_get(ref, "controller")));
    const char *hash = jpath(jpath_obj(rs, "metadata", "labels"), "pod-template-hash", NULL);
    ck_assert_ptr_nonnull(hash);
    ck_assert_str_eq(name1 + strlen("rsd-"), hash);
    ck_assert_str_eq(jpath(jpath_obj(jpath_obj(rs, "spec", "selector"), "matchLabels", NULL),
                           "pod-template-hash", NULL),
                     hash);
    ck_assert_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(jpath_obj(rs, "spec", "template"), "metadata"),
                            "labels"),
            "pod-template-hash")),
        hash);
    ck_assert_str_eq(
        jpath(jpath_obj(rs, "metadata", "annotations"), "deployment.kubernetes.io/revision", NULL),
        "1");
    json_decref(rs);

    /* a new template: a second ReplicaSet, revision 2, the first at 0 */
    snprintf(body, sizeof(body),
             "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"nginx:1.2\"}]}}}}");
    struct kop_test_resp r = request("PATCH", "/apis/apps/v1/namespaces/default/deployments/rsd",
                                     "application/strategic-merge-patch+json", body, NULL);
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    char *two = replicasets_of("app%3Drsd", 2);
    char want[256];
    ck_assert_ptr_nonnull(strstr(two, name1));
    snprintf(want, sizeof(want), "%s=0", name1);
    ck_assert_msg(strstr(two, want) != NULL, "%s", two);
    for (int i = 0; i < 100; i++) {
        d = request_json("GET", "/apis/apps/v1/namespaces/default/deployments/rsd", NULL, 200);
        bool done = strcmp(rs_nz(jpath(jpath_obj(d, "metadata", "annotations"),
                                       "deployment.kubernetes.io/revision", NULL)),
                           "2") == 0;
        json_decref(d);
        if (done)
            break;
        kop_test_sleep_ms(30);
    }

    /* back to the first template: its ReplicaSet again, revision 3 */
    snprintf(body, sizeof(body),
             "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
             "\"nginx:1.1\"}]}}}}");
    r = request("PATCH", "/apis/apps/v1/namespaces/default/deployments/rsd",
                "application/strategic-merge-patch+json", body, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    for (int i = 0; i < 100; i++) {
        rs = request_json("GET", path, NULL, 200);
        bool done = strcmp(rs_nz(jpath(jpath_obj(rs, "metadata", "annotations"),
                                       "deployment.kubernetes.io/revision", NULL)),
                           "3") == 0 &&
                    json_integer_value(jpath_obj(rs, "spec", "replicas")) == 3;
        json_decref(rs);
        if (done)
            break;
        ck_assert_msg(i < 99, "the first ReplicaSet was not taken up again");
        kop_test_sleep_ms(30);
    }
    free(replicasets_of("app%3Drsd", 2));

    /* kubectl get rs: the printer's columns */
    json_t *t = get_table("/apis/apps/v1/namespaces/default/replicasets");
    ck_assert_str_eq(col_name(t, 1), "Desired");
    ck_assert_str_eq(col_name(t, 3), "Ready");
    json_decref(t);

    /* the Deployment deleted: its ReplicaSets follow */
    r = request("DELETE", "/apis/apps/v1/namespaces/default/deployments/rsd", NULL, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    for (int i = 0; i < 100; i++) {
        json_t *l = request_json(
            "GET", "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%3Drsd", NULL,
            200);
        size_t n = json_array_size(json_object_get(l, "items"));
        json_decref(l);
        if (n == 0)
            break;
        ck_assert_msg(i < 99, "the ReplicaSets outlived their Deployment");
        kop_test_sleep_ms(30);
    }
    free(two);
    free(name1);
    free(one);
    free(uid);
}
END_TEST

START_TEST(test_kubesim_token_file_and_audit)
{
    char *tokens = kop_test_path(tmpdir, "tokens.csv");
    char *log = kop_test_path(tmpdir, "audit.log");
    char *ca2 = kop_test_path(tmpdir, "ca-audit.pem");
    /* The apiserver's --token-auth-file format, read as encoding/csv
     * reads it: quoted fields, "" inside them, blank lines, \r\n. */
    write_text(tokens, "tok-a,replica-a,uid-a,\"g1,g2\"\r\n\n"
                       "\"tok-b\",\"replica \"\"b\"\"\",uid-b\n"
                       ",skipped,uid-x\n");
    char *args[] = {"--token-auth-file", tokens, "--audit-log-path", log, "--audit-level",
                    "Request",           NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    /* kubesim authorizes by RBAC: both users may write ConfigMaps */
    json_decref(request_json("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                             "{\"metadata\":{\"name\":\"cm\"},\"rules\":[{\"apiGroups\":[\"\"],"
                             "\"resources\":[\"configmaps\"],\"verbs\":[\"*\"]}]}",
                             201));
    json_decref(request_json(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "{\"metadata\":{\"name\":\"cm\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s."
        "io\","
        "\"kind\":\"ClusterRole\",\"name\":\"cm\"},\"subjects\":[{\"kind\":\"Group\","
        "\"name\":\"system:authenticated\"}]}",
        201));

    /* Each token is its user; an unknown or empty one is 401. */
    char create_id[64], patch_id[64], get_id[64], denied_id[64], stats_id[64];
    audited("POST", "/api/v1/namespaces/default/configmaps", NULL,
            "{\"metadata\":{\"name\":\"by-a\"},\"data\":{\"k\":\"v\"}}", "tok-a", 201, create_id,
            sizeof(create_id));
    audited("PATCH", "/api/v1/namespaces/default/configmaps/by-a?fieldManager=b",
            "application/merge-patch+json", "{\"data\":{\"k\":\"w\"}}", "tok-b", 200, patch_id,
            sizeof(patch_id));
    audited("GET", "/api/v1/namespaces/default/configmaps/nope", NULL, NULL, NULL, 404, get_id,
            sizeof(get_id));
    audited("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, "tok-x", 401, denied_id,
            sizeof(denied_id));
    audited("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, "", 401, NULL, 0);
    audited("GET", "/_kubesim/stats", NULL, NULL, "tok-a", 200, stats_id, sizeof(stats_id));

    /* create: objectRef completed from the body, the body logged */
    json_t *ev = audit_event(log, create_id);
    ck_assert_ptr_nonnull(ev);
    ck_assert_str_eq(jpath(ev, "kind", NULL), "Event");
    ck_assert_str_eq(jpath(ev, "apiVersion", NULL), "audit.k8s.io/v1");
    ck_assert_str_eq(jpath(ev, "level", NULL), "Request");
    ck_assert_str_eq(jpath(ev, "stage", NULL), "ResponseComplete");
    ck_assert_str_eq(jpath(ev, "verb", NULL), "create");
    ck_assert_str_eq(jpath(ev, "requestURI", NULL), "/api/v1/namespaces/default/configmaps");
    ck_assert_str_eq(jpath(ev, "user", "username"), "replica-a");
    ck_assert_str_eq(jpath(ev, "user", "uid"), "uid-a");
    const json_t *groups = json_object_get(json_object_get(ev, "user"), "groups");
    ck_assert_int_eq(json_array_size(groups), 3);
    ck_assert_str_eq(json_string_value(json_array_get(groups, 1)), "g2");
    ck_assert_str_eq(json_string_value(json_array_get(groups, 2)), "system:authenticated");
    ck_assert_str_eq(jpath(ev, "objectRef", "resource"), "configmaps");
    ck_assert_str_eq(jpath(ev, "objectRef", "namespace"), "default");
    ck_assert_str_eq(jpath(ev, "objectRef", "name"), "by-a");
    ck_assert_str_eq(jpath(ev, "objectRef", "apiVersion"), "v1");
    ck_assert_ptr_null(json_object_get(json_object_get(ev, "objectRef"), "apiGroup"));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(ev, "responseStatus"), "code")), 201);
    ck_assert_str_eq(jpath(json_object_get(ev, "requestObject"), "data", "k"), "v");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(ev, "sourceIPs"), 0)),
                     "127.0.0.1");
    ck_assert_ptr_nonnull(jpath(ev, "requestReceivedTimestamp", NULL));
    ck_assert_ptr_nonnull(jpath(ev, "stageTimestamp", NULL));
    json_decref(ev);
    /* patch by the second user, with its query */
    ev = audit_event(log, patch_id);
    ck_assert_ptr_nonnull(ev);
    ck_assert_str_eq(jpath(ev, "verb", NULL), "patch");
    ck_assert_str_eq(jpath(ev, "user", "username"), "replica \"b\"");
    ck_assert_str_eq(jpath(ev, "requestURI", NULL),
                     "/api/v1/namespaces/default/configmaps/by-a?fieldManager=b");
    ck_assert_str_eq(jpath(json_object_get(ev, "requestObject"), "data", "k"), "w");
    json_decref(ev);
    /* the admin, and a failure's Status */
    ev = audit_event(log, get_id);
    ck_assert_ptr_nonnull(ev);
    ck_assert_str_eq(jpath(ev, "user", "username"), "kubernetes-admin");
    ck_assert_str_eq(jpath(ev, "responseStatus", "reason"), "NotFound");
    ck_assert_str_eq(jpath(ev, "responseStatus", "status"), "Failure");
    ck_assert_ptr_null(json_object_get(ev, "requestObject"));
    json_decref(ev);
    /* not logged: unauthenticated requests, kubesim's own endpoints */
    ck_assert_ptr_null(audit_event(log, denied_id));
    ck_assert_ptr_null(audit_event(log, stats_id));

    second_sim_stop(&sim2);

    /* Bad token files and audit levels are usage errors. */
    write_text(tokens, "tok,only-two\n");
    char *bad1[] = {(char *)kop_test_bin("kubesim"), "--token-auth-file", tokens, NULL};
    expect_usage_error(bad1, "must have at least 3 columns (token, user name, user uid), found 2");
    write_text(tokens, "tok,us\"er,uid\n");
    expect_usage_error(bad1, "bare \" in non-quoted-field");
    write_text(tokens, "\"tok,user,uid\n");
    expect_usage_error(bad1, "extraneous or missing \" in quoted-field");
    char *bad2[] = {(char *)kop_test_bin("kubesim"),
                    "--audit-log-path",
                    log,
                    "--audit-level",
                    "RequestResponse",
                    NULL};
    expect_usage_error(bad2, "--audit-level must be Metadata or Request");
    char *missing = kop_test_path(tmpdir, "no-such-file.csv");
    char *bad3[] = {(char *)kop_test_bin("kubesim"), "--token-auth-file", missing, NULL};
    expect_usage_error(bad3, "no-such-file.csv");
    free(missing);
    free(tokens);
    free(log);
    free(ca2);
}
END_TEST

/* ---- metadata-only lists, gets and watches ---------------------------------------- */

#define PARTIAL_LIST_ACCEPT                                                                        \
    "Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;"      \
    "v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#define PARTIAL_ACCEPT                                                                             \
    "Accept: application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"     \
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

static json_t *get_with(const char *path, const char *accept, long want)
{
    struct kop_test_resp r = request_ex("GET", path, NULL, NULL, NULL, accept);
    ck_assert_msg(r.code == want, "GET %s: %ld %s", path, r.code, r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(v);
    kop_test_resp_free(&r);
    return v;
}

static void check_partial(const json_t *item)
{
    ck_assert_str_eq(jpath(item, "kind", NULL), "PartialObjectMetadata");
    ck_assert_str_eq(jpath(item, "apiVersion", NULL), "meta.k8s.io/v1");
    ck_assert_int_eq(json_object_size(item), 3);
    ck_assert_ptr_nonnull(jpath(item, "metadata", "uid"));
    ck_assert_ptr_nonnull(jpath(item, "metadata", "resourceVersion"));
    ck_assert_ptr_nonnull(jpath(item, "metadata", "creationTimestamp"));
}

START_TEST(test_kubesim_metadata_only)
{
    for (int i = 0; i < 5; i++) {
        char body[256];
        snprintf(body, sizeof(body),
                 "{\"metadata\":{\"name\":\"pm-%d\",\"labels\":{\"z\":\"1\",\"tier\":\"%s\"},"
                 "\"annotations\":{\"b\":\"2\",\"a\":\"1\"}},\"data\":{\"secret\":\"x\"}}",
                 i, i % 2 ? "odd" : "even");
        json_decref(request_json("POST", "/api/v1/namespaces/default/configmaps", body, 201));
    }

    /* LIST: a PartialObjectMetadataList of full metadata, no data. */
    /* (kube-root-ca.crt, which every namespace has, left out) */
    struct kop_test_resp r =
        request_ex("GET", "/api/v1/namespaces/default/configmaps?labelSelector=z", NULL, NULL, NULL,
                   PARTIAL_LIST_ACCEPT);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_null(strstr(r.body, "\"secret\":")); /* managedFields has "f:secret" */
    static const char head[] = "{\"kind\":\"PartialObjectMetadataList\",\"apiVersion\":"
                               "\"meta.k8s.io/v1\",\"metadata\":{\"resourceVersion\":\"";
    ck_assert_msg(strncmp(r.body, head, strlen(head)) == 0, "%s", r.body);
    /* ObjectMeta order, sorted maps. */
    ck_assert_ptr_nonnull(strstr(r.body, "\"items\":[{\"kind\":\"PartialObjectMetadata\","
                                         "\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":"
                                         "\"pm-0\",\"namespace\":\"default\",\"uid\":\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"labels\":{\"tier\":\"even\",\"z\":\"1\"},"
                                         "\"annotations\":{\"a\":\"1\",\"b\":\"2\"}"));
    json_t *l = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    const json_t *items = json_object_get(l, "items");
    ck_assert_int_eq(json_array_size(items), 5);
    for (size_t i = 0; i < 5; i++)
        check_partial(json_array_get(items, i));
    ck_assert_ptr_null(json_object_get(json_object_get(l, "metadata"), "continue"));
    json_decref(l);

    /* Paging: limit/continue walk every item once, remainingItemCount set. */
    /* five and kube-root-ca.crt, which every namespace has */
    char path[1024] = "/api/v1/namespaces/default/configmaps?limit=2";
    int seen = 0, pages = 0;
    for (;;) {
        l = get_with(path, PARTIAL_LIST_ACCEPT, 200);
        ck_assert_str_eq(jpath(l, "kind", NULL), "PartialObjectMetadataList");
        seen += (int)json_array_size(json_object_get(l, "items"));
        pages++;
        const char *cont = jpath(l, "metadata", "continue");
        if (!cont) {
            json_decref(l);
            break;
        }
        json_int_t left = json_integer_value(
            json_object_get(json_object_get(l, "metadata"), "remainingItemCount"));
        ck_assert_int_eq(left, 6 - seen);
        continue_path(path, sizeof(path), cont);
        json_decref(l);
        ck_assert_int_lt(pages, 10);
    }
    ck_assert_int_eq(seen, 6);
    ck_assert_int_eq(pages, 3);

    /* Selectors; an empty result has items null (Go's nil slice). */
    l = get_with("/api/v1/namespaces/default/configmaps?labelSelector=tier%3Dodd",
                 PARTIAL_LIST_ACCEPT, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 2);
    json_decref(l);
    r = request_ex("GET", "/api/v1/namespaces/default/configmaps?labelSelector=tier%3Dnone", NULL,
                   NULL, NULL, PARTIAL_LIST_ACCEPT);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "},\"items\":null}\n"));
    kop_test_resp_free(&r);

    /* GET of one object. */
    l = get_with("/api/v1/namespaces/default/configmaps/pm-3", PARTIAL_ACCEPT, 200);
    check_partial(l);
    ck_assert_str_eq(jpath(l, "metadata", "name"), "pm-3");
    ck_assert_ptr_null(json_object_get(l, "data"));
    json_decref(l);

    /* The kind must fit: 406 NotAcceptable as the apiserver answers. */
    r = request_ex("GET", "/api/v1/namespaces/default/configmaps", NULL, NULL, NULL,
                   "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    ck_assert_int_eq(r.code, 406);
    ck_assert_ptr_nonnull(strstr(r.body, "you requested PartialObjectMetadata, but the requested "
                                         "object is a list"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"reason\":\"NotAcceptable\""));
    kop_test_resp_free(&r);
    r = request_ex("GET", "/api/v1/namespaces/default/configmaps/pm-1", NULL, NULL, NULL,
                   "Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
    ck_assert_int_eq(r.code, 406);
    kop_test_resp_free(&r);
    /* A version kubesim cannot serve falls back to the next entry. */
    l = get_with("/api/v1/namespaces/default/configmaps",
                 "Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v9,"
                 "application/json",
                 200);
    ck_assert_str_eq(jpath(l, "kind", NULL), "ConfigMapList");
    json_decref(l);

    /* WATCH: PartialObjectMetadata events, bookmarks too, selector applies. */
    char rv[32];
    list_rv("/api/v1/namespaces/default/configmaps", rv, sizeof(rv));
    merge_patch("/api/v1/namespaces/default/configmaps/pm-1", "{\"data\":{\"secret\":\"y\"}}", 200);
    merge_patch("/api/v1/namespaces/default/configmaps/pm-2", "{\"data\":{\"secret\":\"y\"}}", 200);
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=%s&timeoutSeconds=1"
             "&allowWatchBookmarks=true&labelSelector=tier%%3Dodd",
             rv);
    r = request_ex("GET", path, NULL, NULL, NULL, PARTIAL_ACCEPT);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_null(strstr(r.body, "\"secret\":"));
    ck_assert_ptr_null(strstr(r.body, "pm-2"));
    ck_assert_ptr_nonnull(strstr(r.body, "{\"type\":\"MODIFIED\",\"object\":{\"kind\":"
                                         "\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/"
                                         "v1\",\"metadata\":{\"name\":\"pm-1\","));
    ck_assert_ptr_nonnull(strstr(r.body, "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":"
                                         "\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/"
                                         "v1\",\"metadata\":{\"resourceVersion\":\""));
    kop_test_resp_free(&r);
    /* Initial events (no resourceVersion) are ADDED PartialObjectMetadata. */
    r = request_ex("GET",
                   "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&labelSelector="
                   "tier%3Deven",
                   NULL, NULL, NULL, PARTIAL_ACCEPT);
    int added = 0;
    for (const char *p = r.body; (p = strstr(p, "{\"type\":\"ADDED\",\"object\":{\"kind\":"
                                                "\"PartialObjectMetadata\",")) != NULL;
         p++)
        added++;
    ck_assert_int_eq(added, 3);
    ck_assert_ptr_null(strstr(r.body, "\"secret\":"));
    kop_test_resp_free(&r);
    /* A watch asked for lists: 406 before any event. */
    r = request_ex("GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1", NULL,
                   NULL, NULL,
                   "Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
    ck_assert_int_eq(r.code, 406);
    kop_test_resp_free(&r);
}
END_TEST

/* Custom resources too (unstructured, sorted keys in the full form). */
START_TEST(test_kubesim_metadata_only_custom_resource)
{
    json_decref(
        request_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                     "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                     "\"CustomResourceDefinition\",\"metadata\":{\"name\":\"gadgets.t.example."
                     "com\"},\"spec\":{\"group\":\"t.example.com\",\"names\":{\"plural\":"
                     "\"gadgets\",\"singular\":\"gadget\",\"kind\":\"Gadget\"},\"scope\":"
                     "\"Namespaced\",\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":"
                     "true,\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
                     "\"x-kubernetes-preserve-unknown-fields\":true}}}]}}",
                     201));
    struct kop_test_resp r = {0};
    for (int i = 0; i < 50; i++) { /* established asynchronously? retry briefly */
        r = request("POST", "/apis/t.example.com/v1/namespaces/default/gadgets", NULL,
                    "{\"apiVersion\":\"t.example.com/v1\",\"kind\":\"Gadget\",\"metadata\":{"
                    "\"name\":\"g1\",\"finalizers\":[\"t.example.com/keep\"]},\"spec\":{\"a\":1}}",
                    NULL);
        if (r.code != 404)
            break;
        kop_test_resp_free(&r);
        kop_test_sleep_ms(50);
    }
    ck_assert_int_eq(r.code, 201);
    kop_test_resp_free(&r);
    r = request_ex("GET", "/apis/t.example.com/v1/namespaces/default/gadgets", NULL, NULL, NULL,
                   PARTIAL_LIST_ACCEPT);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_null(strstr(r.body, "\"spec\":")); /* managedFields has "f:spec" */
    ck_assert_ptr_nonnull(strstr(r.body, "\"metadata\":{\"name\":\"g1\",\"namespace\":\"default\","
                                         "\"uid\":"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"finalizers\":[\"t.example.com/keep\"]"));
    kop_test_resp_free(&r);
    r = request_ex("GET", "/apis/t.example.com/v1/namespaces/default/gadgets", NULL, NULL, NULL,
                   "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
    ck_assert_int_eq(r.code, 406);
    ck_assert_ptr_nonnull(strstr(r.body, "(*unstructured.UnstructuredList)"));
    kop_test_resp_free(&r);
}
END_TEST

/* ---- the Node, the scheduler and the kubelet (nodes.c) --------------------------- */

static json_t *get_pod(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/namespaces/default/pods/%s", name);
    json_t *pod = get_or_null(path);
    return pod;
}

/* Pod arg is Running on kubesim-node. */
static bool pod_running(const void *arg)
{
    json_t *pod = get_pod(arg);
    bool ok = pod && jpath(pod, "status", "phase") &&
              strcmp(jpath(pod, "status", "phase"), "Running") == 0 &&
              strcmp(jpath(pod, "spec", "nodeName"), "kubesim-node") == 0;
    json_decref(pod);
    return ok;
}

/* The PodScheduled condition of Pod name (NULL: none). @ref new */
static json_t *pod_scheduled(const char *name)
{
    json_t *pod = get_pod(name);
    json_t *out = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
    {
        if (strcmp(jpath(c, "type", NULL), "PodScheduled") == 0)
            out = json_incref(c);
    }
    json_decref(pod);
    return out;
}

/* struct sched_want: Pod name's PodScheduled condition is False with reason
 * and message. */
struct sched_want {
    const char *pod, *reason, *message;
};

static bool pod_unschedulable(const void *arg)
{
    const struct sched_want *w = arg;
    json_t *c = pod_scheduled(w->pod);
    bool ok = c && strcmp(jpath(c, "status", NULL), "False") == 0 &&
              strcmp(jpath(c, "reason", NULL), w->reason) == 0 &&
              strcmp(jpath(c, "message", NULL), w->message) == 0;
    json_decref(c);
    return ok;
}

static void client_pod(const char *name, const char *spec_extra)
{
    char *body = NULL;
    int n = asprintf(&body,
                     "{\"metadata\":{\"name\":\"%s\"},\"spec\":{%s%s\"containers\":[{\"name\":"
                     "\"c\",\"image\":\"busybox:1.36\"}]}}",
                     name, spec_extra, *spec_extra ? "," : "");
    ck_assert_int_gt(n, 0);
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods", body, 201));
    free(body);
}

/* Node kubesim-node's taint keys, comma-joined ("" without). malloc'd */
static char *node_taints(void)
{
    json_t *node = request_json("GET", "/api/v1/nodes/kubesim-node", NULL, 200);
    char *out = strdup("");
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(json_object_get(node, "spec"), "taints"), i, t)
    {
        char *next = NULL;
        ck_assert_int_gt(asprintf(&next, "%s%s%s:%s", out, *out ? "," : "", jpath(t, "key", NULL),
                                  jpath(t, "effect", NULL)),
                         0);
        free(out);
        out = next;
    }
    json_decref(node);
    return out;
}

static bool node_taints_are(const void *arg)
{
    char *t = node_taints();
    bool ok = strcmp(t, arg) == 0;
    free(t);
    return ok;
}

/* The uid of Node kubesim-node differs from arg (re-registered). */
static bool node_uid_not(const void *arg)
{
    json_t *node = get_or_null("/api/v1/nodes/kubesim-node");
    bool ok = node && strcmp(jpath(node, "metadata", "uid"), arg) != 0;
    json_decref(node);
    return ok;
}

/* The Lease kube-node-lease/kubesim-node is owned by the Node of uid arg. */
static bool lease_owned_by(const void *arg)
{
    json_t *l = get_or_null("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
                            "kubesim-node");
    const json_t *ref =
        json_array_get(json_object_get(json_object_get(l, "metadata"), "ownerReferences"), 0);
    bool ok = ref && strcmp(jpath(ref, "uid", NULL), arg) == 0;
    json_decref(l);
    return ok;
}

static bool event_gone(const void *arg)
{
    json_t *e = get_or_null(arg);
    json_decref(e);
    return e == NULL;
}

/* The apiserver's --event-ttl: an Event goes that long after its last
 * write (etcd's lease on it); they stayed for ever before. */
START_TEST(test_kubesim_event_ttl)
{
    char *ca2 = kop_test_path(tmpdir, "ca-ttl.pem");
    char *args[] = {"--event-ttl", "1s", NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    json_decref(request_json(
        "POST", "/api/v1/namespaces/default/events",
        "{\"metadata\":{\"name\":\"ttl1\"},\"involvedObject\":{\"kind\":\"ConfigMap\","
        "\"namespace\":\"default\",\"name\":\"x\"},\"reason\":\"Test\",\"message\":\"m\","
        "\"type\":\"Normal\",\"source\":{\"component\":\"test\"}}",
        201));
    const char *path = "/api/v1/namespaces/default/events/ttl1";
    json_decref(request_json("GET", path, NULL, 200));
    ck_assert_msg(kop_test_eventually(event_gone, path, 4000), "the Event did not expire");
    second_sim_stop(&sim2);
    free(ca2);
    char *bad[] = {(char *)kop_test_bin("kubesim"), "--event-ttl", "0", NULL};
    expect_usage_error(bad, "bad or missing value for --event-ttl");
}
END_TEST

/* The Node Lease's renewTime differs from arg. */
static bool lease_renewed(const void *arg)
{
    json_t *l = get_or_null("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
                            "kubesim-node");
    const char *t = l ? jpath(l, "spec", "renewTime") : NULL;
    bool ok = t && strcmp(t, arg) != 0;
    json_decref(l);
    return ok;
}

/* pkg/kubelet/nodelease: the kubelet renews its Lease every quarter of
 * its duration (--node-lease-duration, 40 s by default); it stayed at its
 * creation time before. */
START_TEST(test_kubesim_node_lease_renewed)
{
    char *ca2 = kop_test_path(tmpdir, "ca-lease.pem");
    char *args[] = {"--node-lease-duration", "4s", NULL};
    struct second_sim sim2;
    second_sim_start(&sim2, ca2, args);
    json_t *l = request_json(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/kubesim-node", NULL,
        200);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(l, "spec"), "leaseDurationSeconds")), 4);
    char *renew = strdup(jpath(l, "spec", "renewTime"));
    json_decref(l);
    ck_assert_msg(kop_test_eventually(lease_renewed, renew, 3000), "Lease not renewed");
    free(renew);
    second_sim_stop(&sim2);
    free(ca2);
    char *bad[] = {(char *)kop_test_bin("kubesim"), "--node-lease-duration", "1500ms", NULL};
    expect_usage_error(bad, "bad or missing value for --node-lease-duration");
}
END_TEST

/* pkg/kubelet: the Node registers with labels, addresses, capacity, the
 * four conditions and nodeInfo, and its Lease in kube-node-lease; deleted,
 * it registers again (and the Lease, which the garbage collector took with
 * it); its Table row and field labels are the apiserver's. */
START_TEST(test_kubesim_node_registered)
{
    json_t *node = request_json("GET", "/api/v1/nodes/kubesim-node", NULL, 200);
    const json_t *md = json_object_get(node, "metadata");
    ck_assert_str_eq(jpath(md, "labels", "kubernetes.io/hostname"), "kubesim-node");
    ck_assert_str_eq(jpath(md, "labels", "kubernetes.io/os"), "linux");
    ck_assert_ptr_null(json_object_get(md, "namespace"));
    ck_assert_str_eq(jpath(node, "spec", "podCIDR"), "10.244.0.0/16");
    const json_t *st = json_object_get(node, "status");
    ck_assert_str_eq(jpath(json_array_get(json_object_get(st, "addresses"), 0), "type", NULL),
                     "InternalIP");
    ck_assert_str_eq(jpath(json_array_get(json_object_get(st, "addresses"), 0), "address", NULL),
                     "10.0.0.10");
    ck_assert_str_eq(jpath(st, "allocatable", "cpu"), "64");
    ck_assert_str_eq(jpath(st, "allocatable", "pods"), "65533");
    const json_t *conds = json_object_get(st, "conditions");
    ck_assert_int_eq(json_array_size(conds), 4);
    ck_assert_str_eq(jpath(json_array_get(conds, 3), "type", NULL), "Ready");
    ck_assert_str_eq(jpath(json_array_get(conds, 3), "status", NULL), "True");
    ck_assert_str_eq(jpath(json_array_get(conds, 3), "reason", NULL), "KubeletReady");
    ck_assert_str_eq(jpath(json_array_get(conds, 0), "reason", NULL), "KubeletHasSufficientMemory");
    json_t *version = request_json("GET", "/version", NULL, 200);
    ck_assert_str_eq(jpath(st, "nodeInfo", "kubeletVersion"), jpath(version, "gitVersion", NULL));
    json_decref(version);
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(st, "daemonEndpoints"), "kubeletEndpoint"), "Port")),
        10250);
    ck_assert_str_eq(jpath(st, "nodeInfo", "kubeProxyVersion"), "");
    char *uid = strdup(jpath(md, "uid", NULL));
    json_decref(node);
    json_t *lease = request_json("GET",
                                 "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
                                 "kubesim-node",
                                 NULL, 200);
    ck_assert_str_eq(jpath(lease, "spec", "holderIdentity"), "kubesim-node");
    const json_t *ref =
        json_array_get(json_object_get(json_object_get(lease, "metadata"), "ownerReferences"), 0);
    ck_assert_str_eq(jpath(ref, "kind", NULL), "Node");
    ck_assert_str_eq(jpath(ref, "uid", NULL), uid);
    json_decref(lease);
    /* the Table: printNode */
    json_t *t = get_table("/api/v1/nodes");
    ck_assert_str_eq(col_name(t, 1), "Status");
    ck_assert_str_eq(col_name(t, 2), "Roles");
    ck_assert_str_eq(col_name(t, 5), "Internal-IP");
    ck_assert_str_eq(col_name(t, 9), "Container-Runtime");
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "Ready");
    ck_assert_str_eq(json_string_value(cell(t, 0, 2)), "<none>");
    ck_assert_str_eq(json_string_value(cell(t, 0, 5)), "10.0.0.10");
    ck_assert_str_eq(json_string_value(cell(t, 0, 6)), "<none>");
    json_decref(t);
    /* field labels: metadata.name and spec.unschedulable */
    json_t *list =
        request_json("GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(list, "items")), 1);
    json_decref(list);
    json_t *bad = request_json("GET", "/api/v1/nodes?fieldSelector=spec.podCIDR%3Dx", NULL, 400);
    ck_assert_str_eq(jpath(bad, "message", NULL), "field label not supported: spec.podCIDR");
    json_decref(bad);
    /* deleted: registered again, with its Lease (the garbage collector
     * takes the old one with the old Node) */
    json_decref(request_json("DELETE", "/api/v1/nodes/kubesim-node", NULL, 200));
    ck_assert_msg(kop_test_eventually(node_uid_not, uid, 5000), "Node not registered again");
    free(uid);
    node = request_json("GET", "/api/v1/nodes/kubesim-node", NULL, 200);
    ck_assert_msg(kop_test_eventually(lease_owned_by, jpath(node, "metadata", "uid"), 5000),
                  "the Lease is not the new Node's");
    kop_test_sleep_ms(500); /* a garbage collector pass later: still there */
    ck_assert(lease_owned_by(jpath(node, "metadata", "uid")));
    json_decref(node);
}
END_TEST

/* pkg/scheduler with the default profile's filters that apply to one Node,
 * and the kubelet: a Pod a client makes is bound and started; one that
 * fits nowhere says why in its PodScheduled condition, as FitError words
 * it, and is placed once the Node changes so that it fits. */
START_TEST(test_kubesim_scheduler)
{
    /* bound and started, a hostNetwork Pod on the Node's address */
    client_pod("s1", "");
    client_pod("s2", "\"hostNetwork\":true");
    ck_assert_msg(kop_test_eventually(pod_running, "s1", 5000), "s1 not running");
    ck_assert_msg(kop_test_eventually(pod_running, "s2", 5000), "s2 not running");
    json_t *pod = get_pod("s1");
    ck_assert_str_eq(jpath(pod, "status", "hostIP"), "10.0.0.10");
    ck_assert_int_eq(strncmp(jpath(pod, "status", "podIP"), "10.244.", 7), 0);
    ck_assert(has_true_condition(pod, "PodScheduled"));
    ck_assert(has_true_condition(pod, "Ready"));
    json_decref(pod);
    pod = get_pod("s2");
    ck_assert_str_eq(jpath(pod, "status", "podIP"), "10.0.0.10");
    json_decref(pod);
    /* the field label spec.hostNetwork is "false" for a Pod without it */
    json_t *list = request_json(
        "GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.hostNetwork%3Dfalse", NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(list, "items")), 1);
    ck_assert_str_eq(jpath(json_array_get(json_object_get(list, "items"), 0), "metadata", "name"),
                     "s1");
    json_decref(list);
    list = request_json("GET",
                        "/api/v1/namespaces/default/pods?fieldSelector=spec.hostNetwork%21%3Dfalse",
                        NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(list, "items")), 1);
    ck_assert_str_eq(jpath(json_array_get(json_object_get(list, "items"), 0), "metadata", "name"),
                     "s2");
    json_decref(list);
    /* NodeAffinity: a nodeSelector the Node's labels do not match, then do */
    client_pod("s3", "\"nodeSelector\":{\"disk\":\"ssd\"}");
    struct sched_want w = {"s3", "Unschedulable",
                           "0/1 nodes are available: 1 node(s) didn't match Pod's node "
                           "affinity/selector. preemption: 0/1 nodes are available: 1 Preemption "
                           "is not helpful for scheduling."};
    ck_assert_msg(kop_test_eventually(pod_unschedulable, &w, 5000), "s3 not unschedulable");
    pod = get_pod("s3");
    ck_assert_str_eq(jpath(pod, "status", "phase"), "Pending");
    ck_assert_ptr_null(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    json_decref(pod);
    /* the required node affinity: matchFields on the name, Gt on a label */
    client_pod("s4",
               "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":"
               "{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"gen\",\"operator\":"
               "\"Gt\",\"values\":[\"3\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\","
               "\"operator\":\"In\",\"values\":[\"other\"]}]}]}}}");
    struct sched_want w4 = {"s4", "Unschedulable", w.message};
    ck_assert_msg(kop_test_eventually(pod_unschedulable, &w4, 5000), "s4 not unschedulable");
    merge_patch("/api/v1/nodes/kubesim-node",
                "{\"metadata\":{\"labels\":{\"disk\":\"ssd\","
                "\"gen\":\"4\"}}}",
                200);
    ck_assert_msg(kop_test_eventually(pod_running, "s3", 5000), "s3 not placed");
    ck_assert_msg(kop_test_eventually(pod_running, "s4", 5000), "s4 not placed");
    /* NodeUnschedulable: a cordoned Node gets the lifecycle controller's
     * taint; a Pod that tolerates it is placed, one that does not waits */
    merge_patch("/api/v1/nodes/kubesim-node", "{\"spec\":{\"unschedulable\":true}}", 200);
    ck_assert_msg(
        kop_test_eventually(node_taints_are, "node.kubernetes.io/unschedulable:NoSchedule", 5000),
        "no unschedulable taint");
    json_t *t = get_table("/api/v1/nodes");
    ck_assert_str_eq(json_string_value(cell(t, 0, 1)), "Ready,SchedulingDisabled");
    json_decref(t);
    client_pod("s5", "");
    client_pod("s6", "\"tolerations\":[{\"key\":\"node.kubernetes.io/unschedulable\","
                     "\"operator\":\"Exists\",\"effect\":\"NoSchedule\"}]");
    struct sched_want w5 = {"s5", "Unschedulable",
                            "0/1 nodes are available: 1 node(s) were unschedulable. preemption: "
                            "0/1 nodes are available: 1 Preemption is not helpful for "
                            "scheduling."};
    ck_assert_msg(kop_test_eventually(pod_unschedulable, &w5, 5000), "s5 not unschedulable");
    ck_assert_msg(kop_test_eventually(pod_running, "s6", 5000), "s6 not placed");
    merge_patch("/api/v1/nodes/kubesim-node", "{\"spec\":{\"unschedulable\":null}}", 200);
    ck_assert_msg(kop_test_eventually(node_taints_are, "", 5000), "taint left");
    ck_assert_msg(kop_test_eventually(pod_running, "s5", 5000), "s5 not placed");
    /* TaintToleration: a taint of the user's */
    merge_patch("/api/v1/nodes/kubesim-node",
                "{\"spec\":{\"taints\":[{\"key\":\"dedicated\",\"value\":\"infra\",\"effect\":"
                "\"NoSchedule\"}]}}",
                200);
    client_pod("s7", "");
    struct sched_want w7 = {"s7", "Unschedulable",
                            "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: "
                            "infra}. preemption: 0/1 nodes are available: 1 Preemption is not "
                            "helpful for scheduling."};
    ck_assert_msg(kop_test_eventually(pod_unschedulable, &w7, 5000), "s7 not unschedulable");
    merge_patch("/api/v1/nodes/kubesim-node", "{\"spec\":{\"taints\":null}}", 200);
    ck_assert_msg(kop_test_eventually(pod_running, "s7", 5000), "s7 not placed");
    /* NodeResourcesFit: more than the Node has; preemption cannot help */
    json_decref(request_json(
        "POST", "/api/v1/namespaces/default/pods",
        "{\"metadata\":{\"name\":\"s8\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"busybox:1.36\",\"resources\":{\"requests\":{\"cpu\":\"65\",\"example.com/gpu\":\"1\"},"
        "\"limits\":{\"example.com/gpu\":\"1\"}}}]}}",
        201));
    struct sched_want w8 = {"s8", "Unschedulable",
                            "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient "
                            "example.com/gpu. preemption: 0/1 nodes are available: 1 No "
                            "preemption victims found for incoming pod."};
    ck_assert_msg(kop_test_eventually(pod_unschedulable, &w8, 5000), "s8 not unschedulable");
    /* scheduling gates (the Pod strategy's condition), then none */
    client_pod("s9", "\"schedulingGates\":[{\"name\":\"example.com/wait\"}]");
    struct sched_want w9 = {"s9", "SchedulingGated",
                            "Scheduling is blocked due to non-empty scheduling gates"};
    ck_assert(pod_unschedulable(&w9));
    kop_test_sleep_ms(300);
    ck_assert(pod_unschedulable(&w9));
    merge_patch("/api/v1/namespaces/default/pods/s9", "{\"spec\":{\"schedulingGates\":null}}", 200);
    ck_assert_msg(kop_test_eventually(pod_running, "s9", 5000), "s9 not placed");
    /* another scheduler's Pod, and one bound to a Node without a kubelet */
    client_pod("s10", "\"schedulerName\":\"my-scheduler\"");
    client_pod("s11", "\"nodeName\":\"elsewhere\"");
    kop_test_sleep_ms(500);
    json_t *c = pod_scheduled("s10");
    ck_assert_ptr_null(c);
    pod = get_pod("s11");
    ck_assert_str_eq(jpath(pod, "status", "phase"), "Pending");
    json_decref(pod);
}
END_TEST

/* A ReplicaSet's Pods go through the same scheduler: with a nodeSelector
 * no Node matches, they are made Pending and the ReplicaSet counts none
 * ready; once the Node matches, they run. */
static bool rs_ready_count(const void *arg)
{
    json_t *rs = get_or_null("/apis/apps/v1/namespaces/default/replicasets/rss");
    const json_t *st = json_object_get(rs, "status");
    bool ok =
        json_integer_value(json_object_get(st, "replicas")) == 2 &&
        json_integer_value(json_object_get(st, "readyReplicas")) == (json_int_t)(uintptr_t)arg;
    json_decref(rs);
    return ok;
}

START_TEST(test_kubesim_replicaset_pods_scheduled)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/replicasets",
        "{\"metadata\":{\"name\":\"rss\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{"
        "\"app\":\"rss\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"rss\"}},\"spec\":{"
        "\"nodeSelector\":{\"zone\":\"b\"},\"containers\":[{\"name\":\"c\",\"image\":"
        "\"busybox:1.36\"}]}}}}",
        201));
    ck_assert_msg(kop_test_eventually(rs_ready_count, (void *)0, 5000), "no Pending Pods");
    json_t *list =
        request_json("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Drss", NULL, 200);
    json_t *items = json_object_get(list, "items");
    ck_assert_int_eq(json_array_size(items), 2);
    const json_t *p = json_array_get(items, 0);
    ck_assert_str_eq(jpath(p, "status", "phase"), "Pending");
    const json_t *c =
        json_array_get(json_object_get(json_object_get(p, "status"), "conditions"), 0);
    ck_assert_str_eq(jpath(c, "reason", NULL), "Unschedulable");
    json_decref(list);
    merge_patch("/api/v1/nodes/kubesim-node", "{\"metadata\":{\"labels\":{\"zone\":\"b\"}}}", 200);
    ck_assert_msg(kop_test_eventually(rs_ready_count, (void *)2, 5000), "Pods not placed");
}
END_TEST

/* Deployment dsp's status: readyReplicas is arg and Available is True
 * exactly when arg is 2. */
static bool dsp_ready(const void *arg)
{
    json_t *d = get_or_null("/apis/apps/v1/namespaces/default/deployments/dsp");
    const json_t *st = json_object_get(d, "status");
    json_int_t want = (json_int_t)(uintptr_t)arg;
    const char *avail = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (strcmp(jpath(c, "type", NULL), "Available") == 0)
            avail = jpath(c, "status", NULL);
    }
    bool ok = json_integer_value(json_object_get(st, "readyReplicas")) == want &&
              json_integer_value(json_object_get(st, "updatedReplicas")) == 2 && avail &&
              strcmp(avail, want == 2 ? "True" : "False") == 0;
    json_decref(d);
    return ok;
}

/* pkg/controller/deployment: the status follows the Pods of the current
 * ReplicaSet: while they cannot be scheduled, none is ready, Available is
 * False (MinimumReplicasUnavailable) and Progressing says ReplicaSetUpdated;
 * once they run, 2/2, Available True and NewReplicaSetAvailable, with
 * Progressing's lastTransitionTime kept (its status did not change). */
START_TEST(test_kubesim_deployment_status_follows_pods)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"dsp\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{"
        "\"app\":\"dsp\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"dsp\"}},\"spec\":{"
        "\"nodeSelector\":{\"pool\":\"gpu\"},\"containers\":[{\"name\":\"c\",\"image\":"
        "\"nginx\"}]}}}}",
        201));
    ck_assert_msg(kop_test_eventually(dsp_ready, (void *)0, 5000), "no status");
    json_t *d = request_json("GET", "/apis/apps/v1/namespaces/default/deployments/dsp", NULL, 200);
    const json_t *st = json_object_get(d, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "unavailableReplicas")), 2);
    ck_assert_ptr_null(json_object_get(st, "availableReplicas"));
    const json_t *conds = json_object_get(st, "conditions");
    ck_assert_str_eq(jpath(json_array_get(conds, 0), "reason", NULL), "MinimumReplicasUnavailable");
    const json_t *prog = json_array_get(conds, 1);
    ck_assert_str_eq(jpath(prog, "type", NULL), "Progressing");
    ck_assert_str_eq(jpath(prog, "reason", NULL), "ReplicaSetUpdated");
    ck_assert_ptr_nonnull(strstr(jpath(prog, "message", NULL), "is progressing."));
    char *ltt = strdup(jpath(prog, "lastTransitionTime", NULL));
    json_decref(d);
    kop_test_sleep_ms(1100); /* a second later: a new time would show */
    merge_patch("/api/v1/nodes/kubesim-node", "{\"metadata\":{\"labels\":{\"pool\":\"gpu\"}}}",
                200);
    ck_assert_msg(kop_test_eventually(dsp_ready, (void *)2, 5000), "not 2/2 once placed");
    d = request_json("GET", "/apis/apps/v1/namespaces/default/deployments/dsp", NULL, 200);
    st = json_object_get(d, "status");
    ck_assert_ptr_null(json_object_get(st, "unavailableReplicas"));
    conds = json_object_get(st, "conditions");
    prog = json_array_get(conds, 1);
    ck_assert_str_eq(jpath(prog, "reason", NULL), "NewReplicaSetAvailable");
    ck_assert_str_eq(jpath(prog, "lastTransitionTime", NULL), ltt);
    ck_assert_str_ne(jpath(prog, "lastUpdateTime", NULL), ltt);
    free(ltt);
    json_decref(d);
}
END_TEST

/* The Events of ns "default" whose involvedObject is kind/name, reason
 * reason (a field selector, as kubectl describe asks). @ref new */
static json_t *events_of(const char *kind, const char *name, const char *reason)
{
    char path[512];
    snprintf(path, sizeof(path),
             "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%%3D%s,"
             "involvedObject.name%%3D%s,reason%%3D%s",
             kind, name, reason);
    json_t *l = request_json("GET", path, NULL, 200);
    json_t *items = json_incref(json_object_get(l, "items"));
    json_decref(l);
    return items;
}

struct ev_want {
    const char *kind, *name, *reason;
    size_t n;
};

static bool events_at_least(const void *arg)
{
    const struct ev_want *w = arg;
    json_t *items = events_of(w->kind, w->name, w->reason);
    bool ok = json_array_size(items) >= w->n;
    json_decref(items);
    return ok;
}

/* The controllers' Events: the deployment controller's ScalingReplicaSet,
 * the ReplicaSet controller's SuccessfulCreate, SuccessfulDelete and
 * FailedCreate (aggregated, with the ReplicaFailure condition), as
 * tools/record writes them; the scheduler's Scheduled and FailedScheduling
 * as tools/events does (eventTime, action, reportingComponent). */
START_TEST(test_kubesim_controller_events)
{
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"evd\"},\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{"
        "\"app\":\"evd\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"evd\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
        201));
    struct ev_want scaled = {"Deployment", "evd", "ScalingReplicaSet", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &scaled, 5000), "no ScalingReplicaSet");
    json_t *items = events_of("Deployment", "evd", "ScalingReplicaSet");
    const json_t *ev = json_array_get(items, 0);
    const char *msg = jpath(ev, "message", NULL);
    ck_assert_int_eq(strncmp(msg, "Scaled up replica set evd-", 26), 0);
    ck_assert_ptr_nonnull(strstr(msg, " from 0 to 2"));
    ck_assert_str_eq(jpath(ev, "type", NULL), "Normal");
    ck_assert_str_eq(jpath(ev, "source", "component"), "deployment-controller");
    ck_assert_str_eq(jpath(ev, "reportingComponent", NULL), "deployment-controller");
    ck_assert_int_eq(json_integer_value(json_object_get(ev, "count")), 1);
    ck_assert_str_eq(jpath(ev, "involvedObject", "apiVersion"), "apps/v1");
    ck_assert_int_eq(strncmp(jpath(ev, "metadata", "name"), "evd.", 4), 0);
    char rs[128];
    snprintf(rs, sizeof(rs), "%.*s", (int)(strchr(msg + 22, ' ') - (msg + 22)), msg + 22);
    json_decref(items);
    struct ev_want created = {"ReplicaSet", rs, "SuccessfulCreate", 2};
    ck_assert_msg(kop_test_eventually(events_at_least, &created, 5000), "no SuccessfulCreate");
    items = events_of("ReplicaSet", rs, "SuccessfulCreate");
    ck_assert_int_eq(
        strncmp(jpath(json_array_get(items, 0), "message", NULL), "Created pod: evd-", 17), 0);
    const char *pod = jpath(json_array_get(items, 0), "message", NULL) + 13;
    struct ev_want sched = {"Pod", pod, "Scheduled", 1};
    ck_assert(events_at_least(&sched));
    json_t *si = events_of("Pod", pod, "Scheduled");
    ev = json_array_get(si, 0);
    ck_assert_str_eq(jpath(ev, "reportingComponent", NULL), "default-scheduler");
    ck_assert_str_eq(jpath(ev, "action", NULL), "Binding");
    ck_assert_ptr_nonnull(jpath(ev, "eventTime", NULL));
    ck_assert(json_is_null(json_object_get(ev, "firstTimestamp")));
    char want[256];
    snprintf(want, sizeof(want), "Successfully assigned default/%s to kubesim-node", pod);
    ck_assert_str_eq(jpath(ev, "message", NULL), want);
    json_decref(si);
    json_decref(items);
    /* scaled down: the deployment's Event and the ReplicaSet's */
    merge_patch("/apis/apps/v1/namespaces/default/deployments/evd", "{\"spec\":{\"replicas\":1}}",
                200);
    scaled.n = 2;
    ck_assert_msg(kop_test_eventually(events_at_least, &scaled, 5000), "no scale down");
    struct ev_want deleted = {"ReplicaSet", rs, "SuccessfulDelete", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &deleted, 5000), "no SuccessfulDelete");
    /* FailedCreate, aggregated; the ReplicaFailure condition until the
     * ServiceAccount is there */
    json_decref(request_json(
        "POST", "/apis/apps/v1/namespaces/default/replicasets",
        "{\"metadata\":{\"name\":\"evr\"},\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{"
        "\"app\":\"evr\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"evr\"}},\"spec\":{"
        "\"serviceAccountName\":\"later\",\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}"
        "}",
        201));
    struct ev_want failed = {"ReplicaSet", "evr", "FailedCreate", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &failed, 5000), "no FailedCreate");
    items = events_of("ReplicaSet", "evr", "FailedCreate");
    ck_assert_int_eq(json_array_size(items), 1);
    ev = json_array_get(items, 0);
    ck_assert_str_eq(jpath(ev, "type", NULL), "Warning");
    ck_assert_str_eq(jpath(ev, "message", NULL),
                     "Error creating: pods \"evr-\" is forbidden: error looking up service account "
                     "default/later: serviceaccount \"later\" not found");
    json_decref(items);
    json_t *r = request_json("GET", "/apis/apps/v1/namespaces/default/replicasets/evr", NULL, 200);
    const json_t *c =
        json_array_get(json_object_get(json_object_get(r, "status"), "conditions"), 0);
    ck_assert_str_eq(jpath(c, "type", NULL), "ReplicaFailure");
    ck_assert_str_eq(jpath(c, "reason", NULL), "FailedCreate");
    json_decref(r);
    /* another try (a change of the ReplicaSet): the same Event, count 2 */
    merge_patch("/apis/apps/v1/namespaces/default/replicasets/evr",
                "{\"metadata\":{\"labels\":{\"try\":\"2\"}}}", 200);
    for (int i = 0; i < 50; i++) {
        items = events_of("ReplicaSet", "evr", "FailedCreate");
        json_int_t n = json_integer_value(json_object_get(json_array_get(items, 0), "count"));
        size_t len = json_array_size(items);
        json_decref(items);
        if (n >= 2) {
            ck_assert_int_eq(len, 1);
            break;
        }
        ck_assert_int_lt(i, 49);
        kop_test_sleep_ms(100);
    }
    json_decref(request_json("POST", "/api/v1/namespaces/default/serviceaccounts",
                             "{\"metadata\":{\"name\":\"later\"}}", 201));
    struct ev_want made = {"ReplicaSet", "evr", "SuccessfulCreate", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &made, 5000), "no Pod once the SA is");
    for (int i = 0;; i++) {
        r = request_json("GET", "/apis/apps/v1/namespaces/default/replicasets/evr", NULL, 200);
        bool none = !json_object_get(json_object_get(r, "status"), "conditions");
        json_decref(r);
        if (none)
            break;
        ck_assert_int_lt(i, 50);
        kop_test_sleep_ms(100);
    }
    /* the scheduler: FailedScheduling with the condition's message, then
     * Scheduled once the Node changes */
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods",
                             "{\"metadata\":{\"name\":\"evp\"},\"spec\":{\"nodeSelector\":{"
                             "\"ev\":\"yes\"},\"containers\":[{\"name\":\"c\",\"image\":"
                             "\"nginx\"}]}}",
                             201));
    struct ev_want fs = {"Pod", "evp", "FailedScheduling", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &fs, 5000), "no FailedScheduling");
    items = events_of("Pod", "evp", "FailedScheduling");
    ev = json_array_get(items, 0);
    ck_assert_str_eq(jpath(ev, "action", NULL), "Scheduling");
    ck_assert_str_eq(jpath(ev, "message", NULL),
                     "0/1 nodes are available: 1 node(s) didn't match Pod's node "
                     "affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is "
                     "not helpful for scheduling.");
    json_decref(items);
    merge_patch("/api/v1/nodes/kubesim-node", "{\"metadata\":{\"labels\":{\"ev\":\"yes\"}}}", 200);
    struct ev_want ok = {"Pod", "evp", "Scheduled", 1};
    ck_assert_msg(kop_test_eventually(events_at_least, &ok, 5000), "no Scheduled");
}
END_TEST

/* PATCH (merge) path with body: a 422 whose message starts with want. */
static void expect_patch_invalid_prefix(const char *path, const char *body, const char *want)
{
    struct kop_test_resp r = request("PATCH", path, "application/merge-patch+json", body, NULL);
    ck_assert_msg(r.code == 422, "PATCH %s: %ld %s", path, r.code, r.body ? r.body : "");
    json_t *st = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    const char *msg = jpath(st, "message", NULL);
    ck_assert_msg(msg && strncmp(msg, want, strlen(want)) == 0, "message: %s", msg);
    json_decref(st);
}

/* ValidatePodUpdate: only images, a lower activeDeadlineSeconds, added
 * tolerations and removed scheduling gates may change in a Pod's spec; an
 * unchanged spec read and put back is accepted. */
START_TEST(test_kubesim_pod_update_rules)
{
    const char *pod = "/api/v1/namespaces/default/pods/pu";
    json_t *p = request_json("POST", "/api/v1/namespaces/default/pods",
                             "{\"metadata\":{\"name\":\"pu\"},\"spec\":{\"containers\":[{\"name\":"
                             "\"c\",\"image\":\"nginx:1.25\"}]}}",
                             201);
    json_decref(p);
    merge_patch(pod, "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}", 200);
    merge_patch(pod, "{\"spec\":{\"activeDeadlineSeconds\":100}}", 200);
    merge_patch(pod, "{\"spec\":{\"activeDeadlineSeconds\":50}}", 200);
    expect_patch_invalid_prefix(pod, "{\"spec\":{\"activeDeadlineSeconds\":60}}",
                                "Pod \"pu\" is invalid: spec.activeDeadlineSeconds: Invalid "
                                "value: 60: must be less than or equal to previous value");
    /* an image: allowed; a blank one: required */
    p = request_json("GET", pod, NULL, 200);
    json_t *c = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
    json_object_set_new(c, "image", json_string("nginx:1.26"));
    char *body = json_dumps(p, JSON_COMPACT);
    json_decref(request_json("PUT", pod, body, 200));
    free(body);
    json_object_set_new(c, "image", json_string(" nginx"));
    json_object_del(json_object_get(p, "metadata"), "resourceVersion");
    body = json_dumps(p, JSON_COMPACT);
    json_t *st = request_json("PUT", pod, body, 422);
    free(body);
    ck_assert_str_eq(jpath(st, "message", NULL),
                     "Pod \"pu\" is invalid: spec.containers[0].image: Invalid value: \" nginx\": "
                     "must not have leading or trailing whitespace");
    json_decref(st);
    /* anything else: Forbidden, on spec */
    json_object_set_new(c, "image", json_string("nginx:1.26"));
    json_object_set_new(c, "env", json_pack("[{s:s,s:s}]", "name", "A", "value", "b"));
    body = json_dumps(p, JSON_COMPACT);
    st = request_json("PUT", pod, body, 422);
    free(body);
    static const char forbidden[] =
        "Pod \"pu\" is invalid: spec: Forbidden: pod updates may not change fields other than "
        "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
        "`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously "
        "negative)\n  core.PodSpec{\n";
    ck_assert_int_eq(strncmp(jpath(st, "message", NULL), forbidden, strlen(forbidden)), 0);
    const json_t *cause0 =
        json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0);
    ck_assert_str_eq(jpath(cause0, "field", NULL), "spec");
    ck_assert_str_eq(jpath(cause0, "reason", NULL), "FieldValueForbidden");
    json_decref(st);
    json_decref(p);
    expect_patch_invalid_prefix(pod, "{\"spec\":{\"nodeName\":\"elsewhere\"}}",
                                "Pod \"pu\" is invalid: spec: Forbidden: pod updates may not "
                                "change fields other than");
    /* tolerations: a merge patch replaces the list: the defaults are gone */
    expect_patch_invalid_prefix(pod,
                                "{\"spec\":{\"tolerations\":[{\"key\":\"x\",\"operator\":"
                                "\"Exists\"}]}}",
                                "Pod \"pu\" is invalid: spec.tolerations: Forbidden: existing "
                                "toleration can not be modified except its tolerationSeconds");
    struct kop_test_resp r =
        request("PATCH", pod, "application/json-patch+json",
                "[{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":\"x\","
                "\"operator\":\"Exists\"}},{\"op\":\"replace\",\"path\":\"/spec/tolerations/0/"
                "tolerationSeconds\",\"value\":10}]",
                NULL);
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    r = request("PATCH", pod, "application/json-patch+json",
                "[{\"op\":\"add\",\"path\":\"/spec/containers/-\",\"value\":{\"name\":\"b\","
                "\"image\":\"busybox\"}}]",
                NULL);
    ck_assert_int_eq(r.code, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "spec.containers: Forbidden: pod updates may not add or "
                                         "remove containers"));
    kop_test_resp_free(&r);
    /* scheduling gates: removals only */
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods",
                             "{\"metadata\":{\"name\":\"pg\"},\"spec\":{\"schedulingGates\":[{"
                             "\"name\":\"a\"}],\"containers\":[{\"name\":\"c\",\"image\":"
                             "\"nginx\"}]}}",
                             201));
    expect_patch_invalid_prefix("/api/v1/namespaces/default/pods/pg",
                                "{\"spec\":{\"schedulingGates\":[{\"name\":\"a\"},{\"name\":"
                                "\"b\"}]}}",
                                "Pod \"pg\" is invalid: spec.schedulingGates[1].name: Forbidden: "
                                "only deletion is allowed, but found new scheduling gate 'b'");
    /* a gated Pod's nodeSelector may grow */
    merge_patch("/api/v1/namespaces/default/pods/pg", "{\"spec\":{\"nodeSelector\":{\"z\":\"1\"}}}",
                200);
    merge_patch("/api/v1/namespaces/default/pods/pg", "{\"spec\":{\"schedulingGates\":null}}", 200);
}
END_TEST

static bool pod_gone(const void *arg)
{
    json_t *p = get_pod(arg);
    json_decref(p);
    return p == NULL;
}

/* Graceful deletion: a Pod on a Node is marked (deletionTimestamp at now +
 * its grace period, deletionGracePeriodSeconds) and its kubelet stops it
 * and deletes it; one not scheduled, or with gracePeriodSeconds=0, goes at
 * once; either way the answer is the Pod (ReturnDeletedObject), as it is
 * for a Service or a ServiceAccount. */
START_TEST(test_kubesim_pod_graceful_delete)
{
    client_pod("gd1", "");
    client_pod("gd2", "\"nodeSelector\":{\"nowhere\":\"x\"}");
    client_pod("gd3", "");
    ck_assert_msg(kop_test_eventually(pod_running, "gd1", 5000), "gd1 not running");
    ck_assert_msg(kop_test_eventually(pod_running, "gd3", 5000), "gd3 not running");
    json_t *p = request_json("DELETE", "/api/v1/namespaces/default/pods/gd1", NULL, 200);
    ck_assert_str_eq(jpath(p, "kind", NULL), "Pod");
    ck_assert_ptr_nonnull(jpath(p, "metadata", "deletionTimestamp"));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(p, "metadata"),
                                                        "deletionGracePeriodSeconds")),
                     30);
    json_decref(p);
    ck_assert_msg(kop_test_eventually(pod_gone, "gd1", 5000), "gd1 not deleted by its kubelet");
    /* not scheduled: at once */
    p = request_json("DELETE", "/api/v1/namespaces/default/pods/gd2", NULL, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(p, "metadata"),
                                                        "deletionGracePeriodSeconds")),
                     0);
    json_decref(p);
    ck_assert(pod_gone("gd2"));
    /* gracePeriodSeconds=0 (kubectl delete --force --grace-period=0): at once */
    p = request_json("DELETE", "/api/v1/namespaces/default/pods/gd3?gracePeriodSeconds=0", NULL,
                     200);
    ck_assert_str_eq(jpath(p, "kind", NULL), "Pod");
    json_decref(p);
    ck_assert(pod_gone("gd3"));
    /* a Service and a ServiceAccount answer with the object, a ConfigMap
     * with a Status */
    json_decref(request_json("POST", "/api/v1/namespaces/default/serviceaccounts",
                             "{\"metadata\":{\"name\":\"gdsa\"}}", 201));
    p = request_json("DELETE", "/api/v1/namespaces/default/serviceaccounts/gdsa", NULL, 200);
    ck_assert_str_eq(jpath(p, "kind", NULL), "ServiceAccount");
    json_decref(p);
    json_decref(request_json("POST", "/api/v1/namespaces/default/services",
                             "{\"metadata\":{\"name\":\"gdsvc\"},\"spec\":{\"ports\":[{"
                             "\"port\":80}]}}",
                             201));
    p = request_json("DELETE", "/api/v1/namespaces/default/services/gdsvc", NULL, 200);
    ck_assert_str_eq(jpath(p, "kind", NULL), "Service");
    json_decref(p);
    create_cm("{\"metadata\":{\"name\":\"gdcm\"}}");
    p = request_json("DELETE", "/api/v1/namespaces/default/configmaps/gdcm", NULL, 200);
    ck_assert_str_eq(jpath(p, "kind", NULL), "Status");
    json_decref(p);
}
END_TEST

/* Pod default/NAME with labels app=APP and, with gate, the readiness gate
 * example.com/lb. */
static void gated_pod(const char *name, const char *app, bool gate)
{
    char *body = NULL;
    int n = asprintf(&body,
                     "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"app\":\"%s\"}},\"spec\":{%s"
                     "\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1.36\"}]}}",
                     name, app,
                     gate ? "\"readinessGates\":[{\"conditionType\":\"example.com/lb\"}]," : "");
    ck_assert_int_gt(n, 0);
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods", body, 201));
    free(body);
}

static bool pod_ready_now(const void *arg)
{
    json_t *pod = get_pod(arg);
    bool ok = pod && has_true_condition(pod, "Ready");
    json_decref(pod);
    return ok;
}

/*
 * pkg/kubelet/status GeneratePodReadyCondition: a Pod with a readiness
 * gate runs but is not Ready until another writer sets the gate's
 * condition True (it was Ready at once).
 */
START_TEST(test_kubesim_readiness_gates)
{
    gated_pod("rg1", "rg", true);
    ck_assert_msg(kop_test_eventually(pod_running, "rg1", 5000), "rg1 not running");
    json_t *pod = get_pod("rg1");
    ck_assert(!has_true_condition(pod, "Ready"));
    ck_assert(has_true_condition(pod, "ContainersReady"));
    const json_t *ready = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0)
            ready = c;
    }
    ck_assert_str_eq(json_string_value(json_object_get(ready, "reason")), "ReadinessGatesNotReady");
    ck_assert_str_eq(json_string_value(json_object_get(ready, "message")),
                     "corresponding condition of pod readiness gate \"example.com/lb\" does not "
                     "exist.");
    json_decref(pod);
    struct kop_test_resp r = request(
        "PATCH", "/api/v1/namespaces/default/pods/rg1/status",
        "application/strategic-merge-patch+json",
        "{\"status\":{\"conditions\":[{\"type\":\"example.com/lb\",\"status\":\"True\"}]}}", NULL);
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
    ck_assert_msg(kop_test_eventually(pod_ready_now, "rg1", 5000), "rg1 not ready");
}
END_TEST

/* pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec: a PDB with
 * both budgets, a percentage over 100, a negative count or a bad selector
 * is refused (all were stored before), on create and on update. */
START_TEST(test_kubesim_pdb_validation)
{
    const char *pdbs = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
    json_t *st = request_json("POST", pdbs,
                              "{\"metadata\":{\"name\":\"both\"},\"spec\":{\"minAvailable\":1,"
                              "\"maxUnavailable\":1,\"selector\":{\"matchLabels\":{\"a\":\"b\"}}}}",
                              422);
    const char *m = json_string_value(json_object_get(st, "message"));
    ck_assert_msg(strncmp(m,
                          "PodDisruptionBudget.policy \"both\" is invalid: spec: Invalid value: "
                          "policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr.IntOrString)(0x",
                          strlen("PodDisruptionBudget.policy \"both\" is invalid: spec: Invalid "
                                 "value: policy.PodDisruptionBudgetSpec{MinAvailable:(*intstr."
                                 "IntOrString)(0x")) == 0,
                  "%s", m);
    ck_assert_msg(strstr(m, "UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)"
                            "(nil)}: minAvailable and maxUnavailable cannot be both set"),
                  "%s", m);
    json_decref(st);
    expect_invalid(pdbs, "{\"metadata\":{\"name\":\"pct\"},\"spec\":{\"minAvailable\":\"150%\"}}",
                   "PodDisruptionBudget.policy \"pct\" is invalid: spec.minAvailable: Invalid "
                   "value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be "
                   "greater than 100%");
    expect_invalid(pdbs,
                   "{\"metadata\":{\"name\":\"neg\"},\"spec\":{\"maxUnavailable\":-1,"
                   "\"selector\":{\"matchExpressions\":[{\"key\":\"x\",\"operator\":\"In\"}]}}}",
                   "PodDisruptionBudget.policy \"neg\" is invalid: [spec.maxUnavailable: Invalid "
                   "value: -1: must be greater than or equal to 0, "
                   "spec.selector.matchExpressions[0].values: Required value: must be specified "
                   "when `operator` is 'In' or 'NotIn']");
    /* an update that sets the other budget too */
    json_decref(request_json("POST", pdbs,
                             "{\"metadata\":{\"name\":\"upd\"},\"spec\":{\"maxUnavailable\":"
                             "\"50%\",\"selector\":{\"matchLabels\":{\"a\":\"b\"}}}}",
                             201));
    merge_patch("/apis/policy/v1/namespaces/default/poddisruptionbudgets/upd",
                "{\"spec\":{\"minAvailable\":1}}", 422);
    merge_patch("/apis/policy/v1/namespaces/default/poddisruptionbudgets/upd",
                "{\"spec\":{\"minAvailable\":1,\"maxUnavailable\":null}}", 200);
    /* the policy's enum last, among the other errors (the typed schema's
     * check answered it alone); "" is a value it refuses */
    expect_invalid(pdbs,
                   "{\"metadata\":{\"name\":\"pol\"},\"spec\":{\"maxUnavailable\":-1,"
                   "\"unhealthyPodEvictionPolicy\":\"Sometimes\"}}",
                   "PodDisruptionBudget.policy \"pol\" is invalid: [spec.maxUnavailable: Invalid "
                   "value: -1: must be greater than or equal to 0, "
                   "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Sometimes\": "
                   "supported values: \"AlwaysAllow\", \"IfHealthyBudget\"]");
    expect_invalid(pdbs,
                   "{\"metadata\":{\"name\":\"pol2\"},\"spec\":{\"minAvailable\":1,"
                   "\"unhealthyPodEvictionPolicy\":\"\"}}",
                   "PodDisruptionBudget.policy \"pol2\" is invalid: "
                   "spec.unhealthyPodEvictionPolicy: Unsupported value: \"\": supported values: "
                   "\"AlwaysAllow\", \"IfHealthyBudget\"");
}
END_TEST

/* A 422 for method on path (body as JSON, or a merge patch when merge)
 * whose message is want_msg and whose causes are want, in order, each
 * "REASON FIELD: MESSAGE" (NULL-terminated). */
static void expect_422(const char *method, const char *path, bool merge, const char *body,
                       const char *want_msg, const char *const *want)
{
    struct kop_test_resp r =
        request(method, path, merge ? "application/merge-patch+json" : NULL, body, NULL);
    ck_assert_msg(r.code == 422, "%s %s: %ld (want 422): %s", method, path, r.code, r.body);
    json_t *st = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(st);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")), want_msg);
    const json_t *causes = json_object_get(json_object_get(st, "details"), "causes");
    size_t n = 0;
    while (want[n])
        n++;
    ck_assert_msg(json_array_size(causes) == n, "%zu causes (want %zu): %s",
                  json_array_size(causes), n, r.body);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(causes, i);
        char *got = NULL;
        ck_assert_int_gt(asprintf(&got, "%s %s: %s", jpath(c, "reason", NULL),
                                  jpath(c, "field", NULL), jpath(c, "message", NULL)),
                         0);
        ck_assert_str_eq(got, want[i]);
        free(got);
    }
    json_decref(st);
    kop_test_resp_free(&r);
}

#define CAUSES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* The strings of a JSON list joined with ",". malloc'd */
static char *joined(const json_t *list)
{
    char *out = strdup("");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        char *n = NULL;
        ck_assert_int_gt(asprintf(&n, "%s%s%s", out, i ? "," : "", json_string_value(v)), 0);
        free(out);
        out = n;
    }
    return out;
}

static void assert_policy_types(const json_t *np, const char *want)
{
    char *got = joined(json_object_get(json_object_get(np, "spec"), "policyTypes"));
    ck_assert_str_eq(got, want);
    free(got);
}

/* The protocol of spec.RULES[i].ports[j] */
static const char *port_protocol(const json_t *np, const char *rules, size_t i, size_t j)
{
    const json_t *rule = json_array_get(json_object_get(json_object_get(np, "spec"), rules), i);
    return jpath(json_array_get(json_object_get(rule, "ports"), j), "protocol", NULL);
}

/*
 * NetworkPolicy (pkg/apis/networking/validation, Kubernetes 1.32): what
 * ValidateNetworkPolicySpec, ValidateNetworkPolicyPort, ValidateNetworkPolicyPeer
 * and ValidateIPBlock refuse, in their order, with their paths and texts;
 * the v1 defaults (a port's protocol, policyTypes). Before, every policy
 * below was stored as sent, but for the enums, which the schema refused
 * alone, with its sorted values.
 */
START_TEST(test_kubesim_networkpolicy_validation)
{
    const char *nps = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies";
    /* a policy with every kind of peer and port; the CIDRs as
     * ParseCIDRSloppy reads them (leading zeros in an IPv4 octet) */
    json_t *np = request_json(
        "POST", nps,
        "{\"metadata\":{\"name\":\"rich\"},\"spec\":{\"podSelector\":{\"matchLabels\":{\"app\":"
        "\"web\"},\"matchExpressions\":[{\"key\":\"tier\",\"operator\":\"In\",\"values\":["
        "\"a\",\"b\"]}]},\"ingress\":[{\"from\":[{\"podSelector\":{\"matchLabels\":{\"role\":"
        "\"client\"}},\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"team\","
        "\"operator\":\"Exists\"}]}},{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\",\"except\":["
        "\"10.1.0.0/16\",\"10.2.3.0/24\"]}},{\"ipBlock\":{\"cidr\":\"192.168.001.0/24\"}},"
        "{\"ipBlock\":{\"cidr\":\"2001:db8::/32\",\"except\":[\"2001:db8:1::/48\"]}}],"
        "\"ports\":[{\"port\":80},{\"port\":\"http\",\"protocol\":\"TCP\"},{\"port\":8000,"
        "\"endPort\":9000,\"protocol\":\"UDP\"},{\"protocol\":\"SCTP\"}]}],\"egress\":[{\"to\":"
        "[{\"namespaceSelector\":{}}],\"ports\":[{\"port\":53,\"protocol\":\"UDP\"},{\"port\":"
        "53}]},{}]}}",
        201);
    assert_policy_types(np, "Ingress,Egress");
    ck_assert_str_eq(port_protocol(np, "ingress", 0, 0), "TCP");
    ck_assert_str_eq(port_protocol(np, "ingress", 0, 2), "UDP");
    ck_assert_str_eq(port_protocol(np, "ingress", 0, 3), "SCTP");
    ck_assert_str_eq(port_protocol(np, "egress", 0, 1), "TCP");
    json_decref(np);
    /* SetDefaults_NetworkPolicy: Ingress always, Egress with egress rules;
     * policyTypes sent are kept */
    np = request_json("POST", nps,
                      "{\"metadata\":{\"name\":\"egress-only\"},\"spec\":{\"egress\":[{}]}}", 201);
    assert_policy_types(np, "Ingress,Egress");
    json_decref(np);
    np = request_json("POST", nps,
                      "{\"metadata\":{\"name\":\"empty-egress\"},\"spec\":{\"egress\":[],"
                      "\"policyTypes\":[]}}",
                      201);
    assert_policy_types(np, "Ingress");
    json_decref(np);
    np = request_json("POST", nps,
                      "{\"metadata\":{\"name\":\"kept\"},\"spec\":{\"ingress\":[{}],"
                      "\"policyTypes\":[\"Egress\"]}}",
                      201);
    assert_policy_types(np, "Egress");
    json_decref(np);

    /* ValidateNetworkPolicyPort */
    expect_422(
        "POST", nps, false,
        "{\"metadata\":{\"name\":\"ports\"},\"spec\":{\"ingress\":[{\"ports\":[{\"protocol\":"
        "\"udp\",\"port\":0},{\"port\":80,\"endPort\":79},{\"port\":100,\"endPort\":70000},"
        "{\"port\":\"http\",\"endPort\":90},{\"endPort\":5},{\"port\":\"-Bad--x_\"},{\"port\":"
        "\"8080\"}]}]}}",
        "NetworkPolicy.networking.k8s.io \"ports\" is invalid: [spec.ingress[0].ports[0].protocol: "
        "Unsupported value: \"udp\": supported values: \"TCP\", \"UDP\", \"SCTP\", "
        "spec.ingress[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive, "
        "spec.ingress[0].ports[1].endPort: Invalid value: 79: must be greater than or equal to "
        "`port`, spec.ingress[0].ports[2].endPort: Invalid value: 70000: must be between 1 and "
        "65535, inclusive, spec.ingress[0].ports[3].endPort: Invalid value: 90: may not be "
        "specified when `port` is non-numeric, spec.ingress[0].ports[4].endPort: Invalid value: 5: "
        "may not be specified when `port` is not specified, spec.ingress[0].ports[5].port: "
        "Invalid value: \"-Bad--x_\": must contain only alpha-numeric characters (a-z, 0-9), and "
        "hyphens (-), spec.ingress[0].ports[5].port: Invalid value: \"-Bad--x_\": must not "
        "contain consecutive hyphens, spec.ingress[0].ports[5].port: Invalid value: \"-Bad--x_\": "
        "must not begin or end with a hyphen, spec.ingress[0].ports[6].port: Invalid value: "
        "\"8080\": must contain at least one letter (a-z)]",
        CAUSES("FieldValueNotSupported spec.ingress[0].ports[0].protocol: Unsupported value: "
               "\"udp\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
               "FieldValueInvalid spec.ingress[0].ports[0].port: Invalid value: 0: must be between "
               "1 and 65535, inclusive",
               "FieldValueInvalid spec.ingress[0].ports[1].endPort: Invalid value: 79: must be "
               "greater than or equal to `port`",
               "FieldValueInvalid spec.ingress[0].ports[2].endPort: Invalid value: 70000: must be "
               "between 1 and 65535, inclusive",
               "FieldValueInvalid spec.ingress[0].ports[3].endPort: Invalid value: 90: may not be "
               "specified when `port` is non-numeric",
               "FieldValueInvalid spec.ingress[0].ports[4].endPort: Invalid value: 5: may not be "
               "specified when `port` is not specified",
               "FieldValueInvalid spec.ingress[0].ports[5].port: Invalid value: \"-Bad--x_\": must "
               "contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
               "FieldValueInvalid spec.ingress[0].ports[5].port: Invalid value: \"-Bad--x_\": must "
               "not contain consecutive hyphens",
               "FieldValueInvalid spec.ingress[0].ports[5].port: Invalid value: \"-Bad--x_\": must "
               "not begin or end with a hyphen",
               "FieldValueInvalid spec.ingress[0].ports[6].port: Invalid value: \"8080\": must "
               "contain at least one letter (a-z)"));
    /* an endPort below port and out of range: both */
    expect_422("POST", nps, false,
               "{\"metadata\":{\"name\":\"end\"},\"spec\":{\"egress\":[{\"ports\":[{\"port\":"
               "443,\"endPort\":0}]}]}}",
               "NetworkPolicy.networking.k8s.io \"end\" is invalid: [spec.egress[0].ports[0]."
               "endPort: Invalid value: 0: must be greater than or equal to `port`, "
               "spec.egress[0].ports[0].endPort: Invalid value: 0: must be between 1 and 65535, "
               "inclusive]",
               CAUSES("FieldValueInvalid spec.egress[0].ports[0].endPort: Invalid value: 0: must "
                      "be greater than or equal to `port`",
                      "FieldValueInvalid spec.egress[0].ports[0].endPort: Invalid value: 0: must "
                      "be between 1 and 65535, inclusive"));

    /* ValidateNetworkPolicyPeer and ValidateIPBlock; each rule's ports
     * before its peers, ingress before egress */
    expect_422(
        "POST", nps, false,
        "{\"metadata\":{\"name\":\"peers\"},\"spec\":{\"egress\":[{\"to\":[{},{\"ipBlock\":{"
        "\"cidr\":\"10.0.0.0/8\"},\"namespaceSelector\":{}},{\"podSelector\":{\"matchLabels\":"
        "{\"a\":\"@x\"}},\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"k\","
        "\"operator\":\"In\"}]}}],\"ports\":[{\"port\":-1}]}],\"ingress\":[{\"from\":[{"
        "\"ipBlock\":{}}]}]}}",
        "NetworkPolicy.networking.k8s.io \"peers\" is invalid: [spec.ingress[0].from[0].ipBlock."
        "cidr: Required value, spec.egress[0].ports[0].port: Invalid value: -1: must be between 1 "
        "and 65535, inclusive, spec.egress[0].to[0]: Required value: must specify a peer, "
        "spec.egress[0].to[1]: Forbidden: may not specify both ipBlock and another peer, "
        "spec.egress[0].to[2].podSelector.matchLabels: Invalid value: \"@x\": a valid label must "
        "be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
        "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'), "
        "spec.egress[0].to[2].namespaceSelector.matchExpressions[0].values: Required value: must "
        "be specified when `operator` is 'In' or 'NotIn']",
        CAUSES("FieldValueRequired spec.ingress[0].from[0].ipBlock.cidr: Required value",
               "FieldValueInvalid spec.egress[0].ports[0].port: Invalid value: -1: must be "
               "between 1 and 65535, inclusive",
               "FieldValueRequired spec.egress[0].to[0]: Required value: must specify a peer",
               "FieldValueForbidden spec.egress[0].to[1]: Forbidden: may not specify both ipBlock "
               "and another peer",
               "FieldValueInvalid spec.egress[0].to[2].podSelector.matchLabels: Invalid value: "
               "\"@x\": a valid label must be an empty string or consist of alphanumeric "
               "characters, '-', '_' or '.', and must start and end with an alphanumeric "
               "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
               "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
               "FieldValueRequired spec.egress[0].to[2].namespaceSelector.matchExpressions[0]."
               "values: Required value: must be specified when `operator` is 'In' or 'NotIn'"));
    expect_422(
        "POST", nps, false,
        "{\"metadata\":{\"name\":\"cidrs\"},\"spec\":{\"ingress\":[{\"from\":[{\"ipBlock\":{"
        "\"cidr\":\"10.0.0.0/33\",\"except\":[\"x\"]}},{\"ipBlock\":{\"cidr\":\"10.0.0.0\"}},"
        "{\"ipBlock\":{\"cidr\":\"10.0.0.0/8\",\"except\":[\"10.1.0.0/16\",\"11.0.0.0/16\","
        "\"10.0.0.0/8\",\"10.0.0.0/7\",\"10.1.0.0/\",\"2001:db8::/64\"]}},{\"ipBlock\":{"
        "\"cidr\":\"2001:db8::/32\",\"except\":[\"2001:db9::/48\",\"10.0.0.0/16\","
        "\"2001:db8::1::/64\"]}}]}]}}",
        "NetworkPolicy.networking.k8s.io \"cidrs\" is invalid: [spec.ingress[0].from[0].ipBlock."
        "cidr: Invalid value: \"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
        "2001:db8::/64), spec.ingress[0].from[1].ipBlock.cidr: Invalid value: \"10.0.0.0\": must "
        "be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64), "
        "spec.ingress[0].from[2].ipBlock.except[1]: Invalid value: \"11.0.0.0/16\": must be a "
        "strict subset of `cidr`, spec.ingress[0].from[2].ipBlock.except[2]: Invalid value: "
        "\"10.0.0.0/8\": must be a strict subset of `cidr`, "
        "spec.ingress[0].from[2].ipBlock.except[3]: Invalid value: \"10.0.0.0/7\": must be a "
        "strict subset of `cidr`, spec.ingress[0].from[2].ipBlock.except[4]: Invalid value: "
        "\"10.1.0.0/\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64), "
        "spec.ingress[0].from[2].ipBlock.except[5]: Invalid value: \"2001:db8::/64\": must be a "
        "strict subset of `cidr`, spec.ingress[0].from[3].ipBlock.except[0]: Invalid value: "
        "\"2001:db9::/48\": must be a strict subset of `cidr`, "
        "spec.ingress[0].from[3].ipBlock.except[1]: Invalid value: \"10.0.0.0/16\": must be a "
        "strict subset of `cidr`, spec.ingress[0].from[3].ipBlock.except[2]: Invalid value: "
        "\"2001:db8::1::/64\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)]",
        CAUSES("FieldValueInvalid spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "
               "\"10.0.0.0/33\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
               "FieldValueInvalid spec.ingress[0].from[1].ipBlock.cidr: Invalid value: "
               "\"10.0.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
               "FieldValueInvalid spec.ingress[0].from[2].ipBlock.except[1]: Invalid value: "
               "\"11.0.0.0/16\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[2].ipBlock.except[2]: Invalid value: "
               "\"10.0.0.0/8\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[2].ipBlock.except[3]: Invalid value: "
               "\"10.0.0.0/7\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[2].ipBlock.except[4]: Invalid value: "
               "\"10.1.0.0/\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
               "FieldValueInvalid spec.ingress[0].from[2].ipBlock.except[5]: Invalid value: "
               "\"2001:db8::/64\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[3].ipBlock.except[0]: Invalid value: "
               "\"2001:db9::/48\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[3].ipBlock.except[1]: Invalid value: "
               "\"10.0.0.0/16\": must be a strict subset of `cidr`",
               "FieldValueInvalid spec.ingress[0].from[3].ipBlock.except[2]: Invalid value: "
               "\"2001:db8::1::/64\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
               "2001:db8::/64)"));

    /* ValidateNetworkPolicySpec: podSelector first, policyTypes last; the
     * enums in the validation's order, not the schema's */
    expect_422(
        "POST", nps, false,
        "{\"metadata\":{\"name\":\"types\"},\"spec\":{\"policyTypes\":[\"Ingress\",\"ingress\"],"
        "\"ingress\":[{\"ports\":[{\"protocol\":\"ICMP\"}]}],\"podSelector\":{"
        "\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}}}",
        "NetworkPolicy.networking.k8s.io \"types\" is invalid: "
        "[spec.podSelector.matchExpressions[0]"
        ".values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist', "
        "spec.ingress[0].ports[0].protocol: Unsupported value: \"ICMP\": supported values: "
        "\"TCP\", \"UDP\", \"SCTP\", spec.policyTypes[1]: Unsupported value: \"ingress\": "
        "supported values: \"Ingress\", \"Egress\"]",
        CAUSES("FieldValueForbidden spec.podSelector.matchExpressions[0].values: Forbidden: may "
               "not be specified when `operator` is 'Exists' or 'DoesNotExist'",
               "FieldValueNotSupported spec.ingress[0].ports[0].protocol: Unsupported value: "
               "\"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\"",
               "FieldValueNotSupported spec.policyTypes[1]: Unsupported value: \"ingress\": "
               "supported values: \"Ingress\", \"Egress\""));
    /* more than two: one error for the list, none for its members */
    expect_422("POST", nps, false,
               "{\"metadata\":{\"name\":\"three\"},\"spec\":{\"policyTypes\":[\"Ingress\","
               "\"Egress\",\"Other\"]}}",
               "NetworkPolicy.networking.k8s.io \"three\" is invalid: spec.policyTypes: Invalid "
               "value: []networking.PolicyType{\"Ingress\", \"Egress\", \"Other\"}: may not "
               "specify more than two policyTypes",
               CAUSES("FieldValueInvalid spec.policyTypes: Invalid value: "
                      "[]networking.PolicyType{\"Ingress\", \"Egress\", \"Other\"}: may not "
                      "specify more than two policyTypes"));

    /* An update: ValidateNetworkPolicy and ValidateNetworkPolicyUpdate both
     * validate the spec, so each error is a cause twice (the message lists
     * it once); the defaults apply to the update too, policyTypes set at
     * create stay. */
    const char *upd = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/upd";
    np = request_json("POST", nps,
                      "{\"metadata\":{\"name\":\"upd\"},\"spec\":{\"podSelector\":{"
                      "\"matchLabels\":{\"app\":\"x\"}},\"ingress\":[{\"from\":[{"
                      "\"podSelector\":{}}]}]}}",
                      201);
    assert_policy_types(np, "Ingress");
    json_decref(np);
    expect_422("PATCH", upd, true,
               "{\"spec\":{\"ingress\":[{\"ports\":[{\"port\":70000}],\"from\":[{\"ipBlock\":{"
               "\"cidr\":\"10.0.0.0/8\",\"except\":[\"10.0.0.0/8\"]}}]}]}}",
               "NetworkPolicy.networking.k8s.io \"upd\" is invalid: [spec.ingress[0].ports[0]."
               "port: Invalid value: 70000: must be between 1 and 65535, inclusive, "
               "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.0.0.0/8\": must "
               "be a strict subset of `cidr`]",
               CAUSES("FieldValueInvalid spec.ingress[0].ports[0].port: Invalid value: 70000: "
                      "must be between 1 and 65535, inclusive",
                      "FieldValueInvalid spec.ingress[0].from[0].ipBlock.except[0]: Invalid "
                      "value: \"10.0.0.0/8\": must be a strict subset of `cidr`",
                      "FieldValueInvalid spec.ingress[0].ports[0].port: Invalid value: 70000: "
                      "must be between 1 and 65535, inclusive",
                      "FieldValueInvalid spec.ingress[0].from[0].ipBlock.except[0]: Invalid "
                      "value: \"10.0.0.0/8\": must be a strict subset of `cidr`"));
    /* the old object's podSelector is valid: an invalid label value in a
     * selector is refused on update too (ValidationOptionsForNetworking) */
    expect_422("PATCH", upd, true,
               "{\"spec\":{\"podSelector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":"
               "\"In\",\"values\":[\"not valid\"]}]}}}",
               "NetworkPolicy.networking.k8s.io \"upd\" is invalid: spec.podSelector."
               "matchExpressions[0].values[0]: Invalid value: \"not valid\": a valid label must "
               "be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character (e.g. 'MyValue',  or "
               "'my_value',  or '12345', regex used for validation is "
               "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
               CAUSES("FieldValueInvalid spec.podSelector.matchExpressions[0].values[0]: Invalid "
                      "value: \"not valid\": a valid label must be an empty string or consist of "
                      "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                      "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                      "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                      "[A-Za-z0-9])?')",
                      "FieldValueInvalid spec.podSelector.matchExpressions[0].values[0]: Invalid "
                      "value: \"not valid\": a valid label must be an empty string or consist of "
                      "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                      "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                      "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                      "[A-Za-z0-9])?')"));
    merge_patch(upd, "{\"spec\":{\"egress\":[{\"ports\":[{\"port\":53}]}]}}", 200);
    np = request_json("GET", upd, NULL, 200);
    assert_policy_types(np, "Ingress");
    ck_assert_str_eq(port_protocol(np, "egress", 0, 0), "TCP");
    json_decref(np);
}
END_TEST

static Suite *kubesim_suite(void)
{
    Suite *s = suite_create("kubesim");
    TCase *tc = tcase_create("api");
    tcase_add_checked_fixture(tc, start_sim, stop_sim);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_kubesim_unauthorized);
    tcase_add_test(tc, test_kubesim_discovery);
    tcase_add_test(tc, test_kubesim_crud_and_conflicts);
    tcase_add_test(tc, test_kubesim_selectors_and_paging);
    tcase_add_test(tc, test_kubesim_watch_resume_bookmark_selector);
    tcase_add_test(tc, test_kubesim_not_equal_selector_list_and_watch);
    tcase_add_test(tc, test_kubesim_query_parameters);
    tcase_add_test(tc, test_kubesim_watch_410_after_compaction);
    tcase_add_test(tc, test_kubesim_dropped_watch);
    tcase_add_test(tc, test_kubesim_gc_cascade);
    tcase_add_test(tc, test_kubesim_finalizers);
    tcase_add_test(tc, test_kubesim_crd_defaults_and_status);
    tcase_add_test(tc, test_kubesim_crd_list_types);
    tcase_add_test(tc, test_kubesim_deployment_controller_and_service);
    tcase_add_test(tc, test_kubesim_faults);
    tcase_add_test(tc, test_kubesim_stats);
    tcase_add_test(tc, test_kubesim_list_snapshot);
    tcase_add_test(tc, test_kubesim_list_options_validated);
    tcase_add_test(tc, test_kubesim_empty_metadata_dropped);
    tcase_add_test(tc, test_kubesim_access_reviews);
    tcase_add_test(tc, test_kubesim_bootstrap_roles_aggregation);
    tcase_add_test(tc, test_kubesim_default_service_accounts);
    tcase_add_test(tc, test_kubesim_namespace_lifecycle);
    tcase_add_test(tc, test_kubesim_namespace_conditions);
    tcase_add_test(tc, test_kubesim_kubernetes_service);
    tcase_add_test(tc, test_kubesim_replicaset_pods);
    tcase_add_test(tc, test_kubesim_pod_defaults);
    tcase_add_test(tc, test_kubesim_node_registered);
    tcase_add_test(tc, test_kubesim_node_lease_renewed);
    tcase_add_test(tc, test_kubesim_event_ttl);
    tcase_add_test(tc, test_kubesim_scheduler);
    tcase_add_test(tc, test_kubesim_replicaset_pods_scheduled);
    tcase_add_test(tc, test_kubesim_deployment_status_follows_pods);
    tcase_add_test(tc, test_kubesim_controller_events);
    tcase_add_test(tc, test_kubesim_pod_update_rules);
    tcase_add_test(tc, test_kubesim_pod_graceful_delete);
    tcase_add_test(tc, test_kubesim_pdb_validation);
    tcase_add_test(tc, test_kubesim_networkpolicy_validation);
    tcase_add_test(tc, test_kubesim_readiness_gates);
    tcase_add_test(tc, test_kubesim_endpoints_controller);
    tcase_add_test(tc, test_kubesim_endpoints_kubernetes);
    tcase_add_test(tc, test_kubesim_root_ca_configmaps);
    tcase_add_test(tc, test_kubesim_impersonation);
    tcase_add_test(tc, test_kubesim_rbac_escalation);
    tcase_add_test(tc, test_kubesim_validation);
    tcase_add_test(tc, test_kubesim_pod_spec_validation);
    tcase_add_test(tc, test_kubesim_pod_affinity);
    tcase_add_test(tc, test_kubesim_pod_enums);
    tcase_add_test(tc, test_kubesim_pod_security_context);
    tcase_add_test(tc, test_kubesim_quantity_decoding);
    tcase_add_test(tc, test_kubesim_update_validation);
    tcase_add_test(tc, test_kubesim_service_allocator_and_validation_order);
    tcase_add_test(tc, test_kubesim_service_allocation);
    tcase_add_test(tc, test_kubesim_always_allow);
    tcase_add_test(tc, test_kubesim_table_output);
    tcase_add_test(tc, test_kubesim_deployment_scale);
    tcase_add_test(tc, test_kubesim_deployment_replicasets);
    tcase_add_test(tc, test_kubesim_protobuf);
    tcase_add_test(tc, test_kubesim_protobuf_types);
    tcase_add_test(tc, test_kubesim_apply_conflict);
    tcase_add_test(tc, test_kubesim_managed_fields_on_create);
    tcase_add_test(tc, test_kubesim_managed_fields_on_update);
    tcase_add_test(tc, test_kubesim_service_map_runtime);
    tcase_add_test(tc, test_kubesim_stats_user_agent);
    tcase_add_test(tc, test_kubesim_fault_filters);
    tcase_add_test(tc, test_kubesim_fault_flag_filters);
    tcase_add_test(tc, test_kubesim_token_file_and_audit);
    tcase_add_test(tc, test_kubesim_metadata_only);
    tcase_add_test(tc, test_kubesim_metadata_only_custom_resource);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(kubesim_suite());
}
