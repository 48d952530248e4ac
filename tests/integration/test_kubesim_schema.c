/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's typed built-in kinds (tests/kubesim/kschema.c) and its query
 * parsing, against the apiserver's answers: wrong JSON types and int32
 * overflows (400, encoding/json's text), unknown fields under each
 * fieldValidation (Strict 400, Warn pruned with a Warning header, Ignore),
 * enums (422), the members the Go types always serialize (status: {}),
 * patches checked like whole objects, --strict-fields (how kop's own
 * integration tests run kubesim), the real objects of
 * tests/data/vectors/apiserver accepted under Strict, label and field
 * selector syntax errors, and the OpenAPI v2/v3 documents built from the
 * same schema table.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOKEN "kubesim-schema-token"

static struct kop_test_kubesim sim;
static struct kop_test_scratch scratch;
static const char *ca_path; /* scratch.ca, or another kubesim's CA for a while */

static struct kop_test_resp request_at(const char *base, const char *method, const char *path,
                                       const char *ctype, const char *body)
{
    const struct kop_test_http_options o = {
        .ca = ca_path, .token = TOKEN, .ctype = ctype, .timeout_s = 30};
    return kop_test_api_resp(&o, base, method, path, body);
}

static struct kop_test_resp request(const char *method, const char *path, const char *body)
{
    return request_at(sim.url, method, path, NULL, body);
}

/* The request's answer as JSON, asserting the status code. @ref new */
static json_t *request_json(const char *method, const char *path, const char *body, long want)
{
    struct kop_test_resp r = request(method, path, body);
    ck_assert_msg(r.code == want, "%s %s: got %ld want %ld: %s", method, path, r.code, want,
                  r.body);
    json_t *v = json_loads(r.body, 0, NULL);
    ck_assert_msg(v != NULL, "%s %s: not JSON: %.200s", method, path, r.body);
    kop_test_resp_free(&r);
    return v;
}

static void expect_message(const char *method, const char *path, const char *body, long code,
                           const char *message)
{
    json_t *st = request_json(method, path, body, code);
    const char *got = json_string_value(json_object_get(st, "message"));
    ck_assert_msg(got && strcmp(got, message) == 0, "%s %s: message\n  got  %s\n  want %s", method,
                  path, got ? got : "(none)", message);
    json_decref(st);
}

static void start_sim(void)
{
    kop_test_scratch_init(&scratch);
    ca_path = scratch.ca;
    /* Lenient: these tests choose fieldValidation themselves. */
    const struct kop_test_kubesim_options o = {
        .listen = "127.0.0.1:0", .ca = scratch.ca, .token = TOKEN, .lenient_fields = true};
    kop_test_kubesim_start(&sim, &o);
}

static void stop_sim(void)
{
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_scratch_free(&scratch);
    ca_path = NULL;
}

#define SVC "/api/v1/namespaces/default/services"

/* ---- tests ------------------------------------------------------------------- */

START_TEST(test_schema_wrong_types)
{
    expect_message("POST", SVC,
                   "{\"metadata\":{\"name\":\"t1\"},\"spec\":{\"ports\":[{\"port\":\"80\"}]}}", 400,
                   "Service in version \"v1\" cannot be handled as a Service: json: cannot "
                   "unmarshal string into Go struct field ServicePort.spec.ports.port of type "
                   "int32");
    expect_message("POST", SVC,
                   "{\"metadata\":{\"name\":\"t1\"},\"spec\":{\"selector\":{\"x\":true},"
                   "\"ports\":[{\"port\":80}]}}",
                   400,
                   "Service in version \"v1\" cannot be handled as a Service: json: cannot "
                   "unmarshal bool into Go struct field ServiceSpec.spec.selector of type string");
    expect_message("POST", SVC,
                   "{\"metadata\":{\"name\":\"t1\"},\"spec\":{\"ports\":[{\"port\":3000000000}]}}",
                   400,
                   "Service in version \"v1\" cannot be handled as a Service: json: cannot "
                   "unmarshal number 3000000000 into Go struct field ServicePort.spec.ports.port "
                   "of type int32");
    expect_message("POST", "/api/v1/namespaces/default/configmaps",
                   "{\"metadata\":{\"name\":\"t1\",\"labels\":[]},\"data\":{}}", 400,
                   "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot "
                   "unmarshal array into Go struct field ObjectMeta.metadata.labels of type "
                   "map[string]string");
    /* int64 members take what int32 ones refuse. */
    json_t *ok = request_json("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                              "{\"metadata\":{\"name\":\"t1\"},\"spec\":{\"holderIdentity\":\"a\","
                              "\"leaseTransitions\":1}}",
                              201);
    json_decref(ok);
    json_t *st = request_json("GET", SVC "/t1", NULL, 404);
    json_decref(st);
}
END_TEST

START_TEST(test_schema_unknown_fields)
{
    const char *body = "{\"metadata\":{\"name\":\"u1\"},\"spec\":{\"foo\":1,"
                       "\"ports\":[{\"port\":80,\"bar\":\"x\"}]}}";
    expect_message("POST", SVC "?fieldValidation=Strict", body, 400,
                   "Service in version \"v1\" cannot be handled as a Service: strict decoding "
                   "error: unknown field \"spec.foo\", unknown field \"spec.ports[0].bar\"");
    expect_message("POST", SVC "?fieldValidation=strict", body, 422,
                   "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported "
                   "value: \"strict\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\"");

    /* Warn (the default): stored pruned, one Warning per field. */
    struct kop_test_resp r = request("POST", SVC, body);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    ck_assert_msg(
        strstr(r.headers, "Warning: 299 - \"unknown field \\\"spec.foo\\\"\"\r\n") &&
            strstr(r.headers, "Warning: 299 - \"unknown field \\\"spec.ports[0].bar\\\"\"\r\n"),
        "headers: %s", r.headers);
    kop_test_resp_free(&r);
    json_t *got = request_json("GET", SVC "/u1", NULL, 200);
    json_t *spec = json_object_get(got, "spec");
    ck_assert_ptr_null(json_object_get(spec, "foo"));
    ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(spec, "ports"), 0), "bar"));
    json_decref(got);

    /* Ignore: pruned, no warning. */
    r = request("PUT", SVC "/u1?fieldValidation=Ignore",
                "{\"metadata\":{\"name\":\"u1\"},\"spec\":{\"foo\":2,\"ports\":[{\"port\":81}]}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    ck_assert_ptr_null(strstr(r.headers, "Warning:"));
    ck_assert_ptr_null(strstr(r.body, "\"foo\""));
    kop_test_resp_free(&r);

    /* Patches are checked as the object they make. */
    r = request_at(sim.url, "PATCH", SVC "/u1?fieldValidation=Strict",
                   "application/merge-patch+json", "{\"spec\":{\"baz\":true}}");
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "strict decoding error: unknown field \\\"spec.baz\\\""));
    kop_test_resp_free(&r);
    r = request_at(sim.url, "PATCH", SVC "/u1", "application/merge-patch+json",
                   "{\"spec\":{\"type\":7}}");
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "cannot unmarshal number 7 into Go struct field "
                                         "ServiceSpec.spec.type of type string"));
    kop_test_resp_free(&r);
}
END_TEST

