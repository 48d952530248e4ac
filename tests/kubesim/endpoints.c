/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's Endpoints and EndpointSlices, as the controller manager and the
 * apiserver keep them:
 *  - the endpoints controller (pkg/controller/endpoint/
 *    endpoints_controller.go): every Service with a selector has an
 *    Endpoints of its name listing the Pods it selects, ready or not,
 *    repacked as pkg/api/v1/endpoints/util.go RepackSubsets does; deleting
 *    the Service deletes it;
 *  - the EndpointSlice controller (pkg/controller/endpointslice and the
 *    reconciler of k8s.io/endpointslice): the same Pods as EndpointSlices
 *    named after the Service, owned by it, one per set of ports and at
 *    most 100 endpoints each, a placeholder without endpoints when none;
 *  - the apiserver's own (pkg/controlplane/reconcilers, endpointsadapter.go):
 *    Endpoints default/kubernetes and EndpointSlice default/kubernetes
 *    pointing at kubesim itself (127.0.0.1 and its port).
 * ks_store_put and ks_store_remove tell ks_endpoints_changed what changed;
 * it notes the Services concerned (a Pod's: those that select it now or
 * did before, read from the event just recorded) and the next pass syncs
 * those only. Objects are written only when their content changes, so
 * nothing churns. Everything runs with ks->lock held: the passes on the
 * controller thread, ks_endpoints_changed in whichever thread stores.
 */
#include "kubesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLICE_MAX 100 /* kube-controller-manager --max-endpoints-per-slice default */
#define MANAGED_BY "endpointslice-controller.k8s.io"
#define L_SERVICE_NAME "kubernetes.io/service-name"
#define L_MANAGED_BY "endpointslice.kubernetes.io/managed-by"
#define L_HEADLESS "service.kubernetes.io/headless"
#define L_SKIP_MIRROR "endpointslice.kubernetes.io/skip-mirror"

struct ep_defs {
    const struct ks_res *ep, *slice;
};

static const json_t *md_of(const json_t *obj)
{
    return json_object_get(obj, "metadata");
}

static const char *md_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(md_of(obj), k));
}

/* Does a Service selector (a map) select these labels? */
static bool selects(const json_t *selector, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)selector, k, v)
    {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!have || strcmp(have, ks_nz(json_string_value(v))) != 0)
            return false;
    }
    return true;
}

static void pend(struct ks_server *ks, const char *ns, const char *name)
{
    if (!ns || !name)
        return;
    char key[512];
    ks_obj_key(key, sizeof(key), ns, name);
    json_object_set_new(ks->endpoints_pending, key, json_true());
}

/* The Services of namespace ns whose selectors have a pair of labels and
 * select them (found through the selector index). */
static void pend_selecting(struct ks_server *ks, const char *ns, const json_t *labels)
{
    const char *lk;
    json_t *lv;
    json_object_foreach((json_t *)labels, lk, lv)
    {
        if (!json_is_string(lv))
            continue;
        const char *k;
        json_t *unused;
        json_object_foreach(
            (json_t *)ks_label_index_get(ks, "services", ns, lk, json_string_value(lv)), k, unused)
        {
            const json_t *svc = ks_store_get(ks, "services", k);
            const json_t *sel = json_object_get(json_object_get(svc, "spec"), "selector");
            if (json_object_size(sel) && selects(sel, labels))
                json_object_set_new(ks->endpoints_pending, k, json_true());
        }
    }
}

/* A Pod changed (obj and old: after and before, either may be NULL): the
 * Services of its namespace that select it now or did before. */
static void pend_pod(struct ks_server *ks, const json_t *obj, const json_t *old)
{
    const char *ns = ks_nz(md_str(obj ? obj : old, "namespace"));
    if (obj)
        pend_selecting(ks, ns, json_object_get(md_of(obj), "labels"));
    if (old)
        pend_selecting(ks, ns, json_object_get(md_of(old), "labels"));
}

