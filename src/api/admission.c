/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Validating admission for MyResource (see kop/admission.h).
 *
 * The object (and oldObject) are converted to v2 in place and validated on
 * the v2 form, so both versions share one set of rules. Each violation
 * carries two paths: the v2 path whose value is compared with oldObject for
 * ratcheting, and the path shown to the client (its own version's). Error
 * texts follow k8s.io/apimachinery's field errors ("Required value",
 * "Invalid value: ...", "Unsupported value: ...", "Duplicate value: ...",
 * "Too many: ...") and its validation messages (DNS-1035 labels, IANA
 * service names, ranges).
 *
 * Cost: every check is linear in the size of the object. A port list is
 * only bounded by the request body (32,000 ports fit in a v2 object, about
 * 15,000 in a v1 object's v2-extras annotation), so duplicate names go
 * through a hash set (SipHash-1-3 with a fresh random key per list, so
 * names cannot be chosen to collide) and duplicate (port, protocol) pairs
 * through a bitmap of the 65535 x 3 possible pairs. Only the first
 * KOP_ADMISSION_MAX_LISTED violations are rendered and kept; the others
 * are counted, which also bounds the message.
 */
#include "kop/admission.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kop/conversion.h"
#include "kop/hash.h"
#include "kop/imageref.h"
#include "kop/json.h"
#include "kop/myresource.h"

#define DNS1035_MSG                                                                                \
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "   \
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "           \
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"

struct vctx {
    enum kop_myresource_version client;
    const json_t *obj; /* v2 form */
    const json_t *old; /* v2 form of oldObject, NULL unless ratcheting */
    const struct kop_admission_options *opts;
    char *errs[KOP_ADMISSION_MAX_LISTED]; /* the violations written out */
    size_t n_errs;
    size_t n_violations; /* all blocking violations, written out or not */
    bool oom;
    struct kop_admission_verdict *v;
};

/* ---- value rendering --------------------------------------------------- */

/* Go-%q-like quoting of a string, cut (at a character boundary, with
 * "...") after max bytes of input. */
static void quote(const char *s, size_t len, size_t max, char *buf, size_t size)
{
    size_t o = 0;
    bool cut = false;
    if (len > max) {
        len = max;
        while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
            len--;
        cut = true;
    }
    if (size < 8) {
        if (size)
            buf[0] = '\0';
        return;
    }
    buf[o++] = '"';
    for (size_t i = 0; i < len && o + 8 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else if (c == '\t') {
            buf[o++] = '\\';
            buf[o++] = 't';
        } else if (c == '\r') {
            buf[o++] = '\\';
            buf[o++] = 'r';
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        } else if (c >= 0xC0) {
            /* a whole character or none: the buffer may end here */
            size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            if (i + n > len || o + n + 8 >= size)
                break;
            memcpy(buf + o, s + i, n);
            o += n;
            i += n - 1;
        } else {
            buf[o++] = (char)c;
        }
    }
    if (cut && o + 4 < size) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '"';
    buf[o] = '\0';
}

static void render(const json_t *v, char *buf, size_t size)
{
    if (json_is_string(v)) {
        quote(json_string_value(v), json_string_length(v), 200, buf, size);
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "%.17g", json_real_value(v));
    } else if (json_is_true(v)) {
        snprintf(buf, size, "true");
    } else if (json_is_false(v)) {
        snprintf(buf, size, "false");
    } else if (!v || json_is_null(v)) {
        snprintf(buf, size, "null");
    } else {
        char *s = NULL;
        size_t len = 0;
        if (kop_json_dump(v, JSON_COMPACT, &s, &len) == 0) {
            if (len > 200)
                snprintf(buf, size, "%.200s...", s);
            else
                snprintf(buf, size, "%s", s);
            free(s);
        } else {
            snprintf(buf, size, "<value>");
        }
    }
}

/* ---- paths and ratcheting ---------------------------------------------- */

