// SPDX-License-Identifier: Apache-2.0
/*
 * The strict JSON scanner (see kop/jscan.h).
 *
 * DESIGN. One iterative pass over a contiguous buffer: an explicit stack of
 * container types (one byte per level) replaces recursion, so a deeply
 * nested body costs a table entry per level, never C stack. Keys are pushed
 * on a key stack as (pointer, length) pairs, pointing into the input when
 * the key has no escape and into a scratch string buffer otherwise; when an
 * object closes, its keys (the top of the stack) are checked for
 * duplicates and popped. Member spans are recorded at levels 1 and 2 only,
 * which is what a caller that copies most of an object verbatim needs.
 *
 * Strings are the hot loop: a 256-entry class table lets plain ASCII run
 * through one comparison per byte; escapes and UTF-8 sequences leave it.
 */
#include "kop/jscan.h"
#include "kop/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define SMALL_OBJECT 16 /* keys compared pairwise up to this many (metadata has 9 or more) */

struct key {
    const char *p; /* into the input, or NULL: into strbuf at off */
    size_t off;
    size_t len;
};

struct kop_jscan {
    struct key *keys;
    size_t n_keys, cap_keys;
    char *strbuf; /* unescaped keys */
    size_t str_len, str_cap;
    struct kop_jscan_member *members;
    size_t *member_key; /* per member: strbuf offset of its key, SIZE_MAX: in the input */
    size_t n_members, cap_members;
    size_t values;
    char err[160];
    size_t err_off;
    unsigned char type[KOP_JSCAN_MAX_DEPTH + 2]; /* '{' or '[' per open level */
    size_t key_base[KOP_JSCAN_MAX_DEPTH + 2];    /* first key of each open object */
};

/* 0: a byte that may stand in a string as it is; 1: '"' or '\\'; 2: control;
 * 3: the lead byte of a UTF-8 sequence (or an invalid byte). */
static const unsigned char str_class[256] = {
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
};

struct kop_jscan *kop_jscan_new(void)
{
    /* Not calloc: the depth tables (18 KiB) are written before they are
     * read, and zeroing them would cost more than a small scan. */
    struct kop_jscan *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    memset(s, 0, offsetof(struct kop_jscan, type));
    return s;
}

void kop_jscan_free(struct kop_jscan *s)
{
    if (!s)
        return;
    free(s->keys);
    free(s->strbuf);
    free(s->members);
    free(s->member_key);
    free(s);
}

const struct kop_jscan_member *kop_jscan_members(const struct kop_jscan *s, size_t *ret_n)
{
    *ret_n = s->n_members;
    return s->members;
}

size_t kop_jscan_values(const struct kop_jscan *s)
{
    return s->values;
}

const char *kop_jscan_error(const struct kop_jscan *s, size_t *ret_off)
{
    if (ret_off)
        *ret_off = s->err_off;
    return s->err;
}

