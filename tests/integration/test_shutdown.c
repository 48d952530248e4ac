/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graceful shutdown (docs/architecture.md §7) of kop as a real process.
 *
 * A webhook request is held "in flight" by a libcurl POST whose body is
 * sent in two halves: the read callback hands out the first half, then
 * blocks until the test lets it go on. kop has the headers and half the
 * body (controller_runtime_webhook_requests_in_flight is 1) when the test
 * sends SIGTERM and waits for the "shutting down" log line.
 *
 * Covers, with `kop --webhook-only` (dev certificates from
 * scripts/gen-certs.sh in a temporary directory):
 *  - the in-flight ConversionReview still gets its complete, correct
 *    answer, and kop exits 0 within --shutdown-timeout;
 *  - while it drains, new connections are refused (connect fails or the
 *    handshake is cut), and /readyz answers 503;
 *  - a second SIGTERM during a slow shutdown exits at once with 1;
 *  - --shutdown-timeout 1s with a request that never completes: kop exits
 *    within about a second of the deadline;
 *  - --shutdown-delay: /readyz fails at once, the webhook keeps serving
 *    (keep-alive, new connections) for the delay, then a request on a
 *    kept-alive connection gets its complete answer with "Connection:
 *    close", a request in flight throughout is answered, exit 0; an idle
 *    kept-alive connection is closed after the idle grace (exit long
 *    before the timeout); the other tests run with --shutdown-delay=0,
 *    the drain of before the flag;
 * and with the full operator (reconciler + webhooks + --leader-elect
 * against kubesim): SIGTERM -> exit 0 and the Lease released; a follower
 * in its --shutdown-delay does not take the Lease the leader released.
 */
#include "kubetest.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kop/curltls.h"

struct kop_under_test {
    struct kop_test_proc proc;
    bool running;
    char *dir;
    char cert_dir[512];
    char ca[600];
    long port, metrics_port, health_port;
};

static struct kop_under_test K;
static struct kop_test_kubesim sim; /* kubesim, for the full operator */
static bool sim_running;

/* ---- kop
 * ------------------------------------------------------------------------------------------ */

/* kop with its webhook (the dev certificates), metrics and health servers
 * on kernel-chosen loopback ports. */
static void served_argv(struct kop_test_argv *a)
{
    memset(a, 0, sizeof(*a));
    kop_test_argv_add(a, kop_test_bin("kop"), "--cert-dir", K.cert_dir, "--webhook-host=127.0.0.1",
                      "--webhook-port=0", "--metrics-bind-address=127.0.0.1:0",
                      "--health-probe-bind-address=127.0.0.1:0", NULL);
}

/* kop --webhook-only with the given --shutdown-timeout and
 * --shutdown-delay. */
static void start_webhook_kop_delay(const char *shutdown_timeout, const char *shutdown_delay)
{
    struct kop_test_argv a;
    served_argv(&a);
    kop_test_argv_add(&a, "--webhook-only", "--shutdown-timeout", shutdown_timeout,
                      "--shutdown-delay", shutdown_delay, NULL);
    ck_assert_int_eq(kop_test_spawn(&K.proc, a.v), 0);
    K.running = true;
    K.port = kop_test_logged_port(&K.proc, "serving webhook", 15000);
    K.metrics_port = kop_test_logged_port(&K.proc, "serving metrics", 15000);
    K.health_port = kop_test_logged_port(&K.proc, "serving health probes", 15000);
}

/* --shutdown-delay=0: the drain starts at SIGTERM, as before the flag. */
static void start_webhook_kop(const char *shutdown_timeout)
{
    start_webhook_kop_delay(shutdown_timeout, "0");
}

static void setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    memset(&K, 0, sizeof(K));
    K.dir = kop_test_tmpdir();
    snprintf(K.cert_dir, sizeof(K.cert_dir), "%s/certs", K.dir);
    snprintf(K.ca, sizeof(K.ca), "%s/ca.crt", K.cert_dir);
    kop_test_gen_certs(K.cert_dir);
}

static void release_held(void);

static void teardown(void)
{
    if (K.running) {
        K.running = false;
        kop_test_stop(&K.proc, SIGKILL, 5000);
    }
    release_held();
    if (sim_running) {
        sim_running = false;
        kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    }
    kop_test_rmdir(K.dir);
    free(K.dir);
    curl_global_cleanup();
}

/* Wait for the process to exit by itself; returns the wait status. */
static int wait_exit(struct kop_test_proc *p, int timeout_ms)
{
    return kop_test_stop(p, 0, timeout_ms);
}

