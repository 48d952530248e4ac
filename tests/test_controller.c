/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MyResource controller's lifecycle without an API server (the
 * reconcile paths run against kubesim in tests/integration/test_operator.c):
 * argument checks, admission rule 4 before the caches synced, and a start
 * against a refused address that neither syncs nor blocks stop/free.
 * Rule 4 after sync, against the in-test fake server (which filters by
 * kop's two label selectors as the apiserver would): the lookup sees
 * Deployments and Services without kop's label (the metadata informers
 * list managed-by!=kop) and kop's own children (the child informers), each
 * held once; answers NOT_SYNCED / ABSENT / PRESENT with the controller
 * uid, stores only the cut-down metadata of foreign objects, never
 * enqueues a reconcile for them, and costs well under the 2 KiB per object
 * budget.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "fakesrv.h"

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/controller.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/reconciler.h"
#include "kop/store.h"

struct fixture {
    struct kop_kubeconfig kc;
    struct kop_client *client;
    struct kop_store *store;
    struct kop_metrics *metrics;
};

static void fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    /* Port 1 on loopback: connections are refused at once. */
    f->kc.server = strdup("https://127.0.0.1:1");
    f->kc.insecure_skip_tls_verify = true;
    f->metrics = kop_metrics_new(false);
    ck_assert_ptr_nonnull(f->metrics);
    const struct kop_client_options co = {.config = &f->kc, .metrics = f->metrics};
    ck_assert_int_eq(kop_client_new(&co, &f->client), 0);
    ck_assert_int_eq(kop_store_new(f->metrics, "kop_store", &f->store), 0);
}

static void fixture_cleanup(struct fixture *f)
{
    kop_client_free(f->client);
    kop_store_free(f->store);
    kop_metrics_free(f->metrics);
    kop_kubeconfig_cleanup(&f->kc);
}

/* A leading controller on namespace ns behind a fake API server answering
 * with h; not started. max_retries: the client's (0: its default). */
struct live {
    struct fsrv srv;
    char *url;
    struct kop_kubeconfig kc;
    struct kop_metrics *metrics;
    struct kop_client *client;
    struct kop_store *store;
    struct kop_controller *c;
};

static void live_new(struct live *l, fsrv_handler_fn h, const char *ns, int max_retries)
{
    memset(l, 0, sizeof(*l));
    fsrv_start(&l->srv, h, NULL);
    l->metrics = kop_metrics_new(false);
    l->url = fsrv_url(&l->srv);
    l->kc.server = l->url;
    const struct kop_client_options co = {
        .config = &l->kc, .metrics = l->metrics, .max_retries = max_retries};
    ck_assert_int_eq(kop_client_new(&co, &l->client), 0);
    ck_assert_int_eq(kop_store_new(l->metrics, "kop_store", &l->store), 0);
    const struct kop_controller_options o = {
        .client = l->client,
        .store = l->store,
        .metrics = l->metrics,
        .namespace = ns,
        .leading = true,
    };
    ck_assert_int_eq(kop_controller_new(&o, &l->c), 0);
}

/* Free the controller (stopped), then the server and the rest. */
static void live_free(struct live *l)
{
    kop_controller_free(l->c);
    fsrv_stop(&l->srv);
    kop_client_free(l->client);
    kop_store_free(l->store);
    kop_metrics_free(l->metrics);
    free(l->url);
}

START_TEST(test_controller_lookup_not_synced_then_stop)
{
    struct fixture f;
    fixture_init(&f);
    struct kop_controller *c = NULL;
    const struct kop_controller_options o = {
        .client = f.client,
        .store = f.store,
        .metrics = f.metrics,
        .namespace = "team-a",
        .max_concurrent = 2,
        .sync_period_ms = 100,
        .leading = true,
    };
    ck_assert_int_eq(kop_controller_new(&o, &c), 0);
    char uid[64] = "untouched";
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "web", uid, sizeof(uid)),
        KOP_CHILD_NOT_SYNCED);
    ck_assert_str_eq(uid, "untouched");
    ck_assert(!kop_controller_synced(c));
    ck_assert(!kop_controller_synced(NULL));
    kop_controller_free(NULL);

    ck_assert_int_eq(kop_controller_start(c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(c, 300), -ETIMEDOUT);
    ck_assert(!kop_controller_synced(c));
    kop_controller_set_leading(c, false);
    kop_controller_set_leading(c, true);
    int64_t t0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0);
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0); /* idempotent */
    ck_assert_int_lt(kop_clock_now_ns() - t0, 5 * KOP_NSEC_PER_SEC);
    kop_controller_free(c);
    fixture_cleanup(&f);
}
END_TEST

