/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/clock.h: monotonic and wall clocks, condvar deadlines, and
 * RFC 3339 formatting and parsing (round trips, offsets, bad input).
 */
#include "kop/clock.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "testutil.h"

START_TEST(test_clock_monotonic_advances)
{
    int64_t a = kop_clock_now_ns();
    struct timespec ts = {0, 2 * 1000 * 1000};

    nanosleep(&ts, NULL);
    int64_t b = kop_clock_now_ns();
    ck_assert_int_gt(a, 0);
    ck_assert_int_ge(b - a, 2 * KOP_NSEC_PER_MSEC);
    /* Wall clock is after 2020-01-01. */
    ck_assert_int_gt(kop_clock_wall_ns(), INT64_C(1577836800) * KOP_NSEC_PER_SEC);
}
END_TEST

START_TEST(test_clock_deadline_with_monotonic_condvar)
{
    pthread_cond_t cond;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct timespec dl;
    int64_t start, elapsed;
    int r;

    ck_assert_int_eq(kop_clock_cond_init(&cond), 0);
    start = kop_clock_now_ns();
    dl = kop_clock_deadline_ms(20);
    ck_assert_int_ge(dl.tv_nsec, 0);
    ck_assert_int_lt(dl.tv_nsec, 1000000000L);
    pthread_mutex_lock(&mu);
    do {
        r = pthread_cond_timedwait(&cond, &mu, &dl);
    } while (r == 0);
    pthread_mutex_unlock(&mu);
    elapsed = kop_clock_now_ns() - start;
    ck_assert_int_eq(r, ETIMEDOUT);
    ck_assert_int_ge(elapsed, 19 * KOP_NSEC_PER_MSEC);
    pthread_cond_destroy(&cond);
}
END_TEST

START_TEST(test_clock_rfc3339_format)
{
    char buf[32];
    /* 2006-01-02T15:04:05Z is 1136214245 */
    int64_t t = INT64_C(1136214245) * KOP_NSEC_PER_SEC + 123456789;

    ck_assert_str_eq(kop_clock_rfc3339(t, buf, sizeof(buf)), "2006-01-02T15:04:05Z");
    ck_assert_str_eq(kop_clock_rfc3339_micro(t, buf, sizeof(buf)), "2006-01-02T15:04:05.123456Z");
    ck_assert_str_eq(kop_clock_rfc3339(0, buf, sizeof(buf)), "1970-01-01T00:00:00Z");
    ck_assert_str_eq(kop_clock_rfc3339_micro(0, buf, 28), "1970-01-01T00:00:00.000000Z");
    ck_assert_int_eq(strlen(buf), 27);
    /* Exact buffer sizes from the header are enough. */
    ck_assert_int_eq(strlen(kop_clock_rfc3339(t, buf, 21)), 20);
}
END_TEST

START_TEST(test_clock_rfc3339_round_trip)
{
    char buf[32];
    int64_t now = kop_clock_wall_ns(), got;
    int64_t samples[] = {0, INT64_C(951782400) * KOP_NSEC_PER_SEC /* 2000-02-29 */,
                         INT64_C(4102444799) * KOP_NSEC_PER_SEC /* 2099-12-31T23:59:59 */, now};

    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        int64_t sec = samples[i] / KOP_NSEC_PER_SEC * KOP_NSEC_PER_SEC;
        int64_t us = samples[i] / KOP_NSEC_PER_USEC * KOP_NSEC_PER_USEC;

        ck_assert_int_eq(kop_clock_parse_rfc3339(kop_clock_rfc3339(samples[i], buf, 32), &got), 0);
        ck_assert_int_eq(got, sec);
        ck_assert_int_eq(
            kop_clock_parse_rfc3339(kop_clock_rfc3339_micro(samples[i], buf, 32), &got), 0);
        ck_assert_int_eq(got, us);
    }
}
END_TEST

START_TEST(test_clock_parse_offsets_and_fractions)
{
    int64_t t;
    const int64_t base = INT64_C(1136214245) * KOP_NSEC_PER_SEC;

    ck_assert_int_eq(kop_clock_parse_rfc3339("2006-01-02T08:04:05-07:00", &t), 0);
    ck_assert_int_eq(t, base);
    ck_assert_int_eq(kop_clock_parse_rfc3339("2006-01-02T17:04:05+02:00", &t), 0);
    ck_assert_int_eq(t, base);
    ck_assert_int_eq(kop_clock_parse_rfc3339("2006-01-02T15:04:05.5Z", &t), 0);
    ck_assert_int_eq(t, base + 500 * KOP_NSEC_PER_MSEC);
    ck_assert_int_eq(kop_clock_parse_rfc3339("2006-01-02T15:04:05.000000001Z", &t), 0);
    ck_assert_int_eq(t, base + 1);
    ck_assert_int_eq(kop_clock_parse_rfc3339("2006-01-02t15:04:05z", &t), 0);
    ck_assert_int_eq(t, base);
}
END_TEST

START_TEST(test_clock_parse_rejects_garbage)
{
    static const char *bad[] = {
        "",
        "2006-01-02",
        "2006-01-02T15:04:05",
        "2006-01-02 15:04:05Z",
        "2006-13-02T15:04:05Z",
        "2006-02-29T15:04:05Z",
        "2006-01-32T15:04:05Z",
        "2006-01-02T24:00:00Z",
        "2006-01-02T15:60:05Z",
        "2006-01-02T15:04:60Z",
        "2006-01-02T15:04:05.Z",
        "2006-01-02T15:04:05+0700",
        "2006-01-02T15:04:05Zjunk",
        "20a6-01-02T15:04:05Z",
    };
    int64_t t = 42;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(kop_clock_parse_rfc3339(bad[i], &t) == -EINVAL, "accepted %s", bad[i]);
    ck_assert_int_eq(t, 42);
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_clock_monotonic_advances);
    tcase_add_test(tc, test_clock_deadline_with_monotonic_condvar);
    tcase_add_test(tc, test_clock_rfc3339_format);
    tcase_add_test(tc, test_clock_rfc3339_round_trip);
    tcase_add_test(tc, test_clock_parse_offsets_and_fractions);
    tcase_add_test(tc, test_clock_parse_rejects_garbage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(clock_suite());
}
