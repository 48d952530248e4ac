/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim protobuf bodies: application/vnd.kubernetes.protobuf as the
 * apiserver reads and writes it for built-in kinds.
 *
 * A body is the 4-byte magic "k8s\0" followed by a runtime.Unknown
 * message (k8s.io/apimachinery/pkg/runtime/generated.proto): typeMeta
 * (apiVersion, kind) = 1, raw = 2 (the object's own message), and
 * contentEncoding = 3, contentType = 4, both empty
 * (apimachinery's pkg/runtime/serializer/protobuf/protobuf.go). The object
 * message is read with the field table in pbtable.c and turned into the
 * JSON that encoding/json would write for the same Go value: the Go struct
 * order, omitempty zeros left out, pointers' zeros kept, inlined embedded
 * structs' members in their parent, bytes as base64,
 * and the types with their own JSON form (Time, MicroTime, Duration,
 * Quantity, IntOrString, RawExtension, FieldsV1). Encoding goes the other
 * way. Fields the table does not know are skipped when reading, as proto2
 * does; JSON members the table does not know are not written.
 *
 * Thread-safety: all functions touch only their arguments and the
 * read-only table.
 */
#include "kubesim.h"
#include "protobuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const unsigned char magic[4] = {'k', '8', 's', 0};

bool ks_pb_media_type(const char *ct)
{
    static const char pb[] = "application/vnd.kubernetes.protobuf";
    size_t n = sizeof(pb) - 1;
    if (!ct)
        return false;
    while (*ct == ' ')
        ct++;
    return strncmp(ct, pb, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* ---- reading ------------------------------------------------------------------ */

struct rd {
    const unsigned char *p;
    size_t n;
};

static int rd_varint(struct rd *r, uint64_t *ret)
{
    uint64_t v = 0;
    for (unsigned int shift = 0; shift < 64; shift += 7) {
        if (r->n == 0)
            return -EINVAL;
        unsigned char b = *r->p++;
        r->n--;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *ret = v;
            return 0;
        }
    }
    return -EINVAL;
}

static int rd_fixed(struct rd *r, size_t size, uint64_t *ret)
{
    if (r->n < size)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < size; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += size;
    r->n -= size;
    *ret = v;
    return 0;
}

/* One field's key and value: a varint/fixed number in *num or a
 * length-delimited slice in *sub. */
struct wire {
    uint32_t field;
    unsigned int type;
    uint64_t num;
    struct rd sub;
};

static int rd_field(struct rd *r, struct wire *w)
{
    uint64_t key;
    if (rd_varint(r, &key) != 0 || key >> 3 == 0 || key >> 3 > UINT32_MAX)
        return -EINVAL;
    w->field = (uint32_t)(key >> 3);
    w->type = (unsigned int)(key & 7);
    switch (w->type) {
    case 0:
        return rd_varint(r, &w->num);
    case 1:
        return rd_fixed(r, 8, &w->num);
    case 5:
        return rd_fixed(r, 4, &w->num);
    case 2: {
        uint64_t len;
        if (rd_varint(r, &len) != 0 || len > r->n)
            return -EINVAL;
        w->sub.p = r->p;
        w->sub.n = (size_t)len;
        r->p += len;
        r->n -= (size_t)len;
        return 0;
    }
    default: /* groups are not used by Kubernetes */
        return -EINVAL;
    }
}

static json_t *decode_msg(int idx, struct rd r, char **err);

static json_t *scalar_from_num(enum ks_pb_type t, uint64_t v)
{
    switch (t) {
    case KS_PB_BOOL:
        return json_boolean(v != 0);
    case KS_PB_INT32:
        return json_integer((int32_t)(uint32_t)v);
    case KS_PB_INT64:
        return json_integer((json_int_t)v);
    case KS_PB_UINT32:
        return json_integer((json_int_t)(uint32_t)v);
    case KS_PB_UINT64:
        return json_integer((json_int_t)v);
    case KS_PB_DOUBLE: {
        double d;
        memcpy(&d, &v, sizeof(d));
        return json_real(d);
    }
    case KS_PB_FLOAT: {
        uint32_t u = (uint32_t)v;
        float f;
        memcpy(&f, &u, sizeof(f));
        return json_real((double)f);
    }
    default:
        return NULL;
    }
}

/* The value of one wire field of table type t (@ref new), NULL with *err. */
static json_t *decode_value(const struct ks_pb_field *f, const struct wire *w, char **err)
{
    bool len_type = f->type == KS_PB_STRING || f->type == KS_PB_BYTES || f->type == KS_PB_MESSAGE;
    if (len_type != (w->type == 2)) {
        *err = ks_printf("field %s: wrong wire type %u", f->name, w->type);
        return NULL;
    }
    switch (f->type) {
    case KS_PB_STRING: {
        json_t *s = json_stringn((const char *)w->sub.p, w->sub.n);
        if (!s)
            *err = ks_printf("field %s: invalid UTF-8", f->name);
        return s;
    }
    case KS_PB_BYTES: {
        char *b = ks_base64_encode(w->sub.p, w->sub.n);
        json_t *s = json_string(b ? b : "");
        free(b);
        return s;
    }
    case KS_PB_MESSAGE:
        return decode_msg(f->msg, w->sub, err);
    default:
        if ((f->type == KS_PB_DOUBLE && w->type != 1) || (f->type == KS_PB_FLOAT && w->type != 5) ||
            (f->type != KS_PB_DOUBLE && f->type != KS_PB_FLOAT && w->type != 0)) {
            *err = ks_printf("field %s: wrong wire type %u", f->name, w->type);
            return NULL;
        }
        return scalar_from_num(f->type, w->num);
    }
}

/* A map entry (key = 1, value = 2) into obj. */
static int decode_entry(const struct ks_pb_field *f, struct rd r, json_t *obj, char **err)
{
    json_t *key = NULL, *val = NULL;
    struct wire w = {0};
    while (r.n) {
        if (rd_field(&r, &w) != 0)
            goto bad;
        if (w.field == 1 && w.type == 2) {
            json_decref(key);
            key = json_stringn((const char *)w.sub.p, w.sub.n);
            if (!key)
                goto bad;
        } else if (w.field == 2) {
            json_decref(val);
            val = decode_value(f, &w, err);
            if (!val)
                goto fail;
        }
    }
    if (!val) { /* an absent value is the zero value */
        struct wire zero = {.field = 2, .type = 0};
        if (f->type == KS_PB_STRING || f->type == KS_PB_BYTES || f->type == KS_PB_MESSAGE)
            zero.type = 2;
        else if (f->type == KS_PB_DOUBLE)
            zero.type = 1;
        else if (f->type == KS_PB_FLOAT)
            zero.type = 5;
        val = decode_value(f, &zero, err);
        if (!val)
            goto fail;
    }
    json_object_set_new(obj, key ? json_string_value(key) : "", val);
    json_decref(key);
    return 0;
bad:
    *err = ks_printf("field %s: malformed map entry", f->name);
fail:
    json_decref(key);
    json_decref(val);
    return -EINVAL;
}

static bool is_zero(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_string_length(v) == 0;
    case JSON_INTEGER:
        return json_integer_value(v) == 0;
    case JSON_REAL:
        return json_real_value(v) == 0;
    case JSON_FALSE:
    case JSON_NULL:
        return true;
    default:
        return false;
    }
}

/* Go's time.Duration.String(). */
static void go_duration(int64_t d, char *buf, size_t len)
{
    if (d == 0) {
        snprintf(buf, len, "0s");
        return;
    }
    uint64_t u = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;
    const char *sign = d < 0 ? "-" : "";
    char frac[16] = "";
    if (u < 1000000000ull) {
        const char *unit;
        uint64_t div;
        if (u < 1000) {
            snprintf(buf, len, "%s%lluns", sign, (unsigned long long)u);
            return;
        }
        if (u < 1000000) {
            unit = "\xc2\xb5s";
            div = 1000;
        } else {
            unit = "ms";
            div = 1000000;
        }
        uint64_t f = u % div;
        if (f) {
            int digits = div == 1000 ? 3 : 6;
            snprintf(frac, sizeof(frac), ".%0*llu", digits, (unsigned long long)f);
            for (size_t i = strlen(frac); i > 1 && frac[i - 1] == '0'; i--)
                frac[i - 1] = '\0';
        }
        snprintf(buf, len, "%s%llu%s%s", sign, (unsigned long long)(u / div), frac, unit);
        return;
    }
    uint64_t ns = u % 1000000000ull, s = u / 1000000000ull;
    if (ns) {
        snprintf(frac, sizeof(frac), ".%09llu", (unsigned long long)ns);
        for (size_t i = strlen(frac); i > 1 && frac[i - 1] == '0'; i--)
            frac[i - 1] = '\0';
    }
    uint64_t h = s / 3600, m = s / 60 % 60;
    s %= 60;
    if (h)
        snprintf(buf, len, "%s%lluh%llum%llu%ss", sign, (unsigned long long)h,
                 (unsigned long long)m, (unsigned long long)s, frac);
    else if (m)
        snprintf(buf, len, "%s%llum%llu%ss", sign, (unsigned long long)m, (unsigned long long)s,
                 frac);
    else
        snprintf(buf, len, "%s%llu%ss", sign, (unsigned long long)s, frac);
}

/* Time, MicroTime, Duration, Quantity, IntOrString, raw JSON. */
static json_t *decode_special(const struct ks_pb_msg *m, struct rd r, char **err)
{
    uint64_t n1 = 0, n2 = 0;
    struct rd s1 = {NULL, 0}, s3 = {NULL, 0};
    bool have1 = false;
    struct wire w = {0};
    while (r.n) {
        if (rd_field(&r, &w) != 0) {
            *err = ks_printf("%s: malformed message", m->name);
            return NULL;
        }
        if (w.field == 1) {
            have1 = true;
            if (w.type == 2)
                s1 = w.sub;
            else
                n1 = w.num;
        } else if (w.field == 2 && w.type == 0) {
            n2 = w.num;
        } else if (w.field == 3 && w.type == 2) {
            s3 = w.sub;
        }
    }
    char buf[64];
    switch (m->kind) {
    case KS_PB_M_TIME:
    case KS_PB_M_MICROTIME: {
        if (n1 == 0 && n2 == 0)
            return json_null();
        time_t t = (time_t)(int64_t)n1;
        struct tm tm;
        if (!gmtime_r(&t, &tm)) {
            *err = ks_printf("%s: out of range", m->name);
            return NULL;
        }
        size_t k = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        if (m->kind == KS_PB_M_MICROTIME)
            snprintf(buf + k, sizeof(buf) - k, ".%06uZ", (unsigned int)((uint32_t)n2 / 1000));
        else
            snprintf(buf + k, sizeof(buf) - k, "Z");
        return json_string(buf);
    }
    case KS_PB_M_DURATION:
        go_duration((int64_t)n1, buf, sizeof(buf));
        return json_string(buf);
    case KS_PB_M_QUANTITY: {
        if (!s1.n)
            return json_string("0");
        json_t *q = json_stringn((const char *)s1.p, s1.n);
        if (!q)
            *err = ks_strdup("Quantity: invalid UTF-8");
        return q;
    }
    case KS_PB_M_INTSTR: {
        if (n1 == 1) {
            json_t *q = json_stringn(s3.n ? (const char *)s3.p : "", s3.n);
            if (!q)
                *err = ks_strdup("IntOrString: invalid UTF-8");
            return q;
        }
        return json_integer((int32_t)(uint32_t)n2);
    }
    case KS_PB_M_RAWJSON: {
        if (!have1 || !s1.n)
            return json_null();
        json_error_t jerr;
        json_t *v = json_loadb((const char *)s1.p, s1.n, JSON_DECODE_ANY, &jerr);
        if (!v)
            *err = ks_printf("%s: raw data is not JSON: %s", m->name, jerr.text);
        return v;
    }
    default:
        *err = ks_printf("%s: not a special message", m->name);
        return NULL;
    }
}

static json_t *decode_msg(int idx, struct rd r, char **err)
{
    const struct ks_pb_msg *m = &ks_pb_msgs[idx];
    if (m->kind != KS_PB_M_PLAIN && m->kind != KS_PB_M_SLICE)
        return decode_special(m, r, err);
    json_t **vals = calloc(m->nfields ? m->nfields : 1, sizeof(*vals));
    if (!vals)
        abort();
    json_t *out = NULL;
    struct wire w = {0};
    while (r.n) {
        if (rd_field(&r, &w) != 0) {
            *err = ks_printf("%s: malformed message", m->name);
            goto out;
        }
        size_t i;
        for (i = 0; i < m->nfields && m->fields[i].num != w.field; i++)
            ;
        if (i == m->nfields)
            continue; /* unknown field */
        const struct ks_pb_field *f = &m->fields[i];
        if (f->flags & KS_PB_F_MAP) {
            if (w.type != 2) {
                *err = ks_printf("field %s: wrong wire type %u", f->name, w.type);
                goto out;
            }
            if (!vals[i])
                vals[i] = json_object();
            if (decode_entry(f, w.sub, vals[i], err) != 0)
                goto out;
            continue;
        }
        if (f->flags & KS_PB_F_REPEATED) {
            if (!vals[i])
                vals[i] = json_array();
            bool packable =
                f->type != KS_PB_STRING && f->type != KS_PB_BYTES && f->type != KS_PB_MESSAGE;
            if (packable && w.type == 2) { /* packed numbers */
                struct rd p = w.sub;
                while (p.n) {
                    uint64_t v;
                    int rc = f->type == KS_PB_DOUBLE  ? rd_fixed(&p, 8, &v)
                             : f->type == KS_PB_FLOAT ? rd_fixed(&p, 4, &v)
                                                      : rd_varint(&p, &v);
                    if (rc != 0) {
                        *err = ks_printf("field %s: malformed packed list", f->name);
                        goto out;
                    }
                    json_array_append_new(vals[i], scalar_from_num(f->type, v));
                }
                continue;
            }
            json_t *v = decode_value(f, &w, err);
            if (!v)
                goto out;
            json_array_append_new(vals[i], v);
            continue;
        }
        json_t *v = decode_value(f, &w, err);
        if (!v)
            goto out;
        json_decref(vals[i]);
        vals[i] = v;
    }
    if (m->kind == KS_PB_M_SLICE) {
        out = m->nfields && vals[0] ? json_incref(vals[0]) : json_array();
        goto out;
    }
    out = json_object();
    for (size_t i = 0; i < m->nfields; i++) {
        const struct ks_pb_field *f = &m->fields[i];
        if (!vals[i])
            continue;
        bool coll = f->flags & (KS_PB_F_MAP | KS_PB_F_REPEATED);
        if (!coll && (f->flags & KS_PB_F_OMITEMPTY) && is_zero(vals[i]) &&
            (!(f->flags & KS_PB_F_POINTER) || json_is_null(vals[i])))
            continue;
        if ((f->flags & KS_PB_F_INLINE) && json_is_object(vals[i]))
            json_object_update(out, vals[i]);
        else
            json_object_set(out, f->name, vals[i]);
    }
out:
    for (size_t i = 0; i < m->nfields; i++)
        json_decref(vals[i]);
    free(vals);
    return out;
}

static int find_kind(const char *api_version, const char *kind)
{
    char *group = NULL, *version = NULL;
    ks_split_api_version(api_version, &group, &version);
    int found = -1;
    for (size_t i = 0; i < ks_pb_nkinds && found < 0; i++) {
        const struct ks_pb_kind *k = &ks_pb_kinds[i];
        if (strcmp(k->kind, kind) != 0 || strcmp(k->version, ks_nz(version)) != 0)
            continue;
        /* DeleteOptions and Status travel in every group's version. */
        if (strcmp(k->group, ks_nz(group)) == 0 || strcmp(k->group, "meta.k8s.io") == 0)
            found = k->msg;
    }
    free(group);
    free(version);
    return found;
}

int ks_pb_decode(const void *body, size_t len, json_t **ret_obj, char **ret_err)
{
    const unsigned char *p = body;
    *ret_obj = NULL;
    *ret_err = NULL;
    if (len < sizeof(magic) || memcmp(p, magic, sizeof(magic)) != 0) {
        *ret_err = ks_strdup("provided object does not have a protobuf envelope");
        return -EINVAL;
    }
    struct rd r = {p + sizeof(magic), len - sizeof(magic)};
    char *av = NULL, *kind = NULL;
    struct rd raw = {NULL, 0};
    bool encoded = false;
    struct wire w = {0};
    int rc = -EINVAL;
    while (r.n) {
        if (rd_field(&r, &w) != 0) {
            *ret_err = ks_strdup("malformed protobuf envelope");
            goto out;
        }
        if (w.field == 1 && w.type == 2) { /* TypeMeta */
            struct rd t = w.sub;
            struct wire tw;
            while (t.n) {
                if (rd_field(&t, &tw) != 0) {
                    *ret_err = ks_strdup("malformed protobuf envelope");
                    goto out;
                }
                if (tw.type == 2 && (tw.field == 1 || tw.field == 2)) {
                    char **dst = tw.field == 1 ? &av : &kind;
                    free(*dst);
                    *dst = strndup((const char *)tw.sub.p, tw.sub.n);
                }
            }
        } else if (w.field == 2 && w.type == 2) {
            raw = w.sub;
        } else if (w.field == 3 && w.type == 2 && w.sub.n) {
            encoded = true;
        }
    }
    if (encoded) {
        *ret_err = ks_strdup("protobuf content encodings are not supported");
        goto out;
    }
    if (!kind || !*kind) {
        *ret_err = ks_strdup("Object 'Kind' is missing in protobuf envelope");
        goto out;
    }
    int idx = find_kind(ks_nz(av), kind);
    if (idx < 0) {
        *ret_err = ks_printf("no kind \"%s\" is registered for version \"%s\" in protobuf", kind,
                             ks_nz(av));
        rc = -ENOTSUP;
        goto out;
    }
    json_t *obj = decode_msg(idx, raw, ret_err);
    if (!obj)
        goto out;
    json_t *full = json_object();
    json_object_set_new(full, "kind", json_string(kind));
    json_object_set_new(full, "apiVersion", json_string(ks_nz(av)));
    json_object_update(full, obj);
    json_decref(obj);
    *ret_obj = full;
    rc = 0;
out:
    free(av);
    free(kind);
    return rc;
}

/* ---- writing -------------------------------------------------------------------- */

struct wr {
    unsigned char *p;
    size_t n, cap;
};

static void wr_bytes(struct wr *w, const void *data, size_t n)
{
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n)
            cap *= 2;
        unsigned char *np = realloc(w->p, cap);
        if (!np)
            abort();
        w->p = np;
        w->cap = cap;
    }
    if (n)
        memcpy(w->p + w->n, data, n);
    w->n += n;
}

