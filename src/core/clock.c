/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clocks: monotonic and wall time in nanoseconds, absolute deadlines for
 * condition variables bound to CLOCK_MONOTONIC, and RFC 3339 formatting
 * and parsing for logs and Kubernetes timestamps. Formatting uses
 * gmtime_r and parsing uses a hand-written civil-to-days conversion, so
 * neither depends on the TZ environment.
 */
#include "kop/clock.h"

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;

    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * KOP_NSEC_PER_SEC + ts.tv_nsec;
}

int64_t kop_clock_now_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

int64_t kop_clock_wall_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

int kop_clock_cond_init(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    int r;

    assert(cond);
    r = pthread_condattr_init(&attr);
    if (r != 0)
        return -r;
    r = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (r == 0)
        r = pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
    return -r;
}

struct timespec kop_clock_deadline_ms(int64_t ms)
{
    struct timespec ts = {0};
    int64_t ns;

    if (ms < 0)
        ms = 0;
    /* Cap far-away deadlines at ~100 years so the addition cannot overflow. */
    if (ms > INT64_C(3153600000000))
        ms = INT64_C(3153600000000);
    ns = kop_clock_now_ns() + ms * KOP_NSEC_PER_MSEC;
    ts.tv_sec = (time_t)(ns / KOP_NSEC_PER_SEC);
    ts.tv_nsec = (long)(ns % KOP_NSEC_PER_SEC);
    return ts;
}

/* Split ns since the epoch into seconds and a non-negative remainder. */
static void split_ns(int64_t wall_ns, time_t *sec, int64_t *rem)
{
    int64_t s = wall_ns / KOP_NSEC_PER_SEC;
    int64_t r = wall_ns % KOP_NSEC_PER_SEC;

    if (r < 0) {
        r += KOP_NSEC_PER_SEC;
        s -= 1;
    }
    *sec = (time_t)s;
    *rem = r;
}

static char *format(int64_t wall_ns, char *buf, size_t len, bool micro)
{
    struct tm tm;
    time_t sec;
    int64_t rem;
    int n;

    if (buf == NULL || len == 0)
        return buf;
    split_ns(wall_ns, &sec, &rem);
    if (gmtime_r(&sec, &tm) == NULL) {
        buf[0] = '\0';
        return buf;
    }
    if (micro)
        n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(rem / KOP_NSEC_PER_USEC));
    else
        n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    if (n < 0)
        buf[0] = '\0';
    return buf;
}

char *kop_clock_rfc3339(int64_t wall_ns, char *buf, size_t len)
{
    return format(wall_ns, buf, len, false);
}

char *kop_clock_rfc3339_micro(int64_t wall_ns, char *buf, size_t len)
{
    return format(wall_ns, buf, len, true);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * well-known days_from_civil algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Read exactly n decimal digits. */
static int digits(const char **p, int n, int *ret)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -EINVAL;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *ret = v;
    return 0;
}

static int expect(const char **p, char c)
{
    if (**p != c)
        return -EINVAL;
    (*p)++;
    return 0;
}

int kop_clock_parse_rfc3339(const char *s, int64_t *ret_wall_ns)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int year, mon, day, hour, min, sec, oh = 0, om = 0;
    int64_t frac = 0, secs;
    const char *p = s;

    assert(s);
    assert(ret_wall_ns);
    if (digits(&p, 4, &year) || expect(&p, '-') || digits(&p, 2, &mon) || expect(&p, '-') ||
        digits(&p, 2, &day))
        return -EINVAL;
    if (*p != 'T' && *p != 't')
        return -EINVAL;
    p++;
    if (digits(&p, 2, &hour) || expect(&p, ':') || digits(&p, 2, &min) || expect(&p, ':') ||
        digits(&p, 2, &sec))
        return -EINVAL;
    if (mon < 1 || mon > 12 || day < 1 || hour > 23 || min > 59 || sec > 59)
        return -EINVAL;
    if (day > mdays[mon - 1] + (mon == 2 && is_leap(year)))
        return -EINVAL;
    if (*p == '.') {
        int64_t scale = KOP_NSEC_PER_SEC / 10;
        int n = 0;

        p++;
        while (*p >= '0' && *p <= '9') {
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
            n++;
        }
        if (n == 0)
            return -EINVAL;
    }
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1;

        p++;
        if (digits(&p, 2, &oh) || expect(&p, ':') || digits(&p, 2, &om))
            return -EINVAL;
        if (oh > 23 || om > 59)
            return -EINVAL;
        oh *= sign;
        om *= sign;
    } else {
        return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    /* Like Go's time.Parse, a leap second ":60" was rejected above. */
    secs = days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec;
    secs -= (int64_t)oh * 3600 + (int64_t)om * 60;
    *ret_wall_ns = secs * KOP_NSEC_PER_SEC + frac;
    return 0;
}
