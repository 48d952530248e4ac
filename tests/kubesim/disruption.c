/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's disruption controller (pkg/controller/disruption) and the check
 * the Pod eviction subresource makes against it
 * (pkg/registry/core/pod/storage/eviction.go).
 *
 * Each PodDisruptionBudget covers the Pods of its namespace its selector
 * selects (policy/v1: an empty selector selects them all). Its status:
 * expectedPods and desiredHealthy as getExpectedPodCount has them (an
 * integer minAvailable: the Pods' count and that number; a percentage or
 * maxUnavailable: the replicas of the Pods' controllers, a ReplicaSet's
 * Deployment when it has one, scaled with rounding up), currentHealthy (the
 * Ready Pods not being deleted and not evicted in the last two minutes),
 * disruptionsAllowed (currentHealthy - desiredHealthy, at least 0; 0 when
 * no Pod is expected), disruptedPods, observedGeneration and the
 * DisruptionAllowed condition (SufficientPods / InsufficientPods). The pass
 * runs when a Pod, ReplicaSet, Deployment or PDB changes and a PDB exists;
 * it writes only what changed.
 */
#include "kubesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PDB_KEY "poddisruptionbudgets.policy"
#define DELETION_TIMEOUT 120 /* disruption.DeletionTimeout: an eviction's hold */

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

void ks_disruption_changed(struct ks_server *ks, const struct ks_res *def)
{
    if (strcmp(def->key, "pods") != 0 && strcmp(def->key, PDB_KEY) != 0 &&
        strcmp(def->key, "replicasets.apps") != 0 && strcmp(def->key, "deployments.apps") != 0)
        return;
    if (json_object_size(ks_store_map(ks, PDB_KEY)) == 0)
        return;
    ks->pdb_dirty = true;
    pthread_cond_broadcast(&ks->changed);
}

/* intstr.GetScaledValueFromIntOrPercent(v, total, roundUp): -1 when v is
 * neither an integer nor "N%". */
static json_int_t scaled(const json_t *v, json_int_t total, bool round_up)
{
    if (json_is_integer(v))
        return json_integer_value(v);
    const char *s = json_string_value(v);
    char *end = NULL;
    long pct = s ? strtol(s, &end, 10) : 0;
    if (!s || end == s || strcmp(end, "%") != 0)
        return -1;
    json_int_t x = (json_int_t)pct * total;
    return round_up ? (x + 99) / 100 : x / 100;
}

/* The replicas of pod's controller (a ReplicaSet's Deployment when it has
 * one), named in key (for counting each once); -1 unmanaged. */
static json_int_t controller_scale(struct ks_server *ks, const json_t *pod, char *key, size_t size)
{
    const json_t *ref = ks_controller_ref(pod);
    if (!ref || strcmp(ks_nz(json_string_value(json_object_get(ref, "kind"))), "ReplicaSet") != 0)
        return -1;
    const char *ns = ks_nz(meta_str(pod, "namespace"));
    char rk[512];
    ks_obj_key(rk, sizeof(rk), ns, ks_nz(json_string_value(json_object_get(ref, "name"))));
    const json_t *rs = ks_store_get(ks, "replicasets.apps", rk);
    if (!rs)
        return -1;
    const json_t *target = rs;
    snprintf(key, size, "rs/%s", rk);
    const json_t *dref = ks_controller_ref(rs);
    if (dref &&
        strcmp(ks_nz(json_string_value(json_object_get(dref, "kind"))), "Deployment") == 0) {
        char dk[512];
        ks_obj_key(dk, sizeof(dk), ns, ks_nz(json_string_value(json_object_get(dref, "name"))));
        const json_t *dep = ks_store_get(ks, "deployments.apps", dk);
        if (dep) {
            target = dep;
            snprintf(key, size, "deploy/%s", dk);
        }
    }
    const json_t *r = json_object_get(json_object_get(target, "spec"), "replicas");
    return json_is_integer(r) ? json_integer_value(r) : 1;
}

static time_t parse_time(const char *s)
{
    struct tm tm = {0};
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return timegm(&tm);
}

