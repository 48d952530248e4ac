/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's RBAC authorizer and what is built on it: the review APIs
 * (authorization.k8s.io/v1 SelfSubjectAccessReview, SubjectAccessReview,
 * LocalSubjectAccessReview, SelfSubjectRulesReview; authentication.k8s.io/v1
 * SelfSubjectReview, TokenReview) and user impersonation.
 *
 * The decision is the RBAC authorizer's (kubernetes
 * plugin/pkg/auth/authorizer/rbac: rbac.go RuleAllows, rule.go
 * appliesToUser, rbac/v1 helpers VerbMatches, APIGroupMatches,
 * ResourceMatches, ResourceNameMatches, NonResourceURLMatches): the
 * ClusterRoleBindings are visited first, then the RoleBindings of the
 * request's namespace, and the first rule that allows decides, with the
 * reason "RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to
 * Group "g"". Nothing allows: no opinion, reason "" (the apiserver's Node
 * authorizer before RBAC has none either).
 *
 * The bootstrap policy is stored at start, as a cluster's apiserver stores
 * it (ks_authz_bootstrap): cluster-admin bound to the groups system:masters
 * and kubeadm:cluster-admins (kubeadm's admin.conf user, kubesim's
 * --token), system:discovery, system:basic-user and
 * system:public-info-viewer bound to system:authenticated (the last also to
 * system:unauthenticated), and the user-facing roles admin, edit and view,
 * aggregated (ks_authz_aggregate, the ClusterRole aggregation controller,
 * run by the controllers thread whenever a ClusterRole changes) from
 * system:aggregate-to-admin/-edit/-view and every ClusterRole labelled
 * rbac.authorization.k8s.io/aggregate-to-<role>: "true". They are ordinary
 * objects: listed, changed or deleted like any other (deleted, they are
 * gone until kubesim restarts, where the apiserver would restore them).
 *
 * Every API request is authorized (after impersonation, before its
 * handler, as the apiserver's WithAuthorization filter), with the
 * attributes of its RequestInfo: resource requests by verb, group,
 * resource, subresource, namespace and name (a list or watch with the
 * field selector metadata.name=X names X; a namespace is its own
 * namespace), everything else by path and the lower-case HTTP method.
 * --authorization-mode AlwaysAllow allows everything (and the reviews say
 * so).
 *
 * Lock: ks_authorize and the rules walk read the store (lock held); the
 * review handlers take the lock themselves.
 */
#include "kubesim.h"

#include <pthread.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

/* ---- bootstrap policy ------------------------------------------------------------------ */

/*
 * The apiserver's bootstrap policy (plugin/pkg/auth/authorizer/rbac/
 * bootstrappolicy/policy.go, the roles a user binds to), stored at start as
 * the rbac/bootstrap-roles post-start hook stores it: labelled
 * kubernetes.io/bootstrapping=rbac-defaults, annotated autoupdate "true".
 * Lists are space-separated; each is sorted when stored (RuleOrDie sorts).
 * Not here: the controller and node roles (system:node, system:kube-*,
 * system:controller:*), which no request to kubesim needs.
 */
#define READ "get list watch"
#define WRITE "create delete deletecollection patch update"
#define READ_WRITE READ " " WRITE

struct boot_rule {
    const char *verbs, *groups, *resources, *urls;
};

struct boot_role {
    const char *name;
    const char *label;     /* a label "<label>": "true" (aggregated into another role) */
    const char *aggregate; /* aggregationRule: roles labelled "<aggregate>": "true" */
    const struct boot_rule *rules;
};

#define AGG "rbac.authorization.k8s.io/aggregate-to-"

static const struct boot_rule cluster_admin_rules[] = {
    {"*", "*", "*", NULL},
    {"*", NULL, NULL, "*"},
    {0},
};
static const struct boot_rule discovery_rules[] = {
    {"get", NULL, NULL,
     "/livez /readyz /healthz /version /version/ /openapi /openapi/* /api /api/* /apis /apis/*"},
    {0},
};
static const struct boot_rule basic_user_rules[] = {
    {"create", "authorization.k8s.io", "selfsubjectaccessreviews selfsubjectrulesreviews", NULL},
    {"create", "authentication.k8s.io", "selfsubjectreviews", NULL},
    {0},
};
static const struct boot_rule public_info_rules[] = {
    {"get", NULL, NULL, "/livez /readyz /healthz /version /version/"},
    {0},
};
static const struct boot_rule to_admin_rules[] = {
    {"create", "authorization.k8s.io", "localsubjectaccessreviews", NULL},
    {READ_WRITE, "rbac.authorization.k8s.io", "roles rolebindings", NULL},
    {0},
};
static const struct boot_rule to_edit_rules[] = {
    {READ, "", "pods/attach pods/proxy pods/exec pods/portforward secrets services/proxy", NULL},
    {"impersonate", "", "serviceaccounts", NULL},
    {WRITE, "", "pods pods/attach pods/proxy pods/exec pods/portforward", NULL},
    {"create", "", "pods/eviction", NULL},
    {WRITE, "",
     "replicationcontrollers replicationcontrollers/scale serviceaccounts services "
     "services/proxy persistentvolumeclaims configmaps secrets",
     NULL},
    {"create", "", "serviceaccounts/token", NULL},
    {WRITE, "apps",
     "statefulsets statefulsets/scale daemonsets deployments deployments/scale "
     "deployments/rollback replicasets replicasets/scale",
     NULL},
    {WRITE, "autoscaling", "horizontalpodautoscalers", NULL},
    {WRITE, "batch", "jobs cronjobs", NULL},
    {WRITE, "extensions",
     "daemonsets deployments deployments/scale deployments/rollback ingresses replicasets "
     "replicasets/scale replicationcontrollers/scale networkpolicies",
     NULL},
    {WRITE, "policy", "poddisruptionbudgets", NULL},
    {WRITE, "networking.k8s.io", "networkpolicies ingresses", NULL},
    {0},
};
static const struct boot_rule to_view_rules[] = {
    {READ, "",
     "pods replicationcontrollers replicationcontrollers/scale serviceaccounts services "
     "services/status endpoints persistentvolumeclaims persistentvolumeclaims/status configmaps",
     NULL},
    {READ, "",
     "limitranges resourcequotas bindings events pods/status resourcequotas/status "
     "namespaces/status replicationcontrollers/status pods/log",
     NULL},
    {READ, "", "namespaces", NULL},
    {READ, "discovery.k8s.io", "endpointslices", NULL},
    {READ, "apps",
     "controllerrevisions statefulsets statefulsets/status statefulsets/scale daemonsets "
     "daemonsets/status deployments deployments/status deployments/scale replicasets "
     "replicasets/status replicasets/scale",
     NULL},
    {READ, "autoscaling", "horizontalpodautoscalers horizontalpodautoscalers/status", NULL},
    {READ, "batch", "jobs cronjobs cronjobs/status jobs/status", NULL},
    {READ, "extensions",
     "daemonsets daemonsets/status deployments deployments/scale deployments/status ingresses "
     "ingresses/status replicasets replicasets/scale replicasets/status "
     "replicationcontrollers/scale networkpolicies",
     NULL},
    {READ, "policy", "poddisruptionbudgets poddisruptionbudgets/status", NULL},
    {READ, "networking.k8s.io", "networkpolicies ingresses ingresses/status", NULL},
    {0},
};

static const struct boot_role boot_roles[] = {
    {"cluster-admin", NULL, NULL, cluster_admin_rules},
    {"system:discovery", NULL, NULL, discovery_rules},
    {"system:basic-user", NULL, NULL, basic_user_rules},
    {"system:public-info-viewer", NULL, NULL, public_info_rules},
    {"admin", NULL, AGG "admin", NULL},
    {"edit", AGG "admin", AGG "edit", NULL},
    {"view", AGG "edit", AGG "view", NULL},
    {"system:aggregate-to-admin", AGG "admin", NULL, to_admin_rules},
    {"system:aggregate-to-edit", AGG "edit", NULL, to_edit_rules},
    {"system:aggregate-to-view", AGG "view", NULL, to_view_rules},
};

struct boot_binding {
    const char *name;  /* ClusterRoleBinding */
    const char *role;  /* ClusterRole */
    const char *group; /* subjects: up to two groups */
    const char *group2;
    bool kubeadm; /* made by kubeadm init, not the apiserver: no bootstrap label */
};

/* policy.go ClusterRoleBindings, and kubeadm's binding for admin.conf (the
 * group of kubesim's --token). The order is the authorizer's visiting
 * order (stored first, before anything a test creates). */
static const struct boot_binding boot_bindings[] = {
    {"cluster-admin", "cluster-admin", "system:masters", NULL, false},
    {"kubeadm:cluster-admins", "cluster-admin", "kubeadm:cluster-admins", NULL, true},
    {"system:basic-user", "system:basic-user", "system:authenticated", NULL, false},
    {"system:discovery", "system:discovery", "system:authenticated", NULL, false},
    {"system:public-info-viewer", "system:public-info-viewer", "system:authenticated",
     "system:unauthenticated", false},
};

/* A space-separated list (of at most 32 words) as a sorted JSON array. */
static json_t *word_list(const char *s)
{
    char *copy = ks_strdup(s), *save = NULL;
    const char *w[32];
    size_t n = 0;
    for (char *p = strtok_r(copy, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        if (n == sizeof(w) / sizeof(w[0]))
            abort(); /* a table above grew past it */
        w[n++] = p;
    }
    qsort(w, n, sizeof(w[0]), ks_cmp_cstr);
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_string(w[i]));
    free(copy);
    if (!a)
        abort();
    return a;
}

static json_t *boot_meta(const char *name, bool bootstrap, const char *label)
{
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    json_t *md = json_pack("{s:s,s:s,s:s}", "name", name, "uid", uid, "creationTimestamp", now);
    if (!md)
        abort();
    if (bootstrap) {
        json_object_set_new(md, "labels",
                            json_pack("{s:s}", "kubernetes.io/bootstrapping", "rbac-defaults"));
        json_object_set_new(
            md, "annotations",
            json_pack("{s:s}", "rbac.authorization.kubernetes.io/autoupdate", "true"));
        if (label)
            json_object_set_new(json_object_get(md, "labels"), label, json_string("true"));
    }
    return md;
}

void ks_authz_bootstrap(struct ks_server *ks)
{
    const struct ks_res *roles = ks_res_find(ks, "rbac.authorization.k8s.io", "clusterroles");
    const struct ks_res *bindings =
        ks_res_find(ks, "rbac.authorization.k8s.io", "clusterrolebindings");
    if (!roles || !bindings)
        abort();
    for (size_t i = 0; i < sizeof(boot_roles) / sizeof(boot_roles[0]); i++) {
        const struct boot_role *br = &boot_roles[i];
        json_t *obj = json_pack("{s:s,s:s,s:o}", "kind", "ClusterRole", "apiVersion",
                                "rbac.authorization.k8s.io/v1", "metadata",
                                boot_meta(br->name, true, br->label));
        json_t *rules = json_array();
        for (const struct boot_rule *r = br->rules; r && r->verbs; r++) {
            json_t *rule = json_pack("{s:o}", "verbs", word_list(r->verbs));
            if (r->groups)
                json_object_set_new(rule, "apiGroups",
                                    *r->groups ? word_list(r->groups) : json_pack("[s]", ""));
            if (r->resources)
                json_object_set_new(rule, "resources", word_list(r->resources));
            if (r->urls)
                json_object_set_new(rule, "nonResourceURLs", word_list(r->urls));
            json_array_append_new(rules, rule);
        }
        json_object_set_new(obj, "rules", rules);
        if (br->aggregate)
            json_object_set_new(obj, "aggregationRule",
                                json_pack("{s:[{s:{s:s}}]}", "clusterRoleSelectors", "matchLabels",
                                          br->aggregate, "true"));
        ks_typed_order(obj);
        ks_store_put(ks, roles, br->name, obj);
    }
    for (size_t i = 0; i < sizeof(boot_bindings) / sizeof(boot_bindings[0]); i++) {
        const struct boot_binding *bb = &boot_bindings[i];
        json_t *subjects = json_pack("[{s:s,s:s,s:s}]", "kind", "Group", "apiGroup",
                                     "rbac.authorization.k8s.io", "name", bb->group);
        if (bb->group2)
            json_array_append_new(subjects,
                                  json_pack("{s:s,s:s,s:s}", "kind", "Group", "apiGroup",
                                            "rbac.authorization.k8s.io", "name", bb->group2));
        json_t *obj = json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:s},s:o}", "kind", "ClusterRoleBinding",
                                "apiVersion", "rbac.authorization.k8s.io/v1", "metadata",
                                boot_meta(bb->name, !bb->kubeadm, NULL), "roleRef", "apiGroup",
                                "rbac.authorization.k8s.io", "kind", "ClusterRole", "name",
                                bb->role, "subjects", subjects);
        ks_typed_order(obj);
        ks_store_put(ks, bindings, bb->name, obj);
    }
    /* what the aggregation controller does first, before anything is served */
    for (int pass = 0; pass < 8 && ks->roles_dirty; pass++) {
        ks->roles_dirty = false;
        ks_authz_aggregate(ks);
    }
}

