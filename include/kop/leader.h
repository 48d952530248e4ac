/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on a coordination.k8s.io/v1 Lease, with the semantics of
 * client-go's leaderelection package and LeaseLock, so kop replicas and
 * Go controllers read each other's leases the same way:
 *
 *  - The Lease spec holds the election record: holderIdentity,
 *    leaseDurationSeconds, acquireTime and renewTime (MicroTime,
 *    "2006-01-02T15:04:05.000000Z") and leaseTransitions.
 *  - A candidate GETs the Lease every retry period (with jitter: period up
 *    to period * 2.2). An absent Lease is created (AlreadyExists: retry).
 *    A Lease held by someone else is taken over only when it has expired,
 *    judged by the LOCAL clock: the time this elector last saw the record
 *    change plus the record's leaseDurationSeconds; the remote timestamps
 *    are never compared with the local clock. An empty holderIdentity
 *    means free. Taking over from another holder (or from "") increments
 *    leaseTransitions.
 *  - Writes are optimistic (PUT with the resourceVersion last read); a 409
 *    is retried at the next period.
 *  - The leader renews every retry period (a PUT of the object it last
 *    wrote, falling back to GET+PUT). When no renewal succeeded for the
 *    renew deadline, or another holder is seen, leadership is lost AT
 *    ONCE: is_leader turns false and on_stopped_leading runs before the
 *    lease could expire for the others. A request that hangs is aborted
 *    at that deadline.
 *  - After a loss the elector competes again (unless opts.once is set,
 *    which makes it stop like client-go's Run returning).
 *  - kop_leader_stop(l, true) releases a held lease as ReleaseOnCancel
 *    does: holderIdentity "", leaseDurationSeconds 1, so others take over
 *    at their next retry.
 *  - kop_leader_retire(l) (a replica shutting down): the elector no longer
 *    acquires or creates the Lease, as client-go's Run stops acquiring
 *    once its context is cancelled (leaderelection.go, acquire()); a
 *    leader keeps renewing until kop_leader_stop.
 *
 * Differences from client-go: leaseDurationSeconds is the configured lease
 * duration rounded UP to whole seconds (client-go truncates), so a
 * sub-second part never shortens the lease others wait for; the spec is
 * rewritten with the five record fields only.
 *
 * Metric: leader_election_master_status{name} (gauge, 1 while leading;
 * name is the Lease name).
 *
 * Callbacks run on the elector's thread, never with a lock held; they
 * must not call kop_leader_stop() or kop_leader_free() (that would join
 * the calling thread). on_stopped_leading is called only after
 * on_started_leading, once per term, also when the elector is stopped
 * while leading (before the lease is released).
 *
 * Thread-safety: kop_leader_is_leader(), kop_leader_identity(),
 * kop_leader_leader() and kop_leader_retire() from any thread; new/start/stop/free from one
 * owner thread. The pure record functions are reentrant.
 */
#ifndef KOP_LEADER_H
#define KOP_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct kop_client;
struct kop_metrics;
struct kop_leader;

typedef void (*kop_leader_fn)(void *ud);
typedef void (*kop_leader_new_leader_fn)(void *ud, const char *identity);

/* Defaults (client-go's leaderelection values), also those of kop's
 * command line: plain integers, so that they can be spelled into a
 * default flag value. */
#define KOP_LEADER_LEASE_DURATION_S 15
#define KOP_LEADER_RENEW_DEADLINE_S 10
#define KOP_LEADER_RETRY_PERIOD_S 2

struct kop_leader_options {
    struct kop_client *client; /* borrowed; must outlive the elector */
    const char *namespace;     /* of the Lease (required) */
    const char *name;          /* Lease name (required), also the metric label */
    const char *identity;      /* NULL: kop_leader_default_identity() */
    int64_t lease_duration_ms; /* 0: KOP_LEADER_LEASE_DURATION_S */
    int64_t renew_deadline_ms; /* 0: KOP_LEADER_RENEW_DEADLINE_S */
    int64_t retry_period_ms;   /* 0: KOP_LEADER_RETRY_PERIOD_S */
    bool once;                 /* stop competing after losing the lease */
    kop_leader_fn on_started_leading;
    kop_leader_fn on_stopped_leading;
    /* The observed holder changed ("" when nobody holds the Lease). */
    kop_leader_new_leader_fn on_new_leader;
    void *ud;
    struct kop_metrics *metrics; /* NULL: kop_metrics_global() */
};

/*
 * "<POD_NAME or hostname>_<random uuid>" into buf (like controller-runtime's
 * "<hostname>_<uuid>"). Returns 0, -EINVAL (buf too small: 320 bytes
 * (KOP_LEADER_HOLDER_MAX) are always enough).
 */
int kop_leader_default_identity(char *buf, size_t len);

/*
 * Validate and copy the options. Durations must satisfy lease > renew
 * deadline > 1.2 * retry period > 0 (client-go's rule); identity 1..319
 * bytes. Returns 0, -EINVAL, -ENOMEM; *ret on success.
 */
int kop_leader_new(const struct kop_leader_options *opts, struct kop_leader **ret);

/* Start the elector thread (and its watchdog). Returns 0, -EALREADY
 * (started before), or -errno of pthread_create. */
int kop_leader_start(struct kop_leader *l);

/* True while this elector holds the Lease (after on_started_leading,
 * false before on_stopped_leading runs). */
bool kop_leader_is_leader(const struct kop_leader *l);

/* This elector's identity (valid until kop_leader_free). */
const char *kop_leader_identity(const struct kop_leader *l);

/* The last observed holder into buf ("" when none or unknown). Returns 0,
 * -ENOBUFS (truncated) or -EINVAL (len 0). */
int kop_leader_leader(struct kop_leader *l, char *buf, size_t len);

/*
 * From now on this elector never acquires or creates the Lease: a
 * follower stops competing (it would otherwise take a Lease released in
 * the meantime and lead a process that is on its way out); a leader keeps
 * renewing until kop_leader_stop, and does not compete again once it lost
 * the Lease. A Lease acquired by a request already in flight is released
 * at once, without on_started_leading. Any thread; idempotent; NULL-safe.
 */
void kop_leader_retire(struct kop_leader *l);

/*
 * Stop the elector and join its thread; aborts a request in flight. When
 * leading, on_stopped_leading runs, then, if release is true, the Lease is
 * released (bounded by the renew deadline). Idempotent; a no-op on an
 * elector never started. Returns 0, or the error of the release request
 * (the elector is stopped anyway).
 */
int kop_leader_stop(struct kop_leader *l, bool release);

/* Stops (without release) if still running, then frees. NULL-safe. */
void kop_leader_free(struct kop_leader *l);

/* ---- the election record and decision (pure; exposed for tests) -------- */

#define KOP_LEADER_HOLDER_MAX 320

struct kop_leader_record {
    char holder[KOP_LEADER_HOLDER_MAX]; /* "" when nobody holds the lease */
    bool holder_too_long;               /* remote holder did not fit: never ours */
    int64_t lease_duration_s;
    int64_t acquire_wall_ns; /* 0 when absent or unparseable */
    int64_t renew_wall_ns;   /* 0 when absent or unparseable */
    int64_t transitions;
};

/* Read the record from a Lease object. @ref borrow lease. Missing fields
 * read as zero/"". Returns 0 or -EINVAL (not an object, or spec not an
 * object). */
int kop_leader_record_from_lease(const json_t *lease, struct kop_leader_record *ret);

/*
 * A Lease carrying rec: a copy of base (@ref borrow, keeps its metadata and
 * resourceVersion) or, when base is NULL, a new Lease ns/name. The spec
 * is replaced by holderIdentity, leaseDurationSeconds, acquireTime,
 * renewTime (MicroTime; absent when 0) and leaseTransitions.
 * Returns 0, -EINVAL (base not an object), -ENOMEM; *ret_lease is
 * @ref new.
 */
int kop_leader_record_to_lease(const struct kop_leader_record *rec, const json_t *base,
                               const char *ns, const char *name, json_t **ret_lease);

bool kop_leader_record_equal(const struct kop_leader_record *a, const struct kop_leader_record *b);

/* What the elector saw last, and when (local monotonic clock). */
struct kop_leader_observer {
    bool have; /* a record was observed */
    struct kop_leader_record record;
    int64_t observed_ns; /* when the record last CHANGED */
};

/* Note rec as read at now_ns; observed_ns moves only when rec differs. */
void kop_leader_observe(struct kop_leader_observer *o, const struct kop_leader_record *rec,
                        int64_t now_ns);

/* The observed holder is identity. */
bool kop_leader_observer_is_mine(const struct kop_leader_observer *o, const char *identity);

/* The observed lease is held (non-empty holder) and not expired at now_ns. */
bool kop_leader_observer_held(const struct kop_leader_observer *o, int64_t now_ns);

enum kop_leader_action {
    KOP_LEADER_CREATE,  /* no Lease: create it with ourselves as holder */
    KOP_LEADER_ACQUIRE, /* free or expired: take it, transitions + 1 */
    KOP_LEADER_RENEW,   /* ours: renew, keep acquireTime and transitions */
    KOP_LEADER_WAIT,    /* held by someone else and not expired */
};

/* The decision after observing (o->have false: the Lease is absent). */
enum kop_leader_action kop_leader_decide(const struct kop_leader_observer *o, const char *identity,
                                         int64_t now_ns);

/* The record to write for action (not WAIT) at wall time now_wall_ns. */
void kop_leader_next_record(const struct kop_leader_observer *o, enum kop_leader_action action,
                            const char *identity, int64_t lease_duration_s, int64_t now_wall_ns,
                            struct kop_leader_record *ret);

#endif /* KOP_LEADER_H */
