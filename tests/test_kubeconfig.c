/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kubeconfig and in-cluster configuration: the shapes kubectl
 * writes (block YAML, quoted values, base64 -data fields, JSON), context
 * selection, relative paths, insecure-skip-tls-verify, errors, the
 * $KUBECONFIG / in-cluster / default lookup order, base64, and exec
 * credential plugin stanzas (EKS's shape, v1 and v1beta1 rules, command
 * resolution, the spec.cluster handed to the plugin).
 */
#include "kop/kubeconfig.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kop/log.h"
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

/* As "kind" / kubectl config view --raw write it; key: dev-user's
 * client-key (an absolute path). */
#define KIND_YAML(key)                                                                             \
    "apiVersion: v1\n"                                                                             \
    "clusters:\n"                                                                                  \
    "- cluster:\n"                                                                                 \
    "    certificate-authority-data: " CA_B64 "\n"                                                 \
    "    server: https://127.0.0.1:36443/\n"                                                       \
    "  name: kind-kind\n"                                                                          \
    "- cluster:\n"                                                                                 \
    "    insecure-skip-tls-verify: true\n"                                                         \
    "    server: \"http://localhost:8080\"\n"                                                      \
    "  name: dev\n"                                                                                \
    "contexts:\n"                                                                                  \
    "- context:\n"                                                                                 \
    "    cluster: kind-kind\n"                                                                     \
    "    user: kind-kind\n"                                                                        \
    "  name: kind-kind\n"                                                                          \
    "- context:\n"                                                                                 \
    "    cluster: dev\n"                                                                           \
    "    namespace: 'team-a'\n"                                                                    \
    "    user: dev-user\n"                                                                         \
    "  name: dev\n"                                                                                \
    "current-context: kind-kind\n"                                                                 \
    "kind: Config\n"                                                                               \
    "preferences: {}\n"                                                                            \
    "users:\n"                                                                                     \
    "- name: kind-kind\n"                                                                          \
    "  user:\n"                                                                                    \
    "    client-certificate-data: " CA_B64 "\n"                                                    \
    "    client-key-data: a2V5Cg==\n"                                                              \
    "- name: dev-user\n"                                                                           \
    "  user:\n"                                                                                    \
    "    tokenFile: secrets/token\n"                                                               \
    "    client-certificate: certs/client.crt\n"                                                   \
    "    client-key: " key "\n"

static const char kind_yaml[] = KIND_YAML("/abs/client.key");

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

    /* Another context: relative paths resolve against the file's dir, an
     * absolute one stays. The certificate and key are read at load: they
     * must exist. */
    ck_assert_int_eq(kop_kubeconfig_load_buffer(kind_yaml, strlen(kind_yaml), "/cfg", "dev", &kc),
                     -ENOENT);
    char dir[4200], want[4300], yaml[8192];
    snprintf(dir, sizeof(dir), "%s/certs", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    free(write_tmp("certs/client.crt", CA_PEM));
    free(write_tmp("client.key", "key\n"));
    snprintf(want, sizeof(want), "%s/client.key", tmpdir);
    snprintf(yaml, sizeof(yaml), KIND_YAML("%s"), want);
    ck_assert_int_eq(kop_kubeconfig_load_buffer(yaml, strlen(yaml), tmpdir, "dev", &kc), 0);
    ck_assert_str_eq(kc.server, "http://localhost:8080");
    ck_assert(kc.insecure_skip_tls_verify);
    ck_assert_str_eq(kc.namespace, "team-a");
    ck_assert_str_eq(kc.key_file, want);
    snprintf(want, sizeof(want), "%s/secrets/token", tmpdir);
    ck_assert_str_eq(kc.token_file, want); /* not read for an http:// server */
    snprintf(want, sizeof(want), "%s/certs/client.crt", tmpdir);
    ck_assert_str_eq(kc.cert_file, want);
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
    free(write_tmp("ca.crt", CA_PEM));
    ck_assert_int_eq(kop_kubeconfig_load_buffer(json, strlen(json), tmpdir, NULL, &kc), 0);
    ck_assert_str_eq(kc.server, "https://k:6443");
    char want[4200];
    snprintf(want, sizeof(want), "%s/ca.crt", tmpdir);
    ck_assert_str_eq(kc.ca_file, want);
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
    const char *provider_only = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                                "user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://x'}\n"
                                "users:\n- name: u\n  user:\n    auth-provider:\n      name: gcp\n";
    ck_assert_int_eq(
        kop_kubeconfig_load_buffer(provider_only, strlen(provider_only), NULL, NULL, &kc),
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

#define EXEC_HEAD                                                                                  \
    "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"                 \
    "clusters:\n- name: k\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user:\n"         \
    "    exec:\n"

static int load_exec(const char *exec_lines, struct kop_kubeconfig *kc)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), EXEC_HEAD "%s", exec_lines);
    return kop_kubeconfig_load_buffer(buf, strlen(buf), "/home/u/.kube", NULL, kc);
}

