/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structured logging. A line is assembled in memory (JSON through jansson's
 * encoder so escaping is right, or logfmt-like text), then written with one
 * write(2) under a mutex, so lines from different threads never interleave
 * even when they are longer than PIPE_BUF. Messages are cut at
 * MAX_MSG_BYTES ("msgTruncated" set) and a line never exceeds
 * MAX_LINE_BYTES (when it would, fields are dropped, "fieldsTruncated" set
 * and the message cut shorter), so one bad caller cannot flood the output.
 * Invalid UTF-8 in a message becomes U+FFFD instead of losing the line.
 */
#include "kop/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kop/clock.h"
#include "kop/dynbuf.h"
#include "kop/json.h"
#include "kop/trace.h"

#define MAX_MSG_BYTES (32 * 1024)
#define MAX_LINE_BYTES (64 * 1024)

static atomic_int log_min_level = KOP_LOG_INFO;
static atomic_int log_format = KOP_LOG_FORMAT_JSON;
static atomic_int log_fd = 2;
static pthread_mutex_t log_write_lock = PTHREAD_MUTEX_INITIALIZER;

void kop_log_setup(enum kop_log_level min_level, enum kop_log_format format, int fd)
{
    atomic_store_explicit(&log_min_level, (int)min_level, memory_order_relaxed);
    atomic_store_explicit(&log_format, (int)format, memory_order_relaxed);
    atomic_store_explicit(&log_fd, fd, memory_order_relaxed);
}

int kop_log_level_parse(const char *s, enum kop_log_level *ret_level)
{
    enum kop_log_level l;

    if (s == NULL)
        return -EINVAL;
    if (strcasecmp(s, "debug") == 0)
        l = KOP_LOG_DEBUG;
    else if (strcasecmp(s, "info") == 0)
        l = KOP_LOG_INFO;
    else if (strcasecmp(s, "warn") == 0 || strcasecmp(s, "warning") == 0)
        l = KOP_LOG_WARN;
    else if (strcasecmp(s, "error") == 0)
        l = KOP_LOG_ERROR;
    else
        return -EINVAL;
    if (ret_level != NULL)
        *ret_level = l;
    return 0;
}

int kop_log_format_parse(const char *s, enum kop_log_format *ret_format)
{
    enum kop_log_format f;

    if (s == NULL)
        return -EINVAL;
    if (strcasecmp(s, "json") == 0)
        f = KOP_LOG_FORMAT_JSON;
    else if (strcasecmp(s, "text") == 0)
        f = KOP_LOG_FORMAT_TEXT;
    else
        return -EINVAL;
    if (ret_format != NULL)
        *ret_format = f;
    return 0;
}

const char *kop_log_level_name(enum kop_log_level level)
{
    switch (level) {
    case KOP_LOG_DEBUG:
        return "debug";
    case KOP_LOG_INFO:
        return "info";
    case KOP_LOG_WARN:
        return "warn";
    case KOP_LOG_ERROR:
        return "error";
    }
    return "info";
}

static const char *level_upper(enum kop_log_level level)
{
    switch (level) {
    case KOP_LOG_DEBUG:
        return "DEBUG";
    case KOP_LOG_INFO:
        return "INFO";
    case KOP_LOG_WARN:
        return "WARN";
    case KOP_LOG_ERROR:
        return "ERROR";
    }
    return "INFO";
}

bool kop_log_enabled(enum kop_log_level level)
{
    return (int)level >= atomic_load_explicit(&log_min_level, memory_order_relaxed);
}

/* ---- the line buffer ------------------------------------------------------ */

/* A kop_dynbuf without a cap (the line limit is checked once the line is
 * built) and a flag for a line that could not be built: once set, nothing
 * more is added and the line is dropped. */
struct buf {
    struct kop_dynbuf d;
    bool oom;
};

static void buf_init(struct buf *b)
{
    kop_dynbuf_init(&b->d, KOP_DYNBUF_NO_LIMIT);
    b->oom = false;
}

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (!b->oom && kop_dynbuf_add(&b->d, s, n) < 0)
        b->oom = true;
}