/* Lookup of "a.b[2].c" (keys without '.' or '['). @ref borrow. */
static const json_t *lookup(const json_t *root, const char *path)
{
    const json_t *cur = root;
    const char *p = path;
    while (cur && *p) {
        size_t n = strcspn(p, ".[");
        if (n > 0) {
            char key[64];
            if (n >= sizeof(key))
                return NULL;
            memcpy(key, p, n);
            key[n] = '\0';
            cur = json_object_get(cur, key);
            p += n;
        }
        if (*p == '[') {
            char *end = NULL;
            unsigned long idx = strtoul(p + 1, &end, 10);
            if (!end || *end != ']')
                return NULL;
            cur = json_array_get(cur, idx);
            p = end + 1;
        }
        if (*p == '.')
            p++;
    }
    return cur;
}

static bool unchanged(const struct vctx *c, const char *cmp_path)
{
    if (!c->old)
        return false;
    const json_t *a = lookup(c->obj, cmp_path);
    const json_t *b = lookup(c->old, cmp_path);
    if (!a || !b)
        return !a && !b;
    return kop_json_equal(a, b);
}

/* The path the client knows the field by. */
static void display_path(const struct vctx *c, const char *path, char *buf, size_t size)
{
    if (c->client == KOP_MYRESOURCE_VERSION_V1) {
        if (strncmp(path, "spec.image", 10) == 0 && (path[10] == '\0' || path[10] == '.')) {
            snprintf(buf, size, "spec.image");
            return;
        }
        if (strcmp(path, "spec.ports[0].port") == 0) {
            snprintf(buf, size, "spec.port");
            return;
        }
        if (strcmp(path, "spec.service") == 0 || strcmp(path, "spec.service.type") == 0) {
            snprintf(buf, size, "spec.serviceType");
            return;
        }
    }
    snprintf(buf, size, "%s", path);
}

/*
 * Count one violation at path. True when it is to be written out (call
 * add() then); false when ratcheting ignores it or enough are written out
 * already, so the (bounded but not free) rendering of its value is skipped.
 */
static bool take(struct vctx *c, const char *path)
{
    if (unchanged(c, path)) {
        c->v->n_ratcheted++;
        return false;
    }
    c->n_violations++;
    return c->n_errs < KOP_ADMISSION_MAX_LISTED;
}

/* Write out a violation that take() accepted. */
__attribute__((format(printf, 3, 4))) static void add(struct vctx *c, const char *path,
                                                      const char *fmt, ...)
{
    char shown[128];
    char body[1024];
    va_list ap;
    if (c->n_errs >= KOP_ADMISSION_MAX_LISTED)
        return;
    display_path(c, path, shown, sizeof(shown));
    va_start(ap, fmt);
    kop_vmsgf(body, sizeof(body), fmt, ap);
    va_end(ap);
    size_t len = strlen(shown) + 2 + strlen(body) + 1;
    char *e = malloc(len);
    if (!e) {
        c->oom = true;
        return;
    }
    snprintf(e, len, "%s: %s", shown, body);
    c->errs[c->n_errs++] = e;
}

/* A violation without a value ("Required value", "Too many: ..."). */
__attribute__((format(printf, 3, 4))) static void report(struct vctx *c, const char *path,
                                                         const char *fmt, ...)
{
    char body[1024];
    va_list ap;
    if (!take(c, path))
        return;
    va_start(ap, fmt);
    kop_vmsgf(body, sizeof(body), fmt, ap);
    va_end(ap);
    add(c, path, "%s", body);
}

