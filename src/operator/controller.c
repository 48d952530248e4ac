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

struct kop_controller {
    /* MyResources in the CRD's storage version (v1 or v2), so the
     * apiserver never calls the conversion webhook for kop's list/watch. */
    struct kop_resource res_myr;
    enum kop_myresource_version myr_version;
    struct kop_client *client;  /* informers */
    struct kop_client *rclient; /* reconciles (abortable on lease loss) */
    int64_t drain_ms;
    struct kop_store *store;
    struct kop_events *events;
    char *namespace; /* NULL: all */
    int64_t sync_period_ms;
    bool leading;
    /* Sharding (kop_controller_options): NULL when off. */
    char *shard_key, *shard_value, *child_selector;
    int64_t (*gate)(void *, struct kop_client *, const char *, const json_t *);
    void *gate_ud;

    struct kop_workqueue *queue;
    struct kop_workers *workers;
    struct kop_informer *inf_myr, *inf_deploy, *inf_svc;
    /* Rule 4: metadata of the Deployments and Services not managed by kop
     * (kop's own are in inf_deploy / inf_svc, never held twice). */
    struct kop_informer *inf_deploy_meta, *inf_svc_meta;

    pthread_t resync;
    bool resync_started;
    pthread_mutex_t resync_lock;
    pthread_cond_t resync_cond;
    bool resync_stop;
    bool stopped;
};

/* ---- event handlers -------------------------------------------------------------- */

static void enqueue(struct kop_controller *c, const char *ns, const char *name)
{
    char key[512];
    if (!ns || !name)
        return;
    int n = snprintf(key, sizeof(key), "%s/%s", ns, name);
    if (n < 0 || (size_t)n >= sizeof(key))
        return;
    kop_workqueue_add(c->queue, key);
}

static void enqueue_self(struct kop_controller *c, const json_t *obj)
{
    enqueue(c, kop_json_path_str(obj, "metadata.namespace"),
            kop_json_path_str(obj, "metadata.name"));
}

