/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure reconciler (kop/reconciler.h): desired Deployment and Service
 * for the seed example and for multi-port, digest and NodePort specs;
 * owned-field comparison against live objects carrying apiserver defaults
 * and foreign fields; ownership; status and conditions with a stable
 * lastTransitionTime.
 */
#include "testutil.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "kop/conversion.h"
#include "kop/json.h"
#include "kop/myresource.h"
#include "kop/reconciler.h"

static const struct kop_reconciler_owner owner = {"default", "example-resource", "uid-1"};

/* Parse, convert v1 -> v2 when needed, read the spec. The object must
 * outlive the spec (borrowed strings): returned for the caller to free. */
static json_t *spec_of(const char *text, struct kop_myresource_spec *spec)
{
    json_t *obj = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(obj);
    ck_assert_int_eq(kop_conversion_convert(obj, KOP_MYRESOURCE_VERSION_V2), 0);
    ck_assert_int_eq(kop_myresource_spec_read(obj, spec), 0);
    return obj;
}

static char *dump(const json_t *v)
{
    char *s = NULL;
    ck_assert_int_eq(kop_json_dump(v, JSON_COMPACT | JSON_SORT_KEYS, &s, NULL), 0);
    return s;
}

static void assert_json(const json_t *v, const char *want)
{
    json_t *w = json_loads(want, 0, NULL);
    ck_assert_msg(w != NULL, "bad expected JSON: %s", want);
    char *got = dump(v);
    char *exp = dump(w);
    ck_assert_str_eq(got, exp);
    free(got);
    free(exp);
    json_decref(w);
}

#define SEED                                                                                       \
    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"   \
    "\"example-resource\",\"namespace\":\"default\"},\"spec\":{\"replicas\":3}}"

#define OWNER_REF                                                                                  \
    "\"ownerReferences\":[{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","     \
    "\"name\":\"example-resource\",\"uid\":\"uid-1\",\"controller\":true,"                         \
    "\"blockOwnerDeletion\":true}]"
#define LABELS3                                                                                    \
    "{\"app.kubernetes.io/name\":\"myresource\",\"app.kubernetes.io/instance\":"                   \
    "\"example-resource\",\"app.kubernetes.io/managed-by\":\"kop\"}"
#define LABELS2                                                                                    \
    "{\"app.kubernetes.io/name\":\"myresource\",\"app.kubernetes.io/instance\":"                   \
    "\"example-resource\"}"

START_TEST(test_reconciler_desired_seed)
{
    struct kop_myresource_spec spec;
    json_t *obj = spec_of(SEED, &spec);
    json_t *d = kop_reconciler_desired_deployment(&owner, &spec);
    ck_assert_ptr_nonnull(d);
    assert_json(d, "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
                   "\"example-resource\",\"namespace\":\"default\",\"labels\":" LABELS3
                   "," OWNER_REF "},\"spec\":{\"replicas\":3,\"selector\":{\"matchLabels\":" LABELS2
                   "},\"template\":{\"metadata\":{\"labels\":" LABELS3 "},\"spec\":{"
                   "\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1.14.2\",\"ports\":[{"
                   "\"containerPort\":80,\"name\":\"http\",\"protocol\":\"TCP\"}]}]}}}}");
    json_t *s = kop_reconciler_desired_service(&owner, &spec);
    ck_assert_ptr_nonnull(s);
    assert_json(s, "{\"apiVersion\":\"v1\",\"kind\":\"Service\",\"metadata\":{\"name\":"
                   "\"example-resource\",\"namespace\":\"default\",\"labels\":" LABELS3
                   "," OWNER_REF "},\"spec\":{\"type\":\"ClusterIP\",\"selector\":" LABELS2
                   ",\"ports\":[{\"name\":\"http\",\"port\":80,\"targetPort\":\"http\","
                   "\"protocol\":\"TCP\"}]}}");
    json_decref(d);
    json_decref(s);
    json_decref(obj);
}
END_TEST

