/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for exec credential plugins, run for real with the helper script in
 * tests/data/exec-plugin: the token cached until its expirationTimestamp,
 * the environment and KUBERNETES_EXEC_INFO the plugin receives (with and
 * without cluster info), client certificates, invalidation after a 401,
 * one run for many threads, the shared provider, stderr in the log, and the
 * failures (wrong apiVersion, no status, half a key pair, exit status,
 * garbage, missing command, too much output, timeout, interactiveMode
 * Always) with their messages; and the $PATH lookup (a program found
 * through an empty or relative element refused, as Go's exec.ErrDot; a
 * directory of the command's name skipped).
 */
#include "kop/execcred.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kubetest.h"
#include "testutil.h"

static char *tmpdir;
static char *helper;
/* The working directory and $PATH, which the $PATH tests change. */
static char saved_cwd[4096];
static char *saved_path;

static void setup(void)
{
    tmpdir = kop_test_tmpdir();
    helper = kop_test_data_path("exec-plugin/kop-exec-helper");
    ck_assert_ptr_nonnull(getcwd(saved_cwd, sizeof(saved_cwd)));
    const char *path = getenv("PATH");
    saved_path = path ? strdup(path) : NULL;
}

static void teardown(void)
{
    ck_assert_int_eq(chdir(saved_cwd), 0);
    if (saved_path)
        setenv("PATH", saved_path, 1);
    else
        unsetenv("PATH");
    free(saved_path);
    saved_path = NULL;
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    free(helper);
}

/* A configuration for the helper: mode and up to three arguments; the
 * helper records its runs in tmpdir. */
struct cfg {
    struct kop_exec_config ec;
    char *args[4];
    struct kop_exec_env env[2];
};

static void cfg_init(struct cfg *c, const char *api_version, const char *mode, const char *a1,
                     const char *a2)
{
    memset(c, 0, sizeof(*c));
    c->args[0] = (char *)mode;
    c->args[1] = (char *)a1;
    c->args[2] = (char *)a2;
    size_t n = 1;
    while (n < 3 && c->args[n])
        n++;
    c->env[0] = (struct kop_exec_env){.name = (char *)"KOP_HELPER_DIR", .value = tmpdir};
    c->env[1] = (struct kop_exec_env){.name = (char *)"KOP_HELPER_ENV", .value = (char *)"cfg"};
    c->ec = (struct kop_exec_config){.command = helper,
                                     .args = c->args,
                                     .n_args = n,
                                     .env = c->env,
                                     .n_env = 2,
                                     .api_version = (char *)api_version,
                                     .interactive_mode = KOP_EXEC_INTERACTIVE_NEVER};
}

#define V1 "client.authentication.k8s.io/v1"
#define V1BETA1 "client.authentication.k8s.io/v1beta1"

static struct kop_execcred *provider(const struct cfg *c, int64_t timeout_ms, size_t max_output)
{
    const struct kop_execcred_options o = {.timeout_ms = timeout_ms, .max_output = max_output};
    struct kop_execcred *p = NULL;
    ck_assert_int_eq(kop_execcred_get_shared(&c->ec, &o, &p), 0);
    ck_assert_ptr_nonnull(p);
    return p;
}

static char *helper_file(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    return kop_test_read_file(path, NULL);
}

static int64_t t_ms(const char *rfc3339)
{
    int64_t ms = 0;
    ck_assert_int_eq(kop_execcred_parse_time(rfc3339, &ms), 0);
    return ms;
}

START_TEST(test_execcred_token_cached_until_expiry)
{
    setenv("KOP_HELPER_ENV", "parent", 1);      /* the configured value wins */
    setenv("KUBERNETES_EXEC_INFO", "stale", 1); /* replaced, not passed on */
    struct cfg c;
    cfg_init(&c, V1, "token", "tok-a", "2030-01-01T00:00:00Z");
    struct kop_execcred *p = provider(&c, 0, 0);
    struct kop_execcred_cred *cred = NULL;
    char msg[512];
    ck_assert_int_eq(kop_execcred_get(p, t_ms("2029-12-31T23:00:00Z"), &cred, msg, sizeof(msg)), 0);
    ck_assert_str_eq(cred->token, "tok-a");
    ck_assert_ptr_null(cred->cert_data);
    ck_assert_int_eq(cred->expiry_ms, t_ms("2030-01-01T00:00:00Z"));
    kop_execcred_cred_unref(cred);
    ck_assert_uint_eq(kop_execcred_runs(p), 1);
    /* Still valid: the cache answers, no second run. */
    ck_assert_int_eq(kop_execcred_get(p, t_ms("2029-12-31T23:59:59Z"), &cred, NULL, 0), 0);
    kop_execcred_cred_unref(cred);
    ck_assert_uint_eq(kop_execcred_runs(p), 1);
    char *runs = helper_file("runs");
    ck_assert_str_eq(runs, "run\n");
    free(runs);
    /* Expired: the plugin runs again. */
    ck_assert_int_eq(kop_execcred_get(p, t_ms("2030-01-01T00:00:01Z"), &cred, NULL, 0), 0);
    kop_execcred_cred_unref(cred);
    ck_assert_uint_eq(kop_execcred_runs(p), 2);

    char *env = helper_file("env");
    ck_assert_str_eq(env, "cfg");
    free(env);
    char *info = helper_file("exec_info");
    json_t *j = json_loads(info, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "kind")), "ExecCredential");
    ck_assert_str_eq(json_string_value(json_object_get(j, "apiVersion")), V1);
    json_t *spec = json_object_get(j, "spec");
    ck_assert(json_is_false(json_object_get(spec, "interactive")));
    ck_assert_ptr_null(json_object_get(spec, "cluster")); /* no provideClusterInfo */
    json_decref(j);
    free(info);
    kop_execcred_unref(p);
}
END_TEST