/* ---- HTTP
 * ----------------------------------------------------------------------------------------- */

/* Plain HTTP GET on 127.0.0.1:port; returns the code (0: transport error). */
static long http_get(long port, const char *path, char **ret_body)
{
    char url[256];
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld%s", port, path);
    const struct kop_test_http_options o = {.timeout_s = 5};
    return kop_test_http(&o, NULL, url, NULL, ret_body);
}

/* A gauge or counter sample "name{labels} value" in /metrics; -1 if absent. */
static double metric_value(const char *name_and_labels)
{
    char *out = NULL;
    double v = -1;
    if (http_get(K.metrics_port, "/metrics", &out) == 200)
        v = kop_test_metric_value(out, name_and_labels);
    free(out);
    return v;
}

/* Poll /readyz every 10 ms until it answers 200; the test fails when it
 * does not within timeout_ms ("<who> never became ready"). */
static void wait_ready(long timeout_ms, const char *who)
{
    long end = kop_test_now_ms() + timeout_ms;
    while (http_get(K.health_port, "/readyz", NULL) != 200) {
        ck_assert_msg(kop_test_now_ms() < end, "%s never became ready", who);
        kop_test_sleep_ms(10);
    }
}

/* A fresh TLS connection and request to the webhook port. Returns the
 * curl result (CURLE_OK: an HTTP answer came back). */
static CURLcode fresh_request(long *ret_code)
{
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%ld/convert", K.port);
    CURL *h = curl_easy_init();
    struct kop_test_buf b = {0};
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO, K.ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    *ret_code = code;
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    free(b.p);
    return rc;
}

/* Raw TCP connect to the webhook port: 0 when it connects, else -errno. */
static int tcp_connect(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)K.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
    close(fd);
    return r;
}

/* ---- the slow request
 * ------------------------------------------------------------------------------ */

/* Two MyResources v1 -> v2: enough body to cut in half. */
static const char review[] =
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"ConversionReview\",\"request\":{"
    "\"uid\":\"0f6bd5b4-2f0c-4c8e-9d43-5a1c1f6f0a11\",\"desiredAPIVersion\":"
    "\"mygroup.example.com/v2\",\"objects\":["
    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
    "\"name\":\"slow-a\",\"namespace\":\"default\",\"uid\":\"11111111-2222-3333-4444-"
    "555555555555\",\"resourceVersion\":\"10\",\"generation\":1},\"spec\":{\"replicas\":3,"
    "\"image\":\"registry.example.com/team/app:1.25.3\",\"port\":8080,\"serviceType\":"
    "\"NodePort\"}},"
    "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\",\"metadata\":{"
    "\"name\":\"slow-b\",\"namespace\":\"default\",\"uid\":\"66666666-7777-8888-9999-"
    "000000000000\",\"resourceVersion\":\"11\",\"generation\":2},\"spec\":{\"replicas\":1,"
    "\"image\":\"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
    "\"port\":80,\"serviceType\":\"ClusterIP\"}}]}}";

struct slow_req {
    const char *path;
    const char *body;
    size_t len, sent;
    atomic_bool half_sent; /* the first half is on its way */
    atomic_bool go;        /* the test lets the rest go */
    atomic_bool abandon;   /* give up (kop is gone) */
    pthread_t thread;
    CURLcode rc;
    long code;
    struct kop_test_buf resp;
};

static size_t slow_read(char *dst, size_t size, size_t nmemb, void *ud)
{
    struct slow_req *s = ud;
    size_t room = size * nmemb;
    size_t half = s->len / 2;
    if (s->sent >= half && !atomic_load(&s->go)) {
        atomic_store(&s->half_sent, true);
        while (!atomic_load(&s->go)) {
            if (atomic_load(&s->abandon))
                return CURL_READFUNC_ABORT;
            kop_test_sleep_ms(5);
        }
    }
    size_t limit = atomic_load(&s->go) ? s->len : half;
    size_t n = limit - s->sent;
    if (n > room)
        n = room;
    memcpy(dst, s->body + s->sent, n);
    s->sent += n;
    return n;
}

static void *slow_main(void *arg)
{
    struct slow_req *s = arg;
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%ld%s", K.port, s->path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO, K.ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->len);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, slow_read);
    curl_easy_setopt(h, CURLOPT_READDATA, s);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s->resp);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    s->rc = curl_easy_perform(h);
    if (s->rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &s->code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return NULL;
}

