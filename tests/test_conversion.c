/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of MyResource v1 <-> v2 conversion: fixed mappings, the v2-extras
 * annotation, and lossless round trips v2->v1->v2 and v1->v2->v1 over
 * thousands of seeded random objects (every field combination, unknown
 * fields, values of the wrong type), compared after applying the CRD's
 * structural defaults (docs/api.md §1.4) to both sides.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/conversion.h"
#include "kop/convstream.h"
#include "kop/review.h"
#include "kop/json.h"
#include "kop/myresource.h"
#include "testutil.h"

#define SHA "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define EXTRAS KOP_MYRESOURCE_EXTRAS_ANNOTATION

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    ck_assert_msg(v != NULL, "bad test JSON: %s: %s", err.text, text);
    return v;
}

static char *dump(const json_t *v)
{
    char *s = NULL;
    ck_assert_int_eq(kop_json_dump(v, JSON_COMPACT | JSON_SORT_KEYS, &s, NULL), 0);
    return s;
}

static void assert_json_eq(const json_t *a, const json_t *b, const char *what)
{
    if (!json_equal(a, b)) {
        char *x = dump(a), *y = dump(b);
        ck_abort_msg("%s:\n  want %s\n  got  %s", what, x, y);
    }
}

/* ---- the CRD's structural defaults (test side, mirrors docs/api.md §1.4) ----- */

static void dflt(json_t *o, const char *key, json_t *v)
{
    if (!json_object_get(o, key))
        json_object_set_new(o, key, v);
    else
        json_decref(v);
}

static void default_v1(json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec))
        return;
    dflt(spec, "replicas", json_integer(1));
    dflt(spec, "image", json_string("nginx:1.14.2"));
    dflt(spec, "port", json_integer(80));
    dflt(spec, "serviceType", json_string("ClusterIP"));
}

static void default_v2(json_t *obj)
{
    json_t *spec = json_object_get(obj, "spec");
    if (!json_is_object(spec))
        return;
    dflt(spec, "replicas", json_integer(1));
    dflt(spec, "image", json_pack("{s:s, s:s}", "repository", "nginx", "tag", "1.14.2"));
    dflt(spec, "ports",
         json_pack("[{s:s, s:i, s:s}]", "name", "http", "port", 80, "protocol", "TCP"));
    json_t *ports = json_object_get(spec, "ports");
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p)
    {
        if (json_is_object(p))
            dflt(p, "protocol", json_string("TCP"));
    }
    dflt(spec, "service", json_object());
    json_t *svc = json_object_get(spec, "service");
    if (json_is_object(svc))
        dflt(svc, "type", json_string("ClusterIP"));
    dflt(spec, "paused", json_false());
}

/* Everything but apiVersion, spec, status, metadata.annotations. */
static json_t *frame(const json_t *obj)
{
    json_t *c = json_deep_copy(obj);
    json_object_del(c, "apiVersion");
    json_object_del(c, "spec");
    json_object_del(c, "status");
    json_object_del(json_object_get(c, "metadata"), "annotations");
    return c;
}

/* ---- seeded generator --------------------------------------------------------- */

static unsigned seed;

static unsigned rnd(unsigned n)
{
    return (unsigned)rand_r(&seed) % n;
}

static const char *const image_names[] = {
    "nginx",
    "library/nginx",
    "registry.example.com:5000/team/app",
    "localhost:5000/app",
    "localhost",
    "Upper/Case",
    "a:b",
    "x@y",
    "",
    "quay.io/a/b",
    "weird name",
    "a/b:c/d",
};
static const char *const tags[] = {"1.14.2", "latest", "v1", "", "a:b", "bad tag", "x@y", "5000"};
static const char *const digests[] = {SHA, "sha256:xyz", "",
                                      "md5:0123456789abcdef0123456789abcdef"};

static json_t *gen_image_v2(void)
{
    switch (rnd(10)) {
    case 0:
        return json_string("nginx:1.0"); /* wrong shape: a string */
    case 1:
        return json_integer(42);
    case 2:
        return json_object();
    default:
        break;
    }
    json_t *o = json_object();
    if (rnd(8))
        json_object_set_new(o, "repository", json_string(image_names[rnd(12)]));
    if (rnd(2))
        json_object_set_new(o, "tag", json_string(tags[rnd(8)]));
    if (rnd(3) == 0)
        json_object_set_new(o, "digest", json_string(digests[rnd(4)]));
    if (rnd(12) == 0)
        json_object_set_new(o, "tag", json_integer(3));
    if (rnd(12) == 0)
        json_object_set_new(o, "pullPolicy", json_string("Always"));
    return o;
}

