/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Group membership through Leases (see kop/membership.h).
 *
 * DESIGN
 *
 * Threads: this member's Lease is a kop/leader.h elector (its own thread
 * and watchdog); the observer thread lists the Leases every retry period
 * and publishes the live set. The owner thread starts, stops and frees.
 *
 * State: the observers (name -> last record and when it last changed)
 * belong to the observer thread; the published set and its generation
 * are guarded by lock, which no request is made under.
 */
#include "kop/membership.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/log.h"
#include "kop/thread.h"

#define LOGGER "membership"

static const struct kop_resource lease_res = {
    .group = "coordination.k8s.io",
    .version = "v1",
    .resource = "leases",
    .namespaced = true,
};

struct kop_membership {
    struct kop_client *client;
    char *ns;
    char *prefix;
    char *identity;
    char *lease_name;
    int64_t retry_ms;
    struct kop_leader *elector;

    pthread_t thread;
    bool started;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stopping;   /* under lock */
    json_t *members; /* under lock; NULL before the first list */
    uint64_t generation;
};

bool kop_membership_identity_valid(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return true;
}

/* The record fields whose change restarts the expiry clock (what
 * kop_leader_record_equal compares). */
static bool same_record(const json_t *st, const struct kop_leader_record *rec)
{
    return strcmp(json_string_value(json_object_get(st, "holder")), rec->holder) == 0 &&
           json_integer_value(json_object_get(st, "renew")) == rec->renew_wall_ns &&
           json_integer_value(json_object_get(st, "acquire")) == rec->acquire_wall_ns &&
           json_integer_value(json_object_get(st, "duration")) == rec->lease_duration_s &&
           json_integer_value(json_object_get(st, "transitions")) == rec->transitions;
}

json_t *kop_membership_live(const json_t *leases, const char *prefix, json_t *observers,
                            int64_t now_ns)
{
    json_t *live = json_array();
    json_t *seen = json_object();
    if (!live || !seen)
        goto fail;
    size_t plen = strlen(prefix);
    size_t i;
    json_t *lease;
    json_array_foreach(leases, i, lease)
    {
        const char *name =
            json_string_value(json_object_get(json_object_get(lease, "metadata"), "name"));
        struct kop_leader_record rec;
        if (!name || strncmp(name, prefix, plen) != 0 ||
            kop_leader_record_from_lease(lease, &rec) < 0 || rec.holder_too_long)
            continue;
        json_t *st = json_object_get(observers, name);
        if (!st || !same_record(st, &rec)) {
            st =
                json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "holder", rec.holder, "renew",
                          (json_int_t)rec.renew_wall_ns, "acquire", (json_int_t)rec.acquire_wall_ns,
                          "duration", (json_int_t)rec.lease_duration_s, "transitions",
                          (json_int_t)rec.transitions, "seen", (json_int_t)now_ns);
            if (!st || json_object_set_new(observers, name, st) < 0)
                goto fail;
        }
        if (json_object_set(seen, name, json_true()) < 0)
            goto fail;
        int64_t seen_ns = json_integer_value(json_object_get(st, "seen"));
        int64_t dur_ns = rec.lease_duration_s * KOP_NSEC_PER_SEC;
        /* Only the member's own identity counts as the holder of its
         * Lease: anything else written there is not a member. */
        if (rec.holder[0] && strcmp(rec.holder, name + plen) == 0 && now_ns < seen_ns + dur_ns &&
            json_array_append_new(live, json_string(rec.holder)) < 0)
            goto fail;
    }
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(observers, tmp, k, v)
    {
        if (!json_object_get(seen, k))
            json_object_del(observers, k);
    }
    json_decref(seen);
    /* Sort (few members: insertion sort). */
    size_t n = json_array_size(live);
    for (size_t a = 1; a < n; a++) {
        for (size_t b = a; b > 0; b--) {
            json_t *x = json_array_get(live, b - 1), *y = json_array_get(live, b);
            if (strcmp(json_string_value(x), json_string_value(y)) <= 0)
                break;
            json_incref(x);
            json_array_set(live, b - 1, y);
            json_array_set_new(live, b, x);
        }
    }
    return live;
fail:
    json_decref(live);
    json_decref(seen);
    return NULL;
}

static bool wait_stop(struct kop_membership *m, int64_t ms)
{
    struct timespec ts = kop_clock_deadline_ms(ms);
    pthread_mutex_lock(&m->lock);
    while (!m->stopping) {
        if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) == ETIMEDOUT)
            break;
    }
    bool stop = m->stopping;
    pthread_mutex_unlock(&m->lock);
    return stop;
}

