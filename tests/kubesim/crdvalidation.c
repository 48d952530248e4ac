/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The apiextensions-apiserver's validation of a CustomResourceDefinition
 * (k8s.io/apiextensions-apiserver v0.36.3,
 * pkg/apis/apiextensions/validation/validation.go:
 * ValidateCustomResourceDefinition and ValidateCustomResourceDefinitionUpdate)
 * for apiextensions.k8s.io/v1 objects, with the core of the structural
 * schema rules (pkg/apiserver/schema/validation.go, ValidateStructural).
 *
 * DESIGN. The apiserver validates the internal type, which the v1 object
 * is converted to first (pkg/apis/apiextensions/v1/conversion.go): when
 * every version carries the same schema, subresources or printer columns,
 * the value moves to the top level and leaves the versions. So the errors
 * of a single-version CRD's schema are at spec.validation.openAPIV3Schema,
 * its subresources at spec.subresources, its columns at
 * spec.additionalPrinterColumns[i]; the conversion webhook's client config
 * is spec.conversion.webhookClientConfig and its versions
 * spec.conversion.conversionReviewVersions; spec.version is versions[0].
 * struct view below is that lifting. A value of an internal type in a
 * message (spec.versions in "must contain unique version names") is
 * printed as Go's json.Marshal prints a struct without json tags: Go field
 * names, every field, zero values included (render_* below).
 *
 * CEL rules are compiled by the CEL helper (cel.c, @bufbuild/cel): a rule
 * or messageExpression that does not parse, names an undeclared variable,
 * function or schema field, or has a plain result of the wrong type is
 * refused as cel/compilation.go words it ("compilation failed: ...");
 * fieldPath is resolved against the schema (ValidFieldPath). Type checking
 * beyond that is not done (@bufbuild/cel has no full checker).
 *
 * Not done (accepted though the apiserver refuses): CEL cost estimation
 * (@bufbuild/cel has no cost estimator: no "estimated rule cost exceeds
 * budget" errors), defaults (pruned,
 * valid against their schema), the completeness rule of structural schemas
 * (a property in allOf/anyOf/oneOf/not must be specified outside),
 * selectableFields, regex
 * compilation of pattern, x509's own parse errors of a caBundle
 * (summed up as "malformed certificate"). Go iterates maps in random
 * order; kubesim reports properties in sorted key order.
 */
#include "kubesim.h"

#include <errno.h>
#include <mbedtls/x509_crt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* ---- field.Error bodies ----------------------------------------------------------- */

#define required ks_required

static void forbidden(json_t *causes, const char *field, const char *detail)
{
    ks_cause(causes, "FieldValueForbidden", field, "Forbidden: %s", detail);
}

/* field.Invalid with a string value */
static void invalid(json_t *causes, const char *field, const char *value, const char *detail)
{
    char *q = ks_go_quote(value);
    ks_cause(causes, "FieldValueInvalid", field, "Invalid value: %s: %s", q, detail);
    free(q);
}

/* field.Invalid with a value already printed (JSON of a non-string) */
static void invalid_raw(json_t *causes, const char *field, const char *value, const char *detail)
{
    ks_cause(causes, "FieldValueInvalid", field, "Invalid value: %s: %s", value, detail);
}

/* Invalid(field, value, prefix + strings.Join(msgs, ",")) when msgs is not
 * empty. @ref steal msgs */
static void invalid_joined(json_t *causes, const char *field, const char *value, const char *prefix,
                           json_t *msgs)
{
    if (json_array_size(msgs) > 0) {
        char *all = ks_strdup(prefix);
        size_t i;
        json_t *m;
        json_array_foreach(msgs, i, m)
        {
            char *next = ks_printf("%s%s%s", all, i > 0 ? "," : "", json_string_value(m));
            free(all);
            all = next;
        }
        invalid(causes, field, value, all);
        free(all);
    }
    json_decref(msgs);
}

/* apimachinery/pkg/util/validation IsDNS1035Label. @ref new */
static json_t *msgs_dns1035(const char *s)
{
    json_t *msgs = json_array();
    size_t n = strlen(s);
    bool ok = n > 0 && s[0] >= 'a' && s[0] <= 'z';
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-';
    if (ok && s[n - 1] == '-')
        ok = false;
    if (n > 63)
        json_array_append_new(msgs, json_string("must be no more than 63 characters"));
    if (!ok)
        json_array_append_new(
            msgs, json_string("a DNS-1035 label must consist of lower case alphanumeric "
                              "characters or '-', start with an alphabetic character, and end "
                              "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                              "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"));
    return msgs;
}

/* ---- Go's json.Marshal of the internal types (no json tags) ----------------------- */

/* Go's json.Marshal of an encoded value: what jansson writes, with
 * encoding/json's HTML escapes (<, >, & as \u003c, \u003e, \u0026; they
 * only occur inside strings). Map keys must already be in Go's order
 * (sorted) and struct fields in field order. malloc'd */
static char *go_json(const json_t *v)
{
    if (!v)
        return ks_strdup("null");
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s)
        return ks_strdup("null");
    size_t extra = 0;
    for (const char *c = s; *c; c++)
        if (*c == '<' || *c == '>' || *c == '&')
            extra += 5;
    if (!extra)
        return s;
    char *out = malloc(strlen(s) + extra + 1);
    if (!out)
        abort();
    char *o = out;
    for (const char *c = s; *c; c++) {
        if (*c == '<' || *c == '>' || *c == '&') {
            snprintf(o, 7, "\\u%04x", (unsigned)(unsigned char)*c);
            o += 6;
        } else {
            *o++ = *c;
        }
    }
    *o = '\0';
    free(s);
    return out;
}

/* A deep copy with every object's keys in sorted order (Go marshals a
 * map[string]interface{} so); null for NULL. @ref new */
static json_t *sorted_copy(const json_t *v);
static json_t *sorted_keys(const json_t *o);

static char *dump(const json_t *v)
{
    json_t *c = sorted_copy(v);
    char *s = go_json(c);
    json_decref(c);
    return s;
}

/* Appends "Key":value to o (an object being built, in Go field order). */
static void put(json_t *o, const char *k, json_t *v)
{
    json_object_set_new(o, k, v ? v : json_null());
}

static json_t *copy_or_null(const json_t *v)
{
    return v ? json_deep_copy(v) : json_null();
}

static json_t *str_or_empty(const json_t *o, const char *k)
{
    return json_string(str(o, k));
}

static json_t *bool_of(const json_t *o, const char *k)
{
    return json_boolean(json_is_true(json_object_get(o, k)));
}

/* How a member of the v1 object becomes a field of the internal one: a
 * string ("" when absent), a copy (null when absent), a bool (false when
 * absent), an integer (0 when absent), a copy with sorted keys. */
enum conv { AS_STR, AS_COPY, AS_BOOL, AS_INT, AS_SORTED };
struct field {
    const char *go, *json;
    enum conv how;
};

/* Appends each field of table to o, in the table's (Go's) order. */
static void put_fields(json_t *o, const json_t *src, const struct field *table, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_object_get(src, table[i].json);
        json_t *out;
        switch (table[i].how) {
        case AS_STR:
            out = str_or_empty(src, table[i].json);
            break;
        case AS_COPY:
            out = copy_or_null(v);
            break;
        case AS_BOOL:
            out = bool_of(src, table[i].json);
            break;
        case AS_INT:
            out = json_integer(json_integer_value(v));
            break;
        default:
            out = sorted_copy(v);
            break;
        }
        put(o, table[i].go, out);
    }
}

#define PUT_FIELDS(o, src, table) put_fields(o, src, table, sizeof(table) / sizeof(table[0]))

/* The leaves of apiextensions.JSONSchemaProps (types_jsonschema.go) before
 * Items, and after ExternalDocs; a rule of x-kubernetes-validations; a
 * printer column; scale; external docs. */
static const struct field schema_head[] = {
    {"ID", "id", AS_STR},
    {"Schema", "$schema", AS_STR},
    {"Ref", "$ref", AS_COPY},
    {"Description", "description", AS_STR},
    {"Type", "type", AS_STR},
    {"Nullable", "nullable", AS_BOOL},
    {"Format", "format", AS_STR},
    {"Title", "title", AS_STR},
    {"Default", "default", AS_SORTED},
    {"Maximum", "maximum", AS_COPY},
    {"ExclusiveMaximum", "exclusiveMaximum", AS_BOOL},
    {"Minimum", "minimum", AS_COPY},
    {"ExclusiveMinimum", "exclusiveMinimum", AS_BOOL},
    {"MaxLength", "maxLength", AS_COPY},
    {"MinLength", "minLength", AS_COPY},
    {"Pattern", "pattern", AS_STR},
    {"MaxItems", "maxItems", AS_COPY},
    {"MinItems", "minItems", AS_COPY},
    {"UniqueItems", "uniqueItems", AS_BOOL},
    {"MultipleOf", "multipleOf", AS_COPY},
    {"Enum", "enum", AS_SORTED},
    {"MaxProperties", "maxProperties", AS_COPY},
    {"MinProperties", "minProperties", AS_COPY},
    {"Required", "required", AS_COPY},
};
static const struct field schema_tail[] = {
    {"Example", "example", AS_SORTED},
    {"XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields", AS_COPY},
    {"XEmbeddedResource", "x-kubernetes-embedded-resource", AS_BOOL},
    {"XIntOrString", "x-kubernetes-int-or-string", AS_BOOL},
    {"XListMapKeys", "x-kubernetes-list-map-keys", AS_COPY},
    {"XListType", "x-kubernetes-list-type", AS_COPY},
    {"XMapType", "x-kubernetes-map-type", AS_COPY},
};
static const struct field rule_fields[] = {
    {"Rule", "rule", AS_STR},
    {"Message", "message", AS_STR},
    {"MessageExpression", "messageExpression", AS_STR},
    {"Reason", "reason", AS_COPY},
    {"FieldPath", "fieldPath", AS_STR},
    {"OptionalOldSelf", "optionalOldSelf", AS_COPY},
};
static const struct field column_fields[] = {
    {"Name", "name", AS_STR},         {"Type", "type", AS_STR},
    {"Format", "format", AS_STR},     {"Description", "description", AS_STR},
    {"Priority", "priority", AS_INT}, {"JSONPath", "jsonPath", AS_STR},
};
static const struct field scale_fields[] = {
    {"SpecReplicasPath", "specReplicasPath", AS_STR},
    {"StatusReplicasPath", "statusReplicasPath", AS_STR},
    {"LabelSelectorPath", "labelSelectorPath", AS_COPY},
};
static const struct field docs_fields[] = {
    {"Description", "description", AS_STR},
    {"URL", "url", AS_STR},
};

static json_t *render_schema(const json_t *s);

static json_t *render_schema_list(const json_t *a)
{
    if (!json_is_array(a))
        return json_null();
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(a, i, v) json_array_append_new(out, render_schema(v));
    return out;
}

/* The object m with its keys sorted and each value as each() renders it.
 * @ref new */
