/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sharding MyResources across replicas (see kop/sharder.h).
 *
 * DESIGN
 *
 * Threads: the sharder thread runs a pass every period while this replica
 * holds the leader Lease (set_active from the elector's callbacks). The
 * gate runs on the controller's worker threads, the webhook handler on
 * the HTTP server's; both only read the membership (its own lock) and
 * the released map (rel_lock); the webhook handlers share one ring per
 * membership generation (ring_lock guards the pointer; the ring itself is
 * immutable and reference-counted). No request is made under a lock.
 *
 * State: the pass state (drains this sharder asked for, the membership
 * generation last balanced, the shards reported in the gauge) belongs to
 * the sharder thread and is reset when the replica becomes the sharder:
 * a new sharder has no memory of its predecessor's drains, so at worst it
 * asks a drained object to drain once more.
 *
 * Why the drain protocol is safe: the owner's workqueue hands a key to
 * one worker at a time, and the gate runs inside that worker's reconcile;
 * the worker that removes the drain label is therefore the only one
 * working on the object, and the released map refuses every later
 * reconcile of it on this replica for two lease durations
 * (KOP_SHARD_REFUSE_LEASES). The sharder changes the owner label only after
 * it saw the drain label gone, with the resourceVersion it read as a
 * precondition, and only within one lease duration of a time the release
 * cannot precede (the fence: when it asked for the drain, or the start of
 * a later list that still showed the drain label), else it asks for the
 * drain again (kop_shard_move_in_time). So the owner change lands, and
 * reaches the old owner's informer, while the old owner still refuses the
 * object, as long as a request and a watch event take less than a lease
 * duration: the assumption leader election makes too (the move's token
 * bucket wait is part of that request). The new owner's informer sees the
 * object only after that write. An owner whose membership Lease expired is
 * gone: its membership elector stopped its reconciles at the renew
 * deadline, before the Lease could expire (kop/leader.h), so its objects
 * move at once.
 */
#include "kop/sharder.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/http.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/log.h"
#include "kop/membership.h"
#include "kop/metrics.h"
#include "kop/myresource.h"
#include "kop/thread.h"

#define LOGGER "sharder"

static const struct kop_resource res_myr = {KOP_MYRESOURCE_GROUP, "v1", KOP_MYRESOURCE_RESOURCE,
                                            true};

/* ---- ring ---------------------------------------------------------------------- */

/*
 * Positions. An object's position is plain FNV-1a-64 of its uid, the hash
 * that the upstream server-side sharding of list and watch (KEP-5866) puts
 * behind shardSelector=shardRange(object.metadata.uid, start, end):
 * kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/sharding/hash.go
 * (FNV-1a 64 of the field's bytes), selector.go (start <= hash < end, ranges
 * joined by ||) and staging/src/k8s.io/apiserver/pkg/sharding/parser.go
 * (16-digit 0x bounds, 0x10000000000000000 for 2^64). A member owns ring
 * arcs, which are such ranges (kop_shard_ring_ranges), so each replica's
 * share is a selector the apiserver could evaluate.
 *
 * Member points are kop's own choice: mix(FNV-1a-64("<member>#<i>")).
 * FNV-1a alone barely moves the high bits when only the last bytes differ
 * ("kop-0#1", "kop-0#2"), which would bunch one member's points together.
 * UUIDv4 strings need no mixing: their FNV-1a is uniform in the high bits
 * (tests/test_sharder.c measures it).
 */

uint64_t kop_sharder_fnv1a64(const char *s)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h ^= *p;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

/* The MurmurHash3 64-bit finalizer, a bijection. */
uint64_t kop_sharder_mix64(uint64_t h)
{
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

struct point {
    uint64_t hash;
    size_t member;
};

struct kop_shard_ring {
    atomic_int refs;
    char **members;
    size_t n_members;
    struct point *points;
    size_t n_points;
};

static int cmp_point(const void *a, const void *b)
{
    const struct point *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    /* Equal hashes (unlikely): order by member so every replica agrees. */
    return x->member < y->member ? -1 : x->member > y->member;
}

struct kop_shard_ring *kop_shard_ring_ref(struct kop_shard_ring *r)
{
    atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

void kop_shard_ring_unref(struct kop_shard_ring *r)
{
    if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < r->n_members; i++)
        free(r->members[i]);
    free(r->members);
    free(r->points);
    free(r);
}

int kop_shard_ring_new(const json_t *members, struct kop_shard_ring **ret)
{
    if (!json_is_array(members))
        return -EINVAL;
    size_t n = json_array_size(members);
    for (size_t i = 0; i < n; i++) {
        if (!json_is_string(json_array_get(members, i)))
            return -EINVAL;
    }
    struct kop_shard_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    atomic_init(&r->refs, 1);
    /* Members sorted, so equal sets give equal rings whatever the order. */
    r->members = calloc(n ? n : 1, sizeof(*r->members));
    r->points = calloc(n ? n * KOP_SHARD_VNODES : 1, sizeof(*r->points));
    if (!r->members || !r->points)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        r->members[i] = strdup(json_string_value(json_array_get(members, i)));
        if (!r->members[i])
            goto fail;
        r->n_members++;
    }
    for (size_t i = 1; i < n; i++) {
        for (size_t j = i; j > 0 && strcmp(r->members[j - 1], r->members[j]) > 0; j--) {
            char *t = r->members[j - 1];
            r->members[j - 1] = r->members[j];
            r->members[j] = t;
        }
    }
    for (size_t i = 0; i < n; i++) {
        for (unsigned v = 0; v < KOP_SHARD_VNODES; v++) {
            char buf[96];
            int len = snprintf(buf, sizeof(buf), "%s#%u", r->members[i], v);
            if (len < 0 || (size_t)len >= sizeof(buf))
                goto fail; /* identities are DNS labels: 63 bytes at most */
            r->points[r->n_points++] =
                (struct point){kop_sharder_mix64(kop_sharder_fnv1a64(buf)), i};
        }
    }
    qsort(r->points, r->n_points, sizeof(*r->points), cmp_point);
    *ret = r;
    return 0;
fail:
    kop_shard_ring_unref(r);
    return -ENOMEM;
}

static bool ring_has(const struct kop_shard_ring *r, const char *member)
{
    for (size_t i = 0; r && i < r->n_members; i++) {
        if (strcmp(r->members[i], member) == 0)
            return true;
    }
    return false;
}

/* Index of the point whose arc holds pos: the last point at or below pos;
 * below the first point, the last point (its arc wraps through 2^64). */
static size_t arc_of(const struct kop_shard_ring *r, uint64_t pos)
{
    size_t lo = 0, hi = r->n_points;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->points[mid].hash <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? lo - 1 : r->n_points - 1;
}

const char *kop_shard_ring_owner_at(const struct kop_shard_ring *r, uint64_t pos)
{
    assert(r);
    if (r->n_points == 0)
        return NULL;
    return r->members[r->points[arc_of(r, pos)].member];
}

const char *kop_shard_ring_owner(const struct kop_shard_ring *r, const char *uid)
{
    return kop_shard_ring_owner_at(r, kop_sharder_fnv1a64(uid));
}

int kop_shard_ring_ranges(const struct kop_shard_ring *r, const char *member,
                          struct kop_shard_range **ret, size_t *ret_n)
{
    size_t m = 0;
    assert(r);
    assert(member);
    while (m < r->n_members && strcmp(r->members[m], member) != 0)
        m++;
    if (m == r->n_members)
        return -ENOENT;
    /* At most one range per point, plus the wrap split in two. */
    struct kop_shard_range *out = calloc(r->n_points + 1, sizeof(*out));
    if (!out)
        return -ENOMEM;
    size_t n = 0, np = r->n_points;
    /* The arc below the first point belongs to the last point. */
    if (r->points[np - 1].member == m && r->points[0].hash > 0)
        out[n++] = (struct kop_shard_range){0, r->points[0].hash - 1};
    for (size_t i = 0; i < np; i++) {
        if (r->points[i].member != m)
            continue;
        uint64_t start = r->points[i].hash;
        uint64_t last = i + 1 < np ? r->points[i + 1].hash - 1 : UINT64_MAX;
        if (i + 1 < np && r->points[i + 1].hash == start)
            continue; /* an empty arc: an equal point after it wins */
        if (n > 0 && out[n - 1].last != UINT64_MAX && out[n - 1].last + 1 == start)
            out[n - 1].last = last; /* adjacent arcs of one member: one range */
        else
            out[n++] = (struct kop_shard_range){start, last};
    }
    *ret = out;
    *ret_n = n;
    return 0;
}

int kop_shard_ring_selector(const struct kop_shard_ring *r, const char *member, char **ret)
{
    struct kop_shard_range *rg = NULL;
    size_t n = 0;
    int e = kop_shard_ring_ranges(r, member, &rg, &n);
    if (e < 0)
        return e;
    if (n == 0) { /* only empty arcs; "" would select everything */
        free(rg);
        return -ENOENT;
    }
    /* shardRange(object.metadata.uid, '0x' 16 digits, '0x' 16 or 17) || */
    static const char fmt[] = "shardRange(object.metadata.uid, '0x%016" PRIx64 "', '0x%s') || ";
    size_t cap = n * (sizeof(fmt) + 40) + 1, len = 0;
    char *s = malloc(cap);
    if (!s) {
        free(rg);
        return -ENOMEM;
    }
    s[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        char end[24];
        if (rg[i].last == UINT64_MAX)
            snprintf(end, sizeof(end), "10000000000000000");
        else
            snprintf(end, sizeof(end), "%016" PRIx64, rg[i].last + 1);
        int w = snprintf(s + len, cap - len, fmt, rg[i].start, end);
        if (w < 0 || (size_t)w >= cap - len) {
            free(s);
            free(rg);
            return -ENOMEM;
        }
        len += (size_t)w;
    }
    if (len >= 4)
        s[len - 4] = '\0'; /* the last " || " */
    free(rg);
    *ret = s;
    return 0;
}

/* ---- decisions ------------------------------------------------------------------ */

enum kop_shard_action kop_shard_decide(const char *owner, bool owner_live, bool draining,
                                       bool drain_requested, const char *target, bool rebalance)
{
    if (!owner || !*owner || !owner_live)
        return KOP_SHARD_ASSIGN;
    if (strcmp(owner, target) == 0)
        return KOP_SHARD_KEEP;
    if (draining)
        return drain_requested || rebalance ? KOP_SHARD_WAIT : KOP_SHARD_KEEP;
    if (drain_requested)
        return KOP_SHARD_MOVE;
    return rebalance ? KOP_SHARD_DRAIN : KOP_SHARD_KEEP;
}

bool kop_shard_move_in_time(int64_t fence_ns, int64_t now_ns, int64_t lease_ns)
{
    return now_ns - fence_ns < lease_ns;
}

enum kop_shard_gate kop_shard_gate_decide(const char *owner, const char *self, bool draining,
                                          bool released_recently)
{
    assert(self);
    if (!owner || strcmp(owner, self) != 0)
        return KOP_SHARD_SKIP;
    if (draining)
        return KOP_SHARD_RELEASE;
    return released_recently ? KOP_SHARD_SKIP : KOP_SHARD_RECONCILE;
}

/* ---- runtime ------------------------------------------------------------------- */

struct kop_sharder {
    struct kop_client *client;
    struct kop_membership *membership;
    char *ns;
    char *selector;
    int64_t period_ms, lease_ms;
    struct kop_metric_family *f_objects;
    struct kop_metric *m_moves, *m_drain;

    pthread_t thread;
    bool started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stopping; /* under lock */
    atomic_bool active;
    atomic_bool reset; /* became active: forget the pass state */

    /* Sharder thread only. */
    json_t *requested; /* uid -> monotonic ns when the drain label was set */
    json_t *fence;     /* uid -> monotonic ns the owner's release cannot precede */
    json_t *shards;    /* identities reported in the gauge */
    bool balanced;
    uint64_t balanced_gen;

    pthread_mutex_t rel_lock;
    json_t *released; /* uid -> monotonic ns; under rel_lock */

    pthread_mutex_t ring_lock;
    struct kop_shard_ring *ring; /* the webhook's, of membership generation ring_gen */
    uint64_t ring_gen;           /* under ring_lock */
};

static const char *label(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

static const char *meta_str(const json_t *obj, const char *key)
{
    const char *v = json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
    return v ? v : "";
}

static bool is_member(const json_t *members, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(members, i, v)
    {
        if (strcmp(json_string_value(v), id) == 0)
            return true;
    }
    return false;
}

/* Merge-patch the shard labels of obj: owner (NULL: leave), drain ("":
 * remove, NULL: leave), with obj's resourceVersion as precondition. */
static int patch_labels(struct kop_client *c, const json_t *obj, const char *owner,
                        const char *drain, bool precondition)
{
    json_t *labels = json_object();
    json_t *md = json_pack("{s:o}", "labels", labels);
    json_t *patch = json_pack("{s:o}", "metadata", md);
    if (!labels || !md || !patch) {
        json_decref(patch);
        return -ENOMEM;
    }
    if (owner)
        json_object_set_new(labels, KOP_SHARDER_OWNER_LABEL, json_string(owner));
    if (drain)
        json_object_set_new(labels, KOP_SHARDER_DRAIN_LABEL,
                            *drain ? json_string(drain) : json_null());
    if (precondition)
        json_object_set_new(md, "resourceVersion", json_string(meta_str(obj, "resourceVersion")));
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    int r = kop_client_patch(c, &res_myr, meta_str(obj, "namespace"), meta_str(obj, "name"), patch,
                             &st, NULL);
    json_decref(patch);
    if (r < 0 && r != -EEXIST && r != -EBUSY && r != -ENOENT)
        kop_log(KOP_LOG_WARN, LOGGER, "cannot write the shard labels",
                json_pack("{s:s, s:s, s:i, s:s}", "namespace", meta_str(obj, "namespace"), "name",
                          meta_str(obj, "name"), "errno", -r, "message", st.message));
    return r;
}

static void count(json_t *counts, const char *owner)
{
    if (!owner)
        return;
    json_int_t n = json_integer_value(json_object_get(counts, owner));
    json_object_set_new(counts, owner, json_integer(n + 1));
}

/* Full passes while nothing changes: one in this many periods, to label
 * objects the webhook did not (failurePolicy Ignore, created before
 * --sharding); a membership change or a pending move runs one every period. */
#define IDLE_PASS_EVERY 5

/* What one pass did, for its log line. */
struct pass_tally {
    size_t assigned, drains, moves, redrains;
    bool pending; /* a move waits: the pass is not balanced */
};

/* Decide and act for one listed object; returns its owner after the pass
 * (NULL: none, or the object is skipped). */
static const char *shard_object(struct kop_sharder *s, const json_t *obj,
                                const struct kop_shard_ring *ring, const json_t *members,
                                bool rebalance, int64_t list_ns, json_t *seen, struct pass_tally *t)
{
    const char *uid = meta_str(obj, "uid");
    if (!*uid ||
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "deletionTimestamp")))
        return NULL;
    json_object_set(seen, uid, json_true());
    const char *owner = label(obj, KOP_SHARDER_OWNER_LABEL);
    const char *drain = label(obj, KOP_SHARDER_DRAIN_LABEL);
    bool draining = drain && strcmp(drain, "true") == 0;
    const json_t *req = json_object_get(s->requested, uid);
    if (req && draining) {
        json_object_set_new(s->fence, uid, json_integer(list_ns)); /* not released yet */
    } else if (req &&
               !kop_shard_move_in_time(json_integer_value(json_object_get(s->fence, uid)),
                                       kop_clock_now_ns(), s->lease_ms * KOP_NSEC_PER_MSEC)) {
        /* Released too long ago for a safe move (the old owner may take
         * the object up again): ask for the drain again. */
        json_object_del(s->requested, uid);
        json_object_del(s->fence, uid);
        req = NULL;
        t->redrains++;
    }
    const char *target = kop_shard_ring_owner(ring, uid);
    bool live = owner && is_member(members, owner);
    int r;
    switch (kop_shard_decide(owner, live, draining, req != NULL, target, rebalance)) {
    case KOP_SHARD_KEEP:
        break;
    case KOP_SHARD_WAIT:
        t->pending = true;
        break;
    case KOP_SHARD_ASSIGN:
        r = patch_labels(s->client, obj, target, drain ? "" : NULL, true);
        if (r < 0) {
            t->pending = true;
            break;
        }
        t->assigned++;
        if (owner && *owner)
            kop_counter_inc(s->m_moves);
        json_object_del(s->requested, uid);
        json_object_del(s->fence, uid);
        return target;
    case KOP_SHARD_DRAIN: {
        int64_t asked = kop_clock_now_ns(); /* before the label can be there */
        r = patch_labels(s->client, obj, NULL, "true", true);
        if (r == 0) {
            json_object_set_new(s->requested, uid, json_integer(asked));
            json_object_set_new(s->fence, uid, json_integer(asked));
            t->drains++;
        }
        t->pending = true;
        break;
    }
    case KOP_SHARD_MOVE:
        r = patch_labels(s->client, obj, target, NULL, true);
        if (r == 0) {
            t->moves++;
            kop_counter_inc(s->m_moves);
            kop_histogram_observe(s->m_drain,
                                  (double)(kop_clock_now_ns() - json_integer_value(req)) / 1e9);
        }
        /* Moved, or changed since (drain again). */
        json_object_del(s->requested, uid);
        json_object_del(s->fence, uid);
        if (r != 0) {
            t->pending = true;
            break;
        }
        return target;
    }
    return owner;
}

