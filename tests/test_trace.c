/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/trace.h: traceparent parsing against the W3C Trace Context
 * rules (version 00 length, later versions' extra fields, version ff,
 * lower-case hex, all-zero ids, the sampled flag), formatting round trip,
 * random ids, the per-thread current context, and spans: child and root
 * contexts, sampling, attributes only while a sink is installed, and what
 * the sink receives.
 */
#include "kop/trace.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "kop/arena.h"
#include "kop/json.h"
#include "testutil.h"

#define TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

START_TEST(test_trace_parse_valid)
{
    struct kop_trace_ctx c;
    ck_assert_int_eq(kop_trace_parse(TP, &c), 0);
    ck_assert(c.valid);
    ck_assert_uint_eq(c.trace_id[0], 0x4b);
    ck_assert_uint_eq(c.trace_id[15], 0x36);
    ck_assert_uint_eq(c.span_id[0], 0x00);
    ck_assert_uint_eq(c.span_id[7], 0xb7);
    ck_assert_uint_eq(c.flags, KOP_TRACE_FLAG_SAMPLED);
    char buf[KOP_TRACEPARENT_SIZE];
    ck_assert_int_eq(kop_trace_format(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, TP);

    /* not sampled; unknown flag bits are not propagated */
    ck_assert_int_eq(kop_trace_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c),
                     0);
    ck_assert_uint_eq(c.flags, 0);
    ck_assert_int_eq(kop_trace_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", &c),
                     0);
    ck_assert_uint_eq(c.flags, KOP_TRACE_FLAG_SAMPLED);
    ck_assert_int_eq(kop_trace_format(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, TP);

    /* a later version: parsed as 00, what follows a '-' ignored */
    ck_assert_int_eq(kop_trace_parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &c),
                     0);
    ck_assert_int_eq(
        kop_trace_parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever", &c),
        0);
    ck_assert_int_eq(kop_trace_format(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, TP);
}
END_TEST

START_TEST(test_trace_parse_invalid)
{
    static const char *const bad[] = {
        "",
        "00",
        /* version 00 is exactly 55 characters */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
        /* a later version with more must separate it with '-' */
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
        /* version ff is invalid; a version must be hex */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        /* upper-case hex */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
        /* all-zero ids */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        /* wrong separators */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
        /* a non-hex character inside an id */
        "00-4bf92f3577b34da6a3ce929d0e0e473z-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902 7-01",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct kop_trace_ctx c = {.valid = false, .flags = 7};
        ck_assert_msg(kop_trace_parse(bad[i], &c) == -EINVAL, "accepted %s", bad[i]);
        ck_assert_msg(!c.valid && c.flags == 7, "wrote the context for %s", bad[i]);
    }
    struct kop_trace_ctx c;
    ck_assert_int_eq(kop_trace_parse(NULL, &c), -EINVAL);
    char buf[KOP_TRACEPARENT_SIZE];
    struct kop_trace_ctx none = {0};
    ck_assert_int_eq(kop_trace_format(&none, buf, sizeof(buf)), -EINVAL);
    ck_assert_int_eq(kop_trace_parse(TP, &c), 0);
    ck_assert_int_eq(kop_trace_format(&c, buf, sizeof(buf) - 1), -ENOSPC);
}
END_TEST

START_TEST(test_trace_random_ids_differ)
{
    uint8_t a[16], b[16];
    kop_trace_random_id(a, sizeof(a));
    kop_trace_random_id(b, sizeof(b));
    ck_assert(memcmp(a, b, sizeof(a)) != 0);
    char hex[33];
    kop_trace_hex(a, sizeof(a), hex);
    ck_assert_uint_eq(strlen(hex), 32);
    ck_assert_uint_eq(strspn(hex, "0123456789abcdef"), 32);
}
END_TEST

static void *other_thread(void *arg)
{
    struct kop_trace_ctx c;
    *(bool *)arg = kop_trace_current(&c);
    return NULL;
}

START_TEST(test_trace_current_is_per_thread)
{
    struct kop_trace_ctx c, got;
    ck_assert(!kop_trace_current(&got));
    ck_assert_int_eq(kop_trace_parse(TP, &c), 0);
    struct kop_trace_ctx prev = kop_trace_set_current(&c);
    ck_assert(!prev.valid);
    ck_assert(kop_trace_current(&got));
    ck_assert_mem_eq(got.trace_id, c.trace_id, 16);
    bool seen = true;
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, other_thread, &seen), 0);
    pthread_join(t, NULL);
    ck_assert(!seen);
    /* spans started under it are counted, others are not */
    ck_assert_uint_eq(kop_trace_current_children(), 0);
    struct kop_span *child = kop_span_start("GET", KOP_SPAN_CLIENT, &c);
    struct kop_span *other = kop_span_start("x", KOP_SPAN_INTERNAL, NULL);
    ck_assert_uint_eq(kop_trace_current_children(), 1);
    kop_span_free(child);
    kop_span_free(other);
    prev = kop_trace_set_current(NULL);
    ck_assert(prev.valid);
    ck_assert_uint_eq(kop_trace_current_children(), 0);
    ck_assert_mem_eq(prev.span_id, c.span_id, 8);
    ck_assert(!kop_trace_current(&got));
}
END_TEST

struct sunk {
    int n;
    struct kop_span *last;
};

static void sink(void *ud, struct kop_span *span)
{
    struct sunk *s = ud;
    s->n++;
    kop_span_free(s->last);
    s->last = span;
}