static json_t *map_sorted(const json_t *m, json_t *(*each)(const json_t *))
{
    json_t *out = json_object();
    json_t *keys = sorted_keys(m);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const char *key = json_string_value(k);
        json_object_set_new(out, key, each(json_object_get(m, key)));
    }
    json_decref(keys);
    return out;
}

static json_t *render_schema_map(const json_t *m)
{
    if (!json_is_object(m))
        return json_null();
    return map_sorted(m, render_schema);
}

/* JSONSchemaPropsOrBool */
static json_t *render_or_bool(const json_t *v)
{
    if (!v)
        return json_null();
    if (json_is_boolean(v))
        return json_pack("{s:b,s:n}", "Allows", json_is_true(v), "Schema");
    return json_pack("{s:b,s:o}", "Allows", 1, "Schema", render_schema(v));
}

/* apiextensions.JSONSchemaProps (types_jsonschema.go), field by field. */
static json_t *render_schema(const json_t *s)
{
    if (!json_is_object(s))
        return json_null();
    json_t *o = json_object();
    PUT_FIELDS(o, s, schema_head);
    const json_t *items = json_object_get(s, "items");
    if (json_is_array(items))
        put(o, "Items", json_pack("{s:n,s:o}", "Schema", "JSONSchemas", render_schema_list(items)));
    else if (items)
        put(o, "Items", json_pack("{s:o,s:n}", "Schema", render_schema(items), "JSONSchemas"));
    else
        put(o, "Items", NULL);
    put(o, "AllOf", render_schema_list(json_object_get(s, "allOf")));
    put(o, "OneOf", render_schema_list(json_object_get(s, "oneOf")));
    put(o, "AnyOf", render_schema_list(json_object_get(s, "anyOf")));
    put(o, "Not", json_object_get(s, "not") ? render_schema(json_object_get(s, "not")) : NULL);
    put(o, "Properties", render_schema_map(json_object_get(s, "properties")));
    put(o, "AdditionalProperties", render_or_bool(json_object_get(s, "additionalProperties")));
    put(o, "PatternProperties", render_schema_map(json_object_get(s, "patternProperties")));
    put(o, "Dependencies", sorted_copy(json_object_get(s, "dependencies")));
    put(o, "AdditionalItems", render_or_bool(json_object_get(s, "additionalItems")));
    put(o, "Definitions", render_schema_map(json_object_get(s, "definitions")));
    const json_t *docs = json_object_get(s, "externalDocs");
    json_t *d = docs ? json_object() : NULL;
    if (d)
        PUT_FIELDS(d, docs, docs_fields);
    put(o, "ExternalDocs", d);
    PUT_FIELDS(o, s, schema_tail);
    const json_t *rules = json_object_get(s, "x-kubernetes-validations");
    json_t *rr = json_is_array(rules) ? json_array() : NULL;
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        json_t *one = json_object();
        PUT_FIELDS(one, r, rule_fields);
        json_array_append_new(rr, one);
    }
    put(o, "XValidations", rr);
    return o;
}

static json_t *render_subresources(const json_t *sub)
{
    if (!sub)
        return json_null();
    json_t *o = json_object();
    put(o, "Status", json_object_get(sub, "status") ? json_object() : NULL);
    const json_t *sc = json_object_get(sub, "scale");
    json_t *scale = sc ? json_object() : NULL;
    if (scale)
        PUT_FIELDS(scale, sc, scale_fields);
    put(o, "Scale", scale);
    return o;
}

static json_t *render_columns(const json_t *cols)
{
    if (!json_is_array(cols))
        return json_null();
    json_t *a = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(cols, i, c)
    {
        json_t *o = json_object();
        PUT_FIELDS(o, c, column_fields);
        json_array_append_new(a, o);
    }
    return a;
}

/* ---- the internal view of a v1 spec (v1/conversion.go) -------------------------- */

struct view {
    const json_t *spec;
    const json_t *versions;
    /* the per-version value every version shares, lifted to the top (the
     * version's own then counts as absent), else NULL */
    const json_t *schema;
    const json_t *subresources;
    const json_t *columns;
    bool schema_lifted, sub_lifted, cols_lifted;
};

/* Semantic.DeepEqual: an empty list equals an absent one. */
static bool same(const json_t *a, const json_t *b)
{
    if (json_is_array(a) && json_array_size(a) == 0)
        a = NULL;
    if (json_is_array(b) && json_array_size(b) == 0)
        b = NULL;
    if (!a || !b)
        return a == b;
    return json_equal(a, b);
}

static bool all_same(const json_t *versions, const char *key)
{
    const json_t *first = json_object_get(json_array_get(versions, 0), key);
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        if (!same(json_object_get(v, key), first))
            return false;
    }
    return true;
}

static void view_init(struct view *w, const json_t *spec)
{
    memset(w, 0, sizeof(*w));
    w->spec = spec;
    w->versions = json_object_get(spec, "versions");
    if (json_array_size(w->versions) == 0)
        return;
    const json_t *v0 = json_array_get(w->versions, 0);
    w->schema_lifted = all_same(w->versions, "schema");
    w->sub_lifted = all_same(w->versions, "subresources");
    w->cols_lifted = all_same(w->versions, "additionalPrinterColumns");
    if (w->schema_lifted)
        w->schema = json_object_get(v0, "schema");
    if (w->sub_lifted)
        w->subresources = json_object_get(v0, "subresources");
    if (w->cols_lifted && json_array_size(json_object_get(v0, "additionalPrinterColumns")))
        w->columns = json_object_get(v0, "additionalPrinterColumns");
}

/* The version's own value in the internal object (NULL when lifted). */
static const json_t *own(const struct view *w, const json_t *v, const char *key)
{
    if ((strcmp(key, "schema") == 0 && w->schema_lifted) ||
        (strcmp(key, "subresources") == 0 && w->sub_lifted) ||
        (strcmp(key, "additionalPrinterColumns") == 0 && w->cols_lifted))
        return NULL;
    return json_object_get(v, key);
}

/* []apiextensions.CustomResourceDefinitionVersion as json.Marshal prints it. malloc'd */
static char *render_versions(const struct view *w)
{
    if (!json_is_array(w->versions))
        return ks_strdup("null");
    json_t *a = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(w->versions, i, v)
    {
        json_t *o = json_object();
        put(o, "Name", str_or_empty(v, "name"));
        put(o, "Served", bool_of(v, "served"));
        put(o, "Storage", bool_of(v, "storage"));
        put(o, "Deprecated", bool_of(v, "deprecated"));
        put(o, "DeprecationWarning", copy_or_null(json_object_get(v, "deprecationWarning")));
        const json_t *sch = own(w, v, "schema");
        const json_t *oas = json_object_get(sch, "openAPIV3Schema");
        put(o, "Schema",
            sch ? json_pack("{s:o}", "OpenAPIV3Schema", oas ? render_schema(oas) : json_null())
                : NULL);
        put(o, "Subresources", render_subresources(own(w, v, "subresources")));
        put(o, "AdditionalPrinterColumns", render_columns(own(w, v, "additionalPrinterColumns")));
        const json_t *sel = json_object_get(v, "selectableFields");
        json_t *sf = json_is_array(sel) ? json_array() : NULL;
        size_t j;
        json_t *f;
        json_array_foreach(sel, j, f)
            json_array_append_new(sf, json_pack("{s:o}", "JSONPath", str_or_empty(f, "jsonPath")));
        put(o, "SelectableFields", sf);
        json_array_append_new(a, o);
    }
    char *s = go_json(a);
    json_decref(a);
    return s;
}

/* ---- schemas ------------------------------------------------------------------------ */

/* Does any schema in s (at any depth) have key? apiextensions.SchemaHas */
static bool schema_has(const json_t *s, bool (*pred)(const json_t *))
{
    if (!json_is_object(s))
        return false;
    if (pred(s))
        return true;
    static const char *const one[] = {"items", "not", "additionalProperties", "additionalItems",
                                      NULL};
    static const char *const lists[] = {"allOf", "oneOf", "anyOf", "items", NULL};
    static const char *const maps[] = {"properties", "patternProperties", "definitions",
                                       "dependencies", NULL};
    for (const char *const *k = one; *k; k++)
        if (schema_has(json_object_get(s, *k), pred))
            return true;
    size_t i;
    json_t *v;
    for (const char *const *k = lists; *k; k++)
        json_array_foreach(json_object_get(s, *k), i, v) if (schema_has(v, pred)) return true;
    const char *key;
    for (const char *const *k = maps; *k; k++)
        json_object_foreach(json_object_get(s, *k), key, v) if (schema_has(v, pred)) return true;
    return false;
}

static bool has_default(const json_t *s)
{
    return json_object_get(s, "default") != NULL;
}

static bool bad_type(const json_t *s)
{
    static const char *const types[] = {"string", "number", "integer", "boolean",
                                        "array",  "object", NULL};
    const char *t = str(s, "type");
    if (!*t)
        return false;
    for (const char *const *k = types; *k; k++)
        if (strcmp(t, *k) == 0)
            return false;
    return true;
}

/* Does the spec (any version's schema) have defaults / extensions? */
static bool spec_has(const json_t *spec, bool (*pred)(const json_t *))
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "versions"), i, v)
    {
        if (schema_has(json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"), pred))
            return true;
    }
    return false;
}

/* Sorted keys of an object. @ref new */
static json_t *sorted_keys(const json_t *o)
{
    json_t *keys = json_array();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v)
    {
        size_t at = json_array_size(keys);
        while (at > 0 && strcmp(json_string_value(json_array_get(keys, at - 1)), k) > 0)
            at--;
        json_array_insert_new(keys, at, json_string(k));
    }
    return keys;
}

static json_t *sorted_copy(const json_t *v)
{
    if (!v)
        return json_null();
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) json_array_append_new(a, sorted_copy(x));
        return a;
    }
    if (!json_is_object(v))
        return json_deep_copy(v);
    return map_sorted(v, sorted_copy);
}

enum level { ROOT, ITEM, FIELD };

/* pkg/apiserver/schema/validation.go validateStructuralMetadataInvariants at
 * the root: metadata may only restrict name and generateName. */
static bool metadata_only_names(const json_t *md)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)md, k, v)
    {
        if (strcmp(k, "type") == 0 || strcmp(k, "default") == 0)
            continue;
        if (strcmp(k, "properties") == 0) {
            size_t n = json_object_size(v);
            bool name = json_object_get(v, "name") != NULL;
            bool gen = json_object_get(v, "generateName") != NULL;
            if (n == 0 || (n == 2 && name && gen) || (n == 1 && (name || gen)))
                continue;
        }
        return false;
    }
    return true;
}

/* pkg/apiserver/schema/convert.go NewStructural's error for s (its
 * unsupported fields, x-kubernetes-preserve-unknown-fields: false, items
 * given as a list), or NULL; in NewStructural's order. */
