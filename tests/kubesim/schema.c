/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim structural schemas (CRD openAPIV3Schema): defaulting as the
 * apiserver does it (absent or non-nullable null fields get their
 * default, then defaults apply inside defaulted values), pruning of
 * unknown fields (unless x-kubernetes-preserve-unknown-fields), and the
 * common validations with the apiserver's field-error wording (type,
 * required, enum, minimum/maximum, min/maxItems, min/maxLength, pattern,
 * the string formats date-time, date, uuid, byte, ipv4 and ipv6),
 * then the uniqueness of x-kubernetes-list-type set and map arrays;
 * the value validation ratchets on updates (ks_schema_validate_values,
 * the correlation of ks_ratchet_*; celvalidation.c calls both).
 * metadata is never defaulted or pruned below its top level.
 */
#include "kubesim.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_true(const json_t *s, const char *k)
{
    return json_is_true(json_object_get(s, k));
}

static void apply_defaults(json_t *v, const json_t *s)
{
    if (!json_is_object(s))
        return;
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties");
        const char *k;
        json_t *ps;
        json_object_foreach((json_t *)props, k, ps)
        {
            json_t *cur = json_object_get(v, k);
            if (cur && json_is_null(cur) && !is_true(ps, "nullable")) {
                json_object_del(v, k);
                cur = NULL;
            }
            const json_t *def = json_object_get(ps, "default");
            if (!cur && def) {
                json_object_set_new(v, k, json_deep_copy(def));
                cur = json_object_get(v, k);
            }
            if (cur)
                apply_defaults(cur, ps);
        }
        const json_t *ap = json_object_get(s, "additionalProperties");
        if (json_is_object(ap)) {
            json_t *x;
            json_object_foreach(v, k, x)
            {
                if (!json_object_get(props, k))
                    apply_defaults(x, ap);
            }
        }
    } else if (json_is_array(v)) {
        const json_t *items = json_object_get(s, "items");
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            apply_defaults(x, items);
        }
    }
}

void ks_schema_default(json_t *obj, const json_t *schema)
{
    if (!json_is_object(obj) || !json_is_object(schema))
        return;
    const json_t *props = json_object_get(schema, "properties");
    const char *k;
    json_t *ps;
    json_object_foreach((json_t *)props, k, ps)
    {
        if (strcmp(k, "metadata") == 0 || strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0)
            continue;
        json_t *cur = json_object_get(obj, k);
        const json_t *def = json_object_get(ps, "default");
        if (!cur && def) {
            json_object_set_new(obj, k, json_deep_copy(def));
            cur = json_object_get(obj, k);
        }
        if (cur)
            apply_defaults(cur, ps);
    }
}

/* path: the JSON path of v (list indices in brackets), a buffer of
 * PATH_LEN extended in place; unknown: where "unknown field \"PATH\""
 * goes for every member dropped, or NULL. */
#define PATH_LEN 1024

static void path_key(char *path, size_t *saved, const char *key)
{
    *saved = strlen(path);
    snprintf(path + *saved, PATH_LEN - *saved, "%s%s", *saved ? "." : "", key);
}

static void path_index(char *path, size_t *saved, size_t idx)
{
    *saved = strlen(path);
    snprintf(path + *saved, PATH_LEN - *saved, "[%zu]", idx);
}

static void dropped(json_t *unknown, const char *path)
{
    if (unknown)
        json_array_append_new(unknown, json_sprintf("unknown field \"%s\"", path));
}

static void prune(json_t *v, const json_t *s, char *path, json_t *unknown)
{
    if (!json_is_object(s) || is_true(s, "x-kubernetes-preserve-unknown-fields") ||
        is_true(s, "x-kubernetes-int-or-string"))
        return;
    if (json_is_object(v)) {
        const json_t *props = json_object_get(s, "properties");
        const json_t *ap = json_object_get(s, "additionalProperties");
        bool embedded = is_true(s, "x-kubernetes-embedded-resource");
        const char *k;
        json_t *x;
        void *tmp;
        json_object_foreach_safe(v, tmp, k, x)
        {
            const json_t *ps = json_object_get(props, k);
            size_t saved;
            path_key(path, &saved, k);
            if (ps) {
                prune(x, ps, path, unknown);
            } else if (json_is_object(ap)) {
                prune(x, ap, path, unknown);
            } else if (json_is_true(ap) ||
                       (embedded && (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0 ||
                                     strcmp(k, "metadata") == 0))) {
                /* kept */
            } else {
                dropped(unknown, path);
                json_object_del(v, k);
            }
            path[saved] = '\0';
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            size_t saved;
            path_index(path, &saved, i);
            prune(x, json_object_get(s, "items"), path, unknown);
            path[saved] = '\0';
        }
    }
}

