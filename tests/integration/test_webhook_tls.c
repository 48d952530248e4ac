/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop --webhook-only as a real process, called over real TLS by libcurl
 * verifying against the dev CA: both webhooks, concurrent keep-alive
 * clients, a certificate rotated on disk under load, and bad input that
 * must be answered while the server keeps serving.
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kop/curltls.h"

#include "kubetest.h"
#include "testutil.h"

struct kop_under_test {
    struct kop_test_proc proc;
    char *dir;
    char cert_dir[512];
    char ca[600];
    int port;
    int metrics_port;
    int health_port;
};

static struct kop_under_test K;

static void gen_certs(const char *dir, const char *cadir)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s/scripts/gen-certs.sh' '%s' '%s' >/dev/null",
             getenv("KOP_SOURCE_ROOT"), dir, cadir);
    ck_assert_int_eq(system(cmd), 0);
}

static int port_from(struct kop_test_proc *p, const char *msg)
{
    char needle[128];
    char *line = NULL;
    snprintf(needle, sizeof(needle), "\"msg\":\"%s\"", msg);
    long r = kop_test_wait_for(p, 0, needle, 10000, &line);
    if (r < 0) {
        char *out = kop_test_output(p);
        fprintf(stderr, "kop output:\n%s\n", out);
        free(out);
    }
    ck_assert_msg(r >= 0, "kop did not log %s", msg);
    long port = kop_test_json_int(line, "port");
    free(line);
    ck_assert_int_gt(port, 0);
    return (int)port;
}

/* With a descriptor limit (soft and hard) for kop, through the shell's ulimit; 0: none. */
static int nofile_limit;

static void start_kop(const char *extra1, const char *extra2)
{
    memset(&K, 0, sizeof(K));
    K.dir = kop_test_tmpdir();
    snprintf(K.cert_dir, sizeof(K.cert_dir), "%s/certs", K.dir);
    gen_certs(K.cert_dir, K.cert_dir);
    snprintf(K.ca, sizeof(K.ca), "%s/ca.crt", K.cert_dir);
    char *argv[24];
    char limit_cmd[96];
    int i = 0;
    if (nofile_limit > 0) {
        snprintf(limit_cmd, sizeof(limit_cmd),
                 "ulimit -Sn %d && ulimit -Hn %d && exec \"$0\" \"$@\"", nofile_limit,
                 nofile_limit);
        argv[i++] = "/bin/sh";
        argv[i++] = "-c";
        argv[i++] = limit_cmd;
    }
    argv[i++] = (char *)kop_test_bin("kop");
    argv[i++] = "--webhook-only";
    argv[i++] = "--cert-dir";
    argv[i++] = K.cert_dir;
    argv[i++] = "--webhook-host=127.0.0.1";
    argv[i++] = "--webhook-port=0";
    argv[i++] = "--metrics-bind-address=127.0.0.1:0";
    argv[i++] = "--health-probe-bind-address=127.0.0.1:0";
    if (extra1)
        argv[i++] = (char *)extra1;
    if (extra2)
        argv[i++] = (char *)extra2;
    argv[i] = NULL;
    ck_assert_int_eq(kop_test_spawn(&K.proc, argv), 0);
    K.port = port_from(&K.proc, "serving webhook");
    K.metrics_port = port_from(&K.proc, "serving metrics");
    K.health_port = port_from(&K.proc, "serving health probes");
}

