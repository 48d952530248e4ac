/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The apiserver's validation of a custom resource against its version's
 * structural schema, as k8s.io/apiextensions-apiserver v0.33
 * (Kubernetes 1.33) runs it: pkg/registry/customresource/strategy.go
 * (customResourceStrategy.Validate, ValidateUpdate, hasBlockingErr) and
 * status_strategy.go (statusStrategy.ValidateUpdate), the value validation
 * of schema.c with validation ratcheting (pkg/apiserver/validation/
 * ratcheting.go), and x-kubernetes-validations as pkg/apiserver/schema/cel/
 * validation.go evaluates them (Validator.validate, validateExpressions,
 * validateMap, validateArray, fieldErrorForReason, ValidFieldPath), the
 * values typed as pkg/cel/common/values.go's UnstructuredToVal types them
 * (k8s.io/apiserver). The rules run in the CEL helper (cel.c); one request
 * carries every rule of one object.
 *
 * Go iterates maps in random order; kubesim walks an object's members in
 * the order the object has them.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_true(const json_t *s, const char *k)
{
    return json_is_true(json_object_get(s, k));
}

static bool has_rules(const json_t *s)
{
    if (!json_is_object(s))
        return false;
    if (json_array_size(json_object_get(s, "x-kubernetes-validations")))
        return true;
    if (has_rules(json_object_get(s, "items")) ||
        has_rules(json_object_get(s, "additionalProperties")))
        return true;
    const char *k;
    json_t *ps;
    json_object_foreach(json_object_get(s, "properties"), k, ps)
    {
        if (has_rules(ps))
            return true;
    }
    return false;
}

/* hasXValidations */
bool ks_cel_schema_has_rules(const json_t *schema)
{
    return has_rules(schema);
}

/* ---- ValidFieldPath --------------------------------------------------------------- */

/* unescapeSingleQuote; false for an unknown escape */
static bool unescape_single_quote(const char *s, size_t n, char **ret)
{
    char *out = malloc(n + 1);
    if (!out)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 >= n) {
            out[o++] = s[i];
            continue;
        }
        static const char from[] = "abfnrtv'\\", to[] = "\a\b\f\n\r\t\v'\\";
        const char *f = strchr(from, s[++i]);
        if (!f || !*f) {
            free(out);
            return false;
        }
        out[o++] = to[f - from];
    }
    out[o] = '\0';
    *ret = out;
    return true;
}

/* The scanner's next token of p (a delimiter '.', '[', ']', a single
 * quoted string when one starts here, or the text up to a delimiter):
 * its length, 0 at the end. */
static size_t next_token(const char *p)
{
    if (!*p)
        return 0;
    if (*p == '\'') {
        for (size_t i = 1; p[i]; i++)
            if (p[i] == '\'' && p[i - 1] != '\\')
                return i + 1;
        return strlen(p);
    }
    if (strchr(".[]", *p))
        return 1;
    size_t i = 0;
    while (p[i] && !strchr(".[]", p[i]))
        i++;
    return i;
}

char *ks_cel_field_path(const char *json_path, const json_t *schema)
{
    char *out = ks_strdup("");
    bool empty = true; /* field.Path nil */
    const char *p = json_path;
    for (size_t n = next_token(p); n; n = next_token(p)) {
        char *name = NULL;
        bool bracket = *p == '[';
        if (n != 1 || (*p != '[' && *p != '.'))
            goto bad; /* "expected [ or . but got" */
        p += n;
        n = next_token(p);
        if (!n)
            goto bad;
        if (bracket) {
            if (n < 2 || p[0] != '\'' || p[n - 1] != '\'' ||
                !unescape_single_quote(p + 1, n - 2, &name))
                goto bad;
        } else {
            name = ks_printf("%.*s", (int)n, p);
        }
        p += n;
        bool named;
        if (!json_is_object(schema)) {
            free(name);
            goto bad;
        }
        if (json_object_get(schema, "properties"))
            named = true;
        else if (json_object_get(schema, "additionalProperties"))
            named = false;
        else {
            free(name);
            goto bad;
        }
        char *next;
        if (named) {
            schema = json_object_get(json_object_get(schema, "properties"), name);
            if (!schema) {
                free(name);
                goto bad;
            }
            next = ks_printf("%s%s%s", out, empty ? "" : ".", name);
        } else {
            schema = json_object_get(schema, "additionalProperties");
            next = ks_printf("%s[%s]", out, name);
        }
        empty = false;
        free(name);
        free(out);
        out = next;
        if (bracket) {
            n = next_token(p);
            if (n != 1 || *p != ']')
                goto bad;
            p += n;
        }
    }
    return out;
bad:
    free(out);
    return NULL;
}

