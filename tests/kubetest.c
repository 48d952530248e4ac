/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the integration tests (see kubetest.h): kubesim as a
 * child process, libcurl requests, Prometheus text and polling.
 */
#include "kubetest.h"

#include <stdarg.h>
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

bool kop_test_eventually_every(kop_test_cond_fn cond, const void *arg, long timeout_ms,
                               long every_ms)
{
    long end = kop_test_now_ms() + timeout_ms;
    do {
        if (cond(arg))
            return true;
        kop_test_sleep_ms(every_ms);
    } while (kop_test_now_ms() < end);
    return cond(arg);
}

bool kop_test_eventually(kop_test_cond_fn cond, const void *arg, long timeout_ms)
{
    return kop_test_eventually_every(cond, arg, timeout_ms, 50);
}

/* ---- a suite's scratch state ------------------------------------------------------------- */

void kop_test_scratch_init(struct kop_test_scratch *s)
{
    memset(s, 0, sizeof(*s));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    s->curl = curl_easy_init();
    ck_assert_ptr_nonnull(s->curl);
    s->dir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(s->dir);
    snprintf(s->ca, sizeof(s->ca), "%s/ca.pem", s->dir);
    snprintf(s->kubeconfig, sizeof(s->kubeconfig), "%s/kubeconfig", s->dir);
}