__attribute__((format(printf, 2, 3))) static void warn(struct kop_admission_verdict *v,
                                                       const char *fmt, ...)
{
    va_list ap;
    if (v->n_warnings >= KOP_ADMISSION_MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    kop_vmsgf(v->warnings[v->n_warnings], KOP_ADMISSION_WARNING_SIZE, fmt, ap);
    va_end(ap);
    v->n_warnings++;
}

/* ---- rules ------------------------------------------------------------- */

static void invalid(struct vctx *c, const char *path, const json_t *val, const char *msg)
{
    char r[512];
    if (!take(c, path))
        return;
    render(val, r, sizeof(r));
    add(c, path, "Invalid value: %s: %s", r, msg);
}

static void duplicate(struct vctx *c, const char *path, const json_t *val)
{
    char r[512];
    if (!take(c, path))
        return;
    render(val, r, sizeof(r));
    add(c, path, "Duplicate value: %s", r);
}

static void check_name(struct vctx *c)
{
    const json_t *n = lookup(c->obj, "metadata.name");
    if (!json_is_string(n) || json_string_length(n) == 0) {
        report(c, "metadata.name", "Required value");
        return;
    }
    const char *s = json_string_value(n);
    size_t len = json_string_length(n);
    if (len > 63)
        invalid(c, "metadata.name", n, "must be no more than 63 characters");
    bool ok = s[0] >= 'a' && s[0] <= 'z';
    for (size_t i = 0; ok && i < len; i++) {
        char ch = s[i];
        ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
    }
    ok = ok && s[len - 1] != '-';
    if (!ok)
        invalid(c, "metadata.name", n, DNS1035_MSG);
}

static bool int_value(const json_t *v, long long *ret)
{
    if (json_is_integer(v)) {
        *ret = json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) {
            *ret = (long long)d;
            return true;
        }
    }
    return false;
}

static void check_range(struct vctx *c, const char *path, const json_t *v, long long lo,
                        long long hi)
{
    long long x;
    char msg[64];
    if (!int_value(v, &x)) {
        invalid(c, path, v, "must be an integer");
        return;
    }
    if (x < lo || x > hi) {
        snprintf(msg, sizeof(msg), "must be between %lld and %lld, inclusive", lo, hi);
        invalid(c, path, v, msg);
    }
}

static void check_registry(struct vctx *c, const char *path, const json_t *val, const char *name,
                           size_t len)
{
    const struct kop_admission_options *o = c->opts;
    if (!o || o->n_allowed_registries == 0 ||
        kop_imageref_registry_allowed(name, len, o->allowed_registries, o->n_allowed_registries))
        return;
    char reg[256], msg[512];
    size_t off;
    if (kop_imageref_registry(name, len, reg, sizeof(reg)) < 0)
        snprintf(reg, sizeof(reg), "?");
    off = (size_t)snprintf(msg, sizeof(msg), "registry \"%s\" is not allowed (allowed: ", reg);
    for (size_t i = 0; i < o->n_allowed_registries && off < sizeof(msg); i++)
        off += (size_t)snprintf(msg + off, sizeof(msg) - off, "%s%s", i ? ", " : "",
                                o->allowed_registries[i] ? o->allowed_registries[i] : "");
    if (off < sizeof(msg))
        snprintf(msg + off, sizeof(msg) - off, ")");
    invalid(c, path, val, msg);
}

static void image_warnings(struct vctx *c, const char *image, size_t len, bool has_tag,
                           const char *tag, size_t tag_len, bool has_digest)
{
    char q[96];
    quote(image, len, 60, q, sizeof(q));
    if (!has_tag && !has_digest)
        warn(c->v, "image %s has no tag and no digest; pin a version", q);
    else if (has_tag && tag_len == 6 && memcmp(tag, "latest", 6) == 0)
        warn(c->v, "image %s uses the tag \"latest\"; pin a version", q);
}

