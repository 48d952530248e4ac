/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim controllers, one thread: the garbage collector (background
 * cascade: an object whose ownerReferences all name missing owners is
 * deleted; foregroundDeletion and orphan finalizers are honoured), the
 * namespace controller (a terminating namespace loses its contents, then
 * itself), and a Deployment controller that, --deployment-ready-delay after
 * a spec change, makes the ReplicaSet of the pod template current (named
 * NAME-HASH, labelled pod-template-hash=HASH, owned by the Deployment, the
 * next deployment.kubernetes.io/revision; one of an earlier template is
 * taken up again, as a rollback does), scales the Deployment's other
 * ReplicaSets to 0, and sets the Deployment's status from the current
 * ReplicaSet's Pods (replicas, updated/ready/available, observedGeneration,
 * Available/Progressing conditions), again whenever that ReplicaSet's
 * status changes; a ReplicaSet controller that keeps each ReplicaSet's
 * Pods (made running: the scheduler and the kubelet of nodes.c in one
 * step) and its status; and the passes of nodes.c. The controllers write
 * their Events through recorder.c. It works
 * on the store directly, under ks->lock, and wakes on ks->changed.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *meta_str(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), k));
}

/* Lock held: delete as a client would (finalizers respected; a Pod on a
 * Node with its grace period: its kubelet finishes the delete). */
static void delete_obj(struct ks_server *ks, const struct ks_res *def, const char *key)
{
    const json_t *cur = ks_store_get(ks, def->key, key);
    if (!cur)
        return;
    json_int_t grace = strcmp(def->key, "pods") == 0 ? ks_pod_grace(cur, NULL) : 0;
    if (grace > 0) {
        if (meta_str(cur, "deletionTimestamp"))
            return; /* under way */
        json_t *next = json_deep_copy(cur);
        ks_pod_mark_terminating(next, grace);
        ks_typed_order(next);
        ks_store_put(ks, def, key, next);
        return;
    }
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

/* What the garbage collector does to one object. */
enum gc_what {
    GC_NONE = -1,
    GC_DELETE,             /* every owner is gone */
    GC_DROP_FOREGROUND,    /* foreground deletion done: drop the finalizer */
    GC_ORPHAN,             /* orphan finalizer: strip dependents' refs, drop it */
    GC_NAMESPACE_DONE,     /* a terminating namespace is empty */
    GC_NAMESPACE_CONTENTS, /* a terminating namespace: delete what is in it */
    GC_DELETE_DEPENDENTS,  /* foreground deletion: delete the dependents */
    GC_DROP_DANGLING,      /* some owners remain: drop the dangling refs */
};

struct action {
    const struct ks_res *def;
    char *key;
    enum gc_what what;
};

/* What the collector needs to know about the whole store (@ref new
 * each): the uids present, the number of objects per namespace, and the
 * number of dependents per owner uid. Lock held. */
struct gc_index {
    json_t *uids;
    json_t *ns_count;
    json_t *dependents;
};

static void count_up(json_t *counts, const char *k)
{
    json_int_t n = json_integer_value(json_object_get(counts, k));
    json_object_set_new(counts, k, json_integer(n + 1));
}

static void gc_index_build(struct ks_server *ks, struct gc_index *ix)
{
    ix->uids = json_object();
    ix->ns_count = json_object();
    ix->dependents = json_object();
    const char *rk, *key;
    json_t *map, *obj;
    json_object_foreach(ks->objects, rk, map)
    {
        json_object_foreach(map, key, obj)
        {
            const char *uid = meta_str(obj, "uid");
            if (uid)
                json_object_set_new(ix->uids, uid, json_true());
            const char *ns = meta_str(obj, "namespace");
            if (ns)
                count_up(ix->ns_count, ns);
            size_t i;
            json_t *ref;
            json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "ownerReferences"),
                               i, ref)
            {
                const char *u = json_string_value(json_object_get(ref, "uid"));
                if (u)
                    count_up(ix->dependents, u);
            }
        }
    }
}

static void gc_index_free(struct gc_index *ix)
{
    json_decref(ix->uids);
    json_decref(ix->ns_count);
    json_decref(ix->dependents);
}

static bool has_finalizer(const json_t *md, const char *name)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(md, "finalizers"), i, f)
    {
        if (strcmp(ks_nz(json_string_value(f)), name) == 0)
            return true;
    }
    return false;
}

/* The action for one object (rk: its resource key, key: its object key). */
static enum gc_what gc_decide(const struct gc_index *ix, const char *rk, const char *key,
                              const json_t *obj)
{
    const json_t *md = json_object_get(obj, "metadata");
    const json_t *refs = json_object_get(md, "ownerReferences");
    const char *uid = meta_str(obj, "uid");
    bool deleting = meta_str(obj, "deletionTimestamp") != NULL;
    if (json_array_size(refs) && !deleting) {
        bool all_missing = true, some_missing = false;
        size_t i;
        json_t *ref;
        json_array_foreach(refs, i, ref)
        {
            const char *u = json_string_value(json_object_get(ref, "uid"));
            if (u && json_object_get(ix->uids, u))
                all_missing = false;
            else
                some_missing = true;
        }
        if (all_missing)
            return GC_DELETE;
        if (some_missing)
            return GC_DROP_DANGLING;
    }
    if (!deleting)
        return GC_NONE;
    bool has_dependents = uid && json_object_get(ix->dependents, uid);
    /* An owner being deleted with the foreground or orphan policy (the last
     * of its finalizers that says so decides); a terminating namespace. */
    if (strcmp(rk, "namespaces") == 0) {
        if (json_object_get(ix->ns_count, key))
            return GC_NAMESPACE_CONTENTS;
        /* empty: the namespace controller finalizes it once (its
         * spec.finalizers emptied); the registry deletes it when no
         * metadata finalizer is left either (a client removes those) */
        if (json_array_size(json_object_get(json_object_get(obj, "spec"), "finalizers")) ||
            !json_array_size(json_object_get(md, "finalizers")))
            return GC_NAMESPACE_DONE;
        return GC_NONE;
    }
    enum gc_what what = GC_NONE;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(md, "finalizers"), i, f)
    {
        const char *fs = ks_nz(json_string_value(f));
        if (strcmp(fs, "foregroundDeletion") == 0 && uid && !has_dependents)
            what = GC_DROP_FOREGROUND;
        if (strcmp(fs, "orphan") == 0)
            what = GC_ORPHAN;
    }
    if (what == GC_NONE && has_dependents && has_finalizer(md, "foregroundDeletion"))
        what = GC_DELETE_DEPENDENTS;
    return what;
}

