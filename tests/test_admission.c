/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the validating admission rules: every rule, all violations in
 * one message with field paths in the client's version, ratcheting on
 * UPDATE, deletion, other kinds and operations, warnings, rule 4 through a
 * fake child lookup, duplicate detection, and requests with tens of
 * thousands of ports (the message lists at most KOP_ADMISSION_MAX_LISTED
 * violations, then "and N more"; timings belong in benchmarks, not here).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/admission.h"
#include "kop/myresource.h"
#include "testutil.h"

#define SHA "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static json_t *request(const char *op, const char *object, const char *old)
{
    char buf[8192];
    snprintf(buf, sizeof(buf),
             "{\"uid\":\"u1\",\"kind\":{\"group\":\"mygroup.example.com\",\"version\":\"v2\","
             "\"kind\":\"MyResource\"},\"resource\":{\"group\":\"mygroup.example.com\","
             "\"version\":\"v2\",\"resource\":\"myresources\"},\"namespace\":\"ns\","
             "\"operation\":\"%s\",\"object\":%s,\"oldObject\":%s,\"dryRun\":false}",
             op, object, old ? old : "null");
    json_error_t err;
    json_t *r = json_loads(buf, 0, &err);
    ck_assert_msg(r != NULL, "%s: %s", err.text, buf);
    return r;
}

static struct kop_admission_verdict eval(const char *op, const char *object, const char *old,
                                         const struct kop_admission_options *opts)
{
    struct kop_admission_verdict v;
    json_t *r = request(op, object, old);
    ck_assert_int_eq(kop_admission_evaluate(r, opts, &v), 0);
    json_decref(r);
    return v;
}

#define V1(name, spec)                                                                             \
    "{\"apiVersion\":\"mygroup.example.com/"                                                       \
    "v1\",\"kind\":\"MyResource\",\"metadata\":{\"name\":\"" name                                  \
    "\",\"uid\":\"me\"},\"spec\":" spec "}"
#define V2(name, spec)                                                                             \
    "{\"apiVersion\":\"mygroup.example.com/"                                                       \
    "v2\",\"kind\":\"MyResource\",\"metadata\":{\"name\":\"" name                                  \
    "\",\"uid\":\"me\"},\"spec\":" spec "}"

static void has(const struct kop_admission_verdict *v, const char *needle)
{
    ck_assert_msg(v->message && strstr(v->message, needle), "missing <%s> in <%s>", needle,
                  v->message ? v->message : "(null)");
}