/* The apiserver's warning recorder (endpoints/filters/warning.go): the
 * Warning headers of one reply stop at 4096 runes of text (every one cut
 * to 256 runes once they would pass it): 200 unknown fields of 60 runes
 * each give 69 headers, not 200 (more than Go's net/http client reads). */
START_TEST(test_schema_warnings_capped)
{
    char body[20000];
    size_t o = (size_t)snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"w1\"}");
    for (int i = 0; i < 200; i++) /* unknown field "f000aaa...": 60 runes */
        o += (size_t)snprintf(body + o, sizeof(body) - o,
                              ",\"f%03daaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1", i);
    snprintf(body + o, sizeof(body) - o, "}");
    struct kop_test_resp r = request("POST", "/api/v1/namespaces/default/configmaps", body);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    int n = 0;
    for (const char *p = r.headers; (p = strstr(p, "\r\nWarning: ")); p++)
        n++;
    ck_assert_int_eq(n, 69);
    ck_assert_ptr_nonnull(strstr(r.headers, "f068aaaa"));
    ck_assert_ptr_null(strstr(r.headers, "f069aaaa"));
    kop_test_resp_free(&r);
}
END_TEST

/* sigs.k8s.io/json's strict decoding: a member given twice in its object
 * is a "duplicate field" at its full path (list indices included) after
 * the unknown fields, once each; none under an unknown field (the decoder
 * skips its value); the last one given is the one stored. Warn: a Warning
 * each; Ignore: nothing; an update's body too, a patch's not. */