/* After a pass: forget drains of objects that are gone, and publish the
 * objects per shard. */
static void pass_done(struct kop_sharder *s, const json_t *seen, json_t *counts)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(s->requested, tmp, k, v)
    {
        if (!json_object_get(seen, k))
            json_object_del(s->requested, k);
    }
    json_object_foreach_safe(s->fence, tmp, k, v)
    {
        if (!json_object_get(s->requested, k))
            json_object_del(s->fence, k);
    }
    json_object_foreach(s->shards, k, v)
    {
        if (!json_object_get(counts, k))
            kop_gauge_set(kop_metric_child(s->f_objects, k), 0);
    }
    json_object_foreach(counts, k, v)
    {
        kop_gauge_set(kop_metric_child(s->f_objects, k), (double)json_integer_value(v));
        json_object_set(s->shards, k, json_true());
    }
}

/* One pass (sharder thread); with idle, only when the membership changed
 * since the last completed pass. */
static void pass(struct kop_sharder *s, bool idle)
{
    json_t *members = NULL, *list = NULL, *counts = json_object(), *seen = json_object();
    struct kop_shard_ring *ring = NULL;
    uint64_t gen = 0;
    if (!counts || !seen || kop_membership_members(s->membership, &members, &gen) < 0 ||
        json_array_size(members) == 0 || kop_shard_ring_new(members, &ring) < 0)
        goto out;
    bool rebalance = !s->balanced || gen != s->balanced_gen;
    if (idle && !rebalance)
        goto out;
    const struct kop_list_options lo = {
        .accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                  "application/json",
    };
    struct kop_api_status st;
    memset(&st, 0, sizeof(st));
    /* Before the request: a drain label this list shows was still there
     * at this time or later. */
    int64_t list_ns = kop_clock_now_ns();
    int r = kop_client_list(s->client, &res_myr, s->ns, &lo, &st, &list);
    if (r < 0) {
        kop_log(KOP_LOG_WARN, LOGGER, "cannot list MyResources",
                json_pack("{s:i, s:s}", "errno", -r, "message", st.message));
        goto out;
    }
    struct pass_tally t = {0};
    size_t i;
    json_t *obj;
    json_array_foreach(json_object_get(list, "items"), i, obj)
    {
        count(counts, shard_object(s, obj, ring, members, rebalance, list_ns, seen, &t));
    }
    pass_done(s, seen, counts);
    if (t.assigned || t.drains || t.moves || (rebalance && !t.pending))
        kop_log(KOP_LOG_INFO, LOGGER, "sharder pass",
                json_pack("{s:O, s:I, s:b, s:I, s:I, s:I, s:I, s:b}", "members", members, "objects",
                          (json_int_t)json_array_size(json_object_get(list, "items")), "rebalance",
                          rebalance, "assigned", (json_int_t)t.assigned, "drainsRequested",
                          (json_int_t)t.drains, "drainsRenewed", (json_int_t)t.redrains, "moved",
                          (json_int_t)t.moves, "pending", t.pending));
    if (!t.pending) {
        s->balanced = true;
        s->balanced_gen = gen;
    }
out:
    kop_shard_ring_unref(ring);
    json_decref(members);
    json_decref(list);
    json_decref(counts);
    json_decref(seen);
}

