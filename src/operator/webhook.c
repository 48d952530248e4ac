/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The webhook server: routes /convert and the validating path to the api
 * layer's review handlers, each request inside a per-thread arena, behind
 * the mbedTLS front. See kop/webhook.h.
 */
#include "kop/webhook.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kop/arena.h"
#include "kop/clock.h"
#include "kop/convstream.h"
#include "kop/http.h"
#include "kop/log.h"
#include "kop/membership.h"
#include "kop/review.h"
#include "kop/selfdial.h"
#include "kop/sharder.h"
#include "kop/tls.h"

/* First chunk of a worker thread's arena; later chunks grow with demand and
 * are returned on reset, so a 10,000-object review does not pin its memory. */
#define ARENA_CHUNK (256u * 1024u)

struct kop_webhook {
    struct kop_http_server *http;
    struct kop_tls *tls;
    struct kop_selfdial *selfdial; /* the readiness check */
    struct kop_admission_options admission;
    void *(*cluster)(void *ud, const char *name);
    void (*cluster_put)(void *handle);
    kop_admission_child_lookup_fn *cluster_child_lookup;
    void *cluster_userdata;
    atomic_bool stopped;
};

static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_destroy(void *a)
{
    kop_arena_free(a);
}

static void arena_key_init(void)
{
    if (pthread_key_create(&arena_key, arena_destroy) != 0)
        abort(); /* only fails when the process is out of keys at start-up */
}

/* The calling worker thread's arena, created on first use; NULL on ENOMEM
 * (the request is then served from the heap). */
static struct kop_arena *thread_arena(void)
{
    pthread_once(&arena_once, arena_key_init);
    struct kop_arena *a = pthread_getspecific(arena_key);
    if (!a) {
        a = kop_arena_new(ARENA_CHUNK);
        if (a && pthread_setspecific(arena_key, a) != 0) {
            kop_arena_free(a);
            a = NULL;
        }
    }
    return a;
}

/* cluster: the member path's cluster (a DNS label), NULL on the plain
 * paths. */
static void log_review(const struct kop_review_result *res, int64_t started_ns, const char *cluster)
{
    bool conversion = res->type == KOP_REVIEW_CONVERSION;
    enum kop_log_level level = KOP_LOG_DEBUG;
    const char *msg;
    if (res->http_status != 200) {
        level = KOP_LOG_INFO;
        msg = "rejected malformed review request";
    } else if (conversion) {
        msg = res->success ? "converted objects" : "conversion failed";
        if (!res->success)
            level = KOP_LOG_WARN;
    } else {
        msg = res->success ? "admitted" : "denied";
        if (!res->success)
            level = KOP_LOG_INFO;
    }
    if (!kop_log_enabled(level))
        return;
    double secs = (double)(kop_clock_now_ns() - started_ns) / 1e9;
    json_t *f =
        json_pack("{s:s, s:s, s:i, s:f}", conversion ? "conversionUID" : "admissionUID", res->uid,
                  "webhook", conversion ? KOP_WEBHOOK_CONVERT_PATH : KOP_WEBHOOK_VALIDATE_PATH,
                  "code", res->http_status, "durationSeconds", secs);
    if (f && conversion)
        json_object_set_new(f, "objects", json_integer((json_int_t)res->n_objects));
    if (f && res->message[0])
        json_object_set_new(f, "reason", json_string(res->message));
    if (f && !conversion && res->violations)
        json_object_set_new(f, "violations", json_integer(res->violations));
    if (f && cluster)
        json_object_set_new(f, "cluster", json_string(cluster));
    kop_log(level, "webhook", msg, f);
}

/* Hand a review result to the HTTP layer (the body moves). */
static void answer(const struct kop_review_result *res, struct kop_http_response *resp)
{
    resp->status = res->http_status;
    resp->body = res->body;
    resp->body_len = res->body_len;
    resp->content_type = "application/json";
}

/* A review with the given rule-4 lookup, or, with deny set, a denial
 * before the rules (a cluster kop does not know); cluster for the log
 * line (NULL: the plain path). */
