/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The review envelopes: ConversionReview (apiextensions.k8s.io/v1 and
 * v1beta1) for /convert and AdmissionReview (admission.k8s.io/v1 and
 * v1beta1) for the validating webhook. The HTTP handler forwards the
 * Content-Type and body and sends back what the result says.
 *
 * HTTP level (docs/api.md §5): 200 with the review; 415 when Content-Type is
 * not application/json (parameters such as "; charset=utf-8" and any case
 * accepted); 400 when the body is empty or not a JSON object (YAML
 * included: "json parse error"), has duplicate keys (rejected: a body the
 * apiserver writes never has them, and two parsers could read them
 * differently), or is not a review. Every answer is a JSON body shaped as
 * a review response, for errors too, with the error in
 * response.status.message / response.result.message and the HTTP code in
 * response.status.code. 405 and 413 belong to the HTTP layer.
 *
 * Conversion: same count and order of objects, each in desiredAPIVersion;
 * unknown desired version, group or kind -> result Failure with a message
 * and no convertedObjects, uid echoed. Before replying, the reply is
 * checked with the kube-apiserver's own rules; violations are counted in
 * kop_conversion_reply_violations_total and turn the reply into a Failure.
 *
 * A ConversionReview is answered by the streaming converter
 * (kop/convstream.h: kop_convstream_convert_http() for a whole body), which
 * uses the envelope helpers and metadata rules below; this module does not
 * use it. An AdmissionReview is validated first (kop/jscan.h), then decoded
 * within KOP_REVIEW_MAX_TREE_BYTES (else 413) into jansson values, so a
 * per-request arena may be bound on the calling thread (kop/arena.h). The
 * result body is always malloc'd.
 * Bodies end with "\n", as Go's encoder writes them.
 *
 * Thread-safety: any thread.
 */
#ifndef KOP_REVIEW_H
#define KOP_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kop/admission.h"

enum kop_review_type {
    KOP_REVIEW_CONVERSION = 1,
    KOP_REVIEW_ADMISSION = 2,
};

struct kop_review_result {
    int http_status; /* 200, 400 or 415 */
    char *body;      /* malloc'd JSON, NUL-terminated, ends with "\n" */
    size_t body_len;
    /* For logs and metrics: */
    enum kop_review_type type;
    char uid[128];       /* request.uid (cut to fit), "" when unknown */
    size_t n_objects;    /* conversion: objects in the request */
    bool success;        /* conversion: Success; admission: allowed */
    unsigned violations; /* conversion: self-check violations; admission: denials */
    size_t n_warnings;   /* admission warnings */
    char message[256];   /* error/denial/failure message (cut), "" when none */
};

/*
 * Handle a POST to the validating webhook path. content_type: the header
 * value, NULL when absent. opts may be NULL. Returns 0 with *ret filled
 * (release with kop_review_result_cleanup) or -ENOMEM / -EINVAL; the HTTP
 * layer answers 500 then.
 */
int kop_review_admit_http(const char *content_type, const char *body, size_t len,
                          const struct kop_admission_options *opts, struct kop_review_result *ret);

/*
 * Answer a POST to the validating webhook path with a denial decided
 * before the rules look at the object (a request for a cluster kop does
 * not know): the envelope is checked as by kop_review_admit_http (400 and
 * 415 alike), then the reply says allowed false with status code (403,
 * 404, ...), reason (may be NULL) and message. Returns as
 * kop_review_admit_http.
 */
int kop_review_deny_http(const char *content_type, const char *body, size_t len, int code,
                         const char *reason, const char *message, struct kop_review_result *ret);

/* Fill r with reply dumped compactly, plus "\n" (@ref steal reply; NULL:
 * -ENOMEM). For the review modules. Returns 0 or -ENOMEM. */
int kop_review_finish(struct kop_review_result *r, int status, json_t *reply);

/* message as a JSON string; bytes that are not valid UTF-8 (a message that
 * quotes the request) become '?'. @ref new, NULL on ENOMEM. */
json_t *kop_review_message_string(const char *message);

/* Free the body. NULL-safe. */
void kop_review_result_cleanup(struct kop_review_result *r);

/* True for "application/json" with optional parameters, any case; false
 * for NULL (no Content-Type header). */
bool kop_review_content_type_ok(const char *content_type);

enum kop_conversion_check {
    KOP_CONVERSION_CHECK_OK = 0,      /* the apiserver accepts the objects */
    KOP_CONVERSION_CHECK_FAILED = 1,  /* a well-formed Failure result */
    KOP_CONVERSION_CHECK_INVALID = 2, /* the apiserver rejects the reply */
};

/*
 * Check a ConversionReview reply against its request as the kube-apiserver
 * does (apiextensions-apiserver webhook_converter.go): envelope version and
 * kind (v1 only), uid (v1 only), result status, object count, each
 * object's apiVersion, kind, name, namespace, uid, and the metadata rules
 * of kop_review_check_object_meta(). With strict (kop's own replies) the
 * envelope and uid are checked for v1beta1 too and a Failure must carry a
 * message and no objects. @ref borrow request_review, reply.
 * msg (may be NULL) receives the first problem. ret_violations (may be
 * NULL) the number of rules broken.
 */
enum kop_conversion_check kop_review_check_conversion(const json_t *request_review,
                                                      const json_t *reply, bool strict,
                                                      unsigned *ret_violations, char *msg,
                                                      size_t msg_size);

/*
 * The metadata rules of the apiserver's restoreObjectMeta: converted
 * metadata is an object; labels and annotations are maps of strings; label
 * keys are qualified names and values valid label values; annotation keys
 * are qualified names and keys plus values total at most 256 KiB.
 * @ref borrow both. Returns 0 or -EINVAL with msg set.
 */
int kop_review_check_object_meta(const json_t *original, const json_t *converted, char *msg,
                                 size_t msg_size);

/*
 * One entry of metadata.labels (label true) or metadata.annotations, by the
 * rules above: key a qualified name, val a string (NULL: it was not one),
 * for labels a valid label value. key is NUL-terminated; val need not be.
 * Returns 0 or -EINVAL with msg set. The annotations' total size is the
 * caller's to add up (key plus value bytes, at most KOP_REVIEW_ANNOTATIONS_MAX).
 */
int kop_review_check_meta_entry(bool label, const char *key, const char *val, size_t val_len,
                                char *msg, size_t msg_size);

#define KOP_REVIEW_ANNOTATIONS_MAX (256 * 1024)

/* An AdmissionReview is decoded into a tree of at most this much memory
 * (estimated: jansson's values, members, slots and strings); more: 413. */
#define KOP_REVIEW_MAX_TREE_BYTES (16 << 20)

/* Items of a list past this many are decoded as null: the rules never read
 * them (a list that long is refused for its length; see kop/admission.h). */
#define KOP_REVIEW_MAX_DECODED_ITEMS 1024

#endif /* KOP_REVIEW_H */