static bool wait_stop(struct kop_sharder *s, int64_t ms)
{
    struct timespec ts = kop_clock_deadline_ms(ms);
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
            break;
    }
    bool stop = s->stopping;
    pthread_mutex_unlock(&s->lock);
    return stop;
}

static void *sharder_main(void *arg)
{
    struct kop_sharder *s = arg;
    unsigned tick = 0;
    while (!wait_stop(s, s->period_ms)) {
        if (!atomic_load(&s->active))
            continue;
        if (atomic_exchange(&s->reset, false)) {
            json_object_clear(s->requested);
            json_object_clear(s->fence);
            s->balanced = false;
        }
        pass(s, ++tick % IDLE_PASS_EVERY != 0);
    }
    return NULL;
}

int kop_sharder_new(const struct kop_sharder_options *o, struct kop_sharder **ret)
{
    assert(o);
    assert(o->client);
    assert(o->membership);
    assert(ret);
    struct kop_sharder *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->rel_lock, NULL);
    pthread_mutex_init(&s->ring_lock, NULL);
    if (kop_clock_cond_init(&s->cond) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->rel_lock);
        pthread_mutex_destroy(&s->ring_lock);
        free(s);
        return -ENOMEM;
    }
    s->client = o->client;
    s->membership = o->membership;
    s->period_ms = o->period_ms > 0 ? o->period_ms : 2000;
    s->lease_ms = o->lease_duration_ms > 0 ? o->lease_duration_ms : 15000;
    const char *id = kop_membership_identity(o->membership);
    size_t n = strlen(KOP_SHARDER_OWNER_LABEL) + strlen(id) + 2;
    s->selector = malloc(n);
    if (s->selector)
        snprintf(s->selector, n, "%s=%s", KOP_SHARDER_OWNER_LABEL, id);
    s->ns = o->namespace && *o->namespace ? strdup(o->namespace) : NULL;
    s->requested = json_object();
    s->fence = json_object();
    s->shards = json_object();
    s->released = json_object();
    struct kop_metrics *m = o->metrics ? o->metrics : kop_metrics_global();
    static const char *const shard_labels[] = {"shard", NULL};
    double buckets[12];
    kop_metrics_exp_buckets(0.05, 2, 12, buckets);
    s->f_objects = kop_metrics_register(m, KOP_METRIC_GAUGE, "kop_shard_objects",
                                        "MyResources per owner replica at the sharder's last pass.",
                                        shard_labels, NULL, 0);
    s->m_moves =
        kop_metric_child(kop_metrics_register(m, KOP_METRIC_COUNTER, "kop_shard_moves_total",
                                              "Owner label changes of MyResources that "
                                              "had an owner.",
                                              NULL, NULL, 0));
    s->m_drain =
        kop_metric_child(kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "kop_shard_drain_seconds",
                                              "From the drain label set to the owner "
                                              "label changed.",
                                              NULL, buckets, 12));
    if (!s->selector || (o->namespace && *o->namespace && !s->ns) || !s->requested || !s->fence ||
        !s->shards || !s->released) {
        kop_sharder_free(s);
        return -ENOMEM;
    }
    *ret = s;
    return 0;
}

