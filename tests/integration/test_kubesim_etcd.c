/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's etcd request size limit (tests/kubesim/etcd.c) against a real
 * apiserver's answers: a write whose stored form is over etcd's 1.5 MiB
 * request limit (but under the apiserver's 3 MiB body limit) is a 500
 * whose Status has no reason and the message "etcdserver: request is too
 * large"; one over the etcd client's 2 MiB send limit carries gRPC's
 * ResourceExhausted text instead. Nothing is stored, no watch event is
 * sent, an updated object stays as it was. A create, update or patch that
 * fits without its metadata.managedFields is tried once more without them
 * and stored so; a server-side apply is not. A dry run never reaches etcd.
 */
#include "kubetest.h"
#include "testutil.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN "kubesim-etcd-token"
#define DEPLOYS "/apis/apps/v1/namespaces/default/deployments"
#define TOO_LARGE                                                                                  \
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","           \
    "\"message\":\"etcdserver: request is too large\",\"code\":500}\n"
#define SEND_PREFIX                                                                                \
    "rpc error: code = ResourceExhausted desc = trying to send message larger than max ("
#define SEND_SUFFIX " vs. 2097152)"
/* Environment variables whose managedFields entries (about 60 bytes each)
 * take a Deployment over etcd's limit, which it is well under without
 * them (about 13 bytes each in protobuf). */
#define MANY_ENV 25000

static struct kop_test_scratch scratch;
static struct kop_test_kubesim sim;

static struct kop_test_resp request_h(const char *method, const char *path, const char *ctype,
                                      const char *body, const char *header)
{
    const struct kop_test_http_options o = {
        .ca = scratch.ca, .token = TOKEN, .ctype = ctype, .header = header, .timeout_s = 120};
    return kop_test_api_resp(&o, sim.url, method, path, body);
}

static struct kop_test_resp request(const char *method, const char *path, const char *ctype,
                                    const char *body)
{
    return request_h(method, path, ctype, body, NULL);
}

static void start_sim(void)
{
    kop_test_scratch_init(&scratch);
    kop_test_scratch_kubesim(&scratch, &sim, TOKEN, NULL);
}

static void stop_sim(void)
{
    int st = kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    ck_assert_msg(st == 0, "kubesim exit status %d", st);
    kop_test_scratch_free(&scratch);
}

/* n strings of len bytes ('a'). @ref new */
static json_t *big_strings(size_t n, size_t len)
{
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    memset(s, 'a', len);
    s[len] = '\0';
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(s));
    free(s);
    return a;
}

/* n environment variables E0..E<n-1>, each "v". @ref new */
static json_t *many_env(size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "E%zu", i);
        json_array_append_new(a, json_pack("{s:s,s:s}", "name", name, "value", "v"));
    }
    return a;
}

/* The container "c": args of nargs strings of arg_len bytes and nenv
 * variables. @ref new */
static json_t *container(size_t nargs, size_t arg_len, size_t nenv)
{
    json_t *c = json_pack("{s:s,s:s}", "name", "c", "image", "busybox");
    if (nargs)
        json_object_set_new(c, "args", big_strings(nargs, arg_len));
    if (nenv)
        json_object_set_new(c, "env", many_env(nenv));
    return c;
}

/* A Deployment of no replicas named name with container(). @ref new */
static json_t *deployment(const char *name, size_t nargs, size_t arg_len, size_t nenv)
{
    return json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:{s:{s:s}},s:{s:{s:{s:s}},s:{s:[o]}}}}",
                     "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", name,
                     "spec", "replicas", 0, "selector", "matchLabels", "app", name, "template",
                     "metadata", "labels", "app", name, "spec", "containers",
                     container(nargs, arg_len, nenv));
}

/* method path with v (@ref steal) as its body. */
static struct kop_test_resp send_json(const char *method, const char *path, const char *ctype,
                                      json_t *v)
{
    char *body = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    ck_assert_ptr_nonnull(body);
    struct kop_test_resp r = request(method, path, ctype, body);
    free(body);
    return r;
}