#define MULTI                                                                                      \
    "{\"apiVersion\":\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"   \
    "\"example-resource\",\"namespace\":\"default\"},\"spec\":{\"replicas\":2,\"image\":{"         \
    "\"repository\":\"registry.example.com:5000/team/app\",\"digest\":\"sha256:"                   \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"},\"ports\":[{\"name\":"    \
    "\"http\",\"port\":8080},{\"name\":\"dns\",\"port\":53,\"protocol\":\"UDP\"}],\"service\":{"   \
    "\"type\":\"NodePort\"},\"paused\":true}}"

START_TEST(test_reconciler_desired_multiport_digest_paused)
{
    struct kop_myresource_spec spec;
    json_t *obj = spec_of(MULTI, &spec);
    ck_assert(spec.paused);
    json_t *d = kop_reconciler_desired_deployment(&owner, &spec);
    ck_assert_str_eq(
        json_string_value(kop_json_path(
            json_array_get(kop_json_path(d, "spec.template.spec.containers"), 0), "image")),
        "registry.example.com:5000/team/app@sha256:"
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    assert_json(json_object_get(
                    json_array_get(kop_json_path(d, "spec.template.spec.containers"), 0), "ports"),
                "[{\"containerPort\":8080,\"name\":\"http\",\"protocol\":\"TCP\"},"
                "{\"containerPort\":53,\"name\":\"dns\",\"protocol\":\"UDP\"}]");
    json_t *s = kop_reconciler_desired_service(&owner, &spec);
    ck_assert_str_eq(kop_json_path_str(s, "spec.type"), "NodePort");
    assert_json(kop_json_path(s, "spec.ports"),
                "[{\"name\":\"http\",\"port\":8080,\"targetPort\":\"http\",\"protocol\":\"TCP\"},"
                "{\"name\":\"dns\",\"port\":53,\"targetPort\":\"dns\",\"protocol\":\"UDP\"}]");
    json_decref(d);
    json_decref(s);
    json_decref(obj);

    /* The v2-extras annotation path of a v1 object gives the same spec. */
    obj = spec_of("{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                  "\"metadata\":{\"name\":\"x\",\"annotations\":{\"mygroup.example.com/"
                  "v2-extras\":\"{\\\"paused\\\":true,\\\"ports\\\":[{\\\"name\\\":\\\"http\\\"},"
                  "{\\\"name\\\":\\\"m\\\",\\\"port\\\":9090}]}\"}},\"spec\":{\"replicas\":1,"
                  "\"image\":\"nginx:1.25\",\"port\":81}}",
                  &spec);
    ck_assert(spec.paused);
    ck_assert_uint_eq(spec.n_ports, 2);
    ck_assert_int_eq(spec.ports[0].port, 81);
    ck_assert_int_eq(spec.ports[1].port, 9090);
    json_decref(obj);
}
END_TEST

/* A live Deployment as the apiserver returns it: defaults, status, a
 * foreign annotation and label. */
static json_t *live_deployment(const json_t *desired)
{
    json_t *live = json_deep_copy(desired);
    json_t *md = json_object_get(live, "metadata");
    json_object_set_new(md, "uid", json_string("d-uid"));
    json_object_set_new(md, "resourceVersion", json_string("42"));
    json_object_set_new(md, "generation", json_integer(1));
    json_object_set_new(md, "annotations",
                        json_pack("{s:s, s:s}", "deployment.kubernetes.io/revision", "1",
                                  "team.example.com/owner", "alice"));
    json_object_set_new(json_object_get(md, "labels"), "extra", json_string("yes"));
    json_t *spec = json_object_get(live, "spec");
    json_object_set_new(spec, "revisionHistoryLimit", json_integer(10));
    json_object_set_new(spec, "progressDeadlineSeconds", json_integer(600));
    json_object_set_new(spec, "strategy", json_pack("{s:s}", "type", "RollingUpdate"));
    json_t *tspec = kop_json_path(live, "spec.template.spec");
    json_object_set_new(tspec, "restartPolicy", json_string("Always"));
    json_object_set_new(tspec, "dnsPolicy", json_string("ClusterFirst"));
    json_t *c = json_array_get(json_object_get(tspec, "containers"), 0);
    json_object_set_new(c, "imagePullPolicy", json_string("IfNotPresent"));
    json_object_set_new(c, "terminationMessagePath", json_string("/dev/termination-log"));
    json_object_set_new(c, "resources", json_object());
    json_object_set_new(
        live, "status",
        json_pack("{s:i, s:i, s:i}", "observedGeneration", 1, "replicas", 3, "readyReplicas", 3));
    return live;
}

START_TEST(test_reconciler_compare_deployment)
{
    struct kop_myresource_spec spec;
    json_t *obj = spec_of(SEED, &spec);
    json_t *desired = kop_reconciler_desired_deployment(&owner, &spec);
    json_t *live = live_deployment(desired);
    json_t *patch = (json_t *)1;

    ck_assert_int_eq(kop_reconciler_deployment_patch(live, desired, &patch), 0);
    ck_assert_ptr_null(patch); /* converged: zero writes */

    /* Someone scaled it: only replicas goes back. */
    json_object_set_new(json_object_get(live, "spec"), "replicas", json_integer(7));
    ck_assert_int_eq(kop_reconciler_deployment_patch(live, desired, &patch), 0);
    assert_json(patch, "{\"spec\":{\"replicas\":3}}");
    json_decref(patch);
    json_object_set_new(json_object_get(live, "spec"), "replicas", json_integer(3));

    /* A changed image: the whole container list, owned fields only. */
    json_t *c = json_array_get(kop_json_path(live, "spec.template.spec.containers"), 0);
    json_object_set_new(c, "image", json_string("nginx:1.25"));
    ck_assert_int_eq(kop_reconciler_deployment_patch(live, desired, &patch), 0);
    assert_json(patch, "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"app\","
                       "\"image\":\"nginx:1.14.2\",\"ports\":[{\"containerPort\":80,\"name\":"
                       "\"http\",\"protocol\":\"TCP\"}]}]}}}}");
    json_decref(patch);
    json_object_set_new(c, "image", json_string("nginx:1.14.2"));

    /* A changed port, a lost label and a foreign selector key. */
    json_object_set_new(json_array_get(json_object_get(c, "ports"), 0), "containerPort",
                        json_integer(81));
    json_object_del(kop_json_path(live, "metadata.labels"), "app.kubernetes.io/managed-by");
    json_object_set_new(kop_json_path(live, "spec.selector.matchLabels"), "x", json_string("y"));
    ck_assert_int_eq(kop_reconciler_deployment_patch(live, desired, &patch), 0);
    ck_assert_str_eq(json_string_value(json_object_get(kop_json_path(patch, "metadata.labels"),
                                                       "app.kubernetes.io/managed-by")),
                     "kop");
    ck_assert_int_eq(json_object_size(kop_json_path(patch, "metadata.labels")), 1);
    ck_assert(
        json_is_null(json_object_get(kop_json_path(patch, "spec.selector.matchLabels"), "x")));
    ck_assert_int_eq(json_object_size(kop_json_path(patch, "spec.selector.matchLabels")), 1);
    ck_assert_int_eq(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(json_array_get(kop_json_path(patch, "spec.template."
                                                                               "spec.containers"),
                                                          0),
                                           "ports"),
                           0),
            "containerPort")),
        80);
    ck_assert_ptr_null(kop_json_path(patch, "spec.replicas"));
    ck_assert_ptr_null(kop_json_path(patch, "metadata.annotations"));
    json_decref(patch);

    ck_assert_int_eq(kop_reconciler_deployment_patch(NULL, desired, &patch), -EINVAL);
    json_decref(live);
    json_decref(desired);
    json_decref(obj);
}
END_TEST

