/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ConversionReview and AdmissionReview envelopes (see kop/review.h).
 *
 * A ConversionReview is answered by the streaming converter
 * (kop/convstream.h), which builds on this file's envelope helpers and
 * metadata rules; this file does not call it back. An AdmissionReview (at
 * most --admission-max-body-bytes, one object and its old version) is
 * validated by the strict scanner, refused with 413 when it would make a
 * tree far larger than itself, and only then decoded into
 * jansson values for the admission rules. This file also holds the
 * apiserver's checks of a conversion reply, which tests, the fuzzer and
 * kubesim apply to kop's replies.
 */
#include "kop/review.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kop/jscan.h"
#include "kop/json.h"
#include "kop/myresource.h"

#define CONV_V1 "apiextensions.k8s.io/v1"
#define CONV_V1BETA1 "apiextensions.k8s.io/v1beta1"
#define ADM_V1 "admission.k8s.io/v1"
#define ADM_V1BETA1 "admission.k8s.io/v1beta1"
#define ANNOTATIONS_MAX KOP_REVIEW_ANNOTATIONS_MAX

/* ---- small helpers -------------------------------------------------------- */

static const char *str_or_empty(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

static bool str_eq(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

bool kop_review_content_type_ok(const char *ct)
{
    static const char want[] = "application/json";
    if (!ct)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, sizeof(want) - 1) != 0)
        return false;
    ct += sizeof(want) - 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

int kop_review_finish(struct kop_review_result *r, int status, json_t *reply)
{
    char *buf = NULL;
    size_t len = 0;
    int rc;
    if (!reply)
        return -ENOMEM;
    rc = kop_json_dump(reply, JSON_COMPACT, &buf, &len);
    json_decref(reply);
    if (rc < 0)
        return rc;
    char *nb = realloc(buf, len + 2);
    if (!nb) {
        free(buf);
        return -ENOMEM;
    }
    nb[len] = '\n';
    nb[len + 1] = '\0';
    r->http_status = status;
    r->body = nb;
    r->body_len = len + 1;
    return 0;
}

/* Parse a body into an object, or describe why not (HTTP 400/415). */
static json_t *parse_body(const char *ct, const char *body, size_t len, int *ret_status, char *msg,
                          size_t size)
{
    if (ct && !kop_review_content_type_ok(ct)) {
        *ret_status = 415;
        kop_msgf(msg, size, "contentType=%s, expected application/json", ct);
        return NULL;
    }
    if (!body || len == 0) {
        *ret_status = 400;
        kop_msgf(msg, size, "request body is empty");
        return NULL;
    }
    if (!ct) {
        *ret_status = 415;
        kop_msgf(msg, size, "contentType=, expected application/json");
        return NULL;
    }
    /* Validate first (no tree), then decode within bounds: a body that
     * would make a tree far larger than itself (in "[0,0,...]" every two
     * bytes become a jansson value of tens of bytes; docs/performance.md
     * §4) is refused instead of built, and
     * the items of a list past KOP_REVIEW_MAX_DECODED_ITEMS are kept as
     * null (the list is refused for its length long before that). */
    struct kop_jscan *scan = kop_jscan_new();
    if (!scan) {
        *ret_status = 500;
        kop_msgf(msg, size, "out of memory");
        return NULL;
    }
    int sr = kop_jscan_value(scan, body, len, 0, 0);
    size_t values = kop_jscan_values(scan);
    if (sr < 0) {
        *ret_status = sr == -ENOMEM ? 500 : 400;
        kop_msgf(msg, size, "couldn't get version/kind; json parse error: %s",
                 kop_jscan_error(scan, NULL));
        kop_jscan_free(scan);
        return NULL;
    }
    kop_jscan_free(scan);
    /* Each value costs at least an array slot: so many values cannot fit,
     * refuse before decoding anything. */
    int derr = 0;
    json_t *root = NULL;
    if (values > KOP_REVIEW_MAX_TREE_BYTES / 24)
        derr = -E2BIG;
    else
        root = kop_jscan_decode_bounded(body, len, KOP_REVIEW_MAX_DECODED_ITEMS,
                                        KOP_REVIEW_MAX_TREE_BYTES, &derr);
    if (!root) {
        *ret_status = derr == -E2BIG ? 413 : 500;
        if (derr == -E2BIG)
            kop_msgf(msg, size,
                     "the request would take more than %d MiB of memory to decode; this webhook "
                     "decodes less",
                     KOP_REVIEW_MAX_TREE_BYTES >> 20);
        else
            kop_msgf(msg, size, "out of memory");
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        *ret_status = 400;
        kop_msgf(msg, size, "couldn't get version/kind; json parse error: expected a JSON object");
        return NULL;
    }
    return root;
}

static void result_init(struct kop_review_result *r, enum kop_review_type type)
{
    memset(r, 0, sizeof(*r));
    r->type = type;
}

/* Copy with truncation (these copies are for logs). */
static void copy_cut(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size)
        n = kop_utf8_cut(src, size - 1);
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

static void set_uid(struct kop_review_result *r, const char *uid)
{
    copy_cut(r->uid, sizeof(r->uid), uid);
}

/* ---- conversion reply check ------------------------------------------------ */

struct ident {
    json_t *kind, *name, *ns, *uid;
};

static void ident_take(struct ident *id, const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    id->kind = json_incref(json_object_get(obj, "kind"));
    id->name = json_incref(json_object_get(meta, "name"));
    id->ns = json_incref(json_object_get(meta, "namespace"));
    id->uid = json_incref(json_object_get(meta, "uid"));
}

static void ident_release(struct ident *id)
{
    json_decref(id->kind);
    json_decref(id->name);
    json_decref(id->ns);
    json_decref(id->uid);
}

static bool same_str(const json_t *a, const json_t *b)
{
    /* metav1 getters read absent and non-string as "" */
    return strcmp(str_or_empty(a), str_or_empty(b)) == 0;
}

static bool dns1123_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '.')
            return false;
        if ((i == 0 || i == n - 1) && !alnum)
            return false;
    }
    return true;
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 */
static bool name_part(const char *s, size_t n)
{
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && c != '_' && c != '.')
            return false;
        if ((i == 0 || i == n - 1) && !alnum)
            return false;
    }
    return true;
}

