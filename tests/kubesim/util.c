/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim helpers: JSON output that matches Go's encoding/json byte for
 * byte on the cases that matter (compact, "<", ">" and "&" escaped as
 * \u003c \u003e \u0026, U+2028/2029 escaped), metav1.Status bodies in the
 * apiserver's field order with the encoder's trailing newline, time,
 * UUIDs and base64 (selectors: selector.c).
 */
#include "kubesim.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

struct growbuf {
    char *buf;
    size_t len, cap;
    bool oom;
};

static int grow_append(const char *s, size_t n, void *data)
{
    struct growbuf *g = data;
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 256;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *nb = realloc(g->buf, cap);
        if (!nb) {
            g->oom = true;
            return -1;
        }
        g->buf = nb;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, s, n);
    g->len += n;
    g->buf[g->len] = '\0';
    return 0;
}

/* Go escapes HTML-significant characters (<, >, & as \u003c: 5 bytes
 * more) and the JS line separators (U+2028, U+2029: 3 bytes more than
 * their UTF-8). The bytes those escapes add to buf[0..n); *state carries
 * a separator's first bytes from one piece of the text to the next (0 to
 * start). */
static size_t go_escape_extra(const char *buf, size_t n, int *state)
{
    size_t extra = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '<' || c == '>' || c == '&')
            extra += 5;
        else if (*state == 2 && (c == 0xa8 || c == 0xa9))
            extra += 3;
        *state = c == 0xe2 ? 1 : (*state == 1 && c == 0x80) ? 2 : 0;
    }
    return extra;
}

struct dump_count {
    size_t n;
    int state;
};

static int count_append(const char *s, size_t n, void *data)
{
    struct dump_count *c = data;
    c->n += n + go_escape_extra(s, n, &c->state);
    return 0;
}

size_t ks_dump_len(const json_t *v)
{
    struct dump_count c = {0};
    json_dump_callback(v, count_append, &c, JSON_COMPACT | JSON_ENCODE_ANY);
    return c.n;
}