/* The actions of one pass over the store. Lock held. */
static struct action *gc_plan(struct ks_server *ks, const struct gc_index *ix, size_t *ret_n)
{
    struct action *acts = NULL;
    size_t nacts = 0;
    const char *rk, *key;
    json_t *map, *obj;
    json_object_foreach(ks->objects, rk, map)
    {
        const struct ks_res *def = ks_res_by_key(ks, rk);
        if (!def)
            continue;
        json_object_foreach(map, key, obj)
        {
            enum gc_what what = gc_decide(ix, rk, key, obj);
            if (what == GC_NONE)
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
    *ret_n = nacts;
    return acts;
}

/* Keys in def's map of the objects that list owner_uid as an owner. @ref new */
static json_t *dependents_of(struct ks_server *ks, const struct ks_res *def, const char *owner_uid)
{
    json_t *todo = json_array();
    const char *dk;
    json_t *o;
    json_object_foreach((json_t *)ks_store_map(ks, def->key), dk, o)
    {
        size_t i;
        json_t *ref;
        json_array_foreach(json_object_get(json_object_get(o, "metadata"), "ownerReferences"), i,
                           ref)
        {
            if (strcmp(ks_nz(json_string_value(json_object_get(ref, "uid"))), owner_uid) == 0)
                json_array_append_new(todo, json_string(dk));
        }
    }
    return todo;
}

/* Removes the references to owner_uid from an object. Lock held. */
static void strip_owner(struct ks_server *ks, const struct ks_res *def, const char *key,
                        const char *owner_uid)
{
    json_t *next = json_deep_copy(ks_store_get(ks, def->key, key));
    json_t *md = json_object_get(next, "metadata");
    json_t *refs = json_object_get(md, "ownerReferences");
    for (size_t r = json_array_size(refs); r > 0; r--)
        if (strcmp(ks_nz(json_string_value(json_object_get(json_array_get(refs, r - 1), "uid"))),
                   owner_uid) == 0)
            json_array_remove(refs, r - 1);
    if (json_array_size(refs) == 0)
        json_object_del(md, "ownerReferences");
    ks_store_put(ks, def, key, next);
}

/* The dependents of owner_uid, in every resource: deleted (foreground) or
 * orphaned (their references to it removed). Lock held. */
static void release_dependents(struct ks_server *ks, const char *owner_uid, bool delete)
{
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *dd = ks->defs[d];
        json_t *todo = dependents_of(ks, dd, owner_uid);
        size_t i;
        json_t *t;
        json_array_foreach(todo, i, t)
        {
            if (delete)
                delete_obj(ks, dd, json_string_value(t));
            else
                strip_owner(ks, dd, json_string_value(t), owner_uid);
        }
        json_decref(todo);
    }
}

/*
 * The namespace controller's status conditions (kubernetes pkg/controller/
 * namespace/deletion: namespaced_resources_deleter.go deleteAllContent and
 * deleteAllContentForGroupVersionResource, status_condition_utils.go):
 * each pass over a terminating namespace's content ends with the five
 * condition types, in this order, the "ok" variant (False) of each that
 * found nothing wrong. Discovery and group versions never fail here. What
 * is left after the deletes counts per resource ("configmaps. has 1
 * resource instances": resource.group, the core group empty) and per
 * finalizer of the items left; a resource whose items are left with no
 * finalizer and no pod grace period to wait for is a content failure.
 */
static const char *const ns_cond_types[] = {
    "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
    "NamespaceDeletionContentFailure",   "NamespaceContentRemaining",
    "NamespaceFinalizersRemaining",
};
static const char *const ns_ok_reasons[] = {"ResourcesDiscovered", "ParsedGroupVersions",
                                            "ContentDeleted", "ContentRemoved", "ContentRemoved"};
static const char *const ns_ok_messages[] = {
    "All resources successfully discovered",
    "All legacy kube types successfully parsed",
    "All content successfully deleted, may be waiting on finalization",
    "All content successfully removed",
    "All content successfully removed",
};

static time_t rfc3339_secs(const char *s)
{
    struct tm tm = {0};
    if (!s || !strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return timegm(&tm);
}

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* list's strings sorted (sort.Strings), joined by ", ". malloc'd */
static char *sorted_join(const json_t *list)
{
    size_t n = json_array_size(list);
    const char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        abort();
    for (size_t i = 0; i < n; i++)
        v[i] = json_string_value(json_array_get(list, i));
    qsort(v, n, sizeof(*v), str_cmp);
    json_t *sorted = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(sorted, json_string(v[i]));
    free(v);
    char *out = ks_join(sorted, "", ", ", "");
    json_decref(sorted);
    return out;
}

/* estimateGracefulTerminationForPods, then estimateGracefulTermination:
 * the longest terminationGracePeriodSeconds of the namespace's pods not
 * Succeeded or Failed, 0 once that long has passed since the namespace's
 * deletion. Lock held. */
static json_int_t pods_estimate(struct ks_server *ks, const char *ns, time_t deleted_at)
{
    json_int_t est = 0;
    const char *k;
    json_t *o;
    json_object_foreach((json_t *)ks_store_map(ks, "pods"), k, o)
    {
        if (strcmp(ks_nz(meta_str(o, "namespace")), ns) != 0)
            continue;
        const char *phase =
            json_string_value(json_object_get(json_object_get(o, "status"), "phase"));
        if (phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0))
            continue;
        const json_t *g =
            json_object_get(json_object_get(o, "spec"), "terminationGracePeriodSeconds");
        if (json_is_integer(g) && json_integer_value(g) > est)
            est = json_integer_value(g);
    }
    return (json_int_t)(time(NULL) - deleted_at) >= est ? 0 : est;
}

/* The conditions one pass over namespace ns's content ends with (after its
 * deletes): a JSON array in ns_cond_types' order. Lock held. @ref new */
static json_t *namespace_conditions(struct ks_server *ks, const char *ns, time_t deleted_at)
{
    json_t *remaining = json_array(), *failures = json_array();
    json_t *by_finalizer = json_object();
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *dd = ks->defs[d];
        if (!dd->namespaced || dd->create_only)
            continue;
        size_t n = 0;
        bool finalizers = false;
        const char *k;
        json_t *o;
        json_object_foreach((json_t *)ks_store_map(ks, dd->key), k, o)
        {
            if (strcmp(ks_nz(meta_str(o, "namespace")), ns) != 0)
                continue;
            n++;
            size_t i;
            json_t *f;
            json_array_foreach(json_object_get(json_object_get(o, "metadata"), "finalizers"), i, f)
            {
                const char *fs = ks_nz(json_string_value(f));
                json_object_set_new(
                    by_finalizer, fs,
                    json_integer(json_integer_value(json_object_get(by_finalizer, fs)) + 1));
                finalizers = true;
            }
        }
        if (!n)
            continue;
        json_array_append_new(
            remaining, json_sprintf("%s.%s has %zu resource instances", dd->plural, dd->group, n));
        bool waiting = strcmp(dd->key, "pods") == 0 && pods_estimate(ks, ns, deleted_at) > 0;
        if (!finalizers && !waiting) {
            const char *ver = dd->nversions ? dd->versions[0].name : "";
            for (size_t v = 0; v < dd->nversions; v++) {
                if (dd->versions[v].served) {
                    ver = dd->versions[v].name;
                    break;
                }
            }
            /* schema.GroupVersionResource's String() */
            json_array_append_new(failures,
                                  json_sprintf("unexpected items still remain in namespace: %s "
                                               "for gvr: %s/%s, Resource=%s",
                                               ns, dd->group, ver, dd->plural));
        }
    }
    json_t *fins = json_array();
    const char *fk;
    json_t *fv;
    json_object_foreach(by_finalizer, fk, fv)
    {
        json_array_append_new(fins,
                              json_sprintf("%s in %" JSON_INTEGER_FORMAT " resource instances", fk,
                                           json_integer_value(fv)));
    }
    json_t *conds = json_array();
    for (size_t t = 0; t < sizeof(ns_cond_types) / sizeof(ns_cond_types[0]); t++) {
        const char *reason = ns_ok_reasons[t];
        char *msg = NULL;
        if (t == 2 && json_array_size(failures)) {
            char *j = sorted_join(failures);
            reason = "ContentDeletionFailed";
            msg = ks_printf("Failed to delete all resource types, %zu remaining: %s",
                            json_array_size(failures), j);
            free(j);
        } else if (t == 3 && json_array_size(remaining)) {
            char *j = sorted_join(remaining);
            reason = "SomeResourcesRemain";
            msg = ks_printf("Some resources are remaining: %s", j);
            free(j);
        } else if (t == 4 && json_array_size(fins)) {
            char *j = sorted_join(fins);
            reason = "SomeFinalizerRemain";
            msg = ks_printf("Some finalizers are remaining: %s", j);
            free(j);
        }
        /* NamespaceCondition's order: type, status, lastTransitionTime,
         * reason, message (the time is set when it is written) */
        json_array_append_new(conds,
                              json_pack("{s:s,s:s,s:n,s:s,s:s}", "type", ns_cond_types[t], "status",
                                        msg ? "True" : "False", "lastTransitionTime", "reason",
                                        reason, "message", msg ? msg : ns_ok_messages[t]));
        free(msg);
    }
    json_decref(remaining);
    json_decref(failures);
    json_decref(by_finalizer);
    json_decref(fins);
    return conds;
}