START_TEST(test_reconciler_compare_service)
{
    struct kop_myresource_spec spec;
    json_t *obj = spec_of(MULTI, &spec);
    json_t *desired = kop_reconciler_desired_service(&owner, &spec);
    json_t *live = json_deep_copy(desired);
    json_t *lspec = json_object_get(live, "spec");
    json_object_set_new(lspec, "clusterIP", json_string("10.96.0.7"));
    json_object_set_new(lspec, "sessionAffinity", json_string("None"));
    json_object_set_new(json_array_get(json_object_get(lspec, "ports"), 0), "nodePort",
                        json_integer(30080));
    json_object_set_new(json_array_get(json_object_get(lspec, "ports"), 1), "nodePort",
                        json_integer(30053));
    json_object_set_new(kop_json_path(live, "metadata"), "annotations",
                        json_pack("{s:s}", "foreign", "1"));
    json_t *patch = (json_t *)1;
    ck_assert_int_eq(kop_reconciler_service_patch(live, desired, &patch), 0);
    ck_assert_ptr_null(patch);

    /* Port 53 changed by someone: ports rewritten, nodePorts kept by name. */
    json_object_set_new(json_array_get(json_object_get(lspec, "ports"), 1), "port",
                        json_integer(54));
    ck_assert_int_eq(kop_reconciler_service_patch(live, desired, &patch), 0);
    assert_json(patch, "{\"spec\":{\"ports\":[{\"name\":\"http\",\"port\":8080,\"targetPort\":"
                       "\"http\",\"protocol\":\"TCP\",\"nodePort\":30080},{\"name\":\"dns\","
                       "\"port\":53,\"targetPort\":\"dns\",\"protocol\":\"UDP\",\"nodePort\":"
                       "30053}]}}");
    json_decref(patch);

    /* Type ClusterIP wanted: nodePorts are not carried over. */
    json_object_set_new(kop_json_path(desired, "spec"), "type", json_string("ClusterIP"));
    ck_assert_int_eq(kop_reconciler_service_patch(live, desired, &patch), 0);
    ck_assert_str_eq(kop_json_path_str(patch, "spec.type"), "ClusterIP");
    ck_assert_ptr_null(
        json_object_get(json_array_get(kop_json_path(patch, "spec.ports"), 0), "nodePort"));
    json_decref(patch);
    json_decref(live);
    json_decref(desired);
    json_decref(obj);
}
END_TEST

