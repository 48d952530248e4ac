/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MyResource controller: wiring of informers, queue, workers and the
 * resync timer, and the reconcile function (see kop/controller.h).
 *
 * Threads: five informer threads (the three of the reconciler only add
 * keys to the queue from their handlers; the two metadata-only ones for
 * admission rule 4 have no handlers), the queue's timer thread, the
 * workers (reconcile), and the resync thread. The controller's own state after start is read-only
 * except the resync thread's stop flag (under resync_lock). Lock order:
 * resync_lock is never held while calling into another module.
 */
#include "kop/controller.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/conversion.h"
#include "kop/events.h"
#include "kop/informer.h"
#include "kop/json.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/myresource.h"
#include "kop/reconciler.h"
#include "kop/store.h"
#include "kop/thread.h"
#include "kop/trace.h"
#include "kop/workers.h"
#include "kop/workqueue.h"

#define LOGGER "controller"
#define KIND_MYR "MyResource"
#define KIND_DEPLOYMENT "Deployment"
#define KIND_SERVICE "Service"
#define KIND_DEPLOYMENT_META "Deployment.meta"
#define KIND_SERVICE_META "Service.meta"
#define DEFAULT_SYNC_PERIOD_MS (10LL * 3600 * 1000)

static const struct kop_resource res_deploy = {"apps", "v1", "deployments", true};
static const struct kop_resource res_svc = {"", "v1", "services", true};

/*
 * One cluster: the local one (clusters[0], keys "ns/name") or a member
 * (keys "NAME/ns/name"). Its own clients (and so its own token bucket),
 * store, event recorder and informers; everything a reconcile of one of
 * its keys reads or writes is here. State: the prober thread's last
 * verdict (ready: the informers synced and the API server answered the
 * last probe), under lock.
 */
struct cluster {
    struct kop_controller *c;
    char *name;
    bool local;
    struct kop_client *client;  /* informers */
    struct kop_client *rclient; /* reconciles (abortable on lease loss) */
    struct kop_client *probe;   /* the reachability probe; NULL: none */
    struct kop_store *store;
    struct kop_events *events;
    struct kop_informer *inf_myr, *inf_deploy, *inf_svc;
    /* Rule 4: metadata of the Deployments and Services not managed by kop
     * (kop's own are in inf_deploy / inf_svc, never held twice). */
    struct kop_informer *inf_deploy_meta, *inf_svc_meta;

    /* References: the controller's list holds one while cl is in it; a
     * reconcile of one of its keys, a webhook review on its path and the
     * cluster_ready check hold one while they run. Under lock; removal
     * waits (cond) for the last one. */
    int refs;
    pthread_t prober;
    bool prober_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    int state;      /* -1 not seen yet, 0 not ready, 1 ready */
    bool was_ready; /* ready once: a later "ready" is a comeback */
    struct kop_metric *m_ready;
    /* controller_runtime_reconcile_total{controller, cluster, result} by
     * kop_workers_results, _errors_total and _time_seconds: this cluster's */
    struct kop_metric *m_result[4], *m_errors, *m_time;
};

struct kop_controller {
    /* MyResources in the CRD's storage version (v1 or v2), so the
     * apiserver never calls the conversion webhook for kop's list/watch. */
    struct kop_resource res_myr;
    enum kop_myresource_version myr_version;
    int64_t drain_ms;
    char *namespace; /* NULL: all */
    int64_t sync_period_ms;
    int max_concurrent;
    bool leading;
    /* Sharding (kop_controller_options): NULL when off. */
    char *shard_key, *shard_value, *child_selector, *shard_selector;
    int64_t (*gate)(void *, struct kop_client *, const char *, const json_t *);
    void *gate_ud;
    struct kop_metrics *metrics;

    /* [0] the local cluster (also in local: it is never removed). The
     * array and its count change under clusters_lock (write) once started;
     * lookups take it to read. */
    pthread_rwlock_t clusters_lock;
    struct cluster **clusters;
    size_t n_clusters;
    struct cluster *local;

    struct kop_workqueue *queue;
    struct kop_workers *workers; /* created by start: a share per cluster */

    pthread_t resync;
    bool resync_started;
    pthread_mutex_t resync_lock;
    pthread_cond_t resync_cond;
    bool resync_stop;
    bool started, stopped;
};

/* ---- keys ------------------------------------------------------------------------- */

/* A member's keys are "NAME/ns/name", the local cluster's "ns/name"
 * (names and namespaces hold no '/'): the queue groups keys by the part
 * before the first '/' when there are two. */
static size_t key_group(const char *key)
{
    const char *a = strchr(key, '/');
    return a && strchr(a + 1, '/') ? (size_t)(a - key) : 0;
}

static void cluster_ref(struct cluster *cl)
{
    pthread_mutex_lock(&cl->lock);
    cl->refs++;
    pthread_mutex_unlock(&cl->lock);
}

static void cluster_unref(struct cluster *cl)
{
    if (!cl)
        return;
    pthread_mutex_lock(&cl->lock);
    assert(cl->refs > 0);
    if (--cl->refs == 0)
        pthread_cond_broadcast(&cl->cond);
    pthread_mutex_unlock(&cl->lock);
}

/* The member named by the n bytes at name in the list. clusters_lock held. */
static struct cluster *find_member(struct kop_controller *c, const char *name, size_t n)
{
    for (size_t i = 1; i < c->n_clusters; i++)
        if (strlen(c->clusters[i]->name) == n && strncmp(c->clusters[i]->name, name, n) == 0)
            return c->clusters[i];
    return NULL;
}

/* The cluster of key, with a reference (cluster_unref), and in *ret_rest
 * its "ns/name"; NULL for a member the controller does not have (any
 * more). */
static struct cluster *key_cluster(struct kop_controller *c, const char *key, const char **ret_rest)
{
    size_t n = key_group(key);
    *ret_rest = key;
    if (n == 0) {
        cluster_ref(c->local);
        return c->local;
    }
    *ret_rest = key + n + 1;
    pthread_rwlock_rdlock(&c->clusters_lock);
    struct cluster *cl = find_member(c, key, n);
    if (cl)
        cluster_ref(cl);
    pthread_rwlock_unlock(&c->clusters_lock);
    return cl;
}

/* The cluster called name (the local one's name included), referenced;
 * NULL when there is none. */
static struct cluster *name_cluster(struct kop_controller *c, const char *name)
{
    const char *rest;
    char key[128];
    if (strchr(name, '/') || kop_controller_key(name, "x", "y", key, sizeof(key)) < 0)
        return NULL;
    return key_cluster(c, key, &rest);
}

