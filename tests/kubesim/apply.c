/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim server-side apply and managedFields, after
 * sigs.k8s.io/structured-merge-diff (merge/update.go, typed/compare.go,
 * fieldpath/serialize.go) and apimachinery's pkg/util/managedfields
 * (internal/conflict.go for the 409 text, internal/stripmeta.go for the
 * fields nobody owns).
 *
 * A field set is a JSON object whose keys are paths, each the compact
 * JSON array of its FieldsV1 elements ("f:name", "k:{\"name\":\"x\"}",
 * "v:\"value\"", "i:3"); it becomes the FieldsV1 tree of a
 * managedFields entry and back (a member that has children carries ".").
 *
 * Ownership:
 *  - Apply: the applier's set is the applied configuration's leaves and
 *    list elements. A field another manager owns whose value the apply
 *    changes is a conflict (409 naming the managers and the fields) unless
 *    force=true, which takes it over. Fields the applier applied before,
 *    no longer applies and nobody else owns are removed from the object.
 *  - Update (create, PUT, the other patches): the writer gains every field
 *    its write added or changed (an added subtree with all its nodes, as
 *    typed/compare.go's Added), the other managers lose them, and removed
 *    fields leave every set. For a create, "before" is the JSON of the
 *    kind's zero value, so fields a Go struct always serializes are not
 *    marked added.
 *  - Lists merge by key where the Kubernetes types say so (a small table:
 *    containers, env, volumes, ... by name; container ports by
 *    containerPort+protocol, service ports by port+protocol, ...),
 *    finalizers are a set, every other list is atomic; LabelSelectors are
 *    atomic structs. Custom resources use the same table (no
 *    x-kubernetes-list-type yet).
 *
 * Thread-safety: touches only its arguments.
 */
#include "kubesim.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- schema table ------------------------------------------------------------ */

enum list_kind { LIST_ATOMIC, LIST_MAP, LIST_SET };

/* How the list at field (inside parent) merges; keys for LIST_MAP. */
static enum list_kind list_kind(const char *parent, const char *field, const char *const **keys)
{
    static const char *const name[] = {"name", NULL};
    static const char *const cport[] = {"containerPort", "protocol", NULL};
    static const char *const sport[] = {"port", "protocol", NULL};
    static const char *const mount[] = {"mountPath", NULL};
    static const char *const dev[] = {"devicePath", NULL};
    static const char *const type[] = {"type", NULL};
    static const char *const uid[] = {"uid", NULL};
    static const char *const ip[] = {"ip", NULL};
    static const char *const topo[] = {"topologyKey", "whenUnsatisfiable", NULL};
    static const char *const gate[] = {"conditionType", NULL};
    parent = ks_nz(parent);
    if (strcmp(field, "containers") == 0 || strcmp(field, "initContainers") == 0 ||
        strcmp(field, "ephemeralContainers") == 0 || strcmp(field, "volumes") == 0 ||
        strcmp(field, "env") == 0 || strcmp(field, "imagePullSecrets") == 0 ||
        strcmp(field, "webhooks") == 0 || strcmp(field, "resourceClaims") == 0 ||
        strcmp(field, "readinessGates") == 0) {
        /* static: a compound literal here would die with this block */
        *keys = strcmp(field, "readinessGates") == 0 ? gate : name;
        return LIST_MAP;
    }
    if (strcmp(field, "ports") == 0) {
        if (strcmp(parent, "containers") == 0 || strcmp(parent, "initContainers") == 0 ||
            strcmp(parent, "ephemeralContainers") == 0) {
            *keys = cport;
            return LIST_MAP;
        }
        if (strcmp(parent, "spec") == 0) { /* Service */
            *keys = sport;
            return LIST_MAP;
        }
        return LIST_ATOMIC;
    }
    if (strcmp(field, "volumeMounts") == 0) {
        *keys = mount;
        return LIST_MAP;
    }
    if (strcmp(field, "volumeDevices") == 0) {
        *keys = dev;
        return LIST_MAP;
    }
    if (strcmp(field, "conditions") == 0) {
        *keys = type;
        return LIST_MAP;
    }
    if (strcmp(field, "ownerReferences") == 0) {
        *keys = uid;
        return LIST_MAP;
    }
    if (strcmp(field, "hostAliases") == 0) {
        *keys = ip;
        return LIST_MAP;
    }
    if (strcmp(field, "topologySpreadConstraints") == 0) {
        *keys = topo;
        return LIST_MAP;
    }
    if (strcmp(field, "finalizers") == 0 || strcmp(field, "clusterIPs") == 0 ||
        strcmp(field, "ipFamilies") == 0)
        return LIST_SET;
    return LIST_ATOMIC;
}

/* LabelSelector is +structType=atomic. */
static bool atomic_struct(const json_t *v)
{
    return json_is_object(v) &&
           (json_object_get(v, "matchLabels") || json_object_get(v, "matchExpressions"));
}

/* The key of a list element ("k:{...}" text, malloc'd) or NULL. */
static char *elem_key(const json_t *elem, const char *const *keys, const char *parent_field)
{
    if (!json_is_object(elem))
        return NULL;
    json_t *k = json_object();
    for (const char *const *p = keys; *p; p++) {
        json_t *v = json_object_get(elem, *p);
        if (!v && strcmp(*p, "protocol") == 0 && parent_field)
            v = json_string("TCP"); /* the key's default */
        else
            json_incref(v);
        if (v)
            json_object_set_new(k, *p, v);
    }
    char *txt = json_object_size(k) ? ks_dump(k, false, NULL) : NULL;
    json_decref(k);
    char *out = txt ? ks_printf("k:%s", txt) : NULL;
    free(txt);
    return out;
}

/* The path element of a list element: "k:{...}" (an element without its
 * keys by index), "v:<json>" for sets. malloc'd */
static char *elem_text(const json_t *e, enum list_kind lk, const char *const *keys,
                       const char *field, size_t i)
{
    char *ek = NULL;
    if (lk == LIST_MAP) {
        ek = elem_key(e, keys, field);
    } else {
        char *t = ks_dump(e, false, NULL);
        ek = ks_printf("v:%s", t ? t : "null");
        free(t);
    }
    return ek ? ek : ks_printf("i:%zu", i);
}

/* ---- field sets ---------------------------------------------------------------- */

static void set_add(json_t *set, const json_t *path)
{
    char *k = ks_dump(path, false, NULL);
    json_object_set_new(set, k, json_true());
    free(k);
}

/* path + elem, new */
static json_t *child(const json_t *path, const char *elem)
{
    json_t *p = json_copy((json_t *)path);
    json_array_append_new(p, json_string(elem));
    return p;
}

static json_t *child_f(const json_t *path, const char *field)
{
    char *e = ks_printf("f:%s", field);
    json_t *p = child(path, e);
    free(e);
    return p;
}

/* The field name of the last path element (back == 0), or of the field
 * that holds it (back == 1: list elements in between are skipped). */
static const char *last_field(const json_t *path, size_t back)
{
    size_t n = json_array_size(path);
    if (n == 0)
        return NULL;
    const char *s = json_string_value(json_array_get(path, n - 1));
    if (back == 0)
        return s && strncmp(s, "f:", 2) == 0 ? s + 2 : NULL;
    for (size_t i = n - 1; i > 0; i--) {
        s = json_string_value(json_array_get(path, i - 1));
        if (s && strncmp(s, "f:", 2) == 0)
            return s + 2;
    }
    return NULL;
}

/* Every path of v under path into set: all nodes when all_members (an
 * added subtree), else only leaves and list elements (an applied
 * configuration). */
static void collect(const json_t *v, const json_t *path, json_t *set, bool all_members)
{
    const char *field = last_field(path, 0);
    if (json_is_object(v) && !atomic_struct(v)) {
        if ((all_members && json_array_size(path)) || json_object_size(v) == 0)
            set_add(set, path);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            json_t *p = child_f(path, k);
            collect(x, p, set, all_members);
            json_decref(p);
        }
        return;
    }
    const char *const *keys = NULL;
    enum list_kind lk =
        json_is_array(v) && field ? list_kind(last_field(path, 1), field, &keys) : LIST_ATOMIC;
    if (json_is_array(v) && lk != LIST_ATOMIC) {
        if (all_members || json_array_size(v) == 0)
            set_add(set, path);
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            char *ek = elem_text(e, lk, keys, field, i);
            json_t *p = child(path, ek);
            free(ek);
            set_add(set, p);
            if (lk == LIST_MAP && json_is_object(e)) {
                const char *k;
                json_t *x;
                json_object_foreach(e, k, x)
                {
                    json_t *q = child_f(p, k);
                    collect(x, q, set, all_members);
                    json_decref(q);
                }
            }
            json_decref(p);
        }
        return;
    }
    set_add(set, path);
}

