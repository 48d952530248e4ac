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
 * while leading (kop_controller_set_leading), in every cluster.
 *
 * Clusters (docs/reconcile.md §14): the controller reconciles the local
 * cluster (the one of kop_controller_options, named
 * KOP_CONTROLLER_LOCAL_CLUSTER) and the members added with
 * kop_controller_add_cluster before start. Each cluster is a unit of its
 * own: its clients (and so its token bucket), store, event recorder, the
 * five informers above, and a prober thread that GETs /version every 2 s
 * through its probe client; a MyResource's children, status and Events are
 * written in the MyResource's own cluster. One work queue and one worker
 * pool serve them all: keys are "ns/name" in the local cluster and
 * "NAME/ns/name" in member NAME; the queue serves the clusters round robin
 * and hands at most max_concurrent keys of one cluster to the workers at
 * once, and the pool has max_concurrent threads per cluster, so a cluster
 * whose API server hangs holds only its own share and every other cluster
 * keeps all of its own. A cluster is ready (kop_cluster_ready{cluster})
 * while its informers have synced and its last probe was answered; a log
 * line marks every change, and a cluster that becomes ready again has all
 * its MyResources queued (their backoff may have grown while it was away).
 * Readiness of kop (/readyz) looks at the local cluster only.
 *
 * Thread-safety: new/start/stop/free from one thread, add/remove_cluster
 * from one thread (not concurrently with free); set_leading, the synced
 * and ready checks, kop_controller_cluster(_put) and the child lookups
 * from any thread.
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
/* The local cluster's name (the cluster label of its metrics); no member
 * may take it (KOP_CONFIG_LOCAL_CLUSTER is the same). */
#define KOP_CONTROLLER_LOCAL_CLUSTER "local"

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
    /* The local cluster's reachability probe (kop_client_options with short
     * timeouts, no token bucket); NULL: its state follows its informers. */
    struct kop_client *probe_client;
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

/* A member cluster. Everything is borrowed and must outlive the
 * controller. */
struct kop_controller_cluster_options {
    const char *name;                    /* a DNS label, not the local one; required */
    struct kop_client *client;           /* informers; required */
    struct kop_client *reconcile_client; /* abortable, as the local one's; NULL: client */
    struct kop_client *probe_client;     /* NULL: no probe */
    struct kop_store *store;             /* its own; required */
    struct kop_events *events;           /* its own; NULL: no events */
};

/* Add a member, before kop_controller_start or while the controller runs
 * (then its informers and prober start at once and the pool grows by its
 * share; log line "cluster engaged"). Returns 0, -EINVAL (a bad or the
 * local name), -EEXIST (a name taken), -EBUSY (sharding: for the local
 * cluster only), -ESHUTDOWN (stopped), -ENOMEM, or the error of a piece
 * it starts. From one thread at a time with remove_cluster. */
int kop_controller_add_cluster(struct kop_controller *c,
                               const struct kop_controller_cluster_options *opt);

/* Disengage member name: lookups (keys, webhook paths) stop finding it at
 * once, its informers and prober stop, its reconciles' requests are
 * aborted and waited for (close its token bucket first: a request
 * waiting there ends only when its slot comes), its keys are dropped from
 * the queue, its kop_cluster_* series removed and the pool shrinks by its
 * share. After it returns nothing of the controller uses the member's
 * clients, store or recorder. Returns 0 or -ENOENT. */
int kop_controller_remove_cluster(struct kop_controller *c, const char *name);

/* The queue key of ns/name in cluster (NULL or the local name: "ns/name",
 * else "cluster/ns/name") into buf. Returns 0 or -ENOSPC. */
int kop_controller_key(const char *cluster, const char *ns, const char *name, char *buf,
                       size_t len);

/* The cluster's last verdict (see the top of this header): ready or not;
 * false for a name the controller does not have. */
bool kop_controller_cluster_ready(struct kop_controller *c, const char *name);

/* The handle of cluster name (the local one's name included) for
 * kop_controller_cluster_child_lookup, NULL for a name the controller
 * does not have. It holds the cluster (a remove_cluster waits for it):
 * release it with kop_controller_cluster_put soon. */
void *kop_controller_cluster(struct kop_controller *c, const char *name);
void kop_controller_cluster_put(void *handle);

/* Start the informers, the resync timer and the workers. Returns 0 or a
 * negative errno (then call kop_controller_free). */
int kop_controller_start(struct kop_controller *c);

/* Workers hand out keys (true), or stop doing so (false): then requests
 * of reconciles in flight are aborted (an abortable reconcile_client) and
 * the call waits up to lost_lease_drain_ms for them to return, so no write
 * of this replica lands after another one may have taken the lease. For
 * leader election. */
void kop_controller_set_leading(struct kop_controller *c, bool leading);

/* Every informer (the two metadata ones included) of the local cluster
 * has listed once (/readyz "informers-synced"). NULL is fine (a check whose controller
 * is gone): false. */
bool kop_controller_synced(struct kop_controller *c);

/* Wait for kop_controller_synced (the local cluster). Returns 0, -ETIMEDOUT or -ECANCELED. */
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

/* The same for one cluster: userdata is kop_controller_cluster()'s handle,
 * and the caches read are that cluster's. */
enum kop_child_lookup kop_controller_cluster_child_lookup(void *userdata, const char *kind,
                                                          const char *ns, const char *name,
                                                          char *ret_controller_uid,
                                                          size_t uid_size);

#endif /* KOP_CONTROLLER_H */
