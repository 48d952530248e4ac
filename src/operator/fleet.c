/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The member clusters (see kop/fleet.h).
 *
 * DESIGN
 * A member is the set of pieces the controller borrows for one cluster.
 * Static members (--cluster) are made in kop_fleet_new and live until
 * kop_fleet_free. Secret members are level-driven, as a controller is:
 * the Secrets' informer only marks the fleet dirty (its handlers run on
 * the informer's thread and must not block); the fleet thread then
 * compares the Secrets in the store with the members engaged from
 * Secrets and engages, re-engages or disengages until they agree. A
 * Secret that cannot be used is remembered with the kubeconfig it held so
 * that it is logged once, not at every pass, and tried again only when it
 * changes; an engage that failed for want of memory or threads is tried
 * again after RETRY_MS.
 *
 * Threads: the fleet thread (Secrets), the informer's. f->lock guards
 * dirty and stop; the member list is the fleet thread's own after start
 * (before start, kop_fleet_new's thread's).
 */
#include "kop/fleet.h"

#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/config.h"
#include "kop/controller.h"
#include "kop/events.h"
#include "kop/informer.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/membership.h"
#include "kop/metrics.h"
#include "kop/ratelimit.h"
#include "kop/store.h"
#include "kop/thread.h"

#define LOGGER "fleet"
#define KIND_SECRET "Secret"
/* How long the probe of a cluster's API server may take (connection
 * included): a hung server is "not ready" after this. */
#define PROBE_TIMEOUT_MS 2000
#define RETRY_MS 10000
/* A kubeconfig in a Secret larger than this is refused (a Secret is at
 * most 1 MiB; a kubeconfig is a few KiB). */
#define MAX_KUBECONFIG (256 * 1024)

static const struct kop_resource res_secret = {"", "v1", "secrets", true};

struct member {
    struct member *next;
    char *name;
    char *secret;     /* the Secret's name; NULL: --cluster */
    char *kubeconfig; /* the Secret's data.kubeconfig (base64) it was made from */
    struct kop_kubeconfig kc;
    bool kc_loaded;
    struct kop_ratelimit *ratelimit;
    struct kop_client *client, *reconcile_client, *probe_client;
    struct kop_store *store;
    struct kop_events *events;
    bool engaged; /* in the controller */
};

/* A Secret that was refused, with the kubeconfig it held. */
struct refused {
    struct refused *next;
    char *secret;
    char *kubeconfig;
};

struct kop_fleet {
    const struct kop_config *cfg;
    struct kop_controller *controller;
    struct kop_client *client;
    char *namespace;
    char *user_agent;
    struct kop_metrics *metrics;

    struct member *members; /* static first, then the Secrets' */
    struct refused *refused;

    struct kop_store *store; /* the Secrets */
    struct kop_informer *informer;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool dirty, stop;
};

int kop_fleet_probe_client_new(const struct kop_kubeconfig *kc, const char *user_agent,
                               const char *cluster, struct kop_metrics *metrics,
                               struct kop_client **ret)
{
    const struct kop_client_options o = {.config = kc,
                                         .metrics = metrics,
                                         .cluster = cluster,
                                         .user_agent = user_agent,
                                         .max_retries = -1,
                                         .timeout_ms = PROBE_TIMEOUT_MS,
                                         .connect_timeout_ms = PROBE_TIMEOUT_MS};
    return kop_client_new(&o, ret);
}

/* ---- one member ----------------------------------------------------------------- */

static void member_free(struct kop_fleet *f, struct member *mb)
{
    if (!mb)
        return;
    kop_events_free(mb->events);
    kop_client_free(mb->probe_client);
    kop_client_free(mb->reconcile_client);
    kop_client_free(mb->client);
    /* its clients' series (the store's go with the store) */
    kop_metrics_remove_series(f->metrics ? f->metrics : kop_metrics_global(),
                              "rest_client_requests_total", "cluster", mb->name);
    kop_ratelimit_free(mb->ratelimit);
    kop_store_free(mb->store);
    if (mb->kc_loaded)
        kop_kubeconfig_cleanup(&mb->kc);
    free(mb->name);
    free(mb->secret);
    free(mb->kubeconfig);
    free(mb);
}

/* mb's token bucket, clients, store and recorder from mb->kc, then mb
 * engaged in the controller. */
