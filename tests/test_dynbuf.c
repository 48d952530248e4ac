/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/dynbuf.h: appends keep a '\0' after the content, the cap
 * is exact (max bytes fit, one more is -E2BIG and leaves the buffer as it
 * was), the allocation never passes the cap, printf of short and long
 * results, reserve, take (also of an empty buffer), reset and free, and
 * the sticky first error.
 */
#include "kop/dynbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

START_TEST(test_dynbuf_append_and_terminate)
{
    struct kop_dynbuf b;

    kop_dynbuf_init(&b, KOP_DYNBUF_NO_LIMIT);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    ck_assert_uint_eq(kop_dynbuf_len(&b), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), 0);
    ck_assert_int_eq(kop_dynbuf_add(&b, NULL, 0), 0);
    ck_assert_int_eq(kop_dynbuf_add(&b, "ab\0c", 4), 0);
    ck_assert_int_eq(kop_dynbuf_adds(&b, "de"), 0);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 6);
    ck_assert_int_eq(memcmp(kop_dynbuf_ptr(&b), "ab\0cde", 7), 0);
    /* Many small appends grow it; the content stays intact. */
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(kop_dynbuf_add(&b, "x", 1), 0);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 10006);
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[10006], '\0');
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[10005], 'x');
    ck_assert_uint_ge(kop_dynbuf_capacity(&b), 10007);
    ck_assert_int_eq(kop_dynbuf_error(&b), 0);
    kop_dynbuf_free(&b);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 0);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    kop_dynbuf_free(NULL);
}
END_TEST

START_TEST(test_dynbuf_cap_is_exact)
{
    struct kop_dynbuf b;
    char big[1000];

    memset(big, 'a', sizeof(big));
    kop_dynbuf_init(&b, 1000);
    ck_assert_int_eq(kop_dynbuf_add(&b, big, 999), 0);
    ck_assert_int_eq(kop_dynbuf_add(&b, "bc", 2), -E2BIG);
    /* The failed append changed nothing, and the error is kept. */
    ck_assert_uint_eq(kop_dynbuf_len(&b), 999);
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[999], '\0');
    ck_assert_int_eq(kop_dynbuf_error(&b), -E2BIG);
    /* Exactly max bytes fit; the allocation is never more than max + 1. */
    ck_assert_int_eq(kop_dynbuf_add(&b, "b", 1), 0);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 1000);
    ck_assert_uint_le(kop_dynbuf_capacity(&b), 1001);
    ck_assert_int_eq(kop_dynbuf_add(&b, "", 0), 0);
    ck_assert_int_eq(kop_dynbuf_add(&b, "c", 1), -E2BIG);
    ck_assert_int_eq(kop_dynbuf_reserve(&b, 1), -E2BIG);
    ck_assert_int_eq(kop_dynbuf_printf(&b, "%d", 1), -E2BIG);
    /* A length that would overflow size_t is refused, not wrapped. */
    ck_assert_int_eq(kop_dynbuf_reserve(&b, SIZE_MAX), -E2BIG);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 1000);
    /* reset empties the content and clears the error, memory kept. */
    size_t cap = kop_dynbuf_capacity(&b);
    kop_dynbuf_reset(&b);
    ck_assert_int_eq(kop_dynbuf_error(&b), 0);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), cap);
    ck_assert_int_eq(kop_dynbuf_add(&b, big, 1000), 0);
    kop_dynbuf_free(&b);

    /* A zero cap accepts only empty content. */
    kop_dynbuf_init(&b, 0);
    ck_assert_int_eq(kop_dynbuf_add(&b, "", 0), 0);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    ck_assert_int_eq(kop_dynbuf_add(&b, "a", 1), -E2BIG);
    kop_dynbuf_free(&b);

    /* No limit: SIZE_MAX is still refused before any arithmetic. */
    kop_dynbuf_init(&b, SIZE_MAX);
    ck_assert_int_eq(kop_dynbuf_add(&b, "a", 1), 0);
    ck_assert_int_eq(kop_dynbuf_reserve(&b, SIZE_MAX - 1), -E2BIG);
    kop_dynbuf_free(&b);
}
END_TEST

