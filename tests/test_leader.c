/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the pure part of leader election: reading and writing the
 * election record of a Lease (field names, MicroTime timestamps, the order
 * the apiserver serializes), the client-go decision on a fake monotonic
 * clock (create when absent, renew our own, never take a live lease,
 * take an expired or released one, transitions counted, expiry judged by
 * the local observation time and not the remote timestamps), option
 * validation and the default identity. The elector against kubesim is in
 * integration/test_leader.c.
 */
#include "kop/leader.h"

#include <assert.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/clock.h"
#include "kop/json.h"
#include "kop/metrics.h"
#include "testutil.h"

#define SEC KOP_NSEC_PER_SEC
#define ME "kop-0_3b1f2c4d-0000-4000-8000-000000000001"
#define OTHER "kop-1_3b1f2c4d-0000-4000-8000-000000000002"

static struct kop_leader_record rec_of(const char *holder, int64_t dur_s, int64_t transitions)
{
    struct kop_leader_record r;
    memset(&r, 0, sizeof(r));
    snprintf(r.holder, sizeof(r.holder), "%s", holder);
    r.lease_duration_s = dur_s;
    r.acquire_wall_ns = INT64_C(1700000000) * SEC;
    r.renew_wall_ns = INT64_C(1700000000) * SEC;
    r.transitions = transitions;
    return r;
}

START_TEST(test_leader_record_from_vector)
{
    char *path = kop_test_data_path("vectors/apiserver/lease_serializer_fieldorder_HEAD.json");
    json_t *lease = json_load_file(path, 0, NULL);
    free(path);
    ck_assert_ptr_nonnull(lease);
    struct kop_leader_record r;
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), 0);
    ck_assert_str_eq(r.holder, "holderIdentityValue");
    ck_assert(!r.holder_too_long);
    ck_assert_int_eq(r.lease_duration_s, 2);
    ck_assert_int_eq(r.transitions, 5);
    int64_t want = 0;
    ck_assert_int_eq(kop_clock_parse_rfc3339("2003-01-01T01:01:01Z", &want), 0);
    ck_assert_int_eq(r.acquire_wall_ns, want + 3000);
    ck_assert_int_eq(kop_clock_parse_rfc3339("2004-01-01T01:01:01Z", &want), 0);
    ck_assert_int_eq(r.renew_wall_ns, want + 4000);
    json_decref(lease);
}
END_TEST

START_TEST(test_leader_record_missing_and_bad_fields)
{
    json_t *lease = json_loads("{\"kind\":\"Lease\",\"metadata\":{\"name\":\"x\"}}", 0, NULL);
    struct kop_leader_record r;
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), 0);
    ck_assert_str_eq(r.holder, "");
    ck_assert_int_eq(r.lease_duration_s, 0);
    ck_assert_int_eq(r.acquire_wall_ns, 0);
    ck_assert_int_eq(r.transitions, 0);
    json_decref(lease);

    lease = json_loads("{\"spec\":{\"holderIdentity\":7,\"renewTime\":\"yesterday\","
                       "\"leaseDurationSeconds\":\"15\"}}",
                       0, NULL);
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), 0);
    ck_assert_str_eq(r.holder, "");
    ck_assert_int_eq(r.renew_wall_ns, 0);
    ck_assert_int_eq(r.lease_duration_s, 0);
    json_decref(lease);

    lease = json_loads("{\"spec\":[]}", 0, NULL);
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), -EINVAL);
    json_decref(lease);
    lease = json_loads("[1]", 0, NULL);
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), -EINVAL);
    json_decref(lease);
    ck_assert_int_eq(kop_leader_record_from_lease(NULL, &r), -EINVAL);
}
END_TEST

START_TEST(test_leader_record_long_holder_never_mine)
{
    char big[KOP_LEADER_HOLDER_MAX + 10];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    json_t *lease =
        json_pack("{s:{s:s,s:i}}", "spec", "holderIdentity", big, "leaseDurationSeconds", 15);
    struct kop_leader_record r;
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &r), 0);
    ck_assert(r.holder_too_long);
    ck_assert_uint_eq(strlen(r.holder), KOP_LEADER_HOLDER_MAX - 1);
    struct kop_leader_observer o = {0};
    kop_leader_observe(&o, &r, 100 * SEC);
    /* Our identity equal to the truncated prefix still is not the holder. */
    ck_assert(!kop_leader_observer_is_mine(&o, r.holder));
    ck_assert_int_eq(kop_leader_decide(&o, r.holder, 101 * SEC), KOP_LEADER_WAIT);
    json_decref(lease);
}
END_TEST

