/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the workqueue and the reconcile worker pool: the pure rate
 * limiter with a fake clock (per-key backoff growth, cap and forget; the
 * overall 10 qps / 100 burst bucket), dedup, the dirty/processing rules
 * (including a multi-threaded stress run that asserts no key is ever
 * processed by two workers at once), delayed adds, shutdown and drain,
 * metrics; and for the pool: result -> requeue mapping and metrics, real
 * concurrency, stop draining in-flight work, pause/resume.
 */
#include "kop/workqueue.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/clock.h"
#include "kop/metrics.h"
#include "kop/workers.h"
#include "testutil.h"

#define MS KOP_NSEC_PER_MSEC
#define SEC KOP_NSEC_PER_SEC

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Poll cond() every ms for up to timeout_ms. */
static bool wait_until(bool (*cond)(void *), void *arg, int timeout_ms)
{
    for (int i = 0; i < timeout_ms; i++) {
        if (cond(arg))
            return true;
        sleep_ms(1);
    }
    return cond(arg);
}

/* ---- the pure limiter ------------------------------------------------------ */

START_TEST(test_workqueue_backoff_growth_cap_forget)
{
    struct kop_workqueue_limiter *l = NULL;
    /* No overall bucket: only the per-key backoff. */
    ck_assert_int_eq(kop_workqueue_limiter_new(0, 0, -1, 0, &l), 0);
    int64_t now = 1000 * SEC;
    int64_t want = 5 * MS;
    for (int i = 0; i < 18; i++) {
        ck_assert_int_eq(kop_workqueue_limiter_when(l, "ns/a", now), want);
        want *= 2;
    }
    ck_assert_int_eq(kop_workqueue_limiter_num_requeues(l, "ns/a"), 18);
    /* 5 ms * 2^18 = 1310.72 s > 1000 s: capped from here on, also far out. */
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(kop_workqueue_limiter_when(l, "ns/a", now), 1000 * SEC);
    ck_assert_int_eq(kop_workqueue_limiter_num_requeues(l, "ns/a"), 118);
    /* Keys are independent. */
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "ns/b", now), 5 * MS);
    ck_assert_int_eq(kop_workqueue_limiter_num_requeues(l, "ns/b"), 1);
    /* Forget resets. */
    kop_workqueue_limiter_forget(l, "ns/a");
    ck_assert_int_eq(kop_workqueue_limiter_num_requeues(l, "ns/a"), 0);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "ns/a", now), 5 * MS);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "ns/a", now), 10 * MS);
    kop_workqueue_limiter_forget(l, "never-seen");
    kop_workqueue_limiter_free(l);
    kop_workqueue_limiter_free(NULL);
}
END_TEST

START_TEST(test_workqueue_bucket_10qps_100burst)
{
    struct kop_workqueue_limiter *l = NULL;
    /* Default bucket; a 1 ns per-key backoff so the bucket decides. */
    ck_assert_int_eq(kop_workqueue_limiter_new(1, 1, 0, 0, &l), 0);
    int64_t now = 50 * SEC;
    char key[32];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ck_assert_int_le(kop_workqueue_limiter_when(l, key, now), 1);
    }
    /* Burst spent: one every 100 ms. */
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "x1", now), 100 * MS);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "x2", now), 200 * MS);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "x3", now), 300 * MS);
    /* 10 s later the bucket has refilled (100 tokens in 10 s at 10 qps,
     * minus the 3 taken on credit). */
    now += 10 * SEC + 300 * MS;
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "y%d", i);
        ck_assert_int_le(kop_workqueue_limiter_when(l, key, now), 1);
    }
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "y100", now), 100 * MS);
    kop_workqueue_limiter_free(l);

    /* With real defaults, the bucket does not add to a first failure. */
    ck_assert_int_eq(kop_workqueue_limiter_new(0, 0, 0, 0, &l), 0);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "a", now), 5 * MS);
    ck_assert_int_eq(kop_workqueue_limiter_when(l, "a", now), 10 * MS);
    kop_workqueue_limiter_free(l);
}
END_TEST

/* ---- the queue ------------------------------------------------------------- */

static struct kop_workqueue *new_queue(const char *name, struct kop_metrics *m, int64_t base_ns)
{
    struct kop_workqueue_options o = {
        .name = name, .metrics = m, .base_delay_ns = base_ns, .qps = -1};
    struct kop_workqueue *q = NULL;
    ck_assert_int_eq(kop_workqueue_new(&o, &q), 0);
    return q;
}

START_TEST(test_workqueue_dedup)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/b"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 2);
    ck_assert_int_eq(kop_workqueue_add(q, ""), -EINVAL);

    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);
    ck_assert_str_eq(k, "ns/a");
    kop_workqueue_done(q, k);
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);
    ck_assert_str_eq(k, "ns/b");
    kop_workqueue_done(q, k);
    ck_assert_int_eq(kop_workqueue_get(q, 10, &k), -ETIMEDOUT);
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    kop_workqueue_done(q, "unknown");
    kop_workqueue_free(q);
}
END_TEST

