/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim storage versions: the StorageVersionMigration controller (what
 * kube-controller-manager runs for storagemigration.k8s.io, served with
 * --feature StorageVersionMigrator) and the /_kubesim/storage view of the
 * version each object is stored in.
 *
 * An object stays in the version it was last written in (store.c keeps
 * the apiVersion it was stored with); a migration rewrites every object
 * of a resource that is not in the current storage version, as the real
 * controller does with one no-op write per object
 * (pkg/controller/storageversionmigrator/storageversionmigrator.go in
 * kubernetes): objects written meanwhile are already in the storage
 * version and are left alone, deleted ones are skipped. Its conditions are
 * those of the v1beta1 API: Running while it works, then Succeeded or
 * Failed (Running turns False).
 *
 * One thread. It takes ks->lock to read and commit, and calls the
 * conversion webhook (ks_convert) without it, a batch at a time; a commit
 * checks that the object's resourceVersion did not move meanwhile.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SVM_KEY "storageversionmigrations.storagemigration.k8s.io"
#define BATCH 100
#define ROUNDS 5

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

static bool stored_in(const struct ks_res *def, const json_t *obj, const char *storage_av)
{
    if (!def->crd)
        return true; /* built-ins have one version */
    return strcmp(ks_nz(json_string_value(json_object_get(obj, "apiVersion"))), storage_av) == 0;
}

json_t *ks_storage_describe(struct ks_server *ks, const char *res_key)
{
    const struct ks_res *def = def_by_key(ks, res_key);
    if (!def)
        return NULL;
    json_t *objs = json_object();
    const json_t *writes = json_object_get(ks->writes, def->key);
    const char *key;
    json_t *obj;
    json_object_foreach(ks_store_map(ks, def->key), key, obj)
    {
        char *g = NULL, *v = NULL;
        ks_split_api_version(ks_nz(json_string_value(json_object_get(obj, "apiVersion"))), &g, &v);
        json_object_set_new(objs, key,
                            json_pack("{s:s,s:s,s:s,s:I}", "version", def->crd ? v : def->storage,
                                      "resourceVersion", ks_nz(meta_str(obj, "resourceVersion")),
                                      "uid", ks_nz(meta_str(obj, "uid")), "writes",
                                      json_integer_value(json_object_get(writes, key))));
        free(g);
        free(v);
    }
    return json_pack("{s:s,s:s,s:o}", "resource", def->key, "storageVersion", def->storage,
                     "objects", objs);
}

static bool condition_true(const json_t *svm, const char *type)
{
    const char *st = ks_condition_status(svm, type);
    return st && strcmp(st, "True") == 0;
}

/* Lock held: set condition "type" True (a final one turns Running False),
 * and status.resourceVersion when rv is not NULL. */
static void set_condition(struct ks_server *ks, const char *name, const char *type,
                          const char *reason, const char *message, const char *rv)
{
    const struct ks_res *def = def_by_key(ks, SVM_KEY);
    const json_t *cur = def ? ks_store_get(ks, SVM_KEY, name) : NULL;
    if (!cur)
        return;
    json_t *next = json_deep_copy(cur);
    json_t *status = json_object_get(next, "status");
    if (!json_is_object(status)) {
        status = json_object();
        json_object_set_new(next, "status", status);
    }
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        json_object_set_new(status, "conditions", conds);
    }
    char now[32];
    ks_now_rfc3339(now, sizeof(now));
    bool final = strcmp(type, "Running") != 0;
    size_t i;
    json_t *c;
    json_t *mine = NULL;
    json_array_foreach(conds, i, c)
    {
        const char *t = ks_nz(json_string_value(json_object_get(c, "type")));
        if (strcmp(t, type) == 0)
            mine = c;
        else if (final && strcmp(t, "Running") == 0 &&
                 strcmp(ks_nz(json_string_value(json_object_get(c, "status"))), "False") != 0) {
            json_object_set_new(c, "status", json_string("False"));
            json_object_set_new(c, "lastTransitionTime", json_string(now));
        }
    }
    if (!mine) {
        mine = json_object();
        json_array_append_new(conds, mine);
    }
    json_object_set_new(mine, "type", json_string(type));
    json_object_set_new(mine, "status", json_string("True"));
    json_object_set_new(mine, "lastTransitionTime", json_string(now));
    json_object_set_new(mine, "reason", json_string(reason));
    json_object_set_new(mine, "message", json_string(message));
    json_object_set_new(mine, "observedGeneration",
                        json_integer(json_integer_value(
                            json_object_get(json_object_get(next, "metadata"), "generation"))));
    if (rv)
        json_object_set_new(status, "resourceVersion", json_string(rv));
    ks_typed_order(next);
    ks_store_put(ks, def, name, next);
}

