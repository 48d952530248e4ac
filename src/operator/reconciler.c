/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure MyResource reconciler: desired children, owned-field
 * comparison into merge patches, and the status with its conditions. See
 * kop/reconciler.h for which fields kop owns and why lists are compared on
 * their owned subset.
 */
#include "kop/reconciler.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kop/clock.h"
#include "kop/json.h"

/* ---- desired objects ------------------------------------------------------- */

static json_t *labels(const char *instance, bool managed_by)
{
    json_t *l = json_object();
    if (!l)
        return NULL;
    int r =
        json_object_set_new(l, KOP_RECONCILER_LABEL_NAME, json_string(KOP_RECONCILER_NAME_VALUE));
    r |= json_object_set_new(l, KOP_RECONCILER_LABEL_INSTANCE, json_string(instance));
    if (managed_by)
        r |= json_object_set_new(l, KOP_RECONCILER_LABEL_MANAGED_BY,
                                 json_string(KOP_RECONCILER_MANAGED_BY_VALUE));
    if (r) {
        json_decref(l);
        return NULL;
    }
    return l;
}

static json_t *metadata(const struct kop_reconciler_owner *o)
{
    return json_pack("{s:s, s:s, s:o, s:[{s:s, s:s, s:s, s:s, s:b, s:b}]}", "name", o->name,
                     "namespace", o->namespace, "labels", labels(o->name, true), "ownerReferences",
                     "apiVersion", KOP_MYRESOURCE_V1, "kind", KOP_MYRESOURCE_KIND, "name", o->name,
                     "uid", o->uid ? o->uid : "", "controller", 1, "blockOwnerDeletion", 1);
}

static const char *proto(const struct kop_myresource_port *p)
{
    return p->protocol ? p->protocol : KOP_MYRESOURCE_DEFAULT_PROTOCOL;
}

json_t *kop_reconciler_desired_deployment(const struct kop_reconciler_owner *owner,
                                          const struct kop_myresource_spec *spec)
{
    char image[1024];
    size_t n = kop_myresource_spec_image(spec, image, sizeof(image));
    if (n >= sizeof(image))
        return NULL; /* longer than any valid reference */
    json_t *ports = json_array();
    if (!ports)
        return NULL;
    for (size_t i = 0; i < spec->n_ports; i++) {
        const struct kop_myresource_port *p = &spec->ports[i];
        if (json_array_append_new(ports,
                                  json_pack("{s:i, s:s, s:s}", "containerPort", p->port, "name",
                                            p->name ? p->name : "", "protocol", proto(p)))) {
            json_decref(ports);
            return NULL;
        }
    }
    return json_pack("{s:s, s:s, s:o, s:{s:i, s:{s:o}, s:{s:{s:o}, s:{s:[{s:s, s:s, s:o}]}}}}",
                     "apiVersion", "apps/v1", "kind", "Deployment", "metadata", metadata(owner),
                     "spec", "replicas", spec->replicas, "selector", "matchLabels",
                     labels(owner->name, false), "template", "metadata", "labels",
                     labels(owner->name, true), "spec", "containers", "name",
                     KOP_RECONCILER_CONTAINER_NAME, "image", image, "ports", ports);
}

json_t *kop_reconciler_desired_service(const struct kop_reconciler_owner *owner,
                                       const struct kop_myresource_spec *spec)
{
    json_t *ports = json_array();
    if (!ports)
        return NULL;
    for (size_t i = 0; i < spec->n_ports; i++) {
        const struct kop_myresource_port *p = &spec->ports[i];
        const char *name = p->name ? p->name : "";
        if (json_array_append_new(ports,
                                  json_pack("{s:s, s:i, s:s, s:s}", "name", name, "port", p->port,
                                            "targetPort", name, "protocol", proto(p)))) {
            json_decref(ports);
            return NULL;
        }
    }
    return json_pack("{s:s, s:s, s:o, s:{s:s, s:o, s:o}}", "apiVersion", "v1", "kind", "Service",
                     "metadata", metadata(owner), "spec", "type",
                     spec->service_type ? spec->service_type : KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE,
                     "selector", labels(owner->name, false), "ports", ports);
}

/* ---- owned-field comparison ---------------------------------------------------- */

/* Every member of "want" is in "have" with an equal value, recursively for
 * objects; arrays are equal when they have the same length and each
 * element is a subset match. Scalars compare as JSON values. */
