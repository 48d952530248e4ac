/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim resource definitions: the built-in types it serves (a static
 * table), the resources a CustomResourceDefinition registers (published
 * when the CRD is created or updated, removed when it is deleted), and the
 * discovery documents built from them (/api, /apis, /apis/G, /api/v1,
 * /apis/G/V, and the aggregated apidiscovery.k8s.io/v2 list).
 */
#include "kubesim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct builtin {
    const char *group, *version, *plural, *singular, *kind, *shorts, *cats;
    bool namespaced, status, scale, generation;
    const char *bookmark;
    unsigned flags; /* B_* */
};

enum {
    B_CREATE_ONLY = 1,    /* a review (authz.c) */
    B_RETURN_DELETED = 2, /* the registry's ReturnDeletedObject */
};

static const struct builtin builtins[] = {
    {"", "v1", "configmaps", "configmap", "ConfigMap", "cm", NULL, true, false, false, false, NULL,
     0},
    /* core/v1 Endpoints: no status, no generation (types.go) */
    {"", "v1", "endpoints", "endpoints", "Endpoints", "ep", NULL, true, false, false, false, NULL,
     0},
    {"", "v1", "events", "event", "Event", "ev", NULL, true, false, false, false,
     "{\"involvedObject\":{},\"source\":{},\"firstTimestamp\":null,\"lastTimestamp\":null,"
     "\"eventTime\":null,\"reportingComponent\":\"\",\"reportingInstance\":\"\"}",
     0},
    {"", "v1", "namespaces", "namespace", "Namespace", "ns", NULL, false, true, false, false,
     "{\"spec\":{},\"status\":{}}", 0},
    /* core/v1 Node: cluster-scoped, status; daemonEndpoints and nodeInfo
     * have no omitempty effect (structs) */
    {"", "v1", "nodes", "node", "Node", "no", NULL, false, true, false, false,
     "{\"spec\":{},\"status\":{\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":0}},"
     "\"nodeInfo\":{\"machineID\":\"\",\"systemUUID\":\"\",\"bootID\":\"\","
     "\"kernelVersion\":\"\",\"osImage\":\"\",\"containerRuntimeVersion\":\"\","
     "\"kubeletVersion\":\"\",\"kubeProxyVersion\":\"\",\"operatingSystem\":\"\","
     "\"architecture\":\"\"}}}",
     0},
    {"", "v1", "pods", "pod", "Pod", "po", "all", true, true, false, false,
     "{\"spec\":{\"containers\":null},\"status\":{}}", B_RETURN_DELETED},
    {"", "v1", "secrets", "secret", "Secret", NULL, NULL, true, false, false, false, NULL, 0},
    {"", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", "sa", NULL, true, false,
     false, false, NULL, B_RETURN_DELETED},
    {"", "v1", "services", "service", "Service", "svc", "all", true, true, false, false,
     "{\"spec\":{},\"status\":{\"loadBalancer\":{}}}", B_RETURN_DELETED},
    {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
     "mutatingwebhookconfiguration", "MutatingWebhookConfiguration", NULL, "api-extensions", false,
     false, false, true, NULL, 0},
    {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
     "validatingwebhookconfiguration", "ValidatingWebhookConfiguration", NULL, "api-extensions",
     false, false, false, true, NULL, 0},
    {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition",
     "CustomResourceDefinition", "crd,crds", "api-extensions", false, true, false, true,
     "{\"spec\":{\"group\":\"\",\"names\":{\"plural\":\"\",\"kind\":\"\"},\"scope\":\"\","
     "\"versions\":null},\"status\":{\"conditions\":null,\"acceptedNames\":{\"plural\":\"\","
     "\"kind\":\"\"},\"storedVersions\":null}}",
     B_RETURN_DELETED},
    {"apps", "v1", "deployments", "deployment", "Deployment", "deploy", "all", true, true, true,
     true,
     "{\"spec\":{\"selector\":null,\"template\":{\"metadata\":{},\"spec\":{\"containers\":null}},"
     "\"strategy\":{}},\"status\":{}}",
     0},
    {"apps", "v1", "replicasets", "replicaset", "ReplicaSet", "rs", "all", true, true, false, true,
     "{\"spec\":{\"selector\":null,\"template\":{\"metadata\":{},\"spec\":{\"containers\":"
     "null}}},\"status\":{\"replicas\":0}}",
     0},
    /* the reviews: POST only (authz.c) */
    {"authentication.k8s.io", "v1", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview",
     NULL, NULL, false, false, false, false, NULL, B_CREATE_ONLY},
    {"authentication.k8s.io", "v1", "tokenreviews", "tokenreview", "TokenReview", NULL, NULL, false,
     false, false, false, NULL, B_CREATE_ONLY},
    {"authorization.k8s.io", "v1", "localsubjectaccessreviews", "localsubjectaccessreview",
     "LocalSubjectAccessReview", NULL, NULL, true, false, false, false, NULL, B_CREATE_ONLY},
    {"authorization.k8s.io", "v1", "selfsubjectaccessreviews", "selfsubjectaccessreview",
     "SelfSubjectAccessReview", NULL, NULL, false, false, false, false, NULL, B_CREATE_ONLY},
    {"authorization.k8s.io", "v1", "selfsubjectrulesreviews", "selfsubjectrulesreview",
     "SelfSubjectRulesReview", NULL, NULL, false, false, false, false, NULL, B_CREATE_ONLY},
    {"authorization.k8s.io", "v1", "subjectaccessreviews", "subjectaccessreview",
     "SubjectAccessReview", NULL, NULL, false, false, false, false, NULL, B_CREATE_ONLY},
    {"coordination.k8s.io", "v1", "leases", "lease", "Lease", NULL, NULL, true, false, false, false,
     "{\"spec\":{}}", 0},
    /* discovery/v1 EndpointSlice: generation kept (registry/discovery/
     * endpointslice/strategy.go); addressType, endpoints and ports are
     * written even when empty (no omitempty in discovery/v1 types.go) */
    {"discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", NULL, NULL, true,
     false, false, true, "{\"addressType\":\"\",\"endpoints\":null,\"ports\":null}", 0},
    {"networking.k8s.io", "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", "netpol", NULL,
     true, false, false, true, "{\"spec\":{\"podSelector\":{}}}", 0},
    {"policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", "pdb",
     NULL, true, true, false, true,
     "{\"spec\":{},\"status\":{\"disruptionsAllowed\":0,"
     "\"currentHealthy\":0,\"desiredHealthy\":0,"
     "\"expectedPods\":0}}",
     0},
    {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding",
     "ClusterRoleBinding", NULL, NULL, false, false, false, false, NULL, 0},
    {"rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", NULL, NULL,
     false, false, false, false, NULL, 0},
    {"rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", NULL, NULL,
     true, false, false, false, NULL, 0},
    {"rbac.authorization.k8s.io", "v1", "roles", "role", "Role", NULL, NULL, true, false, false,
     false, NULL, 0},
};

