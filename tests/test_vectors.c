/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Real payloads (tests/data/vectors, see SOURCES.md there) through the
 * review entry points: each gets the answer the kube-apiserver would
 * accept, or the documented error, and the apiserver's own acceptance
 * rules (transcribed test cases) are run against kop's checker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/json.h"
#include "kop/convstream.h"
#include "kop/review.h"
#include "testutil.h"

#define CT "application/json"

static char *vector_path(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "vectors/%s", name);
    return kop_test_data_path(rel);
}

static char *read_vector(const char *name, size_t *ret_len)
{
    char *path = vector_path(name);
    char *s = kop_test_read_file(path, ret_len);
    ck_assert_msg(s != NULL, "cannot read %s", path);
    free(path);
    return s;
}

static json_t *load_vector(const char *name)
{
    char *path = vector_path(name);
    json_error_t err;
    json_t *v = json_load_file(path, 0, &err);
    ck_assert_msg(v != NULL, "%s: %s", path, err.text);
    free(path);
    return v;
}

static json_t *parse(const char *s)
{
    json_t *v = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(v);
    return v;
}

static void docs_conversion(const char *file, const char *version)
{
    size_t len;
    char *body = read_vector(file, &len);
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, len, NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 200);
    json_t *reply = parse(r.body);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), version);
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"),
                     "705ab4f5-6393-11e8-b7cc-42010a800002");
    ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Failure");
    ck_assert_ptr_nonnull(
        strstr(kop_json_path_str(reply, "response.result.message"), "\"example.com/v1\""));
    ck_assert_ptr_null(kop_json_path(reply, "response.convertedObjects"));
    json_t *req = parse(body);
    char msg[256];
    ck_assert_int_eq(kop_review_check_conversion(req, reply, true, NULL, msg, sizeof(msg)),
                     KOP_CONVERSION_CHECK_FAILED);
    /* the apiserver shows our message */
    ck_assert_ptr_nonnull(strstr(msg, "unsupported desiredAPIVersion"));
    /* same top-level shape as the docs' failure response */
    json_t *docs = load_vector("k8s-docs-conversionreview-v1-response-failed.json");
    const char *key;
    json_t *v;
    json_object_foreach(docs, key, v) ck_assert_ptr_nonnull(json_object_get(reply, key));
    json_object_foreach(json_object_get(docs, "response"), key, v)
        ck_assert_ptr_nonnull(json_object_get(json_object_get(reply, "response"), key));
    json_decref(docs);
    json_decref(req);
    json_decref(reply);
    kop_review_result_cleanup(&r);
    free(body);
}

START_TEST(test_vectors_docs_conversion_requests_other_kind)
{
    docs_conversion("k8s-docs-conversionreview-v1-request-two-objects.json",
                    "apiextensions.k8s.io/v1");
    docs_conversion("k8s-docs-conversionreview-v1beta1-request-two-objects.json",
                    "apiextensions.k8s.io/v1beta1");
}
END_TEST

START_TEST(test_vectors_docs_success_response_shape)
{
    /* The docs' request, retargeted at MyResource, gives a reply with the
     * same shape as the docs' success response. */
    json_t *req = load_vector("k8s-docs-conversionreview-v1-request-two-objects.json");
    json_t *objs = kop_json_path(req, "request.objects");
    size_t i;
    json_t *o;
    json_object_set_new(json_object_get(req, "request"), "desiredAPIVersion",
                        json_string("mygroup.example.com/v2"));
    json_array_foreach(objs, i, o)
    {
        json_object_set_new(o, "kind", json_string("MyResource"));
        json_object_set_new(o, "apiVersion", json_string("mygroup.example.com/v1"));
    }
    char *body = NULL;
    size_t len = 0;
    ck_assert_int_eq(kop_json_dump(req, JSON_COMPACT, &body, &len), 0);
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, len, NULL, &r), 0);
    json_t *reply = parse(r.body);
    json_t *docs = load_vector("k8s-docs-conversionreview-v1-response-success.json");
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"),
                     kop_json_path_str(docs, "response.uid"));
    ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Success");
    json_t *got = kop_json_path(reply, "response.convertedObjects");
    json_t *want = kop_json_path(docs, "response.convertedObjects");
    ck_assert_uint_eq(json_array_size(got), json_array_size(want));
    json_array_foreach(want, i, o)
    {
        json_t *g = json_array_get(got, i);
        /* metadata unchanged, unknown top-level field carried over */
        ck_assert(json_equal(json_object_get(o, "metadata"), json_object_get(g, "metadata")));
        ck_assert_ptr_nonnull(json_object_get(g, "hostPort"));
    }
    ck_assert_int_eq(kop_review_check_conversion(req, reply, true, NULL, NULL, 0),
                     KOP_CONVERSION_CHECK_OK);
    json_decref(docs);
    json_decref(reply);
    json_decref(req);
    kop_review_result_cleanup(&r);
    free(body);
}
END_TEST

