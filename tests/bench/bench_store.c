/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark of the shared object store (docs/performance.md §3.4: store memory per cached
 * child object < 2 KiB). Inserts N Deployment-shaped objects as the
 * apiserver returns them (managedFields included; the store strips them),
 * then measures memory and the cost of the read paths.
 *
 * Two shapes:
 *   coredns  the Deployment of the apiserver vector
 *            apiserver/deployment_list_kube_system_v1.36.json (5 ports,
 *            probes, volumes, 2 conditions), with name, namespace, uid,
 *            resourceVersion, labels and a controller ownerReference varied
 *            per object as kop's children carry them;
 *   kopchild the Deployment kop writes for a MyResource (one container,
 *            one port), as kubesim returns it.
 *
 * Printed per shape: heap bytes per object (mallinfo2 delta / N around the
 * inserts), kop_store_bytes / N, the compact JSON size of the stripped
 * object, the same objects held as jansson trees (what the store used to
 * keep), and per-operation times: put, put with ret_old/ret_new (the
 * informer's update path), get, resource_version accessor, json_loads of
 * the compact text (reference), list of everything, keys of everything.
 * The heap is settled (malloc_trim) before each timed phase.
 *
 * Usage: bench_store [-n N] [path/to/deployment_list.json]
 * (default path: $KOP_SOURCE_ROOT/tests/data/vectors/apiserver/...).
 * Build and run with scripts/bench-store.sh.
 */
#include "kop/store.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kop/metrics.h"

static const char kopchild_text[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"myresource-00000"
    "\",\"namespace\":\"default\",\"uid\":\"6f1c2a3e-0000-4000-8000-000000000000\",\"resourceVe"
    "rsion\":\"100000\",\"generation\":1,\"creationTimestamp\":\"2026-06-15T04:14:53Z\",\"label"
    "s\":{\"app.kubernetes.io/name\":\"myresource\",\"app.kubernetes.io/instance\":\"myresour"
    "ce-00000\",\"app.kubernetes.io/managed-by\":\"kop\"},\"annotations\":{\"deployment.kuber"
    "netes.io/revision\":\"1\"},\"ownerReferences\":[{\"apiVersion\":\"mygroup.example.com/v1"
    "\",\"kind\":\"MyResource\",\"name\":\"myresource-00000\",\"uid\":\"6f1c2a3e-0000-4000-8000-0"
    "00000000000\",\"controller\":true,\"blockOwnerDeletion\":true}],\"managedFields\":[{\"ma"
    "nager\":\"kop\",\"operation\":\"Update\",\"apiVersion\":\"apps/"
    "v1\"}]},\"spec\":{\"replicas\":3"
    ",\"selector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"myresource\",\"app.kubernete"
    "s.io/instance\":\"myresource-00000\"}},\"template\":{\"metadata\":{\"labels\":{\"app.kuber"
    "netes.io/name\":\"myresource\",\"app.kubernetes.io/instance\":\"myresource-00000\"}},\"s"
    "pec\":{\"containers\":[{\"name\":\"app\",\"image\":\"nginx:1.14.2\",\"ports\":[{\"name\":"
    "\"http\""
    ",\"containerPort\":80,\"protocol\":\"TCP\"}],\"resources\":{},\"terminationMessagePath\":\""
    "/dev/termination-log\",\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNot"
    "Present\"}],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolic"
    "y\":\"ClusterFirst\",\"securityContext\":{},\"schedulerName\":\"default-scheduler\"}},\"st"
    "rategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxUnavailable\":\"25%\",\"maxSurg"
    "e\":\"25%\"}},\"revisionHistoryLimit\":10,\"progressDeadlineSeconds\":600,\"minReadySeco"
    "nds\":0},\"status\":{\"observedGeneration\":1,\"replicas\":3,\"updatedReplicas\":3,\"ready"
    "Replicas\":3,\"availableReplicas\":3,\"conditions\":[{\"type\":\"Available\",\"status\":\"Tr"
    "ue\",\"lastUpdateTime\":\"2026-06-15T04:15:03Z\",\"lastTransitionTime\":\"2026-06-15T04:"
    "15:03Z\",\"reason\":\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum av"
    "ailability.\"}]}}";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* glibc defers merging freed small chunks (fastbins) until a larger
 * request comes; after 10,000 decoded objects are freed, that one merge
 * takes hundreds of ms and lands in whatever phase runs next. Settle the
 * heap before each timed phase so each figure is its own. */
static void settle(void)
{
    malloc_trim(0);
}

static size_t heap_used(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void set_meta(json_t *obj, const char *key, json_t *v)
{
    json_object_set_new(json_object_get(obj, "metadata"), key, v);
}

/* Object i of the shape: a deep copy of the template, varied. */
static json_t *make_object(const json_t *tmpl, const char *prefix, int i)
{
    char name[64], ns[32], uid[64], owner[64], rv[32];
    snprintf(name, sizeof(name), "%s-%05d", prefix, i);
    snprintf(ns, sizeof(ns), "team-%02d", i % 20);
    snprintf(uid, sizeof(uid), "952db708-108f-45c4-998b-%012d", i);
    snprintf(owner, sizeof(owner), "6f1c2a3e-0000-4000-8000-%012d", i);
    snprintf(rv, sizeof(rv), "%d", 1000000 + i);
    json_t *o = json_deep_copy(tmpl);
    if (!o)
        return NULL;
    /* As the informer stores list items: kind and apiVersion added. */
    json_object_set_new(o, "kind", json_string("Deployment"));
    json_object_set_new(o, "apiVersion", json_string("apps/v1"));
    set_meta(o, "name", json_string(name));
    set_meta(o, "namespace", json_string(ns));
    set_meta(o, "uid", json_string(uid));
    set_meta(o, "resourceVersion", json_string(rv));
    json_t *labels = json_object_get(json_object_get(o, "metadata"), "labels");
    if (!labels) {
        labels = json_object();
        set_meta(o, "labels", labels);
    }
    json_object_set_new(labels, "app.kubernetes.io/name", json_string("myresource"));
    json_object_set_new(labels, "app.kubernetes.io/instance", json_string(name));
    json_object_set_new(labels, "app.kubernetes.io/managed-by", json_string("kop"));
    set_meta(o, "ownerReferences",
             json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", "mygroup.example.com/v1",
                       "kind", "MyResource", "name", name, "uid", owner, "controller", 1,
                       "blockOwnerDeletion", 1));
    return o;
}

static int bench_shape(const char *shape, const json_t *tmpl, int n)
{
    struct kop_metrics *metrics = kop_metrics_new(false);
    struct kop_store *s = NULL;
    json_t **objs = calloc((size_t)n, sizeof(*objs));
    char **texts = calloc((size_t)n, sizeof(*texts));
    json_t **trees = calloc((size_t)n, sizeof(*trees));
    int rc = 1;
    if (!metrics || !objs || !texts || !trees || kop_store_new(metrics, "kop_store", &s) < 0)
        goto out;
    size_t json_total = 0, mf_total = 0;
    for (int i = 0; i < n; i++) {
        objs[i] = make_object(tmpl, shape, i);
        if (!objs[i])
            goto out;
        mf_total += json_dumpb(objs[i], NULL, 0, JSON_COMPACT);
        json_t *st = kop_store_strip(objs[i]);
        texts[i] = json_dumps(st, JSON_COMPACT);
        json_decref(st);
        if (!texts[i])
            goto out;
        json_total += strlen(texts[i]);
    }

    /* Inserts. The caller keeps its objects (as an informer's decoded
     * event would be freed by it), so the heap delta is the store's. */
    settle();
    size_t h0 = heap_used();
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        if (kop_store_put(s, "Deployment", json_incref(objs[i]), NULL, NULL) < 0) {
            fprintf(stderr, "put %d failed\n", i);
            goto out;
        }
    }
    double t_put = now_s() - t0;
    size_t h1 = heap_used();
    size_t store_bytes = kop_store_bytes(s);

    /* The informer's update path: put a new version, old and new back. */
    settle();
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        json_t *old = NULL, *cur = NULL;
        if (kop_store_put(s, "Deployment", json_incref(objs[i]), &old, &cur) < 0 || !old)
            goto out;
        json_decref(old);
        json_decref(cur);
    }
    double t_upd = now_s() - t0;

    settle();
    t0 = now_s();
    size_t got = 0;
    for (int i = 0; i < n; i++) {
        json_t *m = json_object_get(objs[i], "metadata");
        json_t *v =
            kop_store_get(s, "Deployment", json_string_value(json_object_get(m, "namespace")),
                          json_string_value(json_object_get(m, "name")));
        got += v != NULL;
        json_decref(v);
    }
    double t_get = now_s() - t0;

    settle();
    t0 = now_s();
    char rv[64];
    for (int i = 0; i < n; i++) {
        json_t *m = json_object_get(objs[i], "metadata");
        got += kop_store_resource_version(
                   s, "Deployment", json_string_value(json_object_get(m, "namespace")),
                   json_string_value(json_object_get(m, "name")), rv, sizeof(rv)) == 0;
    }
    double t_rv = now_s() - t0;

    settle();
    t0 = now_s();
    json_t *all = kop_store_list(s, NULL, NULL);
    double t_list = now_s() - t0;
    size_t listed = json_array_size(all);
    json_decref(all);

    settle();
    t0 = now_s();
    json_t *keys = kop_store_keys(s, "Deployment", NULL);
    double t_keys = now_s() - t0;
    size_t nkeys = json_object_size(keys);
    json_decref(keys);

    /* Reference: parsing the compact text, and holding jansson trees. */
    settle();
    size_t h2 = heap_used();
    t0 = now_s();
    for (int i = 0; i < n; i++)
        trees[i] = json_loads(texts[i], 0, NULL);
    double t_loads = now_s() - t0;
    size_t h3 = heap_used();

    if (got != 2 * (size_t)n || listed != (size_t)n || nkeys != (size_t)n) {
        fprintf(stderr, "bench: inconsistent store (%zu %zu %zu)\n", got, listed, nkeys);
        goto out;
    }
    double dn = n;
    printf("shape %s: %d objects\n", shape, n);
    printf("  json as served (compact, with managedFields)  %8.0f B/object\n", mf_total / dn);
    printf("  json stripped (compact)                       %8.0f B/object\n", json_total / dn);
    printf("  heap held by the store (mallinfo2 delta)      %8.0f B/object\n",
           ((double)h1 - (double)h0) / dn);
    printf("  kop_store_bytes                               %8.0f B/object\n", store_bytes / dn);
    printf("  same objects as jansson trees (old store)     %8.0f B/object\n",
           ((double)h3 - (double)h2) / dn);
    printf("  put (new key)                                 %8.2f us/object\n", t_put * 1e6 / dn);
    printf("  put replace with ret_old+ret_new              %8.2f us/object\n", t_upd * 1e6 / dn);
    printf("  get (decode)                                  %8.2f us/object\n", t_get * 1e6 / dn);
    printf("  resource_version (no decode)                  %8.2f us/object\n", t_rv * 1e6 / dn);
    printf("  json_loads of the compact text (reference)    %8.2f us/object\n", t_loads * 1e6 / dn);
    printf("  list all (%d objects)                         %8.2f ms\n", n, t_list * 1e3);
    printf("  keys all (%d keys)                            %8.2f ms\n", n, t_keys * 1e3);
    rc = 0;
out:
    for (int i = 0; i < n && objs && texts && trees; i++) {
        json_decref(objs[i]);
        free(texts[i]);
        json_decref(trees[i]);
    }
    free(objs);
    free(texts);
    free(trees);
    kop_store_free(s);
    kop_metrics_free(metrics);
    return rc;
}