/* updateConditions (status_condition_utils.go): each new condition is
 * appended when its type is missing; an existing one takes the new
 * status, reason and message, and a new lastTransitionTime only when its
 * status changes. The namespace's status written when anything changed
 * (UpdateStatus). Lock held. */
static void namespace_set_conditions(struct ks_server *ks, const struct ks_res *def,
                                     const char *key, const json_t *cur)
{
    const char *ns = ks_nz(meta_str(cur, "name"));
    json_t *fresh = namespace_conditions(ks, ns, rfc3339_secs(meta_str(cur, "deletionTimestamp")));
    json_t *st = json_deep_copy(json_object_get(cur, "status"));
    if (!json_is_object(st)) {
        json_decref(st);
        st = json_object();
    }
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(st, "conditions", conds);
    }
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    size_t i;
    json_t *nc;
    json_array_foreach(fresh, i, nc)
    {
        const char *type = json_string_value(json_object_get(nc, "type"));
        json_t *oc = ks_condition_in(conds, type);
        if (!oc) {
            json_object_set_new(nc, "lastTransitionTime", json_string(now));
            json_array_append(conds, nc);
            continue;
        }
        static const char *const fields[] = {"status", "reason", "message"};
        if (!json_equal(json_object_get(oc, "status"), json_object_get(nc, "status")))
            json_object_set_new(oc, "lastTransitionTime", json_string(now));
        for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++)
            json_object_set(oc, fields[f], json_object_get(nc, fields[f]));
    }
    json_decref(fresh);
    ks_put_status(ks, def, key, cur, st);
}

/* A terminating namespace is empty: its spec.finalizers go, then it. */
static void namespace_done(struct ks_server *ks, const struct ks_res *def, const char *key,
                           const json_t *cur)
{
    /* deleteAllContent's last pass found nothing left: the conditions say
     * so before the namespace is finalized */
    namespace_set_conditions(ks, def, key, cur);
    cur = ks_store_get(ks, def->key, key);
    json_t *next = json_deep_copy(cur);
    json_object_del(json_object_get(next, "spec"), "finalizers");
    ks_store_put(ks, def, key, next);
    if (json_array_size(json_object_get(json_object_get(next, "metadata"), "finalizers")) == 0)
        ks_remove_object(ks, def, key);
}

/* Deletes every object in namespace ns. Lock held. */
static void delete_namespace_contents(struct ks_server *ks, const char *ns)
{
    for (size_t d = 0; d < ks->ndefs; d++) {
        const struct ks_res *dd = ks->defs[d];
        if (!dd->namespaced)
            continue;
        json_t *todo = json_array();
        const char *dk;
        json_t *o;
        json_object_foreach((json_t *)ks_store_map(ks, dd->key), dk, o)
        {
            if (strcmp(ks_nz(meta_str(o, "namespace")), ns) == 0)
                json_array_append_new(todo, json_string(dk));
        }
        size_t i;
        json_t *t;
        json_array_foreach(todo, i, t)
        {
            delete_obj(ks, dd, json_string_value(t));
        }
        json_decref(todo);
    }
}

/* As the garbage collector does when some owners remain: the references to
 * owners that are gone are dropped. */
static void drop_dangling(struct ks_server *ks, const struct ks_res *def, const char *key,
                          const json_t *cur, const json_t *uids)
{
    json_t *next = json_deep_copy(cur);
    json_t *refs = json_object_get(json_object_get(next, "metadata"), "ownerReferences");
    for (size_t r = json_array_size(refs); r > 0; r--) {
        const char *u = json_string_value(json_object_get(json_array_get(refs, r - 1), "uid"));
        if (!u || !json_object_get(uids, u))
            json_array_remove(refs, r - 1);
    }
    if (next)
        ks_store_put(ks, def, key, next);
}

static void gc_apply(struct ks_server *ks, const struct gc_index *ix, const struct action *act)
{
    const struct ks_res *def = act->def;
    const char *k = act->key;
    const json_t *cur = ks_store_get(ks, def->key, k);
    char *uid = cur && meta_str(cur, "uid") ? ks_strdup(meta_str(cur, "uid")) : NULL;
    switch (act->what) {
    case GC_DELETE:
        delete_obj(ks, def, k);
        break;
    case GC_DROP_FOREGROUND:
        drop_finalizer(ks, def, k, "foregroundDeletion");
        break;
    case GC_ORPHAN:
        if (uid)
            release_dependents(ks, uid, false);
        drop_finalizer(ks, def, k, "orphan");
        break;
    case GC_DELETE_DEPENDENTS:
        if (uid)
            release_dependents(ks, uid, true);
        break;
    case GC_NAMESPACE_DONE:
        namespace_done(ks, def, k, cur);
        break;
    case GC_NAMESPACE_CONTENTS:
        delete_namespace_contents(ks, k);
        cur = ks_store_get(ks, def->key, k);
        if (cur)
            namespace_set_conditions(ks, def, k, cur);
        break;
    case GC_DROP_DANGLING:
        drop_dangling(ks, def, k, cur, ix->uids);
        break;
    case GC_NONE:
    default:
        break;
    }
    free(uid);
}

/* One pass of the garbage collector and the namespace controller: plan on
 * a snapshot of the store, then act; another pass follows when anything
 * was done. Lock held. */
static void run_gc(struct ks_server *ks)
{
    struct gc_index ix;
    gc_index_build(ks, &ix);
    size_t nacts = 0;
    struct action *acts = gc_plan(ks, &ix, &nacts);
    uint64_t rv = ks->rv;
    for (size_t a = 0; a < nacts; a++) {
        gc_apply(ks, &ix, &acts[a]);
        free(acts[a].key);
    }
    /* another pass sees the consequences of what was written; an action
     * that wrote nothing (a dependent or a namespace's content waiting for
     * a finalizer no one removes) waits for the next change, or the loop
     * would spin with the lock held */
    if (ks->rv != rv)
        ks->gc_dirty = true;
    free(acts);
    gc_index_free(&ix);
}

/* ---- deployments ------------------------------------------------------------ */

