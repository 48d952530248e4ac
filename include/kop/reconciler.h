/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure part of the MyResource reconciler (docs/reconcile.md §2-§5): what the
 * Deployment and Service of a MyResource should look like, which writes
 * bring a live child there, and the status the MyResource should carry.
 * Nothing here touches the network, a clock or a lock; the controller
 * (kop/controller.h) feeds it objects from the store and writes the
 * results.
 *
 * Ownership of fields. kop owns, and compares, only these fields:
 *
 *   both children  metadata.labels app.kubernetes.io/{name,instance,
 *                  managed-by} (other labels are left alone);
 *                  metadata.ownerReferences: set on create only; a child
 *                  whose controller reference is not this MyResource is
 *                  never written (see kop_reconciler_controlled_by)
 *   Deployment     spec.replicas; spec.selector.matchLabels (exactly the
 *                  two selector labels); spec.template.metadata.labels
 *                  (the three labels, others left alone);
 *                  spec.template.spec.containers (see below)
 *   Service        spec.type; spec.selector (exactly the two selector
 *                  labels); spec.ports (see below)
 *
 * Lists. A JSON merge patch replaces a list wholesale, so lists are
 * compared on their owned subset (same length, same order, and every
 * member kop sets equal in the live element; members the apiserver or
 * others added, such as imagePullPolicy, terminationMessagePath or
 * nodePort, are ignored) and only when that subset differs is the whole
 * list sent:
 *   - containers: kop owns the list. It is written as exactly one
 *     container "app" with image and ports {containerPort, name,
 *     protocol}; fields others put on the container are dropped on such a
 *     rewrite (the apiserver re-applies its defaults). While the owned
 *     subset matches, nothing is written and those fields stay.
 *   - Service ports: written as {name, port, targetPort: <name>,
 *     protocol}; for NodePort and LoadBalancer Services the nodePort the
 *     apiserver allocated is copied from the live port of the same name,
 *     so a rewrite never reshuffles node ports.
 * Everything else (clusterIP, annotations, strategy, defaults) is never
 * part of a patch, so a converged child costs zero writes.
 *
 * Status (written in v1 shape: observedGeneration, replicas,
 * readyReplicas, conditions) has four metav1.Conditions, in this order:
 *   Available    True when the Deployment exists and readyReplicas >=
 *                its spec.replicas (MinimumReplicasAvailable); False
 *                otherwise (DeploymentNotFound / ReplicasNotReady).
 *   Progressing  True while the Deployment is rolling out (Creating /
 *                RolloutInProgress); False when the rollout is complete
 *                (RolloutComplete), when paused (Paused) and when
 *                reconciling failed (ReconcileFailed).
 *   Degraded     True with the reason and message of the last error;
 *                False (ReconcileSucceeded) when fine.
 *   Paused       True (Paused) when spec.paused; False (Running).
 * lastTransitionTime changes only when a condition's status changes;
 * observedGeneration is the MyResource's metadata.generation.
 *
 * Thread-safety: any thread; every function works on the values passed in.
 */
#ifndef KOP_RECONCILER_H
#define KOP_RECONCILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kop/myresource.h"

#define KOP_RECONCILER_LABEL_NAME "app.kubernetes.io/name"
#define KOP_RECONCILER_LABEL_INSTANCE "app.kubernetes.io/instance"
#define KOP_RECONCILER_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define KOP_RECONCILER_NAME_VALUE "myresource"
#define KOP_RECONCILER_MANAGED_BY_VALUE "kop"
/* The label selector of the child informers. */
#define KOP_RECONCILER_CHILD_SELECTOR "app.kubernetes.io/managed-by=kop"
/* Its complement: every object the child selector leaves out, those without
 * the label included ("key!=value" matches them, as labels.Selector does in
 * k8s.io/apimachinery/pkg/labels/selector.go). The metadata informers of
 * admission rule 4. */
#define KOP_RECONCILER_FOREIGN_SELECTOR "app.kubernetes.io/managed-by!=kop"
#define KOP_RECONCILER_CONTAINER_NAME "app"

/* The MyResource a child belongs to. Strings are borrowed. */
struct kop_reconciler_owner {
    const char *namespace;
    const char *name;
    const char *uid;
};

/*
 * The desired Deployment / Service of owner with spec (a v2 spec read by
 * kop_myresource_spec_read). Complete objects, ready to be created:
 * apiVersion, kind, metadata {name, namespace, labels, ownerReferences},
 * spec. @ref new; NULL on ENOMEM.
 */
json_t *kop_reconciler_desired_deployment(const struct kop_reconciler_owner *owner,
                                          const struct kop_myresource_spec *spec);
json_t *kop_reconciler_desired_service(const struct kop_reconciler_owner *owner,
                                       const struct kop_myresource_spec *spec);

/*
 * The JSON merge patch that brings the owned fields of live to desired
 * (both @ref borrow; desired as built above). *ret_patch is @ref new, or
 * NULL when live is converged (nothing to write). Returns 0, -EINVAL
 * (live or desired not an object) or -ENOMEM.
 */
int kop_reconciler_deployment_patch(const json_t *live, const json_t *desired, json_t **ret_patch);
int kop_reconciler_service_patch(const json_t *live, const json_t *desired, json_t **ret_patch);

/* Whether child (@ref borrow) has a controller ownerReference with this
 * uid. */
bool kop_reconciler_controlled_by(const json_t *child, const char *uid);

/*
 * The name of the MyResource that controls child (@ref borrow): its
 * ownerReference with controller: true, kind MyResource and an apiVersion
 * of group mygroup.example.com. Borrowed from child; NULL when none.
 */
const char *kop_reconciler_owner_name(const json_t *child);

/* What a reconcile saw, for the status. */
struct kop_reconciler_observed {
    int64_t generation;        /* the MyResource's metadata.generation */
    int32_t spec_replicas;     /* the MyResource's spec.replicas */
    bool paused;               /* spec.paused */
    const json_t *deployment;  /* @ref borrow; the live Deployment, NULL if none */
    const char *error_reason;  /* NULL when the reconcile went fine */
    const char *error_message; /* with error_reason */
};

/*
 * The owned part of the v1 status: {observedGeneration, replicas,
 * readyReplicas, conditions}. old_status (@ref borrow, may be NULL) gives
 * the lastTransitionTime of conditions whose status did not change;
 * wall_ns (CLOCK_REALTIME) stamps the others. @ref new; NULL on ENOMEM.
 */
json_t *kop_reconciler_status(const json_t *old_status, const struct kop_reconciler_observed *obs,
                              int64_t wall_ns);

/* Whether the owned members of old_status (@ref borrow, may be NULL)
 * differ from status (@ref borrow, as built above): the status needs a
 * write. */
bool kop_reconciler_status_changed(const json_t *old_status, const json_t *status);

#endif /* KOP_RECONCILER_H */
