/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP/HTTP JSON span exporter (kop/otlp.h).
 *
 * DESIGN
 *
 * Threads: any thread submits (lock, append, maybe signal, unlock: no
 * allocation, no I/O under the lock); one exporter thread takes up to a
 * batch under the lock and encodes and POSTs it without the lock. The
 * exporter thread owns the curl easy handle.
 *
 * The defaults are the OpenTelemetry SDK's batch span processor's
 * (OTEL_BSP_MAX_QUEUE_SIZE 2048, OTEL_BSP_MAX_EXPORT_BATCH_SIZE 512,
 * OTEL_BSP_SCHEDULE_DELAY 5000 ms) and the OTLP exporter's 10 s timeout.
 * A failed batch is not retried: spans are diagnostics, and a collector
 * that is down must not make the queue hold old spans while new ones are
 * dropped.
 */
#include "kop/curltls.h"
#include "kop/otlp.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/clock.h"
#include "kop/json.h"
#include "kop/log.h"
#include "kop/metrics.h"
#include "kop/thread.h"

#define LOGGER "otlp"
#define QUEUE_DEFAULT 2048
#define BATCH_DEFAULT 512
#define FLUSH_MS_DEFAULT 5000
#define TIMEOUT_MS_DEFAULT 10000
#define FAILURE_LOG_EVERY_NS (60 * KOP_NSEC_PER_SEC)

struct kop_otlp {
    char *url;
    char *service_name;
    char *scope_name;
    size_t queue_max, batch_max;
    int64_t flush_ms, timeout_ms;

    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    struct kop_span *head, *tail;
    size_t n;
    bool stop;        /* no more submits; the thread drains and exits */
    int64_t deadline; /* monotonic: drop what is left after it (stop) */
    bool started, joined;
    pthread_t thread;

    CURL *easy; /* exporter thread */
    struct kop_metric *exported, *drop_full, *drop_failed, *drop_shutdown;
    int64_t last_failure_log; /* exporter thread */
    unsigned long failures_unlogged;
    size_t shutdown_dropped; /* by the thread, read after the join */
    struct kop_span **batch; /* batch_max slots, the exporter thread's */
};

/* ---- encoding ------------------------------------------------------------------------ */

static json_t *str_attr(const char *key, const char *value)
{
    return json_pack("{s:s, s:{s:s}}", "key", key, "value", "stringValue", value);
}

static json_t *nanos(int64_t ns)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, ns);
    return json_string(buf);
}

static json_t *encode_span(const struct kop_span *s)
{
    char tid[33], sid[17], pid[17];
    kop_trace_hex(s->ctx.trace_id, 16, tid);
    kop_trace_hex(s->ctx.span_id, 8, sid);
    json_t *o = json_pack("{s:s, s:s}", "traceId", tid, "spanId", sid);
    if (!o)
        return NULL;
    if (s->has_parent) {
        kop_trace_hex(s->parent_span_id, 8, pid);
        json_object_set_new(o, "parentSpanId", json_string(pid));
    }
    /* a name that is not UTF-8 (from a request line) becomes empty */
    json_t *name = json_string(s->name);
    json_object_set_new(o, "name", name ? name : json_string(""));
    json_object_set_new(o, "kind", json_integer(s->kind));
    json_object_set_new(o, "startTimeUnixNano", nanos(s->start_ns));
    json_object_set_new(o, "endTimeUnixNano", nanos(s->end_ns));
    json_object_set_new(o, "attributes", kop_span_attributes_json(s));
    json_t *st = json_pack("{s:i}", "code", (int)s->status);
    if (st && s->status_message[0]) {
        json_t *m = json_string(s->status_message);
        if (m)
            json_object_set_new(st, "message", m);
    }
    json_object_set_new(o, "status", st);
    return o;
}

int kop_otlp_encode(struct kop_span *const *spans, size_t n, const char *service_name,
                    const char *scope_name, char **ret_body)
{
    json_t *arr = json_array();
    json_t *doc = NULL;
    int r = -ENOMEM;
    if (!arr)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        json_t *s = encode_span(spans[i]);
        if (!s || json_array_append_new(arr, s) < 0)
            goto out;
    }
    json_t *res_attrs = json_array();
    if (!res_attrs)
        goto out;
    json_array_append_new(res_attrs, str_attr("service.name", service_name ? service_name : ""));
    doc = json_pack("{s:[{s:{s:o}, s:[{s:{s:s}, s:O}]}]}", "resourceSpans", "resource",
                    "attributes", res_attrs, "scopeSpans", "scope", "name",
                    scope_name ? scope_name : (service_name ? service_name : ""), "spans", arr);
    if (!doc)
        goto out;
    /* not json_dumps: its buffer comes from jansson's allocator, which may
     * be hooked (kop/arena.h) */
    char *body = NULL;
    r = kop_json_dump(doc, JSON_COMPACT, &body, NULL);
    if (r < 0)
        goto out;
    *ret_body = body;
