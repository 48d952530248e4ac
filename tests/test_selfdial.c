/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for the webhook's readiness self-dial: it passes against a TLS
 * front with its HTTP server (with and without a required client
 * certificate), and fails, within its time bound, against a closed port,
 * a listener that accepts but never speaks TLS, one that answers garbage,
 * and a TLS front whose HTTP server was stopped; results are cached for
 * cache_ms.
 */
#include "kop/selfdial.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kop/http.h"
#include "kop/metrics.h"
#include "kop/tls.h"
#include "kubetest.h"
#include "testutil.h"

static void ok_handler(void *userdata, const struct kop_http_request *req,
                       struct kop_http_response *resp)
{
    resp->status = 200;
}

static const struct kop_http_route routes[] = {
    {.path = "/convert", .methods = KOP_HTTP_POST, .max_body = 1024, .fn = ok_handler},
};

struct fixture {
    char *dir;
    char ca[512];
    struct kop_metrics *metrics;
    struct kop_http_server *http;
    struct kop_tls *tls;
    uint16_t port;
};

static void fixture_start(struct fixture *f, bool mtls)
{
    memset(f, 0, sizeof(*f));
    f->dir = kop_test_tmpdir();
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "'%s/scripts/gen-certs.sh' '%s' >/dev/null",
             getenv("KOP_SOURCE_ROOT"), f->dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(f->ca, sizeof(f->ca), "%s/ca.crt", f->dir);
    f->metrics = kop_metrics_new(false);
    const struct kop_http_server_options ho = {
        .no_listen = true, .name = "webhook", .metrics = f->metrics};
    ck_assert_int_eq(kop_http_server_new(&ho, routes, 1, &f->http), 0);
    ck_assert_int_eq(kop_http_server_start(f->http), 0);
    const struct kop_tls_options to = {
        .host = "127.0.0.1",
        .cert_dir = f->dir,
        .client_ca_file = mtls ? f->ca : NULL,
        .http = f->http,
        .metrics = f->metrics,
    };
    ck_assert_int_eq(kop_tls_new(&to, &f->tls), 0);
    ck_assert_int_eq(kop_tls_start(f->tls), 0);
    f->port = kop_tls_port(f->tls);
}

static void fixture_stop(struct fixture *f)
{
    kop_tls_free(f->tls);
    kop_http_server_free(f->http);
    kop_metrics_free(f->metrics);
    kop_test_rmdir(f->dir);
    free(f->dir);
}

static struct kop_selfdial *dialer(const char *host, uint16_t port, int timeout_ms, int cache_ms)
{
    const struct kop_selfdial_options o = {
        .host = host, .port = port, .timeout_ms = timeout_ms, .cache_ms = cache_ms};
    struct kop_selfdial *d = NULL;
    ck_assert_int_eq(kop_selfdial_new(&o, &d), 0);
    return d;
}

/* A loopback listener (backlog only, nothing accepts): the kernel completes
 * the TCP handshake, then nothing is ever said. Returns its fd. */
static int silent_listener(uint16_t *ret_port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    socklen_t l = sizeof(sa);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &l), 0);
    *ret_port = ntohs(sa.sin_port);
    return fd;
}

START_TEST(test_selfdial_serving)
{
    struct fixture f;
    fixture_start(&f, false);
    /* "" (every address) dials loopback, as does the exact host */
    struct kop_selfdial *d = dialer("", f.port, 0, 0);
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    kop_selfdial_free(d);
    d = dialer("127.0.0.1", f.port, 0, 0);
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    kop_selfdial_free(d);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_selfdial_client_certificate_required)
{
    struct fixture f;
    fixture_start(&f, true);
    /* Told that the server wants a client certificate: its refusal of
     * the check's empty one (in TLS 1.3, after the handshake is over for
     * the client) is the server answering. */
    const struct kop_selfdial_options o = {
        .host = "127.0.0.1", .port = f.port, .client_auth = true};
    struct kop_selfdial *d = NULL;
    ck_assert_int_eq(kop_selfdial_new(&o, &d), 0);
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    kop_selfdial_free(d);
    /* Not told: the refusal is a failed check. */
    d = dialer("127.0.0.1", f.port, 0, 0);
    ck_assert_int_eq(kop_selfdial_check(d), -EPROTO);
    kop_selfdial_free(d);
    fixture_stop(&f);
}
END_TEST

