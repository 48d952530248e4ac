/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/arena.h: alignment, growth past the first chunk, reset,
 * and jansson running on a bound arena with heap values mixed in (parse,
 * modify, dump, decref in every order). Run under ASan: an arena block
 * passed to free() or a leaked heap block fails the sanitizer run.
 */
#include "kop/arena.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/json.h"
#include "testutil.h"

START_TEST(test_arena_alignment_and_growth)
{
    struct kop_arena *a = kop_arena_new(4096);
    size_t expect = 0;

    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq(kop_arena_used(a), 0);
    for (size_t i = 0; i < 2000; i++) {
        size_t n = (i * 7) % 300;
        unsigned char *p = kop_arena_alloc(a, n);

        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        memset(p, 0xab, n); /* ASan: the whole block is ours */
        expect += n ? (n + 15) / 16 * 16 : 16;
    }
    ck_assert_uint_eq(kop_arena_used(a), expect);
    /* Bigger than any chunk so far. */
    void *big = kop_arena_alloc(a, 10 * 1024 * 1024);
    ck_assert_ptr_nonnull(big);
    ck_assert_uint_eq((uintptr_t)big % 16, 0);
    memset(big, 1, 10 * 1024 * 1024);
    ck_assert_ptr_null(kop_arena_alloc(a, SIZE_MAX - 4));
    ck_assert_uint_eq(kop_arena_used(NULL), 0);
    kop_arena_free(a);
    kop_arena_free(NULL);
}
END_TEST

START_TEST(test_arena_reset_reuses_first_chunk)
{
    struct kop_arena *a = kop_arena_new(8192);
    void *first = kop_arena_alloc(a, 100);
    void *again;

    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(kop_arena_alloc(a, 1000));
    kop_arena_reset(a);
    ck_assert_uint_eq(kop_arena_used(a), 0);
    again = kop_arena_alloc(a, 100);
    ck_assert_ptr_eq(again, first);
    /* Grows again after a reset. */
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(kop_arena_alloc(a, 1000));
    ck_assert_uint_eq(kop_arena_used(a), 112 + 100 * 1008);
    kop_arena_reset(a);
    kop_arena_free(a);
}
END_TEST

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);

    ck_assert_msg(v != NULL, "bad JSON: %s", e.text);
    return v;
}

START_TEST(test_arena_json_mixed_heap_and_arena)
{
    struct kop_arena *a = kop_arena_new(16 * 1024);
    json_t *heap_keep = json_pack("{s:s}", "from", "heap"); /* outlives the arena */
    json_t *heap_drop = json_string("freed while bound");   /* freed during bind */
    json_t *doc;
    char *out = NULL;
    size_t used;

    ck_assert_ptr_null(kop_arena_json_bind(a));
    doc = parse("{\"apiVersion\":\"v1\",\"items\":[1,2,3],\"metadata\":{\"name\":\"x\"}}");
    used = kop_arena_used(a);
    ck_assert_uint_gt(used, 0);
    /* A heap value inside an arena tree, by reference. */
    json_object_set(doc, "heap", heap_keep);
    json_decref(heap_drop);
    json_object_set_new(kop_json_object_ensure(doc, "status"), "ok", json_true());
    ck_assert_int_eq(kop_json_dump(doc, JSON_COMPACT | JSON_SORT_KEYS, &out, NULL), 0);
    ck_assert_str_eq(out, "{\"apiVersion\":\"v1\",\"heap\":{\"from\":\"heap\"},\"items\":[1,2,3],"
                          "\"metadata\":{\"name\":\"x\"},\"status\":{\"ok\":true}}");
    free(out); /* kop_json_dump memory is malloc'd even while bound */
    ck_assert_uint_gt(kop_arena_used(a), used);
    ck_assert_ptr_eq(kop_arena_json_bind(NULL), a);
    /* Arena values released after unbind: no free() of arena memory. */
    json_decref(doc);
    ck_assert_int_eq(heap_keep->refcount, 1);
    ck_assert_str_eq(json_string_value(json_object_get(heap_keep, "from")), "heap");
    kop_arena_reset(a);
    /* The heap value survives the reset and is freed normally. */
    json_object_set_new(heap_keep, "after", json_integer(1));
    json_decref(heap_keep);
    kop_arena_free(a);
}
END_TEST

