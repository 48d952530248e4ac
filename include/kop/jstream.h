/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streams one array out of a JSON document as its bytes arrive: the
 * elements of the array at a path of object members (request.objects of a
 * ConversionReview, items of a Kubernetes list) are handed over one at a
 * time, each complete and validated, and dropped afterwards. The document
 * is never held whole: the stream keeps one value (an element or another
 * member) and a fixed state.
 *
 * Every byte is checked as strictly as kop/jscan.h checks a whole document
 * (the same grammar, UTF-8, number ranges, depth limit, duplicate keys at
 * every level, the envelope's levels included), and the pieces the bytes
 * arrive in make no difference to what is reported.
 *
 * Along the path (levels 1..depth: the root object is level 1, the value
 * of path[0] level 2, ...) every member that the stream does not descend
 * into is handed to member_fn as its validated bytes: the other members,
 * and a path member whose value is not an object (or, for the last key,
 * not an array). Elements go to elem_fn, with the scanner that validated
 * them (members recorded when KOP_JSCAN_MEMBERS is in elem_scan_flags).
 *
 * Thread-safety: a stream is owned by one thread at a time.
 */
#ifndef KOP_JSTREAM_H
#define KOP_JSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "kop/jscan.h"

#define KOP_JSTREAM_MAX_PATH 4

/* A member of a level along the path (key unescaped, NUL-terminated) with
 * its value's bytes. Returns 0 or a negative errno, which stops the stream
 * and is returned by kop_jstream_feed/finish. */
typedef int (*kop_jstream_member_fn)(void *ud, unsigned level, const char *key, const char *p,
                                     size_t n);

/* The next element of the array (index from 0), validated by scan. Same
 * return contract. */
typedef int (*kop_jstream_elem_fn)(void *ud, size_t index, const char *p, size_t n,
                                   const struct kop_jscan *scan);

struct kop_jstream_options {
    const char *path[KOP_JSTREAM_MAX_PATH]; /* member keys to the array; NULL-terminated */
    kop_jstream_member_fn member_fn;        /* may be NULL */
    kop_jstream_elem_fn elem_fn;            /* may be NULL */
    void *ud;
    unsigned elem_scan_flags; /* KOP_JSCAN_* for elements */
    /* The largest value the stream holds (an element or another member);
     * a larger one ends the stream: kop_jstream_finish returns -E2BIG.
     * 0: no limit. */
    size_t max_value;
};

struct kop_jstream;

/* Returns 0, -EINVAL (empty or too long path) or -ENOMEM. */
int kop_jstream_new(const struct kop_jstream_options *opts, struct kop_jstream **ret);

/* NULL-safe. */
void kop_jstream_free(struct kop_jstream *s);

/*
 * Feed the next bytes. Returns 0 (also after a syntax error: the rest is
 * skipped, finish reports it), or a callback's or allocation's negative
 * errno (the stream is then unusable).
 */
int kop_jstream_feed(struct kop_jstream *s, const char *p, size_t n);

/*
 * The document has ended. Returns 0 when it was one complete, valid JSON
 * object; -EINVAL otherwise (kop_jstream_error() says why: a syntax error,
 * "unexpected end of JSON input", "expected a JSON object"); -E2BIG when a
 * value was larger than max_value (the rest was not checked); or a
 * callback's error.
 */
int kop_jstream_finish(struct kop_jstream *s);

/* Why the document is invalid ("" while it is not known to be). */
const char *kop_jstream_error(const struct kop_jstream *s);

/* Whether the stream entered the container at level (2..depth+1): the
 * value of path[level-2] was an object (an array for the last key). */
bool kop_jstream_entered(const struct kop_jstream *s, unsigned level);

/* Bytes fed so far; bytes the stream holds (its capture buffer). */
size_t kop_jstream_total(const struct kop_jstream *s);
size_t kop_jstream_memory(const struct kop_jstream *s);

#endif /* KOP_JSTREAM_H */