/* idx[path key] = the value there, for every path collect names with all
 * members (the first element of a key given twice, as value_at finds it):
 * a lookup per path in one step where value_at walks every list. */
static void index_values(const json_t *v, const json_t *path, json_t *idx)
{
    char *key = ks_dump(path, false, NULL);
    if (!json_object_get(idx, key))
        json_object_set(idx, key, (json_t *)v);
    free(key);
    const char *field = last_field(path, 0);
    if (json_is_object(v) && !atomic_struct(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            json_t *p = child_f(path, k);
            index_values(x, p, idx);
            json_decref(p);
        }
        return;
    }
    const char *const *keys = NULL;
    enum list_kind lk =
        json_is_array(v) && field ? list_kind(last_field(path, 1), field, &keys) : LIST_ATOMIC;
    if (!json_is_array(v) || lk == LIST_ATOMIC)
        return;
    size_t i;
    json_t *e;
    json_array_foreach((json_t *)v, i, e)
    {
        char *ek = elem_text(e, lk, keys, field, i);
        json_t *p = child(path, ek);
        free(ek);
        if (lk == LIST_MAP && json_is_object(e)) {
            index_values(e, p, idx);
        } else {
            char *pk = ks_dump(p, false, NULL);
            if (!json_object_get(idx, pk))
                json_object_set(idx, pk, e);
            free(pk);
        }
        json_decref(p);
    }
}

/* Paths nobody owns (stripmeta.go), and what a status or main-resource
 * write resets. */
static bool ignored(const char *key, const char *subresource, bool has_status)
{
    static const char *const strip[] = {
        "[\"f:apiVersion\"",
        "[\"f:kind\"",
        "[\"f:metadata\"]",
        "[\"f:metadata\",\"f:name\"",
        "[\"f:metadata\",\"f:namespace\"",
        "[\"f:metadata\",\"f:creationTimestamp\"",
        "[\"f:metadata\",\"f:selfLink\"",
        "[\"f:metadata\",\"f:uid\"",
        "[\"f:metadata\",\"f:generation\"",
        "[\"f:metadata\",\"f:managedFields\"",
        "[\"f:metadata\",\"f:resourceVersion\"",
        "[\"f:metadata\",\"f:deletionTimestamp\"",
        "[\"f:metadata\",\"f:deletionGracePeriodSeconds\"",
        NULL,
    };
    for (const char *const *s = strip; *s; s++) {
        size_t n = strlen(*s);
        if (strncmp(key, *s, n) == 0 && (key[n] == ',' || key[n] == ']' || key[n - 1] == ']'))
            return true;
    }
    bool status = strncmp(key, "[\"f:status\"", 11) == 0;
    if (subresource && strcmp(subresource, "status") == 0)
        return strncmp(key, "[\"f:spec\"", 9) == 0;
    return has_status && status;
}

static void set_filter(json_t *set, const char *subresource, bool has_status)
{
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(set, tmp, k, v)
    {
        if (ignored(k, subresource, has_status))
            json_object_del(set, k);
    }
}

/* Is path key a or a descendant of prefix key p? */
static bool under(const char *a, const char *p)
{
    size_t n = strlen(p);
    if (strcmp(a, p) == 0)
        return true;
    return n > 1 && strncmp(a, p, n - 1) == 0 && a[n - 1] == ',';
}

/* Does set hold a path strictly under path key p? */
static bool holds_under(const json_t *set, const char *p)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)set, k, v)
    {
        if (strcmp(k, p) != 0 && under(k, p))
            return true;
    }
    return false;
}

/* Remove from set every path in (or under, when deep) rm. */
static void set_sub(json_t *set, const json_t *rm, bool deep)
{
    const char *k, *r;
    json_t *v, *x;
    void *tmp;
    json_object_foreach_safe(set, tmp, k, v)
    {
        if (json_object_get(rm, k)) {
            json_object_del(set, k);
            continue;
        }
        if (!deep)
            continue;
        json_object_foreach((json_t *)rm, r, x)
        {
            if (under(k, r)) {
                json_object_del(set, k);
                break;
            }
        }
    }
}

