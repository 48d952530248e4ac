/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's Node and what places and runs Pods on it.
 *
 * The kubelet of one Node, KS_NODE_NAME (10.0.0.10): it registers the Node
 * at start and again when the Node is deleted (labels, addresses,
 * capacity, the four conditions and nodeInfo as a kubelet writes them),
 * with its Lease in kube-node-lease (made, not renewed), and starts every
 * Pod bound to it: Running, all conditions True, a Pod IP from
 * 10.244.0.0/16 (host-local style) or the Node's with hostNetwork, its
 * containers running and ready. Pods bound to another Node (one a client
 * made: no kubelet runs there) stay Pending.
 *
 * The node lifecycle controller's condition taints (TaintNodesByCondition):
 * node.kubernetes.io/unschedulable when spec.unschedulable, not-ready when
 * Ready is False, unreachable when it is Unknown or missing, each
 * NoSchedule (the NoExecute taints and evictions are not emulated).
 *
 * The scheduler (default-scheduler) binds a Pod without spec.nodeName
 * whose schedulerName is default-scheduler and that has no scheduling
 * gates to a Node that passes the filters of the default profile that
 * apply here, in their order: NodeUnschedulable, TaintToleration
 * (NoSchedule and NoExecute), NodeAffinity (nodeSelector and the required
 * node affinity: matchExpressions on labels, matchFields on metadata.name),
 * NodeResourcesFit (the Pod's own requests against allocatable: one Node
 * stands for a cluster, so what other Pods request is not counted). Of the
 * Nodes that fit, the one with the fewest Pods. None fits: PodScheduled
 * False, reason Unschedulable and FitError's message ("0/1 nodes are
 * available: 1 node(s) didn't match Pod's node affinity/selector.
 * preemption: 0/1 nodes are available: 1 Preemption is not helpful for
 * scheduling."); the Pod waits until a Node changes.
 *
 * A ReplicaSet's new Pods go through the same scheduler and kubelet in the
 * ReplicaSet controller's one write (controllers.c); a Pod a client makes
 * is bound in one write and started in the next, as the scheduler and
 * the kubelet do.
 */
#include "kubesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#define KS_NODE_CIDR "10.244.0.0/16"
#define DEFAULT_SCHEDULER "default-scheduler"

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

static const char *spec_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "spec"), k));
}

/* ---- the Node and its Lease (the kubelet's registration) ------------------------- */

/* PRETTY_NAME of /etc/os-release, as the kubelet reports osImage. */
static void os_image(char *out, size_t size)
{
    snprintf(out, size, "Linux");
    FILE *f = fopen("/etc/os-release", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "PRETTY_NAME=", 12) != 0)
            continue;
        char *v = line + 12;
        v[strcspn(v, "\r\n")] = '\0';
        size_t n = strlen(v);
        if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
            v[n - 1] = '\0';
            v++;
        }
        if (*v)
            snprintf(out, size, "%.*s", (int)(size - 1), v);
        break;
    }
    fclose(f);
}

static json_t *node_condition(const char *type, const char *status, const char *reason,
                              const char *message, const char *now)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status,
                     "lastHeartbeatTime", now, "lastTransitionTime", now, "reason", reason,
                     "message", message);
}

/* The Node as the kubelet registers it (pkg/kubelet/kubelet_node_status.go:
 * initialNode, then the setters of nodestatus). */
static json_t *node_object(void)
{
    struct utsname u;
    const char *kernel = "", *arch = "amd64";
    if (uname(&u) == 0) {
        kernel = u.release;
        if (strcmp(u.machine, "aarch64") == 0)
            arch = "arm64";
        else if (strcmp(u.machine, "x86_64") != 0)
            arch = u.machine;
    }
    char uid[40], now[32], machine[40], system[40], boot[40], image[256];
    ks_uuid(uid, sizeof(uid));
    ks_uuid(system, sizeof(system));
    ks_uuid(boot, sizeof(boot));
    ks_uuid(machine, sizeof(machine)); /* machine-id: 32 hex digits */
    char *d = machine;
    for (const char *s = machine; *s; s++)
        if (*s != '-')
            *d++ = *s;
    *d = '\0';
    ks_now_rfc3339(now, sizeof(now));
    os_image(image, sizeof(image));
    /* capacity: one Node stands for a cluster (see the top of the file);
     * pods: every address of the Pod CIDR */
    json_t *capacity = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "cpu", "64", "ephemeral-storage",
                                 "1073741824Ki", "hugepages-1Gi", "0", "hugepages-2Mi", "0",
                                 "memory", "268435456Ki", "pods", "65533");
    json_t *conds = json_array();
    json_array_append_new(conds,
                          node_condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                         "kubelet has sufficient memory available", now));
    json_array_append_new(conds, node_condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                                                "kubelet has no disk pressure", now));
    json_array_append_new(conds, node_condition("PIDPressure", "False", "KubeletHasSufficientPID",
                                                "kubelet has sufficient PID available", now));
    json_array_append_new(conds, node_condition("Ready", "True", "KubeletReady",
                                                "kubelet is posting ready status", now));
    json_t *node = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s},s:{s:s,s:s}},s:{s:s,s:[s]},"
        "s:{s:o,s:O,s:o,s:[{s:s,s:s},{s:s,s:s}],s:{s:{s:i}},s:{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,"
        "s:s,s:s}}}",
        "apiVersion", "v1", "kind", "Node", "metadata", "name", KS_NODE_NAME, "uid", uid,
        "creationTimestamp", now, "labels", "beta.kubernetes.io/arch", arch,
        "beta.kubernetes.io/os", "linux", "kubernetes.io/arch", arch, "kubernetes.io/hostname",
        KS_NODE_NAME, "kubernetes.io/os", "linux", "annotations", "node.alpha.kubernetes.io/ttl",
        "0", "volumes.kubernetes.io/controller-managed-attach-detach", "true", "spec", "podCIDR",
        KS_NODE_CIDR, "podCIDRs", KS_NODE_CIDR, "status", "capacity", capacity, "allocatable",
        capacity, "conditions", conds, "addresses", "type", "InternalIP", "address", KS_NODE_IP,
        "type", "Hostname", "address", KS_NODE_NAME, "daemonEndpoints", "kubeletEndpoint", "Port",
        10250, "nodeInfo", "machineID", machine, "systemUUID", system, "bootID", boot,
        "kernelVersion", kernel, "osImage", image, "containerRuntimeVersion", "containerd://1.7.24",
        "kubeletVersion", KS_GIT_VERSION, "kubeProxyVersion", "", "operatingSystem", "linux",
        "architecture", arch);
    return node;
}

