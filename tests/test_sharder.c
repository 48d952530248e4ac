/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the pure parts of sharding: FNV-1a-64 against the published
 * test vectors and its high bits over random UUIDv4 strings, the
 * consistent-hash ring (order-free, the largest share at 4 members within
 * 10% of a quarter over 100,000 random uids, moving only the keys of a
 * member that left or about 1/n of them when one joins, and its ranges
 * tiling the 64-bit space as an upstream shardRange selector would), the sharder's decision table
 * (assign without a live owner, drain before a move, wait for the drain, move only after it, leave
 * objects alone when the membership did not change), the owner's gate, and the mutating webhook's
 * AdmissionReview answer.
 */
#include "kop/sharder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/clock.h"
#include "kop/kubeconfig.h"
#include "testutil.h"

START_TEST(test_sharder_fnv1a64_vectors)
{
    /* FNV-1a 64 reference values (Fowler/Noll/Vo test suite). */
    ck_assert_uint_eq(kop_sharder_fnv1a64(""), UINT64_C(0xcbf29ce484222325));
    ck_assert_uint_eq(kop_sharder_fnv1a64("a"), UINT64_C(0xaf63dc4c8601ec8c));
    ck_assert_uint_eq(kop_sharder_fnv1a64("foobar"), UINT64_C(0x85944171f73967e8));
    /* The MurmurHash3 finalizer fixes 0 and moves everything else. */
    ck_assert_uint_eq(kop_sharder_mix64(0), 0);
    ck_assert_uint_ne(kop_sharder_mix64(1), 1);
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

/* Random UUIDv4 strings, as the apiserver makes them (k8s.io/apimachinery
 * util/uuid: google/uuid NewRandom), from a fixed xorshift64* seed so the
 * measurement is the same on every run. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * UINT64_C(2685821657736338717);
}

static void uuid4(char buf[37])
{
    unsigned char b[16];
    uint64_t x = rng_next(), y = rng_next();
    for (int i = 0; i < 8; i++) {
        b[i] = (unsigned char)(x >> (8 * i));
        b[8 + i] = (unsigned char)(y >> (8 * i));
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

#define N_UIDS 100000

START_TEST(test_sharder_fnv1a64_uuid_high_bits_uniform)
{
    /* Positions are plain FNV-1a of the uid (the upstream shardRange hash),
     * so its high bits must be even over real uids: 16 buckets by the top
     * nibble, each within 5% of 1/16 (3 sigma is 3.7%). */
    rng_state = UINT64_C(0x9e3779b97f4a7c15);
    int buckets[16] = {0};
    for (int i = 0; i < N_UIDS; i++) {
        char uid[37];
        uuid4(uid);
        buckets[kop_sharder_fnv1a64(uid) >> 60]++;
    }
    for (int k = 0; k < 16; k++)
        ck_assert_msg(buckets[k] > N_UIDS / 16 * 95 / 100 && buckets[k] < N_UIDS / 16 * 105 / 100,
                      "top nibble %x: %d of %d", k, buckets[k], N_UIDS);
}
END_TEST

/* Shares of N_UIDS random uids over the members of r; the largest and the
 * smallest relative to an even share. */
static void measure_shares(const struct kop_shard_ring *r, json_t *members, double *ret_max,
                           double *ret_min)
{
    size_t n = json_array_size(members);
    int counts[8] = {0};
    ck_assert_uint_le(n, 8);
    rng_state = UINT64_C(0x2545f4914f6cdd1d);
    for (int i = 0; i < N_UIDS; i++) {
        char uid[37];
        uuid4(uid);
        const char *o = kop_shard_ring_owner(r, uid);
        ck_assert_ptr_nonnull(o);
        size_t k = 0;
        while (k < n && strcmp(json_string_value(json_array_get(members, k)), o) != 0)
            k++;
        ck_assert_uint_lt(k, n);
        counts[k]++;
    }
    int hi = 0, lo = N_UIDS;
    for (size_t k = 0; k < n; k++) {
        hi = counts[k] > hi ? counts[k] : hi;
        lo = counts[k] < lo ? counts[k] : lo;
    }
    *ret_max = (double)hi * (double)n / N_UIDS;
    *ret_min = (double)lo * (double)n / N_UIDS;
}

