/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim object store: one map per resource ("ns/name" -> frozen object,
 * always in the storage version), the global resourceVersion counter, and
 * the bounded event history the watches read. Every commit bumps the
 * counter by one and records exactly one event, so the history is dense:
 * all events with rv > hist_floor are present. Compaction (a fault) moves
 * hist_floor to the current rv. All functions need ks->lock held.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ks_store_init(struct ks_server *ks)
{
    ks->objects = json_object();
    ks->writes = json_object();
    ks->svc_alloc = json_object();
    ks->hist = calloc(ks->history_cap, sizeof(*ks->hist));
    if (!ks->objects || !ks->writes || !ks->svc_alloc || !ks->hist)
        return -ENOMEM;
    return 0;
}

static void event_clear(struct ks_event *e)
{
    json_decref(e->obj);
    json_decref(e->old);
    memset(e, 0, sizeof(*e));
}

void ks_store_cleanup(struct ks_server *ks)
{
    for (size_t i = 0; i < ks->hist_len; i++)
        event_clear(&ks->hist[(ks->hist_head + i) % ks->history_cap]);
    free(ks->hist);
    ks->hist = NULL;
    json_decref(ks->objects);
    ks->objects = NULL;
    json_decref(ks->writes);
    ks->writes = NULL;
    json_decref(ks->svc_alloc);
    ks->svc_alloc = NULL;
    json_decref(ks->endpoints_pending);
    ks->endpoints_pending = NULL;
    json_decref(ks->label_index);
    ks->label_index = NULL;
    json_decref(ks->pods_pending);
    ks->pods_pending = NULL;
    json_decref(ks->pods_by_owner);
    ks->pods_by_owner = NULL;
    json_decref(ks->pod_ips);
    ks->pod_ips = NULL;
    json_decref(ks->pods_to_place);
    ks->pods_to_place = NULL;
    json_decref(ks->pods_unschedulable);
    ks->pods_unschedulable = NULL;
    json_decref(ks->pods_by_node);
    ks->pods_by_node = NULL;
    json_decref(ks->event_index);
    ks->event_index = NULL;
    json_decref(ks->event_due);
    ks->event_due = NULL;
    for (size_t i = ks->event_queue_head; i < ks->event_queue_len; i++)
        free(ks->event_queue[i].key);
    free(ks->event_queue);
    ks->event_queue = NULL;
    ks->event_queue_head = ks->event_queue_len = ks->event_queue_cap = 0;
}

/* What a stored Service holds of the allocators (ks->svc_alloc): its
 * clusterIPs and nodePorts, taken (add) or given back. */
static void svc_alloc_track(struct ks_server *ks, const json_t *svc, const char *obj_key, bool add)
{
    const json_t *spec = json_object_get(svc, "spec");
    json_t *held = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(spec, "clusterIPs"), i, v)
    {
        const char *ip = json_string_value(v);
        if (ip && *ip && strcmp(ip, "None") != 0)
            json_array_append_new(held, json_string(ip));
    }
    json_array_foreach(json_object_get(spec, "ports"), i, v)
    {
        json_int_t np = json_integer_value(json_object_get(v, "nodePort"));
        if (np > 0) {
            char k[48];
            snprintf(k, sizeof(k), "node-port:%" JSON_INTEGER_FORMAT, np);
            json_array_append_new(held, json_string(k));
        }
    }
    json_array_foreach(held, i, v)
    {
        const char *k = json_string_value(v);
        const char *owner = json_string_value(json_object_get(ks->svc_alloc, k));
        if (add && !owner)
            json_object_set_new(ks->svc_alloc, k, json_string(obj_key));
        else if (!add && owner && strcmp(owner, obj_key) == 0)
            json_object_del(ks->svc_alloc, k);
    }
    json_decref(held);
}

json_t *ks_store_map(struct ks_server *ks, const char *res_key)
{
    json_t *m = json_object_get(ks->objects, res_key);
    if (!m) {
        m = json_object();
        json_object_set_new(ks->objects, res_key, m);
    }
    return m;
}

json_t *ks_store_get(struct ks_server *ks, const char *res_key, const char *obj_key)
{
    return json_object_get(json_object_get(ks->objects, res_key), obj_key);
}