int kop_controller_key(const char *cluster, const char *ns, const char *name, char *buf, size_t len)
{
    int n = cluster && strcmp(cluster, KOP_CONTROLLER_LOCAL_CLUSTER) != 0
                ? snprintf(buf, len, "%s/%s/%s", cluster, ns, name)
                : snprintf(buf, len, "%s/%s", ns, name);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

/* ---- event handlers -------------------------------------------------------------- */

static void enqueue(struct cluster *cl, const char *ns, const char *name)
{
    char key[512];
    if (!ns || !name || kop_controller_key(cl->name, ns, name, key, sizeof(key)) < 0)
        return;
    kop_workqueue_add(cl->c->queue, key);
}

static void enqueue_self(struct cluster *cl, const json_t *obj)
{
    enqueue(cl, kop_json_path_str(obj, "metadata.namespace"),
            kop_json_path_str(obj, "metadata.name"));
}

static void enqueue_owner(struct cluster *cl, const json_t *child)
{
    enqueue(cl, kop_json_path_str(child, "metadata.namespace"), kop_reconciler_owner_name(child));
}

static void on_myr_add(void *ud, json_t *obj)
{
    enqueue_self(ud, obj);
}

static void on_myr_update(void *ud, json_t *old_obj, json_t *new_obj)
{
    (void)old_obj;
    enqueue_self(ud, new_obj);
}

static void on_child_add(void *ud, json_t *obj)
{
    enqueue_owner(ud, obj);
}

static void on_child_update(void *ud, json_t *old_obj, json_t *new_obj)
{
    const char *a = kop_reconciler_owner_name(old_obj);
    const char *b = kop_reconciler_owner_name(new_obj);
    if (a && (!b || strcmp(a, b) != 0))
        enqueue_owner(ud, old_obj);
    enqueue_owner(ud, new_obj);
}

/* ---- one reconcile ------------------------------------------------------------------ */

struct rec {
    struct kop_controller *c;
    struct cluster *cl; /* the MyResource's cluster: every read and write goes there */
    const char *ns;
    const char *name;
    const char *uid;
    const char *reconcile_id;
    struct kop_event_ref ref;
    struct kop_reconcile_result result;
    const char *error_reason; /* static string, Degraded */
    char error_message[768];
    json_t *deployment;      /* live Deployment, @ref new, may be NULL */
    bool had_status;         /* the MyResource was reconciled before */
    int owner_state;         /* 0 unknown, 1 exists on the server, -1 gone */
    const char *shard_value; /* the MyResource's shard label (sharding), or NULL */
};

/* The local cluster's lines are as they were before there were members;
 * a member's carry "cluster". */
static json_t *log_fields(const struct rec *r)
{
    json_t *f =
        json_pack("{s:s, s:{s:s, s:s}, s:s}", "controller", KOP_CONTROLLER_NAME, "MyResource",
                  "name", r->name, "namespace", r->ns, "reconcileID", r->reconcile_id);
    if (f && !r->cl->local)
        json_object_set_new(f, "cluster", json_string(r->cl->name));
    return f;
}

static void log_rec(const struct rec *r, enum kop_log_level level, const char *msg, json_t *extra)
{
    if (!kop_log_enabled(level)) {
        json_decref(extra);
        return;
    }
    json_t *f = log_fields(r);
    if (f && extra)
        json_object_update(f, extra);
    json_decref(extra);
    kop_log(level, LOGGER, msg, f);
}

static void merge_result(struct rec *r, struct kop_reconcile_result add)
{
    if (add.error < 0 && r->result.error == 0)
        r->result.error = add.error;
    if (add.requeue)
        r->result.requeue = true;
    if (add.requeue_after_ns > 0 &&
        (r->result.requeue_after_ns == 0 || add.requeue_after_ns < r->result.requeue_after_ns))
        r->result.requeue_after_ns = add.requeue_after_ns;
}

static void set_degraded(struct rec *r, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_degraded(struct rec *r, const char *reason, const char *fmt, ...)
{
    if (r->error_reason)
        return; /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    kop_vmsgf(r->error_message, sizeof(r->error_message), fmt, ap);
    va_end(ap);
    r->error_reason = reason;
}

/*
 * Classify a failed API call (docs/reconcile.md §8). what: "creating
 * Deployment default/web". reason: the Degraded / Warning reason.
 */
static void api_error(struct rec *r, int err, const struct kop_api_status *st, const char *reason,
                      const char *what)
{
    char ebuf[96];
    const char *msg = st->message[0] ? st->message : strerror_r(-err, ebuf, sizeof(ebuf));
    struct kop_reconcile_result add = {0};
    enum kop_log_level level = KOP_LOG_INFO;
    if (err == -ECANCELED) {
        add.error = err; /* shutting down */
    } else if (err == -EBUSY) {
        add.requeue = true; /* 409 Conflict: someone wrote first, try again */
    } else if (err == -EAGAIN || err == -EIO || err == -ETIMEDOUT) {
        /* Honour Retry-After, but no longer than the workqueue's longest
         * backoff: a server asking for a day (or a date far ahead) must
         * not park the MyResource past the time it behaves again. */
        int64_t cap = kop_workqueue_max_backoff_ns(r->c->queue);
        if (st->retry_after_s > 0)
            add.requeue_after_ns = st->retry_after_s < cap / KOP_NSEC_PER_SEC
                                       ? st->retry_after_s * KOP_NSEC_PER_SEC
                                       : cap;
        else
            add.requeue = true;
        level = KOP_LOG_WARN;
    } else {
        add.error = err;
        level = KOP_LOG_ERROR;
        set_degraded(r, reason, "%s: %s", what, msg);
        kop_events_recordf(r->cl->events, &r->ref, KOP_EVENT_WARNING, reason, "%s: %s", what, msg);
    }
    merge_result(r, add);
    log_rec(r, level, "API request failed",
            json_pack("{s:s, s:s, s:i, s:s, s:i}", "action", what, "reason", reason, "code",
                      st->code, "error", msg, "errno", -err));
}

enum child_kind { CHILD_DEPLOYMENT, CHILD_SERVICE };

/*
 * A child that was there before and is now missing is usually a deletion
 * to undo; but when the MyResource itself was just deleted, the garbage
 * collector removes the children before our MyResource informer has seen
 * the deletion, and recreating them would be a wasted write (and a
 * transient orphan). So before recreating, ask the server once whether
 * the owner still exists. First creations (no status yet) skip this.
 */
static bool owner_exists(struct rec *r)
{
    if (r->owner_state == 0) {
        struct kop_api_status st;
        json_t *obj = NULL;
        memset(&st, 0, sizeof(st));
        int e = kop_client_get(r->cl->rclient, &r->c->res_myr, r->ns, r->name, &st, &obj);
        const char *uid = kop_json_path_str(obj, "metadata.uid");
        if (e == -ENOENT || (e == 0 && (!uid || !r->uid || strcmp(uid, r->uid) != 0 ||
                                        kop_json_path(obj, "metadata.deletionTimestamp"))))
            r->owner_state = -1;
        else
            r->owner_state = 1; /* exists, or unknown: act as if it did */
        json_decref(obj);
    }
    return r->owner_state > 0;
}

/* The child is not in the store: create it. When the server has it
 * already (store lag, or an object without our label), read it and
 * requeue. True when sync_child goes on with *live; false when it is done
 * with the child (*live: the created object, or NULL). */
static bool create_child(struct rec *r, const char *kname, const struct kop_resource *res,
                         json_t *desired, json_t **live)
{
    struct kop_api_status st;
    char what[384];
    memset(&st, 0, sizeof(st));
    snprintf(what, sizeof(what), "creating %s %s/%s", kname, r->ns, r->name);
    int e = kop_client_create(r->cl->rclient, res, r->ns, desired, &st, live);
    if (e == 0) {
        log_rec(r, KOP_LOG_INFO, "created child",
                json_pack("{s:s, s:s}", "kind", kname, "name", r->name));
        kop_events_recordf(r->cl->events, &r->ref, KOP_EVENT_NORMAL, "Created", "Created %s %s/%s",
                           kname, r->ns, r->name);
        return false;
    }
    if (e != -EEXIST) {
        api_error(r, e, &st, "CreateFailed", what);
        return false;
    }
    /* Not in the store but on the server: store lag, or an object
     * without our label. Look at it, then requeue either way. */
    merge_result(r, (struct kop_reconcile_result){.requeue = true});
    memset(&st, 0, sizeof(st));
    snprintf(what, sizeof(what), "reading %s %s/%s", kname, r->ns, r->name);
    e = kop_client_get(r->cl->rclient, res, r->ns, r->name, &st, live);
    if (e < 0) {
        if (e != -ENOENT) /* deleted meanwhile: the requeue creates it */
            api_error(r, e, &st, "ReadFailed", what);
        return false;
    }
    return true;
}

static void sync_child(struct rec *r, const struct kop_myresource_spec *spec, enum child_kind kind)
{
    struct kop_controller *c = r->c;
    const char *kname = kind == CHILD_DEPLOYMENT ? KIND_DEPLOYMENT : KIND_SERVICE;
    const struct kop_resource *res = kind == CHILD_DEPLOYMENT ? &res_deploy : &res_svc;
    const struct kop_reconciler_owner owner = {r->ns, r->name, r->uid};
    struct kop_api_status st;
    char what[384];
    json_t *desired = kind == CHILD_DEPLOYMENT ? kop_reconciler_desired_deployment(&owner, spec)
                                               : kop_reconciler_desired_service(&owner, spec);
    json_t *live = NULL, *patch = NULL;
    if (!desired) {
        merge_result(r, (struct kop_reconcile_result){.error = -ENOMEM});
        return;
    }
    if (c->shard_key && r->shard_value &&
        json_object_set_new(json_object_get(json_object_get(desired, "metadata"), "labels"),
                            c->shard_key, json_string(r->shard_value)) < 0) {
        json_decref(desired);
        merge_result(r, (struct kop_reconcile_result){.error = -ENOMEM});
        return;
    }
    live = kop_store_get(r->cl->store, kname, r->ns, r->name);
    if (!live && r->had_status && !owner_exists(r)) {
        log_rec(r, KOP_LOG_DEBUG, "MyResource gone from the server; not recreating its child",
                json_pack("{s:s}", "kind", kname));
        goto out;
    }
    if (!live && !create_child(r, kname, res, desired, &live))
        goto out;
    if (!kop_reconciler_controlled_by(live, r->uid)) {
        set_degraded(r, "OwnershipConflict",
                     "%s %s/%s exists and is not controlled by this MyResource; kop leaves it "
                     "alone",
                     kname, r->ns, r->name);
        kop_events_recordf(r->cl->events, &r->ref, KOP_EVENT_WARNING, "OwnershipConflict",
                           "%s %s/%s exists and is not controlled by this MyResource", kname, r->ns,
                           r->name);
        log_rec(r, KOP_LOG_WARN, "child not controlled by this MyResource",
                json_pack("{s:s, s:s}", "kind", kname, "name", r->name));
        /* Not ours: do not report it as our Deployment either. */
        json_decref(live);
        live = NULL;
        merge_result(r, (struct kop_reconcile_result){.error = -EEXIST});
        goto out;
    }
    int e = kind == CHILD_DEPLOYMENT ? kop_reconciler_deployment_patch(live, desired, &patch)
                                     : kop_reconciler_service_patch(live, desired, &patch);
    if (e < 0) {
        merge_result(r, (struct kop_reconcile_result){.error = e});
        goto out;
    }
    if (!patch)
        goto out; /* converged: no write */
    memset(&st, 0, sizeof(st));
    snprintf(what, sizeof(what), "updating %s %s/%s", kname, r->ns, r->name);
    json_t *updated = NULL;
    e = kop_client_patch(r->cl->rclient, res, r->ns, r->name, patch, &st, &updated);
    if (e < 0) {
        if (e == -ENOENT) /* deleted meanwhile: the delete event requeues */
            merge_result(r, (struct kop_reconcile_result){.requeue = true});
        else
            api_error(r, e, &st, "UpdateFailed", what);
        goto out;
    }
    json_decref(live);
    live = updated;
    log_rec(r, KOP_LOG_INFO, "updated child",
            json_pack("{s:s, s:s, s:O}", "kind", kname, "name", r->name, "patch", patch));
    kop_events_recordf(r->cl->events, &r->ref, KOP_EVENT_NORMAL, "Updated", "Updated %s %s/%s",
                       kname, r->ns, r->name);
out:
    if (kind == CHILD_DEPLOYMENT) {
        json_decref(r->deployment);
        r->deployment = live;
        live = NULL;
    }
    json_decref(live);
    json_decref(patch);
    json_decref(desired);
}

/*
 * The status in another version's shape (@ref new, NULL on failure):
 * kop computes and compares statuses in the v1 shape; with --storage-version
 * v2 it reads and writes them in the v2 shape, converted by the same rules
 * as the webhook.
 */
static json_t *status_as(const json_t *status, enum kop_myresource_version from,
                         enum kop_myresource_version to)
{
    json_t *tmp = json_pack("{s:s, s:s, s:{}, s:O}", "apiVersion", kop_myresource_api_version(from),
                            "kind", KOP_MYRESOURCE_KIND, "metadata", "status", status);
    if (!tmp || kop_conversion_convert(tmp, to) < 0) {
        json_decref(tmp);
        return NULL;
    }
    json_t *out = json_incref(json_object_get(tmp, "status"));
    json_decref(tmp);
    return out;
}

static void write_status(struct rec *r, const json_t *old_status, int64_t generation,
                         const struct kop_myresource_spec *spec)
{
    const struct kop_reconciler_observed obs = {
        .generation = generation,
        .spec_replicas = spec ? spec->replicas : 0,
        .paused = spec && spec->paused,
        .deployment = r->deployment,
        .error_reason = r->error_reason,
        .error_message = r->error_reason ? r->error_message : NULL,
    };
    json_t *status = kop_reconciler_status(old_status, &obs, kop_clock_wall_ns());
    if (!status) {
        merge_result(r, (struct kop_reconcile_result){.error = -ENOMEM});
        return;
    }
    if (!kop_reconciler_status_changed(old_status, status)) {
        json_decref(status);
        return;
    }
    if (r->c->myr_version == KOP_MYRESOURCE_VERSION_V2) {
        json_t *v2 = status_as(status, KOP_MYRESOURCE_VERSION_V1, KOP_MYRESOURCE_VERSION_V2);
        json_decref(status);
        status = v2;
        if (!status) {
            merge_result(r, (struct kop_reconcile_result){.error = -ENOMEM});
            return;
        }
    }
    json_t *patch = json_pack("{s:O}", "status", status);
    if (!patch) {
        json_decref(status);
        merge_result(r, (struct kop_reconcile_result){.error = -ENOMEM});
        return;
    }
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int e =
        kop_client_patch_status(r->cl->rclient, &r->c->res_myr, r->ns, r->name, patch, &st, NULL);
    if (e == 0) {
        log_rec(r, KOP_LOG_DEBUG, "status updated", json_pack("{s:O}", "status", status));
    } else if (e != -ENOENT || kop_store_exists(r->cl->store, KIND_MYR, r->ns, r->name)) {
        /* A 404 for a MyResource that is gone needs no report (its delete
         * event follows). One still in the store is a failed write, the
         * same NotFound the apiserver answers when the CRD has no status
         * subresource: reported and retried with the backoff, never
         * silently dropped. */
        char what[352];
        snprintf(what, sizeof(what), "updating the status of MyResource %s/%s%s", r->ns, r->name,
                 e == -ENOENT ? " (is the CRD's status subresource enabled?)" : "");
        api_error(r, e, &st, "StatusUpdateFailed", what);
    }
    json_decref(patch);
    json_decref(status);
}

/* The status of obj in the v1 shape (@ref new; NULL when it has none). */
static json_t *status_v1(const struct kop_controller *c, json_t *obj)
{
    json_t *st = json_object_get(obj, "status");
    if (!json_is_object(st))
        return NULL;
    return c->myr_version == KOP_MYRESOURCE_VERSION_V2
               ? status_as(st, KOP_MYRESOURCE_VERSION_V2, KOP_MYRESOURCE_VERSION_V1)
               : json_deep_copy(st);
}

/* apiVersion and kind where the store's copy lacks them (obj is our
 * private copy: kop_store_get decodes a fresh value). */
static void set_type_meta(const struct kop_controller *c, json_t *obj)
{
    if (!json_object_get(obj, "apiVersion"))
        json_object_set_new(obj, "apiVersion",
                            json_string(kop_myresource_api_version(c->myr_version)));
    if (!json_object_get(obj, "kind"))
        json_object_set_new(obj, "kind", json_string(KOP_MYRESOURCE_KIND));
}

/* key of cluster cl (NULL: one it no longer has), rest its "ns/name". */
static struct kop_reconcile_result reconcile_key(struct kop_controller *c, struct cluster *cl,
                                                 const char *key, const char *rest,
                                                 const char *reconcile_id)
{
    char ns[256], name[256];
    struct rec r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.reconcile_id = reconcile_id;
    r.cl = cl;
    const char *slash = strchr(rest, '/');
    if (!r.cl || !slash || (size_t)(slash - rest) >= sizeof(ns) ||
        strlen(slash + 1) >= sizeof(name))
        return r.result; /* not a key this controller makes, or a cluster it no longer has */
    memcpy(ns, rest, (size_t)(slash - rest));
    ns[slash - rest] = '\0';
    snprintf(name, sizeof(name), "%s", slash + 1);
    r.ns = ns;
    r.name = name;
    /* the shard gate is the local cluster's (--sharding goes without --cluster) */
    bool gate = c->gate && cl->local;

    json_t *obj = kop_store_get(cl->store, KIND_MYR, ns, name);
    json_t *old_status = NULL;
    if (!obj) {
        if (gate)
            (void)c->gate(c->gate_ud, cl->rclient, key, NULL);
        log_rec(&r, KOP_LOG_DEBUG, "MyResource not found; nothing to do", NULL);
        return r.result;
    }
    if (kop_json_path(obj, "metadata.deletionTimestamp")) {
        log_rec(&r, KOP_LOG_DEBUG, "MyResource is being deleted; nothing to do", NULL);
        goto out;
    }
    int64_t gated = gate ? c->gate(c->gate_ud, cl->rclient, key, obj) : 0;
    if (gated != 0) {
        log_rec(&r, KOP_LOG_DEBUG, "MyResource not reconciled here (shard gate)", NULL);
        if (gated > 0)
            r.result.requeue_after_ns = gated;
        goto out;
    }
    if (c->shard_key)
        r.shard_value = json_string_value(json_object_get(
            json_object_get(json_object_get(obj, "metadata"), "labels"), c->shard_key));
    r.uid = kop_json_path_str(obj, "metadata.uid");
    const json_t *gen = kop_json_path(obj, "metadata.generation");
    int64_t generation = json_is_integer(gen) ? json_integer_value(gen) : 0;
    r.ref = (struct kop_event_ref){
        .api_version = kop_myresource_api_version(c->myr_version),
        .kind = KOP_MYRESOURCE_KIND,
        .namespace = ns,
        .name = name,
        .uid = r.uid,
        .resource_version = kop_json_path_str(obj, "metadata.resourceVersion"),
    };
    log_rec(&r, KOP_LOG_DEBUG, "reconciling", NULL);
    /* The status as read, in the v1 shape, before the in-place conversion. */
    old_status = status_v1(c, obj);
    r.had_status = json_array_size(json_object_get(old_status, "conditions")) > 0;
    set_type_meta(c, obj);
    int e = kop_conversion_convert(obj, KOP_MYRESOURCE_VERSION_V2);
    struct kop_myresource_spec spec;
    if (e == 0)
        e = kop_myresource_spec_read(obj, &spec);
    if (e < 0) {
        /* Admission keeps such objects out; one that got in (webhook
         * bypassed) is reported, not retried: a spec change requeues. */
        set_degraded(&r, "InvalidSpec", "the spec cannot be read (%s)",
                     e == -EINVAL ? "a field has the wrong type or is out of range"
                                  : "out of memory");
        kop_events_record(cl->events, &r.ref, KOP_EVENT_WARNING, "InvalidSpec", r.error_message);
        r.deployment = kop_store_get(cl->store, KIND_DEPLOYMENT, ns, name);
        write_status(&r, old_status, generation, NULL);
        goto out;
    }
    if (spec.paused) {
        r.deployment = kop_store_get(cl->store, KIND_DEPLOYMENT, ns, name);
        if (r.deployment && !kop_reconciler_controlled_by(r.deployment, r.uid)) {
            json_decref(r.deployment);
            r.deployment = NULL;
        }
    } else {
        sync_child(&r, &spec, CHILD_DEPLOYMENT);
        sync_child(&r, &spec, CHILD_SERVICE);
    }
    if (r.result.error != -ECANCELED)
        write_status(&r, old_status, generation, &spec);
    log_rec(&r, KOP_LOG_DEBUG, "reconciled",
            json_pack("{s:i, s:b, s:I}", "errno", -r.result.error, "requeue", r.result.requeue,
                      "requeueAfterMs",
                      (json_int_t)(r.result.requeue_after_ns / KOP_NSEC_PER_MSEC)));
out:
    json_decref(r.deployment);
    json_decref(old_status);
    json_decref(obj);
    return r.result;
}

/*
 * One trace per reconcile: a root INTERNAL span "reconcile" naming the
 * object, current on this worker thread while it runs, so that every API
 * call it makes is a CLIENT child span sending its traceparent
 * (kop/client.h) and its log lines carry traceID and spanID.
 *
 * A reconcile that made no API call and did not fail (the converged
 * objects of a resync) is not exported: Kubernetes' tracing guidelines ask
 * for no "empty" reconcile spans (kubernetes/community,
 * contributors/devel/sig-instrumentation/trace-instrumentation.md).
 */
/* The cluster's controller_runtime_reconcile_* series, by the worker
 * pool's rule (kop/workers.h). */
static void count_result(struct cluster *cl, struct kop_reconcile_result res, int64_t started)
{
    if (!cl)
        return; /* a cluster that is gone: its series are too */
    kop_histogram_observe(cl->m_time, (double)(kop_clock_now_ns() - started) / 1e9);
    kop_counter_inc(cl->m_result[kop_workers_result_index(res)]);
    if (res.error != 0)
        kop_counter_inc(cl->m_errors);
}

static struct kop_reconcile_result reconcile(void *ud, const char *key, const char *reconcile_id)
{
    int64_t started = kop_clock_now_ns();
    const char *rest = key;
    struct cluster *cl = key_cluster(ud, key, &rest);
    struct kop_span *span = kop_span_start("reconcile", KOP_SPAN_INTERNAL, NULL);
    struct kop_trace_ctx prev = kop_trace_set_current(span ? &span->ctx : NULL);
    struct kop_reconcile_result res = reconcile_key(ud, cl, key, rest, reconcile_id);
    unsigned calls = kop_trace_current_children();
    kop_trace_set_current(&prev);
    count_result(cl, res, started);
    if (!span || (calls == 0 && res.error == 0)) {
        kop_span_free(span);
        cluster_unref(cl);
        return res;
    }
    if (cl && !cl->local)
        kop_span_set_str(span, "k8s.cluster.name", cl->name);
    key = rest;
    const char *slash = strchr(key, '/');
    kop_span_set_str(span, "controller", KOP_CONTROLLER_NAME);
    kop_span_set_str(span, "reconcileID", reconcile_id);
    kop_span_set_str(span, "k8s.object.kind", KOP_MYRESOURCE_KIND);
    if (slash) {
        char ns[256];
        snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
        kop_span_set_str(span, "k8s.namespace.name", ns);
        kop_span_set_str(span, "k8s.object.name", slash + 1);
    }
    if (res.requeue || res.requeue_after_ns)
        kop_span_set_int(span, "requeueAfterMs", res.requeue_after_ns / KOP_NSEC_PER_MSEC);
    if (res.error < 0) {
        char err[128];
        kop_span_set_status(span, KOP_SPAN_ERROR, strerror_r(-res.error, err, sizeof(err)));
    }
    kop_span_end(span);
    cluster_unref(cl);
    return res;
}

/* ---- resync ------------------------------------------------------------------------- */

/* Enqueue every MyResource of cl's store; returns how many. */
static size_t enqueue_all(struct cluster *cl)
{
    json_t *keys = kop_store_keys(cl->store, KIND_MYR, cl->c->namespace);
    const char *k;
    json_t *v;
    size_t plen = strlen(KIND_MYR "/");
    size_t n = 0;
    json_object_foreach(keys, k, v)
    {
        char ns[256], key[512];
        const char *slash = strncmp(k, KIND_MYR "/", plen) == 0 ? strchr(k + plen, '/') : NULL;
        if (!slash || (size_t)(slash - k - plen) >= sizeof(ns))
            continue;
        snprintf(ns, sizeof(ns), "%.*s", (int)(slash - k - plen), k + plen);
        if (kop_controller_key(cl->name, ns, slash + 1, key, sizeof(key)) < 0)
            continue;
        if (kop_workqueue_add(cl->c->queue, key) == 0)
            n++;
    }
    json_decref(keys);
    return n;
}

static void resync_all(struct kop_controller *c)
{
    size_t n = 0;
    pthread_rwlock_rdlock(&c->clusters_lock);
    for (size_t i = 0; i < c->n_clusters; i++)
        n += enqueue_all(c->clusters[i]);
    pthread_rwlock_unlock(&c->clusters_lock);
    kop_log(KOP_LOG_DEBUG, LOGGER, "periodic resync",
            json_pack("{s:s, s:I}", "controller", KOP_CONTROLLER_NAME, "enqueued", (json_int_t)n));
}

static void *resync_main(void *arg)
{
    struct kop_controller *c = arg;
    pthread_mutex_lock(&c->resync_lock);
    while (!c->resync_stop) {
        struct timespec deadline = kop_clock_deadline_ms(c->sync_period_ms);
        int e = 0;
        while (!c->resync_stop && e != ETIMEDOUT)
            e = pthread_cond_timedwait(&c->resync_cond, &c->resync_lock, &deadline);
        if (c->resync_stop)
            break;
        pthread_mutex_unlock(&c->resync_lock);
        resync_all(c);
        pthread_mutex_lock(&c->resync_lock);
    }
    pthread_mutex_unlock(&c->resync_lock);
    return NULL;
}

/* ---- metadata of the Deployments and Services not kop's (admission rule 4) ------------- */

struct meta_type {
    const char *api_version;
    const char *kind;
};

static struct meta_type meta_deploy = {"apps/v1", KIND_DEPLOYMENT};
static struct meta_type meta_svc = {"v1", KIND_SERVICE};

static int set_str(json_t *dst, const char *key, const json_t *src)
{
    const char *v = json_string_value(json_object_get(src, key));
    return v ? json_object_set_new(dst, key, json_string(v)) : 0;
}

/* The controller ownerReference of md as [{apiVersion, kind, name, uid,
 * controller: true}] (@ref new), json_null() when there is none, NULL on
 * ENOMEM. */
static json_t *controller_ref(const json_t *md)
{
    size_t i;
    json_t *ref;
    json_array_foreach(json_object_get(md, "ownerReferences"), i, ref)
    {
        if (!json_is_true(json_object_get(ref, "controller")))
            continue;
        json_t *r = json_object();
        json_t *arr = json_array();
        if (!r || !arr || set_str(r, "apiVersion", ref) < 0 || set_str(r, "kind", ref) < 0 ||
            set_str(r, "name", ref) < 0 || set_str(r, "uid", ref) < 0 ||
            json_object_set_new(r, "controller", json_true()) < 0 ||
            json_array_append_new(arr, r) < 0) {
            if (!arr)
                json_decref(r);
            json_decref(arr);
            return NULL;
        }
        return arr;
    }
    return json_null();
}

/*
 * Informer transform of the metadata informers: keep {apiVersion, kind,
 * metadata: {name, namespace, uid, resourceVersion, ownerReferences (the
 * controller one only)}}. The same whether the server sent
 * PartialObjectMetadata or, ignoring the Accept header, the whole object.
 * @ref steal obj; @ref new, NULL on ENOMEM (the informer drops it).
 */
static json_t *meta_transform(void *ud, json_t *obj)
{
    const struct meta_type *t = ud;
    const json_t *md = json_object_get(obj, "metadata");
    json_t *m = json_object();
    json_t *out = json_object();
    if (!m || !out || set_str(m, "name", md) < 0 || set_str(m, "namespace", md) < 0 ||
        set_str(m, "uid", md) < 0 || set_str(m, "resourceVersion", md) < 0)
        goto fail;
    json_t *refs = controller_ref(md); /* json_null() (none) needs no release */
    if (!refs || (json_is_array(refs) && json_object_set_new(m, "ownerReferences", refs) < 0))
        goto fail;
    if (json_object_set_new(out, "apiVersion", json_string(t->api_version)) < 0 ||
        json_object_set_new(out, "kind", json_string(t->kind)) < 0 ||
        json_object_set_new(out, "metadata", m) < 0) {
        m = NULL; /* stolen */
        goto fail;
    }
    json_decref(obj);
    return out;
fail:
    json_decref(m);
    json_decref(out);
    json_decref(obj);
    return NULL;
}

/* ---- a cluster's state ------------------------------------------------------------ */

#define PROBE_PERIOD_MS 2000
#define PROBE_SYNC_MS 100

static bool cluster_synced(const struct cluster *cl)
{
    return kop_informer_has_synced(cl->inf_myr) && kop_informer_has_synced(cl->inf_deploy) &&
           kop_informer_has_synced(cl->inf_svc) && kop_informer_has_synced(cl->inf_deploy_meta) &&
           kop_informer_has_synced(cl->inf_svc_meta);
}

/* One look at cl: 0 ready, else why not (a negative errno of the probe,
 * or 1: the informers have not listed yet). */
static int cluster_check(struct cluster *cl)
{
    if (cl->probe) {
        const struct kop_request req = {.method = "GET", .path = "/version"};
        struct kop_api_status st;
        memset(&st, 0, sizeof(st));
        int r = kop_client_request(cl->probe, &req, &st, NULL);
        if (r < 0 && r != -EBADMSG) /* any answer but an error status is an answer */
            return r;
    }
    return cluster_synced(cl) ? 0 : 1;
}

/* Record a verdict: the gauge, a log line on every change and, when a
 * cluster comes back, a resync of its objects (their backoff may have
 * grown long while it was away). */
static void cluster_set_state(struct cluster *cl, int why)
{
    int state = why == 0;
    pthread_mutex_lock(&cl->lock);
    int old = cl->state;
    bool comeback = state && cl->was_ready && old == 0;
    cl->state = state;
    cl->was_ready = cl->was_ready || state;
    pthread_mutex_unlock(&cl->lock);
    kop_gauge_set(cl->m_ready, state);
    if (old == state)
        return;
    if (state) {
        /* the informers' first lists queue every object themselves */
        size_t n = comeback ? enqueue_all(cl) : 0;
        kop_log(KOP_LOG_INFO, LOGGER, "cluster ready",
                json_pack("{s:s, s:I}", "cluster", cl->name, "enqueued", (json_int_t)n));
    } else if (why > 0 && old == -1) {
        /* starting: the informers' first lists; "cluster ready" follows */
    } else if (why > 0) {
        kop_log(KOP_LOG_WARN, LOGGER, "cluster not ready",
                json_pack("{s:s, s:s}", "cluster", cl->name, "reason", "informers not synced"));
    } else {
        kop_log_errno(KOP_LOG_WARN, LOGGER, "cluster not ready", why,
                      json_pack("{s:s, s:s}", "cluster", cl->name, "reason",
                                "the API server did not answer the probe"));
    }
}

/* The cluster's prober thread: a verdict every PROBE_PERIOD_MS, every
 * PROBE_SYNC_MS while the informers have not listed (so that a cluster is
 * ready soon after its lists); the probe client's own timeouts bound a
 * probe of a hung server. */
static void *prober_main(void *arg)
{
    struct cluster *cl = arg;
    pthread_mutex_lock(&cl->lock);
    while (!cl->stop) {
        pthread_mutex_unlock(&cl->lock);
        int why = cluster_check(cl);
        cluster_set_state(cl, why);
        pthread_mutex_lock(&cl->lock);
        struct timespec deadline = kop_clock_deadline_ms(why > 0 ? PROBE_SYNC_MS : PROBE_PERIOD_MS);
        int e = 0;
        while (!cl->stop && e != ETIMEDOUT)
            e = pthread_cond_timedwait(&cl->cond, &cl->lock, &deadline);
    }
    pthread_mutex_unlock(&cl->lock);
    return NULL;
}

bool kop_controller_cluster_ready(struct kop_controller *c, const char *name)
{
    assert(c);
    assert(name);
    struct cluster *cl = name_cluster(c, name);
    if (!cl)
        return false;
    pthread_mutex_lock(&cl->lock);
    bool ok = cl->state == 1;
    pthread_mutex_unlock(&cl->lock);
    cluster_unref(cl);
    return ok;
}

/* ---- lifecycle ------------------------------------------------------------------------ */

enum inf_role { ROLE_MYR, ROLE_CHILD, ROLE_META };

static int informer(struct cluster *cl, const struct kop_resource *res, const char *kind,
                    const char *selector, enum inf_role role, struct kop_informer **ret)
{
    char name[128];
    struct kop_informer_options o = {
        .client = cl->client,
        .store = cl->store,
        .resource = *res,
        .kind = kind,
        .namespace = cl->c->namespace,
        .label_selector = selector,
        .on_add = role == ROLE_CHILD ? on_child_add : on_myr_add,
        .on_update = role == ROLE_CHILD ? on_child_update : on_myr_update,
        .on_delete = role == ROLE_CHILD ? on_child_add : on_myr_add,
        .ud = cl,
    };
    if (role == ROLE_META) {
        /* No handlers: these never enqueue a reconcile. */
        o.on_add = NULL;
        o.on_update = NULL;
        o.on_delete = NULL;
        o.transform = meta_transform;
        o.ud = res == &res_deploy ? &meta_deploy : &meta_svc;
        o.metadata_only = true;
        o.name = res == &res_deploy ? "deployments (metadata)" : "services (metadata)";
    }
    if (!cl->local) {
        /* its log lines name the member */
        snprintf(name, sizeof(name), "%s %s", cl->name, o.name ? o.name : res->resource);
        o.name = name;
    }
    return kop_informer_new(&o, ret);
}

static void cluster_free(struct cluster *cl)
{
    if (!cl)
        return;
    kop_metric_remove(cl->m_ready);
    for (size_t i = 0; i < 4; i++)
        kop_metric_remove(cl->m_result[i]);
    kop_metric_remove(cl->m_errors);
    kop_metric_remove(cl->m_time);
    kop_informer_free(cl->inf_myr);
    kop_informer_free(cl->inf_deploy);
    kop_informer_free(cl->inf_svc);
    kop_informer_free(cl->inf_deploy_meta);
    kop_informer_free(cl->inf_svc_meta);
    pthread_cond_destroy(&cl->cond);
    pthread_mutex_destroy(&cl->lock);
    free(cl->name);
    free(cl);
}

static void cluster_metrics(struct cluster *cl, struct kop_metrics *metrics)
{
    static const char *const ready_labels[] = {"cluster", NULL};
    static const char *const l_cl[] = {"controller", "cluster", NULL};
    static const char *const l_res[] = {"controller", "cluster", "result", NULL};
    struct kop_metrics *m = metrics ? metrics : kop_metrics_global();
    if (!m)
        return;
    struct kop_metric_family *f =
        kop_metrics_register(m, KOP_METRIC_GAUGE, "kop_cluster_ready",
                             "1 while the cluster's informers have synced and its API server "
                             "answers kop's probe, else 0.",
                             ready_labels, NULL, 0);
    cl->m_ready = f ? kop_metric_child(f, cl->name) : NULL;
    kop_gauge_set(cl->m_ready, 0);
    /* controller-runtime's names; the pool leaves these to the controller
     * (kop_workers_options.caller_counts) for the cluster label */
    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total",
                             "Total number of reconciliations per controller", l_res, NULL, 0);
    for (size_t i = 0; i < 4; i++)
        cl->m_result[i] =
            f ? kop_metric_child(f, KOP_CONTROLLER_NAME, cl->name, kop_workers_results[i]) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_errors_total",
                             "Total number of reconciliation errors per controller", l_cl, NULL, 0);
    cl->m_errors = f ? kop_metric_child(f, KOP_CONTROLLER_NAME, cl->name) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "controller_runtime_reconcile_time_seconds",
                             "Length of time per reconciliation per controller", l_cl,
                             kop_workers_time_buckets, kop_workers_n_time_buckets);
    cl->m_time = f ? kop_metric_child(f, KOP_CONTROLLER_NAME, cl->name) : NULL;
}

