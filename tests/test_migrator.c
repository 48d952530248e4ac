/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage version migrator (include/kop/migrator.h): the CRD plan,
 * the StorageVersionMigration name/object/state, the status patch, and
 * kop_migrator_run_once against a fake API server (tests/fakesrv.h) that
 * answers a 409, a 404 and a 500 on the way, pages its list, serves (or
 * not) the storagemigration.k8s.io API, keeps a checkpoint ConfigMap and
 * can refuse the final status patch as a changed CRD would.
 */
#include "kop/migrator.h"

#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakesrv.h"
#include "kop/client.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kubetest.h"
#include "testutil.h"

#define CRD_URL                                                                                    \
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/myresources.mygroup.example.com"
#define MYR_URL "/apis/mygroup.example.com/v2/"
#define SVM_URL "/apis/storagemigration.k8s.io/v1beta1"
#define CM_URL "/api/v1/namespaces/kop-system/configmaps"

/* A CRD with versions v1 and v2, storage "storage", storedVersions as
 * given (NULL-terminated). @ref new */
static json_t *crd_with(const char *storage, const char *stored, const char *stored2)
{
    json_t *crd = json_pack(
        "{s:{s:s, s:s, s:i}, s:{s:[{s:s, s:b}, {s:s, s:b}]}, s:{s:[]}}", "metadata",
        "resourceVersion", "100", "uid", "3f2c5a9e-aaaa-bbbb-cccc-000000000001", "generation", 2,
        "spec", "versions", "name", "v1", "storage", strcmp(storage, "v1") == 0, "name", "v2",
        "storage", strcmp(storage, "v2") == 0, "status", "storedVersions");
    json_t *sv = json_object_get(json_object_get(crd, "status"), "storedVersions");
    if (stored)
        json_array_append_new(sv, json_string(stored));
    if (stored2)
        json_array_append_new(sv, json_string(stored2));
    return crd;
}

START_TEST(test_migrator_plan)
{
    struct kop_migrator_plan p;
    json_t *crd = crd_with("v2", "v1", "v2");
    ck_assert_int_eq(kop_migrator_plan(crd, &p), 0);
    ck_assert_str_eq(p.storage, "v2");
    ck_assert_str_eq(p.stale, "v1");
    ck_assert_str_eq(p.rv, "100");
    ck_assert_int_eq(p.generation, 2);
    json_decref(crd);

    crd = crd_with("v2", "v2", NULL);
    ck_assert_int_eq(kop_migrator_plan(crd, &p), 0);
    ck_assert_str_eq(p.stale, "");
    json_decref(crd);

    crd = crd_with("v3", "v1", "v2"); /* no version is the storage one */
    ck_assert_int_eq(kop_migrator_plan(crd, &p), -EINVAL);
    json_decref(crd);
}
END_TEST

START_TEST(test_migrator_svm_helpers)
{
    struct kop_migrator_plan p;
    json_t *crd = crd_with("v2", "v1", "v2");
    ck_assert_int_eq(kop_migrator_plan(crd, &p), 0);
    json_decref(crd);
    char name[253];
    kop_migrator_svm_name("myresources", &p, name, sizeof(name));
    ck_assert_str_eq(name, "kop-myresources-to-v2-g2-3f2c5a9e");
    json_t *o = kop_migrator_svm_object(name, "mygroup.example.com", "myresources");
    ck_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")),
                     "storagemigration.k8s.io/v1beta1");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(o, "spec"), "resource"), "resource")),
                     "myresources");
    json_decref(o);

    json_t *s = json_pack("{s:{s:[{s:s, s:s}]}}", "status", "conditions", "type", "Running",
                          "status", "True");
    ck_assert_int_eq(kop_migrator_svm_state(s), KOP_MIGRATOR_SVM_PENDING);
    json_decref(s);
    s = json_pack("{s:{s:[{s:s, s:s}, {s:s, s:s}]}}", "status", "conditions", "type", "Running",
                  "status", "False", "type", "Succeeded", "status", "True");
    ck_assert_int_eq(kop_migrator_svm_state(s), KOP_MIGRATOR_SVM_SUCCEEDED);
    json_decref(s);
    s = json_pack("{s:{s:[{s:s, s:s}]}}", "status", "conditions", "type", "Failed", "status",
                  "True");
    ck_assert_int_eq(kop_migrator_svm_state(s), KOP_MIGRATOR_SVM_FAILED);
    json_decref(s);
    s = json_pack("{s:{s:[{s:s, s:s}]}}", "status", "conditions", "type", "Succeeded", "status",
                  "False");
    ck_assert_int_eq(kop_migrator_svm_state(s), KOP_MIGRATOR_SVM_PENDING);
    json_decref(s);

    json_t *patch = kop_migrator_status_patch(&p);
    char *txt = json_dumps(patch, JSON_SORT_KEYS | JSON_COMPACT);
    ck_assert_str_eq(txt,
                     "{\"metadata\":{\"resourceVersion\":\"100\"},\"status\":{\"storedVersions\":"
                     "[\"v2\"]}}");
    free(txt);
    json_decref(patch);
}
END_TEST