START_TEST(test_sharder_ring_balanced_and_order_free)
{
    /* The goal: at 4 members the largest share within ~10% of a
     * quarter. Two sets of names: the tests' and Deployment pod names. */
    json_t *sets[2] = {members_of(4),
                       json_pack("[s,s,s,s]", "kop-controller-manager-6d4b9c7f8-2xkqz",
                                 "kop-controller-manager-6d4b9c7f8-7hmwd",
                                 "kop-controller-manager-6d4b9c7f8-bq5rn",
                                 "kop-controller-manager-6d4b9c7f8-tz9cv")};
    for (int s = 0; s < 2; s++) {
        struct kop_shard_ring *r = NULL;
        ck_assert_int_eq(kop_shard_ring_new(sets[s], &r), 0);
        double hi = 0, lo = 0;
        measure_shares(r, sets[s], &hi, &lo);
        printf("sharder balance, set %d, %d points per member, %d uids: largest %.3f, "
               "smallest %.3f of an even share\n",
               s, KOP_SHARD_VNODES, N_UIDS, hi, lo);
        ck_assert_msg(hi <= 1.10, "largest share %.3f of a quarter", hi);
        ck_assert_msg(lo >= 0.90, "smallest share %.3f of a quarter", lo);
        kop_shard_ring_unref(r);
    }
    /* Same set in another order: same ring. */
    json_t *rev = json_pack("[s,s,s,s]", "kop-3", "kop-1", "kop-0", "kop-2");
    struct kop_shard_ring *r = NULL, *r2 = NULL;
    ck_assert_int_eq(kop_shard_ring_new(sets[0], &r), 0);
    ck_assert_int_eq(kop_shard_ring_new(rev, &r2), 0);
    rng_state = 7;
    for (int i = 0; i < 4000; i++) {
        char uid[37];
        uuid4(uid);
        ck_assert_str_eq(kop_shard_ring_owner(r, uid), kop_shard_ring_owner(r2, uid));
    }
    kop_shard_ring_unref(r);
    kop_shard_ring_unref(r2);
    json_decref(rev);
    json_decref(sets[0]);
    json_decref(sets[1]);
}
END_TEST

START_TEST(test_sharder_ring_minimal_movement)
{
    json_t *three = members_of(3), *four = members_of(4);
    struct kop_shard_ring *r3 = NULL, *r4 = NULL;
    ck_assert_int_eq(kop_shard_ring_new(three, &r3), 0);
    ck_assert_int_eq(kop_shard_ring_new(four, &r4), 0);
    int moved = 0;
    rng_state = 11;
    for (int i = 0; i < N_UIDS; i++) {
        char uid[37];
        uuid4(uid);
        const char *a = kop_shard_ring_owner(r3, uid), *b = kop_shard_ring_owner(r4, uid);
        if (strcmp(a, b) != 0) {
            /* A join only takes keys for the new member; a leave (read the
             * other way) only gives away the leaver's keys. */
            ck_assert_str_eq(b, "kop-3");
            moved++;
        }
    }
    /* The new member's share: a quarter, within the balance bound. */
    ck_assert_msg(moved > N_UIDS / 4 * 90 / 100 && moved < N_UIDS / 4 * 110 / 100,
                  "moved %d of %d (about a quarter expected)", moved, N_UIDS);
    kop_shard_ring_unref(r3);
    kop_shard_ring_unref(r4);
    json_decref(three);
    json_decref(four);
}
END_TEST

