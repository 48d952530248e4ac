/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fuzz targets (see targets.h): what each one feeds its module and
 * which invariants it checks. Compiled into every libFuzzer binary and,
 * through an #include, into the corpus replay suite.
 */
#include "targets.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kop/admission.h"
#include "kop/arena.h"
#include "kop/config.h"
#include "kop/conversion.h"
#include "kop/convstream.h"
#include "kop/imageref.h"
#include "kop/jscan.h"
#include "kop/json.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kop/myresource.h"
#include "kop/review.h"
#include "kop/store.h"
#include "kop/watch.h"

/* ---- plumbing ------------------------------------------------------------- */

static kop_fuzz_fail_fn *fail_hook;

void kop_fuzz_set_fail(kop_fuzz_fail_fn *fn)
{
    fail_hook = fn;
}

void kop_fuzz_fail(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (fail_hook) {
        fail_hook(msg);
        return;
    }
    fprintf(stderr, "fuzz invariant broken: %s\n", msg);
    abort();
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            kop_fuzz_fail(__VA_ARGS__);                                                            \
    } while (0)

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static FILE *devnull;

static void init_once_fn(void)
{
    kop_arena_json_install();
    devnull = fopen("/dev/null", "w");
}

void kop_fuzz_init(void)
{
    pthread_once(&init_once, init_once_fn);
}

static FILE *null_stream(void)
{
    kop_fuzz_init();
    return devnull ? devnull : stderr;
}