/* ---- a fake API server ------------------------------------------------------------------------
 */

#define NOBJ 5

/* F is reset between runs while the server's threads may still hold a
 * connection: the lock lives outside it. */
static pthread_mutex_t flock = PTHREAD_MUTEX_INITIALIZER;
struct fake {
    bool svm_served;
    int patch_code;   /* answer to the status patch */
    int list_fail_at; /* list page (0-based) that fails with 500 once; -1 none */
    int puts[NOBJ];   /* PUTs per object */
    int writes[NOBJ]; /* PUTs that changed the resourceVersion */
    int rv[NOBJ];
    bool stored_v2[NOBJ];
    bool deleted[NOBJ];
    int patches;
    char patch_body[512];
    int svm_creates, svm_gets;
    bool svm_exists; /* a previous leader created it: POST answers 409 */
    bool svm_fails;  /* it ends Failed */
    char *cm;        /* checkpoint ConfigMap body, or NULL */
    int cm_rv;
};
static struct fake F;
static const char *const names[NOBJ] = {"ns1/a", "ns1/b", "ns1/c", "ns2/d", "ns2/e"};

static void fake_reset(void)
{
    pthread_mutex_lock(&flock);
    free(F.cm);
    memset(&F, 0, sizeof(F));
    F.patch_code = 200;
    F.list_fail_at = -1;
    for (int i = 0; i < NOBJ; i++)
        F.rv[i] = 10 + i;
    F.stored_v2[4] = true; /* e is already in the storage version */
    pthread_mutex_unlock(&flock);
}

static json_t *obj_json(int i)
{
    char ns[8], name[8], rv[16];
    sscanf(names[i], "%7[^/]/%7s", ns, name);
    snprintf(rv, sizeof(rv), "%d", F.rv[i]);
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:i}}", "apiVersion",
                     "mygroup.example.com/v2", "kind", "MyResource", "metadata", "namespace", ns,
                     "name", name, "uid", names[i], "resourceVersion", rv, "spec", "replicas", i);
}

static bool reply_json(int fd, int code, json_t *v)
{
    char *txt = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    bool ok = fsrv_reply(fd, code, NULL, "application/json", txt);
    free(txt);
    return ok;
}

static bool reply_status(int fd, int code, const char *reason)
{
    return reply_json(fd, code,
                      json_pack("{s:s, s:s, s:s, s:s, s:i}", "kind", "Status", "apiVersion", "v1",
                                "status", "Failure", "reason", reason, "code", code));
}

static int obj_index(const char *path)
{
    for (int i = 0; i < NOBJ; i++) {
        char ns[8], name[8], want[128];
        sscanf(names[i], "%7[^/]/%7s", ns, name);
        snprintf(want, sizeof(want), MYR_URL "namespaces/%s/myresources/%s", ns, name);
        if (strcmp(path, want) == 0)
            return i;
    }
    return -1;
}

