/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim as a webhook client: conversion, mutating and validating admission calls
 * the way the kube-apiserver makes them, and the checks it applies to the
 * replies. First against a small fake webhook (libmicrohttpd with TLS,
 * certificates from scripts/gen-certs.sh) whose answers the test controls,
 * then against `kop --webhook-only` (skipped with a note when the kop
 * binary lacks that flag).
 */
#include "fakehook.h"
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "kubesim-webhook-token"

/* ---- fake webhook ------------------------------------------------------------ */

enum fake_mode { FAKE_OK, FAKE_BAD_UID, FAKE_WRONG_COUNT, FAKE_RENAME, FAKE_LABEL, FAKE_PATCH };

static struct {
    pthread_mutex_t lock;
    enum fake_mode mode;
    int conversions;
    int admissions;
    size_t last_objects;
    char *last_review; /* last AdmissionReview request */
    char *last_path;
    char *last_agent;
    int calls_a, calls_b;    /* mutating webhooks */
    bool bad_patch_type;     /* /mutate-b answers a patch without patchType */
    bool bad_managed_fields; /* /mutate-b also sets managedFields that do not decode */
    char *mutate_a_review;   /* the first AdmissionReview request to /mutate-a */
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Mutating webhooks: /mutate-a records in label seen-b what label b held
 * when it was called; /mutate-b sets b=yes. Both answer a JSONPatch that
 * replaces metadata.labels whole. */
static json_t *fake_mutate(json_t *req, bool is_a)
{
    json_t *request = json_object_get(req, "request");
    const json_t *obj = json_object_get(request, "object");
    const json_t *have = json_object_get(json_object_get(obj, "metadata"), "labels");
    json_t *labels = json_is_object(have) ? json_deep_copy(have) : json_object();
    if (is_a) {
        const char *b = json_string_value(json_object_get(labels, "b"));
        json_object_set_new(labels, "seen-b", json_string(b ? b : "no"));
        fake.calls_a++;
    } else {
        json_object_set_new(labels, "b", json_string("yes"));
        fake.calls_b++;
    }
    json_t *ops =
        json_pack("[{s:s,s:s,s:o}]", "op", "add", "path", "/metadata/labels", "value", labels);
    if (!is_a && fake.bad_managed_fields)
        json_array_append_new(ops, json_pack("{s:s,s:s,s:[{s:s,s:s,s:s,s:s}]}", "op", "add", "path",
                                             "/metadata/managedFields", "value", "manager", "hook",
                                             "operation", "Bogus", "apiVersion", "v1", "fieldsType",
                                             "FieldsV1"));
    char *txt = json_dumps(ops, JSON_COMPACT);
    json_decref(ops);
    char *enc = kop_test_base64(txt, strlen(txt));
    free(txt);
    json_t *resp =
        json_pack("{s:s,s:b,s:s}", "uid", json_string_value(json_object_get(request, "uid")),
                  "allowed", 1, "patch", enc);
    free(enc);
    if (is_a || !fake.bad_patch_type)
        json_object_set_new(resp, "patchType", json_string("JSONPatch"));
    return json_pack("{s:s,s:s,s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
                     "AdmissionReview", "response", resp);
}

static json_t *fake_convert(json_t *req, enum fake_mode mode)
{
    json_t *request = json_object_get(req, "request");
    const char *want = json_string_value(json_object_get(request, "desiredAPIVersion"));
    json_t *objs = json_array();
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(request, "objects"), i, o)
    {
        json_t *c = json_deep_copy(o);
        json_object_set_new(c, "apiVersion", json_string(want));
        json_t *md = json_object_get(c, "metadata");
        if (mode == FAKE_RENAME)
            json_object_set_new(md, "name", json_string("renamed"));
        if (mode == FAKE_LABEL) {
            json_t *l = json_object();
            json_object_set_new(l, "converted", json_string("yes"));
            json_object_set_new(md, "labels", l);
            json_object_set_new(md, "generation", json_integer(99)); /* restored */
        }
        json_array_append_new(objs, c);
    }
    if (mode == FAKE_WRONG_COUNT)
        json_array_clear(objs);
    const char *uid = json_string_value(json_object_get(request, "uid"));
    return json_pack("{s:s,s:s,s:{s:s,s:{s:s},s:o}}", "apiVersion",
                     json_string_value(json_object_get(req, "apiVersion")), "kind",
                     "ConversionReview", "response", "uid", mode == FAKE_BAD_UID ? "nope" : uid,
                     "result", "status", "Success", "convertedObjects", objs);
}

static json_t *fake_validate(json_t *req, enum fake_mode mode)
{
    json_t *request = json_object_get(req, "request");
    const json_t *obj = json_object_get(request, "object");
    json_int_t replicas =
        json_integer_value(json_object_get(json_object_get(obj, "spec"), "replicas"));
    json_t *resp = json_pack("{s:s,s:b}", "uid", json_string_value(json_object_get(request, "uid")),
                             "allowed", replicas <= 10);
    if (replicas > 10)
        json_object_set_new(resp, "status",
                            json_pack("{s:i,s:s,s:s}", "code", 403, "reason", "Forbidden",
                                      "message", "spec.replicas: too many"));
    json_object_set_new(resp, "warnings", json_pack("[s]", "fake warning"));
    if (mode == FAKE_PATCH) {
        json_object_set_new(resp, "patch", json_string("W10="));
        json_object_set_new(resp, "patchType", json_string("JSONPatch"));
    }
    return json_pack("{s:s,s:s,s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
                     "AdmissionReview", "response", resp);
}

static void fake_answer(void *ud, const struct fhook_request *rq, struct fhook_answer *ans)
{
    (void)ud;
    json_t *req = rq->len ? json_loads(rq->body, 0, NULL) : NULL;
    const char *timeout = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "timeout");
    const char *agent = fhook_header(rq, "User-Agent");
    json_t *out = NULL;
    pthread_mutex_lock(&fake.lock);
    enum fake_mode mode = fake.mode;
    free(fake.last_path);
    free(fake.last_agent);
    size_t n = strlen(rq->url) + 32;
    fake.last_path = malloc(n);
    snprintf(fake.last_path, n, "%s?timeout=%s", rq->url, timeout ? timeout : "");
    fake.last_agent = strdup(agent ? agent : "");
    if (strcmp(rq->url, "/convert") == 0) {
        fake.conversions++;
        fake.last_objects =
            json_array_size(json_object_get(json_object_get(req, "request"), "objects"));
        out = fake_convert(req, mode);
    } else if (strncmp(rq->url, "/mutate-", 8) == 0) {
        if (!fake.mutate_a_review && strcmp(rq->url, "/mutate-a") == 0)
            fake.mutate_a_review = strdup(rq->body);
        out = fake_mutate(req, strcmp(rq->url, "/mutate-a") == 0);
    } else {
        fake.admissions++;
        free(fake.last_review);
        fake.last_review = strdup(rq->body);
        out = fake_validate(req, mode);
    }
    pthread_mutex_unlock(&fake.lock);
    ans->body = json_dumps(out, JSON_COMPACT);
    json_decref(out);
    json_decref(req);
}

/* ---- fixture ------------------------------------------------------------------- */