char *ks_dump(const json_t *v, bool sort_keys, size_t *ret_len)
{
    struct growbuf raw = {0};
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | (sort_keys ? JSON_SORT_KEYS : 0);
    if (json_dump_callback(v, grow_append, &raw, flags) != 0 || raw.oom || !raw.buf) {
        free(raw.buf);
        return NULL;
    }
    int state = 0;
    size_t extra = go_escape_extra(raw.buf, raw.len, &state);
    if (extra == 0) {
        if (ret_len)
            *ret_len = raw.len;
        return raw.buf;
    }
    char *out = malloc(raw.len + extra + 1);
    if (!out) {
        free(raw.buf);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < raw.len; i++) {
        unsigned char c = (unsigned char)raw.buf[i];
        if (c == '<' || c == '>' || c == '&') {
            o += (size_t)snprintf(out + o, 7, "\\u%04x", c);
        } else if (c == 0xe2 && i + 2 < raw.len && (unsigned char)raw.buf[i + 1] == 0x80 &&
                   ((unsigned char)raw.buf[i + 2] == 0xa8 ||
                    (unsigned char)raw.buf[i + 2] == 0xa9)) {
            o += (size_t)snprintf(out + o, 7, "\\u%04x",
                                  (unsigned char)raw.buf[i + 2] == 0xa8 ? 0x2028u : 0x2029u);
            i += 2;
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    free(raw.buf);
    if (ret_len)
        *ret_len = o;
    return out;
}

void ks_now_rfc3339(char *buf, size_t len)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void ks_now_rfc3339_micro(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%06ldZ", base, ts.tv_nsec / 1000);
}

long long ks_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ks_uuid(char *buf, size_t len)
{
    unsigned char b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    for (; got < sizeof(b); got++)
        b[got] = (unsigned char)rand();
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(buf, len, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

/* A generateName suffix: n - 1 characters of the alphabet of
 * k8s.io/apimachinery/pkg/util/rand (no vowels, no 0, 1, 3: no words, no
 * look-alikes), from getrandom. */
void ks_random_suffix(char *buf, size_t n)
{
    static const char alnum[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char b[32];
    size_t want = n - 1 < sizeof(b) ? n - 1 : sizeof(b), got = 0;
    while (got < want) {
        ssize_t r = getrandom(b + got, want - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    for (; got < want; got++)
        b[got] = (unsigned char)rand();
    for (size_t i = 0; i < want; i++)
        buf[i] = alnum[b[i] % (sizeof(alnum) - 1)];
    buf[want] = '\0';
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *ks_base64_encode(const unsigned char *data, size_t len)
{
    size_t olen = 4 * ((len + 2) / 3);
    char *out = malloc(olen + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len)
            v |= data[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

unsigned char *ks_base64_decode(const char *s, size_t *ret_len)
{
    size_t n = strlen(s);
    unsigned char *out = malloc(n / 4 * 3 + 4);
    if (!out)
        return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '=' || c == '\n' || c == '\r' || c == ' ')
            continue;
        const char *p = strchr(b64chars, c);
        if (!p || c == '\0') {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)(p - b64chars);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    if (ret_len)
        *ret_len = o;
    return out;
}

const char **ks_sorted_keys(const json_t *obj, size_t *ret_n)
{
    size_t n = json_object_size(obj), k = 0;
    const char **keys = calloc(n ? n : 1, sizeof(*keys));
    if (!keys)
        abort();
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        keys[k++] = key;
    }
    qsort(keys, k, sizeof(*keys), ks_cmp_cstr);
    *ret_n = k;
    return keys;
}

int ks_cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

char *ks_strdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        abort();
    return d;
}

char *ks_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int n = vasprintf(&out, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    return out;
}

char *ks_status_body(int code, const char *status, const char *reason, const char *message,
                     json_t *details, size_t *ret_len)
{
    json_t *st = json_object();
    json_object_set_new(st, "kind", json_string("Status"));
    json_object_set_new(st, "apiVersion", json_string("v1"));
    json_object_set_new(st, "metadata", json_object());
    json_object_set_new(st, "status", json_string(status));
    if (message && *message)
        json_object_set_new(st, "message", json_string(message));
    if (reason && *reason)
        json_object_set_new(st, "reason", json_string(reason));
    if (details)
        json_object_set_new(st, "details", details);
    if (code)
        json_object_set_new(st, "code", json_integer(code));
    size_t len = 0;
    char *txt = ks_dump(st, false, &len);
    json_decref(st);
    if (!txt)
        abort();
    char *out = realloc(txt, len + 2);
    if (!out)
        abort();
    out[len] = '\n';
    out[len + 1] = '\0';
    if (ret_len)
        *ret_len = len + 1;
    return out;
}

char *ks_api_version(const char *group, const char *version)
{
    if (!group || !*group)
        return ks_strdup(version);
    return ks_printf("%s/%s", group, version);
}

void ks_split_api_version(const char *av, char **ret_group, char **ret_version)
{
    const char *slash = strchr(av ? av : "", '/');
    if (!slash) {
        *ret_group = ks_strdup("");
        *ret_version = ks_strdup(av);
        return;
    }
    *ret_group = strndup(av, (size_t)(slash - av));
    if (!*ret_group)
        abort();
    *ret_version = ks_strdup(slash + 1);
}

void ks_lower_method(const char *method, char *buf, size_t size)
{
    size_t i = 0;
    for (; method[i] && i + 1 < size; i++)
        buf[i] = (char)tolower((unsigned char)method[i]);
    if (size)
        buf[i] = '\0';
}

json_t *ks_ensure_obj(json_t *obj, const char *k)
{
    json_t *v = json_object_get(obj, k);
    if (!json_is_object(v)) {
        v = json_object();
        json_object_set_new(obj, k, v);
    }
    return v;
}

const json_t *ks_controller_ref(const json_t *obj)
{
    size_t i;
    const json_t *ref;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"), i, ref)
    {
        if (json_is_true(json_object_get(ref, "controller")))
            return ref;
    }
    return NULL;
}

bool ks_put_status(struct ks_server *ks, const struct ks_res *def, const char *key,
                   const json_t *obj, json_t *st)
{
    if (json_equal(st, json_object_get(obj, "status"))) {
        json_decref(st);
        return false;
    }
    json_t *next = json_deep_copy(obj);
    json_object_set_new(next, "status", st);
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
    return true;
}

json_t *ks_store_keys(struct ks_server *ks, const char *res_key)
{
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(ks_store_map(ks, res_key), k, v)
    {
        json_array_append_new(keys, json_string(k));
    }
    return keys;
}

json_t *ks_condition_in(const json_t *conds, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        if (strcmp(ks_nz(json_string_value(json_object_get(c, "type"))), type) == 0)
            return c;
    }
    return NULL;
}

const char *ks_condition_status(const json_t *obj, const char *type)
{
    const json_t *c =
        ks_condition_in(json_object_get(json_object_get(obj, "status"), "conditions"), type);
    return c ? ks_nz(json_string_value(json_object_get(c, "status"))) : NULL;
}

/* pkg/api/v1/pod/util.go IsPodReady: the Ready condition is True. */
bool ks_pod_ready(const json_t *pod)
{
    const char *st = ks_condition_status(pod, "Ready");
    return st && strcmp(st, "True") == 0;
}

void ks_index_set(json_t *index, const char *set_key, const char *member, bool add)
{
    json_t *set = json_object_get(index, set_key);
    if (add) {
        if (!set) {
            set = json_object();
            json_object_set_new(index, set_key, set);
        }
        json_object_set_new(set, member, json_true());
    } else if (set) {
        json_object_del(set, member);
        if (json_object_size(set) == 0)
            json_object_del(index, set_key);
    }
}

/* ---- duplicate members (the strict decoder's "duplicate field") ------------ */

struct dup_scan {
    const char *p, *end;
    char *path; /* the current path, "spec.containers[0].name" */
    size_t len, cap;
    json_t *out;  /* paths in the order met */
    json_t *seen; /* dedupe */
};

static void dup_path_push(struct dup_scan *s, const char *piece, size_t n, bool dot)
{
    size_t need = s->len + n + 2;
    if (need > s->cap) {
        s->cap = need * 2;
        char *np = realloc(s->path, s->cap);
        if (!np)
            abort();
        s->path = np;
    }
    if (dot && s->len)
        s->path[s->len++] = '.';
    memcpy(s->path + s->len, piece, n);
    s->len += n;
    s->path[s->len] = '\0';
}

static void dup_ws(struct dup_scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/* The string at s->p (its quote), decoded; s->p past it. malloc'd, NULL on
 * a malformed string. */
static char *dup_string(struct dup_scan *s, size_t *ret_n)
{
    const char *start = s->p++;
    bool escaped = false;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\') {
            escaped = true;
            s->p++;
        }
        s->p++;
    }
    if (s->p >= s->end)
        return NULL;
    s->p++;
    if (!escaped) {
        *ret_n = (size_t)(s->p - start - 2);
        char *k = malloc(*ret_n + 1);
        if (!k)
            abort();
        memcpy(k, start + 1, *ret_n);
        k[*ret_n] = '\0';
        return k;
    }
    json_t *v = json_loadb(start, (size_t)(s->p - start), JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    char *k = NULL;
    if (json_is_string(v)) {
        *ret_n = json_string_length(v);
        k = malloc(*ret_n + 1);
        if (!k)
            abort();
        memcpy(k, json_string_value(v), *ret_n + 1);
    }
    json_decref(v);
    return k;
}

static bool dup_value(struct dup_scan *s, int depth);

static bool dup_object(struct dup_scan *s, int depth)
{
    json_t *keys = json_object();
    s->p++; /* { */
    dup_ws(s);
    bool ok = true;
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        json_decref(keys);
        return true;
    }
    while (ok && s->p < s->end && *s->p == '"') {
        size_t n = 0;
        char *k = dup_string(s, &n);
        if (!k) {
            ok = false;
            break;
        }
        size_t saved = s->len;
        dup_path_push(s, k, n, true);
        if (json_object_getn(keys, k, n)) {
            if (!json_object_get(s->seen, s->path) && json_array_size(s->out) < 100) {
                json_object_set_new(s->seen, s->path, json_true());
                json_array_append_new(s->out, json_string(s->path));
            }
        } else {
            json_object_setn_new_nocheck(keys, k, n, json_true());
        }
        free(k);
        dup_ws(s);
        if (s->p >= s->end || *s->p != ':') {
            ok = false;
            break;
        }
        s->p++;
        ok = dup_value(s, depth + 1);
        s->len = saved;
        s->path[s->len] = '\0';
        dup_ws(s);
        if (ok && s->p < s->end && *s->p == ',') {
            s->p++;
            dup_ws(s);
            continue;
        }
        break;
    }
    json_decref(keys);
    if (!ok || s->p >= s->end || *s->p != '}')
        return false;
    s->p++;
    return true;
}

static bool dup_value(struct dup_scan *s, int depth)
{
    if (depth > 10000)
        return false;
    dup_ws(s);
    if (s->p >= s->end)
        return false;
    if (*s->p == '{')
        return dup_object(s, depth);
    if (*s->p == '"') {
        size_t n;
        char *v = dup_string(s, &n);
        free(v);
        return v != NULL;
    }
    if (*s->p == '[') {
        s->p++;
        dup_ws(s);
        if (s->p < s->end && *s->p == ']') {
            s->p++;
            return true;
        }
        for (long i = 0;; i++) {
            size_t saved = s->len;
            char idx[32];
            int n = snprintf(idx, sizeof(idx), "[%ld]", i);
            dup_path_push(s, idx, (size_t)n, false);
            bool ok = dup_value(s, depth + 1);
            s->len = saved;
            s->path[s->len] = '\0';
            if (!ok)
                return false;
            dup_ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == ']') {
                s->p++;
                return true;
            }
            return false;
        }
    }
    /* a number, true, false or null */
    while (s->p < s->end && !strchr(",]} \t\r\n", *s->p))
        s->p++;
    return true;
}

json_t *ks_json_duplicates(const char *body, size_t len)
{
    struct dup_scan s = {.p = body, .end = body + len, .out = json_array(), .seen = json_object()};
    dup_path_push(&s, "", 0, false);
    if (!dup_value(&s, 0))
        json_array_clear(s.out);
    free(s.path);
    json_decref(s.seen);
    return s.out;
}
