/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named threads (kop/thread.h): pthread_create, then pthread_setname_np
 * with the name cut to what the kernel keeps (pthread_setname_np refuses
 * a longer one with ERANGE instead of cutting it).
 */
#include "kop/thread.h"

#include <stdarg.h>
#include <stdio.h>

int kop_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, const char *fmt, ...)
{
    int e = pthread_create(t, NULL, fn, arg);
    if (e != 0)
        return -e;
    char name[KOP_THREAD_NAME_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    (void)pthread_setname_np(*t, name);
    return 0;
}