/* ---- rule 4 after sync, against a fake API server ----------------------------------- */

#define N_DEPLOY 500

/* The LIST bodies of deployments and services in team-a: everything, kop's
 * children only (app.kubernetes.io/managed-by=kop), the rest only. */
struct lists {
    char *all, *kop, *foreign;
};
static struct lists deploy_lists, svc_lists;

/* A controller ownerReference to MyResource NAME with UID. @ref new */
static json_t *myr_ref(const char *name, const char *uid)
{
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b}", "apiVersion", "mygroup.example.com/v1",
                     "kind", "MyResource", "name", name, "uid", uid, "controller", 1,
                     "blockOwnerDeletion", 1);
}

/* Split items into the three list bodies of KIND (steals items). */
static void make_lists(json_t *items, const char *list_kind, const char *api_version,
                       struct lists *ret)
{
    json_t *kop = json_array(), *foreign = json_array();
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it)
    {
        const char *mb = json_string_value(
            json_object_get(json_object_get(json_object_get(it, "metadata"), "labels"),
                            KOP_RECONCILER_LABEL_MANAGED_BY));
        json_array_append(mb && strcmp(mb, "kop") == 0 ? kop : foreign, it);
    }
    json_t *arrs[] = {items, kop, foreign};
    char **outs[] = {&ret->all, &ret->kop, &ret->foreign};
    for (size_t k = 0; k < 3; k++) {
        json_t *list =
            json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", list_kind, "apiVersion", api_version,
                      "metadata", "resourceVersion", "2000", "items", arrs[k]);
        ck_assert_ptr_nonnull(list);
        *outs[k] = json_dumps(list, JSON_COMPACT);
        json_decref(list);
    }
}

static void free_lists(struct lists *l)
{
    free(l->all);
    free(l->kop);
    free(l->foreign);
    memset(l, 0, sizeof(*l));
}

/* N_DEPLOY copies of a real Deployment (kube-system/coredns, with its
 * managedFields and annotations), renamed; every other one controlled by a
 * MyResource, all with a second, non-controller ownerReference; dep-3
 * labelled managed-by=Helm. Then kop's child "kop-web", labelled
 * managed-by=kop and controlled by MyResource kop-web. */
static void make_deploy_lists(void)
{
    char *path = kop_test_data_path("vectors/apiserver/deployment_list_kube_system_v1.36.json");
    json_t *src = json_load_file(path, 0, NULL);
    free(path);
    ck_assert_ptr_nonnull(src);
    json_t *proto = json_array_get(json_object_get(src, "items"), 0);
    ck_assert_ptr_nonnull(proto);
    json_t *items = json_array();
    for (int i = 0; i <= N_DEPLOY; i++) {
        json_t *d = json_deep_copy(proto);
        json_t *md = json_object_get(d, "metadata");
        char name[32], uid[64], rv[32];
        snprintf(name, sizeof(name), i < N_DEPLOY ? "dep-%d" : "kop-web", i);
        snprintf(uid, sizeof(uid), "6f0a3c2e-0000-4000-8000-%012d", i);
        snprintf(rv, sizeof(rv), "%d", 1000 + i);
        json_object_set_new(md, "name", json_string(name));
        json_object_set_new(md, "namespace", json_string("team-a"));
        json_object_set_new(md, "uid", json_string(uid));
        json_object_set_new(md, "resourceVersion", json_string(rv));
        json_t *refs = json_pack("[{s:s, s:s, s:s, s:s}]", "apiVersion", "v1", "kind", "ConfigMap",
                                 "name", "other", "uid", "not-the-controller");
        if (i % 2 == 0 && i < N_DEPLOY)
            json_array_append_new(refs, myr_ref(name, "owner-uid"));
        if (i == N_DEPLOY)
            json_array_append_new(refs, myr_ref(name, "kop-owner-uid"));
        json_object_set_new(md, "ownerReferences", refs);
        if (i == 3 || i == N_DEPLOY)
            json_object_set_new(json_object_get(md, "labels"), KOP_RECONCILER_LABEL_MANAGED_BY,
                                json_string(i == 3 ? "Helm" : "kop"));
        json_array_append_new(items, d);
    }
    make_lists(items, "DeploymentList", "apps/v1", &deploy_lists);
    json_decref(src);
}