/* A cluster unit and its five informers (not started). */
static int cluster_new(struct kop_controller *c, const struct kop_controller_cluster_options *o,
                       bool local, struct cluster **ret)
{
    struct cluster *cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    pthread_mutex_init(&cl->lock, NULL);
    if (kop_clock_cond_init(&cl->cond) != 0) {
        pthread_mutex_destroy(&cl->lock);
        free(cl);
        return -ENOMEM;
    }
    cl->c = c;
    cl->local = local;
    cl->state = -1;
    cl->refs = 1; /* the list's */
    cl->name = strdup(o->name ? o->name : KOP_CONTROLLER_LOCAL_CLUSTER);
    cl->client = o->client;
    cl->rclient = o->reconcile_client ? o->reconcile_client : o->client;
    cl->probe = o->probe_client;
    cl->store = o->store;
    cl->events = o->events;
    int r = cl->name ? 0 : -ENOMEM;
    const char *child_sel = c->child_selector ? c->child_selector : KOP_RECONCILER_CHILD_SELECTOR;
    if (r == 0)
        r = informer(cl, &c->res_myr, KIND_MYR, c->shard_selector, ROLE_MYR, &cl->inf_myr);
    if (r == 0)
        r = informer(cl, &res_deploy, KIND_DEPLOYMENT, child_sel, ROLE_CHILD, &cl->inf_deploy);
    if (r == 0)
        r = informer(cl, &res_svc, KIND_SERVICE, child_sel, ROLE_CHILD, &cl->inf_svc);
    if (r == 0)
        r = informer(cl, &res_deploy, KIND_DEPLOYMENT_META, KOP_RECONCILER_FOREIGN_SELECTOR,
                     ROLE_META, &cl->inf_deploy_meta);
    if (r == 0)
        r = informer(cl, &res_svc, KIND_SERVICE_META, KOP_RECONCILER_FOREIGN_SELECTOR, ROLE_META,
                     &cl->inf_svc_meta);
    if (r < 0) {
        cluster_free(cl);
        return r;
    }
    *ret = cl;
    return 0;
}

