/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim patches: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and
 * the strategic merge patch kubectl sends for built-in types.
 *
 * Strategic merge patch, as implemented here: maps merge recursively and
 * null deletes; lists whose field has a patchMergeKey in the Kubernetes
 * types merge element by element on that key (containers/initContainers/
 * volumes/env/imagePullSecrets by name, container ports by containerPort,
 * service ports by port, volumeMounts by mountPath, conditions by type,
 * ownerReferences by uid); finalizers merge as a set; every other list is
 * replaced. Directives: $patch (replace/delete/merge), $retainKeys,
 * $setElementOrder/<field>, $deleteFromPrimitiveList/<field>. Not done:
 * merge keys of less common fields (they are replaced as a whole).
 */
#include "kubesim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

json_t *ks_merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *result = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v)
    {
        if (json_is_null(v)) {
            json_object_del(result, k);
            continue;
        }
        json_object_set_new(result, k, ks_merge_patch(json_object_get(result, k), v));
    }
    return result;
}

/* ---- strategic merge patch ------------------------------------------------ */

static const char *merge_key(const char *parent, const char *field)
{
    if (strcmp(field, "containers") == 0 || strcmp(field, "initContainers") == 0 ||
        strcmp(field, "ephemeralContainers") == 0 || strcmp(field, "volumes") == 0 ||
        strcmp(field, "env") == 0 || strcmp(field, "imagePullSecrets") == 0 ||
        strcmp(field, "schedulingGates") == 0 ||
        /* admissionregistration/v1: patchMergeKey "name" on webhooks */
        strcmp(field, "webhooks") == 0)
        return "name";
    if (strcmp(field, "resizePolicy") == 0)
        return "resourceName";
    if (strcmp(field, "podIPs") == 0 || strcmp(field, "hostIPs") == 0)
        return "ip";
    if (strcmp(field, "addresses") == 0 && parent && strcmp(parent, "status") == 0)
        return "type"; /* a Node's status.addresses */
    if (strcmp(field, "ports") == 0)
        return parent && (strcmp(parent, "containers") == 0 ||
                          strcmp(parent, "initContainers") == 0 ||
                          strcmp(parent, "ephemeralContainers") == 0)
                   ? "containerPort"
                   : "port";
    if (strcmp(field, "volumeMounts") == 0)
        return "mountPath";
    if (strcmp(field, "volumeDevices") == 0)
        return "devicePath";
    if (strcmp(field, "conditions") == 0)
        return "type";
    if (strcmp(field, "ownerReferences") == 0)
        return "uid";
    if (strcmp(field, "hostAliases") == 0)
        return "ip";
    if (strcmp(field, "topologySpreadConstraints") == 0)
        return "topologyKey";
    return NULL;
}

static bool primitive_set(const char *field)
{
    return strcmp(field, "finalizers") == 0;
}

static bool is_directive(const char *k)
{
    return k[0] == '$';
}

/* Copy of v without directive keys (recursively). @ref new */
static json_t *strip(const json_t *v)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            if (!is_directive(k))
                json_object_set_new(o, k, strip(x));
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            if (json_is_object(x) &&
                json_is_string(json_object_get(x, "$patch"))) /* list-level directive */
                continue;
            json_array_append_new(a, strip(x));
        }
        return a;
    }
    return json_deep_copy(v);
}

static json_t *smp(const json_t *target, const json_t *patch, const char *ctx, char **err);

/* The index of the first object of list with each value of its merge key
 * mk (the value as sorted JSON text -> index): lookups in one step where
 * a scan per patch element made long lists quadratic. @ref new */
static json_t *key_index(const json_t *list, const char *mk)
{
    json_t *where = json_object();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const json_t *v = json_is_object(e) ? json_object_get(e, mk) : NULL;
        if (!v)
            continue;
        char *k = ks_dump(v, true, NULL);
        if (k && !json_object_get(where, k))
            json_object_set_new(where, k, json_integer((json_int_t)i));
        free(k);
    }
    return where;
}

