/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/thread.h: the thread runs, carries its formatted name,
 * and a name over the kernel's 15 bytes is cut rather than dropped.
 */
#include "kop/thread.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

struct probe {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ran;
    int release;
};

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    pthread_mutex_lock(&p->lock);
    p->ran = 1;
    pthread_cond_broadcast(&p->cond);
    while (!p->release)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    return p;
}

static void probe_init(struct probe *p)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
}

/* While probe thread t (started on p) runs, checks that it is named want,
 * then ends it. */
static void check_name(struct probe *p, pthread_t t, const char *want)
{
    pthread_mutex_lock(&p->lock);
    while (!p->ran)
        pthread_cond_wait(&p->cond, &p->lock);
    pthread_mutex_unlock(&p->lock);
    char got[32] = "";
    ck_assert_int_eq(pthread_getname_np(t, got, sizeof(got)), 0);
    ck_assert_str_eq(got, want);
    ck_assert_int_ne(kop_test_thread_nice(0, want), INT_MIN);
    pthread_mutex_lock(&p->lock);
    p->release = 1;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    void *ret = NULL;
    ck_assert_int_eq(pthread_join(t, &ret), 0);
    ck_assert_ptr_eq(ret, p);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->lock);
}

START_TEST(test_thread_named)
{
    struct probe p;
    probe_init(&p);
    pthread_t t;
    ck_assert_int_eq(kop_thread_start(&t, probe_main, &p, "worker-%d", 7), 0);
    check_name(&p, t, "worker-7");
}
END_TEST

START_TEST(test_thread_long_name_cut)
{
    /* pthread_setname_np alone would refuse it (ERANGE) */
    struct probe p;
    probe_init(&p);
    pthread_t t;
    ck_assert_int_eq(kop_thread_start(&t, probe_main, &p, "inf-%s", "deployments (metadata)"), 0);
    check_name(&p, t, "inf-deployments");
    ck_assert_int_eq((int)strlen("inf-deployments"), KOP_THREAD_NAME_MAX);
}
END_TEST

static Suite *thread_suite(void)
{
    Suite *s = suite_create("thread");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_thread_named);
    tcase_add_test(tc, test_thread_long_name_cut);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(thread_suite());
}