static struct kop_test_kubesim sim;
static struct fhook fake_hook; /* the fake webhook endpoint */
static char *tmpdir;
static char *ca_path;    /* kubesim's CA */
static char *dev_ca_b64; /* webhook CA as caBundle */
static unsigned int fake_port;

/* A second user, from kubesim's --token-auth-file. */
#define ALICE_TOKEN "alice-token"

static struct kop_test_resp request_as(const char *token, const char *method, const char *path,
                                       const char *ctype, const char *body)
{
    const struct kop_test_http_options o = {
        .ca = ca_path, .token = token, .ctype = ctype, .timeout_s = 30};
    return kop_test_api_resp(&o, sim.url, method, path, body);
}

static struct kop_test_resp request(const char *method, const char *path, const char *ctype,
                                    const char *body)
{
    return request_as(TOKEN, method, path, ctype, body);
}

static void expect(const char *method, const char *path, const char *body, long code,
                   const char *needle)
{
    struct kop_test_resp r = request(method, path, NULL, body);
    ck_assert_msg(r.code == code, "%s %s: %ld (want %ld): %s", method, path, r.code, code, r.body);
    if (needle)
        ck_assert_msg(strstr(r.body, needle) != NULL, "%s %s: no '%s' in %s", method, path, needle,
                      r.body);
    kop_test_resp_free(&r);
}

static void start_sim(const char *service)
{
    char *tokens = kop_test_path(tmpdir, "tokens.csv");
    FILE *f = fopen(tokens, "w");
    ck_assert_ptr_nonnull(f);
    fputs(ALICE_TOKEN ",alice,u-1,\"dev,qa\"\n", f);
    ck_assert_int_eq(fclose(f), 0);
    char *args[] = {"--service", (char *)service, "--token-auth-file", tokens, NULL};
    const struct kop_test_kubesim_options o = {.ca = ca_path, .token = TOKEN, .args = args};
    kop_test_kubesim_start(&sim, &o);
    free(tokens);
    /* kubesim authorizes by RBAC: alice administers (the bootstrap cluster-admin) */
    struct kop_test_resp r = request(
        "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", NULL,
        "{\"metadata\":{\"name\":\"alice\"},\"roleRef\":{\"apiGroup\":"
        "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"cluster-admin\"},"
        "\"subjects\":[{\"kind\":\"User\",\"name\":\"alice\"}]}");
    ck_assert_msg(r.code == 201, "binding alice: %ld %s", r.code, r.body);
    kop_test_resp_free(&r);
}

static void setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tmpdir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
    ca_path = kop_test_path(tmpdir, "kubesim-ca.pem");
    char *certs = kop_test_path(tmpdir, "certs");
    struct kop_test_certs dev;
    kop_test_certs_make(&dev, certs);
    dev_ca_b64 = dev.ca_b64; /* caBundle, freed by the teardown */
    dev.ca_b64 = NULL;
    fhook_start(&fake_hook, dev.crt_pem, dev.key_pem, 0, fake_answer, NULL);
    fake_port = fake_hook.port;
    char service[128];
    snprintf(service, sizeof(service), "kop-system/kop-webhook-service=127.0.0.1:%u", fake_port);
    start_sim(service);
    fake.mode = FAKE_OK;
    fake.conversions = fake.admissions = 0;
    fake.calls_a = fake.calls_b = 0;
    fake.bad_patch_type = false;
    fake.bad_managed_fields = false;
    kop_test_certs_free(&dev);
    free(certs);
}

static void teardown(void)
{
    kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    fhook_free(&fake_hook);
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    free(ca_path);
    free(dev_ca_b64);
    free(fake.last_review);
    free(fake.last_path);
    free(fake.last_agent);
    free(fake.mutate_a_review);
    fake.last_review = fake.last_path = fake.last_agent = fake.mutate_a_review = NULL;
    curl_global_cleanup();
}

/* A two-version CRD with webhook conversion, and a validating webhook. */
static void install_widgets(const char *failure_policy)
{
    char *crd = NULL, *vwc = NULL;
    int n = asprintf(
        &crd,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"widgets.test.example.com\"},\"spec\":{\"group\":"
        "\"test.example.com\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","
        "\"kind\":\"Widget\"},\"scope\":\"Namespaced\",\"conversion\":{\"strategy\":\"Webhook\","
        "\"webhook\":{\"conversionReviewVersions\":[\"v1\",\"v1beta1\"],\"clientConfig\":{"
        "\"caBundle\":\"%s\",\"service\":{\"namespace\":\"kop-system\",\"name\":"
        "\"kop-webhook-service\",\"path\":\"/convert\",\"port\":443}}}},\"versions\":[{\"name\":"
        "\"v1\",\"served\":true,\"storage\":true,\"schema\":{\"openAPIV3Schema\":{\"type\":"
        "\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}},{\"name\":\"v2\",\"served\":"
        "true,\"storage\":false,\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\","
        "\"x-kubernetes-preserve-unknown-fields\":true}}}]}}",
        dev_ca_b64);
    ck_assert_int_gt(n, 0);
    n = asprintf(&vwc,
                 "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
                 "\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"widgets\"},"
                 "\"webhooks\":[{\"name\":\"vwidget.test.example.com\",\"admissionReviewVersions\":"
                 "[\"v1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"%s\",\"timeoutSeconds\":5,"
                 "\"matchPolicy\":\"Equivalent\",\"clientConfig\":{\"caBundle\":\"%s\","
                 "\"service\":{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\","
                 "\"path\":\"/validate\",\"port\":443}},\"rules\":[{\"apiGroups\":["
                 "\"test.example.com\"],\"apiVersions\":[\"v2\"],\"operations\":[\"CREATE\","
                 "\"UPDATE\"],\"resources\":[\"widgets\"]}],\"namespaceSelector\":{"
                 "\"matchExpressions\":[{\"key\":\"kubernetes.io/metadata.name\",\"operator\":"
                 "\"NotIn\",\"values\":[\"kube-system\"]}]}}]}",
                 failure_policy, dev_ca_b64);
    ck_assert_int_gt(n, 0);
    expect("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, 201, NULL);
    expect("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", vwc,
           201, NULL);
    free(crd);
    free(vwc);
}

static const char widget_v1[] = "{\"apiVersion\":\"test.example.com/v1\",\"kind\":\"Widget\","
                                "\"metadata\":{\"name\":\"w1\"},\"spec\":{\"replicas\":1}}";

START_TEST(test_kubesim_webhooks_conversion_on_read_and_list)
{
    install_widgets("Fail");
    expect("POST", "/apis/test.example.com/v1/namespaces/default/widgets", widget_v1, 201,
           "\"apiVersion\":\"test.example.com/v1\"");
    /* Only the admission call needed v2 (matchPolicy Equivalent); storing v1 did not. */
    ck_assert_int_eq(fake.conversions, 1);
    expect("GET", "/apis/test.example.com/v1/namespaces/default/widgets/w1", NULL, 200, NULL);
    ck_assert_int_eq(fake.conversions, 1);
    expect("GET", "/apis/test.example.com/v2/namespaces/default/widgets/w1", NULL, 200,
           "\"apiVersion\":\"test.example.com/v2\"");
    ck_assert_int_eq(fake.conversions, 2);
    ck_assert_str_eq(fake.last_path, "/convert?timeout=30s");
    ck_assert_str_eq(fake.last_agent, "kube-apiserver-admission");
    for (int i = 2; i <= 3; i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"w%d\"},\"spec\":{}}", i);
        expect("POST", "/apis/test.example.com/v1/namespaces/default/widgets", body, 201, NULL);
    }
    int before = fake.conversions;
    expect("GET", "/apis/test.example.com/v2/namespaces/default/widgets", NULL, 200,
           "\"kind\":\"WidgetList\"");
    ck_assert_int_eq(fake.conversions, before + 1); /* one review per LIST */
    ck_assert_int_eq((int)fake.last_objects, 3);
}
END_TEST

