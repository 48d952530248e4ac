/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/jstream.h: the elements of the array at the path and the
 * other members arrive the same whatever the pieces the document is fed
 * in; the envelope is as strict as the scanner (duplicates, syntax, depth);
 * what is not an object or array along the path is handed over as a member.
 */
#include "kop/jstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

struct rec {
    char log[8192];
    size_t len;
};

static void app(struct rec *r, const char *p, size_t n)
{
    ck_assert(n < sizeof(r->log) - r->len);
    memcpy(r->log + r->len, p, n);
    r->len += n;
    r->log[r->len] = '\0';
}

static void apps(struct rec *r, const char *s)
{
    app(r, s, strlen(s));
}

static int on_member(void *ud, unsigned level, const char *key, const char *p, size_t n)
{
    char lv[16];
    snprintf(lv, sizeof(lv), "M%u ", level);
    apps(ud, lv);
    apps(ud, key);
    apps(ud, "=");
    app(ud, p, n);
    apps(ud, ";");
    return 0;
}

static int on_elem(void *ud, size_t idx, const char *p, size_t n, const struct kop_jscan *scan)
{
    char ix[32];
    snprintf(ix, sizeof(ix), "E%zu:", idx);
    size_t nm;
    kop_jscan_members(scan, &nm);
    apps(ud, ix);
    app(ud, p, n);
    apps(ud, ";");
    return 0;
}

/* Run doc through a stream fed in pieces cut at cuts[]; returns finish's
 * result, the log in *r. */
static int run(const char *const *path, const char *doc, size_t len, const size_t *cuts,
               size_t n_cuts, struct rec *r, char *err, size_t err_size)
{
    struct kop_jstream_options o = {
        .member_fn = on_member, .elem_fn = on_elem, .ud = r, .elem_scan_flags = KOP_JSCAN_MEMBERS};
    for (int i = 0; path[i]; i++)
        o.path[i] = path[i];
    struct kop_jstream *s;
    memset(r, 0, sizeof(*r));
    ck_assert_int_eq(kop_jstream_new(&o, &s), 0);
    size_t off = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        ck_assert_int_eq(kop_jstream_feed(s, doc + off, end - off), 0);
        off = end;
    }
    int rc = kop_jstream_finish(s);
    snprintf(err, err_size, "%s", kop_jstream_error(s));
    kop_jstream_free(s);
    return rc;
}

static const char *const list_path[] = {"items", NULL};
static const char *const review_path[] = {"request", "objects", NULL};

START_TEST(test_jstream_list_items_any_split)
{
    const char *doc =
        "{\"kind\":\"ServiceList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\""
        ":\"42\",\"continue\":\"c\\u0031\"},\"items\":[ {\"metadata\":{\"name\":\"a\"}} ,"
        "{\"metadata\":{\"name\":\"b\\\"]}\"},\"x\":[1,{\"y\":\"}\"}]}, 7 ,\"s\", null],"
        "\"tail\":true}";
    size_t len = strlen(doc);
    struct rec whole, part;
    char err[256];
    ck_assert_int_eq(run(list_path, doc, len, NULL, 0, &whole, err, sizeof(err)), 0);
    ck_assert_str_eq(
        whole.log, "M1 kind=\"ServiceList\";M1 apiVersion=\"v1\";M1 metadata={\"resourceVersion\":"
                   "\"42\",\"continue\":\"c\\u0031\"};E0:{\"metadata\":{\"name\":\"a\"}};E1:{"
                   "\"metadata\":{\"name\":\"b\\\"]}\"},\"x\":[1,{\"y\":\"}\"}]};E2:7;E3:\"s\";E4:"
                   "null;M1 tail=true;");
    for (size_t k = 0; k <= len; k++) {
        ck_assert_int_eq(run(list_path, doc, len, &k, 1, &part, err, sizeof(err)), 0);
        ck_assert_str_eq(part.log, whole.log);
    }
    size_t *cuts = malloc(len * sizeof(*cuts));
    for (size_t k = 0; k < len; k++)
        cuts[k] = k + 1;
    ck_assert_int_eq(run(list_path, doc, len, cuts, len - 1, &part, err, sizeof(err)), 0);
    ck_assert_str_eq(part.log, whole.log);
    free(cuts);
}
END_TEST

