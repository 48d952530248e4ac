/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --self-signed-certs against kubesim: prepare a self-signed pair, serve
 * it with `kop --webhook-only`, apply the shipped manifests (CRD and
 * ValidatingWebhookConfiguration, no caBundle) with kubectl, and inject
 * the CA. Before the injection kubesim cannot verify kop (writes and v2
 * reads fail); afterwards the caBundles equal the generated CA, a second
 * injection writes nothing, and the validating and conversion webhooks
 * work through kubesim's verification against the patched bundles. A
 * rotated pair (new CA) is injected and picked up by kop without restart.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mbedtls/base64.h>

#include "kop/certgen.h"
#include "kop/client.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/selfsigned.h"

static const struct kop_resource crd_res = {"apiextensions.k8s.io", "v1",
                                            "customresourcedefinitions", false};
static const struct kop_resource vwc_res = {"admissionregistration.k8s.io", "v1",
                                            "validatingwebhookconfigurations", false};
static const struct kop_resource myr_v1 = {"mygroup.example.com", "v1", "myresources", true};
static const struct kop_resource myr_v2 = {"mygroup.example.com", "v2", "myresources", true};

static char *tmpdir;
static char certs[1024], kubeconfig[1024];
static struct kop_test_proc kop;
static struct kop_test_kubesim sim;
static bool kop_running, sim_running;
static struct kop_kubeconfig kc;
static struct kop_client *client;

static bool have_kubectl(void)
{
    return system("kubectl version --client >/dev/null 2>&1") == 0;
}

static void setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    kop_log_setup(KOP_LOG_WARN, KOP_LOG_FORMAT_JSON, 2);
    tmpdir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
    snprintf(certs, sizeof(certs), "%s/certs", tmpdir);
    snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", tmpdir);
}

static void teardown(void)
{
    kop_client_free(client);
    client = NULL;
    kop_kubeconfig_cleanup(&kc);
    if (kop_running)
        kop_test_stop(&kop, SIGTERM, 10000);
    if (sim_running)
        kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    kop_running = sim_running = false;
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    curl_global_cleanup();
}

static long start_kop(void)
{
    return kop_test_start_webhook_kop(&kop, &kop_running, certs, 10000);
}

static void start_sim(long kop_port)
{
    char service[128];
    snprintf(service, sizeof(service), "kop-system/kop-webhook-service=127.0.0.1:%ld", kop_port);
    char *args[] = {"--service", service, NULL};
    const struct kop_test_kubesim_options o = {.kubeconfig = kubeconfig, .args = args};
    kop_test_kubesim_start(&sim, &o);
    sim_running = true;
    ck_assert_int_eq(kop_kubeconfig_load_file(kubeconfig, NULL, &kc), 0);
    const struct kop_client_options co = {.config = &kc, .max_retries = -1};
    ck_assert_int_eq(kop_client_new(&co, &client), 0);
}

static void kubectl_apply(const char *manifest)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "kubectl --kubeconfig '%s' --cache-dir '%s/cache' apply -f '%s/manifests/base/%s' "
             ">/dev/null 2>&1",
             kubeconfig, tmpdir, getenv("KOP_SOURCE_ROOT"), manifest);
    ck_assert_msg(system(cmd) == 0, "kubectl apply %s failed", manifest);
}

/* base64 of the ca.crt in the certificate directory (malloc'd). */
static char *expected_bundle(void)
{
    struct kop_certgen_pair p = {0};
    ck_assert_int_eq(kop_certgen_read_dir(certs, &p), 0);
    size_t olen = 0;
    size_t len = strlen(p.ca_pem);
    (void)mbedtls_base64_encode(NULL, 0, &olen, (const unsigned char *)p.ca_pem, len);
    char *b64 = malloc(olen + 1);
    ck_assert_ptr_nonnull(b64);
    ck_assert_int_eq(mbedtls_base64_encode((unsigned char *)b64, olen + 1, &olen,
                                           (const unsigned char *)p.ca_pem, len),
                     0);
    b64[olen] = '\0';
    kop_certgen_pair_cleanup(&p);
    return b64;
}

