/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the TLS front: end-to-end requests through mbedTLS and MHD with
 * libcurl clients verifying against the development CA, keep-alive under
 * concurrency, certificate reload (good and bad pairs), protocol versions
 * (TLS 1.3 and 1.2, TLS 1.1 refused, no h2), mutual TLS over both versions
 * with the allowed client names and a reloaded client CA, the handshake
 * timeout, garbage and per-address limits, and the graceful shutdown.
 */
#include <arpa/inet.h>
#include <check.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/ssl.h>
#include <microhttpd.h>

#include "kop/clock.h"
#include "kop/curltls.h"
#include "kop/http.h"
#include "kop/metrics.h"
#include "kop/tls.h"
#include "kubetest.h"
#include "testutil.h"

static atomic_int slow_started;

static void echo_handler(void *userdata, const struct kop_http_request *req,
                         struct kop_http_response *resp)
{
    char *b = malloc(req->body_len + 64);
    if (!b)
        return;
    int n = snprintf(b, 64, "peer=%s;", req->peer);
    memcpy(b + n, req->body, req->body_len);
    resp->body = b;
    resp->body_len = (size_t)n + req->body_len;
    resp->content_type = "text/plain";
}

static void slow_handler(void *userdata, const struct kop_http_request *req,
                         struct kop_http_response *resp)
{
    atomic_store(&slow_started, 1);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    resp->body = strdup("slow");
    resp->body_len = 4;
}

static void big_handler(void *userdata, const struct kop_http_request *req,
                        struct kop_http_response *resp)
{
    size_t n = 4 << 20;
    resp->body = malloc(n);
    if (!resp->body)
        return;
    memset(resp->body, 'z', n);
    resp->body_len = n;
    resp->content_type = "text/plain";
}

static const struct kop_http_route routes[] = {
    {.path = "/big", .methods = KOP_HTTP_GET, .fn = big_handler},
    {.path = "/echo",
     .methods = KOP_HTTP_GET | KOP_HTTP_POST,
     .max_body = 1 << 20,
     .fn = echo_handler},
    {.path = "/slow", .methods = KOP_HTTP_GET, .fn = slow_handler},
};

struct fixture {
    char *dir;
    char ca[512];
    struct kop_metrics *metrics;
    struct kop_http_server *http;
    struct kop_tls *tls;
    uint16_t port;
};

static void run(const char *cmd)
{
    int rc = system(cmd);
    ck_assert_msg(rc == 0, "command failed: %s", cmd);
}

static void gen_certs(const char *out, const char *cadir)
{
    const char *root = getenv("KOP_SOURCE_ROOT");
    ck_assert_ptr_nonnull(root);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s/scripts/gen-certs.sh' '%s' %s%s%s >/dev/null", root, out,
             cadir ? "'" : "", cadir ? cadir : "", cadir ? "'" : "");
    run(cmd);
}

/* Handshakes per second per address for the next fixture_start (0: the
 * default). */
static unsigned fixture_hs_rate;

/* max_connections for the next fixture_start (0: the default). */
static unsigned fixture_max_conns;

/* client_names for the next fixture_start with mtls (NULL: any). */
static const char *const *fixture_client_names;

/* The HTTP server is external, run by the TLS loop (as kop's webhook), or
 * runs MHD's own threads (the "mhd_threads" case). */
static bool fixture_external = true;

static void external_case(void)
{
    fixture_external = true;
}

static void threads_case(void)
{
    fixture_external = false;
}

static void fixture_start(struct fixture *f, bool mtls, int hs_timeout_ms, unsigned per_ip,
                          int idle_ms)
{
    memset(f, 0, sizeof(*f));
    f->dir = kop_test_tmpdir();
    gen_certs(f->dir, NULL);
    snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->dir);
    f->metrics = kop_metrics_new(false);
    struct kop_http_server_options ho = {.no_listen = true,
                                         .external = fixture_external,
                                         .threads = 2,
                                         .name = "webhook",
                                         .metrics = f->metrics};
    ck_assert_int_eq(kop_http_server_new(&ho, routes, sizeof(routes) / sizeof(routes[0]), &f->http),
                     0);
    ck_assert_int_eq(kop_http_server_start(f->http), 0);
    struct kop_tls_options to = {
        .host = "127.0.0.1",
        .port = 0,
        .cert_dir = f->dir,
        .client_ca_file = mtls ? f->ca : NULL,
        .client_names = mtls ? fixture_client_names : NULL,
        .handshake_timeout_ms = hs_timeout_ms,
        .max_per_ip = per_ip,
        .max_connections = fixture_max_conns,
        .handshakes_per_ip_per_s = fixture_hs_rate,
        .idle_timeout_ms = idle_ms,
        .reload_interval_ms = 500,
        .http = f->http,
        .metrics = f->metrics,
        .metric_prefix = "kop",
    };
    ck_assert_int_eq(kop_tls_new(&to, &f->tls), 0);
    ck_assert(!kop_tls_ready(f->tls));
    ck_assert_int_eq(kop_tls_start(f->tls), 0);
    ck_assert(kop_tls_ready(f->tls));
    f->port = kop_tls_port(f->tls);
    ck_assert_uint_ne(f->port, 0);
}

static void fixture_stop(struct fixture *f)
{
    ck_assert_int_eq(kop_tls_shutdown(f->tls, 2000), 0);
    kop_tls_free(f->tls);
    kop_http_server_free(f->http);
    kop_metrics_free(f->metrics);
    kop_test_rmdir(f->dir);
    free(f->dir);
}

static double metric(struct fixture *f, enum kop_metric_type type, const char *name)
{
    return kop_metric_value(
        kop_metric_child(kop_metrics_register(f->metrics, type, name, "x", NULL, NULL, 0)));
}

static double rejected(struct fixture *f, const char *reason)
{
    static const char *const l[] = {"reason", NULL};
    return kop_metric_value(kop_metric_child(
        kop_metrics_register(f->metrics, KOP_METRIC_COUNTER, "kop_tls_connections_rejected_total",
                             "x", l, NULL, 0),
        reason));
}

/* ---- curl helpers ------------------------------------------------------- */

