/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the pure parts of sharding: FNV-1a-64 against the published
 * test vectors, the consistent-hash ring (deterministic, order-free,
 * balanced, and moving only the keys of a member that left or about 1/n
 * of them when one joins), the sharder's decision table (assign without a
 * live owner, drain before a move, wait for the drain, move only after
 * it, leave objects alone when the membership did not change), the
 * owner's gate, and the mutating webhook's AdmissionReview answer.
 */
#include "kop/sharder.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/kubeconfig.h"
#include "testutil.h"

START_TEST(test_sharder_fnv1a64_vectors)
{
    /* FNV-1a 64 reference values (Fowler/Noll/Vo test suite). */
    ck_assert_uint_eq(kop_sharder_fnv1a64(""), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(kop_sharder_fnv1a64("a"), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(kop_sharder_fnv1a64("foobar"), UINT64_C(0x85944171f73967e8));
}
END_TEST

static json_t *members_of(int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "kop-%d", i);
        json_array_append_new(a, json_string(id));
    }
    return a;
}

static void uid_of(int i, char *buf, size_t len)
{
    snprintf(buf, len, "3b1f2c4d-0000-4000-8000-%012d", i);
}

START_TEST(test_sharder_ring_balanced_and_order_free)
{
    json_t *m = members_of(4);
    json_t *rev = json_pack("[s,s,s,s]", "kop-3", "kop-1", "kop-0", "kop-2");
    struct kop_shard_ring *r = NULL, *r2 = NULL;
    ck_assert_int_eq(kop_shard_ring_new(m, &r), 0);
    ck_assert_int_eq(kop_shard_ring_new(rev, &r2), 0);
    int counts[4] = {0};
    for (int i = 0; i < 4000; i++) {
        char uid[64];
        uid_of(i, uid, sizeof(uid));
        const char *o = kop_shard_ring_owner(r, uid);
        ck_assert_ptr_nonnull(o);
        ck_assert_str_eq(o, kop_shard_ring_owner(r2, uid)); /* same set, same answer */
        counts[o[4] - '0']++;
    }
    for (int k = 0; k < 4; k++) /* 1000 each when perfect; 128 points keep it within 35% */
        ck_assert_msg(counts[k] > 650 && counts[k] < 1350, "member %d owns %d of 4000", k,
                      counts[k]);
    kop_shard_ring_free(r);
    kop_shard_ring_free(r2);
    json_decref(m);
    json_decref(rev);
}
END_TEST

START_TEST(test_sharder_ring_minimal_movement)
{
    json_t *three = members_of(3), *four = members_of(4);
    struct kop_shard_ring *r3 = NULL, *r4 = NULL;
    ck_assert_int_eq(kop_shard_ring_new(three, &r3), 0);
    ck_assert_int_eq(kop_shard_ring_new(four, &r4), 0);
    int moved = 0;
    for (int i = 0; i < 4000; i++) {
        char uid[64];
        uid_of(i, uid, sizeof(uid));
        const char *a = kop_shard_ring_owner(r3, uid), *b = kop_shard_ring_owner(r4, uid);
        if (strcmp(a, b) != 0) {
            /* A join only takes keys for the new member; a leave (read the
             * other way) only gives away the leaver's keys. */
            ck_assert_str_eq(b, "kop-3");
            moved++;
        }
    }
    ck_assert_msg(moved > 600 && moved < 1400, "moved %d of 4000 (about 1000 expected)", moved);
    kop_shard_ring_free(r3);
    kop_shard_ring_free(r4);
    json_decref(three);
    json_decref(four);
}
END_TEST

START_TEST(test_sharder_ring_empty_and_invalid)
{
    json_t *empty = json_array(), *bad = json_pack("[i]", 1);
    struct kop_shard_ring *r = NULL;
    ck_assert_int_eq(kop_shard_ring_new(empty, &r), 0);
    ck_assert_ptr_null(kop_shard_ring_owner(r, "x"));
    kop_shard_ring_free(r);
    ck_assert_int_eq(kop_shard_ring_new(bad, &r), -EINVAL);
    ck_assert_int_eq(kop_shard_ring_new(NULL, &r), -EINVAL);
    json_decref(empty);
    json_decref(bad);
}
END_TEST

START_TEST(test_sharder_decide_table)
{
    /* No owner, or an owner that is not live: assigned at once, no drain,
     * whether or not the membership changed. */
    ck_assert_int_eq(kop_shard_decide(NULL, false, false, false, "b", false), KOP_SHARD_ASSIGN);
    ck_assert_int_eq(kop_shard_decide("", false, false, false, "b", true), KOP_SHARD_ASSIGN);
    ck_assert_int_eq(kop_shard_decide("a", false, true, true, "b", false), KOP_SHARD_ASSIGN);
    /* Owner is the ring's choice: nothing to do. */
    ck_assert_int_eq(kop_shard_decide("b", true, false, false, "b", true), KOP_SHARD_KEEP);
    /* Live owner, not the ring's choice: only on a membership change ... */
    ck_assert_int_eq(kop_shard_decide("a", true, false, false, "b", false), KOP_SHARD_KEEP);
    /* ... drain first, */
    ck_assert_int_eq(kop_shard_decide("a", true, false, false, "b", true), KOP_SHARD_DRAIN);
    /* wait while the drain label is there, */
    ck_assert_int_eq(kop_shard_decide("a", true, true, true, "b", true), KOP_SHARD_WAIT);
    ck_assert_int_eq(kop_shard_decide("a", true, true, false, "b", true), KOP_SHARD_WAIT);
    /* and move once the owner removed it. */
    ck_assert_int_eq(kop_shard_decide("a", true, false, true, "b", true), KOP_SHARD_MOVE);
    ck_assert_int_eq(kop_shard_decide("a", true, false, true, "b", false), KOP_SHARD_MOVE);
}
END_TEST