static int member_engage(struct kop_fleet *f, struct member *mb)
{
    const struct kop_config *cfg = f->cfg;
    int r = kop_ratelimit_new(cfg->kube_api_qps, cfg->kube_api_burst, &mb->ratelimit);
    const struct kop_client_options copt = {.config = &mb->kc,
                                            .ratelimit = mb->ratelimit,
                                            .metrics = f->metrics,
                                            .cluster = mb->name,
                                            .user_agent = f->user_agent};
    const struct kop_client_options ropt = {.config = &mb->kc,
                                            .ratelimit = mb->ratelimit,
                                            .abortable = true,
                                            .metrics = f->metrics,
                                            .cluster = mb->name,
                                            .user_agent = f->user_agent};
    if (r == 0)
        r = kop_client_new(&copt, &mb->client);
    if (r == 0)
        r = kop_client_new(&ropt, &mb->reconcile_client);
    if (r == 0)
        r = kop_fleet_probe_client_new(&mb->kc, f->user_agent, mb->name, f->metrics,
                                       &mb->probe_client);
    if (r == 0)
        r = kop_store_new_labelled(f->metrics, "kop_store", "cluster", mb->name, &mb->store);
    const struct kop_events_options eopt = {.client = mb->client, .component = "kop"};
    if (r == 0)
        r = kop_events_new(&eopt, &mb->events);
    const struct kop_controller_cluster_options co = {
        .name = mb->name,
        .client = mb->client,
        .reconcile_client = mb->reconcile_client,
        .probe_client = mb->probe_client,
        .store = mb->store,
        .events = mb->events,
    };
    if (r == 0)
        r = kop_controller_add_cluster(f->controller, &co);
    mb->engaged = r == 0;
    return r;
}

/* Out of the controller (its requests cut short first), then freed; the
 * memory goes back to the system. */
static void member_disengage(struct kop_fleet *f, struct member *mb, const char *why)
{
    if (mb->engaged) {
        kop_ratelimit_close(mb->ratelimit);
        (void)kop_controller_remove_cluster(f->controller, mb->name);
    }
    kop_log(
        KOP_LOG_INFO, LOGGER, "member cluster disengaged",
        json_pack("{s:s, s:s?, s:s}", "cluster", mb->name, "secret", mb->secret, "reason", why));
    member_free(f, mb);
    malloc_trim(0);
}

/* ---- --cluster ------------------------------------------------------------------------ */

static int static_member(struct kop_fleet *f, const struct kop_cluster_flag *flag,
                         struct member ***tail)
{
    struct member *mb = calloc(1, sizeof(*mb));
    if (!mb || !(mb->name = strdup(flag->name))) {
        free(mb);
        return -ENOMEM;
    }
    **tail = mb;
    *tail = &mb->next;
    int r = kop_kubeconfig_load_default(flag->kubeconfig, NULL, &mb->kc);
    if (r < 0) {
        kop_log_errno(
            KOP_LOG_ERROR, "setup", "cannot load the member cluster's configuration", r,
            json_pack("{s:s, s:s}", "cluster", flag->name, "kubeconfig", flag->kubeconfig));
        return r;
    }
    mb->kc_loaded = true;
    r = member_engage(f, mb);
    if (r < 0)
        kop_log_errno(KOP_LOG_ERROR, "setup", "cannot set up the member cluster", r,
                      json_pack("{s:s}", "cluster", flag->name));
    else
        kop_log(KOP_LOG_INFO, "setup", "member cluster configured",
                json_pack("{s:s, s:s}", "cluster", flag->name, "server",
                          mb->kc.server ? mb->kc.server : ""));
    return r;
}

