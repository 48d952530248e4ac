/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests for kop's libcurl TLS setup (kop/curltls.h), against kubesim's
 * serving certificate (DNS localhost, IP 127.0.0.1 and ::1):
 * https://127.0.0.1 verifies, whatever libcurl's TLS backend (mbedTLS 3.6
 * matches iPAddress SANs itself, where 2.28 needed kop's own check); an
 * address the certificate does not name (127.0.0.2, sent to kubesim with
 * CURLOPT_CONNECT_TO) and a wrong CA still fail; a name (localhost) is
 * verified as usual. And the TLS floor: a server that speaks only TLS 1.1 (openssl s_server) is
 * refused by a handle set up here, and answers one that is not.
 */
#include "kop/curltls.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubetest.h"
#include "testutil.h"

static struct kop_test_kubesim sim;
static char *tmpdir;
static char ca[1024];
static int port;

static void setup(void)
{
    tmpdir = kop_test_tmpdir();
    snprintf(ca, sizeof(ca), "%s/ca.crt", tmpdir);
    const struct kop_test_kubesim_options o = {.ca = ca, .token = "curltls"};
    kop_test_kubesim_start(&sim, &o);
    const char *colon = strrchr(sim.url, ':');
    ck_assert_ptr_nonnull(colon);
    port = (int)strtol(colon + 1, NULL, 10);
    ck_assert_int_gt(port, 0);
}

static void teardown(void)
{
    kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    kop_test_rmdir(tmpdir);
    free(tmpdir);
}

/* GET host/version with kop_curltls_setup (or not); the result, and the error
 * text in err. connect_ip: the address actually dialled, NULL: host's. */
static CURLcode get_version(const char *host, const char *connect_ip, const char *cafile,
                            bool check, char err[CURL_ERROR_SIZE])
{
    CURL *h = curl_easy_init();
    ck_assert_ptr_nonnull(h);
    char url[256], ct[256];
    snprintf(url, sizeof(url), "https://%s:%d/version", host, port);
    struct curl_slist *to = NULL;
    if (connect_ip) {
        snprintf(ct, sizeof(ct), "%s:%d:%s:%d", host, port, connect_ip, port);
        to = curl_slist_append(NULL, ct);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, to);
    }
    struct kop_test_buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, cafile);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    err[0] = '\0';
    if (check)
        ck_assert_int_eq(kop_curltls_setup(h), 0);
    CURLcode r = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (r == CURLE_OK) /* /version needs no token */
        ck_assert_int_eq(code, 200);
    curl_slist_free_all(to);
    free(b.p);
    curl_easy_cleanup(h);
    return r;
}

START_TEST(test_curltls_address_in_certificate)
{
    char err[CURL_ERROR_SIZE];
    CURLcode r = get_version("127.0.0.1", NULL, ca, true, err);
    ck_assert_msg(r == CURLE_OK, "https://127.0.0.1: %s", err);
    /* the name is checked as before */
    r = get_version("localhost", "127.0.0.1", ca, true, err);
    ck_assert_msg(r == CURLE_OK, "https://localhost: %s", err);
    r = get_version("localhost", "127.0.0.1", ca, false, err);
    ck_assert_msg(r == CURLE_OK, "https://localhost without the check: %s", err);
}
END_TEST

START_TEST(test_curltls_other_address_fails)
{
    /* The certificate names 127.0.0.1 and ::1, not 127.0.0.2. */
    char err[CURL_ERROR_SIZE];
    CURLcode r = get_version("127.0.0.2", "127.0.0.1", ca, true, err);
    ck_assert_int_eq(r, CURLE_PEER_FAILED_VERIFICATION);
}
END_TEST

