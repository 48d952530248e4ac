// SPDX-License-Identifier: Apache-2.0
/*
 * The streaming ConversionReview (see kop/convstream.h).
 *
 * DESIGN. The envelope is walked by kop/jstream.h with the path
 * request.objects: the review's and the request's other members arrive as
 * validated values (on_member), each element of objects as a validated
 * value with its member spans (on_elem), one at a time, and is dropped
 * once handled. Objects that come before desiredAPIVersion are kept raw
 * (the fallback for an unusual member order) and converted when it comes.
 *
 * An element is converted as soon as it arrives: from the scanner's member
 * spans, only what conversion reads and writes is decoded into a small
 * skeleton (apiVersion, kind, the spec and status members of spec_keys and
 * status_keys, metadata.annotations when they may matter), converted by
 * kop/conversion.h (the same code the reconciler uses), checked (the
 * apiserver's metadata rules; labels and untouched annotations from their
 * bytes), and the element is written out member by member: converted
 * members in their original place, everything else copied from the input.
 * jansson allocations of one element come from the stream's arena, reset
 * after each element.
 *
 * Every decision that depends on the whole body (a syntax error at the end
 * wins over a Failure at the start) is taken in finish(): during the feed
 * only the first problem of each kind is remembered.
 */
#include "kop/convstream.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/arena.h"
#include "kop/conversion.h"
#include "kop/jscan.h"
#include "kop/jstream.h"
#include "kop/json.h"
#include "kop/metrics.h"
#include "kop/myresource.h"

#define CONV_V1 "apiextensions.k8s.io/v1"
#define CONV_V1BETA1 "apiextensions.k8s.io/v1beta1"
#define ARENA_CHUNK (64u * 1024u)

/* ---- metric ---------------------------------------------------------------- */

static pthread_once_t metric_once = PTHREAD_ONCE_INIT;
static struct kop_metric *violations_metric;

static void metric_init(void)
{
    struct kop_metric_family *f = kop_metrics_register(
        kop_metrics_global(), KOP_METRIC_COUNTER, "kop_conversion_reply_violations_total",
        "ConversionReview replies that broke a kube-apiserver rule (kop "
        "answered Failure instead).",
        NULL, NULL, 0);
    violations_metric = f ? kop_metric_child(f) : NULL;
}

/* ---- growable buffer ---------------------------------------------------------- */

struct buf {
    char *p;
    size_t len, cap;
};

static int buf_reserve(struct buf *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    if (more > SIZE_MAX / 2 - b->len)
        return -ENOMEM;
    /* doubling while small, then half again: a large reply should not
     * reserve twice its size */
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap += cap < (1u << 20) ? cap : cap / 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return -ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_put(struct buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    int r = buf_reserve(b, n);
    if (r < 0)
        return r;
    memcpy(b->p + b->len, p, n);
    b->len += n;
    return 0;
}

static int buf_str(struct buf *b, const char *s)
{
    return buf_put(b, s, strlen(s));
}

static void buf_free(struct buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static int put_escaped(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    int r = buf_reserve(b, n + 2);
    if (r < 0)
        return r;
    b->p[b->len++] = '"';
    size_t run = 0;
    for (size_t i = kop_jscan_noescape_run(s, n); i < n;
         i += 1 + kop_jscan_noescape_run(s + i + 1, n - i - 1)) {
        unsigned char c = (unsigned char)s[i];
        r = buf_put(b, s + run, i - run);
        if (r < 0)
            return r;
        run = i + 1;
        char e[6] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"':
            e[1] = '"';
            break;
        case '\\':
            e[1] = '\\';
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\r':
            e[1] = 'r';
            break;
        case '\t':
            e[1] = 't';
            break;
        case '\b':
            e[1] = 'b';
            break;
        case '\f':
            e[1] = 'f';
            break;
        default:
            e[1] = 'u';
            e[2] = '0';
            e[3] = '0';
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            el = 6;
            break;
        }
        r = buf_put(b, e, el);
        if (r < 0)
            return r;
    }
    r = buf_put(b, s + run, n - run);
    if (r == 0)
        r = buf_put(b, "\"", 1);
    return r;
}

/*
 * Dump a jansson value compactly, member order kept: what
 * json_dumps(JSON_COMPACT | JSON_ENCODE_ANY) writes (reals as "%.17g" with
 * ".0" added to integral ones), without its per-call set-up, which costs
 * more than the small values conversion produces.
 */
static int buf_json(struct buf *b, const json_t *v)
{
    char num[64];
    int r = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        bool first = true;
        r = buf_put(b, "{", 1);
        json_object_foreach((json_t *)v, k, x)
        {
            if (r == 0 && !first)
                r = buf_put(b, ",", 1);
            first = false;
            if (r == 0)
                r = put_escaped(b, k, strlen(k));
            if (r == 0)
                r = buf_put(b, ":", 1);
            if (r == 0)
                r = buf_json(b, x);
        }
        return r == 0 ? buf_put(b, "}", 1) : r;
    }
    case JSON_ARRAY: {
        r = buf_put(b, "[", 1);
        for (size_t i = 0; r == 0 && i < json_array_size(v); i++) {
            if (i)
                r = buf_put(b, ",", 1);
            if (r == 0)
                r = buf_json(b, json_array_get(v, i));
        }
        return r == 0 ? buf_put(b, "]", 1) : r;
    }
    case JSON_STRING:
        return put_escaped(b, json_string_value(v), json_string_length(v));
    case JSON_INTEGER: { /* what "%" JSON_INTEGER_FORMAT writes, without printf */
        json_int_t iv = json_integer_value(v);
        unsigned long long m = iv < 0 ? 0ull - (unsigned long long)iv : (unsigned long long)iv;
        size_t o = sizeof(num);
        do {
            num[--o] = (char)('0' + m % 10);
            m /= 10;
        } while (m);
        if (iv < 0)
            num[--o] = '-';
        return buf_put(b, num + o, sizeof(num) - o);
    }
    case JSON_REAL: {
        int l = snprintf(num, sizeof(num), "%.17g", json_real_value(v));
        if (l > 0 && (size_t)l < sizeof(num) - 2 && !strpbrk(num, ".eE")) {
            num[l] = '.';
            num[l + 1] = '0';
            num[l + 2] = '\0';
        }
        return buf_str(b, num);
    }
    case JSON_TRUE:
        return buf_put(b, "true", 4);
    case JSON_FALSE:
        return buf_put(b, "false", 5);
    case JSON_NULL:
        return buf_put(b, "null", 4);
    }
    return -EINVAL;
}

