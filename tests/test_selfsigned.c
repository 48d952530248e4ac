/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for --self-signed-certs' certificate handling: a fresh directory
 * gets a pair for the webhook Service names; a good pair is reused
 * untouched; an expiring pair, a pair for other names, a missing key or a
 * missing CA is replaced; the namespace comes from the options, then
 * $POD_NAMESPACE, then kop-system. (The caBundle patches are exercised
 * against kubesim by the integration test "selfsigned".)
 */
#include <assert.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kop/certgen.h"
#include "kop/log.h"
#include "kop/selfsigned.h"
#include "testutil.h"

#define DAY (24LL * 3600)

static char *dir;

static void setup(void)
{
    kop_log_setup(KOP_LOG_WARN, KOP_LOG_FORMAT_JSON, STDERR_FILENO);
    dir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    unsetenv("POD_NAMESPACE");
}

static void teardown(void)
{
    kop_test_rmdir(dir);
    free(dir);
    dir = NULL;
}

static char *read_part(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return kop_test_read_file(path, NULL);
}

static void remove_part(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ck_assert_int_eq(unlink(path), 0);
}

/* True when prepare replaced tls.crt. */
static bool prepare_replaced(const struct kop_selfsigned_options *o)
{
    char *before = read_part("tls.crt");
    ck_assert_int_eq(kop_selfsigned_prepare(o), 0);
    char *after = read_part("tls.crt");
    ck_assert_ptr_nonnull(after);
    bool replaced = !before || strcmp(before, after) != 0;
    free(before);
    free(after);
    return replaced;
}

static void write_pair(const char *const *names, int64_t validity_s)
{
    struct kop_certgen_pair p = {0};
    const struct kop_certgen_options g = {.dns_names = names, .validity_s = validity_s};
    ck_assert_int_eq(kop_certgen_generate(&g, &p), 0);
    ck_assert_int_eq(kop_certgen_write_dir(dir, &p), 0);
    kop_certgen_pair_cleanup(&p);
}

static const char *const svc_names[] = {"kop-webhook-service.kop-system.svc",
                                        "kop-webhook-service.kop-system.svc.cluster.local", NULL};

START_TEST(test_selfsigned_fresh_dir_generates)
{
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    ck_assert_int_eq(kop_selfsigned_check(&o), -ENOENT);
    ck_assert(prepare_replaced(&o));
    ck_assert_int_eq(kop_selfsigned_check(&o), 0);
    /* The pair carries both service names (default namespace). */
    struct kop_certgen_pair p = {0};
    ck_assert_int_eq(kop_certgen_read_dir(dir, &p), 0);
    const struct kop_certgen_check c = {.dns_names = svc_names, .min_remaining_s = 300 * DAY};
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), 0);
    kop_certgen_pair_cleanup(&p);
}
END_TEST

START_TEST(test_selfsigned_good_pair_reused)
{
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    ck_assert(prepare_replaced(&o));
    ck_assert(!prepare_replaced(&o));
    /* A pair made elsewhere for the right names is reused as well. */
    write_pair(svc_names, 90 * DAY);
    char *ca = read_part("ca.crt");
    ck_assert(!prepare_replaced(&o));
    char *ca2 = read_part("ca.crt");
    ck_assert_str_eq(ca, ca2);
    free(ca);
    free(ca2);
}
END_TEST

START_TEST(test_selfsigned_expiring_regenerated)
{
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    write_pair(svc_names, 20 * DAY); /* inside the 30-day window */
    ck_assert_int_eq(kop_selfsigned_check(&o), -EKEYEXPIRED);
    ck_assert(prepare_replaced(&o));
    ck_assert_int_eq(kop_selfsigned_check(&o), 0);
    /* The window is configurable; "now" too. */
    write_pair(svc_names, 20 * DAY);
    const struct kop_selfsigned_options shorter = {.cert_dir = dir, .renew_before_s = 10 * DAY};
    ck_assert_int_eq(kop_selfsigned_check(&shorter), 0);
    ck_assert(!prepare_replaced(&shorter));
    const struct kop_selfsigned_options later = {
        .cert_dir = dir, .renew_before_s = 10 * DAY, .now_s = (int64_t)time(NULL) + 15 * DAY};
    ck_assert_int_eq(kop_selfsigned_check(&later), -EKEYEXPIRED);
}
END_TEST

START_TEST(test_selfsigned_wrong_names_regenerated)
{
    static const char *const other[] = {"kop-webhook-service.elsewhere.svc", NULL};
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    write_pair(other, 0);
    ck_assert_int_eq(kop_selfsigned_check(&o), -EADDRNOTAVAIL);
    ck_assert(prepare_replaced(&o));
    ck_assert_int_eq(kop_selfsigned_check(&o), 0);
    /* Only one of the two service names: still replaced. */
    static const char *const half[] = {"kop-webhook-service.kop-system.svc", NULL};
    write_pair(half, 0);
    ck_assert(prepare_replaced(&o));
    /* An extra name asked for and missing. */
    static const char *const extra[] = {"localhost", NULL};
    const struct kop_selfsigned_options ox = {.cert_dir = dir, .extra_dns_names = extra};
    ck_assert_int_eq(kop_selfsigned_check(&ox), -EADDRNOTAVAIL);
    ck_assert(prepare_replaced(&ox));
    ck_assert_int_eq(kop_selfsigned_check(&ox), 0);
    ck_assert_int_eq(kop_selfsigned_check(&o), 0); /* a superset is fine */
}
END_TEST

