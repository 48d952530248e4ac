/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ValidatingWebhookConfiguration and MutatingWebhookConfiguration
 * (admissionregistration.k8s.io/v1) as the apiserver's registry takes
 * them: the v1 defaults (pkg/apis/admissionregistration/v1/defaults.go)
 * and the validation of pkg/apis/admissionregistration/validation/
 * validation.go, with its field paths and messages.
 *
 * DESIGN
 * Create validates with the strict options. An update derives them from
 * the OLD object (ValidateValidatingWebhookConfigurationUpdate): a rule an
 * old webhook already broke (side effects other than None/NoneOnDryRun, no
 * recognized AdmissionReview version, duplicate names, invalid label
 * values in a selector) is not enforced again, and unchanged
 * matchConditions are not validated again.
 *
 * Values print as field.Error's ErrorBody prints them in Kubernetes 1.32,
 * the version kubesim reports (apimachinery pkg/util/validation/field/
 * errors.go): a plain string with %q, an int with %v, anything else with
 * %#v: a typed string such as FailurePolicyType quoted, a slice as
 * []string{"*", "apps"} or []admissionregistration.OperationType{...}
 * (1.34 and later print these as JSON).
 *
 * Not emulated: the CEL compilation of a matchCondition expression
 * (validateMatchConditionsExpression compiles it with the apiserver's CEL
 * environment and cost limits). An expression that is not empty is
 * accepted whatever it says; only the rules that need no CEL are checked.
 */
#include "kubesim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_CONDITIONS_MAX 64

/* ---- values as ErrorBody prints them ------------------------------------------- */

/* One UTF-8 sequence at s (n bytes left) as Go's utf8.DecodeRune reads it:
 * the rune and its length, or -1 and 1 for an invalid byte. */
static int32_t utf8_rune(const unsigned char *s, size_t n, size_t *ret_len)
{
    *ret_len = 1;
    unsigned char c = s[0];
    size_t len;
    int32_t r, min;
    if (c < 0x80) {
        return c;
    } else if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        r = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        r = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        r = c & 0x07;
        min = 0x10000;
    } else {
        return -1;
    }
    if (n < len)
        return -1;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        r = (r << 6) | (s[i] & 0x3f);
    }
    if (r < min || r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff))
        return -1;
    *ret_len = len;
    return r;
}

/* ---- field.Error constructors ------------------------------------------------- */

#define required ks_required

/* field.Invalid(field, a slice value of Go type type, detail) */
static void invalid_list(json_t *causes, const char *field, const json_t *list, const char *type,
                         const char *detail)
{
    char *v = ks_go_strings(list, type);
    ks_cause(causes, "FieldValueInvalid", field, "Invalid value: %s: %s", v, detail);
    free(v);
}

/* field.Invalid(field, a plain string value, detail) */
static void invalid_one(json_t *causes, const char *field, const char *value, const char *detail)
{
    ks_invalid_str(causes, field, value, json_pack("[s]", detail));
}

/* ---- small helpers ---------------------------------------------------------------- */

static const char *str_member(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(obj, k));
}

static bool in_list(const char *v, const char *const *set)
{
    for (; *set; set++)
        if (strcmp(v, *set) == 0)
            return true;
    return false;
}

static bool has_wildcard(const json_t *list)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), "*") == 0)
            return true;
    }
    return false;
}

/* The i-th string of a list ("" for anything else: the zero value). */
static const char *str_item(const json_t *list, size_t i)
{
    const char *s = json_string_value(json_array_get(list, i));
    return s ? s : "";
}

/* strings.TrimSpace(s) == "": s holds nothing but Unicode white space
 * (unicode.IsSpace). */
static bool blank(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0; i < n;) {
        size_t len;
        int32_t r = utf8_rune(s + i, n - i, &len);
        bool space = (r >= '\t' && r <= '\r') || r == ' ' || r == 0x85 || r == 0xa0 ||
                     r == 0x1680 || (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 ||
                     r == 0x202f || r == 0x205f || r == 0x3000;
        if (!space)
            return false;
        i += len;
    }
    return true;
}

/* ---- defaults (pkg/apis/admissionregistration/v1/defaults.go) ----------------------- */

static void set_default(json_t *obj, const char *k, json_t *v)
{
    if (!json_object_get(obj, k) || json_is_null(json_object_get(obj, k)))
        json_object_set_new(obj, k, v);
    else
        json_decref(v);
}