/* ---- values typed by the schema (UnstructuredToVal) ----------------------------------- */

/* cel.Escape (k8s.io/apiserver pkg/cel/escaping.go), malloc'd, or NULL
 * for a name CEL cannot see. */
static char *escape_name(const char *name)
{
    static const char *const reserved[] = {
        "true",      "false",  "null",     "in",   "as",     "break", "const", "continue",
        "else",      "for",    "function", "if",   "import", "let",   "loop",  "package",
        "namespace", "return", "var",      "void", "while",  NULL};
    if (!*name || (*name >= '0' && *name <= '9'))
        return NULL;
    for (const char *const *r = reserved; *r; r++)
        if (strcmp(*r, name) == 0)
            return ks_printf("__%s__", name);
    size_t n = strlen(name);
    char *out = malloc(n * 15 + 1);
    if (!out)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        const char *rep = NULL;
        if (c == '_' && name[i + 1] == '_') {
            rep = "__underscores__";
            i++;
        } else if (c == '.') {
            rep = "__dot__";
        } else if (c == '-') {
            rep = "__dash__";
        } else if (c == '/') {
            rep = "__slash__";
        } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_')) {
            free(out);
            return NULL;
        }
        if (rep) {
            memcpy(out + o, rep, strlen(rep));
            o += strlen(rep);
        } else {
            out[o++] = c;
        }
    }
    out[o] = '\0';
    return out;
}

/* A CEL int on the wire: a JSON number while a JavaScript number holds it
 * exactly, else {"i":"DIGITS"}. @ref new */
static json_t *wire_int(json_int_t i)
{
    if (i <= (json_int_t)9007199254740991LL && i >= -(json_int_t)9007199254740991LL)
        return json_integer(i);
    char *d = ks_printf("%" JSON_INTEGER_FORMAT, i);
    json_t *out = json_pack("{s:s}", "i", d);
    free(d);
    return out;
}

/* A value without a schema: JSON types as they come (int, double). @ref new */
static json_t *untyped(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_INTEGER:
        return wire_int(json_integer_value(v));
    case JSON_REAL:
        return json_pack("{s:f}", "d", json_real_value(v));
    case JSON_ARRAY: {
        json_t *out = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) json_array_append_new(out, untyped(x));
        return out;
    }
    case JSON_OBJECT: {
        json_t *m = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) json_object_set_new(m, k, untyped(x));
        return json_pack("{s:o}", "m", m);
    }
    default:
        return json_deep_copy(v);
    }
}

static json_t *typed(const json_t *v, const json_t *s, bool resource_root);

/* A string of a format CEL types (duration, date, date-time, byte). */
static json_t *typed_string(const json_t *v, const json_t *s)
{
    const char *fmt = json_string_value(json_object_get(s, "format"));
    const char *tag = NULL;
    if (fmt && strcmp(fmt, "duration") == 0)
        tag = "u";
    else if (fmt && (strcmp(fmt, "date") == 0 || strcmp(fmt, "date-time") == 0))
        tag = "t";
    else if (fmt && strcmp(fmt, "byte") == 0)
        tag = "y";
    if (!tag)
        return json_deep_copy(v);
    return json_pack("{s:O}", tag, v);
}