void ks_endpoints_changed(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                          bool removed)
{
    bool svc = strcmp(def->key, "services") == 0;
    bool pod = strcmp(def->key, "pods") == 0;
    bool slice = strcmp(def->key, "endpointslices.discovery.k8s.io") == 0;
    if (!svc && !pod && !slice && strcmp(def->key, "endpoints") != 0)
        return;
    if (!ks->endpoints_pending)
        ks->endpoints_pending = json_object();
    /* the change just recorded: the last event of the history */
    const struct ks_event *e =
        ks->hist_len ? &ks->hist[(ks->hist_head + ks->hist_len - 1) % ks->history_cap] : NULL;
    if (pod && e) {
        pend_pod(ks, e->type == KS_DELETED ? NULL : e->obj, e->old);
    } else if (slice && e) {
        pend(ks, md_str(e->obj, "namespace"),
             json_string_value(
                 json_object_get(json_object_get(md_of(e->obj), "labels"), L_SERVICE_NAME)));
    } else if (!pod && !slice) {
        /* a Service, or an Endpoints of that name */
        json_object_set_new(ks->endpoints_pending, obj_key, json_true());
    }
    ks->endpoints_dirty = true;
    pthread_cond_broadcast(&ks->changed);
    /* endpoints_controller.go syncService: a Service that is gone takes
     * its Endpoints along (its EndpointSlices go by their owner
     * references, through the garbage collector). */
    const struct ks_res *ep = svc && removed ? ks_res_by_key(ks, "endpoints") : NULL;
    if (ep && ks_store_get(ks, ep->key, obj_key))
        ks_store_remove(ks, ep, obj_key);
}

/* ---- pods ------------------------------------------------------------------------ */

static const char *pod_ip(const json_t *pod)
{
    const json_t *st = json_object_get(pod, "status");
    const char *ip = json_string_value(json_object_get(st, "podIP"));
    if (!ip || !*ip)
        ip = json_string_value(
            json_object_get(json_array_get(json_object_get(st, "podIPs"), 0), "ip"));
    return ip && *ip ? ip : NULL;
}

/* k8s.io/endpointslice util ShouldPodBeInEndpoints: an IP, not
 * finished, and (unless include_terminating) not being deleted. */
static bool pod_in_endpoints(const json_t *pod, bool include_terminating)
{
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    if (!pod_ip(pod))
        return false;
    if (phase && (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0))
        return false;
    return include_terminating || !md_str(pod, "deletionTimestamp");
}

static const char *proto_of(const json_t *port)
{
    const char *p = json_string_value(json_object_get(port, "protocol"));
    return p && *p ? p : "TCP";
}

/* pkg/api/v1/pod/util.go FindPort: the Service port's targetPort on this
 * Pod (a number as is; a name: the container port of that name and
 * protocol, sidecar init containers included); -1 when there is none. */
static long find_port(const json_t *pod, const json_t *sp)
{
    const json_t *tp = json_object_get(sp, "targetPort");
    if (!tp)
        tp = json_object_get(sp, "port");
    if (json_is_integer(tp))
        return (long)json_integer_value(tp);
    const char *name = json_string_value(tp);
    if (!name)
        return -1;
    const json_t *spec = json_object_get(pod, "spec");
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        size_t i, j;
        const json_t *c, *p;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const char *rp = json_string_value(json_object_get(c, "restartPolicy"));
            if (l == 1 && (!rp || strcmp(rp, "Always") != 0))
                continue;
            json_array_foreach(json_object_get(c, "ports"), j, p)
            {
                const char *pn = json_string_value(json_object_get(p, "name"));
                if (pn && strcmp(pn, name) == 0 && strcmp(proto_of(p), proto_of(sp)) == 0)
                    return (long)json_integer_value(json_object_get(p, "containerPort"));
            }
        }
    }
    return -1;
}

/* The Pods of the Service's namespace its selector matches, by name.
 * @ref new (the array holds a reference to each Pod) */