START_TEST(test_admission_valid_objects_allowed)
{
    struct kop_admission_verdict v =
        eval("CREATE",
             V2("web", "{\"replicas\":3,\"image\":{\"repository\":\"nginx\",\"tag\":"
                       "\"1.25\"},\"ports\":[{\"name\":\"http\",\"port\":80},{\"name\":"
                       "\"dns\",\"port\":53,\"protocol\":\"UDP\"}],\"service\":{\"type\":"
                       "\"NodePort\"},\"paused\":false}"),
             NULL, NULL);
    ck_assert(v.allowed);
    ck_assert_ptr_null(v.message);
    ck_assert_uint_eq(v.n_warnings, 0);
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V1("example-resource", "{\"replicas\":3}"), NULL, NULL);
    ck_assert(v.allowed);
    ck_assert_uint_eq(v.n_warnings, 1);
    ck_assert_str_eq(v.warnings[0], "mygroup.example.com/v1 MyResource is deprecated; use v2");
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_all_violations_v2)
{
    char *allowed[] = {"docker.io"};
    struct kop_admission_options o = {.allowed_registries = allowed, .n_allowed_registries = 1};
    struct kop_admission_verdict v = eval(
        "CREATE",
        V2("Bad_Name", "{\"replicas\":1001,\"image\":{\"repository\":\"quay.io/Team/App\",\"tag\":"
                       "\"bad tag\",\"digest\":\"sha256:xyz\"},\"ports\":[{\"name\":\"http\","
                       "\"port\":80},{\"name\":\"HTTP\",\"port\":70000,\"protocol\":\"ICMP\"},"
                       "{\"name\":\"http\",\"port\":80}],\"service\":{\"type\":\"Bogus\"}}"),
        NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "MyResource.mygroup.example.com \"Bad_Name\" is invalid: [");
    has(&v, "metadata.name: Invalid value: \"Bad_Name\": a DNS-1035 label must consist of lower "
            "case alphanumeric characters or '-', start with an alphabetic character, and end with "
            "an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation "
            "is '[a-z]([-a-z0-9]*[a-z0-9])?')");
    has(&v, "spec.replicas: Invalid value: 1001: must be between 0 and 1000, inclusive");
    has(&v, "spec.image.repository: Invalid value: \"quay.io/Team/App\": repository name must be "
            "lowercase");
    has(&v, "spec.image.tag: Invalid value: \"bad tag\":");
    has(&v, "spec.image.digest: Invalid value: \"sha256:xyz\":");
    has(&v, "spec.ports[1].name: Invalid value: \"HTTP\": must contain only alpha-numeric "
            "characters (a-z, 0-9), and hyphens (-)");
    has(&v, "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive");
    has(&v, "spec.ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", "
            "\"TCP\", \"UDP\"");
    has(&v, "spec.ports[2].name: Duplicate value: \"http\"");
    has(&v, "spec.ports[2]: Duplicate value: \"80/TCP\"");
    has(&v, "spec.service.type: Unsupported value: \"Bogus\": supported values: \"ClusterIP\", "
            "\"LoadBalancer\", \"NodePort\"");
    ck_assert_uint_eq(v.n_violations, 11);
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V2("ok", "{\"image\":{\"repository\":\"quay.io/team/app\",\"tag\":\"1\"}}"),
             NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "spec.image.repository: Invalid value: \"quay.io/team/app\": registry \"quay.io\" is "
            "not allowed");
    ck_assert_ptr_null(strstr(v.message, "["));
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_more_rules)
{
    struct kop_admission_verdict v = eval(
        "CREATE",
        V2("a-very-long-name-that-is-longer-than-sixty-three-characters-for-sure-yes",
           "{\"image\":{\"tag\":\"1\"},\"ports\":[{\"port\":80},{\"name\":\"a--b\",\"port\":\"x\"},"
           "{\"name\":\"1234\",\"port\":81},{\"name\":\"-ab\",\"port\":82},{\"name\":"
           "\"abcdefghijklmnopq\",\"port\":83}],\"paused\":\"yes\",\"replicas\":-1}"),
        NULL, NULL);
    ck_assert(!v.allowed);
    has(&v, "metadata.name: Invalid value: \"a-very-long-name-that-is-longer-than-sixty-three-"
            "characters-for-sure-yes\": must be no more than 63 characters");
    has(&v, "spec.image.repository: Required value");
    has(&v, "spec.ports[0].name: Required value");
    has(&v, "spec.ports[1].name: Invalid value: \"a--b\": must not contain consecutive hyphens");
    has(&v, "spec.ports[1].port: Invalid value: \"x\": must be an integer");
    has(&v, "spec.ports[2].name: Invalid value: \"1234\": must contain at least one letter (a-z)");
    has(&v, "spec.ports[3].name: Invalid value: \"-ab\": must not begin or end with a hyphen");
    has(&v, "spec.ports[4].name: Invalid value: \"abcdefghijklmnopq\": must be no more than 15 "
            "characters");
    has(&v, "spec.paused: Invalid value: \"yes\": must be a boolean");
    has(&v, "spec.replicas: Invalid value: -1: must be between 0 and 1000, inclusive");
    kop_admission_verdict_cleanup(&v);

    char ports[4096];
    size_t off = (size_t)snprintf(ports, sizeof(ports), "{\"ports\":[");
    for (int i = 0; i < 17; i++)
        off += (size_t)snprintf(ports + off, sizeof(ports) - off,
                                "%s{\"name\":\"p%d\",\"port\":%d}", i ? "," : "", i, 100 + i);
    snprintf(ports + off, sizeof(ports) - off, "]}");
    char obj[8192];
    snprintf(obj, sizeof(obj), V2("many", "%s"), ports);
    v = eval("CREATE", obj, NULL, NULL);
    ck_assert(!v.allowed);
    has(&v, "spec.ports: Too many: 17: must have at most 16 items");
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V2("empty", "{\"ports\":[]}"), NULL, NULL);
    has(&v, "spec.ports: Required value");
    kop_admission_verdict_cleanup(&v);

    /* an object that is no MyResource under a MyResource request: the
     * message names its apiVersion (it said only what was supported) */
    v = eval("CREATE", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}",
             NULL, NULL);
    ck_assert(!v.allowed);
    has(&v, "apiVersion: Unsupported value: \"v1\": supported values: \"mygroup.example.com/v1\", "
            "\"mygroup.example.com/v2\"");
    kop_admission_verdict_cleanup(&v);
    v = eval("CREATE", "{\"kind\":\"MyResource\",\"metadata\":{\"name\":\"p\"}}", NULL, NULL);
    ck_assert(!v.allowed);
    has(&v, "apiVersion: Required value");
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_v1_paths)
{
    char *allowed[] = {"ghcr.io"};
    struct kop_admission_options o = {.allowed_registries = allowed, .n_allowed_registries = 1};
    struct kop_admission_verdict v =
        eval("CREATE", V1("web", "{\"image\":\"Nginx:latest\",\"port\":0,\"serviceType\":\"Foo\"}"),
             NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "spec.image: Invalid value: \"Nginx:latest\": repository name must be lowercase");
    has(&v, "spec.port: Invalid value: 0: must be between 1 and 65535, inclusive");
    has(&v, "spec.serviceType: Unsupported value: \"Foo\"");
    ck_assert_uint_eq(v.n_violations, 3);
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V1("web", "{\"image\":\"nginx:latest\"}"), NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "spec.image: Invalid value: \"nginx:latest\": registry \"docker.io\" is not allowed");
    ck_assert_uint_eq(v.n_warnings, 2);
    ck_assert_ptr_nonnull(strstr(v.warnings[1], "latest"));
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V1("web", "{\"image\":5}"), NULL, NULL);
    has(&v, "spec.image: Invalid value: 5: must be a string");
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_warnings_short)
{
    char obj[4096], img[300];
    memset(img, 'a', 250);
    img[250] = '\0';
    snprintf(obj, sizeof(obj), V2("w", "{\"image\":{\"repository\":\"%s\"}}"), img);
    struct kop_admission_verdict v = eval("CREATE", obj, NULL, NULL);
    ck_assert(v.allowed);
    ck_assert_uint_eq(v.n_warnings, 1);
    ck_assert_uint_lt(strlen(v.warnings[0]), 120);
    ck_assert_ptr_nonnull(strstr(v.warnings[0], "no tag and no digest"));
    kop_admission_verdict_cleanup(&v);

    v = eval("CREATE", V2("w", "{\"image\":{\"repository\":\"nginx\",\"digest\":\"" SHA "\"}}"),
             NULL, NULL);
    ck_assert(v.allowed);
    ck_assert_uint_eq(v.n_warnings, 0);
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_update_ratchets)
{
    char *allowed[] = {"ghcr.io"};
    struct kop_admission_options o = {.allowed_registries = allowed, .n_allowed_registries = 1};
    const char *old = V2("web", "{\"replicas\":2000,\"image\":{\"repository\":\"quay.io/a\","
                                "\"tag\":\"1\"}}");
    /* unchanged bad fields, changed good field: allowed */
    struct kop_admission_verdict v = eval(
        "UPDATE",
        V2("web", "{\"replicas\":2000,\"image\":{\"repository\":\"quay.io/a\",\"tag\":\"2\"}}"),
        old, &o);
    ck_assert_msg(v.allowed, "%s", v.message);
    ck_assert_uint_eq(v.n_ratcheted, 2);
    kop_admission_verdict_cleanup(&v);
    /* the changed field is checked */
    v = eval(
        "UPDATE",
        V2("web", "{\"replicas\":2001,\"image\":{\"repository\":\"quay.io/a\",\"tag\":\"1\"}}"),
        old, &o);
    ck_assert(!v.allowed);
    has(&v, "spec.replicas: Invalid value: 2001");
    ck_assert_ptr_null(strstr(v.message, "registry"));
    kop_admission_verdict_cleanup(&v);
    /* v1: spec.image compared as a whole */
    const char *old1 = V1("web", "{\"image\":\"quay.io/a:1\"}");
    v = eval("UPDATE", V1("web", "{\"image\":\"quay.io/a:1\",\"replicas\":2}"), old1, &o);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);
    v = eval("UPDATE", V1("web", "{\"image\":\"quay.io/a:2\"}"), old1, &o);
    ck_assert(!v.allowed);
    has(&v, "spec.image: Invalid value: \"quay.io/a:2\": registry \"quay.io\" is not allowed");
    kop_admission_verdict_cleanup(&v);
    /* CREATE never ratchets */
    v = eval("CREATE", V1("web", "{\"image\":\"quay.io/a:1\"}"), old1, &o);
    ck_assert(!v.allowed);
    kop_admission_verdict_cleanup(&v);
}
END_TEST

