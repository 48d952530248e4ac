/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator manager: composes kop's pieces for one configuration and
 * runs them in the start and shutdown orders below, the only place they
 * are written (docs/architecture.md §6 and §7 describe them).
 *
 * DESIGN
 *
 * Start order. Before the manager, main parses the flags and sets up
 * logging, then runs process_setup before any thread exists (signals
 * blocked in every thread, SIGPIPE ignored, curl_global_init, jansson's
 * hash seed, the arena allocator hook, the descriptor limit, the metrics
 * registry). The manager's steps
 * carry the names the step observer sees (kop_manager_set_step_observer);
 * the two of kop_manager_new have no observer yet:
 *   kop_manager_new:
 *   - reconciler (reconciler_new), when the reconciler runs (not
 *     --webhook-only): the API server configuration (--kubeconfig,
 *     $KUBECONFIG, in-cluster, ~/.kube/config), the token bucket
 *     (--kube-api-qps/--kube-api-burst), the clients, the shared store,
 *     the event recorder and the controller (informers, queue, workers;
 *     created, not started), and with --leader-elect the elector;
 *   - readiness checks (add_readiness_checks): the probes object with its
 *     checks ("informers-synced": the controller's caches synced, on every
 *     replica that runs the reconciler, leader or not, since the webhook
 *     reads them; "webhook": the TLS listener answers a self-dial,
 *     kop/selfdial.h), registered before the probe server starts;
 *   kop_manager_start, in the order of its table start_steps:
 *   - "tracing", with --otlp-endpoint: the span exporter (kop/otlp.h; its
 *     thread) installed as the trace sink, before anything can end a span;
 *   - "probes": the metrics and health-probe servers (/readyz fails until
 *     ready);
 *   - "self-signed-certs", "webhook", "ca-bundles": the webhook server
 *     (TLS front + HTTP), when not --controller-only, with admission rule 4
 *     reading the controller's store; with --self-signed-certs the serving
 *     pair is generated (or reused) in --cert-dir first, and its CA is
 *     patched into the caBundles of the CRD and the
 *     ValidatingWebhookConfiguration once the server listens;
 *   - "controller": informers list+watch, the resync timer, the workers,
 *     and the storage migrator. With --leader-elect the workers start
 *     paused and the elector (Lease --leader-election-id) resumes them
 *     while this replica leads and pauses them at once when the lease is
 *     lost (the replica competes again; its webhooks and informers keep
 *     running, so the webhook's store stays warm);
 *   - "sharding": with --sharding (kop/sharder.h) the workers start paused
 *     too; this replica's membership Lease (kop-shard-<identity>) resumes
 *     them while it is held, the leader Lease only makes the replica the
 *     sharder, and the informers select the replica's owner label;
 *   - "leader-election": the elector starts competing for the Lease.
 *
 * Shutdown order (kop_manager_shutdown; main calls it on SIGTERM or SIGINT
 * and exits at once with status 1 on a second signal or when
 * --shutdown-delay plus --shutdown-timeout run out), each step bounded by
 * what is left of that time and named as the step observer sees it:
 *   - "readyz": /readyz fails, so the endpoint is taken out of the
 *     Service; the elector retires (kop_leader_retire): a follower stops
 *     competing for the Lease, a leader keeps it until "lease";
 *   - "delay": --shutdown-delay (with a webhook server): everything keeps
 *     serving as before, keep-alive included, while the endpoint removal
 *     reaches every client (kube-proxy on each node, the apiserver); then
 *     the keep-alive drain (kop_webhook_shutdown with IDLE_GRACE_MS): every
 *     answer carries "Connection: close", connections between requests
 *     are closed once idle for IDLE_GRACE_MS with nothing unread;
 *   - "webhook": the webhook listener stops accepting; in-flight requests
 *     are answered, the remaining idle connections closed;
 *   - "controller": informers stop (no new keys), the resync timer stops,
 *     the queue shuts down and reconciles in flight finish (if that runs
 *     out of time the token bucket is closed, so reconciles waiting on it
 *     fail fast);
 *   - "events": the event recorder sends what is queued (bounded), then
 *     stops;
 *   - "lease": the lease is released (--leader-elect), after the last
 *     reconcile, so the next leader never overlaps with this one; with
 *     --sharding the membership Lease first, so the sharder moves this
 *     replica's objects only once it reconciles none of them;
 *   - "free": the client and store are freed;
 *   - "probes": the metrics and probe servers stop;
 *   - "tracing": the trace sink is removed (every span has ended by now)
 *     and the span exporter sends what is queued within what is left of
 *     the time;
 *   - then main's process_cleanup releases the process-wide state; exit
 *     0, or 1 when the time ran out.
 *
 * kop_manager_free without a shutdown (a start that failed) takes the
 * steps from "readyz" to "probes" without grace: no drain, no event flush,
 * the lease not released.
 *
 * The probe server runs from the "probes" start step to the very end,
 * longer than the webhook and the controller, so its checks never hold
 * their own pointers: the manager publishes each piece once it exists and
 * withdraws it (under ready_lock) before freeing it. A withdrawn piece
 * reads as not ready.
 */
#include "kop/manager.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/controller.h"
#include "kop/events.h"
#include "kop/kubeconfig.h"
#include "kop/leader.h"
#include "kop/log.h"
#include "kop/migrator.h"
#include "kop/myresource.h"
#include "kop/otlp.h"
#include "kop/fleet.h"
#include "kop/membership.h"
#include "kop/probes.h"
#include "kop/ratelimit.h"
#include "kop/selfsigned.h"
#include "kop/sharder.h"
#include "kop/store.h"
#include "kop/trace.h"
#include "kop/webhook.h"
#include "kop_version.h"

/* kop's User-Agent on every API request ("kop/<version> (linux/<arch>)
 * kubernetes/unknown"); kubesim's fault rules select kop by its prefix. */
static void user_agent(char *buf, size_t len)
{
    kop_client_format_user_agent(buf, len, "kop", KOP_VERSION);
}

struct kop_manager {
    const struct kop_config *cfg;

    /* The reconciler's pieces (the "reconciler" start step); all NULL with
     * --webhook-only. */
    struct kop_kubeconfig kc;
    struct kop_ratelimit *ratelimit;
    struct kop_client *client;           /* informers, events */
    struct kop_client *reconcile_client; /* reconciles: aborted when the lease is lost */
    struct kop_client *lease_client;     /* the Lease: never waits behind the bucket */
    struct kop_client *probe_client;     /* the local cluster's reachability probe */
    struct kop_fleet *fleet;             /* the member clusters */
    struct kop_store *store;
    struct kop_events *events;
    struct kop_controller *controller;
    struct kop_leader *leader;
    struct kop_client *migrate_client; /* --storage-migration: aborted when the lease is lost */
    struct kop_migrator *migrator;
    struct kop_membership *membership; /* --sharding */
    struct kop_sharder *sharder;       /* --sharding */

    struct kop_probes *probes;
    struct kop_webhook *webhook;
    struct kop_otlp *otlp; /* --otlp-endpoint; the trace sink while set */

    /* What the readiness checks look at (DESIGN). */
    pthread_mutex_t ready_lock;
    struct kop_webhook *ready_webhook;
    struct kop_controller *ready_controller;
    atomic_bool shutting_down;

    bool started;
    bool stopped;        /* shutdown ran: free only releases memory */
    int64_t deadline_ns; /* of the shutdown; 0 before one */
    kop_manager_step_fn *step_fn;
    void *step_ud;
};

/* After --shutdown-delay, how long a connection between requests is left
 * open before it is closed (see kop/webhook.h): a client that keeps using
 * its connection meets "Connection: close" within it instead. */
#define IDLE_GRACE_MS 1000

static void step(struct kop_manager *m, const char *name)
{
    if (m->step_fn)
        m->step_fn(m->step_ud, name);
}

static int remaining_ms(const struct kop_manager *m)
{
    int64_t left = (m->deadline_ns - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
    return left > 0 ? (int)left : 0;
}

static void publish_ready(struct kop_manager *m, struct kop_webhook *w, struct kop_controller *c)
{
    pthread_mutex_lock(&m->ready_lock);
    m->ready_webhook = w;
    m->ready_controller = c;
    pthread_mutex_unlock(&m->ready_lock);
}

static bool webhook_ready(void *ud)
{
    struct kop_manager *m = ud;
    pthread_mutex_lock(&m->ready_lock);
    bool ok = kop_webhook_ready(m->ready_webhook);
    pthread_mutex_unlock(&m->ready_lock);
    return ok;
}

static bool informers_synced(void *ud)
{
    struct kop_manager *m = ud;
    pthread_mutex_lock(&m->ready_lock);
    bool ok = kop_controller_synced(m->ready_controller);
    pthread_mutex_unlock(&m->ready_lock);
    return ok;
}

static void on_started_leading(void *ud)
{
    struct kop_manager *m = ud;
    kop_log(KOP_LOG_INFO, "leader", "became leader, reconciling", NULL);
    kop_controller_set_leading(m->controller, true);
    kop_migrator_set_leading(m->migrator, true);
}

static void on_stopped_leading(void *ud)
{
    struct kop_manager *m = ud;
    kop_migrator_set_leading(m->migrator, false);
    kop_controller_set_leading(m->controller, false);
    /* Logged once it is true: the reconciles in flight were aborted and
     * waited for (bounded by the controller's drain time). */
    kop_log(KOP_LOG_WARN, "leader", "lost the lease, reconciling stopped", NULL);
}

static void on_new_leader(void *ud, const char *identity)
{
    (void)ud;
    kop_log(KOP_LOG_INFO, "leader", "leader observed",
            json_pack("{s:s}", "holder", identity && identity[0] ? identity : "(none)"));
}

/* --sharding: this replica reconciles while its membership Lease is held;
 * the leader Lease makes it the sharder. */
static void on_joined(void *ud)
{
    struct kop_manager *m = ud;
    kop_log(KOP_LOG_INFO, "sharder", "joined the shard members, reconciling", NULL);
    kop_controller_set_leading(m->controller, true);
}

static void on_left(void *ud)
{
    struct kop_manager *m = ud;
    kop_controller_set_leading(m->controller, false);
    kop_log(KOP_LOG_WARN, "sharder",
            "left the shard members (stopping, or the Lease was not renewed), reconciling stopped",
            NULL);
}

/* With --sharding the leader Lease elects the sharder (every replica
 * reconciles its own share); the storage migrator runs on it too. */
static void on_started_sharder(void *ud)
{
    struct kop_manager *m = ud;
    kop_sharder_set_active(m->sharder, true);
    kop_migrator_set_leading(m->migrator, true);
}

static void on_stopped_sharder(void *ud)
{
    struct kop_manager *m = ud;
    kop_migrator_set_leading(m->migrator, false);
    kop_sharder_set_active(m->sharder, false);
}

/* The shard identity: POD_NAME, else the hostname; it names the membership
 * Lease and is the owner label value, so it must be a DNS label. */
static int shard_identity(char *buf, size_t len)
{
    const char *pod = getenv("POD_NAME");
    if (pod && pod[0])
        snprintf(buf, len, "%s", pod);
    else if (gethostname(buf, len) != 0)
        return -errno;
    buf[len - 1] = '\0';
    return kop_membership_identity_valid(buf) ? 0 : -EINVAL;
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

/* --sharding, in the "reconciler" start step: the membership (its Lease renewed with the
 * leader election durations) and the sharder, and the controller options
 * that narrow the informers to this replica's share. */
static int sharding_new(struct kop_manager *m, struct kop_controller_options *ctl)
{
    const struct kop_config *cfg = m->cfg;
    char id[256];
    const char *ns = lease_namespace(cfg, m->client);
    if (!ns || shard_identity(id, sizeof(id)) < 0) {
        kop_log(KOP_LOG_ERROR, "setup",
                "sharding needs a Lease namespace (--leader-election-namespace or POD_NAMESPACE) "
                "and a POD_NAME or hostname that is a DNS label",
                NULL);
        return -EINVAL;
    }
    const struct kop_membership_options mo = {
        .client = m->lease_client,
        .namespace = ns,
        .prefix = KOP_SHARDER_LEASE_PREFIX,
        .identity = id,
        .lease_duration_ms = cfg->leader_lease_duration_ms,
        .renew_deadline_ms = cfg->leader_renew_deadline_ms,
        .retry_period_ms = cfg->leader_retry_period_ms,
        .on_joined = on_joined,
        .on_left = on_left,
        .ud = m,
    };
    int r = kop_membership_new(&mo, &m->membership);
    if (r < 0)
        return r;
    const struct kop_sharder_options so = {
        .client = m->client,
        .membership = m->membership,
        .namespace = cfg->namespace,
        .period_ms = cfg->leader_retry_period_ms,
        .lease_duration_ms = cfg->leader_lease_duration_ms,
    };
    r = kop_sharder_new(&so, &m->sharder);
    if (r < 0)
        return r;
    ctl->shard_selector = kop_sharder_selector(m->sharder);
    ctl->gate = kop_sharder_gate;
    ctl->gate_ud = m->sharder;
    kop_log(KOP_LOG_INFO, "setup", "sharding enabled",
            json_pack("{s:s, s:s, s:s}", "identity", id, "namespace", ns, "selector",
                      ctl->shard_selector));
    return 0;
}

/* The member clusters (kop/fleet.h): --cluster ones engaged now, the
 * Secrets' from the "controller" start step. */
static int fleet_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (cfg->n_clusters == 0 && !cfg->cluster_secrets)
        return 0;
    char ua[160];
    user_agent(ua, sizeof(ua));
    const struct kop_fleet_options fo = {
        .cfg = cfg,
        .controller = m->controller,
        .client = m->client,
        .namespace = lease_namespace(cfg, m->client),
        .user_agent = ua,
    };
    return kop_fleet_new(&fo, &m->fleet);
}

/* The reconciler's clients, sharing one token bucket. */
static int clients_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    int r = kop_ratelimit_new(cfg->kube_api_qps, cfg->kube_api_burst, &m->ratelimit);
    if (r < 0)
        return r;
    char ua[160];
    user_agent(ua, sizeof(ua));
    const struct kop_client_options copt = {
        .config = &m->kc, .ratelimit = m->ratelimit, .user_agent = ua};
    r = kop_client_new(&copt, &m->client);
    if (r < 0)
        return r;
    /* The reconciler's writes share the bucket but can be aborted as one
     * when the lease is lost; the elector's requests (one every retry
     * period) bypass the bucket, so a queue of reconciles never delays a
     * renewal past the renew deadline. */
    const struct kop_client_options ropt = {
        .config = &m->kc, .ratelimit = m->ratelimit, .abortable = true, .user_agent = ua};
    r = kop_client_new(&ropt, &m->reconcile_client);
    if (r < 0)
        return r;
    if (cfg->leader_elect || cfg->sharding) {
        const struct kop_client_options lopt = {.config = &m->kc, .user_agent = ua};
        r = kop_client_new(&lopt, &m->lease_client);
        if (r < 0)
            return r;
    }
    return kop_fleet_probe_client_new(&m->kc, ua, NULL, NULL, &m->probe_client);
}

/* The store, the event recorder and the controller (with --sharding its
 * membership and sharder first). */
static int controller_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    int r = kop_store_new_labelled(NULL, "kop_store", "cluster", KOP_CONTROLLER_LOCAL_CLUSTER,
                                   &m->store);
    if (r < 0)
        return r;
    const struct kop_events_options eopt = {.client = m->client, .component = "kop"};
    r = kop_events_new(&eopt, &m->events);
    if (r < 0)
        return r;
    struct kop_controller_options ctl = {
        .client = m->client,
        .store = m->store,
        .events = m->events,
        .namespace = cfg->namespace,
        .max_concurrent = cfg->max_concurrent_reconciles,
        .sync_period_ms = cfg->sync_period_ms,
        .leading = !cfg->leader_elect && !cfg->sharding,
        .reconcile_client = m->reconcile_client,
        .probe_client = m->probe_client,
        .lost_lease_drain_ms = cfg->leader_lease_duration_ms - cfg->leader_renew_deadline_ms,
        .myresource_version = cfg->storage_version && strcmp(cfg->storage_version, "v2") == 0
                                  ? KOP_MYRESOURCE_VERSION_V2
                                  : KOP_MYRESOURCE_VERSION_V1,
    };
    if (cfg->sharding) {
        r = sharding_new(m, &ctl);
        if (r < 0)
            return r;
    }
    return kop_controller_new(&ctl, &m->controller);
}

