/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's label and field selectors, parsed as the apiserver parses the
 * labelSelector and fieldSelector query parameters, with its error texts
 * (a 400 BadRequest carrying the parser's message):
 *
 *  - labels (staging/src/k8s.io/apimachinery/pkg/labels/selector.go): a
 *    lexer of identifiers, keywords "in"/"notin" and the symbols
 *    = == != ! ( ) , < >; requirements "[!]key", "key OP value",
 *    "key in|notin (v1,v2)", "key > n", "key < n"; errors such as
 *      unable to parse requirement: found '', expected: identifier
 *      found 'b', expected: ',' or 'end of string'
 *    and key/value validation (apimachinery/pkg/util/validation) as
 *      unable to parse requirement: <nil>: Invalid value: "a b": name part
 *      must consist of alphanumeric characters, ...
 *  - fields (apimachinery/pkg/fields/selector.go): comma-separated
 *    "key=value", "key==value", "key!=value" with \ escapes; anything else
 *    is "invalid selector: 'S'; can't understand 'PART'"; a key the kind
 *    does not index is "field label not supported: KEY" (each kind's
 *    GetAttrs / field label conversion funcs, e.g. pkg/apis/core/v1/
 *    conversion.go).
 */
#include "kubesim.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum sel_op { SEL_EQ, SEL_NEQ, SEL_IN, SEL_NOTIN, SEL_EXISTS, SEL_NOTEXISTS, SEL_GT, SEL_LT };

struct sel_req {
    char *key;
    enum sel_op op;
    char **values;
    size_t nvalues;
    const char *absent; /* a field label's value when the field is absent (bound) */
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

static void req_add_value(struct sel_req *r, const char *v, size_t n)
{
    char **nv = realloc(r->values, (r->nvalues + 1) * sizeof(*nv));
    if (!nv)
        abort();
    r->values = nv;
    r->values[r->nvalues] = strndup(v, n);
    if (!r->values[r->nvalues])
        abort();
    r->nvalues++;
}

static void sel_add(struct ks_selector *sel, struct sel_req *r)
{
    struct sel_req *nr = realloc(sel->reqs, (sel->nreqs + 1) * sizeof(*nr));
    if (!nr)
        abort();
    sel->reqs = nr;
    sel->reqs[sel->nreqs++] = *r;
    memset(r, 0, sizeof(*r));
}

static void req_clear(struct sel_req *r)
{
    free(r->key);
    for (size_t j = 0; j < r->nvalues; j++)
        free(r->values[j]);
    free(r->values);
    memset(r, 0, sizeof(*r));
}

/* ---- label selector lexer ------------------------------------------------------- */

enum tok {
    T_ERROR,
    T_END,
    T_CLOSE,
    T_COMMA,
    T_NOT,
    T_DEQ,
    T_EQ,
    T_GT,
    T_ID,
    T_IN,
    T_LT,
    T_NEQ,
    T_NOTIN,
    T_OPEN
};

struct token {
    enum tok t;
    char *lit; /* malloc'd */
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_special(char c)
{
    return c && strchr("=!(),><", c) != NULL;
}

static enum tok symbol_token(const char *s, size_t n)
{
    static const struct {
        const char *s;
        enum tok t;
    } syms[] = {{")", T_CLOSE}, {",", T_COMMA}, {"!", T_NOT},  {"==", T_DEQ}, {"=", T_EQ},
                {">", T_GT},    {"<", T_LT},    {"!=", T_NEQ}, {"(", T_OPEN}};
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
        if (strlen(syms[i].s) == n && strncmp(syms[i].s, s, n) == 0)
            return syms[i].t;
    return T_ERROR;
}

/* The next token at *p (the longest symbol run that is a token, as the
 * apimachinery lexer reads "!=" but "=(" as "=" then "("). */
static struct token lex(const char **p)
{
    struct token k = {T_END, NULL};
    while (is_ws(**p))
        (*p)++;
    const char *s = *p;
    if (!*s) {
        k.lit = ks_strdup("");
        return k;
    }
    if (is_special(*s)) {
        size_t n = 0, best = 0;
        enum tok bt = T_ERROR;
        while (is_special(s[n])) {
            n++;
            enum tok t = symbol_token(s, n);
            if (t != T_ERROR) {
                bt = t;
                best = n;
            } else if (bt != T_ERROR) {
                break;
            }
        }
        if (bt == T_ERROR) {
            k.t = T_ERROR;
            k.lit = ks_printf("error expected: keyword found '%.*s'", (int)n, s);
            *p = s + n;
            return k;
        }
        k.t = bt;
        k.lit = strndup(s, best);
        *p = s + best;
    } else {
        size_t n = 0;
        while (s[n] && !is_special(s[n]) && !is_ws(s[n]))
            n++;
        k.lit = strndup(s, n);
        k.t = strcmp(k.lit, "in") == 0 ? T_IN : strcmp(k.lit, "notin") == 0 ? T_NOTIN : T_ID;
        *p = s + n;
    }
    if (!k.lit)
        abort();
    return k;
}

struct parser {
    struct token *toks;
    size_t n, pos;
};

/* The token at the current position, not consumed. In a value position
 * "in" and "notin" read as identifiers. The literal stays owned by ps. */
static struct token peek(const struct parser *ps, bool values)
{
    struct token k = ps->toks[ps->pos];
    if (values && (k.t == T_IN || k.t == T_NOTIN))
        k.t = T_ID;
    return k;
}

static struct token next(struct parser *ps, bool values)
{
    struct token k = peek(ps, values);
    if (ps->pos + 1 < ps->n)
        ps->pos++;
    return k;
}

/* ---- validation (apimachinery/pkg/util/validation) ------------------------------ */

/* The messages of msgs (@ref steal) "; "-joined as the selector parser
 * joins them, or NULL when there are none. */
static char *joined(json_t *msgs)
{
    char *out = NULL;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        char *n =
            out ? ks_printf("%s; %s", out, json_string_value(m)) : ks_strdup(json_string_value(m));
        free(out);
        out = n;
    }
    json_decref(msgs);
    return out;
}

/* IsQualifiedName's errors for a label key, "; "-joined, or NULL. */
static char *label_key_errors(const char *k)
{
    return joined(ks_msgs_qualified_name(k));
}

/* IsValidLabelValue's errors, or NULL. */
static char *label_value_errors(const char *v)
{
    return joined(ks_msgs_label_value(v));
}

static bool parse_int64(const char *s)
{
    if (!*s)
        return false;
    char *end = NULL;
    errno = 0;
    (void)strtoll(s, &end, 10);
    return errno == 0 && *end == '\0' && !isspace((unsigned char)*s);
}

/* NewRequirement's checks of the values (the key was checked by the
 * parser); the aggregate's message or NULL. */
static char *requirement_errors(const struct sel_req *r)
{
    json_t *errs = json_array();
    if ((r->op == SEL_GT || r->op == SEL_LT) && r->nvalues == 1 && !parse_int64(r->values[0])) {
        char *q = ks_go_quote(r->values[0]);
        json_array_append_new(errs, json_sprintf("values[0]: Invalid value: %s: for 'Gt', 'Lt' "
                                                 "operators, the value must be an integer",
                                                 q));
        free(q);
    }
    for (size_t i = 0; i < r->nvalues; i++) {
        char *e = label_value_errors(r->values[i]);
        if (e) {
            char *q = ks_go_quote(r->values[i]);
            json_array_append_new(
                errs, json_sprintf("values[%zu][%s]: Invalid value: %s: %s", i, r->key, q, e));
            free(q);
            free(e);
        }
    }
    char *out = NULL;
    if (json_array_size(errs) == 1) {
        out = ks_strdup(json_string_value(json_array_get(errs, 0)));
    } else if (json_array_size(errs) > 1) {
        /* utilerrors.aggregate: "[a, b]" */
        out = ks_join(errs, "[", ", ", "]");
    }
    json_decref(errs);
    return out;
}

/* ---- label selector parser --------------------------------------------------------- */

/* One requirement; NULL, or the error (without the "unable to parse
 * requirement: " prefix). */
static char *parse_requirement(struct parser *ps, struct sel_req *r)
{
    struct token k = next(ps, true);
    bool not = false;
    if (k.t == T_NOT) {
        not = true;
        k = next(ps, true);
    }
    if (k.t != T_ID)
        return ks_printf("found '%s', expected: identifier", k.lit);
    char *kerr = label_key_errors(k.lit);
    if (kerr) {
        char *q = ks_go_quote(k.lit);
        char *e = ks_printf("<nil>: Invalid value: %s: %s", q, kerr);
        free(q);
        free(kerr);
        return e;
    }
    r->key = ks_strdup(k.lit);
    enum tok la = peek(ps, true).t;
    if (la == T_END || la == T_COMMA) {
        r->op = not ? SEL_NOTEXISTS : SEL_EXISTS;
        return NULL;
    }
    k = next(ps, false);
    switch (k.t) {
    case T_IN:
        r->op = SEL_IN;
        break;
    case T_NOTIN:
        r->op = SEL_NOTIN;
        break;
    case T_EQ:
    case T_DEQ:
        r->op = SEL_EQ;
        break;
    case T_NEQ:
        r->op = SEL_NEQ;
        break;
    case T_GT:
        r->op = SEL_GT;
        break;
    case T_LT:
        r->op = SEL_LT;
        break;
    default:
        return ks_printf("found '%s', expected: in, notin, =, ==, !=, gt, lt", k.lit);
    }
    if (r->op == SEL_IN || r->op == SEL_NOTIN) {
        k = next(ps, true);
        if (k.t != T_OPEN)
            return ks_printf("found '%s' expected: '('", k.lit);
        struct token first = peek(ps, true);
        if (first.t == T_CLOSE) {
            next(ps, true);
            req_add_value(r, "", 0);
        } else if (first.t == T_ID || first.t == T_COMMA) {
            const char *open_lit = first.lit;
            for (;;) {
                k = next(ps, true);
                if (k.t == T_ID) {
                    req_add_value(r, k.lit, strlen(k.lit));
                    struct token k2 = peek(ps, true);
                    if (k2.t == T_COMMA)
                        continue;
                    if (k2.t == T_CLOSE)
                        break;
                    return ks_printf("found '%s', expected: ',' or ')'", k2.lit);
                } else if (k.t == T_COMMA) {
                    if (r->nvalues == 0)
                        req_add_value(r, "", 0);
                    enum tok t2 = peek(ps, true).t;
                    if (t2 == T_CLOSE) {
                        req_add_value(r, "", 0);
                        break;
                    }
                    if (t2 == T_COMMA)
                        req_add_value(r, "", 0);
                } else {
                    return ks_printf("found '%s', expected: ',', or identifier", k.lit);
                }
            }
            if (next(ps, true).t != T_CLOSE)
                return ks_printf("found '%s', expected: ')'", open_lit);
        } else {
            return ks_printf("found '%s', expected: ',', ')' or identifier", first.lit);
        }
    } else {
        enum tok t = peek(ps, true).t;
        if (t == T_END || t == T_COMMA) {
            req_add_value(r, "", 0);
        } else {
            k = next(ps, true);
            if (k.t != T_ID)
                return ks_printf("found '%s', expected: identifier", k.lit);
            req_add_value(r, k.lit, strlen(k.lit));
        }
    }
    return requirement_errors(r);
}

static char *parse_labels(const char *s, struct ks_selector *sel)
{
    struct parser ps = {0};
    const char *p = s;
    for (;;) {
        struct token k = lex(&p);
        struct token *nt = realloc(ps.toks, (ps.n + 1) * sizeof(*nt));
        if (!nt)
            abort();
        ps.toks = nt;
        ps.toks[ps.n++] = k;
        if (k.t == T_END)
            break;
    }
    char *err = NULL;
    for (;;) {
        struct token k = peek(&ps, true);
        if (k.t == T_END)
            break;
        if (k.t != T_ID && k.t != T_NOT) {
            err = ks_printf("found '%s', expected: !, identifier, or 'end of string'", k.lit);
            break;
        }
        struct sel_req r = {0};
        char *e = parse_requirement(&ps, &r);
        if (e) {
            err = ks_printf("unable to parse requirement: %s", e);
            free(e);
            req_clear(&r);
            break;
        }
        sel_add(sel, &r);
        k = next(&ps, true);
        if (k.t == T_END)
            break;
        if (k.t != T_COMMA) {
            err = ks_printf("found '%s', expected: ',' or 'end of string'", k.lit);
            break;
        }
        struct token k2 = peek(&ps, true);
        if (k2.t != T_ID && k2.t != T_NOT) {
            err = ks_printf("found '%s', expected: identifier after ','", k2.lit);
            break;
        }
    }
    for (size_t i = 0; i < ps.n; i++)
        free(ps.toks[i].lit);
    free(ps.toks);
    return err;
}

/* ---- field selector ------------------------------------------------------------------ */

/* fields.UnescapeValue: \\ \, \= are escapes; another \ or an unescaped ,
 * or = is an error. */
static char *unescape(const char *s, size_t n, char **ret_err)
{
    char *out = malloc(n + 1);
    if (!out)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            if (i + 1 < n && strchr("\\,=", s[i + 1])) {
                out[o++] = s[++i];
                continue;
            }
            *ret_err =
                ks_printf("invalid escape sequence: %.*s", (int)(i + 2 > n ? n - i : 2), s + i);
            free(out);
            return NULL;
        }
        if (s[i] == ',' || s[i] == '=') {
            *ret_err = ks_printf("unescaped %c: %.*s", s[i], (int)n, s);
            free(out);
            return NULL;
        }
        out[o++] = s[i];
    }
    out[o] = '\0';
    return out;
}