out:
    json_decref(doc);
    json_decref(arr);
    return r;
}

/* ---- export ---------------------------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t nmemb, void *ud)
{
    (void)p;
    (void)ud;
    return size * nmemb;
}

/* POST one body. Returns 0, or a negative errno with why in err. */
static int post(struct kop_otlp *o, const char *body, int64_t timeout_ms, char *err, size_t errlen)
{
    char cerr[CURL_ERROR_SIZE] = "";
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    CURL *e = o->easy;
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_URL, o->url);
    kop_curltls_setup(e); /* IP SANs with mbedTLS (kop/curltls.h) */
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(timeout_ms > 0 ? timeout_ms : 1));
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cc = curl_easy_perform(e);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(h);
    if (cc != CURLE_OK) {
        snprintf(err, errlen, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
        return -EIO;
    }
    if (code < 200 || code >= 300) {
        snprintf(err, errlen, "HTTP %ld", code);
        return -EIO;
    }
    return 0;
}

static void log_failure(struct kop_otlp *o, const char *err, size_t n)
{
    int64_t now = kop_clock_now_ns();
    o->failures_unlogged++;
    if (o->last_failure_log && now - o->last_failure_log < FAILURE_LOG_EVERY_NS)
        return;
    kop_log(KOP_LOG_WARN, LOGGER, "exporting spans failed; spans dropped",
            json_pack("{s:s, s:s, s:I, s:I}", "url", o->url, "error", err, "spans", (json_int_t)n,
                      "failuresSinceLastLog", (json_int_t)o->failures_unlogged));
    o->failures_unlogged = 0;
    o->last_failure_log = now;
}

static void export_batch(struct kop_otlp *o, struct kop_span **batch, size_t n, int64_t timeout_ms)
{
    char *body = NULL;
    char err[CURL_ERROR_SIZE + 32] = "";
    int r = kop_otlp_encode(batch, n, o->service_name, o->scope_name, &body);
    if (r == 0)
        r = post(o, body, timeout_ms, err, sizeof(err));
    else
        snprintf(err, sizeof(err), "out of memory");
    free(body);
    if (r == 0) {
        kop_counter_add(o->exported, (double)n);
    } else {
        kop_counter_add(o->drop_failed, (double)n);
        log_failure(o, err, n);
    }
    for (size_t i = 0; i < n; i++)
        kop_span_free(batch[i]);
}