/* --leader-elect or --sharding: the elector of the leader Lease. */
static int elector_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (!cfg->leader_elect && !cfg->sharding)
        return 0;
    const char *ns = lease_namespace(cfg, m->client);
    if (!ns) {
        kop_log(KOP_LOG_ERROR, "setup",
                "leader election needs a namespace: not running in-cluster; set "
                "--leader-election-namespace or POD_NAMESPACE",
                NULL);
        return -EINVAL;
    }
    const struct kop_leader_options lopt = {
        .client = m->lease_client,
        .namespace = ns,
        .name = cfg->leader_election_id,
        .lease_duration_ms = cfg->leader_lease_duration_ms,
        .renew_deadline_ms = cfg->leader_renew_deadline_ms,
        .retry_period_ms = cfg->leader_retry_period_ms,
        .on_started_leading = cfg->sharding ? on_started_sharder : on_started_leading,
        .on_stopped_leading = cfg->sharding ? on_stopped_sharder : on_stopped_leading,
        .on_new_leader = on_new_leader,
        .ud = m,
    };
    int r = kop_leader_new(&lopt, &m->leader);
    if (r == -EINVAL)
        kop_log(KOP_LOG_ERROR, "setup",
                "leader election durations must satisfy lease-duration > renew-deadline > "
                "1.2 * retry-period > 0",
                NULL);
    if (r < 0)
        return r;
    kop_log(KOP_LOG_INFO, "setup", "leader election enabled",
            json_pack("{s:s, s:s, s:s}", "lease", cfg->leader_election_id, "namespace", ns,
                      "identity", kop_leader_identity(m->leader)));
    return 0;
}