static bool subset_equal(const json_t *want, const json_t *have)
{
    if (json_is_object(want)) {
        if (!json_is_object(have))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)want, k, v)
        {
            if (!subset_equal(v, json_object_get(have, k)))
                return false;
        }
        return true;
    }
    if (json_is_array(want)) {
        if (!json_is_array(have) || json_array_size(want) != json_array_size(have))
            return false;
        for (size_t i = 0; i < json_array_size(want); i++)
            if (!subset_equal(json_array_get(want, i), json_array_get(have, i)))
                return false;
        return true;
    }
    return have && kop_json_equal(want, have);
}

/* The object at patch.<k1>.<k2>..., created on demand. */
static json_t *patch_at(json_t *patch, const char *const *path, size_t n)
{
    json_t *cur = patch;
    for (size_t i = 0; i < n && cur; i++)
        cur = kop_json_object_ensure(cur, path[i]);
    return cur;
}

/* Map whose "want" entries kop owns; other keys belong to others. */
static int patch_map_subset(json_t *patch, const char *const *path, size_t n, const json_t *want,
                            const json_t *have)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)want, k, v)
    {
        if (kop_json_equal(v, json_object_get(have, k)))
            continue;
        json_t *at = patch_at(patch, path, n);
        if (!at || json_object_set(at, k, v))
            return -ENOMEM;
    }
    return 0;
}

/* Map kop owns entirely: missing or different entries set, extra ones
 * removed with null. */
static int patch_map_exact(json_t *patch, const char *const *path, size_t n, const json_t *want,
                           const json_t *have)
{
    int r = patch_map_subset(patch, path, n, want, have);
    if (r < 0)
        return r;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)have, k, v)
    {
        if (json_object_get(want, k))
            continue;
        json_t *at = patch_at(patch, path, n);
        if (!at || json_object_set_new(at, k, json_null()))
            return -ENOMEM;
    }
    return 0;
}

static int patch_value(json_t *patch, const char *const *path, size_t n, const json_t *want,
                       const json_t *have)
{
    if (!want || subset_equal(want, have))
        return 0;
    json_t *at = patch_at(patch, path, n - 1);
    if (!at || json_object_set(at, path[n - 1], (json_t *)want))
        return -ENOMEM;
    return 0;
}

static int finish_patch(json_t *patch, int r, json_t **ret_patch)
{
    if (r < 0) {
        json_decref(patch);
        return r;
    }
    if (json_object_size(patch) == 0) {
        json_decref(patch);
        patch = NULL;
    }
    *ret_patch = patch;
    return 0;
}

static const json_t *jget(const json_t *obj, const char *dotted)
{
    return kop_json_path(obj, dotted);
}

int kop_reconciler_deployment_patch(const json_t *live, const json_t *desired, json_t **ret_patch)
{
    if (!json_is_object(live) || !json_is_object(desired))
        return -EINVAL;
    json_t *patch = json_object();
    if (!patch)
        return -ENOMEM;
    static const char *const p_labels[] = {"metadata", "labels"};
    static const char *const p_replicas[] = {"spec", "replicas"};
    static const char *const p_selector[] = {"spec", "selector", "matchLabels"};
    static const char *const p_tlabels[] = {"spec", "template", "metadata", "labels"};
    static const char *const p_containers[] = {"spec", "template", "spec", "containers"};
    int r = patch_map_subset(patch, p_labels, 2, jget(desired, "metadata.labels"),
                             jget(live, "metadata.labels"));
    if (r == 0) {
        /* An absent replicas means 1 to the apiserver. */
        const json_t *have = jget(live, "spec.replicas");
        json_t *one = have ? NULL : json_integer(1);
        r = patch_value(patch, p_replicas, 2, jget(desired, "spec.replicas"), have ? have : one);
        json_decref(one);
    }
    if (r == 0)
        r = patch_map_exact(patch, p_selector, 3, jget(desired, "spec.selector.matchLabels"),
                            jget(live, "spec.selector.matchLabels"));
    if (r == 0)
        r = patch_map_subset(patch, p_tlabels, 4, jget(desired, "spec.template.metadata.labels"),
                             jget(live, "spec.template.metadata.labels"));
    if (r == 0)
        r = patch_value(patch, p_containers, 4, jget(desired, "spec.template.spec.containers"),
                        jget(live, "spec.template.spec.containers"));
    return finish_patch(patch, r, ret_patch);
}

