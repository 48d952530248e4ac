/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's webhook Services with endpoints (docs/kubesim.md §5): a validating webhook on
 * ConfigMaps points at the Service kop-system/kop-webhook-service, whose endpoints are small TLS
 * webhooks (libmicrohttpd) that count requests and connections and can drop a request unanswered,
 * close idle connections (with a reset if asked), answer with Connection: close or with 429 +
 * Retry-After. The "validation" case checks what kubesim takes of a user's EndpointSlice and
 * Endpoints (kubesim/epvalidation.c): the v1 defaults, and the 422 causes of
 * Kubernetes 1.32's validation, field, message and order. Each test starts
 * its own kubesim with the flags it needs.
 */
#include "fakehook.h"
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "kubesim-endpoints-token"
#define SVC "kop-system/kop-webhook-service"

/* ---- fake webhook endpoints ---------------------------------------------------- */

enum hook_mode {
    HOOK_OK,
    HOOK_DROP,        /* read the request, close without an answer */
    HOOK_RETRY_AFTER, /* 429 with Retry-After: 1, then OK */
    HOOK_500,         /* 500 without Retry-After */
};

struct hook {
    struct fhook f;
    char addr[32];   /* "127.0.0.1:PORT", once started */
    bool conn_close; /* answer with Connection: close */
    bool linger0;    /* close connections with a reset */
    enum hook_mode mode;
    int requests;         /* under the fake's lock, as below */
    json_t *traceparents; /* the header of each request, "" when absent */
};

static void hook_answer(void *ud, const struct fhook_request *rq, struct fhook_answer *ans)
{
    struct hook *h = ud;
    const char *tp = fhook_header(rq, "traceparent");
    fhook_lock(&h->f);
    h->requests++;
    json_array_append_new(h->traceparents, json_string(tp ? tp : ""));
    enum hook_mode mode = h->mode;
    if (mode == HOOK_RETRY_AFTER)
        h->mode = HOOK_OK;
    fhook_unlock(&h->f);
    ans->close = h->conn_close;
    switch (mode) {
    case HOOK_DROP:
        ans->code = 0;
        break;
    case HOOK_RETRY_AFTER:
    case HOOK_500:
        ans->code = mode == HOOK_500 ? 500 : 429;
        ans->retry_after = mode == HOOK_500 ? NULL : "1";
        ans->content_type = "text/plain";
        ans->body = strdup("try again");
        break;
    case HOOK_OK:
        ans->body = fhook_admit(rq->body, true);
        break;
    }
}

static struct kop_test_certs dev; /* the webhooks' certificate and CA */

/* idle_s > 0: the endpoint closes connections idle that long. */
static void hook_start(struct hook *h, unsigned int idle_s)
{
    h->traceparents = json_array();
    h->f.linger0 = h->linger0;
    fhook_start(&h->f, dev.crt_pem, dev.key_pem, idle_s, hook_answer, h);
    snprintf(h->addr, sizeof(h->addr), "%s", h->f.addr);
}

static void hook_stop(struct hook *h)
{
    fhook_stop(&h->f);
}

static void hook_free(struct hook *h)
{
    fhook_free(&h->f);
    json_decref(h->traceparents);
}

static int hook_get(struct hook *h, const int *field)
{
    return fhook_count(&h->f, field);
}

/* The traceparent header of request i (malloc'd, "" when absent). */
static char *hook_traceparent(struct hook *h, size_t i)
{
    fhook_lock(&h->f);
    const char *s = json_string_value(json_array_get(h->traceparents, i));
    char *copy = strdup(s ? s : "(no such request)");
    fhook_unlock(&h->f);
    return copy;
}

static void hook_set_mode(struct hook *h, enum hook_mode m)
{
    fhook_lock(&h->f);
    h->mode = m;
    fhook_unlock(&h->f);
}

/* ---- kubesim and requests ------------------------------------------------------------- */

static struct kop_test_kubesim sim;
static bool sim_running;
static char *tmpdir, *ca_path;

static struct kop_test_http_options opts(void)
{
    struct kop_test_http_options o = {
        .ca = ca_path, .token = TOKEN, .ctype = "application/json", .timeout_s = 60};
    return o;
}

/* Start kubesim with args (NULL-terminated) and the validating webhook. */
static void start_sim(char **args)
{
    const struct kop_test_kubesim_options o = {.ca = ca_path, .token = TOKEN, .args = args};
    kop_test_kubesim_start(&sim, &o);
    sim_running = true;
    char *vwc = NULL;
    int n = asprintf(&vwc,
                     "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
                     "\"ValidatingWebhookConfiguration\",\"metadata\":{\"name\":\"cm\"},"
                     "\"webhooks\":[{\"name\":\"cm.test.example.com\",\"admissionReviewVersions\":"
                     "[\"v1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\","
                     "\"timeoutSeconds\":10,\"clientConfig\":{\"caBundle\":\"%s\",\"service\":{"
                     "\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"path\":"
                     "\"/validate\",\"port\":443}},\"rules\":[{\"apiGroups\":[\"\"],"
                     "\"apiVersions\":[\"v1\"],\"operations\":[\"CREATE\"],\"resources\":["
                     "\"configmaps\"]}]}]}",
                     dev.ca_b64);
    ck_assert_int_gt(n, 0);
    struct kop_test_http_options o2 = opts();
    json_decref(kop_test_api(
        &o2, sim.url, "POST",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", vwc, 201));
    free(vwc);
}

/* Create ConfigMap name: the HTTP code; the body in *ret_body when asked. */
static long create_cm(const char *name, char **ret_body)
{
    char body[256], url[256];
    snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", name);
    snprintf(url, sizeof(url), "%s/api/v1/namespaces/default/configmaps", sim.url);
    struct kop_test_http_options o = opts();
    char *out = NULL;
    long code = kop_test_http(&o, "POST", url, body, &out);
    if (ret_body)
        *ret_body = out;
    else
        free(out);
    return code;
}

static void create_ok(const char *name)
{
    char *body = NULL;
    long code = create_cm(name, &body);
    ck_assert_msg(code == 201, "create %s: %ld %s", name, code, body);
    free(body);
}

static void post_endpoints(const char *doc)
{
    struct kop_test_http_options o = opts();
    json_decref(kop_test_api(&o, sim.url, "POST", "/_kubesim/endpoints", doc, 200));
}

static json_t *webhook_stats(void)
{
    struct kop_test_http_options o = opts();
    json_t *doc = kop_test_api(&o, sim.url, "GET", "/_kubesim/stats", NULL, 200);
    ck_assert_ptr_nonnull(doc);
    json_t *w = json_incref(json_object_get(doc, "webhooks"));
    json_decref(doc);
    ck_assert_ptr_nonnull(w);
    return w;
}

static json_int_t jint(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);
    if (b)
        v = json_object_get(v, b);
    return json_integer_value(v);
}

static json_int_t calls_to(const json_t *w, const struct hook *h)
{
    return json_integer_value(
        json_object_get(json_object_get(json_object_get(w, "calls"), SVC), h->addr));
}

static void setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tmpdir = kop_test_tmpdir();
    ck_assert_ptr_nonnull(tmpdir);
    ca_path = kop_test_path(tmpdir, "kubesim-ca.pem");
    char *certs = kop_test_path(tmpdir, "certs");
    kop_test_certs_make(&dev, certs);
    free(certs);
}