START_TEST(test_kubesim_webhooks_conversion_reply_checks)
{
    install_widgets("Fail");
    expect("POST", "/apis/test.example.com/v1/namespaces/default/widgets", widget_v1, 201, NULL);
    const char *path = "/apis/test.example.com/v2/namespaces/default/widgets/w1";
    fake.mode = FAKE_BAD_UID;
    expect("GET", path, NULL, 500,
           "conversion webhook for test.example.com/v1, Kind=Widget failed: expected "
           "response.uid=");
    fake.mode = FAKE_WRONG_COUNT;
    expect("GET", path, NULL, 500,
           "conversion webhook for test.example.com/v1, Kind=Widget returned 0 objects, "
           "expected 1");
    fake.mode = FAKE_RENAME;
    expect("GET", path, NULL, 500, "must have the same name: w1 != renamed");
    fake.mode = FAKE_LABEL; /* labels may change; other metadata is restored */
    struct kop_test_resp r = request("GET", path, NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"converted\":\"yes\""));
    ck_assert_ptr_null(strstr(r.body, "\"generation\":99")); /* metadata restored */
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubesim_webhooks_admission)
{
    install_widgets("Fail");
    /* v1 is not in the rule: matchPolicy Equivalent converts to v2 first. */
    expect("POST", "/apis/test.example.com/v1/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"big\"},\"spec\":{\"replicas\":50}}", 403,
           "\"message\":\"admission webhook \\\"vwidget.test.example.com\\\" denied the request: "
           "spec.replicas: too many\",\"reason\":\"Forbidden\"");
    ck_assert_int_eq(fake.admissions, 1);
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"kind\":{\"group\":\"test.example.com\","
                                                   "\"version\":\"v2\",\"kind\":\"Widget\"}"));
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"requestKind\":{\"group\":"
                                                   "\"test.example.com\",\"version\":\"v1\""));
    ck_assert_str_eq(fake.last_path, "/validate?timeout=5s");
    struct kop_test_resp r =
        request("POST", "/apis/test.example.com/v2/namespaces/default/widgets", NULL,
                "{\"metadata\":{\"name\":\"ok\"},\"spec\":{\"replicas\":2}}");
    ck_assert_int_eq(r.code, 201);
    ck_assert_ptr_nonnull(strstr(r.headers, "Warning: 299 - \"fake warning\""));
    kop_test_resp_free(&r);
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"operation\":\"CREATE\""));
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"oldObject\":null"));
    /* userInfo is the requester: here --token's user, as kubeadm's admin.conf
     * authenticates; below a user of the static token file. */
    ck_assert_ptr_nonnull(strstr(fake.last_review,
                                 "\"userInfo\":{\"username\":\"kubernetes-admin\",\"groups\":["
                                 "\"kubeadm:cluster-admins\",\"system:authenticated\"]}"));
    r = request_as(ALICE_TOKEN, "POST", "/apis/test.example.com/v2/namespaces/default/widgets",
                   NULL, "{\"metadata\":{\"name\":\"by-alice\"},\"spec\":{\"replicas\":1}}");
    ck_assert_int_eq(r.code, 201);
    kop_test_resp_free(&r);
    ck_assert_ptr_nonnull(strstr(fake.last_review,
                                 "\"userInfo\":{\"username\":\"alice\",\"uid\":\"u-1\","
                                 "\"groups\":[\"dev\",\"qa\",\"system:authenticated\"]}"));
    /* UPDATE carries oldObject; dryRun is passed on and nothing is stored. */
    r = request("PATCH", "/apis/test.example.com/v2/namespaces/default/widgets/ok?dryRun=All",
                "application/merge-patch+json", "{\"spec\":{\"replicas\":3}}");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"operation\":\"UPDATE\""));
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"dryRun\":true"));
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"oldObject\":{"));
    expect("GET", "/apis/test.example.com/v2/namespaces/default/widgets/ok", NULL, 200,
           "\"replicas\":2");
    /* kube-system is excluded by the namespaceSelector. */
    int before = fake.admissions;
    expect("POST", "/apis/test.example.com/v2/namespaces/kube-system/widgets",
           "{\"metadata\":{\"name\":\"sys\"},\"spec\":{\"replicas\":50}}", 201, NULL);
    ck_assert_int_eq(fake.admissions, before);
    /* A validating webhook may not patch. */
    fake.mode = FAKE_PATCH;
    expect("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"p\"},\"spec\":{}}", 500,
           "Internal error occurred: failed calling webhook \\\"vwidget.test.example.com\\\": "
           "received invalid webhook response: validating webhook may not return a patch");
}
END_TEST

START_TEST(test_kubesim_webhooks_down)
{
    install_widgets("Fail");
    expect("POST", "/apis/test.example.com/v1/namespaces/default/widgets", widget_v1, 201, NULL);
    fhook_stop(&fake_hook);
    expect("GET", "/apis/test.example.com/v2/namespaces/default/widgets/w1", NULL, 500,
           "conversion webhook for test.example.com/v1, Kind=Widget failed: Post "
           "\\\"https://kop-webhook-service.kop-system.svc:443/convert?timeout=30s\\\": dial tcp");
    expect("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"x\"},\"spec\":{}}", 500,
           "failed calling webhook \\\"vwidget.test.example.com\\\": failed to call webhook: Post");
}
END_TEST

START_TEST(test_kubesim_webhooks_ignore_policy)
{
    install_widgets("Ignore");
    fake.mode = FAKE_PATCH; /* an invalid reply is ignored under Ignore */
    expect("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"x\"},\"spec\":{}}", 201, NULL);
}
END_TEST

/* Two MutatingWebhookConfigurations: "a-first" (webhook A, reinvocation
 * policy as given) and "b-second" (webhook B, failurePolicy as given). */
static void install_mutators(const char *reinvocation, const char *b_failure)
{
    static const char *const names[] = {"a-first", "b-second"};
    static const char *const paths[] = {"/mutate-a", "/mutate-b"};
    for (int i = 0; i < 2; i++) {
        char *mwc = NULL;
        int n =
            asprintf(&mwc,
                     "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
                     "\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"%s\"},"
                     "\"webhooks\":[{\"name\":\"%s.test.example.com\",\"admissionReviewVersions\":"
                     "[\"v1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"%s\","
                     "\"reinvocationPolicy\":\"%s\",\"clientConfig\":{\"caBundle\":\"%s\","
                     "\"service\":{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\","
                     "\"path\":\"%s\",\"port\":443}},\"rules\":[{\"apiGroups\":["
                     "\"test.example.com\"],\"apiVersions\":[\"v2\"],\"operations\":[\"CREATE\"],"
                     "\"resources\":[\"widgets\"]}]}]}",
                     names[i], names[i], i == 1 ? b_failure : "Fail",
                     i == 0 ? reinvocation : "Never", dev_ca_b64, paths[i]);
        ck_assert_int_gt(n, 0);
        expect("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", mwc,
               201, NULL);
        free(mwc);
    }
}

