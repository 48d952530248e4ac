/* SPDX-License-Identifier: Apache-2.0 */
/*
 * W3C Trace Context (traceparent) and spans handed to a process-wide sink.
 * See kop/trace.h.
 */
#include "kop/trace.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kop/clock.h"

static _Thread_local struct kop_trace_ctx current;
static _Thread_local unsigned current_children; /* spans started under it */

/* The sink and its userdata, swapped together. */
struct sink {
    kop_trace_sink_fn *fn;
    void *userdata;
};
static struct sink sink_slot;
static _Atomic(struct sink *) sink_ptr;

static int hexval(char c)
{
    /* lower-case only: the spec's HEXDIGLC */
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* n bytes from 2n lower-case hex digits; false on anything else. */
static bool unhex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool all_zero(const uint8_t *id, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (id[i])
            return false;
    return true;
}

int kop_trace_parse(const char *header, struct kop_trace_ctx *ret)
{
    uint8_t version;
    struct kop_trace_ctx c = {0};
    if (!header)
        return -EINVAL;
    size_t len = strlen(header);
    /* version "-" trace-id "-" parent-id "-" trace-flags */
    if (len < 55 || header[2] != '-' || header[35] != '-' || header[52] != '-')
        return -EINVAL;
    if (!unhex(header, &version, 1) || version == 0xff)
        return -EINVAL;
    /* Version 00 has exactly these fields; a later version may append
     * more, after a '-' (W3C Trace Context §4.3, "Versioning of
     * traceparent"). */
    if (version == 0 && len != 55)
        return -EINVAL;
    if (version > 0 && len > 55 && header[55] != '-')
        return -EINVAL;
    uint8_t flags;
    if (!unhex(header + 3, c.trace_id, 16) || !unhex(header + 36, c.span_id, 8) ||
        !unhex(header + 53, &flags, 1))
        return -EINVAL;
    if (all_zero(c.trace_id, 16) || all_zero(c.span_id, 8))
        return -EINVAL;
    /* only the sampled flag is defined; others are not propagated */
    c.flags = flags & KOP_TRACE_FLAG_SAMPLED;
    c.valid = true;
    *ret = c;
    return 0;
}

void kop_trace_hex(const uint8_t *id, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * n] = '\0';
}

int kop_trace_format(const struct kop_trace_ctx *ctx, char *buf, size_t len)
{
    assert(ctx);
    if (!ctx->valid)
        return -EINVAL;
    if (len < KOP_TRACEPARENT_SIZE)
        return -ENOSPC;
    char t[33], s[17];
    kop_trace_hex(ctx->trace_id, 16, t);
    kop_trace_hex(ctx->span_id, 8, s);
    snprintf(buf, len, "00-%s-%s-%02x", t, s, (unsigned)ctx->flags);
    return 0;
}

/*
 * Ids come from a per-thread xoshiro256** generator (Blackman and Vigna,
 * "Scrambled linear pseudorandom number generators", 2021) seeded from
 * getrandom(2) on the thread's first id, as OpenTelemetry's SDKs seed a
 * fast generator from the system's: a webhook request then costs no system
 * call for its ids. Ids must be unique and unpredictable enough to not
 * collide, not secret.
 */
static _Thread_local uint64_t rng[4];
static _Thread_local bool rng_seeded;

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(void)
{
    uint64_t out = rotl(rng[1] * 5, 7) * 9;
    uint64_t t = rng[1] << 17;
    rng[2] ^= rng[0];
    rng[3] ^= rng[1];
    rng[1] ^= rng[2];
    rng[0] ^= rng[3];
    rng[2] ^= t;
    rng[3] = rotl(rng[3], 45);
    return out;
}

static void rng_seed(void)
{
    uint8_t *p = (uint8_t *)rng;
    size_t got = 0;
    while (got < sizeof(rng)) {
        ssize_t r = getrandom(p + got, sizeof(rng) - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        got += (size_t)r;
    }
    if (got < sizeof(rng)) {
        /* no getrandom (seccomp, old kernel): time, address and thread
         * mixed through splitmix64 */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)(uintptr_t)&ts ^
                     (uint64_t)kop_clock_now_ns();
        for (int i = 0; i < 4; i++) {
            uint64_t z = (x += UINT64_C(0x9e3779b97f4a7c15));
            z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
            rng[i] = z ^ (z >> 31);
        }
    }
    if (!(rng[0] | rng[1] | rng[2] | rng[3]))
        rng[0] = 1; /* the one state the generator cannot leave */
    rng_seeded = true;
}

void kop_trace_random_id(uint8_t *id, size_t n)
{
    if (!rng_seeded)
        rng_seed();
    do {
        for (size_t i = 0; i < n; i += 8) {
            uint64_t v = rng_next();
            size_t k = n - i < 8 ? n - i : 8;
            memcpy(id + i, &v, k);
        }
    } while (all_zero(id, n));
}