static json_t *selected_pods(struct ks_server *ks, const char *ns, const json_t *selector)
{
    /* the candidates: the Pods with the selector's rarest pair */
    const json_t *fewest = NULL;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)selector, k, v)
    {
        const json_t *set = ks_label_index_get(ks, "pods", ns, k, ks_nz(json_string_value(v)));
        if (!set) {
            fewest = NULL;
            break;
        }
        if (!fewest || json_object_size(set) < json_object_size(fewest))
            fewest = set;
    }
    json_t *sel = json_object(); /* key -> Pod: the matches, then sorted */
    const char *key;
    json_t *unused;
    json_object_foreach((json_t *)fewest, key, unused)
    {
        json_t *pod = ks_store_get(ks, "pods", key);
        if (pod && selects(selector, json_object_get(md_of(pod), "labels")))
            json_object_set(sel, key, pod);
    }
    json_t *out = json_array();
    size_t n;
    const char **keys = ks_sorted_keys(sel, &n);
    for (size_t i = 0; i < n; i++)
        json_array_append(out, json_object_get(sel, keys[i]));
    free(keys);
    json_decref(sel);
    return out;
}

/* A Service's headlessness (helper.IsServiceIPSet negated). */
static bool headless(const json_t *svc)
{
    const char *ip = json_string_value(json_object_get(json_object_get(svc, "spec"), "clusterIP"));
    return !ip || !*ip || strcmp(ip, "None") == 0;
}

/* endpointutil.ShouldSetHostname: the Pod's hostname when its subdomain is
 * the Service's name (same namespace, as all selected Pods are). */
static const char *pod_hostname(const json_t *pod, const json_t *svc)
{
    const json_t *spec = json_object_get(pod, "spec");
    const char *h = json_string_value(json_object_get(spec, "hostname"));
    const char *sub = json_string_value(json_object_get(spec, "subdomain"));
    if (h && *h && sub && strcmp(sub, ks_nz(md_str(svc, "name"))) == 0)
        return h;
    return NULL;
}

/* targetRef: Kind, Namespace, Name, UID (no resourceVersion). @ref new */
static json_t *target_ref(const json_t *pod)
{
    return json_pack("{s:s,s:s,s:s,s:s}", "kind", "Pod", "namespace",
                     ks_nz(md_str(pod, "namespace")), "name", ks_nz(md_str(pod, "name")), "uid",
                     ks_nz(md_str(pod, "uid")));
}

/* json_equal with absent (NULL) equal to absent. */
static bool same(const json_t *a, const json_t *b)
{
    return a == b || (a && b && json_equal(a, b));
}

static json_t *labels_or_null(json_t *labels)
{
    if (json_object_size(labels))
        return labels;
    json_decref(labels);
    return NULL;
}

static void set_or_del(json_t *obj, const char *k, json_t *v)
{
    if (v)
        json_object_set_new(obj, k, v);
    else
        json_object_del(obj, k);
}

/* A new object of a kind with its metadata. @ref new */
static json_t *new_object(const char *api_version, const char *kind, const char *ns,
                          const char *name)
{
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s}}", "kind", kind, "apiVersion", api_version,
                     "metadata", "name", name, "namespace", ns, "uid", uid, "creationTimestamp",
                     now);
}

/* ---- Endpoints ------------------------------------------------------------------- */

/* Remember that port (NULL: the no-port sentinel of a headless Service)
 * leads to the address keyed akey, ready or not; not ready wins
 * (RepackSubsets' mapAddressByPort). */
static void map_address(json_t *by_port, const json_t *port, const char *akey, bool ready)
{
    char *pk = port ? ks_dump(port, true, NULL) : ks_strdup("");
    json_t *e = json_object_get(by_port, pk);
    if (!e) {
        e = json_pack("{s:O?,s:{}}", "port", port, "addrs");
        json_object_set_new(by_port, pk, e);
    }
    json_t *addrs = json_object_get(e, "addrs");
    const json_t *was = json_object_get(addrs, akey);
    if (!was || json_is_true(was))
        json_object_set_new(addrs, akey, json_boolean(ready));
    free(pk);
}

/* RepackSubsets: the ports that lead to the same addresses (each ready or
 * not) in one subset. Addresses sorted by IP, then Pod UID, as SortSubsets
 * does; ports and subsets in a fixed order of their contents (upstream
 * orders those by a hash of them). @ref new */
