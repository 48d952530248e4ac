/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop: flags -> start order -> signal wait -> shutdown order.
 *
 * Start order:
 *   1. flags (exit 2 on a bad one), logging;
 *   2. process-wide setup before any thread exists: signals blocked in
 *      every thread (main waits for them with sigwait), SIGPIPE ignored,
 *      curl_global_init, jansson's hash seed, the arena allocator hook,
 *      the metrics registry;
 *   3. when the reconciler runs (not --webhook-only): the API server
 *      configuration (--kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config),
 *      the token bucket (--kube-api-qps/--kube-api-burst), the client, the
 *      shared store, the event recorder and the controller (informers,
 *      queue, workers; created, not started);
 *   4. metrics and health-probe servers (/readyz fails until ready: checks
 *      "webhook" and "informers-synced");
 *   5. the webhook server (TLS front + HTTP), when not --controller-only,
 *      with admission rule 4 reading the controller's store; with
 *      --self-signed-certs the serving pair is generated (or reused) in
 *      --cert-dir first, and its CA is patched into the caBundles of the
 *      CRD and the ValidatingWebhookConfiguration once the server listens;
 *   6. the controller starts: informers list+watch, the resync timer, the
 *      workers. With --leader-elect the workers start paused and the
 *      elector (Lease --leader-election-id) resumes them while this
 *      replica leads and pauses them at once when the lease is lost (the
 *      replica competes again; its webhooks and informers keep running, so
 *      the webhook's store stays warm).
 *
 * Shutdown order, on SIGTERM or SIGINT, each step bounded by what is left
 * of --shutdown-timeout (a second signal, or running out of time, exits at
 * once with status 1):
 *   1. /readyz fails, so the Service stops sending new webhook calls here;
 *   2. the webhook listener stops accepting; in-flight requests are
 *      answered, idle keep-alive connections closed;
 *   3. the controller: informers stop (no new keys), the resync timer
 *      stops, the queue shuts down and reconciles in flight finish (if
 *      that runs out of time the token bucket is closed, so reconciles
 *      waiting on it fail fast);
 *   4. the event recorder sends what is queued (bounded), then stops;
 *   5. the lease is released (--leader-elect), after the last reconcile,
 *      so the next leader never overlaps with this one;
 *   6. the client and store are freed; metrics and probe servers stop;
 *   7. process-wide state is released; exit 0.
 */
#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <sys/resource.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kop/arena.h"
#include "kop/clock.h"
#include "kop/client.h"
#include "kop/config.h"
#include "kop/controller.h"
#include "kop/events.h"
#include "kop/kubeconfig.h"
#include "kop/leader.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/probes.h"
#include "kop/ratelimit.h"
#include "kop/selfsigned.h"
#include "kop/store.h"
#include "kop/webhook.h"
#include "kop_version.h"

extern char **environ;

static sigset_t stop_signals;
static int64_t shutdown_deadline_ns;

/* After the first signal: a second one, or the shutdown deadline passing,
 * ends the process at once. */
static void *second_signal_main(void *arg)
{
    (void)arg;
    for (;;) {
        int64_t left_ns = shutdown_deadline_ns - kop_clock_now_ns();
        if (left_ns <= 0) {
            kop_log(KOP_LOG_ERROR, "setup", "shutdown timed out, exiting now", NULL);
            _exit(1);
        }
        struct timespec ts = {.tv_sec = left_ns / KOP_NSEC_PER_SEC,
                              .tv_nsec = left_ns % KOP_NSEC_PER_SEC};
        int sig = sigtimedwait(&stop_signals, NULL, &ts);
        if (sig > 0) {
            kop_log(KOP_LOG_WARN, "setup", "second signal, exiting now",
                    json_pack("{s:i}", "signal", sig));
            _exit(1);
        }
    }
    return NULL;
}

static int remaining_ms(void)
{
    int64_t left = (shutdown_deadline_ns - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
    return left > 0 ? (int)left : 0;
}

/*
 * What the readiness checks look at. The probe server runs from start step 4
 * to the very end, longer than the webhook and the controller, so its checks
 * never hold their own pointers: main publishes each piece once it exists
 * and withdraws it (under ready_lock) before freeing it. A withdrawn piece
 * reads as not ready.
 */
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kop_webhook *ready_webhook;
static struct kop_controller *ready_controller;

static void publish_ready(struct kop_webhook *w, struct kop_controller *c)
{
    pthread_mutex_lock(&ready_lock);
    ready_webhook = w;
    ready_controller = c;
    pthread_mutex_unlock(&ready_lock);
}

static bool webhook_ready(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&ready_lock);
    bool ok = kop_webhook_ready(ready_webhook);
    pthread_mutex_unlock(&ready_lock);
    return ok;
}

static bool informers_synced(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&ready_lock);
    bool ok = kop_controller_synced(ready_controller);
    pthread_mutex_unlock(&ready_lock);
    return ok;
}