static json_t *parse(const struct kop_test_resp *r)
{
    json_t *v = json_loads(r->body, 0, NULL);
    ck_assert_msg(v != NULL, "not JSON: %.200s", r->body);
    return v;
}

/* GET path: the object (@ref new), or NULL on a 404. */
static json_t *get(const char *path)
{
    struct kop_test_resp r = request("GET", path, NULL, NULL);
    ck_assert_msg(r.code == 200 || r.code == 404, "GET %s: %ld %.300s", path, r.code, r.body);
    json_t *v = r.code == 200 ? parse(&r) : NULL;
    kop_test_resp_free(&r);
    return v;
}

static void expect_too_large(struct kop_test_resp *r)
{
    ck_assert_msg(r->code == 500, "got %ld: %.300s", r->code, r->body);
    ck_assert_str_eq(r->body, TOO_LARGE);
    kop_test_resp_free(r);
}

static const json_t *md_of(const json_t *obj, const char *k)
{
    return json_object_get(json_object_get(obj, "metadata"), k);
}

static const json_t *container_of(const json_t *dep)
{
    const json_t *spec = json_object_get(json_object_get(dep, "spec"), "template");
    return json_array_get(json_object_get(json_object_get(spec, "spec"), "containers"), 0);
}

/* The Deployment's container's list k ("args", "env"). */
static size_t list_size(const json_t *dep, const char *k)
{
    return json_array_size(json_object_get(container_of(dep), k));
}

/* Has obj a managedFields entry of manager? */
static bool has_manager(const json_t *obj, const char *manager)
{
    size_t i;
    const json_t *e;
    json_array_foreach(md_of(obj, "managedFields"), i, e)
    {
        const char *m = json_string_value(json_object_get(e, "manager"));
        if (m && strcmp(m, manager) == 0)
            return true;
    }
    return false;
}

/* Create a Deployment of one short arg: the stored object. @ref new */
static json_t *create_small(const char *name)
{
    struct kop_test_resp r = send_json("POST", DEPLOYS, NULL, deployment(name, 1, 8, 0));
    ck_assert_msg(r.code == 201, "POST %s: %ld %.300s", name, r.code, r.body);
    json_t *v = parse(&r);
    kop_test_resp_free(&r);
    return v;
}

/* PUT the Deployment name as it is with one managedFields entry, of the
 * manager "bulky", owning its first n environment variables: the update
 * must succeed. */
static void put_managed_fields(const char *name, size_t n)
{
    char path[256];
    snprintf(path, sizeof(path), DEPLOYS "/%s", name);
    json_t *obj = get(path);
    ck_assert_ptr_nonnull(obj);
    json_t *md = json_object_get(obj, "metadata");
    json_object_del(md, "resourceVersion"); /* its controller may write meanwhile */
    json_t *env = json_object();
    for (size_t i = 0; i < n; i++) {
        char k[64];
        snprintf(k, sizeof(k), "k:{\"name\":\"E%zu\"}", i);
        json_object_set_new(env, k, json_pack("{s:{},s:{},s:{}}", ".", "f:name", "f:value"));
    }
    json_t *entry =
        json_pack("{s:s,s:s,s:s,s:s,s:{s:{s:{s:{s:{s:{s:o}}}}}}}", "manager", "bulky", "operation",
                  "Update", "apiVersion", "apps/v1", "fieldsType", "FieldsV1", "fieldsV1", "f:spec",
                  "f:template", "f:spec", "f:containers", "k:{\"name\":\"c\"}", "f:env", env);
    json_object_set_new(md, "managedFields", json_pack("[o]", entry));
    struct kop_test_resp r = send_json("PUT", path, NULL, obj);
    ck_assert_msg(r.code == 200, "PUT %s with managedFields: %ld %.300s", name, r.code, r.body);
    kop_test_resp_free(&r);
}

/* ---- tests ------------------------------------------------------------------- */