static void teardown(void)
{
    if (sim_running)
        kop_test_kubesim_stop(&sim, SIGTERM, 5000);
    sim_running = false;
    kop_test_rmdir(tmpdir);
    free(tmpdir);
    free(ca_path);
    kop_test_certs_free(&dev);
    curl_global_cleanup();
}

/* ---- tests ----------------------------------------------------------------------------- */

/* New connections go to ready endpoints only, at random; calls are counted
 * per endpoint. Every answer closes its connection, so each call dials. */
START_TEST(test_endpoints_ready_only)
{
    struct hook h[3];
    memset(h, 0, sizeof(h));
    for (int i = 0; i < 3; i++) {
        h[i].conn_close = true;
        hook_start(&h[i], 0);
    }
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s,%s", h[0].addr, h[1].addr);
    char *args[] = {"--service", flag, "--endpoint-propagation-delay", "0", NULL};
    start_sim(args);
    /* The flag's list, all ready, in effect at once. */
    struct kop_test_http_options o = opts();
    json_t *l = kop_test_api(&o, sim.url, "GET", "/_kubesim/endpoints", NULL, 200);
    const json_t *s0 = json_array_get(json_object_get(l, "services"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(s0, "active")), 2);
    ck_assert(
        json_is_true(json_object_get(json_array_get(json_object_get(s0, "active"), 1), "ready")));
    json_decref(l);

    char doc[512];
    snprintf(doc, sizeof(doc),
             "{\"service\":\"" SVC "\",\"endpoints\":[{\"address\":\"%s\",\"ready\":false},"
             "{\"address\":\"%s\",\"ready\":true},{\"address\":\"%s\"}]}",
             h[0].addr, h[1].addr, h[2].addr);
    post_endpoints(doc);
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof(name), "r%d", i);
        create_ok(name);
    }
    int n0 = hook_get(&h[0], &h[0].requests), n1 = hook_get(&h[1], &h[1].requests),
        n2 = hook_get(&h[2], &h[2].requests);
    ck_assert_int_eq(n0, 0);
    ck_assert_int_eq(n1 + n2, 20);
    /* random: both ready endpoints get some (all 20 on one: 2^-19) */
    ck_assert_int_gt(n1, 0);
    ck_assert_int_gt(n2, 0);
    json_t *w = webhook_stats();
    ck_assert_int_eq(calls_to(w, &h[0]), 0);
    ck_assert_int_eq(calls_to(w, &h[1]), n1);
    ck_assert_int_eq(calls_to(w, &h[2]), n2);
    ck_assert_int_eq(jint(w, "connections", "opened"), 20);
    ck_assert_int_eq(json_array_size(json_object_get(w, "failures")), 0);
    /* no --tracing: no traceparent */
    char *tp = hook_traceparent(&h[1], 0);
    ck_assert_str_eq(tp, "");
    free(tp);
    json_decref(w);

    /* Bad documents are refused. */
    char url[256];
    snprintf(url, sizeof(url), "%s/_kubesim/endpoints", sim.url);
    ck_assert_int_eq(
        kop_test_http(&o, "POST", url, "{\"service\":\"nons\",\"endpoints\":[]}", NULL), 400);
    ck_assert_int_eq(kop_test_http(&o, "POST", url,
                                   "{\"service\":\"a/b\",\"endpoints\":[{\"address\":\"x\"}]}",
                                   NULL),
                     400);
    /* No ready endpoint: the call fails as the apiserver says. */
    snprintf(doc, sizeof(doc),
             "{\"service\":\"" SVC "\",\"endpoints\":[{\"address\":\"%s\",\"ready\":false}]}",
             h[1].addr);
    post_endpoints(doc);
    char *body = NULL;
    ck_assert_int_eq(create_cm("none", &body), 500);
    ck_assert_msg(strstr(body, "no endpoints available for service") != NULL, "%s", body);
    free(body);
    w = webhook_stats();
    ck_assert_int_eq(jint(w, "failureReasons", "no-endpoints"), 1);
    json_decref(w);
    for (int i = 0; i < 3; i++)
        hook_free(&h[i]);
}
END_TEST

/* An endpoint change reaches new connections only after
 * --endpoint-propagation-delay. */
