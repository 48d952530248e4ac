/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/convstream.h: the streamed ConversionReview gives the same
 * reply whatever the pieces the body arrives in (every split point, 1-byte
 * chunks), converts every object exactly as the in-process converter does
 * on a whole tree, copies what conversion does not change byte for byte,
 * handles any member order, keeps every error answer, and holds no more
 * than its reply and one object.
 */
#include "kop/convstream.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/conversion.h"
#include "kop/json.h"
#include "kop/myresource.h"
#include "testutil.h"

#define CT "application/json"

static void convert_pieces(const char *body, size_t len, const size_t *cuts, size_t n_cuts,
                           struct kop_review_result *r)
{
    struct kop_convstream *cs;
    ck_assert_int_eq(kop_convstream_new(CT, NULL, &cs), 0);
    size_t off = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        ck_assert_int_eq(kop_convstream_feed(cs, body + off, end - off), 0);
        off = end;
    }
    ck_assert_int_eq(kop_convstream_finish(cs, r), 0);
    kop_convstream_free(cs);
}

static void convert(const char *body, struct kop_review_result *r)
{
    convert_pieces(body, strlen(body), NULL, 0, r);
}

static json_t *reply_of(const struct kop_review_result *r)
{
    json_error_t e;
    json_t *v = json_loadb(r->body, r->body_len, JSON_REJECT_DUPLICATES, &e);
    ck_assert_msg(v != NULL, "reply is not JSON: %s: %.300s", e.text, r->body);
    return v;
}

static const char *const mixed_review =
    "{ \"kind\" : \"ConversionReview\", \"apiVersion\":\"apiextensions.k8s.io/v1\",\n"
    "  \"request\": {\"uid\":\"u-\\u00e9-1\", \"desiredAPIVersion\": \"mygroup.example.com/v2\",\n"
    "   \"objects\": [\n"
    "    {\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"
    "\"a\",\"namespace\":\"ns\",\"uid\":\"1\",\"labels\":{\"app\":\"x\"},\"annotations\":{"
    "\"mygroup.example.com/v2-extras\":\"{\\\"paused\\\":true,\\\"ports\\\":[{\\\"name\\\":"
    "\\\"http\\\",\\\"protocol\\\":\\\"TCP\\\"},{\\\"name\\\":\\\"m\\\",\\\"port\\\":9,"
    "\\\"protocol\\\":"
    "\\\"UDP\\\"}]}\",\"other\":\"v\"}},\"spec\":{\"replicas\":2,\"image\":\"nginx:1.2\",\"port\":"
    "81,"
    "\"serviceType\":\"NodePort\",\"x-unknown\":[1,2.50,1e2]},\"status\":{\"replicas\":2,"
    "\"readyReplicas\":1,\"conditions\":[{\"type\":\"Available\",\"status\":\"True\"}]}},\n"
    "    {\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"
    "\"b\"},\"spec\":{\"image\":{\"repository\":\"r\"}}},\n"
    "    { \"kind\":\"MyResource\" , \"metadata\" : { \"name\" : \"c\\u0063\", "
    "\"annota\\u0074ions\" : "
    "{ \"k\" : \"v\\n\" } } , \"apiVersion\" : \"mygroup.example.com/v1\" , \"spec\" : { \"image\" "
    ": \"localhost:5000/app\" } }\n"
    "   ]},\n"
    "  \"response\": {\"uid\":\"ignored\", \"convertedObjects\":[{\"deep\":[[[]]]}]}\n"
    "}\n";