/* Append cl to the list. clusters_lock held for writing. */
static int cluster_append(struct kop_controller *c, struct cluster *cl)
{
    struct cluster **a = realloc(c->clusters, (c->n_clusters + 1) * sizeof(*a));
    if (!a)
        return -ENOMEM;
    c->clusters = a;
    a[c->n_clusters++] = cl;
    return 0;
}

static int cluster_start(struct cluster *cl);
static void cluster_stop(struct cluster *cl);

/* The pool: --max-concurrent-reconciles threads for each cluster, so that
 * every cluster can use its whole share while others hold theirs. */
static int pool_size(const struct kop_controller *c, size_t n_clusters)
{
    return c->max_concurrent * (int)n_clusters;
}

int kop_controller_add_cluster(struct kop_controller *c,
                               const struct kop_controller_cluster_options *opt)
{
    assert(c);
    assert(opt);
    assert(opt->name);
    assert(opt->client);
    assert(opt->store);
    if (c->shard_key)
        return -EBUSY;
    char key[128];
    if (strcmp(opt->name, KOP_CONTROLLER_LOCAL_CLUSTER) == 0 || strchr(opt->name, '/') ||
        !*opt->name || kop_controller_key(opt->name, "x", "y", key, sizeof(key)) < 0)
        return -EINVAL;
    struct cluster *cl;
    int r = cluster_new(c, opt, false, &cl);
    if (r < 0)
        return r;
    pthread_rwlock_wrlock(&c->clusters_lock);
    r = c->stopped ? -ESHUTDOWN : find_member(c, opt->name, strlen(opt->name)) ? -EEXIST : 0;
    if (r == 0)
        r = cluster_append(c, cl);
    /* its series only once it is in: the series of a name are shared, so
     * a refused duplicate must not make (and free) the live one's */
    if (r == 0)
        cluster_metrics(cl, c->metrics);
    size_t n = c->n_clusters;
    bool started = c->started;
    pthread_rwlock_unlock(&c->clusters_lock);
    if (r < 0) {
        cluster_free(cl);
        return r;
    }
    if (!started)
        return 0;
    /* engaged at run time: its informers and prober now, and its share of
     * the workers */
    r = cluster_start(cl);
    if (r == 0)
        r = kop_workers_resize(c->workers, pool_size(c, n));
    if (r < 0) {
        (void)kop_controller_remove_cluster(c, opt->name);
        return r;
    }
    kop_log(KOP_LOG_INFO, LOGGER, "cluster engaged",
            json_pack("{s:s, s:I}", "cluster", cl->name, "clusters", (json_int_t)n));
    return 0;
}