START_TEST(test_execcred_cluster_info)
{
    struct cfg c;
    cfg_init(&c, V1BETA1, "token", "tok-b", NULL);
    c.ec.provide_cluster_info = true;
    c.ec.cluster =
        json_pack("{s:s, s:s, s:{s:s, s:i}}", "server", "https://10.0.0.1:6443",
                  "certificate-authority-data", "Q0E=", "config", "audience", "kop", "n", 3);
    struct kop_execcred *p = provider(&c, 0, 0);
    struct kop_execcred_cred *cred = NULL;
    ck_assert_int_eq(kop_execcred_get(p, 0, &cred, NULL, 0), 0);
    ck_assert_str_eq(cred->token, "tok-b");
    ck_assert_int_eq(cred->expiry_ms, 0);
    kop_execcred_cred_unref(cred);
    char *info = helper_file("exec_info");
    json_t *j = json_loads(info, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "apiVersion")), V1BETA1);
    json_t *cl = json_object_get(json_object_get(j, "spec"), "cluster");
    ck_assert(json_equal(cl, c.ec.cluster));
    json_decref(j);
    free(info);
    kop_execcred_unref(p);
    json_decref(c.ec.cluster);
}
END_TEST

static void write_file(const char *name, const char *content)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(content, f);
    fclose(f);
}

#define PEM_CERT "-----BEGIN CERTIFICATE-----\nMIIBcert\n-----END CERTIFICATE-----\n"
#define PEM_KEY "-----BEGIN PRIVATE KEY-----\nMIIBkey\n-----END PRIVATE KEY-----\n"