static const char *init_error(const json_t *s)
{
    if (!json_is_object(s))
        return NULL;
    static const struct {
        const char *key, *msg;
    } unsupported[] = {
        {"id", "OpenAPIV3Schema 'id' is not supported"},
        {"$schema", "OpenAPIV3Schema 'schema' is not supported"},
        {"$ref", "OpenAPIV3Schema '$ref' is not supported"},
        {"patternProperties", "OpenAPIV3Schema 'patternProperties' is not supported"},
        {"dependencies", "OpenAPIV3Schema 'dependencies' is not supported"},
        {"additionalItems", "OpenAPIV3Schema 'additionalItems' is not supported"},
        {"definitions", "OpenAPIV3Schema 'definitions' is not supported"},
    };
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
        const json_t *v = json_object_get(s, unsupported[i].key);
        bool set = strcmp(unsupported[i].key, "additionalItems") == 0
                       ? v != NULL
                       : (json_string_length(v) > 0 || json_object_size(v) > 0);
        if (set)
            return unsupported[i].msg;
    }
    const char *e = init_error(json_object_get(s, "not"));
    static const char *const lists[] = {"allOf", "anyOf", "oneOf", NULL};
    size_t i;
    json_t *v;
    for (const char *const *l = lists; !e && *l; l++)
        json_array_foreach(json_object_get(s, *l), i, v) if (!e) e = init_error(v);
    if (e)
        return e;
    if (json_is_false(json_object_get(s, "x-kubernetes-preserve-unknown-fields")))
        return "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined";
    const json_t *items = json_object_get(s, "items");
    if (json_is_array(items) && json_array_size(items) > 0)
        return "OpenAPIV3Schema 'items' must be a schema, but is an array";
    if (json_is_object(items) && (e = init_error(items)))
        return e;
    json_t *keys = sorted_keys(json_object_get(s, "properties"));
    json_array_foreach(keys, i, v) if (!e) e =
        init_error(json_object_get(json_object_get(s, "properties"), json_string_value(v)));
    json_decref(keys);
    if (!e && json_is_object(json_object_get(s, "additionalProperties")))
        e = init_error(json_object_get(s, "additionalProperties"));
    return e;
}

/* validateNestedValueValidation: a schema inside allOf, anyOf, oneOf or
 * not may only validate values: no types, generics or extensions. */
static void nested_rules(const json_t *s, const char *path, json_t *errs)
{
    if (!json_is_object(s))
        return;
    static const char *const lists[] = {"anyOf", "allOf", "oneOf", NULL};
    size_t i;
    json_t *v;
    char *p;
    for (const char *const *k = lists; *k; k++)
        json_array_foreach(json_object_get(s, *k), i, v)
        {
            p = ks_printf("%s.%s[%zu]", path, *k, i);
            nested_rules(v, p, errs);
            free(p);
        }
    if (json_object_get(s, "not")) {
        p = ks_printf("%s.not", path);
        nested_rules(json_object_get(s, "not"), p, errs);
        free(p);
    }
    if (json_is_object(json_object_get(s, "items"))) {
        p = ks_printf("%s.items", path);
        nested_rules(json_object_get(s, "items"), p, errs);
        free(p);
    }
    const json_t *props = json_object_get(s, "properties");
    json_t *keys = sorted_keys(props);
    json_array_foreach(keys, i, v)
    {
        p = ks_printf("%s.properties[%s]", path, json_string_value(v));
        nested_rules(json_object_get(props, json_string_value(v)), p, errs);
        free(p);
    }
    json_decref(keys);
    static const struct {
        const char *key, *msg;
    } forbid[] = {
        {"type", "must be empty to be structural"},
        {"additionalProperties", "must be undefined to be structural"},
        {"default", "must be undefined to be structural"},
        {"title", "must be empty to be structural"},
        {"description", "must be empty to be structural"},
        {"nullable", "must be false to be structural"},
        {"x-kubernetes-preserve-unknown-fields", "must be false to be structural"},
        {"x-kubernetes-embedded-resource", "must be false to be structural"},
        {"x-kubernetes-int-or-string", "must be false to be structural"},
        {"x-kubernetes-list-map-keys", "must be empty to be structural"},
        {"x-kubernetes-list-type", "must be undefined to be structural"},
        {"x-kubernetes-map-type", "must be undefined to be structural"},
        {"x-kubernetes-validations", "must be empty to be structural"},
    };
    for (size_t f = 0; f < sizeof(forbid) / sizeof(forbid[0]); f++) {
        const json_t *x = json_object_get(s, forbid[f].key);
        /* the zero values NewStructural does not keep */
        if (!x || json_is_false(x) || json_is_null(x) ||
            (json_is_string(x) && !json_string_length(x) &&
             strcmp(forbid[f].key, "x-kubernetes-list-type") != 0 &&
             strcmp(forbid[f].key, "x-kubernetes-map-type") != 0) ||
            (json_is_array(x) && !json_array_size(x)))
            continue;
        p = ks_printf("%s.%s", path, forbid[f].key);
        forbidden(errs, p, forbid[f].msg);
        free(p);
    }
    if (json_object_get(props, "metadata")) {
        p = ks_printf("%s.properties[metadata]", path);
        forbidden(errs, p, "must not be specified in a nested context");
        free(p);
    }
}

/* validateStructuralInvariants (without the completeness rules), its
 * errors into errs. */
static void structural(const json_t *s, enum level lvl, const char *path, json_t *errs)
{
    if (!json_is_object(s))
        return;
    const char *type = str(s, "type");
    const json_t *items = json_object_get(s, "items");
    char *p;
    if (strcmp(type, "array") == 0 && !items) {
        p = ks_printf("%s.items", path);
        required(errs, p, "must be specified");
        free(p);
    }
    if (json_is_object(items)) {
        p = ks_printf("%s.items", path);
        structural(items, ITEM, p, errs);
        free(p);
    }
    const json_t *props = json_object_get(s, "properties");
    json_t *keys = sorted_keys(props);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        p = ks_printf("%s.properties[%s]", path, json_string_value(k));
        structural(json_object_get(props, json_string_value(k)), FIELD, p, errs);
        free(p);
    }
    json_decref(keys);
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (ap) {
        /* false too: NewStructural keeps it as a bool */
        if (lvl == ROOT) {
            p = ks_printf("%s.additionalProperties", path);
            forbidden(errs, p, "must not be used at the root");
            free(p);
        }
        if (json_is_object(ap)) {
            p = ks_printf("%s.additionalProperties", path);
            structural(ap, FIELD, p, errs);
            free(p);
        }
    }
    bool ios = json_is_true(json_object_get(s, "x-kubernetes-int-or-string"));
    bool pres = json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields"));
    bool emb = json_is_true(json_object_get(s, "x-kubernetes-embedded-resource"));
    if (ios && pres) {
        p = ks_printf("%s.x-kubernetes-preserve-unknown-fields", path);
        invalid_raw(errs, p, "true", "must be false if x-kubernetes-int-or-string is true");
        free(p);
    }
    if (ios && emb) {
        p = ks_printf("%s.x-kubernetes-embedded-resource", path);
        invalid_raw(errs, p, "true", "must be false if x-kubernetes-int-or-string is true");
        free(p);
    }
    /* value validations: anyOf/allOf/oneOf/not may not carry types etc.;
     * the int-or-string anyOf pattern is exempt */
    static const char *const lists[] = {"anyOf", "allOf", "oneOf", NULL};
    for (const char *const *l = lists; *l; l++) {
        if (strcmp(*l, "anyOf") == 0 && ios)
            continue;
        json_t *v;
        json_array_foreach(json_object_get(s, *l), i, v)
        {
            if (strcmp(*l, "allOf") == 0 && i == 0 && ios)
                continue;
            p = ks_printf("%s.%s[%zu]", path, *l, i);
            nested_rules(v, p, errs);
            free(p);
        }
    }
    if (json_object_get(s, "not")) {
        p = ks_printf("%s.not", path);
        nested_rules(json_object_get(s, "not"), p, errs);
        free(p);
    }
    bool check_md = lvl == ROOT || emb;
    if (emb && strcmp(type, "object") != 0) {
        p = ks_printf("%s.type", path);
        if (!*type)
            required(errs, p, "must be object if x-kubernetes-embedded-resource is true");
        else
            invalid(errs, p, type, "must be object if x-kubernetes-embedded-resource is true");
        free(p);
    } else if (!*type && !ios && !pres) {
        p = ks_printf("%s.type", path);
        required(errs, p,
                 lvl == ROOT   ? "must not be empty at the root"
                 : lvl == ITEM ? "must not be empty for specified array items"
                               : "must not be empty for specified object fields");
        free(p);
    }
    if (emb && ap) {
        p = ks_printf("%s.additionalProperties", path);
        forbidden(errs, p, "must not be used if x-kubernetes-embedded-resource is set");
        free(p);
    }
    if (lvl == ROOT && *type && strcmp(type, "object") != 0) {
        p = ks_printf("%s.type", path);
        invalid(errs, p, type, "must be object at the root");
        free(p);
    }
    static const char *const typed[] = {"kind", "apiVersion", NULL};
    for (const char *const *t = typed; check_md && *t; t++) {
        const json_t *f = json_object_get(props, *t);
        if (f && strcmp(str(f, "type"), "string") != 0) {
            p = ks_printf("%s.properties[%s].type", path, *t);
            invalid(errs, p, str(f, "type"), "must be string");
            free(p);
        }
    }
    const json_t *md = json_object_get(props, "metadata");
    if (md) {
        if (check_md && strcmp(str(md, "type"), "object") != 0) {
            p = ks_printf("%s.properties[metadata].type", path);
            invalid(errs, p, str(md, "type"), "must be object");
            free(p);
        }
        if (lvl == ROOT && !metadata_only_names(md)) {
            p = ks_printf("%s.properties[metadata]", path);
            forbidden(errs, p,
                      "must not specify anything other than name and generateName, but metadata "
                      "is implicitly specified");
            free(p);
        }
    }
    if (emb && !pres && json_object_size(props) == 0) {
        p = ks_printf("%s.properties", path);
        required(errs, p,
                 "must not be empty if x-kubernetes-embedded-resource is true without "
                 "x-kubernetes-preserve-unknown-fields");
        free(p);
    }
}

static int cause_cmp(const void *a, const void *b)
{
    const json_t *x = *(const json_t *const *)a;
    const json_t *y = *(const json_t *const *)b;
    /* Error() is "field: body": compare the strings as Go does */
    char *ex = ks_printf("%s: %s", str(x, "field"), str(x, "message"));
    char *ey = ks_printf("%s: %s", str(y, "field"), str(y, "message"));
    int c = strcmp(ex, ey);
    free(ex);
    free(ey);
    return c;
}

/* ValidateStructural: the errors sorted by their Error() string. */
static void validate_structural(const json_t *s, const char *path, json_t *causes)
{
    json_t *errs = json_array();
    structural(s, ROOT, path, errs);
    size_t n = json_array_size(errs);
    json_t **v = calloc(n ? n : 1, sizeof(*v));
    if (!v)
        abort();
    for (size_t i = 0; i < n; i++)
        v[i] = json_array_get(errs, i);
    qsort(v, n, sizeof(*v), cause_cmp);
    for (size_t i = 0; i < n; i++)
        json_array_append(causes, v[i]);
    free(v);
    json_decref(errs);
}

