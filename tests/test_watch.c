/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the watch-stream parser: every split point of a multi-event
 * stream, CRLF and blank lines, 1 MiB and 16 MiB lines, bookmarks, ERROR
 * events, garbage and over-long lines, and the recorded apiserver vectors.
 */
#include "kop/watch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

struct rec {
    int n;
    enum kop_watch_type types[64];
    char rv[64][32];
    char name[64][64];
    int code[64];
    char reason[64][32];
    size_t objsize[64];
};

static int record(void *ud, const struct kop_watch_event *ev)
{
    struct rec *r = ud;
    if (r->n >= 64)
        return -ENOSPC;
    int i = r->n++;
    r->types[i] = ev->type;
    snprintf(r->rv[i], sizeof(r->rv[i]), "%s", ev->resource_version ? ev->resource_version : "");
    const char *name =
        json_string_value(json_object_get(json_object_get(ev->object, "metadata"), "name"));
    snprintf(r->name[i], sizeof(r->name[i]), "%s", name ? name : "");
    r->code[i] = ev->code;
    snprintf(r->reason[i], sizeof(r->reason[i]), "%s", ev->reason ? ev->reason : "");
    json_t *data = json_object_get(ev->object, "data");
    r->objsize[i] = json_string_length(json_object_get(data, "big"));
    return 0;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}"
    "\r\n"
    "\n"
    "  \r\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":"
    "{\"resourceVersion\":\"15\",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"
    "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"16\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
    "\"status\":\"Failure\",\"message\":\"too old resource version: 5 (16)\",\"reason\":"
    "\"Expired\",\"code\":410}}\n";

static void check_stream(const struct rec *r)
{
    ck_assert_int_eq(r->n, 5);
    ck_assert_int_eq(r->types[0], KOP_WATCH_ADDED);
    ck_assert_str_eq(r->name[0], "a");
    ck_assert_str_eq(r->rv[0], "10");
    ck_assert_int_eq(r->types[1], KOP_WATCH_MODIFIED);
    ck_assert_str_eq(r->rv[1], "11");
    ck_assert_int_eq(r->types[2], KOP_WATCH_BOOKMARK);
    ck_assert_str_eq(r->rv[2], "15");
    ck_assert_int_eq(r->types[3], KOP_WATCH_DELETED);
    ck_assert_int_eq(r->types[4], KOP_WATCH_ERROR);
    ck_assert_int_eq(r->code[4], 410);
    ck_assert_str_eq(r->reason[4], "Expired");
}

START_TEST(test_watch_whole_stream)
{
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    struct rec r = {0};
    ck_assert_int_eq(kop_watch_parser_feed(p, stream, strlen(stream), record, &r), 0);
    ck_assert_int_eq(kop_watch_parser_finish(p, record, &r), 0);
    check_stream(&r);
    kop_watch_parser_free(p);
}
END_TEST

START_TEST(test_watch_every_split_point)
{
    size_t len = strlen(stream);
    for (size_t cut = 0; cut <= len; cut++) {
        struct kop_watch_parser *p = kop_watch_parser_new(0);
        struct rec r = {0};
        ck_assert_int_eq(kop_watch_parser_feed(p, stream, cut, record, &r), 0);
        ck_assert_int_eq(kop_watch_parser_feed(p, stream + cut, len - cut, record, &r), 0);
        ck_assert_int_eq(kop_watch_parser_pending(p), 0);
        check_stream(&r);
        kop_watch_parser_free(p);
    }
    /* Byte by byte. */
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    struct rec r = {0};
    for (size_t i = 0; i < len; i++)
        ck_assert_int_eq(kop_watch_parser_feed(p, stream + i, 1, record, &r), 0);
    check_stream(&r);
    kop_watch_parser_free(p);
}
END_TEST

static char *big_event(size_t payload, size_t *ret_len)
{
    static const char head[] = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\","
                               "\"resourceVersion\":\"7\"},\"data\":{\"big\":\"";
    static const char tail[] = "\"}}}\n";
    size_t n = strlen(head) + payload + strlen(tail);
    char *s = malloc(n + 1);
    ck_assert_ptr_nonnull(s);
    memcpy(s, head, strlen(head));
    memset(s + strlen(head), 'x', payload);
    memcpy(s + strlen(head) + payload, tail, strlen(tail) + 1);
    *ret_len = n;
    return s;
}