/* FNV-1a: split points and choices derived from the input itself. */
static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static bool str_is(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

static const char *str_or_empty(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

/* Compact dump for messages and exact comparisons; malloc'd or NULL. */
static char *dump(const json_t *v)
{
    char *s = NULL;
    if (kop_json_dump(v, JSON_COMPACT | JSON_ENCODE_ANY, &s, NULL) < 0)
        return NULL;
    return s;
}

/* The reply body: valid JSON, one object, NUL-terminated, ends with "\n".
 * @ref new, NULL (after a failed check) otherwise. */
static json_t *reply_body(const struct kop_review_result *r, const char *what)
{
    CHECK(r->body != NULL, "%s: no body", what);
    if (!r->body)
        return NULL;
    CHECK(strlen(r->body) == r->body_len, "%s: body_len %zu != strlen", what, r->body_len);
    CHECK(r->body_len > 0 && r->body[r->body_len - 1] == '\n', "%s: body does not end in \\n",
          what);
    json_error_t err;
    json_t *reply = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &err);
    CHECK(json_is_object(reply), "%s: body is not a JSON object: %s: %s", what, err.text, r->body);
    if (!json_is_object(reply)) {
        json_decref(reply);
        return NULL;
    }
    return reply;
}

/* ---- 1. ConversionReview --------------------------------------------------- */

/* Whether every object of the request passes the apiserver's metadata rules
 * itself: then a self-check violation can only come from the converter. */
static bool objects_meta_ok(const json_t *request)
{
    const json_t *objs = json_object_get(json_object_get(request, "request"), "objects");
    size_t i;
    const json_t *o;
    char msg[256];
    json_array_foreach(objs, i, o)
    {
        if (kop_review_check_object_meta(NULL, o, msg, sizeof(msg)) < 0)
            return false;
    }
    return true;
}

/* The same body fed in pieces (sizes drawn from the data) must give the
 * same reply byte for byte: the stream cannot depend on how bytes arrive. */
static void check_pieces(const uint8_t *data, size_t size, const struct kop_review_result *whole)
{
    struct kop_convstream *cs;
    struct kop_review_result r;
    if (kop_convstream_new("application/json", NULL, &cs) < 0)
        return;
    size_t off = 0, k = 0;
    int rc = 0;
    while (off < size && rc == 0) {
        size_t n = 1 + (size ? data[k++ % size] % 13 : 0);
        if (n > size - off)
            n = size - off;
        rc = kop_convstream_feed(cs, (const char *)data + off, n);
        off += n;
    }
    if (rc == 0)
        rc = kop_convstream_finish(cs, &r);
    kop_convstream_free(cs);
    CHECK(rc == 0, "piecewise feed returned %d", rc);
    if (rc != 0)
        return;
    CHECK(r.http_status == whole->http_status && r.body_len == whole->body_len &&
              memcmp(r.body, whole->body, r.body_len) == 0,
          "piecewise reply differs (HTTP %d vs %d)", r.http_status, whole->http_status);
    kop_review_result_cleanup(&r);
}

/* On Success each converted object equals what the whole-tree converter
 * makes of the request's object. */
static void check_against_tree(const json_t *request, const json_t *reply)
{
    const json_t *req = json_object_get(request, "request");
    const json_t *objs = json_object_get(req, "objects");
    const json_t *got = json_object_get(json_object_get(reply, "response"), "convertedObjects");
    enum kop_myresource_version desired =
        kop_myresource_version_parse(str_or_empty(json_object_get(req, "desiredAPIVersion")));
    for (size_t i = 0; i < json_array_size(objs); i++) {
        json_t *want = json_deep_copy(json_array_get(objs, i));
        if (!want)
            return;
        if (kop_conversion_convert(want, desired) == 0)
            CHECK(kop_json_equal(want, json_array_get(got, i)),
                  "object %zu differs from the tree conversion", i);
        json_decref(want);
    }
}

static void conversion_review_once(const uint8_t *data, size_t size)
{
    struct kop_review_result r;
    int rc = kop_convstream_convert_http("application/json", (const char *)data, size, NULL, &r);
    CHECK(rc == 0, "convert_http returned %d", rc);
    if (rc != 0)
        return;
    check_pieces(data, size, &r);
    CHECK(r.http_status == 200 || r.http_status == 400 || r.http_status == 413 ||
              r.http_status == 415,
          "convert_http status %d", r.http_status);
    CHECK(r.type == KOP_REVIEW_CONVERSION, "result type %d", (int)r.type);
    json_t *reply = reply_body(&r, "conversion");
    json_t *request = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    const json_t *result = json_object_get(json_object_get(reply, "response"), "result");
    const char *status = str_or_empty(json_object_get(result, "status"));
    if (reply && r.http_status != 200) {
        CHECK(strcmp(status, "Failure") == 0, "HTTP %d with result.status \"%s\"", r.http_status,
              status);
        CHECK(json_is_string(json_object_get(result, "message")), "HTTP %d without a message",
              r.http_status);
        CHECK(!r.success, "HTTP %d but success", r.http_status);
    }
    if (reply && r.http_status == 200) {
        CHECK(json_is_object(request), "200 for a body that is not a JSON object");
        CHECK(r.success == (strcmp(status, "Success") == 0), "success flag %d, status \"%s\"",
              r.success, status);
        if (json_is_object(request)) {
            char msg[512];
            unsigned viol = 0;
            enum kop_conversion_check c =
                kop_review_check_conversion(request, reply, true, &viol, msg, sizeof(msg));
            if (strcmp(status, "Success") == 0) {
                CHECK(c == KOP_CONVERSION_CHECK_OK, "Success reply fails the apiserver check: %s",
                      msg);
                check_against_tree(request, reply);
            } else
                CHECK(c == KOP_CONVERSION_CHECK_FAILED, "malformed Failure reply (%d): %s", (int)c,
                      msg);
            if (r.violations > 0)
                CHECK(!objects_meta_ok(request),
                      "the converter broke the apiserver's rules on valid input: %s", r.message);
        }
    }
    json_decref(request);
    json_decref(reply);
    kop_review_result_cleanup(&r);
}

/* Heap first (ASan sees every byte), then inside a per-request arena as the
 * webhook runs it. */
void kop_fuzz_conversion_review(const uint8_t *data, size_t size)
{
    kop_fuzz_init();
    conversion_review_once(data, size);
    struct kop_arena *a = kop_arena_new(16 * 1024);
    if (!a)
        return;
    struct kop_arena *prev = kop_arena_json_bind(a);
    conversion_review_once(data, size);
    kop_arena_json_bind(prev);
    kop_arena_free(a);
}

/* ---- 2. AdmissionReview ---------------------------------------------------- */

static enum kop_child_lookup child_lookup(void *ud, const char *kind, const char *ns,
                                          const char *name, char *ret_uid, size_t uid_size)
{
    (void)ud;
    uint64_t h = hash_bytes((const uint8_t *)name, strlen(name)) ^
                 hash_bytes((const uint8_t *)ns, strlen(ns)) ^ (uint64_t)strlen(kind);
    switch (h % 4) {
    case 0:
        return KOP_CHILD_NOT_SYNCED;
    case 1:
        return KOP_CHILD_ABSENT;
    case 2:
        snprintf(ret_uid, uid_size, "%s", "");
        return KOP_CHILD_PRESENT;
    default:
        snprintf(ret_uid, uid_size, "%s", "uid-1");
        return KOP_CHILD_PRESENT;
    }
}

static void admission_review_once(const uint8_t *data, size_t size)
{
    static char *const registries[] = {"docker.io", "quay.io", "localhost:5000"};
    struct kop_admission_options opts = {
        .allowed_registries = registries,
        .n_allowed_registries = 3,
        .child_lookup = child_lookup,
    };
    struct kop_review_result r;
    int rc = kop_review_admit_http("application/json", (const char *)data, size, &opts, &r);
    CHECK(rc == 0, "admit_http returned %d", rc);
    if (rc != 0)
        return;
    CHECK(r.http_status == 200 || r.http_status == 400 || r.http_status == 415,
          "admit_http status %d", r.http_status);
    json_t *reply = reply_body(&r, "admission");
    json_t *request = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    const json_t *resp = json_object_get(reply, "response");
    const json_t *allowed = json_object_get(resp, "allowed");
    const json_t *st = json_object_get(resp, "status");
    if (reply) {
        CHECK(str_is(json_object_get(reply, "kind"), "AdmissionReview"), "reply kind");
        const json_t *av = json_object_get(reply, "apiVersion");
        CHECK(str_is(av, "admission.k8s.io/v1") || str_is(av, "admission.k8s.io/v1beta1"),
              "reply apiVersion %s", str_or_empty(av));
        CHECK(json_is_boolean(allowed), "allowed is not a boolean");
        CHECK(json_object_get(resp, "patch") == NULL, "a validating reply carries a patch");
        const json_t *w = json_object_get(resp, "warnings");
        size_t i;
        const json_t *it;
        json_array_foreach(w, i, it)
        {
            CHECK(json_is_string(it) && json_string_length(it) < 120, "warning %zu too long", i);
        }
        if (json_is_false(allowed)) {
            const json_t *code = json_object_get(st, "code");
            const json_t *msg = json_object_get(st, "message");
            CHECK(json_is_string(msg) && json_string_length(msg) > 0, "denial without a message");
            if (r.http_status == 200) {
                CHECK(json_integer_value(code) == 403, "denial with code %lld",
                      (long long)json_integer_value(code));
                CHECK(str_is(json_object_get(st, "reason"), "Forbidden"),
                      "denial reason is not Forbidden");
            } else {
                CHECK(json_integer_value(code) == r.http_status, "HTTP %d with status.code %lld",
                      r.http_status, (long long)json_integer_value(code));
            }
        }
    }
    if (reply && r.http_status == 200) {
        CHECK(json_is_object(request), "200 for a body that is not a JSON object");
        const json_t *req = json_object_get(request, "request");
        const char *uid = str_or_empty(json_object_get(req, "uid"));
        CHECK(str_is(json_object_get(resp, "uid"), uid), "response.uid \"%s\" != request.uid",
              str_or_empty(json_object_get(resp, "uid")));
        const json_t *rav = json_object_get(request, "apiVersion");
        if (rav)
            CHECK(json_equal(rav, json_object_get(reply, "apiVersion")),
                  "answered in another version");
        CHECK(r.success == json_is_true(allowed), "success flag disagrees with allowed");
    }
    if (reply && r.http_status != 200)
        CHECK(json_is_false(allowed), "HTTP %d allowed", r.http_status);
    json_decref(request);
    json_decref(reply);
    kop_review_result_cleanup(&r);
}

void kop_fuzz_admission_review(const uint8_t *data, size_t size)
{
    kop_fuzz_init();
    admission_review_once(data, size);
    struct kop_arena *a = kop_arena_new(16 * 1024);
    if (!a)
        return;
    struct kop_arena *prev = kop_arena_json_bind(a);
    admission_review_once(data, size);
    kop_arena_json_bind(prev);
    kop_arena_free(a);
}

/* ---- 3. conversion in place ----------------------------------------------- */

static void dflt(json_t *o, const char *key, json_t *v)
{
    if (!json_object_get(o, key))
        json_object_set_new(o, key, v);
    else
        json_decref(v);
}

/* The CRD's structural defaults of v1 (docs/api.md §1.4), as the apiserver applies
 * them before anyone compares. */
static void default_v1(json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec))
        return;
    dflt(spec, "replicas", json_integer(KOP_MYRESOURCE_DEFAULT_REPLICAS));
    dflt(spec, "image", json_string(KOP_MYRESOURCE_DEFAULT_IMAGE));
    dflt(spec, "port", json_integer(KOP_MYRESOURCE_DEFAULT_PORT));
    dflt(spec, "serviceType", json_string(KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE));
}

