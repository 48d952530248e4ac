/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reconciler end to end: kubesim and `kop --controller-only` as real
 * processes on kernel-chosen loopback ports, the MyResource CRD registered
 * in kubesim (v1 only is read and written, so no conversion webhook is
 * needed), and the test driving the API over HTTPS with libcurl.
 *
 * kop runs with --kube-api-qps 400 --kube-api-burst 800: the defaults
 * (20/30) would make the 1,000-object case take minutes; the limiter is
 * still on and every request waits on it. --sync-period 2s makes the
 * periodic resync observable within the test.
 *
 * Covers: the seed example -> Deployment + Service with a controller
 * ownerReference and an Available status; children following spec
 * changes (v1 image tag, a second port through the v2-extras
 * annotation); a scaled Deployment and a deleted Service restored;
 * garbage collection after the MyResource is deleted; paused; a name
 * collision with a foreign Deployment (Degraded, untouched); zero writes
 * for a converged set of 200 across a resync; 1,000 created at once; and
 * convergence under dropped watches, compaction (410) and 5% 5xx.
 *
 * Admission rule 4 end to end (TCase "admission"): ONE kop process serving
 * the webhooks and running the controller against kubesim, with the CRD
 * and manifests/base/webhook.yaml applied by kubectl (caBundle = the
 * test's dev CA, as cainjector would) and kop's webhook port registered
 * through /_kubesim/services. A Deployment or Service without kop's label
 * makes a CREATE of a same-named MyResource fail with a message naming it,
 * and so does one labelled as kop's but controlled by another MyResource;
 * other names are admitted; objects created or deleted after the caches
 * synced are seen through the metadata watches.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "operator-test-token"
#define NS "default"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define DEP_PATH "/apis/apps/v1/namespaces/" NS "/deployments"
#define SVC_PATH "/api/v1/namespaces/" NS "/services"

static struct kop_test_kubesim sim;
static struct kop_test_proc kop;
static bool kop_running;
static struct kop_test_scratch fx;
static long metrics_port;

/* ---- HTTP -------------------------------------------------------------------------- */

/* One request on the kept-alive handle; retried on 5xx/429 (the fault
 * tests inject them). Returns the HTTP code; *ret_body malloc'd. */
static long http(const char *method, const char *url, const char *ctype, const char *body,
                 char **ret_body)
{
    const struct kop_test_http_options o = {.handle = fx.curl,
                                            .ca = fx.ca,
                                            .token = TOKEN,
                                            .ctype = ctype ? ctype : "application/json",
                                            .timeout_s = 30,
                                            .attempts = 20};
    return kop_test_http(&o, method, url, body, ret_body);
}

static const struct kop_test_http_options *api_opts(void)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){
        .handle = fx.curl,
        .ca = fx.ca,
        .token = TOKEN,
        .timeout_s = 30,
        .attempts = 20,
    };
    return &o;
}

static json_t *api(const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(), sim.url, method, path, body, want);
}

/* GET; NULL on 404. */
static json_t *get(const char *path)
{
    return kop_test_api_get(api_opts(), sim.url, path);
}

static const json_t *at(const json_t *v, const char *dotted)
{
    char tok[128];
    const json_t *cur = v;
    const char *p = dotted;
    while (cur && *p) {
        size_t len = strcspn(p, ".");
        if (len >= sizeof(tok))
            return NULL;
        memcpy(tok, p, len);
        tok[len] = '\0';
        p += len + (p[len] == '.');
        char *end = NULL;
        long idx = strtol(tok, &end, 10);
        cur = json_is_array(cur) && end && *end == '\0' ? json_array_get(cur, (size_t)idx)
                                                        : json_object_get(cur, tok);
    }
    return cur;
}

static json_int_t jint(const json_t *v, const char *dotted)
{
    return json_integer_value(at(v, dotted));
}

static const char *jstr(const json_t *v, const char *dotted)
{
    const char *s = json_string_value(at(v, dotted));
    return s ? s : "";
}

static const char *cond(const json_t *myr, const char *type, const char *field)
{
    size_t i;
    json_t *c;
    json_array_foreach(at(myr, "status.conditions"), i, c)
    {
        if (strcmp(jstr(c, "type"), type) == 0)
            return jstr(c, field);
    }
    return "";
}

/* ---- processes ------------------------------------------------------------------------ */

static void start_sim_bare(void)
{
    char *args[] = {"--deployment-ready-delay",
                    "100ms",
                    "--bookmark-interval",
                    "500ms",
                    "--history-size",
                    "100000",
                    NULL};
    kop_test_scratch_kubesim(&fx, &sim, TOKEN, args);
}

static void start_sim(void)
{
    start_sim_bare();
    json_decref(api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    kop_test_myresource_crd, 201));
}

