/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Active-active sharding of MyResources across replicas (--sharding).
 *
 * Membership: every replica holds a Lease "kop-shard-<identity>"
 * (kop/membership.h); the live members form a consistent-hash ring.
 * Assignment: the label shard.kop.io/owner=<identity> on each MyResource;
 * each replica's MyResource informer selects its own value and kop copies
 * the label onto the children it creates, so a replica caches and
 * reconciles only its share.
 *
 * Who writes the label:
 *  - at CREATE, the mutating webhook route served by every replica
 *    (KOP_SHARDER_MUTATE_PATH) adds it with a JSONPatch. The apiserver runs
 *    mutating admission before it assigns the uid (k8s.io/apiserver/pkg/
 *    endpoints/handlers/create.go admits, then calls the storage's Create;
 *    k8s.io/apiserver/pkg/registry/generic/registry/store.go calls
 *    rest.FillObjectMetaSystemFields, which sets a new uid whatever the
 *    client sent), so the webhook places "namespace/name" on the ring
 *    (mix64 of its FNV-1a); the sharder leaves the object there until the
 *    next membership change, which moves it to its uid's owner unless that
 *    is the same member (about 1 in n);
 *  - the sharder, elected with the leader Lease, lists the MyResources
 *    (metadata only) every period after a membership change until its
 *    moves completed, else every fifth period, and labels
 *    objects without a live owner (no label, or an owner whose membership
 *    Lease expired or was released: moved at once, no drain) and, when
 *    the membership changed, moves every object whose owner is not the
 *    ring's choice for FNV-1a-64 of its uid (kop_shard_ring_owner),
 *    through the drain protocol:
 *    1. the sharder sets shard.kop.io/drain=true;
 *    2. the owner sees it (its informer holds the object), stops
 *       reconciling the object and removes the drain label in the same
 *       worker slot (so no reconcile of it is in flight) and refuses to
 *       reconcile it until it leaves its cache, or for two lease
 *       durations (KOP_SHARD_REFUSE_LEASES);
 *    3. the sharder sees the drain label gone and changes the owner label
 *       (with the resourceVersion it read as a precondition; on a conflict
 *       it forgets the drain and starts over), within one lease duration
 *       of the release's fence (kop_shard_move_in_time), else it asks for
 *       the drain again.
 *    Until every move of a membership change completed, each pass tries
 *    again.
 *
 * Metrics: kop_shard_objects{shard} (gauge, objects per owner at the
 * sharder's last pass), kop_shard_moves_total (counter, owner label
 * changes of objects that had an owner), kop_shard_drain_seconds
 * (histogram, drain label set to owner changed).
 *
 * Thread-safety: new/start/stop/free from one owner thread; set_active,
 * gate and the webhook handler from any thread.
 */
#ifndef KOP_SHARDER_H
#define KOP_SHARDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define KOP_SHARDER_OWNER_LABEL "shard.kop.io/owner"
#define KOP_SHARDER_DRAIN_LABEL "shard.kop.io/drain"
#define KOP_SHARDER_LEASE_PREFIX "kop-shard-"
#define KOP_SHARDER_MUTATE_PATH "/mutate-mygroup-example-com-myresource-shard"

struct kop_client;
struct kop_membership;
struct kop_metrics;
struct kop_http_request;
struct kop_http_response;
struct kop_sharder;

/* ---- the ring (pure) -------------------------------------------------------- */

/* FNV-1a, 64 bit, of the bytes of s. */
uint64_t kop_sharder_fnv1a64(const char *s);
/* The MurmurHash3 64-bit finalizer (a bijection that spreads FNV-1a's
 * weakly mixed high bits). */
uint64_t kop_sharder_mix64(uint64_t h);

struct kop_shard_ring;

/* A ring over members (a JSON array of strings, @ref borrow) with
 * KOP_SHARD_VNODES points per member at mix64(fnv1a64("<member>#<i>")).
 * A point owns the arc from its position up to the next point (the last
 * one wraps through 2^64 to the first), so every member owns a set of
 * ranges [start, end) of the 64-bit space. 1024 points keep the largest
 * share at 4 members within 10% of a quarter (the bound tests/test_sharder.c
 * asserts; fewer points spread the shares less evenly), at the price of
 * longer selectors (below).
 * Returns 0, -EINVAL (not an array of strings), -ENOMEM. An empty array
 * makes an empty ring. */
#define KOP_SHARD_VNODES 1024
int kop_shard_ring_new(const json_t *members, struct kop_shard_ring **ret);
/* Rings are immutable and reference-counted (any thread): _ref returns r,
 * _unref drops one reference and frees with the last (NULL-safe). */
struct kop_shard_ring *kop_shard_ring_ref(struct kop_shard_ring *r);
void kop_shard_ring_unref(struct kop_shard_ring *r);
/* The member owning position pos. NULL on an empty ring. Valid until the
 * ring is freed. */
const char *kop_shard_ring_owner_at(const struct kop_shard_ring *r, uint64_t pos);
/* The member owning an object: position fnv1a64(uid), plain, as the
 * upstream shardRange(object.metadata.uid, ...) hashes it (KEP-5866;
 * kubernetes/kubernetes staging/src/k8s.io/apimachinery/pkg/sharding/
 * hash.go and selector.go). */
const char *kop_shard_ring_owner(const struct kop_shard_ring *r, const char *uid);

