/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The generic Kubernetes runtime (kube client, token bucket, informer,
 * store) against a real kubesim process over TLS.
 *
 * Informer under faults: for several seeds, a writer thread makes
 * thousands of random creates/updates/patches/deletes of ConfigMaps in
 * three namespaces through kop_client while the test drops watches,
 * compacts the history (410) and injects 429/5xx. Two informers watch:
 * one on every ConfigMap, one with a label selector whose objects enter
 * and leave it. At the end (faults off, writer stopped) each store must
 * equal kubesim's LIST exactly (keys and resourceVersions), and each
 * handler must have seen a consistent per-key sequence.
 *
 * Client over real TLS with the kubeconfig kubesim writes: every verb,
 * paging, preconditions, propagationPolicy, /status, the error mapping
 * with kubesim's Status messages, 429 + Retry-After honoured and counted,
 * insecure-skip-tls-verify, a wrong CA and a wrong server name. A stress
 * run shares one client and one token bucket between several threads.
 */
#include "kop/client.h"
#include "kop/informer.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/ratelimit.h"
#include "kop/store.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kubetest.h"
#include "testutil.h"

#define TOKEN "informer-test-token"
#define NNS 3
#define NNAMES 30

static const char *const namespaces[NNS] = {"ns-a", "ns-b", "ns-c"};

static const struct kop_resource cm_res = {NULL, "v1", "configmaps", true};
static const struct kop_resource ns_res = {NULL, "v1", "namespaces", false};
static const struct kop_resource deploy_res = {"apps", "v1", "deployments", true};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static unsigned long long rv_num(const char *rv)
{
    return rv ? strtoull(rv, NULL, 10) : 0;
}

/* ---- kubesim process ------------------------------------------------------ */

struct sim {
    struct kop_test_kubesim ks; /* ks.url: the server */
    char *dir;
    char kubeconfig[512];
    char ca[512];
    char host[128]; /* host:port, the metrics label */
};

static void sim_start(struct sim *s, const char *seed)
{
    memset(s, 0, sizeof(*s));
    s->dir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(s->dir);
    snprintf(s->kubeconfig, sizeof(s->kubeconfig), "%s/kubeconfig", s->dir);
    snprintf(s->ca, sizeof(s->ca), "%s/ca.pem", s->dir);
    char *args[] = {"--bookmark-interval", "200ms", "--deployment-ready-delay", "50ms", "--seed",
                    (char *)seed,          NULL};
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0",
                                               .kubeconfig = s->kubeconfig,
                                               .ca = s->ca,
                                               .token = TOKEN,
                                               .args = args,
                                               .timeout_ms = 20000};
    kop_test_kubesim_start(&s->ks, &o);
    snprintf(s->host, sizeof(s->host), "%s", s->ks.url + strlen("https://"));
}

static void sim_stop(struct sim *s)
{
    int st = kop_test_kubesim_stop(&s->ks, SIGTERM, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kubesim exit status %d", st);
    kop_test_rmdir(s->dir);
    free(s->dir);
}

/* A client from kubesim's own kubeconfig (certificate-authority-data,
 * token). */
static struct kop_client *sim_client(struct sim *s, struct kop_ratelimit *rl, struct kop_metrics *m,
                                     int64_t max_retry_wait_ms)
{
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_file(s->kubeconfig, NULL, &kc), 0);
    ck_assert_ptr_nonnull(kc.ca_data);
    ck_assert_ptr_nonnull(kc.token);
    ck_assert_str_eq(kc.server, s->ks.url);
    struct kop_client_options o = {.config = &kc,
                                   .ratelimit = rl,
                                   .metrics = m,
                                   .max_retry_wait_ms = max_retry_wait_ms,
                                   .timeout_ms = 30000};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    kop_kubeconfig_cleanup(&kc);
    return c;
}

/* POST /_kubesim/faults with a JSON document. */
static void sim_faults(struct kop_client *c, const char *doc)
{
    json_t *body = json_loads(doc, 0, NULL);
    ck_assert_ptr_nonnull(body);
    struct kop_request req = {.method = "POST", .path = "/_kubesim/faults", .body = body};
    struct kop_api_status st;
    int r = kop_client_request(c, &req, &st, NULL);
    ck_assert_msg(r == 0, "faults %s: %d %s", doc, r, st.message);
    json_decref(body);
}

static void make_namespaces(struct kop_client *c)
{
    for (int i = 0; i < NNS; i++) {
        json_t *ns = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                               "metadata", "name", namespaces[i]);
        int r = kop_client_create(c, &ns_res, NULL, ns, NULL, NULL);
        ck_assert_msg(r == 0 || r == -EEXIST, "namespace: %d", r);
        json_decref(ns);
    }
}

static double metric(struct kop_metrics *m, const char *code, const char *method, const char *host)
{
    static const char *const labels[] = {"code", "method", "host", "cluster", NULL};
    struct kop_metric_family *f =
        kop_metrics_register(m, KOP_METRIC_COUNTER, "rest_client_requests_total",
                             "Number of HTTP requests, partitioned by status code, method, "
                             "and host.",
                             labels, NULL, 0);
    ck_assert_ptr_nonnull(f);
    return kop_metric_value(kop_metric_child(f, code, method, host, "local"));
}

/* rest_client_requests_total for one code, summed over the verbs. */
static double metric_sum(struct kop_metrics *m, const char *code, const char *host)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    double sum = 0;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        sum += metric(m, code, methods[i], host);
    return sum;
}

/* ---- handler sequence tracking -------------------------------------------- */

struct tracker {
    pthread_mutex_t lock;
    json_t *present; /* key -> resourceVersion string of the live object */
    json_t *last_rv; /* key -> last resourceVersion seen (also after delete) */
    unsigned long adds, updates, deletes, violations;
    char first[512];
    pthread_t thread;
    bool have_thread;
    const char *selector_label; /* when set, every object must carry it */
    /*
     * Check that each key's resourceVersion only grows. kubesim serves the
     * pages after the first from its current state, not from a snapshot at
     * the list's resourceVersion as the kube-apiserver does, so after a
     * paged LIST the watch replays changes the list already showed: the
     * sequence stays consistent but a key may briefly go back to an older
     * (or the same) resourceVersion. Only unpaged informers check this.
     */
    bool strict_rv;
    unsigned long rv_regressions;
};

static void tracker_init(struct tracker *t, const char *selector_label)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->present = json_object();
    t->last_rv = json_object();
    t->selector_label = selector_label;
    t->strict_rv = true;
}

