/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rate-limited delaying work queue (see kop/workqueue.h).
 *
 * DESIGN
 * Threads: any number of producers (add, add_after, add_rate_limited) and
 * getters (workers), plus one timer thread per queue that moves delayed
 * keys into the queue when their time comes and refreshes the
 * unfinished-work gauges every 500 ms. Everything below is guarded by
 * q->lock; the limiter has its own lock and is never called with q->lock
 * held (lock order: limiter, then the token bucket's own lock; q->lock is
 * a leaf).
 *
 * States of a key: one struct item per key in a hash table, with three
 * independent flags, as client-go keeps three sets:
 *   dirty      - added and not yet handed out (the "dirty set");
 *   processing - handed out by get() and not yet done() ("processing");
 *   waiting    - in the delay heap for add_after().
 * The FIFOs (one per group) hold exactly the items that are dirty and not
 * processing.
 * get() moves the head from dirty to processing; add() while processing
 * only sets dirty; done() clears processing and, when dirty, pushes the
 * key to the FIFO tail. An item with no flag set is freed at once, so the
 * table holds only keys that are queued, running or waiting.
 *
 * Invariants: a key is in the FIFO at most once; a key is processing in
 * at most one worker; ndirty/nprocessing/qlen count the flags exactly;
 * the heap is a binary min-heap on (ready_ns, seq), so keys with the same
 * ready time come out in the order they were delayed.
 *
 * Groups (kop_workqueue_options.group_of): every key belongs to a group
 * named by a prefix of the key ("" when group_of is NULL or says 0). Each
 * group has its own FIFO and count of keys processing; get() serves the
 * groups round robin (a cursor that moves past the group it served), and
 * skips a group that has group_max_processing keys processing. So one
 * group (a cluster whose API hangs) never holds more than its share of
 * the workers, and a group with many keys queued does not make another
 * wait behind all of them. With a single group, get() is the plain FIFO.
 * A group is freed once no item refers to it; the default group "" lives
 * as long as the queue.
 *
 * Shutdown: no more adds; getters wake with -ESHUTDOWN (queued keys are
 * not handed out); delayed keys are dropped; done() still works so that
 * shutdown_with_drain() can wait for the processing set to empty.
 */
#include "kop/workqueue.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/clock.h"
#include "kop/hash.h"
#include "kop/metrics.h"
#include "kop/ratelimit.h"
#include "kop/thread.h"

#define DEFAULT_BASE_DELAY_NS (5 * KOP_NSEC_PER_MSEC)
#define DEFAULT_MAX_DELAY_NS (1000 * KOP_NSEC_PER_SEC)
#define DEFAULT_QPS 10.0
#define DEFAULT_BURST 100
#define METRICS_PERIOD_NS (500 * KOP_NSEC_PER_MSEC)

/* ---- a small string-keyed intrusive hash table ---------------------------- */

struct hnode {
    struct hnode *next;
    uint64_t hash;
    const char *key;
};

struct hmap {
    struct hnode **buckets;
    size_t nbuckets; /* power of two */
    size_t count;
};

/* Keys are user-chosen names: a keyed hash (kop/hash.h). */
static uint64_t hash_str(const char *s)
{
    return kop_hash_str(s);
}

static int hmap_init(struct hmap *m)
{
    m->nbuckets = 64;
    m->count = 0;
    m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
    return m->buckets ? 0 : -ENOMEM;
}

static struct hnode *hmap_find(const struct hmap *m, const char *key, uint64_t h)
{
    for (struct hnode *n = m->buckets[h & (m->nbuckets - 1)]; n; n = n->next)
        if (n->hash == h && strcmp(n->key, key) == 0)
            return n;
    return NULL;
}