START_TEST(test_schema_duplicate_fields)
{
    const char *body = "{\"metadata\":{\"name\":\"d1\",\"labels\":{\"a\":\"1\",\"a\":\"2\"}},"
                       "\"spec\":{\"ports\":[{\"port\":80,\"port\":81,\"port\":82}],"
                       "\"foo\":{\"z\":1,\"z\":2},\"type\":\"ClusterIP\",\"type\":\"NodePort\"}}";
    expect_message("POST", SVC "?fieldValidation=Strict", body, 400,
                   "Service in version \"v1\" cannot be handled as a Service: strict decoding "
                   "error: unknown field \"spec.foo\", duplicate field \"metadata.labels.a\", "
                   "duplicate field \"spec.ports[0].port\", duplicate field \"spec.type\"");
    struct kop_test_resp r = request("POST", SVC, body);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    ck_assert_msg(
        strstr(r.headers, "Warning: 299 - \"duplicate field \\\"metadata.labels.a\\\"\"\r\n") &&
            strstr(r.headers,
                   "Warning: 299 - \"duplicate field \\\"spec.ports[0].port\\\"\"\r\n") &&
            !strstr(r.headers, "spec.foo.z"),
        "headers: %s", r.headers);
    kop_test_resp_free(&r);
    json_t *got = request_json("GET", SVC "/d1", NULL, 200);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(got, "metadata"), "labels"), "a")),
                     "2");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(got, "spec"), "type")),
                     "NodePort");
    json_decref(got);
    /* an update's body; Ignore */
    expect_message("PUT", SVC "/d1?fieldValidation=Strict",
                   "{\"metadata\":{\"name\":\"d1\",\"name\":\"d1\"},\"spec\":{\"type\":"
                   "\"NodePort\",\"ports\":[{\"port\":81}]}}",
                   400,
                   "Service in version \"v1\" cannot be handled as a Service: strict decoding "
                   "error: duplicate field \"metadata.name\"");
    r = request("POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Ignore",
                "{\"metadata\":{\"name\":\"d2\"},\"data\":{\"k\":\"v\",\"k\":\"w\"}}");
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    ck_assert_ptr_null(strstr(r.headers, "Warning:"));
    kop_test_resp_free(&r);
    /* a patch body is not the object */
    r = request_at(sim.url, "PATCH",
                   "/api/v1/namespaces/default/configmaps/d2?fieldValidation=Strict",
                   "application/merge-patch+json", "{\"data\":{\"k\":\"x\",\"k\":\"y\"}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_schema_enums)
{
    json_t *st = request_json("POST", SVC,
                              "{\"metadata\":{\"name\":\"e1\"},\"spec\":{\"ports\":[{\"port\":80,"
                              "\"protocol\":\"FOO\"}]}}",
                              422);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")),
                     "Service \"e1\" is invalid: spec.ports[0].protocol: Unsupported value: "
                     "\"FOO\": supported values: \"SCTP\", \"TCP\", \"UDP\"");
    json_t *cause = json_array_get(json_object_get(json_object_get(st, "details"), "causes"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(cause, "reason")), "FieldValueNotSupported");
    ck_assert_str_eq(json_string_value(json_object_get(cause, "field")), "spec.ports[0].protocol");
    json_decref(st);
    /* the value as Go's %q prints it */
    st = request_json("POST", "/api/v1/namespaces/default/pods",
                      "{\"metadata\":{\"name\":\"e2\"},\"spec\":{\"containers\":[{\"name\":"
                      "\"c\",\"image\":\"nginx\",\"imagePullPolicy\":\"a\\\"b\"}]}}",
                      422);
    ck_assert_str_eq(json_string_value(json_object_get(st, "message")),
                     "Pod \"e2\" is invalid: spec.containers[0].imagePullPolicy: Unsupported "
                     "value: \"a\\\"b\": supported values: \"Always\", \"IfNotPresent\", "
                     "\"Never\"");
    json_decref(st);
    /* "" is no enum's refusal: a toleration's empty operator means Equal,
     * its empty effect every effect (ValidateTolerations takes both) */
    json_decref(request_json("POST", "/api/v1/namespaces/default/pods",
                             "{\"metadata\":{\"name\":\"e3\"},\"spec\":{\"containers\":[{"
                             "\"name\":\"c\",\"image\":\"nginx\"}],\"tolerations\":[{\"key\":"
                             "\"k\",\"operator\":\"\",\"value\":\"v\",\"effect\":\"\"}]}}",
                             201));
}
END_TEST