/* EKS's shape (aws eks update-kubeconfig, v1beta1, no interactiveMode). */
static const char eks_yaml[] = "apiVersion: v1\n"
                               "clusters:\n"
                               "- cluster:\n"
                               "    certificate-authority-data: " CA_B64 "\n"
                               "    server: https://ABCD.gr7.eu-west-1.eks.amazonaws.com\n"
                               "    tls-server-name: api.internal\n"
                               "    proxy-url: http://proxy.local:3128\n"
                               "    extensions:\n"
                               "    - name: client.authentication.k8s.io/exec\n"
                               "      extension:\n"
                               "        audience: kop\n"
                               "        retries: 3\n"
                               "        debug: false\n"
                               "        tag: \"007\"\n"
                               "    - name: other\n"
                               "      extension: {a: b}\n"
                               "  name: arn:aws:eks:eu-west-1:1:cluster/demo\n"
                               "contexts:\n"
                               "- context:\n"
                               "    cluster: arn:aws:eks:eu-west-1:1:cluster/demo\n"
                               "    user: arn:aws:eks:eu-west-1:1:cluster/demo\n"
                               "  name: demo\n"
                               "current-context: demo\n"
                               "kind: Config\n"
                               "users:\n"
                               "- name: arn:aws:eks:eu-west-1:1:cluster/demo\n"
                               "  user:\n"
                               "    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      args:\n"
                               "      - --region\n"
                               "      - eu-west-1\n"
                               "      - eks\n"
                               "      - get-token\n"
                               "      - --cluster-name\n"
                               "      - demo\n"
                               "      command: aws\n"
                               "      env:\n"
                               "      - name: AWS_PROFILE\n"
                               "        value: prod\n"
                               "      provideClusterInfo: true\n"
                               "      installHint: install the AWS CLI\n";

START_TEST(test_kubeconfig_exec)
{
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_buffer(eks_yaml, strlen(eks_yaml), NULL, NULL, &kc), 0);
    const struct kop_exec_config *ec = kc.exec;
    ck_assert_ptr_nonnull(ec);
    ck_assert_str_eq(ec->command, "aws"); /* a bare name: looked up in $PATH */
    ck_assert_uint_eq(ec->n_args, 6);
    ck_assert_str_eq(ec->args[0], "--region");
    ck_assert_str_eq(ec->args[5], "demo");
    ck_assert_uint_eq(ec->n_env, 1);
    ck_assert_str_eq(ec->env[0].name, "AWS_PROFILE");
    ck_assert_str_eq(ec->env[0].value, "prod");
    ck_assert_str_eq(ec->api_version, "client.authentication.k8s.io/v1beta1");
    ck_assert_str_eq(ec->install_hint, "install the AWS CLI");
    ck_assert_int_eq(ec->interactive_mode, KOP_EXEC_INTERACTIVE_IF_AVAILABLE); /* v1beta1 */
    ck_assert(ec->provide_cluster_info);
    json_t *want =
        json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:i, s:b, s:s}}", "server",
                  "https://ABCD.gr7.eu-west-1.eks.amazonaws.com", "tls-server-name", "api.internal",
                  "certificate-authority-data", CA_B64, "proxy-url", "http://proxy.local:3128",
                  "config", "audience", "kop", "retries", 3, "debug", 0, "tag", "007");
    char *got_s = json_dumps(ec->cluster, JSON_SORT_KEYS);
    ck_assert_msg(json_equal(ec->cluster, want), "spec.cluster: %s", got_s);
    free(got_s);
    json_decref(want);
    kop_kubeconfig_cleanup(&kc);

    /* v1 with interactiveMode; a relative command with a '/' is resolved
     * against the kubeconfig's directory. */
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: bin/kop-helper\n"
                               "      interactiveMode: Never\n",
                               &kc),
                     0);
    ck_assert_str_eq(kc.exec->command, "/home/u/.kube/bin/kop-helper");
    ck_assert_int_eq(kc.exec->interactive_mode, KOP_EXEC_INTERACTIVE_NEVER);
    ck_assert_uint_eq(kc.exec->n_args, 0);
    ck_assert_ptr_null(kc.exec->cluster); /* no provideClusterInfo */
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: /usr/bin/gke-gcloud-auth-plugin\n"
                               "      interactiveMode: Always\n",
                               &kc),
                     0);
    ck_assert_str_eq(kc.exec->command, "/usr/bin/gke-gcloud-auth-plugin");
    ck_assert_int_eq(kc.exec->interactive_mode, KOP_EXEC_INTERACTIVE_ALWAYS);
    kop_kubeconfig_cleanup(&kc);

    /* client-go's validation. */
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: kubelogin\n",
                               &kc),
                     -EINVAL); /* interactiveMode required in v1 */
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                               "      interactiveMode: Never\n",
                               &kc),
                     -EINVAL);                                               /* no command */
    ck_assert_int_eq(load_exec("      command: kubelogin\n", &kc), -EINVAL); /* no apiVersion */
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: kubelogin\n"
                               "      interactiveMode: Sometimes\n",
                               &kc),
                     -EINVAL);
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      command: kubelogin\n"
                               "      env:\n      - value: x\n",
                               &kc),
                     -EINVAL); /* env entry without a name */
    ck_assert_int_eq(load_exec("      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                               "      command: kubelogin\n",
                               &kc),
                     -ENOTSUP);
}
END_TEST