/* --storage-migration: the migrator, its checkpoint beside the Lease (the
 * overlay's Role). */
static int migrator_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (!cfg->storage_migration)
        return 0;
    /* Its own client, as the reconciler's: aborted when the lease is lost. */
    char ua[160];
    user_agent(ua, sizeof(ua));
    const struct kop_client_options ropt = {
        .config = &m->kc, .ratelimit = m->ratelimit, .abortable = true, .user_agent = ua};
    int r = kop_client_new(&ropt, &m->migrate_client);
    if (r < 0)
        return r;
    const char *cp_ns = cfg->leader_elect ? lease_namespace(cfg, m->client) : NULL;
    char cp_name[300];
    snprintf(cp_name, sizeof(cp_name), "%s-storage-migration", cfg->leader_election_id);
    const struct kop_migrator_options mopt = {
        .client = m->migrate_client,
        .events = m->events,
        .crd_name = KOP_MYRESOURCE_RESOURCE "." KOP_MYRESOURCE_GROUP,
        .group = KOP_MYRESOURCE_GROUP,
        .resource = KOP_MYRESOURCE_RESOURCE,
        .checkpoint_namespace = cp_ns,
        .checkpoint_name = cp_ns ? cp_name : NULL,
        .leading = !cfg->leader_elect,
    };
    return kop_migrator_new(&mopt, &m->migrator);
}

