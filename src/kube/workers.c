/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reconcile worker pool (see kop/workers.h).
 *
 * Each thread loops: wait while paused -> get a key (blocking) ->
 * reconcile -> requeue by result -> done. Pausing is the pool's state,
 * not the queue's: a worker that was already blocked in get() when the
 * pool paused may still receive a key; it puts it back (add while
 * processing marks it dirty, done() queues it again) without running it,
 * then waits for resume. So after kop_workers_pause() returns 0 no
 * reconcile runs, and at most one bounced key per thread moves to the
 * queue's tail.
 *
 * Resizing (kop_workers_resize): target is the size asked for, alive the
 * threads running. A thread whose turn comes while alive > target leaves
 * (marks its slot exited); getters wait at most IDLE_CHECK_MS in the queue
 * so that idle threads see a shrink. Slots of threads that left are
 * joined and reused by the next resize or by stop.
 *
 * w->lock guards paused, stopping, active, target, alive and the slots;
 * it is never held while calling into the queue or the reconcile callback.
 */
#include "kop/workers.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kop/clock.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/thread.h"
#include "kop/workqueue.h"

#define LOGGER "controller"
#define IDLE_CHECK_MS 1000

struct kop_workers;

struct slot {
    struct kop_workers *w;
    pthread_t thread;
    bool used;   /* a thread was started in it and not joined yet */
    bool exited; /* that thread left (resize) */
};

struct kop_workers {
    char *controller;
    struct kop_workqueue *queue;
    kop_workers_reconcile_fn reconcile;
    void *ud;

    struct slot **slots; /* n_slots; each allocated once, stable */
    int n_slots;
    int target, alive;
    bool started;

    pthread_mutex_t lock;
    pthread_cond_t cond;      /* paused/stopping changed */
    pthread_cond_t idle_cond; /* active reached 0; CLOCK_MONOTONIC */
    pthread_cond_t exit_cond; /* a thread left (resize) */
    bool paused, stopping;
    int active;

    struct kop_metric *m_success, *m_error, *m_requeue, *m_requeue_after, *m_errors, *m_time,
        *m_max, *m_active;
};

int kop_workers_uuid(char *buf, size_t len)
{
    assert(buf);
    if (len < 37)
        return -EINVAL;
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof(b)) {
        /* No kernel randomness (should not happen): an ID for logs only,
         * so a clock-mixed value is good enough. */
        uint64_t x =
            (uint64_t)kop_clock_now_ns() ^ (uint64_t)kop_clock_wall_ns() ^ (uint64_t)(uintptr_t)buf;
        for (size_t i = 0; i < sizeof(b); i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b[i] = (unsigned char)x;
        }
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

const double kop_workers_time_buckets[] = {
    0.005, 0.01, 0.025, 0.05, 0.1,  0.15, 0.2,  0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6,
    0.7,   0.8,  0.9,   1.0,  1.25, 1.5,  1.75, 2.0,  2.5, 3.0,  3.5, 4.0,  4.5, 5,
    6,     7,    8,     9,    10,   15,   20,   25,   30,  40,   50,  60};
const size_t kop_workers_n_time_buckets =
    sizeof(kop_workers_time_buckets) / sizeof(kop_workers_time_buckets[0]);
const char *const kop_workers_results[4] = {"success", "error", "requeue", "requeue_after"};

int kop_workers_result_index(struct kop_reconcile_result res)
{
    return res.error != 0 ? 1 : res.requeue_after_ns > 0 ? 3 : res.requeue ? 2 : 0;
}

static void register_metrics(struct kop_workers *w, struct kop_metrics *m, bool caller_counts)
{
    static const char *const l_ctrl[] = {"controller", NULL};
    static const char *const l_res[] = {"controller", "result", NULL};
    const char *c = w->controller;
    struct kop_metric_family *f;
    if (caller_counts)
        goto pool;

    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total",
                             "Total number of reconciliations per controller", l_res, NULL, 0);
    if (f) {
        /* Created up front so every result shows 0, as controller-runtime
         * initialises them. */
        w->m_error = kop_metric_child(f, c, "error");
        w->m_requeue = kop_metric_child(f, c, "requeue");
        w->m_requeue_after = kop_metric_child(f, c, "requeue_after");
        w->m_success = kop_metric_child(f, c, "success");
    }
    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_errors_total",
                             "Total number of reconciliation errors per controller", l_ctrl, NULL,
                             0);
    w->m_errors = f ? kop_metric_child(f, c) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "controller_runtime_reconcile_time_seconds",
                             "Length of time per reconciliation per controller", l_ctrl,
                             kop_workers_time_buckets, kop_workers_n_time_buckets);
    w->m_time = f ? kop_metric_child(f, c) : NULL;
