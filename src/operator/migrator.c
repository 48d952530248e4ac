/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The storage version migrator (include/kop/migrator.h).
 *
 * DESIGN
 *
 * One thread. It sleeps until this replica leads, then runs
 * kop_migrator_run_once(): 0 (nothing to do, or done) waits recheck_ms
 * before reading the CRD again; -EAGAIN (the CRD changed) runs again at
 * once; other errors back off (1 s doubling to 60 s). Losing the lease
 * aborts the client's requests (kop_client_abort) and the run ends with
 * -ECANCELED; the thread then waits to lead again.
 *
 * Why the no-op update is enough: the apiserver (etcd3 GuaranteedUpdate,
 * staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go) skips a write
 * whose encoded bytes equal what is stored; an object stored in an older
 * version encodes differently in the storage version, so the same PUT
 * rewrites it, and one already in the storage version costs nothing. The
 * walk lists after reading the CRD: an object written after the list is
 * already in the storage version, so a 409 needs no care beyond a retry on
 * a fresh read (which writes nothing), and a 404 means nothing is left to
 * migrate.
 *
 * Why the precondition on the final status patch: storedVersions may lose
 * the old versions only if no object can still be stored in them. The walk
 * proves it for the CRD as read before it; if the CRD changed since (the
 * storage version flipped back and forth), objects written meanwhile may
 * be in another version, so the patch carries the resourceVersion read
 * before the walk and a 409 starts the run over.
 *
 * Progress: (crd uid, crd resourceVersion, storage version, last key done)
 * in memory, and in the checkpoint ConfigMap when configured, written every
 * CHECKPOINT_EVERY objects and after each page. Lists are in key order (namespace/name), so a
 * resumed walk skips the keys up to the last one without a request for them.
 */
#include "kop/migrator.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/events.h"
#include "kop/json.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/thread.h"

#define LOGGER "migrator"
#define SVM_GROUP "storagemigration.k8s.io"
#define SVM_VERSION "v1beta1"
#define MAX_TRIES 8
/* Objects between two checkpoint writes (two requests each: about 2%). */
#define CHECKPOINT_EVERY 100

enum state { ST_IDLE, ST_RUNNING, ST_SUCCEEDED, ST_FAILED, ST_COUNT };
static const char *const state_names[ST_COUNT] = {"idle", "running", "succeeded", "failed"};

enum result { R_MIGRATED, R_UNCHANGED, R_SKIPPED, R_CONFLICT, R_FAILED, R_COUNT };
static const char *const result_names[R_COUNT] = {"migrated", "unchanged", "skipped", "conflict",
                                                  "failed"};

struct kop_migrator {
    struct kop_client *client;
    struct kop_events *events;
    char *crd_name, *group, *resource;
    char *cp_ns, *cp_name;
    long page_size;
    int64_t poll_ms, recheck_ms;

    struct kop_metric *results[R_COUNT];
    struct kop_metric *states[ST_COUNT];

    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool leading;           /* lock */
    bool stop;              /* lock */
    atomic_bool running_ok; /* leading and not stopping, read without the lock */
    pthread_t thread;
    bool started;

    /* Progress of the walk (owner thread). */
    struct kop_migrator_plan done_plan;
    char last_key[512];
};

/* ---- pure helpers ------------------------------------------------------------------------ */

