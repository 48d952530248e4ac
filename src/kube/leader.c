/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on a Lease (see kop/leader.h for the protocol).
 *
 * DESIGN
 *
 * Threads: the elector thread runs the election loop and every callback;
 * a small watchdog thread aborts (kop_client_cancel_fire) a request that
 * is still in flight at its deadline, so a hung API server cannot keep a
 * leader that has passed its renew deadline believing it leads. The owner
 * thread only starts, stops and frees.
 *
 * State: everything about the Lease (the cached object, the observer, the
 * time of the last successful renewal) belongs to the elector thread.
 * The mutex guards the hand-over fields: stopping/releasing, the request
 * deadline the watchdog watches, the holder shown by kop_leader_leader().
 * "leading" is an atomic so is_leader() takes no lock; "retired" is an
 * atomic so retire() can be called from any thread without the mutex.
 *
 * Cancel protocol: the cancel handle is reset only under the mutex and only
 * when no stop is pending (or during the release, which the elector starts
 * after it saw the stop), and stop()/the watchdog fire it under the same
 * mutex. So a stop can never be lost by a reset, and the release request
 * is never aborted by the stop that asked for it.
 *
 * Lock order: l->lock, then the cancel handle's own lock (inside
 * kop_client_cancel_*). No client request or callback runs under l->lock.
 */
#include "kop/leader.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/thread.h"

#define LOGGER "leader"

static const struct kop_resource lease_res = {
    .group = "coordination.k8s.io",
    .version = "v1",
    .resource = "leases",
    .namespaced = true,
};

struct kop_leader {
    /* Immutable after new(). */
    struct kop_client *client;
    char *ns;
    char *name;
    char identity[KOP_LEADER_HOLDER_MAX];
    int64_t lease_ns, renew_ns, retry_ns;
    int64_t lease_s; /* written as leaseDurationSeconds */
    bool once;
    kop_leader_fn on_started;
    kop_leader_fn on_stopped;
    kop_leader_new_leader_fn on_new_leader;
    void *ud;
    struct kop_metric *m_master;
    struct kop_client_cancel *cancel;

    /* Owner thread. */
    pthread_t thread, watchdog;
    bool started, joined;
    int release_err;

    /* Guarded by lock. */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; stop and deadline changes */
    bool stopping, release_on_stop, releasing, wd_quit;
    int64_t req_deadline_ns; /* 0: no request in flight */
    char holder[KOP_LEADER_HOLDER_MAX];

    atomic_bool leading;
    atomic_bool retired; /* kop_leader_retire: never acquire again */

    /* Elector thread only. */
    json_t *lease; /* last Lease read or written, @ref new */
    struct kop_leader_observer obs;
    int64_t last_renew_ns; /* start of the last successful acquire/renew */
    char reported[KOP_LEADER_HOLDER_MAX];
    bool reported_any;
    uint64_t rng;
};

/* ---- the record (pure) ---------------------------------------------------- */