static json_int_t want_replicas(const json_t *obj)
{
    const json_t *r = json_object_get(json_object_get(obj, "spec"), "replicas");
    return json_is_integer(r) ? json_integer_value(r) : 1;
}

void ks_controllers_deployment_changed(struct ks_server *ks, const char *obj_key)
{
    const json_t *obj = ks_store_get(ks, "deployments.apps", obj_key);
    if (!obj)
        json_object_del(ks->rs_index, obj_key);
    /* Every change is synced, as a controller's event handler queues it (a
     * settled Deployment may still owe its ReplicaSet a new change-cause);
     * a sync with nothing to do writes nothing. */
    if (!obj || meta_str(obj, "deletionTimestamp")) {
        json_object_del(ks->pending_deploy, obj_key);
        return;
    }
    if (!json_object_get(ks->pending_deploy, obj_key))
        json_object_set_new(ks->pending_deploy, obj_key,
                            json_integer(ks_mono_ms() + ks->ready_delay_ms));
    pthread_cond_broadcast(&ks->changed);
}

/* deploymentutil.SetDeploymentCondition: a condition that keeps its status
 * and reason is left as it was (times and message); one that keeps its
 * status keeps lastTransitionTime. @ref new */
static json_t *condition(const json_t *old_conds, const char *type, const char *status,
                         const char *reason, const char *message, const char *now)
{
    const char *ltt = now;
    const json_t *c = ks_condition_in(old_conds, type);
    if (c && strcmp(ks_nz(json_string_value(json_object_get(c, "status"))), status) == 0) {
        if (strcmp(ks_nz(json_string_value(json_object_get(c, "reason"))), reason) == 0)
            return json_deep_copy(c);
        if (json_string_value(json_object_get(c, "lastTransitionTime")))
            ltt = json_string_value(json_object_get(c, "lastTransitionTime"));
    }
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", type, "status", status, "lastUpdateTime",
                     now, "lastTransitionTime", ltt, "reason", reason, "message", message);
}

/* ---- replicasets (the deployment controller's) ------------------------------------------- */

/* The pod-template-hash of a template: FNV-1a 32 of its JSON (keys sorted,
 * a null creationTimestamp dropped, so a template read back from a
 * ReplicaSet by kubectl rollout undo hashes the same), its decimal digits
 * through rand.SafeEncodeString's alphabet, as the controller spells it
 * (the value differs: Kubernetes hashes the Go struct). */
static void template_hash(const json_t *tmpl, char *out, size_t size)
{
    json_t *t = json_deep_copy(tmpl);
    json_t *md = json_object_get(t, "metadata");
    if (json_is_null(json_object_get(md, "creationTimestamp")))
        json_object_del(md, "creationTimestamp");
    json_object_del(json_object_get(md, "labels"), "pod-template-hash");
    char *dump = ks_dump(t, true, NULL);
    json_decref(t);
    uint32_t h = 2166136261u;
    for (const char *p = dump; p && *p; p++) {
        h ^= (unsigned char)*p;
        h *= 16777619u;
    }
    free(dump);
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    char num[16];
    snprintf(num, sizeof(num), "%u", h);
    size_t i = 0;
    for (; num[i] && i + 1 < size; i++)
        out[i] = alphabet[(unsigned char)num[i] % (sizeof(alphabet) - 1)];
    out[i] = '\0';
}

static long revision_of(const json_t *obj)
{
    const char *r = json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "annotations"),
                        "deployment.kubernetes.io/revision"));
    char *end = NULL;
    long v = r ? strtol(r, &end, 10) : 0;
    return r && end && *end == '\0' && v > 0 ? v : 0;
}

static bool owned_by(const json_t *obj, const char *uid)
{
    const json_t *ref = ks_controller_ref(obj);
    return ref && strcmp(ks_nz(json_string_value(json_object_get(ref, "uid"))), uid) == 0;
}

/* maxSurge of a RollingUpdate (25% by default, rounded up). */
static json_int_t max_surge(const json_t *dep, json_int_t n)
{
    const json_t *ms = json_object_get(
        json_object_get(json_object_get(json_object_get(dep, "spec"), "strategy"), "rollingUpdate"),
        "maxSurge");
    if (json_is_integer(ms))
        return json_integer_value(ms);
    long pct = 25;
    if (json_is_string(ms)) {
        char *end = NULL;
        pct = strtol(json_string_value(ms), &end, 10);
        if (!end || *end != '%')
            pct = 25;
    }
    return (n * pct + 99) / 100;
}

/* maxUnavailable of a RollingUpdate (25% by default, rounded down); 0 for
 * Recreate (deploymentutil.MaxUnavailable). */
static json_int_t max_unavailable(const json_t *dep, json_int_t n)
{
    const json_t *st = json_object_get(json_object_get(dep, "spec"), "strategy");
    const char *type = json_string_value(json_object_get(st, "type"));
    if (type && strcmp(type, "Recreate") == 0)
        return 0;
    const json_t *mu = json_object_get(json_object_get(st, "rollingUpdate"), "maxUnavailable");
    if (json_is_integer(mu))
        return json_integer_value(mu) > n ? n : json_integer_value(mu);
    long pct = 25;
    if (json_is_string(mu)) {
        char *end = NULL;
        pct = strtol(json_string_value(mu), &end, 10);
        if (!end || *end != '%')
            pct = 25;
    }
    json_int_t v = n * pct / 100;
    return v > n ? n : v;
}

/* A ReplicaSet's status: n Pods, ready of them ready (and available:
 * minReadySeconds is not emulated); the counts but replicas are omitempty. */
static json_t *rs_status_of(json_int_t n, json_int_t ready, json_int_t gen)
{
    json_t *st = json_pack("{s:I}", "replicas", (json_int_t)n);
    if (n)
        json_object_set_new(st, "fullyLabeledReplicas", json_integer(n));
    if (ready) {
        json_object_set_new(st, "readyReplicas", json_integer(ready));
        json_object_set_new(st, "availableReplicas", json_integer(ready));
    }
    json_object_set_new(st, "observedGeneration", json_integer(gen));
    return st;
}

/* The ReplicaFailure condition of a failed create (err), its time kept
 * while it stays (replicaset.NewReplicaSetCondition, SetCondition). */
static json_t *replica_failure(const json_t *old_st, const char *err, const char *now)
{
    const json_t *c = ks_condition_in(json_object_get(old_st, "conditions"), "ReplicaFailure");
    const char *ltt = json_string_value(json_object_get(c, "lastTransitionTime"));
    if (!ltt)
        ltt = now;
    return json_pack("[{s:s,s:s,s:s,s:s,s:s}]", "type", "ReplicaFailure", "status", "True",
                     "lastTransitionTime", ltt, "reason", "FailedCreate", "message", err);
}

static const struct ks_event_src deployment_controller = {.component = "deployment-controller"};
static const struct ks_event_src replicaset_controller = {.component = "replicaset-controller"};

/* Write rs (fresh) with spec.replicas n and its status; generation moves
 * when the spec did. A scale of dep's ReplicaSet is its ScalingReplicaSet
 * Event (a new one: only with replicas). */