START_TEST(test_workqueue_readd_while_processing)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);
    ck_assert_str_eq(k, "ns/a");
    ck_assert_uint_eq(kop_workqueue_processing(q), 1);

    /* Added while processing: dirty, but not handed to anyone else. */
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/a"), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    const char *k2 = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 20, &k2), -ETIMEDOUT);

    kop_workqueue_done(q, k);
    ck_assert_uint_eq(kop_workqueue_len(q), 1);
    ck_assert_uint_eq(kop_workqueue_processing(q), 0);
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k2), 0);
    ck_assert_str_eq(k2, "ns/a");
    kop_workqueue_done(q, k2);
    /* Processed twice, queued no more. */
    ck_assert_int_eq(kop_workqueue_get(q, 10, &k2), -ETIMEDOUT);
    kop_workqueue_free(q);
}
END_TEST

/* Stress: several workers, several producers, few keys. */
#define S_KEYS 16
#define S_WORKERS 4
#define S_PRODUCERS 2
#define S_ADDS 20000

struct stress {
    struct kop_workqueue *q;
    atomic_int in_progress[S_KEYS];
    atomic_int want[S_KEYS];
    atomic_int seen[S_KEYS];
    atomic_int violations;
    atomic_long processed;
    atomic_int max_parallel, running;
    unsigned seed;
};

static int key_index(const char *k)
{
    return (int)strtol(k + 4, NULL, 10);
}

static void *stress_worker(void *arg)
{
    struct stress *s = arg;
    const char *k;
    while (kop_workqueue_get(s->q, -1, &k) == 0) {
        int i = key_index(k);
        int expected = 0;
        if (!atomic_compare_exchange_strong(&s->in_progress[i], &expected, 1))
            atomic_fetch_add(&s->violations, 1);
        int r = atomic_fetch_add(&s->running, 1) + 1;
        int m = atomic_load(&s->max_parallel);
        while (r > m && !atomic_compare_exchange_weak(&s->max_parallel, &m, r))
            ;
        atomic_store(&s->seen[i], atomic_load(&s->want[i]));
        sched_yield();
        atomic_fetch_sub(&s->running, 1);
        atomic_store(&s->in_progress[i], 0);
        atomic_fetch_add(&s->processed, 1);
        kop_workqueue_done(s->q, k);
    }
    return NULL;
}

static void *stress_producer(void *arg)
{
    struct stress *s = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    char key[32];
    for (int n = 0; n < S_ADDS; n++) {
        int i = (int)(rand_r(&seed) % S_KEYS);
        snprintf(key, sizeof(key), "key/%d", i);
        kop_workqueue_add(s->q, key);
        if (n % 64 == 0)
            sched_yield();
    }
    return NULL;
}

static bool stress_settled(void *arg)
{
    struct stress *s = arg;
    for (int i = 0; i < S_KEYS; i++)
        if (atomic_load(&s->seen[i]) != atomic_load(&s->want[i]))
            return false;
    return kop_workqueue_len(s->q) == 0 && kop_workqueue_processing(s->q) == 0;
}

START_TEST(test_workqueue_no_concurrent_processing_stress)
{
    static struct stress s;
    memset(&s, 0, sizeof(s));
    s.q = new_queue(NULL, NULL, 0);
    pthread_t w[S_WORKERS], p[S_PRODUCERS];
    for (int i = 0; i < S_WORKERS; i++)
        ck_assert_int_eq(pthread_create(&w[i], NULL, stress_worker, &s), 0);
    for (int i = 0; i < S_PRODUCERS; i++)
        ck_assert_int_eq(pthread_create(&p[i], NULL, stress_producer, &s), 0);
    for (int i = 0; i < S_PRODUCERS; i++)
        pthread_join(p[i], NULL);

    /* A final add of every key after setting "want": each key must be
     * processed again after it, whatever state it was in. */
    char key[32];
    for (int i = 0; i < S_KEYS; i++) {
        atomic_store(&s.want[i], 1);
        snprintf(key, sizeof(key), "key/%d", i);
        ck_assert_int_eq(kop_workqueue_add(s.q, key), 0);
    }
    ck_assert(wait_until(stress_settled, &s, 10000));
    kop_workqueue_shutdown(s.q);
    for (int i = 0; i < S_WORKERS; i++)
        pthread_join(w[i], NULL);

    ck_assert_int_eq(atomic_load(&s.violations), 0);
    ck_assert_int_ge(atomic_load(&s.processed), S_KEYS);
    ck_assert_int_le(atomic_load(&s.max_parallel), S_WORKERS);
    for (int i = 0; i < S_KEYS; i++)
        ck_assert_int_eq(atomic_load(&s.seen[i]), 1);
    kop_workqueue_free(s.q);
}
END_TEST

START_TEST(test_workqueue_add_after_ordering)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    /* Before the adds: "c" is due no earlier than t0 + 90 ms. */
    int64_t t0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_workqueue_add_after(q, "c", 90 * MS), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "a", 30 * MS), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "b", 60 * MS), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    const char *want[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        const char *k = NULL;
        ck_assert_int_eq(kop_workqueue_get(q, 5000, &k), 0);
        ck_assert_str_eq(k, want[i]);
        kop_workqueue_done(q, k);
    }
    ck_assert_int_ge(kop_clock_now_ns() - t0, 85 * MS);

    /* A key already waiting keeps the earlier time. */
    ck_assert_int_eq(kop_workqueue_add_after(q, "x", 3600 * SEC), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "x", 10 * MS), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "x", 7200 * SEC), 0);
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 5000, &k), 0);
    ck_assert_str_eq(k, "x");
    kop_workqueue_done(q, k);
    ck_assert_int_eq(kop_workqueue_get(q, 30, &k), -ETIMEDOUT);

    /* Zero delay: at once. */
    ck_assert_int_eq(kop_workqueue_add_after(q, "now", 0), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 1);
    kop_workqueue_free(q);
}
END_TEST