static void hmap_grow(struct hmap *m)
{
    size_t nb = m->nbuckets * 2;
    struct hnode **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct hnode *n = m->buckets[i];
        while (n) {
            struct hnode *next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
}

static void hmap_insert(struct hmap *m, struct hnode *n)
{
    if (m->count >= m->nbuckets)
        hmap_grow(m);
    struct hnode **head = &m->buckets[n->hash & (m->nbuckets - 1)];
    n->next = *head;
    *head = n;
    m->count++;
}

static void hmap_remove(struct hmap *m, struct hnode *n)
{
    for (struct hnode **p = &m->buckets[n->hash & (m->nbuckets - 1)]; *p; p = &(*p)->next) {
        if (*p == n) {
            *p = n->next;
            m->count--;
            return;
        }
    }
}

/* Free every node with free() (nodes are the first member of their
 * allocation) and the bucket array. */
static void hmap_destroy(struct hmap *m)
{
    if (!m->buckets)
        return;
    for (size_t i = 0; i < m->nbuckets; i++) {
        struct hnode *n = m->buckets[i];
        while (n) {
            struct hnode *next = n->next;
            free(n);
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = NULL;
}

/* ---- the rate limiter ----------------------------------------------------- */

struct failure {
    struct hnode node; /* first: freed with free() */
    int count;
    char key[];
};

struct kop_workqueue_limiter {
    pthread_mutex_t lock;
    int64_t base_ns, max_ns;
    struct kop_ratelimit *bucket; /* NULL: no overall bucket */
    struct hmap failures;
};

int kop_workqueue_limiter_new(int64_t base_delay_ns, int64_t max_delay_ns, double qps, int burst,
                              struct kop_workqueue_limiter **ret)
{
    assert(ret);
    struct kop_workqueue_limiter *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->base_ns = base_delay_ns > 0 ? base_delay_ns : DEFAULT_BASE_DELAY_NS;
    l->max_ns = max_delay_ns > 0 ? max_delay_ns : DEFAULT_MAX_DELAY_NS;
    if (qps == 0)
        qps = DEFAULT_QPS;
    if (burst <= 0)
        burst = DEFAULT_BURST;
    int r = hmap_init(&l->failures);
    if (r < 0)
        goto out;
    if (qps > 0) {
        r = kop_ratelimit_new(qps, burst, &l->bucket);
        if (r < 0)
            goto out;
    }
    pthread_mutex_init(&l->lock, NULL);
    *ret = l;
    return 0;
out:
    hmap_destroy(&l->failures);
    free(l);
    return r;
}

void kop_workqueue_limiter_free(struct kop_workqueue_limiter *l)
{
    if (!l)
        return;
    hmap_destroy(&l->failures);
    kop_ratelimit_free(l->bucket);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* base * 2^exp, capped at max without overflowing. */
static int64_t backoff_ns(int64_t base, int64_t max, int exp)
{
    if (exp >= 62 || base > (max >> exp))
        return max;
    return base << exp;
}

int64_t kop_workqueue_limiter_when(struct kop_workqueue_limiter *l, const char *key, int64_t now_ns)
{
    assert(l);
    assert(key);
    int exp = 0;
    uint64_t h = hash_str(key);
    pthread_mutex_lock(&l->lock);
    struct hnode *n = hmap_find(&l->failures, key, h);
    if (n) {
        struct failure *f = (struct failure *)n;
        exp = f->count;
        if (f->count < INT_MAX)
            f->count++;
    } else {
        size_t klen = strlen(key);
        struct failure *f = malloc(sizeof(*f) + klen + 1);
        if (f) {
            memcpy(f->key, key, klen + 1);
            f->node.hash = h;
            f->node.key = f->key;
            f->count = 1;
            hmap_insert(&l->failures, &f->node);
        }
    }
    int64_t d = backoff_ns(l->base_ns, l->max_ns, exp);
    pthread_mutex_unlock(&l->lock);
    /* Like client-go's MaxOfRateLimiter: the bucket is always asked, so a
     * retry storm across many keys is held to qps even at low backoff. */
    int64_t b = kop_ratelimit_reserve(l->bucket, now_ns);
    return b > d ? b : d;
}

void kop_workqueue_limiter_forget(struct kop_workqueue_limiter *l, const char *key)
{
    assert(l);
    assert(key);
    pthread_mutex_lock(&l->lock);
    struct hnode *n = hmap_find(&l->failures, key, hash_str(key));
    if (n) {
        hmap_remove(&l->failures, n);
        free(n);
    }
    pthread_mutex_unlock(&l->lock);
}

int kop_workqueue_limiter_num_requeues(struct kop_workqueue_limiter *l, const char *key)
{
    assert(l);
    assert(key);
    pthread_mutex_lock(&l->lock);
    struct hnode *n = hmap_find(&l->failures, key, hash_str(key));
    int c = n ? ((struct failure *)n)->count : 0;
    pthread_mutex_unlock(&l->lock);
    return c;
}

/* ---- the queue ------------------------------------------------------------ */

struct group {
    struct group *next; /* the queue's list of groups */
    struct item *qhead, *qtail;
    size_t qlen, nprocessing;
    size_t refs; /* items of the group */
    char name[];
};

struct item {
    struct hnode node; /* first: freed with free() */
    struct group *group;
    struct item *qnext;         /* FIFO link (dirty && !processing) */
    struct item *pprev, *pnext; /* processing list */
    size_t heap_idx;            /* valid while waiting */
    uint64_t seq;               /* heap tie-break */
    int64_t ready_ns;           /* waiting: when to add */
    int64_t added_ns;           /* dirty since */
    int64_t started_ns;         /* processing since */
    bool dirty, processing, waiting;
    char key[];
};

struct kop_workqueue {
    pthread_mutex_t lock;
    pthread_cond_t cond;       /* getters: FIFO non-empty or shutdown */
    pthread_cond_t drain_cond; /* nprocessing reached 0 */
    pthread_cond_t timer_cond; /* heap top changed, shutdown */
    struct hmap items;
    struct group *groups; /* the default group "" first, never freed */
    struct group *cursor; /* where get() looks first (round robin) */
    size_t (*group_of)(const char *key);
    size_t group_max; /* 0: no bound */
    size_t qlen, ndirty, nprocessing;
    struct item *processing; /* list head */
    struct item **heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    bool shutting_down, stop_timer, timer_started;
    pthread_t timer;
    struct kop_workqueue_limiter *limiter;

    bool metrics_on;
    struct kop_metric *m_depth, *m_adds, *m_queue_dur, *m_work_dur, *m_retries, *m_unfinished,
        *m_longest;
};

static struct timespec mono_ts(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / KOP_NSEC_PER_SEC),
                          .tv_nsec = (long)(ns % KOP_NSEC_PER_SEC)};
    return ts;
}

static bool heap_less(const struct item *a, const struct item *b)
{
    return a->ready_ns < b->ready_ns || (a->ready_ns == b->ready_ns && a->seq < b->seq);
}

static void heap_set(struct kop_workqueue *q, size_t i, struct item *it)
{
    q->heap[i] = it;
    it->heap_idx = i;
}

static void heap_up(struct kop_workqueue *q, size_t i)
{
    struct item *it = q->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(it, q->heap[p]))
            break;
        heap_set(q, i, q->heap[p]);
        i = p;
    }
    heap_set(q, i, it);
}