static void put_rs(struct ks_server *ks, const struct ks_res *def, const char *key, json_t *rs,
                   const json_t *old, json_int_t n, const json_t *dep)
{
    json_int_t was =
        old ? json_integer_value(json_object_get(json_object_get(old, "spec"), "replicas")) : 0;
    char *msg =
        was == n ? NULL
                 : ks_printf("Scaled %s replica set %s from %lld to %lld", n > was ? "up" : "down",
                             ks_nz(meta_str(rs, "name")), (long long)was, (long long)n);
    json_t *md = json_object_get(rs, "metadata");
    json_int_t gen = json_integer_value(json_object_get(md, "generation"));
    json_object_set_new(json_object_get(rs, "spec"), "replicas", json_integer(n));
    if (!old || !json_equal(json_object_get(old, "spec"), json_object_get(rs, "spec")))
        gen++;
    json_object_set_new(md, "generation", json_integer(gen));
    /* the status is the ReplicaSet controller's (sync_replicaset) */
    json_t *st = json_deep_copy(json_object_get(old, "status"));
    json_object_set_new(rs, "status", json_is_object(st) ? st : json_pack("{s:i}", "replicas", 0));
    if (!json_is_object(st))
        json_decref(st);
    ks_typed_order(rs);
    ks_store_put(ks, def, key, rs);
    if (msg)
        ks_record_event(ks, dep, &deployment_controller, "Normal", "ScalingReplicaSet", msg);
    free(msg);
}

/* Lock held. The Deployment's ReplicaSets as its controller leaves them
 * once the rollout is done; the current one's name and revision. */
static void sync_replicasets(struct ks_server *ks, const char *dep_key, const json_t *dep,
                             json_int_t n, char *ret_name, size_t name_size, long *ret_rev)
{
    const struct ks_res *def = ks_res_by_key(ks, "replicasets.apps");
    const char *ns = ks_nz(meta_str(dep, "namespace"));
    const char *name = ks_nz(meta_str(dep, "name"));
    const char *uid = ks_nz(meta_str(dep, "uid"));
    const json_t *spec = json_object_get(dep, "spec");
    const json_t *tmpl = json_object_get(spec, "template");
    char hash[16];
    template_hash(tmpl, hash, sizeof(hash));
    snprintf(ret_name, name_size, "%s-%s", name, hash);
    *ret_rev = 1;
    if (!def)
        return;
    /* the Deployment's ReplicaSets (the ones it made: rs_index, so that a
     * sync does not walk every ReplicaSet): the highest revision, the
     * current one */
    json_t *map = ks_store_map(ks, def->key);
    json_t *mine = json_object_get(ks->rs_index, dep_key);
    if (!mine) {
        mine = json_object();
        json_object_set_new(ks->rs_index, dep_key, mine);
    }
    long max_rev = 0;
    const json_t *cur = NULL;
    json_t *owned = json_array();
    const char *k;
    json_t *rs, *unused;
    void *tmp;
    json_object_foreach_safe(mine, tmp, k, unused)
    {
        rs = json_object_get(map, k);
        if (!rs || !owned_by(rs, uid)) {
            json_object_del(mine, k); /* gone (the garbage collector, a client) */
            continue;
        }
        json_array_append_new(owned, json_string(k));
        long r = revision_of(rs);
        if (r > max_rev)
            max_rev = r;
        if (strcmp(ks_nz(meta_str(rs, "name")), ret_name) == 0)
            cur = rs;
    }
    long rev = cur && revision_of(cur) == max_rev ? max_rev : max_rev + 1;
    *ret_rev = rev;
    /* the others scaled to 0 */
    size_t i;
    json_t *kv;
    json_array_foreach(owned, i, kv)
    {
        const json_t *old = json_object_get(map, json_string_value(kv));
        if (old == cur)
            continue;
        if (json_integer_value(json_object_get(json_object_get(old, "spec"), "replicas")) == 0 &&
            json_integer_value(json_object_get(json_object_get(old, "status"), "replicas")) == 0)
            continue;
        put_rs(ks, def, json_string_value(kv), json_deep_copy(old), old, 0, dep);
    }
    json_decref(owned);
    /* the current one */
    char key[512];
    ks_obj_key(key, sizeof(key), ns, ret_name);
    json_t *next;
    if (cur) {
        next = json_deep_copy(cur);
    } else {
        char id[40], now[32];
        ks_uuid(id, sizeof(id));
        ks_now_rfc3339(now, sizeof(now));
        json_t *t = json_deep_copy(tmpl);
        json_t *tmd = ks_ensure_obj(t, "metadata");
        json_t *labels = ks_ensure_obj(tmd, "labels");
        json_object_set_new(labels, "pod-template-hash", json_string(hash));
        json_t *sel = json_deep_copy(json_object_get(spec, "selector"));
        if (!json_is_object(sel))
            sel = json_object();
        json_t *ml = ks_ensure_obj(sel, "matchLabels");
        json_object_set_new(ml, "pod-template-hash", json_string(hash));
        next = json_pack(
            "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:I,s:o,s:[{s:s,s:s,s:s,s:s,s:b,s:b}]},s:{s:o,s:o}}",
            "apiVersion", "apps/v1", "kind", "ReplicaSet", "metadata", "name", ret_name,
            "namespace", ns, "uid", id, "creationTimestamp", now, "generation", (json_int_t)0,
            "labels", json_deep_copy(labels), "ownerReferences", "apiVersion", "apps/v1", "kind",
            "Deployment", "name", name, "uid", uid, "controller", 1, "blockOwnerDeletion", 1,
            "spec", "selector", sel, "template", t);
    }
    json_t *md = json_object_get(next, "metadata");
    json_t *ann = ks_ensure_obj(md, "annotations");
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)n);
    json_object_set_new(ann, "deployment.kubernetes.io/desired-replicas", json_string(buf));
    snprintf(buf, sizeof(buf), "%lld", (long long)(n + max_surge(dep, n)));
    json_object_set_new(ann, "deployment.kubernetes.io/max-replicas", json_string(buf));
    snprintf(buf, sizeof(buf), "%ld", rev);
    json_object_set_new(ann, "deployment.kubernetes.io/revision", json_string(buf));
    const json_t *cause =
        json_object_get(json_object_get(json_object_get(dep, "metadata"), "annotations"),
                        "kubernetes.io/change-cause");
    if (json_is_string(cause)) /* a copy: the ReplicaSet shares nothing with the Deployment */
        json_object_set_new(ann, "kubernetes.io/change-cause", json_copy((json_t *)cause));
    if (cur && json_equal(cur, next) &&
        json_integer_value(json_object_get(json_object_get(cur, "spec"), "replicas")) == n) {
        json_decref(next);
        return;
    }
    put_rs(ks, def, key, next, cur, n, dep);
    json_object_set_new(mine, key, json_true());
}

static void sync_replicaset(struct ks_server *ks, const struct ks_res *pdef,
                            const struct ks_res *rdef, const char *key);

/* The Deployment's status from its current ReplicaSet, whose Pods are made
 * first (as its controller does): replicas, updated, ready and available
 * (minReadySeconds is not emulated) as its Pods are; Available while at
 * most maxUnavailable are not; Progressing NewReplicaSetAvailable once all
 * are, ReplicaSetUpdated until then. Written only when it changed. */
