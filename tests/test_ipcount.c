/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/ipcount.h: one entry per address (a v4-mapped IPv6
 * address is its IPv4 one), entries of a caller's size, the sweep, and
 * the eviction rule the TLS front and the plain HTTP servers share.
 */
#include "kop/ipcount.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "testutil.h"

static struct sockaddr_storage v4(const char *a)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *s = (struct sockaddr_in *)&ss;
    s->sin_family = AF_INET;
    s->sin_port = htons(1234);
    ck_assert_int_eq(inet_pton(AF_INET, a, &s->sin_addr), 1);
    return ss;
}

static struct sockaddr_storage v6(const char *a)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(4321);
    ck_assert_int_eq(inet_pton(AF_INET6, a, &s->sin6_addr), 1);
    return ss;
}

#define SA(ss) ((const struct sockaddr *)&(ss))

struct bigger {
    struct kop_ipcount_entry base;
    char extra[64];
};

START_TEST(test_ipcount_one_entry_per_address)
{
    struct kop_ipcount t;
    kop_ipcount_init(&t, sizeof(struct bigger));
    struct sockaddr_storage a = v4("10.0.0.1"), mapped = v6("::ffff:10.0.0.1");
    struct sockaddr_storage b = v6("2001:db8::1"), c = v4("10.0.0.2");
    ck_assert_ptr_null(kop_ipcount_find(&t, SA(a)));
    struct kop_ipcount_entry *ea = NULL, *eb = NULL;
    ck_assert_int_eq(kop_ipcount_add(&t, SA(a), &ea), 0);
    ck_assert_uint_eq(ea->count, 0);
    struct bigger *big = (struct bigger *)ea;
    ck_assert_int_eq(big->extra[63], 0); /* zeroed at the caller's size */
    ck_assert_ptr_eq(kop_ipcount_find(&t, SA(a)), ea);
    ck_assert_ptr_eq(kop_ipcount_find(&t, SA(mapped)), ea); /* the port does not count either */
    ck_assert_ptr_null(kop_ipcount_find(&t, SA(c)));
    ck_assert_int_eq(kop_ipcount_add(&t, SA(b), &eb), 0);
    ck_assert_ptr_eq(kop_ipcount_find(&t, SA(b)), eb);
    kop_ipcount_remove(&t, ea);
    ck_assert_ptr_null(kop_ipcount_find(&t, SA(a)));
    ck_assert_ptr_eq(kop_ipcount_find(&t, SA(b)), eb);
    kop_ipcount_cleanup(&t);
}
END_TEST

static bool drop_empty(void *ctx, struct kop_ipcount_entry *e)
{
    (*(int *)ctx)++;
    return e->count == 0;
}

START_TEST(test_ipcount_sweep)
{
    struct kop_ipcount t;
    kop_ipcount_init(&t, 0);
    struct sockaddr_storage a = v4("10.0.0.1"), b = v4("10.0.0.2");
    struct kop_ipcount_entry *ea = NULL, *eb = NULL;
    ck_assert_int_eq(kop_ipcount_add(&t, SA(a), &ea), 0);
    ck_assert_int_eq(kop_ipcount_add(&t, SA(b), &eb), 0);
    eb->count = 1;
    int seen = 0;
    kop_ipcount_sweep(&t, drop_empty, &seen);
    ck_assert_int_eq(seen, 2);
    ck_assert_ptr_null(kop_ipcount_find(&t, SA(a)));
    ck_assert_ptr_eq(kop_ipcount_find(&t, SA(b)), eb);
    kop_ipcount_cleanup(&t);
}
END_TEST

/* The address holding most gives up a slot to a newcomer whose address
 * holds at least two fewer, never to one of its own. */
START_TEST(test_ipcount_evict_from)
{
    struct kop_ipcount t;
    kop_ipcount_init(&t, 0);
    ck_assert_ptr_null(kop_ipcount_evict_from(&t, NULL));
    struct sockaddr_storage a = v4("10.0.0.1"), b = v4("10.0.0.2"), c = v4("10.0.0.3");
    struct kop_ipcount_entry *ea = NULL, *eb = NULL, *ec = NULL;
    ck_assert_int_eq(kop_ipcount_add(&t, SA(a), &ea), 0);
    ck_assert_int_eq(kop_ipcount_add(&t, SA(b), &eb), 0);
    ck_assert_int_eq(kop_ipcount_add(&t, SA(c), &ec), 0);
    ea->count = 1;
    ck_assert_ptr_null(kop_ipcount_evict_from(&t, NULL)); /* 1 against 0 */
    ea->count = 4;
    eb->count = 2;
    ec->count = 3;
    ck_assert_ptr_eq(kop_ipcount_evict_from(&t, NULL), ea);
    ck_assert_ptr_eq(kop_ipcount_evict_from(&t, eb), ea); /* 4 against 2 */
    ck_assert_ptr_null(kop_ipcount_evict_from(&t, ec));   /* 4 against 3 */
    ck_assert_ptr_null(kop_ipcount_evict_from(&t, ea));   /* its own */
    ec->count = 0;                                        /* an entry kept without connections */
    ck_assert_ptr_eq(kop_ipcount_evict_from(&t, ec), ea);
    kop_ipcount_cleanup(&t);
}
END_TEST

static Suite *ipcount_suite(void)
{
    Suite *s = suite_create("ipcount");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_ipcount_one_entry_per_address);
    tcase_add_test(tc, test_ipcount_sweep);
    tcase_add_test(tc, test_ipcount_evict_from);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(ipcount_suite());
}