static CURL *client(const struct fixture *f, const char *path)
{
    CURL *h = curl_easy_init();
    char url[256];
    snprintf(url, sizeof(url), "https://127.0.0.1:%u%s", (unsigned)f->port, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(h, CURLOPT_CAINFO, f->ca);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    return h;
}

static CURLcode perform(CURL *h, struct kop_test_buf *b, long *status)
{
    memset(b, 0, sizeof(*b));
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    CURLcode rc = curl_easy_perform(h);
    *status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    return rc;
}

/* Perform h: the answer must be a 200. Returns its body (malloc'd, NULL
 * when empty). */
static char *expect_200(CURL *h)
{
    struct kop_test_buf b;
    long st;
    ck_assert_int_eq(perform(h, &b, &st), CURLE_OK);
    ck_assert_int_eq(st, 200);
    return b.p;
}

/* expect_200, then clean up h. */
static void expect_200_once(CURL *h)
{
    free(expect_200(h));
    curl_easy_cleanup(h);
}

/* Perform h: no answer must come (the handshake fails); then clean up h. */
static void expect_failed_once(CURL *h)
{
    struct kop_test_buf b;
    long st;
    ck_assert_int_ne(perform(h, &b, &st), CURLE_OK);
    free(b.p);
    curl_easy_cleanup(h);
}

/* Serial number of the certificate served to a fresh handshake ("" on failure). */
static void served_serial(const struct fixture *f, char *out, size_t len)
{
    out[0] = '\0';
    CURL *h = client(f, "/echo");
    curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
    struct kop_test_buf b;
    long st;
    if (perform(h, &b, &st) == CURLE_OK) {
        struct curl_certinfo *ci = NULL;
        curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci);
        for (struct curl_slist *s = ci && ci->num_of_certs ? ci->certinfo[0] : NULL; s;
             s = s->next) {
            if (strncmp(s->data, "Serial Number:", 14) == 0) {
                snprintf(out, len, "%s", s->data + 14);
                break;
            }
        }
    }
    free(b.p);
    curl_easy_cleanup(h);
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(test_tls_request_works)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    CURL *h = client(&f, "/echo?timeout=10s");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "hello");
    char *body = expect_200(h);
    ck_assert_str_eq(body, "peer=127.0.0.1;hello");
    free(body);
    long ver = 0;
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver);
    ck_assert_int_eq(ver, CURL_HTTP_VERSION_1_1);
    curl_easy_cleanup(h);
    ck_assert_double_eq(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total"), 1);
    ck_assert(metric(&f, KOP_METRIC_GAUGE, "kop_serving_cert_expiry_seconds") >
              (double)time(NULL) + 86400);
    fixture_stop(&f);
}
END_TEST

/* Handshakes yield the core to the loop's requests (src/net/tls.c,
 * "Handshakes"): the worker runs at the process's niceness plus 10 (at
 * most 19), the loop at the process's. */
START_TEST(test_tls_handshake_thread_is_nice)
{
    int own = getpriority(PRIO_PROCESS, 0);
    int want = own + 10 > 19 ? 19 : own + 10;
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    /* the worker sets its own niceness once it runs */
    int64_t deadline = kop_clock_now_ns() + 5 * KOP_NSEC_PER_SEC;
    while (kop_test_thread_nice(0, "tls-handshake") != want && kop_clock_now_ns() < deadline)
        usleep(1000);
    ck_assert_int_eq(kop_test_thread_nice(0, "tls-handshake"), want);
    ck_assert_int_eq(kop_test_thread_nice(0, "tls-loop"), own);
    /* and handshakes still complete */
    CURL *h = client(&f, "/echo?timeout=10s");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "x");
    free(expect_200(h));
    curl_easy_cleanup(h);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_responses_across_record_boundaries)
{
    /* Responses of sizes around a record (16 KiB) and around what the front
     * takes from MHD at a time (64 KiB) arrive whole, one after the other
     * on one keep-alive connection: the records sealed with MSG_MORE are
     * never left behind. The body is echoed after "peer=127.0.0.1;".
     * Bodies over 256 KiB are worked on the heavy lane, which hands the
     * connection back to the thread running MHD. */
    static const size_t sizes[] = {1,     16369, 16370, 16371,  32000,  65520,  65521,
                                   65522, 65536, 70000, 200000, 300000, 1000000};
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    CURL *h = client(&f, "/echo");
    char *body = malloc(1000000);
    for (size_t i = 0; i < 1000000; i++)
        body[i] = (char)('a' + i * 7 % 26);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)sizes[k]);
        struct kop_test_buf b;
        long st;
        ck_assert_int_eq(perform(h, &b, &st), CURLE_OK);
        ck_assert_int_eq(st, 200);
        ck_assert_uint_eq(b.len, sizes[k] + strlen("peer=127.0.0.1;"));
        ck_assert(memcmp(b.p + strlen("peer=127.0.0.1;"), body, sizes[k]) == 0);
        free(b.p);
    }
    long conns = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &conns);
    ck_assert_int_eq(conns, 0); /* the last request reused the connection */
    free(body);
    curl_easy_cleanup(h);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_alpn_h2_falls_back_to_http11)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    CURL *h = client(&f, "/echo");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    free(expect_200(h));
    long ver = 0;
    curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver);
    ck_assert_int_eq(ver, CURL_HTTP_VERSION_1_1);
    curl_easy_cleanup(h);
    /* A client offering only h2 still completes the handshake, without ALPN. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "echo | timeout 10 openssl s_client -connect 127.0.0.1:%u -alpn h2 -CAfile '%s' "
             "2>&1 | grep -q 'No ALPN negotiated'",
             (unsigned)f.port, f.ca);
    run(cmd);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_old_versions_refused)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    CURL *h = client(&f, "/echo");
    curl_easy_setopt(h, CURLOPT_SSLVERSION,
                     (long)(CURL_SSLVERSION_TLSv1 | CURL_SSLVERSION_MAX_TLSv1_1));
    expect_failed_once(h);
    /* TLS 1.2 and TLS 1.3, each alone */
    h = client(&f, "/echo");
    curl_easy_setopt(h, CURLOPT_SSLVERSION,
                     (long)(CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2));
    expect_200_once(h);
    h = client(&f, "/echo");
    curl_easy_setopt(h, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_3);
    expect_200_once(h);
    fixture_stop(&f);
}
END_TEST

/* The versions curl is limited to in the mTLS tests: 1.2 alone, 1.3 alone. */
static const long only_version[] = {
    CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2,
    CURL_SSLVERSION_TLSv1_3 | CURL_SSLVERSION_MAX_TLSv1_3,
};

/* ---- concurrency and reload --------------------------------------------- */

struct worker {
    const struct fixture *f;
    atomic_bool *stop;
    int min_requests;
    bool fresh; /* a new connection (and handshake) for every request */
    int ok, failed;
    long connects;
};

