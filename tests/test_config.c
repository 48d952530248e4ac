/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/config.h: defaults, every flag in both spellings, the
 * KOP_* environment and flag-over-environment precedence, every class of
 * bad value with its message, unknown flags, positional arguments, and
 * --help/--version.
 */
#include "kop/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kop/http.h"
#include "kop/leader.h"
#include "kop/tls.h"
#include "kop_version.h"
#include "testutil.h"

/* Captured output of one parse. */
struct run {
    int r;
    char *out;
    char *err;
};

/* kop_config_parse of "kop" and the arguments from first up to a NULL. */
static int parse_va(struct kop_config *cfg, char **envp, FILE *out, FILE *err, const char *first,
                    va_list ap)
{
    char *argv[64];
    int argc = 0;

    argv[argc++] = (char *)"kop";
    for (const char *a = first; a != NULL; a = va_arg(ap, const char *)) {
        ck_assert_int_lt(argc, (int)(sizeof(argv) / sizeof(argv[0])) - 1);
        argv[argc++] = (char *)a;
    }
    argv[argc] = NULL;
    return kop_config_parse(cfg, argc, argv, envp, out, err);
}

static struct run run_parse(struct kop_config *cfg, char **envp, const char *first, ...)
{
    va_list ap;
    struct run res;
    size_t out_len = 0, err_len = 0;
    FILE *out, *err;

    res.out = NULL;
    res.err = NULL;
    out = open_memstream(&res.out, &out_len);
    err = open_memstream(&res.err, &err_len);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    va_start(ap, first);
    res.r = parse_va(cfg, envp, out, err, first, ap);
    va_end(ap);
    fclose(out);
    fclose(err);
    return res;
}

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
}

/* Parse that must fail with want_line as the first error line. */
static void expect_error(const char *want_line, char **envp, const char *first, ...)
{
    struct kop_config cfg;
    va_list ap;
    char *err_text = NULL;
    size_t err_len = 0;
    FILE *err = open_memstream(&err_text, &err_len);
    FILE *out = fopen("/dev/null", "w");
    int r;

    va_start(ap, first);
    r = parse_va(&cfg, envp, out, err, first, ap);
    va_end(ap);
    fclose(err);
    fclose(out);
    ck_assert_msg(r == -EINVAL, "accepted (%d): %s", r, want_line);
    ck_assert_msg(strncmp(err_text, want_line, strlen(want_line)) == 0 &&
                      err_text[strlen(want_line)] == '\n',
                  "got: %s want: %s", err_text, want_line);
    ck_assert_str_eq(err_text + strlen(want_line) + 1, "Run 'kop --help' for usage.\n");
    free(err_text);
    kop_config_cleanup(&cfg);
}

START_TEST(test_config_defaults)
{
    struct kop_config cfg;

    kop_config_defaults(&cfg);
    ck_assert_int_eq(cfg.webhook_port, 9443);
    ck_assert_str_eq(cfg.webhook_host, "");
    ck_assert_str_eq(cfg.cert_dir, "/tmp/k8s-webhook-server/serving-certs");
    ck_assert_ptr_null(cfg.client_ca_file);
    ck_assert_uint_eq(cfg.convert_max_body, 64u * 1024 * 1024);
    ck_assert_uint_eq(cfg.admission_max_body, 7340032);
    ck_assert_uint_eq(cfg.max_header_bytes, 32 * 1024);
    ck_assert_int_eq(cfg.tls_handshake_timeout_ms, 10000);
    ck_assert_int_eq(cfg.idle_timeout_ms, 120000);
    ck_assert_int_eq(cfg.max_connections, 1024);
    ck_assert_int_eq(cfg.max_connections_per_ip, 256);
    ck_assert_int_eq(cfg.webhook_threads, 2);
    ck_assert_int_eq(cfg.request_header_timeout_ms, 10000);
    ck_assert_uint_eq(cfg.min_body_rate, 16384);
    ck_assert_int_eq(cfg.max_handshakes_per_ip_per_second, 64);
    ck_assert(cfg.metrics_bind.enabled);
    ck_assert_str_eq(cfg.metrics_bind.host, "");
    ck_assert_int_eq(cfg.metrics_bind.port, 8080);
    ck_assert(cfg.health_bind.enabled);
    ck_assert_int_eq(cfg.health_bind.port, 8081);
    ck_assert(!cfg.leader_elect);
    ck_assert_str_eq(cfg.leader_election_id, "kop-leader");
    ck_assert_ptr_null(cfg.leader_election_namespace);
    ck_assert_int_eq(cfg.leader_lease_duration_ms, 15000);
    ck_assert_int_eq(cfg.leader_renew_deadline_ms, 10000);
    ck_assert_int_eq(cfg.leader_retry_period_ms, 2000);
    ck_assert_int_eq(cfg.max_concurrent_reconciles, 2);
    ck_assert(cfg.kube_api_qps == 20);
    ck_assert_int_eq(cfg.kube_api_burst, 30);
    ck_assert_ptr_null(cfg.kubeconfig);
    ck_assert_ptr_null(cfg.namespace);
    ck_assert_int_eq(cfg.sync_period_ms, 10 * 3600 * 1000LL);
    ck_assert_ptr_null(cfg.allowed_registries);
    ck_assert_uint_eq(cfg.n_allowed_registries, 0);
    ck_assert_int_eq(cfg.log_level, KOP_LOG_INFO);
    ck_assert_int_eq(cfg.log_format, KOP_LOG_FORMAT_JSON);
    ck_assert_int_eq(cfg.shutdown_delay_ms, 5000);
    ck_assert_int_eq(cfg.shutdown_timeout_ms, 30000);
    ck_assert(!cfg.webhook_only && !cfg.controller_only && !cfg.self_signed_certs);
    ck_assert_str_eq(cfg.otlp_endpoint, "");
    ck_assert_str_eq(cfg.otlp_service_name, "kop");
    ck_assert_int_eq(cfg.otlp_flush_interval_ms, 5000);
    /* Cleanup of a defaults-only config frees nothing it does not own. */
    kop_config_cleanup(&cfg);
    kop_config_cleanup(NULL);
}
END_TEST

