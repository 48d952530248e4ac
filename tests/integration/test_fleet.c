/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One kop over three clusters (docs/reconcile.md §14): three kubesims,
 * each with its own CA and token, the first the local cluster (kop's
 * --kubeconfig) and two members "a" and "b" given with --cluster. kop
 * serves the webhooks and runs the controller (--kube-api-qps 200 per
 * cluster, --sync-period 3s so a resync is seen within the test).
 *
 * Covers: MyResources of the same names in every cluster converge in
 * their own cluster (Deployment, Service, status) and a resync writes
 * nothing in any of them (kubesim's writeTotal); admission rule 4 on a
 * member's path reads that member's cache (a name taken in "a" is denied
 * on .../clusters/a and allowed on .../clusters/b and the local path), an
 * unknown member is a 404 denial naming it; a member frozen with SIGSTOP
 * while objects change in the others: it is reported not ready
 * (kop_cluster_ready, a log line), the others converge meanwhile, and
 * after SIGCONT it is ready again and its objects converge.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NS "default"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define DEP_PATH "/apis/apps/v1/namespaces/" NS "/deployments"
#define SVC_PATH "/api/v1/namespaces/" NS "/services"
#define VALIDATE "/validate-mygroup-example-com-myresource"
#define N_CLUSTERS 3

/* [0] the local cluster, [1] member "a", [2] member "b" */
static const char *const names[N_CLUSTERS] = {"local", "a", "b"};
static const char *const tokens[N_CLUSTERS] = {"fleet-local-token", "fleet-a-token",
                                               "fleet-b-token"};
static struct kop_test_scratch fx[N_CLUSTERS];
static struct kop_test_kubesim sim[N_CLUSTERS];
static struct kop_test_certs certs;
static char *webhook_ca;
static struct kop_test_proc kop;
static struct kop_test_argv kop_args;
static bool kop_running;
static long metrics_port, webhook_port, health_port;

/* ---- the API of one cluster ------------------------------------------------------------ */

static const struct kop_test_http_options *api_opts(int i)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){
        .handle = fx[i].curl, .ca = fx[i].ca, .token = tokens[i], .timeout_s = 30, .attempts = 20};
    return &o;
}

static json_t *api(int i, const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(i), sim[i].url, method, path, body, want);
}

static json_int_t jint(const json_t *v, const char *a, const char *b)
{
    return json_integer_value(json_object_get(json_object_get(v, a), b));
}

static void create_myr(int i, const char *name, int replicas)
{
    char body[512];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"%s\"},\"spec\":{\"image\":\"nginx:1.27\",\"replicas\":%d}}",
             name, replicas);
    json_decref(api(i, "POST", MYR_PATH, body, 201));
}

static void create_many(int i, const char *prefix, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-%02zu", prefix, k);
        create_myr(i, name, 1 + (int)(k % 3));
    }
}

/* Items of a list in cluster i whose name starts with prefix. */
static size_t count_items(int i, const char *path, const char *prefix, bool converged_only)
{
    json_t *l = api(i, "GET", path, NULL, 200);
    size_t n = 0, k;
    json_t *m;
    json_array_foreach(json_object_get(l, "items"), k, m)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(m, "metadata"), "name"));
        if (!name || strncmp(name, prefix, strlen(prefix)) != 0)
            continue;
        if (converged_only &&
            (jint(m, "status", "observedGeneration") != jint(m, "metadata", "generation") ||
             jint(m, "status", "readyReplicas") != jint(m, "spec", "replicas")))
            continue;
        n++;
    }
    json_decref(l);
    return n;
}

struct want {
    int cluster;
    const char *prefix;
    size_t n;
};

/* n MyResources of prefix converged in their cluster, with as many
 * Deployments and Services there. */
static bool converged(const void *arg)
{
    const struct want *w = arg;
    return count_items(w->cluster, MYR_PATH, w->prefix, true) == w->n &&
           count_items(w->cluster, DEP_PATH, w->prefix, false) == w->n &&
           count_items(w->cluster, SVC_PATH, w->prefix, false) == w->n;
}