static json_t *repack(const json_t *by_port, const json_t *all_addrs)
{
    json_t *groups = json_object();
    size_t n;
    const char **pkeys = ks_sorted_keys(by_port, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_object_get(by_port, pkeys[i]);
        char *sig = ks_dump(json_object_get(e, "addrs"), true, NULL);
        json_t *g = json_object_get(groups, sig);
        if (!g) {
            g = json_pack("{s:[],s:O}", "ports", "addrs", json_object_get(e, "addrs"));
            json_object_set_new(groups, sig, g);
        }
        const json_t *port = json_object_get(e, "port");
        if (json_is_object(port))
            json_array_append(json_object_get(g, "ports"), (json_t *)port);
        free(sig);
    }
    free(pkeys);
    json_t *subsets = json_array();
    const char **sigs = ks_sorted_keys(groups, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *g = json_object_get(groups, sigs[i]);
        json_t *ready = json_array(), *not_ready = json_array();
        size_t na;
        const char **akeys = ks_sorted_keys(json_object_get(g, "addrs"), &na);
        for (size_t a = 0; a < na; a++)
            json_array_append(json_is_true(json_object_get(json_object_get(g, "addrs"), akeys[a]))
                                  ? ready
                                  : not_ready,
                              json_object_get(all_addrs, akeys[a]));
        free(akeys);
        json_t *ss = json_object();
        set_or_del(ss, "addresses", json_array_size(ready) ? json_incref(ready) : NULL);
        set_or_del(ss, "notReadyAddresses",
                   json_array_size(not_ready) ? json_incref(not_ready) : NULL);
        const json_t *ports = json_object_get(g, "ports");
        set_or_del(ss, "ports", json_array_size(ports) ? json_incref((json_t *)ports) : NULL);
        json_decref(ready);
        json_decref(not_ready);
        json_array_append_new(subsets, ss);
    }
    free(sigs);
    json_decref(groups);
    return subsets;
}

/* endpoints_controller.go syncService: the subsets of the Service's
 * Endpoints. @ref new */
static json_t *endpoint_subsets(const json_t *svc, const json_t *pods)
{
    const json_t *spec = json_object_get(svc, "spec");
    bool tolerate = json_is_true(json_object_get(spec, "publishNotReadyAddresses"));
    const json_t *sports = json_object_get(spec, "ports");
    json_t *by_port = json_object(), *all_addrs = json_object();
    size_t i, j;
    const json_t *pod, *sp;
    json_array_foreach(pods, i, pod)
    {
        if (!pod_in_endpoints(pod, tolerate))
            continue;
        /* podToEndpointAddressForService, hostname per ShouldSetHostname */
        json_t *epa = json_pack("{s:s}", "ip", pod_ip(pod));
        const char *host = pod_hostname(pod, svc);
        const char *node =
            json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
        if (host)
            json_object_set_new(epa, "hostname", json_string(host));
        if (node && *node)
            json_object_set_new(epa, "nodeName", json_string(node));
        json_object_set_new(epa, "targetRef", target_ref(pod));
        /* "IP/UID": '/' sorts before any IP character, so the keys sort
         * by IP, then UID */
        char *akey = ks_printf("%s/%s", pod_ip(pod), ks_nz(md_str(pod, "uid")));
        bool ready = tolerate || ks_pod_ready(pod);
        if (!json_object_get(all_addrs, akey))
            json_object_set(all_addrs, akey, epa);
        json_decref(epa);
        if (json_array_size(sports) == 0) {
            if (headless(svc)) /* only a headless Service lists Pods without ports */
                map_address(by_port, NULL, akey, ready);
        }
        json_array_foreach(sports, j, sp)
        {
            long num = find_port(pod, sp);
            if (num < 0)
                continue; /* no such port on this Pod: not listed for it */
            /* endpointPortFromServicePort */
            json_t *epp = json_object();
            const char *name = json_string_value(json_object_get(sp, "name"));
            if (name && *name)
                json_object_set_new(epp, "name", json_string(name));
            json_object_set_new(epp, "port", json_integer(num));
            json_object_set_new(epp, "protocol", json_string(proto_of(sp)));
            const json_t *ap = json_object_get(sp, "appProtocol");
            if (json_is_string(ap))
                json_object_set(epp, "appProtocol", (json_t *)ap);
            map_address(by_port, epp, akey, ready);
            json_decref(epp);
        }
        free(akey);
    }
    json_t *subsets = repack(by_port, all_addrs);
    json_decref(by_port);
    json_decref(all_addrs);
    return subsets;
}