void ks_obj_key(char *buf, size_t len, const char *ns, const char *name)
{
    if (ns && *ns)
        snprintf(buf, len, "%s/%s", ns, name);
    else
        snprintf(buf, len, "%s", name);
}

static void record(struct ks_server *ks, const struct ks_res *def, enum ks_event_type type,
                   json_t *obj, json_t *old)
{
    if (ks->hist_len == ks->history_cap) {
        struct ks_event *oldest = &ks->hist[ks->hist_head];
        ks->hist_floor = oldest->rv;
        event_clear(oldest);
        ks->hist_head = (ks->hist_head + 1) % ks->history_cap;
        ks->hist_len--;
    }
    struct ks_event *e = &ks->hist[(ks->hist_head + ks->hist_len) % ks->history_cap];
    e->rv = ks->rv;
    e->type = type;
    e->key = def->key;
    e->obj = json_incref(obj);
    e->old = json_incref(old);
    ks->hist_len++;
    pthread_cond_broadcast(&ks->changed);
}

/* Count the writes of an object (restarting at a create). */
static void count_write(struct ks_server *ks, const char *res_key, const char *obj_key, bool fresh)
{
    json_t *m = json_object_get(ks->writes, res_key);
    if (!m) {
        m = json_object();
        json_object_set_new(ks->writes, res_key, m);
    }
    json_int_t n = fresh ? 0 : json_integer_value(json_object_get(m, obj_key));
    json_object_set_new(m, obj_key, json_integer(n + 1));
}

/* A ClusterRole changed: the aggregation controller looks again; a
 * Namespace, ServiceAccount or ConfigMap: the ServiceAccounts controller
 * and the root CA publisher; default/kubernetes: its publisher. */
static void roles_changed(struct ks_server *ks, const struct ks_res *def, const char *obj_key)
{
    if (strcmp(def->key, "services") == 0 && strcmp(obj_key, "default/kubernetes") == 0) {
        ks->ns_dirty = true; /* the control plane's own Service */
        pthread_cond_broadcast(&ks->changed);
        return;
    }
    if (strcmp(def->key, "clusterroles.rbac.authorization.k8s.io") == 0) {
        ks->roles_dirty = true;
        pthread_cond_broadcast(&ks->changed);
    } else if (strcmp(def->key, "namespaces") == 0 || strcmp(def->key, "serviceaccounts") == 0 ||
               strcmp(def->key, "configmaps") == 0) {
        ks->ns_dirty = true;
        pthread_cond_broadcast(&ks->changed);
    }
}

static void set_rv(json_t *obj, uint64_t rv)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)rv);
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(obj, "metadata", md);
    }
    json_object_set_new(md, "resourceVersion", json_string(buf));
}

/* The label index (ks->label_index): Pods and EndpointSlices by their
 * labels, Services by their selectors, so that the controllers find a
 * Service's Pods and slices, and a Pod's Services, without a walk over
 * all of them. */
static const json_t *indexed_map(const struct ks_res *def, const json_t *obj)
{
    if (strcmp(def->key, "services") == 0)
        return json_object_get(json_object_get(obj, "spec"), "selector");
    if (strcmp(def->key, "pods") == 0 || strcmp(def->key, "endpointslices.discovery.k8s.io") == 0)
        return json_object_get(json_object_get(obj, "metadata"), "labels");
    return NULL;
}

static char *index_key(const char *ns, const char *k, const char *v)
{
    return ks_printf("%s\x1f%s=%s", ns, k, v);
}

static void label_index(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                        const json_t *obj, bool add)
{
    const json_t *m = obj ? indexed_map(def, obj) : NULL;
    if (!json_is_object(m) || json_object_size(m) == 0)
        return;
    if (!ks->label_index)
        ks->label_index = json_object();
    json_t *ix = json_object_get(ks->label_index, def->key);
    if (!ix) {
        ix = json_object();
        json_object_set_new(ks->label_index, def->key, ix);
    }
    const char *ns =
        ks_nz(json_string_value(json_object_get(json_object_get(obj, "metadata"), "namespace")));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v)
    {
        if (!json_is_string(v))
            continue;
        char *ik = index_key(ns, k, json_string_value(v));
        ks_index_set(ix, ik, obj_key, add);
        free(ik);
    }
}

