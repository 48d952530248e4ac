/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Storage version migration end to end (include/kop/migrator.h): kubesim,
 * `kop --webhook-only` serving the conversion webhook (kubesim reaches it
 * through --service, trusting the CA of a pair made with
 * kop_selfsigned_prepare), and the MyResource CRD with v1 and v2.
 *
 * TCase "kubesim": kubesim's storage versions. An object stays in the
 * version it was written in when the storage version flips; a no-op PUT of
 * an object stored in the old version rewrites it (new resourceVersion,
 * stored as v2), the same PUT again writes nothing; a stale uid is a 409;
 * status.storedVersions keeps every version ever stored, loses one only
 * through /status, never the storage version, and a stored version cannot
 * leave spec.versions.
 *
 * TCase "migration": the acceptance run. 2,000 MyResources written as v1
 * (every 7th with v2-only data in the v2-extras annotation: paused and a
 * second port), 1,950 in namespace "bulk" and 50 in "default", the
 * namespace the reconciler watches (so it writes their status while the
 * migration runs); the v2 reading of each is kept; the CRD flips to v2
 * storage; two `kop --controller-only --leader-elect --storage-migration`
 * replicas start with 5% of the MyResource updates failing (409 and 500,
 * injected by kubesim). When a quarter of the objects are stored as v2 the
 * leader is killed (SIGKILL); the other one takes over and resumes from the
 * checkpoint. At the end every object is stored as v2, reads back as v2
 * equal to its reading before the flip (spec, labels, annotations),
 * storedVersions is ["v2"], every "bulk" object was written exactly twice
 * (created, migrated: kubesim counts the writes per object), and the
 * metrics and Events say so.
 *
 * TCase "api": kubesim with --feature StorageVersionMigrator. Its own
 * controller: a migration without a resource is refused (422), one of an
 * unknown resource ends Failed, one of myresources rewrites every object
 * stored as v1 and ends Succeeded (Running False), leaving storedVersions
 * alone. Then, with the same 2,000 objects and 5% of kop's reads of the
 * migration and of its status patches failing (500), kop creates a
 * StorageVersionMigration and follows it; kubesim rewrites the objects
 * (each once, nothing lost); kop rewrites none itself, then prunes
 * storedVersions.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/selfsigned.h"

#define TOKEN "migration-test-token"
#define CRD_PATH "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
#define CRD_NAME "myresources.mygroup.example.com"
#define STORAGE_PATH "/_kubesim/storage?resource=" CRD_NAME
#define EXTRAS "mygroup.example.com/v2-extras"

static struct kop_test_kubesim sim;
static bool sim_running;
static struct kop_test_proc webhook;
static bool webhook_running;
struct node {
    struct kop_test_proc proc;
    bool running;
    long metrics_port;
};
static struct node nodes[2];
static char *tmpdir;
static char certs[600], ca_path[700], kc_path[700];
static CURL *curl;

/* ---- HTTP ------------------------------------------------------------------------------------ */

static const struct kop_test_http_options *api_opts(void)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){
        .handle = curl, .ca = ca_path, .token = TOKEN, .timeout_s = 60, .attempts = 20};
    return &o;
}

static json_t *api(const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(), sim.url, method, path, body, want);
}

static json_t *get(const char *path)
{
    return kop_test_api_get(api_opts(), sim.url, path);
}

/* A request whose answer code is the result (no retries). */
static long call(const char *method, const char *path, const char *ctype, const char *body,
                 json_t **ret)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", sim.url, path);
    const struct kop_test_http_options o = {.handle = curl,
                                            .ca = ca_path,
                                            .token = TOKEN,
                                            .ctype = ctype ? ctype : "application/json",
                                            .timeout_s = 60};
    char *out = NULL;
    long code = kop_test_http(&o, method, url, body, &out);
    if (ret)
        *ret = out ? json_loads(out, 0, NULL) : NULL;
    free(out);
    return code;
}

static const char *jstr(const json_t *v, const char *a, const char *b)
{
    const json_t *x = json_object_get(v, a);
    if (b)
        x = json_object_get(x, b);
    return json_string_value(x);
}

/* ---- processes --------------------------------------------------------------------------------
 */

/* v1 (storage, defaults as manifests/base/crd.yaml) and v2 (served), the
 * conversion webhook trusted through the webhook pair's CA. */