/* Service "web" (not kop's) and kop's child "kop-web". */
static void make_svc_lists(void)
{
    json_t *items = json_loads(
        "[{\"metadata\":{\"name\":\"web\",\"namespace\":\"team-a\",\"uid\":\"svc-uid\","
        "\"resourceVersion\":\"7\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"type\":"
        "\"ClusterIP\",\"ports\":[{\"port\":80}]}},"
        "{\"metadata\":{\"name\":\"kop-web\",\"namespace\":\"team-a\",\"uid\":\"svc-uid-2\","
        "\"resourceVersion\":\"8\",\"labels\":{\"app.kubernetes.io/managed-by\":\"kop\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":"
        "\"MyResource\",\"name\":\"kop-web\",\"uid\":\"kop-owner-uid\",\"controller\":true}]},"
        "\"spec\":{\"type\":\"ClusterIP\",\"ports\":[{\"port\":80}]}}]",
        0, NULL);
    ck_assert_ptr_nonnull(items);
    make_lists(items, "ServiceList", "v1", &svc_lists);
}

static const char empty_list[] =
    "{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"2000\"},"
    "\"items\":[]}";

/* The body for a LIST with path's labelSelector (as kop's client escapes
 * it), filtered as the apiserver would; the fake knows only kop's two. */
static const char *pick(const char *path, const struct lists *l)
{
    const char *sel = strstr(path, "labelSelector=");
    if (!sel)
        return l->all;
    sel += strlen("labelSelector=");
    if (strncmp(sel, "app.kubernetes.io%2Fmanaged-by%21%3Dkop", 39) == 0)
        return l->foreign;
    if (strncmp(sel, "app.kubernetes.io%2Fmanaged-by%3Dkop", 36) == 0)
        return l->kop;
    return empty_list;
}

/* A WATCH answered with its head and then nothing, held open until the
 * client goes or the server stops. */
static bool silent_watch(struct fsrv *s, int fd)
{
    const char *head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n";
    if (!fsrv_write(fd, head, strlen(head)))
        return false;
    char b[256];
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20) > 0 && recv(fd, b, sizeof(b), 0) <= 0)
            break;
    }
    return false;
}

/* LIST: MyResources are empty, deployments and services of team-a as
 * above. WATCH: held open, silent. */
static bool api_handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    if (strstr(req->path, "watch=true")) {
        return silent_watch(s, fd);
    }
    const char *body = empty_list;
    if (strncmp(req->path, "/apis/apps/v1/namespaces/team-a/deployments", 43) == 0)
        body = pick(req->path, &deploy_lists);
    else if (strncmp(req->path, "/api/v1/namespaces/team-a/services", 34) == 0)
        body = pick(req->path, &svc_lists);
    return fsrv_reply(fd, 200, NULL, NULL, body);
}

/* The value of the first sample of a metric family in the text format
 * (0 when absent). */
static double metric_value(struct kop_metrics *m, const char *family)
{
    char *txt = NULL;
    size_t len = 0;
    ck_assert_int_eq(kop_metrics_render(m, &txt, &len), 0);
    double v = 0;
    size_t fl = strlen(family);
    for (char *line = txt; line && *line;) {
        char *next = strchr(line, '\n');
        if (strncmp(line, family, fl) == 0 && (line[fl] == '{' || line[fl] == ' ')) {
            /* The last space of this line (strrchr would find the text's). */
            size_t ll = next ? (size_t)(next - line) : strlen(line);
            char *sp = memrchr(line, ' ', ll);
            ck_assert_ptr_nonnull(sp);
            v = strtod(sp + 1, NULL);
            break;
        }
        line = next ? next + 1 : NULL;
    }
    free(txt);
    return v;
}