static bool qualified_name(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return name_part(s, strlen(s));
    if (strchr(slash + 1, '/'))
        return false;
    return dns1123_subdomain(s, (size_t)(slash - s)) && name_part(slash + 1, strlen(slash + 1));
}

int kop_review_check_meta_entry(bool label, const char *key, const char *val, size_t val_len,
                                char *msg, size_t msg_size)
{
    const char *what = label ? "labels" : "annotations";
    if (!val) {
        kop_msgf(msg, msg_size, "metadata.%s[%s]: must be a string", what, key);
        return -EINVAL;
    }
    if (!qualified_name(key)) {
        kop_msgf(msg, msg_size, "metadata.%s: Invalid value: \"%s\": invalid %s", what, key,
                 label ? "label key" : "key");
        return -EINVAL;
    }
    if (label && val_len > 0 && !name_part(val, val_len)) {
        kop_msgf(msg, msg_size, "metadata.labels: Invalid value: invalid label value for %s", key);
        return -EINVAL;
    }
    return 0;
}

int kop_review_check_object_meta(const json_t *original, const json_t *converted, char *msg,
                                 size_t msg_size)
{
    (void)original;
    const json_t *meta = json_object_get(converted, "metadata");
    const char *key;
    const json_t *v;
    if (!meta) {
        kop_msgf(msg, msg_size, "converted object has no metadata");
        return -EINVAL;
    }
    if (!json_is_object(meta)) {
        kop_msgf(msg, msg_size, "invalid metadata of type %s",
                 json_is_array(meta) ? "array" : "non-object");
        return -EINVAL;
    }
    const json_t *labels = json_object_get(meta, "labels");
    if (labels && !json_is_null(labels)) {
        if (!json_is_object(labels)) {
            kop_msgf(msg, msg_size, "metadata.labels: must be a map of strings");
            return -EINVAL;
        }
        json_object_foreach((json_t *)labels, key, v)
        {
            if (kop_review_check_meta_entry(true, key, json_string_value(v), json_string_length(v),
                                            msg, msg_size) < 0)
                return -EINVAL;
        }
    }
    const json_t *ann = json_object_get(meta, "annotations");
    if (ann && !json_is_null(ann)) {
        size_t total = 0;
        if (!json_is_object(ann)) {
            kop_msgf(msg, msg_size, "metadata.annotations: must be a map of strings");
            return -EINVAL;
        }
        json_object_foreach((json_t *)ann, key, v)
        {
            if (kop_review_check_meta_entry(false, key, json_string_value(v), json_string_length(v),
                                            msg, msg_size) < 0)
                return -EINVAL;
            total += strlen(key) + json_string_length(v);
        }
        if (total > ANNOTATIONS_MAX) {
            kop_msgf(msg, msg_size, "metadata.annotations: Too long: must have at most %d bytes",
                     ANNOTATIONS_MAX);
            return -EINVAL;
        }
    }
    return 0;
}