static void start_kop_ns(const char *ns)
{
    struct kop_test_argv a;
    kop_test_kop_argv(&a, fx.kubeconfig);
    kop_test_argv_add(&a, "--controller-only", NULL);
    if (ns)
        kop_test_argv_add(&a, "--namespace", ns, NULL);
    kop_test_argv_add(&a, "--sync-period", "2s", "--kube-api-qps", "400", "--kube-api-burst", "800",
                      "--max-concurrent-reconciles", "4", NULL);
    ck_assert_int_eq(kop_test_spawn(&kop, a.v), 0);
    kop_running = true;
    metrics_port = kop_test_logged_port(&kop, "serving metrics", 10000);
    ck_assert_msg(kop_test_wait_for(&kop, 0, "\"msg\":\"starting controller\"", 10000, NULL) > 0,
                  "kop controller did not start");
}

static void start_kop(void)
{
    start_kop_ns(NULL);
}

static void setup(void)
{
    kop_test_scratch_init(&fx);
    start_sim();
    start_kop();
}

static void teardown(void)
{
    if (kop_running) {
        int st = kop_test_stop(&kop, SIGTERM, 10000);
        kop_running = false;
        ck_assert_msg(st == 0, "kop exit status %d", st);
    }
    ck_assert_int_eq(kop_test_kubesim_stop(&sim, SIGTERM, 10000), 0);
    kop_test_scratch_free(&fx);
}

/* ---- helpers on objects ------------------------------------------------------------------ */

static void create_myr(const char *name, const char *spec, const char *annotations)
{
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"%s\"%s%s%s},\"spec\":%s}",
             name, annotations ? ",\"annotations\":" : "", annotations ? annotations : "", "",
             spec);
    json_decref(api("POST", MYR_PATH, body, 201));
}

static json_t *get_named(const char *base, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", base, name);
    return get(path);
}

/* The MyResource is Available with status for its current generation. */
static bool myr_available(const void *arg)
{
    json_t *m = get_named(MYR_PATH, arg);
    bool ok = m && jint(m, "status.observedGeneration") == jint(m, "metadata.generation") &&
              jint(m, "status.readyReplicas") == jint(m, "spec.replicas") &&
              strcmp(cond(m, "Available", "status"), "True") == 0;
    json_decref(m);
    return ok;
}

struct want_field {
    const char *base, *name, *path;
    const char *str; /* compare as string when set */
    json_int_t num;
};

static bool field_is(const void *arg)
{
    const struct want_field *w = arg;
    json_t *o = get_named(w->base, w->name);
    bool ok = o && (w->str ? strcmp(jstr(o, w->path), w->str) == 0 : jint(o, w->path) == w->num);
    json_decref(o);
    return ok;
}

static bool gone(const void *arg)
{
    const char *const *bn = arg;
    json_t *o = get_named(bn[0], bn[1]);
    json_decref(o);
    return o == NULL;
}

static json_t *stats(void)
{
    return api("GET", "/_kubesim/stats", NULL, 200);
}

/* Sum of every counter of a metric family in kop's /metrics. */
static double metric_sum(const char *name)
{
    double sum = kop_test_scrape_sum(api_opts(), metrics_port, name, NULL);
    return sum < 0 ? 0 : sum;
}