/* Successful requests of every worker so far (another thread may wait on it). */
static atomic_int workers_ok;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    CURL *h = client(w->f, "/echo");
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"x\":1}");
    if (w->fresh) {
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    }
    for (int i = 0; i < w->min_requests || !atomic_load(w->stop); i++) {
        struct kop_test_buf b;
        long st;
        CURLcode rc = perform(h, &b, &st);
        if (rc == CURLE_OK && st == 200 && b.p && strcmp(b.p, "peer=127.0.0.1;{\"x\":1}") == 0) {
            w->ok++;
            atomic_fetch_add(&workers_ok, 1);
        } else
            w->failed++;
        free(b.p);
        long c = 0;
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &c);
        w->connects += c;
        if (i > 100000)
            break;
    }
    curl_easy_cleanup(h);
    return NULL;
}

#define N_WORKERS 64

START_TEST(test_tls_concurrent_keepalive_and_reload)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    char before[128], after[128];
    served_serial(&f, before, sizeof(before));
    ck_assert_str_ne(before, "");

    atomic_bool stop = false;
    static struct worker w[N_WORKERS];
    pthread_t th[N_WORKERS];
    for (int i = 0; i < N_WORKERS; i++) {
        w[i] = (struct worker){.f = &f, .stop = &stop, .min_requests = 20};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    /* New serving certificate from the same CA, renamed over the old files. */
    char *dir2 = kop_test_tmpdir();
    gen_certs(dir2, f.dir);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "mv -f '%s/tls.key' '%s/tls.key' && mv -f '%s/tls.crt' '%s/tls.crt'",
             dir2, f.dir, dir2, f.dir);
    run(cmd);
    int64_t t0 = kop_clock_now_ns();
    bool changed = false;
    while (kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC) {
        served_serial(&f, after, sizeof(after));
        if (after[0] && strcmp(after, before) != 0) {
            changed = true;
            break;
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    atomic_store(&stop, true);
    int ok = 0, failed = 0;
    long connects = 0;
    for (int i = 0; i < N_WORKERS; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
        failed += w[i].failed;
        connects += w[i].connects;
    }
    ck_assert_msg(changed, "the new certificate was not served within 20 s");
    ck_assert_int_eq(failed, 0);
    ck_assert_int_ge(ok, N_WORKERS * 20);
    ck_assert_int_eq(connects, N_WORKERS); /* one connection each: keep-alive */
    /* The pair is replaced by two renames (key, then certificate): on a
     * slow machine a reload may run between them, see a key that does not
     * match, count an error and keep the old pair; the next reload then
     * takes the new one (served, checked above). */
    ck_assert(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total") >= 2);
    kop_test_rmdir(dir2);
    free(dir2);
    fixture_stop(&f);
}
END_TEST

static void assert_serving(const struct fixture *f);

/* Handshakes are queued behind established connections (DESIGN in tls.c):
 * a burst of new connections, each a handshake, alongside keep-alive ones,
 * is served completely. */
START_TEST(test_tls_handshake_burst_with_keepalive)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    enum { KEEP = 8, FRESH = 24, FRESH_REQUESTS = 4 };
    atomic_bool stop = false, done = true; /* the fresh ones stop after their requests */
    static struct worker w[KEEP + FRESH];
    pthread_t th[KEEP + FRESH];
    for (int i = 0; i < KEEP + FRESH; i++) {
        w[i] = (struct worker){.f = &f, .stop = &stop, .min_requests = FRESH_REQUESTS};
        if (i >= KEEP) {
            w[i].fresh = true;
            w[i].stop = &done;
        }
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    for (int i = KEEP; i < KEEP + FRESH; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < KEEP; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < KEEP + FRESH; i++) {
        ck_assert_int_eq(w[i].failed, 0);
        ck_assert_int_ge(w[i].ok, FRESH_REQUESTS);
        if (w[i].fresh)
            ck_assert_int_eq(w[i].connects, FRESH_REQUESTS);
        else
            ck_assert_int_eq(w[i].connects, 1);
    }
    ck_assert_double_eq(rejected(&f, "handshake_error"), 0);
    ck_assert_double_eq(rejected(&f, "handshake_timeout"), 0);
    assert_serving(&f);
    fixture_stop(&f);
}
END_TEST

/* Handshakes run on the front's handshake thread: stopping the front while
 * clients keep connecting (steps queued for the worker, one on it) ends
 * cleanly, every connection closed and nothing left with the worker. */
START_TEST(test_tls_shutdown_during_handshakes)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    enum { N = 12 };
    atomic_bool stop = false;
    static struct worker w[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){.f = &f, .stop = &stop, .min_requests = 0, .fresh = true};
        ck_assert_int_eq(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    /* some handshakes done (however loaded the machine), more on their way */
    atomic_store(&workers_ok, 0);
    for (int i = 0; i < 3000 && atomic_load(&workers_ok) < N; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_int_ge(atomic_load(&workers_ok), N);
    ck_assert_int_eq(kop_tls_shutdown(f.tls, 2000), 0);
    atomic_store(&stop, true);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].ok;
    }
    ck_assert_int_gt(ok, 0); /* handshakes were done before the stop */
    ck_assert_double_eq(metric(&f, KOP_METRIC_GAUGE, "kop_tls_connections_active"), 0);
    kop_tls_free(f.tls);
    kop_http_server_free(f.http);
    kop_metrics_free(f.metrics);
    kop_test_rmdir(f.dir);
    free(f.dir);
}
END_TEST

START_TEST(test_tls_bad_pair_keeps_old)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    char before[128], after[128];
    served_serial(&f, before, sizeof(before));
    ck_assert_str_ne(before, "");
    /* A key that does not match the certificate. */
    char *dir2 = kop_test_tmpdir();
    gen_certs(dir2, f.dir);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "mv -f '%s/tls.key' '%s/tls.key'", dir2, f.dir);
    run(cmd);
    int64_t t0 = kop_clock_now_ns();
    while (metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total") < 1 &&
           kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_ge(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total"),
                        1);
    served_serial(&f, after, sizeof(after));
    ck_assert_str_eq(after, before);
    /* Garbage certificate: still the old pair. */
    snprintf(cmd, sizeof(cmd), "echo garbage > '%s/x' && mv -f '%s/x' '%s/tls.crt'", dir2, dir2,
             f.dir);
    run(cmd);
    double errs = metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total");
    t0 = kop_clock_now_ns();
    while (metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total") < errs + 1 &&
           kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_ge(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total"),
                        errs + 1);
    served_serial(&f, after, sizeof(after));
    ck_assert_str_eq(after, before);
    kop_test_rmdir(dir2);
    free(dir2);
    fixture_stop(&f);
}
END_TEST

/* A FIFO where tls.crt should be (a mistake, or a hostile volume): the
 * reload must not open it, since that blocks until someone writes. */
START_TEST(test_tls_fifo_cert_keeps_old)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    char before[128], after[128];
    served_serial(&f, before, sizeof(before));
    ck_assert_str_ne(before, "");
    char fifo[600], crt[600];
    snprintf(fifo, sizeof(fifo), "%s/fifo", f.dir);
    snprintf(crt, sizeof(crt), "%s/tls.crt", f.dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(rename(fifo, crt), 0);
    int64_t t0 = kop_clock_now_ns();
    while (metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total") < 1 &&
           kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_ge(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total"),
                        1);
    served_serial(&f, after, sizeof(after));
    ck_assert_str_eq(after, before);
    fixture_stop(&f);
}
END_TEST

/* ---- mutual TLS --------------------------------------------------------- */

START_TEST(test_tls_client_certificate_required)
{
    struct fixture f;
    fixture_start(&f, true, 0, 0, 0);
    CURL *h = client(&f, "/echo");
    expect_failed_once(h);

    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl ecparam -name prime256v1 -genkey -noout -out client.key && "
             "openssl req -new -key client.key -subj /CN=kube-apiserver -out client.csr "
             "2>/dev/null && printf 'extendedKeyUsage=clientAuth\\n' > client.ext && "
             "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-days 1 -extfile client.ext -out client.crt 2>/dev/null",
             f.dir);
    run(cmd);
    char crt[600], key[600];
    snprintf(crt, sizeof(crt), "%s/client.crt", f.dir);
    snprintf(key, sizeof(key), "%s/client.key", f.dir);
    for (size_t v = 0; v < sizeof(only_version) / sizeof(only_version[0]); v++) {
        h = client(&f, "/echo");
        curl_easy_setopt(h, CURLOPT_SSLVERSION, only_version[v]);
        expect_failed_once(h);
        h = client(&f, "/echo");
        curl_easy_setopt(h, CURLOPT_SSLVERSION, only_version[v]);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
        expect_200_once(h);
    }
    ck_assert_double_ge(rejected(&f, "handshake_error"), 1);
    fixture_stop(&f);
}
END_TEST

/* In dir: NAME.key and NAME.crt, a client certificate with subject CN cn
 * (and the DNS name san, unless NULL) signed by the CA CA.crt/CA.key. */
static void client_cert(const char *dir, const char *name, const char *cn, const char *san,
                        const char *ca)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl ecparam -name prime256v1 -genkey -noout -out %s.key && "
             "openssl req -new -key %s.key -subj /CN=%s -out %s.csr 2>/dev/null && "
             "printf 'extendedKeyUsage=clientAuth\n%s%s\n' > %s.ext && "
             "openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key -CAcreateserial "
             "-days 1 -extfile %s.ext -out %s.crt 2>/dev/null",
             dir, name, name, cn, name, san ? "subjectAltName=DNS:" : "", san ? san : "", name,
             name, ca, ca, name, name);
    run(cmd);
}