static json_t *typed(const json_t *v, const json_t *s, bool resource_root)
{
    if (json_is_null(v))
        return json_null();
    if (!json_is_object(s))
        return untyped(v);
    if (is_true(s, "x-kubernetes-int-or-string"))
        return untyped(v);
    const char *type = json_string_value(json_object_get(s, "type"));
    bool embedded = resource_root || is_true(s, "x-kubernetes-embedded-resource");
    if (type && strcmp(type, "object") == 0 && json_is_object(v)) {
        json_t *m = json_object();
        const json_t *ap = json_object_get(s, "additionalProperties");
        const char *k;
        json_t *x;
        if (embedded || json_object_get(s, "properties")) {
            /* an object: the members its schema declares, escaped; a null
             * member is an absent one (unstructuredMap.Find) */
            json_object_foreach((json_t *)v, k, x)
            {
                const json_t *ps = json_object_get(json_object_get(s, "properties"), k);
                char *e = NULL;
                if (json_is_null(x)) {
                    /* absent */
                } else if (embedded && (strcmp(k, "kind") == 0 || strcmp(k, "apiVersion") == 0)) {
                    json_object_set_new(m, k, untyped(x));
                } else if (embedded && strcmp(k, "metadata") == 0) {
                    /* model.WithTypeAndObjectMeta: metadata.name and
                     * generateName only */
                    json_t *md = json_object();
                    static const char *const keep[] = {"name", "generateName"};
                    for (size_t i = 0; i < 2; i++) {
                        const json_t *mv = json_object_get(x, keep[i]);
                        if (json_is_string(mv))
                            json_object_set_new(md, keep[i], json_deep_copy(mv));
                    }
                    json_object_set_new(m, k, json_pack("{s:o}", "m", md));
                } else if (ps && (e = escape_name(k))) {
                    json_object_set_new(m, e, typed(x, ps, false));
                }
                free(e);
            }
        } else if (json_is_object(ap)) {
            json_object_foreach((json_t *)v, k, x) json_object_set_new(m, k, typed(x, ap, false));
        }
        return json_pack("{s:o}", "m", m);
    }
    if (type && strcmp(type, "array") == 0 && json_is_array(v)) {
        const json_t *items = json_object_get(s, "items");
        json_t *out = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) json_array_append_new(out, typed(x, items, false));
        return out;
    }
    if (type && strcmp(type, "string") == 0 && json_is_string(v))
        return typed_string(v, s);
    if (type && strcmp(type, "number") == 0 && json_is_number(v))
        return json_pack("{s:f}", "d", json_number_value(v));
    return untyped(v);
}

/* ---- the walk (Validator.validate) ---------------------------------------------------- */

struct job {
    char *path;          /* field.Path text; NULL for the root (nil) */
    const char *type;    /* the node's schema type (sts.Type) */
    const json_t *rules; /* x-kubernetes-validations */
    const json_t *schema;
    bool ratchet; /* shouldRatchetError */
};

struct walk {
    json_t *nodes; /* the request's */
    struct job *jobs;
    size_t n, cap;
};

/* Does a rule of the list mention oldSelf? Only then is the old value sent
 * (the helper decides whether the rule really uses it). */
static bool mentions_old_self(const json_t *rules)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (strstr(ks_nz(json_string_value(json_object_get(r, "rule"))), "oldSelf") ||
            strstr(ks_nz(json_string_value(json_object_get(r, "messageExpression"))), "oldSelf"))
            return true;
    }
    return false;
}

static void add_job(struct walk *w, const json_t *v, const json_t *old, const json_t *s,
                    bool resource_root, const char *path, const json_t *rules, bool ratchet)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 16;
        w->jobs = realloc(w->jobs, w->cap * sizeof(*w->jobs));
        if (!w->jobs)
            abort();
    }
    w->jobs[w->n++] = (struct job){
        .path = path ? ks_strdup(path) : NULL,
        .type = ks_nz(json_string_value(json_object_get(s, "type"))),
        .rules = rules,
        .schema = s,
        .ratchet = ratchet,
    };
    json_t *node = json_pack("{s:o,s:O}", "self", typed(v, s, resource_root), "rules", rules);
    if (old && mentions_old_self(rules))
        json_object_set_new(node, "old", typed(old, s, resource_root));
    json_array_append_new(w->nodes, node);
}