/* Count MyResources in the list that are converged (Available, current). */
static size_t count_converged(size_t *ret_total)
{
    json_t *l = api("GET", MYR_PATH, NULL, 200);
    size_t n = 0, i;
    json_t *m;
    json_array_foreach(json_object_get(l, "items"), i, m)
    {
        if (jint(m, "status.observedGeneration") == jint(m, "metadata.generation") &&
            jint(m, "status.readyReplicas") == jint(m, "spec.replicas") &&
            strcmp(cond(m, "Available", "status"), "True") == 0)
            n++;
    }
    if (ret_total)
        *ret_total = json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

static size_t count_list(const char *path)
{
    char p[512];
    snprintf(p, sizeof(p), "%s?labelSelector=app.kubernetes.io%%2Fmanaged-by%%3Dkop", path);
    json_t *l = api("GET", p, NULL, 200);
    size_t n = json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

static bool all_converged(const void *arg)
{
    size_t want = *(const size_t *)arg;
    size_t total = 0;
    return count_converged(&total) == want && total == want && count_list(DEP_PATH) == want &&
           count_list(SVC_PATH) == want;
}

/* all_converged lists every object three times: polled every 50 + n/2 ms,
 * so that under sanitizers on two cores the test's own lists of a thousand
 * objects do not slow down what they wait for. */
static bool converged(size_t n, long timeout_ms)
{
    long t0 = kop_test_now_ms();
    bool ok = kop_test_eventually_every(all_converged, &n, timeout_ms, 50 + (long)n / 2);
    /* in the log: how much of its deadline a slow machine leaves */
    fprintf(stderr, "%zu objects converged: %s after %ld ms (deadline %ld ms)\n", n,
            ok ? "yes" : "no", kop_test_now_ms() - t0, timeout_ms);
    return ok;
}

static void create_many(size_t n, const char *prefix)
{
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s-%zu", prefix, i);
        create_myr(name, "{\"replicas\":1}", NULL);
    }
}

/* ---- tests --------------------------------------------------------------------------------- */

START_TEST(test_operator_seed)
{
    create_myr("example-resource", "{\"replicas\":3}", NULL);
    ck_assert_msg(kop_test_eventually(myr_available, "example-resource", 15000),
                  "seed not Available");
    json_t *m = get_named(MYR_PATH, "example-resource");
    json_t *d = get_named(DEP_PATH, "example-resource");
    json_t *s = get_named(SVC_PATH, "example-resource");
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(jint(d, "spec.replicas"), 3);
    ck_assert_str_eq(jstr(d, "spec.template.spec.containers.0.name"), "app");
    ck_assert_str_eq(jstr(d, "spec.template.spec.containers.0.image"), "nginx:1.14.2");
    ck_assert_int_eq(jint(d, "spec.template.spec.containers.0.ports.0.containerPort"), 80);
    const json_t *ml = at(d, "spec.selector.matchLabels");
    ck_assert_str_eq(json_string_value(json_object_get(ml, "app.kubernetes.io/instance")),
                     "example-resource");
    ck_assert_str_eq(json_string_value(
                         json_object_get(at(d, "metadata.labels"), "app.kubernetes.io/managed-by")),
                     "kop");
    for (int i = 0; i < 2; i++) {
        const json_t *child = i ? s : d;
        ck_assert_str_eq(jstr(child, "metadata.ownerReferences.0.uid"), jstr(m, "metadata.uid"));
        ck_assert_str_eq(jstr(child, "metadata.ownerReferences.0.kind"), "MyResource");
        ck_assert_str_eq(jstr(child, "metadata.ownerReferences.0.apiVersion"),
                         "mygroup.example.com/v1");
        ck_assert(json_is_true(at(child, "metadata.ownerReferences.0.controller")));
        ck_assert(json_is_true(at(child, "metadata.ownerReferences.0.blockOwnerDeletion")));
    }
    ck_assert_str_eq(jstr(s, "spec.type"), "ClusterIP");
    ck_assert_int_eq(jint(s, "spec.ports.0.port"), 80);
    ck_assert_str_eq(jstr(s, "spec.ports.0.targetPort"), "http");
    ck_assert_str_eq(jstr(s, "spec.ports.0.name"), "http");
    ck_assert_int_eq(jint(m, "status.replicas"), 3);
    ck_assert_int_eq(jint(m, "status.readyReplicas"), 3);
    ck_assert_int_eq(jint(m, "status.observedGeneration"), 1);
    ck_assert_str_eq(cond(m, "Degraded", "status"), "False");
    ck_assert_str_eq(cond(m, "Paused", "status"), "False");
    ck_assert_str_eq(cond(m, "Progressing", "reason"), "RolloutComplete");
    ck_assert_int_eq(jint(at(m, "status.conditions.0"), "observedGeneration"), 1);
    ck_assert_str_ne(cond(m, "Available", "lastTransitionTime"), "");
    /* Events were recorded for the creations. */
    json_t *ev = api("GET", "/api/v1/namespaces/" NS "/events", NULL, 200);
    bool created = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ev, "items"), i, e)
    {
        if (strcmp(jstr(e, "reason"), "Created") == 0 &&
            strcmp(jstr(e, "involvedObject.name"), "example-resource") == 0)
            created = true;
    }
    ck_assert_msg(created, "no Created event");
    json_decref(ev);
    json_decref(m);
    json_decref(d);
    json_decref(s);
}
END_TEST

START_TEST(test_operator_children_follow_changes)
{
    create_myr("web", "{\"replicas\":2}", NULL);
    ck_assert(kop_test_eventually(myr_available, "web", 15000));
    json_t *svc = get_named(SVC_PATH, "web");
    char cluster_ip[64];
    snprintf(cluster_ip, sizeof(cluster_ip), "%s", jstr(svc, "spec.clusterIP"));
    json_decref(svc);

    json_decref(api("PATCH", MYR_PATH "/web", "{\"spec\":{\"image\":\"nginx:1.25.3\"}}", 200));
    struct want_field img = {DEP_PATH, "web", "spec.template.spec.containers.0.image",
                             "nginx:1.25.3", 0};
    ck_assert_msg(kop_test_eventually(field_is, &img, 15000), "image did not follow");

    /* A second port, through the v2-extras annotation of the v1 object. */
    json_decref(api("PATCH", MYR_PATH "/web",
                    "{\"metadata\":{\"annotations\":{\"mygroup.example.com/v2-extras\":"
                    "\"{\\\"ports\\\":[{\\\"name\\\":\\\"http\\\"},{\\\"name\\\":\\\"metrics\\\","
                    "\\\"port\\\":9090}]}\"}}}",
                    200));
    struct want_field p2 = {SVC_PATH, "web", "spec.ports.1.port", NULL, 9090};
    ck_assert_msg(kop_test_eventually(field_is, &p2, 15000), "second service port missing");
    struct want_field c2 = {DEP_PATH, "web", "spec.template.spec.containers.0.ports.1.name",
                            "metrics", 0};
    ck_assert_msg(kop_test_eventually(field_is, &c2, 15000), "second container port missing");
    ck_assert(kop_test_eventually(myr_available, "web", 15000));
    svc = get_named(SVC_PATH, "web");
    ck_assert_str_eq(jstr(svc, "spec.ports.1.targetPort"), "metrics");
    ck_assert_str_eq(jstr(svc, "spec.clusterIP"), cluster_ip); /* others' field kept */
    json_decref(svc);
    json_t *m = get_named(MYR_PATH, "web");
    /* The annotation is metadata: no new generation. */
    ck_assert_int_eq(jint(m, "metadata.generation"), 2);
    ck_assert_int_eq(jint(m, "status.observedGeneration"), 2);
    json_decref(m);
}
END_TEST

