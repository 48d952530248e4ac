/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/jscan.h: the strict scanner accepts and rejects exactly
 * what jansson does (hand-picked edge cases and a seeded random
 * differential run over mutated documents), reports member spans, and stays
 * linear on objects with many keys.
 */
#include "kop/jscan.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "testutil.h"

static bool jansson_accepts(const char *p, size_t n)
{
    json_error_t e;
    json_t *v = json_loadb(p, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    bool ok = v != NULL;
    json_decref(v);
    return ok;
}

/*
 * The one known difference: jansson drops a NUL byte that directly follows
 * a number or a literal ("[1\0]" parses as [1]); the scanner rejects every
 * NUL outside a string, as RFC 8259 and Go's encoding/json do.
 */
static void same_verdict(struct kop_jscan *s, const char *p, size_t n)
{
    bool want = jansson_accepts(p, n) && memchr(p, '\0', n) == NULL;
    int r = kop_jscan_value(s, p, n, 0, KOP_JSCAN_MEMBERS);
    ck_assert_msg((r == 0) == want, "jscan %s, jansson %s: %.*s (%s)",
                  r == 0 ? "accepts" : "rejects", want ? "accepts" : "rejects",
                  (int)(n > 200 ? 200 : n), p, kop_jscan_error(s, NULL));
}

static const char *const cases[] = {
    "{}",
    "[]",
    "{\"a\":1}",
    "[1,2,3]",
    "  {\"a\" : [ true , false , null ] }  ",
    "1",
    "\"x\"",
    "-0",
    "0.5",
    "1e5",
    "1E+5",
    "1e-400",
    "1e400",
    "-1e400",
    "1.5e308",
    "1.8e308",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "-9223372036854775809",
    "01",
    "-",
    "1.",
    ".5",
    "1e",
    "1e+",
    "+1",
    "-01",
    "00",
    "[1,]",
    "{\"a\":1,}",
    "[,1]",
    "{\"a\"}",
    "{\"a\":}",
    "{a:1}",
    "{'a':1}",
    "[1 2]",
    "[1]]",
    "{\"a\":1}}",
    "[",
    "{",
    "\"",
    "\"abc",
    "tru",
    "truex",
    "nul",
    "[true false]",
    "\"\\u0000\"",
    "\"\\u0041\"",
    "\"\\ud83d\\ude00\"",
    "\"\\ud83d\"",
    "\"\\ude00\"",
    "\"\\ud83dx\"",
    "\"\\ud83d\\u0041\"",
    "\"\\x\"",
    "\"\\u12\"",
    "\"\\u12G4\"",
    "\"a\tb\"",
    "\"a\nb\"",
    "\"\x7f\"",
    "\"\xc3\xa9\"",
    "\"\xc3\"",
    "\"\xc0\x80\"",
    "\"\xed\xa0\x80\"",
    "\"\xf4\x90\x80\x80\"",
    "\"\xf0\x9f\x98\x80\"",
    "\"\xe2\x82\"",
    "\"\xff\"",
    "{\"a\":1,\"a\":2}",
    "{\"a\":1,\"\\u0061\":2}",
    "{\"a\":{\"b\":1,\"b\":1}}",
    "[{\"a\":1},{\"a\":1}]",
    "{\"a\":1,\"b\":{\"a\":1}}",
    "",
    "   ",
    "[1\0]",
    "\xef\xbb\xbf{}",
    "{}x",
    "{} {}",
    "[1]\x00",
    "[\"a\x00\"]",
    "{\"\":1,\"\":2}",
    "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"a\":10}",
    "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10}",
    "[1.0,-0.0,2.5e-3,1e1,123456789012345678901234567890.5]",
};

START_TEST(test_jscan_edge_cases_match_jansson)
{
    struct kop_jscan *s = kop_jscan_new();
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        same_verdict(s, cases[i], strlen(cases[i]));
    /* NUL inside the buffer (strlen would stop there) */
    same_verdict(s, "[1]\0", 4);
    same_verdict(s, "[\"a\0\"]", 6);
    kop_jscan_free(s);
}
END_TEST

static char *nested(size_t levels, const char *inner, size_t *ret_len)
{
    size_t il = strlen(inner);
    size_t n = 2 * levels + il;
    char *b = malloc(n + 1);
    ck_assert_ptr_nonnull(b);
    memset(b, '[', levels);
    memcpy(b + levels, inner, il);
    memset(b + levels + il, ']', levels);
    b[n] = '\0';
    *ret_len = n;
    return b;
}

START_TEST(test_jscan_depth_limit_matches_jansson)
{
    struct kop_jscan *s = kop_jscan_new();
    size_t n;
    for (size_t levels = 2040; levels <= 2052; levels++) {
        char *b = nested(levels, "", &n);
        same_verdict(s, b, n);
        free(b);
        b = nested(levels, "1", &n);
        same_verdict(s, b, n);
        free(b);
    }
    /* far past the limit: rejected without recursion */
    char *b = nested(1000000, "", &n);
    ck_assert_int_eq(kop_jscan_value(s, b, n, 0, 0), -EINVAL);
    ck_assert(strstr(kop_jscan_error(s, NULL), "depth") != NULL);
    free(b);
    /* base_depth counts the containers around the value */
    b = nested(2040, "", &n);
    ck_assert_int_eq(kop_jscan_value(s, b, n, 8, 0), 0);
    ck_assert_int_eq(kop_jscan_value(s, b, n, 9, 0), -EINVAL);
    free(b);
    kop_jscan_free(s);
}
END_TEST

/*
 * The string scan judges 8 bytes at a time before it looks at single
 * bytes: every byte value at every position of a word (and of the tail
 * after the last whole word) gets jansson's verdict, alone and with a
 * valid two-byte UTF-8 sequence or an escape before it in the word.
 */
START_TEST(test_jscan_string_every_byte_every_lane)
{
    struct kop_jscan *s = kop_jscan_new();
    ck_assert_ptr_nonnull(s);
    static const char *const lead[] = {"", "\xc3\xa9", "\\n"};
    char doc[64];
    for (size_t l = 0; l < sizeof(lead) / sizeof(lead[0]); l++) {
        for (size_t len = 1; len <= 40; len++) { /* two 16-byte lanes and a tail */
            for (size_t pos = 0; pos < len; pos++) {
                for (unsigned b = 1; b < 256; b++) {
                    size_t n = 0;
                    doc[n++] = '"';
                    size_t ll = strlen(lead[l]);
                    memcpy(doc + n, lead[l], ll);
                    n += ll;
                    for (size_t k = 0; k < len; k++)
                        doc[n++] = k == pos ? (char)b : 'a';
                    doc[n++] = '"';
                    same_verdict(s, doc, n);
                }
            }
        }
    }
    kop_jscan_free(s);
}
END_TEST

/* kop_jscan_noescape_run (the string writer's fast path) against the
 * byte-by-byte rule, every byte value at every position of two lanes and a
 * tail. */
START_TEST(test_jscan_noescape_run_every_byte_every_lane)
{
    char buf[48];
    for (size_t len = 0; len <= 40; len++) {
        for (size_t pos = 0; pos < len; pos++) {
            for (unsigned b = 1; b < 256; b++) {
                for (size_t k = 0; k < len; k++)
                    buf[k] = k == pos ? (char)b : (char)('a' + k % 26);
                size_t want = 0;
                while (want < len && (unsigned char)buf[want] >= 0x20 && buf[want] != '"' &&
                       buf[want] != '\\')
                    want++;
                ck_assert_uint_eq(kop_jscan_noescape_run(buf, len), want);
            }
        }
        memset(buf, 'x', len);
        ck_assert_uint_eq(kop_jscan_noescape_run(buf, len), len);
    }
}
END_TEST

START_TEST(test_jscan_members)
{
    const char *doc =
        "{ \"apiVersion\":\"v1\", \"metadata\" : {\"name\":\"x\",\"a\\u0062\":[1,{\"z\":2}]},"
        "\"spec\":{\"replicas\":3}, \"list\":[{\"q\":1}], \"n\":null }";
    struct kop_jscan *s = kop_jscan_new();
    size_t n;
    ck_assert_int_eq(kop_jscan_value(s, doc, strlen(doc), 0, KOP_JSCAN_MEMBERS), 0);
    const struct kop_jscan_member *m = kop_jscan_members(s, &n);
    ck_assert_uint_eq(n, 8);
    const char *want[][3] = {
        {"1", "apiVersion", "\"v1\""},
        {"1", "metadata", "{\"name\":\"x\",\"a\\u0062\":[1,{\"z\":2}]}"},
        {"2", "name", "\"x\""},
        {"2", "ab", "[1,{\"z\":2}]"},
        {"1", "spec", "{\"replicas\":3}"},
        {"2", "replicas", "3"},
        {"1", "list", "[{\"q\":1}]"},
        {"1", "n", "null"},
    };
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(m[i].level, (unsigned)(want[i][0][0] - '0'));
        ck_assert_uint_eq(m[i].key_len, strlen(want[i][1]));
        ck_assert(memcmp(m[i].key, want[i][1], m[i].key_len) == 0);
        ck_assert_uint_eq(m[i].val_len, strlen(want[i][2]));
        ck_assert(memcmp(doc + m[i].val_off, want[i][2], m[i].val_len) == 0);
        ck_assert_int_eq(doc[m[i].key_off], '"');
    }
    ck_assert_uint_eq(m[2].parent, 1);
    ck_assert_uint_eq(m[3].parent, 1);
    ck_assert_uint_eq(m[5].parent, 4);
    ck_assert_uint_eq(kop_jscan_values(s), 14);
    kop_jscan_free(s);
}
END_TEST

