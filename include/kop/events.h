/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A core/v1 Event recorder with client-go-style deduplication.
 *
 * The same (involved object, type, reason, message) recorded again within
 * the dedup window (10 minutes since it was last seen) does not create a
 * new Event: the existing one is patched with count+1 and a new
 * lastTimestamp. A bounded LRU cache (4096 entries by default) remembers
 * each recent Event's name, count and firstTimestamp. Event names follow
 * client-go: "<involvedName>.<16 hex digits of the wall clock in ns>".
 *
 * The dedup core (kop_event_cache_*) and the object builders are pure:
 * time is passed in, nothing touches the network. The recorder wraps them
 * with a bounded queue and one sender thread, so kop_events_record()
 * never waits on the network: when the queue is full the event is dropped
 * with a log line. Writes are best-effort: a failed write is logged and
 * not retried (beyond the API client's own Retry-After retries); a patch
 * of an Event that has expired on the server (404) falls back to creating
 * it, like client-go.
 *
 * Thread-safety: kop_events_record*() and kop_events_flush() from any
 * thread; kop_events_new()/kop_events_free() from one thread. The cache is
 * not thread-safe (the recorder locks around it).
 */
#ifndef KOP_EVENTS_H
#define KOP_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct kop_client;
struct kop_events;
struct kop_event_cache;

/* The involvedObject. NULL fields are left out of the Event. */
struct kop_event_ref {
    const char *api_version;
    const char *kind;
    const char *namespace; /* NULL/"" for cluster-scoped (Event goes to "default") */
    const char *name;      /* required */
    const char *uid;
    const char *resource_version;
};

enum kop_event_type {
    KOP_EVENT_NORMAL,
    KOP_EVENT_WARNING,
};

/* "Normal" / "Warning". */
const char *kop_event_type_name(enum kop_event_type type);

/* Messages longer than this are cut (at a UTF-8 boundary). */
#define KOP_EVENT_MESSAGE_MAX 1024

/* ---- the pure dedup core ------------------------------------------------- */

struct kop_event_decision {
    bool patch;            /* true: patch the existing Event; false: create */
    int count;             /* the Event's count after this observation */
    char name[254];        /* the Event's metadata.name */
    int64_t first_wall_ns; /* firstTimestamp */
    int64_t last_wall_ns;  /* lastTimestamp (the wall_ns passed in) */
};

/* capacity 0: 4096; window_ns <= 0: 10 minutes. Returns 0 or -ENOMEM;
 * *ret on success. */
int kop_event_cache_new(size_t capacity, int64_t window_ns, struct kop_event_cache **ret);

/* NULL-safe. */
void kop_event_cache_free(struct kop_event_cache *c);

/* Entries held (never more than the capacity). */
size_t kop_event_cache_len(const struct kop_event_cache *c);

/*
 * Observe one event at now_ns (CLOCK_MONOTONIC, decides the window) and
 * wall_ns (CLOCK_REALTIME, names and timestamps). The message is cut to
 * KOP_EVENT_MESSAGE_MAX before comparing. Returns 0, -EINVAL (a ref
 * without a name) or -ENOMEM; *ret on success.
 */
int kop_event_cache_observe(struct kop_event_cache *c, const struct kop_event_ref *ref,
                            enum kop_event_type type, const char *reason, const char *message,
                            int64_t now_ns, int64_t wall_ns, struct kop_event_decision *ret);

/*
 * The whole core/v1 Event as client-go writes it, in the API's field
 * order: kind, apiVersion, metadata{name, namespace}, involvedObject,
 * reason, message, source{component[, host]}, firstTimestamp,
 * lastTimestamp, count, type, eventTime (null), reportingComponent,
 * reportingInstance. instance may be NULL (""). @ref new; NULL on ENOMEM.
 */
json_t *kop_event_build(const struct kop_event_ref *ref, enum kop_event_type type,
                        const char *reason, const char *message, const struct kop_event_decision *d,
                        const char *component, const char *instance);

/* The merge patch for a repeat: {"count", "lastTimestamp", "message"}.
 * @ref new; NULL on ENOMEM. */
json_t *kop_event_patch_body(const struct kop_event_decision *d, const char *message);

/* The namespace an Event for ref lives in ("default" when cluster-scoped). */
const char *kop_event_namespace(const struct kop_event_ref *ref);

/* ---- the recorder ---------------------------------------------------------- */

struct kop_events_options {
    struct kop_client *client; /* borrowed; required */
    const char *component;     /* source.component, reportingComponent; NULL: the program's name */
    const char *instance;      /* reportingInstance, source.host; NULL: hostname */
    size_t cache_size;         /* 0: 4096 */
    size_t queue_size;         /* pending writes; 0: 256 */
    int64_t window_ns;         /* dedup window; 0: 10 minutes */
};

struct kop_events_stats {
    unsigned long created; /* Events created */
    unsigned long patched; /* Events patched */
    unsigned long failed;  /* writes that failed */
    unsigned long dropped; /* records dropped because the queue was full */
};

/* Start the sender thread. Returns 0, -ENOMEM or -EAGAIN. */
int kop_events_new(const struct kop_events_options *opt, struct kop_events **ret);

/* Abort a write in flight, drop queued ones (counted in the log), join
 * the sender. NULL-safe. */
void kop_events_free(struct kop_events *ev);

/* Record an event (never blocks on the network). NULL ev is fine (no
 * recorder configured): a no-op; so is a ref without a name. */
void kop_events_record(struct kop_events *ev, const struct kop_event_ref *ref,
                       enum kop_event_type type, const char *reason, const char *message);

void kop_events_recordf(struct kop_events *ev, const struct kop_event_ref *ref,
                        enum kop_event_type type, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Wait up to timeout_ms (negative: forever) until every queued write was
 * sent. Returns 0 or -ETIMEDOUT. */
int kop_events_flush(struct kop_events *ev, int64_t timeout_ms);

/* Counters so far. */
void kop_events_get_stats(struct kop_events *ev, struct kop_events_stats *ret);

#endif /* KOP_EVENTS_H */
