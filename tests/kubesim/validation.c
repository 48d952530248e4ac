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
 * validation, pkg/apis/coordination/validation; NetworkPolicy's are
 * netpolvalidation.c's, EndpointSlice's and Endpoints' epvalidation.c's,
 * webhook configurations' whconfig.c's and CRDs' crdvalidation.c's). Each
 * rule answers with the
 * apiserver's field path and text (field.Invalid, Required, Duplicate,
 * NotSupported, TooLong), collected into one 422 as the registry does.
 *
 * A kind's rules that kubesim does not know are not guessed: an object
 * they would refuse is accepted, as before. Go map order is random, so
 * the order of the errors of one map (labels, annotations, data) is not a
 * contract; kubesim reports them in the object's order.
 */
#include "kubesim.h"

#include <arpa/inet.h>
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
    if (subdomain_re(s, n) && strchr(s, '.'))
        add_msg(msgs, "", "must not contain dots");
    else if (!label_re(s, n))
        add_msg(msgs, "", label_regex);
    return msgs;
}

json_t *ks_msgs_dns1035_label(const char *s)
{
    json_t *msgs = json_array();
    size_t n = strlen(s);
    if (n > 63)
        add_msg(msgs, "", "must be no more than 63 characters");
    if (!label_re(s, n) || !(s[0] >= 'a' && s[0] <= 'z'))
        add_msg(msgs, "",
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                "start with an alphabetic character, and end with an alphanumeric character (e.g. "
                "'my-name',  or 'abc-123', regex used for validation is "
                "'[a-z]([-a-z0-9]*[a-z0-9])?')");
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
    static const char short_esc[] = "\a\b\f\n\r\t\v"; /* strconv.Quote's \a ... \v */
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
        } else if (c != 0 && strchr(short_esc, c)) {
            q[o++] = '\\';
            q[o++] = "abfnrtv"[strchr(short_esc, c) - short_esc];
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

void ks_cause(json_t *causes, const char *reason, const char *field, const char *fmt, ...)
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

#define cause ks_cause

void ks_required(json_t *causes, const char *field, const char *detail)
{
    if (detail && *detail)
        cause(causes, "FieldValueRequired", field, "Required value: %s", detail);
    else
        cause(causes, "FieldValueRequired", field, "Required value");
}

void ks_not_supported(json_t *causes, const char *field, const char *value, const char *supported)
{
    char *q = ks_go_quote(value);
    cause(causes, "FieldValueNotSupported", field, "Unsupported value: %s: supported values: %s", q,
          supported);
    free(q);
}

void ks_not_supported_list(json_t *causes, const char *field, const char *value,
                           const char *const *supported)
{
    json_t *list = json_array();
    for (const char *const *a = supported; *a; a++)
        json_array_append_new(list, json_string(*a));
    char *vals = ks_go_join(list, "", ", ", "");
    ks_not_supported(causes, field, value, vals);
    free(vals);
    json_decref(list);
}

void ks_duplicate(json_t *causes, const char *field, const char *value)
{
    char *q = ks_go_quote(value);
    cause(causes, "FieldValueDuplicate", field, "Duplicate value: %s", q);
    free(q);
}

void ks_invalid_str(json_t *causes, const char *field, const char *value, json_t *msgs)
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
#define invalid_str ks_invalid_str

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
/* ValidateRBACName: path.IsValidPathSegmentName (or Prefix) */
static json_t *rbac_name_msgs(const char *name, bool prefix)
{
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

static json_t *name_msgs(const struct ks_res *def, const char *name, bool prefix)
{
    if (is_rbac(def))
        return rbac_name_msgs(name, prefix);
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
        msgs = ks_msgs_dns1035_label(masked);
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

void ks_invalid_int(json_t *causes, const char *field, json_int_t v, const char *msg)
{
    cause(causes, "FieldValueInvalid", field, "Invalid value: %" JSON_INTEGER_FORMAT ": %s", v,
          msg);
}
#define invalid_int ks_invalid_int

static const char *str_at(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(obj, k));
}

static const char *const port_range = "must be between 1 and 65535, inclusive";

/* Go's %#v of a map[string]string (keys sorted), as 1.32's field errors
 * print a map value. malloc'd */
static char *go_map(const json_t *m)
{
    if (!json_is_object(m))
        return ks_strdup("map[string]string(nil)");
    size_t n;
    const char **keys = ks_sorted_keys(m, &n);
    char *out = ks_strdup("map[string]string{");
    for (size_t i = 0; i < n; i++) {
        char *qk = ks_go_quote(keys[i]);
        const char *sv = str_at(m, keys[i]);
        char *qv = ks_go_quote(sv ? sv : "");
        char *o = ks_printf("%s%s%s:%s", out, i ? ", " : "", qk, qv);
        free(out);
        free(qk);
        free(qv);
        out = o;
    }
    char *o = ks_printf("%s}", out);
    free(out);
    free(keys);
    return o;
}

static char *join(const json_t *list, const char *open, const char *sep, const char *close,
                  bool quote)
{
    char *out = ks_strdup(open);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *s = json_is_string(v) ? json_string_value(v) : "";
        char *q = quote ? ks_go_quote(s) : ks_strdup(s);
        char *o = ks_printf("%s%s%s", out, i ? sep : "", q);
        free(out);
        free(q);
        out = o;
    }
    char *o = ks_printf("%s%s", out, close);
    free(out);
    return o;
}

char *ks_go_join(const json_t *list, const char *open, const char *sep, const char *close)
{
    return join(list, open, sep, close, true);
}

char *ks_join(const json_t *list, const char *open, const char *sep, const char *close)
{
    return join(list, open, sep, close, false);
}

char *ks_go_strings(const json_t *list, const char *type)
{
    if (!json_is_array(list))
        return ks_printf("%s(nil)", type);
    char *open = ks_printf("%s{", type);
    char *out = ks_go_join(list, open, ", ", "}");
    free(open);
    return out;
}

void ks_validate_labels(const json_t *labels, const char *field, json_t *causes)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)labels, k, v)
    {
        invalid_str(causes, field, k, ks_msgs_qualified_name(k));
        if (json_is_string(v))
            invalid_str(causes, field, json_string_value(v),
                        ks_msgs_label_value(json_string_value(v)));
    }
}

/* ---- Service (pkg/apis/core/validation ValidateService; the allocator's
 *      nodePort range check) ------------------------------------------------------- */

/* validation.IsValidIP: ParseIPSloppy takes it */
static bool valid_ip(const char *s)
{
    unsigned char buf[16];
    return ks_ip_parse(s, buf);
}

static json_int_t int_at(const json_t *obj, const char *k)
{
    return json_integer_value(json_object_get(obj, k));
}

static void validate_service_port(const json_t *p, size_t i, bool require_name, json_t *seen_names,
                                  json_t *causes)
{
    char *f = ks_printf("spec.ports[%zu].name", i);
    const char *name = str_at(p, "name");
    if (require_name && (!name || !*name)) {
        cause(causes, "FieldValueRequired", f, "Required value");
    } else if (name && *name) {
        invalid_str(causes, f, name, ks_msgs_dns1123_label(name));
        if (json_object_get(seen_names, name))
            ks_duplicate(causes, f, name);
        else
            json_object_set_new(seen_names, name, json_true());
    }
    free(f);
    json_int_t port = int_at(p, "port");
    if (port < 1 || port > 65535) {
        f = ks_printf("spec.ports[%zu].port", i);
        invalid_int(causes, f, port, port_range);
        free(f);
    }
    const char *proto = str_at(p, "protocol");
    if (proto && strcmp(proto, "TCP") != 0 && strcmp(proto, "UDP") != 0 &&
        strcmp(proto, "SCTP") != 0) {
        f = ks_printf("spec.ports[%zu].protocol", i);
        ks_not_supported(causes, f, proto, "\"SCTP\", \"TCP\", \"UDP\"");
        free(f);
    }
    const json_t *tp = json_object_get(p, "targetPort");
    f = ks_printf("spec.ports[%zu].targetPort", i);
    if (json_is_integer(tp) && (json_integer_value(tp) < 1 || json_integer_value(tp) > 65535))
        invalid_int(causes, f, json_integer_value(tp), port_range);
    else if (json_is_string(tp))
        invalid_str(causes, f, json_string_value(tp), ks_msgs_port_name(json_string_value(tp)));
    free(f);
    const char *ap = str_at(p, "appProtocol");
    if (ap) {
        f = ks_printf("spec.ports[%zu].appProtocol", i);
        invalid_str(causes, f, ap, ks_msgs_qualified_name(ap));
        free(f);
    }
}

/* isHeadlessService: clusterIPs is ["None"] */
static bool svc_headless(const json_t *spec)
{
    const json_t *ips = json_object_get(spec, "clusterIPs");
    const char *ip0 = json_string_value(json_array_get(ips, 0));
    return json_array_size(ips) == 1 && ip0 && strcmp(ip0, "None") == 0;
}

/* netutils.IsIPv6String */
static bool is_ipv6(const char *s)
{
    unsigned char buf[16];
    return ks_ip_parse(s, buf) && !ks_ip_is_v4(buf);
}

/* ValidateServiceClusterIPsRelatedFields (not for ExternalName): clusterIP
 * and clusterIPs agree, ipFamilies and ipFamilyPolicy are supported, the
 * clusterIPs are IPs ("None" alone), at most one of each family, each of
 * the family ipFamilies names for it. */