static void tracker_cleanup(struct tracker *t)
{
    json_decref(t->present);
    json_decref(t->last_rv);
    pthread_mutex_destroy(&t->lock);
}

static void violation(struct tracker *t, const char *what, const char *key, const char *rv)
{
    if (t->violations++ == 0)
        snprintf(t->first, sizeof(t->first), "%s %s rv %s", what, key, rv ? rv : "(none)");
}

static void obj_key(const json_t *obj, char *buf, size_t len)
{
    const char *ns = meta_str(obj, "namespace");
    snprintf(buf, len, "%s/%s", ns ? ns : "", meta_str(obj, "name") ? meta_str(obj, "name") : "");
}

/* Common checks on the informer thread; lock held. */
static void check_obj(struct tracker *t, const char *what, const json_t *obj, const char *key)
{
    if (!t->have_thread) {
        t->thread = pthread_self();
        t->have_thread = true;
    } else if (!pthread_equal(t->thread, pthread_self())) {
        violation(t, "handler on another thread", key, NULL);
    }
    if (!meta_str(obj, "resourceVersion"))
        violation(t, what, key, "no resourceVersion");
    if (json_object_get(json_object_get(obj, "metadata"), "managedFields"))
        violation(t, "managedFields kept", key, NULL);
    if (t->selector_label && strcmp(what, "delete") != 0) {
        const char *tier = json_string_value(
            json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), "tier"));
        if (!tier || strcmp(tier, t->selector_label) != 0)
            violation(t, "object outside the selector", key, meta_str(obj, "resourceVersion"));
    }
}

static void on_add(void *ud, json_t *obj)
{
    struct tracker *t = ud;
    char key[256];
    obj_key(obj, key, sizeof(key));
    const char *rv = meta_str(obj, "resourceVersion");
    pthread_mutex_lock(&t->lock);
    t->adds++;
    check_obj(t, "add", obj, key);
    if (json_object_get(t->present, key))
        violation(t, "add of a present key", key, rv);
    const char *last = json_string_value(json_object_get(t->last_rv, key));
    if (last && rv_num(rv) <= rv_num(last)) {
        t->rv_regressions++;
        if (t->strict_rv)
            violation(t, "add with an old resourceVersion", key, rv);
    }
    json_object_set_new(t->present, key, json_string(rv ? rv : ""));
    json_object_set_new(t->last_rv, key, json_string(rv ? rv : ""));
    pthread_mutex_unlock(&t->lock);
}

static void on_update(void *ud, json_t *old_obj, json_t *new_obj)
{
    struct tracker *t = ud;
    char key[256], okey[256];
    obj_key(new_obj, key, sizeof(key));
    obj_key(old_obj, okey, sizeof(okey));
    const char *rv = meta_str(new_obj, "resourceVersion");
    const char *orv = meta_str(old_obj, "resourceVersion");
    pthread_mutex_lock(&t->lock);
    t->updates++;
    check_obj(t, "update", new_obj, key);
    if (strcmp(key, okey) != 0)
        violation(t, "update with another key's old object", key, rv);
    const char *cur = json_string_value(json_object_get(t->present, key));
    if (!cur)
        violation(t, "update before add", key, rv);
    else if (!orv || strcmp(cur, orv) != 0)
        violation(t, "update whose old object is not the last one seen", key, orv);
    if (rv_num(rv) <= rv_num(orv)) {
        t->rv_regressions++;
        if (t->strict_rv)
            violation(t, "update to an older resourceVersion", key, rv);
    }
    json_object_set_new(t->present, key, json_string(rv ? rv : ""));
    json_object_set_new(t->last_rv, key, json_string(rv ? rv : ""));
    pthread_mutex_unlock(&t->lock);
}

static void on_delete(void *ud, json_t *obj)
{
    struct tracker *t = ud;
    char key[256];
    obj_key(obj, key, sizeof(key));
    const char *rv = meta_str(obj, "resourceVersion");
    pthread_mutex_lock(&t->lock);
    t->deletes++;
    check_obj(t, "delete", obj, key);
    const char *cur = json_string_value(json_object_get(t->present, key));
    if (!cur)
        violation(t, "delete of an absent key", key, rv);
    else if (rv_num(rv) < rv_num(cur)) {
        t->rv_regressions++;
        if (t->strict_rv)
            violation(t, "delete with an older resourceVersion", key, rv);
    }
    json_object_del(t->present, key);
    if (rv && rv_num(rv) > rv_num(json_string_value(json_object_get(t->last_rv, key))))
        json_object_set_new(t->last_rv, key, json_string(rv));
    pthread_mutex_unlock(&t->lock);
}

/* ---- store vs. server ------------------------------------------------------ */

/* key "ns/name" -> resourceVersion of every item of a full LIST (paged). */
static json_t *server_state(struct kop_client *c, const char *selector)
{
    json_t *out = json_object();
    char *cont = NULL;
    for (;;) {
        struct kop_list_options lo = {
            .label_selector = selector, .limit = 100, .continue_token = cont};
        json_t *page = NULL;
        struct kop_api_status st;
        int r = kop_client_list(c, &cm_res, NULL, &lo, &st, &page);
        ck_assert_msg(r == 0, "list: %d %s", r, st.message);
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(page, "items"), i, item)
        {
            char key[256];
            obj_key(item, key, sizeof(key));
            json_object_set_new(out, key, json_string(meta_str(item, "resourceVersion")));
        }
        const char *next = meta_str(page, "continue");
        free(cont);
        cont = next && *next ? strdup(next) : NULL;
        json_decref(page);
        if (!cont)
            break;
    }
    return out;
}

static json_t *store_state(struct kop_store *s)
{
    json_t *out = json_object();
    json_t *items = kop_store_list(s, "ConfigMap", NULL);
    ck_assert_ptr_nonnull(items);
    size_t i;
    json_t *item;
    json_array_foreach(items, i, item)
    {
        char key[256];
        obj_key(item, key, sizeof(key));
        json_object_set_new(out, key, json_string(meta_str(item, "resourceVersion")));
    }
    json_decref(items);
    return out;
}

/* Wait until the store equals the server (keys and resourceVersions). */
static bool wait_caught_up(struct kop_client *c, struct kop_store *s, const char *selector,
                           json_t **ret_server)
{
    int64_t end = mono_ms() + 30000;
    for (;;) {
        json_t *want = server_state(c, selector);
        json_t *have = store_state(s);
        bool eq = json_equal(want, have);
        json_decref(have);
        if (eq) {
            *ret_server = want;
            return true;
        }
        if (mono_ms() > end) {
            *ret_server = want;
            return false;
        }
        json_decref(want);
        kop_test_sleep_ms(50);
    }
}