static const char crd_fmt[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"" CRD_NAME "\"},\"spec\":{\"group\":\"mygroup.example.com\","
    "\"names\":{\"plural\":\"myresources\",\"singular\":\"myresource\",\"kind\":\"MyResource\"},"
    "\"scope\":\"Namespaced\",\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
    "\"conversionReviewVersions\":[\"v1\"],\"clientConfig\":{\"service\":{\"namespace\":"
    "\"kop-system\",\"name\":\"kop-webhook-service\",\"path\":\"/convert\",\"port\":443},"
    "\"caBundle\":\"%s\"}}},\"versions\":["
    "{\"name\":\"v1\",\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
    "\"object\",\"default\":{},\"properties\":{\"replicas\":{\"type\":\"integer\",\"default\":1},"
    "\"image\":{\"type\":\"string\",\"default\":\"nginx:1.14.2\"},\"port\":{\"type\":\"integer\","
    "\"default\":80},\"serviceType\":{\"type\":\"string\",\"default\":\"ClusterIP\"}}},"
    "\"status\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}}},"
    "{\"name\":\"v2\",\"served\":true,\"storage\":false,\"subresources\":{\"status\":{}},"
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
    "\"object\",\"x-kubernetes-preserve-unknown-fields\":true},\"status\":{\"type\":\"object\","
    "\"x-kubernetes-preserve-unknown-fields\":true}}}}}]}}";

static void create_crd(void)
{
    char pair_ca[700];
    snprintf(pair_ca, sizeof(pair_ca), "%s/ca.crt", certs);
    char *b64 = kop_test_file_base64(pair_ca);
    size_t len = sizeof(crd_fmt) + strlen(b64);
    char *body = malloc(len);
    ck_assert_ptr_nonnull(body);
    snprintf(body, len, crd_fmt, b64);
    json_decref(api("POST", CRD_PATH, body, 201));
    free(body);
    free(b64);
}

/* The webhook server first (kubesim needs its port), then kubesim. */
static void start(char *const *sim_args)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    tmpdir = kop_test_tmpdir();
    snprintf(certs, sizeof(certs), "%s/certs", tmpdir);
    snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", tmpdir);
    snprintf(kc_path, sizeof(kc_path), "%s/kubeconfig", tmpdir);
    const struct kop_selfsigned_options ss = {.cert_dir = certs};
    ck_assert_int_eq(kop_selfsigned_prepare(&ss), 0);

    long port = kop_test_start_webhook_kop(&webhook, &webhook_running, certs, 15000);

    char service[128];
    snprintf(service, sizeof(service), "kop-system/kop-webhook-service=127.0.0.1:%ld", port);
    char *args[24];
    size_t n = 0;
    args[n++] = "--service";
    args[n++] = service;
    args[n++] = "--deployment-ready-delay";
    args[n++] = "100ms";
    args[n++] = "--history-size";
    args[n++] = "100000";
    for (size_t i = 0; sim_args && sim_args[i] && n < 23; i++)
        args[n++] = sim_args[i];
    args[n] = NULL;
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0",
                                               .kubeconfig = kc_path,
                                               .ca = ca_path,
                                               .token = TOKEN,
                                               .args = args};
    kop_test_kubesim_start(&sim, &o);
    sim_running = true;
    create_crd();
    json_decref(api("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"bulk\"}}", 201));
}

static void teardown(void)
{
    for (size_t i = 0; i < 2; i++)
        if (nodes[i].running)
            kop_test_stop(&nodes[i].proc, SIGTERM, 15000);
    memset(nodes, 0, sizeof(nodes));
    if (webhook_running)
        kop_test_stop(&webhook, SIGTERM, 10000);
    if (sim_running)
        kop_test_kubesim_stop(&sim, SIGTERM, 10000);
    webhook_running = sim_running = false;
    curl_easy_cleanup(curl);
    curl = NULL;
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
    curl_global_cleanup();
}