static void enqueue_owner(struct kop_controller *c, const json_t *child)
{
    enqueue(c, kop_json_path_str(child, "metadata.namespace"), kop_reconciler_owner_name(child));
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

static json_t *log_fields(const struct rec *r)
{
    return json_pack("{s:s, s:{s:s, s:s}, s:s}", "controller", KOP_CONTROLLER_NAME, "MyResource",
                     "name", r->name, "namespace", r->ns, "reconcileID", r->reconcile_id);
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
        kop_events_recordf(r->c->events, &r->ref, KOP_EVENT_WARNING, reason, "%s: %s", what, msg);
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
        int e = kop_client_get(r->c->rclient, &r->c->res_myr, r->ns, r->name, &st, &obj);
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
    struct kop_controller *c = r->c;
    struct kop_api_status st;
    char what[384];
    memset(&st, 0, sizeof(st));
    snprintf(what, sizeof(what), "creating %s %s/%s", kname, r->ns, r->name);
    int e = kop_client_create(c->rclient, res, r->ns, desired, &st, live);
    if (e == 0) {
        log_rec(r, KOP_LOG_INFO, "created child",
                json_pack("{s:s, s:s}", "kind", kname, "name", r->name));
        kop_events_recordf(c->events, &r->ref, KOP_EVENT_NORMAL, "Created", "Created %s %s/%s",
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
    e = kop_client_get(c->rclient, res, r->ns, r->name, &st, live);
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
    live = kop_store_get(c->store, kname, r->ns, r->name);
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
        kop_events_recordf(c->events, &r->ref, KOP_EVENT_WARNING, "OwnershipConflict",
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
    e = kop_client_patch(c->rclient, res, r->ns, r->name, patch, &st, &updated);
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
    kop_events_recordf(c->events, &r->ref, KOP_EVENT_NORMAL, "Updated", "Updated %s %s/%s", kname,
                       r->ns, r->name);
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
        kop_client_patch_status(r->c->rclient, &r->c->res_myr, r->ns, r->name, patch, &st, NULL);
    if (e == 0) {
        log_rec(r, KOP_LOG_DEBUG, "status updated", json_pack("{s:O}", "status", status));
    } else if (e != -ENOENT || kop_store_exists(r->c->store, KIND_MYR, r->ns, r->name)) {
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

static struct kop_reconcile_result reconcile_key(struct kop_controller *c, const char *key,
                                                 const char *reconcile_id)
{
    char ns[256], name[256];
    const char *slash = strchr(key, '/');
    struct rec r;
    memset(&r, 0, sizeof(r));
    r.c = c;
    r.reconcile_id = reconcile_id;
    if (!slash || (size_t)(slash - key) >= sizeof(ns) || strlen(slash + 1) >= sizeof(name))
        return r.result; /* not a key this controller makes */
    memcpy(ns, key, (size_t)(slash - key));
    ns[slash - key] = '\0';
    snprintf(name, sizeof(name), "%s", slash + 1);
    r.ns = ns;
    r.name = name;

    json_t *obj = kop_store_get(c->store, KIND_MYR, ns, name);
    json_t *old_status = NULL;
    if (!obj) {
        if (c->gate)
            (void)c->gate(c->gate_ud, c->rclient, key, NULL);
        log_rec(&r, KOP_LOG_DEBUG, "MyResource not found; nothing to do", NULL);
        return r.result;
    }
    if (kop_json_path(obj, "metadata.deletionTimestamp")) {
        log_rec(&r, KOP_LOG_DEBUG, "MyResource is being deleted; nothing to do", NULL);
        goto out;
    }
    int64_t gated = c->gate ? c->gate(c->gate_ud, c->rclient, key, obj) : 0;
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
        kop_events_record(c->events, &r.ref, KOP_EVENT_WARNING, "InvalidSpec", r.error_message);
        r.deployment = kop_store_get(c->store, KIND_DEPLOYMENT, ns, name);
        write_status(&r, old_status, generation, NULL);
        goto out;
    }
    if (spec.paused) {
        r.deployment = kop_store_get(c->store, KIND_DEPLOYMENT, ns, name);
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
static struct kop_reconcile_result reconcile(void *ud, const char *key, const char *reconcile_id)
{
    struct kop_span *span = kop_span_start("reconcile", KOP_SPAN_INTERNAL, NULL);
    struct kop_trace_ctx prev = kop_trace_set_current(span ? &span->ctx : NULL);
    struct kop_reconcile_result res = reconcile_key(ud, key, reconcile_id);
    unsigned calls = kop_trace_current_children();
    kop_trace_set_current(&prev);
    if (span && calls == 0 && res.error == 0) {
        kop_span_free(span);
        return res;
    }
    if (!span)
        return res;
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
    return res;
}

/* ---- resync ------------------------------------------------------------------------- */

static void resync_all(struct kop_controller *c)
{
    json_t *keys = kop_store_keys(c->store, KIND_MYR, c->namespace);
    const char *k;
    json_t *v;
    size_t plen = strlen(KIND_MYR "/");
    size_t n = 0;
    json_object_foreach(keys, k, v)
    {
        if (strncmp(k, KIND_MYR "/", plen) == 0 && kop_workqueue_add(c->queue, k + plen) == 0)
            n++;
    }
    json_decref(keys);
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

/* ---- lifecycle ------------------------------------------------------------------------ */

enum inf_role { ROLE_MYR, ROLE_CHILD, ROLE_META };

static int informer(struct kop_controller *c, const struct kop_resource *res, const char *kind,
                    const char *selector, enum inf_role role, struct kop_informer **ret)
{
    struct kop_informer_options o = {
        .client = c->client,
        .store = c->store,
        .resource = *res,
        .kind = kind,
        .namespace = c->namespace,
        .label_selector = selector,
        .on_add = role == ROLE_CHILD ? on_child_add : on_myr_add,
        .on_update = role == ROLE_CHILD ? on_child_update : on_myr_update,
        .on_delete = role == ROLE_CHILD ? on_child_add : on_myr_add,
        .ud = c,
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
    return kop_informer_new(&o, ret);
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
    c->client = opt->client;
    c->rclient = opt->reconcile_client ? opt->reconcile_client : opt->client;
    c->drain_ms = opt->lost_lease_drain_ms;
    c->store = opt->store;
    c->events = opt->events;
    c->sync_period_ms = opt->sync_period_ms > 0 ? opt->sync_period_ms : DEFAULT_SYNC_PERIOD_MS;
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
    if (opt->namespace && *opt->namespace) {
        c->namespace = strdup(opt->namespace);
        if (!c->namespace)
            goto fail;
    }
    if (opt->shard_selector) {
        const char *eq = strchr(opt->shard_selector, '=');
        if (!eq) {
            r = -EINVAL;
            goto fail;
        }
        c->shard_key = strndup(opt->shard_selector, (size_t)(eq - opt->shard_selector));
        c->shard_value = strdup(eq + 1);
        size_t n = strlen(KOP_RECONCILER_CHILD_SELECTOR) + strlen(opt->shard_selector) + 2;
        c->child_selector = malloc(n);
        if (c->child_selector)
            snprintf(c->child_selector, n, "%s,%s", KOP_RECONCILER_CHILD_SELECTOR,
                     opt->shard_selector);
        if (!c->shard_key || !c->shard_value || !c->child_selector) {
            r = -ENOMEM;
            goto fail;
        }
    }
    const struct kop_workqueue_options qo = {
        .name = KOP_CONTROLLER_NAME,
        .metrics = opt->metrics,
    };
    r = kop_workqueue_new(&qo, &c->queue);
    if (r < 0)
        goto fail;
    const struct kop_workers_options wo = {
        .controller = KOP_CONTROLLER_NAME,
        .max_concurrent = opt->max_concurrent > 0 ? opt->max_concurrent : 1,
        .queue = c->queue,
        .reconcile = reconcile,
        .ud = c,
        .metrics = opt->metrics,
    };
    r = kop_workers_new(&wo, &c->workers);
    if (r < 0)
        goto fail;
    const char *child_sel = c->child_selector ? c->child_selector : KOP_RECONCILER_CHILD_SELECTOR;
    r = informer(c, &c->res_myr, KIND_MYR, opt->shard_selector, ROLE_MYR, &c->inf_myr);
    if (r == 0)
        r = informer(c, &res_deploy, KIND_DEPLOYMENT, child_sel, ROLE_CHILD, &c->inf_deploy);
    if (r == 0)
        r = informer(c, &res_svc, KIND_SERVICE, child_sel, ROLE_CHILD, &c->inf_svc);
    if (r == 0)
        r = informer(c, &res_deploy, KIND_DEPLOYMENT_META, KOP_RECONCILER_FOREIGN_SELECTOR,
                     ROLE_META, &c->inf_deploy_meta);
    if (r == 0)
        r = informer(c, &res_svc, KIND_SERVICE_META, KOP_RECONCILER_FOREIGN_SELECTOR, ROLE_META,
                     &c->inf_svc_meta);
    if (r < 0)
        goto fail;
    *ret = c;
    return 0;
fail:
    kop_controller_free(c);
    return r;
}

int kop_controller_start(struct kop_controller *c)
{
    int r = kop_informer_start(c->inf_deploy);
    if (r == 0)
        r = kop_informer_start(c->inf_svc);
    if (r == 0)
        r = kop_informer_start(c->inf_deploy_meta);
    if (r == 0)
        r = kop_informer_start(c->inf_svc_meta);
    if (r == 0)
        r = kop_informer_start(c->inf_myr);
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
                json_pack("{s:s, s:s?, s:b, s:I}", "controller", KOP_CONTROLLER_NAME, "namespace",
                          c->namespace, "leading", c->leading, "syncPeriodMs",
                          (json_int_t)c->sync_period_ms));
    return r;
}

void kop_controller_set_leading(struct kop_controller *c, bool leading)
{
    assert(c);
    if (leading) {
        kop_client_abort_reset(c->rclient);
        kop_workers_resume(c->workers);
        return;
    }
    /* Losing the lease stops reconciling at once: no key is handed out from
     * now on, the requests of reconciles in flight are aborted (a write the
     * partition delayed must not land after the next leader started), and
     * the elector's thread waits for them, bounded by the time left before
     * another replica can take the lease. */
    kop_client_abort(c->rclient);
    if (kop_workers_pause(c->workers, c->drain_ms > 0 ? c->drain_ms : 0) < 0 && c->drain_ms > 0)
        kop_log(KOP_LOG_WARN, "controller", "reconciles still running after losing the lease",
                json_pack("{s:I}", "waitedMs", (json_int_t)c->drain_ms));
    kop_client_abort_reset(c->rclient);
}

bool kop_controller_synced(struct kop_controller *c)
{
    return c && kop_informer_has_synced(c->inf_myr) && kop_informer_has_synced(c->inf_deploy) &&
           kop_informer_has_synced(c->inf_svc) && kop_informer_has_synced(c->inf_deploy_meta) &&
           kop_informer_has_synced(c->inf_svc_meta);
}

int kop_controller_wait_synced(struct kop_controller *c, int64_t timeout_ms)
{
    int64_t deadline = kop_clock_now_ns() + timeout_ms * KOP_NSEC_PER_MSEC;
    struct kop_informer *infs[] = {c->inf_myr, c->inf_deploy, c->inf_svc, c->inf_deploy_meta,
                                   c->inf_svc_meta};
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
    if (c->stopped)
        return 0;
    c->stopped = true;
    /* 1. no new keys: informers stop, the resync timer stops */
    kop_informer_stop(c->inf_myr);
    kop_informer_stop(c->inf_deploy);
    kop_informer_stop(c->inf_svc);
    kop_informer_stop(c->inf_deploy_meta);
    kop_informer_stop(c->inf_svc_meta);
    if (c->resync_started) {
        pthread_mutex_lock(&c->resync_lock);
        c->resync_stop = true;
        pthread_cond_broadcast(&c->resync_cond);
        pthread_mutex_unlock(&c->resync_lock);
        pthread_join(c->resync, NULL);
        c->resync_started = false;
    }
    /* 2. the queue shuts down, reconciles in flight finish */
    int r = kop_workers_stop(c->workers, timeout_ms);
    kop_log(KOP_LOG_INFO, LOGGER, "controller stopped",
            json_pack("{s:s, s:b}", "controller", KOP_CONTROLLER_NAME, "drained", r == 0));
    return r;
}

void kop_controller_free(struct kop_controller *c)
{
    if (!c)
        return;
    kop_controller_stop(c, -1);
    kop_informer_free(c->inf_myr);
    kop_informer_free(c->inf_deploy);
    kop_informer_free(c->inf_svc);
    kop_informer_free(c->inf_deploy_meta);
    kop_informer_free(c->inf_svc_meta);
    kop_workers_free(c->workers);
    kop_workqueue_free(c->queue);
    pthread_cond_destroy(&c->resync_cond);
    pthread_mutex_destroy(&c->resync_lock);
    free(c->namespace);
    free(c->shard_key);
    free(c->shard_value);
    free(c->child_selector);
    free(c);
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
enum kop_child_lookup kop_controller_child_lookup(void *userdata, const char *kind, const char *ns,
                                                  const char *name, char *ret_controller_uid,
                                                  size_t uid_size)
{
    struct kop_controller *c = userdata;
    assert(c);
    if (!kop_informer_has_synced(c->inf_deploy_meta) || !kop_informer_has_synced(c->inf_svc_meta) ||
        !kop_informer_has_synced(c->inf_deploy) || !kop_informer_has_synced(c->inf_svc))
        return KOP_CHILD_NOT_SYNCED;
    if (!kind || !ns || !name)
        return KOP_CHILD_ABSENT;
    if (c->namespace && strcmp(c->namespace, ns) != 0)
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
    int r = kop_store_controller_uid(c->store, meta_kind, ns, name, uid, sizeof(uid));
    if (r == -ENOENT)
        r = kop_store_controller_uid(c->store, child_kind, ns, name, uid, sizeof(uid));
    if (r == -ENOENT)
        return KOP_CHILD_ABSENT;
    if (r < 0)
        uid[0] = '\0';
    if (ret_controller_uid && uid_size)
        snprintf(ret_controller_uid, uid_size, "%s", uid);
    return KOP_CHILD_PRESENT;
}