__attribute__((format(printf, 3, 4))) static int fail(struct kop_jscan *s, size_t off,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof(s->err), fmt, ap);
    va_end(ap);
    s->err_off = off;
    return -EINVAL;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static size_t skip_ws(const char *p, size_t n, size_t i)
{
    while (i < n && is_ws((unsigned char)p[i]))
        i++;
    return i;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p[i..i+4), or -1. */
static long hex4(const char *p, size_t n, size_t i)
{
    if (n - i < 4)
        return -1;
    long v = 0;
    for (size_t k = 0; k < 4; k++) {
        int h = hexval((unsigned char)p[i + k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

#if !defined(__SSE2__)
/*
 * True when none of the 8 bytes at p needs a look (str_class 0 for all:
 * no '"', '\\', control or byte >= 0x80). Each test flags a byte equal
 * to (or below) its value by the borrow it leaves in the byte's high bit;
 * a borrow may only flag more bytes after a true one, so a word judged
 * plain is plain, and one that is not goes to the byte loop.
 */
static bool plain8(const unsigned char *p)
{
    const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
    uint64_t x;
    memcpy(&x, p, sizeof(x));
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
    uint64_t t = ((q - ones) & ~q) | ((b - ones) & ~b) | ((x - ones * 0x20) & ~x) | x;
    return (t & highs) == 0;
}
#endif

#if defined(__SSE2__)
/*
 * The first of the 16 bytes at p that a JSON string cannot carry as it is
 * ('"', '\\', a control byte; with high, also any byte >= 0x80), or 16.
 */
static inline unsigned special16(const unsigned char *p, bool high)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i ctl = high ? _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)) /* signed: >= 0x80 too */
                       : _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
    __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
        ctl);
    unsigned m = (unsigned)_mm_movemask_epi8(hit);
    return m ? (unsigned)__builtin_ctz(m) : 16;
}
#endif

/*
 * How many bytes from p on stand in a string token as they are (str_class
 * 0): 16 at a time with SSE2 (x86-64's baseline), else 8 with plain8, then
 * byte by byte. Strings are most of a Kubernetes object's bytes.
 */
static inline size_t plain_run(const unsigned char *p, size_t n)
{
    size_t i = 0;
#if defined(__SSE2__)
    for (unsigned k; n - i >= 16; i += 16) {
        if ((k = special16(p + i, true)) < 16)
            return i + k;
    }
#else
    while (n - i >= 8 && plain8(p + i))
        i += 8;
#endif
    while (i < n && str_class[p[i]] == 0)
        i++;
    return i;
}

size_t kop_jscan_noescape_run(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
#if defined(__SSE2__)
    for (unsigned k; n - i >= 16; i += 16) {
        if ((k = special16(p + i, false)) < 16)
            return i + k;
    }
#endif
    while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\')
        i++;
    return i;
}

/*
 * Scan the string token starting at p[*pos] == '"'. On success *pos is past
 * the closing quote and *ret_esc says whether it had an escape.
 */
static int scan_string(struct kop_jscan *s, const char *p, size_t n, size_t *pos, bool *ret_esc)
{
    const unsigned char *u = (const unsigned char *)p;
    size_t i = *pos + 1;
    bool esc = false;
    for (;;) {
        i += plain_run(u + i, n - i);
        if (i >= n)
            return fail(s, n, "unexpected end of JSON input in a string");
        unsigned char c = u[i];
        if (c == '"') {
            *pos = i + 1;
            *ret_esc = esc;
            return 0;
        }
        if (c == '\\') {
            esc = true;
            if (i + 1 >= n)
                return fail(s, n, "unexpected end of JSON input in a string");
            unsigned char e = u[i + 1];
            if (e == 'u') {
                long cp = hex4(p, n, i + 2);
                if (cp < 0)
                    return fail(s, i, "invalid \\u escape");
                i += 6;
                if (cp == 0)
                    return fail(s, i - 6, "\\u0000 is not allowed");
                if (cp >= 0xDC00 && cp <= 0xDFFF)
                    return fail(s, i - 6, "invalid Unicode '\\u%04lX'", cp);
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    long lo =
                        (n - i >= 2 && p[i] == '\\' && p[i + 1] == 'u') ? hex4(p, n, i + 2) : -1;
                    if (lo < 0xDC00 || lo > 0xDFFF)
                        return fail(s, i - 6, "invalid Unicode '\\u%04lX'", cp);
                    i += 6;
                }
                continue;
            }
            if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' &&
                e != 't')
                return fail(s, i, "invalid escape");
            i += 2;
            continue;
        }
        if (c < 0x20)
            return fail(s, i, "control character 0x%x in a string", c);
        size_t l = kop_utf8_seq_len((const char *)u + i, n - i);
        if (!l)
            return fail(s, i, "invalid UTF-8 byte 0x%x", c);
        i += l;
    }
}

static void put_utf8(char *out, size_t *o, unsigned long cp)
{
    if (cp < 0x80) {
        out[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*o)++] = (char)(0xC0 | (cp >> 6));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*o)++] = (char)(0xE0 | (cp >> 12));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*o)++] = (char)(0xF0 | (cp >> 18));
        out[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* Unescape a validated string token body p[0..n) (without quotes) into out
 * (at least n bytes). Returns the length. */
static size_t unescape(const char *p, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (p[i] != '\\') {
            out[o++] = p[i++];
            continue;
        }
        char e = p[i + 1];
        i += 2;
        switch (e) {
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'u': {
            unsigned long cp = (unsigned long)hex4(p, n, i);
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned long lo = (unsigned long)hex4(p, n, i + 2);
                i += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(out, &o, cp);
            break;
        }
        default:
            out[o++] = e;
            break;
        }
    }
    return o;
}