/* ---- the ClusterRole aggregation controller ------------------------------------------------ */

/* metav1.LabelSelectorAsSelector(sel).Matches(labels); {} matches everything. */
static bool label_selector_matches(const json_t *sel, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v)
    {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e)
    {
        const char *key = json_string_value(json_object_get(e, "key"));
        const char *op = json_string_value(json_object_get(e, "operator"));
        if (!key || !op)
            return false;
        const char *have = json_string_value(json_object_get(labels, key));
        bool in = false;
        size_t j;
        json_t *x;
        json_array_foreach(json_object_get(e, "values"), j, x)
        {
            if (have && json_is_string(x) && strcmp(have, json_string_value(x)) == 0)
                in = true;
        }
        bool ok = strcmp(op, "In") == 0             ? in
                  : strcmp(op, "NotIn") == 0        ? !in
                  : strcmp(op, "Exists") == 0       ? have != NULL
                  : strcmp(op, "DoesNotExist") == 0 ? have == NULL
                                                    : false;
        if (!ok)
            return false;
    }
    return true;
}

static bool rule_listed(const json_t *rules, const json_t *rule)
{
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (json_equal(r, rule))
            return true;
    }
    return false;
}

/*
 * pkg/controller/clusterroleaggregation: every ClusterRole with an
 * aggregationRule gets, selector by selector, the rules of the other
 * ClusterRoles its selector matches (by name, each rule once), written only
 * when they differ. A write marks the roles dirty again, so chains (view
 * into edit into admin) settle over a few passes.
 */
void ks_authz_aggregate(struct ks_server *ks)
{
    const struct ks_res *def = ks_res_find(ks, "rbac.authorization.k8s.io", "clusterroles");
    json_t *map = ks_store_map(ks, "clusterroles.rbac.authorization.k8s.io");
    size_t n = json_object_size(map), k = 0;
    if (!def || n == 0)
        return;
    char **names = calloc(n, sizeof(*names));
    if (!names)
        abort();
    const char *key;
    json_t *role;
    json_object_foreach(map, key, role)
    {
        names[k++] = ks_strdup(key);
    }
    qsort(names, k, sizeof(*names), ks_cmp_cstr);
    for (size_t i = 0; i < k; i++) {
        const json_t *cur = json_object_get(map, names[i]);
        const json_t *agg = json_object_get(cur, "aggregationRule");
        if (!json_is_object(agg))
            continue;
        json_t *rules = json_array();
        size_t s;
        json_t *sel;
        json_array_foreach(json_object_get(agg, "clusterRoleSelectors"), s, sel)
        {
            for (size_t j = 0; j < k; j++) {
                const json_t *other = json_object_get(map, names[j]);
                if (j == i || !other ||
                    !label_selector_matches(
                        sel, json_object_get(json_object_get(other, "metadata"), "labels")))
                    continue;
                size_t r;
                json_t *rule;
                json_array_foreach(json_object_get(other, "rules"), r, rule)
                {
                    /* a copy: a stored object shares nothing with another */
                    if (!rule_listed(rules, rule))
                        json_array_append_new(rules, json_deep_copy(rule));
                }
            }
        }
        const json_t *have = json_object_get(cur, "rules");
        if (json_equal(rules, have) ||
            (json_array_size(rules) == 0 && json_array_size(have) == 0)) {
            json_decref(rules);
            continue;
        }
        json_t *next = json_deep_copy(cur);
        json_object_set_new(next, "rules", rules);
        ks_typed_order(next);
        ks_store_put(ks, def, names[i], next);
    }
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(names);
}

