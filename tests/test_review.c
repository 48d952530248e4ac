/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the ConversionReview and AdmissionReview envelopes: versions,
 * uid echo, count and order, mixed versions, Failure answers, HTTP status
 * codes and JSON error bodies, a 10,000-object review, and every reply
 * run through the apiserver-rule check.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/arena.h"
#include "kop/json.h"
#include "kop/metrics.h"
#include "kop/myresource.h"
#include "kop/convstream.h"
#include "kop/review.h"
#include "testutil.h"

#define CT "application/json"

static json_t *parse(const char *s)
{
    json_error_t err;
    json_t *v = json_loads(s, 0, &err);
    ck_assert_msg(v != NULL, "not JSON: %s: %s", err.text, s);
    return v;
}

/* Convert, check HTTP 200, check the reply with the apiserver's rules. */
static json_t *convert_ok(const char *body, enum kop_conversion_check want)
{
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, strlen(body), NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 200);
    ck_assert_uint_eq(r.body_len, strlen(r.body));
    ck_assert(r.body[r.body_len - 1] == '\n');
    json_t *reply = parse(r.body);
    json_t *req = parse(body);
    char msg[256];
    unsigned viol = 99;
    enum kop_conversion_check c =
        kop_review_check_conversion(req, reply, true, &viol, msg, sizeof(msg));
    ck_assert_msg(c == want, "check %d: %s", c, msg);
    ck_assert_uint_eq(viol, 0);
    ck_assert_int_eq(r.success, want == KOP_CONVERSION_CHECK_OK);
    json_decref(req);
    kop_review_result_cleanup(&r);
    return reply;
}

#define OBJ(ver, name, spec)                                                                       \
    "{\"apiVersion\":\"mygroup.example.com/" ver "\",\"kind\":\"MyResource\",\"metadata\":{"       \
    "\"name\":\"" name "\",\"namespace\":\"default\",\"uid\":\"uid-" name "\"},\"spec\":" spec "}"

START_TEST(test_review_conversion_v1_mixed_versions)
{
    static const char obj_a[] = OBJ("v1", "a", "{\"image\":\"nginx:1\",\"port\":81}");
    static const char obj_b[] = OBJ("v2", "b", "{\"paused\":true}");
    static const char obj_c[] = OBJ("v1", "c", "{}");
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
             "\"request\":{\"uid\":\"r-1\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
             "\"objects\":[%s,%s,%s]},\"response\":{}}",
             obj_a, obj_b, obj_c);
    json_t *reply = convert_ok(body, KOP_CONVERSION_CHECK_OK);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), "apiextensions.k8s.io/v1");
    ck_assert_str_eq(kop_json_path_str(reply, "kind"), "ConversionReview");
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "r-1");
    ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Success");
    json_t *objs = kop_json_path(reply, "response.convertedObjects");
    ck_assert_uint_eq(json_array_size(objs), 3);
    const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) {
        json_t *o = json_array_get(objs, i);
        ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), KOP_MYRESOURCE_V2);
        ck_assert_str_eq(kop_json_path_str(o, "metadata.name"), names[i]);
    }
    /* the v2 object came back unchanged */
    json_t *b = parse(OBJ("v2", "b", "{\"paused\":true}"));
    ck_assert(json_equal(b, json_array_get(objs, 1)));
    json_decref(b);
    ck_assert_str_eq(kop_json_path_str(json_array_get(objs, 0), "spec.image.tag"), "1");
    ck_assert(!json_object_get(json_object_get(reply, "response"), "request"));
    json_decref(reply);
}
END_TEST

START_TEST(test_review_conversion_v1beta1_envelope)
{
    const char *body =
        "{\"apiVersion\":\"apiextensions.k8s.io/v1beta1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"r-2\",\"desiredAPIVersion\":\"mygroup.example.com/v1\","
        "\"objects\":[" OBJ("v2", "a", "{\"ports\":[{\"name\":\"web\",\"port\":8080}]}") "]}}";
    json_t *reply = convert_ok(body, KOP_CONVERSION_CHECK_OK);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), "apiextensions.k8s.io/v1beta1");
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "r-2");
    json_t *o = json_array_get(kop_json_path(reply, "response.convertedObjects"), 0);
    ck_assert_int_eq(json_integer_value(kop_json_path(o, "spec.port")), 8080);
    ck_assert_ptr_nonnull(json_object_get(kop_json_path(o, "metadata.annotations"),
                                          KOP_MYRESOURCE_EXTRAS_ANNOTATION));
    json_decref(reply);
}
END_TEST