/* FieldsV1 tree of a set. @ref new */
static json_t *set_to_fields(const json_t *set)
{
    json_t *root = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)set, k, v)
    {
        json_t *path = json_loads(k, 0, NULL);
        json_t *node = root;
        size_t i;
        json_t *e;
        json_array_foreach(path, i, e)
        {
            json_t *c = json_object_get(node, json_string_value(e));
            if (!c) {
                c = json_object();
                json_object_set_new(node, json_string_value(e), c);
            }
            node = c;
        }
        if (node != root)
            json_object_set_new(node, ".", json_object());
        json_decref(path);
    }
    return root;
}

static int elem_rank(const char *k)
{
    switch (k[0]) {
    case '.':
        return 0;
    case 'f':
        return 1;
    case 'k':
        return 2;
    case 'v':
        return 3;
    default:
        return 4;
    }
}

/* fieldpath's order: "." first, then fields by name, keys, values,
 * indices (keys and values compared as their JSON text). */
static int elem_cmp(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int rx = elem_rank(x), ry = elem_rank(y);
    if (rx != ry)
        return rx - ry;
    if (rx == 4) {
        long long ix = strtoll(x + 2, NULL, 10), iy = strtoll(y + 2, NULL, 10);
        return ix < iy ? -1 : ix > iy;
    }
    return strcmp(x, y);
}

/* Drop "." from nodes without children (a member leaf is {}), and put
 * children in fieldpath's order. */
static void fields_tidy(json_t *node)
{
    const char *k;
    json_t *v;
    json_object_foreach(node, k, v)
    {
        if (strcmp(k, ".") != 0)
            fields_tidy(v);
    }
    if (json_object_size(node) == 1 && json_object_get(node, "."))
        json_object_del(node, ".");
    size_t n = json_object_size(node), i = 0;
    if (n < 2)
        return;
    const char **keys = calloc(n, sizeof(*keys));
    if (!keys)
        abort();
    json_object_foreach(node, k, v)
    {
        keys[i++] = k;
    }
    qsort(keys, n, sizeof(*keys), elem_cmp);
    json_t *sorted = json_object();
    for (i = 0; i < n; i++)
        json_object_set(sorted, keys[i], json_object_get(node, keys[i]));
    free(keys);
    json_object_clear(node);
    json_object_update(node, sorted);
    json_decref(sorted);
}

static void fields_to_set(const json_t *node, const json_t *path, json_t *set)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)node, k, v)
    {
        if (strcmp(k, ".") == 0) {
            set_add(set, path);
            continue;
        }
        json_t *p = child(path, k);
        if (json_object_size(v) == 0)
            set_add(set, p);
        else
            fields_to_set(v, p, set);
        json_decref(p);
    }
}

/* ".spec.containers[name=\"x\"].image" as SMD's Path.String(). malloc'd */
static char *path_text(const char *key)
{
    json_t *path = json_loads(key, 0, NULL);
    char *out = ks_strdup("");
    size_t i;
    json_t *e;
    json_array_foreach(path, i, e)
    {
        const char *s = ks_nz(json_string_value(e));
        char *piece = NULL;
        if (strncmp(s, "f:", 2) == 0) {
            piece = ks_printf(".%s", s + 2);
        } else if (strncmp(s, "v:", 2) == 0) {
            piece = ks_printf("[=%s]", s + 2);
        } else if (strncmp(s, "i:", 2) == 0) {
            piece = ks_printf("[%s]", s + 2);
        } else if (strncmp(s, "k:", 2) == 0) {
            json_t *kv = json_loads(s + 2, 0, NULL);
            char *inner = ks_strdup("");
            const char *k;
            json_t *v;
            json_object_foreach(kv, k, v)
            {
                char *t = ks_dump(v, false, NULL);
                char *n = ks_printf("%s%s%s=%s", inner, *inner ? "," : "", k, t ? t : "");
                free(t);
                free(inner);
                inner = n;
            }
            json_decref(kv);
            piece = ks_printf("[%s]", inner);
            free(inner);
        } else {
            piece = ks_strdup(s);
        }
        char *n = ks_printf("%s%s", out, piece);
        free(piece);
        free(out);
        out = n;
    }
    json_decref(path);
    return out;
}

/* The value at path in v, or NULL. @ref borrow */
static json_t *value_at(const json_t *v, const char *key, json_t **ret_parent, size_t *ret_index)
{
    json_t *path = json_loads(key, 0, NULL);
    json_t *cur = (json_t *)v, *parent = NULL;
    size_t idx = (size_t)-1;
    size_t i;
    json_t *e;
    json_array_foreach(path, i, e)
    {
        const char *s = ks_nz(json_string_value(e));
        parent = cur;
        idx = (size_t)-1;
        if (strncmp(s, "f:", 2) == 0) {
            cur = json_object_get(cur, s + 2);
        } else if (json_is_array(cur)) {
            json_t *want = NULL;
            if (s[0] == 'k' || s[0] == 'v')
                want = json_loads(s + 2, JSON_DECODE_ANY, NULL);
            json_t *found = NULL;
            size_t j;
            json_t *x;
            json_array_foreach(cur, j, x)
            {
                bool hit = false;
                if (s[0] == 'i') {
                    hit = (size_t)strtoul(s + 2, NULL, 10) == j;
                } else if (s[0] == 'v') {
                    hit = json_equal(x, want);
                } else if (s[0] == 'k' && json_is_object(x)) {
                    hit = true;
                    const char *k;
                    json_t *kv;
                    json_object_foreach(want, k, kv)
                    {
                        json_t *have = json_object_get(x, k);
                        if (!have && strcmp(k, "protocol") == 0 &&
                            strcmp(ks_nz(json_string_value(kv)), "TCP") == 0)
                            continue;
                        if (!have || !json_equal(have, kv))
                            hit = false;
                    }
                }
                if (hit) {
                    found = x;
                    idx = j;
                    break;
                }
            }
            json_decref(want);
            cur = found;
        } else {
            cur = NULL;
        }
        if (!cur)
            break;
    }
    json_decref(path);
    if (ret_parent)
        *ret_parent = cur ? parent : NULL;
    if (ret_index)
        *ret_index = idx;
    return cur;
}