static int copy_str(char *dst, size_t len, const char *s)
{
    if (!s || strlen(s) >= len)
        return -EINVAL;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

int kop_migrator_plan(const json_t *crd, struct kop_migrator_plan *ret)
{
    struct kop_migrator_plan p;
    memset(&p, 0, sizeof(p));
    const json_t *versions = kop_json_path(crd, "spec.versions");
    size_t i;
    const json_t *v;
    bool found = false;
    json_array_foreach(versions, i, v)
    {
        if (json_is_true(json_object_get(v, "storage"))) {
            if (copy_str(p.storage, sizeof(p.storage),
                         json_string_value(json_object_get(v, "name"))) < 0)
                return -EINVAL;
            found = true;
        }
    }
    if (!found)
        return -EINVAL;
    const json_t *stored = kop_json_path(crd, "status.storedVersions");
    json_array_foreach(stored, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || strcmp(s, p.storage) == 0)
            continue;
        size_t used = strlen(p.stale);
        int n = snprintf(p.stale + used, sizeof(p.stale) - used, "%s%s", used ? "," : "", s);
        if (n < 0 || (size_t)n >= sizeof(p.stale) - used)
            return -EINVAL;
    }
    const char *rv = kop_json_path_str(crd, "metadata.resourceVersion");
    const char *uid = kop_json_path_str(crd, "metadata.uid");
    if (copy_str(p.rv, sizeof(p.rv), rv ? rv : "") < 0 ||
        copy_str(p.uid, sizeof(p.uid), uid ? uid : "") < 0)
        return -EINVAL;
    const json_t *gen = kop_json_path(crd, "metadata.generation");
    p.generation = json_is_integer(gen) ? (long long)json_integer_value(gen) : 0;
    *ret = p;
    return 0;
}

void kop_migrator_svm_name(const char *resource, const struct kop_migrator_plan *p, char *buf,
                           size_t len)
{
    /* One per (CRD incarnation, spec generation, target): a new leader
     * finds its predecessor's, a new storage flip gets a new one. */
    char uid8[9];
    size_t n = 0;
    for (const char *s = p->uid; *s && n < 8; s++)
        if ((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9'))
            uid8[n++] = *s;
    uid8[n] = '\0';
    snprintf(buf, len, "kop-%s-to-%s-g%lld%s%s", resource, p->storage, p->generation, n ? "-" : "",
             uid8);
}

json_t *kop_migrator_svm_object(const char *name, const char *group, const char *resource)
{
    return json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:{s:s, s:s}}}", "apiVersion",
                     SVM_GROUP "/" SVM_VERSION, "kind", "StorageVersionMigration", "metadata",
                     "name", name, "labels", "app.kubernetes.io/managed-by", "kop", "spec",
                     "resource", "group", group, "resource", resource);
}

enum kop_migrator_svm_state kop_migrator_svm_state(const json_t *svm)
{
    size_t i;
    const json_t *c;
    enum kop_migrator_svm_state st = KOP_MIGRATOR_SVM_PENDING;
    json_array_foreach(kop_json_path(svm, "status.conditions"), i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));
        const char *status = json_string_value(json_object_get(c, "status"));
        if (!type || !status || strcmp(status, "True") != 0)
            continue;
        if (strcmp(type, "Failed") == 0)
            return KOP_MIGRATOR_SVM_FAILED;
        if (strcmp(type, "Succeeded") == 0)
            st = KOP_MIGRATOR_SVM_SUCCEEDED;
    }
    return st;
}

json_t *kop_migrator_status_patch(const struct kop_migrator_plan *p)
{
    /* A merge patch with metadata.resourceVersion is a precondition: the
     * apiserver answers 409 when the CRD is no longer at that version. */
    return json_pack("{s:{s:s}, s:{s:[s]}}", "metadata", "resourceVersion", p->rv, "status",
                     "storedVersions", p->storage);
}

/* ---- the object ---------------------------------------------------------------------------- */

static void set_state(struct kop_migrator *m, enum state s)
{
    for (int i = 0; i < ST_COUNT; i++)
        kop_gauge_set(m->states[i], i == (int)s ? 1 : 0);
}

/* The strings kop_migrator_new copied from its options. */
static void free_names(struct kop_migrator *m)
{
    free(m->crd_name);
    free(m->group);
    free(m->resource);
    free(m->cp_ns);
    free(m->cp_name);
}