START_TEST(test_review_conversion_failures)
{
    /* unknown desired version */
    json_t *reply = convert_ok(
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
        "\"ConversionReview\",\"request\":{\"uid\":\"u\","
        "\"desiredAPIVersion\":\"mygroup.example.com/v3\",\"objects\":[" OBJ("v1", "a", "{}") "]}}",
        KOP_CONVERSION_CHECK_FAILED);
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "u");
    ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Failure");
    ck_assert_ptr_nonnull(
        strstr(kop_json_path_str(reply, "response.result.message"), "mygroup.example.com/v3"));
    ck_assert_ptr_null(kop_json_path(reply, "response.convertedObjects"));
    json_decref(reply);
    /* unknown kind in the list */
    reply =
        convert_ok("{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                   "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/v1\","
                   "\"objects\":[" OBJ("v2", "a", "{}") ",{\"apiVersion\":\"x/v1\",\"kind\":"
                                                        "\"Other\"},7]}}",
                   KOP_CONVERSION_CHECK_FAILED);
    ck_assert_ptr_nonnull(
        strstr(kop_json_path_str(reply, "response.result.message"), "objects[1]"));
    json_decref(reply);
}
END_TEST

static void http_error(const char *ct, const char *body, int status, const char *needle, bool admit)
{
    struct kop_review_result r;
    size_t len = body ? strlen(body) : 0;
    if (admit)
        ck_assert_int_eq(kop_review_admit_http(ct, body, len, NULL, &r), 0);
    else
        ck_assert_int_eq(kop_convstream_convert_http(ct, body, len, NULL, &r), 0);
    ck_assert_int_eq(r.http_status, status);
    json_t *reply = parse(r.body);
    const char *m = admit ? kop_json_path_str(reply, "response.status.message")
                          : kop_json_path_str(reply, "response.result.message");
    ck_assert_msg(m && strstr(m, needle), "<%s> not in %s", needle, r.body);
    ck_assert_int_eq(json_integer_value(kop_json_path(reply, admit ? "response.status.code"
                                                                   : "response.result.code")),
                     status);
    if (admit)
        ck_assert(json_is_false(kop_json_path(reply, "response.allowed")));
    else
        ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Failure");
    ck_assert(!r.success);
    json_decref(reply);
    kop_review_result_cleanup(&r);
}

START_TEST(test_review_http_errors)
{
    for (int admit = 0; admit < 2; admit++) {
        http_error(CT, "", 400, "request body is empty", admit);
        http_error(NULL, NULL, 400, "request body is empty", admit);
        http_error("application/foo", "", 415,
                   "contentType=application/foo, expected "
                   "application/json",
                   admit);
        http_error("text/plain", "{}", 415, "expected application/json", admit);
        http_error(NULL, "{}", 415, "expected application/json", admit);
        http_error(CT, "{", 400, "json parse error: unexpected end of JSON input", admit);
        http_error(CT, "[1]", 400, "json parse error", admit);
        http_error(CT, "kind: ConversionReview\n", 400, "json parse error", admit);
        http_error(CT, "{\"a\":1,\"a\":2}", 400, "json parse error", admit);
        http_error(CT, "{\"apiVersion\":\"x/v9\"}", 400, "unsupported review", admit);
        http_error(CT, "{\"kind\":\"Nope\"}", 400, "unsupported review", admit);
    }
    http_error(CT, "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\"}",
               400, "no request", false);
    /* an AdmissionReview without a request was allowed (uid "") */
    http_error(CT, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\"}", 400,
               "no request", true);
    http_error(CT,
               "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":null}",
               400, "request must be an object", true);
    /* a uid a typed decoder refuses was answered with uid "" (and for a
     * conversion a desiredAPIVersion that is no string, with a Failure) */
    http_error(CT,
               "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
               "\"request\":{\"uid\":7}}",
               400, "request.uid must be a string", true);
    http_error(CT,
               "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
               "\"request\":{\"uid\":[\"u\"],\"desiredAPIVersion\":\"mygroup.example.com/v2\","
               "\"objects\":[]}}",
               400, "request.uid must be a string", false);
    http_error(CT,
               "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
               "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":2,\"objects\":[]}}",
               400, "request.desiredAPIVersion must be a string", false);
    ck_assert(kop_review_content_type_ok("application/json"));
    ck_assert(kop_review_content_type_ok("Application/JSON; charset=utf-8"));
    ck_assert(kop_review_content_type_ok("application/json;charset=UTF-8"));
    ck_assert(!kop_review_content_type_ok("application/jsonx"));
    ck_assert(!kop_review_content_type_ok("application/yaml"));
    ck_assert(!kop_review_content_type_ok(NULL));

    struct kop_review_result r;
    const char *b = "{\"request\":{\"uid\":\"x\"}}";
    ck_assert_int_eq(
        kop_review_admit_http("application/json; charset=utf-8", b, strlen(b), NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 200);
    kop_review_result_cleanup(&r);
    kop_review_result_cleanup(NULL);
}
END_TEST