/* Parse "0x" + hex from s; the end pointer in *ret_end. */
static int parse_bound(const char *s, const char **ret_end, uint64_t *ret, bool *ret_2_64)
{
    if (strncmp(s, "'0x", 3) != 0)
        return -1;
    const char *p = s + 3, *q = strchr(p, '\'');
    if (!q)
        return -1;
    *ret_2_64 = q - p == 17 && strncmp(p, "10000000000000000", 17) == 0;
    if (!*ret_2_64 && q - p != 16)
        return -1; /* 16 digits, as the upstream parser requires */
    *ret = *ret_2_64 ? 0 : strtoull(p, NULL, 16);
    *ret_end = q + 1;
    return 0;
}

START_TEST(test_sharder_ring_ranges_are_the_assignment)
{
    json_t *m = members_of(4);
    struct kop_shard_ring *r = NULL;
    ck_assert_int_eq(kop_shard_ring_new(m, &r), 0);
    struct kop_shard_range *rg[4] = {NULL};
    size_t n[4] = {0}, total = 0;
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(
            kop_shard_ring_ranges(r, json_string_value(json_array_get(m, k)), &rg[k], &n[k]), 0);
        total += n[k];
        for (size_t i = 0; i < n[k]; i++) {
            ck_assert_uint_le(rg[k][i].start, rg[k][i].last);
            if (i > 0) /* ascending and merged: a gap between two ranges */
                ck_assert_uint_gt(rg[k][i].start, rg[k][i - 1].last + 1);
        }
    }
    /* The four sets tile [0, 2^64): sorted together, each range starts one
     * after the previous one's end, from 0 to UINT64_MAX. */
    uint64_t next = 0;
    size_t idx[4] = {0};
    for (size_t t = 0; t < total; t++) {
        int found = -1;
        for (int k = 0; k < 4; k++) {
            if (idx[k] < n[k] && rg[k][idx[k]].start == next)
                found = k;
        }
        ck_assert_msg(found >= 0, "no range starts at %016" PRIx64, next);
        uint64_t last = rg[found][idx[found]++].last;
        if (t + 1 < total)
            ck_assert_uint_ne(last, UINT64_MAX);
        else
            ck_assert_uint_eq(last, UINT64_MAX);
        next = last + 1;
    }
    /* Each uid's owner is the member whose ranges hold FNV-1a(uid). */
    rng_state = 13;
    for (int i = 0; i < N_UIDS; i++) {
        char uid[37];
        uuid4(uid);
        uint64_t h = kop_sharder_fnv1a64(uid);
        const char *o = kop_shard_ring_owner(r, uid);
        int k = o[4] - '0';
        size_t lo = 0, hi = n[k];
        while (lo < hi) { /* the last range starting at or below h */
            size_t mid = lo + (hi - lo) / 2;
            if (rg[k][mid].start <= h)
                lo = mid + 1;
            else
                hi = mid;
        }
        ck_assert_msg(lo > 0 && h <= rg[k][lo - 1].last, "%s -> %016" PRIx64 " not in %s's ranges",
                      uid, h, o);
    }
    /* The selector says the same ranges in the upstream syntax. */
    char *sel = NULL;
    ck_assert_int_eq(kop_shard_ring_selector(r, "kop-2", &sel), 0);
    const char *p = sel;
    for (size_t i = 0; i < n[2]; i++) {
        static const char head[] = "shardRange(object.metadata.uid, ";
        ck_assert_msg(strncmp(p, head, strlen(head)) == 0, "at %.40s", p);
        p += strlen(head);
        uint64_t start = 0, end = 0;
        bool s64 = false, e64 = false;
        ck_assert_int_eq(parse_bound(p, &p, &start, &s64), 0);
        ck_assert(!s64);
        ck_assert(strncmp(p, ", ", 2) == 0);
        ck_assert_int_eq(parse_bound(p + 2, &p, &end, &e64), 0);
        ck_assert_uint_eq(start, rg[2][i].start);
        if (rg[2][i].last == UINT64_MAX)
            ck_assert(e64);
        else
            ck_assert(!e64 && end == rg[2][i].last + 1);
        ck_assert(*p == ')');
        p++;
        if (i + 1 < n[2]) {
            ck_assert_msg(strncmp(p, " || ", 4) == 0, "at %.20s", p);
            p += 4;
        }
    }
    ck_assert(*p == '\0');
    printf("sharder selector of kop-2 of 4: %zu ranges, %zu bytes\n", n[2], strlen(sel));
    free(sel);
    ck_assert_int_eq(kop_shard_ring_selector(r, "kop-9", &sel), -ENOENT);
    for (int k = 0; k < 4; k++)
        free(rg[k]);
    kop_shard_ring_unref(r);

    /* One member: the whole space, one range, up to 2^64. */
    json_t *one = members_of(1);
    ck_assert_int_eq(kop_shard_ring_new(one, &r), 0);
    ck_assert_int_eq(kop_shard_ring_selector(r, "kop-0", &sel), 0);
    ck_assert_str_eq(sel, "shardRange(object.metadata.uid, '0x0000000000000000', "
                          "'0x10000000000000000')");
    free(sel);
    kop_shard_ring_unref(r);
    json_decref(one);
    json_decref(m);
}
END_TEST

