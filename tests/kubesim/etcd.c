/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The etcd key the apiserver's registry builds for an object, as its
 * storage errors name it (a failed precondition's "StorageError: invalid
 * object, Code: 4, Key: /registry/...").
 *
 * The key is "/registry/" + the resource's prefix + "/" + namespace + "/"
 * + name, without the namespace segment for a cluster-scoped object. The
 * prefix of a kube-apiserver built-in is its resource name alone, whatever
 * its group (DefaultStorageFactory.ResourcePrefix), except for the special
 * prefixes compiled into kube-apiserver (SpecialDefaultResourcePrefixes:
 * services/specs, services/endpoints, minions, controllers, ingress); the
 * apiextensions server's resources (CRDs) and custom resources have
 * "group/resource" (SimpleStorageFactory, and the custom resource
 * handler).
 *
 * etcd's request size limits are not modelled (docs/kubesim.md section 6).
 *
 * Thread-safety: touches only its arguments (no lock needed).
 */
#include "kubesim.h"

#include <string.h>

/* kube-apiserver's SpecialDefaultResourcePrefixes */
static const struct {
    const char *group, *resource, *prefix;
} special_prefixes[] = {
    {"", "replicationcontrollers", "controllers"},
    {"", "endpoints", "services/endpoints"},
    {"", "nodes", "minions"},
    {"", "services", "services/specs"},
    {"extensions", "ingresses", "ingress"},
    {"networking.k8s.io", "ingresses", "ingress"},
};

char *ks_etcd_key(const struct ks_res *def, const char *obj_key)
{
    if (def->crd || strcmp(def->group, "apiextensions.k8s.io") == 0)
        return ks_printf("/registry/%s/%s/%s", def->group, def->plural, obj_key);
    for (size_t i = 0; i < sizeof(special_prefixes) / sizeof(special_prefixes[0]); i++) {
        if (strcmp(def->group, special_prefixes[i].group) == 0 &&
            strcmp(def->plural, special_prefixes[i].resource) == 0)
            return ks_printf("/registry/%s/%s", special_prefixes[i].prefix, obj_key);
    }
    return ks_printf("/registry/%s/%s", def->plural, obj_key);
}