START_TEST(test_review_conversion_10000_objects)
{
    size_t n = 10000, cap = n * 300 + 1024, off = 0;
    char *body = malloc(cap);
    ck_assert_ptr_nonnull(body);
    off += (size_t)snprintf(body + off, cap - off,
                            "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":"
                            "\"ConversionReview\",\"request\":{\"uid\":\"big\","
                            "\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[");
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(body + off, cap - off,
                                "%s{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":"
                                "\"MyResource\",\"metadata\":{\"name\":\"o%zu\",\"namespace\":"
                                "\"ns\",\"uid\":\"u%zu\"},\"spec\":{\"replicas\":%zu,\"image\":"
                                "\"nginx:1.%zu\",\"port\":%zu}}",
                                i ? "," : "", i, i, i % 1000, i, 1 + i % 65535);
    snprintf(body + off, cap - off, "]}}");
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, strlen(body), NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 200);
    ck_assert(r.success);
    ck_assert_uint_eq(r.n_objects, n);
    ck_assert_uint_eq(r.violations, 0);
    json_t *reply = parse(r.body);
    json_t *objs = kop_json_path(reply, "response.convertedObjects");
    ck_assert_uint_eq(json_array_size(objs), n);
    for (size_t i = 0; i < n; i += 997) {
        char name[32];
        snprintf(name, sizeof(name), "o%zu", i);
        json_t *o = json_array_get(objs, i);
        ck_assert_str_eq(kop_json_path_str(o, "metadata.name"), name);
        ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), KOP_MYRESOURCE_V2);
    }
    json_decref(reply);
    kop_review_result_cleanup(&r);
    free(body);
}
END_TEST

#define ADM_FMT                                                                                    \
    "{\"apiVersion\":\"admission.k8s.io/%s\",\"kind\":\"AdmissionReview\","                        \
    "\"request\":{\"uid\":\"adm-1\",\"kind\":{\"group\":\"mygroup.example.com\","                  \
    "\"version\":\"v2\",\"kind\":\"MyResource\"},\"resource\":{\"group\":"                         \
    "\"mygroup.example.com\",\"version\":\"v2\",\"resource\":\"myresources\"},"                    \
    "\"operation\":\"CREATE\",\"namespace\":\"ns\",\"object\":%s}}"

/* A denial decided before the rules: the envelope's version and uid, the
 * code, reason and message given; a malformed review is still a 400. */
START_TEST(test_review_admission_deny)
{
    const char *versions[] = {"v1", "v1beta1"};
    for (int i = 0; i < 2; i++) {
        char body[2048];
        snprintf(body, sizeof(body), ADM_FMT, versions[i],
                 "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                 "\"metadata\":{\"name\":\"ok\"},\"spec\":{\"image\":\"nginx\"}}");
        struct kop_review_result r;
        ck_assert_int_eq(kop_review_deny_http(CT, body, strlen(body), 404, "NotFound",
                                              "cluster \"x\" is not known", &r),
                         0);
        ck_assert_int_eq(r.http_status, 200);
        json_t *reply = parse(r.body);
        char want[64];
        snprintf(want, sizeof(want), "admission.k8s.io/%s", versions[i]);
        ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), want);
        ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "adm-1");
        ck_assert(json_is_false(kop_json_path(reply, "response.allowed")));
        ck_assert_int_eq(json_integer_value(kop_json_path(reply, "response.status.code")), 404);
        ck_assert_str_eq(kop_json_path_str(reply, "response.status.reason"), "NotFound");
        ck_assert_str_eq(kop_json_path_str(reply, "response.status.message"),
                         "cluster \"x\" is not known");
        ck_assert(!r.success);
        ck_assert_str_eq(r.message, "cluster \"x\" is not known");
        json_decref(reply);
        kop_review_result_cleanup(&r);
    }
    struct kop_review_result r;
    ck_assert_int_eq(kop_review_deny_http(CT, "{\"x\":", 5, 404, NULL, "m", &r), 0);
    ck_assert_int_eq(r.http_status, 400);
    kop_review_result_cleanup(&r);
}
END_TEST