static void heap_down(struct kop_workqueue *q, size_t i)
{
    struct item *it = q->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->heap_len)
            break;
        if (c + 1 < q->heap_len && heap_less(q->heap[c + 1], q->heap[c]))
            c++;
        if (!heap_less(q->heap[c], it))
            break;
        heap_set(q, i, q->heap[c]);
        i = c;
    }
    heap_set(q, i, it);
}

static int heap_push(struct kop_workqueue *q, struct item *it)
{
    if (q->heap_len == q->heap_cap) {
        size_t cap = q->heap_cap ? q->heap_cap * 2 : 16;
        struct item **h = realloc(q->heap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        q->heap = h;
        q->heap_cap = cap;
    }
    heap_set(q, q->heap_len++, it);
    heap_up(q, it->heap_idx);
    return 0;
}

static struct item *heap_pop(struct kop_workqueue *q)
{
    struct item *top = q->heap[0];
    q->heap_len--;
    if (q->heap_len > 0) {
        heap_set(q, 0, q->heap[q->heap_len]);
        heap_down(q, 0);
    }
    return top;
}

static void set_depth(struct kop_workqueue *q)
{
    /* client-go counts adds minus gets: keys in the dirty set. */
    kop_gauge_set(q->m_depth, (double)q->ndirty);
}

static struct item *item_find(struct kop_workqueue *q, const char *key)
{
    return (struct item *)hmap_find(&q->items, key, hash_str(key));
}

/* The group named by the first n bytes of key, created when missing. Lock
 * held. NULL on ENOMEM. */
static struct group *group_get(struct kop_workqueue *q, const char *key, size_t n)
{
    struct group **p = &q->groups;
    for (; *p; p = &(*p)->next)
        if (strlen((*p)->name) == n && strncmp((*p)->name, key, n) == 0)
            return *p;
    struct group *g = calloc(1, sizeof(*g) + n + 1);
    if (!g)
        return NULL;
    memcpy(g->name, key, n);
    *p = g;
    return g;
}

static void group_unref(struct kop_workqueue *q, struct group *g)
{
    if (--g->refs > 0 || g == q->groups)
        return;
    struct group **p = &q->groups;
    while (*p != g)
        p = &(*p)->next;
    *p = g->next;
    if (q->cursor == g)
        q->cursor = g->next;
    free(g);
}

static struct item *item_get_or_new(struct kop_workqueue *q, const char *key)
{
    uint64_t h = hash_str(key);
    struct item *it = (struct item *)hmap_find(&q->items, key, h);
    if (it)
        return it;
    size_t klen = strlen(key);
    size_t glen = q->group_of ? q->group_of(key) : 0;
    assert(glen <= klen);
    struct group *g = glen > 0 ? group_get(q, key, glen) : q->groups;
    if (!g)
        return NULL;
    it = calloc(1, sizeof(*it) + klen + 1);
    if (!it) {
        g->refs++;
        group_unref(q, g);
        return NULL;
    }
    g->refs++;
    it->group = g;
    memcpy(it->key, key, klen + 1);
    it->node.hash = h;
    it->node.key = it->key;
    hmap_insert(&q->items, &it->node);
    return it;
}

static void item_maybe_free(struct kop_workqueue *q, struct item *it)
{
    if (it->dirty || it->processing || it->waiting)
        return;
    hmap_remove(&q->items, &it->node);
    group_unref(q, it->group);
    free(it);
}

static void fifo_push(struct kop_workqueue *q, struct item *it)
{
    struct group *g = it->group;
    it->qnext = NULL;
    if (g->qtail)
        g->qtail->qnext = it;
    else
        g->qhead = it;
    g->qtail = it;
    g->qlen++;
    q->qlen++;
    pthread_cond_signal(&q->cond);
}

static bool group_ready(const struct kop_workqueue *q, const struct group *g)
{
    return g->qhead && (q->group_max == 0 || g->nprocessing < q->group_max);
}

/* The next group with a key to hand out, round robin from the cursor;
 * NULL when none. Lock held. */
static struct group *next_ready(struct kop_workqueue *q)
{
    struct group *start = q->cursor ? q->cursor : q->groups;
    struct group *g = start;
    do {
        if (group_ready(q, g))
            return g;
        g = g->next ? g->next : q->groups;
    } while (g != start);
    return NULL;
}

/* Mark it dirty and queue it unless it is processing. Lock held. */
static void item_add(struct kop_workqueue *q, struct item *it, int64_t now)
{
    if (it->dirty)
        return;
    it->dirty = true;
    it->added_ns = now;
    q->ndirty++;
    kop_counter_inc(q->m_adds);
    set_depth(q);
    if (!it->processing)
        fifo_push(q, it);
}

static void update_unfinished(struct kop_workqueue *q, int64_t now)
{
    double total = 0, longest = 0;
    for (struct item *it = q->processing; it; it = it->pnext) {
        double s = (double)(now - it->started_ns) / 1e9;
        total += s;
        if (s > longest)
            longest = s;
    }
    kop_gauge_set(q->m_unfinished, total);
    kop_gauge_set(q->m_longest, longest);
}

static void *timer_main(void *arg)
{
    struct kop_workqueue *q = arg;
    pthread_mutex_lock(&q->lock);
    int64_t next_metrics = kop_clock_now_ns() + METRICS_PERIOD_NS;
    while (!q->stop_timer) {
        int64_t now = kop_clock_now_ns();
        while (q->heap_len > 0 && q->heap[0]->ready_ns <= now) {
            struct item *it = heap_pop(q);
            it->waiting = false;
            if (!q->shutting_down)
                item_add(q, it, now);
            item_maybe_free(q, it);
        }
        if (q->metrics_on && now >= next_metrics) {
            update_unfinished(q, now);
            next_metrics = now + METRICS_PERIOD_NS;
        }
        int64_t deadline = INT64_MAX;
        if (q->heap_len > 0)
            deadline = q->heap[0]->ready_ns;
        if (q->metrics_on && next_metrics < deadline)
            deadline = next_metrics;
        if (deadline == INT64_MAX) {
            pthread_cond_wait(&q->timer_cond, &q->lock);
        } else {
            struct timespec ts = mono_ts(deadline);
            pthread_cond_timedwait(&q->timer_cond, &q->lock, &ts);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

static void register_metrics(struct kop_workqueue *q, const struct kop_workqueue_options *opt)
{
    struct kop_metrics *m = opt->metrics ? opt->metrics : kop_metrics_global();
    if (!m)
        return;
    static const char *const labels[] = {"name", NULL};
    /* client-go/controller-runtime: ExponentialBuckets(10e-9, 10, 10). */
    double b[10];
    kop_metrics_exp_buckets(1e-8, 10, 10, b);
    const char *n = opt->name;
    struct kop_metric_family *f;

    f = kop_metrics_register(m, KOP_METRIC_GAUGE, "workqueue_depth", "Current depth of workqueue",
                             labels, NULL, 0);
    q->m_depth = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "workqueue_adds_total",
                             "Total number of adds handled by workqueue", labels, NULL, 0);
    q->m_adds = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "workqueue_queue_duration_seconds",
                             "How long in seconds an item stays in workqueue before being "
                             "requested",
                             labels, b, 10);
    q->m_queue_dur = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "workqueue_work_duration_seconds",
                             "How long in seconds processing an item from workqueue takes.", labels,
                             b, 10);
    q->m_work_dur = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "workqueue_retries_total",
                             "Total number of retries handled by workqueue", labels, NULL, 0);
    q->m_retries = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_GAUGE, "workqueue_unfinished_work_seconds",
                             "How many seconds of work has been done that is in progress and "
                             "hasn't been observed by work_duration. Large values indicate stuck "
                             "threads. One can deduce the number of stuck threads by observing "
                             "the rate at which this increases.",
                             labels, NULL, 0);
    q->m_unfinished = f ? kop_metric_child(f, n) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_GAUGE, "workqueue_longest_running_processor_seconds",
                             "How many seconds has the longest running processor for workqueue "
                             "been running.",
                             labels, NULL, 0);
    q->m_longest = f ? kop_metric_child(f, n) : NULL;
    q->metrics_on = true;
    kop_gauge_set(q->m_depth, 0);
}