START_TEST(test_execcred_client_certificate)
{
    write_file("c.pem", PEM_CERT);
    write_file("k.pem", PEM_KEY);
    char cp[4096], kp[4096];
    snprintf(cp, sizeof(cp), "%s/c.pem", tmpdir);
    snprintf(kp, sizeof(kp), "%s/k.pem", tmpdir);
    struct cfg c;
    cfg_init(&c, V1, "cert", cp, kp);
    struct kop_execcred *p = provider(&c, 0, 0);
    struct kop_execcred_cred *cred = NULL;
    ck_assert_int_eq(kop_execcred_get(p, 0, &cred, NULL, 0), 0);
    ck_assert_ptr_null(cred->token);
    ck_assert_str_eq(cred->cert_data, PEM_CERT);
    ck_assert_uint_eq(cred->cert_data_len, strlen(PEM_CERT));
    ck_assert_str_eq(cred->key_data, PEM_KEY);
    kop_execcred_cred_unref(cred);
    kop_execcred_unref(p);
}
END_TEST

START_TEST(test_execcred_invalidate_after_401)
{
    write_file("tok", "tok-1");
    char tp[4096];
    snprintf(tp, sizeof(tp), "%s/tok", tmpdir);
    struct cfg c;
    cfg_init(&c, V1, "token-file", tp, NULL);
    struct kop_execcred *p = provider(&c, 0, 0);
    struct kop_execcred_cred *one = NULL, *two = NULL, *again = NULL;
    ck_assert_int_eq(kop_execcred_get(p, 0, &one, NULL, 0), 0);
    ck_assert_str_eq(one->token, "tok-1");
    write_file("tok", "tok-2");
    /* No expiry: cached until the server rejects it. */
    ck_assert_int_eq(kop_execcred_get(p, 0, &again, NULL, 0), 0);
    ck_assert_ptr_eq(again, one);
    kop_execcred_cred_unref(again);
    kop_execcred_invalidate(p, one);
    ck_assert_int_eq(kop_execcred_get(p, 0, &two, NULL, 0), 0);
    ck_assert_str_eq(two->token, "tok-2");
    ck_assert_uint_eq(kop_execcred_runs(p), 2);
    /* A 401 seen late with the old credential does not refresh again. */
    kop_execcred_invalidate(p, one);
    ck_assert_int_eq(kop_execcred_get(p, 0, &again, NULL, 0), 0);
    ck_assert_ptr_eq(again, two);
    ck_assert_uint_eq(kop_execcred_runs(p), 2);
    /* The old credential stays usable by its holder. */
    ck_assert_str_eq(one->token, "tok-1");
    kop_execcred_cred_unref(one);
    kop_execcred_cred_unref(two);
    kop_execcred_cred_unref(again);
    kop_execcred_unref(p);
}
END_TEST

struct th_arg {
    struct kop_execcred *p;
    int r;
    char token[64];
};

static void *th_get(void *ud)
{
    struct th_arg *a = ud;
    struct kop_execcred_cred *cred = NULL;
    a->r = kop_execcred_get(a->p, 0, &cred, NULL, 0);
    if (a->r == 0) {
        snprintf(a->token, sizeof(a->token), "%s", cred->token);
        kop_execcred_cred_unref(cred);
    }
    return NULL;
}

START_TEST(test_execcred_one_run_for_many_threads)
{
    struct cfg c;
    cfg_init(&c, V1, "token", "tok-mt", NULL);
    struct kop_execcred *p = provider(&c, 0, 0);
    pthread_t th[8];
    struct th_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (struct th_arg){.p = p};
        ck_assert_int_eq(pthread_create(&th[i], NULL, th_get, &a[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].r, 0);
        ck_assert_str_eq(a[i].token, "tok-mt");
    }
    ck_assert_uint_eq(kop_execcred_runs(p), 1);
    char *runs = helper_file("runs");
    ck_assert_str_eq(runs, "run\n");
    free(runs);
    kop_execcred_unref(p);
}
END_TEST