START_TEST(test_workqueue_add_rate_limited_forget)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 20 * MS);
    ck_assert_int_eq(kop_workqueue_add_rate_limited(q, "k"), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    ck_assert_int_eq(kop_workqueue_num_requeues(q, "k"), 1);
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 5000, &k), 0);
    ck_assert_str_eq(k, "k");
    kop_workqueue_done(q, k);
    ck_assert_int_eq(kop_workqueue_add_rate_limited(q, "k"), 0);
    ck_assert_int_eq(kop_workqueue_num_requeues(q, "k"), 2);
    kop_workqueue_forget(q, "k");
    ck_assert_int_eq(kop_workqueue_num_requeues(q, "k"), 0);
    ck_assert_int_eq(kop_workqueue_get(q, 5000, &k), 0);
    ck_assert_str_eq(k, "k");
    kop_workqueue_done(q, k);
    kop_workqueue_free(q);
}
END_TEST

/* The backoff cap as resolved: the default, or the option. */
START_TEST(test_workqueue_max_backoff)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    ck_assert_int_eq(kop_workqueue_max_backoff_ns(q), 1000 * INT64_C(1000000000));
    kop_workqueue_free(q);
    struct kop_workqueue_options o = {.max_delay_ns = 7 * MS, .qps = -1};
    ck_assert_int_eq(kop_workqueue_new(&o, &q), 0);
    ck_assert_int_eq(kop_workqueue_max_backoff_ns(q), 7 * MS);
    kop_workqueue_free(q);
}
END_TEST

struct getter {
    struct kop_workqueue *q;
    int rc;
};

static void *getter_main(void *arg)
{
    struct getter *g = arg;
    const char *k;
    g->rc = kop_workqueue_get(g->q, -1, &k);
    return NULL;
}

START_TEST(test_workqueue_shutdown_wakes_getters)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    struct getter g[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        g[i].q = q;
        g[i].rc = 1;
        ck_assert_int_eq(pthread_create(&t[i], NULL, getter_main, &g[i]), 0);
    }
    sleep_ms(30);
    ck_assert_int_eq(kop_workqueue_add_after(q, "later", 10 * SEC), 0);
    kop_workqueue_shutdown(q);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(g[i].rc, -ESHUTDOWN);
    }
    ck_assert(kop_workqueue_shutting_down(q));
    ck_assert_int_eq(kop_workqueue_add(q, "a"), -ESHUTDOWN);
    ck_assert_int_eq(kop_workqueue_add_after(q, "a", MS), -ESHUTDOWN);
    ck_assert_int_eq(kop_workqueue_add_rate_limited(q, "a"), -ESHUTDOWN);
    const char *k;
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), -ESHUTDOWN);
    kop_workqueue_shutdown(q);
    kop_workqueue_free(q);
}
END_TEST

struct drainer {
    struct kop_workqueue *q;
    atomic_bool returned;
    int rc;
};

static void *drainer_main(void *arg)
{
    struct drainer *d = arg;
    d->rc = kop_workqueue_shutdown_with_drain(d->q, -1);
    atomic_store(&d->returned, true);
    return NULL;
}

START_TEST(test_workqueue_shutdown_with_drain_waits)
{
    struct kop_workqueue *q = new_queue(NULL, NULL, 0);
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_add(q, "busy"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "queued"), 0);
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);

    /* Bounded wait while work is in flight. */
    ck_assert_int_eq(kop_workqueue_shutdown_with_drain(q, 20), -ETIMEDOUT);

    static struct drainer d;
    d.q = q;
    atomic_store(&d.returned, false);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, drainer_main, &d), 0);
    sleep_ms(50);
    ck_assert(!atomic_load(&d.returned));
    /* Adding while processing after shutdown does not requeue it. */
    ck_assert_int_eq(kop_workqueue_add(q, "busy"), -ESHUTDOWN);
    kop_workqueue_done(q, k);
    pthread_join(t, NULL);
    ck_assert(atomic_load(&d.returned));
    ck_assert_int_eq(d.rc, 0);
    ck_assert_uint_eq(kop_workqueue_processing(q), 0);
    /* Queued keys are not handed out after shutdown. */
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), -ESHUTDOWN);
    ck_assert_int_eq(kop_workqueue_shutdown_with_drain(q, 0), 0);
    kop_workqueue_free(q);
}
END_TEST

static struct kop_metric *child(struct kop_metrics *m, enum kop_metric_type t, const char *name,
                                const char *label)
{
    static const char *const l1[] = {"name", NULL};
    struct kop_metric_family *f = kop_metrics_register(m, t, name, "x", l1, NULL, 0);
    ck_assert_ptr_nonnull(f);
    return kop_metric_child(f, label);
}