/* The "reconciler" start step. On failure the pieces made so far stay in
 * m for reconciler_free. */
static int reconciler_new(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    int r = kop_kubeconfig_load_default(cfg->kubeconfig, NULL, &m->kc);
    if (r < 0) {
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot load the API server configuration", r,
                      json_pack("{s:s}", "kubeconfig", cfg->kubeconfig ? cfg->kubeconfig : ""));
        return r;
    }
    r = clients_new(m);
    if (r == 0)
        r = controller_new(m);
    if (r == 0)
        r = fleet_new(m);
    if (r == 0)
        r = elector_new(m);
    if (r == 0)
        r = migrator_new(m);
    if (r < 0) {
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot set up the reconciler", r, NULL);
        return r;
    }
    kop_log(KOP_LOG_INFO, "setup", "API server configured",
            json_pack("{s:s, s:b, s:f, s:i}", "server", m->kc.server ? m->kc.server : "",
                      "inCluster", m->kc.in_cluster, "qps", cfg->kube_api_qps, "burst",
                      cfg->kube_api_burst));
    return 0;
}

/* The shutdown steps "controller" to "free" for the reconciler's pieces
 * (NULL-safe, idempotent). */
static void reconciler_free(struct kop_manager *m, bool graceful)
{
    /* No member comes or goes any more; then informers first so no key is
     * added, then the drain; when it runs out of time the bucket is closed
     * so reconciles waiting on it return. */
    kop_fleet_stop(m->fleet);
    if (m->controller) {
        if (graceful)
            step(m, "controller");
        if (kop_controller_stop(m->controller, graceful ? remaining_ms(m) : 0) < 0) {
            kop_log(KOP_LOG_WARN, "setup", "reconciles in flight cut short", NULL);
            kop_ratelimit_close(m->ratelimit);
            kop_client_abort(m->reconcile_client);
            kop_fleet_cut_short(m->fleet);
        }
    }
    /* The migrator's requests share the bucket: stop it with the
     * reconciles, before the lease is released. */
    kop_migrator_stop(m->migrator);
    if (m->events && graceful) {
        step(m, "events");
        (void)kop_events_flush(m->events, remaining_ms(m) / 2);
        kop_fleet_flush_events(m->fleet, remaining_ms(m) / 2);
    }
    /* After the last reconcile: leave the shard members (the sharder moves
     * this replica's objects at its next pass) and release the lease so
     * another replica takes over at once instead of waiting for it to
     * expire. */
    kop_membership_stop(m->membership, graceful);
    kop_sharder_stop(m->sharder);
    if (m->leader) {
        if (graceful)
            step(m, "lease");
        (void)kop_leader_stop(m->leader, graceful);
    }
    if (graceful)
        step(m, "free");
    kop_leader_free(m->leader);
    m->leader = NULL;
    kop_migrator_free(m->migrator);
    m->migrator = NULL;
    kop_client_free(m->migrate_client);
    m->migrate_client = NULL;
    kop_sharder_free(m->sharder);
    m->sharder = NULL;
    kop_membership_free(m->membership);
    m->membership = NULL;
    kop_controller_free(m->controller);
    m->controller = NULL;
    kop_fleet_free(m->fleet);
    m->fleet = NULL;
    kop_events_free(m->events);
    m->events = NULL;
    kop_client_free(m->lease_client);
    m->lease_client = NULL;
    kop_client_free(m->probe_client);
    m->probe_client = NULL;
    kop_client_free(m->reconcile_client);
    m->reconcile_client = NULL;
    kop_client_free(m->client);
    m->client = NULL;
    kop_ratelimit_free(m->ratelimit);
    m->ratelimit = NULL;
    kop_store_free(m->store);
    m->store = NULL;
    kop_kubeconfig_cleanup(&m->kc);
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
            char ua[160];
            user_agent(ua, sizeof(ua));
            const struct kop_client_options copt = {.config = &kc, .user_agent = ua};
            r = kop_client_new(&copt, &c);
        }
        if (r < 0)
            kop_log_errno(KOP_LOG_ERROR, "setup", "cannot reach the API server to publish the CA",
                          r, NULL);
    }
    if (r == 0)
        r = kop_selfsigned_inject(c, ss);
    if (c != client)
        kop_client_free(c);
    kop_kubeconfig_cleanup(&kc);
    return r;
}