/* A Deployment of about 1.75 MB (protobuf): a 500 with the Status of an
 * error that is not an APIStatus (no reason, no details), in protobuf for
 * a client that takes only protobuf; nothing stored, no watch event. A dry
 * run is not written to etcd: 201. */
START_TEST(test_create_over_request_limit)
{
    json_t *list = get(DEPLOYS);
    char rv[64];
    snprintf(rv, sizeof(rv), "%s", json_string_value(md_of(list, "resourceVersion")));
    json_decref(list);

    struct kop_test_resp r = send_json("POST", DEPLOYS, NULL, deployment("big", 35, 50000, 0));
    expect_too_large(&r);
    ck_assert_ptr_null(get(DEPLOYS "/big"));

    /* no event for it */
    char path[256];
    snprintf(path, sizeof(path),
             DEPLOYS "?watch=1&resourceVersion=%s&timeoutSeconds=1"
                     "&fieldSelector=metadata.name%%3Dbig",
             rv);
    r = request("GET", path, NULL, NULL);
    ck_assert_msg(r.code == 200 && r.len == 0, "watch: %ld %.300s", r.code, r.body);
    kop_test_resp_free(&r);

    /* in protobuf: the same Status */
    json_t *d = deployment("big", 35, 50000, 0);
    char *body = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    r = request_h("POST", DEPLOYS, NULL, body, "Accept: application/vnd.kubernetes.protobuf");
    ck_assert_int_eq(r.code, 500);
    ck_assert_ptr_nonnull(strstr(r.headers, "application/vnd.kubernetes.protobuf"));
    ck_assert(r.len > 4 && memcmp(r.body, "k8s\0", 4) == 0);
    static const char msg[] = "etcdserver: request is too large";
    ck_assert_ptr_nonnull(memmem(r.body, r.len, msg, sizeof(msg) - 1));
    ck_assert_ptr_null(memmem(r.body, r.len, "InternalError", 13));
    kop_test_resp_free(&r);

    /* a dry run: admitted and answered, never sent to etcd */
    r = request("POST", DEPLOYS "?dryRun=All", NULL, body);
    ck_assert_msg(r.code == 201, "dry run: %ld %.300s", r.code, r.body);
    kop_test_resp_free(&r);
    free(body);
    ck_assert_ptr_null(get(DEPLOYS "/big"));
}
END_TEST

/* A custom resource is stored as JSON: one of about 1.75 MB is refused
 * alike. */
START_TEST(test_create_custom_resource_over_request_limit)
{
    struct kop_test_resp r = request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", NULL,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","
        "\"metadata\":{\"name\":\"blobs.etcd.example.com\"},\"spec\":{\"group\":"
        "\"etcd.example.com\",\"scope\":\"Namespaced\",\"names\":{\"plural\":\"blobs\","
        "\"kind\":\"Blob\"},\"versions\":[{\"name\":\"v1\",\"served\":true,\"storage\":true,"
        "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{"
        "\"type\":\"object\",\"properties\":{\"data\":{\"type\":\"string\"}}}}}}}]}}");
    ck_assert_msg(r.code == 201, "CRD: %ld %.300s", r.code, r.body);
    kop_test_resp_free(&r);

    const char *blobs = "/apis/etcd.example.com/v1/namespaces/default/blobs";
    json_t *data = big_strings(1, 1750000);
    json_t *blob =
        json_pack("{s:s,s:s,s:{s:s},s:{s:O}}", "apiVersion", "etcd.example.com/v1", "kind", "Blob",
                  "metadata", "name", "big", "spec", "data", json_array_get(data, 0));
    r = send_json("POST", blobs, NULL, blob);
    expect_too_large(&r);
    ck_assert_ptr_null(get("/apis/etcd.example.com/v1/namespaces/default/blobs/big"));

    /* one of 1.4 MB fits */
    blob = json_pack("{s:s,s:s,s:{s:s},s:{s:s%}}", "apiVersion", "etcd.example.com/v1", "kind",
                     "Blob", "metadata", "name", "fits", "spec", "data",
                     json_string_value(json_array_get(data, 0)), (size_t)1400000);
    json_decref(data);
    r = send_json("POST", blobs, NULL, blob);
    ck_assert_msg(r.code == 201, "1.4 MB: %ld %.300s", r.code, r.body);
    kop_test_resp_free(&r);
}
END_TEST