/* Lock held. The Node KS_NODE_NAME and its Lease, made when missing. */
static void register_node(struct ks_server *ks)
{
    const struct ks_res *ndef = ks_res_by_key(ks, "nodes");
    const struct ks_res *ldef = ks_res_by_key(ks, "leases.coordination.k8s.io");
    if (!ndef)
        return;
    const json_t *node = ks_store_get(ks, ndef->key, KS_NODE_NAME);
    if (!node) {
        json_t *n = node_object();
        ks_typed_order(n);
        ks_store_put(ks, ndef, KS_NODE_NAME, n);
        node = ks_store_get(ks, ndef->key, KS_NODE_NAME);
    }
    /* pkg/kubelet/nodelease: kube-node-lease/NODE, owned by the Node */
    const json_t *ns = ks_store_get(ks, "namespaces", "kube-node-lease");
    char key[512];
    ks_obj_key(key, sizeof(key), "kube-node-lease", KS_NODE_NAME);
    if (!ldef || !node || !ns || meta_str(ns, "deletionTimestamp") ||
        ks_store_get(ks, ldef->key, key))
        return;
    char uid[40], now[32], renew[40];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    ks_now_rfc3339_micro(renew, sizeof(renew));
    json_t *lease =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:[{s:s,s:s,s:s,s:s}]},s:{s:s,s:i,s:s}}",
                  "apiVersion", "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
                  KS_NODE_NAME, "namespace", "kube-node-lease", "uid", uid, "creationTimestamp",
                  now, "ownerReferences", "apiVersion", "v1", "kind", "Node", "name", KS_NODE_NAME,
                  "uid", ks_nz(meta_str(node, "uid")), "spec", "holderIdentity", KS_NODE_NAME,
                  "leaseDurationSeconds", (int)(ks->node_lease_ms / 1000), "renewTime", renew);
    ks_typed_order(lease);
    ks_store_put(ks, ldef, key, lease);
}

/* pkg/controller/nodelifecycle: the NoSchedule taints a Node's spec and
 * conditions call for (key -> wanted). */
static bool want_taint(const json_t *node, const char *key)
{
    const char *ready = ks_condition_status(node, "Ready");
    if (strcmp(key, "node.kubernetes.io/unschedulable") == 0)
        return json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"));
    if (strcmp(key, "node.kubernetes.io/not-ready") == 0)
        return ready && strcmp(ready, "False") == 0;
    return !ready || strcmp(ready, "Unknown") == 0; /* unreachable */
}

/* Lock held. The condition taints of one Node, written when they differ. */
static void sync_node_taints(struct ks_server *ks, const struct ks_res *def, const char *key,
                             const json_t *node)
{
    static const char *const keys[] = {"node.kubernetes.io/unschedulable",
                                       "node.kubernetes.io/not-ready",
                                       "node.kubernetes.io/unreachable"};
    if (meta_str(node, "deletionTimestamp"))
        return;
    const json_t *taints = json_object_get(json_object_get(node, "spec"), "taints");
    json_t *next = json_array();
    bool changed = false;
    size_t i;
    json_t *t;
    json_array_foreach(taints, i, t)
    {
        const char *k = ks_nz(json_string_value(json_object_get(t, "key")));
        const char *eff = ks_nz(json_string_value(json_object_get(t, "effect")));
        bool ours = false;
        for (size_t j = 0; j < 3; j++)
            ours |= strcmp(k, keys[j]) == 0 && strcmp(eff, "NoSchedule") == 0;
        if (ours && !want_taint(node, k))
            changed = true;
        else
            json_array_append(next, t);
    }
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    for (size_t j = 0; j < 3; j++) {
        if (!want_taint(node, keys[j]))
            continue;
        bool have = false;
        json_array_foreach(next, i, t)
        {
            have |=
                strcmp(ks_nz(json_string_value(json_object_get(t, "key"))), keys[j]) == 0 &&
                strcmp(ks_nz(json_string_value(json_object_get(t, "effect"))), "NoSchedule") == 0;
        }
        if (have)
            continue;
        json_array_append_new(next, json_pack("{s:s,s:s,s:s}", "key", keys[j], "effect",
                                              "NoSchedule", "timeAdded", now));
        changed = true;
    }
    if (!changed) {
        json_decref(next);
        return;
    }
    json_t *obj = json_deep_copy(node);
    json_t *spec = ks_ensure_obj(obj, "spec");
    if (json_array_size(next))
        json_object_set_new(spec, "taints", next);
    else {
        json_object_del(spec, "taints");
        json_decref(next);
    }
    ks_typed_order(obj);
    ks_store_put(ks, def, key, obj);
}

/* ---- the kubelet: starting a Pod ------------------------------------------------- */

/* A free Pod IP, from where the last one was taken, as host-local IPAM
 * does. */
static bool next_pod_ip(struct ks_server *ks, char *out, size_t size)
{
    for (unsigned tries = 0; tries < 65534; tries++) {
        unsigned off = ks->pod_ip_next % 65534 + 1; /* 10.244.0.1 .. 10.244.255.254 */
        ks->pod_ip_next = off;
        if ((off & 0xff) <= 1 || (off & 0xff) == 0xff) /* .1: the node's bridge */
            continue;
        snprintf(out, size, "10.244.%u.%u", off >> 8, off & 0xff);
        if (!json_object_get(ks->pod_ips, out))
            return true;
    }
    return false;
}