static void settle_deployment(struct ks_server *ks, const char *key)
{
    const struct ks_res *def = ks_res_by_key(ks, "deployments.apps");
    const json_t *cur = ks_store_get(ks, "deployments.apps", key);
    if (!def || !cur || meta_str(cur, "deletionTimestamp"))
        return;
    json_int_t n = want_replicas(cur);
    char rs_name[320];
    long rev = 1;
    sync_replicasets(ks, key, cur, n, rs_name, sizeof(rs_name), &rev);
    char rs_key[512];
    ks_obj_key(rs_key, sizeof(rs_key), ks_nz(meta_str(cur, "namespace")), rs_name);
    const struct ks_res *pdef = ks_res_by_key(ks, "pods");
    const struct ks_res *rdef = ks_res_by_key(ks, "replicasets.apps");
    if (pdef && rdef)
        sync_replicaset(ks, pdef, rdef, rs_key);
    cur = ks_store_get(ks, "deployments.apps", key); /* the writes above may not touch it */
    const json_t *rst = json_object_get(ks_store_get(ks, "replicasets.apps", rs_key), "status");
    json_int_t have = json_integer_value(json_object_get(rst, "replicas"));
    json_int_t ready = json_integer_value(json_object_get(rst, "readyReplicas"));
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    const json_t *old_st = json_object_get(cur, "status");
    const json_t *old_conds = json_object_get(old_st, "conditions");
    json_t *st = json_object();
    json_object_set_new(st, "observedGeneration",
                        json_integer(json_integer_value(
                            json_object_get(json_object_get(cur, "metadata"), "generation"))));
    /* the counts are omitempty */
    if (have)
        json_object_set_new(st, "replicas", json_integer(have));
    if (have)
        json_object_set_new(st, "updatedReplicas", json_integer(have));
    if (ready)
        json_object_set_new(st, "readyReplicas", json_integer(ready));
    if (ready)
        json_object_set_new(st, "availableReplicas", json_integer(ready));
    if (n - ready > 0)
        json_object_set_new(st, "unavailableReplicas", json_integer(n - ready));
    json_t *conds = json_array();
    if (ready >= n - max_unavailable(cur, n))
        json_array_append_new(conds,
                              condition(old_conds, "Available", "True", "MinimumReplicasAvailable",
                                        "Deployment has minimum availability.", now));
    else
        json_array_append_new(
            conds, condition(old_conds, "Available", "False", "MinimumReplicasUnavailable",
                             "Deployment does not have minimum availability.", now));
    bool done = have == n && ready == n;
    char *msg = ks_printf(done ? "ReplicaSet \"%s\" has successfully progressed."
                               : "ReplicaSet \"%s\" is progressing.",
                          rs_name);
    json_array_append_new(conds, condition(old_conds, "Progressing", "True",
                                           done ? "NewReplicaSetAvailable" : "ReplicaSetUpdated",
                                           msg, now));
    free(msg);
    json_object_set_new(st, "conditions", conds);
    char revs[24];
    snprintf(revs, sizeof(revs), "%ld", rev);
    const char *old_rev = json_string_value(
        json_object_get(json_object_get(json_object_get(cur, "metadata"), "annotations"),
                        "deployment.kubernetes.io/revision"));
    if (json_equal(st, old_st) && old_rev && strcmp(old_rev, revs) == 0) {
        json_decref(st);
        return;
    }
    json_t *next = json_deep_copy(cur);
    json_object_set_new(next, "status", st);
    json_t *ann = ks_ensure_obj(json_object_get(next, "metadata"), "annotations");
    json_object_set_new(ann, "deployment.kubernetes.io/revision", json_string(revs));
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

/* ---- replicasets: their Pods (pkg/controller/replicaset) --------------------------- */

/*
 * Every ReplicaSet (a Deployment's or one made directly) has spec.replicas
 * Pods it controls: named <replicaset>-XXXXX (generateName), the template's
 * labels and annotations, an ownerReference with controller and
 * blockOwnerDeletion. The ReplicaSet controller, the scheduler and the
 * kubelet are one step here (ks_node_place): a Pod is made as they leave it
 * once its containers run (bound to the node KS_NODE_NAME, Running, every
 * condition True, a Pod IP from 10.244.0.0/16, each container running and
 * ready), or Pending with the scheduler's reason when no Node fits. Too
 * many: the newest go first (getPodsToDelete ranks equal Pods by age). The
 * ReplicaSet's status counts its Pods (a Pod not Ready counts as not
 * ready). Pods are not adopted or released by label (only the controller
 * reference counts); the garbage collector deletes the Pods of a deleted
 * ReplicaSet.
 */
/* The namespace is being deleted: nothing new may be made in it (the
 * NamespaceLifecycle admission plugin). */
static bool ns_terminating(struct ks_server *ks, const char *ns)
{
    const json_t *obj = ks_store_get(ks, "namespaces", ns);
    const char *phase = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
    return !obj || meta_str(obj, "deletionTimestamp") ||
           (phase && strcmp(phase, "Terminating") == 0);
}

/* Lock held. A new Pod of rs, through the scheduler and the kubelet
 * (ks_node_place); its key appended to keys; the ReplicaSet's
 * SuccessfulCreate Event and the scheduler's. NULL, or why the create
 * failed (the apiserver's message; malloc'd). */
static char *make_pod(struct ks_server *ks, const struct ks_res *def, const json_t *rs,
                      json_t *keys)
{
    const char *ns = ks_nz(meta_str(rs, "namespace"));
    const char *rs_name = ks_nz(meta_str(rs, "name"));
    const json_t *tmpl = json_object_get(json_object_get(rs, "spec"), "template");
    const json_t *tmd = json_object_get(tmpl, "metadata");
    char key[512], name[300], sfx[6];
    char *gen = ks_printf("%s-", rs_name);
    for (int tries = 0;; tries++) {
        ks_random_suffix(sfx, sizeof(sfx));
        /* names.SimpleNameGenerator: generateName cut to 58, 5 random */
        snprintf(name, sizeof(name), "%.58s%s", gen, sfx);
        ks_obj_key(key, sizeof(key), ns, name);
        if (!ks_store_get(ks, def->key, key))
            break;
        if (tries == 16) {
            char *err = ks_printf("pods \"%s\" already exists", name);
            free(gen);
            return err;
        }
    }
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    json_t *pod = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s,s:[{s:s,s:s,s:s,s:s,s:b,s:b}]},s:o}", "apiVersion", "v1",
        "kind", "Pod", "metadata", "name", name, "generateName", gen, "namespace", ns, "uid", uid,
        "creationTimestamp", now, "ownerReferences", "apiVersion", "apps/v1", "kind", "ReplicaSet",
        "name", rs_name, "uid", ks_nz(meta_str(rs, "uid")), "controller", 1, "blockOwnerDeletion",
        1, "spec", json_deep_copy(json_object_get(tmpl, "spec")));
    free(gen);
    json_t *md = json_object_get(pod, "metadata");
    if (json_object_size(json_object_get(tmd, "labels")))
        json_object_set_new(md, "labels", json_deep_copy(json_object_get(tmd, "labels")));
    if (json_object_size(json_object_get(tmd, "annotations")))
        json_object_set_new(md, "annotations", json_deep_copy(json_object_get(tmd, "annotations")));
    ks_pod_defaults(ks, pod);
    if (!ks_pod_service_account_ok(ks, pod, NULL)) {
        /* the controller's create is refused (FailedCreate; the admission
         * error names the Pod by its generateName); made when the
         * ServiceAccount is (ks_pods_changed) */
        const char *sa = ks_nz(
            json_string_value(json_object_get(json_object_get(pod, "spec"), "serviceAccountName")));
        char *err = ks_printf("pods \"%s-\" is forbidden: error looking up service account "
                              "%s/%s: serviceaccount \"%s\" not found",
                              rs_name, ns, sa, sa);
        json_decref(pod);
        return err;
    }
    bool bound = ks_node_place(ks, pod); /* Pending when no Node fits */
    ks_typed_order(pod);
    ks_store_put(ks, def, key, pod);
    json_array_append_new(keys, json_string(key));
    char *msg = ks_printf("Created pod: %s", name);
    ks_record_event(ks, rs, &replicaset_controller, "Normal", "SuccessfulCreate", msg);
    free(msg);
    ks_node_placed_event(ks, ks_store_get(ks, def->key, key), bound);
    return NULL;
}