/* Served only with --feature StorageVersionMigrator (beta and off by default
 * in Kubernetes 1.35): staging/src/k8s.io/api/storagemigration/v1beta1/types.go */
static const struct builtin svm_builtin = {
    "storagemigration.k8s.io",
    "v1beta1",
    "storageversionmigrations",
    "storageversionmigration",
    "StorageVersionMigration",
    NULL,
    NULL,
    false,
    true,
    false,
    true,
    "{\"spec\":{\"resource\":{\"group\":\"\",\"resource\":\"\"}},\"status\":{}}",
    0};

static json_t *split_list(const char *csv)
{
    if (!csv)
        return NULL;
    json_t *a = json_array();
    const char *p = csv;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        json_array_append_new(a, json_stringn(p, n));
        p += n;
        if (*p == ',')
            p++;
    }
    return a;
}

static char *res_key(const char *group, const char *plural)
{
    if (!group || !*group)
        return ks_strdup(plural);
    return ks_printf("%s.%s", plural, group);
}

void ks_res_free(struct ks_res *def)
{
    if (!def)
        return;
    free(def->group);
    free(def->plural);
    free(def->singular);
    free(def->kind);
    free(def->list_kind);
    free(def->key);
    free(def->crd_name);
    json_decref(def->short_names);
    json_decref(def->categories);
    json_decref(def->conversion);
    for (size_t i = 0; i < def->nversions; i++) {
        free(def->versions[i].name);
        free(def->versions[i].deprecation);
        json_decref(def->versions[i].schema);
        json_decref(def->versions[i].columns);
    }
    free(def);
}

static void publish(struct ks_server *ks, struct ks_res *def)
{
    if (ks->ndefs == ks->defs_cap) {
        size_t cap = ks->defs_cap ? ks->defs_cap * 2 : 32;
        struct ks_res **nd = realloc(ks->defs, cap * sizeof(*nd));
        if (!nd)
            abort();
        ks->defs = nd;
        ks->defs_cap = cap;
    }
    ks->defs[ks->ndefs++] = def;
}

static void bury(struct ks_server *ks, struct ks_res *def)
{
    if (ks->ngrave == ks->grave_cap) {
        size_t cap = ks->grave_cap ? ks->grave_cap * 2 : 16;
        struct ks_res **ng = realloc(ks->graveyard, cap * sizeof(*ng));
        if (!ng)
            abort();
        ks->graveyard = ng;
        ks->grave_cap = cap;
    }
    ks->graveyard[ks->ngrave++] = def;
}

