/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim metadata-only answers, what client-go's metadata client and
 * controller-runtime's metadata informers ask for with
 *   Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,
 *           application/json
 * (LIST) or as=PartialObjectMetadata (GET, WATCH). As the apiserver does
 * (apiserver endpoints/handlers/response.go), the object is read in the
 * requested version as usual and then reduced to
 *   {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
 *    "metadata":{...the whole ObjectMeta...}}
 * and a list to a PartialObjectMetadataList whose metadata keeps
 * resourceVersion, continue and remainingItemCount. Watch events carry
 * PartialObjectMetadata objects (bookmarks too); ERROR Status objects stay
 * as they are. A list asked for as a single object (or the reverse) is a
 * 406 NotAcceptable, as in the apiserver. Table output lives in table.c.
 */
#include "kubesim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Copy src[0..n) into dst[cap] trimmed of blanks. */
static void trim_copy(char *dst, size_t cap, const char *src, size_t n)
{
    while (n && (*src == ' ' || *src == '\t')) {
        src++;
        n--;
    }
    while (n && (src[n - 1] == ' ' || src[n - 1] == '\t'))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* What one Accept entry ("type/sub;k=v;...") asks for. Returns 1 for a
 * partial answer kubesim can give (*ret_kind, *ret_version set), 0 for
 * plain JSON, -1 for something to skip. */
static int accept_entry(const char *entry, enum ks_partial *ret_kind, const char **ret_version)
{
    char type[128];
    const char *semi = strchr(entry, ';');
    trim_copy(type, sizeof(type), entry, semi ? (size_t)(semi - entry) : strlen(entry));
    bool json = strcasecmp(type, "application/json") == 0;
    bool any = strcmp(type, "*/*") == 0 || strcasecmp(type, "application/*") == 0;
    if (!json && !any)
        return -1;
    const char *as = NULL, *g = NULL, *v = NULL;
    char params[8][96];
    size_t np = 0;
    while (semi && np < 8) {
        const char *p = semi + 1;
        semi = strchr(p, ';');
        trim_copy(params[np], sizeof(params[np]), p, semi ? (size_t)(semi - p) : strlen(p));
        const char *val = strchr(params[np], '=');
        if (val) {
            val++;
            if (strncmp(params[np], "as=", 3) == 0)
                as = val;
            else if (strncmp(params[np], "g=", 2) == 0)
                g = val;
            else if (strncmp(params[np], "v=", 2) == 0)
                v = val;
        }
        np++;
    }
    if (!as)
        return 0; /* plain JSON (q= and other parameters do not matter) */
    if (!json || !g || strcmp(g, "meta.k8s.io") != 0 || !v)
        return -1;
    if (strcmp(v, "v1") == 0)
        *ret_version = "v1";
    else if (strcmp(v, "v1beta1") == 0)
        *ret_version = "v1beta1";
    else
        return -1;
    if (strcmp(as, "PartialObjectMetadata") == 0)
        *ret_kind = KS_PARTIAL_OBJECT;
    else if (strcmp(as, "PartialObjectMetadataList") == 0)
        *ret_kind = KS_PARTIAL_LIST;
    else
        return -1; /* Table and others: not this module's */
    return 1;
}

enum ks_partial ks_partial_accept(const char *accept, const char **ret_version)
{
    const char *p = accept;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char entry[512];
        if (n < sizeof(entry)) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            enum ks_partial kind = KS_PARTIAL_NONE;
            const char *version = NULL;
            int rc = accept_entry(entry, &kind, &version);
            if (rc == 0)
                return KS_PARTIAL_NONE;
            if (rc > 0) {
                *ret_version = version;
                return kind;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return KS_PARTIAL_NONE;
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A copy of a string map with its keys sorted (Go encodes maps so). */
static json_t *sorted_map(const json_t *m)
{
    size_t n = json_object_size(m);
    const char **keys = calloc(n ? n : 1, sizeof(*keys));
    if (!keys)
        abort();
    size_t k = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)m, key, v)
    {
        keys[k++] = key;
    }
    qsort(keys, k, sizeof(*keys), cmp_key);
    json_t *out = json_object();
    for (size_t i = 0; i < k; i++)
        json_object_set_new(out, keys[i], json_deep_copy(json_object_get(m, keys[i])));
    free(keys);
    return out;
}

/* Copy the named fields of src into dst in this order, then the rest. */
static void ordered_copy(json_t *dst, const json_t *src, const char *const *order)
{
    for (size_t i = 0; order[i]; i++) {
        json_t *v = json_object_get(src, order[i]);
        if (v)
            json_object_set_new(dst, order[i], json_deep_copy(v));
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)src, key, v)
    {
        if (!json_object_get(dst, key))
            json_object_set_new(dst, key, json_deep_copy(v));
    }
}