static json_t *get(const struct kop_resource *res, const char *name)
{
    json_t *obj = NULL;
    struct kop_api_status st = {0};
    int rc = kop_client_get(client, res, NULL, name, &st, &obj);
    ck_assert_msg(rc == 0, "GET %s: %d %s", name, rc, st.message);
    return obj;
}

/* The caBundles now in kubesim, checked against want; resourceVersions out. */
static void check_bundles(const char *want, char *crd_rv, char *vwc_rv, size_t rv_len)
{
    json_t *crd = get(&crd_res, "myresources.mygroup.example.com");
    json_t *cc = json_object_get(
        json_object_get(json_object_get(json_object_get(crd, "spec"), "conversion"), "webhook"),
        "clientConfig");
    ck_assert_str_eq(json_string_value(json_object_get(cc, "caBundle")), want);
    /* The service reference is untouched by the merge patch. */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(cc, "service"), "path")),
                     "/convert");
    snprintf(
        crd_rv, rv_len, "%s",
        json_string_value(json_object_get(json_object_get(crd, "metadata"), "resourceVersion")));
    json_decref(crd);

    json_t *vwc = get(&vwc_res, "kop-validating-webhook");
    json_t *hooks = json_object_get(vwc, "webhooks");
    ck_assert_uint_eq(json_array_size(hooks), 2);
    json_t *hook;
    size_t i;
    json_array_foreach(hooks, i, hook)
    {
        json_t *hcc = json_object_get(hook, "clientConfig");
        ck_assert_str_eq(json_string_value(json_object_get(hcc, "caBundle")), want);
        ck_assert_str_eq(
            json_string_value(json_object_get(json_object_get(hcc, "service"), "path")),
            "/validate-mygroup-example-com-myresource");
        /* Nothing else in the entries was lost by the PUT. */
        ck_assert_str_eq(json_string_value(json_object_get(hook, "failurePolicy")), "Fail");
        ck_assert_uint_eq(json_array_size(json_object_get(hook, "rules")), 1);
    }
    snprintf(
        vwc_rv, rv_len, "%s",
        json_string_value(json_object_get(json_object_get(vwc, "metadata"), "resourceVersion")));
    json_decref(vwc);
}

/* A second entry in the webhook configuration, so "every entry" is tested. */
static void add_second_webhook(void)
{
    json_t *vwc = get(&vwc_res, "kop-validating-webhook");
    json_t *hooks = json_object_get(vwc, "webhooks");
    json_t *copy = json_deep_copy(json_array_get(hooks, 0));
    ck_assert_ptr_nonnull(copy);
    json_object_set_new(copy, "name", json_string("second.mygroup.example.com"));
    json_array_append_new(hooks, copy);
    struct kop_api_status st = {0};
    ck_assert_int_eq(
        kop_client_update(client, &vwc_res, NULL, "kop-validating-webhook", vwc, &st, NULL), 0);
    json_decref(vwc);
}

static int create_seed(const char *name, struct kop_api_status *st)
{
    json_t *obj = json_pack("{s:s, s:s, s:{s:s}, s:{s:i}}", "apiVersion", "mygroup.example.com/v1",
                            "kind", "MyResource", "metadata", "name", name, "spec", "replicas", 3);
    int rc = kop_client_create(client, &myr_v1, "default", obj, st, NULL);
    json_decref(obj);
    return rc;
}

static int read_v2(const char *name, json_t **ret)
{
    struct kop_api_status st = {0};
    return kop_client_get(client, &myr_v2, "default", name, &st, ret);
}

static void expect_v2(const char *name)
{
    json_t *v2 = NULL;
    ck_assert_int_eq(read_v2(name, &v2), 0);
    ck_assert_str_eq(json_string_value(json_object_get(v2, "apiVersion")),
                     "mygroup.example.com/v2");
    json_t *spec = json_object_get(v2, "spec");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(spec, "image"), "repository")), "nginx");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "replicas")), 3);
    json_decref(v2);
}