START_TEST(test_jstream_path_and_what_is_not_descended)
{
    struct rec r;
    char err[256];
    const char *doc =
        "{\"request\":{\"uid\":\"u\",\"objects\":[{\"a\":1}],\"x\":{}},\"response\":{}}";
    ck_assert_int_eq(run(review_path, doc, strlen(doc), NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.log, "M2 uid=\"u\";E0:{\"a\":1};M2 x={};M1 response={};");
    /* a path member that is not an object / not an array is a member */
    doc = "{\"request\":{\"objects\":{\"not\":\"a list\"}}}";
    ck_assert_int_eq(run(review_path, doc, strlen(doc), NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.log, "M2 objects={\"not\":\"a list\"};");
    doc = "{\"request\":7}";
    ck_assert_int_eq(run(review_path, doc, strlen(doc), NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.log, "M1 request=7;");
    /* the path only at its level: a nested "objects" is just a value */
    doc = "{\"objects\":[1],\"request\":{\"y\":{\"objects\":[2]}}}";
    ck_assert_int_eq(run(review_path, doc, strlen(doc), NULL, 0, &r, err, sizeof(err)), 0);
    ck_assert_str_eq(r.log, "M1 objects=[1];M2 y={\"objects\":[2]};");
}
END_TEST

struct bad {
    const char *doc;
    const char *err;
};

START_TEST(test_jstream_invalid_documents)
{
    static const struct bad cases[] = {
        {"", "unexpected end"},
        {"  ", "unexpected end"},
        {"[1]", "expected a JSON object"},
        {"12", "expected a JSON object"},
        {"{\"items\":[1,2]", "unexpected end"},
        {"{\"items\":[1,]}", "value expected"},
        {"{\"a\":}", "value expected"},
        {"{\"items\":[1 2]}", "',' or ']' expected"},
        {"{\"a\":1,\"a\":2,\"items\":[]}", "duplicate object key \"a\""},
        {"{\"a\\u0031\":1,\"a1\":2}", "duplicate object key"},
        {"{\"items\":[{\"k\":1,\"k\":2}]}", "duplicate object key"},
        {"{\"items\":[]} x", "end of file expected"},
        {"{\"items\":[\"\xff\"]}", "UTF-8"},
        {"{\"items\":[1e999]}", "overflow"},
        {"{\"items\" 1}", "':' expected"},
        {"{1:2}", "string or '}' expected"},
        {"{\"items\":[{]}", "string or '}' expected"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rec r;
        char err[256];
        int rc = run(list_path, cases[i].doc, strlen(cases[i].doc), NULL, 0, &r, err, sizeof(err));
        ck_assert_msg(rc == -EINVAL, "case %zu accepted", i);
        ck_assert_msg(strstr(err, cases[i].err) != NULL, "case %zu: %s", i, err);
        /* values inside one piece are checked where they lie, values cut by
         * a piece's end are collected first: the same answer, same byte */
        size_t len = strlen(cases[i].doc);
        size_t cuts[64];
        ck_assert(len <= sizeof(cuts) / sizeof(cuts[0]));
        for (size_t k = 0; k + 1 < len; k++)
            cuts[k] = k + 1;
        char err1[256];
        rc = run(list_path, cases[i].doc, len, cuts, len ? len - 1 : 0, &r, err1, sizeof(err1));
        ck_assert_msg(rc == -EINVAL, "case %zu accepted in 1-byte pieces", i);
        ck_assert_str_eq(err1, err);
    }
    /* depth is counted from the document's root */
    size_t levels = 2046, n = 0;
    char *doc = malloc(2 * levels + 64);
    n += (size_t)snprintf(doc, 16, "{\"items\":[");
    memset(doc + n, '[', levels);
    n += levels;
    memset(doc + n, ']', levels);
    n += levels;
    n += (size_t)snprintf(doc + n, 3, "]}");
    struct rec r;
    char err[256];
    ck_assert_int_eq(run(list_path, doc, n, NULL, 0, &r, err, sizeof(err)), 0);
    n = 0;
    n += (size_t)snprintf(doc, 16, "{\"items\":[");
    memset(doc + n, '[', levels + 1);
    n += levels + 1;
    memset(doc + n, ']', levels + 1);
    n += levels + 1;
    n += (size_t)snprintf(doc + n, 3, "]}");
    ck_assert_int_eq(run(list_path, doc, n, NULL, 0, &r, err, sizeof(err)), -EINVAL);
    ck_assert(strstr(err, "depth") != NULL);
    free(doc);
}
END_TEST

static int stop_at_two(void *ud, size_t idx, const char *p, size_t n, const struct kop_jscan *scan)
{
    (void)ud;
    (void)p;
    (void)n;
    (void)scan;
    return idx == 2 ? -ECANCELED : 0;
}

START_TEST(test_jstream_callback_error_stops)
{
    struct kop_jstream_options o = {.path = {"items", NULL}, .elem_fn = stop_at_two};
    struct kop_jstream *s;
    ck_assert_int_eq(kop_jstream_new(&o, &s), 0);
    const char *doc = "{\"items\":[1,2,3,4]}";
    ck_assert_int_eq(kop_jstream_feed(s, doc, strlen(doc)), -ECANCELED);
    kop_jstream_free(s);
    struct kop_jstream_options none = {0};
    ck_assert_int_eq(kop_jstream_new(&none, &s), -EINVAL);
}
END_TEST

START_TEST(test_jstream_max_value)
{
    struct rec r;
    struct kop_jstream_options o = {
        .path = {"items", NULL}, .elem_fn = on_elem, .ud = &r, .max_value = 8};
    struct kop_jstream *s;
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(kop_jstream_new(&o, &s), 0);
    const char *doc = "{\"items\":[\"short\",\"much too long\",1]}";
    for (size_t i = 0; doc[i]; i++) /* in 1-byte pieces: the limit holds across them */
        ck_assert_int_eq(kop_jstream_feed(s, doc + i, 1), 0);
    ck_assert_int_eq(kop_jstream_finish(s), -E2BIG);
    ck_assert_str_eq(r.log, "E0:\"short\";");
    ck_assert(strstr(kop_jstream_error(s), "larger than 8 bytes") != NULL);
    ck_assert_uint_eq(kop_jstream_memory(s), 0);
    kop_jstream_free(s);
    /* the same in one piece, where every value lies whole in the input */
    memset(&r, 0, sizeof(r));
    ck_assert_int_eq(kop_jstream_new(&o, &s), 0);
    ck_assert_int_eq(kop_jstream_feed(s, doc, strlen(doc)), 0);
    ck_assert_int_eq(kop_jstream_finish(s), -E2BIG);
    ck_assert_str_eq(r.log, "E0:\"short\";");
    ck_assert(strstr(kop_jstream_error(s), "larger than 8 bytes") != NULL);
    kop_jstream_free(s);
}
END_TEST

static Suite *jstream_suite(void)
{
    Suite *s = suite_create("jstream");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_jstream_list_items_any_split);
    tcase_add_test(tc, test_jstream_path_and_what_is_not_descended);
    tcase_add_test(tc, test_jstream_invalid_documents);
    tcase_add_test(tc, test_jstream_callback_error_stops);
    tcase_add_test(tc, test_jstream_max_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(jstream_suite());
}
