// SPDX-License-Identifier: Apache-2.0
/*
 * The JSON array stream (see kop/jstream.h).
 *
 * DESIGN. A framer walks the envelope: the objects along the path and the
 * array at its end. It knows punctuation and keys; every value it does not
 * descend into (a key, another member, one element) is *captured*: its
 * bytes are collected until a cheap boundary finder (string and escape
 * state plus a nesting counter) sees its end, then the whole value is
 * validated by the strict scanner (kop/jscan.h, its depth counted from the
 * document's root) and handed on. A capture is the only buffering, one
 * value at a time. The boundary finder may be fooled by invalid input (a
 * ']' closing a '{'), but then the scanner rejects the capture, so nothing
 * invalid is ever accepted. Keys of the envelope's objects go into a hash
 * set per level (kop/hash.h) so a duplicate is refused like in any other
 * object.
 *
 * A container or string that ends within the piece being fed (most do) is
 * not captured: the scanner validates it where it lies (kop_jscan_prefix)
 * and it is handed on from the input. One that does not end there, or that
 * the scanner refuses, or that is larger than max_value, goes the capture
 * way from its first byte, so what is accepted and every error (message and
 * offset) stay the same.
 */
#include "kop/jstream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/hash.h"

#define KEEP_CAPTURE (256u * 1024u) /* a larger capture buffer is freed after use */

/* ---- keys seen at one envelope level ------------------------------------- */

struct keyset {
    char **slot;
    size_t n, cap;
};

/* 1 when added (k is taken), 0 when already there, -ENOMEM. */
static int keyset_add(struct keyset *s, char *k, size_t n)
{
    if (s->n * 2 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        char **slot = calloc(cap, sizeof(*slot));
        if (!slot)
            return -ENOMEM;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->slot[i])
                continue;
            size_t j = kop_hash_str(s->slot[i]) & (cap - 1);
            while (slot[j])
                j = (j + 1) & (cap - 1);
            slot[j] = s->slot[i];
        }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    size_t j = kop_hash(k, n) & (s->cap - 1);
    while (s->slot[j]) {
        if (strcmp(s->slot[j], k) == 0)
            return 0;
        j = (j + 1) & (s->cap - 1);
    }
    s->slot[j] = k;
    s->n++;
    return 1;
}

static void keyset_free(struct keyset *s)
{
    for (size_t i = 0; i < s->cap; i++)
        free(s->slot[i]);
    free(s->slot);
    memset(s, 0, sizeof(*s));
}

/* ---- the stream ------------------------------------------------------------ */

enum fstate {
    F_START,       /* before the root value */
    F_KEY_OR_END,  /* just after '{' */
    F_KEY,         /* after ',' in an object */
    F_COLON,       /* after a key */
    F_VALUE,       /* after ':' */
    F_AFTER,       /* after a value */
    F_ELEM_OR_END, /* just after the array's '[' */
    F_ELEM,        /* after ',' in the array */
    F_END,         /* after the root value */
    F_ERROR,       /* invalid: skip the rest */
};

enum role { ROLE_ROOT, ROLE_KEY, ROLE_VALUE, ROLE_ELEM };

struct capture {
    bool on;
    enum role role;
    char kind; /* '{' container, '"' string, 'b' bare scalar */
    size_t depth;
    bool in_str, esc;
    char *p;
    size_t len, cap;
};

struct kop_jstream {
    struct kop_jstream_options o;
    unsigned depth; /* path length: levels 1..depth are objects, depth+1 the array */
    enum fstate state;
    unsigned level; /* open envelope containers */
    char *key;      /* key of the value being read (level's member) */
    struct keyset keys[KOP_JSTREAM_MAX_PATH];
    bool entered[KOP_JSTREAM_MAX_PATH + 2];
    struct capture cap;
    struct kop_jscan *scan;
    size_t total;
    size_t n_elems;
    bool too_large; /* a value passed max_value */
    char err[200];
};