START_TEST(test_endpoints_propagation_delay)
{
    struct hook a = {.conn_close = true}, b = {.conn_close = true};
    hook_start(&a, 0);
    hook_start(&b, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, "--endpoint-propagation-delay", "2s", NULL};
    start_sim(args);
    create_ok("p0");
    ck_assert_int_eq(hook_get(&a, &a.requests), 1);

    char doc[256];
    snprintf(doc, sizeof(doc), "{\"service\":\"" SVC "\",\"endpoints\":[{\"address\":\"%s\"}]}",
             b.addr);
    long t0 = kop_test_now_ms();
    post_endpoints(doc);
    long t1 = -1;
    for (int i = 0; i < 100 && t1 < 0; i++) {
        char name[32];
        snprintf(name, sizeof(name), "p%d", i + 1);
        create_ok(name);
        if (hook_get(&b, &b.requests) > 0)
            t1 = kop_test_now_ms();
        else
            kop_test_sleep_ms(100);
    }
    ck_assert_msg(t1 >= 0, "the new endpoint never got a call");
    ck_assert_msg(t1 - t0 >= 2000, "new endpoint used after %ld ms (delay 2 s)", t1 - t0);
    ck_assert_int_eq(hook_get(&b, &b.requests), 1);
    hook_free(&a);
    hook_free(&b);
}
END_TEST

/* A pooled connection to a removed endpoint keeps being used until the
 * server closes it; then the next call dials a current endpoint. */
START_TEST(test_endpoints_pooled_connection_outlives_removal)
{
    struct hook a = {0}, b = {0};
    hook_start(&a, 0);
    hook_start(&b, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, "--endpoint-propagation-delay", "0", NULL};
    start_sim(args);
    create_ok("k0");
    char doc[256];
    snprintf(doc, sizeof(doc), "{\"service\":\"" SVC "\",\"endpoints\":[{\"address\":\"%s\"}]}",
             b.addr);
    post_endpoints(doc);
    create_ok("k1");
    create_ok("k2");
    ck_assert_int_eq(hook_get(&a, &a.requests), 3);
    ck_assert_int_eq(hook_get(&a, &a.f.opened), 1); /* one connection, reused */
    ck_assert_int_eq(hook_get(&b, &b.requests), 0);
    json_t *w = webhook_stats();
    ck_assert_int_eq(jint(w, "connections", "opened"), 1);
    ck_assert_int_eq(jint(w, "connections", "reused"), 2);
    ck_assert_int_eq(calls_to(w, &a), 3);
    json_decref(w);

    hook_stop(&a); /* the old pod goes away, closing its connections */
    create_ok("k3");
    ck_assert_int_eq(hook_get(&b, &b.requests), 1);
    w = webhook_stats();
    ck_assert_int_eq(json_array_size(json_object_get(w, "failures")), 0);
    ck_assert_ptr_null(json_object_get(json_object_get(w, "retries"), "nothing-written"));
    json_decref(w);
    hook_free(&a);
    hook_free(&b);
}
END_TEST

/* A POST written on a reused connection and then lost is a failure, sent
 * once (libcurl would send it again on a new connection). */
START_TEST(test_endpoints_no_retry_of_written_post)
{
    struct hook a = {0};
    hook_start(&a, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, NULL};
    start_sim(args);
    create_ok("n0");
    hook_set_mode(&a, HOOK_DROP);
    char *body = NULL;
    ck_assert_int_eq(create_cm("n1", &body), 500);
    ck_assert_msg(strstr(body, "failed calling webhook \\\"cm.test.example.com\\\": failed to call "
                               "webhook: Post \\\"https://kop-webhook-service.kop-system.svc:443/"
                               "validate?timeout=10s\\\": EOF") != NULL,
                  "%s", body);
    free(body);
    ck_assert_int_eq(hook_get(&a, &a.requests), 2);
    json_t *w = webhook_stats();
    ck_assert_int_eq(jint(w, "failureReasons", "lost-after-write"), 1);
    const json_t *f = json_array_get(json_object_get(w, "failures"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(f, "endpoint")), a.addr);
    ck_assert_str_eq(json_string_value(json_object_get(f, "reason")), "lost-after-write");
    ck_assert_str_eq(json_string_value(json_object_get(f, "path")), "/validate?timeout=10s");
    ck_assert_str_eq(json_string_value(json_object_get(f, "error")), "EOF");
    ck_assert_ptr_null(json_object_get(json_object_get(w, "retries"), "nothing-written"));
    ck_assert_int_eq(calls_to(w, &a), 2);
    json_decref(w);

    /* 500 without Retry-After: not sent again either. */
    hook_set_mode(&a, HOOK_500);
    ck_assert_int_eq(create_cm("n2", NULL), 500);
    ck_assert_int_eq(hook_get(&a, &a.requests), 3);
    hook_free(&a);
}
END_TEST

/* The race of a server closing an idle connection just as it is picked
 * (held open by --webhook-skip-idle-check): the reset makes the write fail
 * with nothing written, so the request goes out again on a new connection. */
START_TEST(test_endpoints_retry_when_nothing_written)
{
    struct hook a = {.linger0 = true};
    hook_start(&a, 1);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, "--webhook-skip-idle-check", NULL};
    start_sim(args);
    create_ok("w0");
    long end = kop_test_now_ms() + 20000;
    while (hook_get(&a, &a.f.closed) < 1 && kop_test_now_ms() < end)
        kop_test_sleep_ms(50);
    ck_assert_int_eq(hook_get(&a, &a.f.closed), 1);
    create_ok("w1");
    ck_assert_int_eq(hook_get(&a, &a.requests), 2);
    ck_assert_int_eq(hook_get(&a, &a.f.opened), 2);
    json_t *w = webhook_stats();
    ck_assert_int_eq(jint(w, "retries", "nothing-written"), 1);
    ck_assert_int_eq(jint(w, "connections", "opened"), 2);
    ck_assert_int_eq(json_array_size(json_object_get(w, "failures")), 0);
    json_decref(w);
    hook_free(&a);
}
END_TEST

/* Without the hook, a connection the server closed while idle is dropped
 * before use: no error, no retry, a new connection. */
