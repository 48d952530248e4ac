/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A ConversionReview that streams through kop (docs/architecture.md §4.3;
 * the budgets it serves: docs/performance.md §3.2): the body is fed in the
 * pieces the HTTP server receives; each element of request.objects is
 * converted as soon as it is complete and its input bytes are dropped. A
 * request therefore holds its response, one object and a small scanner
 * state, never a tree of the whole body.
 *
 * Of each object only what conversion reads and writes is decoded
 * (jansson): apiVersion, kind, the spec members image, port, serviceType,
 * ports, service and paused, the status members replicas and
 * readyReplicas, and metadata.annotations when converting to v1 or when
 * the v2-extras annotation may be among them. Labels and annotations are
 * checked (the apiserver's metadata rules) from their bytes. Every other
 * member is copied byte for byte, in its place. The reply is written as it goes:
 * {"apiVersion":...,"kind":"ConversionReview","response":
 *  {"convertedObjects":[...],"uid":...,"result":{...}}} ("apiVersion" and
 * "kind" come last when the request had not said its version before its
 * first object: member order is free in JSON).
 *
 * The answers are those of kop/review.h (same HTTP codes, same Failure
 * results, same self-check per object): a syntax error anywhere in the
 * body wins over everything else, so the reply is decided only at the end.
 * Objects that arrive before request.desiredAPIVersion are kept (raw) until
 * it is known: correct for any member order, streaming for the apiserver's.
 *
 * Thread-safety: a stream is owned by one thread at a time.
 */
#ifndef KOP_CONVSTREAM_H
#define KOP_CONVSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "kop/review.h"

/* The largest object (element of request.objects) or other member a
 * review may hold: the apiserver never stores an object over 1.5 MiB (its
 * request limit is 3 MiB). A larger one: 413. */
#define KOP_CONVSTREAM_MAX_OBJECT (4u << 20)

/* The most memory the decoded parts of one object may take (their jansson
 * tree, estimated); a larger one answers Failure for the review. */
#define KOP_CONVSTREAM_MAX_TREE (8 << 20)

struct kop_convert_options {
    bool skip_self_check; /* benchmarks only: do not check the reply */
};

struct kop_convstream;

/*
 * Start a stream for a request with this Content-Type (NULL when absent;
 * a wrong one makes the stream skip the body and answer 415). opts may be
 * NULL. Returns 0 or -ENOMEM.
 */
int kop_convstream_new(const char *content_type, const struct kop_convert_options *opts,
                       struct kop_convstream **ret);

/* Feed the next piece of the body. Returns 0, or -ENOMEM (the request
 * cannot be answered: the HTTP layer answers 500). */
int kop_convstream_feed(struct kop_convstream *cs, const char *p, size_t n);

/* The body's length is known (Content-Length): size the reply once
 * instead of growing it. Returns 0 or -ENOMEM. */
int kop_convstream_expect(struct kop_convstream *cs, size_t body_len);

/* Bytes the stream holds now (its buffers), for the in-flight budget. */
size_t kop_convstream_memory(const struct kop_convstream *cs);

/*
 * The body has ended: fill *ret (release with kop_review_result_cleanup).
 * Returns 0 or -ENOMEM. The stream can only be freed afterwards.
 */
int kop_convstream_finish(struct kop_convstream *cs, struct kop_review_result *ret);

/* NULL-safe. */
void kop_convstream_free(struct kop_convstream *cs);

/*
 * Handle a whole POST /convert body in one call: new, expect, feed and
 * finish. content_type: the header value, NULL when absent. opts may be
 * NULL. Returns 0 with *ret filled (release with kop_review_result_cleanup)
 * or -ENOMEM; the HTTP layer answers 500 then.
 */
int kop_convstream_convert_http(const char *content_type, const char *body, size_t len,
                                const struct kop_convert_options *opts,
                                struct kop_review_result *ret);

#endif /* KOP_CONVSTREAM_H */