START_TEST(test_operator_restores_children)
{
    create_myr("keep", "{\"replicas\":3}", NULL);
    ck_assert(kop_test_eventually(myr_available, "keep", 15000));
    /* Someone scales the Deployment and annotates it. */
    json_decref(api("PATCH", DEP_PATH "/keep",
                    "{\"metadata\":{\"annotations\":{\"someone\":\"else\"}},\"spec\":{"
                    "\"replicas\":7}}",
                    200));
    struct want_field r3 = {DEP_PATH, "keep", "spec.replicas", NULL, 3};
    kop_test_sleep_ms(200);
    ck_assert_msg(kop_test_eventually(field_is, &r3, 15000), "replicas not restored");
    json_t *d = get_named(DEP_PATH, "keep");
    ck_assert_str_eq(json_string_value(json_object_get(at(d, "metadata.annotations"), "someone")),
                     "else");
    json_decref(d);
    /* Someone deletes the Service. */
    char *old_uid = NULL;
    json_t *s = get_named(SVC_PATH, "keep");
    old_uid = strdup(jstr(s, "metadata.uid"));
    json_decref(s);
    json_decref(api("DELETE", SVC_PATH "/keep", NULL, 200));
    long end = kop_test_now_ms() + 15000;
    bool back = false;
    while (!back && kop_test_now_ms() < end) {
        s = get_named(SVC_PATH, "keep");
        back = s && strcmp(jstr(s, "metadata.uid"), old_uid) != 0;
        json_decref(s);
        if (!back)
            kop_test_sleep_ms(50);
    }
    free(old_uid);
    ck_assert_msg(back, "service not recreated");
}
END_TEST

START_TEST(test_operator_delete_gc)
{
    create_myr("tmp", "{\"replicas\":1}", NULL);
    ck_assert(kop_test_eventually(myr_available, "tmp", 15000));
    json_decref(api("DELETE", MYR_PATH "/tmp", NULL, 200));
    const char *dep[] = {DEP_PATH, "tmp"}, *svc[] = {SVC_PATH, "tmp"};
    ck_assert_msg(kop_test_eventually(gone, dep, 15000), "deployment not collected");
    ck_assert_msg(kop_test_eventually(gone, svc, 15000), "service not collected");
    /* Nothing is recreated afterwards. */
    kop_test_sleep_ms(500);
    ck_assert(gone(dep));
}
END_TEST

static bool paused_cond(const void *arg)
{
    json_t *m = get_named(MYR_PATH, arg);
    bool ok = m && strcmp(cond(m, "Paused", "status"), "True") == 0 &&
              jint(m, "status.observedGeneration") == jint(m, "metadata.generation");
    json_decref(m);
    return ok;
}

START_TEST(test_operator_paused)
{
    /* Paused from the start: nothing is created. */
    create_myr("idle", "{\"replicas\":2}",
               "{\"mygroup.example.com/v2-extras\":\"{\\\"paused\\\":true}\"}");
    ck_assert_msg(kop_test_eventually(paused_cond, "idle", 15000), "no Paused condition");
    const char *dep[] = {DEP_PATH, "idle"}, *svc[] = {SVC_PATH, "idle"};
    ck_assert(gone(dep));
    ck_assert(gone(svc));

    /* Running, then paused: a scaled Deployment stays scaled. */
    create_myr("live", "{\"replicas\":2}", NULL);
    ck_assert(kop_test_eventually(myr_available, "live", 15000));
    json_decref(api("PATCH", MYR_PATH "/live",
                    "{\"metadata\":{\"annotations\":{\"mygroup.example.com/v2-extras\":"
                    "\"{\\\"paused\\\":true}\"}},\"spec\":{\"replicas\":4}}",
                    200));
    ck_assert(kop_test_eventually(paused_cond, "live", 15000));
    json_decref(api("PATCH", DEP_PATH "/live", "{\"spec\":{\"replicas\":5}}", 200));
    kop_test_sleep_ms(1000);
    json_t *d = get_named(DEP_PATH, "live");
    ck_assert_int_eq(jint(d, "spec.replicas"), 5);
    json_decref(d);
    /* Unpaused: back to the spec. */
    json_decref(api("PATCH", MYR_PATH "/live",
                    "{\"metadata\":{\"annotations\":{\"mygroup.example.com/v2-extras\":null}}}",
                    200));
    struct want_field r4 = {DEP_PATH, "live", "spec.replicas", NULL, 4};
    ck_assert_msg(kop_test_eventually(field_is, &r4, 15000), "not reconciled after unpausing");
}
END_TEST

static bool degraded_conflict(const void *arg)
{
    json_t *m = get_named(MYR_PATH, arg);
    bool ok = m && strcmp(cond(m, "Degraded", "status"), "True") == 0 &&
              strcmp(cond(m, "Degraded", "reason"), "OwnershipConflict") == 0;
    json_decref(m);
    return ok;
}

