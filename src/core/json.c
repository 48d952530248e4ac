/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jansson helpers used by every layer: serialization into malloc'd memory
 * (json_dumps would allocate through jansson's allocator, which may be a
 * per-request arena, see arena.h), dotted-path lookups, and a deep
 * equality that treats JSON numbers as one type.
 */
#include "kop/json.h"

#include <assert.h>
#include "kop/dynbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int dump_cb(const char *buffer, size_t size, void *user)
{
    return kop_dynbuf_add(user, buffer, size) == 0 ? 0 : -1;
}

int kop_json_dump(const json_t *v, size_t flags, char **ret_buf, size_t *ret_len)
{
    struct kop_dynbuf b;
    int r;

    assert(v);
    assert(ret_buf);
    kop_dynbuf_init(&b, KOP_DYNBUF_NO_LIMIT);
    if (json_dump_callback(v, dump_cb, &b, flags) != 0) {
        r = kop_dynbuf_error(&b) == -ENOMEM || kop_dynbuf_error(&b) == -E2BIG ? -ENOMEM : -EINVAL;
        goto out;
    }
    r = kop_dynbuf_take(&b, ret_buf, ret_len);
out:
    kop_dynbuf_free(&b);
    return r;
}

json_t *kop_json_path(const json_t *obj, const char *dotted)
{
    const char *p = dotted;
    json_t *cur = (json_t *)obj;

    if (obj == NULL || dotted == NULL)
        return NULL;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);

        if (!json_is_object(cur))
            return NULL;
        cur = json_object_getn(cur, p, n);
        if (cur == NULL || dot == NULL)
            return cur;
        p = dot + 1;
    }
}

const char *kop_json_path_str(const json_t *obj, const char *dotted)
{
    return json_string_value(kop_json_path(obj, dotted));
}

json_t *kop_json_object_ensure(json_t *obj, const char *key)
{
    json_t *v;

    assert(key);
    if (!json_is_object(obj))
        return NULL;
    v = json_object_get(obj, key);
    if (json_is_object(v))
        return v;
    v = json_object();
    if (v == NULL)
        return NULL;
    /* set_new steals v even on failure. */
    if (json_object_set_new(obj, key, v) != 0)
        return NULL;
    return v;
}

static bool number_equal(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b))
        return json_integer_value(a) == json_integer_value(b);
    return json_number_value(a) == json_number_value(b);
}

bool kop_json_equal(const json_t *a, const json_t *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL)
        return false;
    if (json_is_number(a) && json_is_number(b))
        return number_equal(a, b);
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        const char *key;
        size_t key_len;
        json_t *va;

        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_keylen_foreach((json_t *)a, key, key_len, va)
        {
            json_t *vb = json_object_getn(b, key, key_len);

            if (vb == NULL || !kop_json_equal(va, vb))
                return false;
        }
        return true;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(a);

        if (n != json_array_size(b))
            return false;
        for (size_t i = 0; i < n; i++) {
            if (!kop_json_equal(json_array_get(a, i), json_array_get(b, i)))
                return false;
        }
        return true;
    }
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    default:
        /* true, false, null: same type is equal. */
        return true;
    }
}

size_t kop_utf8_cut(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    /* step back over at most three continuation bytes to the lead byte */
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && (u[i - 1] & 0xC0) == 0x80) {
        i--;
        back++;
    }
    if (i == 0)
        return back ? 0 : n;
    unsigned char lead = u[i - 1];
    size_t need = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (lead >= 0x80 && back + 1 < need)
        return i - 1; /* the last character is incomplete: drop it */
    return n;
}

void kop_utf8_truncate(char *s, size_t max)
{
    size_t n = strlen(s);
    if (n > max)
        n = max;
    s[kop_utf8_cut(s, n)] = '\0';
}

size_t kop_utf8_seq_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++) {
        if (p[k] < 0x80 || p[k] > 0xBF)
            return 0;
    }
    return len;
}

size_t kop_utf8_sanitize(char *buf, size_t size, const char *s, size_t n)
{
    static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
    size_t o = 0;
    if (!buf || size == 0)
        return 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *piece = &s[i];
        size_t in = 1, out = 1;
        char blank = ' ';
        if (c >= 0x80) {
            out = in = kop_utf8_seq_len(&s[i], n - i);
            if (!in) {
                piece = replacement;
                in = 1;
                out = sizeof(replacement) - 1;
            }
        } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
            piece = &blank;
        }
        if (o + out >= size)
            break;
        memcpy(buf + o, piece, out);
        o += out;
        i += in;
    }
    buf[o] = '\0';
    return o;
}

bool kop_text_printable(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return false;
    return true;
}

void kop_vmsgf(char *buf, size_t size, const char *fmt, va_list ap)
{
    if (!buf || size == 0)
        return;
    vsnprintf(buf, size, fmt, ap);
    kop_utf8_truncate(buf, size - 1);
}

void kop_msgf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kop_vmsgf(buf, size, fmt, ap);
    va_end(ap);
}
