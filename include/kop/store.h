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
 * Representation. A cached object is not kept as a json_t tree (jansson's
 * per-node hashtables cost many times the object's JSON text, and the
 * store's budget per object is docs/performance.md §3.4). Each entry is ONE
 * allocation holding the key, the resourceVersion string and the object in
 * a packed binary form of its JSON value: tagged values with varint
 * lengths, where object keys and common string values found in a fixed
 * table of Kubernetes field names ("metadata", "containerPort", "TCP",
 * ...) take one or two bytes. The packed form is lossless (same members in
 * the same order, same numbers and strings); a whole entry, overhead
 * included, is typically well under half the object's compact JSON text,
 * and decoding it builds a json_t several times faster than json_loads,
 * because there is no text to scan (scripts/bench-store.sh measures both).
 * The namespace and the controller owner uid live in the index buckets the
 * entry is linked to, so the metadata accessors below need no decode.
 *
 * Values handed out are private: kop_store_get/list decode a fresh json_t
 * (@ref new) that the caller owns and may modify; it is shared with no
 * other thread and with the store. Entries are reference counted, so a
 * reader holds the lock only to find the entry and take a reference; the
 * decode runs after the lock is released and never blocks a writer.
 *
 * Before an object is stored, its metadata.managedFields and the
 * kubectl.kubernetes.io/last-applied-configuration annotation are removed
 * (on private shallow copies, so a caller's value is never edited).
 *
 * Indexes: by kind, by namespace, and by the uid of the controller owner
 * (the ownerReferences[] entry with controller == true).
 *
 * Metrics (gauges in the registry given to kop_store_new, default
 * kop_metrics_global()): kop_store_objects and kop_store_bytes. The byte
 * figure is the heap the store holds: the entries (header, key,
 * resourceVersion, packed value), the index buckets and the hash tables'
 * arrays, counted from the sizes the store asks malloc for (allocator
 * overhead not included). It is 0 again when the store is empty.
 *
 * Thread-safety: any thread (a pthread rwlock plus per-entry atomic
 * reference counts); kop_store_free only when no thread uses the store.
 */
#ifndef KOP_STORE_H
#define KOP_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

struct kop_metrics;
struct kop_store;

/* metrics: registry for the gauges, NULL for kop_metrics_global();
 * metric_prefix: their names are <prefix>_objects and <prefix>_bytes, NULL
 * for "store" (the operator names its own, e.g. "kop_store").
 * Returns 0 or -ENOMEM; *ret on success. */
int kop_store_new(struct kop_metrics *metrics, const char *metric_prefix, struct kop_store **ret);

/* The same with one label on both gauges (label=value; label NULL: none,
 * as kop_store_new), so that several stores can share the gauges' names
 * (one per cluster). The two series are this store's own: kop_store_free
 * removes them, and no two live stores may have the same value.
 * Returns 0, -EINVAL (label without value), -ENOMEM. */
int kop_store_new_labelled(struct kop_metrics *metrics, const char *metric_prefix,
                           const char *label, const char *value, struct kop_store **ret);

/* Frees every entry. NULL-safe. */
void kop_store_free(struct kop_store *s);

/* Write "kind/ns/name" (ns NULL or "" for cluster-scoped) into buf.
 * Returns 0 or -ENAMETOOLONG / -EINVAL (also for a '/' in any part). */
int kop_store_key(const char *kind, const char *ns, const char *name, char *buf, size_t len);

/*
 * Insert or replace the object under kind/metadata.namespace/metadata.name.
 * @ref steal obj (released on failure too); the store keeps no reference
 * to it (it packs a copy). ret_old (may be NULL): the replaced value,
 * decoded, @ref new, or NULL when the key was absent (or, on ENOMEM, could
 * not be decoded; the put itself succeeded). ret_new (may be
 * NULL): the value as stored (the stripped object, which may share
 * unstripped subtrees with obj), @ref new.
 * Returns 0, -EINVAL (not an object, no metadata.name, bad kind, a '/' in
 * the namespace or name), -ENOMEM.
 */
int kop_store_put(struct kop_store *s, const char *kind, json_t *obj, json_t **ret_old,
                  json_t **ret_new);

/* Remove an entry. ret_old (may be NULL) gets the removed value, decoded,
 * @ref new. Returns 0, -ENOENT, or -ENOMEM (entry removed, but ret_old
 * could not be built). */
int kop_store_delete(struct kop_store *s, const char *kind, const char *ns, const char *name,
                     json_t **ret_old);

/* The stored value, decoded: @ref new, private to the caller (modifying it
 * does not affect the store), or NULL when absent or on ENOMEM. One decode
 * per call; use the accessors below when only metadata is needed. */
json_t *kop_store_get(struct kop_store *s, const char *kind, const char *ns, const char *name);

/* By full key "kind/ns/name". @ref new or NULL. */
json_t *kop_store_get_key(struct kop_store *s, const char *key);

/*
 * Metadata without decoding the object (a hash lookup under the read lock).
 *   kop_store_exists:              whether kind/ns/name is stored.
 *   kop_store_resource_version:    metadata.resourceVersion ("" when the
 *                                  object has none) copied into buf.
 *   kop_store_resource_version_key: the same, by full key.
 *   kop_store_controller_uid:      uid of the controller ownerReference
 *                                  ("" when there is none) copied into buf.
 * The int functions return 0, -ENOENT (no such entry), -ERANGE (buf too
 * small, buf untouched) or -EINVAL.
 */
bool kop_store_exists(struct kop_store *s, const char *kind, const char *ns, const char *name);
int kop_store_resource_version(struct kop_store *s, const char *kind, const char *ns,
                               const char *name, char *buf, size_t len);
int kop_store_resource_version_key(struct kop_store *s, const char *key, char *buf, size_t len);
int kop_store_controller_uid(struct kop_store *s, const char *kind, const char *ns,
                             const char *name, char *buf, size_t len);

/*
 * Lists. Each returns a new JSON array (@ref new; its items are freshly
 * decoded values owned by the array) or NULL on ENOMEM. Order is
 * unspecified. Costs one decode per item.
 *   kop_store_list:          kind (NULL = every kind) and namespace (NULL =
 *                            every namespace, "" = cluster-scoped only).
 *   kop_store_list_by_owner: entries whose controller owner has this uid,
 *                            optionally only of one kind.
 */
json_t *kop_store_list(struct kop_store *s, const char *kind, const char *ns);
json_t *kop_store_list_by_owner(struct kop_store *s, const char *owner_uid, const char *kind);

/* Keys of one kind (and namespace when not NULL) as a JSON object used as
 * a set: key -> true. @ref new, NULL on ENOMEM. No decode. For informers'
 * relists. */
json_t *kop_store_keys(struct kop_store *s, const char *kind, const char *ns);

/* Number of entries and the heap bytes held (see above). */
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