/* Remove the node at path from v (in place). */
static void remove_at(json_t *v, const char *key)
{
    json_t *parent = NULL;
    size_t idx = (size_t)-1;
    if (!value_at(v, key, &parent, &idx) || !parent)
        return;
    if (json_is_array(parent)) {
        json_array_remove(parent, idx);
        return;
    }
    json_t *path = json_loads(key, 0, NULL);
    const char *last = json_string_value(json_array_get(path, json_array_size(path) - 1));
    if (last && strncmp(last, "f:", 2) == 0)
        json_object_del(parent, last + 2);
    json_decref(path);
}

/* ---- diff (Update) --------------------------------------------------------------- */

static void diff(const json_t *o, const json_t *n, const json_t *path, json_t *changed,
                 json_t *removed)
{
    if (!o || (json_is_null(o) && (json_is_object(n) || json_is_array(n)))) {
        if (!o) {
            collect(n, path, changed, true);
            return;
        }
        o = NULL; /* null -> value: its contents are added, the node was there */
    }
    if (!n) {
        set_add(removed, path);
        return;
    }
    if (o && json_equal(o, n)) /* nothing below changed */
        return;
    const char *field = last_field(path, 0);
    if (json_is_object(n) && (!o || json_is_object(o)) && !atomic_struct(n) &&
        !(o && atomic_struct(o))) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)n, k, x)
        {
            json_t *p = child_f(path, k);
            diff(o ? json_object_get(o, k) : NULL, x, p, changed, removed);
            json_decref(p);
        }
        json_object_foreach((json_t *)o, k, x)
        {
            if (!json_object_get(n, k)) {
                json_t *p = child_f(path, k);
                set_add(removed, p);
                json_decref(p);
            }
        }
        return;
    }
    const char *const *keys = NULL;
    enum list_kind lk =
        json_is_array(n) && field ? list_kind(last_field(path, 1), field, &keys) : LIST_ATOMIC;
    if (json_is_array(n) && (!o || json_is_array(o)) && lk != LIST_ATOMIC) {
        json_t *seen = json_object();
        json_t *olds = json_object(); /* element path -> old element */
        size_t i;
        json_t *e;
        json_array_foreach(o, i, e)
        {
            char *ek = elem_text(e, lk, keys, field, i);
            if (!json_object_get(olds, ek))
                json_object_set(olds, ek, e);
            free(ek);
        }
        json_array_foreach(n, i, e)
        {
            char *ek = elem_text(e, lk, keys, field, i);
            json_object_set_new(seen, ek, json_true());
            json_t *p = child(path, ek);
            const json_t *oe = json_object_get(olds, ek);
            if (lk == LIST_SET) {
                if (!oe)
                    set_add(changed, p);
            } else {
                diff(oe, e, p, changed, removed);
            }
            json_decref(p);
            free(ek);
        }
        const char *ok;
        json_object_foreach(olds, ok, e)
        {
            if (!json_object_get(seen, ok)) {
                json_t *p = child(path, ok);
                set_add(removed, p);
                json_decref(p);
            }
        }
        json_decref(olds);
        json_decref(seen);
        return;
    }
    if (!o || !json_equal(o, n))
        set_add(changed, path);
}

/* ---- managedFields ------------------------------------------------------------------ */

struct entry {
    json_t *meta;   /* the entry without fieldsV1, @ref owned */
    json_t *fields; /* its fieldsV1 as read, @ref owned; NULL for a new entry */
    json_t *set;    /* @ref owned; NULL until needed (an Update leaves most
                     * entries alone and writes their fieldsV1 back as read) */
    long long t;    /* its time in Unix seconds, 0 without one */
    bool has_t;
};

struct managed {
    struct entry *e;
    size_t n;
};

static json_t *entry_set(struct entry *e)
{
    if (!e->set) {
        json_t *root = json_array();
        e->set = json_object();
        fields_to_set(e->fields, root, e->set);
        json_decref(root);
    }
    return e->set;
}

/* Does the entry's tree reach any path of set (the path itself or a
 * node below it)? */
static bool touches(const struct entry *e, const json_t *set)
{
    if (e->set)
        return true;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)set, k, v)
    {
        json_t *path = json_loads(k, 0, NULL);
        const json_t *node = e->fields;
        size_t i;
        json_t *pe;
        json_array_foreach(path, i, pe)
        {
            node = json_object_get(node, ks_nz(json_string_value(pe)));
            if (!node)
                break;
        }
        json_decref(path);
        if (node)
            return true;
    }
    return false;
}

/* A metav1.Time as encoding/json reads it (RFC 3339, any offset; the
 * fraction is dropped when it is written again): Unix seconds. */
static bool parse_time(const char *s, long long *ret_t)
{
    struct tm tm = {0};
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end)
        return false;
    if (*end == '.') {
        end++;
        if (!isdigit((unsigned char)*end))
            return false;
        while (isdigit((unsigned char)*end))
            end++;
    }
    long off = 0;
    if (*end == 'Z' || *end == 'z') {
        end++;
    } else if (*end == '+' || *end == '-') {
        int hh = 0, mm = 0, n = 0;
        if (sscanf(end + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5)
            return false;
        off = (hh * 3600L + mm * 60L) * (*end == '-' ? -1 : 1);
        end += 6;
    } else {
        return false;
    }
    if (*end)
        return false;
    *ret_t = (long long)timegm(&tm) - off;
    return true;
}

/* Unix seconds as metav1.Time writes them (UTC, RFC 3339). Returns buf. */
static const char *utc_text(long long t, char *buf, size_t len)
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

/* Why a FieldsV1 tree does not decode as a field set (structured-merge-
 * diff's fieldpath/serialize.go, Set.FromJSON): NULL if it does.
 * malloc'd */
static char *fields_error(const json_t *node)
{
    if (!json_is_object(node))
        return ks_strdup("expected object");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)node, k, v)
    {
        if (strcmp(k, ".") == 0)
            continue;
        bool ok = false;
        if (strncmp(k, "f:", 2) == 0) {
            ok = true;
        } else if (strncmp(k, "k:", 2) == 0 || strncmp(k, "v:", 2) == 0) {
            json_t *x = json_loads(k + 2, JSON_DECODE_ANY, NULL);
            ok = x && (k[0] == 'v' || json_is_object(x));
            json_decref(x);
        } else if (strncmp(k, "i:", 2) == 0) {
            char *e = NULL;
            strtol(k + 2, &e, 10);
            ok = k[2] && e && !*e;
        }
        if (!ok) {
            char *q = ks_go_quote(k);
            char *m = ks_printf("unrecognized path element %s", q);
            free(q);
            return m;
        }
        char *err = fields_error(v);
        if (err)
            return err;
    }
    return NULL;
}

