/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator manager: one object that owns everything kop runs for a
 * parsed configuration (like controller-runtime's Manager): the API
 * clients, the store, the event recorder, the controller and the leader
 * elector (unless --webhook-only); the probe and metrics servers; the
 * webhook server (unless --controller-only) with admission rule 4 reading
 * the controller's store; --self-signed-certs. main() is flags -> new ->
 * start -> signal -> shutdown -> free.
 *
 * The start order and the shutdown order are written once, in the comment
 * block at the top of src/operator/manager.c (docs/architecture.md §6, §7).
 *
 * The manager needs the process-wide setup done first (docs/architecture.md
 * §3.3): curl_global_init, and the metrics registry kop_metrics_global().
 * It logs start-up and shutdown errors itself (logger "setup"), as main()
 * did, and returns what went wrong.
 *
 * Thread-safety: new, start, shutdown, free, leading and the port
 * accessors from one thread; ready and unready from any thread. The step
 * observer runs on the thread that calls start or shutdown.
 */
#ifndef KOP_MANAGER_H
#define KOP_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "kop/config.h"

struct kop_manager;

/*
 * Create what runs before anything starts (the start steps "reconciler"
 * and "readiness checks", src/operator/manager.c): with the reconciler
 * (not --webhook-only) the API server configuration, the token bucket, the
 * clients, the store, the event recorder, the controller (informers,
 * queue, workers: created, not started) and, with --leader-elect, the
 * elector. cfg is borrowed and must outlive the manager. Logs what failed.
 * Returns 0, or a negative errno (-ENOENT: no API server configuration,
 * -EINVAL: leader election without a namespace or with durations that
 * break lease > renew > 1.2 * retry > 0,
 * -ENOMEM, ...); *ret on success.
 */
int kop_manager_new(const struct kop_config *cfg, struct kop_manager **ret);

/*
 * Start in order: with --otlp-endpoint the span exporter, the metrics and
 * probe servers, the serving pair of --self-signed-certs, the webhook
 * server, the caBundles of --self-signed-certs, the controller, the
 * elector. Logs what failed.
 * Returns 0 or the negative errno of the step that failed (-EADDRINUSE,
 * -ENOENT: no certificate in --cert-dir, ...; then call kop_manager_free,
 * which stops what started, without grace). -EALREADY when called twice.
 */
int kop_manager_start(struct kop_manager *m);

/*
 * The graceful shutdown order, each step bounded by what is left of
 * timeout_ms (main passes --shutdown-delay plus --shutdown-timeout: the
 * delay, when the webhook runs, is the first part of it); everything is stopped when it returns
 * (free releases the memory). Returns 0, or -ETIMEDOUT when in-flight webhook requests were cut
 * short or the time ran out (logged "shutdown timed out"): not a clean
 * stop. A second call returns 0 and does nothing.
 */
int kop_manager_shutdown(struct kop_manager *m, int64_t timeout_ms);

/*
 * The shutdown step "readyz" on its own: /readyz fails from now on, and with
 * --leader-elect a replica that does not lead stops competing for the
 * Lease (one that leads keeps it until the shutdown releases it). main
 * calls it as soon as the signal came, before it logs "shutting down", so
 * that nobody who saw the line can still find the replica ready;
 * kop_manager_shutdown takes the step too. NULL-safe.
 */
void kop_manager_unready(struct kop_manager *m);

/* Stop what still runs without grace (no drain, no event flush, the lease
 * not released), then free. NULL-safe. */
void kop_manager_free(struct kop_manager *m);

/* What /readyz answers: not shutting down, and every readiness check
 * passes ("webhook" and "informers-synced", as configured). */
bool kop_manager_ready(struct kop_manager *m);

/* This replica holds the Lease (false without --leader-elect). */
bool kop_manager_leading(const struct kop_manager *m);

/* Bound ports once started; 0 when that server does not run. */
uint16_t kop_manager_webhook_port(const struct kop_manager *m);
uint16_t kop_manager_metrics_port(const struct kop_manager *m);
uint16_t kop_manager_health_port(const struct kop_manager *m);

/*
 * Called before each step of start and shutdown with the step's name, in
 * the order taken. Start: "probes", "self-signed-certs", "webhook",
 * "ca-bundles", "controller", "sharding" (--sharding), "leader-election".
 * Shutdown: "readyz", "delay" (--shutdown-delay > 0 with a webhook server),
 * "webhook", "controller", "events", "lease", "free", "probes". A step that
 * the configuration leaves out is not reported. For tests and tracing; set
 * before start.
 */
typedef void kop_manager_step_fn(void *userdata, const char *step);
void kop_manager_set_step_observer(struct kop_manager *m, kop_manager_step_fn *fn, void *userdata);

#endif /* KOP_MANAGER_H */