START_TEST(test_kubesim_webhooks_mutating_reinvocation)
{
    install_widgets("Fail");
    install_mutators("IfNeeded", "Fail");
    struct kop_test_resp r =
        request("POST", "/apis/test.example.com/v1/namespaces/default/widgets", NULL,
                "{\"metadata\":{\"name\":\"m1\"},\"spec\":{\"replicas\":1}}");
    ck_assert_int_eq(r.code, 201);
    /* A ran, B changed the object, A ran again and saw B's label. */
    ck_assert_ptr_nonnull(strstr(r.body, "\"b\":\"yes\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"seen-b\":\"yes\""));
    kop_test_resp_free(&r);
    ck_assert_int_eq(fake.calls_a, 2);
    ck_assert_int_eq(fake.calls_b, 1);
    /* The validating webhook ran after the mutating ones and saw their output. */
    ck_assert_ptr_nonnull(strstr(fake.last_review, "\"seen-b\":\"yes\""));
    /* The mutation was stored. */
    expect("GET", "/apis/test.example.com/v1/namespaces/default/widgets/m1", NULL, 200,
           "\"seen-b\":\"yes\"");
    /* UPDATE is not in the mutating rules: no call. */
    r = request("PATCH", "/apis/test.example.com/v2/namespaces/default/widgets/m1",
                "application/merge-patch+json", "{\"spec\":{\"replicas\":3}}");
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);
    ck_assert_int_eq(fake.calls_a, 2);
}
END_TEST

START_TEST(test_kubesim_webhooks_mutating_never)
{
    install_widgets("Fail");
    install_mutators("Never", "Fail");
    expect("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"m2\"},\"spec\":{}}", 201, "\"seen-b\":\"no\"");
    ck_assert_int_eq(fake.calls_a, 1);
    ck_assert_int_eq(fake.calls_b, 1);
}
END_TEST

/* managedFields a mutating webhook leaves that do not decode are put
 * back as they were before admission, with a warning (apiserver
 * fieldmanager/admission.go, managedFieldsValidatingAdmissionController). */
START_TEST(test_kubesim_webhooks_mutating_managed_fields)
{
    install_widgets("Fail");
    install_mutators("Never", "Fail");
    fake.bad_managed_fields = true;
    struct kop_test_resp r =
        request("POST", "/apis/test.example.com/v2/namespaces/default/widgets?fieldManager=maker",
                NULL, "{\"metadata\":{\"name\":\"mf\"},\"spec\":{}}");
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    ck_assert_msg(strstr(r.headers, "Warning: 299 - \".metadata.managedFields was in an invalid "
                                    "state after admission; this could be caused by an outdated "
                                    "mutating admission controller; please fix your requests: "
                                    "operation must be `Apply` or `Update`\""),
                  "%s", r.headers);
    json_t *w = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    const json_t *mf = json_object_get(json_object_get(w, "metadata"), "managedFields");
    ck_assert_uint_eq(json_array_size(mf), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(mf, 0), "manager")), "maker");
    json_decref(w);
}
END_TEST

/* A generateName create is named by the registry's create (store.go
 * Store.create), after mutating admission and before validating admission
 * (create.go; rest.AdmissionToValidateObjectFunc): mutating webhooks see
 * neither a name in the object nor one in the request (omitempty), the
 * validating webhook sees the generated one in both. */
START_TEST(test_kubesim_webhooks_generate_name)
{
    install_widgets("Fail");
    install_mutators("Never", "Fail");
    struct kop_test_resp r =
        request("POST", "/apis/test.example.com/v2/namespaces/default/widgets", NULL,
                "{\"metadata\":{\"generateName\":\"gen-\"},\"spec\":{}}");
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    json_t *w = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    const char *name = json_string_value(json_object_get(json_object_get(w, "metadata"), "name"));
    ck_assert_ptr_nonnull(name);
    ck_assert_int_eq(strncmp(name, "gen-", 4), 0);
    ck_assert_uint_eq(strlen(name), 9);

    ck_assert_ptr_nonnull(fake.mutate_a_review);
    json_t *m = json_loads(fake.mutate_a_review, 0, NULL);
    const json_t *mreq = json_object_get(m, "request");
    ck_assert_ptr_null(json_object_get(mreq, "name"));
    const json_t *mmd = json_object_get(json_object_get(mreq, "object"), "metadata");
    ck_assert_ptr_null(json_object_get(mmd, "name"));
    ck_assert_str_eq(json_string_value(json_object_get(mmd, "generateName")), "gen-");
    json_decref(m);

    json_t *v = json_loads(fake.last_review, 0, NULL);
    const json_t *vreq = json_object_get(v, "request");
    ck_assert_str_eq(json_string_value(json_object_get(vreq, "name")), name);
    const json_t *vmd = json_object_get(json_object_get(vreq, "object"), "metadata");
    ck_assert_str_eq(json_string_value(json_object_get(vmd, "name")), name);
    json_decref(v);
    json_decref(w);
}
END_TEST

START_TEST(test_kubesim_webhooks_mutating_reply_checks)
{
    install_widgets("Fail");
    install_mutators("IfNeeded", "Fail");
    fake.bad_patch_type = true;
    expect("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
           "{\"metadata\":{\"name\":\"m3\"},\"spec\":{}}", 500,
           "failed calling webhook \\\"b-second.test.example.com\\\": received invalid webhook "
           "response: webhook returned response.patch but not response.patchType");
    expect("GET", "/apis/test.example.com/v2/namespaces/default/widgets/m3", NULL, 404, NULL);
}
END_TEST

START_TEST(test_kubesim_webhooks_mutating_ignore)
{
    install_widgets("Fail");
    install_mutators("IfNeeded", "Ignore");
    fake.bad_patch_type = true; /* B's bad reply is ignored: A's patch alone applies */
    struct kop_test_resp r = request("POST", "/apis/test.example.com/v2/namespaces/default/widgets",
                                     NULL, "{\"metadata\":{\"name\":\"m4\"},\"spec\":{}}");
    ck_assert_int_eq(r.code, 201);
    ck_assert_ptr_nonnull(strstr(r.body, "\"seen-b\":\"no\""));
    ck_assert_ptr_null(strstr(r.body, "\"b\":\"yes\""));
    kop_test_resp_free(&r);
    ck_assert_int_eq(fake.calls_a, 1); /* nothing changed after A: no reinvocation */
}
END_TEST

/* ---- the configurations' own validation (pkg/apis/admissionregistration/validation) -- */

#define WHC_API "/apis/admissionregistration.k8s.io/v1/"