static json_int_t write_total(int i)
{
    json_t *s = api(i, "GET", "/_kubesim/stats", NULL, 200);
    json_int_t n = json_integer_value(json_object_get(s, "writeTotal"));
    json_decref(s);
    return n;
}

static double reconciles(const char *cluster)
{
    char label[64];
    snprintf(label, sizeof(label), "cluster=\"%s\"", cluster);
    double v =
        kop_test_scrape_sum(api_opts(0), metrics_port, "controller_runtime_reconcile_total", label);
    return v < 0 ? 0 : v;
}

static double cluster_ready(const char *cluster)
{
    char *text = kop_test_scrape(api_opts(0), metrics_port);
    char series[96];
    snprintf(series, sizeof(series), "kop_cluster_ready{cluster=\"%s\"}", cluster);
    double v = kop_test_metric_value(text, series);
    free(text);
    return v;
}

static bool all_ready(const void *arg)
{
    (void)arg;
    for (int i = 0; i < N_CLUSTERS; i++)
        if (cluster_ready(names[i]) != 1.0)
            return false;
    return true;
}

static void start_kop(void);

/* kop's output so far: its length, and whether needle is in it after
 * from. */
static size_t out_len(void)
{
    char *o = kop_test_output(&kop);
    size_t n = o ? strlen(o) : 0;
    free(o);
    return n;
}

static bool out_has(size_t from, const char *needle)
{
    char *o = kop_test_output(&kop);
    bool has = o && strlen(o) >= from && strstr(o + from, needle);
    free(o);
    return has;
}

/* The sanitizers' allocators keep freed memory (quarantine): RSS means
 * nothing there. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_MEANINGFUL 0
#endif
#endif
#ifndef RSS_MEANINGFUL
#define RSS_MEANINGFUL 1
#endif

/* ---- processes ----------------------------------------------------------------------- */

static void setup(void)
{
    char *args[] = {"--deployment-ready-delay", "100ms", "--bookmark-interval", "500ms", NULL};
    for (int i = 0; i < N_CLUSTERS; i++) {
        kop_test_scratch_init(&fx[i]);
        kop_test_scratch_kubesim(&fx[i], &sim[i], tokens[i], args);
        json_decref(api(i, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                        kop_test_myresource_crd, 201));
    }
    json_decref(api(0, "POST", "/api/v1/namespaces",
                    "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
                    "\"kop-system\"}}",
                    201));
    kop_test_certs_make(&certs, fx[0].dir);
    webhook_ca = kop_test_path(fx[0].dir, "ca.crt");
    static char member_a[1100], member_b[1100]; /* kop_args points at them */
    snprintf(member_a, sizeof(member_a), "a=%s", fx[1].kubeconfig);
    snprintf(member_b, sizeof(member_b), "b=%s", fx[2].kubeconfig);
    struct kop_test_argv *a = &kop_args;
    kop_test_kop_argv(a, fx[0].kubeconfig);
    kop_test_argv_add(a, "--cluster", member_a, "--cluster", member_b, "--cert-dir", fx[0].dir,
                      "--webhook-host", "127.0.0.1", "--webhook-port", "0",
                      "--health-probe-bind-address", "127.0.0.1:0", "--shutdown-delay", "0s",
                      "--sync-period", "3s", "--kube-api-qps", "200", "--kube-api-burst", "400",
                      "--cluster-secrets", "--leader-election-namespace", "kop-system", NULL);
    start_kop();
}

/* kop with kop_args; its ports, once the controller runs and every
 * cluster is ready. */
static void start_kop(void)
{
    ck_assert_int_eq(kop_test_spawn(&kop, kop_args.v), 0);
    kop_running = true;
    metrics_port = kop_test_logged_port(&kop, "serving metrics", 10000);
    webhook_port = kop_test_logged_port(&kop, "serving webhook", 10000);
    health_port = kop_test_logged_port(&kop, "serving health probes", 10000);
    ck_assert_msg(kop_test_wait_for(&kop, 0, "\"msg\":\"starting controller\"", 10000, NULL) > 0,
                  "kop controller did not start");
    ck_assert_msg(kop_test_eventually(all_ready, NULL, 10000), "the clusters are not ready");
}

static void stop_member_c(void);