/* Write the Endpoints key unless it already says labels and subsets (@ref
 * steal both; empty: absent, as omitempty drops them). */
static void put_endpoints(struct ks_server *ks, const struct ks_res *def, const char *ns,
                          const char *name, json_t *labels, json_t *subsets)
{
    char key[512];
    ks_obj_key(key, sizeof(key), ns, name);
    const json_t *cur = ks_store_get(ks, def->key, key);
    labels = labels_or_null(labels);
    if (json_array_size(subsets) == 0) {
        json_decref(subsets);
        subsets = NULL;
    }
    if (cur && same(json_object_get(md_of(cur), "labels"), labels) &&
        same(json_object_get(cur, "subsets"), subsets)) {
        json_decref(labels);
        json_decref(subsets);
        return;
    }
    json_t *next = cur ? json_deep_copy(cur) : new_object("v1", "Endpoints", ns, name);
    set_or_del(json_object_get(next, "metadata"), "labels", labels);
    set_or_del(next, "subsets", subsets);
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

/* ---- EndpointSlices ---------------------------------------------------------------- */

/* k8s.io/endpointslice utils setEndpointSliceLabels: the Service's labels
 * but the reserved ones, the service name, the manager, headlessness. @ref new */
static json_t *slice_labels(const json_t *svc)
{
    json_t *labels = json_object();
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(md_of(svc), "labels"), k, v)
    {
        if (strcmp(k, L_SERVICE_NAME) != 0 && strcmp(k, L_MANAGED_BY) != 0 &&
            strcmp(k, L_HEADLESS) != 0)
            json_object_set(labels, k, v);
    }
    json_object_set_new(labels, L_SERVICE_NAME, json_string(ks_nz(md_str(svc, "name"))));
    json_object_set_new(labels, L_MANAGED_BY, json_string(MANAGED_BY));
    if (headless(svc))
        json_object_set_new(labels, L_HEADLESS, json_string(""));
    return labels;
}

/* utils podToEndpoint: conditions ready (serving and not terminating, or
 * publishNotReadyAddresses), serving (Ready), terminating. @ref new */
static json_t *slice_endpoint(const json_t *pod, const json_t *svc)
{
    bool serving = ks_pod_ready(pod);
    bool terminating = md_str(pod, "deletionTimestamp") != NULL;
    bool ready =
        json_is_true(json_object_get(json_object_get(svc, "spec"), "publishNotReadyAddresses")) ||
        (serving && !terminating);
    json_t *ep = json_pack("{s:[s],s:{s:b,s:b,s:b}}", "addresses", pod_ip(pod), "conditions",
                           "ready", ready, "serving", serving, "terminating", terminating);
    const char *host = pod_hostname(pod, svc);
    if (host)
        json_object_set_new(ep, "hostname", json_string(host));
    json_object_set_new(ep, "targetRef", target_ref(pod));
    const char *node = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    if (node && *node)
        json_object_set_new(ep, "nodeName", json_string(node));
    return ep;
}

/* utils getEndpointPorts: every Service port found on the Pod, its name
 * always written ("" when unnamed). @ref new */
static json_t *slice_ports(const json_t *pod, const json_t *svc)
{
    json_t *ports = json_array();
    size_t i;
    const json_t *sp;
    json_array_foreach(json_object_get(json_object_get(svc, "spec"), "ports"), i, sp)
    {
        long num = find_port(pod, sp);
        if (num < 0)
            continue;
        json_t *p = json_pack("{s:s,s:i,s:s}", "name",
                              ks_nz(json_string_value(json_object_get(sp, "name"))), "port",
                              (int)num, "protocol", proto_of(sp));
        const json_t *ap = json_object_get(sp, "appProtocol");
        if (json_is_string(ap))
            json_object_set(p, "appProtocol", (json_t *)ap);
        json_array_append_new(ports, p);
    }
    return ports;
}