int kop_migrator_new(const struct kop_migrator_options *opt, struct kop_migrator **ret)
{
    assert(opt);
    assert(opt->client);
    assert(opt->crd_name);
    assert(opt->group);
    assert(opt->resource);
    assert(ret);
    struct kop_migrator *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->client = opt->client;
    m->events = opt->events;
    m->crd_name = strdup(opt->crd_name);
    m->group = strdup(opt->group);
    m->resource = strdup(opt->resource);
    if (opt->checkpoint_namespace && opt->checkpoint_name) {
        m->cp_ns = strdup(opt->checkpoint_namespace);
        m->cp_name = strdup(opt->checkpoint_name);
        if (!m->cp_ns || !m->cp_name)
            goto nomem;
    }
    if (!m->crd_name || !m->group || !m->resource)
        goto nomem;
    m->page_size = opt->page_size > 0 ? opt->page_size : 500;
    m->poll_ms = opt->poll_ms > 0 ? opt->poll_ms : 2000;
    m->recheck_ms = opt->recheck_ms > 0 ? opt->recheck_ms : 60000;
    m->leading = opt->leading;
    atomic_init(&m->running_ok, opt->leading);
    if (kop_clock_cond_init(&m->cond) != 0)
        goto nomem;
    pthread_mutex_init(&m->lock, NULL);

    struct kop_metrics *reg = opt->metrics ? opt->metrics : kop_metrics_global();
    static const char *const rl[] = {"result", NULL};
    static const char *const sl[] = {"state", NULL};
    struct kop_metric_family *fr = kop_metrics_register(
        reg, KOP_METRIC_COUNTER, "kop_storage_migration_objects_total",
        "Objects the storage version migration handled, by result: migrated (rewritten in the "
        "storage version), unchanged (already there), skipped (deleted meanwhile), conflict (409, "
        "retried), failed.",
        rl, NULL, 0);
    struct kop_metric_family *fs = kop_metrics_register(
        reg, KOP_METRIC_GAUGE, "kop_storage_migration_state",
        "1 for the storage version migration's current state (idle, running, succeeded, failed).",
        sl, NULL, 0);
    for (int i = 0; i < R_COUNT; i++)
        m->results[i] = kop_metric_child(fr, result_names[i]);
    for (int i = 0; i < ST_COUNT; i++)
        m->states[i] = kop_metric_child(fs, state_names[i]);
    set_state(m, ST_IDLE);
    *ret = m;
    return 0;
nomem:
    free_names(m);
    free(m);
    return -ENOMEM;
}

static bool may_run(struct kop_migrator *m)
{
    return atomic_load(&m->running_ok);
}

/* Sleep up to ms; false when stopped or no longer leading. */
static bool pause_ms(struct kop_migrator *m, int64_t ms)
{
    pthread_mutex_lock(&m->lock);
    struct timespec deadline = kop_clock_deadline_ms(ms);
    int e = 0;
    while (!m->stop && m->leading && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&m->cond, &m->lock, &deadline);
    bool ok = !m->stop && m->leading;
    pthread_mutex_unlock(&m->lock);
    return ok;
}

static void crd_event(struct kop_migrator *m, const struct kop_migrator_plan *p,
                      enum kop_event_type type, const char *reason, const char *msg)
{
    const struct kop_event_ref ref = {
        .api_version = "apiextensions.k8s.io/v1",
        .kind = "CustomResourceDefinition",
        .namespace = NULL,
        .name = m->crd_name,
        .uid = p->uid[0] ? p->uid : NULL,
        .resource_version = p->rv[0] ? p->rv : NULL,
    };
    kop_events_record(m->events, &ref, type, reason, msg);
}

static bool retryable(int e)
{
    return e == -EIO || e == -EAGAIN || e == -ETIMEDOUT || e == -ECONNREFUSED || e == -ECONNRESET ||
           e == -EHOSTUNREACH || e == -EBADMSG;
}

/* Backoff before try n (1-based): 100 ms doubling, at most 3.2 s. */
static bool backoff(struct kop_migrator *m, int n)
{
    int64_t ms = 100LL << (n < 6 ? n - 1 : 5);
    return pause_ms(m, ms);
}

static const struct kop_resource crd_res = {"apiextensions.k8s.io", "v1",
                                            "customresourcedefinitions", false};
static const struct kop_resource cm_res = {"", "v1", "configmaps", true};