/* The newest of pods (keys), for scaling down: the latest
 * creationTimestamp, then the greatest name. */
static size_t newest_pod(struct ks_server *ks, const json_t *keys)
{
    size_t best = 0, i;
    const char *best_ts = NULL, *best_key = NULL;
    json_t *k;
    json_array_foreach(keys, i, k)
    {
        const json_t *pod = ks_store_get(ks, "pods", json_string_value(k));
        const char *ts = ks_nz(meta_str(pod, "creationTimestamp"));
        int c = best_ts ? strcmp(ts, best_ts) : 1;
        if (c > 0 || (c == 0 && strcmp(json_string_value(k), best_key) > 0)) {
            best = i;
            best_ts = ts;
            best_key = json_string_value(k);
        }
    }
    return best;
}

static json_t *ensure_map(json_t **m)
{
    if (!*m)
        *m = json_object();
    return *m;
}

/* Index pod (key) under its IP and its controller, or take it out. */
static void index_pod(struct ks_server *ks, const char *key, const json_t *pod, bool add)
{
    if (!pod)
        return;
    const char *ip = json_string_value(json_object_get(json_object_get(pod, "status"), "podIP"));
    json_t *ips = ensure_map(&ks->pod_ips);
    if (ip && add)
        json_object_set_new(ips, ip, json_string(key));
    else if (ip && strcmp(ks_nz(json_string_value(json_object_get(ips, ip))), key) == 0)
        json_object_del(ips, ip);
    const json_t *ref = ks_controller_ref(pod);
    const char *uid = json_string_value(json_object_get(ref, "uid"));
    if (!uid)
        return;
    ks_index_set(ensure_map(&ks->pods_by_owner), uid, key, add);
    const char *name = json_string_value(json_object_get(ref, "name"));
    if (name && strcmp(ks_nz(json_string_value(json_object_get(ref, "kind"))), "ReplicaSet") == 0) {
        char rs_key[512];
        ks_obj_key(rs_key, sizeof(rs_key), ks_nz(meta_str(pod, "namespace")), name);
        json_object_set_new(ensure_map(&ks->pods_pending), rs_key, json_true());
    }
}

void ks_pods_changed(struct ks_server *ks, const struct ks_res *def, const char *obj_key,
                     const json_t *old, const json_t *obj)
{
    if (strcmp(def->key, "replicasets.apps") == 0) {
        json_object_set_new(ensure_map(&ks->pods_pending), obj_key, json_true());
    } else if (strcmp(def->key, "pods") == 0) {
        index_pod(ks, obj_key, old, false);
        index_pod(ks, obj_key, obj, true);
    } else if (strcmp(def->key, "serviceaccounts") == 0 && obj && !old) {
        /* a new ServiceAccount: the ReplicaSets of its namespace try again */
        const char *ns = ks_nz(meta_str(obj, "namespace"));
        size_t nl = strlen(ns);
        const char *k;
        json_t *unused;
        json_object_foreach(ks_store_map(ks, "replicasets.apps"), k, unused)
        {
            if (strncmp(k, ns, nl) == 0 && k[nl] == '/')
                json_object_set_new(ensure_map(&ks->pods_pending), k, json_true());
        }
    } else {
        return;
    }
    ks->pods_dirty = true;
    pthread_cond_broadcast(&ks->changed);
}

/* Lock held. ReplicaSet key's Pods: as many as it wants, its status. */
static void sync_replicaset(struct ks_server *ks, const struct ks_res *pdef,
                            const struct ks_res *rdef, const char *key)
{
    const json_t *rs = ks_store_get(ks, rdef->key, key);
    if (!rs || meta_str(rs, "deletionTimestamp") ||
        ns_terminating(ks, ks_nz(meta_str(rs, "namespace"))))
        return;
    const json_t *r = json_object_get(json_object_get(rs, "spec"), "replicas");
    json_int_t want = json_is_integer(r) ? json_integer_value(r) : 1;
    json_t *pods = json_array();
    const char *pk;
    json_t *unused;
    json_object_foreach(json_object_get(ks->pods_by_owner, ks_nz(meta_str(rs, "uid"))), pk, unused)
    {
        const json_t *pod = ks_store_get(ks, pdef->key, pk);
        if (pod && !meta_str(pod, "deletionTimestamp"))
            json_array_append_new(pods, json_string(pk));
    }
    char *err = NULL;
    for (json_int_t have = (json_int_t)json_array_size(pods); have < want && !err; have++)
        err = make_pod(ks, pdef, rs, pods);
    if (err) {
        char *msg = ks_printf("Error creating: %s", err);
        ks_record_event(ks, rs, &replicaset_controller, "Warning", "FailedCreate", msg);
        free(msg);
    }
    while ((json_int_t)json_array_size(pods) > want) {
        size_t n = newest_pod(ks, pods);
        const char *victim = json_string_value(json_array_get(pods, n));
        const json_t *pod = ks_store_get(ks, pdef->key, victim);
        char *msg = ks_printf("Deleted pod: %s", ks_nz(meta_str(pod, "name")));
        delete_obj(ks, pdef, victim);
        ks_record_event(ks, rs, &replicaset_controller, "Normal", "SuccessfulDelete", msg);
        free(msg);
        json_array_remove(pods, n);
    }
    /* the status from the Pods it has now */
    json_int_t n = (json_int_t)json_array_size(pods), ready = 0;
    size_t i;
    json_t *k;
    json_array_foreach(pods, i, k)
    {
        if (ks_pod_ready(ks_store_get(ks, pdef->key, json_string_value(k))))
            ready++;
    }
    json_decref(pods);
    json_int_t gen =
        json_integer_value(json_object_get(json_object_get(rs, "metadata"), "generation"));
    json_t *st = rs_status_of(n, ready, gen);
    if (err) {
        char now[32];
        ks_now_rfc3339(now, sizeof(now));
        json_object_set_new(st, "conditions",
                            replica_failure(json_object_get(rs, "status"), err, now));
        free(err);
    }
    if (!ks_put_status(ks, rdef, key, rs, st))
        return;
    /* the Deployment that controls it looks again (its status follows) */
    rs = ks_store_get(ks, rdef->key, key);
    const json_t *ref = ks_controller_ref(rs);
    if (ref && strcmp(ks_nz(json_string_value(json_object_get(ref, "kind"))), "Deployment") == 0) {
        char dep_key[512];
        ks_obj_key(dep_key, sizeof(dep_key), ks_nz(meta_str(rs, "namespace")),
                   ks_nz(json_string_value(json_object_get(ref, "name"))));
        ks_controllers_deployment_changed(ks, dep_key);
    }
}