START_TEST(test_dynbuf_reserve_avoids_realloc)
{
    struct kop_dynbuf b;

    kop_dynbuf_init(&b, 1 << 20);
    ck_assert_int_eq(kop_dynbuf_reserve(&b, 5000), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), 5001);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    const char *p = kop_dynbuf_ptr(&b);
    for (int i = 0; i < 5000; i++)
        ck_assert_int_eq(kop_dynbuf_add(&b, "y", 1), 0);
    ck_assert_ptr_eq(kop_dynbuf_ptr(&b), p);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 5000);
    /* Past the reserved size, growth doubles. */
    ck_assert_int_eq(kop_dynbuf_add(&b, "y", 1), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), 10002);
    /* ... and stops at the cap plus the '\0'. */
    ck_assert_int_eq(kop_dynbuf_reserve(&b, 200000), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), 320064);
    ck_assert_int_eq(kop_dynbuf_reserve(&b, (1 << 20) - 5001), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), (1 << 20) + 1);
    kop_dynbuf_free(&b);

    /* Reserved but nothing added: take hands over "". */
    char *s = NULL;
    size_t n = 1;
    ck_assert_int_eq(kop_dynbuf_reserve(&b, 100), 0);
    ck_assert_int_eq(kop_dynbuf_take(&b, &s, &n), 0);
    ck_assert_str_eq(s, "");
    ck_assert_uint_eq(n, 0);
    free(s);
}
END_TEST

START_TEST(test_dynbuf_printf)
{
    struct kop_dynbuf b;
    char *long_arg = malloc(3001);

    ck_assert_ptr_nonnull(long_arg);
    memset(long_arg, 'z', 3000);
    long_arg[3000] = '\0';
    kop_dynbuf_init(&b, 4000);
    ck_assert_int_eq(kop_dynbuf_printf(&b, "%s=%d;", "n", 42), 0);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "n=42;");
    /* Longer than the stack buffer: formatted into the reserved room. */
    ck_assert_int_eq(kop_dynbuf_printf(&b, "[%s]", long_arg), 0);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 5 + 3002);
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[5], '[');
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[5 + 3001], ']');
    ck_assert_int_eq(kop_dynbuf_ptr(&b)[5 + 3002], '\0');
    /* Past the cap: refused whole. */
    ck_assert_int_eq(kop_dynbuf_printf(&b, "%s", long_arg), -E2BIG);
    ck_assert_uint_eq(kop_dynbuf_len(&b), 3007);
    kop_dynbuf_free(&b);
    free(long_arg);
}
END_TEST

START_TEST(test_dynbuf_take)
{
    struct kop_dynbuf b;
    char *s = NULL;
    size_t n = 99;

    kop_dynbuf_init(&b, 100);
    ck_assert_int_eq(kop_dynbuf_take(&b, &s, &n), 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_str_eq(s, "");
    ck_assert_uint_eq(n, 0);
    free(s);
    ck_assert_int_eq(kop_dynbuf_adds(&b, "hello"), 0);
    ck_assert_int_eq(kop_dynbuf_take(&b, &s, &n), 0);
    ck_assert_str_eq(s, "hello");
    ck_assert_uint_eq(n, 5);
    /* The buffer is empty, holds nothing and keeps its cap. */
    ck_assert_uint_eq(kop_dynbuf_len(&b), 0);
    ck_assert_uint_eq(kop_dynbuf_capacity(&b), 0);
    ck_assert_str_eq(kop_dynbuf_ptr(&b), "");
    char over[101];
    memset(over, 'o', sizeof(over));
    ck_assert_int_eq(kop_dynbuf_add(&b, over, 101), -E2BIG);
    free(s);
    kop_dynbuf_free(&b);
}
END_TEST

static Suite *dynbuf_suite(void)
{
    Suite *s = suite_create("dynbuf");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_dynbuf_append_and_terminate);
    tcase_add_test(tc, test_dynbuf_cap_is_exact);
    tcase_add_test(tc, test_dynbuf_reserve_avoids_realloc);
    tcase_add_test(tc, test_dynbuf_printf);
    tcase_add_test(tc, test_dynbuf_take);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(dynbuf_suite());
}