/* ---- the writer thread ----------------------------------------------------- */

struct writer {
    struct kop_client *c;
    uint64_t rng;
    long max_ops;
    int64_t deadline_ms;
    atomic_bool stop;
    atomic_bool done; /* set by the writer when it ends */
    /* results */
    long ops, ok, expected_errors, unexpected;
    int first_unexpected;
    char first_msg[1024];
    /* belief about each key: resourceVersion, "" unknown, NULL absent */
    char *rv[NNS][NNAMES];
};

static json_t *cm_object(struct writer *w, int ns, int name, const char *rv)
{
    char nm[32], v[32];
    snprintf(nm, sizeof(nm), "cm-%02d", name);
    snprintf(v, sizeof(v), "%llu", (unsigned long long)(xorshift(&w->rng) % 1000000));
    const char *tier = xorshift(&w->rng) % 2 ? "front" : "back";
    json_t *o = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                          "ConfigMap", "metadata", "name", nm, "namespace", namespaces[ns],
                          "labels", "tier", tier, "data", "v", v);
    if (rv && *rv)
        json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
    return o;
}

static void believe(struct writer *w, int ns, int name, const char *rv)
{
    free(w->rv[ns][name]);
    w->rv[ns][name] = rv ? strdup(rv) : NULL;
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    while (!atomic_load(&w->stop) && w->ops < w->max_ops && mono_ms() < w->deadline_ms) {
        int ns = (int)(xorshift(&w->rng) % NNS);
        int name = (int)(xorshift(&w->rng) % NNAMES);
        char nm[32];
        snprintf(nm, sizeof(nm), "cm-%02d", name);
        const char *cur = w->rv[ns][name];
        unsigned op = (unsigned)(xorshift(&w->rng) % 100);
        json_t *res = NULL, *body = NULL;
        struct kop_api_status st;
        int r;
        bool deleting = false;
        if (!cur || op < 25) {
            body = cm_object(w, ns, name, NULL);
            r = kop_client_create(w->c, &cm_res, namespaces[ns], body, &st, &res);
        } else if (op < 55) {
            /* PUT with what we believe is current: stale beliefs give 409. */
            body = cm_object(w, ns, name, cur);
            r = kop_client_update(w->c, &cm_res, namespaces[ns], nm, body, &st, &res);
        } else if (op < 80) {
            char v[32];
            snprintf(v, sizeof(v), "%llu", (unsigned long long)(xorshift(&w->rng) % 1000000));
            body = json_pack("{s:{s:{s:s}},s:{s:s}}", "metadata", "labels", "tier",
                             xorshift(&w->rng) % 2 ? "front" : "back", "data", "v", v);
            r = kop_client_patch(w->c, &cm_res, namespaces[ns], nm, body, &st, &res);
        } else {
            deleting = true;
            struct kop_delete_options d = {0};
            if (op < 90 && *cur)
                d.precondition_resource_version = cur;
            if (op % 2)
                d.propagation_policy = "Background";
            r = kop_client_delete(w->c, &cm_res, namespaces[ns], nm, &d, &st, NULL);
        }
        w->ops++;
        if (r == 0) {
            w->ok++;
            believe(w, ns, name, deleting ? NULL : meta_str(res, "resourceVersion"));
        } else if (r == -ENOENT) {
            w->expected_errors++;
            believe(w, ns, name, NULL);
        } else if (r == -EEXIST) {
            w->expected_errors++;
            believe(w, ns, name, "");
        } else if (r == -EBUSY || r == -EAGAIN || r == -EIO) {
            /* Conflict (stale PUT or precondition), or an injected 429/5xx
             * that outlived the retries. */
            w->expected_errors++;
            if (r == -EBUSY && !deleting && w->rv[ns][name])
                believe(w, ns, name, "");
        } else {
            if (w->unexpected++ == 0) {
                w->first_unexpected = r;
                snprintf(w->first_msg, sizeof(w->first_msg), "HTTP %d %s: %s", st.code, st.reason,
                         st.message);
            }
        }
        json_decref(body);
        json_decref(res);
    }
    atomic_store(&w->done, true);
    return NULL;
}

/* ---- informer under faults -------------------------------------------------- */

static void start_informer(struct kop_client *c, struct kop_store *s, struct tracker *t,
                           const char *selector, long page_size, struct kop_informer **ret)
{
    struct kop_informer_options o = {.client = c,
                                     .store = s,
                                     .resource = cm_res,
                                     .kind = "ConfigMap",
                                     .label_selector = selector,
                                     .page_size = page_size,
                                     .backoff_initial_ms = 10,
                                     .backoff_max_ms = 200,
                                     .watch_timeout_min_s = 1,
                                     .watch_timeout_max_s = 3,
                                     .on_add = on_add,
                                     .on_update = on_update,
                                     .on_delete = on_delete,
                                     .ud = t};
    ck_assert_int_eq(kop_informer_new(&o, ret), 0);
    ck_assert_int_eq(kop_informer_start(*ret), 0);
}

static void check_tracker(struct tracker *t, json_t *server, const char *name)
{
    pthread_mutex_lock(&t->lock);
    ck_assert_msg(t->violations == 0, "%s: %lu handler sequence violations, first: %s", name,
                  t->violations, t->first);
    ck_assert_msg(json_equal(t->present, server),
                  "%s: handlers' view (%zu keys) differs from the server (%zu keys)", name,
                  json_object_size(t->present), json_object_size(server));
    ck_assert_uint_gt(t->adds, 0);
    ck_assert_uint_gt(t->updates, 0);
    ck_assert_uint_gt(t->deletes, 0);
    pthread_mutex_unlock(&t->lock);
}