static void wr_varint(struct wr *w, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;
    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    wr_bytes(w, b, n);
}

static void wr_key(struct wr *w, uint32_t field, unsigned int type)
{
    wr_varint(w, ((uint64_t)field << 3) | type);
}

static void wr_fixed(struct wr *w, uint64_t v, size_t size)
{
    unsigned char b[8];
    for (size_t i = 0; i < size; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    wr_bytes(w, b, size);
}

static void wr_len(struct wr *w, uint32_t field, const void *data, size_t n)
{
    wr_key(w, field, 2);
    wr_varint(w, n);
    wr_bytes(w, data, n);
}

static int encode_msg(int idx, const json_t *v, struct wr *w, char **err);

/* RFC 3339 text to seconds and nanoseconds. */
static int parse_time(const char *s, int64_t *ret_sec, int32_t *ret_nsec)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    int consumed = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &consumed) != 6)
        return -EINVAL;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = s + consumed;
    int32_t nsec = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (digits < 9)
                nsec = nsec * 10 + (*p - '0');
        for (; digits < 9; digits++)
            nsec *= 10;
    }
    int64_t off = 0;
    if (*p == '+' || *p == '-') {
        int hh = 0, mm = 0;
        if (sscanf(p + 1, "%2d:%2d", &hh, &mm) != 2)
            return -EINVAL;
        off = (hh * 3600 + mm * 60) * (*p == '-' ? -1 : 1);
    } else if (*p != 'Z') {
        return -EINVAL;
    }
    *ret_sec = (int64_t)timegm(&tm) - off;
    *ret_nsec = nsec;
    return 0;
}

