/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/metrics.h: exact Prometheus text for counters, gauges and
 * histograms with labels and escaping, number formatting as Go writes it,
 * registration rules, process metrics, and exact sums under concurrent
 * updates (run under TSan in CI).
 */
#include "kop/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static char *render(struct kop_metrics *m)
{
    char *buf = NULL;
    size_t len = 0;

    ck_assert_int_eq(kop_metrics_render(m, &buf, &len), 0);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(len, strlen(buf));
    return buf;
}

START_TEST(test_metrics_counter_and_gauge_text)
{
    struct kop_metrics *m = kop_metrics_new(false);
    static const char *const labels[] = {"controller", "result", NULL};
    struct kop_metric_family *total, *depth, *plain;
    char *text;

    total = kop_metrics_register(m, KOP_METRIC_COUNTER, "controller_runtime_reconcile_total",
                                 "Total number of reconciliations per controller", labels, NULL, 0);
    depth =
        kop_metrics_register(m, KOP_METRIC_GAUGE, "workqueue_depth", "Current depth of workqueue",
                             (const char *const[]){"name", NULL}, NULL, 0);
    plain = kop_metrics_register(m, KOP_METRIC_COUNTER, "a_plain_total",
                                 "Help with \\ and\nnewline", NULL, NULL, 0);
    ck_assert_ptr_nonnull(total);
    ck_assert_ptr_nonnull(depth);
    ck_assert_ptr_nonnull(plain);
    kop_counter_inc(kop_metric_child(total, "myresource", "success"));
    kop_counter_add(kop_metric_child(total, "myresource", "success"), 2);
    kop_counter_inc(kop_metric_child(total, "myresource", "error"));
    kop_gauge_set(kop_metric_child(depth, "q\"1\\\n"), 7);
    kop_gauge_add(kop_metric_child(depth, "q\"1\\\n"), -2.5);
    text = render(m);
    ck_assert_str_eq(text,
                     "# HELP a_plain_total Help with \\\\ and\\nnewline\n"
                     "# TYPE a_plain_total counter\n"
                     "a_plain_total 0\n"
                     "# HELP controller_runtime_reconcile_total Total number of reconciliations "
                     "per controller\n"
                     "# TYPE controller_runtime_reconcile_total counter\n"
                     "controller_runtime_reconcile_total{controller=\"myresource\",result="
                     "\"success\"} 3\n"
                     "controller_runtime_reconcile_total{controller=\"myresource\",result="
                     "\"error\"} 1\n"
                     "# HELP workqueue_depth Current depth of workqueue\n"
                     "# TYPE workqueue_depth gauge\n"
                     "workqueue_depth{name=\"q\\\"1\\\\\\n\"} 4.5\n");
    free(text);
    kop_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_histogram_text)
{
    struct kop_metrics *m = kop_metrics_new(false);
    static const double b[] = {0.1, 1, 10};
    struct kop_metric_family *h, *d;
    struct kop_metric *c;
    char *text;

    h = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "lat_seconds", "Latency.",
                             (const char *const[]){"webhook", NULL}, b, 3);
    c = kop_metric_child(h, "/convert");
    kop_histogram_observe(c, 0.05);
    kop_histogram_observe(c, 0.1); /* on the bound: counts in le="0.1" */
    kop_histogram_observe(c, 5);
    kop_histogram_observe(c, 100);
    ck_assert_uint_eq(kop_histogram_count(c), 4);
    text = render(m);
    ck_assert_str_eq(text, "# HELP lat_seconds Latency.\n"
                           "# TYPE lat_seconds histogram\n"
                           "lat_seconds_bucket{webhook=\"/convert\",le=\"0.1\"} 2\n"
                           "lat_seconds_bucket{webhook=\"/convert\",le=\"1\"} 2\n"
                           "lat_seconds_bucket{webhook=\"/convert\",le=\"10\"} 3\n"
                           "lat_seconds_bucket{webhook=\"/convert\",le=\"+Inf\"} 4\n"
                           "lat_seconds_sum{webhook=\"/convert\"} 105.15\n"
                           "lat_seconds_count{webhook=\"/convert\"} 4\n");
    free(text);

    /* Default buckets, no labels. */
    d = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "d_seconds", "D.", NULL, NULL, 0);
    kop_histogram_observe(kop_metric_child(d), 0.3);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE d_seconds histogram\n"
                                       "d_seconds_bucket{le=\"0.005\"} 0\n"
                                       "d_seconds_bucket{le=\"0.01\"} 0\n"
                                       "d_seconds_bucket{le=\"0.025\"} 0\n"
                                       "d_seconds_bucket{le=\"0.05\"} 0\n"
                                       "d_seconds_bucket{le=\"0.1\"} 0\n"
                                       "d_seconds_bucket{le=\"0.25\"} 0\n"
                                       "d_seconds_bucket{le=\"0.5\"} 1\n"
                                       "d_seconds_bucket{le=\"1\"} 1\n"
                                       "d_seconds_bucket{le=\"2.5\"} 1\n"
                                       "d_seconds_bucket{le=\"5\"} 1\n"
                                       "d_seconds_bucket{le=\"10\"} 1\n"
                                       "d_seconds_bucket{le=\"+Inf\"} 1\n"
                                       "d_seconds_sum 0.3\n"
                                       "d_seconds_count 1\n"));
    /* Sorted by name: d_seconds before lat_seconds. */
    ck_assert(strstr(text, "d_seconds") < strstr(text, "lat_seconds"));
    free(text);
    kop_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_number_format)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"},
        {3, "3"},
        {-3, "-3"},
        {0.1, "0.1"},
        {0.25, "0.25"},
        {105.15, "105.15"},
        {123456, "123456"},
        {1e6, "1e+06"},
        {1234567, "1.234567e+06"},
        {0.0001, "0.0001"},
        {0.00001, "1e-05"},
        {1.5e-7, "1.5e-07"},
        {1.0 / 3, "0.3333333333333333"},
        {1e21, "1e+21"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
        {NAN, "NaN"},
    };
    char buf[64];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kop_metrics_format_double(cases[i].v, buf, sizeof(buf));
        ck_assert_str_eq(buf, cases[i].want);
    }
}
END_TEST