static void run_seed(unsigned seed, long max_ops, int64_t budget_ms)
{
    struct sim sim;
    char seeds[16];
    snprintf(seeds, sizeof(seeds), "%u", seed);
    sim_start(&sim, seeds);
    struct kop_metrics *m = kop_metrics_new(false);
    ck_assert_ptr_nonnull(m);
    /* One client for the writer and both informers; Retry-After capped
     * low so an injected "Retry-After: 1" does not stall the run. */
    struct kop_client *c = sim_client(&sim, NULL, m, 20);
    struct kop_metrics *cm = kop_metrics_new(false);
    struct kop_client *ctl = sim_client(&sim, NULL, cm, 0);
    make_namespaces(ctl);

    struct kop_store *all = NULL, *front = NULL;
    ck_assert_int_eq(kop_store_new(m, "kop_store", &all), 0);
    ck_assert_int_eq(kop_store_new(NULL, "kop_store", &front), 0);
    struct tracker t_all, t_front;
    tracker_init(&t_all, NULL);
    tracker_init(&t_front, "front");
    t_front.strict_rv = false;
    struct kop_informer *inf_all = NULL, *inf_front = NULL;
    /* "all" lists in one page, "tier=front" in pages of 20 (see
     * tracker.strict_rv for why that matters). */
    start_informer(c, all, &t_all, NULL, 500, &inf_all);
    start_informer(c, front, &t_front, "tier=front", 20, &inf_front);
    ck_assert_int_eq(kop_informer_wait_synced(inf_all, 10000), 0);
    ck_assert_int_eq(kop_informer_wait_synced(inf_front, 10000), 0);

    struct writer *w = calloc(1, sizeof(*w));
    ck_assert_ptr_nonnull(w);
    w->c = c;
    w->rng = UINT64_C(0x9e3779b97f4a7c15) * (seed + 1);
    w->max_ops = max_ops;
    w->deadline_ms = mono_ms() + budget_ms;
    pthread_t wt;
    ck_assert_int_eq(pthread_create(&wt, NULL, writer_main, w), 0);

    /* Chaos while the writer runs: every ~100 ms drop the watches or
     * compact the history, and keep 429/5xx rules on every verb. */
    char doc[1024];
    snprintf(doc, sizeof(doc),
             "{\"seed\":%u,\"rules\":["
             "{\"verb\":\"*\",\"code\":429,\"rate\":0.04,\"retryAfter\":1},"
             "{\"verb\":\"list\",\"code\":500,\"rate\":0.15},"
             "{\"verb\":\"watch\",\"code\":503,\"rate\":0.15,\"retryAfter\":1},"
             "{\"verb\":\"create\",\"code\":500,\"rate\":0.03},"
             "{\"verb\":\"update\",\"code\":503,\"rate\":0.03}]}",
             seed);
    sim_faults(ctl, doc);
    uint64_t rng = seed * UINT64_C(7919) + 1;
    unsigned long drops = 0, compacts = 0;
    while (mono_ms() < w->deadline_ms + 200) {
        kop_test_sleep_ms(60 + (long)(xorshift(&rng) % 80));
        if (xorshift(&rng) % 2) {
            sim_faults(ctl, "{\"dropWatches\":true}");
            drops++;
        } else {
            sim_faults(ctl, "{\"compact\":true}");
            compacts++;
        }
        if (atomic_load(&w->done))
            break;
    }
    atomic_store(&w->stop, true);
    pthread_join(wt, NULL);
    sim_faults(ctl, "{\"rules\":[],\"latencyMs\":0}");

    ck_assert_msg(w->unexpected == 0, "seed %u: %ld unexpected errors, first %d (%s)", seed,
                  w->unexpected, w->first_unexpected, w->first_msg);
    ck_assert_msg(w->ok > w->ops / 3, "seed %u: only %ld of %ld writes succeeded", seed, w->ok,
                  w->ops);

    json_t *srv_all = NULL, *srv_front = NULL;
    bool ok_all = wait_caught_up(ctl, all, NULL, &srv_all);
    bool ok_front = wait_caught_up(ctl, front, "tier=front", &srv_front);
    ck_assert_msg(ok_all, "seed %u: store (all) never matched the server's LIST", seed);
    ck_assert_msg(ok_front, "seed %u: store (tier=front) never matched the server's LIST", seed);
    ck_assert_uint_gt(json_object_size(srv_all), 0);
    ck_assert_uint_gt(json_object_size(srv_front), 0);
    ck_assert_uint_lt(json_object_size(srv_front), json_object_size(srv_all));
    check_tracker(&t_all, srv_all, "all");
    check_tracker(&t_front, srv_front, "tier=front");

    /* The faults really happened and the informers went through them. */
    struct kop_informer_stats sa, sf;
    kop_informer_stats(inf_all, &sa);
    kop_informer_stats(inf_front, &sf);
    ck_assert_uint_ge(sa.lists, 2); /* relisted after a 410 */
    ck_assert_uint_ge(sf.lists, 2);
    ck_assert_uint_ge(sa.watches, 3);
    ck_assert_uint_gt(sa.errors, 0);
    ck_assert_uint_gt(sf.pages, sf.lists); /* paged */
    ck_assert_double_gt(metric_sum(m, "429", sim.host), 0);
    ck_assert_double_gt(metric_sum(m, "500", sim.host) + metric_sum(m, "503", sim.host), 0);
    fprintf(
        stderr,
        "seed %u: %ld ops (%ld ok, %ld expected errors), %lu drops, %lu compactions; "
        "all: %zu objects, %lu adds %lu updates %lu deletes, %lu lists %lu watches %lu "
        "errors; tier=front: %zu objects, %lu adds %lu updates %lu deletes, %lu lists %lu pages, "
        "%lu resourceVersion regressions\n",
        seed, w->ops, w->ok, w->expected_errors, drops, compacts, json_object_size(srv_all),
        t_all.adds, t_all.updates, t_all.deletes, sa.lists, sa.watches, sa.errors,
        json_object_size(srv_front), t_front.adds, t_front.updates, t_front.deletes, sf.lists,
        sf.pages, t_front.rv_regressions);

    kop_informer_free(inf_all);
    kop_informer_free(inf_front);
    json_decref(srv_all);
    json_decref(srv_front);
    tracker_cleanup(&t_all);
    tracker_cleanup(&t_front);
    for (int i = 0; i < NNS; i++)
        for (int j = 0; j < NNAMES; j++)
            free(w->rv[i][j]);
    free(w);
    kop_store_free(all);
    kop_store_free(front);
    kop_client_free(c);
    kop_client_free(ctl);
    kop_metrics_free(m);
    kop_metrics_free(cm);
    sim_stop(&sim);
}

START_TEST(test_informer_faults_seeds)
{
    /* _i is the seed index (loop test). Each run: up to 4000 writes within
     * about 3 s, whichever comes first. */
    run_seed((unsigned)_i + 1, 4000, 3000);
}
END_TEST

/* ---- client over TLS --------------------------------------------------------- */

static struct sim csim;
static struct kop_metrics *cmetrics;
static struct kop_client *cclient;