START_TEST(test_controller_lookup_foreign_then_children)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    make_deploy_lists();
    make_svc_lists();
    struct live l;
    live_new(&l, api_handler, "team-a", 0);
    struct kop_controller *c = l.c;
    struct kop_store *store = l.store;
    char uid[64] = "untouched";
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "dep-1", uid, sizeof(uid)),
        KOP_CHILD_NOT_SYNCED);
    ck_assert_int_eq(kop_controller_start(c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(c, 10000), 0);
    ck_assert(kop_controller_synced(c));

    /* Without kop's label, with and without a controller. */
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "dep-1", uid, sizeof(uid)),
        KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "");
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "dep-2", uid, sizeof(uid)),
        KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "owner-uid");
    /* managed-by with another value is not kop's. */
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "dep-3", uid, sizeof(uid)),
        KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "");
    ck_assert_int_eq(kop_controller_child_lookup(c, "Service", "team-a", "web", uid, sizeof(uid)),
                     KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "");
    /* kop's own children, from the child informers, with their controller. */
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "kop-web", uid, sizeof(uid)),
        KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "kop-owner-uid");
    snprintf(uid, sizeof(uid), "untouched");
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Service", "team-a", "kop-web", uid, sizeof(uid)),
        KOP_CHILD_PRESENT);
    ck_assert_str_eq(uid, "kop-owner-uid");
    snprintf(uid, sizeof(uid), "untouched");
    ck_assert_int_eq(kop_controller_child_lookup(c, "Service", "team-a", "dep-1", uid, sizeof(uid)),
                     KOP_CHILD_ABSENT);
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "nothing", uid, sizeof(uid)),
        KOP_CHILD_ABSENT);
    ck_assert_str_eq(uid, "untouched");
    ck_assert_int_eq(kop_controller_child_lookup(c, "ConfigMap", "team-a", "web", uid, sizeof(uid)),
                     KOP_CHILD_ABSENT);
    /* A namespace this replica does not watch. */
    ck_assert_int_eq(kop_controller_child_lookup(c, "Service", "team-b", "web", uid, sizeof(uid)),
                     KOP_CHILD_NOT_SYNCED);

    /* The reconciler's labelled view holds kop's children only... */
    ck_assert(!kop_store_exists(store, "Deployment", "team-a", "dep-1"));
    ck_assert(!kop_store_exists(store, "Deployment", "team-a", "dep-3"));
    ck_assert(!kop_store_exists(store, "Service", "team-a", "web"));
    ck_assert(kop_store_exists(store, "Deployment", "team-a", "kop-web"));
    ck_assert(kop_store_exists(store, "Service", "team-a", "kop-web"));
    /* ...and the metadata view everything else: no object twice. */
    ck_assert(!kop_store_exists(store, "Deployment.meta", "team-a", "kop-web"));
    ck_assert(!kop_store_exists(store, "Service.meta", "team-a", "kop-web"));
    /* Only the cut-down metadata is kept. */
    json_t *d = kop_store_get(store, "Deployment.meta", "team-a", "dep-2");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(json_object_size(d), 3);
    ck_assert_str_eq(json_string_value(json_object_get(d, "apiVersion")), "apps/v1");
    ck_assert_str_eq(json_string_value(json_object_get(d, "kind")), "Deployment");
    json_t *md = json_object_get(d, "metadata");
    ck_assert_int_eq(json_object_size(md), 5);
    ck_assert_str_eq(json_string_value(json_object_get(md, "resourceVersion")), "1002");
    json_t *refs = json_object_get(md, "ownerReferences");
    ck_assert_int_eq(json_array_size(refs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(refs, 0), "uid")),
                     "owner-uid");
    json_decref(d);
    d = kop_store_get(store, "Deployment.meta", "team-a", "dep-1");
    ck_assert_int_eq(json_object_size(json_object_get(d, "metadata")), 4); /* no owner refs */
    json_decref(d);

    /* Reconciles only for kop's children (the owner kop-web, once or twice
     * as the queue deduplicates), none for the metadata entries. */
    double adds = metric_value(l.metrics, "workqueue_adds_total");
    ck_assert_msg(adds >= 1 && adds <= 2, "adds %g", adds);

    ck_assert_int_eq(kop_controller_stop(c, 5000), 0);
    /* Memory: N_DEPLOY + 1 metadata entries and kop's two children, once;
     * without the children, the metadata alone within budget. */
    size_t n = kop_store_count(store);
    ck_assert_uint_eq(n, N_DEPLOY + 1 + 2);
    size_t full = kop_store_bytes(store);
    ck_assert_int_eq(kop_store_delete(store, "Deployment", "team-a", "kop-web", NULL), 0);
    ck_assert_int_eq(kop_store_delete(store, "Service", "team-a", "kop-web", NULL), 0);
    size_t bytes = kop_store_bytes(store);
    ck_assert_uint_lt(bytes, full);
    n -= 2;
    printf("rule-4 metadata cache: %zu objects, %zu bytes, %zu bytes/object\n", n, bytes,
           bytes / n);
    ck_assert_uint_lt(bytes / n, 2048); /* docs/performance.md §3.4: < 2 KiB per child */
    live_free(&l);
    free_lists(&deploy_lists);
    free_lists(&svc_lists);
    curl_global_cleanup();
}
END_TEST