static void *observe_main(void *arg)
{
    struct kop_membership *m = arg;
    json_t *observers = json_object();
    do {
        json_t *list = NULL;
        struct kop_api_status st;
        memset(&st, 0, sizeof(st));
        int r = kop_client_list(m->client, &lease_res, m->ns, NULL, &st, &list);
        if (r < 0) {
            kop_log(KOP_LOG_WARN, LOGGER, "cannot list the member leases",
                    json_pack("{s:i, s:s}", "errno", -r, "message", st.message));
            continue;
        }
        json_t *live = observers ? kop_membership_live(json_object_get(list, "items"), m->prefix,
                                                       observers, kop_clock_now_ns())
                                 : NULL;
        json_decref(list);
        if (!live)
            continue;
        pthread_mutex_lock(&m->lock);
        bool changed = !m->members || !json_equal(m->members, live);
        if (changed) {
            json_decref(m->members);
            m->members = json_incref(live);
            m->generation++;
        }
        pthread_mutex_unlock(&m->lock);
        if (changed)
            kop_log(KOP_LOG_INFO, LOGGER, "members changed", json_pack("{s:O}", "members", live));
        json_decref(live);
    } while (!wait_stop(m, m->retry_ms));
    json_decref(observers);
    return NULL;
}

int kop_membership_new(const struct kop_membership_options *o, struct kop_membership **ret)
{
    assert(o);
    assert(o->client);
    assert(o->namespace);
    assert(o->prefix);
    assert(o->identity);
    assert(ret);
    if (!kop_membership_identity_valid(o->identity) ||
        strlen(o->prefix) + strlen(o->identity) > 253)
        return -EINVAL;
    struct kop_membership *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    int r = -ENOMEM;
    pthread_mutex_init(&m->lock, NULL);
    if (kop_clock_cond_init(&m->cond) != 0) {
        pthread_mutex_destroy(&m->lock);
        free(m);
        return -ENOMEM;
    }
    m->client = o->client;
    m->retry_ms = o->retry_period_ms > 0 ? o->retry_period_ms : 2000;
    m->ns = strdup(o->namespace);
    m->prefix = strdup(o->prefix);
    m->identity = strdup(o->identity);
    size_t n = strlen(o->prefix) + strlen(o->identity) + 1;
    m->lease_name = malloc(n);
    if (!m->ns || !m->prefix || !m->identity || !m->lease_name)
        goto fail;
    memcpy(m->lease_name, o->prefix, strlen(o->prefix));
    memcpy(m->lease_name + strlen(o->prefix), o->identity, strlen(o->identity) + 1);
    const struct kop_leader_options lo = {
        .client = o->client,
        .namespace = o->namespace,
        .name = m->lease_name,
        .identity = o->identity,
        .lease_duration_ms = o->lease_duration_ms,
        .renew_deadline_ms = o->renew_deadline_ms,
        .retry_period_ms = o->retry_period_ms,
        .on_started_leading = o->on_joined,
        .on_stopped_leading = o->on_left,
        .ud = o->ud,
        .metrics = o->metrics,
    };
    r = kop_leader_new(&lo, &m->elector);
    if (r < 0)
        goto fail;
    *ret = m;
    return 0;
fail:
    kop_membership_free(m);
    return r;
}

int kop_membership_start(struct kop_membership *m)
{
    assert(m);
    if (m->started)
        return -EINVAL;
    int r = kop_leader_start(m->elector);
    if (r < 0)
        return r;
    r = kop_thread_start(&m->thread, observe_main, m, "membership");
    if (r < 0)
        return r;
    m->started = true;
    return 0;
}

void kop_membership_stop(struct kop_membership *m, bool release)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stopping = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    if (m->started) {
        pthread_join(m->thread, NULL);
        m->started = false;
    }
    if (m->elector)
        (void)kop_leader_stop(m->elector, release);
}

void kop_membership_free(struct kop_membership *m)
{
    if (!m)
        return;
    kop_membership_stop(m, false);
    kop_leader_free(m->elector);
    json_decref(m->members);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    free(m->ns);
    free(m->prefix);
    free(m->identity);
    free(m->lease_name);
    free(m);
}

int kop_membership_members(struct kop_membership *m, json_t **ret_members, uint64_t *ret_generation)
{
    pthread_mutex_lock(&m->lock);
    json_t *v = m->members ? json_deep_copy(m->members) : NULL;
    uint64_t g = m->generation;
    bool have = m->members != NULL;
    pthread_mutex_unlock(&m->lock);
    if (!have)
        return -EAGAIN;
    if (!v)
        return -ENOMEM;
    *ret_members = v;
    if (ret_generation)
        *ret_generation = g;
    return 0;
}

bool kop_membership_joined(const struct kop_membership *m)
{
    assert(m);
    return kop_leader_is_leader(m->elector);
}

const char *kop_membership_identity(const struct kop_membership *m)
{
    return m->identity;
}