START_TEST(test_endpoints_idle_close_noticed)
{
    struct hook a = {0};
    hook_start(&a, 1);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, NULL};
    start_sim(args);
    create_ok("i0");
    long end = kop_test_now_ms() + 20000;
    while (hook_get(&a, &a.f.closed) < 1 && kop_test_now_ms() < end)
        kop_test_sleep_ms(50);
    ck_assert_int_eq(hook_get(&a, &a.f.closed), 1);
    create_ok("i1");
    ck_assert_int_eq(hook_get(&a, &a.requests), 2);
    json_t *w = webhook_stats();
    ck_assert_int_eq(jint(w, "connections", "opened"), 2);
    ck_assert_int_eq(jint(w, "connections", "reused"), 0);
    ck_assert_ptr_null(json_object_get(json_object_get(w, "retries"), "nothing-written"));
    ck_assert_int_eq(json_array_size(json_object_get(w, "failures")), 0);
    json_decref(w);
    hook_free(&a);
}
END_TEST

/* kubesim closes a pooled connection idle for --webhook-idle-timeout (90 s
 * by default, net/http's IdleConnTimeout) on its own, without a call. */
START_TEST(test_endpoints_idle_timeout)
{
    struct hook a = {0};
    hook_start(&a, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, "--webhook-idle-timeout", "1s", NULL};
    start_sim(args);
    long t0 = kop_test_now_ms();
    create_ok("x0");
    json_t *w = webhook_stats();
    long t1 = kop_test_now_ms();
    if (t1 - t0 < 900) /* still idle in the pool, unless the machine stalled */
        ck_assert_int_eq(jint(w, "connections", "idle"), 1);
    json_decref(w);
    long end = kop_test_now_ms() + 20000;
    while (hook_get(&a, &a.f.closed) < 1 && kop_test_now_ms() < end)
        kop_test_sleep_ms(50);
    ck_assert_int_eq(hook_get(&a, &a.f.closed), 1);
    ck_assert_int_ge(kop_test_now_ms() - t0, 1000);
    w = webhook_stats();
    ck_assert_int_eq(jint(w, "connections", "idle"), 0);
    json_decref(w);
    create_ok("x1");
    ck_assert_int_eq(hook_get(&a, &a.f.opened), 2);
    hook_free(&a);
}
END_TEST

/* 429 with Retry-After is sent again after that many seconds (client-go). */
START_TEST(test_endpoints_retry_after)
{
    struct hook a = {.mode = HOOK_RETRY_AFTER};
    hook_start(&a, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, NULL};
    start_sim(args);
    long t0 = kop_test_now_ms();
    create_ok("ra");
    ck_assert_int_ge(kop_test_now_ms() - t0, 1000);
    ck_assert_int_eq(hook_get(&a, &a.requests), 2);
    json_t *w = webhook_stats();
    ck_assert_int_eq(jint(w, "retries", "retry-after"), 1);
    ck_assert_int_eq(calls_to(w, &a), 2);
    json_decref(w);
    hook_free(&a);
}
END_TEST

static bool traceparent_ok(const char *s, char *ret_trace)
{
    if (strlen(s) != 55 || strncmp(s, "00-", 3) != 0 || s[35] != '-' || s[52] != '-' ||
        strcmp(s + 53, "01") != 0)
        return false;
    for (int i = 3; i < 52; i++)
        if (i != 35 && !strchr("0123456789abcdef", s[i]))
            return false;
    memcpy(ret_trace, s + 3, 32);
    ret_trace[32] = '\0';
    return true;
}

/* --tracing: a traceparent on each webhook call, a fresh trace per API
 * request (or the caller's, when it sent one), recorded in the stats. */
START_TEST(test_endpoints_traceparent)
{
    struct hook a = {0};
    hook_start(&a, 0);
    char flag[128];
    snprintf(flag, sizeof(flag), SVC "=%s", a.addr);
    char *args[] = {"--service", flag, "--tracing", NULL};
    start_sim(args);
    create_ok("t0");
    create_ok("t1");
    ck_assert_int_eq(hook_get(&a, &a.requests), 2);
    char *tp0 = hook_traceparent(&a, 0);
    char *tp1 = hook_traceparent(&a, 1);
    char tr0[33], tr1[33];
    ck_assert_msg(traceparent_ok(tp0, tr0), "%s", tp0);
    ck_assert_msg(traceparent_ok(tp1, tr1), "%s", tp1);
    ck_assert_str_ne(tr0, tr1);
    json_t *w = webhook_stats();
    const json_t *sent = json_object_get(w, "traceparents");
    ck_assert_int_eq(json_array_size(sent), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sent, 0), "traceparent")),
                     tp0);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sent, 1), "traceparent")),
                     tp1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(sent, 1), "service")), SVC);
    json_decref(w);

    /* A caller's traceparent: its trace id continues, with a new span. */
    static const char in_trace[] = "4bf92f3577b34da6a3ce929d0e0e4736";
    char url[256];
    snprintf(url, sizeof(url), "%s/api/v1/namespaces/default/configmaps", sim.url);
    struct kop_test_http_options o = opts();
    o.header = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    struct kop_test_resp r;
    kop_test_request(&o, NULL, url, "{\"metadata\":{\"name\":\"t2\"}}", &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.code, 201);
    kop_test_resp_free(&r);
    char *tp2 = hook_traceparent(&a, 2);
    char tr2[33];
    ck_assert_msg(traceparent_ok(tp2, tr2), "%s", tp2);
    ck_assert_str_eq(tr2, in_trace);
    ck_assert_msg(strstr(tp2, "00f067aa0ba902b7") == NULL, "%s", tp2);
    free(tp0);
    free(tp1);
    free(tp2);
    hook_free(&a);
}
END_TEST

/* ---- EndpointSlice and Endpoints validation (kubesim/epvalidation.c) ------------------- */

#define SLICES "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
#define EPS "/api/v1/namespaces/default/endpoints"
#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})

/* apimachinery/pkg/util/validation's messages, as Kubernetes 1.32 words them */
#define LABEL_MSG                                                                                  \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "   \
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "     \
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define SUBDOMAIN_MSG                                                                              \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "   \
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "  \
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define LABEL_VALUE_MSG                                                                            \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "    \
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "             \
    "'my_value',  or '12345', regex used for validation is "                                       \
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
#define NAME_PART_MSG                                                                              \
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "  \
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "     \
    "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define PROTOCOLS "supported values: \"SCTP\", \"TCP\", \"UDP\""