/* strings.TrimSpace's emptiness, ASCII whitespace only */
static bool blank(const char *s)
{
    for (; *s; s++)
        if (!strchr(" \t\n\r\v\f", *s))
            return false;
    return true;
}

static bool has_newlines(const char *s)
{
    return strpbrk(s, "\r\n") != NULL;
}

/* The x-kubernetes-validations entry rules that need no CEL compiler
 * (ValidateCustomResourceDefinitionOpenAPISchema). */
static void validate_rule(const json_t *r, const json_t *s, const char *base, json_t *causes)
{
    const char *rule = str(r, "rule");
    const char *msg = str(r, "message");
    const char *mexpr = str(r, "messageExpression");
    const char *fp = str(r, "fieldPath");
    /* the trimmed texts */
    while (*rule && strchr(" \t\n\r\v\f", *rule))
        rule++;
    while (*msg && strchr(" \t\n\r\v\f", *msg))
        msg++;
    size_t rn = strlen(rule), mn = strlen(msg);
    while (rn && strchr(" \t\n\r\v\f", rule[rn - 1]))
        rn--;
    while (mn && strchr(" \t\n\r\v\f", msg[mn - 1]))
        mn--;
    char *trule = ks_printf("%.*s", (int)rn, rule);
    char *tmsg = ks_printf("%.*s", (int)mn, msg);
    char *p = NULL;
    if (!*trule) {
        p = ks_printf("%s.rule", base);
        required(causes, p, "rule is not specified");
    } else if (*str(r, "message") && !*tmsg) {
        p = ks_printf("%s.message", base);
        invalid(causes, p, str(r, "message"), "must be non-empty if specified");
    } else if (has_newlines(tmsg)) {
        p = ks_printf("%s.message", base);
        invalid(causes, p, str(r, "message"), "must not contain line breaks");
    } else if (has_newlines(trule) && !*tmsg) {
        p = ks_printf("%s.message", base);
        required(causes, p, "message must be specified if rule contains line breaks");
    }
    free(p);
    p = NULL;
    if (*mexpr && blank(mexpr)) {
        p = ks_printf("%s.messageExpression", base);
        required(causes, p, "messageExpression must be non-empty if specified");
        free(p);
    }
    const json_t *reason = json_object_get(r, "reason");
    if (json_is_string(reason)) {
        static const char *const reasons[] = {"FieldValueDuplicate", "FieldValueForbidden",
                                              "FieldValueInvalid", "FieldValueRequired", NULL};
        bool ok = false;
        for (const char *const *x = reasons; *x; x++)
            ok = ok || strcmp(*x, json_string_value(reason)) == 0;
        if (!ok) {
            p = ks_printf("%s.reason", base);
            ks_not_supported_list(causes, p, json_string_value(reason), reasons);
            free(p);
        }
    }
    if (*fp && blank(fp)) {
        p = ks_printf("%s.fieldPath", base);
        invalid(causes, p, fp, "must be non-empty if specified");
        free(p);
    }
    if (has_newlines(fp)) {
        p = ks_printf("%s.fieldPath", base);
        invalid(causes, p, fp, "must not contain line breaks");
        free(p);
    }
    char *norm = *fp ? ks_cel_field_path(fp, s) : NULL;
    if (*fp && !norm) {
        /* pathValid: ValidFieldPath against the rule's schema */
        p = ks_printf("%s.fieldPath", base);
        invalid(causes, p, fp, "must be a valid path");
        free(p);
    }
    free(norm);
    free(tmsg);
    free(trule);
}

/* ---- CEL: the rules' compilation (cel/compilation.go, Compile) ------------------------ */

/* A schema node with rules, for one compile request. */
struct cel_node {
    const json_t *schema;
    char *path;           /* ...openAPIV3Schema.properties[spec] */
    char *uncorrelatable; /* forbidOldSelfValidations: the outermost list not of type map */
    bool resource_root;   /* the root, an embedded resource */
};

struct cel_nodes {
    struct cel_node *v;
    size_t n, cap;
};

/* Has causes (from index first) at path or under it: schema errors, which
 * keep upstream from compiling the rules of that subtree. */
static bool subtree_has_causes(const json_t *causes, size_t first, size_t end, const char *path)
{
    size_t n = strlen(path);
    for (size_t i = first; i < end; i++) {
        const char *f = str(json_array_get(causes, i), "field");
        if (strncmp(f, path, n) == 0 && (f[n] == '\0' || f[n] == '.' || f[n] == '['))
            return true;
    }
    return false;
}

/* The nodes in the order ValidateCustomResourceDefinitionOpenAPISchema
 * reports their CEL errors: a node's additionalProperties, properties and
 * items before the node itself. */
static void cel_collect(const json_t *s, const char *path, const char *uncorrelatable, bool rr,
                        struct cel_nodes *out)
{
    if (!json_is_object(s))
        return;
    const json_t *ap = json_object_get(s, "additionalProperties");
    char *p;
    if (json_is_object(ap)) {
        p = ks_printf("%s.additionalProperties", path);
        cel_collect(ap, p, uncorrelatable,
                    json_is_true(json_object_get(ap, "x-kubernetes-embedded-resource")), out);
        free(p);
    }
    json_t *keys = sorted_keys(json_object_get(s, "properties"));
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const json_t *ps = json_object_get(json_object_get(s, "properties"), json_string_value(k));
        p = ks_printf("%s.properties[%s]", path, json_string_value(k));
        cel_collect(ps, p, uncorrelatable,
                    json_is_true(json_object_get(ps, "x-kubernetes-embedded-resource")), out);
        free(p);
    }
    json_decref(keys);
    const json_t *items = json_object_get(s, "items");
    if (json_is_object(items)) {
        /* only the items of map lists correlate (the items of set lists
         * are not correlated for CEL either) */
        const char *lt = str(s, "x-kubernetes-list-type");
        const char *unc = uncorrelatable ? uncorrelatable : strcmp(lt, "map") != 0 ? path : NULL;
        p = ks_printf("%s.items", path);
        cel_collect(items, p, unc,
                    json_is_true(json_object_get(items, "x-kubernetes-embedded-resource")), out);
        free(p);
    }
    if (json_array_size(json_object_get(s, "x-kubernetes-validations")) == 0)
        return;
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 8;
        out->v = realloc(out->v, out->cap * sizeof(*out->v));
        if (!out->v)
            abort();
    }
    out->v[out->n++] = (struct cel_node){
        .schema = s,
        .path = ks_strdup(path),
        .uncorrelatable = uncorrelatable ? ks_strdup(uncorrelatable) : NULL,
        .resource_root = rr,
    };
}

/* The rule as field.Invalid prints an apiextensions.ValidationRule. */
static char *render_rule(const json_t *r)
{
    json_t *one = json_object();
    PUT_FIELDS(one, r, rule_fields);
    char *out = go_json(one);
    json_decref(one);
    return out;
}

/* The compile errors of one rule (validation.go, after cel.Compile). */
static void cel_rule_errors(const struct cel_node *nd, size_t i, const json_t *rule,
                            const json_t *res, json_t *causes)
{
    char *base = ks_printf("%s.x-kubernetes-validations[%zu]", nd->path, i);
    char *p;
    const char *re = json_string_value(json_object_get(res, "rule_error"));
    const char *me = json_string_value(json_object_get(res, "message_error"));
    if (re) {
        char *rr = render_rule(rule);
        p = ks_printf("%s.rule", base);
        invalid_raw(causes, p, rr, re);
        free(p);
        free(rr);
    }
    if (me) {
        char *rr = render_rule(rule);
        p = ks_printf("%s.messageExpression", base);
        invalid_raw(causes, p, rr, me);
        free(p);
        free(rr);
    }
    const json_t *opt = json_object_get(rule, "optionalOldSelf");
    if (json_is_true(json_object_get(res, "uses_old_self"))) {
        if (nd->uncorrelatable) {
            char *m =
                ks_printf("oldSelf cannot be used on the uncorrelatable portion of the schema "
                          "within %s",
                          nd->uncorrelatable);
            p = ks_printf("%s.rule", base);
            invalid(causes, p, str(rule, "rule"), m);
            free(p);
            free(m);
        }
    } else if (json_is_boolean(opt)) {
        p = ks_printf("%s.optionalOldSelf", base);
        invalid_raw(causes, p, json_is_true(opt) ? "true" : "false",
                    "may not be set if oldSelf is not used in rule");
        free(p);
    }
    free(base);
}

/* Every rule of the version schema s (at path) compiled by the CEL helper;
 * kubesim estimates no cost (@bufbuild/cel has no cost estimator). When
 * CEL is unavailable each node with rules is refused; when the helper
 * fails, an InternalError cause as upstream's for a compiler that fails
 * (the handlers answer it with a 500). */
static void cel_compile(const json_t *s, const char *path, size_t first, json_t *causes)
{
    struct cel_nodes nodes = {0};
    cel_collect(s, path, NULL, true, &nodes);
    json_t *req_nodes = json_array();
    size_t *sent = calloc(nodes.n ? nodes.n : 1, sizeof(*sent));
    if (!sent)
        abort();
    size_t nsent = 0, end = json_array_size(causes);
    for (size_t i = 0; i < nodes.n; i++) {
        if (subtree_has_causes(causes, first, end, nodes.v[i].path))
            continue;
        sent[nsent++] = i;
        json_array_append_new(
            req_nodes, json_pack("{s:O,s:b,s:O}", "schema", nodes.v[i].schema, "root",
                                 nodes.v[i].resource_root, "rules",
                                 json_object_get(nodes.v[i].schema, "x-kubernetes-validations")));
    }
    json_t *results = NULL;
    char *err = NULL;
    int rc = 0;
    if (nsent) {
        json_t *req = json_pack("{s:s,s:O}", "op", "compile", "nodes", req_nodes);
        rc = ks_cel_call(req, &results, &err);
        json_decref(req);
    }
    for (size_t j = 0; j < nsent; j++) {
        const struct cel_node *nd = &nodes.v[sent[j]];
        if (rc != 0) {
            char *p = ks_printf("%s.x-kubernetes-validations", nd->path);
            if (rc == -ENOTSUP) {
                char *m = ks_printf("kubesim cannot run x-kubernetes-validations rules (%s)", err);
                forbidden(causes, p, m);
                free(m);
            } else {
                ks_cause(causes, "InternalError", p, "Internal error: %s", err);
            }
            free(p);
            continue;
        }
        const json_t *res = json_array_get(results, j);
        size_t i;
        json_t *rule;
        json_array_foreach(json_object_get(nd->schema, "x-kubernetes-validations"), i, rule)
        {
            cel_rule_errors(nd, i, rule, json_array_get(res, i), causes);
        }
    }
    for (size_t i = 0; i < nodes.n; i++) {
        free(nodes.v[i].path);
        free(nodes.v[i].uncorrelatable);
    }
    free(nodes.v);
    free(sent);
    free(err);
    json_decref(results);
    json_decref(req_nodes);
}

struct schema_opts {
    bool valid_type;         /* requireValidPropertyType */
    const char *no_defaults; /* why defaults are forbidden here, or NULL */
    bool in_meta;            /* inside a resource's metadata, kind, apiVersion */
};