static json_t *pod_condition(const char *type, const char *status, const char *now)
{
    return json_pack("{s:s,s:s,s:n,s:s}", "type", type, "status", status, "lastProbeTime",
                     "lastTransitionTime", now);
}

static json_t *container_statuses(const json_t *list, bool init, const char *now)
{
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        char hex[65], uid[40];
        size_t k = 0;
        while (k < 64) { /* 64 hex digits: two UUIDs without their dashes */
            ks_uuid(uid, sizeof(uid));
            for (const char *p = uid; *p && k < 64; p++)
                if (*p != '-')
                    hex[k++] = *p;
        }
        hex[64] = '\0';
        char *cid = ks_printf("containerd://%s", hex);
        json_t *state =
            init ? json_pack("{s:{s:i,s:s,s:s,s:s,s:s}}", "terminated", "exitCode", 0, "reason",
                             "Completed", "startedAt", now, "finishedAt", now, "containerID", cid)
                 : json_pack("{s:{s:s}}", "running", "startedAt", now);
        json_array_append_new(
            out, json_pack("{s:s,s:o,s:{},s:b,s:i,s:s,s:s,s:s,s:b}", "name",
                           ks_nz(json_string_value(json_object_get(c, "name"))), "state", state,
                           "lastState", "ready", 1, "restartCount", 0, "image",
                           ks_nz(json_string_value(json_object_get(c, "image"))), "imageID", "",
                           "containerID", cid, "started", init ? 0 : 1));
        free(cid);
    }
    return out;
}

/*
 * pkg/kubelet/status/generate.go GeneratePodReadyCondition with the
 * containers ready: Ready is True when the condition of every readiness
 * gate (spec.readinessGates, set by another controller) is True, else
 * False ReadinessGatesNotReady saying which are not. Written into st's
 * conditions (lastTransitionTime moves with the status); true if Ready
 * changed.
 */
static bool ready_with_gates(const json_t *spec, json_t *st, const char *now)
{
    json_t *conds = json_object_get(st, "conditions");
    char *msg = NULL;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(spec, "readinessGates"), i, g)
    {
        const char *type = ks_nz(json_string_value(json_object_get(g, "conditionType")));
        const char *status =
            json_string_value(json_object_get(ks_condition_in(conds, type), "status"));
        char *q = ks_go_quote(type);
        char *m = !status ? ks_printf("corresponding condition of pod readiness gate %s does not "
                                      "exist.",
                                      q)
                  : strcmp(status, "True") != 0
                      ? ks_printf("the status of pod readiness gate %s is not \"True\", but %s", q,
                                  status)
                      : NULL;
        free(q);
        if (m) {
            char *joined = msg ? ks_printf("%s, %s", msg, m) : ks_strdup(m);
            free(msg);
            free(m);
            msg = joined;
        }
    }
    json_t *ready = ks_condition_in(conds, "Ready");
    if (!ready) {
        free(msg);
        return false;
    }
    const char *want = msg ? "False" : "True";
    const char *have = ks_nz(json_string_value(json_object_get(ready, "status")));
    const char *reason = json_string_value(json_object_get(ready, "reason"));
    const char *message = json_string_value(json_object_get(ready, "message"));
    bool same =
        strcmp(have, want) == 0 && (msg ? reason && strcmp(reason, "ReadinessGatesNotReady") == 0 &&
                                              message && strcmp(message, msg) == 0
                                        : !reason && !message);
    if (!same) {
        if (strcmp(have, want) != 0)
            json_object_set_new(ready, "lastTransitionTime", json_string(now));
        json_object_set_new(ready, "status", json_string(want));
        if (msg) {
            json_object_set_new(ready, "reason", json_string("ReadinessGatesNotReady"));
            json_object_set_new(ready, "message", json_string(msg));
        } else {
            json_object_del(ready, "reason");
            json_object_del(ready, "message");
        }
    }
    free(msg);
    return !same;
}

/* A running Pod of this kubelet whose readiness gates call for another
 * Ready status (a gate's condition was written). */
static bool needs_ready_update(const json_t *pod)
{
    if (!pod || meta_str(pod, "deletionTimestamp") ||
        !json_array_size(json_object_get(json_object_get(pod, "spec"), "readinessGates")))
        return false;
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    const char *node = spec_str(pod, "nodeName");
    if (!phase || strcmp(phase, "Running") != 0 || !node || strcmp(node, KS_NODE_NAME) != 0)
        return false;
    json_t *st = json_deep_copy(json_object_get(pod, "status"));
    bool changed = ready_with_gates(json_object_get(pod, "spec"), st, "");
    json_decref(st);
    return changed;
}

/* Lock held. The kubelet starts pod (bound to KS_NODE_NAME): its status
 * as the kubelet leaves it once the containers run. The PodScheduled
 * condition's time and the conditions of other writers (readiness gates)
 * are kept. false: no Pod IP is free. */