START_TEST(test_selfsigned_inject_and_serve)
{
    if (!have_kubectl()) {
        fprintf(stderr, "NOTE: kubectl not installed; selfsigned integration skipped\n");
        return;
    }
    const struct kop_selfsigned_options o = {.cert_dir = certs};
    ck_assert_int_eq(kop_selfsigned_prepare(&o), 0);
    long port = start_kop();
    start_sim(port);
    kubectl_apply("crd.yaml");
    kubectl_apply("webhook.yaml");
    add_second_webhook();

    /* No caBundle yet: kubesim cannot verify kop, the webhook call fails. */
    struct kop_api_status st = {0};
    ck_assert_int_lt(create_seed("example-resource", &st), 0);
    ck_assert_int_eq(st.code, 500);
    ck_assert_msg(strstr(st.message, "failed calling webhook") != NULL &&
                      strstr(st.message, "x509: certificate signed by unknown authority") != NULL,
                  "%s", st.message);

    ck_assert_int_eq(kop_selfsigned_inject(client, &o), 0);
    char *want = expected_bundle();
    char crd_rv[64], vwc_rv[64], crd_rv2[64], vwc_rv2[64];
    check_bundles(want, crd_rv, vwc_rv, sizeof(crd_rv));
    /* Injecting again writes nothing. */
    ck_assert_int_eq(kop_selfsigned_inject(client, &o), 0);
    check_bundles(want, crd_rv2, vwc_rv2, sizeof(crd_rv2));
    ck_assert_str_eq(crd_rv, crd_rv2);
    ck_assert_str_eq(vwc_rv, vwc_rv2);

    /* Validating webhook (CREATE) and conversion webhook (v2 read) verify. */
    memset(&st, 0, sizeof(st));
    ck_assert_msg(create_seed("example-resource", &st) == 0, "create: %d %s", st.code, st.message);
    expect_v2("example-resource");

    /* Rotation: a new CA and pair in the directory, injected; kop reloads
     * the files on its own and kubesim trusts only the new CA. */
    const struct kop_selfsigned_options rotate = {.cert_dir = certs,
                                                  .renew_before_s = 400LL * 24 * 3600};
    ck_assert_int_eq(kop_selfsigned_check(&rotate), -EKEYEXPIRED);
    ck_assert_int_eq(kop_selfsigned_prepare(&rotate), 0);
    ck_assert_int_eq(kop_selfsigned_inject(client, &o), 0);
    char *want2 = expected_bundle();
    ck_assert_str_ne(want, want2);
    check_bundles(want2, crd_rv2, vwc_rv2, sizeof(crd_rv2));
    ck_assert_str_ne(crd_rv, crd_rv2);
    long first = kop_test_wait_for(&kop, 0, "serving certificate loaded", 1000, NULL);
    ck_assert_int_gt(first, 0);
    ck_assert_int_gt(
        kop_test_wait_for(&kop, (size_t)first, "serving certificate loaded", 10000, NULL), 0);
    int ok = -1;
    for (int i = 0; i < 100 && ok != 0; i++) {
        json_t *v2 = NULL;
        ok = read_v2("example-resource", &v2);
        json_decref(v2);
        if (ok != 0) {
            struct timespec ts = {0, 100 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    ck_assert_int_eq(ok, 0);
    expect_v2("example-resource");
    free(want);
    free(want2);
}
END_TEST

START_TEST(test_selfsigned_inject_missing_objects)
{
    const struct kop_selfsigned_options o = {.cert_dir = certs};
    ck_assert_int_eq(kop_selfsigned_prepare(&o), 0);
    start_sim(1);
    /* Neither the CRD nor the webhook configuration exists. */
    ck_assert_int_eq(kop_selfsigned_inject(client, &o), -ENOENT);
    /* No ca.crt: nothing to inject. */
    char ca[1100];
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    ck_assert_int_eq(remove(ca), 0);
    ck_assert_int_eq(kop_selfsigned_inject(client, &o), -ENOENT);
}
END_TEST

static Suite *selfsigned_suite(void)
{
    Suite *s = suite_create("selfsigned_integration");
    TCase *tc = tcase_create("selfsigned");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_selfsigned_inject_and_serve);
    tcase_add_test(tc, test_selfsigned_inject_missing_objects);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(selfsigned_suite());
}