static int64_t int_member(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static int64_t time_member(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    int64_t t = 0;
    if (!s || kop_clock_parse_rfc3339(s, &t) != 0)
        return 0;
    return t;
}

int kop_leader_record_from_lease(const json_t *lease, struct kop_leader_record *ret)
{
    assert(ret);
    if (!json_is_object(lease))
        return -EINVAL;
    const json_t *spec = json_object_get(lease, "spec");
    if (spec && !json_is_object(spec))
        return -EINVAL;
    struct kop_leader_record rec;
    memset(&rec, 0, sizeof(rec));
    const char *h = json_string_value(json_object_get(spec, "holderIdentity"));
    if (h) {
        size_t n = strlen(h);
        if (n >= sizeof(rec.holder)) {
            rec.holder_too_long = true;
            n = sizeof(rec.holder) - 1;
        }
        memcpy(rec.holder, h, n);
        rec.holder[n] = '\0';
    }
    rec.lease_duration_s = int_member(spec, "leaseDurationSeconds");
    rec.acquire_wall_ns = time_member(spec, "acquireTime");
    rec.renew_wall_ns = time_member(spec, "renewTime");
    rec.transitions = int_member(spec, "leaseTransitions");
    *ret = rec;
    return 0;
}

static int set_micro(json_t *spec, const char *key, int64_t wall_ns)
{
    if (wall_ns == 0)
        return 0;
    char buf[40];
    kop_clock_rfc3339_micro(wall_ns, buf, sizeof(buf));
    return json_object_set_new(spec, key, json_string(buf)) == 0 ? 0 : -ENOMEM;
}

int kop_leader_record_to_lease(const struct kop_leader_record *rec, const json_t *base,
                               const char *ns, const char *name, json_t **ret_lease)
{
    assert(rec);
    assert(ret_lease);
    assert(base || (ns && name));
    if (base && !json_is_object(base))
        return -EINVAL;
    int r = -ENOMEM;
    json_t *lease = NULL;
    if (base) {
        lease = json_deep_copy(base);
    } else {
        lease = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                          "Lease", "metadata", "name", name, "namespace", ns);
    }
    if (!lease)
        goto out;
    json_t *spec = json_object();
    if (!spec || json_object_set_new(lease, "spec", spec) != 0)
        goto out;
    if (json_object_set_new(spec, "holderIdentity", json_string(rec->holder)) != 0 ||
        json_object_set_new(spec, "leaseDurationSeconds",
                            json_integer((json_int_t)rec->lease_duration_s)) != 0)
        goto out;
    if (set_micro(spec, "acquireTime", rec->acquire_wall_ns) != 0 ||
        set_micro(spec, "renewTime", rec->renew_wall_ns) != 0)
        goto out;
    if (json_object_set_new(spec, "leaseTransitions", json_integer((json_int_t)rec->transitions)) !=
        0)
        goto out;
    *ret_lease = lease;
    lease = NULL;
    r = 0;
out:
    json_decref(lease);
    return r;
}

bool kop_leader_record_equal(const struct kop_leader_record *a, const struct kop_leader_record *b)
{
    return strcmp(a->holder, b->holder) == 0 && a->holder_too_long == b->holder_too_long &&
           a->lease_duration_s == b->lease_duration_s && a->acquire_wall_ns == b->acquire_wall_ns &&
           a->renew_wall_ns == b->renew_wall_ns && a->transitions == b->transitions;
}

void kop_leader_observe(struct kop_leader_observer *o, const struct kop_leader_record *rec,
                        int64_t now_ns)
{
    if (o->have && kop_leader_record_equal(&o->record, rec))
        return;
    o->have = true;
    o->record = *rec;
    o->observed_ns = now_ns;
}

bool kop_leader_observer_is_mine(const struct kop_leader_observer *o, const char *identity)
{
    return o->have && !o->record.holder_too_long && o->record.holder[0] != '\0' &&
           strcmp(o->record.holder, identity) == 0;
}

bool kop_leader_observer_held(const struct kop_leader_observer *o, int64_t now_ns)
{
    if (!o->have || o->record.holder[0] == '\0')
        return false;
    int64_t d = o->record.lease_duration_s;
    if (d <= 0)
        return false;
    /* Clamp absurd remote durations instead of overflowing. */
    if (d > INT64_C(1) << 30)
        d = INT64_C(1) << 30;
    return o->observed_ns + d * KOP_NSEC_PER_SEC > now_ns;
}

enum kop_leader_action kop_leader_decide(const struct kop_leader_observer *o, const char *identity,
                                         int64_t now_ns)
{
    if (!o->have)
        return KOP_LEADER_CREATE;
    if (kop_leader_observer_is_mine(o, identity))
        return KOP_LEADER_RENEW;
    if (kop_leader_observer_held(o, now_ns))
        return KOP_LEADER_WAIT;
    return KOP_LEADER_ACQUIRE;
}

void kop_leader_next_record(const struct kop_leader_observer *o, enum kop_leader_action action,
                            const char *identity, int64_t lease_duration_s, int64_t now_wall_ns,
                            struct kop_leader_record *ret)
{
    struct kop_leader_record rec;
    memset(&rec, 0, sizeof(rec));
    snprintf(rec.holder, sizeof(rec.holder), "%s", identity);
    rec.lease_duration_s = lease_duration_s;
    rec.acquire_wall_ns = now_wall_ns;
    rec.renew_wall_ns = now_wall_ns;
    switch (action) {
    case KOP_LEADER_CREATE:
        break;
    case KOP_LEADER_RENEW:
        if (o->have && o->record.acquire_wall_ns != 0)
            rec.acquire_wall_ns = o->record.acquire_wall_ns;
        rec.transitions = o->have ? o->record.transitions : 0;
        break;
    case KOP_LEADER_ACQUIRE:
    case KOP_LEADER_WAIT:
        rec.transitions = o->have ? o->record.transitions + 1 : 0;
        break;
    }
    *ret = rec;
}