/* A request to f with the client certificate dir/NAME.crt: 200, or no
 * answer (the handshake refused), over TLS 1.2 and 1.3 alike. */
static void expect_client(const struct fixture *f, const char *name, bool ok)
{
    char crt[600], key[600];
    snprintf(crt, sizeof(crt), "%s/%s.crt", f->dir, name);
    snprintf(key, sizeof(key), "%s/%s.key", f->dir, name);
    for (size_t v = 0; v < sizeof(only_version) / sizeof(only_version[0]); v++) {
        CURL *h = client(f, "/echo");
        curl_easy_setopt(h, CURLOPT_SSLVERSION, only_version[v]);
        curl_easy_setopt(h, CURLOPT_SSLCERT, crt);
        curl_easy_setopt(h, CURLOPT_SSLKEY, key);
        if (ok)
            expect_200_once(h);
        else
            expect_failed_once(h);
    }
}

/* client_names: a certificate the CA signed passes only with one of the
 * names, as its CN or as a DNS name. */
START_TEST(test_tls_client_names_allowed)
{
    static const char *const names[] = {"kube-apiserver", "apiserver.example", NULL};
    fixture_client_names = names;
    struct fixture f;
    fixture_start(&f, true, 0, 0, 0);
    fixture_client_names = NULL;
    client_cert(f.dir, "apiserver", "kube-apiserver", NULL, "ca");
    client_cert(f.dir, "bysan", "someone", "apiserver.example", "ca");
    client_cert(f.dir, "intruder", "kube-apiserver-not", "kube-apiserve", "ca");
    expect_client(&f, "apiserver", true);
    expect_client(&f, "bysan", true);
    expect_client(&f, "intruder", false);

    /* Names without a client CA: bad options. */
    struct kop_tls_options to = {.cert_dir = f.dir, .client_names = names, .http = f.http};
    struct kop_tls *tls = NULL;
    ck_assert_int_eq(kop_tls_new(&to, &tls), -EINVAL);
    ck_assert_ptr_null(tls);
    fixture_stop(&f);
}
END_TEST

/* The client CA file is reloaded like the serving pair: a certificate of
 * a new CA passes once the file holds that CA, one of the old CA no more. */
