/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the apiserver's registry validates on every create and update
 * before anything is stored: the name and value rules of
 * apimachinery/pkg/util/validation (IsQualifiedName, IsValidLabelValue,
 * IsDNS1123Label/Subdomain, IsValidPortName, IsValidPortNum), the
 * ObjectMeta rules every kind shares (apimachinery/pkg/api/validation/
 * objectmeta.go: generateName, labels, annotations and their total size,
 * ownerReferences, finalizers) and, for the built-in kinds kop writes or
 * reads, the kind's own rules (pkg/apis/core/validation, pkg/apis/apps/
 * validation, pkg/apis/coordination/validation). Each rule answers with the
 * apiserver's field path and text (field.Invalid, Required, Duplicate,
 * NotSupported, TooLong), collected into one 422 as the registry does.
 *
 * A kind's rules that kubesim does not know are not guessed: an object
 * they would refuse is accepted, as before. Go map order is random, so
 * the order of the errors of one map (labels, annotations, data) is not a
 * contract; kubesim reports them in the object's order.
 */
#include "kubesim.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- messages (apimachinery/pkg/util/validation/validation.go) ------------------ */

static const char *const qualified_regex =
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
static const char *const subdomain_regex =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
static const char *const label_regex =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
static const char *const value_regex =
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

static void add_msg(json_t *msgs, const char *prefix, const char *m)
{
    char *s = ks_printf("%s%s", prefix, m);
    json_array_append_new(msgs, json_string(s));
    free(s);
}

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool ascii_alnum(char c)
{
    return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n) */
static bool label_re(const char *s, size_t n)
{
    if (n == 0 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* dot-separated labels over s[0..n) */
static bool subdomain_re(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (!label_re(s + start, i - start))
                return false;
            start = i + 1;
        }
    }
    return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] over s[0..n) */
static bool qualified_re(const char *s, size_t n)
{
    if (n == 0 || !ascii_alnum(s[0]) || !ascii_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ascii_alnum(s[i]) && !strchr("-_.", s[i]))
            return false;
    return true;
}

static void subdomain_msgs(json_t *msgs, const char *prefix, const char *s, size_t n)
{
    if (n > 253)
        add_msg(msgs, prefix, "must be no more than 253 characters");
    if (!subdomain_re(s, n))
        add_msg(msgs, prefix, subdomain_regex);
}

json_t *ks_msgs_dns1123_subdomain(const char *s)
{
    json_t *msgs = json_array();
    subdomain_msgs(msgs, "", s, strlen(s));
    return msgs;
}

json_t *ks_msgs_dns1123_label(const char *s)
{
    json_t *msgs = json_array();
    size_t n = strlen(s);
    if (n > 63)
        add_msg(msgs, "", "must be no more than 63 characters");
    if (!label_re(s, n))
        add_msg(msgs, "", label_regex);
    return msgs;
}

json_t *ks_msgs_qualified_name(const char *s)
{
    json_t *msgs = json_array();
    const char *slash = strchr(s, '/');
    const char *name = s;
    if (slash && strchr(slash + 1, '/')) {
        add_msg(msgs, "a qualified name ",
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
                "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
                "'example.com/MyName')");
        return msgs;
    }
    if (slash) {
        size_t pl = (size_t)(slash - s);
        if (pl == 0)
            add_msg(msgs, "prefix part ", "must be non-empty");
        else
            subdomain_msgs(msgs, "prefix part ", s, pl);
        name = slash + 1;
    }
    size_t n = strlen(name);
    if (n == 0)
        add_msg(msgs, "name part ", "must be non-empty");
    else if (n > 63)
        add_msg(msgs, "name part ", "must be no more than 63 characters");
    if (!qualified_re(name, n))
        json_array_append_new(msgs, json_string(qualified_regex));
    return msgs;
}

json_t *ks_msgs_label_value(const char *s)
{
    json_t *msgs = json_array();
    size_t n = strlen(s);
    if (n > 63)
        add_msg(msgs, "", "must be no more than 63 characters");
    if (n > 0 && !qualified_re(s, n))
        add_msg(msgs, "", value_regex);
    return msgs;
}

json_t *ks_msgs_port_name(const char *s)
{
    json_t *msgs = json_array();
    size_t n = strlen(s);
    bool letter = false, bad = false;
    if (n > 15)
        add_msg(msgs, "", "must be no more than 15 characters");
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= 'a' && s[i] <= 'z')
            letter = true;
        else if (!(s[i] >= '0' && s[i] <= '9') && s[i] != '-')
            bad = true;
    }
    if (bad || n == 0) /* ^[-a-z0-9]+$ */
        add_msg(msgs, "", "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    if (!letter) /* [a-z] */
        add_msg(msgs, "", "must contain at least one letter (a-z)");
    if (strstr(s, "--"))
        add_msg(msgs, "", "must not contain consecutive hyphens");
    if (n > 0 && (s[0] == '-' || s[n - 1] == '-'))
        add_msg(msgs, "", "must not begin or end with a hyphen");
    return msgs;
}