static void stop_kop(void)
{
    int st = kop_test_stop(&K.proc, SIGTERM, 15000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kop did not exit 0 on SIGTERM (%d)", st);
    kop_test_rmdir(K.dir);
    free(K.dir);
}

/* Send "Expect: 100-continue" (and the body only once asked for it). */
static bool expect_continue;

/* One request; returns the HTTP status (0 on transport failure) and the body. */
static long request(CURL *h, const char *method, const char *url, const char *ctype,
                    const char *body, size_t len, char **ret_body)
{
    struct kop_test_buf b = {0};
    struct curl_slist *hdrs = NULL;
    char ct[256];
    if (ctype) {
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        hdrs = curl_slist_append(hdrs, ct);
    } else {
        hdrs = curl_slist_append(hdrs, "Content-Type:");
    }
    hdrs = curl_slist_append(hdrs, expect_continue ? "Expect: 100-continue" : "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO, K.ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "GET") == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    long code = 0;
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    if (ret_body)
        *ret_body = b.p;
    else
        free(b.p);
    return code;
}

static long post(const char *path, const char *ctype, const char *body, char **ret_body)
{
    char url[256];
    snprintf(url, sizeof(url), "https://localhost:%d%s?timeout=10s", K.port, path);
    CURL *h = curl_easy_init();
    long code = request(h, "POST", url, ctype, body, body ? strlen(body) : 0, ret_body);
    curl_easy_cleanup(h);
    return code;
}

static json_t *post_json(const char *path, const char *body, long want_code)
{
    char *resp = NULL;
    long code = post(path, "application/json", body, &resp);
    ck_assert_msg(code == want_code, "POST %s: HTTP %ld, want %ld: %s", path, code, want_code,
                  resp ? resp : "");
    json_error_t err;
    json_t *j = json_loads(resp ? resp : "", 0, &err);
    ck_assert_msg(j != NULL, "reply is not JSON: %s", resp ? resp : "(none)");
    free(resp);
    return j;
}

static const char *SEED_REVIEW =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
    "\"request\":{\"uid\":\"705ab4f5-6393-11e8-b7cc-42010a800002\","
    "\"desiredAPIVersion\":\"mygroup.example.com/v2\",\"objects\":[{"
    "\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
    "\"metadata\":{\"name\":\"example-resource\",\"namespace\":\"default\","
    "\"uid\":\"0b6c5e1c-1111-4d5e-9c1a-000000000001\",\"resourceVersion\":\"7\"},"
    "\"spec\":{\"replicas\":3,\"image\":\"nginx:1.14.2\",\"port\":80,"
    "\"serviceType\":\"ClusterIP\"}}]}}";

START_TEST(test_webhook_tls_conversion_seed)
{
    start_kop(NULL, NULL);
    json_t *r = post_json("/convert", SEED_REVIEW, 200);
    ck_assert_str_eq(json_string_value(json_object_get(r, "apiVersion")),
                     "apiextensions.k8s.io/v1");
    ck_assert_str_eq(json_string_value(json_object_get(r, "kind")), "ConversionReview");
    json_t *resp = json_object_get(r, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")),
                     "705ab4f5-6393-11e8-b7cc-42010a800002");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(resp, "result"), "status")),
                     "Success");
    json_t *objs = json_object_get(resp, "convertedObjects");
    ck_assert_int_eq(json_array_size(objs), 1);
    json_t *o = json_array_get(objs, 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "apiVersion")), "mygroup.example.com/v2");
    json_t *spec = json_object_get(o, "spec");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "replicas")), 3);
    json_t *image = json_object_get(spec, "image");
    ck_assert_str_eq(json_string_value(json_object_get(image, "repository")), "nginx");
    ck_assert_str_eq(json_string_value(json_object_get(image, "tag")), "1.14.2");
    json_t *p0 = json_array_get(json_object_get(spec, "ports"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(p0, "port")), 80);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(spec, "service"), "type")),
                     "ClusterIP");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(o, "metadata"), "uid")),
                     "0b6c5e1c-1111-4d5e-9c1a-000000000001");
    json_decref(r);

    /* v1beta1 envelope answers in v1beta1. */
    char *b1 = strdup(SEED_REVIEW);
    char *at = strstr(b1, "apiextensions.k8s.io/v1\"");
    ck_assert_ptr_nonnull(at);
    char body[4096];
    snprintf(body, sizeof(body), "%.*sapiextensions.k8s.io/v1beta1%s", (int)(at - b1), b1,
             at + strlen("apiextensions.k8s.io/v1"));
    free(b1);
    r = post_json("/convert", body, 200);
    ck_assert_str_eq(json_string_value(json_object_get(r, "apiVersion")),
                     "apiextensions.k8s.io/v1beta1");
    json_decref(r);
    stop_kop();
}
END_TEST