/* ValidateCustomResourceDefinitionOpenAPISchema and the v3 standard
 * validator (specStandardValidatorV3.validate). */
static void openapi(const json_t *s, const char *path, const struct schema_opts *o, bool root,
                    json_t *causes)
{
    if (!json_is_object(s))
        return;
    const char *type = str(s, "type");
    char *p;
    if (o->valid_type && bad_type(s)) {
        static const char *const types[] = {"array",  "boolean", "integer", "number",
                                            "object", "string",  NULL};
        p = ks_printf("%s.type", path);
        ks_not_supported_list(causes, p, type, types);
        free(p);
    }
    if (o->no_defaults && json_object_get(s, "default")) {
        p = ks_printf("%s.default", path);
        char *m = ks_printf("must not be set %s", o->no_defaults);
        forbidden(causes, p, m);
        free(m);
        free(p);
    }
    static const struct {
        const char *key, *field, *msg;
    } unsupported[] = {
        {"id", "id", "id is not supported"},
        {"additionalItems", "additionalItems", "additionalItems is not supported"},
        {"patternProperties", "patternProperties", "patternProperties is not supported"},
        {"definitions", "definitions", "definitions is not supported"},
        {"dependencies", "dependencies", "dependencies is not supported"},
        {"$ref", "$ref", "$ref is not supported"},
    };
    for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
        const json_t *v = json_object_get(s, unsupported[i].key);
        if (!v ||
            (json_is_string(v) && !json_string_length(v) &&
             strcmp(unsupported[i].key, "$ref") != 0) ||
            (json_is_object(v) && json_object_size(v) == 0 &&
             (strcmp(unsupported[i].key, "patternProperties") == 0 ||
              strcmp(unsupported[i].key, "definitions") == 0)))
            continue;
        p = ks_printf("%s.%s", path, unsupported[i].field);
        forbidden(causes, p, unsupported[i].msg);
        free(p);
    }
    if (strcmp(type, "null") == 0) {
        p = ks_printf("%s.type", path);
        forbidden(causes, p, "type cannot be set to null, use nullable as an alternative");
        free(p);
    }
    const json_t *items = json_object_get(s, "items");
    if (json_array_size(items) > 0) {
        p = ks_printf("%s.items", path);
        forbidden(causes, p, "items must be a schema object and not an array");
        free(p);
    }
    bool emb = json_is_true(json_object_get(s, "x-kubernetes-embedded-resource"));
    if (o->in_meta && emb) {
        p = ks_printf("%s.x-kubernetes-embedded-resource", path);
        forbidden(causes, p, "must not be used inside of resource meta");
        free(p);
    }
    if (json_is_true(json_object_get(s, "uniqueItems"))) {
        p = ks_printf("%s.uniqueItems", path);
        forbidden(causes, p,
                  "uniqueItems cannot be set to true since the runtime complexity becomes "
                  "quadratic");
        free(p);
    }
    const json_t *props = json_object_get(s, "properties");
    const json_t *ap = json_object_get(s, "additionalProperties");
    if (ap) {
        if (json_object_size(props) && !json_is_true(ap)) {
            p = ks_printf("%s.additionalProperties", path);
            forbidden(causes, p, "additionalProperties and properties are mutual exclusive");
            free(p);
        }
        /* no defaults in additionalProperties of resource meta: pruning
         * would be ambiguous */
        struct schema_opts sub = *o;
        if (o->in_meta)
            sub.no_defaults = "inside additionalProperties applying to object metadata";
        p = ks_printf("%s.additionalProperties", path);
        openapi(ap, p, &sub, false, causes);
        free(p);
    }
    json_t *keys = sorted_keys(props);
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const char *name = json_string_value(k);
        struct schema_opts sub = *o;
        char *why = NULL;
        if ((root || emb) && (strcmp(name, "metadata") == 0 || strcmp(name, "kind") == 0 ||
                              strcmp(name, "apiVersion") == 0)) {
            sub.in_meta = true;
            if (root) {
                why = ks_printf("in top-level %s", name);
                sub.no_defaults = why;
            }
        }
        p = ks_printf("%s.properties[%s]", path, name);
        openapi(json_object_get(props, name), p, &sub, false, causes);
        free(p);
        free(why);
    }
    json_decref(keys);
    if (json_object_get(s, "not")) {
        p = ks_printf("%s.not", path);
        openapi(json_object_get(s, "not"), p, o, false, causes);
        free(p);
    }
    static const char *const lists[] = {"allOf", "oneOf", "anyOf", NULL};
    for (const char *const *l = lists; *l; l++) {
        json_t *v;
        json_array_foreach(json_object_get(s, *l), i, v)
        {
            p = ks_printf("%s.%s[%zu]", path, *l, i);
            openapi(v, p, o, false, causes);
            free(p);
        }
    }
    if (json_is_object(items)) {
        p = ks_printf("%s.items", path);
        openapi(items, p, o, false, causes);
        free(p);
    } else {
        json_t *v;
        json_array_foreach(items, i, v)
        {
            p = ks_printf("%s.items[%zu]", path, i);
            openapi(v, p, o, false, causes);
            free(p);
        }
    }
    const json_t *pres = json_object_get(s, "x-kubernetes-preserve-unknown-fields");
    if (json_is_false(pres)) {
        p = ks_printf("%s.x-kubernetes-preserve-unknown-fields", path);
        invalid_raw(causes, p, "false", "must be true or undefined");
        free(p);
    }
    const json_t *mt = json_object_get(s, "x-kubernetes-map-type");
    if (mt && strcmp(type, "object") != 0) {
        p = ks_printf("%s.type", path);
        if (!*type)
            required(causes, p, "must be object if x-kubernetes-map-type is specified");
        else
            invalid(causes, p, type, "must be object if x-kubernetes-map-type is specified");
        free(p);
    }
    if (json_is_string(mt) && strcmp(json_string_value(mt), "atomic") != 0 &&
        strcmp(json_string_value(mt), "granular") != 0) {
        static const char *const mts[] = {"atomic", "granular", NULL};
        p = ks_printf("%s.x-kubernetes-map-type", path);
        ks_not_supported_list(causes, p, json_string_value(mt), mts);
        free(p);
    }
    const json_t *lt = json_object_get(s, "x-kubernetes-list-type");
    const char *lts = json_string_value(lt);
    if (lt && strcmp(type, "array") != 0) {
        p = ks_printf("%s.type", path);
        if (!*type)
            required(causes, p, "must be array if x-kubernetes-list-type is specified");
        else
            invalid(causes, p, type, "must be array if x-kubernetes-list-type is specified");
        free(p);
    } else if (lts && strcmp(lts, "set") == 0 && json_is_object(items)) {
        /* requireAtomicSetType: a set's items are atomic (the map-type
         * message prints the items' list type, as the apiserver does) */
        const char *it = str(items, "type");
        const json_t *ilt = json_object_get(items, "x-kubernetes-list-type");
        const json_t *imt = json_object_get(items, "x-kubernetes-map-type");
        const char *msg = "must be atomic as item of a list with x-kubernetes-list-type=set";
        if (strcmp(it, "array") == 0 && ilt &&
            strcmp(str(items, "x-kubernetes-list-type"), "atomic") != 0) {
            p = ks_printf("%s.items.x-kubernetes-list-type", path);
            char *d = dump(ilt);
            invalid_raw(causes, p, d, msg);
            free(d);
            free(p);
        } else if (strcmp(it, "object") == 0 &&
                   (!imt || strcmp(str(items, "x-kubernetes-map-type"), "atomic") != 0)) {
            p = ks_printf("%s.items.x-kubernetes-map-type", path);
            char *d = dump(ilt);
            invalid_raw(causes, p, d, msg);
            free(d);
            free(p);
        }
    }
    if (lts && strcmp(lts, "atomic") != 0 && strcmp(lts, "set") != 0 && strcmp(lts, "map") != 0) {
        static const char *const ltv[] = {"atomic", "set", "map", NULL};
        p = ks_printf("%s.x-kubernetes-list-type", path);
        ks_not_supported_list(causes, p, lts, ltv);
        free(p);
    }
    const json_t *mk = json_object_get(s, "x-kubernetes-list-map-keys");
    if (json_array_size(mk) > 0) {
        p = ks_printf("%s.x-kubernetes-list-type", path);
        if (!lt)
            required(causes, p, "must be map if x-kubernetes-list-map-keys is non-empty");
        else if (lts && strcmp(lts, "map") != 0)
            invalid(causes, p, lts, "must be map if x-kubernetes-list-map-keys is non-empty");
        free(p);
    }
    if (lts && strcmp(lts, "map") == 0) {
        if (json_array_size(mk) == 0) {
            p = ks_printf("%s.x-kubernetes-list-map-keys", path);
            required(causes, p, "must not be empty if x-kubernetes-list-type is map");
            free(p);
        }
        if (!items) {
            p = ks_printf("%s.items", path);
            required(causes, p, "must have a schema if x-kubernetes-list-type is map");
            free(p);
        } else if (json_is_object(items) && strcmp(str(items, "type"), "object") != 0) {
            p = ks_printf("%s.items.type", path);
            invalid(causes, p, str(items, "type"),
                    "must be object if parent array's x-kubernetes-list-type is map");
            free(p);
        } else if (json_is_object(items)) {
            const json_t *iprops = json_object_get(items, "properties");
            json_t *mkey;
            json_array_foreach(mk, i, mkey)
            {
                const char *key = json_string_value(mkey) ? json_string_value(mkey) : "";
                const json_t *ks = json_object_get(iprops, key);
                if (ks) {
                    const char *kt = str(ks, "type");
                    if (strcmp(kt, "array") == 0 || strcmp(kt, "object") == 0) {
                        /* the value printed is the items' type */
                        p = ks_printf("%s.items.properties[%s].type", path, key);
                        invalid(causes, p, "object",
                                "must be a scalar type if parent array's "
                                "x-kubernetes-list-type is map");
                        free(p);
                    }
                } else {
                    p = ks_printf("%s.x-kubernetes-list-map-keys", path);
                    char *d = dump(mk);
                    invalid_raw(causes, p, d, "entries must all be names of item properties");
                    free(d);
                    free(p);
                }
                bool dup = false;
                for (size_t j = 0; j < i; j++)
                    dup = dup || json_equal(json_array_get(mk, j), mkey);
                if (dup) {
                    p = ks_printf("%s.x-kubernetes-list-map-keys", path);
                    char *d = dump(mk);
                    invalid_raw(causes, p, d, "must not contain duplicate entries");
                    free(d);
                    free(p);
                }
            }
        }
    }
    /* validateMapListKeysMapSet: a set's or map's items are not nullable;
     * a map's keys are required or defaulted, and not nullable */
    if (json_is_object(items) && lts && (strcmp(lts, "set") == 0 || strcmp(lts, "map") == 0)) {
        if (json_is_true(json_object_get(items, "nullable"))) {
            p = ks_printf("%s.items.nullable", path);
            char *m = ks_printf("cannot be nullable when x-kubernetes-list-type is %s", lts);
            forbidden(causes, p, m);
            free(m);
            free(p);
        }
        const json_t *iprops = json_object_get(items, "properties");
        const json_t *ireq = json_object_get(items, "required");
        json_t *mkey;
        json_array_foreach(strcmp(lts, "map") == 0 ? mk : NULL, i, mkey)
        {
            const char *key = json_string_value(mkey) ? json_string_value(mkey) : "";
            const json_t *ks = json_object_get(iprops, key);
            if (!ks)
                continue;
            bool req = false;
            size_t j;
            json_t *rq;
            json_array_foreach(ireq, j, rq) req = req || json_equal(rq, mkey);
            if (!req && !json_object_get(ks, "default")) {
                p = ks_printf("%s.items.properties[%s].default", path, key);
                required(causes, p,
                         "this property is in x-kubernetes-list-map-keys, so it must have a "
                         "default or be a required property");
                free(p);
            }
            if (json_is_true(json_object_get(ks, "nullable"))) {
                p = ks_printf("%s.items.properties[%s].nullable", path, key);
                forbidden(causes, p,
                          "this property is in x-kubernetes-list-map-keys, so it cannot be "
                          "nullable");
                free(p);
            }
        }
    }
    const json_t *rules = json_object_get(s, "x-kubernetes-validations");
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        char *base = ks_printf("%s.x-kubernetes-validations[%zu]", path, i);
        validate_rule(r, s, base, causes);
        free(base);
    }
}