/* path's child: "spec" of the root, "spec.replicas"; a map key "m[k]", an
 * index "l[0]" (field.Path). malloc'd */
static char *child_path(const char *path, const char *name)
{
    return path ? ks_printf("%s.%s", path, name) : ks_strdup(name);
}

static char *key_path(const char *path, const char *key)
{
    return ks_printf("%s[%s]", ks_nz(path), key);
}

static void walk(struct walk *w, const json_t *v, const json_t *old, const json_t *s,
                 bool resource_root, const char *path, const struct ks_ratchet *r)
{
    if (!v || json_is_null(v) || !json_is_object(s))
        return;
    if (json_is_null(old))
        old = NULL;
    const json_t *rules = json_object_get(s, "x-kubernetes-validations");
    if (json_array_size(rules))
        add_job(w, v, old, s, resource_root, path, rules, ks_ratchet_should(r));
    /* allOf rules (their own x-kubernetes-validations): ratcheted only
     * through the nearest correlatable ancestor, as schema ratcheting does
     * not ratchet allOf */
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(s, "allOf"), i, x)
    {
        const json_t *ar = json_object_get(x, "x-kubernetes-validations");
        struct ks_ratchet pr = {.cur = NULL, .nearest = r->nearest};
        if (json_array_size(ar))
            add_job(w, v, old, s, resource_root, path, ar, ks_ratchet_should(&pr));
    }
    if (json_is_object(v)) {
        /* MapIsCorrelatable: granular (the default) and atomic maps */
        const char *mt = json_string_value(json_object_get(s, "x-kubernetes-map-type"));
        bool correlatable = !mt || strcmp(mt, "granular") == 0 || strcmp(mt, "atomic") == 0;
        const json_t *ap = json_object_get(s, "additionalProperties");
        const json_t *props = json_object_get(s, "properties");
        const char *k;
        if (json_is_object(ap) && has_rules(ap)) {
            json_object_foreach((json_t *)v, k, x)
            {
                char *p = key_path(path, k);
                struct ks_corr cc;
                struct ks_ratchet cr = ks_ratchet_key(r, k, &cc);
                walk(w, x, correlatable ? json_object_get(old, k) : NULL, ap,
                     is_true(ap, "x-kubernetes-embedded-resource"), p, &cr);
                free(p);
            }
        }
        json_object_foreach((json_t *)v, k, x)
        {
            const json_t *ps = json_object_get(props, k);
            if (!ps || !has_rules(ps))
                continue;
            char *p = child_path(path, k);
            struct ks_corr cc;
            struct ks_ratchet cr = ks_ratchet_key(r, k, &cc);
            walk(w, x, correlatable ? json_object_get(old, k) : NULL, ps,
                 is_true(ps, "x-kubernetes-embedded-resource"), p, &cr);
            free(p);
        }
    } else if (json_is_array(v)) {
        const json_t *items = json_object_get(s, "items");
        if (!has_rules(items))
            return;
        json_array_foreach(v, i, x)
        {
            char *p = ks_printf("%s[%zu]", ks_nz(path), i);
            struct ks_corr cc;
            struct ks_ratchet cr = ks_ratchet_index(r, i, &cc);
            /* only list-type map items correlate for oldSelf (makeMapList) */
            walk(w, x, ks_maplist_get(s, old, x), items,
                 is_true(items, "x-kubernetes-embedded-resource"), p, &cr);
            free(p);
        }
    }
}

/* ---- field errors ------------------------------------------------------------------- */

/* A cause at field; a nil path prints as "<nil>" (field.Path.String). */
#define NIL_PATH(field) ((field) ? (field) : "<nil>")