START_TEST(test_review_admission_envelopes)
{
    const char *versions[] = {"v1", "v1beta1"};
    for (int i = 0; i < 2; i++) {
        char body[2048];
        snprintf(body, sizeof(body), ADM_FMT, versions[i], OBJ("v2", "Bad", "{\"replicas\":5000}"));
        struct kop_review_result r;
        ck_assert_int_eq(kop_review_admit_http(CT, body, strlen(body), NULL, &r), 0);
        ck_assert_int_eq(r.http_status, 200);
        json_t *reply = parse(r.body);
        char want[64];
        snprintf(want, sizeof(want), "admission.k8s.io/%s", versions[i]);
        ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), want);
        ck_assert_str_eq(kop_json_path_str(reply, "kind"), "AdmissionReview");
        ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "adm-1");
        ck_assert(json_is_false(kop_json_path(reply, "response.allowed")));
        ck_assert_int_eq(json_integer_value(kop_json_path(reply, "response.status.code")), 403);
        ck_assert_str_eq(kop_json_path_str(reply, "response.status.reason"), "Forbidden");
        ck_assert_ptr_nonnull(strstr(kop_json_path_str(reply, "response.status.message"),
                                     "spec.replicas: Invalid value: 5000"));
        ck_assert_ptr_null(kop_json_path(reply, "response.patch"));
        ck_assert_str_eq(r.uid, "adm-1");
        ck_assert(!r.success);
        ck_assert_uint_eq(r.violations, 2);
        json_decref(reply);
        kop_review_result_cleanup(&r);

        snprintf(body, sizeof(body), ADM_FMT, versions[i],
                 "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                 "\"metadata\":{\"name\":\"ok\"},\"spec\":{\"image\":\"nginx\"}}");
        ck_assert_int_eq(kop_review_admit_http(CT, body, strlen(body), NULL, &r), 0);
        reply = parse(r.body);
        ck_assert(json_is_true(kop_json_path(reply, "response.allowed")));
        ck_assert_int_eq(json_integer_value(kop_json_path(reply, "response.status.code")), 200);
        json_t *w = kop_json_path(reply, "response.warnings");
        ck_assert_uint_eq(json_array_size(w), 2);
        ck_assert_uint_eq(r.n_warnings, 2);
        ck_assert(r.success);
        json_decref(reply);
        kop_review_result_cleanup(&r);
    }
}
END_TEST

START_TEST(test_review_self_check_catches_bad_replies)
{
    json_t *req =
        parse("{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
              "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
              "\"objects\":[" OBJ("v1", "a", "{}") "]}}");
    const char *bad[] = {
        /* wrong count */
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"response\":{"
        "\"uid\":\"u\",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[]}}",
        /* wrong apiVersion of the object */
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"response\":{"
        "\"uid\":\"u\",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[" OBJ("v1", "a",
                                                                                       "{}") "]}}",
        /* changed name */
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"response\":{"
        "\"uid\":\"u\",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[" OBJ("v2", "b",
                                                                                       "{}") "]}}",
        /* uid not echoed */
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"response\":{"
        "\"uid\":\"x\",\"result\":{\"status\":\"Success\"},\"convertedObjects\":[" OBJ("v2", "a",
                                                                                       "{}") "]}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *reply = parse(bad[i]);
        unsigned v = 0;
        char msg[256];
        ck_assert_int_eq(kop_review_check_conversion(req, reply, true, &v, msg, sizeof(msg)),
                         KOP_CONVERSION_CHECK_INVALID);
        ck_assert_uint_gt(v, 0);
        json_decref(reply);
    }
    json_decref(req);
}
END_TEST

