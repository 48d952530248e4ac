/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kubeconfig and in-cluster configuration: the shapes kubectl
 * writes (block YAML, quoted values, base64 -data fields, JSON), context
 * selection, relative paths, insecure-skip-tls-verify, errors, the
 * $KUBECONFIG / in-cluster / default lookup order and base64.
 */
#include "kop/kubeconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static char *tmpdir;

static void setup(void)
{
    tmpdir = kop_test_tmpdir();
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void teardown(void)
{
    kop_test_rmdir(tmpdir);
    free(tmpdir);
}

static char *write_tmp(const char *name, const char *content)
{
    size_t n = strlen(tmpdir) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
    return p;
}

/* "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n" */
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
#define CA_PEM "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"

/* As "kind" / kubectl config view --raw write it. */
static const char kind_yaml[] = "apiVersion: v1\n"
                                "clusters:\n"
                                "- cluster:\n"
                                "    certificate-authority-data: " CA_B64 "\n"
                                "    server: https://127.0.0.1:36443/\n"
                                "  name: kind-kind\n"
                                "- cluster:\n"
                                "    insecure-skip-tls-verify: true\n"
                                "    server: \"http://localhost:8080\"\n"
                                "  name: dev\n"
                                "contexts:\n"
                                "- context:\n"
                                "    cluster: kind-kind\n"
                                "    user: kind-kind\n"
                                "  name: kind-kind\n"
                                "- context:\n"
                                "    cluster: dev\n"
                                "    namespace: 'team-a'\n"
                                "    user: dev-user\n"
                                "  name: dev\n"
                                "current-context: kind-kind\n"
                                "kind: Config\n"
                                "preferences: {}\n"
                                "users:\n"
                                "- name: kind-kind\n"
                                "  user:\n"
                                "    client-certificate-data: " CA_B64 "\n"
                                "    client-key-data: a2V5Cg==\n"
                                "- name: dev-user\n"
                                "  user:\n"
                                "    tokenFile: secrets/token\n"
                                "    client-certificate: certs/client.crt\n"
                                "    client-key: /abs/client.key\n";

START_TEST(test_kubeconfig_kind_shape)
{
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_buffer(kind_yaml, strlen(kind_yaml), "/cfg", NULL, &kc),
                     0);
    ck_assert_str_eq(kc.server, "https://127.0.0.1:36443"); /* trailing '/' dropped */
    ck_assert_uint_eq(kc.ca_data_len, strlen(CA_PEM));
    ck_assert_str_eq(kc.ca_data, CA_PEM);
    ck_assert_str_eq(kc.cert_data, CA_PEM);
    ck_assert_str_eq(kc.key_data, "key\n");
    ck_assert_ptr_null(kc.token);
    ck_assert_ptr_null(kc.namespace);
    ck_assert(!kc.insecure_skip_tls_verify);
    ck_assert(!kc.in_cluster);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_ptr_null(kc.server);

    /* Another context: relative paths resolve against the file's dir. */
    ck_assert_int_eq(kop_kubeconfig_load_buffer(kind_yaml, strlen(kind_yaml), "/cfg", "dev", &kc),
                     0);
    ck_assert_str_eq(kc.server, "http://localhost:8080");
    ck_assert(kc.insecure_skip_tls_verify);
    ck_assert_str_eq(kc.namespace, "team-a");
    ck_assert_str_eq(kc.token_file, "/cfg/secrets/token");
    ck_assert_str_eq(kc.cert_file, "/cfg/certs/client.crt");
    ck_assert_str_eq(kc.key_file, "/abs/client.key");
    kop_kubeconfig_cleanup(&kc);

    ck_assert_int_eq(kop_kubeconfig_load_buffer(kind_yaml, strlen(kind_yaml), "/cfg", "nope", &kc),
                     -ENOENT);
}
END_TEST

