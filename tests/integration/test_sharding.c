/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kop --sharding with two and three replicas, as real processes against
 * kubesim (the MyResource CRD in v1 only, `kop --controller-only
 * --sharding` with short lease durations, each replica named by
 * POD_NAME). In the first test the owner labels come from the sharder (no
 * webhook); the second runs the webhook servers too and kubesim calls
 * their mutating route through a MutatingWebhookConfiguration.
 *
 * Covers:
 *  - every MyResource gets exactly one owner, a live replica, and its
 *    Deployment and Service carry the same owner label (the child
 *    informers select on it, so a child without it would be recreated or
 *    left behind); both replicas own some;
 *  - a replica joins: objects move to it, each through the drain protocol
 *    (the old owner logs that it released the object before the owner
 *    label changes; the sharder counts moves and drain times);
 *  - a replica stops gracefully (SIGTERM): its membership Lease is
 *    released and its objects move at the next pass;
 *  - a replica is SIGKILLed: its objects stay put while its membership
 *    Lease could still be live, then move;
 *  - changes made during all this converge: every Deployment ends with the
 *    replicas of its MyResource.
 *
 * Time bounds only check which side of a configured duration an event
 * falls on, with seconds of slack; other waits poll with generous
 * deadlines.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOKEN "sharding-test-token"
#define NS "default"
#define LEASE_NS "kop-system"
#define MYR_PATH "/apis/mygroup.example.com/v1/namespaces/" NS "/myresources"
#define DEP_PATH "/apis/apps/v1/namespaces/" NS "/deployments"
#define SVC_PATH "/api/v1/namespaces/" NS "/services"
#define OWNER "shard.kop.io/owner"
#define DRAIN "shard.kop.io/drain"
#define N_OBJECTS 24
#define LEASE_MS 5000

struct node {
    struct kop_test_proc proc;
    bool running;
    long metrics_port;
    char id[16];
};

#define MAX_NODES 3
static struct node nodes[MAX_NODES];
static struct kop_test_kubesim sim;
static bool sim_running;
static struct kop_test_scratch fx;

static const struct kop_test_http_options *api_opts(void)
{
    static struct kop_test_http_options o;
    o = (struct kop_test_http_options){
        .handle = fx.curl, .ca = fx.ca, .token = TOKEN, .timeout_s = 10};
    return &o;
}

static json_t *api(const char *method, const char *path, const char *body, long want)
{
    return kop_test_api(api_opts(), sim.url, method, path, body, want);
}

static double metric(const struct node *n, const char *name, const char *label)
{
    return kop_test_scrape_sum(api_opts(), n->metrics_port, name, label);
}

/* cert_dir NULL: --controller-only; else the webhook server too, on a
 * kernel-chosen port (*ret_webhook_port). */
static void start_node_with(struct node *n, int index, const char *cert_dir, long *ret_webhook_port)
{
    char *argv[] = {(char *)kop_test_bin("kop"),
                    cert_dir ? "--webhook-port=0" : "--controller-only",
                    "--sharding",
                    "--leader-election-namespace",
                    LEASE_NS,
                    "--leader-election-lease-duration",
                    "5s",
                    "--leader-election-renew-deadline",
                    "3s",
                    "--leader-election-retry-period",
                    "500ms",
                    "--kubeconfig",
                    fx.kubeconfig,
                    "--metrics-bind-address",
                    "127.0.0.1:0",
                    "--health-probe-bind-address",
                    "0",
                    "--kube-api-qps",
                    "200",
                    "--kube-api-burst",
                    "400",
                    "--shutdown-timeout",
                    "10s",
                    cert_dir ? "--cert-dir" : NULL,
                    (char *)cert_dir,
                    "--webhook-host",
                    "127.0.0.1",
                    "--shutdown-delay",
                    "0s",
                    NULL};
    memset(n, 0, sizeof(*n));
    snprintf(n->id, sizeof(n->id), "kop-%d", index);
    ck_assert_int_eq(setenv("POD_NAME", n->id, 1), 0);
    ck_assert_int_eq(kop_test_spawn(&n->proc, argv), 0);
    n->running = true;
    char *line = NULL;
    ck_assert_msg(kop_test_wait_for(&n->proc, 0, "\"msg\":\"sharding enabled\"", 10000, NULL) > 0,
                  "kop did not enable sharding");
    ck_assert_msg(kop_test_wait_for(&n->proc, 0, "\"msg\":\"serving metrics\"", 10000, &line) > 0,
                  "kop metrics line");
    n->metrics_port = kop_test_json_int(line, "port");
    free(line);
    ck_assert_int_gt(n->metrics_port, 0);
    if (cert_dir) {
        line = NULL;
        ck_assert_msg(kop_test_wait_for(&n->proc, 0, "\"msg\":\"serving webhook\"", 10000, &line) >
                          0,
                      "kop webhook line");
        *ret_webhook_port = kop_test_json_int(line, "port");
        free(line);
        ck_assert_int_gt(*ret_webhook_port, 0);
    }
}

