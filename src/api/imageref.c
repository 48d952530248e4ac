/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Image references: the lossless split used by conversion and the strict
 * grammar checks used by admission (see kop/imageref.h). The grammar is
 * the distribution reference grammar, written out by hand:
 *
 *   reference  := name [ ":" tag ] [ "@" digest ]
 *   name       := [ domain "/" ] path-component ( "/" path-component )*
 *   domain     := host [ ":" port ]      host: DNS labels or "[" IPv6 "]"
 *   path-comp  := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
 *   tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}
 *   digest     := algorithm ":" hex{32,}   (admission: sha256 and 64 hex)
 */
#include "kop/imageref.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_word(char c)
{
    return is_alnum(c) || c == '_';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool tag_ok(const char *s, size_t n)
{
    if (n < 1 || n > 128 || !is_word(s[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (!is_word(s[i]) && s[i] != '.' && s[i] != '-')
            return false;
    }
    return true;
}

/* algorithm ":" hex{32,}, algorithm := [A-Za-z][A-Za-z0-9]* ([-_+.] same)* */
static bool digest_ok_loose(const char *s, size_t n)
{
    size_t i = 0;
    for (;;) {
        if (i >= n || !is_alpha(s[i]))
            return false;
        i++;
        while (i < n && is_alnum(s[i]))
            i++;
        if (i < n && (s[i] == '-' || s[i] == '_' || s[i] == '+' || s[i] == '.')) {
            i++;
            continue;
        }
        break;
    }
    if (i >= n || s[i] != ':')
        return false;
    i++;
    size_t hex = 0;
    for (; i < n; i++, hex++) {
        if (!is_hex(s[i]))
            return false;
    }
    return hex >= 32;
}

static const char *memrchr_span(const char *s, size_t n, char c)
{
    for (size_t i = n; i > 0; i--) {
        if (s[i - 1] == c)
            return s + i - 1;
    }
    return NULL;
}

void kop_imageref_split(const char *s, size_t len, struct kop_imageref *ret)
{
    struct kop_imageref r = {.name = s ? s : "", .name_len = s ? len : 0};
    if (!s) {
        *ret = r;
        return;
    }
    size_t rest = len;
    const char *at = memchr(s, '@', len);
    if (at) {
        const char *d = at + 1;
        size_t dl = len - (size_t)(d - s);
        if (!digest_ok_loose(d, dl))
            goto whole;
        r.digest = d;
        r.digest_len = dl;
        rest = (size_t)(at - s);
    }
    const char *slash = memrchr_span(s, rest, '/');
    size_t from = slash ? (size_t)(slash - s) + 1 : 0;
    const char *colon = memrchr_span(s + from, rest - from, ':');
    if (colon) {
        const char *t = colon + 1;
        size_t tl = rest - (size_t)(t - s);
        if (!tag_ok(t, tl))
            goto whole;
        r.tag = t;
        r.tag_len = tl;
        rest = (size_t)(colon - s);
    }
    if (rest == 0)
        goto whole;
    r.name_len = rest;
    *ret = r;
    return;
whole:
    ret->name = s;
    ret->name_len = len;
    ret->tag = NULL;
    ret->tag_len = 0;
    ret->digest = NULL;
    ret->digest_len = 0;
}

size_t kop_imageref_join(const char *name, size_t name_len, const char *tag, size_t tag_len,
                         const char *digest, size_t digest_len, char *buf, size_t size)
{
    size_t total = name_len + (tag ? 1 + tag_len : 0) + (digest ? 1 + digest_len : 0);
    size_t pos = 0;
    const char *parts[5] = {name, tag ? ":" : NULL, tag, digest ? "@" : NULL, digest};
    size_t lens[5] = {name_len, 1, tag_len, 1, digest_len};
    if (size == 0)
        return total;
    for (size_t i = 0; i < 5; i++) {
        if (!parts[i])
            continue;
        size_t n = lens[i];
        if (pos + n > size - 1)
            n = size - 1 - pos;
        memcpy(buf + pos, parts[i], n);
        pos += n;
    }
    buf[pos] = '\0';
    return total;
}

static bool span_eq(const char *a, size_t al, const char *b, size_t bl)
{
    if (!a || !b)
        return !a && !b;
    return al == bl && memcmp(a, b, al) == 0;
}

bool kop_imageref_parts_roundtrip(const char *name, size_t name_len, const char *tag,
                                  size_t tag_len, const char *digest, size_t digest_len)
{
    char stack[512];
    char *buf = stack;
    bool ok;
    if (!name)
        return false;
    size_t need = kop_imageref_join(name, name_len, tag, tag_len, digest, digest_len, NULL, 0);
    if (need >= sizeof(stack)) {
        buf = malloc(need + 1);
        if (!buf)
            return false;
    }
    kop_imageref_join(name, name_len, tag, tag_len, digest, digest_len, buf, need + 1);
    struct kop_imageref r;
    kop_imageref_split(buf, need, &r);
    ok = r.name_len == name_len &&
         span_eq(r.tag, r.tag_len, tag ? buf + name_len + 1 : NULL, tag_len) &&
         span_eq(r.digest, r.digest_len, digest ? buf + need - digest_len : NULL, digest_len);
    if (buf != stack)
        free(buf);
    return ok;
}

static int fail(const char **ret_reason, const char *reason)
{
    if (ret_reason)
        *ret_reason = reason;
    return -EINVAL;
}

/* host [":" port], host = DNS labels ([a-zA-Z0-9] with inner '-') or [IPv6]. */
static bool domain_ok(const char *s, size_t n)
{
    size_t i = 0;
    if (n == 0)
        return false;
    if (s[0] == '[') {
        i = 1;
        while (i < n && (is_hex(s[i]) || s[i] == ':'))
            i++;
        if (i == 1 || i >= n || s[i] != ']')
            return false;
        i++;
    } else {
        for (;;) {
            size_t start = i;
            while (i < n && (is_alnum(s[i]) || s[i] == '-'))
                i++;
            if (i == start || s[start] == '-' || s[i - 1] == '-')
                return false;
            if (i < n && s[i] == '.') {
                i++;
                continue;
            }
            break;
        }
    }
    if (i == n)
        return true;
    if (s[i] != ':' || i + 1 == n)
        return false;
    for (i++; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
    }
    return true;
}

/* Length of the registry component of a name (0 when implicit). */
static size_t domain_len(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);
    if (!slash)
        return 0;
    size_t dl = (size_t)(slash - s);
    if (memchr(s, '.', dl) || memchr(s, ':', dl) || (dl == 9 && memcmp(s, "localhost", 9) == 0))
        return dl;
    return 0;
}

static int path_check(const char *s, size_t n, const char **ret_reason)
{
    bool upper = false;
    size_t i = 0;
    if (n == 0)
        return fail(ret_reason, "repository name must have at least one component");
    for (size_t k = 0; k < n; k++) {
        if (s[k] >= 'A' && s[k] <= 'Z')
            upper = true;
    }
    if (upper)
        return fail(ret_reason, "repository name must be lowercase");
    for (;;) {
        /* one component */
        size_t start = i;
        for (;;) {
            size_t run = i;
            while (i < n && is_lower_alnum(s[i]))
                i++;
            if (i == run)
                return fail(ret_reason, "invalid reference format");
            if (i < n && s[i] == '.') {
                i++;
            } else if (i < n && s[i] == '_') {
                i++;
                if (i < n && s[i] == '_')
                    i++;
            } else if (i < n && s[i] == '-') {
                while (i < n && s[i] == '-')
                    i++;
            } else {
                break;
            }
        }
        (void)start;
        if (i == n)
            return 0;
        if (s[i] != '/')
            return fail(ret_reason, "invalid reference format");
        i++;
    }
}

int kop_imageref_check_name(const char *s, size_t len, const char **ret_reason)
{
    if (!s || len == 0)
        return fail(ret_reason, "repository name must have at least one component");
    if (len > KOP_IMAGEREF_NAME_MAX)
        return fail(ret_reason, "repository name must not be more than 255 characters");
    size_t dl = domain_len(s, len);
    if (dl > 0) {
        if (!domain_ok(s, dl))
            return fail(ret_reason, "invalid reference format: invalid registry host");
        return path_check(s + dl + 1, len - dl - 1, ret_reason);
    }
    return path_check(s, len, ret_reason);
}

int kop_imageref_check_tag(const char *s, size_t len, const char **ret_reason)
{
    if (!s || !tag_ok(s, len))
        return fail(ret_reason, "must be a valid tag: up to 128 letters, digits, '_', '.' or '-', "
                                "not starting with '.' or '-'");
    return 0;
}

int kop_imageref_check_digest(const char *s, size_t len, const char **ret_reason)
{
    static const char reason[] = "must be a digest of the form sha256:<64 lowercase hex digits>";
    if (!s || len != 7 + 64 || memcmp(s, "sha256:", 7) != 0)
        return fail(ret_reason, reason);
    for (size_t i = 7; i < len; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return fail(ret_reason, reason);
    }
    return 0;
}

int kop_imageref_parse(const char *s, size_t len, struct kop_imageref *ret, const char **ret_reason)
{
    struct kop_imageref r = {.name = s, .name_len = len};
    int rc;
    if (!s || len == 0)
        return fail(ret_reason, "invalid reference format: empty reference");
    size_t rest = len;
    const char *at = memchr(s, '@', len);
    if (at) {
        r.digest = at + 1;
        r.digest_len = len - (size_t)(r.digest - s);
        rc = kop_imageref_check_digest(r.digest, r.digest_len, ret_reason);
        if (rc < 0)
            return rc;
        rest = (size_t)(at - s);
    }
    const char *slash = memrchr_span(s, rest, '/');
    size_t from = slash ? (size_t)(slash - s) + 1 : 0;
    const char *colon = memrchr_span(s + from, rest - from, ':');
    if (colon) {
        r.tag = colon + 1;
        r.tag_len = rest - (size_t)(r.tag - s);
        rc = kop_imageref_check_tag(r.tag, r.tag_len, ret_reason);
        if (rc < 0)
            return fail(ret_reason, "invalid reference format: invalid tag");
        rest = (size_t)(colon - s);
    }
    r.name_len = rest;
    rc = kop_imageref_check_name(s, rest, ret_reason);
    if (rc < 0)
        return rc;
    if (ret)
        *ret = r;
    return 0;
}

static size_t normalise_registry(const char *s, size_t n, const char **ret)
{
    while (n > 0 && s[n - 1] == '/')
        n--;
    if (n == 15 && strncasecmp(s, "index.docker.io", 15) == 0) {
        *ret = "docker.io";
        return 9;
    }
    *ret = s;
    return n;
}

int kop_imageref_registry(const char *name, size_t name_len, char *buf, size_t size)
{
    const char *reg = "docker.io";
    size_t n = name ? domain_len(name, name_len) : 0;
    if (n > 0)
        n = normalise_registry(name, n, &reg);
    else
        n = 9;
    if (!buf || size < n + 1)
        return -ENOSPC;
    for (size_t i = 0; i < n; i++) {
        char c = reg[i];
        buf[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
    }
    buf[n] = '\0';
    return 0;
}

bool kop_imageref_registry_allowed(const char *name, size_t name_len, char *const *allowed,
                                   size_t n)
{
    if (n == 0 || !allowed)
        return true;
    const char *reg = "docker.io";
    size_t rl = name ? domain_len(name, name_len) : 0;
    if (rl > 0)
        rl = normalise_registry(name, rl, &reg);
    else
        rl = 9;
    for (size_t i = 0; i < n; i++) {
        if (!allowed[i])
            continue;
        const char *a;
        size_t al = normalise_registry(allowed[i], strlen(allowed[i]), &a);
        if (al == rl && strncasecmp(a, reg, rl) == 0)
            return true;
    }
    return false;
}