void ks_validate_cluster_ips(const json_t *spec, json_t *causes)
{
    bool headless = svc_headless(spec);
    const char *cip = str_at(spec, "clusterIP");
    const json_t *ips = json_object_get(spec, "clusterIPs");
    size_t nips = json_array_size(ips);
    const char *ip0 = json_string_value(json_array_get(ips, 0));
    char *v = ks_go_strings(ips, "[]string");
    if (cip && *cip) {
        if (nips == 0)
            cause(causes, "FieldValueRequired", "spec.clusterIPs", "Required value");
        else if (strcmp(ip0 ? ip0 : "", cip) != 0)
            cause(causes, "FieldValueInvalid", "spec.clusterIPs",
                  "Invalid value: %s: first value must match `clusterIP`", v);
    } else if (nips != 0) {
        cause(causes, "FieldValueInvalid", "spec.clusterIPs",
              "Invalid value: %s: must be empty when `clusterIP` is not specified", v);
    }
    const json_t *fams = json_object_get(spec, "ipFamilies");
    json_t *seen = json_object();
    size_t i;
    json_t *fam;
    json_array_foreach(fams, i, fam)
    {
        const char *f = json_is_string(fam) ? json_string_value(fam) : "";
        char *path = ks_printf("spec.ipFamilies[%zu]", i);
        if (strcmp(f, "IPv4") != 0 && strcmp(f, "IPv6") != 0)
            ks_not_supported(causes, path, f, "\"IPv4\", \"IPv6\"");
        if (json_object_get(seen, f))
            ks_duplicate(causes, path, f);
        json_object_set_new(seen, f, json_true());
        free(path);
    }
    json_decref(seen);
    const char *pol = str_at(spec, "ipFamilyPolicy");
    if (pol && strcmp(pol, "SingleStack") != 0 && strcmp(pol, "PreferDualStack") != 0 &&
        strcmp(pol, "RequireDualStack") != 0)
        ks_not_supported(causes, "spec.ipFamilyPolicy", pol,
                         "\"PreferDualStack\", \"RequireDualStack\", \"SingleStack\"");
    bool bad = false;
    json_t *ipv;
    json_array_foreach(ips, i, ipv)
    {
        const char *ip = json_is_string(ipv) ? json_string_value(ipv) : "";
        if (i == 0 && strcmp(ip, "None") == 0) {
            if (nips > 1) {
                bad = true;
                cause(causes, "FieldValueInvalid", "spec.clusterIPs",
                      "Invalid value: %s: 'None' must be the first and only value", v);
            }
            continue;
        }
        if (!valid_ip(ip)) {
            bad = true;
            char *path = ks_printf("spec.clusterIPs[%zu]", i);
            invalid_str(
                causes, path, ip,
                json_pack("[s]", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"));
            free(path);
        }
    }
    if (nips > 2)
        cause(causes, "FieldValueInvalid", "spec.clusterIPs",
              "Invalid value: %s: may only hold up to 2 values", v);
    if (!bad && nips > 1) {
        size_t v6 = 0;
        json_array_foreach(ips, i, ipv)
        {
            v6 += is_ipv6(json_string_value(ipv));
        }
        if (v6 != 1 || nips != 2)
            cause(causes, "FieldValueInvalid", "spec.clusterIPs",
                  "Invalid value: %s: may specify no more than one IP for each IP family", v);
    }
    if (!bad && !headless && nips > 0) {
        json_array_foreach(ips, i, ipv)
        {
            const char *f = json_string_value(json_array_get(fams, i));
            if (!f)
                break;
            const char *ip = json_string_value(ipv);
            bool want6 = strcmp(f, "IPv6") == 0;
            if ((strcmp(f, "IPv4") == 0 && is_ipv6(ip)) || (want6 && !is_ipv6(ip))) {
                char *path = ks_printf("spec.clusterIPs[%zu]", i);
                char *msg = ks_printf("expected an %s value as indicated by `ipFamilies[%zu]`",
                                      want6 ? "IPv6" : "IPv4", i);
                invalid_str(causes, path, ip, json_pack("[s]", msg));
                free(msg);
                free(path);
            }
        }
    }
    free(v);
}

static void validate_service(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    const char *type = str_at(spec, "type");
    type = type ? type : "ClusterIP";
    bool type_ok = strcmp(type, "ClusterIP") == 0 || strcmp(type, "NodePort") == 0 ||
                   strcmp(type, "LoadBalancer") == 0 || strcmp(type, "ExternalName") == 0;
    const char *cip = str_at(spec, "clusterIP");
    bool external_name = strcmp(type, "ExternalName") == 0;
    bool lb = strcmp(type, "LoadBalancer") == 0;
    bool node_ports = lb || strcmp(type, "NodePort") == 0;
    bool headless = cip && strcmp(cip, "None") == 0;
    const json_t *ports = json_object_get(spec, "ports");
    if (json_array_size(ports) == 0 && !headless && !external_name)
        cause(causes, "FieldValueRequired", "spec.ports", "Required value");
    if (node_ports && headless)
        cause(causes, "FieldValueInvalid", "spec.clusterIPs[0]",
              "Invalid value: \"None\": may not be set to 'None' for %s services", type);
    if (external_name) {
        if (json_array_size(json_object_get(spec, "clusterIPs")) > 0)
            cause(causes, "FieldValueForbidden", "spec.clusterIPs",
                  "Forbidden: may not be set for ExternalName services");
        if (json_object_get(spec, "ipFamilies"))
            cause(causes, "FieldValueForbidden", "spec.ipFamilies",
                  "Forbidden: may not be set for ExternalName services");
        if (json_object_get(spec, "ipFamilyPolicy"))
            cause(causes, "FieldValueForbidden", "spec.ipFamilyPolicy",
                  "Forbidden: may not be set for ExternalName services");
        const char *en = str_at(spec, "externalName");
        char *cname = ks_strdup(en ? en : "");
        size_t cl = strlen(cname);
        if (cl && cname[cl - 1] == '.')
            cname[cl - 1] = '\0';
        if (*cname)
            invalid_str(causes, "spec.externalName", cname, ks_msgs_dns1123_subdomain(cname));
        else
            cause(causes, "FieldValueRequired", "spec.externalName", "Required value");
        free(cname);
    }
    json_t *seen = json_object();
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p)
    {
        validate_service_port(p, i, json_array_size(ports) > 1, seen, causes);
    }
    json_decref(seen);
    const json_t *sel = json_object_get(spec, "selector");
    if (sel)
        ks_validate_labels(sel, "spec.selector", causes);
    const json_t *sac = json_object_get(spec, "sessionAffinityConfig");
    const char *aff = str_at(spec, "sessionAffinity");
    if (aff && strcmp(aff, "ClientIP") != 0 && strcmp(aff, "None") != 0)
        ks_not_supported(causes, "spec.sessionAffinity", aff, "\"ClientIP\", \"None\"");
    if (aff && strcmp(aff, "ClientIP") == 0) {
        const json_t *to = json_object_get(json_object_get(sac, "clientIP"), "timeoutSeconds");
        if (json_is_integer(to) && (json_integer_value(to) <= 0 || json_integer_value(to) > 86400))
            invalid_int(causes, "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                        json_integer_value(to), "must be greater than 0 and less than 86400");
    } else if (aff && strcmp(aff, "None") == 0 && sac) {
        cause(causes, "FieldValueForbidden", "spec.sessionAffinityConfig",
              "Forbidden: must not be set when session affinity is None");
    }
    if (!external_name)
        ks_validate_cluster_ips(spec, causes);
    if (!type_ok)
        ks_not_supported(causes, "spec.type", type,
                         "\"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"");
    if (strcmp(type, "ClusterIP") == 0) {
        json_array_foreach(ports, i, p)
        {
            if (int_at(p, "nodePort") == 0)
                continue;
            char *f = ks_printf("spec.ports[%zu].nodePort", i);
            cause(causes, "FieldValueForbidden", f,
                  "Forbidden: may not be used when `type` is 'ClusterIP'");
            free(f);
        }
    }
    /* duplicate nodePorts, then duplicate ports, by (protocol, port); the
     * allocator's range check (a 422 of its own upstream) with the first */
    json_t *np_seen = json_object(), *port_seen = json_object();
    json_array_foreach(ports, i, p)
    {
        json_int_t np = int_at(p, "nodePort");
        const char *proto = str_at(p, "protocol");
        proto = proto ? proto : "TCP";
        if (np == 0 || strcmp(type, "ClusterIP") == 0)
            continue;
        char *f = ks_printf("spec.ports[%zu].nodePort", i);
        char *key = ks_printf("%s/%" JSON_INTEGER_FORMAT, proto, np);
        if (json_object_get(np_seen, key))
            cause(causes, "FieldValueDuplicate", f, "Duplicate value: %" JSON_INTEGER_FORMAT, np);
        json_object_set_new(np_seen, key, json_true());
        free(key);
        if (np < 30000 || np > 32767)
            invalid_int(causes, f, np,
                        "provided port is not in the valid range. The range of valid ports "
                        "is 30000-32767");
        free(f);
    }
    json_array_foreach(ports, i, p)
    {
        const char *proto = str_at(p, "protocol");
        proto = proto ? proto : "TCP";
        char *key = ks_printf("%s/%" JSON_INTEGER_FORMAT, proto, int_at(p, "port"));
        if (json_object_get(port_seen, key)) {
            char *f = ks_printf("spec.ports[%zu]", i);
            cause(causes, "FieldValueDuplicate", f,
                  "Duplicate value: core.ServicePort{Name:\"\", Protocol:\"%s\", "
                  "AppProtocol:(*string)(nil), Port:%" JSON_INTEGER_FORMAT
                  ", TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}, NodePort:0}",
                  proto, int_at(p, "port"));
            free(f);
        }
        json_object_set_new(port_seen, key, json_true());
        free(key);
    }
    json_decref(np_seen);
    json_decref(port_seen);
    if (!lb && json_array_size(json_object_get(spec, "loadBalancerSourceRanges")))
        cause(causes, "FieldValueForbidden", "spec.LoadBalancerSourceRanges",
              "Forbidden: may only be used when `type` is 'LoadBalancer'");
    if (!lb && json_object_get(spec, "allocateLoadBalancerNodePorts"))
        cause(causes, "FieldValueForbidden", "spec.allocateLoadBalancerNodePorts",
              "Forbidden: may only be used when `type` is 'LoadBalancer'");
    const char *cls = str_at(spec, "loadBalancerClass");
    if (lb && cls)
        invalid_str(causes, "spec.loadBalancerClass", cls, ks_msgs_qualified_name(cls));
    else if (!lb && cls)
        cause(causes, "FieldValueForbidden", "spec.loadBalancerClass",
              "Forbidden: may only be used when `type` is 'LoadBalancer'");
    /* validateServiceExternalTrafficPolicy: apiservice.ExternallyAccessible
     * is a LoadBalancer, a NodePort, or a ClusterIP with externalIPs */
    const char *etp = str_at(spec, "externalTrafficPolicy");
    bool external = node_ports || (strcmp(type, "ClusterIP") == 0 &&
                                   json_array_size(json_object_get(spec, "externalIPs")) > 0);
    if (!external && etp && *etp)
        invalid_str(causes, "spec.externalTrafficPolicy", etp,
                    json_pack("[s]", "may only be set for externally-accessible services"));
    else if (external && etp && strcmp(etp, "Cluster") != 0 && strcmp(etp, "Local") != 0)
        ks_not_supported(causes, "spec.externalTrafficPolicy", etp, "\"Cluster\", \"Local\"");
    json_int_t hc = int_at(spec, "healthCheckNodePort");
    bool needs_hc = lb && etp && strcmp(etp, "Local") == 0;
    if (hc != 0 && !needs_hc)
        invalid_int(causes, "spec.healthCheckNodePort", hc,
                    "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is "
                    "'Local'");
    /* validateServiceInternalTrafficFieldsValue, validateServiceTrafficDistribution */
    const char *itp = str_at(spec, "internalTrafficPolicy");
    if (itp && strcmp(itp, "Cluster") != 0 && strcmp(itp, "Local") != 0)
        ks_not_supported(causes, "spec.internalTrafficPolicy", itp, "\"Cluster\", \"Local\"");
    const char *td = str_at(spec, "trafficDistribution");
    if (td && strcmp(td, "PreferClose") != 0)
        ks_not_supported(causes, "spec.trafficDistribution", td, "\"PreferClose\"");
}

/* ---- Deployment (pkg/apis/apps/validation ValidateDeploymentSpec, and the pod
 *      template rules of pkg/apis/core/validation) --------------------------------- */

static void nonnegative(const json_t *obj, const char *k, const char *field, json_t *causes)
{
    const json_t *v = json_object_get(obj, k);
    if (json_is_integer(v) && json_integer_value(v) < 0)
        invalid_int(causes, field, json_integer_value(v), "must be greater than or equal to 0");
}

bool ks_label_selector_matches(const json_t *sel, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v)
    {
        if (!json_equal(json_object_get(labels, k), v))
            return false;
    }
    size_t i, j;
    json_t *e, *val;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
    {
        const char *key = str_at(e, "key"), *op = str_at(e, "operator");
        const char *have = key ? str_at(labels, key) : NULL;
        bool in = false;
        json_array_foreach(json_object_get(e, "values"), j, val)
        {
            if (have && json_is_string(val) && strcmp(json_string_value(val), have) == 0)
                in = true;
        }
        if (!op || (strcmp(op, "In") == 0 && !in) || (strcmp(op, "NotIn") == 0 && in) ||
            (strcmp(op, "Exists") == 0 && !have) || (strcmp(op, "DoesNotExist") == 0 && have))
            return false;
    }
    return true;
}

void ks_validate_label_selector(const json_t *sel, const char *path, json_t *causes)
{
    ks_validate_label_selector_opts(sel, path, false, causes);
}

void ks_validate_label_selector_opts(const json_t *sel, const char *path, bool allow_invalid_values,
                                     json_t *causes)
{
    char *f = ks_printf("%s.matchLabels", path);
    ks_validate_labels(json_object_get(sel, "matchLabels"), f, causes);
    free(f);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
    {
        const char *op = str_at(e, "operator");
        const char *key = str_at(e, "key");
        size_t nv = json_array_size(json_object_get(e, "values"));
        f = NULL;
        if (op && (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0)) {
            if (nv == 0) {
                f = ks_printf("%s.matchExpressions[%zu].values", path, i);
                cause(causes, "FieldValueRequired", f,
                      "Required value: must be specified when `operator` is 'In' or 'NotIn'");
            }
        } else if (op && (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0)) {
            if (nv > 0) {
                f = ks_printf("%s.matchExpressions[%zu].values", path, i);
                cause(causes, "FieldValueForbidden", f,
                      "Forbidden: may not be specified when `operator` is 'Exists' or "
                      "'DoesNotExist'");
            }
        } else {
            f = ks_printf("%s.matchExpressions[%zu].operator", path, i);
            invalid_str(causes, f, op ? op : "", json_pack("[s]", "not a valid selector operator"));
        }
        free(f);
        f = ks_printf("%s.matchExpressions[%zu].key", path, i);
        invalid_str(causes, f, key ? key : "", ks_msgs_qualified_name(key ? key : ""));
        free(f);
        if (allow_invalid_values)
            continue;
        size_t j;
        json_t *v;
        json_array_foreach(json_object_get(e, "values"), j, v)
        {
            const char *s = json_is_string(v) ? json_string_value(v) : "";
            f = ks_printf("%s.matchExpressions[%zu].values[%zu]", path, i, j);
            invalid_str(causes, f, s, ks_msgs_label_value(s));
            free(f);
        }
    }
}

/* %#v of an intstr.IntOrString value as the rolling update errors print it */
static char *go_intstr(const json_t *v)
{
    if (json_is_string(v)) {
        char *q = ks_go_quote(json_string_value(v));
        char *s = ks_printf("intstr.IntOrString{Type:1, IntVal:0, StrVal:%s}", q);
        free(q);
        return s;
    }
    return ks_printf("intstr.IntOrString{Type:0, IntVal:%" JSON_INTEGER_FORMAT ", StrVal:\"\"}",
                     json_integer_value(v));
}

/* ValidatePositiveIntOrPercent; the value as a percentage (or the integer) in *ret. */
static void int_or_percent(const json_t *v, const char *field, json_t *causes, bool *ret_zero,
                           long *ret_percent)
{
    *ret_zero = false;
    *ret_percent = -1;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0)
            invalid_int(causes, field, json_integer_value(v), "must be greater than or equal to 0");
        *ret_zero = json_integer_value(v) == 0;
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        size_t n = strlen(s), d = strspn(s, "0123456789");
        if (n < 2 || d != n - 1 || s[n - 1] != '%') {
            char *g = go_intstr(v);
            cause(causes, "FieldValueInvalid", field,
                  "Invalid value: %s: a valid percent string must be a numeric string followed by "
                  "an ending '%%' (e.g. '1%%',  or '93%%', regex used for validation is "
                  "'[0-9]+%%')",
                  g);
            free(g);
        } else {
            *ret_percent = strtol(s, NULL, 10);
            *ret_zero = *ret_percent == 0;
        }
    }
}