START_TEST(test_kubeconfig_json_and_token)
{
    /* JSON is YAML too (kubectl config view -o json). */
    const char *json =
        "{\"kind\":\"Config\",\"apiVersion\":\"v1\",\"current-context\":\"c\","
        "\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://k:6443\","
        "\"certificate-authority\":\"ca.crt\",\"tls-server-name\":\"kubernetes\"}}],"
        "\"contexts\":[{\"name\":\"c\",\"context\":{\"cluster\":\"k\",\"user\":\"u\","
        "\"namespace\":\"ns\"}}],"
        "\"users\":[{\"name\":\"u\",\"user\":{\"token\":\"abc.def\"}}]}";
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_buffer(json, strlen(json), "/d", NULL, &kc), 0);
    ck_assert_str_eq(kc.server, "https://k:6443");
    ck_assert_str_eq(kc.ca_file, "/d/ca.crt");
    ck_assert_str_eq(kc.token, "abc.def");
    ck_assert_str_eq(kc.tls_server_name, "kubernetes");
    ck_assert_str_eq(kc.namespace, "ns");
    kop_kubeconfig_cleanup(&kc);
}
END_TEST

START_TEST(test_kubeconfig_errors)
{
    struct kop_kubeconfig kc;
    const char *bad_yaml = "clusters: [\n  - {";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(bad_yaml, strlen(bad_yaml), NULL, NULL, &kc),
                     -EINVAL);
    const char *no_ctx = "apiVersion: v1\nkind: Config\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(no_ctx, strlen(no_ctx), NULL, NULL, &kc), -ENOENT);
    const char *scalar = "just a string";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(scalar, strlen(scalar), NULL, NULL, &kc), -EINVAL);
    const char *no_server = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                            "clusters:\n- name: k\n  cluster: {}\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(no_server, strlen(no_server), NULL, NULL, &kc),
                     -EINVAL);
    const char *bad_b64 = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                          "clusters:\n- name: k\n  cluster: {server: 'https://x', "
                          "certificate-authority-data: '!!notbase64'}\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(bad_b64, strlen(bad_b64), NULL, NULL, &kc),
                     -EINVAL);
    const char *exec_only = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                            "user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://x'}\n"
                            "users:\n- name: u\n  user:\n    exec:\n      command: gke-auth\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(exec_only, strlen(exec_only), NULL, NULL, &kc),
                     -ENOTSUP);
    const char *missing_user = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                               "user: ghost}\nclusters:\n- name: k\n  cluster: {server: 'h'}\n";
    ck_assert_int_eq(
        kop_kubeconfig_load_buffer(missing_user, strlen(missing_user), NULL, NULL, &kc), -ENOENT);
    /* An alias bomb is bounded, not expanded without limit. */
    const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                       "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                       "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                       "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                       "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(bomb, strlen(bomb), NULL, NULL, &kc), -EINVAL);
    ck_assert_int_eq(kop_kubeconfig_load_file("/nonexistent/kubeconfig", NULL, &kc), -ENOENT);
}
END_TEST

static void make_sa(const char *root, bool with_ns)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/var", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/var/run", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/var/run/secrets", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/var/run/secrets/kubernetes.io", root);
    mkdir(p, 0700);
    snprintf(p, sizeof(p), "%s/var/run/secrets/kubernetes.io/serviceaccount", root);
    mkdir(p, 0700);
    const char *files[] = {"token", "ca.crt", with_ns ? "namespace" : NULL};
    const char *content[] = {"eyJhbGciOi.token\n", CA_PEM, "kop-system\n"};
    for (int i = 0; i < 3 && files[i]; i++) {
        char f[4200];
        snprintf(f, sizeof(f), "%s/%s", p, files[i]);
        FILE *fp = fopen(f, "w");
        ck_assert_ptr_nonnull(fp);
        fputs(content[i], fp);
        fclose(fp);
    }
}