int kop_workqueue_new(const struct kop_workqueue_options *opt, struct kop_workqueue **ret)
{
    static const struct kop_workqueue_options defaults = {0};
    assert(ret);
    if (!opt)
        opt = &defaults;
    struct kop_workqueue *q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    int r = hmap_init(&q->items);
    if (r < 0)
        goto out;
    q->groups = calloc(1, sizeof(*q->groups) + 1);
    if (!q->groups) {
        r = -ENOMEM;
        goto out;
    }
    q->group_of = opt->group_of;
    q->group_max = opt->group_max_processing > 0 ? (size_t)opt->group_max_processing : 0;
    r = kop_workqueue_limiter_new(opt->base_delay_ns, opt->max_delay_ns, opt->qps, opt->burst,
                                  &q->limiter);
    if (r < 0)
        goto out;
    pthread_mutex_init(&q->lock, NULL);
    kop_clock_cond_init(&q->cond);
    kop_clock_cond_init(&q->drain_cond);
    kop_clock_cond_init(&q->timer_cond);
    if (opt->name)
        register_metrics(q, opt);
    r = kop_thread_start(&q->timer, timer_main, q, "wq-timer");
    if (r < 0) {
        pthread_cond_destroy(&q->cond);
        pthread_cond_destroy(&q->drain_cond);
        pthread_cond_destroy(&q->timer_cond);
        pthread_mutex_destroy(&q->lock);
        goto out;
    }
    q->timer_started = true;
    *ret = q;
    return 0;
out:
    kop_workqueue_limiter_free(q->limiter);
    hmap_destroy(&q->items);
    free(q->groups);
    free(q);
    return r;
}