int kop_jscan_string(const char *p, size_t n, char **ret, size_t *ret_len)
{
    if (n < 2 || p[0] != '"' || p[n - 1] != '"')
        return -EINVAL;
    char *out = malloc(n);
    if (!out)
        return -ENOMEM;
    size_t l = unescape(p + 1, n - 2, out);
    out[l] = '\0';
    *ret = out;
    if (ret_len)
        *ret_len = l;
    return 0;
}

/* Compare "digits" (no sign) with the decimal limit lim of the same length. */
static bool digits_over(const char *d, size_t n, const char *lim)
{
    size_t ln = strlen(lim);
    if (n != ln)
        return n > ln;
    return memcmp(d, lim, n) > 0;
}

static int scan_number(struct kop_jscan *s, const char *p, size_t n, size_t *pos)
{
    size_t i = *pos, start = i;
    bool neg = false, real = false, exp = false;
    if (p[i] == '-') {
        neg = true;
        i++;
    }
    size_t int_start = i;
    if (i < n && p[i] == '0') {
        i++;
    } else if (i < n && p[i] >= '1' && p[i] <= '9') {
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    } else {
        return fail(s, start, "invalid number");
    }
    size_t int_len = i - int_start;
    if (i < n && p[i] >= '0' && p[i] <= '9')
        return fail(s, start, "invalid number (leading zero)");
    if (i < n && p[i] == '.') {
        real = true;
        i++;
        if (i >= n || p[i] < '0' || p[i] > '9')
            return fail(s, start, "invalid number");
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        real = exp = true;
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-'))
            i++;
        if (i >= n || p[i] < '0' || p[i] > '9')
            return fail(s, start, "invalid number");
        while (i < n && p[i] >= '0' && p[i] <= '9')
            i++;
    }
    if (!real) {
        if (digits_over(p + int_start, int_len,
                        neg ? "9223372036854775808" : "9223372036854775807"))
            return fail(s, start, neg ? "too big negative integer" : "too big integer");
    } else if (exp || int_len > 300) {
        /* Only an exponent or a very long integer part can overflow. */
        size_t len = i - start;
        char small[64];
        char *buf = len < sizeof(small) ? small : malloc(len + 1);
        if (!buf)
            return -ENOMEM;
        memcpy(buf, p + start, len);
        buf[len] = '\0';
        double d = strtod(buf, NULL);
        if (buf != small)
            free(buf);
        if (isinf(d))
            return fail(s, start, "real number overflow");
    }
    *pos = i;
    return 0;
}

static int push_key(struct kop_jscan *s, const char *p, size_t start, size_t end, bool esc)
{
    if (s->n_keys == s->cap_keys) {
        size_t cap = s->cap_keys ? s->cap_keys * 2 : 64;
        struct key *k = realloc(s->keys, cap * sizeof(*k));
        if (!k)
            return -ENOMEM;
        s->keys = k;
        s->cap_keys = cap;
    }
    struct key *k = &s->keys[s->n_keys++];
    size_t raw = end - start - 2;
    if (!esc) {
        k->p = p + start + 1;
        k->len = raw;
        return 0;
    }
    if (s->str_cap - s->str_len < raw) {
        size_t cap = s->str_cap ? s->str_cap : 256;
        while (cap - s->str_len < raw)
            cap *= 2;
        char *b = realloc(s->strbuf, cap);
        if (!b)
            return -ENOMEM;
        s->strbuf = b;
        s->str_cap = cap;
    }
    k->p = NULL;
    k->off = s->str_len;
    k->len = unescape(p + start + 1, raw, s->strbuf + s->str_len);
    s->str_len += k->len;
    return 0;
}

static const char *key_ptr(const struct kop_jscan *s, const struct key *k)
{
    return k->p ? k->p : s->strbuf + k->off;
}