struct check {
    unsigned violations;
    char *msg;
    size_t size;
};

__attribute__((format(printf, 2, 3))) static void violation(struct check *c, const char *fmt, ...)
{
    va_list ap;
    if (c->violations++ == 0 && c->msg && c->size) {
        va_start(ap, fmt);
        kop_vmsgf(c->msg, c->size, fmt, ap);
        va_end(ap);
    }
}

static enum kop_conversion_check check_reply(const char *version, const char *uid,
                                             const char *desired, const struct ident *ids,
                                             const json_t *const *originals, size_t n,
                                             const json_t *reply, bool strict, struct check *c)
{
    bool v1 = strcmp(version, CONV_V1) == 0;
    if ((v1 || strict) && (!str_eq(json_object_get(reply, "apiVersion"), version) ||
                           !str_eq(json_object_get(reply, "kind"), "ConversionReview")))
        violation(c, "expected webhook response of %s, Kind=ConversionReview", version);
    const json_t *resp = json_object_get(reply, "response");
    if (!json_is_object(resp)) {
        violation(c, "no response provided");
        return KOP_CONVERSION_CHECK_INVALID;
    }
    if ((v1 || strict) && !str_eq(json_object_get(resp, "uid"), uid))
        violation(c, "expected response.uid=\"%s\", got \"%s\"", uid,
                  str_or_empty(json_object_get(resp, "uid")));
    const json_t *result = json_object_get(resp, "result");
    const char *status = str_or_empty(json_object_get(result, "status"));
    const json_t *objs = json_object_get(resp, "convertedObjects");
    if (strcmp(status, "Success") != 0) {
        /* As the apiserver: the webhook's message if any, else the status. A
         * Failure is well-formed when the envelope is right and (strict) it
         * has a message and no objects. */
        const char *m = str_or_empty(json_object_get(result, "message"));
        bool well_formed = strcmp(status, "Failure") == 0 && c->violations == 0 &&
                           !(strict && (!*m || json_array_size(objs) > 0));
        if (*m)
            violation(c, "%s", m);
        else
            violation(c, "response.result.status was '%s', not 'Success'", status);
        return well_formed ? KOP_CONVERSION_CHECK_FAILED : KOP_CONVERSION_CHECK_INVALID;
    }
    size_t got = json_array_size(objs);
    if ((objs && !json_is_array(objs)) || got != n) {
        violation(c, "conversion webhook returned %zu objects, expected %zu", got, n);
        return KOP_CONVERSION_CHECK_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(objs, i);
        const json_t *meta = json_object_get(o, "metadata");
        char m[256];
        if (!json_is_object(o)) {
            violation(c, "invalid converted object at index %zu: not an object", i);
            continue;
        }
        if (!str_eq(json_object_get(o, "apiVersion"), desired))
            violation(c, "invalid converted object at index %zu: expected apiVersion %s, got %s", i,
                      desired, str_or_empty(json_object_get(o, "apiVersion")));
        if (!same_str(ids[i].kind, json_object_get(o, "kind")))
            violation(c, "invalid converted object at index %zu: must have the same kind: %s != %s",
                      i, str_or_empty(ids[i].kind), str_or_empty(json_object_get(o, "kind")));
        if (!same_str(ids[i].name, json_object_get(meta, "name")))
            violation(c, "invalid converted object at index %zu: must have the same name", i);
        if (!same_str(ids[i].ns, json_object_get(meta, "namespace")))
            violation(c, "invalid converted object at index %zu: must have the same namespace", i);
        if (!same_str(ids[i].uid, json_object_get(meta, "uid")))
            violation(c, "invalid converted object at index %zu: must have the same UID", i);
        if (kop_review_check_object_meta(originals ? originals[i] : NULL, o, m, sizeof(m)) < 0)
            violation(c, "invalid converted object at index %zu: %s", i, m);
    }
    return c->violations ? KOP_CONVERSION_CHECK_INVALID : KOP_CONVERSION_CHECK_OK;
}

