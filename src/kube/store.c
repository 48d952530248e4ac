/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared object store (see kop/store.h).
 *
 * Layout: one chained hash table of entries keyed by "kind/ns/name", and
 * three secondary indexes (kind, namespace, controller-owner uid). Each
 * index is a hash table of buckets; a bucket heads an intrusive doubly
 * linked list of the entries that share the value, so insert and remove
 * are O(1) and a list walks only the matching entries. Everything is
 * protected by one rwlock; values are frozen json_t, so a reader only
 * needs the lock long enough to json_incref what it returns.
 */
#include "kop/store.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kop/metrics.h"

enum { IDX_KIND, IDX_NS, IDX_OWNER, IDX_COUNT };

struct hnode {
    struct hnode *next;
    uint64_t hash;
    char *key;
};

struct hmap {
    struct hnode **tab;
    size_t cap; /* power of two, 0 before the first insert */
    size_t n;
};

struct entry;

struct bucket {
    struct hnode node; /* key: the index value */
    struct entry *head;
};

struct link {
    struct entry *prev, *next;
    struct bucket *b; /* NULL: not in this index */
};

struct entry {
    struct hnode node; /* key: "kind/ns/name" */
    json_t *obj;
    size_t bytes;
    struct link idx[IDX_COUNT];
};

struct kop_store {
    pthread_rwlock_t lock;
    struct hmap entries;
    struct hmap index[IDX_COUNT];
    size_t bytes;
    struct kop_metric *g_objects;
    struct kop_metric *g_bytes;
};

static const char last_applied[] = "kubectl.kubernetes.io/last-applied-configuration";

/* ---- hash map ------------------------------------------------------------ */

static uint64_t hash_str(const char *s)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static struct hnode *hmap_find(const struct hmap *m, const char *key, uint64_t h)
{
    if (!m->cap)
        return NULL;
    for (struct hnode *n = m->tab[h & (m->cap - 1)]; n; n = n->next)
        if (n->hash == h && strcmp(n->key, key) == 0)
            return n;
    return NULL;
}

static int hmap_grow(struct hmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    struct hnode **nt = calloc(ncap, sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        struct hnode *n = m->tab[i];
        while (n) {
            struct hnode *next = n->next;
            size_t b = n->hash & (ncap - 1);
            n->next = nt[b];
            nt[b] = n;
            n = next;
        }
    }
    free(m->tab);
    m->tab = nt;
    m->cap = ncap;
    return 0;
}

/* Insert a node whose key is not present. */
static int hmap_insert(struct hmap *m, struct hnode *n)
{
    if (m->n + 1 > m->cap - m->cap / 4 || !m->cap) {
        int r = hmap_grow(m);
        if (r < 0)
            return r;
    }
    size_t b = n->hash & (m->cap - 1);
    n->next = m->tab[b];
    m->tab[b] = n;
    m->n++;
    return 0;
}

static void hmap_remove(struct hmap *m, struct hnode *n)
{
    struct hnode **pp = &m->tab[n->hash & (m->cap - 1)];
    while (*pp && *pp != n)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = n->next;
        m->n--;
    }
}

/* ---- indexes ------------------------------------------------------------- */

static void index_unlink(struct kop_store *s, struct entry *e, int i)
{
    struct link *l = &e->idx[i];
    struct bucket *b = l->b;
    if (!b)
        return;
    if (l->prev)
        l->prev->idx[i].next = l->next;
    else
        b->head = l->next;
    if (l->next)
        l->next->idx[i].prev = l->prev;
    l->prev = l->next = NULL;
    l->b = NULL;
    if (!b->head) {
        hmap_remove(&s->index[i], &b->node);
        free(b->node.key);
        free(b);
    }
}

static int index_link(struct kop_store *s, struct entry *e, int i, const char *value)
{
    if (!value)
        return 0;
    uint64_t h = hash_str(value);
    struct bucket *b = (struct bucket *)hmap_find(&s->index[i], value, h);
    if (!b) {
        b = calloc(1, sizeof(*b));
        if (!b)
            return -ENOMEM;
        b->node.key = strdup(value);
        b->node.hash = h;
        if (!b->node.key || hmap_insert(&s->index[i], &b->node) < 0) {
            free(b->node.key);
            free(b);
            return -ENOMEM;
        }
    }
    struct link *l = &e->idx[i];
    l->b = b;
    l->prev = NULL;
    l->next = b->head;
    if (b->head)
        b->head->idx[i].prev = e;
    b->head = e;
    return 0;
}

