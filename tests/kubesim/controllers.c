/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim controllers, one thread: the garbage collector (background
 * cascade: an object whose ownerReferences all name missing owners is
 * deleted; foregroundDeletion and orphan finalizers are honoured), the
 * namespace controller (a terminating namespace loses its contents, then
 * itself), and a Deployment controller that sets status (replicas,
 * updated/ready/available, observedGeneration, Available/Progressing
 * conditions) --deployment-ready-delay after a spec change. It works on the
 * store directly, under ks->lock, and wakes on ks->changed.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

static const struct ks_res *def_by_key(struct ks_server *ks, const char *key)
{
    for (size_t i = 0; i < ks->ndefs; i++)
        if (strcmp(ks->defs[i]->key, key) == 0)
            return ks->defs[i];
    return NULL;
}

/* Lock held: delete as a client would (finalizers respected). */
static void delete_obj(struct ks_server *ks, const struct ks_res *def, const char *key)
{
    const json_t *cur = ks_store_get(ks, def->key, key);
    if (!cur)
        return;
    if (json_array_size(json_object_get(json_object_get(cur, "metadata"), "finalizers")) == 0) {
        ks_remove_object(ks, def, key);
        return;
    }
    if (meta_str(cur, "deletionTimestamp"))
        return;
    json_t *next = json_deep_copy(cur);
    json_t *md = json_object_get(next, "metadata");
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    json_object_set_new(md, "deletionTimestamp", json_string(now));
    json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
    if (json_is_integer(json_object_get(md, "generation")))
        json_object_set_new(
            md, "generation",
            json_integer(json_integer_value(json_object_get(md, "generation")) + 1));
    if (def->typed)
        ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

/* Lock held: drop one finalizer; removes the object when none is left. */
static void drop_finalizer(struct ks_server *ks, const struct ks_res *def, const char *key,
                           const char *fin)
{
    const json_t *cur = ks_store_get(ks, def->key, key);
    if (!cur)
        return;
    json_t *next = json_deep_copy(cur);
    json_t *md = json_object_get(next, "metadata");
    json_t *list = json_object_get(md, "finalizers");
    for (size_t i = json_array_size(list); i > 0; i--)
        if (strcmp(ks_nz(json_string_value(json_array_get(list, i - 1))), fin) == 0)
            json_array_remove(list, i - 1);
    if (json_array_size(list) == 0)
        json_object_del(md, "finalizers");
    bool gone = json_array_size(json_object_get(md, "finalizers")) == 0 &&
                meta_str(next, "deletionTimestamp");
    ks_store_put(ks, def, key, next);
    if (gone)
        ks_remove_object(ks, def, key);
}

struct action {
    const struct ks_res *def;
    char *key;
    int what; /* 0 delete, 1 drop foreground, 2 drop orphan (and strip refs), 3 namespace done,
               * 4 delete namespace contents, 5 delete dependents, 6 drop dangling refs */
};

static void run_gc(struct ks_server *ks)
{
    json_t *uids = json_object();
    json_t *ns_count = json_object();
    const char *rk, *key;
    json_t *map, *obj;
    json_object_foreach(ks->objects, rk, map)
    {
        json_object_foreach(map, key, obj)
        {
            const char *uid = meta_str(obj, "uid");
            if (uid)
                json_object_set_new(uids, uid, json_true());
            const char *ns = meta_str(obj, "namespace");
            if (ns) {
                json_int_t n = json_integer_value(json_object_get(ns_count, ns));
                json_object_set_new(ns_count, ns, json_integer(n + 1));
            }
        }
    }
    /* owner uid -> number of dependents */
    json_t *dependents = json_object();
    json_object_foreach(ks->objects, rk, map)
    {
        json_object_foreach(map, key, obj)
        {
            size_t i;
            json_t *ref;
            json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"),
                               i, ref)
            {
                const char *u = json_string_value(json_object_get(ref, "uid"));
                if (!u)
                    continue;
                json_int_t n = json_integer_value(json_object_get(dependents, u));
                json_object_set_new(dependents, u, json_integer(n + 1));
            }
        }
    }

    struct action *acts = NULL;
    size_t nacts = 0;
    json_object_foreach(ks->objects, rk, map)
    {
        const struct ks_res *def = def_by_key(ks, rk);
        if (!def)
            continue;
        json_object_foreach(map, key, obj)
        {
            int what = -1;
            const json_t *md = json_object_get(obj, "metadata");
            const json_t *refs = json_object_get(md, "ownerReferences");
            const char *uid = meta_str(obj, "uid");
            if (json_array_size(refs) && !meta_str(obj, "deletionTimestamp")) {
                bool all_missing = true, some_missing = false;
                size_t i;
                json_t *ref;
                json_array_foreach(refs, i, ref)
                {
                    const char *u = json_string_value(json_object_get(ref, "uid"));
                    if (u && json_object_get(uids, u))
                        all_missing = false;
                    else
                        some_missing = true;
                }
                if (all_missing)
                    what = 0;
                else if (some_missing)
                    what = 6; /* solid owners remain: drop the dangling references */
            }
            const char *ns_name = strcmp(rk, "namespaces") == 0 ? key : NULL;
            /* Dependents of an owner being deleted with foreground/orphan policy. */
            if (what < 0 && meta_str(obj, "deletionTimestamp")) {
                size_t i;
                json_t *f;
                json_array_foreach(json_object_get(md, "finalizers"), i, f)
                {
                    const char *fs = json_string_value(f);
                    if (fs && strcmp(fs, "foregroundDeletion") == 0 && uid &&
                        !json_object_get(dependents, uid))
                        what = 1;
                    if (fs && strcmp(fs, "orphan") == 0)
                        what = 2;
                }
                if (ns_name && !json_object_get(ns_count, ns_name))
                    what = 3;
                else if (ns_name)
                    what = 4; /* delete contents */
            }
            if (what < 0 && uid && json_object_get(dependents, uid) &&
                meta_str(obj, "deletionTimestamp")) {
                size_t i;
                json_t *f;
                json_array_foreach(json_object_get(md, "finalizers"), i, f)
                {
                    if (strcmp(ks_nz(json_string_value(f)), "foregroundDeletion") == 0)
                        what = 5; /* delete dependents */
                }
            }
            if (what < 0)
                continue;
            struct action *na = realloc(acts, (nacts + 1) * sizeof(*na));
            if (!na)
                abort();
            acts = na;
            acts[nacts].def = def;
            acts[nacts].key = ks_strdup(key);
            acts[nacts].what = what;
            nacts++;
        }
    }

    for (size_t a = 0; a < nacts; a++) {
        const struct ks_res *def = acts[a].def;
        const char *k = acts[a].key;
        const json_t *cur = ks_store_get(ks, def->key, k);
        const char *uid = cur ? meta_str(cur, "uid") : NULL;
        char *uidc = uid ? ks_strdup(uid) : NULL;
        switch (acts[a].what) {
        case 0:
            delete_obj(ks, def, k);
            break;
        case 1:
            drop_finalizer(ks, def, k, "foregroundDeletion");
            break;
        case 2:
        case 5: {
            /* Orphan: strip references; foreground: delete dependents. */
            for (size_t d = 0; uidc && d < ks->ndefs; d++) {
                const struct ks_res *dd = ks->defs[d];
                json_t *m = json_incref(ks_store_map(ks, dd->key));
                const char *dk;
                json_t *o;
                json_t *todo = json_array();
                json_object_foreach(m, dk, o)
                {
                    size_t i;
                    json_t *ref;
                    json_array_foreach(
                        json_object_get(json_object_get(o, "metadata"), "ownerReferences"), i, ref)
                    {
                        if (strcmp(ks_nz(json_string_value(json_object_get(ref, "uid"))), uidc) ==
                            0)
                            json_array_append_new(todo, json_string(dk));
                    }
                }
                size_t i;
                json_t *t;
                json_array_foreach(todo, i, t)
                {
                    const char *tk = json_string_value(t);
                    if (acts[a].what == 5) {
                        delete_obj(ks, dd, tk);
                        continue;
                    }
                    json_t *next = json_deep_copy(ks_store_get(ks, dd->key, tk));
                    json_t *md = json_object_get(next, "metadata");
                    json_t *refs = json_object_get(md, "ownerReferences");
                    for (size_t r = json_array_size(refs); r > 0; r--)
                        if (strcmp(ks_nz(json_string_value(
                                       json_object_get(json_array_get(refs, r - 1), "uid"))),
                                   uidc) == 0)
                            json_array_remove(refs, r - 1);
                    if (json_array_size(refs) == 0)
                        json_object_del(md, "ownerReferences");
                    ks_store_put(ks, dd, tk, next);
                }
                json_decref(todo);
                json_decref(m);
            }
            if (acts[a].what == 2)
                drop_finalizer(ks, def, k, "orphan");
            break;
        }
        case 3: {
            json_t *next = json_deep_copy(cur);
            json_object_del(json_object_get(next, "spec"), "finalizers");
            ks_store_put(ks, def, k, next);
            if (json_array_size(json_object_get(json_object_get(next, "metadata"), "finalizers")) ==
                0)
                ks_remove_object(ks, def, k);
            break;
        }
        case 6: {
            /* As the garbage collector does when some owners remain. */
            json_t *next = json_deep_copy(cur);
            json_t *refs = json_object_get(json_object_get(next, "metadata"), "ownerReferences");
            for (size_t r = json_array_size(refs); r > 0; r--) {
                const char *u =
                    json_string_value(json_object_get(json_array_get(refs, r - 1), "uid"));
                if (!u || !json_object_get(uids, u))
                    json_array_remove(refs, r - 1);
            }
            if (next)
                ks_store_put(ks, def, k, next);
            break;
        }
        case 4:
            for (size_t d = 0; d < ks->ndefs; d++) {
                const struct ks_res *dd = ks->defs[d];
                if (!dd->namespaced)
                    continue;
                json_t *m = json_incref(ks_store_map(ks, dd->key));
                json_t *todo = json_array();
                const char *dk;
                json_t *o;
                json_object_foreach(m, dk, o)
                {
                    if (strcmp(ks_nz(meta_str(o, "namespace")), k) == 0)
                        json_array_append_new(todo, json_string(dk));
                }
                size_t i;
                json_t *t;
                json_array_foreach(todo, i, t)
                {
                    delete_obj(ks, dd, json_string_value(t));
                }
                json_decref(todo);
                json_decref(m);
            }
            break;
        default:
            break;
        }
        free(uidc);
        free(acts[a].key);
    }
    if (nacts)
        ks->gc_dirty = true; /* another pass sees the consequences */
    free(acts);
    json_decref(uids);
    json_decref(ns_count);
    json_decref(dependents);
}