/* A range of positions, both ends inclusive (last UINT64_MAX: up to 2^64). */
struct kop_shard_range {
    uint64_t start;
    uint64_t last;
};
/* The ranges member owns, ascending, adjacent arcs merged: pos is in one
 * of them exactly when kop_shard_ring_owner_at(r, pos) is member. *ret is
 * malloc'd. Returns 0, -ENOENT (not a member), -ENOMEM. */
int kop_shard_ring_ranges(const struct kop_shard_ring *r, const char *member,
                          struct kop_shard_range **ret, size_t *ret_n);
/* The same ranges as an upstream shard selector, malloc'd:
 * "shardRange(object.metadata.uid, '0x<16 hex>', '0x<16 hex>') || ...",
 * end exclusive, 2^64 written '0x10000000000000000' (kubernetes/kubernetes
 * staging/src/k8s.io/apiserver/pkg/sharding/parser.go). kop does not send
 * it (its informers select the owner label); it shows the assignment is
 * one such a selector expresses. Returns 0, -ENOENT, -ENOMEM. */
int kop_shard_ring_selector(const struct kop_shard_ring *r, const char *member, char **ret);

/* ---- decisions (pure) ------------------------------------------------------- */

enum kop_shard_action {
    KOP_SHARD_KEEP,   /* leave the object alone */
    KOP_SHARD_ASSIGN, /* no live owner: write the owner label now, no drain */
    KOP_SHARD_DRAIN,  /* live owner must let go: set the drain label */
    KOP_SHARD_WAIT,   /* drain label set: wait for the owner to remove it */
    KOP_SHARD_MOVE,   /* drained: change the owner label */
};

/*
 * The sharder's decision for one object. owner: its owner label (NULL:
 * none); owner_live: that owner is a live member; draining: the drain label
 * is set; drain_requested: this sharder set it earlier; target: the ring's
 * choice (non-NULL); rebalance: the membership changed since the last
 * completed pass.
 */
enum kop_shard_action kop_shard_decide(const char *owner, bool owner_live, bool draining,
                                       bool drain_requested, const char *target, bool rebalance);

/* A released object stays refused by its old owner for this many lease
 * durations; the sharder moves it only within one lease duration of the
 * fence (kop_shard_move_in_time), so the move and the old owner's sight of
 * it have a lease duration to land. */
#define KOP_SHARD_REFUSE_LEASES 2

/* Whether a drained object may still move: the owner's release came at
 * fence_ns or later (monotonic: when the sharder asked for the drain, or
 * the start of a later list that still showed the drain label), and now_ns
 * is less than one lease duration after it. Otherwise the sharder asks for
 * the drain again. */
bool kop_shard_move_in_time(int64_t fence_ns, int64_t now_ns, int64_t lease_ns);

enum kop_shard_gate {
    KOP_SHARD_RECONCILE, /* reconcile as usual */
    KOP_SHARD_RELEASE,   /* remove the drain label, do not reconcile */
    KOP_SHARD_SKIP,      /* not ours (or given up): do not reconcile */
};

/* The owner replica's decision before a reconcile: owner label vs self,
 * the drain label, and whether this replica released the object within
 * the last KOP_SHARD_REFUSE_LEASES lease durations. */
enum kop_shard_gate kop_shard_gate_decide(const char *owner, const char *self, bool draining,
                                          bool released_recently);

/* ---- the runtime ------------------------------------------------------------ */

struct kop_sharder_options {
    struct kop_client *client;         /* lists and label writes (borrowed) */
    struct kop_membership *membership; /* borrowed; started by the caller */
    const char *namespace;             /* --namespace; NULL or "": all */
    int64_t period_ms;                 /* sharder pass interval; 0: 2 s */
    int64_t lease_duration_ms;         /* the membership Leases' (refusal and move windows) */
    struct kop_metrics *metrics;       /* NULL: kop_metrics_global() */
};

int kop_sharder_new(const struct kop_sharder_options *opts, struct kop_sharder **ret);
/* Start the sharder thread (it works only while active). */
int kop_sharder_start(struct kop_sharder *s);
/* The leader Lease was won (true) or lost (false). */
void kop_sharder_set_active(struct kop_sharder *s, bool active);
/* Both NULL-safe (the manager without --sharding). */
void kop_sharder_stop(struct kop_sharder *s);
void kop_sharder_free(struct kop_sharder *s);

/* "shard.kop.io/owner=<identity>" for the informer selectors. */
const char *kop_sharder_selector(const struct kop_sharder *s);
/* This replica's identity (the owner label value). */
const char *kop_sharder_identity(const struct kop_sharder *s);

/* Controller gate (kop_controller_options.gate; ud is the sharder):
 * 0 to reconcile obj (@ref borrow) now, < 0 to skip it, > 0 to skip it and
 * look again after that many nanoseconds (released recently). Removes the
 * drain label through client when the object is draining. obj NULL: key
 * left this replica's cache; its release is forgotten. */
int64_t kop_sharder_gate(void *ud, struct kop_client *client, const char *key, const json_t *obj);

/* The mutating webhook (kop_http_handler_fn; ud is the sharder). */
void kop_sharder_mutate_http(void *ud, const struct kop_http_request *req,
                             struct kop_http_response *resp);

/* The AdmissionReview answer for body (pure given ring, which the caller
 * keeps; NULL or empty: no label). Returns the HTTP
 * status and a malloc'd JSON body in *ret_body. */
int kop_sharder_mutate(const char *body, size_t len, const struct kop_shard_ring *ring,
                       char **ret_body);

#endif /* KOP_SHARDER_H */