/* ---- the stream ------------------------------------------------------------------ */

enum key_id { K_OTHER, K_APIVERSION, K_KIND, K_REQUEST, K_UID, K_DESIRED, K_OBJECTS };

struct kop_convstream {
    struct kop_convert_options opts;
    bool ct_present, ct_ok;
    char ct_msg[300];
    struct kop_jstream *js; /* the envelope, request.objects streamed */
    size_t fed;             /* body bytes seen (also those not streamed: 415) */
    struct kop_jscan *scan; /* an element kept for desiredAPIVersion, scanned again */
    struct kop_arena *arena;

    /* envelope */
    bool have_apiversion, apiversion_ok, have_kind, kind_ok;
    const char *review_version;  /* CONV_V1 / CONV_V1BETA1 (static), NULL: unsupported or absent */
    char *apiversion_s, *kind_s; /* decoded, for messages */
    bool have_request;           /* request was there (request_ok: kop_jstream_entered(js, 2)) */
    bool have_uid;
    char *uid;          /* decoded uid, "" when absent or not a string */
    struct buf uid_raw; /* the uid token as it came, when a string */
    bool have_desired;
    /* uid or desiredAPIVersion given as a number, list, object or boolean:
     * what a typed decoder (the apiserver's, controller-runtime's) refuses */
    bool uid_not_string, desired_not_string;
    char *desired_s;
    enum kop_myresource_version desired;
    bool objects_not_list;

    /* objects */
    size_t n_objects;
    char fail[512];        /* first object problem (Failure), "" when none */
    unsigned violations;   /* self-check violations */
    char check_msg[400];   /* first violation */
    struct buf out;        /* the reply so far */
    bool prefix_versioned; /* the prefix named apiVersion and kind */
    size_t n_out;          /* objects written */
    struct buf pending;    /* elements waiting for desiredAPIVersion */
    size_t *pending_len;
    size_t n_pending, cap_pending;
};

static int on_member(void *ud, unsigned level, const char *key, const char *p, size_t n);
static int on_elem(void *ud, size_t idx, const char *p, size_t n, const struct kop_jscan *scan);

int kop_convstream_new(const char *content_type, const struct kop_convert_options *opts,
                       struct kop_convstream **ret)
{
    pthread_once(&metric_once, metric_init);
    struct kop_convstream *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    const struct kop_jstream_options jo = {
        .path = {"request", "objects", NULL},
        .member_fn = on_member,
        .elem_fn = on_elem,
        .ud = cs,
        .elem_scan_flags = KOP_JSCAN_MEMBERS,
        .max_value = KOP_CONVSTREAM_MAX_OBJECT,
    };
    cs->scan = kop_jscan_new();
    cs->arena = kop_arena_new(ARENA_CHUNK);
    if (!cs->scan || !cs->arena || kop_jstream_new(&jo, &cs->js) < 0) {
        kop_convstream_free(cs);
        return -ENOMEM;
    }
    if (opts)
        cs->opts = *opts;
    cs->ct_present = content_type != NULL;
    cs->ct_ok = kop_review_content_type_ok(content_type);
    snprintf(cs->ct_msg, sizeof(cs->ct_msg), "contentType=%.200s, expected application/json",
             content_type ? content_type : "");
    cs->desired = KOP_MYRESOURCE_VERSION_UNKNOWN;
    *ret = cs;
    return 0;
}

void kop_convstream_free(struct kop_convstream *cs)
{
    if (!cs)
        return;
    kop_jstream_free(cs->js);
    buf_free(&cs->out);
    buf_free(&cs->pending);
    buf_free(&cs->uid_raw);
    free(cs->pending_len);
    free(cs->apiversion_s);
    free(cs->kind_s);
    free(cs->uid);
    free(cs->desired_s);
    kop_jscan_free(cs->scan);
    kop_arena_free(cs->arena);
    free(cs);
}

int kop_convstream_expect(struct kop_convstream *cs, size_t body_len)
{
    /* v1 -> v2 grows an object by about a tenth; other replies are smaller.
     * Exactly that, not rounded up by buf_reserve's doubling: rounded, a
     * 100-object reply (190 KB) would take 256 KiB, over the mmap threshold
     * main() sets, and every such review would map its reply, fault its
     * pages in and unmap it. */
    if (cs->out.cap || body_len > SIZE_MAX / 2)
        return 0;
    size_t cap = body_len + body_len / 8 + 4096;
    char *p = malloc(cap);
    if (!p)
        return -ENOMEM;
    cs->out.p = p;
    cs->out.cap = cap;
    return 0;
}