static void print_machine(int argc, char **argv)
{
    char model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ' || *c == '\t')
                        c++;
                    snprintf(model, sizeof(model), "%s", c);
                    model[strcspn(model, "\n")] = '\0';
                }
                break;
            }
        }
        fclose(f);
    }
    char date[64] = "";
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("date: %s\nmachine: %ld cpus, %s\njansson: %s\ncommand:", date,
           sysconf(_SC_NPROCESSORS_ONLN), model, JANSSON_VERSION);
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n");
}

int main(int argc, char **argv)
{
    int n = 10000;
    const char *path = NULL;
    char defpath[4096];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v <= 0 || v > 10000000) {
                fprintf(stderr, "bench_store: bad -n\n");
                return 2;
            }
            n = (int)v;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        const char *root = getenv("KOP_SOURCE_ROOT");
        snprintf(defpath, sizeof(defpath),
                 "%s/tests/data/vectors/apiserver/deployment_list_kube_system_v1.36.json",
                 root ? root : ".");
        path = defpath;
    }
    json_error_t err;
    json_t *list = json_load_file(path, 0, &err);
    json_t *coredns = json_array_get(json_object_get(list, "items"), 0);
    json_t *kopchild = json_loads(kopchild_text, 0, &err);
    if (!coredns || !kopchild) {
        fprintf(stderr, "bench_store: cannot load templates (%s): %s\n", path, err.text);
        return 1;
    }
    print_machine(argc, argv);
    int rc = bench_shape("coredns", coredns, n) || bench_shape("kopchild", kopchild, n);
    json_decref(list);
    json_decref(kopchild);
    return rc;
}