/* A valid webhook, the base every case below changes. */
static const char base_hook[] =
    "{\"name\":\"v.test.example.com\",\"admissionReviewVersions\":[\"v1\"],\"sideEffects\":"
    "\"None\",\"clientConfig\":{\"url\":\"https://hook.example.com/validate\"},\"rules\":[{"
    "\"apiGroups\":[\"\"],\"apiVersions\":[\"v1\"],\"operations\":[\"CREATE\"],\"resources\":["
    "\"configmaps\"]}]}";

/* base_hook with change's members set (null: removed). @ref new */
static json_t *hook_with(const char *change)
{
    json_t *hook = json_loads(base_hook, 0, NULL);
    json_t *c = json_loads(change, 0, NULL);
    ck_assert_msg(hook && json_is_object(c), "bad test JSON: %s", change);
    const char *k;
    json_t *v;
    json_object_foreach(c, k, v)
    {
        if (json_is_null(v))
            json_object_del(hook, k);
        else
            json_object_set(hook, k, v);
    }
    json_decref(c);
    return hook;
}

/* A configuration named name of kind ("Validating" or "Mutating") with
 * hooks (@ref steal), as JSON text. malloc'd */
static char *whc_body(const char *kind, const char *name, json_t *hooks)
{
    char *k = NULL;
    ck_assert_int_gt(asprintf(&k, "%sWebhookConfiguration", kind), 0);
    json_t *obj =
        json_pack("{s:s,s:s,s:{s:s},s:o}", "apiVersion", "admissionregistration.k8s.io/v1", "kind",
                  k, "metadata", "name", name, "webhooks", hooks);
    free(k);
    char *txt = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return txt;
}

static const char *whc_path(const char *kind)
{
    return strcmp(kind, "Validating") == 0 ? WHC_API "validatingwebhookconfigurations"
                                           : WHC_API "mutatingwebhookconfigurations";
}

/* Send body (method to path) and want a 422 whose causes are exactly want
 * ("field: message", NULL-terminated), in order, each with its reason. */
static void expect_causes(const char *method, const char *path, const char *body,
                          const char *const *want)
{
    struct kop_test_resp r = request(method, path, NULL, body);
    kop_test_assert_causes(r.code, r.body, want);
    kop_test_resp_free(&r);
}

/* A configuration of one webhook (base_hook changed by change) refused
 * with want. */
static void expect_hook_refused(const char *kind, const char *change, const char *const *want)
{
    char *body = whc_body(kind, "bad", json_pack("[o]", hook_with(change)));
    expect_causes("POST", whc_path(kind), body, want);
    free(body);
}

#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char url_form[] = "; desired format: https://host[/path]";

START_TEST(test_kubesim_webhooks_config_valid)
{
    /* Every member set, both client config forms. */
    json_t *hooks = json_pack(
        "[o,o]",
        hook_with("{\"name\":\"url.test.example.com\",\"admissionReviewVersions\":[\"v1beta1\","
                  "\"v1\",\"v2alpha1\"],\"sideEffects\":\"NoneOnDryRun\",\"failurePolicy\":"
                  "\"Ignore\",\"matchPolicy\":\"Exact\",\"timeoutSeconds\":30,\"clientConfig\":{"
                  "\"url\":\"https://hook.example.com:8443/a/b\",\"caBundle\":\"AAEC\"},"
                  "\"rules\":[{\"apiGroups\":[\"*\"],\"apiVersions\":[\"*\"],\"operations\":["
                  "\"*\"],\"resources\":[\"*/*\"],\"scope\":\"Cluster\"},{\"apiGroups\":[\"\","
                  "\"apps\"],\"apiVersions\":[\"v1\"],\"operations\":[\"CREATE\",\"UPDATE\","
                  "\"DELETE\",\"CONNECT\"],\"resources\":[\"pods\",\"pods/*\",\"*/status\"],"
                  "\"scope\":\"Namespaced\"}],\"namespaceSelector\":{\"matchLabels\":{"
                  "\"team\":\"a\"},\"matchExpressions\":[{\"key\":\"env\",\"operator\":\"In\","
                  "\"values\":[\"prod\",\"\"]}]},\"objectSelector\":{\"matchExpressions\":[{"
                  "\"key\":\"example.com/skip\",\"operator\":\"DoesNotExist\"}]},"
                  "\"matchConditions\":[{\"name\":\"not-leases\",\"expression\":"
                  "\"request.resource.resource != 'leases'\"},{\"name\":\"example.com/two\","
                  "\"expression\":\"true\"}]}"),
        hook_with("{\"name\":\"svc.test.example.com\",\"clientConfig\":{\"service\":{"
                  "\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"path\":"
                  "\"/validate-x/v1\",\"port\":8443}}}"));
    char *body = whc_body("Validating", "all-valid", hooks);
    expect("POST", whc_path("Validating"), body, 201, NULL);
    free(body);

    /* The v1 defaults are stored (SetDefaults_MutatingWebhook, _Rule, _ServiceReference). */
    hooks = json_pack("[o]", hook_with("{\"clientConfig\":{\"service\":{\"namespace\":\"n\","
                                       "\"name\":\"s\"}}}"));
    body = whc_body("Mutating", "defaults", hooks);
    expect("POST", whc_path("Mutating"), body, 201, NULL);
    free(body);
    struct kop_test_resp r =
        request("GET", WHC_API "mutatingwebhookconfigurations/defaults", NULL, NULL);
    ck_assert_int_eq(r.code, 200);
    json_t *obj = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    json_t *hook = json_array_get(json_object_get(obj, "webhooks"), 0);
    json_t *want = json_pack("{s:s,s:s,s:{},s:{},s:i,s:s}", "failurePolicy", "Fail", "matchPolicy",
                             "Equivalent", "namespaceSelector", "objectSelector", "timeoutSeconds",
                             10, "reinvocationPolicy", "Never");
    const char *k;
    json_t *v;
    json_object_foreach(want, k, v)
    {
        ck_assert_msg(json_equal(json_object_get(hook, k), v), "default of %s", k);
    }
    json_decref(want);
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_object_get(json_object_get(hook, "clientConfig"), "service"), "port")),
        443);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(hook, "rules"), 0), "scope")),
                     "*");
    json_decref(obj);
}
END_TEST