static json_t *gen_port(void)
{
    static const char *const names[] = {"http", "web", "HTTP", "metrics"};
    static const char *const protos[] = {"TCP", "UDP", "SCTP", "tcp"};
    json_t *p = json_object();
    unsigned k = rnd(10);
    if (k < 8)
        json_object_set_new(p, "name", json_string(names[k < 5 ? 0 : rnd(4)]));
    else if (k == 8)
        json_object_set_new(p, "name", json_integer(5));
    k = rnd(10);
    if (k < 8)
        json_object_set_new(p, "port", json_integer(1 + rnd(70000)));
    else if (k == 8)
        json_object_set_new(p, "port", json_string("80"));
    k = rnd(6);
    if (k < 2)
        json_object_set_new(p, "protocol", json_string(protos[k < 1 ? 0 : rnd(4)]));
    if (rnd(15) == 0)
        json_object_set_new(p, "appProtocol", json_string("http"));
    return p;
}

static json_t *gen_ports(void)
{
    unsigned k = rnd(12);
    if (k == 0)
        return json_array();
    if (k == 1)
        return json_string("80");
    if (k == 2)
        return json_pack("[i]", 7);
    json_t *a = json_array();
    unsigned n = k < 8 ? 1 : 1 + rnd(3);
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(a, gen_port());
    return a;
}

static json_t *gen_service(void)
{
    static const char *const types[] = {"ClusterIP", "NodePort", "LoadBalancer", "Bogus"};
    switch (rnd(8)) {
    case 0:
        return json_object();
    case 1:
        return json_string("NodePort");
    case 2:
        return json_pack("{s:s, s:s}", "type", "NodePort", "externalTrafficPolicy", "Local");
    case 3:
        return json_pack("{s:i}", "type", 3);
    default:
        return json_pack("{s:s}", "type", types[rnd(4)]);
    }
}

static json_t *gen_status_v2(void)
{
    json_t *st = json_object();
    if (rnd(2))
        json_object_set_new(st, "observedGeneration", json_integer(rnd(9)));
    if (rnd(3) == 0)
        json_object_set_new(st, "conditions",
                            json_pack("[{s:s, s:s, s:s, s:s}]", "type", "Available", "status",
                                      "True", "reason", "Ready", "lastTransitionTime",
                                      "2024-01-01T00:00:00Z"));
    switch (rnd(8)) {
    case 0:
        break;
    case 1:
        json_object_set_new(st, "replicas", json_object());
        break;
    case 2:
        json_object_set_new(st, "replicas", json_integer(3));
        break;
    case 3:
        json_object_set_new(st, "replicas", json_pack("{s:i, s:s}", "desired", 2, "note", "x"));
        break;
    case 4:
        json_object_set_new(st, "replicas", json_pack("{s:i}", "ready", 1));
        break;
    default:
        json_object_set_new(st, "replicas", json_pack("{s:i, s:i}", "desired", 3, "ready", 2));
        break;
    }
    if (rnd(10) == 0)
        json_object_set_new(st, "x-unknown-status", json_true());
    return st;
}

static json_t *gen_metadata(int i)
{
    char name[32];
    snprintf(name, sizeof(name), "obj-%d", i);
    json_t *m = json_pack("{s:s, s:s, s:s}", "name", name, "namespace", "default", "uid",
                          "0a5e5d0c-0000-4000-8000-000000000000");
    switch (rnd(4)) {
    case 0:
        json_object_set_new(m, "annotations", json_object());
        break;
    case 1:
        json_object_set_new(m, "annotations", json_pack("{s:s}", "team", "blue"));
        break;
    default:
        break;
    }
    if (rnd(3) == 0)
        json_object_set_new(m, "labels", json_pack("{s:s}", "app", "x"));
    return m;
}