START_TEST(test_arena_json_large_review)
{
    struct kop_arena *a = kop_arena_new(64 * 1024);
    json_t *heap_copy = NULL;

    for (int round = 0; round < 3; round++) {
        json_t *objs, *doc;
        char *text = NULL, *out = NULL;
        size_t len;

        /* Build the request on the heap, as the HTTP layer hands it over. */
        objs = json_array();
        for (int i = 0; i < 10000; i++)
            json_array_append_new(objs, json_pack("{s:s,s:{s:s,s:s},s:{s:i,s:s}}", "apiVersion",
                                                  "mygroup.example.com/v1", "metadata", "name",
                                                  "obj", "namespace", "default", "spec", "replicas",
                                                  i, "image", "nginx:1.14.2"));
        doc = json_pack("{s:o}", "objects", objs);
        ck_assert_int_eq(kop_json_dump(doc, JSON_COMPACT, &text, &len), 0);
        json_decref(doc);

        kop_arena_json_bind(a);
        doc = parse(text);
        objs = json_object_get(doc, "objects");
        for (size_t i = 0; i < json_array_size(objs); i++) {
            json_t *spec = json_object_get(json_array_get(objs, i), "spec");

            json_object_set_new(spec, "port", json_integer(80));
            json_object_del(spec, "image");
        }
        ck_assert_int_eq(kop_json_dump(doc, JSON_COMPACT, &out, NULL), 0);
        /* A reply piece copied to the heap survives the arena. */
        kop_arena_json_bind(NULL);
        if (heap_copy == NULL)
            heap_copy = json_deep_copy(json_array_get(objs, 9999));
        kop_arena_json_bind(a);
        json_decref(doc);
        kop_arena_json_bind(NULL);
        kop_arena_reset(a);
        ck_assert_ptr_nonnull(strstr(out, "\"spec\":{\"replicas\":9999,\"port\":80}"));
        ck_assert_ptr_null(strstr(out, "nginx"));
        free(out);
        free(text);
    }
    ck_assert_int_eq(json_integer_value(kop_json_path(heap_copy, "spec.replicas")), 9999);
    json_decref(heap_copy);
    kop_arena_free(a);
}
END_TEST

static void *thread_main(void *arg)
{
    struct kop_arena *a = kop_arena_new(4096);
    int *ok = arg;

    *ok = 0;
    for (int i = 0; i < 200; i++) {
        char buf[128];
        json_t *v;
        char *out = NULL;

        kop_arena_json_bind(a);
        snprintf(buf, sizeof(buf), "{\"n\":%d,\"s\":[\"a\",\"b\",{\"c\":null}]}", i);
        v = json_loads(buf, 0, NULL);
        if (v != NULL && kop_json_dump(v, JSON_COMPACT, &out, NULL) == 0 && strcmp(out, buf) == 0)
            (*ok)++;
        free(out);
        json_decref(v);
        kop_arena_json_bind(NULL);
        kop_arena_reset(a);
    }
    kop_arena_free(a);
    return NULL;
}

START_TEST(test_arena_json_per_thread)
{
    pthread_t th[3];
    int ok[3];
    json_t *shared;

    /* Meanwhile this thread, unbound, keeps using the heap. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &ok[i]), 0);
    shared = json_pack("{s:i}", "main", 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(ok[i], 200);
    }
    ck_assert_int_eq(json_integer_value(json_object_get(shared, "main")), 1);
    json_decref(shared);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_arena_alignment_and_growth);
    tcase_add_test(tc, test_arena_reset_reuses_first_chunk);
    tcase_add_test(tc, test_arena_json_mixed_heap_and_arena);
    tcase_add_test(tc, test_arena_json_large_review);
    tcase_add_test(tc, test_arena_json_per_thread);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* As in kop's main(): before any jansson allocation. */
    kop_arena_json_install();
    return kop_test_run(arena_suite());
}