static json_t *merge_list(const json_t *target, const json_t *patch, const char *field,
                          const char *mk, char **err)
{
    size_t i;
    json_t *p;
    json_array_foreach(patch, i, p)
    {
        if (json_is_object(p) &&
            strcmp(ks_nz(json_string_value(json_object_get(p, "$patch"))), "replace") == 0)
            return strip(patch);
    }
    json_t *result = json_is_array(target) ? json_deep_copy(target) : json_array();
    json_t *where = key_index(result, mk); /* merge key value -> first index */
    json_array_foreach(patch, i, p)
    {
        const json_t *kv = json_is_object(p) ? json_object_get(p, mk) : NULL;
        bool del = json_is_object(p) &&
                   strcmp(ks_nz(json_string_value(json_object_get(p, "$patch"))), "delete") == 0;
        char *k = kv ? ks_dump(kv, true, NULL) : NULL;
        const json_t *found = k ? json_object_get(where, k) : NULL;
        size_t at = found ? (size_t)json_integer_value(found) : (size_t)-1;
        if (del) {
            if (at != (size_t)-1) {
                json_array_remove(result, at);
                json_decref(where); /* the indices after it moved */
                where = key_index(result, mk);
            }
        } else if (at != (size_t)-1) {
            json_t *merged = smp(json_array_get(result, at), p, field, err);
            if (!merged)
                merged = json_object();
            json_array_set_new(result, at, merged);
        } else {
            if (k)
                json_object_set_new(where, k, json_integer((json_int_t)json_array_size(result)));
            json_array_append_new(result, strip(p));
        }
        free(k);
    }
    json_decref(where);
    return result;
}

static void apply_order(json_t *list, const json_t *order, const char *mk)
{
    if (!json_is_array(list) || !json_is_array(order))
        return;
    /* each value (or merge key value) -> its unused indices in list, in order */
    json_t *free_at = json_object();
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const json_t *have = mk && json_is_object(e) ? json_object_get(e, mk) : e;
        char *k = have ? ks_dump(have, true, NULL) : NULL;
        if (!k)
            continue;
        json_t *at = json_object_get(free_at, k);
        if (!at) {
            at = json_array();
            json_object_set_new(free_at, k, at);
        }
        json_array_append_new(at, json_integer((json_int_t)i));
        free(k);
    }
    json_t *sorted = json_array();
    json_t *used = json_array();
    for (i = 0; i < json_array_size(list); i++)
        json_array_append_new(used, json_false());
    json_t *o;
    json_array_foreach(order, i, o)
    {
        const json_t *want = mk && json_is_object(o) ? json_object_get(o, mk) : o;
        char *k = want ? ks_dump(want, true, NULL) : NULL;
        json_t *at = k ? json_object_get(free_at, k) : NULL;
        free(k);
        if (json_array_size(at) == 0)
            continue;
        size_t j = (size_t)json_integer_value(json_array_get(at, 0));
        json_array_remove(at, 0);
        json_array_append(sorted, json_array_get(list, j));
        json_array_set_new(used, j, json_true());
    }
    json_array_foreach(list, i, e)
    {
        if (!json_is_true(json_array_get(used, i)))
            json_array_append(sorted, e);
    }
    json_array_clear(list);
    json_array_extend(list, sorted);
    json_decref(sorted);
    json_decref(used);
    json_decref(free_at);
}