static void client_setup(void)
{
    sim_start(&csim, "5");
    cmetrics = kop_metrics_new(false);
    ck_assert_ptr_nonnull(cmetrics);
    cclient = sim_client(&csim, NULL, cmetrics, 0);
    make_namespaces(cclient);
}

static void client_teardown(void)
{
    kop_client_free(cclient);
    kop_metrics_free(cmetrics);
    sim_stop(&csim);
}

START_TEST(test_informer_client_verbs)
{
    client_setup();
    struct kop_api_status st;
    json_t *res = NULL;
    /* CREATE 25, LIST in pages of 10. */
    for (int i = 0; i < 25; i++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "page-%02d", i);
        json_t *o = json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind",
                              "ConfigMap", "metadata", "name", nm, "labels", "set",
                              i % 2 ? "odd" : "even", "data", "i", nm);
        ck_assert_int_eq(kop_client_create(cclient, &cm_res, "ns-a", o, &st, &res), 0);
        ck_assert_int_eq(st.code, 201);
        ck_assert_str_eq(meta_str(res, "name"), nm);
        ck_assert_ptr_nonnull(meta_str(res, "uid"));
        json_decref(res);
        json_decref(o);
    }
    char *cont = NULL;
    int pages = 0;
    json_t *seen = json_object();
    do {
        struct kop_list_options lo = {.limit = 10, .continue_token = cont};
        ck_assert_int_eq(kop_client_list(cclient, &cm_res, "ns-a", &lo, &st, &res), 0);
        pages++;
        ck_assert_uint_le(json_array_size(json_object_get(res, "items")), 10);
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(res, "items"), i, item)
        {
            ck_assert_ptr_null(json_object_get(seen, meta_str(item, "name")));
            json_object_set_new(seen, meta_str(item, "name"), json_true());
        }
        free(cont);
        const char *next = meta_str(res, "continue");
        cont = next && *next ? strdup(next) : NULL;
        if (cont)
            ck_assert_ptr_nonnull(
                json_object_get(json_object_get(res, "metadata"), "remainingItemCount"));
        json_decref(res);
    } while (cont);
    ck_assert_int_eq(pages, 3);
    /* and kube-root-ca.crt, which every namespace has */
    ck_assert_uint_eq(json_object_size(seen), 26);
    ck_assert_ptr_nonnull(json_object_get(seen, "kube-root-ca.crt"));
    json_decref(seen);
    /* Label selector (percent-encoded '=' and all). */
    struct kop_list_options sel = {.label_selector = "set=odd"};
    ck_assert_int_eq(kop_client_list(cclient, &cm_res, "ns-a", &sel, &st, &res), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(res, "items")), 12);
    json_decref(res);
    /* All namespaces. */
    ck_assert_int_eq(kop_client_list(cclient, &cm_res, NULL, NULL, &st, &res), 0);
    ck_assert_uint_ge(json_array_size(json_object_get(res, "items")), 25);
    json_decref(res);

    /* GET, UPDATE, stale UPDATE -> Conflict, PATCH. */
    json_t *got = NULL;
    ck_assert_int_eq(kop_client_get(cclient, &cm_res, "ns-a", "page-00", &st, &got), 0);
    ck_assert_int_eq(st.code, 200);
    json_t *upd = json_deep_copy(got);
    json_object_set_new(json_object_get(upd, "data"), "i", json_string("changed"));
    ck_assert_int_eq(kop_client_update(cclient, &cm_res, "ns-a", NULL, upd, &st, &res), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "data"), "i")),
                     "changed");
    ck_assert_str_ne(meta_str(res, "resourceVersion"), meta_str(got, "resourceVersion"));
    json_decref(res);
    ck_assert_int_eq(kop_client_update(cclient, &cm_res, "ns-a", NULL, upd, &st, &res), -EBUSY);
    ck_assert_int_eq(st.code, 409);
    ck_assert_str_eq(st.reason, "Conflict");
    ck_assert_str_eq(st.message, "Operation cannot be fulfilled on configmaps \"page-00\": the "
                                 "object has been modified; please apply your changes to the "
                                 "latest version and try again");
    json_decref(upd);
    json_t *patch = json_pack("{s:{s:s,s:n}}", "data", "p", "patched", "i");
    ck_assert_int_eq(kop_client_patch(cclient, &cm_res, "ns-a", "page-00", patch, &st, &res), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "data"), "p")),
                     "patched");
    ck_assert_ptr_null(json_object_get(json_object_get(res, "data"), "i"));
    const char *uid = meta_str(got, "uid");
    char rv[64];
    snprintf(rv, sizeof(rv), "%s", meta_str(res, "resourceVersion"));
    json_decref(res);
    json_decref(patch);

    /* DELETE with preconditions: wrong uid, stale rv, then right ones. */
    struct kop_delete_options d = {.precondition_uid = "00000000-0000-0000-0000-000000000000"};
    ck_assert_int_eq(kop_client_delete(cclient, &cm_res, "ns-a", "page-00", &d, &st, NULL), -EBUSY);
    ck_assert_int_eq(st.code, 409);
    ck_assert_str_eq(st.reason, "Conflict");
    ck_assert_ptr_nonnull(strstr(st.message, "the UID in the precondition "
                                             "(00000000-0000-0000-0000-000000000000) does not "
                                             "match the UID in record ("));
    d = (struct kop_delete_options){.precondition_resource_version = "1"};
    ck_assert_int_eq(kop_client_delete(cclient, &cm_res, "ns-a", "page-00", &d, &st, NULL), -EBUSY);
    ck_assert_ptr_nonnull(strstr(st.message, "the ResourceVersion in the precondition (1) "
                                             "does not match the ResourceVersion in record ("));
    d = (struct kop_delete_options){.precondition_uid = uid,
                                    .precondition_resource_version = rv,
                                    .propagation_policy = "Background"};
    ck_assert_int_eq(kop_client_delete(cclient, &cm_res, "ns-a", "page-00", &d, &st, &res), 0);
    ck_assert_int_eq(st.code, 200);
    json_decref(res);
    json_decref(got);
    ck_assert_int_eq(kop_client_get(cclient, &cm_res, "ns-a", "page-00", &st, &res), -ENOENT);
    ck_assert_int_eq(st.code, 404);
    ck_assert_str_eq(st.reason, "NotFound");
    ck_assert_str_eq(st.message, "configmaps \"page-00\" not found");
    ck_assert_int_eq(kop_client_delete(cclient, &cm_res, "ns-a", "page-00", NULL, &st, NULL),
                     -ENOENT);

    /* AlreadyExists vs Conflict, and 422. */
    json_t *dup = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", "page-01");
    ck_assert_int_eq(kop_client_create(cclient, &cm_res, "ns-a", dup, &st, NULL), -EEXIST);
    ck_assert_int_eq(st.code, 409);
    ck_assert_str_eq(st.reason, "AlreadyExists");
    ck_assert_str_eq(st.message, "configmaps \"page-01\" already exists");
    json_decref(dup);
    json_t *bad = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                            "metadata", "name", "Bad_Name");
    ck_assert_int_eq(kop_client_create(cclient, &cm_res, "ns-a", bad, &st, NULL), -EINVAL);
    ck_assert_int_eq(st.code, 422);
    ck_assert_str_eq(st.reason, "Invalid");
    ck_assert_ptr_nonnull(strstr(st.message, "ConfigMap \"Bad_Name\" is invalid: metadata.name: "
                                             "Invalid value: \"Bad_Name\""));
    json_decref(bad);
    /* A namespace that does not exist. */
    json_t *o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap", "metadata",
                          "name", "x");
    ck_assert_int_eq(kop_client_create(cclient, &cm_res, "no-such-ns", o, &st, NULL), -ENOENT);
    ck_assert_str_eq(st.message, "namespaces \"no-such-ns\" not found");
    json_decref(o);

    /* Deployments: /status subresource and Foreground deletion. */
    json_t *dep = json_loads(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\"},"
        "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":"
        "[{\"name\":\"app\",\"image\":\"nginx:1.14.2\"}]}}}}",
        0, NULL);
    ck_assert_int_eq(kop_client_create(cclient, &deploy_res, "ns-b", dep, &st, &res), 0);
    long long gen =
        json_integer_value(json_object_get(json_object_get(res, "metadata"), "generation"));
    json_decref(res);
    json_decref(dep);
    json_t *sp =
        json_pack("{s:{s:i},s:{s:i}}", "spec", "replicas", 9, "status", "observedGeneration", 42);
    ck_assert_int_eq(kop_client_patch_status(cclient, &deploy_res, "ns-b", "web", sp, &st, &res),
                     0);
    /* The status subresource ignores spec changes. */
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "spec"), "replicas")),
                     2);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(res, "status"), "observedGeneration")),
        42);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(res, "metadata"), "generation")), gen);
    json_object_set_new(json_object_get(res, "status"), "observedGeneration", json_integer(43));
    json_t *res2 = NULL;
    ck_assert_int_eq(kop_client_update_status(cclient, &deploy_res, "ns-b", NULL, res, &st, &res2),
                     0);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(res2, "status"), "observedGeneration")),
        43);
    json_decref(res);
    json_decref(res2);
    json_decref(sp);
    d = (struct kop_delete_options){.propagation_policy = "Foreground"};
    ck_assert_int_eq(kop_client_delete(cclient, &deploy_res, "ns-b", "web", &d, &st, &res), 0);
    /* Foreground: the object stays, with a deletionTimestamp and the
     * foregroundDeletion finalizer, until its dependents are gone. */
    ck_assert_ptr_nonnull(meta_str(res, "deletionTimestamp"));
    ck_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(res, "metadata"), "finalizers"), 0)),
                     "foregroundDeletion");
    json_decref(res);

    /* Every request was counted with its code. */
    ck_assert_double_eq(metric(cmetrics, "201", "POST", csim.host), 25 + 1 + NNS);
    ck_assert_double_ge(metric(cmetrics, "409", "DELETE", csim.host), 2);
    ck_assert_double_eq(metric(cmetrics, "422", "POST", csim.host), 1);
    client_teardown();
}
END_TEST