/* Go's time.ParseDuration, in nanoseconds. */
static int parse_duration(const char *s, int64_t *ret)
{
    double total = 0;
    bool neg = false;
    if (*s == '-' || *s == '+')
        neg = *s++ == '-';
    if (strcmp(s, "0") == 0) {
        *ret = 0;
        return 0;
    }
    if (!*s)
        return -EINVAL;
    while (*s) {
        char *end = NULL;
        double v = strtod(s, &end);
        if (end == s)
            return -EINVAL;
        s = end;
        static const struct {
            const char *u;
            double ns;
        } units[] = {{"ns", 1},   {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
                     {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9}};
        size_t best = 0, i;
        int found = -1;
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t n = strlen(units[i].u);
            if (strncmp(s, units[i].u, n) == 0 && n > best) {
                best = n;
                found = (int)i;
            }
        }
        if (found < 0)
            return -EINVAL;
        total += v * units[found].ns;
        s += best;
    }
    total += 0.5; /* round to the nanosecond */
    *ret = (int64_t)(neg ? -total : total);
    return 0;
}

static int encode_special(const struct ks_pb_msg *m, const json_t *v, struct wr *w, char **err)
{
    switch (m->kind) {
    case KS_PB_M_TIME:
    case KS_PB_M_MICROTIME: {
        int64_t sec;
        int32_t nsec;
        if (json_is_null(v))
            return 0;
        if (!json_is_string(v) || parse_time(json_string_value(v), &sec, &nsec) != 0)
            goto bad;
        wr_key(w, 1, 0);
        wr_varint(w, (uint64_t)sec);
        if (nsec) {
            wr_key(w, 2, 0);
            wr_varint(w, (uint64_t)(int64_t)nsec);
        }
        return 0;
    }
    case KS_PB_M_DURATION: {
        int64_t d;
        if (!json_is_string(v) || parse_duration(json_string_value(v), &d) != 0)
            goto bad;
        wr_key(w, 1, 0);
        wr_varint(w, (uint64_t)d);
        return 0;
    }
    case KS_PB_M_QUANTITY: {
        char num[64];
        const char *s = json_string_value(v);
        if (json_is_integer(v)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
            s = num;
        } else if (json_is_real(v)) {
            snprintf(num, sizeof(num), "%g", json_real_value(v));
            s = num;
        }
        if (!s)
            goto bad;
        wr_len(w, 1, s, strlen(s));
        return 0;
    }
    case KS_PB_M_INTSTR:
        if (json_is_integer(v)) {
            wr_key(w, 1, 0);
            wr_varint(w, 0);
            wr_key(w, 2, 0);
            wr_varint(w, (uint64_t)(int64_t)(int32_t)json_integer_value(v));
            return 0;
        }
        if (!json_is_string(v))
            goto bad;
        wr_key(w, 1, 0);
        wr_varint(w, 1);
        wr_key(w, 2, 0);
        wr_varint(w, 0);
        wr_len(w, 3, json_string_value(v), json_string_length(v));
        return 0;
    case KS_PB_M_RAWJSON: {
        if (json_is_null(v))
            return 0;
        size_t n = 0;
        char *txt = ks_dump(v, false, &n);
        if (!txt)
            goto bad;
        wr_len(w, 1, txt, n);
        free(txt);
        return 0;
    }
    default:
        break;
    }
bad:
    *err = ks_printf("%s: cannot encode this JSON value", m->name);
    return -EINVAL;
}