/* ---- rule matching ---------------------------------------------------------------------- */

static bool list_has(const json_t *list, const char *s, bool star)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        const char *x = json_string_value(v);
        if (x && (strcmp(x, s) == 0 || (star && strcmp(x, "*") == 0)))
            return true;
    }
    return false;
}

static bool resource_matches(const json_t *rule, const struct ks_authz_attrs *a)
{
    char *combined = a->sub && *a->sub ? ks_printf("%s/%s", a->resource, a->sub)
                                       : ks_strdup(a->resource ? a->resource : "");
    bool ok = false;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(rule, "resources"), i, v)
    {
        const char *x = json_string_value(v);
        if (!x)
            continue;
        if (strcmp(x, "*") == 0 || strcmp(x, combined) == 0) {
            ok = true;
            break;
        }
        if (a->sub && *a->sub && strncmp(x, "*/", 2) == 0 && strcmp(x + 2, a->sub) == 0) {
            ok = true;
            break;
        }
    }
    free(combined);
    return ok;
}

static bool url_matches(const json_t *rule, const char *path)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(rule, "nonResourceURLs"), i, v)
    {
        const char *x = json_string_value(v);
        if (!x)
            continue;
        size_t n = strlen(x);
        if (strcmp(x, "*") == 0 || strcmp(x, path) == 0)
            return true;
        if (n && x[n - 1] == '*') {
            while (n && x[n - 1] == '*')
                n--;
            if (strncmp(path, x, n) == 0)
                return true;
        }
    }
    return false;
}

bool ks_rule_allows(const json_t *rule, const struct ks_authz_attrs *a)
{
    if (!list_has(json_object_get(rule, "verbs"), a->verb, true))
        return false;
    if (!a->resource_request)
        return url_matches(rule, a->path ? a->path : "");
    const json_t *names = json_object_get(rule, "resourceNames");
    return list_has(json_object_get(rule, "apiGroups"), a->group ? a->group : "", true) &&
           resource_matches(rule, a) &&
           (json_array_size(names) == 0 || list_has(names, a->name ? a->name : "", false));
}

/* ---- subjects --------------------------------------------------------------------------- */

static bool user_in_group(const struct ks_user *u, const char *g)
{
    for (size_t i = 0; i < u->ngroups; i++)
        if (strcmp(u->groups[i], g) == 0)
            return true;
    return false;
}

/* rule.go appliesToUser; ns is the binding's namespace ("" for a cluster binding). */
static bool applies_to(const struct ks_user *u, const json_t *subject, const char *ns)
{
    const char *kind = json_string_value(json_object_get(subject, "kind"));
    const char *name = json_string_value(json_object_get(subject, "name"));
    if (!kind || !name)
        return false;
    if (strcmp(kind, "User") == 0)
        return strcmp(u->name, name) == 0;
    if (strcmp(kind, "Group") == 0)
        return user_in_group(u, name);
    if (strcmp(kind, "ServiceAccount") == 0) {
        const char *sns = json_string_value(json_object_get(subject, "namespace"));
        if (!sns || !*sns)
            sns = ns;
        if (!*sns)
            return false;
        char *want = ks_printf("system:serviceaccount:%s:%s", sns, name);
        bool ok = strcmp(u->name, want) == 0;
        free(want);
        return ok;
    }
    return false;
}

/* rule.go describeSubject */
static char *describe_subject(const json_t *subject, const char *ns)
{
    const char *kind = json_string_value(json_object_get(subject, "kind"));
    const char *name = json_string_value(json_object_get(subject, "name"));
    if (kind && strcmp(kind, "ServiceAccount") == 0) {
        const char *sns = json_string_value(json_object_get(subject, "namespace"));
        return ks_printf("%s \"%s/%s\"", kind, name, sns && *sns ? sns : ns);
    }
    return ks_printf("%s \"%s\"", kind ? kind : "", name ? name : "");
}

/* ---- the walk over every rule that applies to a user --------------------------------------- */

/* Called for each rule (source: "ClusterRoleBinding "b" of ClusterRole "r"
 * to Group "g""), or with rule NULL and the error of a binding whose role
 * cannot be had; returns false to stop. */
typedef bool (*rule_visitor)(void *ud, const char *source, const json_t *rule, const char *err);

/* The rules of a binding's role (*ret_rules, NULL when it has none).
 * false: no such role. */
static bool role_rules(struct ks_server *ks, const char *kind, const char *ns, const char *name,
                       const json_t **ret_rules)
{
    char key[512];
    const json_t *role = NULL;
    *ret_rules = NULL;
    if (strcmp(kind, "ClusterRole") == 0) {
        ks_obj_key(key, sizeof(key), NULL, name);
        role = ks_store_get(ks, "clusterroles.rbac.authorization.k8s.io", key);
    } else if (strcmp(kind, "Role") == 0 && ns && *ns) {
        ks_obj_key(key, sizeof(key), ns, name);
        role = ks_store_get(ks, "roles.rbac.authorization.k8s.io", key);
    }
    if (role)
        *ret_rules = json_object_get(role, "rules");
    return role != NULL;
}

static bool visit_rules(const json_t *rules, const char *source, rule_visitor fn, void *ud)
{
    size_t i;
    json_t *rule;
    json_array_foreach(rules, i, rule)
    {
        if (!fn(ud, source, rule, NULL))
            return false;
    }
    return true;
}

/* A stored binding: each subject that applies gives its role's rules. */
static bool visit_binding(struct ks_server *ks, const struct ks_user *u, const json_t *b,
                          bool cluster, rule_visitor fn, void *ud)
{
    const json_t *md = json_object_get(b, "metadata");
    const char *bname = json_string_value(json_object_get(md, "name"));
    const char *bns = cluster ? "" : json_string_value(json_object_get(md, "namespace"));
    const json_t *ref = json_object_get(b, "roleRef");
    const char *rkind = json_string_value(json_object_get(ref, "kind"));
    const char *rname = json_string_value(json_object_get(ref, "name"));
    if (!bname || !bns || !rkind || !rname || (cluster && strcmp(rkind, "ClusterRole") != 0))
        return true;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(b, "subjects"), i, s)
    {
        if (!applies_to(u, s, bns))
            continue;
        const json_t *rules;
        if (!role_rules(ks, rkind, bns, rname, &rules)) {
            /* GetRoleReferenceRules' error: the lister's NotFound */
            bool known = strcmp(rkind, "ClusterRole") == 0 || strcmp(rkind, "Role") == 0;
            char *err = known
                            ? ks_printf("%s.rbac.authorization.k8s.io \"%s\" not found",
                                        strcmp(rkind, "Role") == 0 ? "role" : "clusterrole", rname)
                            : ks_printf("unsupported role reference kind: \"%s\"", rkind);
            bool go = fn(ud, NULL, NULL, err);
            free(err);
            return go;
        }
        char *subj = describe_subject(s, bns);
        char *source = cluster ? ks_printf("ClusterRoleBinding \"%s\" of %s \"%s\" to %s", bname,
                                           rkind, rname, subj)
                               : ks_printf("RoleBinding \"%s/%s\" of %s \"%s\" to %s", bname, bns,
                                           rkind, rname, subj);
        bool go = visit_rules(rules, source, fn, ud);
        free(source);
        free(subj);
        return go; /* the first subject that applies is enough */
    }
    return true;
}

/* VisitRulesFor: the cluster bindings, then the
 * namespace's RoleBindings when ns is not "". Lock held. */