/* The TLS front still handshakes, but nothing answers HTTP behind it. */
START_TEST(test_selfdial_http_down)
{
    struct fixture f;
    fixture_start(&f, false);
    ck_assert_int_eq(kop_http_server_shutdown(f.http, 0), 0);
    struct kop_selfdial *d = dialer("127.0.0.1", f.port, 2000, 0);
    int r = kop_selfdial_check(d);
    ck_assert_msg(r < 0, "passed without an HTTP answer");
    kop_selfdial_free(d);
    fixture_stop(&f);
}
END_TEST

START_TEST(test_selfdial_refused)
{
    uint16_t port;
    int fd = silent_listener(&port);
    close(fd); /* the port is free again: connect is refused */
    struct kop_selfdial *d = dialer("127.0.0.1", port, 0, 0);
    ck_assert_int_eq(kop_selfdial_check(d), -ECONNREFUSED);
    kop_selfdial_free(d);
}
END_TEST

/* Accepted by the kernel, never answered: fails at the time bound, not
 * later (the bound is what keeps /readyz within the probe timeout). */
START_TEST(test_selfdial_silent_times_out)
{
    uint16_t port;
    int fd = silent_listener(&port);
    struct kop_selfdial *d = dialer("127.0.0.1", port, 300, 0);
    long t0 = kop_test_now_ms();
    ck_assert_int_eq(kop_selfdial_check(d), -ETIMEDOUT);
    long took = kop_test_now_ms() - t0;
    ck_assert_msg(took >= 290 && took < 3000, "took %ld ms with a 300 ms bound", took);
    kop_selfdial_free(d);
    close(fd);
}
END_TEST

struct garbage {
    int lfd;
    pthread_t thread;
};

/* Accept one connection and answer with plain HTTP instead of TLS. */
static void *garbage_main(void *arg)
{
    struct garbage *g = arg;
    int c = accept(g->lfd, NULL, NULL);
    if (c >= 0) {
        static const char msg[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
        (void)!write(c, msg, sizeof(msg) - 1);
        kop_test_sleep_ms(200);
        close(c);
    }
    return NULL;
}

START_TEST(test_selfdial_not_tls)
{
    struct garbage g;
    uint16_t port;
    g.lfd = silent_listener(&port);
    ck_assert_int_eq(pthread_create(&g.thread, NULL, garbage_main, &g), 0);
    struct kop_selfdial *d = dialer("127.0.0.1", port, 5000, 0);
    int r = kop_selfdial_check(d);
    ck_assert_msg(r == -EPROTO, "plain HTTP passed as TLS: %d", r);
    pthread_join(g.thread, NULL);
    kop_selfdial_free(d);
    close(g.lfd);
}
END_TEST

/* A result is reused for cache_ms, then the port is dialled again. */
START_TEST(test_selfdial_cache)
{
    struct fixture f;
    fixture_start(&f, false);
    struct kop_selfdial *d = dialer("127.0.0.1", f.port, 0, 60000);
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    uint16_t port = f.port;
    fixture_stop(&f);
    /* the listener is gone, the cached success stands */
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    kop_selfdial_free(d);

    /* a short cache: once it expired the port is dialled again */
    fixture_start(&f, false);
    d = dialer("127.0.0.1", f.port, 0, 50);
    ck_assert_int_eq(kop_selfdial_check(d), 0);
    fixture_stop(&f);
    kop_test_sleep_ms(100);
    ck_assert_int_eq(kop_selfdial_check(d), -ECONNREFUSED);
    kop_selfdial_free(d);
    (void)port;
}
END_TEST

START_TEST(test_selfdial_bad_options)
{
    struct kop_selfdial *d = NULL;
    const struct kop_selfdial_options none = {.host = "127.0.0.1"};
    ck_assert_int_eq(kop_selfdial_new(&none, &d), -EINVAL);
    kop_selfdial_free(NULL);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("selfdial");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_selfdial_serving);
    tcase_add_test(tc, test_selfdial_client_certificate_required);
    tcase_add_test(tc, test_selfdial_http_down);
    tcase_add_test(tc, test_selfdial_refused);
    tcase_add_test(tc, test_selfdial_silent_times_out);
    tcase_add_test(tc, test_selfdial_not_tls);
    tcase_add_test(tc, test_selfdial_cache);
    tcase_add_test(tc, test_selfdial_bad_options);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(suite());
}