static int get_crd(struct kop_migrator *m, json_t **ret)
{
    struct kop_api_status st;
    int e = -EIO;
    for (int n = 1; n <= MAX_TRIES && may_run(m); n++) {
        memset(&st, 0, sizeof(st));
        e = kop_client_get(m->client, &crd_res, NULL, m->crd_name, &st, ret);
        if (e == 0 || !retryable(e))
            break;
        if (!backoff(m, n))
            return -ECANCELED;
    }
    if (!may_run(m))
        return -ECANCELED;
    if (e < 0 && e != -ENOENT)
        kop_log(KOP_LOG_WARN, LOGGER, "cannot read the CRD",
                json_pack("{s:s, s:i, s:s}", "crd", m->crd_name, "code", st.code, "message",
                          st.message));
    return e;
}

/* ---- checkpoint ---------------------------------------------------------------------------- */

static bool same_target(const struct kop_migrator_plan *a, const struct kop_migrator_plan *b)
{
    return strcmp(a->uid, b->uid) == 0 && strcmp(a->rv, b->rv) == 0 &&
           strcmp(a->storage, b->storage) == 0;
}

/* Resume point for plan p: the in-memory one, else the ConfigMap's. */
static void load_progress(struct kop_migrator *m, const struct kop_migrator_plan *p)
{
    if (same_target(&m->done_plan, p) && m->last_key[0])
        return;
    m->done_plan = *p;
    m->last_key[0] = '\0';
    if (!m->cp_ns)
        return;
    json_t *cm = NULL;
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    if (kop_client_get(m->client, &cm_res, m->cp_ns, m->cp_name, &st, &cm) != 0)
        return;
    const char *uid = kop_json_path_str(cm, "data.crdUID");
    const char *rv = kop_json_path_str(cm, "data.crdResourceVersion");
    const char *sv = kop_json_path_str(cm, "data.storageVersion");
    const char *last = kop_json_path_str(cm, "data.lastKey");
    if (uid && rv && sv && last && strcmp(uid, p->uid) == 0 && strcmp(rv, p->rv) == 0 &&
        strcmp(sv, p->storage) == 0 && strlen(last) < sizeof(m->last_key)) {
        memcpy(m->last_key, last, strlen(last) + 1);
        kop_log(KOP_LOG_INFO, LOGGER, "resuming the storage migration from the checkpoint",
                json_pack("{s:s, s:s}", "crd", m->crd_name, "after", last));
    }
    json_decref(cm);
}

/* Best effort: a lost checkpoint costs requests, never correctness. */
static void save_progress(struct kop_migrator *m)
{
    if (!m->cp_ns)
        return;
    const struct kop_migrator_plan *p = &m->done_plan;
    json_t *cm = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:s, s:s, s:s, s:s}}",
                           "apiVersion", "v1", "kind", "ConfigMap", "metadata", "name", m->cp_name,
                           "namespace", m->cp_ns, "labels", "app.kubernetes.io/managed-by", "kop",
                           "data", "crdUID", p->uid, "crdResourceVersion", p->rv, "storageVersion",
                           p->storage, "lastKey", m->last_key);
    if (!cm)
        return;
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    json_t *cur = NULL;
    int e = kop_client_get(m->client, &cm_res, m->cp_ns, m->cp_name, &st, &cur);
    if (e == -ENOENT) {
        e = kop_client_create(m->client, &cm_res, m->cp_ns, cm, &st, NULL);
    } else if (e == 0) {
        /* Update with the resourceVersion read: two writers never mix. */
        const char *rv = kop_json_path_str(cur, "metadata.resourceVersion");
        json_object_set_new(json_object_get(cm, "metadata"), "resourceVersion",
                            json_string(rv ? rv : ""));
        e = kop_client_update(m->client, &cm_res, m->cp_ns, m->cp_name, cm, &st, NULL);
    }
    if (e < 0)
        kop_log(KOP_LOG_DEBUG, LOGGER, "checkpoint not saved",
                json_pack("{s:i, s:s}", "code", st.code, "message", st.message));
    json_decref(cur);
    json_decref(cm);
}