START_TEST(test_admission_allows_others)
{
    struct kop_admission_verdict v = eval("DELETE", V2("Bad", "{\"replicas\":-5}"), NULL, NULL);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);
    v = eval("CONNECT", V2("Bad", "{}"), NULL, NULL);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);
    v = eval("UPDATE",
             "{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{"
             "\"name\":\"Bad\",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\"},\"spec\":{"
             "\"replicas\":-5}}",
             NULL, NULL);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);

    json_t *r = json_loads("{\"uid\":\"x\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":"
                           "\"Pod\"},\"operation\":\"CREATE\",\"object\":{}}",
                           0, NULL);
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
    /* status subresource */
    r = request("UPDATE", V2("Bad", "{}"), NULL);
    json_object_set_new(r, "subResource", json_string("status"));
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
    /* dryRun: evaluated the same */
    r = request("CREATE", V2("Bad", "{}"), NULL);
    json_object_set_new(r, "dryRun", json_true());
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(!v.allowed);
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
}
END_TEST

struct fake_store {
    enum kop_child_lookup deployment, service;
    const char *owner;
    int calls;
};

static enum kop_child_lookup fake_lookup(void *ud, const char *kind, const char *ns,
                                         const char *name, char *ret_uid, size_t size)
{
    struct fake_store *f = ud;
    f->calls++;
    ck_assert_str_eq(ns, "ns");
    ck_assert_str_eq(name, "web");
    enum kop_child_lookup r = strcmp(kind, "Deployment") == 0 ? f->deployment : f->service;
    if (r == KOP_CHILD_PRESENT)
        snprintf(ret_uid, size, "%s", f->owner);
    return r;
}