/* A v1 MyResource as the apiserver could store it: right apiVersion and
 * kind, spec fields of the v1 types only, status counters integers, no
 * v2-extras annotation (so nothing v2-only is implied). */
static bool plain_v1(const json_t *obj)
{
    if (!str_is(json_object_get(obj, "apiVersion"), KOP_MYRESOURCE_V1) ||
        !str_is(json_object_get(obj, "kind"), KOP_MYRESOURCE_KIND))
        return false;
    const json_t *meta = json_object_get(obj, "metadata");
    if (meta && !json_is_object(meta))
        return false;
    const json_t *ann = json_object_get(meta, "annotations");
    if (ann && (!json_is_object(ann) || json_object_size(ann) == 0 ||
                json_object_get(ann, KOP_MYRESOURCE_EXTRAS_ANNOTATION)))
        return false;
    const json_t *spec = json_object_get(obj, "spec");
    if (spec) {
        const char *key;
        const json_t *v;
        if (!json_is_object(spec))
            return false;
        json_object_foreach((json_t *)spec, key, v)
        {
            bool ok = (strcmp(key, "replicas") == 0 && json_is_integer(v)) ||
                      (strcmp(key, "image") == 0 && json_is_string(v)) ||
                      (strcmp(key, "port") == 0 && json_is_integer(v)) ||
                      (strcmp(key, "serviceType") == 0 && json_is_string(v));
            if (!ok)
                return false;
        }
    }
    const json_t *status = json_object_get(obj, "status");
    if (status) {
        const json_t *rep = json_object_get(status, "replicas");
        const json_t *ready = json_object_get(status, "readyReplicas");
        if (!json_is_object(status) || (rep && !json_is_integer(rep)) ||
            (ready && !json_is_integer(ready)))
            return false;
    }
    return true;
}

static void expect_equal_after_defaults(const json_t *orig, const json_t *back, const char *how)
{
    json_t *a = json_deep_copy(orig), *b = json_deep_copy(back);
    if (!a || !b)
        goto out;
    default_v1(a);
    default_v1(b);
    if (!json_equal(a, b)) {
        char *x = dump(a), *y = dump(b);
        kop_fuzz_fail("%s is not lossless:\n  in   %s\n  back %s", how, x ? x : "?", y ? y : "?");
        free(x);
        free(y);
    }
out:
    json_decref(a);
    json_decref(b);
}