/* validateCustomResourceDefinitionValidation of a CustomResourceValidation
 * (the v1 version's schema object) at path. */
static void validate_validation(const json_t *val, bool status_enabled, bool need_structural,
                                const struct schema_opts *o, const char *path, json_t *causes)
{
    const json_t *s = json_object_get(val, "openAPIV3Schema");
    if (!json_is_object(s))
        return;
    size_t before = json_array_size(causes);
    char *p;
    if (status_enabled) {
        /* the fields of JSONSchemaProps in order; allowed ones at the root */
        static const struct {
            const char *key;
            bool allowed;
        } fields[] = {
            {"id", false},
            {"$schema", false},
            {"$ref", false},
            {"description", true},
            {"type", true},
            {"nullable", false},
            {"format", true},
            {"title", true},
            {"default", false},
            {"maximum", true},
            {"exclusiveMaximum", true},
            {"minimum", true},
            {"exclusiveMinimum", true},
            {"maxLength", true},
            {"minLength", true},
            {"pattern", true},
            {"maxItems", true},
            {"minItems", true},
            {"uniqueItems", true},
            {"multipleOf", true},
            {"enum", false},
            {"maxProperties", false},
            {"minProperties", false},
            {"required", true},
            {"items", true},
            {"allOf", false},
            {"oneOf", false},
            {"anyOf", false},
            {"not", false},
            {"properties", true},
            {"additionalProperties", false},
            {"patternProperties", false},
            {"dependencies", false},
            {"additionalItems", false},
            {"definitions", false},
            {"externalDocs", true},
            {"example", true},
            {"x-kubernetes-preserve-unknown-fields", true},
            {"x-kubernetes-embedded-resource", false},
            {"x-kubernetes-int-or-string", false},
            {"x-kubernetes-list-map-keys", false},
            {"x-kubernetes-list-type", false},
            {"x-kubernetes-map-type", false},
            {"x-kubernetes-validations", true},
        };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
            const json_t *v = json_object_get(s, fields[i].key);
            /* reflect's zero value: false, "", absent pointers and maps */
            if (!v || json_is_false(v) || (json_is_string(v) && !json_string_length(v)) ||
                (json_is_object(v) && !json_object_size(v) &&
                 strcmp(fields[i].key, "properties") == 0))
                continue;
            if (strcmp(fields[i].key, "type") == 0) {
                if (strcmp(json_string_value(v), "object") != 0) {
                    p = ks_printf("%s.openAPIV3Schema.type", path);
                    invalid(causes, p, json_string_value(v),
                            "only \"object\" is allowed as the type at the root of the schema if "
                            "the status subresource is enabled");
                    free(p);
                    break;
                }
                continue;
            }
            if (!fields[i].allowed) {
                json_t *r = render_schema(s);
                char *rs = go_json(r);
                json_decref(r);
                p = ks_printf("%s.openAPIV3Schema", path);
                invalid_raw(causes, p, rs,
                            "only [Description Type Format Title Maximum ExclusiveMaximum "
                            "Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems "
                            "MinItems UniqueItems MultipleOf Required Items Properties "
                            "ExternalDocs Example XPreserveUnknownFields XValidations] fields "
                            "are allowed at the root of the schema if the status subresource "
                            "is enabled");
                free(p);
                free(rs);
                break;
            }
        }
    }
    if (json_is_true(json_object_get(s, "nullable"))) {
        p = ks_printf("%s.openAPIV3Schema.nullable", path);
        forbidden(causes, p, "nullable cannot be true at the root");
        free(p);
    }
    p = ks_printf("%s.openAPIV3Schema", path);
    const char *init = need_structural ? init_error(s) : NULL;
    if (need_structural && !init)
        validate_structural(s, p, causes);
    openapi(s, p, o, true, causes);
    /* NewStructural's error only when the schema's validation found none
     * (they overlap) */
    if (init && json_array_size(causes) == before)
        invalid(causes, p, "", init);
    else if (need_structural && !init)
        cel_compile(s, p, before, causes);
    free(p);
}

/* ValidateCustomResourceDefinitionSubresources */
static void validate_json_path(const char *s, const char *field, json_t *causes, bool *ret_bad)
{
    *ret_bad = true;
    if (!*s)
        invalid(causes, field, s, "must not be empty");
    else if (s[0] != '.')
        invalid(causes, field, s, "must be a simple json path starting with .");
    else
        *ret_bad = false;
}

static void validate_subresources(const json_t *sub, const char *path, json_t *causes)
{
    const json_t *sc = json_object_get(sub, "scale");
    if (!sc)
        return;
    char *p;
    bool bad;
    static const struct {
        const char *key, *prefix, *msg;
    } paths[] = {
        {"specReplicasPath", ".spec.", "should be a json path under .spec"},
        {"statusReplicasPath", ".status.", "should be a json path under .status"},
    };
    for (size_t i = 0; i < 2; i++) {
        const char *v = str(sc, paths[i].key);
        p = ks_printf("%s.scale.%s", path, paths[i].key);
        if (!*v) {
            required(causes, p, "");
        } else {
            validate_json_path(v, p, causes, &bad);
            if (!bad && strncmp(v, paths[i].prefix, strlen(paths[i].prefix)) != 0)
                invalid(causes, p, v, paths[i].msg);
        }
        free(p);
    }
    const char *ls = str(sc, "labelSelectorPath");
    if (*ls) {
        p = ks_printf("%s.scale.labelSelectorPath", path);
        validate_json_path(ls, p, causes, &bad);
        /* the value is a *string: json.Marshal prints the string */
        if (!bad && strncmp(ls, ".spec.", 6) != 0 && strncmp(ls, ".status.", 8) != 0)
            invalid(causes, p, ls, "should be a json path under either .spec or .status");
        free(p);
    }
}

static bool column_type_ok(const char *t)
{
    static const char *const ok[] = {"integer", "number", "string", "boolean", "date", NULL};
    for (const char *const *k = ok; *k; k++)
        if (strcmp(*k, t) == 0)
            return true;
    return false;
}

/* ValidateCustomResourceColumnDefinition */
static void validate_column(const json_t *col, const char *path, json_t *causes)
{
    static const char *const types = "boolean,date,integer,number,string";
    static const char *const formats = "byte,date,date-time,double,float,int32,int64,password";
    const char *name = str(col, "name");
    const char *type = str(col, "type");
    const char *format = str(col, "format");
    const char *jp = str(col, "jsonPath");
    char *p = ks_printf("%s.name", path);
    char *m;
    if (!*name)
        required(causes, p, "");
    free(p);
    p = ks_printf("%s.type", path);
    m = ks_printf("must be one of %s", types);
    if (!*type)
        required(causes, p, m);
    else if (!column_type_ok(type))
        invalid(causes, p, type, m);
    free(m);
    free(p);
    if (*format) {
        static const char *const okf[] = {"int32", "int64",     "float",    "double", "byte",
                                          "date",  "date-time", "password", NULL};
        bool ok = false;
        for (const char *const *f = okf; *f; f++)
            ok = ok || strcmp(*f, format) == 0;
        if (!ok) {
            p = ks_printf("%s.format", path);
            m = ks_printf("must be one of %s", formats);
            invalid(causes, p, format, m);
            free(m);
            free(p);
        }
    }
    p = ks_printf("%s.JSONPath", path);
    bool bad;
    if (!*jp)
        required(causes, p, "");
    else
        validate_json_path(jp, p, causes, &bad);
    free(p);
}

/* validateDeprecationWarning */
static void validate_deprecation(const json_t *v, const char *path, json_t *causes)
{
    const json_t *w = json_object_get(v, "deprecationWarning");
    if (!json_is_string(w))
        return;
    const char *s = json_string_value(w);
    char *p = ks_printf("%s.deprecationWarning", path);
    if (!json_is_true(json_object_get(v, "deprecated"))) {
        invalid(causes, p, s, "can only be set for deprecated versions");
        free(p);
        return;
    }
    if (strlen(s) > 256)
        invalid(causes, p, s, "must be <= 256 characters long");
    if (!*s)
        invalid(causes, p, s, "must not be an empty string");
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            char *m = ks_printf("must only contain printable UTF-8 characters; non-printable "
                                "character found at index %zu",
                                i);
            invalid(causes, p, s, m);
            free(m);
            break;
        }
    }
    free(p);
}

/* ValidateCustomResourceDefinitionNames */
static void validate_names(const json_t *names, const char *path, json_t *causes)
{
    static const char *const plain[] = {"plural", "singular", NULL};
    char *p;
    for (const char *const *k = plain; *k; k++) {
        const char *v = str(names, *k);
        if (!*v)
            continue;
        p = ks_printf("%s.%s", path, *k);
        invalid_joined(causes, p, v, "", msgs_dns1035(v));
        free(p);
    }
    static const char *const kinds[] = {"kind", "listKind", NULL};
    for (const char *const *k = kinds; *k; k++) {
        const char *v = str(names, *k);
        if (!*v)
            continue;
        char *low = ks_strdup(v);
        for (char *c = low; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                *c = (char)(*c - 'A' + 'a');
        p = ks_printf("%s.%s", path, *k);
        invalid_joined(causes, p, v,
                       "may have mixed case, but should otherwise match: ", msgs_dns1035(low));
        free(p);
        free(low);
    }
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(names, "shortNames"), i, s)
    {
        const char *v = json_string_value(s) ? json_string_value(s) : "";
        p = ks_printf("%s.shortNames[%zu]", path, i);
        invalid_joined(causes, p, v, "", msgs_dns1035(v));
        free(p);
    }
    const char *kind = str(names, "kind");
    if (*kind && strcmp(kind, str(names, "listKind")) == 0) {
        p = ks_printf("%s.listKind", path);
        invalid(causes, p, kind, "kind and listKind may not be the same");
        free(p);
    }
    json_array_foreach(json_object_get(names, "categories"), i, s)
    {
        const char *v = json_string_value(s) ? json_string_value(s) : "";
        p = ks_printf("%s.categories[%zu]", path, i);
        invalid_joined(causes, p, v, "", msgs_dns1035(v));
        free(p);
    }
}