static void teardown(void)
{
    stop_member_c();
    if (kop_running) {
        int st = kop_test_stop(&kop, SIGTERM, 15000);
        kop_running = false;
        ck_assert_msg(st == 0, "kop exit status %d", st);
    }
    for (int i = 0; i < N_CLUSTERS; i++) {
        kill(sim[i].proc.pid, SIGCONT); /* a test that failed while one was frozen */
        ck_assert_int_eq(kop_test_kubesim_stop(&sim[i], SIGTERM, 10000), 0);
    }
    free(webhook_ca);
    webhook_ca = NULL;
    kop_test_certs_free(&certs);
    for (int i = 0; i < N_CLUSTERS; i++)
        kop_test_scratch_free(&fx[i]);
}

/* ---- tests ------------------------------------------------------------------------------- */

/* The same names in every cluster: each converges in its own cluster, and
 * once all are quiet a resync reconciles every object and writes nothing
 * anywhere. */
START_TEST(test_fleet_converge_and_zero_writes)
{
    const size_t n = 15;
    for (int i = 0; i < N_CLUSTERS; i++)
        create_many(i, "web", n);
    for (int i = 0; i < N_CLUSTERS; i++) {
        const struct want w = {i, "web", n};
        ck_assert_msg(kop_test_eventually(converged, &w, 40000), "cluster %s did not converge",
                      names[i]);
    }
    /* the children carry their own cluster's owner uid */
    json_t *m = api(1, "GET", MYR_PATH "/web-00", NULL, 200);
    json_t *d = api(1, "GET", DEP_PATH "/web-00", NULL, 200);
    const char *uid = json_string_value(json_object_get(json_object_get(m, "metadata"), "uid"));
    json_t *refs = json_object_get(json_object_get(d, "metadata"), "ownerReferences");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(refs, 0), "uid")), uid);
    json_decref(m);
    json_decref(d);

    /* quiet: no write in any cluster for a second (Events go on their own thread) */
    json_int_t w1[N_CLUSTERS];
    for (long end = kop_test_now_ms() + 30000; kop_test_now_ms() < end;) {
        for (int i = 0; i < N_CLUSTERS; i++)
            w1[i] = write_total(i);
        kop_test_sleep_ms(1000);
        bool quiet = true;
        for (int i = 0; i < N_CLUSTERS; i++)
            quiet = quiet && write_total(i) == w1[i];
        if (quiet)
            break;
    }
    double r1[N_CLUSTERS];
    for (int i = 0; i < N_CLUSTERS; i++)
        r1[i] = reconciles(names[i]);
    /* a resync (every 3 s) reconciles every object of every cluster again */
    for (int i = 0; i < N_CLUSTERS; i++) {
        double r2 = r1[i];
        for (long end = kop_test_now_ms() + 20000;
             r2 - r1[i] < (double)n && kop_test_now_ms() < end;) {
            kop_test_sleep_ms(100);
            r2 = reconciles(names[i]);
        }
        ck_assert_msg(r2 - r1[i] >= (double)n, "no resync seen in %s: %g reconciles", names[i],
                      r2 - r1[i]);
    }
    for (int i = 0; i < N_CLUSTERS; i++)
        ck_assert_msg(write_total(i) == w1[i], "converged cluster %s wrote %lld times", names[i],
                      (long long)(write_total(i) - w1[i]));
    for (int i = 0; i < N_CLUSTERS; i++)
        ck_assert(cluster_ready(names[i]) == 1.0);
    /* every cluster's own series */
    char *text = kop_test_scrape(api_opts(0), metrics_port);
    ck_assert_ptr_nonnull(text);
    for (int i = 0; i < N_CLUSTERS; i++) {
        char want[160];
        snprintf(want, sizeof(want),
                 "controller_runtime_reconcile_total{controller=\"myresource\",cluster=\"%s\","
                 "result=\"success\"}",
                 names[i]);
        ck_assert_msg(kop_test_metric_value(text, want) >= (double)n, "%s", want);
        snprintf(want, sizeof(want), "kop_store_objects{cluster=\"%s\"}", names[i]);
        ck_assert_msg(kop_test_metric_value(text, want) >= (double)(3 * n), "%s", want);
        snprintf(want, sizeof(want), "method=\"GET\",host=\"%s\",cluster=\"%s\"}",
                 sim[i].url + strlen("https://"), names[i]);
        ck_assert_msg(strstr(text, want), "no rest_client_requests_total with %s", want);
    }
    free(text);
}
END_TEST