/* A list as stored: an empty one reads back as null (protobuf storage
 * keeps no empty list). @ref steal, @ref new */
static json_t *list_or_null(json_t *a)
{
    if (json_array_size(a))
        return a;
    json_decref(a);
    return json_null();
}

/* Write one slice (cur_key NULL: a new one) with these contents (@ref
 * steal labels, owner, endpoints, ports), unless it already has them. */
static void put_slice(struct ks_server *ks, const struct ks_res *def, const char *ns,
                      const char *svc_name, const char *cur_key, json_t *labels, json_t *owner,
                      json_t *endpoints, json_t *ports)
{
    const json_t *cur = cur_key ? ks_store_get(ks, def->key, cur_key) : NULL;
    bool same_spec =
        cur && same(json_object_get(cur, "endpoints"), endpoints) &&
        same(json_object_get(cur, "ports"), ports) &&
        strcmp(ks_nz(json_string_value(json_object_get(cur, "addressType"))), "IPv4") == 0;
    if (same_spec && same(json_object_get(md_of(cur), "labels"), labels) &&
        same(json_object_get(md_of(cur), "ownerReferences"), owner)) {
        json_decref(labels);
        json_decref(owner);
        json_decref(endpoints);
        json_decref(ports);
        return;
    }
    json_t *next;
    char key[512];
    if (cur) {
        next = json_deep_copy(cur);
        snprintf(key, sizeof(key), "%s", cur_key);
        json_t *md = json_object_get(next, "metadata");
        if (!same_spec) /* registry/discovery/endpointslice/strategy.go */
            json_object_set_new(
                md, "generation",
                json_integer(json_integer_value(json_object_get(md, "generation")) + 1));
    } else {
        char sfx[6], *name;
        do {
            ks_random_suffix(sfx, sizeof(sfx));
            name = ks_printf("%s-%s", svc_name, sfx);
            ks_obj_key(key, sizeof(key), ns, name);
            if (ks_store_get(ks, def->key, key)) {
                free(name);
                name = NULL;
            }
        } while (!name);
        next = new_object("discovery.k8s.io/v1", "EndpointSlice", ns, name);
        json_t *md = json_object_get(next, "metadata");
        char *gen = ks_printf("%s-", svc_name);
        json_object_set_new(md, "generateName", json_string(gen));
        json_object_set_new(md, "generation", json_integer(1));
        free(gen);
        free(name);
    }
    json_t *md = json_object_get(next, "metadata");
    json_object_set_new(md, "labels", labels);
    set_or_del(md, "ownerReferences", owner);
    json_object_del(next, "addressType");
    json_object_del(next, "endpoints");
    json_object_del(next, "ports");
    json_object_set_new(next, "addressType", json_string("IPv4"));
    json_object_set_new(next, "endpoints", endpoints);
    json_object_set_new(next, "ports", ports);
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

/* The reconciler's outcome for one Service: its Pods grouped by the ports
 * found on them (each group in slices of at most SLICE_MAX endpoints), or
 * one placeholder slice without endpoints or ports when there is no Pod.
 * Existing slices of the same ports are reused in order; the rest, and
 * slices owned by another Service of that name, are deleted. */
static void sync_slices(struct ks_server *ks, const struct ks_res *def, const json_t *svc,
                        const json_t *pods)
{
    const char *ns = ks_nz(md_str(svc, "namespace"));
    const char *name = ks_nz(md_str(svc, "name"));
    const char *uid = ks_nz(md_str(svc, "uid"));
    json_t *groups = json_object(); /* ports (JSON text) -> {ports, endpoints} */
    size_t i;
    const json_t *pod;
    json_array_foreach(pods, i, pod)
    {
        if (!pod_in_endpoints(pod, true))
            continue;
        json_t *ports = list_or_null(slice_ports(pod, svc));
        char *pk = ks_dump(ports, true, NULL);
        json_t *g = json_object_get(groups, pk);
        if (!g) {
            g = json_pack("{s:O,s:[]}", "ports", ports, "endpoints");
            json_object_set_new(groups, pk, g);
        }
        json_array_append_new(json_object_get(g, "endpoints"), slice_endpoint(pod, svc));
        json_decref(ports);
        free(pk);
    }
    if (json_object_size(groups) == 0)
        json_object_set_new(groups, "null", json_pack("{s:n,s:[]}", "ports", "endpoints"));

    /* the Service's slices now, by their ports */
    json_t *have = json_object(); /* ports text -> [slice key] */
    json_t *stale = json_array();
    json_t *map = ks_store_map(ks, def->key);
    size_t n;
    /* the slices labelled with the Service's name (the label index) */
    const char **keys =
        ks_sorted_keys(ks_label_index_get(ks, def->key, ns, L_SERVICE_NAME, name), &n);
    for (size_t k = 0; k < n; k++) {
        const json_t *s = json_object_get(map, keys[k]);
        const json_t *labels = json_object_get(md_of(s), "labels");
        if (strcmp(ks_nz(md_str(s, "namespace")), ns) != 0 ||
            strcmp(ks_nz(json_string_value(json_object_get(labels, L_SERVICE_NAME))), name) != 0 ||
            strcmp(ks_nz(json_string_value(json_object_get(labels, L_MANAGED_BY))), MANAGED_BY) !=
                0)
            continue;
        const json_t *ref = json_array_get(json_object_get(md_of(s), "ownerReferences"), 0);
        if (strcmp(ks_nz(json_string_value(json_object_get(ref, "uid"))), uid) != 0) {
            json_array_append_new(stale, json_string(keys[k]));
            continue;
        }
        const json_t *ports = json_object_get(s, "ports");
        char *pk = ks_dump(ports ? ports : json_null(), true, NULL);
        json_t *list = json_object_get(have, pk);
        if (!list) {
            list = json_array();
            json_object_set_new(have, pk, list);
        }
        json_array_append_new(list, json_string(keys[k]));
        free(pk);
    }
    free(keys);

    const char **pks = ks_sorted_keys(groups, &n);
    for (size_t k = 0; k < n; k++) {
        const json_t *g = json_object_get(groups, pks[k]);
        const json_t *eps = json_object_get(g, "endpoints");
        json_t *reuse = json_object_get(have, pks[k]);
        size_t total = json_array_size(eps);
        size_t chunks = total ? (total + SLICE_MAX - 1) / SLICE_MAX : 1;
        for (size_t chunk = 0; chunk < chunks; chunk++) {
            json_t *part = json_array();
            for (size_t e = chunk * SLICE_MAX; e < total && e < (chunk + 1) * SLICE_MAX; e++)
                json_array_append(part, json_array_get(eps, e));
            const char *cur = json_string_value(json_array_get(reuse, chunk));
            json_t *owner =
                json_pack("[{s:s,s:s,s:s,s:s,s:b,s:b}]", "apiVersion", "v1", "kind", "Service",
                          "name", name, "uid", uid, "controller", 1, "blockOwnerDeletion", 1);
            put_slice(ks, def, ns, name, cur, slice_labels(svc), owner, list_or_null(part),
                      json_deep_copy(json_object_get(g, "ports")));
        }
        for (size_t r = chunks; r < json_array_size(reuse); r++)
            json_array_append(stale, json_array_get(reuse, r));
        json_object_del(have, pks[k]);
    }
    free(pks);
    const char *pk;
    json_t *list;
    json_object_foreach(have, pk, list)
    {
        json_array_extend(stale, list);
    }
    json_array_foreach(stale, i, pod)
    {
        if (ks_store_get(ks, def->key, json_string_value(pod)))
            ks_store_remove(ks, def, json_string_value(pod));
    }
    json_decref(stale);
    json_decref(have);
    json_decref(groups);
}

/* ---- the apiserver's own ------------------------------------------------------------- */

/* pkg/controlplane/reconcilers (endpointsadapter.go): Endpoints
 * default/kubernetes (labelled skip-mirror, so no mirrored slice) and the
 * EndpointSlice named kubernetes beside it (labelled with the service name
 * only, no owner), both to the apiserver's address and port. */
static void publish_apiserver(struct ks_server *ks, const struct ep_defs *d)
{
    const json_t *svc = ks_store_get(ks, "services", "default/kubernetes");
    const char *colon = ks->url ? strrchr(ks->url, ':') : NULL;
    if (!svc || md_str(svc, "deletionTimestamp") || !colon)
        return;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || port <= 0 || port > 65535)
        return;
    json_t *subsets = json_pack("[{s:[{s:s}],s:[{s:s,s:i,s:s}]}]", "addresses", "ip", "127.0.0.1",
                                "ports", "name", "https", "port", (int)port, "protocol", "TCP");
    put_endpoints(ks, d->ep, "default", "kubernetes", json_pack("{s:s}", L_SKIP_MIRROR, "true"),
                  subsets);

    json_t *labels = json_pack("{s:s}", L_SERVICE_NAME, "kubernetes");
    json_t *eps =
        json_pack("[{s:[s],s:{s:b}}]", "addresses", "127.0.0.1", "conditions", "ready", 1);
    json_t *ports =
        json_pack("[{s:s,s:i,s:s}]", "name", "https", "port", (int)port, "protocol", "TCP");
    const json_t *cur = ks_store_get(ks, d->slice->key, "default/kubernetes");
    if (!cur) {
        json_t *s = new_object("discovery.k8s.io/v1", "EndpointSlice", "default", "kubernetes");
        json_object_set_new(json_object_get(s, "metadata"), "generation", json_integer(1));
        json_object_set_new(json_object_get(s, "metadata"), "labels", labels);
        json_object_set_new(s, "addressType", json_string("IPv4"));
        json_object_set_new(s, "endpoints", eps);
        json_object_set_new(s, "ports", ports);
        ks_typed_order(s);
        ks_store_put(ks, d->slice, "default/kubernetes", s);
        return;
    }
    put_slice(ks, d->slice, "default", "kubernetes", "default/kubernetes", labels, NULL, eps,
              ports);
}