char *ks_go_quote(const char *s)
{
    size_t n = strlen(s);
    char *q = malloc(4 * n + 3);
    if (!q)
        abort();
    size_t o = 0;
    q[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            q[o++] = '\\';
            q[o++] = (char)c;
        } else if (c == '\n' || c == '\t' || c == '\r') {
            q[o++] = '\\';
            q[o++] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(q + o, 5, "\\x%02x", c);
        } else {
            q[o++] = (char)c;
        }
    }
    q[o++] = '"';
    q[o] = '\0';
    return q;
}

/* ---- causes (apimachinery/pkg/util/validation/field/errors.go) ------------------- */

__attribute__((format(printf, 4, 5))) static void cause(json_t *causes, const char *reason,
                                                        const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    va_end(ap);
    json_array_append_new(
        causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message", m, "field", field));
    free(m);
}

/* field.Invalid(field, value (a string), msg) for each of msgs (@ref steal msgs). */
static void invalid_str(json_t *causes, const char *field, const char *value, json_t *msgs)
{
    char *q = ks_go_quote(value);
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m)
    {
        cause(causes, "FieldValueInvalid", field, "Invalid value: %s: %s", q, json_string_value(m));
    }
    free(q);
    json_decref(msgs);
}

/* ---- ObjectMeta (apimachinery/pkg/api/validation/objectmeta.go) ------------------ */

#define ANNOTATIONS_MAX (256 * 1024) /* TotalAnnotationSizeLimitB */