int kop_sharder_start(struct kop_sharder *s)
{
    if (s->started)
        return -EALREADY;
    int r = kop_thread_start(&s->thread, sharder_main, s, "sharder");
    s->started = r == 0;
    return r;
}

void kop_sharder_set_active(struct kop_sharder *s, bool active)
{
    if (active)
        atomic_store(&s->reset, true);
    atomic_store(&s->active, active);
    kop_log(KOP_LOG_INFO, LOGGER, active ? "this replica is the sharder" : "sharder stopped", NULL);
}

void kop_sharder_stop(struct kop_sharder *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (s->started) {
        pthread_join(s->thread, NULL);
        s->started = false;
    }
}

void kop_sharder_free(struct kop_sharder *s)
{
    if (!s)
        return;
    kop_sharder_stop(s);
    json_decref(s->requested);
    json_decref(s->fence);
    json_decref(s->shards);
    json_decref(s->released);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->rel_lock);
    pthread_mutex_destroy(&s->ring_lock);
    kop_shard_ring_unref(s->ring);
    free(s->selector);
    free(s->ns);
    free(s);
}

const char *kop_sharder_selector(const struct kop_sharder *s)
{
    return s->selector;
}

const char *kop_sharder_identity(const struct kop_sharder *s)
{
    return kop_membership_identity(s->membership);
}