static const char *review_version(const json_t *root, const char *v1, const char *v1beta1)
{
    const json_t *av = json_object_get(root, "apiVersion");
    if (!av)
        return v1; /* as controller-runtime: a missing apiVersion means v1 */
    if (str_eq(av, v1))
        return v1;
    if (str_eq(av, v1beta1))
        return v1beta1;
    return NULL;
}

enum kop_conversion_check kop_review_check_conversion(const json_t *request_review,
                                                      const json_t *reply, bool strict,
                                                      unsigned *ret_violations, char *msg,
                                                      size_t msg_size)
{
    struct check c = {.msg = msg, .size = msg_size};
    const char *version = review_version(request_review, CONV_V1, CONV_V1BETA1);
    const json_t *req = json_object_get(request_review, "request");
    const json_t *objs = json_object_get(req, "objects");
    size_t n = json_array_size(objs);
    enum kop_conversion_check r;
    if (msg && msg_size)
        msg[0] = '\0';
    if (!version)
        version = CONV_V1;
    struct ident *ids = calloc(n ? n : 1, sizeof(*ids));
    const json_t **orig = calloc(n ? n : 1, sizeof(*orig));
    if (!ids || !orig) {
        free(ids);
        free(orig);
        violation(&c, "out of memory");
        r = KOP_CONVERSION_CHECK_INVALID;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        orig[i] = json_array_get(objs, i);
        ident_take(&ids[i], orig[i]);
    }
    r = check_reply(version, str_or_empty(json_object_get(req, "uid")),
                    str_or_empty(json_object_get(req, "desiredAPIVersion")), ids, orig, n, reply,
                    strict, &c);
    for (size_t i = 0; i < n; i++)
        ident_release(&ids[i]);
    free(ids);
    free(orig);
out:
    if (ret_violations)
        *ret_violations = r == KOP_CONVERSION_CHECK_INVALID ? c.violations : 0;
    return r;
}

/* ---- AdmissionReview ---------------------------------------------------------- */

static json_t *admission_reply(const char *version, const char *uid, bool allowed, int code,
                               const char *reason, const char *message,
                               const struct kop_admission_verdict *v)
{
    json_t *status = json_pack("{s:{}}", "metadata");
    json_t *resp = NULL;
    if (!status)
        return NULL;
    if ((message &&
         json_object_set_new(status, "message", kop_review_message_string(message)) < 0) ||
        (reason && json_object_set_new(status, "reason", json_string(reason)) < 0) ||
        json_object_set_new(status, "code", json_integer(code)) < 0) {
        json_decref(status);
        return NULL;
    }
    resp =
        json_pack("{s:s, s:b, s:o}", "uid", uid ? uid : "", "allowed", allowed, "status", status);
    if (!resp)
        return NULL;
    if (v && v->n_warnings > 0) {
        json_t *w = json_array();
        if (!w || json_object_set_new(resp, "warnings", w) < 0) {
            json_decref(resp);
            return NULL;
        }
        for (size_t i = 0; i < v->n_warnings; i++) {
            if (json_array_append_new(w, json_string(v->warnings[i])) < 0) {
                json_decref(resp);
                return NULL;
            }
        }
    }
    return json_pack("{s:s, s:s, s:o}", "kind", "AdmissionReview", "apiVersion",
                     version ? version : ADM_V1, "response", resp);
}

/* A denial decided before the rules (kop_review_deny_http). */
struct deny {
    int code;
    const char *reason;
    const char *message;
};

static int admit(const char *content_type, const char *body, size_t len,
                 const struct kop_admission_options *opts, const struct deny *deny,
                 struct kop_review_result *ret);

int kop_review_admit_http(const char *content_type, const char *body, size_t len,
                          const struct kop_admission_options *opts, struct kop_review_result *ret)
{
    return admit(content_type, body, len, opts, NULL, ret);
}