void kop_workqueue_free(struct kop_workqueue *q)
{
    if (!q)
        return;
    kop_workqueue_shutdown(q);
    pthread_mutex_lock(&q->lock);
    q->stop_timer = true;
    pthread_cond_signal(&q->timer_cond);
    pthread_mutex_unlock(&q->lock);
    if (q->timer_started)
        pthread_join(q->timer, NULL);
    hmap_destroy(&q->items);
    while (q->groups) {
        struct group *g = q->groups;
        q->groups = g->next;
        free(g);
    }
    free(q->heap);
    kop_workqueue_limiter_free(q->limiter);
    pthread_cond_destroy(&q->cond);
    pthread_cond_destroy(&q->drain_cond);
    pthread_cond_destroy(&q->timer_cond);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

int kop_workqueue_add(struct kop_workqueue *q, const char *key)
{
    assert(q);
    assert(key);
    if (!key[0])
        return -EINVAL;
    int r = 0;
    pthread_mutex_lock(&q->lock);
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    struct item *it = item_get_or_new(q, key);
    if (!it) {
        r = -ENOMEM;
        goto out;
    }
    item_add(q, it, kop_clock_now_ns());
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

int kop_workqueue_add_after(struct kop_workqueue *q, const char *key, int64_t delay_ns)
{
    assert(q);
    assert(key);
    if (!key[0])
        return -EINVAL;
    int r = 0;
    pthread_mutex_lock(&q->lock);
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    kop_counter_inc(q->m_retries);
    struct item *it = item_get_or_new(q, key);
    if (!it) {
        r = -ENOMEM;
        goto out;
    }
    int64_t now = kop_clock_now_ns();
    if (delay_ns <= 0) {
        item_add(q, it, now);
        goto out;
    }
    int64_t ready = delay_ns > INT64_MAX - now ? INT64_MAX : now + delay_ns;
    if (it->waiting) {
        /* Keep the earlier time, as client-go's waitingForQueue does. */
        if (ready < it->ready_ns) {
            it->ready_ns = ready;
            heap_up(q, it->heap_idx);
            if (it->heap_idx == 0)
                pthread_cond_signal(&q->timer_cond);
        }
        goto out;
    }
    it->ready_ns = ready;
    it->seq = q->seq++;
    r = heap_push(q, it);
    if (r < 0) {
        item_maybe_free(q, it);
        goto out;
    }
    it->waiting = true;
    if (it->heap_idx == 0)
        pthread_cond_signal(&q->timer_cond);
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

int kop_workqueue_add_rate_limited(struct kop_workqueue *q, const char *key)
{
    assert(q);
    assert(key);
    if (!key[0])
        return -EINVAL;
    if (kop_workqueue_shutting_down(q))
        return -ESHUTDOWN;
    int64_t d = kop_workqueue_limiter_when(q->limiter, key, kop_clock_now_ns());
    return kop_workqueue_add_after(q, key, d);
}

void kop_workqueue_forget(struct kop_workqueue *q, const char *key)
{
    assert(q);
    kop_workqueue_limiter_forget(q->limiter, key);
}

int kop_workqueue_num_requeues(struct kop_workqueue *q, const char *key)
{
    assert(q);
    return kop_workqueue_limiter_num_requeues(q->limiter, key);
}

int64_t kop_workqueue_max_backoff_ns(const struct kop_workqueue *q)
{
    assert(q);
    return q->limiter->max_ns; /* set once at creation */
}

int kop_workqueue_get(struct kop_workqueue *q, int64_t timeout_ms, const char **ret_key)
{
    assert(q);
    assert(ret_key);
    int r = 0;
    pthread_mutex_lock(&q->lock);
    struct timespec deadline = {0};
    if (timeout_ms >= 0)
        deadline = kop_clock_deadline_ms(timeout_ms);
    struct group *g = NULL;
    while (!q->shutting_down && !(g = next_ready(q))) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->cond, &q->lock);
        } else if (pthread_cond_timedwait(&q->cond, &q->lock, &deadline) == ETIMEDOUT) {
            if (!q->shutting_down && !(g = next_ready(q))) {
                r = -ETIMEDOUT;
                goto out;
            }
            break;
        }
    }
    if (q->shutting_down) {
        r = -ESHUTDOWN;
        goto out;
    }
    struct item *it = g->qhead;
    g->qhead = it->qnext;
    if (!g->qhead)
        g->qtail = NULL;
    g->qlen--;
    g->nprocessing++;
    q->cursor = g->next; /* the next get looks at the following group first */
    q->qlen--;
    it->qnext = NULL;
    it->dirty = false;
    q->ndirty--;
    it->processing = true;
    q->nprocessing++;
    it->pprev = NULL;
    it->pnext = q->processing;
    if (q->processing)
        q->processing->pprev = it;
    q->processing = it;
    int64_t now = kop_clock_now_ns();
    it->started_ns = now;
    set_depth(q);
    kop_histogram_observe(q->m_queue_dur, (double)(now - it->added_ns) / 1e9);
    *ret_key = it->key;
out:
    pthread_mutex_unlock(&q->lock);
    return r;
}