/* An exec user with provideClusterInfo whose cluster names CA file ca. */
static void ca_kubeconfig(char *buf, size_t n, const char *ca)
{
    snprintf(buf, n,
             "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
             "clusters:\n- name: k\n  cluster: {server: 'https://x', certificate-authority: "
             "%s}\nusers:\n- name: u\n  user:\n    exec:\n"
             "      apiVersion: client.authentication.k8s.io/v1beta1\n"
             "      command: p\n      provideClusterInfo: true\n",
             ca);
}

START_TEST(test_kubeconfig_exec_ca_file)
{
    /* With provideClusterInfo the plugin gets the CA file's bytes. */
    free(write_tmp("ca.crt", CA_PEM));
    char *path = write_tmp("config", "current-context: c\ncontexts:\n- name: c\n  context: "
                                     "{cluster: k, user: u}\nclusters:\n- name: k\n  cluster:\n"
                                     "    server: https://x\n    certificate-authority: ca.crt\n"
                                     "    disable-compression: true\n"
                                     "users:\n- name: u\n  user:\n    exec:\n"
                                     "      apiVersion: client.authentication.k8s.io/v1\n"
                                     "      command: ./helper\n"
                                     "      interactiveMode: IfAvailable\n"
                                     "      provideClusterInfo: true\n");
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_file(path, NULL, &kc), 0);
    ck_assert_str_eq(
        json_string_value(json_object_get(kc.exec->cluster, "certificate-authority-data")), CA_B64);
    ck_assert_ptr_null(json_object_get(kc.exec->cluster, "insecure-skip-tls-verify"));
    ck_assert(json_is_true(json_object_get(kc.exec->cluster, "disable-compression")));
    ck_assert_ptr_null(json_object_get(kc.exec->cluster, "config"));
    char want[4200];
    snprintf(want, sizeof(want), "%s/./helper", tmpdir);
    ck_assert_str_eq(kc.exec->command, want);
    kop_kubeconfig_cleanup(&kc);
    free(path);

    /* insecure-skip-tls-verify (without a CA) goes to the plugin too. */
    const char *insecure = "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, "
                           "user: u}\nclusters:\n- name: k\n  cluster: {server: 'https://x', "
                           "insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user:\n"
                           "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                           "      command: p\n      provideClusterInfo: true\n";
    ck_assert_int_eq(kop_kubeconfig_load_buffer(insecure, strlen(insecure), tmpdir, NULL, &kc), 0);
    ck_assert(json_is_true(json_object_get(kc.exec->cluster, "insecure-skip-tls-verify")));
    kop_kubeconfig_cleanup(&kc);

    /* The CA file cannot be read for the plugin: missing, or a directory. */
    char buf[1024];
    ca_kubeconfig(buf, sizeof(buf), "missing.crt");
    ck_assert_int_eq(kop_kubeconfig_load_buffer(buf, strlen(buf), tmpdir, NULL, &kc), -ENOENT);
    ca_kubeconfig(buf, sizeof(buf), tmpdir);
    ck_assert_int_eq(kop_kubeconfig_load_buffer(buf, strlen(buf), tmpdir, NULL, &kc), -EINVAL);
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
    /* 2. $KUBECONFIG, merged: the first file's entries win */
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
    const char *enc[][2] = {{"", ""},        {"h", "aA=="},         {"he", "aGU="},
                            {"hel", "aGVs"}, {"hello", "aGVsbG8="}, {CA_PEM, CA_B64}};
    for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
        ck_assert_int_eq(kop_base64_encode(enc[i][0], strlen(enc[i][0]), &out), 0);
        ck_assert_str_eq(out, enc[i][1]);
        free(out);
    }
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