/* ---- the pass ----------------------------------------------------------------------- */

void ks_endpoints_sync(struct ks_server *ks)
{
    struct ep_defs d = {ks_res_by_key(ks, "endpoints"),
                        ks_res_by_key(ks, "endpointslices.discovery.k8s.io")};
    if (!d.ep || !d.slice)
        return;
    publish_apiserver(ks, &d);
    /* the Services whose Pods, Endpoints or slices changed since the last
     * pass (ks_endpoints_changed) */
    json_t *pending = ks->endpoints_pending ? ks->endpoints_pending : json_object();
    ks->endpoints_pending = json_object();
    json_t *svcs = ks_store_map(ks, "services");
    size_t n;
    const char **keys = ks_sorted_keys(pending, &n);
    for (size_t i = 0; i < n; i++) {
        const json_t *svc = json_object_get(svcs, keys[i]);
        if (!svc)
            continue;
        const json_t *spec = json_object_get(svc, "spec");
        const json_t *selector = json_object_get(spec, "selector");
        const char *type = json_string_value(json_object_get(spec, "type"));
        /* syncService: no selector (a user keeps its Endpoints), an
         * ExternalName Service, or one being deleted: nothing to do */
        if (json_object_size(selector) == 0 || md_str(svc, "deletionTimestamp") ||
            (type && strcmp(type, "ExternalName") == 0))
            continue;
        const char *ns = ks_nz(md_str(svc, "namespace"));
        json_t *pods = selected_pods(ks, ns, selector);
        json_t *labels = json_deep_copy(json_object_get(md_of(svc), "labels"));
        if (!labels)
            labels = json_object();
        if (headless(svc))
            json_object_set_new(labels, L_HEADLESS, json_string(""));
        else
            json_object_del(labels, L_HEADLESS);
        put_endpoints(ks, d.ep, ns, ks_nz(md_str(svc, "name")), labels,
                      endpoint_subsets(svc, pods));
        sync_slices(ks, d.slice, svc, pods);
        json_decref(pods);
    }
    free(keys);
    json_decref(pending);
}