START_TEST(test_convstream_every_split_point)
{
    size_t len = strlen(mixed_review);
    struct kop_review_result whole, part;
    convert(mixed_review, &whole);
    ck_assert_int_eq(whole.http_status, 200);
    ck_assert_msg(whole.success, "%s", whole.message);
    for (size_t k = 0; k <= len; k++) {
        convert_pieces(mixed_review, len, &k, 1, &part);
        ck_assert_uint_eq(part.body_len, whole.body_len);
        ck_assert(memcmp(part.body, whole.body, whole.body_len) == 0);
        kop_review_result_cleanup(&part);
    }
    size_t *cuts = malloc(len * sizeof(*cuts));
    for (size_t k = 0; k < len; k++)
        cuts[k] = k + 1;
    convert_pieces(mixed_review, len, cuts, len - 1, &part);
    ck_assert(part.body_len == whole.body_len &&
              memcmp(part.body, whole.body, whole.body_len) == 0);
    kop_review_result_cleanup(&part);
    free(cuts);

    /* and the reply is what the apiserver wants */
    json_t *reply = reply_of(&whole);
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "u-\xc3\xa9-1");
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), "apiextensions.k8s.io/v1");
    ck_assert_str_eq(kop_json_path_str(reply, "kind"), "ConversionReview");
    ck_assert_str_eq(kop_json_path_str(reply, "response.result.status"), "Success");
    json_t *objs = kop_json_path(reply, "response.convertedObjects");
    ck_assert_uint_eq(json_array_size(objs), 3);
    /* the v2 object was already in the desired version: byte for byte */
    ck_assert(strstr(whole.body,
                     "{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\","
                     "\"metadata\":{\"name\":\"b\"},\"spec\":{\"image\":{"
                     "\"repository\":\"r\"}}}") != NULL);
    /* unknown members and number spellings copied as they came */
    ck_assert(strstr(whole.body, "\"x-unknown\":[1,2.50,1e2]") != NULL);
    json_decref(reply);
    kop_review_result_cleanup(&whole);
}
END_TEST

/* ---- equivalence with the whole-tree converter ------------------------------------ */

