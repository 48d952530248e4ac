/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/json.h: dumping into malloc'd memory, dotted paths,
 * object_ensure, and number-aware deep equality.
 */
#include "kop/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static json_t *parse(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);

    ck_assert_msg(v != NULL, "bad test JSON: %s", e.text);
    return v;
}

START_TEST(test_json_dump_compact_and_sorted)
{
    json_t *v = parse("{\"b\":1,\"a\":[true,null,\"x\\\"y\"]}");
    char *buf = NULL;
    size_t len = 0;

    ck_assert_int_eq(kop_json_dump(v, JSON_COMPACT, &buf, &len), 0);
    ck_assert_str_eq(buf, "{\"b\":1,\"a\":[true,null,\"x\\\"y\"]}");
    ck_assert_uint_eq(len, strlen(buf));
    free(buf);
    ck_assert_int_eq(kop_json_dump(v, JSON_COMPACT | JSON_SORT_KEYS, &buf, NULL), 0);
    ck_assert_str_eq(buf, "{\"a\":[true,null,\"x\\\"y\"],\"b\":1}");
    free(buf);
    json_decref(v);
}
END_TEST

START_TEST(test_json_dump_large_and_scalars)
{
    json_t *arr = json_array();
    json_t *s = json_string("plain");
    char *buf = NULL;
    size_t len;

    for (int i = 0; i < 20000; i++)
        json_array_append_new(arr, json_integer(i));
    ck_assert_int_eq(kop_json_dump(arr, JSON_COMPACT, &buf, &len), 0);
    ck_assert_uint_eq(len, strlen(buf));
    ck_assert(strncmp(buf, "[0,1,2,", 7) == 0);
    ck_assert(strcmp(buf + len - 7, ",19999]") == 0);
    free(buf);
    /* A bare string needs JSON_ENCODE_ANY. */
    buf = (char *)"untouched";
    ck_assert_int_eq(kop_json_dump(s, JSON_COMPACT, &buf, &len), -EINVAL);
    ck_assert_str_eq(buf, "untouched");
    ck_assert_int_eq(kop_json_dump(s, JSON_ENCODE_ANY, &buf, &len), 0);
    ck_assert_str_eq(buf, "\"plain\"");
    free(buf);
    json_decref(arr);
    json_decref(s);
}
END_TEST

START_TEST(test_json_path_lookup)
{
    json_t *v = parse("{\"metadata\":{\"name\":\"x\",\"labels\":{\"a.b/c\":\"no\"},\"n\":3},"
                      "\"spec\":\"s\"}");

    ck_assert_str_eq(kop_json_path_str(v, "metadata.name"), "x");
    ck_assert_int_eq(json_integer_value(kop_json_path(v, "metadata.n")), 3);
    ck_assert_ptr_null(kop_json_path_str(v, "metadata.n"));
    ck_assert_ptr_eq(kop_json_path(v, "metadata"), json_object_get(v, "metadata"));
    ck_assert_ptr_null(kop_json_path(v, "metadata.missing"));
    ck_assert_ptr_null(kop_json_path(v, "spec.x"));
    ck_assert_ptr_null(kop_json_path(v, "metadata.name.deeper"));
    ck_assert_ptr_null(kop_json_path(v, "metadata."));
    ck_assert_ptr_null(kop_json_path(NULL, "a"));
    ck_assert_ptr_null(kop_json_path(v, NULL));
    json_decref(v);
}
END_TEST

START_TEST(test_json_object_ensure)
{
    json_t *v = parse("{\"metadata\":{\"annotations\":\"wrong\"}}");
    json_t *md = kop_json_object_ensure(v, "metadata");
    json_t *ann;

    ck_assert_ptr_eq(md, json_object_get(v, "metadata"));
    ann = kop_json_object_ensure(md, "annotations");
    ck_assert(json_is_object(ann));
    ck_assert_ptr_eq(ann, kop_json_path(v, "metadata.annotations"));
    ck_assert_ptr_eq(kop_json_object_ensure(md, "annotations"), ann);
    ck_assert(json_is_object(kop_json_object_ensure(v, "status")));
    ck_assert_ptr_null(kop_json_object_ensure(json_object_get(v, "nope"), "x"));
    json_decref(v);
}
END_TEST

START_TEST(test_json_equal_numbers_and_order)
{
    json_t *a = parse("{\"x\":3,\"y\":[1,2.5,{\"z\":null}],\"s\":\"t\"}");
    json_t *b = parse("{\"s\":\"t\",\"y\":[1.0,2.5,{\"z\":null}],\"x\":3.0}");
    json_t *c = parse("{\"s\":\"t\",\"y\":[2.5,1,{\"z\":null}],\"x\":3}");
    json_t *d = parse("{\"s\":\"t\",\"y\":[1,2.5,{\"z\":null}],\"x\":3,\"extra\":1}");
    json_t *e = parse("{\"s\":\"t\",\"y\":[1,2.5,{\"z\":false}],\"x\":3}");
    json_t *f = parse("{\"s\":\"t\",\"y\":[1,2.5,{\"z\":null}],\"x\":\"3\"}");

    ck_assert(kop_json_equal(a, b));
    ck_assert(kop_json_equal(b, a));
    ck_assert(!kop_json_equal(a, c));
    ck_assert(!kop_json_equal(a, d));
    ck_assert(!kop_json_equal(d, a));
    ck_assert(!kop_json_equal(a, e));
    ck_assert(!kop_json_equal(a, f));
    ck_assert(kop_json_equal(NULL, NULL));
    ck_assert(!kop_json_equal(a, NULL));
    json_decref(a);
    json_decref(b);
    json_decref(c);
    json_decref(d);
    json_decref(e);
    json_decref(f);
}
END_TEST