static void *exporter_main(void *arg)
{
    struct kop_otlp *o = arg;
    struct kop_span **batch = o->batch;
    pthread_mutex_lock(&o->lock);
    for (;;) {
        if (!o->stop && o->n < o->batch_max) {
            struct timespec ts = kop_clock_deadline_ms(o->flush_ms);
            while (!o->stop && o->n < o->batch_max &&
                   pthread_cond_timedwait(&o->cond, &o->lock, &ts) != ETIMEDOUT)
                ;
        }
        if (o->stop && (o->n == 0 || kop_clock_now_ns() >= o->deadline))
            break;
        size_t n = 0;
        while (o->head && n < o->batch_max) {
            batch[n++] = o->head;
            o->head = o->head->_next;
        }
        if (!o->head)
            o->tail = NULL;
        o->n -= n;
        int64_t timeout = o->timeout_ms;
        if (o->stop) {
            int64_t left = (o->deadline - kop_clock_now_ns()) / KOP_NSEC_PER_MSEC;
            if (left < timeout)
                timeout = left;
        }
        pthread_mutex_unlock(&o->lock);
        if (n)
            export_batch(o, batch, n, timeout);
        pthread_mutex_lock(&o->lock);
    }
    /* past the shutdown deadline: what is left is dropped */
    struct kop_span *s = o->head;
    size_t left = o->n;
    o->head = o->tail = NULL;
    o->n = 0;
    pthread_mutex_unlock(&o->lock);
    kop_counter_add(o->drop_shutdown, (double)left);
    o->shutdown_dropped = left;
    while (s) {
        struct kop_span *next = s->_next;
        kop_span_free(s);
        s = next;
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------- */

static struct kop_metric *counter(struct kop_metrics *m, const char *prefix, const char *name,
                                  const char *help, const char *reason)
{
    char full[128];
    static const char *const labels[] = {"reason", NULL};
    snprintf(full, sizeof(full), "%s%s%s", prefix ? prefix : "", prefix ? "_" : "", name);
    struct kop_metric_family *f =
        kop_metrics_register(m, KOP_METRIC_COUNTER, full, help, reason ? labels : NULL, NULL, 0);
    return reason ? kop_metric_child(f, reason) : kop_metric_child(f);
}

int kop_otlp_new(const struct kop_otlp_options *opts, struct kop_otlp **ret)
{
    assert(opts);
    assert(ret);
    if (!opts->endpoint || !opts->service_name || !opts->service_name[0] ||
        (strncmp(opts->endpoint, "http://", 7) != 0 && strncmp(opts->endpoint, "https://", 8) != 0))
        return -EINVAL;
    int r = -ENOMEM;
    struct kop_otlp *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    pthread_mutex_init(&o->lock, NULL);
    if (kop_clock_cond_init(&o->cond) != 0) {
        pthread_mutex_destroy(&o->lock);
        free(o);
        return -ENOMEM;
    }
    size_t elen = strlen(opts->endpoint);
    while (elen && opts->endpoint[elen - 1] == '/')
        elen--;
    size_t ulen = elen + sizeof("/v1/traces");
    o->url = malloc(ulen);
    o->service_name = strdup(opts->service_name);
    o->scope_name = strdup(opts->scope_name ? opts->scope_name : opts->service_name);
    o->easy = curl_easy_init();
    if (!o->url || !o->service_name || !o->scope_name || !o->easy)
        goto out;
    snprintf(o->url, ulen, "%.*s/v1/traces", (int)elen, opts->endpoint);
    o->queue_max = opts->queue_size ? opts->queue_size : QUEUE_DEFAULT;
    o->batch_max = opts->batch_size ? opts->batch_size : BATCH_DEFAULT;
    if (o->batch_max > o->queue_max)
        o->batch_max = o->queue_max;
    o->flush_ms = opts->flush_interval_ms > 0 ? opts->flush_interval_ms : FLUSH_MS_DEFAULT;
    o->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : TIMEOUT_MS_DEFAULT;
    o->batch = calloc(o->batch_max, sizeof(*o->batch));
    if (!o->batch)
        goto out;

    struct kop_metrics *m = opts->metrics ? opts->metrics : kop_metrics_global();
    const char *p = opts->metric_prefix;
    static const char drop_help[] = "Spans not exported, by reason.";
    o->exported =
        counter(m, p, "trace_spans_exported_total", "Spans the OTLP endpoint accepted.", NULL);
    o->drop_full = counter(m, p, "trace_spans_dropped_total", drop_help, "queue_full");
    o->drop_failed = counter(m, p, "trace_spans_dropped_total", drop_help, "export_failed");
    o->drop_shutdown = counter(m, p, "trace_spans_dropped_total", drop_help, "shutdown");

    r = kop_thread_start(&o->thread, exporter_main, o, "otlp-export");
    if (r < 0)
        goto out;
    o->started = true;
    *ret = o;
    return 0;
out:
    kop_otlp_free(o);
    return r;
}

void kop_otlp_submit(struct kop_otlp *o, struct kop_span *span)
{
    assert(span);
    span->_next = NULL;
    pthread_mutex_lock(&o->lock);
    if (o->stop || o->n >= o->queue_max) {
        pthread_mutex_unlock(&o->lock);
        kop_counter_inc(o->stop ? o->drop_shutdown : o->drop_full);
        kop_span_free(span);
        return;
    }
    if (o->tail)
        o->tail->_next = span;
    else
        o->head = span;
    o->tail = span;
    o->n++;
    if (o->n == o->batch_max)
        pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
}

void kop_otlp_sink(void *userdata, struct kop_span *span)
{
    kop_otlp_submit(userdata, span);
}

int kop_otlp_shutdown(struct kop_otlp *o, int64_t timeout_ms)
{
    assert(o);
    if (!o->started || o->joined)
        return 0;
    pthread_mutex_lock(&o->lock);
    o->stop = true;
    o->deadline = kop_clock_now_ns() + (timeout_ms > 0 ? timeout_ms : 0) * KOP_NSEC_PER_MSEC;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->lock);
    pthread_join(o->thread, NULL);
    o->joined = true;
    return o->shutdown_dropped > 0 ? -ETIMEDOUT : 0;
}

void kop_otlp_free(struct kop_otlp *o)
{
    if (!o)
        return;
    kop_otlp_shutdown(o, 0);
    if (o->easy)
        curl_easy_cleanup(o->easy);
    pthread_cond_destroy(&o->cond);
    pthread_mutex_destroy(&o->lock);
    free(o->url);
    free(o->service_name);
    free(o->scope_name);
    free(o->batch);
    free(o);
}