START_TEST(test_tls_client_ca_reloaded)
{
    struct fixture f;
    fixture_start(&f, true, 0, 0, 0);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout ca2.key -out ca2.crt -subj /CN=client-ca-2 -days 1 2>/dev/null",
             f.dir);
    run(cmd);
    client_cert(f.dir, "old", "kube-apiserver", NULL, "ca");
    client_cert(f.dir, "new", "kube-apiserver", NULL, "ca2");
    /* ca.crt also signed the serving pair: the clients keep a copy. */
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s/server-ca.crt'", f.ca, f.dir);
    run(cmd);
    snprintf(f.ca, sizeof(f.ca), "%s/server-ca.crt", f.dir);
    expect_client(&f, "old", true);
    expect_client(&f, "new", false);
    double reads = metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total");
    /* as the kubelet updates a mounted ConfigMap: a new file renamed over */
    snprintf(cmd, sizeof(cmd), "cd '%s' && cp ca2.crt ca.new && mv ca.new ca.crt", f.dir);
    run(cmd);
    for (int i = 0;
         i < 100 && metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total") == reads;
         i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_gt(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_total"),
                        reads);
    expect_client(&f, "new", true);
    expect_client(&f, "old", false);
    /* A client CA file that stops parsing keeps the one loaded. */
    snprintf(cmd, sizeof(cmd), "cd '%s' && echo garbage > ca.new && mv ca.new ca.crt", f.dir);
    run(cmd);
    double errors = metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total");
    for (int i = 0; i < 100 && metric(&f, KOP_METRIC_COUNTER,
                                      "certwatcher_read_certificate_errors_total") == errors;
         i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_gt(metric(&f, KOP_METRIC_COUNTER, "certwatcher_read_certificate_errors_total"),
                        errors);
    expect_client(&f, "new", true);
    fixture_stop(&f);
}
END_TEST

/* A --client-ca-file that became a FIFO after the flags were checked is
 * refused at once: mbedTLS's own file reader opened it and waited for a
 * writer for ever. */
START_TEST(test_tls_client_ca_fifo_refused)
{
    char *dir = kop_test_tmpdir();
    gen_certs(dir, NULL);
    char fifo[600];
    snprintf(fifo, sizeof(fifo), "%s/ca-fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    struct kop_metrics *m = kop_metrics_new(false);
    struct kop_http_server_options ho = {
        .no_listen = true, .external = fixture_external, .threads = 1, .metrics = m};
    struct kop_http_server *http = NULL;
    ck_assert_int_eq(kop_http_server_new(&ho, routes, sizeof(routes) / sizeof(routes[0]), &http),
                     0);
    struct kop_tls_options to = {.host = "127.0.0.1",
                                 .cert_dir = dir,
                                 .client_ca_file = fifo,
                                 .http = http,
                                 .metrics = m,
                                 .metric_prefix = "kop"};
    struct kop_tls *tls = NULL;
    ck_assert_int_eq(kop_tls_new(&to, &tls), -EINVAL);
    ck_assert_ptr_null(tls);
    kop_http_server_free(http);
    kop_metrics_free(m);
    kop_test_rmdir(dir);
    free(dir);
}
END_TEST

/* ---- hostile clients ---------------------------------------------------- */

/* A TCP connection to 127.0.0.1:port from the address src (NULL: any). */
static int connect_from(uint16_t port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (src) {
        struct sockaddr_in me = {.sin_family = AF_INET};
        ck_assert_int_eq(inet_pton(AF_INET, src, &me.sin_addr), 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&me, sizeof(me)), 0);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static int connect_local(uint16_t port)
{
    return connect_from(port, NULL);
}

/* Milliseconds until the server closes fd (reads and drops data), -1 after
 * limit_ms. */
static int ms_until_closed(int fd, int limit_ms)
{
    int64_t t0 = kop_clock_now_ns();
    for (;;) {
        int64_t el = (kop_clock_now_ns() - t0) / KOP_NSEC_PER_MSEC;
        if (el >= limit_ms)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(limit_ms - el)) <= 0)
            continue;
        char buf[512];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            return (int)((kop_clock_now_ns() - t0) / KOP_NSEC_PER_MSEC);
    }
}

static void assert_serving(const struct fixture *f)
{
    expect_200_once(client(f, "/echo"));
}

START_TEST(test_tls_handshake_timeout_and_garbage)
{
    struct fixture f;
    fixture_start(&f, false, 2000, 0, 0);
    int silent = connect_local(f.port);
    int half = connect_local(f.port);
    /* The first bytes of a ClientHello record, then silence. */
    const unsigned char part[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01};
    ck_assert_int_eq(send(half, part, sizeof(part), 0), (ssize_t)sizeof(part));
    /* Others are served meanwhile. */
    assert_serving(&f);
    int garbage = connect_local(f.port);
    const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ck_assert_int_eq(send(garbage, junk, sizeof(junk) - 1, 0), (ssize_t)(sizeof(junk) - 1));
    int g = ms_until_closed(garbage, 10000);
    ck_assert_int_ge(g, 0);
    ck_assert_int_lt(g, 1500); /* garbage is refused at once, not at the 2 s timeout */
    ck_assert_int_ge(ms_until_closed(silent, 10000), 0);
    ck_assert_int_ge(ms_until_closed(half, 10000), 0);
    close(silent);
    close(half);
    close(garbage);
    ck_assert_double_ge(rejected(&f, "handshake_timeout"), 2);
    ck_assert_double_ge(rejected(&f, "handshake_error"), 1);
    assert_serving(&f);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_per_ip_limit)
{
    struct fixture f;
    fixture_start(&f, false, 10000, 2, 0);
    int a = connect_local(f.port);
    int b = connect_local(f.port);
    int c = connect_local(f.port);
    /* The third is accepted and closed at once, not at the 10 s handshake
     * timeout. */
    int t = ms_until_closed(c, 8000);
    ck_assert_int_ge(t, 0);
    ck_assert_int_lt(t, 5000);
    ck_assert_double_eq(rejected(&f, "per_ip"), 1);
    close(a);
    close(b);
    close(c);
    /* Slots are given back when connections close. */
    int64_t t0 = kop_clock_now_ns();
    double before = rejected(&f, "per_ip");
    for (;;) {
        CURL *h = client(&f, "/echo");
        struct kop_test_buf buf;
        long st;
        CURLcode rc = perform(h, &buf, &st);
        free(buf.p);
        curl_easy_cleanup(h);
        if (rc == CURLE_OK) {
            ck_assert_int_eq(st, 200);
            break;
        }
        ck_assert(kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert(rejected(&f, "per_ip") >= before);
    fixture_stop(&f);
}
END_TEST

/* ---- a raw mbedTLS client, for what curl will not do -------------------- */

struct raw_tls {
    int fd;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
};

static int raw_send(void *ctx, const unsigned char *buf, size_t len)
{
    ssize_t n = send(*(int *)ctx, buf, len, MSG_NOSIGNAL);
    return n >= 0 ? (int)n : MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

static int raw_recv(void *ctx, unsigned char *buf, size_t len)
{
    ssize_t n = recv(*(int *)ctx, buf, len, 0);
    return n >= 0 ? (int)n : MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

/* The highest version the next raw_tls_connect offers (UNKNOWN: mbedTLS's
 * default, TLS 1.3). */
static mbedtls_ssl_protocol_version raw_tls_max_version = MBEDTLS_SSL_VERSION_UNKNOWN;

static void raw_tls_connect_from(struct raw_tls *r, uint16_t port, const char *src)
{
    r->fd = connect_from(port, src);
    mbedtls_entropy_init(&r->entropy);
    mbedtls_ctr_drbg_init(&r->drbg);
    mbedtls_ssl_config_init(&r->conf);
    mbedtls_ssl_init(&r->ssl);
    ck_assert_int_eq(mbedtls_ctr_drbg_seed(&r->drbg, mbedtls_entropy_func, &r->entropy, NULL, 0),
                     0);
    ck_assert_int_eq(mbedtls_ssl_config_defaults(&r->conf, MBEDTLS_SSL_IS_CLIENT,
                                                 MBEDTLS_SSL_TRANSPORT_STREAM,
                                                 MBEDTLS_SSL_PRESET_DEFAULT),
                     0);
    mbedtls_ssl_conf_authmode(&r->conf, MBEDTLS_SSL_VERIFY_NONE);
    mbedtls_ssl_conf_rng(&r->conf, mbedtls_ctr_drbg_random, &r->drbg);
    if (raw_tls_max_version != MBEDTLS_SSL_VERSION_UNKNOWN)
        mbedtls_ssl_conf_max_tls_version(&r->conf, raw_tls_max_version);
    ck_assert_int_eq(mbedtls_ssl_setup(&r->ssl, &r->conf), 0);
    mbedtls_ssl_set_bio(&r->ssl, &r->fd, raw_send, raw_recv, NULL);
    ck_assert_int_eq(mbedtls_ssl_handshake(&r->ssl), 0);
}

static void raw_tls_connect(struct raw_tls *r, uint16_t port)
{
    raw_tls_connect_from(r, port, NULL);
}

static void raw_tls_close(struct raw_tls *r)
{
    mbedtls_ssl_free(&r->ssl);
    mbedtls_ssl_config_free(&r->conf);
    mbedtls_ctr_drbg_free(&r->drbg);
    mbedtls_entropy_free(&r->entropy);
    close(r->fd);
}

/* Write all of p; false when the connection failed. */
static bool raw_tls_write(struct raw_tls *r, const void *p, size_t n)
{
    const unsigned char *b = p;
    while (n) {
        int rc = mbedtls_ssl_write(&r->ssl, b, n);
        if (rc <= 0)
            return false;
        b += rc;
        n -= (size_t)rc;
    }
    return true;
}

/*
 * A client that keeps streaming its body after the 413 (MHD answered and
 * closed its end) must not be read and decrypted for as long as it likes:
 * the connection is closed. Before, the front decrypted and dropped the
 * client's bytes for as long as it sent them, in one pump() call.
 */
/* An mbedTLS client with its defaults negotiates TLS 1.3; limited to 1.2
 * it gets 1.2. (Resumption by ticket: tests/scripts/test_openssl_sclient.sh.) */
START_TEST(test_tls_versions)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    struct raw_tls r;
    raw_tls_connect(&r, f.port);
    ck_assert_int_eq(mbedtls_ssl_get_version_number(&r.ssl), MBEDTLS_SSL_VERSION_TLS1_3);
    ck_assert_str_eq(mbedtls_ssl_get_version(&r.ssl), "TLSv1.3");
    raw_tls_close(&r);
    raw_tls_max_version = MBEDTLS_SSL_VERSION_TLS1_2;
    raw_tls_connect(&r, f.port);
    raw_tls_max_version = MBEDTLS_SSL_VERSION_UNKNOWN;
    ck_assert_int_eq(mbedtls_ssl_get_version_number(&r.ssl), MBEDTLS_SSL_VERSION_TLS1_2);
    raw_tls_close(&r);
    expect_200_once(client(&f, "/echo"));
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_stream_after_413_is_closed)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    struct raw_tls r;
    raw_tls_connect(&r, f.port);
    static const char head[] = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 1073741824\r\n\r\n";
    ck_assert(raw_tls_write(&r, head, sizeof(head) - 1));
    static char chunk[16384];
    memset(chunk, 'a', sizeof(chunk));
    size_t sent = 0, cap = (size_t)128 << 20;
    while (sent < cap && raw_tls_write(&r, chunk, sizeof(chunk)))
        sent += sizeof(chunk);
    ck_assert_msg(sent < ((size_t)32 << 20), "the front read %zu bytes after its 413", sent);
    raw_tls_close(&r);
    assert_serving(&f);
    fixture_stop(&f);
}
END_TEST

/* Read until the server closes; NUL-terminated, malloc'd. */
static char *raw_tls_read_all(struct raw_tls *r)
{
    size_t cap = 65536, len = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    for (;;) {
        int n = mbedtls_ssl_read(&r->ssl, (unsigned char *)out + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        ck_assert_uint_lt(len, cap - 1);
    }
    out[len] = '\0';
    return out;
}

/*
 * Requests libmicrohttpd refuses itself get one answer with a JSON Status
 * body, as every other error of kop: before, its HTML page, and for a bad
 * Content-Length a stray header block before it (two responses on the
 * wire, the first one's body the second one); a malformed first request
 * line got no answer at all (Go answers 400).
 */
START_TEST(test_tls_mhd_errors_are_json)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    static const struct {
        const char *req, *status, *message;
    } cases[] = {
        {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}", "HTTP/1.1 400",
         "wrong value for Content-Length"},
        {"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
         "HTTP/1.1 413", "too large value for Content-Length"},
        {"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
         "chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
         "HTTP/1.1 400", "chunked encoding was syntactically incorrect"},
        {"POST /echo HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 505",
         "version is not supported"},
        /* request lines libmicrohttpd closed on without a word */
        {"GARBAGE\r\n\r\n", "HTTP/1.1 400", "malformed HTTP request line"},
        {" GET /echo HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400", "malformed HTTP request line"},
        {"GET /echo\x01 HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 400",
         "malformed HTTP request line"},
        /* after a request served on the same connection */
        {"GET /echo HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: "
         "-1\r\n\r\n{}",
         "HTTP/1.1 200", "wrong value for Content-Length"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct raw_tls r;
        raw_tls_connect(&r, f.port);
        ck_assert(raw_tls_write(&r, cases[i].req, strlen(cases[i].req)));
        char *out = raw_tls_read_all(&r);
        raw_tls_close(&r);
        ck_assert_msg(strncmp(out, cases[i].status, 12) == 0, "case %zu: %s", i, out);
        const char *last = strstr(out + 1, "HTTP/1.1 4") ? strstr(out + 1, "HTTP/1.1 4") : out;
        /* libmicrohttpd 1.0 (Debian 13) words some refusals its own way */
        ck_assert_msg(!strstr(out, "<html>") && strstr(last, "Content-Type: application/json") &&
                          strstr(last, "\"kind\":\"Status\"") &&
                          (MHD_VERSION >= 0x01000000 || strstr(last, cases[i].message)),
                      "case %zu: %s", i, out);
        /* one error answer: no stray header block before it */
        int answers = 0;
        for (const char *p = out; (p = strstr(p, "HTTP/1.1 ")); p++)
            answers++;
        ck_assert_msg(answers == (last == out ? 1 : 2), "case %zu: %s", i, out);
        free(out);
    }
    assert_serving(&f);
    fixture_stop(&f);
}
END_TEST

/* Over its address's handshake rate a connection waits for its handshake;
 * it is not refused. Before, there was no rate at all. */
START_TEST(test_tls_handshake_rate_per_address_delays)
{
    struct fixture f;
    fixture_hs_rate = 1;
    fixture_start(&f, false, 0, 2, 0); /* burst 2, then 1 per second */
    fixture_hs_rate = 0;
    for (int i = 0; i < 4; i++) {
        CURL *h = client(&f, "/echo");
        curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
        expect_200_once(h);
    }
    ck_assert_double_ge(metric(&f, KOP_METRIC_COUNTER, "kop_tls_handshakes_throttled_total"), 1);
    ck_assert_double_eq(rejected(&f, "per_ip"), 0);
    ck_assert_double_eq(rejected(&f, "handshake_timeout"), 0);
    fixture_stop(&f);
}
END_TEST

/* The apiserver is one address with many connections: 256 keep-alive
 * connections opened back to back all work with the default limits. */
START_TEST(test_tls_256_connections_from_one_address)
{
    struct fixture f;
    fixture_start(&f, false, 0, 256, 0);
    enum { N = 256 };
    struct raw_tls *r = calloc(N, sizeof(*r));
    ck_assert_ptr_nonnull(r);
    static const char req[] = "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n";
    /* Each connection sends its first request at once, as a client does;
     * then every one of them is used again (keep-alive). */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            if (round == 0)
                raw_tls_connect(&r[i], f.port);
            ck_assert(raw_tls_write(&r[i], req, sizeof(req) - 1));
            unsigned char buf[512];
            int n = mbedtls_ssl_read(&r[i].ssl, buf, sizeof(buf) - 1);
            ck_assert_int_gt(n, 12);
            ck_assert_int_eq(memcmp(buf, "HTTP/1.1 200", 12), 0);
        }
    }
    for (int i = 0; i < N; i++)
        raw_tls_close(&r[i]);
    free(r);
    ck_assert_double_eq(metric(&f, KOP_METRIC_COUNTER, "kop_tls_handshakes_throttled_total"), 0);
    ck_assert_double_eq(rejected(&f, "per_ip"), 0);
    fixture_stop(&f);
}
END_TEST

/* Send the rest of a GET /echo whose first bytes are head, expect a 200. */
static void raw_tls_get_rest(struct raw_tls *r, const char *rest)
{
    ck_assert(raw_tls_write(r, rest, strlen(rest)));
    unsigned char buf[512];
    int n = mbedtls_ssl_read(&r->ssl, buf, sizeof(buf) - 1);
    ck_assert_int_gt(n, 12);
    ck_assert_int_eq(memcmp(buf, "HTTP/1.1 200", 12), 0);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/*
 * At max_connections, a few addresses holding idle keep-alive connections
 * must not keep every other client out until their idle timeout: a
 * newcomer whose address holds at least two fewer than the address that
 * holds most takes the slot of that address's longest-idle connection. A
 * request on its way is never cut, and newcomers of the biggest holder, or
 * of an address that would end with more than it, are still refused.
 * Before, every newcomer was refused while the front was full.
 */
START_TEST(test_tls_full_front_evicts_idle_of_biggest_address)
{
    struct fixture f;
    fixture_max_conns = 6;
    fixture_start(&f, false, 10000, 4, 0);
    fixture_max_conns = 0;
    struct raw_tls a[4], b[2], c;
    for (int i = 0; i < 4; i++)
        raw_tls_connect_from(&a[i], f.port, "127.0.0.2");
    /* a[0], the oldest, has begun a request: it is not idle */
    ck_assert(raw_tls_write(&a[0], "GET /echo HTTP/1.1\r\n", 20));
    for (int i = 0; i < 2; i++)
        raw_tls_connect_from(&b[i], f.port, "127.0.0.3");
    sleep_ms(200); /* a[0]'s bytes reach the HTTP server */
    ck_assert_double_eq(metric(&f, KOP_METRIC_GAUGE, "kop_tls_connections_active"), 6);

    /* the front is full: a client of another address is served all the same */
    raw_tls_connect_from(&c, f.port, "127.0.0.1");
    raw_tls_get_rest(&c, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
    ck_assert_double_eq(rejected(&f, "evicted"), 1);
    ck_assert_double_eq(rejected(&f, "max_connections"), 0);
    int t = ms_until_closed(a[1].fd, 5000); /* the longest idle */
    ck_assert_int_ge(t, 0);
    /* the request on its way is finished */
    raw_tls_get_rest(&a[0], "Host: x\r\n\r\n");

    /* full again (a[0], a[2], a[3], b[0], b[1], c): 127.0.0.2 holds most,
     * and its own newcomers are refused, as are 127.0.0.3's (2 against 3) */
    int t0 = connect_from(f.port, "127.0.0.2");
    ck_assert_int_ge(ms_until_closed(t0, 5000), 0);
    int t1 = connect_from(f.port, "127.0.0.3");
    ck_assert_int_ge(ms_until_closed(t1, 5000), 0);
    close(t0);
    close(t1);
    ck_assert_double_eq(rejected(&f, "max_connections"), 2);
    ck_assert_double_eq(rejected(&f, "evicted"), 1);
    for (int i = 0; i < 4; i++)
        raw_tls_close(&a[i]);
    for (int i = 0; i < 2; i++)
        raw_tls_close(&b[i]);
    raw_tls_close(&c);
    fixture_stop(&f);
}
END_TEST

/* A client that stops reading a large response must not hold up others. */
static atomic_int stalled;
static atomic_bool stall_release; /* the test lets the stalled client go on */
static atomic_bool stall_capped;  /* ... or it gave up waiting for that */

static size_t stall_write(char *ptr, size_t size, size_t n, void *ud)
{
    if (!atomic_exchange(&stalled, 1)) {
        /* Stalled until the test is done (30 s at most, so a failed test
         * does not leave the thread hanging). */
        int64_t t0 = kop_clock_now_ns();
        while (!atomic_load(&stall_release)) {
            if (kop_clock_now_ns() - t0 > 30 * KOP_NSEC_PER_SEC) {
                atomic_store(&stall_capped, true);
                break;
            }
            struct timespec ts = {0, 2 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return size * n;
}

static void *stall_thread(void *arg)
{
    const struct fixture *f = arg;
    CURL *h = client(f, "/big");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, stall_write);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 1024L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L); /* the stall counts too */
    CURLcode rc = curl_easy_perform(h);
    curl_easy_cleanup(h);
    return (void *)(intptr_t)rc;
}

START_TEST(test_tls_slow_reader_does_not_block_others)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    atomic_store(&stalled, 0);
    atomic_store(&stall_release, false);
    atomic_store(&stall_capped, false);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, stall_thread, &f), 0);
    while (!atomic_load(&stalled)) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* While the client stalls (until released below), others get answers. */
    for (int i = 0; i < 5; i++)
        assert_serving(&f);
    ck_assert_msg(!atomic_load(&stall_capped), "others were served only after the stall ended");
    atomic_store(&stall_release, true);
    void *ret = NULL;
    pthread_join(th, &ret);
    ck_assert_int_eq((int)(intptr_t)ret, CURLE_OK); /* and receives everything in the end */
    fixture_stop(&f);
}
END_TEST

START_TEST(test_tls_idle_timeout)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 300);
    int fd = connect_local(f.port);
    CURL *h = client(&f, "/echo");
    struct kop_test_buf b;
    long st;
    ck_assert_int_eq(perform(h, &b, &st), CURLE_OK);
    free(b.p);
    /* The idle keep-alive connection is closed; curl reconnects. */
    int64_t t0 = kop_clock_now_ns();
    while (rejected(&f, "idle_timeout") < 1 && kop_clock_now_ns() - t0 < 20 * KOP_NSEC_PER_SEC) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert_double_ge(rejected(&f, "idle_timeout"), 1);
    ck_assert_int_eq(perform(h, &b, &st), CURLE_OK);
    ck_assert_int_eq(st, 200);
    long connects = 0;
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
    ck_assert_int_eq(connects, 1);
    free(b.p);
    curl_easy_cleanup(h);
    close(fd);
    fixture_stop(&f);
}
END_TEST