static int add_builtin(struct ks_server *ks, const struct builtin *b)
{
    struct ks_res *def = calloc(1, sizeof(*def));
    if (!def)
        return -ENOMEM;
    def->group = ks_strdup(b->group);
    def->plural = ks_strdup(b->plural);
    def->singular = ks_strdup(b->singular);
    def->kind = ks_strdup(b->kind);
    def->list_kind = ks_printf("%sList", b->kind);
    def->key = res_key(b->group, b->plural);
    def->short_names = split_list(b->shorts);
    def->categories = split_list(b->cats);
    def->namespaced = b->namespaced;
    def->typed = true;
    def->generation = b->generation;
    def->versions[0].name = ks_strdup(b->version);
    def->versions[0].served = true;
    def->versions[0].storage = true;
    def->versions[0].status = b->status;
    def->versions[0].scale = b->scale;
    def->nversions = 1;
    def->storage = def->versions[0].name;
    def->bookmark_extra = b->bookmark;
    def->create_only = b->flags & B_CREATE_ONLY;
    def->return_deleted = b->flags & B_RETURN_DELETED;
    publish(ks, def);
    return 0;
}

int ks_resources_init(struct ks_server *ks)
{
    for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
        if (add_builtin(ks, &builtins[i]) != 0)
            return -ENOMEM;
    if (ks->feature_svm && add_builtin(ks, &svm_builtin) != 0)
        return -ENOMEM;
    return 0;
}

const struct ks_res *ks_res_find(struct ks_server *ks, const char *group, const char *plural)
{
    for (size_t i = 0; i < ks->ndefs; i++)
        if (strcmp(ks->defs[i]->group, group) == 0 && strcmp(ks->defs[i]->plural, plural) == 0)
            return ks->defs[i];
    return NULL;
}

const struct ks_res *ks_res_find_kind(struct ks_server *ks, const char *group, const char *kind)
{
    for (size_t i = 0; i < ks->ndefs; i++)
        if (strcmp(ks->defs[i]->group, group) == 0 && strcmp(ks->defs[i]->kind, kind) == 0)
            return ks->defs[i];
    return NULL;
}

const struct ks_version *ks_res_version(const struct ks_res *def, const char *version)
{
    for (size_t i = 0; i < def->nversions; i++)
        if (strcmp(def->versions[i].name, version) == 0)
            return &def->versions[i];
    return NULL;
}

/* Kubernetes version priority: GA > beta > alpha, then higher numbers
 * first; anything else sorts after, alphabetically. Returns <0 when a
 * comes first. */