/* The held request of the running test. Not on the test's stack: when an
 * assertion fails while it is held (Check leaves the test by longjmp under
 * CK_FORK=no), its thread still reads it until teardown abandons it. */
static struct slow_req held;
static bool held_running;

/* Start the POST and wait until kop counts it in flight. */
static void slow_start(struct slow_req *s, const char *path, const char *body)
{
    memset(s, 0, sizeof(*s));
    s->path = path;
    s->body = body;
    s->len = strlen(body);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, slow_main, s), 0);
    held_running = true;
    long end = kop_test_now_ms() + 10000;
    while (!atomic_load(&s->half_sent)) {
        ck_assert_msg(kop_test_now_ms() < end, "the first half was never sent");
        kop_test_sleep_ms(5);
    }
    char gauge[128];
    snprintf(gauge, sizeof(gauge), "controller_runtime_webhook_requests_in_flight{webhook=\"%s\"}",
             path);
    while (metric_value(gauge) != 1) {
        ck_assert_msg(kop_test_now_ms() < end, "kop does not count the request in flight");
        kop_test_sleep_ms(20);
    }
}

static void slow_finish(struct slow_req *s)
{
    atomic_store(&s->go, true);
    pthread_join(s->thread, NULL);
    held_running = false;
}

static void slow_abandon(struct slow_req *s)
{
    atomic_store(&s->abandon, true);
    atomic_store(&s->go, true);
    pthread_join(s->thread, NULL);
    held_running = false;
    free(s->resp.p);
    s->resp.p = NULL;
}

/* teardown: a test that failed while it held a request leaves it here */
static void release_held(void)
{
    if (held_running)
        slow_abandon(&held);
}

/* SIGTERM and wait for the "shutting down" line; returns the send time. */
static long sigterm_and_wait(void)
{
    long t0 = kop_test_now_ms();
    ck_assert_int_eq(kill(K.proc.pid, SIGTERM), 0);
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "\"msg\":\"shutting down\"", 10000, NULL) > 0,
                  "kop did not log shutting down");
    return t0;
}

/* kop --webhook-only with this --shutdown-timeout, a ConversionReview
 * held in flight as s, then SIGTERM (sigterm_and_wait): returns its time. */
static long start_held_then_sigterm(struct slow_req *s, const char *shutdown_timeout)
{
    start_webhook_kop(shutdown_timeout);
    slow_start(s, "/convert", review);
    return sigterm_and_wait();
}

static void check_converted(const struct slow_req *s)
{
    ck_assert_msg(s->rc == CURLE_OK, "in-flight request failed: %s", curl_easy_strerror(s->rc));
    ck_assert_int_eq(s->code, 200);
    json_error_t err;
    json_t *v = json_loads(s->resp.p ? s->resp.p : "", 0, &err);
    ck_assert_msg(v != NULL, "not JSON: %s", err.text);
    json_t *resp = json_object_get(v, "response");
    ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")),
                     "0f6bd5b4-2f0c-4c8e-9d43-5a1c1f6f0a11");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(resp, "result"), "status")),
                     "Success");
    json_t *objs = json_object_get(resp, "convertedObjects");
    ck_assert_uint_eq(json_array_size(objs), 2);
    json_t *a = json_array_get(objs, 0), *b = json_array_get(objs, 1);
    ck_assert_str_eq(json_string_value(json_object_get(a, "apiVersion")), "mygroup.example.com/v2");
    ck_assert_str_eq(json_string_value(json_object_get(b, "apiVersion")), "mygroup.example.com/v2");
    json_t *am = json_object_get(a, "metadata"), *bm = json_object_get(b, "metadata");
    ck_assert_str_eq(json_string_value(json_object_get(am, "uid")),
                     "11111111-2222-3333-4444-555555555555");
    ck_assert_str_eq(json_string_value(json_object_get(bm, "name")), "slow-b");
    json_t *as = json_object_get(a, "spec"), *bs = json_object_get(b, "spec");
    json_t *img = json_object_get(as, "image");
    ck_assert_str_eq(json_string_value(json_object_get(img, "repository")),
                     "registry.example.com/team/app");
    ck_assert_str_eq(json_string_value(json_object_get(img, "tag")), "1.25.3");
    ck_assert_int_eq(json_integer_value(
                         json_object_get(json_array_get(json_object_get(as, "ports"), 0), "port")),
                     8080);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(as, "service"), "type")),
                     "NodePort");
    ck_assert_int_eq(json_integer_value(json_object_get(as, "replicas")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(bs, "image"), "digest")),
                     "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
    json_decref(v);
}

