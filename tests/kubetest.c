/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the integration tests (see kubetest.h): kubesim as a
 * child process, libcurl requests, Prometheus text and polling.
 */
#include "kubetest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kop/curltls.h"

long kop_test_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kop_test_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

bool kop_test_eventually(kop_test_cond_fn cond, const void *arg, long timeout_ms)
{
    long end = kop_test_now_ms() + timeout_ms;
    do {
        if (cond(arg))
            return true;
        kop_test_sleep_ms(50);
    } while (kop_test_now_ms() < end);
    return cond(arg);
}

/* ---- kubesim ----------------------------------------------------------------------------- */

#define KUBESIM_MAX_ARGS 64

void kop_test_kubesim_start(struct kop_test_kubesim *ks, const struct kop_test_kubesim_options *o)
{
    char *argv[KUBESIM_MAX_ARGS];
    size_t n = 0;
    memset(ks, 0, sizeof(*ks));
    argv[n++] = (char *)kop_test_bin("kubesim");
    if (o->listen) {
        argv[n++] = "--listen";
        argv[n++] = (char *)o->listen;
    }
    if (o->kubeconfig) {
        argv[n++] = "--kubeconfig-out";
        argv[n++] = (char *)o->kubeconfig;
        snprintf(ks->kubeconfig, sizeof(ks->kubeconfig), "%s", o->kubeconfig);
    }
    if (o->ca) {
        argv[n++] = "--ca-out";
        argv[n++] = (char *)o->ca;
        snprintf(ks->ca, sizeof(ks->ca), "%s", o->ca);
    }
    if (o->token) {
        argv[n++] = "--token";
        argv[n++] = (char *)o->token;
        snprintf(ks->token, sizeof(ks->token), "%s", o->token);
    }
    if (!o->lenient_fields)
        argv[n++] = "--strict-fields";
    for (size_t i = 0; o->args && o->args[i]; i++) {
        ck_assert_msg(n < KUBESIM_MAX_ARGS - 1, "too many kubesim arguments");
        argv[n++] = o->args[i];
    }
    argv[n] = NULL;
    ck_assert_int_eq(kop_test_spawn(&ks->proc, argv), 0);
    char *line = NULL;
    long at =
        kop_test_wait_for(&ks->proc, 0, "https://", o->timeout_ms ? o->timeout_ms : 10000, &line);
    ck_assert_msg(at > 0, "kubesim did not print its URL");
    line[strcspn(line, "\r\n")] = '\0';
    snprintf(ks->url, sizeof(ks->url), "%s", line);
    free(line);
}

int kop_test_kubesim_stop(struct kop_test_kubesim *ks, int sig, int timeout_ms)
{
    return kop_test_stop(&ks->proc, sig, timeout_ms);
}

/* ---- HTTP -------------------------------------------------------------------------------- */

size_t kop_test_buf_write(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct kop_test_buf *b = userdata;
    size_t n = size * nmemb;
    char *np = realloc(b->p, b->len + n + 1);
    if (!np)
        return 0;
    b->p = np;
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* One attempt; the HTTP code (0: transport error), body collected into b. */
static long http_once(const struct kop_test_http_options *o, const char *method, const char *url,
                      const char *body, struct kop_test_buf *b)
{
    CURL *h = o->handle;
    if (h)
        curl_easy_reset(h);
    else
        h = curl_easy_init();
    if (!h)
        return 0;
    struct curl_slist *hdrs = NULL;
    char line[512];
    if (o->token) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", o->token);
        hdrs = curl_slist_append(hdrs, line);
    }
    if (o->ctype) {
        snprintf(line, sizeof(line), "Content-Type: %s", o->ctype);
        hdrs = curl_slist_append(hdrs, line);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    if (o->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (method)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    if (o->timeout_s > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT, o->timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    if (!o->handle)
        curl_easy_cleanup(h);
    return code;
}

long kop_test_http(const struct kop_test_http_options *o, const char *method, const char *url,
                   const char *body, char **ret_body)
{
    long code = 0;
    for (int attempt = 0; attempt < (o->attempts > 0 ? o->attempts : 1); attempt++) {
        struct kop_test_buf b = {0};
        code = http_once(o, method, url, body, &b);
        bool again = code == 0 || code == 429 || code >= 500;
        if (!again || o->attempts <= 0) {
            if (ret_body)
                *ret_body = b.p ? b.p : strdup("");
            else
                free(b.p);
            return code;
        }
        free(b.p);
        kop_test_sleep_ms(50);
    }
    if (ret_body)
        *ret_body = strdup("");
    return code;
}

/* ---- Prometheus text ------------------------------------------------------------------------ */

double kop_test_metric_value(const char *text, const char *name_with_labels)
{
    double v = -1;
    size_t nl = strlen(name_with_labels);
    for (const char *line = text; line && *line;) {
        const char *next = strchr(line, '\n');
        if (strncmp(line, name_with_labels, nl) == 0 && line[nl] == ' ')
            v = strtod(line + nl + 1, NULL);
        line = next ? next + 1 : NULL;
    }
    return v;
}

/* Whether needle occurs in [p, p + len). */
static bool contains(const char *p, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++) {
        if (memcmp(p + i, needle, n) == 0)
            return true;
    }
    return false;
}

double kop_test_metric_sum(const char *text, const char *name, const char *label)
{
    double sum = -1;
    size_t nl = strlen(name);
    for (const char *line = text; line && *line;) {
        const char *next = strchr(line, '\n');
        size_t len = next ? (size_t)(next - line) : strlen(line);
        if (strncmp(line, name, nl) == 0 && (line[nl] == '{' || line[nl] == ' ') &&
            (!label || contains(line, len, label))) {
            const char *sp = NULL;
            for (size_t i = len; i > 0; i--) {
                if (line[i - 1] == ' ') {
                    sp = line + i - 1;
                    break;
                }
            }
            if (sp)
                sum = (sum < 0 ? 0 : sum) + strtod(sp + 1, NULL);
        }
        line = next ? next + 1 : NULL;
    }
    return sum;
}

json_t *kop_test_api(const struct kop_test_http_options *o, const char *base, const char *method,
                     const char *path, const char *body, long want)
{
    char url[1024];
    char *out = NULL;
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct kop_test_http_options po = *o;
    if (strcmp(method, "PATCH") == 0)
        po.ctype = "application/merge-patch+json";
    else if (!po.ctype)
        po.ctype = "application/json";
    long code = kop_test_http(&po, method, url, body, &out);
    ck_assert_msg(code == want, "%s %s: got %ld want %ld: %.400s", method, path, code, want,
                  out ? out : "");
    json_t *v = json_loads(out ? out : "", 0, NULL);
    free(out);
    return v;
}

json_t *kop_test_api_get(const struct kop_test_http_options *o, const char *base, const char *path)
{
    char url[1024];
    char *out = NULL;
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct kop_test_http_options po = *o;
    if (!po.ctype)
        po.ctype = "application/json";
    long code = kop_test_http(&po, "GET", url, NULL, &out);
    ck_assert_msg(code == 200 || code == 404, "GET %s: %ld %.300s", path, code, out ? out : "");
    json_t *v = code == 200 ? json_loads(out ? out : "", 0, NULL) : NULL;
    free(out);
    return v;
}