#define LOOPBACK "may not be in the loopback range (127.0.0.0/8, ::1/128)"
#define LINK_LOCAL "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
#define LL_MULTICAST "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"

/* kubesim alone (no webhook), for the validation tests */
static void start_plain(void)
{
    const struct kop_test_kubesim_options o = {.ca = ca_path, .token = TOKEN};
    kop_test_kubesim_start(&sim, &o);
    sim_running = true;
}

/* method path with body: the HTTP code, the body in *ret_body (malloc'd) */
static long send_doc(const char *method, const char *path, const char *body, char **ret_body)
{
    char url[512];
    snprintf(url, sizeof(url), "%s%s", sim.url, path);
    struct kop_test_http_options o = opts();
    return kop_test_http(&o, method, url, body, ret_body);
}

/* Send body (method to path) and want a 422 whose causes are exactly want
 * ("field: message", NULL-terminated), in order, each with its reason. */
static void expect_causes(const char *method, const char *path, const char *body,
                          const char *const *want)
{
    char *out = NULL;
    long code = send_doc(method, path, body, &out);
    kop_test_assert_causes(code, out, want);
    free(out);
}

/* An EndpointSlice's JSON text: addressType type (NULL: none), endpoints
 * and ports as JSON text (NULL: none). malloc'd */
static char *slice_doc(const char *name, const char *type, const char *endpoints, const char *ports)
{
    char *doc = NULL;
    char at[64] = "";
    if (type)
        snprintf(at, sizeof(at), ",\"addressType\":\"%s\"", type);
    ck_assert_int_gt(asprintf(&doc,
                              "{\"apiVersion\":\"discovery.k8s.io/v1\",\"kind\":\"EndpointSlice\","
                              "\"metadata\":{\"name\":\"%s\"}%s%s%s%s%s}",
                              name, at, endpoints ? ",\"endpoints\":" : "",
                              endpoints ? endpoints : "", ports ? ",\"ports\":" : "",
                              ports ? ports : ""),
                     0);
    return doc;
}

/* An Endpoints' JSON text with subsets (JSON text). malloc'd */
static char *endpoints_doc(const char *name, const char *subsets)
{
    char *doc = NULL;
    ck_assert_int_gt(asprintf(&doc,
                              "{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":"
                              "{\"name\":\"%s\"},\"subsets\":%s}",
                              name, subsets),
                     0);
    return doc;
}

/* n copies of item between [ and ], comma-separated. malloc'd */
static char *repeat(const char *item, size_t n)
{
    size_t len = strlen(item);
    char *out = malloc(n * (len + 1) + 2);
    ck_assert_ptr_nonnull(out);
    char *p = out;
    *p++ = '[';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        memcpy(p, item, len);
        p += len;
    }
    *p++ = ']';
    *p = '\0';
    return out;
}

/* The compact JSON text of v, members in their stored order. malloc'd */
static char *dump(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    ck_assert_ptr_nonnull(s);
    return s;
}

static void expect_dump(const json_t *v, const char *want)
{
    char *s = dump(v);
    ck_assert_str_eq(s, want);
    free(s);
}

/* Valid objects are stored with their v1 defaults: a slice port's name ""
 * and protocol TCP (discovery/v1 SetDefaults_EndpointPort), an Endpoints
 * port's protocol TCP (core/v1 SetDefaults_Endpoints), each in Go's member
 * order; a v1 write's deprecatedTopology is dropped (dropTopologyOnV1).
 * Addresses are read as ParseIPSloppy reads them (leading zeros, long hex
 * groups). */
START_TEST(test_endpoints_valid_defaults)
{
    start_plain();
    struct kop_test_http_options o = opts();
    char *doc = slice_doc(
        "web", "IPv4",
        "[{\"addresses\":[\"10.0.0.1\",\"010.0.0.2\"],\"conditions\":{\"ready\":true,"
        "\"serving\":true,\"terminating\":false},\"hostname\":\"web-0\",\"nodeName\":"
        "\"node-a.example\",\"zone\":\"z1\",\"hints\":{\"forZones\":[{\"name\":\"z1\"}]},"
        "\"deprecatedTopology\":{\"kubernetes.io/hostname\":\"node-a\"},\"targetRef\":{\"kind\":"
        "\"Pod\",\"name\":\"web-0\"}}]",
        "[{\"port\":8080},{\"name\":\"https\",\"protocol\":\"UDP\",\"port\":443,\"appProtocol\":"
        "\"kubernetes.io/h2c\"}]");
    json_t *s = kop_test_api(&o, sim.url, "POST", SLICES, doc, 201);
    free(doc);
    const json_t *ports = json_object_get(s, "ports");
    expect_dump(json_array_get(ports, 0), "{\"name\":\"\",\"protocol\":\"TCP\",\"port\":8080}");
    expect_dump(json_array_get(ports, 1), "{\"name\":\"https\",\"protocol\":\"UDP\",\"port\":443,"
                                          "\"appProtocol\":\"kubernetes.io/h2c\"}");
    const json_t *ep = json_array_get(json_object_get(s, "endpoints"), 0);
    ck_assert_ptr_null(json_object_get(ep, "deprecatedTopology"));
    ck_assert_str_eq(json_string_value(json_object_get(ep, "nodeName")), "node-a.example");
    json_decref(s);
    /* as stored */
    s = kop_test_api(&o, sim.url, "GET", SLICES "/web", NULL, 200);
    expect_dump(json_array_get(json_object_get(s, "ports"), 0),
                "{\"name\":\"\",\"protocol\":\"TCP\",\"port\":8080}");
    json_decref(s);

    doc = slice_doc("v6", "IPv6", "[{\"addresses\":[\"2001:db8::1\",\"2001:0db8:00000::00001\"]}]",
                    "[{\"name\":\"a\",\"port\":1},{\"name\":\"b\"}]");
    s = kop_test_api(&o, sim.url, "POST", SLICES, doc, 201);
    free(doc);
    expect_dump(json_object_get(s, "ports"), "[{\"name\":\"a\",\"protocol\":\"TCP\",\"port\":1},"
                                             "{\"name\":\"b\",\"protocol\":\"TCP\"}]");
    json_decref(s);
    doc = slice_doc("ext", "FQDN", "[{\"addresses\":[\"example.com.\",\"a.b.c\"]}]", "[]");
    json_decref(kop_test_api(&o, sim.url, "POST", SLICES, doc, 201));
    free(doc);

    doc = endpoints_doc("web", "[{\"addresses\":[{\"ip\":\"10.0.0.1\",\"hostname\":\"web-0\","
                               "\"nodeName\":\"node-a\"}],\"notReadyAddresses\":[{\"ip\":"
                               "\"10.0.0.2\"}],\"ports\":[{\"name\":\"http\",\"port\":80,"
                               "\"appProtocol\":\"http\"},{\"name\":\"dns\",\"port\":53,"
                               "\"protocol\":\"UDP\"}]}]");
    json_t *e = kop_test_api(&o, sim.url, "POST", EPS, doc, 201);
    free(doc);
    expect_dump(json_object_get(json_array_get(json_object_get(e, "subsets"), 0), "ports"),
                "[{\"name\":\"http\",\"port\":80,\"protocol\":\"TCP\",\"appProtocol\":\"http\"},"
                "{\"name\":\"dns\",\"port\":53,\"protocol\":\"UDP\"}]");
    json_decref(e);
}
END_TEST