/* A 10,000-object review through TLS: the body streams through the
 * converter (never held whole) and every object comes back converted. */
START_TEST(test_webhook_tls_large_review_streams)
{
    start_kop(NULL, NULL);
    size_t cap = 4u << 20, off = 0;
    char *body = malloc(cap);
    ck_assert_ptr_nonnull(body);
    off += (size_t)snprintf(
        body, cap,
        "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
        "\"request\":{\"uid\":\"big\",\"desiredAPIVersion\":\"mygroup.example.com/v2\","
        "\"objects\":[");
    for (int i = 0; i < 10000; i++)
        off += (size_t)snprintf(
            body + off, cap - off,
            "%s{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
            "\"metadata\":{\"name\":\"o%d\",\"namespace\":\"default\",\"uid\":\"u%d\"},"
            "\"spec\":{\"replicas\":1,\"image\":\"nginx:1.%d\",\"port\":80}}",
            i ? "," : "", i, i, i);
    snprintf(body + off, cap - off, "]}}");
    json_t *r = post_json("/convert", body, 200);
    json_t *objs = json_object_get(json_object_get(r, "response"), "convertedObjects");
    ck_assert_uint_eq(json_array_size(objs), 10000);
    json_t *last = json_array_get(objs, 9999);
    ck_assert_str_eq(json_string_value(json_object_get(last, "apiVersion")),
                     "mygroup.example.com/v2");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_object_get(last, "spec"), "image"), "tag")),
                     "1.9999");
    json_decref(r);
    free(body);
    stop_kop();
}
END_TEST

/* A soft descriptor limit is raised to the hard one, and --max-connections
 * is lowered (with a warning) to what the hard limit can hold. */
START_TEST(test_webhook_tls_descriptor_limit)
{
    nofile_limit = 600;
    start_kop(NULL, NULL);
    nofile_limit = 0;
    ck_assert_int_ge(kop_test_wait_for(&K.proc, 0, "--max-connections lowered", 5000, NULL), 0);
    ck_assert_int_ge(kop_test_wait_for(&K.proc, 0, "\"allowed\":157", 1000, NULL), 0);
    json_t *r = post_json("/convert", SEED_REVIEW, 200);
    json_decref(r);
    stop_kop();
}
END_TEST

#define ADMIT_FMT                                                                                  \
    "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"           \
    "\"uid\":\"%s\",\"kind\":{\"group\":\"mygroup.example.com\",\"version\":\"v2\","               \
    "\"kind\":\"MyResource\"},\"resource\":{\"group\":\"mygroup.example.com\","                    \
    "\"version\":\"v2\",\"resource\":\"myresources\"},\"requestKind\":{\"group\":"                 \
    "\"mygroup.example.com\",\"version\":\"v2\",\"kind\":\"MyResource\"},"                         \
    "\"name\":\"%s\",\"namespace\":\"default\",\"operation\":\"CREATE\","                          \
    "\"userInfo\":{\"username\":\"admin\"},\"object\":{\"apiVersion\":"                            \
    "\"mygroup.example.com/v2\",\"kind\":\"MyResource\",\"metadata\":{\"name\":\"%s\","            \
    "\"namespace\":\"default\"},\"spec\":%s},\"oldObject\":null,\"dryRun\":false}}"