int kop_controller_remove_cluster(struct kop_controller *c, const char *name)
{
    assert(c);
    assert(name);
    pthread_rwlock_wrlock(&c->clusters_lock);
    struct cluster *cl = find_member(c, name, strlen(name));
    if (cl) {
        size_t i = 1;
        while (c->clusters[i] != cl)
            i++;
        memmove(&c->clusters[i], &c->clusters[i + 1],
                (c->n_clusters - i - 1) * sizeof(c->clusters[0]));
        c->n_clusters--;
    }
    size_t n = c->n_clusters;
    bool started = c->started && !c->stopped;
    pthread_rwlock_unlock(&c->clusters_lock);
    if (!cl)
        return -ENOENT;
    /* No lookup finds it any more: its keys handed out from now on are
     * dropped. Stop what adds keys (informers, prober), cut its requests
     * short, wait for the reconciles and reviews holding it, then drop its
     * keys still queued or delayed. */
    cluster_stop(cl);
    kop_client_abort(cl->rclient);
    pthread_mutex_lock(&cl->lock);
    cl->refs--; /* the list's */
    while (cl->refs > 0)
        pthread_cond_wait(&cl->cond, &cl->lock);
    pthread_mutex_unlock(&cl->lock);
    size_t dropped = kop_workqueue_forget_group(c->queue, cl->name);
    if (started)
        (void)kop_workers_resize(c->workers, pool_size(c, n));
    kop_log(KOP_LOG_INFO, LOGGER, "cluster disengaged",
            json_pack("{s:s, s:I, s:I}", "cluster", cl->name, "dropped", (json_int_t)dropped,
                      "clusters", (json_int_t)n));
    cluster_free(cl);
    return 0;
}