START_TEST(test_workqueue_metrics)
{
    struct kop_metrics *m = kop_metrics_new(false);
    ck_assert_ptr_nonnull(m);
    struct kop_workqueue *q = new_queue("myresource", m, 5 * MS);
    struct kop_metric *depth = child(m, KOP_METRIC_GAUGE, "workqueue_depth", "myresource");
    struct kop_metric *adds = child(m, KOP_METRIC_COUNTER, "workqueue_adds_total", "myresource");
    struct kop_metric *retries =
        child(m, KOP_METRIC_COUNTER, "workqueue_retries_total", "myresource");
    struct kop_metric *qdur =
        child(m, KOP_METRIC_HISTOGRAM, "workqueue_queue_duration_seconds", "myresource");
    struct kop_metric *wdur =
        child(m, KOP_METRIC_HISTOGRAM, "workqueue_work_duration_seconds", "myresource");
    struct kop_metric *unfinished =
        child(m, KOP_METRIC_GAUGE, "workqueue_unfinished_work_seconds", "myresource");
    struct kop_metric *longest =
        child(m, KOP_METRIC_GAUGE, "workqueue_longest_running_processor_seconds", "myresource");

    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "a");
    kop_workqueue_add(q, "b");
    ck_assert_double_eq(kop_metric_value(adds), 2);
    ck_assert_double_eq(kop_metric_value(depth), 2);

    sleep_ms(5);
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);
    ck_assert_double_eq(kop_metric_value(depth), 1);
    ck_assert_uint_eq(kop_histogram_count(qdur), 1);
    ck_assert_double_ge(kop_metric_value(qdur), 0.004);

    sleep_ms(20);
    kop_workqueue_update_metrics(q);
    ck_assert_double_ge(kop_metric_value(unfinished), 0.019);
    ck_assert_double_ge(kop_metric_value(longest), 0.019);
    ck_assert_double_lt(kop_metric_value(longest), 60);

    kop_workqueue_done(q, k);
    ck_assert_uint_eq(kop_histogram_count(wdur), 1);
    ck_assert_double_ge(kop_metric_value(wdur), 0.019);
    kop_workqueue_update_metrics(q);
    ck_assert_double_eq(kop_metric_value(unfinished), 0);
    ck_assert_double_eq(kop_metric_value(longest), 0);

    ck_assert_int_eq(kop_workqueue_add_rate_limited(q, "c"), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "d", 0), 0);
    ck_assert_double_eq(kop_metric_value(retries), 2);
    ck_assert_double_eq(kop_metric_value(adds), 3); /* d */

    char *text = NULL;
    size_t len = 0;
    ck_assert_int_eq(kop_metrics_render(m, &text, &len), 0);
    ck_assert_ptr_nonnull(strstr(text, "workqueue_depth{name=\"myresource\"} 2"));
    ck_assert_ptr_nonnull(strstr(text, "workqueue_adds_total{name=\"myresource\"} 3"));
    ck_assert_ptr_nonnull(
        strstr(text, "workqueue_queue_duration_seconds_bucket{name=\"myresource\",le=\"1e-08\"}"));
    free(text);
    kop_workqueue_free(q);
    kop_metrics_free(m);
}
END_TEST

/* ---- the worker pool -------------------------------------------------------- */

struct rec {
    pthread_mutex_t lock;
    int calls[8];
    int total;
    int bad_ids;
    int concurrent, max_concurrent;
    int hold_until; /* concurrency test: wait until this many are in */
    atomic_bool release;
    atomic_bool done_slow;
};

static struct rec R;

static const char *const rkeys[] = {"ns/ok", "ns/err", "ns/requeue", "ns/after", "ns/slow"};

static int rkey_index(const char *key)
{
    for (int i = 0; i < 5; i++)
        if (strcmp(key, rkeys[i]) == 0)
            return i;
    return 7;
}