static bool kubelet_start(struct ks_server *ks, json_t *pod, const char *now)
{
    json_t *spec = json_object_get(pod, "spec");
    char ip[32];
    if (json_is_true(json_object_get(spec, "hostNetwork")))
        snprintf(ip, sizeof(ip), "%s", KS_NODE_IP);
    else if (!next_pod_ip(ks, ip, sizeof(ip)))
        return false;
    json_t *st = ks_ensure_obj(pod, "status");
    const char *scheduled = json_string_value(json_object_get(
        ks_condition_in(json_object_get(st, "conditions"), "PodScheduled"), "lastTransitionTime"));
    if (!scheduled)
        scheduled = now;
    json_t *conds = json_array();
    const char *types[] = {"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                           "PodScheduled"};
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
        json_array_append_new(conds, pod_condition(types[k], "True", k == 4 ? scheduled : now));
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        const char *type = ks_nz(json_string_value(json_object_get(c, "type")));
        bool own = false;
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
            own = own || strcmp(type, types[k]) == 0;
        if (!own)
            json_array_append(conds, c);
    }
    json_object_set_new(st, "conditions", conds); /* scheduled pointed into the old array */
    ready_with_gates(spec, st, now);
    json_object_set_new(st, "phase", json_string("Running"));
    json_object_set_new(st, "hostIP", json_string(KS_NODE_IP));
    json_object_set_new(st, "hostIPs", json_pack("[{s:s}]", "ip", KS_NODE_IP));
    json_object_set_new(st, "podIP", json_string(ip));
    json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", ip));
    json_object_set_new(st, "startTime", json_string(now));
    if (json_array_size(json_object_get(spec, "initContainers")))
        json_object_set_new(st, "initContainerStatuses",
                            container_statuses(json_object_get(spec, "initContainers"), true, now));
    json_object_set_new(st, "containerStatuses",
                        container_statuses(json_object_get(spec, "containers"), false, now));
    return true;
}

/* ---- deletion: the grace period and the kubelet's part ------------------------------- */

json_int_t ks_pod_grace(const json_t *pod, const json_t *asked)
{
    json_int_t period = 0;
    const json_t *tg =
        json_object_get(json_object_get(pod, "spec"), "terminationGracePeriodSeconds");
    if (json_is_integer(asked))
        period = json_integer_value(asked);
    else if (json_is_integer(tg))
        period = json_integer_value(tg);
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    if (!json_string_length(json_object_get(json_object_get(pod, "spec"), "nodeName")) ||
        (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0)))
        period = 0;
    return period < 0 ? 1 : period;
}

void ks_pod_mark_terminating(json_t *pod, json_int_t period)
{
    json_t *md = ks_ensure_obj(pod, "metadata");
    time_t t = time(NULL) + (time_t)period;
    struct tm tm;
    gmtime_r(&t, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(md, "deletionTimestamp", json_string(when));
    json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(period));
}

/* Lock held. The kubelet stops a deleted Pod's containers (at once: they
 * exit 0 on SIGTERM), writes the terminal status (Succeeded, not ready,
 * as kubelets since 1.27 do before the final delete), then deletes it with
 * grace 0 (the store keeps it while finalizers remain). */
static void kubelet_kill(struct ks_server *ks, const struct ks_res *def, const char *key,
                         const json_t *pod)
{
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    json_t *next = json_deep_copy(pod);
    json_t *st = ks_ensure_obj(next, "status");
    const char *phase = json_string_value(json_object_get(st, "phase"));
    if (!phase || strcmp(phase, "Running") == 0 || strcmp(phase, "Pending") == 0) {
        json_object_set_new(st, "phase", json_string("Succeeded"));
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(st, "conditions"), i, c)
        {
            const char *type = ks_nz(json_string_value(json_object_get(c, "type")));
            if (strcmp(type, "Ready") == 0 || strcmp(type, "ContainersReady") == 0 ||
                strcmp(type, "PodReadyToStartContainers") == 0) {
                json_object_set_new(c, "status", json_string("False"));
                json_object_set_new(c, "lastTransitionTime", json_string(now));
                if (strcmp(type, "PodReadyToStartContainers") != 0)
                    json_object_set_new(c, "reason", json_string("PodCompleted"));
            }
        }
        json_array_foreach(json_object_get(st, "containerStatuses"), i, c)
        {
            const char *started = json_string_value(json_object_get(
                json_object_get(json_object_get(c, "state"), "running"), "startedAt"));
            json_object_set_new(
                c, "state",
                json_pack("{s:{s:i,s:s,s:s,s:s,s:s}}", "terminated", "exitCode", 0, "reason",
                          "Completed", "startedAt", started ? started : now, "finishedAt", now,
                          "containerID",
                          ks_nz(json_string_value(json_object_get(c, "containerID")))));
            json_object_set_new(c, "ready", json_false());
            json_object_set_new(c, "started", json_false());
        }
        ks_typed_order(next);
        ks_store_put(ks, def, key, next);
    } else {
        json_decref(next);
    }
    pod = ks_store_get(ks, def->key, key);
    if (!pod)
        return;
    if (json_array_size(json_object_get(json_object_get(pod, "metadata"), "finalizers"))) {
        if (json_integer_value(json_object_get(json_object_get(pod, "metadata"),
                                               "deletionGracePeriodSeconds")) != 0) {
            json_t *n = json_deep_copy(pod);
            json_object_set_new(json_object_get(n, "metadata"), "deletionGracePeriodSeconds",
                                json_integer(0));
            ks_typed_order(n);
            ks_store_put(ks, def, key, n);
        }
        return;
    }
    ks_store_remove(ks, def, key);
}

/* ---- the scheduler ----------------------------------------------------------------- */

/* v1helper.TolerationsTolerateTaint / Toleration.ToleratesTaint. */
static bool tolerates(const json_t *tols, const json_t *taint)
{
    const char *key = ks_nz(json_string_value(json_object_get(taint, "key")));
    const char *value = ks_nz(json_string_value(json_object_get(taint, "value")));
    const char *effect = ks_nz(json_string_value(json_object_get(taint, "effect")));
    size_t i;
    const json_t *t;
    json_array_foreach(tols, i, t)
    {
        const char *tk = ks_nz(json_string_value(json_object_get(t, "key")));
        const char *op = ks_nz(json_string_value(json_object_get(t, "operator")));
        const char *te = ks_nz(json_string_value(json_object_get(t, "effect")));
        if (*te && strcmp(te, effect) != 0)
            continue;
        if (*tk && strcmp(tk, key) != 0)
            continue;
        if (strcmp(op, "Exists") == 0)
            return true;
        if ((!*op || strcmp(op, "Equal") == 0) && *tk &&
            strcmp(ks_nz(json_string_value(json_object_get(t, "value"))), value) == 0)
            return true;
    }
    return false;
}

