/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the validating admission rules: every rule, all violations in
 * one message with field paths in the client's version, ratcheting on
 * UPDATE, deletion, other kinds and operations, warnings, and rule 4
 * through a fake child lookup.
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
    ck_assert_int_eq(kop_admission_evaluate(NULL, NULL, NULL), -EINVAL);
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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(admission_suite());
}