/* The "readiness checks" start step: registered before the probe server
 * starts (its handlers read the list unlocked); the webhook is published
 * once it serves. */
static int add_readiness_checks(struct kop_manager *m)
{
    int r = kop_probes_new(&m->probes);
    if (r < 0)
        return r;
    publish_ready(m, NULL, m->controller);
    if (m->controller)
        kop_probes_add_check(m->probes, "informers-synced", informers_synced, m);
    if (!m->cfg->controller_only)
        kop_probes_add_check(m->probes, "webhook", webhook_ready, m);
    return 0;
}

int kop_manager_new(const struct kop_config *cfg, struct kop_manager **ret)
{
    assert(cfg);
    assert(ret);
    struct kop_manager *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->cfg = cfg;
    pthread_mutex_init(&m->ready_lock, NULL);
    atomic_init(&m->shutting_down, false);

    int r = 0;
    if (!cfg->webhook_only) {
        r = reconciler_new(m);
        if (r < 0)
            goto fail;
    }
    r = add_readiness_checks(m);
    if (r < 0)
        goto fail;
    *ret = m;
    return 0;
fail:
    kop_manager_free(m);
    return r;
}

void kop_manager_set_step_observer(struct kop_manager *m, kop_manager_step_fn *fn, void *userdata)
{
    m->step_fn = fn;
    m->step_ud = userdata;
}

