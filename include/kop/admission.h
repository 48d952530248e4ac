/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The validating admission rules for MyResource (docs/api.md §4.2, rules
 * 1-8), on one AdmissionRequest.
 *
 * All violations are reported together in one Kubernetes-style message:
 *   MyResource.mygroup.example.com "web" is invalid: [spec.replicas:
 *   Invalid value: 1001: must be between 0 and 1000, inclusive, ...]
 * At most KOP_ADMISSION_MAX_LISTED of them are written out, in the order
 * found; the rest are counted at the end ("..., and 31980 more]"), and the
 * message never exceeds KOP_ADMISSION_MAX_MESSAGE bytes (violations that
 * do not fit whole are counted the same way). Every check is linear in the
 * size of the object, so a request with thousands of ports costs
 * milliseconds, not seconds.
 * Field paths are those of the version the client sent (v1: spec.image,
 * spec.port, spec.serviceType; v2: spec.image.repository, spec.ports[1].name
 * ...). Data a v1 object holds only in its v2-extras annotation is reported
 * with its v2 path.
 *
 * UPDATE is ratcheting: a violation whose field (compared per path, on the
 * v2 form of object and oldObject) is unchanged does not block. Objects
 * with metadata.deletionTimestamp, other kinds/resources, subresources and
 * operations other than CREATE/UPDATE are allowed. dryRun changes nothing.
 *
 * Rule 4 (name collision with a Deployment/Service not controlled by this
 * MyResource, CREATE only) asks the caller through child_lookup (the
 * reconciler's store); without a lookup function the rule is skipped.
 *
 * This module does not log: the verdict says everything.
 *
 * Thread-safety: any thread; the options are read-only; the lookup
 * function is called on the calling thread.
 */
#ifndef KOP_ADMISSION_H
#define KOP_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

enum kop_child_lookup {
    KOP_CHILD_NOT_SYNCED, /* the store has not synced yet: allow with a warning */
    KOP_CHILD_ABSENT,     /* no such object */
    KOP_CHILD_PRESENT,    /* exists; controller uid written (""  when none) */
};

/*
 * Look up the child "kind" ("Deployment" or "Service") ns/name. On
 * KOP_CHILD_PRESENT write the uid of its controller ownerReference (or ""
 * when it has none) to ret_controller_uid (NUL-terminated, uid_size bytes).
 */
typedef enum kop_child_lookup kop_admission_child_lookup_fn(void *userdata, const char *kind,
                                                            const char *ns, const char *name,
                                                            char *ret_controller_uid,
                                                            size_t uid_size);

struct kop_admission_options {
    /* --allowed-registries; n == 0 allows every registry. */
    char *const *allowed_registries;
    size_t n_allowed_registries;
    /* Rule 4; NULL skips it. */
    kop_admission_child_lookup_fn *child_lookup;
    void *child_lookup_userdata;
};

/* Violations written out in a denial message; further ones are counted. */
#define KOP_ADMISSION_MAX_LISTED 20
/* Upper bound of a denial message, NUL included. */
#define KOP_ADMISSION_MAX_MESSAGE 16384

#define KOP_ADMISSION_MAX_WARNINGS 8
/* Each warning is shorter than 120 characters (NUL included here). */
/* Items of a list checked one by one; a longer list is refused for its
 * length ("Too many") and its items past this many are not looked at. */
#define KOP_ADMISSION_MAX_CHECKED_ITEMS 1024

#define KOP_ADMISSION_WARNING_SIZE 120

struct kop_admission_verdict {
    bool allowed;
    char *message;         /* malloc'd denial message; NULL when allowed */
    unsigned n_violations; /* violations that block, listed or not (0 when allowed) */
    unsigned n_ratcheted;  /* violations ignored because the field is unchanged */
    size_t n_warnings;
    char warnings[KOP_ADMISSION_MAX_WARNINGS][KOP_ADMISSION_WARNING_SIZE];
    /* The violations written out, each "FIELD: DETAIL" as in the message
     * (FIELD in the client's version), malloc'd: the same items as the
     * message, for callers that compare fields (tests/integration/
     * test_crd_rules.c). */
    char *listed[KOP_ADMISSION_MAX_LISTED];
    size_t n_listed;
};

/*
 * Evaluate one AdmissionRequest (the "request" member of an
 * AdmissionReview). @ref borrow request: its object and oldObject are
 * converted to v2 in place (the request is the caller's own parse, never a
 * shared value). opts may be NULL (no registry list, no lookup).
 * Returns 0 with *ret filled (release with kop_admission_verdict_cleanup),
 * or -ENOMEM / -EINVAL. A request that is NULL or not an object is
 * allowed (nothing of kop's).
 */
int kop_admission_evaluate(json_t *request, const struct kop_admission_options *opts,
                           struct kop_admission_verdict *ret);

/* Release what a verdict holds. NULL-safe. */
void kop_admission_verdict_cleanup(struct kop_admission_verdict *v);

#endif /* KOP_ADMISSION_H */