/* Go's %#v of a metav1.LabelSelector, as field.Invalid prints one (its
 * String() has a pointer receiver, so the dereferenced value falls back to
 * %#v). malloc'd */
static char *go_label_selector(const json_t *sel)
{
    if (!json_is_object(sel))
        return ks_go_quote("null");
    char *ml = go_map(json_object_get(sel, "matchLabels"));
    const json_t *me = json_object_get(sel, "matchExpressions");
    char *exprs;
    if (!json_is_array(me)) {
        exprs = ks_strdup("[]v1.LabelSelectorRequirement(nil)");
    } else {
        exprs = ks_strdup("[]v1.LabelSelectorRequirement{");
        size_t i;
        json_t *r;
        json_array_foreach(me, i, r)
        {
            const char *key = str_at(r, "key"), *op = str_at(r, "operator");
            char *qk = ks_go_quote(key ? key : ""), *qo = ks_go_quote(op ? op : "");
            char *vals = ks_go_strings(json_object_get(r, "values"), "[]string");
            char *o = ks_printf("%s%sv1.LabelSelectorRequirement{Key:%s, Operator:%s, Values:%s}",
                                exprs, i ? ", " : "", qk, qo, vals);
            free(exprs);
            free(qk);
            free(qo);
            free(vals);
            exprs = o;
        }
        char *o = ks_printf("%s}", exprs);
        free(exprs);
        exprs = o;
    }
    char *out = ks_printf("v1.LabelSelector{MatchLabels:%s, MatchExpressions:%s}", ml, exprs);
    free(ml);
    free(exprs);
    return out;
}

/* Go's %#v of a pointer field: (*type)(0x...) or (*type)(nil); the address
 * is where kubesim holds the value, as the apiserver prints its own. malloc'd */
static char *go_ptr(const char *type, const json_t *v)
{
    if (!v || json_is_null(v))
        return ks_printf("(*%s)(nil)", type);
    return ks_printf("(*%s)(%p)", type, (const void *)v);
}

/* pkg/apis/policy/validation ValidatePodDisruptionBudgetSpec (create and
 * update alike; the unhealthyPodEvictionPolicy enum is the schema's) */