/* "tracing": with --otlp-endpoint, the span exporter as the trace sink. */
static int start_tracing(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (!cfg->otlp_endpoint || !cfg->otlp_endpoint[0])
        return 0;
    step(m, "tracing");
    const struct kop_otlp_options oo = {
        .endpoint = cfg->otlp_endpoint,
        .service_name = cfg->otlp_service_name,
        .flush_interval_ms = cfg->otlp_flush_interval_ms,
        .metric_prefix = "kop",
    };
    int r = kop_otlp_new(&oo, &m->otlp);
    if (r < 0) {
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot start the OTLP span exporter", r,
                      json_pack("{s:s}", "endpoint", cfg->otlp_endpoint));
        return r;
    }
    kop_trace_set_sink(kop_otlp_sink, m->otlp);
    kop_log(KOP_LOG_INFO, "setup", "exporting trace spans",
            json_pack("{s:s, s:s}", "endpoint", cfg->otlp_endpoint, "serviceName",
                      cfg->otlp_service_name));
    return 0;
}

/* "probes": the metrics and health-probe servers. */
static int start_probes(struct kop_manager *m)
{
    step(m, "probes");
    return kop_probes_start(m->probes, m->cfg);
}

/* "self-signed-certs": with --self-signed-certs, the serving pair in
 * --cert-dir, generated or reused. */
static int prepare_self_signed(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (!cfg->self_signed_certs)
        return 0;
    step(m, "self-signed-certs");
    const struct kop_selfsigned_options ss = {.cert_dir = cfg->cert_dir};
    int r = kop_selfsigned_prepare(&ss);
    if (r < 0)
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot prepare self-signed certificates", r,
                      json_pack("{s:s}", "certDir", cfg->cert_dir ? cfg->cert_dir : ""));
    return r;
}

/* The webhook's view of the clusters: a handle for rule 4 of one. */
static void *cluster_handle(void *ud, const char *name)
{
    return kop_controller_cluster(ud, name);
}

/* "webhook": unless --controller-only, the webhook server, published to
 * its readiness check once it serves. */