/* A FIFO would block open(2) until a writer comes (with the stop signals
 * blocked at start-up: a hang SIGTERM cannot end); a directory is named as
 * such. */
START_TEST(test_kubeconfig_not_a_regular_file)
{
    struct kop_kubeconfig kc;
    char p[4096];
    snprintf(p, sizeof(p), "%s/fifo", tmpdir);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    ck_assert_int_eq(kop_kubeconfig_load_file(p, NULL, &kc), -EINVAL);
    setenv("KUBECONFIG", p, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -EINVAL);
    ck_assert_int_eq(kop_kubeconfig_load_file(tmpdir, NULL, &kc), -EISDIR);
    ck_assert_int_eq(kop_kubeconfig_load_file("/dev/zero", NULL, &kc), -EINVAL);
    /* Files the client reads later: a FIFO there blocked its threads (a
     * CA FIFO hung every informer without a log line). */
    static const char *const fields[] = {
        "clusters:\n- name: k\n  cluster: {server: 'https://x', certificate-authority: fifo}\n",
        "clusters:\n- name: k\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: "
        "{tokenFile: fifo}\n",
        "clusters:\n- name: k\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: "
        "{client-certificate: fifo, client-key: fifo}\n",
        "clusters:\n- name: k\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: "
        "{client-certificate: /etc/hostname, client-key: .}\n"};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        char buf[1024];
        snprintf(buf, sizeof(buf),
                 "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                 "%s%s",
                 fields[i], strstr(fields[i], "users:") ? "" : "users:\n- name: u\n  user: {}\n");
        ck_assert_msg(kop_kubeconfig_load_buffer(buf, strlen(buf), tmpdir, NULL, &kc) == -EINVAL,
                      "%s", fields[i]);
    }
}
END_TEST

static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * n + tl + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < n; i++)
        memcpy(s + hl + i * ul, unit, ul);
    memcpy(s + hl + ul * n, tail, tl + 1);
    return s;
}

/* Inputs on which libyaml's loader does quadratic work: deeply nested flow
 * collections and many anchors. Refused at once (each took minutes). */
START_TEST(test_kubeconfig_hostile_yaml_is_refused_fast)
{
    struct kop_kubeconfig kc;
    char *deep = repeat("a: ", "[", 300000, "");
    ck_assert_int_eq(kop_kubeconfig_load_buffer(deep, strlen(deep), NULL, NULL, &kc), -EINVAL);
    free(deep);
    size_t n = 200000;
    char *anchors = malloc(n * 24 + 64);
    ck_assert_ptr_nonnull(anchors);
    size_t o = (size_t)snprintf(anchors, 64, "l:\n");
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(anchors + o, 24, "- &a%zu x\n", i);
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(anchors + o, 24, "- *a%zu\n", i);
    ck_assert_int_eq(kop_kubeconfig_load_buffer(anchors, o, NULL, NULL, &kc), -EINVAL);
    free(anchors);
    /* 64 levels are still fine. */
    char *ok = repeat("current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
                      "clusters:\n- name: k\n  cluster: {server: 'https://x'}\nx: ",
                      "[", 60, "");
    size_t len = strlen(ok);
    char *full = malloc(len + 61 + 1);
    memcpy(full, ok, len);
    memset(full + len, ']', 60);
    full[len + 60] = '\n';
    full[len + 61] = '\0';
    ck_assert_int_eq(kop_kubeconfig_load_buffer(full, strlen(full), NULL, NULL, &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    free(ok);
    free(full);
}
END_TEST

/* A kubeconfig whose cluster k is cluster (a YAML flow map's members). */
static int load_cluster(const char *cluster, struct kop_kubeconfig *kc)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n"
             "clusters:\n- name: k\n  cluster: {%s}\n",
             cluster);
    return kop_kubeconfig_load_buffer(buf, strlen(buf), tmpdir, NULL, kc);
}

static int load_server(const char *server, struct kop_kubeconfig *kc)
{
    char cluster[1024];
    snprintf(cluster, sizeof(cluster), "server: '%s'", server);
    return load_cluster(cluster, kc);
}

/* The server must be an http(s) URL with a host: a bare "host:port" (for
 * which client-go may pick plain http) or garbage is refused, not handed to
 * libcurl to guess. */