static void validate_pdb(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *min = json_object_get(spec, "minAvailable");
    const json_t *max = json_object_get(spec, "maxUnavailable");
    if (min && !json_is_null(min) && max && !json_is_null(max)) {
        char *pmin = go_ptr("intstr.IntOrString", min);
        char *psel = go_ptr("v1.LabelSelector", json_object_get(spec, "selector"));
        char *pmax = go_ptr("intstr.IntOrString", max);
        char *ppol = go_ptr("policy.UnhealthyPodEvictionPolicyType",
                            json_object_get(spec, "unhealthyPodEvictionPolicy"));
        cause(causes, "FieldValueInvalid", "spec",
              "Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:%s, Selector:%s, "
              "MaxUnavailable:%s, UnhealthyPodEvictionPolicy:%s}: minAvailable and "
              "maxUnavailable cannot be both set",
              pmin, psel, pmax, ppol);
        free(pmin);
        free(psel);
        free(pmax);
        free(ppol);
    }
    static const char *const fields[] = {"minAvailable", "maxUnavailable"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *v = json_object_get(spec, fields[k]);
        if (!v || json_is_null(v))
            continue;
        char *f = ks_printf("spec.%s", fields[k]);
        bool zero;
        long pct;
        /* appsvalidation.ValidatePositiveIntOrPercent, IsNotMoreThan100Percent */
        int_or_percent(v, f, causes, &zero, &pct);
        if (pct > 100) {
            char *g = go_intstr(v);
            cause(causes, "FieldValueInvalid", f,
                  "Invalid value: %s: must not be greater than 100%%", g);
            free(g);
        }
        free(f);
    }
    const json_t *sel = json_object_get(spec, "selector");
    if (json_is_object(sel))
        ks_validate_label_selector(sel, "spec.selector", causes);
    /* the policy's enum, after the rest (kschema.c leaves it here) */
    const json_t *uhp = json_object_get(spec, "unhealthyPodEvictionPolicy");
    const char *u = json_string_value(uhp);
    if (u && strcmp(u, "IfHealthyBudget") != 0 && strcmp(u, "AlwaysAllow") != 0)
        ks_not_supported(causes, "spec.unhealthyPodEvictionPolicy", u,
                         "\"AlwaysAllow\", \"IfHealthyBudget\"");
}

/* ValidatePodCreate's spec rules (podvalidation.c); an update runs them
 * too, then validate_pod_update's. */
static void validate_pod(const json_t *obj, json_t *causes)
{
    ks_validate_pod_spec(json_object_get(obj, "spec"), "spec", true, causes);
}

/* The selector and template of a ReplicaSet or Deployment spec
 * (ValidateReplicaSetSpec / ValidateDeploymentSpec from the selector on,
 * with ValidatePodTemplateSpecForReplicaSet). Both say "empty selector is
 * invalid for deployment", as upstream does. */
static void validate_selector_and_template(const json_t *spec, json_t *causes)
{
    const json_t *tmpl = json_object_get(spec, "template");
    const json_t *tmd = json_object_get(tmpl, "metadata");
    const json_t *tspec = json_object_get(tmpl, "spec");
    const json_t *sel = json_object_get(spec, "selector");
    bool sel_empty = false;
    if (!json_is_object(sel)) {
        cause(causes, "FieldValueRequired", "spec.selector", "Required value");
    } else {
        ks_validate_label_selector(sel, "spec.selector", causes);
        const json_t *ml = json_object_get(sel, "matchLabels");
        const json_t *me = json_object_get(sel, "matchExpressions");
        if (json_object_size(ml) + json_array_size(me) == 0) {
            sel_empty = true;
            char *v = go_label_selector(sel);
            cause(causes, "FieldValueInvalid", "spec.selector",
                  "Invalid value: %s: empty selector is invalid for deployment", v);
            free(v);
        }
    }
    /* a missing selector selects nothing (labels.Nothing), an empty one all */
    const json_t *labels = json_object_get(tmd, "labels");
    if (!sel_empty && (!json_is_object(sel) || !ks_label_selector_matches(sel, labels))) {
        char *m = go_map(labels);
        cause(causes, "FieldValueInvalid", "spec.template.metadata.labels",
              "Invalid value: %s: `selector` does not match template `labels`", m);
        free(m);
    }
    ks_validate_labels(labels, "spec.template.labels", causes);
    ks_validate_pod_spec(tspec, "spec.template.spec", false, causes);
    const char *rp = str_at(tspec, "restartPolicy");
    if (rp && strcmp(rp, "Always") != 0) {
        char *q = ks_go_quote(rp);
        cause(causes, "FieldValueNotSupported", "spec.template.spec.restartPolicy",
              "Unsupported value: %s: supported values: \"Always\"", q);
        free(q);
    }
    if (json_object_get(tspec, "activeDeadlineSeconds"))
        cause(causes, "FieldValueForbidden", "spec.template.spec.activeDeadlineSeconds",
              "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported");
}

/* pkg/apis/apps/validation ValidateReplicaSetSpec */
static void validate_replicaset(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    nonnegative(spec, "replicas", "spec.replicas", causes);
    nonnegative(spec, "minReadySeconds", "spec.minReadySeconds", causes);
    validate_selector_and_template(spec, causes);
}

static void validate_deployment(const json_t *obj, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    nonnegative(spec, "replicas", "spec.replicas", causes);
    validate_selector_and_template(spec, causes);
    /* ValidateDeploymentStrategy (the type is defaulted to RollingUpdate,
     * and then its rollingUpdate) */
    const json_t *st = json_object_get(spec, "strategy");
    const char *stype = str_at(st, "type");
    const json_t *ru = json_object_get(st, "rollingUpdate");
    if (!stype)
        stype = "";
    if (strcmp(stype, "Recreate") == 0) {
        if (ru)
            cause(causes, "FieldValueForbidden", "spec.strategy.rollingUpdate",
                  "Forbidden: may not be specified when strategy `type` is 'Recreate'");
    } else if (strcmp(stype, "RollingUpdate") != 0) {
        /* NotSupported of the whole strategy: Go's %#v of the struct, its
         * pointer member an address when set */
        char *t = ks_go_quote(stype);
        char *p = json_is_object(ru) ? ks_printf("(%p)", (const void *)ru) : ks_strdup("(nil)");
        cause(causes, "FieldValueNotSupported", "spec.strategy",
              "Unsupported value: apps.DeploymentStrategy{Type:%s, "
              "RollingUpdate:(*apps.RollingUpdateDeployment)%s}: supported values: "
              "\"Recreate\", \"RollingUpdate\"",
              t, p);
        free(t);
        free(p);
    } else if (json_is_object(ru)) {
        bool mu_zero, ms_zero;
        long mu_pct, ms_pct;
        const json_t *mu = json_object_get(ru, "maxUnavailable");
        int_or_percent(mu, "spec.strategy.rollingUpdate.maxUnavailable", causes, &mu_zero, &mu_pct);
        int_or_percent(json_object_get(ru, "maxSurge"), "spec.strategy.rollingUpdate.maxSurge",
                       causes, &ms_zero, &ms_pct);
        if (mu_zero && ms_zero) {
            char *g = go_intstr(mu);
            cause(causes, "FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable",
                  "Invalid value: %s: may not be 0 when `maxSurge` is 0", g);
            free(g);
        }
        if (mu_pct > 100) {
            char *g = go_intstr(mu);
            cause(causes, "FieldValueInvalid", "spec.strategy.rollingUpdate.maxUnavailable",
                  "Invalid value: %s: must not be greater than 100%%", g);
            free(g);
        }
    }
    nonnegative(spec, "minReadySeconds", "spec.minReadySeconds", causes);
    nonnegative(spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", causes);
    const json_t *pd = json_object_get(spec, "progressDeadlineSeconds");
    if (json_is_integer(pd)) {
        nonnegative(spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds", causes);
        if (json_integer_value(pd) <= int_at(spec, "minReadySeconds"))
            invalid_int(causes, "spec.progressDeadlineSeconds", json_integer_value(pd),
                        "must be greater than minReadySeconds");
    }
}

#define MAX_SECRET_SIZE (1024 * 1024) /* core.MaxSecretSize, also ConfigMaps' */

json_t *ks_msgs_config_key(const char *k)
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
            invalid_str(causes, f, k, ks_msgs_config_key(k));
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
        invalid_str(causes, f, k, ks_msgs_config_key(k));
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

/* pkg/apis/core/validation/events.go: legacyValidateEvent, what core/v1
 * Events get (the stricter rules are for events.k8s.io/v1 writes) */
static void validate_event(const json_t *obj, json_t *causes)
{
    const char *ns = str_at(json_object_get(obj, "metadata"), "namespace");
    ns = ns ? ns : "";
    const json_t *inv = json_object_get(obj, "involvedObject");
    const char *ins = str_at(inv, "namespace");
    ins = ins ? ins : "";
    const char *const mismatch = "does not match event.namespace";
    const json_t *et = json_object_get(obj, "eventTime");
    if (!et || json_is_null(et)) {
        if (!*ins ? *ns && strcmp(ns, "default") != 0 : strcmp(ns, ins) != 0)
            invalid_str(causes, "involvedObject.namespace", ins, json_pack("[s]", mismatch));
    } else {
        if (!*ins && strcmp(ns, "default") != 0 && strcmp(ns, "kube-system") != 0)
            invalid_str(causes, "involvedObject.namespace", ins, json_pack("[s]", mismatch));
        const char *rc = str_at(obj, "reportingComponent");
        if (!rc || !*rc)
            cause(causes, "FieldValueRequired", "reportingComponent", "Required value");
        invalid_str(causes, "reportingComponent", rc ? rc : "",
                    ks_msgs_qualified_name(rc ? rc : ""));
        static const struct {
            const char *k;
            size_t max;
            bool required;
        } lim[] = {{"reportingInstance", 128, true},
                   {"action", 128, true},
                   {"reason", 128, true},
                   {"message", 1024, false}};
        for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
            const char *v = str_at(obj, lim[i].k);
            if (lim[i].required && (!v || !*v))
                cause(causes, "FieldValueRequired", lim[i].k, "Required value");
            if (v && strlen(v) > lim[i].max)
                cause(causes, "FieldValueInvalid", lim[i].k,
                      "Invalid value: \"\": can have at most %zu characters", lim[i].max);
        }
    }
}

/* ---- RBAC (pkg/apis/rbac/validation) ------------------------------------------- */

#define RBAC_GROUP "rbac.authorization.k8s.io"

/* ValidatePolicyRule for each of the object's rules */
static void validate_policy_rules(const json_t *obj, bool namespaced, json_t *causes)
{
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(obj, "rules"), i, rule)
    {
        char *f = ks_printf("rules[%zu].verbs", i);
        if (json_array_size(json_object_get(rule, "verbs")) == 0)
            cause(causes, "FieldValueRequired", f,
                  "Required value: verbs must contain at least one value");
        free(f);
        const json_t *urls = json_object_get(rule, "nonResourceURLs");
        if (json_array_size(urls) > 0) {
            char *v = ks_go_strings(urls, "[]string");
            f = ks_printf("rules[%zu].nonResourceURLs", i);
            if (namespaced)
                cause(causes, "FieldValueInvalid", f,
                      "Invalid value: %s: namespaced rules cannot apply to non-resource URLs", v);
            if (json_array_size(json_object_get(rule, "apiGroups")) > 0 ||
                json_array_size(json_object_get(rule, "resources")) > 0 ||
                json_array_size(json_object_get(rule, "resourceNames")) > 0)
                cause(causes, "FieldValueInvalid", f,
                      "Invalid value: %s: rules cannot apply to both regular resources and "
                      "non-resource URLs",
                      v);
            free(f);
            free(v);
            continue;
        }
        if (json_array_size(json_object_get(rule, "apiGroups")) == 0) {
            f = ks_printf("rules[%zu].apiGroups", i);
            cause(causes, "FieldValueRequired", f,
                  "Required value: resource rules must supply at least one api group");
            free(f);
        }
        if (json_array_size(json_object_get(rule, "resources")) == 0) {
            f = ks_printf("rules[%zu].resources", i);
            cause(causes, "FieldValueRequired", f,
                  "Required value: resource rules must supply at least one resource");
            free(f);
        }
    }
}