void ks_schema_prune_report(json_t *obj, const json_t *schema, json_t *unknown)
{
    if (!json_is_object(obj) || !json_is_object(schema))
        return;
    const json_t *props = json_object_get(schema, "properties");
    char path[PATH_LEN] = "";
    const char *k;
    json_t *x;
    void *tmp;
    json_object_foreach_safe(obj, tmp, k, x)
    {
        if (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0 || strcmp(k, "metadata") == 0)
            continue;
        const json_t *ps = json_object_get(props, k);
        size_t saved;
        path_key(path, &saved, k);
        if (ps) {
            prune(x, ps, path, unknown);
        } else if (!is_true(schema, "x-kubernetes-preserve-unknown-fields")) {
            dropped(unknown, path);
            json_object_del(obj, k);
        }
        path[saved] = '\0';
    }
}

void ks_schema_prune(json_t *obj, const json_t *schema)
{
    ks_schema_prune_report(obj, schema, NULL);
}

/* ---- validation ------------------------------------------------------------ */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

static char *render(const json_t *v)
{
    if (json_is_string(v))
        return ks_printf("\"%s\"", json_string_value(v));
    char *d = ks_dump(v, true, NULL);
    return d ? d : ks_strdup("?");
}

static void cause(json_t *causes, const char *reason, const char *field, char *message)
{
    json_array_append_new(
        causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message", message, "field", field));
    free(message);
}

/* The value validation's field error at a node: dropped when the node is
 * ratcheted (apiextensions-apiserver pkg/apiserver/validation/ratcheting.go,
 * ratchetingValueValidator.Validate: the errors of an unchanged correlated
 * node, and of its uncorrelatable descendants, are turned into warnings
 * that ValidateCustomResourceUpdate does not return). */
static void rcause(json_t *causes, const struct ks_ratchet *r, const char *reason,
                   const char *field, char *message)
{
    if (r && ks_ratchet_should(r)) {
        free(message);
        return;
    }
    cause(causes, reason, field, message);
}

/* ---- patterns ---------------------------------------------------------------------------- */

/*
 * A schema's pattern is Go (RE2) syntax; kubesim matches it with POSIX
 * extended regular expressions, so the RE2 forms with another meaning
 * there are rewritten: the classes \d \w \s and their negations (also
 * inside brackets), (?: groups, the lazy quantifiers' '?' (a match is a
 * match either way) and a leading (?i), which becomes *icase. Anything
 * else (\pL, \b, named groups) is passed as written. malloc'd
 */
static char *re2_to_ere(const char *pat, bool *icase)
{
    *icase = false;
    if (strncmp(pat, "(?i)", 4) == 0) {
        *icase = true;
        pat += 4;
    }
    size_t n = strlen(pat);
    char *out = malloc(n * 16 + 1);
    if (!out)
        abort();
    size_t o = 0;
    bool bracket = false;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char e = pat[++i];
            /* RE2's Perl classes: alone, and inside brackets (the
             * negated ones have no form there and stay as written) */
            static const struct {
                char esc;
                const char *alone, *inside;
            } classes[] = {
                {'d', "[0-9]", "0-9"},
                {'D', "[^0-9]", NULL},
                {'w', "[0-9A-Za-z_]", "0-9A-Za-z_"},
                {'W', "[^0-9A-Za-z_]", NULL},
                {'s', "[[:space:]]", "[:space:]"},
                {'S', "[^[:space:]]", NULL},
            };
            const char *cls = NULL;
            for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++)
                if (classes[k].esc == e)
                    cls = bracket ? classes[k].inside : classes[k].alone;
            if (cls) {
                memcpy(out + o, cls, strlen(cls));
                o += strlen(cls);
            } else if (bracket && e != '\\' && e != ']' && e != '-' && e != '^') {
                out[o++] = e; /* inside brackets a backslash is literal in ERE */
            } else {
                out[o++] = '\\';
                out[o++] = e;
            }
            continue;
        }
        if (bracket) {
            if (c == ']')
                bracket = false;
            out[o++] = c;
            continue;
        }
        if (c == '[') {
            bracket = true;
            out[o++] = c;
            /* a leading ']' or '^]' is a member, not the end */
            if (i + 1 < n && pat[i + 1] == '^')
                out[o++] = pat[++i];
            if (i + 1 < n && pat[i + 1] == ']')
                out[o++] = pat[++i];
            continue;
        }
        if (c == '(' && strncmp(pat + i, "(?:", 3) == 0) {
            out[o++] = '(';
            i += 2;
            continue;
        }
        if (c == '?' && o > 0 &&
            (out[o - 1] == '*' || out[o - 1] == '+' || out[o - 1] == '?' || out[o - 1] == '}')) {
            continue; /* lazy: the same strings match */
        }
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