START_TEST(test_kubeconfig_server_must_be_a_url)
{
    struct kop_kubeconfig kc;
    static const char *const bad[] = {
        "garbage",     "localhost:6443", "https://", "https:///api", "ftp://x",
        "https://a b", "https://x\\\\y", "//x",      "https://:443"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(load_server(bad[i], &kc) == -EINVAL, "accepted %s", bad[i]);
    ck_assert_int_eq(load_server("HTTPS://x:6443/", &kc), 0);
    ck_assert_str_eq(kc.server, "HTTPS://x:6443");
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_server("http://[::1]:8080/prefix", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
}
END_TEST

/* KUBERNETES_SERVICE_HOST/PORT go into the URL: garbage is an error, not
 * a URL such as "https://a b:44x". */
START_TEST(test_kubeconfig_in_cluster_garbage_env)
{
    struct kop_kubeconfig kc;
    make_sa(tmpdir, true);
    static const char *const hosts[] = {"a b", "x/y", "h@evil", "h?q", "h#f", "h\n"};
    static const char *const ports[] = {"abc",  "0",    "65536", "99999999999999999999",
                                        "443x", " 443", "-1",    "4 43"};
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
        setenv("KUBERNETES_SERVICE_HOST", hosts[i], 1);
        ck_assert_msg(kop_kubeconfig_in_cluster(tmpdir, &kc) == -EINVAL, "host %s", hosts[i]);
        ck_assert_msg(kop_kubeconfig_load_default(NULL, tmpdir, &kc) == -EINVAL, "host %s",
                      hosts[i]);
    }
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
        setenv("KUBERNETES_SERVICE_PORT", ports[i], 1);
        ck_assert_msg(kop_kubeconfig_in_cluster(tmpdir, &kc) == -EINVAL, "port %s", ports[i]);
    }
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    ck_assert_int_eq(kop_kubeconfig_in_cluster(tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://10.96.0.1:6443");
    kop_kubeconfig_cleanup(&kc);
}
END_TEST

/* Log lines go to tmpdir/log until log_capture_end(), which returns them. */
static int log_capture_start(void)
{
    char p[4200];
    snprintf(p, sizeof(p), "%s/log", tmpdir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, fd);
    return fd;
}

static char *log_capture_end(int fd)
{
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, 2);
    close(fd);
    char p[4200];
    snprintf(p, sizeof(p), "%s/log", tmpdir);
    char *log = kop_test_read_file(p, NULL);
    ck_assert_ptr_nonnull(log);
    return log;
}

/* Every failure is logged with what is wrong and where, not only errno. */
START_TEST(test_kubeconfig_failure_reasons_are_logged)
{
    int fd = log_capture_start();
    struct kop_kubeconfig kc;
    char *a = write_tmp("ctx.yaml", "current-context: nope\ncontexts: []\n");
    char *b = write_tmp("b64.yaml", "current-context: c\ncontexts:\n- name: c\n  context: "
                                    "{cluster: k}\nclusters:\n- name: k\n  cluster: {server: "
                                    "'https://x', certificate-authority-data: '!!'}\n");
    char *c = write_tmp("syntax.yaml", "a: [b\n");
    ck_assert_int_eq(kop_kubeconfig_load_file(a, NULL, &kc), -ENOENT);
    ck_assert_int_eq(kop_kubeconfig_load_file(b, NULL, &kc), -EINVAL);
    ck_assert_int_eq(kop_kubeconfig_load_file(c, NULL, &kc), -EINVAL);
    setenv("HOME", tmpdir, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -ENOENT);
    char *log = log_capture_end(fd);
    ck_assert_ptr_nonnull(strstr(log, "context \\\"nope\\\" not found"));
    ck_assert_ptr_nonnull(strstr(log, "certificate-authority-data is not valid base64"));
    ck_assert_ptr_nonnull(strstr(log, "not valid YAML"));
    ck_assert_ptr_nonnull(strstr(log, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"));
    ck_assert_ptr_nonnull(strstr(log, "syntax.yaml"));
    free(log);
    free(a);
    free(b);
    free(c);
}
END_TEST

/* A kubeconfig whose one user is user (a YAML flow map) is refused. */
static void user_refused(const char *user)
{
    struct kop_kubeconfig kc;
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
             "clusters:\n- name: k\n  cluster: {server: 'https://x'}\n"
             "users:\n- name: u\n  user: %s\n",
             user);
    ck_assert_msg(kop_kubeconfig_load_buffer(buf, strlen(buf), NULL, NULL, &kc) == -EINVAL, "%s",
                  user);
}

/* A token goes into the Authorization header as it is: CR/LF would inject
 * headers ("Bearer x\r\nImpersonate-User: admin"). */
START_TEST(test_kubeconfig_token_control_characters)
{
    static const char *const users[] = {"{token: \"abc\\r\\nImpersonate-User: admin\"}",
                                        "{token: \"a\\tb\"}", "{token: \"a\\x7fb\"}",
                                        "{token: \"a\\0b\"}"};
    for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++)
        user_refused(users[i]);
}
END_TEST

/* A client certificate needs its key and the other way round (client-go's
 * validation); one alone reached libcurl and failed every request. */
START_TEST(test_kubeconfig_cert_needs_key)
{
    static const char *const users[] = {"{client-certificate-data: " CA_B64 "}",
                                        "{client-certificate: /c.crt}", "{client-key: /c.key}",
                                        "{client-key-data: a2V5Cg==, token: t}"};
    for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++)
        user_refused(users[i]);
}
END_TEST