START_TEST(test_leader_record_to_lease_shape)
{
    struct kop_leader_record r = rec_of(ME, 15, 3);
    int64_t t = 0;
    ck_assert_int_eq(kop_clock_parse_rfc3339("2023-07-04T21:58:48.065888Z", &t), 0);
    r.renew_wall_ns = t;
    r.acquire_wall_ns = t - 60 * SEC;
    json_t *lease = NULL;
    ck_assert_int_eq(kop_leader_record_to_lease(&r, NULL, "kop-system", "kop-leader", &lease), 0);
    char *s = NULL;
    ck_assert_int_eq(kop_json_dump(lease, JSON_COMPACT, &s, NULL), 0);
    /* Field order as the apiserver serializes a Lease. */
    ck_assert_str_eq(s, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                        "\"metadata\":{\"name\":\"kop-leader\",\"namespace\":\"kop-system\"},"
                        "\"spec\":{\"holderIdentity\":\"" ME "\",\"leaseDurationSeconds\":15,"
                        "\"acquireTime\":\"2023-07-04T21:57:48.065888Z\","
                        "\"renewTime\":\"2023-07-04T21:58:48.065888Z\",\"leaseTransitions\":3}}");
    free(s);

    /* Round trip. */
    struct kop_leader_record back;
    ck_assert_int_eq(kop_leader_record_from_lease(lease, &back), 0);
    ck_assert(kop_leader_record_equal(&r, &back));

    /* On a base: metadata (resourceVersion) kept, spec replaced. */
    json_t *base = json_loads("{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
                              "\"metadata\":{\"name\":\"kop-leader\",\"namespace\":\"kop-system\","
                              "\"resourceVersion\":\"42\"},\"spec\":{\"holderIdentity\":\"x\","
                              "\"preferredHolder\":\"y\"}}",
                              0, NULL);
    json_t *upd = NULL;
    struct kop_leader_record rel = rec_of("", 1, 3);
    ck_assert_int_eq(kop_leader_record_to_lease(&rel, base, NULL, NULL, &upd), 0);
    ck_assert_str_eq(kop_json_path_str(upd, "metadata.resourceVersion"), "42");
    ck_assert_str_eq(kop_json_path_str(upd, "spec.holderIdentity"), "");
    ck_assert_int_eq(json_integer_value(kop_json_path(upd, "spec.leaseDurationSeconds")), 1);
    ck_assert_ptr_null(kop_json_path(upd, "spec.preferredHolder"));
    /* The base is untouched. */
    ck_assert_str_eq(kop_json_path_str(base, "spec.holderIdentity"), "x");
    json_decref(upd);
    json_decref(base);
    json_decref(lease);
}
END_TEST

START_TEST(test_leader_decide_create_when_absent)
{
    struct kop_leader_observer o = {0};
    ck_assert_int_eq(kop_leader_decide(&o, ME, 5 * SEC), KOP_LEADER_CREATE);
    struct kop_leader_record r;
    kop_leader_next_record(&o, KOP_LEADER_CREATE, ME, 15, 1000 * SEC, &r);
    ck_assert_str_eq(r.holder, ME);
    ck_assert_int_eq(r.lease_duration_s, 15);
    ck_assert_int_eq(r.acquire_wall_ns, 1000 * SEC);
    ck_assert_int_eq(r.renew_wall_ns, 1000 * SEC);
    ck_assert_int_eq(r.transitions, 0);
}
END_TEST

START_TEST(test_leader_decide_renew_own)
{
    struct kop_leader_observer o = {0};
    struct kop_leader_record mine = rec_of(ME, 15, 4);
    kop_leader_observe(&o, &mine, 10 * SEC);
    ck_assert(kop_leader_observer_is_mine(&o, ME));
    ck_assert_int_eq(kop_leader_decide(&o, ME, 11 * SEC), KOP_LEADER_RENEW);
    /* Even when our own record looks expired we renew it (client-go). */
    ck_assert_int_eq(kop_leader_decide(&o, ME, 100 * SEC), KOP_LEADER_RENEW);
    struct kop_leader_record r;
    kop_leader_next_record(&o, KOP_LEADER_RENEW, ME, 15, 2000 * SEC, &r);
    ck_assert_int_eq(r.acquire_wall_ns, mine.acquire_wall_ns);
    ck_assert_int_eq(r.renew_wall_ns, 2000 * SEC);
    ck_assert_int_eq(r.transitions, 4);
}
END_TEST

