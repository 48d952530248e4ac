/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The integration tests' shared helpers (tests/kubetest.h) against a fake
 * HTTP server: kop_test_request's response headers, extra request header,
 * binary bodies and retries; the /metrics scrape; base64 (RFC 4648 §10
 * vectors); log-line strings; the MyResource CRD documents; the kop
 * command-line builder and the logged-port reader.
 */
#include "kubetest.h"

#include <jansson.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakesrv.h"

/* What the handler saw of the last request, and how it answers. */
static struct {
    atomic_int calls;
    int fail_first; /* answer 503 to this many requests first */
    char method[16];
    char traceparent[128];
    char content_type[128];
    size_t body_len;
    bool body_has_nul;
} seen;

static bool handler(struct fsrv *s, const struct fsrv_req *req, int fd)
{
    (void)s;
    int n = atomic_fetch_add(&seen.calls, 1) + 1;
    snprintf(seen.method, sizeof(seen.method), "%s", req->method);
    snprintf(seen.traceparent, sizeof(seen.traceparent), "%s", req->traceparent);
    snprintf(seen.content_type, sizeof(seen.content_type), "%s", req->content_type);
    seen.body_len = req->body_len;
    seen.body_has_nul = req->body && memchr(req->body, '\0', req->body_len) != NULL;
    if (strcmp(req->path, "/metrics") == 0)
        return fsrv_reply(fd, 200, NULL, "text/plain",
                          "# HELP x_total X.\nx_total{a=\"1\"} 2\nx_total{a=\"2\"} 3\ny 7\n");
    if (n <= seen.fail_first)
        return fsrv_reply(fd, 503, "X-Attempt: failed\r\n", NULL, "{\"failed\":true}");
    char hdr[64];
    snprintf(hdr, sizeof(hdr), "X-Attempt: %d\r\nWarning: 299 - \"w\"\r\n", n);
    return fsrv_reply(fd, 201, hdr, NULL, "{\"ok\":true}");
}

static struct fsrv srv;
static char *base;

static void setup(void)
{
    memset(&seen, 0, sizeof(seen));
    fsrv_start(&srv, handler, NULL);
    base = fsrv_url(&srv);
}

static void teardown(void)
{
    fsrv_stop(&srv);
    free(base);
}

START_TEST(test_kubetest_request_headers_and_body)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/things", base);
    const struct kop_test_http_options o = {
        .ctype = "application/json",
        .header = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        .timeout_s = 10};
    struct kop_test_resp r;
    ck_assert_int_eq(kop_test_request(&o, "PUT", url, "{}", &r), 201);
    ck_assert_int_eq(r.code, 201);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_str_eq(r.body, "{\"ok\":true}");
    ck_assert_uint_eq(r.len, strlen("{\"ok\":true}"));
    ck_assert_ptr_nonnull(strstr(r.headers, "HTTP/1.1 201"));
    ck_assert_ptr_nonnull(strstr(r.headers, "X-Attempt: 1\r\n"));
    ck_assert_ptr_nonnull(strstr(r.headers, "Warning: 299 - \"w\"\r\n"));
    ck_assert_str_eq(seen.method, "PUT");
    ck_assert_str_eq(seen.traceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    ck_assert_str_eq(seen.content_type, "application/json");
    kop_test_resp_free(&r);
    ck_assert_ptr_null(r.body);
    ck_assert_ptr_null(r.headers);

    /* kop_test_http: the same request, the body only. */
    char *body = NULL;
    ck_assert_int_eq(kop_test_http(&o, "GET", url, NULL, &body), 201);
    ck_assert_str_eq(body, "{\"ok\":true}");
    free(body);
}
END_TEST