/* kubectl skips empty entries of $KUBECONFIG (":a", "::a"). */
START_TEST(test_kubeconfig_env_list_empty_entries)
{
    struct kop_kubeconfig kc;
    char *a = write_tmp("a.yaml", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: "
                                  "k}\nclusters:\n- name: k\n  cluster: {server: 'https://a'}\n");
    char env[4200];
    snprintf(env, sizeof(env), "::%s:", a);
    setenv("KUBECONFIG", env, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://a");
    kop_kubeconfig_cleanup(&kc);
    setenv("KUBECONFIG", ":::", 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -ENOENT);
    free(a);
}
END_TEST

/* The path tmpdir/name, for files the kubeconfigs below name. */
static void tmp_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", tmpdir, name);
}

/* A $KUBECONFIG list is merged as client-go's ClientConfigLoadingRules.Load
 * merges it: missing and empty entries skipped, the first file to name a
 * cluster, user or context wins, current-context from the first file that
 * sets one, relative paths from each entry's own file; a file that cannot
 * be parsed fails the load; a list that gives nothing falls back to
 * in-cluster, never to ~/.kube/config. */
START_TEST(test_kubeconfig_env_list_merged)
{
    struct kop_kubeconfig kc;
    char p[4200], env[16384];
    tmp_path(p, sizeof(p), "one");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    tmp_path(p, sizeof(p), "two");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    free(write_tmp("one/ca.crt", CA_PEM));
    free(write_tmp("one/token", "t1\n"));
    free(write_tmp("two/c.crt", CA_PEM));
    free(write_tmp("two/c.key", "key\n"));
    char *one = write_tmp("one/config", "current-context: a\n"
                                        "contexts:\n- name: a\n  context: {cluster: shared, "
                                        "user: u1}\n"
                                        "clusters:\n- name: shared\n  cluster: {server: "
                                        "'https://one', certificate-authority: ca.crt}\n"
                                        "users:\n- name: u1\n  user: {tokenFile: token}\n");
    char *two = write_tmp("two/config",
                          "current-context: b\n"
                          "contexts:\n- name: a\n  context: {cluster: dup}\n"
                          "- name: b\n  context: {cluster: shared, user: u2, namespace: ns-b}\n"
                          "clusters:\n- name: shared\n  cluster: {server: 'https://two'}\n"
                          "- name: dup\n  cluster: {server: 'https://dup'}\n"
                          "users:\n- name: u1\n  user: {token: from-two}\n"
                          "- name: u2\n  user: {client-certificate: c.crt, client-key: c.key}\n");
    char *three = write_tmp("three", "current-context: b\n");
    char *empty = write_tmp("empty", "");
    char *bad = write_tmp("bad", "clusters: [\n");

    /* Everything from the first file that names it. */
    snprintf(env, sizeof(env), "%s/missing::%s:%s:%s", tmpdir, empty, one, two);
    setenv("KUBECONFIG", env, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://one");
    tmp_path(p, sizeof(p), "one/ca.crt");
    ck_assert_str_eq(kc.ca_file, p);
    tmp_path(p, sizeof(p), "one/token");
    ck_assert_str_eq(kc.token_file, p);
    ck_assert_ptr_null(kc.token);
    kop_kubeconfig_cleanup(&kc);

    /* current-context from the first file that sets it; its context from
     * the second file, its cluster from the first, its user from the
     * second: each path resolved against the file that named it. */
    snprintf(env, sizeof(env), "%s:%s:%s", three, one, two);
    setenv("KUBECONFIG", env, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://one");
    ck_assert_str_eq(kc.namespace, "ns-b");
    tmp_path(p, sizeof(p), "one/ca.crt");
    ck_assert_str_eq(kc.ca_file, p);
    tmp_path(p, sizeof(p), "two/c.crt");
    ck_assert_str_eq(kc.cert_file, p);
    tmp_path(p, sizeof(p), "two/c.key");
    ck_assert_str_eq(kc.key_file, p);
    ck_assert_ptr_null(kc.token_file);
    kop_kubeconfig_cleanup(&kc);

    /* A file that exists but is not a kubeconfig fails the whole list. */
    snprintf(env, sizeof(env), "%s:%s", one, bad);
    setenv("KUBECONFIG", env, 1);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -EINVAL);

    /* Nothing in the list: in-cluster when possible, else an error;
     * ~/.kube/config is not read while $KUBECONFIG is set. */
    tmp_path(p, sizeof(p), ".kube");
    ck_assert_int_eq(mkdir(p, 0700), 0);
    free(write_tmp(".kube/config", "current-context: c\ncontexts:\n- name: c\n  context: "
                                   "{cluster: k}\nclusters:\n- name: k\n  cluster: {server: "
                                   "'https://home'}\n"));
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    setenv("HOME", tmpdir, 1);
    snprintf(env, sizeof(env), "%s/missing:%s", tmpdir, empty);
    setenv("KUBECONFIG", env, 1);
    int fd = log_capture_start();
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -ENOENT);
    char *log = log_capture_end(fd);
    ck_assert_ptr_nonnull(strstr(log, "invalid configuration: no configuration has been provided"));
    free(log);
    setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    make_sa(tmpdir, false);
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), 0);
    ck_assert_str_eq(kc.server, "https://10.0.0.1:443");
    kop_kubeconfig_cleanup(&kc);
    if (home)
        setenv("HOME", home, 1);
    free(home);
    free(one);
    free(two);
    free(three);
    free(empty);
    free(bad);
}
END_TEST