static void visit_rules_for(struct ks_server *ks, const struct ks_user *u, const char *ns,
                            rule_visitor fn, void *ud)
{
    if (ks->always_allow) {
        /* the AlwaysAllow authorizer's RulesFor */
        json_t *all = json_pack("[{s:[s],s:[s],s:[s]},{s:[s],s:[s]}]", "verbs", "*", "apiGroups",
                                "*", "resources", "*", "verbs", "*", "nonResourceURLs", "*");
        visit_rules(all, "AlwaysAllow", fn, ud);
        json_decref(all);
        return;
    }
    bool go = true;
    const char *k;
    json_t *b;
    if (go) {
        json_object_foreach(ks_store_map(ks, "clusterrolebindings.rbac.authorization.k8s.io"), k, b)
        {
            if (!(go = visit_binding(ks, u, b, true, fn, ud)))
                break;
        }
    }
    if (go && ns && *ns) {
        size_t nl = strlen(ns);
        json_object_foreach(ks_store_map(ks, "rolebindings.rbac.authorization.k8s.io"), k, b)
        {
            if (strncmp(k, ns, nl) != 0 || k[nl] != '/')
                continue;
            if (!visit_binding(ks, u, b, false, fn, ud))
                break;
        }
    }
}

/* ---- the authorizer ------------------------------------------------------------------------ */

/* utilerrors.NewAggregate(errs).Error(): one error as it is, more in
 * brackets. NULL when there are none. */
static char *aggregate(const json_t *errs)
{
    size_t n = json_array_size(errs);
    if (n == 0)
        return NULL;
    if (n == 1)
        return ks_strdup(json_string_value(json_array_get(errs, 0)));
    return ks_join(errs, "[", ", ", "]");
}

struct decide {
    const struct ks_authz_attrs *a;
    bool allowed;
    char *reason;
    json_t *errors; /* strings */
};

static bool decide_visit(void *ud, const char *source, const json_t *rule, const char *err)
{
    struct decide *d = ud;
    if (!rule) {
        json_array_append_new(d->errors, json_string(err));
        return true;
    }
    if (!ks_rule_allows(rule, d->a))
        return true;
    d->allowed = true;
    d->reason = ks_printf("RBAC: allowed by %s", source);
    return false;
}

bool ks_authorize(struct ks_server *ks, const struct ks_user *u, const struct ks_authz_attrs *a,
                  char **ret_reason)
{
    if (ks->always_allow) {
        if (ret_reason)
            *ret_reason = NULL;
        return true;
    }
    struct decide d = {.a = a, .errors = json_array()};
    visit_rules_for(ks, u, a->resource_request ? a->ns : NULL, decide_visit, &d);
    if (!d.allowed) {
        /* no opinion; the reason lists what could not be evaluated */
        char *agg = aggregate(d.errors);
        if (agg)
            d.reason = ks_printf("RBAC: %s", agg);
        free(agg);
    }
    json_decref(d.errors);
    if (ret_reason)
        *ret_reason = d.reason;
    else
        free(d.reason);
    return d.allowed;
}

/* responsewriters.ForbiddenStatusError: 403 with apierrors.NewForbidden's
 * message and details. */
void ks_reply_forbidden(struct ks_reply *r, const struct ks_user *u, const struct ks_authz_attrs *a,
                        const char *reason)
{
    char *what;
    if (!a->resource_request) {
        what = ks_printf("User \"%s\" cannot %s path \"%s\"", u->name, a->verb, a->path);
    } else {
        char *res =
            a->sub && *a->sub ? ks_printf("%s/%s", a->resource, a->sub) : ks_strdup(a->resource);
        what = a->ns && *a->ns
                   ? ks_printf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" in the "
                               "namespace \"%s\"",
                               u->name, a->verb, res, a->group, a->ns)
                   : ks_printf("User \"%s\" cannot %s resource \"%s\" in API group \"%s\" at the "
                               "cluster scope",
                               u->name, a->verb, res, a->group);
        free(res);
    }
    char *err = reason && *reason ? ks_printf("%s: %s", what, reason) : ks_strdup(what);
    const char *resource = a->resource_request ? a->resource : "";
    const char *group = a->resource_request ? a->group : "";
    const char *name = a->resource_request && a->name ? a->name : "";
    char *qr = *group ? ks_printf("%s.%s", resource, group) : ks_strdup(resource);
    char *msg = !*qr     ? ks_printf("forbidden: %s", err)
                : !*name ? ks_printf("%s is forbidden: %s", qr, err)
                         : ks_printf("%s \"%s\" is forbidden: %s", qr, name, err);
    json_t *details = json_object();
    if (*name)
        json_object_set_new(details, "name", json_string(name));
    if (*group)
        json_object_set_new(details, "group", json_string(group));
    if (*resource)
        json_object_set_new(details, "kind", json_string(resource));
    ks_reply_status(r, 403, "Forbidden", msg, details);
    free(msg);
    free(qr);
    free(err);
    free(what);
}

/* ---- escalation (pkg/registry/rbac/.../policybased/storage.go) ------------------------------ */

/* A JSON string's value, "" for anything else. */
static const char *sv(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* Go's %q of a string list, ["a" "b"], appended to *out (malloc'd). */
static void append_quoted_list(char **out, const json_t *list)
{
    char *l = ks_go_join(list, "[", " ", "]");
    char *n = ks_printf("%s%s", *out, l);
    free(*out);
    free(l);
    *out = n;
}

/* rbacv1helpers PolicyRule.CompactString: {APIGroups:[..], Resources:[..],
 * NonResourceURLs:[..], ResourceNames:[..], Verbs:[..]}, the empty ones left out. */
static char *compact_string(const json_t *rule)
{
    static const char *const fields[][2] = {{"apiGroups", "APIGroups"},
                                            {"resources", "Resources"},
                                            {"nonResourceURLs", "NonResourceURLs"},
                                            {"resourceNames", "ResourceNames"},
                                            {"verbs", "Verbs"}};
    char *out = ks_strdup("{");
    bool first = true;
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        const json_t *l = json_object_get(rule, fields[f][0]);
        if (json_array_size(l) == 0)
            continue;
        char *next = ks_printf("%s%s%s:", out, first ? "" : ", ", fields[f][1]);
        free(out);
        out = next;
        append_quoted_list(&out, l);
        first = false;
    }
    char *next = ks_printf("%s}", out);
    free(out);
    return next;
}

static bool has_all(const json_t *set, const json_t *want)
{
    size_t i;
    json_t *v;
    json_array_foreach(want, i, v)
    {
        if (!list_has(set, sv(v), false))
            return false;
    }
    return true;
}

/* policy_comparator.go resourceCoversAll: "*", each listed, or "*\/sub"
 * for a subresource. */
static bool resources_cover(const json_t *set, const json_t *want)
{
    if (list_has(set, "*", false))
        return true;
    size_t i;
    json_t *v;
    json_array_foreach(want, i, v)
    {
        const char *x = sv(v);
        if (list_has(set, x, false))
            continue;
        const char *slash = strchr(x, '/');
        if (!slash)
            return false;
        char *star = ks_printf("*%s", slash);
        bool ok = list_has(set, star, false);
        free(star);
        if (!ok)
            return false;
    }
    return true;
}

/* policy_comparator.go nonResourceURLCovers, for every URL of want. */
static bool urls_cover(const json_t *set, const json_t *want)
{
    size_t i, j;
    json_t *v, *o;
    json_array_foreach(want, i, v)
    {
        const char *x = sv(v);
        bool covered = false;
        json_array_foreach(set, j, o)
        {
            const char *p = sv(o);
            size_t n = strlen(p);
            if (strcmp(p, x) == 0) {
                covered = true;
                break;
            }
            if (n && p[n - 1] == '*') {
                while (n && p[n - 1] == '*')
                    n--;
                if (strncmp(x, p, n) == 0) {
                    covered = true;
                    break;
                }
            }
        }
        if (!covered)
            return false;
    }
    return true;
}

/* policy_comparator.go ruleCovers: owner (any rule) covers sub (one verb,
 * one group and resource or one URL, at most one name). */