static void start_node(struct node *n, bool leader_elect)
{
    struct kop_test_argv a;
    kop_test_kop_argv(&a, kc_path);
    kop_test_argv_add(&a, "--controller-only", NULL);
    /* The overlay's flags. */
    kop_test_argv_add(&a, "--storage-migration", "--storage-version", "v2", NULL);
    kop_test_argv_add(&a, "--namespace", "default", NULL);
    /* The limiter stays on: 2,000 updates take about 10 s at 200/s. */
    kop_test_argv_add(&a, "--kube-api-qps", "200", "--kube-api-burst", "50", "--shutdown-timeout",
                      "10s", NULL);
    if (leader_elect)
        kop_test_argv_add(&a, "--leader-elect", "--leader-election-namespace", "default",
                          "--leader-election-lease-duration", "3s",
                          "--leader-election-renew-deadline", "2s",
                          "--leader-election-retry-period", "500ms", NULL);
    memset(n, 0, sizeof(*n));
    ck_assert_int_eq(kop_test_spawn(&n->proc, a.v), 0);
    n->running = true;
    n->metrics_port = kop_test_logged_port(&n->proc, "serving metrics", 15000);
}

static double metric(const struct node *n, const char *name, const char *label)
{
    const struct kop_test_http_options o = {.handle = curl, .timeout_s = 30, .attempts = 5};
    return kop_test_scrape_sum(&o, n->metrics_port, name, label);
}

/* ---- objects ------------------------------------------------------------------------------------
 */

static void create_objects(const char *ns, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[256], body[1024];
        snprintf(path, sizeof(path), "/apis/mygroup.example.com/v1/namespaces/%s/myresources", ns);
        /* Every 7th carries v2-only data: paused and a second port. */
        const char *extras =
            i % 7 == 0 ? ",\"annotations\":{\"" EXTRAS "\":\"{\\\"paused\\\":true,\\\"ports\\\":"
                         "[{\\\"name\\\":\\\"web\\\",\\\"protocol\\\":\\\"TCP\\\"},{\\\"name\\\":"
                         "\\\"metrics\\\",\\\"port\\\":9090,\\\"protocol\\\":\\\"TCP\\\"}]}\"}"
                       : "";
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":"
                 "{\"name\":\"obj-%04zu\",\"labels\":{\"batch\":\"%zu\"}%s},\"spec\":{\"replicas\":"
                 "%zu,\"image\":\"nginx:1.%zu\",\"port\":%zu}}",
                 i, i % 10, extras, i % 5, i % 30, 8000 + i % 100);
        json_decref(api("POST", path, body, 201));
    }
}

/* "ns/name" -> the parts of the v2 reading a migration must keep. @ref new */
static json_t *v2_readings(void)
{
    json_t *list = get("/apis/mygroup.example.com/v2/myresources");
    ck_assert_ptr_nonnull(list);
    json_t *out = json_object();
    size_t i;
    json_t *it;
    json_array_foreach(json_object_get(list, "items"), i, it)
    {
        json_t *md = json_object_get(it, "metadata");
        char key[300];
        snprintf(key, sizeof(key), "%s/%s", jstr(md, "namespace", NULL), jstr(md, "name", NULL));
        json_t *keep = json_pack("{s:O, s:O*, s:O*, s:s}", "spec", json_object_get(it, "spec"),
                                 "labels", json_object_get(md, "labels"), "annotations",
                                 json_object_get(md, "annotations"), "uid", jstr(md, "uid", NULL));
        json_object_set_new(out, key, keep);
    }
    json_decref(list);
    return out;
}

static void flip_storage_to_v2(void)
{
    json_t *crd = get(CRD_PATH "/" CRD_NAME);
    ck_assert_ptr_nonnull(crd);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(json_object_get(crd, "spec"), "versions"), i, v)
    {
        json_object_set_new(v, "storage", json_boolean(strcmp(jstr(v, "name", NULL), "v2") == 0));
    }
    char *body = json_dumps(crd, JSON_COMPACT);
    json_decref(crd);
    json_t *out = api("PUT", CRD_PATH "/" CRD_NAME, body, 200);
    free(body);
    json_t *sv = json_object_get(json_object_get(out, "status"), "storedVersions");
    ck_assert_uint_eq(json_array_size(sv), 2);
    ck_assert_str_eq(json_string_value(json_array_get(sv, 0)), "v1");
    ck_assert_str_eq(json_string_value(json_array_get(sv, 1)), "v2");
    json_decref(out);
}