size_t kop_convstream_memory(const struct kop_convstream *cs)
{
    return kop_jstream_memory(cs->js) + cs->out.cap + cs->pending.cap + cs->uid_raw.cap +
           cs->cap_pending * sizeof(size_t);
}

__attribute__((format(printf, 2, 3))) static void object_failure(struct kop_convstream *cs,
                                                                 const char *fmt, ...)
{
    if (cs->fail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    kop_vmsgf(cs->fail, sizeof(cs->fail), fmt, ap);
    va_end(ap);
}

/* The string value of a scanned token, or NULL when it is not a string. */
static char *token_string(const char *p, size_t n)
{
    char *s = NULL;
    if (n < 2 || p[0] != '"' || kop_jscan_string(p, n, &s, NULL) < 0)
        return NULL;
    return s;
}

/* A scanned token that a Go string field takes (null leaves it empty). */
static bool is_string_or_null(const char *p, size_t n)
{
    return (n >= 2 && p[0] == '"') || (n == 4 && memcmp(p, "null", 4) == 0);
}

/* ---- converting one element ------------------------------------------------------ */

static const struct kop_jscan_member *find_member(const struct kop_jscan_member *m, size_t n,
                                                  unsigned level, size_t parent, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < n; i++) {
        if (m[i].level == level && (level == 1 || m[i].parent == parent) && m[i].key_len == kl &&
            memcmp(m[i].key, key, kl) == 0)
            return &m[i];
    }
    return NULL;
}

static bool key_is(const struct kop_jscan_member *m, const char *key)
{
    size_t kl = strlen(key);
    return m->key_len == kl && memcmp(m->key, key, kl) == 0;
}

/* One element being converted: its bytes and the members the scanner found. */
struct elem {
    const char *p;
    size_t n;
    const struct kop_jscan_member *mem;
    size_t n_mem;
    const struct kop_jscan_member *av, *kind, *meta, *spec, *status, *labels, *ann;
};

/* The members of spec and status that conversion reads or writes (see
 * kop/conversion.h); the others are copied as they came. */
static const char *const spec_keys[] = {"image",   "port",   "serviceType", "ports",
                                        "service", "paused", NULL};
static const char *const status_keys[] = {"replicas", "readyReplicas", NULL};

static int key_index(const struct kop_jscan_member *m, const char *const *keys)
{
    for (int i = 0; keys[i]; i++) {
        if (key_is(m, keys[i]))
            return i;
    }
    return -1;
}

static bool is_object_value(const struct elem *e, const struct kop_jscan_member *m)
{
    return m && e->p[m->val_off] == '{';
}

/* A span of an object as jansson values. Bounded like an AdmissionReview:
 * an object the apiserver stores (schema-checked, at most 16 ports) is far
 * below it; a crafted one past it fails (-E2BIG) instead of costing many
 * times its size (docs/performance.md §4). */
static json_t *decode_span(const char *p, const struct kop_jscan_member *m, int *ret_err)
{
    return kop_jscan_decode_bounded(p + m->val_off, m->val_len, 0, KOP_CONVSTREAM_MAX_TREE,
                                    ret_err);
}

static int set_decoded(json_t *obj, const char *key, const char *p,
                       const struct kop_jscan_member *m)
{
    if (!m)
        return 0;
    int err = -ENOMEM;
    json_t *v = decode_span(p, m, &err);
    if (!v)
        return err;
    return json_object_set_new(obj, key, v) < 0 ? -ENOMEM : 0;
}

/* Set obj[key] to the members of the object-valued m named in keys, decoded. */
static int set_partial(json_t *obj, const char *key, const struct elem *e,
                       const struct kop_jscan_member *m, const char *const *keys)
{
    if (!is_object_value(e, m))
        return 0; /* conversion leaves a non-object alone */
    json_t *o = json_object();
    if (!o || json_object_set_new(obj, key, o) < 0)
        return -ENOMEM;
    size_t idx = (size_t)(m - e->mem);
    for (size_t j = idx + 1; j < e->n_mem && e->mem[j].level == 2; j++) {
        int ki = key_index(&e->mem[j], keys);
        int r = ki >= 0 ? set_decoded(o, keys[ki], e->p, &e->mem[j]) : 0;
        if (r < 0)
            return r;
    }
    return 0;
}

/* Separator between members written by emit_*. */
static int sep(struct buf *b, bool *first)
{
    if (*first) {
        *first = false;
        return 0;
    }
    return buf_put(b, ",", 1);
}

/* Write "key":value: the key token as it came, then v dumped. */
static int emit_member(struct buf *b, const char *p, const struct kop_jscan_member *m,
                       const json_t *v)
{
    size_t key_end = m->key_off + 1;
    while (p[key_end] != '"') { /* the key token was validated: find its closing quote */
        if (p[key_end] == '\\')
            key_end++;
        key_end++;
    }
    key_end++;
    int r = buf_put(b, p + m->key_off, key_end - m->key_off);
    if (r == 0)
        r = buf_put(b, ":", 1);
    if (r == 0)
        r = buf_json(b, v);
    return r;
}

