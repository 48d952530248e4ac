/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pod spec's affinity and topologySpreadConstraints as ValidatePodSpec
 * (pkg/apis/core/validation/validation.go, Kubernetes v1.32) checks them,
 * and the Pod strategy's mutatePodAffinity (pkg/registry/core/pod/
 * strategy.go) that runs before on a Pod's create:
 *
 *  - validateAffinity: validateNodeAffinity (ValidateNodeSelector,
 *    ValidateNodeSelectorTerm, ValidateNodeSelectorRequirement,
 *    ValidateNodeFieldSelectorRequirement, ValidatePreferredSchedulingTerms),
 *    validatePodAffinity and validatePodAntiAffinity (validatePodAffinityTerm,
 *    validateWeightedPodAffinityTerms, ValidatePodAffinityTermSelector,
 *    validateMatchLabelKeysAndMismatchLabelKeys);
 *  - validateTopologySpreadConstraints: ValidateMaxSkew, ValidateTopologyKey,
 *    ValidateWhenUnsatisfiable, ValidateSpreadConstraintNotRepeat,
 *    validateMinDomains, validateNodeInclusionPolicy,
 *    validateMatchLabelKeysInTopologySpread, then the labelSelector.
 *
 * Each error has upstream's path, text and order, its oddities included: a
 * term's namespaces are reported at ".namespace" without an index, and a
 * matchLabelKeys key also in the labelSelector at the term's path with the
 * key's index appended ("...Execution[0][1]").
 *
 * DESIGN: what 1.32 with its default feature gates does. The gates of
 * these fields are on (MatchLabelKeysInPodAffinity beta since 1.31,
 * MatchLabelKeysInPodTopologySpread and NodeInclusionPolicyInPodTopologySpread
 * beta, minDomains GA), so the strategy drops none of them. The values of a
 * node affinity's matchExpressions are not checked as label values (1.33
 * added that). PodValidationOptions' AllowInvalidLabelValueInSelector and
 * AllowInvalidTopologySpreadConstraintLabelSelector are false: they are
 * true only for an update whose old object held such a value, which
 * kubesim never stores. The merge of matchLabelKeys into the selector is
 * a Pod's only (a template is not mutated); upstream's check refuses a
 * matchLabelKeys key only where a matchExpressions entry repeats a key the
 * selector already has, so the one expression the merge adds passes, at
 * the create and again when an update sends it back.
 */
#include "podfields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const not_positive_msg = "must be greater than zero"; /* isNotPositiveErrorMsg */
static const char *const weight_msg = "must be in the range 1-100";
static const char *const bad_operator_msg = "not a valid selector operator";
static const char *const no_selector_msg = "must not be specified when labelSelector is not set";
static const char *const in_selector_msg = "exists in both matchLabelKeys and labelSelector";

/* sets.List of supportedScheduleActions and supportedPodTopologySpreadNodePolicies */
static const char *const schedule_actions[] = {"DoNotSchedule", "ScheduleAnyway", NULL};
static const char *const inclusion_policies[] = {"Honor", "Ignore", NULL};

/* ---- helpers -------------------------------------------------------------------- */

static bool is(const char *s, const char *v)
{
    return strcmp(s, v) == 0;
}

/* unversionedvalidation.ValidateLabelName */
static void label_name(const char *name, const char *field, json_t *causes)
{
    ks_invalid_str(causes, field, name, ks_msgs_qualified_name(name));
}