int kop_review_deny_http(const char *content_type, const char *body, size_t len, int code,
                         const char *reason, const char *message, struct kop_review_result *ret)
{
    assert(message);
    const struct deny d = {code, reason, message};
    return admit(content_type, body, len, NULL, &d, ret);
}

static int admit(const char *content_type, const char *body, size_t len,
                 const struct kop_admission_options *opts, const struct deny *deny,
                 struct kop_review_result *ret)
{
    char msg[512];
    int status = 400, rc = 0;
    struct kop_review_result r;
    struct kop_admission_verdict v = {.allowed = true};
    json_t *root = NULL;
    assert(ret);
    result_init(&r, KOP_REVIEW_ADMISSION);
    root = parse_body(content_type, body, len, &status, msg, sizeof(msg));
    if (!root)
        goto error;
    const char *version = review_version(root, ADM_V1, ADM_V1BETA1);
    const json_t *kind = json_object_get(root, "kind");
    if (!version || (kind && !str_eq(kind, "AdmissionReview"))) {
        snprintf(msg, sizeof(msg),
                 "unsupported review %.100s, Kind=%.100s; expected %s or %s, "
                 "Kind=AdmissionReview",
                 str_or_empty(json_object_get(root, "apiVersion")), str_or_empty(kind), ADM_V1,
                 ADM_V1BETA1);
        status = 400;
        goto error;
    }
    json_t *req = json_object_get(root, "request");
    if (!req) {
        /* nothing to judge: an "allowed" for no request (and no uid) would
         * answer a question nobody asked, as a ConversionReview without one
         * is a 400 */
        snprintf(msg, sizeof(msg), "AdmissionReview has no request");
        status = 400;
        goto error;
    }
    if (!json_is_object(req)) {
        snprintf(msg, sizeof(msg), "AdmissionReview request must be an object");
        status = 400;
        goto error;
    }
    const json_t *juid = json_object_get(req, "uid");
    if (juid && !json_is_string(juid) && !json_is_null(juid)) {
        /* a typed decoder's error (the apiserver always sends a string):
         * there is no uid to echo */
        snprintf(msg, sizeof(msg), "AdmissionReview request.uid must be a string");
        status = 400;
        goto error;
    }
    const char *uid = str_or_empty(juid);
    set_uid(&r, uid);
    if (deny) {
        r.violations = 1;
        copy_cut(r.message, sizeof(r.message), deny->message);
        rc = kop_review_finish(
            &r, 200,
            admission_reply(version, uid, false, deny->code, deny->reason, deny->message, NULL));
        goto out;
    }
    rc = kop_admission_evaluate(req, opts, &v);
    if (rc < 0)
        goto out;
    r.success = v.allowed;
    r.n_warnings = v.n_warnings;
    if (v.allowed) {
        rc = kop_review_finish(&r, 200, admission_reply(version, uid, true, 200, NULL, NULL, &v));
    } else {
        r.violations = v.n_violations;
        copy_cut(r.message, sizeof(r.message), v.message ? v.message : "");
        rc = kop_review_finish(
            &r, 200, admission_reply(version, uid, false, 403, "Forbidden", v.message, &v));
    }
    goto out;
error:
    copy_cut(r.message, sizeof(r.message), msg);
    rc = kop_review_finish(&r, status,
                           admission_reply(root ? review_version(root, ADM_V1, ADM_V1BETA1) : NULL,
                                           r.uid, false, status, NULL, msg, NULL));
out:
    kop_admission_verdict_cleanup(&v);
    json_decref(root);
    if (rc < 0) {
        kop_review_result_cleanup(&r);
        return rc;
    }
    *ret = r;
    return 0;
}

void kop_review_result_cleanup(struct kop_review_result *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

/* Messages quote the request (a parse error shows the bytes near it, and a
 * cut "%.100s" may split a character), so they are not always valid UTF-8,
 * which json_string() refuses: such a message goes out with every
 * non-ASCII byte replaced by '?', and the client still gets its answer. */
json_t *kop_review_message_string(const char *m)
{
    json_t *s = json_string(m);
    if (s || !m)
        return s;
    char *copy = strdup(m);
    if (!copy)
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    s = json_string(copy);
    free(copy);
    return s;
}