void kop_fuzz_conversion(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(in)) {
        json_decref(in);
        return;
    }
    json_t *a = json_deep_copy(in), *b = json_deep_copy(in), *c = json_deep_copy(in);
    if (!a || !b || !c)
        goto out;
    int rc = kop_conversion_to_v2(a);
    CHECK(rc == 0, "to_v2 returned %d", rc);
    rc = kop_conversion_to_v1(a);
    CHECK(rc == 0, "to_v1 after to_v2 returned %d", rc);
    rc = kop_conversion_to_v1(b);
    CHECK(rc == 0, "to_v1 returned %d", rc);
    rc = kop_conversion_to_v2(b);
    CHECK(rc == 0, "to_v2 after to_v1 returned %d", rc);
    enum kop_myresource_version from = kop_myresource_version_of(in);
    rc = kop_conversion_convert(c, KOP_MYRESOURCE_VERSION_V2);
    CHECK(rc == (from == KOP_MYRESOURCE_VERSION_UNKNOWN ? -EINVAL : 0), "convert returned %d", rc);
    if (plain_v1(in)) {
        expect_equal_after_defaults(in, a, "v1 -> v2 -> v1");
        CHECK(str_is(json_object_get(c, "apiVersion"), KOP_MYRESOURCE_V2),
              "convert to v2 left apiVersion");
        rc = kop_conversion_convert(c, KOP_MYRESOURCE_VERSION_V1);
        CHECK(rc == 0, "convert back to v1 returned %d", rc);
        expect_equal_after_defaults(in, c, "convert v1 -> v2 -> v1");
    }
out:
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(in);
}

/* ---- 4. image references ------------------------------------------------- */

static bool inside(const char *p, size_t n, const char *s, size_t len)
{
    return p >= s && p + n <= s + len;
}

void kop_fuzz_imageref(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    struct kop_imageref ref;
    kop_imageref_split(s, size, &ref);
    CHECK(ref.name != NULL && inside(ref.name, ref.name_len, s, size), "split: name outside");
    CHECK(!ref.tag || inside(ref.tag, ref.tag_len, s, size), "split: tag outside");
    CHECK(!ref.digest || inside(ref.digest, ref.digest_len, s, size), "split: digest outside");
    char *buf = malloc(size + 1);
    if (!buf)
        return;
    size_t n = kop_imageref_join(ref.name, ref.name_len, ref.tag, ref.tag_len, ref.digest,
                                 ref.digest_len, buf, size + 1);
    CHECK(n == size && memcmp(buf, s, size) == 0, "split/join is not the identity (%zu/%zu)", n,
          size);
    /* a too-small buffer: snprintf semantics, NUL-terminated */
    char small[4];
    n = kop_imageref_join(ref.name, ref.name_len, ref.tag, ref.tag_len, ref.digest, ref.digest_len,
                          small, sizeof(small));
    CHECK(n == size, "join into a small buffer returned %zu, want %zu", n, size);
    CHECK(memchr(small, '\0', sizeof(small)) != NULL, "join into a small buffer: no NUL");
    CHECK(kop_imageref_parts_roundtrip(ref.name, ref.name_len, ref.tag, ref.tag_len, ref.digest,
                                       ref.digest_len),
          "the parts of a split do not round-trip");

    struct kop_imageref p;
    const char *reason = NULL;
    int rc = kop_imageref_parse(s, size, &p, &reason);
    CHECK(rc == 0 || rc == -EINVAL, "parse returned %d", rc);
    if (rc == -EINVAL)
        CHECK(reason != NULL, "parse failed without a reason");
    if (rc == 0) {
        n = kop_imageref_join(p.name, p.name_len, p.tag, p.tag_len, p.digest, p.digest_len, buf,
                              size + 1);
        CHECK(n == size && memcmp(buf, s, size) == 0, "parse/join is not the identity");
        CHECK(kop_imageref_check_name(p.name, p.name_len, NULL) == 0, "parsed name fails check");
        CHECK(!p.tag || kop_imageref_check_tag(p.tag, p.tag_len, NULL) == 0,
              "parsed tag fails check");
        CHECK(!p.digest || kop_imageref_check_digest(p.digest, p.digest_len, NULL) == 0,
              "parsed digest fails check");
        /* a valid reference splits into the same parts */
        CHECK(ref.name_len == p.name_len && ref.tag_len == p.tag_len &&
                  ref.digest_len == p.digest_len && !ref.tag == !p.tag && !ref.digest == !p.digest,
              "split and parse disagree on a valid reference");
        char reg[KOP_IMAGEREF_NAME_MAX + 16];
        rc = kop_imageref_registry(p.name, p.name_len, reg, sizeof(reg));
        CHECK(rc == 0, "registry of a valid name returned %d", rc);
        char *const allowed[] = {reg};
        if (rc == 0)
            CHECK(kop_imageref_registry_allowed(p.name, p.name_len, allowed, 1),
                  "a name's own registry \"%s\" is not allowed", reg);
    }
    /* the checks and registry helpers on raw bytes */
    (void)kop_imageref_check_name(s, size, &reason);
    (void)kop_imageref_check_tag(s, size, &reason);
    (void)kop_imageref_check_digest(s, size, &reason);
    char reg[32];
    (void)kop_imageref_registry(s, size, reg, sizeof(reg));
    free(buf);
}

/* ---- 5. watch stream ------------------------------------------------------ */

struct watch_log {
    size_t events;
    uint64_t digest; /* of the event types and resourceVersions, in order */
};

static int watch_cb(void *ud, const struct kop_watch_event *ev)
{
    struct watch_log *log = ud;
    const char *rv = ev->resource_version ? ev->resource_version : "";
    log->events++;
    log->digest = (log->digest ^ (uint64_t)ev->type) * UINT64_C(1099511628211);
    log->digest ^= hash_bytes((const uint8_t *)rv, strlen(rv));
    CHECK(json_is_object(ev->object), "event without an object");
    /* what the parser handed out decodes again to the same event */
    char *line = dump(ev->_root);
    if (!line)
        return 0;
    struct kop_watch_event again;
    int rc = kop_watch_event_decode(line, strlen(line), &again);
    CHECK(rc == 0, "re-decoding an event failed: %d", rc);
    if (rc == 0) {
        const char *rv2 = again.resource_version ? again.resource_version : "";
        CHECK(again.type == ev->type && strcmp(rv, rv2) == 0 && again.code == ev->code,
              "re-decoded event differs");
        kop_watch_event_clear(&again);
    }
    free(line);
    return 0;
}