START_TEST(test_webhook_tls_admission)
{
    start_kop(NULL, NULL);
    char body[4096];
    snprintf(body, sizeof(body), ADMIT_FMT, "a-1", "good", "good",
             "{\"replicas\":2,\"image\":{\"repository\":\"nginx\",\"tag\":\"1.25\"},"
             "\"ports\":[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\"}],"
             "\"service\":{\"type\":\"ClusterIP\"}}");
    json_t *r = post_json("/validate-mygroup-example-com-myresource", body, 200);
    json_t *resp = json_object_get(r, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")), "a-1");
    ck_assert(json_is_true(json_object_get(resp, "allowed")));
    ck_assert_ptr_null(json_object_get(resp, "patch"));
    json_decref(r);

    snprintf(body, sizeof(body), ADMIT_FMT, "a-2", "Bad_Name", "Bad_Name",
             "{\"replicas\":5000,\"image\":{\"repository\":\"nginx\",\"tag\":\"1.25\"},"
             "\"ports\":[{\"name\":\"http\",\"port\":80},{\"name\":\"HTTP\",\"port\":70000}],"
             "\"service\":{\"type\":\"Weird\"}}");
    r = post_json("/validate-mygroup-example-com-myresource", body, 200);
    resp = json_object_get(r, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")), "a-2");
    ck_assert(json_is_false(json_object_get(resp, "allowed")));
    json_t *st = json_object_get(resp, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "code")), 403);
    ck_assert_str_eq(json_string_value(json_object_get(st, "reason")), "Forbidden");
    const char *msg = json_string_value(json_object_get(st, "message"));
    ck_assert_ptr_nonnull(msg);
    /* every violation in one message */
    ck_assert_ptr_nonnull(strstr(msg, "metadata.name"));
    ck_assert_ptr_nonnull(strstr(msg, "spec.replicas"));
    ck_assert_ptr_nonnull(strstr(msg, "spec.ports[1].name"));
    ck_assert_ptr_nonnull(strstr(msg, "spec.ports[1].port"));
    ck_assert_ptr_nonnull(strstr(msg, "spec.service.type"));
    json_decref(r);
    stop_kop();
}
END_TEST

START_TEST(test_webhook_tls_bad_input_answered)
{
    start_kop("--conversion-max-body-bytes=1Mi", NULL);
    char *resp = NULL;
    const char *conv = "/convert";
    const char *adm = "/validate-mygroup-example-com-myresource";
    const char *paths[] = {conv, adm};
    for (int i = 0; i < 2; i++) {
        const char *p = paths[i];
        ck_assert_int_eq(post(p, "application/json", "", &resp), 400);
        ck_assert_ptr_nonnull(resp);
        json_t *ej = json_loads(resp, 0, NULL);
        ck_assert_msg(ej != NULL, "400 body is JSON: %s", resp);
        json_decref(ej);
        free(resp);
        ck_assert_int_eq(post(p, "application/json", "{\"apiVersion\":", &resp), 400);
        ck_assert_ptr_nonnull(strstr(resp, "json parse error"));
        free(resp);
        ck_assert_int_eq(post(p, "application/json",
                              "apiVersion: apiextensions.k8s.io/v1\nkind: ConversionReview\n",
                              &resp),
                         400);
        free(resp);
        ck_assert_int_eq(post(p, "application/yaml", "{}", &resp), 415);
        json_t *j = json_loads(resp, 0, NULL);
        ck_assert_msg(j != NULL, "415 body is JSON: %s", resp);
        json_decref(j);
        free(resp);
        ck_assert_int_eq(post(p, NULL, "{}", &resp), 415);
        free(resp);
        char url[256];
        snprintf(url, sizeof(url), "https://localhost:%d%s", K.port, p);
        CURL *h = curl_easy_init();
        ck_assert_int_eq(request(h, "GET", url, NULL, NULL, 0, &resp), 405);
        curl_easy_cleanup(h);
        free(resp);
    }
    /* over the /convert limit (1 MiB here) -> 413 */
    size_t big = 2u << 20;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    /* Asked with Expect: 100-continue, as a client that wants to know
     * before it sends 2 MiB: the 413 comes instead of the 100, and nothing
     * races it. (Without Expect, the answer is sent at once too, but a
     * client still writing more than the front lingers for, 1 MiB, may see
     * the connection reset before it reads the answer, as with Go's server,
     * which reads at most 256 KiB after answering early.) */
    expect_continue = true;
    ck_assert_int_eq(post(conv, "application/json", huge, &resp), 413);
    expect_continue = false;
    free(resp);
    free(huge);

    /* unknown group/kind -> Failure, uid echoed */
    json_t *r =
        post_json("/convert",
                  "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\","
                  "\"request\":{\"uid\":\"u-9\",\"desiredAPIVersion\":\"stable.example.com/v2\","
                  "\"objects\":[{\"apiVersion\":\"stable.example.com/v1\",\"kind\":\"CronTab\","
                  "\"metadata\":{\"name\":\"x\"}}]}}",
                  200);
    json_t *resp_j = json_object_get(r, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp_j, "uid")), "u-9");
    json_t *res = json_object_get(resp_j, "result");
    ck_assert_str_eq(json_string_value(json_object_get(res, "status")), "Failure");
    ck_assert_ptr_nonnull(json_string_value(json_object_get(res, "message")));
    ck_assert_int_eq(json_array_size(json_object_get(resp_j, "convertedObjects")), 0);
    json_decref(r);

    /* unknown path -> 404, and still serving afterwards */
    ck_assert_int_eq(post("/nope", "application/json", "{}", &resp), 404);
    free(resp);
    r = post_json("/convert", SEED_REVIEW, 200);
    json_decref(r);
    stop_kop();
}
END_TEST