static bool needs_node_ports(const char *type)
{
    return type && (strcmp(type, "NodePort") == 0 || strcmp(type, "LoadBalancer") == 0);
}

/* Desired ports with the nodePort of the live port of the same name. */
static json_t *service_ports(const json_t *want, const json_t *have, const char *type)
{
    json_t *out = json_deep_copy(want);
    if (!out || !needs_node_ports(type))
        return out;
    size_t i, j;
    json_t *p, *lp;
    json_array_foreach(out, i, p)
    {
        const char *name = json_string_value(json_object_get(p, "name"));
        json_array_foreach((json_t *)have, j, lp)
        {
            const char *lname = json_string_value(json_object_get(lp, "name"));
            json_t *np = json_object_get(lp, "nodePort");
            if (name && lname && strcmp(name, lname) == 0 && json_is_integer(np)) {
                if (json_object_set(p, "nodePort", np)) {
                    json_decref(out);
                    return NULL;
                }
                break;
            }
        }
    }
    return out;
}

int kop_reconciler_service_patch(const json_t *live, const json_t *desired, json_t **ret_patch)
{
    if (!json_is_object(live) || !json_is_object(desired))
        return -EINVAL;
    json_t *patch = json_object();
    if (!patch)
        return -ENOMEM;
    static const char *const p_labels[] = {"metadata", "labels"};
    static const char *const p_type[] = {"spec", "type"};
    static const char *const p_selector[] = {"spec", "selector"};
    int r = patch_map_subset(patch, p_labels, 2, jget(desired, "metadata.labels"),
                             jget(live, "metadata.labels"));
    const json_t *want_type = jget(desired, "spec.type");
    if (r == 0) {
        const json_t *have = jget(live, "spec.type");
        json_t *def = have ? NULL : json_string(KOP_MYRESOURCE_DEFAULT_SERVICE_TYPE);
        r = patch_value(patch, p_type, 2, want_type, have ? have : def);
        json_decref(def);
    }
    if (r == 0)
        r = patch_map_exact(patch, p_selector, 2, jget(desired, "spec.selector"),
                            jget(live, "spec.selector"));
    const json_t *want_ports = jget(desired, "spec.ports");
    const json_t *have_ports = jget(live, "spec.ports");
    if (r == 0 && want_ports && !subset_equal(want_ports, have_ports)) {
        json_t *ports = service_ports(want_ports, have_ports, json_string_value(want_type));
        json_t *spec = ports ? kop_json_object_ensure(patch, "spec") : NULL;
        if (!spec || json_object_set_new(spec, "ports", ports))
            r = -ENOMEM;
        if (!spec)
            json_decref(ports);
    }
    return finish_patch(patch, r, ret_patch);
}

/* ---- ownership --------------------------------------------------------------- */

static const json_t *controller_ref(const json_t *child)
{
    size_t i;
    json_t *ref;
    json_array_foreach(jget(child, "metadata.ownerReferences"), i, ref)
    {
        if (json_is_true(json_object_get(ref, "controller")))
            return ref;
    }
    return NULL;
}

bool kop_reconciler_controlled_by(const json_t *child, const char *uid)
{
    const char *have = json_string_value(json_object_get(controller_ref(child), "uid"));
    return uid && *uid && have && strcmp(have, uid) == 0;
}

const char *kop_reconciler_owner_name(const json_t *child)
{
    const json_t *ref = controller_ref(child);
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    const char *api = json_string_value(json_object_get(ref, "apiVersion"));
    size_t glen = strlen(KOP_MYRESOURCE_GROUP);
    if (!kind || strcmp(kind, KOP_MYRESOURCE_KIND) != 0 || !api ||
        strncmp(api, KOP_MYRESOURCE_GROUP, glen) != 0 || api[glen] != '/')
        return NULL;
    return json_string_value(json_object_get(ref, "name"));
}

/* ---- status --------------------------------------------------------------- */

static json_int_t int_at(const json_t *obj, const char *dotted, json_int_t dflt)
{
    const json_t *v = jget(obj, dotted);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static const json_t *find_condition(const json_t *conds, const char *type)
{
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && strcmp(t, type) == 0)
            return c;
    }
    return NULL;
}