/* Lock held: the keys of the objects of def not stored in its storage
 * version, sorted (the order a list walks). @ref new */
static json_t *stale_keys(struct ks_server *ks, const struct ks_res *def)
{
    char *av = ks_api_version(def->group, def->storage);
    json_t *keys = json_array();
    const char *key;
    json_t *obj;
    json_object_foreach(ks_store_map(ks, def->key), key, obj)
    {
        if (!stored_in(def, obj, av))
            json_array_append_new(keys, json_string(key));
    }
    free(av);
    return keys;
}

/*
 * Rewrite one batch of keys (from index at) in the storage version. Lock
 * NOT held. Returns the number of objects rewritten, or -EIO with the
 * conversion error in *ret_err; -EAGAIN when the definition changed (the
 * caller starts a new round).
 */
static int migrate_batch(struct ks_server *ks, const char *group, const char *plural,
                         const json_t *keys, size_t at, char **ret_err)
{
    json_t *objs = json_array();
    json_t *which = json_array();
    pthread_mutex_lock(&ks->lock);
    const struct ks_res *def = ks_res_find(ks, group, plural);
    if (!def) {
        pthread_mutex_unlock(&ks->lock);
        json_decref(objs);
        json_decref(which);
        *ret_err = ks_strdup("the resource no longer exists");
        return -EIO;
    }
    char *av = ks_api_version(def->group, def->storage);
    for (size_t i = at; i < json_array_size(keys) && i < at + BATCH; i++) {
        const char *k = json_string_value(json_array_get(keys, i));
        const json_t *obj = ks_store_get(ks, def->key, k);
        if (obj && !stored_in(def, obj, av)) {
            json_array_append(objs, (json_t *)obj);
            json_array_append_new(which, json_string(k));
        }
    }
    pthread_mutex_unlock(&ks->lock);
    int n = 0;
    json_t *conv = NULL;
    if (json_array_size(objs) > 0 && ks_convert(ks, def, objs, def->storage, &conv, ret_err) != 0) {
        n = -EIO;
        goto out;
    }
    pthread_mutex_lock(&ks->lock);
    if (ks_res_find(ks, group, plural) != def) {
        /* The CRD changed while converting: its storage version may too. */
        pthread_mutex_unlock(&ks->lock);
        n = -EAGAIN;
        goto out;
    }
    const struct ks_version *sv = ks_res_version(def, def->storage);
    size_t i;
    json_t *o;
    json_array_foreach(conv, i, o)
    {
        const char *k = json_string_value(json_array_get(which, i));
        const json_t *now = ks_store_get(ks, def->key, k);
        /* Written or deleted meanwhile: the write stored it in the current
         * version, or there is nothing left to migrate. */
        if (now != json_array_get(objs, i))
            continue;
        json_t *next = json_deep_copy(o);
        if (sv && sv->schema) {
            ks_schema_prune(next, sv->schema);
            ks_schema_default(next, sv->schema);
        }
        ks_store_put(ks, def, k, next);
        n++;
    }
    pthread_mutex_unlock(&ks->lock);
out:
    free(av);
    json_decref(conv);
    json_decref(objs);
    json_decref(which);
    return n;
}