/* Lock held. One PDB's status, written when it changed. */
static void sync_pdb(struct ks_server *ks, const struct ks_res *def, const char *key,
                     const json_t *pdb)
{
    const char *ns = ks_nz(meta_str(pdb, "namespace"));
    const json_t *spec = json_object_get(pdb, "spec");
    const json_t *sel = json_object_get(spec, "selector");
    const json_t *old_st = json_object_get(pdb, "status");
    time_t now_s = time(NULL);
    json_t *disrupted = json_object();
    json_int_t pods = 0, healthy = 0, expected_scale = 0;
    json_t *controllers = json_object();
    size_t nl = strlen(ns);
    const char *pk;
    json_t *pod;
    json_object_foreach(ks_store_map(ks, "pods"), pk, pod)
    {
        if (strncmp(pk, ns, nl) != 0 || pk[nl] != '/' || !json_is_object(sel) ||
            !ks_label_selector_matches(sel,
                                       json_object_get(json_object_get(pod, "metadata"), "labels")))
            continue;
        pods++;
        const char *name = ks_nz(meta_str(pod, "name"));
        const char *when =
            json_string_value(json_object_get(json_object_get(old_st, "disruptedPods"), name));
        bool held = when && !meta_str(pod, "deletionTimestamp") &&
                    now_s - parse_time(when) < DELETION_TIMEOUT;
        if (held)
            json_object_set_new(disrupted, name, json_string(when));
        if (!held && !meta_str(pod, "deletionTimestamp") && ks_pod_ready(pod))
            healthy++;
        char ck[600];
        json_int_t n = controller_scale(ks, pod, ck, sizeof(ck));
        if (n >= 0 && !json_object_get(controllers, ck)) {
            json_object_set_new(controllers, ck, json_true());
            expected_scale += n;
        }
    }
    json_decref(controllers);
    /* getExpectedPodCount */
    json_int_t expected = 0, desired = 0;
    const json_t *max_unavail = json_object_get(spec, "maxUnavailable");
    const json_t *min_avail = json_object_get(spec, "minAvailable");
    if (max_unavail && !json_is_null(max_unavail)) {
        expected = expected_scale;
        json_int_t mu = scaled(max_unavail, expected, true);
        desired = mu < 0 ? 0 : expected - mu;
        if (desired < 0)
            desired = 0;
    } else if (json_is_integer(min_avail)) {
        desired = json_integer_value(min_avail);
        expected = pods;
    } else if (json_is_string(min_avail)) {
        expected = expected_scale;
        json_int_t ma = scaled(min_avail, expected, true);
        desired = ma < 0 ? 0 : ma;
    }
    json_int_t allowed = healthy - desired;
    if (expected <= 0 || allowed <= 0)
        allowed = 0;
    json_int_t gen =
        json_integer_value(json_object_get(json_object_get(pdb, "metadata"), "generation"));
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    const char *cstatus = allowed > 0 ? "True" : "False";
    const char *reason = allowed > 0 ? "SufficientPods" : "InsufficientPods";
    /* apimeta.SetStatusCondition: the time moves with the status only */
    const json_t *oc = ks_condition_in(json_object_get(old_st, "conditions"), "DisruptionAllowed");
    const char *ltt = now;
    if (oc && strcmp(ks_nz(json_string_value(json_object_get(oc, "status"))), cstatus) == 0 &&
        json_string_value(json_object_get(oc, "lastTransitionTime")))
        ltt = json_string_value(json_object_get(oc, "lastTransitionTime"));
    json_t *st = json_pack(
        "{s:I,s:I,s:I,s:I,s:I,s:[{s:s,s:s,s:I,s:s,s:s,s:s}]}", "observedGeneration", gen,
        "disruptionsAllowed", allowed, "currentHealthy", healthy, "desiredHealthy", desired,
        "expectedPods", expected, "conditions", "type", "DisruptionAllowed", "status", cstatus,
        "observedGeneration", gen, "lastTransitionTime", ltt, "reason", reason, "message", "");
    if (json_object_size(disrupted))
        json_object_set(st, "disruptedPods", disrupted);
    json_decref(disrupted);
    ks_put_status(ks, def, key, pdb, st);
}

void ks_disruption_sync(struct ks_server *ks)
{
    const struct ks_res *def = ks_res_by_key(ks, PDB_KEY);
    if (!def)
        return;
    json_t *keys = ks_store_keys(ks, def->key);
    size_t i;
    json_t *kv;
    json_array_foreach(keys, i, kv)
    {
        const json_t *pdb = ks_store_get(ks, def->key, json_string_value(kv));
        if (pdb && !meta_str(pdb, "deletionTimestamp"))
            sync_pdb(ks, def, json_string_value(kv), pdb);
    }
    json_decref(keys);
}

