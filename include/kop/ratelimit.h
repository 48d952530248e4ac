/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A token bucket (QPS + burst) shared by every call to the API server
 * (--kube-api-qps, --kube-api-burst; qps 0 disables it).
 *
 * The core is a reservation scheduler in the GCRA form: each reservation
 * takes the next slot and learns when it may go. Time is passed in ("now",
 * CLOCK_MONOTONIC nanoseconds) so tests need no sleeping. Reservations are
 * granted in the order they are made, so the bucket is FIFO by
 * construction: a full bucket lets "burst" callers go at once, then one
 * every 1/qps seconds.
 *
 * kop_ratelimit_wait() is the blocking wrapper: it takes a ticket, waits on
 * a CLOCK_MONOTONIC condition variable until both its slot time has come
 * and every earlier ticket has gone, so waiters leave strictly in FIFO
 * order even when timers fire out of order.
 *
 * Thread-safety: any thread, after kop_ratelimit_new(); kop_ratelimit_free()
 * only when no thread uses the bucket any more.
 */
#ifndef KOP_RATELIMIT_H
#define KOP_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct kop_ratelimit;

/*
 * qps <= 0 makes a disabled bucket (every call goes at once). burst < 1 is
 * treated as 1. Returns 0 or -ENOMEM / -EINVAL (qps not finite); *ret on
 * success.
 */
int kop_ratelimit_new(double qps, int burst, struct kop_ratelimit **ret);

/* NULL-safe. */
void kop_ratelimit_free(struct kop_ratelimit *rl);

/* True when the bucket limits anything (qps > 0). NULL: false. */
bool kop_ratelimit_enabled(const struct kop_ratelimit *rl);

/*
 * Reserve one token at time now_ns. Returns how many nanoseconds the
 * caller must wait before going (0: go now). The reservation is taken in
 * any case: a caller that does not want to wait must not call this (use
 * kop_ratelimit_try). now_ns must not go backwards by more than the
 * caller's own clock allows; an earlier now is treated as the latest seen.
 * NULL or disabled bucket: 0.
 */
int64_t kop_ratelimit_reserve(struct kop_ratelimit *rl, int64_t now_ns);

/* Take a token only when one is available at now_ns (no waiting). */
bool kop_ratelimit_try(struct kop_ratelimit *rl, int64_t now_ns);

/*
 * Block until a token is granted (FIFO). Returns 0, or -ECANCELED when
 * kop_ratelimit_close() was called (before or while waiting). NULL is
 * fine (a client without a limit): 0 at once.
 */
int kop_ratelimit_wait(struct kop_ratelimit *rl);

/* Callers currently inside kop_ratelimit_wait() (tickets taken and not yet
 * granted). */
unsigned kop_ratelimit_waiters(struct kop_ratelimit *rl);

/* Wake every waiter with -ECANCELED; later waits fail at once. */
void kop_ratelimit_close(struct kop_ratelimit *rl);

#endif /* KOP_RATELIMIT_H */