int64_t kop_sharder_gate(void *ud, struct kop_client *client, const char *key, const json_t *obj)
{
    struct kop_sharder *s = ud;
    int64_t refuse_ns = KOP_SHARD_REFUSE_LEASES * s->lease_ms * KOP_NSEC_PER_MSEC;
    int64_t now = kop_clock_now_ns();
    if (!obj) {
        /* Moved away (or deleted): a later return is a new assignment. */
        pthread_mutex_lock(&s->rel_lock);
        json_object_del(s->released, key);
        pthread_mutex_unlock(&s->rel_lock);
        return -1;
    }
    const char *drain = label(obj, KOP_SHARDER_DRAIN_LABEL);
    bool draining = drain && strcmp(drain, "true") == 0;
    pthread_mutex_lock(&s->rel_lock);
    const json_t *t = json_object_get(s->released, key);
    int64_t since = t ? now - json_integer_value(t) : refuse_ns;
    enum kop_shard_gate g = kop_shard_gate_decide(
        label(obj, KOP_SHARDER_OWNER_LABEL), kop_sharder_identity(s), draining, since < refuse_ns);
    if (g == KOP_SHARD_RELEASE) {
        /* Refuse from now on, before the label is gone; drop old entries. */
        const char *k;
        json_t *v;
        void *tmp;
        json_object_foreach_safe(s->released, tmp, k, v)
        {
            if (now - json_integer_value(v) >= refuse_ns)
                json_object_del(s->released, k);
        }
        json_object_set_new(s->released, key, json_integer(now));
    }
    pthread_mutex_unlock(&s->rel_lock);
    switch (g) {
    case KOP_SHARD_RECONCILE:
        return 0;
    case KOP_SHARD_SKIP:
        /* Released: look again when the refusal ends, in case the object
         * came back to this replica before it left the cache. */
        return since < refuse_ns ? refuse_ns - since + KOP_NSEC_PER_MSEC : -1;
    case KOP_SHARD_RELEASE:
        break;
    }
    int r = patch_labels(client, obj, NULL, "", false);
    kop_log(r == 0 ? KOP_LOG_INFO : KOP_LOG_WARN, LOGGER,
            r == 0 ? "released a draining MyResource" : "cannot release a MyResource",
            json_pack("{s:s, s:s}", "namespace", meta_str(obj, "namespace"), "name",
                      meta_str(obj, "name")));
    return r == 0 ? -1 : KOP_NSEC_PER_SEC; /* a failed release is tried again */
}