/* ---- conversion ------------------------------------------------------------------- */

static bool accepted_review_version(const char *v)
{
    return strcmp(v, "v1") == 0 || strcmp(v, "v1beta1") == 0;
}

/* hasValidConversionReviewVersionOrEmpty */
static bool review_versions_ok_or_empty(const json_t *list)
{
    if (json_array_size(list) == 0)
        return true;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && accepted_review_version(json_string_value(v)))
            return true;
    }
    return false;
}

static void validate_review_versions(const json_t *list, bool require_recognized, json_t *causes)
{
    const char *f = "spec.conversion.conversionReviewVersions";
    if (json_array_size(list) == 0) {
        required(causes, f, "");
        return;
    }
    bool accepted = false;
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *s = json_string_value(v) ? json_string_value(v) : "";
        char *p = ks_printf("%s[%zu]", f, i);
        bool dup = false;
        for (size_t j = 0; j < i; j++) {
            const char *o = json_string_value(json_array_get(list, j));
            dup = dup || strcmp(o ? o : "", s) == 0;
        }
        if (dup) {
            invalid(causes, p, s, "duplicate version");
            free(p);
            continue;
        }
        json_t *msgs = msgs_dns1035(s);
        size_t k;
        json_t *m;
        json_array_foreach(msgs, k, m) invalid(causes, p, s, json_string_value(m));
        json_decref(msgs);
        if (accepted_review_version(s))
            accepted = true;
        free(p);
    }
    if (require_recognized && !accepted) {
        char *l = dump(list);
        invalid_raw(causes, f, l, "must include at least one of v1, v1beta1");
        free(l);
    }
}

/* Go's encoding/pem Decode over s[0..n): the next block ("-----BEGIN
 * " at the start or after a newline, a type line ending in "-----", the
 * matching END line followed by blanks only, a base64 body), its type
 * (malloc'd) and DER (malloc'd), and the offset where the rest starts.
 * false when no block is left. Headers are not parsed: their block fails
 * to decode and is skipped like an undecodable one. */
static bool pem_next(const char *s, size_t n, char **ret_type, unsigned char **ret_der,
                     size_t *ret_der_len, size_t *ret_rest)
{
    size_t at = 0;
    for (;;) {
        size_t b;
        if (n - at >= 11 && memcmp(s + at, "-----BEGIN ", 11) == 0) {
            b = at + 11;
        } else {
            const char *f = memmem(s + at, n - at, "\n-----BEGIN ", 12);
            if (!f)
                return false;
            b = (size_t)(f - s) + 12;
        }
        const char *nl = memchr(s + b, '\n', n - b);
        size_t le = nl ? (size_t)(nl - s) : n;
        size_t next = nl ? le + 1 : n;
        while (le > b && strchr(" \t\r", s[le - 1]))
            le--;
        at = next;
        if (le - b < 5 || memcmp(s + le - 5, "-----", 5) != 0)
            continue;
        size_t tlen = le - 5 - b;
        size_t end, trailer;
        if (n - next >= 9 && memcmp(s + next, "-----END ", 9) == 0) {
            end = next;
            trailer = next + 9;
        } else {
            const char *e = memmem(s + next, n - next, "\n-----END ", 10);
            if (!e)
                continue;
            end = (size_t)(e - s);
            trailer = end + 10;
        }
        if (n - trailer < tlen + 5 || memcmp(s + trailer, s + b, tlen) != 0 ||
            memcmp(s + trailer + tlen, "-----", 5) != 0)
            continue;
        size_t r = trailer + tlen + 5;
        const char *nl2 = memchr(s + r, '\n', n - r);
        size_t r_end = nl2 ? (size_t)(nl2 - s) : n;
        bool blanks = true;
        for (size_t i = r; i < r_end; i++)
            blanks = blanks && strchr(" \t\r", s[i]) != NULL;
        if (!blanks)
            continue;
        char *body = ks_printf("%.*s", (int)(end - next), s + next);
        for (char *c = body; *c; c++)
            if (*c == '\t')
                *c = ' ';
        bool bad = strchr(body, ':') != NULL;
        size_t dlen = 0;
        unsigned char *der = bad ? NULL : ks_base64_decode(body, &dlen);
        free(body);
        if (!der)
            continue;
        *ret_type = ks_printf("%.*s", (int)tlen, s + b);
        *ret_der = der;
        *ret_der_len = dlen;
        *ret_rest = nl2 ? r_end + 1 : n;
        return true;
    }
}

static bool der_certificate(const unsigned char *der, size_t len)
{
    mbedtls_x509_crt c;
    mbedtls_x509_crt_init(&c);
    int rc = mbedtls_x509_crt_parse_der(&c, der, len);
    mbedtls_x509_crt_free(&c);
    return rc == 0;
}

/* apiserver/pkg/util/webhook ValidateCABundle: client-go's rootCertPool,
 * valid when x509.CertPool.AppendCertsFromPEM takes a certificate, else
 * createErrorParsingCAData's text under TLSConfigFor's "unable to load
 * root certificates". NULL when valid; x509's own parse errors are
 * summed up as "malformed certificate". */
static const char *ca_bundle_error(const char *b64)
{
    size_t len = 0;
    unsigned char *pem = ks_base64_decode(b64, &len);
    if (!pem)
        return NULL; /* the decoder refused it already */
    const char *text = (const char *)pem;
    const char *err = NULL;
    bool any = false;
    size_t at = 0, rest;
    char *type;
    unsigned char *der;
    size_t dlen;
    /* AppendCertsFromPEM */
    while (!any && at < len && pem_next(text + at, len - at, &type, &der, &dlen, &rest)) {
        at += rest;
        any = strcmp(type, "CERTIFICATE") == 0 && der_certificate(der, dlen);
        free(type);
        free(der);
    }
    /* createErrorParsingCAData */
    for (at = 0; !any && !err;) {
        if (at >= len) {
            err = "unable to load root certificates: no valid certificate authority data seen";
        } else if (!pem_next(text + at, len - at, &type, &der, &dlen, &rest)) {
            err = "unable to load root certificates: unable to parse bytes as PEM block";
        } else {
            at += rest;
            if (strcmp(type, "CERTIFICATE") == 0 && !der_certificate(der, dlen))
                err = "unable to load root certificates: failed to parse certificate: x509: "
                      "malformed certificate";
            free(type);
            free(der);
        }
    }
    free(pem);
    return err;
}

static bool established(const json_t *crd)
{
    const char *s = ks_condition_status(crd, "Established");
    return s && strcmp(s, "True") == 0;
}

/* allowInvalidCABundle: on create, before the CRD is established, or
 * when the stored caBundle is invalid already. */
static bool allow_invalid_ca_bundle(const json_t *old)
{
    if (!old)
        return true;
    if (!established(old))
        return true;
    const json_t *conv = json_object_get(json_object_get(old, "spec"), "conversion");
    const json_t *cc = json_object_get(json_object_get(conv, "webhook"), "clientConfig");
    const char *b = str(cc, "caBundle");
    return *b && ca_bundle_error(b) != NULL;
}

static void validate_conversion(const json_t *spec, bool require_recognized, bool allow_bad_ca,
                                json_t *causes)
{
    const json_t *conv = json_object_get(spec, "conversion");
    if (!conv)
        return;
    const char *strategy = str(conv, "strategy");
    static const char *const strategies[] = {"None", "Webhook", NULL};
    if (!*strategy)
        required(causes, "spec.conversion.strategy", "");
    else if (strcmp(strategy, "None") != 0 && strcmp(strategy, "Webhook") != 0)
        ks_not_supported_list(causes, "spec.conversion.strategy", strategy, strategies);
    const json_t *wh = json_object_get(conv, "webhook");
    const json_t *cc = json_object_get(wh, "clientConfig");
    const json_t *rv = json_object_get(wh, "conversionReviewVersions");
    const char *f = "spec.conversion.webhookClientConfig";
    if (strcmp(strategy, "Webhook") == 0) {
        if (!cc) {
            required(causes, f, "required when strategy is set to Webhook");
        } else {
            const json_t *url = json_object_get(cc, "url");
            const json_t *svc = json_object_get(cc, "service");
            if (!url == !svc)
                required(causes, f, "exactly one of url or service is required");
            else if (url)
                ks_validate_webhook_url(causes, "spec.conversion.webhookClientConfig.url",
                                        str(cc, "url"), true);
            else
                ks_validate_webhook_service(causes, "spec.conversion.webhookClientConfig.service",
                                            svc);
            const char *ca = str(cc, "caBundle");
            const char *caerr = *ca && !allow_bad_ca ? ca_bundle_error(ca) : NULL;
            if (caerr)
                invalid(causes, "spec.conversion.webhookClientConfig.caBundle", ca, caerr);
        }
        validate_review_versions(rv, require_recognized, causes);
    } else {
        if (cc)
            forbidden(causes, f, "should not be set when strategy is not set to Webhook");
        if (json_array_size(rv) > 0)
            forbidden(causes, "spec.conversion.conversionReviewVersions",
                      "should not be set when strategy is not set to Webhook");
    }
}

/* ---- the spec ------------------------------------------------------------------------ */

struct opts {
    bool recognized_review_version;
    bool immutable_names;
    bool openapi_schema;
    bool valid_property_type;
    bool allow_invalid_ca_bundle;
};

static bool has_status(const json_t *sub)
{
    return json_object_get(sub, "status") != NULL;
}

