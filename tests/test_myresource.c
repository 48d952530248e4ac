/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the MyResource names and the typed v2 view the reconciler
 * reads (defaults, converted v1 objects, wrong shapes).
 */
#include <errno.h>
#include <string.h>

#include "kop/conversion.h"
#include "kop/myresource.h"
#include "testutil.h"

static json_t *load(const char *s)
{
    json_t *v = json_loads(s, 0, NULL);
    ck_assert_ptr_nonnull(v);
    return v;
}

START_TEST(test_myresource_versions)
{
    ck_assert_int_eq(kop_myresource_version_parse("mygroup.example.com/v1"),
                     KOP_MYRESOURCE_VERSION_V1);
    ck_assert_int_eq(kop_myresource_version_parse("mygroup.example.com/v2"),
                     KOP_MYRESOURCE_VERSION_V2);
    ck_assert_int_eq(kop_myresource_version_parse("mygroup.example.com/v3"),
                     KOP_MYRESOURCE_VERSION_UNKNOWN);
    ck_assert_int_eq(kop_myresource_version_parse(NULL), KOP_MYRESOURCE_VERSION_UNKNOWN);
    json_t *o = load("{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"Other\"}");
    ck_assert_int_eq(kop_myresource_version_of(o), KOP_MYRESOURCE_VERSION_UNKNOWN);
    json_decref(o);
    ck_assert_str_eq(kop_myresource_api_version(KOP_MYRESOURCE_VERSION_V2), KOP_MYRESOURCE_V2);
    ck_assert_ptr_null(kop_myresource_api_version(KOP_MYRESOURCE_VERSION_UNKNOWN));
}
END_TEST

START_TEST(test_myresource_seed_example_defaults)
{
    json_t *o = load("{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                     "\"metadata\":{\"name\":\"example-resource\"},\"spec\":{\"replicas\":3}}");
    ck_assert_int_eq(kop_conversion_to_v2(o), 0);
    struct kop_myresource_spec s;
    ck_assert_int_eq(kop_myresource_spec_read(o, &s), 0);
    ck_assert_int_eq(s.replicas, 3);
    char img[64];
    ck_assert_uint_eq(kop_myresource_spec_image(&s, img, sizeof(img)), 12);
    ck_assert_str_eq(img, "nginx:1.14.2");
    ck_assert_uint_eq(s.n_ports, 1);
    ck_assert_str_eq(s.ports[0].name, "http");
    ck_assert_int_eq(s.ports[0].port, 80);
    ck_assert_str_eq(s.ports[0].protocol, "TCP");
    ck_assert_str_eq(s.service_type, "ClusterIP");
    ck_assert(!s.paused);
    json_decref(o);
}
END_TEST

START_TEST(test_myresource_full_v2)
{
    json_t *o = load("{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\","
                     "\"spec\":{\"replicas\":0,\"image\":{\"repository\":\"ghcr.io/a/b\","
                     "\"digest\":\"sha256:00\"},\"ports\":[{\"name\":\"web\",\"port\":8080},"
                     "{\"name\":\"dns\",\"port\":53.0,\"protocol\":\"UDP\"}],\"service\":{"
                     "\"type\":\"NodePort\"},\"paused\":true}}");
    struct kop_myresource_spec s;
    ck_assert_int_eq(kop_myresource_spec_read(o, &s), 0);
    ck_assert_int_eq(s.replicas, 0);
    char img[64];
    kop_myresource_spec_image(&s, img, sizeof(img));
    ck_assert_str_eq(img, "ghcr.io/a/b@sha256:00");
    ck_assert_uint_eq(s.n_ports, 2);
    ck_assert_int_eq(s.ports[1].port, 53);
    ck_assert_str_eq(s.ports[1].protocol, "UDP");
    ck_assert_str_eq(s.service_type, "NodePort");
    ck_assert(s.paused);
    json_decref(o);
}
END_TEST

START_TEST(test_myresource_wrong_shapes)
{
    const char *bad[] = {
        "{\"spec\":\"x\"}",
        "{\"spec\":{\"replicas\":\"3\"}}",
        "{\"spec\":{\"replicas\":1001}}",
        "{\"spec\":{\"image\":\"nginx\"}}",
        "{\"spec\":{\"image\":{}}}",
        "{\"spec\":{\"ports\":[]}}",
        "{\"spec\":{\"ports\":[{\"port\":80}]}}",
        "{\"spec\":{\"ports\":[{\"name\":\"a\",\"port\":0}]}}",
        "{\"spec\":{\"service\":{\"type\":1}}}",
        "{\"spec\":{\"paused\":\"yes\"}}",
        "[]",
    };
    struct kop_myresource_spec s;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *o = load(bad[i]);
        ck_assert_msg(kop_myresource_spec_read(o, &s) == -EINVAL, "%s", bad[i]);
        json_decref(o);
    }
    json_t *o = load("{}");
    ck_assert_int_eq(kop_myresource_spec_read(o, &s), 0);
    ck_assert_int_eq(s.replicas, 1);
    json_decref(o);
}
END_TEST

static Suite *myresource_suite(void)
{
    Suite *s = suite_create("myresource");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_myresource_versions);
    tcase_add_test(tc, test_myresource_seed_example_defaults);
    tcase_add_test(tc, test_myresource_full_v2);
    tcase_add_test(tc, test_myresource_wrong_shapes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(myresource_suite());
}