/* A CA (file or data) together with insecure-skip-tls-verify is refused at
 * load, as client-go refuses it when it builds the transport ("specifying a
 * root certificates file with the insecure flag is not allowed"); it used
 * to be accepted and the flag silently won. */
START_TEST(test_kubeconfig_ca_with_insecure_refused)
{
    struct kop_kubeconfig kc;
    free(write_tmp("ca.crt", CA_PEM));
    ck_assert_int_eq(load_cluster("server: 'https://x', certificate-authority-data: " CA_B64
                                  ", insecure-skip-tls-verify: true",
                                  &kc),
                     -EINVAL);
    ck_assert_int_eq(
        load_cluster(
            "server: 'https://x', certificate-authority: ca.crt, insecure-skip-tls-verify: "
            "true",
            &kc),
        -EINVAL);
    /* Either alone is fine; so is "false"; and an http:// server, whose TLS
     * settings client-go never applies. */
    ck_assert_int_eq(load_cluster("server: 'https://x', insecure-skip-tls-verify: true", &kc), 0);
    ck_assert(kc.insecure_skip_tls_verify);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_cluster("server: 'https://x', certificate-authority: ca.crt", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_cluster("server: 'https://x', certificate-authority: ca.crt, "
                                  "insecure-skip-tls-verify: false",
                                  &kc),
                     0);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_cluster("server: 'http://x', certificate-authority-data: " CA_B64
                                  ", insecure-skip-tls-verify: true",
                                  &kc),
                     0);
    kop_kubeconfig_cleanup(&kc);

    /* The log line carries client-go's words. */
    int fd = log_capture_start();
    char *path = write_tmp("config", "current-context: c\ncontexts:\n- name: c\n  context: "
                                     "{cluster: k}\nclusters:\n- name: k\n  cluster: {server: "
                                     "'https://x', certificate-authority: ca.crt, "
                                     "insecure-skip-tls-verify: true}\n");
    ck_assert_int_eq(kop_kubeconfig_load_file(path, NULL, &kc), -EINVAL);
    char *log = log_capture_end(fd);
    ck_assert_ptr_nonnull(
        strstr(log, "specifying a root certificates file with the insecure flag is not allowed"));
    free(log);
    free(path);
}
END_TEST

/* A kubeconfig whose cluster k has server and whose user u is user. */
static int load_user(const char *server, const char *user, struct kop_kubeconfig *kc)
{
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
             "clusters:\n- name: k\n  cluster: {server: '%s'}\n"
             "users:\n- name: u\n  user: %s\n",
             server, user);
    return kop_kubeconfig_load_buffer(buf, strlen(buf), tmpdir, NULL, kc);
}