START_TEST(test_metrics_registration_rules)
{
    struct kop_metrics *m = kop_metrics_new(false);
    static const char *const l1[] = {"a", NULL};
    static const char *const l2[] = {"b", NULL};
    static const char *const le[] = {"le", NULL};
    static const double bad_buckets[] = {1, 1};
    double exp[4];
    struct kop_metric_family *f;

    f = kop_metrics_register(m, KOP_METRIC_COUNTER, "x_total", "x", l1, NULL, 0);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_eq(kop_metrics_register(m, KOP_METRIC_COUNTER, "x_total", "x", l1, NULL, 0), f);
    ck_assert_ptr_null(kop_metrics_register(m, KOP_METRIC_GAUGE, "x_total", "x", l1, NULL, 0));
    ck_assert_ptr_null(kop_metrics_register(m, KOP_METRIC_COUNTER, "x_total", "x", l2, NULL, 0));
    ck_assert_ptr_null(kop_metrics_register(m, KOP_METRIC_COUNTER, "1bad", "x", NULL, NULL, 0));
    ck_assert_ptr_null(kop_metrics_register(m, KOP_METRIC_COUNTER, "bad-name", "x", NULL, NULL, 0));
    ck_assert_ptr_null(kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "h", "x", le, NULL, 0));
    ck_assert_ptr_null(
        kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "h", "x", NULL, bad_buckets, 2));
    ck_assert_ptr_null(kop_metrics_register(NULL, KOP_METRIC_COUNTER, "y", "x", NULL, NULL, 0));
    /* Same label values give the same child; NULL values are refused. */
    ck_assert_ptr_eq(kop_metric_child(f, "v"), kop_metric_child(f, "v"));
    ck_assert_ptr_ne(kop_metric_child(f, "v"), kop_metric_child(f, "w"));
    ck_assert_ptr_null(kop_metric_child(f, (const char *)NULL));
    ck_assert_ptr_null(kop_metric_childv(f, (const char *const[]){"a", "b"}, 2));
    ck_assert_ptr_eq(kop_metric_childv(f, (const char *const[]){"v"}, 1), kop_metric_child(f, "v"));
    /* Every update accepts NULL. */
    kop_counter_inc(NULL);
    kop_counter_add(NULL, 1);
    kop_gauge_set(NULL, 1);
    kop_gauge_add(NULL, 1);
    kop_histogram_observe(NULL, 1);
    ck_assert(kop_metric_value(NULL) == 0);
    ck_assert_uint_eq(kop_histogram_count(NULL), 0);
    /* Counters never go down. */
    kop_counter_add(kop_metric_child(f, "v"), 2);
    kop_counter_add(kop_metric_child(f, "v"), -1);
    ck_assert(kop_metric_value(kop_metric_child(f, "v")) == 2);
    kop_metrics_exp_buckets(0.001, 10, 4, exp);
    ck_assert(exp[0] == 0.001 && fabs(exp[3] - 1) < 1e-12);
    kop_metrics_free(m);
    kop_metrics_free(NULL);
}
END_TEST