START_TEST(test_execcred_shared_per_config)
{
    struct cfg c1, c2, c3;
    cfg_init(&c1, V1, "token", "x", NULL);
    cfg_init(&c2, V1, "token", "x", NULL);
    cfg_init(&c3, V1, "token", "y", NULL);
    struct kop_execcred *p1 = provider(&c1, 0, 0);
    struct kop_execcred *p2 = provider(&c2, 0, 0);
    struct kop_execcred *p3 = provider(&c3, 0, 0);
    ck_assert_ptr_eq(p1, p2);
    ck_assert_ptr_ne(p1, p3);
    struct kop_execcred_cred *cred = NULL;
    ck_assert_int_eq(kop_execcred_get(p1, 0, &cred, NULL, 0), 0);
    kop_execcred_cred_unref(cred);
    ck_assert_int_eq(kop_execcred_get(p2, 0, &cred, NULL, 0), 0);
    kop_execcred_cred_unref(cred);
    ck_assert_uint_eq(kop_execcred_runs(p2), 1);
    kop_execcred_unref(p1);
    kop_execcred_unref(p2);
    kop_execcred_unref(p3);
}
END_TEST

START_TEST(test_execcred_stderr_logged)
{
    char lp[4096];
    snprintf(lp, sizeof(lp), "%s/log", tmpdir);
    int fd = open(lp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, fd);
    struct cfg c;
    cfg_init(&c, V1, "stderr", "tok-s", NULL);
    struct kop_execcred *p = provider(&c, 0, 0);
    struct kop_execcred_cred *cred = NULL;
    ck_assert_int_eq(kop_execcred_get(p, 0, &cred, NULL, 0), 0);
    ck_assert_str_eq(cred->token, "tok-s");
    kop_execcred_cred_unref(cred);
    kop_execcred_unref(p);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, 2);
    close(fd);
    char *log = kop_test_read_file(lp, NULL);
    ck_assert_ptr_nonnull(log);
    ck_assert_ptr_nonnull(strstr(log, "kop-exec-helper: warning: token from the cache"));
    ck_assert_ptr_nonnull(strstr(log, "exec-plugin"));
    ck_assert_ptr_null(strstr(log, "tok-s")); /* the credential is never logged */
    free(log);
}
END_TEST

/* Run a configuration expected to fail; returns the message. */
static void expect_fail(struct cfg *c, int64_t timeout_ms, size_t max_output, int want,
                        const char *in_msg)
{
    struct kop_execcred *p = provider(c, timeout_ms, max_output);
    struct kop_execcred_cred *cred = NULL;
    char msg[512] = "";
    ck_assert_int_eq(kop_execcred_get(p, 0, &cred, msg, sizeof(msg)), want);
    ck_assert_ptr_null(cred);
    ck_assert_msg(strstr(msg, in_msg), "message \"%s\" lacks \"%s\"", msg, in_msg);
    kop_execcred_unref(p);
}