/* A Deployment of about 2.5 MB, still under the apiserver's 3 MiB body
 * limit: larger than the etcd client sends, gRPC's ResourceExhausted. */
START_TEST(test_create_over_send_limit)
{
    struct kop_test_resp r = send_json("POST", DEPLOYS, NULL, deployment("huge", 50, 50000, 0));
    ck_assert_msg(r.code == 500, "got %ld: %.300s", r.code, r.body);
    json_t *st = parse(&r);
    kop_test_resp_free(&r);
    ck_assert_str_eq(json_string_value(json_object_get(st, "kind")), "Status");
    ck_assert_str_eq(json_string_value(json_object_get(st, "status")), "Failure");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 500);
    ck_assert_ptr_null(json_object_get(st, "reason"));
    ck_assert_ptr_null(json_object_get(st, "details"));
    const char *msg = json_string_value(json_object_get(st, "message"));
    ck_assert_ptr_nonnull(msg);
    size_t n = strlen(msg);
    ck_assert_msg(strncmp(msg, SEND_PREFIX, strlen(SEND_PREFIX)) == 0, "%s", msg);
    ck_assert_msg(n > strlen(SEND_SUFFIX) &&
                      strcmp(msg + n - strlen(SEND_SUFFIX), SEND_SUFFIX) == 0,
                  "%s", msg);
    long size = strtol(msg + strlen(SEND_PREFIX), NULL, 10);
    ck_assert_msg(size > 2097152 && size < 3145728, "%s", msg);
    json_decref(st);
    ck_assert_ptr_null(get(DEPLOYS "/huge"));
}
END_TEST

/* An object over the limit with its managedFields and under it without:
 * a create, an update and a patch are tried again without them and stored
 * so; an update that sends large managedFields of its own likewise. */
START_TEST(test_retry_without_managed_fields)
{
    /* create: the creator's entry lists every variable */
    struct kop_test_resp r =
        send_json("POST", DEPLOYS, NULL, deployment("mf-create", 0, 0, MANY_ENV));
    ck_assert_msg(r.code == 201, "POST: %ld %.300s", r.code, r.body);
    json_t *v = parse(&r);
    kop_test_resp_free(&r);
    ck_assert_ptr_null(md_of(v, "managedFields"));
    json_decref(v);
    v = get(DEPLOYS "/mf-create");
    ck_assert_ptr_nonnull(v);
    ck_assert_ptr_null(md_of(v, "managedFields"));
    ck_assert_uint_eq(list_size(v, "env"), MANY_ENV);
    json_decref(v);

    /* update (PUT) */
    json_t *cur = create_small("mf-put");
    ck_assert_ptr_nonnull(md_of(cur, "managedFields"));
    json_decref(cur);
    r = send_json("PUT", DEPLOYS "/mf-put", NULL, deployment("mf-put", 0, 0, MANY_ENV));
    ck_assert_msg(r.code == 200, "PUT: %ld %.300s", r.code, r.body);
    kop_test_resp_free(&r);
    v = get(DEPLOYS "/mf-put");
    ck_assert_ptr_null(md_of(v, "managedFields"));
    ck_assert_uint_eq(list_size(v, "env"), MANY_ENV);
    json_decref(v);

    /* merge patch */
    json_decref(create_small("mf-patch"));
    r = send_json("PATCH", DEPLOYS "/mf-patch", "application/merge-patch+json",
                  json_pack("{s:{s:{s:{s:[o]}}}}", "spec", "template", "spec", "containers",
                            container(0, 0, MANY_ENV)));
    ck_assert_msg(r.code == 200, "PATCH: %ld %.300s", r.code, r.body);
    v = parse(&r);
    kop_test_resp_free(&r);
    ck_assert_ptr_null(md_of(v, "managedFields"));
    ck_assert_uint_eq(list_size(v, "env"), MANY_ENV);
    json_decref(v);

    /* an update whose body carries managedFields: a write that carries
     * them sets them (a few are kept); about 1.5 MB of them are what is
     * too large */
    put_managed_fields("mf-put", 10);
    v = get(DEPLOYS "/mf-put");
    ck_assert(has_manager(v, "bulky"));
    json_decref(v);
    put_managed_fields("mf-put", MANY_ENV);
    v = get(DEPLOYS "/mf-put");
    ck_assert_ptr_null(md_of(v, "managedFields"));
    ck_assert_uint_eq(list_size(v, "env"), MANY_ENV);
    json_decref(v);
}
END_TEST