#define ADM_FMT                                                                                    \
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","                        \
    "\"request\":{\"uid\":\"adm-%s\",\"kind\":{\"group\":\"mygroup.example.com\","                 \
    "\"version\":\"v1\",\"kind\":\"MyResource\"},\"resource\":{\"group\":"                         \
    "\"mygroup.example.com\",\"version\":\"v1\",\"resource\":\"myresources\"},"                    \
    "\"operation\":\"CREATE\",\"namespace\":\"" NS "\",\"name\":\"%s\",\"object\":{"               \
    "\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"             \
    "\"name\":\"%s\",\"namespace\":\"" NS "\"},\"spec\":{\"image\":\"nginx:1.27\"}}}}"

/* The review's response for name on path (the webhook port). @ref new. */
static json_t *review(const char *path, const char *name)
{
    char url[256], body[2048];
    snprintf(url, sizeof(url), "https://127.0.0.1:%ld%s", webhook_port, path);
    snprintf(body, sizeof(body), ADM_FMT, name, name, name);
    const struct kop_test_http_options o = {
        .ca = webhook_ca, .ctype = "application/json", .timeout_s = 10, .attempts = 5};
    char *out = NULL;
    long code = kop_test_http(&o, "POST", url, body, &out);
    ck_assert_msg(code == 200, "%s: HTTP %ld: %s", path, code, out ? out : "");
    json_t *v = json_loads(out, 0, NULL);
    free(out);
    ck_assert_ptr_nonnull(v);
    json_t *resp = json_incref(json_object_get(v, "response"));
    json_decref(v);
    return resp;
}

static bool allowed(const char *path, const char *name)
{
    json_t *r = review(path, name);
    bool ok = json_is_true(json_object_get(r, "allowed"));
    json_decref(r);
    return ok;
}

static bool denied_on_a(const void *arg)
{
    return !allowed(VALIDATE "/clusters/a", arg);
}

START_TEST(test_fleet_admission_per_member)
{
    /* a Deployment without kop's label, in member "a" only */
    json_decref(api(1, "POST", DEP_PATH,
                    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
                    "\"taken\"},\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"t\"}},"
                    "\"template\":{\"metadata\":{\"labels\":{\"app\":\"t\"}},\"spec\":{"
                    "\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
                    201));
    ck_assert_msg(kop_test_eventually(denied_on_a, "taken", 10000),
                  "the name taken in member a was not denied on its path");
    json_t *r = review(VALIDATE "/clusters/a", "taken");
    const char *msg = json_string_value(json_object_get(json_object_get(r, "status"), "message"));
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, "taken") != NULL, "message: %s", msg);
    json_decref(r);
    ck_assert_msg(kop_test_wait_for(&kop, 0, "\"admissionUID\":\"adm-taken\"", 5000, NULL) > 0 &&
                      out_has(0, "\"violations\":1,\"cluster\":\"a\","),
                  "the denial's log line does not name member a");
    /* free in member b, in the local cluster (plain path and its name) */
    ck_assert(allowed(VALIDATE "/clusters/b", "taken"));
    ck_assert(allowed(VALIDATE, "taken"));
    ck_assert(allowed(VALIDATE "/clusters/local", "taken"));
    ck_assert(allowed(VALIDATE "/clusters/a", "free"));
    /* a member kop does not know: a denial that names it */
    r = review(VALIDATE "/clusters/nowhere", "free");
    ck_assert(json_is_false(json_object_get(r, "allowed")));
    json_t *st = json_object_get(r, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 404);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(st, "message")), "nowhere"));
    json_decref(r);
    r = review(VALIDATE "/clusters/a/b", "free");
    ck_assert_ptr_nonnull(strstr(
        json_string_value(json_object_get(json_object_get(r, "status"), "message")), "DNS label"));
    ck_assert(json_is_false(json_object_get(r, "allowed")));
    json_decref(r);
    ck_assert(!out_has(0, "AddressSanitizer"));
}
END_TEST