START_TEST(test_kubetest_request_binary_body)
{
    static const char bin[] = "k8s\0\x0a\x02v1";
    char url[256];
    snprintf(url, sizeof(url), "%s/bin", base);
    const struct kop_test_http_options o = {.body_len = sizeof(bin) - 1, .timeout_s = 10};
    struct kop_test_resp r;
    ck_assert_int_eq(kop_test_request(&o, "POST", url, bin, &r), 201);
    ck_assert_uint_eq(seen.body_len, sizeof(bin) - 1);
    ck_assert(seen.body_has_nul);
    kop_test_resp_free(&r);
    /* Without body_len the body ends at its first NUL. */
    const struct kop_test_http_options s = {.timeout_s = 10};
    ck_assert_int_eq(kop_test_request(&s, "POST", url, bin, &r), 201);
    ck_assert_uint_eq(seen.body_len, 3);
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubetest_request_retries)
{
    char url[256];
    snprintf(url, sizeof(url), "%s/retry", base);
    /* Two 503s, then the answer: only the last attempt's headers. */
    seen.fail_first = 2;
    const struct kop_test_http_options o = {.timeout_s = 10, .attempts = 5};
    struct kop_test_resp r;
    ck_assert_int_eq(kop_test_request(&o, NULL, url, NULL, &r), 201);
    ck_assert_int_eq(atomic_load(&seen.calls), 3);
    ck_assert_ptr_nonnull(strstr(r.headers, "X-Attempt: 3\r\n"));
    ck_assert_ptr_null(strstr(r.headers, "failed"));
    ck_assert_str_eq(r.body, "{\"ok\":true}");
    kop_test_resp_free(&r);

    /* Every attempt fails: the last code with nothing else. */
    atomic_store(&seen.calls, 0);
    seen.fail_first = 100;
    const struct kop_test_http_options two = {.timeout_s = 10, .attempts = 2};
    ck_assert_int_eq(kop_test_request(&two, NULL, url, NULL, &r), 503);
    ck_assert_int_eq(atomic_load(&seen.calls), 2);
    ck_assert_str_eq(r.body, "");
    ck_assert_str_eq(r.headers, "");
    kop_test_resp_free(&r);

    /* attempts 0: one attempt, the 503 as it is. */
    atomic_store(&seen.calls, 0);
    const struct kop_test_http_options one = {.timeout_s = 10};
    ck_assert_int_eq(kop_test_request(&one, NULL, url, NULL, &r), 503);
    ck_assert_int_eq(atomic_load(&seen.calls), 1);
    ck_assert_str_eq(r.body, "{\"failed\":true}");
    ck_assert_ptr_nonnull(strstr(r.headers, "X-Attempt: failed\r\n"));
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubetest_no_answer)
{
    /* The server is gone: no code, curl's error kept. */
    char url[256];
    snprintf(url, sizeof(url), "%s/gone", base);
    fsrv_stop(&srv);
    fsrv_start(&srv, handler, NULL); /* for the teardown */
    const struct kop_test_http_options o = {.timeout_s = 10};
    struct kop_test_resp r;
    ck_assert_int_eq(kop_test_request(&o, NULL, url, NULL, &r), 0);
    ck_assert_int_eq(r.code, 0);
    ck_assert_int_ne(r.rc, CURLE_OK);
    ck_assert_str_eq(r.body, "");
    ck_assert_str_eq(r.headers, "");
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubetest_api_resp)
{
    const struct kop_test_http_options o = {.timeout_s = 10};
    struct kop_test_resp r = kop_test_api_resp(&o, base, "POST", "/x", "{}");
    ck_assert_int_eq(r.code, 201);
    ck_assert_str_eq(seen.content_type, "application/json");
    ck_assert_ptr_nonnull(strstr(r.headers, "Warning: 299"));
    kop_test_resp_free(&r);
}
END_TEST

START_TEST(test_kubetest_scrape)
{
    const struct kop_test_http_options o = {.timeout_s = 10};
    ck_assert(kop_test_scrape_sum(&o, srv.port, "x_total", NULL) == 5);
    ck_assert(kop_test_scrape_sum(&o, srv.port, "x_total", "a=\"2\"") == 3);
    ck_assert(kop_test_scrape_sum(&o, srv.port, "z", NULL) == -1);
    char *text = kop_test_scrape(&o, srv.port);
    ck_assert(kop_test_metric_value(text, "y") == 7);
    free(text);
}
END_TEST