static uint64_t rng = 88172645463325252ULL;
static unsigned rnd(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static json_t *random_object(int i)
{
    static const char *const images[] = {"nginx",
                                         "nginx:1.14.2",
                                         "r.io:5000/a/b:1@sha256:"
                                         "0123456789abcdef0123456789abcdef"
                                         "0123456789abcdef0123456789abcdef",
                                         "localhost:5000/app",
                                         "UPPER/Case:tag",
                                         "",
                                         "a@b"};
    bool v2 = rnd(2);
    json_t *o =
        json_pack("{s:s, s:s, s:{s:s+, s:s, s:s}}", "apiVersion",
                  v2 ? KOP_MYRESOURCE_V2 : KOP_MYRESOURCE_V1, "kind", "MyResource", "metadata",
                  "name", "obj-", rnd(2) ? "x" : "y", "namespace", "default", "uid", "0000");
    json_t *meta = json_object_get(o, "metadata");
    json_object_set_new(meta, "resourceVersion", json_sprintf("%d", i));
    if (rnd(2))
        json_object_set_new(meta, "labels", json_pack("{s:s}", "app", "t"));
    switch (rnd(4)) {
    case 0:
        json_object_set_new(meta, "annotations", json_object());
        break;
    case 1:
        json_object_set_new(meta, "annotations", json_pack("{s:s}", "k", "v"));
        break;
    case 2:
        json_object_set_new(meta, "annotations",
                            json_pack("{s:s}", KOP_MYRESOURCE_EXTRAS_ANNOTATION,
                                      "{\"paused\":true,\"ports\":[{\"name\":\"web\"}]}"));
        break;
    default:
        break;
    }
    json_t *spec = json_object();
    if (rnd(3))
        json_object_set_new(spec, "replicas", json_integer(rnd(5)));
    if (!v2) {
        if (rnd(3))
            json_object_set_new(spec, "image", json_string(images[rnd(7)]));
        if (rnd(3))
            json_object_set_new(spec, "port", json_integer(1 + rnd(65535)));
        if (rnd(2))
            json_object_set_new(spec, "serviceType", json_string("NodePort"));
    } else {
        if (rnd(3))
            json_object_set_new(spec, "image",
                                rnd(2) ? json_pack("{s:s, s:s}", "repository", "nginx", "tag", "1")
                                       : json_pack("{s:s}", "repository", "Weird Repo"));
        if (rnd(3)) {
            json_t *ports = json_array();
            unsigned np = 1 + rnd(3);
            for (unsigned k = 0; k < np; k++)
                json_array_append_new(ports,
                                      json_pack("{s:s, s:i, s:s}", "name",
                                                k ? "extra" : (rnd(2) ? "http" : "web"), "port",
                                                80 + k, "protocol", rnd(3) ? "TCP" : "UDP"));
            json_object_set_new(spec, "ports", ports);
        }
        if (rnd(2))
            json_object_set_new(spec, "service",
                                rnd(2) ? json_pack("{s:s}", "type", "LoadBalancer")
                                       : json_pack("{s:s, s:b}", "type", "ClusterIP", "x", 1));
        if (rnd(2))
            json_object_set_new(spec, "paused", json_boolean(rnd(2)));
    }
    if (rnd(4))
        json_object_set_new(o, "spec", spec);
    else
        json_decref(spec);
    if (rnd(2)) {
        json_t *st = json_pack("{s:i, s:[{s:s}]}", "observedGeneration", 2, "conditions", "type",
                               "Available");
        if (v2 && rnd(2))
            json_object_set_new(st, "replicas",
                                rnd(2) ? json_pack("{s:i, s:i}", "desired", 3, "ready", 1)
                                       : json_pack("{s:i}", "other", 1));
        else if (!v2 && rnd(2))
            json_object_set_new(st, "replicas", json_integer(3));
        if (!v2 && rnd(2))
            json_object_set_new(st, "readyReplicas", json_integer(2));
        json_object_set_new(o, "status", st);
    }
    if (rnd(4) == 0)
        json_object_set_new(o, "extra", json_pack("[s, f]", "z", 0.5));
    return o;
}

START_TEST(test_convstream_matches_tree_conversion)
{
    for (int round = 0; round < 40; round++) {
        enum kop_myresource_version desired =
            round % 2 ? KOP_MYRESOURCE_VERSION_V1 : KOP_MYRESOURCE_VERSION_V2;
        json_t *objs = json_array();
        for (int i = 0; i < 100; i++)
            json_array_append_new(objs, random_object(round * 100 + i));
        json_t *review =
            json_pack("{s:s, s:s, s:{s:s, s:s, s:O}}", "apiVersion", "apiextensions.k8s.io/v1",
                      "kind", "ConversionReview", "request", "uid", "r", "desiredAPIVersion",
                      kop_myresource_api_version(desired), "objects", objs);
        char *body = json_dumps(review, JSON_COMPACT);
        struct kop_review_result r;
        convert(body, &r);
        ck_assert_int_eq(r.http_status, 200);
        ck_assert_msg(r.success, "%s", r.message);
        json_t *reply = reply_of(&r);
        json_t *got = kop_json_path(reply, "response.convertedObjects");
        ck_assert_msg(json_array_size(got) == 100, "%.400s", r.body);
        for (size_t i = 0; i < 100; i++) {
            json_t *want = json_deep_copy(json_array_get(objs, i));
            ck_assert_int_eq(kop_conversion_convert(want, desired), 0);
            if (!kop_json_equal(want, json_array_get(got, i))) {
                char *a = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
                char *b = json_dumps(json_array_get(got, i), JSON_COMPACT | JSON_SORT_KEYS);
                ck_abort_msg("object %zu differs:\n tree   %s\n stream %s", i, a, b);
            }
            json_decref(want);
        }
        json_decref(reply);
        kop_review_result_cleanup(&r);
        free(body);
        json_decref(review);
        json_decref(objs);
    }
}
END_TEST

/* Integers conversion re-encodes (v1 status.replicas and readyReplicas
 * become v2 status.replicas.desired and ready) keep their exact text, the
 * int64 extremes included. */
START_TEST(test_convstream_integers_keep_their_text)
{
    static const char *const nums[] = {"0",
                                       "-1",
                                       "7",
                                       "10",
                                       "-10",
                                       "1234567890",
                                       "9223372036854775807",
                                       "-9223372036854775808",
                                       "-9223372036854775807"};
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        const char *a = nums[i], *b = nums[(i + 1) % (sizeof(nums) / sizeof(nums[0]))];
        char body[1024], want[256];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                 "\"request\":{\"uid\":\"i\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
                 "\"objects\":[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                 "\"metadata\":{\"name\":\"n\"},\"spec\":{\"image\":\"nginx\"},\"status\":{"
                 "\"replicas\":%s,\"readyReplicas\":%s}}]}}",
                 a, b);
        snprintf(want, sizeof(want), "\"replicas\":{\"desired\":%s,\"ready\":%s}", a, b);
        struct kop_review_result r;
        convert(body, &r);
        ck_assert_int_eq(r.http_status, 200);
        ck_assert_msg(r.success, "%s", r.message);
        ck_assert_msg(strstr(r.body, want) != NULL, "want %s in %s", want, r.body);
        kop_review_result_cleanup(&r);
    }
}
END_TEST