START_TEST(test_kubesim_webhooks_config_names)
{
    expect_hook_refused("Validating", "{\"name\":\"nodots\"}",
                        WANT("webhooks[0].name: Invalid value: \"nodots\": should be a domain "
                             "with at least three segments separated by dots"));
    expect_hook_refused("Mutating", "{\"name\":\"two.parts\"}",
                        WANT("webhooks[0].name: Invalid value: \"two.parts\": should be a domain "
                             "with at least three segments separated by dots"));
    expect_hook_refused(
        "Validating", "{\"name\":\"Hook.example.com\"}",
        WANT("webhooks[0].name: Invalid value: \"Hook.example.com\": a lowercase RFC 1123 "
             "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
    expect_hook_refused("Validating", "{\"name\":\"\"}", WANT("webhooks[0].name: Required value"));
    /* the example of the brief: every error in one 422 */
    expect_hook_refused(
        "Validating",
        "{\"name\":\"nodots\",\"clientConfig\":{\"url\":\"http://x\"},"
        "\"sideEffects\":\"Some\"}",
        WANT("webhooks[0].name: Invalid value: \"nodots\": should be a domain with at least "
             "three segments separated by dots",
             "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", "
             "\"NoneOnDryRun\"",
             "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only "
             "allowed URL scheme; desired format: https://host[/path]"));
    /* duplicate names: after the webhook's own errors and its versions' */
    json_t *hooks =
        json_pack("[o,o,o]", hook_with("{}"), hook_with("{\"name\":\"w.test.example.com\"}"),
                  hook_with("{\"admissionReviewVersions\":[]}"));
    char *body = whc_body("Validating", "dup", hooks);
    expect_causes("POST", whc_path("Validating"), body,
                  WANT("webhooks[2].admissionReviewVersions: Required value: must specify one of "
                       "v1, v1beta1",
                       "webhooks[2].name: Duplicate value: \"v.test.example.com\""));
    free(body);
}
END_TEST

START_TEST(test_kubesim_webhooks_config_client)
{
    static char want[6][256];
    snprintf(want[0], sizeof(want[0]),
             "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only "
             "allowed URL scheme%s",
             url_form);
    expect_hook_refused("Validating", "{\"clientConfig\":{\"url\":\"http://hook.example.com/\"}}",
                        WANT(want[0]));
    expect_hook_refused("Mutating",
                        "{\"clientConfig\":{\"url\":\"https://hook.example.com/v?a=b\"}}",
                        WANT("webhooks[0].clientConfig.url: Invalid value: \"a=b\": query "
                             "parameters are not permitted in the URL"));
    snprintf(want[1], sizeof(want[1]),
             "webhooks[0].clientConfig.url: Invalid value: \"\": host must be specified%s",
             url_form);
    expect_hook_refused("Validating", "{\"clientConfig\":{\"url\":\"https:///v\"}}", WANT(want[1]));
    snprintf(want[2], sizeof(want[2]),
             "webhooks[0].clientConfig.url: Required value: url must be a valid URL: parse "
             "\"https://hook:port/\": invalid port \":port\" after host%s",
             url_form);
    expect_hook_refused("Validating", "{\"clientConfig\":{\"url\":\"https://hook:port/\"}}",
                        WANT(want[2]));
    expect_hook_refused("Validating",
                        "{\"clientConfig\":{\"url\":\"https://u@hook.example.com/#frag\"}}",
                        WANT("webhooks[0].clientConfig.url: Invalid value: \"u\": user "
                             "information is not permitted in the URL",
                             "webhooks[0].clientConfig.url: Invalid value: \"frag\": fragments "
                             "are not permitted in the URL"));
    expect_hook_refused("Validating",
                        "{\"clientConfig\":{\"url\":\"https://hook.example.com/\",\"service\":{"
                        "\"namespace\":\"n\",\"name\":\"s\"}}}",
                        WANT("webhooks[0].clientConfig: Required value: exactly one of url or "
                             "service is required"));
    expect_hook_refused("Mutating", "{\"clientConfig\":{\"caBundle\":\"AAEC\"}}",
                        WANT("webhooks[0].clientConfig: Required value: exactly one of url or "
                             "service is required"));
    expect_hook_refused(
        "Validating",
        "{\"clientConfig\":{\"service\":{\"namespace\":\"n\",\"name\":\"s\",\"path\":"
        "\"/a//B_\"}}}",
        WANT("webhooks[0].clientConfig.service.path: Invalid value: \"/a//B_\": segment[1] may "
             "not be empty",
             "webhooks[0].clientConfig.service.path: Invalid value: \"/a//B_\": segment[2]: a "
             "lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
             "'-' or '.', and must start and end with an alphanumeric character (e.g. "
             "'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"));
    expect_hook_refused("Validating",
                        "{\"clientConfig\":{\"service\":{\"path\":\"validate\",\"port\":0}}}",
                        WANT("webhooks[0].clientConfig.service.name: Required value",
                             "webhooks[0].clientConfig.service.namespace: Required value",
                             "webhooks[0].clientConfig.service.port: Invalid value: 0: port is "
                             "not valid: must be between 1 and 65535, inclusive",
                             "webhooks[0].clientConfig.service.path: Invalid value: \"validate\": "
                             "must start with a '/'"));
}
END_TEST

START_TEST(test_kubesim_webhooks_config_policies)
{
    expect_hook_refused("Validating", "{\"sideEffects\":\"Some\"}",
                        WANT("webhooks[0].sideEffects: Unsupported value: \"Some\": supported "
                             "values: \"None\", \"NoneOnDryRun\""));
    expect_hook_refused("Mutating", "{\"sideEffects\":null}",
                        WANT("webhooks[0].sideEffects: Required value: must specify one of None, "
                             "NoneOnDryRun"));
    expect_hook_refused("Validating", "{\"timeoutSeconds\":31}",
                        WANT("webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value "
                             "must be between 1 and 30 seconds"));
    expect_hook_refused("Mutating", "{\"timeoutSeconds\":0}",
                        WANT("webhooks[0].timeoutSeconds: Invalid value: 0: the timeout value "
                             "must be between 1 and 30 seconds"));
    expect_hook_refused("Validating", "{\"failurePolicy\":\"Retry\",\"matchPolicy\":\"exact\"}",
                        WANT("webhooks[0].failurePolicy: Unsupported value: \"Retry\": supported "
                             "values: \"Fail\", \"Ignore\"",
                             "webhooks[0].matchPolicy: Unsupported value: \"exact\": supported "
                             "values: \"Equivalent\", \"Exact\""));
    expect_hook_refused("Mutating", "{\"reinvocationPolicy\":\"Always\"}",
                        WANT("webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": "
                             "supported values: \"IfNeeded\", \"Never\""));
    /* admissionReviewVersions */
    expect_hook_refused("Validating", "{\"admissionReviewVersions\":[]}",
                        WANT("webhooks[0].admissionReviewVersions: Required value: must specify "
                             "one of v1, v1beta1"));
    expect_hook_refused("Validating", "{\"admissionReviewVersions\":[\"v2\",\"v3\"]}",
                        WANT("webhooks[0].admissionReviewVersions: Invalid value: "
                             "[]string{\"v2\", \"v3\"}: must include at least one of v1, v1beta1"));
    expect_hook_refused(
        "Mutating", "{\"admissionReviewVersions\":[\"v1\",\"v1\",\"V1beta1\"]}",
        WANT("webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version",
             "webhooks[0].admissionReviewVersions[2]: Invalid value: \"V1beta1\": a DNS-1035 "
             "label must consist of lower case alphanumeric characters or '-', start with an "
             "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
             "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"));
    /* selectors */
    expect_hook_refused(
        "Validating",
        "{\"objectSelector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\","
        "\"values\":[\"x\"]}]},\"namespaceSelector\":{\"matchExpressions\":[{\"key\":\"a\","
        "\"operator\":\"In\",\"values\":[\"not valid\"]}]}}",
        WANT("webhooks[0].namespaceSelector.matchExpressions[0].values[0]: Invalid value: \"not "
             "valid\": a valid label must be an empty string or consist of alphanumeric "
             "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
             "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
             "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
             "webhooks[0].objectSelector.matchExpressions[0].values: Forbidden: may not be "
             "specified when `operator` is 'Exists' or 'DoesNotExist'"));
}
END_TEST

START_TEST(test_kubesim_webhooks_config_rules)
{
    expect_hook_refused(
        "Validating",
        "{\"rules\":[{\"apiGroups\":[],\"apiVersions\":[],\"operations\":[],\"resources\":[]}]}",
        WANT("webhooks[0].rules[0].operations: Required value",
             "webhooks[0].rules[0].apiGroups: Required value",
             "webhooks[0].rules[0].apiVersions: Required value",
             "webhooks[0].rules[0].resources: Required value"));
    expect_hook_refused(
        "Mutating",
        "{\"rules\":[{\"apiGroups\":[\"*\",\"apps\"],\"apiVersions\":[\"v1\",\"*\",\"\"],"
        "\"operations\":[\"CREATE\",\"*\",\"PATCH\"],\"resources\":[\"pods\",\"\"],"
        "\"scope\":\"Global\"}]}",
        WANT("webhooks[0].rules[0].operations: Invalid value: "
             "[]admissionregistration.OperationType{\"CREATE\", \"*\", \"PATCH\"}: if "
             "'*' is present, must not specify other operations",
             "webhooks[0].rules[0].operations[2]: Unsupported value: \"PATCH\": supported values: "
             "\"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
             "webhooks[0].rules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is "
             "present, "
             "must not specify other API groups",
             "webhooks[0].rules[0].apiVersions: Invalid value: []string{\"v1\", \"*\", \"\"}: if "
             "'*' is "
             "present, must not specify other API versions",
             "webhooks[0].rules[0].apiVersions[2]: Required value",
             "webhooks[0].rules[0].resources[1]: Required value",
             "webhooks[0].rules[0].scope: Unsupported value: \"Global\": supported values: \"*\", "
             "\"Cluster\", \"Namespaced\""));
    /* validateResources' wildcard rules */
    expect_hook_refused(
        "Validating",
        "{\"rules\":[{\"apiGroups\":[\"\"],\"apiVersions\":[\"v1\"],\"operations\":[\"*\"],"
        "\"resources\":[\"*/*\",\"pods/*\",\"pods/log\",\"*/status\",\"deployments/status\"]}]}",
        WANT("webhooks[0].rules[0].resources[1]: Invalid value: \"pods/*\": if '*/*' is present, "
             "must not specify pods/*",
             "webhooks[0].rules[0].resources[2]: Invalid value: \"pods/log\": if 'pods/*' is "
             "present, must not specify pods/log",
             "webhooks[0].rules[0].resources[3]: Invalid value: \"*/status\": if '*/*' is "
             "present, must not specify */status",
             "webhooks[0].rules[0].resources[4]: Invalid value: \"deployments/status\": if "
             "'*/status' is present, must not specify deployments/status",
             "webhooks[0].rules[0].resources: Invalid value: []string{\"*/*\", \"pods/*\", "
             "\"pods/log\", \"*/status\", \"deployments/status\"}: if '*/*' is present, must not "
             "specify other "
             "resources"));
    expect_hook_refused(
        "Validating",
        "{\"rules\":[{\"apiGroups\":[\"\"],\"apiVersions\":[\"v1\"],\"operations\":[\"*\"],"
        "\"resources\":[\"*\",\"pods\"]}]}",
        WANT("webhooks[0].rules[0].resources: Invalid value: []string{\"*\", \"pods\"}: if '*' is "
             "present, must not specify other resources without subresources"));
    /* matchConditions, without CEL */
    expect_hook_refused("Validating",
                        "{\"matchConditions\":[{\"name\":\"a\",\"expression\":\" \\n\"},{\"name\":"
                        "\"a\",\"expression\":\"true\"},{\"name\":\"-bad-\",\"expression\":"
                        "\"true\"},{\"expression\":\"true\"}]}",
                        WANT("webhooks[0].matchConditions[0].expression: Required value",
                             "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
                             "webhooks[0].matchConditions[2].name: Invalid value: \"-bad-\": name "
                             "part must consist of alphanumeric characters, '-', '_' or '.', and "
                             "must start and end with an alphanumeric character (e.g. 'MyName',  "
                             "or 'my.name',  or '123-abc', regex used for validation is "
                             "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                             "webhooks[0].matchConditions[3].name: Required value"));
    json_t *conds = json_array();
    for (int i = 0; i < 65; i++)
        json_array_append_new(conds, json_pack("{s:s,s:s}", "name", "c", "expression", "true"));
    json_t *hook = hook_with("{}");
    json_object_set_new(hook, "matchConditions", conds);
    char *body = whc_body("Validating", "many", json_pack("[o]", hook));
    struct kop_test_resp r = request("POST", whc_path("Validating"), NULL, body);
    ck_assert_int_eq(r.code, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "\"message\":\"Too many: 65: must have at most 64 items\","
                                         "\"field\":\"webhooks[0].matchConditions\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"reason\":\"FieldValueTooMany\""));
    kop_test_resp_free(&r);
    free(body);
}
END_TEST

START_TEST(test_kubesim_webhooks_config_update)
{
    char *body = whc_body("Validating", "upd", json_pack("[o]", hook_with("{}")));
    expect("POST", whc_path("Validating"), body, 201, NULL);
    free(body);
    /* The old webhooks all said None: an update may not say Some either. */
    const char *path = WHC_API "validatingwebhookconfigurations/upd";
    struct kop_test_resp r = request("PATCH", path, "application/json-patch+json",
                                     "[{\"op\":\"replace\",\"path\":\"/webhooks/0/sideEffects\","
                                     "\"value\":\"Some\"}]");
    ck_assert_msg(r.code == 422, "%ld %s", r.code, r.body);
    ck_assert_ptr_nonnull(strstr(
        r.body, "\"message\":\"ValidatingWebhookConfiguration.admissionregistration.k8s.io "
                "\\\"upd\\\" is invalid: webhooks[0].sideEffects: Unsupported value: \\\"Some\\\": "
                "supported values: \\\"None\\\", \\\"NoneOnDryRun\\\"\""));
    kop_test_resp_free(&r);
    /* A second webhook of the same name is refused on update too. */
    body = whc_body("Validating", "upd", json_pack("[o,o]", hook_with("{}"), hook_with("{}")));
    expect_causes("PUT", path, body,
                  WANT("webhooks[1].name: Duplicate value: \"v.test.example.com\""));
    free(body);
    /* A valid change is stored and its defaults with it. */
    r = request("PATCH", path, "application/json-patch+json",
                "[{\"op\":\"replace\",\"path\":\"/webhooks/0/timeoutSeconds\",\"value\":7}]");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "\"timeoutSeconds\":7"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"failurePolicy\":\"Fail\""));
    kop_test_resp_free(&r);
    /* A strategic merge patch merges webhooks by name (patchMergeKey), as
     * helm upgrade's patch of a caBundle does; it replaced the list, and
     * the webhook lost its other members. */
    r = request("PATCH", path, "application/strategic-merge-patch+json",
                "{\"webhooks\":[{\"name\":\"v.test.example.com\",\"clientConfig\":{"
                "\"caBundle\":\"AAEC\"}}]}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "\"caBundle\":\"AAEC\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"url\":\"https://hook.example.com/validate\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"sideEffects\":\"None\""));
    kop_test_resp_free(&r);
}
END_TEST

