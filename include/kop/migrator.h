/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Storage version migration for one CustomResourceDefinition (kop's
 * MyResource): when the CRD's storage version is S and status.storedVersions
 * still lists older versions, every object is moved to S, then the older
 * versions are removed from storedVersions, so they can later leave the
 * CRD. Kubernetes does not rewrite stored objects by itself.
 *
 * Two ways, chosen per run:
 *  - the storagemigration.k8s.io/v1beta1 API is served (Kubernetes 1.35
 *    with the StorageVersionMigrator feature, kube-controller-manager does
 *    the work): create a StorageVersionMigration for the resource (its name
 *    derives from the CRD's uid and generation, so a new leader finds the
 *    one its predecessor made) and follow its conditions until Succeeded;
 *    a Failed one makes kop do it itself;
 *  - otherwise kop rewrites every object with a no-op update (PUT of the
 *    object as read, so metadata.uid and metadata.resourceVersion are
 *    preconditions): the apiserver stores an object read from an older
 *    version again in S, and writes nothing for one already in S. Pages of
 *    page_size; every request waits on the client's token bucket; a 409 is
 *    retried on a fresh read, a 404 (deleted meanwhile) skipped, 5xx/429
 *    and transport errors retried with backoff. Progress (the last key done
 *    under one CRD resourceVersion) survives errors and lost leadership in
 *    the process, and restarts and leader changes through an optional
 *    checkpoint ConfigMap; without one a new leader walks the objects again
 *    (the objects already in S cost a request each, no write).
 * Then storedVersions becomes [S] through the CRD's status subresource,
 * with the CRD's resourceVersion read before the walk as a precondition:
 * if the CRD changed meanwhile (another storage flip), the run starts over.
 *
 * Progress is reported as Events on the CRD (StorageMigrationStarted,
 * ...Succeeded, ...Failed), log lines (logger "migrator") and metrics:
 *   kop_storage_migration_objects_total{result}  migrated, unchanged,
 *       skipped (deleted meanwhile), conflict (409, retried), failed
 *   kop_storage_migration_state{state}  1 for the current state: idle,
 *       running, succeeded, failed
 *
 * The migrator acts only while leading (kop_migrator_set_leading); losing
 * the lease aborts its requests at once. Every write it makes is a no-op
 * update with preconditions, so a late write of a former leader can never
 * undo a change.
 *
 * Thread-safety: new/start/stop/free from one thread; set_leading from any
 * thread (the elector's); run_once only when the thread is not started
 * (tests).
 */
#ifndef KOP_MIGRATOR_H
#define KOP_MIGRATOR_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct kop_client;
struct kop_events;
struct kop_metrics;
struct kop_migrator;

struct kop_migrator_options {
    struct kop_client *client;   /* borrowed; abortable (lost lease), shares the bucket */
    struct kop_events *events;   /* borrowed; NULL: no Events */
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
    const char *crd_name;        /* "myresources.mygroup.example.com" */
    const char *group;           /* "mygroup.example.com" */
    const char *resource;        /* "myresources" */
    long page_size;              /* objects per list page; 0: 500 */
    int64_t poll_ms;             /* StorageVersionMigration polling; 0: 2 s */
    int64_t recheck_ms;          /* CRD re-read when idle; 0: 60 s */
    /* Checkpoint ConfigMap namespace/name (written every 100 objects); NULL:
     * progress is kept in memory only. */
    const char *checkpoint_namespace;
    const char *checkpoint_name;
    bool leading; /* start as leader (no leader election) */
};

/* What a CRD asks for (kop_migrator_plan). */
struct kop_migrator_plan {
    char storage[64]; /* the storage version */
    char stale[256];  /* stored versions other than it, comma-separated ("" none) */
    char rv[32];      /* the CRD's resourceVersion */
    char uid[64];     /* its uid */
    long long generation;
};

/* Read a CRD (@ref borrow). Returns 0 (with stale "" when nothing is left
 * to migrate), -EINVAL when it names no storage version or a field does
 * not fit. */
int kop_migrator_plan(const json_t *crd, struct kop_migrator_plan *ret);

/* The StorageVersionMigration for a plan: its name (DNS subdomain, at most
 * len-1 chars) and the object to create (@ref new, NULL on ENOMEM). */
void kop_migrator_svm_name(const char *resource, const struct kop_migrator_plan *p, char *buf,
                           size_t len);
json_t *kop_migrator_svm_object(const char *name, const char *group, const char *resource);

enum kop_migrator_svm_state {
    KOP_MIGRATOR_SVM_PENDING, /* no final condition yet (Running or none) */
    KOP_MIGRATOR_SVM_SUCCEEDED,
    KOP_MIGRATOR_SVM_FAILED,
};
/* The state its conditions say (@ref borrow). */
enum kop_migrator_svm_state kop_migrator_svm_state(const json_t *svm);

/* The status patch that leaves only the storage version, with the CRD's
 * resourceVersion as precondition. @ref new, NULL on ENOMEM. */
json_t *kop_migrator_status_patch(const struct kop_migrator_plan *p);

/* Returns 0 or -ENOMEM. */
int kop_migrator_new(const struct kop_migrator_options *opt, struct kop_migrator **ret);
/* The migration thread. 0 or a negative errno. */
int kop_migrator_start(struct kop_migrator *m);
/* Leader election callbacks. Losing the lease aborts requests in flight.
 * NULL is fine (the manager without --storage-migration): no-op. */
void kop_migrator_set_leading(struct kop_migrator *m, bool leading);
/* Stop the thread (requests in flight are aborted). NULL-safe. */
void kop_migrator_stop(struct kop_migrator *m);
/* NULL-safe. */
void kop_migrator_free(struct kop_migrator *m);

/*
 * One run: read the CRD, migrate if needed, prune storedVersions. Returns
 * 0 when nothing is left to do (or it was done now), -EAGAIN when the CRD
 * changed meanwhile (run again), -ECANCELED (stopped or not leading), or
 * the error that ended it (-EPERM: RBAC, -EIO: objects left behind, ...).
 * *ret_used_api (may be NULL) tells whether a StorageVersionMigration did
 * the work.
 */
int kop_migrator_run_once(struct kop_migrator *m, bool *ret_used_api);

#endif /* KOP_MIGRATOR_H */