static int add_condition(json_t *conds, const json_t *old_conds, const char *type, bool status,
                         const char *reason, const char *message, int64_t generation,
                         int64_t wall_ns)
{
    const char *st = status ? "True" : "False";
    const json_t *old = find_condition(old_conds, type);
    const char *old_st = json_string_value(json_object_get(old, "status"));
    const char *old_ltt = json_string_value(json_object_get(old, "lastTransitionTime"));
    char now[32];
    const char *ltt = old_ltt;
    if (!old_st || strcmp(old_st, st) != 0 || !old_ltt)
        ltt = kop_clock_rfc3339(wall_ns, now, sizeof(now));
    return json_array_append_new(
        conds, json_pack("{s:s, s:s, s:I, s:s, s:s, s:s}", "type", type, "status", st,
                         "observedGeneration", (json_int_t)generation, "lastTransitionTime", ltt,
                         "reason", reason, "message", message ? message : ""));
}

json_t *kop_reconciler_status(const json_t *old_status, const struct kop_reconciler_observed *obs,
                              int64_t wall_ns)
{
    const json_t *d = obs->deployment;
    json_int_t desired = d ? int_at(d, "spec.replicas", 1) : obs->spec_replicas;
    json_int_t ready = d ? int_at(d, "status.readyReplicas", 0) : 0;
    json_int_t updated = d ? int_at(d, "status.updatedReplicas", 0) : 0;
    json_int_t dgen = d ? int_at(d, "metadata.generation", 0) : 0;
    json_int_t dobs = d ? int_at(d, "status.observedGeneration", 0) : 0;
    bool available = d && ready >= desired;
    bool rolled_out = d && dobs >= dgen && updated >= desired && ready >= desired;
    const json_t *old_conds = json_object_get(old_status, "conditions");
    int64_t gen = obs->generation;
    char msg[256];

    json_t *conds = json_array();
    if (!conds)
        return NULL;
    int r = 0;
    if (!d)
        r |= add_condition(conds, old_conds, "Available", false, "DeploymentNotFound",
                           "the Deployment does not exist yet", gen, wall_ns);
    else {
        snprintf(msg, sizeof(msg), "%lld/%lld replicas ready", (long long)ready,
                 (long long)desired);
        r |= add_condition(conds, old_conds, "Available", available,
                           available ? "MinimumReplicasAvailable" : "ReplicasNotReady", msg, gen,
                           wall_ns);
    }
    if (obs->paused)
        r |= add_condition(conds, old_conds, "Progressing", false, "Paused",
                           "reconciliation is paused", gen, wall_ns);
    else if (obs->error_reason)
        r |= add_condition(conds, old_conds, "Progressing", false, "ReconcileFailed",
                           "reconciling failed; see the Degraded condition", gen, wall_ns);
    else if (!d)
        r |= add_condition(conds, old_conds, "Progressing", true, "Creating",
                           "creating the Deployment", gen, wall_ns);
    else if (!rolled_out)
        r |= add_condition(conds, old_conds, "Progressing", true, "RolloutInProgress",
                           "the Deployment is rolling out", gen, wall_ns);
    else
        r |= add_condition(conds, old_conds, "Progressing", false, "RolloutComplete",
                           "the Deployment has rolled out", gen, wall_ns);
    if (obs->error_reason)
        r |= add_condition(conds, old_conds, "Degraded", true, obs->error_reason,
                           obs->error_message, gen, wall_ns);
    else
        r |= add_condition(conds, old_conds, "Degraded", false, "ReconcileSucceeded",
                           "the children match the spec", gen, wall_ns);
    if (obs->paused)
        r |= add_condition(conds, old_conds, "Paused", true, "Paused",
                           "spec.paused is true; the children are left alone", gen, wall_ns);
    else
        r |= add_condition(conds, old_conds, "Paused", false, "Running",
                           "the children are reconciled", gen, wall_ns);
    if (r) {
        json_decref(conds);
        return NULL;
    }
    return json_pack("{s:I, s:I, s:I, s:o}", "observedGeneration", (json_int_t)gen, "replicas",
                     desired, "readyReplicas", ready, "conditions", conds);
}

bool kop_reconciler_status_changed(const json_t *old_status, const json_t *status)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)status, k, v)
    {
        const json_t *o = json_object_get(old_status, k);
        if (!o || !kop_json_equal(v, o))
            return true;
    }
    return false;
}