static bool watch_rc_ok(int rc)
{
    return rc == 0 || rc == -EBADMSG || rc == -EMSGSIZE || rc == -ENOMEM;
}

/* Feed data in pieces cut at cuts[0..ncuts) (sorted), then finish. */
static int watch_run(const char *data, size_t size, size_t max_line, const size_t *cuts,
                     size_t ncuts, struct watch_log *log)
{
    struct kop_watch_parser *p = kop_watch_parser_new(max_line);
    if (!p)
        return -ENOMEM;
    size_t at = 0;
    int rc = 0;
    for (size_t i = 0; i <= ncuts && rc == 0; i++) {
        size_t end = i < ncuts ? cuts[i] : size;
        rc = kop_watch_parser_feed(p, data + at, end - at, watch_cb, log);
        CHECK(watch_rc_ok(rc), "feed returned %d", rc);
        at = end;
    }
    if (rc == 0) {
        rc = kop_watch_parser_finish(p, watch_cb, log);
        CHECK(watch_rc_ok(rc), "finish returned %d", rc);
        CHECK(kop_watch_parser_pending(p) == 0, "bytes pending after finish");
    }
    kop_watch_parser_free(p);
    return rc;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

void kop_fuzz_watch(const uint8_t *data, size_t size)
{
    uint64_t h = hash_bytes(data, size);
    /* mostly the default limit; sometimes a small one to reach EMSGSIZE */
    size_t max_line = (h & 7) == 0 ? 16 + (size_t)((h >> 3) % 256) : 0;
    size_t cuts[4];
    size_t ncuts = size ? (size_t)((h >> 12) % 5) : 0;
    for (size_t i = 0; i < ncuts; i++)
        cuts[i] = (size_t)((h >> (16 + 11 * i)) % (size + 1));
    qsort(cuts, ncuts, sizeof(cuts[0]), cmp_size);

    struct watch_log whole = {0}, split = {0};
    int r1 = watch_run((const char *)data, size, max_line, NULL, 0, &whole);
    int r2 = watch_run((const char *)data, size, max_line, cuts, ncuts, &split);
    /* the same events and the same verdict whatever the read boundaries */
    if (r1 != -ENOMEM && r2 != -ENOMEM) {
        CHECK(r1 == r2, "whole feed returned %d, split feed %d", r1, r2);
        CHECK(whole.events == split.events && whole.digest == split.digest,
              "split feed gave other events (%zu vs %zu)", whole.events, split.events);
    }
    /* every line on its own through the decoder */
    const char *s = (const char *)data, *end = s + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(end - s);
        struct kop_watch_event ev;
        int rc = kop_watch_event_decode(s, n, &ev);
        CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "decode returned %d", rc);
        if (rc == 0)
            kop_watch_event_clear(&ev);
        s += n + 1;
    }
}

/* ---- 6. kubeconfig ------------------------------------------------------- */

static bool all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i])
            return false;
    return true;
}

void kop_fuzz_kubeconfig(const uint8_t *data, size_t size)
{
    struct kop_kubeconfig kc;
    int rc = kop_kubeconfig_load_buffer((const char *)data, size, "/nonexistent", NULL, &kc);
    CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -ENOTSUP || rc == -ENOMEM,
          "load_buffer returned %d", rc);
    if (rc == 0) {
        CHECK(kc.server && *kc.server, "loaded without a server");
        CHECK(!kc.ca_data || kc.ca_data[kc.ca_data_len] == '\0', "ca_data not terminated");
        CHECK(!kc.cert_data || kc.cert_data[kc.cert_data_len] == '\0', "cert_data not terminated");
        CHECK(!kc.key_data || kc.key_data[kc.key_data_len] == '\0', "key_data not terminated");
        CHECK(!kc.in_cluster, "a kubeconfig claims in-cluster");
        CHECK(!kc.exec || (kc.exec->command && *kc.exec->command && kc.exec->api_version),
              "an exec plugin without command or apiVersion");
        CHECK(!kc.exec || !kc.exec->cluster || kc.exec->provide_cluster_info,
              "spec.cluster without provideClusterInfo");
        kop_kubeconfig_cleanup(&kc);
        CHECK(all_zero(&kc, sizeof(kc)), "cleanup left fields set");
    }
    /* a named context, which the file may lack */
    rc = kop_kubeconfig_load_buffer((const char *)data, size, NULL, "dev", &kc);
    CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -ENOTSUP || rc == -ENOMEM,
          "load_buffer(context) returned %d", rc);
    if (rc == 0)
        kop_kubeconfig_cleanup(&kc);
    kop_kubeconfig_cleanup(NULL);

    char *buf = NULL;
    size_t len = 0;
    rc = kop_base64_decode((const char *)data, size, &buf, &len);
    CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "base64 returned %d", rc);
    if (rc == 0) {
        CHECK(len <= size / 4 * 3 + 3, "base64 decoded %zu bytes from %zu", len, size);
        CHECK(buf[len] == '\0', "base64 output not terminated");
        free(buf);
    }
}

/* ---- 7. store --------------------------------------------------------------- */

#define MODEL_MAX 16

struct model_entry {
    char *key;
    json_t *value; /* the stripped object, as get must return it */
};