START_TEST(test_convstream_any_member_order)
{
    /* objects before desiredAPIVersion, uid after them, the envelope's
     * apiVersion after the request, v1beta1 */
    const char *body =
        "{\"request\":{\"objects\":[{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":"
        "\"MyResource\",\"metadata\":{\"name\":\"a\"},\"spec\":{\"ports\":[{\"name\":\"http\","
        "\"port\":8080}]}}],\"desiredAPIVersion\":\"mygroup.example.com/v1\",\"uid\":\"late\"},"
        "\"kind\":\"ConversionReview\",\"apiVersion\":\"apiextensions.k8s.io/v1beta1\"}";
    struct kop_review_result r;
    convert(body, &r);
    ck_assert_int_eq(r.http_status, 200);
    ck_assert_msg(r.success, "%s", r.message);
    ck_assert_str_eq(r.uid, "late");
    json_t *reply = reply_of(&r);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), "apiextensions.k8s.io/v1beta1");
    ck_assert_str_eq(kop_json_path_str(reply, "response.uid"), "late");
    json_t *o = json_array_get(kop_json_path(reply, "response.convertedObjects"), 0);
    ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), KOP_MYRESOURCE_V1);
    ck_assert_int_eq(json_integer_value(kop_json_path(o, "spec.port")), 8080);
    json_decref(reply);
    kop_review_result_cleanup(&r);

    /* no apiVersion at all: v1, as controller-runtime reads it */
    convert("{\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
            "\"objects\":null}}",
            &r);
    ck_assert_int_eq(r.http_status, 200);
    ck_assert(r.success);
    reply = reply_of(&r);
    ck_assert_str_eq(kop_json_path_str(reply, "apiVersion"), "apiextensions.k8s.io/v1");
    ck_assert_uint_eq(json_array_size(kop_json_path(reply, "response.convertedObjects")), 0);
    json_decref(reply);
    kop_review_result_cleanup(&r);
}
END_TEST

struct err_case {
    const char *body;
    int status;
    bool success;
    const char *msg; /* substring of the message */
};