/* ValidateClusterRole's aggregation rule: present means selectors */
static void validate_aggregation_rule(const json_t *obj, json_t *causes)
{
    const json_t *agg = json_object_get(obj, "aggregationRule");
    if (json_is_object(agg) && json_array_size(json_object_get(agg, "clusterRoleSelectors")) == 0)
        cause(causes, "FieldValueRequired", "aggregationRule.clusterRoleSelectors",
              "Required value: at least one clusterRoleSelector required if aggregationRule is "
              "non-nil");
}

/* ValidateRoleBinding, ValidateClusterRoleBinding (after the defaults:
 * roleRef.apiGroup and a User or Group subject's apiGroup) */
static void validate_binding(const json_t *obj, bool namespaced, json_t *causes)
{
    const json_t *ref = json_object_get(obj, "roleRef");
    const char *g = str_at(ref, "apiGroup"), *k = str_at(ref, "kind"), *n = str_at(ref, "name");
    g = g ? g : "";
    k = k ? k : "";
    n = n ? n : "";
    if (strcmp(g, RBAC_GROUP) != 0)
        ks_not_supported(causes, "roleRef.apiGroup", g, "\"" RBAC_GROUP "\"");
    if (namespaced && strcmp(k, "Role") != 0 && strcmp(k, "ClusterRole") != 0)
        ks_not_supported(causes, "roleRef.kind", k, "\"Role\", \"ClusterRole\"");
    else if (!namespaced && strcmp(k, "ClusterRole") != 0)
        ks_not_supported(causes, "roleRef.kind", k, "\"ClusterRole\"");
    if (!*n) {
        cause(causes, "FieldValueRequired", "roleRef.name", "Required value");
    } else {
        invalid_str(causes, "roleRef.name", n, rbac_name_msgs(n, false));
    }
    size_t i;
    json_t *sub;
    json_array_foreach(json_object_get(obj, "subjects"), i, sub)
    {
        const char *sk = str_at(sub, "kind"), *sn = str_at(sub, "name");
        const char *sg = str_at(sub, "apiGroup"), *sns = str_at(sub, "namespace");
        sk = sk ? sk : "";
        sn = sn ? sn : "";
        sg = sg ? sg : "";
        char *f = NULL;
        if (!*sn) {
            f = ks_printf("subjects[%zu].name", i);
            cause(causes, "FieldValueRequired", f, "Required value");
            free(f);
        }
        if (strcmp(sk, "ServiceAccount") == 0) {
            f = ks_printf("subjects[%zu].name", i);
            if (*sn)
                invalid_str(causes, f, sn, ks_msgs_dns1123_subdomain(sn));
            free(f);
            f = ks_printf("subjects[%zu].apiGroup", i);
            if (*sg)
                ks_not_supported(causes, f, sg, "\"\"");
            free(f);
            f = ks_printf("subjects[%zu].namespace", i);
            if (!namespaced && (!sns || !*sns))
                cause(causes, "FieldValueRequired", f, "Required value");
            free(f);
        } else if (strcmp(sk, "User") == 0 || strcmp(sk, "Group") == 0) {
            f = ks_printf("subjects[%zu].apiGroup", i);
            if (strcmp(sg, RBAC_GROUP) != 0)
                ks_not_supported(causes, f, sg, "\"" RBAC_GROUP "\"");
            free(f);
        } else {
            f = ks_printf("subjects[%zu].kind", i);
            ks_not_supported(causes, f, sk, "\"ServiceAccount\", \"User\", \"Group\"");
            free(f);
        }
    }
}

/* ---- updates: what may not change once set ------------------------------------ */

static bool empty_value(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* apimachinery's Semantic.DeepEqual (third_party/forked/golang/reflect):
 * unlike reflect.DeepEqual, an empty map or slice equals a nil one; so
 * here an empty object or list equals an absent or null member; with
 * zero_strings, an empty string too (Go's zero value of a string field,
 * where the members are plain strings: a PodSpec's). */
static bool deep_equal(const json_t *a, const json_t *b, bool zero_strings)
{
    bool ea = empty_value(a) || (zero_strings && json_is_string(a) && !json_string_length(a));
    bool eb = empty_value(b) || (zero_strings && json_is_string(b) && !json_string_length(b));
    if (ea || eb)
        return ea && eb;
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v)
        {
            if (!deep_equal(v, json_object_get(b, k), zero_strings))
                return false;
        }
        json_object_foreach((json_t *)b, k, v)
        {
            if (!json_object_get(a, k) && !deep_equal(v, NULL, zero_strings))
                return false;
        }
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!deep_equal(json_array_get(a, i), json_array_get(b, i), zero_strings))
                return false;
        return true;
    }
    return json_equal(a, b);
}

static bool semantic_equal(const json_t *a, const json_t *b)
{
    return deep_equal(a, b, false);
}

static bool pod_equal(const json_t *a, const json_t *b)
{
    return deep_equal(a, b, true);
}

/* ValidateContainerUpdates: the same number of containers, each with an
 * image without surrounding space. true: stop (the count changed). */
static bool container_updates(const json_t *list, const json_t *old, const char *what,
                              json_t *causes)
{
    if (json_array_size(list) != json_array_size(old)) {
        char *f = ks_printf("spec.%s", what);
        cause(causes, "FieldValueForbidden", f,
              "Forbidden: pod updates may not add or remove containers");
        free(f);
        return true;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *image = json_string_value(json_object_get(c, "image"));
        char *f = ks_printf("spec.%s[%zu].image", what, i);
        if (!image || !*image) {
            cause(causes, "FieldValueRequired", f, "Required value");
        } else if (isspace((unsigned char)image[0]) ||
                   isspace((unsigned char)image[strlen(image) - 1])) {
            char *q = ks_go_quote(image);
            cause(causes, "FieldValueInvalid", f,
                  "Invalid value: %s: must not have leading or trailing whitespace", q);
            free(q);
        }
        free(f);
    }
    return false;
}

/* The diff ValidatePodUpdate appends (upstream: go-cmp's of the internal
 * PodSpec; here each top-level member that differs, as JSON). malloc'd */
