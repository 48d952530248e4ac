/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the token bucket: burst, steady rate and the figure of
 * docs/performance.md §3.7 with a fake clock, FIFO order of the blocking
 * wrapper with threads.
 */
#include "kop/ratelimit.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "testutil.h"

#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)

START_TEST(test_ratelimit_burst)
{
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(10, 5, &rl), 0);
    int64_t now = 1000 * SEC;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(kop_ratelimit_reserve(rl, now), 0);
    /* The sixth waits one interval (100 ms), the seventh two. */
    ck_assert_int_eq(kop_ratelimit_reserve(rl, now), 100 * MS);
    ck_assert_int_eq(kop_ratelimit_reserve(rl, now), 200 * MS);
    ck_assert(!kop_ratelimit_try(rl, now));
    /* After the reserved slots, the bucket refills at qps. */
    ck_assert(!kop_ratelimit_try(rl, now + 250 * MS));
    ck_assert(kop_ratelimit_try(rl, now + 300 * MS));
    ck_assert(!kop_ratelimit_try(rl, now + 300 * MS));
    /* A long idle period refills up to burst, never more. */
    now += 100 * SEC;
    for (int i = 0; i < 5; i++)
        ck_assert(kop_ratelimit_try(rl, now));
    ck_assert(!kop_ratelimit_try(rl, now));
    kop_ratelimit_free(rl);
}
END_TEST

START_TEST(test_ratelimit_steady_rate)
{
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(20, 1, &rl), 0);
    int64_t now = 5 * SEC;
    int granted = 0;
    /* Poll every millisecond for 10 s: exactly one grant per 50 ms. */
    for (int64_t t = 0; t < 10 * SEC; t += MS)
        if (kop_ratelimit_try(rl, now + t))
            granted++;
    ck_assert_int_eq(granted, 200);
    kop_ratelimit_free(rl);
}
END_TEST

START_TEST(test_ratelimit_600_in_10s)
{
    /* docs/performance.md §3.7: qps=50 burst=100 over 10 s -> 600 (exactly, fake clock). */
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(50, 100, &rl), 0);
    int64_t start = 42 * SEC;
    int granted = 0;
    for (int i = 0; i < 2000; i++) {
        int64_t wait = kop_ratelimit_reserve(rl, start);
        ck_assert_int_ge(wait, 0);
        if (wait <= 10 * SEC)
            granted++;
    }
    ck_assert_int_eq(granted, 600);
    kop_ratelimit_free(rl);

    /* Same with callers arriving continuously rather than all at t=0. */
    ck_assert_int_eq(kop_ratelimit_new(50, 100, &rl), 0);
    granted = 0;
    for (int64_t t = 0; t <= 10 * SEC; t += MS / 4)
        if (kop_ratelimit_try(rl, start + t))
            granted++;
    ck_assert_int_eq(granted, 600);
    kop_ratelimit_free(rl);
}
END_TEST

START_TEST(test_ratelimit_fifo_reservations)
{
    /* Reservations go in the order they were made: slot times never
     * decrease, whatever "now" each caller passes. */
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(100, 3, &rl), 0);
    int64_t prev_go = 0;
    int64_t now = SEC;
    for (int i = 0; i < 50; i++) {
        int64_t t = now + (i % 7) * MS; /* jittery callers */
        int64_t go = t + kop_ratelimit_reserve(rl, t);
        ck_assert_int_ge(go, prev_go);
        prev_go = go;
    }
    /* Once callers are waiting, try() does not jump the queue. */
    ck_assert(!kop_ratelimit_try(rl, now + 10 * MS));
    kop_ratelimit_free(rl);
}
END_TEST

START_TEST(test_ratelimit_disabled)
{
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(0, 30, &rl), 0);
    ck_assert(!kop_ratelimit_enabled(rl));
    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(kop_ratelimit_reserve(rl, 0), 0);
    ck_assert_int_eq(kop_ratelimit_wait(rl), 0);
    kop_ratelimit_free(rl);
    ck_assert_int_eq(kop_ratelimit_reserve(NULL, 0), 0);
    ck_assert_int_eq(kop_ratelimit_new(1.0 / 0.0, 1, &rl), -EINVAL);
}
END_TEST

struct fifo_ctx {
    struct kop_ratelimit *rl;
    pthread_mutex_t lock;
    int order[16];
    int n;
    atomic_int started;
};

struct fifo_arg {
    struct fifo_ctx *ctx;
    int id;
};

