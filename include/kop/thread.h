/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named threads. Every thread kop starts goes through kop_thread_start(),
 * so that top -H, ps -L, perf and gdb tell them apart (the names are
 * listed in docs/architecture.md §3.1).
 *
 * Thread-safety: any thread.
 */
#ifndef KOP_THREAD_H
#define KOP_THREAD_H

#include <pthread.h>

/* The kernel keeps this many bytes of a thread's name. */
#define KOP_THREAD_NAME_MAX 15

/*
 * pthread_create(t, NULL, fn, arg), then names the thread printf-style,
 * cut to KOP_THREAD_NAME_MAX bytes. Returns 0 or -errno of
 * pthread_create; a name that cannot be set (the thread already ended)
 * is left as it is.
 */
int kop_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* KOP_THREAD_H */