static void start_node(struct node *n, int index)
{
    start_node_with(n, index, NULL, NULL);
}

static void stop_node(struct node *n, int sig)
{
    ck_assert(n->running);
    n->running = false;
    kop_test_stop(&n->proc, sig, 15000);
}

static void setup(void)
{
    kop_test_scratch_init(&fx);
    memset(nodes, 0, sizeof(nodes));
    char *args[] = {"--deployment-ready-delay",
                    "100ms",
                    "--bookmark-interval",
                    "500ms",
                    "--endpoint-propagation-delay",
                    "0s",
                    NULL};
    kop_test_scratch_kubesim(&fx, &sim, TOKEN, args);
    sim_running = true;
    json_decref(api("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    kop_test_myresource_crd, 201));
    json_decref(
        api("POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"" LEASE_NS "\"}}", 201));
}

static void teardown(void)
{
    for (int i = 0; i < MAX_NODES; i++)
        if (nodes[i].running)
            stop_node(&nodes[i], SIGKILL);
    if (sim_running) {
        sim_running = false;
        kop_test_kubesim_stop(&sim, SIGTERM, 10000);
    }
    kop_test_scratch_free(&fx);
}

static const char *label_of(const json_t *obj, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

static const char *name_of(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

/* The state of the world, from kubesim. */
struct world {
    json_t *myrs, *deps, *svcs; /* items arrays (@ref owned by the lists) */
    json_t *l_myr, *l_dep, *l_svc;
};

static void world_read(struct world *w)
{
    w->l_myr = api("GET", MYR_PATH, NULL, 200);
    w->l_dep = api("GET", DEP_PATH, NULL, 200);
    w->l_svc = api("GET", SVC_PATH, NULL, 200);
    w->myrs = json_object_get(w->l_myr, "items");
    w->deps = json_object_get(w->l_dep, "items");
    w->svcs = json_object_get(w->l_svc, "items");
}

static void world_free(struct world *w)
{
    json_decref(w->l_myr);
    json_decref(w->l_dep);
    json_decref(w->l_svc);
}

static const json_t *find(const json_t *items, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(items, i, v)
    {
        if (strcmp(name_of(v), name) == 0)
            return v;
    }
    return NULL;
}

static bool is_live(const char *id, const bool live[MAX_NODES])
{
    for (int i = 0; i < MAX_NODES; i++)
        if (live[i] && id && strcmp(id, nodes[i].id) == 0)
            return true;
    return false;
}

/* Every MyResource: owner label a live replica, no drain label, both
 * children with the same owner label, the Deployment's replicas as the
 * spec says. counts[i]: objects owned by node i. */
struct settled_arg {
    const bool *live;
    int *counts;
    unsigned need; /* bit i set: node i must own at least one object */
};

static bool settled(const void *argp)
{
    const struct settled_arg *a = argp;
    struct world w;
    world_read(&w);
    bool ok = json_array_size(w.myrs) == N_OBJECTS;
    for (int i = 0; i < MAX_NODES; i++)
        a->counts[i] = 0;
    size_t i;
    json_t *m;
    json_array_foreach(w.myrs, i, m)
    {
        const char *owner = label_of(m, OWNER);
        const json_t *d = find(w.deps, name_of(m)), *s = find(w.svcs, name_of(m));
        if (!is_live(owner, a->live) || label_of(m, DRAIN) || !d || !s || !label_of(d, OWNER) ||
            strcmp(label_of(d, OWNER), owner) != 0 || !label_of(s, OWNER) ||
            strcmp(label_of(s, OWNER), owner) != 0 ||
            !json_equal(json_object_get(json_object_get(m, "spec"), "replicas"),
                        json_object_get(json_object_get(d, "spec"), "replicas"))) {
            ok = false;
            continue;
        }
        for (int k = 0; k < MAX_NODES; k++)
            if (strcmp(owner, nodes[k].id) == 0)
                a->counts[k]++;
    }
    world_free(&w);
    for (int k = 0; k < MAX_NODES; k++)
        if ((a->need & (1u << k)) && a->counts[k] == 0)
            ok = false;
    return ok;
}

/* The owner label of each MyResource, by index, into owners. */
static void owners_now(char owners[N_OBJECTS][16])
{
    for (int i = 0; i < N_OBJECTS; i++) {
        char path[256];
        snprintf(path, sizeof(path), MYR_PATH "/web-%02d", i);
        json_t *m = api("GET", path, NULL, 200);
        const char *o = label_of(m, OWNER);
        snprintf(owners[i], 16, "%s", o ? o : "");
        json_decref(m);
    }
}

static void bump_replicas(int round)
{
    for (int i = 0; i < N_OBJECTS; i += 3) {
        char path[256], body[128];
        snprintf(path, sizeof(path), MYR_PATH "/web-%02d", i);
        snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", 1 + (round + i) % 4);
        json_decref(api("PATCH", path, body, 200));
    }
}

/* On a failure: what the replicas said last, and the labels, on stderr. */
static void dump(void)
{
    for (int i = 0; i < MAX_NODES; i++) {
        if (!nodes[i].proc.pid)
            continue;
        char *out = kop_test_output(&nodes[i].proc);
        size_t n = strlen(out);
        fprintf(stderr, "---- %s (last output)\n%s\n", nodes[i].id,
                out + (n > 4000 ? n - 4000 : 0));
        free(out);
    }
    struct world w;
    world_read(&w);
    size_t i;
    json_t *m;
    json_array_foreach(w.myrs, i, m)
    {
        const json_t *d = find(w.deps, name_of(m));
        fprintf(stderr, "%s owner=%s drain=%s deployment-owner=%s\n", name_of(m),
                label_of(m, OWNER) ? label_of(m, OWNER) : "-",
                label_of(m, DRAIN) ? label_of(m, DRAIN) : "-",
                d && label_of(d, OWNER) ? label_of(d, OWNER) : "-");
    }
    world_free(&w);
}

/* Settled, and still so with the same owners three sharder periods
 * later: a pass that moves objects one drain at a time is settled (every
 * object owned by a live replica) between its moves. */
static bool settle(struct settled_arg *sa)
{
    long deadline = kop_test_now_ms() + 60000;
    char first[N_OBJECTS][16], again[N_OBJECTS][16];
    for (long left; (left = deadline - kop_test_now_ms()) > 0;) {
        if (!kop_test_eventually(settled, sa, left))
            break;
        owners_now(first);
        kop_test_sleep_ms(1500);
        if (!settled(sa))
            continue;
        owners_now(again);
        bool same = true;
        for (int i = 0; i < N_OBJECTS; i++)
            same = same && strcmp(first[i], again[i]) == 0;
        if (same)
            return true;
    }
    dump();
    return false;
}

START_TEST(test_sharding_join_leave_kill)
{
    bool live[MAX_NODES] = {true, true, false};
    int counts[MAX_NODES];
    /* Both must own objects: until kop-0's membership Lease is seen,
     * kop-1 alone owns every object, and that is settled too. */
    struct settled_arg sa = {live, counts, 1u << 0 | 1u << 1};
    start_node(&nodes[0], 0);
    start_node(&nodes[1], 1);
    for (int i = 0; i < N_OBJECTS; i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"web-%02d\"},\"spec\":{}}", i);
        json_decref(api("POST", MYR_PATH, body, 201));
    }
    ck_assert_msg(settle(&sa), "two replicas did not settle");
    ck_assert_int_gt(counts[0], 0);
    ck_assert_int_gt(counts[1], 0);
    ck_assert_int_eq(counts[0] + counts[1], N_OBJECTS);

    /* A third replica joins while specs change: objects move to it, each
     * released by its old owner first. */
    char before[N_OBJECTS][16], after[N_OBJECTS][16];
    owners_now(before);
    start_node(&nodes[2], 2);
    live[2] = true;
    sa.need = 1u << 2;
    bump_replicas(1);
    ck_assert_msg(settle(&sa), "three replicas did not settle");
    ck_assert_int_gt(counts[2], 0);
    owners_now(after);
    int moved = 0;
    for (int i = 0; i < N_OBJECTS; i++) {
        if (strcmp(before[i], after[i]) == 0)
            continue;
        moved++;
        ck_assert_str_eq(after[i], "kop-2"); /* a join only moves objects to the new member */
        int old = before[i][4] - '0';
        char needle[128];
        snprintf(needle, sizeof(needle), "\"name\":\"web-%02d\"", i);
        char *out = kop_test_output(&nodes[old].proc);
        const char *rel = strstr(out, "released a draining MyResource");
        bool found = false;
        for (; rel; rel = strstr(rel + 1, "released a draining MyResource")) {
            const char *eol = strchr(rel, '\n');
            const char *hit = strstr(rel, needle);
            if (hit && (!eol || hit < eol))
                found = true;
        }
        free(out);
        ck_assert_msg(found, "web-%02d moved from %s without being released", i, before[i]);
    }
    ck_assert_int_eq(moved, counts[2]);
    double moves = 0, drains = 0;
    for (int i = 0; i < MAX_NODES; i++) {
        double v = metric(&nodes[i], "kop_shard_moves_total", NULL);
        moves += v > 0 ? v : 0;
        v = metric(&nodes[i], "kop_shard_drain_seconds_count", NULL);
        drains += v > 0 ? v : 0;
    }
    ck_assert_int_ge((int)moves, moved);
    ck_assert_int_ge((int)drains, moved);

    /* Graceful stop of kop-1: its Lease is released, its objects move. */
    stop_node(&nodes[1], SIGTERM);
    live[1] = false;
    sa.need = 0;
    bump_replicas(2);
    ck_assert_msg(settle(&sa), "did not settle after SIGTERM");
    ck_assert_int_eq(counts[1], 0);
    ck_assert_int_eq(counts[0] + counts[2], N_OBJECTS);

    /* SIGKILL of kop-2: its objects stay until its membership Lease can
     * have expired (5 s; checked 1.5 s after the kill), then move. */
    int victim = counts[2] > 0 ? 2 : 0, survivor = 2 - victim;
    ck_assert_int_gt(counts[victim], 0);
    int had = counts[victim];
    stop_node(&nodes[victim], SIGKILL);
    long killed = kop_test_now_ms();
    kop_test_sleep_ms(1500);
    if (kop_test_now_ms() - killed < LEASE_MS - 1000) {
        owners_now(after);
        int still = 0;
        for (int i = 0; i < N_OBJECTS; i++)
            still += strcmp(after[i], nodes[victim].id) == 0;
        ck_assert_int_eq(still, had);
    }
    live[victim] = false;
    bump_replicas(3);
    ck_assert_msg(settle(&sa), "did not settle after SIGKILL");
    ck_assert_int_eq(counts[survivor], N_OBJECTS);
    ck_assert(kop_test_logged(&nodes[survivor].proc, "\"msg\":\"members changed\""));
}
END_TEST

/* Whether a replica logged a completed sharder pass over kop-0 and kop-1
 * (a pass logs itself when it rebalanced and nothing is pending). */
static bool sharder_balanced_both(const void *arg)
{
    (void)arg;
    bool hit = false;
    for (int k = 0; k < 2 && !hit; k++) {
        char *out = kop_test_output(&nodes[k].proc);
        for (const char *l = strstr(out, "\"msg\":\"sharder pass\""); l && !hit;
             l = strstr(l + 1, "\"msg\":\"sharder pass\"")) {
            const char *eol = strchr(l, '\n');
            const char *m = strstr(l, "\"members\":[\"kop-0\",\"kop-1\"]");
            const char *p = strstr(l, "\"pending\":false");
            hit = m && p && (!eol || (m < eol && p < eol));
        }
        free(out);
    }
    return hit;
}

/* The owner label comes with the CREATE: kubesim calls the mutating
 * webhook route of a replica (its Service stand-in points at both), so
 * the object is labelled in the create response, before any sharder pass;
 * and the sharder does not relabel it while the membership stays. */
START_TEST(test_sharding_webhook_labels_at_create)
{
    char certs[1024];
    snprintf(certs, sizeof(certs), "%s/certs", fx.dir);
    kop_test_gen_certs(certs);
    long port0 = 0, port1 = 0;
    start_node_with(&nodes[0], 0, certs, &port0);
    start_node_with(&nodes[1], 1, certs, &port1);
    char body[4096];
    snprintf(body, sizeof(body),
             "{\"service\":\"kop-system/kop-webhook-service\",\"endpoints\":["
             "{\"address\":\"127.0.0.1:%ld\",\"ready\":true},"
             "{\"address\":\"127.0.0.1:%ld\",\"ready\":true}]}",
             port0, port1);
    json_decref(api("POST", "/_kubesim/endpoints", body, 200));
    char ca_file[1100];
    snprintf(ca_file, sizeof(ca_file), "%s/ca.crt", certs);
    char *bundle = kop_test_file_base64(ca_file);
    char *mwc = NULL;
    ck_assert_int_gt(
        asprintf(
            &mwc,
            "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
            "\"MutatingWebhookConfiguration\",\"metadata\":{\"name\":\"kop-shard-webhook\"},"
            "\"webhooks\":[{\"name\":\"mshard.mygroup.example.com\",\"admissionReviewVersions\":"
            "[\"v1\"],\"sideEffects\":\"None\",\"failurePolicy\":\"Fail\",\"timeoutSeconds\":5,"
            "\"clientConfig\":{\"caBundle\":\"%s\",\"service\":{\"namespace\":\"kop-system\","
            "\"name\":\"kop-webhook-service\",\"path\":"
            "\"/mutate-mygroup-example-com-myresource-shard\",\"port\":443}},\"rules\":[{"
            "\"apiGroups\":[\"mygroup.example.com\"],\"apiVersions\":[\"v1\"],\"operations\":"
            "[\"CREATE\"],\"resources\":[\"myresources\"]}]}]}",
            bundle),
        0);
    free(bundle);
    json_decref(api("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                    mwc, 201));
    free(mwc);
    /* Both replicas listed both memberships (a member's own list shows it). */
    bool live[MAX_NODES] = {true, true, false};
    int counts[MAX_NODES];
    struct settled_arg sa = {live, counts, 0};
    for (int k = 0; k < 2; k++)
        ck_assert_msg(kop_test_wait_for(&nodes[k].proc, 0, "\"members\":[\"kop-0\",\"kop-1\"]",
                                        20000, NULL) > 0,
                      "%s never saw both members", nodes[k].id);
    /* The sharder finished a pass over both members: objects created
     * before that pass would be rebalanced by it (by uid), and moved. */
    ck_assert_msg(kop_test_eventually(sharder_balanced_both, NULL, 20000),
                  "the sharder never finished a pass over both members");
    for (int i = 0; i < N_OBJECTS; i++) {
        char obj[256];
        snprintf(obj, sizeof(obj), "{\"metadata\":{\"name\":\"web-%02d\"},\"spec\":{}}", i);
        json_t *created = api("POST", MYR_PATH, obj, 201);
        const char *owner = label_of(created, OWNER);
        ck_assert_msg(owner && (strcmp(owner, "kop-0") == 0 || strcmp(owner, "kop-1") == 0),
                      "web-%02d created without an owner label", i);
        json_decref(created);
    }
    char first[N_OBJECTS][16], later[N_OBJECTS][16];
    owners_now(first);
    ck_assert_msg(settle(&sa), "did not settle");
    ck_assert_int_gt(counts[0], 0);
    ck_assert_int_gt(counts[1], 0);
    owners_now(later);
    for (int i = 0; i < N_OBJECTS; i++)
        ck_assert_str_eq(first[i], later[i]); /* no sharder relabelling */
}
END_TEST

static Suite *sharding_suite(void)
{
    Suite *s = suite_create("sharding");
    TCase *tc = tcase_create("sharding");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sharding_join_leave_kill);
    tcase_add_test(tc, test_sharding_webhook_labels_at_create);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(sharding_suite());
}