static json_t *gen_v2(int i)
{
    json_t *o = json_pack("{s:s, s:s, s:o}", "apiVersion", KOP_MYRESOURCE_V2, "kind",
                          KOP_MYRESOURCE_KIND, "metadata", gen_metadata(i));
    unsigned k = rnd(40);
    if (k == 0)
        return o; /* no spec */
    if (k == 1) {
        json_object_set_new(o, "spec", json_string("not an object"));
        return o;
    }
    json_t *spec = json_object();
    json_object_set_new(o, "spec", spec);
    k = rnd(8);
    if (k < 5)
        json_object_set_new(spec, "replicas", json_integer(rnd(5)));
    else if (k == 5)
        json_object_set_new(spec, "replicas", json_string("three"));
    if (rnd(5))
        json_object_set_new(spec, "image", gen_image_v2());
    if (rnd(3))
        json_object_set_new(spec, "ports", gen_ports());
    if (rnd(2))
        json_object_set_new(spec, "service", gen_service());
    k = rnd(6);
    if (k == 0)
        json_object_set_new(spec, "paused", json_true());
    else if (k == 1)
        json_object_set_new(spec, "paused", json_false());
    else if (k == 2 && rnd(4) == 0)
        json_object_set_new(spec, "paused", json_string("yes"));
    if (rnd(8) == 0)
        json_object_set_new(spec, "x-unknown", json_pack("{s:[i,i]}", "deep", 1, 2));
    if (rnd(3))
        json_object_set_new(o, "status", gen_status_v2());
    if (rnd(10) == 0)
        json_object_set_new(o, "topLevelUnknown", json_string("kept"));
    return o;
}

static json_t *gen_v1_plain(int i)
{
    static const char *const images[] = {"nginx",
                                         "nginx:1.14.2",
                                         "localhost:5000/app",
                                         "app@" SHA,
                                         "quay.io/a:1@" SHA,
                                         "nginx:",
                                         "Up:per",
                                         "",
                                         "a@b",
                                         "x:y:z"};
    json_t *o = json_pack("{s:s, s:s, s:o}", "apiVersion", KOP_MYRESOURCE_V1, "kind",
                          KOP_MYRESOURCE_KIND, "metadata", gen_metadata(i));
    if (rnd(30) == 0)
        return o;
    json_t *spec = json_object();
    json_object_set_new(o, "spec", spec);
    if (rnd(2))
        json_object_set_new(spec, "replicas", json_integer(rnd(4)));
    unsigned k = rnd(12);
    if (k < 10)
        json_object_set_new(spec, "image", json_string(images[k]));
    else if (k == 10)
        json_object_set_new(spec, "image", json_integer(1));
    k = rnd(8);
    if (k < 5)
        json_object_set_new(spec, "port", json_integer(1 + rnd(65535)));
    else if (k == 5)
        json_object_set_new(spec, "port", json_string("http"));
    k = rnd(6);
    if (k < 4)
        json_object_set_new(spec, "serviceType", json_string(k ? "NodePort" : "ClusterIP"));
    else if (k == 4)
        json_object_set_new(spec, "serviceType", json_null());
    if (rnd(8) == 0)
        json_object_set_new(spec, "x-unknown", json_integer(1));
    if (rnd(2)) {
        json_t *st = json_object();
        json_object_set_new(o, "status", st);
        if (rnd(2))
            json_object_set_new(st, "replicas", json_integer(rnd(4)));
        if (rnd(2))
            json_object_set_new(st, "readyReplicas", json_integer(rnd(4)));
        if (rnd(2))
            json_object_set_new(st, "observedGeneration", json_integer(rnd(4)));
    }
    return o;
}

/* Does the extras member "key" stay in the annotation whatever a v1 client
 * writes to the v1 field that holds part of it? (A member that only said
 * "empty" becomes stale once the v1 field is set, and is dropped.) */