static bool is_op(const char *op)
{
    return op && (strcmp(op, "Apply") == 0 || strcmp(op, "Update") == 0);
}

char *ks_ssa_decode_error(const json_t *mf)
{
    size_t i;
    json_t *x;
    json_array_foreach(mf, i, x)
    {
        if (!json_is_object(x))
            return ks_printf("managed fields entry %zu is not an object", i);
        if (!is_op(json_string_value(json_object_get(x, "operation"))))
            return ks_strdup("operation must be `Apply` or `Update`");
        const char *av = json_string_value(json_object_get(x, "apiVersion"));
        if (!av || !*av)
            return ks_strdup("apiVersion must not be empty");
        const char *ft = json_string_value(json_object_get(x, "fieldsType"));
        if (!ft || !*ft)
            return ks_printf("missing fieldsType in managed fields entry %zu", i);
        if (strcmp(ft, "FieldsV1") != 0) {
            char *q = ks_go_quote(ft);
            char *m = ks_printf("invalid fieldsType %s in managed fields entry %zu", q, i);
            free(q);
            return m;
        }
        const json_t *t = json_object_get(x, "time");
        long long secs;
        if (t && !json_is_null(t) && !parse_time(json_string_value(t), &secs))
            return ks_printf("managed fields entry %zu: invalid time", i);
        const json_t *f = json_object_get(x, "fieldsV1");
        char *err = f && !json_is_null(f) ? fields_error(f) : NULL;
        if (err) {
            /* upstream prints the whole entry (%v of the Go struct) here */
            char *m = ks_printf("error decoding versioned set from managed fields entry %zu: "
                                "error decoding set: %s",
                                i, err);
            free(err);
            return m;
        }
    }
    return NULL;
}

static bool decodes(const json_t *mf)
{
    char *err = ks_ssa_decode_error(mf);
    free(err);
    return !err;
}

/* isResetManagedFields (fieldmanager.go): an empty list, or one entry with
 * every member at its zero value. */
static bool is_reset(const json_t *mf)
{
    if (json_array_size(mf) == 0)
        return true;
    if (json_array_size(mf) != 1 || !json_is_object(json_array_get(mf, 0)))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(json_array_get(mf, 0), k, v)
    {
        if (!json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return false;
    }
    return true;
}

/* BuildManagerIdentifier (managedfields.go): manager, operation,
 * subresource, and an Update's apiVersion. */
static bool same_manager(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"manager", "operation", "subresource", "apiVersion"};
    const char *op = ks_nz(json_string_value(json_object_get(a, "operation")));
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (i == 3 && strcmp(op, "Apply") == 0)
            break;
        if (strcmp(ks_nz(json_string_value(json_object_get(a, keys[i]))),
                   ks_nz(json_string_value(json_object_get(b, keys[i])))) != 0)
            return false;
    }
    return true;
}

/* The entries of mf, decoded (ks_ssa_decode_error must have passed): one
 * per manager identifier, the last one of each as DecodeManagedFields'
 * map keeps it. normalize: the fieldsV1 of each is written again from
 * its set (a client's, as SetToFields encodes it), not as read. */
static void managed_load(const json_t *mf, struct managed *m, bool normalize)
{
    char tbuf[32];
    m->n = 0;
    m->e = calloc(json_array_size(mf) + 1, sizeof(*m->e));
    if (!m->e)
        abort();
    size_t i;
    json_t *x;
    json_array_foreach(mf, i, x)
    {
        if (!json_is_object(x))
            continue;
        struct entry *e = NULL;
        for (size_t j = 0; j < m->n && !e; j++) {
            if (same_manager(m->e[j].meta, x)) {
                e = &m->e[j];
                json_decref(e->meta);
                json_decref(e->fields);
                json_decref(e->set);
                memset(e, 0, sizeof(*e));
            }
        }
        if (!e)
            e = &m->e[m->n++];
        e->meta = json_deep_copy(x);
        json_object_del(e->meta, "fieldsV1");
        json_t *f = json_object_get(x, "fieldsV1");
        e->fields = json_is_object(f) ? json_incref(f) : json_object();
        e->has_t = parse_time(json_string_value(json_object_get(x, "time")), &e->t);
        /* the time as metav1.Time writes it again (manager_text reads it) */
        if (e->has_t)
            json_object_set_new(e->meta, "time", json_string(utc_text(e->t, tbuf, sizeof(tbuf))));
        else
            json_object_del(e->meta, "time");
        if (normalize)
            entry_set(e);
    }
}

static void managed_free(struct managed *m)
{
    for (size_t i = 0; i < m->n; i++) {
        json_decref(m->e[i].meta);
        json_decref(m->e[i].fields);
        json_decref(m->e[i].set);
    }
    free(m->e);
}

/* Is e the entry of manager/op/sub (and an Update's apiVersion: the
 * identifier BuildManagerInfoManager gives the writer)? */
static bool is_entry(const struct entry *e, const char *manager, const char *op, const char *sub,
                     const char *api_version)
{
    return strcmp(ks_nz(json_string_value(json_object_get(e->meta, "manager"))), manager) == 0 &&
           strcmp(ks_nz(json_string_value(json_object_get(e->meta, "operation"))), op) == 0 &&
           strcmp(ks_nz(json_string_value(json_object_get(e->meta, "subresource"))), ks_nz(sub)) ==
               0 &&
           (strcmp(op, "Apply") == 0 ||
            strcmp(ks_nz(json_string_value(json_object_get(e->meta, "apiVersion"))),
                   ks_nz(api_version)) == 0);
}

/* The entry of manager/op/sub, created when missing. */
static struct entry *managed_entry(struct managed *m, const struct ks_ssa_ctx *c, const char *op)
{
    for (size_t i = 0; i < m->n; i++)
        if (is_entry(&m->e[i], c->manager, op, c->subresource, c->api_version))
            return &m->e[i];
    struct entry *ne = realloc(m->e, (m->n + 1) * sizeof(*m->e));
    if (!ne)
        abort();
    m->e = ne;
    struct entry *e = &m->e[m->n++];
    e->meta = json_pack("{s:s,s:s}", "manager", c->manager, "operation", op);
    e->fields = NULL;
    e->set = json_object();
    return e;
}

/* One entry as it is written: its ManagedFieldsEntry and what it sorts by. */
struct out_entry {
    json_t *json;
    long long t;
};