static char *pod_spec_diff(const json_t *old, const json_t *munged)
{
    char *out = ks_strdup("  core.PodSpec{\n");
    json_t *keys = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)old, k, v)
    {
        json_object_set_new(keys, k, json_true());
    }
    json_object_foreach((json_t *)munged, k, v)
    {
        json_object_set_new(keys, k, json_true());
    }
    size_t n;
    const char **names = ks_sorted_keys(keys, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_object_get(old, names[i]);
        const json_t *b = json_object_get(munged, names[i]);
        if (pod_equal(a, b))
            continue;
        char *da = a ? json_dumps(a, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        char *db = b ? json_dumps(b, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        char *next = ks_printf("%s- \t%s: %s,\n+ \t%s: %s,\n", out, names[i], da ? da : "nil",
                               names[i], db ? db : "nil");
        free(da);
        free(db);
        free(out);
        out = next;
    }
    free(names);
    json_decref(keys);
    char *next = ks_printf("%s  }\n", out);
    free(out);
    return next;
}

/* Tolerations of old must all be in list, tolerationSeconds aside
 * (validateOnlyAddedTolerations). */
static bool only_added_tolerations(const json_t *list, const json_t *old)
{
    size_t i, j;
    const json_t *o, *t;
    json_array_foreach(old, i, o)
    {
        bool found = false;
        json_array_foreach(list, j, t)
        {
            json_t *a = json_deep_copy(o), *b = json_deep_copy(t);
            json_object_del(a, "tolerationSeconds");
            json_object_del(b, "tolerationSeconds");
            found = found || pod_equal(a, b);
            json_decref(a);
            json_decref(b);
        }
        if (!found)
            return false;
    }
    return true;
}

/* pkg/apis/core/validation ValidatePodUpdate: of a Pod's spec only the
 * containers' and init containers' images, activeDeadlineSeconds (set,
 * or lowered), tolerations (additions; tolerationSeconds), a negative
 * terminationGracePeriodSeconds set to 1 and scheduling gates (removals;
 * a gated Pod's nodeSelector: additions) may change. */
static void validate_pod_update(const json_t *obj, const json_t *old, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec");
    const json_t *ospec = json_object_get(old, "spec");
    /* ValidatePodUpdate begins with validatePodMetadataAndSpec: the new
     * spec is validated as on create (its enums included: the schema
     * leaves them to podvalidation.c) */
    ks_validate_pod_spec(spec, "spec", true, causes);
    if (container_updates(json_object_get(spec, "containers"), json_object_get(ospec, "containers"),
                          "containers", causes) ||
        container_updates(json_object_get(spec, "initContainers"),
                          json_object_get(ospec, "initContainers"), "initContainers", causes))
        return;
    const json_t *ads = json_object_get(spec, "activeDeadlineSeconds");
    const json_t *oads = json_object_get(ospec, "activeDeadlineSeconds");
    if (json_is_integer(ads)) {
        json_int_t v = json_integer_value(ads);
        if (v < 0 || v > 2147483647) {
            invalid_int(causes, "spec.activeDeadlineSeconds", v,
                        "must be between 0 and 2147483647, inclusive");
            return;
        }
        if (json_is_integer(oads) && json_integer_value(oads) < v) {
            invalid_int(causes, "spec.activeDeadlineSeconds", v,
                        "must be less than or equal to previous value");
            return;
        }
    } else if (json_is_integer(oads)) {
        cause(causes, "FieldValueInvalid", "spec.activeDeadlineSeconds",
              "Invalid value: \"null\": must not update from a positive integer to nil value");
    }
    if (!only_added_tolerations(json_object_get(spec, "tolerations"),
                                json_object_get(ospec, "tolerations")))
        cause(causes, "FieldValueForbidden", "spec.tolerations",
              "Forbidden: existing toleration can not be modified except its tolerationSeconds");
    const json_t *gates = json_object_get(spec, "schedulingGates");
    const json_t *ogates = json_object_get(ospec, "schedulingGates");
    size_t i, j;
    const json_t *g, *og;
    json_array_foreach(gates, i, g)
    {
        const char *name = ks_nz(json_string_value(json_object_get(g, "name")));
        bool had = false;
        json_array_foreach(ogates, j, og)
        {
            had = had || strcmp(name, ks_nz(json_string_value(json_object_get(og, "name")))) == 0;
        }
        if (!had) {
            char *f = ks_printf("spec.schedulingGates[%zu].name", i);
            cause(causes, "FieldValueForbidden", f,
                  "Forbidden: only deletion is allowed, but found new scheduling gate '%s'", name);
            free(f);
        }
    }
    if (pod_equal(spec, ospec))
        return;
    json_t *munged = json_deep_copy(spec);
    if (!json_is_object(munged)) {
        json_decref(munged);
        munged = json_object();
    }
    const char *lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_t *cs = json_object_get(munged, lists[l]);
        json_array_foreach(cs, i, g)
        {
            json_t *oc = json_array_get(json_object_get(ospec, lists[l]), i);
            if (json_is_object(g) && json_object_get(oc, "image"))
                json_object_set((json_t *)g, "image", json_object_get(oc, "image"));
        }
    }
    const char *copied[] = {"activeDeadlineSeconds", "schedulingGates", "tolerations"};
    for (size_t c = 0; c < 3; c++) {
        if (json_object_get(ospec, copied[c]))
            json_object_set(munged, copied[c], json_object_get(ospec, copied[c]));
        else
            json_object_del(munged, copied[c]);
    }
    const json_t *otg = json_object_get(ospec, "terminationGracePeriodSeconds");
    const json_t *tg = json_object_get(munged, "terminationGracePeriodSeconds");
    if (json_is_integer(otg) && json_integer_value(otg) < 0 && json_is_integer(tg) &&
        json_integer_value(tg) == 1)
        json_object_set(munged, "terminationGracePeriodSeconds", (json_t *)otg);
    /* a gated Pod: nodeSelector additions (validateNodeSelectorMutation) */
    if (json_array_size(ogates)) {
        const json_t *ns = json_object_get(munged, "nodeSelector");
        const json_t *ons = json_object_get(ospec, "nodeSelector");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)ons, k, v)
        {
            const json_t *now = json_object_get(ns, k);
            if (!pod_equal(now, v)) {
                char *f = ks_printf("spec.nodeSelector[%s]", k);
                char *q = ks_go_quote(json_string_value(now) ? json_string_value(now) : "");
                cause(causes, "FieldValueInvalid", f,
                      "Invalid value: %s: field is immutable when `nodeSelector` is set", q);
                free(q);
                free(f);
            }
        }
        if (ons)
            json_object_set(munged, "nodeSelector", (json_t *)ons);
        else
            json_object_del(munged, "nodeSelector");
    }
    if (!pod_equal(munged, ospec)) {
        char *diff = pod_spec_diff(ospec, munged);
        cause(causes, "FieldValueForbidden", "spec",
              "Forbidden: pod updates may not change fields other than "
              "`spec.containers[*].image`,`spec.initContainers[*].image`,"
              "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
              "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
              "was previously negative)\n%s",
              diff);
        free(diff);
    }
    json_decref(munged);
}

/* A field's value as field.Invalid prints it when the Go field is a
 * pointer to a string type: %q of the value, or "null" (quoted too: the
 * error printer swaps a nil pointer for the string "null"). malloc'd */
static char *go_string_ptr(const json_t *v)
{
    return ks_go_quote(json_is_string(v) ? json_string_value(v) : "null");
}

/* ValidateObjectMetaUpdate's ValidateNoNewFinalizers: an object being
 * deleted takes no finalizer it did not have (the rest of its rules are
 * kept by the registry: kubesim restores name, uid, timestamps and
 * generation from the stored object). */
static void no_new_finalizers(const json_t *obj, const json_t *old, json_t *causes)
{
    const json_t *omd = json_object_get(old, "metadata");
    if (!json_string_value(json_object_get(omd, "deletionTimestamp")))
        return;
    const json_t *ofin = json_object_get(omd, "finalizers");
    json_t *extra = json_object(); /* a set: sorted below */
    size_t i, j;
    json_t *f, *of;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "finalizers"), i, f)
    {
        bool had = false;
        json_array_foreach(ofin, j, of)
        {
            had |= json_equal(f, of);
        }
        if (!had && json_is_string(f))
            json_object_set(extra, json_string_value(f), json_true());
    }
    if (json_object_size(extra)) {
        size_t n;
        const char **keys = ks_sorted_keys(extra, &n);
        json_t *list = json_array();
        for (i = 0; i < n; i++)
            json_array_append_new(list, json_string(keys[i]));
        char *vals = ks_go_strings(list, "[]string");
        cause(causes, "FieldValueForbidden", "metadata.finalizers",
              "Forbidden: no new finalizers can be added if the object is being deleted, found "
              "new finalizers %s",
              vals);
        free(vals);
        json_decref(list);
        free(keys);
    }
    json_decref(extra);
}

/* pkg/registry/apps/deployment/strategy.go ValidateUpdate: outside
 * extensions/v1beta1 (which kubesim does not serve) the selector is
 * immutable (apivalidation.ValidateImmutableField, Semantic.DeepEqual). */
static void immutable_selector(const json_t *obj, const json_t *old, json_t *causes)
{
    const json_t *sel = json_object_get(json_object_get(obj, "spec"), "selector");
    const json_t *osel = json_object_get(json_object_get(old, "spec"), "selector");
    if (semantic_equal(sel, osel))
        return;
    char *v = go_label_selector(sel);
    cause(causes, "FieldValueInvalid", "spec.selector", "Invalid value: %s: field is immutable", v);
    free(v);
}

static bool same_string_at(const json_t *a, const json_t *b, size_t i)
{
    const char *x = json_string_value(json_array_get(a, i));
    const char *y = json_string_value(json_array_get(b, i));
    return strcmp(x ? x : "", y ? y : "") == 0;
}

/* clusterIPs or ipFamilies, now and before an update */
struct dual_list {
    const char *name, *noun; /* "clusterIPs", "clusterIP" */
    const json_t *now, *was;
    const char *value; /* now, as Go prints it */
    bool each_index;   /* a change of the same length names its index, or [0] */
};

/* validateUpgradeDowngradeClusterIPs or ...IPFamilies: the primary may not
 * change; a downgrade may not unset it (judged by the count of clusterIPs,
 * nips, in both) and must set SingleStack. Go prints the clusterIPs (ipsv)
 * for a changed primary in both, and the list itself otherwise. */