static int emit_raw_member(struct buf *b, const char *p, const struct kop_jscan_member *m)
{
    return buf_put(b, p + m->key_off, m->val_off + m->val_len - m->key_off);
}

static int emit_new_member(struct buf *b, bool *first, const char *key, const json_t *v)
{
    int r = sep(b, first);
    if (r == 0)
        r = buf_put(b, "\"", 1);
    if (r == 0)
        r = buf_str(b, key);
    if (r == 0)
        r = buf_put(b, "\":", 2);
    if (r == 0)
        r = buf_json(b, v);
    return r;
}

/*
 * Write the object-valued member m: its members named in keys from the
 * converted v (where v still has them; members v gained come last), every
 * other member as it came.
 */
static int emit_partial(struct buf *b, const struct elem *e, const struct kop_jscan_member *m,
                        const json_t *v, const char *const *keys)
{
    unsigned done = 0;
    bool first = true;
    size_t idx = (size_t)(m - e->mem);
    int r = buf_put(b, e->p + m->key_off, m->val_off - m->key_off);
    if (r == 0)
        r = buf_put(b, "{", 1);
    for (size_t j = idx + 1; r == 0 && j < e->n_mem && e->mem[j].level == 2; j++) {
        const struct kop_jscan_member *mm = &e->mem[j];
        int ki = key_index(mm, keys);
        if (ki < 0) {
            r = sep(b, &first);
            if (r == 0)
                r = emit_raw_member(b, e->p, mm);
            continue;
        }
        done |= 1u << ki;
        const json_t *x = json_object_get(v, keys[ki]);
        if (!x)
            continue;
        r = sep(b, &first);
        if (r == 0)
            r = emit_member(b, e->p, mm, x);
    }
    for (int ki = 0; r == 0 && keys[ki]; ki++) {
        const json_t *x = json_object_get(v, keys[ki]);
        if (!(done & (1u << ki)) && x)
            r = emit_new_member(b, &first, keys[ki], x);
    }
    if (r == 0)
        r = buf_put(b, "}", 1);
    return r;
}

static const char *const meta_keys[] = {"annotations", NULL};

/* Write the converted element: members in their original order. */
static int emit_converted(struct buf *b, const struct elem *e, const json_t *obj, bool ann_decoded)
{
    const json_t *meta = json_object_get(obj, "metadata");
    bool first = true;
    int r = buf_put(b, "{", 1);
    for (size_t i = 0; r == 0 && i < e->n_mem; i++) {
        const struct kop_jscan_member *m = &e->mem[i];
        if (m->level != 1)
            continue;
        r = sep(b, &first);
        if (r < 0)
            break;
        if (m == e->av)
            r = emit_member(b, e->p, m, json_object_get(obj, "apiVersion"));
        else if (m == e->spec && is_object_value(e, m))
            r = emit_partial(b, e, m, json_object_get(obj, "spec"), spec_keys);
        else if (m == e->status && is_object_value(e, m))
            r = emit_partial(b, e, m, json_object_get(obj, "status"), status_keys);
        else if (m == e->meta && is_object_value(e, m) && ann_decoded)
            r = emit_partial(b, e, m, meta, meta_keys);
        else if (m == e->meta && is_object_value(e, m) && json_object_get(meta, "annotations"))
            r = emit_partial(b, e, m, meta, meta_keys); /* conversion added annotations */
        else
            r = emit_raw_member(b, e->p, m);
    }
    if (r == 0 && !e->meta && meta) /* conversion created metadata for the extras */
        r = emit_new_member(b, &first, "metadata", meta);
    if (r == 0)
        r = buf_put(b, "}", 1);
    return r;
}

/* Walking JSON the element's scan already validated: no checks. */

static size_t past_ws(const char *v, size_t n, size_t i)
{
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == '\n' || v[i] == '\r'))
        i++;
    return i;
}

/*
 * The metadata rules (kop_review_check_object_meta) on a labels or
 * annotations map that is copied as it came: checked from its bytes, which
 * the element's scan validated (so they are walked, not scanned again).
 */
static int check_map_raw(const char *p, const struct kop_jscan_member *m, bool label, char *msg,
                         size_t size)
{
    const char *what = label ? "labels" : "annotations";
    if (!m)
        return 0;
    const char *v = p + m->val_off;
    size_t n = m->val_len;
    if (n == 4 && memcmp(v, "null", 4) == 0)
        return 0;
    if (v[0] != '{') {
        snprintf(msg, size, "metadata.%s: must be a map of strings", what);
        return -EINVAL;
    }
    size_t total = 0, i = past_ws(v, n, 1);
    int r = 0;
    while (r == 0 && v[i] == '"') {
        size_t ks = i, ke = kop_jscan_past_string(v, n, i);
        i = past_ws(v, n, past_ws(v, n, ke) + 1); /* past ':' */
        size_t vs = i;
        i = kop_jscan_past_value(v, n, i);
        size_t ve = i;
        i = past_ws(v, n, i);
        if (v[i] == ',')
            i = past_ws(v, n, i + 1);

        char kbuf[384], *key = kbuf, *kdec = NULL, *dec = NULL;
        size_t klen = ke - ks - 2;
        if (memchr(v + ks + 1, '\\', klen)) {
            r = kop_jscan_string(v + ks, ke - ks, &kdec, &klen);
            if (r < 0)
                return r;
            key = kdec;
        } else {
            if (klen >= sizeof(kbuf)) {
                key = kdec = malloc(klen + 1);
                if (!key)
                    return -ENOMEM;
            }
            memcpy(key, v + ks + 1, klen);
            key[klen] = '\0';
        }
        const char *val = NULL;
        size_t vlen = 0;
        if (v[vs] == '"') {
            val = v + vs + 1;
            vlen = ve - vs - 2;
            if (memchr(val, '\\', vlen)) {
                r = kop_jscan_string(v + vs, ve - vs, &dec, &vlen);
                val = dec;
            }
        }
        if (r == 0 && kop_review_check_meta_entry(label, key, val, vlen, msg, size) < 0)
            r = -EINVAL;
        total += klen + vlen;
        free(dec);
        free(kdec);
    }
    if (r == 0 && !label && total > KOP_REVIEW_ANNOTATIONS_MAX) {
        snprintf(msg, size, "metadata.annotations: Too long: must have at most %d bytes",
                 KOP_REVIEW_ANNOTATIONS_MAX);
        r = -EINVAL;
    }
    return r;
}

