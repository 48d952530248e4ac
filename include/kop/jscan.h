/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A strict JSON scanner over a complete buffer: validates one value without
 * building a tree, and reports where the members of the root object (and of
 * its object-valued members) start and end, so a caller can decode only the
 * parts it needs and copy the rest byte for byte.
 *
 * What it accepts is what jansson's json_loadb(JSON_REJECT_DUPLICATES |
 * JSON_DECODE_ANY) accepts, checked differentially by tests and a fuzzer:
 * RFC 8259 grammar, whitespace " \t\n\r", strings of valid UTF-8 without
 * control characters, escapes with paired surrogates and no \u0000,
 * integers that fit int64, reals that do not overflow a double, no
 * duplicate key in any object (keys compared after unescaping), and a value
 * depth of at most KOP_JSCAN_MAX_DEPTH counted from the document's root
 * (base_depth says how deep the scanned value sits).
 *
 * The scanner is linear in the input: duplicate keys of an object are found
 * by sorting its keys when it has more than a few. Its memory is its key
 * stack (bounded by the keys of the open objects) and a fixed depth table.
 *
 * Thread-safety: a scanner is owned by one thread at a time.
 */
#ifndef KOP_JSCAN_H
#define KOP_JSCAN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* jansson's JSON_PARSER_MAX_DEPTH */
#define KOP_JSCAN_MAX_DEPTH 2048

enum kop_jscan_flags {
    KOP_JSCAN_MEMBERS = 1u << 0, /* record the members (see kop_jscan_member) */
};

struct kop_jscan_member {
    unsigned level;  /* 1: member of the root object, 2: of an object-valued root member */
    unsigned parent; /* level 2: index (in the member array) of its level-1 member */
    const char *key; /* the unescaped key (valid until the next scan) */
    size_t key_len;
    size_t key_off;          /* offset of the key's opening quote */
    size_t val_off, val_len; /* the value's bytes */
};

struct kop_jscan;

/* A scanner with its scratch memory. NULL on ENOMEM. */
struct kop_jscan *kop_jscan_new(void);

/* NULL-safe. */
void kop_jscan_free(struct kop_jscan *s);

/*
 * Validate p[0..n): optional whitespace, one JSON value, optional
 * whitespace, nothing else. base_depth: the number of containers around
 * the value in its document (0 for a whole document). Returns 0,
 * -EINVAL (invalid; kop_jscan_error() says why and where) or -ENOMEM.
 */
int kop_jscan_value(struct kop_jscan *s, const char *p, size_t n, unsigned base_depth,
                    unsigned flags);

/* Walkers over bytes a scan already validated (no checks): past the string
 * token at v[i] == '"' (its closing quote is the first one after an even
 * run of backslashes), and past the value at v[i] (a string, container,
 * number or literal) of v[0..n). */
size_t kop_jscan_past_string(const char *v, size_t n, size_t i);
size_t kop_jscan_past_value(const char *v, size_t n, size_t i);
/* How many bytes from s on a JSON string writer copies as they are (no '"',
 * '\\' or control byte), 16 at a time where the CPU allows. */
size_t kop_jscan_noescape_run(const char *s, size_t n);

/*
 * Validate the container or string that starts at p[0] and ends somewhere
 * in p[0..n): what kop_jscan_value would say of those bytes alone, its
 * length in *ret_len. -EINVAL also when the value does not end within n
 * bytes (a caller streaming its input collects more and scans again) or
 * p[0] starts no container or string (a bare scalar has no end of its
 * own). Returns 0, -EINVAL or -ENOMEM.
 */
int kop_jscan_prefix(struct kop_jscan *s, const char *p, size_t n, unsigned base_depth,
                     unsigned flags, size_t *ret_len);

/* The members found by the last successful scan with KOP_JSCAN_MEMBERS, in
 * document order (a level-2 member follows its parent). */
const struct kop_jscan_member *kop_jscan_members(const struct kop_jscan *s, size_t *ret_n);

/* Values (scalars and containers) seen by the last scan. */
size_t kop_jscan_values(const struct kop_jscan *s);

/* The last error: a message (for instance "invalid UTF-8") and the offset
 * of the byte where it was found. */
const char *kop_jscan_error(const struct kop_jscan *s, size_t *ret_off);

/*
 * Unescape a JSON string token p[0..n) (with its quotes) that the scanner
 * accepted, into a malloc'd NUL-terminated string. Returns 0 or -ENOMEM,
 * -EINVAL when p is not a string token.
 */
int kop_jscan_string(const char *p, size_t n, char **ret, size_t *ret_len);

/*
 * Decode a value the scanner accepted (p[0..n), nothing else checked
 * again) into jansson values, without jansson's parser setup. Keys and
 * strings are taken as the scanner validated them. @ref new, NULL on ENOMEM
 * (or when p was not accepted by the scanner: undefined otherwise).
 */
json_t *kop_jscan_decode(const char *p, size_t n);

/*
 * kop_jscan_decode leaving out one member: drop is a NULL-terminated path
 * of keys from the root object (NULL or empty: nothing left out), the
 * last one naming the member whose value is passed over without being
 * decoded, wherever objects lie along the path ({"metadata",
 * "managedFields", NULL}: an object's managedFields). What the tree would
 * have cost for it is never spent. @ref new, NULL on ENOMEM.
 */
json_t *kop_jscan_decode_without(const char *p, size_t n, const char *const *drop);

/*
 * kop_jscan_decode with bounds on what the tree may cost: elements past
 * max_items of any array are kept as null (the array keeps its length; 0:
 * no bound), and the estimated jansson memory (values, members, array
 * slots, string bytes) stays within max_bytes (0: no bound). @ref new; NULL
 * with *ret_err -E2BIG (over max_bytes) or -ENOMEM.
 */
json_t *kop_jscan_decode_bounded(const char *p, size_t n, size_t max_items, size_t max_bytes,
                                 int *ret_err);

#endif /* KOP_JSCAN_H */