START_TEST(test_vectors_agnhost_yaml_is_400)
{
    size_t len;
    char *body = read_vector("k8s-agnhost-conversionreview-v1-request.yaml", &len);
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http(CT, body, len, NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "json parse error"));
    json_decref(parse(r.body));
    kop_review_result_cleanup(&r);
    /* and as application/yaml: 415 */
    ck_assert_int_eq(kop_convstream_convert_http("application/yaml", body, len, NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 415);
    kop_review_result_cleanup(&r);
    free(body);
}
END_TEST

static json_t *admit(const char *body, size_t len, const char *version, const char *uid)
{
    struct kop_review_result r;
    ck_assert_int_eq(kop_review_admit_http(CT, body, len, NULL, &r), 0);
    ck_assert_int_eq(r.http_status, 200);
    json_t *reply = parse(r.body);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), version);
    ck_assert_str_eq(kop_json_path_str(reply, "kind"), "AdmissionReview");
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), uid);
    kop_review_result_cleanup(&r);
    return reply;
}

START_TEST(test_vectors_other_kinds_allowed)
{
    size_t len;
    char *body = read_vector("kube-rs-admissionreview-v1-create-pod-gke.json", &len);
    json_t *reply = admit(body, len, "admission.k8s.io/v1", "0c9a8d74-9cb7-44dd-b98e-09fd62def2f4");
    ck_assert(json_is_true(kop_json_path(reply, "response.allowed")));
    json_decref(reply);
    free(body);

    body = read_vector("k8s-docs-v1beta1-admissionreview-request-scale-subresource.json", &len);
    reply = admit(body, len, "admission.k8s.io/v1beta1", "705ab4f5-6393-11e8-b7cc-42010a800002");
    ck_assert(json_is_true(kop_json_path(reply, "response.allowed")));
    json_decref(reply);
    free(body);

    /* the body inside the Go source of the openyurt test */
    body = read_vector("openyurt-apiserver-admission-http-request-headers.go.txt", &len);
    char *start = strchr(body, '`');
    ck_assert_ptr_nonnull(start);
    char *end = strchr(start + 1, '`');
    ck_assert_ptr_nonnull(end);
    reply = admit(start + 1, (size_t)(end - start - 1), "admission.k8s.io/v1",
                  "4378f340-83a6-4c8c-88bc-9b8788db02d2");
    ck_assert(json_is_true(kop_json_path(reply, "response.allowed")));
    json_decref(reply);
    free(body);
}
END_TEST

START_TEST(test_vectors_denial_shape_matches_docs)
{
    json_t *docs =
        load_vector("k8s-docs-v1beta1-admissionreview-response-deny-with-status-403.json");
    const char *body = "{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"kind\":\"AdmissionReview\","
                       "\"request\":{\"uid\":\"d\",\"kind\":{\"group\":\"mygroup.example.com\","
                       "\"version\":\"v2\",\"kind\":\"MyResource\"},\"operation\":\"CREATE\","
                       "\"object\":{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":"
                       "\"MyResource\",\"metadata\":{\"name\":\"X\"}}}}";
    json_t *reply = admit(body, strlen(body), "admission.k8s.io/v1beta1", "d");
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(docs, "response"), key, v)
        ck_assert_ptr_nonnull(json_object_get(json_object_get(reply, "response"), key));
    ck_assert(json_equal(kop_json_path(docs, "response.status.code"),
                         kop_json_path(reply, "response.status.code")));
    json_decref(reply);
    json_decref(docs);
}
END_TEST