START_TEST(test_kubetest_base64)
{
    /* RFC 4648 §10. */
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        char *b = kop_test_base64(vec[i][0], strlen(vec[i][0]));
        ck_assert_str_eq(b, vec[i][1]);
        free(b);
    }
    /* Every bit of every byte, NUL included. */
    static const unsigned char bin[] = {0x00, 0xff, 0xfe, 0x80, 0x7f};
    char *b = kop_test_base64(bin, sizeof(bin));
    ck_assert_str_eq(b, "AP/+gH8=");
    free(b);
}
END_TEST

START_TEST(test_kubetest_file_base64_and_path)
{
    char *dir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(dir);
    char *p = kop_test_path(dir, "ca.crt");
    ck_assert_uint_eq(strlen(p), strlen(dir) + strlen("/ca.crt"));
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite("foob\0r", 1, 6, f), 6);
    ck_assert_int_eq(fclose(f), 0);
    char *b = kop_test_file_base64(p);
    ck_assert_str_eq(b, "Zm9vYgBy");
    free(b);
    free(p);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(test_kubetest_log_str)
{
    const char *line = "{\"level\":\"info\",\"msg\":\"leader election enabled\","
                       "\"identity\":\"host_1234\",\"port\":8080}";
    char buf[32];
    kop_test_log_str(line, "identity", buf, sizeof(buf));
    ck_assert_str_eq(buf, "host_1234");
    kop_test_log_str(line, "msg", buf, sizeof(buf));
    ck_assert_str_eq(buf, "leader election enabled");
    ck_assert_int_eq(kop_test_json_int(line, "port"), 8080);
}
END_TEST

START_TEST(test_kubetest_kop_argv)
{
    struct kop_test_argv a;
    memset(&a, 0xff, sizeof(a)); /* kop_test_kop_argv starts afresh */
    kop_test_kop_argv(&a, "/k/config");
    const char *want[] = {kop_test_bin("kop"),
                          "--kubeconfig",
                          "/k/config",
                          "--metrics-bind-address",
                          "127.0.0.1:0",
                          "--health-probe-bind-address",
                          "0",
                          "--controller-only",
                          "--namespace",
                          "ns"};
    size_t common = 7;
    ck_assert_uint_eq(a.n, common);
    ck_assert_ptr_null(a.v[a.n]);
    kop_test_argv_add(&a, NULL); /* nothing */
    ck_assert_uint_eq(a.n, common);
    kop_test_argv_add(&a, "--controller-only", NULL);
    kop_test_argv_add(&a, "--namespace", "ns", NULL);
    ck_assert_uint_eq(a.n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < a.n; i++)
        ck_assert_str_eq(a.v[i], want[i]);
    ck_assert_ptr_null(a.v[a.n]);
    /* From a zeroed struct: only what is added. */
    struct kop_test_argv z = {0};
    kop_test_argv_add(&z, "kop", "--webhook-only", NULL);
    ck_assert_uint_eq(z.n, 2);
    ck_assert_str_eq(z.v[0], "kop");
    ck_assert_str_eq(z.v[1], "--webhook-only");
    ck_assert_ptr_null(z.v[2]);
}
END_TEST

/* A full command line aborts the test rather than overflow. */
START_TEST(test_kubetest_argv_full)
{
    struct kop_test_argv a;
    kop_test_kop_argv(&a, "kc");
    while (a.n < KOP_TEST_ARGV_MAX - 1)
        kop_test_argv_add(&a, "x", NULL);
    ck_assert_ptr_null(a.v[a.n]);
    kop_test_argv_add(&a, "one too many", NULL);
}
END_TEST