/* ---- a status subresource that answers 404 ------------------------------------------- */

static atomic_int status_patches;
static atomic_bool status_429; /* answer 429 with a day's Retry-After instead of 404 */

/* MyResource team-s/m1 (with a status: it was reconciled before) whose
 * PATCH .../status is answered 404 NotFound, as the apiserver answers
 * when the CRD has no status subresource; children are created. */
static bool status404_handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    static const char myr[] =
        "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
        "\"name\":\"m1\",\"namespace\":\"team-s\",\"uid\":\"m1-uid\",\"resourceVersion\":\"5\","
        "\"generation\":2},\"spec\":{\"replicas\":1,\"image\":\"nginx:1.25\"},\"status\":{"
        "\"observedGeneration\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"False\","
        "\"reason\":\"x\",\"message\":\"\",\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}]}}";
    if (strstr(req->path, "watch=true")) {
        return silent_watch(s, fd);
    }
    if (strcmp(req->method, "PATCH") == 0 && strstr(req->path, "/myresources/m1/status")) {
        status_patches++;
        if (atomic_load(&status_429))
            return fsrv_reply(fd, 429, "Retry-After: 86400\r\n", "text/plain",
                              "Too many requests, please try again later.\n");
        return fsrv_reply(fd, 404, NULL, NULL,
                          "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":"
                          "\"Failure\",\"message\":\"myresources.mygroup.example.com \\\"m1\\\" "
                          "not found\",\"reason\":\"NotFound\",\"details\":{\"name\":\"m1\","
                          "\"group\":\"mygroup.example.com\",\"kind\":\"myresources\"},"
                          "\"code\":404}");
    }
    if (strcmp(req->method, "GET") == 0 && strstr(req->path, "/myresources/m1"))
        return fsrv_reply(fd, 200, NULL, NULL, myr);
    if (strcmp(req->method, "GET") == 0 && strstr(req->path, "/myresources")) {
        char body[2048];
        snprintf(body, sizeof(body),
                 "{\"kind\":\"MyResourceList\",\"apiVersion\":\"mygroup.example.com/v1\","
                 "\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[%s]}",
                 myr);
        return fsrv_reply(fd, 200, NULL, NULL, body);
    }
    if (strcmp(req->method, "POST") == 0)
        return fsrv_reply(fd, 201, NULL, NULL, req->body ? req->body : "{}");
    if (strcmp(req->method, "GET") == 0)
        return fsrv_reply(fd, 200, NULL, NULL, empty_list);
    return fsrv_reply(fd, 404, NULL, "text/plain", "404 page not found\n");
}

/* A status write answered 404 while the MyResource is still there (no
 * status subresource, or a server that lost it) is not taken for the
 * MyResource's deletion and dropped: it is retried with the per-item
 * backoff, as controller-runtime requeues a failed status update. */
START_TEST(test_controller_status_404_is_retried)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    status_patches = 0;
    atomic_store(&status_429, false);
    struct live l;
    live_new(&l, status404_handler, "team-s", 0);
    struct kop_controller *c = l.c;
    ck_assert_int_eq(kop_controller_start(c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(c, 10000), 0);
    for (int i = 0; i < 500 && status_patches < 3; i++) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_ge(status_patches, 3);
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0);
    live_free(&l);
    curl_global_cleanup();
}
END_TEST