int kop_jstream_new(const struct kop_jstream_options *o, struct kop_jstream **ret)
{
    unsigned d = 0;
    while (d < KOP_JSTREAM_MAX_PATH && o->path[d])
        d++;
    if (d == 0)
        return -EINVAL;
    struct kop_jstream *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->o = *o;
    s->depth = d;
    s->scan = kop_jscan_new();
    if (!s->scan) {
        free(s);
        return -ENOMEM;
    }
    *ret = s;
    return 0;
}

void kop_jstream_free(struct kop_jstream *s)
{
    if (!s)
        return;
    for (unsigned i = 0; i < KOP_JSTREAM_MAX_PATH; i++)
        keyset_free(&s->keys[i]);
    free(s->cap.p);
    free(s->key);
    kop_jscan_free(s->scan);
    free(s);
}

const char *kop_jstream_error(const struct kop_jstream *s)
{
    return s->err;
}

bool kop_jstream_entered(const struct kop_jstream *s, unsigned level)
{
    return level < KOP_JSTREAM_MAX_PATH + 2 && s->entered[level];
}

size_t kop_jstream_total(const struct kop_jstream *s)
{
    return s->total;
}

size_t kop_jstream_memory(const struct kop_jstream *s)
{
    return s->cap.cap;
}

__attribute__((format(printf, 2, 3))) static void syntax_error(struct kop_jstream *s,
                                                               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    s->state = F_ERROR;
    s->cap.on = false;
}

static int cap_put(struct capture *c, const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    if (c->cap - c->len < n) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap - c->len < n)
            cap += cap < (1u << 20) ? cap : cap / 2;
        char *b = realloc(c->p, cap);
        if (!b)
            return -ENOMEM;
        c->p = b;
        c->cap = cap;
    }
    memcpy(c->p + c->len, p, n);
    c->len += n;
    return 0;
}

/* The key to descend into at the current level, NULL when the level is the
 * array. */
static const char *path_key(const struct kop_jstream *s)
{
    return s->level >= 1 && s->level <= s->depth ? s->o.path[s->level - 1] : NULL;
}

static unsigned scan_base(const struct kop_jstream *s, enum role role)
{
    return role == ROLE_ROOT ? 0 : s->level;
}

static unsigned scan_flags(const struct kop_jstream *s, enum role role)
{
    return role == ROLE_ELEM ? s->o.elem_scan_flags : 0;
}

/* A value p[0..n) in role, validated by s->scan: hand it on. */
static int deliver(struct kop_jstream *s, enum role role, const char *p, size_t n)
{
    int r = 0;
    switch (role) {
    case ROLE_ROOT:
        syntax_error(s, "expected a JSON object");
        break;
    case ROLE_KEY: {
        char *k = NULL;
        size_t kl = 0;
        r = kop_jscan_string(p, n, &k, &kl);
        if (r < 0)
            return r;
        r = keyset_add(&s->keys[s->level - 1], k, kl);
        if (r < 0) {
            free(k);
            return r;
        }
        if (r == 0) {
            syntax_error(s, "duplicate object key \"%.64s\"", k);
            free(k);
            return 0;
        }
        s->key = strdup(k);
        r = s->key ? 0 : -ENOMEM;
        s->state = F_COLON;
        break;
    }
    case ROLE_VALUE:
        if (s->o.member_fn)
            r = s->o.member_fn(s->o.ud, s->level, s->key, p, n);
        s->state = F_AFTER;
        break;
    case ROLE_ELEM:
        if (s->o.elem_fn)
            r = s->o.elem_fn(s->o.ud, s->n_elems, p, n, s->scan);
        s->n_elems++;
        s->state = F_AFTER;
        break;
    }
    return r < 0 ? r : 0;
}

