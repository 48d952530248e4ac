/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small jansson helpers shared by every layer.
 *
 * Thread-safety: any thread (they only touch the values passed in; a value
 * shared between threads must be frozen, see docs/style.md §5.2).
 */
#ifndef KOP_JSON_H
#define KOP_JSON_H

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

#endif /* KOP_JSON_H */
