/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays every file of the fuzz corpus (tests/fuzz/corpus/<target>/)
 * through the same entry functions the libFuzzer binaries call, without
 * libFuzzer, so the seeds and every crash reproducer kept there run in each
 * normal test run (and under ASan+UBSan in the sanitizer runs, where a leak
 * fails the test too). A broken invariant names the file.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The targets' logic (tests/fuzz/targets.c) is linked into this suite. */
#include "fuzz/targets.h"

static char failure[1024];
static unsigned failures;

static void record_failure(const char *msg)
{
    if (failures++ == 0)
        snprintf(failure, sizeof(failure), "%s", msg);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run every file of corpus/<name> through the target; returns the count. */
static size_t replay(const struct kop_fuzz_target *t)
{
    const char *root = getenv("KOP_SOURCE_ROOT");
    ck_assert_msg(root != NULL, "KOP_SOURCE_ROOT is not set");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", root, t->name);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot open %s: errno %d", dir, errno);
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    for (de = readdir(d); de; de = readdir(d)) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof(*names));
            ck_assert_ptr_nonnull(names);
        }
        names[n] = strdup(de->d_name);
        ck_assert_ptr_nonnull(names[n]);
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_names);

    kop_fuzz_init();
    kop_fuzz_set_fail(record_failure);
    for (size_t i = 0; i < n; i++) {
        char path[8192];
        size_t len = 0;
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        char *data = kop_test_read_file(path, &len);
        ck_assert_msg(data != NULL, "cannot read %s", path);
        failures = 0;
        t->run((const uint8_t *)data, len);
        free(data);
        ck_assert_msg(failures == 0, "%s/%s: %u broken invariant(s), first: %s", t->name, names[i],
                      failures, failure);
        free(names[i]);
    }
    kop_fuzz_set_fail(NULL);
    free(names);
    return n;
}

static const struct kop_fuzz_target *target(const char *name)
{
    for (const struct kop_fuzz_target *t = kop_fuzz_targets; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    ck_abort_msg("no fuzz target %s", name);
    return NULL;
}

#define REPLAY_TEST(name)                                                                          \
    START_TEST(test_fuzz_corpus_##name)                                                            \
    {                                                                                              \
        size_t n = replay(target(#name));                                                          \
        ck_assert_uint_gt(n, 0);                                                                   \
    }                                                                                              \
    END_TEST

REPLAY_TEST(conversion_review)
REPLAY_TEST(admission_review)
REPLAY_TEST(conversion)
REPLAY_TEST(imageref)
REPLAY_TEST(watch)
REPLAY_TEST(kubeconfig)
REPLAY_TEST(store)
REPLAY_TEST(config)
REPLAY_TEST(jscan)

/* The fail hook itself: a broken invariant is reported, not swallowed. */
START_TEST(test_fuzz_corpus_fail_hook_records)
{
    kop_fuzz_set_fail(record_failure);
    failures = 0;
    /* a store operation stream that is fine must not report */
    static const uint8_t ops[] = {0, 1, 'a', 1, 'b', 0, 2, 1, 'a', 1, 'b'};
    kop_fuzz_store(ops, sizeof(ops));
    ck_assert_uint_eq(failures, 0);
    kop_fuzz_fail("check %d", 42);
    ck_assert_uint_eq(failures, 1);
    ck_assert_str_eq(failure, "check 42");
    kop_fuzz_set_fail(NULL);
}
END_TEST

/* Every target in the table has a test above. */
START_TEST(test_fuzz_corpus_table_complete)
{
    size_t n = 0;
    for (const struct kop_fuzz_target *t = kop_fuzz_targets; t->name; t++) {
        ck_assert(t->run != NULL);
        ck_assert_uint_gt(t->max_len, 0);
        n++;
    }
    ck_assert_uint_eq(n, 9);
}
END_TEST

static Suite *fuzz_corpus_suite(void)
{
    Suite *s = suite_create("fuzz_corpus");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_fuzz_corpus_conversion_review);
    tcase_add_test(tc, test_fuzz_corpus_admission_review);
    tcase_add_test(tc, test_fuzz_corpus_conversion);
    tcase_add_test(tc, test_fuzz_corpus_imageref);
    tcase_add_test(tc, test_fuzz_corpus_watch);
    tcase_add_test(tc, test_fuzz_corpus_kubeconfig);
    tcase_add_test(tc, test_fuzz_corpus_store);
    tcase_add_test(tc, test_fuzz_corpus_config);
    tcase_add_test(tc, test_fuzz_corpus_jscan);
    tcase_add_test(tc, test_fuzz_corpus_fail_hook_records);
    tcase_add_test(tc, test_fuzz_corpus_table_complete);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(fuzz_corpus_suite());
}