/* Run one migration to its end. Lock NOT held. */
static void run_migration(struct ks_server *ks, const char *name)
{
    pthread_mutex_lock(&ks->lock);
    const json_t *svm = ks_store_get(ks, SVM_KEY, name);
    const json_t *res = json_object_get(json_object_get(svm, "spec"), "resource");
    char *group = ks_strdup(ks_nz(json_string_value(json_object_get(res, "group"))));
    char *plural = ks_strdup(ks_nz(json_string_value(json_object_get(res, "resource"))));
    const struct ks_res *def = ks_res_find(ks, group, plural);
    if (!def) {
        char *msg = ks_printf("resource %s.%s does not exist", plural, group);
        set_condition(ks, name, "Failed", "StorageVersionMigrationFailed", msg, NULL);
        free(msg);
        pthread_mutex_unlock(&ks->lock);
        goto out;
    }
    char rv[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)ks->rv);
    set_condition(ks, name, "Running", "StorageVersionMigrationInProgress",
                  "The migration is running", rv);
    pthread_mutex_unlock(&ks->lock);

    char *err = NULL;
    int failures = 0;
    long total = 0;
    for (int round = 0; round < ROUNDS && !err; round++) {
        pthread_mutex_lock(&ks->lock);
        def = ks_res_find(ks, group, plural);
        json_t *keys = def ? stale_keys(ks, def) : json_array();
        bool stop = ks->stopping || !def;
        pthread_mutex_unlock(&ks->lock);
        if (json_array_size(keys) == 0 || stop) {
            json_decref(keys);
            break;
        }
        for (size_t at = 0; at < json_array_size(keys) && !err;) {
            char *berr = NULL;
            int n = migrate_batch(ks, group, plural, keys, at, &berr);
            if (n == -EAGAIN)
                break;
            if (n < 0) {
                /* A webhook that fails now and then: retry the batch. */
                if (++failures >= 5) {
                    err = berr;
                    break;
                }
                free(berr);
                struct timespec ts = {0, 200 * 1000000L};
                nanosleep(&ts, NULL);
                continue;
            }
            total += n;
            at += BATCH;
            pthread_mutex_lock(&ks->lock);
            bool stopping = ks->stopping;
            pthread_mutex_unlock(&ks->lock);
            if (stopping)
                break;
        }
        json_decref(keys);
    }
    pthread_mutex_lock(&ks->lock);
    if (ks->stopping) {
        pthread_mutex_unlock(&ks->lock);
        free(err);
        goto out;
    }
    def = ks_res_find(ks, group, plural);
    json_t *left = def && !err ? stale_keys(ks, def) : NULL;
    if (err || !def || json_array_size(left) > 0) {
        char *msg = err ? ks_printf("migrating %s.%s failed: %s", plural, group, err)
                        : ks_printf("%zu objects of %s.%s are still stored in an older version",
                                    json_array_size(left), plural, group);
        set_condition(ks, name, "Failed", "StorageVersionMigrationFailed", msg, NULL);
        free(msg);
    } else {
        char *msg = ks_printf("The migration has succeeded (%ld objects rewritten)", total);
        set_condition(ks, name, "Succeeded", "StorageVersionMigrationSucceeded", msg, NULL);
        free(msg);
    }
    json_decref(left);
    pthread_mutex_unlock(&ks->lock);
    free(err);
out:
    free(group);
    free(plural);
}

static void *migrator_main(void *arg)
{
    struct ks_server *ks = arg;
    pthread_mutex_lock(&ks->lock);
    while (!ks->stopping) {
        char *name = NULL;
        const char *key;
        json_t *svm;
        json_object_foreach(ks_store_map(ks, SVM_KEY), key, svm)
        {
            if (!condition_true(svm, "Succeeded") && !condition_true(svm, "Failed") &&
                !meta_str(svm, "deletionTimestamp")) {
                name = ks_strdup(key);
                break;
            }
        }
        if (name) {
            pthread_mutex_unlock(&ks->lock);
            run_migration(ks, name);
            free(name);
            pthread_mutex_lock(&ks->lock);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&ks->changed, &ks->lock, &ts);
    }
    pthread_mutex_unlock(&ks->lock);
    return NULL;
}

int ks_migration_start(struct ks_server *ks)
{
    if (!ks->feature_svm)
        return 0;
    int rc = pthread_create(&ks->migrator, NULL, migrator_main, ks);
    if (rc != 0)
        return -rc;
    ks->migrator_running = true;
    return 0;
}

void ks_migration_stop(struct ks_server *ks)
{
    if (!ks->migrator_running)
        return;
    pthread_mutex_lock(&ks->lock);
    ks->stopping = true;
    pthread_cond_broadcast(&ks->changed);
    pthread_mutex_unlock(&ks->lock);
    pthread_join(ks->migrator, NULL);
    ks->migrator_running = false;
}