START_TEST(test_admission_child_collision)
{
    struct fake_store f = {KOP_CHILD_PRESENT, KOP_CHILD_ABSENT, "someone-else", 0};
    struct kop_admission_options o = {.child_lookup = fake_lookup, .child_lookup_userdata = &f};
    struct kop_admission_verdict v = eval("CREATE", V2("web", "{}"), NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "metadata.name: Invalid value: \"web\": a Deployment named \"web\" already exists in "
            "namespace \"ns\" and is not controlled by this MyResource");
    ck_assert_int_eq(f.calls, 2);
    kop_admission_verdict_cleanup(&v);

    f = (struct fake_store){KOP_CHILD_PRESENT, KOP_CHILD_PRESENT, "me", 0};
    v = eval("CREATE", V2("web", "{}"), NULL, &o);
    ck_assert(v.allowed);
    kop_admission_verdict_cleanup(&v);

    f = (struct fake_store){KOP_CHILD_ABSENT, KOP_CHILD_PRESENT, "", 0};
    v = eval("CREATE", V2("web", "{}"), NULL, &o);
    ck_assert(!v.allowed);
    has(&v, "a Service named \"web\"");
    kop_admission_verdict_cleanup(&v);

    f = (struct fake_store){KOP_CHILD_NOT_SYNCED, KOP_CHILD_NOT_SYNCED, "", 0};
    v = eval("CREATE", V2("web", "{}"), NULL, &o);
    ck_assert(v.allowed);
    ck_assert_uint_eq(v.n_warnings, 1);
    ck_assert_ptr_nonnull(strstr(v.warnings[0], "not synced"));
    ck_assert_uint_lt(strlen(v.warnings[0]), 120);
    kop_admission_verdict_cleanup(&v);

    /* UPDATE does not look */
    f = (struct fake_store){KOP_CHILD_PRESENT, KOP_CHILD_PRESENT, "x", 0};
    v = eval("UPDATE", V2("web", "{}"), V2("web", "{}"), &o);
    ck_assert(v.allowed);
    ck_assert_int_eq(f.calls, 0);
    kop_admission_verdict_cleanup(&v);
}
END_TEST

/* request.object.spec.ports. @ref borrow. */
static json_t *spec_ports(json_t *r)
{
    return json_object_get(json_object_get(json_object_get(r, "object"), "spec"), "ports");
}

