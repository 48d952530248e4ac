/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop/log.h: JSON lines with the right keys, order and escaping,
 * the text format, level filtering, truncation of huge messages, NULL
 * safety, and that lines written by concurrent threads never interleave.
 */
#include "kop/log.h"
#include "kop/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

/* Everything written to a pipe, read by a thread so writers never block. */
struct capture {
    int rfd, wfd;
    pthread_t reader;
    char *buf;
    size_t len, cap;
};

static void *reader_main(void *arg)
{
    struct capture *c = arg;

    for (;;) {
        if (c->cap - c->len < 65536) {
            c->cap = c->cap * 2 + 65536;
            c->buf = realloc(c->buf, c->cap + 1);
            if (c->buf == NULL)
                abort();
        }
        ssize_t n = read(c->rfd, c->buf + c->len, c->cap - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        c->len += (size_t)n;
    }
    c->buf[c->len] = '\0';
    return NULL;
}

static void capture_start(struct capture *c, enum kop_log_level level, enum kop_log_format fmt)
{
    int fds[2];

    memset(c, 0, sizeof(*c));
    ck_assert_int_eq(pipe(fds), 0);
    c->rfd = fds[0];
    c->wfd = fds[1];
    ck_assert_int_eq(pthread_create(&c->reader, NULL, reader_main, c), 0);
    kop_log_setup(level, fmt, c->wfd);
}

/* Returns the captured text (owned by c, freed by capture_free). */
static const char *capture_finish(struct capture *c)
{
    kop_log_setup(KOP_LOG_INFO, KOP_LOG_FORMAT_JSON, 2);
    close(c->wfd);
    pthread_join(c->reader, NULL);
    close(c->rfd);
    return c->buf;
}

static void capture_free(struct capture *c)
{
    free(c->buf);
}

static json_t *parse_line(const char *line)
{
    json_error_t e;
    /* Parses the first line; the rest of the text is ignored. */
    json_t *v = json_loads(line, JSON_DISABLE_EOF_CHECK, &e);

    ck_assert_msg(json_is_object(v), "not a JSON object: %.300s (%s)", line, e.text);
    return v;
}

/* v's keys are exactly want[0..n), in that order. */
static void assert_keys(json_t *v, const char *const *want, size_t n)
{
    const char *key;
    json_t *val;
    size_t i = 0;

    json_object_foreach(v, key, val)
    {
        ck_assert_uint_lt(i, n);
        ck_assert_str_eq(key, want[i]);
        i++;
    }
    ck_assert_uint_eq(i, n);
}

START_TEST(test_log_json_keys_and_order)
{
    struct capture c;
    const char *out;
    json_t *fields = json_pack("{s:{s:s,s:s},s:s,s:i}", "MyResource", "name", "a", "namespace",
                               "ns", "reconcileID", "r-1", "attempt", 2);
    json_t *v;
    static const char *const order[] = {"ts",         "level",       "logger", "msg",
                                        "MyResource", "reconcileID", "attempt"};

    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    kop_log(KOP_LOG_INFO, "reconciler", "Reconciled", fields);
    out = capture_finish(&c);
    ck_assert_int_eq(out[strlen(out) - 1], '\n');
    ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);
    v = parse_line(out);
    assert_keys(v, order, 7);
    ck_assert_str_eq(json_string_value(json_object_get(v, "level")), "info");
    ck_assert_str_eq(json_string_value(json_object_get(v, "logger")), "reconciler");
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), "Reconciled");
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(v, "MyResource"), "namespace")), "ns");
    ck_assert_int_eq(json_integer_value(json_object_get(v, "attempt")), 2);
    /* ts is RFC 3339 UTC with microseconds: 2006-01-02T15:04:05.000000Z */
    const char *ts = json_string_value(json_object_get(v, "ts"));
    ck_assert_uint_eq(strlen(ts), 27);
    ck_assert_int_eq(ts[10], 'T');
    ck_assert_int_eq(ts[19], '.');
    ck_assert_int_eq(ts[26], 'Z');
    json_decref(v);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_json_escaping)
{
    struct capture c;
    const char *out;
    json_t *v;
    const char *msg = "quote \" backslash \\ newline \n tab \t ctl \x01 caf\xc3\xa9 \xe2\x82\xac";

    capture_start(&c, KOP_LOG_DEBUG, KOP_LOG_FORMAT_JSON);
    kop_log(KOP_LOG_WARN, "a\"b", msg, json_pack("{s:s}", "k\"\n", "v\n"));
    /* Invalid UTF-8 must not lose the line. */
    kop_log(KOP_LOG_ERROR, "x", "bad \xff\xfe utf8 \xc3", NULL);
    out = capture_finish(&c);
    /* Exactly two physical lines: embedded newlines are escaped. */
    const char *nl = strchr(out, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_ptr_eq(strchr(nl + 1, '\n'), out + strlen(out) - 1);
    v = parse_line(out);
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), msg);
    ck_assert_str_eq(json_string_value(json_object_get(v, "logger")), "a\"b");
    ck_assert_str_eq(json_string_value(json_object_get(v, "k\"\n")), "v\n");
    ck_assert_str_eq(json_string_value(json_object_get(v, "level")), "warn");
    json_decref(v);
    v = parse_line(nl + 1);
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")),
                     "bad \xef\xbf\xbd\xef\xbf\xbd utf8 \xef\xbf\xbd");
    ck_assert_str_eq(json_string_value(json_object_get(v, "level")), "error");
    json_decref(v);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_level_filter_and_null_safety)
{
    struct capture c;
    const char *out;
    json_t *v;

    capture_start(&c, KOP_LOG_WARN, KOP_LOG_FORMAT_JSON);
    ck_assert(!kop_log_enabled(KOP_LOG_INFO));
    ck_assert(kop_log_enabled(KOP_LOG_ERROR));
    /* Filtered out: the fields are still released (ASan checks). */
    kop_log(KOP_LOG_INFO, "x", "hidden", json_pack("{s:i}", "n", 1));
    kop_logf(KOP_LOG_DEBUG, "x", "hidden %d", 2);
    kop_log(KOP_LOG_ERROR, NULL, NULL, NULL);
    kop_log(KOP_LOG_ERROR, "y", "not an object", json_integer(5));
    out = capture_finish(&c);
    ck_assert_ptr_null(strstr(out, "hidden"));
    v = parse_line(out);
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), "");
    ck_assert_str_eq(json_string_value(json_object_get(v, "logger")), "");
    json_decref(v);
    v = parse_line(strchr(out, '\n') + 1);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "fields")), 5);
    json_decref(v);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_logf_formats)
{
    struct capture c;
    const char *out;
    json_t *v;
    char *big = malloc(5001);

    memset(big, 'x', 5000);
    big[5000] = '\0';
    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    kop_logf(KOP_LOG_INFO, "main", "listening on %s:%d", "0.0.0.0", 9443);
    kop_logf(KOP_LOG_INFO, "main", "big %s end", big);
    out = capture_finish(&c);
    v = parse_line(out);
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), "listening on 0.0.0.0:9443");
    json_decref(v);
    v = parse_line(strchr(out, '\n') + 1);
    ck_assert_uint_eq(json_string_length(json_object_get(v, "msg")), 5008);
    json_decref(v);
    free(big);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_truncates_huge_lines)
{
    struct capture c;
    const char *out;
    json_t *v;
    size_t n = 200 * 1024;
    char *huge = malloc(n + 1);
    char *ctl = malloc(n + 1);

    memset(huge, 'a', n);
    huge[n] = '\0';
    memset(ctl, '\x01', n); /* 6 bytes each once escaped */
    ctl[n] = '\0';
    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    kop_log(KOP_LOG_INFO, "t", huge, json_pack("{s:s}", "k", "v"));
    kop_log(KOP_LOG_INFO, "t", "small", json_pack("{s:s}", "big", huge));
    kop_log(KOP_LOG_INFO, "t", ctl, NULL);
    out = capture_finish(&c);
    for (int i = 0; i < 3; i++) {
        const char *end = strchr(out, '\n');

        ck_assert_ptr_nonnull(end);
        ck_assert_int_le(end - out + 1, 64 * 1024);
        char *line = strndup(out, (size_t)(end - out));
        v = parse_line(line);
        free(line);
        if (i == 0) {
            ck_assert(json_is_true(json_object_get(v, "msgTruncated")));
            ck_assert_str_eq(json_string_value(json_object_get(v, "k")), "v");
        } else {
            ck_assert(json_is_true(json_object_get(v, "fieldsTruncated")));
            ck_assert_ptr_null(json_object_get(v, "big"));
        }
        json_decref(v);
        out = end + 1;
    }
    ck_assert_str_eq(out, "");
    free(huge);
    free(ctl);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_text_format)
{
    struct capture c;
    const char *out;

    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_TEXT);
    kop_log(KOP_LOG_ERROR, "webhook", "request failed\nsecond line",
            json_pack("{s:s,s:i,s:s,s:b}", "uid", "abc-1", "code", 400, "why", "two words", "retry",
                      0));
    kop_log(KOP_LOG_INFO, NULL, "no logger", NULL);
    out = capture_finish(&c);
    /* "2006-01-02T15:04:05.000000Z ERROR webhook msg k=v ..." */
    ck_assert_int_eq(out[26], 'Z');
    const char *second = strchr(out, '\n') + 1;
    ck_assert_int_eq(strncmp(out + 27,
                             " ERROR webhook request failed\\nsecond line uid=abc-1 code=400 "
                             "why=\"two words\" retry=false\n",
                             (size_t)(second - out - 27)),
                     0);
    ck_assert_int_eq(second[26], 'Z');
    ck_assert_str_eq(second + 27, " INFO no logger\n");
    capture_free(&c);
}
END_TEST