static bool uuid_ok(const char *id)
{
    if (strlen(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-')
        return false;
    if (id[14] != '4' || !strchr("89ab", id[19]))
        return false;
    return true;
}

static struct kop_reconcile_result reconcile(void *ud, const char *key, const char *id)
{
    (void)ud;
    struct kop_reconcile_result res = {0};
    int i = rkey_index(key);
    pthread_mutex_lock(&R.lock);
    int n = ++R.calls[i];
    R.total++;
    if (!uuid_ok(id))
        R.bad_ids++;
    R.concurrent++;
    if (R.concurrent > R.max_concurrent)
        R.max_concurrent = R.concurrent;
    pthread_mutex_unlock(&R.lock);

    if (i == 1 && n == 1)
        res.error = -EIO;
    if (i == 2 && n == 1)
        res.requeue = true;
    if (i == 3 && n == 1)
        res.requeue_after_ns = 30 * MS;
    if (i == 4) {
        for (int t = 0; t < 5000 && !atomic_load(&R.release); t++)
            sleep_ms(1);
        atomic_store(&R.done_slow, true);
    }
    if (i == 7 && R.hold_until > 0) {
        /* Stay until hold_until reconciles are in at once (bounded). */
        for (int t = 0; t < 5000; t++) {
            pthread_mutex_lock(&R.lock);
            bool all = R.max_concurrent >= R.hold_until;
            pthread_mutex_unlock(&R.lock);
            if (all)
                break;
            sleep_ms(1);
        }
    }
    pthread_mutex_lock(&R.lock);
    R.concurrent--;
    pthread_mutex_unlock(&R.lock);
    return res;
}

static void rec_reset(void)
{
    pthread_mutex_lock(&R.lock);
    memset(R.calls, 0, sizeof(R.calls));
    R.total = R.bad_ids = R.concurrent = R.max_concurrent = R.hold_until = 0;
    atomic_store(&R.release, false);
    atomic_store(&R.done_slow, false);
    pthread_mutex_unlock(&R.lock);
}

static int rec_total(void)
{
    pthread_mutex_lock(&R.lock);
    int t = R.total;
    pthread_mutex_unlock(&R.lock);
    return t;
}

struct pool {
    struct kop_metrics *m;
    struct kop_workqueue *q;
    struct kop_workers *w;
};

static void pool_new(struct pool *p, const char *ctrl, int n)
{
    rec_reset();
    p->m = kop_metrics_new(false);
    ck_assert_ptr_nonnull(p->m);
    p->q = new_queue(ctrl, p->m, MS);
    struct kop_workers_options o = {.controller = ctrl,
                                    .max_concurrent = n,
                                    .queue = p->q,
                                    .reconcile = reconcile,
                                    .metrics = p->m};
    ck_assert_int_eq(kop_workers_new(&o, &p->w), 0);
    ck_assert_int_eq(kop_workers_start(p->w), 0);
    ck_assert_int_eq(kop_workers_start(p->w), -EALREADY);
}

static void pool_free(struct pool *p)
{
    kop_workers_free(p->w);
    kop_workqueue_free(p->q);
    kop_metrics_free(p->m);
}

static struct kop_metric *cr_child(struct kop_metrics *m, enum kop_metric_type t, const char *name,
                                   const char *ctrl, const char *result)
{
    static const char *const l1[] = {"controller", NULL};
    static const char *const l2[] = {"controller", "result", NULL};
    struct kop_metric_family *f = kop_metrics_register(m, t, name, "x", result ? l2 : l1, NULL, 0);
    ck_assert_ptr_nonnull(f);
    return result ? kop_metric_child(f, ctrl, result) : kop_metric_child(f, ctrl);
}

static struct kop_metric *g_success;

static bool seven_done(void *arg)
{
    struct pool *p = arg;
    return rec_total() >= 7 && kop_metric_value(g_success) >= 4 &&
           kop_workqueue_processing(p->q) == 0;
}

START_TEST(test_workqueue_workers_result_mapping)
{
    static struct pool p;
    pool_new(&p, "myresource", 2);
    struct kop_metric *success = cr_child(
        p.m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total", "myresource", "success");
    struct kop_metric *error = cr_child(
        p.m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total", "myresource", "error");
    struct kop_metric *requeue = cr_child(
        p.m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total", "myresource", "requeue");
    struct kop_metric *after =
        cr_child(p.m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total", "myresource",
                 "requeue_after");
    struct kop_metric *errors = cr_child(
        p.m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_errors_total", "myresource", NULL);
    struct kop_metric *rtime = cr_child(
        p.m, KOP_METRIC_HISTOGRAM, "controller_runtime_reconcile_time_seconds", "myresource", NULL);
    struct kop_metric *maxc = cr_child(
        p.m, KOP_METRIC_GAUGE, "controller_runtime_max_concurrent_reconciles", "myresource", NULL);
    struct kop_metric *active =
        cr_child(p.m, KOP_METRIC_GAUGE, "controller_runtime_active_workers", "myresource", NULL);
    ck_assert_double_eq(kop_metric_value(maxc), 2);
    ck_assert_double_eq(kop_metric_value(success), 0);

    g_success = success;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(kop_workqueue_add(p.q, rkeys[i]), 0);
    ck_assert(wait_until(seven_done, &p, 5000));

    pthread_mutex_lock(&R.lock);
    ck_assert_int_eq(R.calls[0], 1);
    ck_assert_int_eq(R.calls[1], 2); /* error -> rate limited retry */
    ck_assert_int_eq(R.calls[2], 2); /* requeue -> rate limited retry */
    ck_assert_int_eq(R.calls[3], 2); /* requeue_after -> delayed retry */
    ck_assert_int_eq(R.bad_ids, 0);
    pthread_mutex_unlock(&R.lock);

    ck_assert_double_eq(kop_metric_value(success), 4);
    ck_assert_double_eq(kop_metric_value(error), 1);
    ck_assert_double_eq(kop_metric_value(requeue), 1);
    ck_assert_double_eq(kop_metric_value(after), 1);
    ck_assert_double_eq(kop_metric_value(errors), 1);
    ck_assert_uint_eq(kop_histogram_count(rtime), 7);
    ck_assert_double_eq(kop_metric_value(active), 0);
    /* Success forgets the backoff. */
    ck_assert_int_eq(kop_workqueue_num_requeues(p.q, "ns/err"), 0);
    ck_assert_int_eq(kop_workqueue_num_requeues(p.q, "ns/requeue"), 0);
    ck_assert_int_eq(kop_workers_stop(p.w, 5000), 0);
    pool_free(&p);
}
END_TEST

static bool three_in(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&R.lock);
    bool ok = R.max_concurrent >= 3;
    pthread_mutex_unlock(&R.lock);
    return ok;
}

START_TEST(test_workqueue_workers_run_concurrently)
{
    static struct pool p;
    pool_new(&p, "conc", 3);
    R.hold_until = 3;
    char key[32];
    for (int i = 0; i < 6; i++) {
        snprintf(key, sizeof(key), "other/%d", i);
        ck_assert_int_eq(kop_workqueue_add(p.q, key), 0);
    }
    ck_assert(wait_until(three_in, NULL, 5000));
    ck_assert_int_eq(kop_workers_stop(p.w, 5000), 0);
    pthread_mutex_lock(&R.lock);
    ck_assert_int_eq(R.max_concurrent, 3);
    pthread_mutex_unlock(&R.lock);
    pool_free(&p);
}
END_TEST

static bool n_in(void *arg)
{
    int n = *(int *)arg;
    pthread_mutex_lock(&R.lock);
    bool ok = R.max_concurrent >= n;
    pthread_mutex_unlock(&R.lock);
    return ok;
}

static bool n_threads(void *arg)
{
    /* the threads of this process named worker-* */
    int want = *(int *)arg, n = 0;
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], name[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof(name), f) && strncmp(name, "worker-", 7) == 0)
            n++;
        fclose(f);
    }
    closedir(d);
    return n == want;
}

/* The pool grows at once (more reconciles run together, the gauge
 * follows) and shrinks: idle threads leave, the rest keep working. */
START_TEST(test_workqueue_workers_resize)
{
    static struct pool p;
    pool_new(&p, "resize", 1);
    struct kop_metric *maxc = cr_child(
        p.m, KOP_METRIC_GAUGE, "controller_runtime_max_concurrent_reconciles", "resize", NULL);
    int one = 1, four = 4;
    ck_assert(wait_until(n_threads, &one, 2000));
    ck_assert_int_eq(kop_workers_resize(p.w, 4), 0);
    ck_assert_double_eq(kop_metric_value(maxc), 4);
    ck_assert(wait_until(n_threads, &four, 2000));
    R.hold_until = 4;
    char key[32];
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "other/%d", i);
        ck_assert_int_eq(kop_workqueue_add(p.q, key), 0);
    }
    ck_assert(wait_until(n_in, &four, 5000));
    ck_assert_int_eq(kop_workers_resize(p.w, 1), 0);
    ck_assert_double_eq(kop_metric_value(maxc), 1);
    ck_assert(wait_until(n_threads, &one, 3000)); /* idle ones within IDLE_CHECK_MS */
    /* the one left still serves */
    pthread_mutex_lock(&R.lock);
    int before = R.total;
    R.hold_until = 0;
    pthread_mutex_unlock(&R.lock);
    ck_assert_int_eq(kop_workqueue_add(p.q, "other/after"), 0);
    for (int t = 0; t < 2000 && rec_total() == before; t++)
        sleep_ms(1);
    ck_assert_int_gt(rec_total(), before);
    /* grown again, then stopped: every thread joined */
    ck_assert_int_eq(kop_workers_resize(p.w, 3), 0);
    ck_assert_int_eq(kop_workers_stop(p.w, 5000), 0);
    int zero = 0;
    ck_assert(n_threads(&zero));
    pool_free(&p);
}
END_TEST

