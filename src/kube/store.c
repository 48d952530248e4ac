/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared object store (see kop/store.h).
 *
 * Layout: one chained hash table of entries keyed by "kind/ns/name", and
 * three secondary indexes (kind, namespace, controller-owner uid). Each
 * index is a hash table of buckets; a bucket heads an intrusive doubly
 * linked list of the entries that share the value, so insert and remove
 * are O(1) and a list walks only the matching entries. One rwlock protects
 * the tables, the links and the byte count.
 *
 * An entry is one malloc: header, then "key\0rv\0", then the packed value.
 * Everything after the header is immutable once the entry is linked, and
 * the entry carries an atomic reference count (the table holds one), so a
 * reader takes a reference under the read lock and decodes after
 * unlocking; a writer unlinks under the write lock and drops the table's
 * reference after unlocking.
 *
 * Packed format (in-memory only, never persisted, so it may change in any
 * release). Each value starts with a tag byte: type in the high 3 bits, an
 * immediate in the low 5 bits; immediates 0..29 are the argument itself, 30
 * means an unsigned LEB128 varint follows with the argument. Types:
 *   T_SPECIAL  imm 0 null, 1 false, 2 true, 3 real (8 raw bytes follow)
 *   T_UINT     a non-negative integer: the argument
 *   T_NEGINT   a negative integer: -1 - argument
 *   T_STR      argument = byte length, the bytes follow (no NUL)
 *   T_DICT     argument = index into dict[] (a string)
 *   T_ARRAY    argument = item count, the items follow
 *   T_OBJECT   argument = member count, then per member a key (T_STR or
 *              T_DICT) and a value, in jansson's iteration order
 * dict[] is a fixed table of strings common in Kubernetes objects, most
 * frequent first (the first 30 fit in the tag byte).
 */
#include "kop/store.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kop/hash.h"
#include "kop/metrics.h"

enum { IDX_KIND, IDX_NS, IDX_OWNER, IDX_COUNT };

struct hnode {
    struct hnode *next;
    uint64_t hash;
    const char *key;
};

struct hmap {
    struct hnode **tab;
    size_t cap; /* power of two, 0 when empty (the array is freed) */
    size_t n;
};

struct entry;

struct bucket {
    struct hnode node; /* key: the index value, stored in name[] */
    struct entry *head;
    char name[];
};

struct link {
    struct entry *prev, *next;
    struct bucket *b; /* NULL: not in this index */
};

struct entry {
    struct hnode node; /* key: "kind/ns/name", stored in data[] */
    struct link idx[IDX_COUNT];
    atomic_uint refs;
    uint32_t rv_off; /* data + rv_off: resourceVersion, NUL-terminated */
    uint32_t val_off;
    uint32_t val_len;
    size_t alloc; /* bytes asked from malloc for this entry */
    unsigned char data[];
};

struct kop_store {
    pthread_rwlock_t lock;
    struct hmap entries;
    struct hmap index[IDX_COUNT];
    size_t item_bytes; /* entries and buckets; table arrays are added on read */
    struct kop_metric *g_objects;
    struct kop_metric *g_bytes;
    bool labelled; /* the gauges are this store's own (kop_store_new_labelled) */
};

static const char last_applied[] = "kubectl.kubernetes.io/last-applied-configuration";

/* ---- hash map ------------------------------------------------------------ */

/* Keys are user-chosen names: a keyed hash (kop/hash.h). */
static uint64_t hash_mem(const void *p, size_t n)
{
    return kop_hash(p, n);
}

