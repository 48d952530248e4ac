/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Token bucket in real time (docs/performance.md §3.7): T threads call the blocking
 * kop_ratelimit_wait() as fast as they can for S seconds at qps Q and
 * burst B; prints the grants and their deviation from B + Q * S.
 *
 *   bench_ratelimit [QPS [BURST [SECONDS [THREADS]]]]   (50 100 10 8)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "kop/clock.h"
#include "kop/ratelimit.h"

static struct kop_ratelimit *rl;
static atomic_long grants;
static int64_t end_ns;

static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        if (kop_ratelimit_wait(rl) < 0)
            break;
        if (kop_clock_now_ns() >= end_ns)
            break;
        atomic_fetch_add(&grants, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double qps = argc > 1 ? strtod(argv[1], NULL) : 50;
    int burst = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 100;
    double secs = argc > 3 ? strtod(argv[3], NULL) : 10;
    int threads = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 8;
    if (qps <= 0 || burst < 1 || secs <= 0 || threads < 1 || threads > 256) {
        fprintf(stderr, "usage: bench_ratelimit [QPS>0 [BURST>=1 [SECONDS>0 [THREADS 1..256]]]]\n");
        return 2;
    }
    if (kop_ratelimit_new(qps, burst, &rl) < 0)
        return 1;
    pthread_t th[256];
    int64_t start = kop_clock_now_ns();
    end_ns = start + (int64_t)(secs * 1e9);
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    struct timespec ts = {.tv_sec = (time_t)secs,
                          .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    while (kop_clock_now_ns() < end_ns)
        ;
    kop_ratelimit_close(rl);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    long n = atomic_load(&grants);
    double expect = burst + qps * secs;
    printf("qps=%g burst=%d seconds=%g threads=%d: %ld grants, expected %.0f, deviation %+.2f%%\n",
           qps, burst, secs, threads, n, expect, (n - expect) * 100.0 / expect);
    kop_ratelimit_free(rl);
    return 0;
}