static void validate(const struct kop_http_request *req, struct kop_http_response *resp,
                     const struct kop_admission_options *opts, const char *deny,
                     const char *cluster)
{
    int64_t started = kop_clock_now_ns();
    struct kop_review_result res;
    memset(&res, 0, sizeof(res));

    struct kop_arena *a = thread_arena();
    struct kop_arena *prev = kop_arena_json_bind(a);
    int r = deny ? kop_review_deny_http(req->content_type, req->body, req->body_len, 404,
                                        "NotFound", deny, &res)
                 : kop_review_admit_http(req->content_type, req->body, req->body_len, opts, &res);
    kop_arena_json_bind(prev);
    if (a)
        kop_arena_reset(a);
    if (r < 0) {
        kop_logf(KOP_LOG_ERROR, "webhook", "review handler failed: errno %d", -r);
        kop_http_response_status(resp, 500, "InternalError", "internal error handling the review");
        return;
    }
    log_review(&res, started, cluster);
    answer(&res, resp);
}

static void on_validate(void *ud, const struct kop_http_request *req,
                        struct kop_http_response *resp)
{
    struct kop_webhook *w = ud;
    validate(req, resp, &w->admission, NULL, NULL);
}

/* KOP_WEBHOOK_CLUSTERS_PATH NAME: rule 4 reads that cluster's caches; a
 * name kop does not reconcile (or no name) is a 404 denial, never a
 * review against another cluster's caches. The name is echoed only when
 * it is a label (the path is the caller's). */
static void on_validate_cluster(void *ud, const struct kop_http_request *req,
                                struct kop_http_response *resp)
{
    struct kop_webhook *w = ud;
    const char *name = req->path + strlen(KOP_WEBHOOK_CLUSTERS_PATH);
    if (!kop_membership_identity_valid(name)) {
        validate(req, resp, NULL,
                 "the webhook path names no cluster: " KOP_WEBHOOK_CLUSTERS_PATH
                 "NAME takes a DNS label",
                 NULL);
        return;
    }
    void *handle = w->cluster ? w->cluster(w->cluster_userdata, name) : NULL;
    if (!handle) {
        char msg[160];
        snprintf(msg, sizeof(msg), "cluster \"%s\" is not one kop reconciles", name);
        validate(req, resp, NULL, msg, name);
        return;
    }
    struct kop_admission_options o = w->admission;
    o.child_lookup = w->cluster_child_lookup;
    o.child_lookup_userdata = handle;
    validate(req, resp, &o, NULL, name);
    w->cluster_put(handle);
}

/* ---- /convert streams (kop/convstream.h) ---------------------------------------- */

struct conversion {
    struct kop_convstream *cs;
    int64_t started;
};

static void *conv_begin(void *ud, const struct kop_http_request *req, size_t content_length)
{
    struct conversion *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->started = kop_clock_now_ns();
    if (kop_convstream_new(req->content_type, NULL, &c->cs) < 0 ||
        kop_convstream_expect(c->cs, content_length) < 0) {
        kop_convstream_free(c->cs);
        free(c);
        return NULL;
    }
    return c;
}

static int conv_data(void *st, const char *p, size_t n)
{
    struct conversion *c = st;
    return kop_convstream_feed(c->cs, p, n);
}

static size_t conv_memory(const void *st)
{
    const struct conversion *c = st;
    return kop_convstream_memory(c->cs);
}

static void conv_end(void *st, const struct kop_http_request *req, struct kop_http_response *resp)
{
    struct conversion *c = st;
    struct kop_review_result res;
    (void)req;
    if (kop_convstream_finish(c->cs, &res) < 0) {
        kop_logf(KOP_LOG_ERROR, "webhook", "conversion review failed: out of memory");
        kop_http_response_status(resp, 500, "InternalError", "internal error handling the review");
        return;
    }
    log_review(&res, c->started, NULL);
    answer(&res, resp);
}

static void conv_free(void *st)
{
    struct conversion *c = st;
    if (!c)
        return;
    kop_convstream_free(c->cs);
    free(c);
}

static const struct kop_http_stream conversion_stream = {
    .begin = conv_begin,
    .data = conv_data,
    .memory = conv_memory,
    .end = conv_end,
    .free = conv_free,
};