static uint64_t hash_str(const char *s)
{
    return kop_hash_str(s);
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
    if (!m->cap || m->n + 1 > m->cap - m->cap / 4) {
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

/* Remove a node; an emptied table gives its array back, so an empty store
 * holds no heap but the struct itself. */
static void hmap_remove(struct hmap *m, struct hnode *n)
{
    if (!m->cap)
        return;
    struct hnode **pp = &m->tab[n->hash & (m->cap - 1)];
    while (*pp && *pp != n)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = n->next;
        m->n--;
    }
    if (m->n == 0) {
        free(m->tab);
        m->tab = NULL;
        m->cap = 0;
    }
}

/* ---- packed values ------------------------------------------------------- */

enum { T_SPECIAL, T_UINT, T_NEGINT, T_STR, T_DICT, T_ARRAY, T_OBJECT };
enum { IMM_MAX = 29, IMM_VARINT = 30 };
enum { S_NULL, S_FALSE, S_TRUE, S_REAL };

/* Generic Kubernetes vocabulary: ObjectMeta, ownerReferences, conditions,
 * Deployment/Pod template/Service/ConfigMap fields and frequent values. The
 * first 30 entries cost one byte. Each is shorter than 256 bytes (dict_len);
 * a duplicate would only waste its slot (dict_init keeps the first). */
/* clang-format off */
static const char *const dict[] = {
    /* 0..29: one byte */
    "metadata", "name", "namespace", "uid", "resourceVersion", "labels", "annotations", "spec",
    "status", "type", "kind", "apiVersion", "protocol", "TCP", "port", "containerPort", "ports",
    "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "True",
    "False", "reason", "message", "lastTransitionTime", "lastUpdateTime", "replicas", "generation",
    "creationTimestamp", "ownerReferences",
    /* 30..127: two bytes, 128 and up: three */
    "controller", "blockOwnerDeletion", "selector", "matchLabels", "template", "containers",
    "image", "resources", "limits", "requests", "cpu", "memory", "terminationMessagePath",
    "/dev/termination-log", "terminationMessagePolicy", "File", "imagePullPolicy", "IfNotPresent",
    "Always", "restartPolicy", "terminationGracePeriodSeconds", "dnsPolicy", "ClusterFirst",
    "securityContext", "schedulerName", "default-scheduler", "strategy", "RollingUpdate",
    "rollingUpdate", "maxUnavailable", "maxSurge", "25%", "revisionHistoryLimit",
    "progressDeadlineSeconds", "observedGeneration", "updatedReplicas", "readyReplicas",
    "availableReplicas", "conditions", "Available", "Progressing", "MinimumReplicasAvailable",
    "Deployment has minimum availability.", "NewReplicaSetAvailable", "apps/v1", "v1", "Deployment",
    "deployment.kubernetes.io/revision", "http", "targetPort", "clusterIP", "clusterIPs",
    "ClusterIP", "ipFamilies", "IPv4", "ipFamilyPolicy", "SingleStack", "sessionAffinity", "None",
    "internalTrafficPolicy", "Cluster", "data", "minReadySeconds", "unavailableReplicas",
    "terminatingReplicas", "Service", "ConfigMap", "Secret", "Pod", "ReplicaSet", "env", "value",
    "valueFrom", "args", "command", "volumeMounts", "mountPath", "readOnly", "volumes", "configMap",
    "secret", "items", "key", "path", "defaultMode", "livenessProbe", "readinessProbe",
    "startupProbe", "httpGet", "scheme", "HTTP", "initialDelaySeconds", "timeoutSeconds",
    "periodSeconds", "successThreshold", "failureThreshold", "capabilities", "drop", "ALL", "add",
    "readOnlyRootFilesystem", "allowPrivilegeEscalation", "runAsNonRoot", "runAsUser",
    "seccompProfile", "RuntimeDefault", "nodeSelector", "kubernetes.io/os", "linux",
    "serviceAccountName", "serviceAccount", "tolerations", "operator", "Exists", "effect",
    "NoSchedule", "NoExecute", "priorityClassName", "affinity", "UDP", "SCTP", "https", "nodePort",
    "NodePort", "LoadBalancer", "loadBalancer", "externalTrafficPolicy", "Local", "IPv6",
    "PreferDualStack", "finalizers", "deletionTimestamp", "deletionGracePeriodSeconds",
    "generateName", "ReplicaSetUpdated", "NewReplicaSetCreated", "FoundNewReplicaSet",
    "ProgressDeadlineExceeded", "MinimumReplicasUnavailable", "Recreate", "paused", "Never",
    "OnFailure", "Default", "ClusterFirstWithHostNet", "hostNetwork", "workingDir", "envFrom",
    "fieldRef", "fieldPath", "secretKeyRef", "configMapKeyRef", "optional", "emptyDir",
    "persistentVolumeClaim", "claimName", "tcpSocket", "exec", "grpc", "lifecycle", "preStop",
    "imagePullSecrets", "topologySpreadConstraints", "maxSkew", "topologyKey", "whenUnsatisfiable",
    "DoNotSchedule", "labelSelector", "podAntiAffinity", "podAffinity", "nodeAffinity", "weight",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "preferredDuringSchedulingIgnoredDuringExecution", "matchExpressions", "values", "In",
    "runAsGroup", "fsGroup", "privileged", "immutable", "binaryData", "stringData", "Opaque", "app",
    "k8s-app", "component", "version", "app.kubernetes.io/component", "app.kubernetes.io/part-of",
    "app.kubernetes.io/version", "helm.sh/chart", "0", "1", "2", "3", "true", "false", "Ready",
    "Unknown", "Degraded", "Paused", "Reconciled", "ReconcileError", "Normal", "Warning", "Update",
    "Apply", "managedFields", "manager", "operation", "fieldsType", "FieldsV1", "fieldsV1", "time",
    "subresource",
};
/* clang-format on */

enum { DICT_N = sizeof(dict) / sizeof(dict[0]), DICT_SLOTS = 1024 };

static uint16_t dict_slot[DICT_SLOTS]; /* dict index + 1, 0 = empty */
static uint8_t dict_len[DICT_N];
static size_t dict_maxlen;
static pthread_once_t dict_once = PTHREAD_ONCE_INIT;

static void dict_init(void)
{
    for (size_t i = 0; i < DICT_N; i++) {
        size_t len = strlen(dict[i]);
        dict_len[i] = (uint8_t)len;
        size_t h = hash_mem(dict[i], len) & (DICT_SLOTS - 1);
        bool dup = false;
        while (dict_slot[h]) {
            const char *o = dict[dict_slot[h] - 1];
            if (strcmp(o, dict[i]) == 0) {
                dup = true; /* the first index wins */
                break;
            }
            h = (h + 1) & (DICT_SLOTS - 1);
        }
        if (dup)
            continue;
        dict_slot[h] = (uint16_t)(i + 1);
        if (len > dict_maxlen)
            dict_maxlen = len;
    }
}

/* Index of s[0..len) in dict[], or -1. */
static int dict_find(const char *s, size_t len)
{
    if (len > dict_maxlen || len == 0)
        return -1;
    size_t h = hash_mem(s, len) & (DICT_SLOTS - 1);
    while (dict_slot[h]) {
        const char *d = dict[dict_slot[h] - 1];
        if (strncmp(d, s, len) == 0 && d[len] == '\0')
            return dict_slot[h] - 1;
        h = (h + 1) & (DICT_SLOTS - 1);
    }
    return -1;
}

/* A growable output buffer that starts on the caller's stack. */
struct wbuf {
    unsigned char *p;
    size_t len, cap;
    bool heap;
    bool oom;
};

static void wb_reserve(struct wbuf *w, size_t more)
{
    if (w->oom || w->len + more <= w->cap)
        return;
    size_t ncap = w->cap * 2;
    while (ncap < w->len + more)
        ncap *= 2;
    unsigned char *np = w->heap ? realloc(w->p, ncap) : malloc(ncap);
    if (!np) {
        w->oom = true;
        return;
    }
    if (!w->heap)
        memcpy(np, w->p, w->len);
    w->p = np;
    w->cap = ncap;
    w->heap = true;
}

static void wb_put(struct wbuf *w, const void *src, size_t n)
{
    wb_reserve(w, n);
    if (w->oom)
        return;
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void wb_tag(struct wbuf *w, unsigned type, uint64_t arg)
{
    unsigned char b[11];
    size_t n = 0;
    if (arg <= IMM_MAX) {
        b[n++] = (unsigned char)(type << 5 | arg);
    } else {
        b[n++] = (unsigned char)(type << 5 | IMM_VARINT);
        while (arg >= 0x80) {
            b[n++] = (unsigned char)(arg | 0x80);
            arg >>= 7;
        }
        b[n++] = (unsigned char)arg;
    }
    wb_put(w, b, n);
}

static void wb_string(struct wbuf *w, const char *s, size_t len)
{
    int d = dict_find(s, len);
    if (d >= 0) {
        wb_tag(w, T_DICT, (uint64_t)d);
    } else {
        wb_tag(w, T_STR, len);
        wb_put(w, s, len);
    }
}

static void pack(struct wbuf *w, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        size_t klen;
        json_t *m;
        wb_tag(w, T_OBJECT, json_object_size(v));
        /* json_object_keylen_foreach wants a non-const object; it does not
         * modify it. */
        json_t *o = (json_t *)v;
        json_object_keylen_foreach(o, k, klen, m)
        {
            wb_string(w, k, klen);
            pack(w, m);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *m;
        wb_tag(w, T_ARRAY, json_array_size(v));
        json_array_foreach(v, i, m) pack(w, m);
        break;
    }
    case JSON_STRING:
        wb_string(w, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i >= 0)
            wb_tag(w, T_UINT, (uint64_t)i);
        else
            wb_tag(w, T_NEGINT, (uint64_t)(-(i + 1)));
        break;
    }
    case JSON_REAL: {
        double d = json_real_value(v);
        wb_tag(w, T_SPECIAL, S_REAL);
        wb_put(w, &d, sizeof(d));
        break;
    }
    case JSON_TRUE:
        wb_tag(w, T_SPECIAL, S_TRUE);
        break;
    case JSON_FALSE:
        wb_tag(w, T_SPECIAL, S_FALSE);
        break;
    case JSON_NULL:
        wb_tag(w, T_SPECIAL, S_NULL);
        break;
    }
}