static char *parse_fields(const char *s, struct ks_selector *sel)
{
    const char *p = s;
    while (*p) {
        /* A part ends at an unescaped ','. */
        const char *e = p;
        while (*e && *e != ',') {
            if (*e == '\\' && e[1])
                e++;
            e++;
        }
        size_t n = (size_t)(e - p);
        if (n == 0) { /* empty terms are skipped */
            p = *e ? e + 1 : e;
            continue;
        }
        struct sel_req r = {0};
        const char *op = NULL;
        size_t oplen = 0;
        for (size_t i = 0; i < n && !op; i++) {
            if (p[i] == '\\') {
                i++;
            } else if (p[i] == '!' && i + 1 < n && p[i + 1] == '=') {
                op = p + i, oplen = 2, r.op = SEL_NEQ;
            } else if (p[i] == '=') {
                oplen = (i + 1 < n && p[i + 1] == '=') ? 2 : 1;
                op = p + i, r.op = SEL_EQ;
            }
        }
        if (!op)
            return ks_printf("invalid selector: '%s'; can't understand '%.*s'", s, (int)n, p);
        r.key = strndup(p, (size_t)(op - p));
        if (!r.key)
            abort();
        char *err = NULL;
        const char *v = op + oplen;
        char *val = unescape(v, (size_t)(e - v), &err);
        if (!val) {
            req_clear(&r);
            char *m = ks_printf("invalid field selector: %s", err);
            free(err);
            return m;
        }
        req_add_value(&r, val, strlen(val));
        free(val);
        sel_add(sel, &r);
        p = *e ? e + 1 : e;
    }
    return NULL;
}