struct load {
    atomic_int failures;
    atomic_int requests;
    atomic_int connects;
    atomic_bool stop;
};

static void *load_main(void *arg)
{
    struct load *l = arg;
    char url[256];
    snprintf(url, sizeof(url), "https://localhost:%d/convert?timeout=10s", K.port);
    CURL *h = curl_easy_init();
    for (int i = 0; i < 40 || !atomic_load(&l->stop); i++) {
        char *resp = NULL;
        long code =
            request(h, "POST", url, "application/json", SEED_REVIEW, strlen(SEED_REVIEW), &resp);
        if (code != 200 || !resp || !strstr(resp, "\"Success\""))
            atomic_fetch_add(&l->failures, 1);
        atomic_fetch_add(&l->requests, 1);
        long conns = 0;
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &conns);
        atomic_fetch_add(&l->connects, (int)conns);
        free(resp);
        if (i > 4000)
            break;
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* The first line cmd prints (malloc'd, "" when none). */
static char *first_line_of(const char *cmd)
{
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    char line[256] = "";
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    pclose(f);
    return strdup(line);
}

static char *served_serial(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl s_client -connect 127.0.0.1:%d -servername localhost </dev/null "
             "2>/dev/null | openssl x509 -noout -serial 2>/dev/null",
             K.port);
    return first_line_of(cmd);
}

static char *file_serial(const char *path)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "openssl x509 -noout -serial -in '%s'", path);
    return first_line_of(cmd);
}

START_TEST(test_webhook_tls_concurrent_clients_and_cert_rotation)
{
    start_kop(NULL, NULL);
    char crt[600];
    snprintf(crt, sizeof(crt), "%s/tls.crt", K.cert_dir);
    char *old_serial = file_serial(crt);
    char *seen = served_serial();
    ck_assert_str_eq(seen, old_serial);
    free(seen);

    struct load l;
    atomic_init(&l.failures, 0);
    atomic_init(&l.requests, 0);
    atomic_init(&l.connects, 0);
    atomic_init(&l.stop, false);
    enum { N = 64 };
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, load_main, &l), 0);

    usleep(300000);
    /* New serving pair from the same CA, swapped in by rename. */
    gen_certs(K.cert_dir, K.cert_dir);
    char *new_serial = file_serial(crt);
    ck_assert_str_ne(new_serial, old_serial);
    bool rotated = false;
    for (int i = 0; i < 100 && !rotated; i++) {
        seen = served_serial();
        rotated = strcmp(seen, new_serial) == 0;
        free(seen);
        if (!rotated)
            usleep(100000);
    }
    atomic_store(&l.stop, true);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(rotated, "new handshakes did not get the new certificate within 10 s");
    ck_assert_int_eq(atomic_load(&l.failures), 0);
    ck_assert_int_ge(atomic_load(&l.requests), N * 40);
    /* keep-alive: connections are reused, not made per request */
    ck_assert_int_le(atomic_load(&l.connects), atomic_load(&l.requests) / 10);
    free(old_serial);
    free(new_serial);

    /* The metrics endpoint counted the requests. */
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", K.metrics_port);
    CURL *h = curl_easy_init();
    char *body = NULL;
    ck_assert_int_eq(request(h, "GET", url, NULL, NULL, 0, &body), 200);
    ck_assert_ptr_nonnull(strstr(body, "controller_runtime_webhook_requests_total{"));
    ck_assert_ptr_nonnull(strstr(body, "certwatcher_read_certificate_total"));
    ck_assert_ptr_nonnull(strstr(body, "process_resident_memory_bytes"));
    free(body);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", K.health_port);
    ck_assert_int_eq(request(h, "GET", url, NULL, NULL, 0, NULL), 200);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", K.health_port);
    ck_assert_int_eq(request(h, "GET", url, NULL, NULL, 0, NULL), 200);
    curl_easy_cleanup(h);
    stop_kop();
}
END_TEST