/* Objects stored as v2 (and the total). */
static size_t stored_v2(size_t *ret_total)
{
    json_t *doc = get(STORAGE_PATH);
    size_t n = 0;
    const char *k;
    json_t *o;
    json_object_foreach(json_object_get(doc, "objects"), k, o)
    {
        if (strcmp(jstr(o, "version", NULL), "v2") == 0)
            n++;
    }
    if (ret_total)
        *ret_total = json_object_size(json_object_get(doc, "objects"));
    json_decref(doc);
    return n;
}

static bool stored_versions_is_v2(const void *arg)
{
    (void)arg;
    json_t *crd = get(CRD_PATH "/" CRD_NAME);
    const json_t *sv = json_object_get(json_object_get(crd, "status"), "storedVersions");
    bool ok =
        json_array_size(sv) == 1 && strcmp(json_string_value(json_array_get(sv, 0)), "v2") == 0;
    json_decref(crd);
    return ok;
}

/* Every object stored as v2, read back as v2 equal to before, and (for
 * namespace bulk) written exactly twice: created, migrated. */
static void check_objects(const json_t *before, size_t want)
{
    json_t *doc = get(STORAGE_PATH);
    const json_t *objs = json_object_get(doc, "objects");
    ck_assert_uint_eq(json_object_size(objs), want);
    const char *k;
    json_t *o;
    json_object_foreach((json_t *)objs, k, o)
    {
        ck_assert_msg(strcmp(jstr(o, "version", NULL), "v2") == 0, "%s still stored as %s", k,
                      jstr(o, "version", NULL));
        if (strncmp(k, "bulk/", 5) == 0)
            ck_assert_msg(json_integer_value(json_object_get(o, "writes")) == 2,
                          "%s written %lld times", k,
                          (long long)json_integer_value(json_object_get(o, "writes")));
    }
    json_decref(doc);
    json_t *after = v2_readings();
    ck_assert_uint_eq(json_object_size(after), want);
    json_object_foreach((json_t *)before, k, o)
    {
        json_t *a = json_object_get(after, k);
        ck_assert_msg(a != NULL, "%s is gone", k);
        char *x = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
        char *y = json_dumps(a, JSON_SORT_KEYS | JSON_COMPACT);
        ck_assert_msg(strcmp(x, y) == 0, "%s changed:\n%s\n%s", k, x, y);
        free(x);
        free(y);
    }
    /* The v2-only data survived (obj-0000 carries extras). */
    const json_t *s0 = json_object_get(json_object_get(after, "bulk/obj-0000"), "spec");
    ck_assert(json_is_true(json_object_get(s0, "paused")));
    ck_assert_uint_eq(json_array_size(json_object_get(s0, "ports")), 2);
    json_decref(after);
}

static bool event_reason(const char *reason)
{
    json_t *list = get("/api/v1/namespaces/default/events");
    bool found = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(list, "items"), i, e)
    {
        if (strcmp(jstr(e, "reason", NULL), reason) == 0 &&
            strcmp(jstr(e, "involvedObject", "kind"), "CustomResourceDefinition") == 0)
            found = true;
    }
    json_decref(list);
    return found;
}

static bool succeeded_event(const void *arg)
{
    (void)arg;
    return event_reason("StorageMigrationSucceeded");
}

/* The reconciler wrote the v2 status of default/NAME (replicas.desired). */
static bool v2_status(const void *arg)
{
    char path[256];
    snprintf(path, sizeof(path), "/apis/mygroup.example.com/v2/namespaces/default/myresources/%s",
             (const char *)arg);
    json_t *o = get(path);
    const json_t *st = json_object_get(o, "status");
    bool ok = json_integer_value(json_object_get(json_object_get(st, "replicas"), "desired")) ==
                  json_integer_value(json_object_get(json_object_get(o, "spec"), "replicas")) &&
              json_array_size(json_object_get(st, "conditions")) > 0 &&
              json_integer_value(json_object_get(st, "observedGeneration")) == 1;
    json_decref(o);
    return ok;
}

/* ---- kubesim -----------------------------------------------------------------------------------
 */