/* ---- string formats (kube-openapi's strfmt default registry) ------------------------- */

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* time.Parse("2006-01-02", s): four-digit year, the month's days */
static bool is_date(const char *s, size_t n)
{
    if (n != 10 || s[4] != '-' || s[7] != '-' || !digits(s, 4) || !digits(s + 5, 2) ||
        !digits(s + 8, 2))
        return false;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
    int m = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1)
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return d <= mdays[m - 1] + (m == 2 && leap ? 1 : 0);
}

/* strfmt.IsDateTime: lower-cased and split at "t", a date, then
 * ^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$
 * with at most 23:59:59 */
static bool is_date_time(const char *str)
{
    size_t n = strlen(str);
    if (n < 4)
        return false;
    const char *t = NULL;
    for (size_t i = 0; i < n; i++)
        if (str[i] == 't' || str[i] == 'T') {
            if (t) /* a third part is ignored by the split, the second must match */
                break;
            t = str + i;
        }
    if (!t || !is_date(str, (size_t)(t - str)))
        return false;
    const char *p = t + 1;
    const char *end = strpbrk(p, "tT"); /* the second part ends at the next "t" */
    size_t pn = end ? (size_t)(end - p) : strlen(p);
    if (pn < 9 || !digits(p, 2) || p[2] != ':' || !digits(p + 3, 2) || p[5] != ':' ||
        !digits(p + 6, 2))
        return false;
    if (memcmp(p, "23", 2) > 0 || memcmp(p + 3, "59", 2) > 0 || memcmp(p + 6, "59", 2) > 0)
        return false;
    size_t i = 8;
    if (i < pn && p[i] != 'z' && p[i] != 'Z' && p[i] != '+' && p[i] != '-') {
        /* (.[0-9]+)?: any one character, then digits */
        size_t j = i + 1;
        while (j < pn && p[j] >= '0' && p[j] <= '9')
            j++;
        if (j == i + 1)
            return false;
        i = j;
    }
    if (i < pn && (p[i] == 'z' || p[i] == 'Z'))
        return i + 1 == pn;
    return pn - i == 6 && (p[i] == '+' || p[i] == '-') && digits(p + i + 1, 2) && p[i + 3] == ':' &&
           digits(p + i + 4, 2);
}

static bool hex_run(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* strfmt's UUID patterns: 8-4-4-4-12 hex digits, each '-' optional, any
 * case; version (3, 4, 5: 0 for any) and the variant [89ab] for 4 and 5 */
static bool is_uuid(const char *s, int version)
{
    static const size_t groups[] = {8, 4, 4, 4, 12};
    const char *p = s;
    for (size_t g = 0; g < 5; g++) {
        if (g > 0 && *p == '-')
            p++;
        if (strlen(p) < groups[g] || !hex_run(p, groups[g]))
            return false;
        if (version && g == 2 && p[0] != '0' + version)
            return false;
        if ((version == 4 || version == 5) && g == 3 && !strchr("89abAB", p[0]))
            return false;
        p += groups[g];
    }
    return *p == '\0';
}

/* govalidator.IsBase64 */
static bool is_base64(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n % 4 != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool b64 = isalnum((unsigned char)c) || c == '+' || c == '/';
        if (b64)
            continue;
        /* '=' only as the last one or two */
        if (c == '=' && (i == n - 1 || (i == n - 2 && s[n - 1] == '=')))
            continue;
        return false;
    }
    return true;
}

/* govalidator.IsIPv4/IsIPv6: net.ParseIP accepts it and it holds a '.'
 * (':') */
static bool is_ip(const char *s, char mark)
{
    unsigned char buf[16];
    bool ok = inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
    return ok && strchr(s, mark);
}

/* Whether s is valid for format (the registry's name: lower case without
 * '-' or '_'); true for a format kubesim does not check. */