json_t *ks_partial_object(const json_t *obj, const char *version)
{
    static const char *const meta_order[] = {"name",
                                             "generateName",
                                             "namespace",
                                             "selfLink",
                                             "uid",
                                             "resourceVersion",
                                             "generation",
                                             "creationTimestamp",
                                             "deletionTimestamp",
                                             "deletionGracePeriodSeconds",
                                             "labels",
                                             "annotations",
                                             "ownerReferences",
                                             "finalizers",
                                             "managedFields",
                                             NULL};
    static const char *const owner_order[] = {
        "apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion", NULL};
    const json_t *src = json_object_get(obj, "metadata");
    json_t *md = json_object();
    if (json_is_object(src))
        ordered_copy(md, src, meta_order);
    /* ObjectMeta is a struct: its maps are sorted, owner references typed. */
    static const char *const maps[] = {"labels", "annotations", NULL};
    for (size_t i = 0; maps[i]; i++) {
        const json_t *m = json_object_get(md, maps[i]);
        if (json_is_object(m))
            json_object_set_new(md, maps[i], sorted_map(m));
    }
    const json_t *owners = json_object_get(md, "ownerReferences");
    if (json_is_array(owners)) {
        json_t *typed = json_array();
        size_t i;
        const json_t *o;
        json_array_foreach(owners, i, o)
        {
            json_t *t = json_object();
            if (json_is_object(o))
                ordered_copy(t, o, owner_order);
            json_array_append_new(typed, t);
        }
        json_object_set_new(md, "ownerReferences", typed);
    }
    char *av = ks_printf("meta.k8s.io/%s", version);
    json_t *p = json_pack("{s:s,s:s,s:o}", "kind", "PartialObjectMetadata", "apiVersion", av,
                          "metadata", md);
    free(av);
    return p;
}

json_t *ks_partial_list(const json_t *objs, const char *version, const char *rv, const char *cont,
                        long remaining)
{
    json_t *md = json_pack("{s:s}", "resourceVersion", rv);
    if (cont && *cont) {
        json_object_set_new(md, "continue", json_string(cont));
        if (remaining > 0)
            json_object_set_new(md, "remainingItemCount", json_integer(remaining));
    }
    json_t *items = json_array_size(objs) ? json_array() : json_null();
    size_t i;
    const json_t *o;
    json_array_foreach(objs, i, o)
    {
        json_array_append_new(items, ks_partial_object(o, version));
    }
    char *av = ks_printf("meta.k8s.io/%s", version);
    json_t *list = json_pack("{s:s,s:s,s:o,s:o}", "kind", "PartialObjectMetadataList", "apiVersion",
                             av, "metadata", md, "items", items);
    free(av);
    return list;
}

char *ks_partial_mismatch(const struct ks_res *def, enum ks_partial want)
{
    /* Go's %T of what the storage returned: unstructured for custom
     * resources, the internal type (package = first label of the group,
     * "core" for the core group) for built-ins. */
    char pkg[64];
    const char *g = def->group[0] ? def->group : "core";
    size_t n = strcspn(g, ".");
    if (n >= sizeof(pkg))
        n = sizeof(pkg) - 1;
    memcpy(pkg, g, n);
    pkg[n] = '\0';
    bool list = want == KS_PARTIAL_OBJECT; /* the request was a list */
    char *type = def->crd ? ks_printf("*unstructured.Unstructured%s", list ? "List" : "")
                          : ks_printf("*%s.%s%s", pkg, def->kind, list ? "List" : "");
    char *msg =
        list ? ks_printf("you requested PartialObjectMetadata, but the requested object is a "
                         "list (%s)",
                         type)
             : ks_printf("you requested PartialObjectMetadataList, but the requested object is "
                         "not a list (%s)",
                         type);
    free(type);
    return msg;
}