/* qsort has no context pointer in C11 */
static _Thread_local const struct kop_jscan *tl_sort;

static int key_cmp(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(key_ptr(tl_sort, x), key_ptr(tl_sort, y), x->len);
}

/* Check the keys [base, n_keys) of the object that just closed, then pop
 * them. keep_strings: recorded members still point at their unescaped keys. */
static int close_object(struct kop_jscan *s, size_t base, size_t off, bool keep_strings)
{
    size_t n = s->n_keys - base;
    if (n == 0)
        return 0;
    struct key *k = s->keys + base;
    size_t str_mark = s->str_len;
    int dup = -1;
    for (size_t i = 0; i < n; i++) {
        if (!k[i].p) {
            str_mark = k[i].off; /* keys are pushed in order: the first is the lowest */
            break;
        }
    }
    if (n > 1 && n <= SMALL_OBJECT) {
        for (size_t i = 1; i < n && dup < 0; i++) {
            for (size_t j = 0; j < i; j++) {
                if (k[i].len == k[j].len &&
                    memcmp(key_ptr(s, &k[i]), key_ptr(s, &k[j]), k[i].len) == 0) {
                    dup = (int)i;
                    break;
                }
            }
        }
    } else if (n > SMALL_OBJECT) {
        tl_sort = s;
        qsort(k, n, sizeof(*k), key_cmp);
        for (size_t i = 1; i < n; i++) {
            if (key_cmp(&k[i - 1], &k[i]) == 0) {
                dup = (int)i;
                break;
            }
        }
    }
    if (dup >= 0)
        return fail(s, off, "duplicate object key \"%.*s\"",
                    (int)(k[dup].len > 64 ? 64 : k[dup].len), key_ptr(s, &k[dup]));
    s->n_keys = base;
    if (!keep_strings)
        s->str_len = str_mark;
    return 0;
}

static int add_member(struct kop_jscan *s, unsigned level, unsigned parent, size_t key_off)
{
    if (s->n_members == s->cap_members) {
        size_t cap = s->cap_members ? s->cap_members * 2 : 32;
        struct kop_jscan_member *m = realloc(s->members, cap * sizeof(*m));
        if (!m)
            return -ENOMEM;
        s->members = m;
        size_t *mk = realloc(s->member_key, cap * sizeof(*mk));
        if (!mk)
            return -ENOMEM;
        s->member_key = mk;
        s->cap_members = cap;
    }
    const struct key *k = &s->keys[s->n_keys - 1];
    struct kop_jscan_member *m = &s->members[s->n_members];
    memset(m, 0, sizeof(*m));
    m->level = level;
    m->parent = parent;
    m->key_off = key_off;
    m->key = k->p;
    m->key_len = k->len;
    s->member_key[s->n_members] = k->p ? SIZE_MAX : k->off;
    s->n_members++;
    return 0;
}

/* The scan itself. prefix: stop after the value (at p[0], no whitespace
 * before it) and report its end in *ret_end instead of requiring the input
 * to end there. */
