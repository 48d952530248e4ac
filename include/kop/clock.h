/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clocks. Everything that waits or measures uses the monotonic clock;
 * wall-clock time only appears in logs and Kubernetes timestamps.
 * Rate limiters and backoffs take "now" as a parameter (docs/style.md
 * §6.5) and callers pass kop_clock_now_ns().
 *
 * Thread-safety: any thread.
 */
#ifndef KOP_CLOCK_H
#define KOP_CLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define KOP_NSEC_PER_SEC INT64_C(1000000000)
#define KOP_NSEC_PER_MSEC INT64_C(1000000)
#define KOP_NSEC_PER_USEC INT64_C(1000)

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t kop_clock_now_ns(void);

/* CLOCK_REALTIME in nanoseconds since the epoch. */
int64_t kop_clock_wall_ns(void);

/* pthread_cond_init with CLOCK_MONOTONIC as the condvar's clock, so that
 * kop_clock_deadline_ms() deadlines are immune to wall-clock jumps.
 * Returns 0 or -errno. */
int kop_clock_cond_init(pthread_cond_t *cond);

/* Absolute CLOCK_MONOTONIC timespec "ms" milliseconds from now, for
 * pthread_cond_timedwait on a condvar created with kop_clock_cond_init(). */
struct timespec kop_clock_deadline_ms(int64_t ms);

/* Format wall time (ns since epoch) as RFC 3339 UTC "2006-01-02T15:04:05Z"
 * (Kubernetes metav1.Time). buf must hold 21 bytes. Returns buf. */
char *kop_clock_rfc3339(int64_t wall_ns, char *buf, size_t len);

/* Same with microseconds "2006-01-02T15:04:05.000000Z" (MicroTime, logs).
 * buf must hold 28 bytes. Returns buf. */
char *kop_clock_rfc3339_micro(int64_t wall_ns, char *buf, size_t len);

/* Parse RFC 3339 ("Z" or "+hh:mm", optional fraction) into ns since epoch.
 * Returns 0 or -EINVAL. */
int kop_clock_parse_rfc3339(const char *s, int64_t *ret_wall_ns);

#endif /* KOP_CLOCK_H */