static bool one_active(void *arg)
{
    struct pool *p = arg;
    return kop_workers_active(p->w) == 1;
}

struct releaser {
    int after_ms;
};

static void *release_later(void *arg)
{
    struct releaser *r = arg;
    sleep_ms(r->after_ms);
    atomic_store(&R.release, true);
    return NULL;
}

START_TEST(test_workqueue_workers_stop_drains)
{
    static struct pool p;
    pool_new(&p, "drain", 2);
    ck_assert_int_eq(kop_workqueue_add(p.q, "ns/slow"), 0);
    ck_assert(wait_until(one_active, &p, 5000));
    struct releaser rel = {.after_ms = 50};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, release_later, &rel), 0);
    ck_assert_int_eq(kop_workers_stop(p.w, 5000), 0);
    /* The reconcile in flight finished before stop returned. */
    ck_assert(atomic_load(&R.done_slow));
    ck_assert_int_eq(kop_workers_active(p.w), 0);
    ck_assert(kop_workqueue_shutting_down(p.q));
    pthread_join(t, NULL);
    pool_free(&p);
}
END_TEST

START_TEST(test_workqueue_workers_pause_resume)
{
    static struct pool p;
    pool_new(&p, "pause", 2);
    ck_assert_int_eq(kop_workqueue_add(p.q, "ns/slow"), 0);
    ck_assert(wait_until(one_active, &p, 5000));
    /* Paused at once, but the reconcile in flight is not interrupted. */
    ck_assert_int_eq(kop_workers_pause(p.w, 20), -ETIMEDOUT);
    atomic_store(&R.release, true);
    ck_assert_int_eq(kop_workers_pause(p.w, 5000), 0);
    ck_assert(atomic_load(&R.done_slow));
    int before = rec_total();

    /* Nothing runs while paused; keys stay queued. */
    ck_assert_int_eq(kop_workqueue_add(p.q, "ns/ok"), 0);
    ck_assert_int_eq(kop_workqueue_add(p.q, "other/1"), 0);
    for (int i = 0; i < 5000 && kop_workqueue_len(p.q) < 2; i++)
        sleep_ms(1);
    sleep_ms(50);
    ck_assert_int_eq(rec_total(), before);
    ck_assert_uint_eq(kop_workqueue_len(p.q), 2);

    kop_workers_resume(p.w);
    for (int i = 0; i < 5000 && rec_total() < before + 2; i++)
        sleep_ms(1);
    ck_assert_int_eq(rec_total(), before + 2);

    /* Stop while paused does not wait for the queue. */
    kop_workers_pause(p.w, 5000);
    ck_assert_int_eq(kop_workqueue_add(p.q, "ns/ok"), 0);
    ck_assert_int_eq(kop_workers_stop(p.w, 5000), 0);
    ck_assert_int_eq(rec_total(), before + 2);
    pool_free(&p);
}
END_TEST