/* The apiserver's checks of one converted object (kop_review_check_object_meta
 * and the apiVersion), counted in cs->violations. Returns 0 or -ENOMEM. */
static int self_check(struct kop_convstream *cs, size_t idx, const struct elem *e,
                      const json_t *obj, bool ann_decoded)
{
    char m[256] = "";
    int r = 0;
    const char *got = obj ? json_string_value(json_object_get(obj, "apiVersion")) : cs->desired_s;
    if (!got || strcmp(got, cs->desired_s) != 0) {
        if (cs->violations++ == 0)
            snprintf(cs->check_msg, sizeof(cs->check_msg),
                     "invalid converted object at index %zu: expected apiVersion %s, got %s", idx,
                     cs->desired_s, got ? got : "");
    }
    const json_t *meta = obj ? json_object_get(obj, "metadata") : NULL;
    if (!e->meta && !meta) {
        snprintf(m, sizeof(m), "converted object has no metadata");
        r = -EINVAL;
    } else if (e->meta && !is_object_value(e, e->meta)) {
        snprintf(m, sizeof(m), "invalid metadata of type %s",
                 e->p[e->meta->val_off] == '[' ? "array" : "non-object");
        r = -EINVAL;
    } else {
        r = check_map_raw(e->p, e->labels, true, m, sizeof(m));
        if (r == 0 && ann_decoded) {
            json_t *probe = json_pack("{s:{s:O?}}", "metadata", "annotations",
                                      json_object_get(meta, "annotations"));
            if (!probe)
                return -ENOMEM;
            if (kop_review_check_object_meta(NULL, probe, m, sizeof(m)) < 0)
                r = -EINVAL;
            json_decref(probe);
        } else if (r == 0 && meta && json_object_get(meta, "annotations") && !e->ann) {
            /* annotations created by conversion: built by kop, checked anyway */
            json_t *probe = json_pack("{s:O}", "metadata", meta);
            if (!probe)
                return -ENOMEM;
            if (kop_review_check_object_meta(NULL, probe, m, sizeof(m)) < 0)
                r = -EINVAL;
            json_decref(probe);
        } else if (r == 0) {
            r = check_map_raw(e->p, e->ann, false, m, sizeof(m));
        }
    }
    if (r == -ENOMEM)
        return r;
    if (r < 0 && cs->violations++ == 0)
        snprintf(cs->check_msg, sizeof(cs->check_msg), "invalid converted object at index %zu: %s",
                 idx, m);
    return 0;
}

static int write_prefix(struct kop_convstream *cs)
{
    if (cs->n_out++ > 0)
        return buf_put(&cs->out, ",", 1);
    if (cs->have_apiversion && cs->review_version) {
        cs->prefix_versioned = true;
        int r = buf_str(&cs->out, "{\"apiVersion\":\"");
        if (r == 0)
            r = buf_str(&cs->out, cs->review_version);
        if (r == 0)
            r = buf_str(&cs->out, "\",\"kind\":\"ConversionReview\",\"response\":{"
                                  "\"convertedObjects\":[");
        return r;
    }
    return buf_str(&cs->out, "{\"response\":{\"convertedObjects\":[");
}

/* The members of an element that conversion and the checks look at. */
static void locate_members(struct elem *e)
{
    e->av = find_member(e->mem, e->n_mem, 1, 0, "apiVersion");
    e->kind = find_member(e->mem, e->n_mem, 1, 0, "kind");
    e->meta = find_member(e->mem, e->n_mem, 1, 0, "metadata");
    e->spec = find_member(e->mem, e->n_mem, 1, 0, "spec");
    e->status = find_member(e->mem, e->n_mem, 1, 0, "status");
    if (is_object_value(e, e->meta)) {
        size_t mi = (size_t)(e->meta - e->mem);
        e->labels = find_member(e->mem, e->n_mem, 2, mi, "labels");
        e->ann = find_member(e->mem, e->n_mem, 2, mi, "annotations");
    }
}

/* Fill obj, the skeleton, from the element's bytes; *ret_ann_decoded says
 * whether metadata.annotations went in. Returns 0, -ENOMEM, or the errors
 * of set_partial() and set_decoded(). */
