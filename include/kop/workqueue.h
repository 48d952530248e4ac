/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rate-limited, delaying work queue of string keys ("ns/name") with
 * client-go semantics: a key is queued at most once (dirty set), a key
 * being processed is never handed to a second worker (processing set; an
 * add while processing marks it dirty and it is queued again by done()),
 * delayed adds, and per-key exponential backoff combined with an overall
 * token bucket.
 *
 * The rate limiter is a separate, pure object (time passed in as "now")
 * so backoff can be tested without sleeping; the queue uses it with
 * kop_clock_now_ns().
 *
 * Metrics (when a name is given), as client-go/controller-runtime name
 * them, label name=<queue name>: workqueue_depth, workqueue_adds_total,
 * workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
 * workqueue_retries_total, workqueue_unfinished_work_seconds,
 * workqueue_longest_running_processor_seconds.
 *
 * Shutdown differs from client-go in one point: once shut down, get()
 * returns -ESHUTDOWN at once even if keys are still queued (client-go
 * hands them out and controller-runtime's reconciles then fail fast on a
 * cancelled context; the effect is the same, without running them).
 *
 * Thread-safety: any thread, after kop_workqueue_new();
 * kop_workqueue_free() only when no other thread uses the queue. The same
 * holds for the limiter.
 */
#ifndef KOP_WORKQUEUE_H
#define KOP_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kop_metrics;
struct kop_workqueue;
struct kop_workqueue_limiter;

/* ---- the rate limiter (pure: "now" is a parameter) ------------------------ */

/*
 * The max of an ItemExponentialFailureRateLimiter (base_delay_ns doubling
 * per failure of a key, capped at max_delay_ns) and a BucketRateLimiter
 * (qps/burst token bucket shared by all keys). base_delay_ns <= 0: 5 ms;
 * max_delay_ns <= 0: 1000 s; qps == 0: 10, qps < 0: no bucket; burst <= 0:
 * 100. Returns 0, -EINVAL or -ENOMEM; *ret on success.
 */
int kop_workqueue_limiter_new(int64_t base_delay_ns, int64_t max_delay_ns, double qps, int burst,
                              struct kop_workqueue_limiter **ret);

/* NULL-safe. */
void kop_workqueue_limiter_free(struct kop_workqueue_limiter *l);

/*
 * How long key must wait before it is retried, as of now_ns
 * (CLOCK_MONOTONIC nanoseconds); counts one more failure of key and takes
 * a bucket token. On ENOMEM the failure is not remembered (the bucket
 * delay still applies).
 */
int64_t kop_workqueue_limiter_when(struct kop_workqueue_limiter *l, const char *key,
                                   int64_t now_ns);

/* Reset key's failure count. */
void kop_workqueue_limiter_forget(struct kop_workqueue_limiter *l, const char *key);

/* Failures counted for key since the last forget. */
int kop_workqueue_limiter_num_requeues(struct kop_workqueue_limiter *l, const char *key);

/* ---- the queue ------------------------------------------------------------- */

struct kop_workqueue_options {
    const char *name;            /* metrics label "name"; NULL: no metrics */
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
    int64_t base_delay_ns;       /* per-key backoff start; 0: 5 ms */
    int64_t max_delay_ns;        /* per-key backoff cap; 0: 1000 s */
    double qps;                  /* overall bucket; 0: 10; negative: none */
    int burst;                   /* overall bucket; 0: 100 */
    /* Groups: the length of the prefix of key that names its group (0: the
     * default group ""); NULL: one group. get() serves the groups round
     * robin and hands out no key of a group that has group_max_processing
     * keys processing (<= 0: no bound), so one group cannot hold every
     * worker. The function must give the same answer for the same key and
     * is called under the queue's lock. */
    size_t (*group_of)(const char *key);
    int group_max_processing;
};

/*
 * Create a queue (opt may be NULL for the defaults) and start its timer
 * thread (delayed adds, unfinished-work metrics every 500 ms). Returns 0,
 * -EINVAL, -ENOMEM or -EAGAIN (thread); *ret on success.
 */