START_TEST(test_leader_decide_live_lease_not_taken)
{
    struct kop_leader_observer o = {0};
    struct kop_leader_record other = rec_of(OTHER, 15, 0);
    kop_leader_observe(&o, &other, 10 * SEC);
    ck_assert(!kop_leader_observer_is_mine(&o, ME));
    ck_assert(kop_leader_observer_held(&o, 10 * SEC));
    ck_assert_int_eq(kop_leader_decide(&o, ME, 10 * SEC), KOP_LEADER_WAIT);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 25 * SEC - 1), KOP_LEADER_WAIT);
    /* The holder renews: the record changes, so the clock restarts. */
    other.renew_wall_ns += 2 * SEC;
    kop_leader_observe(&o, &other, 20 * SEC);
    ck_assert_int_eq(o.observed_ns, 20 * SEC);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 34 * SEC), KOP_LEADER_WAIT);
}
END_TEST

START_TEST(test_leader_decide_expired_taken_over)
{
    struct kop_leader_observer o = {0};
    struct kop_leader_record other = rec_of(OTHER, 15, 2);
    kop_leader_observe(&o, &other, 10 * SEC);
    /* Seeing the same record again does not move the observation time. */
    kop_leader_observe(&o, &other, 20 * SEC);
    ck_assert_int_eq(o.observed_ns, 10 * SEC);
    ck_assert(!kop_leader_observer_held(&o, 25 * SEC));
    ck_assert_int_eq(kop_leader_decide(&o, ME, 25 * SEC), KOP_LEADER_ACQUIRE);
    struct kop_leader_record r;
    kop_leader_next_record(&o, KOP_LEADER_ACQUIRE, ME, 15, 3000 * SEC, &r);
    ck_assert_str_eq(r.holder, ME);
    ck_assert_int_eq(r.transitions, 3);
    ck_assert_int_eq(r.acquire_wall_ns, 3000 * SEC);
    ck_assert_int_eq(r.renew_wall_ns, 3000 * SEC);
}
END_TEST

START_TEST(test_leader_decide_local_clock_not_remote_time)
{
    /* A renewTime years in the past does not matter: what counts is when
     * we saw the record change (clock skew between nodes is harmless). */
    struct kop_leader_observer o = {0};
    struct kop_leader_record other = rec_of(OTHER, 15, 0);
    other.renew_wall_ns = INT64_C(1000000000) * SEC;
    kop_leader_observe(&o, &other, 500 * SEC);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 501 * SEC), KOP_LEADER_WAIT);
    /* The duration is the record's, not ours. */
    other.lease_duration_s = 1;
    kop_leader_observe(&o, &other, 600 * SEC);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 600 * SEC + SEC / 2), KOP_LEADER_WAIT);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 601 * SEC), KOP_LEADER_ACQUIRE);
}
END_TEST

START_TEST(test_leader_decide_released_lease_taken_at_once)
{
    struct kop_leader_observer o = {0};
    struct kop_leader_record rel = rec_of("", 1, 6);
    kop_leader_observe(&o, &rel, 10 * SEC);
    ck_assert(!kop_leader_observer_held(&o, 10 * SEC));
    ck_assert_int_eq(kop_leader_decide(&o, ME, 10 * SEC), KOP_LEADER_ACQUIRE);
    struct kop_leader_record r;
    kop_leader_next_record(&o, KOP_LEADER_ACQUIRE, ME, 15, 10 * SEC, &r);
    ck_assert_int_eq(r.transitions, 7);
    /* Empty own identity never matches an empty holder. */
    ck_assert(!kop_leader_observer_is_mine(&o, ""));
    /* A zero or missing duration means expired. */
    struct kop_leader_record nod = rec_of(OTHER, 0, 0);
    kop_leader_observe(&o, &nod, 20 * SEC);
    ck_assert_int_eq(kop_leader_decide(&o, ME, 20 * SEC), KOP_LEADER_ACQUIRE);
}
END_TEST