START_TEST(test_convstream_errors_keep_their_answers)
{
#define OBJ "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{}}"
#define REQ_BODY(objs)                                                                             \
    "\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/"                      \
    "v2\",\"objects\":" objs "}}"
#define REQ(objs) "{" REQ_BODY(objs)
    static const struct err_case cases[] = {
        {"", 400, false, "empty"},
        {"   ", 400, false, "unexpected end"},
        {"[1]", 400, false, "expected a JSON object"},
        {"\"x\"", 400, false, "expected a JSON object"},
        {"12", 400, false, "expected a JSON object"},
        {REQ("[" OBJ "," OBJ "]") "x", 400, false, "end of file expected"},
        {REQ("[" OBJ "," OBJ "]"), 200, true, ""},
        {REQ("[" OBJ "," OBJ), 400, false, "json parse error"},
        {"{\"request\":{\"objects\":[" OBJ, 400, false, "unexpected end"},
        {REQ("[" OBJ ",]"), 400, false, "json parse error"},
        {REQ("[" OBJ "," OBJ "]") "\n\t ", 200, true, ""},
        {"{\"request\":{\"uid\":\"u\",\"uid\":\"v\"}}", 400, false, "duplicate"},
        {"{\"kind\":\"ConversionReview\",\"kind\":\"ConversionReview\"}", 400, false, "duplicate"},
        {REQ("[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":"
             "{\"a\":{\"b\":1,\"b\":2}}}]"),
         400, false, "duplicate"},
        {"{\"response\":{\"x\":1,\"x\":2}," REQ_BODY("[]"), 400, false, "duplicate"},
        {REQ("[" OBJ ",{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}]"), 200, false, "objects[1]"},
        {REQ("[" OBJ ",7]"), 200, false, "objects[1]"},
        {REQ("{}"), 200, false, "must be a list"},
        {"{\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"v9\",\"objects\":[]}}", 200, false,
         "unsupported desiredAPIVersion"},
        {"{\"request\":7}", 400, false, "no request"},
        {"{\"kind\":\"AdmissionReview\"," REQ_BODY("[]"), 400, false, "unsupported review"},
        {"{\"apiVersion\":\"v1\"," REQ_BODY("[]"), 400, false, "unsupported review"},
        {REQ("[\"\xff\"]"), 400, false, "UTF-8"},
        {REQ("[1e999]"), 400, false, "overflow"},
        {REQ("[99999999999999999999]"), 400, false, "too big integer"},
        {REQ("[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\"}]"), 200, false,
         "no metadata"},
        {REQ("[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":"
             "{\"labels\":{\"bad key!\":\"v\"}}}]"),
         200, false, "self-check"},
        {REQ("[{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":"
             "[]}]"),
         200, false, "invalid metadata of type array"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct kop_review_result r;
        convert(cases[i].body, &r);
        ck_assert_msg(r.http_status == cases[i].status, "case %zu: status %d, want %d (%s)", i,
                      r.http_status, cases[i].status, r.message);
        ck_assert_msg(r.success == cases[i].success, "case %zu: success %d (%s)", i, r.success,
                      r.message);
        ck_assert_msg(strstr(r.message, cases[i].msg) != NULL, "case %zu: message %s", i,
                      r.message);
        json_t *reply = reply_of(&r); /* every answer is a review */
        ck_assert_str_eq(kop_json_path_str(reply, "kind"), "ConversionReview");
        json_decref(reply);
        kop_review_result_cleanup(&r);
    }
    /* Content-Type decides before anything is read */
    struct kop_convstream *cs;
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_new("application/yaml", NULL, &cs), 0);
    ck_assert_int_eq(kop_convstream_feed(cs, "{}", 2), 0);
    ck_assert_int_eq(kop_convstream_finish(cs, &r), 0);
    ck_assert_int_eq(r.http_status, 415);
    kop_review_result_cleanup(&r);
    kop_convstream_free(cs);
#undef OBJ
#undef REQ
#undef REQ_BODY
}
END_TEST

START_TEST(test_convstream_memory_is_reply_plus_one_object)
{
    /* 10,000 objects fed in 16 KiB pieces: the stream holds its reply and
     * one object, never the request. */
    size_t cap = 24u << 20, off = 0;
    char *body = malloc(cap);
    off += (size_t)snprintf(
        body, cap,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"m\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
        "\"objects\":[");
    for (int i = 0; i < 10000; i++)
        off += (size_t)snprintf(
            body + off, cap - off,
            "%s{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
            "\"name\":\"o%d\",\"namespace\":\"default\",\"annotations\":{\"a\":\"%0400d\"}},"
            "\"spec\":"
            "{\"replicas\":1,\"image\":\"nginx:1.%d\",\"port\":80},\"status\":{\"replicas\":1}}",
            i ? "," : "", i, i, i);
    off += (size_t)snprintf(body + off, cap - off, "]}}");
    struct kop_convstream *cs;
    ck_assert_int_eq(kop_convstream_new(CT, NULL, &cs), 0);
    size_t peak = 0, peak_early = 0;
    for (size_t at = 0; at < off; at += 16384) {
        size_t n = off - at < 16384 ? off - at : 16384;
        ck_assert_int_eq(kop_convstream_feed(cs, body + at, n), 0);
        size_t m = kop_convstream_memory(cs);
        if (m > peak)
            peak = m;
        if (at < off / 10 && m > peak_early)
            peak_early = m;
    }
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_finish(cs, &r), 0);
    kop_convstream_free(cs);
    ck_assert_int_eq(r.http_status, 200);
    ck_assert_msg(r.success, "%s", r.message);
    /* all of it is the reply growing: a tenth of the way in, a tenth of it */
    ck_assert_msg(peak <= r.body_len + r.body_len / 2, "peak %zu for a %zu-byte reply", peak,
                  r.body_len);
    ck_assert_msg(peak_early < r.body_len / 5, "early peak %zu", peak_early);
    kop_review_result_cleanup(&r);
    free(body);
}
END_TEST