static bool extras_stable(const json_t *extras, const char *key, const char *sub)
{
    const json_t *m = json_object_get(extras, key);
    if (sub)
        m = json_object_get(m, sub);
    if (!m)
        return true;
    if (json_is_array(m)) {
        const json_t *p0 = json_array_get(m, 0);
        const json_t *name = json_object_get(p0, "name");
        const json_t *proto = json_object_get(p0, "protocol");
        if (!json_is_object(p0))
            return false;
        /* a single http/TCP port becomes plain v1 again once it has a port */
        return json_array_size(m) != 1 || !json_is_string(name) ||
               strcmp(json_string_value(name), "http") != 0 ||
               (proto &&
                !(json_is_string(proto) && strcmp(json_string_value(proto), "TCP") == 0)) ||
               json_object_size(p0) != 1u + (proto != NULL);
    }
    return json_is_object(m) && json_object_size(m) > 0;
}

/* A v1 object as the apiserver stores it (canonical extras), possibly then
 * edited by a v1 client in the fields v1 owns. */
static json_t *gen_v1(int i)
{
    if (rnd(3) == 0)
        return gen_v1_plain(i);
    json_t *o = gen_v2(i);
    ck_assert_int_eq(kop_conversion_to_v1(o), 0);
    const char *es =
        json_string_value(json_object_get(kop_json_path(o, "metadata.annotations"), EXTRAS));
    json_t *extras = es ? json_loads(es, 0, NULL) : NULL;
    json_t *spec = json_object_get(o, "spec");
    if (json_is_object(spec) && rnd(3) == 0) {
        if (rnd(2) && extras_stable(extras, "ports", NULL))
            json_object_set_new(spec, "port", json_integer(1 + rnd(65535)));
        if (rnd(2) && extras_stable(extras, "service", NULL))
            json_object_set_new(spec, "serviceType", json_string("LoadBalancer"));
        if (rnd(2))
            json_object_set_new(spec, "replicas", json_integer(7));
    }
    json_t *st = json_object_get(o, "status");
    if (json_is_object(st) && rnd(2) && extras_stable(extras, "status", "replicas"))
        json_object_set_new(st, "readyReplicas", json_integer(rnd(4)));
    json_decref(extras);
    return o;
}

static void check_extras_canonical(const json_t *v1)
{
    const char *s = kop_json_path_str(json_object_get(v1, "metadata"), "annotations");
    (void)s;
    json_t *ann = kop_json_path(v1, "metadata.annotations");
    const char *e = json_string_value(json_object_get(ann, EXTRAS));
    if (!e)
        return;
    json_t *parsed = load(e);
    ck_assert(json_is_object(parsed));
    ck_assert_uint_gt(json_object_size(parsed), 0);
    char *again = dump(parsed);
    ck_assert_str_eq(again, e);
    free(again);
    json_decref(parsed);
}

/* Convert through the tree API, or (via_review) through a whole
 * ConversionReview as the webhook streams it (kop/convstream.h). */
static bool via_review;

static void convert_obj(json_t **obj, enum kop_myresource_version to)
{
    if (!via_review) {
        ck_assert_int_eq(kop_conversion_convert(*obj, to), 0);
        return;
    }
    json_t *review =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:[O]}}", "apiVersion", "apiextensions.k8s.io/v1",
                  "kind", "ConversionReview", "request", "uid", "rt", "desiredAPIVersion",
                  kop_myresource_api_version(to), "objects", *obj);
    char *body = json_dumps(review, JSON_COMPACT);
    struct kop_review_result r;
    ck_assert_int_eq(kop_convstream_convert_http("application/json", body, strlen(body), NULL, &r),
                     0);
    ck_assert_msg(r.http_status == 200 && r.success, "%s", r.message);
    json_t *reply = json_loadb(r.body, r.body_len, 0, NULL);
    ck_assert_ptr_nonnull(reply);
    json_t *out = json_incref(json_array_get(kop_json_path(reply, "response.convertedObjects"), 0));
    ck_assert_ptr_nonnull(out);
    json_decref(reply);
    kop_review_result_cleanup(&r);
    free(body);
    json_decref(review);
    json_decref(*obj);
    *obj = out;
}