START_TEST(test_log_parse_names)
{
    enum kop_log_level l = KOP_LOG_ERROR;
    enum kop_log_format f = KOP_LOG_FORMAT_TEXT;

    ck_assert_int_eq(kop_log_level_parse("debug", &l), 0);
    ck_assert_int_eq(l, KOP_LOG_DEBUG);
    ck_assert_int_eq(kop_log_level_parse("WARNING", &l), 0);
    ck_assert_int_eq(l, KOP_LOG_WARN);
    ck_assert_int_eq(kop_log_level_parse("Error", &l), 0);
    ck_assert_int_eq(l, KOP_LOG_ERROR);
    ck_assert_int_eq(kop_log_level_parse("verbose", &l), -EINVAL);
    ck_assert_int_eq(kop_log_level_parse(NULL, &l), -EINVAL);
    ck_assert_int_eq(l, KOP_LOG_ERROR);
    ck_assert_int_eq(kop_log_format_parse("json", &f), 0);
    ck_assert_int_eq(f, KOP_LOG_FORMAT_JSON);
    ck_assert_int_eq(kop_log_format_parse("TEXT", &f), 0);
    ck_assert_int_eq(f, KOP_LOG_FORMAT_TEXT);
    ck_assert_int_eq(kop_log_format_parse("yaml", &f), -EINVAL);
    ck_assert_str_eq(kop_log_level_name(KOP_LOG_INFO), "info");
    ck_assert_str_eq(kop_log_level_name(KOP_LOG_WARN), "warn");
}
END_TEST