void kop_test_scratch_free(struct kop_test_scratch *s)
{
    if (s->curl)
        curl_easy_cleanup(s->curl);
    if (s->dir)
        kop_test_rmdir(s->dir);
    free(s->dir);
    memset(s, 0, sizeof(*s));
    curl_global_cleanup();
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

void kop_test_scratch_kubesim(const struct kop_test_scratch *s, struct kop_test_kubesim *ks,
                              const char *token, char *const *args)
{
    const struct kop_test_kubesim_options o = {.listen = "127.0.0.1:0",
                                               .kubeconfig = s->kubeconfig,
                                               .ca = s->ca,
                                               .token = token,
                                               .args = args};
    kop_test_kubesim_start(ks, &o);
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

void kop_test_resp_free(struct kop_test_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

/* CURLOPT_HEADERFUNCTION appending to the headers of the kop_test_resp in userdata. */
static size_t resp_header(char *data, size_t size, size_t nmemb, void *userdata)
{
    struct kop_test_resp *r = userdata;
    struct kop_test_buf b = {r->headers, r->headers ? strlen(r->headers) : 0};
    size_t n = kop_test_buf_write(data, size, nmemb, &b);
    r->headers = b.p;
    return n;
}

/* One attempt into *r (zeroed first); r->code (0: transport error). */
static long http_once(const struct kop_test_http_options *o, const char *method, const char *url,
                      const char *body, struct kop_test_resp *r)
{
    memset(r, 0, sizeof(*r));
    r->rc = CURLE_FAILED_INIT;
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
    for (const char *hl = o->header; hl && *hl;) { /* one header per line */
        const char *nl = strchr(hl, '\n');
        size_t n = nl ? (size_t)(nl - hl) : strlen(hl);
        snprintf(line, sizeof(line), "%.*s", (int)n, hl);
        hdrs = curl_slist_append(hdrs, line);
        hl = nl ? nl + 1 : hl + n;
    }
    struct kop_test_buf b = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    kop_curltls_setup(h); /* IP SANs with mbedTLS (kop/curltls.h) */
    if (o->ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca);
    if (hdrs)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    if (method)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, kop_test_buf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, resp_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
    if (o->timeout_s > 0)
        curl_easy_setopt(h, CURLOPT_TIMEOUT, o->timeout_s);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (body && o->body_len > 0)
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    r->rc = curl_easy_perform(h);
    if (r->rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->code);
    curl_slist_free_all(hdrs);
    if (!o->handle)
        curl_easy_cleanup(h);
    r->body = b.p;
    r->len = b.len;
    return r->code;
}

/* Empty strings for the buffers of r that got nothing. */
static void resp_fill(struct kop_test_resp *r)
{
    if (!r->body)
        r->body = strdup("");
    if (!r->headers)
        r->headers = strdup("");
    ck_assert_ptr_nonnull(r->body);
    ck_assert_ptr_nonnull(r->headers);
}

long kop_test_request(const struct kop_test_http_options *o, const char *method, const char *url,
                      const char *body, struct kop_test_resp *r)
{
    for (int attempt = 0; attempt < (o->attempts > 0 ? o->attempts : 1); attempt++) {
        long code = http_once(o, method, url, body, r);
        bool again = code == 0 || code == 429 || code >= 500;
        if (!again || o->attempts <= 0) {
            resp_fill(r);
            return code;
        }
        if (attempt + 1 < o->attempts) {
            kop_test_resp_free(r);
            kop_test_sleep_ms(50);
        }
    }
    /* Every attempt retried away: the last code, nothing else. */
    free(r->body);
    free(r->headers);
    r->body = r->headers = NULL;
    r->len = 0;
    resp_fill(r);
    return r->code;
}

long kop_test_http(const struct kop_test_http_options *o, const char *method, const char *url,
                   const char *body, char **ret_body)
{
    struct kop_test_resp r;
    long code = kop_test_request(o, method, url, body, &r);
    free(r.headers);
    if (ret_body)
        *ret_body = r.body;
    else
        free(r.body);
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

/* The body of an answer, or, when there was none, what the transport saw
 * (refused, reset, timeout). */
static const char *answer_text(const struct kop_test_resp *r)
{
    return r->code ? r->body : curl_easy_strerror(r->rc);
}

json_t *kop_test_api(const struct kop_test_http_options *o, const char *base, const char *method,
                     const char *path, const char *body, long want)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct kop_test_http_options po = *o;
    if (strcmp(method, "PATCH") == 0)
        po.ctype = "application/merge-patch+json";
    else if (!po.ctype)
        po.ctype = "application/json";
    struct kop_test_resp r;
    long code = kop_test_request(&po, method, url, body, &r);
    ck_assert_msg(code == want, "%s %s: got %ld want %ld: %.400s", method, path, code, want,
                  answer_text(&r));
    json_t *v = json_loads(r.body, 0, NULL);
    kop_test_resp_free(&r);
    return v;
}

struct kop_test_resp kop_test_api_resp(const struct kop_test_http_options *o, const char *base,
                                       const char *method, const char *path, const char *body)
{
    char url[2048];
    struct kop_test_resp r;
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct kop_test_http_options po = *o;
    if (!po.ctype)
        po.ctype = "application/json";
    kop_test_request(&po, method, url, body, &r);
    ck_assert_msg(r.rc == CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(r.rc));
    return r;
}

json_t *kop_test_api_get(const struct kop_test_http_options *o, const char *base, const char *path)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s%s", base, path);
    struct kop_test_http_options po = *o;
    if (!po.ctype)
        po.ctype = "application/json";
    struct kop_test_resp r;
    long code = kop_test_request(&po, "GET", url, NULL, &r);
    ck_assert_msg(code == 200 || code == 404, "GET %s: %ld %.300s", path, code, answer_text(&r));
    json_t *v = code == 200 ? json_loads(r.body, 0, NULL) : NULL;
    kop_test_resp_free(&r);
    return v;
}

char *kop_test_scrape(const struct kop_test_http_options *o, long port)
{
    char url[128];
    char *out = NULL;
    snprintf(url, sizeof(url), "http://127.0.0.1:%ld/metrics", port);
    struct kop_test_http_options mo = *o;
    mo.ca = mo.token = mo.ctype = NULL;
    long code = kop_test_http(&mo, "GET", url, NULL, &out);
    ck_assert_msg(code == 200, "GET /metrics on port %ld: %ld", port, code);
    return out;
}

double kop_test_scrape_sum(const struct kop_test_http_options *o, long port, const char *name,
                           const char *label)
{
    char *out = kop_test_scrape(o, port);
    double sum = kop_test_metric_sum(out, name, label);
    free(out);
    return sum;
}

/* ---- files, certificates, base64 ------------------------------------------------------------ */

char *kop_test_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

char *kop_test_base64(const void *in, size_t len)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = in;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    ck_assert_ptr_nonnull(out);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)s[i] << 16;
        if (i + 1 < len)
            v |= (unsigned)s[i + 1] << 8;
        if (i + 2 < len)
            v |= s[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

char *kop_test_file_base64(const char *path)
{
    size_t len = 0;
    char *data = kop_test_read_file(path, &len);
    ck_assert_msg(data != NULL, "cannot read %s", path);
    char *b64 = kop_test_base64(data, len);
    free(data);
    return b64;
}

char *kop_test_manifest_with_ca(const char *name, const char *ca_b64)
{
    char src[1024];
    snprintf(src, sizeof(src), "%s/manifests/base/%s", getenv("KOP_SOURCE_ROOT"), name);
    char *text = kop_test_read_file(src, NULL);
    ck_assert_msg(text, "cannot read %s", src);
    size_t cap = strlen(text) + 1, o = 0;
    for (const char *l = strstr(text, "clientConfig:"); l; l = strstr(l + 1, "clientConfig:"))
        cap += strlen(ca_b64) + 64;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    bool in_client_config = false;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line + 1) : strlen(line);
        size_t indent = strspn(line, " ");
        if (in_client_config && strncmp(line + indent, "service:", 8) == 0)
            o +=
                (size_t)snprintf(out + o, cap - o, "%.*scaBundle: %s\n", (int)indent, line, ca_b64);
        in_client_config = strncmp(line + indent, "clientConfig:", 13) == 0;
        memcpy(out + o, line, len);
        o += len;
        line += len;
    }
    out[o] = '\0';
    free(text);
    return out;
}