START_TEST(test_vectors_controller_runtime_edge_cases)
{
    json_t *doc = load_vector("controller-runtime-admission-http-edge-cases.json");
    size_t i;
    json_t *c;
    int checked = 0;
    json_array_foreach(json_object_get(doc, "cases"), i, c)
    {
        const json_t *body = json_object_get(c, "body");
        if (!json_is_string(body))
            continue; /* the endless body: the HTTP layer's 413 */
        const char *ct = json_string_value(json_object_get(c, "content_type"));
        const char *expected = json_string_value(json_object_get(c, "expected"));
        struct kop_review_result r;
        ck_assert_int_eq(
            kop_review_admit_http(ct, json_string_value(body), json_string_length(body), NULL, &r),
            0);
        json_t *want = parse(expected), *got = parse(r.body);
        long code = (long)json_integer_value(kop_json_path(want, "response.status.code"));
        if (code == 200) {
            /* byte for byte what controller-runtime writes */
            ck_assert_str_eq(r.body, expected);
            ck_assert_int_eq(r.http_status, 200);
        } else {
            /* same message; our real HTTP status (415 for a wrong type) */
            long ours = ct && strcmp(ct, CT) != 0 ? 415 : code;
            ck_assert_int_eq(r.http_status, ours);
            ck_assert_str_eq(kop_json_path_str(got, "response.status.message"),
                             kop_json_path_str(want, "response.status.message"));
            ck_assert_int_eq(json_integer_value(kop_json_path(got, "response.status.code")), ours);
            ck_assert(json_is_false(kop_json_path(got, "response.allowed")));
            ck_assert_str_eq(kop_json_path_str(got, "response.uid"), "");
        }
        checked++;
        json_decref(want);
        json_decref(got);
        kop_review_result_cleanup(&r);
    }
    ck_assert_int_eq(checked, 7);
    json_decref(doc);
}
END_TEST

START_TEST(test_vectors_apiserver_response_validation_oracle)
{
    json_t *doc = load_vector("k8s-apiextensions-conversion-response-validation-cases.json");
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "cases"), i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        bool beta = strstr(name, "v1beta1") != NULL;
        json_t *reply = json_object_get(c, "response");
        size_t n = json_array_size(kop_json_path(reply, "response.convertedObjects"));
        json_t *objs = json_array();
        for (size_t k = 0; k < n; k++)
            json_array_append_new(objs, json_pack("{s:s, s:s, s:{s:s}}", "apiVersion", "foo/v0",
                                                  "kind", "Widget", "metadata", "name", "myv1"));
        json_t *req = json_pack("{s:s, s:s, s:{s:s, s:s, s:o}}", "apiVersion",
                                beta ? "apiextensions.k8s.io/v1beta1" : "apiextensions.k8s.io/v1",
                                "kind", "ConversionReview", "request", "uid",
                                json_string_value(json_object_get(c, "expected_request_uid"))
                                    ? json_string_value(json_object_get(c, "expected_request_uid"))
                                    : "",
                                "desiredAPIVersion", "foo/v1", "objects", objs);
        char msg[256] = "";
        enum kop_conversion_check r =
            kop_review_check_conversion(req, reply, false, NULL, msg, sizeof(msg));
        const char *err = json_string_value(json_object_get(c, "expect_err"));
        if (err) {
            ck_assert_msg(r != KOP_CONVERSION_CHECK_OK, "%s: accepted", name);
            ck_assert_msg(strstr(msg, err) != NULL, "%s: <%s> not in <%s>", name, err, msg);
        } else {
            ck_assert_msg(r == KOP_CONVERSION_CHECK_OK, "%s: %s", name, msg);
        }
        json_decref(req);
    }
    json_decref(doc);
}
END_TEST

START_TEST(test_vectors_restore_object_meta_oracle)
{
    json_t *doc = load_vector("k8s-apiextensions-restore-object-meta-cases.json");
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(doc, "cases"), i, c)
    {
        json_t *conv = json_object_get(c, "converted");
        json_t *built = NULL;
        if (!conv) {
            /* 262145 'x' characters, described rather than stored */
            char *big = malloc(262146);
            ck_assert_ptr_nonnull(big);
            memset(big, 'x', 262145);
            big[262145] = '\0';
            built = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", "foo", big);
            free(big);
            conv = built;
        }
        char msg[256];
        int rc =
            kop_review_check_object_meta(json_object_get(c, "original"), conv, msg, sizeof(msg));
        bool want_err = json_is_true(json_object_get(c, "expect_error"));
        ck_assert_msg((rc < 0) == want_err, "%s: rc %d",
                      json_string_value(json_object_get(c, "name")), rc);
        json_decref(built);
        n++;
    }
    ck_assert_int_eq(n, 9);
    json_decref(doc);
}
END_TEST

static Suite *vectors_suite(void)
{
    Suite *s = suite_create("vectors");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_vectors_docs_conversion_requests_other_kind);
    tcase_add_test(tc, test_vectors_docs_success_response_shape);
    tcase_add_test(tc, test_vectors_agnhost_yaml_is_400);
    tcase_add_test(tc, test_vectors_other_kinds_allowed);
    tcase_add_test(tc, test_vectors_denial_shape_matches_docs);
    tcase_add_test(tc, test_vectors_controller_runtime_edge_cases);
    tcase_add_test(tc, test_vectors_apiserver_response_validation_oracle);
    tcase_add_test(tc, test_vectors_restore_object_meta_oracle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(vectors_suite());
}