START_TEST(test_kubetest_logged_port)
{
    char *argv[] = {"/bin/sh", "-c",
                    "echo '{\"msg\":\"serving webhook\",\"port\":0}';"
                    "echo '{\"msg\":\"serving metrics\",\"port\":8443}';"
                    "echo '{\"msg\":\"serving health probes\",\"port\":9440}'; exec sleep 30",
                    NULL};
    struct kop_test_proc p;
    ck_assert_int_eq(kop_test_spawn(&p, argv), 0);
    ck_assert_int_eq(kop_test_logged_port(&p, "serving health probes", 10000), 9440);
    ck_assert_int_eq(kop_test_logged_port(&p, "serving metrics", 10000), 8443);
    kop_test_stop(&p, SIGTERM, 5000);
}
END_TEST

/* A port of 0 (or none) aborts the test. */
START_TEST(test_kubetest_logged_port_zero)
{
    /* The line is in the captured output whether or not the shell has exited
     * (so nothing is left running when the test aborts). */
    char *argv[] = {"/bin/sh", "-c", "echo '{\"msg\":\"serving webhook\",\"port\":0}'", NULL};
    struct kop_test_proc p;
    ck_assert_int_eq(kop_test_spawn(&p, argv), 0);
    kop_test_logged_port(&p, "serving webhook", 10000);
}
END_TEST

START_TEST(test_kubetest_myresource_crd)
{
    json_error_t err;
    json_t *a = json_loads(kop_test_myresource_crd, 0, &err);
    ck_assert_msg(a != NULL, "%s", err.text);
    json_t *b = json_loads(kop_test_myresource_crd_no_short, 0, &err);
    ck_assert_msg(b != NULL, "%s", err.text);
    json_t *names = json_object_get(json_object_get(a, "spec"), "names");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(names, "shortNames"), 0)),
                     "myr");
    /* The same document but for the short name. */
    json_object_del(names, "shortNames");
    ck_assert(json_equal(a, b));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(b, "metadata"), "name")),
                     "myresources.mygroup.example.com");
    json_decref(a);
    json_decref(b);
}
END_TEST

static Suite *kubetest_suite(void)
{
    Suite *s = suite_create("kubetest");
    TCase *h = tcase_create("http");
    tcase_add_checked_fixture(h, setup, teardown);
    tcase_set_timeout(h, 60);
    tcase_add_test(h, test_kubetest_request_headers_and_body);
    tcase_add_test(h, test_kubetest_request_binary_body);
    tcase_add_test(h, test_kubetest_request_retries);
    tcase_add_test(h, test_kubetest_no_answer);
    tcase_add_test(h, test_kubetest_api_resp);
    tcase_add_test(h, test_kubetest_scrape);
    suite_add_tcase(s, h);
    TCase *t = tcase_create("text");
    tcase_add_test(t, test_kubetest_base64);
    tcase_add_test(t, test_kubetest_file_base64_and_path);
    tcase_add_test(t, test_kubetest_log_str);
    tcase_add_test(t, test_kubetest_myresource_crd);
    tcase_add_test(t, test_kubetest_kop_argv);
    suite_add_tcase(s, t);
    /* Check reports a failed assertion in a forked test as exit status 1. */
    TCase *k = tcase_create("kop");
    tcase_set_timeout(k, 30);
    tcase_add_test(k, test_kubetest_logged_port);
    /* These two must end the test's process, which needs Check's fork
     * mode: the sanitizer runs set CK_FORK=no, where an ended test is a
     * failed one (and its output reader a leak); the plain run has them. */
    const char *fork_mode = getenv("CK_FORK");
    if (!fork_mode || strcmp(fork_mode, "no") != 0) {
        tcase_add_exit_test(k, test_kubetest_argv_full, 1);
        tcase_add_exit_test(k, test_kubetest_logged_port_zero, 1);
    }
    suite_add_tcase(s, k);
    return s;
}

int main(void)
{
    return kop_test_run(kubetest_suite());
}
