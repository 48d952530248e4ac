/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim helpers: JSON output that matches Go's encoding/json byte for
 * byte on the cases that matter (compact, "<", ">" and "&" escaped as
 * \u003c \u003e \u0026, U+2028/2029 escaped), metav1.Status bodies in the
 * apiserver's field order with the encoder's trailing newline, time,
 * UUIDs, base64, and label/field selectors (=, ==, !=, in, notin, exists,
 * !exists).
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

char *ks_dump(const json_t *v, bool sort_keys, size_t *ret_len)
{
    struct growbuf raw = {0};
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | (sort_keys ? JSON_SORT_KEYS : 0);
    if (json_dump_callback(v, grow_append, &raw, flags) != 0 || raw.oom || !raw.buf) {
        free(raw.buf);
        return NULL;
    }
    /* Go escapes HTML-significant characters and the JS line separators. */
    size_t extra = 0;
    for (size_t i = 0; i < raw.len; i++) {
        unsigned char c = (unsigned char)raw.buf[i];
        if (c == '<' || c == '>' || c == '&')
            extra += 5;
        else if (c == 0xe2 && i + 2 < raw.len && (unsigned char)raw.buf[i + 1] == 0x80 &&
                 ((unsigned char)raw.buf[i + 2] == 0xa8 || (unsigned char)raw.buf[i + 2] == 0xa9))
            extra += 3;
    }
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

/* ---- selectors ------------------------------------------------------------- */

enum sel_op { SEL_EQ, SEL_NEQ, SEL_IN, SEL_NOTIN, SEL_EXISTS, SEL_NOTEXISTS };

struct sel_req {
    char *key;
    enum sel_op op;
    char **values;
    size_t nvalues;
};

struct ks_selector {
    bool field;
    struct sel_req *reqs;
    size_t nreqs;
};

void ks_selector_free(struct ks_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->nreqs; i++) {
        free(sel->reqs[i].key);
        for (size_t j = 0; j < sel->reqs[i].nvalues; j++)
            free(sel->reqs[i].values[j]);
        free(sel->reqs[i].values);
    }
    free(sel->reqs);
    free(sel);
}

static void skip_ws(const char **p)
{
    while (**p == ' ' || **p == '\t')
        (*p)++;
}

static char *read_token(const char **p, const char *stops)
{
    const char *s = *p;
    while (**p && !strchr(stops, **p))
        (*p)++;
    const char *e = *p;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    char *t = strndup(s, (size_t)(e - s));
    if (!t)
        abort();
    return t;
}

static void req_add_value(struct sel_req *r, char *v)
{
    char **nv = realloc(r->values, (r->nvalues + 1) * sizeof(*nv));
    if (!nv)
        abort();
    r->values = nv;
    r->values[r->nvalues++] = v;
}

static bool valid_key(const char *k)
{
    if (!*k || strlen(k) > 316)
        return false;
    for (const char *c = k; *c; c++)
        if (!(isalnum((unsigned char)*c) || strchr("-_./", *c)))
            return false;
    return true;
}