static int str_member_cmp(const json_t *a, const json_t *b, const char *k)
{
    return strcmp(ks_nz(json_string_value(json_object_get(a, k))),
                  ks_nz(json_string_value(json_object_get(b, k))));
}

/* sortEncodedManagedFields (managedfields.go): operation, time (seconds),
 * manager, apiVersion, subresource. */
static int out_cmp(const void *pa, const void *pb)
{
    const struct out_entry *a = pa, *b = pb;
    int c = str_member_cmp(a->json, b->json, "operation");
    if (c)
        return c;
    if (a->t != b->t)
        return a->t < b->t ? -1 : 1;
    if ((c = str_member_cmp(a->json, b->json, "manager")) != 0)
        return c;
    if ((c = str_member_cmp(a->json, b->json, "apiVersion")) != 0)
        return c;
    return str_member_cmp(a->json, b->json, "subresource");
}

/* Write the entries (non-empty ones) into obj's metadata, in the order
 * EncodeObjectManagedFields sorts them. */
static void managed_store(struct managed *m, json_t *obj, struct entry *touched,
                          const struct ks_ssa_ctx *c)
{
    struct out_entry *outs = calloc(m->n + 1, sizeof(*outs));
    if (!outs)
        abort();
    size_t n = 0;
    long long now = (long long)time(NULL);
    for (size_t i = 0; i < m->n; i++) {
        struct entry *e = &m->e[i];
        json_t *fields = NULL;
        if (e->set) {
            fields = set_to_fields(e->set);
            fields_tidy(fields);
        } else {
            fields = json_incref(e->fields); /* stored objects are frozen */
        }
        if (json_object_size(fields) == 0) {
            json_decref(fields);
            continue;
        }
        /* ManagedFieldsEntry order: manager, operation, apiVersion, time,
         * fieldsType, fieldsV1, subresource */
        json_t *out = json_object();
        json_object_set(out, "manager", json_object_get(e->meta, "manager"));
        json_object_set(out, "operation", json_object_get(e->meta, "operation"));
        if (e == touched)
            json_object_set_new(out, "apiVersion", json_string(c->api_version));
        else if (json_object_get(e->meta, "apiVersion"))
            json_object_set(out, "apiVersion", json_object_get(e->meta, "apiVersion"));
        long long t = e == touched ? now : e->t;
        if (e == touched || e->has_t) {
            char buf[32];
            json_object_set_new(out, "time", json_string(utc_text(t, buf, sizeof(buf))));
        }
        json_object_set_new(out, "fieldsType", json_string("FieldsV1"));
        json_object_set_new(out, "fieldsV1", fields);
        if (c->subresource && e == touched)
            json_object_set_new(out, "subresource", json_string(c->subresource));
        else if (json_string_length(json_object_get(e->meta, "subresource")))
            json_object_set(out, "subresource", json_object_get(e->meta, "subresource"));
        outs[n].json = out;
        outs[n].t = e == touched || e->has_t ? t : 0;
        n++;
    }
    qsort(outs, n, sizeof(*outs), out_cmp);
    json_t *md = json_object_get(obj, "metadata");
    if (n) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, outs[i].json);
        json_object_set_new(md, "managedFields", arr);
    } else {
        json_object_del(md, "managedFields");
    }
    free(outs);
}

void ks_ssa_update(const json_t *old, json_t *next, const struct ks_ssa_ctx *c)
{
    struct managed m;
    /* decodeLiveOrNew (apimachinery pkg/util/managedfields/internal/
     * fieldmanager.go): a subresource write keeps the live entries; an
     * empty list or one empty entry resets them; entries that decode
     * replace the live ones; none, or ones that do not decode, leave the
     * live ones (which start empty when they do not decode either). */
    const json_t *nmf = json_object_get(json_object_get(next, "metadata"), "managedFields");
    const json_t *lmf = json_object_get(json_object_get(old, "metadata"), "managedFields");
    const json_t *src = NULL; /* none: reset */
    bool from_request = false;
    if (!c->subresource && json_is_array(nmf) && is_reset(nmf)) {
        src = NULL;
    } else if (!c->subresource && json_array_size(nmf) && decodes(nmf)) {
        src = nmf;
        from_request = true;
    } else if (decodes(lmf)) {
        src = lmf;
    }
    managed_load(src, &m, from_request);
    json_t *changed = json_object(), *removed = json_object();
    json_t *root = json_array();
    diff(old, next, root, changed, removed);
    json_decref(root);
    set_filter(changed, c->subresource, c->has_status);
    set_filter(removed, c->subresource, c->has_status);
    struct entry *mine = managed_entry(&m, c, "Update");
    for (size_t i = 0; i < m.n; i++) {
        if (&m.e[i] != mine && touches(&m.e[i], changed))
            set_sub(entry_set(&m.e[i]), changed, false);
        if (touches(&m.e[i], removed))
            set_sub(entry_set(&m.e[i]), removed, true);
    }
    json_object_update(entry_set(mine), changed);
    managed_store(&m, next, json_object_size(changed) ? mine : NULL, c);
    json_decref(changed);
    json_decref(removed);
    managed_free(&m);
}

/* ---- apply ---------------------------------------------------------------------------- */

static json_t *merge(const json_t *l, const json_t *a, const char *parent, const char *field)
{
    if (json_is_object(a) && json_is_object(l) && !atomic_struct(a)) {
        json_t *out = json_deep_copy(l);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)a, k, x)
        {
            json_object_set_new(out, k, merge(json_object_get(l, k), x, field, k));
        }
        return out;
    }
    const char *const *keys = NULL;
    enum list_kind lk = json_is_array(a) && field ? list_kind(parent, field, &keys) : LIST_ATOMIC;
    if (json_is_array(a) && json_is_array(l) && lk != LIST_ATOMIC) {
        /* each applied element replaces (set) or merges into (map) the
         * first live one of its key, or is appended; the live ones are
         * looked up by key in one step */
        json_t *out = json_deep_copy(l);
        json_t *where = json_object(); /* element key -> index in out */
        size_t i;
        json_t *x;
        json_array_foreach(out, i, x)
        {
            char *k = elem_text(x, lk, keys, field, i);
            if (strncmp(k, "i:", 2) != 0 && !json_object_get(where, k))
                json_object_set_new(where, k, json_integer((json_int_t)i));
            free(k);
        }
        json_array_foreach(a, i, x)
        {
            char *xk = elem_text(x, lk, keys, field, i);
            const json_t *at = strncmp(xk, "i:", 2) != 0 ? json_object_get(where, xk) : NULL;
            if (at) {
                size_t j = (size_t)json_integer_value(at);
                json_t *y = json_array_get(out, j);
                json_array_set_new(out, j,
                                   lk == LIST_MAP ? merge(y, x, parent, field) : json_deep_copy(x));
            } else {
                if (strncmp(xk, "i:", 2) != 0)
                    json_object_set_new(where, xk, json_integer((json_int_t)json_array_size(out)));
                json_array_append_new(out, json_deep_copy(x));
            }
            free(xk);
        }
        json_decref(where);
        return out;
    }
    return json_deep_copy(a);
}