START_TEST(test_migration_kubesim_storage_versions)
{
    start(NULL);
    create_objects("bulk", 3);
    const char *p0 = "/apis/mygroup.example.com/v2/namespaces/bulk/myresources/obj-0000";
    const char *p1 = "/apis/mygroup.example.com/v1/namespaces/bulk/myresources/obj-0001";
    json_t *o0 = get(p0);
    char *o0_body = json_dumps(o0, JSON_COMPACT);
    flip_storage_to_v2();
    /* Nothing was rewritten by the flip. */
    ck_assert_uint_eq(stored_v2(NULL), 0);

    /* A no-op of an object stored as v1 rewrites it as v2 (through v2). */
    json_t *r = api("PUT", p0, o0_body, 200);
    ck_assert_str_ne(jstr(r, "metadata", "resourceVersion"),
                     jstr(o0, "metadata", "resourceVersion"));
    ck_assert_uint_eq(stored_v2(NULL), 1);
    /* The same again writes nothing. */
    char *r_body = json_dumps(r, JSON_COMPACT);
    json_t *r2 = api("PUT", p0, r_body, 200);
    ck_assert_str_eq(jstr(r2, "metadata", "resourceVersion"),
                     jstr(r, "metadata", "resourceVersion"));
    json_decref(r2);
    /* Through v1 too (the webhook converts it to v2 for storage). */
    json_t *o1 = get(p1);
    char *o1_body = json_dumps(o1, JSON_COMPACT);
    json_t *r1 = api("PUT", p1, o1_body, 200);
    ck_assert_str_ne(jstr(r1, "metadata", "resourceVersion"),
                     jstr(o1, "metadata", "resourceVersion"));
    ck_assert_uint_eq(stored_v2(NULL), 2);

    /* A uid that is not the object's: 409. */
    json_t *bad = json_loads(r_body, 0, NULL);
    json_object_set_new(json_object_get(bad, "metadata"), "uid", json_string("0000-not-it"));
    char *bad_body = json_dumps(bad, JSON_COMPACT);
    json_t *st = NULL;
    ck_assert_int_eq(call("PUT", p0, NULL, bad_body, &st), 409);
    ck_assert_ptr_nonnull(strstr(jstr(st, "message", NULL), "Precondition failed: UID"));
    json_decref(st);

    /* storedVersions: not through the main resource, not without the
     * storage version, not empty; only v1 can go, and only via /status. */
    const char *sp = CRD_PATH "/" CRD_NAME "/status";
    ck_assert_int_eq(call("PATCH", sp, "application/merge-patch+json",
                          "{\"status\":{\"storedVersions\":[\"v1\"]}}", NULL),
                     422);
    ck_assert_int_eq(call("PATCH", sp, "application/merge-patch+json",
                          "{\"status\":{\"storedVersions\":[]}}", NULL),
                     422);
    ck_assert_int_eq(call("PATCH", CRD_PATH "/" CRD_NAME, "application/merge-patch+json",
                          "{\"status\":{\"storedVersions\":[\"v2\"]}}", NULL),
                     200);
    ck_assert(!stored_versions_is_v2(NULL));
    /* v1 cannot leave spec.versions while it is a stored version. */
    json_t *crd = get(CRD_PATH "/" CRD_NAME);
    json_array_remove(json_object_get(json_object_get(crd, "spec"), "versions"), 0);
    char *crd_body = json_dumps(crd, JSON_COMPACT);
    ck_assert_int_eq(call("PUT", CRD_PATH "/" CRD_NAME, NULL, crd_body, &st), 422);
    ck_assert_ptr_nonnull(strstr(jstr(st, "message", NULL), "missing from spec.versions"));
    json_decref(st);
    /* With a stale resourceVersion precondition: 409. */
    ck_assert_int_eq(call("PATCH", sp, "application/merge-patch+json",
                          "{\"metadata\":{\"resourceVersion\":\"1\"},\"status\":{"
                          "\"storedVersions\":[\"v2\"]}}",
                          NULL),
                     409);
    ck_assert_int_eq(call("PATCH", sp, "application/merge-patch+json",
                          "{\"status\":{\"storedVersions\":[\"v2\"]}}", NULL),
                     200);
    ck_assert(stored_versions_is_v2(NULL));
    /* Now v1 may leave the spec. */
    json_t *crd2 = get(CRD_PATH "/" CRD_NAME);
    json_array_remove(json_object_get(json_object_get(crd2, "spec"), "versions"), 0);
    char *crd2_body = json_dumps(crd2, JSON_COMPACT);
    ck_assert_int_eq(call("PUT", CRD_PATH "/" CRD_NAME, NULL, crd2_body, NULL), 200);

    free(crd2_body);
    json_decref(crd2);
    free(crd_body);
    json_decref(crd);
    free(bad_body);
    json_decref(bad);
    free(o1_body);
    json_decref(o1);
    json_decref(r1);
    free(r_body);
    json_decref(r);
    free(o0_body);
    json_decref(o0);
}
END_TEST