static int start_webhook(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (cfg->controller_only)
        return 0;
    step(m, "webhook");
    const struct kop_webhook_options wopts = {
        .cfg = cfg,
        .child_lookup = m->controller ? kop_controller_child_lookup : NULL,
        .child_lookup_userdata = m->controller,
        .cluster = m->controller ? cluster_handle : NULL,
        .cluster_put = kop_controller_cluster_put,
        .cluster_child_lookup = kop_controller_cluster_child_lookup,
        .cluster_userdata = m->controller,
        .shard_mutate = m->sharder ? kop_sharder_mutate_http : NULL,
        .shard_mutate_userdata = m->sharder,
    };
    int r = kop_webhook_start(&wopts, &m->webhook);
    if (r < 0) {
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot start the webhook server", r,
                      json_pack("{s:s}", "certDir", cfg->cert_dir ? cfg->cert_dir : ""));
        return r;
    }
    publish_ready(m, m->webhook, m->controller);
    return 0;
}

/* "ca-bundles": with --self-signed-certs, the CA into the caBundles, once
 * the server listens. */
static int publish_ca_bundles(struct kop_manager *m)
{
    const struct kop_config *cfg = m->cfg;
    if (!cfg->self_signed_certs)
        return 0;
    step(m, "ca-bundles");
    const struct kop_selfsigned_options ss = {.cert_dir = cfg->cert_dir};
    return inject_ca_bundles(cfg, m->client, &ss);
}

/* "controller": the controller, then the storage migrator. */
static int start_controller(struct kop_manager *m)
{
    int r;
    if (m->controller) {
        step(m, "controller");
        r = kop_controller_start(m->controller);
        if (r < 0) {
            kop_log(KOP_LOG_ERROR, "setup", "cannot start the controller",
                    json_pack("{s:i}", "errno", -r));
            return r;
        }
    }
    if (m->fleet) {
        r = kop_fleet_start(m->fleet);
        if (r < 0) {
            kop_log_errno(KOP_LOG_ERROR, "setup", "cannot watch the member cluster Secrets", r,
                          NULL);
            return r;
        }
    }
    if (m->migrator) {
        r = kop_migrator_start(m->migrator);
        if (r < 0) {
            kop_log(KOP_LOG_ERROR, "setup", "cannot start the storage migrator",
                    json_pack("{s:i}", "errno", -r));
            return r;
        }
    }
    return 0;
}

/* "sharding": with --sharding, the membership Lease and the sharder. */
static int start_sharding(struct kop_manager *m)
{
    if (!m->membership)
        return 0;
    step(m, "sharding");
    int r = kop_membership_start(m->membership);
    if (r == 0)
        r = kop_sharder_start(m->sharder);
    if (r < 0)
        kop_log(KOP_LOG_ERROR, "setup", "cannot start sharding", json_pack("{s:i}", "errno", -r));
    return r;
}

/* "leader-election": with --leader-elect or --sharding, the elector. */
static int start_leader_election(struct kop_manager *m)
{
    if (!m->leader)
        return 0;
    step(m, "leader-election");
    int r = kop_leader_start(m->leader);
    if (r < 0)
        kop_log(KOP_LOG_ERROR, "setup", "cannot start leader election",
                json_pack("{s:i}", "errno", -r));
    return r;
}

/* kop_manager_start's steps, in the start order (DESIGN). Each one does
 * nothing when its flags leave it out. */
static int (*const start_steps[])(struct kop_manager *) = {
    start_tracing,      start_probes,     prepare_self_signed, start_webhook,
    publish_ca_bundles, start_controller, start_sharding,      start_leader_election,
};

int kop_manager_start(struct kop_manager *m)
{
    assert(m);
    if (m->started || m->stopped)
        return -EALREADY;
    m->started = true;
    for (size_t i = 0; i < sizeof(start_steps) / sizeof(start_steps[0]); i++) {
        int r = start_steps[i](m);
        if (r < 0)
            return r;
    }
    return 0;
}

void kop_manager_unready(struct kop_manager *m)
{
    if (!m)
        return;
    atomic_store(&m->shutting_down, true);
    kop_probes_set_shutting_down(m->probes);
    /* A replica on its way out leaves the Lease to those that stay; a
     * leader keeps it (and reconciles) until the "lease" step releases it. */
    kop_leader_retire(m->leader);
}

/* Remove the trace sink, then export what is queued within timeout_ms. */
static void stop_tracing(struct kop_manager *m, int timeout_ms)
{
    if (!m->otlp)
        return;
    step(m, "tracing");
    kop_trace_set_sink(NULL, NULL);
    if (kop_otlp_shutdown(m->otlp, timeout_ms) < 0)
        kop_log(KOP_LOG_WARN, "setup", "spans not exported before the shutdown deadline", NULL);
    kop_otlp_free(m->otlp);
    m->otlp = NULL;
}