pool:
    f = kop_metrics_register(m, KOP_METRIC_GAUGE, "controller_runtime_max_concurrent_reconciles",
                             "Maximum number of concurrent reconciles per controller", l_ctrl, NULL,
                             0);
    w->m_max = f ? kop_metric_child(f, c) : NULL;
    f = kop_metrics_register(m, KOP_METRIC_GAUGE, "controller_runtime_active_workers",
                             "Number of currently used workers per controller", l_ctrl, NULL, 0);
    w->m_active = f ? kop_metric_child(f, c) : NULL;
    kop_gauge_set(w->m_max, w->target);
    kop_gauge_set(w->m_active, 0);
}

int kop_workers_new(const struct kop_workers_options *opt, struct kop_workers **ret)
{
    assert(opt);
    assert(opt->controller);
    assert(opt->queue);
    assert(opt->reconcile);
    assert(ret);
    struct kop_workers *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->target = opt->max_concurrent > 0 ? opt->max_concurrent : 1;
    w->controller = strdup(opt->controller);
    if (!w->controller) {
        free(w);
        return -ENOMEM;
    }
    w->queue = opt->queue;
    w->reconcile = opt->reconcile;
    w->ud = opt->ud;
    pthread_mutex_init(&w->lock, NULL);
    kop_clock_cond_init(&w->cond);
    kop_clock_cond_init(&w->idle_cond);
    pthread_cond_init(&w->exit_cond, NULL);
    struct kop_metrics *m = opt->metrics ? opt->metrics : kop_metrics_global();
    if (m)
        register_metrics(w, m, opt->caller_counts);
    *ret = w;
    return 0;
}

static void log_error(struct kop_workers *w, const char *key, const char *id, int err)
{
    kop_log_errno(
        KOP_LOG_ERROR, LOGGER, "Reconciler error", err,
        json_pack("{s:s, s:s, s:s}", "controller", w->controller, "key", key, "reconcileID", id));
}

static void reconcile_one(struct kop_workers *w, const char *key)
{
    char id[37];
    kop_workers_uuid(id, sizeof(id));
    int64_t t0 = kop_clock_now_ns();
    struct kop_reconcile_result res = w->reconcile(w->ud, key, id);
    kop_histogram_observe(w->m_time, (double)(kop_clock_now_ns() - t0) / 1e9);

    if (res.error != 0) {
        kop_workqueue_add_rate_limited(w->queue, key);
        kop_counter_inc(w->m_errors);
        kop_counter_inc(w->m_error);
        log_error(w, key, id, res.error);
    } else if (res.requeue_after_ns > 0) {
        kop_workqueue_forget(w->queue, key);
        kop_workqueue_add_after(w->queue, key, res.requeue_after_ns);
        kop_counter_inc(w->m_requeue_after);
    } else if (res.requeue) {
        kop_workqueue_add_rate_limited(w->queue, key);
        kop_counter_inc(w->m_requeue);
    } else {
        kop_workqueue_forget(w->queue, key);
        kop_counter_inc(w->m_success);
    }
}

static void *worker_main(void *arg)
{
    struct slot *sl = arg;
    struct kop_workers *w = sl->w;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        while (w->paused && !w->stopping && w->alive <= w->target)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->alive > w->target && !w->stopping) {
            w->alive--;
            sl->exited = true;
            pthread_cond_broadcast(&w->exit_cond);
            pthread_mutex_unlock(&w->lock);
            break;
        }
        bool stop = w->stopping && w->paused;
        pthread_mutex_unlock(&w->lock);
        if (stop)
            break;

        const char *key = NULL;
        int r = kop_workqueue_get(w->queue, IDLE_CHECK_MS, &key);
        if (r == -ESHUTDOWN)
            break;
        if (r < 0)
            continue;

        pthread_mutex_lock(&w->lock);
        bool bounce = w->paused;
        if (!bounce)
            w->active++;
        pthread_mutex_unlock(&w->lock);
        if (bounce) {
            kop_workqueue_add(w->queue, key);
            kop_workqueue_done(w->queue, key);
            continue;
        }

        kop_gauge_add(w->m_active, 1);
        reconcile_one(w, key);
        kop_workqueue_done(w->queue, key);
        kop_gauge_add(w->m_active, -1);

        pthread_mutex_lock(&w->lock);
        if (--w->active == 0)
            pthread_cond_broadcast(&w->idle_cond);
        pthread_mutex_unlock(&w->lock);
    }
    return NULL;
}