START_TEST(test_sharder_ring_empty_and_invalid)
{
    json_t *empty = json_array(), *bad = json_pack("[i]", 1);
    struct kop_shard_ring *r = NULL;
    ck_assert_int_eq(kop_shard_ring_new(empty, &r), 0);
    ck_assert_ptr_null(kop_shard_ring_owner(r, "x"));
    kop_shard_ring_unref(r);
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

/* A drained object moves only within one lease duration of its fence;
 * its old owner refuses it for longer, so the move lands in the refusal. */
START_TEST(test_sharder_move_window)
{
    const int64_t lease = 15 * KOP_NSEC_PER_SEC;
    ck_assert(kop_shard_move_in_time(1000, 1000, lease));
    ck_assert(kop_shard_move_in_time(1000, 1000 + lease - 1, lease));
    ck_assert(!kop_shard_move_in_time(1000, 1000 + lease, lease));
    ck_assert(!kop_shard_move_in_time(1000, 1000 + 10 * lease, lease));
    ck_assert_int_gt(KOP_SHARD_REFUSE_LEASES, 1);
}
END_TEST

START_TEST(test_sharder_gate_table)
{
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", false, false), KOP_SHARD_RECONCILE);
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", true, false), KOP_SHARD_RELEASE);
    ck_assert_int_eq(kop_shard_gate_decide("me", "me", true, true), KOP_SHARD_RELEASE);
    /* Released: refused until the owner label moves (or two lease durations). */
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

/* The mutating answer to review adds the owner label want to the labels
 * the object already has (one JSONPatch "add", "/" escaped as ~1). */
static void expect_owner_label_added(const char *review, struct kop_shard_ring *r, const char *want)
{
    char *body = NULL;
    json_t *rev = NULL;
    ck_assert_int_eq(kop_sharder_mutate(review, strlen(review), r, &body), 200);
    json_t *p = answer_patch(body, &rev);
    json_t *expect = json_pack("[{s:s,s:s,s:s}]", "op", "add", "path",
                               "/metadata/labels/shard.kop.io~1owner", "value", want);
    ck_assert(json_equal(p, expect));
    json_decref(expect);
    json_decref(p);
    json_decref(rev);
    free(body);
}

START_TEST(test_sharder_mutate_adds_owner_label)
{
    json_t *m = members_of(3);
    struct kop_shard_ring *r = NULL;
    ck_assert_int_eq(kop_shard_ring_new(m, &r), 0);
    /* No uid before admission: namespace/name, mixed, places it. */
    const char *want =
        kop_shard_ring_owner_at(r, kop_sharder_mix64(kop_sharder_fnv1a64("default/web")));
    char *body = NULL;
    static const char no_labels[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"req-1\",\"operation\":\"CREATE\",\"namespace\":\"default\",\"name\":\"web\","
        "\"object\":{\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"}}}}";
    ck_assert_int_eq(kop_sharder_mutate(no_labels, strlen(no_labels), r, &body), 200);
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
    expect_owner_label_added(labels, r, want);

    /* A uid sent by the client is not the object's uid (the apiserver sets
     * a new one after admission): still placed by namespace/name. */
    static const char with_uid[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"req-3\",\"operation\":\"CREATE\",\"namespace\":\"default\",\"name\":\"web\","
        "\"object\":{\"metadata\":{\"name\":\"web\",\"uid\":\"6f1c1a52-64cc-4a8e-9a4c-"
        "0d2f1c3b5e77\","
        "\"labels\":{}}}}}";
    expect_owner_label_added(with_uid, r, want);
    kop_shard_ring_unref(r);
    json_decref(m);
}
END_TEST