/* A Retry-After of a day on a 429 does not park the MyResource for a
 * day: the requeue is capped at the workqueue's longest backoff (1000 s),
 * so it is reconciled again once the server behaves. The reconcile's
 * requeue is read from its debug log line. */
START_TEST(test_controller_retry_after_requeue_is_capped)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char *dir = kop_test_tmpdir();
    char logpath[1024];
    snprintf(logpath, sizeof(logpath), "%s/log", dir);
    int lfd = open(logpath, O_CREAT | O_RDWR | O_TRUNC, 0600);
    ck_assert_int_ge(lfd, 0);
    kop_log_setup(KOP_LOG_DEBUG, KOP_LOG_FORMAT_JSON, lfd);
    status_patches = 0;
    atomic_store(&status_429, true);
    struct live l;
    live_new(&l, status404_handler, "team-s", -1);
    struct kop_controller *c = l.c;
    ck_assert_int_eq(kop_controller_start(c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(c, 10000), 0);
    /* Until the reconcile that got the 429 has logged its result. */
    static char buf[1 << 20];
    ssize_t n = 0;
    for (int i = 0; i < 500; i++) {
        n = pread(lfd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (status_patches >= 1 && strstr(buf, "\"msg\":\"reconciled\""))
            break;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0);
    live_free(&l);
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, 2);
    close(lfd);
    ck_assert_int_eq(status_patches, 1);
    ck_assert_int_gt(n, 0);
    const char *line = strstr(buf, "\"msg\":\"reconciled\"");
    ck_assert_msg(line, "no reconciled line in: %s", buf);
    const char *ra = strstr(line, "\"requeueAfterMs\":");
    ck_assert_ptr_nonnull(ra);
    long long ms = strtoll(ra + strlen("\"requeueAfterMs\":"), NULL, 10);
    ck_assert_msg(ms > 0 && ms <= 1000000, "requeue after %lld ms", ms);
    free(dir);
    curl_global_cleanup();
}
END_TEST

/* ---- members engaged and disengaged while the controller runs ---------------------- */

/* One member behind its own fake server (status404_handler: every
 * reconcile fails its status write and is retried, so reconciles of the
 * member are in flight while it goes). */
struct member {
    struct fsrv srv;
    char *url;
    struct kop_kubeconfig kc;
    struct kop_client *client, *rclient;
    struct kop_store *store;
};

static void member_up(struct member *mb, struct kop_metrics *m, struct kop_controller *c)
{
    memset(mb, 0, sizeof(*mb));
    fsrv_start(&mb->srv, status404_handler, NULL);
    mb->url = fsrv_url(&mb->srv);
    mb->kc.server = mb->url;
    const struct kop_client_options co = {.config = &mb->kc, .metrics = m, .cluster = "m"};
    const struct kop_client_options ro = {
        .config = &mb->kc, .metrics = m, .cluster = "m", .abortable = true};
    ck_assert_int_eq(kop_client_new(&co, &mb->client), 0);
    ck_assert_int_eq(kop_client_new(&ro, &mb->rclient), 0);
    ck_assert_int_eq(kop_store_new_labelled(m, "kop_store", "cluster", "m", &mb->store), 0);
    const struct kop_controller_cluster_options o = {
        .name = "m", .client = mb->client, .reconcile_client = mb->rclient, .store = mb->store};
    ck_assert_int_eq(kop_controller_add_cluster(c, &o), 0);
    ck_assert_int_eq(kop_controller_add_cluster(c, &o), -EEXIST);
}

static void member_down(struct member *mb, struct kop_metrics *m, struct kop_controller *c)
{
    ck_assert_int_eq(kop_controller_remove_cluster(c, "m"), 0);
    ck_assert_int_eq(kop_controller_remove_cluster(c, "m"), -ENOENT);
    ck_assert_ptr_null(kop_controller_cluster(c, "m"));
    kop_client_free(mb->rclient);
    kop_client_free(mb->client);
    kop_store_free(mb->store);
    kop_metrics_remove_series(m, "rest_client_requests_total", "cluster", "m");
    fsrv_stop(&mb->srv);
    free(mb->url);
}