START_TEST(test_review_with_arena_bound)
{
    kop_arena_json_install();
    struct kop_arena *a = kop_arena_new(64 * 1024);
    ck_assert_ptr_nonnull(a);
    char body[2048];
    snprintf(body, sizeof(body),
             "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
             "\"request\":{\"uid\":\"ar\",\"desiredAPIVersion\":\"mygroup.example.com/v1\","
             "\"objects\":[%s]}}",
             OBJ("v2", "a", "{\"paused\":true,\"image\":{\"repository\":\"a:b\"}}"));
    struct kop_review_result r;
    struct kop_arena *prev = kop_arena_json_bind(a);
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, strlen(body), NULL, &r), 0);
    kop_arena_json_bind(prev);
    kop_arena_free(a);
    /* the body outlives the arena */
    ck_assert_int_eq(r.http_status, 200);
    ck_assert(r.success);
    json_t *reply = parse(r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "v2-extras"));
    json_decref(reply);
    kop_review_result_cleanup(&r);
}
END_TEST

/* Mangled bodies (truncated, bytes flipped, types swapped) never crash or
 * leak, and always get a JSON answer with a known status. */
START_TEST(test_review_mangled_bodies)
{
    const char *seeds[] = {
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{"
        "\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[" OBJ(
            "v1", "a", "{\"image\":\"nginx:1\",\"port\":81,\"serviceType\":\"NodePort\"}") "]}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"kind\":{\"group\":\"mygroup.example.com\",\"version\":\"v1\",\"kind\":"
        "\"MyResource\"},\"operation\":\"UPDATE\",\"object\":" OBJ(
            "v1", "a",
            "{\"image\":\"nginx:1\",\"port\":81}") ",\"oldObject\":" OBJ("v2", "a",
                                                                         "{\"ports\":[]}") "}}",
    };
    static const char junk[] = "{}[]\":,0-9aZ\\ tnul";
    unsigned seed = 7;
    char buf[4096];
    for (int i = 0; i < 4000; i++) {
        const char *src = seeds[i % 2];
        size_t len = strlen(src);
        memcpy(buf, src, len);
        int edits = 1 + rand_r(&seed) % 4;
        for (int e = 0; e < edits && len > 0; e++) {
            size_t pos = (size_t)rand_r(&seed) % len;
            if (rand_r(&seed) % 5 == 0)
                len = pos;
            else
                buf[pos] = junk[rand_r(&seed) % (sizeof(junk) - 1)];
        }
        struct kop_review_result r;
        int rc = i % 2 ? kop_review_admit_http(CT, buf, len, NULL, &r)
                       : kop_convstream_convert_http(CT, buf, len, NULL, &r);
        ck_assert_int_eq(rc, 0);
        ck_assert(r.http_status == 200 || r.http_status == 400);
        json_t *reply = json_loads(r.body, 0, NULL);
        ck_assert_msg(json_is_object(reply), "not JSON: %s", r.body);
        json_decref(reply);
        kop_review_result_cleanup(&r);
    }
}
END_TEST

static enum kop_child_lookup never_synced(void *ud, const char *kind, const char *ns,
                                          const char *name, char *ret_uid, size_t uid_size)
{
    (void)ud;
    (void)kind;
    (void)ns;
    (void)name;
    (void)ret_uid;
    (void)uid_size;
    return KOP_CHILD_NOT_SYNCED;
}

/* A warning is cut at 120 bytes: never inside a character, or the reply
 * cannot be encoded and the verdict becomes a 500. */
START_TEST(test_review_admission_warning_cut_keeps_utf8)
{
    /* control characters are quoted as \x01 (four bytes each), so the
     * e-acutes (two bytes each) reach the 120-byte cut at either parity */
    char name[256];
    size_t off = 0;
    for (int i = 0; i < 10; i++)
        off += (size_t)snprintf(name + off, sizeof(name) - off, "\\u0001");
    for (int i = 0; i < 30; i++)
        off += (size_t)snprintf(name + off, sizeof(name) - off, "\xc3\xa9");
    for (int shift = 0; shift < 2; shift++) {
        char body[2048];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":"
                 "{\"uid\":\"w\",\"kind\":{\"group\":\"mygroup.example.com\",\"version\":\"v2\","
                 "\"kind\":\"MyResource\"},\"resource\":{\"group\":\"mygroup.example.com\","
                 "\"version\":\"v2\",\"resource\":\"myresources\"},\"operation\":\"CREATE\","
                 "\"namespace\":\"default\",\"name\":\"%s%s\",\"object\":{\"apiVersion\":"
                 "\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"
                 "\"%s%s\",\"namespace\":\"default\"},\"spec\":{}}}}",
                 shift ? "x" : "", name, shift ? "x" : "", name);
        struct kop_admission_options o = {.child_lookup = never_synced};
        struct kop_review_result r;
        ck_assert_int_eq(kop_review_admit_http(CT, body, strlen(body), &o, &r), 0);
        ck_assert_int_eq(r.http_status, 200);
        json_error_t e;
        json_t *reply = json_loadb(r.body, r.body_len, 0, &e);
        ck_assert_msg(reply != NULL, "reply is not valid JSON: %s", e.text);
        json_decref(reply);
        kop_review_result_cleanup(&r);
    }
}
END_TEST