static void validate_owner_refs(const json_t *refs, json_t *causes)
{
    const char *f = "metadata.ownerReferences";
    char *first = NULL;
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        const char *av = json_string_value(json_object_get(ref, "apiVersion"));
        const char *kind = json_string_value(json_object_get(ref, "kind"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        const char *uid = json_string_value(json_object_get(ref, "uid"));
        av = av ? av : "";
        kind = kind ? kind : "";
        name = name ? name : "";
        uid = uid ? uid : "";
        /* schema.ParseGroupVersion: "v", "g/v"; more slashes parse to nothing */
        const char *slash = strchr(av, '/');
        bool no_version = !*av || (slash && (!slash[1] || strchr(slash + 1, '/')));
        if (no_version)
            invalid_str(causes, "metadata.ownerReferences.apiVersion", av,
                        json_pack("[s]", "version must not be empty"));
        if (!*kind)
            invalid_str(causes, "metadata.ownerReferences.kind", kind,
                        json_pack("[s]", "kind must not be empty"));
        if (!*name)
            invalid_str(causes, "metadata.ownerReferences.name", name,
                        json_pack("[s]", "name must not be empty"));
        if (!*uid)
            invalid_str(causes, "metadata.ownerReferences.uid", uid,
                        json_pack("[s]", "uid must not be empty"));
        if (strcmp(av, "v1") == 0 && strcmp(kind, "Event") == 0)
            cause(causes, "FieldValueInvalid", f,
                  "Invalid value: v1.OwnerReference{APIVersion:\"v1\", Kind:\"Event\", ...}: "
                  "/v1, Kind=Event is disallowed from being an owner");
        if (json_is_true(json_object_get(ref, "controller"))) {
            char *cur = ks_printf("%s/%s", kind, name);
            if (first) {
                /* the apiserver prints the whole list with %#v (pointers
                 * included): shortened here */
                cause(causes, "FieldValueInvalid", f,
                      "Invalid value: []v1.OwnerReference{...}: Only one reference can have "
                      "Controller set to true. Found \"true\" in references for %s and %s",
                      first, cur);
                free(cur);
            } else {
                first = cur;
            }
        }
    }
    free(first);
}

static bool is_rbac(const struct ks_res *def)
{
    return strcmp(def->group, "rbac.authorization.k8s.io") == 0;
}

/* The kind's ValidateNameFunc (prefix: a generateName). @ref new */
static json_t *name_msgs(const struct ks_res *def, const char *name, bool prefix)
{
    if (is_rbac(def)) {
        /* ValidateRBACName: path.IsValidPathSegmentName (or Prefix) */
        json_t *msgs = json_array();
        if (!prefix && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)) {
            char *m = ks_printf("may not be '%s'", name);
            json_array_append_new(msgs, json_string(m));
            free(m);
            return msgs;
        }
        if (strchr(name, '/'))
            json_array_append_new(msgs, json_string("may not contain '/'"));
        if (strchr(name, '%'))
            json_array_append_new(msgs, json_string("may not contain '%'"));
        return msgs;
    }
    if (strcmp(def->key, "events") == 0)
        return json_array();
    /* maskTrailingDash: "when a value could be appended" (name[:len-2] + "a") */
    size_t n = strlen(name);
    char *masked = prefix && n > 1 && name[n - 1] == '-' ? ks_printf("%.*sa", (int)(n - 2), name)
                                                         : ks_strdup(name);
    json_t *msgs;
    if (strcmp(def->key, "namespaces") == 0) {
        msgs = ks_msgs_dns1123_label(masked);
    } else if (strcmp(def->key, "services") == 0) {
        /* IsDNS1035Label */
        msgs = json_array();
        size_t ml = strlen(masked);
        if (ml > 63)
            json_array_append_new(msgs, json_string("must be no more than 63 characters"));
        if (!label_re(masked, ml) || !(masked[0] >= 'a' && masked[0] <= 'z'))
            json_array_append_new(
                msgs, json_string("a DNS-1035 label must consist of lower case alphanumeric "
                                  "characters or '-', start with an alphabetic character, and end "
                                  "with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                                  "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"));
    } else {
        msgs = ks_msgs_dns1123_subdomain(masked);
    }
    free(masked);
    return msgs;
}

static void validate_meta(const struct ks_res *def, const json_t *obj, bool create, json_t *causes)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *gn = json_string_value(json_object_get(md, "generateName"));
    if (gn && *gn)
        invalid_str(causes, "metadata.generateName", gn, name_msgs(def, gn, true));
    const char *name = json_string_value(json_object_get(md, "name"));
    if (create && name) /* an update's name is the stored object's */
        invalid_str(causes, "metadata.name", name, name_msgs(def, name, false));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(md, "labels"), k, v)
    {
        invalid_str(causes, "metadata.labels", k, ks_msgs_qualified_name(k));
        if (json_is_string(v))
            invalid_str(causes, "metadata.labels", json_string_value(v),
                        ks_msgs_label_value(json_string_value(v)));
    }
    size_t total = 0;
    json_object_foreach((json_t *)json_object_get(md, "annotations"), k, v)
    {
        /* QualifiedName, except that case does not matter */
        char *lower = ks_strdup(k);
        for (char *p = lower; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        invalid_str(causes, "metadata.annotations", k, ks_msgs_qualified_name(lower));
        free(lower);
        total += strlen(k) + json_string_length(v);
    }
    if (total > ANNOTATIONS_MAX)
        cause(causes, "FieldValueTooLong", "metadata.annotations",
              "Too long: may not be more than %d bytes", ANNOTATIONS_MAX);
    validate_owner_refs(json_object_get(md, "ownerReferences"), causes);
    bool orphan = false, foreground = false;
    size_t i;
    json_array_foreach(json_object_get(md, "finalizers"), i, v)
    {
        const char *fin = json_string_value(v);
        if (!fin)
            continue;
        invalid_str(causes, "metadata.finalizers", fin, ks_msgs_qualified_name(fin));
        orphan |= strcmp(fin, "orphan") == 0;
        foreground |= strcmp(fin, "foregroundDeletion") == 0;
    }
    if (orphan && foreground)
        cause(causes, "FieldValueInvalid", "metadata.finalizers",
              "Invalid value: []string{...}: finalizer orphan and foregroundDeletion cannot be "
              "both set");
}

/* ---- per kind ------------------------------------------------------------------ */

static void validate_deployment(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *sel = json_object_get(json_object_get(spec, "selector"), "matchLabels");
    const json_t *labels =
        json_object_get(json_object_get(json_object_get(spec, "template"), "metadata"), "labels");
    if (!json_object_get(spec, "selector")) {
        cause(causes, "FieldValueRequired", "spec.selector", "Required value");
        return;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)sel, k, v)
    {
        if (!json_equal(json_object_get(labels, k), v)) {
            cause(causes, "FieldValueInvalid", "spec.template.metadata.labels",
                  "Invalid value: map[string]string{...}: `selector` does not match template "
                  "`labels`");
            return;
        }
    }
    const json_t *cs = json_object_get(json_object_get(spec, "template"), "spec");
    if (json_array_size(json_object_get(cs, "containers")) == 0)
        cause(causes, "FieldValueRequired", "spec.template.spec.containers", "Required value");
}

#define MAX_SECRET_SIZE (1024 * 1024) /* core.MaxSecretSize, also ConfigMaps' */

/* IsConfigMapKey */
static json_t *config_key_msgs(const char *k)
{
    json_t *msgs = json_array();
    size_t n = strlen(k);
    bool ok = n > 0;
    for (size_t i = 0; i < n && ok; i++)
        ok = ascii_alnum(k[i]) || strchr("-._", k[i]);
    if (n > 253)
        add_msg(msgs, "", "must be no more than 253 characters");
    if (!ok)
        add_msg(msgs, "",
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
                "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
                "'[-._a-zA-Z0-9]+')");
    if (strcmp(k, ".") == 0)
        add_msg(msgs, "", "must not be '.'");
    else if (strcmp(k, "..") == 0)
        add_msg(msgs, "", "must not be '..'");
    else if (strncmp(k, "..", 2) == 0)
        add_msg(msgs, "", "must not start with '..'");
    return msgs;
}

