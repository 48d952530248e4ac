/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's model of etcd's request size limits: whether the write the
 * apiserver's storage would send to etcd for an object is refused for its
 * size, and with which error.
 *
 * The storage layer (k8s.io/apiserver pkg/storage/etcd3/store.go, Create and
 * GuaranteedUpdate) writes an object in one Txn: if the key's mod_revision
 * is the expected one, put the key with the value and lease (and for an
 * update, else range the key). Two limits stand in its way, both with
 * etcd's defaults:
 *
 *  - the etcd client's send limit, clientv3's MaxCallSendMsgSize of 2 MiB
 *    (2097152): a Txn message larger than that never leaves the apiserver,
 *    and gRPC's error reads "rpc error: code = ResourceExhausted desc =
 *    trying to send message larger than max (N vs. 2097152)", N the size
 *    of the message;
 *  - etcd's --max-request-bytes, 1.5 MiB (1572864): the server refuses a
 *    request whose marshalled raft request (an InternalRaftRequest holding
 *    the Txn) is longer, with gRPC InvalidArgument "etcdserver: request is
 *    too large".
 *
 * Both sizes are approximated by one number: the value's length, three
 * times the key's length (the compare, the put and the failure range) and
 * a fixed 40 bytes for the protobuf framing, the revision, the lease and
 * the raft header. A create's Txn has no failure range and the framing's
 * varints vary with the lengths, so the estimate is off by a few dozen
 * bytes, which matters only to an object that close to a limit.
 *
 * The value is what the storage codec writes for the object in its storage
 * version, without its resourceVersion (the versioner's
 * PrepareObjectForStorage clears it before encoding):
 *
 *  - a custom resource: its JSON (apiextensions-apiserver stores custom
 *    resources with unstructured.UnstructuredJSONScheme): compact, with
 *    Go's escapes of <, >, & and U+2028/U+2029 and json.Encoder's final
 *    newline;
 *  - a CustomResourceDefinition: JSON as well (the apiextensions server's
 *    storage codec is LegacyCodec, JSON; upstream writes the v1beta1 form,
 *    counted here as the stored v1 object);
 *  - any other built-in kind: protobuf, the "k8s\0" magic and the
 *    runtime.Unknown envelope (what ks_pb_encode writes), or JSON for a
 *    kind without a protobuf table.
 *
 * The key is the one the registry builds: "/registry/" + the resource's
 * prefix + "/" + namespace + "/" + name, without the namespace segment for
 * a cluster-scoped object. The prefix of a kube-apiserver built-in is its
 * resource name alone, whatever its group (DefaultStorageFactory.
 * ResourcePrefix), except for the special prefixes compiled into
 * kube-apiserver (SpecialDefaultResourcePrefixes: services/specs,
 * services/endpoints, minions, controllers, ingress); the apiextensions
 * server's resources (CRDs) and custom resources have "group/resource"
 * (SimpleStorageFactory, and the custom resource handler).
 *
 * Thread-safety: touches only its arguments (no lock needed).
 */
#include "kubesim.h"

#include <stdlib.h>
#include <string.h>

#define ETCD_REQUEST_MAX 1572864 /* etcd's default --max-request-bytes */
#define ETCD_SEND_MAX 2097152    /* clientv3's default MaxCallSendMsgSize */
#define ETCD_TXN_OVERHEAD 40     /* framing, revision, lease, raft header */

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

static bool group_resource_prefix(const struct ks_res *def)
{
    return def->crd || strcmp(def->group, "apiextensions.k8s.io") == 0;
}

char *ks_etcd_key(const struct ks_res *def, const char *obj_key)
{
    if (group_resource_prefix(def))
        return ks_printf("/registry/%s/%s/%s", def->group, def->plural, obj_key);
    for (size_t i = 0; i < sizeof(special_prefixes) / sizeof(special_prefixes[0]); i++) {
        if (strcmp(def->group, special_prefixes[i].group) == 0 &&
            strcmp(def->plural, special_prefixes[i].resource) == 0)
            return ks_printf("/registry/%s/%s", special_prefixes[i].prefix, obj_key);
    }
    return ks_printf("/registry/%s/%s", def->plural, obj_key);
}

/* The length of the stored value of obj (its resourceVersion already
 * gone). */
static size_t value_len(const struct ks_res *def, const json_t *obj)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (!group_resource_prefix(def) && ks_pb_has_kind(av, kind)) {
        size_t n = 0;
        char *err = NULL;
        int rc = ks_pb_encoded_len(obj, &n, &err);
        free(err);
        if (rc == 0)
            return n;
    }
    return ks_dump_len(obj) + 1; /* Go's JSON (ks_dump) and json.Encoder's newline */
}

char *ks_etcd_refusal(const struct ks_res *def, const char *obj_key, const json_t *obj)
{
    /* shallow copies of obj and its metadata, less the resourceVersion */
    json_t *o = json_copy((json_t *)obj);
    json_t *md = json_copy(json_object_get(o, "metadata"));
    if (md) {
        json_object_del(md, "resourceVersion");
        json_object_set_new(o, "metadata", md);
    }
    size_t value = value_len(def, o);
    json_decref(o);
    char *key = ks_etcd_key(def, obj_key);
    size_t n = value + 3 * strlen(key) + ETCD_TXN_OVERHEAD;
    free(key);
    if (n > ETCD_SEND_MAX)
        return ks_printf("rpc error: code = ResourceExhausted desc = trying to send message larger "
                         "than max (%zu vs. %d)",
                         n, ETCD_SEND_MAX);
    if (n > ETCD_REQUEST_MAX)
        return ks_strdup("etcdserver: request is too large");
    return NULL;
}