START_TEST(test_admission_duplicates_at_later_index)
{
    /* The first occurrence is never reported, each later one at its own
     * index; an explicit TCP equals the default; 80.0 is the port 80. */
    struct kop_admission_verdict v =
        eval("CREATE",
             V2("web",
                "{\"ports\":[{\"name\":\"a\",\"port\":80},{\"name\":\"b\",\"port\":81},"
                "{\"name\":\"a\",\"port\":82},{\"name\":\"c\",\"port\":80,\"protocol\":\"TCP\"},"
                "{\"name\":\"d\",\"port\":80,\"protocol\":\"UDP\"},{\"name\":\"a\",\"port\":"
                "80.0,\"protocol\":\"UDP\"},{\"name\":\"e\",\"port\":81,\"protocol\":\"SCTP\"}]}"),
             NULL, NULL);
    ck_assert(!v.allowed);
    ck_assert_str_eq(v.message, "MyResource.mygroup.example.com \"web\" is invalid: ["
                                "spec.ports[2].name: Duplicate value: \"a\", "
                                "spec.ports[3]: Duplicate value: \"80/TCP\", "
                                "spec.ports[5].name: Duplicate value: \"a\", "
                                "spec.ports[5]: Duplicate value: \"80/UDP\"]");
    ck_assert_uint_eq(v.n_violations, 4);
    kop_admission_verdict_cleanup(&v);

    /* The exact text of the simplest case. */
    v = eval("CREATE",
             V2("web", "{\"ports\":[{\"name\":\"http\",\"port\":80},{\"name\":\"http\",\"port\":"
                       "80}]}"),
             NULL, NULL);
    ck_assert_str_eq(v.message, "MyResource.mygroup.example.com \"web\" is invalid: ["
                                "spec.ports[1].name: Duplicate value: \"http\", "
                                "spec.ports[1]: Duplicate value: \"80/TCP\"]");
    ck_assert_uint_eq(v.n_violations, 2);
    kop_admission_verdict_cleanup(&v);

    /* Invalid names are compared too; names are compared on all their
     * bytes (an embedded NUL included: a library caller may build one);
     * bad protocols and ports never make a pair. */
    json_t *r =
        request("CREATE",
                V2("web", "{\"ports\":[{\"name\":\"HTTP\",\"port\":1},{\"name\":\"HTTP\","
                          "\"port\":2},{\"port\":3},{\"port\":4},{\"port\":5},{\"name\":"
                          "\"p\",\"port\":6,\"protocol\":\"tcp\"},{\"name\":\"q\",\"port\":"
                          "6,\"protocol\":\"tcp\"},{\"name\":\"r\",\"port\":70000},{\"name\":"
                          "\"s\",\"port\":70000}]}"),
                NULL);
    json_t *ports = spec_ports(r);
    json_object_set_new(json_array_get(ports, 2), "name", json_stringn("x\0y", 3));
    json_object_set_new(json_array_get(ports, 3), "name", json_stringn("x\0z", 3));
    json_object_set_new(json_array_get(ports, 4), "name", json_stringn("x\0y", 3));
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    json_decref(r);
    has(&v, "spec.ports[1].name: Duplicate value: \"HTTP\"");
    has(&v, "spec.ports[4].name: Duplicate value: \"x\\x00y\"");
    ck_assert_ptr_null(strstr(v.message, "spec.ports[0].name: Duplicate"));
    ck_assert_ptr_null(strstr(v.message, "spec.ports[3].name: Duplicate"));
    ck_assert_ptr_null(strstr(v.message, "spec.ports[6]: Duplicate"));
    ck_assert_ptr_null(strstr(v.message, "spec.ports[8]: Duplicate"));
    kop_admission_verdict_cleanup(&v);
}
END_TEST

/* An AdmissionRequest for obj_json whose spec.ports is replaced by ports
 * (stolen). */
static json_t *request_with_ports(const char *op, const char *obj_json, json_t *ports)
{
    json_t *r = request(op, obj_json, NULL);
    ck_assert_int_eq(
        json_object_set_new(json_object_get(json_object_get(r, "object"), "spec"), "ports", ports),
        0);
    return r;
}

/* n ports; every one named name (or "p<i>" when name is NULL). */
static json_t *many_ports(size_t n, const char *name, bool same_port)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        char nm[32];
        snprintf(nm, sizeof(nm), "p%zu", i);
        ck_assert_int_eq(
            json_array_append_new(a, json_pack("{s:s, s:I}", "name", name ? name : nm, "port",
                                               (json_int_t)(same_port ? 80 : i + 1))),
            0);
    }
    return a;
}