/* The files a kubeconfig names are read at load, as client-go reads them
 * (validateClusterInfo, validateAuthInfo; the tokenFile when no token is
 * given, for an https server): a missing CA file fails the start with one
 * line naming it, instead of every request later. */
START_TEST(test_kubeconfig_named_files_are_read_at_load)
{
    struct kop_kubeconfig kc;
    free(write_tmp("ca.crt", CA_PEM));
    free(write_tmp("c.crt", CA_PEM));
    free(write_tmp("c.key", "key\n"));
    free(write_tmp("token", "t\n"));
    ck_assert_int_eq(load_cluster("server: 'https://x', certificate-authority: missing.crt", &kc),
                     -ENOENT);
    ck_assert_int_eq(load_cluster("server: 'http://x', certificate-authority: missing.crt", &kc),
                     -ENOENT);
    ck_assert_int_eq(
        load_user("https://x", "{client-certificate: missing.crt, client-key: c.key}", &kc),
        -ENOENT);
    ck_assert_int_eq(
        load_user("https://x", "{client-certificate: c.crt, client-key: missing.key}", &kc),
        -ENOENT);
    ck_assert_int_eq(load_user("https://x", "{tokenFile: missing}", &kc), -ENOENT);
    /* All there. */
    ck_assert_int_eq(load_cluster("server: 'https://x', certificate-authority: ca.crt", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_user("https://x", "{client-certificate: c.crt, client-key: c.key}", &kc),
                     0);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_user("https://x", "{tokenFile: token}", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    /* client-go does not read the tokenFile when a token is given, nor a
     * user's credentials for a plain http:// server: the file may come
     * later, and the client reads it then. */
    ck_assert_int_eq(load_user("https://x", "{token: t, tokenFile: missing}", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    ck_assert_int_eq(load_user("http://x", "{tokenFile: missing}", &kc), 0);
    kop_kubeconfig_cleanup(&kc);
    /* Present but unreadable (root reads it anyway). */
    if (geteuid() != 0) {
        char p[4200];
        snprintf(p, sizeof(p), "%s/c.key", tmpdir);
        ck_assert_int_eq(chmod(p, 0), 0);
        ck_assert_int_eq(
            load_user("https://x", "{client-certificate: c.crt, client-key: c.key}", &kc), -EACCES);
    }

    /* One log line, with client-go's words and the path. */
    char ca[4200], env[4200];
    snprintf(ca, sizeof(ca), "%s/missing.crt", tmpdir);
    char *path = write_tmp("config", "current-context: c\ncontexts:\n- name: c\n  context: "
                                     "{cluster: k}\nclusters:\n- name: k\n  cluster: {server: "
                                     "'https://x', certificate-authority: missing.crt}\n");
    snprintf(env, sizeof(env), "%s", path);
    setenv("KUBECONFIG", env, 1);
    int fd = log_capture_start();
    ck_assert_int_eq(kop_kubeconfig_load_default(NULL, tmpdir, &kc), -ENOENT);
    char *log = log_capture_end(fd);
    char want[4400];
    snprintf(want, sizeof(want), "unable to read certificate-authority %s for k due to ", ca);
    ck_assert_msg(strstr(log, want) != NULL, "%s", log);
    ck_assert_ptr_nonnull(strchr(log, '\n'));
    ck_assert_ptr_null(strchr(strchr(log, '\n') + 1, '\n'));
    free(log);
    free(path);
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
    tcase_add_test(tc, test_kubeconfig_exec);
    tcase_add_test(tc, test_kubeconfig_exec_ca_file);
    tcase_add_test(tc, test_kubeconfig_not_a_regular_file);
    tcase_add_test(tc, test_kubeconfig_hostile_yaml_is_refused_fast);
    tcase_add_test(tc, test_kubeconfig_server_must_be_a_url);
    tcase_add_test(tc, test_kubeconfig_in_cluster_garbage_env);
    tcase_add_test(tc, test_kubeconfig_failure_reasons_are_logged);
    tcase_add_test(tc, test_kubeconfig_env_list_empty_entries);
    tcase_add_test(tc, test_kubeconfig_env_list_merged);
    tcase_add_test(tc, test_kubeconfig_ca_with_insecure_refused);
    tcase_add_test(tc, test_kubeconfig_named_files_are_read_at_load);
    tcase_add_test(tc, test_kubeconfig_token_control_characters);
    tcase_add_test(tc, test_kubeconfig_cert_needs_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(kubeconfig_suite());
}