/* ---- kop ----------------------------------------------------------------------------------------
 */

#define N_BULK 1950
#define N_DEFAULT 50

static int leader_index(void)
{
    for (int i = 0; i < 2; i++)
        if (nodes[i].running &&
            metric(&nodes[i], "leader_election_master_status", "name=\"kop-leader\"") == 1)
            return i;
    return -1;
}

START_TEST(test_migration_self_leader_change_faults)
{
    /* 5% of MyResource updates fail: half 409, half 500. */
    char *faults[] = {"--fault", "update:409:0.025:resource=myresources", "--fault",
                      "update:500:0.025:resource=myresources", NULL};
    start(faults);
    create_objects("bulk", N_BULK);
    create_objects("default", N_DEFAULT);
    json_t *before = v2_readings();
    ck_assert_uint_eq(json_object_size(before), N_BULK + N_DEFAULT);
    flip_storage_to_v2();

    start_node(&nodes[0], true);
    start_node(&nodes[1], true);
    /* Kill the leader once a quarter is done. */
    long end = kop_test_now_ms() + 120000;
    size_t done = 0;
    while ((done = stored_v2(NULL)) < (N_BULK + N_DEFAULT) / 4 && kop_test_now_ms() < end)
        kop_test_sleep_ms(100);
    ck_assert_msg(done >= (N_BULK + N_DEFAULT) / 4, "only %zu stored as v2", done);
    ck_assert_msg(done < N_BULK + N_DEFAULT, "done before the leader change (%zu)", done);
    int li = -1;
    end = kop_test_now_ms() + 10000;
    while ((li = leader_index()) < 0 && kop_test_now_ms() < end)
        kop_test_sleep_ms(50);
    ck_assert_int_ge(li, 0);
    kop_test_stop(&nodes[li].proc, SIGKILL, 5000);
    nodes[li].running = false;
    struct node *survivor = &nodes[1 - li];

    ck_assert_msg(kop_test_eventually(stored_versions_is_v2, NULL, 240000),
                  "storedVersions is not [v2]");
    check_objects(before, N_BULK + N_DEFAULT);
    /* The survivor resumed from the checkpoint rather than from zero. */
    ck_assert_int_gt(kop_test_wait_for(&survivor->proc, 0,
                                       "resuming the storage migration from "
                                       "the checkpoint",
                                       5000, NULL),
                     0);
    ck_assert(metric(survivor, "kop_storage_migration_objects_total", "result=\"migrated\"") > 0);
    ck_assert(metric(survivor, "kop_storage_migration_objects_total", "result=\"conflict\"") > 0);
    ck_assert(metric(survivor, "kop_storage_migration_state", "state=\"succeeded\"") == 1);
    ck_assert_msg(kop_test_eventually(succeeded_event, NULL, 30000), "no Succeeded event");
    /* The reconciler works in v2: the status it writes has the v2 shape. */
    ck_assert_msg(kop_test_eventually(v2_status, "obj-0003", 60000), "no v2 status");
    json_decref(before);
}
END_TEST

static bool svm_succeeded(const void *arg)
{
    (void)arg;
    json_t *list = get("/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations");
    bool ok = false;
    size_t i, j;
    json_t *s, *c;
    json_array_foreach(json_object_get(list, "items"), i, s)
    {
        json_array_foreach(json_object_get(json_object_get(s, "status"), "conditions"), j, c)
        {
            if (strcmp(jstr(c, "type", NULL), "Succeeded") == 0 &&
                strcmp(jstr(c, "status", NULL), "True") == 0)
                ok = true;
        }
    }
    json_decref(list);
    return ok;
}