/* AdmissionReviews cost at most KOP_REVIEW_MAX_TREE_BYTES as a tree: 3 M
 * numbers in a list and an object of 200,000 members get a 413 with the
 * reason, and
 * 32,000 ports (only the first KOP_REVIEW_MAX_DECODED_ITEMS decoded) are
 * denied for their number. */
START_TEST(test_review_admission_tree_is_bounded)
{
    const char *head = "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                       "\"request\":{\"uid\":\"h\",\"kind\":{\"group\":\"mygroup.example.com\","
                       "\"version\":\"v2\",\"kind\":\"MyResource\"},\"resource\":{\"group\":"
                       "\"mygroup.example.com\",\"version\":\"v2\",\"resource\":\"myresources\"},"
                       "\"operation\":\"CREATE\",\"namespace\":\"d\",\"name\":\"x\",\"object\":{"
                       "\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\","
                       "\"metadata\":{\"name\":\"x\",\"namespace\":\"d\"},\"spec\":{\"ports\":[";
    const char *tail = "]}}}}";
    size_t cap = 8u << 20;
    char *b = malloc(cap);
    for (int kind = 0; kind < 3; kind++) {
        size_t off = (size_t)snprintf(b, cap, "%s", head);
        size_t n = kind == 0 ? 3000000 : kind == 1 ? 200000 : 32000;
        for (size_t i = 0; i < n; i++) {
            if (kind == 0)
                off += (size_t)snprintf(b + off, cap - off, "%s0", i ? "," : "");
            else if (kind == 1) /* one item, an object of n members */
                off += (size_t)snprintf(b + off, cap - off, "%s\"k%zu\":{}", i ? "," : "{", i);
            else
                off += (size_t)snprintf(b + off, cap - off,
                                        "%s{\"name\":\"p%zu\",\"port\":%zu,\"protocol\":\"TCP\"}",
                                        i ? "," : "", i, 1 + i % 65535);
        }
        if (kind == 1)
            b[off++] = '}';
        off += (size_t)snprintf(b + off, cap - off, "%s", tail);
        struct kop_review_result r;
        ck_assert_int_eq(kop_review_admit_http(CT, b, off, NULL, &r), 0);
        if (kind < 2) {
            ck_assert_int_eq(r.http_status, 413);
            ck_assert_msg(strstr(r.message, "MiB of memory to decode") != NULL, "%s", r.message);
        } else {
            ck_assert_int_eq(r.http_status, 200);
            ck_assert(!r.success);
            ck_assert_msg(strstr(r.message, "Too many: 32000") != NULL, "%s", r.message);
        }
        kop_review_result_cleanup(&r);
    }
    free(b);
}
END_TEST

static Suite *review_suite(void)
{
    Suite *s = suite_create("review");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_review_conversion_v1_mixed_versions);
    tcase_add_test(tc, test_review_admission_deny);
    tcase_add_test(tc, test_review_conversion_v1beta1_envelope);
    tcase_add_test(tc, test_review_conversion_failures);
    tcase_add_test(tc, test_review_http_errors);
    tcase_add_test(tc, test_review_conversion_10000_objects);
    tcase_add_test(tc, test_review_admission_envelopes);
    tcase_add_test(tc, test_review_self_check_catches_bad_replies);
    tcase_add_test(tc, test_review_with_arena_bound);
    tcase_add_test(tc, test_review_mangled_bodies);
    tcase_add_test(tc, test_review_admission_warning_cut_keeps_utf8);
    tcase_add_test(tc, test_review_admission_tree_is_bounded);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(review_suite());
}