void kop_workqueue_done(struct kop_workqueue *q, const char *key)
{
    assert(q);
    assert(key);
    pthread_mutex_lock(&q->lock);
    struct item *it = item_find(q, key);
    /* key may point into it: not used after this point. */
    if (!it || !it->processing)
        goto out;
    it->processing = false;
    q->nprocessing--;
    struct group *g = it->group;
    g->nprocessing--;
    /* A group that was at its bound may be served again. */
    if (q->group_max > 0 && g->qhead)
        pthread_cond_signal(&q->cond);
    if (it->pprev)
        it->pprev->pnext = it->pnext;
    else
        q->processing = it->pnext;
    if (it->pnext)
        it->pnext->pprev = it->pprev;
    it->pprev = it->pnext = NULL;
    kop_histogram_observe(q->m_work_dur, (double)(kop_clock_now_ns() - it->started_ns) / 1e9);
    if (it->dirty) {
        if (q->shutting_down) {
            it->dirty = false;
            q->ndirty--;
            set_depth(q);
        } else {
            fifo_push(q, it);
        }
    }
    item_maybe_free(q, it);
    if (q->nprocessing == 0)
        pthread_cond_broadcast(&q->drain_cond);
out:
    pthread_mutex_unlock(&q->lock);
}

size_t kop_workqueue_len(struct kop_workqueue *q)
{
    assert(q);
    pthread_mutex_lock(&q->lock);
    size_t n = q->qlen;
    pthread_mutex_unlock(&q->lock);
    return n;
}