START_TEST(test_migration_uses_the_api)
{
    /* 5% of kop's reads of the migration and of its status patch fail. */
    char *args[] = {"--feature", "StorageVersionMigrator",
                    "--fault",   "get:500:0.05:resource=storageversionmigrations",
                    "--fault",   "patch:500:0.05:resource=customresourcedefinitions/status",
                    NULL};
    start(args);
    create_objects("bulk", N_BULK);
    create_objects("default", N_DEFAULT);
    json_t *before = v2_readings();
    flip_storage_to_v2();
    start_node(&nodes[0], false);
    ck_assert_msg(kop_test_eventually(stored_versions_is_v2, NULL, 120000),
                  "storedVersions is not [v2]");
    ck_assert(svm_succeeded(NULL));
    check_objects(before, N_BULK + N_DEFAULT);
    ck_assert_int_gt(
        kop_test_wait_for(&nodes[0].proc, 0, "created a StorageVersionMigration", 5000, NULL), 0);
    /* kubesim did the writes, not kop. */
    double mine = metric(&nodes[0], "kop_storage_migration_objects_total", "result=\"migrated\"");
    ck_assert_msg(mine <= 0, "kop rewrote %g objects itself", mine);
    ck_assert(metric(&nodes[0], "kop_storage_migration_state", "state=\"succeeded\"") == 1);
    json_decref(before);
}
END_TEST

/* kubesim's own controller: a migration of an unknown resource fails; one
 * of myresources rewrites every object stored as v1, Running turns False. */
START_TEST(test_migration_kubesim_svm_conditions)
{
    char *feature[] = {"--feature", "StorageVersionMigrator", NULL};
    start(feature);
    create_objects("bulk", 20);
    flip_storage_to_v2();
    const char *svms = "/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations";
    json_t *st = NULL;
    ck_assert_int_eq(call("POST", svms, NULL, "{\"metadata\":{\"name\":\"bad\"},\"spec\":{}}", &st),
                     422);
    json_decref(st);
    json_decref(api("POST", svms,
                    "{\"metadata\":{\"name\":\"nothing\"},\"spec\":{\"resource\":{\"group\":"
                    "\"example.com\",\"resource\":\"nothings\"}}}",
                    201));
    json_decref(api("POST", svms,
                    "{\"metadata\":{\"name\":\"myr\"},\"spec\":{\"resource\":{\"group\":"
                    "\"mygroup.example.com\",\"resource\":\"myresources\"}}}",
                    201));
    ck_assert_msg(kop_test_eventually(svm_succeeded, NULL, 30000), "no Succeeded migration");
    ck_assert_uint_eq(stored_v2(NULL), 20);
    json_t *bad = get("/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations/nothing");
    json_t *good = get("/apis/storagemigration.k8s.io/v1beta1/storageversionmigrations/myr");
    char *b = json_dumps(json_object_get(bad, "status"), JSON_SORT_KEYS | JSON_COMPACT);
    char *g = json_dumps(json_object_get(good, "status"), JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_msg(strstr(b, "\"status\":\"True\",\"type\":\"Failed\"") != NULL, "%s", b);
    ck_assert_msg(strstr(g, "\"status\":\"False\",\"type\":\"Running\"") != NULL, "%s", g);
    ck_assert_msg(strstr(g, "\"status\":\"True\",\"type\":\"Succeeded\"") != NULL, "%s", g);
    ck_assert_msg(strstr(g, "\"resourceVersion\":\"") != NULL, "%s", g);
    /* storedVersions is kop's (or the user's) job, not the migration's. */
    ck_assert(!stored_versions_is_v2(NULL));
    free(b);
    free(g);
    json_decref(bad);
    json_decref(good);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("integration_migration");
    TCase *k = tcase_create("kubesim");
    tcase_add_checked_fixture(k, NULL, teardown);
    tcase_set_timeout(k, 120);
    tcase_add_test(k, test_migration_kubesim_storage_versions);
    suite_add_tcase(s, k);
    TCase *m = tcase_create("migration");
    tcase_add_checked_fixture(m, NULL, teardown);
    tcase_set_timeout(m, 500);
    tcase_add_test(m, test_migration_self_leader_change_faults);
    suite_add_tcase(s, m);
    TCase *a = tcase_create("api");
    tcase_add_checked_fixture(a, NULL, teardown);
    tcase_set_timeout(a, 300);
    tcase_add_test(a, test_migration_kubesim_svm_conditions);
    tcase_add_test(a, test_migration_uses_the_api);
    suite_add_tcase(s, a);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