START_TEST(test_reconciler_ownership)
{
    struct kop_myresource_spec spec;
    json_t *obj = spec_of(SEED, &spec);
    json_t *d = kop_reconciler_desired_deployment(&owner, &spec);
    ck_assert(kop_reconciler_controlled_by(d, "uid-1"));
    ck_assert(!kop_reconciler_controlled_by(d, "uid-2"));
    ck_assert(!kop_reconciler_controlled_by(d, ""));
    ck_assert_str_eq(kop_reconciler_owner_name(d), "example-resource");
    json_t *ref = json_array_get(kop_json_path(d, "metadata.ownerReferences"), 0);
    json_object_set_new(ref, "apiVersion", json_string("othergroup.example.com/v1"));
    ck_assert_ptr_null(kop_reconciler_owner_name(d));
    json_object_set_new(ref, "apiVersion", json_string("mygroup.example.com/v2"));
    ck_assert_str_eq(kop_reconciler_owner_name(d), "example-resource");
    json_object_set_new(ref, "controller", json_false());
    ck_assert_ptr_null(kop_reconciler_owner_name(d));
    ck_assert(!kop_reconciler_controlled_by(d, "uid-1"));
    json_decref(d);
    json_decref(obj);
}
END_TEST

static const char *cond_field(const json_t *status, const char *type, const char *field)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(status, "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return json_string_value(json_object_get(c, field));
    }
    return NULL;
}

#define T0 INT64_C(1700000000000000000)
#define T1 (T0 + INT64_C(60000000000))