/* The pieces of the reconciler, created in start step 3. */
struct reconciler {
    struct kop_kubeconfig kc;
    struct kop_ratelimit *ratelimit;
    struct kop_client *client;           /* informers, events */
    struct kop_client *reconcile_client; /* reconciles: aborted when the lease is lost */
    struct kop_client *lease_client;     /* the Lease: never waits behind the bucket */
    struct kop_store *store;
    struct kop_events *events;
    struct kop_controller *controller;
    struct kop_leader *leader;
};

static void on_started_leading(void *ud)
{
    kop_log(KOP_LOG_INFO, "leader", "became leader, reconciling", NULL);
    kop_controller_set_leading(ud, true);
}

static void on_stopped_leading(void *ud)
{
    kop_log(KOP_LOG_WARN, "leader", "lost the lease, reconciling stopped", NULL);
    kop_controller_set_leading(ud, false);
}

static void on_new_leader(void *ud, const char *identity)
{
    (void)ud;
    kop_log(KOP_LOG_INFO, "leader", "leader observed",
            json_pack("{s:s}", "holder", identity && identity[0] ? identity : "(none)"));
}

/* The Lease's namespace: the flag, else the pod's (POD_NAMESPACE from the
 * downward API, or the service account's namespace file in-cluster). */
static const char *lease_namespace(const struct kop_config *cfg, struct kop_client *client)
{
    if (cfg->leader_election_namespace && cfg->leader_election_namespace[0])
        return cfg->leader_election_namespace;
    const char *ns = getenv("POD_NAMESPACE");
    if (ns && ns[0])
        return ns;
    ns = kop_client_namespace(client);
    return ns && ns[0] ? ns : NULL;
}