START_TEST(test_config_every_flag)
{
    struct kop_config cfg;
    struct run r = run_parse(
        &cfg, NULL, "--webhook-port", "10443", "--webhook-host=127.0.0.1", "--cert-dir", "/certs",
        "--client-ca-file=/ca.crt", "--client-cert-allowed-names=kube-apiserver, system:apiserver",
        "--conversion-max-body-bytes=128Mi", "--admission-max-body-bytes", "1048576",
        "--max-header-bytes=64Ki", "--tls-handshake-timeout=5s", "--idle-timeout", "1m30s",
        "--max-connections=10", "--max-connections-per-ip=3", "--webhook-threads=4",
        "--request-header-timeout=3s", "--min-body-rate=1Ki", "--max-handshakes-per-ip-per-second",
        "5", "--metrics-bind-address=127.0.0.1:9090", "--health-probe-bind-address", "0",
        "--leader-elect", "--leader-election-id=my-lease", "--leader-election-namespace=kop-system",
        "--max-concurrent-reconciles=8", "--kube-api-qps=0", "--kube-api-burst", "0",
        "--kubeconfig=/kc", "--namespace", "team-a", "--sync-period=1h30m",
        "--allowed-registries= docker.io , quay.io,registry.local:5000", "--log-level=debug",
        "--log-format", "text", "--shutdown-timeout=300ms", "--shutdown-delay=1.5s",
        "--webhook-only", "--self-signed-certs=true", "--otlp-endpoint=http://collector:4318",
        "--otlp-service-name", "kop-a", "--otlp-flush-interval=250ms", NULL);

    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_str_eq(r.err, "");
    ck_assert_str_eq(r.out, "");
    ck_assert_int_eq(cfg.webhook_port, 10443);
    ck_assert_str_eq(cfg.webhook_host, "127.0.0.1");
    ck_assert_str_eq(cfg.cert_dir, "/certs");
    ck_assert_str_eq(cfg.client_ca_file, "/ca.crt");
    ck_assert_uint_eq(cfg.convert_max_body, 128u * 1024 * 1024);
    ck_assert_uint_eq(cfg.admission_max_body, 1048576);
    ck_assert_uint_eq(cfg.max_header_bytes, 65536);
    ck_assert_int_eq(cfg.tls_handshake_timeout_ms, 5000);
    ck_assert_int_eq(cfg.idle_timeout_ms, 90000);
    ck_assert_int_eq(cfg.max_connections, 10);
    ck_assert_int_eq(cfg.max_connections_per_ip, 3);
    ck_assert_int_eq(cfg.webhook_threads, 4);
    ck_assert_int_eq(cfg.request_header_timeout_ms, 3000);
    ck_assert_uint_eq(cfg.min_body_rate, 1024);
    ck_assert_int_eq(cfg.max_handshakes_per_ip_per_second, 5);
    ck_assert(cfg.metrics_bind.enabled);
    ck_assert_str_eq(cfg.metrics_bind.host, "127.0.0.1");
    ck_assert_int_eq(cfg.metrics_bind.port, 9090);
    ck_assert(!cfg.health_bind.enabled);
    ck_assert(cfg.leader_elect);
    ck_assert_str_eq(cfg.leader_election_id, "my-lease");
    ck_assert_str_eq(cfg.leader_election_namespace, "kop-system");
    ck_assert_int_eq(cfg.max_concurrent_reconciles, 8);
    ck_assert(cfg.kube_api_qps == 0);
    ck_assert_int_eq(cfg.kube_api_burst, 0);
    ck_assert_str_eq(cfg.kubeconfig, "/kc");
    ck_assert_str_eq(cfg.namespace, "team-a");
    ck_assert_int_eq(cfg.sync_period_ms, 5400000);
    ck_assert_uint_eq(cfg.n_allowed_registries, 3);
    ck_assert_str_eq(cfg.allowed_registries[0], "docker.io");
    ck_assert_str_eq(cfg.allowed_registries[1], "quay.io");
    ck_assert_str_eq(cfg.allowed_registries[2], "registry.local:5000");
    ck_assert_ptr_null(cfg.allowed_registries[3]);
    ck_assert_uint_eq(cfg.n_client_cert_names, 2);
    ck_assert_str_eq(cfg.client_cert_names[0], "kube-apiserver");
    ck_assert_str_eq(cfg.client_cert_names[1], "system:apiserver");
    ck_assert_ptr_null(cfg.client_cert_names[2]);
    ck_assert_int_eq(cfg.log_level, KOP_LOG_DEBUG);
    ck_assert_int_eq(cfg.log_format, KOP_LOG_FORMAT_TEXT);
    ck_assert_int_eq(cfg.shutdown_timeout_ms, 300);
    ck_assert_int_eq(cfg.shutdown_delay_ms, 1500);
    ck_assert(cfg.webhook_only);
    ck_assert(!cfg.controller_only);
    ck_assert(cfg.self_signed_certs);
    ck_assert_str_eq(cfg.otlp_endpoint, "http://collector:4318");
    ck_assert_str_eq(cfg.otlp_service_name, "kop-a");
    ck_assert_int_eq(cfg.otlp_flush_interval_ms, 250);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

START_TEST(test_config_bools_and_repeats)
{
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--leader-elect=true", "--leader-elect=false",
                             "--controller-only", "--cert-dir=a", "--cert-dir=b",
                             "--allowed-registries=x.io", "--allowed-registries=y.io", NULL);

    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert(!cfg.leader_elect);
    ck_assert(cfg.controller_only);
    ck_assert_str_eq(cfg.cert_dir, "b");
    ck_assert_uint_eq(cfg.n_allowed_registries, 1);
    ck_assert_str_eq(cfg.allowed_registries[0], "y.io");
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

START_TEST(test_config_environment_and_flag_wins)
{
    struct kop_config cfg;
    char *envp[] = {
        "PATH=/usr/bin",
        "KOP_WEBHOOK_PORT=8443",
        "KOP_KUBE_API_QPS=5.5",
        "KOP_LEADER_ELECT=yes",
        "KOP_NAMESPACE=from-env",
        "KOP_ALLOWED_REGISTRIES=a.io,b.io",
        "KOP_METRICS_BIND_ADDRESS=[::1]:8443",
        "KOP_SYNC_PERIOD=10m",
        "KOP_LOG_LEVEL=",
        "KOP_WEBHOOK_PORTX=1",
        NULL,
    };
    struct run r = run_parse(&cfg, envp, "--webhook-port=9000", NULL);

    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_int_eq(cfg.webhook_port, 9000); /* flag wins */
    ck_assert(cfg.kube_api_qps == 5.5);
    ck_assert(cfg.leader_elect);
    ck_assert_str_eq(cfg.namespace, "from-env");
    ck_assert_uint_eq(cfg.n_allowed_registries, 2);
    ck_assert_str_eq(cfg.allowed_registries[1], "b.io");
    ck_assert_str_eq(cfg.metrics_bind.host, "::1");
    ck_assert_int_eq(cfg.metrics_bind.port, 8443);
    ck_assert_int_eq(cfg.sync_period_ms, 600000);
    ck_assert_int_eq(cfg.log_level, KOP_LOG_INFO); /* empty variable: unset */
    kop_config_cleanup(&cfg);
    run_free(&r);

    /* A bad environment value is reported with the variable's name. */
    char *bad_env[] = {"KOP_KUBE_API_BURST=lots", NULL};
    expect_error("kop: invalid value \"lots\" for KOP_KUBE_API_BURST: not a number", bad_env, NULL);
}
END_TEST

START_TEST(test_config_bad_values)
{
    expect_error("kop: invalid value \"abc\" for flag --webhook-port: not a number", NULL,
                 "--webhook-port", "abc", NULL);
    expect_error("kop: invalid value \"65536\" for flag --webhook-port: must be from 0 to 65535",
                 NULL, "--webhook-port=65536", NULL);
    expect_error("kop: invalid value \"-1\" for flag --webhook-port: must be from 0 to 65535", NULL,
                 "--webhook-port", "-1", NULL);
    expect_error("kop: invalid value \"12x\" for flag --webhook-port: not a number", NULL,
                 "--webhook-port=12x", NULL);
    expect_error("kop: invalid value \"-1\" for flag --kube-api-qps: must be 0 or more", NULL,
                 "--kube-api-qps=-1", NULL);
    expect_error("kop: invalid value \"fast\" for flag --kube-api-qps: not a number", NULL,
                 "--kube-api-qps=fast", NULL);
    expect_error("kop: invalid value \"-3\" for flag --kube-api-burst: must be 0 or more", NULL,
                 "--kube-api-burst=-3", NULL);
    expect_error("kop: invalid value \"0\" for flag --max-concurrent-reconciles: must be from 1 to "
                 "1024",
                 NULL, "--max-concurrent-reconciles=0", NULL);
    expect_error("kop: invalid value \"0\" for flag --conversion-max-body-bytes: must be greater "
                 "than 0",
                 NULL, "--conversion-max-body-bytes=0", NULL);
    expect_error("kop: invalid value \"64MB\" for flag --conversion-max-body-bytes: not a size "
                 "(examples: 1048576, 512Ki, 64Mi, 1Gi)",
                 NULL, "--conversion-max-body-bytes=64MB", NULL);
    expect_error("kop: invalid value \"-5s\" for flag --shutdown-timeout: must not be negative",
                 NULL, "--shutdown-timeout=-5s", NULL);
    expect_error("kop: invalid value \"30\" for flag --shutdown-timeout: missing or unknown unit "
                 "(use ns, us, ms, s, m or h)",
                 NULL, "--shutdown-timeout=30", NULL);
    expect_error("kop: invalid value \"-1s\" for flag --shutdown-delay: must not be negative", NULL,
                 "--shutdown-delay=-1s", NULL);
    expect_error("kop: invalid value \"5\" for flag --shutdown-delay: missing or unknown unit "
                 "(use ns, us, ms, s, m or h)",
                 NULL, "--shutdown-delay=5", NULL);
    expect_error("kop: invalid value \"soon\" for flag --sync-period: not a duration (examples: "
                 "300ms, 30s, 10m, 1h30m)",
                 NULL, "--sync-period=soon", NULL);
    expect_error("kop: invalid value \"0\" for flag --sync-period: must be at least 1ms", NULL,
                 "--sync-period=0", NULL);
    expect_error("kop: invalid value \"v3\" for flag --storage-version: must be v1 or v2", NULL,
                 "--storage-version=v3", NULL);
    expect_error("kop: --client-cert-allowed-names needs --client-ca-file", NULL,
                 "--client-cert-allowed-names=kube-apiserver", NULL);
    expect_error("kop: invalid value \"kube apiserver\" for flag --client-cert-allowed-names: a "
                 "name is printable ASCII without blanks",
                 NULL, "--client-cert-allowed-names=kube apiserver", NULL);
    expect_error("kop: invalid value \"8080\" for flag --metrics-bind-address: not an address "
                 "(examples: :8080, 127.0.0.1:8080, [::1]:8080, 0 to turn off)",
                 NULL, "--metrics-bind-address=8080", NULL);
    expect_error("kop: invalid value \":99999\" for flag --metrics-bind-address: port must be a "
                 "number from 0 to 65535",
                 NULL, "--metrics-bind-address=:99999", NULL);
    expect_error("kop: invalid value \"::1:80\" for flag --health-probe-bind-address: an IPv6 "
                 "address needs brackets, as in [::1]:8080",
                 NULL, "--health-probe-bind-address=::1:80", NULL);
    expect_error("kop: invalid value \"a.io,,b.io\" for flag --allowed-registries: empty item in "
                 "the list",
                 NULL, "--allowed-registries=a.io,,b.io", NULL);
    expect_error("kop: invalid value \"a.io, \" for flag --allowed-registries: empty item in the "
                 "list",
                 NULL, "--allowed-registries", "a.io, ", NULL);
    expect_error("kop: invalid value \"maybe\" for flag --leader-elect: not a boolean (use true or "
                 "false)",
                 NULL, "--leader-elect=maybe", NULL);
    expect_error("kop: invalid value \"loud\" for flag --log-level: must be debug, info, warn or "
                 "error",
                 NULL, "--log-level=loud", NULL);
    expect_error("kop: invalid value \"xml\" for flag --log-format: must be json or text", NULL,
                 "--log-format=xml", NULL);
}
END_TEST

START_TEST(test_config_bad_command_lines)
{
    expect_error("kop: unknown flag: --foo", NULL, "--foo", NULL);
    expect_error("kop: unknown flag: --foo", NULL, "--leader-elect", "--foo=bar", NULL);
    expect_error("kop: unexpected argument: \"serve\"", NULL, "serve", NULL);
    expect_error("kop: unexpected argument: \"x\"", NULL, "--leader-elect", "--", "x", NULL);
    expect_error("kop: flag needs an argument: --cert-dir", NULL, "--cert-dir", NULL);
    expect_error("kop: --webhook-only and --controller-only cannot be used together", NULL,
                 "--webhook-only", "--controller-only", NULL);
    char *env[] = {"KOP_CONTROLLER_ONLY=true", NULL};
    expect_error("kop: --webhook-only and --controller-only cannot be used together", env,
                 "--webhook-only", NULL);
}
END_TEST

/* Every rule that ties two flags together is the parser's (exit 2 with one
 * line), from flags and from the environment alike. */
START_TEST(test_config_cross_flag_rules)
{
    static const char self_signed[] = "kop: --self-signed-certs needs the webhook server; it does "
                                      "not go with --controller-only";
    expect_error(self_signed, NULL, "--self-signed-certs", "--controller-only", NULL);
    expect_error(self_signed, NULL, "--controller-only", "--self-signed-certs=true", NULL);
    char *env_ss[] = {"KOP_SELF_SIGNED_CERTS=true", NULL};
    expect_error(self_signed, env_ss, "--controller-only", NULL);
    char *env_co[] = {"KOP_CONTROLLER_ONLY=yes", NULL};
    expect_error(self_signed, env_co, "--self-signed-certs", NULL);
    /* All three: the first rule answers. */
    expect_error("kop: --webhook-only and --controller-only cannot be used together", NULL,
                 "--self-signed-certs", "--webhook-only", "--controller-only", NULL);

    expect_error("kop: --otlp-endpoint must be an http:// or https:// URL", NULL, "--otlp-endpoint",
                 "collector:4318", NULL);
    expect_error("kop: --otlp-service-name must not be empty", NULL,
                 "--otlp-endpoint=https://collector", "--otlp-service-name=", NULL);

    /* What the rules allow. */
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--self-signed-certs", "--webhook-only", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert(cfg.self_signed_certs && cfg.webhook_only);
    kop_config_cleanup(&cfg);
    run_free(&r);
    r = run_parse(&cfg, env_ss, "--self-signed-certs=false", "--controller-only", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert(!cfg.self_signed_certs && cfg.controller_only);
    ck_assert_str_eq(r.err, "");
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

START_TEST(test_config_help_and_version)
{
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--help", NULL);
    static const char *const every[] = {
        "--webhook-port",
        "--webhook-host",
        "--cert-dir",
        "--client-ca-file",
        "--client-cert-allowed-names",
        "--conversion-max-body-bytes",
        "--admission-max-body-bytes",
        "--max-header-bytes",
        "--tls-handshake-timeout",
        "--idle-timeout",
        "--max-connections",
        "--max-connections-per-ip",
        "--webhook-threads",
        "--request-header-timeout",
        "--min-body-rate",
        "--max-handshakes-per-ip-per-second",
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--leader-elect",
        "--leader-election-id",
        "--leader-election-namespace",
        "--max-concurrent-reconciles",
        "--kube-api-qps",
        "--kube-api-burst",
        "--kubeconfig",
        "--namespace",
        "--sync-period",
        "--storage-migration",
        "--storage-version",
        "--allowed-registries",
        "--log-level",
        "--log-format",
        "--shutdown-timeout",
        "--shutdown-delay",
        "--webhook-only",
        "--controller-only",
        "--self-signed-certs",
        "--version",
        "KOP_WEBHOOK_PORT",
        "KOP_KUBE_API_QPS",
        "(default 9443; env KOP_WEBHOOK_PORT)",
        "(default \":8080\"; env KOP_METRICS_BIND_ADDRESS)",
        "(default 10h; env KOP_SYNC_PERIOD)",
        "(default 64Mi; env KOP_CONVERSION_MAX_BODY_BYTES)",
    };

    ck_assert_int_eq(r.r, KOP_CONFIG_EXIT);
    ck_assert_str_eq(r.err, "");
    for (size_t i = 0; i < sizeof(every) / sizeof(every[0]); i++)
        ck_assert_msg(strstr(r.out, every[i]) != NULL, "help lacks %s", every[i]);
    kop_config_cleanup(&cfg);
    run_free(&r);

    r = run_parse(&cfg, NULL, "-h", NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_EXIT);
    ck_assert_ptr_nonnull(strstr(r.out, "Usage: kop"));
    kop_config_cleanup(&cfg);
    run_free(&r);

    /* --help wins over a bad environment value. */
    char *env[] = {"KOP_WEBHOOK_PORT=abc", NULL};
    r = run_parse(&cfg, env, "--version", NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_EXIT);
    /* kop's version first (scripts read its second word), then the TLS
     * library by name and version. */
    static const char head[] = "kop " KOP_VERSION "\ntls: Mbed TLS 3.6.";
    ck_assert_msg(strncmp(r.out, head, sizeof(head) - 1) == 0, "version output: %s", r.out);
    ck_assert_ptr_nonnull(strstr(r.out, "\napi client: libcurl "));
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

START_TEST(test_config_duration_helper)
{
    static const struct {
        const char *s;
        int64_t ms;
    } ok[] = {
        {"0", 0},          {"300ms", 300},     {"30s", 30000},   {"10m", 600000},
        {"10h", 36000000}, {"1h30m", 5400000}, {"1.5s", 1500},   {"2h45m30.5s", 9930500},
        {"+5s", 5000},     {"1500us", 1},      {"2000000ns", 2}, {"1m0s", 60000},
    };
    static const char *const bad[] = {"",       "-1s", "10",   "s",           "1x",  "1.s.",
                                      "1h 30m", "5 s", "1e3s", "9999999999h", " 5s", "5s "};
    int64_t ms;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_msg(kop_config_parse_duration(ok[i].s, &ms) == 0, "rejected %s", ok[i].s);
        ck_assert_int_eq(ms, ok[i].ms);
    }
    ms = -7;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(kop_config_parse_duration(bad[i], &ms) == -EINVAL, "accepted %s", bad[i]);
    ck_assert_int_eq(ms, -7);
}
END_TEST

START_TEST(test_config_bind_helper)
{
    struct kop_bind_address b;

    ck_assert_int_eq(kop_config_parse_bind(":8080", &b), 0);
    ck_assert(b.enabled);
    ck_assert_str_eq(b.host, "");
    ck_assert_int_eq(b.port, 8080);
    ck_assert_int_eq(kop_config_parse_bind("localhost:0", &b), 0);
    ck_assert_str_eq(b.host, "localhost");
    ck_assert_int_eq(b.port, 0);
    ck_assert_int_eq(kop_config_parse_bind("[::]:65535", &b), 0);
    ck_assert_str_eq(b.host, "::");
    ck_assert_int_eq(b.port, 65535);
    ck_assert_int_eq(kop_config_parse_bind("0", &b), 0);
    ck_assert(!b.enabled);
    static const char *const bad[] = {"",       ":",      "8080",      ":http",
                                      ":-1",    ":65536", "[::1]8080", "[]:80",
                                      "::1:80", "a b:80", "host:80x",  ":+80"};
    b.port = 77;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(kop_config_parse_bind(bad[i], &b) == -EINVAL, "accepted %s", bad[i]);
    ck_assert_int_eq(b.port, 77);
}
END_TEST

/* The flags' defaults are the defaults of the layers that own them: an
 * option left at 0 and the flag left alone mean the same. */
START_TEST(test_config_defaults_are_the_layers)
{
    struct kop_config cfg;

    kop_config_defaults(&cfg);
    ck_assert_int_eq(cfg.tls_handshake_timeout_ms, KOP_TLS_HANDSHAKE_TIMEOUT_S * 1000);
    ck_assert_int_eq(cfg.max_connections, KOP_TLS_MAX_CONNECTIONS);
    ck_assert_int_eq(cfg.idle_timeout_ms, KOP_HTTP_IDLE_TIMEOUT_S * 1000);
    ck_assert_int_eq(cfg.request_header_timeout_ms, KOP_HTTP_HEADER_TIMEOUT_S * 1000);
    ck_assert_int_eq(cfg.leader_lease_duration_ms, KOP_LEADER_LEASE_DURATION_S * 1000);
    ck_assert_int_eq(cfg.leader_renew_deadline_ms, KOP_LEADER_RENEW_DEADLINE_S * 1000);
    ck_assert_int_eq(cfg.leader_retry_period_ms, KOP_LEADER_RETRY_PERIOD_S * 1000);
    kop_config_cleanup(&cfg);
}
END_TEST

/* A flag where a value belongs is a forgotten value, not the value:
 * "--kubeconfig --controller-only" used to read a kubeconfig named
 * "--controller-only" and run without --controller-only. */
START_TEST(test_config_value_that_is_a_flag)
{
    expect_error("kop: flag needs an argument: --kubeconfig (got the flag \"--controller-only\")",
                 NULL, "--kubeconfig", "--controller-only", NULL);
    expect_error("kop: flag needs an argument: --namespace (got the flag \"-h\")", NULL,
                 "--namespace", "-h", NULL);
    expect_error("kop: flag needs an argument: --cert-dir (got the flag \"--webhook-port=1\")",
                 NULL, "--cert-dir", "--webhook-port=1", NULL);
    /* Negative numbers and other values that only look like flags stay
     * values. */
    expect_error("kop: invalid value \"-1\" for flag --webhook-port: must be from 0 to 65535", NULL,
                 "--webhook-port", "-1", NULL);
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--cert-dir", "-certs", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_str_eq(cfg.cert_dir, "-certs");
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

/* Go's flag packages read "010" as octal 8 and "0x10" as 16; kop reads
 * decimal only, so a leading zero (which would silently mean 10 here and
 * 8 there) and hexadecimal floats are refused. */
START_TEST(test_config_ambiguous_numbers)
{
    expect_error("kop: invalid value \"010\" for flag --webhook-port: a leading 0 is ambiguous "
                 "(octal in Go flags); write the number without it",
                 NULL, "--webhook-port=010", NULL);
    expect_error("kop: invalid value \"-01\" for flag --kube-api-burst: a leading 0 is ambiguous "
                 "(octal in Go flags); write the number without it",
                 NULL, "--kube-api-burst=-01", NULL);
    expect_error("kop: invalid value \"0x10\" for flag --kube-api-qps: not a number", NULL,
                 "--kube-api-qps=0x10", NULL);
    expect_error("kop: invalid value \"0x1p4\" for flag --kube-api-qps: not a number", NULL,
                 "--kube-api-qps=0x1p4", NULL);
    expect_error("kop: invalid value \"1e400\" for flag --kube-api-qps: not a number", NULL,
                 "--kube-api-qps=1e400", NULL);
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--webhook-port=0", "--kube-api-qps=0.5",
                             "--kube-api-burst=-0", "--max-connections=10", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_int_eq(cfg.webhook_port, 0);
    ck_assert(cfg.kube_api_qps == 0.5);
    ck_assert_int_eq(cfg.kube_api_burst, 0);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

/* libmicrohttpd cannot serve a request with a per-connection pool under
 * about 1 KiB, and refuses every connection with one of 1 GiB or more:
 * both used to start "fine" and fail every request. */
START_TEST(test_config_max_header_bytes_bounds)
{
    expect_error("kop: invalid value \"100\" for flag --max-header-bytes: must be from 1Ki to "
                 "256Mi",
                 NULL, "--max-header-bytes=100", NULL);
    expect_error("kop: invalid value \"1Gi\" for flag --max-header-bytes: must be from 1Ki to "
                 "256Mi",
                 NULL, "--max-header-bytes=1Gi", NULL);
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--max-header-bytes=1Ki", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_uint_eq(cfg.max_header_bytes, 1024);
    kop_config_cleanup(&cfg);
    run_free(&r);
    r = run_parse(&cfg, NULL, "--max-header-bytes=256Mi", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

/* A FIFO as --client-ca-file or --kubeconfig blocked start-up forever in
 * open(2) (with SIGTERM blocked); a directory gave an errno much later. */
START_TEST(test_config_file_flags_must_be_files)
{
    char *dir = kop_test_tmpdir();
    char fifo[4096], msg[8192];
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    char arg[4200];
    snprintf(arg, sizeof(arg), "--client-ca-file=%s", fifo);
    snprintf(msg, sizeof(msg), "kop: --client-ca-file \"%s\": not a regular file", fifo);
    expect_error(msg, NULL, arg, NULL);
    snprintf(arg, sizeof(arg), "--kubeconfig=%s", dir);
    snprintf(msg, sizeof(msg), "kop: --kubeconfig \"%s\": a directory, not a file", dir);
    expect_error(msg, NULL, arg, NULL);
    char env[4200];
    snprintf(env, sizeof(env), "KOP_KUBECONFIG=%s", fifo);
    char *envp[] = {env, NULL};
    snprintf(msg, sizeof(msg), "kop: --kubeconfig \"%s\": not a regular file", fifo);
    expect_error(msg, envp, NULL);
    /* A file that does not exist yet is the loader's business (it may be
     * mounted later in tests; the loader names it). */
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--client-ca-file=/nonexistent/ca.crt", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    kop_config_cleanup(&cfg);
    run_free(&r);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

/* Names that go into API paths are checked as the API server would: a
 * namespace is a DNS label, a Lease name a DNS subdomain; an empty Lease
 * name is refused when leader election needs it. */
START_TEST(test_config_kubernetes_names)
{
    expect_error("kop: invalid value \"Bad_NS\" for flag --namespace: must be a DNS label "
                 "(lower-case letters, digits and '-', at most 63, starting and ending with a "
                 "letter or digit)",
                 NULL, "--namespace=Bad_NS", NULL);
    expect_error("kop: invalid value \"a/b\" for flag --leader-election-namespace: must be a DNS "
                 "label (lower-case letters, digits and '-', at most 63, starting and ending with "
                 "a letter or digit)",
                 NULL, "--leader-election-namespace=a/b", NULL);
    expect_error("kop: invalid value \"my lease\" for flag --leader-election-id: must be a DNS "
                 "subdomain (lower-case letters, digits, '-' and '.', at most 253)",
                 NULL, "--leader-election-id", "my lease", NULL);
    expect_error("kop: invalid value \"-x\" for flag --leader-election-id: must be a DNS "
                 "subdomain (lower-case letters, digits, '-' and '.', at most 253)",
                 NULL, "--leader-election-id=-x", NULL);
    expect_error("kop: --leader-election-id must not be empty with --leader-elect or --sharding",
                 NULL, "--leader-election-id=", "--leader-elect", NULL);
    char *env[] = {"KOP_NAMESPACE=UPPER", NULL};
    expect_error("kop: invalid value \"UPPER\" for KOP_NAMESPACE: must be a DNS label (lower-case "
                 "letters, digits and '-', at most 63, starting and ending with a letter or digit)",
                 env, NULL);
    char long_ns[80];
    memset(long_ns, 'a', 64);
    long_ns[64] = '\0';
    char arg[100];
    snprintf(arg, sizeof(arg), "--namespace=%s", long_ns);
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, arg, NULL);
    ck_assert_int_eq(r.r, -EINVAL);
    run_free(&r);
    kop_config_cleanup(&cfg);
    r = run_parse(&cfg, NULL, "--namespace=team-a", "--leader-election-id=kop.example.com-1",
                  "--leader-election-namespace=kop-system", "--leader-election-id=x", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    kop_config_cleanup(&cfg);
    run_free(&r);
    /* Without leader election an empty id is unused. */
    r = run_parse(&cfg, NULL, "--leader-election-id=", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

/* Durations near Go's maximum overflowed now + duration in int64 ns
 * (main's and the manager's shutdown deadlines: UBSan signed overflow,
 * then an immediate "shutdown timed out"): flags stop at ten years. The
 * helper keeps Go's full range. */
START_TEST(test_config_duration_flags_bounded)
{
    expect_error("kop: invalid value \"2562047h\" for flag --shutdown-delay: must be at most "
                 "87600h (10 years)",
                 NULL, "--shutdown-delay=2562047h", NULL);
    expect_error("kop: invalid value \"87601h\" for flag --sync-period: must be at most 87600h "
                 "(10 years)",
                 NULL, "--sync-period=87601h", NULL);
    int64_t ms = 0;
    ck_assert_int_eq(kop_config_parse_duration("2562047h47m16.854775807s", &ms), 0);
    ck_assert_int_eq(ms, 9223372036854LL);
    ck_assert_int_eq(kop_config_parse_duration("2562047h47m17s", &ms), -EINVAL);
}
END_TEST

/* --webhook-host garbage reached the listener, which said only "cannot
 * listen on port 0 (errno 22)". */
START_TEST(test_config_webhook_host)
{
    static const char *const bad[] = {"not a host", "999.1.1.1", "1.2.3", "::g",     "[::1",
                                      "a..b",       "-a",        "a_b",   "http://x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[128], arg[128];
        snprintf(want, sizeof(want),
                 "kop: invalid value \"%s\" for flag --webhook-host: not an IP address or host "
                 "name",
                 bad[i]);
        snprintf(arg, sizeof(arg), "--webhook-host=%s", bad[i]);
        expect_error(want, NULL, arg, NULL);
    }
    static const char *const good[] = {"", "127.0.0.1", "::1", "[::1]", "localhost", "Kop-1.svc"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct kop_config cfg;
        char arg[128];
        snprintf(arg, sizeof(arg), "--webhook-host=%s", good[i]);
        struct run r = run_parse(&cfg, NULL, arg, NULL);
        ck_assert_msg(r.r == KOP_CONFIG_OK, "%s: %s", good[i], r.err);
        kop_config_cleanup(&cfg);
        run_free(&r);
    }
}
END_TEST

/* An error is one line whatever the value holds: control bytes, quotes
 * and backslashes are escaped, long values cut (a newline in a value used
 * to split the message). */
START_TEST(test_config_error_is_one_line)
{
    expect_error("kop: invalid value \"1\\n2\" for flag --webhook-port: not a number", NULL,
                 "--webhook-port=1\n2", NULL);
    expect_error("kop: invalid value \"a\\\"b\\\\\\x1b[31m\" for flag --log-level: must be "
                 "debug, info, warn or error",
                 NULL, "--log-level=a\"b\\\x1b[31m", NULL);
    expect_error("kop: unexpected argument: \"x\\ry\"", NULL, "x\ry", NULL);
    expect_error("kop: unknown flag: --a\\tb", NULL, "--a\tb=1", NULL);
    char big[5000], want[512];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--webhook-port", big, NULL);
    ck_assert_int_eq(r.r, -EINVAL);
    ck_assert_uint_lt(strlen(r.err), 400);
    snprintf(want, sizeof(want), "...\" for flag --webhook-port: not a number\n");
    ck_assert_ptr_nonnull(strstr(r.err, want));
    run_free(&r);
    kop_config_cleanup(&cfg);
}
END_TEST

/* Two of kop's own servers on one port failed at start-up as "address
 * already in use", as if another process held it. */
START_TEST(test_config_port_clash)
{
    expect_error("kop: --webhook-port and --metrics-bind-address both use port 8080", NULL,
                 "--webhook-port=8080", NULL);
    expect_error("kop: --metrics-bind-address and --health-probe-bind-address both use port 9000",
                 NULL, "--metrics-bind-address=127.0.0.1:9000", "--health-probe-bind-address=:9000",
                 NULL);
    struct kop_config cfg;
    /* Different hosts, port 0 (the kernel picks), a server turned off or
     * --controller-only (no webhook server): no clash. */
    static const char *const ok[][3] = {
        {"--metrics-bind-address=127.0.0.1:9000", "--health-probe-bind-address=127.0.0.2:9000",
         NULL},
        {"--metrics-bind-address=:0", "--health-probe-bind-address=:0", "--webhook-port=0"},
        {"--metrics-bind-address=0", "--webhook-port=8080", NULL},
        {"--controller-only", "--webhook-port=8081", NULL},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct run r = run_parse(&cfg, NULL, ok[i][0], ok[i][1], ok[i][2], NULL);
        ck_assert_msg(r.r == KOP_CONFIG_OK, "%zu: %s", i, r.err);
        kop_config_cleanup(&cfg);
        run_free(&r);
    }
}
END_TEST

/* The shutdown deadline: now + delay + timeout, without int64 overflow
 * for the largest durations (2562047h each) and without the delay for
 * --controller-only. */
START_TEST(test_config_shutdown_deadline)
{
    struct kop_config cfg;
    struct run r =
        run_parse(&cfg, NULL, "--shutdown-delay=87600h", "--shutdown-timeout=87600h", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_int_eq(kop_config_shutdown_deadline_ns(&cfg, INT64_MAX - 1000), INT64_MAX);
    ck_assert_int_eq(kop_config_shutdown_deadline_ns(&cfg, 1000),
                     1000 + 2 * 87600LL * 3600 * 1000000000);
    kop_config_cleanup(&cfg);
    run_free(&r);
    r = run_parse(&cfg, NULL, "--shutdown-delay=5s", "--shutdown-timeout=30s", NULL);
    ck_assert_msg(r.r == KOP_CONFIG_OK, "%s", r.err);
    ck_assert_int_eq(kop_config_shutdown_deadline_ns(&cfg, 1000), 1000 + 35000000000LL);
    ck_assert_int_eq(kop_config_shutdown_delay_ms(&cfg), 5000);
    cfg.controller_only = true;
    ck_assert_int_eq(kop_config_shutdown_deadline_ns(&cfg, 1000), 1000 + 30000000000LL);
    ck_assert_int_eq(kop_config_shutdown_delay_ms(&cfg), 0);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

START_TEST(test_config_clusters)
{
    struct kop_config cfg;
    struct run r =
        run_parse(&cfg, NULL, "--cluster", "eu-1=/dev/null/a", "--cluster=us-2=/b=c", NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert_uint_eq(cfg.n_clusters, 2);
    ck_assert_str_eq(cfg.clusters[0].name, "eu-1");
    ck_assert_str_eq(cfg.clusters[0].kubeconfig, "/dev/null/a");
    ck_assert_str_eq(cfg.clusters[1].name, "us-2");
    ck_assert_str_eq(cfg.clusters[1].kubeconfig, "/b=c"); /* split at the first '=' */
    run_free(&r);
    kop_config_cleanup(&cfg);
    ck_assert_ptr_null(cfg.clusters);

    /* The environment's comma-separated list, replaced by the first flag. */
    char *env[] = {"KOP_CLUSTER=a=/x,b=/y", NULL};
    r = run_parse(&cfg, env, NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert_uint_eq(cfg.n_clusters, 2);
    ck_assert_str_eq(cfg.clusters[1].name, "b");
    ck_assert_str_eq(cfg.clusters[1].kubeconfig, "/y");
    run_free(&r);
    kop_config_cleanup(&cfg);
    r = run_parse(&cfg, env, "--cluster=c=/z", NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert_uint_eq(cfg.n_clusters, 1);
    ck_assert_str_eq(cfg.clusters[0].name, "c");
    run_free(&r);
    kop_config_cleanup(&cfg);
    r = run_parse(&cfg, NULL, NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert_uint_eq(cfg.n_clusters, 0);
    run_free(&r);
    kop_config_cleanup(&cfg);
}
END_TEST

START_TEST(test_config_cluster_errors)
{
    const char *label = "the cluster name must be a DNS label (lower-case letters, digits and "
                        "'-', at most 63, starting and ending with a letter or digit)";
    char want[512];
    snprintf(want, sizeof(want), "kop: invalid value \"Eu=/k\" for flag --cluster: %s", label);
    expect_error(want, NULL, "--cluster=Eu=/k", NULL);
    snprintf(want, sizeof(want), "kop: invalid value \"a.b=/k\" for flag --cluster: %s", label);
    expect_error(want, NULL, "--cluster=a.b=/k", NULL);
    expect_error("kop: invalid value \"eu\" for flag --cluster: must be NAME=KUBECONFIG (a DNS "
                 "label, then the kubeconfig file)",
                 NULL, "--cluster", "eu", NULL);
    expect_error("kop: invalid value \"eu=\" for flag --cluster: must be NAME=KUBECONFIG (a DNS "
                 "label, then the kubeconfig file)",
                 NULL, "--cluster", "eu=", NULL);
    expect_error("kop: invalid value \"=/k\" for flag --cluster: must be NAME=KUBECONFIG (a DNS "
                 "label, then the kubeconfig file)",
                 NULL, "--cluster", "=/k", NULL);
    expect_error("kop: invalid value \"local=/k\" for flag --cluster: the cluster name "
                 "\"local\" is the local cluster's",
                 NULL, "--cluster=local=/k", NULL);
    expect_error("kop: invalid value \"eu=/j\" for flag --cluster: the cluster name is given "
                 "twice",
                 NULL, "--cluster=eu=/k", "--cluster=eu=/j", NULL);
    char *env[] = {"KOP_CLUSTER=a=/x,,b=/y", NULL};
    expect_error("kop: invalid value \"a=/x,,b=/y\" for KOP_CLUSTER: must be NAME=KUBECONFIG (a "
                 "DNS label, then the kubeconfig file)",
                 env, NULL);
    expect_error("kop: --cluster needs the reconciler; it does not go with --webhook-only", NULL,
                 "--cluster=eu=/k", "--webhook-only", NULL);
    expect_error("kop: --cluster does not go with --sharding (sharding is for the local cluster "
                 "only)",
                 NULL, "--cluster=eu=/k", "--sharding", NULL);
    expect_error("kop: --cluster \"/\": a directory, not a file", NULL, "--cluster=eu=/", NULL);
    expect_error("kop: --cluster-secrets needs the reconciler; it does not go with --webhook-only",
                 NULL, "--cluster-secrets", "--webhook-only", NULL);
    expect_error("kop: --cluster-secrets does not go with --sharding (sharding is for the local "
                 "cluster only)",
                 NULL, "--cluster-secrets", "--sharding", NULL);
    struct kop_config cfg;
    struct run r = run_parse(&cfg, NULL, "--cluster-secrets", NULL);
    ck_assert_int_eq(r.r, KOP_CONFIG_OK);
    ck_assert(cfg.cluster_secrets);
    kop_config_cleanup(&cfg);
    run_free(&r);
}
END_TEST

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_config_defaults);
    tcase_add_test(tc, test_config_every_flag);
    tcase_add_test(tc, test_config_bools_and_repeats);
    tcase_add_test(tc, test_config_environment_and_flag_wins);
    tcase_add_test(tc, test_config_bad_values);
    tcase_add_test(tc, test_config_bad_command_lines);
    tcase_add_test(tc, test_config_cross_flag_rules);
    tcase_add_test(tc, test_config_help_and_version);
    tcase_add_test(tc, test_config_duration_helper);
    tcase_add_test(tc, test_config_bind_helper);
    tcase_add_test(tc, test_config_defaults_are_the_layers);
    tcase_add_test(tc, test_config_value_that_is_a_flag);
    tcase_add_test(tc, test_config_ambiguous_numbers);
    tcase_add_test(tc, test_config_max_header_bytes_bounds);
    tcase_add_test(tc, test_config_file_flags_must_be_files);
    tcase_add_test(tc, test_config_kubernetes_names);
    tcase_add_test(tc, test_config_shutdown_deadline);
    tcase_add_test(tc, test_config_duration_flags_bounded);
    tcase_add_test(tc, test_config_webhook_host);
    tcase_add_test(tc, test_config_error_is_one_line);
    tcase_add_test(tc, test_config_port_clash);
    tcase_add_test(tc, test_config_clusters);
    tcase_add_test(tc, test_config_cluster_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(config_suite());
}