START_TEST(test_schema_always_serialized_members)
{
    json_t *d = request_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments",
        "{\"metadata\":{\"name\":\"d1\"},\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},"
        "\"template\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{\"containers\":[{"
        "\"name\":\"c\",\"image\":\"nginx\"}]}}}}",
        201);
    ck_assert_msg(json_is_object(json_object_get(d, "status")), "no status: %s",
                  json_dumps(d, JSON_COMPACT));
    json_decref(d);
    /* What python3-kubernetes' read_namespaced_deployment_status reads. */
    d = request_json("GET", "/apis/apps/v1/namespaces/default/deployments/d1/status", NULL, 200);
    ck_assert(json_is_object(json_object_get(d, "status")));
    json_decref(d);
    json_t *ns =
        request_json("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"s1\"}}", 201);
    ck_assert(json_is_object(json_object_get(ns, "status")));
    json_decref(ns);
}
END_TEST

/* Every real apiserver object in tests/data/vectors/apiserver that kubesim
 * serves passes the Strict checks unchanged (dry run). */
static void vector_accepted(json_t *obj, const char *path)
{
    json_t *md = json_object_get(obj, "metadata");
    json_object_del(md, "resourceVersion");
    json_object_del(md, "uid");
    json_object_del(md, "namespace");
    json_object_del(md, "managedFields");
    char *body = json_dumps(obj, JSON_COMPACT);
    char url[512];
    snprintf(url, sizeof(url), "%s?fieldValidation=Strict&dryRun=All", path);
    struct kop_test_resp r = request("POST", url, body);
    ck_assert_msg(r.code == 201, "%s: %ld %s", path, r.code, r.body);
    ck_assert_msg(!strstr(r.headers, "Warning:"), "%s: %s", path, r.headers);
    kop_test_resp_free(&r);
    free(body);
}

static json_t *load_vector(const char *name)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "vectors/apiserver/%s", name);
    char *p = kop_test_data_path(rel);
    json_error_t err;
    json_t *v = json_load_file(p, 0, &err);
    ck_assert_msg(v != NULL, "%s: %s", p, err.text);
    free(p);
    return v;
}

START_TEST(test_schema_real_objects_accepted)
{
    json_t *l = load_vector("deployment_list_kube_system_v1.36.json");
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(l, "items"), i, item)
    {
        json_object_del(item, "status"); /* newer members than the table's release */
        vector_accepted(item, "/apis/apps/v1/namespaces/default/deployments");
    }
    json_decref(l);
    json_t *crd = load_vector("crd_create_201_v1.36.json");
    json_object_del(crd, "status");
    vector_accepted(crd, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    json_decref(crd);
    json_t *ev = load_vector("event_core_v1_gke_kubectl_json.json");
    vector_accepted(ev, "/api/v1/namespaces/default/events");
    json_decref(ev);
    /* The upstream serializer fixtures set every member of their kind
     * (metadata aside, which kubesim also checks for names and UIDs). */
    static const char *const full[][2] = {
        {"lease_serializer_fieldorder_HEAD.json",
         "/apis/coordination.k8s.io/v1/namespaces/default/leases"},
        {"event_serializer_fieldorder_HEAD.json", "/api/v1/namespaces/default/events"},
    };
    for (size_t f = 0; f < sizeof(full) / sizeof(full[0]); f++) {
        json_t *o = load_vector(full[f][0]);
        json_object_set_new(o, "metadata", json_pack("{s:s}", "name", "full"));
        vector_accepted(o, full[f][1]);
        json_decref(o);
    }
}
END_TEST