static int fill_skeleton(const struct kop_convstream *cs, const struct elem *e, json_t *obj,
                         const char *av, const char *kind, bool *ret_ann_decoded)
{
    const char *p = e->p;
    if (json_object_set_new(obj, "apiVersion", json_string(av)) < 0 ||
        json_object_set_new(obj, "kind", json_string(kind)) < 0)
        return -ENOMEM;
    int r = set_partial(obj, "spec", e, e->spec, spec_keys);
    if (r == 0)
        r = set_partial(obj, "status", e, e->status, status_keys);
    if (r == 0 && is_object_value(e, e->meta)) {
        json_t *meta = json_object();
        if (!meta || json_object_set_new(obj, "metadata", meta) < 0)
            r = -ENOMEM;
        const char *as = e->ann ? p + e->ann->val_off : NULL;
        if (r == 0 && e->ann &&
            (cs->desired == KOP_MYRESOURCE_VERSION_V1 ||
             memmem(as, e->ann->val_len, "v2-extras", 9) || memchr(as, '\\', e->ann->val_len))) {
            *ret_ann_decoded = true;
            r = set_decoded(meta, "annotations", p, e->ann);
        }
    } else if (r == 0 && e->meta) {
        r = set_decoded(obj, "metadata", p, e->meta);
    }
    return r;
}

/*
 * Convert one element p[0..n) (validated by the scanner, members recorded)
 * and write it out. Returns 0 or -ENOMEM; problems with the object are
 * remembered in cs->fail / cs->violations.
 */
static int convert_elem(struct kop_convstream *cs, const struct kop_jscan *scan, size_t idx,
                        const char *p, size_t n)
{
    struct elem e = {.p = p, .n = n};
    char *av = NULL, *kind = NULL;
    json_t *obj = NULL;
    struct kop_arena *prev = NULL;
    bool bound = false, ann_decoded = false;
    int r = 0;

    e.mem = kop_jscan_members(scan, &e.n_mem);
    if (n > 0 && p[0] == '{') {
        locate_members(&e);
        if (e.av)
            av = token_string(p + e.av->val_off, e.av->val_len);
        if (e.kind)
            kind = token_string(p + e.kind->val_off, e.kind->val_len);
    }
    enum kop_myresource_version have = KOP_MYRESOURCE_VERSION_UNKNOWN;
    if (kind && strcmp(kind, KOP_MYRESOURCE_KIND) == 0)
        have = kop_myresource_version_parse(av);
    if (have == KOP_MYRESOURCE_VERSION_UNKNOWN) {
        object_failure(cs,
                       "objects[%zu]: unsupported %.100s, Kind=%.100s: this webhook converts %s, "
                       "Kind=%s and %s",
                       idx, av ? av : "", kind ? kind : "", KOP_MYRESOURCE_V1, KOP_MYRESOURCE_KIND,
                       KOP_MYRESOURCE_V2);
        goto out;
    }
    if (cs->fail[0])
        goto out; /* the reply is a Failure: no need to convert */
    if (have == cs->desired) {
        /* returned unchanged, byte for byte */
        if (!cs->opts.skip_self_check)
            r = self_check(cs, idx, &e, NULL, false);
        if (r == 0 && cs->violations == 0)
            r = write_prefix(cs);
        if (r == 0 && cs->violations == 0)
            r = buf_put(&cs->out, p, n);
        goto out;
    }

    /* The skeleton: only what conversion reads and changes. Annotations
     * matter to conversion only through the v2-extras annotation: to v2
     * they are decoded only when that key may be among them (a backslash
     * may spell it with escapes). */
    prev = kop_arena_json_bind(cs->arena);
    bound = true;
    obj = json_object();
    if (!obj) {
        r = -ENOMEM;
        goto out;
    }
    r = fill_skeleton(cs, &e, obj, av, kind, &ann_decoded);
    if (r == 0)
        r = kop_conversion_convert(obj, cs->desired);
    if (r == 0 && !cs->opts.skip_self_check)
        r = self_check(cs, idx, &e, obj, ann_decoded);
    if (r == 0 && cs->violations == 0) {
        r = write_prefix(cs);
        if (r == 0)
            r = emit_converted(&cs->out, &e, obj, ann_decoded);
    }
    if (r == -E2BIG) {
        /* not an object the apiserver stores: answered, never decoded */
        object_failure(cs,
                       "objects[%zu]: too large to convert: its spec, status or annotations would "
                       "take more than %d MiB of memory",
                       idx, KOP_CONVSTREAM_MAX_TREE >> 20);
        r = 0;
    }
    if (r == -EINVAL)
        r = -ENOMEM; /* only allocation can fail after the version check */
out:
    json_decref(obj);
    if (bound) {
        kop_arena_json_bind(prev);
        kop_arena_reset(cs->arena);
    }
    free(av);
    free(kind);
    return r;
}

static int keep_pending(struct kop_convstream *cs, const char *p, size_t n)
{
    if (cs->n_pending == cs->cap_pending) {
        size_t cap = cs->cap_pending ? cs->cap_pending * 2 : 64;
        size_t *l = realloc(cs->pending_len, cap * sizeof(*l));
        if (!l)
            return -ENOMEM;
        cs->pending_len = l;
        cs->cap_pending = cap;
    }
    int r = buf_put(&cs->pending, p, n);
    if (r == 0)
        cs->pending_len[cs->n_pending++] = n;
    return r;
}