static bool format_ok(const char *format, const char *s)
{
    char name[32];
    size_t o = 0;
    for (const char *p = format; *p && o + 1 < sizeof(name); p++)
        if (*p != '-' && *p != '_')
            name[o++] = (char)tolower((unsigned char)*p);
    name[o] = '\0';
    if (strcmp(name, "datetime") == 0)
        return is_date_time(s);
    if (strcmp(name, "date") == 0)
        return is_date(s, strlen(s));
    if (strcmp(name, "uuid") == 0)
        return is_uuid(s, 0);
    if (strcmp(name, "uuid3") == 0)
        return is_uuid(s, 3);
    if (strcmp(name, "uuid4") == 0)
        return is_uuid(s, 4);
    if (strcmp(name, "uuid5") == 0)
        return is_uuid(s, 5);
    if (strcmp(name, "byte") == 0)
        return is_base64(s);
    if (strcmp(name, "ipv4") == 0)
        return is_ip(s, '.');
    if (strcmp(name, "ipv6") == 0)
        return is_ip(s, ':');
    return true;
}

/* The schema of an object's member k: its properties' entry, else an
 * additionalProperties schema; NULL for neither. */
static const json_t *property_schema(const json_t *s, const char *k)
{
    const json_t *ps = json_object_get(json_object_get(s, "properties"), k);
    const json_t *ap = json_object_get(s, "additionalProperties");
    return ps ? ps : json_is_object(ap) ? ap : NULL;
}

/* ---- ratcheting: CorrelatedObject (k8s.io/apiserver pkg/cel/common/equality.go) ---- */

/* A list item's key for MapList.Get: every key field present and a
 * scalar (bool, number, string). */
static bool map_key_ok(const json_t *keys, const json_t *elem)
{
    if (!json_is_object(elem) || json_array_size(keys) == 0)
        return false;
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const json_t *v = json_object_get(elem, ks_nz(json_string_value(k)));
        if (!v || !(json_is_boolean(v) || json_is_number(v) || json_is_string(v)))
            return false;
    }
    return true;
}

const json_t *ks_maplist_get(const json_t *schema, const json_t *old_list, const json_t *elem)
{
    const char *lt = json_string_value(json_object_get(schema, "x-kubernetes-list-type"));
    const json_t *keys = json_object_get(schema, "x-kubernetes-list-map-keys");
    if (!lt || strcmp(lt, "map") != 0 || !json_is_array(old_list) || !map_key_ok(keys, elem))
        return NULL;
    size_t i, j;
    json_t *o, *k;
    json_array_foreach(old_list, i, o)
    {
        if (!map_key_ok(keys, o))
            continue;
        bool same = true;
        json_array_foreach(keys, j, k)
        {
            const char *name = json_string_value(k);
            same = same && json_equal(json_object_get(o, name), json_object_get(elem, name));
        }
        if (same)
            return o; /* the first with the key (keyedItems keeps the first) */
    }
    return NULL;
}

/* The schema of member k for a correlation: properties[k], else an
 * additionalProperties schema (CorrelatedObject.Key). */
static const json_t *corr_member_schema(const json_t *s, const char *k)
{
    const json_t *ps = json_object_get(json_object_get(s, "properties"), k);
    const json_t *ap = json_object_get(s, "additionalProperties");
    return ps ? ps : json_is_object(ap) ? ap : NULL;
}

/* CachedDeepEqual, uncached: absent and null alike on both sides are
 * equal; lists of type map item by item through their keys, other lists
 * with reflect.DeepEqual; objects member by member where the schema
 * knows the member (a member it does not know makes them unequal). */
static bool corr_deep_equal(const json_t *nv, const json_t *ov, const json_t *s)
{
    bool nnull = !nv || json_is_null(nv), onull = !ov || json_is_null(ov);
    if (nnull && onull)
        return true;
    if (nnull || onull)
        return false;
    if (json_is_array(nv) != json_is_array(ov) || json_is_object(nv) != json_is_object(ov))
        return false;
    if (json_is_array(nv)) {
        if (json_array_size(nv) != json_array_size(ov))
            return false;
        const char *lt = json_string_value(json_object_get(s, "x-kubernetes-list-type"));
        if (!lt || strcmp(lt, "map") != 0)
            return json_equal(nv, ov);
        const json_t *items = json_object_get(s, "items");
        size_t i;
        json_t *x;
        json_array_foreach(nv, i, x)
        {
            const json_t *o = ks_maplist_get(s, ov, x);
            if (!o || !json_is_object(items) || !corr_deep_equal(x, o, items))
                return false;
        }
        return true;
    }
    if (json_is_object(nv)) {
        if (json_object_size(nv) != json_object_size(ov))
            return false;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)nv, k, x)
        {
            const json_t *o = json_object_get(ov, k);
            const json_t *ms = s ? corr_member_schema(s, k) : NULL;
            if (!o || !ms || !corr_deep_equal(x, o, ms))
                return false;
        }
        return true;
    }
    return json_equal(nv, ov);
}