static void check_image_v1(struct vctx *c, const json_t *img)
{
    const char *reason = NULL;
    struct kop_imageref r;
    if (!img)
        return;
    if (!json_is_string(img)) {
        invalid(c, "spec.image", img, "must be a string");
        return;
    }
    const char *s = json_string_value(img);
    size_t len = json_string_length(img);
    if (kop_imageref_parse(s, len, &r, &reason) < 0) {
        invalid(c, "spec.image", img, reason);
        return;
    }
    check_registry(c, "spec.image", img, r.name, r.name_len);
    image_warnings(c, s, len, r.tag != NULL, r.tag, r.tag_len, r.digest != NULL);
}

static void check_image_v2(struct vctx *c, const json_t *img)
{
    const char *reason = NULL;
    bool ok = true;
    if (!img)
        return;
    if (!json_is_object(img)) {
        invalid(c, "spec.image", img, "must be an object");
        return;
    }
    const json_t *repo = json_object_get(img, "repository");
    const json_t *tag = json_object_get(img, "tag");
    const json_t *digest = json_object_get(img, "digest");
    if (!repo || (json_is_string(repo) && json_string_length(repo) == 0)) {
        report(c, "spec.image.repository", "Required value");
        ok = false;
    } else if (!json_is_string(repo)) {
        invalid(c, "spec.image.repository", repo, "must be a string");
        ok = false;
    } else if (kop_imageref_check_name(json_string_value(repo), json_string_length(repo), &reason) <
               0) {
        invalid(c, "spec.image.repository", repo, reason);
        ok = false;
    } else {
        check_registry(c, "spec.image.repository", repo, json_string_value(repo),
                       json_string_length(repo));
    }
    if (tag) {
        if (!json_is_string(tag)) {
            invalid(c, "spec.image.tag", tag, "must be a string");
            ok = false;
        } else if (kop_imageref_check_tag(json_string_value(tag), json_string_length(tag),
                                          &reason) < 0) {
            invalid(c, "spec.image.tag", tag, reason);
            ok = false;
        }
    }
    if (digest) {
        if (!json_is_string(digest)) {
            invalid(c, "spec.image.digest", digest, "must be a string");
            ok = false;
        } else if (kop_imageref_check_digest(json_string_value(digest), json_string_length(digest),
                                             &reason) < 0) {
            invalid(c, "spec.image.digest", digest, reason);
            ok = false;
        }
    }
    if (ok)
        image_warnings(c, json_string_value(repo), json_string_length(repo), tag != NULL,
                       tag ? json_string_value(tag) : NULL, tag ? json_string_length(tag) : 0,
                       digest != NULL);
}

/* Index of v in the NULL-terminated set, or -1. */
static int set_index(const json_t *v, const char *const *set)
{
    if (!json_is_string(v))
        return -1;
    for (int i = 0; set[i]; i++) {
        if (strcmp(json_string_value(v), set[i]) == 0 && json_string_length(v) == strlen(set[i]))
            return i;
    }
    return -1;
}

static bool supported(const json_t *v, const char *const *set)
{
    return set_index(v, set) >= 0;
}

static const char *const protocols[] = {"SCTP", "TCP", "UDP", NULL};
#define N_PROTOCOLS 3
#define PROTOCOL_TCP 1 /* index of the default in protocols[] */
static const char *const service_types[] = {"ClusterIP", "LoadBalancer", "NodePort", NULL};

static void unsupported(struct vctx *c, const char *path, const json_t *v, const char *const *set)
{
    char r[512], list[128];
    size_t off = 0;
    if (!take(c, path))
        return;
    render(v, r, sizeof(r));
    list[0] = '\0';
    for (size_t i = 0; set[i] && off < sizeof(list); i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s\"%s\"", i ? ", " : "", set[i]);
    add(c, path, "Unsupported value: %s: supported values: %s", r, list);
}

/* ---- duplicate detection in linear time ---------------------------------- */

/*
 * A set of byte strings, open addressing with linear probing, sized once
 * for its maximum count at a load factor <= 1/2 (it never grows). The
 * strings are borrowed: they must outlive the set.
 */