/* The addresses of each address type: IsValidIPv4Address or
 * IsValidIPv6Address, then ValidateNonSpecialIP; FQDN as
 * IsFullyQualifiedDomainName checks it. */
START_TEST(test_endpoints_slice_addresses)
{
    start_plain();
    char *doc = slice_doc("v4", "IPv4",
                          "[{\"addresses\":[\"1.2.3.4\",\"::1\",\"127.0.0.2\",\"0.0.0.0\",\"foo\","
                          "\"169.254.1.1\",\"224.0.0.5\",\"1.2.3.256\",\"\"]}]",
                          NULL);
    expect_causes(
        "POST", SLICES, doc,
        WANT("endpoints[0].addresses[1]: Invalid value: \"::1\": must be a valid IPv4 address",
             "endpoints[0].addresses[1]: Invalid value: \"::1\": " LOOPBACK,
             "endpoints[0].addresses[2]: Invalid value: \"127.0.0.2\": " LOOPBACK,
             "endpoints[0].addresses[3]: Invalid value: \"0.0.0.0\": may not be unspecified "
             "(0.0.0.0)",
             "endpoints[0].addresses[4]: Invalid value: \"foo\": must be a valid IPv4 address",
             "endpoints[0].addresses[4]: Invalid value: \"foo\": must be a valid IP address",
             "endpoints[0].addresses[5]: Invalid value: \"169.254.1.1\": " LINK_LOCAL,
             "endpoints[0].addresses[6]: Invalid value: \"224.0.0.5\": " LL_MULTICAST,
             "endpoints[0].addresses[7]: Invalid value: \"1.2.3.256\": must be a valid IPv4 "
             "address",
             "endpoints[0].addresses[7]: Invalid value: \"1.2.3.256\": must be a valid IP address",
             "endpoints[0].addresses[8]: Invalid value: \"\": must be a valid IPv4 address",
             "endpoints[0].addresses[8]: Invalid value: \"\": must be a valid IP address"));
    free(doc);

    doc = slice_doc("v6", "IPv6",
                    "[{\"addresses\":[\"2001:db8::1\",\"1.2.3.4\",\"::ffff:10.0.0.1\",\"::\","
                    "\"fe80::1\",\"ff02::2\",\"::1\",\"1::2::3\"]}]",
                    NULL);
    expect_causes(
        "POST", SLICES, doc,
        WANT("endpoints[0].addresses[1]: Invalid value: \"1.2.3.4\": must be a valid IPv6 address",
             "endpoints[0].addresses[2]: Invalid value: \"::ffff:10.0.0.1\": must be a valid IPv6 "
             "address",
             "endpoints[0].addresses[3]: Invalid value: \"::\": may not be unspecified (::)",
             "endpoints[0].addresses[4]: Invalid value: \"fe80::1\": " LINK_LOCAL,
             "endpoints[0].addresses[5]: Invalid value: \"ff02::2\": " LL_MULTICAST,
             "endpoints[0].addresses[6]: Invalid value: \"::1\": " LOOPBACK,
             "endpoints[0].addresses[7]: Invalid value: \"1::2::3\": must be a valid IPv6 address",
             "endpoints[0].addresses[7]: Invalid value: \"1::2::3\": must be a valid IP address"));
    free(doc);

    /* FQDN: one trailing dot allowed; the subdomain's messages joined by ",";
     * then two labels at least, each 63 characters at most */
    char label64[65], long_name[255];
    memset(label64, 'a', 64);
    label64[64] = '\0';
    long_name[0] = 'A';
    memset(long_name + 1, 'a', 253);
    long_name[254] = '\0';
    char *addrs = NULL, *want64 = NULL, *want_long = NULL;
    ck_assert_int_gt(asprintf(&addrs,
                              "[{\"addresses\":[\"\",\"a\",\"Ex.com\",\"x.\",\"%s.com\",\"%s\","
                              "\"ok.example.\"]}]",
                              label64, long_name),
                     0);
    ck_assert_int_gt(asprintf(&want64,
                              "endpoints[0].addresses[4]: Invalid value: \"%s\": must be no more "
                              "than 63 characters",
                              label64),
                     0);
    ck_assert_int_gt(asprintf(&want_long,
                              "endpoints[0].addresses[5]: Invalid value: \"%s\": must be no more "
                              "than 253 characters," SUBDOMAIN_MSG,
                              long_name),
                     0);
    doc = slice_doc("fq", "FQDN", addrs, NULL);
    expect_causes("POST", SLICES, doc,
                  WANT("endpoints[0].addresses[0]: Required value",
                       "endpoints[0].addresses[1]: Invalid value: \"a\": should be a domain with "
                       "at least two segments separated by dots",
                       "endpoints[0].addresses[2]: Invalid value: \"Ex.com\": " SUBDOMAIN_MSG,
                       "endpoints[0].addresses[3]: Invalid value: \"x\": should be a domain with "
                       "at least two segments separated by dots",
                       want64, want_long));
    free(doc);
    free(addrs);
    free(want64);
    free(want_long);
}
END_TEST