START_TEST(test_kubeconfig_in_cluster)
{
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_in_cluster(tmpdir, &kc), -ENOENT); /* no env */
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    ck_assert_int_eq(kop_kubeconfig_in_cluster(tmpdir, &kc), -ENOENT); /* no token */
    make_sa(tmpdir, true);
    ck_assert_int_eq(kop_kubeconfig_in_cluster(tmpdir, &kc), 0);
    ck_assert(kc.in_cluster);
    ck_assert_str_eq(kc.server, "https://10.96.0.1:443");
    ck_assert_ptr_nonnull(
        strstr(kc.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token"));
    ck_assert_ptr_nonnull(strstr(kc.ca_file, "serviceaccount/ca.crt"));
    ck_assert_str_eq(kc.namespace, "kop-system");
    ck_assert_ptr_null(kc.token); /* read (and re-read) by the client */
    kop_kubeconfig_cleanup(&kc);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    ck_assert_int_eq(kop_kubeconfig_in_cluster(tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://[fd00::1]:443");
    kop_kubeconfig_cleanup(&kc);
}
END_TEST

START_TEST(test_kubeconfig_lookup_order)
{
    struct kop_kubeconfig kc;
    char *a = write_tmp("a.yaml", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: "
                                  "k}\nclusters:\n- name: k\n  cluster: {server: 'https://a'}\n");
    char *b = write_tmp("b.yaml", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: "
                                  "k}\nclusters:\n- name: k\n  cluster: {server: 'https://b'}\n");
    char env[8192];
    snprintf(env, sizeof(env), "%s:%s", b, a);
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    make_sa(tmpdir, false);
    setenv("KUBECONFIG", env, 1);
    /* 1. explicit path wins */
    ck_assert_int_eq(kop_kubeconfig_load_default(a, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://a");
    kop_kubeconfig_cleanup(&kc);
    /* 2. $KUBECONFIG, first file only */
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://b");
    kop_kubeconfig_cleanup(&kc);
    /* 3. in-cluster */
    unsetenv("KUBECONFIG");
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://10.0.0.1:443");
    ck_assert_ptr_null(kc.namespace);
    kop_kubeconfig_cleanup(&kc);
    /* 4. ~/.kube/config */
    unsetenv("KUBERNETES_SERVICE_HOST");
    char kdir[4096];
    snprintf(kdir, sizeof(kdir), "%s/.kube", tmpdir);
    mkdir(kdir, 0700);
    free(write_tmp(".kube/config", "current-context: c\ncontexts:\n- name: c\n  context: "
                                   "{cluster: k}\nclusters:\n- name: k\n  cluster: {server: "
                                   "'https://home'}\n"));
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", tmpdir, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://home");
    kop_kubeconfig_cleanup(&kc);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_kubeconfig_base64)
{
    char *out;
    size_t n;
    ck_assert_int_eq(kop_base64_decode("aGVsbG8=", 8, &out, &n), 0);
    ck_assert_str_eq(out, "hello");
    ck_assert_uint_eq(n, 5);
    free(out);
    ck_assert_int_eq(kop_base64_decode("aGVs\nbG8", 8, &out, &n), 0); /* no padding, newline */
    ck_assert_str_eq(out, "hello");
    free(out);
    ck_assert_int_eq(kop_base64_decode("", 0, &out, &n), 0);
    ck_assert_uint_eq(n, 0);
    free(out);
    ck_assert_int_eq(kop_base64_decode("a$b=", 4, &out, &n), -EINVAL);
    ck_assert_int_eq(kop_base64_decode("ab=c", 4, &out, &n), -EINVAL);
    ck_assert_int_eq(kop_base64_decode("a", 1, &out, &n), -EINVAL);
}
END_TEST

static Suite *kubeconfig_suite(void)
{
    Suite *s = suite_create("kubeconfig");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_kubeconfig_kind_shape);
    tcase_add_test(tc, test_kubeconfig_json_and_token);
    tcase_add_test(tc, test_kubeconfig_errors);
    tcase_add_test(tc, test_kubeconfig_in_cluster);
    tcase_add_test(tc, test_kubeconfig_lookup_order);
    tcase_add_test(tc, test_kubeconfig_base64);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(kubeconfig_suite());
}