static bool not_ready_b(const void *arg)
{
    (void)arg;
    return cluster_ready("b") == 0.0;
}

static bool ready_b(const void *arg)
{
    (void)arg;
    return cluster_ready("b") == 1.0;
}

static long readyz_code(void)
{
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/readyz", health_port);
    const struct kop_test_http_options o = {.ctype = "text/plain", .timeout_s = 5, .attempts = 1};
    char *out = NULL;
    long code = kop_test_http(&o, "GET", url, NULL, &out);
    free(out);
    return code;
}

/* Scale the n MyResources of prefix in cluster i to replicas. */
static void scale_many(int i, const char *prefix, size_t n, int replicas)
{
    for (size_t k = 0; k < n; k++) {
        char path[256], body[96];
        snprintf(path, sizeof(path), MYR_PATH "/%s-%02zu", prefix, k);
        snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", replicas);
        const struct kop_test_http_options o = {.handle = fx[i].curl,
                                                .ca = fx[i].ca,
                                                .token = tokens[i],
                                                .ctype = "application/merge-patch+json",
                                                .timeout_s = 30,
                                                .attempts = 20};
        json_decref(kop_test_api(&o, sim[i].url, "PATCH", path, body, 200));
    }
}

/* Milliseconds until batch prefix (n objects) converged in local and a. */
static long converge_local_and_a(const char *prefix, size_t n)
{
    long t0 = kop_test_now_ms();
    for (int i = 0; i < 2; i++)
        create_many(i, prefix, n);
    for (int i = 0; i < 2; i++) {
        const struct want w = {i, prefix, n};
        ck_assert_msg(kop_test_eventually(converged, &w, 30000), "%s: %s did not converge", prefix,
                      names[i]);
    }
    return kop_test_now_ms() - t0;
}

/* b frozen with SIGSTOP for 30 s while objects change everywhere (b's own
 * changes made just before the freeze): local and a converge a batch as
 * fast as the same batch before the freeze (side by side; the bound only
 * catches workers held by b, which would cost a request timeout), kop
 * stays ready, b is reported not ready and logged, and after SIGCONT b
 * catches up without losing anything. */
START_TEST(test_fleet_frozen_member)
{
    const size_t n = 10;
    for (int i = 0; i < N_CLUSTERS; i++)
        create_many(i, "pre", n);
    for (int i = 0; i < N_CLUSTERS; i++) {
        const struct want w = {i, "pre", n};
        ck_assert_msg(kop_test_eventually(converged, &w, 40000), "%s did not converge", names[i]);
    }
    long base_ms = converge_local_and_a("base", n);

    /* work for b, then freeze it before kop can have done much of it */
    create_many(2, "late", n);
    scale_many(2, "pre", n, 2);
    ck_assert_int_eq(kill(sim[2].proc.pid, SIGSTOP), 0);
    long t0 = kop_test_now_ms();
    size_t mark = out_len();
    long frozen_ms = converge_local_and_a("during", n);
    scale_many(0, "pre", n, 3);
    scale_many(1, "pre", n, 3);
    fprintf(stderr,
            "fleet: %zu objects in local and a: %ld ms before b froze, %ld ms while frozen\n",
            2 * n, base_ms, frozen_ms);
    ck_assert_msg(frozen_ms <= 3 * base_ms + 3000,
                  "local and a slowed down by frozen b: %ld ms against %ld ms", frozen_ms, base_ms);
    ck_assert_msg(kop_test_eventually(not_ready_b, NULL, 10000), "frozen b still ready");
    ck_assert_msg(kop_test_wait_for(&kop, mark, "\"msg\":\"cluster not ready\",\"cluster\":\"b\"",
                                    5000, NULL) > 0,
                  "no log line for b's state");
    ck_assert(cluster_ready("local") == 1.0 && cluster_ready("a") == 1.0);
    ck_assert_int_eq(readyz_code(), 200);
    while (kop_test_now_ms() - t0 < 30000)
        kop_test_sleep_ms(500);
    ck_assert(cluster_ready("b") == 0.0);
    ck_assert_int_eq(readyz_code(), 200);
    for (int i = 0; i < 2; i++) {
        const struct want w = {i, "pre", n};
        ck_assert(converged(&w));
    }

    mark = out_len();
    ck_assert_int_eq(kill(sim[2].proc.pid, SIGCONT), 0);
    long t1 = kop_test_now_ms();
    ck_assert_msg(kop_test_eventually(ready_b, NULL, 15000), "b not ready again");
    ck_assert(kop_test_wait_for(&kop, mark, "\"msg\":\"cluster ready\",\"cluster\":\"b\"", 5000,
                                NULL) > 0);
    /* b catches up: the objects created and scaled before the freeze */
    const struct want w = {2, "late", n};
    ck_assert_msg(kop_test_eventually(converged, &w, 30000), "b did not catch up");
    const struct want w0 = {2, "pre", n};
    ck_assert_msg(kop_test_eventually(converged, &w0, 30000), "b lost the scale of pre");
    json_t *d = api(2, "GET", DEP_PATH "/pre-00", NULL, 200);
    ck_assert_int_eq(jint(d, "spec", "replicas"), 2);
    json_decref(d);
    fprintf(stderr, "fleet: b caught up %ld ms after SIGCONT\n", kop_test_now_ms() - t1);
}
END_TEST