static bool in_values(const json_t *values, const char *v)
{
    size_t i;
    const json_t *x;
    json_array_foreach(values, i, x)
    {
        if (json_is_string(x) && strcmp(json_string_value(x), v) == 0)
            return true;
    }
    return false;
}

/* A decimal integer, the whole string (Gt and Lt of a node selector). */
static bool parse_int(const char *s, long long *out)
{
    char *end = NULL;
    if (!s || !*s)
        return false;
    *out = strtoll(s, &end, 10);
    return end && *end == '\0';
}

/* One NodeSelectorRequirement against a value (present or not). */
static bool requirement_matches(const json_t *req, const char *val)
{
    const char *op = ks_nz(json_string_value(json_object_get(req, "operator")));
    const json_t *values = json_object_get(req, "values");
    if (strcmp(op, "In") == 0)
        return val && in_values(values, val);
    if (strcmp(op, "NotIn") == 0)
        return !val || !in_values(values, val);
    if (strcmp(op, "Exists") == 0)
        return val != NULL;
    if (strcmp(op, "DoesNotExist") == 0)
        return val == NULL;
    if (strcmp(op, "Gt") == 0 || strcmp(op, "Lt") == 0) {
        long long have, want;
        if (!parse_int(val, &have) ||
            !parse_int(json_string_value(json_array_get(values, 0)), &want))
            return false;
        return op[0] == 'G' ? have > want : have < want;
    }
    return false;
}

/* NodeSelectorTerms are ORed, a term's requirements ANDed; an empty term
 * matches nothing (nodeaffinity: an empty selector term selects no
 * objects). */
static bool node_selector_matches(const json_t *terms, const json_t *node)
{
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *name = ks_nz(meta_str(node, "name"));
    size_t i;
    const json_t *term;
    json_array_foreach(terms, i, term)
    {
        const json_t *exprs = json_object_get(term, "matchExpressions");
        const json_t *fields = json_object_get(term, "matchFields");
        if (!json_array_size(exprs) && !json_array_size(fields))
            continue;
        bool ok = true;
        size_t j;
        const json_t *r;
        json_array_foreach(exprs, j, r)
        {
            const json_t *v =
                json_object_get(labels, ks_nz(json_string_value(json_object_get(r, "key"))));
            ok = ok && requirement_matches(r, json_string_value(v));
        }
        json_array_foreach(fields, j, r)
        {
            const char *k = ks_nz(json_string_value(json_object_get(r, "key")));
            ok = ok && strcmp(k, "metadata.name") == 0 && requirement_matches(r, name);
        }
        if (ok)
            return true;
    }
    return false;
}

/* A resource.Quantity in base units (cpu: cores), or -1 when it does not
 * parse. */
static double quantity(const char *s)
{
    static const struct {
        const char *sfx;
        double mul;
    } sfx[] = {{"Ki", 1024.0},
               {"Mi", 1048576.0},
               {"Gi", 1073741824.0},
               {"Ti", 1099511627776.0},
               {"Pi", 1125899906842624.0},
               {"Ei", 1152921504606846976.0},
               {"n", 1e-9},
               {"u", 1e-6},
               {"m", 1e-3},
               {"k", 1e3},
               {"M", 1e6},
               {"G", 1e9},
               {"T", 1e12},
               {"P", 1e15},
               {"E", 1e18},
               {"", 1.0}};
    if (!s || !*s)
        return -1;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s)
        return -1;
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++)
        if (strcmp(end, sfx[i].sfx) == 0)
            return v * sfx[i].mul;
    return -1; /* the exponent forms ("1e3") parse in strtod */
}

/* The Pod's request of each resource (resourcehelper.PodRequests without
 * sidecars or overhead): the containers' sum, at least each init
 * container's. @ref new: { name -> number } */
static json_t *pod_requests(const json_t *spec)
{
    json_t *sum = json_object();
    const char *k;
    json_t *v;
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
    {
        json_object_foreach(json_object_get(json_object_get(c, "resources"), "requests"), k, v)
        {
            double q = quantity(json_string_value(v));
            if (q > 0)
                json_object_set_new(sum, k,
                                    json_real(json_real_value(json_object_get(sum, k)) + q));
        }
    }
    json_array_foreach(json_object_get(spec, "initContainers"), i, c)
    {
        json_object_foreach(json_object_get(json_object_get(c, "resources"), "requests"), k, v)
        {
            double q = quantity(json_string_value(v));
            if (q > json_real_value(json_object_get(sum, k)))
                json_object_set_new(sum, k, json_real(q));
        }
    }
    return sum;
}

static void add_reason(json_t *reasons, char *owned)
{
    json_array_append_new(reasons, json_string(owned));
    free(owned);
}

/* Why node does not fit pod: the reasons of the first filter that fails
 * (appended to reasons; none: it fits), and whether preemption could help
 * (only when resources were short). */