static bool conflict_event_sent(const void *arg)
{
    (void)arg;
    json_t *ev = api("GET", "/api/v1/namespaces/" NS "/events", NULL, 200);
    bool warned = false;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(ev, "items"), i, e)
    {
        if (strcmp(jstr(e, "reason"), "OwnershipConflict") == 0 &&
            strcmp(jstr(e, "type"), "Warning") == 0)
            warned = true;
    }
    json_decref(ev);
    return warned;
}

START_TEST(test_operator_foreign_child_untouched)
{
    json_decref(
        api("POST", DEP_PATH,
            "{\"metadata\":{\"name\":\"taken\"},\"spec\":{\"replicas\":1,\"selector\":{"
            "\"matchLabels\":{\"a\":\"b\"}},\"template\":{\"metadata\":{\"labels\":{\"a\":"
            "\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1\"}]}}}}",
            201));
    create_myr("taken", "{\"replicas\":3}", NULL);
    ck_assert_msg(kop_test_eventually(degraded_conflict, "taken", 15000), "no OwnershipConflict");
    json_t *d = get_named(DEP_PATH, "taken");
    ck_assert_int_eq(jint(d, "spec.replicas"), 1);
    ck_assert_str_eq(jstr(d, "spec.template.spec.containers.0.image"), "busybox:1");
    ck_assert_ptr_null(at(d, "metadata.ownerReferences"));
    json_decref(d);
    json_t *m = get_named(MYR_PATH, "taken");
    ck_assert_ptr_nonnull(strstr(cond(m, "Degraded", "message"), "Deployment default/taken"));
    json_decref(m);
    /* The Service has no conflict and is created. */
    json_t *s = get_named(SVC_PATH, "taken");
    ck_assert_ptr_nonnull(s);
    json_decref(s);
    /* Events go out through an asynchronous sender: the status may land
     * first, so wait for the event instead of reading once. */
    ck_assert_msg(kop_test_eventually(conflict_event_sent, NULL, 15000), "no Warning event");
}
END_TEST

START_TEST(test_operator_resync_zero_writes)
{
    size_t n = 200;
    create_many(n, "r");
    ck_assert_msg(converged(n, 40000), "200 did not converge");
    /* Let the last writes of the convergence (Events are sent by their own
     * thread) settle: no write for a second. */
    json_t *s1 = stats();
    for (long end = kop_test_now_ms() + 30000; kop_test_now_ms() < end;) {
        kop_test_sleep_ms(1000);
        json_t *s = stats();
        bool quiet = jint(s, "writeTotal") == jint(s1, "writeTotal");
        json_decref(s1);
        s1 = s;
        if (quiet)
            break;
    }
    double rec1 = metric_sum("controller_runtime_reconcile_total");
    /* A resync (--sync-period 2s) reconciles every object again; wait for
     * all of them to be done rather than for a fixed time. */
    double rec2 = rec1;
    for (long end = kop_test_now_ms() + 30000;
         rec2 - rec1 < (double)n && kop_test_now_ms() < end;) {
        kop_test_sleep_ms(100);
        rec2 = metric_sum("controller_runtime_reconcile_total");
    }
    ck_assert_msg(rec2 - rec1 >= (double)n, "no resync seen: %g reconciles", rec2 - rec1);
    json_t *s2 = stats();
    ck_assert_msg(jint(s2, "writeTotal") == jint(s1, "writeTotal"),
                  "converged set wrote %lld times",
                  (long long)(jint(s2, "writeTotal") - jint(s1, "writeTotal")));
    json_decref(s1);
    json_decref(s2);
}
END_TEST

START_TEST(test_operator_thousand_at_once)
{
    size_t n = 1000;
    create_many(n, "k");
    /* ~10 s plain; under ASan 11-19 s on a fast host and 30-44 s on a slow,
     * busy one: the deadline is for correctness, the time is logged */
    ck_assert_msg(converged(n, 150000), "1000 did not converge");
    json_t *s = stats();
    const json_t *w = json_object_get(s, "writes");
    /* Every child was created. A reconcile that runs before the informer
     * has delivered a child it just created may try the create again and
     * get AlreadyExists (kubesim counts the attempt), as with any
     * informer-backed controller: allow a few such retries, not a
     * create per event. */
    json_int_t dc = jint(json_object_get(w, "deployments.apps"), "create");
    json_int_t sc = jint(json_object_get(w, "services"), "create");
    ck_assert_int_ge(dc, (json_int_t)n);
    ck_assert_int_ge(sc, (json_int_t)n);
    ck_assert_int_le(dc, (json_int_t)(n + n / 50));
    ck_assert_int_le(sc, (json_int_t)(n + n / 50));
    json_decref(s);
}
END_TEST