struct slow_call {
    const struct fixture *f;
    CURLcode rc;
    long status;
};

static void *slow_thread(void *arg)
{
    struct slow_call *sc = arg;
    CURL *h = client(sc->f, "/slow");
    struct kop_test_buf b;
    sc->rc = perform(h, &b, &sc->status);
    free(b.p);
    curl_easy_cleanup(h);
    return NULL;
}

START_TEST(test_tls_shutdown_finishes_in_flight)
{
    struct fixture f;
    fixture_start(&f, false, 0, 0, 0);
    atomic_store(&slow_started, 0);
    struct slow_call sc = {.f = &f};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, slow_thread, &sc), 0);
    for (int i = 0; i < 1000 && !atomic_load(&slow_started); i++) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_assert(atomic_load(&slow_started));
    ck_assert_int_eq(kop_tls_shutdown(f.tls, 5000), 0);
    ck_assert(!kop_tls_ready(f.tls));
    pthread_join(th, NULL);
    ck_assert_int_eq(sc.rc, CURLE_OK);
    ck_assert_int_eq(sc.status, 200);
    /* Not accepting any more. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(f.port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_ne(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    fixture_stop(&f);
}
END_TEST

static Suite *tls_suite(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_tls_request_works);
    tcase_add_test(tc, test_tls_handshake_thread_is_nice);
    tcase_add_test(tc, test_tls_responses_across_record_boundaries);
    tcase_add_test(tc, test_tls_alpn_h2_falls_back_to_http11);
    tcase_add_test(tc, test_tls_old_versions_refused);
    tcase_add_test(tc, test_tls_concurrent_keepalive_and_reload);
    tcase_add_test(tc, test_tls_handshake_burst_with_keepalive);
    tcase_add_test(tc, test_tls_shutdown_during_handshakes);
    tcase_add_test(tc, test_tls_bad_pair_keeps_old);
    tcase_add_test(tc, test_tls_fifo_cert_keeps_old);
    tcase_add_test(tc, test_tls_client_certificate_required);
    tcase_add_test(tc, test_tls_client_ca_fifo_refused);
    tcase_add_test(tc, test_tls_client_names_allowed);
    tcase_add_test(tc, test_tls_client_ca_reloaded);
    tcase_add_test(tc, test_tls_versions);
    tcase_add_test(tc, test_tls_mhd_errors_are_json);
    tcase_add_test(tc, test_tls_handshake_timeout_and_garbage);
    tcase_add_test(tc, test_tls_per_ip_limit);
    tcase_add_test(tc, test_tls_full_front_evicts_idle_of_biggest_address);
    tcase_add_test(tc, test_tls_slow_reader_does_not_block_others);
    tcase_add_test(tc, test_tls_stream_after_413_is_closed);
    tcase_add_test(tc, test_tls_handshake_rate_per_address_delays);
    tcase_add_test(tc, test_tls_idle_timeout);
    tcase_add_test(tc, test_tls_shutdown_finishes_in_flight);
    tcase_add_checked_fixture(tc, external_case, NULL);
    suite_add_tcase(s, tc);
    /* behind the front, MHD running its own threads */
    TCase *thr = tcase_create("mhd_threads");
    tcase_set_timeout(thr, 60);
    tcase_add_checked_fixture(thr, threads_case, external_case);
    tcase_add_test(thr, test_tls_request_works);
    tcase_add_test(thr, test_tls_responses_across_record_boundaries);
    tcase_add_test(thr, test_tls_slow_reader_does_not_block_others);
    tcase_add_test(thr, test_tls_stream_after_413_is_closed);
    tcase_add_test(thr, test_tls_idle_timeout);
    tcase_add_test(thr, test_tls_full_front_evicts_idle_of_biggest_address);
    tcase_add_test(thr, test_tls_shutdown_finishes_in_flight);
    suite_add_tcase(s, thr);
    /* 256 handshakes on each side: slow under sanitizers */
    TCase *many = tcase_create("many");
    tcase_set_timeout(many, 600);
    tcase_add_test(many, test_tls_256_connections_from_one_address);
    suite_add_tcase(s, many);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = kop_test_run(tls_suite());
    curl_global_cleanup();
    return rc;
}