static const char *str_item(const json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

/* An int32 member; 0 (Go's zero value) when absent. */
static json_int_t int_or_zero(const json_t *obj, const char *k)
{
    return json_integer_value(json_object_get(obj, k));
}

/* ---- nodeAffinity --------------------------------------------------------------- */

/* ValidateNodeSelectorRequirement of a matchExpressions entry */
static void node_selector_requirement(const json_t *rq, const char *path, json_t *causes)
{
    char f[FLD];
    const char *op = str_or_empty(rq, "operator");
    size_t nv = json_array_size(json_object_get(rq, "values"));
    if (is(op, "In") || is(op, "NotIn")) {
        if (nv == 0)
            ks_required(causes, fld(f, "%s.values", path),
                        "must be specified when `operator` is 'In' or 'NotIn'");
    } else if (is(op, "Exists") || is(op, "DoesNotExist")) {
        if (nv > 0)
            forbidden(causes, fld(f, "%s.values", path),
                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
    } else if (is(op, "Gt") || is(op, "Lt")) {
        if (nv != 1)
            ks_required(causes, fld(f, "%s.values", path),
                        "must be specified single value when `operator` is 'Lt' or 'Gt'");
    } else {
        invalid(causes, fld(f, "%s.operator", path), op, bad_operator_msg);
    }
    label_name(str_or_empty(rq, "key"), fld(f, "%s.key", path), causes);
}

/* ValidateNodeFieldSelectorRequirement of a matchFields entry: metadata.name
 * (nodeFieldSelectorValidators: ValidateNodeName) is the only key. */
static void node_field_selector_requirement(const json_t *rq, const char *path, json_t *causes)
{
    char f[FLD];
    const char *op = str_or_empty(rq, "operator");
    const json_t *values = json_object_get(rq, "values");
    if (is(op, "In") || is(op, "NotIn")) {
        if (json_array_size(values) != 1)
            ks_required(causes, fld(f, "%s.values", path),
                        "must be only one value when `operator` is 'In' or 'NotIn' for node field "
                        "selector");
    } else {
        invalid(causes, fld(f, "%s.operator", path), op, bad_operator_msg);
    }
    const char *key = str_or_empty(rq, "key");
    if (!is(key, "metadata.name")) {
        invalid(causes, fld(f, "%s.key", path), key, "not a valid field selector key");
        return;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(values, i, v)
    {
        ks_invalid_str(causes, fld(f, "%s.values[%zu]", path, i), str_item(v),
                       ks_msgs_dns1123_subdomain(str_item(v)));
    }
}

/* ValidateNodeSelectorTerm */
static void node_selector_term(const json_t *term, const char *path, json_t *causes)
{
    char f[FLD];
    size_t j;
    const json_t *rq;
    json_array_foreach(json_object_get(term, "matchExpressions"), j, rq)
    {
        node_selector_requirement(rq, fld(f, "%s.matchExpressions[%zu]", path, j), causes);
    }
    json_array_foreach(json_object_get(term, "matchFields"), j, rq)
    {
        node_field_selector_requirement(rq, fld(f, "%s.matchFields[%zu]", path, j), causes);
    }
}

/* ValidateNodeSelector */
static void node_selector(const json_t *ns, const char *path, json_t *causes)
{
    char f[FLD];
    const json_t *terms = json_object_get(ns, "nodeSelectorTerms");
    if (json_array_size(terms) == 0) {
        ks_required(causes, fld(f, "%s.nodeSelectorTerms", path),
                    "must have at least one node selector term");
        return;
    }
    size_t i;
    const json_t *term;
    json_array_foreach(terms, i, term)
    {
        node_selector_term(term, fld(f, "%s.nodeSelectorTerms[%zu]", path, i), causes);
    }
}

/* A weight of a preferred term outside 1..100. */
static void weight(const json_t *term, const char *path, json_t *causes)
{
    char f[FLD];
    json_int_t w = int_or_zero(term, "weight");
    if (w <= 0 || w > 100)
        ks_invalid_int(causes, fld(f, "%s.weight", path), w, weight_msg);
}

/* validateNodeAffinity (RequiredDuringSchedulingRequiredDuringExecution is
 * not implemented upstream either) */
static void node_affinity(const json_t *na, const char *path, json_t *causes)
{
    char f[FLD];
    if (has(na, "requiredDuringSchedulingIgnoredDuringExecution"))
        node_selector(json_object_get(na, "requiredDuringSchedulingIgnoredDuringExecution"),
                      fld(f, "%s.requiredDuringSchedulingIgnoredDuringExecution", path), causes);
    /* ValidatePreferredSchedulingTerms; the preference's label values are
     * never checked ("they can succeed when the cluster has one node") */
    const json_t *pref = json_object_get(na, "preferredDuringSchedulingIgnoredDuringExecution");
    size_t i;
    const json_t *term;
    json_array_foreach(pref, i, term)
    {
        char tp[FLD];
        fld(tp, "%s.preferredDuringSchedulingIgnoredDuringExecution[%zu]", path, i);
        weight(term, tp, causes);
        node_selector_term(json_object_get(term, "preference"), fld(f, "%s.preference", tp),
                           causes);
    }
}

/* ---- podAffinity, podAntiAffinity ------------------------------------------------ */

/* validateLabelKeys */
static void label_keys(const json_t *keys, const json_t *sel, const char *path, json_t *causes)
{
    char f[FLD];
    if (json_array_size(keys) == 0)
        return;
    if (!json_is_object(sel)) {
        forbidden(causes, path, no_selector_msg);
        return;
    }
    size_t i;
    const json_t *k;
    json_array_foreach(keys, i, k)
    {
        label_name(str_item(k), fld(f, "%s[%zu]", path, i), causes);
    }
}

/* validateMatchLabelKeysAndMismatchLabelKeys of a term at path */
static void match_label_keys(const json_t *term, const char *path, json_t *causes)
{
    char f[FLD];
    const json_t *match = json_object_get(term, "matchLabelKeys");
    const json_t *mismatch = json_object_get(term, "mismatchLabelKeys");
    const json_t *sel = json_object_get(term, "labelSelector");
    label_keys(match, sel, fld(f, "%s.matchLabelKeys", path), causes);
    label_keys(mismatch, sel, fld(f, "%s.mismatchLabelKeys", path), causes);
    size_t i;
    const json_t *k;
    if (json_is_object(sel)) {
        /* a key's last index in matchLabelKeys; the selector's keys so far:
         * a matchExpressions key already there (in matchLabels or an
         * earlier expression) that matchLabelKeys names is refused, at the
         * term's path indexed by the key's position (upstream's path) */
        json_t *index = json_object(), *seen = json_object();
        json_array_foreach(match, i, k)
        {
            json_object_set_new(index, str_item(k), json_integer((json_int_t)i));
        }
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), key, v)
        {
            json_object_set_new(seen, key, json_true());
        }
        json_array_foreach(json_object_get(sel, "matchExpressions"), i, v)
        {
            key = str_or_empty(v, "key");
            const json_t *at = json_object_get(index, key);
            if (at && json_object_get(seen, key))
                invalid(causes,
                        fld(f, "%s[%" JSON_INTEGER_FORMAT "]", path, json_integer_value(at)), key,
                        in_selector_msg);
            json_object_set_new(seen, key, json_true());
        }
        json_decref(index);
        json_decref(seen);
    }
    json_array_foreach(match, i, k)
    {
        size_t j;
        const json_t *m;
        json_array_foreach(mismatch, j, m)
        {
            if (is(str_item(m), str_item(k))) {
                invalid(causes, fld(f, "%s.matchLabelKeys[%zu]", path, i), str_item(k),
                        "exists in both matchLabelKeys and mismatchLabelKeys");
                break;
            }
        }
    }
}

/* validatePodAffinityTerm */
static void pod_affinity_term(const json_t *term, const char *path, json_t *causes)
{
    char f[FLD];
    /* ValidatePodAffinityTermSelector */
    const json_t *sel = json_object_get(term, "labelSelector");
    if (json_is_object(sel))
        ks_validate_label_selector(sel, fld(f, "%s.labelSelector", path), causes);
    sel = json_object_get(term, "namespaceSelector");
    if (json_is_object(sel))
        ks_validate_label_selector(sel, fld(f, "%s.namespaceSelector", path), causes);
    size_t i;
    const json_t *ns;
    json_array_foreach(json_object_get(term, "namespaces"), i, ns)
    {
        /* ValidateNamespaceName, at ".namespace" (upstream's path) */
        ks_invalid_str(causes, fld(f, "%s.namespace", path), str_item(ns),
                       ks_msgs_dns1123_label(str_item(ns)));
    }
    match_label_keys(term, path, causes);
    const char *tk = str_or_empty(term, "topologyKey");
    if (!*tk)
        ks_required(causes, fld(f, "%s.topologyKey", path), "can not be empty");
    label_name(tk, fld(f, "%s.topologyKey", path), causes);
}

/* validatePodAffinity and validatePodAntiAffinity (the same rules) */
static void pod_affinity(const json_t *pa, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    const json_t *term;
    json_array_foreach(json_object_get(pa, "requiredDuringSchedulingIgnoredDuringExecution"), i,
                       term)
    {
        pod_affinity_term(term,
                          fld(f, "%s.requiredDuringSchedulingIgnoredDuringExecution[%zu]", path, i),
                          causes);
    }
    /* validateWeightedPodAffinityTerms */
    json_array_foreach(json_object_get(pa, "preferredDuringSchedulingIgnoredDuringExecution"), i,
                       term)
    {
        char tp[FLD];
        fld(tp, "%s.preferredDuringSchedulingIgnoredDuringExecution[%zu]", path, i);
        weight(term, tp, causes);
        pod_affinity_term(json_object_get(term, "podAffinityTerm"),
                          fld(f, "%s.podAffinityTerm", tp), causes);
    }
}

void ks_validate_affinity(const json_t *affinity, const char *path, json_t *causes)
{
    char f[FLD];
    if (!json_is_object(affinity))
        return;
    if (has(affinity, "nodeAffinity"))
        node_affinity(json_object_get(affinity, "nodeAffinity"), fld(f, "%s.nodeAffinity", path),
                      causes);
    if (has(affinity, "podAffinity"))
        pod_affinity(json_object_get(affinity, "podAffinity"), fld(f, "%s.podAffinity", path),
                     causes);
    if (has(affinity, "podAntiAffinity"))
        pod_affinity(json_object_get(affinity, "podAntiAffinity"),
                     fld(f, "%s.podAntiAffinity", path), causes);
}

/* ---- topologySpreadConstraints --------------------------------------------------- */

/* validateNodeInclusionPolicy of a *NodeInclusionPolicy member */
static void inclusion_policy(const json_t *c, const char *k, const char *path, json_t *causes)
{
    char f[FLD];
    const json_t *v = json_object_get(c, k);
    if (json_is_string(v) && !in_list(json_string_value(v), inclusion_policies))
        ks_not_supported_list(causes, fld(f, "%s.%s", path, k), json_string_value(v),
                              inclusion_policies);
}

/* validateMatchLabelKeysInTopologySpread */
static void spread_match_label_keys(const json_t *c, const char *path, json_t *causes)
{
    char f[FLD];
    const json_t *keys = json_object_get(c, "matchLabelKeys");
    const json_t *sel = json_object_get(c, "labelSelector");
    if (json_array_size(keys) == 0)
        return;
    json_t *in_sel = json_object();
    if (json_is_object(sel)) {
        const char *key;
        const json_t *v;
        size_t i;
        json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), key, v)
        {
            json_object_set_new(in_sel, key, json_true());
        }
        json_array_foreach(json_object_get(sel, "matchExpressions"), i, v)
        {
            json_object_set_new(in_sel, str_or_empty(v, "key"), json_true());
        }
    } else {
        forbidden(causes, path, no_selector_msg);
    }
    size_t i;
    const json_t *k;
    json_array_foreach(keys, i, k)
    {
        label_name(str_item(k), fld(f, "%s[%zu]", path, i), causes);
        if (json_object_get(in_sel, str_item(k)))
            invalid(causes, f, str_item(k), in_selector_msg);
    }
    json_decref(in_sel);
}