START_TEST(test_operator_converges_under_faults)
{
    size_t n = 100;
    json_decref(api("POST", "/_kubesim/faults",
                    "{\"seed\":11,\"rules\":[{\"verb\":\"*\",\"code\":500,\"rate\":0.05},"
                    "{\"verb\":\"patch\",\"code\":429,\"rate\":0.03,\"retryAfter\":1}]}",
                    200));
    create_many(n, "f");
    kop_test_sleep_ms(300);
    json_decref(api("POST", "/_kubesim/faults", "{\"dropWatches\":true}", 200));
    kop_test_sleep_ms(300);
    json_decref(api("POST", "/_kubesim/faults", "{\"compact\":true,\"dropWatches\":true}", 200));
    /* Someone scales one while the faults go on (once kop has created it:
     * under load that can take longer than the sleeps above). */
    struct want_field r1 = {DEP_PATH, "f-0", "spec.replicas", NULL, 1};
    ck_assert_msg(kop_test_eventually(field_is, &r1, 30000), "f-0 was never created");
    json_decref(api("PATCH", DEP_PATH "/f-0", "{\"spec\":{\"replicas\":9}}", 200));
    json_decref(api("POST", "/_kubesim/faults", "{\"compact\":true,\"dropWatches\":true}", 200));
    ck_assert_msg(converged(n, 45000), "did not converge under faults");
    ck_assert_msg(kop_test_eventually(field_is, &r1, 15000), "the scaled f-0 was not restored");
    json_decref(api("POST", "/_kubesim/faults", "{\"rules\":[]}", 200));
}
END_TEST

START_TEST(test_operator_namespace_flag)
{
    kop_test_stop(&kop, SIGTERM, 10000);
    kop_running = false;
    json_decref(api("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"team-a\"}}", 201));
    start_kop_ns("team-a");
    json_decref(api("POST", "/apis/mygroup.example.com/v1/namespaces/team-a/myresources",
                    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                    "\"metadata\":{\"name\":\"mine\"},\"spec\":{}}",
                    201));
    create_myr("not-mine", "{\"replicas\":1}", NULL);
    struct want_field w = {"/apis/apps/v1/namespaces/team-a/deployments", "mine", "spec.replicas",
                           NULL, 1};
    ck_assert_msg(kop_test_eventually(field_is, &w, 15000), "team-a not reconciled");
    kop_test_sleep_ms(500);
    const char *dep[] = {DEP_PATH, "not-mine"};
    ck_assert_msg(gone(dep), "a namespace outside --namespace was reconciled");
    json_t *m = get_named(MYR_PATH, "not-mine");
    ck_assert_ptr_null(json_object_get(m, "status"));
    json_decref(m);
}
END_TEST

/* ---- admission rule 4: one kop serving the webhook and the controller -------------------- */

static bool have_kubectl;
static long health_port;
static char kubectl_bin[512];