START_TEST(test_execcred_failures)
{
    struct cfg c;
    cfg_init(&c, V1, "wrong-version", NULL, NULL);
    expect_fail(&c, 0, 0, -EPROTO, "plugin returned version client.authentication.k8s.io/v1alpha1");
    cfg_init(&c, V1, "no-status", NULL, NULL);
    expect_fail(&c, 0, 0, -EBADMSG, "didn't return a status");
    char cp[4096];
    write_file("c.pem", PEM_CERT);
    snprintf(cp, sizeof(cp), "%s/c.pem", tmpdir);
    cfg_init(&c, V1, "cert-only", cp, NULL);
    expect_fail(&c, 0, 0, -EBADMSG, "only certificate or key");
    cfg_init(&c, V1, "fail", NULL, NULL);
    expect_fail(&c, 0, 0, -EIO, "exited with status 3: kop-exec-helper: no credentials for you");
    cfg_init(&c, V1, "garbage", NULL, NULL);
    expect_fail(&c, 0, 0, -EBADMSG, "decoding stdout");
    cfg_init(&c, V1, "token", "bad", "yesterday");
    expect_fail(&c, 0, 0, -EBADMSG, "expirationTimestamp");
    cfg_init(&c, V1, "big", NULL, NULL);
    expect_fail(&c, 0, 4096, -EMSGSIZE, "more than 4096 bytes");
    /* A helper that never finishes is killed (with what it started). */
    cfg_init(&c, V1, "slow", NULL, NULL);
    expect_fail(&c, 300, 0, -ETIMEDOUT, "did not finish within 300 ms");
    cfg_init(&c, V1, "token", "t", NULL);
    c.ec.interactive_mode = KOP_EXEC_INTERACTIVE_ALWAYS;
    expect_fail(&c, 0, 0, -ENOTSUP, "standard input is not a terminal");
    /* A missing command: the install hint is part of the message. */
    cfg_init(&c, V1, "token", "t", NULL);
    c.ec.command = (char *)"kop-no-such-plugin-anywhere";
    c.ec.install_hint = (char *)"install it with: apt-get install kop-plugin";
    expect_fail(&c, 0, 0, -ENOENT, "install it with: apt-get install kop-plugin");
    /* Not executable. */
    write_file("plain", "#!/bin/sh\n");
    char pp[4096];
    snprintf(pp, sizeof(pp), "%s/plain", tmpdir);
    cfg_init(&c, V1, "token", "t", NULL);
    c.ec.command = pp;
    expect_fail(&c, 0, 0, -EACCES, "not executable");
}
END_TEST

/* tmpdir/DIR/kop-dot-plugin: a link to the helper (DIR "": tmpdir). */
static void plugin_in(const char *dir)
{
    char d[4200], link[4300];
    snprintf(d, sizeof(d), "%s/%s", tmpdir, dir);
    if (*dir)
        ck_assert_int_eq(mkdir(d, 0700), 0);
    snprintf(link, sizeof(link), "%s/kop-dot-plugin", d);
    ck_assert_int_eq(symlink(helper, link), 0);
}

/* The token the helper gives when run as command with PATH path. */
static void expect_token(struct cfg *c, const char *command, const char *path)
{
    setenv("PATH", path, 1);
    c->ec.command = (char *)command;
    struct kop_execcred *p = provider(c, 0, 0);
    struct kop_execcred_cred *cred = NULL;
    char msg[512] = "";
    ck_assert_msg(kop_execcred_get(p, 0, &cred, msg, sizeof(msg)) == 0, "%s with PATH %s: %s",
                  command, path, msg);
    ck_assert_str_eq(cred->token, "t-dot");
    kop_execcred_cred_unref(cred);
    kop_execcred_unref(p);
}

/* A bare command name that an empty or relative $PATH element would find
 * runs whatever the working directory holds under that name: refused, as
 * Go >= 1.19's exec.LookPath refuses it (exec.ErrDot) for client-go's
 * exec.Command, also when a later, absolute element has the program too.
 * An absolute element still finds it, and a command with a '/' is taken
 * as written, relative to the working directory too. */
START_TEST(test_execcred_path_relative_refused)
{
    plugin_in("");
    plugin_in("bin");
    ck_assert_int_eq(chdir(tmpdir), 0);
    char abs_bin[4200], later[4300];
    snprintf(abs_bin, sizeof(abs_bin), "%s/bin:/usr/bin:/bin", tmpdir);
    snprintf(later, sizeof(later), ".:%s", abs_bin);
    const char *const refused[] = {
        "bin",            /* relative */
        "./bin:/usr/bin", /* relative */
        ".:/usr/bin:/bin",
        ":/usr/bin:/bin",         /* empty: "." */
        "/usr/bin:/bin:",         /* empty at the end */
        "/nonexistent::/usr/bin", /* empty inside */
        later,                    /* the first element that has it decides */
    };
    struct cfg c;
    cfg_init(&c, V1, "token", "t-dot", NULL);
    c.ec.command = (char *)"kop-dot-plugin";
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        setenv("PATH", refused[i], 1);
        expect_fail(&c, 0, 0, -EPERM,
                    "exec: \"kop-dot-plugin\": cannot run executable found relative to current "
                    "directory");
    }
    char *runs = helper_file("runs");
    ck_assert_msg(runs == NULL, "the plugin ran: %s", runs);
    expect_token(&c, "kop-dot-plugin", abs_bin);
    expect_token(&c, "./bin/kop-dot-plugin", "/usr/bin:/bin");
    expect_token(&c, "bin/kop-dot-plugin", "/usr/bin:/bin");
}
END_TEST