void ks_validate_topology_spread(const json_t *constraints, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    const json_t *c;
    json_array_foreach(constraints, i, c)
    {
        char cp[FLD];
        fld(cp, "%s[%zu]", path, i);
        json_int_t skew = int_or_zero(c, "maxSkew");
        if (skew <= 0)
            ks_invalid_int(causes, fld(f, "%s.maxSkew", cp), skew, not_positive_msg);
        const char *tk = str_or_empty(c, "topologyKey");
        if (!*tk)
            ks_required(causes, fld(f, "%s.topologyKey", cp), "can not be empty");
        /* a set's Has: "" is NotSupported too, not Required */
        const char *wu = str_or_empty(c, "whenUnsatisfiable");
        if (!in_list(wu, schedule_actions))
            ks_not_supported_list(causes, fld(f, "%s.whenUnsatisfiable", cp), wu, schedule_actions);
        /* ValidateSpreadConstraintNotRepeat: against the ones after it */
        for (size_t j = i + 1; j < json_array_size(constraints); j++) {
            const json_t *o = json_array_get(constraints, j);
            if (is(tk, str_or_empty(o, "topologyKey")) &&
                is(wu, str_or_empty(o, "whenUnsatisfiable"))) {
                char *pair = ks_printf("{%s, %s}", tk, wu);
                ks_duplicate(causes, fld(f, "%s.{topologyKey, whenUnsatisfiable}", cp), pair);
                free(pair);
                break;
            }
        }
        /* validateMinDomains */
        const json_t *md = json_object_get(c, "minDomains");
        if (json_is_integer(md)) {
            fld(f, "%s.minDomains", cp);
            if (json_integer_value(md) <= 0)
                ks_invalid_int(causes, f, json_integer_value(md), not_positive_msg);
            if (!is(wu, "DoNotSchedule")) {
                char *msg = ks_printf(
                    "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not %s", wu);
                ks_invalid_int(causes, f, json_integer_value(md), msg);
                free(msg);
            }
        }
        inclusion_policy(c, "nodeAffinityPolicy", cp, causes);
        inclusion_policy(c, "nodeTaintsPolicy", cp, causes);
        spread_match_label_keys(c, fld(f, "%s.matchLabelKeys", cp), causes);
        const json_t *sel = json_object_get(c, "labelSelector");
        if (json_is_object(sel))
            ks_validate_label_selector(sel, fld(f, "%s.labelSelector", cp), causes);
    }
}