static int reconciler_new(const struct kop_config *cfg, struct reconciler *rc)
{
    char err[128];
    int r = kop_kubeconfig_load_default(cfg->kubeconfig, NULL, &rc->kc);
    if (r < 0) {
        kop_log(KOP_LOG_ERROR, "setup", "cannot load the API server configuration",
                json_pack("{s:s, s:s, s:i}", "kubeconfig", cfg->kubeconfig ? cfg->kubeconfig : "",
                          "error", strerror_r(-r, err, sizeof(err)), "errno", -r));
        return r;
    }
    r = kop_ratelimit_new(cfg->kube_api_qps, cfg->kube_api_burst, &rc->ratelimit);
    if (r < 0)
        goto fail;
    const struct kop_client_options copt = {.config = &rc->kc, .ratelimit = rc->ratelimit};
    r = kop_client_new(&copt, &rc->client);
    if (r < 0)
        goto fail;
    /* The reconciler's writes share the bucket but can be aborted as one
     * when the lease is lost; the elector's requests (one every retry
     * period) bypass the bucket, so a queue of reconciles never delays a
     * renewal past the renew deadline. */
    const struct kop_client_options ropt = {
        .config = &rc->kc, .ratelimit = rc->ratelimit, .abortable = true};
    r = kop_client_new(&ropt, &rc->reconcile_client);
    if (r < 0)
        goto fail;
    if (cfg->leader_elect) {
        const struct kop_client_options lopt = {.config = &rc->kc};
        r = kop_client_new(&lopt, &rc->lease_client);
        if (r < 0)
            goto fail;
    }
    r = kop_store_new(NULL, &rc->store);
    if (r < 0)
        goto fail;
    const struct kop_events_options eopt = {.client = rc->client, .component = "kop"};
    r = kop_events_new(&eopt, &rc->events);
    if (r < 0)
        goto fail;
    const struct kop_controller_options ctl = {
        .client = rc->client,
        .store = rc->store,
        .events = rc->events,
        .namespace = cfg->namespace,
        .max_concurrent = cfg->max_concurrent_reconciles,
        .sync_period_ms = cfg->sync_period_ms,
        .leading = !cfg->leader_elect,
        .reconcile_client = rc->reconcile_client,
        .lost_lease_drain_ms = cfg->leader_lease_duration_ms - cfg->leader_renew_deadline_ms,
    };
    r = kop_controller_new(&ctl, &rc->controller);
    if (r < 0)
        goto fail;
    if (cfg->leader_elect) {
        const char *ns = lease_namespace(cfg, rc->client);
        if (!ns) {
            kop_log(KOP_LOG_ERROR, "setup",
                    "leader election needs a namespace: not running in-cluster; set "
                    "--leader-election-namespace or POD_NAMESPACE",
                    NULL);
            r = -EINVAL;
            goto fail;
        }
        const struct kop_leader_options lopt = {
            .client = rc->lease_client,
            .namespace = ns,
            .name = cfg->leader_election_id,
            .lease_duration_ms = cfg->leader_lease_duration_ms,
            .renew_deadline_ms = cfg->leader_renew_deadline_ms,
            .retry_period_ms = cfg->leader_retry_period_ms,
            .on_started_leading = on_started_leading,
            .on_stopped_leading = on_stopped_leading,
            .on_new_leader = on_new_leader,
            .ud = rc->controller,
        };
        r = kop_leader_new(&lopt, &rc->leader);
        if (r == -EINVAL) {
            kop_log(KOP_LOG_ERROR, "setup",
                    "leader election durations must satisfy lease-duration > renew-deadline > "
                    "1.2 * retry-period > 0",
                    NULL);
            goto fail;
        }
        if (r < 0)
            goto fail;
        kop_log(KOP_LOG_INFO, "setup", "leader election enabled",
                json_pack("{s:s, s:s, s:s}", "lease", cfg->leader_election_id, "namespace", ns,
                          "identity", kop_leader_identity(rc->leader)));
    }
    kop_log(KOP_LOG_INFO, "setup", "API server configured",
            json_pack("{s:s, s:b, s:f, s:i}", "server", rc->kc.server ? rc->kc.server : "",
                      "inCluster", rc->kc.in_cluster, "qps", cfg->kube_api_qps, "burst",
                      cfg->kube_api_burst));
    return 0;
fail:
    kop_log(KOP_LOG_ERROR, "setup", "cannot set up the reconciler",
            json_pack("{s:s, s:i}", "error", strerror_r(-r, err, sizeof(err)), "errno", -r));
    return r;
}

/* Shutdown steps 3-6 for the reconciler's pieces (NULL-safe). */
static void reconciler_free(struct reconciler *rc, bool graceful)
{
    /* Informers first so no key is added, then the drain; when it runs out
     * of time the bucket is closed so reconciles waiting on it return. */
    if (rc->controller && kop_controller_stop(rc->controller, graceful ? remaining_ms() : 0) < 0) {
        kop_log(KOP_LOG_WARN, "setup", "reconciles in flight cut short", NULL);
        kop_ratelimit_close(rc->ratelimit);
        kop_client_abort(rc->reconcile_client);
    }
    if (rc->events && graceful)
        (void)kop_events_flush(rc->events, remaining_ms() / 2);
    /* After the last reconcile: release the lease so another replica takes
     * over at once instead of waiting for it to expire. */
    if (rc->leader)
        (void)kop_leader_stop(rc->leader, graceful);
    kop_leader_free(rc->leader);
    kop_controller_free(rc->controller);
    kop_events_free(rc->events);
    kop_client_free(rc->lease_client);
    kop_client_free(rc->reconcile_client);
    kop_client_free(rc->client);
    kop_ratelimit_free(rc->ratelimit);
    kop_store_free(rc->store);
    kop_kubeconfig_cleanup(&rc->kc);
    memset(rc, 0, sizeof(*rc));
}

/*
 * --self-signed-certs: publish the CA in the caBundles. With --webhook-only
 * there is no controller client, so a short-lived one is made for this.
 * A failure ends start-up (exit 1): the kubelet restarts kop with backoff,
 * which also covers a CRD applied after kop started.
 */