void ks_whconfig_defaults(json_t *obj, bool mutating)
{
    json_t *hooks = json_object_get(obj, "webhooks");
    size_t i;
    json_t *hook;
    json_array_foreach(hooks, i, hook)
    {
        if (json_is_null(hook)) { /* a null item decodes as the zero webhook */
            hook = json_object();
            json_array_set_new(hooks, i, hook);
        }
        if (!json_is_object(hook))
            continue;
        /* SetDefaults_ValidatingWebhook / SetDefaults_MutatingWebhook */
        set_default(hook, "failurePolicy", json_string("Fail"));
        set_default(hook, "matchPolicy", json_string("Equivalent"));
        set_default(hook, "namespaceSelector", json_object());
        set_default(hook, "objectSelector", json_object());
        set_default(hook, "timeoutSeconds", json_integer(10));
        if (mutating)
            set_default(hook, "reinvocationPolicy", json_string("Never"));
        /* SetDefaults_ServiceReference */
        json_t *svc = json_object_get(json_object_get(hook, "clientConfig"), "service");
        if (json_is_object(svc))
            set_default(svc, "port", json_integer(443));
        /* SetDefaults_Rule */
        json_t *rules = json_object_get(hook, "rules");
        size_t j;
        json_t *rule;
        json_array_foreach(rules, j, rule)
        {
            if (json_is_null(rule)) {
                rule = json_object();
                json_array_set_new(rules, j, rule);
            }
            if (json_is_object(rule))
                set_default(rule, "scope", json_string("*"));
        }
    }
}

/* ---- validation (pkg/apis/admissionregistration/validation/validation.go) ----------- */

struct opts {
    bool ignore_match_conditions;
    bool require_no_side_effects;
    bool require_recognized_review_version;
    bool require_unique_names;
    bool allow_invalid_label_value;
};

static const char *const accepted_review_versions[] = {"v1", "v1beta1", NULL};
static const char *const operations[] = {"*", "CONNECT", "CREATE", "DELETE", "UPDATE", NULL};
static const char *const scopes[] = {"*", "Cluster", "Namespaced", NULL};
static const char *const failure_policies[] = {"Fail", "Ignore", NULL};
static const char *const match_policies[] = {"Equivalent", "Exact", NULL};
static const char *const reinvocation_policies[] = {"IfNeeded", "Never", NULL};
static const char *const side_effects_all[] = {"None", "NoneOnDryRun", "Some", "Unknown", NULL};
static const char *const side_effects_none[] = {"None", "NoneOnDryRun", NULL};

/* a set's List() as NotSupported quotes it: "A", "B" (malloc'd) */
static char *quoted_set(const char *const *set)
{
    char *out = ks_strdup("");
    for (size_t i = 0; set[i]; i++) {
        char *o = ks_printf("%s%s\"%s\"", out, i ? ", " : "", set[i]);
        free(out);
        out = o;
    }
    return out;
}

/* NotSupported when a present string member is not in set */
static void enum_member(json_t *causes, const json_t *obj, const char *k, const char *path,
                        const char *const *set)
{
    const char *v = str_member(obj, k);
    if (!v || in_list(v, set))
        return;
    char *f = ks_printf("%s.%s", path, k);
    char *sup = quoted_set(set);
    ks_not_supported(causes, f, v, sup);
    free(sup);
    free(f);
}

/* validateResources (subresources allowed) */
static void validate_resources(const json_t *resources, const char *path, json_t *causes)
{
    size_t n = json_array_size(resources);
    if (n == 0)
        required(causes, path, NULL);
    json_t *res_with_wild_sub = json_object(); /* x of each x/<wildcard> */
    json_t *sub_with_wild_res = json_object(); /* x of each <wildcard>/x */
    bool double_wild = false, single_wild = false, res_without_sub = false;
    for (size_t i = 0; i < n; i++) {
        const char *rs = str_item(resources, i);
        char *f = ks_printf("%s[%zu]", path, i);
        if (!*rs) {
            required(causes, f, NULL);
            free(f);
            continue;
        }
        if (strcmp(rs, "*/*") == 0)
            double_wild = true;
        if (strcmp(rs, "*") == 0)
            single_wild = true;
        const char *slash = strchr(rs, '/');
        if (!slash) {
            /* an assignment upstream, not an or: the last such item decides */
            res_without_sub = strcmp(rs, "*") != 0;
            free(f);
            continue;
        }
        char *res = ks_printf("%.*s", (int)(slash - rs), rs);
        const char *sub = slash + 1;
        if (json_object_get(res_with_wild_sub, res)) {
            char *m = ks_printf("if '%s/*' is present, must not specify %s", res, rs);
            invalid_one(causes, f, rs, m);
            free(m);
        }
        if (json_object_get(sub_with_wild_res, sub)) {
            char *m = ks_printf("if '*/%s' is present, must not specify %s", sub, rs);
            invalid_one(causes, f, rs, m);
            free(m);
        }
        if (strcmp(sub, "*") == 0)
            json_object_set_new(res_with_wild_sub, res, json_true());
        if (strcmp(res, "*") == 0)
            json_object_set_new(sub_with_wild_res, sub, json_true());
        free(res);
        free(f);
    }
    if (n > 1 && double_wild)
        invalid_list(causes, path, resources, "[]string",
                     "if '*/*' is present, must not specify other resources");
    if (single_wild && res_without_sub)
        invalid_list(causes, path, resources, "[]string",
                     "if '*' is present, must not specify other resources without subresources");
    json_decref(res_with_wild_sub);
    json_decref(sub_with_wild_res);
}