/* addressType, an endpoint's addresses, nodeName, hostname and hints, the
 * ports' names (unique, "" included), protocol and appProtocol; the enums
 * among the other errors, in validation's order. */
START_TEST(test_endpoints_slice_fields)
{
    start_plain();
    char *doc = slice_doc(
        "f", NULL,
        "[{\"addresses\":[\"10.0.0.1\"],\"nodeName\":\"Node_1\",\"hostname\":\"a.b\",\"hints\":"
        "{\"forZones\":[{\"name\":\"a\"},{\"name\":\"a\"},{\"name\":\"-x\"}]}},{\"addresses\":[]},"
        "{}]",
        "[{\"port\":1},{\"port\":2,\"protocol\":\"FOO\",\"appProtocol\":\"-x\"},{\"name\":"
        "\"Http\",\"port\":3},{\"name\":\"h\",\"protocol\":\"\"}]");
    expect_causes(
        "POST", SLICES, doc,
        WANT("addressType: Required value",
             "endpoints[0].nodeName: Invalid value: \"Node_1\": " SUBDOMAIN_MSG,
             "endpoints[0].hostname: Invalid value: \"a.b\": must not contain dots",
             "endpoints[0].hints.forZones[1].name: Duplicate value: \"a\"",
             "endpoints[0].hints.forZones[2].name: Invalid value: \"-x\": " LABEL_VALUE_MSG,
             "endpoints[1].addresses: Required value: must contain at least 1 address",
             "endpoints[2].addresses: Required value: must contain at least 1 address",
             "ports[1].name: Duplicate value: \"\"",
             "ports[1].protocol: Unsupported value: \"FOO\": " PROTOCOLS,
             "ports[1].appProtocol: Invalid value: \"-x\": " NAME_PART_MSG,
             "ports[2].name: Invalid value: \"Http\": " LABEL_MSG,
             "ports[3].protocol: Unsupported value: \"\": " PROTOCOLS));
    free(doc);
    doc = slice_doc("ip", "IP", "[{\"addresses\":[\"x\"],\"hostname\":\"\"}]",
                    "[{\"port\":1},{\"port\":2}]");
    expect_causes("POST", SLICES, doc,
                  WANT("addressType: Unsupported value: \"IP\": supported values: \"FQDN\", "
                       "\"IPv4\", \"IPv6\"",
                       "endpoints[0].hostname: Invalid value: \"\": " LABEL_MSG,
                       "ports[1].name: Duplicate value: \"\""));
    /* the 422's message lists them (StatusError of the causes) */
    char *out = NULL;
    ck_assert_int_eq(send_doc("POST", SLICES, doc, &out), 422);
    ck_assert_msg(strstr(out, "\"message\":\"EndpointSlice.discovery.k8s.io \\\"ip\\\" is invalid: "
                              "[addressType: Unsupported value: \\\"IP\\\": supported values: "
                              "\\\"FQDN\\\", \\\"IPv4\\\", \\\"IPv6\\\", endpoints[0].hostname: "),
                  "%s", out);
    free(out);
    free(doc);
}
END_TEST

/* At most 1000 endpoints (then nothing else of them is looked at), 100
 * addresses each (each still checked), 8 zone hints, 20000 ports. */
START_TEST(test_endpoints_slice_limits)
{
    start_plain();
    char *eps = repeat("{\"addresses\":[\"10.0.0.1\"],\"hostname\":\"A\"}", 1001);
    char *ports = repeat("{\"port\":1}", 20001);
    char *doc = slice_doc("many", "IPv4", eps, ports);
    expect_causes("POST", SLICES, doc,
                  WANT("endpoints: Too many: 1001: must have at most 1000 items",
                       "ports: Too many: 20001: must have at most 20000 items"));
    free(doc);
    free(eps);
    free(ports);

    char *addrs = repeat("\"10.0.0.1\"", 101);
    addrs[strlen(addrs) - 1] = '\0'; /* drop the ] */
    char *zones = repeat("{\"name\":\"a\"}", 9);
    ck_assert_int_gt(asprintf(&eps,
                              "[{\"addresses\":%s,\"127.0.0.1\"],\"hints\":{\"forZones\":%s}}]",
                              addrs, zones),
                     0);
    doc = slice_doc("wide", "IPv4", eps, NULL);
    expect_causes("POST", SLICES, doc,
                  WANT("endpoints[0].addresses: Too many: 102: must have at most 100 items",
                       "endpoints[0].addresses[101]: Invalid value: \"127.0.0.1\": " LOOPBACK,
                       "endpoints[0].hints.forZones: Too many: 9: must have at most 8 items"));
    free(doc);
    free(eps);
    free(addrs);
    free(zones);
}
END_TEST

/* ValidateEndpointSliceUpdate: the slice's rules again, then addressType
 * may not change; a valid update is defaulted as a create is. */