static int connect_local(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/*
 * The probe server outlives the webhook during a graceful stop: a scrape
 * that is still in flight holds the metrics server (it gets what is left of
 * --shutdown-timeout), and meanwhile /readyz keeps being answered. It must
 * answer 503 without touching the webhook that was already freed (under
 * ASan a use-after-free aborts kop here).
 */
START_TEST(test_webhook_tls_readyz_during_shutdown)
{
    start_kop("--shutdown-timeout=20s", NULL);
    char url[256];
    char *body = NULL;
    CURL *h = curl_easy_init();
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz?verbose", K.health_port);
    /* Ready a moment after "serving webhook" is logged. */
    long code = 0;
    for (int i = 0; i < 100 && code != 200; i++) {
        free(body);
        body = NULL;
        code = request(h, "GET", url, NULL, NULL, 0, &body);
        if (code != 200)
            usleep(20 * 1000);
    }
    ck_assert_int_eq(code, 200);
    ck_assert_ptr_nonnull(strstr(body, "[+]webhook ok"));
    free(body);

    /* A scrape whose request line is in but whose headers never end. */
    int scrape = connect_local(K.metrics_port);
    ck_assert_int_ge(scrape, 0);
    static const char partial[] = "GET /metrics HTTP/1.1\r\n";
    ck_assert_int_eq(write(scrape, partial, sizeof(partial) - 1), (ssize_t)(sizeof(partial) - 1));
    usleep(100 * 1000);

    kill(K.proc.pid, SIGTERM);
    ck_assert_int_ge(kop_test_wait_for(&K.proc, 0, "\"msg\":\"shutting down\"", 10000, NULL), 0);
    /* The webhook listener closes first; the webhook is freed right after. */
    for (int i = 0; i < 200; i++) {
        int fd = connect_local(K.port);
        if (fd < 0)
            break;
        close(fd);
        usleep(10 * 1000);
    }
    for (int i = 0; i < 20; i++) {
        body = NULL;
        code = request(h, "GET", url, NULL, NULL, 0, &body);
        ck_assert_msg(code == 503, "/readyz during shutdown: HTTP %ld: %s", code, body ? body : "");
        ck_assert_ptr_nonnull(strstr(body, "[-]webhook failed"));
        free(body);
        usleep(50 * 1000);
    }
    curl_easy_cleanup(h);
    close(scrape);
    int st = kop_test_stop(&K.proc, 0, 15000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kop did not exit 0 (%d)", st);
    kop_test_rmdir(K.dir);
    free(K.dir);
}
END_TEST

static Suite *webhook_tls_suite(void)
{
    Suite *s = suite_create("webhook_tls");
    TCase *tc = tcase_create("process");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_webhook_tls_conversion_seed);
    tcase_add_test(tc, test_webhook_tls_admission);
    tcase_add_test(tc, test_webhook_tls_bad_input_answered);
    tcase_add_test(tc, test_webhook_tls_concurrent_clients_and_cert_rotation);
    tcase_add_test(tc, test_webhook_tls_readyz_during_shutdown);
    tcase_add_test(tc, test_webhook_tls_large_review_streams);
    tcase_add_test(tc, test_webhook_tls_descriptor_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = kop_test_run(webhook_tls_suite());
    curl_global_cleanup();
    return rc;
}