static bool handle(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    bool ok;
    pthread_mutex_lock(&flock);
    if (strcmp(req->method, "GET") == 0 && strcmp(req->path, CRD_URL) == 0) {
        ok = reply_json(fd, 200, crd_with("v2", "v1", "v2"));
    } else if (strcmp(req->method, "PATCH") == 0 && strcmp(req->path, CRD_URL "/status") == 0) {
        F.patches++;
        snprintf(F.patch_body, sizeof(F.patch_body), "%.*s", (int)req->body_len, req->body);
        ok = F.patch_code == 200 ? reply_json(fd, 200, crd_with("v2", "v2", NULL))
                                 : reply_status(fd, F.patch_code, "Conflict");
    } else if (strcmp(req->path, SVM_URL) == 0) {
        ok = F.svm_served ? reply_json(fd, 200,
                                       json_pack("{s:s, s:[{s:s}]}", "groupVersion",
                                                 "storagemigration.k8s.io/v1beta1", "resources",
                                                 "name", "storageversionmigrations"))
                          : reply_status(fd, 404, "NotFound");
    } else if (strncmp(req->path, SVM_URL "/storageversionmigrations", 41) == 0) {
        if (strcmp(req->method, "POST") == 0) {
            F.svm_creates++;
            ok = F.svm_exists ? reply_status(fd, 409, "AlreadyExists")
                              : reply_json(fd, 201, json_loadb(req->body, req->body_len, 0, NULL));
        } else {
            /* Running on the first look, Succeeded (or Failed) after. */
            F.svm_gets++;
            const char *last = F.svm_fails ? "Failed" : "Succeeded";
            ok = reply_json(fd, 200,
                            json_pack("{s:{s:[{s:s, s:s}]}}", "status", "conditions", "type",
                                      F.svm_gets > 1 ? last : "Running", "status", "True"));
        }
    } else if (strncmp(req->path, MYR_URL "myresources?", strlen(MYR_URL "myresources?")) == 0) {
        /* Pages of two; the continue token is the index of the next item. */
        const char *c = strstr(req->path, "continue=");
        int from = c ? (int)strtol(c + 9, NULL, 10) : 0;
        if (F.list_fail_at == from / 2) {
            F.list_fail_at = -1;
            ok = reply_status(fd, 500, "InternalError");
        } else {
            json_t *items = json_array();
            for (int i = from; i < from + 2 && i < NOBJ; i++)
                if (!F.deleted[i] || i == 2) /* c is listed, then gone */
                    json_array_append_new(items, obj_json(i));
            char next[16] = "";
            if (from + 2 < NOBJ)
                snprintf(next, sizeof(next), "%d", from + 2);
            ok = reply_json(fd, 200,
                            json_pack("{s:s, s:{s:s}, s:o}", "kind", "MyResourceList", "metadata",
                                      "continue", next, "items", items));
        }
    } else if (obj_index(req->path) >= 0) {
        int i = obj_index(req->path);
        if (strcmp(req->method, "GET") == 0) {
            ok =
                F.deleted[i] ? reply_status(fd, 404, "NotFound") : reply_json(fd, 200, obj_json(i));
        } else {
            F.puts[i]++;
            json_t *body = json_loadb(req->body, req->body_len, 0, NULL);
            const char *rv = json_string_value(
                json_object_get(json_object_get(body, "metadata"), "resourceVersion"));
            char cur[16];
            snprintf(cur, sizeof(cur), "%d", F.rv[i]);
            if (F.deleted[i]) {
                ok = reply_status(fd, 404, "NotFound");
            } else if (i == 1 && F.puts[i] == 1) {
                /* b was written by someone else since the list */
                F.rv[i] += 100;
                F.stored_v2[i] = true;
                ok = reply_status(fd, 409, "Conflict");
            } else if (i == 3 && F.puts[i] == 1) {
                ok = reply_status(fd, 500, "InternalError");
            } else if (!rv || strcmp(rv, cur) != 0) {
                ok = reply_status(fd, 409, "Conflict");
            } else {
                if (!F.stored_v2[i]) {
                    F.rv[i] += 1000;
                    F.stored_v2[i] = true;
                    F.writes[i]++;
                }
                ok = reply_json(fd, 200, obj_json(i));
            }
            json_decref(body);
        }
    } else if (strncmp(req->path, CM_URL, strlen(CM_URL)) == 0) {
        if (strcmp(req->method, "GET") == 0) {
            if (F.cm) {
                json_t *cm = json_loads(F.cm, 0, NULL);
                char rv[16];
                snprintf(rv, sizeof(rv), "%d", F.cm_rv);
                json_object_set_new(json_object_get(cm, "metadata"), "resourceVersion",
                                    json_string(rv));
                ok = reply_json(fd, 200, cm);
            } else {
                ok = reply_status(fd, 404, "NotFound");
            }
        } else {
            free(F.cm);
            F.cm = strndup(req->body, req->body_len);
            F.cm_rv++;
            ok = reply_json(fd, strcmp(req->method, "POST") == 0 ? 201 : 200,
                            json_loadb(req->body, req->body_len, 0, NULL));
        }
    } else {
        ok = reply_status(fd, 404, "NotFound");
    }
    pthread_mutex_unlock(&flock);
    return ok;
}