START_TEST(test_watch_long_lines)
{
    size_t sizes[] = {(size_t)1 << 20, (size_t)16 << 20};
    for (int k = 0; k < 2; k++) {
        size_t len;
        char *ev = big_event(sizes[k], &len);
        struct kop_watch_parser *p = kop_watch_parser_new(0);
        struct rec r = {0};
        /* 16 KiB reads, as curl delivers them. */
        for (size_t off = 0; off < len; off += 16384) {
            size_t n = len - off < 16384 ? len - off : 16384;
            ck_assert_int_eq(kop_watch_parser_feed(p, ev + off, n, record, &r), 0);
        }
        ck_assert_int_eq(r.n, 1);
        ck_assert_str_eq(r.name[0], "big");
        ck_assert_uint_eq(r.objsize[0], sizes[k]);
        /* Followed by a small one in the same read as the big one's end. */
        ck_assert_int_eq(kop_watch_parser_feed(p, stream, strlen(stream), record, &r), 0);
        ck_assert_int_eq(r.n, 6);
        kop_watch_parser_free(p);
        free(ev);
    }
}
END_TEST

START_TEST(test_watch_line_too_long)
{
    size_t len;
    char *ev = big_event(4096, &len);
    struct kop_watch_parser *p = kop_watch_parser_new(1024);
    struct rec r = {0};
    /* In one piece (line complete) and in pieces (line still open). */
    ck_assert_int_eq(kop_watch_parser_feed(p, ev, len, record, &r), -EMSGSIZE);
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0; off += 100)
        rc = kop_watch_parser_feed(p, ev + off, len - off < 100 ? len - off : 100, record, &r);
    ck_assert_int_eq(rc, -EMSGSIZE);
    ck_assert_int_eq(r.n, 0);
    kop_watch_parser_free(p);
    free(ev);
}
END_TEST

START_TEST(test_watch_garbage)
{
    static const char *bad[] = {
        "not json at all\n",
        "{\"type\":\"ADDED\"}\n",                               /* no object */
        "{\"type\":\"ADDED\",\"object\":\"x\"}\n",              /* object not an object */
        "{\"type\":\"EXPLODED\",\"object\":{}}\n",              /* unknown type */
        "{\"type\":7,\"object\":{}}\n",                         /* type not a string */
        "[1,2,3]\n",                                            /* not an object */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}}\n", /* trailing junk */
        "\x01\x02\xff\xfe\n",
        /* a duplicate key (jansson kept the last one) */
        "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"name\":\"b\"}}}\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct kop_watch_parser *p = kop_watch_parser_new(0);
        struct rec r = {0};
        /* A good event first: it is delivered before the error. */
        const char *good = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"g\"}}}\n";
        ck_assert_int_eq(kop_watch_parser_feed(p, good, strlen(good), record, &r), 0);
        ck_assert_int_eq(kop_watch_parser_feed(p, bad[i], strlen(bad[i]), record, &r), -EBADMSG);
        ck_assert_int_eq(r.n, 1);
        kop_watch_parser_free(p);
    }
    /* A truncated last line is reported by finish(). */
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    struct rec r = {0};
    ck_assert_int_eq(kop_watch_parser_feed(p, stream, 30, record, &r), 0);
    ck_assert_int_eq(kop_watch_parser_finish(p, record, &r), -EBADMSG);
    ck_assert_int_eq(r.n, 0);
    /* A complete last line without '\n' is accepted. */
    const char *last = "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"z\"}}}";
    ck_assert_int_eq(kop_watch_parser_feed(p, last, strlen(last), record, &r), 0);
    ck_assert_int_eq(kop_watch_parser_finish(p, record, &r), 0);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.types[0], KOP_WATCH_DELETED);
    kop_watch_parser_free(p);
}
END_TEST

static int check_no_managed_fields(void *ud, const struct kop_watch_event *ev)
{
    int *n = ud;
    const json_t *md = json_object_get(ev->object, "metadata");
    ck_assert_ptr_nonnull(json_object_get(md, "name"));
    ck_assert_ptr_null(json_object_get(md, "managedFields"));
    ck_assert_ptr_nonnull(json_object_get(ev->object, "managedFields")); /* not on the path */
    ++*n;
    return 0;
}

/* A parser told to leave metadata.managedFields out never decodes it (its
 * bytes are still validated); the path is bounded. */