START_TEST(test_schema_strict_fields_flag)
{
    /* How kop's own integration tests run kubesim: every write Strict, even
     * when the request says Warn. */
    struct kop_test_kubesim strict;
    char ca2[1024];
    snprintf(ca2, sizeof(ca2), "%s/ca2.pem", scratch.dir);
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0", .ca = ca2, .token = TOKEN};
    kop_test_kubesim_start(&strict, &o);
    const char *saved = ca_path;
    ca_path = ca2;
    struct kop_test_resp r =
        request_at(strict.url, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
                   NULL, "{\"metadata\":{\"name\":\"c\"},\"dta\":{}}");
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "unknown field \\\"dta\\\""));
    kop_test_resp_free(&r);
    ca_path = saved;
    ck_assert_int_eq(kop_test_kubesim_stop(&strict, SIGTERM, 5000), 0);
}
END_TEST

/* labelSelector and fieldSelector syntax errors: 400 with the texts of
 * apimachinery's labels and fields parsers. */
START_TEST(test_schema_selector_errors)
{
    static const struct {
        const char *query, *message;
    } cases[] = {
        {"labelSelector=a%20in%20b", "unable to parse requirement: found 'b' expected: '('"},
        {"labelSelector=a%20b",
         "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"},
        {"labelSelector=!", "unable to parse requirement: found '', expected: identifier"},
        {"labelSelector=a%3Db%2C", "found '', expected: identifier after ','"},
        {"labelSelector=a%3Db%20c", "found 'c', expected: ',' or 'end of string'"},
        {"labelSelector=%2Ca", "found ',', expected: !, identifier, or 'end of string'"},
        {"labelSelector=c%20notin%20(x", "unable to parse requirement: found '', expected: ',' or "
                                         "')'"},
        {"labelSelector=a%3E1x", "unable to parse requirement: values[0]: Invalid value: \"1x\": "
                                 "for 'Gt', 'Lt' operators, the value must be an integer"},
        {"labelSelector=a%20b%3Dc", "unable to parse requirement: found 'b', expected: in, notin, "
                                    "=, ==, !=, gt, lt"},
        {"labelSelector=a_%3Dc",
         "unable to parse requirement: <nil>: Invalid value: \"a_\": name part must consist of "
         "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
         "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
        {"labelSelector=a%3Dc-",
         "unable to parse requirement: values[0][a]: Invalid value: \"c-\": a valid label must be "
         "an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
         "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
         "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"},
        {"fieldSelector=metadata.name", "invalid selector: 'metadata.name'; can't understand "
                                        "'metadata.name'"},
        {"fieldSelector=spec.foo%3Dx", "field label not supported: spec.foo"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "/api/v1/namespaces?%s", cases[i].query);
        expect_message("GET", path, NULL, 400, cases[i].message);
        snprintf(path, sizeof(path), "/api/v1/namespaces?watch=1&%s", cases[i].query);
        expect_message("GET", path, NULL, 400, cases[i].message);
    }
    /* Valid ones, the odd corners of the grammar included. */
    static const char *const ok[] = {
        "labelSelector=x%20in%20(foo,,baz),y,z%20notin%20()",
        "labelSelector=a%20in%20(in),!b",
        "labelSelector=n%3E3,n%3C10",
        "fieldSelector=metadata.name%3D%3Ddefault,status.phase!%3DTerminating",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "/api/v1/namespaces?%s", ok[i]);
        json_t *l = request_json("GET", path, NULL, 200);
        json_decref(l);
    }
    json_t *l = request_json(
        "GET", "/api/v1/namespaces?fieldSelector=metadata.name%3D%3Ddefault,status.phase%3DActive",
        NULL, 200);
    ck_assert_int_eq(json_array_size(json_object_get(l, "items")), 1);
    json_decref(l);
}
END_TEST

/* Custom resources: unknown fields against the CRD's structural schema
 * under each fieldValidation, the status subresource included. */