/* Let the held request s go on: it gets its complete, correct answer, and
 * kop exits 0 by itself within timeout_ms. */
static void answered_then_exit_0(struct slow_req *s, int timeout_ms)
{
    slow_finish(s);
    check_converted(s);
    free(s->resp.p);
    K.running = false;
    int st = wait_exit(&K.proc, timeout_ms);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
}

/* ---- a keep-alive client -------------------------------------------------------------------- */

/* One curl handle reused for every request, as the apiserver's transport
 * keeps its connections. */
struct keepalive {
    CURL *h;
    struct curl_slist *hdrs;
    bool conn_close; /* the last answer said "Connection: close" */
};

static size_t ka_header(char *data, size_t size, size_t nmemb, void *ud)
{
    struct keepalive *k = ud;
    size_t n = size * nmemb;
    static const char want[] = "connection: close";
    if (n >= sizeof(want) - 1 && strncasecmp(data, want, sizeof(want) - 1) == 0)
        k->conn_close = true;
    return n;
}

static void ka_init(struct keepalive *k)
{
    memset(k, 0, sizeof(*k));
    k->h = curl_easy_init();
    k->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%ld/convert", K.port);
    curl_easy_setopt(k->h, CURLOPT_URL, url);
    kop_curltls_setup(k->h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(k->h, CURLOPT_CAINFO, K.ca);
    curl_easy_setopt(k->h, CURLOPT_HTTPHEADER, k->hdrs);
    curl_easy_setopt(k->h, CURLOPT_POSTFIELDS, review);
    curl_easy_setopt(k->h, CURLOPT_HEADERFUNCTION, ka_header);
    curl_easy_setopt(k->h, CURLOPT_HEADERDATA, k);
    curl_easy_setopt(k->h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(k->h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(k->h, CURLOPT_NOSIGNAL, 1L);
}

/* POST the review on k's connection. Returns the HTTP code (0: transport
 * error); *ret_new_conns: connections curl opened for it. */
static long ka_post(struct keepalive *k, long *ret_new_conns)
{
    struct kop_test_buf b = {0};
    curl_easy_setopt(k->h, CURLOPT_WRITEDATA, &b);
    k->conn_close = false;
    long code = 0, conns = -1;
    if (curl_easy_perform(k->h) == CURLE_OK)
        curl_easy_getinfo(k->h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_getinfo(k->h, CURLINFO_NUM_CONNECTS, &conns);
    json_t *v = json_loads(b.p ? b.p : "", 0, NULL);
    const char *status = json_string_value(
        json_object_get(json_object_get(json_object_get(v, "response"), "result"), "status"));
    if (code == 200 && (!status || strcmp(status, "Success") != 0))
        code = -1; /* an incomplete or wrong answer */
    json_decref(v);
    free(b.p);
    *ret_new_conns = conns;
    return code;
}

static void ka_cleanup(struct keepalive *k)
{
    curl_slist_free_all(k->hdrs);
    curl_easy_cleanup(k->h);
}

/* ---- tests: kop --webhook-only
 * ------------------------------------------------------------------- */

/*
 * --shutdown-delay: /readyz fails at once; during the delay the webhook
 * answers as before (keep-alive kept, new connections taken); after it a
 * request on a kept-alive connection gets its complete answer with
 * "Connection: close"; a request in flight across all of it is answered;
 * kop exits 0.
 */
START_TEST(test_shutdown_delay_keeps_serving)
{
    start_webhook_kop_delay("10s", "3s");
    wait_ready(5000, "kop");
    struct keepalive k;
    ka_init(&k);
    long conns = 0;
    ck_assert_int_eq(ka_post(&k, &conns), 200);
    ck_assert_int_eq(conns, 1);
    ck_assert(!k.conn_close);
    struct slow_req *s = &held;
    slow_start(s, "/convert", review);

    long t0 = sigterm_and_wait();
    ck_assert_int_eq(http_get(K.health_port, "/readyz", NULL), 503);
    /* During the delay: the same connection, kept alive. */
    ck_assert_int_eq(ka_post(&k, &conns), 200);
    ck_assert_int_eq(conns, 0);
    ck_assert(!k.conn_close);
    long code = 0;
    ck_assert_int_eq(fresh_request(&code), CURLE_OK); /* a new connection */
    ck_assert_int_eq(code, 400);
    char *out = kop_test_output(&K.proc);
    bool within = out && !strstr(out, "shutdown delay over");
    free(out);
    ck_assert_msg(within, "the requests did not fit in the 3 s delay");

    /* After it: answered in full on the same connection, which closes. */
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "shutdown delay over", 10000, NULL) > 0,
                  "the delay never ended");
    long waited = kop_test_now_ms() - t0;
    ck_assert_msg(waited >= 2900, "the delay ended %ld ms after SIGTERM", waited);
    ck_assert_int_eq(ka_post(&k, &conns), 200);
    ck_assert_int_eq(conns, 0);
    ck_assert(k.conn_close);
    ka_cleanup(&k);

    answered_then_exit_0(s, 15000);
}
END_TEST

/* A bad --shutdown-delay is a flag error: exit 2 before anything starts. */
START_TEST(test_shutdown_delay_bad_value_exits_2)
{
    static const char *const bad[] = {"--shutdown-delay=-1s", "--shutdown-delay=5",
                                      "--shutdown-delay=soon", "--shutdown-delay="};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *argv[] = {(char *)kop_test_bin("kop"), "--webhook-only", (char *)bad[i], NULL};
        struct kop_test_proc p;
        ck_assert_int_eq(kop_test_spawn(&p, argv), 0);
        ck_assert_msg(kop_test_wait_for(&p, 0, "--shutdown-delay", 10000, NULL) >= 0,
                      "%s: no message naming the flag", bad[i]);
        int st = wait_exit(&p, 10000);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: exit status %d", bad[i], st);
    }
}
END_TEST

/* A kept-alive connection that stays idle after the delay is closed by
 * kop (after the idle grace), and kop exits 0 without waiting for the
 * timeout. */
/* Read what the server sends on a CONNECT_ONLY handle until it closes the
 * connection or ms pass; true when it closed. */
static bool raw_closed_within(CURL *h, long ms)
{
    curl_socket_t sock = CURL_SOCKET_BAD;
    curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &sock);
    ck_assert(sock != CURL_SOCKET_BAD);
    for (long end = kop_test_now_ms() + ms; kop_test_now_ms() < end;) {
        char buf[4096];
        size_t n = 0;
        CURLcode rc = curl_easy_recv(h, buf, sizeof(buf), &n);
        if (rc == CURLE_OK && n == 0)
            return true; /* close_notify or EOF */
        if (rc != CURLE_OK && rc != CURLE_AGAIN)
            return true; /* reset */
        if (rc == CURLE_AGAIN) {
            struct pollfd p = {.fd = sock, .events = POLLIN};
            poll(&p, 1, 10);
        }
    }
    return false;
}