int ks_eviction_admit(struct ks_server *ks, const json_t *pod, bool dry, struct ks_reply *r)
{
    const struct ks_res *def = ks_res_by_key(ks, PDB_KEY);
    const char *phase = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    /* canIgnorePDB: a terminal or Pending Pod, one being deleted */
    if (!def || meta_str(pod, "deletionTimestamp") ||
        (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0 ||
                   strcmp(phase, "Pending") == 0)))
        return 0;
    const char *ns = ks_nz(meta_str(pod, "namespace"));
    const json_t *labels = json_object_get(json_object_get(pod, "metadata"), "labels");
    size_t nl = strlen(ns);
    const char *match_key = NULL;
    int matches = 0;
    const char *k;
    json_t *pdb;
    json_object_foreach(ks_store_map(ks, def->key), k, pdb)
    {
        const json_t *sel = json_object_get(json_object_get(pdb, "spec"), "selector");
        if (strncmp(k, ns, nl) != 0 || k[nl] != '/' || !json_is_object(sel) ||
            !ks_label_selector_matches(sel, labels))
            continue;
        matches++;
        match_key = k;
    }
    if (matches == 0)
        return 0;
    char mkey[512];
    snprintf(mkey, sizeof(mkey), "%s", match_key);
    match_key = mkey;
    if (matches > 1) {
        ks_reply_status(r, 500, "InternalError",
                        "This pod has more than one PodDisruptionBudget, which the eviction "
                        "subresource does not support.",
                        NULL);
        return -1;
    }
    pdb = ks_store_get(ks, def->key, match_key);
    const json_t *st = json_object_get(pdb, "status");
    const char *name = ks_nz(meta_str(pdb, "name"));
    /* an unhealthy (not Ready) Pod does not count towards currentHealthy:
     * it goes without a disruption under unhealthyPodEvictionPolicy
     * AlwaysAllow, and under IfHealthyBudget (the default) while the
     * application is not disrupted (currentHealthy >= desiredHealthy > 0) */
    if (!ks_pod_ready(pod)) {
        const char *policy = json_string_value(
            json_object_get(json_object_get(pdb, "spec"), "unhealthyPodEvictionPolicy"));
        json_int_t healthy = json_integer_value(json_object_get(st, "currentHealthy"));
        json_int_t desired = json_integer_value(json_object_get(st, "desiredHealthy"));
        if ((policy && strcmp(policy, "AlwaysAllow") == 0) || (healthy >= desired && desired > 0))
            return 0;
    }
    json_int_t gen =
        json_integer_value(json_object_get(json_object_get(pdb, "metadata"), "generation"));
    const char *too_many = "Cannot evict pod as it would violate the pod's disruption budget.";
    if (json_integer_value(json_object_get(st, "observedGeneration")) < gen) {
        char *m =
            ks_printf("The disruption budget %s is still being processed by the server.", name);
        ks_reply_status(
            r, 429, "TooManyRequests", too_many,
            json_pack("{s:[{s:s,s:s}]}", "causes", "reason", "DisruptionBudget", "message", m));
        free(m);
        return -1;
    }
    json_int_t allowed = json_integer_value(json_object_get(st, "disruptionsAllowed"));
    if (allowed <= 0) {
        char *m =
            ks_printf("The disruption budget %s needs %lld healthy pods and has %lld "
                      "currently",
                      name, (long long)json_integer_value(json_object_get(st, "desiredHealthy")),
                      (long long)json_integer_value(json_object_get(st, "currentHealthy")));
        ks_reply_status(
            r, 429, "TooManyRequests", too_many,
            json_pack("{s:[{s:s,s:s}]}", "causes", "reason", "DisruptionBudget", "message", m));
        free(m);
        return -1;
    }
    /* checkAndDecrement: one disruption taken, the Pod held as disrupted
     * (a dry run: checked only) */
    if (dry)
        return 0;
    json_t *next = json_deep_copy(pdb);
    json_t *nst = ks_ensure_obj(next, "status");
    json_object_set_new(nst, "disruptionsAllowed", json_integer(allowed - 1));
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    json_object_set_new(ks_ensure_obj(nst, "disruptedPods"), ks_nz(meta_str(pod, "name")),
                        json_string(now));
    ks_typed_order(next);
    ks_store_put(ks, def, match_key, next);
    return 0;
}