START_TEST(test_endpoints_slice_update)
{
    start_plain();
    struct kop_test_http_options o = opts();
    char *doc = slice_doc("imm", "IPv4", "[{\"addresses\":[\"10.0.0.1\"]}]", "[]");
    json_decref(kop_test_api(&o, sim.url, "POST", SLICES, doc, 201));
    free(doc);
    doc = slice_doc("imm", "IPv6", "[{\"addresses\":[\"2001:db8::1\"]}]", "[]");
    expect_causes("PUT", SLICES "/imm", doc,
                  WANT("addressType: Invalid value: \"IPv6\": field is immutable"));
    free(doc);
    doc = slice_doc("imm", "Foo", "[{\"addresses\":[\"10.0.0.1\"]}]", "[]");
    expect_causes("PUT", SLICES "/imm", doc,
                  WANT("addressType: Unsupported value: \"Foo\": supported values: \"FQDN\", "
                       "\"IPv4\", \"IPv6\"",
                       "addressType: Invalid value: \"Foo\": field is immutable"));
    free(doc);
    /* a patch is checked alike */
    struct kop_test_resp r;
    char url[512];
    snprintf(url, sizeof(url), "%s" SLICES "/imm", sim.url);
    o.ctype = "application/merge-patch+json";
    kop_test_request(&o, "PATCH", url,
                     "{\"addressType\":\"FQDN\",\"endpoints\":[{\"addresses\":"
                     "[\"127.0.0.1\"]}]}",
                     &r);
    ck_assert_msg(r.code == 422, "%ld %s", r.code, r.body);
    ck_assert_msg(strstr(r.body, "is invalid: addressType: Invalid value: \\\"FQDN\\\": field is "
                                 "immutable\""),
                  "%s", r.body);
    kop_test_resp_free(&r);
    o.ctype = "application/json";
    doc = slice_doc("imm", "IPv4", "[{\"addresses\":[\"10.0.0.9\"]}]", "[{\"port\":9}]");
    json_t *s = kop_test_api(&o, sim.url, "PUT", SLICES "/imm", doc, 200);
    free(doc);
    expect_dump(json_object_get(s, "ports"), "[{\"name\":\"\",\"protocol\":\"TCP\",\"port\":9}]");
    json_decref(s);
}
END_TEST

/* ValidateEndpoints: a subset's addresses (IsValidIP, hostname, nodeName,
 * ValidateNonSpecialIP) and ports (a name when there are several, the
 * number, protocol, appProtocol); create and update alike. */
START_TEST(test_endpoints_endpoints)
{
    start_plain();
    char *doc = endpoints_doc(
        "e", "[{\"addresses\":[{\"ip\":\"fe80::1\",\"hostname\":\"h.x\",\"nodeName\":\"\"},"
             "{\"ip\":\"bad\"}],\"notReadyAddresses\":[{\"ip\":\"0.0.0.0\"}],\"ports\":[{\"port\":"
             "0},{\"name\":\"b\",\"port\":70000,\"protocol\":\"X\",\"appProtocol\":\"-x\"}]},{},"
             "{\"notReadyAddresses\":[{\"ip\":\"127.0.0.1\",\"hostname\":\"Host\"}],\"ports\":"
             "[{\"name\":\"Http\",\"port\":1}]}]");
    expect_causes(
        "POST", EPS, doc,
        WANT("subsets[0].addresses[0].hostname: Invalid value: \"h.x\": must not contain dots",
             "subsets[0].addresses[0].nodeName: Invalid value: \"\": " SUBDOMAIN_MSG,
             "subsets[0].addresses[0].ip: Invalid value: \"fe80::1\": " LINK_LOCAL,
             "subsets[0].addresses[1].ip: Invalid value: \"bad\": must be a valid IP address, "
             "(e.g. 10.9.8.7 or 2001:db8::ffff)",
             "subsets[0].addresses[1].ip: Invalid value: \"bad\": must be a valid IP address",
             "subsets[0].notReadyAddresses[0].ip: Invalid value: \"0.0.0.0\": may not be "
             "unspecified (0.0.0.0)",
             "subsets[0].ports[0].name: Required value",
             "subsets[0].ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive",
             "subsets[0].ports[1].port: Invalid value: 70000: must be between 1 and 65535, "
             "inclusive",
             "subsets[0].ports[1].protocol: Unsupported value: \"X\": " PROTOCOLS,
             "subsets[0].ports[1].appProtocol: Invalid value: \"-x\": " NAME_PART_MSG,
             "subsets[1]: Required value: must specify `addresses` or `notReadyAddresses`",
             "subsets[2].notReadyAddresses[0].hostname: Invalid value: \"Host\": " LABEL_MSG,
             "subsets[2].notReadyAddresses[0].ip: Invalid value: \"127.0.0.1\": " LOOPBACK,
             "subsets[2].ports[0].name: Invalid value: \"Http\": " LABEL_MSG));
    free(doc);
    struct kop_test_http_options o = opts();
    doc = endpoints_doc("upd", "[{\"addresses\":[{\"ip\":\"10.0.0.1\"}]}]");
    json_decref(kop_test_api(&o, sim.url, "POST", EPS, doc, 201));
    free(doc);
    doc = endpoints_doc("upd", "[{\"addresses\":[{\"ip\":\"::1\"}]}]");
    expect_causes("PUT", EPS "/upd", doc,
                  WANT("subsets[0].addresses[0].ip: Invalid value: \"::1\": " LOOPBACK));
    free(doc);
}
END_TEST

static Suite *kubesim_endpoints_suite(void)
{
    Suite *s = suite_create("kubesim_endpoints");
    TCase *tc = tcase_create("endpoints");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_endpoints_ready_only);
    tcase_add_test(tc, test_endpoints_propagation_delay);
    tcase_add_test(tc, test_endpoints_pooled_connection_outlives_removal);
    tcase_add_test(tc, test_endpoints_no_retry_of_written_post);
    tcase_add_test(tc, test_endpoints_retry_when_nothing_written);
    tcase_add_test(tc, test_endpoints_idle_close_noticed);
    tcase_add_test(tc, test_endpoints_idle_timeout);
    tcase_add_test(tc, test_endpoints_retry_after);
    tcase_add_test(tc, test_endpoints_traceparent);
    suite_add_tcase(s, tc);
    TCase *tv = tcase_create("validation");
    tcase_add_checked_fixture(tv, setup, teardown);
    tcase_set_timeout(tv, 120);
    tcase_add_test(tv, test_endpoints_valid_defaults);
    tcase_add_test(tv, test_endpoints_slice_addresses);
    tcase_add_test(tv, test_endpoints_slice_fields);
    tcase_add_test(tv, test_endpoints_slice_limits);
    tcase_add_test(tv, test_endpoints_slice_update);
    tcase_add_test(tv, test_endpoints_endpoints);
    suite_add_tcase(s, tv);
    return s;
}

int main(void)
{
    return kop_test_run(kubesim_endpoints_suite());
}