/*
 * A kept-alive connection left idle after the delay is closed by kop, not
 * at once (a request could be on its way) but after the idle grace (1 s),
 * and kop exits 0 long before the timeout.
 */
START_TEST(test_shutdown_delay_closes_idle_connections)
{
    start_webhook_kop_delay("20s", "1s");
    wait_ready(5000, "kop");
    /* TLS by curl, HTTP by hand: one request, then the connection idles */
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%ld/", K.port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO, K.ca);
    curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    ck_assert_int_eq(curl_easy_perform(h), CURLE_OK);
    static const char req[] = "GET /convert HTTP/1.1\r\nHost: kop\r\n\r\n";
    size_t sent = 0;
    ck_assert_int_eq(curl_easy_send(h, req, sizeof(req) - 1, &sent), CURLE_OK);
    ck_assert_uint_eq(sent, sizeof(req) - 1);
    ck_assert(!raw_closed_within(h, 300)); /* answered (405), kept alive */

    sigterm_and_wait();
    ck_assert(!raw_closed_within(h, 500)); /* the delay: left alone */
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "shutdown delay over", 10000, NULL) > 0,
                  "the delay never ended");
    long t_drain = kop_test_now_ms();
    ck_assert_msg(raw_closed_within(h, 10000), "kop never closed the idle connection");
    long after = kop_test_now_ms() - t_drain;
    ck_assert_msg(after >= 900, "idle connection closed %ld ms after the delay, within the grace",
                  after);
    curl_easy_cleanup(h);

    long t1 = kop_test_now_ms();
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "\"msg\":\"stopped\"", 15000, NULL) > 0,
                  "kop did not log stopped");
    char *out = kop_test_output(&K.proc);
    ck_assert_ptr_null(strstr(out, "cut short"));
    free(out);
    K.running = false;
    int st = wait_exit(&K.proc, 15000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    long took = kop_test_now_ms() - t1;
    ck_assert_msg(took < 10000, "exit %ld ms after the idle connection closed", took);
}
END_TEST

