/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Structured logging: one JSON object per line (default) or a human text
 * line, written with a single write(2) so lines from threads never mix.
 *
 * Every line carries "ts" (RFC 3339 UTC with microseconds), "level",
 * "logger" and "msg", then the caller's fields in the order given, then,
 * when the calling thread has a current span (kop/trace.h), "traceID" and
 * "spanID" (lower-case hex) unless the caller set them.
 *
 * Thread-safety: kop_log_setup() is init-only (before threads start);
 * everything else may be called from any thread.
 */
#ifndef KOP_LOG_H
#define KOP_LOG_H

#include <stdbool.h>

#include <jansson.h>

enum kop_log_level {
    KOP_LOG_DEBUG = 0,
    KOP_LOG_INFO = 1,
    KOP_LOG_WARN = 2,
    KOP_LOG_ERROR = 3,
};

enum kop_log_format {
    KOP_LOG_FORMAT_JSON = 0,
    KOP_LOG_FORMAT_TEXT = 1,
};

/* Where lines go (an fd, default 2) and the minimum level (default INFO). */
void kop_log_setup(enum kop_log_level min_level, enum kop_log_format format, int fd);

/* "debug", "info", "warn"/"warning", "error" (case-insensitive).
 * Returns 0, or -EINVAL for anything else; *ret_level written on success. */
int kop_log_level_parse(const char *s, enum kop_log_level *ret_level);

/* "json" or "text". Returns 0 or -EINVAL. */
int kop_log_format_parse(const char *s, enum kop_log_format *ret_format);

const char *kop_log_level_name(enum kop_log_level level);

bool kop_log_enabled(enum kop_log_level level);

/*
 * Write one line. fields: a JSON object whose members are appended after
 * "msg" (may be NULL). @ref steal fields (released even when the level is
 * filtered out or the write fails). Never fails visibly: a line that cannot
 * be written is dropped.
 */
void kop_log(enum kop_log_level level, const char *logger, const char *msg, json_t *fields);

/*
 * kop_log for a failure: fields (may be NULL) gets two more members,
 * "error" (the strerror_r text of err) and "errno" (the positive value);
 * err may be given as -errno or errno. @ref steal fields, as kop_log.
 */
void kop_log_errno(enum kop_log_level level, const char *logger, const char *msg, int err,
                   json_t *fields);

/* printf-style message, no extra fields. */
void kop_logf(enum kop_log_level level, const char *logger, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif /* KOP_LOG_H */