/* ---- against kop --webhook-only ----------------------------------------------------- */

static bool kop_has_webhook_only(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "'%s' --help 2>&1 | grep -q -- --webhook-only", kop_test_bin("kop"));
    return system(cmd) == 0;
}

START_TEST(test_kubesim_webhooks_kop)
{
    if (!kop_has_webhook_only()) {
        fprintf(stderr, "NOTE: kop lacks --webhook-only; kop-based webhook cases skipped\n");
        return;
    }
    /* Reuse the fixture's certificates for kop; point kubesim at kop. */
    kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    fhook_stop(&fake_hook);
    char *certs = kop_test_path(tmpdir, "certs");
    struct kop_test_proc kop;
    long port = kop_test_start_webhook_kop(&kop, NULL, certs, 10000);
    char service[128];
    snprintf(service, sizeof(service), "kop-system/kop-webhook-service=127.0.0.1:%ld", port);
    start_sim(service);

    char *crd = NULL, *vwc = NULL;
    int n = asprintf(
        &crd,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"myresources.mygroup.example.com\"},\"spec\":{\"group\":"
        "\"mygroup.example.com\",\"names\":{\"plural\":\"myresources\",\"singular\":"
        "\"myresource\",\"kind\":\"MyResource\",\"shortNames\":[\"myr\"]},\"scope\":"
        "\"Namespaced\",\"conversion\":{\"strategy\":\"Webhook\",\"webhook\":{"
        "\"conversionReviewVersions\":[\"v1\",\"v1beta1\"],\"clientConfig\":{\"caBundle\":"
        "\"%s\",\"service\":{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\","
        "\"path\":\"/convert\",\"port\":443}}}},\"versions\":[{\"name\":\"v1\",\"served\":true,"
        "\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{\"openAPIV3Schema\":{"
        "\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\",\"default\":{},"
        "\"properties\":{\"replicas\":{\"type\":\"integer\",\"default\":1},\"image\":{\"type\":"
        "\"string\",\"default\":\"nginx:1.14.2\"},\"port\":{\"type\":\"integer\",\"default\":80},"
        "\"serviceType\":{\"type\":\"string\",\"default\":\"ClusterIP\"}}},\"status\":{\"type\":"
        "\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}}},{\"name\":\"v2\","
        "\"served\":true,\"storage\":false,\"subresources\":{\"status\":{}},\"schema\":{"
        "\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":\"object\","
        "\"x-kubernetes-preserve-unknown-fields\":true},\"status\":{\"type\":\"object\","
        "\"x-kubernetes-preserve-unknown-fields\":true}}}}}]}}",
        dev_ca_b64);
    ck_assert_int_gt(n, 0);
    n = asprintf(&vwc,
                 "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
                 "\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"kop\"},\"webhooks\":"
                 "[{\"name\":\"vmyresource.mygroup.example.com\",\"admissionReviewVersions\":["
                 "\"v1\",\"v1beta1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\","
                 "\"timeoutSeconds\":5,\"matchPolicy\":\"Equivalent\",\"clientConfig\":{"
                 "\"caBundle\":\"%s\",\"service\":{\"namespace\":\"kop-system\",\"name\":"
                 "\"kop-webhook-service\",\"path\":\"/validate-mygroup-example-com-myresource\","
                 "\"port\":443}},\"rules\":[{\"apiGroups\":[\"mygroup.example.com\"],"
                 "\"apiVersions\":[\"v1\",\"v2\"],\"operations\":[\"CREATE\",\"UPDATE\"],"
                 "\"resources\":[\"myresources\"]}]}]}",
                 dev_ca_b64);
    ck_assert_int_gt(n, 0);
    expect("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, 201, NULL);
    expect("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", vwc,
           201, NULL);
    free(crd);
    free(vwc);

    /* The seed example in v1, read back as v2 through kop's converter. */
    expect("POST", "/apis/mygroup.example.com/v1/namespaces/default/myresources",
           "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
           "\"name\":\"example-resource\"},\"spec\":{\"replicas\":3}}",
           201, "\"image\":\"nginx:1.14.2\"");
    struct kop_test_resp r = request(
        "GET", "/apis/mygroup.example.com/v2/namespaces/default/myresources/example-resource", NULL,
        NULL);
    ck_assert_int_eq(r.code, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"apiVersion\":\"mygroup.example.com/v2\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"repository\":\"nginx\""));
    ck_assert_ptr_nonnull(strstr(r.body, "\"tag\":\"1.14.2\""));
    kop_test_resp_free(&r);

    /* Admission denial carries kop's message. */
    expect("POST", "/apis/mygroup.example.com/v2/namespaces/default/myresources",
           "{\"metadata\":{\"name\":\"too-many\"},\"spec\":{\"replicas\":5000}}", 403,
           "admission webhook \\\"vmyresource.mygroup.example.com\\\" denied the request: ");

    /* Webhook down: reads in v2 and writes fail as the apiserver says. */
    kop_test_stop(&kop, SIGTERM, 10000);
    expect("GET", "/apis/mygroup.example.com/v2/namespaces/default/myresources/example-resource",
           NULL, 500, "conversion webhook for mygroup.example.com/v1, Kind=MyResource failed: ");
    expect("POST", "/apis/mygroup.example.com/v1/namespaces/default/myresources",
           "{\"metadata\":{\"name\":\"other\"},\"spec\":{}}", 500,
           "failed calling webhook \\\"vmyresource.mygroup.example.com\\\"");
    free(certs);
}
END_TEST