static json_t *smp(const json_t *target, const json_t *patch, const char *ctx, char **err)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    const char *directive = json_string_value(json_object_get(patch, "$patch"));
    if (directive && strcmp(directive, "replace") == 0)
        return strip(patch);
    if (directive && strcmp(directive, "delete") == 0)
        return NULL;
    json_t *result = json_is_object(target) ? json_deep_copy(target) : json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)patch, k, v)
    {
        if (is_directive(k))
            continue;
        if (json_is_null(v)) {
            json_object_del(result, k);
            continue;
        }
        if (json_is_array(v)) {
            const char *mk = merge_key(ctx, k);
            if (mk) {
                json_object_set_new(result, k,
                                    merge_list(json_object_get(result, k), v, k, mk, err));
            } else if (primitive_set(k)) {
                json_t *cur = json_object_get(result, k);
                json_t *out = json_is_array(cur) ? json_deep_copy(cur) : json_array();
                size_t i, j;
                json_t *x, *y;
                json_array_foreach(v, i, x)
                {
                    bool have = false;
                    json_array_foreach(out, j, y)
                    {
                        if (json_equal(x, y))
                            have = true;
                    }
                    if (!have)
                        json_array_append(out, x);
                }
                json_object_set_new(result, k, out);
            } else {
                json_object_set_new(result, k, strip(v));
            }
            continue;
        }
        if (json_is_object(v)) {
            json_t *sub = smp(json_object_get(result, k), v, k, err);
            if (sub)
                json_object_set_new(result, k, sub);
            else
                json_object_del(result, k);
            continue;
        }
        json_object_set(result, k, v);
    }
    /* Directives that act after the merge. */
    json_object_foreach((json_t *)patch, k, v)
    {
        if (strncmp(k, "$setElementOrder/", 17) == 0) {
            const char *field = k + 17;
            apply_order(json_object_get(result, field), v, merge_key(ctx, field));
        } else if (strncmp(k, "$deleteFromPrimitiveList/", 25) == 0) {
            json_t *list = json_object_get(result, k + 25);
            size_t i;
            json_t *x;
            json_array_foreach(v, i, x)
            {
                for (size_t j = json_array_size(list); j > 0; j--)
                    if (json_equal(json_array_get(list, j - 1), x))
                        json_array_remove(list, j - 1);
            }
        }
    }
    const json_t *retain = json_object_get(patch, "$retainKeys");
    if (json_is_array(retain)) {
        void *tmp;
        json_object_foreach_safe(result, tmp, k, v)
        {
            bool keep = false;
            size_t i;
            json_t *x;
            json_array_foreach(retain, i, x)
            {
                if (json_is_string(x) && strcmp(json_string_value(x), k) == 0)
                    keep = true;
            }
            if (!keep)
                json_object_del(result, k);
        }
    }
    return result;
}

json_t *ks_strategic_patch(const json_t *target, const json_t *patch, char **ret_err)
{
    char *err = NULL;
    if (!json_is_object(patch)) {
        *ret_err = ks_strdup("strategic merge patch must be a JSON object");
        return NULL;
    }
    json_t *out = smp(target, patch, "", &err);
    if (err) {
        json_decref(out);
        *ret_err = err;
        return NULL;
    }
    if (!out)
        out = json_object();
    return out;
}

/* ---- JSON patch ------------------------------------------------------------- */

/* Resolve a JSON pointer to its parent container and last token. */
static int pointer_parent(json_t *doc, const char *ptr, json_t **ret_parent, char **ret_last)
{
    if (*ptr != '/')
        return -EINVAL;
    char *copy = ks_strdup(ptr + 1);
    json_t *cur = doc;
    char *tok = copy;
    for (;;) {
        char *slash = strchr(tok, '/');
        /* unescape ~1 and ~0 */
        char *w = tok;
        for (char *r = tok; *r && r != slash; r++) {
            if (r[0] == '~' && r[1] == '1') {
                *w++ = '/';
                r++;
            } else if (r[0] == '~' && r[1] == '0') {
                *w++ = '~';
                r++;
            } else {
                *w++ = *r;
            }
        }
        char *next = slash ? slash + 1 : NULL;
        *w = '\0';
        if (!next) {
            *ret_parent = cur;
            *ret_last = ks_strdup(tok);
            free(copy);
            return 0;
        }
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end = NULL;
            long idx = strtol(tok, &end, 10);
            cur =
                (*tok && end && *end == '\0' && idx >= 0) ? json_array_get(cur, (size_t)idx) : NULL;
        } else {
            cur = NULL;
        }
        if (!cur) {
            free(copy);
            return -ENOENT;
        }
        tok = next;
    }
}

static json_t *pointer_get(json_t *doc, const char *ptr)
{
    if (*ptr == '\0')
        return doc;
    json_t *parent = NULL;
    char *last = NULL;
    if (pointer_parent(doc, ptr, &parent, &last) != 0)
        return NULL;
    json_t *out = NULL;
    if (json_is_object(parent)) {
        out = json_object_get(parent, last);
    } else if (json_is_array(parent)) {
        char *end = NULL;
        long idx = strtol(last, &end, 10);
        if (*last && end && *end == '\0' && idx >= 0)
            out = json_array_get(parent, (size_t)idx);
    }
    free(last);
    return out;
}