START_TEST(test_informer_client_unauthorized)
{
    client_setup();
    struct kop_kubeconfig kc = {.server = csim.ks.url, .ca_file = csim.ca, .token = "wrong-token"};
    struct kop_client *c = NULL;
    struct kop_client_options o = {.config = &kc, .metrics = cmetrics};
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    struct kop_api_status st;
    ck_assert_int_eq(kop_client_get(c, &cm_res, "ns-a", "x", &st, NULL), -EACCES);
    ck_assert_int_eq(st.code, 401);
    ck_assert_str_eq(st.reason, "Unauthorized");
    ck_assert_str_eq(st.message, "Unauthorized");
    ck_assert_int_eq(st.attempts, 1);
    /* A token file that now holds the right token: the 401 re-reads it
     * once and the retry succeeds. */
    char tf[600];
    snprintf(tf, sizeof(tf), "%s/token", csim.dir);
    FILE *f = fopen(tf, "w");
    ck_assert_ptr_nonnull(f);
    fputs("wrong-token\n", f);
    fclose(f);
    struct kop_kubeconfig kf = {.server = csim.ks.url, .ca_file = csim.ca, .token_file = tf};
    struct kop_client *c2 = NULL;
    o.config = &kf;
    ck_assert_int_eq(kop_client_new(&o, &c2), 0);
    ck_assert_int_eq(kop_client_get(c2, &ns_res, NULL, "ns-a", &st, NULL), -EACCES);
    f = fopen(tf, "w");
    ck_assert_ptr_nonnull(f);
    fputs(TOKEN "\n", f);
    fclose(f);
    ck_assert_int_eq(kop_client_get(c2, &ns_res, NULL, "ns-a", &st, NULL), 0);
    ck_assert_int_eq(st.attempts, 2);
    kop_client_free(c);
    kop_client_free(c2);
    client_teardown();
}
END_TEST

struct bg_get {
    struct kop_client *c;
    int r;
    struct kop_api_status st;
};

static void *bg_get_main(void *arg)
{
    struct bg_get *g = arg;
    g->r = kop_client_get(g->c, &ns_res, NULL, "ns-a", &g->st, NULL);
    return NULL;
}