static Suite *kubesim_webhooks_suite(void)
{
    Suite *s = suite_create("kubesim_webhooks");
    TCase *tc = tcase_create("webhooks");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_kubesim_webhooks_conversion_on_read_and_list);
    tcase_add_test(tc, test_kubesim_webhooks_conversion_reply_checks);
    tcase_add_test(tc, test_kubesim_webhooks_admission);
    tcase_add_test(tc, test_kubesim_webhooks_down);
    tcase_add_test(tc, test_kubesim_webhooks_ignore_policy);
    tcase_add_test(tc, test_kubesim_webhooks_mutating_reinvocation);
    tcase_add_test(tc, test_kubesim_webhooks_mutating_never);
    tcase_add_test(tc, test_kubesim_webhooks_mutating_managed_fields);
    tcase_add_test(tc, test_kubesim_webhooks_generate_name);
    tcase_add_test(tc, test_kubesim_webhooks_mutating_reply_checks);
    tcase_add_test(tc, test_kubesim_webhooks_mutating_ignore);
    tcase_add_test(tc, test_kubesim_webhooks_kop);
    tcase_add_test(tc, test_kubesim_webhooks_config_valid);
    tcase_add_test(tc, test_kubesim_webhooks_config_names);
    tcase_add_test(tc, test_kubesim_webhooks_config_client);
    tcase_add_test(tc, test_kubesim_webhooks_config_policies);
    tcase_add_test(tc, test_kubesim_webhooks_config_rules);
    tcase_add_test(tc, test_kubesim_webhooks_config_update);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(kubesim_webhooks_suite());
}