START_TEST(test_leader_options_validated)
{
    struct kop_leader *l = NULL;
    struct kop_client *fake = (struct kop_client *)&l; /* never dereferenced */
    struct kop_leader_options o = {.client = fake, .namespace = "ns", .name = "lease"};
    /* lease must exceed the renew deadline */
    o.lease_duration_ms = 1000;
    o.renew_deadline_ms = 1000;
    ck_assert_int_eq(kop_leader_new(&o, &l), -EINVAL);
    /* renew deadline must exceed 1.2 * retry */
    o.lease_duration_ms = 2000;
    o.renew_deadline_ms = 1200;
    o.retry_period_ms = 1000;
    ck_assert_int_eq(kop_leader_new(&o, &l), -EINVAL);
    o.retry_period_ms = -1;
    ck_assert_int_eq(kop_leader_new(&o, &l), -EINVAL);
    o.retry_period_ms = 200;
    o.identity = "";
    ck_assert_int_eq(kop_leader_new(&o, &l), -EINVAL);
    o.identity = NULL;
    o.name = "";
    ck_assert_int_eq(kop_leader_new(&o, &l), -EINVAL);
    o.name = "lease";
    ck_assert_ptr_null(l);

    /* Defaults (15 s / 10 s / 2 s) are valid; not started, so freeing
     * makes no request. */
    struct kop_metrics *m = kop_metrics_new(false);
    struct kop_leader_options d = {
        .client = fake, .namespace = "ns", .name = "lease", .identity = ME, .metrics = m};
    ck_assert_int_eq(kop_leader_new(&d, &l), 0);
    ck_assert_str_eq(kop_leader_identity(l), ME);
    ck_assert(!kop_leader_is_leader(l));
    char buf[8];
    ck_assert_int_eq(kop_leader_leader(l, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "");
    ck_assert_int_eq(kop_leader_stop(l, true), 0);
    kop_leader_free(l);
    kop_leader_free(NULL);
    kop_metrics_free(m);
}
END_TEST

START_TEST(test_leader_default_identity)
{
    char a[KOP_LEADER_HOLDER_MAX], b[KOP_LEADER_HOLDER_MAX];
    ck_assert_int_eq(kop_leader_default_identity(a, sizeof(a)), 0);
    ck_assert_int_eq(kop_leader_default_identity(b, sizeof(b)), 0);
    ck_assert_str_ne(a, b);
    regex_t re;
    ck_assert_int_eq(regcomp(&re,
                             "^.+_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
                             "[0-9a-f]{12}$",
                             REG_EXTENDED | REG_NOSUB),
                     0);
    ck_assert_int_eq(regexec(&re, a, 0, NULL, 0), 0);
    regfree(&re);

    setenv("POD_NAME", "kop-7d9c-abcde", 1);
    ck_assert_int_eq(kop_leader_default_identity(a, sizeof(a)), 0);
    unsetenv("POD_NAME");
    ck_assert_int_eq(strncmp(a, "kop-7d9c-abcde_", 15), 0);
    ck_assert_uint_eq(strlen(a), 15 + 36);

    char small[10];
    ck_assert_int_eq(kop_leader_default_identity(small, sizeof(small)), -EINVAL);
}
END_TEST

static Suite *leader_suite(void)
{
    Suite *s = suite_create("leader");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_leader_record_from_vector);
    tcase_add_test(tc, test_leader_record_missing_and_bad_fields);
    tcase_add_test(tc, test_leader_record_long_holder_never_mine);
    tcase_add_test(tc, test_leader_record_to_lease_shape);
    tcase_add_test(tc, test_leader_decide_create_when_absent);
    tcase_add_test(tc, test_leader_decide_renew_own);
    tcase_add_test(tc, test_leader_decide_live_lease_not_taken);
    tcase_add_test(tc, test_leader_decide_expired_taken_over);
    tcase_add_test(tc, test_leader_decide_local_clock_not_remote_time);
    tcase_add_test(tc, test_leader_decide_released_lease_taken_at_once);
    tcase_add_test(tc, test_leader_options_validated);
    tcase_add_test(tc, test_leader_default_identity);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(leader_suite());
}