void kop_test_gen_certs(const char *dir)
{
    const char *root = getenv("KOP_SOURCE_ROOT");
    ck_assert_ptr_nonnull(root);
    char cmd[2048];
    int n = snprintf(cmd, sizeof(cmd), "bash '%s/scripts/gen-certs.sh' '%s' >/dev/null 2>&1", root,
                     dir);
    ck_assert(n > 0 && (size_t)n < sizeof(cmd));
    ck_assert_int_eq(system(cmd), 0);
}

void kop_test_certs_make(struct kop_test_certs *c, const char *dir)
{
    memset(c, 0, sizeof(*c));
    kop_test_gen_certs(dir);
    char *crt = kop_test_path(dir, "tls.crt"), *key = kop_test_path(dir, "tls.key");
    char *ca = kop_test_path(dir, "ca.crt");
    c->crt_pem = kop_test_read_file(crt, NULL);
    c->key_pem = kop_test_read_file(key, NULL);
    ck_assert_ptr_nonnull(c->crt_pem);
    ck_assert_ptr_nonnull(c->key_pem);
    c->ca_b64 = kop_test_file_base64(ca);
    free(crt);
    free(key);
    free(ca);
}

void kop_test_certs_free(struct kop_test_certs *c)
{
    free(c->crt_pem);
    free(c->key_pem);
    free(c->ca_b64);
    memset(c, 0, sizeof(*c));
}

/* ---- kop processes ----------------------------------------------------------------------------
 */

#define MYR_CRD_HEAD                                                                               \
    "{\"apiVersion\":\"apiextensions.k8s.io/v1\",\"kind\":\"CustomResourceDefinition\","           \
    "\"metadata\":{\"name\":\"myresources.mygroup.example.com\"},\"spec\":{\"group\":"             \
    "\"mygroup.example.com\",\"names\":{\"plural\":\"myresources\",\"singular\":\"myresource\","   \
    "\"kind\":\"MyResource\""
#define MYR_CRD_TAIL                                                                               \
    "},\"scope\":\"Namespaced\",\"versions\":[{"                                                   \
    "\"name\":\"v1\",\"served\":true,\"storage\":true,\"subresources\":{\"status\":{}},"           \
    "\"schema\":{\"openAPIV3Schema\":{\"type\":\"object\",\"properties\":{\"spec\":{\"type\":"     \
    "\"object\",\"default\":{},\"properties\":{\"replicas\":{\"type\":\"integer\",\"default\":1}," \
    "\"image\":{\"type\":\"string\",\"default\":\"nginx:1.14.2\"},\"port\":{\"type\":\"integer\"," \
    "\"default\":80},\"serviceType\":{\"type\":\"string\",\"default\":\"ClusterIP\"}}},"           \
    "\"status\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}}}}}]}}"

const char kop_test_myresource_crd[] = MYR_CRD_HEAD ",\"shortNames\":[\"myr\"]" MYR_CRD_TAIL;
const char kop_test_myresource_crd_no_short[] = MYR_CRD_HEAD MYR_CRD_TAIL;