START_TEST(test_workqueue_workers_uuid_and_args)
{
    char a[37], b[37];
    ck_assert_int_eq(kop_workers_uuid(a, sizeof(a)), 0);
    ck_assert_int_eq(kop_workers_uuid(b, sizeof(b)), 0);
    ck_assert(uuid_ok(a));
    ck_assert(uuid_ok(b));
    ck_assert_str_ne(a, b);
    ck_assert_int_eq(kop_workers_uuid(a, 36), -EINVAL);

    kop_workers_free(NULL);
}
END_TEST

/* Groups in the tests: the part of a key before its ':' (none: ""). */
static size_t colon_group(const char *key)
{
    const char *c = strchr(key, ':');
    return c ? (size_t)(c - key) : 0;
}

static struct kop_workqueue *group_queue(int max)
{
    struct kop_workqueue *q = NULL;
    const struct kop_workqueue_options o = {.group_of = colon_group, .group_max_processing = max};
    ck_assert_int_eq(kop_workqueue_new(&o, &q), 0);
    return q;
}

static const char *get_now(struct kop_workqueue *q)
{
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 0, &k), 0);
    return k;
}

START_TEST(test_workqueue_groups_round_robin)
{
    struct kop_workqueue *q = group_queue(0);
    /* 3 keys of group a queued before any of b or of the default group */
    ck_assert_int_eq(kop_workqueue_add(q, "a:1"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "a:2"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "a:3"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "b:1"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/x"), 0);
    ck_assert_uint_eq(kop_workqueue_len(q), 5);
    size_t proc = 9;
    ck_assert_uint_eq(kop_workqueue_group_len(q, "a", &proc), 3);
    ck_assert_uint_eq(proc, 0);
    ck_assert_uint_eq(kop_workqueue_group_len(q, "", NULL), 1);
    ck_assert_uint_eq(kop_workqueue_group_len(q, "zz", &proc), 0);
    /* each group in turn, FIFO within a group */
    const char *want[] = {"ns/x", "a:1", "b:1", "a:2", "a:3"};
    for (size_t i = 0; i < 5; i++) {
        const char *k = get_now(q);
        ck_assert_str_eq(k, want[i]);
        kop_workqueue_done(q, k);
    }
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    /* the groups are gone with their keys; new ones come back */
    ck_assert_int_eq(kop_workqueue_add(q, "b:2"), 0);
    ck_assert_str_eq(get_now(q), "b:2");
    kop_workqueue_done(q, "b:2");
    kop_workqueue_free(q);
}
END_TEST

/* A group's queued, delayed and backed-off keys go; its key being
 * processed stays until done() and is not queued again; the other groups
 * keep theirs. */
START_TEST(test_workqueue_forget_group)
{
    struct kop_workqueue *q = NULL;
    const struct kop_workqueue_options o = {
        .group_of = colon_group, .base_delay_ns = 50 * MS, .qps = -1};
    ck_assert_int_eq(kop_workqueue_new(&o, &q), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "a:run"), 0);
    const char *k = get_now(q);
    ck_assert_str_eq(k, "a:run");
    ck_assert_int_eq(kop_workqueue_add(q, "a:run"), 0); /* dirty while processing */
    ck_assert_int_eq(kop_workqueue_add(q, "a:1"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "a:2"), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "a:late", 60 * KOP_NSEC_PER_SEC), 0);
    ck_assert_int_eq(kop_workqueue_add_rate_limited(q, "a:retry"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "a:both"), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "a:both", 60 * KOP_NSEC_PER_SEC), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "b:1"), 0);
    ck_assert_int_eq(kop_workqueue_add_after(q, "b:late", 80 * MS), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/x"), 0);
    ck_assert_int_eq(kop_workqueue_num_requeues(q, "a:retry"), 1);

    ck_assert_uint_eq(kop_workqueue_forget_group(q, "a"), 5); /* 1, 2, late, retry, both */
    ck_assert_uint_eq(kop_workqueue_forget_group(q, "nosuch"), 0);
    ck_assert_int_eq(kop_workqueue_num_requeues(q, "a:retry"), 0);
    size_t proc = 0;
    ck_assert_uint_eq(kop_workqueue_group_len(q, "a", &proc), 0);
    ck_assert_uint_eq(proc, 1);
    ck_assert_uint_eq(kop_workqueue_len(q), 2);
    kop_workqueue_done(q, "a:run"); /* not queued again */
    ck_assert_uint_eq(kop_workqueue_len(q), 2);
    const char *want[] = {"ns/x", "b:1"};
    for (size_t i = 0; i < 2; i++) {
        k = get_now(q);
        ck_assert_str_eq(k, want[i]);
        kop_workqueue_done(q, k);
    }
    /* b's delayed key still comes (the heap kept its order), a's do not */
    ck_assert_int_eq(kop_workqueue_get(q, 2000, &k), 0);
    ck_assert_str_eq(k, "b:late");
    kop_workqueue_done(q, k);
    ck_assert_int_eq(kop_workqueue_get(q, 200, &k), -ETIMEDOUT);
    /* the group can come back */
    ck_assert_int_eq(kop_workqueue_add(q, "a:new"), 0);
    ck_assert_str_eq(get_now(q), "a:new");
    kop_workqueue_done(q, "a:new");
    kop_workqueue_free(q);
}
END_TEST