struct strset {
    struct strset_slot {
        const char *s; /* NULL: empty slot */
        size_t len;
        uint64_t hash;
    } * slots;
    size_t mask;
    uint64_t key[2];
};

static int strset_init(struct strset *set, size_t max)
{
    size_t cap = 16;
    while (cap < 2 * max) {
        if (cap > SIZE_MAX / 2 / sizeof(*set->slots))
            return -ENOMEM;
        cap *= 2;
    }
    set->slots = calloc(cap, sizeof(*set->slots));
    if (!set->slots)
        return -ENOMEM;
    set->mask = cap - 1;
    kop_hash_key_new(set->key);
    return 0;
}

static void strset_cleanup(struct strset *set)
{
    free(set->slots);
    set->slots = NULL;
}

/* Add s; false when it was there already. At most max strings are added. */
static bool strset_add(struct strset *set, const char *s, size_t len)
{
    uint64_t h = kop_hash_keyed(set->key, s, len);
    for (size_t i = (size_t)h & set->mask;; i = (i + 1) & set->mask) {
        struct strset_slot *e = &set->slots[i];
        if (!e->s) {
            *e = (struct strset_slot){.s = s, .len = len, .hash = h};
            return true;
        }
        if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0)
            return false;
    }
}

/* (port, protocol) pairs: a bitmap of every possible pair, 24 KiB. */
#define PAIR_BITS (65535 * N_PROTOCOLS)

static bool pair_add(unsigned char *bits, long long port, int proto)
{
    size_t b = (size_t)(port - 1) * N_PROTOCOLS + (size_t)proto;
    unsigned char mask = (unsigned char)(1u << (b % 8));
    if (bits[b / 8] & mask)
        return false;
    bits[b / 8] |= mask;
    return true;
}

/* k8s.io/apimachinery IsValidPortName (IANA service names). */
static void check_port_name(struct vctx *c, const char *path, const json_t *n)
{
    const char *s = json_string_value(n);
    size_t len = json_string_length(n);
    bool charset = true, letter = false;
    if (len > 15)
        invalid(c, path, n, "must be no more than 15 characters");
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (ch >= 'a' && ch <= 'z')
            letter = true;
        else if (!((ch >= '0' && ch <= '9') || ch == '-'))
            charset = false;
    }
    if (!charset)
        invalid(c, path, n,
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    if (charset && !letter)
        invalid(c, path, n, "must contain at least one letter (a-z)");
    if (strstr(s, "--"))
        invalid(c, path, n, "must not contain consecutive hyphens");
    if (len > 0 && (s[0] == '-' || s[len - 1] == '-'))
        invalid(c, path, n, "must not begin or end with a hyphen");
}