/* ---- the mutating webhook ---------------------------------------------------------- */

/* Strings handed to the HTTP server come from kop_json_dump (plain malloc):
 * json_dumps memory carries the arena hook's header (kop/arena.h). */

static char *review_answer(const char *api_version, const char *uid, const char *patch_b64)
{
    json_t *resp = json_pack("{s:s, s:b}", "uid", uid, "allowed", 1);
    if (resp && patch_b64) {
        json_object_set_new(resp, "patchType", json_string("JSONPatch"));
        json_object_set_new(resp, "patch", json_string(patch_b64));
    }
    json_t *rev = json_pack("{s:s, s:s, s:o*}", "apiVersion", api_version, "kind",
                            "AdmissionReview", "response", resp);
    char *out = NULL;
    if (rev && kop_json_dump(rev, JSON_COMPACT, &out, NULL) < 0)
        out = NULL;
    json_decref(rev);
    return out;
}

int kop_sharder_mutate(const char *body, size_t len, const struct kop_shard_ring *ring,
                       char **ret_body)
{
    json_t *rev = json_loadb(body, len, 0, NULL);
    const json_t *req = json_object_get(rev, "request");
    const char *av = json_string_value(json_object_get(rev, "apiVersion"));
    const char *ruid = json_string_value(json_object_get(req, "uid"));
    const char *kind = json_string_value(json_object_get(rev, "kind"));
    int code = 200;
    char *out = NULL, *b64 = NULL, *ptxt = NULL;
    if (!json_is_object(req) || !ruid || !av || !kind || strcmp(kind, "AdmissionReview") != 0 ||
        (strcmp(av, "admission.k8s.io/v1") != 0 && strcmp(av, "admission.k8s.io/v1beta1") != 0)) {
        code = 400;
        out = strdup("{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                     "\"message\":\"expected an admission.k8s.io AdmissionReview with a "
                     "request\",\"reason\":\"BadRequest\",\"code\":400}");
        goto out;
    }
    const json_t *obj = json_object_get(req, "object");
    const char *op = json_string_value(json_object_get(req, "operation"));
    const char *have = label(obj, KOP_SHARDER_OWNER_LABEL);
    if (!op || strcmp(op, "CREATE") != 0 || !json_is_object(obj) ||
        (have && ring_has(ring, have)) || !ring || ring->n_points == 0)
        goto allow;
    /* The apiserver assigns the uid after mutating admission (see
     * kop/sharder.h), replacing any the client sent, so the key here is
     * namespace/name (or, for a generateName, the request's uid: a fresh
     * random key), mixed because FNV-1a of similar names is bunched. */
    char key[600];
    const char *name = meta_str(obj, "name");
    const char *ns = json_string_value(json_object_get(req, "namespace"));
    snprintf(key, sizeof(key), "%s/%s", ns ? ns : "", *name ? name : ruid);
    const char *owner = kop_shard_ring_owner_at(ring, kop_sharder_mix64(kop_sharder_fnv1a64(key)));
    json_t *ops = json_object_get(json_object_get(obj, "metadata"), "labels")
                      ? json_pack("[{s:s, s:s, s:s}]", "op", "add", "path",
                                  "/metadata/labels/shard.kop.io~1owner", "value", owner)
                      : json_pack("[{s:s, s:s, s:{s:s}}]", "op", "add", "path", "/metadata/labels",
                                  "value", KOP_SHARDER_OWNER_LABEL, owner);
    if (ops && kop_json_dump(ops, JSON_COMPACT, &ptxt, NULL) < 0)
        ptxt = NULL;
    json_decref(ops);
    if (ptxt && kop_base64_encode(ptxt, strlen(ptxt), &b64) < 0)
        b64 = NULL; /* answered without a patch: the sharder labels it */
allow:
    out = review_answer(av, ruid, b64);
    if (!out)
        code = 500;
out:
    free(ptxt);
    free(b64);
    json_decref(rev);
    *ret_body = out;
    return code;
}