struct rbuf {
    const unsigned char *p, *end;
};

/* Read a tag. Returns false on a malformed buffer. */
static bool rb_tag(struct rbuf *r, unsigned *type, uint64_t *arg)
{
    if (r->p >= r->end)
        return false;
    unsigned char b = *r->p++;
    *type = b >> 5;
    unsigned imm = b & 31u;
    if (imm <= IMM_MAX) {
        *arg = imm;
        return true;
    }
    if (imm != IMM_VARINT)
        return false;
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return false;
        unsigned char c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *arg = v;
            return true;
        }
    }
    return false;
}

/* A string (T_STR or T_DICT) at r: pointer and length. */
static bool rb_string(struct rbuf *r, unsigned type, uint64_t arg, const char **s, size_t *len)
{
    if (type == T_DICT) {
        if (arg >= DICT_N)
            return false;
        *s = dict[arg];
        *len = dict_len[arg];
        return true;
    }
    if (type != T_STR || arg > (uint64_t)(r->end - r->p))
        return false;
    *s = (const char *)r->p;
    *len = (size_t)arg;
    r->p += arg;
    return true;
}

/* Decode one value; NULL on ENOMEM or a malformed buffer. */
static json_t *unpack(struct rbuf *r)
{
    unsigned type;
    uint64_t arg;
    if (!rb_tag(r, &type, &arg))
        return NULL;
    switch (type) {
    case T_SPECIAL:
        if (arg == S_NULL)
            return json_null();
        if (arg == S_FALSE)
            return json_false();
        if (arg == S_TRUE)
            return json_true();
        if (arg == S_REAL && (size_t)(r->end - r->p) >= sizeof(double)) {
            double d;
            memcpy(&d, r->p, sizeof(d));
            r->p += sizeof(d);
            return json_real(d);
        }
        return NULL;
    case T_UINT:
        if (arg > (uint64_t)INT64_MAX)
            return NULL;
        return json_integer((json_int_t)arg);
    case T_NEGINT:
        if (arg > (uint64_t)INT64_MAX)
            return NULL;
        return json_integer(-(json_int_t)arg - 1);
    case T_STR:
    case T_DICT: {
        const char *s;
        size_t len;
        if (!rb_string(r, type, arg, &s, &len))
            return NULL;
        /* The bytes came out of a jansson string: already valid UTF-8. */
        return json_stringn_nocheck(s, len);
    }
    case T_ARRAY: {
        /* Each item takes at least one byte: bounds the count. */
        if (arg > (uint64_t)(r->end - r->p))
            return NULL;
        json_t *a = json_array();
        for (uint64_t i = 0; a && i < arg; i++) {
            json_t *m = unpack(r);
            if (!m || json_array_append_new(a, m) < 0) {
                json_decref(a);
                a = NULL;
            }
        }
        return a;
    }
    case T_OBJECT: {
        if (arg > (uint64_t)(r->end - r->p))
            return NULL;
        json_t *o = json_object();
        for (uint64_t i = 0; o && i < arg; i++) {
            unsigned kt;
            uint64_t ka;
            const char *k;
            size_t klen;
            json_t *m = NULL;
            if (!rb_tag(r, &kt, &ka) || !rb_string(r, kt, ka, &k, &klen) || !(m = unpack(r)) ||
                json_object_setn_new_nocheck(o, k, klen, m) < 0) {
                json_decref(o);
                o = NULL;
            }
        }
        return o;
    }
    default:
        return NULL;
    }
}