/* The TLS front takes int milliseconds; flags allow longer durations. */
static int clamp_ms(int64_t ms)
{
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The HTTP server of the webhook's routes, run by the TLS front's loop. */
static int start_http(struct kop_webhook *w, const struct kop_webhook_options *opts)
{
    const struct kop_config *cfg = opts->cfg;
    const struct kop_http_route routes[] = {
        {
            .path = KOP_WEBHOOK_CONVERT_PATH,
            .methods = KOP_HTTP_POST,
            .max_body = cfg->convert_max_body,
            .stream = &conversion_stream,
            .userdata = w,
            .webhook_name = KOP_WEBHOOK_CONVERT_PATH,
        },
        {
            .path = KOP_WEBHOOK_VALIDATE_PATH,
            .methods = KOP_HTTP_POST,
            .max_body = cfg->admission_max_body,
            .fn = on_validate,
            .userdata = w,
            .webhook_name = KOP_WEBHOOK_VALIDATE_PATH,
        },
        {
            .path = KOP_WEBHOOK_CLUSTERS_PATH,
            .methods = KOP_HTTP_POST,
            .max_body = cfg->admission_max_body,
            .fn = on_validate_cluster,
            .userdata = w,
            .webhook_name = KOP_WEBHOOK_CLUSTERS_PATH,
            .prefix = true,
        },
        {
            .path = KOP_SHARDER_MUTATE_PATH,
            .methods = KOP_HTTP_POST,
            .max_body = cfg->admission_max_body,
            .fn = opts->shard_mutate,
            .userdata = opts->shard_mutate_userdata,
            .webhook_name = KOP_SHARDER_MUTATE_PATH,
        },
    };
    size_t n_routes = sizeof(routes) / sizeof(routes[0]) - (opts->shard_mutate ? 0 : 1);
    int64_t idle_s = cfg->idle_timeout_ms / 1000;
    const struct kop_http_server_options hopts = {
        .no_listen = true,
        /* run by the TLS front's loop: no thread hand-off per request */
        .external = true,
        .threads = (unsigned)cfg->webhook_threads,
        .max_header_size = cfg->max_header_bytes,
        .timeout_s = idle_s > UINT_MAX ? UINT_MAX
                     : idle_s > 0      ? (unsigned)idle_s
                                       : 1,
        .max_connections = (unsigned)cfg->max_connections,
        .name = "webhook",
        .tls_headers = true,
        .metric_prefix = "kop",
        .webhook_metric_prefix = "controller_runtime_webhook",
        .budget = cfg->webhook_memory_budget,
        .header_timeout_ms = (unsigned)clamp_ms(cfg->request_header_timeout_ms),
        .min_body_rate = cfg->min_body_rate,
        /* a span per review: log lines carry its ids (kop/trace.h) */
        .trace = true,
    };
    int r = kop_http_server_new(&hopts, routes, n_routes, &w->http);
    if (r < 0)
        return r;
    return kop_http_server_start(w->http);
}

/* The TLS front on the webhook port, and the self-dial of the readiness
 * check. */
static int start_tls(struct kop_webhook *w, const struct kop_config *cfg)
{
    const struct kop_tls_options topts = {
        .host = cfg->webhook_host,
        .port = (uint16_t)cfg->webhook_port,
        .cert_dir = cfg->cert_dir,
        .client_ca_file = cfg->client_ca_file,
        .client_names = (const char *const *)cfg->client_cert_names,
        .handshake_timeout_ms = clamp_ms(cfg->tls_handshake_timeout_ms),
        .idle_timeout_ms = clamp_ms(cfg->idle_timeout_ms),
        .max_connections = (unsigned)cfg->max_connections,
        .max_per_ip = (unsigned)cfg->max_connections_per_ip,
        .handshakes_per_ip_per_s = (unsigned)cfg->max_handshakes_per_ip_per_second,
        .http = w->http,
        .metric_prefix = "kop",
    };
    int r = kop_tls_new(&topts, &w->tls);
    if (r == 0)
        r = kop_tls_start(w->tls);
    if (r < 0)
        return r;
    const struct kop_selfdial_options sopts = {.host = cfg->webhook_host,
                                               .port = kop_tls_port(w->tls),
                                               .client_auth = cfg->client_ca_file != NULL};
    return kop_selfdial_new(&sopts, &w->selfdial);
}

int kop_webhook_start(const struct kop_webhook_options *opts, struct kop_webhook **ret)
{
    const struct kop_config *cfg = opts->cfg;
    int r;
    struct kop_webhook *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->admission.allowed_registries = cfg->allowed_registries;
    w->admission.n_allowed_registries = cfg->n_allowed_registries;
    w->admission.child_lookup = opts->child_lookup;
    w->admission.child_lookup_userdata = opts->child_lookup_userdata;
    w->cluster = opts->cluster;
    w->cluster_put = opts->cluster_put;
    assert(!w->cluster || w->cluster_put);
    w->cluster_child_lookup = opts->cluster_child_lookup;
    w->cluster_userdata = opts->cluster_userdata;

    r = start_http(w, opts);
    if (r == 0)
        r = start_tls(w, cfg);
    if (r < 0)
        goto out;

    kop_log(KOP_LOG_INFO, "webhook", "serving webhook",
            json_pack("{s:s, s:i, s:s, s:[s,s]}", "host",
                      cfg->webhook_host && cfg->webhook_host[0] ? cfg->webhook_host : "*", "port",
                      (int)kop_tls_port(w->tls), "certDir", cfg->cert_dir ? cfg->cert_dir : "",
                      "paths", KOP_WEBHOOK_CONVERT_PATH, KOP_WEBHOOK_VALIDATE_PATH));
    *ret = w;
    return 0;
out:
    kop_webhook_free(w);
    return r;
}

bool kop_webhook_ready(struct kop_webhook *w)
{
    if (!w || atomic_load(&w->stopped) || !kop_tls_ready(w->tls))
        return false;
    int r = kop_selfdial_check(w->selfdial);
    if (r < 0 && kop_log_enabled(KOP_LOG_DEBUG))
        kop_log_errno(KOP_LOG_DEBUG, "webhook", "readiness self-check failed", r,
                      json_pack("{s:i}", "port", (int)kop_tls_port(w->tls)));
    return r == 0;
}

uint16_t kop_webhook_port(const struct kop_webhook *w)
{
    return w ? kop_tls_port(w->tls) : 0;
}

/* How often the keep-alive drain looks at the connections. */
#define DRAIN_TICK_MS 20

/*
 * The keep-alive drain before the listener closes (kop/webhook.h): every
 * answer from now on closes its connection; connections between requests
 * are closed once they have been so for idle_grace_ms with nothing unread,
 * from idle_grace_ms on (a client that keeps using its connection meets
 * "Connection: close" first). It ends when no connection is left, or at
 * twice the grace at most (connections that are still busy are answered
 * after the listener closed; fresh ones that never sent a request are
 * closed then).
 */
static void keepalive_drain(struct kop_webhook *w, int idle_grace_ms, int64_t deadline)
{
    kop_http_server_end_keepalive(w->http);
    kop_log(KOP_LOG_INFO, "webhook", "shutdown delay over, draining webhook connections",
            json_pack("{s:i}", "idleGraceMs", idle_grace_ms));
    int64_t start = kop_clock_now_ns();
    int64_t grace = (int64_t)idle_grace_ms * KOP_NSEC_PER_MSEC;
    for (;;) {
        int64_t now = kop_clock_now_ns();
        if (now >= deadline)
            return;
        if (now - start >= grace) {
            unsigned open = kop_http_server_close_idle(w->http, idle_grace_ms);
            if (open == 0 || now - start >= 2 * grace)
                return;
        }
        struct timespec ts = {0, DRAIN_TICK_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int kop_webhook_shutdown(struct kop_webhook *w, int idle_grace_ms, int timeout_ms)
{
    assert(w);
    if (atomic_exchange(&w->stopped, true))
        return 0;
    int64_t start = kop_clock_now_ns();
    if (idle_grace_ms > 0) {
        if (idle_grace_ms > timeout_ms / 2)
            idle_grace_ms = timeout_ms / 2;
        keepalive_drain(w, idle_grace_ms, start + (int64_t)timeout_ms * KOP_NSEC_PER_MSEC / 2);
        timeout_ms -= (int)((kop_clock_now_ns() - start) / KOP_NSEC_PER_MSEC);
        if (timeout_ms < 0)
            timeout_ms = 0;
        start = kop_clock_now_ns();
    }
    int r = kop_tls_shutdown(w->tls, timeout_ms);
    int64_t spent_ms = (kop_clock_now_ns() - start) / KOP_NSEC_PER_MSEC;
    int left = timeout_ms - (int)spent_ms;
    int r2 = kop_http_server_shutdown(w->http, left > 0 ? left : 0);
    return r < 0 ? r : r2;
}

void kop_webhook_free(struct kop_webhook *w)
{
    if (!w)
        return;
    kop_tls_free(w->tls);
    kop_http_server_free(w->http);
    kop_selfdial_free(w->selfdial);
    free(w);
}