/* A capture is complete: validate it and hand it on. */
static int captured(struct kop_jstream *s)
{
    struct capture *c = &s->cap;
    int r;
    c->on = false;
    if (c->len == 0) {
        /* a delimiter where a value should start: "[1,]", "{"a":}" */
        syntax_error(s, "value expected at byte %zu", s->total);
        return 0;
    }
    r = kop_jscan_value(s->scan, c->p, c->len, scan_base(s, c->role), scan_flags(s, c->role));
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        size_t off;
        const char *m = kop_jscan_error(s->scan, &off);
        syntax_error(s, "%s at byte %zu", m, s->total - c->len + off);
        r = 0;
    } else {
        r = deliver(s, c->role, c->p, c->len);
    }
    c->len = 0;
    if (c->cap > KEEP_CAPTURE) {
        free(c->p);
        c->p = NULL;
        c->cap = 0;
    }
    return r < 0 ? r : 0;
}

static bool delimiter(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == ':' || c == '}' ||
           c == ']' || c == '{' || c == '[' || c == '"';
}

static void start_capture(struct kop_jstream *s, enum role role, unsigned char first)
{
    struct capture *c = &s->cap;
    c->on = true;
    c->role = role;
    c->kind = first == '{' || first == '[' ? '{' : first == '"' ? '"' : 'b';
    c->depth = 0;
    c->in_str = false;
    c->esc = false;
    c->len = 0;
}

/* Bytes that matter outside strings in a container capture. */
static const unsigned char structural[256] = {
    ['"'] = 1, ['{'] = 1, ['['] = 1, ['}'] = 1, [']'] = 1,
};

/* How many bytes of p[0..n) belong to the captured value; *done when it is
 * complete. */
static size_t capture_scan(struct capture *c, const unsigned char *p, size_t n, bool *done)
{
    size_t j = 0;
    *done = false;
    if (c->kind == 'b') {
        while (j < n && !delimiter(p[j]))
            j++;
        *done = j < n;
        return j;
    }
    while (j < n) {
        if (c->esc) {
            c->esc = false;
            j++;
            continue;
        }
        if (c->in_str) {
            while (j < n && p[j] != '"' && p[j] != '\\')
                j++;
            if (j >= n)
                break;
            if (p[j] == '\\') {
                c->esc = true;
                j++;
                continue;
            }
            c->in_str = false;
            j++;
            if (c->kind == '"') {
                *done = true;
                return j;
            }
            continue;
        }
        while (j < n && !structural[p[j]])
            j++;
        if (j >= n)
            break;
        unsigned char ch = p[j++];
        if (ch == '"') {
            c->in_str = true;
        } else if (ch == '{' || ch == '[') {
            c->depth++;
        } else if (c->depth > 0) {
            if (--c->depth == 0) {
                *done = true;
                return j;
            }
        } else {
            /* a closing bracket with nothing open: the scanner rejects it */
            *done = true;
            return j;
        }
    }
    return j;
}

static void close_level(struct kop_jstream *s)
{
    if (s->level <= s->depth)
        keyset_free(&s->keys[s->level - 1]);
    s->level--;
    s->state = s->level ? F_AFTER : F_END;
}