/* validateRuleWithOperations, then validateRule with subresources allowed */
static void validate_rule(const json_t *rule, const char *path, json_t *causes)
{
    const json_t *ops = json_object_get(rule, "operations");
    char *f = ks_printf("%s.operations", path);
    if (json_array_size(ops) == 0)
        required(causes, f, NULL);
    if (json_array_size(ops) > 1 && has_wildcard(ops))
        invalid_list(causes, f, ops, "[]admissionregistration.OperationType",
                     "if '*' is present, must not specify other operations");
    char *sup = quoted_set(operations);
    for (size_t i = 0; i < json_array_size(ops); i++) {
        const char *op = str_item(ops, i);
        if (!in_list(op, operations)) {
            char *fi = ks_printf("%s[%zu]", f, i);
            ks_not_supported(causes, fi, op, sup);
            free(fi);
        }
    }
    free(sup);
    free(f);

    const json_t *groups = json_object_get(rule, "apiGroups");
    f = ks_printf("%s.apiGroups", path);
    if (json_array_size(groups) == 0)
        required(causes, f, NULL);
    if (json_array_size(groups) > 1 && has_wildcard(groups))
        invalid_list(causes, f, groups, "[]string",
                     "if '*' is present, must not specify other API groups");
    free(f);
    /* a group may be empty (the legacy "v1" API); a version may not */
    const json_t *versions = json_object_get(rule, "apiVersions");
    f = ks_printf("%s.apiVersions", path);
    if (json_array_size(versions) == 0)
        required(causes, f, NULL);
    if (json_array_size(versions) > 1 && has_wildcard(versions))
        invalid_list(causes, f, versions, "[]string",
                     "if '*' is present, must not specify other API versions");
    for (size_t i = 0; i < json_array_size(versions); i++) {
        if (!*str_item(versions, i)) {
            char *fi = ks_printf("%s[%zu]", f, i);
            required(causes, fi, NULL);
            free(fi);
        }
    }
    free(f);
    f = ks_printf("%s.resources", path);
    validate_resources(json_object_get(rule, "resources"), f, causes);
    free(f);
    enum_member(causes, rule, "scope", path, scopes);
}

/* validateMatchConditions without the CEL compilation (see the top) */
static void validate_match_conditions(const json_t *conds, const char *path, json_t *causes)
{
    size_t n = json_array_size(conds);
    if (n > MATCH_CONDITIONS_MAX)
        ks_cause(causes, "FieldValueTooMany", path, "Too many: %zu: must have at most %d items", n,
                 MATCH_CONDITIONS_MAX);
    json_t *names = json_object();
    for (size_t i = 0; i < n; i++) {
        const json_t *mc = json_array_get(conds, i);
        const char *expr = str_member(mc, "expression"), *name = str_member(mc, "name");
        expr = expr ? expr : "";
        name = name ? name : "";
        char *f = ks_printf("%s[%zu].expression", path, i);
        if (blank(expr))
            required(causes, f, NULL);
        /* else: validateMatchConditionsExpression compiles it (CEL), not emulated */
        free(f);
        f = ks_printf("%s[%zu].name", path, i);
        if (!*name)
            required(causes, f, NULL);
        else /* apivalidation.ValidateQualifiedName */
            ks_invalid_str(causes, f, name, ks_msgs_qualified_name(name));
        if (*name) {
            if (json_object_get(names, name))
                ks_duplicate(causes, f, name);
            else
                json_object_set_new(names, name, json_true());
        }
        free(f);
    }
    json_decref(names);
}