START_TEST(test_json_equal_strings_with_nul)
{
    json_t *a = json_stringn("a\0b", 3);
    json_t *b = json_stringn("a\0c", 3);
    json_t *c = json_string("a");

    ck_assert(!kop_json_equal(a, b));
    ck_assert(!kop_json_equal(a, c));
    ck_assert(kop_json_equal(a, a));
    json_decref(a);
    json_decref(b);
    json_decref(c);
}
END_TEST

START_TEST(test_json_utf8_cut_at_character_boundary)
{
    /* "a" + e-acute (2 bytes) + euro (3 bytes) + emoji (4 bytes) */
    const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};
    for (size_t n = 0; n <= 10; n++)
        ck_assert_msg(kop_utf8_cut(s, n) == want[n], "n %zu: %zu", n, kop_utf8_cut(s, n));
    char buf[16];
    snprintf(buf, sizeof(buf), "%s", s);
    kop_utf8_truncate(buf, 8);
    ck_assert_str_eq(buf, "a\xc3\xa9\xe2\x82\xac");
    /* stray continuation bytes are left to the caller's own checks */
    ck_assert_uint_eq(kop_utf8_cut("ab", 2), 2);
}
END_TEST

/* Formatted messages go into JSON: a cut never splits a character. */
START_TEST(test_json_msgf_cuts_at_character_boundary)
{
    const char *s = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    for (size_t size = 1; size <= 16; size++) {
        char buf[16];
        kop_msgf(buf, size, "%s", s);
        json_t *j = json_string(buf);
        ck_assert_msg(j, "size %zu: not UTF-8", size);
        json_decref(j);
        ck_assert_uint_eq(strlen(buf), kop_utf8_cut(s, size - 1 < 10 ? size - 1 : 10));
        ck_assert(strncmp(buf, s, strlen(buf)) == 0);
    }
    kop_msgf(NULL, 4, "x");
    char one = 'z';
    kop_msgf(&one, 0, "x");
    ck_assert_int_eq(one, 'z');
}
END_TEST

/* Untrusted text becomes valid UTF-8 without controls: invalid bytes are
 * U+FFFD each, overlong forms and surrogates included; controls a space. */
START_TEST(test_json_utf8_sanitize)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {"plain\ttext", 10, "plain\ttext"},
        {"caf\xe9!", 5, "caf\xef\xbf\xbd!"},
        {"a\x00"
         "b\r\x7f",
         5, "a b  "},
        {"\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd"},                 /* overlong '/' */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf4\x90\x80\x80", 1, "\xef\xbf\xbd"},                     /* cut sequence */
        {"\xe2\x82\xac\xf0\x9f\x98\x80", 7, "\xe2\x82\xac\xf0\x9f\x98\x80"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        size_t n = kop_utf8_sanitize(buf, sizeof(buf), cases[i].in, cases[i].len);
        ck_assert_msg(strcmp(buf, cases[i].out) == 0, "case %zu: %s", i, buf);
        ck_assert_uint_eq(n, strlen(cases[i].out));
    }
    /* header-safe text: no control byte, DEL or tab included */
    ck_assert(kop_text_printable("Bearer abc.DEF-123_\xc3\xa9"));
    ck_assert(!kop_text_printable("a\r\nX-Injected: 1"));
    ck_assert(!kop_text_printable("a\tb") && !kop_text_printable("a\x7f"));
    /* a small buffer ends before a whole character, never inside one */
    char small[5];
    ck_assert_uint_eq(kop_utf8_sanitize(small, sizeof(small), "ab\xe2\x82\xac", 5), 2);
    ck_assert_str_eq(small, "ab");
}
END_TEST

static Suite *json_suite(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_json_dump_compact_and_sorted);
    tcase_add_test(tc, test_json_dump_large_and_scalars);
    tcase_add_test(tc, test_json_path_lookup);
    tcase_add_test(tc, test_json_object_ensure);
    tcase_add_test(tc, test_json_equal_numbers_and_order);
    tcase_add_test(tc, test_json_equal_strings_with_nul);
    tcase_add_test(tc, test_json_utf8_cut_at_character_boundary);
    tcase_add_test(tc, test_json_msgf_cuts_at_character_boundary);
    tcase_add_test(tc, test_json_utf8_sanitize);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(json_suite());
}