/* The ReplicaSets noted since the last pass (ks_pods_changed). */
static void sync_pods(struct ks_server *ks)
{
    const struct ks_res *pdef = ks_res_by_key(ks, "pods");
    const struct ks_res *rdef = ks_res_by_key(ks, "replicasets.apps");
    json_t *todo = ks->pods_pending;
    ks->pods_pending = NULL;
    if (pdef && rdef) {
        const char *key;
        json_t *unused;
        json_object_foreach(todo, key, unused)
        {
            sync_replicaset(ks, pdef, rdef, key);
        }
    }
    json_decref(todo);
}

/* ---- per namespace: service accounts, the root CA ------------------------------ */

/* pkg/controller/certificates/rootcacertpublisher: every active namespace
 * has a "kube-root-ca.crt" ConfigMap holding the cluster's CA as "ca.crt"
 * and the publisher's description, made again when deleted and put back
 * when changed (other annotations, labels and the rest are kept). */
#define ROOT_CA_NAME "kube-root-ca.crt"
#define ROOT_CA_DESCRIPTION                                                                        \
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "      \
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "      \
    "guaranteed across distributions of Kubernetes clusters."

static void publish_root_ca(struct ks_server *ks, const struct ks_res *def, const char *ns)
{
    char key[512];
    ks_obj_key(key, sizeof(key), ns, ROOT_CA_NAME);
    const json_t *cur = ks_store_get(ks, def->key, key);
    json_t *data = json_pack("{s:s}", "ca.crt", ks->ca_pem);
    const char *desc = json_string_value(
        json_object_get(json_object_get(json_object_get(cur, "metadata"), "annotations"),
                        "kubernetes.io/description"));
    if (cur && json_equal(json_object_get(cur, "data"), data) && desc && *desc) {
        json_decref(data);
        return;
    }
    json_t *next;
    if (cur) {
        next = json_deep_copy(cur);
    } else {
        char uid[40], now[32];
        ks_uuid(uid, sizeof(uid));
        ks_now_rfc3339(now, sizeof(now));
        next = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                         "metadata", "name", ROOT_CA_NAME, "namespace", ns, "uid", uid,
                         "creationTimestamp", now);
    }
    json_object_set_new(next, "data", data);
    json_t *ann = ks_ensure_obj(json_object_get(next, "metadata"), "annotations");
    json_object_set_new(ann, "kubernetes.io/description", json_string(ROOT_CA_DESCRIPTION));
    ks_typed_order(next);
    ks_store_put(ks, def, key, next);
}

/*
 * The control plane's own Service (pkg/controlplane/controller/
 * kubernetesservice: made at start and again when deleted): default/
 * kubernetes, the first IP of the service range, 443 to the apiserver's
 * port, labelled component=apiserver, provider=kubernetes. (Its Endpoints
 * and EndpointSlice, which the apiserver also keeps: endpoints.c.)
 */
static void publish_kubernetes_service(struct ks_server *ks, const json_t *default_ns)
{
    const struct ks_res *def = ks_res_by_key(ks, "services");
    const char *colon = ks->url ? strrchr(ks->url, ':') : NULL;
    if (!def || !colon || !default_ns || meta_str(default_ns, "deletionTimestamp") ||
        ks_store_get(ks, def->key, "default/kubernetes"))
        return;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || port <= 0 || port > 65535)
        return;
    char uid[40], now[32];
    ks_uuid(uid, sizeof(uid));
    ks_now_rfc3339(now, sizeof(now));
    json_t *svc = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:{s:s,s:s}},s:{s:s,s:[s],s:s,s:[s],s:s,s:[{s:s,s:i,s:s,s:i}],"
        "s:s,s:s},s:{s:{}}}",
        "apiVersion", "v1", "kind", "Service", "metadata", "name", "kubernetes", "namespace",
        "default", "uid", uid, "creationTimestamp", now, "labels", "component", "apiserver",
        "provider", "kubernetes", "spec", "clusterIP", "10.96.0.1", "clusterIPs", "10.96.0.1",
        "internalTrafficPolicy", "Cluster", "ipFamilies", "IPv4", "ipFamilyPolicy", "SingleStack",
        "ports", "name", "https", "port", 443, "protocol", "TCP", "targetPort", (int)port,
        "sessionAffinity", "None", "type", "ClusterIP", "status", "loadBalancer");
    ks_typed_order(svc);
    ks_store_put(ks, def, "default/kubernetes", svc);
}

/* pkg/controller/serviceaccount: every active namespace has a "default"
 * ServiceAccount, made again when it is deleted. (Its token controller's
 * Secrets are long gone from Kubernetes; nothing else is made.) */
void ks_controllers_namespaced(struct ks_server *ks)
{
    const struct ks_res *def = ks_res_by_key(ks, "serviceaccounts");
    const struct ks_res *cm_def = ks_res_by_key(ks, "configmaps");
    if (!def || !cm_def)
        return;
    publish_kubernetes_service(ks, ks_store_get(ks, "namespaces", "default"));
    const char *ns;
    json_t *nsobj;
    json_object_foreach(ks_store_map(ks, "namespaces"), ns, nsobj)
    {
        const char *phase =
            json_string_value(json_object_get(json_object_get(nsobj, "status"), "phase"));
        if (meta_str(nsobj, "deletionTimestamp") || (phase && strcmp(phase, "Terminating") == 0))
            continue;
        if (ks->ca_pem)
            publish_root_ca(ks, cm_def, ns);
        char key[512];
        ks_obj_key(key, sizeof(key), ns, "default");
        if (ks_store_get(ks, def->key, key))
            continue;
        char uid[40], now[32];
        ks_uuid(uid, sizeof(uid));
        ks_now_rfc3339(now, sizeof(now));
        json_t *sa = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s}}", "apiVersion", "v1", "kind",
                               "ServiceAccount", "metadata", "name", "default", "namespace", ns,
                               "uid", uid, "creationTimestamp", now);
        ks_typed_order(sa);
        ks_store_put(ks, def, key, sa);
    }
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
            /* a pass costs every object: at most a fifth of the time */
            long long took = ks_mono_ms() - now;
            ks->gc_next_ms = now + (took * 4 > 100 ? took * 4 : 100);
        }
        if (ks->roles_dirty) {
            ks->roles_dirty = false;
            ks_authz_aggregate(ks);
        }
        if (ks->ns_dirty) {
            ks->ns_dirty = false;
            ks_controllers_namespaced(ks);
        }
        if (ks->pods_dirty) {
            ks->pods_dirty = false;
            sync_pods(ks);
            ks_nodes_sync(ks);
        }
        if (ks->endpoints_dirty) {
            ks->endpoints_dirty = false;
            ks_endpoints_sync(ks);
        }
        long long wake = now + 1000;
        long long beat = ks_nodes_heartbeat(ks, now);
        if (beat < wake)
            wake = beat;
        long long expiry = ks_events_expire(ks, now);
        if (expiry < wake)
            wake = expiry;
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
        if (ks->gc_dirty || ks->roles_dirty || ks->ns_dirty || ks->endpoints_dirty ||
            ks->pods_dirty)
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
    ks->rs_index = json_object();
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
    json_decref(ks->rs_index);
    ks->rs_index = NULL;
}