struct model {
    struct model_entry e[MODEL_MAX];
    size_t n;
    bool partial; /* a put did not fit: absence is no longer known */
};

struct reader {
    const uint8_t *p;
    size_t n;
};

static unsigned rd_byte(struct reader *r)
{
    if (!r->n)
        return 0;
    r->n--;
    return *r->p++;
}

/* A short string from the input: length byte (mod max+1), then bytes. */
static char *rd_str(struct reader *r, size_t max, bool nonempty)
{
    size_t len = rd_byte(r) % (max + 1);
    if (nonempty && len == 0)
        len = 1;
    char *s = malloc(len + 1);
    if (!s)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned c = rd_byte(r);
        /* keep names printable and NUL-free: they are C strings in the API */
        s[i] = (char)(c >= 0x20 && c < 0x7f ? c : 'a' + c % 26);
    }
    s[len] = '\0';
    return s;
}

static json_t *rd_value(struct reader *r, int depth);

static json_t *rd_container(struct reader *r, int depth, bool object)
{
    json_t *c = object ? json_object() : json_array();
    size_t n = rd_byte(r) % 5;
    for (size_t i = 0; c && i < n; i++) {
        json_t *v = rd_value(r, depth + 1);
        if (object) {
            char *k = rd_str(r, 12, false);
            if (k)
                json_object_set_new(c, k, v);
            else
                json_decref(v);
            free(k);
        } else {
            json_array_append_new(c, v);
        }
    }
    return c;
}

static json_t *rd_value(struct reader *r, int depth)
{
    static const char *const common[] = {"TCP", "metadata", "Deployment", "", "true", "app"};
    unsigned t = rd_byte(r);
    switch (t % 12) {
    case 0:
        return json_null();
    case 1:
        return json_boolean(t & 0x10);
    case 2:
        return json_integer((json_int_t)rd_byte(r) << (rd_byte(r) % 56));
    case 3:
        return json_integer(-(json_int_t)rd_byte(r) - ((json_int_t)rd_byte(r) << 40));
    case 4:
        return json_integer((t & 0x10) ? INT64_MIN : INT64_MAX);
    case 5:
        return json_real((double)rd_byte(r) / 7.0 - 3.0);
    case 6: {
        char *s = rd_str(r, 40, false);
        json_t *v = s ? json_string(s) : NULL;
        free(s);
        return v;
    }
    case 7:
        return json_string(common[rd_byte(r) % 6]);
    case 8: {
        /* long strings cross the varint boundaries */
        size_t len = (size_t)rd_byte(r) * 3;
        char *s = malloc(len + 1);
        if (!s)
            return NULL;
        memset(s, 'x', len);
        s[len] = '\0';
        json_t *v = json_string(s);
        free(s);
        return v;
    }
    case 9:
        return depth < 4 ? rd_container(r, depth, true) : json_null();
    case 10:
        return depth < 4 ? rd_container(r, depth, false) : json_true();
    default:
        return json_integer(rd_byte(r) % 30);
    }
}

static const char *const kinds[] = {"Deployment", "Service", "MyResource", "x"};

/* kind/ns/name, the key the store builds. */
static char *model_key(const char *kind, const char *ns, const char *name)
{
    size_t n = strlen(kind) + strlen(ns) + strlen(name) + 3;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s/%s/%s", kind, ns, name);
    return k;
}

static struct model_entry *model_find(struct model *m, const char *key)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->e[i].key, key) == 0)
            return &m->e[i];
    return NULL;
}

static void model_remove(struct model *m, struct model_entry *e)
{
    free(e->key);
    json_decref(e->value);
    *e = m->e[--m->n];
}

/* Exactly equal: same members in the same order, same number types. */
static void expect_same(const json_t *want, const json_t *got, const char *what)
{
    if (!got || !want) {
        CHECK(got == want, "%s: %s", what, got ? "unexpected value" : "missing value");
        return;
    }
    char *x = dump(want), *y = dump(got);
    CHECK(kop_json_equal(want, got) && x && y && strcmp(x, y) == 0,
          "%s: store returned another value:\n  want %s\n  got  %s", what, x ? x : "?",
          y ? y : "?");
    free(x);
    free(y);
}

static json_t *gen_object(struct reader *r, const char *ns, const char *name)
{
    json_t *meta = json_pack("{s:s}", "name", name);
    json_t *o = json_pack("{s:s, s:o}", "apiVersion", "v1", "metadata", meta);
    if (!o)
        return NULL;
    unsigned f = rd_byte(r);
    if (*ns || (f & 1))
        json_object_set_new(meta, "namespace", json_string(ns));
    if (f & 2) {
        char *rv = rd_str(r, 10, false);
        if (rv)
            json_object_set_new(meta, "resourceVersion", json_string(rv));
        free(rv);
    }
    if (f & 4)
        json_object_set_new(meta, "managedFields", json_pack("[{s:s}]", "manager", "kubectl"));
    if (f & 8) {
        json_t *ann = json_object();
        json_object_set_new(ann, "kubectl.kubernetes.io/last-applied-configuration",
                            json_string("{}"));
        if (f & 16)
            json_object_set_new(ann, "keep", json_string("me"));
        json_object_set_new(meta, "annotations", ann);
    }
    if (f & 32)
        json_object_set_new(
            meta, "ownerReferences",
            json_pack("[{s:s, s:b}]", "uid", (f & 64) ? "u1" : "u2", "controller", f & 128));
    json_object_set_new(o, "spec", rd_value(r, 0));
    if (rd_byte(r) & 1)
        json_object_set_new(o, "status", rd_value(r, 0));
    return o;
}