static int version_cmp(const char *a, const char *b)
{
    long ma = 0, mb = 0, na = 0, nb = 0;
    int ta = -1, tb = -1; /* 2 GA, 1 beta, 0 alpha, -1 other */
    char sa[16] = "", sb[16] = "";
    int ra = sscanf(a, "v%ld%15[a-z]%ld", &ma, sa, &na);
    int rb = sscanf(b, "v%ld%15[a-z]%ld", &mb, sb, &nb);
    if (ra == 1)
        ta = 2;
    else if (ra == 3 && strcmp(sa, "beta") == 0)
        ta = 1;
    else if (ra == 3 && strcmp(sa, "alpha") == 0)
        ta = 0;
    if (rb == 1)
        tb = 2;
    else if (rb == 3 && strcmp(sb, "beta") == 0)
        tb = 1;
    else if (rb == 3 && strcmp(sb, "alpha") == 0)
        tb = 0;
    if (ta != tb)
        return tb - ta;
    if (ta == -1)
        return strcmp(a, b);
    if (ma != mb)
        return ma > mb ? -1 : 1;
    if (na != nb)
        return na > nb ? -1 : 1;
    return 0;
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

int ks_res_register_crd(struct ks_server *ks, const json_t *crd, char **ret_err)
{
    const json_t *spec = json_object_get(crd, "spec");
    const json_t *names = json_object_get(spec, "names");
    const char *name = jstr(json_object_get(crd, "metadata"), "name");
    const char *group = jstr(spec, "group");
    const char *plural = jstr(names, "plural");
    const char *kind = jstr(names, "kind");
    const json_t *versions = json_object_get(spec, "versions");
    size_t i;
    json_t *v;

    /* The apiserver's rules are ks_validate_crd's, checked before: what
     * is left is kubesim's own limit. */
    if (!json_is_array(versions) || json_array_size(versions) == 0 ||
        json_array_size(versions) > KS_MAX_VERSIONS) {
        *ret_err = ks_printf("kubesim serves 1 to %d versions of a resource", KS_MAX_VERSIONS);
        return -EINVAL;
    }

    struct ks_res *def = calloc(1, sizeof(*def));
    if (!def)
        abort();
    def->group = ks_strdup(group);
    def->plural = ks_strdup(plural);
    def->singular = ks_strdup(*jstr(names, "singular") ? jstr(names, "singular") : plural);
    def->kind = ks_strdup(kind);
    def->list_kind =
        *jstr(names, "listKind") ? ks_strdup(jstr(names, "listKind")) : ks_printf("%sList", kind);
    def->key = res_key(group, plural);
    def->crd_name = ks_strdup(name);
    def->short_names = json_incref(json_object_get(names, "shortNames"));
    def->categories = json_incref(json_object_get(names, "categories"));
    def->namespaced = strcmp(jstr(spec, "scope"), "Cluster") != 0;
    def->crd = true;
    def->generation = true;
    const json_t *conv = json_object_get(spec, "conversion");
    if (strcmp(jstr(conv, "strategy"), "Webhook") == 0)
        def->conversion = json_deep_copy(conv);
    /* Versions in priority order, as discovery lists them. */
    json_array_foreach(versions, i, v)
    {
        struct ks_version *kv = &def->versions[def->nversions++];
        kv->name = ks_strdup(jstr(v, "name"));
        kv->served = json_is_true(json_object_get(v, "served"));
        kv->storage = json_is_true(json_object_get(v, "storage"));
        const json_t *sub = json_object_get(v, "subresources");
        kv->status = json_object_get(sub, "status") != NULL;
        kv->scale = json_object_get(sub, "scale") != NULL;
        kv->schema =
            json_deep_copy(json_object_get(json_object_get(v, "schema"), "openAPIV3Schema"));
        if (json_is_array(json_object_get(v, "additionalPrinterColumns")))
            kv->columns = json_deep_copy(json_object_get(v, "additionalPrinterColumns"));
        if (json_is_true(json_object_get(v, "deprecated")))
            kv->deprecation = *jstr(v, "deprecationWarning")
                                  ? ks_strdup(jstr(v, "deprecationWarning"))
                                  : ks_printf("%s/%s %s is deprecated", group, kv->name, kind);
    }
    for (size_t a = 1; a < def->nversions; a++)
        for (size_t b = a;
             b > 0 && version_cmp(def->versions[b - 1].name, def->versions[b].name) > 0; b--) {
            struct ks_version tmp = def->versions[b - 1];
            def->versions[b - 1] = def->versions[b];
            def->versions[b] = tmp;
        }
    for (size_t a = 0; a < def->nversions; a++)
        if (def->versions[a].storage)
            def->storage = def->versions[a].name;

    /* Replace the previous definition of this CRD (or of the same resource). */
    for (size_t d = 0; d < ks->ndefs; d++) {
        struct ks_res *cur = ks->defs[d];
        if (strcmp(cur->key, def->key) == 0 ||
            (cur->crd_name && strcmp(cur->crd_name, name) == 0)) {
            ks->defs[d] = def;
            bury(ks, cur);
            return 0;
        }
    }
    publish(ks, def);
    ks_store_map(ks, def->key);
    return 0;
}

void ks_res_unregister_crd(struct ks_server *ks, const char *crd_name)
{
    for (size_t d = 0; d < ks->ndefs; d++) {
        struct ks_res *cur = ks->defs[d];
        if (cur->crd_name && strcmp(cur->crd_name, crd_name) == 0) {
            memmove(&ks->defs[d], &ks->defs[d + 1], (ks->ndefs - d - 1) * sizeof(ks->defs[0]));
            ks->ndefs--;
            json_object_del(ks->objects, cur->key);
            bury(ks, cur);
            return;
        }
    }
}

/* ---- discovery ------------------------------------------------------------ */

static json_t *verbs(const struct ks_res *def)
{
    if (def->create_only)
        return json_pack("[s]", "create");
    if (strcmp(def->key, "namespaces") == 0)
        return json_pack("[s,s,s,s,s,s,s]", "create", "delete", "get", "list", "patch", "update",
                         "watch");
    return json_pack("[s,s,s,s,s,s,s,s]", "create", "delete", "deletecollection", "get", "list",
                     "patch", "update", "watch");
}

json_t *ks_discovery_api(struct ks_server *ks)
{
    const char *host = strstr(ks->url, "://");
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_string("APIVersions"));
    json_object_set_new(doc, "versions", json_pack("[s]", "v1"));
    json_object_set_new(doc, "serverAddressByClientCIDRs",
                        json_pack("[{s:s,s:s}]", "clientCIDR", "0.0.0.0/0", "serverAddress",
                                  host ? host + 3 : ks->url));
    return doc;
}