int ks_selector_parse(const char *s, bool field, struct ks_selector **ret_sel, char **ret_err)
{
    struct ks_selector *sel = calloc(1, sizeof(*sel));
    if (!sel)
        abort();
    sel->field = field;
    char *err = field ? parse_fields(s ? s : "", sel) : parse_labels(s ? s : "", sel);
    if (err) {
        ks_selector_free(sel);
        *ret_err = err;
        return -EINVAL;
    }
    *ret_sel = sel;
    return 0;
}

/* ---- field labels each kind supports ------------------------------------------------------ */

/*
 * The field labels each kind's GetAttrs indexes beyond metadata.name and
 * metadata.namespace, with what it writes when the field is absent: a Go
 * string field is "", a bool one strconv.FormatBool(false).
 */
static const struct field_label {
    const char *key;    /* struct ks_res.key */
    const char *label;  /* the field selector's key */
    const char *absent; /* its value when the object lacks the field */
} field_labels[] = {
    /* pkg/apis/core/v1/conversion.go AddFieldLabelConversionsForPod,
     * pkg/registry/core/pod/strategy.go ToSelectableFields */
    {"pods", "spec.nodeName", ""},
    {"pods", "spec.restartPolicy", ""},
    {"pods", "spec.schedulerName", ""},
    {"pods", "spec.serviceAccountName", ""},
    {"pods", "spec.hostNetwork", "false"},
    {"pods", "status.phase", ""},
    {"pods", "status.podIP", ""},
    {"pods", "status.podIPs", ""},
    {"pods", "status.nominatedNodeName", ""},
    /* ...ForEvent */
    {"events", "involvedObject.kind", ""},
    {"events", "involvedObject.namespace", ""},
    {"events", "involvedObject.name", ""},
    {"events", "involvedObject.uid", ""},
    {"events", "involvedObject.apiVersion", ""},
    {"events", "involvedObject.resourceVersion", ""},
    {"events", "involvedObject.fieldPath", ""},
    {"events", "reason", ""},
    {"events", "reportingComponent", ""},
    {"events", "source", ""},
    {"events", "type", ""},
    /* ...ForNode; pkg/registry/core/node/strategy.go NodeToSelectableFields */
    {"nodes", "spec.unschedulable", "false"},
    /* ...ForNamespace, ForSecret, ForService (pkg/registry/core/service) */
    {"namespaces", "status.phase", ""},
    {"secrets", "type", ""},
    {"services", "spec.clusterIP", ""},
    {"services", "spec.type", ""},
    /* pkg/apis/apps/v1: none beyond metadata; policy/v1 PDB none */
};