static void dual_list_change(const struct dual_list *d, size_t nips, const char *ipsv,
                             const char *policyv, bool single, json_t *causes)
{
    const char *const once = "may not change once set";
    size_t n = json_array_size(d->now), on = json_array_size(d->was);
    char *f0 = ks_printf("spec.%s[0]", d->name);
    if (on == n) {
        for (size_t i = 0; i < on; i++) {
            if (same_string_at(d->was, d->now, i))
                continue;
            char *f = d->each_index ? ks_printf("spec.%s[%zu]", d->name, i) : ks_strdup(f0);
            cause(causes, "FieldValueInvalid", f, "Invalid value: %s: %s", d->value, once);
            free(f);
        }
    } else if (on > n) {
        if (nips == 0)
            cause(causes, "FieldValueInvalid", f0, "Invalid value: %s: primary %s can not be unset",
                  d->value, d->noun);
        if (n > 0 && !same_string_at(d->was, d->now, 0))
            cause(causes, "FieldValueInvalid", f0, "Invalid value: %s: %s", ipsv, once);
        if (n == 1 && !single)
            cause(causes, "FieldValueInvalid", "spec.ipFamilyPolicy",
                  "Invalid value: %s: must be set to 'SingleStack' when releasing the secondary %s",
                  policyv, d->noun);
    } else if (on > 0 && n > 0 && !same_string_at(d->was, d->now, 0)) {
        cause(causes, "FieldValueInvalid", f0, "Invalid value: %s: %s", ipsv, once);
    }
    free(f0);
}

/* pkg/apis/core/validation ValidateServiceUpdate, before the Service's
 * own rules: validateUpgradeDowngradeClusterIPs, ...IPFamilies and
 * validateLoadBalancerClassField(old, new). The values printed are the
 * ones Go prints, including the new clusterIPs where the ipFamilies
 * checks of a downgrade or upgrade print them. */
static void validate_service_update(const json_t *obj, const json_t *old, json_t *causes)
{
    const json_t *spec = json_object_get(obj, "spec"), *ospec = json_object_get(old, "spec");
    const char *type = str_at(spec, "type"), *otype = str_at(ospec, "type");
    type = type ? type : "ClusterIP";
    otype = otype ? otype : "ClusterIP";
    const json_t *ips = json_object_get(spec, "clusterIPs");
    const json_t *oips = json_object_get(ospec, "clusterIPs");
    const json_t *fams = json_object_get(spec, "ipFamilies");
    const json_t *ofams = json_object_get(ospec, "ipFamilies");
    const char *policy = str_at(spec, "ipFamilyPolicy");
    bool single = policy && strcmp(policy, "SingleStack") == 0;
    char *ipsv = ks_go_strings(ips, "[]string");
    char *famsv = ks_go_strings(fams, "[]core.IPFamily");
    char *policyv = go_string_ptr(json_object_get(spec, "ipFamilyPolicy"));
    const char *const once = "may not change once set";
    bool en = strcmp(type, "ExternalName") == 0 || strcmp(otype, "ExternalName") == 0;
    bool headless = svc_headless(spec), oheadless = svc_headless(ospec);
    const struct dual_list cips = {"clusterIPs", "clusterIP", ips, oips, ipsv, true};
    const struct dual_list fam = {"ipFamilies", "ipFamily", fams, ofams, famsv, false};
    if (!en && !(headless && oheadless))
        dual_list_change(&cips, json_array_size(ips), ipsv, policyv, single, causes);
    if (!en && headless == oheadless && !headless)
        dual_list_change(&fam, json_array_size(ips), ipsv, policyv, single, causes);
    /* validateLoadBalancerClassField(old, new); ValidateService repeats its
     * checks of the new object, and the message lists a repeated error
     * once (ToAggregate) */
    const json_t *cls = json_object_get(spec, "loadBalancerClass");
    const json_t *ocls = json_object_get(ospec, "loadBalancerClass");
    bool lb = strcmp(type, "LoadBalancer") == 0;
    if (lb && strcmp(otype, "LoadBalancer") == 0 &&
        !(json_is_string(cls) == json_is_string(ocls) &&
          (!json_is_string(cls) || strcmp(json_string_value(cls), json_string_value(ocls)) == 0))) {
        char *v = go_string_ptr(cls);
        cause(causes, "FieldValueInvalid", "spec.loadBalancerClass", "Invalid value: %s: %s", v,
              once);
        free(v);
    }
    if (lb && json_is_string(cls))
        invalid_str(causes, "spec.loadBalancerClass", json_string_value(cls),
                    ks_msgs_qualified_name(json_string_value(cls)));
    else if (!lb && json_is_string(cls))
        cause(causes, "FieldValueForbidden", "spec.loadBalancerClass",
              "Forbidden: may only be used when `type` is 'LoadBalancer'");
    free(ipsv);
    free(famsv);
    free(policyv);
}

/* ValidateConfigMapUpdate, ValidateSecretUpdate: an immutable object keeps
 * its data and stays immutable; a Secret keeps its type (defaulted to
 * Opaque). (Go compares the data maps with reflect.DeepEqual, where an
 * empty map differs from none; kubesim stores both alike.) */
static void immutable_data(const json_t *obj, const json_t *old, bool secret, json_t *causes)
{
    if (secret) {
        const char *t = str_at(obj, "type"), *ot = str_at(old, "type");
        t = t && *t ? t : "Opaque";
        ot = ot && *ot ? ot : "Opaque";
        if (strcmp(t, ot) != 0) {
            char *q = ks_go_quote(t);
            cause(causes, "FieldValueInvalid", "type", "Invalid value: %s: field is immutable", q);
            free(q);
        }
    }
    if (!json_is_true(json_object_get(old, "immutable")))
        return;
    static const char *const msg = "Forbidden: field is immutable when `immutable` is set";
    if (!json_is_true(json_object_get(obj, "immutable")))
        cause(causes, "FieldValueForbidden", "immutable", "%s", msg);
    if (!semantic_equal(json_object_get(obj, "data"), json_object_get(old, "data")))
        cause(causes, "FieldValueForbidden", "data", "%s", msg);
    if (!secret &&
        !semantic_equal(json_object_get(obj, "binaryData"), json_object_get(old, "binaryData")))
        cause(causes, "FieldValueForbidden", "binaryData", "%s", msg);
}

/* pkg/apis/rbac/validation ValidateRoleBindingUpdate: the roleRef stays
 * (printed as the internal rbac.RoleRef). */
static void immutable_role_ref(const json_t *obj, const json_t *old, json_t *causes)
{
    const json_t *ref = json_object_get(obj, "roleRef"), *oref = json_object_get(old, "roleRef");
    static const char *const keys[] = {"apiGroup", "kind", "name"};
    bool same = true;
    for (size_t i = 0; i < 3; i++) {
        const char *a = str_at(ref, keys[i]), *b = str_at(oref, keys[i]);
        same &= strcmp(a ? a : "", b ? b : "") == 0;
    }
    if (same)
        return;
    const char *g = str_at(ref, "apiGroup"), *k = str_at(ref, "kind"), *n = str_at(ref, "name");
    char *qg = ks_go_quote(g ? g : ""), *qk = ks_go_quote(k ? k : ""),
         *qn = ks_go_quote(n ? n : "");
    cause(causes, "FieldValueInvalid", "roleRef",
          "Invalid value: rbac.RoleRef{APIGroup:%s, Kind:%s, Name:%s}: cannot change roleRef", qg,
          qk, qn);
    free(qg);
    free(qk);
    free(qn);
}