const json_t *ks_label_index_get(struct ks_server *ks, const char *res_key, const char *ns,
                                 const char *k, const char *v)
{
    json_t *ix = json_object_get(ks->label_index, res_key);
    if (!ix)
        return NULL;
    char *ik = index_key(ns, k, v);
    const json_t *set = json_object_get(ix, ik);
    free(ik);
    return set;
}

uint64_t ks_store_put(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                      json_t *obj)
{
    json_t *map = ks_store_map(ks, def->key);
    json_t *old = json_incref(json_object_get(map, obj_key));
    ks->rv++;
    set_rv(obj, ks->rv);
    json_object_set(map, obj_key, obj);
    if (strcmp(def->key, "services") == 0) {
        if (old)
            svc_alloc_track(ks, old, obj_key, false);
        svc_alloc_track(ks, obj, obj_key, true);
    }
    record(ks, def, old ? KS_MODIFIED : KS_ADDED, obj, old);
    count_write(ks, def->key, obj_key, old == NULL);
    /* The garbage collector also looks at objects whose owners changed
     * (dangling or missing owners), batched: a pass costs all objects. */
    const json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    if (json_array_size(refs) &&
        !json_equal(refs, json_object_get(json_object_get(old, "metadata"), "ownerReferences")))
        ks->gc_lazy = true;
    label_index(ks, def, obj_key, old, false);
    label_index(ks, def, obj_key, obj, true);
    ks_pods_changed(ks, def, obj_key, old, obj);
    ks_nodes_changed(ks, def, obj_key, old, obj);
    json_decref(old);
    json_decref(obj);
    if (strcmp(def->key, "deployments.apps") == 0)
        ks_controllers_deployment_changed(ks, obj_key);
    else if (strcmp(def->key, "events") == 0)
        ks_events_stored(ks, obj_key, false);
    roles_changed(ks, def, obj_key);
    ks_endpoints_changed(ks, def, obj_key, false);
    return ks->rv;
}

uint64_t ks_store_remove(struct ks_server *ks, const struct ks_res *def, const char *obj_key)
{
    json_t *map = ks_store_map(ks, def->key);
    json_t *old = json_object_get(map, obj_key);
    if (!old)
        return 0;
    ks->rv++;
    json_t *last = json_deep_copy(old);
    set_rv(last, ks->rv);
    json_incref(old);
    json_object_del(map, obj_key);
    if (strcmp(def->key, "services") == 0)
        svc_alloc_track(ks, old, obj_key, false);
    record(ks, def, KS_DELETED, last, old);
    if (strcmp(def->key, "events") == 0)
        ks_events_stored(ks, obj_key, true);
    label_index(ks, def, obj_key, old, false);
    ks_pods_changed(ks, def, obj_key, old, NULL);
    ks_nodes_changed(ks, def, obj_key, old, NULL);
    json_decref(old);
    json_decref(last);
    ks->gc_dirty = true;
    roles_changed(ks, def, obj_key);
    ks_endpoints_changed(ks, def, obj_key, true);
    return ks->rv;
}

void ks_store_compact(struct ks_server *ks)
{
    for (size_t i = 0; i < ks->hist_len; i++)
        event_clear(&ks->hist[(ks->hist_head + i) % ks->history_cap]);
    ks->hist_head = 0;
    ks->hist_len = 0;
    ks->hist_floor = ks->rv;
}

json_t *ks_store_snapshot(struct ks_server *ks, const char *res_key, uint64_t rv)
{
    if (rv < ks->hist_floor)
        return NULL;
    json_t *snap = json_object();
    if (!snap)
        abort();
    json_t *cur = json_object_get(ks->objects, res_key);
    if (cur)
        json_object_update(snap, cur);
    /* Undo, newest first, every change made after rv. */
    for (size_t i = ks->hist_len; i > 0; i--) {
        const struct ks_event *e = &ks->hist[(ks->hist_head + i - 1) % ks->history_cap];
        if (e->rv <= rv)
            break;
        if (strcmp(e->key, res_key) != 0)
            continue;
        const json_t *md = json_object_get(e->obj, "metadata");
        char key[512];
        ks_obj_key(key, sizeof(key), json_string_value(json_object_get(md, "namespace")),
                   ks_nz(json_string_value(json_object_get(md, "name"))));
        if (e->type == KS_ADDED)
            json_object_del(snap, key);
        else
            json_object_set(snap, key, e->old);
    }
    return snap;
}