static void validate_spec(const json_t *spec, const struct opts *o, json_t *causes)
{
    struct view w;
    view_init(&w, spec);
    const char *group = str(spec, "group");
    bool puf = json_is_true(json_object_get(spec, "preserveUnknownFields"));
    char *p;

    if (!*group) {
        required(causes, "spec.group", "");
    } else {
        json_t *msgs = ks_msgs_dns1123_subdomain(group);
        if (json_array_size(msgs) > 0)
            invalid_joined(causes, "spec.group", group, "", json_incref(msgs));
        else if (!strchr(group, '.'))
            invalid(causes, "spec.group", group, "should be a domain with at least one dot");
        json_decref(msgs);
    }

    const char *scope = str(spec, "scope");
    static const char *const scopes[] = {"Cluster", "Namespaced", NULL};
    if (!*scope)
        required(causes, "spec.scope", "");
    else if (strcmp(scope, "Cluster") != 0 && strcmp(scope, "Namespaced") != 0)
        ks_not_supported_list(causes, "spec.scope", scope, scopes);

    size_t i;
    json_t *v;
    bool lifted_schema = json_object_get(w.schema, "openAPIV3Schema") != NULL;
    if (o->openapi_schema) {
        if (!lifted_schema)
            json_array_foreach(w.versions, i, v)
            {
                if (json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"))
                    continue;
                p = ks_printf("spec.versions[%zu].schema.openAPIV3Schema", i);
                required(causes, p, "");
                free(p);
            }
    } else if (!puf && !lifted_schema) {
        json_array_foreach(w.versions, i, v)
        {
            if (!json_is_true(json_object_get(v, "served")) ||
                json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"))
                continue;
            p = ks_printf("spec.versions[%zu].schema.openAPIV3Schema", i);
            required(causes, p, "because otherwise all fields are pruned");
            free(p);
        }
    }
    /* requireStructuralSchema: true at create, and at update unless the
     * stored spec is not structural, which kubesim never stored */
    bool need_structural = true;
    if (spec_has(spec, has_default) && puf)
        invalid_raw(causes, "spec.preserveUnknownFields", "true",
                    "must be false in order to use defaults in the schema");

    struct schema_opts so = {.valid_type = o->valid_property_type};
    size_t storage = 0;
    bool unique = true;
    json_array_foreach(w.versions, i, v)
    {
        const char *name = str(v, "name");
        if (json_is_true(json_object_get(v, "storage")))
            storage++;
        for (size_t j = 0; j < i; j++)
            if (strcmp(str(json_array_get(w.versions, j), "name"), name) == 0)
                unique = false;
        p = ks_printf("spec.versions[%zu].name", i);
        invalid_joined(causes, p, name, "", msgs_dns1035(name));
        free(p);
        /* validateCustomResourceDefinitionVersion */
        char *vp = ks_printf("spec.versions[%zu]", i);
        validate_deprecation(v, vp, causes);
        const json_t *sub = w.sub_lifted ? w.subresources : json_object_get(v, "subresources");
        p = ks_printf("%s.schema", vp);
        validate_validation(own(&w, v, "schema"), has_status(sub), need_structural, &so, p, causes);
        free(p);
        p = ks_printf("%s.subresources", vp);
        validate_subresources(own(&w, v, "subresources"), p, causes);
        free(p);
        size_t c;
        json_t *col;
        json_array_foreach(own(&w, v, "additionalPrinterColumns"), c, col)
        {
            p = ks_printf("%s.additionalPrinterColumns[%zu]", vp, c);
            validate_column(col, p, causes);
            free(p);
        }
        free(vp);
    }
    if (!unique || storage != 1) {
        char *vs = render_versions(&w);
        if (!unique)
            invalid_raw(causes, "spec.versions", vs, "must contain unique version names");
        if (storage != 1)
            invalid_raw(causes, "spec.versions", vs,
                        "must have exactly one version marked as storage version");
        free(vs);
    }
    if (json_array_size(w.versions) > 0) {
        const char *first = str(json_array_get(w.versions, 0), "name");
        if (*first)
            invalid_joined(causes, "spec.version", first, "", msgs_dns1035(first));
    }

    const json_t *names = json_object_get(spec, "names");
    static const char *const need[] = {"plural", "singular", "kind", "listKind", NULL};
    for (const char *const *k = need; *k; k++) {
        if (*str(names, *k))
            continue;
        p = ks_printf("spec.names.%s", *k);
        required(causes, p, "");
        free(p);
    }
    validate_names(names, "spec.names", causes);

    bool any_status = has_status(w.subresources);
    json_array_foreach(w.versions, i, v) any_status =
        any_status || has_status(own(&w, v, "subresources"));
    validate_validation(w.schema, any_status, need_structural, &so, "spec.validation", causes);
    validate_subresources(w.subresources, "spec.subresources", causes);
    json_array_foreach(w.columns, i, v)
    {
        p = ks_printf("spec.additionalPrinterColumns[%zu]", i);
        validate_column(v, p, causes);
        free(p);
    }

    const json_t *conv = json_object_get(spec, "conversion");
    if (conv && strcmp(str(conv, "strategy"), "None") != 0 && puf) {
        const char *st = str(conv, "strategy");
        invalid(causes, "spec.conversion.strategy", st,
                "must be None if spec.preserveUnknownFields is true");
    }
    validate_conversion(spec, o->recognized_review_version, o->allow_invalid_ca_bundle, causes);
}

/* ---- metadata.name, status, approval ------------------------------------------------ */

/* The name rule joins ValidateObjectMeta's name errors: after the last
 * metadata.name cause already given, else first. */
static void name_rule(const json_t *crd, json_t *causes)
{
    const json_t *spec = json_object_get(crd, "spec");
    const char *name = str(json_object_get(crd, "metadata"), "name");
    char *want =
        ks_printf("%s.%s", str(json_object_get(spec, "names"), "plural"), str(spec, "group"));
    if (strcmp(want, name) != 0) {
        size_t at = 0;
        size_t i;
        json_t *c;
        json_array_foreach(causes, i, c)
        {
            if (strcmp(str(c, "field"), "metadata.name") == 0)
                at = i + 1;
        }
        json_t *one = json_array();
        invalid(one, "metadata.name", name, "must be spec.names.plural+\".\"+spec.group");
        json_array_insert(causes, at, json_array_get(one, 0));
        json_decref(one);
    }
    free(want);
}

static bool protected_group(const char *g)
{
    size_t n = strlen(g);
    return strcmp(g, "k8s.io") == 0 || strcmp(g, "kubernetes.io") == 0 ||
           (n > 7 && strcmp(g + n - 7, ".k8s.io") == 0) ||
           (n > 14 && strcmp(g + n - 14, ".kubernetes.io") == 0);
}

enum approval { APPROVAL_MISSING, APPROVAL_BYPASSED, APPROVED, APPROVAL_INVALID };

#define APPROVAL_ANNOTATION "api-approved.kubernetes.io"

/* apihelpers.GetAPIApprovalState; url.ParseRequestURI's scheme and host
 * approximated as scheme "://" host. */
static enum approval approval_state(const json_t *crd)
{
    const char *a =
        str(json_object_get(json_object_get(crd, "metadata"), "annotations"), APPROVAL_ANNOTATION);
    if (!*a)
        return APPROVAL_MISSING;
    if (strncmp(a, "unapproved", 10) == 0)
        return APPROVAL_BYPASSED;
    const char *sep = strstr(a, "://");
    bool scheme = sep && sep > a && ((a[0] >= 'a' && a[0] <= 'z') || (a[0] >= 'A' && a[0] <= 'Z'));
    for (const char *c = a; scheme && c < sep; c++)
        scheme = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                 strchr("+-.", *c);
    if (scheme && sep[3] && sep[3] != '/' && !strchr(a, ' '))
        return APPROVED;
    return APPROVAL_INVALID;
}

static void validate_approval(const json_t *crd, const json_t *old, json_t *causes)
{
    if (!protected_group(str(json_object_get(crd, "spec"), "group")))
        return;
    enum approval st = approval_state(crd);
    if (old && approval_state(old) == st)
        return;
    const char *f = "metadata.annotations[" APPROVAL_ANNOTATION "]";
    if (st == APPROVAL_MISSING)
        required(causes, f,
                 "protected groups must have approval annotation \"" APPROVAL_ANNOTATION
                 "\", see https://github.com/kubernetes/enhancements/pull/1111");
    else if (st == APPROVAL_INVALID)
        invalid(causes, f,
                str(json_object_get(json_object_get(crd, "metadata"), "annotations"),
                    APPROVAL_ANNOTATION),
                "protected groups must have approval annotation \"" APPROVAL_ANNOTATION
                "\" with either a URL or a reason starting with \"unapproved\", see "
                "https://github.com/kubernetes/enhancements/pull/1111");
}

/* ValidateCustomResourceDefinitionStoredVersions of what PrepareForCreate
 * writes (the first storage version): each storage version must be in
 * the list, and a name counts once (the map entry is deleted when met). */
static void created_stored_versions(const json_t *spec, json_t *causes)
{
    const json_t *versions = json_object_get(spec, "versions");
    const char *first = NULL;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        if (json_is_true(json_object_get(v, "storage"))) {
            first = str(v, "name");
            break;
        }
    }
    if (!first) {
        invalid_raw(causes, "status.storedVersions", "null",
                    "must have at least one stored version");
        return;
    }
    bool met = false;
    json_array_foreach(versions, i, v)
    {
        bool in = !met && strcmp(str(v, "name"), first) == 0;
        if (json_is_true(json_object_get(v, "storage")) && !in) {
            json_t *l = json_pack("[s]", first);
            char *ls = dump(l);
            char *m = ks_printf("must have the storage version %s", str(v, "name"));
            invalid_raw(causes, "status.storedVersions", ls, m);
            free(m);
            free(ls);
            json_decref(l);
        }
        if (in)
            met = true;
    }
}

/* requireOpenAPISchema / requireValidPropertyType of the old spec */
static bool all_versions_have_schema(const json_t *spec)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "versions"), i, v)
    {
        if (!json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"))
            return false;
    }
    return true;
}

void ks_validate_crd(const json_t *crd, const json_t *old, json_t *causes)
{
    const json_t *spec = json_object_get(crd, "spec");
    const json_t *ospec = json_object_get(old, "spec");
    struct opts o = {.recognized_review_version = true,
                     .openapi_schema = true,
                     .valid_property_type = true,
                     .allow_invalid_ca_bundle = true};
    if (old) {
        o.recognized_review_version = review_versions_ok_or_empty(
            json_object_get(json_object_get(json_object_get(ospec, "conversion"), "webhook"),
                            "conversionReviewVersions"));
        o.immutable_names = established(old);
        o.openapi_schema = all_versions_have_schema(ospec);
        o.valid_property_type = !spec_has(ospec, bad_type);
        o.allow_invalid_ca_bundle = allow_invalid_ca_bundle(old);
    } else {
        name_rule(crd, causes);
    }
    validate_spec(spec, &o, causes);
    if (old) {
        /* validateCustomResourceDefinitionSpecUpdate: ValidateImmutableField */
        const json_t *names = json_object_get(spec, "names");
        const json_t *onames = json_object_get(ospec, "names");
        if (o.immutable_names) {
            if (strcmp(str(spec, "scope"), str(ospec, "scope")) != 0)
                invalid(causes, "spec.scope", str(spec, "scope"), "field is immutable");
            if (strcmp(str(names, "kind"), str(onames, "kind")) != 0)
                invalid(causes, "spec.names.kind", str(names, "kind"), "field is immutable");
        }
        if (strcmp(str(spec, "group"), str(ospec, "group")) != 0)
            invalid(causes, "spec.group", str(spec, "group"), "field is immutable");
        if (strcmp(str(names, "plural"), str(onames, "plural")) != 0)
            invalid(causes, "spec.names.plural", str(names, "plural"), "field is immutable");
        validate_names(json_object_get(json_object_get(crd, "status"), "acceptedNames"),
                       "status.acceptedNames", causes);
        /* storedVersions: the update handler's crd_stored_versions */
    } else {
        created_stored_versions(spec, causes);
    }
    validate_approval(crd, old, causes);
    bool opuf = json_is_true(json_object_get(ospec, "preserveUnknownFields"));
    if (!opuf && json_is_true(json_object_get(spec, "preserveUnknownFields")))
        invalid_raw(causes, "spec.preserveUnknownFields", "true",
                    "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in "
                    "spec.versions[*].schema instead");
}