/* ---- deployments ------------------------------------------------------------ */

static json_int_t want_replicas(const json_t *obj)
{
    const json_t *r = json_object_get(json_object_get(obj, "spec"), "replicas");
    return json_is_integer(r) ? json_integer_value(r) : 1;
}

static bool deployment_settled(const json_t *obj)
{
    const json_t *st = json_object_get(obj, "status");
    json_int_t gen =
        json_integer_value(json_object_get(json_object_get(obj, "metadata"), "generation"));
    json_int_t n = want_replicas(obj);
    return json_integer_value(json_object_get(st, "observedGeneration")) == gen &&
           json_integer_value(json_object_get(st, "readyReplicas")) == n &&
           json_integer_value(json_object_get(st, "replicas")) == n &&
           json_integer_value(json_object_get(st, "availableReplicas")) == n &&
           json_integer_value(json_object_get(st, "updatedReplicas")) == n;
}

void ks_controllers_deployment_changed(struct ks_server *ks, const char *obj_key)
{
    const json_t *obj = ks_store_get(ks, "deployments.apps", obj_key);
    if (!obj || meta_str(obj, "deletionTimestamp") || deployment_settled(obj)) {
        json_object_del(ks->pending_deploy, obj_key);
        return;
    }
    if (!json_object_get(ks->pending_deploy, obj_key))
        json_object_set_new(ks->pending_deploy, obj_key,
                            json_integer(ks_mono_ms() + ks->ready_delay_ms));
    pthread_cond_broadcast(&ks->changed);
}