static bool rule_covers(const json_t *owner, const json_t *sub)
{
    const json_t *onames = json_object_get(owner, "resourceNames");
    const json_t *snames = json_object_get(sub, "resourceNames");
    return (list_has(json_object_get(owner, "verbs"), "*", false) ||
            has_all(json_object_get(owner, "verbs"), json_object_get(sub, "verbs"))) &&
           (list_has(json_object_get(owner, "apiGroups"), "*", false) ||
            has_all(json_object_get(owner, "apiGroups"), json_object_get(sub, "apiGroups"))) &&
           resources_cover(json_object_get(owner, "resources"),
                           json_object_get(sub, "resources")) &&
           urls_cover(json_object_get(owner, "nonResourceURLs"),
                      json_object_get(sub, "nonResourceURLs")) &&
           (json_array_size(onames) == 0 ||
            (json_array_size(snames) > 0 && has_all(onames, snames)));
}

/* policy_comparator.go breakdownRule: one rule per group, resource, verb
 * (and name), then per URL and verb. Appended to out. */
static void breakdown(const json_t *rule, json_t *out)
{
    const json_t *groups = json_object_get(rule, "apiGroups");
    const json_t *resources = json_object_get(rule, "resources");
    const json_t *verbs = json_object_get(rule, "verbs");
    const json_t *names = json_object_get(rule, "resourceNames");
    size_t i, j, k, m;
    json_t *g, *res, *verb, *name, *url;
    json_array_foreach(groups, i, g)
    {
        json_array_foreach(resources, j, res)
        {
            json_array_foreach(verbs, k, verb)
            {
                if (json_array_size(names) == 0) {
                    json_array_append_new(out, json_pack("{s:[O],s:[O],s:[O]}", "apiGroups", g,
                                                         "resources", res, "verbs", verb));
                    continue;
                }
                json_array_foreach(names, m, name)
                {
                    json_array_append_new(out, json_pack("{s:[O],s:[O],s:[O],s:[O]}", "apiGroups",
                                                         g, "resources", res, "resourceNames", name,
                                                         "verbs", verb));
                }
            }
        }
    }
    json_array_foreach(json_object_get(rule, "nonResourceURLs"), j, url)
    {
        json_array_foreach(verbs, k, verb)
        {
            json_array_append_new(
                out, json_pack("{s:[O],s:[O]}", "nonResourceURLs", url, "verbs", verb));
        }
    }
}

static bool collect_owner(void *ud, const char *source, const json_t *rule, const char *err)
{
    (void)source;
    json_t **c = ud; /* [rules, errors] */
    if (rule)
        json_array_append_new(c[0], json_deep_copy(rule));
    else
        json_array_append_new(c[1], json_string(err));
    return true;
}

/* validation/rule.go ConfirmNoEscalation: NULL when u's rules in ns cover
 * rules, else the error's text (malloc'd), the missing rules compacted
 * (policy_compact.go CompactRules) and listed sorted, one per line. Lock held. */
static char *no_escalation(struct ks_server *ks, const struct ks_user *u, const char *ns,
                           const json_t *rules)
{
    json_t *c[2] = {json_array(), json_array()};
    visit_rules_for(ks, u, ns, collect_owner, c);
    json_t *subs = json_array();
    size_t i, j;
    json_t *rule, *sub, *owner;
    json_array_foreach(rules, i, rule) breakdown(rule, subs);
    /* the uncovered, simple ones (one group, one resource, at most one
     * name) merged by group, resource and name */
    json_t *missing = json_array();
    json_t *simple = json_object();
    json_array_foreach(subs, i, sub)
    {
        bool covered = false;
        json_array_foreach(c[0], j, owner)
        {
            if ((covered = rule_covers(owner, sub)))
                break;
        }
        if (covered)
            continue;
        if (json_object_get(sub, "nonResourceURLs")) {
            json_array_append(missing, sub);
            continue;
        }
        const json_t *names = json_object_get(sub, "resourceNames");
        char *key =
            ks_printf("%s\n%s\n%d\n%s", sv(json_array_get(json_object_get(sub, "apiGroups"), 0)),
                      sv(json_array_get(json_object_get(sub, "resources"), 0)), names != NULL,
                      sv(json_array_get(names, 0)));
        json_t *have = json_object_get(simple, key);
        if (have)
            json_array_extend(json_object_get(have, "verbs"), json_object_get(sub, "verbs"));
        else /* a copy: its verbs grow, sub stays as broken down */
            json_object_set_new(simple, key, json_deep_copy(sub));
        free(key);
    }
    const char *k;
    json_t *v;
    json_object_foreach(simple, k, v) json_array_append(missing, v);
    char *msg = NULL;
    if (json_array_size(missing) > 0) {
        size_t n = json_array_size(missing), nd = 0;
        char **desc = calloc(n, sizeof(*desc));
        json_array_foreach(missing, i, rule)
        {
            char *d = compact_string(rule);
            bool dup = false;
            for (size_t x = 0; x < nd && !dup; x++)
                dup = strcmp(desc[x], d) == 0;
            if (dup)
                free(d);
            else
                desc[nd++] = d;
        }
        qsort(desc, nd, sizeof(*desc), ks_cmp_cstr);
        json_t *groups = json_array();
        for (size_t g = 0; g < u->ngroups; g++)
            json_array_append_new(groups, json_string(u->groups[g]));
        char *gl = ks_strdup("");
        append_quoted_list(&gl, groups);
        json_decref(groups);
        char *uq = ks_go_quote(u->name);
        msg = ks_printf("user %s (groups=%s) is attempting to grant RBAC permissions not "
                        "currently held:",
                        uq, gl);
        for (size_t x = 0; x < nd; x++) {
            char *next = ks_printf("%s\n%s", msg, desc[x]);
            free(msg);
            msg = next;
            free(desc[x]);
        }
        free(desc);
        free(gl);
        free(uq);
        char *errs = aggregate(c[1]);
        if (errs) {
            char *next = ks_printf("%s; resolution errors: %s", msg, errs);
            free(msg);
            msg = next;
        }
        free(errs);
    }
    json_decref(simple);
    json_decref(missing);
    json_decref(subs);
    json_decref(c[0]);
    json_decref(c[1]);
    return msg;
}

/* rbac.IsOnlyMutatingGCFields: the update changes nothing but
 * metadata.ownerReferences and metadata.finalizers (what the apiserver
 * maintains itself left out of the comparison). */
static bool only_gc_fields(const json_t *obj, const json_t *old)
{
    json_t *a = json_deep_copy(obj), *b = json_deep_copy(old);
    static const char *const drop[] = {"ownerReferences", "finalizers", "managedFields",
                                       "resourceVersion", "generation", NULL};
    for (const char *const *f = drop; *f; f++) {
        json_object_del(json_object_get(a, "metadata"), *f);
        json_object_del(json_object_get(b, "metadata"), *f);
    }
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return same;
}

static bool has_aggregation_rule(const json_t *role)
{
    return json_array_size(json_object_get(json_object_get(role, "aggregationRule"),
                                           "clusterRoleSelectors")) > 0;
}