START_TEST(test_jscan_prefix)
{
    struct kop_jscan *s = kop_jscan_new();
    size_t len = 0, n;
    /* the value ends inside the input: its length, its members as a whole
     * scan of those bytes records them */
    const char *doc = "{\"a\":{\"b\":\"]}\"},\"c\\u0064\":[1]} ,{\"next\":1}";
    ck_assert_int_eq(kop_jscan_prefix(s, doc, strlen(doc), 0, KOP_JSCAN_MEMBERS, &len), 0);
    ck_assert_uint_eq(len, strlen("{\"a\":{\"b\":\"]}\"},\"c\\u0064\":[1]}"));
    const struct kop_jscan_member *m = kop_jscan_members(s, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(m[2].key_len, 2);
    ck_assert(memcmp(m[2].key, "cd", 2) == 0);
    ck_assert_uint_eq(m[2].val_off + m[2].val_len, len - 1);
    ck_assert_int_eq(kop_jscan_prefix(s, "\"x\\\"\",", 6, 0, 0, &len), 0);
    ck_assert_uint_eq(len, 5);
    /* not ended within n: refused, like the bytes alone */
    ck_assert_int_eq(kop_jscan_prefix(s, doc, 20, 0, 0, &len), -EINVAL);
    ck_assert_int_eq(kop_jscan_prefix(s, "[1,2", 4, 0, 0, &len), -EINVAL);
    ck_assert_int_eq(kop_jscan_prefix(s, "\"ab", 3, 0, 0, &len), -EINVAL);
    /* invalid, and bare scalars (no end of their own) */
    ck_assert_int_eq(kop_jscan_prefix(s, "{\"k\":1,\"k\":2}", 15, 0, 0, &len), -EINVAL);
    ck_assert(strstr(kop_jscan_error(s, NULL), "duplicate") != NULL);
    ck_assert_int_eq(kop_jscan_prefix(s, "[1 2]", 5, 0, 0, &len), -EINVAL);
    ck_assert_int_eq(kop_jscan_prefix(s, "12,", 3, 0, 0, &len), -EINVAL);
    ck_assert_int_eq(kop_jscan_prefix(s, " {}", 3, 0, 0, &len), -EINVAL);
    ck_assert_int_eq(kop_jscan_prefix(s, "", 0, 0, 0, &len), -EINVAL);
    /* the depth counts from base_depth */
    ck_assert_int_eq(kop_jscan_prefix(s, "[[]]", 4, KOP_JSCAN_MAX_DEPTH - 2, 0, &len), 0);
    ck_assert_int_eq(kop_jscan_prefix(s, "[[]]", 4, KOP_JSCAN_MAX_DEPTH - 1, 0, &len), -EINVAL);
    kop_jscan_free(s);
}
END_TEST

START_TEST(test_jscan_string_unescapes)
{
    char *out;
    size_t len;
    const char *tok = "\"a\\n\\u00e9\\ud83d\\ude00\\/\"";
    ck_assert_int_eq(kop_jscan_string(tok, strlen(tok), &out, &len), 0);
    ck_assert_str_eq(out, "a\n\xc3\xa9\xf0\x9f\x98\x80/");
    ck_assert_uint_eq(len, strlen(out));
    free(out);
    ck_assert_int_eq(kop_jscan_string("x", 1, &out, &len), -EINVAL);
}
END_TEST

START_TEST(test_jscan_many_keys_linear)
{
    /* 200,000 distinct keys in one object, then the same with one duplicate
     * at the very end: both answered (a quadratic check would not finish). */
    size_t nkeys = 200000, cap = nkeys * 16 + 64, off = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    b[off++] = '{';
    for (size_t i = 0; i < nkeys; i++)
        off += (size_t)snprintf(b + off, cap - off, "%s\"k%zu\":0", i ? "," : "", i);
    size_t before_dup = off;
    b[off++] = '}';
    struct kop_jscan *s = kop_jscan_new();
    ck_assert_int_eq(kop_jscan_value(s, b, off, 0, 0), 0);
    off = before_dup;
    off += (size_t)snprintf(b + off, cap - off, ",\"k77\":1}");
    ck_assert_int_eq(kop_jscan_value(s, b, off, 0, 0), -EINVAL);
    ck_assert(strstr(kop_jscan_error(s, NULL), "duplicate") != NULL);
    kop_jscan_free(s);
    free(b);
}
END_TEST

START_TEST(test_jscan_decode_bounded)
{
    /* items past the bound stay as null, the length is kept */
    const char *doc = "{\"a\":[1,2,3,4,5],\"b\":{\"c\":[[1,2,3],\"x\"]}}";
    int err = 0;
    json_t *v = kop_jscan_decode_bounded(doc, strlen(doc), 2, 0, &err);
    ck_assert_ptr_nonnull(v);
    json_t *a = json_object_get(v, "a");
    ck_assert_uint_eq(json_array_size(a), 5);
    ck_assert_int_eq(json_integer_value(json_array_get(a, 1)), 2);
    ck_assert(json_is_null(json_array_get(a, 2)));
    ck_assert(json_is_null(json_array_get(a, 4)));
    json_t *c = json_object_get(json_object_get(v, "b"), "c");
    ck_assert_uint_eq(json_array_size(json_array_get(c, 0)), 3);
    ck_assert(json_is_null(json_array_get(json_array_get(c, 0), 2)));
    json_decref(v);
    /* unbounded: the same as jansson */
    v = kop_jscan_decode_bounded(doc, strlen(doc), 0, 0, &err);
    json_t *j = json_loads(doc, 0, NULL);
    ck_assert(json_equal(v, j));
    json_decref(v);
    json_decref(j);
    /* 100,000 empty objects would cost ~25 MB as jansson values: refused */
    size_t n = 100000, off = 0;
    char *big = malloc(3 * n + 8);
    big[off++] = '[';
    for (size_t i = 0; i < n; i++) {
        memcpy(big + off, i ? ",{}" : "{}", i ? 3 : 2);
        off += i ? 3 : 2;
    }
    big[off++] = ']';
    ck_assert_ptr_null(kop_jscan_decode_bounded(big, off, 0, 16u << 20, &err));
    ck_assert_int_eq(err, -E2BIG);
    /* the same with items bounded: only 10 objects are built */
    v = kop_jscan_decode_bounded(big, off, 10, 16u << 20, &err);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(json_array_size(v), n);
    json_decref(v);
    free(big);
}
END_TEST

/* A small deterministic PRNG (xorshift64*). */
static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static const char *const seeds[] = {
    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{\"name\":"
    "\"a\",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\\u00e9\"}},\"spec\":{\"replicas\":3,"
    "\"image\":\"nginx:1.14.2\",\"port\":80},\"status\":{\"conditions\":[{\"type\":\"A\"}]}}",
    "[1,-2.5e3,true,false,null,\"\\ud83d\\ude00\",{\"a\":[{},[]]}]",
    "{\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\",\"b\":9223372036854775807,\"c\":1e308}",
};

/* The member a path names is left out, wherever it sits among its
 * siblings; a key of the same name elsewhere, or a path that meets
 * something other than an object, leaves everything in. */
START_TEST(test_jscan_decode_without)
{
    static const char *const mf[] = {"metadata", "managedFields", NULL};
    static const char *const none[] = {NULL};
    static const struct {
        const char *in, *want;
    } drops[] = {
        {"{\"metadata\":{\"name\":\"a\",\"managedFields\":[{\"f:x\":{}}],\"uid\":\"u\"}}",
         "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"}}"},
        {"{ \"metadata\" : { \"managedFields\" : [ ] , \"name\" : \"a\" } , \"x\":1}",
         "{\"metadata\":{\"name\":\"a\"},\"x\":1}"},
        {"{\"metadata\":{\"name\":\"a\",\"managedFields\":\"s,}]\\\"\"}}",
         "{\"metadata\":{\"name\":\"a\"}}"},
        {"{\"metadata\":{\"managedFields\":null}}", "{\"metadata\":{}}"},
        /* same key elsewhere: kept */
        {"{\"managedFields\":1,\"spec\":{\"managedFields\":2},\"metadata\":{}}",
         "{\"managedFields\":1,\"spec\":{\"managedFields\":2},\"metadata\":{}}"},
        /* the path meets an array or a scalar: nothing left out */
        {"{\"metadata\":[{\"managedFields\":1}]}", "{\"metadata\":[{\"managedFields\":1}]}"},
        {"{\"metadata\":3}", "{\"metadata\":3}"},
        {"[1,2]", "[1,2]"},
    };
    struct kop_jscan *s = kop_jscan_new();
    for (size_t i = 0; i < sizeof(drops) / sizeof(drops[0]); i++) {
        size_t n = strlen(drops[i].in);
        ck_assert_int_eq(kop_jscan_value(s, drops[i].in, n, 0, 0), 0);
        json_t *got = kop_jscan_decode_without(drops[i].in, n, mf);
        json_t *want = json_loads(drops[i].want, 0, NULL);
        ck_assert_msg(got && want && json_equal(got, want), "case %zu", i);
        json_decref(got);
        json_decref(want);
        /* no path, an empty one: everything */
        json_t *all = kop_jscan_decode_without(drops[i].in, n, NULL);
        json_t *all2 = kop_jscan_decode_without(drops[i].in, n, none);
        json_t *ref = json_loads(drops[i].in, 0, NULL);
        ck_assert(json_equal(all, ref) && json_equal(all2, ref));
        json_decref(all);
        json_decref(all2);
        json_decref(ref);
    }
    kop_jscan_free(s);
}
END_TEST

START_TEST(test_jscan_random_mutations_match_jansson)
{
    static const char alphabet[] =
        "{}[]\":,\\u0123456789abcdefE+-. tnrl\x00\x01\x7f\xc3\xa9\xed\xa0"
        "\xf0\x9f\xff";
    struct kop_jscan *s = kop_jscan_new();
    char buf[512];
    rng_state = 0x9e3779b97f4a7c15ULL;
    for (int iter = 0; iter < 200000; iter++) {
        const char *seed = seeds[rnd() % (sizeof(seeds) / sizeof(seeds[0]))];
        size_t n = strlen(seed);
        memcpy(buf, seed, n);
        int muts = 1 + (int)(rnd() % 3);
        for (int m = 0; m < muts; m++) {
            size_t pos = n ? rnd() % n : 0;
            switch (rnd() % 4) {
            case 0: /* replace */
                buf[pos] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                break;
            case 1: /* delete */
                if (n) {
                    memmove(buf + pos, buf + pos + 1, n - pos - 1);
                    n--;
                }
                break;
            case 2: /* insert */
                if (n + 1 < sizeof(buf)) {
                    memmove(buf + pos + 1, buf + pos, n - pos);
                    buf[pos] = alphabet[rnd() % (sizeof(alphabet) - 1)];
                    n++;
                }
                break;
            default: /* duplicate a slice */
                if (n + 16 < sizeof(buf)) {
                    size_t from = rnd() % n, len = 1 + rnd() % 15;
                    if (from + len > n)
                        len = n - from;
                    memmove(buf + pos + len, buf + pos, n - pos);
                    memmove(buf + pos, buf + (from >= pos ? from + len : from), len);
                    n += len;
                }
                break;
            }
        }
        same_verdict(s, buf, n);
    }
    kop_jscan_free(s);
}
END_TEST

static Suite *jscan_suite(void)
{
    Suite *s = suite_create("jscan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_jscan_edge_cases_match_jansson);
    tcase_add_test(tc, test_jscan_depth_limit_matches_jansson);
    tcase_add_test(tc, test_jscan_string_every_byte_every_lane);
    tcase_add_test(tc, test_jscan_noescape_run_every_byte_every_lane);
    tcase_add_test(tc, test_jscan_members);
    tcase_add_test(tc, test_jscan_prefix);
    tcase_add_test(tc, test_jscan_string_unescapes);
    tcase_add_test(tc, test_jscan_many_keys_linear);
    tcase_add_test(tc, test_jscan_decode_bounded);
    tcase_add_test(tc, test_jscan_decode_without);
    tcase_add_test(tc, test_jscan_random_mutations_match_jansson);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(jscan_suite());
}