START_TEST(test_informer_client_retry_after)
{
    client_setup();
    struct kop_api_status st;
    /* Every GET answers 429 Retry-After: 1. With one retry allowed the
     * client waits the full second once, then gives up with -EAGAIN. */
    struct kop_kubeconfig kc;
    ck_assert_int_eq(kop_kubeconfig_load_file(csim.kubeconfig, NULL, &kc), 0);
    struct kop_client_options o = {.config = &kc, .metrics = cmetrics, .max_retries = 1};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    kop_kubeconfig_cleanup(&kc);
    sim_faults(cclient, "{\"rules\":[{\"verb\":\"get\",\"code\":429,\"rate\":1,"
                        "\"retryAfter\":1}]}");
    double before = metric(cmetrics, "429", "GET", csim.host);
    int64_t t0 = mono_ms();
    ck_assert_int_eq(kop_client_get(c, &ns_res, NULL, "ns-a", &st, NULL), -EAGAIN);
    int64_t took = mono_ms() - t0;
    ck_assert_int_eq(st.code, 429);
    ck_assert_int_eq(st.attempts, 2);
    ck_assert_int_eq(st.retry_after_s, 1);
    ck_assert_str_eq(st.message, "Too many requests, please try again later.");
    ck_assert_int_ge(took, 950); /* the Retry-After second was waited */
    ck_assert_double_eq(metric(cmetrics, "429", "GET", csim.host) - before, 2);

    /* Honoured: the fault is lifted while the client waits; its retry
     * after Retry-After succeeds. */
    struct bg_get g = {.c = cclient};
    pthread_t th;
    double seen429 = metric(cmetrics, "429", "GET", csim.host);
    ck_assert_int_eq(pthread_create(&th, NULL, bg_get_main, &g), 0);
    /* Lift it once the first attempt got its 429 (the client counts it
     * before waiting out Retry-After). */
    for (int64_t end = mono_ms() + 30000;
         metric(cmetrics, "429", "GET", csim.host) <= seen429 && mono_ms() < end;)
        kop_test_sleep_ms(10);
    sim_faults(c, "{\"rules\":[]}");
    pthread_join(th, NULL);
    ck_assert_int_eq(g.r, 0);
    ck_assert_int_eq(g.st.code, 200);
    ck_assert_int_ge(g.st.attempts, 2);
    ck_assert_double_ge(metric(cmetrics, "200", "GET", csim.host), 1);

    /* 503 with Retry-After is retried too; 500 without is not. */
    sim_faults(cclient, "{\"rules\":[{\"verb\":\"list\",\"code\":500,\"rate\":1}]}");
    ck_assert_int_eq(kop_client_list(c, &cm_res, "ns-a", NULL, &st, NULL), -EIO);
    ck_assert_int_eq(st.code, 500);
    ck_assert_int_eq(st.attempts, 1);
    ck_assert_str_eq(st.reason, "InternalError");
    ck_assert_str_eq(st.message, "Internal error occurred: injected fault");
    sim_faults(cclient, "{\"rules\":[{\"verb\":\"list\",\"code\":503,\"rate\":1,"
                        "\"retryAfter\":1}]}");
    ck_assert_int_eq(kop_client_list(c, &cm_res, "ns-a", NULL, &st, NULL), -EIO);
    ck_assert_int_eq(st.code, 503);
    ck_assert_int_eq(st.attempts, 2);
    ck_assert_str_eq(st.reason, "ServiceUnavailable");
    sim_faults(cclient, "{\"rules\":[]}");
    kop_client_free(c);
    client_teardown();
}
END_TEST

static int try_config(const char *yaml, const char *dir, struct kop_api_status *st)
{
    struct kop_kubeconfig kc;
    int r = kop_kubeconfig_load_buffer(yaml, strlen(yaml), dir, NULL, &kc);
    ck_assert_msg(r == 0, "kubeconfig: %d", r);
    struct kop_client_options o = {.config = &kc, .metrics = cmetrics, .max_retries = -1};
    struct kop_client *c = NULL;
    ck_assert_int_eq(kop_client_new(&o, &c), 0);
    kop_kubeconfig_cleanup(&kc);
    r = kop_client_get(c, &ns_res, NULL, "ns-a", st, NULL);
    kop_client_free(c);
    return r;
}

START_TEST(test_informer_client_tls)
{
    client_setup();
    char yaml[4096];
    struct kop_api_status st;
    static const char tmpl[] = "apiVersion: v1\n"
                               "kind: Config\n"
                               "clusters:\n"
                               "- name: sim\n"
                               "  cluster:\n"
                               "    server: %s\n"
                               "%s"
                               "users:\n"
                               "- name: u\n"
                               "  user:\n"
                               "    token: " TOKEN "\n"
                               "contexts:\n"
                               "- name: c\n"
                               "  context:\n"
                               "    cluster: sim\n"
                               "    user: u\n"
                               "current-context: c\n";
    /* insecure-skip-tls-verify: no CA at all, still talks. */
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url, "    insecure-skip-tls-verify: true\n");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), 0);
    ck_assert_int_eq(st.code, 200);
    /* The same without the flag: the system CAs do not know kubesim's. */
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url, "");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), -EPROTO);
    ck_assert_int_eq(st.code, 0);
    ck_assert_str_ne(st.message, "");
    /* kubesim's CA as a file relative to the kubeconfig's directory. */
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url, "    certificate-authority: ca.pem\n");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), 0);
    /* tls-server-name: the certificate is checked against that name (SNI
     * too) while the connection still goes to the server's address. */
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url,
             "    certificate-authority: ca.pem\n    tls-server-name: localhost\n");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), 0);
    ck_assert_int_eq(st.code, 200);
    /* The right CA but a name the certificate does not carry. */
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url,
             "    certificate-authority: ca.pem\n    tls-server-name: wrong.example.com\n");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), -EPROTO);
    ck_assert_ptr_nonnull(strstr(st.message, "wrong.example.com"));
    /* Another CA. */
    char *other = kop_test_tmpdir();
    ck_assert_ptr_nonnull(other);
    char cmd[2048];
    const char *root = getenv("KOP_SOURCE_ROOT");
    ck_assert_ptr_nonnull(root);
    snprintf(cmd, sizeof(cmd), "bash '%s/scripts/gen-certs.sh' '%s' >/dev/null 2>&1", root, other);
    ck_assert_int_eq(system(cmd), 0);
    char ca[1024];
    snprintf(ca, sizeof(ca), "    certificate-authority: %s/ca.crt\n", other);
    snprintf(yaml, sizeof(yaml), tmpl, csim.ks.url, ca);
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), -EPROTO);
    ck_assert_int_eq(st.code, 0);
    ck_assert_ptr_nonnull(strcasestr(st.message, "certificate"));
    /* Nothing listening: refused. */
    snprintf(yaml, sizeof(yaml), tmpl, "https://127.0.0.1:1",
             "    insecure-skip-tls-verify: true\n");
    ck_assert_int_eq(try_config(yaml, csim.dir, &st), -ECONNREFUSED);
    ck_assert_double_ge(metric(cmetrics, "<error>", "GET", csim.host), 3);
    kop_test_rmdir(other);
    free(other);
    client_teardown();
}
END_TEST