START_TEST(test_curltls_wrong_ca_fails)
{
    /* The chain is still checked: a CA that did not sign kubesim's pair. */
    char dir[1024], cmd[2048], other[1200];
    snprintf(dir, sizeof(dir), "%s/other", tmpdir);
    snprintf(cmd, sizeof(cmd), "'%s/scripts/gen-certs.sh' '%s' >/dev/null",
             getenv("KOP_SOURCE_ROOT"), dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(other, sizeof(other), "%s/ca.crt", dir);
    char err[CURL_ERROR_SIZE];
    CURLcode r = get_version("127.0.0.1", NULL, other, true, err);
    ck_assert_int_eq(r, CURLE_PEER_FAILED_VERIFICATION);
}
END_TEST

/* ---- the TLS floor --------------------------------------------------------- */

static char *floor_dir;
static struct kop_test_proc tls11;
static int tls11_port;

/* openssl s_server speaking TLS 1.1 only (security level 0: OpenSSL 3
 * refuses TLS below 1.2 otherwise), with a pair from scripts/gen-certs.sh,
 * on a loopback port the kernel picks. */
static void setup_floor(void)
{
    floor_dir = kop_test_tmpdir();
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "'%s/scripts/gen-certs.sh' '%s' >/dev/null && cd '%s' && exec openssl s_server "
             "-accept 127.0.0.1:0 -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0' -cert tls.crt -key "
             "tls.key -www </dev/null",
             getenv("KOP_SOURCE_ROOT"), floor_dir, floor_dir);
    char *const argv[] = {(char *)"/bin/sh", (char *)"-c", cmd, NULL};
    ck_assert_int_eq(kop_test_spawn(&tls11, argv), 0);
    char *line = NULL;
    ck_assert_int_ge(kop_test_wait_for(&tls11, 0, "ACCEPT ", 20000, &line), 0);
    const char *colon = strrchr(line, ':');
    ck_assert_ptr_nonnull(colon);
    tls11_port = (int)strtol(colon + 1, NULL, 10);
    free(line);
    ck_assert_int_gt(tls11_port, 0);
}

static void teardown_floor(void)
{
    kop_test_stop(&tls11, SIGTERM, 5000);
    kop_test_rmdir(floor_dir);
    free(floor_dir);
}

static bool curl_on_openssl(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    return v->ssl_version && strncmp(v->ssl_version, "OpenSSL/", 8) == 0;
}

/* GET / from the TLS 1.1 server, with kop_curltls_setup or without. On
 * OpenSSL the handle allows the ciphers TLS 1.1 needs (security level 0),
 * so that only the floor stands between it and the server. */
static CURLcode get_tls11(bool setup, char err[CURL_ERROR_SIZE])
{
    CURL *h = curl_easy_init();
    ck_assert_ptr_nonnull(h);
    char url[128], cafile[1200];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/", tls11_port);
    snprintf(cafile, sizeof(cafile), "%s/ca.crt", floor_dir);
    struct kop_test_buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, cafile);
    if (curl_on_openssl())
        curl_easy_setopt(h, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:@SECLEVEL=0");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, err);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    err[0] = '\0';
    if (setup)
        ck_assert_int_eq(kop_curltls_setup(h), 0);
    CURLcode r = curl_easy_perform(h);
    free(b.p);
    curl_easy_cleanup(h);
    return r;
}

/* Every handle kop sets up asks for TLS 1.2 or later: a server that
 * offers only TLS 1.1 fails the handshake. */
START_TEST(test_curltls_tls11_server_refused)
{
    char err[CURL_ERROR_SIZE];
    if (curl_on_openssl()) {
        /* Without the floor the same handle gets an answer: the refusal
         * below is the floor's. (Other backends are not opened up to TLS
         * 1.1 the same way; the refusal is checked all the same.) */
        CURLcode r = get_tls11(false, err);
        ck_assert_msg(r == CURLE_OK, "TLS 1.1 without the floor: %s", err);
    }
    CURLcode r = get_tls11(true, err);
    ck_assert_msg(r == CURLE_SSL_CONNECT_ERROR, "TLS 1.1 with the floor: %d %s", (int)r, err);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("curltls");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_curltls_address_in_certificate);
    tcase_add_test(tc, test_curltls_other_address_fails);
    tcase_add_test(tc, test_curltls_wrong_ca_fails);
    suite_add_tcase(s, tc);
    TCase *fl = tcase_create("floor");
    tcase_set_timeout(fl, 60);
    tcase_add_checked_fixture(fl, setup_floor, teardown_floor);
    tcase_add_test(fl, test_curltls_tls11_server_refused);
    suite_add_tcase(s, fl);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int r = kop_test_run(suite());
    curl_global_cleanup();
    return r;
}