long kop_test_start_webhook_kop(struct kop_test_proc *p, bool *ret_started, const char *cert_dir,
                                int timeout_ms)
{
    char *argv[] = {(char *)kop_test_bin("kop"),
                    "--webhook-only",
                    "--cert-dir",
                    (char *)cert_dir,
                    "--webhook-port",
                    "0",
                    "--metrics-bind-address",
                    "0",
                    "--health-probe-bind-address",
                    "0",
                    NULL};
    ck_assert_int_eq(kop_test_spawn(p, argv), 0);
    if (ret_started)
        *ret_started = true;
    return kop_test_logged_port(p, "serving webhook", timeout_ms);
}

void kop_test_kop_argv(struct kop_test_argv *a, const char *kubeconfig)
{
    memset(a, 0, sizeof(*a));
    kop_test_argv_add(a, kop_test_bin("kop"), "--kubeconfig", kubeconfig, "--metrics-bind-address",
                      "127.0.0.1:0", "--health-probe-bind-address", "0", NULL);
}

void kop_test_argv_add(struct kop_test_argv *a, ...)
{
    va_list ap;
    va_start(ap, a);
    for (const char *arg = va_arg(ap, const char *); arg; arg = va_arg(ap, const char *)) {
        ck_assert_msg(a->n + 1 < KOP_TEST_ARGV_MAX, "more than %d arguments",
                      KOP_TEST_ARGV_MAX - 1);
        a->v[a->n++] = (char *)arg;
    }
    va_end(ap);
    a->v[a->n] = NULL;
}

long kop_test_logged_port(struct kop_test_proc *p, const char *msg, int timeout_ms)
{
    char needle[128];
    char *line = NULL;
    snprintf(needle, sizeof(needle), "\"msg\":\"%s\"", msg);
    ck_assert_msg(kop_test_wait_for(p, 0, needle, timeout_ms, &line) > 0, "kop did not log %s",
                  msg);
    long port = kop_test_json_int(line, "port");
    free(line);
    ck_assert_int_gt(port, 0);
    return port;
}

size_t kop_test_output_len(struct kop_test_proc *p)
{
    char *out = kop_test_output(p);
    size_t n = strlen(out);
    free(out);
    return n;
}

bool kop_test_logged(struct kop_test_proc *p, const char *needle)
{
    char *out = kop_test_output(p);
    bool hit = strstr(out, needle) != NULL;
    free(out);
    return hit;
}

void kop_test_log_str(const char *line, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    const char *p = strstr(line, pat);
    ck_assert_msg(p != NULL, "no %s in %s", key, line);
    p += strlen(pat);
    size_t n = strcspn(p, "\"");
    ck_assert_uint_lt(n, len);
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* The reason a field.Error of this message has. */
static const char *reason_of(const char *msg)
{
    static const char *const map[][2] = {{"Invalid value", "FieldValueInvalid"},
                                         {"Required value", "FieldValueRequired"},
                                         {"Unsupported value", "FieldValueNotSupported"},
                                         {"Duplicate value", "FieldValueDuplicate"},
                                         {"Too many", "FieldValueTooMany"},
                                         {"Forbidden", "FieldValueForbidden"},
                                         {"Not found", "FieldValueNotFound"}};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strncmp(msg, map[i][0], strlen(map[i][0])) == 0)
            return map[i][1];
    return "?";
}

void kop_test_assert_causes(long code, const char *body, const char *const *want)
{
    ck_assert_msg(code == 422, "%ld (want 422): %s", code, body ? body : "");
    json_t *st = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(st);
    const json_t *causes = json_object_get(json_object_get(st, "details"), "causes");
    size_t n = 0;
    while (want[n])
        n++;
    ck_assert_msg(json_array_size(causes) == n, "%zu causes (want %zu): %s",
                  json_array_size(causes), n, body);
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(causes, i);
        const char *field = json_string_value(json_object_get(c, "field"));
        const char *msg = json_string_value(json_object_get(c, "message"));
        const char *reason = json_string_value(json_object_get(c, "reason"));
        char *got = NULL;
        ck_assert_int_gt(asprintf(&got, "%s: %s", field ? field : "", msg ? msg : ""), 0);
        ck_assert_str_eq(got, want[i]);
        ck_assert_str_eq(reason ? reason : "", reason_of(msg ? msg : ""));
        free(got);
    }
    json_decref(st);
}