int ks_authz_escalation_check(struct ks_api_req *q, const struct ks_res *def, const json_t *obj,
                              const json_t *old, const char *name, struct ks_reply *r)
{
    static const char *const group = "rbac.authorization.k8s.io";
    if (strcmp(def->group, group) != 0)
        return 0;
    bool role = strcmp(def->plural, "roles") == 0 || strcmp(def->plural, "clusterroles") == 0;
    bool binding =
        strcmp(def->plural, "rolebindings") == 0 || strcmp(def->plural, "clusterrolebindings") == 0;
    const struct ks_user *u = q->user;
    /* EscalationAllowed: system:masters; AlwaysAllow authorizes escalate and bind */
    if ((!role && !binding) || !u || user_in_group(u, "system:masters"))
        return 0;
    if (old && only_gc_fields(obj, old))
        return 0;
    const char *ns = def->namespaced && q->ns ? q->ns : "";
    struct ks_server *ks = q->ks;
    char *err = NULL;
    int rc = 0;
    pthread_mutex_lock(&ks->lock);
    if (role) {
        /* RoleEscalationAuthorized: escalate on the request's own resource */
        struct ks_authz_attrs a = {.verb = "escalate",
                                   .resource_request = true,
                                   .group = group,
                                   .resource = def->plural,
                                   .ns = ns,
                                   .name = q->name};
        if (!ks_authorize(ks, u, &a, NULL)) {
            err = no_escalation(ks, u, ns, json_object_get(obj, "rules"));
            if (!err && (has_aggregation_rule(obj) || (old && has_aggregation_rule(old)))) {
                /* the aggregation rule can gather anything: * on *.* */
                json_t *full =
                    json_pack("[{s:[s],s:[s],s:[s]},{s:[s],s:[s]}]", "verbs", "*", "apiGroups", "*",
                              "resources", "*", "verbs", "*", "nonResourceURLs", "*");
                char *e = no_escalation(ks, u, "", full);
                json_decref(full);
                if (e)
                    err = ks_strdup("must have cluster-admin privileges to use the "
                                    "aggregationRule");
                free(e);
            }
        }
    } else {
        const json_t *ref = json_object_get(obj, "roleRef");
        const char *kind = sv(json_object_get(ref, "kind"));
        const char *rname = sv(json_object_get(ref, "name"));
        bool cluster_ref = strcmp(kind, "ClusterRole") == 0;
        /* BindingAuthorized: bind on the role, in the binding's namespace */
        struct ks_authz_attrs a = {.verb = "bind",
                                   .resource_request = true,
                                   .group = sv(json_object_get(ref, "apiGroup")),
                                   .resource = cluster_ref ? "clusterroles" : "roles",
                                   .ns = ns,
                                   .name = rname};
        bool known = cluster_ref || strcmp(kind, "Role") == 0;
        if (!known || !ks_authorize(ks, u, &a, NULL)) {
            const json_t *rules = NULL;
            if (!role_rules(ks, kind, ns, rname, &rules)) {
                /* GetRoleReferenceRules' error, as it is */
                pthread_mutex_unlock(&ks->lock);
                if (known) {
                    char *msg = ks_printf("%s.%s \"%s\" not found", a.resource, group, rname);
                    ks_reply_status(r, 404, "NotFound", msg,
                                    json_pack("{s:s,s:s,s:s}", "name", rname, "group", group,
                                              "kind", a.resource));
                    free(msg);
                } else {
                    char *msg = ks_printf("unsupported role reference kind: \"%s\"", kind);
                    ks_reply_status(r, 500, "InternalError", msg, json_object());
                    free(msg);
                }
                return -EPERM;
            }
            err = no_escalation(ks, u, ns, rules);
        }
    }
    pthread_mutex_unlock(&ks->lock);
    if (err) {
        char *msg = ks_printf("%s.%s \"%s\" is forbidden: %s", def->plural, group, name, err);
        ks_reply_status(
            r, 403, "Forbidden", msg,
            json_pack("{s:s,s:s,s:s}", "name", name, "group", group, "kind", def->plural));
        free(msg);
        rc = -EPERM;
    }
    free(err);
    return rc;
}

/* ---- impersonation (apiserver endpoints/filters/impersonation.go) ---------------------------- */

/* serviceaccount.SplitUsername: "system:serviceaccount:NS:NAME". */
static bool split_sa(const char *user, char **ret_ns, char **ret_name)
{
    static const char prefix[] = "system:serviceaccount:";
    if (strncmp(user, prefix, sizeof(prefix) - 1) != 0)
        return false;
    const char *rest = user + sizeof(prefix) - 1;
    const char *colon = strchr(rest, ':');
    if (!colon || strchr(colon + 1, ':'))
        return false;
    char *ns = strndup(rest, (size_t)(colon - rest));
    if (!ns)
        abort();
    if (!ks_is_dns_label(ns, false) || !ks_is_dns_subdomain(colon + 1)) {
        free(ns);
        return false;
    }
    *ret_ns = ns;
    *ret_name = ks_strdup(colon + 1);
    return true;
}

struct imp_headers {
    const char *user, *uid; /* Header.Get: the first of each */
    json_t *groups;         /* every Impersonate-Group value */
    json_t *extras;         /* [key, value] of every Impersonate-Extra-* value */
};

/* url.PathUnescape, or the key as it came when it is not well escaped
 * (unescapeExtraKey). malloc'd */
static char *unescape_extra_key(const char *k)
{
    size_t n = strlen(k), o = 0;
    char *out = malloc(n + 1);
    if (!out)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (k[i] != '%') {
            out[o++] = k[i];
            continue;
        }
        if (i + 2 >= n || !isxdigit((unsigned char)k[i + 1]) ||
            !isxdigit((unsigned char)k[i + 2])) {
            free(out);
            return ks_strdup(k);
        }
        char hex[3] = {k[i + 1], k[i + 2], '\0'};
        out[o++] = (char)strtol(hex, NULL, 16);
        i += 2;
    }
    out[o] = '\0';
    return out;
}

static enum MHD_Result imp_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    (void)kind;
    struct imp_headers *h = cls;
    static const char extra[] = "Impersonate-Extra-";
    if (strcasecmp(key, "Impersonate-User") == 0 && !h->user) {
        h->user = value;
    } else if (strcasecmp(key, "Impersonate-Uid") == 0 && !h->uid) {
        h->uid = value;
    } else if (strcasecmp(key, "Impersonate-Group") == 0) {
        json_array_append_new(h->groups, json_string(value));
    } else if (strncasecmp(key, extra, sizeof(extra) - 1) == 0) {
        char *lower = ks_strdup(key + sizeof(extra) - 1);
        for (char *p = lower; *p; p++)
            *p = (char)tolower((unsigned char)*p);
        char *k = unescape_extra_key(lower);
        json_array_append_new(h->extras, json_pack("[s,s]", k, value));
        free(k);
        free(lower);
    }
    return MHD_YES;
}

/* Go's %v of the []v1.ObjectReference of buildImpersonationRequests
 * (a struct's fields space-separated: Kind Namespace Name UID APIVersion
 * ResourceVersion FieldPath). malloc'd */
static char *imp_requests_string(const struct imp_headers *h)
{
    char *out = ks_strdup("[");
    size_t i;
    json_t *v;
    json_array_foreach(h->groups, i, v)
    {
        char *n = ks_printf("%s%s{Group  %s     }", out, i ? " " : "", json_string_value(v));
        free(out);
        out = n;
    }
    bool any = json_array_size(h->groups) > 0;
    json_array_foreach(h->extras, i, v)
    {
        char *n = ks_printf("%s%s{UserExtra  %s  authentication.k8s.io/v1  %s}", out,
                            any ? " " : "", json_string_value(json_array_get(v, 1)),
                            json_string_value(json_array_get(v, 0)));
        free(out);
        out = n;
        any = true;
    }
    if (h->uid) {
        char *n =
            ks_printf("%s%s{UID  %s  authentication.k8s.io/v1  }", out, any ? " " : "", h->uid);
        free(out);
        out = n;
    }
    char *n = ks_printf("%s]", out);
    free(out);
    return n;
}

/* responsewriters' sanitizer: &, < and > as HTML entities. malloc'd */
static char *html_sanitize(const char *s)
{
    char *out = ks_strdup("");
    for (const char *p = s; *p; p++) {
        const char *rep = *p == '&' ? "&amp;" : *p == '<' ? "&lt;" : *p == '>' ? "&gt;" : NULL;
        char *n = rep ? ks_printf("%s%s", out, rep) : ks_printf("%s%c", out, *p);
        free(out);
        out = n;
    }
    return out;
}