/* ---- entries ------------------------------------------------------------- */

static void entry_unref(struct entry *e)
{
    if (e && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        free(e);
}

static struct entry *entry_ref(struct entry *e)
{
    if (e)
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    return e;
}

/* Decode an entry's value. No lock needed: the packed bytes never change. */
static json_t *entry_decode(const struct entry *e)
{
    struct rbuf r = {e->data + e->val_off, e->data + e->val_off + e->val_len};
    json_t *v = unpack(&r);
    if (v && r.p != r.end) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

static const char *entry_rv(const struct entry *e)
{
    return (const char *)e->data + e->rv_off;
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
        s->item_bytes -= sizeof(*b) + strlen(b->name) + 1;
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
        size_t n = strlen(value) + 1;
        b = malloc(sizeof(*b) + n);
        if (!b)
            return -ENOMEM;
        memcpy(b->name, value, n);
        b->node.key = b->name;
        b->node.hash = h;
        b->node.next = NULL;
        b->head = NULL;
        if (hmap_insert(&s->index[i], &b->node) < 0) {
            free(b);
            return -ENOMEM;
        }
        s->item_bytes += sizeof(*b) + n;
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

/* Unlink e from the table and every index (write lock held). */
static void entry_detach(struct kop_store *s, struct entry *e)
{
    for (int i = 0; i < IDX_COUNT; i++)
        index_unlink(s, e, i);
    hmap_remove(&s->entries, &e->node);
    s->item_bytes -= e->alloc;
}

/* Heap held (lock held). */
static size_t total_bytes(const struct kop_store *s)
{
    size_t n = s->item_bytes + s->entries.cap * sizeof(struct hnode *);
    for (int i = 0; i < IDX_COUNT; i++)
        n += s->index[i].cap * sizeof(struct hnode *);
    return n;
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

int kop_store_new(struct kop_metrics *metrics, const char *metric_prefix, struct kop_store **ret)
{
    return kop_store_new_labelled(metrics, metric_prefix, NULL, NULL, ret);
}

int kop_store_new_labelled(struct kop_metrics *metrics, const char *metric_prefix,
                           const char *label, const char *value, struct kop_store **ret)
{
    assert(ret);
    if (label && !value)
        return -EINVAL;
    pthread_once(&dict_once, dict_init);
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
        const char *p = metric_prefix ? metric_prefix : "store";
        char name[128];
        snprintf(name, sizeof(name), "%s_objects", p);
        const char *labels[] = {label, NULL};
        const char *const *ln = label ? labels : NULL;
        f = kop_metrics_register(m, KOP_METRIC_GAUGE, name, "Objects in the shared informer store.",
                                 ln, NULL, 0);
        s->g_objects = f ? (label ? kop_metric_child(f, value) : kop_metric_child(f)) : NULL;
        snprintf(name, sizeof(name), "%s_bytes", p);
        f = kop_metrics_register(m, KOP_METRIC_GAUGE, name,
                                 "Heap bytes held by the shared informer store.", ln, NULL, 0);
        s->g_bytes = f ? (label ? kop_metric_child(f, value) : kop_metric_child(f)) : NULL;
        s->labelled = label != NULL;
    }
    *ret = s;
    return 0;
}

void kop_store_free(struct kop_store *s)
{
    if (!s)
        return;
    size_t n = s->entries.n;
    if (s->labelled) {
        /* its series go with it (a disengaged cluster's) */
        kop_metric_remove(s->g_objects);
        kop_metric_remove(s->g_bytes);
    } else {
        kop_gauge_add(s->g_objects, -(double)n);
        kop_gauge_add(s->g_bytes, -(double)total_bytes(s));
    }
    for (size_t i = 0; i < s->entries.cap; i++) {
        struct hnode *node = s->entries.tab[i];
        while (node) {
            struct hnode *next = node->next;
            entry_unref((struct entry *)node);
            node = next;
        }
    }
    for (int k = 0; k < IDX_COUNT; k++) {
        for (size_t i = 0; i < s->index[k].cap; i++) {
            struct hnode *node = s->index[k].tab[i];
            while (node) {
                struct hnode *next = node->next;
                free(node);
                node = next;
            }
        }
        free(s->index[k].tab);
    }
    free(s->entries.tab);
    pthread_rwlock_destroy(&s->lock);
    free(s);
}

/* No part of a key holds '/': otherwise namespace "a" + name "b/c" and
 * namespace "a/b" + name "c" would share one (a server that sent such
 * names would make one object hide another). */
static bool key_args_ok(const char *kind, const char *ns, const char *name)
{
    return kind && *kind && name && *name && !strchr(kind, '/') && !strchr(name, '/') &&
           (!ns || !strchr(ns, '/'));
}

int kop_store_key(const char *kind, const char *ns, const char *name, char *buf, size_t len)
{
    assert(kind);
    assert(buf);
    if (!key_args_ok(kind, ns, name))
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
    if (!key_args_ok(kind, ns, name))
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

/* Build an entry for the stripped object (private until linked). */
static struct entry *entry_new(const char *key, const json_t *stripped)
{
    unsigned char stack[4096];
    struct wbuf w = {.p = stack, .cap = sizeof(stack)};
    pack(&w, stripped);
    struct entry *e = NULL;
    const char *rv = json_string_value(
        json_object_get(json_object_get(stripped, "metadata"), "resourceVersion"));
    if (!rv)
        rv = "";
    size_t klen = strlen(key) + 1, rvlen = strlen(rv) + 1;
    size_t alloc = sizeof(*e) + klen + rvlen + w.len;
    if (w.oom || klen + rvlen + w.len > UINT32_MAX)
        goto out;
    e = malloc(alloc);
    if (!e)
        goto out;
    memset(e, 0, sizeof(*e));
    atomic_init(&e->refs, 1);
    e->alloc = alloc;
    memcpy(e->data, key, klen);
    e->rv_off = (uint32_t)klen;
    memcpy(e->data + klen, rv, rvlen);
    e->val_off = (uint32_t)(klen + rvlen);
    e->val_len = (uint32_t)w.len;
    memcpy(e->data + e->val_off, w.p, w.len);
    e->node.key = (const char *)e->data;
    e->node.hash = hash_mem(key, klen - 1);
out:
    if (w.heap)
        free(w.p);
    return e;
}

int kop_store_put(struct kop_store *s, const char *kind, json_t *obj, json_t **ret_old,
                  json_t **ret_new)
{
    int r = 0;
    struct entry *e = NULL, *prev = NULL;
    json_t *stripped = NULL;
    char *key = NULL;
    assert(s);
    assert(kind);
    if (!json_is_object(obj)) {
        r = -EINVAL;
        goto out;
    }
    json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    key = make_key(kind, ns, name);
    if (!key) {
        r = key_args_ok(kind, ns, name) ? -ENOMEM : -EINVAL;
        goto out;
    }
    stripped = kop_store_strip(obj);
    if (!stripped) {
        r = -ENOMEM;
        goto out;
    }
    /* Packed outside the lock: the entry is private until linked. */
    e = entry_new(key, stripped);
    if (!e) {
        r = -ENOMEM;
        goto out;
    }
    const char *uid = controller_uid(stripped);

    pthread_rwlock_wrlock(&s->lock);
    size_t before = total_bytes(s);
    prev = (struct entry *)hmap_find(&s->entries, e->node.key, e->node.hash);
    if (prev)
        entry_detach(s, prev);
    r = hmap_insert(&s->entries, &e->node);
    if (r == 0) {
        s->item_bytes += e->alloc;
        if (index_link(s, e, IDX_KIND, kind) < 0 || index_link(s, e, IDX_NS, ns ? ns : "") < 0 ||
            index_link(s, e, IDX_OWNER, uid) < 0) {
            entry_detach(s, e);
            r = -ENOMEM;
        }
    }
    size_t after = total_bytes(s);
    pthread_rwlock_unlock(&s->lock);
    /* On failure the old entry stays removed: the store then lacks the
     * object, and the informer's next relist puts it back. */
    kop_gauge_add(s->g_bytes, (double)after - (double)before);
    if (r == 0 && !prev)
        kop_gauge_add(s->g_objects, 1);
    else if (r < 0 && prev)
        kop_gauge_add(s->g_objects, -1);
    if (r < 0)
        goto out;
    e = NULL; /* owned by the table now */
    if (ret_old)
        *ret_old = prev ? entry_decode(prev) : NULL;
    if (ret_new) {
        *ret_new = stripped;
        stripped = NULL;
    }
out:
    entry_unref(prev);
    entry_unref(e);
    json_decref(stripped);
    free(key);
    json_decref(obj);
    return r;
}

int kop_store_delete(struct kop_store *s, const char *kind, const char *ns, const char *name,
                     json_t **ret_old)
{
    assert(s);
    assert(kind);
    char *key = make_key(kind, ns, name);
    if (!key)
        return key_args_ok(kind, ns, name) ? -ENOMEM : -EINVAL;
    uint64_t h = hash_str(key);
    pthread_rwlock_wrlock(&s->lock);
    size_t before = total_bytes(s);
    struct entry *e = (struct entry *)hmap_find(&s->entries, key, h);
    if (e)
        entry_detach(s, e);
    size_t after = total_bytes(s);
    pthread_rwlock_unlock(&s->lock);
    free(key);
    if (!e)
        return -ENOENT;
    kop_gauge_add(s->g_objects, -1);
    kop_gauge_add(s->g_bytes, (double)after - (double)before);
    int r = 0;
    if (ret_old) {
        json_t *old = entry_decode(e);
        if (old)
            *ret_old = old;
        else
            r = -ENOMEM;
    }
    entry_unref(e);
    return r;
}

/* The entry under key with a reference taken, or NULL. */
static struct entry *lookup_ref(struct kop_store *s, const char *key)
{
    assert(s);
    assert(key);
    uint64_t h = hash_str(key);
    pthread_rwlock_rdlock(&s->lock);
    struct entry *e = entry_ref((struct entry *)hmap_find(&s->entries, key, h));
    pthread_rwlock_unlock(&s->lock);
    return e;
}

json_t *kop_store_get_key(struct kop_store *s, const char *key)
{
    struct entry *e = lookup_ref(s, key);
    if (!e)
        return NULL;
    json_t *v = entry_decode(e);
    entry_unref(e);
    return v;
}

json_t *kop_store_get(struct kop_store *s, const char *kind, const char *ns, const char *name)
{
    assert(s);
    char *key = make_key(kind, ns, name);
    if (!key)
        return NULL; /* no such name, or ENOMEM */
    json_t *v = kop_store_get_key(s, key);
    free(key);
    return v;
}

enum { META_EXISTS, META_RV, META_OWNER };

/* Copy one metadata field of the entry under key into buf. */
static int meta_key(struct kop_store *s, const char *key, int what, char *buf, size_t len)
{
    assert(s);
    assert(key);
    assert(what == META_EXISTS || buf);
    uint64_t h = hash_str(key);
    int r = 0;
    pthread_rwlock_rdlock(&s->lock);
    const struct entry *e = (const struct entry *)hmap_find(&s->entries, key, h);
    if (!e) {
        r = -ENOENT;
    } else if (what != META_EXISTS) {
        const char *v = "";
        if (what == META_RV)
            v = entry_rv(e);
        else if (e->idx[IDX_OWNER].b)
            v = e->idx[IDX_OWNER].b->name;
        size_t n = strlen(v) + 1;
        if (n > len)
            r = -ERANGE;
        else
            memcpy(buf, v, n);
    }
    pthread_rwlock_unlock(&s->lock);
    return r;
}

static int meta(struct kop_store *s, const char *kind, const char *ns, const char *name, int what,
                char *buf, size_t len)
{
    assert(s);
    if (!key_args_ok(kind, ns, name))
        return -EINVAL;
    char *key = make_key(kind, ns, name);
    if (!key)
        return -ENOMEM;
    int r = meta_key(s, key, what, buf, len);
    free(key);
    return r;
}

bool kop_store_exists(struct kop_store *s, const char *kind, const char *ns, const char *name)
{
    return meta(s, kind, ns, name, META_EXISTS, NULL, 0) == 0;
}

int kop_store_resource_version(struct kop_store *s, const char *kind, const char *ns,
                               const char *name, char *buf, size_t len)
{
    return meta(s, kind, ns, name, META_RV, buf, len);
}

int kop_store_resource_version_key(struct kop_store *s, const char *key, char *buf, size_t len)
{
    return meta_key(s, key, META_RV, buf, len);
}

int kop_store_controller_uid(struct kop_store *s, const char *kind, const char *ns,
                             const char *name, char *buf, size_t len)
{
    return meta(s, kind, ns, name, META_OWNER, buf, len);
}

/* Entries collected under the read lock, each with a reference. */
struct refs {
    struct entry **v;
    size_t n, cap;
};

static int refs_push(struct refs *rs, struct entry *e)
{
    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? rs->cap * 2 : 64;
        struct entry **nv = realloc(rs->v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        rs->v = nv;
        rs->cap = ncap;
    }
    rs->v[rs->n++] = entry_ref(e);
    return 0;
}

static void refs_release(struct refs *rs)
{
    for (size_t i = 0; i < rs->n; i++)
        entry_unref(rs->v[i]);
    free(rs->v);
}

/* Add e to the output: its key into a set, or a reference to decode later. */
static int emit(struct entry *e, json_t *keys, struct refs *rs)
{
    if (keys)
        return json_object_set_new(keys, e->node.key, json_true()) < 0 ? -ENOMEM : 0;
    return refs_push(rs, e);
}

static bool bucket_is(const struct link *l, const char *value)
{
    return l->b && strcmp(l->b->name, value) == 0;
}

/* Walk one index bucket, filtering on kind and namespace (lock held). */
static int collect(struct kop_store *s, int idx, const char *value, const char *kind, json_t *keys,
                   struct refs *rs)
{
    struct bucket *b = (struct bucket *)hmap_find(&s->index[idx], value, hash_str(value));
    if (!b)
        return 0;
    for (struct entry *e = b->head; e; e = e->idx[idx].next) {
        if (kind && !bucket_is(&e->idx[IDX_KIND], kind))
            continue;
        int r = emit(e, keys, rs);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Decode the collected entries into a new array (outside the lock). */
static json_t *decode_all(const struct refs *rs)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < rs->n; i++) {
        json_t *v = entry_decode(rs->v[i]);
        if (!v || json_array_append_new(out, v) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    return out;
}

static json_t *list_common(struct kop_store *s, int idx, const char *value, const char *kind,
                           bool want_keys)
{
    assert(s);
    json_t *keys = NULL;
    struct refs rs = {0};
    if (want_keys) {
        keys = json_object();
        if (!keys)
            return NULL;
    }
    int r = 0;
    pthread_rwlock_rdlock(&s->lock);
    if (value) {
        r = collect(s, idx, value, kind, keys, &rs);
    } else {
        for (size_t i = 0; i < s->entries.cap && r == 0; i++)
            for (struct hnode *n = s->entries.tab[i]; n && r == 0; n = n->next)
                r = emit((struct entry *)n, keys, &rs);
    }
    pthread_rwlock_unlock(&s->lock);
    json_t *out = NULL;
    if (r == 0)
        out = want_keys ? json_incref(keys) : decode_all(&rs);
    json_decref(keys);
    refs_release(&rs);
    return out;
}

static json_t *list_kind_ns(struct kop_store *s, const char *kind, const char *ns, bool keys)
{
    if (ns)
        return list_common(s, IDX_NS, ns, kind, keys);
    if (kind)
        return list_common(s, IDX_KIND, kind, NULL, keys);
    return list_common(s, 0, NULL, NULL, keys);
}

json_t *kop_store_list(struct kop_store *s, const char *kind, const char *ns)
{
    return list_kind_ns(s, kind, ns, false);
}

json_t *kop_store_keys(struct kop_store *s, const char *kind, const char *ns)
{
    return list_kind_ns(s, kind, ns, true);
}

json_t *kop_store_list_by_owner(struct kop_store *s, const char *owner_uid, const char *kind)
{
    if (!owner_uid)
        return NULL;
    return list_common(s, IDX_OWNER, owner_uid, kind, false);
}

size_t kop_store_count(struct kop_store *s)
{
    assert(s);
    pthread_rwlock_rdlock(&s->lock);
    size_t n = s->entries.n;
    pthread_rwlock_unlock(&s->lock);
    return n;
}

size_t kop_store_bytes(struct kop_store *s)
{
    assert(s);
    pthread_rwlock_rdlock(&s->lock);
    size_t n = total_bytes(s);
    pthread_rwlock_unlock(&s->lock);
    return n;
}