static bool corr_eq(struct ks_corr *c)
{
    if (!c)
        return false;
    if (c->eq < 0)
        c->eq = corr_deep_equal(c->new_v, c->old_v, c->schema) ? 1 : 0;
    return c->eq == 1;
}

bool ks_ratchet_should(const struct ks_ratchet *r)
{
    return r->cur ? corr_eq(r->cur) : corr_eq(r->nearest);
}

struct ks_ratchet ks_ratchet_key(const struct ks_ratchet *r, const char *k, struct ks_corr *storage)
{
    struct ks_ratchet out = *r;
    if (!r->cur)
        return out;
    /* ratchetingOptions.key: apiVersion and kind of the root are never
     * ratcheted (both objects are converted to the same version) */
    if (!r->nearest && (strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0)) {
        out.cur = out.nearest = NULL;
        return out;
    }
    out.nearest = r->cur;
    out.cur = NULL;
    const json_t *nv = json_object_get(r->cur->new_v, k);
    const json_t *ov = json_object_get(r->cur->old_v, k);
    const json_t *ms = r->cur->schema ? corr_member_schema(r->cur->schema, k) : NULL;
    if (json_is_object(r->cur->new_v) && json_is_object(r->cur->old_v) && nv && ov && ms) {
        *storage = (struct ks_corr){.new_v = nv, .old_v = ov, .schema = ms, .eq = -1};
        out.cur = storage;
    }
    return out;
}

struct ks_ratchet ks_ratchet_index(const struct ks_ratchet *r, size_t i, struct ks_corr *storage)
{
    struct ks_ratchet out = *r;
    if (!r->cur)
        return out;
    out.nearest = r->cur;
    out.cur = NULL;
    const json_t *nv = json_array_get(r->cur->new_v, i);
    const json_t *items = json_object_get(r->cur->schema, "items");
    const json_t *ov = nv ? ks_maplist_get(r->cur->schema, r->cur->old_v, nv) : NULL;
    if (ov && json_is_object(items) && json_is_array(r->cur->old_v)) {
        *storage = (struct ks_corr){.new_v = nv, .old_v = ov, .schema = items, .eq = -1};
        out.cur = storage;
    }
    return out;
}

static bool type_ok(const json_t *v, const char *type)
{
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v) ||
               (json_is_real(v) && json_real_value(v) == (double)(long long)json_real_value(v));
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    return true;
}