int kop_workqueue_new(const struct kop_workqueue_options *opt, struct kop_workqueue **ret);

/* Shut down, stop the timer thread and free every key. NULL-safe. Keys
 * returned by get() become invalid. */
void kop_workqueue_free(struct kop_workqueue *q);

/*
 * Queue key unless it is already queued; if it is being processed it is
 * marked dirty and queued again when done() is called. Returns 0,
 * -ESHUTDOWN (ignored), -EINVAL (empty key) or -ENOMEM.
 */
int kop_workqueue_add(struct kop_workqueue *q, const char *key);

/*
 * Add key once delay_ns has passed (<= 0: now). A key already waiting
 * keeps the earlier of its two ready times. Counts a retry in
 * workqueue_retries_total, like client-go. Errors as kop_workqueue_add().
 */
int kop_workqueue_add_after(struct kop_workqueue *q, const char *key, int64_t delay_ns);

/* add_after(key, limiter.when(key, now)). Errors as kop_workqueue_add(). */
int kop_workqueue_add_rate_limited(struct kop_workqueue *q, const char *key);

/* Reset key's backoff (not its place in the queue). */
void kop_workqueue_forget(struct kop_workqueue *q, const char *key);

/* Failures counted for key since the last forget. */
int kop_workqueue_num_requeues(struct kop_workqueue *q, const char *key);

/* The per-key backoff cap (max_delay_ns as resolved: 1000 s by default):
 * the longest a failing key waits, and what a caller caps a delay the
 * server asked for (Retry-After) at. */
int64_t kop_workqueue_max_backoff_ns(const struct kop_workqueue *q);

/*
 * Take the oldest queued key (of the next group with room, see
 * group_of) and mark it processing. Blocks up to
 * timeout_ms (negative: forever). *ret_key is owned by the queue and
 * stays valid until kop_workqueue_done() for it. Returns 0, -ETIMEDOUT or
 * -ESHUTDOWN.
 */
int kop_workqueue_get(struct kop_workqueue *q, int64_t timeout_ms, const char **ret_key);

/* Finish processing key (queue it again if it was added meanwhile). key
 * may be the pointer get() returned. Unknown keys are ignored. */
void kop_workqueue_done(struct kop_workqueue *q, const char *key);

/* Keys queued (not processing, not waiting for a delay). */
size_t kop_workqueue_len(struct kop_workqueue *q);

/* Keys being processed. */
size_t kop_workqueue_processing(struct kop_workqueue *q);

/* Keys of group queued (as kop_workqueue_len), and in *ret_processing (may
 * be NULL) those of it being processed; 0 for a group without keys. */
size_t kop_workqueue_group_len(struct kop_workqueue *q, const char *group, size_t *ret_processing);

/* Drop every key of group (queued and delayed ones, and their backoff);
 * keys of it being processed stay processing but are not queued again by
 * done() (a later add does queue them). For a group that is gone (a
 * disengaged cluster). Returns the number of keys dropped. */
size_t kop_workqueue_forget_group(struct kop_workqueue *q, const char *group);

/* No more adds; wake every getter with -ESHUTDOWN; drop delayed keys.
 * Idempotent. */
void kop_workqueue_shutdown(struct kop_workqueue *q);

/* Shut down, then wait up to timeout_ms (negative: forever) until no key
 * is being processed. Returns 0 or -ETIMEDOUT. */
int kop_workqueue_shutdown_with_drain(struct kop_workqueue *q, int64_t timeout_ms);

bool kop_workqueue_shutting_down(struct kop_workqueue *q);

/* Refresh workqueue_unfinished_work_seconds and
 * workqueue_longest_running_processor_seconds now (the timer thread does
 * it every 500 ms). */
void kop_workqueue_update_metrics(struct kop_workqueue *q);

#endif /* KOP_WORKQUEUE_H */