START_TEST(test_metrics_labelled_family_without_children_hidden)
{
    struct kop_metrics *m = kop_metrics_new(false);
    char *text;

    ck_assert_ptr_nonnull(kop_metrics_register(m, KOP_METRIC_COUNTER, "never_total", "n",
                                               (const char *const[]){"a", NULL}, NULL, 0));
    text = render(m);
    ck_assert_str_eq(text, "");
    free(text);
    kop_metrics_free(m);
}
END_TEST

/* A removed child is no longer rendered, its siblings are, and the same
 * label values make a new child from 0. */
START_TEST(test_metrics_remove_child)
{
    struct kop_metrics *m = kop_metrics_new(false);
    static const char *const labels[] = {"cluster", NULL};
    struct kop_metric_family *f =
        kop_metrics_register(m, KOP_METRIC_GAUGE, "t_ready", "Ready.", labels, NULL, 0);
    struct kop_metric *a = kop_metric_child(f, "a");
    struct kop_metric *b = kop_metric_child(f, "b");
    struct kop_metric *c = kop_metric_child(f, "c");
    kop_gauge_set(a, 1);
    kop_gauge_set(b, 2);
    kop_gauge_set(c, 3);
    kop_metric_remove(c); /* the last one */
    kop_metric_remove(a); /* the first one */
    kop_metric_remove(NULL);
    char *text = render(m);
    ck_assert_ptr_null(strstr(text, "cluster=\"a\""));
    ck_assert_ptr_null(strstr(text, "cluster=\"c\""));
    ck_assert_ptr_nonnull(strstr(text, "t_ready{cluster=\"b\"} 2"));
    free(text);
    struct kop_metric *c2 = kop_metric_child(f, "c");
    ck_assert_double_eq(kop_metric_value(c2), 0);
    kop_gauge_set(c2, 5);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "t_ready{cluster=\"c\"} 5"));
    free(text);
    kop_metrics_free(m);
}
END_TEST

/* Every series of a family with one label value goes; the others stay;
 * an unknown family or label is nothing. */
START_TEST(test_metrics_remove_series)
{
    struct kop_metrics *m = kop_metrics_new(false);
    static const char *const labels[] = {"code", "cluster", NULL};
    struct kop_metric_family *f =
        kop_metrics_register(m, KOP_METRIC_COUNTER, "t_req_total", "Requests.", labels, NULL, 0);
    kop_counter_inc(kop_metric_child(f, "200", "a"));
    kop_counter_inc(kop_metric_child(f, "200", "b"));
    kop_counter_inc(kop_metric_child(f, "500", "a"));
    kop_counter_inc(kop_metric_child(f, "404", "a"));
    kop_metrics_remove_series(m, "t_req_total", "nolabel", "a");
    kop_metrics_remove_series(m, "t_nosuch", "cluster", "a");
    kop_metrics_remove_series(m, "t_req_total", "cluster", "a");
    char *text = render(m);
    ck_assert_ptr_null(strstr(text, "cluster=\"a\""));
    ck_assert_ptr_nonnull(strstr(text, "t_req_total{code=\"200\",cluster=\"b\"} 1"));
    free(text);
    kop_counter_inc(kop_metric_child(f, "200", "a")); /* back, from 0 */
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "t_req_total{code=\"200\",cluster=\"a\"} 1"));
    free(text);
    kop_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_process_metrics)
{
    struct kop_metrics *m = kop_metrics_new(true);
    char *text, *p;
    double v;

    ck_assert_ptr_nonnull(kop_metrics_register(m, KOP_METRIC_GAUGE, "aaa", "first", NULL, NULL, 0));
    ck_assert_ptr_nonnull(kop_metrics_register(m, KOP_METRIC_GAUGE, "zzz", "last", NULL, NULL, 0));
    text = render(m);
    static const char *const names[] = {
        "process_cpu_seconds_total",  "process_max_fds",
        "process_open_fds",           "process_resident_memory_bytes",
        "process_start_time_seconds", "process_virtual_memory_bytes",
    };
    const char *prev = strstr(text, "# HELP aaa ");
    ck_assert_ptr_nonnull(prev);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char want[128];

        snprintf(want, sizeof(want), "\n%s ", names[i]);
        p = strstr(text, want);
        ck_assert_msg(p != NULL, "missing %s", names[i]);
        ck_assert(p > prev);
        prev = p;
        v = strtod(p + strlen(want), NULL);
        if (i == 0)
            ck_assert(v >= 0);
        else
            ck_assert_msg(v > 0, "%s is %g", names[i], v);
    }
    ck_assert(strstr(text, "# HELP zzz ") > prev);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE process_open_fds gauge\n"));
    /* Start time is within a day of now (seconds since the epoch). */
    p = strstr(text, "\nprocess_start_time_seconds ");
    v = strtod(p + 28, NULL);
    ck_assert(fabs(v - (double)time(NULL)) < 86400);
    free(text);
    kop_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_global_registry)
{
    struct kop_metrics *g = kop_metrics_global();

    ck_assert_ptr_nonnull(g);
    ck_assert_ptr_eq(kop_metrics_global(), g);
    kop_metrics_global_cleanup();
    kop_metrics_global_cleanup();
    ck_assert_ptr_nonnull(kop_metrics_global());
    kop_metrics_global_cleanup();
}
END_TEST