/* The labels and annotations copied as they came are checked from their
 * bytes: the same verdict and message as the tree check of the same map. */
START_TEST(test_convstream_raw_meta_check_matches_tree)
{
    static const char *const maps[] = {
        "{}",
        "null",
        "{ \"app\" : \"x\" , \"b\":\"\" }",
        "{\"\\u0061pp\":\"x\",\"k\":\"v\\u0041\"}",
        "{\"app\":7}",
        "{\"app\":null}",
        "{\"app\":true}",
        "{\"app\":-1.5e3 }",
        "{\"a\":\"x\",\"app\":{\"q\":[\"}\",\"]\",{}]},\"z\":\"y\"}",
        "{\"app\":[\"x\"]}",
        "{\"bad key!\":\"v\"}",
        "{\"ok\":\"bad value!\"}",
        "{\"example.com/x\":\"a.b-c_d\"}",
        "{\"ok\":\"v\\\"q\"}",
        "{\"k\\\"\":\"v\"}",
        "\"str\"",
        "[1]",
        "7",
    };
    /* a key longer than the check's stack buffer, and annotations over the
     * total size limit */
    char *long_key = malloc(1200), *big = malloc(KOP_REVIEW_ANNOTATIONS_MAX + 64);
    snprintf(long_key, 1200, "{\"a%0500d\":\"v\"}", 0);
    snprintf(big, KOP_REVIEW_ANNOTATIONS_MAX + 64, "{\"a\":\"%0*d\"}", KOP_REVIEW_ANNOTATIONS_MAX,
             0);
    size_t n_maps = sizeof(maps) / sizeof(maps[0]);
    for (size_t i = 0; i < 2 * (n_maps + 2); i++) {
        bool label = i % 2 == 0;
        size_t k = i / 2;
        const char *map = k < n_maps ? maps[k] : k == n_maps ? long_key : big;
        /* v2 objects go back as they came: only the raw check looks at them */
        size_t cap = strlen(map) + 512;
        char *body = malloc(cap);
        snprintf(body, cap,
                 "{\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
                 "\"objects\":[{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":"
                 "\"MyResource\",\"metadata\":{\"name\":\"n\",\"%s\":%s}}]}}",
                 label ? "labels" : "annotations", map);
        struct kop_review_result r;
        convert(body, &r);
        ck_assert_int_eq(r.http_status, 200);
        json_t *meta = json_pack("{s:{s:s}}", "metadata", "name", "n");
        json_t *m = json_loads(map, JSON_DECODE_ANY, NULL);
        ck_assert_ptr_nonnull(m);
        json_object_set_new(json_object_get(meta, "metadata"), label ? "labels" : "annotations", m);
        char msg[256] = "";
        bool ok = kop_review_check_object_meta(NULL, meta, msg, sizeof(msg)) == 0;
        ck_assert_msg(r.success == ok, "%s %.80s: stream %d (%s), tree %d (%s)",
                      label ? "labels" : "annotations", map, r.success, r.message, ok, msg);
        msg[100] = '\0'; /* r.message is cut to fit: compare the start */
        if (!ok)
            ck_assert_msg(strstr(r.message, msg) != NULL, "%.80s: stream '%s', tree '%s'", map,
                          r.message, msg);
        json_decref(meta);
        kop_review_result_cleanup(&r);
        free(body);
    }
    free(long_key);
    free(big);
}
END_TEST