START_TEST(test_watch_drop_member)
{
    static const char *const mf[] = {"metadata", "managedFields", NULL};
    static const char *const deep[] = {"a", "b", "c", "d", "e", "f", "g", NULL};
    const char *line = "{\"type\":\"ADDED\",\"object\":{\"managedFields\":1,\"metadata\":{"
                       "\"managedFields\":[{\"manager\":\"m\",\"fieldsV1\":{\"f:x\":{}}}],"
                       "\"name\":\"a\"}}}\n";
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    ck_assert_int_eq(kop_watch_parser_drop(p, deep), -EINVAL);
    ck_assert_int_eq(kop_watch_parser_drop(p, mf), 0);
    int n = 0;
    ck_assert_int_eq(kop_watch_parser_feed(p, line, strlen(line), check_no_managed_fields, &n), 0);
    ck_assert_int_eq(n, 1);
    /* still validated: invalid JSON inside the member left out */
    const char *bad = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"managedFields\":[1,]}}}\n";
    ck_assert_int_eq(kop_watch_parser_feed(p, bad, strlen(bad), check_no_managed_fields, &n),
                     -EBADMSG);
    kop_watch_parser_free(p);
}
END_TEST

static int stop_at_second(void *ud, const struct kop_watch_event *ev)
{
    int *n = ud;
    (void)ev;
    return ++*n == 2 ? -ECANCELED : 0;
}

START_TEST(test_watch_callback_error_stops)
{
    struct kop_watch_parser *p = kop_watch_parser_new(0);
    int n = 0;
    ck_assert_int_eq(kop_watch_parser_feed(p, stream, strlen(stream), stop_at_second, &n),
                     -ECANCELED);
    ck_assert_int_eq(n, 2);
    kop_watch_parser_free(p);
}
END_TEST

START_TEST(test_watch_vectors)
{
    /* Real apiserver watch bodies: a CR watch and the bookmark of a
     * sendInitialEvents watch. */
    const char *names[] = {"cr_watch_added_v1.36.jsonl",
                           "watch_pods_sendInitialEvents_v1.36_cut.jsonl"};
    for (int k = 0; k < 2; k++) {
        char rel[256];
        snprintf(rel, sizeof(rel), "vectors/apiserver/%s", names[k]);
        char *path = kop_test_data_path(rel);
        size_t len;
        char *body = kop_test_read_file(path, &len);
        free(path);
        ck_assert_ptr_nonnull(body);
        struct kop_watch_parser *p = kop_watch_parser_new(0);
        struct rec r = {0};
        for (size_t off = 0; off < len; off += 97)
            ck_assert_int_eq(
                kop_watch_parser_feed(p, body + off, len - off < 97 ? len - off : 97, record, &r),
                0);
        ck_assert_int_eq(kop_watch_parser_finish(p, record, &r), 0);
        ck_assert_int_eq(r.n, 2);
        if (k == 0) {
            ck_assert_str_eq(r.name[1], "fb2");
            ck_assert_str_eq(r.rv[1], "623");
        } else {
            ck_assert_int_eq(r.types[1], KOP_WATCH_BOOKMARK);
        }
        kop_watch_parser_free(p);
        free(body);
    }
}
END_TEST

START_TEST(test_watch_decode_status_fields)
{
    struct kop_watch_event ev;
    const char *line = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":99999}}";
    ck_assert_int_eq(kop_watch_event_decode(line, strlen(line), &ev), 0);
    ck_assert_int_eq(ev.type, KOP_WATCH_ERROR);
    ck_assert_int_eq(ev.code, 0); /* out of range is ignored */
    ck_assert_ptr_null(ev.message);
    kop_watch_event_clear(&ev);
    ck_assert_str_eq(kop_watch_type_name(KOP_WATCH_BOOKMARK), "BOOKMARK");
}
END_TEST

static Suite *watch_suite(void)
{
    Suite *s = suite_create("watch");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_watch_whole_stream);
    tcase_add_test(tc, test_watch_every_split_point);
    tcase_add_test(tc, test_watch_long_lines);
    tcase_add_test(tc, test_watch_line_too_long);
    tcase_add_test(tc, test_watch_garbage);
    tcase_add_test(tc, test_watch_drop_member);
    tcase_add_test(tc, test_watch_callback_error_stops);
    tcase_add_test(tc, test_watch_vectors);
    tcase_add_test(tc, test_watch_decode_status_fields);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(watch_suite());
}