static const char *controller_uid(const json_t *obj)
{
    json_t *refs = json_object_get(json_object_get(obj, "metadata"), "ownerReferences");
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (json_is_true(json_object_get(ref, "controller"))) {
            const char *uid = json_string_value(json_object_get(ref, "uid"));
            if (uid && *uid)
                return uid;
        }
    }
    return NULL;
}

/* ---- public -------------------------------------------------------------- */

int kop_store_new(struct kop_metrics *metrics, struct kop_store **ret)
{
    struct kop_store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    if (pthread_rwlock_init(&s->lock, NULL) != 0) {
        free(s);
        return -ENOMEM;
    }
    struct kop_metrics *m = metrics ? metrics : kop_metrics_global();
    if (m) {
        struct kop_metric_family *f;
        f = kop_metrics_register(m, KOP_METRIC_GAUGE, "kop_store_objects",
                                 "Objects in the shared informer store.", NULL, NULL, 0);
        s->g_objects = f ? kop_metric_child(f) : NULL;
        f = kop_metrics_register(m, KOP_METRIC_GAUGE, "kop_store_bytes",
                                 "Compact JSON size of the objects in the shared store.", NULL,
                                 NULL, 0);
        s->g_bytes = f ? kop_metric_child(f) : NULL;
    }
    *ret = s;
    return 0;
}

static void entry_free(struct entry *e)
{
    if (!e)
        return;
    json_decref(e->obj);
    free(e->node.key);
    free(e);
}