static void roundtrip(json_t *in, enum kop_myresource_version via)
{
    json_t *work = json_deep_copy(in);
    enum kop_myresource_version from = kop_myresource_version_of(in);
    convert_obj(&work, via);
    ck_assert_str_eq(json_string_value(json_object_get(work, "apiVersion")),
                     kop_myresource_api_version(via));
    json_t *f1 = frame(in), *f2 = frame(work);
    assert_json_eq(f1, f2, "only apiVersion/spec/status/annotations may differ");
    json_decref(f1);
    json_decref(f2);
    if (via == KOP_MYRESOURCE_VERSION_V1) {
        check_extras_canonical(work);
        json_t *spec = json_object_get(work, "spec");
        if (json_is_object(spec)) {
            ck_assert_ptr_null(json_object_get(spec, "paused"));
            ck_assert_ptr_null(json_object_get(spec, "service"));
            ck_assert_ptr_null(json_object_get(spec, "ports"));
        }
    } else {
        ck_assert_ptr_null(json_object_get(kop_json_path(work, "metadata.annotations"), EXTRAS));
    }
    convert_obj(&work, from);
    json_t *a = json_deep_copy(in);
    json_t *b = json_deep_copy(work);
    if (from == KOP_MYRESOURCE_VERSION_V1) {
        default_v1(a);
        default_v1(b);
    } else {
        default_v2(a);
        default_v2(b);
    }
    assert_json_eq(a, b, "round trip after defaults");
    json_decref(a);
    json_decref(b);
    json_decref(work);
}

START_TEST(test_conversion_roundtrip_v2_v1_v2_generated)
{
    seed = 1;
    for (int i = 0; i < 3000; i++) {
        json_t *o = gen_v2(i);
        roundtrip(o, KOP_MYRESOURCE_VERSION_V1);
        json_decref(o);
    }
}
END_TEST

START_TEST(test_conversion_roundtrip_v1_v2_v1_generated)
{
    seed = 2;
    for (int i = 0; i < 3000; i++) {
        json_t *o = gen_v1(i);
        roundtrip(o, KOP_MYRESOURCE_VERSION_V2);
        json_decref(o);
    }
}
END_TEST

/* The same 6,000 objects, each converted through a ConversionReview. */
START_TEST(test_conversion_roundtrip_generated_through_reviews)
{
    via_review = true;
    seed = 1;
    for (int i = 0; i < 3000; i++) {
        json_t *o = gen_v2(i);
        roundtrip(o, KOP_MYRESOURCE_VERSION_V1);
        json_decref(o);
    }
    seed = 2;
    for (int i = 0; i < 3000; i++) {
        json_t *o = gen_v1(i);
        roundtrip(o, KOP_MYRESOURCE_VERSION_V2);
        json_decref(o);
    }
    via_review = false;
}
END_TEST

static void convert_expect(const char *in, enum kop_myresource_version to, const char *want)
{
    json_t *o = load(in), *w = load(want);
    ck_assert_int_eq(kop_conversion_convert(o, to), 0);
    assert_json_eq(w, o, in);
    json_decref(o);
    json_decref(w);
}

#define V1H "\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\""
#define V2H "\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\""

START_TEST(test_conversion_seed_example)
{
    convert_expect(
        "{" V1H ",\"metadata\":{\"name\":\"example-resource\"},\"spec\":{\"replicas\":3}}",
        KOP_MYRESOURCE_VERSION_V2,
        "{" V2H ",\"metadata\":{\"name\":\"example-resource\"},\"spec\":{\"replicas\":3}}");
}
END_TEST