static const struct field_label metadata_labels[] = {
    {"", "metadata.name", ""},
    {"", "metadata.namespace", ""},
};

static const struct field_label *field_label(const struct ks_res *def, const char *label)
{
    for (size_t i = 0; i < sizeof(metadata_labels) / sizeof(metadata_labels[0]); i++)
        if (strcmp(metadata_labels[i].label, label) == 0)
            return &metadata_labels[i];
    for (size_t i = 0; i < sizeof(field_labels) / sizeof(field_labels[0]); i++)
        if (strcmp(field_labels[i].key, def->key) == 0 && strcmp(field_labels[i].label, label) == 0)
            return &field_labels[i];
    return NULL;
}

int ks_selector_bind_fields(const struct ks_res *def, struct ks_selector *sel, char **ret_err)
{
    if (!sel)
        return 0;
    for (size_t i = 0; i < sel->nreqs; i++) {
        const struct field_label *fl = field_label(def, sel->reqs[i].key);
        if (!fl) {
            *ret_err = ks_printf("field label not supported: %s", sel->reqs[i].key);
            return -EINVAL;
        }
        sel->reqs[i].absent = fl->absent;
    }
    return 0;
}

/* ---- matching -------------------------------------------------------------------------------- */

/* Field value as a string (absent when the object lacks it), for field
 * selectors. */