START_TEST(test_selfsigned_missing_parts_regenerated)
{
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    ck_assert(prepare_replaced(&o));
    remove_part("tls.key");
    ck_assert_int_eq(kop_selfsigned_check(&o), -ENOENT);
    ck_assert(prepare_replaced(&o));
    ck_assert_int_eq(kop_selfsigned_check(&o), 0);
    /* Without ca.crt there is nothing to publish as caBundle. */
    remove_part("ca.crt");
    ck_assert_int_eq(kop_selfsigned_check(&o), -ENOENT);
    ck_assert(prepare_replaced(&o));
    /* A key from another pair. */
    char *key = read_part("tls.key");
    ck_assert(prepare_replaced(
        &(struct kop_selfsigned_options){.cert_dir = dir, .service_namespace = "other"}));
    struct kop_certgen_pair p = {0};
    ck_assert_int_eq(kop_certgen_read_dir(dir, &p), 0);
    free(p.key_pem);
    p.key_pem = key;
    ck_assert_int_eq(kop_certgen_write_dir(dir, &p), 0);
    kop_certgen_pair_cleanup(&p);
    const struct kop_selfsigned_options other = {.cert_dir = dir, .service_namespace = "other"};
    ck_assert_int_eq(kop_selfsigned_check(&other), -EBADMSG);
    ck_assert(prepare_replaced(&other));
    ck_assert_int_eq(kop_selfsigned_check(&other), 0);
}
END_TEST

START_TEST(test_selfsigned_namespace_sources)
{
    const struct kop_selfsigned_options o = {.cert_dir = dir};
    ck_assert_int_eq(kop_selfsigned_prepare(&o), 0);
    /* $POD_NAMESPACE moves the names. */
    setenv("POD_NAMESPACE", "team-a", 1);
    ck_assert_int_eq(kop_selfsigned_check(&o), -EADDRNOTAVAIL);
    ck_assert(prepare_replaced(&o));
    struct kop_certgen_pair p = {0};
    ck_assert_int_eq(kop_certgen_read_dir(dir, &p), 0);
    static const char *const team_a[] = {"kop-webhook-service.team-a.svc",
                                         "kop-webhook-service.team-a.svc.cluster.local", NULL};
    const struct kop_certgen_check c = {.dns_names = team_a};
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c), 0);
    kop_certgen_pair_cleanup(&p);
    /* The option beats the environment; the service name is an option too. */
    const struct kop_selfsigned_options named = {
        .cert_dir = dir, .service_name = "hooks", .service_namespace = "ops"};
    ck_assert(prepare_replaced(&named));
    ck_assert_int_eq(kop_certgen_read_dir(dir, &p), 0);
    static const char *const ops[] = {"hooks.ops.svc", "hooks.ops.svc.cluster.local", NULL};
    const struct kop_certgen_check c2 = {.dns_names = ops};
    ck_assert_int_eq(kop_certgen_check_pair(&p, &c2), 0);
    kop_certgen_pair_cleanup(&p);
    unsetenv("POD_NAMESPACE");
}
END_TEST

START_TEST(test_selfsigned_bad_options)
{
    const struct kop_selfsigned_options none = {0};
    ck_assert_int_eq(kop_selfsigned_prepare(&none), -EINVAL);
    ck_assert_int_eq(kop_selfsigned_check(&none), -EINVAL);
    char longns[300];
    memset(longns, 'n', sizeof(longns) - 1);
    longns[sizeof(longns) - 1] = '\0';
    const struct kop_selfsigned_options tl = {.cert_dir = dir, .service_namespace = longns};
    ck_assert_int_eq(kop_selfsigned_prepare(&tl), -EINVAL);
}
END_TEST

static Suite *selfsigned_suite(void)
{
    Suite *s = suite_create("selfsigned");
    TCase *tc = tcase_create("selfsigned");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_selfsigned_fresh_dir_generates);
    tcase_add_test(tc, test_selfsigned_good_pair_reused);
    tcase_add_test(tc, test_selfsigned_expiring_regenerated);
    tcase_add_test(tc, test_selfsigned_wrong_names_regenerated);
    tcase_add_test(tc, test_selfsigned_missing_parts_regenerated);
    tcase_add_test(tc, test_selfsigned_namespace_sources);
    tcase_add_test(tc, test_selfsigned_bad_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(selfsigned_suite());
}