static json_t *condition(const json_t *old_conds, const char *type, const char *reason,
                         const char *message, const char *now)
{
    const char *ltt = now;
    size_t i;
    json_t *c;
    json_array_foreach(old_conds, i, c)
    {
        if (strcmp(ks_nz(json_string_value(json_object_get(c, "type"))), type) == 0 &&
            strcmp(ks_nz(json_string_value(json_object_get(c, "status"))), "True") == 0 &&
            json_string_value(json_object_get(c, "lastTransitionTime")))
            ltt = json_string_value(json_object_get(c, "lastTransitionTime"));
    }
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", "True", "lastUpdateTime",
                     now, "lastTransitionTime", ltt, "reason", reason, "message", message);
}

static void settle_deployment(struct ks_server *ks, const char *key)
{
    const struct ks_res *def = def_by_key(ks, "deployments.apps");
    const json_t *cur = ks_store_get(ks, "deployments.apps", key);
    if (!def || !cur || meta_str(cur, "deletionTimestamp") || deployment_settled(cur))
        return;
    json_t *next = json_deep_copy(cur);
    json_int_t n = want_replicas(cur);
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    const json_t *old_conds = json_object_get(json_object_get(cur, "status"), "conditions");
    json_t *st = json_object();
    json_object_set_new(st, "observedGeneration",
                        json_integer(json_integer_value(
                            json_object_get(json_object_get(cur, "metadata"), "generation"))));
    if (n) {
        json_object_set_new(st, "replicas", json_integer(n));
        json_object_set_new(st, "updatedReplicas", json_integer(n));
        json_object_set_new(st, "readyReplicas", json_integer(n));
        json_object_set_new(st, "availableReplicas", json_integer(n));
    }
    char *rs = ks_printf("ReplicaSet \"%s-%s\" has successfully progressed.",
                         ks_nz(meta_str(cur, "name")), "5d8f9c7b6d");
    json_t *conds = json_array();
    json_array_append_new(conds, condition(old_conds, "Available", "MinimumReplicasAvailable",
                                           "Deployment has minimum availability.", now));
    json_array_append_new(conds,
                          condition(old_conds, "Progressing", "NewReplicaSetAvailable", rs, now));
    free(rs);
    json_object_set_new(st, "conditions", conds);
    json_object_set_new(next, "status", st);
    json_t *md = json_object_get(next, "metadata");
    json_t *ann = json_object_get(md, "annotations");
    if (!json_is_object(ann)) {
        ann = json_object();
        json_object_set_new(md, "annotations", ann);
    }
    if (!json_object_get(ann, "deployment.kubernetes.io/revision"))
        json_object_set_new(ann, "deployment.kubernetes.io/revision", json_string("1"));
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

static void *controller_main(void *arg)
{
    struct ks_server *ks = arg;
    pthread_mutex_lock(&ks->lock);
    while (!ks->stopping) {
        long long now = ks_mono_ms();
        if (ks->gc_dirty || (ks->gc_lazy && now >= ks->gc_next_ms)) {
            ks->gc_dirty = false;
            ks->gc_lazy = false;
            run_gc(ks);
            ks->gc_next_ms = now + 100;
        }
        long long wake = now + 1000;
        if (ks->gc_lazy && ks->gc_next_ms < wake)
            wake = ks->gc_next_ms;
        json_t *due = json_array();
        const char *key;
        json_t *when;
        json_object_foreach(ks->pending_deploy, key, when)
        {
            long long t = json_integer_value(when);
            if (t <= now)
                json_array_append_new(due, json_string(key));
            else if (t < wake)
                wake = t;
        }
        size_t i;
        json_t *k;
        json_array_foreach(due, i, k)
        {
            json_object_del(ks->pending_deploy, json_string_value(k));
            settle_deployment(ks, json_string_value(k));
        }
        json_decref(due);
        if (ks->gc_dirty)
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long long delay = wake - now;
        if (delay < 1)
            delay = 1;
        ts.tv_sec += delay / 1000;
        ts.tv_nsec += (delay % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&ks->changed, &ks->lock, &ts);
    }
    pthread_mutex_unlock(&ks->lock);
    return NULL;
}

int ks_controllers_start(struct ks_server *ks)
{
    ks->pending_deploy = json_object();
    int rc = pthread_create(&ks->controller, NULL, controller_main, ks);
    return rc == 0 ? 0 : -rc;
}

void ks_controllers_stop(struct ks_server *ks)
{
    pthread_mutex_lock(&ks->lock);
    ks->stopping = true;
    pthread_cond_broadcast(&ks->changed);
    pthread_mutex_unlock(&ks->lock);
    pthread_join(ks->controller, NULL);
    json_decref(ks->pending_deploy);
    ks->pending_deploy = NULL;
}