START_TEST(test_trace_span_child_root_and_sink)
{
    struct kop_trace_ctx parent;
    ck_assert_int_eq(kop_trace_parse(TP, &parent), 0);

    /* without a sink: ids, no attributes, nothing recorded */
    struct kop_span *s = kop_span_start("POST /x", KOP_SPAN_SERVER, &parent);
    ck_assert_ptr_nonnull(s);
    ck_assert(!s->recording);
    ck_assert_mem_eq(s->ctx.trace_id, parent.trace_id, 16);
    ck_assert(s->has_parent);
    ck_assert_mem_eq(s->parent_span_id, parent.span_id, 8);
    ck_assert(memcmp(s->ctx.span_id, parent.span_id, 8) != 0);
    kop_span_set_str(s, "k", "v");
    ck_assert_uint_eq(s->n_attributes, 0);
    kop_span_end(s);

    struct sunk got = {0};
    kop_trace_set_sink(sink, &got);
    ck_assert(kop_trace_enabled());
    s = kop_span_start("reconcile", KOP_SPAN_INTERNAL, NULL);
    ck_assert(s->recording);
    ck_assert(!s->has_parent);
    ck_assert_uint_eq(s->ctx.flags, KOP_TRACE_FLAG_SAMPLED);
    ck_assert(memcmp(s->ctx.trace_id, parent.trace_id, 16) != 0);
    kop_span_set_str(s, "k8s.namespace.name", "default");
    kop_span_set_int(s, "http.response.status_code", 200);
    kop_span_set_status(s, KOP_SPAN_ERROR, "boom");
    kop_span_end(s);
    ck_assert_int_eq(got.n, 1);
    ck_assert_str_eq(got.last->name, "reconcile");
    ck_assert_int_gt(got.last->end_ns, 0);
    ck_assert(got.last->end_ns >= got.last->start_ns);
    ck_assert_int_eq(got.last->status, KOP_SPAN_ERROR);
    char *a = NULL;
    json_t *attrs = kop_span_attributes_json(got.last);
    ck_assert_int_eq(kop_json_dump(attrs, JSON_COMPACT, &a, NULL), 0);
    json_decref(attrs);
    ck_assert_str_eq(a,
                     "[{\"key\":\"k8s.namespace.name\",\"value\":{\"stringValue\":\"default\"}},"
                     "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":\"200\"}}]");
    free(a);

    /* a parent that is not sampled: its children are not recorded */
    struct kop_trace_ctx unsampled = parent;
    unsampled.flags = 0;
    s = kop_span_start("GET", KOP_SPAN_CLIENT, &unsampled);
    ck_assert(!s->recording);
    ck_assert_uint_eq(s->ctx.flags, 0);
    kop_span_end(s);
    ck_assert_int_eq(got.n, 1);

    kop_trace_set_sink(NULL, NULL);
    ck_assert(!kop_trace_enabled());
    kop_span_free(got.last);
}
END_TEST

START_TEST(test_trace_span_outlives_a_bound_arena)
{
    struct sunk got = {0};
    kop_trace_set_sink(sink, &got);
    struct kop_arena *a = kop_arena_new(4096);
    ck_assert_ptr_nonnull(a);
    struct kop_arena *prev = kop_arena_json_bind(a);
    struct kop_span *s = kop_span_start("POST /convert", KOP_SPAN_SERVER, NULL);
    kop_span_set_str(s, "http.route", "/convert");
    kop_arena_json_bind(prev);
    /* the request's arena goes; the span is exported later */
    kop_arena_free(a);
    kop_span_end(s);
    ck_assert_int_eq(got.n, 1);
    json_t *attrs = kop_span_attributes_json(got.last);
    json_t *kv = json_array_get(attrs, 0);
    ck_assert_str_eq(json_string_value(json_object_get(kv, "key")), "http.route");
    json_decref(attrs);
    kop_trace_set_sink(NULL, NULL);
    kop_span_free(got.last);
}
END_TEST

START_TEST(test_trace_attribute_limits)
{
    struct sunk got = {0};
    kop_trace_set_sink(sink, &got);
    struct kop_span *s = kop_span_start("x", KOP_SPAN_INTERNAL, NULL);
    kop_span_set_str(s, "bad", "\xff\xfe"); /* kept, left out of the JSON */
    for (int i = 0; i < KOP_SPAN_MAX_ATTRIBUTES + 3; i++)
        kop_span_set_int(s, "n", i);
    ck_assert_uint_eq(s->n_attributes, KOP_SPAN_MAX_ATTRIBUTES);
    json_t *attrs = kop_span_attributes_json(s);
    ck_assert_uint_eq(json_array_size(attrs), KOP_SPAN_MAX_ATTRIBUTES - 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(attrs, 0), "key")), "n");
    json_decref(attrs);
    kop_span_end(s);
    ck_assert_int_eq(got.n, 1);
    kop_trace_set_sink(NULL, NULL);
    kop_span_free(got.last);
}
END_TEST

static Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_trace_parse_valid);
    tcase_add_test(tc, test_trace_parse_invalid);
    tcase_add_test(tc, test_trace_random_ids_differ);
    tcase_add_test(tc, test_trace_current_is_per_thread);
    tcase_add_test(tc, test_trace_span_child_root_and_sink);
    tcase_add_test(tc, test_trace_span_outlives_a_bound_arena);
    tcase_add_test(tc, test_trace_attribute_limits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    kop_arena_json_install(); /* as kop runs */
    return kop_test_run(trace_suite());
}