size_t kop_workqueue_group_len(struct kop_workqueue *q, const char *group, size_t *ret_processing)
{
    assert(q);
    assert(group);
    size_t n = 0, p = 0;
    pthread_mutex_lock(&q->lock);
    for (struct group *g = q->groups; g; g = g->next) {
        if (strcmp(g->name, group) == 0) {
            n = g->qlen;
            p = g->nprocessing;
            break;
        }
    }
    pthread_mutex_unlock(&q->lock);
    if (ret_processing)
        *ret_processing = p;
    return n;
}

/* Rebuild the heap's order after entries were removed. Lock held. */
static void heap_rebuild(struct kop_workqueue *q)
{
    for (size_t i = 0; i < q->heap_len; i++)
        heap_set(q, i, q->heap[i]);
    for (size_t i = q->heap_len / 2; i-- > 0;)
        heap_down(q, i);
}

size_t kop_workqueue_forget_group(struct kop_workqueue *q, const char *group)
{
    assert(q);
    assert(group);
    pthread_mutex_lock(&q->lock);
    struct group *g = q->groups;
    while (g && strcmp(g->name, group) != 0)
        g = g->next;
    if (!g) {
        pthread_mutex_unlock(&q->lock);
        return 0;
    }
    g->refs++; /* pinned while its items go */
    /* the keys whose backoff goes too (the limiter is not called under
     * q->lock); on ENOMEM a backoff entry stays, forgotten at the key's
     * next success */
    size_t cap = g->refs, nkeys = 0, dropped = 0;
    char **keys = calloc(cap, sizeof(*keys));
    for (struct item *it = q->processing; it; it = it->pnext) {
        if (it->group == g && it->dirty) {
            it->dirty = false;
            q->ndirty--;
        }
    }
    /* delayed keys: the ones not queued as well are freed now */
    size_t j = 0;
    for (size_t i = 0; i < q->heap_len; i++) {
        struct item *it = q->heap[i];
        if (it->group != g) {
            q->heap[j++] = it;
            continue;
        }
        it->waiting = false;
        if (!it->dirty && !it->processing) {
            if (keys && nkeys < cap)
                keys[nkeys++] = strdup(it->key);
            dropped++;
            item_maybe_free(q, it);
        }
    }
    q->heap_len = j;
    heap_rebuild(q);
    /* queued keys */
    struct item *it = g->qhead;
    q->qlen -= g->qlen;
    g->qhead = g->qtail = NULL;
    g->qlen = 0;
    while (it) {
        struct item *next = it->qnext;
        it->dirty = false;
        q->ndirty--;
        if (keys && nkeys < cap)
            keys[nkeys++] = strdup(it->key);
        dropped++;
        item_maybe_free(q, it);
        it = next;
    }
    group_unref(q, g);
    set_depth(q);
    pthread_cond_broadcast(&q->timer_cond);
    pthread_mutex_unlock(&q->lock);
    for (size_t i = 0; i < nkeys; i++) {
        if (keys[i])
            kop_workqueue_limiter_forget(q->limiter, keys[i]);
        free(keys[i]);
    }
    free(keys);
    return dropped;
}