/* A directory of the command's name in an earlier $PATH element is not the
 * command (Go's findExecutable): the search goes on to the program. */
START_TEST(test_execcred_path_directory_skipped)
{
    plugin_in("bin");
    char d[4200], path[8500];
    snprintf(d, sizeof(d), "%s/dir", tmpdir);
    ck_assert_int_eq(mkdir(d, 0700), 0);
    snprintf(d, sizeof(d), "%s/dir/kop-dot-plugin", tmpdir);
    ck_assert_int_eq(mkdir(d, 0700), 0);
    snprintf(path, sizeof(path), "%s/dir:%s/bin:/usr/bin:/bin", tmpdir, tmpdir);
    struct cfg c;
    cfg_init(&c, V1, "token", "t-dot", NULL);
    expect_token(&c, "kop-dot-plugin", path);
}
END_TEST

static double calls(struct kop_metrics *m, const char *code, const char *status)
{
    static const char *const labels[] = {"code", "call_status", NULL};
    struct kop_metric_family *f = kop_metrics_register(
        m, KOP_METRIC_COUNTER, "rest_client_exec_plugin_call_total", "x", labels, NULL, 0);
    return kop_metric_value(kop_metric_child(f, code, status));
}

static int run_with_metrics(struct cfg *c, struct kop_metrics *m, int64_t timeout_ms)
{
    const struct kop_execcred_options o = {.timeout_ms = timeout_ms, .metrics = m};
    struct kop_execcred *p = NULL;
    ck_assert_int_eq(kop_execcred_get_shared(&c->ec, &o, &p), 0);
    struct kop_execcred_cred *cred = NULL;
    int r = kop_execcred_get(p, 0, &cred, NULL, 0);
    kop_execcred_cred_unref(cred);
    kop_execcred_unref(p);
    return r;
}

START_TEST(test_execcred_metrics)
{
    /* rest_client_exec_plugin_call_total as client-go counts it. */
    struct kop_metrics *m = kop_metrics_new(false);
    struct cfg c;
    cfg_init(&c, V1, "token", "t", NULL);
    ck_assert_int_eq(run_with_metrics(&c, m, 0), 0);
    cfg_init(&c, V1, "garbage", NULL, NULL); /* exit 0: no_error, whatever it printed */
    ck_assert_int_eq(run_with_metrics(&c, m, 0), -EBADMSG);
    ck_assert(calls(m, "0", "no_error") == 2);
    cfg_init(&c, V1, "fail", NULL, NULL);
    ck_assert_int_eq(run_with_metrics(&c, m, 0), -EIO);
    ck_assert(calls(m, "3", "plugin_execution_error") == 1);
    cfg_init(&c, V1, "slow", NULL, NULL);
    ck_assert_int_eq(run_with_metrics(&c, m, 200), -ETIMEDOUT);
    ck_assert(calls(m, "-1", "plugin_execution_error") == 1);
    cfg_init(&c, V1, "token", "t", NULL);
    c.ec.command = (char *)"kop-no-such-plugin-anywhere";
    ck_assert_int_eq(run_with_metrics(&c, m, 0), -ENOENT);
    ck_assert(calls(m, "1", "plugin_not_found_error") == 1);
    kop_metrics_free(m);
}
END_TEST

struct cancel_arg {
    struct kop_execcred *p;
    atomic_bool flag;
    int r;
};

static bool flag_set(void *ud)
{
    return atomic_load((atomic_bool *)ud);
}