/* The ring of the current membership (a reference, NULL before the first
 * list). Built once per membership generation and shared by the webhook
 * threads: with 1024 points per member, building a ring is a sort of
 * thousands of points, too dear for every admission request. */
static struct kop_shard_ring *current_ring(struct kop_sharder *s)
{
    json_t *members = NULL;
    uint64_t gen = 0;
    struct kop_shard_ring *r = NULL;
    if (kop_membership_members(s->membership, &members, &gen) < 0)
        return NULL; /* not listed yet: no label; the sharder assigns one */
    pthread_mutex_lock(&s->ring_lock);
    if (s->ring && s->ring_gen == gen)
        r = kop_shard_ring_ref(s->ring);
    pthread_mutex_unlock(&s->ring_lock);
    if (r || kop_shard_ring_new(members, &r) < 0) {
        json_decref(members);
        return r;
    }
    json_decref(members);
    pthread_mutex_lock(&s->ring_lock);
    if (!s->ring || s->ring_gen < gen) { /* generations only grow */
        kop_shard_ring_unref(s->ring);
        s->ring = kop_shard_ring_ref(r);
        s->ring_gen = gen;
    }
    pthread_mutex_unlock(&s->ring_lock);
    return r;
}

void kop_sharder_mutate_http(void *ud, const struct kop_http_request *req,
                             struct kop_http_response *resp)
{
    struct kop_sharder *s = ud;
    struct kop_shard_ring *ring = current_ring(s);
    char *body = NULL;
    int code = kop_sharder_mutate(req->body, req->body_len, ring, &body);
    kop_shard_ring_unref(ring);
    if (!body) {
        kop_http_response_status(resp, 500, "InternalError", "internal error handling the review");
        return;
    }
    resp->status = code;
    resp->body = body;
    resp->body_len = strlen(body);
    resp->content_type = "application/json";
}