/* Versions served by group, in priority order (first = preferred). */
static json_t *group_versions(struct ks_server *ks, const char *group)
{
    json_t *vs = json_array();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *def = ks->defs[d];
        if (strcmp(def->group, group) != 0)
            continue;
        for (size_t i = 0; i < def->nversions; i++) {
            if (!def->versions[i].served)
                continue;
            bool have = false;
            size_t j;
            json_t *x;
            json_array_foreach(vs, j, x)
            {
                if (strcmp(json_string_value(x), def->versions[i].name) == 0)
                    have = true;
            }
            if (!have)
                json_array_append_new(vs, json_string(def->versions[i].name));
        }
    }
    /* insertion sort by priority */
    for (size_t a = 1; a < json_array_size(vs); a++)
        for (size_t b = a; b > 0 && version_cmp(json_string_value(json_array_get(vs, b - 1)),
                                                json_string_value(json_array_get(vs, b))) > 0;
             b--) {
            json_t *x = json_incref(json_array_get(vs, b - 1));
            json_array_set(vs, b - 1, json_array_get(vs, b));
            json_array_set_new(vs, b, x);
        }
    return vs;
}

static json_t *group_doc(struct ks_server *ks, const char *group, bool with_kind)
{
    json_t *vs = group_versions(ks, group);
    if (json_array_size(vs) == 0) {
        json_decref(vs);
        return NULL;
    }
    json_t *g = json_object();
    if (with_kind) {
        json_object_set_new(g, "kind", json_string("APIGroup"));
        json_object_set_new(g, "apiVersion", json_string("v1"));
    }
    json_object_set_new(g, "name", json_string(group));
    json_t *list = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(vs, i, v)
    {
        char *gv = ks_printf("%s/%s", group, json_string_value(v));
        json_array_append_new(
            list, json_pack("{s:s,s:s}", "groupVersion", gv, "version", json_string_value(v)));
        free(gv);
    }
    json_object_set_new(g, "versions", list);
    json_object_set(g, "preferredVersion", json_array_get(list, 0));
    json_decref(vs);
    return g;
}

json_t *ks_discovery_apis(struct ks_server *ks)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_string("APIGroupList"));
    json_object_set_new(doc, "apiVersion", json_string("v1"));
    json_t *groups = json_array();
    json_t *seen = json_object();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const char *group = ks->defs[d]->group;
        if (!*group || json_object_get(seen, group))
            continue;
        json_object_set_new(seen, group, json_true());
        json_t *g = group_doc(ks, group, false);
        if (g)
            json_array_append_new(groups, g);
    }
    json_decref(seen);
    json_object_set_new(doc, "groups", groups);
    return doc;
}

json_t *ks_discovery_group(struct ks_server *ks, const char *group)
{
    return group_doc(ks, group, true);
}

static json_t *resource_entry(const struct ks_res *def, const char *name, bool sub,
                              const char *kind, const char *sgroup, const char *sversion,
                              json_t *vb)
{
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(name));
    json_object_set_new(e, "singularName", json_string(sub ? "" : def->singular));
    json_object_set_new(e, "namespaced", json_boolean(def->namespaced));
    if (sgroup) {
        json_object_set_new(e, "group", json_string(sgroup));
        json_object_set_new(e, "version", json_string(sversion));
    }
    json_object_set_new(e, "kind", json_string(kind));
    json_object_set_new(e, "verbs", vb);
    if (!sub && def->short_names && json_array_size(def->short_names))
        json_object_set(e, "shortNames", def->short_names);
    if (!sub && def->categories && json_array_size(def->categories))
        json_object_set(e, "categories", def->categories);
    return e;
}

json_t *ks_discovery_resources(struct ks_server *ks, const char *group, const char *version)
{
    json_t *list = json_array();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *def = ks->defs[d];
        if (strcmp(def->group, group) != 0)
            continue;
        const struct ks_version *v = ks_res_version(def, version);
        if (!v || !v->served)
            continue;
        json_array_append_new(
            list, resource_entry(def, def->plural, false, def->kind, NULL, NULL, verbs(def)));
        char *n;
        if (v->scale) {
            n = ks_printf("%s/scale", def->plural);
            json_array_append_new(list,
                                  resource_entry(def, n, true, "Scale", "autoscaling", "v1",
                                                 json_pack("[s,s,s]", "get", "patch", "update")));
            free(n);
        }
        if (v->status) {
            n = ks_printf("%s/status", def->plural);
            json_array_append_new(list,
                                  resource_entry(def, n, true, def->kind, NULL, NULL,
                                                 json_pack("[s,s,s]", "get", "patch", "update")));
            free(n);
        }
    }
    if (json_array_size(list) == 0) {
        json_decref(list);
        return NULL;
    }
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_string("APIResourceList"));
    if (*group)
        json_object_set_new(doc, "apiVersion", json_string("v1"));
    char *gv = ks_api_version(group, version);
    json_object_set_new(doc, "groupVersion", json_string(gv));
    free(gv);
    json_object_set_new(doc, "resources", list);
    return doc;
}