int ks_selector_parse(const char *s, bool field, struct ks_selector **ret_sel, char **ret_err)
{
    struct ks_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        abort();
    sel->field = field;
    const char *p = s ? s : "";
    char *err = NULL;
    skip_ws(&p);
    while (*p) {
        struct sel_req r = {0};
        skip_ws(&p);
        if (*p == '!' && !field) {
            p++;
            skip_ws(&p);
            r.op = SEL_NOTEXISTS;
            r.key = read_token(&p, ",");
            if (!valid_key(r.key))
                err = ks_printf("unable to parse requirement: invalid label key \"%s\"", r.key);
        } else {
            r.key = read_token(&p, "=!, ()");
            skip_ws(&p);
            if (!*r.key) {
                err = ks_printf("unable to parse requirement: found '%c', expected: identifier",
                                *p ? *p : ' ');
            } else if (*p == '\0' || *p == ',') {
                if (field)
                    err = ks_printf("invalid selector: '%s'; can't understand '%s'", s, r.key);
                r.op = SEL_EXISTS;
            } else if (*p == '=' || (*p == '!' && p[1] == '=')) {
                r.op = *p == '!' ? SEL_NEQ : SEL_EQ;
                p += *p == '!' ? 2 : (p[1] == '=' ? 2 : 1);
                req_add_value(&r, read_token(&p, ","));
            } else if (!field && (strncmp(p, "in", 2) == 0 || strncmp(p, "notin", 5) == 0)) {
                r.op = p[0] == 'i' ? SEL_IN : SEL_NOTIN;
                p += r.op == SEL_IN ? 2 : 5;
                skip_ws(&p);
                if (*p != '(') {
                    err = ks_printf("unable to parse requirement: found '%c', expected: '('",
                                    *p ? *p : ' ');
                } else {
                    p++;
                    for (;;) {
                        skip_ws(&p);
                        req_add_value(&r, read_token(&p, ",)"));
                        if (*p == ',') {
                            p++;
                            continue;
                        }
                        if (*p == ')') {
                            p++;
                            break;
                        }
                        err = ks_printf("unable to parse requirement: found '', expected: ')'");
                        break;
                    }
                }
            } else {
                err = ks_printf("unable to parse requirement: found '%c', expected: in, notin, "
                                "=, ==, !=, gt, lt",
                                *p);
            }
            if (!err && !field && !valid_key(r.key))
                err = ks_printf("unable to parse requirement: invalid label key \"%s\"", r.key);
        }
        struct sel_req *nr = realloc(sel->reqs, (sel->nreqs + 1) * sizeof(*nr));
        if (!nr)
            abort();
        sel->reqs = nr;
        sel->reqs[sel->nreqs++] = r;
        if (err)
            break;
        skip_ws(&p);
        if (*p == ',') {
            p++;
        } else if (*p) {
            err = ks_printf("unable to parse requirement: found '%c', expected: ','", *p);
            break;
        }
    }
    if (err) {
        ks_selector_free(sel);
        *ret_err = err;
        return -EINVAL;
    }
    *ret_sel = sel;
    return 0;
}

/* Field value as a string ("" when absent), for field selectors. */
static char *field_value(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    char *copy = ks_strdup(path);
    char *save = NULL;
    for (char *part = strtok_r(copy, ".", &save); part && cur; part = strtok_r(NULL, ".", &save))
        cur = json_is_object(cur) ? json_object_get(cur, part) : NULL;
    free(copy);
    if (!cur || json_is_null(cur))
        return ks_strdup("");
    if (json_is_string(cur))
        return ks_strdup(json_string_value(cur));
    if (json_is_integer(cur))
        return ks_printf("%lld", (long long)json_integer_value(cur));
    if (json_is_true(cur))
        return ks_strdup("true");
    if (json_is_false(cur))
        return ks_strdup("false");
    return ks_strdup("");
}

bool ks_selector_match(const struct ks_selector *sel, const json_t *obj)
{
    if (!sel)
        return true;
    const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");
    for (size_t i = 0; i < sel->nreqs; i++) {
        const struct sel_req *r = &sel->reqs[i];
        char *val = NULL;
        bool present;
        if (sel->field) {
            val = field_value(obj, r->key);
            present = true;
        } else {
            const json_t *v = json_object_get(labels, r->key);
            present = json_is_string(v);
            val = ks_strdup(present ? json_string_value(v) : "");
        }
        bool ok;
        switch (r->op) {
        case SEL_EQ:
            ok = present && strcmp(val, r->values[0]) == 0;
            break;
        case SEL_NEQ:
            ok = !present || strcmp(val, r->values[0]) != 0;
            break;
        case SEL_IN:
        case SEL_NOTIN: {
            bool found = false;
            for (size_t j = 0; present && j < r->nvalues; j++)
                if (strcmp(val, r->values[j]) == 0)
                    found = true;
            ok = r->op == SEL_IN ? found : !found;
            break;
        }
        case SEL_EXISTS:
            ok = present;
            break;
        case SEL_NOTEXISTS:
        default:
            ok = !present;
            break;
        }
        free(val);
        if (!ok)
            return false;
    }
    return true;
}
