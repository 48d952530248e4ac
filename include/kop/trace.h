/* SPDX-License-Identifier: Apache-2.0 */
/*
 * W3C Trace Context and spans: the traceparent header (parse and format,
 * https://www.w3.org/TR/trace-context/ §3.2), random trace and span ids, the
 * calling thread's current span context (log lines and outgoing calls read
 * it), and spans that end in a process-wide sink (the OTLP exporter,
 * kop/otlp.h) or are dropped when there is none.
 *
 * Sampling is OpenTelemetry's default, ParentBased(AlwaysOn): a span with
 * a remote parent is recorded when the parent's sampled flag is set; a new
 * trace is always sampled.
 *
 * Thread-safety: kop_trace_set_sink() is init-only (before any span can
 * end, and after the last one has); the current context is per thread;
 * everything else may be called from any thread. A span belongs to one
 * thread at a time.
 */
#ifndef KOP_TRACE_H
#define KOP_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* "00-" 32 hex "-" 16 hex "-" 2 hex, and the NUL. */
#define KOP_TRACEPARENT_SIZE 56
#define KOP_TRACE_FLAG_SAMPLED 0x01

struct kop_trace_ctx {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t flags; /* KOP_TRACE_FLAG_SAMPLED */
    bool valid;    /* false: no context (the zero value) */
};

/*
 * Parse a traceparent header value. Version 00 must be exactly 55
 * characters; a higher version (not ff) may carry more after a '-', which
 * is ignored, as the spec asks of a version-00 parser. Hex must be
 * lower-case; all-zero trace or span ids are invalid. Returns 0 (*ret
 * written, valid) or -EINVAL; callers then start a new trace.
 */
int kop_trace_parse(const char *header, struct kop_trace_ctx *ret);

/* Format ctx as a version-00 traceparent into buf (KOP_TRACEPARENT_SIZE
 * bytes at least). Returns 0, -EINVAL when ctx is not valid, -ENOSPC. */
int kop_trace_format(const struct kop_trace_ctx *ctx, char *buf, size_t len);

/* Lower-case hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void kop_trace_hex(const uint8_t *id, size_t n, char *out);

/* Fill id with n random bytes (a per-thread generator seeded from
 * getrandom(2)), never all zero. */
void kop_trace_random_id(uint8_t *id, size_t n);

/* The calling thread's current span context: true and *ret written when
 * one is set. */
bool kop_trace_current(struct kop_trace_ctx *ret);

/* Set the calling thread's current context (NULL or an invalid one
 * clears it). Returns the previous one (valid false when none), so that a
 * caller can restore it. */
struct kop_trace_ctx kop_trace_set_current(const struct kop_trace_ctx *ctx);

/* How many spans this thread started as children of its current context
 * since it was set (0 without one): a caller can drop a span under which
 * nothing happened. */
unsigned kop_trace_current_children(void);

enum kop_span_kind {
    /* OTLP's SpanKind numbers (opentelemetry-proto trace.proto) */
    KOP_SPAN_INTERNAL = 1,
    KOP_SPAN_SERVER = 2,
    KOP_SPAN_CLIENT = 3,
};

enum kop_span_status {
    /* OTLP's Status.StatusCode numbers */
    KOP_SPAN_UNSET = 0,
    KOP_SPAN_OK = 1,
    KOP_SPAN_ERROR = 2,
};

/* Attributes a span keeps at most; later ones are dropped. */
#define KOP_SPAN_MAX_ATTRIBUTES 12

struct kop_span_attribute {
    const char *key; /* a string that outlives the span (a literal) */
    bool is_int;
    int64_t int_value;
    char *str_value; /* malloc'd */
};

struct kop_span {
    struct kop_trace_ctx ctx; /* this span: trace id, its own span id, flags */
    uint8_t parent_span_id[8];
    bool has_parent;
    bool recording; /* sampled and a sink is installed: attributes are kept */
    char name[96];  /* cut when longer */
    enum kop_span_kind kind;
    int64_t start_ns; /* unix time */
    int64_t end_ns;
    enum kop_span_status status;
    char status_message[128];
    unsigned n_attributes; /* only while recording */
    struct kop_span_attribute attributes[KOP_SPAN_MAX_ATTRIBUTES];
    struct kop_span *_next;
};

/*
 * Start a span: a child of parent when it is valid (same trace id, parent's
 * span id as parent, parent's flags), else the root of a new sampled trace.
 * Returns NULL on ENOMEM.
 */
struct kop_span *kop_span_start(const char *name, enum kop_span_kind kind,
                                const struct kop_trace_ctx *parent);

/* Attributes (no-ops when the span is not recording or span is NULL). key
 * must outlive the span (a string literal); a string value is copied (left
 * out of the JSON when it is not valid UTF-8). */
void kop_span_set_str(struct kop_span *span, const char *key, const char *value);
void kop_span_set_int(struct kop_span *span, const char *key, int64_t value);
void kop_span_set_status(struct kop_span *span, enum kop_span_status status, const char *message);

/* Stamp the end time and hand the span to the sink when it records, else
 * free it. NULL is fine. The span is gone afterwards. */
void kop_span_end(struct kop_span *span);

/* Release a span without ending it. NULL is fine. */
void kop_span_free(struct kop_span *span);

/* The attributes as an OTLP/JSON KeyValue array ([{"key": k, "value":
 * {"stringValue": v}}], integers as {"intValue": "decimal"}; strings that
 * are not UTF-8 left out). @ref new; NULL on ENOMEM. */
json_t *kop_span_attributes_json(const struct kop_span *span);

/* Takes ownership of span (it must free it, now or later). */
typedef void kop_trace_sink_fn(void *userdata, struct kop_span *span);

/* Install (fn non-NULL) or remove the process-wide sink. */
void kop_trace_set_sink(kop_trace_sink_fn *fn, void *userdata);

/* Whether a sink is installed (spans are recorded). */
bool kop_trace_enabled(void);

#endif /* KOP_TRACE_H */