static int scan_value(struct kop_jscan *s, const char *p, size_t n, unsigned base_depth,
                      unsigned flags, bool prefix, size_t *ret_end)
{
    const bool members = flags & KOP_JSCAN_MEMBERS;
    size_t depth = 0; /* open containers of this value */
    size_t i = skip_ws(p, n, 0);
    size_t cur1 = 0, cur2 = 0; /* member indexes open at levels 1 and 2 */
    bool in2 = false;          /* level-2 recording on for the current level-1 member */
    int r;

    s->n_keys = 0;
    s->str_len = 0;
    s->n_members = 0;
    s->values = 0;
    s->err[0] = '\0';
    s->err_off = 0;

value:
    if (i >= n)
        return fail(s, n, "unexpected end of JSON input");
    if (base_depth + depth + 1 > KOP_JSCAN_MAX_DEPTH)
        return fail(s, i, "maximum parsing depth reached");
    s->values++;
    if (members && depth == 1 && s->type[1] == '{')
        s->members[cur1].val_off = i;
    else if (in2 && depth == 2)
        s->members[cur2].val_off = i;
    switch (p[i]) {
    case '{':
    case '[':
        depth++;
        s->type[depth] = (unsigned char)p[i];
        i = skip_ws(p, n, i + 1);
        if (s->type[depth] == '{') {
            s->key_base[depth] = s->n_keys;
            if (members && depth == 2)
                in2 = s->type[1] == '{';
            if (i < n && p[i] == '}') {
                i++;
                r = close_object(s, s->key_base[depth], i - 1, members && depth <= 2);
                if (r < 0)
                    return r;
                if (depth == 2)
                    in2 = false;
                depth--;
                goto after;
            }
            goto key;
        }
        if (i < n && p[i] == ']') {
            i++;
            depth--;
            goto after;
        }
        goto value;
    case '"': {
        bool esc;
        r = scan_string(s, p, n, &i, &esc);
        if (r < 0)
            return r;
        goto after;
    }
    case 't':
        if (n - i >= 4 && memcmp(p + i, "true", 4) == 0) {
            i += 4;
            goto after;
        }
        return fail(s, i, "invalid token");
    case 'f':
        if (n - i >= 5 && memcmp(p + i, "false", 5) == 0) {
            i += 5;
            goto after;
        }
        return fail(s, i, "invalid token");
    case 'n':
        if (n - i >= 4 && memcmp(p + i, "null", 4) == 0) {
            i += 4;
            goto after;
        }
        return fail(s, i, "invalid token");
    default:
        if (p[i] == '-' || (p[i] >= '0' && p[i] <= '9')) {
            r = scan_number(s, p, n, &i);
            if (r < 0)
                return r;
            goto after;
        }
        return fail(s, i, "invalid token");
    }

key:
    if (i >= n)
        return fail(s, n, "unexpected end of JSON input");
    if (p[i] != '"')
        return fail(s, i, "string or '}' expected");
    {
        size_t start = i;
        bool esc;
        r = scan_string(s, p, n, &i, &esc);
        if (r < 0)
            return r;
        r = push_key(s, p, start, i, esc);
        if (r < 0)
            return r;
        if (members && depth == 1) {
            r = add_member(s, 1, 0, start);
            if (r < 0)
                return r;
            cur1 = s->n_members - 1;
            in2 = false;
        } else if (in2 && depth == 2) {
            r = add_member(s, 2, (unsigned)cur1, start);
            if (r < 0)
                return r;
            cur2 = s->n_members - 1;
        }
    }
    i = skip_ws(p, n, i);
    if (i >= n)
        return fail(s, n, "unexpected end of JSON input");
    if (p[i] != ':')
        return fail(s, i, "':' expected");
    i = skip_ws(p, n, i + 1);
    goto value;

after:
    if (members && depth == 1 && s->type[1] == '{')
        s->members[cur1].val_len = i - s->members[cur1].val_off;
    else if (in2 && depth == 2)
        s->members[cur2].val_len = i - s->members[cur2].val_off;
    if (depth == 0 && prefix) {
        *ret_end = i;
        goto done;
    }
    if (depth == 0) {
        i = skip_ws(p, n, i);
        if (i != n)
            return fail(s, i, "end of file expected");
        goto done;
    }
    i = skip_ws(p, n, i);
    if (i >= n)
        return fail(s, n, "unexpected end of JSON input");
    if (p[i] == ',') {
        i = skip_ws(p, n, i + 1);
        if (s->type[depth] == '{')
            goto key;
        goto value;
    }
    if (s->type[depth] == '{' && p[i] == '}') {
        r = close_object(s, s->key_base[depth], i, members && depth <= 2);
        if (r < 0)
            return r;
        if (depth == 2)
            in2 = false;
        i++;
        depth--;
        goto after;
    }
    if (s->type[depth] == '[' && p[i] == ']') {
        i++;
        depth--;
        goto after;
    }
    return fail(s, i, s->type[depth] == '{' ? "',' or '}' expected" : "',' or ']' expected");

done:
    /* strbuf no longer moves: point the escaped keys into it. */
    for (size_t m = 0; m < s->n_members; m++) {
        if (s->member_key[m] != SIZE_MAX)
            s->members[m].key = s->strbuf + s->member_key[m];
    }
    return 0;
}