int ks_impersonate(struct ks_server *ks, struct MHD_Connection *conn, const struct ks_user *who,
                   const char *uri, struct ks_user **ret_user, struct ks_reply *r)
{
    *ret_user = NULL;
    struct imp_headers h = {.groups = json_array(), .extras = json_array()};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, imp_header, &h);
    if (h.user && !*h.user)
        h.user = NULL; /* Header.Get of an empty value: not impersonating a user */
    if (h.uid && !*h.uid)
        h.uid = NULL;
    int rc = 0;
    if (!h.user && !json_array_size(h.groups) && !h.uid && !json_array_size(h.extras))
        goto done;
    if (!h.user) {
        /* buildImpersonationRequests' error, as responsewriters.InternalError
         * writes it (http.Error: text/plain and a newline) */
        char *reqs = imp_requests_string(&h);
        char *raw = ks_printf("Internal Server Error: \"%s\": requested %s without impersonating "
                              "a user",
                              uri, reqs);
        char *msg = html_sanitize(raw);
        free(r->body);
        r->body = ks_printf("%s\n", msg);
        r->len = strlen(r->body);
        r->code = 500;
        r->content_type = "text/plain; charset=utf-8";
        free(msg);
        free(raw);
        free(reqs);
        rc = -EPERM;
        goto done;
    }
    struct ks_user *nu = calloc(1, sizeof(*nu));
    if (!nu)
        abort();
    nu->name = ks_strdup(h.user);
    nu->uid = ks_strdup(h.uid ? h.uid : "");
    char *sa_ns = NULL, *sa_name = NULL;
    bool sa = split_sa(h.user, &sa_ns, &sa_name);
    size_t ngroups = json_array_size(h.groups), nextras = json_array_size(h.extras);
    pthread_mutex_lock(&ks->lock);
    /* each thing impersonated, authorized in turn, in buildImpersonationRequests'
     * order: the user, the groups, the extras, the uid */
    for (size_t i = 0; rc == 0 && i < 2 + ngroups + nextras; i++) {
        struct ks_authz_attrs a = {.verb = "impersonate", .resource_request = true, .group = ""};
        if (i == 0) {
            a.resource = sa ? "serviceaccounts" : "users";
            a.ns = sa ? sa_ns : NULL;
            a.name = sa ? sa_name : h.user;
        } else if (i <= ngroups) {
            const char *g = json_string_value(json_array_get(h.groups, i - 1));
            a.resource = "groups";
            a.name = g;
            ks_user_add_group(nu, g);
        } else if (i <= ngroups + nextras) {
            const json_t *kv = json_array_get(h.extras, i - 1 - ngroups);
            const char *k = json_string_value(json_array_get(kv, 0));
            a.group = "authentication.k8s.io";
            a.resource = "userextras";
            a.sub = k;
            a.name = json_string_value(json_array_get(kv, 1));
            if (!nu->extra)
                nu->extra = json_object();
            json_t *vals = json_object_get(nu->extra, k);
            if (!vals) {
                vals = json_array();
                json_object_set_new(nu->extra, k, vals);
            }
            json_array_append(vals, json_array_get(kv, 1));
        } else {
            if (!h.uid)
                continue;
            a.group = "authentication.k8s.io";
            a.resource = "uids";
            a.name = h.uid;
        }
        char *reason = NULL;
        if (!ks_authorize(ks, who, &a, &reason)) {
            ks_reply_forbidden(r, who, &a, reason);
            rc = -EACCES;
        }
        free(reason);
    }
    pthread_mutex_unlock(&ks->lock);
    if (rc == 0 && sa && ngroups == 0) {
        ks_user_add_group(nu, "system:serviceaccounts");
        char *g = ks_printf("system:serviceaccounts:%s", sa_ns);
        ks_user_add_group(nu, g);
        free(g);
    }
    free(sa_ns);
    free(sa_name);
    if (rc != 0) {
        ks_user_free(nu);
        free(nu);
        goto done;
    }
    bool anonymous = strcmp(nu->name, "system:anonymous") == 0;
    if (!user_in_group(nu, "system:unauthenticated") &&
        (anonymous || !user_in_group(nu, "system:authenticated")))
        ks_user_add_group(nu, anonymous ? "system:unauthenticated" : "system:authenticated");
    *ret_user = nu;
done:
    json_decref(h.groups);
    json_decref(h.extras);
    return rc;
}

/* ---- the reviews ---------------------------------------------------------------------------- */

/* A review's spec attributes (ResourceAttributes or NonResourceAttributes). */
static void attrs_of(const json_t *spec, struct ks_authz_attrs *a)
{
    const json_t *ra = json_object_get(spec, "resourceAttributes");
    const json_t *na = json_object_get(spec, "nonResourceAttributes");
    memset(a, 0, sizeof(*a));
    if (json_is_object(ra)) {
        a->resource_request = true;
        a->verb = json_string_value(json_object_get(ra, "verb"));
        a->group = json_string_value(json_object_get(ra, "group"));
        a->resource = json_string_value(json_object_get(ra, "resource"));
        a->sub = json_string_value(json_object_get(ra, "subresource"));
        a->ns = json_string_value(json_object_get(ra, "namespace"));
        a->name = json_string_value(json_object_get(ra, "name"));
    } else {
        a->verb = json_string_value(json_object_get(na, "verb"));
        a->path = json_string_value(json_object_get(na, "path"));
    }
    if (!a->verb)
        a->verb = "";
    if (!a->group)
        a->group = "";
    if (!a->resource)
        a->resource = "";
    if (!a->path)
        a->path = "";
}

static json_t *cause(const char *field, const char *type, const char *msg)
{
    return json_pack("{s:s,s:s,s:s}", "reason", type, "message", msg, "field", field);
}

/* authorization/validation ValidateSubjectAccessReviewSpec: exactly one of
 * resourceAttributes and nonResourceAttributes. Appends to causes. */
static void check_attrs(const json_t *spec, json_t *causes)
{
    const json_t *ra = json_object_get(spec, "resourceAttributes");
    const json_t *na = json_object_get(spec, "nonResourceAttributes");
    if (json_is_object(ra) && json_is_object(na)) {
        char *v = ks_dump(na, false, NULL);
        char *m = ks_printf("Invalid value: %s: cannot be specified in combination with "
                            "resourceAttributes",
                            v ? v : "null");
        json_array_append_new(causes, cause("spec.nonResourceAttributes", "FieldValueInvalid", m));
        free(m);
        free(v);
    } else if (!json_is_object(ra) && !json_is_object(na)) {
        json_array_append_new(causes,
                              cause("spec.resourceAttributes", "FieldValueInvalid",
                                    "Invalid value: \"null\": exactly one of nonResourceAttributes "
                                    "or resourceAttributes must be specified"));
    }
}

/* The answer: the review with its status, metadata as the apiserver
 * returns it for an object that is not stored (creationTimestamp null). */
static void reply_review(struct ks_reply *r, json_t *obj, json_t *status)
{
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(obj, "metadata", md);
    }
    if (!json_object_get(md, "creationTimestamp"))
        json_object_set_new(md, "creationTimestamp", json_null());
    json_object_set_new(obj, "status", status);
    ks_reply_json(r, 201, obj, false);
}

static json_t *access_status(struct ks_server *ks, const struct ks_user *u,
                             const struct ks_authz_attrs *a)
{
    char *reason = NULL;
    pthread_mutex_lock(&ks->lock);
    bool ok = ks_authorize(ks, u, a, &reason);
    pthread_mutex_unlock(&ks->lock);
    json_t *st = json_pack("{s:b}", "allowed", ok);
    if (reason && *reason)
        json_object_set_new(st, "reason", json_string(reason));
    free(reason);
    return st;
}

/* SubjectAccessReview's spec user as a ks_user (borrowed strings copied). */
static struct ks_user *spec_user(const json_t *spec)
{
    struct ks_user *u = calloc(1, sizeof(*u));
    if (!u)
        abort();
    const char *name = json_string_value(json_object_get(spec, "user"));
    const char *uid = json_string_value(json_object_get(spec, "uid"));
    u->name = ks_strdup(name ? name : "");
    u->uid = ks_strdup(uid ? uid : "");
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(spec, "groups"), i, g)
    {
        if (json_is_string(g))
            ks_user_add_group(u, json_string_value(g));
    }
    return u;
}

struct collect {
    json_t *resource_rules, *url_rules, *errors;
};

