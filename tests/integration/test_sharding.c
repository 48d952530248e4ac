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
 *  - changes made during all this (a thread patches one MyResource's
 *    replicas every 100 ms across each join, stop and kill) converge:
 *    every Deployment ends with the replicas of its MyResource;
 *  - kubesim's audit log shows no object written by two replicas within
 *    one lease period (check_audit_handoffs): each replica has its own
 *    token (kubesim's --token-auth-file), so the log names the writer. In
 *    a cluster the replicas share a ServiceAccount and the audit log tells
 *    them apart by the bound token's pod name; kubesim has no bound tokens.
 *
 * Time bounds only check which side of a configured duration an event
 * falls on, with seconds of slack; other waits poll with generous
 * deadlines.
 */
#include "kubetest.h"
#include "testutil.h"

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
    char kubeconfig[1100]; /* with the replica's own token */
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

/* fx's kubeconfig with the replica's own token ("<id>-token", a user of
 * kubesim's token file named <id>), into n->kubeconfig. */
static void node_kubeconfig(struct node *n)
{
    char *kc = kop_test_read_file(fx.kubeconfig, NULL);
    ck_assert_ptr_nonnull(kc);
    char *at = strstr(kc, "token: " TOKEN);
    ck_assert_ptr_nonnull(at);
    snprintf(n->kubeconfig, sizeof(n->kubeconfig), "%s/kubeconfig-%s", fx.dir, n->id);
    FILE *f = fopen(n->kubeconfig, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%.*stoken: %s-token%s", (int)(at - kc), kc, n->id, at + strlen("token: " TOKEN));
    ck_assert_int_eq(fclose(f), 0);
    free(kc);
}

/* --leader-election-retry-period of the next replicas started: also the
 * sharder's pass period. Reset by setup. */
static const char *retry_period;

/* cert_dir NULL: --controller-only; else the webhook server too, on a
 * kernel-chosen port (*ret_webhook_port). */
static void start_node_with(struct node *n, int index, const char *cert_dir, long *ret_webhook_port)
{
    memset(n, 0, sizeof(*n));
    snprintf(n->id, sizeof(n->id), "kop-%d", index);
    node_kubeconfig(n);
    struct kop_test_argv a;
    kop_test_kop_argv(&a, n->kubeconfig);
    kop_test_argv_add(&a, cert_dir ? "--webhook-port=0" : "--controller-only", "--sharding",
                      "--leader-election-namespace", LEASE_NS, "--leader-election-lease-duration",
                      "5s", "--leader-election-renew-deadline", "3s",
                      "--leader-election-retry-period", retry_period, "--kube-api-qps", "200",
                      "--kube-api-burst", "400", "--shutdown-timeout", "10s", "--webhook-host",
                      "127.0.0.1", "--shutdown-delay", "0s", NULL);
    if (cert_dir)
        kop_test_argv_add(&a, "--cert-dir", cert_dir, NULL);
    ck_assert_int_eq(setenv("POD_NAME", n->id, 1), 0);
    ck_assert_int_eq(kop_test_spawn(&n->proc, a.v), 0);
    n->running = true;
    ck_assert_msg(kop_test_wait_for(&n->proc, 0, "\"msg\":\"sharding enabled\"", 10000, NULL) > 0,
                  "kop did not enable sharding");
    n->metrics_port = kop_test_logged_port(&n->proc, "serving metrics", 10000);
    if (cert_dir)
        *ret_webhook_port = kop_test_logged_port(&n->proc, "serving webhook", 10000);
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

static char audit_log[1024];

static void setup(void)
{
    kop_test_scratch_init(&fx);
    memset(nodes, 0, sizeof(nodes));
    retry_period = "500ms";
    char tokens[1024];
    snprintf(tokens, sizeof(tokens), "%s/tokens.csv", fx.dir);
    FILE *f = fopen(tokens, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < MAX_NODES; i++)
        fprintf(f, "kop-%d-token,kop-%d,uid-kop-%d,system:serviceaccounts\n", i, i, i);
    ck_assert_int_eq(fclose(f), 0);
    snprintf(audit_log, sizeof(audit_log), "%s/audit.log", fx.dir);
    char *args[] = {"--token-auth-file",
                    tokens,
                    "--audit-log-path",
                    audit_log,
                    "--audit-level",
                    "Request",
                    "--deployment-ready-delay",
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
    /* kubesim authorizes by RBAC: the replicas' users administer */
    json_decref(api("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                    "{\"metadata\":{\"name\":\"kop-replicas\"},\"roleRef\":{\"apiGroup\":"
                    "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":"
                    "\"cluster-admin\"},\"subjects\":[{\"kind\":\"Group\",\"name\":"
                    "\"system:serviceaccounts\"}]}",
                    201));
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

/* A stream of changes: a thread patching one MyResource's spec.replicas
 * every 100 ms (round robin) while replicas join, leave and die. */
struct change_stream {
    pthread_t thread;
    atomic_bool stop;
    int sent, failed; /* read after the join */
};

static void *stream_main(void *arg)
{
    struct change_stream *cs = arg;
    const struct kop_test_http_options o = {
        .ca = fx.ca, .token = TOKEN, .ctype = "application/merge-patch+json", .timeout_s = 10};
    for (int k = 0; !atomic_load(&cs->stop); k++) {
        char url[512], body[128];
        snprintf(url, sizeof(url), "%s" MYR_PATH "/web-%02d", sim.url, k % N_OBJECTS);
        snprintf(body, sizeof(body), "{\"spec\":{\"replicas\":%d}}", 1 + (k / N_OBJECTS) % 4);
        struct kop_test_resp r;
        long code = kop_test_request(&o, "PATCH", url, body, &r);
        kop_test_resp_free(&r);
        cs->sent++;
        cs->failed += code != 200;
        kop_test_sleep_ms(100);
    }
    return NULL;
}

static void stream_start(struct change_stream *cs)
{
    memset(cs, 0, sizeof(*cs));
    atomic_init(&cs->stop, false);
    ck_assert_int_eq(pthread_create(&cs->thread, NULL, stream_main, cs), 0);
}

static void stream_stop(struct change_stream *cs)
{
    atomic_store(&cs->stop, true);
    ck_assert_int_eq(pthread_join(cs->thread, NULL), 0);
    ck_assert_int_gt(cs->sent, 5);
    ck_assert_msg(cs->failed == 0, "%d of %d changes failed", cs->failed, cs->sent);
}

/* web-00 ... web-NN, with an empty spec (the sharder labels them). */
static void create_objects(void)
{
    for (int i = 0; i < N_OBJECTS; i++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"web-%02d\"},\"spec\":{}}", i);
        json_decref(api("POST", MYR_PATH, body, 201));
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

/* ---- kubesim's audit log: who wrote what, when ------------------------------------------ */

enum aev_kind { AEV_RECONCILE, AEV_RELEASE, AEV_LEASE };

/* One successful write by a replica, from the audit log. */
struct aev {
    enum aev_kind kind;
    int who;       /* node index */
    long long t;   /* stageTimestamp, microseconds */
    char name[64]; /* the MyResource (or its children's) name */
    bool lease_released;
    long long held_until; /* AEV_LEASE: renewTime + leaseDurationSeconds */
};

/* RFC 3339 with an optional fraction, UTC ("...Z"), to microseconds; -1
 * when unreadable. */
static long long parse_micro(const char *ts)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = ts ? strptime(ts, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!p)
        return -1;
    long long us = (long long)timegm(&tm) * 1000000;
    if (*p == '.') {
        long long frac = 0, scale = 100000;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += scale > 0 ? (*p - '0') * scale : 0;
        us += frac;
    }
    return *p == 'Z' ? us : -1;
}

static int node_of_user(const char *user)
{
    for (int i = 0; i < MAX_NODES; i++) {
        char id[16];
        snprintf(id, sizeof(id), "kop-%d", i);
        if (user && strcmp(user, id) == 0)
            return i;
    }
    return -1;
}

/* The replicas' successful writes of MyResources' status, their children
 * and their own membership Leases, and their releases of a draining
 * MyResource (a patch removing the drain label without setting an owner:
 * the sharder's own label writes are not the owner's work), in log order.
 * *ret_n events, malloc'd. */
static struct aev *audit_read(size_t *ret_n)
{
    char *log = kop_test_read_file(audit_log, NULL);
    ck_assert_ptr_nonnull(log);
    struct aev *evs = NULL;
    size_t n = 0, cap = 0;
    for (char *line = log, *eol; *line; line = eol + 1) {
        eol = strchr(line, '\n');
        if (!eol)
            break; /* a line kubesim is writing now (the replicas still run) */
        *eol = '\0';
        json_t *ev = json_loads(line, 0, NULL);
        ck_assert_msg(ev != NULL, "audit line is not JSON: %s", line);
        const json_t *ref = json_object_get(ev, "objectRef");
        const char *verb = json_string_value(json_object_get(ev, "verb"));
        const char *res = json_string_value(json_object_get(ref, "resource"));
        const char *name = json_string_value(json_object_get(ref, "name"));
        const char *sub = json_string_value(json_object_get(ref, "subresource"));
        const json_t *req = json_object_get(ev, "requestObject");
        long code = (long)json_integer_value(
            json_object_get(json_object_get(ev, "responseStatus"), "code"));
        int who = node_of_user(
            json_string_value(json_object_get(json_object_get(ev, "user"), "username")));
        bool write = verb && (strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0 ||
                              strcmp(verb, "patch") == 0 || strcmp(verb, "delete") == 0);
        struct aev a = {.who = who, .kind = AEV_RECONCILE};
        bool keep = false;
        if (who >= 0 && write && code >= 200 && code < 300 && res && name) {
            char own_lease[32];
            snprintf(own_lease, sizeof(own_lease), "kop-shard-kop-%d", who);
            const json_t *labels = json_object_get(json_object_get(req, "metadata"), "labels");
            if (strcmp(res, "leases") == 0 && strcmp(name, own_lease) == 0) {
                const json_t *spec = json_object_get(req, "spec");
                const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
                long long renew =
                    parse_micro(json_string_value(json_object_get(spec, "renewTime")));
                ck_assert_msg(renew > 0, "membership Lease write without renewTime: %s", line);
                a.kind = AEV_LEASE;
                a.lease_released = !holder || !*holder;
                a.held_until =
                    renew +
                    json_integer_value(json_object_get(spec, "leaseDurationSeconds")) * 1000000;
                keep = true;
            } else if (strcmp(res, "myresources") == 0 && !sub) {
                a.kind = AEV_RELEASE;
                keep =
                    json_is_null(json_object_get(labels, DRAIN)) && !json_object_get(labels, OWNER);
            } else if ((strcmp(res, "myresources") == 0 && sub && strcmp(sub, "status") == 0) ||
                       strcmp(res, "deployments") == 0 || strcmp(res, "services") == 0) {
                keep = true;
            }
        }
        if (keep) {
            a.t = parse_micro(json_string_value(json_object_get(ev, "stageTimestamp")));
            ck_assert_msg(a.t > 0, "audit line without a stageTimestamp: %s", line);
            snprintf(a.name, sizeof(a.name), "%s", name);
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                evs = realloc(evs, cap * sizeof(*evs));
                ck_assert_ptr_nonnull(evs);
            }
            evs[n++] = a;
        }
        json_decref(ev);
    }
    free(log);
    *ret_n = n;
    return evs;
}

/* How the writes of one object passed from one replica to another. */
struct handoffs {
    int released;       /* the old owner released the draining object */
    int lease_released; /* the old owner released its membership Lease */
    int lease_expired;  /* the old owner's membership Lease ran out */
};

/* No object written by two replicas within one lease period: between a
 * write by replica A and the next write of the same object by replica B,
 * A released the object (the drain protocol), or released its membership
 * Lease (graceful stop), or its membership Lease had run out (renewTime +
 * leaseDurationSeconds of its last write before B's) - all from kubesim's
 * audit log alone. */
static struct handoffs check_audit_handoffs(void)
{
    size_t n;
    struct aev *e = audit_read(&n);
    struct handoffs h = {0};
    for (size_t j = 0; j < n; j++) {
        if (e[j].kind != AEV_RECONCILE)
            continue;
        size_t i = j;
        while (i-- > 0 && !(e[i].kind == AEV_RECONCILE && strcmp(e[i].name, e[j].name) == 0))
            ;
        if (i == (size_t)-1 || e[i].who == e[j].who)
            continue;
        int a = e[i].who;
        bool released = false, lease_released = false, expired = false;
        const struct aev *last_lease = NULL;
        for (size_t k = 0; k < n; k++) {
            if (e[k].who != a || e[k].t > e[j].t)
                continue;
            if (e[k].kind == AEV_LEASE && (!last_lease || e[k].t >= last_lease->t))
                last_lease = &e[k];
            if (e[k].t < e[i].t)
                continue;
            if (e[k].kind == AEV_RELEASE && strcmp(e[k].name, e[j].name) == 0)
                released = true;
            if (e[k].kind == AEV_LEASE && e[k].lease_released)
                lease_released = true;
        }
        expired = last_lease && e[j].t >= last_lease->held_until;
        ck_assert_msg(released || lease_released || expired,
                      "%s written by kop-%d and then by kop-%d %.3f s later without a hand-off: "
                      "no release of the object, kop-%d's membership Lease neither released "
                      "nor expired (held until %.3f s after the second write)",
                      e[j].name, a, e[j].who, (double)(e[j].t - e[i].t) / 1e6, a,
                      last_lease ? (double)(last_lease->held_until - e[j].t) / 1e6 : 0.0);
        h.released += released;
        h.lease_released += !released && lease_released;
        h.lease_expired += !released && !lease_released && expired;
    }
    free(e);
    return h;
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
    create_objects();
    ck_assert_msg(settle(&sa), "two replicas did not settle");
    ck_assert_int_gt(counts[0], 0);
    ck_assert_int_gt(counts[1], 0);
    ck_assert_int_eq(counts[0] + counts[1], N_OBJECTS);

    /* A third replica joins while specs change: objects move to it, each
     * released by its old owner first. */
    char before[N_OBJECTS][16], after[N_OBJECTS][16];
    struct change_stream cs;
    owners_now(before);
    stream_start(&cs);
    start_node(&nodes[2], 2);
    live[2] = true;
    sa.need = 1u << 2;
    kop_test_sleep_ms(3000);
    stream_stop(&cs);
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
    stream_start(&cs);
    stop_node(&nodes[1], SIGTERM);
    live[1] = false;
    sa.need = 0;
    kop_test_sleep_ms(2000);
    stream_stop(&cs);
    bump_replicas(2);
    ck_assert_msg(settle(&sa), "did not settle after SIGTERM");
    ck_assert_int_eq(counts[1], 0);
    ck_assert_int_eq(counts[0] + counts[2], N_OBJECTS);

    /* SIGKILL of kop-2: its objects stay until its membership Lease can
     * have expired (5 s; checked 1.5 s after the kill), then move. */
    int victim = counts[2] > 0 ? 2 : 0, survivor = 2 - victim;
    ck_assert_int_gt(counts[victim], 0);
    int had = counts[victim];
    stream_start(&cs);
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
    long left = LEASE_MS + 1000 - (kop_test_now_ms() - killed);
    if (left > 0)
        kop_test_sleep_ms(left); /* the stream goes on across the move */
    stream_stop(&cs);
    bump_replicas(3);
    ck_assert_msg(settle(&sa), "did not settle after SIGKILL");
    ck_assert_int_eq(counts[survivor], N_OBJECTS);
    ck_assert(kop_test_logged(&nodes[survivor].proc, "\"msg\":\"members changed\""));

    /* kubesim's audit log: every change of writer came after a hand-off,
     * and all three kinds happened (the join, the SIGTERM, the SIGKILL). */
    struct handoffs h = check_audit_handoffs();
    ck_assert_int_ge(h.released, moved);
    ck_assert_int_gt(h.lease_released, 0);
    ck_assert_int_gt(h.lease_expired, 0);
}
END_TEST

/* The largest value of "field":N in the "sharder pass" lines of any
 * running replica whose members include member (NULL: any). */
static long sharder_pass_max(const char *field, const char *member)
{
    long best = -1;
    char key[64];
    snprintf(key, sizeof(key), "\"%s\":", field);
    for (int k = 0; k < MAX_NODES; k++) {
        if (!nodes[k].proc.pid)
            continue;
        char *out = kop_test_output(&nodes[k].proc);
        for (const char *l = strstr(out, "\"msg\":\"sharder pass\""); l;
             l = strstr(l + 1, "\"msg\":\"sharder pass\"")) {
            const char *eol = strchr(l, '\n');
            size_t len = eol ? (size_t)(eol - l) : strlen(l);
            char *line = strndup(l, len);
            ck_assert_ptr_nonnull(line);
            const char *v = strstr(line, key);
            bool has = !member || strstr(line, member);
            if (v && has && atol(v + strlen(key)) > best)
                best = atol(v + strlen(key));
            free(line);
        }
        free(out);
    }
    return best;
}

static bool drains_requested_for_kop2(const void *arg)
{
    (void)arg;
    return sharder_pass_max("drainsRequested", "\"kop-2\"") > 0;
}

/* The sharder is held up between a drain and its move (its lists fail for
 * longer than a lease duration) while specs keep changing: the old owners
 * released their objects long ago, so the sharder does not move them on
 * that old release but asks for the drain again (the old owner might have
 * taken an object up again after its refusal), and moves them after the
 * second release. Before this rule the late move could land while the
 * old owner, its refusal over, was writing the object: kubesim's audit log
 * showed the same object written by two replicas within one lease period. */
START_TEST(test_sharding_late_move_drains_again)
{
    bool live[MAX_NODES] = {true, true, false};
    int counts[MAX_NODES];
    struct settled_arg sa = {live, counts, 1u << 0 | 1u << 1};
    /* Passes 1.5 s apart: time to hold the sharder up between a pass that
     * asks for drains and the one that would move. */
    retry_period = "1500ms";
    start_node(&nodes[0], 0);
    start_node(&nodes[1], 1);
    create_objects();
    ck_assert_msg(settle(&sa), "two replicas did not settle");

    struct change_stream cs;
    stream_start(&cs);
    start_node(&nodes[2], 2);
    live[2] = true;
    ck_assert_msg(kop_test_eventually(drains_requested_for_kop2, NULL, 30000),
                  "the sharder asked for no drain towards kop-2");
    json_decref(api("POST", "/_kubesim/faults",
                    "{\"rules\":[{\"verb\":\"list\",\"code\":500,\"rate\":1,"
                    "\"resource\":\"myresources\"}]}",
                    200));
    kop_test_sleep_ms(LEASE_MS + 2000);
    json_decref(api("POST", "/_kubesim/faults", "{\"rules\":[]}", 200));
    kop_test_sleep_ms(2000);
    stream_stop(&cs);
    sa.need = 1u << 2;
    ck_assert_msg(settle(&sa), "three replicas did not settle");
    ck_assert_msg(sharder_pass_max("drainsRenewed", NULL) > 0,
                  "the sharder moved objects on releases more than a lease duration old");
    check_audit_handoffs();
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
    check_audit_handoffs();
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
    tcase_add_test(tc, test_sharding_late_move_drains_again);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return kop_test_run(sharding_suite());
}