/* NAME looked up in $PATH (kop_test_spawn execs a path). */
static bool find_prog(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        snprintf(buf, len, "%.*s/%s", (int)n, p, name);
        if (n && access(buf, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* Run argv to completion (at most 60 s). Returns the exit code (-1 when it
 * did not exit normally); *ret_out (may be NULL) gets its output. */
static int run(char *const argv[], char **ret_out)
{
    struct kop_test_proc p;
    if (kop_test_spawn(&p, argv) != 0)
        return -1;
    /* The reader thread sees EOF when the program exits. */
    kop_test_wait_for(&p, 0, "\x01never printed\x01", 60000, NULL);
    char *out = kop_test_output(&p);
    int st = kop_test_stop(&p, 0, 1000);
    if (ret_out)
        *ret_out = out;
    else
        free(out);
    return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* manifests/base/NAME with its caBundles filled (kop_test_manifest_with_ca)
 * written to the temp dir, then kubectl apply it. */
static void apply_with_ca(const char *name, const char *ca_b64)
{
    char dst[1024];
    snprintf(dst, sizeof(dst), "%s/%s", fx.dir, name);
    char *text = kop_test_manifest_with_ca(name, ca_b64);
    FILE *f = fopen(dst, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    free(text);
    char cache[600];
    snprintf(cache, sizeof(cache), "%s/kcache", fx.dir);
    char *argv[] = {kubectl_bin, "--kubeconfig", fx.kubeconfig, "--cache-dir", cache,
                    "apply",     "-f",           dst,           NULL};
    char *out = NULL;
    int rc = run(argv, &out);
    ck_assert_msg(rc == 0, "kubectl apply %s: %d: %s", name, rc, out);
    free(out);
}

/* kubectl create -f a v1 MyResource NAME in default. Returns kubectl's
 * exit code; *ret_out its output. */
static int kubectl_create_myr(const char *name, char **ret_out)
{
    char path[600], cache[600];
    snprintf(path, sizeof(path), "%s/myr-%s.yaml", fx.dir, name);
    snprintf(cache, sizeof(cache), "%s/kcache", fx.dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "apiVersion: mygroup.example.com/v1\nkind: MyResource\nmetadata:\n  name: %s\n"
            "  namespace: default\nspec:\n  replicas: 1\n  image: nginx:1.14.2\n",
            name);
    fclose(f);
    char *argv[] = {kubectl_bin, "--kubeconfig", fx.kubeconfig, "--cache-dir", cache,
                    "create",    "-f",           path,          NULL};
    return run(argv, ret_out);
}

static bool readyz(const void *arg)
{
    (void)arg;
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/readyz", health_port);
    char *out = NULL;
    long code = http("GET", url, "text/plain", NULL, &out);
    free(out);
    return code == 200;
}

/* A dry-run CREATE of MyResource NAME (nothing is stored) answers want. */
struct dry {
    const char *name;
    long want;
};

static bool dry_create_is(const void *arg)
{
    const struct dry *d = arg;
    char url[1024], body[512];
    snprintf(url, sizeof(url), "%s%s?dryRun=All", sim.url, MYR_PATH);
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"%s\"},\"spec\":{\"image\":\"nginx:1.14.2\"}}",
             d->name);
    char *out = NULL;
    long code = http("POST", url, NULL, body, &out);
    free(out);
    return code == d->want;
}

static void setup_admission(void)
{
    kop_test_scratch_init(&fx);
    start_sim_bare();
    char *ver[] = {kubectl_bin, "version", "--client=true", NULL};
    have_kubectl = find_prog("kubectl", kubectl_bin, sizeof(kubectl_bin)) && run(ver, NULL) == 0;
    if (!have_kubectl)
        return;

    /* Dev certificates; the CRD with its conversion webhook's caBundle. */
    char certs[600], ca_file[700];
    snprintf(certs, sizeof(certs), "%s/certs", fx.dir);
    kop_test_gen_certs(certs);
    snprintf(ca_file, sizeof(ca_file), "%s/ca.crt", certs);
    char *ca_b64 = kop_test_file_base64(ca_file);
    apply_with_ca("crd.yaml", ca_b64);

    /* A foreign Deployment "web" (no kop label) before kop starts. */
    json_decref(
        api("POST", DEP_PATH,
            "{\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"someone-else\"}},\"spec\":{"
            "\"replicas\":1,\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{"
            "\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
            "\"image\":\"busybox:1\"}]}}}}",
            201));

    /* ONE kop: webhooks and controller. */
    char *argv[] = {(char *)kop_test_bin("kop"),
                    "--kubeconfig",
                    fx.kubeconfig,
                    "--cert-dir",
                    certs,
                    "--webhook-port",
                    "0",
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                    "--health-probe-bind-address",
                    "127.0.0.1:0",
                    "--kube-api-qps",
                    "200",
                    "--kube-api-burst",
                    "400",
                    NULL};
    ck_assert_int_eq(kop_test_spawn(&kop, argv), 0);
    kop_running = true;
    long webhook_port = kop_test_logged_port(&kop, "serving webhook", 10000);
    health_port = kop_test_logged_port(&kop, "serving health probes", 10000);

    /* kubesim routes the Service named in the webhook configuration to kop. */
    char svc[256];
    snprintf(svc, sizeof(svc),
             "{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":"
             "\"127.0.0.1:%ld\"}",
             webhook_port);
    json_decref(api("POST", "/_kubesim/services", svc, 200));
    apply_with_ca("webhook.yaml", ca_b64);
    free(ca_b64);
    /* informers-synced (the metadata informers included). */
    ck_assert_msg(kop_test_eventually(readyz, NULL, 15000), "kop not ready");
}

START_TEST(test_operator_rule4_denies_unlabelled_namesake)
{
    if (!have_kubectl) {
        fprintf(stderr, "kubectl not installed: rule-4 end-to-end test skipped\n");
        return;
    }
    /* kubectl create of MyResource "web": denied by kop's webhook, naming
     * the Deployment that kop's labelled informers never see. */
    char *out = NULL;
    int rc = kubectl_create_myr("web", &out);
    ck_assert_msg(rc != 0, "MyResource web was admitted: %s", out);
    ck_assert_msg(strstr(out, "admission webhook \"vmyresource.mygroup.example.com\" denied the "
                              "request"),
                  "not denied by kop: %s", out);
    ck_assert_msg(strstr(out, "a Deployment named \"web\" already exists in namespace "
                              "\"default\" and is not controlled by this MyResource"),
                  "Deployment not named: %s", out);
    free(out);
    json_t *m = get_named(MYR_PATH, "web");
    ck_assert_ptr_null(m);
    /* The foreign Deployment is untouched. */
    json_t *d = get_named(DEP_PATH, "web");
    ck_assert_str_eq(jstr(d, "spec.template.spec.containers.0.image"), "busybox:1");
    ck_assert_ptr_null(at(d, "metadata.ownerReferences"));
    json_decref(d);

    /* A name that collides with nothing is admitted, and reconciled by the
     * same process; its own children never block it. */
    rc = kubectl_create_myr("fresh", &out);
    ck_assert_msg(rc == 0, "MyResource fresh was not admitted: %s", out);
    free(out);
    ck_assert_msg(kop_test_eventually(myr_available, "fresh", 15000), "fresh not Available");
    json_decref(api("PATCH", MYR_PATH "/fresh", "{\"spec\":{\"replicas\":2}}", 200));
}
END_TEST

START_TEST(test_operator_rule4_follows_watch)
{
    if (!have_kubectl) {
        fprintf(stderr, "kubectl not installed: rule-4 end-to-end test skipped\n");
        return;
    }
    /* A foreign Service created after the caches synced arrives through
     * the metadata watch: a dry-run CREATE turns from admitted to denied. */
    json_decref(api("POST", SVC_PATH,
                    "{\"metadata\":{\"name\":\"api\"},\"spec\":{\"ports\":[{\"port\":80}]}}", 201));
    struct dry deny_api = {"api", 403};
    ck_assert_msg(kop_test_eventually(dry_create_is, &deny_api, 10000), "Service api not seen");
    char *out = NULL;
    int rc = kubectl_create_myr("api", &out);
    ck_assert_msg(rc != 0 && strstr(out, "a Service named \"api\" already exists"),
                  "Service not named: %d %s", rc, out);
    free(out);
    /* Its deletion too: then the name is free. */
    json_decref(api("DELETE", SVC_PATH "/api", NULL, 200));
    struct dry allow_api = {"api", 201};
    ck_assert_msg(kop_test_eventually(dry_create_is, &allow_api, 10000),
                  "Service api deletion not seen");
    rc = kubectl_create_myr("api", &out);
    ck_assert_msg(rc == 0, "MyResource api not admitted after the Service went: %s", out);
    free(out);
    ck_assert_msg(kop_test_eventually(myr_available, "api", 15000), "api not Available");
}
END_TEST

START_TEST(test_operator_rule4_denies_kop_child_of_other_owner)
{
    if (!have_kubectl) {
        fprintf(stderr, "kubectl not installed: rule-4 end-to-end test skipped\n");
        return;
    }
    /* A Deployment and a Service labelled as kop's but controlled by
     * another MyResource (as a deleted MyResource's children are until
     * garbage collection). The metadata informers leave kop's objects to
     * the child informers, and the lookup reads those too: a CREATE of
     * that name is denied, naming both. */
    json_decref(api("POST", MYR_PATH,
                    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                    "\"metadata\":{\"name\":\"holder\"},\"spec\":{\"image\":\"nginx:1.14.2\"}}",
                    201));
    json_t *h = get_named(MYR_PATH, "holder");
    ck_assert_ptr_nonnull(h);
    char meta[512], body[2048];
    snprintf(meta, sizeof(meta),
             "\"metadata\":{\"name\":\"held\",\"labels\":{\"app.kubernetes.io/managed-by\":"
             "\"kop\"},\"ownerReferences\":[{\"apiVersion\":\"mygroup.example.com/v1\","
             "\"kind\":\"MyResource\",\"name\":\"holder\",\"uid\":\"%s\",\"controller\":"
             "true}]}",
             jstr(h, "metadata.uid"));
    json_decref(h);
    snprintf(body, sizeof(body),
             "{%s,\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{\"a\":\"h\"}},"
             "\"template\":{\"metadata\":{\"labels\":{\"a\":\"h\"}},\"spec\":{"
             "\"containers\":[{\"name\":\"c\",\"image\":\"busybox:1\"}]}}}}",
             meta);
    json_decref(api("POST", DEP_PATH, body, 201));
    snprintf(body, sizeof(body), "{%s,\"spec\":{\"ports\":[{\"port\":80}]}}", meta);
    json_decref(api("POST", SVC_PATH, body, 201));
    struct dry deny = {"held", 403};
    ck_assert_msg(kop_test_eventually(dry_create_is, &deny, 10000), "kop's children not seen");
    char *out = NULL;
    int rc = kubectl_create_myr("held", &out);
    ck_assert_msg(rc != 0, "MyResource held was admitted: %s", out);
    ck_assert_msg(strstr(out, "a Deployment named \"held\" already exists"),
                  "Deployment not named: %s", out);
    ck_assert_msg(strstr(out, "a Service named \"held\" already exists"), "Service not named: %s",
                  out);
    free(out);
    ck_assert_ptr_null(get_named(MYR_PATH, "held"));
}
END_TEST

static Suite *operator_suite(void)
{
    Suite *s = suite_create("operator");
    TCase *tc = tcase_create("kubesim");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_operator_seed);
    tcase_add_test(tc, test_operator_children_follow_changes);
    tcase_add_test(tc, test_operator_restores_children);
    tcase_add_test(tc, test_operator_delete_gc);
    tcase_add_test(tc, test_operator_paused);
    tcase_add_test(tc, test_operator_foreign_child_untouched);
    tcase_add_test(tc, test_operator_namespace_flag);
    tcase_add_test(tc, test_operator_resync_zero_writes);
    tcase_add_test(tc, test_operator_thousand_at_once);
    tcase_add_test(tc, test_operator_converges_under_faults);
    suite_add_tcase(s, tc);
    TCase *ta = tcase_create("admission");
    tcase_add_checked_fixture(ta, setup_admission, teardown);
    tcase_set_timeout(ta, 120);
    tcase_add_test(ta, test_operator_rule4_denies_unlabelled_namesake);
    tcase_add_test(ta, test_operator_rule4_follows_watch);
    tcase_add_test(ta, test_operator_rule4_denies_kop_child_of_other_owner);
    suite_add_tcase(s, ta);
    return s;
}

int main(void)
{
    return kop_test_run(operator_suite());
}
