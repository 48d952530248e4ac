/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop against kubesim with a kubeconfig whose user is an exec credential
 * plugin (the helper script of tests/data/exec-plugin), as on a laptop
 * against EKS, GKE or AKS: kop authenticates with the plugin's token,
 * reconciles, and when kubesim's token is rotated (the old one answered
 * with 401) it runs the plugin again, once, and goes on reconciling.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "kubetest.h"
#include "testutil.h"

#define NS "default"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define DEP_PATH "/apis/apps/v1/namespaces/" NS "/deployments"

static char *tmpdir;
static char ca_path[1024], kc_path[1024], tok_path[1024], runs_path[1024];
static struct kop_test_kubesim sim;

static void write_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
}

static int helper_runs(void)
{
    char *s = kop_test_read_file(runs_path, NULL);
    int n = 0;
    for (char *p = s; p && *p; p++)
        n += *p == '\n';
    free(s);
    return n;
}

struct dep_arg {
    const char *token;
    const char *name;
};

static bool deployment_exists(const void *arg)
{
    const struct dep_arg *a = arg;
    const struct kop_test_http_options o = {.ca = ca_path, .token = a->token, .attempts = 5};
    char path[256];
    snprintf(path, sizeof(path), DEP_PATH "/%s", a->name);
    json_t *d = kop_test_api_get(&o, sim.url, path);
    json_decref(d);
    return d != NULL;
}

static void create_myresource(const char *token, const char *name)
{
    const struct kop_test_http_options o = {
        .ca = ca_path, .token = token, .ctype = "application/json", .attempts = 5};
    char body[512];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"%s\"},\"spec\":{\"replicas\":1,\"image\":\"nginx:1.14.2\",\"port\":80}}",
             name);
    json_decref(kop_test_api(&o, sim.url, "POST", MYR_PATH, body, 201));
}

START_TEST(test_exec_plugin_kop_authenticates_and_refreshes)
{
    tmpdir = kop_test_tmpdir();
    snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", tmpdir);
    snprintf(kc_path, sizeof(kc_path), "%s/kubeconfig", tmpdir);
    snprintf(tok_path, sizeof(tok_path), "%s/token", tmpdir);
    snprintf(runs_path, sizeof(runs_path), "%s/runs", tmpdir);
    const struct kop_test_kubesim_options so = {.ca = ca_path, .token = "tok-1"};
    kop_test_kubesim_start(&sim, &so);
    const struct kop_test_http_options o1 = {
        .ca = ca_path, .token = "tok-1", .ctype = "application/json", .attempts = 5};
    json_decref(kop_test_api(&o1, sim.url, "POST",
                             "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             kop_test_myresource_crd_no_short, 201));

    /* The kubeconfig names no token: only the plugin has one. */
    write_file(tok_path, "tok-1");
    char *helper = kop_test_data_path("exec-plugin/kop-exec-helper");
    char kc[4096];
    snprintf(kc, sizeof(kc),
             "apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
             "contexts:\n- name: sim\n  context: {cluster: sim, user: plugin, namespace: " NS "}\n"
             "clusters:\n- name: sim\n  cluster:\n    server: %s\n"
             "    certificate-authority: ca.crt\n"
             "users:\n- name: plugin\n  user:\n    exec:\n"
             "      apiVersion: client.authentication.k8s.io/v1\n"
             "      command: %s\n"
             "      args: [token-file, %s]\n"
             "      env:\n      - name: KOP_HELPER_DIR\n        value: %s\n"
             "      interactiveMode: Never\n"
             "      provideClusterInfo: true\n",
             sim.url, helper, tok_path, tmpdir);
    write_file(kc_path, kc);
    free(helper);

    struct kop_test_proc kop;
    struct kop_test_argv a;
    kop_test_kop_argv(&a, kc_path);
    kop_test_argv_add(&a, "--controller-only", NULL);
    ck_assert_int_eq(kop_test_spawn(&kop, a.v), 0);
    ck_assert_msg(kop_test_wait_for(&kop, 0, "\"msg\":\"starting controller\"", 20000, NULL) > 0,
                  "kop did not start");
    create_myresource("tok-1", "first");
    const struct dep_arg first = {"tok-1", "first"};
    ck_assert_msg(kop_test_eventually(deployment_exists, &first, 30000),
                  "kop did not reconcile with the plugin's token");
    /* Three clients (informers, reconciler, events), one plugin run. */
    ck_assert_int_eq(helper_runs(), 1);

    /* Rotate kubesim's token; the plugin now hands out the new one. */
    json_t *r = kop_test_api(&o1, sim.url, "POST", "/_kubesim/token", "{\"token\":\"tok-2\"}", 200);
    json_decref(r);
    write_file(tok_path, "tok-2");
    create_myresource("tok-2", "second");
    const struct dep_arg second = {"tok-2", "second"};
    ck_assert_msg(kop_test_eventually(deployment_exists, &second, 30000),
                  "kop did not reconcile after the token rotation");
    ck_assert(kop_test_wait_for(&kop, 0, "running the plugin again", 10000, NULL) > 0);
    /* However many requests saw the 401, one new run. */
    ck_assert_int_eq(helper_runs(), 2);
    char *out = kop_test_output(&kop);
    ck_assert_ptr_null(strstr(out, "getting credentials"));
    ck_assert_ptr_null(strstr(out, "tok-2")); /* the token is never logged */
    free(out);

    int st = kop_test_stop(&kop, SIGTERM, 20000);
    ck_assert(WIFEXITED(st));
    ck_assert_int_eq(WEXITSTATUS(st), 0);
    kop_test_kubesim_stop(&sim, SIGTERM, 10000);
    kop_test_rmdir(tmpdir);
    free(tmpdir);
}
END_TEST

static Suite *exec_plugin_suite(void)
{
    Suite *s = suite_create("integration_exec_plugin");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_exec_plugin_kop_authenticates_and_refreshes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = kop_test_run(exec_plugin_suite());
    curl_global_cleanup();
    return r;
}