/* ---- identity --------------------------------------------------------------- */

static void random_bytes(unsigned char *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(b + got, n - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (got < n) {
        /* No kernel randomness (should not happen): mix the clocks and an
         * address so two processes still differ. */
        uint64_t x = (uint64_t)kop_clock_now_ns() ^ ((uint64_t)kop_clock_wall_ns() << 1) ^
                     (uint64_t)(uintptr_t)b ^ (uint64_t)getpid();
        for (size_t i = got; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = (unsigned char)x;
        }
    }
}

int kop_leader_default_identity(char *buf, size_t len)
{
    assert(buf);
    char host[256] = "";
    const char *pod = getenv("POD_NAME");
    if (pod && pod[0] && strlen(pod) < sizeof(host)) {
        snprintf(host, sizeof(host), "%s", pod);
    } else if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
        snprintf(host, sizeof(host), "%s", program_invocation_short_name);
    }
    host[sizeof(host) - 1] = '\0';
    unsigned char b[16];
    random_bytes(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    int n = snprintf(buf, len,
                     "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     host, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                     b[12], b[13], b[14], b[15]);
    if (n < 0 || (size_t)n >= len)
        return -EINVAL;
    return 0;
}

/* ---- elector ------------------------------------------------------------------ */

static double rand01(struct kop_leader *l)
{
    uint64_t x = l->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    l->rng = x;
    return (double)((x * UINT64_C(0x2545f4914f6cdd1d)) >> 11) / (double)(UINT64_C(1) << 53);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

int kop_leader_new(const struct kop_leader_options *opts, struct kop_leader **ret)
{
    assert(opts);
    assert(opts->client);
    assert(opts->namespace);
    assert(opts->name);
    assert(ret);
    if (!opts->namespace[0] || !opts->name[0])
        return -EINVAL;
    int64_t lease = opts->lease_duration_ms ? opts->lease_duration_ms
                                            : (int64_t)KOP_LEADER_LEASE_DURATION_S * 1000;
    int64_t renew = opts->renew_deadline_ms ? opts->renew_deadline_ms
                                            : (int64_t)KOP_LEADER_RENEW_DEADLINE_S * 1000;
    int64_t retry =
        opts->retry_period_ms ? opts->retry_period_ms : (int64_t)KOP_LEADER_RETRY_PERIOD_S * 1000;
    /* client-go: LeaseDuration > RenewDeadline > JitterFactor(1.2) * RetryPeriod. */
    if (retry <= 0 || renew <= 0 || lease <= renew || renew * 10 <= retry * 12 ||
        lease > INT64_C(1) << 40)
        return -EINVAL;
    if (opts->identity &&
        (opts->identity[0] == '\0' || strlen(opts->identity) >= (size_t)KOP_LEADER_HOLDER_MAX))
        return -EINVAL;

    int r = -ENOMEM;
    struct kop_leader *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    pthread_mutex_init(&l->lock, NULL);
    r = kop_clock_cond_init(&l->cond);
    if (r != 0) {
        pthread_mutex_destroy(&l->lock);
        free(l);
        return r;
    }
    atomic_init(&l->leading, false);
    atomic_init(&l->retired, false);
    r = -ENOMEM;
    l->client = opts->client;
    l->lease_ns = lease * KOP_NSEC_PER_MSEC;
    l->renew_ns = renew * KOP_NSEC_PER_MSEC;
    l->retry_ns = retry * KOP_NSEC_PER_MSEC;
    l->lease_s = (lease + 999) / 1000;
    l->once = opts->once;
    l->on_started = opts->on_started_leading;
    l->on_stopped = opts->on_stopped_leading;
    l->on_new_leader = opts->on_new_leader;
    l->ud = opts->ud;
    l->ns = dup_str(opts->namespace);
    l->name = dup_str(opts->name);
    l->cancel = kop_client_cancel_new();
    if (!l->ns || !l->name || !l->cancel)
        goto out;
    if (opts->identity) {
        snprintf(l->identity, sizeof(l->identity), "%s", opts->identity);
    } else {
        r = kop_leader_default_identity(l->identity, sizeof(l->identity));
        if (r != 0)
            goto out;
    }
    unsigned char seed[8];
    random_bytes(seed, sizeof(seed));
    memcpy(&l->rng, seed, sizeof(l->rng));
    l->rng |= 1;

    struct kop_metrics *m = opts->metrics ? opts->metrics : kop_metrics_global();
    static const char *const labels[] = {"name", NULL};
    struct kop_metric_family *f = kop_metrics_register(
        m, KOP_METRIC_GAUGE, "leader_election_master_status",
        "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
        "indicates master. 'name' is the string used to identify the lease. Please make sure to "
        "group by name.",
        labels, NULL, 0);
    l->m_master = kop_metric_child(f, l->name);
    kop_gauge_set(l->m_master, 0);
    *ret = l;
    l = NULL;
    r = 0;
out:
    if (l) {
        kop_client_cancel_free(l->cancel);
        free(l->ns);
        free(l->name);
        pthread_cond_destroy(&l->cond);
        pthread_mutex_destroy(&l->lock);
        free(l);
    }
    return r;
}

bool kop_leader_is_leader(const struct kop_leader *l)
{
    assert(l);
    return atomic_load(&l->leading);
}

const char *kop_leader_identity(const struct kop_leader *l)
{
    assert(l);
    return l->identity;
}

int kop_leader_leader(struct kop_leader *l, char *buf, size_t len)
{
    assert(l);
    assert(buf);
    if (len == 0)
        return -EINVAL;
    pthread_mutex_lock(&l->lock);
    int n = snprintf(buf, len, "%s", l->holder);
    pthread_mutex_unlock(&l->lock);
    return (size_t)n >= len ? -ENOBUFS : 0;
}

/* Called with l->lock held. */
static bool stop_pending(const struct kop_leader *l)
{
    return l->stopping && !l->releasing;
}

/* Arm the cancel handle and the watchdog for one request. Returns
 * -ECANCELED when a stop is pending. */
static int request_begin(struct kop_leader *l, int64_t deadline_ns)
{
    pthread_mutex_lock(&l->lock);
    if (stop_pending(l)) {
        pthread_mutex_unlock(&l->lock);
        return -ECANCELED;
    }
    kop_client_cancel_reset(l->cancel);
    l->req_deadline_ns = deadline_ns;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    return 0;
}

static void request_end(struct kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    l->req_deadline_ns = 0;
    pthread_mutex_unlock(&l->lock);
}

static void *watchdog_main(void *arg)
{
    struct kop_leader *l = arg;
    pthread_mutex_lock(&l->lock);
    while (!l->wd_quit) {
        int64_t d = l->req_deadline_ns;
        if (d == 0) {
            pthread_cond_wait(&l->cond, &l->lock);
            continue;
        }
        if (kop_clock_now_ns() >= d) {
            kop_client_cancel_fire(l->cancel);
            l->req_deadline_ns = 0;
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(d / KOP_NSEC_PER_SEC),
                              .tv_nsec = (long)(d % KOP_NSEC_PER_SEC)};
        pthread_cond_timedwait(&l->cond, &l->lock, &ts);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/*
 * One request on the Lease (named) or its collection, cancellable by stop()
 * and by the watchdog at deadline_ns. The typed client verbs take no
 * cancel handle, hence the generic request.
 */
static int lease_call(struct kop_leader *l, const char *method, bool named, const json_t *body,
                      int64_t deadline_ns, struct kop_api_status *st, json_t **ret_obj)
{
    char path[1024];
    int r = kop_client_path(&lease_res, l->ns, named ? l->name : NULL, NULL, path, sizeof(path));
    if (r != 0)
        return r;
    r = request_begin(l, deadline_ns);
    if (r != 0)
        return r;
    struct kop_request rq = {.method = method, .path = path, .body = body, .cancel = l->cancel};
    r = kop_client_request(l->client, &rq, st, ret_obj);
    request_end(l);
    return r;
}

/* Replace the cached Lease (steals obj) and observe its record. */
static void remember(struct kop_leader *l, json_t *obj, int64_t now_ns)
{
    struct kop_leader_record rec;
    if (kop_leader_record_from_lease(obj, &rec) != 0) {
        json_decref(obj);
        return;
    }
    json_decref(l->lease);
    l->lease = obj;
    kop_leader_observe(&l->obs, &rec, now_ns);
}

static void log_api_error(struct kop_leader *l, const char *what, int err,
                          const struct kop_api_status *st)
{
    if (err == -ECANCELED)
        return;
    kop_log(KOP_LOG_WARN, LOGGER, what,
            json_pack("{s:s,s:s,s:i,s:s,s:s}", "lease", l->name, "namespace", l->ns, "code",
                      st->code, "reason", st->reason, "error", st->message));
}

/*
 * GET the Lease and remember it, observed when the answer came: 0,
 * -ENOENT (no Lease), -EBADMSG (a Lease whose spec is no record, logged
 * and not remembered) or the call's error (logged).
 */
static int read_lease(struct kop_leader *l, int64_t deadline)
{
    json_t *obj = NULL;
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int r = lease_call(l, "GET", true, NULL, deadline, &st, &obj);
    int64_t seen = kop_clock_now_ns();
    if (r == -ENOENT)
        return r;
    if (r != 0) {
        log_api_error(l, "lease get failed", r, &st);
        return r;
    }
    struct kop_leader_record rec;
    if (kop_leader_record_from_lease(obj, &rec) != 0) {
        kop_log(KOP_LOG_WARN, LOGGER, "lease has an invalid spec",
                json_pack("{s:s,s:s}", "lease", l->name, "namespace", l->ns));
        json_decref(obj);
        return -EBADMSG;
    }
    remember(l, obj, seen);
    return 0;
}

/* PUT rec onto base. On success the answer becomes the cache. */
static int put_record(struct kop_leader *l, const struct kop_leader_record *rec, const json_t *base,
                      int64_t deadline_ns)
{
    json_t *obj = NULL, *answer = NULL;
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int r = kop_leader_record_to_lease(rec, base, l->ns, l->name, &obj);
    if (r != 0)
        return r;
    int64_t sent = kop_clock_now_ns();
    r = lease_call(l, "PUT", true, obj, deadline_ns, &st, &answer);
    json_decref(obj);
    if (r != 0) {
        if (r != -EBUSY)
            log_api_error(l, "lease update failed", r, &st);
        return r;
    }
    remember(l, answer, sent);
    return 0;
}

/*
 * One round of client-go's tryAcquireOrRenew. now_ns is when the round
 * started. Returns 0 when we hold the lease after it; otherwise an error,
 * with *ret_taken set when the lease is validly held by someone else.
 */
static int try_acquire_or_renew(struct kop_leader *l, int64_t now_ns, bool *ret_taken)
{
    bool leading = atomic_load(&l->leading);
    int64_t deadline = leading ? l->last_renew_ns + l->renew_ns : now_ns + l->renew_ns;
    struct kop_leader_record rec;
    struct kop_api_status st;
    int r;

    /* Fast path: renew from the object we wrote last, without a GET. */
    if (leading && l->lease && kop_leader_observer_is_mine(&l->obs, l->identity) &&
        kop_leader_observer_held(&l->obs, now_ns)) {
        kop_leader_next_record(&l->obs, KOP_LEADER_RENEW, l->identity, l->lease_s,
                               kop_clock_wall_ns(), &rec);
        r = put_record(l, &rec, l->lease, deadline);
        if (r == 0 || r == -ECANCELED)
            return r;
    }

    r = read_lease(l, deadline);
    if (r == -ENOENT) {
        kop_leader_next_record(&l->obs, KOP_LEADER_CREATE, l->identity, l->lease_s,
                               kop_clock_wall_ns(), &rec);
        json_t *body = NULL, *obj = NULL;
        r = kop_leader_record_to_lease(&rec, NULL, l->ns, l->name, &body);
        if (r != 0)
            return r;
        memset(&st, 0, sizeof(st));
        r = lease_call(l, "POST", false, body, deadline, &st, &obj);
        json_decref(body);
        if (r != 0) {
            if (r != -EEXIST)
                log_api_error(l, "lease create failed", r, &st);
            return r;
        }
        remember(l, obj, now_ns);
        return 0;
    }
    if (r != 0)
        return r;
    enum kop_leader_action act = kop_leader_decide(&l->obs, l->identity, kop_clock_now_ns());
    if (act == KOP_LEADER_WAIT) {
        *ret_taken = true;
        return -EBUSY;
    }
    kop_leader_next_record(&l->obs, act, l->identity, l->lease_s, kop_clock_wall_ns(), &rec);
    return put_record(l, &rec, l->lease, deadline);
}

static void report_leader(struct kop_leader *l)
{
    if (!l->obs.have)
        return;
    const char *h = l->obs.record.holder;
    if (l->reported_any && strcmp(h, l->reported) == 0)
        return;
    l->reported_any = true;
    snprintf(l->reported, sizeof(l->reported), "%s", h);
    pthread_mutex_lock(&l->lock);
    snprintf(l->holder, sizeof(l->holder), "%s", h);
    pthread_mutex_unlock(&l->lock);
    if (h[0] && strcmp(h, l->identity) != 0)
        kop_log(KOP_LOG_INFO, LOGGER, "new leader elected",
                json_pack("{s:s,s:s,s:s}", "lease", l->name, "namespace", l->ns, "leader", h));
    if (l->on_new_leader)
        l->on_new_leader(l->ud, l->reported);
}

static void start_leading(struct kop_leader *l)
{
    atomic_store(&l->leading, true);
    kop_gauge_set(l->m_master, 1);
    kop_log(
        KOP_LOG_INFO, LOGGER, "successfully acquired lease",
        json_pack("{s:s,s:s,s:s}", "lease", l->name, "namespace", l->ns, "identity", l->identity));
    if (l->on_started)
        l->on_started(l->ud);
}

static void stop_leading(struct kop_leader *l, const char *why)
{
    atomic_store(&l->leading, false);
    kop_gauge_set(l->m_master, 0);
    kop_log(
        KOP_LOG_INFO, LOGGER, why,
        json_pack("{s:s,s:s,s:s}", "lease", l->name, "namespace", l->ns, "identity", l->identity));
    if (l->on_stopped)
        l->on_stopped(l->ud);
}

/* Sleep up to ns or until a stop. Returns true when stopping. */
static bool wait_or_stop(struct kop_leader *l, int64_t ns)
{
    int64_t until = kop_clock_now_ns() + (ns > 0 ? ns : 0);
    struct timespec ts = {.tv_sec = (time_t)(until / KOP_NSEC_PER_SEC),
                          .tv_nsec = (long)(until % KOP_NSEC_PER_SEC)};
    pthread_mutex_lock(&l->lock);
    while (!l->stopping && kop_clock_now_ns() < until) {
        if (pthread_cond_timedwait(&l->cond, &l->lock, &ts) == ETIMEDOUT)
            break;
    }
    bool s = l->stopping;
    pthread_mutex_unlock(&l->lock);
    return s;
}

static bool is_stopping(struct kop_leader *l)
{
    pthread_mutex_lock(&l->lock);
    bool s = l->stopping;
    pthread_mutex_unlock(&l->lock);
    return s;
}

/* ReleaseOnCancel: holder "", leaseDurationSeconds 1, transitions kept. */
static int release(struct kop_leader *l)
{
    if (!l->lease || !kop_leader_observer_is_mine(&l->obs, l->identity))
        return 0;
    int64_t now_wall = kop_clock_wall_ns();
    struct kop_leader_record rec;
    memset(&rec, 0, sizeof(rec));
    rec.lease_duration_s = 1;
    rec.acquire_wall_ns = now_wall;
    rec.renew_wall_ns = now_wall;
    rec.transitions = l->obs.record.transitions;
    int64_t deadline = kop_clock_now_ns() + l->renew_ns;
    int r = put_record(l, &rec, l->lease, deadline);
    if (r == -EBUSY) {
        /* 409: the cached Lease is stale (a renewal the stop cut short was
         * stored after all, or another write). Read it once more: still
         * ours, release it on the fresh object; someone else's, there is
         * nothing to release. client-go gives up here and the next leader
         * waits for the lease to expire. */
        r = read_lease(l, deadline);
        if (r != 0)
            return r;
        if (!kop_leader_observer_is_mine(&l->obs, l->identity))
            return 0;
        rec.transitions = l->obs.record.transitions;
        r = put_record(l, &rec, l->lease, deadline);
    }
    if (r == 0)
        kop_log(KOP_LOG_INFO, LOGGER, "released lease",
                json_pack("{s:s,s:s}", "lease", l->name, "namespace", l->ns));
    return r;
}

static void *elector_main(void *arg)
{
    struct kop_leader *l = arg;
    while (!is_stopping(l)) {
        /* Retired and not leading: nothing to renew, nothing to take. */
        if (atomic_load(&l->retired) && !atomic_load(&l->leading)) {
            if (wait_or_stop(l, l->retry_ns))
                break;
            continue;
        }
        int64_t start = kop_clock_now_ns();
        bool taken = false;
        int r = try_acquire_or_renew(l, start, &taken);
        bool leading = atomic_load(&l->leading);
        if (r == 0 && !leading && atomic_load(&l->retired)) {
            /* Acquired by a request that was under way when retire() came:
             * hand it back at once instead of leading. */
            if (release(l) != 0)
                kop_log(KOP_LOG_WARN, LOGGER, "could not release a lease acquired while retiring",
                        json_pack("{s:s,s:s}", "lease", l->name, "namespace", l->ns));
            report_leader(l);
        } else if (r == 0) {
            l->last_renew_ns = start;
            report_leader(l);
            if (!leading)
                start_leading(l);
        } else {
            report_leader(l);
            if (leading && !is_stopping(l)) {
                /* -ECANCELED without a stop: the watchdog aborted the
                 * request at the renew deadline. */
                bool late = r == -ECANCELED || kop_clock_now_ns() >= l->last_renew_ns + l->renew_ns;
                if (taken)
                    stop_leading(l, "lease taken by another holder, stopped leading");
                else if (late)
                    stop_leading(l, "failed to renew lease within the renew deadline, "
                                    "stopped leading");
                if (l->once && !atomic_load(&l->leading))
                    break;
            }
        }
        int64_t wait;
        if (atomic_load(&l->leading)) {
            wait = l->retry_ns;
            int64_t left = l->last_renew_ns + l->renew_ns - kop_clock_now_ns();
            if (left < wait)
                wait = left;
        } else {
            /* wait.Jitter(retry, 1.2): retry .. 2.2 * retry. */
            wait = l->retry_ns + (int64_t)(rand01(l) * 1.2 * (double)l->retry_ns);
        }
        if (wait_or_stop(l, wait))
            break;
    }

    pthread_mutex_lock(&l->lock);
    bool want_release = l->stopping && l->release_on_stop;
    l->releasing = true;
    pthread_mutex_unlock(&l->lock);
    if (atomic_load(&l->leading)) {
        stop_leading(l, "stopping, stopped leading");
        if (want_release)
            l->release_err = release(l);
        report_leader(l);
    }
    return NULL;
}

void kop_leader_retire(struct kop_leader *l)
{
    if (l)
        atomic_store(&l->retired, true);
}

int kop_leader_start(struct kop_leader *l)
{
    assert(l);
    if (l->started)
        return -EALREADY;
    int r = kop_thread_start(&l->watchdog, watchdog_main, l, "lease-watchdog");
    if (r < 0)
        return r;
    r = kop_thread_start(&l->thread, elector_main, l, "lease-elector");
    if (r < 0) {
        pthread_mutex_lock(&l->lock);
        l->wd_quit = true;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->watchdog, NULL);
        return r;
    }
    l->started = true;
    return 0;
}

int kop_leader_stop(struct kop_leader *l, bool release_lease)
{
    assert(l);
    if (!l->started || l->joined)
        return 0;
    pthread_mutex_lock(&l->lock);
    l->stopping = true;
    l->release_on_stop = release_lease;
    kop_client_cancel_fire(l->cancel);
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);

    pthread_mutex_lock(&l->lock);
    l->wd_quit = true;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->watchdog, NULL);
    l->joined = true;
    return l->release_err;
}

void kop_leader_free(struct kop_leader *l)
{
    if (!l)
        return;
    kop_leader_stop(l, false);
    json_decref(l->lease);
    kop_client_cancel_free(l->cancel);
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    free(l->ns);
    free(l->name);
    free(l);
}