/* ---- members from Secrets ---------------------------------------------------------------- */

#define SECRETS_PATH "/api/v1/namespaces/kop-system/secrets"

/* kop's resident set in KiB (/proc/PID/status VmRSS). */
static long kop_rss_kib(void)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)kop.pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* An inline kubeconfig for the kubesim of scratch x with token, in base64
 * (a Secret's data); extra is appended to the user (a tokenFile...).
 * malloc'd. */
static char *inline_kubeconfig(const struct kop_test_scratch *x, const struct kop_test_kubesim *k,
                               const char *token, const char *extra)
{
    char *ca = kop_test_file_base64(x->ca);
    ck_assert_ptr_nonnull(ca);
    size_t n = strlen(ca) + 1024;
    char *yaml = malloc(n);
    ck_assert_ptr_nonnull(yaml);
    snprintf(yaml, n,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: %s\n"
             "    certificate-authority-data: %s\nusers:\n- name: u\n  user:\n    token: %s\n%s"
             "contexts:\n- name: m\n  context: {cluster: m, user: u}\ncurrent-context: m\n",
             k->url, ca, token, extra ? extra : "");
    char *b64 = kop_test_base64(yaml, strlen(yaml));
    free(yaml);
    free(ca);
    return b64;
}

static void put_secret(const char *method, const char *secret, const char *cluster, const char *b64,
                       long want)
{
    size_t n = strlen(b64) + 512;
    char *body = malloc(n);
    char path[256];
    ck_assert_ptr_nonnull(body);
    snprintf(body, n,
             "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":{\"kop.io/cluster\":\"%s\"}},\"data\":{\"kubeconfig\":\"%s\"}}",
             secret, cluster, b64);
    snprintf(path, sizeof(path), "%s%s%s", SECRETS_PATH, strcmp(method, "PUT") == 0 ? "/" : "",
             strcmp(method, "PUT") == 0 ? secret : "");
    json_decref(api(0, method, path, body, want));
    free(body);
}

static bool ready_c(const void *arg)
{
    (void)arg;
    return cluster_ready("c") == 1.0;
}

/* No series of cluster c left on /metrics. */
static bool c_series_gone(const void *arg)
{
    (void)arg;
    char *text = kop_test_scrape(api_opts(0), metrics_port);
    bool gone = text && !strstr(text, "cluster=\"c\"");
    free(text);
    return gone;
}

/* The kubesim of member c, made in the test. */
static struct kop_test_scratch fxc;
static struct kop_test_kubesim simc;
static bool simc_running; /* teardown stops it when a test failed halfway */

static void stop_member_c(void)
{
    if (!simc_running)
        return;
    simc_running = false;
    (void)kop_test_kubesim_stop(&simc, SIGTERM, 10000);
    kop_test_scratch_free(&fxc);
}

static json_t *api_c(const char *method, const char *path, const char *body, long want)
{
    const struct kop_test_http_options o = {.handle = fxc.curl,
                                            .ca = fxc.ca,
                                            .token = "fleet-c-token",
                                            .timeout_s = 30,
                                            .attempts = 20};
    return kop_test_api(&o, simc.url, method, path, body, want);
}

static size_t count_c(const char *path, const char *prefix)
{
    json_t *l = api_c("GET", path, NULL, 200);
    size_t n = 0, k;
    json_t *m;
    json_array_foreach(json_object_get(l, "items"), k, m)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(m, "metadata"), "name"));
        if (name && strncmp(name, prefix, strlen(prefix)) == 0)
            n++;
    }
    json_decref(l);
    return n;
}