int kop_fleet_new(const struct kop_fleet_options *opt, struct kop_fleet **ret)
{
    assert(opt);
    assert(opt->cfg);
    assert(opt->controller);
    assert(opt->client);
    assert(opt->user_agent);
    assert(ret);
    *ret = NULL;
    struct kop_fleet *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    if (kop_clock_cond_init(&f->cond) != 0) {
        pthread_mutex_destroy(&f->lock);
        free(f);
        return -ENOMEM;
    }
    f->cfg = opt->cfg;
    f->controller = opt->controller;
    f->client = opt->client;
    f->metrics = opt->metrics;
    f->user_agent = strdup(opt->user_agent);
    f->namespace = opt->namespace ? strdup(opt->namespace) : NULL;
    *ret = f;
    if (!f->user_agent || (opt->namespace && !f->namespace))
        return -ENOMEM;
    struct member **tail = &f->members;
    for (size_t i = 0; i < opt->cfg->n_clusters; i++) {
        int r = static_member(f, &opt->cfg->clusters[i], &tail);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- --cluster-secrets ------------------------------------------------------------------- */

/* What a Secret's kubeconfig must not hold (kop/fleet.h), NULL when fine. */
static const char *not_inline(const struct kop_kubeconfig *kc)
{
    if (kc->exec)
        return "an exec credential plugin";
    if (kc->token_file)
        return "a tokenFile";
    if (kc->ca_file)
        return "a certificate-authority file";
    if (kc->cert_file)
        return "a client-certificate file";
    if (kc->key_file)
        return "a client-key file";
    if (kc->in_cluster)
        return "in-cluster credentials";
    return NULL;
}

static struct member *find_member(struct kop_fleet *f, const char *name)
{
    for (struct member *mb = f->members; mb; mb = mb->next)
        if (strcmp(mb->name, name) == 0)
            return mb;
    return NULL;
}

static bool is_static(const struct kop_fleet *f, const char *name)
{
    for (size_t i = 0; i < f->cfg->n_clusters; i++)
        if (strcmp(f->cfg->clusters[i].name, name) == 0)
            return true;
    return false;
}

static struct refused *find_refused(struct kop_fleet *f, const char *secret)
{
    for (struct refused *x = f->refused; x; x = x->next)
        if (strcmp(x->secret, secret) == 0)
            return x;
    return NULL;
}

/* Log a refused Secret once per content. */
static void refuse(struct kop_fleet *f, const char *secret, const char *kubeconfig,
                   const char *cluster, const char *why, int err)
{
    struct refused *x = find_refused(f, secret);
    if (x && strcmp(x->kubeconfig, kubeconfig) == 0)
        return;
    if (!x) {
        x = calloc(1, sizeof(*x));
        if (!x || !(x->secret = strdup(secret))) {
            free(x);
            return;
        }
        x->next = f->refused;
        f->refused = x;
    }
    free(x->kubeconfig);
    x->kubeconfig = strdup(kubeconfig);
    json_t *fields = json_pack("{s:s, s:s, s:s?, s:s}", "namespace", f->namespace, "secret", secret,
                               "cluster", cluster, "reason", why);
    if (err)
        kop_log_errno(KOP_LOG_ERROR, LOGGER, "member cluster Secret refused", err, fields);
    else
        kop_log(KOP_LOG_ERROR, LOGGER, "member cluster Secret refused", fields);
}

/* Forget the refusals of Secrets that are gone or fine now. */
static void prune_refused(struct kop_fleet *f, const json_t *wanted)
{
    struct refused **p = &f->refused;
    while (*p) {
        struct refused *x = *p;
        if (!json_object_get(wanted, x->secret)) {
            *p = x->next;
            free(x->secret);
            free(x->kubeconfig);
            free(x);
        } else {
            p = &x->next;
        }
    }
}

/* A Secret member from its (validated) Secret; on success it is engaged
 * and in the list. Returns 0, -EINVAL (refused and logged) or another
 * negative errno (to be tried again). */
static int secret_member(struct kop_fleet *f, const char *name, const char *secret, const char *b64)
{
    char *raw = NULL;
    size_t len = 0;
    int r = kop_base64_decode(b64, strlen(b64), &raw, &len);
    if (r == -EINVAL) {
        refuse(f, secret, b64, name, "data.kubeconfig is not base64", 0);
        return -EINVAL;
    }
    if (r < 0)
        return r;
    struct member *mb = calloc(1, sizeof(*mb));
    if (!mb || !(mb->name = strdup(name)) || !(mb->secret = strdup(secret)) ||
        !(mb->kubeconfig = strdup(b64))) {
        free(raw);
        member_free(f, mb);
        return -ENOMEM;
    }
    /* relative paths would name kop's own files: resolved against a
     * directory that is not there, and refused below anyway */
    r = kop_kubeconfig_load_buffer(raw, len, "/nonexistent", NULL, &mb->kc);
    free(raw);
    if (r == -ENOMEM) {
        member_free(f, mb);
        return r;
    }
    if (r < 0) {
        refuse(f, secret, b64, name, "not a valid kubeconfig", r);
        member_free(f, mb);
        return -EINVAL;
    }
    mb->kc_loaded = true;
    const char *bad = not_inline(&mb->kc);
    if (bad) {
        char why[160];
        snprintf(why, sizeof(why),
                 "the kubeconfig holds %s; a Secret's kubeconfig must carry its credentials inline",
                 bad);
        refuse(f, secret, b64, name, why, 0);
        member_free(f, mb);
        return -EINVAL;
    }
    r = member_engage(f, mb);
    if (r < 0) {
        kop_log_errno(KOP_LOG_ERROR, LOGGER, "cannot engage the member cluster", r,
                      json_pack("{s:s, s:s}", "cluster", name, "secret", secret));
        member_free(f, mb); /* not engaged: nothing of it is in the controller */
        return r == -EINVAL || r == -EEXIST ? -EINVAL : r;
    }
    mb->next = f->members;
    f->members = mb;
    kop_log(KOP_LOG_INFO, LOGGER, "member cluster engaged",
            json_pack("{s:s, s:s, s:s}", "cluster", name, "secret", secret, "server",
                      mb->kc.server ? mb->kc.server : ""));
    return 0;
}

/* The Secrets as the members they ask for: cluster name -> {"secret",
 * "kubeconfig"} (@ref new), invalid ones refused (logged); *ret_secrets
 * the names of every labelled Secret. */
static json_t *wanted_members(struct kop_fleet *f, json_t **ret_secrets)
{
    json_t *want = json_object();
    json_t *secrets = json_object();
    json_t *list = kop_store_list(f->store, KIND_SECRET, f->namespace);
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *secret = kop_json_path_str(s, "metadata.name");
        const json_t *labels = kop_json_path(s, "metadata.labels");
        const char *name = json_string_value(json_object_get(labels, KOP_FLEET_SECRET_LABEL));
        if (!secret || !name)
            continue;
        json_object_set_new(secrets, secret, json_true());
        const char *b64 =
            json_string_value(json_object_get(json_object_get(s, "data"), KOP_FLEET_SECRET_KEY));
        const char *why = NULL;
        if (!kop_membership_identity_valid(name))
            why = "the " KOP_FLEET_SECRET_LABEL " label is not a DNS label";
        else if (strcmp(name, KOP_CONTROLLER_LOCAL_CLUSTER) == 0)
            why = "\"" KOP_CONTROLLER_LOCAL_CLUSTER "\" is the cluster kop runs in";
        else if (is_static(f, name))
            why = "a --cluster flag names this cluster";
        else if (!b64 || !*b64)
            why = "the Secret has no data." KOP_FLEET_SECRET_KEY;
        else if (strlen(b64) > MAX_KUBECONFIG)
            why = "data." KOP_FLEET_SECRET_KEY " is over 256 KiB";
        if (why) {
            refuse(f, secret, b64 ? b64 : "", kop_membership_identity_valid(name) ? name : NULL,
                   why, 0);
            continue;
        }
        json_t *prev = json_object_get(want, name);
        if (prev) {
            /* two Secrets for one cluster: the first by name wins (the list
             * is not ordered); logged at every pass, not remembered, so the
             * other one takes over when the first goes */
            const char *other = kop_json_path_str(prev, "secret");
            bool mine = strcmp(secret, other) < 0;
            kop_log(KOP_LOG_WARN, LOGGER, "two Secrets name one member cluster",
                    json_pack("{s:s, s:s, s:s, s:s}", "namespace", f->namespace, "cluster", name,
                              "used", mine ? secret : other, "ignored", mine ? other : secret));
            if (mine)
                json_object_set_new(want, name,
                                    json_pack("{s:s, s:s}", "secret", secret, "kubeconfig", b64));
            continue;
        }
        json_object_set_new(want, name,
                            json_pack("{s:s, s:s}", "secret", secret, "kubeconfig", b64));
    }
    json_decref(list);
    *ret_secrets = secrets;
    return want;
}

/* One pass: engage, re-engage and disengage until the Secret members are
 * what the Secrets ask for. Returns true when something is to be tried
 * again later. */
static bool sync_members(struct kop_fleet *f)
{
    json_t *secrets = NULL;
    json_t *want = wanted_members(f, &secrets);
    if (!want || !secrets) {
        json_decref(want);
        json_decref(secrets);
        return true;
    }
    /* gone or changed */
    struct member **p = &f->members;
    while (*p) {
        struct member *mb = *p;
        if (!mb->secret) {
            p = &mb->next;
            continue;
        }
        json_t *w = json_object_get(want, mb->name);
        const char *why = !w ? "no Secret names it any more"
                          : strcmp(kop_json_path_str(w, "secret"), mb->secret) != 0
                              ? "another Secret names it"
                          : strcmp(kop_json_path_str(w, "kubeconfig"), mb->kubeconfig) != 0
                              ? "its kubeconfig changed"
                              : NULL;
        if (!why) {
            p = &mb->next;
            continue;
        }
        *p = mb->next;
        member_disengage(f, mb, why);
    }
    /* new (and changed: engaged again) */
    bool retry = false;
    const char *name;
    json_t *w;
    json_object_foreach(want, name, w)
    {
        const char *secret = kop_json_path_str(w, "secret");
        const char *b64 = kop_json_path_str(w, "kubeconfig");
        if (find_member(f, name))
            continue;
        struct refused *x = find_refused(f, secret);
        if (x && strcmp(x->kubeconfig, b64) == 0)
            continue; /* logged; waits for a change */
        int r = secret_member(f, name, secret, b64);
        retry = retry || (r < 0 && r != -EINVAL);
    }
    prune_refused(f, secrets);
    json_decref(want);
    json_decref(secrets);
    return retry;
}

static void kick(void *ud)
{
    struct kop_fleet *f = ud;
    pthread_mutex_lock(&f->lock);
    f->dirty = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

static void on_add(void *ud, json_t *obj)
{
    (void)obj;
    kick(ud);
}

static void on_update(void *ud, json_t *old_obj, json_t *new_obj)
{
    (void)old_obj;
    (void)new_obj;
    kick(ud);
}

/* How long the fleet thread waits for the Secrets' first list. */
#define SYNC_POLL_MS 100

static void *fleet_main(void *arg)
{
    struct kop_fleet *f = arg;
    int64_t wait_ms = SYNC_POLL_MS; /* < 0: until kicked */
    pthread_mutex_lock(&f->lock);
    while (!f->stop) {
        if (!f->dirty && wait_ms < 0) {
            pthread_cond_wait(&f->cond, &f->lock);
            continue;
        }
        if (!f->dirty) {
            struct timespec deadline = kop_clock_deadline_ms(wait_ms);
            int e = 0;
            while (!f->stop && !f->dirty && e != ETIMEDOUT)
                e = pthread_cond_timedwait(&f->cond, &f->lock, &deadline);
            if (f->stop)
                break;
        }
        f->dirty = false;
        pthread_mutex_unlock(&f->lock);
        /* nothing is engaged or disengaged on a store that has not listed
         * yet; then a pass, again after RETRY_MS when one failed */
        if (!kop_informer_has_synced(f->informer))
            wait_ms = SYNC_POLL_MS;
        else
            wait_ms = sync_members(f) ? RETRY_MS : -1;
        pthread_mutex_lock(&f->lock);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

int kop_fleet_start(struct kop_fleet *f)
{
    assert(f);
    if (!f->cfg->cluster_secrets)
        return 0;
    if (!f->namespace) {
        kop_log(KOP_LOG_ERROR, "setup",
                "--cluster-secrets needs kop's namespace (--leader-election-namespace, "
                "POD_NAMESPACE, or the service account's)",
                NULL);
        return -EINVAL;
    }
    int r = kop_store_new(f->metrics, "kop_cluster_secrets_store", &f->store);
    const struct kop_informer_options io = {
        .client = f->client,
        .store = f->store,
        .resource = res_secret,
        .kind = KIND_SECRET,
        .namespace = f->namespace,
        .label_selector = KOP_FLEET_SECRET_LABEL,
        .name = "cluster secrets",
        .on_add = on_add,
        .on_update = on_update,
        .on_delete = on_add,
        .ud = f,
    };
    if (r == 0)
        r = kop_informer_new(&io, &f->informer);
    if (r == 0)
        r = kop_thread_start(&f->thread, fleet_main, f, "fleet");
    f->thread_started = r == 0;
    if (r == 0)
        r = kop_informer_start(f->informer);
    if (r == 0)
        kop_log(KOP_LOG_INFO, LOGGER, "watching member cluster Secrets",
                json_pack("{s:s, s:s}", "namespace", f->namespace, "labelSelector",
                          KOP_FLEET_SECRET_LABEL));
    return r;
}

void kop_fleet_stop(struct kop_fleet *f)
{
    if (!f)
        return;
    kop_informer_stop(f->informer);
    if (f->thread_started) {
        pthread_mutex_lock(&f->lock);
        f->stop = true;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
        pthread_join(f->thread, NULL);
        f->thread_started = false;
    }
}

void kop_fleet_cut_short(struct kop_fleet *f)
{
    if (!f)
        return;
    for (struct member *mb = f->members; mb; mb = mb->next) {
        kop_ratelimit_close(mb->ratelimit);
        kop_client_abort(mb->reconcile_client);
    }
}

void kop_fleet_flush_events(struct kop_fleet *f, int64_t timeout_ms)
{
    if (!f)
        return;
    for (struct member *mb = f->members; mb; mb = mb->next)
        (void)kop_events_flush(mb->events, timeout_ms);
}

void kop_fleet_free(struct kop_fleet *f)
{
    if (!f)
        return;
    kop_fleet_stop(f);
    kop_informer_free(f->informer);
    kop_store_free(f->store);
    while (f->members) {
        struct member *mb = f->members;
        f->members = mb->next;
        member_free(f, mb);
    }
    prune_refused(f, NULL);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f->namespace);
    free(f->user_agent);
    free(f);
}