START_TEST(test_sharder_gate_table)
{
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", false, false), KOP_SHARD_RECONCILE);
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", true, false), KOP_SHARD_RELEASE);
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", true, true), KOP_SHARD_RELEASE);
    /* Released: refused until the owner label moves (or a lease duration). */
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", false, true), KOP_SHARD_SKIP);
    ck_assert_int_eq(kop_shard_gate_decide("other", "me", false, false), KOP_SHARD_SKIP);
    ck_assert_int_eq(kop_shard_gate_decide(NULL, "me", false, false), KOP_SHARD_SKIP);
}
END_TEST

/* The JSONPatch of a mutate answer, decoded. */
static json_t *answer_patch(const char *body, json_t **ret_review)
{
    json_t *rev = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(rev);
    *ret_review = rev;
    const char *b64 = json_string_value(json_object_get(json_object_get(rev, "response"), "patch"));
    if (!b64)
        return NULL;
    char *raw = NULL;
    size_t n = 0;
    ck_assert_int_eq(kop_base64_decode(b64, strlen(b64), &raw, &n), 0);
    json_t *p = json_loadb(raw, n, 0, NULL);
    free(raw);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_sharder_mutate_adds_owner_label)
{
    json_t *m = members_of(3);
    struct kop_shard_ring *r = NULL;
    ck_assert_int_eq(kop_shard_ring_new(m, &r), 0);
    const char *want = kop_shard_ring_owner(r, "default/web");
    char *body = NULL;
    static const char no_labels[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"req-1\",\"operation\":\"CREATE\",\"namespace\":\"default\",\"name\":\"web\","
        "\"object\":{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"}}}}";
    ck_assert_int_eq(kop_sharder_mutate(no_labels, strlen(no_labels), m, &body), 200);
    json_t *rev = NULL;
    json_t *p = answer_patch(body, &rev);
    const json_t *resp = json_object_get(rev, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")), "req-1");
    ck_assert(json_is_true(json_object_get(resp, "allowed")));
    ck_assert_str_eq(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
    ck_assert_str_eq(json_string_value(json_object_get(rev, "apiVersion")), "admission.k8s.io/v1");
    json_t *expect = json_pack("[{s:s,s:s,s:{s:s}}]", "op", "add", "path", "/metadata/labels",
                               "value", KOP_SHARDER_OWNER_LABEL, want);
    ck_assert(json_equal(p, expect));
    json_decref(expect);
    json_decref(p);
    json_decref(rev);
    free(body);

    /* With labels: one key added, "/" escaped as ~1 (RFC 6901). */
    static const char labels[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"req-2\",\"operation\":\"CREATE\",\"namespace\":\"default\",\"name\":\"web\","
        "\"object\":{\"metadata\":{\"name\":\"web\",\"labels\":{\"app\":\"x\"}}}}}";
    ck_assert_int_eq(kop_sharder_mutate(labels, strlen(labels), m, &body), 200);
    p = answer_patch(body, &rev);
    expect = json_pack("[{s:s,s:s,s:s}]", "op", "add", "path",
                       "/metadata/labels/shard.kop.io~1owner", "value", want);
    ck_assert(json_equal(p, expect));
    json_decref(expect);
    json_decref(p);
    json_decref(rev);
    free(body);
    kop_shard_ring_free(r);
    json_decref(m);
}
END_TEST

START_TEST(test_sharder_mutate_leaves_alone)
{
    json_t *m = members_of(2), *none = json_array();
    char *body = NULL;
    json_t *rev = NULL;
    /* A live owner already set: kept. */
    static const char owned[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"a\","
        "\"labels\":{\"shard.kop.io/owner\":\"kop-1\"}}}}}";
    ck_assert_int_eq(kop_sharder_mutate(owned, strlen(owned), m, &body), 200);
    ck_assert_ptr_null(answer_patch(body, &rev));
    ck_assert(json_is_true(json_object_get(json_object_get(rev, "response"), "allowed")));
    json_decref(rev);
    free(body);
    /* No members known yet: allowed without a label (the sharder assigns). */
    static const char fresh[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"a\"}}}}";
    ck_assert_int_eq(kop_sharder_mutate(fresh, strlen(fresh), none, &body), 200);
    ck_assert_ptr_null(answer_patch(body, &rev));
    json_decref(rev);
    free(body);
    /* Not a review: 400. */
    ck_assert_int_eq(kop_sharder_mutate("{}", 2, m, &body), 400);
    free(body);
    json_decref(m);
    json_decref(none);
}
END_TEST

static Suite *sharder_suite(void)
{
    Suite *s = suite_create("sharder");
    TCase *tc = tcase_create("sharder");
    tcase_add_test(tc, test_sharder_fnv1a64_vectors);
    tcase_add_test(tc, test_sharder_ring_balanced_and_order_free);
    tcase_add_test(tc, test_sharder_ring_minimal_movement);
    tcase_add_test(tc, test_sharder_ring_empty_and_invalid);
    tcase_add_test(tc, test_sharder_decide_table);
    tcase_add_test(tc, test_sharder_gate_table);
    tcase_add_test(tc, test_sharder_mutate_adds_owner_label);
    tcase_add_test(tc, test_sharder_mutate_leaves_alone);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(sharder_suite());
}