static void buf_adds(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

static int buf_dump_cb(const char *s, size_t n, void *user)
{
    struct buf *b = user;

    buf_add(b, s, n);
    return b->oom ? -1 : 0;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned cp;

    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        len = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        len = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/*
 * Copy msg into b as valid UTF-8 of at most "max" bytes, replacing invalid
 * bytes with U+FFFD and cutting on a character boundary. Returns true when
 * the message was cut.
 */
static bool add_clean_utf8(struct buf *b, const char *msg, size_t max)
{
    const unsigned char *s = (const unsigned char *)msg;
    size_t n = strlen(msg), i = 0, out = 0;

    while (i < n) {
        size_t l = utf8_seq(s + i, n - i);

        if (l == 0) {
            if (out + 3 > max)
                return true;
            buf_add(b, "\xef\xbf\xbd", 3);
            out += 3;
            i++;
            continue;
        }
        if (out + l > max)
            return true;
        buf_add(b, msg + i, l);
        out += l;
        i += l;
    }
    return false;
}

/* ---- line assembly ------------------------------------------------------- */

/* A JSON string for s, cleaned and cut; *cut set when shortened. */
static json_t *clean_string(const char *s, size_t max, bool *cut)
{
    struct buf b;
    json_t *j;

    buf_init(&b);
    *cut = add_clean_utf8(&b, s, max);
    if (b.oom) {
        kop_dynbuf_free(&b.d);
        return NULL;
    }
    j = json_stringn(kop_dynbuf_ptr(&b.d), kop_dynbuf_len(&b.d));
    kop_dynbuf_free(&b.d);
    return j;
}

static void json_line(struct buf *b, const char *ts, enum kop_log_level level, const char *logger,
                      const char *msg, size_t msg_max, json_t *fields, bool drop_fields)
{
    json_t *line = json_object();
    bool cut = false, cut_logger = false;

    if (line == NULL) {
        b->oom = true;
        return;
    }
    json_object_set_new(line, "ts", json_string(ts));
    json_object_set_new(line, "level", json_string(kop_log_level_name(level)));
    json_object_set_new(line, "logger", clean_string(logger, 256, &cut_logger));
    json_object_set_new(line, "msg", clean_string(msg, msg_max, &cut));
    if (cut)
        json_object_set_new(line, "msgTruncated", json_true());
    if (drop_fields) {
        json_object_set_new(line, "fieldsTruncated", json_true());
    } else if (json_is_object(fields)) {
        const char *key;
        json_t *v;

        /* jansson keeps insertion order, so fields keep the caller's order. */
        json_object_foreach(fields, key, v)
        {
            json_object_set(line, key, v);
        }
    } else if (fields != NULL) {
        json_object_set(line, "fields", fields);
    }
    if (json_dump_callback(line, buf_dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        b->oom = true;
    json_decref(line);
    buf_add(b, "\n", 1);
}

/* A text value: bare when it is a simple token, quoted JSON string else. */
static void text_value(struct buf *b, json_t *v)
{
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        bool bare = json_string_length(v) > 0;

        for (const char *p = s; *p && bare; p++) {
            unsigned char c = (unsigned char)*p;
            if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f)
                bare = false;
        }
        if (bare && strlen(s) == json_string_length(v)) {
            buf_adds(b, s);
            return;
        }
    }
    if (json_dump_callback(v, buf_dump_cb, b, JSON_COMPACT | JSON_ENCODE_ANY) != 0)
        b->oom = true;
}

/* Message text with control characters escaped so a line stays one line. */
static void text_escaped(struct buf *b, const char *s, size_t max, bool *cut)
{
    struct buf clean;

    buf_init(&clean);
    *cut = add_clean_utf8(&clean, s, max);
    for (size_t i = 0; i < kop_dynbuf_len(&clean.d); i++) {
        unsigned char c = (unsigned char)kop_dynbuf_ptr(&clean.d)[i];
        char esc[8];

        if (c == '\n') {
            buf_add(b, "\\n", 2);
        } else if (c == '\r') {
            buf_add(b, "\\r", 2);
        } else if (c == '\t') {
            buf_add(b, "\\t", 2);
        } else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof(esc), "\\x%02x", c);
            buf_adds(b, esc);
        } else {
            buf_add(b, kop_dynbuf_ptr(&clean.d) + i, 1);
        }
    }
    if (clean.oom)
        b->oom = true;
    kop_dynbuf_free(&clean.d);
}

static void text_line(struct buf *b, const char *ts, enum kop_log_level level, const char *logger,
                      const char *msg, size_t msg_max, json_t *fields, bool drop_fields)
{
    bool cut = false;

    buf_adds(b, ts);
    buf_add(b, " ", 1);
    buf_adds(b, level_upper(level));
    if (logger[0] != '\0') {
        buf_add(b, " ", 1);
        text_escaped(b, logger, 256, &cut);
    }
    buf_add(b, " ", 1);
    text_escaped(b, msg, msg_max, &cut);
    if (cut)
        buf_adds(b, " msgTruncated=true");
    if (drop_fields) {
        buf_adds(b, " fieldsTruncated=true");
    } else if (json_is_object(fields)) {
        const char *key;
        json_t *v;

        json_object_foreach(fields, key, v)
        {
            bool kcut;

            buf_add(b, " ", 1);
            text_escaped(b, key, 256, &kcut);
            buf_add(b, "=", 1);
            text_value(b, v);
        }
    } else if (fields != NULL) {
        buf_adds(b, " fields=");
        text_value(b, fields);
    }
    buf_add(b, "\n", 1);
}