/* The sharding options (a selector "label=value"). */
static int set_shard_selector(struct kop_controller *c, const char *sel)
{
    const char *eq = strchr(sel, '=');
    if (!eq)
        return -EINVAL;
    c->shard_selector = strdup(sel);
    c->shard_key = strndup(sel, (size_t)(eq - sel));
    c->shard_value = strdup(eq + 1);
    size_t n = strlen(KOP_RECONCILER_CHILD_SELECTOR) + strlen(sel) + 2;
    c->child_selector = malloc(n);
    if (c->child_selector)
        snprintf(c->child_selector, n, "%s,%s", KOP_RECONCILER_CHILD_SELECTOR, sel);
    return c->shard_selector && c->shard_key && c->shard_value && c->child_selector ? 0 : -ENOMEM;
}

int kop_controller_new(const struct kop_controller_options *opt, struct kop_controller **ret)
{
    assert(opt);
    assert(opt->client);
    assert(opt->store);
    assert(ret);
    struct kop_controller *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int r = -ENOMEM;
    c->drain_ms = opt->lost_lease_drain_ms;
    c->metrics = opt->metrics;
    c->sync_period_ms = opt->sync_period_ms > 0 ? opt->sync_period_ms : DEFAULT_SYNC_PERIOD_MS;
    c->max_concurrent = opt->max_concurrent > 0 ? opt->max_concurrent : 1;
    c->leading = opt->leading;
    c->myr_version = opt->myresource_version == KOP_MYRESOURCE_VERSION_V2
                         ? KOP_MYRESOURCE_VERSION_V2
                         : KOP_MYRESOURCE_VERSION_V1;
    c->res_myr = (struct kop_resource){KOP_MYRESOURCE_GROUP,
                                       c->myr_version == KOP_MYRESOURCE_VERSION_V2 ? "v2" : "v1",
                                       KOP_MYRESOURCE_RESOURCE, true};
    c->gate = opt->gate;
    c->gate_ud = opt->gate_ud;
    pthread_mutex_init(&c->resync_lock, NULL);
    if (kop_clock_cond_init(&c->resync_cond) != 0) {
        pthread_mutex_destroy(&c->resync_lock);
        free(c);
        return -ENOMEM;
    }
    pthread_rwlock_init(&c->clusters_lock, NULL);
    if (opt->namespace && *opt->namespace) {
        c->namespace = strdup(opt->namespace);
        if (!c->namespace)
            goto fail;
    }
    if (opt->shard_selector) {
        r = set_shard_selector(c, opt->shard_selector);
        if (r < 0)
            goto fail;
    }
    /* One queue for every cluster; a cluster's keys are a group that holds
     * at most --max-concurrent-reconciles workers (DESIGN of
     * kop/controller.h). */
    const struct kop_workqueue_options qo = {
        .name = KOP_CONTROLLER_NAME,
        .metrics = opt->metrics,
        .group_of = key_group,
        .group_max_processing = c->max_concurrent,
    };
    r = kop_workqueue_new(&qo, &c->queue);
    if (r < 0)
        goto fail;
    const struct kop_controller_cluster_options local = {
        .name = KOP_CONTROLLER_LOCAL_CLUSTER,
        .client = opt->client,
        .reconcile_client = opt->reconcile_client,
        .probe_client = opt->probe_client,
        .store = opt->store,
        .events = opt->events,
    };
    r = cluster_new(c, &local, true, &c->local);
    if (r == 0) {
        r = cluster_append(c, c->local);
        if (r == 0)
            cluster_metrics(c->local, c->metrics);
        if (r < 0) {
            cluster_free(c->local);
            c->local = NULL;
        }
    }
    if (r < 0)
        goto fail;
    *ret = c;
    return 0;
fail:
    kop_controller_free(c);
    return r;
}

