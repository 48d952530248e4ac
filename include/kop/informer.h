/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Informer: keeps the shared store in step with one resource type on the
 * API server (list, then watch), and tells handlers what changed.
 *
 * One thread per informer. It LISTs in pages (limit/continue), replaces
 * the store's view of the type, then WATCHes from the list's
 * resourceVersion with allowWatchBookmarks=true and a random
 * timeoutSeconds. Watches that end are resumed from the last seen
 * resourceVersion (events and bookmarks advance it); 410 Gone / Expired
 * (an HTTP 410, an ERROR event with code 410, or "too old resource
 * version") triggers a relist. Other errors back off (0.8 s doubling to
 * 30 s, +-20% jitter; reset once a watch stayed healthy for 2 min). A
 * watch that delivers no byte for 5 min is dropped and resumed.
 *
 * Handlers run on the informer thread, in order, after the store was
 * updated: add(new), update(old, new), delete(last). A relist synthesizes
 * update for objects whose resourceVersion changed, add for new ones and
 * delete for vanished ones (like client-go's DeltaFIFO Replace). The
 * sequence per key is always consistent: no update before an add, nothing
 * after a delete until the next add.
 *
 * One informer per (kind, store): the relist diff works on every store
 * entry of the kind (within the informer's namespace).
 *
 * Transform (optional, like client-go's SetTransform): every object the
 * server sends (LIST items, ADDED/MODIFIED objects, the final state of a
 * DELETED one) goes through it after kind/apiVersion were filled in and
 * before it is stored or a handler sees it, so the store and the handlers
 * only ever hold what it returns. It runs on the informer thread. It
 * should keep metadata.name, metadata.namespace and
 * metadata.resourceVersion (the relist diff compares the resourceVersion
 * the server sent with the stored one). Returning NULL drops the object
 * (and is what an ENOMEM inside it does): nothing is stored for that event
 * and a stored entry under its key stays as it was (a relist does not
 * delete it either); a DELETED event still removes the entry, and its
 * handler then gets the last stored value.
 *
 * Metadata only (metadata_only): LIST and WATCH ask for
 * PartialObjectMetadata(List) in the Accept header, with application/json
 * as the fallback, so an apiserver sends only apiVersion, kind and
 * metadata (kind PartialObjectMetadata, apiVersion meta.k8s.io/v1); a
 * server that ignores it sends whole objects. A transform that keeps what
 * it needs works with both.
 *
 * Thread-safety: new/free from one thread; start/stop from the owner;
 * has_synced/wait_synced/stats from any thread.
 */
#ifndef KOP_INFORMER_H
#define KOP_INFORMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kop/client.h"

struct kop_store;
struct kop_informer;

/* Every json_t is @ref borrow, valid during the call; json_incref to keep.
 * They are private to the informer's thread (kop_store_put's ret_old and
 * ret_new, kop/store.h), not the stored bytes: a handler that modifies one
 * changes nothing in the store. */
typedef void (*kop_informer_add_fn)(void *ud, json_t *obj);
typedef void (*kop_informer_update_fn)(void *ud, json_t *old_obj, json_t *new_obj);
typedef void (*kop_informer_delete_fn)(void *ud, json_t *obj);

/* @ref steal obj (a value private to the informer thread: it may be
 * modified and returned); returns @ref new, the object to store (obj or a
 * new value), or NULL to drop it (see above). */
typedef json_t *(*kop_informer_transform_fn)(void *ud, json_t *obj);

/* Accept header values of a metadata-only LIST and WATCH. */
#define KOP_INFORMER_ACCEPT_META_LIST                                                              \
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
#define KOP_INFORMER_ACCEPT_META_WATCH                                                             \
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

struct kop_informer_options {
    struct kop_client *client; /* borrowed */
    struct kop_store *store;   /* borrowed */
    struct kop_resource resource;
    const char *kind;           /* store kind, e.g. "Deployment"; also set on
                                   list items that lack kind/apiVersion */
    const char *namespace;      /* NULL: all namespaces */
    const char *label_selector; /* NULL: none */
    const char *field_selector; /* NULL: none */
    const char *name;           /* for logs; NULL: the resource */
    long page_size;             /* 0: 500 */
    int64_t backoff_initial_ms; /* 0: 800 */
    int64_t backoff_max_ms;     /* 0: 30000 */
    int64_t backoff_reset_ms;   /* 0: 120000 */
    int64_t idle_timeout_ms;    /* 0: 300000 (no byte -> reconnect) */
    int watch_timeout_min_s;    /* 0: 300 */
    int watch_timeout_max_s;    /* 0: 600 */
    kop_informer_add_fn on_add; /* each may be NULL */
    kop_informer_update_fn on_update;
    kop_informer_delete_fn on_delete;
    kop_informer_transform_fn transform; /* NULL: store objects as sent */
    void *ud;                            /* for the handlers and the transform */
    bool metadata_only;                  /* ask for PartialObjectMetadata */
};

struct kop_informer_stats {
    unsigned long lists;       /* completed full LISTs (first one included) */
    unsigned long pages;       /* LIST pages fetched */
    unsigned long watches;     /* WATCH requests started */
    unsigned long errors;      /* failed requests and bad streams */
    unsigned long dropped;     /* objects the transform dropped */
    char resource_version[64]; /* last seen */
};

/* Strings are copied. Returns 0, -EINVAL (an empty kind), -ENOMEM; *ret
 * on success. */
int kop_informer_new(const struct kop_informer_options *opt, struct kop_informer **ret);

/* Start the thread. Returns 0, -EALREADY, or -errno from pthread_create. */
int kop_informer_start(struct kop_informer *inf);

/* Stop the thread and wait for it: aborts a request in flight, so it
 * returns promptly. Idempotent. NULL-safe (an owner that failed halfway
 * through its set-up stops what it has). */
void kop_informer_stop(struct kop_informer *inf);

/* Stops if needed. NULL-safe. */
void kop_informer_free(struct kop_informer *inf);

/* True once the first full LIST is in the store. */
bool kop_informer_has_synced(struct kop_informer *inf);

/* Wait for has_synced. Returns 0, -ETIMEDOUT, or -ECANCELED (stopped). */
int kop_informer_wait_synced(struct kop_informer *inf, int64_t timeout_ms);

void kop_informer_stats(struct kop_informer *inf, struct kop_informer_stats *ret);

#endif /* KOP_INFORMER_H */
