/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small jansson helpers shared by every layer.
 *
 * Thread-safety: any thread (they only touch the values passed in; a value
 * shared between threads must be frozen, see docs/style.md §5.2).
 */
#ifndef KOP_JSON_H
#define KOP_JSON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/*
 * Serialize "v" with jansson flags into a malloc'd, NUL-terminated buffer
 * (free with free(), also when an arena is bound). @ref borrow v.
 * Returns 0 or -ENOMEM / -EINVAL; *ret_buf and *ret_len (without the NUL,
 * ret_len may be NULL) written on success.
 */
int kop_json_dump(const json_t *v, size_t flags, char **ret_buf, size_t *ret_len);

/* Dotted path lookup: kop_json_path(obj, "metadata.name"). Array indexes
 * are not supported. @ref borrow of obj's member, NULL when absent. */
json_t *kop_json_path(const json_t *obj, const char *dotted);

/* String at a dotted path, NULL when absent or not a string. */
const char *kop_json_path_str(const json_t *obj, const char *dotted);

/* Get or create an object member (replacing a non-object). @ref borrow,
 * NULL on ENOMEM. */
json_t *kop_json_object_ensure(json_t *obj, const char *key);

/* Deep equality that treats integers and reals of the same value as
 * equal (JSON has one number type). */
bool kop_json_equal(const json_t *a, const json_t *b);

/*
 * The length of the longest prefix of s[0..n) that does not end inside a
 * UTF-8 sequence: where text cut at a byte count must stay valid UTF-8
 * (jansson refuses strings that are not, and a reply must not turn into a
 * 500 because a message was cut). Bytes before the cut are not checked.
 */
size_t kop_utf8_cut(const char *s, size_t n);

/* Cut the NUL-terminated s in place to at most max bytes, at a character
 * boundary. */
void kop_utf8_truncate(char *s, size_t max);

/*
 * The length of the valid UTF-8 sequence that starts at s (n > 0 bytes
 * there; the first byte >= 0x80), or 0 when it is not one: overlong forms,
 * surrogates and code points past U+10FFFF are invalid, as RFC 3629 and
 * jansson have them.
 */
size_t kop_utf8_seq_len(const char *s, size_t n);

/*
 * Copy n bytes of untrusted text (an HTTP body shown as an error message)
 * into buf (size > 0 bytes, always '\0'-terminated), so that it can go into
 * JSON and a log line: each byte that is not part of a valid UTF-8
 * sequence becomes U+FFFD (as Go's strings.ToValidUTF8), each control
 * character other than tab a space; cut at a character boundary.
 * Returns the length written.
 */
size_t kop_utf8_sanitize(char *buf, size_t size, const char *s, size_t n);

/* True when the NUL-terminated s holds no control byte (below 0x20, or
 * DEL): text that goes into an HTTP header as it is (a token), where a CR
 * or LF would end the header and start another. */
bool kop_text_printable(const char *s);

/*
 * snprintf into buf, then cut at a character boundary. The messages kop
 * formats into fixed buffers (errors for logs, Status and condition
 * messages, review results) end up in JSON, which must stay valid UTF-8
 * where the buffer cut the text. Nothing is written when buf is NULL or
 * size is 0.
 */
void kop_msgf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kop_vmsgf(char *buf, size_t size, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif /* KOP_JSON_H */