static int cluster_start(struct cluster *cl)
{
    int r = kop_informer_start(cl->inf_deploy);
    if (r == 0)
        r = kop_informer_start(cl->inf_svc);
    if (r == 0)
        r = kop_informer_start(cl->inf_deploy_meta);
    if (r == 0)
        r = kop_informer_start(cl->inf_svc_meta);
    if (r == 0)
        r = kop_informer_start(cl->inf_myr);
    if (r == 0) {
        r = kop_thread_start(&cl->prober, prober_main, cl, "probe-%s", cl->name);
        cl->prober_started = r == 0;
    }
    return r;
}

static void cluster_stop(struct cluster *cl)
{
    kop_informer_stop(cl->inf_myr);
    kop_informer_stop(cl->inf_deploy);
    kop_informer_stop(cl->inf_svc);
    kop_informer_stop(cl->inf_deploy_meta);
    kop_informer_stop(cl->inf_svc_meta);
    if (cl->prober_started) {
        pthread_mutex_lock(&cl->lock);
        cl->stop = true;
        pthread_cond_broadcast(&cl->cond);
        pthread_mutex_unlock(&cl->lock);
        /* a probe in flight ends within the probe client's timeout */
        pthread_join(cl->prober, NULL);
        cl->prober_started = false;
    }
}

static int workers_new(struct kop_controller *c)
{
    const struct kop_workers_options wo = {
        .controller = KOP_CONTROLLER_NAME,
        .max_concurrent = pool_size(c, c->n_clusters),
        .queue = c->queue,
        .reconcile = reconcile,
        .ud = c,
        .metrics = c->metrics,
        .caller_counts = true,
    };
    return kop_workers_new(&wo, &c->workers);
}