/* ---- stress: threads sharing one client and one token bucket ----------------- */

#define STRESS_THREADS 4
#define STRESS_OBJECTS 20

struct stress {
    struct kop_client *c;
    int id;
    int failures;
    int first_err;
    char first_msg[1024];
};

static void stress_fail(struct stress *s, int r, const struct kop_api_status *st)
{
    if (s->failures++ == 0) {
        s->first_err = r;
        snprintf(s->first_msg, sizeof(s->first_msg), "HTTP %d %s", st->code, st->message);
    }
}

static void *stress_main(void *arg)
{
    struct stress *s = arg;
    const char *ns = namespaces[s->id % NNS];
    for (int i = 0; i < STRESS_OBJECTS; i++) {
        char nm[64];
        snprintf(nm, sizeof(nm), "t%d-%02d", s->id, i);
        struct kop_api_status st;
        json_t *o =
            json_pack("{s:s,s:s,s:{s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                      "metadata", "name", nm, "labels", "stress", "yes", "data", "k", "v");
        json_t *res = NULL;
        int r = kop_client_create(s->c, &cm_res, ns, o, &st, NULL);
        if (r == 0)
            r = kop_client_get(s->c, &cm_res, ns, nm, &st, &res);
        if (r == 0 && strcmp(meta_str(res, "name"), nm) != 0)
            r = -EBADMSG;
        json_t *p = json_pack("{s:{s:s}}", "data", "k", "w");
        if (r == 0)
            r = kop_client_patch(s->c, &cm_res, ns, nm, p, &st, NULL);
        if (r == 0)
            r = kop_client_delete(s->c, &cm_res, ns, nm, NULL, &st, NULL);
        if (r < 0)
            stress_fail(s, r, &st);
        json_decref(p);
        json_decref(o);
        json_decref(res);
    }
    return NULL;
}

START_TEST(test_informer_client_threads_share_bucket)
{
    client_setup();
    const double qps = 200;
    const int burst = 10;
    struct kop_ratelimit *rl = NULL;
    ck_assert_int_eq(kop_ratelimit_new(qps, burst, &rl), 0);
    struct kop_metrics *m = kop_metrics_new(false);
    struct kop_client *c = sim_client(&csim, rl, m, 0);
    /* An informer on the same client and bucket, watching the churn. */
    struct kop_store *store = NULL;
    ck_assert_int_eq(kop_store_new(m, "kop_store", &store), 0);
    struct tracker t;
    tracker_init(&t, NULL);
    struct kop_informer_options io = {.client = c,
                                      .store = store,
                                      .resource = cm_res,
                                      .kind = "ConfigMap",
                                      .label_selector = "stress=yes",
                                      .on_add = on_add,
                                      .on_update = on_update,
                                      .on_delete = on_delete,
                                      .ud = &t};
    struct kop_informer *inf = NULL;
    ck_assert_int_eq(kop_informer_new(&io, &inf), 0);
    ck_assert_int_eq(kop_informer_start(inf), 0);
    ck_assert_int_eq(kop_informer_wait_synced(inf, 10000), 0);

    struct stress s[STRESS_THREADS];
    pthread_t th[STRESS_THREADS];
    int64_t t0 = mono_ms();
    for (int i = 0; i < STRESS_THREADS; i++) {
        s[i] = (struct stress){.c = c, .id = i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, stress_main, &s[i]), 0);
    }
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(th[i], NULL);
    int64_t took = mono_ms() - t0;
    for (int i = 0; i < STRESS_THREADS; i++)
        ck_assert_msg(s[i].failures == 0, "thread %d: %d failures, first %d (%s)", i, s[i].failures,
                      s[i].first_err, s[i].first_msg);
    const int total = STRESS_THREADS * STRESS_OBJECTS * 4;
    double counted = metric(m, "201", "POST", csim.host) + metric(m, "200", "GET", csim.host) +
                     metric(m, "200", "PATCH", csim.host) + metric(m, "200", "DELETE", csim.host);
    /* The informer's LIST is one more 200 GET (its watch counts when it ends). */
    ck_assert_double_ge(counted, total);
    ck_assert_double_le(counted, total + 5);
    /* The shared bucket held every thread to qps after the burst. */
    ck_assert_int_ge(took, (int64_t)((total - burst) / qps * 1000 * 0.9));

    /* The informer saw every object come and go. */
    int64_t end = mono_ms() + 10000;
    for (;;) {
        pthread_mutex_lock(&t.lock);
        unsigned long dels = t.deletes;
        pthread_mutex_unlock(&t.lock);
        if (dels >= (unsigned long)(STRESS_THREADS * STRESS_OBJECTS) || mono_ms() > end)
            break;
        kop_test_sleep_ms(20);
    }
    kop_informer_free(inf);
    ck_assert_uint_eq(kop_store_count(store), 0);
    ck_assert_msg(t.violations == 0, "%s", t.first);
    ck_assert_uint_eq(t.deletes, STRESS_THREADS * STRESS_OBJECTS);
    ck_assert_uint_eq(t.adds, STRESS_THREADS * STRESS_OBJECTS);
    tracker_cleanup(&t);
    kop_store_free(store);
    kop_client_free(c);
    kop_ratelimit_free(rl);
    kop_metrics_free(m);
    client_teardown();
}
END_TEST

static Suite *informer_suite(void)
{
    Suite *s = suite_create("integration_informer");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_informer_faults_seeds, 0, 4);
    suite_add_tcase(s, tc);
    TCase *cl = tcase_create("client");
    tcase_set_timeout(cl, 120);
    tcase_add_test(cl, test_informer_client_verbs);
    tcase_add_test(cl, test_informer_client_unauthorized);
    tcase_add_test(cl, test_informer_client_retry_after);
    tcase_add_test(cl, test_informer_client_tls);
    tcase_add_test(cl, test_informer_client_threads_share_bucket);
    suite_add_tcase(s, cl);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    /* Injected faults make the runtime log warnings by the hundred. */
    kop_log_setup(getenv("KOP_TEST_ECHO") ? KOP_LOG_DEBUG : KOP_LOG_ERROR, KOP_LOG_FORMAT_TEXT, 2);
    int rc = kop_test_run(informer_suite());
    kop_metrics_global_cleanup();
    curl_global_cleanup();
    return rc;
}