/* now + ms, saturating at INT64_MAX (a duration flag may be up to 87600h,
 * a caller's own timeout anything). */
static int64_t after_ms(int64_t ms)
{
    int64_t now = kop_clock_now_ns();
    if (ms <= 0)
        return now;
    if (ms > (INT64_MAX - now) / KOP_NSEC_PER_MSEC)
        return INT64_MAX;
    return now + ms * KOP_NSEC_PER_MSEC;
}

int kop_manager_shutdown(struct kop_manager *m, int64_t timeout_ms)
{
    if (m->stopped)
        return 0;
    m->stopped = true;
    m->deadline_ns = after_ms(timeout_ms);

    /* "readyz": readiness false; the checks let go of what is freed below */
    step(m, "readyz");
    kop_manager_unready(m);
    publish_ready(m, NULL, NULL);
    /* "delay": keep serving while the endpoint removal propagates */
    int64_t delay = m->webhook ? kop_config_shutdown_delay_ms(m->cfg) : 0;
    if (delay > 0) {
        step(m, "delay");
        kop_log(KOP_LOG_INFO, "setup", "serving on while the endpoint is removed",
                json_pack("{s:I}", "shutdownDelayMs", (json_int_t)delay));
        int64_t until = after_ms(delay);
        if (until > m->deadline_ns)
            until = m->deadline_ns;
        for (int64_t left = until - kop_clock_now_ns(); left > 0;
             left = until - kop_clock_now_ns()) {
            struct timespec ts = {.tv_sec = left / KOP_NSEC_PER_SEC,
                                  .tv_nsec = left % KOP_NSEC_PER_SEC};
            nanosleep(&ts, NULL);
        }
    }
    /* "webhook": (after a delay, the keep-alive drain,) stop accepting,
     * finish in-flight requests */
    bool cut_short = false;
    if (m->webhook) {
        step(m, "webhook");
        if (kop_webhook_shutdown(m->webhook, delay > 0 ? IDLE_GRACE_MS : 0, remaining_ms(m)) < 0) {
            kop_log(KOP_LOG_WARN, "setup", "in-flight webhook requests cut short", NULL);
            cut_short = true;
        }
    }
    /* "controller" (informers, queue, workers), "events", "lease", "free"
     * (the client and the store) */
    reconciler_free(m, true);
    /* Running out of the timeout is not a clean stop: main exits 1, as its
     * watcher thread would, whichever of the two gets there first. */
    int r = cut_short || remaining_ms(m) == 0 ? -ETIMEDOUT : 0;
    if (r < 0)
        kop_log(KOP_LOG_ERROR, "setup", "shutdown timed out", NULL);
    /* "probes": what is left, metrics and probe servers */
    kop_webhook_free(m->webhook);
    m->webhook = NULL;
    step(m, "probes");
    kop_probes_free(m->probes, remaining_ms(m));
    m->probes = NULL;
    /* "tracing": the spans of everything above, sent */
    stop_tracing(m, remaining_ms(m));
    return r;
}

void kop_manager_free(struct kop_manager *m)
{
    if (!m)
        return;
    /* Without a shutdown (start failed, or never started): the steps from
     * "readyz" to "probes" without grace; after one, all that is left is memory. */
    m->stopped = true;
    atomic_store(&m->shutting_down, true);
    publish_ready(m, NULL, NULL);
    kop_webhook_free(m->webhook);
    reconciler_free(m, false);
    kop_probes_free(m->probes, remaining_ms(m));
    stop_tracing(m, 0);
    pthread_mutex_destroy(&m->ready_lock);
    free(m);
}

bool kop_manager_ready(struct kop_manager *m)
{
    if (atomic_load(&m->shutting_down))
        return false;
    if (!m->cfg->controller_only && !webhook_ready(m))
        return false;
    if (!m->cfg->webhook_only && !informers_synced(m))
        return false;
    return true;
}

bool kop_manager_leading(const struct kop_manager *m)
{
    return m->leader && kop_leader_is_leader(m->leader);
}

uint16_t kop_manager_webhook_port(const struct kop_manager *m)
{
    return m->webhook ? kop_webhook_port(m->webhook) : 0;
}

uint16_t kop_manager_metrics_port(const struct kop_manager *m)
{
    return m->probes ? kop_probes_metrics_port(m->probes) : 0;
}

uint16_t kop_manager_health_port(const struct kop_manager *m)
{
    return m->probes ? kop_probes_health_port(m->probes) : 0;
}