static void filter_node(const json_t *pod, const json_t *node, const json_t *requests,
                        json_t *reasons, bool *resolvable)
{
    const json_t *spec = json_object_get(pod, "spec");
    const json_t *nspec = json_object_get(node, "spec");
    const json_t *tols = json_object_get(spec, "tolerations");
    *resolvable = false;
    /* NodeUnschedulable: unless the Pod tolerates the taint it stands for */
    if (json_is_true(json_object_get(nspec, "unschedulable"))) {
        json_t *taint = json_pack("{s:s,s:s}", "key", "node.kubernetes.io/unschedulable", "effect",
                                  "NoSchedule");
        bool ok = tolerates(tols, taint);
        json_decref(taint);
        if (!ok) {
            json_array_append_new(reasons, json_string("node(s) were unschedulable"));
            return;
        }
    }
    /* TaintToleration: the first NoSchedule or NoExecute taint not tolerated */
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(nspec, "taints"), i, t)
    {
        const char *eff = ks_nz(json_string_value(json_object_get(t, "effect")));
        if ((strcmp(eff, "NoSchedule") == 0 || strcmp(eff, "NoExecute") == 0) &&
            !tolerates(tols, t)) {
            add_reason(reasons, ks_printf("node(s) had untolerated taint {%s: %s}",
                                          ks_nz(json_string_value(json_object_get(t, "key"))),
                                          ks_nz(json_string_value(json_object_get(t, "value")))));
            return;
        }
    }
    /* NodeAffinity: nodeSelector, then the required node affinity */
    const json_t *labels = json_object_get(json_object_get(node, "metadata"), "labels");
    const char *k;
    const json_t *v;
    bool match = true;
    json_object_foreach((json_t *)json_object_get(spec, "nodeSelector"), k, v)
    {
        const json_t *have = json_object_get(labels, k);
        match = match && json_is_string(have) && json_is_string(v) &&
                strcmp(json_string_value(have), json_string_value(v)) == 0;
    }
    const json_t *required =
        json_object_get(json_object_get(json_object_get(spec, "affinity"), "nodeAffinity"),
                        "requiredDuringSchedulingIgnoredDuringExecution");
    if (match && json_is_object(required))
        match = node_selector_matches(json_object_get(required, "nodeSelectorTerms"), node);
    if (!match) {
        json_array_append_new(reasons,
                              json_string("node(s) didn't match Pod's node affinity/selector"));
        return;
    }
    /* NodeResourcesFit: cpu, memory, ephemeral-storage, then the others by
     * name; a resource the Node does not have is short */
    const json_t *alloc = json_object_get(json_object_get(node, "status"), "allocatable");
    static const char *const first[] = {"cpu", "memory", "ephemeral-storage"};
    for (size_t j = 0; j < 3; j++) {
        double want = json_real_value(json_object_get(requests, first[j]));
        double have = quantity(json_string_value(json_object_get(alloc, first[j])));
        if (want > 0 && want > (have < 0 ? 0 : have))
            add_reason(reasons, ks_printf("Insufficient %s", first[j]));
    }
    size_t n = 0;
    const char **names = ks_sorted_keys(requests, &n);
    for (size_t j = 0; j < n; j++) {
        if (strcmp(names[j], "cpu") == 0 || strcmp(names[j], "memory") == 0 ||
            strcmp(names[j], "ephemeral-storage") == 0)
            continue;
        double want = json_real_value(json_object_get(requests, names[j]));
        double have = quantity(json_string_value(json_object_get(alloc, names[j])));
        if (want > 0 && want > (have < 0 ? 0 : have))
            add_reason(reasons, ks_printf("Insufficient %s", names[j]));
    }
    free(names);
    *resolvable = json_array_size(reasons) > 0;
}

/* "N reason" for each reason of a histogram, sorted, joined by ", ". */
static char *histogram_text(const json_t *hist)
{
    size_t n = json_object_size(hist), i = 0;
    char **items = calloc(n ? n : 1, sizeof(*items));
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)hist, k, v)
    {
        items[i++] = ks_printf("%lld %s", (long long)json_integer_value(v), k);
    }
    qsort(items, n, sizeof(*items), ks_cmp_cstr);
    char *out = ks_strdup("");
    for (i = 0; i < n; i++) {
        char *next = ks_printf("%s%s%s", out, i ? ", " : "", items[i]);
        free(out);
        free(items[i]);
        out = next;
    }
    free(items);
    return out;
}

static void count(json_t *hist, const char *reason)
{
    json_object_set_new(hist, reason,
                        json_integer(json_integer_value(json_object_get(hist, reason)) + 1));
}

/* Sets (or replaces) the PodScheduled condition of pod; true if it
 * changed (the time moves only with the status). */
static bool set_scheduled(json_t *pod, const char *status, const char *reason, const char *message,
                          const char *now)
{
    json_t *st = ks_ensure_obj(pod, "status");
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(st, "conditions", conds);
    }
    json_t *c = ks_condition_in(conds, "PodScheduled");
    json_t *want = json_pack("{s:s,s:s,s:n,s:s}", "type", "PodScheduled", "status", status,
                             "lastProbeTime", "lastTransitionTime", now);
    if (reason)
        json_object_set_new(want, "reason", json_string(reason));
    if (message)
        json_object_set_new(want, "message", json_string(message));
    if (c && strcmp(ks_nz(json_string_value(json_object_get(c, "status"))), status) == 0)
        json_object_set(want, "lastTransitionTime", json_object_get(c, "lastTransitionTime"));
    if (c && json_equal(c, want)) {
        json_decref(want);
        return false;
    }
    if (c)
        json_object_update(c, want); /* reason and message go when the new one has none */
    if (c && !reason)
        json_object_del(c, "reason");
    if (c && !message)
        json_object_del(c, "message");
    if (!c)
        json_array_append(conds, want);
    json_decref(want);
    return true;
}

/* Lock held. The scheduler's cycle for pod (no spec.nodeName): bound to
 * the Node that fits with the fewest Pods (spec.nodeName, PodScheduled
 * True), or PodScheduled False with FitError's message. *changed: pod was
 * modified. true: bound. */