/* ---- the Pod strategy's mutatePodAffinity ---------------------------------------- */

/* applyLabelKeysToLabelSelector: key op [the Pod's value] for each key the
 * Pod has a label of */
static void apply_label_keys(json_t *sel, const json_t *keys, const char *op, const json_t *labels)
{
    size_t i;
    const json_t *k;
    json_array_foreach(keys, i, k)
    {
        const json_t *value = json_object_get(labels, str_item(k));
        if (!json_is_string(value))
            continue;
        json_t *exprs = json_object_get(sel, "matchExpressions");
        if (!json_is_array(exprs)) {
            exprs = json_array();
            json_object_set_new(sel, "matchExpressions", exprs);
        }
        json_array_append_new(exprs, json_pack("{s:s,s:s,s:[O]}", "key", str_item(k), "operator",
                                               op, "values", value));
    }
}

/* applyMatchLabelKeysAndMismatchLabelKeys; a term without a labelSelector
 * matches nothing and is left alone */
static void apply_term(json_t *term, const json_t *labels)
{
    json_t *sel = json_object_get(term, "labelSelector");
    const json_t *match = json_object_get(term, "matchLabelKeys");
    const json_t *mismatch = json_object_get(term, "mismatchLabelKeys");
    if (!json_is_object(sel) || (json_array_size(match) == 0 && json_array_size(mismatch) == 0))
        return;
    apply_label_keys(sel, match, "In", labels);
    apply_label_keys(sel, mismatch, "NotIn", labels);
}

void ks_pod_affinity_merge_label_keys(json_t *pod)
{
    const json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    json_t *affinity = json_object_get(json_object_get(pod, "spec"), "affinity");
    static const char *const kinds[] = {"podAffinity", "podAntiAffinity"};
    for (size_t n = 0; n < 2; n++) {
        json_t *pa = json_object_get(affinity, kinds[n]);
        size_t i;
        json_t *term;
        json_array_foreach(json_object_get(pa, "preferredDuringSchedulingIgnoredDuringExecution"),
                           i, term)
        {
            apply_term(json_object_get(term, "podAffinityTerm"), labels);
        }
        json_array_foreach(json_object_get(pa, "requiredDuringSchedulingIgnoredDuringExecution"), i,
                           term)
        {
            apply_term(term, labels);
        }
    }
}