static void check_ports(struct vctx *c, const json_t *ports)
{
    char path[64], sub[80];
    struct strset names = {0};
    unsigned char *pairs = NULL;
    if (!ports)
        return;
    if (!json_is_array(ports)) {
        invalid(c, "spec.ports", ports, "must be a list");
        return;
    }
    size_t n = json_array_size(ports);
    if (n == 0) {
        report(c, "spec.ports", "Required value");
        return;
    }
    if (n > KOP_MYRESOURCE_MAX_PORTS)
        report(c, "spec.ports", "Too many: %zu: must have at most %d items", n,
               KOP_MYRESOURCE_MAX_PORTS);
    pairs = calloc(PAIR_BITS / 8 + 1, 1);
    if (!pairs || strset_init(&names, n) < 0) {
        c->oom = true;
        goto out;
    }
    /* Each later occurrence of a name or pair is reported at its own index
     * (the first one is not), as a pairwise comparison with the earlier
     * entries would. Items past KOP_ADMISSION_MAX_CHECKED_ITEMS are not
     * checked: the list is refused as too long already, and the webhook
     * does not decode them (kop/review.h). */
    size_t checked = n < KOP_ADMISSION_MAX_CHECKED_ITEMS ? n : KOP_ADMISSION_MAX_CHECKED_ITEMS;
    for (size_t i = 0; i < checked; i++) {
        const json_t *p = json_array_get(ports, i);
        snprintf(path, sizeof(path), "spec.ports[%zu]", i);
        if (!json_is_object(p)) {
            invalid(c, path, p, "must be an object");
            continue;
        }
        const json_t *name = json_object_get(p, "name");
        const json_t *port = json_object_get(p, "port");
        const json_t *proto = json_object_get(p, "protocol");
        snprintf(sub, sizeof(sub), "%s.name", path);
        if (!name || (json_is_string(name) && json_string_length(name) == 0)) {
            report(c, sub, "Required value");
        } else if (!json_is_string(name)) {
            invalid(c, sub, name, "must be a string");
        } else {
            check_port_name(c, sub, name);
            if (!strset_add(&names, json_string_value(name), json_string_length(name)))
                duplicate(c, sub, name);
        }
        snprintf(sub, sizeof(sub), "%s.port", path);
        long long pv = 0;
        bool port_ok = false;
        if (!port) {
            report(c, sub, "Required value");
        } else {
            check_range(c, sub, port, 1, 65535);
            port_ok = int_value(port, &pv) && pv >= 1 && pv <= 65535;
        }
        snprintf(sub, sizeof(sub), "%s.protocol", path);
        int pr = PROTOCOL_TCP;
        if (proto) {
            pr = set_index(proto, protocols);
            if (pr < 0) {
                unsupported(c, sub, proto, protocols);
                continue;
            }
        }
        if (port_ok && !pair_add(pairs, pv, pr))
            report(c, path, "Duplicate value: \"%lld/%s\"", pv, protocols[pr]);
    }
out:
    strset_cleanup(&names);
    free(pairs);
}

static void check_spec(struct vctx *c, const json_t *v1_image)
{
    const json_t *spec = json_object_get(c->obj, "spec");
    if (!spec)
        return;
    if (!json_is_object(spec)) {
        invalid(c, "spec", spec, "must be an object");
        return;
    }
    const json_t *v = json_object_get(spec, "replicas");
    if (v)
        check_range(c, "spec.replicas", v, 0, KOP_MYRESOURCE_MAX_REPLICAS);
    if (v1_image)
        check_image_v1(c, v1_image);
    else
        check_image_v2(c, json_object_get(spec, "image"));
    check_ports(c, json_object_get(spec, "ports"));
    v = json_object_get(spec, "service");
    if (v) {
        if (!json_is_object(v)) {
            invalid(c, "spec.service", v, "must be an object");
        } else {
            const json_t *t = json_object_get(v, "type");
            if (t && !supported(t, service_types))
                unsupported(c, "spec.service.type", t, service_types);
        }
    }
    v = json_object_get(spec, "paused");
    if (v && !json_is_boolean(v))
        invalid(c, "spec.paused", v, "must be a boolean");
}

static void check_children(struct vctx *c, json_t *request)
{
    static const char *const kinds[] = {"Deployment", "Service"};
    const struct kop_admission_options *o = c->opts;
    const char *name = kop_json_path_str(c->obj, "metadata.name");
    const char *ns = json_string_value(json_object_get(request, "namespace"));
    const char *uid = kop_json_path_str(c->obj, "metadata.uid");
    bool warned = false;
    if (!o || !o->child_lookup || !name || !*name)
        return;
    if (!ns || !*ns)
        ns = kop_json_path_str(c->obj, "metadata.namespace");
    if (!ns)
        ns = "";
    for (size_t i = 0; i < 2; i++) {
        char owner[128] = "";
        enum kop_child_lookup r =
            o->child_lookup(o->child_lookup_userdata, kinds[i], ns, name, owner, sizeof(owner));
        if (r == KOP_CHILD_NOT_SYNCED) {
            if (!warned) {
                char q[80];
                quote(name, strlen(name), 63, q, sizeof(q));
                warn(c->v, "could not check for a Deployment or Service named %s: cache not synced",
                     q);
                warned = true;
            }
        } else if (r == KOP_CHILD_PRESENT) {
            owner[sizeof(owner) - 1] = '\0';
            if (uid && *uid && strcmp(owner, uid) == 0)
                continue;
            char msg[512];
            snprintf(msg, sizeof(msg),
                     "a %s named \"%s\" already exists in namespace \"%s\" and is not controlled "
                     "by this MyResource",
                     kinds[i], name, ns);
            invalid(c, "metadata.name",
                    json_object_get(json_object_get(c->obj, "metadata"), "name"), msg);
        }
    }
}

