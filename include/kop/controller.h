/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MyResource controller: informers, work queue, worker pool, periodic
 * resync and the reconcile function that drives the pure reconciler
 * (kop/reconciler.h) against the API server (docs/reconcile.md §10).
 *
 * Informers (all on the shared store, limited to --namespace when set):
 *   mygroup.example.com/v1 myresources   store kind "MyResource"
 *   apps/v1 deployments                  store kind "Deployment"
 *   core/v1 services                     store kind "Service"
 * the two child informers with labelSelector app.kubernetes.io/managed-by=kop.
 * A MyResource event enqueues "ns/name"; a child event enqueues the
 * MyResource named by its controller ownerReference (kind MyResource,
 * group mygroup.example.com).
 * For admission rule 4, two more informers see the Deployments and
 * Services the child informers leave out (labelSelector
 * app.kubernetes.io/managed-by!=kop, which objects without the label match
 * too), metadata only (PartialObjectMetadata lists and watches), each
 * object cut down by an informer transform to
 *   {apiVersion, kind, metadata: {name, namespace, uid, resourceVersion,
 *    ownerReferences: [the controller reference only]}}
 * under the store kinds "Deployment.meta" and "Service.meta"; they have
 * no handlers and never enqueue a reconcile. The reconciler still works
 * only on the labelled, full objects.
 *
 * One reconcile of "ns/name" (a worker thread):
 *   1. read the MyResource from the store (absent or being deleted: done;
 *      garbage collection removes the children through their
 *      ownerReferences, so there is no finalizer), convert a private copy
 *      to v2 and read its spec;
 *   2. unless paused, for the Deployment then the Service: absent from the
 *      store -> create (AlreadyExists -> GET it, go on with what is
 *      there, and requeue); present but not controlled by this MyResource
 *      -> leave it, Degraded (OwnershipConflict), Warning event; else
 *      merge-patch the owned fields that differ (none: no write);
 *   3. compute the status and merge-patch /status only when it changed.
 * Errors: 409 Conflict -> requeue with the per-key backoff; 429 / 5xx ->
 * requeue after Retry-After (per-key backoff when none); anything else ->
 * rate-limited requeue and the Degraded condition with a Warning event.
 * Events: Created / Updated (Normal) per child write, CreateFailed /
 * UpdateFailed / OwnershipConflict (Warning); the recorder deduplicates.
 * Every reconcile logs with "MyResource":{"name","namespace"} and
 * "reconcileID"; writes at info, the rest at debug.
 *
 * Leadership: informers (and so the store the admission webhook reads)
 * run whether or not this replica leads; the workers hand out keys only
 * while leading (kop_controller_set_leading).
 *
 * Thread-safety: new/start/stop/free from one thread; set_leading, the
 * synced checks and kop_controller_child_lookup from any thread.
 */
#ifndef KOP_CONTROLLER_H
#define KOP_CONTROLLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kop/admission.h"
#include "kop/myresource.h"

struct kop_client;
struct kop_events;
struct kop_metrics;
struct kop_store;
struct kop_controller;

#define KOP_CONTROLLER_NAME "myresource"

struct kop_controller_options {
    struct kop_client *client;   /* borrowed; required */
    struct kop_store *store;     /* borrowed; required */
    struct kop_events *events;   /* borrowed; NULL: no events */
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
    const char *namespace;       /* --namespace; NULL or "": all namespaces */
    int max_concurrent;          /* --max-concurrent-reconciles; <= 0: 1 */
    int64_t sync_period_ms;      /* --sync-period; <= 0: 10 h */
    bool leading;                /* hand out keys from the start */
    /* The reconciler's writes go through this client (NULL: client). When
     * it is abortable (kop_client_options.abortable), losing the lease
     * aborts the requests of reconciles in flight. */
    struct kop_client *reconcile_client;
    /* On losing the lease, how long to wait for reconciles in flight to end
     * (lease duration minus renew deadline: before another replica can take
     * the lease); <= 0: do not wait. */
    int64_t lost_lease_drain_ms;
    /* The MyResource version to list, watch and write status in: the CRD's
     * storage version, so kop's own requests never go through the
     * conversion webhook (--storage-version). UNKNOWN (0): v1. */
    enum kop_myresource_version myresource_version;
    /* Sharding (NULL: off; kop/sharder.h): the MyResource informer selects
     * shard_selector ("label=value"), the child informers add it to theirs,
     * the label is copied from the MyResource onto its children, and gate
     * (ud gate_ud) is asked before each reconcile of "ns/name" (key) with
     * the cached MyResource (obj, @ref borrow): 0 reconcile, < 0 skip, > 0
     * skip and requeue after that many nanoseconds. When the object is no
     * longer in the cache, gate is called with obj NULL (result unused). */
    const char *shard_selector;
    int64_t (*gate)(void *gate_ud, struct kop_client *client, const char *key, const json_t *obj);
    void *gate_ud;
};

/* Returns 0, -EINVAL (a shard selector without '='), -ENOMEM, or the
 * error of a piece it creates; *ret on success. Nothing runs yet. */
int kop_controller_new(const struct kop_controller_options *opt, struct kop_controller **ret);

/* Start the informers, the resync timer and the workers. Returns 0 or a
 * negative errno (then call kop_controller_free). */
int kop_controller_start(struct kop_controller *c);

/* Workers hand out keys (true), or stop doing so (false): then requests
 * of reconciles in flight are aborted (an abortable reconcile_client) and
 * the call waits up to lost_lease_drain_ms for them to return, so no write
 * of this replica lands after another one may have taken the lease. For
 * leader election. */
void kop_controller_set_leading(struct kop_controller *c, bool leading);

/* Every informer (the two metadata ones included) has listed once
 * (/readyz "informers-synced"). NULL is fine (a check whose controller
 * is gone): false. */
bool kop_controller_synced(struct kop_controller *c);

/* Wait for kop_controller_synced. Returns 0, -ETIMEDOUT or -ECANCELED. */
int kop_controller_wait_synced(struct kop_controller *c, int64_t timeout_ms);

/*
 * Stop in the shutdown order: informers stop (no new keys), the resync
 * timer stops, the queue shuts down and reconciles in flight get up to
 * timeout_ms. Returns 0 or -ETIMEDOUT. Idempotent.
 */
int kop_controller_stop(struct kop_controller *c, int64_t timeout_ms);

/* Stops if needed. NULL-safe. */
void kop_controller_free(struct kop_controller *c);

/*
 * Admission rule 4 from the store (kop_admission_child_lookup_fn;
 * userdata is the controller), read from the metadata entries of the
 * objects not managed by kop ("Deployment.meta" / "Service.meta", selector
 * KOP_RECONCILER_FOREIGN_SELECTOR), then from the child informers' entries
 * (kop's children; with sharding only this replica's share, so a kop child
 * of another replica's share is ABSENT): KOP_CHILD_NOT_SYNCED until the
 * four informers synced, and for namespaces outside --namespace; else
 * ABSENT, or PRESENT with the uid of the controller ownerReference (""
 * when none). No API call, no decode (hash lookups under the store's read
 * lock).
 */
enum kop_child_lookup kop_controller_child_lookup(void *userdata, const char *kind, const char *ns,
                                                  const char *name, char *ret_controller_uid,
                                                  size_t uid_size);

#endif /* KOP_CONTROLLER_H */