/* Join the threads that left. Lock held (they no longer take it). */
static void reap(struct kop_workers *w)
{
    for (int i = 0; i < w->n_slots; i++) {
        struct slot *sl = w->slots[i];
        if (sl->used && sl->exited) {
            pthread_join(sl->thread, NULL);
            sl->used = false;
            sl->exited = false;
        }
    }
}

/* Start threads until alive reaches target. Lock held. */
static int grow(struct kop_workers *w)
{
    while (w->alive < w->target) {
        struct slot *sl = NULL;
        int idx = 0;
        for (; idx < w->n_slots && !sl; idx++)
            if (!w->slots[idx]->used)
                sl = w->slots[idx];
        if (!sl) {
            struct slot **a = realloc(w->slots, (size_t)(w->n_slots + 1) * sizeof(*a));
            if (!a)
                return -ENOMEM;
            w->slots = a;
            sl = calloc(1, sizeof(*sl));
            if (!sl)
                return -ENOMEM;
            sl->w = w;
            w->slots[w->n_slots++] = sl;
            idx = w->n_slots;
        }
        int r = kop_thread_start(&sl->thread, worker_main, sl, "worker-%d", idx - 1);
        if (r < 0)
            return r;
        sl->used = true;
        w->alive++;
    }
    return 0;
}

int kop_workers_start(struct kop_workers *w)
{
    assert(w);
    pthread_mutex_lock(&w->lock);
    int r = w->started ? -EALREADY : 0;
    if (r == 0) {
        w->started = true;
        r = grow(w); /* the ones started are joined by stop/free */
    }
    pthread_mutex_unlock(&w->lock);
    return r;
}

int kop_workers_resize(struct kop_workers *w, int n)
{
    assert(w);
    pthread_mutex_lock(&w->lock);
    w->target = n > 0 ? n : 1;
    kop_gauge_set(w->m_max, w->target);
    int r = w->started && !w->stopping ? grow(w) : 0;
    pthread_cond_broadcast(&w->cond); /* paused threads above target leave */
    /* Shrinking: until the threads above target have left and are joined,
     * their thread-specific data (a client's curl handles) released: the
     * caller may free what they used once this returns. */
    while (w->alive > w->target && !w->stopping)
        pthread_cond_wait(&w->exit_cond, &w->lock);
    reap(w);
    pthread_mutex_unlock(&w->lock);
    return r;
}

int kop_workers_pause(struct kop_workers *w, int64_t timeout_ms)
{
    assert(w);
    int r = 0;
    pthread_mutex_lock(&w->lock);
    w->paused = true;
    struct timespec deadline = {0};
    if (timeout_ms >= 0)
        deadline = kop_clock_deadline_ms(timeout_ms);
    while (w->active > 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&w->idle_cond, &w->lock);
        } else if (pthread_cond_timedwait(&w->idle_cond, &w->lock, &deadline) == ETIMEDOUT) {
            if (w->active > 0)
                r = -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return r;
}

void kop_workers_resume(struct kop_workers *w)
{
    assert(w);
    pthread_mutex_lock(&w->lock);
    w->paused = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int kop_workers_active(struct kop_workers *w)
{
    assert(w);
    pthread_mutex_lock(&w->lock);
    int a = w->active;
    pthread_mutex_unlock(&w->lock);
    return a;
}

int kop_workers_stop(struct kop_workers *w, int64_t timeout_ms)
{
    if (!w)
        return 0;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    int r = kop_workqueue_shutdown_with_drain(w->queue, timeout_ms);
    if (r < 0)
        return r;
    /* No resize runs now (kop/workers.h), so the slots stay; the threads
     * take w->lock on their way out: join without it. */
    for (int i = 0; i < w->n_slots; i++) {
        struct slot *sl = w->slots[i];
        if (sl->used) {
            pthread_join(sl->thread, NULL);
            sl->used = false;
            sl->exited = false;
        }
    }
    pthread_mutex_lock(&w->lock);
    w->alive = 0;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

void kop_workers_free(struct kop_workers *w)
{
    if (!w)
        return;
    kop_workers_stop(w, -1);
    pthread_cond_destroy(&w->cond);
    pthread_cond_destroy(&w->idle_cond);
    pthread_cond_destroy(&w->exit_cond);
    pthread_mutex_destroy(&w->lock);
    for (int i = 0; i < w->n_slots; i++)
        free(w->slots[i]);
    free(w->slots);
    free(w->controller);
    free(w);
}