START_TEST(test_conversion_v1_to_v2_fields)
{
    convert_expect(
        "{" V1H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"replicas\":2,\"image\":"
        "\"localhost:5000/app\",\"port\":8080,\"serviceType\":\"NodePort\"},\"status\":"
        "{\"observedGeneration\":4,\"replicas\":2,\"readyReplicas\":1,\"conditions\":[]}}",
        KOP_MYRESOURCE_VERSION_V2,
        "{" V2H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"replicas\":2,\"image\":{"
        "\"repository\":\"localhost:5000/app\"},\"ports\":[{\"name\":\"http\",\"port\":"
        "8080,\"protocol\":\"TCP\"}],\"service\":{\"type\":\"NodePort\"}},\"status\":{"
        "\"observedGeneration\":4,\"replicas\":{\"desired\":2,\"ready\":1},"
        "\"conditions\":[]}}");
    convert_expect("{" V1H ",\"metadata\":{},\"spec\":{\"image\":\"q.io/a:1.0@" SHA "\"}}",
                   KOP_MYRESOURCE_VERSION_V2,
                   "{" V2H ",\"metadata\":{},\"spec\":{\"image\":{\"repository\":\"q.io/a\","
                   "\"tag\":\"1.0\",\"digest\":\"" SHA "\"}}}");
    convert_expect("{" V1H ",\"metadata\":{},\"spec\":{\"image\":\"app@" SHA "\"}}",
                   KOP_MYRESOURCE_VERSION_V2,
                   "{" V2H ",\"metadata\":{},\"spec\":{\"image\":{\"repository\":\"app\","
                   "\"digest\":\"" SHA "\"}}}");
    /* wrong shapes are carried over */
    convert_expect("{" V1H ",\"metadata\":{},\"spec\":{\"image\":5,\"port\":\"x\"}}",
                   KOP_MYRESOURCE_VERSION_V2,
                   "{" V2H ",\"metadata\":{},\"spec\":{\"image\":5,\"ports\":[{\"name\":\"http\","
                   "\"port\":\"x\",\"protocol\":\"TCP\"}]}}");
    convert_expect("{" V1H ",\"metadata\":{},\"spec\":\"junk\"}", KOP_MYRESOURCE_VERSION_V2,
                   "{" V2H ",\"metadata\":{},\"spec\":\"junk\"}");
}
END_TEST

START_TEST(test_conversion_v2_extras_annotation)
{
    /* extras: sorted compact JSON, only what v1 cannot hold, port kept in spec.port */
    convert_expect("{" V2H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"paused\":true,\"ports\":["
                   "{\"name\":\"web\",\"port\":8080},{\"name\":\"m\",\"port\":9090,\"protocol\":"
                   "\"UDP\"}]}}",
                   KOP_MYRESOURCE_VERSION_V1,
                   "{" V1H ",\"metadata\":{\"name\":\"a\",\"annotations\":{\"" EXTRAS "\":"
                   "\"{\\\"paused\\\":true,\\\"ports\\\":[{\\\"name\\\":\\\"web\\\"},{\\\"name\\\":"
                   "\\\"m\\\",\\\"port\\\":9090,\\\"protocol\\\":\\\"UDP\\\"}]}\"}},\"spec\":{"
                   "\"port\":8080}}");
    /* nothing to keep: no annotation; paused:false and protocol TCP equal absent */
    convert_expect("{" V2H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"paused\":false,\"ports\":["
                   "{\"name\":\"http\",\"port\":81,\"protocol\":\"TCP\"}],\"service\":{\"type\":"
                   "\"NodePort\"},\"image\":{\"repository\":\"nginx\",\"tag\":\"1\"}}}",
                   KOP_MYRESOURCE_VERSION_V1,
                   "{" V1H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"port\":81,\"serviceType\":"
                   "\"NodePort\",\"image\":\"nginx:1\"}}");
    /* ports: [] cannot be said in v1 */
    convert_expect("{" V2H ",\"metadata\":{},\"spec\":{\"ports\":[]}}", KOP_MYRESOURCE_VERSION_V1,
                   "{" V1H ",\"metadata\":{\"annotations\":{\"" EXTRAS
                   "\":\"{\\\"ports\\\":[]}\"}},"
                   "\"spec\":{}}");
    /* annotations: null (no annotations, as the apiserver reads ObjectMeta)
     * lost the extras; now they go into a new map, and come back without it */
    const char *nul = "{" V2H ",\"metadata\":{\"name\":\"a\",\"annotations\":null},\"spec\":{"
                      "\"paused\":true,\"ports\":[{\"name\":\"web\",\"port\":80,\"protocol\":"
                      "\"UDP\"}]}}";
    convert_expect(
        nul, KOP_MYRESOURCE_VERSION_V1,
        "{" V1H ",\"metadata\":{\"name\":\"a\",\"annotations\":{\"" EXTRAS "\":"
        "\"{\\\"paused\\\":true,\\\"ports\\\":[{\\\"name\\\":\\\"web\\\",\\\"protocol\\\":"
        "\\\"UDP\\\"}]}\"}},\"spec\":{\"port\":80}}");
    for (int review = 0; review < 2; review++) {
        via_review = review;
        json_t *o = load(nul);
        convert_obj(&o, KOP_MYRESOURCE_VERSION_V1);
        convert_obj(&o, KOP_MYRESOURCE_VERSION_V2);
        json_t *want = load("{" V2H ",\"metadata\":{\"name\":\"a\"},\"spec\":{\"paused\":true,"
                            "\"ports\":[{\"name\":\"web\",\"port\":80,\"protocol\":\"UDP\"}]}}");
        assert_json_eq(want, o, "v2 -> v1 -> v2 with annotations: null");
        json_decref(want);
        json_decref(o);
    }
    via_review = false;
}
END_TEST