/* strings.TrimSpace, malloc'd */
static char *trim(const char *s)
{
    while (*s && strchr(" \t\n\r\v\f", *s))
        s++;
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\v\f", s[n - 1]))
        n--;
    return ks_printf("%.*s", (int)n, s);
}

/* ruleErrorString: the trimmed message, else the trimmed rule. malloc'd */
static char *rule_error_string(const json_t *rule)
{
    const char *msg = json_string_value(json_object_get(rule, "message"));
    if (msg && *msg)
        return trim(msg);
    return trim(ks_nz(json_string_value(json_object_get(rule, "rule"))));
}

/* ruleMessageOrDefault. malloc'd */
static char *rule_message_or_default(const json_t *rule)
{
    const char *msg = json_string_value(json_object_get(rule, "message"));
    if (msg && *msg)
        return trim(msg);
    char *r = rule_error_string(rule);
    char *out = ks_printf("failed rule: %s", r);
    free(r);
    return out;
}

/* field.Invalid(path, type, detail) */
static void invalid_type(json_t *causes, const char *field, const char *type, const char *detail)
{
    char *q = ks_go_quote(type);
    ks_cause(causes, "FieldValueInvalid", NIL_PATH(field), "Invalid value: %s: %s", q, detail);
    free(q);
}

/* fieldErrorForReason as a cause (or, ratcheted, its text as a warning). */
static void failed_rule(json_t *causes, json_t *warnings, bool ratchet, const char *field,
                        const char *type, const char *detail, const char *reason)
{
    json_t *one = json_array();
    if (reason && strcmp(reason, "FieldValueForbidden") == 0) {
        ks_cause(one, reason, NIL_PATH(field), "Forbidden: %s", detail);
    } else if (reason && strcmp(reason, "FieldValueRequired") == 0) {
        ks_cause(one, reason, NIL_PATH(field), "Required value: %s", detail);
    } else if (reason && strcmp(reason, "FieldValueDuplicate") == 0) {
        char *q = ks_go_quote(type);
        ks_cause(one, reason, NIL_PATH(field), "Duplicate value: %s", q);
        free(q);
    } else {
        invalid_type(one, field, type, detail);
    }
    json_t *c = json_array_get(one, 0);
    if (ratchet) {
        /* validateExpressions' addErr: warning.AddWarning(ctx, "", e.Error()) */
        if (warnings)
            json_array_append_new(
                warnings, json_sprintf("%s: %s", json_string_value(json_object_get(c, "field")),
                                       json_string_value(json_object_get(c, "message"))));
    } else {
        json_array_append(causes, c);
    }
    json_decref(one);
}

/* The causes of one rule's outcome (validateExpressions). */
static void rule_outcome(const struct job *j, const json_t *rule, const json_t *res, json_t *causes,
                         json_t *warnings)
{
    const char *st = ks_nz(json_string_value(json_object_get(res, "s")));
    const char *field = j->path;
    if (strcmp(st, "error") == 0) {
        const char *err = ks_nz(json_string_value(json_object_get(res, "error")));
        char *res_s = rule_error_string(rule);
        char *d;
        if (json_is_true(json_object_get(res, "compile")))
            d = ks_strdup(err);
        else if (strncmp(err, "no such overload", 16) == 0)
            d = ks_printf("'%s': call arguments did not match a supported operator, function or "
                          "macro signature for rule: %s",
                          err, res_s);
        else
            d = ks_printf("%s evaluating rule: %s", err, res_s);
        invalid_type(causes, field, j->type, d);
        free(d);
        free(res_s);
        return;
    }
    if (strcmp(st, "fail") != 0)
        return;
    char *cur = NULL;
    const char *fp = json_string_value(json_object_get(rule, "fieldPath"));
    char *norm = fp && *fp ? ks_cel_field_path(fp, j->schema) : NULL;
    if (norm && *norm)
        cur = field ? ks_printf("%s.%s", field, norm) : ks_strdup(norm);
    free(norm);
    const char *msg = json_string_value(json_object_get(res, "message"));
    char *detail = msg ? ks_strdup(msg) : rule_message_or_default(rule);
    bool uses_old = json_is_true(json_object_get(res, "uses_old_self"));
    failed_rule(causes, warnings, !uses_old && j->ratchet, cur ? cur : field, j->type, detail,
                json_string_value(json_object_get(rule, "reason")));
    free(detail);
    free(cur);
}