/* Violations written out in a message (they are separated by ", spec."
 * or ", metadata." in these tests). */
static size_t listed(const char *m)
{
    size_t n = 0;
    for (const char *p = strchr(m, ':'); p; p = strstr(p + 1, ", spec."))
        n++;
    return n;
}

START_TEST(test_admission_many_ports_bounded_message)
{
    /* 32,000 identical ports: "Too many" plus a duplicate name and a
     * duplicate pair for each but the first of the items checked (the
     * first KOP_ADMISSION_MAX_CHECKED_ITEMS). */
    const size_t n = 32000;
    const unsigned total = 1 + 2 * (unsigned)(KOP_ADMISSION_MAX_CHECKED_ITEMS - 1);
    json_t *r = request_with_ports("CREATE", V2("web", "{}"), many_ports(n, "http", true));
    struct kop_admission_verdict v;
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(!v.allowed);
    ck_assert_uint_eq(v.n_violations, total);
    ck_assert_msg(strncmp(v.message,
                          "MyResource.mygroup.example.com \"web\" is invalid: [spec.ports: Too "
                          "many: 32000: must have at most 16 items, spec.ports[1].name: Duplicate "
                          "value: \"http\", spec.ports[1]: Duplicate value: \"80/TCP\", ",
                          strlen("MyResource.mygroup.example.com \"web\" is invalid: [spec.ports: "
                                 "Too many: 32000: must have at most 16 items, spec.ports[1].name: "
                                 "Duplicate value: \"http\", spec.ports[1]: Duplicate value: "
                                 "\"80/TCP\", ")) == 0,
                  "%s", v.message);
    size_t k = listed(v.message);
    ck_assert_uint_le(k, KOP_ADMISSION_MAX_LISTED);
    ck_assert_uint_eq(k, 20);
    char tail[64];
    snprintf(tail, sizeof(tail), ", and %zu more]", (size_t)total - k);
    ck_assert_uint_gt(strlen(v.message), strlen(tail));
    ck_assert_str_eq(v.message + strlen(v.message) - strlen(tail), tail);
    /* The last one written out is the 20th in order: ports[10].name. */
    has(&v, "spec.ports[10].name: Duplicate value: \"http\", and");
    ck_assert_ptr_null(strstr(v.message, "spec.ports[10]: Duplicate"));
    ck_assert_uint_lt(strlen(v.message), KOP_ADMISSION_MAX_MESSAGE);
    kop_admission_verdict_cleanup(&v);

    /* UPDATE with the same list: every violation ratchets. */
    json_object_set_new(r, "operation", json_string("UPDATE"));
    json_object_set(r, "oldObject", json_object_get(r, "object"));
    json_t *copy = json_deep_copy(json_object_get(r, "object"));
    json_object_set_new(r, "object", copy);
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert_msg(v.allowed, "%s", v.message);
    ck_assert_uint_eq(v.n_ratcheted, total);
    kop_admission_verdict_cleanup(&v);
    json_decref(r);

    /* 32,000 distinct names and pairs: only "Too many", no false
     * duplicates, no brackets for a single violation. */
    r = request_with_ports("CREATE", V2("web", "{}"), many_ports(n, NULL, false));
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(!v.allowed);
    ck_assert_uint_eq(v.n_violations, 1);
    ck_assert_str_eq(v.message, "MyResource.mygroup.example.com \"web\" is invalid: spec.ports: "
                                "Too many: 32000: must have at most 16 items");
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
}
END_TEST

START_TEST(test_admission_exactly_max_listed_has_no_tail)
{
    /* 21 ports with the same name: "Too many" + 20 duplicates = 21
     * violations: 20 written out, "and 1 more". 20 ports: all 20 written
     * out (19 duplicates + "Too many"), no tail. */
    for (size_t n = 20; n <= 21; n++) {
        json_t *r = request_with_ports("CREATE", V2("web", "{}"), many_ports(n, "a", false));
        struct kop_admission_verdict v;
        ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
        ck_assert_uint_eq(v.n_violations, n);
        ck_assert_uint_eq(listed(v.message), 20);
        if (n == 20) {
            ck_assert_ptr_null(strstr(v.message, "more"));
            has(&v, "spec.ports[19].name: Duplicate value: \"a\"]");
        } else {
            has(&v, "spec.ports[19].name: Duplicate value: \"a\", and 1 more]");
        }
        kop_admission_verdict_cleanup(&v);
        json_decref(r);
    }
}
END_TEST