static void validate(const json_t *v, const json_t *s, const char *path,
                     const struct ks_ratchet *rt, json_t *causes)
{
    if (!json_is_object(s))
        return;
    if (json_is_null(v)) {
        if (!is_true(s, "nullable") && json_object_get(s, "type"))
            rcause(causes, rt, "FieldValueTypeInvalid", path,
                   ks_printf("Invalid value: \"null\": %s in body must be of type %s: \"null\"",
                             path, json_string_value(json_object_get(s, "type"))));
        return;
    }
    if (is_true(s, "x-kubernetes-int-or-string")) {
        if (!json_is_integer(v) && !json_is_string(v))
            rcause(causes, rt, "FieldValueTypeInvalid", path,
                   ks_printf("Invalid value: \"%s\": %s in body must be of type "
                             "integer,string: \"%s\"",
                             type_name(v), path, type_name(v)));
        return;
    }
    const char *type = json_string_value(json_object_get(s, "type"));
    if (type && !type_ok(v, type)) {
        rcause(causes, rt, "FieldValueTypeInvalid", path,
               ks_printf("Invalid value: \"%s\": %s in body must be of type %s: \"%s\"",
                         type_name(v), path, type, type_name(v)));
        return;
    }
    if (json_is_number(v)) {
        double d = json_number_value(v);
        const json_t *mx = json_object_get(s, "maximum");
        const json_t *mn = json_object_get(s, "minimum");
        char *r = render(v);
        if (json_is_number(mx) && (d > json_number_value(mx) ||
                                   (is_true(s, "exclusiveMaximum") && d >= json_number_value(mx))))
            rcause(causes, rt, "FieldValueInvalid", path,
                   ks_printf("Invalid value: %s: %s in body should be less than %s%g", r, path,
                             is_true(s, "exclusiveMaximum") ? "" : "or equal to ",
                             json_number_value(mx)));
        if (json_is_number(mn) && (d < json_number_value(mn) ||
                                   (is_true(s, "exclusiveMinimum") && d <= json_number_value(mn))))
            rcause(causes, rt, "FieldValueInvalid", path,
                   ks_printf("Invalid value: %s: %s in body should be greater than %s%g", r, path,
                             is_true(s, "exclusiveMinimum") ? "" : "or equal to ",
                             json_number_value(mn)));
        free(r);
    }
    if (json_is_string(v)) {
        size_t len = json_string_length(v);
        const json_t *mx = json_object_get(s, "maxLength");
        const json_t *mn = json_object_get(s, "minLength");
        if (json_is_integer(mx) && (json_int_t)len > json_integer_value(mx))
            rcause(causes, rt, "FieldValueTooLong", path,
                   ks_printf("Too long: may not be more than %lld bytes",
                             (long long)json_integer_value(mx)));
        if (json_is_integer(mn) && (json_int_t)len < json_integer_value(mn))
            rcause(causes, rt, "FieldValueInvalid", path,
                   ks_printf("Invalid value: \"%s\": %s in body should be at least %lld chars "
                             "long",
                             json_string_value(v), path, (long long)json_integer_value(mn)));
        const char *pat = json_string_value(json_object_get(s, "pattern"));
        regex_t re;
        bool icase = false;
        char *ere = pat ? re2_to_ere(pat, &icase) : NULL;
        if (ere && regcomp(&re, ere, REG_EXTENDED | REG_NOSUB | (icase ? REG_ICASE : 0)) == 0) {
            if (regexec(&re, json_string_value(v), 0, NULL, 0) != 0)
                rcause(causes, rt, "FieldValueInvalid", path,
                       ks_printf("Invalid value: \"%s\": %s in body should match '%s'",
                                 json_string_value(v), path, pat));
            regfree(&re);
        }
        free(ere);
        const char *fmt = json_string_value(json_object_get(s, "format"));
        if (fmt && !format_ok(fmt, json_string_value(v))) {
            char *q = ks_go_quote(json_string_value(v));
            cause(
                causes, "FieldValueTypeInvalid", path,
                ks_printf("Invalid value: %s: %s in body must be of type %s: %s", q, path, fmt, q));
            free(q);
        }
    }
    if (json_is_array(v)) {
        size_t n = json_array_size(v);
        const json_t *mx = json_object_get(s, "maxItems");
        const json_t *mn = json_object_get(s, "minItems");
        if (json_is_integer(mx) && (json_int_t)n > json_integer_value(mx))
            rcause(causes, rt, "FieldValueTooMany", path,
                   ks_printf("Too many: %zu: must have at most %lld items", n,
                             (long long)json_integer_value(mx)));
        if (json_is_integer(mn) && (json_int_t)n < json_integer_value(mn))
            rcause(causes, rt, "FieldValueInvalid", path,
                   ks_printf("Invalid value: %zu: %s in body should have at least %lld items", n,
                             path, (long long)json_integer_value(mn)));
        const json_t *items = json_object_get(s, "items");
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            char *p = ks_printf("%s[%zu]", path, i);
            struct ks_corr cc;
            struct ks_ratchet cr = ks_ratchet_index(rt, i, &cc);
            validate(x, items, p, &cr, causes);
            free(p);
        }
    }
    const json_t *en = json_object_get(s, "enum");
    if (json_is_array(en)) {
        bool ok = false;
        size_t i;
        json_t *x;
        json_array_foreach(en, i, x)
        {
            if (json_equal(x, v))
                ok = true;
        }
        if (!ok) {
            char *list = ks_strdup("");
            json_array_foreach(en, i, x)
            {
                char *r = render(x);
                char *n = ks_printf("%s%s%s", list, i ? ", " : "", r);
                free(r);
                free(list);
                list = n;
            }
            char *r = render(v);
            rcause(causes, rt, "FieldValueNotSupported", path,
                   ks_printf("Unsupported value: %s: supported values: %s", r, list));
            free(r);
            free(list);
        }
    }
    if (json_is_object(v)) {
        const json_t *req = json_object_get(s, "required");
        size_t i;
        json_t *x;
        json_array_foreach(req, i, x)
        {
            const char *rk = json_string_value(x);
            if (rk && !json_object_get(v, rk)) {
                char *p = ks_printf("%s%s%s", path, *path ? "." : "", rk);
                rcause(causes, rt, "FieldValueRequired", p, ks_strdup("Required value"));
                free(p);
            }
        }
        const char *k;
        json_object_foreach((json_t *)v, k, x)
        {
            const json_t *ps = property_schema(s, k);
            if (!ps)
                continue;
            char *p = ks_printf("%s%s%s", path, *path ? "." : "", k);
            struct ks_corr cc;
            struct ks_ratchet cr = ks_ratchet_key(rt, k, &cc);
            validate(x, ps, p, &cr, causes);
            free(p);
        }
    }
}