/* One value of field f (scalar or message) with its key. */
static int encode_value(const struct ks_pb_field *f, uint32_t field, const json_t *v, struct wr *w,
                        char **err)
{
    switch (f->type) {
    case KS_PB_STRING:
        if (!json_is_string(v))
            goto bad;
        wr_len(w, field, json_string_value(v), json_string_length(v));
        return 0;
    case KS_PB_BYTES: {
        size_t n = 0;
        unsigned char *b = json_is_string(v) ? ks_base64_decode(json_string_value(v), &n) : NULL;
        if (!b)
            goto bad;
        wr_len(w, field, b, n);
        free(b);
        return 0;
    }
    case KS_PB_BOOL:
        if (!json_is_boolean(v))
            goto bad;
        wr_key(w, field, 0);
        wr_varint(w, json_is_true(v) ? 1 : 0);
        return 0;
    case KS_PB_INT32:
    case KS_PB_INT64:
    case KS_PB_UINT32:
    case KS_PB_UINT64:
        if (!json_is_integer(v))
            goto bad;
        wr_key(w, field, 0);
        wr_varint(w, (uint64_t)json_integer_value(v));
        return 0;
    case KS_PB_DOUBLE: {
        if (!json_is_number(v))
            goto bad;
        double d = json_number_value(v);
        uint64_t u;
        memcpy(&u, &d, sizeof(u));
        wr_key(w, field, 1);
        wr_fixed(w, u, 8);
        return 0;
    }
    case KS_PB_FLOAT: {
        if (!json_is_number(v))
            goto bad;
        float fl = (float)json_number_value(v);
        uint32_t u;
        memcpy(&u, &fl, sizeof(u));
        wr_key(w, field, 5);
        wr_fixed(w, u, 4);
        return 0;
    }
    case KS_PB_MESSAGE: {
        struct wr sub = {0};
        int rc = encode_msg(f->msg, v, &sub, err);
        if (rc == 0)
            wr_len(w, field, sub.p, sub.n);
        free(sub.p);
        return rc;
    }
    }
bad:
    *err = ks_printf("field %s: unexpected JSON type", f->name);
    return -EINVAL;
}