static int inject_ca_bundles(const struct kop_config *cfg, struct kop_client *client,
                             const struct kop_selfsigned_options *ss)
{
    struct kop_kubeconfig kc;
    struct kop_client *c = client;
    int r = 0;
    memset(&kc, 0, sizeof(kc));
    if (!c) {
        r = kop_kubeconfig_load_default(cfg->kubeconfig, NULL, &kc);
        if (r == 0) {
            const struct kop_client_options copt = {.config = &kc};
            r = kop_client_new(&copt, &c);
        }
        if (r < 0) {
            char err[128];
            kop_log(KOP_LOG_ERROR, "setup", "cannot reach the API server to publish the CA",
                    json_pack("{s:s}", "error", strerror_r(-r, err, sizeof(err))));
        }
    }
    if (r == 0)
        r = kop_selfsigned_inject(c, ss);
    if (c != client)
        kop_client_free(c);
    kop_kubeconfig_cleanup(&kc);
    return r;
}

/*
 * Raise the descriptor limit to its hard limit, and lower --max-connections
 * when even that cannot hold them: a TLS connection uses three descriptors
 * (the socket and both ends of the socketpair to the HTTP server), and kop
 * keeps FD_RESERVE for everything else (listeners, API connections, files).
 * A soft limit of 1024, common in containers, would otherwise fit ~330
 * connections whatever the flag says.
 */
#define FD_RESERVE 128

static void fit_descriptor_limit(struct kop_config *cfg)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = {.rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl.rlim_cur = rl.rlim_max;
    }
    if (cfg->controller_only || rl.rlim_cur == RLIM_INFINITY)
        return;
    rlim_t fit = rl.rlim_cur > FD_RESERVE ? (rl.rlim_cur - FD_RESERVE) / 3 : 1;
    if ((rlim_t)cfg->max_connections <= fit)
        return;
    kop_log(KOP_LOG_WARN, "setup", "--max-connections lowered to fit the descriptor limit",
            json_pack("{s:i, s:I, s:I}", "requested", cfg->max_connections, "allowed",
                      (json_int_t)fit, "limit", (json_int_t)rl.rlim_cur));
    cfg->max_connections = (int)fit;
    if (cfg->max_connections_per_ip > cfg->max_connections)
        cfg->max_connections_per_ip = cfg->max_connections;
}