START_TEST(test_admission_v1_extras_many_ports)
{
    /* A v1 object carries its v2 ports in the v2-extras annotation; it is
     * converted to v2 before the rules run and reported with v2 paths.
     * 5,000 ports still fit in the annotations' 256 KiB; a longer extras
     * value is not interpreted (the apiserver refuses such an object). */
    const size_t n = 5000;
    json_t *extras = json_pack("{s:o}", "ports", many_ports(n, "http", false));
    json_object_del(json_array_get(json_object_get(extras, "ports"), 0), "port");
    char *ann = json_dumps(extras, JSON_COMPACT | JSON_SORT_KEYS);
    ck_assert_ptr_nonnull(ann);
    json_decref(extras);
    json_t *r = request("CREATE", V1("web", "{\"port\":1}"), NULL);
    json_t *meta = json_object_get(json_object_get(r, "object"), "metadata");
    ck_assert_int_eq(json_object_set_new(meta, "annotations",
                                         json_pack("{s:s}", KOP_MYRESOURCE_EXTRAS_ANNOTATION, ann)),
                     0);
    free(ann);
    struct kop_admission_verdict v;
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(!v.allowed);
    /* "Too many" + a duplicate name for each checked item but the first */
    ck_assert_uint_eq(v.n_violations, KOP_ADMISSION_MAX_CHECKED_ITEMS);
    has(&v, "MyResource.mygroup.example.com \"web\" is invalid: [spec.ports: Too many: 5000: "
            "must have at most 16 items, spec.ports[1].name: Duplicate value: \"http\", ");
    has(&v, "spec.ports[19].name: Duplicate value: \"http\", and 1004 more]");
    ck_assert_uint_eq(listed(v.message), 20);
    ck_assert_ptr_null(strstr(v.message, "80/TCP"));
    ck_assert_uint_ge(v.n_warnings, 1);
    ck_assert_str_eq(v.warnings[0], "mygroup.example.com/v1 MyResource is deprecated; use v2");
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
}
END_TEST

START_TEST(test_admission_long_name_cut_in_message)
{
    /* The object name is shown in the message header: a huge one is cut
     * (after 253 bytes, "..."), its violations render at most 200 bytes. */
    size_t n = 100000;
    char *name = malloc(n + 1);
    ck_assert_ptr_nonnull(name);
    memset(name, 'a', n);
    name[n] = '\0';
    json_t *r = request("CREATE", V2("x", "{}"), NULL);
    json_object_set_new(json_object_get(json_object_get(r, "object"), "metadata"), "name",
                        json_string(name));
    struct kop_admission_verdict v;
    ck_assert_int_eq(kop_admission_evaluate(r, NULL, &v), 0);
    ck_assert(!v.allowed);
    ck_assert_uint_eq(v.n_violations, 1);
    ck_assert_uint_lt(strlen(v.message), 1024);
    char head[400];
    snprintf(head, sizeof(head), "MyResource.mygroup.example.com \"%.253s...\" is invalid: ", name);
    has(&v, head);
    has(&v, "must be no more than 63 characters");
    kop_admission_verdict_cleanup(&v);
    json_decref(r);
    free(name);
}
END_TEST

static Suite *admission_suite(void)
{
    Suite *s = suite_create("admission");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_admission_valid_objects_allowed);
    tcase_add_test(tc, test_admission_all_violations_v2);
    tcase_add_test(tc, test_admission_more_rules);
    tcase_add_test(tc, test_admission_v1_paths);
    tcase_add_test(tc, test_admission_warnings_short);
    tcase_add_test(tc, test_admission_update_ratchets);
    tcase_add_test(tc, test_admission_allows_others);
    tcase_add_test(tc, test_admission_child_collision);
    tcase_add_test(tc, test_admission_duplicates_at_later_index);
    tcase_add_test(tc, test_admission_many_ports_bounded_message);
    tcase_add_test(tc, test_admission_exactly_max_listed_has_no_tail);
    tcase_add_test(tc, test_admission_v1_extras_many_ports);
    tcase_add_test(tc, test_admission_long_name_cut_in_message);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(admission_suite());
}