START_TEST(test_sharder_mutate_leaves_alone)
{
    json_t *m = members_of(2), *none = json_array();
    struct kop_shard_ring *r = NULL, *empty = NULL;
    ck_assert_int_eq(kop_shard_ring_new(m, &r), 0);
    ck_assert_int_eq(kop_shard_ring_new(none, &empty), 0);
    char *body = NULL;
    json_t *rev = NULL;
    /* A live owner already set: kept. */
    static const char owned[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"a\","
        "\"labels\":{\"shard.kop.io/owner\":\"kop-1\"}}}}}";
    ck_assert_int_eq(kop_sharder_mutate(owned, strlen(owned), r, &body), 200);
    ck_assert_ptr_null(answer_patch(body, &rev));
    ck_assert(json_is_true(json_object_get(json_object_get(rev, "response"), "allowed")));
    json_decref(rev);
    free(body);
    /* An owner that is not a member: labelled again. */
    static const char gone[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"a\","
        "\"labels\":{\"shard.kop.io/owner\":\"kop-7\"}}}}}";
    ck_assert_int_eq(kop_sharder_mutate(gone, strlen(gone), r, &body), 200);
    json_t *p = answer_patch(body, &rev);
    ck_assert_ptr_nonnull(p);
    json_decref(p);
    json_decref(rev);
    free(body);
    /* No members known yet (no ring, or an empty one): allowed without a
     * label (the sharder assigns). */
    static const char fresh[] =
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
        "\"uid\":\"u\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"a\"}}}}";
    ck_assert_int_eq(kop_sharder_mutate(fresh, strlen(fresh), empty, &body), 200);
    ck_assert_ptr_null(answer_patch(body, &rev));
    json_decref(rev);
    free(body);
    ck_assert_int_eq(kop_sharder_mutate(fresh, strlen(fresh), NULL, &body), 200);
    ck_assert_ptr_null(answer_patch(body, &rev));
    json_decref(rev);
    free(body);
    /* Not a review: 400. */
    ck_assert_int_eq(kop_sharder_mutate("{}", 2, r, &body), 400);
    free(body);
    /* References: the last unref frees (ASan would see a leak or a double
     * free otherwise). */
    ck_assert_ptr_eq(kop_shard_ring_ref(r), r);
    kop_shard_ring_unref(r);
    kop_shard_ring_unref(r);
    kop_shard_ring_unref(empty);
    kop_shard_ring_unref(NULL);
    json_decref(m);
    json_decref(none);
}
END_TEST

static Suite *sharder_suite(void)
{
    Suite *s = suite_create("sharder");
    TCase *tc = tcase_create("sharder");
    tcase_add_test(tc, test_sharder_fnv1a64_vectors);
    tcase_add_test(tc, test_sharder_fnv1a64_uuid_high_bits_uniform);
    tcase_add_test(tc, test_sharder_ring_balanced_and_order_free);
    tcase_add_test(tc, test_sharder_ring_minimal_movement);
    tcase_add_test(tc, test_sharder_ring_ranges_are_the_assignment);
    tcase_add_test(tc, test_sharder_ring_empty_and_invalid);
    tcase_add_test(tc, test_sharder_decide_table);
    tcase_add_test(tc, test_sharder_move_window);
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