#define WRITERS 4
#define LINES_PER_WRITER 300

static void *writer_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    char *pad = malloc(6001);

    /* Lines longer than PIPE_BUF, so the kernel alone would not keep them whole. */
    memset(pad, 'a' + id, 6000);
    pad[6000] = '\0';
    for (int i = 0; i < LINES_PER_WRITER; i++)
        kop_log(KOP_LOG_INFO, "writer", pad, json_pack("{s:i,s:i}", "writer", id, "seq", i));
    free(pad);
    return NULL;
}

START_TEST(test_log_concurrent_lines_never_interleave)
{
    struct capture c;
    pthread_t th[WRITERS];
    int seen[WRITERS] = {0};
    const char *p;
    int lines = 0;

    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    for (int i = 0; i < WRITERS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, writer_main, (void *)(intptr_t)i), 0);
    for (int i = 0; i < WRITERS; i++)
        pthread_join(th[i], NULL);
    p = capture_finish(&c);
    while (*p) {
        const char *end = strchr(p, '\n');
        char *line;
        json_t *v;
        int id, seq;
        const char *msg;

        ck_assert_ptr_nonnull(end);
        line = strndup(p, (size_t)(end - p));
        v = parse_line(line);
        free(line);
        id = (int)json_integer_value(json_object_get(v, "writer"));
        seq = (int)json_integer_value(json_object_get(v, "seq"));
        msg = json_string_value(json_object_get(v, "msg"));
        ck_assert_int_ge(id, 0);
        ck_assert_int_lt(id, WRITERS);
        /* Each writer's lines arrive whole and in its own order. */
        ck_assert_int_eq(seq, seen[id]);
        seen[id]++;
        ck_assert_uint_eq(strlen(msg), 6000);
        ck_assert_int_eq(msg[0], 'a' + id);
        ck_assert_int_eq(msg[5999], 'a' + id);
        json_decref(v);
        lines++;
        p = end + 1;
    }
    ck_assert_int_eq(lines, WRITERS * LINES_PER_WRITER);
    capture_free(&c);
}
END_TEST