START_TEST(test_reconciler_status_conditions)
{
    json_t *dep = json_loads("{\"metadata\":{\"generation\":2},\"spec\":{\"replicas\":3},"
                             "\"status\":{\"observedGeneration\":2,\"updatedReplicas\":3,"
                             "\"readyReplicas\":1}}",
                             0, NULL);
    struct kop_reconciler_observed obs = {.generation = 4, .spec_replicas = 3, .deployment = dep};
    json_t *s1 = kop_reconciler_status(NULL, &obs, T0);
    ck_assert_ptr_nonnull(s1);
    ck_assert_int_eq(json_integer_value(json_object_get(s1, "observedGeneration")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(s1, "replicas")), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(s1, "readyReplicas")), 1);
    ck_assert_str_eq(cond_field(s1, "Available", "status"), "False");
    ck_assert_str_eq(cond_field(s1, "Available", "reason"), "ReplicasNotReady");
    ck_assert_str_eq(cond_field(s1, "Progressing", "status"), "True");
    ck_assert_str_eq(cond_field(s1, "Degraded", "status"), "False");
    ck_assert_str_eq(cond_field(s1, "Paused", "status"), "False");
    ck_assert_str_eq(cond_field(s1, "Available", "lastTransitionTime"), "2023-11-14T22:13:20Z");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_array_get(json_object_get(s1, "conditions"), 0),
                                           "observedGeneration")),
        4);
    ck_assert(kop_reconciler_status_changed(NULL, s1));
    ck_assert(!kop_reconciler_status_changed(s1, s1));

    /* Same inputs later: identical status, no write. */
    json_t *s2 = kop_reconciler_status(s1, &obs, T1);
    ck_assert(!kop_reconciler_status_changed(s1, s2));

    /* Ready: Available flips (new time), Degraded keeps its time. */
    json_object_set_new(json_object_get(dep, "status"), "readyReplicas", json_integer(3));
    json_t *s3 = kop_reconciler_status(s2, &obs, T1);
    ck_assert(kop_reconciler_status_changed(s2, s3));
    ck_assert_str_eq(cond_field(s3, "Available", "status"), "True");
    ck_assert_str_eq(cond_field(s3, "Available", "lastTransitionTime"), "2023-11-14T22:14:20Z");
    ck_assert_str_eq(cond_field(s3, "Degraded", "lastTransitionTime"), "2023-11-14T22:13:20Z");
    ck_assert_str_eq(cond_field(s3, "Progressing", "status"), "False");
    ck_assert_str_eq(cond_field(s3, "Progressing", "reason"), "RolloutComplete");

    /* An error: Degraded with its reason and message; a change of message
     * alone keeps the time. */
    obs.error_reason = "UpdateFailed";
    obs.error_message = "boom";
    json_t *s4 = kop_reconciler_status(s3, &obs, T1 + 1000000000);
    ck_assert_str_eq(cond_field(s4, "Degraded", "status"), "True");
    ck_assert_str_eq(cond_field(s4, "Degraded", "reason"), "UpdateFailed");
    ck_assert_str_eq(cond_field(s4, "Degraded", "message"), "boom");
    obs.error_message = "boom again";
    json_t *s5 = kop_reconciler_status(s4, &obs, T1 + 5000000000);
    ck_assert_str_eq(cond_field(s5, "Degraded", "lastTransitionTime"),
                     cond_field(s4, "Degraded", "lastTransitionTime"));
    ck_assert(kop_reconciler_status_changed(s4, s5));

    /* Paused, no Deployment. */
    struct kop_reconciler_observed p = {.generation = 1, .spec_replicas = 2, .paused = true};
    json_t *s6 = kop_reconciler_status(NULL, &p, T0);
    ck_assert_str_eq(cond_field(s6, "Paused", "status"), "True");
    ck_assert_str_eq(cond_field(s6, "Progressing", "reason"), "Paused");
    ck_assert_str_eq(cond_field(s6, "Available", "reason"), "DeploymentNotFound");
    ck_assert_int_eq(json_integer_value(json_object_get(s6, "replicas")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(s6, "readyReplicas")), 0);

    /* Foreign status members do not count as a change. */
    json_t *old = json_deep_copy(s6);
    json_object_set_new(old, "somethingElse", json_integer(1));
    ck_assert(!kop_reconciler_status_changed(old, s6));

    json_decref(old);
    json_decref(s1);
    json_decref(s2);
    json_decref(s3);
    json_decref(s4);
    json_decref(s5);
    json_decref(s6);
    json_decref(dep);
}
END_TEST

static Suite *reconciler_suite(void)
{
    Suite *s = suite_create("reconciler");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_reconciler_desired_seed);
    tcase_add_test(tc, test_reconciler_desired_multiport_digest_paused);
    tcase_add_test(tc, test_reconciler_compare_deployment);
    tcase_add_test(tc, test_reconciler_compare_service);
    tcase_add_test(tc, test_reconciler_ownership);
    tcase_add_test(tc, test_reconciler_status_conditions);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(reconciler_suite());
}