int kop_controller_start(struct kop_controller *c)
{
    assert(c);
    pthread_rwlock_wrlock(&c->clusters_lock);
    int r = c->started ? -EALREADY : workers_new(c);
    for (size_t i = 0; r == 0 && i < c->n_clusters; i++)
        r = cluster_start(c->clusters[i]);
    if (r != -EALREADY)
        c->started = true;
    size_t n = c->n_clusters;
    pthread_rwlock_unlock(&c->clusters_lock);
    if (r == 0) {
        r = kop_thread_start(&c->resync, resync_main, c, "resync");
        c->resync_started = r == 0;
    }
    if (r == 0)
        r = kop_workers_start(c->workers);
    if (r == 0 && !c->leading)
        (void)kop_workers_pause(c->workers, 0); /* nothing runs yet */
    if (r == 0)
        kop_log(KOP_LOG_INFO, LOGGER, "starting controller",
                json_pack("{s:s, s:s?, s:b, s:I, s:I}", "controller", KOP_CONTROLLER_NAME,
                          "namespace", c->namespace, "leading", c->leading, "syncPeriodMs",
                          (json_int_t)c->sync_period_ms, "clusters", (json_int_t)n));
    return r;
}

static void abort_all(struct kop_controller *c, bool abort)
{
    pthread_rwlock_rdlock(&c->clusters_lock);
    for (size_t i = 0; i < c->n_clusters; i++) {
        if (abort)
            kop_client_abort(c->clusters[i]->rclient);
        else
            kop_client_abort_reset(c->clusters[i]->rclient);
    }
    pthread_rwlock_unlock(&c->clusters_lock);
}

void kop_controller_set_leading(struct kop_controller *c, bool leading)
{
    assert(c);
    if (leading) {
        abort_all(c, false);
        kop_workers_resume(c->workers);
        return;
    }
    /* Losing the lease stops reconciling at once, in every cluster: no key
     * is handed out from now on, the requests of reconciles in flight are
     * aborted (a write the partition delayed must not land after the next
     * leader started), and the elector's thread waits for them, bounded by
     * the time left before another replica can take the lease. */
    abort_all(c, true);
    if (kop_workers_pause(c->workers, c->drain_ms > 0 ? c->drain_ms : 0) < 0 && c->drain_ms > 0)
        kop_log(KOP_LOG_WARN, "controller", "reconciles still running after losing the lease",
                json_pack("{s:I}", "waitedMs", (json_int_t)c->drain_ms));
    abort_all(c, false);
}

bool kop_controller_synced(struct kop_controller *c)
{
    return c && cluster_synced(c->local);
}

int kop_controller_wait_synced(struct kop_controller *c, int64_t timeout_ms)
{
    int64_t deadline = kop_clock_now_ns() + timeout_ms * KOP_NSEC_PER_MSEC;
    struct cluster *cl = c->local;
    struct kop_informer *infs[] = {cl->inf_myr, cl->inf_deploy, cl->inf_svc, cl->inf_deploy_meta,
                                   cl->inf_svc_meta};
    for (size_t i = 0; i < sizeof(infs) / sizeof(infs[0]); i++) {
        int64_t left = (deadline - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
        int r = kop_informer_wait_synced(infs[i], left > 0 ? left : 0);
        if (r < 0)
            return r;
    }
    return 0;
}

int kop_controller_stop(struct kop_controller *c, int64_t timeout_ms)
{
    assert(c);
    pthread_rwlock_wrlock(&c->clusters_lock);
    bool stopped = c->stopped;
    c->stopped = true; /* no cluster is added any more */
    pthread_rwlock_unlock(&c->clusters_lock);
    if (stopped)
        return 0;
    /* 1. no new keys: informers (and the probers) stop, the resync timer
     * stops (a remove_cluster running meanwhile has unlinked its cluster
     * and stops it itself) */
    pthread_rwlock_rdlock(&c->clusters_lock);
    for (size_t i = 0; i < c->n_clusters; i++)
        cluster_stop(c->clusters[i]);
    pthread_rwlock_unlock(&c->clusters_lock);
    if (c->resync_started) {
        pthread_mutex_lock(&c->resync_lock);
        c->resync_stop = true;
        pthread_cond_broadcast(&c->resync_cond);
        pthread_mutex_unlock(&c->resync_lock);
        pthread_join(c->resync, NULL);
        c->resync_started = false;
    }
    /* 2. the queue shuts down, reconciles in flight finish */
    int r = 0;
    if (c->workers)
        r = kop_workers_stop(c->workers, timeout_ms);
    else
        kop_workqueue_shutdown(c->queue); /* never started */
    kop_log(KOP_LOG_INFO, LOGGER, "controller stopped",
            json_pack("{s:s, s:b}", "controller", KOP_CONTROLLER_NAME, "drained", r == 0));
    return r;
}

void kop_controller_free(struct kop_controller *c)
{
    if (!c)
        return;
    if (c->queue)
        kop_controller_stop(c, -1);
    kop_workers_free(c->workers);
    for (size_t i = 0; i < c->n_clusters; i++)
        cluster_free(c->clusters[i]);
    free(c->clusters);
    pthread_rwlock_destroy(&c->clusters_lock);
    kop_workqueue_free(c->queue);
    pthread_cond_destroy(&c->resync_cond);
    pthread_mutex_destroy(&c->resync_lock);
    free(c->namespace);
    free(c->shard_key);
    free(c->shard_value);
    free(c->shard_selector);
    free(c->child_selector);
    free(c);
}

void *kop_controller_cluster(struct kop_controller *c, const char *name)
{
    assert(c);
    assert(name);
    return name_cluster(c, name);
}

void kop_controller_cluster_put(void *handle)
{
    cluster_unref(handle);
}

/*
 * Rule 4 reads two disjoint caches: the foreign metadata (objects without
 * kop's managed-by label) and the child informers (kop's children; with
 * sharding only this replica's share). In single-leader mode the two
 * together are every Deployment and Service of the watched namespaces, as
 * one cluster-wide cache was before. With sharding, a kop-managed child of
 * another replica's share is not seen: see docs/reconcile.md §13 "Sharding", admission
 * rule 4, for when that happens and why no API call replaces it.
 */
enum kop_child_lookup kop_controller_cluster_child_lookup(void *userdata, const char *kind,
                                                          const char *ns, const char *name,
                                                          char *ret_controller_uid, size_t uid_size)
{
    struct cluster *cl = userdata;
    assert(cl);
    if (!kop_informer_has_synced(cl->inf_deploy_meta) ||
        !kop_informer_has_synced(cl->inf_svc_meta) || !kop_informer_has_synced(cl->inf_deploy) ||
        !kop_informer_has_synced(cl->inf_svc))
        return KOP_CHILD_NOT_SYNCED;
    if (!kind || !ns || !name)
        return KOP_CHILD_ABSENT;
    if (cl->c->namespace && strcmp(cl->c->namespace, ns) != 0)
        return KOP_CHILD_NOT_SYNCED; /* a namespace this replica does not watch */
    const char *meta_kind, *child_kind;
    if (strcmp(kind, KIND_DEPLOYMENT) == 0) {
        meta_kind = KIND_DEPLOYMENT_META;
        child_kind = KIND_DEPLOYMENT;
    } else if (strcmp(kind, KIND_SERVICE) == 0) {
        meta_kind = KIND_SERVICE_META;
        child_kind = KIND_SERVICE;
    } else {
        return KOP_CHILD_ABSENT;
    }
    char uid[128];
    int r = kop_store_controller_uid(cl->store, meta_kind, ns, name, uid, sizeof(uid));
    if (r == -ENOENT)
        r = kop_store_controller_uid(cl->store, child_kind, ns, name, uid, sizeof(uid));
    if (r == -ENOENT)
        return KOP_CHILD_ABSENT;
    if (r < 0)
        uid[0] = '\0';
    if (ret_controller_uid && uid_size)
        snprintf(ret_controller_uid, uid_size, "%s", uid);
    return KOP_CHILD_PRESENT;
}

enum kop_child_lookup kop_controller_child_lookup(void *userdata, const char *kind, const char *ns,
                                                  const char *name, char *ret_controller_uid,
                                                  size_t uid_size)
{
    struct kop_controller *c = userdata;
    assert(c);
    return kop_controller_cluster_child_lookup(c->local, kind, ns, name, ret_controller_uid,
                                               uid_size);
}