static bool c_converged(const void *arg)
{
    size_t n = *(const size_t *)arg;
    return count_c(DEP_PATH, "sec") == n && count_c(SVC_PATH, "sec") == n;
}

static void create_c(const char *prefix, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        char body[512];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":"
                 "{\"name\":\"%s-%02zu\"},\"spec\":{\"image\":\"nginx:1.27\",\"replicas\":1}}",
                 prefix, k);
        json_decref(api_c("POST", MYR_PATH, body, 201));
    }
}

/* A member engaged through a Secret is reconciled in itself and admission
 * reads its cache; a kubeconfig change re-engages it (a wrong token: not
 * ready; the right one again: ready); a kubeconfig that names a file is
 * refused; the Secret deleted, kop stops writing to it, its series go and
 * kop's RSS is back within 1 MiB. */
START_TEST(test_fleet_secret_member)
{
    char *args[] = {"--deployment-ready-delay", "100ms", NULL};
    kop_test_scratch_init(&fxc);
    kop_test_scratch_kubesim(&fxc, &simc, "fleet-c-token", args);
    simc_running = true;
    json_decref(api_c("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                      kop_test_myresource_crd, 201));
    size_t n = 10;
    create_c("sec-a", n);
    char *good = inline_kubeconfig(&fxc, &simc, "fleet-c-token", NULL);
    char *bad = inline_kubeconfig(&fxc, &simc, "not-the-token", NULL);
    char *filed = inline_kubeconfig(&fxc, &simc, "x",
                                    "    tokenFile: /var/run/secrets/kubernetes.io/"
                                    "serviceaccount/token\n");
    long rss_first = kop_rss_kib();

    /* engaged: reconciled there */
    put_secret("POST", "member-c", "c", good, 201);
    ck_assert_msg(kop_test_eventually(ready_c, NULL, 15000), "member c not ready");
    ck_assert_msg(kop_test_eventually(c_converged, &n, 30000), "member c did not converge");
    ck_assert(kop_test_wait_for(&kop, 0, "\"msg\":\"member cluster engaged\",\"cluster\":\"c\"",
                                1000, NULL) > 0);

    /* re-engaged with a wrong token: not ready; with the right one: ready */
    size_t mark = out_len();
    put_secret("PUT", "member-c", "c", bad, 200);
    ck_assert(kop_test_wait_for(&kop, mark, "\"reason\":\"its kubeconfig changed\"", 10000, NULL) >
              0);
    ck_assert(kop_test_wait_for(&kop, mark, "\"msg\":\"member cluster engaged\",\"cluster\":\"c\"",
                                10000, NULL) > 0);
    kop_test_sleep_ms(1500);
    ck_assert(cluster_ready("c") == 0.0);
    put_secret("PUT", "member-c", "c", good, 200);
    ck_assert_msg(kop_test_eventually(ready_c, NULL, 15000), "member c not ready again");

    /* a kubeconfig naming a file of kop's is refused */
    mark = out_len();
    put_secret("POST", "member-d", "d", filed, 201);
    ck_assert(kop_test_wait_for(&kop, mark, "\"msg\":\"member cluster Secret refused\"", 10000,
                                NULL) > 0);
    ck_assert(out_has(mark, "a tokenFile"));
    ck_assert(cluster_ready("d") < 0);
    json_decref(api(0, "DELETE", SECRETS_PATH "/member-d", NULL, 200));

    /* A first disengage. What the allocator keeps of the first member's
     * threads and connections (glibc's arenas and thread stack cache keep
     * their high-water mark, reused by the next member) is in the
     * baseline; what must come back is what one engaged member holds. */
    json_decref(api(0, "DELETE", SECRETS_PATH "/member-c", NULL, 200));
    ck_assert_msg(kop_test_eventually(c_series_gone, NULL, 10000), "c's series stayed");
    kop_test_sleep_ms(1000);
    long rss0 = kop_rss_kib();

    /* engaged again: the objects created meanwhile converge, and admission
     * on its path reads its caches */
    create_c("sec-b", n);
    n *= 2;
    put_secret("POST", "member-c", "c", good, 201);
    ck_assert_msg(kop_test_eventually(ready_c, NULL, 15000), "member c not ready");
    ck_assert_msg(kop_test_eventually(c_converged, &n, 30000), "member c did not converge");
    ck_assert(allowed(VALIDATE "/clusters/c", "sec-free"));
    long rss1 = kop_rss_kib();

    /* disengaged: kop stops writing to it, its series and path go */
    mark = out_len();
    json_decref(api(0, "DELETE", SECRETS_PATH "/member-c", NULL, 200));
    ck_assert(kop_test_wait_for(&kop, mark,
                                "\"msg\":\"member cluster disengaged\",\"cluster\":\"c\"", 10000,
                                NULL) > 0);
    ck_assert_msg(kop_test_eventually(c_series_gone, NULL, 5000), "c's series stayed");
    json_t *r = review(VALIDATE "/clusters/c", "sec-free");
    ck_assert(json_is_false(json_object_get(r, "allowed")));
    json_decref(r);
    json_t *stats = api_c("GET", "/_kubesim/stats", NULL, 200);
    json_int_t w0 = json_integer_value(json_object_get(stats, "writeTotal"));
    json_decref(stats);
    json_decref(api_c("POST", MYR_PATH,
                      "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                      "\"metadata\":{\"name\":\"sec-after\"},\"spec\":{\"image\":\"nginx:1.27\"}}",
                      201));
    kop_test_sleep_ms(4000); /* more than a resync (3 s) */
    stats = api_c("GET", "/_kubesim/stats", NULL, 200);
    json_int_t w1 = json_integer_value(json_object_get(stats, "writeTotal"));
    json_decref(stats);
    ck_assert_msg(w1 == w0 + 1, "kop wrote %lld times to disengaged c", (long long)(w1 - w0 - 1));
    ck_assert_uint_eq(count_c(DEP_PATH, "sec-after"), 0);
    long rss2 = kop_rss_kib();
    fprintf(stderr,
            "fleet: RSS %ld KiB before any Secret member, %ld KiB after the first went, %ld KiB "
            "with c again, %ld KiB after c went again\n",
            rss_first, rss0, rss1, rss2);
    if (RSS_MEANINGFUL)
        ck_assert_msg(rss2 - rss0 <= 1024, "RSS grew by %ld KiB", rss2 - rss0);

    /* a Secret that is there when kop starts is engaged once its list is
     * in */
    put_secret("POST", "member-c", "c", good, 201);
    ck_assert_int_eq(kop_test_stop(&kop, SIGTERM, 15000), 0);
    kop_running = false;
    start_kop();
    ck_assert_msg(kop_test_eventually(ready_c, NULL, 15000), "c not engaged at start");
    n += 1; /* sec-after */
    ck_assert_msg(kop_test_eventually(c_converged, &n, 30000), "c did not converge after restart");
    free(good);
    free(bad);
    free(filed);
    simc_running = false;
    ck_assert_int_eq(kop_test_kubesim_stop(&simc, SIGTERM, 10000), 0);
    kop_test_scratch_free(&fxc);
}
END_TEST

static Suite *fleet_suite(void)
{
    Suite *s = suite_create("integration_fleet");
    TCase *tc = tcase_create("fleet");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fleet_converge_and_zero_writes);
    tcase_add_test(tc, test_fleet_admission_per_member);
    tcase_add_test(tc, test_fleet_frozen_member);
    tcase_add_test(tc, test_fleet_secret_member);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(fleet_suite());
}