static bool schedule(struct ks_server *ks, json_t *pod, const char *now, bool *changed)
{
    json_t *requests = pod_requests(json_object_get(pod, "spec"));
    json_t *hist = json_object(), *post = json_object();
    const char *best = NULL;
    size_t best_pods = 0, nodes = 0;
    const char *name;
    json_t *node;
    json_object_foreach(ks_store_map(ks, "nodes"), name, node)
    {
        nodes++;
        json_t *reasons = json_array();
        bool resolvable = false;
        filter_node(pod, node, requests, reasons, &resolvable);
        size_t i;
        json_t *r;
        json_array_foreach(reasons, i, r)
        {
            count(hist, json_string_value(r));
        }
        if (json_array_size(reasons)) {
            count(post, resolvable ? "No preemption victims found for incoming pod"
                                   : "Preemption is not helpful for scheduling");
        } else {
            size_t pods = json_object_size(json_object_get(ks->pods_by_node, name));
            if (!best || pods < best_pods || (pods == best_pods && strcmp(name, best) < 0)) {
                best = name;
                best_pods = pods;
            }
        }
        json_decref(reasons);
    }
    json_decref(requests);
    bool bound = false;
    if (best) {
        json_object_set_new(ks_ensure_obj(pod, "spec"), "nodeName", json_string(best));
        set_scheduled(pod, "True", NULL, NULL, now);
        *changed = bound = true;
    } else {
        /* framework.FitError.Error(): the filters' histogram, then the
         * preemption's (PostFilter) */
        char *msg;
        if (nodes) {
            char *h = histogram_text(hist), *p = histogram_text(post);
            msg = ks_printf("0/%zu nodes are available: %s. preemption: 0/%zu nodes are "
                            "available: %s.",
                            nodes, h, nodes, p);
            free(h);
            free(p);
        } else {
            msg = ks_strdup("no nodes available to schedule pods");
        }
        *changed |= set_scheduled(pod, "False", "Unschedulable", msg, now);
        free(msg);
    }
    json_decref(hist);
    json_decref(post);
    return bound;
}

/* ---- the scheduler's Events (tools/events) ------------------------------------------------ */

static const struct ks_event_src scheduler_bind = {.component = DEFAULT_SCHEDULER,
                                                   .instance = DEFAULT_SCHEDULER "-" KS_NODE_NAME,
                                                   .action = "Binding",
                                                   .series = true};
static const struct ks_event_src scheduler_fail = {.component = DEFAULT_SCHEDULER,
                                                   .instance = DEFAULT_SCHEDULER "-" KS_NODE_NAME,
                                                   .action = "Scheduling",
                                                   .series = true};

void ks_node_placed_event(struct ks_server *ks, const json_t *pod, bool bound)
{
    if (!pod)
        return;
    if (bound) {
        char *msg =
            ks_printf("Successfully assigned %s/%s to %s", ks_nz(meta_str(pod, "namespace")),
                      ks_nz(meta_str(pod, "name")), ks_nz(spec_str(pod, "nodeName")));
        ks_record_event(ks, pod, &scheduler_bind, "Normal", "Scheduled", msg);
        free(msg);
        return;
    }
    const char *msg = json_string_value(json_object_get(
        ks_condition_in(json_object_get(json_object_get(pod, "status"), "conditions"),
                        "PodScheduled"),
        "message"));
    if (msg)
        ks_record_event(ks, pod, &scheduler_fail, "Warning", "FailedScheduling", msg);
}

/* ---- the passes ------------------------------------------------------------------------ */

/* A Pod being deleted that the kubelet has still to stop or delete. */
static bool needs_killing(const json_t *pod)
{
    return pod && meta_str(pod, "deletionTimestamp") &&
           strcmp(ks_nz(spec_str(pod, "nodeName")), KS_NODE_NAME) == 0 &&
           json_integer_value(json_object_get(json_object_get(pod, "metadata"),
                                              "deletionGracePeriodSeconds")) != 0;
}

/* Whether the scheduler or the kubelet has something to do for pod. */
static bool needs_placing(const json_t *pod)
{
    if (needs_killing(pod))
        return true;
    if (!pod || meta_str(pod, "deletionTimestamp"))
        return false;
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    if (phase && strcmp(phase, "Pending") != 0)
        return false;
    const char *node = spec_str(pod, "nodeName");
    if (node && *node)
        return strcmp(node, KS_NODE_NAME) == 0;
    const char *sched = spec_str(pod, "schedulerName");
    return (!sched || strcmp(sched, DEFAULT_SCHEDULER) == 0) &&
           !json_array_size(json_object_get(json_object_get(pod, "spec"), "schedulingGates"));
}

static json_t *ensure_map(json_t **m)
{
    if (!*m)
        *m = json_object();
    return *m;
}

void ks_nodes_changed(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                      const json_t *old, const json_t *obj)
{
    if (strcmp(def->key, "pods") == 0) {
        const char *was = old ? spec_str(old, "nodeName") : NULL;
        const char *now = obj ? spec_str(obj, "nodeName") : NULL;
        if (was && *was)
            ks_index_set(ensure_map(&ks->pods_by_node), was, obj_key, false);
        if (now && *now)
            ks_index_set(ensure_map(&ks->pods_by_node), now, obj_key, true);
        json_object_del(ensure_map(&ks->pods_unschedulable), obj_key);
        if (needs_ready_update(obj)) { /* the kubelet's status manager looks again */
            json_object_set_new(ensure_map(&ks->pods_to_place), obj_key, json_string("ready"));
            ks->pods_dirty = true;
            pthread_cond_broadcast(&ks->changed);
            return;
        }
        if (!needs_placing(obj)) {
            json_object_del(ensure_map(&ks->pods_to_place), obj_key);
            return;
        }
        const json_t *queued = json_object_get(ensure_map(&ks->pods_to_place), obj_key);
        if (!queued || json_is_string(queued))
            json_object_set_new(ks->pods_to_place, obj_key, json_true());
    } else if (strcmp(def->key, "leases.coordination.k8s.io") == 0 && !obj &&
               strcmp(obj_key, "kube-node-lease/" KS_NODE_NAME) == 0) {
        ks->nodes_dirty = true; /* the kubelet makes its Lease again */
    } else if (strcmp(def->key, "nodes") == 0) {
        /* the parked Pods try again (a retry: a FailedScheduling Event
         * when they still fit nowhere); the kubelet and the taints look */
        const char *k;
        json_t *unused;
        json_object_foreach(ensure_map(&ks->pods_unschedulable), k, unused)
        {
            json_object_set_new(ensure_map(&ks->pods_to_place), k, json_integer(1));
        }
        json_object_clear(ks->pods_unschedulable);
        ks->nodes_dirty = true;
    } else {
        return;
    }
    ks->pods_dirty = true;
    pthread_cond_broadcast(&ks->changed);
}