static void write_all(int fd, const char *s, size_t n)
{
    pthread_mutex_lock(&log_write_lock);
    while (n > 0) {
        ssize_t w = write(fd, s, n);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        s += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&log_write_lock);
}

/*
 * The caller's fields plus "traceID" and "spanID" of the thread's current
 * span (kop/trace.h), after them, unless the caller set them: @ref new, or
 * NULL when there is no current span (or fields are not an object).
 */
static json_t *trace_fields(json_t *fields)
{
    struct kop_trace_ctx tc;
    if (!kop_trace_current(&tc) || (fields && !json_is_object(fields)))
        return NULL;
    json_t *f = fields ? json_copy(fields) : json_object();
    if (!f)
        return NULL;
    char hex[33];
    if (!json_object_get(f, "traceID")) {
        kop_trace_hex(tc.trace_id, sizeof(tc.trace_id), hex);
        json_object_set_new(f, "traceID", json_string(hex));
    }
    if (!json_object_get(f, "spanID")) {
        kop_trace_hex(tc.span_id, sizeof(tc.span_id), hex);
        json_object_set_new(f, "spanID", json_string(hex));
    }
    return f;
}

static void emit(enum kop_log_level level, const char *logger, const char *msg, json_t *fields)
{
    char ts[40];
    struct buf b;
    int fmt = atomic_load_explicit(&log_format, memory_order_relaxed);
    int saved_errno = errno;

    if (logger == NULL)
        logger = "";
    if (msg == NULL)
        msg = "";
    json_t *traced = trace_fields(fields);
    if (traced)
        fields = traced;
    kop_clock_rfc3339_micro(kop_clock_wall_ns(), ts, sizeof(ts));
    buf_init(&b);
    /* Second attempt, when the line came out too long: no fields and a
     * message short enough that even 6-byte escapes fit the line limit. */
    for (int attempt = 0; attempt < 2; attempt++) {
        bool drop = attempt > 0;
        size_t msg_max = drop ? MAX_MSG_BYTES / 4 : MAX_MSG_BYTES;

        kop_dynbuf_reset(&b.d);
        b.oom = false;
        if (fmt == KOP_LOG_FORMAT_TEXT)
            text_line(&b, ts, level, logger, msg, msg_max, fields, drop);
        else
            json_line(&b, ts, level, logger, msg, msg_max, fields, drop);
        if (!b.oom && kop_dynbuf_len(&b.d) <= MAX_LINE_BYTES)
            break;
    }
    if (!b.oom && kop_dynbuf_len(&b.d) > 0 && kop_dynbuf_len(&b.d) <= MAX_LINE_BYTES)
        write_all(atomic_load_explicit(&log_fd, memory_order_relaxed), kop_dynbuf_ptr(&b.d),
                  kop_dynbuf_len(&b.d));
    kop_dynbuf_free(&b.d);
    json_decref(traced);
    errno = saved_errno;
}

void kop_log(enum kop_log_level level, const char *logger, const char *msg, json_t *fields)
{
    if (kop_log_enabled(level))
        emit(level, logger, msg, fields);
    json_decref(fields);
}

void kop_log_errno(enum kop_log_level level, const char *logger, const char *msg, int err,
                   json_t *fields)
{
    char buf[128];
    int e = err < 0 ? -err : err;

    if (!kop_log_enabled(level)) {
        json_decref(fields);
        return;
    }
    if (fields == NULL)
        fields = json_object();
    if (fields != NULL) {
        json_object_set_new(fields, "error", json_string(strerror_r(e, buf, sizeof(buf))));
        json_object_set_new(fields, "errno", json_integer(e));
    }
    kop_log(level, logger, msg, fields);
}

void kop_logf(enum kop_log_level level, const char *logger, const char *fmt, ...)
{
    char stack[1024];
    char *msg = stack;
    va_list ap;
    int n;

    if (!kop_log_enabled(level))
        return;
    if (fmt == NULL) {
        emit(level, logger, "", NULL);
        return;
    }
    va_start(ap, fmt);
    n = vsnprintf(stack, sizeof(stack), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(stack)) {
        /* Longer messages are cut in emit() anyway: format at most that much. */
        size_t len = (size_t)n < MAX_MSG_BYTES + 4 ? (size_t)n + 1 : MAX_MSG_BYTES + 4;

        msg = malloc(len);
        if (msg == NULL) {
            msg = stack;
        } else {
            va_start(ap, fmt);
            n = vsnprintf(msg, len, fmt, ap);
            va_end(ap);
            if (n < 0) {
                free(msg);
                return;
            }
        }
    }
    emit(level, logger, msg, NULL);
    if (msg != stack)
        free(msg);
}