/* ---- runs ---------------------------------------------------------------------------------- */

static struct fsrv srv;
static char *url;
static struct kop_client *client;
static struct kop_metrics *metrics;

static void run_setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fake_reset();
    fsrv_start(&srv, handle, NULL);
    url = fsrv_url(&srv);
    metrics = kop_metrics_new(false);
    struct kop_kubeconfig kc = {.server = url};
    const struct kop_client_options co = {
        .config = &kc, .metrics = metrics, .max_retries = -1, .abortable = true};
    ck_assert_int_eq(kop_client_new(&co, &client), 0);
}

static void run_teardown(void)
{
    kop_client_free(client);
    client = NULL;
    fsrv_stop(&srv);
    free(url);
    kop_metrics_free(metrics);
    pthread_mutex_lock(&flock);
    free(F.cm);
    F.cm = NULL;
    pthread_mutex_unlock(&flock);
    curl_global_cleanup();
}

static struct kop_migrator *new_migrator(bool checkpoint)
{
    const struct kop_migrator_options o = {
        .client = client,
        .metrics = metrics,
        .crd_name = "myresources.mygroup.example.com",
        .group = "mygroup.example.com",
        .resource = "myresources",
        .page_size = 2,
        .poll_ms = 10,
        .checkpoint_namespace = checkpoint ? "kop-system" : NULL,
        .checkpoint_name = checkpoint ? "kop-leader-storage-migration" : NULL,
        .leading = true,
    };
    struct kop_migrator *m = NULL;
    ck_assert_int_eq(kop_migrator_new(&o, &m), 0);
    return m;
}

static double sample(const char *line)
{
    char *txt = NULL;
    size_t len = 0;
    ck_assert_int_eq(kop_metrics_render(metrics, &txt, &len), 0);
    const char *p = strstr(txt, line);
    double v = p ? strtod(p + strlen(line), NULL) : -1;
    free(txt);
    return v;
}

/* The test's side of F, under the lock (the server's threads share it). */
#define LOCKED(stmt)                                                                               \
    do {                                                                                           \
        pthread_mutex_lock(&flock);                                                                \
        stmt;                                                                                      \
        pthread_mutex_unlock(&flock);                                                              \
    } while (0)

static int fget_(const int *arr, int i)
{
    pthread_mutex_lock(&flock);
    int v = arr[i];
    pthread_mutex_unlock(&flock);
    return v;
}
#define fget(field, i) fget_(F.field, (i))
#define fval(field) fget_(&F.field, 0)

static bool patch_has(const char *needle)
{
    pthread_mutex_lock(&flock);
    bool ok = strstr(F.patch_body, needle) != NULL;
    pthread_mutex_unlock(&flock);
    return ok;
}

static bool cm_has(const char *needle)
{
    pthread_mutex_lock(&flock);
    bool ok = F.cm && strstr(F.cm, needle) != NULL;
    pthread_mutex_unlock(&flock);
    return ok;
}

static void set_cm(const char *doc)
{
    pthread_mutex_lock(&flock);
    free(F.cm);
    F.cm = strdup(doc);
    pthread_mutex_unlock(&flock);
}

