/* SPDX-License-Identifier: Apache-2.0 */
/*
 * OTLP/HTTP span exporter with JSON bodies (OpenTelemetry protocol
 * specification, "OTLP/HTTP"; the JSON mapping of
 * opentelemetry/proto/collector/trace/v1/trace_service.proto): spans ended
 * anywhere in the process (kop/trace.h) go into a bounded queue; one
 * exporter thread POSTs them in batches to <endpoint>/v1/traces with
 * libcurl, when a batch is full or the flush interval has passed.
 *
 * Never blocks the thread that ends a span: a full queue drops the span
 * and counts it. A failed export drops its batch (counted; the failure is
 * logged at most once a minute with the number of failures since).
 *
 * Metrics (registry from the options): <prefix>_trace_spans_exported_total,
 * <prefix>_trace_spans_dropped_total{reason="queue_full"|"export_failed"|
 * "shutdown"}.
 *
 * Thread-safety: new/shutdown/free single-threaded; submit (and the sink)
 * from any thread.
 */
#ifndef KOP_OTLP_H
#define KOP_OTLP_H

#include <stddef.h>
#include <stdint.h>

#include "kop/trace.h"

struct kop_metrics;

struct kop_otlp_options {
    /* Base URL, e.g. "http://otel-collector:4318": spans go to
     * <endpoint>/v1/traces, as OTEL_EXPORTER_OTLP_ENDPOINT does. */
    const char *endpoint;
    const char *service_name;    /* resource attribute service.name; required */
    const char *scope_name;      /* instrumentation scope; NULL = service_name */
    size_t queue_size;           /* spans waiting at most; 0 = 2048 */
    size_t batch_size;           /* spans per request at most; 0 = 512 */
    int64_t flush_interval_ms;   /* 0 = 5000 */
    int64_t timeout_ms;          /* per request; 0 = 10000 */
    struct kop_metrics *metrics; /* NULL = kop_metrics_global() */
    const char *metric_prefix;   /* NULL = none */
};

struct kop_otlp;

/* Create the exporter and start its thread. Returns 0, -EINVAL (no
 * endpoint or service name, or not an http(s) URL), -ENOMEM, or -errno of
 * pthread_create. */
int kop_otlp_new(const struct kop_otlp_options *opts, struct kop_otlp **ret);

/* Queue an ended span for export. Steals span (freed when dropped). */
void kop_otlp_submit(struct kop_otlp *o, struct kop_span *span);

/* A kop_trace_sink_fn: userdata is the struct kop_otlp. */
void kop_otlp_sink(void *userdata, struct kop_span *span);

/*
 * Export what is queued, then stop the thread; spans still queued when
 * timeout_ms runs out are dropped (reason "shutdown"). Later submits are
 * dropped. Returns 0 or -ETIMEDOUT. Idempotent.
 */
int kop_otlp_shutdown(struct kop_otlp *o, int64_t timeout_ms);

/* Shutdown without grace when still running, then free. NULL is fine. */
void kop_otlp_free(struct kop_otlp *o);

/*
 * The ExportTraceServiceRequest body for n spans (a linked list through
 * _next is not used: spans is an array). Returns 0 and a malloc'd,
 * NUL-terminated JSON text, or -ENOMEM.
 */
int kop_otlp_encode(struct kop_span *const *spans, size_t n, const char *service_name,
                    const char *scope_name, char **ret_body);

#endif /* KOP_OTLP_H */