static json_t *aggregated_resource(const struct ks_res *def, const struct ks_version *v)
{
    json_t *r = json_object();
    json_object_set_new(r, "resource", json_string(def->plural));
    json_object_set_new(r, "responseKind",
                        json_pack("{s:s,s:s,s:s}", "group", "", "version", "", "kind", def->kind));
    json_object_set_new(r, "scope", json_string(def->namespaced ? "Namespaced" : "Cluster"));
    json_object_set_new(r, "singularResource", json_string(def->singular));
    json_object_set_new(r, "verbs", verbs(def));
    if (def->short_names && json_array_size(def->short_names))
        json_object_set(r, "shortNames", def->short_names);
    if (def->categories && json_array_size(def->categories))
        json_object_set(r, "categories", def->categories);
    json_t *subs = json_array();
    if (v->scale)
        json_array_append_new(subs,
                              json_pack("{s:s,s:{s:s,s:s,s:s},s:[s,s,s]}", "subresource", "scale",
                                        "responseKind", "group", "autoscaling", "version", "v1",
                                        "kind", "Scale", "verbs", "get", "patch", "update"));
    if (v->status)
        json_array_append_new(subs,
                              json_pack("{s:s,s:{s:s,s:s,s:s},s:[s,s,s]}", "subresource", "status",
                                        "responseKind", "group", "", "version", "", "kind",
                                        def->kind, "verbs", "get", "patch", "update"));
    if (json_array_size(subs))
        json_object_set_new(r, "subresources", subs);
    else
        json_decref(subs);
    return r;
}

json_t *ks_discovery_aggregated(struct ks_server *ks, bool core)
{
    json_t *items = json_array();
    json_t *seen = json_object();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const char *group = ks->defs[d]->group;
        if ((*group == '\0') != core || json_object_get(seen, group))
            continue;
        json_object_set_new(seen, group, json_true());
        json_t *vs = group_versions(ks, group);
        json_t *versions = json_array();
        size_t i;
        json_t *vn;
        json_array_foreach(vs, i, vn)
        {
            json_t *resources = json_array();
            for (size_t e = 0; e < ks->ndefs; e++) {
                const struct ks_res *def = ks->defs[e];
                if (strcmp(def->group, group) != 0)
                    continue;
                const struct ks_version *v = ks_res_version(def, json_string_value(vn));
                if (v && v->served)
                    json_array_append_new(resources, aggregated_resource(def, v));
            }
            json_array_append_new(versions,
                                  json_pack("{s:s,s:o,s:s}", "version", json_string_value(vn),
                                            "resources", resources, "freshness", "Current"));
        }
        json_decref(vs);
        json_t *item = json_object();
        json_object_set_new(item, "metadata", json_pack("{s:s}", "name", group));
        json_object_set_new(item, "versions", versions);
        json_array_append_new(items, item);
    }
    json_decref(seen);
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_string("APIGroupDiscoveryList"));
    json_object_set_new(doc, "apiVersion", json_string("apidiscovery.k8s.io/v2"));
    json_object_set_new(doc, "metadata", json_object());
    json_object_set_new(doc, "items", items);
    return doc;
}

/* ---- typed key order ------------------------------------------------------ */

void ks_reorder(json_t *obj, const char *const *first, const char *const *last)
{
    json_t *copy = json_object();
    for (const char *const *k = first; k && *k; k++) {
        json_t *v = json_object_get(obj, *k);
        if (v)
            json_object_set(copy, *k, v);
    }
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        bool is_last = false;
        for (const char *const *k = last; k && *k; k++)
            if (strcmp(*k, key) == 0)
                is_last = true;
        if (!json_object_get(copy, key) && !is_last)
            json_object_set(copy, key, v);
    }
    for (const char *const *k = last; k && *k; k++) {
        json_t *lv = json_object_get(obj, *k);
        if (lv)
            json_object_set(copy, *k, lv);
    }
    json_object_clear(obj);
    json_object_update(obj, copy);
    json_decref(copy);
}

void ks_typed_order(json_t *obj)
{
    static const char *const top[] = {"kind", "apiVersion", "metadata", "spec", NULL};
    static const char *const tail[] = {"status", NULL};
    static const char *const meta[] = {"name",
                                       "generateName",
                                       "namespace",
                                       "selfLink",
                                       "uid",
                                       "resourceVersion",
                                       "generation",
                                       "creationTimestamp",
                                       "deletionTimestamp",
                                       "deletionGracePeriodSeconds",
                                       "labels",
                                       "annotations",
                                       "ownerReferences",
                                       "finalizers",
                                       "managedFields",
                                       NULL};
    ks_reorder(obj, top, tail);
    json_t *md = json_object_get(obj, "metadata");
    if (json_is_object(md))
        ks_reorder(md, meta, NULL);
}