/* hasBlockingErr: NotSupported, Required, TooLong, TooMany, TypeInvalid. */
static bool blocking(const json_t *causes)
{
    static const char *const reasons[] = {"FieldValueNotSupported", "FieldValueRequired",
                                          "FieldValueTooLong",      "FieldValueTooMany",
                                          "FieldValueTypeInvalid",  NULL};
    size_t i;
    json_t *c;
    json_array_foreach(causes, i, c)
    {
        const char *r = ks_nz(json_string_value(json_object_get(c, "reason")));
        for (const char *const *b = reasons; *b; b++)
            if (strcmp(*b, r) == 0)
                return true;
    }
    return false;
}

static int run_rules(const json_t *schema, const json_t *obj, const json_t *old, json_t *causes,
                     json_t *warnings, char **ret_err)
{
    struct walk w = {.nodes = json_array()};
    struct ks_corr root = {.new_v = obj, .old_v = old, .schema = schema, .eq = -1};
    struct ks_ratchet r = {.cur = old ? &root : NULL, .nearest = NULL};
    walk(&w, obj, old, schema, true, NULL, &r);
    int rc = 0;
    json_t *results = NULL;
    if (w.n) {
        json_t *req = json_pack("{s:s,s:O}", "op", "eval", "nodes", w.nodes);
        rc = ks_cel_call(req, &results, ret_err);
        json_decref(req);
        if (rc != 0)
            rc = -EIO;
    }
    for (size_t i = 0; rc == 0 && i < w.n; i++) {
        const json_t *res = json_array_get(results, i);
        size_t k;
        json_t *rule;
        json_array_foreach(w.jobs[i].rules, k, rule)
        {
            rule_outcome(&w.jobs[i], rule, json_array_get(res, k), causes, warnings);
        }
    }
    for (size_t i = 0; i < w.n; i++)
        free(w.jobs[i].path);
    free(w.jobs);
    json_decref(w.nodes);
    json_decref(results);
    return rc;
}

int ks_cr_validate(const json_t *schema, const json_t *obj, const json_t *old, bool status_only,
                   json_t *meta_causes, json_t *warnings, json_t **ret_causes, char **ret_err)
{
    json_t *causes = meta_causes ? meta_causes : json_array();
    json_t *values;
    if (status_only) {
        /* ValidateStatusUpdate: the status schema's validator on status */
        const json_t *st = json_object_get(obj, "status");
        const json_t *ss = json_object_get(json_object_get(schema, "properties"), "status");
        values = st && ss
                     ? ks_schema_validate_values(st, json_object_get(old, "status"), ss, "status")
                     : json_array();
    } else {
        values = ks_schema_validate_values(obj, old, schema, "");
    }
    json_array_extend(causes, values);
    json_decref(values);
    /* ratcheting of the list types, whole objects: the new object's
     * errors only when the old one has none */
    json_t *lists = ks_schema_list_types(obj, schema);
    if (old && json_array_size(lists)) {
        json_t *old_lists = ks_schema_list_types(old, schema);
        if (json_array_size(old_lists))
            json_array_clear(lists);
        json_decref(old_lists);
    }
    json_array_extend(causes, lists);
    json_decref(lists);
    if (has_rules(schema)) {
        if (blocking(causes)) {
            ks_cause(causes, "FieldValueInvalid", NIL_PATH(NULL), "%s",
                     "Invalid value: \"null\": some validation rules were not checked because "
                     "the object was invalid; correct the existing errors to complete validation");
        } else if (run_rules(schema, obj, old, causes, warnings, ret_err) != 0) {
            json_decref(causes);
            return -EIO;
        }
    }
    *ret_causes = causes;
    return 0;
}
