/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MyResource controller's lifecycle without an API server (the
 * reconcile paths run against kubesim in tests/integration/test_operator.c):
 * argument checks, admission rule 4 before the caches synced, and a start
 * against a refused address that neither syncs nor blocks stop/free.
 */
#include "testutil.h"

#include <errno.h>
#include <string.h>

#include "kop/client.h"
#include "kop/clock.h"
#include "kop/controller.h"
#include "kop/kubeconfig.h"
#include "kop/metrics.h"
#include "kop/store.h"

struct fixture {
    struct kop_kubeconfig kc;
    struct kop_client *client;
    struct kop_store *store;
    struct kop_metrics *metrics;
};

static void fixture_init(struct fixture *f)
{
    memset(f, 0, sizeof(*f));
    /* Port 1 on loopback: connections are refused at once. */
    f->kc.server = strdup("https://127.0.0.1:1");
    f->kc.insecure_skip_tls_verify = true;
    f->metrics = kop_metrics_new(false);
    ck_assert_ptr_nonnull(f->metrics);
    const struct kop_client_options co = {.config = &f->kc, .metrics = f->metrics};
    ck_assert_int_eq(kop_client_new(&co, &f->client), 0);
    ck_assert_int_eq(kop_store_new(f->metrics, &f->store), 0);
}

static void fixture_cleanup(struct fixture *f)
{
    kop_client_free(f->client);
    kop_store_free(f->store);
    kop_metrics_free(f->metrics);
    kop_kubeconfig_cleanup(&f->kc);
}

START_TEST(test_controller_new_rejects_missing_parts)
{
    struct fixture f;
    fixture_init(&f);
    struct kop_controller *c = NULL;
    ck_assert_int_eq(kop_controller_new(NULL, &c), -EINVAL);
    struct kop_controller_options o = {.client = f.client};
    ck_assert_int_eq(kop_controller_new(&o, &c), -EINVAL);
    o = (struct kop_controller_options){.store = f.store};
    ck_assert_int_eq(kop_controller_new(&o, &c), -EINVAL);
    ck_assert_ptr_null(c);
    kop_controller_free(NULL);
    fixture_cleanup(&f);
}
END_TEST

START_TEST(test_controller_lookup_not_synced_then_stop)
{
    struct fixture f;
    fixture_init(&f);
    struct kop_controller *c = NULL;
    const struct kop_controller_options o = {
        .client = f.client,
        .store = f.store,
        .metrics = f.metrics,
        .namespace = "team-a",
        .max_concurrent = 2,
        .sync_period_ms = 100,
        .leading = true,
    };
    ck_assert_int_eq(kop_controller_new(&o, &c), 0);
    char uid[64] = "untouched";
    ck_assert_int_eq(
        kop_controller_child_lookup(c, "Deployment", "team-a", "web", uid, sizeof(uid)),
        KOP_CHILD_NOT_SYNCED);
    ck_assert_str_eq(uid, "untouched");
    ck_assert(!kop_controller_synced(c));
    ck_assert(!kop_controller_synced(NULL));

    ck_assert_int_eq(kop_controller_start(c), 0);
    ck_assert_int_eq(kop_controller_wait_synced(c, 300), -ETIMEDOUT);
    ck_assert(!kop_controller_synced(c));
    kop_controller_set_leading(c, false);
    kop_controller_set_leading(c, true);
    int64_t t0 = kop_clock_now_ns();
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0);
    ck_assert_int_eq(kop_controller_stop(c, 5000), 0); /* idempotent */
    ck_assert_int_lt(kop_clock_now_ns() - t0, 5 * KOP_NSEC_PER_SEC);
    kop_controller_free(c);
    fixture_cleanup(&f);
}
END_TEST

static Suite *controller_suite(void)
{
    Suite *s = suite_create("controller");
    TCase *tc = tcase_create("lifecycle");
    tcase_add_test(tc, test_controller_new_rejects_missing_parts);
    tcase_add_test(tc, test_controller_lookup_not_synced_then_stop);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(controller_suite());
}