static bool collect_visit(void *ud, const char *source, const json_t *rule, const char *err)
{
    (void)source;
    struct collect *c = ud;
    if (!rule) {
        json_array_append_new(c->errors, json_string(err));
        return true;
    }
    json_t *verbs = json_object_get(rule, "verbs");
    if (json_array_size(json_object_get(rule, "nonResourceURLs"))) {
        json_array_append_new(
            c->url_rules, json_pack("{s:o,s:O}", "verbs", verbs ? json_incref(verbs) : json_array(),
                                    "nonResourceURLs", json_object_get(rule, "nonResourceURLs")));
        return true;
    }
    json_t *rr = json_pack("{s:o}", "verbs", verbs ? json_incref(verbs) : json_array());
    static const char *const keys[] = {"apiGroups", "resources", "resourceNames"};
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(rule, keys[i]);
        if (json_array_size(v))
            json_object_set(rr, keys[i], v);
    }
    json_array_append_new(c->resource_rules, rr);
    return true;
}

void ks_review_create(struct ks_api_req *q, const struct ks_res *def, json_t *obj,
                      struct ks_reply *r)
{
    struct ks_server *ks = q->ks;
    const char *kind = def->kind;
    json_t *spec = json_object_get(obj, "spec");
    json_t *causes = json_array();
    if (strcmp(kind, "SelfSubjectReview") == 0) {
        json_decref(causes);
        reply_review(r, obj, json_pack("{s:o}", "userInfo", ks_user_info(q->user)));
        return;
    }
    if (strcmp(kind, "TokenReview") == 0) {
        const char *tok = json_string_value(json_object_get(spec, "token"));
        if (!tok || !*tok) {
            /* registry/authentication/tokenreview/storage.go */
            json_decref(causes);
            ks_reply_status(r, 400, "BadRequest",
                            "token is required for TokenReview in authentication", NULL);
            return;
        }
        json_decref(causes);
        char *bearer = ks_printf("Bearer %s", tok);
        const struct ks_user *u = ks_authenticate(ks, bearer);
        free(bearer);
        json_t *st =
            u ? json_pack("{s:b,s:o,s:[s]}", "authenticated", true, "user", ks_user_info(u),
                          "audiences", "https://kubernetes.default.svc.cluster.local")
              : json_pack("{s:{}}", "user");
        reply_review(r, obj, st);
        return;
    }
    if (strcmp(kind, "SelfSubjectRulesReview") == 0) {
        const char *ns = json_string_value(json_object_get(spec, "namespace"));
        if (!ns || !*ns) {
            /* registry/authorization/selfsubjectrulesreview/rest.go */
            json_decref(causes);
            ks_reply_status(r, 400, "BadRequest", "no namespace on request", NULL);
            return;
        }
        json_decref(causes);
        struct collect c = {json_array(), json_array(), json_array()};
        pthread_mutex_lock(&ks->lock);
        visit_rules_for(ks, q->user, ns, collect_visit, &c);
        pthread_mutex_unlock(&ks->lock);
        json_t *st = json_pack("{s:o,s:o,s:b}", "resourceRules", c.resource_rules,
                               "nonResourceRules", c.url_rules, "incomplete", false);
        char *agg = aggregate(c.errors);
        if (agg)
            json_object_set_new(st, "evaluationError", json_string(agg));
        free(agg);
        json_decref(c.errors);
        reply_review(r, obj, st);
        return;
    }
    /* the access reviews */
    bool self = strcmp(kind, "SelfSubjectAccessReview") == 0;
    bool local = strcmp(kind, "LocalSubjectAccessReview") == 0;
    check_attrs(spec, causes);
    if (!self) {
        const char *user = json_string_value(json_object_get(spec, "user"));
        if ((!user || !*user) && json_array_size(json_object_get(spec, "groups")) == 0)
            json_array_append_new(causes,
                                  cause("spec.user", "FieldValueInvalid",
                                        "Invalid value: \"\": at least one of user or group must "
                                        "be specified"));
    }
    const char *mdns =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace"));
    if (local) {
        json_t *ra = json_object_get(spec, "resourceAttributes");
        const char *rns = json_string_value(json_object_get(ra, "namespace"));
        if (json_object_get(spec, "nonResourceAttributes"))
            json_array_append_new(
                causes, cause("spec.nonResourceAttributes", "FieldValueInvalid",
                              "Invalid value: \"null\": disallowed on this kind of request"));
        if (mdns && *mdns && strcmp(mdns, q->ns) != 0) {
            json_decref(causes);
            ks_reply_status(r, 400, "BadRequest",
                            "the namespace of the provided object does not match the namespace "
                            "sent on the request",
                            NULL);
            return;
        }
        if (json_is_object(ra) && (!rns || strcmp(rns, q->ns) != 0)) {
            char *m =
                ks_printf("Invalid value: \"%s\": must match metadata.namespace", rns ? rns : "");
            json_array_append_new(
                causes, cause("spec.resourceAttributes.namespace", "FieldValueInvalid", m));
            free(m);
        }
    }
    if (json_array_size(causes)) {
        ks_reply_invalid_gk(r, def->group, kind, "", causes);
        return;
    }
    json_decref(causes);
    if (local) {
        json_t *md = json_object_get(obj, "metadata");
        if (!json_is_object(md)) {
            md = json_object();
            json_object_set_new(obj, "metadata", md);
        }
        json_object_set_new(md, "namespace", json_string(q->ns));
    }
    struct ks_authz_attrs a;
    attrs_of(spec, &a);
    if (self) {
        reply_review(r, obj, access_status(ks, q->user, &a));
        return;
    }
    struct ks_user *u = spec_user(spec);
    reply_review(r, obj, access_status(ks, u, &a));
    ks_user_free(u);
    free(u);
}

/* ---- every request (the apiserver's WithAuthorization) ------------------------------------ */

static int decide_request(struct ks_server *ks, const struct ks_user *u,
                          const struct ks_authz_attrs *a, struct ks_reply *r)
{
    char *reason = NULL;
    pthread_mutex_lock(&ks->lock);
    bool ok = ks_authorize(ks, u, a, &reason);
    pthread_mutex_unlock(&ks->lock);
    if (!ok)
        ks_reply_forbidden(r, u, a, reason);
    free(reason);
    return ok ? 0 : -EACCES;
}

int ks_authorize_path(struct ks_server *ks, const struct ks_user *u, const char *method,
                      const char *path, struct ks_reply *r)
{
    char verb[16];
    ks_lower_method(method, verb, sizeof(verb));
    struct ks_authz_attrs a = {.verb = verb, .path = path};
    return decide_request(ks, u, &a, r);
}

/* RequiresExactMatch("metadata.name") of a field selector: the value of a
 * term metadata.name=V or metadata.name==V, copied into buf; NULL if none. */
static const char *selector_name(const char *sel, char *buf, size_t size)
{
    static const char key[] = "metadata.name";
    const char *p = sel;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > sizeof(key) - 1 && strncmp(p, key, sizeof(key) - 1) == 0) {
            const char *v = p + sizeof(key) - 1;
            size_t vl = n - (sizeof(key) - 1);
            if (vl >= 2 && v[0] == '=' && v[1] == '=') {
                v += 2;
                vl -= 2;
            } else if (v[0] == '=') {
                v++;
                vl--;
            } else {
                v = NULL;
            }
            if (v && vl < size) {
                memcpy(buf, v, vl);
                buf[vl] = '\0';
                /* path.IsValidPathSegmentName */
                if (strcmp(buf, ".") != 0 && strcmp(buf, "..") != 0 && !strchr(buf, '/') &&
                    !strchr(buf, '%'))
                    return buf;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

int ks_authorize_api(struct ks_api_req *q, struct ks_reply *r)
{
    struct ks_authz_attrs a = {.verb = q->verb,
                               .resource_request = true,
                               .group = q->group ? q->group : "",
                               .resource = q->plural,
                               .sub = q->sub,
                               .ns = q->ns,
                               .name = q->name};
    char name[256];
    if (!q->name && (strcmp(q->verb, "list") == 0 || strcmp(q->verb, "watch") == 0)) {
        const char *fs = ks_query(q, "fieldSelector");
        if (fs)
            a.name = selector_name(fs, name, sizeof(name));
    }
    if (!a.ns && q->name && strcmp(q->plural, "namespaces") == 0 && !*a.group)
        a.ns = q->name;
    return decide_request(q->ks, q->user, &a, r);
}