START_TEST(test_convstream_expect_sizes_the_reply_once)
{
    /* the reply is reserved at the estimate itself, not rounded up to a
     * power of two: a 170 KB review's reply stays under the 256 KiB mmap
     * threshold main() sets */
    struct kop_convstream *cs;
    ck_assert_int_eq(kop_convstream_new(CT, NULL, &cs), 0);
    size_t body = 168633, want = body + body / 8 + 4096;
    ck_assert_int_eq(kop_convstream_expect(cs, body), 0);
    ck_assert_uint_ge(kop_convstream_memory(cs), want);
    ck_assert_uint_lt(kop_convstream_memory(cs), want + 4096);
    ck_assert_uint_lt(kop_convstream_memory(cs), 256u * 1024u);
    /* only the first call sizes it */
    ck_assert_int_eq(kop_convstream_expect(cs, 4 * body), 0);
    ck_assert_uint_lt(kop_convstream_memory(cs), want + 4096);
    kop_convstream_free(cs);
}
END_TEST

/* A crafted review cannot make kop build what the apiserver never sends:
 * an object over KOP_CONVSTREAM_MAX_OBJECT is a 413, an object whose
 * decoded parts would pass KOP_CONVSTREAM_MAX_TREE is a Failure, and
 * neither is held or decoded whole. */
START_TEST(test_convstream_bounds_what_one_object_costs)
{
    size_t cap = 12u << 20;
    char *b = malloc(cap);
    for (int kind = 0; kind < 2; kind++) {
        size_t n = kind == 0 ? 400000 : 100000, off = 0;
        off += (size_t)snprintf(b, cap,
                                "{\"request\":{\"uid\":\"u\",\"desiredAPIVersion\":"
                                "\"mygroup.example.com/v1\",\"objects\":[{\"apiVersion\":"
                                "\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":"
                                "{\"name\":\"a\"},\"spec\":{\"ports\":[");
        for (size_t i = 0; i < n; i++)
            off += (size_t)snprintf(b + off, cap - off, "%s{\"port\":%zu}", i ? "," : "",
                                    1 + i % 60000);
        off += (size_t)snprintf(b + off, cap - off, "]}}]}}");
        ck_assert_uint_lt(off, cap);
        struct kop_convstream *cs;
        struct kop_review_result r;
        ck_assert_int_eq(kop_convstream_new(CT, NULL, &cs), 0);
        size_t peak = 0;
        for (size_t at = 0; at < off; at += 65536) {
            ck_assert_int_eq(kop_convstream_feed(cs, b + at, off - at < 65536 ? off - at : 65536),
                             0);
            if (kop_convstream_memory(cs) > peak)
                peak = kop_convstream_memory(cs);
        }
        ck_assert_int_eq(kop_convstream_finish(cs, &r), 0);
        kop_convstream_free(cs);
        ck_assert_uint_le(peak, 2 * KOP_CONVSTREAM_MAX_OBJECT);
        if (kind == 0) {
            ck_assert_int_eq(r.http_status, 413);
            ck_assert_msg(strstr(r.message, "larger than") != NULL, "%s", r.message);
        } else {
            ck_assert_int_eq(r.http_status, 200);
            ck_assert(!r.success);
            ck_assert_msg(strstr(r.message, "objects[0]: too large to convert") != NULL, "%s",
                          r.message);
        }
        kop_review_result_cleanup(&r);
    }
    free(b);
}
END_TEST

static Suite *convstream_suite(void)
{
    Suite *s = suite_create("convstream");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_convstream_every_split_point);
    tcase_add_test(tc, test_convstream_matches_tree_conversion);
    tcase_add_test(tc, test_convstream_integers_keep_their_text);
    tcase_add_test(tc, test_convstream_any_member_order);
    tcase_add_test(tc, test_convstream_errors_keep_their_answers);
    tcase_add_test(tc, test_convstream_memory_is_reply_plus_one_object);
    tcase_add_test(tc, test_convstream_bounds_what_one_object_costs);
    tcase_add_test(tc, test_convstream_expect_sizes_the_reply_once);
    tcase_add_test(tc, test_convstream_raw_meta_check_matches_tree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(convstream_suite());
}