/* validateValidatingWebhook / validateMutatingWebhook at path */
static void validate_webhook(const json_t *hook, const char *path, bool mutating,
                             const struct opts *o, json_t *causes)
{
    /* utilvalidation.IsFullyQualifiedName */
    const char *name = str_member(hook, "name");
    name = name ? name : "";
    char *f = ks_printf("%s.name", path);
    if (!*name) {
        required(causes, f, NULL);
    } else {
        json_t *msgs = ks_msgs_dns1123_subdomain(name);
        if (json_array_size(msgs) > 0) {
            char *joined = ks_join(msgs, "", ",", "");
            invalid_one(causes, f, name, joined);
            free(joined);
        } else {
            size_t dots = 0;
            for (const char *p = name; *p; p++)
                dots += *p == '.';
            if (dots < 2)
                invalid_one(causes, f, name,
                            "should be a domain with at least three segments separated by dots");
        }
        json_decref(msgs);
    }
    free(f);

    const json_t *rules = json_object_get(hook, "rules");
    for (size_t i = 0; i < json_array_size(rules); i++) {
        f = ks_printf("%s.rules[%zu]", path, i);
        validate_rule(json_array_get(rules, i), f, causes);
        free(f);
    }
    enum_member(causes, hook, "failurePolicy", path, failure_policies);
    enum_member(causes, hook, "matchPolicy", path, match_policies);

    const char *const *side = o->require_no_side_effects ? side_effects_none : side_effects_all;
    if (!str_member(hook, "sideEffects")) {
        char *list = ks_strdup("");
        for (size_t i = 0; side[i]; i++) {
            char *l = ks_printf("%s%s%s", list, i ? ", " : "", side[i]);
            free(list);
            list = l;
        }
        char *m = ks_printf("must specify one of %s", list);
        f = ks_printf("%s.sideEffects", path);
        required(causes, f, m);
        free(f);
        free(m);
        free(list);
    }
    enum_member(causes, hook, "sideEffects", path, side);

    const json_t *timeout = json_object_get(hook, "timeoutSeconds");
    if (json_is_integer(timeout) &&
        (json_integer_value(timeout) > 30 || json_integer_value(timeout) < 1)) {
        f = ks_printf("%s.timeoutSeconds", path);
        ks_invalid_int(causes, f, json_integer_value(timeout),
                       "the timeout value must be between 1 and 30 seconds");
        free(f);
    }

    static const char *const selectors[] = {"namespaceSelector", "objectSelector"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *sel = json_object_get(hook, selectors[i]);
        if (!json_is_object(sel))
            continue;
        f = ks_printf("%s.%s", path, selectors[i]);
        ks_validate_label_selector_opts(sel, f, o->allow_invalid_label_value, causes);
        free(f);
    }
    if (mutating)
        enum_member(causes, hook, "reinvocationPolicy", path, reinvocation_policies);

    const json_t *cc = json_object_get(hook, "clientConfig");
    const json_t *url = json_object_get(cc, "url");
    const json_t *svc = json_object_get(cc, "service");
    if (json_is_string(url) == json_is_object(svc)) {
        f = ks_printf("%s.clientConfig", path);
        required(causes, f, "exactly one of url or service is required");
    } else if (json_is_string(url)) {
        f = ks_printf("%s.clientConfig.url", path);
        ks_validate_webhook_url(causes, f, json_string_value(url), true);
    } else {
        f = ks_printf("%s.clientConfig.service", path);
        ks_validate_webhook_service(causes, f, svc);
    }
    free(f);

    if (!o->ignore_match_conditions) {
        f = ks_printf("%s.matchConditions", path);
        validate_match_conditions(json_object_get(hook, "matchConditions"), f, causes);
        free(f);
    }
}

/* validateAdmissionReviewVersions at path */
static void validate_review_versions(const json_t *versions, const char *path, bool require,
                                     json_t *causes)
{
    size_t n = json_array_size(versions);
    if (n == 0) {
        required(causes, path, "must specify one of v1, v1beta1");
        return;
    }
    json_t *seen = json_object();
    bool accepted = false;
    for (size_t i = 0; i < n; i++) {
        const char *v = str_item(versions, i);
        char *f = ks_printf("%s[%zu]", path, i);
        if (json_object_get(seen, v)) {
            invalid_one(causes, f, v, "duplicate version");
            free(f);
            continue;
        }
        json_object_set_new(seen, v, json_true());
        ks_invalid_str(causes, f, v, ks_msgs_dns1035_label(v));
        accepted = accepted || in_list(v, accepted_review_versions);
        free(f);
    }
    json_decref(seen);
    if (require && !accepted)
        invalid_list(causes, path, versions, "[]string",
                     "must include at least one of v1, v1beta1");
}

/* ---- the Update options, from the old object --------------------------------------- */