int kop_jscan_value(struct kop_jscan *s, const char *p, size_t n, unsigned base_depth,
                    unsigned flags)
{
    return scan_value(s, p, n, base_depth, flags, false, NULL);
}

int kop_jscan_prefix(struct kop_jscan *s, const char *p, size_t n, unsigned base_depth,
                     unsigned flags, size_t *ret_len)
{
    size_t end = 0;
    if (n == 0 || (p[0] != '{' && p[0] != '[' && p[0] != '"'))
        return fail(s, 0, "a container or a string expected");
    int r = scan_value(s, p, n, base_depth, flags, true, &end);
    if (r == 0)
        *ret_len = end;
    return r;
}

/* ---- decoding a validated value ------------------------------------------- */

/* What a decode may build (kop_jscan_decode_bounded); NULL: no bound. */
struct decode_bounds {
    size_t max_items; /* elements past this many of an array become null */
    size_t max_bytes; /* estimated jansson memory */
    size_t used;
    bool over;
};

/* jansson's cost of one value, estimated from its structures (a value, its
 * allocation header, an object's hashtable pair per member). */
#define COST_OBJECT 256
#define COST_MEMBER 160
#define COST_ARRAY 64
/* a pointer, and the tables left behind as the array doubles (in an arena) */
#define COST_SLOT 24
#define COST_SCALAR 48

static bool charge(struct decode_bounds *b, size_t cost)
{
    if (!b)
        return true;
    if (b->max_bytes && cost > b->max_bytes - b->used) {
        b->over = true;
        return false;
    }
    b->used += cost;
    return true;
}

static json_t *decode_at(const char *p, size_t n, size_t *pos, struct decode_bounds *b,
                         const char *const *drop);

static json_t *decode_string(const char *p, size_t n, size_t *pos, struct decode_bounds *b)
{
    size_t i = *pos + 1, start = i;
    bool esc = false;
    while (p[i] != '"') {
        if (p[i] == '\\') {
            esc = true;
            i++;
        }
        i++;
    }
    *pos = i + 1;
    if (!charge(b, COST_SCALAR + (i - start)))
        return NULL;
    if (!esc)
        return json_stringn_nocheck(p + start, i - start);
    char small[256];
    char *buf = i - start <= sizeof(small) ? small : malloc(i - start);
    if (!buf)
        return NULL;
    size_t l = unescape(p + start, i - start, buf);
    json_t *v = json_stringn_nocheck(buf, l);
    if (buf != small)
        free(buf);
    return v;
}

static json_t *decode_number(const char *p, size_t n, size_t *pos, struct decode_bounds *b)
{
    size_t i = *pos;
    bool real = false;
    while (i < n && (p[i] == '-' || p[i] == '+' || p[i] == '.' || p[i] == 'e' || p[i] == 'E' ||
                     (p[i] >= '0' && p[i] <= '9'))) {
        if (p[i] == '.' || p[i] == 'e' || p[i] == 'E')
            real = true;
        i++;
    }
    if (!charge(b, COST_SCALAR))
        return NULL;
    char small[64];
    size_t len = i - *pos;
    char *buf = len < sizeof(small) ? small : malloc(len + 1);
    if (!buf)
        return NULL;
    memcpy(buf, p + *pos, len);
    buf[len] = '\0';
    *pos = i;
    json_t *v = real ? json_real(strtod(buf, NULL)) : json_integer(strtoll(buf, NULL, 10));
    if (buf != small)
        free(buf);
    return v;
}

size_t kop_jscan_past_string(const char *v, size_t n, size_t i)
{
    size_t from = i + 1;
    for (;;) {
        const char *q = memchr(v + from, '"', n - from);
        size_t j = (size_t)(q - v), k = j;
        while (k > i + 1 && v[k - 1] == '\\')
            k--;
        if ((j - k) % 2 == 0)
            return j + 1;
        from = j + 1;
    }
}

size_t kop_jscan_past_value(const char *v, size_t n, size_t i)
{
    size_t depth = 0;
    do {
        char c = v[i];
        if (c == '"') {
            i = kop_jscan_past_string(v, n, i);
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            depth--;
            i++;
        } else if (depth > 0) {
            i++;
        } else {
            /* a number or a literal */
            while (i < n && !strchr(",}] \t\n\r", v[i]))
                i++;
        }
    } while (depth > 0 && i < n);
    return i;
}