/* Go's %#v of an unstructured value (interface{} from encoding/json: a
 * map[string]interface {} with sorted keys, []interface {}, string, int64,
 * float64, bool, nil), as field errors of Kubernetes 1.32 print them.
 * malloc'd */
static char *go_syntax(const json_t *v, bool in_interface)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return ks_go_quote(json_string_value(v));
    case JSON_INTEGER:
        return ks_printf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        return ks_printf("%g", json_real_value(v));
    case JSON_TRUE:
        return ks_strdup("true");
    case JSON_FALSE:
        return ks_strdup("false");
    case JSON_ARRAY: {
        char *out = ks_strdup("[]interface {}{");
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            char *e = go_syntax(x, true);
            char *n = ks_printf("%s%s%s", out, i ? ", " : "", e);
            free(e);
            free(out);
            out = n;
        }
        char *n = ks_printf("%s}", out);
        free(out);
        return n;
    }
    case JSON_OBJECT: {
        /* fmt prints a map's keys sorted */
        size_t n = json_object_size(v), k = 0;
        const char **keys = calloc(n ? n : 1, sizeof(*keys));
        if (!keys)
            abort();
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x)
        {
            keys[k++] = key;
        }
        for (size_t a = 1; a < n; a++)
            for (size_t b = a; b > 0 && strcmp(keys[b - 1], keys[b]) > 0; b--) {
                const char *t = keys[b - 1];
                keys[b - 1] = keys[b];
                keys[b] = t;
            }
        char *out = ks_strdup("map[string]interface {}{");
        for (size_t i = 0; i < n; i++) {
            char *qk = ks_go_quote(keys[i]);
            char *e = go_syntax(json_object_get(v, keys[i]), true);
            char *nx = ks_printf("%s%s%s:%s", out, i ? ", " : "", qk, e);
            free(qk);
            free(e);
            free(out);
            out = nx;
        }
        free(keys);
        char *nx = ks_printf("%s}", out);
        free(out);
        return nx;
    }
    case JSON_NULL:
    default:
        return ks_strdup(in_interface ? "interface {}(nil)" : "<nil>");
    }
}

/* field.Duplicate(path, value) as ErrorBody prints it (a string quoted, a
 * simple type with %v, anything else with %#v) */
static void duplicate(json_t *causes, const char *path, const json_t *value)
{
    char *g = go_syntax(value, false);
    cause(causes, "FieldValueDuplicate", path, ks_printf("Duplicate value: %s", g));
    free(g);
}

/* The indexes of the elements of list equal (as JSON) to an earlier one,
 * each value once: listtype's validateListSet. @ref new */
static json_t *non_unique(const json_t *list)
{
    json_t *seen = json_object(), *out = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x)
    {
        /* a JSON text stands for the value; the type prefix keeps 1 and
         * "1" apart as Go's interface{} comparison does */
        char *d = ks_dump(x, true, NULL);
        char *k = ks_printf("%s:%s", type_name(x), d ? d : "");
        free(d);
        json_int_t times = json_integer_value(json_object_get(seen, k));
        json_object_set_new(seen, k, json_integer(times + 1));
        if (times == 1)
            json_array_append_new(out, json_integer((json_int_t)i));
        free(k);
    }
    json_decref(seen);
    return out;
}

/* A Duplicate at path[i] for each i non_unique finds in list (the values,
 * or the map keys standing for the elements of path's list). */
