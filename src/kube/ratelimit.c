/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Token bucket as a GCRA reservation scheduler (see kop/ratelimit.h).
 *
 * State: "tat", the theoretical arrival time of the next request, and the
 * emission interval T = 1/qps in nanoseconds. With a tolerance of
 * (burst - 1) * T, a request at "now" may go at max(now, max(tat, now) -
 * tolerance), and the next tat is max(tat, now) + T. Integer nanoseconds
 * keep the arithmetic exact: at qps=50 burst=100, 100 requests go at t=0
 * and request 100+k goes at k * 20 ms, so exactly 600 go in [0, 10 s].
 *
 * The blocking wrapper adds tickets: "next_ticket" is handed out with the
 * reservation (under the same lock, so ticket order equals slot order)
 * and "serving" is the ticket allowed to leave next.
 */
#include "kop/ratelimit.h"

#include <assert.h>
#include <limits.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "kop/clock.h"

struct kop_ratelimit {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool enabled;
    bool closed;
    int64_t interval_ns;  /* T */
    int64_t tolerance_ns; /* (burst - 1) * T */
    int64_t tat_ns;
    int64_t last_now_ns;
    uint64_t next_ticket;
    uint64_t serving;
};

static int64_t mono_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int kop_ratelimit_new(double qps, int burst, struct kop_ratelimit **ret)
{
    assert(ret);
    if (isnan(qps) || isinf(qps))
        return -EINVAL;
    struct kop_ratelimit *rl = calloc(1, sizeof(*rl));
    if (!rl)
        return -ENOMEM;
    if (kop_clock_cond_init(&rl->cond) != 0) {
        free(rl);
        return -ENOMEM;
    }
    pthread_mutex_init(&rl->lock, NULL);
    if (qps > 0) {
        if (burst < 1)
            burst = 1;
        double t = 1e9 / qps;
        if (t < 1)
            t = 1;
        if (t > 1e15)
            t = 1e15;
        rl->enabled = true;
        rl->interval_ns = (int64_t)llround(t);
        /* A huge burst at a low rate does not fit in 64 bits: clamp (it
         * means "no practical limit on the burst" either way). */
        if ((int64_t)(burst - 1) > (INT64_MAX / 2) / rl->interval_ns)
            rl->tolerance_ns = INT64_MAX / 2;
        else
            rl->tolerance_ns = (int64_t)(burst - 1) * rl->interval_ns;
    }
    rl->tat_ns = INT64_MIN;
    rl->last_now_ns = INT64_MIN;
    *ret = rl;
    return 0;
}

void kop_ratelimit_free(struct kop_ratelimit *rl)
{
    if (!rl)
        return;
    pthread_cond_destroy(&rl->cond);
    pthread_mutex_destroy(&rl->lock);
    free(rl);
}

bool kop_ratelimit_enabled(const struct kop_ratelimit *rl)
{
    return rl && rl->enabled;
}

/* Returns the absolute time at which the reservation may go. Lock held. */
static int64_t reserve_locked(struct kop_ratelimit *rl, int64_t now)
{
    if (now < rl->last_now_ns)
        now = rl->last_now_ns;
    rl->last_now_ns = now;
    int64_t tat = rl->tat_ns > now ? rl->tat_ns : now;
    int64_t go = tat - rl->tolerance_ns;
    if (go < now)
        go = now;
    rl->tat_ns = tat + rl->interval_ns;
    return go;
}

int64_t kop_ratelimit_reserve(struct kop_ratelimit *rl, int64_t now_ns)
{
    if (!rl || !rl->enabled)
        return 0;
    pthread_mutex_lock(&rl->lock);
    int64_t go = reserve_locked(rl, now_ns);
    int64_t now = rl->last_now_ns;
    pthread_mutex_unlock(&rl->lock);
    return go - now;
}

bool kop_ratelimit_try(struct kop_ratelimit *rl, int64_t now_ns)
{
    assert(rl);
    if (!rl->enabled)
        return true;
    bool ok = false;
    pthread_mutex_lock(&rl->lock);
    int64_t now = now_ns < rl->last_now_ns ? rl->last_now_ns : now_ns;
    int64_t tat = rl->tat_ns > now ? rl->tat_ns : now;
    /* Waiters hold earlier slots: never jump the queue. */
    if (tat - rl->tolerance_ns <= now && rl->serving == rl->next_ticket) {
        reserve_locked(rl, now);
        ok = true;
    }
    pthread_mutex_unlock(&rl->lock);
    return ok;
}

int kop_ratelimit_wait(struct kop_ratelimit *rl)
{
    if (!rl)
        return 0;
    int r = 0;
    pthread_mutex_lock(&rl->lock);
    if (rl->closed) {
        r = -ECANCELED;
        goto out;
    }
    if (!rl->enabled)
        goto out;
    uint64_t ticket = rl->next_ticket++;
    int64_t go = reserve_locked(rl, mono_now_ns());
    for (;;) {
        if (rl->closed) {
            r = -ECANCELED;
            goto out;
        }
        if (rl->serving == ticket) {
            int64_t now = mono_now_ns();
            if (now >= go)
                break;
            struct timespec ts = {.tv_sec = go / 1000000000, .tv_nsec = go % 1000000000};
            pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
        } else {
            pthread_cond_wait(&rl->cond, &rl->lock);
        }
    }
    rl->serving++;
    pthread_cond_broadcast(&rl->cond);
out:
    pthread_mutex_unlock(&rl->lock);
    return r;
}

void kop_ratelimit_close(struct kop_ratelimit *rl)
{
    assert(rl);
    pthread_mutex_lock(&rl->lock);
    rl->closed = true;
    pthread_cond_broadcast(&rl->cond);
    pthread_mutex_unlock(&rl->lock);
}

unsigned kop_ratelimit_waiters(struct kop_ratelimit *rl)
{
    assert(rl);
    pthread_mutex_lock(&rl->lock);
    uint64_t n = rl->next_ticket - rl->serving;
    pthread_mutex_unlock(&rl->lock);
    return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}