json_t *ks_validate_object(const struct ks_res *def, const json_t *obj, const json_t *old,
                           bool create)
{
    json_t *causes = json_array();
    validate_meta(def, obj, create, causes);
    if (old)
        no_new_finalizers(obj, old, causes);
    if (strcmp(def->key, "deployments.apps") == 0) {
        validate_deployment(obj, causes);
        if (old) /* the strategy appends this after ValidateDeploymentUpdate */
            immutable_selector(obj, old, causes);
    } else if (strcmp(def->key, "replicasets.apps") == 0) {
        validate_replicaset(obj, causes);
        if (old) /* apps/v1: the strategy's immutable selector */
            immutable_selector(obj, old, causes);
    } else if (strcmp(def->key, "services") == 0) {
        if (old)
            validate_service_update(obj, old, causes);
        validate_service(obj, causes);
    } else if (strcmp(def->key, "events") == 0) {
        validate_event(obj, causes);
    } else if (strcmp(def->key, "pods") == 0 && !old) {
        validate_pod(obj, causes);
    } else if (strcmp(def->key, "pods") == 0) {
        validate_pod_update(obj, old, causes);
    } else if (strcmp(def->key, "configmaps") == 0) {
        if (old)
            immutable_data(obj, old, false, causes);
        validate_config_map(obj, causes);
    } else if (strcmp(def->key, "secrets") == 0) {
        if (old)
            immutable_data(obj, old, true, causes);
        validate_secret(obj, causes);
    } else if (strcmp(def->key, "roles." RBAC_GROUP) == 0) {
        validate_policy_rules(obj, true, causes);
    } else if (strcmp(def->key, "clusterroles." RBAC_GROUP) == 0) {
        validate_policy_rules(obj, false, causes);
        validate_aggregation_rule(obj, causes);
    } else if (strcmp(def->key, "rolebindings." RBAC_GROUP) == 0 ||
               strcmp(def->key, "clusterrolebindings." RBAC_GROUP) == 0) {
        validate_binding(obj, def->namespaced, causes);
        if (old)
            immutable_role_ref(obj, old, causes);
    } else if (strcmp(def->key, "endpointslices.discovery.k8s.io") == 0) {
        ks_validate_endpointslice(obj, old, causes);
    } else if (strcmp(def->key, "endpoints") == 0) {
        ks_validate_endpoints(obj, causes);
    } else if (strcmp(def->key, "poddisruptionbudgets.policy") == 0) {
        validate_pdb(obj, causes);
    } else if (strcmp(def->key, "networkpolicies.networking.k8s.io") == 0) {
        ks_validate_netpol(obj, old, causes);
    } else if (strcmp(def->key, "leases.coordination.k8s.io") == 0) {
        validate_lease(obj, causes);
    } else if (strcmp(def->key, "validatingwebhookconfigurations.admissionregistration.k8s.io") ==
               0) {
        ks_validate_whconfig(obj, old, false, causes);
    } else if (strcmp(def->key, "mutatingwebhookconfigurations.admissionregistration.k8s.io") ==
               0) {
        ks_validate_whconfig(obj, old, true, causes);
    } else if (strcmp(def->key, "customresourcedefinitions.apiextensions.k8s.io") == 0) {
        ks_validate_crd(obj, old, causes);
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

/* ---- webhook client configs (apiserver/pkg/util/webhook/validation.go) ------------ */

static bool url_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The error of Go's url.unescape over s[0..n) (NULL when none), as
 * `invalid URL escape "%zz"`. malloc'd */
static char *url_escape_error(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%')
            continue;
        if (i + 2 >= n || !url_hex(s[i + 1]) || !url_hex(s[i + 2])) {
            size_t m = n - i < 3 ? n - i : 3;
            char *bad = ks_printf("%.*s", (int)m, s + i);
            char *q = ks_go_quote(bad);
            char *e = ks_printf("invalid URL escape %s", q);
            free(q);
            free(bad);
            return e;
        }
        i += 2;
    }
    return NULL;
}

/*
 * Go's net/url.Parse far enough for ValidateWebhookURL: NULL and the parts
 * in *u, or the error text (malloc'd) as url.Error words it without the
 * "parse %q: " prefix.
 */
struct go_url {
    char *scheme, *user, *host, *query, *fragment;
};

static void go_url_free(struct go_url *u)
{
    free(u->scheme);
    free(u->user);
    free(u->host);
    free(u->query);
    free(u->fragment);
}

/* url's validOptionalPort over port[0..n): "" or ':' and digits; else
 * `invalid port ":x" after host` (malloc'd) */
static char *port_error(const char *port, size_t n)
{
    bool ok = n == 0 || port[0] == ':';
    for (size_t i = 1; ok && i < n; i++)
        ok = port[i] >= '0' && port[i] <= '9';
    if (ok)
        return NULL;
    char *pp = ks_printf("%.*s", (int)n, port);
    char *qp = ks_go_quote(pp);
    char *e = ks_printf("invalid port %s after host", qp);
    free(qp);
    free(pp);
    return e;
}

static char *go_url_parse(const char *raw, struct go_url *u)
{
    memset(u, 0, sizeof(*u));
    const char *hash = strchr(raw, '#');
    size_t n = hash ? (size_t)(hash - raw) : strlen(raw);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)raw[i] < 0x20 || raw[i] == 0x7f)
            return ks_strdup("net/url: invalid control character in URL");
    /* getScheme */
    size_t rest = 0;
    for (size_t i = 0; i < n; i++) {
        char c = raw[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            continue;
        if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
            if (i == 0)
                break;
            continue;
        }
        if (c == ':') {
            if (i == 0)
                return ks_strdup("missing protocol scheme");
            u->scheme = ks_printf("%.*s", (int)i, raw);
            for (char *p = u->scheme; *p; p++)
                *p = (char)tolower((unsigned char)*p);
            rest = i + 1;
        }
        break;
    }
    const char *r = raw + rest;
    size_t rn = n - rest;
    const char *q = memchr(r, '?', rn);
    if (q) {
        bool force = q == r + rn - 1; /* a single trailing '?': ForceQuery, no RawQuery */
        if (!force)
            u->query = ks_printf("%.*s", (int)(r + rn - q - 1), q + 1);
        rn = (size_t)(q - r);
    }
    if (rn == 0 || r[0] != '/') {
        if (!u->scheme) { /* a relative path: its first segment may not hold a colon */
            const char *slash = memchr(r, '/', rn);
            size_t seg = slash ? (size_t)(slash - r) : rn;
            if (memchr(r, ':', seg))
                return ks_strdup("first path segment in URL cannot contain colon");
        }
        /* opaque (scheme:rest) or a path: no host */
    } else if (rn >= 2 && r[1] == '/' && (u->scheme || rn < 3 || r[2] != '/')) {
        const char *a = r + 2;
        const char *end = memchr(a, '/', rn - 2);
        size_t an = end ? (size_t)(end - a) : rn - 2;
        const char *at = NULL;
        for (size_t i = 0; i < an; i++)
            if (a[i] == '@')
                at = a + i;
        const char *h = a;
        if (at) {
            u->user = ks_printf("%.*s", (int)(at - a), a);
            h = at + 1;
        }
        size_t hn = an - (size_t)(h - a);
        if (hn && h[0] == '[') {
            const char *close = memchr(h, ']', hn);
            if (!close)
                return ks_strdup("missing ']' in host");
            const char *port = close + 1;
            char *e = port_error(port, hn - (size_t)(port - h));
            if (e)
                return e;
        } else {
            const char *colon = NULL;
            for (size_t i = 0; i < hn; i++)
                if (h[i] == ':')
                    colon = h + i;
            char *perr = colon ? port_error(colon, hn - (size_t)(colon - h)) : NULL;
            if (perr)
                return perr;
            /* unescape(host, encodeHost): ASCII other than these is refused */
            for (size_t i = 0; i < hn; i++) {
                unsigned char c = (unsigned char)h[i];
                if (c < 0x80 && !isalnum(c) && c != '%' && !strchr("-._~!$&'()*+,;=:[]<>\"", c)) {
                    char ch[2] = {(char)c, 0};
                    char *qc = ks_go_quote(ch);
                    char *e = ks_printf("invalid character %s in host name", qc);
                    free(qc);
                    return e;
                }
            }
        }
        char *e = url_escape_error(h, hn);
        if (e)
            return e;
        u->host = ks_printf("%.*s", (int)hn, h);
        r = a + an;
        rn = rn - 2 - an;
    }
    char *e = url_escape_error(r, rn);
    if (e)
        return e;
    if (hash) {
        e = url_escape_error(hash + 1, strlen(hash + 1));
        if (e)
            return e;
        u->fragment = ks_strdup(hash + 1);
    }
    return NULL;
}

void ks_validate_webhook_url(json_t *causes, const char *field, const char *url, bool force_https)
{
    static const char *const form = "; desired format: https://host[/path]";
    struct go_url u;
    char *err = go_url_parse(url, &u);
    if (err) {
        char *q = ks_go_quote(url);
        cause(causes, "FieldValueRequired", field,
              "Required value: url must be a valid URL: parse %s: %s%s", q, err, form);
        free(q);
        free(err);
        go_url_free(&u);
        return;
    }
    char *msg = NULL;
    if (force_https && (!u.scheme || strcmp(u.scheme, "https") != 0)) {
        msg = ks_printf("'https' is the only allowed URL scheme%s", form);
        invalid_str(causes, field, u.scheme ? u.scheme : "", json_pack("[s]", msg));
        free(msg);
    }
    if (!u.host || !*u.host) {
        msg = ks_printf("host must be specified%s", form);
        invalid_str(causes, field, "", json_pack("[s]", msg));
        free(msg);
    }
    if (u.user)
        invalid_str(causes, field, u.user,
                    json_pack("[s]", "user information is not permitted in the URL"));
    if (u.fragment && *u.fragment)
        invalid_str(causes, field, u.fragment,
                    json_pack("[s]", "fragments are not permitted in the URL"));
    if (u.query && *u.query)
        invalid_str(causes, field, u.query,
                    json_pack("[s]", "query parameters are not permitted in the URL"));
    go_url_free(&u);
}

void ks_validate_webhook_service(json_t *causes, const char *field, const json_t *svc)
{
    const char *name = str_at(svc, "name"), *ns = str_at(svc, "namespace");
    char *f = ks_printf("%s.name", field);
    if (!name || !*name)
        cause(causes, "FieldValueRequired", f, "Required value");
    free(f);
    f = ks_printf("%s.namespace", field);
    if (!ns || !*ns)
        cause(causes, "FieldValueRequired", f, "Required value");
    free(f);
    const json_t *port = json_object_get(svc, "port"); /* defaulted to 443 */
    json_int_t pn = json_is_integer(port) ? json_integer_value(port) : 443;
    if (pn < 1 || pn > 65535) {
        f = ks_printf("%s.port", field);
        char *m = ks_printf("port is not valid: %s", port_range);
        invalid_int(causes, f, pn, m);
        free(m);
        free(f);
    }
    const char *path = str_at(svc, "path");
    if (!path || !*path || strcmp(path, "/") == 0)
        return;
    f = ks_printf("%s.path", field);
    if (strcmp(path, "//") == 0) {
        invalid_str(causes, f, path, json_pack("[s]", "segment[0] may not be empty"));
        free(f);
        return;
    }
    if (path[0] != '/')
        invalid_str(causes, f, path, json_pack("[s]", "must start with a '/'"));
    /* the segments of path[1:] without one trailing '/' */
    size_t n = strlen(path + 1);
    const char *s = path + 1;
    if (n && s[n - 1] == '/')
        n--;
    size_t idx = 0;
    for (size_t start = 0;; idx++) {
        const char *slash = memchr(s + start, '/', n - start);
        size_t end = slash ? (size_t)(slash - s) : n;
        char *seg = ks_printf("%.*s", (int)(end - start), s + start);
        if (!*seg) {
            char *m = ks_printf("segment[%zu] may not be empty", idx);
            invalid_str(causes, f, path, json_pack("[s]", m));
            free(m);
        } else {
            json_t *msgs = ks_msgs_dns1123_subdomain(seg);
            size_t i;
            json_t *m;
            json_array_foreach(msgs, i, m)
            {
                char *mm = ks_printf("segment[%zu]: %s", idx, json_string_value(m));
                invalid_str(causes, f, path, json_pack("[s]", mm));
                free(mm);
            }
            json_decref(msgs);
        }
        free(seg);
        if (!slash)
            break;
        start = end + 1;
    }
    free(f);
}