static int encode_msg(int idx, const json_t *v, struct wr *w, char **err)
{
    const struct ks_pb_msg *m = &ks_pb_msgs[idx];
    if (m->kind != KS_PB_M_PLAIN && m->kind != KS_PB_M_SLICE)
        return encode_special(m, v, w, err);
    if (m->kind == KS_PB_M_SLICE) {
        if (!json_is_array(v) || m->nfields == 0)
            goto bad;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            if (encode_value(&m->fields[0], m->fields[0].num, x, w, err) != 0)
                return -EINVAL;
        }
        return 0;
    }
    if (!json_is_object(v))
        goto bad;
    for (size_t i = 0; i < m->nfields; i++) {
        const struct ks_pb_field *f = &m->fields[i];
        const json_t *fv = f->flags & KS_PB_F_INLINE ? v : json_object_get(v, f->name);
        if (!fv || json_is_null(fv))
            continue;
        if (f->flags & KS_PB_F_MAP) {
            if (!json_is_object(fv))
                goto bad;
            const char *k;
            json_t *x;
            json_object_foreach((json_t *)fv, k, x)
            {
                struct wr e = {0};
                wr_len(&e, 1, k, strlen(k));
                int rc = json_is_null(x) ? 0 : encode_value(f, 2, x, &e, err);
                if (rc == 0)
                    wr_len(w, f->num, e.p, e.n);
                free(e.p);
                if (rc != 0)
                    return rc;
            }
        } else if (f->flags & KS_PB_F_REPEATED) {
            if (!json_is_array(fv))
                goto bad;
            size_t j;
            json_t *x;
            json_array_foreach(fv, j, x)
            {
                if (encode_value(f, f->num, x, w, err) != 0)
                    return -EINVAL;
            }
        } else if (encode_value(f, f->num, fv, w, err) != 0) {
            return -EINVAL;
        }
    }
    return 0;