static char *field_value(const json_t *obj, const char *path, const char *absent)
{
    const json_t *cur = obj;
    const char *p = path;
    while (*p && cur) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char part[256];
        snprintf(part, sizeof(part), "%.*s", (int)n, p);
        cur = json_is_object(cur) ? json_object_get(cur, part) : NULL;
        p += n + (dot ? 1 : 0);
    }
    if (!cur || json_is_null(cur))
        return ks_strdup(absent ? absent : "");
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

static bool req_match(const struct sel_req *r, const char *val, bool present)
{
    switch (r->op) {
    case SEL_EQ:
        return present && strcmp(val, r->values[0]) == 0;
    case SEL_NEQ:
        return !present || strcmp(val, r->values[0]) != 0;
    case SEL_IN:
    case SEL_NOTIN: {
        bool found = false;
        for (size_t j = 0; present && j < r->nvalues; j++)
            if (strcmp(val, r->values[j]) == 0)
                found = true;
        return r->op == SEL_IN ? found : !found;
    }
    case SEL_EXISTS:
        return present;
    case SEL_GT:
    case SEL_LT: {
        if (!present || !parse_int64(val))
            return false;
        long long a = strtoll(val, NULL, 10), b = strtoll(r->values[0], NULL, 10);
        return r->op == SEL_GT ? a > b : a < b;
    }
    case SEL_NOTEXISTS:
    default:
        return !present;
    }
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
            val = field_value(obj, r->key, r->absent);
            present = true;
        } else {
            const json_t *v = json_object_get(labels, r->key);
            present = json_is_string(v);
            val = ks_strdup(present ? json_string_value(v) : "");
        }
        bool ok = req_match(r, val, present);
        free(val);
        if (!ok)
            return false;
    }
    return true;
}