START_TEST(test_shutdown_inflight_request_answered)
{
    struct slow_req *s = &held;
    long t0 = start_held_then_sigterm(s, "10s");
    /* kop waits for the request: still running a while later. */
    kop_test_sleep_ms(500);
    ck_assert_int_eq(waitpid(K.proc.pid, NULL, WNOHANG), 0);
    answered_then_exit_0(s, 10000);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(took < 10000, "exit after %ld ms, past --shutdown-timeout", took);
}
END_TEST

START_TEST(test_shutdown_refuses_new_connections)
{
    start_webhook_kop("10s");
    long code = 0;
    ck_assert_int_eq(fresh_request(&code), CURLE_OK); /* served before */
    ck_assert_int_eq(code, 400);
    struct slow_req *s = &held;
    slow_start(s, "/convert", review);
    sigterm_and_wait();
    /* The listener closes right after the log line. */
    long end = kop_test_now_ms() + 10000;
    int r = 0;
    /* A connect racing the listener's close can meet a reset instead of a
     * refusal (its SYN was queued on the listener as it closed): try again. */
    while (((r = tcp_connect()) == 0 || r == -ECONNRESET) && kop_test_now_ms() < end)
        kop_test_sleep_ms(10);
    ck_assert_msg(r == -ECONNREFUSED, "connect after SIGTERM: %d", r);
    for (int i = 0; i < 3; i++) {
        CURLcode rc = fresh_request(&code);
        ck_assert_msg(rc != CURLE_OK, "a new connection was served (%ld) while draining", code);
    }
    /* ... while the one in flight is still answered in full. */
    answered_then_exit_0(s, 10000);
}
END_TEST

START_TEST(test_shutdown_readyz_fails_while_draining)
{
    start_webhook_kop("10s");
    wait_ready(5000, "kop");
    struct slow_req *s = &held;
    slow_start(s, "/convert", review);
    sigterm_and_wait();
    long end = kop_test_now_ms() + 10000;
    long code = 0;
    while ((code = http_get(K.health_port, "/readyz", NULL)) == 200 && kop_test_now_ms() < end)
        kop_test_sleep_ms(10);
    ck_assert_msg(code == 503, "/readyz answered %ld while shutting down", code);
    /* Liveness is another matter: the process is healthy, just leaving. */
    ck_assert_int_eq(http_get(K.health_port, "/healthz", NULL), 200);
    char *body = NULL;
    ck_assert_int_eq(http_get(K.health_port, "/readyz?verbose", &body), 503);
    ck_assert_ptr_nonnull(strstr(body, "readyz check failed"));
    free(body);
    answered_then_exit_0(s, 10000);
}
END_TEST

START_TEST(test_shutdown_second_signal_exits_at_once)
{
    struct slow_req *s = &held;
    start_held_then_sigterm(s, "30s");
    kop_test_sleep_ms(300);
    ck_assert_int_eq(waitpid(K.proc.pid, NULL, WNOHANG), 0); /* still draining */
    long t0 = kop_test_now_ms();
    ck_assert_int_eq(kill(K.proc.pid, SIGTERM), 0);
    K.running = false;
    int st = wait_exit(&K.proc, 15000);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d after a second signal",
                  st);
    /* Long before the 30 s drain would end. */
    ck_assert_msg(took < 15000, "second signal: exit after %ld ms", took);
    slow_abandon(s);
    ck_assert(s->rc != CURLE_OK); /* the request was cut, not answered */
}
END_TEST

START_TEST(test_shutdown_timeout_cuts_hung_request)
{
    struct slow_req *s = &held;
    long t0 = start_held_then_sigterm(s, "1s");
    K.running = false;
    int st = wait_exit(&K.proc, 15000);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(st >= 0 && WIFEXITED(st), "kop did not exit by itself (%d)", st);
    /* Not before the timeout; the hung request alone would hold it for the
     * client's 60 s (a slow machine only makes the exit later). */
    ck_assert_msg(took >= 900 && took < 15000, "exit %ld ms after SIGTERM with a 1s timeout", took);
    /* Out of time: not a clean shutdown (docs/operations.md §5: running out of time exits 1). */
    ck_assert_msg(WEXITSTATUS(st) == 1, "exit status %d after running out of time",
                  WEXITSTATUS(st));
    slow_abandon(s);
    ck_assert(s->rc != CURLE_OK);
}
END_TEST