/* desiredAPIVersion is known now: convert the objects that came before it. */
static int flush_pending(struct kop_convstream *cs)
{
    size_t off = 0;
    int r = 0;
    for (size_t i = 0; r == 0 && i < cs->n_pending; i++) {
        const char *p = cs->pending.p + off;
        size_t n = cs->pending_len[i];
        off += n;
        r = kop_jscan_value(cs->scan, p, n, 3, KOP_JSCAN_MEMBERS);
        if (r == 0)
            r = convert_elem(cs, cs->scan, i, p, n);
        else if (r == -EINVAL)
            r = -ENOMEM; /* it was valid when it was captured */
    }
    buf_free(&cs->pending);
    free(cs->pending_len);
    cs->pending_len = NULL;
    cs->n_pending = cs->cap_pending = 0;
    return r;
}

/* ---- the envelope's members and the objects -------------------------------------- */

static enum key_id key_of(unsigned level, const char *k)
{
    if (level == 1) {
        if (strcmp(k, "apiVersion") == 0)
            return K_APIVERSION;
        if (strcmp(k, "kind") == 0)
            return K_KIND;
        if (strcmp(k, "request") == 0)
            return K_REQUEST;
    } else if (level == 2) {
        if (strcmp(k, "uid") == 0)
            return K_UID;
        if (strcmp(k, "desiredAPIVersion") == 0)
            return K_DESIRED;
        if (strcmp(k, "objects") == 0)
            return K_OBJECTS;
    }
    return K_OTHER;
}

/* A member of the review or of its request (validated bytes). */
static int on_member(void *ud, unsigned level, const char *key, const char *p, size_t n)
{
    struct kop_convstream *cs = ud;
    char *s = NULL;
    switch (key_of(level, key)) {
    case K_APIVERSION:
        cs->have_apiversion = true;
        s = token_string(p, n);
        if (s && strcmp(s, CONV_V1) == 0)
            cs->review_version = CONV_V1;
        else if (s && strcmp(s, CONV_V1BETA1) == 0)
            cs->review_version = CONV_V1BETA1;
        cs->apiversion_s = s;
        break;
    case K_KIND:
        cs->have_kind = true;
        cs->kind_s = token_string(p, n);
        cs->kind_ok = cs->kind_s && strcmp(cs->kind_s, "ConversionReview") == 0;
        break;
    case K_REQUEST:
        cs->have_request = true; /* not an object: an object is descended into */
        break;
    case K_UID:
        cs->have_uid = true;
        cs->uid_not_string = !is_string_or_null(p, n);
        s = token_string(p, n);
        if (s) {
            cs->uid = s;
            if (buf_put(&cs->uid_raw, p, n) < 0)
                return -ENOMEM;
        }
        break;
    case K_DESIRED:
        cs->have_desired = true;
        cs->desired_not_string = !is_string_or_null(p, n);
        s = token_string(p, n);
        cs->desired_s = s ? s : strdup("");
        if (!cs->desired_s)
            return -ENOMEM;
        cs->desired = kop_myresource_version_parse(cs->desired_s);
        if (cs->desired != KOP_MYRESOURCE_VERSION_UNKNOWN)
            return flush_pending(cs);
        break;
    case K_OBJECTS:
        if (!(n == 4 && memcmp(p, "null", 4) == 0))
            cs->objects_not_list = true; /* an array is descended into */
        break;
    case K_OTHER:
        break;
    }
    return 0;
}

/* The next element of request.objects, validated, members recorded. */
static int on_elem(void *ud, size_t idx, const char *p, size_t n, const struct kop_jscan *scan)
{
    struct kop_convstream *cs = ud;
    cs->n_objects = idx + 1;
    if (!cs->have_desired)
        return keep_pending(cs, p, n);
    if (cs->desired == KOP_MYRESOURCE_VERSION_UNKNOWN)
        return 0; /* the reply is a Failure whatever the objects are */
    return convert_elem(cs, scan, idx, p, n);
}

int kop_convstream_feed(struct kop_convstream *cs, const char *p, size_t n)
{
    cs->fed += n;
    if (!cs->ct_ok)
        return 0;
    return kop_jstream_feed(cs->js, p, n);
}

/* ---- the reply ------------------------------------------------------------------------ */

/* Copy for logs, cut at a character boundary. */
static void copy_cut(char *dst, size_t size, const char *src)
{
    kop_msgf(dst, size, "%s", src ? src : "");
}

static int failure(struct kop_review_result *r, int status, const char *version, const char *uid,
                   const char *message)
{
    copy_cut(r->message, sizeof(r->message), message);
    r->success = false;
    json_t *result = json_pack("{s:{}, s:s, s:o}", "metadata", "status", "Failure", "message",
                               kop_review_message_string(message));
    if (result && status && json_object_set_new(result, "code", json_integer(status)) < 0) {
        json_decref(result);
        result = NULL;
    }
    if (!result)
        return -ENOMEM;
    return kop_review_finish(r, status,
                             json_pack("{s:s, s:s, s:{s:s, s:o}}", "apiVersion",
                                       version ? version : CONV_V1, "kind", "ConversionReview",
                                       "response", "uid", uid ? uid : "", "result", result));
}