/* The bytes a base64 value of a []byte field stands for. */
static size_t base64_len(const char *v)
{
    size_t n = strlen(v), pad = 0;
    while (pad < 2 && n > pad && v[n - 1 - pad] == '=')
        pad++;
    return n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0) - (n % 4 ? 0 : pad);
}

static void validate_config_map(const json_t *obj, json_t *causes)
{
    static const char *const bags[] = {"data", "binaryData"};
    size_t total = 0;
    for (size_t b = 0; b < 2; b++) {
        const json_t *other = json_object_get(obj, bags[1 - b]);
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)json_object_get(obj, bags[b]), k, v)
        {
            char *f = ks_printf("%s[%s]", bags[b], k);
            invalid_str(causes, f, k, config_key_msgs(k));
            if (json_object_get(other, k)) {
                char *m = ks_printf("duplicate of key present in %s", bags[1 - b]);
                invalid_str(causes, f, k, json_pack("[s]", m));
                free(m);
            }
            free(f);
            if (json_is_string(v))
                total += b == 0 ? json_string_length(v) : base64_len(json_string_value(v));
        }
    }
    if (total > MAX_SECRET_SIZE) /* field.NewPath("") prints as "[]" */
        cause(causes, "FieldValueTooLong", "[]", "Too long: may not be more than %d bytes",
              MAX_SECRET_SIZE);
}

static void validate_secret(const json_t *obj, json_t *causes)
{
    const json_t *data = json_object_get(obj, "data");
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)data, k, v)
    {
        char *f = ks_printf("data[%s]", k);
        invalid_str(causes, f, k, config_key_msgs(k));
        free(f);
        if (json_is_string(v))
            total += base64_len(json_string_value(v));
    }
    if (total > MAX_SECRET_SIZE)
        cause(causes, "FieldValueTooLong", "data", "Too long: may not be more than %d bytes",
              MAX_SECRET_SIZE);
    const char *type = json_string_value(json_object_get(obj, "type"));
    if (type && strcmp(type, "kubernetes.io/tls") == 0) {
        if (!json_object_get(data, "tls.crt"))
            cause(causes, "FieldValueRequired", "data[tls.crt]", "Required value");
        if (!json_object_get(data, "tls.key"))
            cause(causes, "FieldValueRequired", "data[tls.key]", "Required value");
    }
}

/* pkg/apis/coordination/validation: ValidateLeaseSpec */
static void validate_lease(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *d = json_object_get(spec, "leaseDurationSeconds");
    if (json_is_integer(d) && json_integer_value(d) <= 0)
        cause(causes, "FieldValueInvalid", "spec.leaseDurationSeconds",
              "Invalid value: %" JSON_INTEGER_FORMAT ": must be greater than 0",
              json_integer_value(d));
    const json_t *t = json_object_get(spec, "leaseTransitions");
    if (json_is_integer(t) && json_integer_value(t) < 0)
        cause(causes, "FieldValueInvalid", "spec.leaseTransitions",
              "Invalid value: %" JSON_INTEGER_FORMAT ": must be greater than or equal to 0",
              json_integer_value(t));
    const char *ph = json_string_value(json_object_get(spec, "preferredHolder"));
    const char *st = json_string_value(json_object_get(spec, "strategy"));
    if (ph && *ph && (!st || !*st))
        cause(causes, "FieldValueForbidden", "spec.preferredHolder",
              "Forbidden: may only be specified if `strategy` is defined");
}

json_t *ks_validate_object(const struct ks_res *def, const json_t *obj, bool create)
{
    json_t *causes = json_array();
    validate_meta(def, obj, create, causes);
    if (strcmp(def->key, "deployments.apps") == 0) {
        validate_deployment(obj, causes);
    } else if (strcmp(def->key, "configmaps") == 0) {
        validate_config_map(obj, causes);
    } else if (strcmp(def->key, "secrets") == 0) {
        validate_secret(obj, causes);
    } else if (strcmp(def->key, "leases.coordination.k8s.io") == 0) {
        validate_lease(obj, causes);
    } else if (strcmp(def->key, "storageversionmigrations.storagemigration.k8s.io") == 0) {
        const json_t *res = json_object_get(json_object_get(obj, "spec"), "resource");
        const char *plural = json_string_value(json_object_get(res, "resource"));
        if (!plural || !*plural)
            cause(causes, "FieldValueRequired", "spec.resource.resource", "Required value");
    }
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return NULL;
    }
    return causes;
}