/* controller_runtime_reconcile_total{cluster="m",result="error"}. */
static double member_errors(struct kop_metrics *m)
{
    char *text = NULL;
    ck_assert_int_eq(kop_metrics_render(m, &text, NULL), 0);
    const char *needle = "controller_runtime_reconcile_total{controller=\"myresource\",cluster="
                         "\"m\",result=\"error\"} ";
    const char *p = strstr(text, needle);
    double v = p ? strtod(p + strlen(needle), NULL) : -1;
    free(text);
    return v;
}

struct reviewer {
    struct kop_controller *c;
    atomic_bool stop;
    atomic_int handles;
};

/* What the webhook does for .../clusters/m, as fast as it can. */
static void *review_loop(void *arg)
{
    struct reviewer *rv = arg;
    while (!atomic_load(&rv->stop)) {
        void *h = kop_controller_cluster(rv->c, "m");
        if (!h)
            continue;
        char uid[64];
        (void)kop_controller_cluster_child_lookup(h, "Deployment", "team-s", "m1", uid,
                                                  sizeof(uid));
        (void)kop_controller_cluster_ready(rv->c, "m");
        kop_controller_cluster_put(h);
        atomic_fetch_add(&rv->handles, 1);
    }
    return NULL;
}

/* A member engaged while the controller runs is reconciled (its own
 * series count it); removed while its reconciles are in flight and a
 * reviewer holds it: lookups fail at once, its series go, the pool serves
 * the local cluster on; engaged again under the same name, and again
 * removed. Under TSan this is the check of the references and locks. */
START_TEST(test_controller_member_engaged_and_disengaged)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    status_patches = 0;
    atomic_store(&status_429, false);
    struct live l;
    live_new(&l, status404_handler, NULL, 0);
    ck_assert_int_eq(kop_controller_start(l.c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(l.c, 10000), 0);
    static const char *const bad[] = {"local", "a/b", "", NULL};
    for (size_t i = 0; bad[i]; i++) {
        const struct kop_controller_cluster_options o = {
            .name = bad[i], .client = l.client, .store = l.store};
        ck_assert_int_eq(kop_controller_add_cluster(l.c, &o), -EINVAL);
    }
    struct reviewer rv = {.c = l.c};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, review_loop, &rv), 0);
    for (int round = 0; round < 3; round++) {
        struct member mb;
        member_up(&mb, l.metrics, l.c);
        for (int i = 0; i < 1000 && member_errors(l.metrics) < 2; i++)
            nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
        ck_assert_msg(member_errors(l.metrics) >= 2, "member m not reconciled (round %d)", round);
        ck_assert(kop_controller_cluster_ready(l.c, "m"));
        member_down(&mb, l.metrics, l.c);
        ck_assert_double_eq(member_errors(l.metrics), -1);
        ck_assert(!kop_controller_cluster_ready(l.c, "m"));
    }
    atomic_store(&rv.stop, true);
    pthread_join(t, NULL);
    ck_assert_int_gt(atomic_load(&rv.handles), 0);
    /* the local cluster is still reconciled */
    int before = status_patches;
    for (int i = 0; i < 1000 && status_patches == before; i++)
        nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
    ck_assert_int_gt(status_patches, before);
    ck_assert_int_eq(kop_controller_stop(l.c, 5000), 0);
    live_free(&l);
    curl_global_cleanup();
}
END_TEST

static Suite *controller_suite(void)
{
    Suite *s = suite_create("controller");
    TCase *tc = tcase_create("lifecycle");
    tcase_add_test(tc, test_controller_lookup_not_synced_then_stop);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("rule4");
    tcase_set_timeout(tr, 60);
    tcase_add_test(tr, test_controller_lookup_foreign_then_children);
    tcase_add_test(tr, test_controller_status_404_is_retried);
    tcase_add_test(tr, test_controller_retry_after_requeue_is_capped);
    tcase_add_test(tr, test_controller_member_engaged_and_disengaged);
    suite_add_tcase(s, tr);
    return s;
}

int main(void)
{
    return kop_test_run(controller_suite());
}