/* ---- test: the full operator
 * ------------------------------------------------------------------------ */

#define TOKEN "shutdown-test-token"
#define LEASE_PATH "/apis/coordination.k8s.io/v1/namespaces/default/leases/kop-leader"

static char sim_ca[600];

/* A request to kubesim; returns the code, *ret_body malloc'd. */
static long sim_req(const char *method, const char *path, const char *body, char **ret_body)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", sim.url, path);
    const struct kop_test_http_options o = {
        .ca = sim_ca, .token = TOKEN, .ctype = "application/json", .timeout_s = 10};
    return kop_test_http(&o, method, url, body, ret_body);
}

/* kubesim with the MyResource CRD; its kubeconfig path into kc. */
static void start_sim_with_crd(char *kc, size_t kc_len)
{
    snprintf(kc, kc_len, "%s/kubeconfig", K.dir);
    snprintf(sim_ca, sizeof(sim_ca), "%s/sim-ca.pem", K.dir);
    char *sargs[] = {"--deployment-ready-delay", "100ms", NULL};
    const struct kop_test_kubesim_options so = {
        .listen = "127.0.0.1:0", .kubeconfig = kc, .ca = sim_ca, .token = TOKEN, .args = sargs};
    kop_test_kubesim_start(&sim, &so);
    sim_running = true;
    ck_assert_int_eq(sim_req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                             kop_test_myresource_crd_no_short, NULL),
                     201);
}

/* The whole operator: webhooks, reconciler, leader election (Lease in
 * "default", 15 s lease, 500 ms retry period), with this --shutdown-delay. */
static void spawn_operator(struct kop_test_proc *p, const char *kc, const char *shutdown_delay)
{
    struct kop_test_argv a;
    served_argv(&a);
    kop_test_argv_add(&a, "--kubeconfig", kc, "--leader-elect", "--leader-election-namespace",
                      "default", "--leader-election-lease-duration", "15s",
                      "--leader-election-retry-period", "500ms", "--shutdown-timeout", "10s",
                      "--shutdown-delay", shutdown_delay, NULL);
    ck_assert_int_eq(kop_test_spawn(p, a.v), 0);
}

/* On a failure: the last of what a process logged, on stderr. */
static void dump_tail(const char *what, struct kop_test_proc *p)
{
    char *out = kop_test_output(p);
    size_t n = strlen(out);
    fprintf(stderr, "---- %s (last output)\n%s\n", what, out + (n > 6000 ? n - 6000 : 0));
    free(out);
}

START_TEST(test_shutdown_operator_releases_lease)
{
    char kc[600];
    start_sim_with_crd(kc, sizeof(kc));
    spawn_operator(&K.proc, kc, "5s");
    K.running = true;
    K.port = kop_test_logged_port(&K.proc, "serving webhook", 15000);
    K.health_port = kop_test_logged_port(&K.proc, "serving health probes", 15000);
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "became leader, reconciling", 10000, NULL) > 0,
                  "kop did not lead");
    ck_assert_int_eq(sim_req("POST", "/apis/mygroup.example.com/v1/namespaces/default/myresources",
                             "{\"apiVersion\":\"mygroup.example.com/v1\",\"kind\":\"MyResource\","
                             "\"metadata\":{\"name\":\"full\"},\"spec\":{\"replicas\":2}}",
                             NULL),
                     201);
    long end = kop_test_now_ms() + 15000;
    while (sim_req("GET", "/apis/apps/v1/namespaces/default/deployments/full", NULL, NULL) != 200) {
        ck_assert_msg(kop_test_now_ms() < end, "the operator did not reconcile");
        kop_test_sleep_ms(20);
    }
    wait_ready(10000, "the operator");
    char *body = NULL;
    ck_assert_int_eq(sim_req("GET", LEASE_PATH, NULL, &body), 200);
    ck_assert_ptr_nonnull(strstr(body, "\"holderIdentity\":\""));
    ck_assert_ptr_null(strstr(body, "\"holderIdentity\":\"\""));
    free(body);

    long t0 = kop_test_now_ms();
    ck_assert_int_eq(kill(K.proc.pid, SIGTERM), 0);
    if (kop_test_wait_for(&K.proc, 0, "\"msg\":\"released lease\"", 10000, NULL) <= 0) {
        dump_tail("kop", &K.proc);
        ck_abort_msg("no lease release logged within 10 s of SIGTERM");
    }
    if (kop_test_wait_for(&K.proc, 0, "\"msg\":\"stopped\"", 10000, NULL) <= 0) {
        dump_tail("kop", &K.proc);
        ck_abort_msg("kop did not stop within 10 s of SIGTERM");
    }
    K.running = false;
    int st = wait_exit(&K.proc, 10000);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    ck_assert_msg(took < 10000, "exit after %ld ms", took);

    body = NULL;
    ck_assert_int_eq(sim_req("GET", LEASE_PATH, NULL, &body), 200);
    json_t *lease = json_loads(body, 0, NULL);
    free(body);
    json_t *spec = json_object_get(lease, "spec");
    ck_assert_str_eq(json_string_value(json_object_get(spec, "holderIdentity")), "");
    ck_assert_int_eq(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 1);
    json_decref(lease);
    sim_running = false;
    ck_assert_int_eq(kop_test_kubesim_stop(&sim, SIGTERM, 10000), 0);
}
END_TEST