static void *fifo_thread(void *arg)
{
    struct fifo_arg *a = arg;
    int r = kop_ratelimit_wait(a->ctx->rl);
    if (r == 0) {
        pthread_mutex_lock(&a->ctx->lock);
        a->ctx->order[a->ctx->n++] = a->id;
        pthread_mutex_unlock(&a->ctx->lock);
    }
    return NULL;
}

START_TEST(test_ratelimit_wait_fifo_threads)
{
    /* qps 20, burst 1: threads that queue up one after the other leave in
     * the order they arrived, 50 ms apart. */
    struct fifo_ctx ctx = {.n = 0};
    pthread_mutex_init(&ctx.lock, NULL);
    ck_assert_int_eq(kop_ratelimit_new(20, 1, &ctx.rl), 0);
    ck_assert_int_eq(kop_ratelimit_wait(ctx.rl), 0); /* empty the bucket */
    pthread_t th[8];
    struct fifo_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (struct fifo_arg){&ctx, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fifo_thread, &args[i]), 0);
        /* Thread i has its ticket before thread i+1 starts (the first ones
         * may already have left: count those too). */
        for (int spin = 0; spin < 10000; spin++) {
            pthread_mutex_lock(&ctx.lock);
            int left = ctx.n;
            pthread_mutex_unlock(&ctx.lock);
            if (left + (int)kop_ratelimit_waiters(ctx.rl) >= i + 1)
                break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(ctx.n, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(ctx.order[i], i);
    kop_ratelimit_free(ctx.rl);
    pthread_mutex_destroy(&ctx.lock);
}
END_TEST

static void *close_thread(void *arg)
{
    struct fifo_arg *a = arg;
    a->id = kop_ratelimit_wait(a->ctx->rl);
    return NULL;
}

START_TEST(test_ratelimit_close_wakes_waiters)
{
    struct fifo_ctx ctx = {.n = 0};
    /* 1 token per 100 s: the second waiter would wait "forever". */
    ck_assert_int_eq(kop_ratelimit_new(0.01, 1, &ctx.rl), 0);
    ck_assert_int_eq(kop_ratelimit_wait(ctx.rl), 0);
    struct fifo_arg a[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (struct fifo_arg){&ctx, 1};
        ck_assert_int_eq(pthread_create(&th[i], NULL, close_thread, &a[i]), 0);
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    kop_ratelimit_close(ctx.rl);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(a[i].id, -ECANCELED);
    }
    ck_assert_int_eq(kop_ratelimit_wait(ctx.rl), -ECANCELED);
    kop_ratelimit_free(ctx.rl);
}
END_TEST

static void *many_thread(void *arg)
{
    struct fifo_ctx *ctx = arg;
    for (int i = 0; i < 10; i++)
        if (kop_ratelimit_wait(ctx->rl) == 0)
            atomic_fetch_add(&ctx->started, 1);
    return NULL;
}

START_TEST(test_ratelimit_wait_many_threads)
{
    /* 4 threads x 10 waits at qps 1000 burst 5: all granted, in about 35 ms;
     * mainly a data-race check for TSan. */
    struct fifo_ctx ctx = {.n = 0};
    atomic_init(&ctx.started, 0);
    ck_assert_int_eq(kop_ratelimit_new(1000, 5, &ctx.rl), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, many_thread, &ctx), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    ck_assert_int_eq(atomic_load(&ctx.started), 40);
    kop_ratelimit_free(ctx.rl);
}
END_TEST

START_TEST(test_ratelimit_huge_burst_no_overflow)
{
    /* --kube-api-qps=0.1 --kube-api-burst=1000000001: (burst - 1) * 10 s in
     * nanoseconds does not fit in 64 bits. The bucket must still let the
     * first callers go at once, not wrap the tolerance into a huge wait. */
    struct kop_ratelimit *rl;
    ck_assert_int_eq(kop_ratelimit_new(0.1, 1000000001, &rl), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(kop_ratelimit_reserve(rl, 0), 0);
    kop_ratelimit_free(rl);
}
END_TEST

static Suite *ratelimit_suite(void)
{
    Suite *s = suite_create("ratelimit");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ratelimit_burst);
    tcase_add_test(tc, test_ratelimit_steady_rate);
    tcase_add_test(tc, test_ratelimit_600_in_10s);
    tcase_add_test(tc, test_ratelimit_fifo_reservations);
    tcase_add_test(tc, test_ratelimit_disabled);
    tcase_add_test(tc, test_ratelimit_wait_fifo_threads);
    tcase_add_test(tc, test_ratelimit_close_wakes_waiters);
    tcase_add_test(tc, test_ratelimit_wait_many_threads);
    tcase_add_test(tc, test_ratelimit_huge_burst_no_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(ratelimit_suite());
}