/* validatingHasNoSideEffects: every old webhook says None or NoneOnDryRun */
static bool old_no_side_effects(const json_t *hooks)
{
    size_t i;
    json_t *h;
    json_array_foreach(hooks, i, h)
    {
        const char *se = str_member(h, "sideEffects");
        if (!se || !in_list(se, side_effects_none))
            return false;
    }
    return true;
}

/* validatingHasAcceptedAdmissionReviewVersions: no old webhook lists
 * versions without one this apiserver accepts */
static bool old_accepted_review_versions(const json_t *hooks)
{
    size_t i;
    json_t *h;
    json_array_foreach(hooks, i, h)
    {
        const json_t *vs = json_object_get(h, "admissionReviewVersions");
        bool ok = false;
        for (size_t j = 0; j < json_array_size(vs); j++)
            ok = ok || in_list(str_item(vs, j), accepted_review_versions);
        if (!ok && json_array_size(vs) > 0)
            return false;
    }
    return true;
}

/* validatingHasUniqueWebhookNames (empty names count too) */
static bool old_unique_names(const json_t *hooks)
{
    json_t *names = json_object();
    bool unique = true;
    size_t i;
    json_t *h;
    json_array_foreach(hooks, i, h)
    {
        const char *n = str_member(h, "name");
        n = n ? n : "";
        if (json_object_get(names, n)) {
            unique = false;
            break;
        }
        json_object_set_new(names, n, json_true());
    }
    json_decref(names);
    return unique;
}

/* validatingWebhookHasInvalidLabelValueInSelector: any error of the strict
 * selector validation in an old webhook */
static bool old_invalid_selector(const json_t *hooks)
{
    json_t *errs = json_array();
    size_t i;
    json_t *h;
    json_array_foreach(hooks, i, h)
    {
        const json_t *ns = json_object_get(h, "namespaceSelector");
        const json_t *os = json_object_get(h, "objectSelector");
        if (json_is_object(ns))
            ks_validate_label_selector_opts(ns, "", false, errs);
        if (json_is_object(os))
            ks_validate_label_selector_opts(os, "", false, errs);
    }
    bool invalid = json_array_size(errs) > 0;
    json_decref(errs);
    return invalid;
}

/* ignoreValidatingWebhookMatchConditions: as many webhooks, each with the
 * same matchConditions (an absent list and an empty one alike: neither
 * has anything to validate) */
static bool same_match_conditions(const json_t *hooks, const json_t *old_hooks)
{
    if (json_array_size(hooks) != json_array_size(old_hooks))
        return false;
    for (size_t i = 0; i < json_array_size(hooks); i++) {
        const json_t *a = json_object_get(json_array_get(hooks, i), "matchConditions");
        const json_t *b = json_object_get(json_array_get(old_hooks, i), "matchConditions");
        if (json_array_size(a) == 0 && json_array_size(b) == 0)
            continue;
        if (!json_equal((json_t *)a, (json_t *)b))
            return false;
    }
    return true;
}

void ks_validate_whconfig(const json_t *obj, const json_t *old, bool mutating, json_t *causes)
{
    const json_t *hooks = json_object_get(obj, "webhooks");
    struct opts o = {
        .require_no_side_effects = true,
        .require_recognized_review_version = true,
        .require_unique_names = true,
    };
    if (old) {
        const json_t *old_hooks = json_object_get(old, "webhooks");
        o.ignore_match_conditions = same_match_conditions(hooks, old_hooks);
        o.require_no_side_effects = old_no_side_effects(old_hooks);
        o.require_recognized_review_version = old_accepted_review_versions(old_hooks);
        o.require_unique_names = old_unique_names(old_hooks);
        o.allow_invalid_label_value = old_invalid_selector(old_hooks);
    }
    json_t *names = json_object();
    for (size_t i = 0; i < json_array_size(hooks); i++) {
        const json_t *hook = json_array_get(hooks, i);
        char *path = ks_printf("webhooks[%zu]", i);
        validate_webhook(hook, path, mutating, &o, causes);
        char *f = ks_printf("%s.admissionReviewVersions", path);
        validate_review_versions(json_object_get(hook, "admissionReviewVersions"), f,
                                 o.require_recognized_review_version, causes);
        free(f);
        const char *name = str_member(hook, "name");
        if (o.require_unique_names && name && *name) {
            f = ks_printf("%s.name", path);
            if (json_object_get(names, name))
                ks_duplicate(causes, f, name);
            else
                json_object_set_new(names, name, json_true());
            free(f);
        }
        free(path);
    }
    json_decref(names);
}