START_TEST(test_log_errno_fields)
{
    struct capture c;
    const char *out;
    json_t *v;
    static const char *const order[] = {"ts", "level", "logger", "msg", "path", "error", "errno"};

    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    kop_log_errno(KOP_LOG_ERROR, "setup", "cannot read", -ENOENT, json_pack("{s:s}", "path", "/x"));
    kop_log_errno(KOP_LOG_WARN, "setup", "no fields", EACCES, NULL);
    /* Filtered out: fields are still released (ASan would see a leak). */
    kop_log_errno(KOP_LOG_DEBUG, "setup", "hidden", -EIO, json_pack("{s:s}", "k", "v"));
    out = capture_finish(&c);
    v = parse_line(out);
    assert_keys(v, order, 7);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "errno")), ENOENT);
    ck_assert_str_eq(json_string_value(json_object_get(v, "error")), "No such file or directory");
    json_decref(v);
    v = parse_line(strchr(out, '\n') + 1);
    ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), "no fields");
    ck_assert_int_eq(json_integer_value(json_object_get(v, "errno")), EACCES);
    ck_assert_str_eq(json_string_value(json_object_get(v, "error")), "Permission denied");
    json_decref(v);
    ck_assert_ptr_null(strstr(out, "hidden"));
    capture_free(&c);
}
END_TEST

START_TEST(test_log_carries_current_trace)
{
    struct capture c;
    struct kop_trace_ctx tc;
    ck_assert_int_eq(
        kop_trace_parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", &tc), 0);
    capture_start(&c, KOP_LOG_INFO, KOP_LOG_FORMAT_JSON);
    kop_log(KOP_LOG_INFO, "webhook", "before", NULL);
    kop_trace_set_current(&tc);
    kop_log(KOP_LOG_INFO, "webhook", "admitted", json_pack("{s:s}", "admissionUID", "u1"));
    kop_logf(KOP_LOG_INFO, "webhook", "formatted %d", 1);
    kop_trace_set_current(NULL);
    kop_log(KOP_LOG_INFO, "webhook", "after", NULL);
    const char *out = capture_finish(&c);
    const char *want[][3] = {
        {"before", NULL, NULL},
        {"admitted", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
        {"formatted 1", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
        {"after", NULL, NULL}};
    const char *line = out;
    for (size_t i = 0; i < 4; i++) {
        ck_assert_ptr_nonnull(line);
        json_t *v = parse_line(line);
        ck_assert_str_eq(json_string_value(json_object_get(v, "msg")), want[i][0]);
        if (want[i][1]) {
            ck_assert_str_eq(json_string_value(json_object_get(v, "traceID")), want[i][1]);
            ck_assert_str_eq(json_string_value(json_object_get(v, "spanID")), want[i][2]);
        } else {
            ck_assert_ptr_null(json_object_get(v, "traceID"));
            ck_assert_ptr_null(json_object_get(v, "spanID"));
        }
        if (i == 1)
            ck_assert_str_eq(json_string_value(json_object_get(v, "admissionUID")), "u1");
        json_decref(v);
        line = strchr(line, '\n');
        line = line && line[1] ? line + 1 : NULL;
    }
    capture_free(&c);
}
END_TEST

static Suite *log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_log_json_keys_and_order);
    tcase_add_test(tc, test_log_carries_current_trace);
    tcase_add_test(tc, test_log_json_escaping);
    tcase_add_test(tc, test_log_level_filter_and_null_safety);
    tcase_add_test(tc, test_log_logf_formats);
    tcase_add_test(tc, test_log_truncates_huge_lines);
    tcase_add_test(tc, test_log_text_format);
    tcase_add_test(tc, test_log_parse_names);
    tcase_add_test(tc, test_log_errno_fields);
    tcase_add_test(tc, test_log_concurrent_lines_never_interleave);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(log_suite());
}