int kop_jstream_feed(struct kop_jstream *s, const char *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    size_t i = 0;
    int r;
    s->total += n;
    if (s->state == F_ERROR)
        return 0;
    while (i < n) {
        if (s->cap.on && s->cap.len == 0 && s->cap.kind != 'b') {
            /* A container or string that ends within this piece (the usual
             * case) is validated and handed on where it lies: no boundary
             * walk, no copy. One that does not end here, is invalid or too
             * large takes the capture path below from its first byte, which
             * decides exactly as if this one had not been tried. */
            size_t win = n - i, len = 0;
            if (s->o.max_value && win > s->o.max_value)
                win = s->o.max_value;
            enum role role = s->cap.role;
            r = kop_jscan_prefix(s->scan, data + i, win, scan_base(s, role), scan_flags(s, role),
                                 &len);
            if (r == -ENOMEM)
                return r;
            if (r == 0) {
                s->cap.on = false;
                size_t saved = s->total;
                s->total -= n - (i + len);
                r = deliver(s, role, data + i, len);
                s->total = saved;
                if (r < 0)
                    return r;
                if (s->state == F_ERROR)
                    return 0;
                i += len;
                continue;
            }
        }
        if (s->cap.on) {
            bool done;
            size_t used = capture_scan(&s->cap, p + i, n - i, &done);
            if (s->o.max_value && used > s->o.max_value - s->cap.len) {
                s->too_large = true;
                syntax_error(s, "a value is larger than %zu bytes (at byte %zu)", s->o.max_value,
                             s->total - (n - i));
                free(s->cap.p);
                s->cap.p = NULL;
                s->cap.len = s->cap.cap = 0;
                return 0;
            }
            r = cap_put(&s->cap, p + i, used);
            if (r < 0)
                return r;
            i += used;
            if (!done)
                break;
            /* s->total counts the whole piece: step back to this byte */
            size_t saved = s->total;
            s->total -= n - i;
            r = captured(s);
            s->total = saved;
            if (r < 0)
                return r;
            if (s->state == F_ERROR)
                return 0;
            continue;
        }
        unsigned char c = p[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            i++;
            continue;
        }
        size_t at = s->total - (n - i);
        switch (s->state) {
        case F_START:
            if (c == '{') {
                s->level = 1;
                s->entered[1] = true;
                s->state = F_KEY_OR_END;
                i++;
            } else {
                start_capture(s, ROLE_ROOT, c);
            }
            break;
        case F_KEY_OR_END:
        case F_KEY:
            if (c == '"') {
                free(s->key);
                s->key = NULL;
                start_capture(s, ROLE_KEY, c);
            } else if (c == '}' && s->state == F_KEY_OR_END) {
                close_level(s);
                i++;
            } else {
                syntax_error(s, "string or '}' expected at byte %zu", at);
                return 0;
            }
            break;
        case F_COLON:
            if (c != ':') {
                syntax_error(s, "':' expected at byte %zu", at);
                return 0;
            }
            s->state = F_VALUE;
            i++;
            break;
        case F_VALUE: {
            const char *pk = path_key(s);
            bool last = s->level == s->depth;
            if (pk && strcmp(s->key, pk) == 0 && c == (last ? '[' : '{')) {
                s->level++;
                s->entered[s->level] = true;
                s->state = last ? F_ELEM_OR_END : F_KEY_OR_END;
                i++;
            } else {
                start_capture(s, ROLE_VALUE, c);
            }
            break;
        }
        case F_ELEM_OR_END:
        case F_ELEM:
            if (c == ']' && s->state == F_ELEM_OR_END) {
                s->level--;
                s->state = F_AFTER;
                i++;
            } else {
                start_capture(s, ROLE_ELEM, c);
            }
            break;
        case F_AFTER: {
            bool in_array = s->level == s->depth + 1;
            if (c == ',') {
                s->state = in_array ? F_ELEM : F_KEY;
                i++;
            } else if (in_array && c == ']') {
                s->level--;
                i++;
            } else if (!in_array && c == '}') {
                close_level(s);
                i++;
            } else {
                syntax_error(s, "',' or '%c' expected at byte %zu", in_array ? ']' : '}', at);
                return 0;
            }
            break;
        }
        case F_END:
            syntax_error(s, "end of file expected at byte %zu", at);
            return 0;
        case F_ERROR:
            return 0;
        }
    }
    return 0;
}

int kop_jstream_finish(struct kop_jstream *s)
{
    /* the end of the document completes a bare scalar at the root */
    if (s->cap.on && s->cap.kind == 'b' && s->cap.role == ROLE_ROOT) {
        int r = captured(s);
        if (r < 0)
            return r;
    }
    if (s->state != F_ERROR && s->state != F_END)
        syntax_error(s, "unexpected end of JSON input");
    if (s->too_large)
        return -E2BIG;
    return s->state == F_END ? 0 : -EINVAL;
}