START_TEST(test_migrator_walks_every_object)
{
    LOCKED(F.deleted[2] = true); /* c: listed, then deleted */
    LOCKED(F.list_fail_at = 1);  /* the second page answers 500 once */
    struct kop_migrator *m = new_migrator(false);
    bool api = true;
    ck_assert_int_eq(kop_migrator_run_once(m, &api), 0);
    ck_assert(!api);
    /* a and d rewritten once (d after a 500), b retried after its 409 and
     * found written meanwhile, c skipped, e already there. */
    ck_assert_int_eq(fget(writes, 0), 1);
    ck_assert_int_eq(fget(puts, 1), 2);
    ck_assert_int_eq(fget(writes, 1), 0);
    ck_assert_int_eq(fget(puts, 2), 1);
    ck_assert_int_eq(fget(puts, 3), 2);
    ck_assert_int_eq(fget(writes, 3), 1);
    ck_assert_int_eq(fget(puts, 4), 1);
    ck_assert_int_eq(fget(writes, 4), 0);
    ck_assert_double_eq(sample("kop_storage_migration_objects_total{result=\"migrated\"} "), 2);
    ck_assert_double_eq(sample("kop_storage_migration_objects_total{result=\"unchanged\"} "), 2);
    ck_assert_double_eq(sample("kop_storage_migration_objects_total{result=\"skipped\"} "), 1);
    ck_assert_double_eq(sample("kop_storage_migration_objects_total{result=\"conflict\"} "), 1);
    ck_assert_double_eq(sample("kop_storage_migration_state{state=\"succeeded\"} "), 1);
    /* Then storedVersions, with the CRD's resourceVersion as precondition. */
    ck_assert_int_eq(fval(patches), 1);
    ck_assert(patch_has("\"resourceVersion\":\"100\""));
    ck_assert(patch_has("\"storedVersions\":[\"v2\"]"));
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_changed_crd_starts_over)
{
    LOCKED(F.patch_code = 409);
    struct kop_migrator *m = new_migrator(false);
    ck_assert_int_eq(kop_migrator_run_once(m, NULL), -EAGAIN);
    ck_assert_int_eq(fval(patches), 1);
    ck_assert_double_eq(sample("kop_storage_migration_state{state=\"succeeded\"} "), 0);
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_resumes_from_checkpoint)
{
    /* A whole run leaves its last key in the ConfigMap. */
    struct kop_migrator *m = new_migrator(true);
    ck_assert_int_eq(kop_migrator_run_once(m, NULL), 0);
    ck_assert(cm_has("\"lastKey\":\"ns2/e\""));
    kop_migrator_free(m);

    /* A new process (new leader) for the same CRD resourceVersion resumes
     * after the checkpoint's key: no request for a, b, c, d. */
    fake_reset();
    set_cm("{\"metadata\":{\"name\":\"kop-leader-storage-migration\",\"namespace\":"
           "\"kop-system\"},\"data\":{\"crdUID\":\"3f2c5a9e-aaaa-bbbb-cccc-000000000001\","
           "\"crdResourceVersion\":\"100\",\"storageVersion\":\"v2\",\"lastKey\":"
           "\"ns1/c\"}}");
    m = new_migrator(true);
    ck_assert_int_eq(kop_migrator_run_once(m, NULL), 0);
    ck_assert_int_eq(fget(puts, 0) + fget(puts, 1) + fget(puts, 2), 0);
    ck_assert_int_eq(fget(writes, 3), 1);
    ck_assert_int_eq(fget(puts, 4), 1);
    kop_migrator_free(m);

    /* A checkpoint of another CRD resourceVersion is ignored. */
    fake_reset();
    set_cm("{\"metadata\":{\"name\":\"x\"},\"data\":{\"crdUID\":"
           "\"3f2c5a9e-aaaa-bbbb-cccc-000000000001\",\"crdResourceVersion\":\"99\","
           "\"storageVersion\":\"v2\",\"lastKey\":\"ns2/e\"}}");
    m = new_migrator(true);
    ck_assert_int_eq(kop_migrator_run_once(m, NULL), 0);
    ck_assert_int_eq(fget(writes, 0), 1);
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_uses_the_api)
{
    LOCKED(F.svm_served = true);
    struct kop_migrator *m = new_migrator(false);
    bool api = false;
    ck_assert_int_eq(kop_migrator_run_once(m, &api), 0);
    ck_assert(api);
    ck_assert_int_eq(fval(svm_creates), 1);
    ck_assert_int_ge(fval(svm_gets), 2);
    for (int i = 0; i < NOBJ; i++)
        ck_assert_int_eq(fget(puts, i), 0);
    ck_assert_int_eq(fval(patches), 1);
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_follows_an_existing_migration)
{
    LOCKED(F.svm_served = true);
    LOCKED(F.svm_exists = true);
    struct kop_migrator *m = new_migrator(false);
    bool api = false;
    ck_assert_int_eq(kop_migrator_run_once(m, &api), 0);
    ck_assert(api);
    ck_assert_int_ge(fval(svm_gets), 2);
    ck_assert_int_eq(fget(puts, 0), 0);
    ck_assert_int_eq(fval(patches), 1);
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_failed_migration_falls_back)
{
    LOCKED(F.svm_served = true);
    LOCKED(F.svm_fails = true);
    struct kop_migrator *m = new_migrator(false);
    bool api = true;
    ck_assert_int_eq(kop_migrator_run_once(m, &api), 0);
    ck_assert(!api);
    ck_assert_int_eq(fget(writes, 0), 1);
    ck_assert_int_eq(fget(writes, 2), 1);
    ck_assert_int_eq(fval(patches), 1);
    kop_migrator_free(m);
}
END_TEST