START_TEST(test_schema_custom_resource_unknown_fields)
{
    json_t *crd = request_json(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "{\"metadata\":{\"name\":\"widgets.example.com\"},\"spec\":{\"group\":\"example.com\","
        "\"scope\":\"Namespaced\",\"names\":{\"plural\":\"widgets\",\"singular\":\"widget\","
        "\"kind\":\"Widget\",\"listKind\":\"WidgetList\"},\"versions\":[{\"name\":\"v1\","
        "\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},\"schema\":{"
        "\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"
        "\"object\",\"properties\":{\"size\":{\"type\":\"integer\"},\"items\":{\"type\":"
        "\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":"
        "\"string\"}}}}}},\"status\":{\"type\":\"object\",\"properties\":{\"ready\":{"
        "\"type\":\"boolean\"}}}}}}}]}}",
        201);
    json_decref(crd);
    const char *path = "/apis/example.com/v1/namespaces/default/widgets";
    struct kop_test_resp r = {0};
    for (int i = 0; i < 200; i++) {
        r = request("GET", path, NULL);
        if (r.code == 200)
            break;
        kop_test_resp_free(&r);
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_eq(r.code, 200);
    kop_test_resp_free(&r);

    const char *body = "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{"
                       "\"name\":\"w1\"},\"spec\":{\"size\":1,\"colour\":\"red\",\"items\":[{"
                       "\"n\":\"a\",\"x\":1}]}}";
    char url[256];
    snprintf(url, sizeof(url), "%s?fieldValidation=Strict", path);
    expect_message("POST", url, body, 400,
                   "Widget in version \"v1\" cannot be handled as a Widget: strict decoding "
                   "error: unknown field \"spec.colour\", unknown field \"spec.items[0].x\"");
    /* the decoder's duplicates come first (it decodes into maps: anywhere) */
    expect_message("POST", url,
                   "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{"
                   "\"name\":\"w0\"},\"spec\":{\"size\":1,\"size\":2,\"colour\":{\"a\":1,"
                   "\"a\":2}}}",
                   400,
                   "Widget in version \"v1\" cannot be handled as a Widget: strict decoding "
                   "error: duplicate field \"spec.size\", duplicate field \"spec.colour.a\", "
                   "unknown field \"spec.colour\"");
    r = request("POST", path, body);
    ck_assert_msg(r.code == 201, "%ld %s", r.code, r.body);
    ck_assert_msg(strstr(r.headers, "Warning: 299 - \"unknown field \\\"spec.colour\\\"\"\r\n"),
                  "headers: %s", r.headers);
    ck_assert_ptr_null(strstr(r.body, "colour"));
    kop_test_resp_free(&r);
    r = request_at(sim.url, "PATCH",
                   "/apis/example.com/v1/namespaces/default/widgets/w1"
                   "?fieldValidation=Strict",
                   "application/merge-patch+json", "{\"metadata\":{\"lables\":{\"a\":\"b\"}}}");
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "unknown field \\\"metadata.lables\\\""));
    kop_test_resp_free(&r);
    /* The status subresource too (what kop's status writes go through). */
    r = request_at(sim.url, "PATCH",
                   "/apis/example.com/v1/namespaces/default/widgets/w1/status"
                   "?fieldValidation=Strict",
                   "application/merge-patch+json", "{\"status\":{\"ready\":true,\"phase\":\"x\"}}");
    ck_assert_int_eq(r.code, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "unknown field \\\"status.phase\\\""));
    kop_test_resp_free(&r);
    r = request_at(sim.url, "PATCH",
                   "/apis/example.com/v1/namespaces/default/widgets/w1/status"
                   "?fieldValidation=Ignore",
                   "application/merge-patch+json", "{\"status\":{\"ready\":true,\"phase\":\"x\"}}");
    ck_assert_msg(r.code == 200, "%ld %s", r.code, r.body);
    ck_assert_ptr_null(strstr(r.headers, "Warning:"));
    ck_assert_ptr_nonnull(strstr(r.body, "\"ready\":true"));
    kop_test_resp_free(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kubesim_schema");
    TCase *tc = tcase_create("schema");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, start_sim, stop_sim);
    tcase_add_test(tc, test_schema_wrong_types);
    tcase_add_test(tc, test_schema_unknown_fields);
    tcase_add_test(tc, test_schema_warnings_capped);
    tcase_add_test(tc, test_schema_duplicate_fields);
    tcase_add_test(tc, test_schema_enums);
    tcase_add_test(tc, test_schema_always_serialized_members);
    tcase_add_test(tc, test_schema_real_objects_accepted);
    tcase_add_test(tc, test_schema_strict_fields_flag);
    tcase_add_test(tc, test_schema_selector_errors);
    tcase_add_test(tc, test_schema_custom_resource_unknown_fields);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