bad:
    *err = ks_printf("%s: unexpected JSON type", m->name);
    return -EINVAL;
}

int ks_pb_encode(const json_t *obj, unsigned char **ret_buf, size_t *ret_len, char **ret_err)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    *ret_buf = NULL;
    *ret_len = 0;
    *ret_err = NULL;
    int idx = av && kind ? find_kind(av, kind) : -1;
    if (idx < 0) {
        *ret_err = ks_printf("no protobuf form for kind \"%s\" in \"%s\"", ks_nz(kind), ks_nz(av));
        return -ENOTSUP;
    }
    struct wr raw = {0}, tm = {0}, out = {0};
    int rc = encode_msg(idx, obj, &raw, ret_err);
    if (rc == 0) {
        wr_len(&tm, 1, av, strlen(av));
        wr_len(&tm, 2, kind, strlen(kind));
        wr_bytes(&out, magic, sizeof(magic));
        wr_len(&out, 1, tm.p, tm.n);
        wr_len(&out, 2, raw.p, raw.n);
        wr_len(&out, 3, "", 0);
        wr_len(&out, 4, "", 0);
        *ret_buf = out.p;
        *ret_len = out.n;
    } else {
        free(out.p);
    }
    free(raw.p);
    free(tm.p);
    return rc;
}

