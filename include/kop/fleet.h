/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The member clusters (docs/reconcile.md §14): for each one its
 * configuration, token bucket (--kube-api-qps/--kube-api-burst apply per
 * cluster), clients, store and event recorder, engaged in the controller
 * (kop/controller.h) that borrows them.
 *
 * Members come from
 *  - --cluster NAME=KUBECONFIG: read by kop_fleet_new (as --kubeconfig is
 *    read) and engaged before the controller starts; a bad one fails the
 *    start;
 *  - with --cluster-secrets, the Secrets of kop's namespace labelled
 *    kop.io/cluster=NAME with a kubeconfig under the data key
 *    "kubeconfig", watched from kop_fleet_start: a Secret created engages
 *    NAME, a change of its kubeconfig re-engages it (disengage, then engage
 *    with the new one), a Secret deleted (or relabelled) disengages it and
 *    its informers, store, threads and memory go.
 *
 * A Secret's kubeconfig must carry its credentials inline (server,
 * certificate-authority-data, token or client-certificate-data and
 * client-key-data): one with an exec plugin, an auth-provider or a file
 * (tokenFile, certificate-authority, client-certificate, client-key) is
 * refused, since whoever writes the Secret would otherwise make kop run a
 * command or send a file of its own (its service account token) to a
 * server of their choosing. Refused Secrets, a NAME that is not a DNS
 * label, "local" or a --cluster name, and two Secrets naming one cluster
 * (the first by Secret name wins) are logged (logger "fleet") and
 * otherwise ignored until the Secret changes; every engage and disengage
 * is logged with the cluster and the Secret.
 *
 * Thread-safety: new/start/stop/free from one thread; the Secrets are
 * handled on the fleet's own thread, the only one (after start) that adds
 * and removes the controller's members.
 */
#ifndef KOP_FLEET_H
#define KOP_FLEET_H

#include <stdint.h>

struct kop_config;
struct kop_controller;
struct kop_client;
struct kop_metrics;
struct kop_fleet;

/* The label and the data key of a member's Secret. */
#define KOP_FLEET_SECRET_LABEL "kop.io/cluster"
#define KOP_FLEET_SECRET_KEY "kubeconfig"

struct kop_fleet_options {
    const struct kop_config *cfg;      /* clusters, cluster_secrets, qps, burst; required */
    struct kop_controller *controller; /* borrowed; required */
    struct kop_client *client;         /* the local cluster's, for the Secrets; required */
    const char *namespace;             /* kop's, for the Secrets; required with cluster_secrets */
    const char *user_agent;            /* of the members' clients; required */
    struct kop_metrics *metrics;       /* NULL: kop_metrics_global() */
};

struct kop_kubeconfig;

/* A cluster's reachability probe client (kop/controller.h): outside any
 * token bucket, no retries, 2 s timeouts, connection included. cluster:
 * its metrics' label (NULL: "local"). Returns kop_client_new's result. */
int kop_fleet_probe_client_new(const struct kop_kubeconfig *kc, const char *user_agent,
                               const char *cluster, struct kop_metrics *metrics,
                               struct kop_client **ret);

/* Engage every --cluster member in the (not yet started) controller.
 * Returns 0 or the error of the first member that fails (logged); *ret
 * is set in both cases (free it with kop_fleet_free). */
int kop_fleet_new(const struct kop_fleet_options *opt, struct kop_fleet **ret);

/* With --cluster-secrets, the Secrets' informer and the fleet thread.
 * Returns 0 or a negative errno. */
int kop_fleet_start(struct kop_fleet *f);

/* Stop watching Secrets (the members stay engaged). Before the
 * controller stops. NULL-safe, idempotent. */
void kop_fleet_stop(struct kop_fleet *f);

/* Shutting down out of time: close every member's token bucket and abort
 * its reconciles' requests. NULL-safe. */
void kop_fleet_cut_short(struct kop_fleet *f);

/* Flush every member's Events, each within timeout_ms. NULL-safe. */
void kop_fleet_flush_events(struct kop_fleet *f, int64_t timeout_ms);

/* Free the members. After the controller that borrows them is freed.
 * NULL-safe. */
void kop_fleet_free(struct kop_fleet *f);

#endif /* KOP_FLEET_H */