START_TEST(test_conversion_v1_port_wins_over_extras)
{
    json_t *o = load("{" V2H ",\"metadata\":{\"name\":\"a\",\"annotations\":{}},\"spec\":{"
                     "\"ports\":[{\"name\":\"web\",\"port\":8080},{\"name\":\"m\",\"port\":9090}],"
                     "\"image\":{\"repository\":\"a:b\"}}}");
    ck_assert_int_eq(kop_conversion_to_v1(o), 0);
    ck_assert_str_eq(kop_json_path_str(o, "spec.image"), "a:b");
    ck_assert_int_eq(json_integer_value(kop_json_path(o, "spec.port")), 8080);
    /* a v1 client changes the port and the image */
    json_object_set_new(json_object_get(o, "spec"), "port", json_integer(7070));
    ck_assert_int_eq(kop_conversion_to_v2(o), 0);
    json_t *want = load("[{\"name\":\"web\",\"port\":7070},{\"name\":\"m\",\"port\":9090}]");
    assert_json_eq(want, kop_json_path(o, "spec.ports"), "v1 port wins");
    json_decref(want);
    want = load("{\"repository\":\"a:b\"}");
    assert_json_eq(want, kop_json_path(o, "spec.image"), "image restored");
    json_decref(want);
    /* annotations:{} existed: kept empty */
    ck_assert(json_is_object(kop_json_path(o, "metadata.annotations")));
    ck_assert_uint_eq(json_object_size(kop_json_path(o, "metadata.annotations")), 0);
    json_decref(o);

    o = load("{" V2H ",\"metadata\":{},\"spec\":{\"image\":{\"repository\":\"a:b\"}}}");
    ck_assert_int_eq(kop_conversion_to_v1(o), 0);
    json_object_set_new(json_object_get(o, "spec"), "image", json_string("nginx:2"));
    ck_assert_int_eq(kop_conversion_to_v2(o), 0);
    want = load("{\"repository\":\"nginx\",\"tag\":\"2\"}");
    assert_json_eq(want, kop_json_path(o, "spec.image"), "changed v1 image wins");
    json_decref(want);
    ck_assert_ptr_null(kop_json_path(o, "metadata.annotations"));
    json_decref(o);
}
END_TEST

START_TEST(test_conversion_rejects_non_myresource)
{
    json_t *o = load("{\"apiVersion\":\"example.com/v1\",\"kind\":\"CronTab\"}");
    ck_assert_int_eq(kop_conversion_convert(o, KOP_MYRESOURCE_VERSION_V2), -EINVAL);
    ck_assert_int_eq(kop_conversion_to_v2(NULL), -EINVAL);
    ck_assert_int_eq(kop_conversion_to_v1(NULL), -EINVAL);
    json_decref(o);
    o = load("{" V2H ",\"spec\":{}}");
    ck_assert_int_eq(kop_conversion_convert(o, KOP_MYRESOURCE_VERSION_V2), 0);
    ck_assert_str_eq(kop_json_path_str(o, "apiVersion"), KOP_MYRESOURCE_V2);
    json_decref(o);
}
END_TEST

static Suite *conversion_suite(void)
{
    Suite *s = suite_create("conversion");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_conversion_seed_example);
    tcase_add_test(tc, test_conversion_v1_to_v2_fields);
    tcase_add_test(tc, test_conversion_v2_extras_annotation);
    tcase_add_test(tc, test_conversion_v1_port_wins_over_extras);
    tcase_add_test(tc, test_conversion_rejects_non_myresource);
    tcase_add_test(tc, test_conversion_roundtrip_v2_v1_v2_generated);
    tcase_add_test(tc, test_conversion_roundtrip_v1_v2_v1_generated);
    tcase_add_test(tc, test_conversion_roundtrip_generated_through_reviews);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(conversion_suite());
}