START_TEST(test_workqueue_groups_bound)
{
    struct kop_workqueue *q = group_queue(2);
    for (int i = 0; i < 4; i++) {
        char k[16];
        snprintf(k, sizeof(k), "slow:%d", i);
        ck_assert_int_eq(kop_workqueue_add(q, k), 0);
    }
    const char *s0 = get_now(q), *s1 = get_now(q);
    ck_assert_str_eq(s0, "slow:0");
    ck_assert_str_eq(s1, "slow:1");
    size_t proc = 0;
    ck_assert_uint_eq(kop_workqueue_group_len(q, "slow", &proc), 2);
    ck_assert_uint_eq(proc, 2);
    /* slow is at its bound: nothing of it, the others still pass */
    const char *k = NULL;
    ck_assert_int_eq(kop_workqueue_get(q, 20, &k), -ETIMEDOUT);
    ck_assert_int_eq(kop_workqueue_add(q, "fast:0"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "ns/x"), 0);
    const char *a = get_now(q), *b = get_now(q);
    ck_assert(strcmp(a, "fast:0") == 0 || strcmp(b, "fast:0") == 0);
    ck_assert(strcmp(a, "ns/x") == 0 || strcmp(b, "ns/x") == 0);
    kop_workqueue_done(q, a);
    kop_workqueue_done(q, b);
    ck_assert_int_eq(kop_workqueue_get(q, 20, &k), -ETIMEDOUT);
    /* one done: one more of slow */
    kop_workqueue_done(q, s0);
    ck_assert_str_eq(get_now(q), "slow:2");
    ck_assert_int_eq(kop_workqueue_get(q, 20, &k), -ETIMEDOUT);
    kop_workqueue_done(q, s1);
    kop_workqueue_done(q, "slow:2");
    ck_assert_str_eq(get_now(q), "slow:3");
    kop_workqueue_done(q, "slow:3");
    ck_assert_uint_eq(kop_workqueue_len(q), 0);
    ck_assert_uint_eq(kop_workqueue_processing(q), 0);
    kop_workqueue_free(q);
}
END_TEST

struct bound_waiter {
    struct kop_workqueue *q;
    char key[32];
    int r;
};

static void *bound_get(void *arg)
{
    struct bound_waiter *w = arg;
    const char *k = NULL;
    w->r = kop_workqueue_get(w->q, 5000, &k);
    if (w->r == 0) {
        snprintf(w->key, sizeof(w->key), "%s", k);
        kop_workqueue_done(w->q, k);
    }
    return NULL;
}

/* A getter blocked while the only queued group is at its bound wakes when
 * the group gets room. */
START_TEST(test_workqueue_groups_bound_wakes)
{
    struct kop_workqueue *q = group_queue(1);
    ck_assert_int_eq(kop_workqueue_add(q, "slow:0"), 0);
    ck_assert_int_eq(kop_workqueue_add(q, "slow:1"), 0);
    const char *s0 = get_now(q);
    struct bound_waiter w = {.q = q};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, bound_get, &w), 0);
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kop_workqueue_done(q, s0);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.r, 0);
    ck_assert_str_eq(w.key, "slow:1");
    kop_workqueue_free(q);
}
END_TEST

static Suite *workqueue_suite(void)
{
    Suite *s = suite_create("workqueue");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_workqueue_backoff_growth_cap_forget);
    tcase_add_test(tc, test_workqueue_bucket_10qps_100burst);
    tcase_add_test(tc, test_workqueue_dedup);
    tcase_add_test(tc, test_workqueue_groups_round_robin);
    tcase_add_test(tc, test_workqueue_forget_group);
    tcase_add_test(tc, test_workqueue_groups_bound);
    tcase_add_test(tc, test_workqueue_groups_bound_wakes);
    tcase_add_test(tc, test_workqueue_max_backoff);
    tcase_add_test(tc, test_workqueue_readd_while_processing);
    tcase_add_test(tc, test_workqueue_no_concurrent_processing_stress);
    tcase_add_test(tc, test_workqueue_add_after_ordering);
    tcase_add_test(tc, test_workqueue_add_rate_limited_forget);
    tcase_add_test(tc, test_workqueue_shutdown_wakes_getters);
    tcase_add_test(tc, test_workqueue_shutdown_with_drain_waits);
    tcase_add_test(tc, test_workqueue_metrics);
    tcase_add_test(tc, test_workqueue_workers_result_mapping);
    tcase_add_test(tc, test_workqueue_workers_run_concurrently);
    tcase_add_test(tc, test_workqueue_workers_resize);
    tcase_add_test(tc, test_workqueue_workers_stop_drains);
    tcase_add_test(tc, test_workqueue_workers_pause_resume);
    tcase_add_test(tc, test_workqueue_workers_uuid_and_args);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    pthread_mutex_init(&R.lock, NULL);
    int r = kop_test_run(workqueue_suite());
    kop_metrics_global_cleanup();
    return r;
}
