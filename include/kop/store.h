/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared object store: one per process, filled by the informers and
 * read by everything else (reconcilers, the admission webhook).
 *
 * Key: "kind/namespace/name"; cluster-scoped objects use an empty
 * namespace ("kind//name"). The kind is whatever string the informer was
 * configured with (e.g. "Deployment"); the store does not read it from the
 * object, because list items of built-in types carry no kind.
 *
 * Values are frozen json_t objects: readers get a new reference
 * (json_incref under the read lock) and must never modify it; writers
 * replace whole entries. Before an object is stored, its
 * metadata.managedFields and the
 * kubectl.kubernetes.io/last-applied-configuration annotation are removed
 * (on private shallow copies of the object, metadata and annotations, so a
 * caller's value is never edited).
 *
 * Indexes: by kind, by namespace, and by the uid of the controller owner
 * (the ownerReferences[] entry with controller == true).
 *
 * Metrics (gauges in the registry given to kop_store_new, default
 * kop_metrics_global()): kop_store_objects and kop_store_bytes. The byte
 * figure is the length of the compact JSON serialization of each stored
 * value, measured once on insert (json_dumpb with no buffer, which
 * allocates nothing); it is a proxy for, not the size of, the jansson
 * representation.
 *
 * Thread-safety: any thread (a pthread rwlock); kop_store_free only when
 * no thread uses the store.
 */
#ifndef KOP_STORE_H
#define KOP_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct kop_metrics;
struct kop_store;

/* metrics: registry for the gauges, NULL for kop_metrics_global().
 * Returns 0 or -ENOMEM; *ret on success. */
int kop_store_new(struct kop_metrics *metrics, struct kop_store **ret);

/* Releases every stored reference. NULL-safe. */
void kop_store_free(struct kop_store *s);

/* Write "kind/ns/name" (ns NULL or "" for cluster-scoped) into buf.
 * Returns 0 or -ENAMETOOLONG / -EINVAL. */
int kop_store_key(const char *kind, const char *ns, const char *name, char *buf, size_t len);

/*
 * Insert or replace the object under kind/metadata.namespace/metadata.name.
 * @ref steal obj (released on failure too); the caller must not modify it
 * afterwards. ret_old (may be NULL): the replaced value, @ref new, or NULL
 * when the key was absent. ret_new (may be NULL): the value as stored
 * (stripped), @ref new.
 * Returns 0, -EINVAL (not an object, no metadata.name, bad kind), -ENOMEM.
 */
int kop_store_put(struct kop_store *s, const char *kind, json_t *obj, json_t **ret_old,
                  json_t **ret_new);

/* Remove an entry. ret_old (may be NULL) gets the removed value, @ref new.
 * Returns 0 or -ENOENT. */
int kop_store_delete(struct kop_store *s, const char *kind, const char *ns, const char *name,
                     json_t **ret_old);

/* The stored value, @ref new (json_decref when done), or NULL. */
json_t *kop_store_get(struct kop_store *s, const char *kind, const char *ns, const char *name);

/* By full key "kind/ns/name". @ref new or NULL. */
json_t *kop_store_get_key(struct kop_store *s, const char *key);

/*
 * Lists. Each returns a new JSON array (@ref new; its items are the frozen
 * stored values, read-only) or NULL on ENOMEM. Order is unspecified.
 *   kop_store_list:          kind (NULL = every kind) and namespace (NULL =
 *                            every namespace, "" = cluster-scoped only).
 *   kop_store_list_by_owner: entries whose controller owner has this uid,
 *                            optionally only of one kind.
 */
json_t *kop_store_list(struct kop_store *s, const char *kind, const char *ns);
json_t *kop_store_list_by_owner(struct kop_store *s, const char *owner_uid, const char *kind);

/* Keys of one kind (and namespace when not NULL) as a JSON object used as
 * a set: key -> true. @ref new, NULL on ENOMEM. For informers' relists. */
json_t *kop_store_keys(struct kop_store *s, const char *kind, const char *ns);

/* Number of entries and the byte estimate (see above). */
size_t kop_store_count(struct kop_store *s);
size_t kop_store_bytes(struct kop_store *s);

/*
 * Return a private copy of obj without metadata.managedFields and the
 * last-applied-configuration annotation (what kop_store_put stores).
 * @ref borrow obj; returns @ref new (obj itself with a new reference when
 * there is nothing to strip), NULL on ENOMEM.
 */
json_t *kop_store_strip(json_t *obj);

#endif /* KOP_STORE_H */
