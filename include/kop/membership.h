/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Group membership through Leases: each member holds a coordination.k8s.io
 * Lease named <prefix><identity> (renewed like a leader lease: it is a
 * kop/leader.h elector that nobody else competes for, so a member that
 * cannot renew within the renew deadline leaves at once, and a graceful
 * stop releases the Lease), and every member lists the Leases with that
 * prefix each retry period to learn who is live.
 *
 * A member is live while its Lease has a holder and has not expired,
 * judged as kop/leader.h judges the leader lease: by the LOCAL clock, from
 * the time this observer last saw the record change, plus its
 * leaseDurationSeconds. A released Lease (holder "") is gone at once; a
 * member that died is gone one lease duration after its last renewal was
 * seen. A new observer sees every held Lease as live until it has watched
 * it for a lease duration (no remote timestamp is trusted).
 *
 * Thread-safety: new/start/stop/free from one owner thread; members,
 * generation and joined from any thread. Callbacks run on the elector's
 * thread (see kop/leader.h).
 */
#ifndef KOP_MEMBERSHIP_H
#define KOP_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kop/leader.h"

struct kop_client;
struct kop_metrics;
struct kop_membership;

struct kop_membership_options {
    struct kop_client *client; /* borrowed; must outlive the membership */
    const char *namespace;     /* of the Leases (required) */
    const char *prefix;        /* Lease name prefix (required) */
    const char *identity;      /* this member (required; a DNS label) */
    int64_t lease_duration_ms; /* 0: 15 s */
    int64_t renew_deadline_ms; /* 0: 10 s */
    int64_t retry_period_ms;   /* 0: 2 s */
    kop_leader_fn on_joined;   /* this member's Lease is held */
    kop_leader_fn on_left;     /* ... no longer (renew deadline passed, or stop) */
    void *ud;
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
};

/* Returns 0, -EINVAL (identity not a DNS label or the Lease name longer
 * than 253 bytes, durations as kop_leader_new), -ENOMEM. */
int kop_membership_new(const struct kop_membership_options *opts, struct kop_membership **ret);

/* Start the elector of this member's Lease and the observer thread.
 * Returns 0 or a negative errno (-EINVAL when already started). */
int kop_membership_start(struct kop_membership *m);

/* Stop both threads; release the Lease when release is true (the others
 * see this member gone at their next list). Idempotent. NULL-safe (the
 * manager without --sharding). */
void kop_membership_stop(struct kop_membership *m, bool release);

/* Stops (without release) if needed, then frees. NULL-safe. */
void kop_membership_free(struct kop_membership *m);

/*
 * The live members, sorted (strcmp), as a JSON array of strings
 * (@ref new), and the generation: a number that changes whenever the set
 * changes (0 before the first list). Returns 0, -EAGAIN (nothing listed
 * yet) or -ENOMEM.
 */
int kop_membership_members(struct kop_membership *m, json_t **ret_members,
                           uint64_t *ret_generation);

/* This member's Lease is held. */
bool kop_membership_joined(const struct kop_membership *m);

const char *kop_membership_identity(const struct kop_membership *m);

/* ---- pure parts (exposed for tests) ------------------------------------------- */

/* An RFC 1123 label: 1..63 of [a-z0-9-], alphanumeric at both ends (both a
 * valid Lease name suffix and a valid label value). */
bool kop_membership_identity_valid(const char *identity);

/*
 * The live holders among leases (a JSON array of Lease objects, @ref
 * borrow) whose name starts with prefix, updating observers (a JSON
 * object name -> private state, @ref borrow, owned by the caller) at
 * now_ns. Returns a sorted array of identities (@ref new) or NULL on
 * ENOMEM. Observers of Leases no longer listed are dropped.
 */
json_t *kop_membership_live(const json_t *leases, const char *prefix, json_t *observers,
                            int64_t now_ns);

#endif /* KOP_MEMBERSHIP_H */