/* An update or patch that makes an object too large: a 500, whether or
 * not its managedFields go (the args alone are too large); the object is
 * as it was (its spec and generation: the Deployment controller may
 * write its status meanwhile). */
START_TEST(test_update_over_request_limit)
{
    json_decref(create_small("grow"));
    json_t *cur = get(DEPLOYS "/grow");

    struct kop_test_resp r =
        send_json("PUT", DEPLOYS "/grow", NULL, deployment("grow", 35, 50000, 0));
    expect_too_large(&r);

    r = send_json("PATCH", DEPLOYS "/grow", "application/merge-patch+json",
                  json_pack("{s:{s:{s:{s:[o]}}}}", "spec", "template", "spec", "containers",
                            container(35, 50000, 0)));
    expect_too_large(&r);

    r = send_json("PATCH", DEPLOYS "/grow", "application/json-patch+json",
                  json_pack("[{s:s,s:s,s:o}]", "op", "add", "path",
                            "/spec/template/spec/containers/0/args", "value",
                            big_strings(35, 50000)));
    expect_too_large(&r);

    r = send_json("PATCH", DEPLOYS "/grow", "application/strategic-merge-patch+json",
                  json_pack("{s:{s:{s:{s:[o]}}}}", "spec", "template", "spec", "containers",
                            container(35, 50000, 0)));
    expect_too_large(&r);

    json_t *now = get(DEPLOYS "/grow");
    ck_assert_ptr_nonnull(now);
    ck_assert(json_equal(json_object_get(now, "spec"), json_object_get(cur, "spec")));
    ck_assert(json_equal(md_of(now, "generation"), md_of(cur, "generation")));
    ck_assert_uint_eq(list_size(now, "args"), 1);
    json_decref(now);
    json_decref(cur);
}
END_TEST

/* A server-side apply is not tried again without managedFields: the
 * object a create stores without them (test_retry_without_managed_fields)
 * is refused when applied. */
START_TEST(test_apply_not_retried)
{
    struct kop_test_resp r =
        send_json("PATCH", DEPLOYS "/mf-apply?fieldManager=etcd-test",
                  "application/apply-patch+yaml", deployment("mf-apply", 0, 0, MANY_ENV));
    expect_too_large(&r);
    ck_assert_ptr_null(get(DEPLOYS "/mf-apply"));

    /* an apply to an existing object alike */
    json_decref(create_small("mf-apply"));
    r = send_json("PATCH", DEPLOYS "/mf-apply?fieldManager=etcd-test",
                  "application/apply-patch+yaml", deployment("mf-apply", 0, 0, MANY_ENV));
    expect_too_large(&r);
    json_t *v = get(DEPLOYS "/mf-apply");
    ck_assert_uint_eq(list_size(v, "env"), 0);
    json_decref(v);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("kubesim_etcd");
    TCase *tc = tcase_create("etcd");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, start_sim, stop_sim);
    tcase_add_test(tc, test_create_over_request_limit);
    tcase_add_test(tc, test_create_custom_resource_over_request_limit);
    tcase_add_test(tc, test_create_over_send_limit);
    tcase_add_test(tc, test_retry_without_managed_fields);
    tcase_add_test(tc, test_update_over_request_limit);
    tcase_add_test(tc, test_apply_not_retried);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
