/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pool of reconcile workers (--max-concurrent-reconciles) over a
 * kop_workqueue, handling results the way controller-runtime does:
 *
 *   error < 0          -> add_rate_limited, result "error" (+ errors_total)
 *   requeue_after > 0  -> forget + add_after, result "requeue_after"
 *   requeue            -> add_rate_limited, result "requeue"
 *   otherwise          -> forget, result "success"
 *
 * Each reconcile gets a fresh reconcileID (a random UUID v4 string) for
 * its logs. Metrics, label controller=<name>:
 * controller_runtime_reconcile_total{controller,result},
 * controller_runtime_reconcile_errors_total,
 * controller_runtime_reconcile_time_seconds (histogram),
 * controller_runtime_max_concurrent_reconciles,
 * controller_runtime_active_workers.
 *
 * Pausing (leader election lost the lease) stops handing out keys at
 * once, without draining the queue, and lets reconciles in flight finish;
 * resume() starts again. Stopping shuts the queue down, waits for
 * reconciles in flight and joins the threads.
 *
 * Thread-safety: any thread after kop_workers_new(); kop_workers_free()
 * only once, when no other thread calls into the pool. The reconcile
 * callback runs on the pool's threads, up to max_concurrent at once, never
 * twice at once for the same key.
 */
#ifndef KOP_WORKERS_H
#define KOP_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kop_metrics;
struct kop_workqueue;
struct kop_workers;

struct kop_reconcile_result {
    int error;                /* 0 or a negative errno */
    bool requeue;             /* requeue with the per-key backoff */
    int64_t requeue_after_ns; /* > 0: requeue after this delay (wins over requeue) */
};

/* Reconcile key. reconcile_id is a UUID v4 for logs; both strings are
 * valid for the call only. */
typedef struct kop_reconcile_result (*kop_workers_reconcile_fn)(void *ud, const char *key,
                                                                const char *reconcile_id);

struct kop_workers_options {
    const char *controller;             /* metrics/log label; required */
    int max_concurrent;                 /* threads; <= 0: 1 */
    struct kop_workqueue *queue;        /* borrowed; required */
    kop_workers_reconcile_fn reconcile; /* required */
    void *ud;
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
    /* The reconcile function records controller_runtime_reconcile_total,
     * _errors_total and _time_seconds itself (with more labels: a
     * cluster's), by the rule of kop_workers_result_index; the pool keeps
     * max_concurrent_reconciles and active_workers. */
    bool caller_counts;
};

/* controller-runtime's reconcile_time_seconds buckets. */
extern const double kop_workers_time_buckets[];
extern const size_t kop_workers_n_time_buckets;

/* The result label of res: 0 success, 1 error, 2 requeue, 3
 * requeue_after (controller-runtime's names, in kop_workers_results). */
int kop_workers_result_index(struct kop_reconcile_result res);
extern const char *const kop_workers_results[4];

/* Returns 0 or -ENOMEM; *ret on success. No thread runs yet. */
int kop_workers_new(const struct kop_workers_options *opt, struct kop_workers **ret);

/* Start the threads (once). Returns 0, -EALREADY or -EAGAIN. */
int kop_workers_start(struct kop_workers *w);

/*
 * Stop handing out keys now (keys stay queued) and wait up to timeout_ms
 * (negative: forever) for reconciles in flight to return. Returns 0 when
 * none runs any more, -ETIMEDOUT otherwise (pausing still holds).
 */
int kop_workers_pause(struct kop_workers *w, int64_t timeout_ms);

/* Hand out keys again. */
void kop_workers_resume(struct kop_workers *w);

/*
 * Shut the queue down, wait up to timeout_ms (negative: forever) for
 * reconciles in flight, and join the threads. Returns 0, or -ETIMEDOUT
 * (threads still running a reconcile are joined by kop_workers_free()).
 * NULL-safe: 0 (an owner that failed halfway stops what it has).
 */
int kop_workers_stop(struct kop_workers *w, int64_t timeout_ms);

/*
 * Make the pool n threads (<= 0: 1), before or after start: new threads
 * start at once; when shrinking, idle threads leave within a second and a
 * busy one after its reconcile, and the call returns once they have left
 * and are joined (their thread-specific data, such as a client's
 * per-thread handles, released: what only they used may be freed then).
 * For a pool serving one more cluster or one fewer.
 * controller_runtime_max_concurrent_reconciles follows. Returns 0,
 * -EAGAIN or -ENOMEM (the pool keeps what it had). From one thread, not
 * concurrently with stop.
 */
int kop_workers_resize(struct kop_workers *w, int n);

/* Reconciles running now. */
int kop_workers_active(struct kop_workers *w);

/* Stop (waiting as long as it takes) and free. NULL-safe. */
void kop_workers_free(struct kop_workers *w);

/* Write a random UUID v4 ("xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx") into buf
 * (37 bytes). Returns 0 or -EINVAL (buffer too small). */
int kop_workers_uuid(char *buf, size_t len);

#endif /* KOP_WORKERS_H */