/* ---- entry point ---------------------------------------------------------- */

/* Longest object name shown in the message (a DNS subdomain's limit). */
#define MAX_SHOWN_NAME 253
/* Room kept for ", and <count> more]" and the NUL. */
#define TAIL_ROOM 48

/*
 * "<Kind>.<group> "<name>" is invalid: [e1, e2, ..., and N more]": brackets
 * when there is more than one violation (as apimachinery's aggregate
 * prints them), "and N more" for those not written out: beyond
 * KOP_ADMISSION_MAX_LISTED, or not fitting whole in
 * KOP_ADMISSION_MAX_MESSAGE bytes. Items are never cut, so the message
 * stays valid UTF-8.
 */
static int build_message(struct vctx *c, const char *name)
{
    size_t name_len = name ? strlen(name) : 0;
    bool name_cut = name_len > MAX_SHOWN_NAME;
    if (name_cut) {
        name_len = MAX_SHOWN_NAME;
        while (name_len > 0 && ((unsigned char)name[name_len] & 0xC0) == 0x80)
            name_len--;
    }
    size_t len = 64 + name_len + TAIL_ROOM;
    for (size_t i = 0; i < c->n_errs; i++)
        len += strlen(c->errs[i]) + 2;
    if (len > KOP_ADMISSION_MAX_MESSAGE)
        len = KOP_ADMISSION_MAX_MESSAGE;
    char *m = malloc(len);
    if (!m)
        return -ENOMEM;
    size_t off = (size_t)snprintf(m, len, "%s.%s \"%.*s%s\" is invalid: %s", KOP_MYRESOURCE_KIND,
                                  KOP_MYRESOURCE_GROUP, (int)name_len, name ? name : "",
                                  name_cut ? "..." : "", c->n_violations > 1 ? "[" : "");
    size_t listed = 0;
    for (; listed < c->n_errs; listed++) {
        const char *sep = listed ? ", " : "";
        size_t need = strlen(sep) + strlen(c->errs[listed]);
        if (off + need + TAIL_ROOM > len)
            break;
        off += (size_t)snprintf(m + off, len - off, "%s%s", sep, c->errs[listed]);
    }
    if (listed < c->n_violations)
        off += (size_t)snprintf(m + off, len - off, "%sand %zu more", listed ? ", " : "",
                                c->n_violations - listed);
    if (c->n_violations > 1)
        snprintf(m + off, len - off, "]");
    c->v->message = m;
    return 0;
}