START_TEST(test_migrator_not_leading)
{
    struct kop_migrator *m = new_migrator(false);
    kop_migrator_set_leading(m, false);
    ck_assert_int_eq(kop_migrator_run_once(m, NULL), -ECANCELED);
    for (int i = 0; i < NOBJ; i++)
        ck_assert_int_eq(fget(puts, i), 0);
    ck_assert_int_eq(fval(patches), 0);
    kop_migrator_free(m);
}
END_TEST

static bool patched(void)
{
    pthread_mutex_lock(&flock);
    bool done = F.patches > 0;
    pthread_mutex_unlock(&flock);
    return done;
}

/* The thread: idle until leading, one run, then idle again; leadership
 * moves from the elector's thread. */
START_TEST(test_migrator_thread_follows_leadership)
{
    const struct kop_migrator_options o = {
        .client = client,
        .metrics = metrics,
        .crd_name = "myresources.mygroup.example.com",
        .group = "mygroup.example.com",
        .resource = "myresources",
    };
    struct kop_migrator *m = NULL;
    ck_assert_int_eq(kop_migrator_new(&o, &m), 0);
    ck_assert_int_eq(kop_migrator_start(m), 0);
    ck_assert_int_eq(kop_migrator_start(m), -EALREADY);
    ck_assert(!patched()); /* not leading: no request */
    kop_migrator_set_leading(m, true);
    long end = kop_test_now_ms() + 30000;
    while (!patched() && kop_test_now_ms() < end)
        kop_test_sleep_ms(10);
    ck_assert(patched());
    kop_migrator_set_leading(m, false);
    kop_migrator_stop(m);
    kop_migrator_free(m);
    ck_assert_int_eq(fget(writes, 0), 1);
}
END_TEST

static Suite *migrator_suite(void)
{
    Suite *s = suite_create("migrator");
    TCase *t = tcase_create("helpers");
    tcase_add_test(t, test_migrator_plan);
    tcase_add_test(t, test_migrator_svm_helpers);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("run");
    tcase_add_checked_fixture(r, run_setup, run_teardown);
    tcase_add_test(r, test_migrator_walks_every_object);
    tcase_add_test(r, test_migrator_changed_crd_starts_over);
    tcase_add_test(r, test_migrator_resumes_from_checkpoint);
    tcase_add_test(r, test_migrator_uses_the_api);
    tcase_add_test(r, test_migrator_follows_an_existing_migration);
    tcase_add_test(r, test_migrator_failed_migration_falls_back);
    tcase_add_test(r, test_migrator_not_leading);
    tcase_add_test(r, test_migrator_thread_follows_leadership);
    suite_add_tcase(s, r);
    return s;
}

int main(void)
{
    return kop_test_run(migrator_suite());
}