int main(int argc, char **argv)
{
    struct kop_config cfg;
    struct kop_probes *probes = NULL;
    struct kop_webhook *webhook = NULL;
    struct reconciler rec;
    int exit_code = 1;
    int r;

    memset(&rec, 0, sizeof(rec));
    kop_config_defaults(&cfg);
    r = kop_config_parse(&cfg, argc, argv, environ, stdout, stderr);
    if (r != KOP_CONFIG_OK) {
        kop_config_cleanup(&cfg);
        return r == KOP_CONFIG_EXIT ? 0 : 2;
    }
    kop_log_setup(cfg.log_level, cfg.log_format, STDERR_FILENO);

    /* Process-wide setup, before any thread starts. */
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* Large buffers (a review's reply, one big object) come from mmap and
     * go back to the kernel when freed. glibc's default threshold moves up
     * after the first such free, and later ones would stay on the heap:
     * RSS would keep the high-water mark of the largest review. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kop_log(KOP_LOG_ERROR, "setup", "curl_global_init failed", NULL);
        goto out;
    }
    json_object_seed(0);
    kop_arena_json_install();
    fit_descriptor_limit(&cfg);
    if (!kop_metrics_global()) {
        kop_log(KOP_LOG_ERROR, "setup", "out of memory", NULL);
        goto out;
    }

    kop_log(KOP_LOG_INFO, "setup", "starting kop",
            json_pack("{s:s, s:b, s:b}", "version", KOP_VERSION, "webhook", !cfg.controller_only,
                      "reconciler", !cfg.webhook_only));

    if (!cfg.webhook_only && reconciler_new(&cfg, &rec) < 0)
        goto out;

    r = kop_probes_new(&probes);
    if (r < 0)
        goto out;
    /* Checks are registered before the probe server starts (its handlers
     * read the list unlocked); the webhook is published once it serves. */
    publish_ready(NULL, rec.controller);
    if (rec.controller)
        kop_probes_add_check(probes, "informers-synced", informers_synced, NULL);
    if (!cfg.controller_only)
        kop_probes_add_check(probes, "webhook", webhook_ready, NULL);
    r = kop_probes_start(probes, &cfg);
    if (r < 0)
        goto out;

    const struct kop_selfsigned_options ss = {.cert_dir = cfg.cert_dir};
    if (cfg.self_signed_certs) {
        r = kop_selfsigned_prepare(&ss);
        if (r < 0) {
            char err[128];
            kop_log(KOP_LOG_ERROR, "setup", "cannot prepare self-signed certificates",
                    json_pack("{s:s, s:s}", "certDir", cfg.cert_dir ? cfg.cert_dir : "", "error",
                              strerror_r(-r, err, sizeof(err))));
            goto out;
        }
    }

    if (!cfg.controller_only) {
        const struct kop_webhook_options wopts = {
            .cfg = &cfg,
            .child_lookup = rec.controller ? kop_controller_child_lookup : NULL,
            .child_lookup_userdata = rec.controller,
        };
        r = kop_webhook_start(&wopts, &webhook);
        if (r < 0) {
            char err[128];
            kop_log(KOP_LOG_ERROR, "setup", "cannot start the webhook server",
                    json_pack("{s:s, s:s, s:i}", "certDir", cfg.cert_dir ? cfg.cert_dir : "",
                              "error", strerror_r(-r, err, sizeof(err)), "errno", -r));
            goto out;
        }
        publish_ready(webhook, rec.controller);
    }

    if (cfg.self_signed_certs && inject_ca_bundles(&cfg, rec.client, &ss) < 0)
        goto out;

    if (rec.controller) {
        r = kop_controller_start(rec.controller);
        if (r < 0) {
            kop_log(KOP_LOG_ERROR, "setup", "cannot start the controller",
                    json_pack("{s:i}", "errno", -r));
            goto out;
        }
    }
    if (rec.leader) {
        r = kop_leader_start(rec.leader);
        if (r < 0) {
            kop_log(KOP_LOG_ERROR, "setup", "cannot start leader election",
                    json_pack("{s:i}", "errno", -r));
            goto out;
        }
    }

    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0)
        ;
    shutdown_deadline_ns = kop_clock_now_ns() + cfg.shutdown_timeout_ms * KOP_NSEC_PER_MSEC;
    kop_log(
        KOP_LOG_INFO, "setup", "shutting down",
        json_pack("{s:i, s:I}", "signal", sig, "timeoutMs", (json_int_t)cfg.shutdown_timeout_ms));
    pthread_t watcher;
    if (pthread_create(&watcher, NULL, second_signal_main, NULL) == 0)
        pthread_detach(watcher);

    /* 1. readiness false; the checks let go of what is freed below */
    kop_probes_set_shutting_down(probes);
    publish_ready(NULL, NULL);
    /* 2. webhook: stop accepting, finish in-flight requests */
    bool cut_short = false;
    if (webhook && kop_webhook_shutdown(webhook, remaining_ms()) < 0) {
        kop_log(KOP_LOG_WARN, "setup", "in-flight webhook requests cut short", NULL);
        cut_short = true;
    }
    /* 3.-5. controller (informers, queue, workers), events, the lease */
    reconciler_free(&rec, true);
    /* Running out of --shutdown-timeout is not a clean stop: exit 1, as the
     * watcher thread would, whichever of the two gets there first. */
    exit_code = cut_short || remaining_ms() == 0 ? 1 : 0;
    if (exit_code)
        kop_log(KOP_LOG_ERROR, "setup", "shutdown timed out", NULL);
out:
    /* 6. what is left, metrics and probe servers, 7. process-wide state */
    publish_ready(NULL, NULL);
    kop_webhook_free(webhook);
    reconciler_free(&rec, false);
    kop_probes_free(probes, remaining_ms());
    if (exit_code == 0)
        kop_log(KOP_LOG_INFO, "setup", "stopped", NULL);
    kop_metrics_global_cleanup();
    curl_global_cleanup();
    kop_config_cleanup(&cfg);
    return exit_code;
}