/* A replica that is shutting down no longer competes for the Lease (as
 * client-go's LeaderElector.Run, whose acquire loop ends with the context
 * that SIGTERM cancels in controller-runtime): in a rolling update the old
 * leader releases the Lease while the other old replica is still in its
 * --shutdown-delay, and that one must leave the Lease to a replica that
 * stays, not lead for the moment before its own exit. */
START_TEST(test_shutdown_follower_does_not_take_the_lease)
{
    char kc[600];
    start_sim_with_crd(kc, sizeof(kc));
    spawn_operator(&K.proc, kc, "0");
    K.running = true;
    ck_assert_msg(kop_test_wait_for(&K.proc, 0, "became leader, reconciling", 10000, NULL) > 0,
                  "the first replica did not lead");

    struct kop_test_proc b;
    spawn_operator(&b, kc, "8s");
    if (kop_test_wait_for(&b, 0, "\"msg\":\"new leader elected\"", 10000, NULL) < 0) {
        kop_test_stop(&b, SIGKILL, 5000);
        ck_abort_msg("the second replica did not see the leader");
    }
    /* The follower is told to stop and serves on for 8 s... */
    ck_assert_int_eq(kill(b.pid, SIGTERM), 0);
    ck_assert(kop_test_wait_for(&b, 0, "serving on while the endpoint is removed", 10000, NULL) >
              0);
    /* ...while the leader stops and releases the Lease. */
    ck_assert_int_eq(kill(K.proc.pid, SIGTERM), 0);
    ck_assert(kop_test_wait_for(&K.proc, 0, "\"msg\":\"released lease\"", 10000, NULL) > 0);
    K.running = false;
    int st = wait_exit(&K.proc, 10000);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);

    /* The follower ends its shutdown without ever leading, though the
     * Lease was free for several of its retry periods. */
    bool stopped = kop_test_wait_for(&b, 0, "\"msg\":\"stopped\"", 20000, NULL) > 0;
    char *out = kop_test_output(&b);
    bool led = strstr(out, "became leader") != NULL;
    free(out);
    if (!stopped)
        dump_tail("follower", &b);
    st = kop_test_stop(&b, 0, 10000);
    ck_assert(stopped);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    ck_assert_msg(!led, "a replica shutting down took the Lease");
    char *body = NULL;
    ck_assert_int_eq(sim_req("GET", LEASE_PATH, NULL, &body), 200);
    json_t *lease = json_loads(body, 0, NULL);
    free(body);
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity")), "");
    json_decref(lease);
}
END_TEST

static Suite *shutdown_suite(void)
{
    Suite *s = suite_create("shutdown");
    TCase *tc = tcase_create("sigterm");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_shutdown_inflight_request_answered);
    tcase_add_test(tc, test_shutdown_delay_keeps_serving);
    tcase_add_test(tc, test_shutdown_delay_closes_idle_connections);
    tcase_add_test(tc, test_shutdown_delay_bad_value_exits_2);
    tcase_add_test(tc, test_shutdown_refuses_new_connections);
    tcase_add_test(tc, test_shutdown_readyz_fails_while_draining);
    tcase_add_test(tc, test_shutdown_second_signal_exits_at_once);
    tcase_add_test(tc, test_shutdown_timeout_cuts_hung_request);
    tcase_add_test(tc, test_shutdown_operator_releases_lease);
    tcase_add_test(tc, test_shutdown_follower_does_not_take_the_lease);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(shutdown_suite());
}