bool kop_trace_current(struct kop_trace_ctx *ret)
{
    if (!current.valid)
        return false;
    *ret = current;
    return true;
}

struct kop_trace_ctx kop_trace_set_current(const struct kop_trace_ctx *ctx)
{
    struct kop_trace_ctx prev = current;
    if (ctx && ctx->valid)
        current = *ctx;
    else
        memset(&current, 0, sizeof(current));
    current_children = 0;
    return prev;
}

unsigned kop_trace_current_children(void)
{
    return current.valid ? current_children : 0;
}

void kop_trace_set_sink(kop_trace_sink_fn *fn, void *userdata)
{
    if (!fn) {
        atomic_store(&sink_ptr, NULL);
        return;
    }
    sink_slot.fn = fn;
    sink_slot.userdata = userdata;
    atomic_store(&sink_ptr, &sink_slot);
}

bool kop_trace_enabled(void)
{
    return atomic_load(&sink_ptr) != NULL;
}

struct kop_span *kop_span_start(const char *name, enum kop_span_kind kind,
                                const struct kop_trace_ctx *parent)
{
    struct kop_span *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (parent && parent->valid) {
        if (current.valid && memcmp(parent->span_id, current.span_id, sizeof(current.span_id)) == 0)
            current_children++;
        memcpy(s->ctx.trace_id, parent->trace_id, sizeof(s->ctx.trace_id));
        memcpy(s->parent_span_id, parent->span_id, sizeof(s->parent_span_id));
        s->has_parent = true;
        s->ctx.flags = parent->flags;
    } else {
        kop_trace_random_id(s->ctx.trace_id, sizeof(s->ctx.trace_id));
        s->ctx.flags = KOP_TRACE_FLAG_SAMPLED;
    }
    kop_trace_random_id(s->ctx.span_id, sizeof(s->ctx.span_id));
    s->ctx.valid = true;
    snprintf(s->name, sizeof(s->name), "%s", name ? name : "");
    s->kind = kind;
    s->start_ns = kop_clock_wall_ns();
    s->recording = (s->ctx.flags & KOP_TRACE_FLAG_SAMPLED) && kop_trace_enabled();
    return s;
}

static struct kop_span_attribute *new_attr(struct kop_span *span, const char *key)
{
    if (!span || !span->recording || !key || span->n_attributes >= KOP_SPAN_MAX_ATTRIBUTES)
        return NULL;
    struct kop_span_attribute *a = &span->attributes[span->n_attributes];
    memset(a, 0, sizeof(*a));
    a->key = key;
    return a;
}

void kop_span_set_str(struct kop_span *span, const char *key, const char *value)
{
    struct kop_span_attribute *a = new_attr(span, key);
    if (!a || !value)
        return;
    a->str_value = strdup(value);
    if (a->str_value)
        span->n_attributes++;
}

void kop_span_set_int(struct kop_span *span, const char *key, int64_t value)
{
    struct kop_span_attribute *a = new_attr(span, key);
    if (!a)
        return;
    a->is_int = true;
    a->int_value = value;
    span->n_attributes++;
}

json_t *kop_span_attributes_json(const struct kop_span *span)
{
    json_t *arr = json_array();
    for (unsigned i = 0; arr && span && i < span->n_attributes; i++) {
        const struct kop_span_attribute *a = &span->attributes[i];
        json_t *kv;
        if (a->is_int) {
            /* OTLP/JSON: 64-bit integers are decimal strings (proto3 JSON
             * mapping) */
            char buf[24];
            snprintf(buf, sizeof(buf), "%lld", (long long)a->int_value);
            kv = json_pack("{s:s, s:{s:s}}", "key", a->key, "value", "intValue", buf);
        } else {
            kv = json_pack("{s:s, s:{s:s}}", "key", a->key, "value", "stringValue", a->str_value);
        }
        /* JSON wants UTF-8: a value that is not (a header) is left out */
        if (kv && json_array_append_new(arr, kv) < 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

void kop_span_set_status(struct kop_span *span, enum kop_span_status status, const char *message)
{
    if (!span)
        return;
    span->status = status;
    snprintf(span->status_message, sizeof(span->status_message), "%s", message ? message : "");
}

void kop_span_free(struct kop_span *span)
{
    if (!span)
        return;
    for (unsigned i = 0; i < span->n_attributes; i++)
        free(span->attributes[i].str_value);
    free(span);
}

void kop_span_end(struct kop_span *span)
{
    if (!span)
        return;
    span->end_ns = kop_clock_wall_ns();
    struct sink *sk = atomic_load(&sink_ptr);
    if (!span->recording || !sk) {
        kop_span_free(span);
        return;
    }
    sk->fn(sk->userdata, span);
}