/* ---- answers ---------------------------------------------------------------------- */

bool ks_pb_accept_only(const char *accept)
{
    bool pb = false;
    const char *p = accept;
    while (p && *p) {
        while (*p == ' ' || *p == ',')
            p++;
        size_t n = strcspn(p, ",");
        size_t t = strcspn(p, ";,");
        while (t && p[t - 1] == ' ')
            t--;
        if ((t == 16 && strncmp(p, "application/json", 16) == 0) ||
            (t == 13 && strncmp(p, "application/*", 13) == 0) ||
            (t == 3 && strncmp(p, "*/*", 3) == 0))
            return false;
        /* "as=Table" / "as=PartialObjectMetadata" in protobuf are not served */
        const char *as = strstr(p, "as=");
        if (ks_pb_media_type(p) && !(as && as < p + n))
            pb = true;
        p += n;
    }
    return pb;
}

void ks_pb_reply(struct ks_reply *r)
{
    if (r->stream || !r->body || !r->content_type ||
        strncmp(r->content_type, "application/json", 16) != 0)
        return;
    json_t *v = json_loadb(r->body, r->len, 0, NULL);
    unsigned char *buf = NULL;
    size_t len = 0;
    char *err = NULL;
    int rc = v ? ks_pb_encode(v, &buf, &len, &err) : -ENOTSUP;
    json_decref(v);
    free(err);
    if (rc != 0) {
        /* apiserver: negotiation.NewNotAcceptableError */
        ks_reply_status(r, 406, "NotAcceptable",
                        "the server was unable to respond with a content type that the client "
                        "supports",
                        NULL);
        return;
    }
    free(r->body);
    r->body = (char *)buf;
    r->len = len;
    r->content_type = "application/vnd.kubernetes.protobuf";
}

/* ---- /openapi/v2 ------------------------------------------------------------ */