/* ---- the walk ------------------------------------------------------------------------------ */

struct walk {
    unsigned long counts[R_COUNT];
    int error; /* what ended the walk early */
};

static void count(struct kop_migrator *m, struct walk *w, enum result r)
{
    w->counts[r]++;
    kop_counter_inc(m->results[r]);
}

/* One object: a no-op update with its uid and resourceVersion. */
static void migrate_one(struct kop_migrator *m, const struct kop_resource *res, json_t *item,
                        struct walk *w)
{
    const char *ns = kop_json_path_str(item, "metadata.namespace");
    const char *name = kop_json_path_str(item, "metadata.name");
    json_t *obj = json_incref(item);
    struct kop_api_status st;
    int tries = 0;
    int conflicts = 0;
    if (!name) {
        json_decref(obj);
        return;
    }
    for (;;) {
        if (!may_run(m)) {
            w->error = -ECANCELED;
            break;
        }
        const char *before = kop_json_path_str(obj, "metadata.resourceVersion");
        char sent_rv[32];
        snprintf(sent_rv, sizeof(sent_rv), "%s", before ? before : "");
        json_t *out = NULL;
        memset(&st, 0, sizeof(st));
        int e = kop_client_update(m->client, res, ns, name, obj, &st, &out);
        if (e == 0) {
            const char *after = kop_json_path_str(out, "metadata.resourceVersion");
            count(m, w, after && strcmp(after, sent_rv) != 0 ? R_MIGRATED : R_UNCHANGED);
            json_decref(out);
            break;
        }
        if (e == -ENOENT) {
            count(m, w, R_SKIPPED);
            break;
        }
        if (e == -EBUSY && ++conflicts <= MAX_TRIES) {
            /* Written (or recreated) since the list: read it again and
             * repeat the no-op, which then writes nothing. */
            count(m, w, R_CONFLICT);
            json_t *fresh = NULL;
            memset(&st, 0, sizeof(st));
            int g = kop_client_get(m->client, res, ns, name, &st, &fresh);
            if (g == -ENOENT) {
                count(m, w, R_SKIPPED);
                break;
            }
            if (g == 0) {
                json_decref(obj);
                obj = fresh;
            } else if (!backoff(m, conflicts)) {
                w->error = -ECANCELED;
                break;
            }
            continue;
        }
        if ((retryable(e) || e == -EBUSY) && ++tries < MAX_TRIES) {
            if (!backoff(m, tries)) {
                w->error = -ECANCELED;
                break;
            }
            continue;
        }
        if (e == -ECANCELED) {
            w->error = e;
            break;
        }
        count(m, w, R_FAILED);
        kop_log(KOP_LOG_WARN, LOGGER, "cannot rewrite an object in the storage version",
                json_pack("{s:s, s:s, s:i, s:i, s:s}", "namespace", ns ? ns : "", "name", name,
                          "errno", -e, "code", st.code, "message", st.message));
        if (e == -EPERM || e == -EACCES || retryable(e))
            w->error = e; /* the rest would fail the same way */
        break;
    }
    json_decref(obj);
}