#define THREADS 4
#define ROUNDS 20000

struct worker {
    struct kop_metrics *m;
    struct kop_metric_family *counter, *gauge, *hist;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (int i = 0; i < ROUNDS; i++) {
        /* Look the children up each time, to race child creation too. */
        char label[8];

        snprintf(label, sizeof(label), "l%d", i % 3);
        kop_counter_inc(kop_metric_child(w->counter, label));
        kop_counter_add(kop_metric_child(w->counter, "half"), 0.5);
        kop_gauge_add(kop_metric_child(w->gauge), 1);
        kop_gauge_add(kop_metric_child(w->gauge), -0.25);
        kop_histogram_observe(kop_metric_child(w->hist), (double)(i % 4));
        if (i % 5000 == 0) {
            char *text = NULL;

            if (kop_metrics_render(w->m, &text, NULL) == 0)
                free(text);
        }
    }
    return NULL;
}

START_TEST(test_metrics_concurrent_updates_sum_exactly)
{
    struct kop_metrics *m = kop_metrics_new(false);
    struct worker w;
    pthread_t th[THREADS];
    double total = 0;
    char *text;

    w.m = m;
    w.counter = kop_metrics_register(m, KOP_METRIC_COUNTER, "c_total", "c",
                                     (const char *const[]){"k", NULL}, NULL, 0);
    w.gauge = kop_metrics_register(m, KOP_METRIC_GAUGE, "g", "g", NULL, NULL, 0);
    w.hist = kop_metrics_register(m, KOP_METRIC_HISTOGRAM, "h", "h", NULL,
                                  (const double[]){0.5, 1.5, 2.5}, 3);
    for (int i = 0; i < THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w), 0);
    /* Render while the workers update. */
    for (int i = 0; i < 20; i++) {
        text = render(m);
        free(text);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    for (int k = 0; k < 3; k++) {
        char label[8];

        snprintf(label, sizeof(label), "l%d", k);
        total += kop_metric_value(kop_metric_child(w.counter, label));
    }
    ck_assert(total == (double)THREADS * ROUNDS);
    ck_assert(kop_metric_value(kop_metric_child(w.counter, "half")) == THREADS * ROUNDS * 0.5);
    ck_assert(kop_metric_value(kop_metric_child(w.gauge)) == THREADS * ROUNDS * 0.75);
    ck_assert_uint_eq(kop_histogram_count(kop_metric_child(w.hist)), THREADS * ROUNDS);
    /* sum of i % 4 over each block of 4 is 6 */
    ck_assert(kop_metric_value(kop_metric_child(w.hist)) == THREADS * (ROUNDS / 4) * 6.0);
    text = render(m);
    ck_assert_ptr_nonnull(strstr(text, "h_bucket{le=\"0.5\"} 20000\n"));
    ck_assert_ptr_nonnull(strstr(text, "h_bucket{le=\"1.5\"} 40000\n"));
    ck_assert_ptr_nonnull(strstr(text, "h_bucket{le=\"2.5\"} 60000\n"));
    ck_assert_ptr_nonnull(strstr(text, "h_bucket{le=\"+Inf\"} 80000\n"));
    ck_assert_ptr_nonnull(strstr(text, "h_count 80000\n"));
    free(text);
    kop_metrics_free(m);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_metrics_counter_and_gauge_text);
    tcase_add_test(tc, test_metrics_histogram_text);
    tcase_add_test(tc, test_metrics_remove_child);
    tcase_add_test(tc, test_metrics_remove_series);
    tcase_add_test(tc, test_metrics_number_format);
    tcase_add_test(tc, test_metrics_registration_rules);
    tcase_add_test(tc, test_metrics_labelled_family_without_children_hidden);
    tcase_add_test(tc, test_metrics_process_metrics);
    tcase_add_test(tc, test_metrics_global_registry);
    tcase_add_test(tc, test_metrics_concurrent_updates_sum_exactly);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(metrics_suite());
}