bool ks_node_place(struct ks_server *ks, json_t *pod)
{
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    bool changed = false;
    const char *node = spec_str(pod, "nodeName");
    if ((!node || !*node) && !schedule(ks, pod, now, &changed))
        return false;
    if (strcmp(ks_nz(spec_str(pod, "nodeName")), KS_NODE_NAME) == 0)
        kubelet_start(ks, pod, now);
    return true;
}

void ks_nodes_sync(struct ks_server *ks)
{
    const struct ks_res *ndef = ks_res_by_key(ks, "nodes");
    const struct ks_res *pdef = ks_res_by_key(ks, "pods");
    if (!ndef || !pdef)
        return;
    if (ks->nodes_dirty) {
        ks->nodes_dirty = false;
        register_node(ks);
        json_t *keys = ks_store_keys(ks, ndef->key);
        size_t i;
        json_t *kv;
        json_array_foreach(keys, i, kv)
        {
            const char *key = json_string_value(kv);
            const json_t *node = ks_store_get(ks, ndef->key, key);
            if (node)
                sync_node_taints(ks, ndef, key, node);
        }
        json_decref(keys);
    }
    json_t *todo = ks->pods_to_place;
    ks->pods_to_place = NULL;
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    const char *key;
    json_t *how;
    json_object_foreach(todo, key, how)
    {
        const json_t *pod = ks_store_get(ks, pdef->key, key);
        if (json_is_string(how) && needs_ready_update(pod)) { /* a gate's condition changed */
            json_t *next = json_deep_copy(pod);
            ready_with_gates(json_object_get(next, "spec"), json_object_get(next, "status"), now);
            ks_store_put(ks, pdef, key, next);
            continue;
        }
        if (!needs_placing(pod))
            continue;
        if (needs_killing(pod)) {
            kubelet_kill(ks, pdef, key, pod);
            continue;
        }
        const char *node = spec_str(pod, "nodeName");
        if (!node || !*node) {
            /* the scheduler: a binding (one write), or the reason it waits
             * (an Event when it is new or a retry found no Node either) */
            json_t *next = json_deep_copy(pod);
            bool changed = false;
            bool bound = schedule(ks, next, now, &changed);
            if (changed) {
                ks_typed_order(next);
                ks_store_put(ks, pdef, key, next);
            } else {
                json_decref(next);
            }
            pod = ks_store_get(ks, pdef->key, key);
            if (bound || changed || json_is_integer(how))
                ks_node_placed_event(ks, pod, bound);
            if (!bound) {
                json_object_del(ensure_map(&ks->pods_to_place), key);
                json_object_set_new(ensure_map(&ks->pods_unschedulable), key, json_true());
                continue;
            }
            if (!pod || strcmp(ks_nz(spec_str(pod, "nodeName")), KS_NODE_NAME) != 0)
                continue;
        }
        /* the kubelet: its status update (the next write) */
        json_t *next = json_deep_copy(pod);
        if (kubelet_start(ks, next, now)) {
            ks_typed_order(next);
            ks_store_put(ks, pdef, key, next);
        } else {
            json_decref(next);
        }
    }
    json_decref(todo);
}

/* kubelet config nodeStatusReportFrequency: an unchanged status is posted
 * again after 5 minutes (kubelet_node_status.go tryUpdateNodeStatus) */
#define STATUS_REPORT_MS (5 * 60 * 1000)

/* pkg/kubelet/nodelease: renewInterval is a quarter of the lease duration */
static long long lease_renew_ms(const struct ks_server *ks)
{
    return ks->node_lease_ms / 4;
}

long long ks_nodes_heartbeat(struct ks_server *ks, long long now_ms)
{
    const struct ks_res *ldef = ks_res_by_key(ks, "leases.coordination.k8s.io");
    const struct ks_res *ndef = ks_res_by_key(ks, "nodes");
    if (now_ms >= ks->lease_renew_ms) {
        ks->lease_renew_ms = now_ms + lease_renew_ms(ks);
        char key[512];
        ks_obj_key(key, sizeof(key), "kube-node-lease", KS_NODE_NAME);
        const json_t *lease = ldef ? ks_store_get(ks, ldef->key, key) : NULL;
        const char *holder =
            json_string_value(json_object_get(json_object_get(lease, "spec"), "holderIdentity"));
        if (lease && holder && strcmp(holder, KS_NODE_NAME) == 0) {
            char renew[40];
            ks_now_rfc3339_micro(renew, sizeof(renew));
            json_t *next = json_deep_copy(lease);
            json_object_set_new(json_object_get(next, "spec"), "renewTime", json_string(renew));
            ks_store_put(ks, ldef, key, next);
        }
    }
    if (now_ms >= ks->status_report_ms) {
        bool first = ks->status_report_ms == 0; /* registration posted it */
        ks->status_report_ms = now_ms + STATUS_REPORT_MS;
        const json_t *node = ndef ? ks_store_get(ks, ndef->key, KS_NODE_NAME) : NULL;
        if (node && !first) {
            char now[32];
            ks_now_rfc3339(now, sizeof(now));
            json_t *next = json_deep_copy(node);
            size_t i;
            json_t *c;
            json_array_foreach(json_object_get(json_object_get(next, "status"), "conditions"), i, c)
            {
                json_object_set_new(c, "lastHeartbeatTime", json_string(now));
            }
            ks_store_put(ks, ndef, KS_NODE_NAME, next);
        }
    }
    return ks->lease_renew_ms < ks->status_report_ms ? ks->lease_renew_ms : ks->status_report_ms;
}

void ks_nodes_start(struct ks_server *ks)
{
    ks->nodes_dirty = true;
    ks_nodes_sync(ks);
    /* the Lease was just made: renewed a quarter of its duration later */
    ks->lease_renew_ms = ks_mono_ms() + lease_renew_ms(ks);
    ks->status_report_ms = 0;
}