static bool str_eq(const json_t *v, const char *s)
{
    return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

static int deny_simple(struct kop_admission_verdict *v, const char *msg)
{
    v->allowed = false;
    v->n_violations = 1;
    v->message = strdup(msg);
    return v->message ? 0 : -ENOMEM;
}

int kop_admission_evaluate(json_t *request, const struct kop_admission_options *opts,
                           struct kop_admission_verdict *ret)
{
    struct kop_admission_verdict v = {.allowed = true};
    struct vctx c = {.opts = opts, .v = &v};
    json_t *v1_image = NULL;
    int rc = 0;
    assert(ret);
    if (!json_is_object(request))
        goto done; /* empty request: nothing of ours */

    const json_t *kind = json_object_get(request, "kind");
    const json_t *res = json_object_get(request, "resource");
    const json_t *sub = json_object_get(request, "subResource");
    const json_t *op = json_object_get(request, "operation");
    if (!str_eq(json_object_get(kind, "group"), KOP_MYRESOURCE_GROUP) ||
        !str_eq(json_object_get(kind, "kind"), KOP_MYRESOURCE_KIND))
        goto done;
    if (res && !str_eq(json_object_get(res, "resource"), KOP_MYRESOURCE_RESOURCE))
        goto done;
    if (json_is_string(sub) && json_string_length(sub) > 0)
        goto done;
    bool create = str_eq(op, "CREATE");
    if (!create && !str_eq(op, "UPDATE"))
        goto done;

    json_t *obj = json_object_get(request, "object");
    if (!json_is_object(obj)) {
        rc = deny_simple(&v, "object: Required value");
        goto done;
    }
    const json_t *dts = kop_json_path(obj, "metadata.deletionTimestamp");
    if (dts && !json_is_null(dts))
        goto done;
    c.client = kop_myresource_version_of(obj);
    if (c.client == KOP_MYRESOURCE_VERSION_UNKNOWN) {
        /* the value, as field.NotSupported renders it (the object's own
         * apiVersion, not request.kind's, which said MyResource) */
        const json_t *av = json_object_get(obj, "apiVersion");
        char got[512], msg[700];
        render(av, got, sizeof(got));
        if (!av)
            snprintf(msg, sizeof(msg), "apiVersion: Required value");
        else
            snprintf(msg, sizeof(msg),
                     "apiVersion: Unsupported value: %s: supported values: "
                     "\"mygroup.example.com/v1\", \"mygroup.example.com/v2\"",
                     got);
        rc = deny_simple(&v, msg);
        goto done;
    }
    const char *name = kop_json_path_str(obj, "metadata.name");
    if (c.client == KOP_MYRESOURCE_VERSION_V1) {
        warn(&v, "mygroup.example.com/v1 MyResource is deprecated; use v2");
        v1_image = json_incref(kop_json_path(obj, "spec.image"));
        if (!json_is_object(json_object_get(obj, "spec")))
            v1_image = (json_decref(v1_image), NULL);
    }
    rc = kop_conversion_convert(obj, KOP_MYRESOURCE_VERSION_V2);
    if (rc < 0)
        goto done;
    name = kop_json_path_str(obj, "metadata.name");
    c.obj = obj;
    if (!create) {
        json_t *old = json_object_get(request, "oldObject");
        if (kop_myresource_version_of(old) != KOP_MYRESOURCE_VERSION_UNKNOWN) {
            rc = kop_conversion_convert(old, KOP_MYRESOURCE_VERSION_V2);
            if (rc < 0)
                goto done;
            c.old = old;
        }
    }

    check_name(&c);
    check_spec(&c, v1_image);
    if (create)
        check_children(&c, request);
    if (c.oom) {
        rc = -ENOMEM;
        goto done;
    }
    if (c.n_violations > 0) {
        v.allowed = false;
        v.n_violations = c.n_violations > UINT_MAX ? UINT_MAX : (unsigned)c.n_violations;
        rc = build_message(&c, name);
    }
done:
    /* the written-out violations move to the verdict */
    for (size_t i = 0; i < c.n_errs; i++)
        v.listed[i] = c.errs[i];
    v.n_listed = c.n_errs;
    json_decref(v1_image);
    if (rc < 0) {
        kop_admission_verdict_cleanup(&v);
        return rc;
    }
    *ret = v;
    return 0;
}

void kop_admission_verdict_cleanup(struct kop_admission_verdict *v)
{
    if (!v)
        return;
    free(v->message);
    v->message = NULL;
    for (size_t i = 0; i < v->n_listed; i++)
        free(v->listed[i]);
    v->n_listed = 0;
}