/* Skip the validated value at p[*pos]. */
static void skip_value(const char *p, size_t n, size_t *pos)
{
    *pos = kop_jscan_past_value(p, n, skip_ws(p, n, *pos));
}

/*
 * Decode the validated value at p[*pos]. drop: when this value lies on the
 * path of a member to leave out, the rest of that path (the keys still to
 * follow, NULL-terminated; the last one names the member), else NULL.
 */
static json_t *decode_at(const char *p, size_t n, size_t *pos, struct decode_bounds *b,
                         const char *const *drop)
{
    size_t i = skip_ws(p, n, *pos);
    json_t *v = NULL;
    switch (p[i]) {
    case '{':
        v = charge(b, COST_OBJECT) ? json_object() : NULL;
        i = skip_ws(p, n, i + 1);
        while (v && p[i] != '}') {
            json_t *key = decode_string(p, n, &i, NULL);
            i = skip_ws(p, n, i) + 1; /* past ':' */
            const char *const *next = NULL;
            if (drop && key && strcmp(json_string_value(key), drop[0]) == 0) {
                if (!drop[1]) { /* the member left out: its bytes are passed over */
                    json_decref(key);
                    skip_value(p, n, &i);
                    i = skip_ws(p, n, i);
                    if (p[i] == ',')
                        i = skip_ws(p, n, i + 1);
                    continue;
                }
                next = drop + 1;
            }
            json_t *val = charge(b, COST_MEMBER) ? decode_at(p, n, &i, b, next) : NULL;
            if (!key || !val ||
                json_object_setn_new_nocheck(v, json_string_value(key), json_string_length(key),
                                             val) < 0) {
                json_decref(v);
                v = NULL;
            }
            json_decref(key);
            i = skip_ws(p, n, i);
            if (p[i] == ',')
                i = skip_ws(p, n, i + 1);
        }
        i++;
        break;
    case '[': {
        v = charge(b, COST_ARRAY) ? json_array() : NULL;
        size_t count = 0;
        i = skip_ws(p, n, i + 1);
        while (v && p[i] != ']') {
            json_t *val;
            if (b && b->max_items && count >= b->max_items) {
                /* past the bound: the element keeps its place, as null */
                skip_value(p, n, &i);
                val = charge(b, COST_SLOT) ? json_null() : NULL;
            } else {
                val = charge(b, COST_SLOT) ? decode_at(p, n, &i, b, NULL) : NULL;
            }
            count++;
            if (!val || json_array_append_new(v, val) < 0) {
                json_decref(v);
                v = NULL;
            }
            i = skip_ws(p, n, i);
            if (p[i] == ',')
                i = skip_ws(p, n, i + 1);
        }
        i++;
        break;
    }
    case '"':
        v = decode_string(p, n, &i, b);
        break;
    case 't':
        v = json_true();
        i += 4;
        break;
    case 'f':
        v = json_false();
        i += 5;
        break;
    case 'n':
        v = json_null();
        i += 4;
        break;
    default:
        v = decode_number(p, n, &i, b);
        break;
    }
    *pos = i;
    return v;
}

json_t *kop_jscan_decode(const char *p, size_t n)
{
    size_t pos = 0;
    return n ? decode_at(p, n, &pos, NULL, NULL) : NULL;
}

json_t *kop_jscan_decode_without(const char *p, size_t n, const char *const *drop)
{
    size_t pos = 0;
    return n ? decode_at(p, n, &pos, NULL, drop && drop[0] ? drop : NULL) : NULL;
}

json_t *kop_jscan_decode_bounded(const char *p, size_t n, size_t max_items, size_t max_bytes,
                                 int *ret_err)
{
    struct decode_bounds b = {.max_items = max_items, .max_bytes = max_bytes};
    size_t pos = 0;
    json_t *v = n ? decode_at(p, n, &pos, &b, NULL) : NULL;
    if (!v)
        *ret_err = b.over ? -E2BIG : -ENOMEM;
    return v;
}
