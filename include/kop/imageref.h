/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Container image references ("registry:5000/team/app:1.2@sha256:...").
 *
 * Two views of the same grammar (the distribution reference grammar):
 *
 * - kop_imageref_split() is the lossless split used by conversion. It never
 *   fails: the digest is what follows the first '@', the tag what follows
 *   the last ':' that comes after the last '/'. When the parts are not a
 *   valid digest / tag (or the name would be empty) the whole string is the
 *   name. Joining the parts back (name [":" tag] ["@" digest]) always gives
 *   the input string exactly.
 *
 * - kop_imageref_parse() and the kop_imageref_check_*() functions are the
 *   strict validation used by admission; they explain what is wrong with a
 *   static reason string.
 *
 * Registries: a name's first '/'-separated component is a registry when it
 * contains '.' or ':' or is "localhost"; otherwise the registry is the
 * implicit "docker.io". "index.docker.io" is the same registry as
 * "docker.io". Registry names compare case-insensitively.
 *
 * Thread-safety: any thread (no state).
 */
#ifndef KOP_IMAGEREF_H
#define KOP_IMAGEREF_H

#include <stdbool.h>
#include <stddef.h>

/* Longest name (registry + path) the distribution grammar accepts. */
#define KOP_IMAGEREF_NAME_MAX 255

/* Pointers into the caller's string (not NUL-terminated). */
struct kop_imageref {
    const char *name; /* registry + repository path; never NULL */
    size_t name_len;
    const char *tag; /* NULL when absent */
    size_t tag_len;
    const char *digest; /* "algorithm:hex", NULL when absent */
    size_t digest_len;
};

/* Lossless split (see above). Never fails; *ret is always written. */
void kop_imageref_split(const char *s, size_t len, struct kop_imageref *ret);

/*
 * Join parts as name[":"tag]["@"digest] into buf (snprintf semantics: the
 * return value is the length of the full result, NUL-terminated when size
 * > 0). tag/digest may be NULL.
 */
size_t kop_imageref_join(const char *name, size_t name_len, const char *tag, size_t tag_len,
                         const char *digest, size_t digest_len, char *buf, size_t size);

/*
 * True when name/tag/digest, joined, split back into exactly the same
 * parts (so a v2 image can be written as one v1 string without loss).
 */
bool kop_imageref_parts_roundtrip(const char *name, size_t name_len, const char *tag,
                                  size_t tag_len, const char *digest, size_t digest_len);

/*
 * Strict parse of a whole reference. Returns 0 and fills *ret, or -EINVAL
 * with *ret_reason (static string) set when ret_reason is not NULL.
 */
int kop_imageref_parse(const char *s, size_t len, struct kop_imageref *ret,
                       const char **ret_reason);

/*
 * Strict checks of one part; 0 or -EINVAL with a static reason.
 * check_name: optional registry + lowercase path, at most 255 characters.
 * check_tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
 * check_digest: "sha256:" followed by 64 lowercase hex digits.
 */
int kop_imageref_check_name(const char *s, size_t len, const char **ret_reason);
int kop_imageref_check_tag(const char *s, size_t len, const char **ret_reason);
int kop_imageref_check_digest(const char *s, size_t len, const char **ret_reason);

/*
 * The registry of a name ("docker.io" when implicit; "index.docker.io"
 * mapped to "docker.io"; lowercased) written to buf, NUL-terminated.
 * Returns 0 or -ENOSPC (buf too small; nothing useful written).
 */
int kop_imageref_registry(const char *name, size_t name_len, char *buf, size_t size);

/*
 * True when the registry of "name" is one of allowed[0..n) (each entry
 * normalised the same way; a trailing '/' is ignored). n == 0: true.
 */
bool kop_imageref_registry_allowed(const char *name, size_t name_len, char *const *allowed,
                                   size_t n);

#endif /* KOP_IMAGEREF_H */