static int walk_objects(struct kop_migrator *m, const struct kop_migrator_plan *p, struct walk *w)
{
    const struct kop_resource res = {m->group, p->storage, m->resource, true};
    char cont[4096] = "";
    int since_save = 0;
    load_progress(m, p);
    if (m->last_key[0])
        kop_log(KOP_LOG_INFO, LOGGER, "resuming the walk",
                json_pack("{s:s, s:s}", "crd", m->crd_name, "after", m->last_key));
    for (;;) {
        struct kop_list_options lo = {.limit = m->page_size, .continue_token = cont};
        struct kop_api_status st;
        json_t *list = NULL;
        int e = -EIO;
        for (int n = 1; n <= MAX_TRIES; n++) {
            if (!may_run(m))
                return -ECANCELED;
            memset(&st, 0, sizeof(st));
            e = kop_client_list(m->client, &res, NULL, &lo, &st, &list);
            if (e == -ESTALE) {
                /* The continue token expired: list again from the start;
                 * the keys up to last_key are skipped without requests. */
                cont[0] = '\0';
                lo.continue_token = cont;
                continue;
            }
            if (e == 0 || !retryable(e))
                break;
            if (!backoff(m, n))
                return -ECANCELED;
        }
        if (e < 0) {
            kop_log(
                KOP_LOG_WARN, LOGGER, "cannot list the objects to migrate",
                json_pack("{s:i, s:i, s:s}", "errno", -e, "code", st.code, "message", st.message));
            return e;
        }
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(list, "items"), i, item)
        {
            const char *ns = kop_json_path_str(item, "metadata.namespace");
            const char *name = kop_json_path_str(item, "metadata.name");
            char key[512];
            snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", name ? name : "");
            if (m->last_key[0] && strcmp(key, m->last_key) <= 0)
                continue;
            migrate_one(m, &res, item, w);
            if (w->error) {
                json_decref(list);
                save_progress(m);
                return w->error;
            }
            memcpy(m->last_key, key, strlen(key) + 1);
            if (++since_save >= CHECKPOINT_EVERY) {
                save_progress(m);
                since_save = 0;
            }
        }
        const char *next = kop_json_path_str(list, "metadata.continue");
        int ok = next && next[0] && strlen(next) < sizeof(cont);
        if (ok)
            memcpy(cont, next, strlen(next) + 1);
        json_decref(list);
        save_progress(m);
        since_save = 0;
        kop_log(KOP_LOG_INFO, LOGGER, "storage migration progress",
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:s}", "crd", m->crd_name, "migrated",
                          (json_int_t)w->counts[R_MIGRATED], "unchanged",
                          (json_int_t)w->counts[R_UNCHANGED], "skipped",
                          (json_int_t)w->counts[R_SKIPPED], "failed",
                          (json_int_t)w->counts[R_FAILED], "lastKey", m->last_key));
        if (!ok)
            break;
    }
    return w->counts[R_FAILED] ? -EIO : 0;
}

/* ---- the StorageVersionMigration API ------------------------------------------------------- */

/* 1 when the API is served, 0 when not, or a negative errno. */
static int svm_served(struct kop_migrator *m)
{
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    const struct kop_request req = {.method = "GET", .path = "/apis/" SVM_GROUP "/" SVM_VERSION};
    json_t *doc = NULL;
    int e = kop_client_request(m->client, &req, &st, &doc);
    if (e == -ENOENT)
        return 0;
    if (e < 0)
        return e;
    int served = 0;
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(doc, "resources"), i, r)
    {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (name && strcmp(name, "storageversionmigrations") == 0)
            served = 1;
    }
    json_decref(doc);
    return served;
}

/* 0 Succeeded, -EIO Failed, or another error. */
static int run_svm(struct kop_migrator *m, const struct kop_migrator_plan *p)
{
    static const struct kop_resource svm_res = {SVM_GROUP, SVM_VERSION, "storageversionmigrations",
                                                false};
    char name[253];
    kop_migrator_svm_name(m->resource, p, name, sizeof(name));
    json_t *obj = kop_migrator_svm_object(name, m->group, m->resource);
    if (!obj)
        return -ENOMEM;
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int e = kop_client_create(m->client, &svm_res, NULL, obj, &st, NULL);
    json_decref(obj);
    if (e == 0)
        kop_log(KOP_LOG_INFO, LOGGER, "created a StorageVersionMigration",
                json_pack("{s:s, s:s}", "crd", m->crd_name, "name", name));
    else if (e == -EEXIST)
        kop_log(KOP_LOG_INFO, LOGGER, "following the existing StorageVersionMigration",
                json_pack("{s:s, s:s}", "crd", m->crd_name, "name", name));
    else
        return e;
    int fails = 0;
    for (;;) {
        json_t *svm = NULL;
        memset(&st, 0, sizeof(st));
        e = kop_client_get(m->client, &svm_res, NULL, name, &st, &svm);
        if (e == 0) {
            fails = 0;
            enum kop_migrator_svm_state s = kop_migrator_svm_state(svm);
            json_decref(svm);
            if (s == KOP_MIGRATOR_SVM_SUCCEEDED)
                return 0;
            if (s == KOP_MIGRATOR_SVM_FAILED)
                return -EIO;
        } else if (!retryable(e) || ++fails > MAX_TRIES) {
            return e;
        }
        if (!pause_ms(m, m->poll_ms))
            return -ECANCELED;
    }
}

