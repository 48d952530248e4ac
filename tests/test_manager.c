/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the operator manager, run in this process: the flags go through
 * kop_config_parse as main() passes them, and the manager's step observer
 * records the start and shutdown orders and checks, in the middle of a
 * shutdown, what must already have stopped and what must still run.
 *
 * Covers: --webhook-only on kernel-chosen ports with a generated pair
 * (/convert answers, /readyz fails from the first shutdown step while the
 * webhook still answers, the webhook is gone before the probe server);
 * --controller-only --leader-elect against kubesim (the replica leads and
 * gets ready; /readyz fails before the controller stops; the Lease is
 * still held while the controller and the events stop and is released
 * last); --shutdown-delay (readyz fails at once, the webhook serves through
 * the delay); failures of new and start are reported and freed.
 */
#include "kop/manager.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/arena.h"
#include "kop/certgen.h"
#include "kop/config.h"
#include "kop/log.h"
#include "kubetest.h"
#include "testutil.h"

#define TOKEN "manager-test-token"
#define NS "default"
#define LEASE_ID "kop-manager-test"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases/" LEASE_ID
#define KOP_TEST_HOLDER 320 /* a Lease holder identity, as KOP_LEADER_HOLDER_MAX */

static const char crd[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
    "\"metadata\":{\"name\":\"myresources.mygroup.example.com\"},\"spec\":{\"group\":"
    "\"mygroup.example.com\",\"names\":{\"plural\":\"myresources\",\"singular\":\"myresource\","
    "\"kind\":\"MyResource\"},\"scope\":\"Namespaced\",\"versions\":[{\"name\":\"v1\","
    "\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{"
    "\"openAPIV3Schema\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}]}}";

static const char review[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
    "\"request\":{\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
    "\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[{"
    "\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
    "\"metadata\":{\"name\":\"example-resource\",\"namespace\":\"default\"},"
    "\"spec\":{\"replicas\":3,\"image\":\"nginx:1.14.2\",\"port\":80,"
    "\"serviceType\":\"ClusterIP\"}}]}}";

static char *tmpdir;

static void setup(void)
{
    tmpdir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
}

static void teardown(void)
{
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    tmpdir = NULL;
}

/* Parse argv (NULL-terminated, without the program name) as main() does. */
static void parse(struct kop_config *cfg, char **args)
{
    char *argv[32];
    int argc = 0;
    argv[argc++] = "kop";
    for (char **a = args; *a; a++) {
        ck_assert_int_lt(argc, 31);
        argv[argc++] = *a;
    }
    argv[argc] = NULL;
    int r = kop_config_parse(cfg, argc, argv, NULL, NULL, NULL);
    ck_assert_int_eq(r, KOP_CONFIG_OK);
}

/* A CA and a serving pair for 127.0.0.1 in dir (tls.crt, tls.key, ca.crt). */
static void write_pair(const char *dir)
{
    static const char *const ips[] = {"127.0.0.1", NULL};
    static const char *const names[] = {"localhost", NULL};
    const struct kop_certgen_options g = {.dns_names = names, .ip_addresses = ips};
    struct kop_certgen_pair p = {0};
    ck_assert_int_eq(kop_certgen_generate(&g, &p), 0);
    ck_assert_int_eq(kop_certgen_write_dir(dir, &p), 0);
    kop_certgen_pair_cleanup(&p);
}

/* GET http://127.0.0.1:port/readyz: the HTTP code, 0 when nothing answers. */
static long readyz(uint16_t port)
{
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/readyz", (unsigned)port);
    const struct kop_test_http_options o = {.timeout_s = 10};
    char *body = NULL;
    long code = kop_test_http(&o, "GET", url, NULL, &body);
    free(body);
    return code;
}

/* POST the review to /convert: the HTTP code (0: no answer); *ret_body. */
static long convert(uint16_t port, const char *ca, char **ret_body)
{
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%u/convert?timeout=10s", (unsigned)port);
    const struct kop_test_http_options o = {.ca = ca, .ctype = "application/json", .timeout_s = 10};
    return kop_test_http(&o, "POST", url, review, ret_body);
}

/* ---- step observer ---------------------------------------------------------------------- */

struct steps {
    char seen[256]; /* "a,b,c" */
    struct kop_manager *m;
    uint16_t health_port, webhook_port;
    const char *ca;
    /* what the shutdown steps found */
    long readyz_at_webhook, convert_at_webhook, convert_at_probes, readyz_at_probes;
    long readyz_at_controller;
    char holder_at_controller[KOP_TEST_HOLDER], holder_at_lease[KOP_TEST_HOLDER];
    bool shutting_down;
    const char *sim_url, *sim_ca;
    atomic_bool in_delay, past_delay; /* the "delay" step began; the next one did */
};

static void record(struct steps *s, const char *name)
{
    size_t n = strlen(s->seen);
    snprintf(s->seen + n, sizeof(s->seen) - n, "%s%s", n ? "," : "", name);
}

/* The Lease's holderIdentity into buf ("" when released, "-" when absent). */
static void lease_holder(const char *url, const char *ca, char *buf, size_t len)
{
    const struct kop_test_http_options o = {.ca = ca, .token = TOKEN, .timeout_s = 10};
    json_t *l = kop_test_api_get(&o, url, LEASE_PATH);
    const char *h =
        json_string_value(json_object_get(json_object_get(l, "spec"), "holderIdentity"));
    snprintf(buf, len, "%s", l ? (h ? h : "") : "-");
    json_decref(l);
}

static void on_step(void *ud, const char *name)
{
    struct steps *s = ud;
    record(s, name);
    if (!s->shutting_down)
        return;
    if (strcmp(name, "delay") == 0)
        atomic_store(&s->in_delay, true);
    else if (atomic_load(&s->in_delay))
        atomic_store(&s->past_delay, true);
    if (atomic_load(&s->in_delay) && strcmp(name, "webhook") == 0)
        return; /* test_manager_shutdown_delay looks for itself */
    if (strcmp(name, "webhook") == 0) {
        /* After "readyz", before "webhook": not ready, still serving. */
        s->readyz_at_webhook = readyz(s->health_port);
        char *body = NULL;
        s->convert_at_webhook = convert(s->webhook_port, s->ca, &body);
        free(body);
    } else if (strcmp(name, "probes") == 0) {
        s->readyz_at_probes = readyz(s->health_port);
        if (s->webhook_port) {
            char *body = NULL;
            s->convert_at_probes = convert(s->webhook_port, s->ca, &body);
            free(body);
        }
    } else if (strcmp(name, "controller") == 0) {
        s->readyz_at_controller = readyz(s->health_port);
        lease_holder(s->sim_url, s->sim_ca, s->holder_at_controller,
                     sizeof(s->holder_at_controller));
    } else if (strcmp(name, "lease") == 0) {
        lease_holder(s->sim_url, s->sim_ca, s->holder_at_lease, sizeof(s->holder_at_lease));
    }
}

static bool manager_ready(const void *arg)
{
    return kop_manager_ready((struct kop_manager *)arg);
}

/* ---- tests ------------------------------------------------------------------------------- */

START_TEST(test_manager_webhook_only)
{
    char certs[512], ca[600];
    snprintf(certs, sizeof(certs), "%s/certs", tmpdir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    write_pair(certs);
    char cert_dir[600];
    snprintf(cert_dir, sizeof(cert_dir), "--cert-dir=%s", certs);
    char *args[] = {"--webhook-only",
                    "--webhook-port=0",
                    "--webhook-host=127.0.0.1",
                    cert_dir,
                    "--metrics-bind-address=127.0.0.1:0",
                    "--health-probe-bind-address=127.0.0.1:0",
                    "--shutdown-delay=0",
                    NULL};
    struct kop_config cfg;
    parse(&cfg, args);

    struct kop_manager *m = NULL;
    ck_assert_int_eq(kop_manager_new(&cfg, &m), 0);
    ck_assert_ptr_nonnull(m);
    struct steps s = {.m = m, .ca = ca};
    kop_manager_set_step_observer(m, on_step, &s);
    ck_assert_uint_eq(kop_manager_webhook_port(m), 0);
    ck_assert(!kop_manager_ready(m));
    ck_assert(!kop_manager_leading(m));

    ck_assert_int_eq(kop_manager_start(m), 0);
    ck_assert_str_eq(s.seen, "probes,webhook");
    ck_assert_int_eq(kop_manager_start(m), -EALREADY);
    s.webhook_port = kop_manager_webhook_port(m);
    s.health_port = kop_manager_health_port(m);
    ck_assert_uint_gt(s.webhook_port, 0);
    ck_assert_uint_gt(s.health_port, 0);
    ck_assert_uint_gt(kop_manager_metrics_port(m), 0);
    ck_assert(kop_test_eventually(manager_ready, m, 10000));
    ck_assert_int_eq(readyz(s.health_port), 200);

    char *body = NULL;
    ck_assert_int_eq(convert(s.webhook_port, ca, &body), 200);
    json_t *r = json_loads(body ? body : "", 0, NULL);
    free(body);
    ck_assert_ptr_nonnull(r);
    json_t *resp = json_object_get(r, "response");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(resp, "result"), "status")),
                     "Success");
    json_t *o = json_array_get(json_object_get(resp, "convertedObjects"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")), "mygroup.example.com/v2");
    json_decref(r);

    s.seen[0] = '\0';
    s.shutting_down = true;
    ck_assert_int_eq(kop_manager_shutdown(m, 10000), 0);
    ck_assert_str_eq(s.seen, "readyz,webhook,free,probes");
    ck_assert_int_eq(s.readyz_at_webhook, 503);
    ck_assert_int_eq(s.convert_at_webhook, 200);
    ck_assert_int_eq(s.readyz_at_probes, 503);
    ck_assert_int_eq(s.convert_at_probes, 0);
    ck_assert(!kop_manager_ready(m));
    ck_assert_int_eq(readyz(s.health_port), 0);
    /* A second shutdown does nothing. */
    s.seen[0] = '\0';
    ck_assert_int_eq(kop_manager_shutdown(m, 10000), 0);
    ck_assert_str_eq(s.seen, "");
    kop_manager_free(m);
    kop_config_cleanup(&cfg);
}
END_TEST

START_TEST(test_manager_controller_leader_election)
{
    char kc[512], sim_ca[512];
    snprintf(kc, sizeof(kc), "%s/kubeconfig", tmpdir);
    snprintf(sim_ca, sizeof(sim_ca), "%s/sim-ca.pem", tmpdir);
    struct kop_test_kubesim sim;
    const struct kop_test_kubesim_options so = {
        .listen = "127.0.0.1:0", .kubeconfig = kc, .ca = sim_ca, .token = TOKEN};
    kop_test_kubesim_start(&sim, &so);
    const struct kop_test_http_options ho = {.ca = sim_ca, .token = TOKEN, .timeout_s = 10};
    json_decref(kop_test_api(&ho, sim.url, "POST",
                             "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, 201));

    char kc_flag[600];
    snprintf(kc_flag, sizeof(kc_flag), "--kubeconfig=%s", kc);
    char *args[] = {"--controller-only",
                    kc_flag,
                    "--leader-elect",
                    "--leader-election-id=" LEASE_ID,
                    "--leader-election-namespace=" NS,
                    "--leader-election-lease-duration=4s",
                    "--leader-election-renew-deadline=3s",
                    "--leader-election-retry-period=500ms",
                    "--metrics-bind-address=0",
                    "--health-probe-bind-address=127.0.0.1:0",
                    NULL};
    struct kop_config cfg;
    parse(&cfg, args);

    struct kop_manager *m = NULL;
    ck_assert_int_eq(kop_manager_new(&cfg, &m), 0);
    struct steps s = {.m = m, .sim_url = sim.url, .sim_ca = sim_ca};
    kop_manager_set_step_observer(m, on_step, &s);
    ck_assert_int_eq(kop_manager_start(m), 0);
    ck_assert_str_eq(s.seen, "probes,controller,leader-election");
    ck_assert_uint_eq(kop_manager_webhook_port(m), 0);
    ck_assert_uint_eq(kop_manager_metrics_port(m), 0);
    s.health_port = kop_manager_health_port(m);
    ck_assert_uint_gt(s.health_port, 0);

    ck_assert(kop_test_eventually(manager_ready, m, 15000));
    ck_assert_int_eq(readyz(s.health_port), 200);
    for (long end = kop_test_now_ms() + 15000; !kop_manager_leading(m) && kop_test_now_ms() < end;)
        kop_test_sleep_ms(50);
    ck_assert(kop_manager_leading(m));
    char holder[KOP_TEST_HOLDER];
    lease_holder(sim.url, sim_ca, holder, sizeof(holder));
    ck_assert_str_ne(holder, "");
    ck_assert_str_ne(holder, "-");

    s.seen[0] = '\0';
    s.shutting_down = true;
    ck_assert_int_eq(kop_manager_shutdown(m, 10000), 0);
    ck_assert_str_eq(s.seen, "readyz,controller,events,lease,free,probes");
    /* /readyz failed before the controller stopped; the lease was still
     * ours while the controller and the events stopped, and released at
     * the end. */
    ck_assert_int_eq(s.readyz_at_controller, 503);
    ck_assert_str_eq(s.holder_at_controller, holder);
    ck_assert_str_eq(s.holder_at_lease, holder);
    ck_assert(!kop_manager_leading(m));
    char after[KOP_TEST_HOLDER];
    lease_holder(sim.url, sim_ca, after, sizeof(after));
    ck_assert_str_eq(after, "");
    ck_assert_int_eq(s.readyz_at_probes, 503);
    ck_assert_int_eq(readyz(s.health_port), 0);
    kop_manager_free(m);
    kop_config_cleanup(&cfg);
    ck_assert_int_eq(kop_test_kubesim_stop(&sim, SIGTERM, 15000), 0);
}
END_TEST

/* new fails without an API server configuration; start fails without a
 * certificate, and free stops the probe server it had started. */
struct shutdown_run {
    struct kop_manager *m;
    int r;
};

static void *shutdown_main(void *arg)
{
    struct shutdown_run *sr = arg;
    sr->r = kop_manager_shutdown(sr->m, 20000);
    return NULL;
}

static bool in_delay(const void *arg)
{
    return atomic_load(&((struct steps *)arg)->in_delay);
}

/*
 * --shutdown-delay: /readyz fails from the first step while the webhook
 * keeps answering, new connections included, until the delay is over;
 * then the order of today goes on.
 */
START_TEST(test_manager_shutdown_delay)
{
    char certs[512], ca[600];
    snprintf(certs, sizeof(certs), "%s/certs", tmpdir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    write_pair(certs);
    char cert_dir[600];
    snprintf(cert_dir, sizeof(cert_dir), "--cert-dir=%s", certs);
    char *args[] = {"--webhook-only",           "--webhook-port=0",
                    "--webhook-host=127.0.0.1", cert_dir,
                    "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0",
                    "--shutdown-delay=3s",      NULL};
    struct kop_config cfg;
    parse(&cfg, args);
    struct kop_manager *m = NULL;
    ck_assert_int_eq(kop_manager_new(&cfg, &m), 0);
    struct steps s = {.m = m, .ca = ca};
    kop_manager_set_step_observer(m, on_step, &s);
    ck_assert_int_eq(kop_manager_start(m), 0);
    s.webhook_port = kop_manager_webhook_port(m);
    s.health_port = kop_manager_health_port(m);
    ck_assert(kop_test_eventually(manager_ready, m, 10000));

    s.seen[0] = '\0';
    s.shutting_down = true;
    struct shutdown_run sr = {.m = m};
    long t0 = kop_test_now_ms();
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, shutdown_main, &sr), 0);
    ck_assert(kop_test_eventually(in_delay, &s, 10000));
    long readyz_code = readyz(s.health_port);
    char *body = NULL;
    long convert_code = convert(s.webhook_port, ca, &body); /* a new connection */
    free(body);
    bool within = !atomic_load(&s.past_delay);
    pthread_join(th, NULL);
    long took = kop_test_now_ms() - t0;

    ck_assert_int_eq(sr.r, 0);
    ck_assert_str_eq(s.seen, "readyz,delay,webhook,free,probes");
    ck_assert_int_eq(readyz_code, 503);
    ck_assert_int_eq(convert_code, 200);
    ck_assert_msg(within, "the requests did not fit in the 3 s delay");
    ck_assert_msg(took >= 3000, "shutdown took %ld ms, less than the delay", took);
    kop_manager_free(m);
    kop_config_cleanup(&cfg);
}
END_TEST

START_TEST(test_manager_failures)
{
    char kc_flag[600];
    snprintf(kc_flag, sizeof(kc_flag), "--kubeconfig=%s/missing", tmpdir);
    char *args[] = {"--controller-only", kc_flag, "--health-probe-bind-address=0",
                    "--metrics-bind-address=0", NULL};
    struct kop_config cfg;
    parse(&cfg, args);
    struct kop_manager *m = NULL;
    ck_assert_int_eq(kop_manager_new(&cfg, &m), -ENOENT);
    ck_assert_ptr_null(m);
    kop_config_cleanup(&cfg);

    char cert_dir[600];
    snprintf(cert_dir, sizeof(cert_dir), "--cert-dir=%s/empty", tmpdir);
    char *wargs[] = {"--webhook-only",
                     "--webhook-port=0",
                     "--webhook-host=127.0.0.1",
                     cert_dir,
                     "--metrics-bind-address=0",
                     "--health-probe-bind-address=127.0.0.1:0",
                     NULL};
    parse(&cfg, wargs);
    ck_assert_int_eq(kop_manager_new(&cfg, &m), 0);
    struct steps s = {.m = m};
    kop_manager_set_step_observer(m, on_step, &s);
    ck_assert_int_eq(kop_manager_start(m), -ENOENT);
    ck_assert_str_eq(s.seen, "probes,webhook");
    uint16_t health = kop_manager_health_port(m);
    ck_assert_uint_gt(health, 0);
    ck_assert_int_eq(readyz(health), 503);
    ck_assert(!kop_manager_ready(m));
    kop_manager_free(m);
    ck_assert_int_eq(readyz(health), 0);
    kop_config_cleanup(&cfg);
}
END_TEST

static Suite *manager_suite(void)
{
    Suite *s = suite_create("manager");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_manager_webhook_only);
    tcase_add_test(tc, test_manager_controller_leader_election);
    tcase_add_test(tc, test_manager_shutdown_delay);
    tcase_add_test(tc, test_manager_failures);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* The process-wide setup main() does, before any jansson value exists
     * (docs/architecture.md §3.3). */
    json_object_seed(0);
    kop_arena_json_install();
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    kop_log_setup(KOP_LOG_WARN, KOP_LOG_FORMAT_JSON, 2);
    int r = kop_test_run(manager_suite());
    curl_global_cleanup();
    return r;
}