static void report_duplicates(const json_t *list, const char *path, json_t *causes)
{
    json_t *dups = non_unique(list);
    size_t i;
    json_t *x;
    json_array_foreach(dups, i, x)
    {
        size_t at = (size_t)json_integer_value(x);
        char *p = ks_printf("%s[%zu]", path, at);
        duplicate(causes, p, json_array_get(list, at));
        free(p);
    }
    json_decref(dups);
}

/*
 * apiextensions-apiserver/pkg/apiserver/schema/listtype: arrays with
 * x-kubernetes-list-type set hold each value once, those with map each
 * key (x-kubernetes-list-map-keys) once and only objects, at every depth;
 * checked after the schema's other validations, as the strategy does.
 */
static void list_sets_and_maps(const json_t *v, const json_t *s, const char *path, json_t *causes)
{
    if (!json_is_object(s))
        return;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            const json_t *ps = property_schema(s, k);
            if (!ps)
                continue;
            char *p = ks_printf("%s%s%s", path, *path ? "." : "", k);
            list_sets_and_maps(x, ps, p, causes);
            free(p);
        }
        return;
    }
    if (!json_is_array(v))
        return;
    const char *lt = json_string_value(json_object_get(s, "x-kubernetes-list-type"));
    size_t i;
    json_t *x;
    if (lt && strcmp(lt, "set") == 0) {
        report_duplicates(v, path, causes);
    } else if (lt && strcmp(lt, "map") == 0) {
        bool objects = true;
        json_array_foreach(v, i, x)
        {
            if (!json_is_object(x) && !json_is_null(x)) {
                char *p = ks_printf("%s[%zu]", path, i);
                char *g = go_syntax(x, false);
                cause(causes, "FieldValueInvalid", p,
                      ks_printf("Invalid value: %s: must be an object for an array of list-type "
                                "map",
                                g));
                free(g);
                free(p);
                objects = false;
                break;
            }
        }
        const json_t *mk = json_object_get(s, "x-kubernetes-list-map-keys");
        if (objects && json_array_size(v) > 1) {
            /* each element's key: its key fields that are present */
            json_t *keys = json_array();
            json_array_foreach(v, i, x)
            {
                json_t *key = json_object();
                size_t j;
                json_t *kf;
                json_array_foreach(mk, j, kf)
                {
                    const json_t *kv = json_object_get(x, json_string_value(kf));
                    if (json_string_value(kf) && kv)
                        json_object_set(key, json_string_value(kf), (json_t *)kv);
                }
                json_array_append_new(keys, key);
            }
            report_duplicates(keys, path, causes);
            json_decref(keys);
        }
    }
    const json_t *items = json_object_get(s, "items");
    json_array_foreach(v, i, x)
    {
        char *p = ks_printf("%s[%zu]", path, i);
        list_sets_and_maps(x, items, p, causes);
        free(p);
    }
}

json_t *ks_schema_validate_values(const json_t *obj, const json_t *old, const json_t *schema,
                                  const char *path)
{
    json_t *causes = json_array();
    if (!json_is_object(schema))
        return causes;
    struct ks_corr root = {.new_v = obj, .old_v = old, .schema = schema, .eq = -1};
    struct ks_ratchet r = {.cur = old ? &root : NULL, .nearest = NULL};
    if (*path) {
        validate(obj, schema, path, &r, causes);
        return causes;
    }
    const json_t *props = json_object_get(schema, "properties");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)obj, k, x)
    {
        if (strcmp(k, "metadata") == 0 || strcmp(k, "apiVersion") == 0 || strcmp(k, "kind") == 0)
            continue;
        const json_t *ps = json_object_get(props, k);
        struct ks_corr cc;
        struct ks_ratchet cr = ks_ratchet_key(&r, k, &cc);
        if (ps)
            validate(x, ps, k, &cr, causes);
    }
    const json_t *req = json_object_get(schema, "required");
    size_t i;
    json_array_foreach(req, i, x)
    {
        const char *rk = json_string_value(x);
        if (rk && !json_object_get(obj, rk))
            rcause(causes, &r, "FieldValueRequired", rk, ks_strdup("Required value"));
    }
    return causes;
}

json_t *ks_schema_list_types(const json_t *obj, const json_t *schema)
{
    json_t *causes = json_array();
    const json_t *props = json_object_get(schema, "properties");
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)obj, k, x)
    {
        const json_t *ps = json_object_get(props, k);
        if (ps && strcmp(k, "metadata") != 0)
            list_sets_and_maps(x, ps, k, causes);
    }
    return causes;
}