/* ---- a run ----------------------------------------------------------------------------------- */

static int prune(struct kop_migrator *m, const struct kop_migrator_plan *p)
{
    json_t *patch = kop_migrator_status_patch(p);
    if (!patch)
        return -ENOMEM;
    struct kop_api_status st;
    int e = -EIO;
    for (int n = 1; n <= MAX_TRIES && may_run(m); n++) {
        memset(&st, 0, sizeof(st));
        e = kop_client_patch_status(m->client, &crd_res, NULL, m->crd_name, patch, &st, NULL);
        if (e == 0 || !retryable(e))
            break;
        if (!backoff(m, n)) {
            e = -ECANCELED;
            break;
        }
    }
    json_decref(patch);
    if (e == -EBUSY)
        return -EAGAIN; /* the CRD changed: start over */
    if (e < 0)
        kop_log(KOP_LOG_WARN, LOGGER, "cannot update status.storedVersions",
                json_pack("{s:s, s:i, s:i, s:s}", "crd", m->crd_name, "errno", -e, "code", st.code,
                          "message", st.message));
    return e;
}

int kop_migrator_run_once(struct kop_migrator *m, bool *ret_used_api)
{
    json_t *crd = NULL;
    struct kop_migrator_plan p;
    bool used_api = false;
    int e = get_crd(m, &crd);
    if (e < 0)
        return e;
    e = kop_migrator_plan(crd, &p);
    json_decref(crd);
    if (e < 0) {
        kop_log(KOP_LOG_WARN, LOGGER, "the CRD names no storage version",
                json_pack("{s:s}", "crd", m->crd_name));
        return e;
    }
    if (!p.stale[0]) {
        set_state(m, kop_metric_value(m->states[ST_SUCCEEDED]) > 0 ? ST_SUCCEEDED : ST_IDLE);
        return 0;
    }
    set_state(m, ST_RUNNING);
    kop_log(KOP_LOG_INFO, LOGGER, "storage migration started",
            json_pack("{s:s, s:s, s:s, s:s}", "crd", m->crd_name, "storageVersion", p.storage,
                      "storedVersions", p.stale, "crdResourceVersion", p.rv));
    char msg[512];
    snprintf(msg, sizeof(msg), "Moving every %s object stored as %s to %s", m->resource, p.stale,
             p.storage);
    crd_event(m, &p, KOP_EVENT_NORMAL, "StorageMigrationStarted", msg);

    struct walk w;
    memset(&w, 0, sizeof(w));
    int served = svm_served(m);
    if (served == 1) {
        used_api = true;
        e = run_svm(m, &p);
        if (e == -EIO) {
            kop_log(KOP_LOG_WARN, LOGGER,
                    "the StorageVersionMigration failed; rewriting the objects here",
                    json_pack("{s:s}", "crd", m->crd_name));
            crd_event(m, &p, KOP_EVENT_WARNING, "StorageMigrationAPIFailed",
                      "The StorageVersionMigration failed; kop rewrites the objects itself");
            used_api = false;
            e = walk_objects(m, &p, &w);
        }
    } else if (served == 0) {
        e = walk_objects(m, &p, &w);
    } else {
        e = served;
    }
    if (ret_used_api)
        *ret_used_api = used_api;
    if (e == 0)
        e = prune(m, &p);
    if (e == -EAGAIN) {
        kop_log(KOP_LOG_INFO, LOGGER, "the CRD changed during the migration; starting over",
                json_pack("{s:s}", "crd", m->crd_name));
        return e;
    }
    if (e == -ECANCELED) {
        kop_log(KOP_LOG_INFO, LOGGER, "storage migration paused (not leading)",
                json_pack("{s:s, s:s}", "crd", m->crd_name, "lastKey", m->last_key));
        return e;
    }
    if (e < 0) {
        set_state(m, ST_FAILED);
        char err[96];
        snprintf(msg, sizeof(msg), "Storage migration to %s failed: %s (%lu objects left behind)",
                 p.storage, strerror_r(-e, err, sizeof(err)), w.counts[R_FAILED]);
        kop_log(KOP_LOG_ERROR, LOGGER, "storage migration failed",
                json_pack("{s:s, s:i, s:I}", "crd", m->crd_name, "errno", -e, "failed",
                          (json_int_t)w.counts[R_FAILED]));
        crd_event(m, &p, KOP_EVENT_WARNING, "StorageMigrationFailed", msg);
        return e;
    }
    set_state(m, ST_SUCCEEDED);
    if (used_api)
        snprintf(msg, sizeof(msg),
                 "StorageVersionMigration succeeded; status.storedVersions is now [%s]", p.storage);
    else
        snprintf(msg, sizeof(msg),
                 "Rewrote %lu objects in %s (%lu already there, %lu deleted meanwhile); "
                 "status.storedVersions is now [%s]",
                 w.counts[R_MIGRATED], p.storage, w.counts[R_UNCHANGED], w.counts[R_SKIPPED],
                 p.storage);
    kop_log(KOP_LOG_INFO, LOGGER, "storage migration succeeded",
            json_pack("{s:s, s:s, s:b, s:I, s:I, s:I, s:I}", "crd", m->crd_name, "storageVersion",
                      p.storage, "usedAPI", used_api, "migrated", (json_int_t)w.counts[R_MIGRATED],
                      "unchanged", (json_int_t)w.counts[R_UNCHANGED], "skipped",
                      (json_int_t)w.counts[R_SKIPPED], "conflicts",
                      (json_int_t)w.counts[R_CONFLICT]));
    crd_event(m, &p, KOP_EVENT_NORMAL, "StorageMigrationSucceeded", msg);
    m->last_key[0] = '\0';
    return 0;
}

