/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the pure part of Lease membership: which identities may name
 * a member, and who is live on a fake monotonic clock: a held Lease is
 * live until it has not changed for its lease duration (local clock, not
 * its timestamps), a released one (holder "") is gone at once, a Lease
 * held by another identity than its name says is not a member, Leases
 * without the prefix are ignored, and the result is sorted.
 */
#include "kop/membership.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kop/clock.h"
#include "testutil.h"

#define SEC KOP_NSEC_PER_SEC

static json_t *lease(const char *name, const char *holder, const char *renew)
{
    return json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:i, s:s, s:s}}", "apiVersion",
                     "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name", name, "spec",
                     "holderIdentity", holder, "leaseDurationSeconds", 10, "renewTime", renew,
                     "acquireTime", "2026-01-01T00:00:00.000000Z");
}

START_TEST(test_membership_identity_valid)
{
    ck_assert(kop_membership_identity_valid("kop-0"));
    ck_assert(kop_membership_identity_valid("a"));
    ck_assert(!kop_membership_identity_valid(""));
    ck_assert(!kop_membership_identity_valid(NULL));
    ck_assert(!kop_membership_identity_valid("Kop-0"));
    ck_assert(!kop_membership_identity_valid("-kop"));
    ck_assert(!kop_membership_identity_valid("kop-"));
    ck_assert(!kop_membership_identity_valid("host_3b1f"));
    ck_assert(!kop_membership_identity_valid("a.b"));
    char long_id[70];
    memset(long_id, 'a', 64);
    long_id[64] = '\0';
    ck_assert(!kop_membership_identity_valid(long_id));
    long_id[63] = '\0';
    ck_assert(kop_membership_identity_valid(long_id));
}
END_TEST

START_TEST(test_membership_live_expiry_by_local_clock)
{
    json_t *obs = json_object();
    json_t *leases = json_array();
    json_array_append_new(leases, lease("shard-b", "b", "2026-01-01T00:00:01.000000Z"));
    json_array_append_new(leases, lease("shard-a", "a", "2026-01-01T00:00:01.000000Z"));
    json_array_append_new(leases, lease("other-lease", "c", "2026-01-01T00:00:01.000000Z"));
    json_array_append_new(leases, lease("shard-d", "someone-else", "2026-01-01T00:00:01.000000Z"));
    int64_t t0 = 1000 * SEC;
    json_t *live = kop_membership_live(leases, "shard-", obs, t0);
    json_t *want = json_pack("[s,s]", "a", "b");
    ck_assert(json_equal(live, want)); /* sorted, prefix only, holder must match */
    json_decref(live);
    /* b renews at t0+5s; a does not. At t0+11s a has expired, b has not. */
    json_array_set_new(leases, 0, lease("shard-b", "b", "2026-01-01T00:00:06.000000Z"));
    live = kop_membership_live(leases, "shard-", obs, t0 + 5 * SEC);
    ck_assert(json_equal(live, want));
    json_decref(live);
    json_decref(want);
    live = kop_membership_live(leases, "shard-", obs, t0 + 11 * SEC);
    want = json_pack("[s]", "b");
    ck_assert(json_equal(live, want));
    json_decref(live);
    json_decref(want);
    /* Released: gone at once. */
    json_array_set_new(leases, 0, lease("shard-b", "", "2026-01-01T00:00:07.000000Z"));
    live = kop_membership_live(leases, "shard-", obs, t0 + 12 * SEC);
    ck_assert_int_eq(json_array_size(live), 0);
    json_decref(live);
    /* Leases no longer listed are forgotten. */
    json_array_clear(leases);
    live = kop_membership_live(leases, "shard-", obs, t0 + 13 * SEC);
    ck_assert_int_eq(json_array_size(live), 0);
    ck_assert_int_eq(json_object_size(obs), 0);
    json_decref(live);
    json_decref(leases);
    json_decref(obs);
}
END_TEST

START_TEST(test_membership_new_rejects_bad_identity)
{
    struct kop_membership *m = NULL;
    const struct kop_membership_options o = {
        .client = (struct kop_client *)1, /* never used: rejected before */
        .namespace = "ns",
        .prefix = "shard-",
        .identity = "Not_A_Label",
    };
    ck_assert_int_eq(kop_membership_new(&o, &m), -EINVAL);
    ck_assert_ptr_null(m);
}
END_TEST

static Suite *membership_suite(void)
{
    Suite *s = suite_create("membership");
    TCase *tc = tcase_create("membership");
    tcase_add_test(tc, test_membership_identity_valid);
    tcase_add_test(tc, test_membership_live_expiry_by_local_clock);
    tcase_add_test(tc, test_membership_new_rejects_bad_identity);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(membership_suite());
}