static void store_put(struct kop_store *s, struct model *m, const char *kind, json_t *obj,
                      const char *key)
{
    json_t *stripped = kop_store_strip(obj);
    json_t *old = NULL, *stored = NULL;
    struct model_entry *e = model_find(m, key);
    int rc = kop_store_put(s, kind, obj, &old, &stored);
    CHECK(rc == 0 || rc == -ENOMEM, "put returned %d", rc);
    if (rc == 0) {
        if (e || !m->partial)
            expect_same(e ? e->value : NULL, old, "put: old value");
        expect_same(stripped, stored, "put: new value");
        json_t *got = kop_store_get_key(s, key);
        expect_same(stripped, got, "get after put");
        json_decref(got);
        if (e) {
            json_decref(e->value);
            e->value = json_incref(stripped);
        } else {
            char *k = m->n < MODEL_MAX ? strdup(key) : NULL;
            if (k) {
                m->e[m->n].key = k;
                m->e[m->n++].value = json_incref(stripped);
            } else {
                m->partial = true;
            }
        }
    } else if (e) {
        model_remove(m, e); /* on failure the old entry is gone */
    }
    json_decref(old);
    json_decref(stored);
    json_decref(stripped);
}

/* Arbitrary JSON from the input, wrapped as an object's spec. */
static void store_json(struct kop_store *s, const uint8_t *data, size_t size)
{
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v)
        return;
    json_t *o =
        json_pack("{s:{s:s, s:s}, s:O}", "metadata", "name", "n", "namespace", "ns", "spec", v);
    json_t *want = o ? json_deep_copy(o) : NULL;
    if (!want) {
        json_decref(o);
        json_decref(v);
        return;
    }
    int rc = kop_store_put(s, "Raw", o, NULL, NULL);
    CHECK(rc == 0 || rc == -ENOMEM, "put of a JSON value returned %d", rc);
    if (rc == 0) {
        json_t *got = kop_store_get(s, "Raw", "ns", "n");
        expect_same(want, got, "JSON round trip");
        json_decref(got);
        rc = kop_store_delete(s, "Raw", "ns", "n", NULL);
        CHECK(rc == 0, "delete of the JSON value returned %d", rc);
    }
    /* an object given whole, when the input is one with a name */
    if (json_is_object(v) && json_is_string(kop_json_path(v, "metadata.name")) &&
        json_string_length(kop_json_path(v, "metadata.name")) > 0) {
        json_t *stripped = kop_store_strip(v);
        rc = kop_store_put(s, "Whole", json_incref(v), NULL, NULL);
        if (rc == 0 && stripped) {
            const char *name = kop_json_path_str(v, "metadata.name");
            const char *ns = kop_json_path_str(v, "metadata.namespace");
            json_t *got = kop_store_get(s, "Whole", ns, name);
            expect_same(stripped, got, "whole object round trip");
            json_decref(got);
        }
        json_decref(stripped);
    }
    json_decref(want);
    json_decref(v);
}

void kop_fuzz_store(const uint8_t *data, size_t size)
{
    struct kop_metrics *reg = kop_metrics_new(false);
    struct kop_store *s = NULL;
    struct model m = {.n = 0, .partial = false};
    if (!reg || kop_store_new(reg, "kop_store", &s) < 0)
        goto out;
    if (size > 0 && data[0] == '{') {
        store_json(s, data, size);
        goto out;
    }
    struct reader r = {data, size};
    for (int op = 0; op < 64 && r.n > 0; op++) {
        unsigned c = rd_byte(&r);
        const char *kind = kinds[(c >> 2) % 4];
        char *ns = rd_str(&r, 6, false);
        char *name = rd_str(&r, 6, true);
        char *key = ns && name ? model_key(kind, ns, name) : NULL;
        if (!key) {
            free(ns);
            free(name);
            break;
        }
        struct model_entry *e = model_find(&m, key);
        switch (c % 4) {
        case 0:
        case 1: {
            json_t *o = gen_object(&r, ns, name);
            if (o)
                store_put(s, &m, kind, o, key);
            break;
        }
        case 2: {
            json_t *got = kop_store_get(s, kind, ns, name);
            if (e || !m.partial)
                expect_same(e ? e->value : NULL, got, "get");
            CHECK(kop_store_exists(s, kind, ns, name) == (got != NULL), "exists disagrees");
            if (got) {
                char rv[64];
                int rc = kop_store_resource_version(s, kind, ns, name, rv, sizeof(rv));
                const char *want = kop_json_path_str(got, "metadata.resourceVersion");
                CHECK(rc == 0 && strcmp(rv, want ? want : "") == 0, "resourceVersion %d", rc);
            }
            json_decref(got);
            break;
        }
        default: {
            json_t *old = NULL;
            int rc = kop_store_delete(s, kind, ns, name, &old);
            CHECK(rc == 0 || rc == -ENOENT || rc == -ENOMEM, "delete returned %d", rc);
            if (e || !m.partial)
                CHECK((rc == -ENOENT) == (e == NULL), "delete: %d, model has %d", rc, e != NULL);
            if (rc == 0 && e)
                expect_same(e->value, old, "delete: old value");
            if (e)
                model_remove(&m, e);
            json_decref(old);
            break;
        }
        }
        free(key);
        free(ns);
        free(name);
    }
    if (!m.partial)
        CHECK(kop_store_count(s) == m.n, "count %zu, model %zu", kop_store_count(s), m.n);
    for (size_t i = 0; i < m.n; i++) {
        json_t *got = kop_store_get_key(s, m.e[i].key);
        expect_same(m.e[i].value, got, "final get");
        json_decref(got);
    }
    json_t *all = kop_store_list(s, NULL, NULL);
    CHECK(json_array_size(all) == kop_store_count(s), "list has %zu items, count %zu",
          json_array_size(all), kop_store_count(s));
    json_decref(all);
out:
    while (m.n)
        model_remove(&m, &m.e[m.n - 1]);
    kop_store_free(s);
    kop_metrics_free(reg);
}