static void *th_cancellable(void *ud)
{
    struct cancel_arg *a = ud;
    struct kop_execcred_cred *cred = NULL;
    a->r = kop_execcred_get_cancellable(a->p, 0, flag_set, &a->flag, &cred, NULL, 0);
    kop_execcred_cred_unref(cred);
    return NULL;
}

static bool helper_started(const void *arg)
{
    (void)arg;
    char *runs = helper_file("runs");
    bool ok = runs && strstr(runs, "run\n");
    free(runs);
    return ok;
}

START_TEST(test_execcred_cancel)
{
    /* A plugin that hangs (and a timeout far away): a cancelled waiter
     * stops waiting, a cancelled runner kills the plugin. */
    struct cfg c;
    cfg_init(&c, V1, "slow", NULL, NULL);
    struct kop_execcred *p = provider(&c, 600000, 0);
    struct cancel_arg runner = {.p = p}, waiter = {.p = p};
    atomic_init(&runner.flag, false);
    atomic_init(&waiter.flag, false);
    pthread_t tr, tw;
    ck_assert_int_eq(pthread_create(&tr, NULL, th_cancellable, &runner), 0);
    ck_assert(kop_test_eventually(helper_started, NULL, 30000));
    ck_assert_int_eq(pthread_create(&tw, NULL, th_cancellable, &waiter), 0);
    atomic_store(&waiter.flag, true);
    pthread_join(tw, NULL);
    ck_assert_int_eq(waiter.r, -ECANCELED);
    atomic_store(&runner.flag, true);
    pthread_join(tr, NULL);
    ck_assert_int_eq(runner.r, -ECANCELED);
    ck_assert_uint_eq(kop_execcred_runs(p), 1);
    kop_execcred_unref(p);
}
END_TEST

START_TEST(test_execcred_parse_time)
{
    int64_t ms = -1;
    ck_assert_int_eq(kop_execcred_parse_time("1970-01-01T00:00:00Z", &ms), 0);
    ck_assert_int_eq(ms, 0);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01T16:40:00Z", &ms), 0);
    ck_assert_int_eq(ms, 1796143200000LL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01T18:40:00.250+02:00", &ms), 0);
    ck_assert_int_eq(ms, 1796143200250LL);
    ck_assert_int_eq(kop_execcred_parse_time("2024-02-29T00:00:00-00:30", &ms), 0);
    ck_assert_int_eq(ms, 1709166600000LL);
    ck_assert_int_eq(kop_execcred_parse_time("2023-02-29T00:00:00Z", &ms), -EINVAL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01 16:40:00Z", &ms), -EINVAL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01T16:40:00", &ms), -EINVAL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-13-01T16:40:00Z", &ms), -EINVAL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01T16:40:00.Z", &ms), -EINVAL);
    ck_assert_int_eq(kop_execcred_parse_time("2026-12-01T16:40:00Zjunk", &ms), -EINVAL);
}
END_TEST

static Suite *execcred_suite(void)
{
    Suite *s = suite_create("execcred");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_execcred_token_cached_until_expiry);
    tcase_add_test(tc, test_execcred_cluster_info);
    tcase_add_test(tc, test_execcred_client_certificate);
    tcase_add_test(tc, test_execcred_invalidate_after_401);
    tcase_add_test(tc, test_execcred_one_run_for_many_threads);
    tcase_add_test(tc, test_execcred_shared_per_config);
    tcase_add_test(tc, test_execcred_stderr_logged);
    tcase_add_test(tc, test_execcred_failures);
    tcase_add_test(tc, test_execcred_path_relative_refused);
    tcase_add_test(tc, test_execcred_path_directory_skipped);
    tcase_add_test(tc, test_execcred_metrics);
    tcase_add_test(tc, test_execcred_cancel);
    tcase_add_test(tc, test_execcred_parse_time);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(execcred_suite());
}