size_t kop_workqueue_processing(struct kop_workqueue *q)
{
    assert(q);
    pthread_mutex_lock(&q->lock);
    size_t n = q->nprocessing;
    pthread_mutex_unlock(&q->lock);
    return n;
}

void kop_workqueue_shutdown(struct kop_workqueue *q)
{
    assert(q);
    pthread_mutex_lock(&q->lock);
    if (!q->shutting_down) {
        q->shutting_down = true;
        while (q->heap_len > 0) {
            struct item *it = heap_pop(q);
            it->waiting = false;
            item_maybe_free(q, it);
        }
        pthread_cond_broadcast(&q->cond);
        pthread_cond_broadcast(&q->drain_cond);
        pthread_cond_signal(&q->timer_cond);
    }
    pthread_mutex_unlock(&q->lock);
}

int kop_workqueue_shutdown_with_drain(struct kop_workqueue *q, int64_t timeout_ms)
{
    assert(q);
    kop_workqueue_shutdown(q);
    int r = 0;
    pthread_mutex_lock(&q->lock);
    struct timespec deadline = {0};
    if (timeout_ms >= 0)
        deadline = kop_clock_deadline_ms(timeout_ms);
    while (q->nprocessing > 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->drain_cond, &q->lock);
        } else if (pthread_cond_timedwait(&q->drain_cond, &q->lock, &deadline) == ETIMEDOUT) {
            if (q->nprocessing > 0)
                r = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&q->lock);
    return r;
}

bool kop_workqueue_shutting_down(struct kop_workqueue *q)
{
    assert(q);
    pthread_mutex_lock(&q->lock);
    bool s = q->shutting_down;
    pthread_mutex_unlock(&q->lock);
    return s;
}

void kop_workqueue_update_metrics(struct kop_workqueue *q)
{
    assert(q);
    pthread_mutex_lock(&q->lock);
    update_unfinished(q, kop_clock_now_ns());
    pthread_mutex_unlock(&q->lock);
}