/* ---- the thread ---------------------------------------------------------------------------- */

static void *migrator_main(void *arg)
{
    struct kop_migrator *m = arg;
    int64_t fail_ms = 1000;
    for (;;) {
        pthread_mutex_lock(&m->lock);
        while (!m->stop && !m->leading)
            pthread_cond_wait(&m->cond, &m->lock);
        bool stop = m->stop;
        pthread_mutex_unlock(&m->lock);
        if (stop)
            break;
        int e = kop_migrator_run_once(m, NULL);
        int64_t wait = m->recheck_ms;
        if (e == -EAGAIN) {
            wait = 0;
        } else if (e < 0 && e != -ECANCELED) {
            wait = fail_ms;
            fail_ms = fail_ms * 2 > 60000 ? 60000 : fail_ms * 2;
        } else if (e == 0) {
            fail_ms = 1000;
        }
        if (wait > 0)
            (void)pause_ms(m, wait);
    }
    return NULL;
}

int kop_migrator_start(struct kop_migrator *m)
{
    if (m->started)
        return -EALREADY;
    int r = kop_thread_start(&m->thread, migrator_main, m, "migrator");
    if (r < 0)
        return r;
    m->started = true;
    return 0;
}

void kop_migrator_set_leading(struct kop_migrator *m, bool leading)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->leading = leading;
    atomic_store(&m->running_ok, leading && !m->stop);
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (leading)
        kop_client_abort_reset(m->client);
    else
        kop_client_abort(m->client); /* no write of ours lands after this */
}

void kop_migrator_stop(struct kop_migrator *m)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    atomic_store(&m->running_ok, false);
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->started) {
        kop_client_abort(m->client);
        pthread_join(m->thread, NULL);
        m->started = false;
    }
}

void kop_migrator_free(struct kop_migrator *m)
{
    if (!m)
        return;
    kop_migrator_stop(m);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->cond);
    free_names(m);
    free(m);
}