static char *manager_text(const struct entry *e)
{
    const char *mgr = ks_nz(json_string_value(json_object_get(e->meta, "manager")));
    const char *op = ks_nz(json_string_value(json_object_get(e->meta, "operation")));
    const char *sub = json_string_value(json_object_get(e->meta, "subresource"));
    char *s = ks_printf("\"%s\"", mgr);
    if (sub && *sub) {
        char *n = ks_printf("%s with subresource \"%s\"", s, sub);
        free(s);
        s = n;
    }
    if (strcmp(op, "Update") == 0) {
        const char *av = ks_nz(json_string_value(json_object_get(e->meta, "apiVersion")));
        const char *t = json_string_value(json_object_get(e->meta, "time"));
        char *n = t ? ks_printf("%s using %s at %s", s, av, t) : ks_printf("%s using %s", s, av);
        free(s);
        s = n;
    }
    return s;
}

int ks_ssa_apply(const json_t *live, const json_t *config, const struct ks_ssa_ctx *c,
                 json_t **ret_next, char **ret_msg, json_t **ret_causes)
{
    struct managed m;
    managed_load(json_object_get(json_object_get(live, "metadata"), "managedFields"), &m, false);
    for (size_t i = 0; i < m.n; i++)
        entry_set(&m.e[i]);
    json_t *applied = json_object();
    json_t *root = json_array();
    collect(config, root, applied, false);
    json_decref(root);
    set_filter(applied, c->subresource, c->has_status);
    struct entry *mine = managed_entry(&m, c, "Apply");

    /* Conflicts: others' fields whose value this apply changes. */
    json_t *causes = json_array();
    json_t *conflicts = json_array(); /* [entry index, path key] */
    json_t *config_idx = json_object(), *live_idx = json_object(), *top = json_array();
    index_values(config, top, config_idx);
    index_values(live, top, live_idx);
    json_decref(top);
    const char *k;
    json_t *x;
    json_object_foreach(applied, k, x)
    {
        json_t *want = json_object_get(config_idx, k);
        json_t *have = json_object_get(live_idx, k);
        /* A list element node is no value of its own: its fields are. */
        json_t *path = json_loads(k, 0, NULL);
        const char *last = json_string_value(json_array_get(path, json_array_size(path) - 1));
        bool elem_node = last && strncmp(last, "f:", 2) != 0;
        json_decref(path);
        if (elem_node || (have && json_equal(want, have)))
            continue;
        for (size_t i = 0; i < m.n; i++) {
            if (&m.e[i] == mine || !json_object_get(m.e[i].set, k))
                continue;
            json_array_append_new(conflicts, json_pack("[i,s]", (int)i, k));
        }
    }
    json_decref(config_idx);
    json_decref(live_idx);
    if (json_array_size(conflicts) && !c->force) {
        size_t n = json_array_size(conflicts);
        char *msg = NULL;
        size_t i;
        json_array_foreach(conflicts, i, x)
        {
            struct entry *e = &m.e[json_integer_value(json_array_get(x, 0))];
            char *who = manager_text(e);
            char *path = path_text(json_string_value(json_array_get(x, 1)));
            char *cm = ks_printf("conflict with %s", who);
            json_array_append_new(causes,
                                  json_pack("{s:s,s:s,s:s}", "reason", "FieldManagerConflict",
                                            "message", cm, "field", path));
            free(cm);
            if (n == 1)
                msg = ks_printf("Apply failed with 1 conflict: conflict with %s: %s", who, path);
            free(who);
            free(path);
        }
        if (n > 1) {
            /* by manager (sorted), paths in order */
            json_t *by = json_object();
            json_array_foreach(conflicts, i, x)
            {
                struct entry *e = &m.e[json_integer_value(json_array_get(x, 0))];
                char *who = manager_text(e);
                json_t *list = json_object_get(by, who);
                if (!list) {
                    list = json_array();
                    json_object_set_new(by, who, list);
                }
                char *path = path_text(json_string_value(json_array_get(x, 1)));
                json_array_append_new(list, json_string(path));
                free(path);
                free(who);
            }
            size_t nb = json_object_size(by), j = 0;
            const char **names = calloc(nb ? nb : 1, sizeof(*names));
            if (!names)
                abort();
            json_object_foreach(by, k, x)
            {
                names[j++] = k;
            }
            for (size_t a = 1; a < nb; a++)
                for (size_t b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
                    const char *t = names[b];
                    names[b] = names[b - 1];
                    names[b - 1] = t;
                }
            char *body = ks_strdup("");
            for (j = 0; j < nb; j++) {
                char *nb2 = ks_printf("%s%sconflicts with %s:", body, j ? "\n" : "", names[j]);
                free(body);
                body = nb2;
                json_t *p;
                size_t q;
                json_array_foreach(json_object_get(by, names[j]), q, p)
                {
                    nb2 = ks_printf("%s\n- %s", body, json_string_value(p));
                    free(body);
                    body = nb2;
                }
            }
            msg = ks_printf("Apply failed with %zu conflicts: %s", n, body);
            free(body);
            free(names);
            json_decref(by);
        }
        *ret_msg = msg;
        *ret_causes = causes;
        *ret_next = NULL;
        json_decref(conflicts);
        json_decref(applied);
        managed_free(&m);
        return -EBUSY;
    }
    json_decref(causes);
    /* force: the applier takes the conflicting fields over */
    size_t i;
    json_array_foreach(conflicts, i, x)
    {
        json_object_del(m.e[json_integer_value(json_array_get(x, 0))].set,
                        json_string_value(json_array_get(x, 1)));
    }
    json_decref(conflicts);

    json_t *next = merge(live, config, NULL, NULL);
    /* Fields this manager applied before, applies no more, and nobody
     * else owns, go. A map or list node (a "." member of its set) that
     * the configuration still holds fields under stays: the applied set
     * has only the leaves and elements. */
    json_object_foreach(mine->set, k, x)
    {
        if (json_object_get(applied, k) || holds_under(applied, k))
            continue;
        bool owned = false;
        for (size_t j = 0; j < m.n && !owned; j++)
            owned = &m.e[j] != mine && json_object_get(m.e[j].set, k);
        if (!owned)
            remove_at(next, k);
    }
    json_object_clear(mine->set);
    json_object_update(mine->set, applied);
    managed_store(&m, next, mine, c);
    json_decref(applied);
    managed_free(&m);
    *ret_next = next;
    *ret_msg = NULL;
    *ret_causes = NULL;
    return 0;
}