void kop_store_free(struct kop_store *s)
{
    if (!s)
        return;
    size_t n = 0;
    for (size_t i = 0; i < s->entries.cap; i++) {
        struct hnode *node = s->entries.tab[i];
        while (node) {
            struct hnode *next = node->next;
            entry_free((struct entry *)node);
            n++;
            node = next;
        }
    }
    for (int k = 0; k < IDX_COUNT; k++) {
        for (size_t i = 0; i < s->index[k].cap; i++) {
            struct hnode *node = s->index[k].tab[i];
            while (node) {
                struct hnode *next = node->next;
                free(node->key);
                free(node);
                node = next;
            }
        }
        free(s->index[k].tab);
    }
    kop_gauge_add(s->g_objects, -(double)n);
    kop_gauge_add(s->g_bytes, -(double)s->bytes);
    free(s->entries.tab);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

int kop_store_key(const char *kind, const char *ns, const char *name, char *buf, size_t len)
{
    if (!kind || !*kind || !name || !*name || strchr(kind, '/') || !buf)
        return -EINVAL;
    int n = snprintf(buf, len, "%s/%s/%s", kind, ns ? ns : "", name);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* malloc'd key or NULL. */
static char *make_key(const char *kind, const char *ns, const char *name)
{
    if (!kind || !*kind || !name || !*name || strchr(kind, '/'))
        return NULL;
    size_t n = strlen(kind) + (ns ? strlen(ns) : 0) + strlen(name) + 3;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s/%s/%s", kind, ns ? ns : "", name);
    return k;
}

json_t *kop_store_strip(json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    json_t *ann = json_object_get(meta, "annotations");
    bool has_mf = json_object_get(meta, "managedFields") != NULL;
    bool has_la = json_object_get(ann, last_applied) != NULL;
    if (!has_mf && !has_la)
        return json_incref(obj);
    /* Shallow copies: siblings are shared by reference and never edited. */
    json_t *copy = json_copy(obj);
    json_t *mcopy = json_copy(meta);
    if (!copy || !mcopy)
        goto fail;
    json_object_del(mcopy, "managedFields");
    if (has_la) {
        json_t *acopy = json_copy(ann);
        if (!acopy)
            goto fail;
        json_object_del(acopy, last_applied);
        if (json_object_size(acopy) == 0) {
            json_decref(acopy);
            json_object_del(mcopy, "annotations");
        } else if (json_object_set_new(mcopy, "annotations", acopy) < 0) {
            goto fail;
        }
    }
    if (json_object_set_new(copy, "metadata", mcopy) < 0) {
        mcopy = NULL;
        goto fail;
    }
    return copy;
fail:
    json_decref(mcopy);
    json_decref(copy);
    return NULL;
}

int kop_store_put(struct kop_store *s, const char *kind, json_t *obj, json_t **ret_old,
                  json_t **ret_new)
{
    int r = 0;
    struct entry *e = NULL;
    json_t *stripped = NULL;
    char *key = NULL;
    if (!s || !json_is_object(obj)) {
        r = -EINVAL;
        goto out;
    }
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    key = make_key(kind, ns, name);
    if (!key) {
        /* make_key fails on bad input or ENOMEM; tell them apart. */
        r = (kind && *kind && name && *name && !strchr(kind, '/')) ? -ENOMEM : -EINVAL;
        goto out;
    }
    stripped = kop_store_strip(obj);
    if (!stripped) {
        r = -ENOMEM;
        goto out;
    }
    e = calloc(1, sizeof(*e));
    if (!e) {
        r = -ENOMEM;
        goto out;
    }
    e->node.key = key;
    e->node.hash = hash_str(key);
    key = NULL;
    e->obj = stripped;
    stripped = NULL;
    /* Measured outside the lock: the value is private until linked. */
    e->bytes = json_dumpb(e->obj, NULL, 0, JSON_COMPACT);
    /* Index values are read from the stored value, which lives as long as
     * the entry, but copies keep the buckets independent of it. */
    const char *uid = controller_uid(e->obj);
    const char *ens =
        json_string_value(json_object_get(json_object_get(e->obj, "metadata"), "namespace"));

    json_t *old = NULL;
    pthread_rwlock_wrlock(&s->lock);
    struct entry *prev = (struct entry *)hmap_find(&s->entries, e->node.key, e->node.hash);
    if (prev) {
        for (int i = 0; i < IDX_COUNT; i++)
            index_unlink(s, prev, i);
        hmap_remove(&s->entries, &prev->node);
        s->bytes -= prev->bytes;
    }
    r = hmap_insert(&s->entries, &e->node);
    if (r == 0) {
        if (index_link(s, e, IDX_KIND, kind) < 0 || index_link(s, e, IDX_NS, ens ? ens : "") < 0 ||
            index_link(s, e, IDX_OWNER, uid) < 0) {
            for (int i = 0; i < IDX_COUNT; i++)
                index_unlink(s, e, i);
            hmap_remove(&s->entries, &e->node);
            r = -ENOMEM;
        }
    }
    if (r == 0) {
        s->bytes += e->bytes;
        kop_gauge_add(s->g_bytes, (double)e->bytes - (prev ? (double)prev->bytes : 0));
        if (!prev)
            kop_gauge_add(s->g_objects, 1);
        if (ret_new)
            *ret_new = json_incref(e->obj);
        e = NULL;
    } else if (prev) {
        kop_gauge_add(s->g_objects, -1);
        kop_gauge_add(s->g_bytes, -(double)prev->bytes);
    }
    pthread_rwlock_unlock(&s->lock);
    if (prev) {
        old = prev->obj;
        prev->obj = NULL;
        entry_free(prev);
    }
    if (ret_old && r == 0)
        *ret_old = old;
    else
        json_decref(old);
out:
    entry_free(e);
    json_decref(stripped);
    free(key);
    json_decref(obj);
    return r;
}

int kop_store_delete(struct kop_store *s, const char *kind, const char *ns, const char *name,
                     json_t **ret_old)
{
    if (!s)
        return -EINVAL;
    char *key = make_key(kind, ns, name);
    if (!key)
        return -EINVAL;
    uint64_t h = hash_str(key);
    pthread_rwlock_wrlock(&s->lock);
    struct entry *e = (struct entry *)hmap_find(&s->entries, key, h);
    if (e) {
        for (int i = 0; i < IDX_COUNT; i++)
            index_unlink(s, e, i);
        hmap_remove(&s->entries, &e->node);
        s->bytes -= e->bytes;
        kop_gauge_add(s->g_objects, -1);
        kop_gauge_add(s->g_bytes, -(double)e->bytes);
    }
    pthread_rwlock_unlock(&s->lock);
    free(key);
    if (!e)
        return -ENOENT;
    if (ret_old) {
        *ret_old = e->obj;
        e->obj = NULL;
    }
    entry_free(e);
    return 0;
}

json_t *kop_store_get_key(struct kop_store *s, const char *key)
{
    if (!s || !key)
        return NULL;
    uint64_t h = hash_str(key);
    json_t *v = NULL;
    pthread_rwlock_rdlock(&s->lock);
    struct entry *e = (struct entry *)hmap_find(&s->entries, key, h);
    if (e)
        v = json_incref(e->obj);
    pthread_rwlock_unlock(&s->lock);
    return v;
}

json_t *kop_store_get(struct kop_store *s, const char *kind, const char *ns, const char *name)
{
    char *key = make_key(kind, ns, name);
    json_t *v = kop_store_get_key(s, key);
    free(key);
    return v;
}

/* Walk one index bucket, filtering on kind and namespace. */
static int collect(struct kop_store *s, int idx, const char *value, const char *kind,
                   const char *ns, json_t *out, bool keys)
{
    struct bucket *b = (struct bucket *)hmap_find(&s->index[idx], value, hash_str(value));
    if (!b)
        return 0;
    for (struct entry *e = b->head; e; e = e->idx[idx].next) {
        if (kind && (e->idx[IDX_KIND].b == NULL || strcmp(e->idx[IDX_KIND].b->node.key, kind)))
            continue;
        if (ns && (e->idx[IDX_NS].b == NULL || strcmp(e->idx[IDX_NS].b->node.key, ns)))
            continue;
        int r = keys ? json_object_set_new(out, e->node.key, json_true())
                     : json_array_append(out, e->obj);
        if (r < 0)
            return -ENOMEM;
    }
    return 0;
}

static json_t *list_common(struct kop_store *s, const char *kind, const char *ns, bool keys)
{
    if (!s)
        return NULL;
    json_t *out = keys ? json_object() : json_array();
    if (!out)
        return NULL;
    int r = 0;
    pthread_rwlock_rdlock(&s->lock);
    if (ns) {
        r = collect(s, IDX_NS, ns, kind, NULL, out, keys);
    } else if (kind) {
        r = collect(s, IDX_KIND, kind, NULL, NULL, out, keys);
    } else {
        for (size_t i = 0; i < s->entries.cap && r == 0; i++)
            for (struct hnode *n = s->entries.tab[i]; n && r == 0; n = n->next) {
                struct entry *e = (struct entry *)n;
                r = keys ? json_object_set_new(out, e->node.key, json_true())
                         : json_array_append(out, e->obj);
            }
    }
    pthread_rwlock_unlock(&s->lock);
    if (r < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *kop_store_list(struct kop_store *s, const char *kind, const char *ns)
{
    return list_common(s, kind, ns, false);
}

json_t *kop_store_keys(struct kop_store *s, const char *kind, const char *ns)
{
    return list_common(s, kind, ns, true);
}

json_t *kop_store_list_by_owner(struct kop_store *s, const char *owner_uid, const char *kind)
{
    if (!s || !owner_uid)
        return NULL;
    json_t *out = json_array();
    if (!out)
        return NULL;
    pthread_rwlock_rdlock(&s->lock);
    int r = collect(s, IDX_OWNER, owner_uid, kind, NULL, out, false);
    pthread_rwlock_unlock(&s->lock);
    if (r < 0) {
        json_decref(out);
        return NULL;
    }
    return out;
}

size_t kop_store_count(struct kop_store *s)
{
    if (!s)
        return 0;
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->entries.n;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t kop_store_bytes(struct kop_store *s)
{
    if (!s)
        return 0;
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->bytes;
    pthread_rwlock_unlock(&s->lock);
    return n;
}