static int pointer_remove(json_t *doc, const char *ptr, json_t **ret_old)
{
    json_t *parent = NULL;
    char *last = NULL;
    int rc = pointer_parent(doc, ptr, &parent, &last);
    if (rc != 0)
        return rc;
    rc = -ENOENT;
    if (json_is_object(parent) && json_object_get(parent, last)) {
        *ret_old = json_incref(json_object_get(parent, last));
        json_object_del(parent, last);
        rc = 0;
    } else if (json_is_array(parent)) {
        char *end = NULL;
        long idx = strtol(last, &end, 10);
        if (*last && end && *end == '\0' && idx >= 0 && (size_t)idx < json_array_size(parent)) {
            *ret_old = json_incref(json_array_get(parent, (size_t)idx));
            json_array_remove(parent, (size_t)idx);
            rc = 0;
        }
    }
    free(last);
    return rc;
}

static int pointer_add(json_t *doc, const char *ptr, json_t *value, bool replace)
{
    json_t *parent = NULL;
    char *last = NULL;
    int rc = pointer_parent(doc, ptr, &parent, &last);
    if (rc != 0) {
        json_decref(value);
        return rc;
    }
    rc = -ENOENT;
    if (json_is_object(parent)) {
        if (!replace || json_object_get(parent, last)) {
            json_object_set(parent, last, value);
            rc = 0;
        }
    } else if (json_is_array(parent)) {
        size_t n = json_array_size(parent);
        if (strcmp(last, "-") == 0 && !replace) {
            json_array_append(parent, value);
            rc = 0;
        } else {
            char *end = NULL;
            long idx = strtol(last, &end, 10);
            if (*last && end && *end == '\0' && idx >= 0) {
                if (replace && (size_t)idx < n) {
                    json_array_set(parent, (size_t)idx, value);
                    rc = 0;
                } else if (!replace && (size_t)idx <= n) {
                    json_array_insert(parent, (size_t)idx, value);
                    rc = 0;
                }
            }
        }
    }
    free(last);
    json_decref(value);
    return rc;
}

json_t *ks_json_patch(const json_t *target, const json_t *patch, char **ret_err)
{
    if (json_is_null(patch)) /* json-patch decodes null as no operations */
        return json_deep_copy(target);
    if (!json_is_array(patch)) {
        *ret_err = ks_strdup("json patch must be an array of operations");
        return NULL;
    }
    json_t *doc = json_deep_copy(target);
    size_t i;
    json_t *op;
    json_array_foreach(patch, i, op)
    {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        const char *from = json_string_value(json_object_get(op, "from"));
        json_t *value = json_object_get(op, "value");
        int rc = -EINVAL;
        json_t *old = NULL;
        if (!name || !path) {
            rc = -EINVAL;
        } else if (strcmp(name, "add") == 0 && value) {
            rc = pointer_add(doc, path, json_deep_copy(value), false);
        } else if (strcmp(name, "replace") == 0 && value) {
            rc = pointer_add(doc, path, json_deep_copy(value), true);
        } else if (strcmp(name, "remove") == 0) {
            rc = pointer_remove(doc, path, &old);
        } else if (strcmp(name, "test") == 0 && value) {
            json_t *cur = pointer_get(doc, path);
            rc = cur && json_equal(cur, value) ? 0 : -EINVAL;
            if (rc != 0) {
                *ret_err = ks_printf("testing value %s failed: test failed", path);
                json_decref(doc);
                return NULL;
            }
        } else if ((strcmp(name, "move") == 0 || strcmp(name, "copy") == 0) && from) {
            json_t *src = pointer_get(doc, from);
            if (src) {
                json_t *val = json_deep_copy(src);
                rc = 0;
                if (name[0] == 'm')
                    rc = pointer_remove(doc, from, &old);
                if (rc == 0)
                    rc = pointer_add(doc, path, val, false);
                else
                    json_decref(val);
            } else {
                rc = -ENOENT;
            }
        }
        json_decref(old);
        if (rc != 0) {
            *ret_err = rc == -ENOENT
                           ? ks_printf("the server rejected our request due to an error in our "
                                       "request: doc is missing path: \"%s\"",
                                       path ? path : "")
                           : ks_printf("the server rejected our request due to an error in our "
                                       "request: invalid operation %lu",
                                       (unsigned long)i);
            json_decref(doc);
            return NULL;
        }
    }
    return doc;
}
