/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/hash.h: SipHash-1-3 against reference values computed
 * from the published algorithm (key 00..0f, message 00..len-1), the
 * process key is stable within a process, and different keys give
 * different hashes.
 */
#include "kop/hash.h"

#include <string.h>

#include "testutil.h"

START_TEST(test_hash_siphash13_reference)
{
    /* SipHash-1-3 of the messages 00, 00 01, ... under the key 00..0f,
     * as the reference implementation (cROUNDS=1, dROUNDS=3) gives them. */
    static const uint64_t want[] = {
        UINT64_C(0xabac0158050fc4dc), UINT64_C(0xc9f49bf37d57ca93), UINT64_C(0x82cb9b024dc7d44d),
        UINT64_C(0x8bf80ab8e7ddf7fb), UINT64_C(0xcf75576088d38328), UINT64_C(0xdef9d52f49533b67),
        UINT64_C(0xc50d2b50c59f22a7), UINT64_C(0xd3927d989bb11140), UINT64_C(0x369095118d299a8e),
    };
    uint64_t key[2] = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
    unsigned char msg[16];
    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (unsigned char)i;
    for (size_t len = 0; len < sizeof(want) / sizeof(want[0]); len++)
        ck_assert_msg(kop_hash_keyed(key, msg, len) == want[len], "len %zu: %016llx", len,
                      (unsigned long long)kop_hash_keyed(key, msg, len));
}
END_TEST

START_TEST(test_hash_process_key_stable_and_keys_differ)
{
    ck_assert(kop_hash("default/web", 11) == kop_hash_str("default/web"));
    ck_assert(kop_hash_str("a") != kop_hash_str("b"));
    uint64_t k1[2], k2[2];
    kop_hash_key_new(k1);
    kop_hash_key_new(k2);
    ck_assert(k1[0] != k2[0] || k1[1] != k2[1]);
    ck_assert(kop_hash_keyed(k1, "x", 1) != kop_hash_keyed(k2, "x", 1));
}
END_TEST

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_hash_siphash13_reference);
    tcase_add_test(tc, test_hash_process_key_stable_and_keys_differ);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(hash_suite());
}