/* ---- OpenAPI v3 (just enough for kubectl) ---------------------------------- */

json_t *ks_openapi_root(struct ks_server *ks)
{
    json_t *paths = json_object();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *def = ks->defs[d];
        for (size_t i = 0; i < def->nversions; i++) {
            if (!def->versions[i].served)
                continue;
            char *p = def->group[0] ? ks_printf("apis/%s/%s", def->group, def->versions[i].name)
                                    : ks_printf("api/%s", def->versions[i].name);
            char *url = ks_printf("/openapi/v3/%s?hash=%016llx", p, (unsigned long long)ks->rv);
            json_object_set_new(paths, p, json_pack("{s:s}", "serverRelativeURL", url));
            free(url);
            free(p);
        }
    }
    return json_pack("{s:o}", "paths", paths);
}

/* The API conventions document the descriptions point to. */
#define CONVENTIONS                                                                                \
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"
/* TypeMeta's two fields, as the apiserver's documents describe them. */
#define TYPEMETA_APIVERSION                                                                        \
    "APIVersion defines the versioned schema of this representation of an object. Servers "        \
    "should convert recognized schemas to the latest internal value, and may reject "              \
    "unrecognized values. More info: " CONVENTIONS "#resources"
#define TYPEMETA_KIND                                                                              \
    "Kind is a string value representing the REST resource this object represents. Servers may "   \
    "infer this from the endpoint the client submits requests to. Cannot be updated. In "          \
    "CamelCase. More info: " CONVENTIONS "#types-kinds"
#define V3_META "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1."

/* The definition name the apiserver gives a CRD kind: kube-openapi's
 * ToRESTFriendlyName of "GROUP/VERSION.KIND", the group's labels reversed
 * ("mygroup.example.com", "v2", "MyResource" ->
 * "com.example.mygroup.v2.MyResource"). @return new */
static char *crd_definition_name(const char *group, const char *version, const char *kind)
{
    char *rev = ks_printf("%s", "");
    const char *end = group + strlen(group);
    while (end > group) {
        const char *dot = end;
        while (dot > group && dot[-1] != '.')
            dot--;
        char *next = ks_printf("%s%s%.*s", rev, rev[0] ? "." : "", (int)(end - dot), dot);
        free(rev);
        rev = next;
        end = dot > group ? dot - 1 : group;
    }
    char *name = ks_printf("%s.%s.%s", rev, version, kind);
    free(rev);
    return name;
}

/*
 * A CRD version's kind and list kind, as the apiextensions-apiserver
 * publishes them in OpenAPI v3 (apiextensions-apiserver
 * pkg/controller/openapi/builder: buildKubeNative, buildListSchema): the
 * version's openAPIV3Schema with metadata a reference to ObjectMeta,
 * apiVersion and kind TypeMeta's, and x-kubernetes-group-version-kind; a
 * version without a schema is {"type": "object"}. kubectl explain looks a
 * kind up by that extension.
 */
static void crd_schemas(json_t *schemas, const struct ks_res *def, const struct ks_version *v)
{
    json_t *s = v->schema ? json_deep_copy(v->schema) : json_pack("{s:s}", "type", "object");
    if (v->schema) {
        json_t *props = json_object_get(s, "properties");
        if (!json_is_object(props)) {
            props = json_object();
            json_object_set_new(s, "properties", props);
        }
        json_object_set_new(
            props, "apiVersion",
            json_pack("{s:s,s:s}", "description", TYPEMETA_APIVERSION, "type", "string"));
        json_object_set_new(props, "kind",
                            json_pack("{s:s,s:s}", "description", TYPEMETA_KIND, "type", "string"));
        json_object_set_new(
            props, "metadata",
            json_pack("{s:[{s:s}],s:s}", "allOf", "$ref", V3_META "ObjectMeta", "description",
                      "Standard object's metadata. More info: " CONVENTIONS "#metadata"));
    }
    json_object_set_new(
        s, "x-kubernetes-group-version-kind",
        json_pack("[{s:s,s:s,s:s}]", "group", def->group, "kind", def->kind, "version", v->name));
    char *name = crd_definition_name(def->group, v->name, def->kind);
    char *ref = ks_printf("#/components/schemas/%s", name);
    char *list_desc = ks_printf("%s is a list of %s", def->list_kind, def->kind);
    char *items_desc = ks_printf("List of %s. More info: " CONVENTIONS, def->plural);
    json_t *list = json_pack(
        "{s:s,s:[s],s:s,s:{s:{s:s,s:s},s:{s:s,s:s},s:{s:s,s:s,s:{s:s}},s:{s:[{s:s}],s:s}},"
        "s:[{s:s,s:s,s:s}]}",
        "description", list_desc, "required", "items", "type", "object", "properties", "apiVersion",
        "description", TYPEMETA_APIVERSION, "type", "string", "kind", "description", TYPEMETA_KIND,
        "type", "string", "items", "description", items_desc, "type", "array", "items", "$ref", ref,
        "metadata", "allOf", "$ref", V3_META "ListMeta", "description",
        "Standard list metadata. More info: " CONVENTIONS "#types-kinds",
        "x-kubernetes-group-version-kind", "group", def->group, "kind", def->list_kind, "version",
        v->name);
    char *list_name = crd_definition_name(def->group, v->name, def->list_kind);
    json_object_set_new(schemas, name, s);
    json_object_set_new(schemas, list_name, list);
    free(list_name);
    free(items_desc);
    free(list_desc);
    free(ref);
    free(name);
}