/*
 * /openapi/v2 in protobuf: the Swagger 2.0 document (ks_openapi_v2) as the
 * gnostic openapi_v2.Document message (github.com/google/gnostic-models,
 * openapiv2/OpenAPIv2.proto), the form kubectl asks for
 * (application/com.github.proto-openapi.spec.v2@v1.0+protobuf) when it
 * validates on the client: a List's items, or a kind whose /openapi/v3
 * document has no PATCH operation.
 *
 * Encoded: swagger, info (title, version), paths (empty, as in the JSON
 * document), definitions. A schema carries $ref, format, title, description, default,
 * required, enum, additionalProperties (schema or boolean), type, items,
 * allOf, properties and its x-* members as vendor extensions (NamedAny with
 * the value as YAML text: JSON is YAML). The other JSON Schema members
 * kubectl's validator does not read are left out.
 */
static void str_field(struct wr *w, unsigned num, const char *s)
{
    if (s)
        wr_len(w, num, s, strlen(s));
}

static void msg_field(struct wr *w, unsigned num, struct wr *m)
{
    wr_len(w, num, m->p, m->n);
    free(m->p);
    memset(m, 0, sizeof(*m));
}

/* Any{yaml}: a JSON value is YAML text. */
static void any_field(struct wr *w, unsigned num, const json_t *v)
{
    char *text = ks_dump(v, false, NULL);
    if (!text)
        abort();
    struct wr a = {0};
    str_field(&a, 2, text);
    free(text);
    msg_field(w, num, &a);
}

static void schema(struct wr *w, const json_t *s);

static void schema_field(struct wr *w, unsigned num, const json_t *s)
{
    struct wr m = {0};
    schema(&m, s);
    msg_field(w, num, &m);
}

/* NamedSchema{name, value} for each member of an object of schemas. */
static void named_schemas(struct wr *w, unsigned num, const json_t *obj)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        struct wr ns = {0};
        str_field(&ns, 1, k);
        schema_field(&ns, 2, v);
        msg_field(w, num, &ns);
    }
}

static void schema(struct wr *w, const json_t *s)
{
    if (!json_is_object(s))
        return;
    str_field(w, 1, json_string_value(json_object_get(s, "$ref")));
    str_field(w, 2, json_string_value(json_object_get(s, "format")));
    str_field(w, 3, json_string_value(json_object_get(s, "title")));
    str_field(w, 4, json_string_value(json_object_get(s, "description")));
    const json_t *dflt = json_object_get(s, "default");
    if (dflt)
        any_field(w, 5, dflt);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(s, "required"), i, v) str_field(w, 19, json_string_value(v));
    json_array_foreach(json_object_get(s, "enum"), i, v) any_field(w, 20, v);
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (json_is_object(ap) || json_is_boolean(ap)) {
        struct wr a = {0};
        if (json_is_object(ap)) {
            schema_field(&a, 1, ap);
        } else {
            wr_key(&a, 2, 0);
            wr_varint(&a, json_is_true(ap));
        }
        msg_field(w, 21, &a);
    }
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type)) {
        struct wr t = {0};
        str_field(&t, 1, json_string_value(type));
        msg_field(w, 22, &t);
    }
    const json_t *items = json_object_get(s, "items");
    if (json_is_object(items)) {
        struct wr it = {0};
        schema_field(&it, 1, items);
        msg_field(w, 23, &it);
    }
    json_array_foreach(json_object_get(s, "allOf"), i, v) schema_field(w, 24, v);
    const json_t *props = json_object_get(s, "properties");
    if (json_is_object(props)) {
        struct wr p = {0};
        named_schemas(&p, 1, props);
        msg_field(w, 25, &p);
    }
    const char *k;
    json_object_foreach((json_t *)s, k, v)
    {
        if (strncmp(k, "x-", 2) != 0)
            continue;
        struct wr na = {0};
        str_field(&na, 1, k);
        any_field(&na, 2, v);
        msg_field(w, 31, &na);
    }
}

int ks_openapi_v2_pb(const json_t *doc, unsigned char **ret_buf, size_t *ret_len)
{
    struct wr w = {0};
    str_field(&w, 1, json_string_value(json_object_get(doc, "swagger")));
    const json_t *info = json_object_get(doc, "info");
    struct wr m = {0};
    str_field(&m, 1, json_string_value(json_object_get(info, "title")));
    str_field(&m, 2, json_string_value(json_object_get(info, "version")));
    msg_field(&w, 2, &m);
    /* Paths: empty, as kubesim's Swagger document has none (kubectl reads
     * the PATCH operations of /openapi/v3) */
    msg_field(&w, 8, &m);
    named_schemas(&m, 1, json_object_get(doc, "definitions"));
    msg_field(&w, 9, &m);
    *ret_buf = w.p ? w.p : malloc(1);
    if (!*ret_buf)
        abort();
    *ret_len = w.n;
    return 0;
}