/* The rune at s[*i] as Go's range over a string reads it (U+FFFD for a
 * byte that starts no valid UTF-8 sequence, which then counts one byte);
 * *i moves past it. */
static unsigned long next_rune(const char *s, size_t *i)
{
    const unsigned char *p = (const unsigned char *)s + *i;
    unsigned long r;
    size_t n;
    if (p[0] < 0x80) {
        r = p[0];
        n = 1;
    } else if ((p[0] & 0xe0) == 0xc0 && p[0] >= 0xc2) {
        r = p[0] & 0x1fUL;
        n = 2;
    } else if ((p[0] & 0xf0) == 0xe0) {
        r = p[0] & 0x0fUL;
        n = 3;
    } else if ((p[0] & 0xf8) == 0xf0 && p[0] <= 0xf4) {
        r = p[0] & 0x07UL;
        n = 4;
    } else {
        *i += 1;
        return 0xfffd;
    }
    for (size_t k = 1; k < n; k++) {
        if ((p[k] & 0xc0) != 0x80) {
            *i += 1;
            return 0xfffd;
        }
        r = (r << 6) | (p[k] & 0x3fUL);
    }
    static const unsigned long min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (r < min[n] || r > 0x10ffff || (r >= 0xd800 && r <= 0xdfff)) {
        *i += 1;
        return 0xfffd;
    }
    *i += n;
    return r;
}

/* unicode.IsPrint, for the runes that are not: the controls, the spaces
 * other than U+0020, the format characters and the private use areas
 * (unassigned code points, which Go also refuses, are let through). */
static bool go_is_print(unsigned long r)
{
    static const unsigned long no[][2] = {
        {0x00, 0x1f},       {0x7f, 0xa0},        {0xad, 0xad},       {0x600, 0x605},
        {0x61c, 0x61c},     {0x6dd, 0x6dd},      {0x70f, 0x70f},     {0x890, 0x891},
        {0x8e2, 0x8e2},     {0x1680, 0x1680},    {0x180e, 0x180e},   {0x2000, 0x200f},
        {0x2028, 0x202f},   {0x205f, 0x206f},    {0x3000, 0x3000},   {0xe000, 0xf8ff},
        {0xfeff, 0xfeff},   {0xfff9, 0xfffb},    {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
        {0x13430, 0x1343f}, {0x1bca0, 0x1bca3},  {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
        {0xe0020, 0xe007f}, {0xf0000, 0x10ffff},
    };
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (r >= no[i][0] && r <= no[i][1])
            return false;
    return true;
}

#define FIELD_MANAGER_MAX 128    /* validation.FieldManagerMaxLength */
#define SUBRESOURCE_NAME_MAX 256 /* validation.MaxSubresourceNameLength */

char *ks_ssa_default_manager(const char *user_agent)
{
    /* prefixFromUserAgent (apiserver pkg/endpoints/handlers/create.go):
     * up to the first "/", without the runes that are not printable,
     * while fewer than 128 bytes are written */
    const char *ua = ks_nz(user_agent);
    size_t n = strcspn(ua, "/");
    char *prefix = strndup(ua, n);
    char *out = calloc(3 * n + 4, 1);
    if (!prefix || !out)
        abort();
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        unsigned long r = next_rune(prefix, &i);
        if (!go_is_print(r))
            continue;
        if (o >= FIELD_MANAGER_MAX)
            break;
        if (r == 0xfffd && i - at == 1) { /* WriteRune writes the replacement */
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
        } else {
            memcpy(out + o, prefix + at, i - at);
            o += i - at;
        }
    }
    free(prefix);
    return out;
}

json_t *ks_ssa_validate(const json_t *obj)
{
    json_t *causes = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(json_object_get(obj, "metadata"), "managedFields"), i, e)
    {
        /* ValidateManagedFields (apimachinery pkg/apis/meta/v1/validation/
         * validation.go); the operation and fieldsType it checks too are
         * what the field manager's decoding has made sure of */
        const char *op = json_string_value(json_object_get(e, "operation"));
        if (!is_op(op)) {
            char *f = ks_printf("metadata.managedFields[%zu].operation", i);
            ks_invalid_str(causes, f, ks_nz(op), json_pack("[s]", "must be `Apply` or `Update`"));
            free(f);
        }
        const char *ft = json_string_value(json_object_get(e, "fieldsType"));
        if (ft && *ft && strcmp(ft, "FieldsV1") != 0) {
            char *f = ks_printf("metadata.managedFields[%zu].fieldsType", i);
            ks_invalid_str(causes, f, ft, json_pack("[s]", "must be `FieldsV1`"));
            free(f);
        }
        /* ValidateFieldManager */
        const char *mgr = ks_nz(json_string_value(json_object_get(e, "manager")));
        char *f = ks_printf("metadata.managedFields[%zu].manager", i);
        if (strlen(mgr) > FIELD_MANAGER_MAX)
            ks_cause(causes, "FieldValueTooLong", f, "Too long: may not be more than %d bytes",
                     FIELD_MANAGER_MAX);
        for (size_t k = 0; mgr[k];) {
            size_t at = k;
            unsigned long r = next_rune(mgr, &k);
            if (go_is_print(r))
                continue;
            char *m = ks_printf("invalid character U+%04lX (at position %zu)", r, at);
            ks_invalid_str(causes, f, mgr, json_pack("[s]", m));
            free(m);
        }
        free(f);
        if (json_string_length(json_object_get(e, "subresource")) > SUBRESOURCE_NAME_MAX) {
            f = ks_printf("metadata.managedFields[%zu].subresource", i);
            ks_cause(causes, "FieldValueTooLong", f, "Too long: may not be more than %d bytes",
                     SUBRESOURCE_NAME_MAX);
            free(f);
        }
    }
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return NULL;
    }
    return causes;
}