static int success(struct kop_convstream *cs, struct kop_review_result *r)
{
    struct buf *b = &cs->out;
    int rc = 0;
    if (cs->n_out == 0) {
        cs->n_out = 0;
        rc = write_prefix(cs);
    }
    if (rc == 0)
        rc = buf_str(b, "],\"uid\":");
    if (rc == 0)
        rc = cs->uid_raw.len ? buf_put(b, cs->uid_raw.p, cs->uid_raw.len) : buf_str(b, "\"\"");
    if (rc == 0)
        rc = buf_str(b, ",\"result\":{\"metadata\":{},\"status\":\"Success\"}}");
    if (rc == 0 && !cs->prefix_versioned) {
        rc = buf_str(b, ",\"kind\":\"ConversionReview\",\"apiVersion\":\"");
        if (rc == 0)
            rc = buf_str(b, cs->review_version ? cs->review_version : CONV_V1);
        if (rc == 0)
            rc = buf_str(b, "\"");
    }
    if (rc == 0)
        rc = buf_put(b, "}\n", 3); /* with the NUL */
    if (rc < 0)
        return rc;
    r->http_status = 200;
    r->success = true;
    r->body_len = b->len - 1;
    /* give back what doubling reserved beyond the reply */
    char *shrunk = realloc(b->p, b->len);
    r->body = shrunk ? shrunk : b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return 0;
}

int kop_convstream_finish(struct kop_convstream *cs, struct kop_review_result *ret)
{
    struct kop_review_result r;
    char msg[700];
    int rc;
    memset(&r, 0, sizeof(r));
    r.type = KOP_REVIEW_CONVERSION;

    /* the order of the checks is the one answered before streaming */
    if (cs->ct_present && !cs->ct_ok) {
        rc = failure(&r, 415, NULL, "", cs->ct_msg);
        goto out;
    }
    if (cs->fed == 0) {
        rc = failure(&r, 400, NULL, "", "request body is empty");
        goto out;
    }
    if (!cs->ct_ok) {
        rc = failure(&r, 415, NULL, "", cs->ct_msg);
        goto out;
    }
    rc = kop_jstream_finish(cs->js);
    if (rc == -E2BIG) {
        snprintf(msg, sizeof(msg),
                 "%s: no object the apiserver stores is that large (it limits a request to "
                 "3 MiB)",
                 kop_jstream_error(cs->js));
        rc = failure(&r, 413, NULL, "", msg);
        goto out;
    }
    if (rc == -EINVAL) {
        snprintf(msg, sizeof(msg), "couldn't get version/kind; json parse error: %s",
                 kop_jstream_error(cs->js));
        rc = failure(&r, 400, NULL, "", msg);
        goto out;
    }
    if (rc < 0)
        return rc;
    const char *version = cs->have_apiversion ? cs->review_version : CONV_V1;
    if (!version || (cs->have_kind && !cs->kind_ok)) {
        snprintf(msg, sizeof(msg),
                 "unsupported review %.200s, Kind=%.200s; expected %s or %s, "
                 "Kind=ConversionReview",
                 cs->apiversion_s ? cs->apiversion_s : "", cs->kind_s ? cs->kind_s : "", CONV_V1,
                 CONV_V1BETA1);
        rc = failure(&r, 400, NULL, "", msg);
        goto out;
    }
    const char *uid = cs->uid ? cs->uid : "";
    copy_cut(r.uid, sizeof(r.uid), uid);
    r.n_objects = cs->objects_not_list ? 0 : cs->n_objects;
    if (!kop_jstream_entered(cs->js, 2)) {
        copy_cut(r.uid, sizeof(r.uid), "");
        rc = failure(&r, 400, version, "", "ConversionReview has no request");
        goto out;
    }
    if (cs->uid_not_string || cs->desired_not_string) {
        copy_cut(r.uid, sizeof(r.uid), "");
        rc = failure(&r, 400, version, "",
                     cs->uid_not_string ? "request.uid must be a string"
                                        : "request.desiredAPIVersion must be a string");
        goto out;
    }
    if (cs->desired == KOP_MYRESOURCE_VERSION_UNKNOWN) {
        snprintf(msg, sizeof(msg),
                 "unsupported desiredAPIVersion \"%.200s\": this webhook converts %s and %s",
                 cs->desired_s ? cs->desired_s : "", KOP_MYRESOURCE_V1, KOP_MYRESOURCE_V2);
        rc = failure(&r, 200, version, uid, msg);
        goto out;
    }
    if (cs->objects_not_list) {
        rc = failure(&r, 200, version, uid, "request.objects must be a list");
        goto out;
    }
    if (cs->fail[0]) {
        rc = failure(&r, 200, version, uid, cs->fail);
        goto out;
    }
    if (cs->violations > 0) {
        kop_counter_add(violations_metric, cs->violations);
        r.violations = cs->violations;
        snprintf(msg, sizeof(msg), "conversion failed its self-check: %s", cs->check_msg);
        rc = failure(&r, 200, version, uid, msg);
        goto out;
    }
    cs->review_version = version;
    rc = success(cs, &r);
out:
    if (rc < 0) {
        kop_review_result_cleanup(&r);
        return rc;
    }
    *ret = r;
    return 0;
}

int kop_convstream_convert_http(const char *content_type, const char *body, size_t len,
                                const struct kop_convert_options *opts,
                                struct kop_review_result *ret)
{
    struct kop_convstream *cs = NULL;
    assert(ret);
    int rc = kop_convstream_new(content_type, opts, &cs);
    if (rc == 0)
        rc = kop_convstream_expect(cs, len);
    if (rc == 0 && len > 0)
        rc = kop_convstream_feed(cs, body, len);
    if (rc == 0)
        rc = kop_convstream_finish(cs, ret);
    kop_convstream_free(cs);
    return rc;
}