/* ---- 8. config flags -------------------------------------------------------- */

#define ARGS_MAX 32

void kop_fuzz_config(const uint8_t *data, size_t size)
{
    char *copy = malloc(size + 1);
    if (!copy)
        return;
    memcpy(copy, data, size);
    copy[size] = '\0';
    char *argv[ARGS_MAX + 2], *envp[ARGS_MAX + 1];
    int argc = 0, envc = 0;
    static char prog[] = "kop";
    argv[argc++] = prog;
    /* NUL-separated pieces; KOP_X=y pieces go to the environment */
    for (char *p = copy; p < copy + size && argc + envc < ARGS_MAX;) {
        size_t n = strlen(p);
        if (strncmp(p, "KOP_", 4) == 0 && strchr(p, '='))
            envp[envc++] = p;
        else
            argv[argc++] = p;
        p += n + 1;
    }
    argv[argc] = NULL;
    envp[envc] = NULL;
    struct kop_config cfg;
    kop_config_defaults(&cfg);
    int rc = kop_config_parse(&cfg, argc, argv, envp, null_stream(), null_stream());
    CHECK(rc == KOP_CONFIG_OK || rc == KOP_CONFIG_EXIT || rc == -EINVAL, "parse returned %d", rc);
    if (rc == KOP_CONFIG_OK) {
        CHECK(cfg.webhook_port >= 0 && cfg.webhook_port <= 65535, "webhook port %d",
              cfg.webhook_port);
        CHECK(cfg.metrics_bind.port >= 0 && cfg.metrics_bind.port <= 65535, "metrics port %d",
              cfg.metrics_bind.port);
        CHECK(cfg.health_bind.port >= 0 && cfg.health_bind.port <= 65535, "health port %d",
              cfg.health_bind.port);
        if (cfg.allowed_registries)
            CHECK(cfg.allowed_registries[cfg.n_allowed_registries] == NULL,
                  "allowed registries not NULL-terminated");
        /* The cross-flag rules: no accepted config breaks one. */
        CHECK(!(cfg.webhook_only && cfg.controller_only),
              "accepted --webhook-only with --controller-only");
        CHECK(!(cfg.self_signed_certs && cfg.controller_only),
              "accepted --self-signed-certs with --controller-only");
    }
    kop_config_cleanup(&cfg);
    free(copy);
}

/* ---- the table -------------------------------------------------------------- */

/* ---- 9. jscan -------------------------------------------------------------- */

/* A NUL-terminated copy of p[0..n) (p need not be terminated: strndup
 * would read past it under strict string checks). */
static char *copy_n(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

/* The scanner against jansson: same verdict (but for the NUL that jansson
 * drops after a number or literal, see tests/test_jscan.c), and every
 * member span of an object root decodes to the member jansson sees. */
void kop_fuzz_jscan(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data;
    struct kop_jscan *s = kop_jscan_new();
    if (!s)
        return;
    int rc = kop_jscan_value(s, p, size, 0, KOP_JSCAN_MEMBERS);
    json_t *root = json_loadb(p, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    bool want = root && memchr(p, '\0', size) == NULL;
    CHECK(rc != -ENOMEM, "jscan out of memory");
    CHECK((rc == 0) == want, "jscan %s what jansson %s (%s)", rc == 0 ? "accepts" : "rejects",
          want ? "accepts" : "rejects", kop_jscan_error(s, NULL));
    if (rc == 0 && json_is_object(root)) {
        size_t n;
        const struct kop_jscan_member *m = kop_jscan_members(s, &n);
        for (size_t i = 0; i < n; i++) {
            const json_t *parent = root;
            if (m[i].level == 2) {
                char *pk = copy_n(m[m[i].parent].key, m[m[i].parent].key_len);
                parent = pk ? json_object_get(root, pk) : NULL;
                free(pk);
            }
            char *k = copy_n(m[i].key, m[i].key_len);
            json_t *v = json_loadb(p + m[i].val_off, m[i].val_len, JSON_DECODE_ANY, NULL);
            CHECK(k && v && json_equal(v, json_object_get(parent, k)),
                  "member %zu (%s) span does not decode to its value", i, k ? k : "?");
            free(k);
            json_decref(v);
        }
    }
    json_decref(root);
    kop_jscan_free(s);
}

const struct kop_fuzz_target kop_fuzz_targets[] = {
    {"conversion_review", kop_fuzz_conversion_review, 16384},
    {"admission_review", kop_fuzz_admission_review, 16384},
    {"conversion", kop_fuzz_conversion, 8192},
    {"imageref", kop_fuzz_imageref, 512},
    {"watch", kop_fuzz_watch, 16384},
    {"kubeconfig", kop_fuzz_kubeconfig, 8192},
    {"store", kop_fuzz_store, 4096},
    {"config", kop_fuzz_config, 1024},
    {"jscan", kop_fuzz_jscan, 4096},
    {NULL, NULL, 0},
};