/*
 * A spec3 document with one PATCH operation per resource that lists the
 * fieldValidation query parameter: kubectl checks this to decide that the
 * server validates (it then sends fieldValidation=Strict and skips its own
 * schema validation), the built-in kinds' schemas and those of the
 * group-version's CRD kinds (kubectl explain).
 */
json_t *ks_openapi_gv(struct ks_server *ks, const char *group, const char *version)
{
    json_t *paths = json_object();
    /* The schemas of the built-in kinds (kschema.c): every document
     * carries all of them, so that references resolve in any of them. */
    json_t *schemas = ks_kschema_openapi(true);
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *def = ks->defs[d];
        const struct ks_version *v = ks_res_version(def, version);
        if (strcmp(def->group, group) != 0 || !v || !v->served)
            continue;
        if (def->crd)
            crd_schemas(schemas, def, v);
        char *base = def->group[0] ? ks_printf("/apis/%s/%s", def->group, version)
                                   : ks_printf("/api/%s", version);
        if (def->create_only) {
            char *p = def->namespaced ? ks_printf("%s/namespaces/{namespace}/%s", base, def->plural)
                                      : ks_printf("%s/%s", base, def->plural);
            json_object_set_new(paths, p,
                                json_pack("{s:{s:{s:s,s:s,s:s},s:{s:{s:s}}}}", "post",
                                          "x-kubernetes-group-version-kind", "group", def->group,
                                          "version", version, "kind", def->kind, "responses", "201",
                                          "description", "Created"));
            free(p);
            free(base);
            continue;
        }
        char *p = def->namespaced
                      ? ks_printf("%s/namespaces/{namespace}/%s/{name}", base, def->plural)
                      : ks_printf("%s/%s/{name}", base, def->plural);
        json_t *op = json_pack(
            "{s:{s:s,s:s,s:s},s:[{s:s,s:s,s:{s:s,s:b}},{s:s,s:s,s:{s:s,s:b}},"
            "{s:s,s:s,s:{s:s,s:b}}],s:{s:{s:s}}}",
            "x-kubernetes-group-version-kind", "group", def->group, "version", version, "kind",
            def->kind, "parameters", "name", "dryRun", "in", "query", "schema", "type", "string",
            "uniqueItems", 1, "name", "fieldManager", "in", "query", "schema", "type", "string",
            "uniqueItems", 1, "name", "fieldValidation", "in", "query", "schema", "type", "string",
            "uniqueItems", 1, "responses", "200", "description", "OK");
        json_object_set_new(paths, p, json_pack("{s:o}", "patch", op));
        free(p);
        free(base);
    }
    if (json_object_size(paths) == 0) {
        json_decref(paths);
        json_decref(schemas);
        return NULL;
    }
    return json_pack("{s:s,s:{s:s,s:s},s:o,s:{s:o}}", "openapi", "3.0.0", "info", "title",
                     "Kubernetes", "version", "v1.32.3", "paths", paths, "components", "schemas",
                     schemas);
}

/* Swagger 2.0 with the same definitions (/openapi/v2, JSON only). */
json_t *ks_openapi_v2(struct ks_server *ks)
{
    (void)ks;
    return json_pack("{s:s,s:{s:s,s:s},s:{},s:o}", "swagger", "2.0", "info", "title", "Kubernetes",
                     "version", "v1.32.3", "paths", "definitions", ks_kschema_openapi(false));
}

const struct ks_res *ks_res_by_key(struct ks_server *ks, const char *key)
{
    for (size_t i = 0; i < ks->ndefs; i++)
        if (strcmp(ks->defs[i]->key, key) == 0)
            return ks->defs[i];
    return NULL;
}
